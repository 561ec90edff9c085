/*
 * sink.c - strata-sink: a Kafka endpoint that accepts Produce and stores
 * nothing.  It is the baseline of the produce benchmark (bench/run.sh):
 * the rate a client reaches against it is the client's own limit on this
 * machine, and stratad's rate divided by it is what the broker's storage
 * path costs.
 *
 * It is built on stratad's own network layer and codec (st_net,
 * st_protocol), with the same number of I/O threads and the same
 * per-connection in-flight limit, so the two differ only in what happens
 * between a decoded Produce and its response.
 *
 * What it answers:
 *   ApiVersions  every API of stratad's table, with stratad's ranges.  The
 *                sink serves only three of them, but a client chooses its
 *                wire format from the whole list: librdkafka enables record
 *                batch v2 only when Produce >= 3 *and* Fetch >= 4 are
 *                offered, and would otherwise send legacy v0 message sets,
 *                which is not the traffic stratad gets
 *   Metadata     one broker, itself, also named controller; every topic
 *                asked for by name exists with --partitions partitions led
 *                by itself; a request for all topics lists none
 *   Produce      every partition: error 0 and a base offset taken from one
 *                counter that grows by the records of each batch;
 *                acks=0 gets no response, as in Kafka
 * Any other request (a producer sends none) closes the connection.
 * Nothing is validated or kept.
 *
 * Threads: the st_net I/O loops call on_request; the only shared mutable
 * state is the offset counter (atomic).  The main thread waits for SIGTERM
 * or SIGINT and stops the loops.
 */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "protocol.h"
#include "st_base.h"

#define SINK_NODE_ID 1

typedef struct sink {
    char host[256]; /* advertised */
    int port;
    int partitions;
    atomic_llong next_offset;
} sink_t;

/* ---- ApiVersions ---------------------------------------------------------- */

static void handle_api_versions(sink_t *s, st_request_t *req) {
    (void)s;
    st_api_versions_resp_t r;
    st_schema_defaults(&st_api_versions_resp_schema, &r);
    if (!req->body) {
        /* A version beyond ours: answer in v0 so the client retries. */
        r.error_code = st_err_wire(ST_E_UNSUPPORTED_VERSION);
        req->hdr.api_version = 0;
    }
    size_t n = 0;
    for (size_t i = 0; st_api_at(i); i++) n += st_api_served(st_api_at(i));
    ST_ARRAY_ALLOC(r.api_keys, &req->arena, n);
    size_t k = 0;
    for (size_t i = 0; st_api_at(i); i++) {
        const st_api_t *api = st_api_at(i);
        if (!st_api_served(api)) continue; /* described for outbound clients only */
        r.api_keys.v[k].api_key = api->key;
        r.api_keys.v[k].min_version = api->min_ver;
        r.api_keys.v[k].max_version = api->max_ver;
        k++;
    }
    st_request_respond(req, &r);
}

/* ---- Metadata ------------------------------------------------------------- */

/* A stable topic id from the name (FNV-1a, twice), so repeated requests
 * agree without the sink keeping a table. */
static st_uuid_t topic_id_of(st_str_t name) {
    st_uuid_t u;
    uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
    for (int i = 0; i < name.len; i++) {
        h1 = (h1 ^ (uint8_t)name.p[i]) * 0x100000001b3ull;
        h2 = (h2 ^ (uint8_t)name.p[i]) * 0x100000001b3ull;
    }
    st_be64_put(u.b, h1);
    st_be64_put(u.b + 8, h2 | 1); /* never the all-zero "no id" */
    return u;
}

static void handle_metadata(sink_t *s, st_request_t *req) {
    st_metadata_req_t *q = req->body;
    st_metadata_resp_t r;
    st_schema_defaults(&st_metadata_resp_schema, &r);
    ST_ARRAY_ALLOC(r.brokers, &req->arena, 1);
    r.brokers.v[0].node_id = SINK_NODE_ID;
    r.brokers.v[0].host = st_str(s->host);
    r.brokers.v[0].port = s->port;
    r.brokers.v[0].rack = ST_STR_NULL;
    r.cluster_id = st_str("strata-sink");
    r.controller_id = SINK_NODE_ID;

    int n = q->topics.n < 0 ? 0 : q->topics.n;
    ST_ARRAY_ALLOC(r.topics, &req->arena, n);
    for (int i = 0; i < n; i++) {
        const st_metadata_req_topic_t *qt = &q->topics.v[i];
        st_metadata_topic_t *t = &r.topics.v[i];
        st_schema_defaults(&st_metadata_topic_schema, t);
        t->name = qt->name;
        if (qt->name.len < 0) {
            t->topic_id = qt->topic_id;
            t->error_code = st_err_wire(ST_E_UNKNOWN_TOPIC_ID);
            ST_ARRAY_ALLOC(t->partitions, &req->arena, 0);
            continue;
        }
        t->topic_id = topic_id_of(qt->name);
        ST_ARRAY_ALLOC(t->partitions, &req->arena, s->partitions);
        for (int k = 0; k < s->partitions; k++) {
            st_metadata_partition_t *p = &t->partitions.v[k];
            st_schema_defaults(&st_metadata_partition_schema, p);
            p->partition_index = k;
            p->leader_id = SINK_NODE_ID;
            p->leader_epoch = 0;
            ST_ARRAY_ALLOC(p->replica_nodes, &req->arena, 1);
            p->replica_nodes.v[0] = SINK_NODE_ID;
            ST_ARRAY_ALLOC(p->isr_nodes, &req->arena, 1);
            p->isr_nodes.v[0] = SINK_NODE_ID;
            ST_ARRAY_ALLOC(p->offline_replicas, &req->arena, 0);
        }
    }
    st_request_respond(req, &r);
}

/* ---- Produce -------------------------------------------------------------- */

/* Records in a run of v2 batches, from each header's lastOffsetDelta:
 *
 *   0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 |
 *   16 magic i8 | 17 crc u32 | 21 attributes i16 | 23 lastOffsetDelta i32 | ...
 *
 * The bytes are not trusted: a length that does not fit ends the walk. */
static int64_t count_records(const uint8_t *p, int32_t len) {
    int64_t n = 0;
    size_t pos = 0, end = len > 0 ? (size_t)len : 0;
    while (end - pos >= 27) {
        int32_t blen = (int32_t)st_be32_get(p + pos + 8);
        int32_t delta = (int32_t)st_be32_get(p + pos + 23);
        if (blen < 15 || (size_t)blen > end - pos - 12 || delta < 0) break;
        n += (int64_t)delta + 1;
        pos += 12 + (size_t)blen;
    }
    return n > 0 ? n : 1;
}

static void handle_produce(sink_t *s, st_request_t *req) {
    st_produce_req_t *q = req->body;
    if (q->acks == 0) {
        st_request_no_response(req);
        return;
    }
    st_produce_resp_t r;
    st_schema_defaults(&st_produce_resp_schema, &r);
    ST_ARRAY_ALLOC(r.responses, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        const st_produce_req_topic_t *qt = &q->topics.v[i];
        st_produce_resp_topic_t *rt = &r.responses.v[i];
        rt->name = qt->name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, qt->partitions.n);
        for (int j = 0; j < qt->partitions.n; j++) {
            const st_produce_req_part_t *qp = &qt->partitions.v[j];
            st_produce_resp_part_t *out = &rt->partitions.v[j];
            st_schema_defaults(&st_produce_resp_part_schema, out);
            out->index = qp->index;
            out->error_code = 0;
            out->base_offset = atomic_fetch_add_explicit(
                &s->next_offset, count_records(qp->records.p, qp->records.len),
                memory_order_relaxed);
            out->log_start_offset = 0;
        }
    }
    st_request_respond(req, &r);
}

static void on_request(st_request_t *req, void *arg) {
    sink_t *s = arg;
    switch (req->api->key) {
    case ST_API_API_VERSIONS: handle_api_versions(s, req); break;
    case ST_API_METADATA: handle_metadata(s, req); break;
    case ST_API_PRODUCE: handle_produce(s, req); break;
    default:
        st_request_close_conn(req, "the sink answers only ApiVersions, Metadata and Produce");
        st_request_no_response(req);
        break;
    }
}

/* ---- main ----------------------------------------------------------------- */

static void usage(FILE *out) {
    fprintf(out,
            "usage: strata-sink [--listen HOST:PORT] [--partitions N] [--threads N]\n"
            "\n"
            "A Kafka endpoint that answers Produce without storing anything: the\n"
            "baseline of bench/run.sh.  Speaks ApiVersions, Metadata and Produce with\n"
            "stratad's codec and network layer.\n"
            "\n"
            "  -l, --listen HOST:PORT  address to listen on; port 0 picks a free one\n"
            "                          (127.0.0.1:0)\n"
            "  -p, --partitions N      partitions every topic has (1)\n"
            "  -t, --threads N         I/O threads, as num.network.threads (2)\n"
            "  -h, --help              this text\n"
            "\n"
            "Prints bootstrap.servers=HOST:PORT on stdout once it listens; stops on\n"
            "SIGTERM or SIGINT.\n");
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv) {
    static sink_t sink;
    const char *listen_addr = "127.0.0.1:0";
    int nthreads = 2;
    sink.partitions = 1;
    static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                         {"partitions", required_argument, NULL, 'p'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "l:p:t:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'l': listen_addr = optarg; break;
        case 'p':
            if (parse_int(optarg, 1, 100000, &sink.partitions)) {
                fprintf(stderr, "strata-sink: --partitions %s: want 1..100000\n", optarg);
                return 2;
            }
            break;
        case 't':
            if (parse_int(optarg, 1, 64, &nthreads)) {
                fprintf(stderr, "strata-sink: --threads %s: want 1..64\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }

    st_listener_spec_t l;
    memset(&l, 0, sizeof l);
    snprintf(l.name, sizeof l.name, "PLAINTEXT");
    const char *colon = strrchr(listen_addr, ':');
    if (!colon || colon == listen_addr || (size_t)(colon - listen_addr) >= sizeof l.host ||
        parse_int(colon + 1, 0, 65535, &l.port)) {
        fprintf(stderr, "strata-sink: --listen %s: want HOST:PORT\n", listen_addr);
        return 2;
    }
    memcpy(l.host, listen_addr, (size_t)(colon - listen_addr));

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* The settings stratad runs with by default (broker/server/main.c). */
    st_net_config_t ncfg = {
        .nthreads = nthreads,
        .max_request_bytes = 104857600,
        .max_inflight_per_conn = 64,
        .idle_timeout_ms = 600000,
        .listeners = &l,
        .nlisteners = 1,
    };
    st_net_hooks_t hooks = {on_request, NULL, NULL, NULL, &sink};
    st_net_t *net;
    char err[512];
    if (st_net_new(&ncfg, &hooks, &net, err, sizeof err)) {
        fprintf(stderr, "strata-sink: %s\n", err);
        return 1;
    }
    sink.port = st_net_bound_port(net, 0);
    snprintf(sink.host, sizeof sink.host, "%s",
             strcmp(l.host, "0.0.0.0") == 0 || strcmp(l.host, "::") == 0 ? "localhost" : l.host);
    st_net_start(net);
    printf("bootstrap.servers=%s:%d\n", sink.host, sink.port);
    fflush(stdout);

    int sig = 0;
    sigwait(&sigs, &sig);
    st_net_stop(net);
    st_net_destroy(net);
    fprintf(stderr, "strata-sink: stopped after %lld records\n",
            (long long)atomic_load(&sink.next_offset));
    return 0;
}

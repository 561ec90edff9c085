/*
 * nc_probe.c - drives st_netclient (broker/net) on a real event loop for
 * test_netclient.py.  It reads one command per line on stdin and answers
 * one line on stdout, so the test can stop, kill and restart stratad
 * between commands:
 *
 *   connect HOST PORT [TIMEOUT_MS [BACKOFF_MS BACKOFF_MAX_MS]]
 *                                    a client on the loop (created there;
 *                                    0: the client's defaults)
 *   pipeline N WINDOW                N requests, ApiVersions v3 and Metadata
 *                                    v12 in turn, WINDOW in flight, sent from
 *                                    the loop thread by the callbacks;
 *                                    answers checked in order and decoded
 *   burst N [1]                      N requests sent from this (another)
 *                                    thread through the client's mailbox
 *                                    (with 1: Metadata v12 only)
 *   mtburst N T                      N requests from T threads at once,
 *                                    waited for (answers in id order)
 *   inflight N                       wait until N requests are in flight
 *   wait                             wait for every request of the burst
 *                                    (elapsed_ms: since it was sent)
 *   stats                            connections made so far
 *   silent TIMEOUT_MS                a listening socket of our own that
 *                                    never answers: one request must time out
 *   close                            destroy the client (pending: CANCELLED)
 *
 * Answers: "ok ..." with counts, or "error ..." (the test fails on it).
 * The client's own log lines (reasons for closing) go to stderr.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

static st_net_t *net;
static st_loop_t *loop;
static st_netclient_t *nc;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* counts of one command's requests (mu) */
static struct {
    int sent, done, ok, lost, refused, timed_out, cancelled, other;
    int bad; /* answers that failed a check */
    int32_t last_corr;
    char bad_why[256];
    char last_why[256];
    /* pipeline */
    int target, window, issued;
    int64_t t0_us, t1_us;
    int64_t rtt_sum_us, rtt_max_us;
    int64_t burst_ms; /* when the burst was sent */
} st;

static void note_bad(const char *fmt, const char *a, int b) {
    if (!st.bad++) snprintf(st.bad_why, sizeof st.bad_why, fmt, a, b);
}

static int pipeline_send_next(void);

/* Served keys that must be there, and keys stratad does not serve that
 * must not be advertised. */
/* served: the client APIs, InitProducerId, OffsetForLeaderEpoch,
 * DescribeProducers, the transaction coordinator's (AddPartitionsToTxn,
 * AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions),
 * WriteTxnMarkers, TxnOffsetCommit, the quorum's and the brokers'
 * lifecycle ones, AlterPartition, SASL (SaslHandshake, SaslAuthenticate),
 * ACLs and SCRAM credentials */
static const int16_t must_have[] = {0,  1,  3,  17, 18, 19, 22, 23, 24, 25, 26, 27, 28, 29,
                                    30, 31, 36, 43, 50, 51, 52, 53, 54, 55, 56, 59, 60, 61,
                                    62, 63, 65, 66};
/* not served: delegation tokens (CreateDelegationToken), client quotas
 * (DescribeClientQuotas, AlterClientQuotas) */
static const int16_t must_not[] = {38, 48, 49};

static void check_body(const st_netclient_resp_t *resp) {
    st_arena_t a;
    st_arena_init(&a, 0);
    void *body = NULL;
    st_err_t e = st_netclient_decode(resp, &a, &body);
    if (e) {
        note_bad("%s response does not decode (%d)", resp->api->name, (int)e);
        goto out;
    }
    if (resp->api->key == ST_API_API_VERSIONS) {
        st_api_versions_resp_t *r = body;
        if (r->error_code) note_bad("%s error %d", "ApiVersions", r->error_code);
        for (size_t i = 0; i < ST_ARRAY_SIZE(must_have); i++) {
            int found = 0;
            for (int k = 0; k < r->api_keys.n; k++) found |= r->api_keys.v[k].api_key == must_have[i];
            if (!found) note_bad("%s does not list key %d", "ApiVersions", must_have[i]);
        }
        for (int k = 0; k < r->api_keys.n; k++)
            for (size_t i = 0; i < ST_ARRAY_SIZE(must_not); i++)
                if (r->api_keys.v[k].api_key == must_not[i])
                    note_bad("%s advertises key %d, which stratad does not serve", "ApiVersions",
                             must_not[i]);
    } else if (resp->api->key == ST_API_METADATA) {
        st_metadata_resp_t *r = body;
        if (r->brokers.n < 1) note_bad("%s lists %d brokers", "Metadata", r->brokers.n);
        else if (r->controller_id != r->brokers.v[0].node_id)
            note_bad("%s: controller %d is not the broker", "Metadata", r->controller_id);
    }
out:
    st_arena_fini(&a);
}

static void on_done(st_netclient_t *c, const st_netclient_resp_t *resp, void *arg) {
    (void)c;
    int pipelined = arg != NULL;
    pthread_mutex_lock(&mu);
    st.done++;
    /* correlation ids are assigned in sending order: answers and failures
     * must come back in that order too */
    if (resp->correlation_id <= st.last_corr)
        note_bad("%s answered out of order (correlation id %d)", resp->api->name,
                 resp->correlation_id);
    st.last_corr = resp->correlation_id;
    switch (resp->err) {
    case ST_OK: st.ok++; break;
    case ST_E_CONNECTION_LOST: st.lost++; break;
    case ST_E_CONNECTION_REFUSED: st.refused++; break;
    case ST_E_REQUEST_TIMED_OUT: st.timed_out++; break;
    case ST_E_CANCELLED: st.cancelled++; break;
    default: st.other++; break;
    }
    if (resp->why) snprintf(st.last_why, sizeof st.last_why, "%s", resp->why);
    if (resp->err == ST_OK) {
        int64_t rtt = st_mono_us() - resp->sent_us;
        st.rtt_sum_us += rtt;
        if (rtt > st.rtt_max_us) st.rtt_max_us = rtt;
    }
    pthread_mutex_unlock(&mu);
    if (resp->err == ST_OK) check_body(resp);
    pthread_mutex_lock(&mu);
    int more = pipelined && st.issued < st.target;
    if (pipelined && st.done == st.target) st.t1_us = st_mono_us();
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    if (more) pipeline_send_next();
}

static int metadata_only;

static int send_one(int i, void *arg) {
    if (i % 2 == 0 && !metadata_only) {
        st_api_versions_req_t r;
        st_schema_defaults(&st_api_versions_req_schema, &r);
        r.client_software_name = st_str("strata-nc-probe");
        r.client_software_version = st_str("1");
        return st_netclient_send(nc, ST_API_API_VERSIONS, 3, &r, 0, on_done, arg);
    }
    st_metadata_req_t m;
    st_schema_defaults(&st_metadata_req_schema, &m);
    return st_netclient_send(nc, ST_API_METADATA, 12, &m, 0, on_done, arg);
}

/* On the loop thread (a callback or a posted job). */
static int pipeline_send_next(void) {
    pthread_mutex_lock(&mu);
    int i = st.issued++;
    pthread_mutex_unlock(&mu);
    return send_one(i, (void *)1);
}

static void pipeline_start(void *arg) {
    (void)arg;
    for (int i = 0; i < st.window && i < st.target; i++) pipeline_send_next();
}

/* mtburst: several threads send at once through the mailbox. */
typedef struct sender {
    pthread_t t;
    int n, base, failed;
} sender_t;

static void *sender_main(void *p) {
    sender_t *s = p;
    for (int i = 0; i < s->n; i++) s->failed += send_one(s->base + i, NULL) != ST_OK;
    return NULL;
}

/* Run fn on the loop thread and wait for it. */
typedef struct sync_job {
    void (*fn)(void *);
    void *arg;
    int done;
} sync_job_t;

static void sync_run(void *p) {
    sync_job_t *j = p;
    j->fn(j->arg);
    pthread_mutex_lock(&mu);
    j->done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void on_loop(void (*fn)(void *), void *arg) {
    sync_job_t j = {fn, arg, 0};
    st_loop_post(loop, sync_run, &j);
    pthread_mutex_lock(&mu);
    while (!j.done) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static st_netclient_config_t cfg;
static char cfg_host[256];
static st_err_t new_err;
static char new_errmsg[256];

static void make_client(void *arg) {
    (void)arg;
    new_err = st_netclient_new(loop, &cfg, &nc, new_errmsg, sizeof new_errmsg);
    pthread_mutex_lock(&mu);
    st.last_corr = 0; /* a new client numbers from 1 again */
    pthread_mutex_unlock(&mu);
}

static void destroy_client(void *arg) {
    (void)arg;
    st_netclient_destroy(nc);
    nc = NULL;
}

static int counters[3];
static void read_counters(void *arg) {
    (void)arg;
    counters[0] = st_netclient_connects(nc);
    counters[1] = st_netclient_inflight(nc);
    counters[2] = st_netclient_waiting(nc);
}

static void reset_counts(void) {
    pthread_mutex_lock(&mu);
    int32_t last = st.last_corr;
    memset(&st, 0, sizeof st);
    st.last_corr = last; /* correlation ids keep growing across commands */
    st.burst_ms = st_mono_ms();
    pthread_mutex_unlock(&mu);
}

static void print_counts(const char *what) {
    pthread_mutex_lock(&mu);
    if (st.bad) printf("error %s: %s\n", what, st.bad_why);
    else
        printf("ok %s done=%d ok=%d lost=%d refused=%d timed_out=%d cancelled=%d other=%d "
               "elapsed_ms=%lld why=[%s]\n",
               what, st.done, st.ok, st.lost, st.refused, st.timed_out, st.cancelled, st.other,
               (long long)(st_mono_ms() - st.burst_ms), st.last_why);
    pthread_mutex_unlock(&mu);
}

static void wait_done(int n) {
    pthread_mutex_lock(&mu);
    while (st.done < n) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    st_net_config_t ncfg = {0};
    ncfg.nthreads = 1;
    ncfg.max_request_bytes = 100 << 20;
    ncfg.max_inflight_per_conn = 64;
    st_net_hooks_t hooks = {0};
    char err[256];
    if (st_net_new(&ncfg, &hooks, &net, err, sizeof err)) {
        printf("error %s\n", err);
        return 1;
    }
    loop = st_net_loop(net, 0);
    st_net_start(net);
    int silent_fd = -1;
    char line[512];
    while (fgets(line, sizeof line, stdin)) {
        char cmd[32] = "";
        long a = 0, b = 0, c = 0;
        char host[256] = "";
        if (sscanf(line, "%31s", cmd) != 1) continue;
        if (!strcmp(cmd, "connect")) {
            long bo = 0, bomax = 0;
            c = 0;
            if (sscanf(line, "%*s %255s %ld %ld %ld %ld", host, &a, &c, &bo, &bomax) < 2) {
                printf("error usage: connect HOST PORT [TIMEOUT_MS [BACKOFF_MS BACKOFF_MAX_MS]]\n");
                continue;
            }
            if (nc) on_loop(destroy_client, NULL);
            snprintf(cfg_host, sizeof cfg_host, "%s", host);
            memset(&cfg, 0, sizeof cfg);
            cfg.host = cfg_host;
            cfg.port = (int)a;
            cfg.client_id = "nc-probe";
            cfg.request_timeout_ms = c;
            cfg.reconnect_backoff_ms = bo;
            cfg.reconnect_backoff_max_ms = bomax;
            on_loop(make_client, NULL);
            if (new_err) printf("error %s\n", new_errmsg);
            else printf("ok connect\n");
        } else if (!strcmp(cmd, "pipeline")) {
            sscanf(line, "%*s %ld %ld", &a, &b);
            reset_counts();
            st.target = (int)a;
            st.window = (int)b;
            st.t0_us = st_mono_us();
            st_loop_post(loop, pipeline_start, NULL);
            wait_done((int)a);
            pthread_mutex_lock(&mu);
            double secs = (double)(st.t1_us - st.t0_us) / 1e6;
            int bad = st.bad;
            if (!bad)
                printf("ok pipeline done=%d ok=%d lost=%d window=%d seconds=%.3f per_second=%.0f "
                       "mean_rtt_us=%lld max_rtt_us=%lld\n",
                       st.done, st.ok, st.lost, st.window, secs, secs > 0 ? st.done / secs : 0.0,
                       st.ok ? (long long)(st.rtt_sum_us / st.ok) : 0LL, (long long)st.rtt_max_us);
            else printf("error pipeline: %s\n", st.bad_why);
            pthread_mutex_unlock(&mu);
        } else if (!strcmp(cmd, "burst")) {
            b = 0;
            sscanf(line, "%*s %ld %ld", &a, &b);
            metadata_only = b == 1;
            reset_counts();
            int refused_now = 0;
            for (long i = 0; i < a; i++) refused_now += send_one((int)i, NULL) != ST_OK;
            pthread_mutex_lock(&mu);
            st.sent = (int)a;
            pthread_mutex_unlock(&mu);
            if (refused_now) printf("error %d sends refused\n", refused_now);
            else printf("ok burst sent=%ld\n", a);
        } else if (!strcmp(cmd, "mtburst")) {
            sscanf(line, "%*s %ld %ld", &a, &b);
            if (b < 1 || b > 64) b = 4;
            metadata_only = 0;
            reset_counts();
            pthread_mutex_lock(&mu);
            st.sent = (int)(a / b * b);
            pthread_mutex_unlock(&mu);
            sender_t snd[64];
            for (long i = 0; i < b; i++) {
                snd[i] = (sender_t){0, (int)(a / b), (int)(i * (a / b)), 0};
                pthread_create(&snd[i].t, NULL, sender_main, &snd[i]);
            }
            int failed = 0;
            for (long i = 0; i < b; i++) {
                pthread_join(snd[i].t, NULL);
                failed += snd[i].failed;
            }
            wait_done(st.sent);
            if (failed) printf("error %d sends refused\n", failed);
            else print_counts("mtburst");
        } else if (!strcmp(cmd, "inflight")) {
            sscanf(line, "%*s %ld", &a);
            /* the loop writes them as soon as it runs: poll its counts,
             * 1 ms apart, for at most 10 s */
            int got = 0;
            for (int i = 0; i < 10000; i++) {
                on_loop(read_counters, NULL);
                got = counters[1];
                if (got >= a) break;
                usleep(1000);
            }
            if (got >= a) printf("ok inflight %d\n", got);
            else printf("error only %d in flight (waiting %d)\n", got, counters[2]);
        } else if (!strcmp(cmd, "wait")) {
            wait_done(st.sent);
            print_counts("wait");
        } else if (!strcmp(cmd, "stats")) {
            on_loop(read_counters, NULL);
            printf("ok stats connects=%d inflight=%d waiting=%d\n", counters[0], counters[1],
                   counters[2]);
        } else if (!strcmp(cmd, "silent")) {
            /* a socket that listens and never answers: the kernel completes
             * the connection from its backlog, nobody reads */
            sscanf(line, "%*s %ld", &a);
            silent_fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in sa = {0};
            sa.sin_family = AF_INET;
            sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            socklen_t sl = sizeof sa;
            if (bind(silent_fd, (struct sockaddr *)&sa, sizeof sa) || listen(silent_fd, 8) ||
                getsockname(silent_fd, (struct sockaddr *)&sa, &sl)) {
                printf("error cannot listen\n");
                continue;
            }
            if (nc) on_loop(destroy_client, NULL);
            memset(&cfg, 0, sizeof cfg);
            snprintf(cfg_host, sizeof cfg_host, "127.0.0.1");
            cfg.host = cfg_host;
            cfg.port = ntohs(sa.sin_port);
            cfg.request_timeout_ms = a;
            on_loop(make_client, NULL);
            reset_counts();
            int64_t t0 = st_mono_ms();
            st.sent = 1;
            send_one(0, NULL);
            wait_done(1);
            int64_t took = st_mono_ms() - t0;
            pthread_mutex_lock(&mu);
            printf("ok silent timed_out=%d other=%d elapsed_ms=%lld why=[%s]\n", st.timed_out,
                   st.done - st.timed_out, (long long)took, st.last_why);
            pthread_mutex_unlock(&mu);
        } else if (!strcmp(cmd, "close")) {
            reset_counts();
            if (nc) on_loop(destroy_client, NULL);
            print_counts("close");
        } else {
            printf("error unknown command %s\n", cmd);
        }
    }
    if (nc) on_loop(destroy_client, NULL);
    st_net_stop(net);
    st_net_destroy(net);
    if (silent_fd >= 0) close(silent_fd);
    return 0;
}

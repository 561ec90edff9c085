/*
 * topics.c - `strata topics`: kafka-topics.sh's verbs over the broker's
 * own codec.  The topics as the bootstrap broker's metadata has them, one
 * topic as its partitions' leaders see it, and the admin requests that
 * make, grow, reconfigure and remove topics.
 *
 *   list              every topic: id, partitions, replication factor,
 *                     internal or not (Metadata, all topics);
 *                     --exclude-internal leaves the internal ones out, here
 *                     and in describe without a topic
 *   describe [TOPIC]  the topic's (or every topic's) id, partition count,
 *                     replication factor and the configs that are not
 *                     defaults (DescribeConfigs, as kafka-topics.sh
 *                     --describe shows "Configs:"); per partition the
 *                     leader, leader epoch, replicas, ISR, offline replicas
 *                     (Metadata v12), eligible leader replicas and the last
 *                     known ELR (DescribeTopicPartitions, KIP-966; "?" from
 *                     a broker that does not serve it), log start offset
 *                     and high watermark
 *                     (ListOffsets -2 / -1); then per partition its
 *                     producers (DescribeProducers, KIP-664, as
 *                     kafka-transactions.sh describe-producers shows them)
 *   describe [TOPIC] --under-replicated-partitions | --under-min-isr-partitions
 *            | --at-min-isr-partitions | --unavailable-partitions
 *                     only the partitions in that state (any of those
 *                     given), from Metadata and the topics' effective
 *                     min.insync.replicas (DescribeConfigs); no leader is
 *                     asked, since a partition without one is what the
 *                     report is for
 *   create TOPIC      CreateTopics v7 (--partitions, --replication-factor,
 *                     --config, --replica-assignment, --if-not-exists)
 *   delete TOPIC      DeleteTopics v6 by name (--if-exists)
 *   alter TOPIC       CreatePartitions v3 (--partitions N, the new count)
 *                     and IncrementalAlterConfigs v1 (--config k=v SET,
 *                     --delete-config k DELETE, as kafka-configs.sh
 *                     --alter sends them); --if-exists
 *
 * The report options follow kafka-topics.sh's TopicCommand: a partition is
 * under-replicated when its ISR is smaller than its replica set, under
 * min ISR when it has no leader or an ISR smaller than the topic's
 * min.insync.replicas, at min ISR when the ISR's size equals it, and
 * unavailable when it has no leader or its leader is not among the live
 * (unfenced) brokers Metadata lists.
 *
 * Metadata, DescribeConfigs and the admin requests go to the bootstrap
 * broker, which may be any broker of a cluster: it forwards CreateTopics,
 * DeleteTopics, CreatePartitions and IncrementalAlterConfigs to the
 * active controller, and an answer of NOT_CONTROLLER (an election; nothing
 * was changed) is asked again for about 10 s.  ListOffsets and
 * DescribeProducers go only to each partition's leader, since only the
 * leader answers them.  A broker that does not list DescribeProducers in
 * its ApiVersions (one older than the idempotent producers) gets no
 * DescribeProducers: its partitions' section says so and the command
 * still succeeds.  A leader that cannot be reached leaves its partitions'
 * offsets and producers unknown ("-") and the command fails after
 * printing everything else.  Uses the broker's own codec through
 * kclient.c, one request at a time; no thread.
 */
#include "cli_int.h"
#include "kclient.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void st_cli_topics_usage(FILE *out) {
    fprintf(out,
            "usage: strata topics --config FILE [--override key=value ...] "
            "[--bootstrap HOST:PORT] <verb> ...\n"
            "  list [--exclude-internal]\n"
            "        every topic: id, partitions, replication factor, internal\n"
            "  describe [TOPIC] [--exclude-internal]\n"
            "        id, partitions, replication factor, configs that are not defaults;\n"
            "        per partition leader, leader epoch, replicas, ISR, offline replicas,\n"
            "        log start offset, high watermark, producers; every topic without TOPIC\n"
            "  describe [TOPIC] [--under-replicated-partitions] [--under-min-isr-partitions]\n"
            "           [--at-min-isr-partitions] [--unavailable-partitions]\n"
            "        only the partitions in one of the states given\n"
            "  create TOPIC [--partitions N] [--replication-factor R] [--config k=v ...]\n"
            "               [--replica-assignment 1:2,2:3,...] [--if-not-exists]\n"
            "        a new topic; -1 (the broker's num.partitions and\n"
            "        default.replication.factor) when not given\n"
            "  delete TOPIC [--if-exists]\n"
            "  alter TOPIC [--partitions N] [--config k=v ...] [--delete-config k ...]\n"
            "              [--if-exists]\n"
            "        raise the partition count to N; set or remove topic configs\n"
            "  After the verb, --config is a topic config; TOPIC may be given as --topic TOPIC.\n");
    st_cli_reassign_usage(out);
    st_cli_restore_usage(out);
}

/* DescribeConfigs' ConfigSource for a value nobody set (KIP-226):
 * kafka-topics.sh shows every config whose source is another one. */
#define CLI_CONFIG_SOURCE_DEFAULT 5
#define CLI_RESOURCE_TOPIC 2

/* What a partition's leader told us, or why it told us nothing. */
enum { PROD_UNKNOWN, PROD_OK, PROD_NOT_SERVED, PROD_ERROR };

typedef struct prow {
    const st_metadata_partition_t *md;
    int64_t log_start;      /* -1: unknown */
    int64_t high_watermark; /* -1: unknown */
    int16_t offsets_err;    /* ListOffsets' error for the partition */
    int prod_state;
    int16_t prod_err;
    const char *prod_msg; /* the answer's error_message, or why the leader said nothing */
    const st_describe_producers_resp_part_t *prod;
    const st_dtp_partition_t *elr; /* DescribeTopicPartitions' answer; NULL: none */
} prow_t;

static const char *wire_name(int16_t code) { return st_err_name(st_err_from_wire(code)); }

static int cmp_topic(const void *a, const void *b) {
    const st_metadata_topic_t *x = a, *y = b;
    int n = x->name.len < y->name.len ? x->name.len : y->name.len;
    int c = n > 0 ? memcmp(x->name.p, y->name.p, (size_t)n) : 0;
    return c ? c : (x->name.len > y->name.len) - (x->name.len < y->name.len);
}

static int cmp_part(const void *a, const void *b) {
    const st_metadata_partition_t *x = a, *y = b;
    return (x->partition_index > y->partition_index) - (x->partition_index < y->partition_index);
}

/* "1,2,3", "-" for none; from the arena. */
static const char *ids(st_arena_t *a, const int32_t *v, int n) {
    if (n <= 0) return "-";
    char *s = st_arena_alloc(a, (size_t)n * 12 + 1), *p = s;
    for (int i = 0; i < n; i++) p += sprintf(p, "%s%d", i ? "," : "", (int)v[i]);
    return s;
}

/* host:port of broker id in the Metadata answer, 0 if it names none (or
 * it does not fit). */
static int broker_addr(const st_metadata_resp_t *md, int32_t id, char *out, size_t n) {
    for (int i = 0; i < md->brokers.n; i++) {
        const st_metadata_broker_t *b = &md->brokers.v[i];
        if (b->node_id != id) continue;
        return snprintf(out, n, "%.*s:%d", ST_STR_FMT(b->host), (int)b->port) < (int)n;
    }
    return 0;
}

/* One request to the bootstrap broker on a connection of its own. */
int st_cli_bootstrap_call(const st_cli_ctx_t *ctx, int16_t key, int16_t version, const void *req,
                          st_arena_t *a, void **resp, char *err, size_t errlen) {
    char why[512];
    int rc = 1;
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec);
    if (st_kclient_open(&kc, ctx->bootstrap, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "no broker reachable at %s (%s)", ctx->bootstrap, why);
        goto out;
    }
    if (st_kclient_call(&kc, key, version, req, a, resp, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "the broker at %s: %s", ctx->bootstrap, why);
        goto out;
    }
    rc = 0;
out:
    st_kclient_close(&kc);
    return rc;
}

/* Metadata v12 from the bootstrap broker: one topic, or all (topic NULL). */
static int metadata(const st_cli_ctx_t *ctx, st_arena_t *a, const char *topic,
                    st_metadata_resp_t **out, char *err, size_t errlen) {
    st_metadata_req_t mq;
    st_schema_defaults(&st_metadata_req_schema, &mq);
    mq.allow_auto_topic_creation = 0; /* describing must not create */
    if (topic) {
        ST_ARRAY_ALLOC(mq.topics, a, 1);
        st_schema_defaults(&st_metadata_req_topic_schema, &mq.topics.v[0]);
        mq.topics.v[0].name = st_str(topic);
    } else {
        mq.topics.v = NULL;
        mq.topics.n = -1;
    }
    return st_cli_bootstrap_call(ctx, ST_API_METADATA, 12, &mq, a, (void **)out, err, errlen);
}

static int list(const st_cli_ctx_t *ctx, int exclude_internal) {
    char err[1024];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_metadata_resp_t *md;
    if (metadata(ctx, &a, NULL, &md, err, sizeof err)) {
        fprintf(stderr, "strata topics: %s\n", err);
        goto out;
    }
    if (md->topics.n > 0)
        qsort(md->topics.v, (size_t)md->topics.n, sizeof *md->topics.v, cmp_topic);
    printf("%-40s %-22s %10s %18s %8s\n", "TOPIC", "TOPIC-ID", "PARTITIONS", "REPLICATION-FACTOR",
           "INTERNAL");
    for (int i = 0; i < md->topics.n; i++) {
        const st_metadata_topic_t *t = &md->topics.v[i];
        if (exclude_internal && t->is_internal) continue;
        char id[23];
        st_uuid_format(&t->topic_id, id);
        /* as kafka-topics.sh: the first partition's replica count */
        int rf = t->partitions.n > 0 ? t->partitions.v[0].replica_nodes.n : 0;
        printf("%-40.*s %-22s %10d %18d %8s%s%s\n", ST_STR_FMT(t->name), id, t->partitions.n, rf,
               t->is_internal ? "yes" : "no", t->error_code ? "  " : "",
               t->error_code ? wire_name(t->error_code) : "");
    }
    rc = ST_CLI_EXIT_OK;
out:
    st_arena_fini(&a);
    return rc;
}

/* DescribeConfigs of the topic, from the bootstrap broker: the entries
 * whose source is not the default, "k=v,k=v" (from the arena). */
static int configs(const st_cli_ctx_t *ctx, st_arena_t *a, const char *topic, const char **out,
                   char *err, size_t errlen) {
    int rc = 1;
    st_describe_configs_req_t q;
    st_schema_defaults(&st_describe_configs_req_schema, &q);
    st_describe_configs_resource_t res;
    st_schema_defaults(&st_describe_configs_resource_schema, &res);
    res.resource_type = CLI_RESOURCE_TOPIC;
    res.resource_name = st_str(topic);
    res.configuration_keys.v = NULL;
    res.configuration_keys.n = -1; /* all */
    q.resources.v = &res;
    q.resources.n = 1;
    st_describe_configs_resp_t *r;
    if (st_cli_bootstrap_call(ctx, ST_API_DESCRIBE_CONFIGS, 4, &q, a, (void **)&r, err, errlen)) goto out;
    if (r->results.n != 1) {
        st_snprintf_marked(err, errlen, "the broker at %s answered DescribeConfigs with %d "
                           "results for one resource", ctx->bootstrap, r->results.n);
        goto out;
    }
    const st_describe_configs_result_t *res_out = &r->results.v[0];
    if (res_out->error_code) {
        st_snprintf_marked(err, errlen, "DescribeConfigs of topic %s: %s%s%.*s", topic,
                           wire_name(res_out->error_code),
                           res_out->error_message.len > 0 ? ": " : "",
                           ST_STR_FMT(res_out->error_message.len > 0 ? res_out->error_message
                                                                     : st_str("")));
        goto out;
    }
    size_t len = 1;
    for (int i = 0; i < res_out->configs.n; i++) {
        const st_describe_configs_entry_t *e = &res_out->configs.v[i];
        len += (size_t)(e->name.len > 0 ? e->name.len : 0) + 2 +
               (size_t)(e->value.len > 6 ? e->value.len : 6); /* null: "(null)" */
    }
    char *s = st_arena_alloc(a, len), *p = s;
    for (int i = 0; i < res_out->configs.n; i++) {
        const st_describe_configs_entry_t *e = &res_out->configs.v[i];
        if (e->config_source == CLI_CONFIG_SOURCE_DEFAULT || e->name.len <= 0) continue;
        /* a sensitive value comes back null */
        p += sprintf(p, "%s%.*s=%.*s", p == s ? "" : ",", ST_STR_FMT(e->name),
                     ST_STR_FMT(e->value));
    }
    *out = s;
    rc = 0;
out:
    return rc;
}

/* ApiVersions v2 (not flexible: any broker answers it in the version asked
 * for), whether DescribeProducers v0 is served. */
static int serves_describe_producers(st_kclient_t *kc, st_arena_t *a, int *served, char *why,
                                     size_t whylen) {
    st_api_versions_req_t q;
    st_schema_defaults(&st_api_versions_req_schema, &q);
    st_api_versions_resp_t *r;
    if (st_kclient_call(kc, ST_API_API_VERSIONS, 2, &q, a, (void **)&r, why, whylen)) return 1;
    if (r->error_code) {
        snprintf(why, whylen, "ApiVersions: %s", wire_name(r->error_code));
        return 1;
    }
    *served = 0;
    for (int i = 0; i < r->api_keys.n; i++)
        if (r->api_keys.v[i].api_key == ST_API_DESCRIBE_PRODUCERS)
            *served = r->api_keys.v[i].min_version <= 0 && r->api_keys.v[i].max_version >= 0;
    return 0;
}

/* ListOffsets at ts (-2 earliest, -1 latest) for the partitions of rows
 * that leader leads; each answer into off (log_start or high_watermark). */
static int offsets(st_kclient_t *kc, st_arena_t *a, const char *topic, prow_t *rows, int nrows,
                   int32_t leader, int64_t ts, char *why, size_t whylen) {
    st_list_offsets_req_t q;
    st_schema_defaults(&st_list_offsets_req_schema, &q);
    q.replica_id = -1;
    st_list_offsets_req_topic_t t;
    st_schema_defaults(&st_list_offsets_req_topic_schema, &t);
    t.name = st_str(topic);
    ST_ARRAY_ALLOC(t.partitions, a, nrows);
    t.partitions.n = 0;
    for (int i = 0; i < nrows; i++) {
        if (rows[i].md->leader_id != leader) continue;
        st_list_offsets_req_part_t *p = &t.partitions.v[t.partitions.n++];
        st_schema_defaults(&st_list_offsets_req_part_schema, p);
        p->partition_index = rows[i].md->partition_index;
        p->current_leader_epoch = rows[i].md->leader_epoch; /* KIP-320: a stale view is refused */
        p->timestamp = ts;
    }
    q.topics.v = &t;
    q.topics.n = 1;
    st_list_offsets_resp_t *r;
    if (st_kclient_call(kc, ST_API_LIST_OFFSETS, 7, &q, a, (void **)&r, why, whylen)) return 1;
    for (int i = 0; i < r->topics.n; i++) {
        if (!st_str_eq(r->topics.v[i].name, topic)) continue;
        for (int k = 0; k < r->topics.v[i].partitions.n; k++) {
            const st_list_offsets_resp_part_t *p = &r->topics.v[i].partitions.v[k];
            for (int j = 0; j < nrows; j++) {
                if (rows[j].md->leader_id != leader ||
                    rows[j].md->partition_index != p->partition_index)
                    continue;
                if (p->error_code) rows[j].offsets_err = p->error_code;
                else if (ts == -2) rows[j].log_start = p->offset;
                else rows[j].high_watermark = p->offset;
            }
        }
    }
    return 0;
}

/* DescribeProducers v0 for the partitions of rows that leader leads. */
static int producers(st_kclient_t *kc, st_arena_t *a, const char *topic, prow_t *rows, int nrows,
                     int32_t leader, char *why, size_t whylen) {
    st_describe_producers_req_t q;
    st_schema_defaults(&st_describe_producers_req_schema, &q);
    st_describe_producers_req_topic_t t;
    st_schema_defaults(&st_describe_producers_req_topic_schema, &t);
    t.name = st_str(topic);
    ST_ARRAY_ALLOC(t.partition_indexes, a, nrows);
    t.partition_indexes.n = 0;
    for (int i = 0; i < nrows; i++)
        if (rows[i].md->leader_id == leader)
            t.partition_indexes.v[t.partition_indexes.n++] = rows[i].md->partition_index;
    q.topics.v = &t;
    q.topics.n = 1;
    st_describe_producers_resp_t *r;
    if (st_kclient_call(kc, ST_API_DESCRIBE_PRODUCERS, 0, &q, a, (void **)&r, why, whylen))
        return 1;
    for (int i = 0; i < r->topics.n; i++) {
        if (!st_str_eq(r->topics.v[i].name, topic)) continue;
        for (int k = 0; k < r->topics.v[i].partitions.n; k++) {
            const st_describe_producers_resp_part_t *p = &r->topics.v[i].partitions.v[k];
            for (int j = 0; j < nrows; j++) {
                if (rows[j].md->leader_id != leader ||
                    rows[j].md->partition_index != p->partition_index)
                    continue;
                rows[j].prod = p;
                rows[j].prod_state = p->error_code ? PROD_ERROR : PROD_OK;
                rows[j].prod_err = p->error_code;
                if (p->error_message.len > 0)
                    rows[j].prod_msg = st_arena_strndup(a, p->error_message.p,
                                                        (size_t)p->error_message.len);
            }
        }
    }
    /* a partition asked for and not answered */
    for (int j = 0; j < nrows; j++)
        if (rows[j].md->leader_id == leader && rows[j].prod_state == PROD_UNKNOWN) {
            rows[j].prod_state = PROD_ERROR;
            rows[j].prod_msg = "not in the answer";
        }
    return 0;
}

/* Offsets and producers from one leader.  Returns 1 with err said when
 * the leader could not be asked. */
static int from_leader(const st_cli_ctx_t *ctx, const st_metadata_resp_t *md, st_arena_t *a,
                       const char *topic,
                       prow_t *rows, int nrows, int32_t leader, char *err, size_t errlen) {
    char addr[300], why[512];
    int rc = 1, served = 0;
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec);
    if (!broker_addr(md, leader, addr, sizeof addr)) {
        st_snprintf_marked(err, errlen, "Metadata names broker %d as a leader but not its "
                           "address", (int)leader);
        goto out;
    }
    if (st_kclient_open(&kc, addr, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "broker %d, a partition leader: %s", (int)leader, why);
        goto out;
    }
    if (offsets(&kc, a, topic, rows, nrows, leader, -2, why, sizeof why) ||
        offsets(&kc, a, topic, rows, nrows, leader, -1, why, sizeof why) ||
        serves_describe_producers(&kc, a, &served, why, sizeof why) ||
        (served && producers(&kc, a, topic, rows, nrows, leader, why, sizeof why))) {
        st_snprintf_marked(err, errlen, "broker %d at %s: %s", (int)leader, addr, why);
        goto out;
    }
    if (!served)
        for (int j = 0; j < nrows; j++)
            if (rows[j].md->leader_id == leader) rows[j].prod_state = PROD_NOT_SERVED;
    rc = 0;
out:
    st_kclient_close(&kc);
    return rc;
}

/* "2026-12-01T21:03:04.123Z (5 s ago)", "-" for no timestamp. */
static void when(char *out, size_t n, int64_t ts_ms, int64_t now_ms) {
    if (ts_ms < 0) {
        snprintf(out, n, "-");
        return;
    }
    time_t secs = (time_t)(ts_ms / 1000);
    struct tm tm;
    char iso[32];
    if (!gmtime_r(&secs, &tm) || !strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(out, n, "%lld", (long long)ts_ms);
        return;
    }
    int64_t ago = now_ms > ts_ms ? (now_ms - ts_ms) / 1000 : 0;
    snprintf(out, n, "%s.%03dZ (%lld s ago)", iso, (int)(ts_ms % 1000), (long long)ago);
}

static void print_producers(const prow_t *r, int64_t now) {
    int32_t leader = r->md->leader_id;
    if (leader < 0) {
        printf("\nPartition %d (leader none):\n  producers: no leader\n",
               (int)r->md->partition_index);
        return;
    }
    printf("\nPartition %d (leader %d):\n", (int)r->md->partition_index, (int)leader);
    switch (r->prod_state) {
    case PROD_NOT_SERVED: printf("  producers: not served by broker %d\n", (int)leader); return;
    case PROD_UNKNOWN: printf("  producers: unknown (broker %d did not answer)\n", (int)leader); return;
    case PROD_ERROR:
        printf("  producers: error %s%s%s\n", r->prod_err ? wire_name(r->prod_err) : "",
               r->prod_err && r->prod_msg ? ": " : "", r->prod_msg ? r->prod_msg : "");
        return;
    default: break;
    }
    if (r->prod->active_producers.n == 0) {
        printf("  producers: none\n");
        return;
    }
    /* kafka-transactions.sh describe-producers' columns, in its order */
    printf("  %-20s %-14s %-17s %-13s %-40s %s\n", "PRODUCER-ID", "PRODUCER-EPOCH",
           "COORDINATOR-EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "CURRENT-TXN-START-OFFSET");
    for (int i = 0; i < r->prod->active_producers.n; i++) {
        const st_producer_state_t *p = &r->prod->active_producers.v[i];
        char ts[96], txn[24] = "-";
        when(ts, sizeof ts, p->last_timestamp, now);
        if (p->current_txn_start_offset >= 0)
            snprintf(txn, sizeof txn, "%lld", (long long)p->current_txn_start_offset);
        printf("  %-20lld %-14d %-17d %-13d %-40s %s\n", (long long)p->producer_id,
               (int)p->producer_epoch, (int)p->coordinator_epoch, (int)p->last_sequence, ts, txn);
    }
}

/* DescribeTopicPartitions of the topic from the bootstrap broker, a page
 * at a time: each row's ELR and last known ELR.  A broker that does not
 * serve it leaves them unknown. */
static void elr_rows(const st_cli_ctx_t *ctx, st_arena_t *a, const char *topic, prow_t *rows, int n) {
    st_dtp_req_t q;
    st_schema_defaults(&st_dtp_req_schema, &q);
    st_dtp_req_topic_t t = {st_str(topic)};
    q.topics.v = &t;
    q.topics.n = 1;
    for (int page = 0; page < 1000; page++) {
        st_dtp_resp_t *r;
        char why[256];
        if (st_cli_bootstrap_call(ctx, ST_API_DESCRIBE_TOPIC_PARTITIONS, 0, &q, a, (void **)&r, why,
                                  sizeof why))
            return;
        for (int i = 0; i < r->topics.n; i++)
            for (int j = 0; j < r->topics.v[i].partitions.n; j++) {
                const st_dtp_partition_t *p = &r->topics.v[i].partitions.v[j];
                for (int k = 0; k < n; k++)
                    if (rows[k].md->partition_index == p->partition_index) rows[k].elr = p;
            }
        if (r->next_cursor.topic_name.len <= 0) return;
        q.cursor = r->next_cursor;
    }
}

/* What one attempt of describe learnt. */
typedef struct view {
    const st_metadata_topic_t *t;
    const char *configs;
    prow_t *rows; /* by partition */
    int nrows;
    char leader_err[1024]; /* the first leader that could not be asked, "" if none */
} view_t;

static int retriable(int16_t code) { return code && st_err_retriable(st_err_from_wire(code)); }

/* The topic in a Metadata answer that asked for it.  Returns 1 with err
 * said when it is not there or has no partitions to show, and *retry set
 * when that may change soon (a topic whose leaders are being elected). */
static int find_topic(const st_cli_ctx_t *ctx, const st_metadata_resp_t *md, const char *topic,
                      const st_metadata_topic_t **out, char *err, size_t errlen, int *retry) {
    const st_metadata_topic_t *t = NULL;
    for (int i = 0; i < md->topics.n && !t; i++)
        if (st_str_eq(md->topics.v[i].name, topic)) t = &md->topics.v[i];
    if (!t || t->error_code == st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION)) {
        st_snprintf_marked(err, errlen, "topic '%s' does not exist (the broker at %s says "
                           "UNKNOWN_TOPIC_OR_PARTITION)", topic, ctx->bootstrap);
        return 1;
    }
    if (t->error_code && t->partitions.n == 0) {
        st_snprintf_marked(err, errlen, "topic '%s': %s", topic, wire_name(t->error_code));
        *retry = retriable(t->error_code);
        return 1;
    }
    *out = t;
    return 0;
}

/* One attempt: Metadata and DescribeConfigs from the bootstrap broker,
 * then each leader.  Returns 1 with err said when the topic cannot be
 * described at all; sets *retry when a partition's answer may change
 * soon (a leader moving or being elected). */
static int look(const st_cli_ctx_t *ctx, st_arena_t *a, const char *topic, view_t *v, char *err,
                size_t errlen, int *retry) {
    st_metadata_resp_t *md;
    memset(v, 0, sizeof *v);
    *retry = 0;
    if (metadata(ctx, a, topic, &md, err, errlen)) return 1;
    if (find_topic(ctx, md, topic, &v->t, err, errlen, retry)) return 1;
    if (configs(ctx, a, topic, &v->configs, err, errlen)) return 1;

    v->nrows = v->t->partitions.n;
    st_metadata_partition_t *parts = v->t->partitions.v;
    qsort(parts, (size_t)v->nrows, sizeof *parts, cmp_part);
    v->rows = st_arena_alloc(a, sizeof *v->rows * (size_t)(v->nrows ? v->nrows : 1));
    for (int i = 0; i < v->nrows; i++) {
        v->rows[i].md = &parts[i];
        v->rows[i].log_start = v->rows[i].high_watermark = -1;
    }
    elr_rows(ctx, a, topic, v->rows, v->nrows);
    /* each leader once */
    for (int i = 0; i < v->nrows; i++) {
        int32_t leader = v->rows[i].md->leader_id;
        int seen = leader < 0;
        for (int j = 0; j < i && !seen; j++) seen = v->rows[j].md->leader_id == leader;
        if (seen) continue;
        char why[1024];
        if (from_leader(ctx, md, a, topic, v->rows, v->nrows, leader, why, sizeof why) &&
            !v->leader_err[0])
            snprintf(v->leader_err, sizeof v->leader_err, "%s", why);
    }
    for (int i = 0; i < v->nrows; i++)
        *retry |= retriable(v->rows[i].md->error_code) || retriable(v->rows[i].offsets_err) ||
                  (v->rows[i].prod_state == PROD_ERROR && retriable(v->rows[i].prod_err));
    return 0;
}

static void print_view(st_arena_t *a, const char *topic, const view_t *v) {
    char id[23];
    st_uuid_format(&v->t->topic_id, id);
    printf("Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
           topic, id, v->nrows, v->nrows > 0 ? v->rows[0].md->replica_nodes.n : 0, v->configs);
    printf("\n%-9s %6s %12s %-16s %-16s %-16s %-16s %-16s %16s %14s\n", "PARTITION", "LEADER",
           "LEADER-EPOCH", "REPLICAS", "ISR", "OFFLINE", "ELR", "LAST-KNOWN-ELR", "LOG-START-OFFSET",
           "HIGH-WATERMARK");
    for (int i = 0; i < v->nrows; i++) {
        const prow_t *r = &v->rows[i];
        char start[24] = "-", hw[24] = "-";
        if (r->log_start >= 0) snprintf(start, sizeof start, "%lld", (long long)r->log_start);
        if (r->high_watermark >= 0)
            snprintf(hw, sizeof hw, "%lld", (long long)r->high_watermark);
        char leader[16] = "none"; /* kafka-topics.sh's word for no leader */
        if (r->md->leader_id >= 0) snprintf(leader, sizeof leader, "%d", (int)r->md->leader_id);
        int16_t perr = r->md->error_code ? r->md->error_code : r->offsets_err;
        const char *elr = r->elr ? ids(a, r->elr->eligible_leader_replicas.v,
                                       r->elr->eligible_leader_replicas.n)
                                 : "?";
        const char *lk = r->elr ? ids(a, r->elr->last_known_elr.v, r->elr->last_known_elr.n) : "?";
        printf("%-9d %6s %12d %-16s %-16s %-16s %-16s %-16s %16s %14s%s%s\n",
               (int)r->md->partition_index, leader, (int)r->md->leader_epoch,
               ids(a, r->md->replica_nodes.v, r->md->replica_nodes.n),
               ids(a, r->md->isr_nodes.v, r->md->isr_nodes.n),
               ids(a, r->md->offline_replicas.v, r->md->offline_replicas.n), elr, lk, start, hw,
               perr ? "  " : "", perr ? wire_name(perr) : "");
    }
    int64_t now = st_now_ms();
    for (int i = 0; i < v->nrows; i++) print_producers(&v->rows[i], now);
}

/* Asks again, for about 5 s, while a partition is between leaders (as
 * Kafka's admin client retries retriable errors); then shows what the
 * last attempt learnt. */
static int describe(const st_cli_ctx_t *ctx, const char *topic) {
    char err[1024];
    int rc = ST_CLI_EXIT_FAIL, retry = 0;
    st_arena_t a;
    view_t v;
    for (int attempt = 1;; attempt++) {
        st_arena_init(&a, 1 << 16);
        int failed = look(ctx, &a, topic, &v, err, sizeof err, &retry);
        if (!retry || attempt == 20) {
            if (failed) goto fail;
            break;
        }
        st_arena_fini(&a);
        usleep(250 * 1000);
    }
    print_view(&a, topic, &v);
    if (v.leader_err[0]) {
        /* printed what is known; what a leader should have said is not */
        snprintf(err, sizeof err, "%s", v.leader_err);
        goto fail;
    }
    rc = ST_CLI_EXIT_OK;
    goto out;
fail:
    fflush(stdout);
    fprintf(stderr, "strata topics: %s\n", err);
out:
    st_arena_fini(&a);
    return rc;
}

int st_cli_topic_offsets(const st_cli_ctx_t *ctx, const char *topic, int32_t n, int64_t *start,
                         int64_t *end, st_uuid_t *id, char *err, size_t errlen) {
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    view_t v;
    int retry;
    for (int32_t i = 0; i < n; i++) start[i] = end[i] = -1;
    int rc = look(ctx, &a, topic, &v, err, errlen, &retry);
    if (!rc) {
        *id = v.t->topic_id;
        for (int i = 0; i < v.nrows; i++) {
            int32_t k = v.rows[i].md->partition_index;
            if (k < 0 || k >= n) continue;
            start[k] = v.rows[i].log_start;
            end[k] = v.rows[i].high_watermark;
        }
    }
    st_arena_fini(&a);
    return rc;
}

/* Every topic of the bootstrap broker's Metadata, by name, as describe
 * shows one; each asked on its own (and retried on its own). */
static int describe_all(const st_cli_ctx_t *ctx, int exclude_internal) {
    char err[1024];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_metadata_resp_t *md;
    if (metadata(ctx, &a, NULL, &md, err, sizeof err)) {
        fprintf(stderr, "strata topics: %s\n", err);
        goto out;
    }
    if (md->topics.n > 0)
        qsort(md->topics.v, (size_t)md->topics.n, sizeof *md->topics.v, cmp_topic);
    rc = ST_CLI_EXIT_OK;
    int shown = 0;
    for (int i = 0; i < md->topics.n; i++) {
        const st_metadata_topic_t *t = &md->topics.v[i];
        if (t->name.len <= 0 || (exclude_internal && t->is_internal)) continue;
        if (shown++) printf("\n");
        if (describe(ctx, st_arena_strndup(&a, t->name.p, (size_t)t->name.len)) != ST_CLI_EXIT_OK)
            rc = ST_CLI_EXIT_FAIL;
    }
out:
    st_arena_fini(&a);
    return rc;
}

/* ---- describe's report options ----------------------------------------- */

/* The partition states kafka-topics.sh --describe can be asked to show
 * (TopicCommand's PartitionDescription). */
enum {
    REPORT_UNDER_REPLICATED = 1u << 0, /* ISR smaller than the replicas */
    REPORT_UNDER_MIN_ISR = 1u << 1,    /* no leader, or ISR < min.insync.replicas */
    REPORT_AT_MIN_ISR = 1u << 2,       /* ISR == min.insync.replicas */
    REPORT_UNAVAILABLE = 1u << 3       /* no leader, or a leader that is not live */
};

#define CLI_MIN_ISR "min.insync.replicas"

static int same_name(st_str_t a, st_str_t b) {
    return a.len >= 0 && a.len == b.len && (a.len == 0 || !memcmp(a.p, b.p, (size_t)a.len));
}

/* The effective min.insync.replicas of each topic (the topic's override,
 * else the broker's setting, else the default), from one DescribeConfigs
 * to the bootstrap broker; -1 for a topic it does not know (one deleted
 * since the Metadata answer). */
static int min_isrs(const st_cli_ctx_t *ctx, st_arena_t *a, const st_metadata_topic_t **topics,
                    int n, int32_t *out, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) out[i] = -1;
    if (n == 0) return 0;
    st_describe_configs_req_t q;
    st_schema_defaults(&st_describe_configs_req_schema, &q);
    ST_ARRAY_ALLOC(q.resources, a, n);
    st_str_t *key = st_arena_alloc(a, sizeof *key);
    *key = st_str(CLI_MIN_ISR);
    for (int i = 0; i < n; i++) {
        st_describe_configs_resource_t *res = &q.resources.v[i];
        st_schema_defaults(&st_describe_configs_resource_schema, res);
        res->resource_type = CLI_RESOURCE_TOPIC;
        res->resource_name = topics[i]->name;
        res->configuration_keys.v = key;
        res->configuration_keys.n = 1;
    }
    st_describe_configs_resp_t *r;
    if (st_cli_bootstrap_call(ctx, ST_API_DESCRIBE_CONFIGS, 4, &q, a, (void **)&r, err, errlen)) return 1;
    for (int k = 0; k < r->results.n; k++) {
        const st_describe_configs_result_t *res = &r->results.v[k];
        /* answers come in the order asked; look further only if not */
        int i = k < n && same_name(topics[k]->name, res->resource_name) ? k : 0;
        while (i < n && !same_name(topics[i]->name, res->resource_name)) i++;
        if (i == n || res->error_code == st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION)) continue;
        if (res->error_code) {
            st_snprintf_marked(err, errlen, "DescribeConfigs of topic %.*s: %s%s%.*s",
                               ST_STR_FMT(res->resource_name), wire_name(res->error_code),
                               res->error_message.len > 0 ? ": " : "",
                               ST_STR_FMT(res->error_message.len > 0 ? res->error_message
                                                                     : st_str("")));
            return 1;
        }
        for (int c = 0; c < res->configs.n; c++) {
            const st_describe_configs_entry_t *e = &res->configs.v[c];
            if (!st_str_eq(e->name, CLI_MIN_ISR) || e->value.len <= 0 || e->value.len > 10)
                continue;
            char v[12], *end;
            memcpy(v, e->value.p, (size_t)e->value.len);
            v[e->value.len] = '\0';
            long m = strtol(v, &end, 10);
            if (!*end && m >= 0 && m <= INT32_MAX) out[i] = (int32_t)m;
        }
    }
    return 0;
}

/* Which REPORT_* states the partition is in; min_isr -1: unknown. */
static unsigned partition_report(const st_metadata_resp_t *md, const st_metadata_partition_t *p,
                                 int32_t min_isr) {
    unsigned s = 0;
    int isr = ST_MAX(p->isr_nodes.n, 0), replicas = ST_MAX(p->replica_nodes.n, 0);
    int has_leader = p->leader_id >= 0, live = 0;
    for (int b = 0; b < md->brokers.n && has_leader && !live; b++)
        live = md->brokers.v[b].node_id == p->leader_id; /* Metadata lists unfenced brokers */
    if (isr < replicas) s |= REPORT_UNDER_REPLICATED;
    if (!has_leader || (min_isr >= 0 && isr < min_isr)) s |= REPORT_UNDER_MIN_ISR;
    if (min_isr >= 0 && isr == min_isr) s |= REPORT_AT_MIN_ISR;
    if (!has_leader || !live) s |= REPORT_UNAVAILABLE;
    return s;
}

/* describe with report options: the partitions of the topic (of every
 * topic when topic is NULL) in one of the states of want, from Metadata
 * and DescribeConfigs only.  A topic whose leaders are being elected is
 * asked again for about 5 s as describe does; a partition without a
 * leader is shown as it is, since it is what the report is for. */
static int report(const st_cli_ctx_t *ctx, const char *topic, unsigned want,
                  int exclude_internal) {
    char err[1024];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_metadata_resp_t *md = NULL;
    const st_metadata_topic_t *one = NULL;
    for (int attempt = 1;; attempt++) {
        int retry = 0;
        st_arena_init(&a, 1 << 16);
        if (!metadata(ctx, &a, topic, &md, err, sizeof err) &&
            (!topic || !find_topic(ctx, md, topic, &one, err, sizeof err, &retry)))
            break;
        if (!retry || attempt == 20) goto fail;
        st_arena_fini(&a);
        usleep(250 * 1000);
    }
    const st_metadata_topic_t **ts = st_arena_alloc(&a, sizeof *ts * (size_t)(md->topics.n + 1));
    int n = 0;
    if (one) {
        ts[n++] = one;
    } else {
        if (md->topics.n > 0)
            qsort(md->topics.v, (size_t)md->topics.n, sizeof *md->topics.v, cmp_topic);
        for (int i = 0; i < md->topics.n; i++) {
            const st_metadata_topic_t *t = &md->topics.v[i];
            if (t->name.len > 0 && t->partitions.n > 0 && !(exclude_internal && t->is_internal))
                ts[n++] = t;
        }
    }
    int32_t *min = st_arena_alloc(&a, sizeof *min * (size_t)(n + 1));
    if (min_isrs(ctx, &a, ts, n, min, err, sizeof err)) goto fail;
    printf("%-40s %-9s %6s %12s %-16s %-16s %-16s %7s\n", "TOPIC", "PARTITION", "LEADER",
           "LEADER-EPOCH", "REPLICAS", "ISR", "OFFLINE", "MIN-ISR");
    for (int i = 0; i < n; i++) {
        const st_metadata_topic_t *t = ts[i];
        if (t->partitions.n > 0)
            qsort(t->partitions.v, (size_t)t->partitions.n, sizeof *t->partitions.v, cmp_part);
        for (int k = 0; k < t->partitions.n; k++) {
            const st_metadata_partition_t *p = &t->partitions.v[k];
            if (!(partition_report(md, p, min[i]) & want)) continue;
            char leader[16] = "none", mi[16] = "-";
            if (p->leader_id >= 0) snprintf(leader, sizeof leader, "%d", (int)p->leader_id);
            if (min[i] >= 0) snprintf(mi, sizeof mi, "%d", (int)min[i]);
            printf("%-40.*s %-9d %6s %12d %-16s %-16s %-16s %7s%s%s\n", ST_STR_FMT(t->name),
                   (int)p->partition_index, leader, (int)p->leader_epoch,
                   ids(&a, p->replica_nodes.v, p->replica_nodes.n),
                   ids(&a, p->isr_nodes.v, p->isr_nodes.n),
                   ids(&a, p->offline_replicas.v, p->offline_replicas.n), mi,
                   p->error_code ? "  " : "", p->error_code ? wire_name(p->error_code) : "");
        }
    }
    rc = ST_CLI_EXIT_OK;
    goto out;
fail:
    fflush(stdout);
    fprintf(stderr, "strata topics: %s\n", err);
out:
    st_arena_fini(&a);
    return rc;
}

/* ---- create, delete, alter ------------------------------------------- */

/* How long the controller may take over a change; below kclient's 30 s
 * wait for an answer, so a slow change is the broker's REQUEST_TIMED_OUT
 * rather than a connection given up on. */
#define CLI_ADMIN_TIMEOUT_MS 25000
/* NOT_CONTROLLER answers asked again, 250 ms apart: about 10 s. */
#define CLI_ADMIN_TRIES 40
/* IncrementalAlterConfigs' OpType (KIP-339). */
#define CLI_CONFIG_OP_SET 0
#define CLI_CONFIG_OP_DELETE 1

/* What the words after the verb said. */
typedef struct opts {
    unsigned verb; /* VERB_* */
    const char *topic;
    int32_t partitions;         /* -1: not given */
    int32_t replication_factor; /* -1: not given */
    const char *replica_assignment;
    const char **configs; /* "k=v", each an argv word; argc long */
    int nconfigs;
    const char **delete_configs; /* "k" or "k1,k2"; argc long */
    int ndelete_configs;
    int ndelete_keys; /* keys in delete_configs */
    int if_exists, if_not_exists, exclude_internal;
    unsigned report; /* REPORT_* */
} opts_t;

/* Whether to ask again: the broker found no active controller to pass the
 * request to (an election under way), so nothing was changed. */
static int again(int16_t code, int attempt) {
    if (code != st_err_wire(ST_E_NOT_CONTROLLER) || attempt >= CLI_ADMIN_TRIES) return 0;
    usleep(250 * 1000);
    return 1;
}

/* The broker's refusal: its error name and message, on one line. */
static void refused(const char *what, const char *topic, int16_t code, st_str_t msg) {
    fprintf(stderr, "strata topics: %s topic '%s': %s%s%.*s\n", what, topic, wire_name(code),
            msg.len > 0 ? ": " : "", ST_STR_FMT(msg.len > 0 ? msg : st_str("")));
}

/* A decimal number in [lo, hi] and nothing else (no sign, no spaces). */
static int take_number(const char *s, int64_t lo, int64_t hi, int32_t *out) {
    int64_t v = 0;
    if (!*s) return 1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return 1;
        v = v * 10 + (*s - '0');
        if (v > hi) return 1;
    }
    if (v < lo) return 1;
    *out = (int32_t)v;
    return 0;
}

/* --replica-assignment "1:2,2:3" (kafka-topics.sh's form): partition k's
 * replicas are the k-th comma-separated group, its broker ids separated
 * by colons, the first the preferred leader.  Returns 1 with err said when
 * the text is not that; the broker checks the ids themselves. */
static int parse_assignment(st_arena_t *a, const char *s, st_create_topics_topic_t *t, char *err,
                            size_t errlen) {
    int np = 1;
    for (const char *c = s; *c; c++) np += *c == ',';
    ST_ARRAY_ALLOC(t->assignments, a, np);
    const char *p = s;
    for (int k = 0; k < np; k++) {
        st_create_topics_assignment_t *as = &t->assignments.v[k];
        st_schema_defaults(&st_create_topics_assignment_schema, as);
        as->partition_index = k;
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        int nr = 1;
        for (const char *c = p; c < end; c++) nr += *c == ':';
        ST_ARRAY_ALLOC(as->broker_ids, a, nr);
        for (int r = 0; r < nr; r++) {
            int64_t v = 0;
            const char *d = p;
            while (p < end && *p >= '0' && *p <= '9' && v <= INT32_MAX) v = v * 10 + (*p++ - '0');
            if (p == d || v > INT32_MAX || (p < end && *p != ':') || (p == end && r < nr - 1)) {
                st_snprintf_marked(err, errlen, "--replica-assignment '%s': partition %d's "
                                   "replicas are not broker ids separated by ':' (as in "
                                   "1:2,2:3)", s, k);
                return 1;
            }
            as->broker_ids.v[r] = (int32_t)v;
            if (p < end) p++; /* the ':' */
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

int st_cli_create_topic(const st_cli_ctx_t *ctx, st_arena_t *a, st_create_topics_topic_t *t,
                        int validate_only, const st_create_topics_result_t **res, char *err,
                        size_t errlen) {
    st_create_topics_req_t q;
    st_schema_defaults(&st_create_topics_req_schema, &q);
    q.topics.v = t;
    q.topics.n = 1;
    q.timeout_ms = CLI_ADMIN_TIMEOUT_MS;
    q.validate_only = (int8_t)validate_only;
    for (int attempt = 1;; attempt++) {
        st_create_topics_resp_t *r;
        if (st_cli_bootstrap_call(ctx, ST_API_CREATE_TOPICS, 7, &q, a, (void **)&r, err, errlen))
            return 1;
        if (r->topics.n != 1) {
            st_snprintf_marked(err, errlen, "the broker at %s answered CreateTopics with %d "
                               "results for one topic", ctx->bootstrap, (int)r->topics.n);
            return 1;
        }
        *res = &r->topics.v[0];
        if (!again((*res)->error_code, attempt)) return 0;
    }
}

static int create(const st_cli_ctx_t *ctx, const opts_t *o) {
    char err[1024];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_create_topics_topic_t t;
    st_schema_defaults(&st_create_topics_topic_schema, &t);
    t.name = st_str(o->topic);
    t.num_partitions = o->partitions;
    t.replication_factor = (int16_t)o->replication_factor;
    ST_ARRAY_ALLOC(t.assignments, &a, 0);
    if (o->replica_assignment &&
        parse_assignment(&a, o->replica_assignment, &t, err, sizeof err)) {
        fprintf(stderr, "strata topics: %s\n", err);
        st_cli_topics_usage(stderr);
        rc = ST_CLI_EXIT_USAGE;
        goto out;
    }
    ST_ARRAY_ALLOC(t.configs, &a, o->nconfigs);
    for (int i = 0; i < o->nconfigs; i++) {
        const char *eq = strchr(o->configs[i], '='); /* parse() saw it */
        st_schema_defaults(&st_config_kv_schema, &t.configs.v[i]);
        t.configs.v[i].name = (st_str_t){o->configs[i], (int32_t)(eq - o->configs[i])};
        t.configs.v[i].value = st_str(eq + 1);
    }
    const st_create_topics_result_t *res;
    if (st_cli_create_topic(ctx, &a, &t, 0, &res, err, sizeof err)) {
        fprintf(stderr, "strata topics: %s\n", err);
        goto out;
    }
    if (res->error_code == st_err_wire(ST_E_TOPIC_ALREADY_EXISTS) && o->if_not_exists) {
        rc = ST_CLI_EXIT_OK;
        goto out;
    }
    if (res->error_code) {
        refused("cannot create", o->topic, res->error_code, res->error_message);
        goto out;
    }
    printf("Created topic %s.\n", o->topic);
    rc = ST_CLI_EXIT_OK;
out:
    st_arena_fini(&a);
    return rc;
}

static int delete_topic(const st_cli_ctx_t *ctx, const opts_t *o) {
    char err[1024];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_delete_topics_req_t q;
    st_schema_defaults(&st_delete_topics_req_schema, &q);
    st_delete_topics_state_t t; /* by name: the id stays zero */
    st_schema_defaults(&st_delete_topics_state_schema, &t);
    t.name = st_str(o->topic);
    q.topics.v = &t;
    q.topics.n = 1;
    q.timeout_ms = CLI_ADMIN_TIMEOUT_MS;
    const st_delete_topics_result_t *res;
    for (int attempt = 1;; attempt++) {
        st_delete_topics_resp_t *r;
        if (st_cli_bootstrap_call(ctx, ST_API_DELETE_TOPICS, 6, &q, &a, (void **)&r, err, sizeof err)) {
            fprintf(stderr, "strata topics: %s\n", err);
            goto out;
        }
        if (r->responses.n != 1) {
            fprintf(stderr, "strata topics: the broker at %s answered DeleteTopics with %d "
                    "results for one topic\n", ctx->bootstrap, (int)r->responses.n);
            goto out;
        }
        res = &r->responses.v[0];
        if (!again(res->error_code, attempt)) break;
    }
    if (res->error_code == st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION) && o->if_exists) {
        rc = ST_CLI_EXIT_OK;
        goto out;
    }
    if (res->error_code) {
        refused("cannot delete", o->topic, res->error_code, res->error_message);
        goto out;
    }
    printf("Deleted topic %s.\n", o->topic);
    rc = ST_CLI_EXIT_OK;
out:
    st_arena_fini(&a);
    return rc;
}

/* CreatePartitions: the topic's partition count raised to o->partitions,
 * the broker placing the new replicas.  Returns 1 with err said when no
 * answer came; else the answer's error in *code and *msg. */
static int grow(const st_cli_ctx_t *ctx, st_arena_t *a, const opts_t *o, int validate_only,
                int16_t *code, st_str_t *msg, char *err, size_t errlen) {
    st_create_partitions_req_t q;
    st_schema_defaults(&st_create_partitions_req_schema, &q);
    st_create_partitions_topic_t t;
    st_schema_defaults(&st_create_partitions_topic_schema, &t);
    t.name = st_str(o->topic);
    t.count = o->partitions;
    t.assignments.v = NULL;
    t.assignments.n = -1; /* null: the broker places them */
    q.topics.v = &t;
    q.topics.n = 1;
    q.timeout_ms = CLI_ADMIN_TIMEOUT_MS;
    q.validate_only = (int8_t)validate_only;
    for (int attempt = 1;; attempt++) {
        st_create_partitions_resp_t *r;
        if (st_cli_bootstrap_call(ctx, ST_API_CREATE_PARTITIONS, 3, &q, a, (void **)&r, err, errlen))
            return 1;
        if (r->results.n != 1) {
            st_snprintf_marked(err, errlen, "the broker at %s answered CreatePartitions with %d "
                               "results for one topic", ctx->bootstrap, (int)r->results.n);
            return 1;
        }
        *code = r->results.v[0].error_code;
        *msg = r->results.v[0].error_message;
        if (!again(*code, attempt)) return 0;
    }
}

/* IncrementalAlterConfigs: each --config SET, each --delete-config key
 * DELETE, in one request (as kafka-configs.sh --alter sends them). */
static int reconfigure(const st_cli_ctx_t *ctx, st_arena_t *a, const opts_t *o,
                       int validate_only, int16_t *code, st_str_t *msg, char *err,
                       size_t errlen) {
    st_incr_alter_configs_req_t q;
    st_schema_defaults(&st_incr_alter_configs_req_schema, &q);
    st_incr_alter_configs_resource_t res;
    st_schema_defaults(&st_incr_alter_configs_resource_schema, &res);
    res.resource_type = CLI_RESOURCE_TOPIC;
    res.resource_name = st_str(o->topic);
    ST_ARRAY_ALLOC(res.configs, a, o->nconfigs + o->ndelete_keys);
    int n = 0;
    for (int i = 0; i < o->nconfigs; i++) {
        const char *eq = strchr(o->configs[i], '='); /* parse() saw it */
        st_incr_alter_config_t *c = &res.configs.v[n++];
        st_schema_defaults(&st_incr_alter_config_schema, c);
        c->name = (st_str_t){o->configs[i], (int32_t)(eq - o->configs[i])};
        c->config_operation = CLI_CONFIG_OP_SET;
        c->value = st_str(eq + 1);
    }
    for (int i = 0; i < o->ndelete_configs; i++)
        for (const char *k = o->delete_configs[i]; *k;) {
            const char *end = strchr(k, ',');
            if (!end) end = k + strlen(k);
            st_incr_alter_config_t *c = &res.configs.v[n++];
            st_schema_defaults(&st_incr_alter_config_schema, c);
            c->name = (st_str_t){k, (int32_t)(end - k)};
            c->config_operation = CLI_CONFIG_OP_DELETE;
            c->value = ST_STR_NULL;
            k = *end ? end + 1 : end;
        }
    res.configs.n = n;
    q.resources.v = &res;
    q.resources.n = 1;
    q.validate_only = (int8_t)validate_only;
    for (int attempt = 1;; attempt++) {
        st_alter_configs_resp_t *r;
        if (st_cli_bootstrap_call(ctx, ST_API_INCREMENTAL_ALTER_CONFIGS, 1, &q, a, (void **)&r, err,
                           errlen))
            return 1;
        if (r->responses.n != 1) {
            st_snprintf_marked(err, errlen, "the broker at %s answered IncrementalAlterConfigs "
                               "with %d results for one topic", ctx->bootstrap,
                               (int)r->responses.n);
            return 1;
        }
        *code = r->responses.v[0].error_code;
        *msg = r->responses.v[0].error_message;
        if (!again(*code, attempt)) return 0;
    }
}

/* With both a partition count and configs, each is first sent with
 * validate_only, so that a refusal of either leaves the topic as it was
 * (short of a change made by someone else in between). */
static int alter(const st_cli_ctx_t *ctx, const opts_t *o) {
    char err[1024];
    int rc = ST_CLI_EXIT_FAIL;
    int grows = o->partitions > 0, configures = o->nconfigs + o->ndelete_keys > 0;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    for (int validate_only = grows && configures; validate_only >= 0; validate_only--) {
        int16_t code = 0;
        st_str_t msg = ST_STR_NULL;
        if (grows) {
            if (grow(ctx, &a, o, validate_only, &code, &msg, err, sizeof err)) goto fail;
            if (code == st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION) && o->if_exists) break;
            if (code) {
                refused("cannot add partitions to", o->topic, code, msg);
                goto out;
            }
            if (!validate_only)
                printf("Increased the partition count of topic %s to %d.\n", o->topic,
                       (int)o->partitions);
        }
        if (configures) {
            if (reconfigure(ctx, &a, o, validate_only, &code, &msg, err, sizeof err)) goto fail;
            if (code == st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION) && o->if_exists) break;
            if (code) {
                refused("cannot alter the configs of", o->topic, code, msg);
                goto out;
            }
            if (!validate_only) {
                printf("Completed updating config for topic %s.\n", o->topic);
                /* a notice the broker gives with success: the change
                 * deletes data (tiered storage switched off, KIP-950) */
                if (msg.len > 0) printf("%.*s\n", ST_STR_FMT(msg));
            }
        }
    }
    rc = ST_CLI_EXIT_OK;
    goto out;
fail:
    fflush(stdout);
    fprintf(stderr, "strata topics: %s\n", err);
out:
    st_arena_fini(&a);
    return rc;
}

/* ---- the words after `strata topics` --------------------------------- */

enum { VERB_LIST = 1, VERB_DESCRIBE = 2, VERB_CREATE = 4, VERB_DELETE = 8, VERB_ALTER = 16 };
enum {
    OPT_TOPIC,
    OPT_PARTITIONS,
    OPT_REPLICATION_FACTOR,
    OPT_CONFIG,
    OPT_DELETE_CONFIG,
    OPT_REPLICA_ASSIGNMENT,
    OPT_IF_EXISTS,
    OPT_IF_NOT_EXISTS,
    OPT_EXCLUDE_INTERNAL,
    OPT_REPORT
};

typedef struct option {
    const char *name; /* kafka-topics.sh's */
    int id;           /* OPT_* */
    int takes_value;
    unsigned verbs;  /* VERB_*: where it may be given */
    unsigned report; /* REPORT_* of OPT_REPORT */
} option_t;

static const struct {
    const char *name;
    unsigned verb;
} verbs[] = {{"list", VERB_LIST},
             {"describe", VERB_DESCRIBE},
             {"create", VERB_CREATE},
             {"delete", VERB_DELETE},
             {"alter", VERB_ALTER}};

static const option_t options[] = {
    {"--topic", OPT_TOPIC, 1, VERB_DESCRIBE | VERB_CREATE | VERB_DELETE | VERB_ALTER, 0},
    {"--partitions", OPT_PARTITIONS, 1, VERB_CREATE | VERB_ALTER, 0},
    {"--replication-factor", OPT_REPLICATION_FACTOR, 1, VERB_CREATE, 0},
    {"--config", OPT_CONFIG, 1, VERB_CREATE | VERB_ALTER, 0},
    {"--delete-config", OPT_DELETE_CONFIG, 1, VERB_ALTER, 0},
    {"--replica-assignment", OPT_REPLICA_ASSIGNMENT, 1, VERB_CREATE, 0},
    {"--if-exists", OPT_IF_EXISTS, 0, VERB_DELETE | VERB_ALTER, 0},
    {"--if-not-exists", OPT_IF_NOT_EXISTS, 0, VERB_CREATE, 0},
    {"--exclude-internal", OPT_EXCLUDE_INTERNAL, 0, VERB_LIST | VERB_DESCRIBE, 0},
    {"--under-replicated-partitions", OPT_REPORT, 0, VERB_DESCRIBE, REPORT_UNDER_REPLICATED},
    {"--under-min-isr-partitions", OPT_REPORT, 0, VERB_DESCRIBE, REPORT_UNDER_MIN_ISR},
    {"--at-min-isr-partitions", OPT_REPORT, 0, VERB_DESCRIBE, REPORT_AT_MIN_ISR},
    {"--unavailable-partitions", OPT_REPORT, 0, VERB_DESCRIBE, REPORT_UNAVAILABLE},
};

/* One option of argv at *i (its value the next word, or after '=').
 * Returns 1 with err said on a usage error. */
static int parse_option(int argc, char **argv, int *i, opts_t *o, char *err, size_t errlen) {
    const char *arg = argv[*i], *eq = strchr(arg, '='), *value = NULL;
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    const option_t *opt = NULL;
    for (size_t k = 0; k < ST_ARRAY_SIZE(options) && !opt; k++)
        if (strlen(options[k].name) == len && !strncmp(options[k].name, arg, len))
            opt = &options[k];
    if (!opt) {
        snprintf(err, errlen, "unknown option %.*s", (int)len, arg);
        return 1;
    }
    if (!(opt->verbs & o->verb)) {
        snprintf(err, errlen, "%s is not an option of %s", opt->name, argv[0]);
        return 1;
    }
    if (opt->takes_value) {
        if (eq) value = eq + 1;
        else if (*i + 1 < argc) value = argv[++*i];
        else {
            snprintf(err, errlen, "%s needs a value", opt->name);
            return 1;
        }
    } else if (eq) {
        snprintf(err, errlen, "%s takes no value", opt->name);
        return 1;
    }
    switch (opt->id) {
    case OPT_TOPIC:
        if (o->topic) {
            snprintf(err, errlen, "one topic at a time ('%s' and '%s')", o->topic, value);
            return 1;
        }
        o->topic = value;
        break;
    case OPT_PARTITIONS:
        if (take_number(value, 1, INT32_MAX, &o->partitions)) {
            snprintf(err, errlen, "--partitions must be a positive number, not '%s'", value);
            return 1;
        }
        break;
    case OPT_REPLICATION_FACTOR:
        if (take_number(value, 1, INT16_MAX, &o->replication_factor)) {
            snprintf(err, errlen, "--replication-factor must be a number from 1 to %d, not '%s'",
                     INT16_MAX, value);
            return 1;
        }
        break;
    case OPT_CONFIG:
        if (!strchr(value, '=') || value[0] == '=') {
            snprintf(err, errlen, "--config takes key=value, not '%s'", value);
            return 1;
        }
        o->configs[o->nconfigs++] = value;
        break;
    case OPT_DELETE_CONFIG:
        for (const char *k = value;; k++) {
            if (*k == ',' || !*k) {
                if (k == value || k[-1] == ',') {
                    snprintf(err, errlen, "--delete-config takes key names separated by commas, "
                             "not '%s'", value);
                    return 1;
                }
                o->ndelete_keys++;
            }
            if (!*k) break;
        }
        o->delete_configs[o->ndelete_configs++] = value;
        break;
    case OPT_REPLICA_ASSIGNMENT: o->replica_assignment = value; break;
    case OPT_IF_EXISTS: o->if_exists = 1; break;
    case OPT_IF_NOT_EXISTS: o->if_not_exists = 1; break;
    case OPT_EXCLUDE_INTERNAL: o->exclude_internal = 1; break;
    case OPT_REPORT: o->report |= opt->report; break;
    default: break;
    }
    return 0;
}

/* The verb, its topic and options, into o (whose configs and
 * delete_configs hold argc entries).  Returns 1 with err said on a usage
 * error. */
static int parse(int argc, char **argv, opts_t *o, char *err, size_t errlen) {
    o->partitions = o->replication_factor = -1;
    if (argc < 1) {
        snprintf(err, errlen, "no verb");
        return 1;
    }
    for (size_t k = 0; k < ST_ARRAY_SIZE(verbs); k++)
        if (!strcmp(argv[0], verbs[k].name)) o->verb = verbs[k].verb;
    if (!o->verb) {
        snprintf(err, errlen, "unknown verb '%s'", argv[0]);
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--", 2)) {
            if (parse_option(argc, argv, &i, o, err, errlen)) return 1;
        } else if (o->topic || o->verb == VERB_LIST) {
            snprintf(err, errlen, "unexpected argument '%s'", argv[i]);
            return 1;
        } else {
            o->topic = argv[i];
        }
    }
    if (o->topic && !o->topic[0]) {
        snprintf(err, errlen, "an empty topic name");
        return 1;
    }
    if ((o->verb & (VERB_CREATE | VERB_DELETE | VERB_ALTER)) && !o->topic) {
        snprintf(err, errlen, "%s needs a topic", argv[0]);
        return 1;
    }
    if (o->replica_assignment && (o->partitions > 0 || o->replication_factor > 0)) {
        /* the assignment says both (kafka-topics.sh refuses them together) */
        snprintf(err, errlen, "--replica-assignment cannot be used with --partitions or "
                 "--replication-factor");
        return 1;
    }
    if (o->verb == VERB_ALTER && o->partitions < 0 && !o->nconfigs && !o->ndelete_configs) {
        snprintf(err, errlen, "alter needs --partitions, --config or --delete-config");
        return 1;
    }
    return 0;
}

int st_cli_topics(const st_cli_ctx_t *ctx, int argc, char **argv) {
    if (argc >= 1 && !strcmp(argv[0], "reassign")) return st_cli_topics_reassign(ctx, argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "restore")) return st_cli_topics_restore(ctx, argc - 1, argv + 1);
    char err[512];
    opts_t o;
    memset(&o, 0, sizeof o);
    o.configs = st_calloc((size_t)argc + 1, sizeof *o.configs);
    o.delete_configs = st_calloc((size_t)argc + 1, sizeof *o.delete_configs);
    int rc;
    if (parse(argc, argv, &o, err, sizeof err)) {
        fprintf(stderr, "strata topics: %s\n", err);
        st_cli_topics_usage(stderr);
        rc = ST_CLI_EXIT_USAGE;
    } else if (o.verb == VERB_LIST) {
        rc = list(ctx, o.exclude_internal);
    } else if (o.verb == VERB_DESCRIBE) {
        if (o.report) rc = report(ctx, o.topic, o.report, o.exclude_internal);
        else if (o.topic) rc = describe(ctx, o.topic);
        else rc = describe_all(ctx, o.exclude_internal);
    } else if (o.verb == VERB_CREATE) {
        rc = create(ctx, &o);
    } else if (o.verb == VERB_DELETE) {
        rc = delete_topic(ctx, &o);
    } else {
        rc = alter(ctx, &o);
    }
    free(o.configs);
    free(o.delete_configs);
    return rc;
}

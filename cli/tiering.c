/*
 * tiering.c - `strata tiering status [TOPIC]`: per partition, where the log
 * starts (the bucket's start), where the local part starts, how far the
 * bucket reaches, the high watermark, what the bucket's manifest holds and
 * how much is not in the bucket yet.
 *
 * Offsets come from each partition's leader, found in the bootstrap
 * broker's Metadata (ListOffsets -2 earliest, -4 earliest local, -5 latest
 * tiered, -1 latest: KIP-405 / KIP-1005), local bytes from the leader's
 * DescribeLogDirs; segments and bytes from the partition's manifest in the
 * bucket, read through the same object store settings as the broker's.  A
 * segment whose upload keeps failing, backed off, is read from the
 * remote-upload-status.json the broker keeps in the partition's directory
 * (under log.dirs; on the broker's machine).
 */
#include "cli_int.h"
#include "kclient.h"
#include "st_tiering.h"

#include <stdlib.h>

void st_cli_tiering_usage(FILE *out) {
    fprintf(out,
            "usage: strata tiering --config FILE [--override key=value ...] "
            "[--bootstrap HOST:PORT] status [TOPIC]\n"
            "  status [TOPIC]   per partition: log start, local start, tiered end, high\n"
            "                   watermark, remote segments and bytes, offsets not yet tiered\n");
}

enum { Q_EARLIEST, Q_LOCAL, Q_TIERED, Q_LATEST, NQ };
static const int64_t query_ts[NQ] = {-2, -4, -5, -1};

typedef struct row {
    const char *topic;
    char topic_id[23];
    int32_t partition;
    int64_t off[NQ];
    int64_t local_bytes;
    int32_t leader; /* Metadata's leader_id: the broker asked for the offsets */
    int16_t err;
} row_t;

static int cmp_row(const void *a, const void *b) {
    const row_t *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static void human(int64_t n, char *out, size_t len) {
    if (n < 0) snprintf(out, len, "-");
    else if (n >= (int64_t)1 << 30) snprintf(out, len, "%.1fG", (double)n / (1 << 30));
    else if (n >= 1 << 20) snprintf(out, len, "%.1fM", (double)n / (1 << 20));
    else if (n >= 1 << 10) snprintf(out, len, "%.1fK", (double)n / (1 << 10));
    else snprintf(out, len, "%lld", (long long)n);
}

/* The four ListOffsets (one per kind of offset) and DescribeLogDirs for
 * the rows that broker leader leads, sent to it at addr. */
static int from_leader(const st_cli_ctx_t *ctx, st_arena_t *a, const char *addr, row_t *rows, int nrows, int32_t leader,
                       char *err, size_t errlen) {
    char why[512];
    int rc = 1;
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec);
    if (st_kclient_open(&kc, addr, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "broker %d, a partition leader: %s", (int)leader, why);
        goto out;
    }
    for (int q = 0; q < NQ; q++) {
        st_list_offsets_req_t lq;
        st_schema_defaults(&st_list_offsets_req_schema, &lq);
        lq.replica_id = -1;
        ST_ARRAY_ALLOC(lq.topics, a, nrows);
        lq.topics.n = 0;
        for (int i = 0; i < nrows; i++) {
            if (rows[i].leader != leader) continue;
            if (!lq.topics.n || !st_str_eq(lq.topics.v[lq.topics.n - 1].name, rows[i].topic)) {
                st_list_offsets_req_topic_t *lt = &lq.topics.v[lq.topics.n++];
                lt->name = st_str(rows[i].topic);
                ST_ARRAY_ALLOC(lt->partitions, a, nrows);
                lt->partitions.n = 0;
            }
            st_list_offsets_req_topic_t *lt = &lq.topics.v[lq.topics.n - 1];
            st_list_offsets_req_part_t *lp = &lt->partitions.v[lt->partitions.n++];
            st_schema_defaults(&st_list_offsets_req_part_schema, lp);
            lp->partition_index = rows[i].partition;
            lp->timestamp = query_ts[q];
        }
        st_list_offsets_resp_t *lr;
        if (st_kclient_call(&kc, ST_API_LIST_OFFSETS, 9, &lq, a, (void **)&lr, why, sizeof why)) {
            st_snprintf_marked(err, errlen, "broker %d at %s: %s", (int)leader, addr, why);
            goto out;
        }
        for (int i = 0; i < lr->topics.n; i++)
            for (int k = 0; k < lr->topics.v[i].partitions.n; k++) {
                st_list_offsets_resp_part_t *p = &lr->topics.v[i].partitions.v[k];
                for (int j = 0; j < nrows; j++)
                    if (rows[j].leader == leader && rows[j].partition == p->partition_index &&
                        st_str_eq(lr->topics.v[i].name, rows[j].topic)) {
                        rows[j].off[q] = p->offset;
                        if (p->error_code) rows[j].err = p->error_code;
                    }
            }
    }

    /* Local sizes (DescribeLogDirs), the leader's copy. */
    st_describe_log_dirs_req_t dq;
    st_schema_defaults(&st_describe_log_dirs_req_schema, &dq);
    dq.topics.n = -1;
    st_describe_log_dirs_resp_t *dr;
    if (st_kclient_call(&kc, ST_API_DESCRIBE_LOG_DIRS, 4, &dq, a, (void **)&dr, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "broker %d at %s: %s", (int)leader, addr, why);
        goto out;
    }
    for (int d = 0; d < dr->results.n; d++)
        for (int t = 0; t < dr->results.v[d].topics.n; t++) {
            st_describe_log_dirs_topic_t *dt = &dr->results.v[d].topics.v[t];
            for (int k = 0; k < dt->partitions.n; k++)
                for (int j = 0; j < nrows; j++)
                    if (rows[j].leader == leader &&
                        rows[j].partition == dt->partitions.v[k].partition_index &&
                        st_str_eq(dt->name, rows[j].topic))
                        rows[j].local_bytes = dt->partitions.v[k].partition_size;
        }
    rc = 0;
out:
    st_kclient_close(&kc);
    return rc;
}

static int status(const st_cli_ctx_t *ctx, const char *topic) {
    char err[512];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec);
    st_os_t *os = NULL;
    row_t *rows = NULL;
    int nrows = 0;
    char **dirs = NULL;
    int ndirs = 0;
    if (st_kclient_open(&kc, ctx->bootstrap, err, sizeof err)) goto fail;

    /* Which partitions (and topic ids, for the bucket's keys). */
    st_metadata_req_t mq;
    st_schema_defaults(&st_metadata_req_schema, &mq);
    st_metadata_req_topic_t mt;
    if (topic) {
        st_schema_defaults(&st_metadata_req_topic_schema, &mt);
        mt.name = st_str(topic);
        mq.topics.v = &mt;
        mq.topics.n = 1;
    } else {
        mq.topics.n = -1;
    }
    mq.allow_auto_topic_creation = 0;
    st_metadata_resp_t *md;
    if (st_kclient_call(&kc, ST_API_METADATA, 12, &mq, &a, (void **)&md, err, sizeof err)) goto fail;
    for (int i = 0; i < md->topics.n; i++) nrows += md->topics.v[i].partitions.n;
    rows = st_calloc((size_t)nrows + 1, sizeof *rows);
    nrows = 0;
    for (int i = 0; i < md->topics.n; i++) {
        st_metadata_topic_t *t = &md->topics.v[i];
        if (t->error_code) {
            st_snprintf_marked(err, sizeof err, "topic %.*s: %s", ST_STR_FMT(t->name),
                     st_err_name((st_err_t)t->error_code));
            goto fail;
        }
        for (int k = 0; k < t->partitions.n; k++) {
            row_t *r = &rows[nrows++];
            r->topic = st_arena_strndup(&a, t->name.p, (size_t)t->name.len);
            st_uuid_format(&t->topic_id, r->topic_id);
            r->partition = t->partitions.v[k].partition_index;
            r->leader = t->partitions.v[k].leader_id;
        }
    }
    qsort(rows, (size_t)nrows, sizeof *rows, cmp_row);

    /* Offsets and sizes from each partition's leader (any broker may be the
     * bootstrap one; only the leader answers ListOffsets for a partition). */
    for (int i = 0; i < nrows; i++) rows[i].local_bytes = -1;
    for (int i = 0; i < nrows; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = rows[j].leader == rows[i].leader;
        if (seen) continue;
        if (rows[i].leader < 0) {
            for (int j = i; j < nrows; j++)
                if (rows[j].leader < 0) rows[j].err = st_err_wire(ST_E_LEADER_NOT_AVAILABLE);
            continue;
        }
        char addr[300];
        int found = 0;
        for (int b = 0; b < md->brokers.n && !found; b++) {
            st_metadata_broker_t *br = &md->brokers.v[b];
            if (br->node_id != rows[i].leader) continue;
            found = snprintf(addr, sizeof addr, "%.*s:%d", ST_STR_FMT(br->host), (int)br->port) <
                    (int)sizeof addr;
        }
        if (!found) {
            st_snprintf_marked(err, sizeof err, "Metadata names broker %d as a leader but not "
                               "its address", (int)rows[i].leader);
            goto fail;
        }
        if (from_leader(ctx, &a, addr, rows, nrows, rows[i].leader, err, sizeof err)) goto fail;
    }

    /* The bucket's side. */
    if (st_os_new(&ctx->os, &os, err, sizeof err)) goto fail;
    dirs = st_split_csv(ctx->broker.log_dirs, &ndirs);
    printf("%-24s %4s %12s %12s %12s %12s %9s %6s %9s %12s  %s\n", "TOPIC", "PART", "LOG-START",
           "LOCAL-START", "TIERED-END", "HIGH-WATER", "LOCAL", "SEGS", "REMOTE", "NOT-TIERED",
           "MANIFEST");
    for (int i = 0; i < nrows; i++) {
        row_t *r = &rows[i];
        char bytes[32] = "-", local[32] = "-", dwhy[200] = "", *why = NULL;
        char *prefix = st_tier_part_prefix(r->topic, r->topic_id, r->partition);
        char *key = st_strprintf("%s/manifest.json", prefix);
        st_os_request_t rq = {.op = ST_OS_GET, .key = key, .offset = 0, .length = ST_OS_TO_END};
        rq.sink.kind = ST_OS_SINK_ALLOC;
        st_os_result_t *res = st_os_run(os, &rq);
        st_tier_manifest_summary_t s = {0, -1, -1, -1, -1};
        const char *state = "none";
        if (res->status == ST_OK) {
            state = st_tier_manifest_summarize(res->data, (size_t)res->length, &s, dwhy, sizeof dwhy)
                        ? dwhy : "ok";
        } else if (res->status != ST_E_NOT_FOUND) {
            why = st_strdup(res->message); /* whole: it names the key */
            state = why;
        }
        st_os_result_free(res);
        free(key);
        free(prefix);
        /* A segment backed off (remote-upload-status.json in the partition's
         * directory, when this machine holds it). */
        char *backoff = NULL;
        for (int d = 0; d < ndirs && !backoff; d++) {
            char *pdir = st_strprintf("%s/%s-%d", dirs[d], r->topic, (int)r->partition);
            backoff = st_tier_upload_status_describe(pdir, st_now_ms());
            free(pdir);
        }
        human(s.bytes, bytes, sizeof bytes);
        human(r->local_bytes, local, sizeof local);
        int64_t tiered_end = r->off[Q_TIERED] >= 0 ? r->off[Q_TIERED] + 1 : -1;
        int64_t base = tiered_end >= 0 ? tiered_end : r->off[Q_LOCAL];
        printf("%-24s %4d %12lld %12lld %12lld %12lld %9s %6d %9s %12lld  %s%s%s%s%s\n", r->topic,
               (int)r->partition, (long long)r->off[Q_EARLIEST], (long long)r->off[Q_LOCAL],
               (long long)tiered_end, (long long)r->off[Q_LATEST], local, s.segments, bytes,
               (long long)(r->off[Q_LATEST] - base), state, r->err ? " error " : "",
               r->err ? st_err_name((st_err_t)r->err) : "", backoff ? "; " : "",
               backoff ? backoff : "");
        free(backoff);
        free(why);
    }
    rc = ST_CLI_EXIT_OK;
    goto out;
fail:
    fprintf(stderr, "strata tiering: %s\n", err);
out:
    if (dirs) st_free_strv(dirs, ndirs);
    st_os_destroy(os);
    st_kclient_close(&kc);
    free(rows);
    st_arena_fini(&a);
    return rc;
}

int st_cli_tiering(const st_cli_ctx_t *ctx, int argc, char **argv) {
    if (argc >= 1 && !strcmp(argv[0], "status") && argc <= 2)
        return status(ctx, argc == 2 ? argv[1] : NULL);
    st_cli_tiering_usage(stderr);
    return ST_CLI_EXIT_USAGE;
}

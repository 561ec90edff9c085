/*
 * groups.c - `strata groups list | describe GROUP`: consumer groups as
 * their coordinator sees them.
 *
 *   list             every group: state and protocol type (ListGroups)
 *   describe GROUP   state, protocol, members; per partition the committed
 *                    offset, the log end offset, the lag and the member
 *                    that owns it (kafka-consumer-groups.sh --describe)
 *
 * describe finds the group's coordinator (FindCoordinator), asks it for
 * the members and their assignments (DescribeGroups, assignments in the
 * consumer protocol's format) and the committed offsets (OffsetFetch, all
 * topics), and asks each partition's leader for its end (ListOffsets
 * latest).  Lag = log end offset - committed offset.  Uses the broker's own
 * codec through kclient.c.
 */
#include "cli_int.h"
#include "kclient.h"

#include <stdlib.h>
#include <unistd.h>

void st_cli_groups_usage(FILE *out) {
    fprintf(out,
            "usage: strata groups --config FILE [--override key=value ...] "
            "[--bootstrap HOST:PORT] list | describe GROUP\n"
            "  list             every consumer group: state, protocol type\n"
            "  describe GROUP   members and, per partition, committed offset, log end\n"
            "                   offset, lag and owner\n");
}

typedef struct row {
    const char *topic;
    int32_t partition;
    int64_t committed; /* -1: none */
    int64_t end;       /* -1: unknown */
    int member;        /* index into the members, -1: none */
} row_t;

static int cmp_row(const void *a, const void *b) {
    const row_t *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static row_t *find_row(row_t *rows, int n, const char *topic, int32_t partition) {
    for (int i = 0; i < n; i++)
        if (rows[i].partition == partition && !strcmp(rows[i].topic, topic)) return &rows[i];
    return NULL;
}

static char *dup_str(st_arena_t *a, st_str_t s) {
    return st_arena_strndup(a, s.len > 0 ? s.p : "", s.len > 0 ? (size_t)s.len : 0);
}

/* ConsumerProtocolAssignment (version 0 prefix of every version):
 *   int16 version | int32 n | n x (string topic, int32 m, m x int32) | ... */
static void add_assignment(st_arena_t *a, row_t **rows, int *n, int *cap, const st_bytes_t *b,
                           int member) {
    if (b->len < 6) return;
    st_rd_t r;
    st_rd_init(&r, b->p, (size_t)b->len);
    st_rd_i16(&r);
    int32_t nt = st_rd_i32(&r);
    for (int32_t t = 0; t < nt && !r.err; t++) {
        int16_t tl = st_rd_i16(&r);
        const uint8_t *tp = tl >= 0 ? st_rd_bytes(&r, (size_t)tl) : NULL;
        int32_t np = st_rd_i32(&r);
        if (!tp || np < 0) return;
        char *topic = st_arena_strndup(a, (const char *)tp, (size_t)tl);
        for (int32_t k = 0; k < np && !r.err; k++) {
            int32_t part = st_rd_i32(&r);
            if (r.err) return;
            row_t *row = find_row(*rows, *n, topic, part);
            if (!row) {
                if (*n == *cap) {
                    *cap = *cap ? *cap * 2 : 64;
                    *rows = st_realloc(*rows, sizeof **rows * (size_t)*cap);
                }
                row = &(*rows)[(*n)++];
                *row = (row_t){topic, part, -1, -1, -1};
            }
            row->member = member;
        }
    }
}

static int list(const st_cli_ctx_t *ctx, char *why, size_t whylen) {
    char err[512];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec);
    if (st_kclient_open(&kc, ctx->bootstrap, err, sizeof err)) goto fail;
    st_list_groups_req_t q;
    st_schema_defaults(&st_list_groups_req_schema, &q);
    st_list_groups_resp_t *r;
    if (st_kclient_call(&kc, ST_API_LIST_GROUPS, 4, &q, &a, (void **)&r, err, sizeof err)) goto fail;
    if (r->error_code) {
        st_snprintf_marked(err, sizeof err, "ListGroups: %s", st_err_name((st_err_t)r->error_code));
        goto fail;
    }
    printf("%-40s %-20s %s\n", "GROUP", "STATE", "PROTOCOL-TYPE");
    for (int i = 0; i < r->groups.n; i++) {
        st_listed_group_t *g = &r->groups.v[i];
        printf("%-40.*s %-20.*s %.*s\n", ST_STR_FMT(g->group_id), ST_STR_FMT(g->group_state),
               ST_STR_FMT(g->protocol_type));
    }
    rc = ST_CLI_EXIT_OK;
    goto out;
fail:
    snprintf(why, whylen, "%s", err);
out:
    st_kclient_close(&kc);
    st_arena_fini(&a);
    return rc;
}

static int describe(const st_cli_ctx_t *ctx, const char *group, char *why, size_t whylen) {
    char err[512], coord_addr[300];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec), gc = ST_KCLIENT_INIT(NULL, ctx->sec);
    row_t *rows = NULL;
    int nrows = 0, caprows = 0;
    if (st_kclient_open(&kc, ctx->bootstrap, err, sizeof err)) goto fail;

    /* the coordinator */
    st_find_coordinator_req_t fq;
    st_schema_defaults(&st_find_coordinator_req_schema, &fq);
    fq.key = st_str(group);
    st_find_coordinator_resp_t *fr;
    if (st_kclient_call(&kc, ST_API_FIND_COORDINATOR, 3, &fq, &a, (void **)&fr, err, sizeof err))
        goto fail;
    if (fr->error_code) {
        st_snprintf_marked(err, sizeof err, "FindCoordinator: %s", st_err_name((st_err_t)fr->error_code));
        goto fail;
    }
    if (snprintf(coord_addr, sizeof coord_addr, "%.*s:%d", ST_STR_FMT(fr->host), (int)fr->port) >=
        (int)sizeof coord_addr) {
        st_snprintf_marked(err, sizeof err, "FindCoordinator: the coordinator's host name is %d "
                           "bytes long", (int)fr->host.len);
        goto fail;
    }
    if (st_kclient_open(&gc, coord_addr, err, sizeof err)) goto fail;

    /* members and what they own */
    st_describe_groups_req_t dq;
    st_schema_defaults(&st_describe_groups_req_schema, &dq);
    st_str_t gid = st_str(group);
    dq.groups.v = &gid;
    dq.groups.n = 1;
    st_describe_groups_resp_t *dr;
    if (st_kclient_call(&gc, ST_API_DESCRIBE_GROUPS, 5, &dq, &a, (void **)&dr, err, sizeof err))
        goto fail;
    if (dr->groups.n != 1 || dr->groups.v[0].error_code) {
        st_snprintf_marked(err, sizeof err, "DescribeGroups: %s",
                 dr->groups.n ? st_err_name((st_err_t)dr->groups.v[0].error_code) : "no answer");
        goto fail;
    }
    st_described_group_t *g = &dr->groups.v[0];
    if (st_str_eq(g->group_state, "Dead")) {
        st_snprintf_marked(err, sizeof err, "consumer group '%s' does not exist", group);
        goto fail;
    }
    int consumer = st_str_eq(g->protocol_type, "consumer");
    for (int i = 0; consumer && i < g->members.n; i++)
        add_assignment(&a, &rows, &nrows, &caprows, &g->members.v[i].member_assignment, i);

    /* committed offsets */
    st_offset_fetch_req_t oq;
    st_schema_defaults(&st_offset_fetch_req_schema, &oq);
    oq.group_id = st_str(group);
    oq.topics.n = -1;
    st_offset_fetch_resp_t *orr;
    if (st_kclient_call(&gc, ST_API_OFFSET_FETCH, 7, &oq, &a, (void **)&orr, err, sizeof err))
        goto fail;
    if (orr->error_code) {
        st_snprintf_marked(err, sizeof err, "OffsetFetch: %s", st_err_name((st_err_t)orr->error_code));
        goto fail;
    }
    for (int i = 0; i < orr->topics.n; i++) {
        char *topic = dup_str(&a, orr->topics.v[i].name);
        for (int k = 0; k < orr->topics.v[i].partitions.n; k++) {
            st_offset_fetch_resp_part_t *p = &orr->topics.v[i].partitions.v[k];
            if (p->error_code || p->committed_offset < 0) continue;
            row_t *row = find_row(rows, nrows, topic, p->partition_index);
            if (!row) {
                if (nrows == caprows) {
                    caprows = caprows ? caprows * 2 : 64;
                    rows = st_realloc(rows, sizeof *rows * (size_t)caprows);
                }
                row = &rows[nrows++];
                *row = (row_t){topic, p->partition_index, -1, -1, -1};
            }
            row->committed = p->committed_offset;
        }
    }
    if (nrows) qsort(rows, (size_t)nrows, sizeof *rows, cmp_row);

    /* log ends, from each partition's leader */
    st_metadata_req_t mq;
    st_schema_defaults(&st_metadata_req_schema, &mq);
    mq.allow_auto_topic_creation = 0;
    ST_ARRAY_ALLOC(mq.topics, &a, nrows);
    mq.topics.n = 0;
    for (int i = 0; i < nrows; i++) {
        if (i && !strcmp(rows[i].topic, rows[i - 1].topic)) continue;
        st_schema_defaults(&st_metadata_req_topic_schema, &mq.topics.v[mq.topics.n]);
        mq.topics.v[mq.topics.n++].name = st_str(rows[i].topic);
    }
    st_metadata_resp_t *md = NULL;
    if (nrows && st_kclient_call(&kc, ST_API_METADATA, 9, &mq, &a, (void **)&md, err, sizeof err))
        goto fail;
    for (int b = 0; md && b < md->brokers.n; b++) {
        st_metadata_broker_t *br = &md->brokers.v[b];
        st_list_offsets_req_t lq;
        st_schema_defaults(&st_list_offsets_req_schema, &lq);
        lq.replica_id = -1;
        ST_ARRAY_ALLOC(lq.topics, &a, nrows);
        lq.topics.n = 0;
        for (int i = 0; i < nrows; i++) {
            int led = 0;
            for (int t = 0; t < md->topics.n && !led; t++) {
                if (!st_str_eq(md->topics.v[t].name, rows[i].topic)) continue;
                for (int k = 0; k < md->topics.v[t].partitions.n; k++)
                    led |= md->topics.v[t].partitions.v[k].partition_index == rows[i].partition &&
                           md->topics.v[t].partitions.v[k].leader_id == br->node_id;
            }
            if (!led) continue;
            st_list_offsets_req_topic_t *lt = NULL;
            for (int t = 0; t < lq.topics.n && !lt; t++)
                if (st_str_eq(lq.topics.v[t].name, rows[i].topic)) lt = &lq.topics.v[t];
            if (!lt) {
                lt = &lq.topics.v[lq.topics.n++];
                lt->name = st_str(rows[i].topic);
                ST_ARRAY_ALLOC(lt->partitions, &a, nrows);
                lt->partitions.n = 0;
            }
            st_list_offsets_req_part_t *lp = &lt->partitions.v[lt->partitions.n++];
            st_schema_defaults(&st_list_offsets_req_part_schema, lp);
            lp->partition_index = rows[i].partition;
            lp->timestamp = -1;
        }
        if (!lq.topics.n) continue;
        char addr[300];
        snprintf(addr, sizeof addr, "%.*s:%d", ST_STR_FMT(br->host), (int)br->port);
        st_kclient_t lc = ST_KCLIENT_INIT(NULL, ctx->sec);
        st_list_offsets_resp_t *lr;
        if (st_kclient_open(&lc, addr, err, sizeof err) ||
            st_kclient_call(&lc, ST_API_LIST_OFFSETS, 5, &lq, &a, (void **)&lr, err, sizeof err)) {
            st_kclient_close(&lc);
            goto fail;
        }
        st_kclient_close(&lc);
        for (int t = 0; t < lr->topics.n; t++) {
            char *topic = dup_str(&a, lr->topics.v[t].name);
            for (int k = 0; k < lr->topics.v[t].partitions.n; k++) {
                st_list_offsets_resp_part_t *p = &lr->topics.v[t].partitions.v[k];
                row_t *row = find_row(rows, nrows, topic, p->partition_index);
                if (row && !p->error_code) row->end = p->offset;
            }
        }
    }

    printf("group %s: state %.*s, protocol %.*s%s%.*s, %d member%s, coordinator %d (%s)\n\n",
           group, ST_STR_FMT(g->group_state), ST_STR_FMT(g->protocol_type),
           g->protocol_data.len > 0 ? "/" : "", ST_STR_FMT(g->protocol_data), g->members.n,
           g->members.n == 1 ? "" : "s", (int)fr->node_id, coord_addr);
    printf("%-24s %9s %14s %14s %8s  %-44s %-16s %s\n", "TOPIC", "PARTITION", "CURRENT-OFFSET",
           "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID");
    for (int i = 0; i < nrows; i++) {
        row_t *r = &rows[i];
        char cur[32] = "-", end[32] = "-", lag[32] = "-";
        if (r->committed >= 0) snprintf(cur, sizeof cur, "%lld", (long long)r->committed);
        if (r->end >= 0) snprintf(end, sizeof end, "%lld", (long long)r->end);
        if (r->committed >= 0 && r->end >= 0)
            snprintf(lag, sizeof lag, "%lld", (long long)(r->end - r->committed));
        st_described_group_member_t *m = r->member >= 0 ? &g->members.v[r->member] : NULL;
        printf("%-24s %9d %14s %14s %8s  %-44.*s %-16.*s %.*s\n", r->topic, (int)r->partition, cur,
               end, lag, ST_STR_FMT(m ? m->member_id : st_str("-")),
               ST_STR_FMT(m ? m->client_host : st_str("-")),
               ST_STR_FMT(m ? m->client_id : st_str("-")));
    }
    /* members that own nothing (more members than partitions, or not a
     * consumer group) */
    for (int i = 0; i < g->members.n; i++) {
        int owns = 0;
        for (int k = 0; k < nrows && !owns; k++) owns = rows[k].member == i;
        if (owns) continue;
        st_described_group_member_t *m = &g->members.v[i];
        printf("%-24s %9s %14s %14s %8s  %-44.*s %-16.*s %.*s\n", "-", "-", "-", "-", "-",
               ST_STR_FMT(m->member_id), ST_STR_FMT(m->client_host), ST_STR_FMT(m->client_id));
    }
    rc = ST_CLI_EXIT_OK;
    goto out;
fail:
    snprintf(why, whylen, "%s", err);
out:
    st_kclient_close(&gc);
    st_kclient_close(&kc);
    free(rows);
    st_arena_fini(&a);
    return rc;
}

/* Errors worth another try, as Kafka's admin client retries them: the
 * coordinator is loading its partition, moving, or being created. */
static int retriable(const char *msg) {
    return strstr(msg, "COORDINATOR_LOAD_IN_PROGRESS") || strstr(msg, "COORDINATOR_NOT_AVAILABLE") ||
           strstr(msg, "NOT_COORDINATOR");
}

int st_cli_groups(const st_cli_ctx_t *ctx, int argc, char **argv) {
    int listing = argc == 1 && !strcmp(argv[0], "list");
    if (!listing && !(argc == 2 && !strcmp(argv[0], "describe"))) {
        st_cli_groups_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    for (int attempt = 1;; attempt++) {
        char why[1024] = "";
        int rc = listing ? list(ctx, why, sizeof why) : describe(ctx, argv[1], why, sizeof why);
        if (rc == ST_CLI_EXIT_FAIL && retriable(why) && attempt < 20) {
            usleep(250 * 1000); /* about 5 s in all */
            continue;
        }
        if (rc == ST_CLI_EXIT_FAIL) fprintf(stderr, "strata groups: %s\n", why);
        return rc;
    }
}

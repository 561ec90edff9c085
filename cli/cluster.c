/*
 * cluster.c - `strata cluster status | brokers`: the metadata quorum and
 * the brokers, as the active controller and the bootstrap broker see them.
 *
 *   status    the quorum of __cluster_metadata-0 (kafka-metadata-quorum
 *             describe --status and --replication in one): cluster id,
 *             leader, epoch, high watermark, and per voter and observer
 *             its log end offset, its lag (high watermark - log end
 *             offset) and how long ago it last fetched and was caught up
 *   brokers   every broker: id, host:port, rack, fenced or not, and
 *             which one is the active controller
 *
 * The quorum's state is known only to its leader (KIP-595: DescribeQuorum
 * is answered by the leader; another node says NOT_LEADER_OR_FOLLOWER), so
 * the tool asks the bootstrap broker's Metadata for the controller id, the
 * Raft leader, and sends DescribeQuorum to that node's client listener,
 * which answers every API.  A node that no longer leads names the leader it
 * knows; the tool follows it, and retries for about 10 s while an election
 * is going on, as Kafka's admin client retries.
 *
 * `brokers` asks DescribeCluster v2 for the fenced brokers too (KIP-1073's
 * include_fenced_brokers) and adds the members of the quorum, voters and
 * observers, that are not among them: a controller-only node, or a node
 * that has not registered (yet); FENCED says "-" for those, and the
 * CONTROLLER column marks the Raft leader.  Uses the broker's own codec
 * through kclient.c, one request at a time; no thread.
 */
#include "cli_int.h"
#include "kclient.h"

#include <stdlib.h>
#include <unistd.h>

/* The metadata log's topic, KRaft's name (the controller's raft_wire.h
 * names it too; the tool does not link the controller). */
#define CLI_META_TOPIC "__cluster_metadata"

void st_cli_cluster_usage(FILE *out) {
    fprintf(out,
            "usage: strata cluster --config FILE [--override key=value ...] "
            "[--bootstrap HOST:PORT] status | brokers\n"
            "  status    the metadata quorum: leader, epoch, high watermark, and each voter's\n"
            "            and observer's log end offset, lag, last fetch and last caught-up time\n"
            "  brokers   id, host:port, rack, fenced or not, the active controller\n");
}

/* What one attempt learnt: Metadata from the bootstrap broker, and the
 * quorum from its leader (q NULL when that failed: then qerr says why). */
typedef struct view {
    st_metadata_resp_t *md;
    char leader_addr[300];
    int32_t asked; /* the node DescribeQuorum went to */
    st_describe_quorum_resp_part_t *q;
} view_t;

/* host:port of broker id in the Metadata answer, 0 if it names none. */
static int broker_addr(const st_metadata_resp_t *md, int32_t id, char *out, size_t n) {
    for (int i = 0; i < md->brokers.n; i++) {
        const st_metadata_broker_t *b = &md->brokers.v[i];
        if (b->node_id != id) continue;
        return snprintf(out, n, "%.*s:%d", ST_STR_FMT(b->host), (int)b->port) < (int)n;
    }
    return 0;
}

static const char *wire_name(int16_t code) {
    return st_err_name(st_err_from_wire(code));
}

/* DescribeQuorum for __cluster_metadata-0 to addr.  Returns 0 with *out
 * set, or 1 with err said and *retry set when another try may help. */
static int describe_quorum(const st_cli_ctx_t *ctx, const char *addr, int32_t node, st_arena_t *a,
                           st_describe_quorum_resp_part_t **out, int32_t *leader_hint, char *err,
                           size_t errlen, int *retry) {
    char why[512];
    int rc = 1;
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec);
    *leader_hint = -1;
    if (st_kclient_open(&kc, addr, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "the active controller, node %d, does not answer: %s",
                           (int)node, why);
        *retry = 1; /* it may have just died: the others elect another */
        goto out;
    }
    st_describe_quorum_req_t q;
    st_schema_defaults(&st_describe_quorum_req_schema, &q);
    st_describe_quorum_req_topic_t t;
    st_schema_defaults(&st_describe_quorum_req_topic_schema, &t);
    st_describe_quorum_req_part_t p;
    st_schema_defaults(&st_describe_quorum_req_part_schema, &p);
    t.topic_name = st_str(CLI_META_TOPIC);
    t.partitions.v = &p;
    t.partitions.n = 1;
    q.topics.v = &t;
    q.topics.n = 1;
    st_describe_quorum_resp_t *r;
    if (st_kclient_call(&kc, ST_API_DESCRIBE_QUORUM, 2, &q, a, (void **)&r, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "node %d at %s: %s", (int)node, addr, why);
        *retry = 1;
        goto out;
    }
    if (r->error_code) {
        st_snprintf_marked(err, errlen, "node %d at %s refused DescribeQuorum: %s%s%.*s", (int)node,
                           addr, wire_name(r->error_code), r->error_message.len > 0 ? ": " : "",
                           ST_STR_FMT(r->error_message.len > 0 ? r->error_message : st_str("")));
        goto out;
    }
    if (r->topics.n != 1 || r->topics.v[0].partitions.n != 1) {
        st_snprintf_marked(err, errlen, "node %d at %s answered DescribeQuorum with %d topics "
                           "for one asked", (int)node, addr, r->topics.n);
        goto out;
    }
    st_describe_quorum_resp_part_t *rp = &r->topics.v[0].partitions.v[0];
    if (rp->error_code == st_err_wire(ST_E_NOT_LEADER_OR_FOLLOWER)) {
        *leader_hint = rp->leader_id;
        *retry = 1;
        if (rp->leader_id >= 0 && rp->leader_id != node)
            st_snprintf_marked(err, errlen, "node %d at %s does not lead the metadata quorum "
                               "(NOT_LEADER_OR_FOLLOWER); it names node %d (epoch %d) as the "
                               "leader",
                               (int)node, addr, (int)rp->leader_id, (int)rp->leader_epoch);
        else
            st_snprintf_marked(err, errlen, "node %d at %s does not lead the metadata quorum "
                               "(NOT_LEADER_OR_FOLLOWER) and knows no leader: an election is "
                               "under way or the quorum has lost its majority", (int)node, addr);
        goto out;
    }
    if (rp->error_code) {
        st_snprintf_marked(err, errlen, "node %d at %s answered DescribeQuorum with %s%s%.*s",
                           (int)node, addr, wire_name(rp->error_code),
                           rp->error_message.len > 0 ? ": " : "",
                           ST_STR_FMT(rp->error_message.len > 0 ? rp->error_message : st_str("")));
        goto out;
    }
    *out = rp;
    rc = 0;
out:
    st_kclient_close(&kc);
    return rc;
}

/* One attempt: Metadata from the bootstrap broker (v->md), then the
 * quorum from the node it names as controller (v->q; qerr says why not).
 * Returns 1 only when the bootstrap broker itself failed us. */
static int look(const st_cli_ctx_t *ctx, st_arena_t *a, view_t *v, char *err, size_t errlen,
                char *qerr, size_t qerrlen, int *retry) {
    char why[512];
    int rc = 1;
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec);
    memset(v, 0, sizeof *v);
    *retry = 0;
    if (st_kclient_open(&kc, ctx->bootstrap, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "no broker reachable at %s (%s)", ctx->bootstrap, why);
        goto out;
    }
    st_metadata_req_t mq;
    st_schema_defaults(&st_metadata_req_schema, &mq);
    mq.allow_auto_topic_creation = 0;
    ST_ARRAY_ALLOC(mq.topics, a, 0); /* no topic: only brokers and controller */
    if (st_kclient_call(&kc, ST_API_METADATA, 12, &mq, a, (void **)&v->md, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "the broker at %s: %s", ctx->bootstrap, why);
        goto out;
    }
    rc = 0;
    int32_t node = v->md->controller_id;
    if (node < 0) {
        st_snprintf_marked(qerr, qerrlen, "the broker at %s knows no active controller: the "
                           "metadata quorum has no leader (an election is under way, or fewer "
                           "than a majority of the voters are running)", ctx->bootstrap);
        *retry = 1;
        goto out;
    }
    /* Follow the leader a node names, twice at most (a moving leader). */
    for (int hop = 0; hop < 3; hop++) {
        /* A controller that is not an unfenced broker is not in Metadata's
         * brokers: ask the bootstrap broker, which names the leader. */
        if (!broker_addr(v->md, node, v->leader_addr, sizeof v->leader_addr))
            snprintf(v->leader_addr, sizeof v->leader_addr, "%s", ctx->bootstrap);
        v->asked = node;
        int32_t hint;
        if (!describe_quorum(ctx, v->leader_addr, node, a, &v->q, &hint, qerr, qerrlen, retry)) break;
        if (hint < 0 || hint == node) break;
        node = hint;
    }
out:
    st_kclient_close(&kc);
    return rc;
}

/* Ask again while the answer may change soon (an election), about 10 s
 * in all.  Returns 1 when even the bootstrap broker failed (err said). */
static int look_retrying(const st_cli_ctx_t *ctx, st_arena_t *a, view_t *v, char *err,
                         size_t errlen, char *qerr, size_t qerrlen) {
    for (int attempt = 1;; attempt++) {
        int retry = 0;
        qerr[0] = 0;
        if (look(ctx, a, v, err, errlen, qerr, qerrlen, &retry)) return 1;
        if (v->q || !retry || attempt == 40) return 0;
        usleep(250 * 1000);
    }
}

static void ago(char *out, size_t n, int64_t now, int64_t ts) {
    if (ts < 0) snprintf(out, n, "-");
    else snprintf(out, n, "%lld ms ago", (long long)(now > ts ? now - ts : 0));
}

static void print_ids(const char *what, const st_quorum_replica_state_t *v, int n) {
    printf("%-22s [", what);
    for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", (int)v[i].replica_id);
    printf("]\n");
}

static void print_rows(const st_describe_quorum_resp_part_t *q, const st_quorum_replica_state_t *v,
                       int n, int voters, int64_t now) {
    for (int i = 0; i < n; i++) {
        const char *role = !voters                             ? "Observer"
                           : v[i].replica_id == q->leader_id ? "Leader"
                                                             : "Follower";
        char fetch[48], caught[48];
        ago(fetch, sizeof fetch, now, v[i].last_fetch_timestamp);
        ago(caught, sizeof caught, now, v[i].last_caught_up_timestamp);
        /* -1: the leader has not heard from it in this epoch */
        char leo[24] = "-", lag[24] = "-";
        if (v[i].log_end_offset >= 0) {
            snprintf(leo, sizeof leo, "%lld", (long long)v[i].log_end_offset);
            snprintf(lag, sizeof lag, "%lld", (long long)(q->high_watermark - v[i].log_end_offset));
        }
        printf("%-6d %-9s %14s %8s  %-16s %s\n", (int)v[i].replica_id, role, leo, lag, fetch,
               caught);
    }
}

static int status(const st_cli_ctx_t *ctx) {
    char err[1024], qerr[1024];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    view_t v;
    if (look_retrying(ctx, &a, &v, err, sizeof err, qerr, sizeof qerr)) {
        fprintf(stderr, "strata cluster: %s\n", err);
        goto out;
    }
    if (!v.q) {
        fprintf(stderr, "strata cluster: %s\n", qerr);
        goto out;
    }
    const st_describe_quorum_resp_part_t *q = v.q;
    int64_t now = st_now_ms();
    /* Kafka's figures: the largest follower lag, and how long the voter
     * caught up longest ago has been behind (on the leader's clock). */
    int64_t max_lag = 0, leader_ts = -1, oldest = -1;
    for (int i = 0; i < q->current_voters.n; i++)
        if (q->current_voters.v[i].replica_id == q->leader_id)
            leader_ts = q->current_voters.v[i].last_caught_up_timestamp;
    for (int i = 0; i < q->current_voters.n; i++) {
        const st_quorum_replica_state_t *r = &q->current_voters.v[i];
        if (r->replica_id == q->leader_id) continue;
        /* a follower not heard from this epoch has confirmed nothing */
        int64_t lag = q->high_watermark - (r->log_end_offset >= 0 ? r->log_end_offset : 0);
        if (lag > max_lag) max_lag = lag;
        if (r->last_caught_up_timestamp >= 0 &&
            (oldest < 0 || r->last_caught_up_timestamp < oldest))
            oldest = r->last_caught_up_timestamp;
    }
    int64_t lag_time = 0;
    if (oldest >= 0) lag_time = (leader_ts >= 0 ? leader_ts : now) - oldest;
    if (lag_time < 0) lag_time = 0;
    printf("%-22s %.*s\n", "ClusterId:", ST_STR_FMT(v.md->cluster_id.len >= 0 ? v.md->cluster_id
                                                                               : st_str("-")));
    printf("%-22s %d\n", "LeaderId:", (int)q->leader_id);
    printf("%-22s %d\n", "LeaderEpoch:", (int)q->leader_epoch);
    printf("%-22s %lld\n", "HighWatermark:", (long long)q->high_watermark);
    printf("%-22s %lld\n", "MaxFollowerLag:", (long long)max_lag);
    printf("%-22s %lld\n", "MaxFollowerLagTimeMs:", (long long)lag_time);
    print_ids("CurrentVoters:", q->current_voters.v, q->current_voters.n);
    print_ids("CurrentObservers:", q->observers.v, q->observers.n);
    printf("\n%-6s %-9s %14s %8s  %-16s %s\n", "NODE", "ROLE", "LOG-END-OFFSET", "LAG",
           "LAST-FETCH", "LAST-CAUGHT-UP");
    print_rows(q, q->current_voters.v, q->current_voters.n, 1, now);
    print_rows(q, q->observers.v, q->observers.n, 0, now);
    rc = ST_CLI_EXIT_OK;
out:
    st_arena_fini(&a);
    return rc;
}

typedef struct brow {
    int32_t id;
    char addr[300];
    char rack[256];
    int fenced; /* -1: not a registered broker */
    const char *quorum; /* "voter", "observer", "-" */
} brow_t;

static int cmp_brow(const void *x, const void *y) {
    const brow_t *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

static brow_t *add_brow(brow_t **rows, int *n, int *cap, int32_t id) {
    for (int i = 0; i < *n; i++)
        if ((*rows)[i].id == id) return &(*rows)[i];
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *rows = st_realloc(*rows, sizeof **rows * (size_t)*cap);
    }
    brow_t *r = &(*rows)[(*n)++];
    memset(r, 0, sizeof *r);
    r->id = id;
    r->fenced = -1;
    snprintf(r->addr, sizeof r->addr, "-");
    snprintf(r->rack, sizeof r->rack, "-");
    r->quorum = "-";
    return r;
}

static int brokers(const st_cli_ctx_t *ctx) {
    char err[1024], qerr[1024], why[512];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec);
    brow_t *rows = NULL;
    int n = 0, cap = 0;
    view_t v;
    if (look_retrying(ctx, &a, &v, err, sizeof err, qerr, sizeof qerr)) {
        fprintf(stderr, "strata cluster: %s\n", err);
        goto out;
    }
    /* the unfenced brokers with their racks, from the bootstrap broker */
    if (st_kclient_open(&kc, ctx->bootstrap, why, sizeof why)) {
        fprintf(stderr, "strata cluster: no broker reachable at %s (%s)\n", ctx->bootstrap, why);
        goto out;
    }
    st_describe_cluster_req_t dq;
    st_schema_defaults(&st_describe_cluster_req_schema, &dq);
    dq.include_fenced_brokers = 1;
    st_describe_cluster_resp_t *dc;
    if (st_kclient_call(&kc, ST_API_DESCRIBE_CLUSTER, 2, &dq, &a, (void **)&dc, why, sizeof why)) {
        fprintf(stderr, "strata cluster: the broker at %s: %s\n", ctx->bootstrap, why);
        goto out;
    }
    if (dc->error_code) {
        fprintf(stderr, "strata cluster: the broker at %s refused DescribeCluster: %s%s%.*s\n",
                ctx->bootstrap, wire_name(dc->error_code), dc->error_message.len > 0 ? ": " : "",
                ST_STR_FMT(dc->error_message.len > 0 ? dc->error_message : st_str("")));
        goto out;
    }
    for (int i = 0; i < dc->brokers.n; i++) {
        const st_describe_cluster_broker_t *b = &dc->brokers.v[i];
        brow_t *r = add_brow(&rows, &n, &cap, b->broker_id);
        r->fenced = b->is_fenced != 0;
        snprintf(r->addr, sizeof r->addr, "%.*s:%d", ST_STR_FMT(b->host), (int)b->port);
        if (b->rack.len > 0) snprintf(r->rack, sizeof r->rack, "%.*s", ST_STR_FMT(b->rack));
    }
    /* the quorum's members: those not above are no brokers (controller-only,
     * or not registered yet) */
    if (v.q) {
        for (int i = 0; i < v.q->current_voters.n; i++)
            add_brow(&rows, &n, &cap, v.q->current_voters.v[i].replica_id)->quorum = "voter";
        for (int i = 0; i < v.q->observers.n; i++)
            add_brow(&rows, &n, &cap, v.q->observers.v[i].replica_id)->quorum = "observer";
    }
    if (n) qsort(rows, (size_t)n, sizeof *rows, cmp_brow);
    int nfenced = 0, nother = 0;
    for (int i = 0; i < n; i++) {
        nfenced += rows[i].fenced > 0;
        nother += rows[i].fenced < 0;
    }
    /* the Raft's leader, as the quorum says; else whom the broker names */
    int32_t active = v.q ? v.q->leader_id : dc->controller_id;
    printf("cluster %.*s: %d broker%s (%d unfenced, %d fenced)", ST_STR_FMT(dc->cluster_id),
           n - nother, n - nother == 1 ? "" : "s", n - nother - nfenced, nfenced);
    if (nother)
        printf(", %d quorum member%s that %s no broker", nother, nother == 1 ? "" : "s",
               nother == 1 ? "is" : "are");
    printf(", active controller %d\n\n", (int)active);
    printf("%-6s %-24s %-12s %-7s %-11s %s\n", "ID", "HOST:PORT", "RACK", "FENCED", "CONTROLLER",
           "QUORUM");
    for (int i = 0; i < n; i++)
        printf("%-6d %-24s %-12s %-7s %-11s %s\n", (int)rows[i].id, rows[i].addr, rows[i].rack,
               rows[i].fenced < 0 ? "-" : rows[i].fenced ? "yes" : "no",
               rows[i].id == active ? "yes" : "no", rows[i].quorum);
    if (!v.q) {
        /* the list above may miss controllers: say so, and fail */
        fprintf(stderr, "strata cluster: the quorum's members cannot be listed: %s\n", qerr);
        goto out;
    }
    rc = ST_CLI_EXIT_OK;
out:
    st_kclient_close(&kc);
    free(rows);
    st_arena_fini(&a);
    return rc;
}

int st_cli_cluster(const st_cli_ctx_t *ctx, int argc, char **argv) {
    if (argc == 1 && !strcmp(argv[0], "status")) return status(ctx);
    if (argc == 1 && !strcmp(argv[0], "brokers")) return brokers(ctx);
    st_cli_cluster_usage(stderr);
    return ST_CLI_EXIT_USAGE;
}

/*
 * test_raft.c - unit tests of broker/raft: elections, vote refusals,
 * pre-vote against a live leader, diverging-epoch truncation, the high
 * watermark rule for entries of older epochs (the Raft paper's figure 8),
 * FetchSnapshot for a follower below the leader's log start, and the
 * refusals of a damaged quorum-state and of a voter set that changed.
 *
 * Nodes are raft_mem.h's (the simulator's in-memory disk); messages go to
 * a queue the test delivers, drops or answers by hand.  Time is a variable.
 */
#include "unit.h"

#include "raft_int.h"
#include "raft_mem.h"

#define MAXQ 4096

typedef struct qmsg {
    int32_t from, to;
    st_raft_msg_t *m;
} qmsg_t;

static struct {
    int64_t now;
    rm_node_t nodes[3];
    int n;
    int32_t ids[3];
    qmsg_t q[MAXQ];
    int nq;
    st_raft_config_t cfg;
} T;

static void t_send(void *ctx, rm_node_t *from, int32_t dest, const st_raft_msg_t *m) {
    (void)ctx;
    assert_true(T.nq < MAXQ);
    T.q[T.nq++] = (qmsg_t){from->id, dest, rm_msg_copy(m)};
}

static rm_node_t *node(int32_t id) { return &T.nodes[id - 1]; }

static void setup_nodes(int n) {
    memset(&T, 0, sizeof T);
    T.n = n;
    for (int i = 0; i < n; i++) T.ids[i] = i + 1;
    rm_hooks_t hooks = {.send = t_send};
    for (int i = 0; i < n; i++) rm_node_init(&T.nodes[i], i + 1, &T.now, 1234567 + (uint64_t)i, &hooks);
    st_raft_config_defaults(&T.cfg);
    T.cfg.voters = T.ids;
    T.cfg.nvoters = n;
    T.cfg.snapshot_min_new_bytes = 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < T.nq; i++) rm_msg_free(T.q[i].m);
    T.nq = 0;
    for (int i = 0; i < 3; i++) rm_node_fini(&T.nodes[i]);
    st_raft__set_planted_bug(ST_RAFT_BUG_NONE);
    return 0;
}

static void start(int32_t id) {
    st_raft_config_t cfg = T.cfg;
    cfg.node_id = id;
    char err[256];
    st_err_t e = rm_node_start(node(id), &cfg, err, sizeof err);
    if (e) fail_msg("start %d: %s", id, err);
}

static st_raft_t *R(int32_t id) { return node(id)->r; }

static void drop_queue(void) {
    for (int i = 0; i < T.nq; i++) rm_msg_free(T.q[i].m);
    T.nq = 0;
}

/* Removes and returns the first queued message of `type` to `to` (NULL: none). */
static st_raft_msg_t *take(int32_t to, st_raft_msg_type_t type) {
    for (int i = 0; i < T.nq; i++) {
        if (T.q[i].to == to && T.q[i].m->type == type) {
            st_raft_msg_t *m = T.q[i].m;
            memmove(&T.q[i], &T.q[i + 1], sizeof T.q[0] * (size_t)(T.nq - i - 1));
            T.nq--;
            return m;
        }
    }
    return NULL;
}

static void flush_all(void) {
    for (int i = 0; i < T.n; i++)
        while (node(T.ids[i])->nflush) rm_node_flush_complete(node(T.ids[i]));
}

/* Delivers everything queued between started nodes (and completes flushes)
 * until nothing moves; messages to nodes not started are dropped. */
static void route(void) {
    for (int rounds = 0; rounds < 10000; rounds++) {
        flush_all();
        if (T.nq == 0) return;
        qmsg_t m = T.q[0];
        memmove(&T.q[0], &T.q[1], sizeof T.q[0] * (size_t)(T.nq - 1));
        T.nq--;
        if (node(m.to)->r) st_raft_recv(node(m.to)->r, m.from, m.m);
        rm_msg_free(m.m);
    }
    fail_msg("messages never stopped");
}

static void tick_all(void) {
    for (int i = 0; i < T.n; i++)
        if (node(T.ids[i])->r) st_raft_tick(node(T.ids[i])->r);
}

/* An entry written straight to a node's disk (durable), before it starts. */
static void disk_append(int32_t id, int32_t epoch, const char *data) {
    rm_node_t *n = node(id);
    if (n->nlog == n->caplog) {
        n->caplog = n->caplog ? 2 * n->caplog : 16;
        n->log = st_realloc(n->log, sizeof *n->log * (size_t)n->caplog);
    }
    int64_t base = rm_node_log_end(n);
    rm_entry_t *e = &n->log[n->nlog++];
    e->base = base;
    e->epoch = epoch;
    e->count = 1;
    e->control = 0;
    e->len = (int32_t)strlen(data);
    e->data = (uint8_t *)st_strdup(data);
    n->durable_end = rm_node_log_end(n);
}

static void disk_qstate(int32_t id, int32_t epoch, int32_t leader, int32_t voted) {
    st_raft_qstate_t qs = {.leader_epoch = epoch, .leader_id = leader, .voted_id = voted,
                           .nvoters = T.n};
    for (int i = 0; i < T.n; i++) qs.voters[i] = T.ids[i];
    st_buf_t b;
    st_buf_init(&b);
    st_raft_qstate_encode(&qs, &b);
    memcpy(node(id)->qs, b.data, b.len);
    node(id)->qs_len = b.len;
    st_buf_fini(&b);
}

static st_raft_qstate_t disk_qstate_read(int32_t id) {
    st_raft_qstate_t qs;
    char why[256];
    assert_int_equal(st_raft_qstate_decode(node(id)->qs, node(id)->qs_len, &qs, why, sizeof why),
                     ST_OK);
    return qs;
}

static st_raft_msg_t vote_req(int32_t from, int32_t to, int32_t epoch, int32_t last_epoch,
                              int64_t last_offset, int pre) {
    st_raft_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = ST_RAFT_VOTE_REQUEST;
    m.request_id = 77;
    m.u.vote_req = (st_raft_vote_request_t){to, epoch, from, last_epoch, last_offset, (int8_t)pre};
    return m;
}

/* Makes node `id` the leader by answering its pre-votes and votes as
 * voter `helper` (the third node stays silent). */
static void elect_by_hand(int32_t id, int32_t helper) {
    T.now += 3 * T.cfg.election_timeout_ms;
    st_raft_tick(R(id));
    st_raft_msg_t *pv = take(helper, ST_RAFT_VOTE_REQUEST);
    assert_non_null(pv);
    assert_true(pv->u.vote_req.pre_vote);
    st_raft_msg_t resp;
    memset(&resp, 0, sizeof resp);
    resp.type = ST_RAFT_VOTE_RESPONSE;
    resp.request_id = pv->request_id;
    resp.u.vote_resp = (st_raft_vote_response_t){0, -1, st_raft_epoch(R(id)), 1};
    rm_msg_free(pv);
    st_raft_recv(R(id), helper, &resp);
    assert_int_equal(st_raft_role(R(id)), ST_RAFT_CANDIDATE);
    st_raft_msg_t *v = take(helper, ST_RAFT_VOTE_REQUEST);
    assert_non_null(v);
    assert_false(v->u.vote_req.pre_vote);
    resp.request_id = v->request_id;
    resp.u.vote_resp.leader_epoch = st_raft_epoch(R(id));
    rm_msg_free(v);
    st_raft_recv(R(id), helper, &resp);
    assert_int_equal(st_raft_role(R(id)), ST_RAFT_LEADER);
    flush_all();
    drop_queue();
}

static st_raft_msg_t *fetch_from(int32_t leader, int32_t from, int64_t off, int32_t lfe) {
    st_raft_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = ST_RAFT_FETCH_REQUEST;
    m.request_id = 1000 + (int32_t)off;
    m.u.fetch_req = (st_raft_fetch_request_t){from, 0, st_raft_epoch(R(leader)), off, lfe, 0,
                                              1 << 20};
    st_raft_recv(R(leader), from, &m);
    return take(from, ST_RAFT_FETCH_RESPONSE);
}

/* ---- tests --------------------------------------------------------------------- */

static void test_single_voter(void **state) {
    (void)state;
    setup_nodes(1);
    start(1);
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_UNATTACHED);
    st_raft_tick(R(1));
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_LEADER);
    assert_int_equal(st_raft_epoch(R(1)), 1);
    assert_int_equal(disk_qstate_read(1).leader_id, 1); /* persisted before acting */
    flush_all();
    assert_int_equal(st_raft_high_watermark(R(1)), 1); /* the LeaderChange entry */
    int64_t off = -1;
    int32_t ep = -1;
    assert_int_equal(st_raft_propose(R(1), (const uint8_t *)"abc", 3, 1, &off, &ep), ST_OK);
    assert_int_equal(off, 1);
    assert_int_equal(ep, 1);
    assert_int_equal(st_raft_applied_offset(R(1)), 1); /* not durable yet */
    flush_all();
    assert_int_equal(st_raft_high_watermark(R(1)), 2);
    assert_int_equal(st_raft_applied_offset(R(1)), 2);
    assert_int_equal(node(1)->sm_next, 2);
    assert_int_equal(node(1)->log[0].control, ST_RAFT_CONTROL_LEADER_CHANGE);
}

/* The only voter restarted after leading: it may not go on leading its
 * old epoch, but it stands for the next at its first tick, with no
 * election timeout to wait (nobody else could win meanwhile). */
static void test_single_voter_restart(void **state) {
    (void)state;
    setup_nodes(1);
    disk_append(1, 1, "before the restart");
    disk_qstate(1, 1, 1, 1);
    start(1);
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_RESIGNED);
    st_raft_tick(R(1)); /* no time passed */
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_LEADER);
    assert_int_equal(st_raft_epoch(R(1)), 2);
    flush_all();
    assert_int_equal(st_raft_high_watermark(R(1)), 2); /* the old entry and the LeaderChange */
}

static void test_three_voter_election(void **state) {
    (void)state;
    setup_nodes(3);
    for (int i = 1; i <= 3; i++) start(i);
    T.now += 3 * T.cfg.election_timeout_ms; /* past every jittered timeout */
    st_raft_tick(R(2));                     /* node 2 times out first */
    assert_int_equal(st_raft_role(R(2)), ST_RAFT_PROSPECTIVE);
    assert_int_equal(st_raft_epoch(R(2)), 0); /* a pre-vote raises nothing */
    route();
    assert_int_equal(st_raft_role(R(2)), ST_RAFT_LEADER);
    assert_int_equal(st_raft_epoch(R(2)), 1);
    for (int i = 1; i <= 3; i += 2) {
        assert_int_equal(st_raft_role(R(i)), ST_RAFT_FOLLOWER);
        assert_int_equal(st_raft_leader_id(R(i)), 2);
        assert_int_equal(disk_qstate_read(i).voted_id, 2);
    }
    assert_int_equal(st_raft_propose(R(2), (const uint8_t *)"x", 1, 1, NULL, NULL), ST_OK);
    route();
    tick_all();
    route();
    for (int i = 1; i <= 3; i++) assert_int_equal(st_raft_applied_offset(R(i)), 2);
    assert_int_equal(st_raft_propose(R(1), (const uint8_t *)"x", 1, 1, NULL, NULL),
                     ST_E_NOT_LEADER_OR_FOLLOWER);
    st_raft_describe_t d;
    assert_int_equal(st_raft_describe(R(2), &d), ST_OK);
    assert_int_equal(d.nvoters, 3);
    assert_int_equal(d.high_watermark, 2);
}

static st_raft_vote_response_t ask(int32_t to, st_raft_msg_t m) {
    st_raft_recv(R(to), m.u.vote_req.replica_id, &m);
    st_raft_msg_t *r = take(m.u.vote_req.replica_id, ST_RAFT_VOTE_RESPONSE);
    assert_non_null(r);
    st_raft_vote_response_t v = r->u.vote_resp;
    rm_msg_free(r);
    return v;
}

static void test_vote_refusals(void **state) {
    (void)state;
    setup_nodes(3);
    disk_append(1, 1, "a");
    disk_append(1, 2, "b");
    disk_qstate(1, 3, -1, -1);
    start(1);
    /* An older epoch is fenced. */
    st_raft_vote_response_t v = ask(1, vote_req(2, 1, 2, 2, 2, 0));
    assert_int_equal(v.error_code, ST_E_FENCED_LEADER_EPOCH);
    assert_false(v.vote_granted);
    assert_int_equal(v.leader_epoch, 3);
    /* A log less up to date is refused: lower last epoch, more entries. */
    v = ask(1, vote_req(2, 1, 4, 1, 10, 0));
    assert_int_equal(v.error_code, 0);
    assert_false(v.vote_granted);
    assert_int_equal(st_raft_epoch(R(1)), 4); /* the epoch was taken nonetheless */
    /* Same last epoch, shorter log: refused. */
    v = ask(1, vote_req(2, 1, 4, 2, 1, 0));
    assert_false(v.vote_granted);
    /* Up to date: granted, and persisted before the answer left. */
    v = ask(1, vote_req(2, 1, 4, 2, 2, 0));
    assert_true(v.vote_granted);
    assert_int_equal(disk_qstate_read(1).voted_id, 2);
    assert_int_equal(disk_qstate_read(1).leader_epoch, 4);
    /* One vote per epoch: node 3 is refused, node 2 asked again is not. */
    v = ask(1, vote_req(3, 1, 4, 5, 50, 0));
    assert_false(v.vote_granted);
    v = ask(1, vote_req(2, 1, 4, 2, 2, 0));
    assert_true(v.vote_granted);
    /* A node that is not a voter. */
    v = ask(1, vote_req(9, 1, 5, 5, 50, 0));
    assert_int_equal(v.error_code, ST_RAFT_ERR_INCONSISTENT_VOTER_SET);
    assert_false(v.vote_granted);
    assert_int_equal(st_raft_epoch(R(1)), 4);
    /* Another cluster. */
    st_raft_msg_t m = vote_req(3, 1, 5, 5, 50, 0);
    st_raft_destroy(R(1));
    node(1)->r = NULL;
    T.cfg.cluster_id = "cluster-a";
    start(1);
    m.cluster_id = "cluster-b";
    v = ask(1, m);
    assert_int_equal(v.error_code, ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID);
    assert_false(v.vote_granted);
}

static void test_prevote_refused_with_live_leader(void **state) {
    (void)state;
    setup_nodes(3);
    for (int i = 1; i <= 3; i++) start(i);
    T.now += 3 * T.cfg.election_timeout_ms;
    st_raft_tick(R(1));
    route();
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_LEADER);
    tick_all();
    route(); /* the followers fetched from node 1 */
    int32_t ep = st_raft_epoch(R(2));
    /* Node 3 (say, partitioned and back) asks node 2 for a pre-vote. */
    st_raft_vote_response_t v = ask(2, vote_req(3, 2, ep, ep, 100, 1));
    assert_false(v.vote_granted);
    assert_int_equal(v.leader_id, 1);
    assert_int_equal(st_raft_epoch(R(2)), ep); /* nothing raised */
    assert_int_equal(st_raft_role(R(2)), ST_RAFT_FOLLOWER);
    /* The leader says no too. */
    v = ask(1, vote_req(3, 1, ep, ep, 100, 1));
    assert_false(v.vote_granted);
    /* Once node 2 has not heard from the leader for the fetch timeout, it
     * goes prospective and would grant. */
    drop_queue();
    T.now += T.cfg.fetch_timeout_ms + 1;
    st_raft_tick(R(2));
    assert_int_equal(st_raft_role(R(2)), ST_RAFT_PROSPECTIVE);
    drop_queue();
    v = ask(2, vote_req(3, 2, ep, ep, 100, 1));
    assert_true(v.vote_granted);
    assert_int_equal(st_raft_voted_id(R(2)), disk_qstate_read(2).voted_id); /* unchanged */
}

static void test_diverging_truncation(void **state) {
    (void)state;
    setup_nodes(3);
    /* Leader 1: epoch 1 [0,3); follower 2: the same, then epoch 2 [3,6)
     * that never committed. */
    for (int i = 0; i < 3; i++) {
        disk_append(1, 1, "e1");
        disk_append(2, 1, "e1");
    }
    for (int i = 0; i < 3; i++) disk_append(2, 2, "e2");
    disk_qstate(1, 2, -1, -1);
    start(1);
    elect_by_hand(1, 3); /* epoch 3, LeaderChange at 3 */
    assert_int_equal(st_raft_epoch(R(1)), 3);
    /* The leader's side: follower 2 at offset 6, last epoch 2. */
    st_raft_msg_t *r = fetch_from(1, 2, 6, 2);
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.error_code, 0);
    assert_int_equal(r->u.fetch_resp.diverging_epoch.epoch, 1);
    assert_int_equal(r->u.fetch_resp.diverging_epoch.end_offset, 3);
    assert_int_equal(r->u.fetch_resp.nrecords, 0);
    rm_msg_free(r);
    /* The follower's side, over the wire. */
    disk_qstate(2, 3, 1, -1);
    start(2);
    assert_int_equal(st_raft_role(R(2)), ST_RAFT_FOLLOWER);
    st_raft_tick(R(2));
    route();
    assert_int_equal(rm_node_log_end(node(2)), 4);
    assert_int_equal(node(2)->log[3].epoch, 3);
    assert_int_equal(node(2)->log[3].control, ST_RAFT_CONTROL_LEADER_CHANGE);
    assert_int_equal(st_raft_high_watermark(R(1)), 4);
    assert_int_equal(st_raft_applied_offset(R(2)), 4);
}

static void test_hw_waits_for_current_epoch(void **state) {
    (void)state;
    setup_nodes(3);
    /* The figure 8 case: entries of epoch 1 at [0,3) on the leader only
     * (never committed), the leader now in epoch 3 with its LeaderChange at
     * 3.  A follower that reaches 3 makes a majority hold [0,3), but those
     * entries are of an older epoch: they commit only with the entry at 3. */
    for (int i = 0; i < 3; i++) disk_append(1, 1, "old");
    disk_qstate(1, 2, -1, -1);
    start(1);
    elect_by_hand(1, 3);
    assert_int_equal(st_raft_high_watermark(R(1)), 0);
    st_raft_msg_t *r = fetch_from(1, 2, 0, 0);
    assert_int_equal(r->u.fetch_resp.nrecords, 4);
    rm_msg_free(r);
    r = fetch_from(1, 2, 3, 1); /* follower durable at 3: [0,3) on a majority */
    assert_int_equal(r->u.fetch_resp.high_watermark, 0);
    rm_msg_free(r);
    assert_int_equal(st_raft_high_watermark(R(1)), 0);
    assert_int_equal(st_raft_applied_offset(R(1)), 0);
    r = fetch_from(1, 2, 4, 3); /* and now the LeaderChange too */
    assert_int_equal(r->u.fetch_resp.high_watermark, 4);
    rm_msg_free(r);
    assert_int_equal(st_raft_applied_offset(R(1)), 4);
}

static void test_hw_planted_bug_is_visible(void **state) {
    (void)state;
    /* The simulator's planted bug does what it says: one voter's durable
     * end moves the high watermark. */
    setup_nodes(3);
    st_raft__set_planted_bug(ST_RAFT_BUG_COMMIT_WITHOUT_MAJORITY);
    start(1);
    elect_by_hand(1, 3);
    assert_int_equal(st_raft_high_watermark(R(1)), 1);
}

static void test_follower_below_log_start_gets_snapshot(void **state) {
    (void)state;
    setup_nodes(3);
    T.cfg.snapshot_min_new_bytes = 10;
    T.cfg.snapshot_chunk_bytes = 1000; /* the snapshot is 2520 bytes: 3 chunks */
    disk_qstate(1, 1, -1, -1);
    start(1);
    elect_by_hand(1, 3);
    for (int i = 0; i < 5; i++)
        assert_int_equal(st_raft_propose(R(1), (const uint8_t *)"0123456789", 10, 1, NULL, NULL),
                         ST_OK);
    flush_all();
    st_raft_msg_t *r = fetch_from(1, 3, 0, 0); /* node 3 takes everything */
    rm_msg_free(r);
    r = fetch_from(1, 3, 6, 2);
    rm_msg_free(r);
    assert_int_equal(st_raft_applied_offset(R(1)), 6);
    assert_true(node(1)->has_snap);
    assert_int_equal(node(1)->snap_id.end_offset, 6);
    assert_int_equal(node(1)->log_start, 6);
    /* Node 2 starts empty: its Fetch at 0 is answered with the snapshot id. */
    disk_qstate(2, 2, 1, -1);
    start(2);
    r = fetch_from(1, 2, 0, 0);
    assert_int_equal(r->u.fetch_resp.snapshot_id.end_offset, 6);
    assert_int_equal(r->u.fetch_resp.snapshot_id.epoch, 2);
    rm_msg_free(r);
    /* The first copy arrives damaged (the host's install refuses it): the
     * follower does not stop, it fetches the snapshot again. */
    node(2)->damage_install = 1;
    for (int round = 0; round < 20 && node(2)->snapshots_installed == 0; round++) {
        st_raft_tick(R(2));
        route();
        T.now += T.cfg.retry_backoff_ms + 1; /* past the backoff after the refusal */
    }
    assert_int_equal(st_raft_failed(R(2)), ST_OK);
    assert_int_equal(node(2)->damage_install, 0);
    assert_int_equal(node(2)->snapshots_installed, 1);
    assert_int_equal(node(2)->log_start, 6);
    assert_int_equal(st_raft_applied_offset(R(2)), 6);
    assert_true(node(2)->sm_hash == node(1)->sm_hash);
    /* and it goes on fetching from there */
    assert_int_equal(st_raft_propose(R(1), (const uint8_t *)"after", 5, 1, NULL, NULL), ST_OK);
    route();
    tick_all();
    route();
    assert_int_equal(st_raft_applied_offset(R(2)), 7);
    assert_true(node(2)->sm_hash == node(1)->sm_hash);
}

static void test_quorum_state_refused(void **state) {
    (void)state;
    setup_nodes(3);
    disk_qstate(1, 5, 2, 2);
    st_raft_qstate_t qs;
    char why[256];
    /* Truncated. */
    assert_int_equal(st_raft_qstate_decode(node(1)->qs, node(1)->qs_len - 3, &qs, why, sizeof why),
                     ST_E_TRUNCATED);
    assert_non_null(strstr(why, "truncated"));
    assert_int_equal(st_raft_qstate_decode(node(1)->qs, 10, &qs, why, sizeof why), ST_E_TRUNCATED);
    /* A flipped bit in the epoch. */
    node(1)->qs[11] ^= 0x04;
    assert_int_equal(st_raft_qstate_decode(node(1)->qs, node(1)->qs_len, &qs, why, sizeof why),
                     ST_E_CORRUPT);
    assert_non_null(strstr(why, "checksum"));
    char err[256];
    st_raft_config_t cfg = T.cfg;
    cfg.node_id = 1;
    assert_int_equal(rm_node_start(node(1), &cfg, err, sizeof err), ST_E_CORRUPT);
    assert_non_null(strstr(err, "quorum-state checksum mismatch"));
    assert_null(node(1)->r);
    /* Another magic. */
    disk_qstate(1, 5, 2, 2);
    memcpy(node(1)->qs, "XXXX", 4);
    assert_int_equal(rm_node_start(node(1), &cfg, err, sizeof err), ST_E_CORRUPT);
    assert_non_null(strstr(err, "magic"));
    /* Round trip. */
    disk_qstate(1, 5, 2, 3);
    qs = disk_qstate_read(1);
    assert_int_equal(qs.leader_epoch, 5);
    assert_int_equal(qs.leader_id, 2);
    assert_int_equal(qs.voted_id, 3);
    assert_int_equal(qs.nvoters, 3);
}

static void test_voter_set_mismatch_refused(void **state) {
    (void)state;
    setup_nodes(3);
    disk_qstate(1, 5, 2, 2); /* voters 1,2,3 */
    st_raft_config_t cfg = T.cfg;
    cfg.node_id = 1;
    int32_t two[2] = {2, 1};
    cfg.voters = two;
    cfg.nvoters = 2;
    char err[512];
    assert_int_equal(rm_node_start(node(1), &cfg, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "quorum-state lists voters [1,2,3]"));
    assert_non_null(strstr(err, "controller.quorum.voters names [1,2]"));
    /* A duplicate in the configuration. */
    int32_t dup[3] = {1, 2, 2};
    cfg.voters = dup;
    cfg.nvoters = 3;
    assert_int_equal(rm_node_start(node(1), &cfg, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "distinct"));
}

static void test_failed_op_stops_node(void **state) {
    (void)state;
    setup_nodes(3);
    start(1);
    node(1)->fail_persist = ST_E_IO;
    T.now += 3 * T.cfg.election_timeout_ms;
    st_raft_tick(R(1));                  /* prospective: nothing to persist */
    /* A Vote that would be granted: the vote cannot be made durable, so
     * no answer leaves and the node stops. */
    st_raft_msg_t m = vote_req(2, 1, 1, 0, 0, 0);
    st_raft_recv(R(1), 2, &m);
    assert_null(take(2, ST_RAFT_VOTE_RESPONSE));
    assert_int_equal(st_raft_failed(R(1)), ST_E_IO);
    assert_int_equal(st_raft_tick(R(1)), -1);
    assert_int_equal(st_raft_propose(R(1), (const uint8_t *)"x", 1, 1, NULL, NULL), ST_E_IO);
}

static void test_stale_response_ignored(void **state) {
    (void)state;
    setup_nodes(3);
    start(1);
    T.now += 3 * T.cfg.election_timeout_ms;
    st_raft_tick(R(1));
    st_raft_msg_t *pv = take(2, ST_RAFT_VOTE_REQUEST);
    assert_non_null(pv);
    st_raft_msg_t resp;
    memset(&resp, 0, sizeof resp);
    resp.type = ST_RAFT_VOTE_RESPONSE;
    resp.request_id = pv->request_id + 1000; /* not the one in flight */
    resp.u.vote_resp = (st_raft_vote_response_t){0, -1, 0, 1};
    st_raft_recv(R(1), 2, &resp);
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_PROSPECTIVE);
    resp.request_id = pv->request_id;
    st_raft_recv(R(1), 2, &resp);
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_CANDIDATE);
    st_raft_recv(R(1), 2, &resp); /* a duplicate of it: stale now */
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_CANDIDATE);
    rm_msg_free(pv);
}


static void test_observer_does_not_count(void **state) {
    (void)state;
    setup_nodes(3);
    disk_qstate(1, 1, -1, -1);
    start(1);
    elect_by_hand(1, 3); /* epoch 2 */
    /* Node 9 is no voter: its Fetch is served but moves no high watermark. */
    st_raft_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = ST_RAFT_FETCH_REQUEST;
    m.request_id = 5;
    m.u.fetch_req = (st_raft_fetch_request_t){9, 0, 2, 1, 2, 0, 1 << 20};
    st_raft_recv(R(1), 9, &m);
    st_raft_msg_t *r = NULL;
    for (int i = 0; i < T.nq; i++)
        if (T.q[i].to == 9) r = T.q[i].m;
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.error_code, 0);
    assert_int_equal(st_raft_high_watermark(R(1)), 0);
    drop_queue();
    st_raft_describe_t d;
    assert_int_equal(st_raft_describe(R(1), &d), ST_OK);
    assert_int_equal(d.nobservers, 1);
    assert_int_equal(d.observers[0].replica_id, 9);
    assert_int_equal(d.observers[0].log_end_offset, 1);
    /* A voter's Fetch does. */
    r = fetch_from(1, 2, 1, 2);
    assert_int_equal(r->u.fetch_resp.high_watermark, 1);
    rm_msg_free(r);
}

static void test_fetch_long_poll(void **state) {
    (void)state;
    setup_nodes(3);
    disk_qstate(1, 1, -1, -1);
    start(1);
    elect_by_hand(1, 3);
    st_raft_msg_t *r = fetch_from(1, 2, 1, 2); /* moves the high watermark: answered */
    assert_non_null(r);
    rm_msg_free(r);
    st_raft_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = ST_RAFT_FETCH_REQUEST;
    m.request_id = 42;
    m.u.fetch_req = (st_raft_fetch_request_t){2, 500, 2, 1, 2, 0, 1 << 20};
    st_raft_recv(R(1), 2, &m);
    assert_null(take(2, ST_RAFT_FETCH_RESPONSE)); /* nothing new: parked */
    int64_t d = st_raft_next_deadline(R(1));
    assert_true(d > T.now && d <= T.now + T.cfg.fetch_max_wait_ms);
    assert_int_equal(st_raft_propose(R(1), (const uint8_t *)"new", 3, 1, NULL, NULL), ST_OK);
    r = take(2, ST_RAFT_FETCH_RESPONSE); /* the append answers it */
    assert_non_null(r);
    assert_int_equal(r->request_id, 42);
    assert_int_equal(r->u.fetch_resp.nrecords, 1);
    rm_msg_free(r);
    /* With the leader's copy durable too, a Fetch at 2 moves the high
     * watermark and is answered at once; the next one is parked until
     * max_wait, then answered empty. */
    flush_all();
    m.request_id = 43;
    m.u.fetch_req.fetch_offset = 2;
    st_raft_recv(R(1), 2, &m);
    r = take(2, ST_RAFT_FETCH_RESPONSE);
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.high_watermark, 2);
    rm_msg_free(r);
    m.request_id = 44;
    st_raft_recv(R(1), 2, &m);
    assert_null(take(2, ST_RAFT_FETCH_RESPONSE));
    T.now += T.cfg.fetch_max_wait_ms - 1;
    st_raft_tick(R(1));
    assert_null(take(2, ST_RAFT_FETCH_RESPONSE));
    T.now += 1;
    st_raft_tick(R(1));
    r = take(2, ST_RAFT_FETCH_RESPONSE);
    assert_non_null(r);
    assert_int_equal(r->request_id, 44);
    assert_int_equal(r->u.fetch_resp.nrecords, 0);
    rm_msg_free(r);
}

static void test_check_quorum_resigns(void **state) {
    (void)state;
    setup_nodes(3);
    disk_qstate(1, 1, -1, -1);
    start(1);
    elect_by_hand(1, 3);
    /* Nobody fetches: after 1.5 x fetch timeout the leader resigns and
     * tells the voters with EndQuorumEpoch. */
    T.now += T.cfg.fetch_timeout_ms * 3 / 2;
    st_raft_tick(R(1));
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_RESIGNED);
    assert_int_equal(st_raft_propose(R(1), (const uint8_t *)"x", 1, 1, NULL, NULL),
                     ST_E_NOT_LEADER_OR_FOLLOWER);
    st_raft_msg_t *e = take(2, ST_RAFT_END_QUORUM_EPOCH_REQUEST);
    assert_non_null(e);
    assert_int_equal(e->u.end_req.leader_epoch, 2);
    rm_msg_free(e);
    /* A follower that gets it as first preferred successor starts an
     * election at once instead of waiting for its fetch timeout. */
    disk_qstate(2, 2, 1, -1);
    start(2);
    st_raft_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = ST_RAFT_END_QUORUM_EPOCH_REQUEST;
    m.request_id = 9;
    m.u.end_req.leader_id = 1;
    m.u.end_req.leader_epoch = 2;
    m.u.end_req.npreferred = 2;
    m.u.end_req.preferred_successors[0] = 2;
    m.u.end_req.preferred_successors[1] = 3;
    st_raft_recv(R(2), 1, &m);
    st_raft_tick(R(2));
    assert_int_equal(st_raft_role(R(2)), ST_RAFT_PROSPECTIVE);
}

static void test_hostile_fetch_keeps_leader(void **state) {
    (void)state;
    setup_nodes(3);
    disk_qstate(1, 1, -1, -1);
    start(1);
    elect_by_hand(1, 3);
    int64_t off = 0;
    assert_int_equal(st_raft_propose(R(1), (const uint8_t *)"batch", 5, 3, &off, NULL), ST_OK);
    flush_all();
    /* A Fetch in the middle of an entry of 3 records is refused; the
     * leader goes on. */
    st_raft_msg_t *r = fetch_from(1, 2, off + 1, 2);
    assert_non_null(r);
    assert_int_equal(r->u.fetch_resp.error_code, ST_E_OFFSET_OUT_OF_RANGE);
    rm_msg_free(r);
    assert_int_equal(st_raft_failed(R(1)), ST_OK);
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_LEADER);
    /* A FetchSnapshot of a snapshot that does not exist, and one past its end. */
    T.cfg.snapshot_min_new_bytes = 1;
    st_raft_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = ST_RAFT_FETCH_SNAPSHOT_REQUEST;
    m.request_id = 3;
    m.u.fsnap_req = (st_raft_fetch_snapshot_request_t){2, 1000, 2, {7, 1}, 0};
    st_raft_recv(R(1), 2, &m);
    r = take(2, ST_RAFT_FETCH_SNAPSHOT_RESPONSE);
    assert_non_null(r);
    assert_int_equal(r->u.fsnap_resp.error_code, ST_RAFT_ERR_SNAPSHOT_NOT_FOUND);
    rm_msg_free(r);
    assert_int_equal(st_raft_failed(R(1)), ST_OK);
    /* A Fetch whose epoch is ahead of the leader's, and one behind. */
    memset(&m, 0, sizeof m);
    m.type = ST_RAFT_FETCH_REQUEST;
    m.request_id = 4;
    m.u.fetch_req = (st_raft_fetch_request_t){2, 0, 3, 0, 0, 0, 1000};
    st_raft_recv(R(1), 2, &m);
    r = take(2, ST_RAFT_FETCH_RESPONSE);
    assert_int_equal(r->u.fetch_resp.error_code, ST_E_UNKNOWN_LEADER_EPOCH);
    rm_msg_free(r);
    m.u.fetch_req.current_leader_epoch = 1;
    st_raft_recv(R(1), 2, &m);
    r = take(2, ST_RAFT_FETCH_RESPONSE);
    assert_int_equal(r->u.fetch_resp.error_code, ST_E_FENCED_LEADER_EPOCH);
    assert_int_equal(r->u.fetch_resp.current_leader.leader_id, 1);
    assert_int_equal(r->u.fetch_resp.current_leader.leader_epoch, 2);
    rm_msg_free(r);
    assert_int_equal(st_raft_role(R(1)), ST_RAFT_LEADER);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_single_voter, teardown),
        cmocka_unit_test_teardown(test_single_voter_restart, teardown),
        cmocka_unit_test_teardown(test_three_voter_election, teardown),
        cmocka_unit_test_teardown(test_vote_refusals, teardown),
        cmocka_unit_test_teardown(test_prevote_refused_with_live_leader, teardown),
        cmocka_unit_test_teardown(test_diverging_truncation, teardown),
        cmocka_unit_test_teardown(test_hw_waits_for_current_epoch, teardown),
        cmocka_unit_test_teardown(test_hw_planted_bug_is_visible, teardown),
        cmocka_unit_test_teardown(test_follower_below_log_start_gets_snapshot, teardown),
        cmocka_unit_test_teardown(test_quorum_state_refused, teardown),
        cmocka_unit_test_teardown(test_voter_set_mismatch_refused, teardown),
        cmocka_unit_test_teardown(test_failed_op_stops_node, teardown),
        cmocka_unit_test_teardown(test_stale_response_ignored, teardown),
        cmocka_unit_test_teardown(test_observer_does_not_count, teardown),
        cmocka_unit_test_teardown(test_fetch_long_poll, teardown),
        cmocka_unit_test_teardown(test_check_quorum_resigns, teardown),
        cmocka_unit_test_teardown(test_hostile_fetch_keeps_leader, teardown),
    };
    st_log_set_level(ST_LOG_ERROR);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

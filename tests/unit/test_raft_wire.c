/*
 * test_raft_wire.c - every Raft message through Kafka's wire structs and
 * the codec and back (broker/controller/raft_wire.c), at each version a
 * peer may speak, and the refusals of a request that names anything but
 * __cluster_metadata-0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft_wire.h"

/* Records ops for the test: each entry as its fields and bytes. */
static void rec_encode(void *arg, const st_raft_entry_t *e, int n, st_buf_t *out) {
    (void)arg;
    for (int i = 0; i < n; i++) {
        st_buf_put_i64(out, e[i].base_offset);
        st_buf_put_i32(out, e[i].epoch);
        st_buf_put_i32(out, e[i].record_count);
        st_buf_put_i32(out, e[i].control);
        st_buf_put_i32(out, e[i].len);
        st_buf_put(out, e[i].data, (size_t)e[i].len);
    }
}

static st_err_t rec_decode(void *arg, const uint8_t *p, size_t len, st_arena_t *a,
                           st_raft_entry_t **entries, int *n, char *why, size_t whylen) {
    (void)arg;
    st_raft_entry_t *v = st_arena_alloc(a, sizeof *v * 16);
    int k = 0;
    st_rd_t r;
    st_rd_init(&r, p, len);
    while (r.pos < len && k < 16) {
        v[k].base_offset = st_rd_i64(&r);
        v[k].epoch = st_rd_i32(&r);
        v[k].record_count = st_rd_i32(&r);
        v[k].control = st_rd_i32(&r);
        v[k].len = st_rd_i32(&r);
        if (r.err || v[k].len < 0 || (size_t)v[k].len > len - r.pos) {
            snprintf(why, whylen, "entry %d is cut", k);
            return ST_E_CORRUPT;
        }
        v[k].data = p + r.pos;
        r.pos += (size_t)v[k].len;
        k++;
    }
    *entries = v;
    *n = k;
    return ST_OK;
}

static const st_raft_records_ops_t ro = {NULL, rec_encode, rec_decode};

/* m -> body -> bytes at v -> body -> message */
static st_err_t through_wire(const st_raft_msg_t *m, int16_t v, st_arena_t *a, st_raft_msg_t *out,
                             int16_t *werr, char *why, size_t whylen) {
    int16_t key = st_raft_wire_api(m->type);
    const st_api_t *api = st_api_lookup(key);
    assert_non_null(api);
    assert_true(st_api_described(api, v));
    int resp = m->type % 2 == 0;
    const st_schema_t *s = resp ? api->resp : api->req;
    st_buf_t records;
    st_buf_init(&records);
    void *body = NULL;
    assert_int_equal(st_raft_wire_encode(m, v, &ro, a, &records, &body), ST_OK);
    st_chain_t c;
    st_chain_init(&c);
    st_encode(s, v, st_api_flexible(api, v), body, &c);
    st_chain_seal(&c);
    uint8_t *bytes = st_arena_alloc(a, c.mem.len);
    memcpy(bytes, c.mem.data, c.mem.len);
    size_t blen = c.mem.len;
    st_chain_fini(&c);
    st_buf_fini(&records);
    void *back = st_arena_alloc(a, s->size);
    st_rd_t r;
    st_rd_init(&r, bytes, blen);
    assert_int_equal(st_decode(s, v, st_api_flexible(api, v), &r, a, back), ST_OK);
    assert_int_equal(r.pos, blen);
    return st_raft_wire_decode(key, v, resp, back, &ro, a, out, werr, why, whylen);
}

static void roundtrip(const st_raft_msg_t *m, int16_t v) {
    st_arena_t a;
    st_arena_init(&a, 0);
    st_raft_msg_t out;
    int16_t werr;
    char why[256];
    st_err_t e = through_wire(m, v, &a, &out, &werr, why, sizeof why);
    if (e) fail_msg("message type %d v%d: %s (%d)", (int)m->type, v, why, werr);
    assert_int_equal(out.type, m->type);
    if (m->cluster_id) assert_string_equal(out.cluster_id, m->cluster_id);
    else assert_null(out.cluster_id);
    switch (m->type) {
    case ST_RAFT_VOTE_REQUEST:
        assert_int_equal(out.u.vote_req.replica_epoch, m->u.vote_req.replica_epoch);
        assert_int_equal(out.u.vote_req.replica_id, m->u.vote_req.replica_id);
        assert_int_equal(out.u.vote_req.last_offset_epoch, m->u.vote_req.last_offset_epoch);
        assert_int_equal(out.u.vote_req.last_offset, m->u.vote_req.last_offset);
        assert_int_equal(out.u.vote_req.pre_vote, m->u.vote_req.pre_vote);
        /* voter_id is on the wire from v1 */
        assert_int_equal(out.u.vote_req.voter_id, v >= 1 ? m->u.vote_req.voter_id : -1);
        break;
    case ST_RAFT_VOTE_RESPONSE:
        assert_memory_equal(&out.u.vote_resp, &m->u.vote_resp, sizeof out.u.vote_resp);
        break;
    case ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST:
        assert_int_equal(out.u.begin_req.leader_id, m->u.begin_req.leader_id);
        assert_int_equal(out.u.begin_req.leader_epoch, m->u.begin_req.leader_epoch);
        assert_int_equal(out.u.begin_req.voter_id, v >= 1 ? m->u.begin_req.voter_id : -1);
        break;
    case ST_RAFT_END_QUORUM_EPOCH_REQUEST:
        assert_int_equal(out.u.end_req.leader_id, m->u.end_req.leader_id);
        assert_int_equal(out.u.end_req.leader_epoch, m->u.end_req.leader_epoch);
        assert_int_equal(out.u.end_req.npreferred, m->u.end_req.npreferred);
        assert_memory_equal(out.u.end_req.preferred_successors, m->u.end_req.preferred_successors,
                            sizeof(int32_t) * (size_t)m->u.end_req.npreferred);
        break;
    case ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE:
    case ST_RAFT_END_QUORUM_EPOCH_RESPONSE:
        assert_memory_equal(&out.u.epoch_resp, &m->u.epoch_resp, sizeof out.u.epoch_resp);
        break;
    case ST_RAFT_FETCH_REQUEST:
        assert_memory_equal(&out.u.fetch_req, &m->u.fetch_req, sizeof out.u.fetch_req);
        break;
    case ST_RAFT_FETCH_RESPONSE: {
        const st_raft_fetch_response_t *w = &m->u.fetch_resp, *g = &out.u.fetch_resp;
        assert_int_equal(g->error_code, w->error_code);
        assert_int_equal(g->high_watermark, w->high_watermark);
        assert_int_equal(g->log_start_offset, w->log_start_offset);
        assert_int_equal(g->diverging_epoch.epoch, w->diverging_epoch.epoch);
        assert_int_equal(g->diverging_epoch.end_offset, w->diverging_epoch.end_offset);
        assert_int_equal(g->current_leader.leader_id, w->current_leader.leader_id);
        assert_int_equal(g->current_leader.leader_epoch, w->current_leader.leader_epoch);
        assert_int_equal(g->snapshot_id.end_offset, w->snapshot_id.end_offset);
        assert_int_equal(g->snapshot_id.epoch, w->snapshot_id.epoch);
        assert_int_equal(g->nrecords, w->nrecords);
        for (int i = 0; i < w->nrecords; i++) {
            assert_int_equal(g->records[i].base_offset, w->records[i].base_offset);
            assert_int_equal(g->records[i].epoch, w->records[i].epoch);
            assert_int_equal(g->records[i].control, w->records[i].control);
            assert_int_equal(g->records[i].len, w->records[i].len);
            assert_memory_equal(g->records[i].data, w->records[i].data, (size_t)w->records[i].len);
        }
        break;
    }
    case ST_RAFT_FETCH_SNAPSHOT_REQUEST:
        assert_memory_equal(&out.u.fsnap_req, &m->u.fsnap_req, sizeof out.u.fsnap_req);
        break;
    case ST_RAFT_FETCH_SNAPSHOT_RESPONSE: {
        const st_raft_fetch_snapshot_response_t *w = &m->u.fsnap_resp, *g = &out.u.fsnap_resp;
        assert_int_equal(g->error_code, w->error_code);
        assert_int_equal(g->snapshot_id.end_offset, w->snapshot_id.end_offset);
        assert_int_equal(g->snapshot_id.epoch, w->snapshot_id.epoch);
        assert_int_equal(g->current_leader.leader_id, w->current_leader.leader_id);
        assert_int_equal(g->current_leader.leader_epoch, w->current_leader.leader_epoch);
        assert_int_equal(g->size, w->size);
        assert_int_equal(g->position, w->position);
        assert_int_equal(g->len, w->len);
        assert_memory_equal(g->unaligned_records, w->unaligned_records, (size_t)w->len);
        break;
    }
    }
    st_arena_fini(&a);
}

static void test_vote(void **state) {
    (void)state;
    st_raft_msg_t m = {.type = ST_RAFT_VOTE_REQUEST, .cluster_id = "MkU3OEVBNTcwNTJENDM2Qk"};
    m.u.vote_req = (st_raft_vote_request_t){2, 7, 3, 6, 1234, 0};
    for (int16_t v = 0; v <= 2; v++) roundtrip(&m, v);
    m.u.vote_req.pre_vote = 1;
    roundtrip(&m, 2);
    m.cluster_id = NULL;
    roundtrip(&m, 2);
    st_raft_msg_t r = {.type = ST_RAFT_VOTE_RESPONSE};
    r.u.vote_resp = (st_raft_vote_response_t){0, 2, 7, 1};
    for (int16_t v = 0; v <= 2; v++) roundtrip(&r, v);
    r.u.vote_resp = (st_raft_vote_response_t){(int16_t)ST_E_FENCED_LEADER_EPOCH, 1, 9, 0};
    roundtrip(&r, 2);
}

static void test_quorum_epochs(void **state) {
    (void)state;
    st_raft_msg_t m = {.type = ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST, .cluster_id = "c1"};
    m.u.begin_req = (st_raft_begin_quorum_epoch_request_t){3, 1, 12};
    roundtrip(&m, 0);
    roundtrip(&m, 1);
    st_raft_msg_t e = {.type = ST_RAFT_END_QUORUM_EPOCH_REQUEST, .cluster_id = "c1"};
    e.u.end_req.leader_id = 1;
    e.u.end_req.leader_epoch = 12;
    e.u.end_req.npreferred = 2;
    e.u.end_req.preferred_successors[0] = 3;
    e.u.end_req.preferred_successors[1] = 2;
    roundtrip(&e, 0);
    roundtrip(&e, 1);
    st_raft_msg_t r = {.type = ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE};
    r.u.epoch_resp = (st_raft_epoch_response_t){0, 1, 12};
    roundtrip(&r, 0);
    roundtrip(&r, 1);
    r.type = ST_RAFT_END_QUORUM_EPOCH_RESPONSE;
    r.u.epoch_resp = (st_raft_epoch_response_t){(int16_t)ST_E_NOT_LEADER_OR_FOLLOWER, -1, 13};
    roundtrip(&r, 0);
    roundtrip(&r, 1);
}

static void test_fetch(void **state) {
    (void)state;
    st_raft_msg_t m = {.type = ST_RAFT_FETCH_REQUEST, .cluster_id = "c1"};
    m.u.fetch_req = (st_raft_fetch_request_t){2, 500, 12, 4096, 11, 100, 8 << 20};
    /* by name (v12), by topic id (v13), the replica in ReplicaState (v15+) */
    for (int16_t v = 12; v <= 17; v++) roundtrip(&m, v);

    static const uint8_t d1[] = "first entry", d2[] = {0, 0, 0, 1, 0, 2};
    st_raft_entry_t ents[2] = {{4096, 12, 1, ST_RAFT_CONTROL_LEADER_CHANGE, d2, sizeof d2},
                               {4097, 12, 3, ST_RAFT_CONTROL_NONE, d1, sizeof d1}};
    st_raft_msg_t r = {.type = ST_RAFT_FETCH_RESPONSE};
    st_raft_fetch_response_t *q = &r.u.fetch_resp;
    q->high_watermark = 4000;
    q->log_start_offset = 100;
    q->diverging_epoch.epoch = -1;
    q->diverging_epoch.end_offset = -1;
    q->current_leader = (st_raft_leader_id_and_epoch_t){1, 12};
    q->snapshot_id = (st_raft_snapshot_id_t){-1, -1};
    q->records = ents;
    q->nrecords = 2;
    for (int16_t v = 12; v <= 17; v++) roundtrip(&r, v);
    /* a diverging answer, then a snapshot answer, with no records */
    q->records = NULL;
    q->nrecords = 0;
    q->diverging_epoch.epoch = 10;
    q->diverging_epoch.end_offset = 3000;
    roundtrip(&r, 15);
    q->diverging_epoch.epoch = -1;
    q->diverging_epoch.end_offset = -1;
    q->snapshot_id = (st_raft_snapshot_id_t){2048, 9};
    roundtrip(&r, 15);
    /* INCONSISTENT_CLUSTER_ID goes top level and comes back as the code */
    q->error_code = ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID;
    roundtrip(&r, 15);
}

static void test_fetch_snapshot(void **state) {
    (void)state;
    st_raft_msg_t m = {.type = ST_RAFT_FETCH_SNAPSHOT_REQUEST, .cluster_id = "c1"};
    m.u.fsnap_req = (st_raft_fetch_snapshot_request_t){2, 1 << 20, 12, {2048, 9}, 65536};
    roundtrip(&m, 0);
    roundtrip(&m, 1);
    static const uint8_t chunk[] = "snapshot bytes";
    st_raft_msg_t r = {.type = ST_RAFT_FETCH_SNAPSHOT_RESPONSE};
    r.u.fsnap_resp = (st_raft_fetch_snapshot_response_t){0, {2048, 9}, {1, 12}, 100000, 65536,
                                                         chunk, sizeof chunk};
    roundtrip(&r, 0);
    roundtrip(&r, 1);
}

/* A request that names another topic, another partition or several is
 * refused with Kafka's code and a sentence; so is a snapshot chunk that
 * claims to lie outside its snapshot. */
static void test_refusals(void **state) {
    (void)state;
    st_arena_t a;
    st_arena_init(&a, 0);
    st_raft_msg_t m = {.type = ST_RAFT_VOTE_REQUEST, .cluster_id = "c1"};
    m.u.vote_req = (st_raft_vote_request_t){2, 7, 3, 6, 1234, 0};
    st_buf_t rec;
    st_buf_init(&rec);
    void *body;
    assert_int_equal(st_raft_wire_encode(&m, 2, &ro, &a, &rec, &body), ST_OK);
    st_vote_req_t *b = body;
    st_raft_msg_t out;
    int16_t werr;
    char why[256];
    b->topics.v[0].topic_name = st_str("orders");
    assert_int_equal(st_raft_wire_decode(ST_API_VOTE, 2, 0, b, &ro, &a, &out, &werr, why, sizeof why),
                     ST_E_INVALID_REQUEST);
    assert_int_equal(werr, (int16_t)ST_E_UNKNOWN_TOPIC_OR_PARTITION);
    assert_non_null(strstr(why, "names orders-0, not __cluster_metadata-0"));
    b->topics.v[0].topic_name = st_str("__cluster_metadata");
    b->topics.v[0].partitions.v[0].partition_index = 1;
    assert_int_equal(st_raft_wire_decode(ST_API_VOTE, 2, 0, b, &ro, &a, &out, &werr, why, sizeof why),
                     ST_E_INVALID_REQUEST);
    assert_non_null(strstr(why, "__cluster_metadata-1"));
    b->topics.n = 0;
    assert_int_equal(st_raft_wire_decode(ST_API_VOTE, 2, 0, b, &ro, &a, &out, &werr, why, sizeof why),
                     ST_E_INVALID_REQUEST);
    assert_int_equal(werr, (int16_t)ST_E_INVALID_REQUEST);
    assert_non_null(strstr(why, "names 0 topics"));

    /* Fetch v13+: by topic id */
    st_raft_msg_t f = {.type = ST_RAFT_FETCH_REQUEST};
    f.u.fetch_req = (st_raft_fetch_request_t){2, 500, 12, 4096, 11, 100, 8 << 20};
    assert_int_equal(st_raft_wire_encode(&f, 15, &ro, &a, &rec, &body), ST_OK);
    st_fetch_req_t *fb = body;
    assert_true(st_raft_wire_is_raft_fetch(15, fb));
    fb->topics.v[0].topic_id.b[0] = 9;
    assert_false(st_raft_wire_is_raft_fetch(15, fb));
    assert_int_equal(st_raft_wire_decode(ST_API_FETCH, 15, 0, fb, &ro, &a, &out, &werr, why,
                                         sizeof why),
                     ST_E_INVALID_REQUEST);
    assert_non_null(strstr(why, "topic id other than __cluster_metadata's"));
    fb->topics.v[0].topic_id.b[0] = 0;
    fb->replica_state.replica_id = -1; /* a consumer's fetch */
    assert_false(st_raft_wire_is_raft_fetch(15, fb));

    st_raft_msg_t s = {.type = ST_RAFT_FETCH_SNAPSHOT_RESPONSE};
    static const uint8_t chunk[16] = {0};
    s.u.fsnap_resp = (st_raft_fetch_snapshot_response_t){0, {2048, 9}, {1, 12}, 100, 90, chunk, 16};
    assert_int_equal(st_raft_wire_encode(&s, 1, &ro, &a, &rec, &body), ST_OK);
    assert_int_equal(st_raft_wire_decode(ST_API_FETCH_SNAPSHOT, 1, 1, body, &ro, &a, &out, &werr,
                                         why, sizeof why),
                     ST_E_CORRUPT);
    assert_non_null(strstr(why, "16 bytes at position 90 of a snapshot of 100 bytes"));
    st_buf_fini(&rec);
    st_arena_fini(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vote),         cmocka_unit_test(test_quorum_epochs),
        cmocka_unit_test(test_fetch),        cmocka_unit_test(test_fetch_snapshot),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

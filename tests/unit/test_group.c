/*
 * test_group.c - unit tests of broker/group: the classic group protocol's
 * state machine driven through st_gstate_* with a fake clock and a fake
 * __consumer_offsets log, the records' formats, Kafka's group partitioning,
 * and the rebuild of every group by replaying what was written.
 *
 * The fake log keeps each appended record (key, value or tombstone) per
 * partition, so a test can replay it into a fresh state machine exactly as
 * the coordinator replays the real partition after a restart.  A record's
 * offset is its index in the fake log; records of a transactional batch
 * carry their producer id, and transaction markers are entries too.
 */
#include "unit.h"

#include "group_int.h"

/* The state machine takes length-based strings; the tests write C strings
 * (NULL: none). */
#define S(x) st_str(x)

/* ======================================================================
 * Fakes: clock, log, waiters
 * ==================================================================== */

typedef struct frec {
    int32_t partition;
    uint8_t *key;
    int32_t klen;
    uint8_t *value; /* NULL: tombstone */
    int32_t vlen;
    int64_t producer_id; /* a transactional batch's; -1 otherwise */
    int marker;          /* a control batch: 1 commit, 2 abort */
} frec_t;

static struct {
    int64_t mono, wall;
    size_t max_batch; /* appends larger than this fail MESSAGE_TOO_LARGE */
    st_err_t fail;    /* next appends fail with this */
    frec_t recs[4096];
    int nrecs;
    int ensured;
} F;

static int64_t f_mono(void *a) {
    (void)a;
    return F.mono;
}

static int64_t f_wall(void *a) {
    (void)a;
    return F.wall;
}

static st_err_t f_append(void *a, int32_t partition, int64_t producer_id, int16_t producer_epoch,
                         const st_batch_record_t *r, int n, int64_t *base_offset) {
    (void)a;
    (void)producer_epoch;
    if (F.fail) return F.fail;
    size_t size = 61;
    for (int i = 0; i < n; i++) size += 20 + (size_t)ST_MAX(r[i].key_len, 0) + (size_t)ST_MAX(r[i].value_len, 0);
    if (size > F.max_batch) return ST_E_MESSAGE_TOO_LARGE;
    if (base_offset) *base_offset = F.nrecs;
    for (int i = 0; i < n; i++) {
        assert_true(F.nrecs < (int)ST_ARRAY_SIZE(F.recs));
        frec_t *f = &F.recs[F.nrecs++];
        f->partition = partition;
        f->producer_id = producer_id;
        f->klen = r[i].key_len;
        f->key = st_malloc((size_t)r[i].key_len + 1);
        memcpy(f->key, r[i].key, (size_t)r[i].key_len);
        f->vlen = r[i].value_len;
        f->value = NULL;
        if (r[i].value_len >= 0) {
            f->value = st_malloc((size_t)r[i].value_len + 1);
            memcpy(f->value, r[i].value, (size_t)r[i].value_len);
        }
    }
    return ST_OK;
}

static void f_ensure(void *a, int32_t p) {
    (void)a;
    (void)p;
    F.ensured++;
}

static void fake_reset(void) {
    for (int i = 0; i < F.nrecs; i++) {
        free(F.recs[i].key);
        free(F.recs[i].value);
    }
    memset(&F, 0, sizeof F);
    F.mono = 1000000;
    F.wall = 1700000000000ll;
    F.max_batch = 1 << 20;
}

static const st_gstate_config_t CFG = {
    .num_partitions = 50,
    .min_session_timeout_ms = 6000,
    .max_session_timeout_ms = 1800000,
    .initial_rebalance_delay_ms = 3000,
    .max_size = 1000,
    .offset_metadata_max_bytes = 4096,
    .offsets_retention_ms = 7ll * 24 * 3600 * 1000,
    .offsets_retention_check_interval_ms = 600000,
};

static st_gstate_t *new_state(const st_gstate_config_t *cfg) {
    st_gstate_ops_t ops = {f_mono, f_wall, f_append, f_ensure, NULL};
    st_gstate_t *s = st_gstate_new(cfg ? cfg : &CFG, &ops);
    for (int i = 0; i < (cfg ? cfg : &CFG)->num_partitions; i++)
        st_gstate_set_partition(s, i, ST_GPART_LOADED);
    return s;
}

/* Advance the clock and fire what is due. */
static void advance(st_gstate_t *s, int64_t ms) {
    F.mono += ms;
    F.wall += ms;
    st_gstate_tick(s);
}

typedef struct tw {
    st_group_waiter_t base;
    int done;
    int kind; /* 1 join, 2 sync */
    st_err_t err;
    char member[256];
    int32_t generation;
    char leader[256];
    char protocol[64];
    int nmembers;
    int skip;
    uint8_t assignment[256];
    int32_t alen;
} tw_t;

static void tw_join(st_group_waiter_t *w, const st_group_join_result_t *r) {
    tw_t *t = (tw_t *)w;
    assert_int_equal(t->done, 0); /* exactly once */
    t->done = 1;
    t->kind = 1;
    t->err = r->error;
    snprintf(t->member, sizeof t->member, "%.*s", (int)ST_MAX(r->member_id.len, 0), r->member_id.p);
    t->generation = r->generation;
    snprintf(t->leader, sizeof t->leader, "%.*s", (int)ST_MAX(r->leader.len, 0), r->leader.p);
    snprintf(t->protocol, sizeof t->protocol, "%.*s", (int)ST_MAX(r->protocol_name.len, 0),
             r->protocol_name.p);
    t->nmembers = r->nmembers;
    t->skip = r->skip_assignment;
}

static void tw_sync(st_group_waiter_t *w, const st_group_sync_result_t *r) {
    tw_t *t = (tw_t *)w;
    assert_int_equal(t->done, 0);
    t->done = 1;
    t->kind = 2;
    t->err = r->error;
    t->alen = r->assignment_len;
    assert_true(r->assignment_len <= (int32_t)sizeof t->assignment);
    if (r->assignment_len > 0) memcpy(t->assignment, r->assignment, (size_t)r->assignment_len);
}

static void tw_init(tw_t *t) {
    memset(t, 0, sizeof *t);
    t->base.join_done = tw_join;
    t->base.sync_done = tw_sync;
}

/* A consumer protocol subscription v0 to the given topics. */
static size_t subscription(uint8_t *out, const char *const *topics, int n) {
    st_buf_t b;
    st_buf_init(&b);
    st_buf_put_i16(&b, 0);
    st_buf_put_i32(&b, n);
    for (int i = 0; i < n; i++) {
        st_buf_put_i16(&b, (int16_t)strlen(topics[i]));
        st_buf_put(&b, topics[i], strlen(topics[i]));
    }
    st_buf_put_i32(&b, -1); /* user data */
    memcpy(out, b.data, b.len);
    size_t n_out = b.len;
    st_buf_fini(&b);
    return n_out;
}

static uint8_t SUB_T1[64];
static int32_t SUB_T1_LEN;

typedef struct jopts {
    const char *member;
    const char *instance;
    const char *protos; /* comma list; default "range" */
    int require_known;
    int skip;
    int32_t session_ms;
    int32_t rebalance_ms;
    int32_t meta_len; /* metadata of each protocol; default the t1 subscription */
} jopts_t;

static void join(st_gstate_t *s, const char *group, jopts_t o, tw_t *t) {
    char member[256];
    if (o.member) { /* it may point into *t */
        snprintf(member, sizeof member, "%s", o.member);
        o.member = member;
    }
    tw_init(t);
    st_group_protocol_t protos[8];
    char names[8][32];
    int n = 0;
    const char *list = o.protos ? o.protos : "range";
    uint8_t *big = NULL;
    if (o.meta_len > 0) big = calloc(1, (size_t)o.meta_len);
    while (*list && n < 8) {
        const char *comma = strchr(list, ',');
        size_t l = comma ? (size_t)(comma - list) : strlen(list);
        snprintf(names[n], sizeof names[n], "%.*s", (int)l, list);
        protos[n] = (st_group_protocol_t){S(names[n]), big ? big : SUB_T1,
                                          big ? o.meta_len : SUB_T1_LEN};
        n++;
        list += l + (comma ? 1 : 0);
    }
    if (o.protos && !*o.protos) n = 0;
    st_group_join_params_t p = {
        .group_id = S(group),
        .member_id = S(o.member ? o.member : ""),
        .instance_id = S(o.instance),
        .client_id = S("client"),
        .client_host = S("/127.0.0.1"),
        .protocol_type = S("consumer"),
        .reason = ST_STR_NULL,
        .session_timeout_ms = o.session_ms ? o.session_ms : 10000,
        .rebalance_timeout_ms = o.rebalance_ms ? o.rebalance_ms : 30000,
        .protocols = protos,
        .nprotocols = n,
        .require_known_member_id = o.require_known,
        .support_skip_assignment = o.skip,
    };
    st_gstate_join(s, &p, &t->base);
    free(big);
}

static void sync_(st_gstate_t *s, const char *group, const char *member, int32_t gen,
                  const st_group_assignment_t *a, int na, tw_t *t) {
    tw_init(t);
    st_group_sync_params_t p = {S(group), S(member), ST_STR_NULL, ST_STR_NULL, ST_STR_NULL,
                                gen, a, na};
    st_gstate_sync(s, &p, &t->base);
}

/* Two members through MEMBER_ID_REQUIRED, the initial delay, the join and
 * the sync; returns the generation.  m1 ends up leader. */
static int32_t form_group(st_gstate_t *s, const char *group, char *m1, char *m2) {
    tw_t a, b;
    join(s, group, (jopts_t){.require_known = 1}, &a);
    assert_int_equal(a.err, ST_E_MEMBER_ID_REQUIRED);
    join(s, group, (jopts_t){.member = a.member}, &a);
    assert_false(a.done); /* parked for the initial delay */
    join(s, group, (jopts_t){0}, &b);
    assert_false(b.done);
    advance(s, 3000); /* the delay ends; a member joined during it: once more */
    assert_false(a.done);
    advance(s, 3000);
    assert_true(a.done && b.done);
    assert_int_equal(a.err, ST_OK);
    assert_int_equal(b.err, ST_OK);
    assert_int_equal(a.generation, b.generation);
    strcpy(m1, a.member);
    strcpy(m2, b.member);
    assert_string_equal(a.leader, m1);
    assert_int_equal(a.nmembers, 2);
    assert_int_equal(b.nmembers, 0);
    tw_t sa, sb;
    sync_(s, group, m2, b.generation, NULL, 0, &sb);
    assert_false(sb.done);
    st_group_assignment_t as[2] = {{S(m1), (const uint8_t *)"A1", 2}, {S(m2), (const uint8_t *)"B22", 3}};
    sync_(s, group, m1, a.generation, as, 2, &sa);
    assert_true(sa.done && sb.done);
    assert_int_equal(sa.err, ST_OK);
    assert_int_equal(sb.err, ST_OK);
    assert_int_equal(sa.alen, 2);
    assert_memory_equal(sa.assignment, "A1", 2);
    assert_int_equal(sb.alen, 3);
    assert_memory_equal(sb.assignment, "B22", 3);
    assert_int_equal(st_gstate_group(s, S(group))->state, ST_GROUP_STABLE);
    return a.generation;
}

static int setup(void **state) {
    (void)state;
    fake_reset();
    const char *t1[] = {"t1"};
    SUB_T1_LEN = (int32_t)subscription(SUB_T1, t1, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    fake_reset();
    return 0;
}

/* ======================================================================
 * Tests
 * ==================================================================== */

static void test_partition_for(void **state) {
    (void)state;
    /* values from Java's String.hashCode */
    assert_int_equal(st_group_java_hash("my-group", 8), -1906497762);
    assert_int_equal(st_group_partition_for("my-group", 8, 50), 12);
    assert_int_equal(st_group_partition_for("", 0, 50), 0);
    assert_int_equal(st_group_partition_for("rdk-group", 9, 50), 37);
    assert_int_equal(st_group_java_hash("gr\xc3\xbcppe", 7), -1233264812); /* non-ASCII */
    assert_int_equal(st_group_java_hash("g\xf0\x9f\x98\x80p", 6), 58028454); /* surrogates */
    /* the one hash with no positive twin lands on partition 0 */
    assert_int_equal(st_group_java_hash("polygenelubricants", 18), INT32_MIN);
    assert_int_equal(st_group_partition_for("polygenelubricants", 18, 50), 0);
    /* malformed UTF-8 does not crash and is stable */
    assert_int_equal(st_group_java_hash("\xff\xc3", 2), st_group_java_hash("\xef\xbf\xbd\xef\xbf\xbd", 6));
}

static void test_records_roundtrip(void **state) {
    (void)state;
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_grec_offset_key(&k, S("g"), S("topic"), 7);
    /* key version 1: int16 1, string g, string topic, int32 7 */
    static const uint8_t want_key[] = {0, 1, 0, 1, 'g', 0, 5, 't', 'o', 'p', 'i', 'c', 0, 0, 0, 7};
    assert_int_equal(k.len, sizeof want_key);
    assert_memory_equal(k.data, want_key, sizeof want_key);
    st_grec_key_t dk;
    assert_int_equal(st_grec_decode_key(k.data, (int32_t)k.len, &dk), ST_OK);
    assert_int_equal(dk.type, ST_GREC_OFFSET);
    assert_int_equal(dk.partition, 7);
    st_grec_offset_value_t ov = {42, 3, st_str("meta"), 1000, -1};
    st_grec_offset_value(&v, &ov);
    assert_int_equal(st_be16_get(v.data), 3); /* version 3 without expire */
    st_grec_offset_value_t dv;
    assert_int_equal(st_grec_decode_offset_value(v.data, (int32_t)v.len, &dv), ST_OK);
    assert_int_equal(dv.offset, 42);
    assert_int_equal(dv.leader_epoch, 3);
    assert_int_equal(dv.commit_ts, 1000);
    assert_true(st_str_eq(dv.metadata, "meta"));
    v.len = 0;
    ov.expire_ts = 5000;
    st_grec_offset_value(&v, &ov);
    assert_int_equal(st_be16_get(v.data), 1);
    assert_int_equal(st_grec_decode_offset_value(v.data, (int32_t)v.len, &dv), ST_OK);
    assert_int_equal(dv.expire_ts, 5000);
    assert_int_equal(dv.leader_epoch, -1); /* not in version 1 */
    /* truncated and unknown records are refused, not trusted */
    assert_int_equal(st_grec_decode_offset_value(v.data, (int32_t)v.len - 3, &dv), ST_E_CORRUPT);
    uint8_t bad[] = {0, 9, 0, 0};
    assert_int_equal(st_grec_decode_key(bad, 4, &dk), ST_E_NOT_FOUND);
    assert_int_equal(st_grec_decode_key(bad, 1, &dk), ST_E_CORRUPT);

    k.len = 0;
    st_grec_group_key(&k, S("grp"));
    assert_int_equal(st_grec_decode_key(k.data, (int32_t)k.len, &dk), ST_OK);
    assert_int_equal(dk.type, ST_GREC_GROUP);
    assert_true(st_str_eq(dk.group, "grp"));
    st_grec_member_t m = {st_str("m-1"), st_str("inst"), st_str("cid"), st_str("/h"), 300, 100,
                          {(const uint8_t *)"sub", 3}, {(const uint8_t *)"as", 2}};
    st_grec_group_value_t gv = {st_str("consumer"), 5, st_str("range"), st_str("m-1"), 777, &m, 1};
    v.len = 0;
    st_grec_group_value(&v, &gv);
    assert_int_equal(st_be16_get(v.data), 3);
    st_arena_t a;
    st_arena_init(&a, 1024);
    st_grec_group_value_t dg;
    assert_int_equal(st_grec_decode_group_value(v.data, (int32_t)v.len, &a, &dg), ST_OK);
    assert_int_equal(dg.generation, 5);
    assert_int_equal(dg.nmembers, 1);
    assert_int_equal(dg.state_ts, 777);
    assert_true(st_str_eq(dg.members[0].instance_id, "inst"));
    assert_int_equal(dg.members[0].rebalance_timeout_ms, 300);
    assert_int_equal(dg.members[0].assignment.len, 2);
    for (int cut = 2; cut < (int)v.len; cut += 3)
        assert_int_equal(st_grec_decode_group_value(v.data, cut, &a, &dg), ST_E_CORRUPT);
    st_arena_fini(&a);
    st_str_t *topics;
    assert_int_equal(st_grec_subscription_topics(SUB_T1, SUB_T1_LEN, &topics), 1);
    assert_true(st_str_eq(topics[0], "t1"));
    st_gstr_free(&topics[0]);
    free(topics);
    assert_int_equal(st_grec_subscription_topics(SUB_T1, 5, &topics), -1);
    st_buf_fini(&k);
    st_buf_fini(&v);
}

static void test_join_sync_heartbeat(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    assert_int_equal(gen, 1);
    assert_int_equal(st_gstate_heartbeat(s, S("g"), S(m1), S(NULL), gen), ST_OK);
    assert_int_equal(st_gstate_heartbeat(s, S("g"), S(m2), S(NULL), gen + 1), ST_E_ILLEGAL_GENERATION);
    assert_int_equal(st_gstate_heartbeat(s, S("g"), S("nobody"), S(NULL), gen), ST_E_UNKNOWN_MEMBER_ID);
    assert_int_equal(st_gstate_heartbeat(s, S("nogroup"), S(m1), S(NULL), gen), ST_E_UNKNOWN_MEMBER_ID);
    assert_int_equal(st_gstate_heartbeat(s, S(""), S(m1), S(NULL), gen), ST_E_INVALID_GROUP_ID);
    /* a follower rejoining with the same metadata gets the generation back */
    tw_t t;
    join(s, "g", (jopts_t){.member = m2}, &t);
    assert_true(t.done);
    assert_int_equal(t.generation, gen);
    assert_int_equal(st_gstate_group(s, S("g"))->state, ST_GROUP_STABLE);
    /* the leader rejoining starts a rebalance; the follower learns it */
    tw_t l, f;
    join(s, "g", (jopts_t){.member = m1}, &l);
    assert_false(l.done);
    assert_int_equal(st_gstate_group(s, S("g"))->state, ST_GROUP_PREPARING_REBALANCE);
    assert_int_equal(st_gstate_heartbeat(s, S("g"), S(m2), S(NULL), gen), ST_E_REBALANCE_IN_PROGRESS);
    /* a SyncGroup of the old generation is refused */
    tw_t st;
    sync_(s, "g", m2, gen, NULL, 0, &st);
    assert_true(st.done);
    assert_int_equal(st.err, ST_E_REBALANCE_IN_PROGRESS);
    join(s, "g", (jopts_t){.member = m2}, &f);
    assert_true(l.done && f.done); /* everyone rejoined: no need to wait */
    assert_int_equal(l.generation, gen + 1);
    sync_(s, "g", m2, gen, NULL, 0, &st);
    assert_int_equal(st.err, ST_E_ILLEGAL_GENERATION);
    st_gstate_destroy(s);
}

static void test_session_expiry_and_leave(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    /* m1 keeps heartbeating, m2 goes silent */
    for (int i = 0; i < 3; i++) {
        advance(s, 3000);
        assert_int_equal(st_gstate_heartbeat(s, S("g"), S(m1), S(NULL), gen), ST_OK);
    }
    advance(s, 1500); /* m2's 10 s session is over */
    assert_int_equal(st_gstate_heartbeat(s, S("g"), S(m1), S(NULL), gen), ST_E_REBALANCE_IN_PROGRESS);
    st_group_t *g = st_gstate_group(s, S("g"));
    assert_int_equal(g->nmembers, 1); /* m2 expired after its 10 s session */
    assert_int_equal(g->state, ST_GROUP_PREPARING_REBALANCE);
    assert_int_equal(st_gstate_heartbeat(s, S("g"), S(m2), S(NULL), gen), ST_E_UNKNOWN_MEMBER_ID);
    tw_t t;
    join(s, "g", (jopts_t){.member = m1}, &t);
    assert_true(t.done);
    assert_int_equal(t.generation, gen + 1);
    assert_string_equal(t.leader, m1);
    tw_t sy;
    sync_(s, "g", m1, t.generation, NULL, 0, &sy);
    assert_int_equal(sy.err, ST_OK);
    assert_int_equal(sy.alen, 0); /* not named by the leader: empty */
    /* leaving empties the group, which is stored as empty */
    st_group_leave_member_t lm = {S(m1), S(NULL), S("bye"), ST_OK};
    assert_int_equal(st_gstate_leave(s, S("g"), &lm, 1), ST_OK);
    assert_int_equal(lm.error, ST_OK);
    assert_int_equal(g->state, ST_GROUP_EMPTY);
    assert_int_equal(g->generation, gen + 2);
    lm.error = ST_OK;
    assert_int_equal(st_gstate_leave(s, S("g"), &lm, 1), ST_OK);
    assert_int_equal(lm.error, ST_E_UNKNOWN_MEMBER_ID);
    st_gstate_destroy(s);
}

static void test_rebalance_timeouts(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    /* m1 rejoins; m2 never does: removed when the rebalance timeout ends */
    tw_t t;
    join(s, "g", (jopts_t){.member = m1, .rebalance_ms = 20000, .session_ms = 60000}, &t);
    assert_false(t.done);
    for (int i = 0; i < 3; i++) {
        advance(s, 5000);
        assert_int_equal(st_gstate_heartbeat(s, S("g"), S(m2), S(NULL), gen), ST_E_REBALANCE_IN_PROGRESS);
    }
    advance(s, 16000);
    assert_true(t.done);
    assert_int_equal(t.err, ST_OK);
    assert_int_equal(t.generation, gen + 1);
    assert_int_equal(t.nmembers, 1);
    st_gstate_destroy(s);
}

static void test_sync_deadline(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    tw_t j1, j2;
    join(s, "g", (jopts_t){.member = m1}, &j1);
    join(s, "g", (jopts_t){.member = m2}, &j2);
    assert_true(j1.done && j2.done);
    assert_int_equal(j1.generation, gen + 1);
    st_group_assignment_t as[1] = {{S(m1), (const uint8_t *)"x", 1}};
    tw_t s1;
    sync_(s, "g", m1, j1.generation, as, 1, &s1);
    assert_true(s1.done); /* the leader's sync completes the generation */
    assert_int_equal(st_gstate_group(s, S("g"))->state, ST_GROUP_STABLE);
    /* m2 keeps heartbeating but never syncs: gone after the rebalance timeout */
    for (int i = 0; i < 11; i++) {
        advance(s, 3000);
        st_gstate_heartbeat(s, S("g"), S(m1), S(NULL), j1.generation);
        st_gstate_heartbeat(s, S("g"), S(m2), S(NULL), j1.generation);
    }
    st_group_t *g = st_gstate_group(s, S("g"));
    assert_int_equal(g->nmembers, 1);
    assert_string_equal(g->members[0]->member_id.p, m1);
    assert_int_equal(g->state, ST_GROUP_PREPARING_REBALANCE);
    st_gstate_destroy(s);
}

static void test_protocol_vote_and_bad_joins(void **state) {
    (void)state;
    st_gstate_t *s = new_state(&(st_gstate_config_t){.num_partitions = 1,
                                                      .min_session_timeout_ms = 6000,
                                                      .max_session_timeout_ms = 300000,
                                                      .initial_rebalance_delay_ms = 0,
                                                      .max_size = 3,
                                                      .offset_metadata_max_bytes = 10,
                                                      .offsets_retention_ms = 1000,
                                                      .offsets_retention_check_interval_ms = 1000});
    tw_t e;
    join(s, "v", (jopts_t){.protos = ""}, &e);
    assert_int_equal(e.err, ST_E_INCONSISTENT_GROUP_PROTOCOL);
    join(s, "v", (jopts_t){.session_ms = 1000}, &e);
    assert_int_equal(e.err, ST_E_INVALID_SESSION_TIMEOUT);
    join(s, "v", (jopts_t){.member = "ghost"}, &e);
    assert_int_equal(e.err, ST_E_UNKNOWN_MEMBER_ID);
    tw_t a, b, c;
    join(s, "v", (jopts_t){.protos = "a,b"}, &a);
    join(s, "v", (jopts_t){.protos = "b,a"}, &b);
    join(s, "v", (jopts_t){.protos = "b,a,c"}, &c);
    advance(s, 0);
    assert_true(a.done && b.done && c.done);
    assert_string_equal(a.protocol, "b"); /* two votes to one */
    /* a fourth member is over group.max.size */
    tw_t d;
    join(s, "v", (jopts_t){.protos = "b"}, &d);
    assert_int_equal(d.err, ST_E_GROUP_MAX_SIZE_REACHED);
    /* a protocol no member supports, or another protocol type, is refused */
    join(s, "v", (jopts_t){.member = a.member, .protos = "z"}, &d);
    assert_int_equal(d.err, ST_E_INCONSISTENT_GROUP_PROTOCOL);
    /* the group still works */
    tw_t sa;
    sync_(s, "v", a.member, a.generation, NULL, 0, &sa);
    assert_int_equal(st_gstate_heartbeat(s, S("v"), S(a.member), S(NULL), a.generation), ST_OK);
    st_gstate_destroy(s);
}

static void test_oversized_metadata(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    F.max_batch = 4096;
    /* a member joins with metadata larger than a record may be */
    tw_t big, j1, j2;
    join(s, "g", (jopts_t){.meta_len = 100000}, &big);
    join(s, "g", (jopts_t){.member = m1}, &j1);
    join(s, "g", (jopts_t){.member = m2}, &j2);
    assert_true(big.done && j1.done && j2.done);
    assert_int_equal(j1.generation, gen + 1);
    tw_t sb, s2, s1;
    sync_(s, "g", big.member, j1.generation, NULL, 0, &sb);
    sync_(s, "g", m2, j1.generation, NULL, 0, &s2);
    sync_(s, "g", m1, j1.generation, NULL, 0, &s1);
    /* storing the group fails: every member hears Kafka's error and the
     * group rebalances */
    assert_true(sb.done && s1.done && s2.done);
    assert_int_equal(s1.err, ST_E_UNKNOWN_SERVER_ERROR);
    assert_int_equal(sb.err, ST_E_UNKNOWN_SERVER_ERROR);
    assert_int_equal(st_gstate_group(s, S("g"))->state, ST_GROUP_PREPARING_REBALANCE);
    /* the big member leaves; the others form the next generation */
    st_group_leave_member_t lm = {S(big.member), S(NULL), S(NULL), ST_OK};
    st_gstate_leave(s, S("g"), &lm, 1);
    join(s, "g", (jopts_t){.member = m1}, &j1);
    join(s, "g", (jopts_t){.member = m2}, &j2);
    assert_true(j1.done && j2.done);
    sync_(s, "g", m1, j1.generation, NULL, 0, &s1);
    assert_int_equal(s1.err, ST_OK);
    assert_int_equal(st_gstate_group(s, S("g"))->state, ST_GROUP_STABLE);
    st_gstate_destroy(s);
}

static void test_static_membership(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    tw_t a, b;
    join(s, "st", (jopts_t){.instance = "i1"}, &a);
    join(s, "st", (jopts_t){.instance = "i2"}, &b);
    advance(s, 3000);
    advance(s, 3000);
    assert_true(a.done && b.done);
    tw_t sa, sb;
    sync_(s, "st", b.member, b.generation, NULL, 0, &sb);
    st_group_assignment_t as[2] = {{S(a.member), (const uint8_t *)"a", 1},
                                   {S(b.member), (const uint8_t *)"b", 1}};
    sync_(s, "st", a.member, a.generation, as, 2, &sa);
    assert_int_equal(sa.err, ST_OK);
    int32_t gen = a.generation;
    /* i2 restarts: same instance, no member id; no rebalance */
    tw_t b2;
    join(s, "st", (jopts_t){.instance = "i2"}, &b2);
    assert_true(b2.done);
    assert_int_equal(b2.err, ST_OK);
    assert_int_equal(b2.generation, gen);
    assert_string_not_equal(b2.member, b.member);
    assert_int_equal(st_gstate_group(s, S("st"))->state, ST_GROUP_STABLE);
    /* the old incarnation is fenced */
    assert_int_equal(st_gstate_heartbeat(s, S("st"), S(b.member), S("i2"), gen), ST_E_FENCED_INSTANCE_ID);
    assert_int_equal(st_gstate_heartbeat(s, S("st"), S(b2.member), S("i2"), gen), ST_OK);
    tw_t s2;
    sync_(s, "st", b2.member, gen, NULL, 0, &s2);
    assert_int_equal(s2.err, ST_OK);
    assert_int_equal(s2.alen, 1);
    assert_memory_equal(s2.assignment, "b", 1);
    /* the restart was stored: a replay knows the new member id */
    int found = 0;
    for (int i = 0; i < F.nrecs; i++)
        if (F.recs[i].value && memmem(F.recs[i].value, (size_t)F.recs[i].vlen, b2.member, strlen(b2.member)))
            found = 1;
    assert_true(found);
    /* a static member stays through a rebalance it misses, until its
     * session expires */
    tw_t j1;
    join(s, "st", (jopts_t){.member = a.member, .instance = "i1"}, &j1);
    advance(s, 9000);
    st_gstate_heartbeat(s, S("st"), S(a.member), S("i1"), gen);
    assert_int_equal(st_gstate_group(s, S("st"))->nmembers, 2);
    advance(s, 2000); /* i2's 10 s session is over */
    assert_true(j1.done);
    assert_int_equal(st_gstate_group(s, S("st"))->nmembers, 1);
    /* administrative removal by instance id */
    st_group_leave_member_t lm = {S(""), S("i1"), S(NULL), ST_OK};
    assert_int_equal(st_gstate_leave(s, S("st"), &lm, 1), ST_OK);
    assert_int_equal(lm.error, ST_OK);
    assert_int_equal(st_gstate_group(s, S("st"))->nmembers, 0);
    st_gstate_destroy(s);
}

static void commit1(st_gstate_t *s, const char *group, const char *member, int32_t gen,
                    const char *topic, int32_t part, int64_t off, const char *meta,
                    st_err_t want) {
    st_group_commit_t c = {S(topic), part, off, 7, S(meta), -1, -1, ST_OK};
    st_gstate_commit(s, S(group), S(member), S(NULL), gen, &c, 1);
    assert_int_equal(c.error, want);
}

static void test_offsets_commit_fetch(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    /* standalone commits: no membership at all */
    commit1(s, "solo", "", -1, "t1", 0, 10, "m", ST_OK);
    commit1(s, "solo", "", -1, "t1", 0, 11, NULL, ST_OK);
    st_group_t *g = st_gstate_group(s, S("solo"));
    assert_non_null(g);
    const st_goffset_t *o = st_gstate_offset(g, S("t1"), 0);
    assert_int_equal(o->offset, 11);
    assert_int_equal(o->leader_epoch, 7);
    assert_null(st_gstate_offset(g, S("t1"), 1));
    commit1(s, "nogroup", "m", 3, "t1", 0, 1, NULL, ST_E_ILLEGAL_GENERATION);
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    commit1(s, "solo", "", -1, "t1", 1, 1, big, ST_E_OFFSET_METADATA_TOO_LARGE);
    /* a live group: only its members, of the current generation */
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    commit1(s, "g", m1, gen, "t1", 0, 5, "", ST_OK);
    commit1(s, "g", m1, gen - 1, "t1", 0, 6, "", ST_E_ILLEGAL_GENERATION);
    commit1(s, "g", "stranger", gen, "t1", 0, 6, "", ST_E_UNKNOWN_MEMBER_ID);
    commit1(s, "g", "", -1, "t1", 0, 6, "", ST_E_UNKNOWN_MEMBER_ID);
    /* during CompletingRebalance: REBALANCE_IN_PROGRESS */
    tw_t j1, j2;
    join(s, "g", (jopts_t){.member = m1}, &j1);
    commit1(s, "g", m2, gen, "t1", 0, 7, "", ST_OK); /* PreparingRebalance still takes it */
    join(s, "g", (jopts_t){.member = m2}, &j2);
    commit1(s, "g", m2, j2.generation, "t1", 0, 8, "", ST_E_REBALANCE_IN_PROGRESS);
    assert_int_equal(st_gstate_offset(st_gstate_group(s, S("g")), S("t1"), 0)->offset, 7);
    /* an append that fails: no offset changes */
    F.fail = ST_E_KAFKA_STORAGE_ERROR;
    commit1(s, "solo", "", -1, "t1", 0, 99, NULL, ST_E_NOT_COORDINATOR);
    F.fail = ST_OK;
    assert_int_equal(st_gstate_offset(st_gstate_group(s, S("solo")), S("t1"), 0)->offset, 11);
    /* a pre-refused partition is reported as given */
    st_group_commit_t c[2] = {{S("nope"), 0, 1, -1, ST_STR_NULL, -1, -1, ST_E_UNKNOWN_TOPIC_OR_PARTITION},
                              {S("t1"), 2, 3, -1, ST_STR_NULL, -1, -1, ST_OK}};
    st_gstate_commit(s, S("solo"), S(""), S(NULL), -1, c, 2);
    assert_int_equal(c[0].error, ST_E_UNKNOWN_TOPIC_OR_PARTITION);
    assert_int_equal(c[1].error, ST_OK);
    st_gstate_destroy(s);
}

/* Replay every record of the fake log into a fresh state machine. */
static st_gstate_t *replay(void) {
    st_gstate_ops_t ops = {f_mono, f_wall, f_append, f_ensure, NULL};
    st_gstate_t *s = st_gstate_new(&CFG, &ops);
    for (int p = 0; p < CFG.num_partitions; p++) st_gstate_set_partition(s, p, ST_GPART_LOADING);
    int n = F.nrecs; /* records written while replaying are not replayed */
    for (int i = 0; i < n; i++) {
        if (F.recs[i].marker)
            st_gstate_end_txn(s, F.recs[i].partition, F.recs[i].producer_id, F.recs[i].marker == 1);
        else
            st_gstate_load_record(s, F.recs[i].partition, i, F.recs[i].producer_id, F.recs[i].key,
                                  F.recs[i].klen, F.recs[i].value, F.recs[i].vlen);
    }
    return s;
}

static void test_replay(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    commit1(s, "g", m1, gen, "t1", 0, 100, "x", ST_OK);
    commit1(s, "g", m2, gen, "t1", 1, 200, "y", ST_OK);
    commit1(s, "solo", "", -1, "t1", 3, 5, NULL, ST_OK);
    commit1(s, "gone", "", -1, "t1", 3, 5, NULL, ST_OK);
    assert_int_equal(st_gstate_delete_group(s, S("gone")), ST_OK);
    st_gstate_destroy(s);

    s = replay();
    /* before the partition is loaded: COORDINATOR_LOAD_IN_PROGRESS, and
     * heartbeats are answered blindly */
    assert_int_equal(st_gstate_check(s, S("g"), 0), ST_E_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(st_gstate_heartbeat(s, S("g"), S(m1), S(NULL), gen), ST_OK);
    tw_t t;
    sync_(s, "g", m1, gen, NULL, 0, &t);
    assert_int_equal(t.err, ST_E_REBALANCE_IN_PROGRESS);
    for (int p = 0; p < CFG.num_partitions; p++) st_gstate_load_done(s, p);
    st_group_t *g = st_gstate_group(s, S("g"));
    assert_non_null(g);
    assert_int_equal(g->state, ST_GROUP_STABLE);
    assert_int_equal(g->generation, gen);
    assert_int_equal(g->nmembers, 2);
    assert_string_equal(g->leader_id.p, m1);
    assert_int_equal(st_gstate_offset(g, S("t1"), 0)->offset, 100);
    assert_true(st_str_eq(st_gstate_offset(g, S("t1"), 1)->metadata, "y"));
    assert_int_equal(st_gstate_offset(st_gstate_group(s, S("solo")), S("t1"), 3)->offset, 5);
    assert_null(st_gstate_group(s, S("gone")));
    /* members carry on after the restart... */
    assert_int_equal(st_gstate_heartbeat(s, S("g"), S(m1), S(NULL), gen), ST_OK);
    sync_(s, "g", m2, gen, NULL, 0, &t);
    assert_int_equal(t.err, ST_OK);
    assert_int_equal(t.alen, 3);
    /* ...and one that does not come back expires */
    for (int i = 0; i < 4; i++) {
        advance(s, 3000);
        st_gstate_heartbeat(s, S("g"), S(m1), S(NULL), gen);
    }
    assert_int_equal(g->nmembers, 1);
    assert_int_equal(st_gstate_skipped_records(s), 0);
    st_gstate_destroy(s);
}

static void test_offset_expiry(void **state) {
    (void)state;
    st_gstate_config_t cfg = CFG;
    cfg.offsets_retention_ms = 60000;
    cfg.offsets_retention_check_interval_ms = 10000;
    st_gstate_t *s = new_state(&cfg);
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    commit1(s, "g", m1, gen, "t1", 0, 1, NULL, ST_OK);
    commit1(s, "solo", "", -1, "t1", 0, 1, NULL, ST_OK);
    /* a live group keeps offsets of the topics it subscribes to */
    for (int i = 0; i < 30; i++) {
        advance(s, 3000);
        st_gstate_heartbeat(s, S("g"), S(m1), S(NULL), gen);
        st_gstate_heartbeat(s, S("g"), S(m2), S(NULL), gen);
    }
    assert_non_null(st_gstate_offset(st_gstate_group(s, S("g")), S("t1"), 0));
    /* the standalone group's offset expired with it */
    assert_null(st_gstate_group(s, S("solo")));
    /* once empty, the retention counts from when it became empty */
    st_group_leave_member_t lm[2] = {{S(m1), ST_STR_NULL, ST_STR_NULL, ST_OK},
                                     {S(m2), ST_STR_NULL, ST_STR_NULL, ST_OK}};
    st_gstate_leave(s, S("g"), lm, 2);
    assert_int_equal(st_gstate_group(s, S("g"))->state, ST_GROUP_EMPTY);
    advance(s, 50000);
    assert_non_null(st_gstate_group(s, S("g")));
    advance(s, 20000);
    assert_null(st_gstate_group(s, S("g")));
    st_gstate_destroy(s);
    /* the replay agrees: tombstones removed both */
    s = replay();
    for (int p = 0; p < CFG.num_partitions; p++) st_gstate_load_done(s, p);
    assert_null(st_gstate_group(s, S("g")));
    assert_null(st_gstate_group(s, S("solo")));
    st_gstate_destroy(s);
}

static void test_delete_groups_and_offsets(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    commit1(s, "g", m1, gen, "t1", 0, 1, NULL, ST_OK);
    commit1(s, "g", m1, gen, "other", 0, 1, NULL, ST_OK);
    assert_int_equal(st_gstate_delete_group(s, S("g")), ST_E_NON_EMPTY_GROUP);
    assert_int_equal(st_gstate_delete_group(s, S("never")), ST_E_GROUP_ID_NOT_FOUND);
    st_group_offset_delete_t d[2] = {{S("t1"), 0, 0}, {S("other"), 0, 0}};
    assert_int_equal(st_gstate_delete_offsets(s, S("g"), d, 2), ST_OK);
    assert_true(d[0].subscribed);  /* GROUP_SUBSCRIBED_TO_TOPIC */
    assert_false(d[1].subscribed); /* deleted */
    assert_null(st_gstate_offset(st_gstate_group(s, S("g")), S("other"), 0));
    assert_non_null(st_gstate_offset(st_gstate_group(s, S("g")), S("t1"), 0));
    st_group_leave_member_t lm[2] = {{S(m1), ST_STR_NULL, ST_STR_NULL, ST_OK},
                                     {S(m2), ST_STR_NULL, ST_STR_NULL, ST_OK}};
    st_gstate_leave(s, S("g"), lm, 2);
    assert_int_equal(st_gstate_delete_group(s, S("g")), ST_OK);
    assert_null(st_gstate_group(s, S("g")));
    assert_int_equal(st_gstate_delete_group(s, S("g")), ST_E_GROUP_ID_NOT_FOUND);
    st_gstate_destroy(s);
}

/* Strings are bytes with a length: a NUL inside a group id, a client id
 * (and so a member id), a protocol name or commit metadata is kept, also
 * through the records and a replay. */
static void test_nul_bytes_kept(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    static const char meta[] = "Hello\0world!";
    st_str_t ga = {"g\0a", 3}, gb = {"g\0b", 3}, topic = {"t\0x", 3};
    st_group_commit_t c = {topic, 0, 10, -1, {meta, sizeof meta - 1}, -1, -1, ST_OK};
    st_gstate_commit(s, ga, S(""), ST_STR_NULL, -1, &c, 1);
    assert_int_equal(c.error, ST_OK);
    c = (st_group_commit_t){topic, 0, 20, -1, S("b"), -1, -1, ST_OK};
    st_gstate_commit(s, gb, S(""), ST_STR_NULL, -1, &c, 1);
    assert_int_equal(c.error, ST_OK);
    assert_null(st_gstate_group(s, S("g")));
    assert_null(st_gstate_offset(st_gstate_group(s, ga), S("t"), 0));

    /* a member whose client id holds a NUL, with a protocol name that does */
    tw_t t;
    tw_init(&t);
    st_group_protocol_t proto = {{"ra\0nge", 6}, SUB_T1, SUB_T1_LEN};
    st_group_join_params_t p = {.group_id = S("j"), .member_id = S(""), .instance_id = ST_STR_NULL,
                                .client_id = {"cl\0i", 4}, .client_host = S("/h"),
                                .protocol_type = S("consumer"), .reason = ST_STR_NULL,
                                .session_timeout_ms = 10000, .rebalance_timeout_ms = 10000,
                                .protocols = &proto, .nprotocols = 1};
    st_gstate_join(s, &p, &t.base);
    advance(s, 3000);
    assert_true(t.done);
    assert_int_equal(t.err, ST_OK);
    st_group_t *g = st_gstate_group(s, S("j"));
    assert_int_equal(g->members[0]->member_id.len, 4 + 37);
    assert_memory_equal(g->members[0]->member_id.p, "cl\0i-", 5);
    assert_int_equal(g->protocol_name.len, 6);
    assert_memory_equal(g->protocol_name.p, "ra\0nge", 6);
    st_str_t mid = st_gstr_dup(g->members[0]->member_id);
    assert_int_equal(st_gstate_heartbeat(s, S("j"), S("cl"), ST_STR_NULL, t.generation),
                     ST_E_UNKNOWN_MEMBER_ID);
    assert_int_equal(st_gstate_heartbeat(s, S("j"), mid, ST_STR_NULL, t.generation), ST_OK);
    tw_t sy;
    sync_(s, "j", "", t.generation, NULL, 0, &sy); /* "" is not the member */
    assert_int_equal(sy.err, ST_E_UNKNOWN_MEMBER_ID);
    tw_init(&sy);
    st_group_sync_params_t sp = {S("j"), mid, ST_STR_NULL, ST_STR_NULL, {"ra\0nge", 6},
                                 t.generation, NULL, 0};
    st_gstate_sync(s, &sp, &sy.base);
    assert_int_equal(sy.err, ST_OK);
    st_gstate_destroy(s);

    /* the same after a replay of what was written */
    s = replay();
    for (int i = 0; i < CFG.num_partitions; i++) st_gstate_load_done(s, i);
    const st_goffset_t *o = st_gstate_offset(st_gstate_group(s, ga), topic, 0);
    assert_non_null(o);
    assert_int_equal(o->offset, 10);
    assert_int_equal(o->metadata.len, (int32_t)sizeof meta - 1);
    assert_memory_equal(o->metadata.p, meta, sizeof meta - 1);
    assert_int_equal(st_gstate_offset(st_gstate_group(s, gb), topic, 0)->offset, 20);
    g = st_gstate_group(s, S("j"));
    assert_true(st_gstr_eq(g->members[0]->member_id, mid));
    assert_true(st_gstr_eq(g->members[0]->client_id, (st_str_t){"cl\0i", 4}));
    assert_true(st_gstr_eq(g->protocol_name, (st_str_t){"ra\0nge", 6}));
    assert_true(st_gstr_eq(g->leader_id, mid));
    st_gstr_free(&mid);
    st_gstate_destroy(s);
}

static int only_t1(st_str_t topic, void *arg) {
    (void)arg;
    return st_str_eq(topic, "t1");
}

static void test_deleted_topics(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    commit1(s, "a", "", -1, "t1", 0, 1, NULL, ST_OK);
    commit1(s, "a", "", -1, "gone", 0, 1, NULL, ST_OK);
    commit1(s, "b", "", -1, "gone", 3, 1, NULL, ST_OK);
    assert_int_equal(st_gstate_drop_missing_topics(s, only_t1, NULL), 2);
    assert_non_null(st_gstate_offset(st_gstate_group(s, S("a")), S("t1"), 0));
    assert_null(st_gstate_offset(st_gstate_group(s, S("a")), S("gone"), 0));
    assert_null(st_gstate_group(s, S("b"))); /* nothing left: gone */
    st_gstate_destroy(s);
    s = replay();
    for (int p = 0; p < CFG.num_partitions; p++) st_gstate_load_done(s, p);
    assert_null(st_gstate_group(s, S("b")));
    assert_null(st_gstate_offset(st_gstate_group(s, S("a")), S("gone"), 0));
    st_gstate_destroy(s);
}

static void test_pending_and_close(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    tw_t a;
    join(s, "p", (jopts_t){.require_known = 1}, &a);
    assert_int_equal(a.err, ST_E_MEMBER_ID_REQUIRED);
    assert_non_null(st_gstate_group(s, S("p")));
    assert_int_equal(st_gstate_group(s, S("p"))->npending, 1);
    advance(s, 11000); /* it never came back */
    assert_int_equal(st_gstate_group(s, S("p"))->npending, 0);
    /* a parked join is answered when the coordinator closes */
    tw_t b;
    join(s, "p", (jopts_t){0}, &b);
    assert_false(b.done);
    st_gstate_close(s);
    assert_true(b.done);
    assert_int_equal(b.err, ST_E_NOT_COORDINATOR);
    assert_int_equal(st_gstate_check(s, S("p"), 0), ST_E_COORDINATOR_NOT_AVAILABLE);
    st_gstate_destroy(s);
    /* unloading a partition answers its waiters too */
    s = new_state(NULL);
    join(s, "p", (jopts_t){0}, &b);
    st_gstate_unload(s, st_gstate_partition_of(s, S("p")));
    assert_true(b.done);
    assert_int_equal(b.err, ST_E_NOT_COORDINATOR);
    assert_int_equal(st_gstate_check(s, S("p"), 0), ST_E_NOT_COORDINATOR);
    st_gstate_destroy(s);
}

/* ---- transactional offset commits ---------------------------------------- */

static st_err_t txn1(st_gstate_t *s, const char *group, int64_t pid, const char *member,
                     const char *instance, int32_t gen, const char *topic, int32_t part,
                     int64_t off) {
    st_group_txn_commit_params_t p = {S(group), S("txid"), pid, 0, gen, S(member), S(instance)};
    st_group_commit_t c = {S(topic), part, off, 4, S("tm"), -1, -1, ST_OK};
    st_gstate_txn_commit(s, &p, &c, 1);
    return c.error;
}

/* The transaction's marker lands in the group's partition (the fake log
 * keeps it for replays) and the coordinator is told, as WriteTxnMarkers
 * does. */
static void marker(st_gstate_t *s, const char *group, int64_t pid, int commit) {
    int32_t p = st_gstate_partition_of(s, S(group));
    assert_true(F.nrecs < (int)ST_ARRAY_SIZE(F.recs));
    frec_t *f = &F.recs[F.nrecs++];
    memset(f, 0, sizeof *f);
    f->partition = p;
    f->producer_id = pid;
    f->marker = commit ? 1 : 2;
    st_gstate_end_txn(s, p, pid, commit);
}

/* The committed offset: -1 none, -2 no group. */
static int64_t committed(st_gstate_t *s, const char *group, const char *topic, int32_t part) {
    st_group_t *g = st_gstate_group(s, S(group));
    if (!g) return -2;
    const st_goffset_t *o = st_gstate_offset(g, S(topic), part);
    return o ? o->offset : -1;
}

static int pending(st_gstate_t *s, const char *group, const char *topic, int32_t part) {
    st_group_t *g = st_gstate_group(s, S(group));
    return g && st_gstate_txn_pending(g, S(topic), part);
}

static void test_txn_commit_pending(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    /* an unknown group without a generation: made, as Kafka's simple group */
    assert_int_equal(txn1(s, "tg", 1000, "", NULL, -1, "t1", 0, 10), ST_OK);
    /* one transactional record of the producer in the group's partition */
    assert_int_equal(F.nrecs, 1);
    assert_int_equal(F.recs[0].producer_id, 1000);
    assert_int_equal(F.recs[0].partition, st_gstate_partition_of(s, S("tg")));
    /* pending: not committed, visible as pending only */
    assert_int_equal(committed(s, "tg", "t1", 0), -1);
    assert_true(pending(s, "tg", "t1", 0));
    assert_false(pending(s, "tg", "t1", 1));
    const st_goffset_t *po = st_gstate_pending_offset(st_gstate_group(s, S("tg")), 1000, S("t1"), 0);
    assert_non_null(po);
    assert_int_equal(po->offset, 10);
    assert_int_equal(po->leader_epoch, 4);
    assert_int_equal(po->record_offset, 0);
    /* a later commit of the same transaction replaces it */
    assert_int_equal(txn1(s, "tg", 1000, "", NULL, -1, "t1", 0, 12), ST_OK);
    assert_int_equal(st_gstate_pending_offset(st_gstate_group(s, S("tg")), 1000, S("t1"), 0)->offset, 12);
    /* a marker of another producer, or of another partition, changes nothing */
    marker(s, "tg", 999, 1);
    st_gstate_end_txn(s, (st_gstate_partition_of(s, S("tg")) + 1) % CFG.num_partitions, 1000, 1);
    assert_true(pending(s, "tg", "t1", 0));
    /* commit: the offset is committed, nothing pending */
    marker(s, "tg", 1000, 1);
    assert_int_equal(committed(s, "tg", "t1", 0), 12);
    assert_false(pending(s, "tg", "t1", 0));
    assert_null(st_gstate_pending_offset(st_gstate_group(s, S("tg")), 1000, S("t1"), 0));
    /* the next transaction aborts: the committed offset stays */
    assert_int_equal(txn1(s, "tg", 1000, "", NULL, -1, "t1", 0, 20), ST_OK);
    assert_true(pending(s, "tg", "t1", 0));
    marker(s, "tg", 1000, 0);
    assert_int_equal(committed(s, "tg", "t1", 0), 12);
    assert_false(pending(s, "tg", "t1", 0));
    /* a group that only held an aborted transaction's offsets is gone */
    assert_int_equal(txn1(s, "only-txn", 5, "", NULL, -1, "t1", 3, 1), ST_OK);
    assert_non_null(st_gstate_group(s, S("only-txn")));
    marker(s, "only-txn", 5, 0);
    assert_null(st_gstate_group(s, S("only-txn")));
    st_gstate_destroy(s);
}

/* Kafka's rule when a transaction's and a plain commit meet on one
 * partition: the record written later in the log wins, whichever order
 * the markers come in. */
static void test_txn_commit_order(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    /* transaction first, plain commit after it: the plain one stays */
    assert_int_equal(txn1(s, "g", 7, "", NULL, -1, "t1", 0, 5), ST_OK);
    commit1(s, "g", "", -1, "t1", 0, 8, NULL, ST_OK);
    assert_int_equal(committed(s, "g", "t1", 0), 8); /* a plain commit shows at once */
    assert_true(pending(s, "g", "t1", 0));
    marker(s, "g", 7, 1);
    assert_int_equal(committed(s, "g", "t1", 0), 8);
    /* plain commit first, the transaction after: the transaction's */
    commit1(s, "g", "", -1, "t1", 1, 3, NULL, ST_OK);
    assert_int_equal(txn1(s, "g", 7, "", NULL, -1, "t1", 1, 9), ST_OK);
    assert_int_equal(committed(s, "g", "t1", 1), 3);
    marker(s, "g", 7, 1);
    assert_int_equal(committed(s, "g", "t1", 1), 9);
    /* two producers on one partition: the later record wins, either
     * marker order */
    assert_int_equal(txn1(s, "g", 21, "", NULL, -1, "t1", 2, 100), ST_OK);
    assert_int_equal(txn1(s, "g", 22, "", NULL, -1, "t1", 2, 200), ST_OK);
    marker(s, "g", 22, 1);
    assert_int_equal(committed(s, "g", "t1", 2), 200);
    assert_true(pending(s, "g", "t1", 2)); /* 21 still open */
    marker(s, "g", 21, 1);
    assert_int_equal(committed(s, "g", "t1", 2), 200);
    assert_false(pending(s, "g", "t1", 2));
    assert_int_equal(txn1(s, "g", 21, "", NULL, -1, "t1", 3, 100), ST_OK);
    assert_int_equal(txn1(s, "g", 22, "", NULL, -1, "t1", 3, 200), ST_OK);
    marker(s, "g", 21, 1);
    assert_int_equal(committed(s, "g", "t1", 3), 100);
    marker(s, "g", 22, 1);
    assert_int_equal(committed(s, "g", "t1", 3), 200);
    st_gstate_destroy(s);

    /* the replay agrees on every partition */
    s = replay();
    for (int p = 0; p < CFG.num_partitions; p++) st_gstate_load_done(s, p);
    assert_int_equal(committed(s, "g", "t1", 0), 8);
    assert_int_equal(committed(s, "g", "t1", 1), 9);
    assert_int_equal(committed(s, "g", "t1", 2), 200);
    assert_int_equal(committed(s, "g", "t1", 3), 200);
    for (int p = 0; p < 4; p++) assert_false(pending(s, "g", "t1", p));
    st_gstate_destroy(s);
}

static void test_txn_commit_errors(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    /* an empty group id is invalid for TxnOffsetCommit (not for OffsetCommit) */
    assert_int_equal(txn1(s, "", 1, "", NULL, -1, "t1", 0, 1), ST_E_INVALID_GROUP_ID);
    /* an unknown group with a generation (v3) */
    assert_int_equal(txn1(s, "nope", 1, "m", NULL, 3, "t1", 0, 1), ST_E_ILLEGAL_GENERATION);
    assert_null(st_gstate_group(s, S("nope")));
    /* a live group: v3 member checks; v0-2 (no member, no generation) go in */
    char m1[256], m2[256];
    int32_t gen = form_group(s, "g", m1, m2);
    assert_int_equal(txn1(s, "g", 1, "stranger", NULL, gen, "t1", 0, 1), ST_E_UNKNOWN_MEMBER_ID);
    assert_int_equal(txn1(s, "g", 1, m1, NULL, gen + 1, "t1", 0, 1), ST_E_ILLEGAL_GENERATION);
    assert_int_equal(txn1(s, "g", 1, m1, NULL, gen, "t1", 0, 1), ST_OK);
    assert_int_equal(txn1(s, "g", 2, "", NULL, -1, "t1", 1, 1), ST_OK);
    /* a static member under an old member id is fenced */
    tw_t a;
    join(s, "st", (jopts_t){.instance = "i1"}, &a);
    advance(s, 3000);
    advance(s, 3000);
    assert_true(a.done);
    assert_int_equal(txn1(s, "st", 3, "old-id", "i1", a.generation, "t1", 0, 1),
                     ST_E_FENCED_INSTANCE_ID);
    /* CompletingRebalance is no obstacle for a transaction (Kafka) */
    assert_int_equal(st_gstate_group(s, S("st"))->state, ST_GROUP_COMPLETING_REBALANCE);
    assert_int_equal(txn1(s, "st", 3, a.member, "i1", a.generation, "t1", 0, 1), ST_OK);
    /* metadata too large; a partition refused beforehand keeps its error */
    st_group_txn_commit_params_t p = {S("g"), S("txid"), 9, 0, -1, S(""), S(NULL)};
    char big[5000];
    memset(big, 'x', sizeof big);
    st_group_commit_t c[3] = {
        {S("t1"), 5, 1, -1, (st_str_t){big, (int32_t)sizeof big}, -1, -1, ST_OK},
        {S("missing"), 0, 1, -1, ST_STR_NULL, -1, -1, ST_E_UNKNOWN_TOPIC_OR_PARTITION},
        {S("t1"), 6, 1, -1, ST_STR_NULL, -1, -1, ST_OK}};
    st_gstate_txn_commit(s, &p, c, 3);
    assert_int_equal(c[0].error, ST_E_OFFSET_METADATA_TOO_LARGE);
    assert_int_equal(c[1].error, ST_E_UNKNOWN_TOPIC_OR_PARTITION);
    assert_int_equal(c[2].error, ST_OK);
    assert_false(pending(s, "g", "t1", 5));
    assert_true(pending(s, "g", "t1", 6));
    /* a failed append keeps nothing */
    F.fail = ST_E_KAFKA_STORAGE_ERROR;
    assert_int_equal(txn1(s, "g", 9, "", NULL, -1, "t1", 7, 1), ST_E_NOT_COORDINATOR);
    F.fail = ST_OK;
    assert_false(pending(s, "g", "t1", 7));
    /* the partition's state answers first */
    int32_t gp = st_gstate_partition_of(s, S("g"));
    st_gstate_set_partition(s, gp, ST_GPART_LOADING);
    assert_int_equal(txn1(s, "g", 9, "", NULL, -1, "t1", 0, 1), ST_E_COORDINATOR_LOAD_IN_PROGRESS);
    st_gstate_set_partition(s, gp, ST_GPART_NOT_OWNED);
    assert_int_equal(txn1(s, "g", 9, "", NULL, -1, "t1", 0, 1), ST_E_NOT_COORDINATOR);
    st_gstate_set_partition(s, gp, ST_GPART_LOADED);
    st_gstate_close(s);
    assert_int_equal(txn1(s, "g", 9, "", NULL, -1, "t1", 0, 1), ST_E_COORDINATOR_NOT_AVAILABLE);
    st_gstate_destroy(s);
}

/* Replay rebuilds committed and pending offsets: transactional records go
 * to their producer's pending offsets, markers commit or abort them, and
 * what is open at the end stays pending. */
static void test_txn_replay(void **state) {
    (void)state;
    st_gstate_t *s = new_state(NULL);
    assert_int_equal(txn1(s, "g", 1, "", NULL, -1, "t1", 0, 10), ST_OK);
    assert_int_equal(txn1(s, "g", 2, "", NULL, -1, "t1", 1, 20), ST_OK);
    assert_int_equal(txn1(s, "g", 3, "", NULL, -1, "t1", 2, 30), ST_OK);
    commit1(s, "g", "", -1, "t1", 3, 40, NULL, ST_OK);
    assert_int_equal(txn1(s, "g", 4, "", NULL, -1, "t1", 3, 41), ST_OK);
    marker(s, "g", 1, 1);
    marker(s, "g", 2, 0);
    marker(s, "g", 4, 1);
    /* a group whose only offsets are open */
    assert_int_equal(txn1(s, "open-only", 6, "", NULL, -1, "t1", 0, 60), ST_OK);
    st_gstate_destroy(s);

    s = replay();
    /* loading: TxnOffsetCommit waits like every group API */
    assert_int_equal(txn1(s, "g", 3, "", NULL, -1, "t1", 5, 1), ST_E_COORDINATOR_LOAD_IN_PROGRESS);
    for (int p = 0; p < CFG.num_partitions; p++) st_gstate_load_done(s, p);
    assert_int_equal(committed(s, "g", "t1", 0), 10);
    assert_int_equal(committed(s, "g", "t1", 1), -1); /* aborted */
    assert_int_equal(committed(s, "g", "t1", 2), -1); /* still open */
    assert_true(pending(s, "g", "t1", 2));
    assert_int_equal(committed(s, "g", "t1", 3), 41);
    assert_false(pending(s, "g", "t1", 0));
    assert_false(pending(s, "g", "t1", 1));
    assert_non_null(st_gstate_group(s, S("open-only")));
    assert_true(pending(s, "open-only", "t1", 0));
    /* the open transactions end after the load */
    marker(s, "g", 3, 1);
    assert_int_equal(committed(s, "g", "t1", 2), 30);
    marker(s, "open-only", 6, 1);
    assert_int_equal(committed(s, "open-only", "t1", 0), 60);
    st_gstate_destroy(s);
}

/* Expiry and emptiness keep what a transaction may still commit; a
 * tombstone (OffsetDelete, DeleteGroups, a deleted topic) drops it, live
 * and in replay. */
static void test_txn_expiry_and_deletion(void **state) {
    (void)state;
    st_gstate_config_t cfg = CFG;
    cfg.offsets_retention_ms = 60000;
    cfg.offsets_retention_check_interval_ms = 10000;
    st_gstate_t *s = new_state(&cfg);
    commit1(s, "solo", "", -1, "t1", 0, 1, NULL, ST_OK);
    assert_int_equal(txn1(s, "solo", 11, "", NULL, -1, "t1", 0, 2), ST_OK);
    assert_int_equal(txn1(s, "pend", 12, "", NULL, -1, "t1", 0, 3), ST_OK);
    advance(s, 70000);
    advance(s, 10000);
    /* the offset with a transaction open did not expire; both groups stay */
    assert_int_equal(committed(s, "solo", "t1", 0), 1);
    assert_non_null(st_gstate_group(s, S("pend")));
    /* once the transactions end the offsets age as any other */
    marker(s, "solo", 11, 1);
    marker(s, "pend", 12, 1);
    assert_int_equal(committed(s, "solo", "t1", 0), 2);
    assert_int_equal(committed(s, "pend", "t1", 0), 3);
    advance(s, 70000);
    advance(s, 10000);
    assert_null(st_gstate_group(s, S("solo")));
    assert_null(st_gstate_group(s, S("pend")));

    /* OffsetDelete of a partition with only a pending offset: dropped */
    assert_int_equal(txn1(s, "d", 13, "", NULL, -1, "t1", 0, 5), ST_OK);
    commit1(s, "d", "", -1, "t1", 1, 6, NULL, ST_OK);
    st_group_offset_delete_t od[1] = {{S("t1"), 0, 0}};
    assert_int_equal(st_gstate_delete_offsets(s, S("d"), od, 1), ST_OK);
    assert_false(pending(s, "d", "t1", 0));
    marker(s, "d", 13, 1); /* nothing left to commit */
    assert_int_equal(committed(s, "d", "t1", 0), -1);
    assert_int_equal(committed(s, "d", "t1", 1), 6);
    /* a deleted topic takes its pending offsets along */
    assert_int_equal(txn1(s, "d", 14, "", NULL, -1, "gone", 2, 7), ST_OK);
    assert_int_equal(st_gstate_drop_missing_topics(s, only_t1, NULL), 1);
    assert_false(pending(s, "d", "gone", 2));
    /* DeleteGroups of an Empty group: its pending offsets go with it */
    assert_int_equal(txn1(s, "e", 15, "", NULL, -1, "t1", 4, 8), ST_OK);
    assert_int_equal(st_gstate_delete_group(s, S("e")), ST_OK);
    assert_null(st_gstate_group(s, S("e")));
    marker(s, "e", 15, 1);
    assert_null(st_gstate_group(s, S("e")));
    st_gstate_destroy(s);

    s = replay();
    for (int p = 0; p < CFG.num_partitions; p++) st_gstate_load_done(s, p);
    assert_null(st_gstate_group(s, S("solo")));
    assert_null(st_gstate_group(s, S("pend")));
    assert_int_equal(committed(s, "d", "t1", 0), -1);
    assert_int_equal(committed(s, "d", "t1", 1), 6);
    assert_false(pending(s, "d", "gone", 2));
    assert_null(st_gstate_group(s, S("e")));
    st_gstate_destroy(s);
}

int main(void) {
    unit_seed("group");
    st_log_set_level(getenv("STRATA_TEST_LOG") ? ST_LOG_DEBUG : ST_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_partition_for, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_join_sync_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_expiry_and_leave, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebalance_timeouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_vote_and_bad_joins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_static_membership, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offsets_commit_fetch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offset_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_groups_and_offsets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_topics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nul_bytes_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_and_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_commit_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_commit_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_commit_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_replay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_expiry_and_deletion, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

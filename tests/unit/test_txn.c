/*
 * test_txn.c - unit tests of broker/txn: the transaction coordinator's
 * state machine driven through st_tstate_* with a fake clock, a fake
 * __transaction_state log, a fake producer id block and a fake marker
 * channel; the records' formats; the rebuild by replaying what was written.
 *
 * The fake log keeps every appended record per partition, so a test can
 * replay it into a fresh state machine as the coordinator replays the real
 * partition after a restart.
 */
#include "unit.h"

#include "txn_int.h"

#define S(x) st_str(x)
#define NPARTS 50

/* ======================================================================
 * Fakes
 * ==================================================================== */

typedef struct frec {
    int32_t partition;
    uint8_t *key;
    int32_t klen;
    uint8_t *value;
    int32_t vlen;
} frec_t;

typedef struct fmark {
    char id[64];
    int64_t pid;
    int16_t epoch;
    int commit;
    int nparts;
} fmark_t;

static struct {
    int64_t mono, wall;
    st_err_t fail;
    frec_t recs[1024];
    int nrecs;
    int64_t next_pid;
    fmark_t marks[64];
    int nmarks;
} F;

static int64_t f_mono(void *a) {
    (void)a;
    return F.mono;
}

static int64_t f_wall(void *a) {
    (void)a;
    return F.wall;
}

static st_err_t f_append(void *a, int32_t partition, const st_batch_record_t *r, int n) {
    (void)a;
    if (F.fail) return F.fail;
    for (int i = 0; i < n; i++) {
        assert_true(F.nrecs < (int)ST_ARRAY_SIZE(F.recs));
        frec_t *f = &F.recs[F.nrecs++];
        f->partition = partition;
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
}

static void f_send(void *a, const st_txn_markers_t *m) {
    (void)a;
    assert_true(F.nmarks < (int)ST_ARRAY_SIZE(F.marks));
    fmark_t *k = &F.marks[F.nmarks++];
    snprintf(k->id, sizeof k->id, "%.*s", (int)m->id.len, m->id.p);
    k->pid = m->producer_id;
    k->epoch = m->producer_epoch;
    k->commit = m->commit;
    k->nparts = m->nparts;
}

static int64_t f_pid(void *a) {
    (void)a;
    return F.next_pid < 0 ? -1 : F.next_pid++;
}

static void fake_reset(void) {
    for (int i = 0; i < F.nrecs; i++) {
        free(F.recs[i].key);
        free(F.recs[i].value);
    }
    memset(&F, 0, sizeof F);
    F.mono = 1000;
    F.wall = 1700000000000;
    F.next_pid = 4000;
}

static const st_tstate_ops_t OPS = {f_mono, f_wall, f_append, f_ensure, f_send, f_pid, NULL};

static st_tstate_t *fresh(void) {
    st_tstate_config_t cfg = {NPARTS, 60000, 7LL * 24 * 3600 * 1000, 10000};
    st_tstate_t *s = st_tstate_new(&cfg, &OPS);
    for (int i = 0; i < NPARTS; i++) st_tstate_set_partition(s, i, ST_TPART_LOADED);
    return s;
}

/* A new state machine with every record of the fake log replayed. */
static st_tstate_t *replayed(void) {
    st_tstate_config_t cfg = {NPARTS, 60000, 7LL * 24 * 3600 * 1000, 10000};
    st_tstate_t *s = st_tstate_new(&cfg, &OPS);
    for (int i = 0; i < NPARTS; i++) st_tstate_set_partition(s, i, ST_TPART_LOADING);
    for (int i = 0; i < F.nrecs; i++)
        st_tstate_load_record(s, F.recs[i].partition, F.recs[i].key, F.recs[i].klen,
                              F.recs[i].value, F.recs[i].vlen);
    for (int i = 0; i < NPARTS; i++) st_tstate_load_done(s, i);
    return s;
}

static int setup(void **st) {
    (void)st;
    fake_reset();
    return 0;
}

static int teardown(void **st) {
    (void)st;
    fake_reset();
    return 0;
}

static const st_txn_tp_t P0 = {{"t", 1}, 0}, P1 = {{"t", 1}, 1}, Q0 = {{"u", 1}, 0};

/* ======================================================================
 * Tests
 * ==================================================================== */

static void test_init_new_and_bump(void **st) {
    (void)st;
    st_tstate_t *s = fresh();
    int64_t pid;
    int16_t ep;
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, -1, -1, &pid, &ep), ST_OK);
    assert_int_equal(pid, 4000);
    assert_int_equal(ep, 0);
    assert_int_equal(F.nrecs, 1);
    /* a new producer instance: the epoch goes up */
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, -1, -1, &pid, &ep), ST_OK);
    assert_int_equal(pid, 4000);
    assert_int_equal(ep, 1);
    /* KIP-360: its own id and epoch bump it; a retry of that bump gets the same */
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, 4000, 1, &pid, &ep), ST_OK);
    assert_int_equal(ep, 2);
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, 4000, 1, &pid, &ep), ST_OK);
    assert_int_equal(ep, 2);
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, 4000, 0, &pid, &ep),
                     ST_E_PRODUCER_FENCED);
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, 9999, 2, &pid, &ep),
                     ST_E_PRODUCER_FENCED);
    /* timeouts and ids */
    assert_int_equal(st_tstate_init_pid(s, S("a"), 60001, -1, -1, &pid, &ep),
                     ST_E_INVALID_TRANSACTION_TIMEOUT);
    assert_int_equal(st_tstate_init_pid(s, S("a"), 0, -1, -1, &pid, &ep),
                     ST_E_INVALID_TRANSACTION_TIMEOUT);
    assert_int_equal(st_tstate_init_pid(s, S(""), 1000, -1, -1, &pid, &ep), ST_E_INVALID_REQUEST);
    /* no producer id at hand: retriable, and nothing is left behind */
    F.next_pid = -1;
    assert_int_equal(st_tstate_init_pid(s, S("b"), 1000, -1, -1, &pid, &ep),
                     ST_E_COORDINATOR_LOAD_IN_PROGRESS);
    assert_null(st_tstate_lookup(s, S("b")));
    st_tstate_destroy(s);
}

static void test_partition_states(void **st) {
    (void)st;
    st_tstate_config_t cfg = {NPARTS, 60000, 1000, 10000};
    st_tstate_t *s = st_tstate_new(&cfg, &OPS);
    int64_t pid;
    int16_t ep;
    int32_t p = st_tstate_partition_of(s, S("a"));
    assert_int_equal(st_tstate_init_pid(s, S("a"), 1000, -1, -1, &pid, &ep), ST_E_NOT_COORDINATOR);
    st_tstate_set_partition(s, p, ST_TPART_LOADING);
    assert_int_equal(st_tstate_init_pid(s, S("a"), 1000, -1, -1, &pid, &ep),
                     ST_E_COORDINATOR_LOAD_IN_PROGRESS);
    st_tstate_load_done(s, p);
    assert_int_equal(st_tstate_init_pid(s, S("a"), 1000, -1, -1, &pid, &ep), ST_OK);
    st_tstate_unload(s, p);
    assert_null(st_tstate_lookup(s, S("a")));
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 1), ST_E_NOT_COORDINATOR);
    st_tstate_destroy(s);
}

static void test_commit_flow(void **st) {
    (void)st;
    st_tstate_t *s = fresh();
    int64_t pid;
    int16_t ep;
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, -1, -1, &pid, &ep), ST_OK);
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 1), ST_E_INVALID_TXN_STATE);
    st_txn_tp_t parts[] = {P1, P0, P1};
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid, ep, parts, 3), ST_OK);
    const st_txn_t *t = st_tstate_lookup(s, S("a"));
    assert_int_equal(t->status, ST_TXN_ONGOING);
    assert_int_equal(t->nparts, 2); /* sorted, no duplicates */
    assert_int_equal(t->parts[0].partition, 0);
    assert_int_equal(t->start_ts, F.wall);
    int n = F.nrecs;
    /* already in: nothing written */
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid, ep, parts, 1), ST_OK);
    assert_int_equal(F.nrecs, n);
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid, ep, &Q0, 1), ST_OK);
    assert_int_equal(t->nparts, 3);
    /* the wrong producer */
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid + 1, ep, &Q0, 1),
                     ST_E_INVALID_PRODUCER_ID_MAPPING);
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid, (int16_t)(ep + 1), &Q0, 1),
                     ST_E_PRODUCER_FENCED);
    assert_int_equal(st_tstate_add_partitions(s, S("nope"), pid, ep, &Q0, 1),
                     ST_E_INVALID_PRODUCER_ID_MAPPING);
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, (int16_t)(ep + 3), 1), ST_E_PRODUCER_FENCED);
    /* commit: prepared, markers out */
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 1), ST_OK);
    assert_int_equal(t->status, ST_TXN_PREPARE_COMMIT);
    assert_int_equal(F.nmarks, 1);
    assert_true(F.marks[0].commit);
    assert_int_equal(F.marks[0].nparts, 3);
    /* meanwhile */
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 1), ST_E_CONCURRENT_TRANSACTIONS);
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 0), ST_E_INVALID_TXN_STATE);
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid, ep, &P0, 1),
                     ST_E_CONCURRENT_TRANSACTIONS);
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, -1, -1, &pid, &ep),
                     ST_E_CONCURRENT_TRANSACTIONS);
    /* a stale completion is ignored */
    st_tstate_markers_done(s, S("a"), pid, (int16_t)(ep + 1));
    assert_int_equal(t->status, ST_TXN_PREPARE_COMMIT);
    st_tstate_markers_done(s, S("a"), pid, ep);
    assert_int_equal(t->status, ST_TXN_COMPLETE_COMMIT);
    assert_int_equal(t->nparts, 0);
    /* a retried EndTxn is fine; the other outcome is not */
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 1), ST_OK);
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 0), ST_E_INVALID_TXN_STATE);
    /* the next transaction starts anew */
    F.wall += 5;
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid, ep, &Q0, 1), ST_OK);
    assert_int_equal(t->nparts, 1);
    assert_int_equal(t->start_ts, F.wall);
    st_tstate_destroy(s);
}

static void test_fence_ongoing(void **st) {
    (void)st;
    st_tstate_t *s = fresh();
    int64_t pid;
    int16_t ep;
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, -1, -1, &pid, &ep), ST_OK);
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid, ep, &P0, 1), ST_OK);
    int64_t p2;
    int16_t e2;
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, -1, -1, &p2, &e2),
                     ST_E_CONCURRENT_TRANSACTIONS);
    const st_txn_t *t = st_tstate_lookup(s, S("a"));
    assert_int_equal(t->status, ST_TXN_PREPARE_ABORT);
    assert_int_equal(t->producer_epoch, ep + 1);
    assert_int_equal(F.nmarks, 1);
    assert_false(F.marks[0].commit);
    assert_int_equal(F.marks[0].epoch, ep + 1); /* the markers fence the old epoch */
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 1), ST_E_PRODUCER_FENCED);
    st_tstate_markers_done(s, S("a"), pid, (int16_t)(ep + 1));
    assert_int_equal(t->status, ST_TXN_COMPLETE_ABORT);
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, -1, -1, &p2, &e2), ST_OK);
    assert_int_equal(p2, pid);
    assert_int_equal(e2, ep + 2);
    st_tstate_destroy(s);
}

static void test_epoch_exhausted_rotates(void **st) {
    (void)st;
    st_tstate_t *s = fresh();
    int64_t pid;
    int16_t ep;
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, -1, -1, &pid, &ep), ST_OK);
    /* write a record at an exhausted epoch and replay it */
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_trec_key(&k, S("z"));
    st_trec_value_t rv = {77, -1, INT16_MAX - 1, 5000, ST_TXN_COMPLETE_COMMIT, NULL, 0, F.wall, -1};
    st_trec_value(&v, &rv);
    int32_t p = st_tstate_partition_of(s, S("z"));
    st_tstate_set_partition(s, p, ST_TPART_LOADING);
    st_tstate_load_record(s, p, k.data, (int32_t)k.len, v.data, (int32_t)v.len);
    st_tstate_load_done(s, p);
    st_buf_fini(&k);
    st_buf_fini(&v);
    assert_int_equal(st_tstate_init_pid(s, S("z"), 5000, -1, -1, &pid, &ep), ST_OK);
    assert_int_not_equal(pid, 77);
    assert_int_equal(ep, 0);
    const st_txn_t *t = st_tstate_lookup(s, S("z"));
    assert_int_equal(t->last_producer_id, 77);
    st_tstate_destroy(s);
}

static void test_timeout_and_expiry(void **st) {
    (void)st;
    st_tstate_config_t cfg = {NPARTS, 60000, 100000, 500};
    st_tstate_t *s = st_tstate_new(&cfg, &OPS);
    for (int i = 0; i < NPARTS; i++) st_tstate_set_partition(s, i, ST_TPART_LOADED);
    int64_t pid, pid_b;
    int16_t ep, ep_b;
    assert_int_equal(st_tstate_init_pid(s, S("a"), 1000, -1, -1, &pid, &ep), ST_OK);
    assert_int_equal(st_tstate_init_pid(s, S("b"), 1000, -1, -1, &pid_b, &ep_b), ST_OK);
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid, ep, &P0, 1), ST_OK);
    F.mono += 600;
    F.wall += 600;
    st_tstate_tick(s);
    assert_int_equal(st_tstate_lookup(s, S("a"))->status, ST_TXN_ONGOING);
    F.mono += 600;
    F.wall += 600;
    int64_t next = st_tstate_tick(s);
    assert_int_equal(next, F.mono + 500);
    const st_txn_t *t = st_tstate_lookup(s, S("a"));
    assert_int_equal(t->status, ST_TXN_PREPARE_ABORT);
    assert_int_equal(t->producer_epoch, ep + 1);
    assert_int_equal(F.nmarks, 1);
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 1), ST_E_PRODUCER_FENCED);
    st_tstate_markers_done(s, S("a"), pid, (int16_t)(ep + 1));
    /* idle ids expire (b first: it was updated earlier), with a tombstone */
    F.mono += 100000 - 1200 + 1;
    F.wall += 100000 - 1200 + 1;
    st_tstate_tick(s);
    assert_null(st_tstate_lookup(s, S("b")));
    assert_non_null(st_tstate_lookup(s, S("a")));
    assert_null(F.recs[F.nrecs - 1].value);
    F.mono += 2000;
    F.wall += 2000;
    st_tstate_tick(s);
    assert_null(st_tstate_lookup(s, S("a")));
    st_tstate_destroy(s);
    /* the replay agrees: both gone */
    s = replayed();
    assert_null(st_tstate_lookup(s, S("a")));
    assert_null(st_tstate_lookup(s, S("b")));
    st_tstate_destroy(s);
}

static void test_failed_append_changes_nothing(void **st) {
    (void)st;
    st_tstate_t *s = fresh();
    int64_t pid;
    int16_t ep;
    F.fail = ST_E_NOT_LEADER_OR_FOLLOWER;
    assert_int_equal(st_tstate_init_pid(s, S("a"), 1000, -1, -1, &pid, &ep), ST_E_NOT_COORDINATOR);
    assert_null(st_tstate_lookup(s, S("a")));
    F.fail = ST_OK;
    assert_int_equal(st_tstate_init_pid(s, S("a"), 1000, -1, -1, &pid, &ep), ST_OK);
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pid, ep, &P0, 1), ST_OK);
    F.fail = ST_E_MESSAGE_TOO_LARGE;
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 1), ST_E_UNKNOWN_SERVER_ERROR);
    assert_int_equal(st_tstate_lookup(s, S("a"))->status, ST_TXN_ONGOING);
    assert_int_equal(F.nmarks, 0);
    F.fail = ST_OK;
    assert_int_equal(st_tstate_end_txn(s, S("a"), pid, ep, 1), ST_OK);
    /* the Complete record cannot be written: the tick writes it later */
    F.fail = ST_E_KAFKA_STORAGE_ERROR;
    st_tstate_markers_done(s, S("a"), pid, ep);
    assert_int_equal(st_tstate_lookup(s, S("a"))->status, ST_TXN_PREPARE_COMMIT);
    F.fail = ST_OK;
    F.mono += 20000;
    st_tstate_tick(s);
    assert_int_equal(st_tstate_lookup(s, S("a"))->status, ST_TXN_COMPLETE_COMMIT);
    st_tstate_destroy(s);
}

static void test_replay_resumes_markers(void **st) {
    (void)st;
    st_tstate_t *s = fresh();
    int64_t pa, pb, pc;
    int16_t ea, eb, ec;
    assert_int_equal(st_tstate_init_pid(s, S("a"), 10000, -1, -1, &pa, &ea), ST_OK);
    assert_int_equal(st_tstate_init_pid(s, S("b"), 20000, -1, -1, &pb, &eb), ST_OK);
    assert_int_equal(st_tstate_init_pid(s, S("c"), 30000, -1, -1, &pc, &ec), ST_OK);
    st_txn_tp_t two[] = {P0, Q0};
    assert_int_equal(st_tstate_add_partitions(s, S("a"), pa, ea, two, 2), ST_OK);
    assert_int_equal(st_tstate_add_partitions(s, S("b"), pb, eb, &P1, 1), ST_OK);
    assert_int_equal(st_tstate_end_txn(s, S("a"), pa, ea, 1), ST_OK); /* PrepareCommit */
    assert_int_equal(st_tstate_end_txn(s, S("c"), pc, ec, 0), ST_E_INVALID_TXN_STATE);
    st_tstate_destroy(s);
    F.nmarks = 0;
    s = replayed();
    const st_txn_t *a = st_tstate_lookup(s, S("a")), *b = st_tstate_lookup(s, S("b")),
                   *c = st_tstate_lookup(s, S("c"));
    assert_non_null(a);
    assert_int_equal(a->status, ST_TXN_PREPARE_COMMIT);
    assert_int_equal(a->nparts, 2);
    assert_int_equal(a->producer_id, pa);
    assert_int_equal(b->status, ST_TXN_ONGOING);
    assert_int_equal(b->timeout_ms, 20000);
    assert_int_equal(b->nparts, 1);
    assert_int_equal(b->parts[0].partition, 1);
    assert_int_equal(c->status, ST_TXN_EMPTY);
    /* a's markers go out again */
    assert_int_equal(F.nmarks, 1);
    assert_string_equal(F.marks[0].id, "a");
    assert_true(F.marks[0].commit);
    assert_int_equal(F.marks[0].nparts, 2);
    st_tstate_markers_done(s, S("a"), pa, ea);
    assert_int_equal(a->status, ST_TXN_COMPLETE_COMMIT);
    assert_int_equal(st_tstate_skipped_records(s), 0);
    /* hostile records are skipped, counted */
    st_tstate_set_partition(s, 3, ST_TPART_LOADING);
    uint8_t junk[] = {0, 0, 0, 9, 'x'};
    st_tstate_load_record(s, 3, junk, sizeof junk, junk, sizeof junk);
    uint8_t key[] = {0, 0, 0, 1, 'q'};
    st_tstate_load_record(s, 3, key, sizeof key, junk, sizeof junk);
    st_tstate_load_done(s, 3);
    assert_int_equal(st_tstate_skipped_records(s), 2);
    assert_null(st_tstate_lookup(s, S("q")));
    st_tstate_destroy(s);
}

static void test_records_format(void **st) {
    (void)st;
    /* TransactionLogKey v0: int16 0, string */
    st_buf_t k;
    st_buf_init(&k);
    st_trec_key(&k, S("tx"));
    static const uint8_t want_key[] = {0, 0, 0, 2, 't', 'x'};
    assert_int_equal(k.len, sizeof want_key);
    assert_memory_equal(k.data, want_key, sizeof want_key);
    st_str_t id;
    assert_int_equal(st_trec_decode_key(k.data, (int32_t)k.len, &id), ST_OK);
    assert_int_equal(id.len, 2);
    st_buf_fini(&k);
    /* value v0 byte by byte */
    st_txn_tp_t parts[] = {{{"ab", 2}, 3}, {{"ab", 2}, 5}, {{"c", 1}, 0}};
    st_trec_value_t v = {0x0102, -1, 7, 60000, ST_TXN_ONGOING, parts, 3, 0x11, 0x22};
    st_buf_t b;
    st_buf_init(&b);
    st_trec_value(&b, &v);
    static const uint8_t want[] = {
        0, 0,                          /* version 0 */
        0, 0, 0, 0, 0, 0, 1, 2,        /* producer id */
        0, 7,                          /* epoch */
        0, 0, 0xea, 0x60,              /* timeout 60000 */
        1,                             /* Ongoing */
        0, 0, 0, 2,                    /* 2 topics */
        0, 2, 'a', 'b', 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 5,
        0, 1, 'c', 0, 0, 0, 1, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0x11,     /* last update */
        0, 0, 0, 0, 0, 0, 0, 0x22,     /* start */
    };
    assert_int_equal(b.len, sizeof want);
    assert_memory_equal(b.data, want, sizeof want);
    st_arena_t a;
    st_arena_init(&a, 256);
    st_trec_value_t d;
    assert_int_equal(st_trec_decode_value(b.data, (int32_t)b.len, &a, &d), ST_OK);
    assert_int_equal(d.nparts, 3);
    assert_int_equal(d.parts[1].partition, 5);
    assert_int_equal(d.status, ST_TXN_ONGOING);
    assert_int_equal(d.start_ts, 0x22);
    /* every truncated prefix is refused */
    for (size_t n = 0; n < b.len; n++)
        assert_int_not_equal(st_trec_decode_value(b.data, (int32_t)n, &a, &d), ST_OK);
    st_arena_fini(&a);
    st_buf_fini(&b);
    /* the status names */
    assert_string_equal(st_txn_status_name(ST_TXN_PREPARE_EPOCH_FENCE), "PrepareEpochFence");
    assert_int_equal(st_txn_status_from_name(S("CompleteAbort")), ST_TXN_COMPLETE_ABORT);
    assert_int_equal(st_txn_status_from_name(S("complete")), -1);
}

int main(void) {
    unit_seed("txn");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_init_new_and_bump, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partition_states, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_flow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fence_ongoing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch_exhausted_rotates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_and_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_append_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_resumes_markers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_format, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

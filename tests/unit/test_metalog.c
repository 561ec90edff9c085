/*
 * test_metalog.c - unit tests of broker/controller's metalog and
 * snapshots: the storage half of the Raft's ops over a real
 * __cluster_metadata log in a scratch directory.
 *
 * Entries are appended as the Raft would (LeaderChange control entries and
 * record batches of metadata records at given offsets and epochs) and read
 * back, truncated, reset, reopened; the quorum-state file is written, read,
 * damaged; snapshots are created from an image built by replaying the log,
 * loaded and compared with that replay field by field, sent in chunks to a
 * second node's directory and installed, damaged and refused.
 */
#include "unit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metalog.h"

/* ---- a node's metadata directory -------------------------------------------- */

typedef struct node {
    char *root;
    char dir[4096];
    st_logmgr_t *mgr;
    st_log_t *log;
    st_metalog_t *ml;
    int sync_flush;
    /* the state machine: an image and the end of what it applied */
    st_meta_image_t *img;
    int64_t applied_end;
    st_meta_image_t *loaded; /* what snapshot_load handed over */
    st_raft_snapshot_id_t loaded_id;
    /* async flushes */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int flushed;
} node_t;

static st_meta_image_t *sm_image(void *arg, int64_t *applied_end) {
    node_t *n = arg;
    *applied_end = n->applied_end;
    return st_image_keep(n->img);
}

static void sm_load(void *arg, st_meta_image_t *img, st_raft_snapshot_id_t id) {
    node_t *n = arg;
    st_image_release(n->loaded);
    n->loaded = img;
    n->loaded_id = id;
}

static void on_flushed(void *arg) {
    node_t *n = arg;
    pthread_mutex_lock(&n->lock);
    n->flushed++;
    pthread_cond_broadcast(&n->cond);
    pthread_mutex_unlock(&n->lock);
}

static st_log_config_t meta_log_config(int64_t segment_bytes) {
    st_log_config_t lc = {
        .segment_bytes = segment_bytes,
        .segment_ms = INT64_MAX,
        .retention_ms = -1,
        .retention_bytes = -1,
        .index_interval_bytes = 512,
        .segment_index_bytes = 10 << 20,
        .max_message_bytes = 8 << 20,
        .ts_before_max_ms = INT64_MAX,
        .ts_after_max_ms = INT64_MAX,
    };
    return lc;
}

/* Opens the log and the metalog; err receives a refusal (NULL: must open). */
static st_err_t node_open(node_t *n, char *err, size_t errlen) {
    char *dirs[1] = {n->dir};
    st_logmgr_config_t mc = {dirs, 1, 1, 3600 * 1000, 3600 * 1000, 0, NULL, 0};
    char e1[512] = "";
    st_err_t rc = st_logmgr_open(&mc, &n->mgr, e1, sizeof e1);
    if (rc) fail_msg("st_logmgr_open: %s", e1);
    st_log_config_t lc = meta_log_config(4096);
    assert_int_equal(st_logmgr_open_log(n->mgr, "__cluster_metadata", 0, NULL, &lc, &n->log),
                     ST_OK);
    st_metalog_config_t cfg = {
        .log = n->log,
        .flushed = n->sync_flush ? NULL : on_flushed,
        .flushed_arg = n,
        .sync_flush = n->sync_flush,
        .sm = {n, sm_image, sm_load},
        .host = n,
    };
    char e2[1024] = "";
    rc = st_metalog_open(&cfg, &n->ml, e2, sizeof e2);
    if (rc && !err) fail_msg("st_metalog_open: %s", e2);
    if (err) snprintf(err, errlen, "%s", e2);
    return rc;
}

static void node_close(node_t *n) {
    st_metalog_close(n->ml);
    n->ml = NULL;
    st_log_release(n->log);
    n->log = NULL;
    st_logmgr_close(n->mgr);
    n->mgr = NULL;
}

static void node_init(node_t *n, int sync_flush) {
    memset(n, 0, sizeof *n);
    n->root = unit_tmpdir();
    snprintf(n->dir, sizeof n->dir, "%s/meta", n->root);
    n->sync_flush = sync_flush;
    pthread_mutex_init(&n->lock, NULL);
    pthread_cond_init(&n->cond, NULL);
    n->img = st_image_apply(NULL, NULL, 0, -1);
    node_open(n, NULL, 0);
}

static void node_fini(node_t *n) {
    if (n->ml) node_close(n);
    st_image_release(n->img);
    st_image_release(n->loaded);
    pthread_mutex_destroy(&n->lock);
    pthread_cond_destroy(&n->cond);
    unit_tmpdir_remove(n->root);
}

static char *node_file(node_t *n, const char *name) {
    return st_strprintf("%s/%s", st_metalog_dir(n->ml), name);
}

/* ---- entries ---------------------------------------------------------------- */

/* Entries the test appended, with their bytes as the Raft holds them. */
typedef struct ent {
    st_raft_entry_t e;
    uint8_t *bytes;
} ent_t;

typedef struct ents {
    ent_t *v;
    int n, cap;
    int64_t end;
    uint64_t label;
} ents_t;

static void ents_fini(ents_t *es) {
    for (int i = 0; i < es->n; i++) free(es->v[i].bytes);
    free(es->v);
    memset(es, 0, sizeof *es);
}

static ent_t *ents_push(ents_t *es) {
    if (es->n == es->cap) {
        es->cap = es->cap ? es->cap * 2 : 64;
        es->v = st_realloc(es->v, sizeof *es->v * (size_t)es->cap);
    }
    return &es->v[es->n++];
}

/* A LeaderChange control entry at the end. */
static ent_t *leader_change(ents_t *es, int32_t epoch, int32_t leader) {
    int32_t voters[3] = {1, 2, 3};
    st_buf_t b;
    st_buf_init(&b);
    st_raft_leader_change_encode(leader, voters, 3, voters, 2, &b);
    ent_t *x = ents_push(es);
    x->bytes = b.data;
    x->e = (st_raft_entry_t){es->end, epoch, 1, ST_RAFT_CONTROL_LEADER_CHANGE, x->bytes,
                             (int32_t)b.len};
    es->end += 1;
    return x;
}

/* A batch of metadata record values as a data entry at the end. */
static ent_t *data_entry(ents_t *es, int32_t epoch, st_buf_t *values, size_t *ends, int n) {
    st_batch_record_t *recs = st_calloc((size_t)n, sizeof *recs);
    size_t start = 0;
    for (int i = 0; i < n; i++) {
        recs[i] = (st_batch_record_t){NULL, -1, values->data + start, (int32_t)(ends[i] - start)};
        start = ends[i];
    }
    st_buf_t b;
    st_buf_init(&b);
    st_batch_build(&b, recs, n, 1700000000000 + es->end);
    free(recs);
    ent_t *x = ents_push(es);
    x->bytes = b.data;
    x->e = (st_raft_entry_t){es->end, epoch, n, ST_RAFT_CONTROL_NONE, x->bytes, (int32_t)b.len};
    es->end += n;
    return x;
}

/* A data entry of n TopicRecords with fresh names. */
static ent_t *topics_entry(ents_t *es, int32_t epoch, int n) {
    st_buf_t v;
    st_buf_init(&v);
    size_t ends[64];
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "t-%llu", (unsigned long long)es->label++);
        st_mrec_topic_t t = {st_str(name), {{0}}};
        unit_fill(&t.topic_id, sizeof t.topic_id);
        st_mrec_encode(ST_MREC_TOPIC, 0, &t, &v);
        ends[i] = v.len;
    }
    ent_t *x = data_entry(es, epoch, &v, ends, n);
    st_buf_fini(&v);
    return x;
}

static void append_from(node_t *nd, ents_t *es, int from) {
    st_raft_entry_t *v = st_calloc((size_t)(es->n - from) + 1, sizeof *v);
    for (int i = from; i < es->n; i++) v[i - from] = es->v[i].e;
    st_err_t rc = st_metalog_append(nd->ml, v, es->n - from);
    free(v);
    if (rc) fail_msg("append: %s: %s", st_err_name(rc), st_metalog_error(nd->ml));
}

/* The entry read back is the one appended: offsets, epoch, count, kind, and
 * the bytes (a data batch as appended, with the offset and epoch stamped). */
static void expect_entry(const st_raft_entry_t *got, const ent_t *want) {
    if (got->base_offset != want->e.base_offset || got->epoch != want->e.epoch ||
        got->record_count != want->e.record_count || got->control != want->e.control ||
        got->len != want->e.len)
        fail_msg("entry at %lld: read (%lld, epoch %d, %d records, control %d, %d bytes), "
                 "appended (%lld, epoch %d, %d records, control %d, %d bytes)",
                 (long long)want->e.base_offset, (long long)got->base_offset, got->epoch,
                 got->record_count, got->control, got->len, (long long)want->e.base_offset,
                 want->e.epoch, want->e.record_count, want->e.control, want->e.len);
    if (want->e.control) {
        assert_memory_equal(got->data, want->e.data, (size_t)got->len);
        return;
    }
    assert_true((int64_t)st_be64_get(got->data) == want->e.base_offset);
    assert_int_equal((int32_t)st_be32_get(got->data + ST_BATCH_EPOCH_OFFSET), want->e.epoch);
    assert_memory_equal(got->data + ST_BATCH_MAGIC_OFFSET, want->e.data + ST_BATCH_MAGIC_OFFSET,
                        (size_t)got->len - ST_BATCH_MAGIC_OFFSET);
}

/* Read everything from entry `from` on, in reads of max_bytes. */
static void expect_log(node_t *nd, const ents_t *es, int from, int32_t max_bytes) {
    int i = from;
    int64_t off = from < es->n ? es->v[from].e.base_offset : es->end;
    for (;;) {
        const st_raft_entry_t *got;
        int n;
        st_err_t rc = st_metalog_read(nd->ml, off, max_bytes, &got, &n);
        if (rc) fail_msg("read at %lld: %s: %s", (long long)off, st_err_name(rc),
                         st_metalog_error(nd->ml));
        if (n == 0) break;
        for (int k = 0; k < n; k++) {
            assert_true(i < es->n);
            expect_entry(&got[k], &es->v[i++]);
        }
        off = got[n - 1].base_offset + got[n - 1].record_count;
    }
    assert_int_equal(i, es->n);
    assert_true(st_metalog_end_offset(nd->ml) == es->end);
}

static void expect_epoch_end(node_t *nd, int32_t ask, int32_t want_epoch, int64_t want_end) {
    int32_t ep;
    int64_t end;
    st_metalog_end_offset_for_epoch(nd->ml, ask, &ep, &end);
    if (ep != want_epoch || end != want_end)
        fail_msg("end offset for epoch %d: (%d, %lld), want (%d, %lld)", ask, ep, (long long)end,
                 want_epoch, (long long)want_end);
}

static void test_metalog_append_read(void **state) {
    (void)state;
    node_t nd;
    node_init(&nd, 1);
    ents_t es = {0};
    assert_true(st_metalog_end_offset(nd.ml) == 0 && st_metalog_start_offset(nd.ml) == 0);
    const st_raft_entry_t *got;
    int n;
    assert_int_equal(st_metalog_read(nd.ml, 0, 1000, &got, &n), ST_OK);
    assert_int_equal(n, 0);

    leader_change(&es, 1, 1);
    for (int i = 0; i < 20; i++) topics_entry(&es, 1, 1 + i % 5);
    append_from(&nd, &es, 0);
    int mark = es.n;
    leader_change(&es, 2, 3);
    for (int i = 0; i < 30; i++) topics_entry(&es, 2, 1 + i % 7);
    append_from(&nd, &es, mark); /* more than a 4 KiB segment: split in runs */
    assert_true(st_metalog_end_offset(nd.ml) == es.end);
    /* appended is readable at once; durable only after a flush */
    assert_true(st_metalog_durable_end(nd.ml) < es.end);
    st_metalog_flush(nd.ml);
    assert_true(st_metalog_durable_end(nd.ml) == es.end);

    expect_log(&nd, &es, 0, 1 << 20);
    expect_log(&nd, &es, 0, 1);   /* one entry at a time: at least one */
    expect_log(&nd, &es, 0, 300); /* a few at a time */
    expect_log(&nd, &es, mark, 1 << 20);
    assert_int_equal(st_metalog_read(nd.ml, es.end, 1000, &got, &n), ST_OK);
    assert_int_equal(n, 0);
    assert_int_equal(st_metalog_read(nd.ml, es.end + 1, 1000, &got, &n), ST_E_OFFSET_OUT_OF_RANGE);
    /* an offset inside an entry reads from the entry holding it */
    const ent_t *multi = &es.v[3];
    assert_true(multi->e.record_count > 1);
    assert_int_equal(st_metalog_read(nd.ml, multi->e.base_offset + 1, 1, &got, &n), ST_OK);
    assert_int_equal(n, 1);
    expect_entry(&got[0], multi);

    /* Refused whole, nothing written: a gap, an epoch going down, a count
     * that is not the batch's, a batch whose CRC fails, a control entry of
     * two records. */
    ents_t bad = {0};
    bad.end = es.end + 1;
    topics_entry(&bad, 2, 2);
    assert_int_equal(st_metalog_append(nd.ml, &bad.v[0].e, 1), ST_E_INVAL);
    assert_non_null(strstr(st_metalog_error(nd.ml), "does not continue the log"));
    bad.v[0].e.base_offset = es.end;
    bad.v[0].e.epoch = 1;
    assert_int_equal(st_metalog_append(nd.ml, &bad.v[0].e, 1), ST_E_INVAL);
    bad.v[0].e.epoch = 2;
    bad.v[0].e.record_count = 3;
    assert_int_equal(st_metalog_append(nd.ml, &bad.v[0].e, 1), ST_E_INVAL);
    bad.v[0].e.record_count = 2;
    bad.v[0].bytes[bad.v[0].e.len - 2] ^= 1;
    assert_int_equal(st_metalog_append(nd.ml, &bad.v[0].e, 1), ST_E_CORRUPT);
    assert_non_null(strstr(st_metalog_error(nd.ml), "CRC32C"));
    bad.v[0].bytes[bad.v[0].e.len - 2] ^= 1;
    st_raft_entry_t two[2] = {bad.v[0].e, bad.v[0].e};
    two[1].base_offset += 2;
    two[1].len = 10; /* not a batch */
    assert_int_equal(st_metalog_append(nd.ml, two, 2), ST_E_CORRUPT);
    assert_true(st_metalog_end_offset(nd.ml) == es.end);
    /* the good one goes in */
    assert_int_equal(st_metalog_append(nd.ml, &bad.v[0].e, 1), ST_OK);
    assert_true(st_metalog_end_offset(nd.ml) == es.end + 2);
    ents_fini(&bad);
    ents_fini(&es);
    node_fini(&nd);
}

/* The entry <-> batch codec on hostile bytes: every prefix and every
 * flipped byte of a stored control and data batch is refused. */
static void test_metalog_entry_codec(void **state) {
    (void)state;
    ents_t es = {0};
    es.end = 41;
    leader_change(&es, 3, 2);
    topics_entry(&es, 3, 4);
    for (int i = 0; i < es.n; i++) {
        st_buf_t b;
        st_buf_init(&b);
        char why[512];
        assert_int_equal(st_metalog_entry_encode(&es.v[i].e, &b, why, sizeof why), ST_OK);
        st_raft_entry_t back;
        assert_int_equal(st_metalog_entry_decode(b.data, (int32_t)b.len, &back, why, sizeof why),
                         ST_OK);
        expect_entry(&back, &es.v[i]);
        for (size_t k = 0; k < b.len; k++)
            assert_int_not_equal(st_metalog_entry_decode(b.data, (int32_t)k, &back, why,
                                                         sizeof why), ST_OK);
        for (size_t k = ST_BATCH_MAGIC_OFFSET; k < b.len; k++) {
            b.data[k] ^= 0x01;
            if (st_metalog_entry_decode(b.data, (int32_t)b.len, &back, why, sizeof why) == ST_OK)
                fail_msg("entry %d: byte %zu flipped and still decoded", i, k);
            b.data[k] ^= 0x01;
        }
        st_buf_fini(&b);
    }
    /* a control entry of two records, a negative epoch: refused */
    st_raft_entry_t bad = es.v[0].e;
    bad.record_count = 2;
    st_buf_t b;
    st_buf_init(&b);
    char why[512];
    assert_int_equal(st_metalog_entry_encode(&bad, &b, why, sizeof why), ST_E_INVAL);
    bad = es.v[1].e;
    bad.epoch = -1;
    assert_int_equal(st_metalog_entry_encode(&bad, &b, why, sizeof why), ST_E_INVAL);
    st_buf_fini(&b);
    ents_fini(&es);
}

static void test_metalog_truncate_and_epochs(void **state) {
    (void)state;
    node_t nd;
    node_init(&nd, 1);
    ents_t es = {0};
    leader_change(&es, 1, 1);
    for (int i = 0; i < 30; i++) topics_entry(&es, 1, 1 + i % 3);
    int e2 = es.n;
    leader_change(&es, 2, 2);
    for (int i = 0; i < 30; i++) topics_entry(&es, 2, 2);
    int e4 = es.n;
    leader_change(&es, 4, 3);
    for (int i = 0; i < 30; i++) topics_entry(&es, 4, 1);
    append_from(&nd, &es, 0);
    st_metalog_flush(nd.ml);
    int64_t s2 = es.v[e2].e.base_offset, s4 = es.v[e4].e.base_offset;
    expect_epoch_end(&nd, 0, -1, -1);
    expect_epoch_end(&nd, 1, 1, s2);
    expect_epoch_end(&nd, 3, 2, s4);
    expect_epoch_end(&nd, 4, 4, es.end);
    expect_epoch_end(&nd, 100, 4, es.end);

    /* A follower whose log diverged: drop from inside epoch 2 on. */
    int cut = e2 + 10;
    int64_t cut_off = es.v[cut].e.base_offset;
    assert_int_equal(st_metalog_truncate(nd.ml, cut_off), ST_OK);
    for (int i = cut; i < es.n; i++) free(es.v[i].bytes);
    es.n = cut;
    es.end = cut_off;
    assert_true(st_metalog_end_offset(nd.ml) == cut_off);
    assert_true(st_metalog_durable_end(nd.ml) == cut_off);
    expect_epoch_end(&nd, 4, 2, cut_off);
    expect_log(&nd, &es, 0, 1 << 20);
    /* and takes the leader's entries of epoch 5 */
    int e5 = es.n;
    leader_change(&es, 5, 2);
    for (int i = 0; i < 10; i++) topics_entry(&es, 5, 4);
    append_from(&nd, &es, e5);
    expect_epoch_end(&nd, 4, 2, es.v[e5].e.base_offset);
    expect_epoch_end(&nd, 5, 5, es.end);
    expect_log(&nd, &es, 0, 1 << 20);
    assert_true(st_metalog_durable_end(nd.ml) == cut_off);
    st_metalog_flush(nd.ml);
    assert_true(st_metalog_durable_end(nd.ml) == es.end);

    /* Restart: entries and epochs come back as they were. */
    node_close(&nd);
    node_open(&nd, NULL, 0);
    expect_log(&nd, &es, 0, 700);
    expect_epoch_end(&nd, 1, 1, s2);
    expect_epoch_end(&nd, 4, 2, es.v[e5].e.base_offset);
    expect_epoch_end(&nd, 5, 5, es.end);
    assert_true(st_metalog_durable_end(nd.ml) == es.end);
    ents_fini(&es);
    node_fini(&nd);
}

/* An unclean stop: what was flushed survives, epochs with it. */
static void test_metalog_reopen_after_crash(void **state) {
    (void)state;
    node_t nd;
    node_init(&nd, 1);
    ents_t es = {0};
    leader_change(&es, 3, 1);
    for (int i = 0; i < 25; i++) topics_entry(&es, 3, 2);
    leader_change(&es, 6, 2);
    for (int i = 0; i < 5; i++) topics_entry(&es, 6, 1);
    append_from(&nd, &es, 0);
    st_metalog_flush(nd.ml);
    /* copy the directory while everything is open: no clean-shutdown marker */
    node_t c;
    memset(&c, 0, sizeof c);
    c.root = unit_tmpdir();
    snprintf(c.dir, sizeof c.dir, "%s/meta", c.root);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s' && rm -f '%s/.lock'", nd.dir, c.dir, c.dir);
    assert_int_equal(system(cmd), 0);
    node_fini(&nd);
    c.sync_flush = 1;
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.cond, NULL);
    c.img = st_image_apply(NULL, NULL, 0, -1);
    node_open(&c, NULL, 0);
    assert_int_equal(st_logmgr_clean_start(c.mgr), 0);
    expect_log(&c, &es, 0, 1 << 20);
    expect_epoch_end(&c, 5, 3, es.v[26].e.base_offset);
    expect_epoch_end(&c, 6, 6, es.end);
    ents_fini(&es);
    node_fini(&c);
}

static void test_metalog_reset_and_delete_before(void **state) {
    (void)state;
    node_t nd;
    node_init(&nd, 1);
    ents_t es = {0};
    leader_change(&es, 1, 1);
    for (int i = 0; i < 40; i++) topics_entry(&es, 1, 3);
    append_from(&nd, &es, 0);
    st_metalog_flush(nd.ml);

    /* Entries wholly below an offset may go: the start moves there. */
    int64_t below = es.v[20].e.base_offset;
    assert_int_equal(st_metalog_delete_before(nd.ml, below), ST_OK);
    assert_true(st_metalog_start_offset(nd.ml) == below);
    const st_raft_entry_t *got;
    int n;
    assert_int_equal(st_metalog_read(nd.ml, es.v[5].e.base_offset, 100, &got, &n),
                     ST_E_OFFSET_OUT_OF_RANGE);
    expect_log(&nd, &es, 20, 1 << 20);
    expect_epoch_end(&nd, 1, 1, es.end);

    /* A snapshot installed from the leader: nothing left, the log starts at
     * its end, and takes entries from there. */
    st_raft_snapshot_id_t id = {es.end + 500, 7};
    assert_int_equal(st_metalog_reset(nd.ml, id), ST_OK);
    assert_true(st_metalog_start_offset(nd.ml) == id.end_offset);
    assert_true(st_metalog_end_offset(nd.ml) == id.end_offset);
    expect_epoch_end(&nd, 7, -1, -1);
    assert_int_equal(st_metalog_read(nd.ml, id.end_offset, 100, &got, &n), ST_OK);
    assert_int_equal(n, 0);
    ents_t after = {0};
    after.end = id.end_offset;
    leader_change(&after, 8, 2);
    topics_entry(&after, 8, 2);
    append_from(&nd, &after, 0);
    expect_log(&nd, &after, 0, 1 << 20);
    expect_epoch_end(&nd, 7, -1, -1);
    expect_epoch_end(&nd, 8, 8, after.end);
    st_metalog_flush(nd.ml);
    assert_true(st_metalog_durable_end(nd.ml) == after.end);
    ents_fini(&after);
    ents_fini(&es);
    node_fini(&nd);
}

static void wait_flushes(node_t *nd, int count) {
    pthread_mutex_lock(&nd->lock);
    while (nd->flushed < count) pthread_cond_wait(&nd->cond, &nd->lock);
    pthread_mutex_unlock(&nd->lock);
}

/* The flush runs on the metalog's thread and its completion calls back. */
static void test_metalog_async_flush(void **state) {
    (void)state;
    node_t nd;
    node_init(&nd, 0);
    ents_t es = {0};
    leader_change(&es, 1, 1);
    for (int i = 0; i < 10; i++) topics_entry(&es, 1, 2);
    append_from(&nd, &es, 0);
    assert_true(st_metalog_durable_end(nd.ml) < es.end);
    st_metalog_flush(nd.ml);
    wait_flushes(&nd, 1);
    assert_true(st_metalog_durable_end(nd.ml) == es.end);
    assert_int_equal(st_metalog_flush_error(nd.ml), ST_OK);
    /* many requests: each completion calls back; the last sees everything */
    int mark = es.n;
    for (int i = 0; i < 10; i++) topics_entry(&es, 1, 1);
    append_from(&nd, &es, mark);
    for (int i = 0; i < 5; i++) st_metalog_flush(nd.ml);
    pthread_mutex_lock(&nd.lock);
    int before = nd.flushed;
    pthread_mutex_unlock(&nd.lock);
    st_metalog_flush(nd.ml);
    wait_flushes(&nd, before + 1);
    assert_true(st_metalog_durable_end(nd.ml) == es.end);
    /* a request pending at close is served before it returns */
    topics_entry(&es, 1, 1);
    append_from(&nd, &es, es.n - 1);
    pthread_mutex_lock(&nd.lock);
    before = nd.flushed;
    pthread_mutex_unlock(&nd.lock);
    st_metalog_flush(nd.ml);
    st_metalog_close(nd.ml);
    nd.ml = NULL;
    assert_true(nd.flushed >= before + 1);
    st_log_offsets_t o;
    st_log_offsets(nd.log, &o);
    assert_true(o.flushed_offset == es.end);
    st_log_release(nd.log);
    st_logmgr_close(nd.mgr);
    ents_fini(&es);
    st_image_release(nd.img);
    pthread_mutex_destroy(&nd.lock);
    pthread_cond_destroy(&nd.cond);
    unit_tmpdir_remove(nd.root);
}

/* ---- the quorum-state file -------------------------------------------------- */

static void damage(const char *path, long at, int truncate_to) {
    if (truncate_to >= 0) {
        assert_int_equal(truncate(path, truncate_to), 0);
        return;
    }
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

static void test_metalog_quorum_state(void **state) {
    (void)state;
    node_t nd;
    node_init(&nd, 1);
    st_raft_qstate_t qs, back;
    int found = -1;
    char err[1024] = "";
    assert_int_equal(st_metalog_qstate_read(nd.ml, &back, &found, err, sizeof err), ST_OK);
    assert_int_equal(found, 0);

    memset(&qs, 0, sizeof qs);
    qs.leader_epoch = 7;
    qs.leader_id = 2;
    qs.voted_id = 3;
    qs.nvoters = 3;
    qs.voters[0] = 1;
    qs.voters[1] = 2;
    qs.voters[2] = 3;
    assert_int_equal(st_metalog_qstate_write(nd.ml, &qs), ST_OK);
    qs.leader_epoch = 8;
    qs.leader_id = -1;
    assert_int_equal(st_metalog_qstate_write(nd.ml, &qs), ST_OK); /* replaced whole */
    node_close(&nd);
    node_open(&nd, NULL, 0);
    memset(&back, 0, sizeof back);
    assert_int_equal(st_metalog_qstate_read(nd.ml, &back, &found, err, sizeof err), ST_OK);
    assert_int_equal(found, 1);
    assert_memory_equal(&back, &qs, sizeof qs);
    char *path = node_file(&nd, "quorum-state");
    char *tmp = st_strprintf("%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1); /* no temporary left */

    /* A damaged byte: refused, naming the file and the checksum. */
    damage(path, 9, -1);
    assert_int_equal(st_metalog_qstate_read(nd.ml, &back, &found, err, sizeof err), ST_E_CORRUPT);
    fprintf(stderr, "corrupt quorum-state: %s\n", err);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "checksum mismatch"));
    assert_non_null(strstr(st_metalog_error(nd.ml), path));
    /* Cut short: refused as truncated. */
    assert_int_equal(st_metalog_qstate_write(nd.ml, &qs), ST_OK);
    damage(path, 0, 25);
    assert_int_equal(st_metalog_qstate_read(nd.ml, &back, &found, err, sizeof err),
                     ST_E_TRUNCATED);
    fprintf(stderr, "truncated quorum-state: %s\n", err);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "truncated"));
    damage(path, 0, 3);
    assert_int_equal(st_metalog_qstate_read(nd.ml, &back, &found, err, sizeof err),
                     ST_E_TRUNCATED);
    assert_non_null(strstr(err, path));
    free(tmp);
    free(path);
    node_fini(&nd);
}

/* ---- snapshots ---------------------------------------------------------------- */

typedef struct decode_ctx {
    st_arena_t *a;
    st_mrec_t *r;
    int n;
} decode_ctx_t;

static int decode_cb(const st_record_t *r, void *arg) {
    decode_ctx_t *c = arg;
    assert_true(c->n < 64);
    assert_int_equal(st_mrec_decode(r->value, (size_t)r->value_len, c->a, &c->r[c->n]), ST_OK);
    c->n++;
    return 0;
}

/* Apply the data entries of [from, end) as the Raft's apply would: every
 * record of a batch decoded from the stored bytes, one st_image_apply per
 * entry, control entries skipped. */
static void replay(node_t *nd, int64_t from, int64_t end) {
    int64_t off = from;
    while (off < end) {
        const st_raft_entry_t *got;
        int n;
        assert_int_equal(st_metalog_read(nd->ml, off, 1 << 16, &got, &n), ST_OK);
        assert_true(n > 0);
        for (int k = 0; k < n && got[k].base_offset < end; k++) {
            const st_raft_entry_t *en = &got[k];
            off = en->base_offset + en->record_count;
            nd->applied_end = off;
            if (en->control) continue;
            st_arena_t a;
            st_arena_init(&a, 4096);
            st_mrec_t recs[64];
            decode_ctx_t ctx = {&a, recs, 0};
            assert_int_equal(st_batch_foreach_record(en->data, en->len, decode_cb, &ctx), ST_OK);
            st_meta_image_t *img = st_image_apply(nd->img, recs, ctx.n, off - 1);
            st_image_release(nd->img);
            nd->img = img;
            st_arena_fini(&a);
        }
    }
}

/* Every field of two images. */
static void expect_same_image(const st_meta_image_t *a, const st_meta_image_t *b) {
    assert_int_equal(a->ntopics, b->ntopics);
    for (int t = 0; t < a->ntopics; t++) {
        const st_meta_topic_t *x = a->topics[t], *y = b->topics[t];
        assert_string_equal(x->name, y->name);
        assert_memory_equal(&x->id, &y->id, sizeof x->id);
        assert_int_equal(x->internal, y->internal);
        assert_int_equal(x->nparts, y->nparts);
        for (int p = 0; p < x->nparts; p++) {
            const st_meta_partition_t *u = &x->parts[p], *v = &y->parts[p];
            assert_int_equal(u->id, v->id);
            assert_int_equal(u->leader, v->leader);
            assert_int_equal(u->leader_epoch, v->leader_epoch);
            assert_int_equal(u->partition_epoch, v->partition_epoch);
            assert_int_equal(u->nreplicas, v->nreplicas);
            assert_int_equal(u->nisr, v->nisr);
            if (u->nreplicas)
                assert_memory_equal(u->replicas, v->replicas,
                                    sizeof(int32_t) * (size_t)u->nreplicas);
            if (u->nisr) assert_memory_equal(u->isr, v->isr, sizeof(int32_t) * (size_t)u->nisr);
            assert_int_equal(u->nadding, v->nadding);
            assert_int_equal(u->nremoving, v->nremoving);
            if (u->nadding)
                assert_memory_equal(u->adding, v->adding, sizeof(int32_t) * (size_t)u->nadding);
            if (u->nremoving)
                assert_memory_equal(u->removing, v->removing, sizeof(int32_t) * (size_t)u->nremoving);
            assert_int_equal(u->nelr, v->nelr);
            assert_int_equal(u->nlkelr, v->nlkelr);
            if (u->nelr) assert_memory_equal(u->elr, v->elr, sizeof(int32_t) * (size_t)u->nelr);
            if (u->nlkelr) assert_memory_equal(u->lkelr, v->lkelr, sizeof(int32_t) * (size_t)u->nlkelr);
        }
        assert_int_equal(x->nconfigs, y->nconfigs);
        for (int c = 0; c < x->nconfigs; c++) {
            assert_string_equal(x->configs[c].name, y->configs[c].name);
            assert_string_equal(x->configs[c].value, y->configs[c].value);
        }
    }
    assert_int_equal(a->nbrokers, b->nbrokers);
    for (int i = 0; i < a->nbrokers; i++) {
        const st_meta_broker_t *x = &a->brokers[i], *y = &b->brokers[i];
        assert_int_equal(x->id, y->id);
        assert_string_equal(x->host, y->host);
        assert_int_equal(x->port, y->port);
        assert_int_equal(x->nendpoints, y->nendpoints);
        for (int k = 0; k < x->nendpoints; k++) {
            assert_string_equal(x->endpoints[k].name, y->endpoints[k].name);
            assert_string_equal(x->endpoints[k].host, y->endpoints[k].host);
            assert_int_equal(x->endpoints[k].port, y->endpoints[k].port);
        }
        assert_int_equal(x->rack == NULL, y->rack == NULL);
        if (x->rack) assert_string_equal(x->rack, y->rack);
        assert_true(x->epoch == y->epoch);
        assert_int_equal(x->fenced, y->fenced);
    }
    assert_true(a->next_producer_id == b->next_producer_id);
}

/* A metadata history as the controller writes it: brokers registering
 * (and again), topics with partitions and configs, configs changed and
 * deleted, partitions added, topics removed. */
static void history(ents_t *es, int32_t epoch, int rounds) {
    for (int r = 0; r < rounds; r++) {
        st_buf_t v;
        st_buf_init(&v);
        size_t ends[64];
        int n = 0;
        st_uuid_t ids[4];
        char names[4][32];
        for (int b = 0; b < 3; b++) {
            st_mrec_register_broker_t rb;
            st_schema_defaults(&st_mrec_register_broker_schema, &rb);
            /* one broker with no endpoint, one with two listeners */
            st_mrec_endpoint_t ep[2] = {{st_str("PLAINTEXT"), st_str(b == 2 ? "" : "127.0.0.1"),
                                         (uint16_t)(b == 2 ? 0 : 9092 + b + r), 0},
                                        {st_str("INTERNAL"), st_str("10.0.0.1"),
                                         (uint16_t)(9192 + b + r), 0}};
            rb.broker_id = (b * 7 + r) % 5;
            unit_fill(&rb.incarnation_id, sizeof rb.incarnation_id);
            rb.broker_epoch = es->end + b;
            rb.endpoints.v = ep;
            rb.endpoints.n = b == 2 ? 0 : b == 1 ? 2 : 1;
            rb.rack = b == 1 ? st_str("rack-a") : ST_STR_NULL;
            rb.fenced = (int8_t)(r % 2);
            st_mrec_encode(ST_MREC_REGISTER_BROKER, 0, &rb, &v);
            ends[n++] = v.len;
        }
        for (int t = 0; t < 4; t++) {
            snprintf(names[t], sizeof names[t], "topic-%d-%llu", t,
                     (unsigned long long)es->label++);
            unit_fill(&ids[t], sizeof ids[t]);
            st_mrec_topic_t tr = {st_str(names[t]), ids[t]};
            st_mrec_encode(ST_MREC_TOPIC, 0, &tr, &v);
            ends[n++] = v.len;
            for (int p = 0; p < 1 + t; p++) {
                int32_t reps[3] = {p % 5, (p + 1) % 5, (p + 2) % 5};
                st_mrec_partition_t pr;
                st_schema_defaults(&st_mrec_partition_schema, &pr);
                pr.partition_id = t == 3 && p == 2 ? 5 : p; /* a gap in the ids */
                pr.topic_id = ids[t];
                pr.replicas.v = reps;
                pr.replicas.n = 1 + p % 3;
                pr.isr.v = reps;
                pr.isr.n = 1;
                pr.leader = reps[0];
                pr.leader_epoch = r;
                pr.partition_epoch = p;
                /* one partition being reassigned: 3 joining, 1 leaving */
                int32_t moving[4] = {0, 3, 1}, adding[1] = {3}, removing[1] = {1};
                if (t == 2 && p == 1) {
                    pr.replicas.v = moving;
                    pr.replicas.n = 3;
                    pr.adding_replicas.v = adding;
                    pr.adding_replicas.n = 1;
                    pr.removing_replicas.v = removing;
                    pr.removing_replicas.n = 1;
                }
                /* one below min.insync.replicas: eligible leaders (KIP-966) */
                if (t == 1 && p == 1) {
                    pr.eligible_leader_replicas.v = reps + 1;
                    pr.eligible_leader_replicas.n = 1;
                }
                st_mrec_encode(ST_MREC_PARTITION, 0, &pr, &v);
                ends[n++] = v.len;
            }
            static const char *const keys[] = {"retention.ms", "cleanup.policy", "segment.bytes"};
            for (int c = 0; c < 3; c++) {
                char val[32];
                snprintf(val, sizeof val, "%d", 1000 * (c + 1) + r);
                st_mrec_config_t cr = {ST_RESOURCE_TOPIC, st_str(names[t]), st_str(keys[c]),
                                       st_str(val)};
                st_mrec_encode(ST_MREC_CONFIG, 0, &cr, &v);
                ends[n++] = v.len;
            }
        }
        data_entry(es, epoch, &v, ends, n);
        /* the next batch: a config deleted (the order of the rest changes),
         * one changed, a topic removed */
        v.len = 0;
        n = 0;
        st_mrec_config_t del = {ST_RESOURCE_TOPIC, st_str(names[1]), st_str("retention.ms"),
                                ST_STR_NULL};
        st_mrec_encode(ST_MREC_CONFIG, 0, &del, &v);
        ends[n++] = v.len;
        st_mrec_config_t chg = {ST_RESOURCE_TOPIC, st_str(names[2]), st_str("cleanup.policy"),
                                st_str("compact")};
        st_mrec_encode(ST_MREC_CONFIG, 0, &chg, &v);
        ends[n++] = v.len;
        /* a reassignment that completes: tags 2-4 of PartitionChangeRecord */
        st_mrec_partition_change_t pc;
        st_schema_defaults(&st_mrec_partition_change_schema, &pc);
        int32_t done[2] = {0, 3};
        pc.partition_id = 1;
        pc.topic_id = ids[3];
        pc.replicas.v = done;
        pc.replicas.n = 2;
        pc.adding_replicas.v = done;
        pc.adding_replicas.n = 0;
        pc.removing_replicas.v = done + 1;
        pc.removing_replicas.n = r % 2; /* a list of one, or empty */
        st_mrec_encode(ST_MREC_PARTITION_CHANGE, 0, &pc, &v);
        ends[n++] = v.len;
        /* the ISR emptied: ELR and last known leader (tags 7 and 8) */
        st_schema_defaults(&st_mrec_partition_change_schema, &pc);
        int32_t elr[2] = {2, 1}, last = 0;
        pc.partition_id = 0;
        pc.topic_id = ids[2];
        pc.isr.v = elr;
        pc.isr.n = 0;
        pc.leader = -1;
        pc.eligible_leader_replicas.v = elr;
        pc.eligible_leader_replicas.n = 1 + r % 2;
        pc.last_known_elr.v = &last;
        pc.last_known_elr.n = 1;
        st_mrec_encode(ST_MREC_PARTITION_CHANGE, 0, &pc, &v);
        ends[n++] = v.len;
        st_mrec_remove_topic_t rm = {ids[0]};
        st_mrec_encode(ST_MREC_REMOVE_TOPIC, 0, &rm, &v);
        ends[n++] = v.len;
        /* a block of producer ids; every third round one that would go
         * back, which the image ignores */
        st_mrec_producer_ids_t pi = {r % 5, es->end, (int64_t)(r % 3 == 2 ? r - 1 : r + 1) * 1000};
        st_mrec_encode(ST_MREC_PRODUCER_IDS, 0, &pi, &v);
        ends[n++] = v.len;
        data_entry(es, epoch, &v, ends, n);
        st_buf_fini(&v);
    }
}

static st_raft_snapshot_id_t snapshot_here(node_t *nd, const ents_t *es) {
    st_raft_snapshot_id_t id = {es->end, es->v[es->n - 1].e.epoch};
    replay(nd, nd->applied_end, es->end);
    st_err_t rc = st_metalog_snapshot_create(nd->ml, id);
    if (rc) fail_msg("snapshot create: %s: %s", st_err_name(rc), st_metalog_error(nd->ml));
    return id;
}

static void test_metalog_snapshot_equals_replay(void **state) {
    (void)state;
    node_t nd;
    node_init(&nd, 1);
    ents_t es = {0};
    st_raft_snapshot_id_t id;
    assert_int_equal(st_metalog_snapshot_latest(nd.ml, &id), 0);
    leader_change(&es, 1, 1);
    history(&es, 1, 30);
    leader_change(&es, 2, 2);
    history(&es, 2, 20);
    append_from(&nd, &es, 0);
    st_metalog_flush(nd.ml);
    st_raft_snapshot_id_t s1 = snapshot_here(&nd, &es);
    assert_true(nd.img->ntopics > 100 && nd.img->nbrokers == 5);
    assert_true(nd.img->next_producer_id == 29000); /* round 28 of the first history: the highest block */
    st_raft_snapshot_id_t got;
    assert_int_equal(st_metalog_snapshot_latest(nd.ml, &got), 1);
    assert_true(got.end_offset == s1.end_offset && got.epoch == 2);
    char name[ST_RAFT_SNAPSHOT_NAME_MAX];
    st_raft_snapshot_name(s1, name);
    char *path = node_file(&nd, name);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    fprintf(stderr, "snapshot %s: %lld bytes for %d topics, %d brokers\n", name,
            (long long)st.st_size, nd.img->ntopics, nd.img->nbrokers);

    /* Loaded, it is the image the replay built. */
    assert_int_equal(st_metalog_snapshot_load(nd.ml, s1), ST_OK);
    assert_non_null(nd.loaded);
    assert_true(nd.loaded_id.end_offset == s1.end_offset);
    assert_true(nd.loaded->offset == s1.end_offset - 1);
    expect_same_image(nd.loaded, nd.img);

    /* An image that applied other entries than the snapshot's: refused. */
    st_raft_snapshot_id_t wrong = {s1.end_offset + 1, 2};
    assert_int_equal(st_metalog_snapshot_create(nd.ml, wrong), ST_E_INVAL);

    /* After a restart from the snapshot and the rest of the log, the image
     * is the full replay's. */
    int mark = es.n;
    leader_change(&es, 3, 3);
    history(&es, 3, 5);
    append_from(&nd, &es, mark);
    st_metalog_flush(nd.ml);
    replay(&nd, nd.applied_end, es.end);
    st_meta_image_t *full = st_image_keep(nd.img);
    node_close(&nd);
    node_open(&nd, NULL, 0);
    assert_int_equal(st_metalog_snapshot_latest(nd.ml, &got), 1);
    assert_int_equal(st_metalog_snapshot_load(nd.ml, got), ST_OK);
    st_image_release(nd.img);
    nd.img = st_image_keep(nd.loaded);
    nd.applied_end = got.end_offset;
    replay(&nd, got.end_offset, es.end);
    expect_same_image(nd.img, full);
    st_image_release(full);

    /* Older snapshots beyond the newest two go. */
    st_raft_snapshot_id_t s2 = snapshot_here(&nd, &es);
    mark = es.n;
    history(&es, 3, 2);
    append_from(&nd, &es, mark);
    st_raft_snapshot_id_t s3 = snapshot_here(&nd, &es);
    assert_int_equal(access(path, F_OK), -1);
    st_raft_snapshot_name(s2, name);
    char *p2 = node_file(&nd, name);
    assert_int_equal(access(p2, F_OK), 0);
    assert_int_equal(st_metalog_snapshot_latest(nd.ml, &got), 1);
    assert_true(got.end_offset == s3.end_offset);
    free(p2);
    free(path);
    ents_fini(&es);
    node_fini(&nd);
}

/* A lagging node pulls the leader's snapshot in chunks (FetchSnapshot). */
static void test_metalog_snapshot_chunks(void **state) {
    (void)state;
    node_t leader, fol;
    node_init(&leader, 1);
    node_init(&fol, 1);
    ents_t es = {0};
    leader_change(&es, 4, 1);
    history(&es, 4, 25);
    append_from(&leader, &es, 0);
    st_raft_snapshot_id_t id = snapshot_here(&leader, &es);
    const uint8_t *p;
    int32_t len;
    int64_t size, pos = 0;
    st_raft_snapshot_id_t none = {id.end_offset + 1, id.epoch};
    assert_int_equal(st_metalog_snapshot_read(leader.ml, none, 0, 100, &p, &len, &size),
                     ST_E_NOT_FOUND);
    assert_int_equal(st_metalog_snapshot_read(leader.ml, id, 0, 0, &p, &len, &size), ST_OK);
    assert_int_equal(len, 0);
    int64_t size2 = -1;
    assert_int_equal(st_metalog_snapshot_read(leader.ml, id, size + 1, 10, &p, &len, &size2),
                     ST_OK);
    assert_true(len == 0 && size2 == size);
    assert_int_equal(st_metalog_snapshot_read(leader.ml, id, -1, 10, &p, &len, &size2),
                     ST_E_OFFSET_OUT_OF_RANGE);

    /* A transfer cut off half-way, then one in order from the start. */
    assert_int_equal(st_metalog_snapshot_read(leader.ml, id, 0, 1000, &p, &len, &size), ST_OK);
    assert_int_equal(st_metalog_snapshot_write(fol.ml, id, 0, p, len), ST_OK);
    assert_int_equal(st_metalog_snapshot_write(fol.ml, id, 2 * len, p, len), ST_E_INVAL);
    assert_non_null(strstr(st_metalog_error(fol.ml), "in order"));
    assert_int_equal(st_metalog_snapshot_install(fol.ml, id, size), ST_E_TRUNCATED);
    assert_int_equal(st_metalog_snapshot_latest(fol.ml, &none), 0);
    int chunks = 0;
    while (pos < size) {
        int32_t max = 777 + (int32_t)unit_below(3000);
        assert_int_equal(st_metalog_snapshot_read(leader.ml, id, pos, max, &p, &len, &size), ST_OK);
        assert_true(len > 0 && len <= max);
        assert_int_equal(st_metalog_snapshot_write(fol.ml, id, pos, p, len), ST_OK);
        pos += len;
        chunks++;
    }
    assert_int_equal(st_metalog_snapshot_install(fol.ml, id, size), ST_OK);
    fprintf(stderr, "snapshot of %lld bytes sent in %d chunks\n", (long long)size, chunks);
    st_raft_snapshot_id_t got;
    assert_int_equal(st_metalog_snapshot_latest(fol.ml, &got), 1);
    assert_true(got.end_offset == id.end_offset && got.epoch == id.epoch);
    assert_int_equal(st_metalog_reset(fol.ml, id), ST_OK);
    assert_int_equal(st_metalog_snapshot_load(fol.ml, id), ST_OK);
    expect_same_image(fol.loaded, leader.img);

    /* A chunk damaged on the way: the install refuses it and names it;
     * nothing is left behind and the previous snapshot stays the latest. */
    int mark = es.n;
    history(&es, 4, 3);
    append_from(&leader, &es, mark);
    st_raft_snapshot_id_t id2 = snapshot_here(&leader, &es);
    pos = 0;
    while (pos < size || pos == 0) {
        assert_int_equal(st_metalog_snapshot_read(leader.ml, id2, pos, 4096, &p, &len, &size),
                         ST_OK);
        uint8_t *copy = st_malloc((size_t)len);
        memcpy(copy, p, (size_t)len);
        if (pos == 4096) copy[100] ^= 0x10;
        assert_int_equal(st_metalog_snapshot_write(fol.ml, id2, pos, copy, len), ST_OK);
        free(copy);
        pos += len;
    }
    assert_int_equal(st_metalog_snapshot_install(fol.ml, id2, size), ST_E_CORRUPT);
    fprintf(stderr, "damaged received snapshot: %s\n", st_metalog_error(fol.ml));
    assert_non_null(strstr(st_metalog_error(fol.ml), "CRC32C mismatch"));
    char name[ST_RAFT_SNAPSHOT_NAME_MAX];
    st_raft_snapshot_name(id2, name);
    assert_non_null(strstr(st_metalog_error(fol.ml), name));
    char *part = st_strprintf("%s/%s.recv.part", st_metalog_dir(fol.ml), name);
    char *final = st_strprintf("%s/%s", st_metalog_dir(fol.ml), name);
    assert_int_equal(access(part, F_OK), -1);
    assert_int_equal(access(final, F_OK), -1);
    assert_int_equal(st_metalog_snapshot_latest(fol.ml, &got), 1);
    assert_true(got.end_offset == id.end_offset);
    free(part);
    free(final);
    ents_fini(&es);
    node_fini(&leader);
    node_fini(&fol);
}

/* A truncated or damaged snapshot file is refused, naming it; partial
 * files of an interrupted run are removed and never taken as the latest. */
static void test_metalog_snapshot_damaged_and_leftovers(void **state) {
    (void)state;
    node_t nd;
    node_init(&nd, 1);
    ents_t es = {0};
    leader_change(&es, 1, 1);
    history(&es, 1, 10);
    append_from(&nd, &es, 0);
    st_metalog_flush(nd.ml);
    st_raft_snapshot_id_t id = snapshot_here(&nd, &es);
    char name[ST_RAFT_SNAPSHOT_NAME_MAX];
    st_raft_snapshot_name(id, name);
    char *path = node_file(&nd, name);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    char *saved = NULL;
    size_t saved_len;
    assert_int_equal(st_read_file(path, &saved, &saved_len), ST_OK);

    /* leftovers: a partial create and a partial receive of newer snapshots */
    st_raft_snapshot_id_t newer = {id.end_offset + 10, 2};
    char nname[ST_RAFT_SNAPSHOT_NAME_MAX];
    st_raft_snapshot_name(newer, nname);
    char *part = st_strprintf("%s/%s.part", st_metalog_dir(nd.ml), nname);
    char *recv = st_strprintf("%s/%s.recv.part", st_metalog_dir(nd.ml), nname);
    assert_int_equal(st_write_file_atomic(part, "half a snapshot", 15), ST_OK);
    assert_int_equal(st_write_file_atomic(recv, saved, saved_len / 2), ST_OK);

    /* cut short by 100 bytes */
    damage(path, 0, (int)st.st_size - 100);
    node_close(&nd);
    node_open(&nd, NULL, 0);
    assert_int_equal(access(part, F_OK), -1);
    assert_int_equal(access(recv, F_OK), -1);
    st_raft_snapshot_id_t got;
    assert_int_equal(st_metalog_snapshot_latest(nd.ml, &got), 1);
    assert_true(got.end_offset == id.end_offset && got.epoch == id.epoch);
    assert_int_equal(st_metalog_snapshot_load(nd.ml, got), ST_E_TRUNCATED);
    fprintf(stderr, "truncated snapshot: %s\n", st_metalog_error(nd.ml));
    assert_non_null(strstr(st_metalog_error(nd.ml), path));
    assert_non_null(strstr(st_metalog_error(nd.ml), "truncated"));
    assert_null(nd.loaded);
    /* cut to less than a header and footer */
    damage(path, 0, 30);
    assert_int_equal(st_metalog_snapshot_load(nd.ml, got), ST_E_TRUNCATED);
    assert_non_null(strstr(st_metalog_error(nd.ml), path));
    /* whole again but a byte inside a record changed */
    assert_int_equal(st_write_file_atomic(path, saved, saved_len), ST_OK);
    damage(path, (long)saved_len / 2, -1);
    assert_int_equal(st_metalog_snapshot_load(nd.ml, got), ST_E_CORRUPT);
    fprintf(stderr, "damaged snapshot: %s\n", st_metalog_error(nd.ml));
    assert_non_null(strstr(st_metalog_error(nd.ml), path));
    assert_non_null(strstr(st_metalog_error(nd.ml), "CRC32C mismatch"));
    /* a file renamed to another snapshot's name */
    assert_int_equal(st_write_file_atomic(path, saved, saved_len), ST_OK);
    st_raft_snapshot_id_t other = {id.end_offset - 1, id.epoch};
    char oname[ST_RAFT_SNAPSHOT_NAME_MAX];
    st_raft_snapshot_name(other, oname);
    char *opath = node_file(&nd, oname);
    assert_int_equal(st_write_file_atomic(opath, saved, saved_len), ST_OK);
    assert_int_equal(st_metalog_snapshot_load(nd.ml, other), ST_E_CORRUPT);
    assert_non_null(strstr(st_metalog_error(nd.ml), "not the name's"));
    /* intact: loads */
    assert_int_equal(st_metalog_snapshot_load(nd.ml, got), ST_OK);
    expect_same_image(nd.loaded, nd.img);
    free(opath);
    free(saved);
    free(part);
    free(recv);
    free(path);
    ents_fini(&es);
    node_fini(&nd);
}

/* Start-up consistency between the log and the snapshots. */
static void test_metalog_open_checks(void **state) {
    (void)state;
    node_t nd;
    node_init(&nd, 1);
    ents_t es = {0};
    leader_change(&es, 1, 1);
    history(&es, 1, 10);
    append_from(&nd, &es, 0);
    st_metalog_flush(nd.ml);
    /* The log's start moved up with no snapshot below it: refused. */
    int64_t start = es.v[5].e.base_offset;
    assert_int_equal(st_metalog_delete_before(nd.ml, start), ST_OK);
    node_close(&nd);
    char err[1024];
    assert_int_equal(node_open(&nd, err, sizeof err), ST_E_CORRUPT);
    fprintf(stderr, "log without its snapshot: %s\n", err);
    assert_non_null(strstr(err, "no snapshot covers"));
    assert_non_null(strstr(err, "__cluster_metadata-0"));
    st_log_release(nd.log);
    st_logmgr_close(nd.mgr);
    nd.log = NULL;
    nd.mgr = NULL;

    /* A snapshot beyond the log's end (installed, then a stop before the
     * reset): the log starts at the snapshot. */
    ents_t big = {0};
    leader_change(&big, 1, 1);
    history(&big, 1, 20);
    st_meta_image_t *img = st_image_apply(NULL, NULL, 0, -1);
    st_raft_snapshot_id_t id = {big.end + 100, 3};
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/__cluster_metadata-0", nd.dir);
    assert_int_equal(st_metasnap_write(dir, id, img, err, sizeof err), ST_OK);
    st_image_release(img);
    assert_int_equal(node_open(&nd, err, sizeof err), ST_OK);
    assert_true(st_metalog_start_offset(nd.ml) == id.end_offset);
    assert_true(st_metalog_end_offset(nd.ml) == id.end_offset);
    ents_fini(&big);
    ents_fini(&es);
    node_fini(&nd);
}

int main(void) {
    unit_seed("metalog");
    st_log_set_level(ST_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metalog_append_read),
        cmocka_unit_test(test_metalog_entry_codec),
        cmocka_unit_test(test_metalog_truncate_and_epochs),
        cmocka_unit_test(test_metalog_reopen_after_crash),
        cmocka_unit_test(test_metalog_reset_and_delete_before),
        cmocka_unit_test(test_metalog_async_flush),
        cmocka_unit_test(test_metalog_quorum_state),
        cmocka_unit_test(test_metalog_snapshot_equals_replay),
        cmocka_unit_test(test_metalog_snapshot_chunks),
        cmocka_unit_test(test_metalog_snapshot_damaged_and_leftovers),
        cmocka_unit_test(test_metalog_open_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

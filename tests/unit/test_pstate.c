/*
 * test_pstate.c - unit tests of broker/log/pstate.c, a partition's producer
 * state (KIP-98 idempotence), through the log's own API on real files:
 * the leader's checks (duplicates answered with the original offsets,
 * gaps, stale and new epochs, unknown producers, the wrap at INT32_MAX,
 * several batches of one append, the 5 batches kept), a follower building
 * the same state, <offset>.snapshot files at rolls and at a clean close in
 * Kafka's format, corrupt snapshots skipped, an unclean reopen replaying
 * from the last snapshot, truncation rebuilding the state, and expiry.
 *
 * Batches are built with the log library's builder and given producer
 * fields (and a new CRC) here; snapshot bytes are built by hand from the
 * format pstate.c draws, so the file format is checked against that
 * drawing, not against the encoder.
 */
#include "unit.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log_int.h"

#define DAY_MS (24ll * 3600 * 1000)

typedef struct env {
    char *root;
    char dir[4096];  /* log.dirs */
    char pdir[4200]; /* the partition's directory */
    st_logmgr_t *m;
    st_log_t *log;
    st_log_config_t cfg;
    int64_t check_interval_ms; /* producer.id.expiration.check.interval.ms */
} env_t;

static st_log_config_t default_cfg(void) {
    st_log_config_t c;
    memset(&c, 0, sizeof c);
    c.segment_bytes = 1 << 20;
    c.retention_ms = -1;
    c.retention_bytes = -1;
    c.index_interval_bytes = 4096;
    c.segment_index_bytes = 10 << 20;
    c.max_message_bytes = 1 << 20;
    c.ts_before_max_ms = INT64_MAX;
    c.ts_after_max_ms = INT64_MAX;
    c.delete_policy = 1;
    return c;
}

static void env_open_log(env_t *e, const char *topic, st_log_t **out) {
    assert_int_equal(st_logmgr_open_log(e->m, topic, 0, NULL, &e->cfg, out), ST_OK);
}

static void env_open(env_t *e) {
    char err[512] = "";
    char *dirs[1] = {e->dir};
    st_logmgr_config_t mc = {dirs, 1, 1, 3600 * 1000, 3600 * 1000, 0, NULL, e->check_interval_ms};
    st_err_t rc = st_logmgr_open(&mc, &e->m, err, sizeof err);
    if (rc) fail_msg("st_logmgr_open: %s: %s", st_err_name(rc), err);
    env_open_log(e, "idem", &e->log);
    snprintf(e->pdir, sizeof e->pdir, "%s", st_log_dir(e->log));
}

/* A clean stop: every log closed, the clean-shutdown marker written. */
static void env_close(env_t *e) {
    if (e->log) st_log_release(e->log);
    if (e->m) st_logmgr_close(e->m);
    e->log = NULL;
    e->m = NULL;
}

static void env_init(env_t *e, int64_t segment_bytes) {
    memset(e, 0, sizeof *e);
    e->root = unit_tmpdir();
    snprintf(e->dir, sizeof e->dir, "%s/data", e->root);
    e->cfg = default_cfg();
    e->cfg.segment_bytes = segment_bytes;
    env_open(e);
}

static void env_fini(env_t *e) {
    env_close(e);
    unit_tmpdir_remove(e->root);
    e->root = NULL;
}

/* ---- batches ------------------------------------------------------------- */

/* Bytes of each record's value when not 0 (large batches). */
static int pbatch_value_bytes;

/* One batch of n records from producer pid, epoch, first sequence seq,
 * every record stamped ts (CreateTime). */
static void pbatch(st_buf_t *out, int64_t pid, int16_t epoch, int32_t seq, int n, int64_t ts) {
    st_batch_record_t recs[64];
    char vals[64][16];
    static char big[64 << 10];
    assert_true(n > 0 && n <= 64 && pbatch_value_bytes <= (int)sizeof big);
    memset(big, 'b', sizeof big);
    for (int i = 0; i < n; i++) {
        int vl = snprintf(vals[i], sizeof vals[i], "v%d", i);
        recs[i] = (st_batch_record_t){NULL, -1, vals[i], vl};
        if (pbatch_value_bytes) recs[i] = (st_batch_record_t){NULL, -1, big, pbatch_value_bytes};
    }
    size_t start = out->len;
    st_batch_build(out, recs, n, ts);
    uint8_t *b = out->data + start;
    st_be64_put(b + ST_BATCH_PRODUCER_ID_OFFSET, (uint64_t)pid);
    st_be16_put(b + ST_BATCH_PRODUCER_EPOCH_OFFSET, (uint16_t)epoch);
    st_be32_put(b + ST_BATCH_BASE_SEQUENCE_OFFSET, (uint32_t)seq);
    size_t size = out->len - start;
    st_be32_put(b + ST_BATCH_CRC_OFFSET,
                st_crc32c(0, b + ST_BATCH_ATTR_OFFSET, size - ST_BATCH_ATTR_OFFSET));
}

static st_err_t produce_at(st_log_t *log, int64_t pid, int16_t epoch, int32_t seq, int n, int64_t ts,
                           st_append_info_t *info) {
    st_buf_t b;
    st_buf_init(&b);
    pbatch(&b, pid, epoch, seq, n, ts);
    st_err_t e = st_log_append(log, b.data, b.len, 0, st_now_ms(), info);
    st_buf_fini(&b);
    if (!e && !info->duplicate) st_log_set_high_watermark(log, info->last_offset + 1);
    return e;
}

static st_err_t produce(env_t *e, int64_t pid, int16_t epoch, int32_t seq, int n,
                        st_append_info_t *info) {
    return produce_at(e->log, pid, epoch, seq, n, st_now_ms(), info);
}

/* A write that must land at [base, base + n). */
static void produce_ok(env_t *e, int64_t pid, int16_t epoch, int32_t seq, int n, int64_t base) {
    st_append_info_t info;
    st_err_t rc = produce(e, pid, epoch, seq, n, &info);
    if (rc) fail_msg("producer %lld epoch %d seq %d: %s", (long long)pid, epoch, seq,
                     st_err_name(rc));
    assert_int_equal(info.duplicate, 0);
    assert_int_equal(info.base_offset, base);
    assert_int_equal(info.last_offset, base + n - 1);
}

static int64_t leo(st_log_t *log) {
    st_log_offsets_t o;
    st_log_offsets(log, &o);
    return o.leo;
}

/* A write answered as a duplicate of [base, last], writing nothing. */
static void produce_dup(env_t *e, int64_t pid, int16_t epoch, int32_t seq, int n, int64_t base) {
    st_append_info_t info;
    int64_t before = leo(e->log);
    assert_int_equal(produce(e, pid, epoch, seq, n, &info), ST_OK);
    assert_int_equal(info.duplicate, 1);
    assert_int_equal(info.base_offset, base);
    assert_int_equal(info.last_offset, base + n - 1);
    assert_int_equal(leo(e->log), before);
}

static void produce_refused(env_t *e, int64_t pid, int16_t epoch, int32_t seq, int n,
                            st_err_t want) {
    st_append_info_t info;
    int64_t before = leo(e->log);
    assert_int_equal(produce(e, pid, epoch, seq, n, &info), want);
    assert_int_equal(leo(e->log), before);
}

/* The state of pid: 1 when known. */
static int producer_of(st_log_t *log, int64_t pid, st_log_producer_t *out) {
    st_log_producer_t v[256];
    int n = st_log_producers(log, v, 256);
    assert_true(n <= 256);
    for (int i = 0; i < n; i++) {
        if (i) assert_true(v[i].producer_id > v[i - 1].producer_id);
        if (v[i].producer_id == pid) {
            *out = v[i];
            return 1;
        }
    }
    return 0;
}

static void expect_producer(st_log_t *log, int64_t pid, int16_t epoch, int32_t last_seq) {
    st_log_producer_t p;
    if (!producer_of(log, pid, &p)) fail_msg("producer %lld is not known", (long long)pid);
    assert_int_equal(p.producer_epoch, epoch);
    assert_int_equal(p.last_sequence, last_seq);
    assert_int_equal(p.coordinator_epoch, -1);
    assert_int_equal(p.current_txn_start_offset, -1);
}

/* Every producer of a and b alike. */
static void expect_same_state(st_log_t *a, st_log_t *b) {
    st_log_producer_t va[256], vb[256];
    int na = st_log_producers(a, va, 256), nb = st_log_producers(b, vb, 256);
    assert_int_equal(na, nb);
    for (int i = 0; i < na; i++) {
        assert_int_equal(va[i].producer_id, vb[i].producer_id);
        assert_int_equal(va[i].producer_epoch, vb[i].producer_epoch);
        assert_int_equal(va[i].last_sequence, vb[i].last_sequence);
        assert_int_equal(va[i].last_timestamp, vb[i].last_timestamp);
    }
}

/* Offsets of the .snapshot files in dir, ascending. */
static int list_snapshots(const char *dir, int64_t *out, int max) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len != 29 || strcmp(de->d_name + 20, ".snapshot")) continue;
        assert_true(n < max);
        out[n++] = strtoll(de->d_name, NULL, 10);
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && out[k - 1] > out[k]; k--) {
            int64_t t = out[k];
            out[k] = out[k - 1];
            out[k - 1] = t;
        }
    return n;
}

static int64_t replayed(st_log_t *log) {
    pthread_mutex_lock(&log->lock);
    int64_t n = log->pstate_replayed;
    pthread_mutex_unlock(&log->lock);
    return n;
}

static void snap_file(const env_t *e, int64_t offset, char *out, size_t n) {
    snprintf(out, n, "%s/%020lld.snapshot", e->pdir, (long long)offset);
}

/* Capture the library's log lines. */
static char *captured;
static size_t captured_len;
static FILE *capture_file;

static void capture_start(void) {
    capture_file = open_memstream(&captured, &captured_len);
    assert_non_null(capture_file);
    st_log_set_file(capture_file);
    st_log_set_level(ST_LOG_WARN);
}

static void capture_stop(void) {
    st_log_set_level(ST_LOG_ERROR);
    st_log_set_file(NULL);
    fclose(capture_file);
}

/* Copy a tree (a log dir copied while its log is open: an unclean stop). */
static void copy_tree(const char *from, const char *to) {
    assert_int_equal(st_mkdirs(to), ST_OK);
    DIR *d = opendir(from);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char src[4400], dst[4400];
        snprintf(src, sizeof src, "%s/%s", from, de->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, de->d_name);
        struct stat st;
        assert_int_equal(stat(src, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            copy_tree(src, dst);
            continue;
        }
        char *p = NULL;
        size_t len = 0;
        assert_int_equal(st_read_file(src, &p, &len), ST_OK);
        assert_int_equal(st_write_file_atomic(dst, p, len), ST_OK);
        free(p);
    }
    closedir(d);
}

/* ======================================================================
 * The leader's checks
 * ==================================================================== */

static void test_pstate_duplicates_gaps_epochs(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    /* A producer with no state is taken at any sequence (KIP-360). */
    produce_ok(&e, 1000, 0, 0, 3, 0);
    produce_ok(&e, 1000, 0, 3, 2, 3);
    produce_ok(&e, 2000, 4, 77, 1, 5);
    expect_producer(e.log, 2000, 4, 77);
    expect_producer(e.log, 1000, 0, 4);

    /* A retried batch is answered with the offsets it was written at. */
    produce_dup(&e, 1000, 0, 0, 3, 0);
    produce_dup(&e, 1000, 0, 3, 2, 3);
    produce_dup(&e, 2000, 4, 77, 1, 5);
    /* Same first sequence but another last one: not a duplicate, a gap. */
    produce_refused(&e, 1000, 0, 3, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);

    /* A gap, and a sequence from the past that is no batch kept. */
    produce_refused(&e, 1000, 0, 10, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_refused(&e, 1000, 0, 4, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_refused(&e, 2000, 4, 79, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_ok(&e, 2000, 4, 78, 2, 6);

    /* A new epoch must start at 0; then the old epoch is fenced. */
    produce_refused(&e, 1000, 1, 5, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_ok(&e, 1000, 1, 0, 2, 8);
    expect_producer(e.log, 1000, 1, 1);
    produce_refused(&e, 1000, 0, 5, 1, ST_E_INVALID_PRODUCER_EPOCH);
    /* a duplicate of the old epoch's batch is fenced as well: the state
     * kept only the new epoch's batches */
    produce_refused(&e, 1000, 0, 0, 3, ST_E_INVALID_PRODUCER_EPOCH);
    produce_refused(&e, 2000, 3, 80, 1, ST_E_INVALID_PRODUCER_EPOCH);
    produce_ok(&e, 1000, 1, 2, 1, 10);

    /* Batches without a producer id pass untouched. */
    st_buf_t b;
    st_buf_init(&b);
    st_batch_record_t r = {NULL, -1, "x", 1};
    st_batch_build(&b, &r, 1, st_now_ms());
    st_append_info_t info;
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info), ST_OK);
    assert_int_equal(info.duplicate, 0);
    assert_int_equal(info.base_offset, 11);
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info), ST_OK);
    assert_int_equal(info.base_offset, 12);
    st_buf_fini(&b);
    assert_int_equal(st_log_producer_count(e.log), 2);
    env_fini(&e);
}

static void test_pstate_sequence_wrap(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    /* 2 records from INT32_MAX - 1: the last sequence is INT32_MAX, the
     * next batch starts at 0 */
    produce_ok(&e, 7, 0, INT32_MAX - 1, 2, 0);
    expect_producer(e.log, 7, 0, INT32_MAX);
    produce_refused(&e, 7, 0, INT32_MAX, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_ok(&e, 7, 0, 0, 1, 2);
    /* A batch across the wrap: INT32_MAX - 1 .. 2 */
    produce_ok(&e, 8, 0, INT32_MAX - 1, 5, 3);
    expect_producer(e.log, 8, 0, 2);
    produce_dup(&e, 8, 0, INT32_MAX - 1, 5, 3);
    produce_refused(&e, 8, 0, 4, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_ok(&e, 8, 0, 3, 1, 8);
    env_fini(&e);
}

/* Several batches in one append, of one producer or several. */
static void test_pstate_one_append_many_batches(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    st_buf_t b;
    st_append_info_t info;
    st_buf_init(&b);
    int64_t ts = st_now_ms();
    pbatch(&b, 50, 0, 0, 2, ts);
    pbatch(&b, 50, 0, 2, 3, ts);
    pbatch(&b, 60, 2, 9, 1, ts);
    pbatch(&b, 50, 0, 5, 1, ts);
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info), ST_OK);
    assert_int_equal(info.duplicate, 0);
    assert_int_equal(info.base_offset, 0);
    assert_int_equal(info.last_offset, 6);
    expect_producer(e.log, 50, 0, 5);
    expect_producer(e.log, 60, 2, 9);
    /* each batch is retained with its own offsets */
    produce_dup(&e, 50, 0, 2, 3, 2);
    produce_dup(&e, 50, 0, 5, 1, 6);
    produce_dup(&e, 60, 2, 9, 1, 5);

    /* The second batch is checked against what the first leaves: a gap
     * between them refuses the whole append. */
    b.len = 0;
    pbatch(&b, 50, 0, 6, 1, ts);
    pbatch(&b, 50, 0, 8, 1, ts);
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info),
                     ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(leo(e.log), 7);
    expect_producer(e.log, 50, 0, 5); /* nothing of it stayed */
    /* ... and a new producer's second batch must follow its first. */
    b.len = 0;
    pbatch(&b, 70, 0, 40, 1, ts);
    pbatch(&b, 70, 0, 40, 1, ts);
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info),
                     ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(st_log_producer_count(e.log), 2);
    /* A new epoch in the middle of one append: the next batch of the old
     * epoch is stale. */
    b.len = 0;
    pbatch(&b, 50, 1, 0, 1, ts);
    pbatch(&b, 50, 0, 6, 1, ts);
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info),
                     ST_E_INVALID_PRODUCER_EPOCH);
    /* A duplicate anywhere in the append answers for it, and nothing of
     * it is written, even the new batch before it (Kafka). */
    b.len = 0;
    pbatch(&b, 50, 0, 6, 1, ts);
    pbatch(&b, 50, 0, 2, 3, ts);
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info), ST_OK);
    assert_int_equal(info.duplicate, 1);
    assert_int_equal(info.base_offset, 2);
    assert_int_equal(info.last_offset, 4);
    assert_int_equal(leo(e.log), 7);
    expect_producer(e.log, 50, 0, 5);
    produce_ok(&e, 50, 0, 6, 1, 7);
    st_buf_fini(&b);
    env_fini(&e);
}

/* Kafka keeps the last 5 batches of a producer: the 6th back is no longer
 * recognised, it is a sequence from the past. */
static void test_pstate_five_batches_kept(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    for (int i = 0; i < 6; i++) produce_ok(&e, 9, 0, i * 2, 2, i * 2);
    produce_refused(&e, 9, 0, 0, 2, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    for (int i = 1; i < 6; i++) produce_dup(&e, 9, 0, i * 2, 2, i * 2);
    produce_ok(&e, 9, 0, 12, 2, 12);
    produce_refused(&e, 9, 0, 2, 2, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_dup(&e, 9, 0, 4, 2, 4);
    env_fini(&e);
}

/* LogAppendTime: the stamped time is the batch's timestamp, and a
 * duplicate answers with the original's. */
static void test_pstate_log_append_time(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    e.cfg.log_append_time = 1;
    st_log_set_config(e.log, &e.cfg);
    st_buf_t b;
    st_append_info_t info, dup;
    st_buf_init(&b);
    pbatch(&b, 11, 0, 0, 2, 1000);
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, 5555, &info), ST_OK);
    assert_int_equal(info.log_append_time, 5555);
    st_log_producer_t p;
    assert_true(producer_of(e.log, 11, &p));
    assert_int_equal(p.last_timestamp, 5555);
    b.len = 0;
    pbatch(&b, 11, 0, 0, 2, 1000);
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, 7777, &dup), ST_OK);
    assert_int_equal(dup.duplicate, 1);
    assert_int_equal(dup.base_offset, 0);
    assert_int_equal(dup.log_append_time, 5555);
    st_buf_fini(&b);
    env_fini(&e);
}

/* A transaction marker the broker writes (a control batch with the
 * producer's id) moves the epoch without a sequence; an older epoch is
 * fenced.  A follower takes it the same way. */
static void marker(st_buf_t *b, int64_t pid, int16_t epoch) {
    size_t start = b->len;
    uint8_t value[6] = {0, 0, 0, 0, 0, 3}; /* version 0, coordinator epoch 3 */
    st_batch_build_control(b, 0, 1, value, sizeof value, st_now_ms());
    uint8_t *h = b->data + start;
    st_be64_put(h + ST_BATCH_PRODUCER_ID_OFFSET, (uint64_t)pid);
    st_be16_put(h + ST_BATCH_PRODUCER_EPOCH_OFFSET, (uint16_t)epoch);
    size_t size = b->len - start;
    st_be32_put(h + ST_BATCH_CRC_OFFSET,
                st_crc32c(0, h + ST_BATCH_ATTR_OFFSET, size - ST_BATCH_ATTR_OFFSET));
}

static void test_pstate_markers(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    produce_ok(&e, 30, 2, 0, 2, 0);
    st_buf_t b;
    st_append_info_t info;
    st_buf_init(&b);
    marker(&b, 30, 1);
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info),
                     ST_E_INVALID_PRODUCER_EPOCH);
    b.len = 0;
    marker(&b, 30, 3); /* KIP-890: the marker carries the bumped epoch */
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info), ST_OK);
    assert_int_equal(info.base_offset, 2);
    st_log_set_high_watermark(e.log, 3);
    expect_producer(e.log, 30, 3, -1);
    produce_refused(&e, 30, 3, 2, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_refused(&e, 30, 2, 2, 1, ST_E_INVALID_PRODUCER_EPOCH);
    produce_ok(&e, 30, 3, 0, 1, 3);
    st_buf_fini(&b);
    /* the same state after a replay of the log */
    env_close(&e);
    int64_t snaps[16];
    int ns = list_snapshots(e.pdir, snaps, 16);
    for (int i = 0; i < ns; i++) {
        char path[4400];
        snap_file(&e, snaps[i], path, sizeof path);
        assert_int_equal(unlink(path), 0);
    }
    char marker_path[4400];
    snprintf(marker_path, sizeof marker_path, "%s/.strata-clean-shutdown", e.dir);
    assert_int_equal(unlink(marker_path), 0);
    env_open(&e);
    assert_int_equal(replayed(e.log), 3);
    expect_producer(e.log, 30, 3, 0);
    env_fini(&e);
}

/* KIP-890's guards: a transaction begins only with the guard its
 * verification began with, and a marker written meanwhile voids it. */
static st_err_t txn_append(env_t *e, int64_t pid, int16_t epoch, int32_t seq, int64_t guard) {
    st_buf_t b;
    st_append_info_t info;
    st_buf_init(&b);
    pbatch(&b, pid, epoch, seq, 1, st_now_ms());
    st_batch_set_producer(b.data, b.len, pid, epoch, seq, ST_ATTR_TRANSACTIONAL);
    st_err_t err = st_log_append_verified(e->log, b.data, b.len, 0, st_now_ms(), guard, &info);
    st_buf_fini(&b);
    return err;
}

static st_err_t marker_append(env_t *e, int64_t pid, int16_t epoch) {
    st_buf_t b;
    st_append_info_t info;
    st_buf_init(&b);
    marker(&b, pid, epoch);
    st_batch_set_producer(b.data, b.len, pid, epoch, -1, ST_ATTR_TRANSACTIONAL);
    st_err_t err = st_log_append(e->log, b.data, b.len, 0, st_now_ms(), &info);
    st_buf_fini(&b);
    return err;
}

static void test_pstate_verification_guards(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    /* no transaction open: a guard, the same for a second verification */
    int64_t g = st_log_txn_verify_begin(e.log, 40);
    assert_true(g > 0);
    assert_int_equal(st_log_txn_verify_begin(e.log, 40), g);
    /* the sentinel (0) or another guard opens nothing */
    assert_int_equal(txn_append(&e, 40, 0, 0, 0), ST_E_INVALID_TXN_STATE);
    assert_int_equal(txn_append(&e, 40, 0, 0, g + 1), ST_E_INVALID_TXN_STATE);
    /* unchecked (verification off) and the right guard do */
    assert_int_equal(txn_append(&e, 40, 0, 0, g), ST_OK);
    /* open now: no verification, the sentinel passes while it stays open */
    assert_int_equal(st_log_txn_verify_begin(e.log, 40), 0);
    assert_int_equal(txn_append(&e, 40, 0, 1, 0), ST_OK);
    assert_int_equal(marker_append(&e, 40, 0), ST_OK);
    /* ended before the append: the sentinel no longer passes */
    assert_int_equal(txn_append(&e, 40, 0, 2, 0), ST_E_INVALID_TXN_STATE);
    /* a marker written while the verification was under way voids it */
    g = st_log_txn_verify_begin(e.log, 40);
    assert_true(g > 0);
    assert_int_equal(marker_append(&e, 40, 0), ST_OK);
    assert_int_equal(txn_append(&e, 40, 0, 2, g), ST_E_INVALID_TXN_STATE);
    /* a new verification after it: taken */
    g = st_log_txn_verify_begin(e.log, 40);
    assert_int_equal(txn_append(&e, 40, 0, 2, g), ST_OK);
    /* other producers are unaffected; unchecked appends pass */
    assert_int_equal(txn_append(&e, 41, 0, 0, ST_LOG_UNVERIFIED), ST_OK);
    produce_ok(&e, 42, 0, 0, 1, leo(e.log));
    env_fini(&e);
}

/* ======================================================================
 * Followers
 * ==================================================================== */

/* Copy [from, leo) of leader into follower as the replica fetcher does. */
static void replicate(st_log_t *leader, st_log_t *follower) {
    for (;;) {
        int64_t from = leo(follower);
        st_log_read_t rd;
        assert_int_equal(st_log_read_replica(leader, from, 1 << 20, 1, &rd), ST_OK);
        if (!rd.file) break;
        uint8_t *buf = st_malloc((size_t)rd.len);
        size_t got = 0;
        assert_int_equal(st_pread_all(rd.file->fd, buf, (size_t)rd.len, rd.pos, &got), ST_OK);
        assert_int_equal(got, (size_t)rd.len);
        st_file_release(rd.file);
        st_append_info_t info;
        assert_int_equal(st_log_append_as_follower(follower, buf, got, st_now_ms(), &info), ST_OK);
        assert_int_equal(info.duplicate, 0);
        free(buf);
    }
    assert_int_equal(leo(follower), leo(leader));
}

static void test_pstate_follower_builds_the_same_state(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 4096);
    st_log_t *f;
    env_open_log(&e, "idem-follower", &f);
    int32_t seq[3] = {0, 0, 0};
    int16_t epoch[3] = {0, 0, 0};
    for (int i = 0; i < 40; i++) {
        int p = i % 3;
        if (i == 22) epoch[p] = 1, seq[p] = 0; /* producer 101 bumps its epoch */
        produce_ok(&e, 100 + p, epoch[p], seq[p], 2, leo(e.log));
        seq[p] += 2;
    }
    replicate(e.log, f);
    expect_same_state(e.log, f);
    assert_int_equal(st_log_producer_count(f), 3);
    /* As the new leader, the follower answers a retry with the original
     * offsets and fences the old epoch. */
    st_log_producer_t p;
    assert_true(producer_of(f, 100, &p));
    int32_t last = p.last_sequence;
    st_append_info_t info;
    int64_t before = leo(f);
    assert_int_equal(produce_at(f, 100, 0, last - 1, 2, st_now_ms(), &info), ST_OK);
    assert_int_equal(info.duplicate, 1);
    assert_int_equal(leo(f), before);
    assert_int_equal(produce_at(f, 101, 0, 100, 1, st_now_ms(), &info),
                     ST_E_INVALID_PRODUCER_EPOCH);
    assert_int_equal(produce_at(f, 100, 0, last + 2, 1, st_now_ms(), &info),
                     ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    st_log_release(f);
    env_fini(&e);
}

/* ======================================================================
 * Snapshots and restarts
 * ==================================================================== */

/* The file format, byte by byte from pstate.c's drawing: the encoder
 * writes it, and a hand-built file loads. */
static void put16(uint8_t **p, int16_t v) { st_be16_put(*p, (uint16_t)v); *p += 2; }
static void put32(uint8_t **p, int32_t v) { st_be32_put(*p, (uint32_t)v); *p += 4; }
static void put64(uint8_t **p, int64_t v) { st_be64_put(*p, (uint64_t)v); *p += 8; }

static size_t hand_snapshot(uint8_t *buf, int n, const int64_t *pid, const int16_t *epoch,
                            const int32_t *seq, const int64_t *off, const int32_t *delta,
                            const int64_t *ts, const int64_t *txn) {
    uint8_t *p = buf;
    put16(&p, 1);
    put32(&p, 0);
    put32(&p, n);
    for (int i = 0; i < n; i++) {
        put64(&p, pid[i]);
        put16(&p, epoch[i]);
        put32(&p, seq[i]);
        put64(&p, off[i]);
        put32(&p, delta[i]);
        put64(&p, ts[i]);
        put32(&p, -1);
        put64(&p, txn[i]);
    }
    size_t len = (size_t)(p - buf);
    st_be32_put(buf + 2, st_crc32c(0, buf + 6, len - 6));
    return len;
}

static void test_pstate_snapshot_format(void **state) {
    (void)state;
    st_pstate_t t;
    st_log__pstate_init(&t);
    /* pid 5: one batch of sequences 10..12 at offsets 40..42; pid 3: none */
    uint8_t want[10 + 2 * 46];
    int64_t pid[2] = {3, 5}, off[2] = {-1, 42}, ts[2] = {-1, 1700000000123}, txn[2] = {-1, -1};
    int16_t epoch[2] = {2, 7};
    int32_t seq[2] = {-1, 12}, delta[2] = {0, 2};
    size_t len = hand_snapshot(want, 2, pid, epoch, seq, off, delta, ts, txn);
    assert_int_equal(len, sizeof want);
    const char *why = NULL;
    /* (at time 0: pid 3's timestamp -1 would have expired at any later
     * time, as in Kafka) */
    assert_int_equal(st_log__pstate_decode(want, len, 0, DAY_MS, &t, &why), ST_OK);
    assert_int_equal(t.n, 2);
    st_pstate_entry_t *e5 = st_log__pstate_lookup(&t, 5), *e3 = st_log__pstate_lookup(&t, 3);
    assert_non_null(e5);
    assert_non_null(e3);
    assert_int_equal(e5->nbatches, 1);
    assert_int_equal(e5->batches[0].first_seq, 10);
    assert_int_equal(e5->batches[0].last_seq, 12);
    assert_int_equal(e5->batches[0].last_offset, 42);
    assert_int_equal(e3->nbatches, 0);
    assert_int_equal(e3->epoch, 2);
    st_buf_t b;
    st_buf_init(&b);
    st_log__pstate_encode(&t, &b);
    assert_int_equal(b.len, len);
    assert_memory_equal(b.data, want, len);
    st_buf_fini(&b);

    /* Hostile files: every cut, a flipped bit anywhere, a count that
     * disagrees with the length, another version. */
    for (size_t cut = 0; cut < len; cut++) {
        st_pstate_t u;
        st_log__pstate_init(&u);
        assert_int_equal(st_log__pstate_decode(want, cut, 0, DAY_MS, &u, &why), ST_E_CORRUPT);
        assert_non_null(why);
        assert_int_equal(u.n, 0);
        st_log__pstate_fini(&u);
    }
    for (size_t i = 0; i < len * 8; i += 7) {
        uint8_t bad[sizeof want];
        memcpy(bad, want, len);
        bad[i / 8] ^= (uint8_t)(1 << (i % 8));
        st_pstate_t u;
        st_log__pstate_init(&u);
        assert_int_equal(st_log__pstate_decode(bad, len, 0, DAY_MS, &u, &why), ST_E_CORRUPT);
        st_log__pstate_fini(&u);
    }
    uint8_t more[sizeof want];
    memcpy(more, want, len);
    st_be32_put(more + 6, 3);
    st_be32_put(more + 2, st_crc32c(0, more + 6, len - 6));
    st_pstate_t u;
    st_log__pstate_init(&u);
    assert_int_equal(st_log__pstate_decode(more, len, 0, DAY_MS, &u, &why), ST_E_CORRUPT);
    assert_non_null(strstr(why, "count"));
    /* Expired entries are left out on load, an open transaction keeps one. */
    int64_t tx[2] = {-1, 40};
    len = hand_snapshot(want, 2, pid, epoch, seq, off, delta, ts, tx);
    assert_int_equal(st_log__pstate_decode(want, len, ts[1] + 2 * DAY_MS, DAY_MS, &u, &why), ST_OK);
    assert_int_equal(u.n, 1);
    assert_non_null(st_log__pstate_lookup(&u, 5));
    st_log__pstate_fini(&u);
    st_log__pstate_fini(&t);
}

/* Each producer's last batch per the model of what was written. */
typedef struct lastb {
    int32_t first_seq, n;
    int64_t base;
} lastb_t;

static void test_pstate_snapshots_at_roll_and_close(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 2000);
    lastb_t last[4];
    int32_t next_seq[4] = {0, 0, 0, 0};
    for (int i = 0; i < 120; i++) {
        int p = i % 4, n = 1 + i % 3;
        int64_t base = leo(e.log);
        produce_ok(&e, 500 + p, 0, next_seq[p], n, base);
        last[p] = (lastb_t){next_seq[p], n, base};
        next_seq[p] += n;
    }
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_true(o.nsegments >= 4);
    /* A snapshot at each roll: at each segment's base offset but the first. */
    int64_t snaps[256];
    int ns = list_snapshots(e.pdir, snaps, 256);
    assert_int_equal(ns, o.nsegments - 1);
    pthread_mutex_lock(&e.log->lock);
    for (int i = 1; i < e.log->nsegs; i++) assert_true(snaps[i - 1] == e.log->segs[i]->base_offset);
    pthread_mutex_unlock(&e.log->lock);
    /* The roll's snapshot is synced by the flusher, not under the lock. */
    assert_true(e.log->pstate_snap_unsynced >= 0);
    assert_int_equal(st_log_flush(e.log), ST_OK);
    assert_true(e.log->pstate_snap_unsynced == -1);

    /* A clean close writes one at the log end; the reopen replays nothing
     * and knows each producer's last batch. */
    int64_t end = leo(e.log);
    env_close(&e);
    ns = list_snapshots(e.pdir, snaps, 256);
    assert_true(snaps[ns - 1] == end);
    env_open(&e);
    assert_int_equal(replayed(e.log), 0);
    for (int p = 0; p < 4; p++) {
        expect_producer(e.log, 500 + p, 0, next_seq[p] - 1);
        produce_dup(&e, 500 + p, 0, last[p].first_seq, last[p].n, last[p].base);
    }
    produce_refused(&e, 501, 0, next_seq[1] + 1, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_ok(&e, 501, 0, next_seq[1], 1, end);
    /* Closing again after an append: a new snapshot; an idle close writes
     * none. */
    env_close(&e);
    ns = list_snapshots(e.pdir, snaps, 256);
    assert_true(snaps[ns - 1] == end + 1);
    env_open(&e);
    assert_int_equal(replayed(e.log), 0);
    env_close(&e);
    assert_int_equal(list_snapshots(e.pdir, snaps, 256), ns);
    env_open(&e);

    /* A corrupt newest snapshot is skipped and deleted: the one before it
     * and a replay of what follows give the same state. */
    char path[4400];
    env_close(&e);
    snap_file(&e, end + 1, path, sizeof path);
    char *p = NULL;
    size_t len = 0;
    assert_int_equal(st_read_file(path, &p, &len), ST_OK);
    p[len - 3] ^= 0x40;
    assert_int_equal(st_write_file_atomic(path, p, len), ST_OK);
    free(p);
    /* and the one before it cut short */
    snap_file(&e, end, path, sizeof path);
    assert_int_equal(truncate(path, 17), 0);
    capture_start();
    env_open(&e);
    capture_stop();
    assert_non_null(strstr(captured, "CRC32C mismatch"));
    assert_non_null(strstr(captured, "entry count does not match"));
    free(captured);
    snap_file(&e, end + 1, path, sizeof path);
    assert_int_equal(access(path, F_OK), -1);
    snap_file(&e, end, path, sizeof path);
    assert_int_equal(access(path, F_OK), -1);
    assert_true(replayed(e.log) > 0);
    expect_producer(e.log, 501, 0, next_seq[1]);
    for (int q = 0; q < 4; q++) {
        if (q == 1) continue;
        expect_producer(e.log, 500 + q, 0, next_seq[q] - 1);
        produce_dup(&e, 500 + q, 0, last[q].first_seq, last[q].n, last[q].base);
    }
    env_fini(&e);
}

/* After an unclean stop the state comes from the last roll's snapshot and
 * a replay of the batches after it, and is the same as before the crash. */
static void test_pstate_unclean_reopen(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 2000);
    for (int i = 0; i < 90; i++) produce_ok(&e, 1 + i % 5, (int16_t)(i / 45), (i % 45) / 5 * 3, 3, leo(e.log));
    st_log_t *keep = st_log_keep(e.log);
    int64_t snaps[256];
    int ns = list_snapshots(e.pdir, snaps, 256);
    assert_true(ns >= 3);
    /* the batches after the last snapshot */
    int64_t after = (leo(e.log) - snaps[ns - 1]) / 3;
    assert_true(after > 0);

    env_t c;
    memset(&c, 0, sizeof c);
    c.root = unit_tmpdir();
    snprintf(c.dir, sizeof c.dir, "%s/data", c.root);
    copy_tree(e.dir, c.dir);
    c.cfg = e.cfg;
    env_open(&c);
    assert_int_equal(st_logmgr_clean_start(c.m), 0);
    assert_int_equal(replayed(c.log), after);
    expect_same_state(keep, c.log);
    /* the batches before the snapshot were only counted through it: the
     * last one of each producer is known, and a retry of it answered */
    st_append_info_t info;
    assert_int_equal(produce_at(c.log, 3, 1, 24, 3, st_now_ms(), &info), ST_OK);
    assert_int_equal(info.duplicate, 1);
    /* No snapshot at all (all lost): the replay starts at the log start. */
    env_close(&c);
    ns = list_snapshots(c.pdir, snaps, 256);
    for (int i = 0; i < ns; i++) {
        char path[4400];
        snap_file(&c, snaps[i], path, sizeof path);
        assert_int_equal(unlink(path), 0);
    }
    char marker[4400];
    snprintf(marker, sizeof marker, "%s/.strata-clean-shutdown", c.dir);
    assert_int_equal(unlink(marker), 0);
    env_open(&c);
    assert_int_equal(replayed(c.log), 90);
    expect_same_state(keep, c.log);
    st_log_release(keep);
    env_fini(&c);
    env_fini(&e);
}

/* The replay reads headers a window at a time after small batches and
 * alone after large ones: a log mixing both is replayed whole. */
static void test_pstate_replay_mixed_sizes(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 64 << 20); /* one segment: no snapshot, all replayed */
    int32_t seq[3] = {0, 0, 0};
    for (int i = 0; i < 150; i++) {
        int p = i % 3;
        pbatch_value_bytes = i % 7 == 0 ? 20000 : (i % 5 == 0 ? 5000 : 0);
        produce_ok(&e, 40 + p, 0, seq[p], 1 + i % 4, leo(e.log));
        seq[p] += 1 + i % 4;
    }
    pbatch_value_bytes = 0;
    st_log_t *keep = st_log_keep(e.log);
    env_t c;
    memset(&c, 0, sizeof c);
    c.root = unit_tmpdir();
    snprintf(c.dir, sizeof c.dir, "%s/data", c.root);
    copy_tree(e.dir, c.dir);
    c.cfg = e.cfg;
    env_open(&c);
    int64_t snaps[64];
    int ns = list_snapshots(c.pdir, snaps, 64);
    int64_t from = ns ? snaps[ns - 1] : 0;
    int64_t want = 0;
    for (int i = 0, off = 0; i < 150; off += 1 + i % 4, i++)
        if (off >= from) want++;
    assert_int_equal(ns, 0);
    assert_int_equal(replayed(c.log), want);
    assert_int_equal(want, 150);
    expect_same_state(keep, c.log);
    st_log_release(keep);
    env_fini(&c);
    env_fini(&e);
}

/* ======================================================================
 * Truncation, retention, expiry
 * ==================================================================== */

static void test_pstate_truncation_rebuilds(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 2500);
    /* producer 1 writes first, producer 2 only after cut */
    for (int i = 0; i < 30; i++) produce_ok(&e, 1, 0, i * 2, 2, i * 2);
    int64_t cut = 40; /* after producer 1's batch at 38..39 (sequences 38, 39) */
    for (int i = 30; i < 60; i++) produce_ok(&e, 1, 0, i * 2, 2, i * 2);
    for (int i = 0; i < 30; i++) produce_ok(&e, 2, 3, i, 1, 120 + i);
    int64_t snaps[256];
    int ns = list_snapshots(e.pdir, snaps, 256);
    assert_true(ns >= 2 && snaps[ns - 1] > cut);
    expect_producer(e.log, 1, 0, 119);
    expect_producer(e.log, 2, 3, 29);

    assert_int_equal(st_log_truncate_to(e.log, cut), ST_OK);
    assert_int_equal(leo(e.log), cut);
    /* producer 2's batches are all gone: so is it; producer 1 is back at
     * the sequence of its last batch that stayed */
    st_log_producer_t p;
    assert_false(producer_of(e.log, 2, &p));
    expect_producer(e.log, 1, 0, 39);
    produce_dup(&e, 1, 0, 38, 2, 38);
    produce_refused(&e, 1, 0, 42, 2, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    /* no snapshot above the new end is left */
    ns = list_snapshots(e.pdir, snaps, 256);
    for (int i = 0; i < ns; i++) assert_true(snaps[i] <= cut);
    produce_ok(&e, 1, 0, 40, 2, 40);
    produce_ok(&e, 2, 0, 0, 1, 42); /* unknown again: any epoch, any sequence */

    /* The cut state survives a restart. */
    env_close(&e);
    env_open(&e);
    expect_producer(e.log, 1, 0, 41);
    expect_producer(e.log, 2, 0, 0);

    /* truncate_fully: nothing is known, no snapshot kept */
    assert_int_equal(st_log_truncate_fully(e.log, 1000), ST_OK);
    assert_int_equal(st_log_producer_count(e.log), 0);
    assert_int_equal(list_snapshots(e.pdir, snaps, 256), 0);
    produce_ok(&e, 1, 0, 17, 1, 1000);
    env_fini(&e);
}

/* A log started empty at an offset by st_log_truncate_fully takes the
 * state below it from a snapshot's bytes (what a replica rebuilt from the
 * bucket does): the producers are known again, a retry of a last batch
 * is a duplicate; a log no longer empty there, or bytes that do not
 * decode, are refused and change nothing. */
static void test_pstate_restore_after_truncate_fully(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1000);
    for (int i = 0; i < 40; i++) produce_ok(&e, 1 + i % 2, 0, i / 2, 1, i);
    int64_t snaps[256];
    int ns = list_snapshots(e.pdir, snaps, 256);
    assert_true(ns >= 2);
    int64_t at = snaps[ns - 1];
    char path[4200], *bytes = NULL;
    size_t len = 0;
    snap_file(&e, at, path, sizeof path);
    assert_int_equal(st_read_file(path, &bytes, &len), ST_OK);
    int n = -1;
    /* not empty at `at`: refused */
    assert_int_equal(st_log_restore_producer_state(e.log, at, bytes, len, &n), ST_E_INVAL);

    assert_int_equal(st_log_truncate_fully(e.log, at), ST_OK);
    assert_int_equal(st_log_producer_count(e.log), 0);
    bytes[len - 1] ^= 1; /* the CRC no longer matches */
    assert_int_equal(st_log_restore_producer_state(e.log, at, bytes, len, &n), ST_E_CORRUPT);
    assert_int_equal(n, 0);
    bytes[len - 1] ^= 1;
    assert_int_equal(st_log_restore_producer_state(e.log, at, bytes, len, &n), ST_OK);
    assert_int_equal(n, 2);
    /* the last batch below `at` of each: pid 1 wrote seq (at-1)/2 at even
     * offsets, pid 2 at odd ones */
    int64_t last1 = (at - 1) % 2 == 0 ? at - 1 : at - 2, last2 = (at - 1) % 2 ? at - 1 : at - 2;
    expect_producer(e.log, 1, 0, (int32_t)(last1 / 2));
    expect_producer(e.log, 2, 0, (int32_t)(last2 / 2));
    produce_dup(&e, 2, 0, (int32_t)(last2 / 2), 1, last2); /* a retry of its last batch */
    assert_int_equal(st_log_restore_producer_state(e.log, at, bytes, len, &n), ST_E_INVAL);
    /* written as the log's own snapshot of `at`: a restart keeps it */
    assert_int_equal(list_snapshots(e.pdir, snaps, 256), 1);
    env_close(&e);
    env_open(&e);
    expect_producer(e.log, 1, 0, (int32_t)(last1 / 2));
    produce_refused(&e, 1, 0, (int32_t)(last1 / 2) + 2, 1, ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER);
    produce_ok(&e, 1, 0, (int32_t)(last1 / 2) + 1, 1, at);
    free(bytes);
    env_fini(&e);
}

static void test_pstate_retention_keeps_state(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1000);
    for (int i = 0; i < 60; i++) produce_ok(&e, 1 + i % 2, 0, i / 2, 1, i);
    int64_t snaps[256];
    int ns = list_snapshots(e.pdir, snaps, 256);
    assert_true(ns >= 3);
    /* DeleteRecords past two segments: the snapshots below the new log
     * start go, the producers stay (Kafka: only expiry forgets them) */
    int64_t low;
    assert_int_equal(st_log_delete_records(e.log, snaps[1] + 1, &low), ST_OK);
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    int n2 = list_snapshots(e.pdir, snaps, 256);
    for (int i = 0; i < n2; i++) assert_true(snaps[i] >= o.log_start_offset);
    assert_true(n2 < ns);
    expect_producer(e.log, 1, 0, 29);
    expect_producer(e.log, 2, 0, 29);
    produce_ok(&e, 2, 0, 30, 1, 60);
    env_fini(&e);
}

static void test_pstate_expiry(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    int64_t now = st_now_ms();
    st_append_info_t info;
    assert_int_equal(produce_at(e.log, 1, 0, 0, 1, now - 2 * DAY_MS, &info), ST_OK);
    assert_int_equal(produce_at(e.log, 2, 0, 0, 1, now - DAY_MS + 60000, &info), ST_OK);
    assert_int_equal(produce_at(e.log, 3, 0, 0, 1, now, &info), ST_OK);
    /* the default, one day */
    assert_int_equal(st_log_expire_producers(e.log, now), 1);
    st_log_producer_t p;
    assert_false(producer_of(e.log, 1, &p));
    assert_true(producer_of(e.log, 2, &p));
    /* an expired producer is unknown: taken at any sequence */
    assert_int_equal(produce_at(e.log, 1, 0, 50, 1, now, &info), ST_OK);
    assert_int_equal(info.duplicate, 0);
    /* producer.id.expiration.ms from the log's config */
    e.cfg.producer_id_expiration_ms = 1000;
    st_log_set_config(e.log, &e.cfg);
    assert_int_equal(st_log_expire_producers(e.log, now + 999), 1);
    assert_int_equal(st_log_expire_producers(e.log, now + 1000), 2);
    assert_int_equal(st_log_producer_count(e.log), 0);

    /* Many producers: the table grows and shrinks without losing one. */
    e.cfg.producer_id_expiration_ms = 0;
    st_log_set_config(e.log, &e.cfg);
    for (int i = 0; i < 3000; i++)
        assert_int_equal(produce_at(e.log, 10000 + i * 7919, 0, 0, 1,
                                    i % 2 ? now : now - 2 * DAY_MS, &info), ST_OK);
    assert_int_equal(st_log_producer_count(e.log), 3000);
    assert_int_equal(st_log_expire_producers(e.log, now), 1500);
    st_log_producer_t *all = st_malloc(3000 * sizeof *all);
    assert_int_equal(st_log_producers(e.log, all, 3000), 1500);
    for (int i = 0; i < 1500; i++) {
        if (i) assert_true(all[i].producer_id > all[i - 1].producer_id);
        assert_int_equal((all[i].producer_id - 10000) / 7919 % 2, 1);
    }
    free(all);
    /* a retry of each remaining producer's batch is still recognised */
    for (int i = 1; i < 3000; i += 2) {
        st_buf_t b;
        st_buf_init(&b);
        pbatch(&b, 10000 + i * 7919, 0, 0, 1, now);
        assert_int_equal(st_log_append(e.log, b.data, b.len, 0, now, &info), ST_OK);
        assert_int_equal(info.duplicate, 1);
        st_buf_fini(&b);
    }
    env_fini(&e);
}

/* The janitor runs the expiry every producer.id.expiration.check.interval.ms. */
static void test_pstate_janitor_expires(void **state) {
    (void)state;
    env_t e;
    memset(&e, 0, sizeof e);
    e.root = unit_tmpdir();
    snprintf(e.dir, sizeof e.dir, "%s/data", e.root);
    e.cfg = default_cfg();
    e.cfg.producer_id_expiration_ms = 60000;
    e.check_interval_ms = 10;
    env_open(&e);
    st_append_info_t info;
    int64_t now = st_now_ms();
    assert_int_equal(produce_at(e.log, 1, 0, 0, 1, now - 120000, &info), ST_OK);
    assert_int_equal(produce_at(e.log, 2, 0, 0, 1, now, &info), ST_OK);
    st_logmgr_start(e.m);
    /* bounded wait for the janitor's pass (no sleep: a pass is due) */
    int64_t deadline = st_mono_ms() + 10000;
    while (st_log_producer_count(e.log) != 1 && st_mono_ms() < deadline) sched_yield();
    assert_int_equal(st_log_producer_count(e.log), 1);
    st_log_producer_t p;
    assert_true(producer_of(e.log, 2, &p));
    env_fini(&e);
}

int main(void) {
    unit_seed("pstate");
    st_log_set_level(ST_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pstate_duplicates_gaps_epochs),
        cmocka_unit_test(test_pstate_sequence_wrap),
        cmocka_unit_test(test_pstate_one_append_many_batches),
        cmocka_unit_test(test_pstate_five_batches_kept),
        cmocka_unit_test(test_pstate_log_append_time),
        cmocka_unit_test(test_pstate_markers),
        cmocka_unit_test(test_pstate_verification_guards),
        cmocka_unit_test(test_pstate_follower_builds_the_same_state),
        cmocka_unit_test(test_pstate_snapshot_format),
        cmocka_unit_test(test_pstate_snapshots_at_roll_and_close),
        cmocka_unit_test(test_pstate_unclean_reopen),
        cmocka_unit_test(test_pstate_replay_mixed_sizes),
        cmocka_unit_test(test_pstate_truncation_rebuilds),
        cmocka_unit_test(test_pstate_restore_after_truncate_fully),
        cmocka_unit_test(test_pstate_retention_keeps_state),
        cmocka_unit_test(test_pstate_expiry),
        cmocka_unit_test(test_pstate_janitor_expires),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

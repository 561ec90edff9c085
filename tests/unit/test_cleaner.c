/*
 * test_cleaner.c - unit tests of broker/log/cleaner.c: compaction of real
 * logs on disk (st_logmgr_t, st_log_t) and the recovery of passes
 * interrupted at each step of the swap.
 *
 * A model keeps, per key, the offset and value of its latest record; after
 * a pass the log must hold exactly one record per key (the model's) below
 * the cleaned end, every offset unchanged, every batch valid (CRC), the
 * active segment untouched, and compressed batches still compressed with
 * their codec.  Batches are built here with the codecs' own libraries.
 */
#include "unit.h"

#include <dirent.h>
#include <fcntl.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "log_int.h"

#define NOW 1800000000000ll
#define DAY (24ll * 3600 * 1000)

/* ---- building batches -------------------------------------------------- */

typedef struct kv {
    char key[32];
    int32_t klen; /* -1: null key */
    char value[64];
    int32_t vlen; /* -1: tombstone */
} kv_t;

static void put_rec(st_buf_t *b, const kv_t *r, int index, int64_t ts_delta) {
    st_buf_t body;
    st_buf_init(&body);
    st_buf_put_i8(&body, 0);
    st_buf_put_varint(&body, ts_delta);
    st_buf_put_varint(&body, index);
    st_buf_put_varint(&body, r->klen);
    if (r->klen > 0) st_buf_put(&body, r->key, (size_t)r->klen);
    st_buf_put_varint(&body, r->vlen);
    if (r->vlen > 0) st_buf_put(&body, r->value, (size_t)r->vlen);
    st_buf_put_varint(&body, 0);
    st_buf_put_varint(b, (int64_t)body.len);
    st_buf_put(b, body.data, body.len);
    st_buf_fini(&body);
}

static void compress_with(int codec, const st_buf_t *in, st_buf_t *out) {
    switch (codec) {
    case 0: st_buf_put(out, in->data, in->len); break;
    case 1: {
        uLongf n = compressBound(in->len) + 64;
        z_stream z;
        memset(&z, 0, sizeof z);
        assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
        uint8_t *d = st_buf_extend(out, n);
        z.next_in = in->data;
        z.avail_in = (uInt)in->len;
        z.next_out = d;
        z.avail_out = (uInt)n;
        assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
        out->len -= z.avail_out;
        deflateEnd(&z);
        break;
    }
    case 2: {
        size_t n = snappy_max_compressed_length(in->len);
        uint8_t *d = st_buf_extend(out, n);
        assert_int_equal(snappy_compress((const char *)in->data, in->len, (char *)d, &n), SNAPPY_OK);
        out->len -= snappy_max_compressed_length(in->len) - n;
        break;
    }
    case 3: {
        size_t n = LZ4F_compressFrameBound(in->len, NULL);
        uint8_t *d = st_buf_extend(out, n);
        size_t r = LZ4F_compressFrame(d, n, in->data, in->len, NULL);
        assert_false(LZ4F_isError(r));
        out->len -= n - r;
        break;
    }
    case 4: {
        size_t n = ZSTD_compressBound(in->len);
        uint8_t *d = st_buf_extend(out, n);
        size_t r = ZSTD_compress(d, n, in->data, in->len, 1);
        assert_false(ZSTD_isError(r));
        out->len -= n - r;
        break;
    }
    }
}

/* One batch of n records, all with timestamp ts. */
static void build(st_buf_t *out, const kv_t *recs, int n, int codec, int64_t ts) {
    st_buf_t plain, packed;
    st_buf_init(&plain);
    st_buf_init(&packed);
    for (int i = 0; i < n; i++) put_rec(&plain, &recs[i], i, 0);
    compress_with(codec, &plain, &packed);
    size_t start = out->len;
    uint8_t *h = st_buf_extend(out, ST_BATCH_HEADER_SIZE);
    memset(h, 0, ST_BATCH_HEADER_SIZE);
    st_buf_put(out, packed.data, packed.len);
    h = out->data + start;
    size_t size = out->len - start;
    st_be32_put(h + ST_BATCH_LENGTH_OFFSET, (uint32_t)(size - ST_BATCH_LOG_OVERHEAD));
    h[ST_BATCH_MAGIC_OFFSET] = 2;
    st_be16_put(h + ST_BATCH_ATTR_OFFSET, (uint16_t)codec);
    st_be32_put(h + ST_BATCH_LAST_DELTA_OFFSET, (uint32_t)(n - 1));
    st_be64_put(h + ST_BATCH_BASE_TS_OFFSET, (uint64_t)ts);
    st_be64_put(h + ST_BATCH_MAX_TS_OFFSET, (uint64_t)ts);
    st_be64_put(h + 43, (uint64_t)-1);
    st_be16_put(h + 51, (uint16_t)-1);
    st_be32_put(h + 53, (uint32_t)-1);
    st_be32_put(h + ST_BATCH_COUNT_OFFSET, (uint32_t)n);
    st_be32_put(h + ST_BATCH_CRC_OFFSET, st_crc32c(0, h + ST_BATCH_ATTR_OFFSET, size - ST_BATCH_ATTR_OFFSET));
    st_buf_fini(&plain);
    st_buf_fini(&packed);
}

/* ---- a log and its model -------------------------------------------------- */

#define MAXKEYS 2048

typedef struct env {
    char *root;
    char dir[4096];
    st_logmgr_t *m;
    st_log_t *log;
    st_log_config_t cfg;
    /* the model: per key, the latest offset and value (-1: tombstone) */
    int64_t latest[MAXKEYS];
    char value[MAXKEYS][64];
    int vlen[MAXKEYS];
    int64_t leo;
} env_t;

static void env_open(env_t *e) {
    char err[512] = "";
    char *dirs[1] = {e->dir};
    st_logmgr_config_t mc = {dirs, 1, 1, 3600 * 1000, 3600 * 1000, 0, NULL, 0};
    st_err_t rc = st_logmgr_open(&mc, &e->m, err, sizeof err);
    if (rc) fail_msg("st_logmgr_open: %s", err);
    st_uuid_t id = {{1, 2, 3, 4, 5, 6, 0x47, 8, 0x89, 10, 11, 12, 13, 14, 15, 16}};
    assert_int_equal(st_logmgr_open_log(e->m, "compact", 0, &id, &e->cfg, &e->log), ST_OK);
}

static void env_close(env_t *e) {
    if (e->log) st_log_release(e->log);
    if (e->m) st_logmgr_close(e->m);
    e->log = NULL;
    e->m = NULL;
}

static void env_init(env_t *e, int64_t segment_bytes) {
    memset(e, 0, sizeof *e);
    for (int i = 0; i < MAXKEYS; i++) e->latest[i] = -1;
    e->root = unit_tmpdir();
    snprintf(e->dir, sizeof e->dir, "%s/data", e->root);
    memset(&e->cfg, 0, sizeof e->cfg);
    e->cfg.segment_bytes = segment_bytes;
    e->cfg.retention_ms = -1;
    e->cfg.retention_bytes = -1;
    e->cfg.index_interval_bytes = 256;
    e->cfg.segment_index_bytes = 10 << 20;
    e->cfg.max_message_bytes = 1 << 20;
    e->cfg.ts_before_max_ms = e->cfg.ts_after_max_ms = INT64_MAX;
    env_open(e);
}

static void env_fini(env_t *e) {
    env_close(e);
    unit_tmpdir_remove(e->root);
}

/* Append a batch: keys[i] (index into the model; -1 for a null key),
 * tombstone when value is NULL. */
static void append(env_t *e, const int *keys, int n, int round, int tomb, int codec, int64_t ts) {
    kv_t recs[64];
    assert_true(n <= 64);
    for (int i = 0; i < n; i++) {
        kv_t *r = &recs[i];
        r->klen = keys[i] < 0 ? -1 : snprintf(r->key, sizeof r->key, "key-%05d", keys[i]);
        r->vlen = tomb ? -1 : snprintf(r->value, sizeof r->value, "value-%05d-round-%04d", keys[i], round);
    }
    st_buf_t b;
    st_buf_init(&b);
    build(&b, recs, n, codec, ts);
    st_append_info_t info;
    assert_int_equal(st_log_append(e->log, b.data, b.len, 3, ts, &info), ST_OK);
    st_log_set_high_watermark(e->log, info.last_offset + 1);
    assert_int_equal(info.base_offset, e->leo);
    for (int i = 0; i < n; i++) {
        if (keys[i] < 0) continue;
        e->latest[keys[i]] = e->leo + i;
        e->vlen[keys[i]] = recs[i].vlen;
        if (recs[i].vlen > 0) memcpy(e->value[keys[i]], recs[i].value, (size_t)recs[i].vlen);
    }
    e->leo = info.last_offset + 1;
    st_buf_fini(&b);
}

/* ---- reading the log back ---------------------------------------------------- */

typedef struct seen {
    int64_t offset;
    int key; /* -1: null key */
    int vlen;
    char value[64];
    int codec;
} seen_t;

typedef struct readback {
    seen_t *v;
    int n, cap;
    int codec;
    int batches;
    int64_t empty_pid; /* the producer of the last empty batch seen; -1 none */
    int empty_batches;
} readback_t;

static int collect(const st_record_t *r, void *arg) {
    readback_t *rb = arg;
    if (rb->n == rb->cap) {
        rb->cap = rb->cap ? rb->cap * 2 : 1024;
        rb->v = st_realloc(rb->v, sizeof *rb->v * (size_t)rb->cap);
    }
    seen_t *s = &rb->v[rb->n++];
    memset(s, 0, sizeof *s);
    s->offset = r->offset;
    s->key = r->key_len > 4 ? atoi((const char *)r->key + 4) : -1;
    s->vlen = r->value_len;
    if (r->value_len > 0) memcpy(s->value, r->value, (size_t)ST_MIN(r->value_len, 63));
    s->codec = rb->codec;
    return 0;
}

/* Every record from offset 0 through st_log_read, checking each batch. */
static void read_all(env_t *e, readback_t *rb) {
    memset(rb, 0, sizeof *rb);
    rb->empty_pid = -1;
    int64_t off = 0;
    uint8_t *buf = NULL;
    for (;;) {
        st_log_read_t rd;
        st_err_t rc = st_log_read(e->log, off, 1 << 20, 1, &rd);
        if (rc == ST_E_OFFSET_OUT_OF_RANGE) break;
        assert_int_equal(rc, ST_OK);
        if (!rd.file) break;
        buf = st_realloc(buf, (size_t)rd.len);
        size_t got = 0;
        assert_int_equal(st_pread_all(rd.file->fd, buf, (size_t)rd.len, rd.pos, &got), ST_OK);
        st_file_release(rd.file);
        size_t pos = 0;
        int64_t before = off;
        while (pos + ST_BATCH_HEADER_SIZE <= got) {
            st_batch_info_t b;
            assert_int_equal(st_batch_header(buf + pos, got - pos, &b), ST_OK);
            if (pos + (size_t)b.size > got) break;
            assert_true(st_batch_crc_ok(buf + pos, b.size));
            assert_true(b.base_offset >= off || st_batch_last_offset(&b) >= off);
            rb->codec = b.attributes & ST_ATTR_CODEC_MASK;
            rb->batches++;
            if (b.record_count == 0) {
                rb->empty_batches++;
                rb->empty_pid = b.producer_id;
            }
            assert_int_equal(st_batch_foreach_record(buf + pos, b.size, collect, rb), ST_OK);
            off = st_batch_last_offset(&b) + 1;
            pos += (size_t)b.size;
        }
        assert_true(off > before);
    }
    free(buf);
    /* offsets strictly ascending */
    for (int i = 1; i < rb->n; i++) assert_true(rb->v[i].offset > rb->v[i - 1].offset);
}

static int nsegments(env_t *e) {
    st_log_offsets_t o;
    st_log_offsets(e->log, &o);
    return o.nsegments;
}

static const st_log_compact_config_t CC = {DAY, 0, 0.5, 1 << 20};

static st_log_clean_result_t clean(env_t *e, int64_t first_dirty, int64_t now, int force) {
    st_log_clean_opts_t o = {first_dirty, now, 8 << 20, 0, NULL, force};
    st_log_clean_result_t r;
    st_err_t rc = st_log_clean(e->log, &CC, &o, &r);
    if (rc) fail_msg("st_log_clean: %s", st_err_name(rc));
    return r;
}

/* Below `end` one record per key, the latest; from `end` on, everything
 * the model appended there. */
static void check_compacted(env_t *e, const readback_t *rb, int64_t end, int keys) {
    int *count = st_calloc((size_t)keys, sizeof *count);
    for (int i = 0; i < rb->n; i++) {
        const seen_t *s = &rb->v[i];
        if (s->offset >= end || s->key >= keys) continue; /* tails of earlier rounds */
        assert_true(s->key >= 0);
        count[s->key]++;
        assert_int_equal(s->offset, e->latest[s->key]);
        assert_int_equal(s->vlen, e->vlen[s->key]);
        if (s->vlen > 0) assert_memory_equal(s->value, e->value[s->key], (size_t)s->vlen);
    }
    for (int k = 0; k < keys; k++)
        if (e->latest[k] >= 0 && e->latest[k] < end && e->vlen[k] >= 0) assert_int_equal(count[k], 1);
    free(count);
}

/* ======================================================================
 * Tests
 * ==================================================================== */

static void test_latest_per_key(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 16 << 10);
    int keys[10];
    for (int round = 0; round < 20; round++)
        for (int k0 = 0; k0 < 100; k0 += 10) {
            for (int i = 0; i < 10; i++) keys[i] = k0 + (i * 7 + round) % 10;
            append(&e, keys, 10, round, 0, 0, NOW - DAY);
        }
    assert_int_equal(st_log_roll(e.log), ST_OK);
    int tail[1] = {1000};
    append(&e, tail, 1, 99, 0, 0, NOW); /* the active segment */
    int before = nsegments(&e);
    st_log_clean_result_t r = clean(&e, 0, NOW, 0);
    assert_true(r.cleaned);
    assert_int_equal(r.first_dirty, e.leo - 1); /* the active segment's base */
    assert_int_equal(r.records_kept, 100);
    assert_int_equal(r.records_removed, 1900);
    assert_true(nsegments(&e) < before);
    readback_t rb;
    read_all(&e, &rb);
    assert_int_equal(rb.n, 101);
    check_compacted(&e, &rb, r.first_dirty, 100);
    /* the log end did not move */
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_int_equal(o.leo, e.leo);
    assert_int_equal(o.high_watermark, e.leo);
    free(rb.v);
    /* survives a reopen (indexes and all) */
    env_close(&e);
    env_open(&e);
    read_all(&e, &rb);
    assert_int_equal(rb.n, 101);
    free(rb.v);
    env_fini(&e);
}

static void test_tombstones_and_incremental(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 8 << 10);
    int keys[20];
    for (int i = 0; i < 20; i++) keys[i] = i;
    append(&e, keys, 20, 0, 0, 0, NOW - 3 * DAY);
    append(&e, keys, 10, 1, 1, 0, NOW - 2 * DAY); /* tombstones for keys 0-9, two days old */
    append(&e, keys + 10, 5, 1, 1, 0, NOW - DAY / 2); /* keys 10-14: half a day */
    assert_int_equal(st_log_roll(e.log), ST_OK);
    int tail[1] = {1000};
    append(&e, tail, 1, 2, 0, 0, NOW);
    st_log_clean_result_t r = clean(&e, 0, NOW, 0);
    assert_true(r.cleaned);
    /* keys 0-9: tombstone older than delete.retention.ms: gone with their
     * values; keys 10-14: tombstones kept (values gone); 15-19 values */
    readback_t rb;
    read_all(&e, &rb);
    int tombs = 0, values = 0;
    for (int i = 0; i < rb.n; i++) {
        if (rb.v[i].offset >= r.first_dirty) continue;
        assert_true(rb.v[i].key >= 10);
        if (rb.v[i].vlen < 0) tombs++;
        else values++;
    }
    assert_int_equal(tombs, 5);
    assert_int_equal(values, 5);
    assert_int_equal(r.tombstones_removed, 10);
    assert_int_equal(r.tombstone_due, NOW - DAY / 2 + DAY);
    free(rb.v);
    /* nothing dirty: no pass, unless the tombstones are due */
    st_log_clean_result_t r2 = clean(&e, r.first_dirty, NOW + DAY, 0);
    assert_false(r2.cleaned);
    r2 = clean(&e, r.first_dirty, NOW + DAY, 1);
    assert_true(r2.cleaned);
    assert_int_equal(r2.tombstones_removed, 5);
    read_all(&e, &rb);
    for (int i = 0; i < rb.n; i++) assert_true(rb.v[i].offset >= r.first_dirty || rb.v[i].vlen > 0);
    free(rb.v);
    /* more updates: the next pass cleans only the new dirty part, and the
     * result is still one record per key */
    assert_int_equal(st_log_roll(e.log), ST_OK);
    for (int round = 3; round < 6; round++) append(&e, keys, 20, round, 0, 0, NOW);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    append(&e, tail, 1, 9, 0, 0, NOW);
    st_log_clean_result_t r3 = clean(&e, r2.first_dirty, NOW, 0);
    assert_true(r3.cleaned);
    read_all(&e, &rb);
    check_compacted(&e, &rb, r3.first_dirty, 20);
    int below = 0;
    for (int i = 0; i < rb.n; i++) below += rb.v[i].offset < r3.first_dirty && rb.v[i].key < 20;
    assert_int_equal(below, 20);
    free(rb.v);
    env_fini(&e);
}

static void test_compressed_batches(void **state) {
    (void)state;
    for (int codec = 1; codec <= 4; codec++) {
        env_t e;
        env_init(&e, 1 << 20);
        int keys[40];
        for (int i = 0; i < 40; i++) keys[i] = i;
        append(&e, keys, 40, 0, 0, codec, NOW - DAY);
        append(&e, keys, 20, 1, 0, codec, NOW - DAY); /* half of the first batch superseded */
        assert_int_equal(st_log_roll(e.log), ST_OK);
        int tail[1] = {1000};
        append(&e, tail, 1, 2, 0, codec, NOW);
        st_log_clean_result_t r = clean(&e, 0, NOW, 1);
        assert_true(r.cleaned);
        readback_t rb;
        read_all(&e, &rb);
        check_compacted(&e, &rb, r.first_dirty, 40);
        assert_int_equal(rb.n, 41);
        assert_int_equal(rb.batches, 3); /* rebuilt, copied, active */
        for (int i = 0; i < rb.n; i++) assert_int_equal(rb.v[i].codec, codec);
        free(rb.v);
        env_fini(&e);
    }
}

static void test_lag_ratio_and_keyless(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    int keys[4] = {1, 1, -1, 2};
    append(&e, keys, 4, 0, 0, 0, NOW - DAY);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    append(&e, keys, 4, 1, 0, 0, NOW - 1000); /* young */
    assert_int_equal(st_log_roll(e.log), ST_OK);
    append(&e, keys, 1, 2, 0, 0, NOW);
    /* min.compaction.lag.ms: the young segment is not cleanable */
    st_log_compact_config_t cc = CC;
    cc.min_compaction_lag_ms = 60000;
    st_log_clean_opts_t o = {0, NOW, 1 << 20, 0, NULL, 0};
    st_log_clean_result_t r;
    assert_int_equal(st_log_clean(e.log, &cc, &o, &r), ST_OK);
    assert_true(r.cleaned);
    assert_int_equal(r.first_dirty, 4);
    readback_t rb;
    read_all(&e, &rb);
    /* first segment: key 1 once (offset 1), key 2 (offset 3); the keyless
     * record is gone; the young segment is untouched */
    assert_int_equal(rb.n, 2 + 4 + 1);
    assert_int_equal(rb.v[0].offset, 1);
    assert_int_equal(rb.v[1].offset, 3);
    free(rb.v);
    /* min.cleanable.dirty.ratio: nothing new is dirty enough */
    cc.min_cleanable_dirty_ratio = 0.99;
    o.first_dirty = r.first_dirty;
    assert_int_equal(st_log_clean(e.log, &cc, &o, &r), ST_OK);
    assert_false(r.cleaned);
    env_fini(&e);
}

/* max.compaction.lag.ms (KIP-354): a log below min.cleanable.dirty.ratio is
 * cleaned once the oldest record of its dirty section is older than the
 * lag, and not before. */
static void test_max_compaction_lag(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20);
    int keys[10];
    for (int i = 0; i < 10; i++) keys[i] = i;
    for (int round = 0; round < 8; round++) append(&e, keys, 10, round, 0, 0, NOW - DAY);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    int tail[1] = {500};
    append(&e, tail, 1, 0, 0, 0, NOW);
    st_log_clean_result_t r = clean(&e, 0, NOW, 0); /* all dirty: cleaned */
    assert_true(r.cleaned);
    int64_t first_dirty = r.first_dirty;
    /* a little dirt: two updates of key 3, written at T */
    const int64_t T = NOW + 1000;
    int dup[2] = {3, 3};
    append(&e, dup, 2, 9, 0, 0, T);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    append(&e, tail, 1, 1, 0, 0, T);
    st_log_compact_config_t cc = CC;
    cc.min_cleanable_dirty_ratio = 0.99;
    st_log_config_t lc;
    st_log_get_config(e.log, &lc);
    lc.max_compaction_lag_ms = 60000;
    st_log_set_config(e.log, &lc);
    /* younger than the lag: below the ratio, nothing happens */
    st_log_clean_opts_t o = {first_dirty, T + 59000, 1 << 20, 0, NULL, 0};
    assert_int_equal(st_log_clean(e.log, &cc, &o, &r), ST_OK);
    assert_false(r.cleaned);
    assert_false(r.lag_due);
    assert_true(r.dirty_ratio < 0.99);
    /* older than the lag: cleaned although the ratio is still low */
    o.now_ms = T + 61000;
    assert_int_equal(st_log_clean(e.log, &cc, &o, &r), ST_OK);
    assert_true(r.lag_due);
    assert_true(r.cleaned);
    assert_true(r.dirty_ratio < 0.99);
    readback_t rb;
    read_all(&e, &rb);
    int n3 = 0;
    for (int i = 0; i < rb.n; i++) n3 += rb.v[i].key == 3;
    assert_int_equal(n3, 1); /* the latest of key 3 only */
    free(rb.v);
    /* no lag set: the same log state is left alone */
    lc.max_compaction_lag_ms = 0;
    st_log_set_config(e.log, &lc);
    append(&e, dup, 2, 10, 0, 0, T);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    append(&e, tail, 1, 2, 0, 0, T);
    o.first_dirty = r.first_dirty;
    o.now_ms = T + DAY;
    assert_int_equal(st_log_clean(e.log, &cc, &o, &r), ST_OK);
    assert_false(r.cleaned);
    env_fini(&e);
}

static void test_cancel_leaves_nothing(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 4 << 10);
    int keys[10];
    for (int i = 0; i < 10; i++) keys[i] = i;
    for (int round = 0; round < 30; round++) append(&e, keys, 10, round, 0, 0, NOW - DAY);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    int stop = 1;
    st_log_clean_opts_t o = {0, NOW, 1 << 20, 0, &stop, 1};
    st_log_clean_result_t r;
    assert_int_equal(st_log_clean(e.log, &CC, &o, &r), ST_E_CANCELLED);
    DIR *d = opendir(st_log_dir(e.log));
    struct dirent *de;
    while ((de = readdir(d))) assert_null(strstr(de->d_name, ".cleaned"));
    closedir(d);
    readback_t rb;
    read_all(&e, &rb);
    assert_int_equal(rb.n, 300);
    free(rb.v);
    env_fini(&e);
}

/* ---- crash recovery ------------------------------------------------------------ */

static void copy_file(const char *from, const char *to) {
    char *data;
    size_t n;
    assert_int_equal(st_read_file(from, &data, &n), ST_OK);
    int fd = open(to, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    assert_true(fd >= 0);
    assert_int_equal(st_pwrite_all(fd, data, n, 0), ST_OK);
    close(fd);
    free(data);
}

static void copy_dir(const char *from, const char *to) {
    assert_int_equal(st_mkdirs(to), ST_OK);
    DIR *d = opendir(from);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char a[4300], b[4300];
        snprintf(a, sizeof a, "%s/%s", from, de->d_name);
        snprintf(b, sizeof b, "%s/%s", to, de->d_name);
        struct stat st;
        stat(a, &st);
        if (S_ISDIR(st.st_mode)) copy_dir(a, b);
        else copy_file(a, b);
    }
    closedir(d);
}

static int count_suffix(const char *dir, const char *suffix) {
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name), m = strlen(suffix);
        n += l >= m && !strcmp(de->d_name + l - m, suffix);
    }
    closedir(d);
    return n;
}

/* Build the files a crash at `step` leaves, from the log before cleaning
 * (orig) and after (done), in a copy of orig:
 *   0  .cleaned files written, not renamed
 *   1  .swap files in place (committed), no old segment removed yet
 *   2  committed, one old segment already removed
 *   3  committed, the index swaps already renamed, only the log swap left */
static void stage(const char *orig_dir, const char *done_pdir, const char *crash_dir, int step,
                  int64_t base) {
    copy_dir(orig_dir, crash_dir);
    char pdir[4300], from[4400], to[4400];
    snprintf(pdir, sizeof pdir, "%s/compact-0", crash_dir);
    static const char *kinds[] = {".log", ".index", ".timeindex"};
    for (int k = 0; k < 3; k++) {
        st_log__seg_path(done_pdir, base, kinds[k], from, sizeof from);
        char ext[32];
        snprintf(ext, sizeof ext, "%s%s", kinds[k], step == 0 ? ".cleaned" : ".swap");
        if (step == 3 && k < 2) snprintf(ext, sizeof ext, "%s", kinds[k]);
        st_log__seg_path(pdir, base, ext, to, sizeof to);
        copy_file(from, to);
    }
    if (step == 2) {
        /* the second segment of the group goes first */
        DIR *d = opendir(pdir);
        struct dirent *de;
        int64_t second = -1;
        while ((de = readdir(d)))
            if (strlen(de->d_name) == 24 && strstr(de->d_name, ".log")) {
                int64_t b = strtoll(de->d_name, NULL, 10);
                if (b > base && (second < 0 || b < second)) second = b;
            }
        closedir(d);
        assert_true(second > base);
        st_log__seg_path(pdir, second, ".log", to, sizeof to);
        unlink(to);
    }
}

static void test_recovery_each_step(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 4 << 10);
    int keys[10];
    for (int i = 0; i < 10; i++) keys[i] = i;
    for (int round = 0; round < 40; round++) append(&e, keys, 10, round, 0, 0, NOW - DAY);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    int tail[1] = {1000};
    append(&e, tail, 1, 99, 0, 0, NOW);
    env_close(&e);
    char orig[4300];
    snprintf(orig, sizeof orig, "%s/orig", e.root);
    copy_dir(e.dir, orig);
    env_open(&e);
    st_log_clean_result_t r = clean(&e, 0, NOW, 0);
    assert_true(r.cleaned);
    readback_t want;
    read_all(&e, &want);
    char done_pdir[4300];
    snprintf(done_pdir, sizeof done_pdir, "%s", st_log_dir(e.log));
    int64_t base = 0; /* one group: every closed segment, named by the first */
    env_close(&e);
    for (int step = 0; step < 4; step++) {
        char crash[4300];
        snprintf(crash, sizeof crash, "%s/crash%d", e.root, step);
        stage(orig, done_pdir, crash, step, base);
        assert_int_equal(st_log_cleaner_recover(crash), ST_OK);
        char pdir[4400];
        snprintf(pdir, sizeof pdir, "%s/compact-0", crash);
        assert_int_equal(count_suffix(pdir, ".cleaned") + count_suffix(pdir, ".swap"), 0);
        env_t c = e;
        c.m = NULL;
        c.log = NULL;
        snprintf(c.dir, sizeof c.dir, "%s", crash);
        env_open(&c);
        readback_t got;
        read_all(&c, &got);
        if (step == 0) {
            assert_int_equal(got.n, 401); /* never committed: the log as it was */
        } else {
            /* committed: the cleaned log */
            assert_int_equal(got.n, want.n);
            for (int i = 0; i < got.n; i++) {
                assert_int_equal(got.v[i].offset, want.v[i].offset);
                assert_string_equal(got.v[i].value, want.v[i].value);
            }
        }
        /* and appends go on at the same offset */
        st_log_offsets_t o;
        st_log_offsets(c.log, &o);
        assert_int_equal(o.leo, 401);
        free(got.v);
        env_close(&c);
    }
    free(want.v);
    unit_tmpdir_remove(e.root);
}


/* Append a transactional batch of producer pid (keys as append) without
 * touching the model; returns its base offset. */
static int64_t append_txn(env_t *e, int64_t pid, int32_t seq, const int *keys, int n, int round) {
    kv_t recs[64];
    for (int i = 0; i < n; i++) {
        recs[i].klen = snprintf(recs[i].key, sizeof recs[i].key, "key-%05d", keys[i]);
        recs[i].vlen = snprintf(recs[i].value, sizeof recs[i].value, "value-%05d-round-%04d",
                                keys[i], round);
    }
    st_buf_t b;
    st_buf_init(&b);
    build(&b, recs, n, 0, NOW - DAY);
    st_batch_set_producer(b.data, b.len, pid, 0, seq, ST_ATTR_TRANSACTIONAL);
    st_append_info_t info;
    assert_int_equal(st_log_append(e->log, b.data, b.len, 3, NOW - DAY, &info), ST_OK);
    st_log_set_high_watermark(e->log, info.last_offset + 1);
    e->leo = info.last_offset + 1;
    st_buf_fini(&b);
    return info.base_offset;
}

static void append_marker(env_t *e, int64_t pid, int commit) {
    uint8_t value[6] = {0, 0, 0, 0, 0, 1};
    st_buf_t b;
    st_buf_init(&b);
    st_batch_build_control(&b, 0, commit ? ST_CONTROL_COMMIT : ST_CONTROL_ABORT, value,
                           sizeof value, NOW - DAY);
    st_batch_set_producer(b.data, b.len, pid, 0, -1, ST_ATTR_TRANSACTIONAL);
    st_append_info_t info;
    assert_int_equal(st_log_append(e->log, b.data, b.len, 3, NOW - DAY, &info), ST_OK);
    st_log_set_high_watermark(e->log, info.last_offset + 1);
    e->leo = info.last_offset + 1;
    st_buf_fini(&b);
}

/* Transactions: an aborted transaction's records neither win over the
 * committed values of their keys nor stay; a committed one's do; the
 * cleaner stops before an open transaction (the last stable offset); the
 * aborted list survives the swap and a reopen. */
static void test_transactions(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 4 << 10);
    int keys[10];
    for (int i = 0; i < 10; i++) keys[i] = i;
    append(&e, keys, 10, 0, 0, 0, NOW - DAY);            /* committed: round 0 */
    append_txn(&e, 7, 0, keys, 10, 1);                   /* aborted: round 1 */
    append_marker(&e, 7, 0);
    int64_t committed = append_txn(&e, 8, 0, keys, 5, 2); /* committed: round 2, keys 0-4 */
    append_marker(&e, 8, 1);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    int64_t open_at = append_txn(&e, 9, 0, keys, 10, 3); /* open */
    assert_int_equal(st_log_roll(e.log), ST_OK);
    int tail[1] = {50};
    append(&e, tail, 1, 4, 0, 0, NOW);
    assert_int_equal(st_log_last_stable_offset(e.log), open_at);
    st_log_aborted_txn_t ab[4];
    assert_int_equal(st_log_aborted_txns(e.log, 0, INT64_MAX, ab, 4), 1);
    assert_int_equal(ab[0].producer_id, 7);

    st_log_clean_result_t r = clean(&e, 0, NOW, 1);
    assert_true(r.cleaned);
    assert_true(r.first_dirty <= open_at); /* never past the open transaction */
    readback_t rb;
    read_all(&e, &rb);
    int rounds[10] = {0};
    int open_seen = 0;
    for (int i = 0; i < rb.n; i++) {
        const seen_t *sv = &rb.v[i];
        if (sv->offset >= open_at) {
            open_seen++;
            continue;
        }
        if (sv->key < 0 || sv->key >= 10) continue; /* markers have no such key */
        int round = atoi(strstr(sv->value, "round-") + 6);
        assert_int_not_equal(round, 1); /* nothing of the aborted transaction */
        rounds[sv->key] = round;
    }
    for (int k = 0; k < 10; k++) assert_int_equal(rounds[k], k < 5 ? 2 : 0);
    assert_int_equal(open_seen, 11); /* the open transaction and the tail, untouched */
    (void)committed;
    free(rb.v);
    env_close(&e);
    env_open(&e);
    assert_int_equal(st_log_aborted_txns(e.log, 0, INT64_MAX, ab, 4), 1);
    assert_int_equal(ab[0].producer_id, 7);
    assert_int_equal(st_log_last_stable_offset(e.log), open_at);
    env_fini(&e);
}

/* Markers go as Kafka's cleaner removes them: once their transaction left
 * nothing in the log (an aborted one a pass after its data went), older
 * than delete.retention.ms, and not their producer's last batch; an
 * abort marker takes its aborted entry with it.  A producer's newest
 * batch stays, empty, when its records go. */
static void test_transaction_markers(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 4 << 10);
    int k0[5] = {0, 1, 2, 3, 4}, k20[2] = {20, 21}, k30[2] = {30, 31}, k40[1] = {40};
    append_txn(&e, 7, 0, k0, 5, 1); /* aborted */
    append_marker(&e, 7, 0);
    append_txn(&e, 7, 5, k20, 2, 2); /* committed, kept: its marker stays */
    append_marker(&e, 7, 1);
    append_txn(&e, 10, 0, k30, 2, 3); /* committed, then overwritten */
    append_marker(&e, 10, 1);
    append(&e, k30, 2, 4, 0, 0, NOW - DAY);
    append_txn(&e, 10, 2, k40, 1, 5); /* committed, kept */
    append_marker(&e, 10, 1);
    append_txn(&e, 8, 0, k0, 5, 6); /* committed, overwritten: but 8's last batch */
    append_marker(&e, 8, 1);
    append(&e, k0, 5, 7, 0, 0, NOW - DAY);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    int tail[1] = {50};
    append(&e, tail, 1, 8, 0, 0, NOW);
    int64_t hw = e.leo;
    st_log_aborted_txn_t ab[4];
    assert_int_equal(st_log_aborted_txns(e.log, 0, INT64_MAX, ab, 4), 1);

    /* 10's first commit marker goes (its records were overwritten); 7's
     * abort marker stays while its data goes in this pass */
    st_log_clean_result_t r = clean(&e, 0, NOW, 1);
    assert_true(r.cleaned);
    assert_int_equal(r.markers_removed, 1);
    assert_int_equal(st_log_aborted_txns(e.log, 0, INT64_MAX, ab, 4), 1);
    /* a pass when the marker is younger than delete.retention.ms keeps it,
     * due later */
    r = clean(&e, 0, NOW - DAY / 2, 1);
    assert_int_equal(r.markers_removed, 0);
    assert_true(r.tombstone_due > 0 && r.tombstone_due <= NOW);
    assert_int_equal(st_log_aborted_txns(e.log, 0, INT64_MAX, ab, 4), 1);
    /* the next pass takes it, and its aborted entry */
    r = clean(&e, 0, NOW, 1);
    assert_int_equal(r.markers_removed, 1);
    assert_int_equal(st_log_aborted_txns(e.log, 0, INT64_MAX, ab, 4), 0);
    r = clean(&e, 0, NOW, 1);
    assert_int_equal(r.markers_removed, 0);
    assert_int_equal(st_log_last_stable_offset(e.log), hw);
    /* the kept transactions' records and the producers' state are there */
    readback_t rb;
    read_all(&e, &rb);
    int seen20 = 0, seen40 = 0;
    for (int i = 0; i < rb.n; i++) {
        seen20 += rb.v[i].key == 20 || rb.v[i].key == 21;
        seen40 += rb.v[i].key == 40;
    }
    assert_int_equal(seen20, 2);
    assert_int_equal(seen40, 1);
    /* 8's records were all overwritten, but its newest batch stays empty,
     * for the producer state of whoever rebuilds it from the log */
    assert_int_equal(rb.empty_batches, 1);
    assert_int_equal(rb.empty_pid, 8);
    free(rb.v);
    env_close(&e);
    env_open(&e);
    assert_int_equal(st_log_aborted_txns(e.log, 0, INT64_MAX, ab, 4), 0);
    assert_int_equal(st_log_last_stable_offset(e.log), hw);
    env_fini(&e);
}

int main(void) {
    unit_seed("cleaner");
    st_log_set_level(getenv("STRATA_TEST_LOG") ? ST_LOG_DEBUG : ST_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_latest_per_key),
        cmocka_unit_test(test_tombstones_and_incremental),
        cmocka_unit_test(test_compressed_batches),
        cmocka_unit_test(test_lag_ratio_and_keyless),
        cmocka_unit_test(test_max_compaction_lag),
        cmocka_unit_test(test_cancel_leaves_nothing),
        cmocka_unit_test(test_recovery_each_step),
        cmocka_unit_test(test_transactions),
        cmocka_unit_test(test_transaction_markers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

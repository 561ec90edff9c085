/*
 * test_records.c - unit tests of the records inside batches (broker/log/
 * batch.c, compress.c): produce-side validation of every record, the
 * errors Kafka gives for each defect, KIP-467 record errors, maxTimestamp
 * correction, decompression bombs of each codec held to their bound,
 * recompression between every pair of codecs, and the undefined behaviour
 * the fuzzer found (timestamp overflow, zero-length snappy).
 *
 * Batches are built byte by byte here, compressed with the codecs' own
 * libraries, so the library is checked against the format and not against
 * itself.
 */
#include "unit.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "batch.h"

enum { TC_NONE = 0, TC_GZIP = 1, TC_SNAPPY = 2, TC_LZ4 = 3, TC_ZSTD = 4, TC_SNAPPY_XERIAL = 12 };
static const int codecs[] = {TC_NONE, TC_GZIP, TC_SNAPPY, TC_SNAPPY_XERIAL, TC_LZ4, TC_ZSTD};

/* ---- building -------------------------------------------------------------- */

/* One record; fields are written as given, so tests can lie in any of them. */
typedef struct rspec {
    int64_t ts_delta, off_delta;
    int64_t key_len; /* written as is; key bytes follow when > 0 */
    const char *key;
    int64_t value_len;
    const char *value;
    int64_t nheaders;
    int64_t hkey_len; /* of every header */
    int64_t hval_len;
    int extra;  /* junk bytes after the headers */
    int64_t len_adjust; /* added to the record's length prefix */
} rspec_t;

static rspec_t rec_kv(const char *k, const char *v, int64_t index) {
    rspec_t r = {0, index, k ? (int64_t)strlen(k) : -1, k, v ? (int64_t)strlen(v) : -1, v, 0, 0, 0, 0, 0};
    return r;
}

static void put_record(st_buf_t *out, const rspec_t *r) {
    st_buf_t body;
    st_buf_init(&body);
    st_buf_put_i8(&body, 0);
    st_buf_put_varint(&body, r->ts_delta);
    st_buf_put_varint(&body, r->off_delta);
    st_buf_put_varint(&body, r->key_len);
    if (r->key_len > 0 && r->key) st_buf_put(&body, r->key, strlen(r->key));
    st_buf_put_varint(&body, r->value_len);
    if (r->value_len > 0 && r->value) st_buf_put(&body, r->value, strlen(r->value));
    st_buf_put_varint(&body, r->nheaders);
    for (int64_t h = 0; h < r->nheaders && h < 100; h++) {
        st_buf_put_varint(&body, r->hkey_len);
        for (int64_t i = 0; i < r->hkey_len && i < 64; i++) st_buf_put_i8(&body, 'h');
        st_buf_put_varint(&body, r->hval_len);
        for (int64_t i = 0; i < r->hval_len && i < 64; i++) st_buf_put_i8(&body, 'v');
    }
    for (int i = 0; i < r->extra; i++) st_buf_put_i8(&body, 'x');
    st_buf_put_varint(out, (int64_t)body.len + r->len_adjust);
    st_buf_put(out, body.data, body.len);
    st_buf_fini(&body);
}

static void pack(int codec, const uint8_t *p, size_t n, st_buf_t *out) {
    switch (codec) {
    case TC_NONE: st_buf_put(out, p, n); return;
    case TC_GZIP: {
        z_stream z;
        memset(&z, 0, sizeof z);
        assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
        uLong bound = deflateBound(&z, (uLong)n) + 64;
        uint8_t *dst = st_buf_extend(out, bound);
        z.next_in = (Bytef *)(uintptr_t)p;
        z.avail_in = (uInt)n;
        z.next_out = dst;
        z.avail_out = (uInt)bound;
        assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
        out->len -= z.avail_out;
        deflateEnd(&z);
        return;
    }
    case TC_SNAPPY: {
        size_t bound = snappy_max_compressed_length(n);
        uint8_t *dst = st_buf_extend(out, bound);
        assert_int_equal(snappy_compress((const char *)p, n, (char *)dst, &bound), SNAPPY_OK);
        out->len -= snappy_max_compressed_length(n) - bound;
        return;
    }
    case TC_SNAPPY_XERIAL: {
        static const uint8_t magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
        st_buf_put(out, magic, 8);
        st_buf_put_i32(out, 1);
        st_buf_put_i32(out, 1);
        for (size_t pos = 0; pos < n;) {
            size_t chunk = ST_MIN(n - pos, (size_t)32768), bound = snappy_max_compressed_length(chunk);
            size_t at = out->len;
            st_buf_extend(out, 4 + bound);
            assert_int_equal(snappy_compress((const char *)p + pos, chunk, (char *)out->data + at + 4, &bound),
                             SNAPPY_OK);
            st_be32_put(out->data + at, (uint32_t)bound);
            out->len = at + 4 + bound;
            pos += chunk;
        }
        return;
    }
    case TC_LZ4: {
        size_t bound = LZ4F_compressFrameBound(n, NULL);
        uint8_t *dst = st_buf_extend(out, bound);
        size_t rc = LZ4F_compressFrame(dst, bound, p, n, NULL);
        assert_false(LZ4F_isError(rc));
        out->len -= bound - rc;
        return;
    }
    case TC_ZSTD: {
        size_t bound = ZSTD_compressBound(n);
        uint8_t *dst = st_buf_extend(out, bound);
        size_t rc = ZSTD_compress(dst, bound, p, n, 3);
        assert_false(ZSTD_isError(rc));
        out->len -= bound - rc;
        return;
    }
    default: fail();
    }
}

typedef struct bspec {
    int codec; /* TC_* */
    int32_t count;   /* 0: the number of records given */
    int64_t base_ts, max_ts;
    int16_t attrs;   /* ORed into the attributes */
    int64_t producer_id;
    int32_t base_sequence;
} bspec_t;

/* A whole batch from a records section (already compressed or not). */
static void put_batch_raw(st_buf_t *out, const bspec_t *s, int32_t count, const uint8_t *section,
                          size_t n) {
    size_t start = out->len;
    uint8_t *h = st_buf_extend(out, ST_BATCH_HEADER_SIZE);
    memset(h, 0, ST_BATCH_HEADER_SIZE);
    st_buf_put(out, section, n);
    uint8_t *b = out->data + start;
    size_t size = out->len - start;
    int codec = s->codec == TC_SNAPPY_XERIAL ? TC_SNAPPY : s->codec;
    st_be32_put(b + ST_BATCH_LENGTH_OFFSET, (uint32_t)(size - 12));
    st_be32_put(b + ST_BATCH_EPOCH_OFFSET, (uint32_t)-1);
    b[ST_BATCH_MAGIC_OFFSET] = 2;
    st_be16_put(b + ST_BATCH_ATTR_OFFSET, (uint16_t)(codec | s->attrs));
    st_be32_put(b + ST_BATCH_LAST_DELTA_OFFSET, (uint32_t)(count - 1));
    st_be64_put(b + ST_BATCH_BASE_TS_OFFSET, (uint64_t)s->base_ts);
    st_be64_put(b + ST_BATCH_MAX_TS_OFFSET, (uint64_t)s->max_ts);
    st_be64_put(b + ST_BATCH_PRODUCER_ID_OFFSET, (uint64_t)(s->producer_id ? s->producer_id : -1));
    st_be16_put(b + ST_BATCH_PRODUCER_EPOCH_OFFSET, (uint16_t)-1);
    st_be32_put(b + ST_BATCH_BASE_SEQUENCE_OFFSET, (uint32_t)(s->base_sequence ? s->base_sequence : -1));
    st_be32_put(b + ST_BATCH_COUNT_OFFSET, (uint32_t)count);
    st_be32_put(b + ST_BATCH_CRC_OFFSET, st_crc32c(0, b + ST_BATCH_ATTR_OFFSET, size - ST_BATCH_ATTR_OFFSET));
}

static void put_batch(st_buf_t *out, const bspec_t *s, const rspec_t *recs, int n) {
    st_buf_t plain, packed;
    st_buf_init(&plain);
    st_buf_init(&packed);
    for (int i = 0; i < n; i++) put_record(&plain, &recs[i]);
    pack(s->codec, plain.data, plain.len, &packed);
    put_batch_raw(out, s, s->count ? s->count : n, packed.data, packed.len);
    st_buf_fini(&plain);
    st_buf_fini(&packed);
}

static const int64_t NOW = 1700000000000;

static st_batch_limits_t limits(void) {
    st_batch_limits_t l = {.max_message_bytes = 1 << 20, .ts_before_max_ms = INT64_MAX,
                           .ts_after_max_ms = INT64_MAX, .max_inflated_bytes = 64 << 20};
    return l;
}

/* Validate and keep the verdict's reason and record errors for checks. */
typedef struct result {
    st_err_t e;
    char why[384];
    int nerr;
    int64_t total;
    int32_t idx[8];
    char msg[8][200];
    int nbatches;
} result_t;

static result_t check(st_buf_t *b, const st_batch_limits_t *lim) {
    result_t r;
    memset(&r, 0, sizeof r);
    st_batch_verdict_t v;
    st_batch_verdict_init(&v);
    r.e = st_batches_validate(b->data, b->len, lim, NOW, &v);
    snprintf(r.why, sizeof r.why, "%s", v.why);
    r.nerr = v.nrecord_errors;
    r.total = v.record_errors_total;
    r.nbatches = v.nbatches;
    for (int i = 0; i < v.nrecord_errors && i < 8; i++) {
        r.idx[i] = v.record_errors[i].index;
        snprintf(r.msg[i], sizeof r.msg[i], "%s", v.record_errors[i].message);
    }
    st_batch_verdict_fini(&v);
    return r;
}

#define EXPECT(res, err, text)                                                                     \
    do {                                                                                           \
        result_t r_ = (res);                                                                       \
        if (r_.e != (err) || !strstr(r_.why, (text)))                                              \
            fail_msg("%s:%d: got %s '%s', want %s with '%s'", __FILE__, __LINE__, st_err_name(r_.e), \
                     r_.why, st_err_name(err), (text));                                            \
    } while (0)

/* ---- item 11: every record is checked -------------------------------------- */

static void test_record_defects(void **state) {
    (void)state;
    st_batch_limits_t lim = limits();
    struct {
        const char *what;
        rspec_t r;
        const char *want;
    } cases[] = {
        {"key past the end", {0, 0, 50, "k", 1, "v", 0, 0, 0, 0, 0}, "key length of 50 bytes runs past"},
        {"value past the end", {0, 0, 1, "k", 90, "v", 0, 0, 0, 0, 0}, "value length of 90 bytes runs past"},
        {"negative key length", {0, 0, -5, NULL, 1, "v", 0, 0, 0, 0, 0}, "key length is negative (-5)"},
        {"negative value length", {0, 0, 1, "k", -3, NULL, 0, 0, 0, 0, 0}, "value length is negative (-3)"},
        {"negative header count", {0, 0, 1, "k", 1, "v", -2, 0, 0, 0, 0}, "header count is negative"},
        {"header count past the end", {0, 0, 1, "k", 1, "v", 1000, 0, 0, 0, 0}, "header count 1000 exceeds"},
        {"negative header key", {0, 0, 1, "k", 1, "v", 1, -4, -1, 0, 0}, "header key length is negative"},
        {"header value past the end", {0, 0, 1, "k", 1, "v", 1, 1, 70, 0, 0}, "header value length of 70"},
        {"negative header value", {0, 0, 1, "k", 1, "v", 1, 1, -7, 0, 0}, "header value length is negative"},
        {"bytes after the headers", {0, 0, 1, "k", 1, "v", 0, 0, 0, 3, 0}, "fields end after"},
        {"length past the batch", {0, 0, 1, "k", 1, "v", 0, 0, 0, 0, 1000}, "claims"},
        {"negative length", {0, 0, 1, "k", 1, "v", 0, 0, 0, 0, -1000}, "length is not valid"},
        {"offset delta 7", {0, 7, 1, "k", 1, "v", 0, 0, 0, 0, 0}, "offset delta is 7"},
        {"negative offset delta", {0, -1, 1, "k", 1, "v", 0, 0, 0, 0, 0}, "offset delta is -1"},
    };
    for (size_t c = 0; c < ST_ARRAY_SIZE(codecs); c++) {
        for (size_t k = 0; k < ST_ARRAY_SIZE(cases); k++) {
            /* the bad record second, after a good one */
            rspec_t recs[2] = {rec_kv("a", "b", 0), cases[k].r};
            if (recs[1].off_delta == 0) recs[1].off_delta = 1;
            if (!strcmp(cases[k].what, "offset delta 7")) recs[1].off_delta = 7;
            st_buf_t b;
            st_buf_init(&b);
            bspec_t s = {codecs[c], 0, NOW, NOW, 0, 0, 0};
            put_batch(&b, &s, recs, 2);
            result_t r = check(&b, &lim);
            /* inflated records have no known end up front: a length past
             * it shows as fields that end early */
            const char *want = cases[k].want;
            if (codecs[c] != TC_NONE && !strcmp(cases[k].what, "length past the batch")) want = "fields end after";
            if (r.e != ST_E_INVALID_RECORD || !strstr(r.why, want) || !strstr(r.why, "record 1"))
                fail_msg("%s, codec %d: %s '%s'", cases[k].what, codecs[c], st_err_name(r.e), r.why);
            /* the record at fault is listed */
            assert_int_equal(r.nerr, 1);
            assert_int_equal(r.idx[0], 1);
            st_buf_fini(&b);
        }
    }
}

static void test_record_count_and_end(void **state) {
    (void)state;
    st_batch_limits_t lim = limits();
    rspec_t recs[3] = {rec_kv("a", "1", 0), rec_kv("b", "2", 1), rec_kv("c", "3", 2)};
    for (size_t c = 0; c < ST_ARRAY_SIZE(codecs); c++) {
        st_buf_t b;
        st_buf_init(&b);
        bspec_t s = {codecs[c], 4, NOW, NOW, 0, 0, 0}; /* says 4, holds 3 */
        put_batch(&b, &s, recs, 3);
        EXPECT(check(&b, &lim), ST_E_INVALID_RECORD, "holds 3 records, its header says 4");
        b.len = 0;
        s.count = 2; /* says 2, holds 3 */
        put_batch(&b, &s, recs, 3);
        EXPECT(check(&b, &lim), ST_E_INVALID_RECORD, "bytes after the batch's 2 records");
        b.len = 0;
        s.count = 0;
        put_batch(&b, &s, recs, 3);
        result_t r = check(&b, &lim);
        assert_int_equal(r.e, ST_OK);
        assert_int_equal(r.nbatches, 1);
        st_buf_fini(&b);
    }
}

/* A compressed section that does not decode, cut anywhere, or holds
 * garbage: CORRUPT_MESSAGE (or INVALID_RECORD when what decodes is
 * records gone wrong), never a crash, never accepted. */
static void test_undecodable_payloads(void **state) {
    (void)state;
    st_batch_limits_t lim = limits();
    rspec_t recs[40];
    char vals[40][64];
    for (int i = 0; i < 40; i++) {
        snprintf(vals[i], sizeof vals[i], "value-%d-%040d", i, i);
        recs[i] = rec_kv("key", vals[i], i);
    }
    for (size_t c = 1; c < ST_ARRAY_SIZE(codecs); c++) {
        st_buf_t plain, packed;
        st_buf_init(&plain);
        st_buf_init(&packed);
        for (int i = 0; i < 40; i++) put_record(&plain, &recs[i]);
        pack(codecs[c], plain.data, plain.len, &packed);
        bspec_t s = {codecs[c], 0, NOW, NOW, 0, 0, 0};
        for (size_t cut = 0; cut < packed.len; cut += 1 + packed.len / 97) {
            st_buf_t b;
            st_buf_init(&b);
            put_batch_raw(&b, &s, 40, packed.data, cut);
            result_t r = check(&b, &lim);
            if (r.e != ST_E_CORRUPT_MESSAGE && r.e != ST_E_INVALID_RECORD)
                fail_msg("codec %d cut at %zu of %zu: %s '%s'", codecs[c], cut, packed.len,
                         st_err_name(r.e), r.why);
            st_buf_fini(&b);
        }
        /* garbage after a valid beginning */
        uint8_t *g = st_malloc(packed.len);
        memcpy(g, packed.data, packed.len);
        for (size_t i = packed.len / 3; i < packed.len; i++) g[i] = (uint8_t)(i * 131 + 7);
        st_buf_t b;
        st_buf_init(&b);
        put_batch_raw(&b, &s, 40, g, packed.len);
        result_t r = check(&b, &lim);
        if (r.e != ST_E_CORRUPT_MESSAGE && r.e != ST_E_INVALID_RECORD)
            fail_msg("codec %d garbage: %s '%s'", codecs[c], st_err_name(r.e), r.why);
        if (r.e == ST_E_CORRUPT_MESSAGE) assert_non_null(strstr(r.why, "does not decompress"));
        free(g);
        st_buf_fini(&b);
        st_buf_fini(&plain);
        st_buf_fini(&packed);
    }
}

/* ---- item 12: decompression bombs ------------------------------------------- */

/* n records of size zero bytes each: inflates to about n * size. */
static void zero_records(st_buf_t *plain, int n, size_t size) {
    char *v = st_malloc(size + 1);
    memset(v, '0', size);
    v[size] = 0;
    for (int i = 0; i < n; i++) {
        rspec_t r = rec_kv("k", v, i);
        put_record(plain, &r);
    }
    free(v);
}

static void test_bombs_every_codec(void **state) {
    (void)state;
    st_buf_t plain;
    st_buf_init(&plain);
    zero_records(&plain, 64, 256 * 1024); /* 16 MiB inflated */
    for (size_t c = 1; c < ST_ARRAY_SIZE(codecs); c++) {
        st_buf_t packed, b;
        st_buf_init(&packed);
        st_buf_init(&b);
        pack(codecs[c], plain.data, plain.len, &packed);
        bspec_t s = {codecs[c], 0, NOW, NOW, 0, 0, 0};
        put_batch_raw(&b, &s, 64, packed.data, packed.len);
        /* within the bound: accepted, and the walk saw it all */
        st_batch_limits_t lim = limits();
        lim.max_inflated_bytes = 32 << 20;
        st_batch_verdict_t v;
        st_batch_verdict_init(&v);
        assert_int_equal(st_batches_validate(b.data, b.len, &lim, NOW, &v), ST_OK);
        assert_true(v.inflated_bytes == (int64_t)plain.len);
        st_batch_verdict_fini(&v);
        /* past it: MESSAGE_TOO_LARGE while inflating, having inflated no
         * more than the bound (and a window) */
        lim.max_inflated_bytes = 1 << 20;
        st_batch_verdict_init(&v);
        st_err_t e = st_batches_validate(b.data, b.len, &lim, NOW, &v);
        if (e != ST_E_MESSAGE_TOO_LARGE || !strstr(v.why, "inflate to more than 1048576"))
            fail_msg("codec %d (%zu bytes): %s '%s'", codecs[c], packed.len, st_err_name(e), v.why);
        st_batch_verdict_fini(&v);
        /* stored batches have their own bound: still readable */
        int n = 0;
        st_buf_t out;
        st_buf_init(&out);
        assert_int_equal(st_batch_decompress(b.data, (int32_t)b.len, &out), ST_OK);
        assert_int_equal(out.len, plain.len);
        st_buf_fini(&out);
        (void)n;
        st_buf_fini(&packed);
        st_buf_fini(&b);
    }
    st_buf_fini(&plain);
}

/* One bound for all the batches of a records blob: many small bombs add up. */
static void test_bomb_budget_across_batches(void **state) {
    (void)state;
    st_buf_t plain, packed, b;
    st_buf_init(&plain);
    st_buf_init(&packed);
    st_buf_init(&b);
    zero_records(&plain, 4, 100 * 1024); /* 400 KiB each */
    pack(TC_ZSTD, plain.data, plain.len, &packed);
    bspec_t s = {TC_ZSTD, 0, NOW, NOW, 0, 0, 0};
    for (int i = 0; i < 4; i++) put_batch_raw(&b, &s, 4, packed.data, packed.len);
    st_batch_limits_t lim = limits();
    lim.max_inflated_bytes = 1 << 20; /* one fits, four do not */
    EXPECT(check(&b, &lim), ST_E_MESSAGE_TOO_LARGE, "batch 2");
    st_buf_fini(&plain);
    st_buf_fini(&packed);
    st_buf_fini(&b);
}

/* Snappy blocks cannot be streamed: one that claims more than its bound,
 * or more than snappy can encode in its bytes, is refused before a byte
 * is allocated for it. */
static void test_snappy_claims(void **state) {
    (void)state;
    st_batch_limits_t lim = limits();
    lim.max_inflated_bytes = 1 << 20;
    /* a raw block whose length header says 1 GiB */
    uint8_t blk[16] = {0x80, 0x80, 0x80, 0x80, 0x04, 0x00};
    st_buf_t b;
    st_buf_init(&b);
    bspec_t s = {TC_SNAPPY, 0, NOW, NOW, 0, 0, 0};
    put_batch_raw(&b, &s, 1, blk, sizeof blk);
    EXPECT(check(&b, &lim), ST_E_CORRUPT_MESSAGE, "claims more bytes than snappy can encode");
    /* a legitimate 2 MiB block over a 1 MiB bound */
    st_buf_t plain, packed;
    st_buf_init(&plain);
    st_buf_init(&packed);
    zero_records(&plain, 8, 256 * 1024);
    pack(TC_SNAPPY, plain.data, plain.len, &packed);
    b.len = 0;
    put_batch_raw(&b, &s, 8, packed.data, packed.len);
    EXPECT(check(&b, &lim), ST_E_MESSAGE_TOO_LARGE, "inflate to more than");
    st_buf_fini(&plain);
    st_buf_fini(&packed);
    st_buf_fini(&b);
}

/* A zstd frame that asks for a 128 MiB window is refused (the decoder
 * would allocate it); one-shot frames of any level shrink theirs. */
static void test_zstd_window_bound(void **state) {
    (void)state;
    st_buf_t plain;
    st_buf_init(&plain);
    rspec_t r = rec_kv("k", "a value", 0);
    put_record(&plain, &r);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 27);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
    uint8_t out[4096];
    ZSTD_outBuffer ob = {out, sizeof out, 0};
    ZSTD_inBuffer ib = {plain.data, plain.len, 0};
    assert_false(ZSTD_isError(ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_continue)));
    ZSTD_inBuffer none = {NULL, 0, 0};
    assert_int_equal(ZSTD_compressStream2(cc, &ob, &none, ZSTD_e_end), 0);
    ZSTD_freeCCtx(cc);
    st_buf_t b;
    st_buf_init(&b);
    bspec_t s = {TC_ZSTD, 0, NOW, NOW, 0, 0, 0};
    put_batch_raw(&b, &s, 1, out, ob.pos);
    st_batch_limits_t lim = limits();
    EXPECT(check(&b, &lim), ST_E_CORRUPT_MESSAGE, "window larger than 16 MiB");
    /* level 22 in one shot: fine */
    b.len = 0;
    st_buf_t packed;
    st_buf_init(&packed);
    size_t bound = ZSTD_compressBound(plain.len);
    uint8_t *dst = st_buf_extend(&packed, bound);
    packed.len = ZSTD_compress(dst, bound, plain.data, plain.len, 22);
    put_batch_raw(&b, &s, 1, packed.data, packed.len);
    assert_int_equal(check(&b, &lim).e, ST_OK);
    st_buf_fini(&packed);
    st_buf_fini(&b);
    st_buf_fini(&plain);
}

/* ---- item 7: record errors (KIP-467) ------------------------------------------ */

static void test_record_errors_compacted(void **state) {
    (void)state;
    st_batch_limits_t lim = limits();
    lim.compact = 1;
    rspec_t recs[5] = {rec_kv("k0", "v", 0), rec_kv(NULL, "v", 1), rec_kv("k2", "v", 2),
                       rec_kv(NULL, "v", 3), rec_kv("", "empty key is a key", 4)};
    for (size_t c = 0; c < ST_ARRAY_SIZE(codecs); c++) {
        st_buf_t b;
        st_buf_init(&b);
        bspec_t s = {codecs[c], 0, NOW, NOW, 0, 0, 0};
        put_batch(&b, &s, recs, 5);
        result_t r = check(&b, &lim);
        assert_int_equal(r.e, ST_E_INVALID_RECORD);
        assert_int_equal(r.nerr, 2);
        assert_int_equal(r.idx[0], 1);
        assert_int_equal(r.idx[1], 3);
        assert_non_null(strstr(r.msg[0], "no key"));
        assert_non_null(strstr(r.why, "2 of its 5 records"));
        st_buf_fini(&b);
    }
    /* the listing stops at ST_BATCH_MAX_RECORD_ERRORS; the count goes on */
    st_buf_t plain, b;
    st_buf_init(&plain);
    st_buf_init(&b);
    int n = ST_BATCH_MAX_RECORD_ERRORS + 500;
    for (int i = 0; i < n; i++) {
        rspec_t r = rec_kv(NULL, "v", i);
        put_record(&plain, &r);
    }
    bspec_t s = {TC_ZSTD, 0, NOW, NOW, 0, 0, 0};
    st_buf_t packed;
    st_buf_init(&packed);
    pack(TC_ZSTD, plain.data, plain.len, &packed);
    put_batch_raw(&b, &s, n, packed.data, packed.len);
    st_batch_verdict_t v;
    st_batch_verdict_init(&v);
    assert_int_equal(st_batches_validate(b.data, b.len, &lim, NOW, &v), ST_E_INVALID_RECORD);
    assert_int_equal(v.nrecord_errors, ST_BATCH_MAX_RECORD_ERRORS);
    assert_true(v.record_errors_total == n);
    assert_int_equal(v.record_errors[ST_BATCH_MAX_RECORD_ERRORS - 1].index, ST_BATCH_MAX_RECORD_ERRORS - 1);
    st_batch_verdict_fini(&v);
    st_buf_fini(&packed);
    st_buf_fini(&plain);
    st_buf_fini(&b);
}

static void test_record_errors_timestamps(void **state) {
    (void)state;
    st_batch_limits_t lim = limits();
    lim.ts_before_max_ms = 60000;
    lim.ts_after_max_ms = 3600000;
    lim.compact = 1;
    rspec_t recs[4] = {rec_kv("a", "v", 0), rec_kv("b", "v", 1), rec_kv(NULL, "v", 2), rec_kv("d", "v", 3)};
    recs[1].ts_delta = -61000;  /* too old */
    recs[3].ts_delta = 3600001; /* too far ahead */
    st_buf_t b;
    st_buf_init(&b);
    bspec_t s = {TC_LZ4, 0, NOW, NOW, 0, 0, 0};
    put_batch(&b, &s, recs, 4);
    result_t r = check(&b, &lim);
    /* any bad timestamp makes it INVALID_TIMESTAMP (processRecordErrors) */
    assert_int_equal(r.e, ST_E_INVALID_TIMESTAMP);
    assert_int_equal(r.nerr, 3);
    assert_int_equal(r.idx[0], 1);
    assert_int_equal(r.idx[1], 2);
    assert_int_equal(r.idx[2], 3);
    assert_non_null(strstr(r.msg[0], "out of range"));
    /* -1 (no timestamp) is never out of range */
    rspec_t none[1] = {rec_kv("a", "v", 0)};
    b.len = 0;
    bspec_t s2 = {TC_NONE, 0, -1, -1, 0, 0, 0};
    put_batch(&b, &s2, none, 1);
    assert_int_equal(check(&b, &lim).e, ST_OK);
    st_buf_fini(&b);
}

/* ---- item 4: maxTimestamp from the records -------------------------------------- */

static void test_max_timestamp_corrected(void **state) {
    (void)state;
    st_batch_limits_t lim = limits();
    for (size_t c = 0; c < ST_ARRAY_SIZE(codecs); c++) {
        rspec_t recs[3] = {rec_kv("a", "1", 0), rec_kv("b", "2", 1), rec_kv("c", "3", 2)};
        recs[1].ts_delta = 5000;
        recs[2].ts_delta = 2000;
        st_buf_t b;
        st_buf_init(&b);
        bspec_t s = {codecs[c], 0, NOW, -1, 0, 0, 0}; /* Sarama's -1 */
        put_batch(&b, &s, recs, 3);
        st_batch_verdict_t v;
        st_batch_verdict_init(&v);
        assert_int_equal(st_batches_validate(b.data, b.len, &lim, NOW, &v), ST_OK);
        assert_int_equal(v.rebuilt.len, 0); /* corrected in place */
        st_batch_info_t info;
        assert_int_equal(st_batch_header(b.data, b.len, &info), ST_OK);
        assert_true(info.max_timestamp == NOW + 5000);
        assert_true(info.base_timestamp == NOW);
        assert_true(st_batch_crc_ok(b.data, info.size));
        /* a header already right is left alone */
        uint32_t crc = st_be32_get(b.data + ST_BATCH_CRC_OFFSET);
        assert_int_equal(st_batches_validate(b.data, b.len, &lim, NOW, &v), ST_OK);
        assert_int_equal(st_be32_get(b.data + ST_BATCH_CRC_OFFSET), crc);
        /* a LogAppendTime topic stamps on append: untouched here */
        b.len = 0;
        put_batch(&b, &s, recs, 3);
        st_batch_limits_t lat = lim;
        lat.log_append_time = 1;
        assert_int_equal(st_batches_validate(b.data, b.len, &lat, NOW, &v), ST_OK);
        assert_int_equal(st_batch_header(b.data, b.len, &info), ST_OK);
        assert_true(info.max_timestamp == -1);
        st_batch_verdict_fini(&v);
        st_buf_fini(&b);
    }
}

/* ---- item 13: batches clients may not send ---------------------------------------- */

static void test_batch_kinds(void **state) {
    (void)state;
    st_batch_limits_t lim = limits();
    rspec_t r[1] = {rec_kv("a", "v", 0)};
    st_buf_t b;
    st_buf_init(&b);
    bspec_t control = {TC_NONE, 0, NOW, NOW, ST_ATTR_CONTROL, 0, 0};
    put_batch(&b, &control, r, 1);
    EXPECT(check(&b, &lim), ST_E_INVALID_RECORD, "control batches");
    b.len = 0;
    bspec_t noseq = {TC_NONE, 0, NOW, NOW, 0, 7, -1};
    put_batch(&b, &noseq, r, 1);
    EXPECT(check(&b, &lim), ST_E_INVALID_RECORD, "invalid sequence number -1 for producer id 7");
    b.len = 0;
    bspec_t idem = {TC_ZSTD, 0, NOW, NOW, 0, 7, 5}; /* idempotent: fine */
    put_batch(&b, &idem, r, 1);
    assert_int_equal(check(&b, &lim).e, ST_OK);
    /* zstd needs Produce v7 */
    st_batch_limits_t old = lim;
    old.no_zstd = 1;
    EXPECT(check(&b, &old), ST_E_UNSUPPORTED_COMPRESSION_TYPE, "version 7");
    st_buf_fini(&b);
}

/* ---- item 8: recompression -------------------------------------------------------- */

typedef struct got {
    int n;
    int64_t offset[64], ts[64];
    char value[64][32];
} got_t;

static int got_cb(const st_record_t *r, void *arg) {
    got_t *g = arg;
    if (g->n >= 64) return 1;
    g->offset[g->n] = r->offset;
    g->ts[g->n] = r->timestamp;
    snprintf(g->value[g->n], sizeof g->value[g->n], "%.*s", r->value_len > 0 ? r->value_len : 0,
             r->value ? (const char *)r->value : "");
    g->n++;
    return 0;
}

static void test_recompress_every_pair(void **state) {
    (void)state;
    rspec_t recs[20];
    char vals[20][32];
    for (int i = 0; i < 20; i++) {
        snprintf(vals[i], sizeof vals[i], "value %d %s", i, "repeat repeat repeat");
        recs[i] = rec_kv("key", vals[i], i);
        recs[i].ts_delta = i * 10;
    }
    for (size_t c = 0; c < ST_ARRAY_SIZE(codecs); c++) {
        for (int t = ST_TARGET_UNCOMPRESSED; t <= ST_TARGET_ZSTD; t++) {
            st_buf_t b;
            st_buf_init(&b);
            bspec_t s = {codecs[c], 0, NOW, -1, 0, 42, 3};
            put_batch(&b, &s, recs, 20);
            st_batch_limits_t lim = limits();
            lim.target = (st_batch_target_t)t;
            st_batch_verdict_t v;
            st_batch_verdict_init(&v);
            assert_int_equal(st_batches_validate(b.data, b.len, &lim, NOW, &v), ST_OK);
            int src = codecs[c] == TC_SNAPPY_XERIAL ? TC_SNAPPY : codecs[c];
            const uint8_t *out = v.rebuilt.len ? v.rebuilt.data : b.data;
            size_t len = v.rebuilt.len ? v.rebuilt.len : b.len;
            assert_int_equal(v.recompress, src != t - 1);
            st_batch_info_t info;
            assert_int_equal(st_batch_header(out, len, &info), ST_OK);
            assert_int_equal((size_t)info.size, len);
            assert_int_equal(info.attributes & ST_ATTR_CODEC_MASK, t - 1);
            assert_true(st_batch_crc_ok(out, info.size));
            assert_true(info.max_timestamp == NOW + 190);
            assert_true(info.producer_id == 42);
            assert_int_equal(info.base_sequence, 3);
            assert_int_equal(info.record_count, 20);
            got_t *g = st_calloc(1, sizeof *g);
            assert_int_equal(st_batch_foreach_record(out, info.size, got_cb, g), ST_OK);
            assert_int_equal(g->n, 20);
            for (int i = 0; i < 20; i++) {
                assert_string_equal(g->value[i], vals[i]);
                assert_true(g->ts[i] == NOW + i * 10);
            }
            /* and it passes validation itself */
            st_batch_verdict_t v2;
            st_batch_verdict_init(&v2);
            st_buf_t copy;
            st_buf_init(&copy);
            st_buf_put(&copy, out, len);
            assert_int_equal(st_batches_validate(copy.data, copy.len, &lim, NOW, &v2), ST_OK);
            assert_int_equal(v2.recompress, 0);
            st_batch_verdict_fini(&v2);
            st_buf_fini(&copy);
            free(g);
            st_batch_verdict_fini(&v);
            st_buf_fini(&b);
        }
    }
}

/* Rebuilt in a codec that compresses less, the batch may exceed
 * max.message.bytes: MESSAGE_TOO_LARGE (Kafka re-checks the size). */
static void test_recompress_too_large(void **state) {
    (void)state;
    st_buf_t plain, packed, b;
    st_buf_init(&plain);
    st_buf_init(&packed);
    st_buf_init(&b);
    zero_records(&plain, 10, 20000); /* 200 KB of zeros: tiny in zstd */
    pack(TC_ZSTD, plain.data, plain.len, &packed);
    bspec_t s = {TC_ZSTD, 0, NOW, NOW, 0, 0, 0};
    put_batch_raw(&b, &s, 10, packed.data, packed.len);
    st_batch_limits_t lim = limits();
    lim.max_message_bytes = 100000;
    lim.target = ST_TARGET_UNCOMPRESSED;
    EXPECT(check(&b, &lim), ST_E_MESSAGE_TOO_LARGE, "rebuilt in the topic's codec exceeds max.message.bytes");
    lim.target = ST_TARGET_GZIP;
    assert_int_equal(check(&b, &lim).e, ST_OK);
    st_buf_fini(&plain);
    st_buf_fini(&packed);
    st_buf_fini(&b);
}

/* ---- item 16: undefined behaviour the fuzzer found ------------------------------- */

static int count_cb(const st_record_t *r, void *arg) {
    (void)r;
    (*(int *)arg)++;
    return 0;
}

/* baseTimestamp + timestampDelta overflowed int64 (signed overflow); now
 * refused on produce and reported corrupt when read back. */
static void test_timestamp_overflow(void **state) {
    (void)state;
    rspec_t r[1] = {rec_kv("a", "v", 0)};
    r[0].ts_delta = INT64_MAX;
    st_buf_t b;
    st_buf_init(&b);
    bspec_t s = {TC_NONE, 0, INT64_MAX - 5, INT64_MAX, 0, 0, 0};
    put_batch(&b, &s, r, 1);
    int n = 0;
    assert_int_equal(st_batch_foreach_record(b.data, (int32_t)b.len, count_cb, &n), ST_E_CORRUPT);
    st_batch_limits_t lim = limits();
    EXPECT(check(&b, &lim), ST_E_INVALID_RECORD, "overflows the base timestamp");
    int64_t off, ts;
    assert_int_equal(st_batch_first_at_time(b.data, (int32_t)b.len, 0, 0, &off, &ts), 0);
    /* the other way */
    b.len = 0;
    r[0].ts_delta = INT64_MIN;
    bspec_t s2 = {TC_NONE, 0, -10, -1, 0, 0, 0};
    put_batch(&b, &s2, r, 1);
    assert_int_equal(st_batch_foreach_record(b.data, (int32_t)b.len, count_cb, &n), ST_E_CORRUPT);
    st_buf_fini(&b);
}

/* A snappy block holding zero bytes made the decompressor add 0 to a NULL
 * buffer; raw and xerial framings, on produce and when read back. */
static void test_zero_length_snappy(void **state) {
    (void)state;
    static const uint8_t raw[] = {0x00};
    static const uint8_t xerial[] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
                                     0, 0, 0, 1, 0x00};
    const uint8_t *payloads[] = {raw, xerial};
    size_t lens[] = {sizeof raw, sizeof xerial};
    for (int k = 0; k < 2; k++) {
        st_buf_t b;
        st_buf_init(&b);
        bspec_t s = {TC_SNAPPY, 0, NOW, NOW, 0, 0, 0};
        put_batch_raw(&b, &s, 1, payloads[k], lens[k]);
        int n = 0;
        assert_int_equal(st_batch_foreach_record(b.data, (int32_t)b.len, count_cb, &n), ST_E_CORRUPT);
        assert_int_equal(n, 0);
        st_buf_t out;
        st_buf_init(&out);
        assert_int_equal(st_batch_decompress(b.data, (int32_t)b.len, &out), ST_OK);
        assert_int_equal(out.len, 0);
        st_buf_fini(&out);
        st_batch_limits_t lim = limits();
        EXPECT(check(&b, &lim), ST_E_INVALID_RECORD, "holds 0 records");
        st_buf_fini(&b);
    }
}

int main(void) {
    unit_seed("records");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_defects),
        cmocka_unit_test(test_record_count_and_end),
        cmocka_unit_test(test_undecodable_payloads),
        cmocka_unit_test(test_bombs_every_codec),
        cmocka_unit_test(test_bomb_budget_across_batches),
        cmocka_unit_test(test_snappy_claims),
        cmocka_unit_test(test_zstd_window_bound),
        cmocka_unit_test(test_record_errors_compacted),
        cmocka_unit_test(test_record_errors_timestamps),
        cmocka_unit_test(test_max_timestamp_corrected),
        cmocka_unit_test(test_batch_kinds),
        cmocka_unit_test(test_recompress_every_pair),
        cmocka_unit_test(test_recompress_too_large),
        cmocka_unit_test(test_timestamp_overflow),
        cmocka_unit_test(test_zero_length_snappy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_log.c - unit tests of broker/log: record batch v2 validation,
 * stamping and record iteration (plain and gzip/snappy/lz4/zstd), and the
 * partition log on disk: append and read back, segment rolls, indexes,
 * time lookups, DeleteRecords, retention, clean and unclean reopen, the
 * directory lock and the group-commit flusher.
 *
 * Batches are built here byte by byte from the format in batch.h, and
 * compressed with the codecs' own C libraries, so the library is checked
 * against the format and not against itself.  A model of what was appended
 * (each batch's stamped bytes, each record's offset and timestamp) is what
 * every read is compared with.
 *
 * Crashes are simulated by copying a log directory while its log is still
 * open (no clean-shutdown marker, indexes not yet written), then damaging
 * the copy.
 */
#include "unit.h"

#include <dirent.h>
#include <fcntl.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "log_int.h"

#define DAY_MS (24ll * 3600 * 1000)

/* ======================================================================
 * Building record batches v2
 * ==================================================================== */

/* Codecs as the attributes carry them, plus snappy in the xerial framing the
 * Java client uses. */
enum { TC_NONE = 0, TC_GZIP = 1, TC_SNAPPY = 2, TC_LZ4 = 3, TC_ZSTD = 4, TC_SNAPPY_XERIAL = 12 };

static const int all_codecs[] = {TC_NONE, TC_GZIP, TC_SNAPPY, TC_SNAPPY_XERIAL, TC_LZ4, TC_ZSTD};

typedef struct trec {
    const void *key;
    int32_t key_len; /* -1: null */
    const void *value;
    int32_t value_len; /* -1: null */
    int64_t ts;
    int nheaders; /* headers "h<i>" = "v<i>" */
} trec_t;

static void put_record(st_buf_t *out, const trec_t *r, int64_t base_ts, int index) {
    st_buf_t body;
    st_buf_init(&body);
    st_buf_put_i8(&body, 0);                   /* attributes */
    st_buf_put_varint(&body, r->ts - base_ts); /* timestampDelta */
    st_buf_put_varint(&body, index);           /* offsetDelta */
    st_buf_put_varint(&body, r->key_len);
    if (r->key_len > 0) st_buf_put(&body, r->key, (size_t)r->key_len);
    st_buf_put_varint(&body, r->value_len);
    if (r->value_len > 0) st_buf_put(&body, r->value, (size_t)r->value_len);
    st_buf_put_varint(&body, r->nheaders);
    for (int h = 0; h < r->nheaders; h++) {
        char k[16], v[16];
        int kl = snprintf(k, sizeof k, "h%d", h), vl = snprintf(v, sizeof v, "v%d", h);
        st_buf_put_varint(&body, kl);
        st_buf_put(&body, k, (size_t)kl);
        st_buf_put_varint(&body, vl);
        st_buf_put(&body, v, (size_t)vl);
    }
    st_buf_put_varint(out, (int64_t)body.len); /* length */
    st_buf_put(out, body.data, body.len);
    st_buf_fini(&body);
}

static void compress_into(int codec, const uint8_t *p, size_t n, st_buf_t *out) {
    switch (codec) {
    case TC_GZIP: {
        z_stream z;
        memset(&z, 0, sizeof z);
        assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
        size_t cap = deflateBound(&z, (uLong)n) + 32;
        uint8_t *dst = st_buf_extend(out, cap);
        z.next_in = (Bytef *)p;
        z.avail_in = (uInt)n;
        z.next_out = dst;
        z.avail_out = (uInt)cap;
        assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
        out->len -= z.avail_out;
        deflateEnd(&z);
        break;
    }
    case TC_SNAPPY: {
        size_t cap = snappy_max_compressed_length(n);
        char *dst = (char *)st_buf_extend(out, cap);
        size_t got = cap;
        assert_int_equal(snappy_compress((const char *)p, n, dst, &got), SNAPPY_OK);
        out->len -= cap - got;
        break;
    }
    case TC_SNAPPY_XERIAL: {
        /* magic, version 1, compatible version 1, then [int32 len][block]
         * blocks; two blocks when there is enough input */
        static const uint8_t magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
        st_buf_put(out, magic, 8);
        st_buf_put_i32(out, 1);
        st_buf_put_i32(out, 1);
        size_t half = n > 64 ? n / 2 : n;
        for (size_t at = 0; at < n || (n == 0 && at == 0);) {
            size_t part = ST_MIN(half, n - at);
            size_t cap = snappy_max_compressed_length(part);
            size_t lenpos = out->len;
            st_buf_put_i32(out, 0);
            char *dst = (char *)st_buf_extend(out, cap);
            size_t got = cap;
            assert_int_equal(snappy_compress((const char *)p + at, part, dst, &got), SNAPPY_OK);
            out->len -= cap - got;
            st_be32_put(out->data + lenpos, (uint32_t)got);
            at += part;
            if (!n) break;
        }
        break;
    }
    case TC_LZ4: {
        size_t cap = LZ4F_compressFrameBound(n, NULL);
        uint8_t *dst = st_buf_extend(out, cap);
        size_t got = LZ4F_compressFrame(dst, cap, p, n, NULL);
        assert_false(LZ4F_isError(got));
        out->len -= cap - got;
        break;
    }
    case TC_ZSTD: {
        size_t cap = ZSTD_compressBound(n);
        uint8_t *dst = st_buf_extend(out, cap);
        size_t got = ZSTD_compress(dst, cap, p, n, 3);
        assert_false(ZSTD_isError(got));
        out->len -= cap - got;
        break;
    }
    default: st_buf_put(out, p, n); break;
    }
}

/* Recompute the CRC of a batch after editing it. */
static void batch_fix_crc(uint8_t *b) {
    int32_t size = (int32_t)st_be32_get(b + ST_BATCH_LENGTH_OFFSET) + ST_BATCH_LOG_OVERHEAD;
    st_be32_put(b + ST_BATCH_CRC_OFFSET,
                st_crc32c(0, b + ST_BATCH_ATTR_OFFSET, (size_t)size - ST_BATCH_ATTR_OFFSET));
}

/* Append one batch of n records to out, as a non-idempotent producer sends
 * it (base offset 0, epoch -1, producer id -1).  Returns its size. */
static size_t build_batch(st_buf_t *out, const trec_t *recs, int n, int codec) {
    int64_t base_ts = recs[0].ts, max_ts = recs[0].ts;
    for (int i = 1; i < n; i++) max_ts = ST_MAX(max_ts, recs[i].ts);
    st_buf_t plain;
    st_buf_init(&plain);
    for (int i = 0; i < n; i++) put_record(&plain, &recs[i], base_ts, i);

    size_t start = out->len;
    st_buf_extend(out, ST_BATCH_HEADER_SIZE);
    compress_into(codec, plain.data, plain.len, out);
    st_buf_fini(&plain);

    uint8_t *b = out->data + start;
    size_t size = out->len - start;
    int attr_codec = codec == TC_SNAPPY_XERIAL ? TC_SNAPPY : codec;
    st_be64_put(b, 0);                                                 /* baseOffset */
    st_be32_put(b + ST_BATCH_LENGTH_OFFSET, (uint32_t)(size - 12));    /* batchLength */
    st_be32_put(b + ST_BATCH_EPOCH_OFFSET, (uint32_t)-1);              /* partitionLeaderEpoch */
    b[ST_BATCH_MAGIC_OFFSET] = 2;                                      /* magic */
    st_be16_put(b + ST_BATCH_ATTR_OFFSET, (uint16_t)attr_codec);       /* attributes */
    st_be32_put(b + ST_BATCH_LAST_DELTA_OFFSET, (uint32_t)(n - 1));    /* lastOffsetDelta */
    st_be64_put(b + ST_BATCH_BASE_TS_OFFSET, (uint64_t)base_ts);       /* baseTimestamp */
    st_be64_put(b + ST_BATCH_MAX_TS_OFFSET, (uint64_t)max_ts);         /* maxTimestamp */
    st_be64_put(b + 43, (uint64_t)-1);                                 /* producerId */
    st_be16_put(b + 51, (uint16_t)-1);                                 /* producerEpoch */
    st_be32_put(b + 53, (uint32_t)-1);                                 /* baseSequence */
    st_be32_put(b + ST_BATCH_COUNT_OFFSET, (uint32_t)n);               /* recordCount */
    batch_fix_crc(b);
    return size;
}

/* A batch of n records with distinct keys and values of about vlen bytes,
 * timestamps ts0, ts0 + dt, ... */
typedef struct tbatch {
    trec_t recs[64];
    char keys[64][24];
    char values[64][200];
} tbatch_t;

static size_t build_simple(st_buf_t *out, tbatch_t *tb, int n, int codec, int64_t ts0, int64_t dt,
                           int vlen, uint64_t label) {
    assert_true(n > 0 && n <= 64 && vlen < 190);
    for (int i = 0; i < n; i++) {
        int kl = snprintf(tb->keys[i], sizeof tb->keys[i], "key-%llu", (unsigned long long)label + (unsigned)i);
        int vl = snprintf(tb->values[i], sizeof tb->values[i], "value-%llu-", (unsigned long long)label + (unsigned)i);
        for (; vl < vlen; vl++) tb->values[i][vl] = (char)('a' + vl % 26);
        tb->values[i][vl] = 0;
        tb->recs[i] = (trec_t){tb->keys[i], kl, tb->values[i], vl, ts0 + dt * i, i % 3};
    }
    return build_batch(out, tb->recs, n, codec);
}

/* ======================================================================
 * Iterating records
 * ==================================================================== */

typedef struct seen {
    int n, stop_after;
    int64_t offset[2000], ts[2000];
    int32_t key_len[2000], value_len[2000], header_count[2000];
    uint8_t key[2000][24];
    uint8_t value[2000][64];
    int headers_ok;
} seen_t;

static int seen_cb(const st_record_t *r, void *arg) {
    seen_t *s = arg;
    assert_true(s->n < 2000);
    int i = s->n++;
    s->offset[i] = r->offset;
    s->ts[i] = r->timestamp;
    s->key_len[i] = r->key_len;
    s->value_len[i] = r->value_len;
    s->header_count[i] = r->header_count;
    if (r->key_len > 0) memcpy(s->key[i], r->key, (size_t)ST_MIN(r->key_len, 24));
    if (r->value_len > 0) memcpy(s->value[i], r->value, (size_t)ST_MIN(r->value_len, 64));
    /* headers: "h<j>" = "v<j>" as built */
    st_rd_t rd;
    st_rd_init(&rd, r->headers, r->headers_len);
    for (int j = 0; j < r->header_count; j++) {
        char want[16];
        int64_t kl = st_rd_varint(&rd);
        const uint8_t *k = st_rd_bytes(&rd, (size_t)(kl > 0 ? kl : 0));
        snprintf(want, sizeof want, "h%d", j);
        if (!k || kl != (int64_t)strlen(want) || memcmp(k, want, (size_t)kl)) s->headers_ok = 0;
        int64_t vl = st_rd_varint(&rd);
        const uint8_t *v = st_rd_bytes(&rd, (size_t)(vl > 0 ? vl : 0));
        snprintf(want, sizeof want, "v%d", j);
        if (!v || vl != (int64_t)strlen(want) || memcmp(v, want, (size_t)vl)) s->headers_ok = 0;
    }
    if (rd.err || st_rd_left(&rd)) s->headers_ok = 0;
    return s->stop_after && s->n >= s->stop_after;
}

static void test_batch_records_every_codec(void **state) {
    (void)state;
    static uint8_t big[1000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7);
    for (size_t c = 0; c < ST_ARRAY_SIZE(all_codecs); c++) {
        int codec = all_codecs[c];
        /* Keys and values of every shape: null, empty, binary, large. */
        trec_t recs[6] = {
            {"k0", 2, "hello", 5, 1700000000000, 0},
            {NULL, -1, "null key", 8, 1700000000005, 1},
            {"k2", 2, NULL, -1, 1699999999990, 0}, /* earlier than the first */
            {"", 0, "", 0, 1700000000001, 2},
            {"\0\1\2", 3, big, (int32_t)sizeof big, 1700000000002, 3},
            {"k5", 2, "last", 4, 1700000000003, 0},
        };
        st_buf_t b;
        st_buf_init(&b);
        size_t size = build_batch(&b, recs, 6, codec);
        assert_int_equal(b.len, size);
        st_batch_stamp(b.data, 500, 3, -1);

        st_batch_limits_t lim = {.max_message_bytes = 1 << 20, .ts_before_max_ms = INT64_MAX,
                                 .ts_after_max_ms = INT64_MAX};
        st_batch_verdict_t v;
        st_batch_verdict_init(&v);
        if (st_batches_validate(b.data, b.len, &lim, st_now_ms(), &v)) fail_msg("codec %d: %s", codec, v.why);
        assert_int_equal(v.nbatches, 1);
        st_batch_verdict_fini(&v);

        seen_t *s = st_calloc(1, sizeof *s);
        s->headers_ok = 1;
        assert_int_equal(st_batch_foreach_record(b.data, (int32_t)size, seen_cb, s), ST_OK);
        assert_int_equal(s->n, 6);
        assert_true(s->headers_ok);
        for (int i = 0; i < 6; i++) {
            assert_int_equal(s->offset[i], 500 + i);
            assert_true(s->ts[i] == recs[i].ts);
            assert_int_equal(s->key_len[i], recs[i].key_len);
            assert_int_equal(s->value_len[i], recs[i].value_len);
            assert_int_equal(s->header_count[i], recs[i].nheaders);
            if (recs[i].key_len > 0) assert_memory_equal(s->key[i], recs[i].key, (size_t)recs[i].key_len);
            if (recs[i].value_len > 0)
                assert_memory_equal(s->value[i], recs[i].value, (size_t)ST_MIN(recs[i].value_len, 64));
        }
        /* The callback can stop the walk. */
        memset(s, 0, sizeof *s);
        s->stop_after = 2;
        s->headers_ok = 1;
        assert_int_equal(st_batch_foreach_record(b.data, (int32_t)size, seen_cb, s), ST_OK);
        assert_int_equal(s->n, 2);

        /* Decompression alone gives the plain records section. */
        st_buf_t plain, want;
        st_buf_init(&plain);
        st_buf_init(&want);
        for (int i = 0; i < 6; i++) put_record(&want, &recs[i], recs[0].ts, i);
        assert_int_equal(st_batch_decompress(b.data, (int32_t)size, &plain), ST_OK);
        assert_int_equal(plain.len, want.len);
        assert_memory_equal(plain.data, want.data, want.len);
        st_buf_fini(&plain);
        st_buf_fini(&want);
        free(s);
        st_buf_fini(&b);
    }
}

/* Many records, inflating well past the decompressors' 64 KiB steps. */
static void test_batch_large_compressed(void **state) {
    (void)state;
    for (size_t c = 0; c < ST_ARRAY_SIZE(all_codecs); c++) {
        int codec = all_codecs[c];
        static trec_t recs[1500];
        static char vals[1500][120];
        for (int i = 0; i < 1500; i++) {
            int n = snprintf(vals[i], sizeof vals[i], "%d:", i);
            memset(vals[i] + n, 'x' + i % 3, sizeof vals[i] - (size_t)n);
            recs[i] = (trec_t){NULL, -1, vals[i], (int32_t)sizeof vals[i], 1000 + i, 0};
        }
        st_buf_t b;
        st_buf_init(&b);
        size_t size = build_batch(&b, recs, 1500, codec);
        if (codec != TC_NONE) assert_true(size < 1500 * 120 / 4); /* it did compress */
        seen_t *s = st_calloc(1, sizeof *s);
        s->headers_ok = 1;
        assert_int_equal(st_batch_foreach_record(b.data, (int32_t)size, seen_cb, s), ST_OK);
        assert_int_equal(s->n, 1500);
        for (int i = 0; i < 1500; i += 97) {
            assert_int_equal(s->offset[i], i);
            assert_int_equal(s->ts[i], 1000 + i);
            assert_int_equal(s->value_len[i], 120);
            assert_memory_equal(s->value[i], vals[i], 64);
        }
        free(s);

        /* Cut the compressed payload in half: an error, not a crash. */
        if (codec != TC_NONE) {
            size_t cut = ST_BATCH_HEADER_SIZE + (size - ST_BATCH_HEADER_SIZE) / 2;
            st_be32_put(b.data + ST_BATCH_LENGTH_OFFSET, (uint32_t)(cut - 12));
            batch_fix_crc(b.data);
            seen_t *t = st_calloc(1, sizeof *t);
            assert_int_equal(st_batch_foreach_record(b.data, (int32_t)cut, seen_cb, t), ST_E_CORRUPT);
            free(t);
            /* Garbage where the compressed bytes were. */
            st_be32_put(b.data + ST_BATCH_LENGTH_OFFSET, (uint32_t)(size - 12));
            unit_fill(b.data + ST_BATCH_HEADER_SIZE + 20, size - ST_BATCH_HEADER_SIZE - 20);
            t = st_calloc(1, sizeof *t);
            st_err_t e = st_batch_foreach_record(b.data, (int32_t)size, seen_cb, t);
            assert_true(e == ST_E_CORRUPT || (e == ST_OK && t->n <= 1500));
            free(t);
        }
        st_buf_fini(&b);
    }
}

/* ======================================================================
 * Produce-side validation
 * ==================================================================== */

static st_err_t validate(uint8_t *p, size_t len, const st_batch_limits_t *lim, int64_t now,
                         int *count, char *why) {
    *count = -1;
    st_batch_verdict_t v;
    st_batch_verdict_init(&v);
    st_err_t e = st_batches_validate(p, len, lim, now, &v);
    if (!e) *count = v.nbatches;
    snprintf(why, 256, "%s", v.why);
    st_batch_verdict_fini(&v);
    return e;
}

static void test_batch_validate(void **state) {
    (void)state;
    const int64_t now = 1700000000000;
    st_batch_limits_t lim = {.max_message_bytes = 1 << 20, .ts_before_max_ms = INT64_MAX,
                             .ts_after_max_ms = INT64_MAX};
    char why[256];
    int count;
    tbatch_t *tb = st_malloc(sizeof *tb);
    st_buf_t b;
    st_buf_init(&b);

    /* Good: one batch, then three in one records blob, every codec. */
    size_t s1 = build_simple(&b, tb, 5, TC_NONE, now, 1, 40, 0);
    assert_int_equal(validate(b.data, b.len, &lim, now, &count, why), ST_OK);
    assert_int_equal(count, 1);
    size_t s2 = build_simple(&b, tb, 1, TC_GZIP, now, 1, 40, 10);
    build_simple(&b, tb, 60, TC_ZSTD, now, 1, 100, 20);
    assert_int_equal(validate(b.data, b.len, &lim, now, &count, why), ST_OK);
    assert_int_equal(count, 3);
    for (size_t c = 0; c < ST_ARRAY_SIZE(all_codecs); c++) {
        st_buf_t one;
        st_buf_init(&one);
        build_simple(&one, tb, 7, all_codecs[c], now, 3, 50, 0);
        assert_int_equal(validate(one.data, one.len, &lim, now, &count, why), ST_OK);
        st_buf_fini(&one);
    }

    /* Nothing at all. */
    assert_int_equal(validate(b.data, 0, &lim, now, &count, why), ST_E_INVALID_RECORD);

    /* Every truncation of a good blob. */
    for (size_t len = 1; len < b.len; len++) {
        if (len == s1 || len == s1 + s2) continue; /* whole batches: fine */
        st_err_t e = validate(b.data, len, &lim, now, &count, why);
        if (e != ST_E_CORRUPT_MESSAGE) fail_msg("%zu/%zu bytes: %s (%s)", len, b.len, st_err_name(e), why);
        assert_int_equal(count, -1); /* untouched on failure */
    }

    uint8_t *p = st_malloc(b.len);
#define RESET() memcpy(p, b.data, b.len)

    /* Magic 1 (or anything but 2). */
    RESET();
    p[ST_BATCH_MAGIC_OFFSET] = 1;
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_CORRUPT_MESSAGE);
    assert_non_null(strstr(why, "magic"));
    /* ... in the second batch: the reason says where. */
    RESET();
    p[s1 + ST_BATCH_MAGIC_OFFSET] = 0;
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_CORRUPT_MESSAGE);
    char at[32];
    snprintf(at, sizeof at, "byte %zu", s1);
    assert_non_null(strstr(why, at));

    /* A flipped bit anywhere the CRC covers (attributes to the end).  (A
     * flip that makes lastOffsetDelta negative is caught by the header
     * check, before the CRC.) */
    for (size_t i = ST_BATCH_ATTR_OFFSET; i < s1; i++) {
        RESET();
        p[i] ^= (uint8_t)(1u << (i % 8));
        st_err_t e = validate(p, b.len, &lim, now, &count, why);
        if (e != ST_E_CORRUPT_MESSAGE) fail_msg("flip at byte %zu: %s (%s)", i, st_err_name(e), why);
        if (i != ST_BATCH_LAST_DELTA_OFFSET && !strstr(why, "CRC"))
            fail_msg("flip at byte %zu: %s", i, why);
    }
    /* The CRC field itself. */
    RESET();
    p[ST_BATCH_CRC_OFFSET + 2] ^= 0x10;
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_CORRUPT_MESSAGE);
    /* baseOffset and partitionLeaderEpoch are outside the CRC on purpose:
     * the leader stamps them. */
    RESET();
    p[3] = 0x55;
    p[ST_BATCH_EPOCH_OFFSET + 1] = 0x66;
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_OK);

    /* batchLength too small for a header, and larger than what follows. */
    RESET();
    st_be32_put(p + ST_BATCH_LENGTH_OFFSET, 10);
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_CORRUPT_MESSAGE);
    RESET();
    st_be32_put(p + ST_BATCH_LENGTH_OFFSET, 0x7fffff00);
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_CORRUPT_MESSAGE);
    RESET();
    st_be32_put(p + ST_BATCH_LENGTH_OFFSET, 0xffffffff);
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_CORRUPT_MESSAGE);

    /* Record count that does not match the records (CRC made valid). */
    RESET();
    st_be32_put(p + ST_BATCH_COUNT_OFFSET, 6);
    st_be32_put(p + ST_BATCH_LAST_DELTA_OFFSET, 5);
    batch_fix_crc(p);
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_INVALID_RECORD);
    assert_non_null(strstr(why, "records"));
    RESET();
    st_be32_put(p + ST_BATCH_COUNT_OFFSET, 4);
    st_be32_put(p + ST_BATCH_LAST_DELTA_OFFSET, 3);
    batch_fix_crc(p);
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_INVALID_RECORD);
    RESET();
    st_be32_put(p + ST_BATCH_COUNT_OFFSET, 0);
    batch_fix_crc(p);
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_INVALID_RECORD);
    /* lastOffsetDelta that disagrees with the count. */
    RESET();
    st_be32_put(p + ST_BATCH_LAST_DELTA_OFFSET, 7);
    batch_fix_crc(p);
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_INVALID_RECORD);
    /* A record whose length runs past the batch. */
    RESET();
    p[ST_BATCH_HEADER_SIZE] = 0x01; /* first record's length: -1 */
    batch_fix_crc(p);
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_INVALID_RECORD);
    /* An unknown codec. */
    RESET();
    st_be16_put(p + ST_BATCH_ATTR_OFFSET, 5);
    batch_fix_crc(p);
    assert_int_equal(validate(p, b.len, &lim, now, &count, why), ST_E_CORRUPT_MESSAGE);
    assert_non_null(strstr(why, "codec"));

    /* max.message.bytes: the whole batch, overhead included. */
    st_batch_limits_t small = lim;
    small.max_message_bytes = (int32_t)s1;
    assert_int_equal(validate(b.data, s1, &small, now, &count, why), ST_OK);
    small.max_message_bytes = (int32_t)s1 - 1;
    assert_int_equal(validate(b.data, s1, &small, now, &count, why), ST_E_MESSAGE_TOO_LARGE);
    assert_non_null(strstr(why, "max.message.bytes"));
    /* The size check comes before the CRC: a large corrupt batch is too large. */
    RESET();
    p[s1 - 1] ^= 1;
    assert_int_equal(validate(p, s1, &small, now, &count, why), ST_E_MESSAGE_TOO_LARGE);
    free(p);
#undef RESET

    /* Timestamps: CreateTime must lie within the allowed window. */
    st_batch_limits_t win = {.max_message_bytes = 1 << 20, .ts_before_max_ms = 60000,
                             .ts_after_max_ms = 3600000};
    st_buf_t t;
    st_buf_init(&t);
    build_simple(&t, tb, 3, TC_NONE, now - 59000, 1, 10, 0);
    assert_int_equal(validate(t.data, t.len, &win, now, &count, why), ST_OK);
    t.len = 0;
    build_simple(&t, tb, 3, TC_NONE, now - 61000, 1, 10, 0);
    assert_int_equal(validate(t.data, t.len, &win, now, &count, why), ST_E_INVALID_TIMESTAMP);
    t.len = 0;
    build_simple(&t, tb, 3, TC_NONE, now + 3600000 - 2, 1, 10, 0); /* max ts = now + 1h */
    assert_int_equal(validate(t.data, t.len, &win, now, &count, why), ST_OK);
    t.len = 0;
    build_simple(&t, tb, 3, TC_LZ4, now + 3600000, 1, 10, 0); /* max ts past the window */
    assert_int_equal(validate(t.data, t.len, &win, now, &count, why), ST_E_INVALID_TIMESTAMP);
    /* A topic with LogAppendTime stamps its own time: no check. */
    win.log_append_time = 1;
    assert_int_equal(validate(t.data, t.len, &win, now, &count, why), ST_OK);
    /* A batch that says LogAppendTime: its records carry its maxTimestamp,
     * checked like any CreateTime (LogValidator.validateTimestamp), and on
     * a LogAppendTime topic the producer may not set it at all. */
    win.log_append_time = 0;
    st_be16_put(t.data + ST_BATCH_ATTR_OFFSET,
                (uint16_t)(st_be16_get(t.data + ST_BATCH_ATTR_OFFSET) | ST_ATTR_LOG_APPEND_TIME));
    batch_fix_crc(t.data);
    assert_int_equal(validate(t.data, t.len, &win, now, &count, why), ST_E_INVALID_TIMESTAMP);
    win.log_append_time = 1;
    assert_int_equal(validate(t.data, t.len, &win, now, &count, why), ST_E_INVALID_TIMESTAMP);
    assert_non_null(strstr(why, "LogAppendTime"));

    st_buf_fini(&t);
    st_buf_fini(&b);
    free(tb);
}

static void test_batch_header_and_stamp(void **state) {
    (void)state;
    tbatch_t *tb = st_malloc(sizeof *tb);
    st_buf_t b;
    st_buf_init(&b);
    size_t size = build_simple(&b, tb, 4, TC_GZIP, 1000, 10, 30, 0);
    st_batch_info_t info;
    assert_int_equal(st_batch_header(b.data, b.len, &info), ST_OK);
    assert_int_equal(info.size, (int32_t)size);
    assert_int_equal(info.record_count, 4);
    assert_int_equal(info.last_offset_delta, 3);
    assert_int_equal(info.attributes & ST_ATTR_CODEC_MASK, ST_CODEC_GZIP);
    assert_true(info.base_timestamp == 1000);
    assert_true(info.max_timestamp == 1030);
    assert_int_equal(info.leader_epoch, -1);
    assert_int_equal(st_batch_header(b.data, ST_BATCH_HEADER_SIZE - 1, &info), ST_E_TRUNCATED);
    uint32_t crc = st_be32_get(b.data + ST_BATCH_CRC_OFFSET);

    /* CreateTime: offsets and epoch only; the CRC neither changes nor breaks. */
    assert_true(st_batch_stamp(b.data, 1000000, 7, -1) == 1000004);
    assert_int_equal(st_batch_header(b.data, b.len, &info), ST_OK);
    assert_true(info.base_offset == 1000000);
    assert_true(st_batch_last_offset(&info) == 1000003);
    assert_int_equal(info.leader_epoch, 7);
    assert_int_equal(st_be32_get(b.data + ST_BATCH_CRC_OFFSET), crc);
    assert_true(st_batch_crc_ok(b.data, (int32_t)size));

    /* LogAppendTime: the attribute bit and maxTimestamp change, and the CRC
     * is recomputed so the batch stays valid. */
    assert_true(st_batch_stamp(b.data, 42, 8, 1234567) == 46);
    assert_int_equal(st_batch_header(b.data, b.len, &info), ST_OK);
    assert_true(info.attributes & ST_ATTR_LOG_APPEND_TIME);
    assert_int_equal(info.attributes & ST_ATTR_CODEC_MASK, ST_CODEC_GZIP);
    assert_true(info.max_timestamp == 1234567);
    assert_true(info.base_timestamp == 1000);
    assert_true(st_be32_get(b.data + ST_BATCH_CRC_OFFSET) != crc);
    assert_true(st_batch_crc_ok(b.data, (int32_t)size));
    /* Still a valid batch (checked on a copy: validation corrects headers). */
    int count;
    char why[256];
    st_batch_limits_t lim = {.max_message_bytes = 1 << 20, .ts_before_max_ms = INT64_MAX,
                             .ts_after_max_ms = INT64_MAX};
    uint8_t *copy = st_malloc(b.len);
    memcpy(copy, b.data, b.len);
    assert_int_equal(validate(copy, b.len, &lim, 0, &count, why), ST_OK);
    free(copy);
    /* ... and every record reads the append time. */
    seen_t *s = st_calloc(1, sizeof *s);
    s->headers_ok = 1;
    assert_int_equal(st_batch_foreach_record(b.data, (int32_t)size, seen_cb, s), ST_OK);
    assert_int_equal(s->n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s->offset[i], 42 + i);
        assert_true(s->ts[i] == 1234567);
    }
    free(s);
    st_buf_fini(&b);
    free(tb);
}

/* ======================================================================
 * The partition log: a model of what was appended, and helpers
 * ==================================================================== */

typedef struct mbatch {
    int64_t base, last;
    int32_t epoch;
    size_t size;
    uint8_t *bytes; /* as stamped and stored */
} mbatch_t;

typedef struct mrec {
    int64_t offset, ts;
} mrec_t;

typedef struct model {
    mbatch_t *b;
    int nb, capb;
    mrec_t *r;
    int nr, capr;
    int64_t leo;
    uint64_t label;
} model_t;

static void model_fini(model_t *md) {
    for (int i = 0; i < md->nb; i++) free(md->b[i].bytes);
    free(md->b);
    free(md->r);
    memset(md, 0, sizeof *md);
}

/* Forget the last batch (it was lost in a crash). */
static void model_pop(model_t *md) {
    mbatch_t *last = &md->b[--md->nb];
    while (md->nr && md->r[md->nr - 1].offset >= last->base) md->nr--;
    md->leo = last->base;
    free(last->bytes);
}

/* Index of the batch holding offset. */
static int model_find(const model_t *md, int64_t offset) {
    for (int i = 0; i < md->nb; i++)
        if (md->b[i].base <= offset && offset <= md->b[i].last) return i;
    fail_msg("offset %lld is in no batch of the model", (long long)offset);
    return -1;
}

typedef struct env {
    char *root;
    char dir[4096];  /* the log dir (log.dirs) */
    char pdir[4200]; /* the partition's directory */
    st_logmgr_t *m;
    st_log_t *log;
    st_log_config_t cfg;
    model_t md;
} env_t;

static st_log_config_t default_cfg(void) {
    st_log_config_t c;
    memset(&c, 0, sizeof c);
    c.segment_bytes = 1 << 20;
    c.segment_ms = 0;
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

/* What env_open gives the manager to sync with (NULL: the system calls). */
static const st_log_sync_ops_t *env_sync_ops;

static st_err_t mgr_open(const char *dir, st_logmgr_t **out, char *err, size_t errlen) {
    char *dirs[1] = {(char *)dir};
    st_logmgr_config_t mc = {dirs, 1, 1, 3600 * 1000, 3600 * 1000, 0, NULL, 0};
    st_err_t e = st_logmgr_open(&mc, out, err, errlen);
    if (!e) st_logmgr_set_sync_ops(*out, env_sync_ops);
    return e;
}

static const st_uuid_t topic_id = {{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x47, 0x88, 0x99, 0xaa,
                                    0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01}};

static void env_open(env_t *e) {
    char err[512] = "";
    st_err_t rc = mgr_open(e->dir, &e->m, err, sizeof err);
    if (rc) fail_msg("st_logmgr_open: %s: %s", st_err_name(rc), err);
    assert_int_equal(st_logmgr_open_log(e->m, "orders", 0, &topic_id, &e->cfg, &e->log), ST_OK);
    snprintf(e->pdir, sizeof e->pdir, "%s", st_log_dir(e->log));
}

static void env_close(env_t *e) {
    if (e->log) st_log_release(e->log);
    if (e->m) st_logmgr_close(e->m);
    e->log = NULL;
    e->m = NULL;
}

static void env_init(env_t *e, int64_t segment_bytes, int32_t index_interval) {
    memset(e, 0, sizeof *e);
    e->root = unit_tmpdir();
    snprintf(e->dir, sizeof e->dir, "%s/data", e->root);
    e->cfg = default_cfg();
    e->cfg.segment_bytes = segment_bytes;
    e->cfg.index_interval_bytes = index_interval;
    env_open(e);
}

static void env_fini(env_t *e) {
    env_close(e);
    model_fini(&e->md);
    unit_tmpdir_remove(e->root);
    e->root = NULL;
}

/* Build and append one batch, check the offsets it got, remember it, and
 * move the high watermark to the end (as a single replica does). */
static void append_batch_at(env_t *e, int n, int codec, int64_t ts0, int64_t dt, int32_t epoch,
                            int64_t now_ms) {
    tbatch_t *tb = st_malloc(sizeof *tb);
    st_buf_t b;
    st_buf_init(&b);
    size_t size = build_simple(&b, tb, n, codec, ts0, dt, 40 + (int)(e->md.label % 50), e->md.label);
    e->md.label += (uint64_t)n;
    st_append_info_t info;
    st_err_t rc = st_log_append(e->log, b.data, b.len, epoch, now_ms, &info);
    if (rc) fail_msg("append: %s", st_err_name(rc));
    assert_true(info.base_offset == e->md.leo);
    assert_true(info.last_offset == e->md.leo + n - 1);
    if (e->md.nb == e->md.capb) {
        e->md.capb = e->md.capb ? e->md.capb * 2 : 64;
        e->md.b = st_realloc(e->md.b, (size_t)e->md.capb * sizeof *e->md.b);
    }
    mbatch_t *mb = &e->md.b[e->md.nb++];
    mb->base = info.base_offset;
    mb->last = info.last_offset;
    mb->epoch = epoch;
    mb->size = size;
    mb->bytes = st_malloc(size);
    memcpy(mb->bytes, b.data, size); /* stamped in place by the append */
    assert_true((int64_t)st_be64_get(mb->bytes) == mb->base);
    assert_int_equal((int32_t)st_be32_get(mb->bytes + ST_BATCH_EPOCH_OFFSET), epoch);
    for (int i = 0; i < n; i++) {
        if (e->md.nr == e->md.capr) {
            e->md.capr = e->md.capr ? e->md.capr * 2 : 256;
            e->md.r = st_realloc(e->md.r, (size_t)e->md.capr * sizeof *e->md.r);
        }
        e->md.r[e->md.nr++] = (mrec_t){mb->base + i, info.log_append_time >= 0
                                                         ? info.log_append_time
                                                         : ts0 + dt * i};
    }
    e->md.leo += n;
    st_log_set_high_watermark(e->log, e->md.leo);
    st_buf_fini(&b);
    free(tb);
}

static void append_batch(env_t *e, int n, int codec, int64_t ts0, int64_t dt, int32_t epoch) {
    append_batch_at(e, n, codec, ts0, dt, epoch, st_now_ms());
}

/* Append nbatches batches of 1..maxn records with rising timestamps. */
static void append_many(env_t *e, int nbatches, int maxn, int64_t ts0, int32_t epoch) {
    for (int i = 0; i < nbatches; i++) {
        int n = 1 + (int)unit_below((uint32_t)maxn);
        int codec = i % 7 == 3 ? all_codecs[unit_below(ST_ARRAY_SIZE(all_codecs))] : TC_NONE;
        append_batch(e, n, codec, ts0 + 100 * e->md.nr, 7, epoch);
    }
}

static uint8_t *read_range(const st_log_read_t *rd) {
    uint8_t *buf = st_malloc((size_t)rd->len + 1);
    size_t got = 0;
    assert_int_equal(st_pread_all(rd->file->fd, buf, (size_t)rd->len, rd->pos, &got), ST_OK);
    assert_int_equal(got, (size_t)rd->len);
    return buf;
}

/* Read everything from offset `from` to the high watermark, in reads of at
 * most max_bytes, and compare each batch with the model byte for byte.
 * Returns the number of batches read. */
static int verify_reads(env_t *e, int64_t from, int32_t max_bytes) {
    int64_t off = from;
    int bi = from < e->md.leo ? model_find(&e->md, from) : e->md.nb, nbatches = 0;
    for (;;) {
        st_log_read_t rd;
        st_err_t rc = st_log_read(e->log, off, max_bytes, 1, &rd);
        if (rc) fail_msg("read at %lld: %s", (long long)off, st_err_name(rc));
        assert_true(rd.high_watermark == e->md.leo);
        if (!rd.file) break;
        uint8_t *buf = read_range(&rd);
        size_t pos = 0;
        while (pos + ST_BATCH_HEADER_SIZE <= (size_t)rd.len) {
            st_batch_info_t b;
            assert_int_equal(st_batch_header(buf + pos, (size_t)rd.len - pos, &b), ST_OK);
            if (pos + (size_t)b.size > (size_t)rd.len) break; /* cut by max_bytes */
            assert_true(bi < e->md.nb);
            const mbatch_t *mb = &e->md.b[bi];
            if (b.base_offset != mb->base || (size_t)b.size != mb->size ||
                memcmp(buf + pos, mb->bytes, mb->size))
                fail_msg("read at %lld: batch %lld differs from what was appended", (long long)off,
                         (long long)mb->base);
            pos += (size_t)b.size;
            off = mb->last + 1;
            bi++;
            nbatches++;
        }
        assert_true(pos > 0);
        free(buf);
        st_file_release(rd.file);
    }
    assert_true(off == e->md.leo || from >= e->md.leo);
    assert_int_equal(bi, e->md.nb);
    return nbatches;
}

/* A read of one byte at every offset gets exactly the batch holding it
 * (KIP-74: the first batch whole), found through the index. */
static void verify_every_offset(env_t *e, int64_t from) {
    for (int64_t off = from; off < e->md.leo; off++) {
        st_log_read_t rd;
        assert_int_equal(st_log_read(e->log, off, 1, 1, &rd), ST_OK);
        assert_non_null(rd.file);
        const mbatch_t *mb = &e->md.b[model_find(&e->md, off)];
        if ((size_t)rd.len != mb->size) fail_msg("offset %lld: read %d bytes, its batch has %zu",
                                                (long long)off, rd.len, mb->size);
        uint8_t *buf = read_range(&rd);
        assert_memory_equal(buf, mb->bytes, mb->size);
        free(buf);
        st_file_release(rd.file);
    }
}

/* Base offsets of the segments on disk, from the file names. */
static int list_segments(const char *pdir, int64_t *bases, int max) {
    DIR *d = opendir(pdir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len != 24 || strcmp(de->d_name + 20, ".log")) continue;
        for (int i = 0; i < 20; i++) assert_true(de->d_name[i] >= '0' && de->d_name[i] <= '9');
        assert_true(n < max);
        bases[n++] = strtoll(de->d_name, NULL, 10);
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* sort: few entries */
        for (int k = i; k > 0 && bases[k - 1] > bases[k]; k--) {
            int64_t t = bases[k];
            bases[k] = bases[k - 1];
            bases[k - 1] = t;
        }
    return n;
}

static void seg_path(const env_t *e, int64_t base, const char *ext, char *out, size_t n) {
    snprintf(out, n, "%s/%020lld%s", e->pdir, (long long)base, ext);
}

static int64_t file_size(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return st.st_size;
}

static char *slurp(const char *path, size_t *len) {
    char *p = NULL;
    assert_int_equal(st_read_file(path, &p, len), ST_OK);
    return p;
}

/* The library's own invariants on every segment (log_int.h): index entries
 * ascending and each naming the batch at its position. */
static void check_index_invariants(env_t *e) {
    st_log_t *log = e->log;
    pthread_mutex_lock(&log->lock);
    for (int i = 0; i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        for (int k = 0; k < s->nidx; k++) {
            if (k) {
                assert_true(s->idx[k].rel > s->idx[k - 1].rel);
                assert_true(s->idx[k].pos > s->idx[k - 1].pos);
            }
            uint8_t hdr[ST_BATCH_HEADER_SIZE];
            size_t got;
            st_file_t *f;
            assert_int_equal(st_log__seg_keep(s, ST_SEG_LOG, &f), ST_OK);
            assert_int_equal(st_pread_all(f->fd, hdr, sizeof hdr, s->idx[k].pos, &got), ST_OK);
            st_file_release(f);
            st_batch_info_t b;
            assert_int_equal(st_batch_header(hdr, got, &b), ST_OK);
            assert_true(st_batch_last_offset(&b) == s->base_offset + s->idx[k].rel);
        }
        for (int k = 1; k < s->ntidx; k++) assert_true(s->tidx[k].ts > s->tidx[k - 1].ts);
        if (i + 1 < log->nsegs) assert_true(s->next_offset == log->segs[i + 1]->base_offset);
    }
    pthread_mutex_unlock(&log->lock);
}

/* ======================================================================
 * Append, read, roll
 * ==================================================================== */

static void test_log_append_and_read(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20, 1024);
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_true(o.leo == 0 && o.log_start_offset == 0 && o.high_watermark == 0);
    assert_int_equal(o.nsegments, 1);

    /* An empty log: reading at 0 is "nothing yet", past it out of range. */
    st_log_read_t rd;
    assert_int_equal(st_log_read(e.log, 0, 1000, 1, &rd), ST_OK);
    assert_null(rd.file);
    assert_int_equal(st_log_read(e.log, 1, 1000, 1, &rd), ST_E_OFFSET_OUT_OF_RANGE);

    /* Several batches in one append get contiguous offsets. */
    tbatch_t *tb = st_malloc(sizeof *tb);
    st_buf_t b;
    st_buf_init(&b);
    build_simple(&b, tb, 3, TC_NONE, 1000, 1, 30, 0);
    build_simple(&b, tb, 2, TC_ZSTD, 1000, 1, 30, 0);
    st_append_info_t info;
    assert_int_equal(st_log_append(e.log, b.data, b.len, 0, st_now_ms(), &info), ST_OK);
    assert_int_equal(info.base_offset, 0);
    assert_int_equal(info.last_offset, 4);
    assert_int_equal(info.log_append_time, -1);
    assert_int_equal((int64_t)st_be64_get(b.data), 0);
    st_batch_info_t bi;
    assert_int_equal(st_batch_header(b.data, b.len, &bi), ST_OK);
    assert_int_equal((int64_t)st_be64_get(b.data + bi.size), 3);
    /* Not visible to readers until the high watermark moves. */
    assert_int_equal(st_log_read(e.log, 0, 1000, 1, &rd), ST_OK);
    assert_null(rd.file);
    st_log_set_high_watermark(e.log, 100); /* clamped to the leo */
    st_log_offsets(e.log, &o);
    assert_true(o.high_watermark == 5 && o.leo == 5);
    assert_int_equal(st_log_read(e.log, 0, 1 << 20, 1, &rd), ST_OK);
    assert_int_equal(rd.len, (int32_t)b.len);
    uint8_t *got = read_range(&rd);
    assert_memory_equal(got, b.data, b.len);
    free(got);
    st_file_release(rd.file);
    /* Reading from inside the second batch starts at that batch. */
    assert_int_equal(st_log_read(e.log, 4, 1 << 20, 1, &rd), ST_OK);
    assert_int_equal(rd.pos, bi.size);
    st_file_release(rd.file);
    /* Too small a max_bytes: the whole first batch with min_one, else nothing. */
    assert_int_equal(st_log_read(e.log, 0, 10, 1, &rd), ST_OK);
    assert_int_equal(rd.len, bi.size);
    st_file_release(rd.file);
    assert_int_equal(st_log_read(e.log, 0, 10, 0, &rd), ST_OK);
    assert_null(rd.file);
    st_buf_fini(&b);
    free(tb);

    /* Many more, of every codec; the model starts after the first five. */
    e.md.leo = 5;
    append_many(&e, 120, 8, 1700000000000, 0);
    st_log_offsets(e.log, &o);
    assert_true(o.leo == e.md.leo);
    assert_int_equal(verify_reads(&e, 5, 1 << 20), e.md.nb);
    assert_int_equal(verify_reads(&e, 5, 700), e.md.nb); /* many small reads */
    verify_every_offset(&e, 5);
    check_index_invariants(&e);

    /* The high watermark bounds reads; it never moves back. */
    int64_t hw = e.md.leo;
    tbatch_t *tb2 = st_malloc(sizeof *tb2);
    st_buf_t more;
    st_buf_init(&more);
    build_simple(&more, tb2, 4, TC_NONE, 1, 1, 10, 0);
    assert_int_equal(st_log_append(e.log, more.data, more.len, 0, st_now_ms(), &info), ST_OK);
    assert_true(info.base_offset == hw);
    assert_int_equal(st_log_read(e.log, hw, 1 << 20, 1, &rd), ST_OK);
    assert_null(rd.file);
    /* past the watermark but within the log: nothing yet, as Kafka (a
     * consumer may have seen it from an earlier leader); past the log end:
     * out of range */
    assert_int_equal(st_log_read(e.log, hw + 1, 1 << 20, 1, &rd), ST_OK);
    assert_null(rd.file);
    assert_int_equal(st_log_read(e.log, hw + 4, 1 << 20, 1, &rd), ST_OK);
    assert_null(rd.file);
    assert_int_equal(st_log_read(e.log, hw + 5, 1 << 20, 1, &rd), ST_E_OFFSET_OUT_OF_RANGE);
    /* a read from below stops at the watermark */
    assert_int_equal(st_log_read(e.log, e.md.b[e.md.nb - 1].base, 1 << 20, 1, &rd), ST_OK);
    assert_int_equal((size_t)rd.len, e.md.b[e.md.nb - 1].size);
    st_file_release(rd.file);
    st_log_set_high_watermark(e.log, hw - 1);
    st_log_offsets(e.log, &o);
    assert_true(o.high_watermark == hw);
    st_buf_fini(&more);
    free(tb2);

    /* Larger than a segment: refused whole. */
    e.cfg.segment_bytes = 4096;
    st_log_set_config(e.log, &e.cfg);
    st_buf_t huge;
    st_buf_init(&huge);
    tbatch_t *tb3 = st_malloc(sizeof *tb3);
    build_simple(&huge, tb3, 40, TC_NONE, 1, 1, 150, 0);
    assert_true(huge.len > 4096);
    assert_int_equal(st_log_append(e.log, huge.data, huge.len, 0, st_now_ms(), &info),
                     ST_E_RECORD_LIST_TOO_LARGE);
    st_buf_fini(&huge);
    free(tb3);
    env_fini(&e);
}

static void test_log_roll_and_indexes(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 8192, 512);
    append_many(&e, 300, 4, 1700000000000, 0);
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_true(o.nsegments >= 6);

    /* On disk: one .log/.index/.timeindex per segment, named by the
     * 20-digit base offset, which is the first offset it holds. */
    int64_t bases[256];
    int n = list_segments(e.pdir, bases, 256);
    assert_int_equal(n, o.nsegments);
    assert_int_equal(bases[0], 0);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        char path[4400];
        seg_path(&e, bases[i], ".index", path, sizeof path);
        assert_true(file_size(path) >= 0);
        seg_path(&e, bases[i], ".timeindex", path, sizeof path);
        assert_true(file_size(path) >= 0);
        seg_path(&e, bases[i], ".log", path, sizeof path);
        int64_t size = file_size(path);
        assert_true(size > 0 && size <= 8192);
        total += size;
        /* every base offset is the start of a batch in the model */
        assert_true(e.md.b[model_find(&e.md, bases[i])].base == bases[i]);
        if (i + 1 < n) {
            /* a closed segment's indexes are on disk, whole entries */
            seg_path(&e, bases[i], ".index", path, sizeof path);
            int64_t isz = file_size(path);
            assert_true(isz > 0 && isz % 8 == 0);
            seg_path(&e, bases[i], ".timeindex", path, sizeof path);
            int64_t tsz = file_size(path);
            assert_true(tsz > 0 && tsz % 12 == 0);
            /* a segment rolls when the next append would not fit */
            const mbatch_t *next = &e.md.b[model_find(&e.md, bases[i + 1])];
            assert_true(size + (int64_t)next->size > 8192);
        }
    }
    assert_true(total == o.size_bytes);
    char name[64];
    snprintf(name, sizeof name, "/%020lld.log", (long long)bases[n - 1]);
    assert_true(strlen(name) == 25);

    /* Reads across segments; lookups at every offset. */
    assert_int_equal(verify_reads(&e, 0, 1 << 20), e.md.nb);
    verify_every_offset(&e, 0);
    check_index_invariants(&e);

    /* segment.ms rolls a non-empty segment once it is old enough. */
    e.cfg.segment_ms = 60000;
    st_log_set_config(e.log, &e.cfg);
    append_batch_at(&e, 2, TC_NONE, 5, 1, 0, st_now_ms());
    st_log_offsets(e.log, &o);
    int before = o.nsegments;
    append_batch_at(&e, 2, TC_NONE, 5, 1, 0, st_now_ms() + 120000);
    st_log_offsets(e.log, &o);
    assert_int_equal(o.nsegments, before + 1);
    assert_int_equal(list_segments(e.pdir, bases, 256), o.nsegments);
    assert_true(bases[o.nsegments - 1] == e.md.b[e.md.nb - 1].base);
    /* An explicit roll; rolling an empty active segment does nothing. */
    assert_int_equal(st_log_roll(e.log), ST_OK);
    st_log_offsets(e.log, &o);
    assert_int_equal(o.nsegments, before + 2);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    st_log_offsets(e.log, &o);
    assert_int_equal(o.nsegments, before + 2);
    assert_int_equal(verify_reads(&e, 0, 1 << 20), e.md.nb);
    env_fini(&e);
}

/* ======================================================================
 * Time lookups
 * ==================================================================== */

/* The first offset at or after `from` whose record timestamp is >= ts. */
static int64_t model_offset_for_time(const model_t *md, int64_t ts, int64_t from, int64_t *found_ts) {
    for (int i = 0; i < md->nr; i++)
        if (md->r[i].offset >= from && md->r[i].ts >= ts) {
            *found_ts = md->r[i].ts;
            return md->r[i].offset;
        }
    return -1;
}

/* On a failed lookup: what the log's time indexes say. */
static void dump_time_indexes(env_t *e) {
    st_log_t *log = e->log;
    for (int i = 0; i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        print_error("segment %lld..%lld max ts %lld at %lld:", (long long)s->base_offset,
                    (long long)s->next_offset, (long long)s->max_timestamp,
                    (long long)s->offset_of_max_timestamp);
        for (int k = 0; k < s->ntidx; k++)
            print_error(" (%lld, +%d)", (long long)s->tidx[k].ts, s->tidx[k].rel);
        print_error("\n");
    }
}

static void check_time_lookups(env_t *e, int64_t from) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int i = 0; i < e->md.nr; i++) {
        lo = ST_MIN(lo, e->md.r[i].ts);
        hi = ST_MAX(hi, e->md.r[i].ts);
    }
    int checked = 0;
    for (int64_t ts = lo - 5; ts <= hi + 5; ts += 1 + (int64_t)unit_below(37)) {
        int64_t want_ts = 0, got_off = -7, got_ts = -7;
        int32_t epoch = -7;
        int64_t want = model_offset_for_time(&e->md, ts, from, &want_ts);
        st_err_t rc = st_log_offset_for_time(e->log, ts, &got_off, &got_ts, &epoch);
        if (want < 0) {
            if (rc != ST_E_NOT_FOUND) fail_msg("ts %lld: found %lld, expected none", (long long)ts,
                                               (long long)got_off);
        } else {
            if (rc != ST_OK || got_off != want || got_ts != want_ts) {
                dump_time_indexes(e);
                fail_msg("ts %lld: got %s offset %lld ts %lld, expected offset %lld ts %lld",
                         (long long)ts, st_err_name(rc), (long long)got_off, (long long)got_ts,
                         (long long)want, (long long)want_ts);
            }
            assert_int_equal(epoch, e->md.b[model_find(&e->md, want)].epoch);
        }
        checked++;
    }
    /* Exactly every stored timestamp, too. */
    for (int i = 0; i < e->md.nr; i += 3) {
        int64_t want_ts, got_off, got_ts;
        int32_t epoch;
        if (e->md.r[i].offset < from) continue;
        int64_t want = model_offset_for_time(&e->md, e->md.r[i].ts, from, &want_ts);
        assert_int_equal(st_log_offset_for_time(e->log, e->md.r[i].ts, &got_off, &got_ts, &epoch),
                         ST_OK);
        assert_true(got_off == want);
    }
    assert_true(checked > 10);
    int64_t x, y;
    int32_t z;
    assert_int_equal(st_log_offset_for_time(e->log, hi + 1, &x, &y, &z), ST_E_NOT_FOUND);
}

static void test_log_offset_for_time(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 4096, 300);
    /* Rising timestamps with steps back inside batches and between them. */
    int64_t t = 1700000000000;
    for (int i = 0; i < 150; i++) {
        int n = 1 + (int)unit_below(6);
        int64_t dt = (i % 5 == 2) ? -3 : 11;           /* some batches run backwards */
        int64_t t0 = (i % 9 == 4) ? t - 2000 : t;       /* some start in the past */
        append_batch(&e, n, i % 4 == 1 ? TC_LZ4 : TC_NONE, t0, dt, i / 50);
        t += 50;
    }
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_true(o.nsegments >= 4);
    check_time_lookups(&e, 0);
    assert_true(st_log_max_timestamp(e.log) >= t - 50);

    /* The same after a clean reopen (time indexes read back from disk)... */
    env_close(&e);
    env_open(&e);
    check_time_lookups(&e, 0);
    /* ... and with the log start moved into the middle of a batch: records
     * below it are not answers even when their batch holds later ones. */
    int mid = e.md.nb / 2;
    while (e.md.b[mid].last == e.md.b[mid].base) mid++;
    int64_t start = e.md.b[mid].base + 1;
    int64_t low;
    assert_int_equal(st_log_delete_records(e.log, start, &low), ST_OK);
    assert_true(low == start);
    check_time_lookups(&e, start);
    int64_t got_off, got_ts;
    int32_t epoch;
    assert_int_equal(st_log_offset_for_time(e.log, 0, &got_off, &got_ts, &epoch), ST_OK);
    assert_true(got_off == start);
    env_fini(&e);
}

/* ======================================================================
 * DeleteRecords and retention
 * ==================================================================== */

static void test_log_delete_records(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 4096, 512);
    append_many(&e, 120, 4, 1700000000000, 0);
    int64_t bases[256];
    int n = list_segments(e.pdir, bases, 256);
    assert_true(n >= 5);

    /* Inside the third segment: the first two go, the third stays. */
    int64_t target = bases[2] + 1;
    int64_t low = -1;
    assert_int_equal(st_log_delete_records(e.log, target, &low), ST_OK);
    assert_true(low == target);
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_true(o.log_start_offset == target);
    assert_int_equal(o.nsegments, n - 2);
    int64_t now_bases[256];
    assert_int_equal(list_segments(e.pdir, now_bases, 256), n - 2);
    assert_true(now_bases[0] == bases[2]);
    char path[4400];
    seg_path(&e, bases[0], ".index", path, sizeof path);
    assert_int_equal(file_size(path), -1);
    seg_path(&e, bases[1], ".timeindex", path, sizeof path);
    assert_int_equal(file_size(path), -1);

    /* Below the start: out of range; at it: the batch holding it. */
    st_log_read_t rd;
    assert_int_equal(st_log_read(e.log, target - 1, 1000, 1, &rd), ST_E_OFFSET_OUT_OF_RANGE);
    assert_int_equal(st_log_read(e.log, 0, 1000, 1, &rd), ST_E_OFFSET_OUT_OF_RANGE);
    verify_reads(&e, target, 1 << 20);
    verify_every_offset(&e, target);

    /* Lower than the current start: no change.  Past the high watermark:
     * refused.  -1: up to the high watermark. */
    assert_int_equal(st_log_delete_records(e.log, 3, &low), ST_OK);
    assert_true(low == target);
    assert_int_equal(st_log_delete_records(e.log, e.md.leo + 1, &low), ST_E_OFFSET_OUT_OF_RANGE);
    assert_int_equal(st_log_delete_records(e.log, -2, &low), ST_E_OFFSET_OUT_OF_RANGE);

    /* The start survives a clean restart (log-start-offset-checkpoint). */
    env_close(&e);
    env_open(&e);
    st_log_offsets(e.log, &o);
    assert_true(o.log_start_offset == target);
    assert_true(o.leo == e.md.leo);
    verify_reads(&e, target, 1 << 20);

    assert_int_equal(st_log_delete_records(e.log, -1, &low), ST_OK);
    assert_true(low == e.md.leo);
    st_log_offsets(e.log, &o);
    assert_int_equal(o.nsegments, 1); /* only the active segment is left */
    assert_int_equal(st_log_read(e.log, e.md.leo, 1000, 1, &rd), ST_OK);
    assert_null(rd.file);
    /* The log keeps going. */
    append_batch(&e, 3, TC_NONE, 1, 1, 0);
    verify_reads(&e, e.md.leo - 3, 1 << 20);
    env_fini(&e);
}

static int64_t segment_bytes_on_disk(env_t *e, int64_t base) {
    char path[4400];
    seg_path(e, base, ".log", path, sizeof path);
    return file_size(path);
}

static void test_log_retention_bytes(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 4096, 512);
    append_many(&e, 150, 4, st_now_ms(), 0);
    int64_t bases[256];
    int n = list_segments(e.pdir, bases, 256);
    assert_true(n >= 6);
    int64_t sizes[256], total = 0;
    for (int i = 0; i < n; i++) total += sizes[i] = segment_bytes_on_disk(&e, bases[i]);

    /* Not a delete topic: nothing goes. */
    e.cfg.retention_bytes = 1;
    e.cfg.delete_policy = 0;
    st_log_set_config(e.log, &e.cfg);
    assert_int_equal(st_log_apply_retention(e.log, st_now_ms()), 0);

    /* Keep about half: the oldest closed segments go while what remains is
     * still at least retention.bytes. */
    int64_t keep = total / 2;
    e.cfg.retention_bytes = keep;
    e.cfg.delete_policy = 1;
    st_log_set_config(e.log, &e.cfg);
    int want = 0;
    int64_t rest = total;
    while (want < n - 1 && rest - sizes[want] >= keep) rest -= sizes[want++];
    assert_true(want > 0 && want < n - 1);
    assert_int_equal(st_log_apply_retention(e.log, st_now_ms()), want);
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_int_equal(o.nsegments, n - want);
    assert_true(o.size_bytes == rest);
    assert_true(o.log_start_offset == bases[want]);
    int64_t now_bases[256];
    assert_int_equal(list_segments(e.pdir, now_bases, 256), n - want);
    assert_true(now_bases[0] == bases[want]);
    verify_reads(&e, bases[want], 1 << 20);
    assert_int_equal(st_log_apply_retention(e.log, st_now_ms()), 0); /* nothing more */

    /* retention.bytes 0: every closed segment, never the active one. */
    e.cfg.retention_bytes = 0;
    st_log_set_config(e.log, &e.cfg);
    assert_int_equal(st_log_apply_retention(e.log, st_now_ms()), n - want - 1);
    st_log_offsets(e.log, &o);
    assert_int_equal(o.nsegments, 1);
    assert_true(o.log_start_offset == bases[n - 1]);
    assert_true(o.leo == e.md.leo);
    verify_reads(&e, bases[n - 1], 1 << 20);
    env_fini(&e);
}

static void test_log_retention_ms(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20, 512);
    const int64_t now = st_now_ms();
    /* Segments: [10 days old] [8 days old] [1 hour old] [active, 20 days old] */
    append_batch(&e, 3, TC_NONE, now - 10 * DAY_MS, 1, 0);
    append_batch(&e, 3, TC_NONE, now - 10 * DAY_MS, 1, 0);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    append_batch(&e, 3, TC_NONE, now - 9 * DAY_MS, 1, 0);
    append_batch(&e, 3, TC_GZIP, now - 8 * DAY_MS, 1, 0);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    int64_t third = e.md.leo;
    append_batch(&e, 3, TC_NONE, now - 30 * DAY_MS, 1, 0); /* old, but with a newer one */
    append_batch(&e, 3, TC_NONE, now - 3600 * 1000, 1, 0);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    append_batch(&e, 3, TC_NONE, now - 20 * DAY_MS, 1, 0);
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_int_equal(o.nsegments, 4);
    /* What a segment's newest record is must survive a restart: the third
     * segment's closing time-index entry names a record after its last
     * offset-index entry. */
    env_close(&e);
    env_open(&e);

    /* 7 days: the two old segments; the third's newest record is recent;
     * the active one is never deleted however old. */
    e.cfg.retention_ms = 7 * DAY_MS;
    st_log_set_config(e.log, &e.cfg);
    assert_int_equal(st_log_apply_retention(e.log, now), 2);
    st_log_offsets(e.log, &o);
    assert_int_equal(o.nsegments, 2);
    assert_true(o.log_start_offset == third);
    verify_reads(&e, third, 1 << 20);
    assert_int_equal(st_log_apply_retention(e.log, now), 0);
    /* Thirty minutes: the third goes too, the active one stays. */
    e.cfg.retention_ms = 30 * 60 * 1000;
    st_log_set_config(e.log, &e.cfg);
    assert_int_equal(st_log_apply_retention(e.log, now), 1);
    st_log_offsets(e.log, &o);
    assert_int_equal(o.nsegments, 1);
    assert_true(o.leo == e.md.leo);
    /* -1: forever. */
    e.cfg.retention_ms = -1;
    st_log_set_config(e.log, &e.cfg);
    assert_int_equal(st_log_apply_retention(e.log, now + 1000 * DAY_MS), 0);
    env_fini(&e);
}

/* ======================================================================
 * Reopen: clean, and after a crash
 * ==================================================================== */

/* Every .index and .timeindex of the partition, concatenated by name. */
static void snapshot_indexes(env_t *e, st_buf_t *out) {
    int64_t bases[256];
    int n = list_segments(e->pdir, bases, 256);
    for (int i = 0; i < n; i++) {
        static const char *exts[] = {".index", ".timeindex"};
        for (int k = 0; k < 2; k++) {
            char path[4400];
            seg_path(e, bases[i], exts[k], path, sizeof path);
            size_t len = 0;
            char *p = slurp(path, &len);
            st_buf_printf(out, "%s %zu:", path + strlen(e->pdir), len);
            st_buf_put(out, p, len);
            free(p);
        }
    }
}

static void test_log_clean_reopen(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 6000, 700);
    append_many(&e, 60, 5, 1700000000000, 1);
    /* timestamps that jump back and forth: a segment's newest record is
     * often in a batch no index entry names */
    for (int i = 0; i < 60; i++)
        append_batch(&e, 1 + (int)unit_below(5), TC_NONE,
                     1700000100000 + (int64_t)unit_below(100000), 1 + (int64_t)unit_below(5), 4);
    int64_t low;
    assert_int_equal(st_log_delete_records(e.log, 3, &low), ST_OK);
    st_log_offsets_t before, after;
    st_log_offsets(e.log, &before);
    assert_true(before.nsegments >= 3);
    int64_t seg_max[64];
    assert_true(e.log->nsegs <= 64);
    for (int i = 0; i < e.log->nsegs; i++) seg_max[i] = e.log->segs[i]->max_timestamp;
    int64_t max_ts = st_log_max_timestamp(e.log);
    env_close(&e);

    char marker[4200];
    snprintf(marker, sizeof marker, "%s/.strata-clean-shutdown", e.dir);
    assert_true(file_size(marker) >= 0);
    st_buf_t idx1, idx2;
    st_buf_init(&idx1);
    st_buf_init(&idx2);
    snapshot_indexes(&e, &idx1);

    env_open(&e);
    assert_int_equal(st_logmgr_clean_start(e.m), 1);
    assert_int_equal(file_size(marker), -1); /* the marker is for one stop only */
    st_log_offsets(e.log, &after);
    assert_true(after.leo == before.leo);
    assert_true(after.log_start_offset == 3);
    assert_true(after.flushed_offset == before.leo);
    assert_true(after.size_bytes == before.size_bytes);
    assert_int_equal(after.nsegments, before.nsegments);
    assert_int_equal(st_log_latest_epoch(e.log), 4);
    assert_int_equal(st_log_epoch_for_offset(e.log, 3), 1);
    assert_int_equal(st_log_epoch_for_offset(e.log, e.md.leo - 1), 4);
    /* every segment still knows its newest timestamp */
    assert_true(st_log_max_timestamp(e.log) == max_ts);
    for (int i = 0; i < e.log->nsegs; i++)
        if (e.log->segs[i]->max_timestamp != seg_max[i])
            fail_msg("segment %d: newest timestamp %lld before the restart, %lld after", i,
                     (long long)seg_max[i], (long long)e.log->segs[i]->max_timestamp);
    check_time_lookups(&e, 3);
    verify_reads(&e, 3, 1 << 20);
    verify_every_offset(&e, 3);
    check_index_invariants(&e);

    /* Reopening cleanly leaves the index files exactly as they were. */
    env_close(&e);
    snapshot_indexes(&e, &idx2);
    if (idx1.len != idx2.len || memcmp(idx1.data, idx2.data, idx1.len))
        fail_msg("index files changed across a clean reopen (%zu -> %zu bytes)", idx1.len, idx2.len);
    /* ... however many times. */
    for (int round = 0; round < 3; round++) {
        env_open(&e);
        env_close(&e);
    }
    idx2.len = 0;
    snapshot_indexes(&e, &idx2);
    if (idx1.len != idx2.len || memcmp(idx1.data, idx2.data, idx1.len))
        fail_msg("index files drift over repeated clean reopens (%zu -> %zu bytes)", idx1.len,
                 idx2.len);

    /* The leader-epoch checkpoint, in Kafka's text form; the first entry
     * starts at the log start offset once that has moved past it. */
    char path[4400];
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", e.pdir);
    char *text = slurp(path, NULL);
    char want[64];
    int first4 = 0;
    while (e.md.b[first4].epoch != 4) first4++;
    env_open(&e);
    long long start = (long long)e.log->log_start_offset;
    env_close(&e);
    snprintf(want, sizeof want, "0\n2\n1 %lld\n4 %lld\n", start, (long long)e.md.b[first4].base);
    assert_string_equal(text, want);
    free(text);

    /* Appends continue where the log ended, in the same active segment. */
    env_open(&e);
    append_batch(&e, 2, TC_NONE, 5, 1, 4);
    verify_reads(&e, 3, 1 << 20);
    st_buf_fini(&idx1);
    st_buf_fini(&idx2);
    env_fini(&e);
}

/* The active segment's newest record lies between its last two index
 * entries; a clean restart rescans only part of the segment and must not
 * lose that timestamp (retention and time lookups depend on it). */
static void test_log_reopen_keeps_newest_timestamp(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20, 500);
    const int64_t t0 = 1700000000000, peak = t0 + 900000;
    st_segment_t *s = e.log->segs[0];
    while (s->nidx < 2) append_batch(&e, 1, TC_NONE, t0 + e.md.nr, 1, 0);
    append_batch(&e, 1, TC_NONE, peak, 1, 0);
    int64_t peak_offset = e.md.leo - 1;
    assert_int_equal(s->nidx, 2); /* not indexed itself */
    while (s->nidx < 3) append_batch(&e, 1, TC_NONE, t0 + e.md.nr, 1, 0);
    append_batch(&e, 1, TC_NONE, t0 + e.md.nr, 1, 0);
    assert_true(st_log_max_timestamp(e.log) == peak);
    env_close(&e);
    env_open(&e);
    assert_true(st_log_max_timestamp(e.log) == peak);
    int64_t off, ts;
    int32_t epoch;
    assert_int_equal(st_log_offset_for_time(e.log, peak, &off, &ts, &epoch), ST_OK);
    assert_true(off == peak_offset && ts == peak);
    check_time_lookups(&e, 0);
    check_index_invariants(&e);
    env_fini(&e);
}

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
        } else {
            size_t len = 0;
            char *p = slurp(src, &len);
            FILE *f = fopen(dst, "w");
            assert_non_null(f);
            assert_int_equal(fwrite(p, 1, len, f), len);
            fclose(f);
            free(p);
        }
    }
    closedir(d);
}

/* Capture the library's log lines while a crashed copy is opened. */
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

/* A crashed copy of e's directory in e2: copied while e's log is open, so
 * there is no clean-shutdown marker and the active segment's indexes were
 * never written.  The model goes along. */
static void crash_copy(env_t *e, env_t *e2) {
    memset(e2, 0, sizeof *e2);
    e2->root = unit_tmpdir();
    snprintf(e2->dir, sizeof e2->dir, "%s/data", e2->root);
    copy_tree(e->dir, e2->dir);
    snprintf(e2->pdir, sizeof e2->pdir, "%s/orders-0", e2->dir);
    e2->cfg = e->cfg;
    e2->md = e->md; /* shared batch bytes: e2 takes them over */
    memset(&e->md, 0, sizeof e->md);
}

static void test_log_crash_torn_tail(void **state) {
    (void)state;
    env_t e, c;
    env_init(&e, 5000, 600);
    append_many(&e, 80, 4, 1700000000000, 2);
    append_batch(&e, 5, TC_NONE, 1700000999000, 1, 3); /* the last batch, a new epoch */
    crash_copy(&e, &c);
    env_fini(&e);

    int64_t bases[256];
    int n = list_segments(c.pdir, bases, 256);
    assert_true(n >= 2);
    char path[4400];
    seg_path(&c, bases[n - 1], ".log", path, sizeof path);
    int64_t size = file_size(path);
    size_t last = c.md.b[c.md.nb - 1].size;
    assert_int_equal(truncate(path, size - (int64_t)last / 2), 0);

    capture_start();
    env_open(&c);
    capture_stop();
    assert_int_equal(st_logmgr_clean_start(c.m), 0);
    assert_non_null(strstr(captured, "truncating segment"));
    assert_non_null(strstr(captured, "torn"));
    free(captured);

    model_pop(&c.md);
    st_log_offsets_t o;
    st_log_offsets(c.log, &o);
    assert_true(o.leo == c.md.leo);
    assert_true(o.flushed_offset == c.md.leo);
    assert_int_equal(o.nsegments, n);
    assert_true(file_size(path) == size - (int64_t)last);
    /* the epoch of the lost batch is forgotten */
    assert_int_equal(st_log_latest_epoch(c.log), 2);
    st_log_set_high_watermark(c.log, c.md.leo);
    verify_reads(&c, 0, 1 << 20);
    verify_every_offset(&c, 0);
    check_index_invariants(&c);
    /* The log continues from the cut. */
    append_batch(&c, 2, TC_NONE, 5, 1, 3);
    verify_reads(&c, 0, 1 << 20);
    env_fini(&c);
}

static void test_log_crash_bad_crc(void **state) {
    (void)state;
    for (int which = 0; which < 2; which++) {
        env_t e, c;
        env_init(&e, 1 << 20, 600);
        append_many(&e, 40, 4, 1700000000000, 0);
        crash_copy(&e, &c);
        env_fini(&e);
        /* which 0: a byte of the last batch; 1: of a batch in the middle
         * (everything from it on is dropped) */
        int victim = which == 0 ? c.md.nb - 1 : c.md.nb / 2;
        int64_t pos = 0;
        for (int i = 0; i < victim; i++) pos += (int64_t)c.md.b[i].size;
        pos += (int64_t)c.md.b[victim].size - 3;
        char path[4400];
        seg_path(&c, 0, ".log", path, sizeof path);
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        uint8_t byte;
        assert_int_equal(pread(fd, &byte, 1, pos), 1);
        byte ^= 0x20;
        assert_int_equal(pwrite(fd, &byte, 1, pos), 1);
        close(fd);

        capture_start();
        env_open(&c);
        capture_stop();
        assert_non_null(strstr(captured, "CRC32C mismatch"));
        free(captured);
        while (c.md.nb > victim) model_pop(&c.md);
        st_log_offsets_t o;
        st_log_offsets(c.log, &o);
        assert_true(o.leo == c.md.leo);
        int64_t want_size = 0;
        for (int i = 0; i < c.md.nb; i++) want_size += (int64_t)c.md.b[i].size;
        assert_true(file_size(path) == want_size);
        st_log_set_high_watermark(c.log, c.md.leo);
        verify_reads(&c, 0, 1 << 20);
        verify_every_offset(&c, 0);
        env_fini(&c);
    }
}

/* A crash after several rolls that nobody synced: the segments past the
 * recovery point (recovery-point-offset-checkpoint, written after a flush)
 * are read whole at the reopen, the log is cut at the first bad batch even
 * in a closed segment, and the segments after the cut go (their offsets
 * would leave a gap).  Nothing below the recovery point is lost.  which 0:
 * the tail of a closed segment lost (the pages a lost fsync never wrote);
 * 1: a flipped byte in the first batch of a closed segment whose index
 * files were written. */
static void test_log_crash_unsynced_segments(void **state) {
    (void)state;
    for (int which = 0; which < 2; which++) {
        env_t e, c;
        env_init(&e, 3000, 400);
        append_many(&e, 40, 4, 1700000000000, 1);
        assert_int_equal(st_log_flush(e.log), ST_OK);
        st_logmgr_checkpoint(e.m);
        int64_t recovery_point = e.md.leo;
        int nb_flushed = e.md.nb;
        append_many(&e, 60, 4, 1700000100000, 2);
        append_many(&e, 30, 4, 1700000200000, 3);
        st_log_offsets_t o;
        st_log_offsets(e.log, &o);
        assert_true(o.flushed_offset == recovery_point);
        crash_copy(&e, &c);
        env_fini(&e);

        /* the second closed segment wholly past the recovery point */
        int64_t bases[256];
        int n = list_segments(c.pdir, bases, 256);
        int k = 0, past = 0;
        while (k < n - 1 && (bases[k] < recovery_point || ++past < 2)) k++;
        assert_true(k < n - 2); /* closed, with segments after it */
        /* its batches in the model */
        int first = 0;
        while (c.md.b[first].base < bases[k]) first++;
        int last = first;
        while (last + 1 < c.md.nb && c.md.b[last + 1].base < bases[k + 1]) last++;
        assert_true(last - first >= 2);
        int victim = which == 0 ? first + (last - first) / 2 + 1 : first;
        int64_t pos = 0;
        for (int i = first; i < victim; i++) pos += (int64_t)c.md.b[i].size;
        char path[4400];
        seg_path(&c, bases[k], ".log", path, sizeof path);
        if (which == 0) {
            assert_int_equal(truncate(path, pos + (int64_t)c.md.b[victim].size / 2), 0);
        } else {
            int fd = open(path, O_RDWR);
            assert_true(fd >= 0);
            uint8_t byte;
            pos += (int64_t)c.md.b[victim].size - 5;
            assert_int_equal(pread(fd, &byte, 1, pos), 1);
            byte ^= 0x04;
            assert_int_equal(pwrite(fd, &byte, 1, pos), 1);
            close(fd);
        }

        capture_start();
        env_open(&c);
        capture_stop();
        assert_non_null(strstr(captured, "truncating segment"));
        assert_non_null(strstr(captured, which == 0 ? "torn" : "CRC32C mismatch"));
        free(captured);
        while (c.md.nb > victim) model_pop(&c.md);
        assert_true(c.md.nb >= nb_flushed);
        st_log_offsets(c.log, &o);
        if (o.leo != c.md.leo)
            fail_msg("case %d: the log ends at %lld after recovery; the first bad batch was at "
                     "%lld", which, (long long)o.leo, (long long)c.md.leo);
        assert_int_equal(o.nsegments, k + 1); /* the later segments are gone */
        assert_int_equal(list_segments(c.pdir, bases, 256), k + 1);
        assert_int_equal(st_log_latest_epoch(c.log), 2);
        st_log_set_high_watermark(c.log, c.md.leo);
        verify_reads(&c, 0, 1 << 20);
        verify_every_offset(&c, 0);
        check_index_invariants(&c);
        /* The log continues from the cut, in the cut segment. */
        append_batch(&c, 3, TC_NONE, 1700000300000, 1, 4);
        verify_reads(&c, 0, 1 << 20);
        env_close(&c);
        env_open(&c);
        st_log_set_high_watermark(c.log, c.md.leo);
        verify_reads(&c, 0, 1 << 20);
        assert_int_equal(st_log_latest_epoch(c.log), 4);
        env_fini(&c);
    }
}

/* A truncation below the recovery point on disk, then new segments that
 * nobody synced, then a crash: the recovery point must have come down with
 * the truncation (Kafka's LogManager.truncateTo checkpoints the recovery
 * points of the dir), or the reopen trusts the new segments below the old
 * recovery point without reading them and serves what a lost fsync left. */
static void test_log_crash_after_truncation(void **state) {
    (void)state;
    env_t e, c;
    env_init(&e, 3000, 400);
    append_many(&e, 100, 4, 1700000000000, 1);
    assert_int_equal(st_log_flush(e.log), ST_OK);
    st_logmgr_checkpoint(e.m);
    int64_t old_rp = e.md.leo;
    int j = e.md.nb / 4;
    int64_t cut = e.md.b[j].base;
    assert_int_equal(st_log_truncate_to(e.log, cut), ST_OK);
    while (e.md.nb > j) model_pop(&e.md);
    append_many(&e, 100, 4, 1700000100000, 2);
    assert_true(e.md.leo > old_rp);
    crash_copy(&e, &c);
    env_fini(&e);

    /* a closed segment of the new data, wholly below the old recovery point */
    int64_t bases[256];
    int n = list_segments(c.pdir, bases, 256);
    int k = 0;
    while (k < n - 1 && bases[k] <= cut) k++; /* the first one after the cut */
    assert_true(k < n - 1 && bases[k + 1] <= old_rp);
    int first = 0;
    while (c.md.b[first].base < bases[k]) first++;
    int last = first;
    while (last + 1 < c.md.nb && c.md.b[last + 1].base < bases[k + 1]) last++;
    assert_true(last - first >= 2);
    int victim = first + (last - first) / 2;
    int64_t pos = 0;
    for (int i = first; i < victim; i++) pos += (int64_t)c.md.b[i].size;
    char path[4400];
    seg_path(&c, bases[k], ".log", path, sizeof path);
    /* a page the lost fsync never wrote: zeros inside the batch's records */
    uint8_t zeros[16] = {0};
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, zeros, sizeof zeros, pos + (int64_t)c.md.b[victim].size - 20), 16);
    close(fd);

    capture_start();
    env_open(&c);
    capture_stop();
    if (!strstr(captured, "CRC32C mismatch"))
        fail_msg("segment %lld (below the recovery point %lld of before the truncation to "
                 "%lld) has zeros in a batch, and the reopen did not read it:\n%s",
                 (long long)bases[k], (long long)old_rp, (long long)cut, captured);
    free(captured);
    while (c.md.nb > victim) model_pop(&c.md);
    st_log_offsets_t o;
    st_log_offsets(c.log, &o);
    assert_true(o.leo == c.md.leo);
    st_log_set_high_watermark(c.log, c.md.leo);
    verify_reads(&c, 0, 1 << 20);
    verify_every_offset(&c, 0);
    env_fini(&c);
}

/* A crash right after a roll, and with nothing lost at all. */
static void test_log_crash_intact(void **state) {
    (void)state;
    env_t e, c;
    env_init(&e, 3000, 400);
    append_many(&e, 50, 4, 1700000000000, 0);
    assert_int_equal(st_log_roll(e.log), ST_OK);
    crash_copy(&e, &c);
    env_fini(&e);
    env_open(&c);
    assert_int_equal(st_logmgr_clean_start(c.m), 0);
    st_log_offsets_t o;
    st_log_offsets(c.log, &o);
    assert_true(o.leo == c.md.leo);
    st_log_set_high_watermark(c.log, c.md.leo);
    verify_reads(&c, 0, 1 << 20);
    verify_every_offset(&c, 0);
    check_index_invariants(&c);
    env_fini(&c);
}

/* Damage the index files of a log (how: 0 delete them, 1 garbage over
 * them, 2 a wrong and a torn entry appended, 3 junk after the time index
 * only), reopen: the indexes are rebuilt the way they were written, and
 * reads and time lookups still work.  On a cleanly closed log, or on a
 * crashed copy (whose active segment never had its index written). */
static void index_rebuild_case(int crashed, int how) {
    env_t orig, copy, *t = &orig;
    env_init(&orig, 5000, 500);
    append_many(&orig, 100, 4, 1700000000000, 0);
    if (crashed) {
        crash_copy(&orig, &copy);
        t = &copy;
    }
    env_close(&orig);
    st_buf_t good, again;
    st_buf_init(&good);
    st_buf_init(&again);
    snapshot_indexes(&orig, &good);

    int64_t bases[256];
    int n = list_segments(t->pdir, bases, 256);
    assert_true(n >= 3);
    for (int i = 0; i < n; i++) {
        char path[4400];
        seg_path(t, bases[i], ".index", path, sizeof path);
        if (how == 0) {
            /* (c) the index files are gone */
            assert_int_equal(unlink(path), 0);
        } else if (how == 1) {
            /* (d) garbage entries over the whole file, and beyond */
            int64_t sz = file_size(path);
            uint8_t junk[4096];
            unit_fill(junk, sizeof junk);
            assert_true(sz + 16 <= (int64_t)sizeof junk);
            FILE *f = fopen(path, "w");
            fwrite(junk, 1, (size_t)sz + 16, f);
            fclose(f);
        } else if (how == 2) {
            /* an entry that names the wrong batch, then a torn one */
            FILE *f = fopen(path, "a");
            uint8_t ent[11] = {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3};
            fwrite(ent, 1, sizeof ent, f);
            fclose(f);
        } else {
            /* the offset index intact; junk after the time index's
             * entries (an offset out of range, then a torn entry) */
            seg_path(t, bases[i], ".timeindex", path, sizeof path);
            FILE *f = fopen(path, "a");
            uint8_t tj[17];
            unit_fill(tj, sizeof tj);
            tj[0] = 0x7f;
            st_be32_put(tj + 8, 0x7fffffff);
            fwrite(tj, 1, sizeof tj, f);
            fclose(f);
        }
    }
    capture_start();
    env_open(t);
    capture_stop();
    /* a crash left no high watermark checkpoint; the leader's replica
     * layer raises it to the log end */
    if (crashed) st_log_set_high_watermark(t->log, t->md.leo);
    if (how < 3) assert_non_null(strstr(captured, "rebuilding"));
    free(captured);
    verify_reads(t, 0, 1 << 20);
    verify_every_offset(t, 0);
    check_index_invariants(t);
    check_time_lookups(t, 0);
    int64_t max_ts = INT64_MIN;
    for (int i = 0; i < t->md.nr; i++) max_ts = ST_MAX(max_ts, t->md.r[i].ts);
    assert_true(st_log_max_timestamp(t->log) == max_ts);
    env_close(t);
    snapshot_indexes(t, &again);
    if (how < 3 && (again.len != good.len || memcmp(again.data, good.data, good.len)))
        fail_msg("case %d%s: rebuilt indexes differ from the originals", how,
                 crashed ? " (crashed)" : "");
    env_open(t);
    check_time_lookups(t, 0);
    st_buf_fini(&good);
    st_buf_fini(&again);
    env_fini(t);
    if (crashed) env_fini(&orig);
}

/* replication-offset-checkpoint: a reopened log starts at the high
 * watermark it had (a clean close writes it), not at its log end; the log
 * start when the partition is not in the file; never past the log end. */
static void write_hw_checkpoint(env_t *e, const char *lines, int n) {
    char path[4400], text[256];
    snprintf(path, sizeof path, "%s/replication-offset-checkpoint", e->dir);
    snprintf(text, sizeof text, "0\n%d\n%s", n, lines);
    assert_int_equal(st_write_file_atomic(path, text, strlen(text)), ST_OK);
}

static void test_log_hw_checkpoint(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 5000, 500);
    append_many(&e, 30, 3, 1700000000000, 0);
    int64_t leo = e.md.leo;
    st_log_offsets_t o;
    env_close(&e);
    env_open(&e);
    st_log_offsets(e.log, &o);
    assert_true(o.high_watermark == leo && o.leo == leo);
    char line[64];
    struct { int64_t written, want; } cases[] = {{leo - 3, leo - 3}, {leo + 100, leo}, {-1, 0}};
    for (size_t i = 0; i < ST_ARRAY_SIZE(cases); i++) {
        env_close(&e);
        snprintf(line, sizeof line, "orders 0 %lld\n", (long long)cases[i].written);
        if (cases[i].written >= 0) write_hw_checkpoint(&e, line, 1);
        else write_hw_checkpoint(&e, "other 0 7\n", 1);
        env_open(&e);
        st_log_offsets(e.log, &o);
        if (o.high_watermark != cases[i].want)
            fail_msg("checkpoint %lld: high watermark %lld, want %lld", (long long)cases[i].written,
                     (long long)o.high_watermark, (long long)cases[i].want);
        /* a read past it but within the log reads nothing yet */
        st_log_read_t rd;
        if (o.high_watermark < leo) {
            assert_int_equal(st_log_read(e.log, o.high_watermark + 1, 1 << 20, 1, &rd), ST_OK);
            assert_null(rd.file);
        }
    }
    env_fini(&e);
}

static void test_log_index_rebuild(void **state) {
    (void)state;
    for (int crashed = 0; crashed < 2; crashed++)
        for (int how = 0; how < 4; how++) index_rebuild_case(crashed, how);
}

/* ======================================================================
 * The manager: lock, multiple dirs, flusher, deletion
 * ==================================================================== */

static void test_logmgr_lock(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20, 4096);
    st_logmgr_t *m2 = NULL;
    char err[512] = "";
    assert_int_equal(mgr_open(e.dir, &m2, err, sizeof err), ST_E_LOCKED);
    assert_null(m2);
    assert_non_null(strstr(err, e.dir));

    /* Two dirs, the second locked: refused, and nothing of ours leaks or is
     * closed by mistake (fd 0 stays open). */
    char other[4200];
    snprintf(other, sizeof other, "%s/other", e.root);
    int probe = open("/dev/null", O_RDONLY);
    assert_true(probe >= 0);
    int zero_open = fcntl(0, F_GETFD) != -1;
    char *dirs[2] = {other, e.dir};
    st_logmgr_config_t mc = {dirs, 2, 1, 3600000, 3600000, 0, NULL, 0};
    assert_int_equal(st_logmgr_open(&mc, &m2, err, sizeof err), ST_E_LOCKED);
    dirs[0] = e.dir;
    dirs[1] = other;
    assert_int_equal(st_logmgr_open(&mc, &m2, err, sizeof err), ST_E_LOCKED);
    assert_int_equal(fcntl(0, F_GETFD) != -1, zero_open);
    assert_true(fcntl(probe, F_GETFD) != -1);
    close(probe);

    /* A different node id on the same dirs is refused too. */
    const char *cid = st_logmgr_cluster_id(e.m);
    assert_int_equal(strlen(cid), 22);
    char keep_cid[64];
    snprintf(keep_cid, sizeof keep_cid, "%s", cid);
    env_close(&e);
    char *one[1] = {e.dir};
    st_logmgr_config_t mc2 = {one, 1, 2, 3600000, 3600000, 0, NULL, 0};
    assert_int_equal(st_logmgr_open(&mc2, &m2, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "node.id"));
    /* After the first closes, the dirs are free again, the cluster id kept. */
    env_open(&e);
    assert_string_equal(st_logmgr_cluster_id(e.m), keep_cid);
    env_fini(&e);
}

static int notified;
static void count_notify(st_log_t *log, void *arg) {
    (void)log;
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_RELAXED);
}

/* Poll until the flushed offset reaches want, at most ~10 s. */
static int wait_flushed(st_log_t *log, int64_t want) {
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 10000; i++) {
        st_log_offsets_t o;
        st_log_offsets(log, &o);
        if (o.flushed_offset >= want) return 1;
        nanosleep(&ms, NULL);
    }
    return 0;
}

/* ======================================================================
 * No fsync on the produce path
 * ==================================================================== */

/* A sync hook that counts the calls made on the test's own thread (and
 * those made while the log's lock is held), and holds every call from any
 * other thread (the flusher) until it is let go. */
typedef struct sync_spy {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t test_thread;
    st_log_t *log;   /* whose lock is looked at; NULL: none */
    int on_test;     /* calls on the test's thread */
    int under_lock;  /* of them, with the log's lock held */
    int held;        /* calls from other threads waiting now */
    int other_total; /* calls from other threads, all */
    int gate_open;
} sync_spy_t;

static int spy_sync(void *arg, int fd, int data_only) {
    sync_spy_t *sp = arg;
    if (pthread_equal(pthread_self(), sp->test_thread)) {
        pthread_mutex_lock(&sp->mu);
        sp->on_test++;
        /* one thread only here: EBUSY means this thread holds the lock */
        if (sp->log) {
            if (pthread_mutex_trylock(&sp->log->lock) == 0) pthread_mutex_unlock(&sp->log->lock);
            else sp->under_lock++;
        }
        pthread_mutex_unlock(&sp->mu);
    } else {
        pthread_mutex_lock(&sp->mu);
        sp->other_total++;
        sp->held++;
        pthread_cond_broadcast(&sp->cond);
        while (!sp->gate_open) pthread_cond_wait(&sp->cond, &sp->mu);
        sp->held--;
        pthread_mutex_unlock(&sp->mu);
    }
    return data_only ? fdatasync(fd) : fsync(fd);
}

/* Wait (bounded: 10 s) until a call from another thread is held. */
static int spy_wait_held(sync_spy_t *sp) {
    pthread_mutex_lock(&sp->mu);
    int64_t until = st_mono_ms() + 10000;
    while (!sp->held && st_mono_ms() < until) st_cond_wait_ms(&sp->cond, &sp->mu, 100);
    int held = sp->held;
    pthread_mutex_unlock(&sp->mu);
    return held;
}

/* Appends that roll segments (and start new leader epochs) make no fsync
 * on the appending thread and none under the log's lock: the rolled
 * segments are synced by the flusher, which the roll asks, and appends go
 * on while the flusher's fsync is held (Kafka's roll schedules
 * flushUptoOffsetExclusive on the background scheduler). */
static void test_log_roll_syncs_on_the_flusher(void **state) {
    (void)state;
    sync_spy_t sp;
    memset(&sp, 0, sizeof sp);
    pthread_mutex_init(&sp.mu, NULL);
    pthread_cond_init(&sp.cond, NULL);
    sp.test_thread = pthread_self();
    st_log_sync_ops_t ops = {spy_sync, &sp};
    env_sync_ops = &ops;
    env_t e;
    env_init(&e, 3000, 400);
    env_sync_ops = NULL;
    sp.log = e.log;

    /* No flusher running: every sync would be the appender's own. */
    sp.on_test = sp.under_lock = 0;
    for (int epoch = 0; epoch < 4; epoch++) append_many(&e, 30, 4, 1700000000000, epoch);
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_true(o.nsegments >= 4);
    if (sp.on_test)
        fail_msg("%d fsync calls on the appending thread across %d segment rolls (%d with the "
                 "log's lock held)", sp.on_test, o.nsegments - 1, sp.under_lock);

    /* The flush syncs what the rolls left, without the lock, and raises
     * the flushed offset over every rolled segment. */
    assert_true(o.flushed_offset < o.leo);
    assert_int_equal(st_log_flush(e.log), ST_OK);
    assert_true(sp.on_test >= o.nsegments); /* every unsynced .log at least */
    assert_int_equal(sp.under_lock, 0);
    st_log_offsets(e.log, &o);
    assert_true(o.flushed_offset == e.md.leo);
    char path[4400];
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", e.pdir);
    char *text = slurp(path, NULL);
    assert_non_null(strstr(text, "\n3 "));
    free(text);

    /* With the flusher running and its fsync held, appends that roll go
     * on, and the log's lock is free while the flusher waits. */
    st_logmgr_start(e.m);
    sp.on_test = 0;
    int64_t segs_before = o.nsegments;
    for (;;) {
        pthread_mutex_lock(&sp.mu);
        int held = sp.held;
        pthread_mutex_unlock(&sp.mu);
        if (held) break;
        append_many(&e, 10, 4, 1700000100000, 4);
        st_log_offsets(e.log, &o);
        if (o.nsegments > segs_before + 2) break;
    }
    if (!spy_wait_held(&sp))
        fail_msg("no fsync reached the flusher after %d segment rolls",
                 (int)(o.nsegments - segs_before));
    assert_int_equal(pthread_mutex_trylock(&e.log->lock), 0);
    pthread_mutex_unlock(&e.log->lock);
    int64_t segs_held = o.nsegments;
    append_many(&e, 40, 4, 1700000200000, 5);
    st_log_offsets(e.log, &o);
    assert_true(o.nsegments >= segs_held + 2);
    assert_int_equal(sp.on_test, 0);
    assert_true(o.flushed_offset < e.md.leo);

    pthread_mutex_lock(&sp.mu);
    sp.gate_open = 1;
    pthread_cond_broadcast(&sp.cond);
    pthread_mutex_unlock(&sp.mu);
    assert_true(wait_flushed(e.log, e.md.leo));
    assert_int_equal(sp.on_test, 0);
    st_log_set_high_watermark(e.log, e.md.leo);
    verify_reads(&e, 0, 1 << 20);
    env_fini(&e);
    pthread_mutex_destroy(&sp.mu);
    pthread_cond_destroy(&sp.cond);
}

static void test_logmgr_group_commit_flush(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 4096, 512);
    st_logmgr_start(e.m);
    st_log_set_notify(e.log, count_notify, &notified);
    notified = 0;
    append_many(&e, 5, 3, 1700000000000, 0);
    assert_true(__atomic_load_n(&notified, __ATOMIC_RELAXED) >= 5); /* one per append */
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_true(o.flushed_offset < o.leo);

    st_logmgr_request_flush(e.m, e.log);
    assert_true(wait_flushed(e.log, e.md.leo));

    /* Many appends, across rolls, several requests: one flush covers all. */
    append_many(&e, 60, 4, 1700000100000, 0);
    for (int i = 0; i < 5; i++) st_logmgr_request_flush(e.m, e.log);
    assert_true(wait_flushed(e.log, e.md.leo));
    st_log_offsets(e.log, &o);
    assert_true(o.flushed_offset == o.leo);
    assert_true(o.nsegments > 1);

    /* The direct call returns with the offset moved. */
    append_batch(&e, 2, TC_NONE, 1, 1, 0);
    assert_int_equal(st_log_flush(e.log), ST_OK);
    st_log_offsets(e.log, &o);
    assert_true(o.flushed_offset == e.md.leo);

    /* The flushed offset is the recovery point written at checkpoints. */
    st_logmgr_checkpoint(e.m);
    char path[4200];
    snprintf(path, sizeof path, "%s/recovery-point-offset-checkpoint", e.dir);
    char *text = slurp(path, NULL);
    char want[128];
    snprintf(want, sizeof want, "0\n1\norders 0 %lld\n", (long long)e.md.leo);
    assert_string_equal(text, want);
    free(text);
    st_log_set_notify(e.log, NULL, NULL);
    env_fini(&e);
}

static void test_logmgr_delete_log_and_append_time(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20, 4096);
    /* A second partition with LogAppendTime. */
    st_log_config_t cfg = default_cfg();
    cfg.log_append_time = 1;
    st_log_t *lat = NULL;
    assert_int_equal(st_logmgr_open_log(e.m, "events", 3, &topic_id, &cfg, &lat), ST_OK);
    assert_string_equal(st_log_topic(lat), "events");
    assert_int_equal(st_log_partition(lat), 3);
    tbatch_t *tb = st_malloc(sizeof *tb);
    st_buf_t b;
    st_buf_init(&b);
    size_t size = build_simple(&b, tb, 3, TC_SNAPPY, 1000, 1, 20, 0);
    st_append_info_t info;
    const int64_t now = 1700000555000;
    assert_int_equal(st_log_append(lat, b.data, b.len, 0, now, &info), ST_OK);
    assert_true(info.log_append_time == now);
    st_log_set_high_watermark(lat, 3);
    st_log_read_t rd;
    assert_int_equal(st_log_read(lat, 0, 1 << 20, 1, &rd), ST_OK);
    assert_int_equal((size_t)rd.len, size);
    uint8_t *got = read_range(&rd);
    st_file_release(rd.file);
    assert_true(st_batch_crc_ok(got, (int32_t)size));
    assert_true(st_be16_get(got + ST_BATCH_ATTR_OFFSET) & ST_ATTR_LOG_APPEND_TIME);
    seen_t *s = st_calloc(1, sizeof *s);
    s->headers_ok = 1;
    assert_int_equal(st_batch_foreach_record(got, (int32_t)size, seen_cb, s), ST_OK);
    assert_int_equal(s->n, 3);
    assert_true(s->ts[2] == now);
    free(s);
    free(got);
    int64_t off, ts;
    int32_t epoch;
    assert_int_equal(st_log_offset_for_time(lat, now, &off, &ts, &epoch), ST_OK);
    assert_true(off == 0 && ts == now);
    /* partition.metadata names the topic id */
    char path[4400];
    snprintf(path, sizeof path, "%s/partition.metadata", st_log_dir(lat));
    char *text = slurp(path, NULL);
    char idtext[23];
    st_uuid_format(&topic_id, idtext);
    assert_non_null(strstr(text, idtext));
    free(text);

    /* Deleting the partition removes its directory; the other stays. */
    char gone[4400];
    snprintf(gone, sizeof gone, "%s", st_log_dir(lat));
    assert_string_equal(st_logmgr_find_dir(e.m, "events", 3), e.dir);
    st_logmgr_delete_log(e.m, lat);
    assert_int_equal(access(gone, F_OK), -1);
    assert_null(st_logmgr_find_dir(e.m, "events", 3));
    assert_int_equal(access(e.pdir, F_OK), 0);
    st_buf_fini(&b);
    free(tb);
    env_fini(&e);
}

/* ======================================================================
 * Open files: far more partitions than descriptors
 * ==================================================================== */

static int count_open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory stream itself */
}

/* One batch of 2 records in partition i of "wide", its bytes kept in *out. */
static void wide_append(st_log_t *log, int i, uint8_t **out, size_t *len) {
    tbatch_t *tb = st_malloc(sizeof *tb);
    st_buf_t b;
    st_buf_init(&b);
    size_t size = build_simple(&b, tb, 2, TC_NONE, 1700000000000 + i, 1, 30, (uint64_t)i * 7);
    st_append_info_t info;
    st_err_t rc = st_log_append(log, b.data, b.len, 0, st_now_ms(), &info);
    if (rc) fail_msg("append to wide-%d: %s", i, st_err_name(rc));
    st_log_set_high_watermark(log, info.last_offset + 1);
    *out = st_malloc(size);
    memcpy(*out, b.data, size); /* as stamped */
    *len = size;
    st_buf_fini(&b);
    free(tb);
}

static void wide_check_read(st_log_t *log, const uint8_t *want, size_t len) {
    st_log_read_t rd;
    st_err_t rc = st_log_read(log, 0, 1 << 20, 1, &rd);
    if (rc) fail_msg("read %s-%d: %s", st_log_topic(log), (int)st_log_partition(log), st_err_name(rc));
    assert_non_null(rd.file);
    assert_int_equal((size_t)rd.len, len);
    uint8_t *got = read_range(&rd);
    assert_memory_equal(got, want, len);
    free(got);
    st_file_release(rd.file);
}

/*
 * With the process allowed 256 descriptors, 600 partitions (1,800 segment
 * files) are opened, written and read: the log layer holds no descriptor
 * per idle partition, only a bounded cache of open files (by default half
 * the descriptor limit).  A file a reader still holds is never closed
 * under it, a partition whose files were closed reads back the same bytes,
 * and when not even the cache can free a descriptor the append answers
 * "too many open files" (ST_E_NOFILE) and the partition stays online.
 */
static void test_logmgr_open_files_bounded(void **state) {
    (void)state;
    enum { NPARTS = 600, HELD = 200 };
    struct rlimit saved, lim;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    lim = saved;
    lim.rlim_cur = 256;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    int base_fds = count_open_fds();

    env_t e;
    env_init(&e, 1 << 20, 4096);
    st_log_t **logs = st_calloc(NPARTS, sizeof *logs);
    uint8_t **bytes = st_calloc(NPARTS, sizeof *bytes);
    size_t *lens = st_calloc(NPARTS, sizeof *lens);
    for (int i = 0; i < NPARTS; i++) {
        st_err_t rc = st_logmgr_open_log(e.m, "wide", i, &topic_id, &e.cfg, &logs[i]);
        if (rc) fail_msg("open wide-%d with %d descriptors open: %s", i, count_open_fds(),
                         st_err_msg(rc));
        wide_append(logs[i], i, &bytes[i], &lens[i]);
    }
    int bound = 256 / 2;
    int open_now = count_open_fds() - base_fds;
    if (open_now > bound + 8)
        fail_msg("%d descriptors open for %d partitions (bound %d)", open_now, NPARTS, bound);

    /* A reader holds partition 0's .log while every other partition is
     * read (its file is evicted from the cache, not closed). */
    st_log_read_t held;
    assert_int_equal(st_log_read(logs[0], 0, 1 << 20, 1, &held), ST_OK);
    assert_non_null(held.file);
    struct stat st0;
    assert_int_equal(fstat(held.file->fd, &st0), 0);
    for (int i = 1; i < NPARTS; i++) wide_check_read(logs[i], bytes[i], lens[i]);
    struct stat st1;
    assert_int_equal(fstat(held.file->fd, &st1), 0);
    assert_true(st0.st_ino == st1.st_ino && st0.st_dev == st1.st_dev);
    uint8_t *got = read_range(&held);
    assert_memory_equal(got, bytes[0], lens[0]);
    free(got);
    st_file_release(held.file);
    /* ... and reopened, partition 0 reads the same bytes. */
    wide_check_read(logs[0], bytes[0], lens[0]);
    open_now = count_open_fds() - base_fds;
    if (open_now > bound + 8) fail_msg("%d descriptors open after the reads (bound %d)", open_now, bound);

    /* Readers hold more files than the cache may keep idle; the rest of
     * the descriptor table is filled: an append to a partition whose file
     * is closed cannot get one. */
    st_log_read_t *hold = st_calloc(HELD, sizeof *hold);
    for (int i = 0; i < HELD; i++)
        assert_int_equal(st_log_read(logs[NPARTS - 1 - i], 0, 1 << 20, 1, &hold[i]), ST_OK);
    int *fill = st_calloc(256, sizeof *fill);
    int nfill = 0;
    for (;;) {
        int fd = dup(0);
        if (fd < 0) break;
        fill[nfill++] = fd;
    }
    tbatch_t *tb = st_malloc(sizeof *tb);
    st_buf_t b;
    st_buf_init(&b);
    build_simple(&b, tb, 1, TC_NONE, 1700000009000, 1, 30, 99);
    st_append_info_t info;
    st_err_t rc = st_log_append(logs[1], b.data, b.len, 0, st_now_ms(), &info);
    assert_string_equal(st_err_name(rc), "NOFILE");
    assert_int_equal(st_err_wire(rc), 56); /* KAFKA_STORAGE_ERROR on the wire */
    st_log_offsets_t o;
    st_log_offsets(logs[1], &o);
    assert_int_equal(o.offline, 0);
    assert_true(o.leo == 2);
    /* Descriptors back: the same append succeeds. */
    for (int i = 0; i < nfill; i++) close(fill[i]);
    for (int i = 0; i < HELD; i++) st_file_release(hold[i].file);
    assert_int_equal(st_log_append(logs[1], b.data, b.len, 0, st_now_ms(), &info), ST_OK);
    assert_true(info.base_offset == 2);
    st_buf_fini(&b);
    free(tb);
    free(fill);
    free(hold);

    for (int i = 0; i < NPARTS; i++) {
        st_log_release(logs[i]);
        free(bytes[i]);
    }
    free(logs);
    free(bytes);
    free(lens);
    env_fini(&e);
    assert_int_equal(count_open_fds(), base_fds);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

/* ---- the cache itself (fcache.c, through log_int.h) ---------------------- */

enum { FC_FILES = 64 };

/* FC_FILES files <dir>/<20-digit i>.log, each holding its index 8 times. */
static void fc_make_files(const char *dir) {
    assert_int_equal(st_mkdirs(dir), ST_OK);
    for (int i = 0; i < FC_FILES; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%020d.log", dir, i);
        int64_t body[8];
        for (int k = 0; k < 8; k++) body[k] = i;
        assert_int_equal(st_write_file_atomic(path, body, sizeof body), ST_OK);
    }
}

static int64_t fc_first_word(const st_file_t *f) {
    int64_t v = -1;
    size_t got = 0;
    assert_int_equal(st_pread_all(f->fd, &v, sizeof v, 0, &got), ST_OK);
    assert_int_equal(got, sizeof v);
    return v;
}

/*
 * The bound holds over idle files only: the least recently used idle file
 * is closed first, a kept one is passed over (and stays open and right),
 * an evicted file reopens with the same bytes, and with no descriptor left
 * and nothing idle, a keep answers ST_E_NOFILE and changes nothing; with
 * one idle file, EMFILE closes it and the open succeeds.
 */
static void test_fcache_bound_and_eviction(void **state) {
    (void)state;
    char *root = unit_tmpdir();
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/files", root);
    fc_make_files(dir);
    int base_fds = count_open_fds();
    st_fcache_t *c = st_log__fcache_new(3);
    st_fslot_t slot[FC_FILES];
    memset(slot, 0, sizeof slot);
    st_file_t *f[FC_FILES] = {0};
    st_log_file_stats_t st;

    for (int i = 0; i < 3; i++) assert_int_equal(st_log__fcache_keep(c, &slot[i], dir, i, ".log", 0, &f[i]), ST_OK);
    st_file_release(f[1]);
    st_file_release(f[2]); /* 0 stays in use: it is the least recently used */
    assert_int_equal(count_open_fds() - base_fds, 3);
    assert_int_equal(st_log__fcache_keep(c, &slot[3], dir, 3, ".log", 0, &f[3]), ST_OK);
    st_file_release(f[3]);
    /* 4 open > 3: the oldest idle one (1) went, not the kept 0 */
    assert_non_null(slot[0].file);
    assert_null(slot[1].file);
    assert_non_null(slot[2].file);
    assert_non_null(slot[3].file);
    for (int i = 4; i < 20; i++) {
        assert_int_equal(st_log__fcache_keep(c, &slot[i], dir, i, ".log", 0, &f[i]), ST_OK);
        assert_int_equal(fc_first_word(f[i]), i);
        st_file_release(f[i]);
        st_log__fcache_stats(c, &st);
        assert_true(st.open_files <= 4); /* 3 idle at most, and the kept one */
        assert_non_null(slot[0].file);
        assert_true(count_open_fds() - base_fds <= 4);
    }
    assert_int_equal(fc_first_word(f[0]), 0); /* never closed under its holder */
    st_file_release(f[0]);
    /* a hit moves a file to the front: 19 and 18 are the newest, 0 idle */
    assert_int_equal(st_log__fcache_keep(c, &slot[19], dir, 19, ".log", 0, &f[19]), ST_OK);
    st_file_release(f[19]);
    st_log__fcache_stats(c, &st);
    int64_t hits = st.hits;
    assert_true(hits >= 1);
    /* reopened after eviction: the same bytes */
    assert_null(slot[1].file);
    assert_int_equal(st_log__fcache_keep(c, &slot[1], dir, 1, ".log", 0, &f[1]), ST_OK);
    assert_int_equal(fc_first_word(f[1]), 1);
    st_file_release(f[1]);
    st_log__fcache_stats(c, &st);
    assert_int_equal(st.open_files, 3);
    assert_int_equal(st.max_open_files, 3);
    assert_true(st.evictions >= 17);

    /* Descriptors exhausted.  Every cached file kept: NOFILE, nothing
     * changes.  One of them released: it is closed to make room. */
    struct rlimit saved, lim;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    st_file_t *held[3];
    int nheld = 0;
    for (int i = 0; i < FC_FILES; i++)
        if (slot[i].file) assert_int_equal(st_log__fcache_keep(c, &slot[i], dir, i, ".log", 0, &held[nheld++]), ST_OK);
    assert_int_equal(nheld, 3);
    lim = saved;
    lim.rlim_cur = (rlim_t)count_open_fds() + 8;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    int fill[64], nfill = 0;
    while (nfill < 64) {
        int fd = dup(0);
        if (fd < 0) break;
        fill[nfill++] = fd;
    }
    st_file_t *nf = NULL;
    assert_int_equal(st_log__fcache_keep(c, &slot[40], dir, 40, ".log", 0, &nf), ST_E_NOFILE);
    assert_null(nf);
    assert_null(slot[40].file);
    st_log__fcache_stats(c, &st);
    assert_int_equal(st.nofile, 1);
    assert_int_equal(st.open_files, 3);
    st_file_release(held[0]);
    assert_int_equal(st_log__fcache_keep(c, &slot[40], dir, 40, ".log", 0, &nf), ST_OK);
    assert_int_equal(fc_first_word(nf), 40);
    st_file_release(nf);
    for (int i = 1; i < 3; i++) st_file_release(held[i]);
    for (int i = 0; i < nfill; i++) close(fill[i]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);

    for (int i = 0; i < FC_FILES; i++) st_log__fcache_forget(c, &slot[i]);
    st_log__fcache_stats(c, &st);
    assert_int_equal(st.open_files, 0);
    st_log__fcache_destroy(c);
    assert_int_equal(count_open_fds(), base_fds);
    unit_tmpdir_remove(root);
}

/* Threads keep, read and release files of a cache far smaller than their
 * working set, each slot behind its own mutex as a log's lock guards its
 * segments: every read sees its own file's bytes, never a descriptor
 * another thread closed or reused (run under ThreadSanitizer too). */
typedef struct fc_shared {
    st_fcache_t *c;
    const char *dir;
    st_fslot_t slot[FC_FILES];
    pthread_mutex_t lock[FC_FILES];
    int bad;
    uint64_t seed;
} fc_shared_t;

static void *fc_worker(void *arg) {
    fc_shared_t *sh = arg;
    uint64_t x = __atomic_add_fetch(&sh->seed, 0x9E3779B97F4A7C15ull, __ATOMIC_RELAXED);
    st_file_t *kept[4] = {0};
    int kept_i[4] = {0};
    for (int it = 0; it < 20000; it++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int i = (int)(x % FC_FILES), k = it % 4;
        st_file_t *f;
        pthread_mutex_lock(&sh->lock[i]);
        st_err_t e = st_log__fcache_keep(sh->c, &sh->slot[i], sh->dir, i, ".log", 0, &f);
        pthread_mutex_unlock(&sh->lock[i]);
        if (e) {
            __atomic_store_n(&sh->bad, 1, __ATOMIC_RELAXED);
            break;
        }
        /* a few files are held a while, as a response in flight does */
        if (kept[k]) {
            int64_t v = -1;
            size_t got = 0;
            if (st_pread_all(kept[k]->fd, &v, sizeof v, 0, &got) || v != kept_i[k])
                __atomic_store_n(&sh->bad, 1, __ATOMIC_RELAXED);
            st_file_release(kept[k]);
        }
        kept[k] = f;
        kept_i[k] = i;
    }
    for (int k = 0; k < 4; k++) st_file_release(kept[k]);
    return NULL;
}

static void test_fcache_threads(void **state) {
    (void)state;
    char *root = unit_tmpdir();
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/files", root);
    fc_make_files(dir);
    fc_shared_t *sh = st_calloc(1, sizeof *sh);
    sh->c = st_log__fcache_new(8);
    sh->dir = dir;
    for (int i = 0; i < FC_FILES; i++) pthread_mutex_init(&sh->lock[i], NULL);
    pthread_t th[4];
    for (int t = 0; t < 4; t++) pthread_create(&th[t], NULL, fc_worker, sh);
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    assert_int_equal(sh->bad, 0);
    st_log_file_stats_t st;
    st_log__fcache_stats(sh->c, &st);
    assert_true(st.open_files <= 8);
    assert_true(st.evictions > 1000);
    for (int i = 0; i < FC_FILES; i++) {
        st_log__fcache_forget(sh->c, &sh->slot[i]);
        pthread_mutex_destroy(&sh->lock[i]);
    }
    st_log__fcache_destroy(sh->c);
    free(sh);
    unit_tmpdir_remove(root);
}

/* flush.messages asks the flusher once that many offsets are unsynced;
 * flush.ms has the janitor ask once that long has passed since the last
 * fsync; neither flushes a log that has nothing unsynced. */

/* ======================================================================
 * Truncation and follower appends (the metadata log's Raft, KIP-595)
 * ==================================================================== */

static void expect_epoch_end(st_log_t *log, int32_t ask, int32_t want_epoch, int64_t want_end) {
    int32_t ep;
    int64_t end;
    st_log_end_offset_for_epoch(log, ask, &ep, &end);
    if (ep != want_epoch || end != want_end)
        fail_msg("end offset for epoch %d: (%d, %lld), want (%d, %lld)", ask, ep, (long long)end,
                 want_epoch, (long long)want_end);
}

/* Drop model batches from the one holding offset on (the log's cut). */
static void model_truncate(model_t *md, int64_t offset) {
    while (md->nb && md->b[md->nb - 1].last >= offset) model_pop(md);
}

static int64_t first_of_epoch(const model_t *md, int32_t epoch) {
    for (int i = 0; i < md->nb; i++)
        if (md->b[i].epoch == epoch) return md->b[i].base;
    return -1;
}

/* A follower's batch: built, stamped by the test, appended as it is. */
static st_err_t follower_batch(env_t *e, int n, int64_t base, int32_t epoch) {
    tbatch_t *tb = st_malloc(sizeof *tb);
    st_buf_t b;
    st_buf_init(&b);
    size_t size = build_simple(&b, tb, n, TC_NONE, 1700000500000, 3, 30, e->md.label);
    st_batch_stamp(b.data, base, epoch, -1);
    st_append_info_t info;
    st_err_t rc = st_log_append_as_follower(e->log, b.data, b.len, st_now_ms(), &info);
    if (!rc) {
        assert_true(info.base_offset == base && info.last_offset == base + n - 1);
        e->md.label += (uint64_t)n;
        if (e->md.nb == e->md.capb) {
            e->md.capb = e->md.capb ? e->md.capb * 2 : 64;
            e->md.b = st_realloc(e->md.b, (size_t)e->md.capb * sizeof *e->md.b);
        }
        mbatch_t *mb = &e->md.b[e->md.nb++];
        *mb = (mbatch_t){base, base + n - 1, epoch, size, st_malloc(size)};
        memcpy(mb->bytes, b.data, size);
        e->md.leo = base + n;
        st_log_set_high_watermark(e->log, e->md.leo);
    }
    st_buf_fini(&b);
    free(tb);
    return rc;
}

static void verify_all(env_t *e) {
    st_log_offsets_t o;
    st_log_offsets(e->log, &o);
    assert_true(o.leo == e->md.leo);
    st_log_set_high_watermark(e->log, e->md.leo);
    verify_reads(e, o.log_start_offset, 1 << 20);
    verify_every_offset(e, o.log_start_offset);
    check_index_invariants(e);
}

static void test_log_truncate_and_follower_append(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 3000, 300);
    append_many(&e, 30, 4, 1700000000000, 1);
    append_many(&e, 30, 4, 1700000100000, 3);
    append_many(&e, 30, 4, 1700000200000, 5);
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_true(o.nsegments >= 4);
    int64_t s3 = first_of_epoch(&e.md, 3), s5 = first_of_epoch(&e.md, 5);
    expect_epoch_end(e.log, 0, -1, -1);
    expect_epoch_end(e.log, 1, 1, s3);
    expect_epoch_end(e.log, 2, 1, s3);
    expect_epoch_end(e.log, 4, 3, s5);
    expect_epoch_end(e.log, 9, 5, e.md.leo);
    assert_int_equal(st_log_flush(e.log), ST_OK);

    /* At a batch boundary inside epoch 3: epoch 5 goes, segments after go,
     * the flushed offset and high watermark come down. */
    int64_t cut = e.md.b[45].base;
    assert_true(cut > s3 && cut < s5);
    assert_int_equal(st_log_truncate_to(e.log, cut), ST_OK);
    model_truncate(&e.md, cut);
    st_log_offsets(e.log, &o);
    assert_true(o.leo == cut && o.high_watermark == cut && o.flushed_offset == cut);
    expect_epoch_end(e.log, 9, 3, cut);
    assert_int_equal(st_log_latest_epoch(e.log), 3);
    verify_all(&e);

    /* Inside a batch: the whole batch goes (Kafka's truncateTo). */
    const mbatch_t *mb = &e.md.b[e.md.nb - 3];
    while (mb->last == mb->base) mb--;
    int64_t inside = mb->base + 1, expect_leo = mb->base;
    assert_int_equal(st_log_truncate_to(e.log, inside), ST_OK);
    model_truncate(&e.md, inside);
    assert_true(e.md.leo == expect_leo);
    verify_all(&e);

    /* At and past the end: nothing; below the start: refused. */
    assert_int_equal(st_log_truncate_to(e.log, e.md.leo), ST_OK);
    assert_int_equal(st_log_truncate_to(e.log, e.md.leo + 100), ST_OK);
    int64_t low;
    assert_int_equal(st_log_delete_records(e.log, e.md.b[2].base, &low), ST_OK);
    assert_int_equal(st_log_truncate_to(e.log, e.md.b[1].base), ST_E_OFFSET_OUT_OF_RANGE);

    /* Follower appends: the offsets and epochs they carry are kept; one that
     * does not continue the log, or goes back in epoch, is refused whole. */
    assert_int_equal(follower_batch(&e, 3, e.md.leo + 1, 7), ST_E_INVAL);
    assert_int_equal(follower_batch(&e, 3, e.md.leo, 2), ST_E_INVAL);
    int64_t s7 = e.md.leo;
    for (int i = 0; i < 40; i++) assert_int_equal(follower_batch(&e, 1 + i % 4, e.md.leo, 7), ST_OK);
    int64_t s8 = e.md.leo;
    for (int i = 0; i < 10; i++) assert_int_equal(follower_batch(&e, 2, e.md.leo, 8), ST_OK);
    expect_epoch_end(e.log, 6, 3, s7);
    expect_epoch_end(e.log, 7, 7, s8);
    expect_epoch_end(e.log, 8, 8, e.md.leo);
    verify_all(&e);

    /* Truncating to a segment's first offset leaves it, empty, as the
     * active segment. */
    int64_t seg_base = -1;
    pthread_mutex_lock(&e.log->lock);
    for (int i = e.log->nsegs - 1; i > 0 && seg_base < 0; i--)
        if (e.log->segs[i]->base_offset > s7 && e.log->segs[i]->base_offset < s8)
            seg_base = e.log->segs[i]->base_offset;
    pthread_mutex_unlock(&e.log->lock);
    assert_true(seg_base > 0);
    assert_int_equal(st_log_truncate_to(e.log, seg_base), ST_OK);
    model_truncate(&e.md, seg_base);
    expect_epoch_end(e.log, 8, 7, seg_base);
    verify_all(&e);
    assert_int_equal(follower_batch(&e, 2, e.md.leo, 9), ST_OK);
    verify_all(&e);

    /* What was cut stays cut after a clean and after an unclean restart. */
    env_close(&e);
    env_open(&e);
    expect_epoch_end(e.log, 8, 7, seg_base);
    expect_epoch_end(e.log, 9, 9, e.md.leo);
    verify_all(&e);
    env_t c;
    crash_copy(&e, &c);
    env_fini(&e);
    env_open(&c);
    expect_epoch_end(c.log, 9, 9, c.md.leo);
    verify_all(&c);
    env_fini(&c);
}

static void test_log_flush_messages_and_ms(void **state) {
    (void)state;
    env_t e;
    env_init(&e, 1 << 20, 4096);
    st_log_config_t cfg = e.cfg;
    cfg.flush_messages = 5;
    st_log_set_config(e.log, &cfg);
    append_batch(&e, 2, TC_NONE, 1700000000000, 1, 0);
    append_batch(&e, 2, TC_NONE, 1700000000100, 1, 0);
    st_log_offsets_t o;
    st_log_offsets(e.log, &o);
    assert_true(o.flushed_offset == 0 && o.leo == 4);
    assert_int_equal(e.log->flush_queued, 0); /* 4 < 5: not asked */
    append_batch(&e, 1, TC_NONE, 1700000000200, 1, 0);
    assert_int_equal(e.log->flush_queued, 1); /* 5: queued for the flusher */
    st_logmgr_start(e.m);
    assert_true(wait_flushed(e.log, 5));

    /* flush.ms */
    cfg.flush_messages = 0;
    cfg.flush_ms = 50;
    st_log_set_config(e.log, &cfg);
    assert_true(st_log__flush_due(e.log) == INT64_MAX); /* nothing unsynced */
    append_batch(&e, 3, TC_NONE, 1700000000300, 1, 0);
    int64_t due = st_log__flush_due(e.log);
    assert_true(due != INT64_MAX && due <= st_mono_ms() + 50);
    assert_true(wait_flushed(e.log, 8));
    assert_true(st_log__flush_due(e.log) == INT64_MAX);
    /* neither set: nothing asks */
    cfg.flush_ms = 0;
    st_log_set_config(e.log, &cfg);
    append_batch(&e, 1, TC_NONE, 1700000000400, 1, 0);
    assert_true(st_log__flush_due(e.log) == INT64_MAX);
    env_fini(&e);
}

int main(void) {
    unit_seed("log");
    st_log_set_level(ST_LOG_ERROR); /* recovery warnings are expected here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_records_every_codec),
        cmocka_unit_test(test_batch_large_compressed),
        cmocka_unit_test(test_batch_validate),
        cmocka_unit_test(test_batch_header_and_stamp),
        cmocka_unit_test(test_log_append_and_read),
        cmocka_unit_test(test_log_roll_and_indexes),
        cmocka_unit_test(test_log_offset_for_time),
        cmocka_unit_test(test_log_delete_records),
        cmocka_unit_test(test_log_retention_bytes),
        cmocka_unit_test(test_log_retention_ms),
        cmocka_unit_test(test_log_clean_reopen),
        cmocka_unit_test(test_log_reopen_keeps_newest_timestamp),
        cmocka_unit_test(test_log_crash_torn_tail),
        cmocka_unit_test(test_log_crash_bad_crc),
        cmocka_unit_test(test_log_crash_intact),
        cmocka_unit_test(test_log_crash_unsynced_segments),
        cmocka_unit_test(test_log_crash_after_truncation),
        cmocka_unit_test(test_log_index_rebuild),
        cmocka_unit_test(test_log_hw_checkpoint),
        cmocka_unit_test(test_logmgr_lock),
        cmocka_unit_test(test_logmgr_group_commit_flush),
        cmocka_unit_test(test_log_roll_syncs_on_the_flusher),
        cmocka_unit_test(test_logmgr_delete_log_and_append_time),
        cmocka_unit_test(test_logmgr_open_files_bounded),
        cmocka_unit_test(test_fcache_bound_and_eviction),
        cmocka_unit_test(test_fcache_threads),
        cmocka_unit_test(test_log_flush_messages_and_ms),
        cmocka_unit_test(test_log_truncate_and_follower_append),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

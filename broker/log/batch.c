/*
 * batch.c - record batch v2 parsing, produce-side validation, stamping and
 * record iteration (with decompression for the four codecs Kafka uses).
 *
 * Everything here reads hostile bytes: lengths are checked against what
 * remains before use, and a bad batch is reported, never trusted.
 */
#include "batch.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <zlib.h>
#include <zstd.h>

st_err_t st_batch_header(const uint8_t *p, size_t avail, st_batch_info_t *out) {
    if (avail < ST_BATCH_HEADER_SIZE) return ST_E_TRUNCATED;
    int32_t blen = (int32_t)st_be32_get(p + ST_BATCH_LENGTH_OFFSET);
    if (blen < ST_BATCH_HEADER_SIZE - ST_BATCH_LOG_OVERHEAD || blen > INT32_MAX - 12)
        return ST_CORRUPT_BKPT;
    if (p[ST_BATCH_MAGIC_OFFSET] != 2) return ST_CORRUPT_BKPT;
    out->base_offset = (int64_t)st_be64_get(p);
    out->size = blen + ST_BATCH_LOG_OVERHEAD;
    out->leader_epoch = (int32_t)st_be32_get(p + ST_BATCH_EPOCH_OFFSET);
    out->attributes = (int16_t)st_be16_get(p + ST_BATCH_ATTR_OFFSET);
    out->last_offset_delta = (int32_t)st_be32_get(p + ST_BATCH_LAST_DELTA_OFFSET);
    out->base_timestamp = (int64_t)st_be64_get(p + ST_BATCH_BASE_TS_OFFSET);
    out->max_timestamp = (int64_t)st_be64_get(p + ST_BATCH_MAX_TS_OFFSET);
    out->record_count = (int32_t)st_be32_get(p + ST_BATCH_COUNT_OFFSET);
    if (out->last_offset_delta < 0) return ST_CORRUPT_BKPT;
    return ST_OK;
}

int st_batch_crc_ok(const uint8_t *batch, int32_t size) {
    uint32_t want = st_be32_get(batch + ST_BATCH_CRC_OFFSET);
    uint32_t got = st_crc32c(0, batch + ST_BATCH_ATTR_OFFSET, (size_t)size - ST_BATCH_ATTR_OFFSET);
    return want == got;
}

/* Walk plain (uncompressed) records; returns the count or -1 when the
 * bytes do not split into whole records. */
static int32_t count_records(const uint8_t *p, size_t len) {
    st_rd_t r;
    st_rd_init(&r, p, len);
    int32_t n = 0;
    while (st_rd_left(&r) > 0) {
        int64_t rlen = st_rd_varint(&r);
        if (r.err || rlen <= 0 || (uint64_t)rlen > st_rd_left(&r)) return -1;
        st_rd_bytes(&r, (size_t)rlen);
        n++;
    }
    return r.err ? -1 : n;
}

st_err_t st_batches_validate(const uint8_t *p, size_t len, const st_batch_limits_t *lim,
                             int64_t now_ms, int *count, char *why, size_t whylen) {
    size_t pos = 0;
    int n = 0;
    if (len == 0) {
        snprintf(why, whylen, "empty record set");
        return ST_E_INVALID_RECORD;
    }
    while (pos < len) {
        st_batch_info_t b;
        if (len - pos < ST_BATCH_HEADER_SIZE) {
            snprintf(why, whylen, "truncated batch header at byte %zu", pos);
            return ST_E_CORRUPT_MESSAGE;
        }
        if (p[pos + ST_BATCH_MAGIC_OFFSET] != 2) {
            snprintf(why, whylen, "batch at byte %zu has magic %d; only 2 is accepted", pos,
                     p[pos + ST_BATCH_MAGIC_OFFSET]);
            return ST_E_CORRUPT_MESSAGE;
        }
        if (st_batch_header(p + pos, len - pos, &b)) {
            snprintf(why, whylen, "bad batch length at byte %zu", pos);
            return ST_E_CORRUPT_MESSAGE;
        }
        if ((size_t)b.size > len - pos) {
            snprintf(why, whylen, "batch at byte %zu claims %d bytes, %zu remain", pos, b.size,
                     len - pos);
            return ST_E_CORRUPT_MESSAGE;
        }
        if (lim->max_message_bytes > 0 && b.size > lim->max_message_bytes) {
            snprintf(why, whylen, "batch of %d bytes exceeds max.message.bytes %d", b.size,
                     lim->max_message_bytes);
            return ST_E_MESSAGE_TOO_LARGE;
        }
        if (!st_batch_crc_ok(p + pos, b.size)) {
            snprintf(why, whylen, "CRC32C mismatch in batch at byte %zu", pos);
            return ST_E_CORRUPT_MESSAGE;
        }
        int codec = b.attributes & ST_ATTR_CODEC_MASK;
        if (codec > ST_CODEC_ZSTD) {
            snprintf(why, whylen, "unknown compression codec %d", codec);
            return ST_E_CORRUPT_MESSAGE;
        }
        if (b.record_count <= 0 || b.last_offset_delta != b.record_count - 1) {
            snprintf(why, whylen, "record count %d does not match lastOffsetDelta %d",
                     b.record_count, b.last_offset_delta);
            return ST_E_INVALID_RECORD;
        }
        if (codec == ST_CODEC_NONE) {
            int32_t got = count_records(p + pos + ST_BATCH_HEADER_SIZE,
                                        (size_t)b.size - ST_BATCH_HEADER_SIZE);
            if (got != b.record_count) {
                snprintf(why, whylen, "batch holds %d whole records, header says %d", got,
                         b.record_count);
                return ST_E_INVALID_RECORD;
            }
        }
        if (!lim->log_append_time && !(b.attributes & ST_ATTR_LOG_APPEND_TIME)) {
            if ((lim->ts_before_max_ms < INT64_MAX &&
                 b.base_timestamp < now_ms - lim->ts_before_max_ms) ||
                (lim->ts_after_max_ms < INT64_MAX &&
                 b.max_timestamp > now_ms + lim->ts_after_max_ms)) {
                snprintf(why, whylen, "timestamp %lld is out of the accepted range",
                         (long long)(b.base_timestamp < now_ms ? b.base_timestamp : b.max_timestamp));
                return ST_E_INVALID_TIMESTAMP;
            }
        }
        pos += (size_t)b.size;
        n++;
    }
    *count = n;
    return ST_OK;
}

int64_t st_batch_stamp(uint8_t *batch, int64_t base_offset, int32_t leader_epoch,
                       int64_t log_append_ms) {
    st_be64_put(batch, (uint64_t)base_offset);
    st_be32_put(batch + ST_BATCH_EPOCH_OFFSET, (uint32_t)leader_epoch);
    int32_t size = (int32_t)st_be32_get(batch + ST_BATCH_LENGTH_OFFSET) + ST_BATCH_LOG_OVERHEAD;
    if (log_append_ms >= 0) {
        uint16_t attr = st_be16_get(batch + ST_BATCH_ATTR_OFFSET);
        st_be16_put(batch + ST_BATCH_ATTR_OFFSET, (uint16_t)(attr | ST_ATTR_LOG_APPEND_TIME));
        st_be64_put(batch + ST_BATCH_MAX_TS_OFFSET, (uint64_t)log_append_ms);
        uint32_t crc =
            st_crc32c(0, batch + ST_BATCH_ATTR_OFFSET, (size_t)size - ST_BATCH_ATTR_OFFSET);
        st_be32_put(batch + ST_BATCH_CRC_OFFSET, crc);
    }
    int32_t delta = (int32_t)st_be32_get(batch + ST_BATCH_LAST_DELTA_OFFSET);
    return base_offset + delta + 1;
}

/* ---- decompression ------------------------------------------------------ */

#define ST_MAX_DECOMPRESSED (256 << 20) /* a bound on what one batch may inflate to */

static st_err_t gunzip(const uint8_t *p, size_t len, st_buf_t *out) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return ST_E_NOMEM;
    z.next_in = (Bytef *)p;
    z.avail_in = (uInt)len;
    st_err_t e = ST_OK;
    for (;;) {
        st_buf_reserve(out, 64 * 1024);
        z.next_out = out->data + out->len;
        z.avail_out = (uInt)(out->cap - out->len);
        int rc = inflate(&z, Z_NO_FLUSH);
        out->len = out->cap - z.avail_out;
        if (rc == Z_STREAM_END) break;
        if (rc != Z_OK || out->len > ST_MAX_DECOMPRESSED || (z.avail_in == 0 && z.avail_out)) {
            e = ST_CORRUPT_BKPT;
            break;
        }
    }
    inflateEnd(&z);
    return e;
}

static st_err_t snappy_block(const uint8_t *p, size_t len, st_buf_t *out) {
    size_t ulen;
    if (snappy_uncompressed_length((const char *)p, len, &ulen) != SNAPPY_OK ||
        ulen > ST_MAX_DECOMPRESSED)
        return ST_CORRUPT_BKPT;
    st_buf_reserve(out, ulen);
    if (snappy_uncompress((const char *)p, len, (char *)out->data + out->len, &ulen) != SNAPPY_OK)
        return ST_CORRUPT_BKPT;
    out->len += ulen;
    return ST_OK;
}

/* Java clients frame snappy the xerial way: an 8-byte magic, two int32
 * versions, then blocks of [int32 length][raw snappy].  Others send one raw
 * block.  Both are accepted. */
static st_err_t unsnappy(const uint8_t *p, size_t len, st_buf_t *out) {
    static const uint8_t magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    if (len < 16 || memcmp(p, magic, 8) != 0) return snappy_block(p, len, out);
    size_t pos = 16;
    while (pos < len) {
        if (len - pos < 4) return ST_CORRUPT_BKPT;
        uint32_t blen = st_be32_get(p + pos);
        pos += 4;
        if (blen > len - pos) return ST_CORRUPT_BKPT;
        st_err_t e = snappy_block(p + pos, blen, out);
        if (e) return e;
        pos += blen;
    }
    return ST_OK;
}

static st_err_t unlz4(const uint8_t *p, size_t len, st_buf_t *out) {
    LZ4F_dctx *ctx;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION))) return ST_E_NOMEM;
    st_err_t e = ST_OK;
    size_t pos = 0;
    for (;;) {
        st_buf_reserve(out, 64 * 1024);
        size_t dst = out->cap - out->len, src = len - pos;
        size_t rc = LZ4F_decompress(ctx, out->data + out->len, &dst, p + pos, &src, NULL);
        if (LZ4F_isError(rc)) {
            e = ST_CORRUPT_BKPT;
            break;
        }
        out->len += dst;
        pos += src;
        if (rc == 0) break;
        if (out->len > ST_MAX_DECOMPRESSED || (pos == len && dst == 0)) {
            e = ST_CORRUPT_BKPT;
            break;
        }
    }
    LZ4F_freeDecompressionContext(ctx);
    return e;
}

static st_err_t unzstd(const uint8_t *p, size_t len, st_buf_t *out) {
    ZSTD_DStream *ds = ZSTD_createDStream();
    if (!ds) return ST_E_NOMEM;
    ZSTD_initDStream(ds);
    ZSTD_inBuffer in = {p, len, 0};
    st_err_t e = ST_OK;
    for (;;) {
        st_buf_reserve(out, 64 * 1024);
        ZSTD_outBuffer ob = {out->data + out->len, out->cap - out->len, 0};
        size_t rc = ZSTD_decompressStream(ds, &ob, &in);
        out->len += ob.pos;
        if (ZSTD_isError(rc)) {
            e = ST_CORRUPT_BKPT;
            break;
        }
        if (rc == 0 && in.pos == in.size) break;
        if (out->len > ST_MAX_DECOMPRESSED || (in.pos == in.size && ob.pos == 0)) {
            e = ST_CORRUPT_BKPT;
            break;
        }
    }
    ZSTD_freeDStream(ds);
    return e;
}

st_err_t st_batch_decompress(const uint8_t *batch, int32_t size, st_buf_t *out) {
    const uint8_t *p = batch + ST_BATCH_HEADER_SIZE;
    size_t len = (size_t)size - ST_BATCH_HEADER_SIZE;
    switch (st_be16_get(batch + ST_BATCH_ATTR_OFFSET) & ST_ATTR_CODEC_MASK) {
    case ST_CODEC_NONE: st_buf_put(out, p, len); return ST_OK;
    case ST_CODEC_GZIP: return gunzip(p, len, out);
    case ST_CODEC_SNAPPY: return unsnappy(p, len, out);
    case ST_CODEC_LZ4: return unlz4(p, len, out);
    case ST_CODEC_ZSTD: return unzstd(p, len, out);
    default: return ST_CORRUPT_BKPT;
    }
}

st_err_t st_batch_foreach_record(const uint8_t *batch, int32_t size, st_record_cb fn, void *arg) {
    st_batch_info_t b;
    st_err_t e = st_batch_header(batch, (size_t)size, &b);
    if (e) return e;
    st_buf_t plain;
    st_buf_init(&plain);
    const uint8_t *p;
    size_t len;
    if ((b.attributes & ST_ATTR_CODEC_MASK) == ST_CODEC_NONE) {
        p = batch + ST_BATCH_HEADER_SIZE;
        len = (size_t)size - ST_BATCH_HEADER_SIZE;
    } else {
        e = st_batch_decompress(batch, size, &plain);
        if (e) goto out;
        p = plain.data;
        len = plain.len;
    }
    st_rd_t r;
    st_rd_init(&r, p, len);
    for (int32_t i = 0; i < b.record_count && st_rd_left(&r) > 0; i++) {
        int64_t rlen = st_rd_varint(&r);
        const uint8_t *body = rlen > 0 ? st_rd_bytes(&r, (size_t)rlen) : NULL;
        if (!body) {
            e = ST_CORRUPT_BKPT;
            goto out;
        }
        st_rd_t rr;
        st_rd_init(&rr, body, (size_t)rlen);
        st_record_t rec;
        st_rd_i8(&rr); /* record attributes: unused */
        int64_t ts_delta = st_rd_varint(&rr);
        int64_t off_delta = st_rd_varint(&rr);
        rec.offset = b.base_offset + off_delta;
        rec.timestamp = (b.attributes & ST_ATTR_LOG_APPEND_TIME) ? b.max_timestamp
                                                                 : b.base_timestamp + ts_delta;
        int64_t kl = st_rd_varint(&rr);
        rec.key_len = kl < 0 ? -1 : (int32_t)kl;
        rec.key = kl > 0 ? st_rd_bytes(&rr, (size_t)kl) : NULL;
        int64_t vl = st_rd_varint(&rr);
        rec.value_len = vl < 0 ? -1 : (int32_t)vl;
        rec.value = vl > 0 ? st_rd_bytes(&rr, (size_t)vl) : NULL;
        rec.header_count = (int32_t)st_rd_varint(&rr);
        rec.headers = rr.p + rr.pos;
        rec.headers_len = st_rd_left(&rr);
        if (rr.err || kl < -1 || vl < -1 || kl > INT32_MAX || vl > INT32_MAX) {
            e = ST_CORRUPT_BKPT;
            goto out;
        }
        if (fn(&rec, arg)) break;
    }
out:
    st_buf_fini(&plain);
    return e;
}

void st_batch_build(st_buf_t *out, const st_batch_record_t *recs, int n, int64_t timestamp_ms) {
    size_t start = out->len;
    uint8_t *h = st_buf_extend(out, ST_BATCH_HEADER_SIZE);
    memset(h, 0, ST_BATCH_HEADER_SIZE);
    for (int i = 0; i < n; i++) {
        const st_batch_record_t *r = &recs[i];
        int64_t body = 1 + (int64_t)st_varint_size(0) + (int64_t)st_varint_size(i) +
                       (int64_t)st_varint_size(r->key_len) + (r->key_len > 0 ? r->key_len : 0) +
                       (int64_t)st_varint_size(r->value_len) +
                       (r->value_len > 0 ? r->value_len : 0) + (int64_t)st_varint_size(0);
        st_buf_put_varint(out, body);
        st_buf_put_i8(out, 0);       /* attributes */
        st_buf_put_varint(out, 0);   /* timestamp delta */
        st_buf_put_varint(out, i);   /* offset delta */
        st_buf_put_varint(out, r->key_len);
        if (r->key_len > 0) st_buf_put(out, r->key, (size_t)r->key_len);
        st_buf_put_varint(out, r->value_len);
        if (r->value_len > 0) st_buf_put(out, r->value, (size_t)r->value_len);
        st_buf_put_varint(out, 0);   /* headers */
    }
    uint8_t *b = out->data + start;
    size_t size = out->len - start;
    st_be64_put(b, 0);
    st_be32_put(b + ST_BATCH_LENGTH_OFFSET, (uint32_t)(size - ST_BATCH_LOG_OVERHEAD));
    st_be32_put(b + ST_BATCH_EPOCH_OFFSET, (uint32_t)-1);
    b[ST_BATCH_MAGIC_OFFSET] = 2;
    st_be16_put(b + ST_BATCH_ATTR_OFFSET, 0);
    st_be32_put(b + ST_BATCH_LAST_DELTA_OFFSET, (uint32_t)(n - 1));
    st_be64_put(b + ST_BATCH_BASE_TS_OFFSET, (uint64_t)timestamp_ms);
    st_be64_put(b + ST_BATCH_MAX_TS_OFFSET, (uint64_t)timestamp_ms);
    st_be64_put(b + 43, (uint64_t)-1); /* producer id */
    st_be16_put(b + 51, (uint16_t)-1); /* producer epoch */
    st_be32_put(b + 53, (uint32_t)-1); /* base sequence */
    st_be32_put(b + ST_BATCH_COUNT_OFFSET, (uint32_t)n);
    st_be32_put(b + ST_BATCH_CRC_OFFSET,
                st_crc32c(0, b + ST_BATCH_ATTR_OFFSET, size - ST_BATCH_ATTR_OFFSET));
}

static int keyless_cb(const st_record_t *r, void *arg) {
    if (r->key_len >= 0) return 0;
    *(int *)arg = 1;
    return 1;
}

st_err_t st_batches_check_keys(const uint8_t *p, size_t len, char *why, size_t whylen) {
    for (size_t pos = 0; pos + ST_BATCH_HEADER_SIZE <= len;) {
        st_batch_info_t b;
        if (st_batch_header(p + pos, len - pos, &b) || (size_t)b.size > len - pos) break;
        int keyless = 0;
        st_err_t e = st_batch_foreach_record(p + pos, b.size, keyless_cb, &keyless);
        if (e || keyless) {
            snprintf(why, whylen, "%s", e ? "cannot read the records of a batch"
                                          : "compacted topics accept only records with a key");
            return e ? ST_E_CORRUPT_MESSAGE : ST_E_INVALID_RECORD;
        }
        pos += (size_t)b.size;
    }
    return ST_OK;
}

typedef struct ts_search {
    int64_t target, from;
    int64_t offset, ts;
    int found;
} ts_search_t;

static int ts_record_cb(const st_record_t *r, void *arg) {
    ts_search_t *t = arg;
    if (r->offset >= t->from && r->timestamp >= t->target) {
        t->offset = r->offset;
        t->ts = r->timestamp;
        t->found = 1;
        return 1;
    }
    return 0;
}

int st_batch_first_at_time(const uint8_t *batch, int32_t size, int64_t from, int64_t ts,
                           int64_t *offset, int64_t *found_ts) {
    ts_search_t t = {ts, from, 0, 0, 0};
    st_batch_foreach_record(batch, size, ts_record_cb, &t);
    if (t.found) {
        *offset = t.offset;
        *found_ts = t.ts;
    }
    return t.found;
}

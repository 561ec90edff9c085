/*
 * batch.c - record batch v2: header parsing, produce-side validation (every
 * record, compressed batches streamed), maxTimestamp correction and
 * recompression, stamping, record iteration, building.
 *
 * Everything here reads hostile bytes: lengths are checked against what
 * remains before use, arithmetic on what a batch claims is checked for
 * overflow, and a bad batch is reported with the batch, record and field
 * at fault, never trusted.  Decompression goes through compress_int.h, so
 * memory stays bounded whatever a payload inflates to.
 *
 * Threads: no state; a call uses only its arguments.  Produce-side
 * validation of compressed batches runs on the server's request workers,
 * never on an I/O thread.
 */
#include "batch.h"

#include "compress_int.h"

#include <stdarg.h>
#include <stdlib.h>

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
    out->producer_id = (int64_t)st_be64_get(p + ST_BATCH_PRODUCER_ID_OFFSET);
    out->producer_epoch = (int16_t)st_be16_get(p + ST_BATCH_PRODUCER_EPOCH_OFFSET);
    out->base_sequence = (int32_t)st_be32_get(p + ST_BATCH_BASE_SEQUENCE_OFFSET);
    out->record_count = (int32_t)st_be32_get(p + ST_BATCH_COUNT_OFFSET);
    if (out->last_offset_delta < 0) return ST_CORRUPT_BKPT;
    return ST_OK;
}

int st_batch_crc_ok(const uint8_t *batch, int32_t size) {
    uint32_t want = st_be32_get(batch + ST_BATCH_CRC_OFFSET);
    uint32_t got = st_crc32c(0, batch + ST_BATCH_ATTR_OFFSET, (size_t)size - ST_BATCH_ATTR_OFFSET);
    return want == got;
}

static void crc_update(uint8_t *batch, size_t size) {
    st_be32_put(batch + ST_BATCH_CRC_OFFSET,
                st_crc32c(0, batch + ST_BATCH_ATTR_OFFSET, size - ST_BATCH_ATTR_OFFSET));
}

int st_batch_target_parse(const char *name, st_batch_target_t *out) {
    static const char *const names[] = {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"};
    for (size_t i = 0; i < ST_ARRAY_SIZE(names); i++) {
        if (!strcmp(name, names[i])) {
            *out = (st_batch_target_t)i;
            return 0;
        }
    }
    return -1;
}

const char *st_batch_codec_name(int codec) {
    switch (codec) {
    case ST_CODEC_NONE: return "uncompressed";
    case ST_CODEC_GZIP: return "gzip";
    case ST_CODEC_SNAPPY: return "snappy";
    case ST_CODEC_LZ4: return "lz4";
    case ST_CODEC_ZSTD: return "zstd";
    default: return "unknown";
    }
}

/* ---- a reader over a batch's plain records, a piece at a time ------------- */

typedef struct srd {
    st_log__inflate_t f;
    const uint8_t *p; /* the current piece */
    size_t n, pos;
    int64_t base;     /* plain offset of p[0] */
    st_buf_t *tee;    /* when set, every byte consumed is appended here */
    st_log__deflate_t *sink; /* when set, every piece is fed to it */
    st_err_t err;     /* sticky: the inflater's or the sink's */
    int sink_failed;
    int eof;
} srd_t;

/* 1 when a byte is there; 0 at the end of the stream or on an error. */
static int srd_fill(srd_t *r) {
    while (r->pos == r->n) {
        if (r->eof || r->err) return 0;
        r->base += (int64_t)r->n;
        const uint8_t *p;
        size_t n;
        r->err = st_log__inflate_next(&r->f, &p, &n);
        if (r->err) return 0;
        if (n == 0) {
            r->eof = 1;
            r->n = r->pos = 0;
            return 0;
        }
        r->p = p;
        r->n = n;
        r->pos = 0;
        if (r->sink && st_log__deflate_write(r->sink, p, n)) {
            r->err = r->sink->err;
            r->sink_failed = 1;
            return 0;
        }
    }
    return 1;
}

static inline int64_t srd_tell(const srd_t *r) { return r->base + (int64_t)r->pos; }

static int srd_byte(srd_t *r, uint8_t *out) {
    if (!srd_fill(r)) return 0;
    *out = r->p[r->pos++];
    if (r->tee) st_buf_put(r->tee, out, 1);
    return 1;
}

/* A zigzag varint of up to 64 bits: 1, 0 at the end of the stream (or an
 * error), -1 when it is longer than 10 bytes. */
static int srd_varint_slow(srd_t *r, int64_t *v) {
    uint64_t u = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
        uint8_t c;
        if (!srd_byte(r, &c)) return 0;
        u |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return 1;
        }
    }
    return -1;
}

static inline int srd_varint(srd_t *r, int64_t *v) {
    if (r->tee || r->n - r->pos < 10) return srd_varint_slow(r, v);
    /* the common case: the whole varint is in this piece */
    const uint8_t *p = r->p + r->pos;
    uint64_t u = 0;
    for (int i = 0; i < 10; i++) {
        u |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            r->pos += (size_t)i + 1;
            *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return 1;
        }
    }
    return -1;
}

static inline int srd_skip(srd_t *r, int64_t n) {
    if (!r->tee && (int64_t)(r->n - r->pos) >= n) {
        r->pos += (size_t)n;
        return 1;
    }
    while (n > 0) {
        if (!srd_fill(r)) return 0;
        size_t take = (size_t)ST_MIN((int64_t)(r->n - r->pos), n);
        if (r->tee) st_buf_put(r->tee, r->p + r->pos, take);
        r->pos += take;
        n -= (int64_t)take;
    }
    return 1;
}

/* ---- one record ----------------------------------------------------------------
 *
 *   length varint | attributes int8 | timestampDelta varlong |
 *   offsetDelta varint | keyLength varint (-1 null) | key |
 *   valueLength varint (-1 null) | value | headerCount varint |
 *   headers: keyLength varint (>= 0) | key | valueLength varint (-1 null) | value
 *
 * Kafka's DefaultRecord.readFrom refuses (InvalidRecordException, wire code
 * INVALID_RECORD) a length past the batch, negative key and value lengths
 * other than -1, a negative or impossible header count, a negative header
 * key length, and a record whose fields do not end exactly at its length.
 */

enum { PTR_NONE, PTR_DIRECT, PTR_TEE };

typedef struct walk {
    srd_t r;
    const st_batch_info_t *b;
    int strict; /* produce: offset deltas must count 0, 1, 2, ... */
    int ptrs;   /* what the record's pointers point into */
    st_buf_t tee;
} walk_t;

static void walk_init(walk_t *w, const uint8_t *batch, const st_batch_info_t *b, int32_t size,
                      int64_t limit, int want_ptrs) {
    memset(w, 0, sizeof *w);
    int codec = b->attributes & ST_ATTR_CODEC_MASK;
    st_log__inflate_init(&w->r.f, codec, batch + ST_BATCH_HEADER_SIZE,
                         (size_t)size - ST_BATCH_HEADER_SIZE, limit);
    w->b = b;
    /* Uncompressed records are one piece: pointers go straight into it. */
    w->ptrs = codec == ST_CODEC_NONE ? PTR_DIRECT : want_ptrs ? PTR_TEE : PTR_NONE;
    st_buf_init(&w->tee);
    if (w->ptrs == PTR_TEE) w->r.tee = &w->tee;
}

static void walk_fini(walk_t *w) {
    st_log__inflate_fini(&w->r.f);
    st_buf_fini(&w->tee);
}

__attribute__((format(printf, 5, 6))) static st_err_t fail(walk_t *w, int32_t i, char *why,
                                                          size_t whylen, const char *fmt, ...) {
    if (w->r.err) {
        if (w->r.sink_failed)
            snprintf(why, whylen, "the batch rebuilt in the topic's codec exceeds max.message.bytes");
        else
            snprintf(why, whylen, "%s", w->r.f.why[0] ? w->r.f.why : st_err_msg(w->r.err));
        return w->r.err;
    }
    int n = snprintf(why, whylen, "record %d: ", (int)i);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < whylen) vsnprintf(why + n, whylen - (size_t)n, fmt, ap);
    va_end(ap);
    return ST_E_INVALID_RECORD;
}

static st_err_t field_varint(walk_t *w, int32_t i, int64_t end, const char *name, int64_t *v,
                             char *why, size_t whylen) {
    int rc = srd_varint(&w->r, v);
    if (rc == 0) return fail(w, i, why, whylen, "the records end inside its %s", name);
    if (rc < 0) return fail(w, i, why, whylen, "its %s is not a varint", name);
    if (srd_tell(&w->r) > end) return fail(w, i, why, whylen, "its %s runs past its end", name);
    return ST_OK;
}

/* Length-prefixed bytes of the record (key, value, a header's key or
 * value); min_len is -1 where null is allowed. */
static st_err_t field_bytes(walk_t *w, int32_t i, int64_t end, const char *name, int64_t min_len,
                            int64_t *len, int64_t *at, char *why, size_t whylen) {
    st_err_t e = field_varint(w, i, end, name, len, why, whylen);
    if (e) return e;
    if (*len < min_len)
        return fail(w, i, why, whylen, "its %s is negative (%lld)", name, (long long)*len);
    int64_t left = end - srd_tell(&w->r);
    if (*len > left)
        return fail(w, i, why, whylen, "its %s of %lld bytes runs past its end (%lld bytes left)",
                    name, (long long)*len, (long long)left);
    *at = srd_tell(&w->r);
    if (*len > 0 && !srd_skip(&w->r, *len))
        return fail(w, i, why, whylen, "the records end inside its %s", name);
    return ST_OK;
}

static inline int fvarint(const uint8_t **pp, const uint8_t *end, int64_t *v) {
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) { /* most fields of most records: one byte */
        *v = (int64_t)(*p >> 1) ^ -(int64_t)(*p & 1);
        *pp = p + 1;
        return 1;
    }
    uint64_t u = 0;
    for (int i = 0; i < 10 && p < end; i++) {
        uint8_t c = *p++;
        u |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *pp = p;
            *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return 1;
        }
    }
    return 0;
}

/* The hot path of uncompressed batches: the record lies in the one piece,
 * parsed with local pointers.  0 when it is not plainly valid; the careful
 * walk below, starting again from the same byte, then says why. */
static int fast_record(walk_t *w, int32_t i, st_record_t *rec) {
    srd_t *r = &w->r;
    const st_batch_info_t *b = w->b;
    const uint8_t *p = r->p + r->pos, *all = r->p + r->n;
    int64_t rlen, tsd, offd, kl, vl, hc;
    if (!fvarint(&p, all, &rlen) || rlen <= 0 || rlen > all - p) return 0;
    const uint8_t *body = p, *end = p + rlen;
    p++; /* attributes */
    if (!fvarint(&p, end, &tsd) || !fvarint(&p, end, &offd) || !fvarint(&p, end, &kl) || kl < -1 ||
        kl > end - p)
        return 0;
    const uint8_t *key = kl > 0 ? p : NULL;
    p += kl > 0 ? kl : 0;
    if (!fvarint(&p, end, &vl) || vl < -1 || vl > end - p) return 0;
    const uint8_t *value = vl > 0 ? p : NULL;
    p += vl > 0 ? vl : 0;
    if (!fvarint(&p, end, &hc) || hc < 0 || hc > end - p) return 0;
    const uint8_t *hdr = p;
    for (int64_t h = 0; h < hc; h++) {
        int64_t hk, hv;
        if (!fvarint(&p, end, &hk) || hk < 0 || hk > end - p) return 0;
        p += hk;
        if (!fvarint(&p, end, &hv) || hv < -1 || hv > end - p) return 0;
        p += hv > 0 ? hv : 0;
    }
    if (p != end || (w->strict && offd != i) || offd < 0 || offd > INT32_MAX ||
        __builtin_add_overflow(b->base_offset, offd, &rec->offset))
        return 0;
    if (b->attributes & ST_ATTR_LOG_APPEND_TIME) rec->timestamp = b->max_timestamp;
    else if (__builtin_add_overflow(b->base_timestamp, tsd, &rec->timestamp)) return 0;
    rec->key = key;
    rec->key_len = (int32_t)kl;
    rec->value = value;
    rec->value_len = (int32_t)vl;
    rec->header_count = (int32_t)hc;
    rec->headers = hdr;
    rec->headers_len = (size_t)(end - hdr);
    (void)body;
    r->pos = (size_t)(end - r->p);
    return 1;
}

static st_err_t read_record(walk_t *w, int32_t i, st_record_t *rec, char *why, size_t whylen) {
    srd_t *r = &w->r;
    const st_batch_info_t *b = w->b;
    st_err_t e;
    if (w->ptrs == PTR_DIRECT && srd_fill(r) && fast_record(w, i, rec)) return ST_OK;
    int64_t rlen;
    int rc = srd_varint(r, &rlen);
    if (rc == 0)
        return fail(w, i, why, whylen, "missing: the batch holds %d records, its header says %d",
                    (int)i, (int)b->record_count);
    if (rc < 0 || rlen < 0 || rlen > INT32_MAX)
        return fail(w, i, why, whylen, "its length is not valid");
    if (w->ptrs == PTR_DIRECT && rlen > (int64_t)(r->n - r->pos))
        return fail(w, i, why, whylen, "it claims %lld bytes, %zu remain in the batch",
                    (long long)rlen, r->n - r->pos);
    size_t direct_at = r->pos; /* PTR_DIRECT: the body's index in the one piece */
    if (w->ptrs == PTR_TEE) w->tee.len = 0;
    int64_t start = srd_tell(r), end = start + rlen;
    uint8_t attr;
    if (rlen == 0 || !srd_byte(r, &attr)) return fail(w, i, why, whylen, "it has no attributes");
    int64_t ts_delta, off_delta, kl, vl, hc, key_at = 0, val_at = 0;
    if ((e = field_varint(w, i, end, "timestamp delta", &ts_delta, why, whylen)) ||
        (e = field_varint(w, i, end, "offset delta", &off_delta, why, whylen)) ||
        (e = field_bytes(w, i, end, "key length", -1, &kl, &key_at, why, whylen)) ||
        (e = field_bytes(w, i, end, "value length", -1, &vl, &val_at, why, whylen)) ||
        (e = field_varint(w, i, end, "header count", &hc, why, whylen)))
        return e;
    if (hc < 0) return fail(w, i, why, whylen, "its header count is negative (%lld)", (long long)hc);
    if (hc > end - srd_tell(r))
        return fail(w, i, why, whylen, "its header count %lld exceeds its %lld bytes left",
                    (long long)hc, (long long)(end - srd_tell(r)));
    int64_t hdr_at = srd_tell(r);
    for (int64_t h = 0; h < hc; h++) {
        int64_t hl, hat;
        if ((e = field_bytes(w, i, end, "header key length", 0, &hl, &hat, why, whylen)) ||
            (e = field_bytes(w, i, end, "header value length", -1, &hl, &hat, why, whylen))) {
            size_t n = strlen(why);
            if (e == ST_E_INVALID_RECORD && n < whylen)
                snprintf(why + n, whylen - n, " (header %lld)", (long long)h);
            return e;
        }
    }
    if (srd_tell(r) != end)
        return fail(w, i, why, whylen, "its length is %lld but its fields end after %lld bytes",
                    (long long)rlen, (long long)(srd_tell(r) - start));
    if (w->strict && off_delta != i)
        return fail(w, i, why, whylen, "its offset delta is %lld: a batch's records count 0, 1, 2, ...",
                    (long long)off_delta);
    if (off_delta < 0 || off_delta > INT32_MAX ||
        __builtin_add_overflow(b->base_offset, off_delta, &rec->offset))
        return fail(w, i, why, whylen, "its offset delta %lld is out of range", (long long)off_delta);
    if (b->attributes & ST_ATTR_LOG_APPEND_TIME) {
        rec->timestamp = b->max_timestamp;
    } else if (__builtin_add_overflow(b->base_timestamp, ts_delta, &rec->timestamp)) {
        return fail(w, i, why, whylen, "its timestamp delta %lld overflows the base timestamp %lld",
                    (long long)ts_delta, (long long)b->base_timestamp);
    }
    rec->key_len = (int32_t)kl;
    rec->value_len = (int32_t)vl;
    rec->header_count = (int32_t)hc;
    rec->headers_len = (size_t)(end - hdr_at);
    const uint8_t *body = w->ptrs == PTR_DIRECT ? r->p + direct_at
                          : w->ptrs == PTR_TEE   ? w->tee.data
                                                 : NULL;
    if (body) {
        /* body holds the record from its attributes on */
        rec->key = kl > 0 ? body + (key_at - start) : NULL;
        rec->value = vl > 0 ? body + (val_at - start) : NULL;
        rec->headers = body + (hdr_at - start);
    } else {
        rec->key = rec->value = rec->headers = NULL;
    }
    return ST_OK;
}

/* After the last record: nothing may follow. */
static st_err_t walk_end(walk_t *w, char *why, size_t whylen) {
    if (srd_fill(&w->r))
        return fail(w, w->b->record_count, why, whylen,
                    "there are bytes after the batch's %d records", (int)w->b->record_count);
    if (w->r.err) return fail(w, w->b->record_count, why, whylen, "unreadable");
    return ST_OK;
}

/* ---- produce-side validation ----------------------------------------------- */

void st_batch_verdict_init(st_batch_verdict_t *v) {
    memset(v, 0, sizeof *v);
    st_buf_init(&v->rebuilt);
}

void st_batch_verdict_fini(st_batch_verdict_t *v) {
    for (int i = 0; i < v->nrecord_errors; i++) free(v->record_errors[i].message);
    free(v->record_errors);
    st_buf_fini(&v->rebuilt);
    memset(v, 0, sizeof *v);
}

static void record_error(st_batch_verdict_t *v, int32_t index, const char *message) {
    v->record_errors_total++;
    if (v->nrecord_errors >= ST_BATCH_MAX_RECORD_ERRORS) return;
    if (!v->record_errors)
        v->record_errors = st_calloc(ST_BATCH_MAX_RECORD_ERRORS, sizeof *v->record_errors);
    v->record_errors[v->nrecord_errors].index = index;
    v->record_errors[v->nrecord_errors].message = st_strdup(message);
    v->nrecord_errors++;
}

__attribute__((format(printf, 3, 4))) static st_err_t verdict(st_batch_verdict_t *v, st_err_t e,
                                                             const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->why, sizeof v->why, fmt, ap);
    va_end(ap);
    return e;
}

static int target_codec(const st_batch_limits_t *lim, int codec) {
    return lim->target == ST_TARGET_PRODUCER ? codec : (int)lim->target - 1;
}

st_err_t st_batches_scan(const uint8_t *p, size_t len, const st_batch_limits_t *lim,
                         st_batch_verdict_t *v) {
    v->nbatches = 0;
    v->needs_worker = v->recompress = 0;
    if (len == 0) return verdict(v, ST_E_INVALID_RECORD, "empty record set");
    for (size_t pos = 0; pos < len; v->nbatches++) {
        int bi = v->nbatches;
        st_batch_info_t b;
        if (len - pos < ST_BATCH_HEADER_SIZE)
            return verdict(v, ST_E_CORRUPT_MESSAGE, "batch %d at byte %zu: truncated header", bi, pos);
        if (p[pos + ST_BATCH_MAGIC_OFFSET] != 2)
            return verdict(v, ST_E_CORRUPT_MESSAGE, "batch %d at byte %zu has magic %d; only 2 is accepted", bi, pos,
                           p[pos + ST_BATCH_MAGIC_OFFSET]);
        if (st_batch_header(p + pos, len - pos, &b))
            return verdict(v, ST_E_CORRUPT_MESSAGE, "batch %d at byte %zu: bad batch length", bi, pos);
        if ((size_t)b.size > len - pos)
            return verdict(v, ST_E_CORRUPT_MESSAGE, "batch %d at byte %zu claims %d bytes, %zu remain", bi, pos, b.size,
                           len - pos);
        if (lim->max_message_bytes > 0 && b.size > lim->max_message_bytes)
            return verdict(v, ST_E_MESSAGE_TOO_LARGE,
                           "batch of %d bytes exceeds max.message.bytes %d (batch %d at byte %zu)",
                           b.size, lim->max_message_bytes, bi, pos);
        if (!st_batch_crc_ok(p + pos, b.size))
            return verdict(v, ST_E_CORRUPT_MESSAGE, "batch %d at byte %zu: CRC32C mismatch", bi, pos);
        int codec = b.attributes & ST_ATTR_CODEC_MASK;
        if (codec > ST_CODEC_ZSTD)
            return verdict(v, ST_E_CORRUPT_MESSAGE, "batch %d at byte %zu: unknown compression codec %d", bi, pos,
                           codec);
        /* ProduceRequest.validateRecords: zstd came with Produce v7 */
        if (codec == ST_CODEC_ZSTD && lim->no_zstd)
            return verdict(v, ST_E_UNSUPPORTED_COMPRESSION_TYPE,
                           "batch %d: Produce requests below version 7 may not use zstd", bi);
        /* LogValidator.validateBatch, for a client's batch */
        if (b.record_count <= 0 || b.last_offset_delta != b.record_count - 1)
            return verdict(v, ST_E_INVALID_RECORD,
                           "batch %d: record count %d does not match lastOffsetDelta %d", bi,
                           b.record_count, b.last_offset_delta);
        if (b.attributes & ST_ATTR_CONTROL)
            return verdict(v, ST_E_INVALID_RECORD, "batch %d: clients may not write control batches",
                           bi);
        if (b.producer_id >= 0 && b.base_sequence < 0)
            return verdict(v, ST_E_INVALID_RECORD,
                           "batch %d: invalid sequence number %d for producer id %lld", bi,
                           (int)b.base_sequence, (long long)b.producer_id);
        if (codec != ST_CODEC_NONE) v->needs_worker = 1;
        if (target_codec(lim, codec) != codec) v->recompress = v->needs_worker = 1;
        pos += (size_t)b.size;
    }
    return ST_OK;
}

typedef struct vstate {
    const st_batch_limits_t *lim;
    int64_t now_ms;
    int64_t budget; /* inflated bytes left for the compressed batches of p */
    st_batch_verdict_t *v;
    int ts_errors;
} vstate_t;

/* Kafka's validateTimestamp, record by record. */
static void check_timestamp(vstate_t *s, const st_batch_info_t *b, int32_t i, int64_t ts) {
    const st_batch_limits_t *lim = s->lim;
    char msg[256];
    if (!lim->log_append_time && ts != -1) {
        int64_t diff;
        int bad = __builtin_sub_overflow(s->now_ms, ts, &diff) ||
                  (lim->ts_before_max_ms < INT64_MAX && diff > lim->ts_before_max_ms) ||
                  (lim->ts_after_max_ms < INT64_MAX && diff < 0 && -diff > lim->ts_after_max_ms);
        if (!bad) return;
        snprintf(msg, sizeof msg,
                 "record %d: timestamp %lld is out of range (message.timestamp.before.max.ms %lld, "
                 "message.timestamp.after.max.ms %lld)",
                 (int)i, (long long)ts, (long long)lim->ts_before_max_ms,
                 (long long)lim->ts_after_max_ms);
    } else if (b->attributes & ST_ATTR_LOG_APPEND_TIME) {
        snprintf(msg, sizeof msg,
                 "record %d: the producer set LogAppendTime; the topic stamps the time itself",
                 (int)i);
    } else {
        return;
    }
    s->ts_errors++;
    record_error(s->v, i, msg);
}

static st_err_t validate_batch(vstate_t *s, uint8_t *batch, const st_batch_info_t *b, int bi) {
    const st_batch_limits_t *lim = s->lim;
    st_batch_verdict_t *v = s->v;
    int codec = b->attributes & ST_ATTR_CODEC_MASK;
    int target = target_codec(lim, codec);
    int recode = target != codec;
    /* A CreateTime topic stores the batch as CreateTime (below): its records
     * are read and checked as what they will be then, base timestamp plus
     * delta, not as a producer's LogAppendTime claims (the fuzzer found a
     * stored batch whose records then failed the checks they had passed) */
    st_batch_info_t as_stored = *b;
    if (!lim->log_append_time) as_stored.attributes &= (int16_t)~ST_ATTR_LOG_APPEND_TIME;
    walk_t w;
    walk_init(&w, batch, &as_stored, b->size, codec == ST_CODEC_NONE ? INT64_MAX : s->budget, 0);
    w.strict = 1;
    st_log__deflate_t d;
    size_t at = v->rebuilt.len;
    char why[256];
    st_err_t e = ST_OK;
    if (recode) {
        st_buf_put(&v->rebuilt, batch, ST_BATCH_HEADER_SIZE);
        size_t max_out = lim->max_message_bytes > ST_BATCH_HEADER_SIZE
                             ? (size_t)lim->max_message_bytes - ST_BATCH_HEADER_SIZE
                             : (size_t)INT32_MAX;
        if ((e = st_log__deflate_init(&d, target, &v->rebuilt, max_out))) goto out;
        w.r.sink = &d;
    }
    int64_t max_ts = -1;
    for (int32_t i = 0; i < b->record_count; i++) {
        st_record_t rec;
        e = read_record(&w, i, &rec, why, sizeof why);
        if (e) {
            if (e == ST_E_INVALID_RECORD) record_error(v, i, why);
            verdict(v, e, "batch %d: %s", bi, why);
            goto out;
        }
        if (lim->compact && rec.key_len < 0) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "record %d has no key: a compacted topic accepts only records with a key",
                     (int)i);
            record_error(v, i, msg);
        }
        check_timestamp(s, b, i, rec.timestamp);
        if (rec.timestamp > max_ts) max_ts = rec.timestamp;
    }
    if ((e = walk_end(&w, why, sizeof why))) {
        verdict(v, e, "batch %d: %s", bi, why);
        goto out;
    }
    if (codec != ST_CODEC_NONE) {
        v->inflated_bytes += w.r.f.total;
        s->budget -= w.r.f.total;
    }
    if (v->record_errors_total > 0) {
        /* LogValidator.processRecordErrors: any bad timestamp makes it
         * INVALID_TIMESTAMP, else INVALID_RECORD; the batch fails whole. */
        e = s->ts_errors ? ST_E_INVALID_TIMESTAMP : ST_E_INVALID_RECORD;
        verdict(v, e, "batch %d: %lld of its %d records rejected; the first: %s", bi,
                (long long)v->record_errors_total, (int)b->record_count, v->record_errors[0].message);
        goto out;
    }
    uint8_t *h = batch;
    size_t size = (size_t)b->size;
    if (recode) {
        if ((e = st_log__deflate_finish(&d))) {
            if (e == ST_E_MESSAGE_TOO_LARGE)
                verdict(v, e, "batch %d rebuilt in %s exceeds max.message.bytes %d", bi,
                        st_batch_codec_name(target), lim->max_message_bytes);
            else
                verdict(v, e, "batch %d: cannot compress it in %s", bi, st_batch_codec_name(target));
            goto out;
        }
        h = v->rebuilt.data + at;
        size = v->rebuilt.len - at;
        st_be32_put(h + ST_BATCH_LENGTH_OFFSET, (uint32_t)(size - ST_BATCH_LOG_OVERHEAD));
        uint16_t attr = st_be16_get(h + ST_BATCH_ATTR_OFFSET);
        st_be16_put(h + ST_BATCH_ATTR_OFFSET, (uint16_t)((attr & ~ST_ATTR_CODEC_MASK) | target));
    }
    /* LogValidator's setMaxTimestamp(CreateTime, max): the header says what
     * the records hold (LogAppendTime topics are stamped on append). */
    int dirty = recode;
    if (!lim->log_append_time) {
        uint16_t attr = st_be16_get(h + ST_BATCH_ATTR_OFFSET);
        if ((attr & ST_ATTR_LOG_APPEND_TIME) || b->max_timestamp != max_ts) {
            st_be16_put(h + ST_BATCH_ATTR_OFFSET, (uint16_t)(attr & ~ST_ATTR_LOG_APPEND_TIME));
            st_be64_put(h + ST_BATCH_MAX_TS_OFFSET, (uint64_t)max_ts);
            dirty = 1;
        }
    }
    if (dirty) crc_update(h, size);
    if (v->recompress && !recode) st_buf_put(&v->rebuilt, batch, (size_t)b->size);
out:
    if (recode) st_log__deflate_fini(&d);
    walk_fini(&w);
    return e;
}

st_err_t st_batches_validate(uint8_t *p, size_t len, const st_batch_limits_t *lim, int64_t now_ms,
                             st_batch_verdict_t *v) {
    st_err_t e = st_batches_scan(p, len, lim, v);
    if (e) return e;
    vstate_t s = {lim, now_ms, lim->max_inflated_bytes > 0 ? lim->max_inflated_bytes
                                                          : ST_BATCH_MAX_INFLATED_BYTES,
                  v, 0};
    /* With several batches the rebuilt records could outgrow the request
     * by far (tiny batches inflating to max.message.bytes each). */
    size_t rebuilt_max = ST_MAX(len, (size_t)ST_MAX(lim->max_message_bytes, 0));
    int bi = 0;
    for (size_t pos = 0; pos < len; bi++) {
        st_batch_info_t b;
        st_batch_header(p + pos, len - pos, &b); /* scanned above */
        if ((e = validate_batch(&s, p + pos, &b, bi))) return e;
        if (v->rebuilt.len > rebuilt_max)
            return verdict(v, ST_E_RECORD_LIST_TOO_LARGE,
                           "the records rebuilt in the topic's codec take %zu bytes, more than %zu",
                           v->rebuilt.len, rebuilt_max);
        pos += (size_t)b.size;
    }
    return ST_OK;
}

/* ---- stamping ------------------------------------------------------------- */

int64_t st_batch_stamp(uint8_t *batch, int64_t base_offset, int32_t leader_epoch,
                       int64_t log_append_ms) {
    st_be64_put(batch, (uint64_t)base_offset);
    st_be32_put(batch + ST_BATCH_EPOCH_OFFSET, (uint32_t)leader_epoch);
    int32_t size = (int32_t)st_be32_get(batch + ST_BATCH_LENGTH_OFFSET) + ST_BATCH_LOG_OVERHEAD;
    if (log_append_ms >= 0) {
        uint16_t attr = st_be16_get(batch + ST_BATCH_ATTR_OFFSET);
        st_be16_put(batch + ST_BATCH_ATTR_OFFSET, (uint16_t)(attr | ST_ATTR_LOG_APPEND_TIME));
        st_be64_put(batch + ST_BATCH_MAX_TS_OFFSET, (uint64_t)log_append_ms);
        crc_update(batch, (size_t)size);
    }
    int32_t delta = (int32_t)st_be32_get(batch + ST_BATCH_LAST_DELTA_OFFSET);
    return base_offset + delta + 1;
}

/* ---- stored batches: decompression and records ------------------------------ */

st_err_t st_batch_decompress(const uint8_t *batch, int32_t size, st_buf_t *out) {
    if (size < ST_BATCH_HEADER_SIZE) return ST_CORRUPT_BKPT;
    st_log__inflate_t f;
    st_log__inflate_init(&f, st_be16_get(batch + ST_BATCH_ATTR_OFFSET) & ST_ATTR_CODEC_MASK,
                         batch + ST_BATCH_HEADER_SIZE, (size_t)size - ST_BATCH_HEADER_SIZE,
                         ST_BATCH_MAX_INFLATED_BYTES);
    st_err_t e;
    for (;;) {
        const uint8_t *p;
        size_t n;
        if ((e = st_log__inflate_next(&f, &p, &n))) {
            e = e == ST_E_NOMEM ? e : ST_CORRUPT_BKPT;
            break;
        }
        if (n == 0) break;
        st_buf_put(out, p, n);
    }
    st_log__inflate_fini(&f);
    return e;
}

/* Every record of a stored batch (offset deltas as stored); fn may stop. */
static st_err_t walk_stored(const uint8_t *batch, int32_t size, int want_ptrs, st_record_cb fn,
                            void *arg) {
    st_batch_info_t b;
    st_err_t e = st_batch_header(batch, (size_t)size, &b);
    if (e) return e;
    walk_t w;
    walk_init(&w, batch, &b, size, ST_BATCH_MAX_INFLATED_BYTES, want_ptrs);
    char why[256];
    for (int32_t i = 0; i < b.record_count; i++) {
        st_record_t rec;
        if (read_record(&w, i, &rec, why, sizeof why)) {
            e = ST_CORRUPT_BKPT;
            break;
        }
        if (fn(&rec, arg)) break;
    }
    walk_fini(&w);
    return e;
}

st_err_t st_batch_foreach_record(const uint8_t *batch, int32_t size, st_record_cb fn, void *arg) {
    return walk_stored(batch, size, 1, fn, arg);
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
    walk_stored(batch, size, 0, ts_record_cb, &t);
    if (t.found) {
        *offset = t.offset;
        *found_ts = t.ts;
    }
    return t.found;
}

/* ---- building batches --------------------------------------------------------- */

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
    st_be64_put(b + ST_BATCH_PRODUCER_ID_OFFSET, (uint64_t)-1);
    st_be16_put(b + ST_BATCH_PRODUCER_EPOCH_OFFSET, (uint16_t)-1);
    st_be32_put(b + ST_BATCH_BASE_SEQUENCE_OFFSET, (uint32_t)-1);
    st_be32_put(b + ST_BATCH_COUNT_OFFSET, (uint32_t)n);
    crc_update(b, size);
}

void st_batch_build_control(st_buf_t *out, int16_t key_version, int16_t type, const void *value,
                            int32_t value_len, int64_t timestamp_ms) {
    uint8_t key[4];
    st_be16_put(key, (uint16_t)key_version);
    st_be16_put(key + 2, (uint16_t)type);
    st_batch_record_t r = {key, 4, value, value_len};
    size_t start = out->len;
    st_batch_build(out, &r, 1, timestamp_ms);
    st_be16_put(out->data + start + ST_BATCH_ATTR_OFFSET, ST_ATTR_CONTROL);
    crc_update(out->data + start, out->len - start);
}

void st_batch_set_producer(uint8_t *batch, size_t size, int64_t producer_id, int16_t epoch,
                           int32_t base_sequence, uint16_t attrs) {
    st_be64_put(batch + ST_BATCH_PRODUCER_ID_OFFSET, (uint64_t)producer_id);
    st_be16_put(batch + ST_BATCH_PRODUCER_EPOCH_OFFSET, (uint16_t)epoch);
    st_be32_put(batch + ST_BATCH_BASE_SEQUENCE_OFFSET, (uint32_t)base_sequence);
    st_be16_put(batch + ST_BATCH_ATTR_OFFSET,
                (uint16_t)(st_be16_get(batch + ST_BATCH_ATTR_OFFSET) | attrs));
    crc_update(batch, size);
}

/*
 * compress.c - streaming decompression and compression of records sections
 * (compress_int.h says what memory each codec may take and why).
 *
 * Everything decoded here is hostile: a payload that does not decode, ends
 * early, or claims more than it may is refused with a reason, and nothing is
 * allocated in proportion to what a header claims.
 */
#include "compress_int.h"

#include "batch.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <zstd.h>
#include <zstd_errors.h>

/* Snappy's densest element, a 3-byte copy of 64 bytes, bounds how far a
 * block can expand; a varint header and rounding get some slack. */
#define SNAPPY_MAX_EXPANSION(len) ((int64_t)(len) / 3 * 64 + 64)

static const uint8_t xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};

void st_log__inflate_init(st_log__inflate_t *f, int codec, const uint8_t *in, size_t len,
                          int64_t limit) {
    memset(f, 0, sizeof *f);
    f->codec = codec;
    f->in = in;
    f->in_len = len;
    f->limit = limit;
}

void st_log__inflate_fini(st_log__inflate_t *f) {
    if (f->z_ready) inflateEnd(&f->z);
    if (f->lz4) LZ4F_freeDecompressionContext(f->lz4);
    if (f->zstd) ZSTD_freeDCtx(f->zstd);
    free(f->win);
    f->win = NULL;
    f->z_ready = 0;
    f->lz4 = f->zstd = NULL;
}

static st_err_t corrupt(st_log__inflate_t *f, const char *codec, const char *what) {
    snprintf(f->why, sizeof f->why, "the %s payload does not decompress: %s", codec, what);
    return ST_E_CORRUPT_MESSAGE;
}

static st_err_t window(st_log__inflate_t *f) {
    if (f->win) return ST_OK;
    f->win = malloc(ST_LOG__WINDOW_BYTES);
    if (!f->win) return ST_E_NOMEM;
    f->win_cap = ST_LOG__WINDOW_BYTES;
    return ST_OK;
}

static st_err_t next_gzip(st_log__inflate_t *f, size_t *n) {
    if (!f->z_ready) {
        /* 15 + 32: a gzip or a zlib header, detected */
        if (inflateInit2(&f->z, 15 + 32) != Z_OK) return ST_E_NOMEM;
        f->z_ready = 1;
    }
    for (;;) {
        f->z.next_in = (Bytef *)(uintptr_t)(f->in + f->in_pos);
        f->z.avail_in = (uInt)(f->in_len - f->in_pos);
        f->z.next_out = f->win;
        f->z.avail_out = (uInt)f->win_cap;
        int rc = inflate(&f->z, Z_NO_FLUSH);
        f->in_pos = f->in_len - f->z.avail_in;
        *n = f->win_cap - f->z.avail_out;
        if (rc == Z_STREAM_END) {
            f->done = 1;
            return ST_OK;
        }
        if (rc == Z_BUF_ERROR && f->z.avail_in == 0 && *n == 0)
            return corrupt(f, "gzip", "the stream ends before its end marker");
        if (rc != Z_OK && rc != Z_BUF_ERROR) return corrupt(f, "gzip", f->z.msg ? f->z.msg : "bad data");
        if (*n > 0) return ST_OK;
    }
}

static st_err_t next_lz4(st_log__inflate_t *f, size_t *n) {
    if (!f->lz4) {
        LZ4F_dctx *ctx;
        if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION))) return ST_E_NOMEM;
        f->lz4 = ctx;
    }
    for (;;) {
        size_t dst = f->win_cap, src = f->in_len - f->in_pos;
        size_t rc = LZ4F_decompress(f->lz4, f->win, &dst, f->in + f->in_pos, &src, NULL);
        if (LZ4F_isError(rc)) return corrupt(f, "lz4", LZ4F_getErrorName(rc));
        f->in_pos += src;
        *n = dst;
        if (rc == 0) { /* the frame is complete (Kafka writes one) */
            f->done = 1;
            return ST_OK;
        }
        if (dst > 0) return ST_OK;
        if (f->in_pos == f->in_len) return corrupt(f, "lz4", "the frame ends early");
    }
}

static st_err_t next_zstd(st_log__inflate_t *f, size_t *n) {
    if (!f->zstd) {
        ZSTD_DCtx *d = ZSTD_createDCtx();
        if (!d) return ST_E_NOMEM;
        ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, ST_LOG__ZSTD_WINDOW_LOG_MAX);
        f->zstd = d;
    }
    for (;;) {
        if (f->frame_end && f->in_pos == f->in_len) {
            *n = 0;
            f->done = 1;
            return ST_OK;
        }
        ZSTD_inBuffer in = {f->in, f->in_len, f->in_pos};
        ZSTD_outBuffer out = {f->win, f->win_cap, 0};
        size_t rc = ZSTD_decompressStream(f->zstd, &out, &in);
        f->in_pos = in.pos;
        *n = out.pos;
        if (ZSTD_isError(rc)) {
            if (ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge)
                return corrupt(f, "zstd", "the frame asks for a window larger than 16 MiB");
            return corrupt(f, "zstd", ZSTD_getErrorName(rc));
        }
        /* rc == 0: a frame ended (and is flushed); another may follow */
        f->frame_end = rc == 0;
        if (*n > 0) return ST_OK;
        if (f->in_pos == f->in_len && !f->frame_end) return corrupt(f, "zstd", "the frame ends early");
    }
}

/* One raw snappy block, inflated whole into f->win. */
static st_err_t snappy_block(st_log__inflate_t *f, const uint8_t *p, size_t len, size_t *n) {
    size_t ulen;
    if (len == 0 || snappy_uncompressed_length((const char *)p, len, &ulen) != SNAPPY_OK)
        return corrupt(f, "snappy", "a block has no valid length header");
    if ((int64_t)ulen > SNAPPY_MAX_EXPANSION(len))
        return corrupt(f, "snappy", "a block claims more bytes than snappy can encode in it");
    if ((int64_t)ulen > f->limit - f->total) {
        *n = ulen; /* the caller reports the limit */
        return ST_E_MESSAGE_TOO_LARGE;
    }
    *n = 0;
    if (ulen == 0) return ST_OK;
    if (ulen > f->win_cap) {
        uint8_t *w = realloc(f->win, ulen);
        if (!w) return ST_E_NOMEM;
        f->win = w;
        f->win_cap = ulen;
    }
    if (snappy_uncompress((const char *)p, len, (char *)f->win, &ulen) != SNAPPY_OK)
        return corrupt(f, "snappy", "a block does not decode");
    *n = ulen;
    return ST_OK;
}

/* The Java client frames snappy the xerial way: the 8-byte magic, two int32
 * versions, then blocks of [int32 length][raw snappy].  Others send one raw
 * block.  Both are read. */
static st_err_t next_snappy(st_log__inflate_t *f, size_t *n) {
    if (!f->started) {
        f->xerial = f->in_len >= 16 && memcmp(f->in, xerial_magic, 8) == 0;
        if (f->xerial) f->in_pos = 16;
    }
    for (;;) {
        if (!f->xerial) {
            if (f->in_pos == f->in_len) {
                *n = 0;
                f->done = 1;
                return ST_OK;
            }
            f->in_pos = f->in_len;
            return snappy_block(f, f->in, f->in_len, n);
        }
        if (f->in_pos == f->in_len) {
            *n = 0;
            f->done = 1;
            return ST_OK;
        }
        if (f->in_len - f->in_pos < 4) return corrupt(f, "snappy", "a block length is cut short");
        uint32_t blen = st_be32_get(f->in + f->in_pos);
        f->in_pos += 4;
        if (blen > f->in_len - f->in_pos) return corrupt(f, "snappy", "a block runs past the payload");
        const uint8_t *blk = f->in + f->in_pos;
        f->in_pos += blen;
        st_err_t e = snappy_block(f, blk, blen, n);
        if (e || *n > 0) return e;
    }
}

st_err_t st_log__inflate_next(st_log__inflate_t *f, const uint8_t **out, size_t *n) {
    *n = 0;
    *out = NULL;
    if (f->done) return ST_OK;
    st_err_t e = ST_OK;
    if (f->codec == ST_CODEC_NONE) {
        f->done = 1;
        *out = f->in;
        *n = f->in_len;
    } else {
        if (f->codec != ST_CODEC_SNAPPY && (e = window(f))) return e;
        switch (f->codec) {
        case ST_CODEC_GZIP: e = next_gzip(f, n); break;
        case ST_CODEC_SNAPPY: e = next_snappy(f, n); break;
        case ST_CODEC_LZ4: e = next_lz4(f, n); break;
        case ST_CODEC_ZSTD: e = next_zstd(f, n); break;
        default:
            snprintf(f->why, sizeof f->why, "unknown compression codec %d", f->codec);
            return ST_E_CORRUPT_MESSAGE;
        }
        f->started = 1;
        *out = f->win;
    }
    /* uncompressed records are as large as their batch, no larger */
    if (e == ST_OK && f->codec != ST_CODEC_NONE && (int64_t)*n > f->limit - f->total)
        e = ST_E_MESSAGE_TOO_LARGE;
    if (e == ST_E_MESSAGE_TOO_LARGE) {
        snprintf(f->why, sizeof f->why, "the records inflate to more than %lld bytes",
                 (long long)f->limit);
        *n = 0;
        *out = NULL;
        f->done = 1;
        return e;
    }
    if (e) {
        *n = 0;
        *out = NULL;
        f->done = 1;
        return e;
    }
    f->total += (int64_t)*n;
    return ST_OK;
}

/* ---- compression ------------------------------------------------------------ */

#define SNAPPY_BLOCK (32 * 1024) /* the Java client's block size */

static st_err_t room(st_log__deflate_t *d, size_t want) {
    if (d->out->len - d->start > d->max_out) return d->err = ST_E_MESSAGE_TOO_LARGE;
    st_buf_reserve(d->out, want);
    return ST_OK;
}

static st_err_t check_size(st_log__deflate_t *d) {
    if (d->out->len - d->start > d->max_out) d->err = ST_E_MESSAGE_TOO_LARGE;
    return d->err;
}

st_err_t st_log__deflate_init(st_log__deflate_t *d, int codec, st_buf_t *out, size_t max_out) {
    memset(d, 0, sizeof *d);
    d->codec = codec;
    d->out = out;
    d->start = out->len;
    d->max_out = max_out;
    switch (codec) {
    case ST_CODEC_NONE: return ST_OK;
    case ST_CODEC_GZIP:
        if (deflateInit2(&d->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return d->err = ST_E_NOMEM;
        d->z_ready = 1;
        return ST_OK;
    case ST_CODEC_SNAPPY:
        d->pend = malloc(SNAPPY_BLOCK);
        if (!d->pend) return d->err = ST_E_NOMEM;
        st_buf_put(out, xerial_magic, sizeof xerial_magic);
        st_buf_put_i32(out, 1); /* version */
        st_buf_put_i32(out, 1); /* compatible version */
        return ST_OK;
    case ST_CODEC_LZ4: {
        LZ4F_cctx *c;
        if (LZ4F_isError(LZ4F_createCompressionContext(&c, LZ4F_VERSION))) return d->err = ST_E_NOMEM;
        d->lz4 = c;
        LZ4F_preferences_t prefs;
        memset(&prefs, 0, sizeof prefs);
        prefs.frameInfo.blockMode = LZ4F_blockIndependent;
        prefs.frameInfo.blockSizeID = LZ4F_max64KB;
        st_buf_reserve(out, LZ4F_HEADER_SIZE_MAX);
        size_t rc = LZ4F_compressBegin(c, out->data + out->len, LZ4F_HEADER_SIZE_MAX, &prefs);
        if (LZ4F_isError(rc)) return d->err = ST_E_NOMEM;
        out->len += rc;
        return ST_OK;
    }
    case ST_CODEC_ZSTD: {
        ZSTD_CCtx *c = ZSTD_createCCtx();
        if (!c) return d->err = ST_E_NOMEM;
        ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
        d->zstd = c;
        return ST_OK;
    }
    default: return d->err = ST_E_INVAL;
    }
}

static st_err_t snappy_flush(st_log__deflate_t *d) {
    if (d->pend_len == 0) return ST_OK;
    size_t bound = snappy_max_compressed_length(d->pend_len);
    if (room(d, 4 + bound)) return d->err;
    size_t at = d->out->len;
    if (snappy_compress((const char *)d->pend, d->pend_len, (char *)d->out->data + at + 4, &bound) !=
        SNAPPY_OK)
        return d->err = ST_E_NOMEM;
    st_be32_put(d->out->data + at, (uint32_t)bound);
    d->out->len = at + 4 + bound;
    d->pend_len = 0;
    return check_size(d);
}

st_err_t st_log__deflate_write(st_log__deflate_t *d, const uint8_t *p, size_t n) {
    if (d->err) return d->err;
    switch (d->codec) {
    case ST_CODEC_NONE:
        if (room(d, n)) return d->err;
        st_buf_put(d->out, p, n);
        return check_size(d);
    case ST_CODEC_GZIP:
        d->z.next_in = (Bytef *)(uintptr_t)p;
        d->z.avail_in = (uInt)n;
        while (d->z.avail_in > 0) {
            if (room(d, 64 * 1024)) return d->err;
            d->z.next_out = d->out->data + d->out->len;
            d->z.avail_out = (uInt)(d->out->cap - d->out->len);
            size_t before = d->z.avail_out;
            if (deflate(&d->z, Z_NO_FLUSH) == Z_STREAM_ERROR) return d->err = ST_E_NOMEM;
            d->out->len += before - d->z.avail_out;
            if (check_size(d)) return d->err;
        }
        return ST_OK;
    case ST_CODEC_SNAPPY:
        while (n > 0) {
            size_t take = ST_MIN(n, (size_t)SNAPPY_BLOCK - d->pend_len);
            memcpy(d->pend + d->pend_len, p, take);
            d->pend_len += take;
            p += take;
            n -= take;
            if (d->pend_len == SNAPPY_BLOCK && snappy_flush(d)) return d->err;
        }
        return ST_OK;
    case ST_CODEC_LZ4: {
        LZ4F_preferences_t prefs;
        memset(&prefs, 0, sizeof prefs);
        prefs.frameInfo.blockMode = LZ4F_blockIndependent;
        prefs.frameInfo.blockSizeID = LZ4F_max64KB;
        while (n > 0) {
            size_t take = ST_MIN(n, (size_t)64 * 1024);
            size_t bound = LZ4F_compressBound(take, &prefs);
            if (room(d, bound)) return d->err;
            size_t rc = LZ4F_compressUpdate(d->lz4, d->out->data + d->out->len, bound, p, take, NULL);
            if (LZ4F_isError(rc)) return d->err = ST_E_NOMEM;
            d->out->len += rc;
            p += take;
            n -= take;
            if (check_size(d)) return d->err;
        }
        return ST_OK;
    }
    case ST_CODEC_ZSTD: {
        ZSTD_inBuffer in = {p, n, 0};
        while (in.pos < in.size) {
            if (room(d, ZSTD_CStreamOutSize())) return d->err;
            ZSTD_outBuffer out = {d->out->data + d->out->len, d->out->cap - d->out->len, 0};
            size_t rc = ZSTD_compressStream2(d->zstd, &out, &in, ZSTD_e_continue);
            if (ZSTD_isError(rc)) return d->err = ST_E_NOMEM;
            d->out->len += out.pos;
            if (check_size(d)) return d->err;
        }
        return ST_OK;
    }
    default: return d->err = ST_E_INVAL;
    }
}

st_err_t st_log__deflate_finish(st_log__deflate_t *d) {
    if (d->err) return d->err;
    switch (d->codec) {
    case ST_CODEC_NONE: return ST_OK;
    case ST_CODEC_GZIP:
        for (;;) {
            if (room(d, 64 * 1024)) return d->err;
            d->z.next_in = NULL;
            d->z.avail_in = 0;
            d->z.next_out = d->out->data + d->out->len;
            d->z.avail_out = (uInt)(d->out->cap - d->out->len);
            size_t before = d->z.avail_out;
            int rc = deflate(&d->z, Z_FINISH);
            d->out->len += before - d->z.avail_out;
            if (check_size(d)) return d->err;
            if (rc == Z_STREAM_END) return ST_OK;
            if (rc != Z_OK && rc != Z_BUF_ERROR) return d->err = ST_E_NOMEM;
        }
    case ST_CODEC_SNAPPY: return snappy_flush(d);
    case ST_CODEC_LZ4: {
        size_t bound = LZ4F_compressBound(0, NULL) + 16;
        if (room(d, bound)) return d->err;
        size_t rc = LZ4F_compressEnd(d->lz4, d->out->data + d->out->len, bound, NULL);
        if (LZ4F_isError(rc)) return d->err = ST_E_NOMEM;
        d->out->len += rc;
        return check_size(d);
    }
    case ST_CODEC_ZSTD:
        for (;;) {
            if (room(d, ZSTD_CStreamOutSize())) return d->err;
            ZSTD_inBuffer in = {NULL, 0, 0};
            ZSTD_outBuffer out = {d->out->data + d->out->len, d->out->cap - d->out->len, 0};
            size_t rc = ZSTD_compressStream2(d->zstd, &out, &in, ZSTD_e_end);
            if (ZSTD_isError(rc)) return d->err = ST_E_NOMEM;
            d->out->len += out.pos;
            if (check_size(d)) return d->err;
            if (rc == 0) return ST_OK;
        }
    default: return d->err = ST_E_INVAL;
    }
}

void st_log__deflate_fini(st_log__deflate_t *d) {
    if (d->z_ready) deflateEnd(&d->z);
    if (d->lz4) LZ4F_freeCompressionContext(d->lz4);
    if (d->zstd) ZSTD_freeCCtx(d->zstd);
    free(d->pend);
    d->z_ready = 0;
    d->lz4 = d->zstd = NULL;
    d->pend = NULL;
}

/* buf.c - growable buffers, the sticky-error reader, varints. */
#include "st_base.h"

#include <stdlib.h>

void st_buf_init(st_buf_t *b) { memset(b, 0, sizeof *b); }

void st_buf_fini(st_buf_t *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void st_buf_reserve(st_buf_t *b, size_t extra) {
    if (b->cap - b->len >= extra) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra) cap *= 2;
    b->data = st_realloc(b->data, cap);
    b->cap = cap;
}

uint8_t *st_buf_extend(st_buf_t *b, size_t n) {
    st_buf_reserve(b, n);
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}

void st_buf_put(st_buf_t *b, const void *p, size_t n) {
    if (n) memcpy(st_buf_extend(b, n), p, n);
}

void st_buf_put_i8(st_buf_t *b, int8_t v) { *st_buf_extend(b, 1) = (uint8_t)v; }
void st_buf_put_i16(st_buf_t *b, int16_t v) { st_be16_put(st_buf_extend(b, 2), (uint16_t)v); }
void st_buf_put_i32(st_buf_t *b, int32_t v) { st_be32_put(st_buf_extend(b, 4), (uint32_t)v); }
void st_buf_put_i64(st_buf_t *b, int64_t v) { st_be64_put(st_buf_extend(b, 8), (uint64_t)v); }

void st_buf_put_uvarint(st_buf_t *b, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    st_buf_put(b, tmp, n);
}

void st_buf_put_varint(st_buf_t *b, int64_t v) {
    st_buf_put_uvarint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void st_buf_printf(st_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    st_buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

size_t st_uvarint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

size_t st_varint_size(int64_t v) {
    return st_uvarint_size(((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void st_rd_fail(st_rd_t *r, st_err_t e) {
    if (!r->err) r->err = e;
}

const uint8_t *st_rd_bytes(st_rd_t *r, size_t n) {
    if (r->err) return NULL;
    if (r->len - r->pos < n) {
        r->err = ST_E_TRUNCATED;
        return NULL;
    }
    const uint8_t *p = r->p + r->pos;
    r->pos += n;
    return p;
}

int8_t st_rd_i8(st_rd_t *r) {
    const uint8_t *p = st_rd_bytes(r, 1);
    return p ? (int8_t)p[0] : 0;
}
int16_t st_rd_i16(st_rd_t *r) {
    const uint8_t *p = st_rd_bytes(r, 2);
    return p ? (int16_t)st_be16_get(p) : 0;
}
int32_t st_rd_i32(st_rd_t *r) {
    const uint8_t *p = st_rd_bytes(r, 4);
    return p ? (int32_t)st_be32_get(p) : 0;
}
int64_t st_rd_i64(st_rd_t *r) {
    const uint8_t *p = st_rd_bytes(r, 8);
    return p ? (int64_t)st_be64_get(p) : 0;
}

uint64_t st_rd_uvarint(st_rd_t *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        const uint8_t *p = st_rd_bytes(r, 1);
        if (!p) return 0;
        v |= (uint64_t)(*p & 0x7f) << shift;
        if (!(*p & 0x80)) return v;
    }
    st_rd_fail(r, ST_E_CORRUPT);
    return 0;
}

int64_t st_rd_varint(st_rd_t *r) {
    uint64_t u = st_rd_uvarint(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

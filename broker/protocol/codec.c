/*
 * codec.c - the one codec: walks schema tables to decode and encode every
 * version of every message.
 *
 * Wire forms (KIP-482 for the compact ones, used in flexible versions):
 *
 *   type      classic                         flexible (compact)
 *   string    int16 len, bytes (-1 null)      uvarint len+1, bytes (0 null)
 *   bytes     int32 len, bytes (-1 null)      uvarint len+1, bytes (0 null)
 *   array     int32 count, items (-1 null)    uvarint count+1, items (0 null)
 *   struct    fields                          fields, tagged-field section
 *
 *   tagged-field section: uvarint count, then per field
 *                         uvarint tag, uvarint size, value
 *
 * Every length read from the wire is checked against what remains, and an
 * array count must fit in the bytes left (each item takes at least one), so
 * a small hostile frame cannot make us allocate much.
 */
#include "protocol.h"

#include <stdlib.h>
#include <string.h>

static int in_range(int v, int lo, int hi) { return lo >= 0 && v >= lo && v <= hi; }

static void *field_ptr(void *obj, const st_field_t *f) { return (char *)obj + f->offset; }
static const void *field_cptr(const void *obj, const st_field_t *f) {
    return (const char *)obj + f->offset;
}

/* Element size of array types. */
static size_t elem_size(const st_field_t *f) {
    switch (f->type) {
    case ST_F_ARRAY: return f->sub->size;
    case ST_F_ARRAY_INT32: return sizeof(int32_t);
    case ST_F_ARRAY_INT64: return sizeof(int64_t);
    case ST_F_ARRAY_STRING: return sizeof(st_str_t);
    case ST_F_ARRAY_UUID: return sizeof(st_uuid_t);
    default: return 0;
    }
}

/* The fewest bytes one encoded struct of s can take at version v: an array
 * count read from the wire must fit in what remains at that size per item,
 * so a small frame cannot make the decoder allocate much. */
static size_t min_wire_size(const st_schema_t *s, int v, int flexible) {
    size_t n = flexible ? 1 : 0; /* tagged-field count */
    for (size_t i = 0; i < s->nfields; i++) {
        const st_field_t *f = &s->fields[i];
        if (!in_range(v, f->vmin, f->vmax) || (f->tag >= 0 && flexible)) continue;
        switch (f->type) {
        case ST_F_BOOL:
        case ST_F_INT8: n += 1; break;
        case ST_F_INT16:
        case ST_F_UINT16: n += 2; break;
        case ST_F_INT32: n += 4; break;
        case ST_F_INT64:
        case ST_F_FLOAT64: n += 8; break;
        case ST_F_UUID: n += 16; break;
        case ST_F_STRING: n += flexible ? 1 : 2; break;
        case ST_F_STRUCT:
            n += in_range(v, f->nmin, f->nmax) ? 1 : min_wire_size(f->sub, v, flexible);
            break;
        default: n += flexible ? 1 : 4; break; /* bytes, records, arrays */
        }
    }
    return n;
}

static size_t elem_min_size(const st_field_t *f, int v, int flexible) {
    switch (f->type) {
    case ST_F_ARRAY: return ST_MAX(min_wire_size(f->sub, v, flexible), (size_t)1);
    case ST_F_ARRAY_INT32: return 4;
    case ST_F_ARRAY_INT64: return 8;
    case ST_F_ARRAY_UUID: return 16;
    case ST_F_ARRAY_STRING: return flexible ? 1 : 2;
    default: return 1;
    }
}

static void field_default(const st_field_t *f, void *obj) {
    void *p = field_ptr(obj, f);
    switch (f->type) {
    case ST_F_BOOL:
    case ST_F_INT8: *(int8_t *)p = (int8_t)f->def; break;
    case ST_F_INT16: *(int16_t *)p = (int16_t)f->def; break;
    case ST_F_UINT16: *(uint16_t *)p = (uint16_t)f->def; break;
    case ST_F_INT32: *(int32_t *)p = (int32_t)f->def; break;
    case ST_F_INT64: *(int64_t *)p = f->def; break;
    case ST_F_FLOAT64: *(double *)p = (double)f->def; break;
    case ST_F_UUID: memset(p, 0, sizeof(st_uuid_t)); break;
    case ST_F_STRING:
        *(st_str_t *)p = f->def == ST_DEF_NULL ? ST_STR_NULL : (st_str_t){"", 0};
        break;
    case ST_F_BYTES: *(st_bytes_t *)p = (st_bytes_t){NULL, f->def == ST_DEF_NULL ? -1 : 0}; break;
    case ST_F_RECORDS: memset(p, 0, sizeof(st_records_t)); ((st_records_t *)p)->len = -1; break;
    case ST_F_STRUCT: st_schema_defaults(f->sub, p); break;
    default: /* arrays */
        ((st_array_t *)p)->v = NULL;
        ((st_array_t *)p)->n = f->def == ST_DEF_NULL ? -1 : 0;
        break;
    }
}

void st_schema_defaults(const st_schema_t *s, void *out) {
    for (size_t i = 0; i < s->nfields; i++) field_default(&s->fields[i], out);
}

void st_schema_set_errors(const st_schema_t *s, void *obj, int16_t code) {
    for (size_t i = 0; i < s->nfields; i++) {
        const st_field_t *f = &s->fields[i];
        char *at = (char *)obj + f->offset;
        if (f->type == ST_F_INT16 &&
            (strcmp(f->name, "error_code") == 0 || strcmp(f->name, "partition_error_code") == 0)) {
            if (*(int16_t *)at == 0) *(int16_t *)at = code;
        } else if (f->type == ST_F_STRUCT) {
            st_schema_set_errors(f->sub, at, code);
        } else if (f->type == ST_F_ARRAY) {
            st_array_t *arr = (st_array_t *)at;
            for (int32_t k = 0; k < arr->n; k++)
                st_schema_set_errors(f->sub, (char *)arr->v + (size_t)k * f->sub->size, code);
        }
    }
}

/* ---- decoding ---------------------------------------------------------- */

static int32_t rd_len(st_rd_t *r, int flexible, int small) {
    if (flexible) {
        uint64_t n = st_rd_uvarint(r);
        if (n > (uint64_t)INT32_MAX + 1) {
            /* no arithmetic on a length this large (2^63 and up overflowed) */
            st_rd_fail(r, ST_E_CORRUPT);
            return 0;
        }
        return (int32_t)((int64_t)n - 1); /* n <= 2^31: fits */
    }
    return small ? st_rd_i16(r) : st_rd_i32(r);
}

static void decode_field(const st_field_t *f, int v, int flexible, st_rd_t *r, st_arena_t *a,
                         void *obj);

static void decode_struct(const st_schema_t *s, int v, int flexible, st_rd_t *r, st_arena_t *a,
                          void *obj) {
    for (size_t i = 0; i < s->nfields && !r->err; i++) {
        const st_field_t *f = &s->fields[i];
        if (!in_range(v, f->vmin, f->vmax) || (f->tag >= 0 && flexible)) {
            field_default(f, obj);
            continue;
        }
        decode_field(f, v, flexible, r, a, obj);
    }
    if (!flexible || r->err) return;
    uint64_t ntags = st_rd_uvarint(r);
    for (uint64_t t = 0; t < ntags && !r->err; t++) {
        uint64_t tag = st_rd_uvarint(r);
        uint64_t size = st_rd_uvarint(r);
        const uint8_t *body = st_rd_bytes(r, (size_t)size);
        if (!body) break;
        for (size_t i = 0; i < s->nfields; i++) {
            const st_field_t *f = &s->fields[i];
            if (f->tag < 0 || (uint64_t)f->tag != tag || !in_range(v, f->vmin, f->vmax)) continue;
            st_rd_t sub;
            st_rd_init(&sub, body, (size_t)size);
            decode_field(f, v, flexible, &sub, a, obj);
            if (sub.err) st_rd_fail(r, sub.err);
            break;
        }
        /* unknown tags are skipped */
    }
}

static void decode_field(const st_field_t *f, int v, int flexible, st_rd_t *r, st_arena_t *a,
                         void *obj) {
    void *p = field_ptr(obj, f);
    int nullable = in_range(v, f->nmin, f->nmax);
    int32_t n;
    switch (f->type) {
    case ST_F_BOOL: *(int8_t *)p = st_rd_i8(r) != 0; break;
    case ST_F_INT8: *(int8_t *)p = st_rd_i8(r); break;
    case ST_F_INT16: *(int16_t *)p = st_rd_i16(r); break;
    case ST_F_UINT16: *(uint16_t *)p = (uint16_t)st_rd_i16(r); break;
    case ST_F_INT32: *(int32_t *)p = st_rd_i32(r); break;
    case ST_F_INT64: *(int64_t *)p = st_rd_i64(r); break;
    case ST_F_FLOAT64: {
        uint64_t u = (uint64_t)st_rd_i64(r);
        memcpy(p, &u, sizeof u);
        break;
    }
    case ST_F_UUID: {
        const uint8_t *b = st_rd_bytes(r, 16);
        if (b) memcpy(p, b, 16);
        break;
    }
    case ST_F_STRING: {
        n = rd_len(r, flexible, 1);
        st_str_t *s = p;
        if (n < 0) {
            if (n != -1 || !nullable) st_rd_fail(r, ST_E_INVALID_REQUEST);
            *s = ST_STR_NULL;
            break;
        }
        const uint8_t *b = st_rd_bytes(r, (size_t)n);
        *s = (st_str_t){b ? (const char *)b : "", b ? n : 0};
        break;
    }
    case ST_F_BYTES:
    case ST_F_RECORDS: {
        n = rd_len(r, flexible, 0);
        const uint8_t *b = NULL;
        if (n < 0) {
            if (n != -1 || !nullable) st_rd_fail(r, ST_E_INVALID_REQUEST);
            n = -1;
        } else {
            b = st_rd_bytes(r, (size_t)n);
            if (!b) n = 0;
        }
        if (f->type == ST_F_BYTES) {
            *(st_bytes_t *)p = (st_bytes_t){b, n};
        } else {
            st_records_t *rec = p;
            memset(rec, 0, sizeof *rec);
            rec->p = b;
            rec->len = n;
        }
        break;
    }
    case ST_F_STRUCT:
        /* a nullable struct: an int8 first, -1 for null (decoded as the
         * struct's defaults, which is how a null one is encoded) */
        if (nullable && st_rd_i8(r) < 0) {
            st_schema_defaults(f->sub, p);
            break;
        }
        decode_struct(f->sub, v, flexible, r, a, p);
        break;
    default: { /* arrays */
        st_array_t *arr = p;
        n = rd_len(r, flexible, 0);
        arr->v = NULL;
        if (n < 0) {
            if (n != -1 || !nullable) st_rd_fail(r, ST_E_INVALID_REQUEST);
            arr->n = -1;
            break;
        }
        if (r->err || (uint64_t)n * elem_min_size(f, v, flexible) > st_rd_left(r)) {
            st_rd_fail(r, ST_E_TRUNCATED);
            arr->n = 0;
            break;
        }
        size_t es = elem_size(f);
        arr->n = n;
        arr->v = st_arena_alloc(a, es * (size_t)(n ? n : 1));
        for (int32_t i = 0; i < n && !r->err; i++) {
            void *e = (char *)arr->v + es * (size_t)i;
            switch (f->type) {
            case ST_F_ARRAY: decode_struct(f->sub, v, flexible, r, a, e); break;
            case ST_F_ARRAY_INT32: *(int32_t *)e = st_rd_i32(r); break;
            case ST_F_ARRAY_INT64: *(int64_t *)e = st_rd_i64(r); break;
            case ST_F_ARRAY_UUID: {
                const uint8_t *b = st_rd_bytes(r, 16);
                if (b) memcpy(e, b, 16);
                break;
            }
            case ST_F_ARRAY_STRING: {
                int32_t sl = rd_len(r, flexible, 1);
                const uint8_t *b = sl >= 0 ? st_rd_bytes(r, (size_t)sl) : NULL;
                if (sl < 0) st_rd_fail(r, ST_E_INVALID_REQUEST);
                *(st_str_t *)e = (st_str_t){b ? (const char *)b : "", b ? sl : 0};
                break;
            }
            default: break;
            }
        }
        break;
    }
    }
}

st_err_t st_decode(const st_schema_t *s, int v, int flexible, st_rd_t *r, st_arena_t *a,
                   void *out) {
    decode_struct(s, v, flexible, r, a, out);
    return r->err;
}

/* ---- encoding ---------------------------------------------------------- */

static void wr_len(st_buf_t *b, int flexible, int small, int32_t n) {
    if (flexible) st_buf_put_uvarint(b, (uint64_t)((int64_t)n + 1));
    else if (small) st_buf_put_i16(b, (int16_t)n);
    else st_buf_put_i32(b, n);
}

static int field_is_default(const st_field_t *f, const void *obj);

static int struct_is_default(const st_schema_t *s, const void *obj) {
    for (size_t i = 0; i < s->nfields; i++)
        if (!field_is_default(&s->fields[i], obj)) return 0;
    return 1;
}

static int field_is_default(const st_field_t *f, const void *obj) {
    const void *p = field_cptr(obj, f);
    switch (f->type) {
    case ST_F_BOOL:
    case ST_F_INT8: return *(const int8_t *)p == (int8_t)f->def;
    case ST_F_INT16: return *(const int16_t *)p == (int16_t)f->def;
    case ST_F_UINT16: return *(const uint16_t *)p == (uint16_t)f->def;
    case ST_F_INT32: return *(const int32_t *)p == (int32_t)f->def;
    case ST_F_INT64: return *(const int64_t *)p == f->def;
    case ST_F_FLOAT64: return *(const double *)p == (double)f->def;
    case ST_F_UUID: return st_uuid_is_zero(p);
    case ST_F_STRING: {
        const st_str_t *s = p;
        return f->def == ST_DEF_NULL ? s->len < 0 : s->len == 0;
    }
    case ST_F_BYTES: {
        const st_bytes_t *b = p;
        return f->def == ST_DEF_NULL ? b->len < 0 : b->len == 0;
    }
    case ST_F_RECORDS: return ((const st_records_t *)p)->len < 0;
    case ST_F_STRUCT: return struct_is_default(f->sub, p);
    default: {
        const st_array_t *arr = p;
        return f->def == ST_DEF_NULL ? arr->n < 0 : arr->n <= 0;
    }
    }
}

static void encode_field(const st_field_t *f, int v, int flexible, const void *obj,
                         st_chain_t *out);

static void encode_struct(const st_schema_t *s, int v, int flexible, const void *obj,
                          st_chain_t *out) {
    int ntagged = 0;
    for (size_t i = 0; i < s->nfields; i++) {
        const st_field_t *f = &s->fields[i];
        if (!in_range(v, f->vmin, f->vmax)) continue;
        if (f->tag >= 0 && flexible) {
            if (!field_is_default(f, obj)) ntagged++;
            continue;
        }
        encode_field(f, v, flexible, obj, out);
    }
    if (!flexible) return;
    st_buf_put_uvarint(&out->mem, (uint64_t)ntagged);
    if (!ntagged) return;
    /* Tagged values are small: encode each into a scratch chain to learn its
     * size.  Rows list tags in ascending order, as the wire requires. */
    for (size_t i = 0; i < s->nfields; i++) {
        const st_field_t *f = &s->fields[i];
        if (f->tag < 0 || !in_range(v, f->vmin, f->vmax) || field_is_default(f, obj)) continue;
        st_chain_t tmp;
        st_chain_init(&tmp);
        encode_field(f, v, flexible, obj, &tmp);
        st_buf_put_uvarint(&out->mem, (uint64_t)f->tag);
        st_buf_put_uvarint(&out->mem, tmp.mem.len);
        st_buf_put(&out->mem, tmp.mem.data, tmp.mem.len);
        st_chain_fini(&tmp);
    }
}

static void encode_field(const st_field_t *f, int v, int flexible, const void *obj,
                         st_chain_t *out) {
    const void *p = field_cptr(obj, f);
    st_buf_t *b = &out->mem;
    int nullable = in_range(v, f->nmin, f->nmax);
    switch (f->type) {
    case ST_F_BOOL: st_buf_put_i8(b, *(const int8_t *)p ? 1 : 0); break;
    case ST_F_INT8: st_buf_put_i8(b, *(const int8_t *)p); break;
    case ST_F_INT16: st_buf_put_i16(b, *(const int16_t *)p); break;
    case ST_F_UINT16: st_buf_put_i16(b, (int16_t) * (const uint16_t *)p); break;
    case ST_F_INT32: st_buf_put_i32(b, *(const int32_t *)p); break;
    case ST_F_INT64: st_buf_put_i64(b, *(const int64_t *)p); break;
    case ST_F_FLOAT64: {
        uint64_t u;
        memcpy(&u, p, sizeof u);
        st_buf_put_i64(b, (int64_t)u);
        break;
    }
    case ST_F_UUID: st_buf_put(b, p, 16); break;
    case ST_F_STRING: {
        const st_str_t *s = p;
        if (s->len < 0 && nullable) {
            wr_len(b, flexible, 1, -1);
        } else {
            int32_t n = s->len < 0 ? 0 : s->len;
            wr_len(b, flexible, 1, n);
            st_buf_put(b, s->p, (size_t)n);
        }
        break;
    }
    case ST_F_BYTES: {
        const st_bytes_t *s = p;
        if (s->len < 0 && nullable) {
            wr_len(b, flexible, 0, -1);
        } else {
            int32_t n = s->len < 0 ? 0 : s->len;
            wr_len(b, flexible, 0, n);
            st_buf_put(b, s->p, (size_t)n);
        }
        break;
    }
    case ST_F_RECORDS: {
        const st_records_t *rec = p;
        if (rec->len < 0 && nullable) {
            wr_len(b, flexible, 0, -1);
            break;
        }
        int32_t n = rec->len < 0 ? 0 : rec->len;
        wr_len(b, flexible, 0, n);
        if (rec->file) st_chain_add_file(out, rec->file, rec->file_off, n);
        else st_buf_put(b, rec->p, (size_t)n);
        break;
    }
    case ST_F_STRUCT:
        if (nullable) {
            int null = struct_is_default(f->sub, p);
            st_buf_put_i8(b, null ? -1 : 1);
            if (null) break;
        }
        encode_struct(f->sub, v, flexible, p, out);
        break;
    default: {
        const st_array_t *arr = p;
        if (arr->n < 0 && nullable) {
            wr_len(b, flexible, 0, -1);
            break;
        }
        int32_t n = arr->n < 0 ? 0 : arr->n;
        wr_len(b, flexible, 0, n);
        size_t es = elem_size(f);
        for (int32_t i = 0; i < n; i++) {
            const void *e = (const char *)arr->v + es * (size_t)i;
            switch (f->type) {
            case ST_F_ARRAY: encode_struct(f->sub, v, flexible, e, out); break;
            case ST_F_ARRAY_INT32: st_buf_put_i32(b, *(const int32_t *)e); break;
            case ST_F_ARRAY_INT64: st_buf_put_i64(b, *(const int64_t *)e); break;
            case ST_F_ARRAY_UUID: st_buf_put(b, e, 16); break;
            case ST_F_ARRAY_STRING: {
                const st_str_t *s = e;
                int32_t sl = s->len < 0 ? 0 : s->len;
                wr_len(b, flexible, 1, sl);
                st_buf_put(b, s->p, (size_t)sl);
                break;
            }
            default: break;
            }
        }
        break;
    }
    }
}

void st_encode(const st_schema_t *s, int v, int flexible, const void *in, st_chain_t *out) {
    encode_struct(s, v, flexible, in, out);
}

/* ---- headers ----------------------------------------------------------- */

st_err_t st_req_header_decode(st_rd_t *r, int hversion, st_req_header_t *h) {
    h->api_key = st_rd_i16(r);
    h->api_version = st_rd_i16(r);
    h->correlation_id = st_rd_i32(r);
    h->client_id = ST_STR_NULL;
    if (hversion >= 1) {
        /* The client id stays a classic nullable string even in header v2. */
        int16_t n = st_rd_i16(r);
        if (n >= 0) {
            const uint8_t *b = st_rd_bytes(r, (size_t)n);
            h->client_id = (st_str_t){b ? (const char *)b : "", b ? n : 0};
        } else if (n != -1) {
            st_rd_fail(r, ST_E_INVALID_REQUEST);
        }
    }
    if (hversion >= 2) {
        uint64_t ntags = st_rd_uvarint(r);
        for (uint64_t i = 0; i < ntags && !r->err; i++) {
            st_rd_uvarint(r);
            st_rd_bytes(r, (size_t)st_rd_uvarint(r));
        }
    }
    return r->err;
}

void st_req_header_encode(const st_req_header_t *h, int hversion, st_buf_t *out) {
    st_buf_put_i16(out, h->api_key);
    st_buf_put_i16(out, h->api_version);
    st_buf_put_i32(out, h->correlation_id);
    if (hversion >= 1) {
        st_buf_put_i16(out, (int16_t)h->client_id.len);
        if (h->client_id.len > 0) st_buf_put(out, h->client_id.p, (size_t)h->client_id.len);
    }
    if (hversion >= 2) st_buf_put_uvarint(out, 0);
}

int st_api_req_header_version(const st_api_t *api, int v) {
    return st_api_flexible(api, v) ? 2 : 1;
}

int st_api_resp_header_version(const st_api_t *api, int v) {
    if (api->key == ST_API_API_VERSIONS) return 0;
    return st_api_flexible(api, v) ? 1 : 0;
}

st_err_t st_request_decode(const uint8_t *frame, size_t len, st_arena_t *a, st_req_header_t *h,
                           const st_api_t **apip, void **body) {
    st_rd_t r;
    st_rd_init(&r, frame, len);
    /* Peek key and version to learn the header version. */
    if (len < 8) return ST_E_INVALID_REQUEST;
    int16_t key = (int16_t)st_be16_get(frame);
    int16_t ver = (int16_t)st_be16_get(frame + 2);
    const st_api_t *api = st_api_lookup(key);
    if (api && !st_api_served(api)) api = NULL; /* described for the client only */
    *apip = api;
    int hv = api && ver >= api->min_ver && ver <= api->max_ver ? st_api_req_header_version(api, ver) : 1;
    if (st_req_header_decode(&r, hv, h)) return ST_E_INVALID_REQUEST;
    if (!api) return ST_E_INVALID_REQUEST;
    if (ver < api->min_ver || ver > api->max_ver) return ST_E_UNSUPPORTED_VERSION;
    void *b = st_arena_alloc(a, api->req->size);
    if (st_decode(api->req, ver, st_api_flexible(api, ver), &r, a, b)) return ST_E_INVALID_REQUEST;
    *body = b;
    return ST_OK;
}

void st_response_encode(const st_api_t *api, int v, int32_t correlation_id, const void *body,
                        st_chain_t *out) {
    /* One response per chain: the size prefix counts everything after it. */
    size_t start = out->mem.len;
    st_buf_put_i32(&out->mem, 0);
    st_buf_put_i32(&out->mem, correlation_id);
    if (st_api_resp_header_version(api, v) >= 1) st_buf_put_uvarint(&out->mem, 0);
    st_encode(api->resp, v, st_api_flexible(api, v), body, out);
    int64_t total = st_chain_seal(out);
    st_be32_put(out->mem.data + start, (uint32_t)(total - 4 - (int64_t)start));
}

/* ---- the client's direction ---------------------------------------------- */

st_err_t st_request_encode(const st_api_t *api, int v, int32_t correlation_id, st_str_t client_id,
                           const void *body, st_chain_t *out) {
    if (!st_api_described(api, v)) return ST_E_UNSUPPORTED_VERSION;
    size_t start = out->mem.len;
    st_buf_put_i32(&out->mem, 0);
    st_req_header_t h = {api->key, (int16_t)v, correlation_id, client_id};
    st_req_header_encode(&h, st_api_req_header_version(api, v), &out->mem);
    st_encode(api->req, v, st_api_flexible(api, v), body, out);
    int64_t total = st_chain_seal(out);
    st_be32_put(out->mem.data + start, (uint32_t)(total - 4 - (int64_t)start));
    return ST_OK;
}

st_err_t st_response_peek_correlation(const uint8_t *frame, size_t len, int32_t *correlation_id) {
    if (len < 4) return ST_E_TRUNCATED;
    *correlation_id = (int32_t)st_be32_get(frame);
    return ST_OK;
}

/* Response header v0 is the correlation id; v1 adds a tagged-field
 * section, none of whose tags we know. */
static void resp_header_decode(st_rd_t *r, int hversion, int32_t *correlation_id) {
    *correlation_id = st_rd_i32(r);
    if (hversion < 1) return;
    uint64_t ntags = st_rd_uvarint(r);
    for (uint64_t i = 0; i < ntags && !r->err; i++) {
        st_rd_uvarint(r);
        st_rd_bytes(r, (size_t)st_rd_uvarint(r));
    }
}

st_err_t st_response_decode(const st_api_t *api, int v, const uint8_t *frame, size_t len,
                            st_arena_t *a, int32_t *correlation_id, void **body) {
    if (!st_api_described(api, v)) return ST_E_UNSUPPORTED_VERSION;
    st_rd_t r;
    st_rd_init(&r, frame, len);
    int32_t corr;
    resp_header_decode(&r, st_api_resp_header_version(api, v), &corr);
    if (r.err) return ST_E_TRUNCATED;
    /* A broker that does not know our ApiVersions version answers in v0
     * with UNSUPPORTED_VERSION (error_code comes first in every version). */
    if (api->key == ST_API_API_VERSIONS && st_rd_left(&r) >= 2 &&
        (int16_t)st_be16_get(r.p + r.pos) == st_err_wire(ST_E_UNSUPPORTED_VERSION))
        v = 0;
    void *b = st_arena_alloc(a, api->resp->size);
    st_err_t e = st_decode(api->resp, v, st_api_flexible(api, v), &r, a, b);
    if (e) return e == ST_E_TRUNCATED ? e : ST_E_CORRUPT;
    if (st_rd_left(&r)) return ST_E_CORRUPT;
    *correlation_id = corr;
    *body = b;
    return ST_OK;
}

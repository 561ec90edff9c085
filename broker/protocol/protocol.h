/*
 * protocol.h - Kafka's wire protocol: message descriptions and one codec.
 *
 * Each message is described once, as data: a schema is a list of fields,
 * each with its type, the versions it exists in, the versions in which it
 * may be null, its tag (tagged fields, KIP-482) and its default.  The same
 * list, through X-macros, declares the C struct a handler reads and writes
 * and the field table the codec walks.  The codec decodes and encodes every
 * version of every API from those tables; handlers never test versions.
 *
 * A field row is
 *     X(S, TYPE, name, versions, nullable, tag, default, sub)
 * with versions V(a) ("a+") or VR(a, b), nullable NN or NUL(a), tag NT or a
 * number, and sub the element schema for ARRAY and STRUCT fields (_ when
 * none).  S is the owning struct, passed through so rows can be expanded
 * into offsetof() entries.
 *
 * Decoded strings and byte fields point into the request's receive buffer;
 * arrays come from the request arena.
 */
#ifndef ST_PROTOCOL_H
#define ST_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "st_base.h"

#define ST_VMAX 127

typedef enum st_ftype {
    ST_F_BOOL,
    ST_F_INT8,
    ST_F_INT16,
    ST_F_UINT16,
    ST_F_INT32,
    ST_F_INT64,
    ST_F_FLOAT64,
    ST_F_UUID,
    ST_F_STRING,
    ST_F_BYTES,
    ST_F_RECORDS,
    ST_F_STRUCT,   /* one nested struct, embedded */
    ST_F_ARRAY,    /* array of structs */
    ST_F_ARRAY_INT32,
    ST_F_ARRAY_INT64,
    ST_F_ARRAY_STRING,
    ST_F_ARRAY_UUID
} st_ftype_t;

/* A string on the wire: len -1 is null.  Not NUL-terminated. */
typedef struct st_str {
    const char *p;
    int32_t len;
} st_str_t;

typedef struct st_bytes {
    const uint8_t *p;
    int32_t len; /* -1: null */
} st_bytes_t;

/* Record data.  Decoded: bytes in the receive buffer.  To encode, either
 * bytes (p) or a range of a shared file (file, file_off) that goes out with
 * sendfile. */
typedef struct st_records {
    const uint8_t *p;
    int32_t len; /* -1: null */
    st_file_t *file;
    int64_t file_off;
} st_records_t;

/* Generic array view; typed arrays below share its layout. */
typedef struct st_array {
    void *v;
    int32_t n; /* -1: null */
} st_array_t;

#define ST_ARRAY_OF(T)                                                                  \
    struct {                                                                           \
        T *v;                                                                          \
        int32_t n;                                                                     \
    }

typedef struct st_schema st_schema_t;

typedef struct st_field {
    const char *name;
    uint8_t type;
    int8_t vmin, vmax;
    int8_t nmin, nmax; /* nullable versions; -1 when never */
    int16_t tag;       /* -1: not tagged */
    uint32_t offset;
    int64_t def;
    const st_schema_t *sub;
} st_field_t;

struct st_schema {
    const char *name;
    const st_field_t *fields;
    uint16_t nfields;
    uint32_t size;
};

/* Row helpers (V, VR, NN, NUL, NT) live in msg_dsl.h: they are defined
 * only where rows are expanded. */
#define ST_DEF_NULL INT64_MIN /* default for strings/arrays that are null */

/* C type of each field type. */
#define ST_CT_BOOL(sub) int8_t
#define ST_CT_INT8(sub) int8_t
#define ST_CT_INT16(sub) int16_t
#define ST_CT_UINT16(sub) uint16_t
#define ST_CT_INT32(sub) int32_t
#define ST_CT_INT64(sub) int64_t
#define ST_CT_FLOAT64(sub) double
#define ST_CT_UUID(sub) st_uuid_t
#define ST_CT_STRING(sub) st_str_t
#define ST_CT_BYTES(sub) st_bytes_t
#define ST_CT_RECORDS(sub) st_records_t
#define ST_CT_STRUCT(sub) sub##_t
#define ST_CT_ARRAY(sub) ST_ARRAY_OF(sub##_t)
#define ST_CT_ARRAY_INT32(sub) ST_ARRAY_OF(int32_t)
#define ST_CT_ARRAY_INT64(sub) ST_ARRAY_OF(int64_t)
#define ST_CT_ARRAY_STRING(sub) ST_ARRAY_OF(st_str_t)
#define ST_CT_ARRAY_UUID(sub) ST_ARRAY_OF(st_uuid_t)

#define ST_SUB_BOOL(sub) NULL
#define ST_SUB_INT8(sub) NULL
#define ST_SUB_INT16(sub) NULL
#define ST_SUB_UINT16(sub) NULL
#define ST_SUB_INT32(sub) NULL
#define ST_SUB_INT64(sub) NULL
#define ST_SUB_FLOAT64(sub) NULL
#define ST_SUB_UUID(sub) NULL
#define ST_SUB_STRING(sub) NULL
#define ST_SUB_BYTES(sub) NULL
#define ST_SUB_RECORDS(sub) NULL
#define ST_SUB_STRUCT(sub) &sub##_schema
#define ST_SUB_ARRAY(sub) &sub##_schema
#define ST_SUB_ARRAY_INT32(sub) NULL
#define ST_SUB_ARRAY_INT64(sub) NULL
#define ST_SUB_ARRAY_STRING(sub) NULL
#define ST_SUB_ARRAY_UUID(sub) NULL

/* The variadic first step lets V(), NN and friends expand into two
 * arguments before the row is split. */
#define ST_MEMBER(...) ST_MEMBER_(__VA_ARGS__)
#define ST_MEMBER_(S, T, name, vmin, vmax, nmin, nmax, tag, def, sub) ST_CT_##T(sub) name;
#define ST_FIELDROW(...) ST_FIELDROW_(__VA_ARGS__)
#define ST_FIELDROW_(S, T, name, vmin, vmax, nmin, nmax, tag, def, sub)                 \
    {#name, ST_F_##T, vmin, vmax, nmin, nmax, tag, (uint32_t)offsetof(S##_t, name),     \
     (int64_t)(def), ST_SUB_##T(sub)},

/* In a header: the struct and the schema's name. */
#define ST_SCHEMA_DECLARE(S, LIST)                                                      \
    typedef struct S {                                                                 \
        LIST(ST_MEMBER, S)                                                             \
    } S##_t;                                                                           \
    extern const st_schema_t S##_schema;

/* In one .c file: the field table. */
#define ST_SCHEMA_DEFINE(S, LIST)                                                       \
    static const st_field_t S##_fields[] = {LIST(ST_FIELDROW, S)};                     \
    const st_schema_t S##_schema = {#S, S##_fields,                                    \
                                    (uint16_t)(sizeof S##_fields / sizeof S##_fields[0]), \
                                    (uint32_t)sizeof(S##_t)};

/* ------------------------------------------------------------------------
 * Codec
 * ---------------------------------------------------------------------- */

/* Decode one struct of schema s at version v.  Fields absent at v get their
 * defaults.  Returns INVALID_REQUEST-class errors via r->err as well. */
st_err_t st_decode(const st_schema_t *s, int v, int flexible, st_rd_t *r, st_arena_t *a,
                   void *out);
/* Encode one struct.  Fields absent at v are skipped; tagged fields are
 * written only when they differ from their default. */
void st_encode(const st_schema_t *s, int v, int flexible, const void *in, st_chain_t *out);
/* Fill every field with its default. */
void st_schema_defaults(const st_schema_t *s, void *out);
/* Set every error code of a decoded or built message that is still 0
 * (the INT16 fields named error_code or partition_error_code, in nested
 * structs and arrays too) to code: an answer turned into one error. */
void st_schema_set_errors(const st_schema_t *s, void *obj, int16_t code);

/* Strings */
static inline st_str_t st_str(const char *s) {
    st_str_t r = {s, s ? (int32_t)strlen(s) : -1};
    return r;
}
static inline int st_str_eq(st_str_t a, const char *b) {
    size_t n = strlen(b);
    return a.len >= 0 && (size_t)a.len == n && memcmp(a.p, b, n) == 0;
}
#define ST_STR_NULL ((st_str_t){NULL, -1})
/* printf("%.*s", ST_STR_FMT(s)) */
#define ST_STR_FMT(s) (int)((s).len < 0 ? 6 : (s).len), ((s).len < 0 ? "(null)" : (s).p)

/* Arrays from an arena */
#define ST_ARRAY_ALLOC(arr, arena, count)                                                \
    do {                                                                               \
        size_t st__count = (size_t)(count);                                            \
        (arr).n = (int32_t)st__count;                                                  \
        (arr).v = st_arena_alloc((arena), sizeof(*(arr).v) * (st__count ? st__count : 1)); \
    } while (0)

/* ------------------------------------------------------------------------
 * Request and response headers
 * ---------------------------------------------------------------------- */
typedef struct st_req_header {
    int16_t api_key;
    int16_t api_version;
    int32_t correlation_id;
    st_str_t client_id;
} st_req_header_t;

/* Header version 0 has no client id, 1 adds it, 2 adds tagged fields. */
st_err_t st_req_header_decode(st_rd_t *r, int hversion, st_req_header_t *h);
void st_req_header_encode(const st_req_header_t *h, int hversion, st_buf_t *out);

/* ------------------------------------------------------------------------
 * The API table: key, name, the versions stratad serves, first flexible
 * version, the request and response schemas, and the versions the
 * description covers.
 *
 * Two ranges, because the codec speaks both directions: stratad decodes
 * requests and encodes responses only for the versions it serves (and
 * advertises those only where a handler exists); the outbound client
 * (net.h, st_netclient_*) encodes requests and decodes responses for any
 * described version, so a broker can speak Raft and Fetch v17 to another
 * broker before it serves them itself.  An API that is described but not
 * served has min_ver > max_ver, and the server treats its key as unknown.
 * ---------------------------------------------------------------------- */
typedef struct st_api {
    int16_t key;
    const char *name;
    int16_t adv_min_ver; /* advertised minimum (may be below min_ver) */
    int16_t min_ver, max_ver; /* served; min_ver > max_ver: none */
    int16_t flex_from; /* first flexible version; ST_VMAX+1 when none */
    const st_schema_t *req;
    const st_schema_t *resp;
    int16_t desc_min_ver, desc_max_ver; /* described (covers the served range) */
} st_api_t;

const st_api_t *st_api_lookup(int16_t key);
const st_api_t *st_api_at(size_t i); /* iteration: NULL past the end */
static inline int st_api_flexible(const st_api_t *api, int v) { return v >= api->flex_from; }
static inline int st_api_served(const st_api_t *api) { return api->min_ver <= api->max_ver; }
static inline int st_api_described(const st_api_t *api, int v) {
    return v >= api->desc_min_ver && v <= api->desc_max_ver;
}
/* Request header version for a request of this api/version. */
int st_api_req_header_version(const st_api_t *api, int v);
/* Response header version (ApiVersions always answers with version 0). */
int st_api_resp_header_version(const st_api_t *api, int v);

/* Decode a whole request frame (header + body).  out_body is allocated from
 * the arena with the request schema's size.  ST_E_UNSUPPORTED_VERSION when
 * the version is out of range, INVALID_REQUEST when the body is malformed. */
st_err_t st_request_decode(const uint8_t *frame, size_t len, st_arena_t *a,
                           st_req_header_t *h, const st_api_t **api, void **body);

/* Encode a response (size prefix, header, body) into out. */
void st_response_encode(const st_api_t *api, int v, int32_t correlation_id, const void *body,
                        st_chain_t *out);

/* The other direction, for the outbound client, from the same tables. */

/* Encode a request (size prefix, header v1 or v2 by the API's flexible
 * versions, body) into out.  ST_E_UNSUPPORTED_VERSION, with out untouched,
 * when v is not described. */
st_err_t st_request_encode(const st_api_t *api, int v, int32_t correlation_id, st_str_t client_id,
                           const void *body, st_chain_t *out);

/* The correlation id of a response frame (no size prefix), or
 * ST_E_TRUNCATED when it has fewer than 4 bytes. */
st_err_t st_response_peek_correlation(const uint8_t *frame, size_t len, int32_t *correlation_id);

/* Decode a response frame (no size prefix) to a request of api version v:
 * header v0 or v1, then the body, allocated from the arena with the
 * response schema's size; strings point into frame.  Every byte must be
 * used: bytes left over mean the peer answered another version.  An
 * ApiVersions answer whose error is UNSUPPORTED_VERSION is decoded as v0,
 * the version a broker answers in when it does not know ours (KIP-511).
 * ST_E_CORRUPT or ST_E_TRUNCATED when malformed; *body is written only on
 * success. */
st_err_t st_response_decode(const st_api_t *api, int v, const uint8_t *frame, size_t len,
                            st_arena_t *a, int32_t *correlation_id, void **body);

#include "messages.h"

#endif /* ST_PROTOCOL_H */

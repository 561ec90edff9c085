/*
 * records.c - the records of __consumer_offsets, in Kafka's formats, and
 * the consumer protocol's subscription.
 *
 * Keys and values are described once as schema rows (the facts from
 * Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value) and go through
 * the protocol codec, like every message.  Layout of a record (see
 * group_int.h):
 *
 *   key:   int16 version | OffsetCommitKey (v0/v1) or GroupMetadataKey (v2)
 *   value: int16 version | OffsetCommitValue or GroupMetadataValue
 *          (classic encoding below version 4, compact + tags from 4)
 *
 * Everything read here came from a log: hostile bytes, read with the
 * sticky reader; a record that does not parse is reported, not trusted.
 */
#define ST_MESSAGES_KEEP_DSL
#include "group_int.h"

#include <stdlib.h>

#define ST_GREC_OFFSET_KEY_ROWS(X, S)                                                   \
    X(S, STRING, group, V(0), NN, NT, 0, _)                                            \
    X(S, STRING, topic, V(0), NN, NT, 0, _)                                            \
    X(S, INT32, partition, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_grec_offset_key_s, ST_GREC_OFFSET_KEY_ROWS)
ST_SCHEMA_DEFINE(st_grec_offset_key_s, ST_GREC_OFFSET_KEY_ROWS)

#define ST_GREC_GROUP_KEY_ROWS(X, S) X(S, STRING, group, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_grec_group_key_s, ST_GREC_GROUP_KEY_ROWS)
ST_SCHEMA_DEFINE(st_grec_group_key_s, ST_GREC_GROUP_KEY_ROWS)

#define ST_GREC_OFFSET_VALUE_ROWS(X, S)                                                 \
    X(S, INT64, offset, V(0), NN, NT, 0, _)                                            \
    X(S, INT32, leader_epoch, V(3), NN, NT, -1, _)                                     \
    X(S, STRING, metadata, V(0), NN, NT, 0, _)                                         \
    X(S, INT64, commit_timestamp, V(0), NN, NT, 0, _)                                  \
    X(S, INT64, expire_timestamp, VR(1, 1), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_grec_offset_value_s, ST_GREC_OFFSET_VALUE_ROWS)
ST_SCHEMA_DEFINE(st_grec_offset_value_s, ST_GREC_OFFSET_VALUE_ROWS)

#define ST_GREC_MEMBER_ROWS(X, S)                                                       \
    X(S, STRING, member_id, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(3), NUL(3), NT, ST_DEF_NULL, _)                  \
    X(S, STRING, client_id, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, client_host, V(0), NN, NT, 0, _)                                      \
    X(S, INT32, rebalance_timeout, V(1), NN, NT, -1, _)                                \
    X(S, INT32, session_timeout, V(0), NN, NT, 0, _)                                   \
    X(S, BYTES, subscription, V(0), NN, NT, 0, _)                                      \
    X(S, BYTES, assignment, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_grec_member_s, ST_GREC_MEMBER_ROWS)
ST_SCHEMA_DEFINE(st_grec_member_s, ST_GREC_MEMBER_ROWS)

#define ST_GREC_GROUP_VALUE_ROWS(X, S)                                                  \
    X(S, STRING, protocol_type, V(0), NN, NT, 0, _)                                    \
    X(S, INT32, generation, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, protocol, V(0), NUL(0), NT, 0, _)                                     \
    X(S, STRING, leader, V(0), NUL(0), NT, 0, _)                                       \
    X(S, INT64, current_state_timestamp, V(2), NN, NT, -1, _)                          \
    X(S, ARRAY, members, V(0), NN, NT, 0, st_grec_member_s)
ST_SCHEMA_DECLARE(st_grec_group_value_s, ST_GREC_GROUP_VALUE_ROWS)
ST_SCHEMA_DEFINE(st_grec_group_value_s, ST_GREC_GROUP_VALUE_ROWS)

#define KEY_OFFSET_VERSION 1
#define KEY_GROUP_VERSION 2
#define VALUE_FLEXIBLE_FROM 4
#define OFFSET_VALUE_MAX 4
#define GROUP_VALUE_MAX 4

static void encode_versioned(st_buf_t *out, int16_t version, const st_schema_t *s,
                             const void *v, int flexible) {
    st_chain_t c;
    st_chain_init(&c);
    st_buf_put_i16(&c.mem, version);
    st_encode(s, version, flexible, v, &c);
    st_buf_put(out, c.mem.data, c.mem.len);
    st_chain_fini(&c);
}

/* A string the record must carry: none is written as "" (these rows are
 * not nullable). */
static st_str_t or_empty(st_str_t s) { return s.len < 0 ? st_str("") : s; }

void st_grec_offset_key(st_buf_t *out, st_str_t group, st_str_t topic, int32_t partition) {
    st_grec_offset_key_s_t k = {or_empty(group), or_empty(topic), partition};
    encode_versioned(out, KEY_OFFSET_VERSION, &st_grec_offset_key_s_schema, &k, 0);
}

void st_grec_group_key(st_buf_t *out, st_str_t group) {
    st_grec_group_key_s_t k = {or_empty(group)};
    encode_versioned(out, KEY_GROUP_VERSION, &st_grec_group_key_s_schema, &k, 0);
}

void st_grec_offset_value(st_buf_t *out, const st_grec_offset_value_t *v) {
    st_grec_offset_value_s_t r = {v->offset, v->leader_epoch, v->metadata, v->commit_ts,
                                  v->expire_ts};
    if (r.metadata.len < 0) r.metadata = st_str("");
    /* Version 1 is the one that carries an explicit expire timestamp. */
    encode_versioned(out, v->expire_ts >= 0 ? 1 : 3, &st_grec_offset_value_s_schema, &r, 0);
}

void st_grec_group_value(st_buf_t *out, const st_grec_group_value_t *v) {
    st_grec_member_s_t *m = st_calloc((size_t)v->nmembers + 1, sizeof *m);
    for (int i = 0; i < v->nmembers; i++) {
        const st_grec_member_t *s = &v->members[i];
        m[i] = (st_grec_member_s_t){s->member_id, s->instance_id, s->client_id, s->client_host,
                                    s->rebalance_timeout_ms, s->session_timeout_ms,
                                    s->subscription, s->assignment};
        if (m[i].subscription.len < 0) m[i].subscription = (st_bytes_t){NULL, 0};
        if (m[i].assignment.len < 0) m[i].assignment = (st_bytes_t){NULL, 0};
    }
    st_grec_group_value_s_t r;
    r.protocol_type = v->protocol_type;
    r.generation = v->generation;
    r.protocol = v->protocol;
    r.leader = v->leader;
    r.current_state_timestamp = v->state_ts;
    r.members.v = m;
    r.members.n = v->nmembers;
    encode_versioned(out, 3, &st_grec_group_value_s_schema, &r, 0);
    free(m);
}

st_err_t st_grec_decode_key(const uint8_t *p, int32_t len, st_grec_key_t *out) {
    memset(out, 0, sizeof *out);
    if (!p || len < 2) return ST_E_CORRUPT;
    st_rd_t r;
    st_rd_init(&r, p, (size_t)len);
    int16_t version = st_rd_i16(&r);
    st_arena_t a;
    st_arena_init(&a, 256);
    st_err_t e = ST_OK;
    if (version == 0 || version == 1) {
        st_grec_offset_key_s_t k;
        e = st_decode(&st_grec_offset_key_s_schema, version, 0, &r, &a, &k);
        if (!e) {
            out->type = ST_GREC_OFFSET;
            out->group = k.group;
            out->topic = k.topic;
            out->partition = k.partition;
        }
    } else if (version == 2) {
        st_grec_group_key_s_t k;
        e = st_decode(&st_grec_group_key_s_schema, version, 0, &r, &a, &k);
        if (!e) {
            out->type = ST_GREC_GROUP;
            out->group = k.group;
        }
    } else {
        e = ST_E_NOT_FOUND; /* a newer record kind (KIP-848 groups, ...) */
    }
    st_arena_fini(&a);
    return e ? (e == ST_E_NOT_FOUND ? e : ST_E_CORRUPT) : ST_OK;
}

st_err_t st_grec_decode_offset_value(const uint8_t *p, int32_t len, st_grec_offset_value_t *out) {
    if (!p || len < 2) return ST_E_CORRUPT;
    st_rd_t r;
    st_rd_init(&r, p, (size_t)len);
    int16_t version = st_rd_i16(&r);
    if (version < 0 || version > OFFSET_VALUE_MAX) return ST_E_NOT_FOUND;
    st_arena_t a;
    st_arena_init(&a, 256);
    st_grec_offset_value_s_t v;
    st_err_t e = st_decode(&st_grec_offset_value_s_schema, version, version >= VALUE_FLEXIBLE_FROM,
                           &r, &a, &v);
    st_arena_fini(&a);
    if (e) return ST_E_CORRUPT;
    out->offset = v.offset;
    out->leader_epoch = v.leader_epoch;
    out->metadata = v.metadata;
    out->commit_ts = v.commit_timestamp;
    out->expire_ts = v.expire_timestamp;
    return ST_OK;
}

st_err_t st_grec_decode_group_value(const uint8_t *p, int32_t len, st_arena_t *a,
                                    st_grec_group_value_t *out) {
    if (!p || len < 2) return ST_E_CORRUPT;
    st_rd_t r;
    st_rd_init(&r, p, (size_t)len);
    int16_t version = st_rd_i16(&r);
    if (version < 0 || version > GROUP_VALUE_MAX) return ST_E_NOT_FOUND;
    st_grec_group_value_s_t v;
    if (st_decode(&st_grec_group_value_s_schema, version, version >= VALUE_FLEXIBLE_FROM, &r, a,
                  &v))
        return ST_E_CORRUPT;
    out->protocol_type = v.protocol_type;
    out->generation = v.generation;
    out->protocol = v.protocol;
    out->leader = v.leader;
    out->state_ts = v.current_state_timestamp;
    out->nmembers = v.members.n < 0 ? 0 : v.members.n;
    out->members = st_arena_alloc(a, sizeof *out->members * (size_t)(out->nmembers + 1));
    for (int i = 0; i < out->nmembers; i++) {
        st_grec_member_s_t *m = &v.members.v[i];
        out->members[i] = (st_grec_member_t){m->member_id, m->group_instance_id, m->client_id,
                                             m->client_host, m->rebalance_timeout,
                                             m->session_timeout, m->subscription, m->assignment};
    }
    return ST_OK;
}

/*
 * ConsumerProtocolSubscription, version 0 fields (every later version
 * starts with them):
 *
 *   int16 version | int32 count | count x (int16 len, topic bytes) | ...
 */
int st_grec_subscription_topics(const uint8_t *p, int32_t len, st_str_t **out) {
    *out = NULL;
    if (!p || len < 6) return -1;
    st_rd_t r;
    st_rd_init(&r, p, (size_t)len);
    int16_t version = st_rd_i16(&r);
    int32_t n = st_rd_i32(&r);
    if (r.err || version < 0 || n < 0 || (size_t)n * 2 > st_rd_left(&r)) return -1;
    st_str_t *v = st_calloc((size_t)n + 1, sizeof *v);
    int k = 0;
    for (; k < n && !r.err; k++) {
        int16_t sl = st_rd_i16(&r);
        const uint8_t *b = sl >= 0 ? st_rd_bytes(&r, (size_t)sl) : NULL;
        if (!b) break;
        v[k] = st_gstr_dup((st_str_t){(const char *)b, sl});
    }
    if (k < n) {
        for (int i = 0; i < k; i++) st_gstr_free(&v[i]);
        free(v);
        return -1;
    }
    *out = v;
    return n;
}

/* ---- Kafka's partitioning of group ids ------------------------------- */

/* Next code point of UTF-8 text; malformed input yields U+FFFD for one
 * byte, as Java's decoder replaces it. */
static uint32_t utf8_next(const uint8_t *s, size_t len, size_t *i) {
    uint8_t c = s[*i];
    int need;
    uint32_t cp, min;
    if (c < 0x80) {
        (*i)++;
        return c;
    } else if ((c & 0xE0) == 0xC0) {
        need = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        need = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        need = 3, cp = c & 0x07, min = 0x10000;
    } else {
        (*i)++;
        return 0xFFFD;
    }
    if (*i + (size_t)need >= len) {
        (*i)++;
        return 0xFFFD;
    }
    for (int k = 1; k <= need; k++) {
        uint8_t b = s[*i + (size_t)k];
        if ((b & 0xC0) != 0x80) {
            (*i)++;
            return 0xFFFD;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        (*i)++;
        return 0xFFFD;
    }
    *i += (size_t)need + 1;
    return cp;
}

int32_t st_group_java_hash(const char *s, size_t len) {
    uint32_t h = 0;
    const uint8_t *b = (const uint8_t *)s;
    for (size_t i = 0; i < len;) {
        uint32_t cp = utf8_next(b, len, &i);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = h * 31u + (0xD800u + (cp >> 10));
            h = h * 31u + (0xDC00u + (cp & 0x3FF));
        } else {
            h = h * 31u + cp;
        }
    }
    return (int32_t)h;
}

int32_t st_group_partition_for(const char *group_id, size_t len, int32_t npartitions) {
    if (npartitions <= 0) return 0;
    int32_t h = st_group_java_hash(group_id, len);
    /* Kafka's Utils.abs: the one value without a positive twin maps to 0 */
    int32_t a = h == INT32_MIN ? 0 : (h < 0 ? -h : h);
    return a % npartitions;
}

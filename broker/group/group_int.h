/* group_int.h - declarations shared inside the group library. */
#ifndef ST_GROUP_INT_H
#define ST_GROUP_INT_H

#include "group.h"
#include "protocol.h"

/* ---- map.c ------------------------------------------------------------- */
void st_gmap_init(st_gmap_t *m);
void st_gmap_fini(st_gmap_t *m); /* frees keys, not values */
void *st_gmap_get(const st_gmap_t *m, const void *key, size_t len);
/* Insert or replace; returns the value replaced (or NULL). */
void *st_gmap_put(st_gmap_t *m, const void *key, size_t len, void *val);
void *st_gmap_del(st_gmap_t *m, const void *key, size_t len);
/* Iteration: i from 0; returns the next live slot's value and advances *i,
 * NULL at the end.  Deleting the returned entry while iterating is fine. */
void *st_gmap_next(const st_gmap_t *m, size_t *i);

/* ---- records.c: __consumer_offsets keys and values ----------------------
 *
 * A record's key and value each start with an int16 version, then the
 * struct of that version (Kafka's OffsetCommitKey/Value and
 * GroupMetadataKey/Value schemas; values are flexible from version 4):
 *
 *   key v0, v1   OffsetCommitKey     group, topic, partition
 *   key v2       GroupMetadataKey    group
 *   value        OffsetCommitValue   v1 when it has an expire timestamp
 *                                    (OffsetCommit v2-4 retention), else v3
 *   value        GroupMetadataValue  v3 (static members' instance ids)
 *
 * A null value is a tombstone: the offset or the group is gone.
 */
enum { ST_GREC_OFFSET = 1, ST_GREC_GROUP = 2 };

typedef struct st_grec_key {
    int type; /* ST_GREC_OFFSET, ST_GREC_GROUP, 0 unknown */
    st_str_t group;
    st_str_t topic;
    int32_t partition;
} st_grec_key_t;

typedef struct st_grec_offset_value {
    int64_t offset;
    int32_t leader_epoch;
    st_str_t metadata;
    int64_t commit_ts;
    int64_t expire_ts;
} st_grec_offset_value_t;

typedef struct st_grec_member {
    st_str_t member_id;
    st_str_t instance_id; /* len -1: none */
    st_str_t client_id;
    st_str_t client_host;
    int32_t rebalance_timeout_ms;
    int32_t session_timeout_ms;
    st_bytes_t subscription;
    st_bytes_t assignment;
} st_grec_member_t;

typedef struct st_grec_group_value {
    st_str_t protocol_type;
    int32_t generation;
    st_str_t protocol; /* len -1: none */
    st_str_t leader;   /* len -1: none */
    int64_t state_ts;
    st_grec_member_t *members;
    int nmembers;
} st_grec_group_value_t;

void st_grec_offset_key(st_buf_t *out, st_str_t group, st_str_t topic, int32_t partition);
void st_grec_group_key(st_buf_t *out, st_str_t group);
void st_grec_offset_value(st_buf_t *out, const st_grec_offset_value_t *v);
void st_grec_group_value(st_buf_t *out, const st_grec_group_value_t *v);
/* Decoders: strings point into the input; arrays come from the arena.
 * CORRUPT for bytes that do not parse, NOT_FOUND for an unknown version. */
st_err_t st_grec_decode_key(const uint8_t *p, int32_t len, st_grec_key_t *out);
st_err_t st_grec_decode_offset_value(const uint8_t *p, int32_t len, st_grec_offset_value_t *out);
st_err_t st_grec_decode_group_value(const uint8_t *p, int32_t len, st_arena_t *a,
                                    st_grec_group_value_t *out);

/* The consumer protocol's subscription (version 0 prefix of every
 * version): int16 version, [string] topics.  Returns the count and the
 * topics (owned strings, st_gstr_free each, in a malloc'ed array) or -1
 * when the bytes do not parse. */
int st_grec_subscription_topics(const uint8_t *p, int32_t len, st_str_t **out);

#endif /* ST_GROUP_INT_H */

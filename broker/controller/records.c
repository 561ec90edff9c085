/* records.c - field tables and framing of the metadata records. */
#define ST_MESSAGES_KEEP_DSL
#include "records.h"

ST_SCHEMA_DEFINE(st_mrec_topic, ST_MREC_TOPIC_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_partition, ST_MREC_PARTITION_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_config, ST_MREC_CONFIG_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_remove_topic, ST_MREC_REMOVE_TOPIC_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_endpoint, ST_MREC_ENDPOINT_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_feature, ST_MREC_FEATURE_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_register_broker, ST_MREC_REGISTER_BROKER_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_partition_change, ST_MREC_PARTITION_CHANGE_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_fence, ST_MREC_FENCE_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_producer_ids, ST_MREC_PRODUCER_IDS_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_user_scram, ST_MREC_USER_SCRAM_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_remove_user_scram, ST_MREC_REMOVE_USER_SCRAM_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_acl, ST_MREC_ACL_FIELDS)
ST_SCHEMA_DEFINE(st_mrec_remove_acl, ST_MREC_REMOVE_ACL_FIELDS)

#define FRAME_VERSION 1

static const st_schema_t *schema_of(int type) {
    switch (type) {
    case ST_MREC_REGISTER_BROKER: return &st_mrec_register_broker_schema;
    case ST_MREC_TOPIC: return &st_mrec_topic_schema;
    case ST_MREC_PARTITION: return &st_mrec_partition_schema;
    case ST_MREC_CONFIG: return &st_mrec_config_schema;
    case ST_MREC_REMOVE_TOPIC: return &st_mrec_remove_topic_schema;
    case ST_MREC_PARTITION_CHANGE: return &st_mrec_partition_change_schema;
    case ST_MREC_FENCE_BROKER:
    case ST_MREC_UNFENCE_BROKER: return &st_mrec_fence_schema;
    case ST_MREC_PRODUCER_IDS: return &st_mrec_producer_ids_schema;
    case ST_MREC_USER_SCRAM_CREDENTIAL: return &st_mrec_user_scram_schema;
    case ST_MREC_REMOVE_USER_SCRAM_CREDENTIAL: return &st_mrec_remove_user_scram_schema;
    case ST_MREC_ACCESS_CONTROL_ENTRY: return &st_mrec_acl_schema;
    case ST_MREC_REMOVE_ACCESS_CONTROL_ENTRY: return &st_mrec_remove_acl_schema;
    default: return NULL;
    }
}

void st_mrec_encode(int type, int version, const void *rec, st_buf_t *out) {
    st_chain_t ch;
    st_chain_init(&ch);
    st_buf_put_uvarint(&ch.mem, FRAME_VERSION);
    st_buf_put_uvarint(&ch.mem, (uint64_t)type);
    st_buf_put_uvarint(&ch.mem, (uint64_t)version);
    st_encode(schema_of(type), version, 1, rec, &ch);
    st_buf_put(out, ch.mem.data, ch.mem.len);
    st_chain_fini(&ch);
}

st_err_t st_mrec_decode(const uint8_t *p, size_t len, st_arena_t *a, st_mrec_t *out) {
    st_rd_t r;
    st_rd_init(&r, p, len);
    uint64_t frame = st_rd_uvarint(&r);
    out->type = (int)st_rd_uvarint(&r);
    out->version = (int)st_rd_uvarint(&r);
    if (r.err || frame != FRAME_VERSION) return ST_CORRUPT_BKPT;
    const st_schema_t *s = schema_of(out->type);
    if (!s) return ST_E_NOT_FOUND;
    memset(&out->u, 0, sizeof out->u);
    return st_decode(s, out->version, 1, &r, a, &out->u);
}

/*
 * records.c - the records of __transaction_state in Kafka's formats
 * (TransactionLogKey / TransactionLogValue; txn_int.h draws them),
 * described as schema rows and run through the protocol codec.
 *
 * Everything read here came from a log: hostile bytes, read with the
 * sticky reader; a record that does not parse is reported, not trusted.
 */
#define ST_MESSAGES_KEEP_DSL
#include "txn_int.h"

#include <stdlib.h>

#define ST_TREC_KEY_ROWS(X, S) X(S, STRING, transactional_id, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_trec_key_s, ST_TREC_KEY_ROWS)
ST_SCHEMA_DEFINE(st_trec_key_s, ST_TREC_KEY_ROWS)

#define ST_TREC_PARTS_ROWS(X, S)                                                        \
    X(S, STRING, topic, V(0), NN, NT, 0, _)                                            \
    X(S, ARRAY_INT32, partition_ids, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_trec_parts_s, ST_TREC_PARTS_ROWS)
ST_SCHEMA_DEFINE(st_trec_parts_s, ST_TREC_PARTS_ROWS)

#define ST_TREC_VALUE_ROWS(X, S)                                                        \
    X(S, INT64, producer_id, V(0), NN, NT, 0, _)                                       \
    X(S, INT64, previous_producer_id, V(1), NN, 0, -1, _)                              \
    X(S, INT64, next_producer_id, V(1), NN, 1, -1, _)                                  \
    X(S, INT16, producer_epoch, V(0), NN, NT, 0, _)                                    \
    X(S, INT32, transaction_timeout_ms, V(0), NN, NT, 0, _)                            \
    X(S, INT8, transaction_status, V(0), NN, NT, 0, _)                                 \
    X(S, ARRAY, transaction_partitions, V(0), NUL(0), NT, 0, st_trec_parts_s)          \
    X(S, INT64, transaction_last_update_timestamp_ms, V(0), NN, NT, 0, _)              \
    X(S, INT64, transaction_start_timestamp_ms, V(0), NN, NT, 0, _)                    \
    X(S, INT16, client_transaction_version, V(1), NN, 2, 0, _)
ST_SCHEMA_DECLARE(st_trec_value_s, ST_TREC_VALUE_ROWS)
ST_SCHEMA_DEFINE(st_trec_value_s, ST_TREC_VALUE_ROWS)

#define VALUE_VERSION_WRITTEN 0
#define VALUE_VERSION_MAX 1
#define VALUE_FLEXIBLE_FROM 1

static void encode_versioned(st_buf_t *out, int16_t version, const st_schema_t *s,
                             const void *v, int flexible) {
    st_chain_t c;
    st_chain_init(&c);
    st_buf_put_i16(&c.mem, version);
    st_encode(s, version, flexible, v, &c);
    st_buf_put(out, c.mem.data, c.mem.len);
    st_chain_fini(&c);
}

void st_trec_key(st_buf_t *out, st_str_t transactional_id) {
    st_trec_key_s_t k = {transactional_id.len < 0 ? st_str("") : transactional_id};
    encode_versioned(out, 0, &st_trec_key_s_schema, &k, 0);
}

void st_trec_value(st_buf_t *out, const st_trec_value_t *v) {
    /* partitions grouped by topic: parts are sorted by topic, then partition */
    st_trec_parts_s_t *topics = st_calloc((size_t)v->nparts + 1, sizeof *topics);
    int32_t *ids = st_calloc((size_t)v->nparts + 1, sizeof *ids);
    int nt = 0;
    for (int i = 0; i < v->nparts; i++) {
        const st_txn_tp_t *tp = &v->parts[i];
        if (!nt || topics[nt - 1].topic.len != tp->topic.len ||
            memcmp(topics[nt - 1].topic.p, tp->topic.p, (size_t)tp->topic.len) != 0) {
            topics[nt].topic = tp->topic;
            topics[nt].partition_ids.v = &ids[i];
            topics[nt].partition_ids.n = 0;
            nt++;
        }
        ids[i] = tp->partition;
        topics[nt - 1].partition_ids.n++;
    }
    st_trec_value_s_t r;
    st_schema_defaults(&st_trec_value_s_schema, &r);
    r.producer_id = v->producer_id;
    r.producer_epoch = v->producer_epoch;
    r.transaction_timeout_ms = v->timeout_ms;
    r.transaction_status = v->status;
    r.transaction_partitions.v = topics;
    r.transaction_partitions.n = nt;
    r.transaction_last_update_timestamp_ms = v->update_ts;
    r.transaction_start_timestamp_ms = v->start_ts;
    encode_versioned(out, VALUE_VERSION_WRITTEN, &st_trec_value_s_schema, &r, 0);
    free(ids);
    free(topics);
}

st_err_t st_trec_decode_key(const uint8_t *p, int32_t len, st_str_t *id) {
    if (!p || len < 2) return ST_E_CORRUPT;
    st_rd_t r;
    st_rd_init(&r, p, (size_t)len);
    int16_t version = st_rd_i16(&r);
    if (version != 0) return ST_E_NOT_FOUND;
    st_arena_t a;
    st_arena_init(&a, 64);
    st_trec_key_s_t k;
    st_err_t e = st_decode(&st_trec_key_s_schema, 0, 0, &r, &a, &k);
    st_arena_fini(&a);
    if (e || k.transactional_id.len < 0) return ST_E_CORRUPT;
    *id = k.transactional_id;
    return ST_OK;
}

st_err_t st_trec_decode_value(const uint8_t *p, int32_t len, st_arena_t *a, st_trec_value_t *out) {
    if (!p || len < 2) return ST_E_CORRUPT;
    st_rd_t r;
    st_rd_init(&r, p, (size_t)len);
    int16_t version = st_rd_i16(&r);
    if (version < 0 || version > VALUE_VERSION_MAX) return ST_E_NOT_FOUND;
    st_trec_value_s_t v;
    if (st_decode(&st_trec_value_s_schema, version, version >= VALUE_FLEXIBLE_FROM, &r, a, &v))
        return ST_E_CORRUPT;
    if (v.transaction_status < ST_TXN_EMPTY || v.transaction_status > ST_TXN_PREPARE_EPOCH_FENCE)
        return ST_E_CORRUPT;
    int n = 0;
    for (int i = 0; i < v.transaction_partitions.n; i++)
        n += ST_MAX(v.transaction_partitions.v[i].partition_ids.n, 0);
    out->parts = st_arena_alloc(a, sizeof *out->parts * (size_t)(n + 1));
    out->nparts = 0;
    for (int i = 0; i < v.transaction_partitions.n; i++) {
        st_trec_parts_s_t *t = &v.transaction_partitions.v[i];
        if (t->topic.len <= 0) return ST_E_CORRUPT;
        for (int j = 0; j < t->partition_ids.n; j++)
            out->parts[out->nparts++] = (st_txn_tp_t){t->topic, t->partition_ids.v[j]};
    }
    out->producer_id = v.producer_id;
    out->previous_producer_id = v.previous_producer_id;
    out->producer_epoch = v.producer_epoch;
    out->timeout_ms = v.transaction_timeout_ms;
    out->status = v.transaction_status;
    out->update_ts = v.transaction_last_update_timestamp_ms;
    out->start_ts = v.transaction_start_timestamp_ms;
    return ST_OK;
}

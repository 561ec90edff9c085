/* txn_int.h - declarations shared inside the transaction library. */
#ifndef ST_TXN_INT_H
#define ST_TXN_INT_H

#include "txn.h"

/* ---- records.c: __transaction_state keys and values ---------------------
 *
 * A record's key and value each start with an int16 version:
 *
 *   key    v0  TransactionLogKey    transactional_id (string)
 *   value  v0  TransactionLogValue  producer_id int64, producer_epoch int16,
 *                                   transaction_timeout_ms int32,
 *                                   transaction_status int8,
 *                                   transaction_partitions nullable
 *                                     [topic string, partition_ids [int32]],
 *                                   transaction_last_update_timestamp_ms int64,
 *                                   transaction_start_timestamp_ms int64
 *          v1  the same, flexible (compact strings and arrays, tagged
 *              fields: 0 previous_producer_id, 1 next_producer_id,
 *              2 client_transaction_version)
 *
 * Strata writes value v0 (what every Kafka since 0.11 reads); it reads
 * both.  A null value is a tombstone: the transactional id expired.
 */
typedef struct st_trec_value {
    int64_t producer_id;
    int64_t previous_producer_id; /* v1 tag 0; -1 none */
    int16_t producer_epoch;
    int32_t timeout_ms;
    int8_t status;
    st_txn_tp_t *parts; /* from the arena on decode; strings point into the input */
    int nparts;
    int64_t update_ts;
    int64_t start_ts;
} st_trec_value_t;

void st_trec_key(st_buf_t *out, st_str_t transactional_id);
void st_trec_value(st_buf_t *out, const st_trec_value_t *v);
/* CORRUPT for bytes that do not parse, NOT_FOUND for an unknown version.
 * Strings point into the input. */
st_err_t st_trec_decode_key(const uint8_t *p, int32_t len, st_str_t *id);
st_err_t st_trec_decode_value(const uint8_t *p, int32_t len, st_arena_t *a, st_trec_value_t *out);

#endif /* ST_TXN_INT_H */

/*
 * batch.h - record batch v2 (magic 2): the unit the log stores.
 *
 * The header, 61 bytes, big-endian:
 *
 *   off  size  field
 *     0     8  baseOffset             stamped by the leader
 *     8     4  batchLength            bytes after this field
 *    12     4  partitionLeaderEpoch   stamped by the leader
 *    16     1  magic                  2
 *    17     4  crc                    CRC32C of bytes 21 .. end
 *    21     2  attributes             bits 0-2 codec, 3 timestamp type,
 *                                     4 transactional, 5 control
 *    23     4  lastOffsetDelta
 *    27     8  baseTimestamp
 *    35     8  maxTimestamp
 *    43     8  producerId
 *    51     2  producerEpoch
 *    53     4  baseSequence
 *    57     4  recordCount
 *    61        records (compressed as a whole when codec != 0)
 *
 * Because the CRC starts at attributes, the leader can stamp baseOffset and
 * partitionLeaderEpoch without touching it.  LogAppendTime changes
 * attributes and maxTimestamp, so it recomputes the CRC (no re-encoding).
 *
 * A record inside (varints are zigzag):
 *   length varint, attributes int8, timestampDelta varlong,
 *   offsetDelta varint, keyLength varint (-1 null), key,
 *   valueLength varint (-1 null), value, headerCount varint,
 *   headers: keyLength varint, key, valueLength varint, value
 */
#ifndef ST_BATCH_H
#define ST_BATCH_H

#include "st_base.h"

#define ST_BATCH_HEADER_SIZE 61
#define ST_BATCH_LENGTH_OFFSET 8
#define ST_BATCH_LOG_OVERHEAD 12 /* baseOffset + batchLength */
#define ST_BATCH_EPOCH_OFFSET 12
#define ST_BATCH_MAGIC_OFFSET 16
#define ST_BATCH_CRC_OFFSET 17
#define ST_BATCH_ATTR_OFFSET 21
#define ST_BATCH_LAST_DELTA_OFFSET 23
#define ST_BATCH_BASE_TS_OFFSET 27
#define ST_BATCH_MAX_TS_OFFSET 35
#define ST_BATCH_COUNT_OFFSET 57

#define ST_ATTR_CODEC_MASK 0x07
#define ST_ATTR_LOG_APPEND_TIME 0x08
#define ST_ATTR_TRANSACTIONAL 0x10
#define ST_ATTR_CONTROL 0x20

enum st_codec { ST_CODEC_NONE = 0, ST_CODEC_GZIP = 1, ST_CODEC_SNAPPY = 2, ST_CODEC_LZ4 = 3,
                ST_CODEC_ZSTD = 4 };

/* What a header says, after its lengths were checked. */
typedef struct st_batch_info {
    int64_t base_offset;
    int32_t size; /* whole batch: 12 + batchLength */
    int32_t leader_epoch;
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int32_t record_count;
} st_batch_info_t;

static inline int64_t st_batch_last_offset(const st_batch_info_t *b) {
    return b->base_offset + b->last_offset_delta;
}

/* Parse a header from at least ST_BATCH_HEADER_SIZE bytes.  Checks magic
 * and that batchLength is sane; does not check the CRC. */
st_err_t st_batch_header(const uint8_t *p, size_t avail, st_batch_info_t *out);

/* Whether the CRC matches. */
int st_batch_crc_ok(const uint8_t *batch, int32_t size);

/* Produce-side checks of every batch in a records blob: lengths, magic,
 * CRC, record count (walking records of uncompressed batches), codec.
 * Returns CORRUPT_MESSAGE / INVALID_RECORD / MESSAGE_TOO_LARGE and writes
 * a reason; on success *count is the number of batches. */
typedef struct st_batch_limits {
    int32_t max_message_bytes;
    int64_t ts_before_max_ms; /* how far in the past a CreateTime may be */
    int64_t ts_after_max_ms;  /* how far in the future */
    int log_append_time;      /* the topic stamps time itself: skip ts checks */
} st_batch_limits_t;

st_err_t st_batches_validate(const uint8_t *p, size_t len, const st_batch_limits_t *lim,
                             int64_t now_ms, int *count, char *why, size_t whylen);

/* A compacted topic keeps the latest record per key, so every record must
 * have one (Kafka refuses a keyless one with INVALID_RECORD).  Decompresses
 * where it must; why names the first offender. */
st_err_t st_batches_check_keys(const uint8_t *p, size_t len, char *why, size_t whylen);

/* Stamp base offset and leader epoch; for LogAppendTime also the time
 * (recomputing the CRC).  Returns the offset after the batch. */
int64_t st_batch_stamp(uint8_t *batch, int64_t base_offset, int32_t leader_epoch,
                       int64_t log_append_ms);

/* ---- records inside a batch ----------------------------------------- */

typedef struct st_record {
    int64_t offset;
    int64_t timestamp;
    const uint8_t *key;
    int32_t key_len; /* -1: null */
    const uint8_t *value;
    int32_t value_len;
    int32_t header_count;
    const uint8_t *headers; /* raw header bytes */
    size_t headers_len;
} st_record_t;

/* Decompress a batch's records section when the codec asks for it.
 * out receives the plain records bytes (owned by the caller). */
st_err_t st_batch_decompress(const uint8_t *batch, int32_t size, st_buf_t *out);

/* Call fn for each record of a whole batch (decompressing if needed).
 * fn returns nonzero to stop. */
typedef int (*st_record_cb)(const st_record_t *r, void *arg);
st_err_t st_batch_foreach_record(const uint8_t *batch, int32_t size, st_record_cb fn, void *arg);

/* The first record of a whole batch at or after offset from whose
 * timestamp is >= ts (ListOffsets by timestamp): 1 and its offset and
 * timestamp, 0 when none. */
int st_batch_first_at_time(const uint8_t *batch, int32_t size, int64_t from, int64_t ts,
                           int64_t *offset, int64_t *found_ts);

/* ---- building batches (the broker's own logs: metadata, offsets) ----- */

typedef struct st_batch_record {
    const void *key;
    int32_t key_len; /* -1: null */
    const void *value;
    int32_t value_len; /* -1: null */
} st_batch_record_t;

/* Append one uncompressed batch holding recs to out; offsets start at 0
 * (the log stamps the real base offset). */
void st_batch_build(st_buf_t *out, const st_batch_record_t *recs, int n, int64_t timestamp_ms);

#endif /* ST_BATCH_H */

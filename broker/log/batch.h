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
#define ST_BATCH_PRODUCER_ID_OFFSET 43
#define ST_BATCH_PRODUCER_EPOCH_OFFSET 51
#define ST_BATCH_BASE_SEQUENCE_OFFSET 53
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
    int64_t producer_id; /* -1: none (neither idempotent nor transactional) */
    int16_t producer_epoch;
    int32_t base_sequence;
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

/* ---- produce-side validation ------------------------------------------
 *
 * Kafka's checks (UnifiedLog.analyzeAndValidateRecords, LogValidator), in
 * its order, batch by batch:
 *
 *   scan (header only, cheap: bounded by the request's bytes)
 *     lengths, magic 2, size <= max.message.bytes (MESSAGE_TOO_LARGE),
 *     CRC32C (CORRUPT_MESSAGE), a known codec, zstd only from Produce v7
 *     (UNSUPPORTED_COMPRESSION_TYPE), recordCount = lastOffsetDelta + 1 > 0,
 *     no control batch from a client, a producer id only with a sequence
 *     (INVALID_RECORD)
 *   walk (every record; compressed batches streamed, compress_int.h)
 *     each record's length, key, value and header lengths inside the
 *     record, no negative length or count, the record's fields ending
 *     exactly at its length, offset deltas 0, 1, 2, ... and exactly
 *     recordCount records (INVALID_RECORD); a payload that does not
 *     decompress (CORRUPT_MESSAGE) or inflates past max_inflated_bytes
 *     (MESSAGE_TOO_LARGE: a Java producer splits the batch and retries)
 *   per-record errors, all listed (KIP-467's record_errors)
 *     a record without a key on a compacted topic (INVALID_RECORD), a
 *     CreateTime outside the topic's bounds (INVALID_TIMESTAMP), a producer
 *     stamping LogAppendTime on a LogAppendTime topic (INVALID_TIMESTAMP)
 *   then, for a batch that passed
 *     maxTimestamp is set to the largest record timestamp and the CRC
 *     recomputed when the header said otherwise (Sarama sends -1), as
 *     LogValidator's setMaxTimestamp does; with a compression.type other
 *     than producer the batch is rebuilt in that codec.
 *
 * As Kafka, the first batch with record errors fails the records; its
 * records' indexes count from 0 within that batch.
 */

/* compression.type: producer keeps each batch's codec, the others
 * recompress to theirs (Kafka's names; the value less one is the codec). */
typedef enum st_batch_target {
    ST_TARGET_PRODUCER = 0,
    ST_TARGET_UNCOMPRESSED = 1,
    ST_TARGET_GZIP = 2,
    ST_TARGET_SNAPPY = 3,
    ST_TARGET_LZ4 = 4,
    ST_TARGET_ZSTD = 5
} st_batch_target_t;

/* 0 and *out for a Kafka compression.type name, -1 for anything else. */
int st_batch_target_parse(const char *name, st_batch_target_t *out);
const char *st_batch_codec_name(int codec);

/* What stored batches may inflate to when read back (ListOffsets by time,
 * the cleaner, group and metadata replay): produce-side validation holds
 * new batches to their topic's bound, this holds any older one. */
#ifndef ST_BATCH_MAX_INFLATED_BYTES /* the fuzzers build with less */
#define ST_BATCH_MAX_INFLATED_BYTES ((int64_t)256 << 20)
#endif
/* At most this many record errors are listed; the count says how many
 * there were. */
#define ST_BATCH_MAX_RECORD_ERRORS 1000

typedef struct st_batch_limits {
    int32_t max_message_bytes;
    int64_t ts_before_max_ms; /* how far in the past a CreateTime may be */
    int64_t ts_after_max_ms;  /* how far in the future */
    int log_append_time;      /* the topic stamps time itself */
    int compact;              /* cleanup.policy has compact: every record needs a key */
    int64_t max_inflated_bytes; /* a compressed batch's records, inflated (0: the stored bound) */
    st_batch_target_t target;   /* compression.type */
    int no_zstd;                /* Produce below v7 may not carry zstd */
} st_batch_limits_t;

typedef struct st_record_error {
    int32_t index;   /* the record's position in its batch */
    char *message;   /* owned */
} st_record_error_t;

/* What validation found.  Init before use, fini after. */
typedef struct st_batch_verdict {
    int nbatches;
    int needs_worker;   /* a batch must be inflated or recompressed */
    int recompress;     /* a batch's codec differs from compression.type */
    st_record_error_t *record_errors; /* at most ST_BATCH_MAX_RECORD_ERRORS */
    int nrecord_errors;
    int64_t record_errors_total;
    int64_t inflated_bytes; /* plain bytes of compressed batches walked */
    /* With recompress: the records to append instead of the input; else
     * empty, and the input itself was corrected in place. */
    st_buf_t rebuilt;
    char why[384]; /* the reason, naming batch, record and field */
} st_batch_verdict_t;

void st_batch_verdict_init(st_batch_verdict_t *v);
void st_batch_verdict_fini(st_batch_verdict_t *v);

/* The header checks of every batch in a records blob; sets nbatches,
 * needs_worker and recompress.  Touches nothing. */
st_err_t st_batches_scan(const uint8_t *p, size_t len, const st_batch_limits_t *lim,
                         st_batch_verdict_t *v);
/* Scan, then walk every record, correct maxTimestamps in place (CRC
 * recomputed) and recompress to lim->target.  The cost is proportional to
 * the inflated bytes (bounded by lim->max_inflated_bytes for all the
 * batches of p together) and memory is bounded (compress_int.h). */
st_err_t st_batches_validate(uint8_t *p, size_t len, const st_batch_limits_t *lim, int64_t now_ms,
                             st_batch_verdict_t *v);

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
 * out receives the plain records bytes (owned by the caller): memory grows
 * with the inflated size, up to ST_BATCH_MAX_INFLATED_BYTES. */
st_err_t st_batch_decompress(const uint8_t *batch, int32_t size, st_buf_t *out);

/* Call fn for each record of a whole batch (decompressing if needed, as a
 * stream: memory is a window plus the largest record).  Every record is
 * checked as on produce, except that offset deltas are taken as stored;
 * corrupt records or more than ST_BATCH_MAX_INFLATED_BYTES inflated are
 * ST_E_CORRUPT.  fn returns nonzero to stop. */
typedef int (*st_record_cb)(const st_record_t *r, void *arg);
st_err_t st_batch_foreach_record(const uint8_t *batch, int32_t size, st_record_cb fn, void *arg);

/* The first record of a whole batch at or after offset from whose
 * timestamp is >= ts (ListOffsets by timestamp): 1 and its offset and
 * timestamp, 0 when none.  Streams: memory is a window. */
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
/* The same as a control batch (attribute bit 5) of one record, whose key
 * is the control record's (int16 version, int16 type). */
void st_batch_build_control(st_buf_t *out, int16_t key_version, int16_t type, const void *value,
                            int32_t value_len, int64_t timestamp_ms);

/* Give the batch built at batch (size bytes, from st_batch_build*) a
 * producer: id, epoch, base sequence (-1: none, as the broker's own
 * transactional writes carry) and attribute bits to add
 * (ST_ATTR_TRANSACTIONAL); the CRC is recomputed.  A transaction marker
 * is st_batch_build_control then this with ST_ATTR_TRANSACTIONAL. */
void st_batch_set_producer(uint8_t *batch, size_t size, int64_t producer_id, int16_t epoch,
                           int32_t base_sequence, uint16_t attrs);

#endif /* ST_BATCH_H */

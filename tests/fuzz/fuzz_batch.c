/*
 * fuzz_batch.c - libFuzzer target: a records blob (the records of one
 * partition of a Produce) through the produce-side validator, then every
 * batch in it through the readers of stored batches (record iteration,
 * ListOffsets' time search, whole decompression).
 *
 * The first input byte picks the settings:
 *   bit 7  keep the CRCs as they are (else each batch's CRC is made right,
 *          so mutations reach the records instead of stopping at the CRC)
 *   bit 6  timestamp bounds of a minute back and an hour ahead
 *   bit 5  the topic uses LogAppendTime
 *   bit 4  the topic is compacted (keys required)
 *   bits 0-3 compression.type (mod 6: producer, uncompressed, gzip, ...)
 */
#include <stdlib.h>

#include "batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int touch_cb(const st_record_t *r, void *arg) {
    /* read every byte the record points at: ASan checks the pointers */
    unsigned *sum = arg;
    for (int32_t i = 0; i < r->key_len && r->key; i++) *sum += r->key[i];
    for (int32_t i = 0; i < r->value_len && r->value; i++) *sum += r->value[i];
    for (size_t i = 0; i < r->headers_len && r->headers; i++) *sum += r->headers[i];
    return 0;
}

static void fix_crcs(uint8_t *p, size_t len) {
    for (size_t pos = 0; pos + ST_BATCH_HEADER_SIZE <= len;) {
        uint32_t blen = st_be32_get(p + pos + ST_BATCH_LENGTH_OFFSET);
        if (blen < ST_BATCH_HEADER_SIZE - ST_BATCH_LOG_OVERHEAD || blen > len - pos - ST_BATCH_LOG_OVERHEAD)
            break;
        size_t size = blen + ST_BATCH_LOG_OVERHEAD;
        st_be32_put(p + pos + ST_BATCH_CRC_OFFSET,
                    st_crc32c(0, p + pos + ST_BATCH_ATTR_OFFSET, size - ST_BATCH_ATTR_OFFSET));
        pos += size;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t opt = data[0];
    data++;
    size--;
    uint8_t *p = malloc(size ? size : 1);
    if (size) memcpy(p, data, size);
    if (!(opt & 0x80)) fix_crcs(p, size);
    uint8_t *stored = malloc(size ? size : 1);
    if (size) memcpy(stored, p, size);

    st_batch_limits_t lim = {.max_message_bytes = 1 << 20,
                             .ts_before_max_ms = (opt & 0x40) ? 60000 : INT64_MAX,
                             .ts_after_max_ms = (opt & 0x40) ? 3600000 : INT64_MAX,
                             .log_append_time = (opt & 0x20) != 0,
                             .compact = (opt & 0x10) != 0,
                             .max_inflated_bytes = 4 << 20,
                             .target = (st_batch_target_t)((opt & 0x0f) % 6)};
    st_batch_verdict_t v;
    st_batch_verdict_init(&v);
    st_err_t e = st_batches_validate(p, size, &lim, 1700000000000, &v);
    if (e == ST_OK && v.rebuilt.len) {
        /* what recompression built must itself be valid */
        st_batch_limits_t again = lim;
        st_batch_verdict_t v2;
        st_batch_verdict_init(&v2);
        if (st_batches_validate(v.rebuilt.data, v.rebuilt.len, &again, 1700000000000, &v2)) abort();
        st_batch_verdict_fini(&v2);
    }
    st_batch_verdict_fini(&v);

    unsigned sum = 0;
    for (size_t pos = 0; pos < size;) {
        st_batch_info_t b;
        if (st_batch_header(stored + pos, size - pos, &b) || (size_t)b.size > size - pos) break;
        st_batch_foreach_record(stored + pos, b.size, touch_cb, &sum);
        int64_t off, ts;
        st_batch_first_at_time(stored + pos, b.size, 0, 1700000000000, &off, &ts);
        st_buf_t out;
        st_buf_init(&out);
        st_batch_decompress(stored + pos, b.size, &out);
        st_buf_fini(&out);
        pos += (size_t)b.size;
    }
    free(stored);
    free(p);
    return (int)(sum & 0);
}

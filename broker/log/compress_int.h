/*
 * compress_int.h - streaming decompression and compression of a record
 * batch's records section, for the codecs Kafka uses (gzip, snappy, lz4,
 * zstd).  Internal to st_log: batch.c walks records through it.
 *
 * Memory is bounded whatever the input claims:
 *   - inflating hands out the plain bytes a window (ST_LOG__WINDOW_BYTES) at
 *     a time; the codecs' own state is bounded too: zlib 32 KiB, lz4 frames
 *     at most two blocks (4 MiB each at worst), zstd frames a window of at
 *     most 2^ST_LOG__ZSTD_WINDOW_LOG_MAX bytes (frames asking more are
 *     refused).  Snappy cannot be streamed (a copy may reach back to the
 *     start of its block), so one block is inflated whole; snappy's format
 *     cannot expand a block more than 64/3 times, and a block claiming more
 *     is refused before anything is allocated.
 *   - the plain bytes of one inflation stop at a limit (MESSAGE_TOO_LARGE):
 *     the CPU a decompression bomb can cost is bounded by that limit.
 *   - compressing writes into a buffer that may not grow past max_out
 *     (MESSAGE_TOO_LARGE), so a recompressed batch never exceeds what the
 *     topic accepts.
 *
 * Threads: an object belongs to the thread that uses it; nothing is shared.
 */
#ifndef ST_LOG_COMPRESS_INT_H
#define ST_LOG_COMPRESS_INT_H

#include "st_base.h"

#include <zlib.h>

#define ST_LOG__WINDOW_BYTES (64 * 1024)
/* 16 MiB: every zstd level up to 19 on any input, and the ultra levels on
 * inputs up to 16 MiB (zstd shrinks the window to the input when it knows
 * its size, as librdkafka's and the Java client's one-shot batches do). */
#define ST_LOG__ZSTD_WINDOW_LOG_MAX 24

typedef struct st_log__inflate {
    int codec;
    const uint8_t *in;
    size_t in_len, in_pos;
    int64_t limit; /* most plain bytes this inflation may produce */
    int64_t total; /* plain bytes produced so far */
    uint8_t *win;  /* the window, or one whole snappy block */
    size_t win_cap;
    int started, done;
    z_stream z;
    int z_ready;
    void *lz4;  /* LZ4F_dctx */
    void *zstd; /* ZSTD_DCtx */
    int xerial; /* snappy in the Java client's framing */
    int frame_end; /* zstd: the last call ended a frame */
    char why[192];
} st_log__inflate_t;

/* Prepare to inflate in[0..len) coded with codec (ST_CODEC_*); nothing is
 * allocated until the first st_log__inflate_next. */
void st_log__inflate_init(st_log__inflate_t *f, int codec, const uint8_t *in, size_t len,
                          int64_t limit);
/* The next piece of plain bytes, valid until the next call: *n == 0 at the
 * end of the stream.  Errors: CORRUPT_MESSAGE (the payload does not decode;
 * f->why says how), MESSAGE_TOO_LARGE (past the limit), NOMEM. */
st_err_t st_log__inflate_next(st_log__inflate_t *f, const uint8_t **out, size_t *n);
void st_log__inflate_fini(st_log__inflate_t *f);

typedef struct st_log__deflate {
    int codec;
    st_buf_t *out; /* compressed bytes are appended here (not owned) */
    size_t start;  /* out->len when compression began */
    size_t max_out;
    z_stream z;
    int z_ready;
    void *lz4;  /* LZ4F_cctx */
    void *zstd; /* ZSTD_CCtx */
    uint8_t *pend; /* snappy: input of the block being filled */
    size_t pend_len;
    st_err_t err; /* sticky */
} st_log__deflate_t;

/* Compress into out with codec (ST_CODEC_NONE copies), as Kafka's own
 * writers frame each codec: gzip with a gzip header, snappy in the Java
 * client's (xerial) framing of 32 KiB blocks, lz4 frames of independent
 * 64 KiB blocks, zstd level 3 (Kafka's default level). */
st_err_t st_log__deflate_init(st_log__deflate_t *d, int codec, st_buf_t *out, size_t max_out);
st_err_t st_log__deflate_write(st_log__deflate_t *d, const uint8_t *p, size_t n);
st_err_t st_log__deflate_finish(st_log__deflate_t *d);
void st_log__deflate_fini(st_log__deflate_t *d);

#endif /* ST_LOG_COMPRESS_INT_H */

/* log_int.h - declarations shared inside the log library. */
#ifndef ST_LOG_INT_H
#define ST_LOG_INT_H

#include "log.h"

/*
 * .index entries, 8 bytes, big-endian (Kafka's OffsetIndex):
 *
 *   0      4      8
 *   +------+------+
 *   | rel  | pos  |   rel = last offset of a batch - segment base offset
 *   +------+------+   pos = byte position of that batch in the .log
 *
 * .timeindex entries, 12 bytes (Kafka's TimeIndex):
 *
 *   0             8      12
 *   +-------------+------+
 *   |  timestamp  | rel  |   the largest timestamp so far and the offset
 *   +-------------+------+   (relative) of the record that carried it
 *
 * Both are sparse: an entry every log.index.interval.bytes of batches.
 */
#define ST_LOG_PREALLOC_BYTES (1 << 20) /* per fallocate; small: it is reserved per partition */

typedef struct st_idx_entry {
    int32_t rel;
    int32_t pos;
} st_idx_entry_t;

typedef struct st_tidx_entry {
    int64_t ts;
    int32_t rel;
} st_tidx_entry_t;

typedef struct st_segment {
    int64_t base_offset;
    int64_t next_offset; /* offset after the last batch */
    int64_t size;        /* bytes of valid batches */
    int64_t prealloc_end; /* disk blocks allocated up to here (fallocate) */
    st_file_t *file;     /* the .log */
    int index_fd, timeindex_fd;
    st_idx_entry_t *idx;
    int nidx, capidx;
    st_tidx_entry_t *tidx;
    int ntidx, captidx;
    int64_t max_timestamp;
    int64_t offset_of_max_timestamp;
    int64_t bytes_since_index;
    int64_t created_ms; /* for segment.ms */
    int dirty_index;    /* index entries not yet in the files */
    int nidx_written, ntidx_written; /* entries already in the files */
} st_segment_t;

struct st_log {
    pthread_mutex_t lock;
    int refs;
    st_logmgr_t *mgr;
    char *dir;       /* the partition's directory */
    char *parent;    /* the log dir holding it */
    char *topic;
    int32_t partition;
    st_log_config_t cfg;

    st_segment_t **segs; /* ascending base offset; the last one is active */
    int nsegs, capsegs;

    int64_t log_start_offset; /* local */
    int64_t remote_end;       /* offsets below are in the bucket (tiering) */
    int64_t high_watermark;
    int64_t leo;
    int64_t flushed_offset;
    int offline;
    int deleted; /* the partition was deleted: its files go */
    int closed;  /* segments closed: every operation fails */

    /* leader-epoch cache: (epoch, first offset) ascending */
    struct {
        int32_t epoch;
        int64_t start;
    } *epochs;
    int nepochs, capepochs;

    st_log_notify_cb notify;
    void *notify_arg;
    int flush_queued; /* guarded by the manager's lock */
    st_log_t *flush_next;
};

/* Segment life cycle (segment.c). */
st_err_t st_log__seg_open(const char *dir, int64_t base, int create, st_segment_t **out);
/* Recover a segment: load indexes, and scan from the last trusted index
 * entry (all of it when the indexes are missing or wrong).  With validate,
 * every batch scanned is CRC-checked and a bad tail is truncated. */
st_err_t st_log__seg_recover(st_segment_t *s, const char *dir, int validate, int is_last,
                             int64_t next_base, const st_log_config_t *cfg,
                             const char *what);
void st_log__seg_index_batch(st_segment_t *s, const st_batch_info_t *b, int64_t pos,
                             int32_t interval);
st_err_t st_log__seg_write_indexes(st_segment_t *s, int final);
void st_log__seg_trim(st_segment_t *s);
void st_log__seg_close(st_segment_t *s);
void st_log__seg_unlink(st_segment_t *s, const char *dir);
/* Position of the batch holding offset (or the first batch after it);
 * returns the size when offset is past the end. */
st_err_t st_log__seg_find(st_segment_t *s, int64_t offset, int64_t *pos, st_batch_info_t *bi);
void st_log__seg_path(const char *dir, int64_t base, const char *ext, char *out, size_t n);

/* Epoch cache (log.c). */
void st_log__epoch_assign(st_log_t *log, int32_t epoch, int64_t start);
void st_log__epoch_truncate_from(st_log_t *log, int64_t offset);
st_err_t st_log__epoch_load(st_log_t *log);

/* Opening (log.c): loads segments from dir; used by the manager. */
st_err_t st_log__open(st_logmgr_t *m, const char *parent, const char *topic, int32_t partition,
                      const st_uuid_t *topic_id, const st_log_config_t *cfg, int clean,
                      int64_t log_start_hint, int64_t recovery_point, st_log_t **out);
void st_log__close(st_log_t *log, int clean);

#endif /* ST_LOG_INT_H */

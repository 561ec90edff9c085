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
#define ST_LOG_DEFAULT_MAX_OPEN_FILES 1024 /* log.max.open.files */

typedef struct st_idx_entry {
    int32_t rel;
    int32_t pos;
} st_idx_entry_t;

typedef struct st_tidx_entry {
    int64_t ts;
    int32_t rel;
} st_tidx_entry_t;

/* ---- the cache of open segment files (fcache.c) ----------------------- */

typedef struct st_fcache st_fcache_t;

/* One segment file's place in the cache.  Guarded by the cache's lock. */
typedef struct st_fslot {
    struct st_fslot *prev, *next; /* on the cache's list while file is set */
    st_file_t *file;              /* the open file, or NULL */
} st_fslot_t;

st_fcache_t *st_log__fcache_new(int max_open);
void st_log__fcache_destroy(st_fcache_t *c);
/* A kept file of slot s (dir/<20-digit base><ext>), opened (with create:
 * O_CREAT) when the slot is empty.  ST_E_NOFILE when no descriptor can be
 * had.  Call with the lock of the log owning the slot held. */
st_err_t st_log__fcache_keep(st_fcache_t *c, st_fslot_t *s, const char *dir, int64_t base,
                             const char *ext, int create, st_file_t **out);
/* The slot goes away (segment closed): the cache drops its reference. */
void st_log__fcache_forget(st_fcache_t *c, st_fslot_t *s);
void st_log__fcache_stats(st_fcache_t *c, st_log_file_stats_t *out);
/* Syncing through the manager's st_log_sync_ops_t (NULL: the system
 * calls); set once before any log opens.  c may be NULL (a segment built
 * outside any log, the cleaner's): the system calls. */
void st_log__fcache_set_sync(st_fcache_t *c, const st_log_sync_ops_t *ops);
st_err_t st_log__sync(st_fcache_t *c, int fd, int data_only);
st_err_t st_log__sync_dir(st_fcache_t *c, const char *dir);
/* tmp file, fsync, rename, fsync of the directory (a checkpoint). */
st_err_t st_log__write_file_atomic(st_fcache_t *c, const char *path, const void *data,
                                   size_t len);
/* The manager's cache (logmgr.c). */
st_fcache_t *st_log__mgr_fcache(st_logmgr_t *m);
/* The log's next flush.ms deadline moved earlier (logmgr.c): wake the
 * janitor.  Call without the log's lock. */
void st_log__mgr_flush_due(st_logmgr_t *m, int64_t due_mono_ms);

/* ---- segments (segment.c) ------------------------------------------------ */

enum { ST_SEG_LOG = 0, ST_SEG_INDEX = 1, ST_SEG_TIMEINDEX = 2 };

/*
 * Guarded by the owning log's lock.  No descriptor is held: the files are
 * reached through st_log__seg_keep (the cache), each caller releasing what
 * it kept.
 */
typedef struct st_segment {
    int64_t base_offset;
    int64_t next_offset; /* offset after the last batch */
    int64_t size;        /* bytes of valid batches */
    int64_t prealloc_end; /* disk blocks allocated up to here (fallocate) */
    uint64_t id;         /* unique in the process: names it across a swap */
    st_fcache_t *fc;     /* borrowed: the manager's */
    const char *dir;     /* borrowed: the log's directory */
    st_fslot_t files[3]; /* ST_SEG_LOG, ST_SEG_INDEX, ST_SEG_TIMEINDEX */
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
    int indexes_final;  /* closed: the index files are complete (and synced unless
                         * indexes_unsynced) */
    int indexes_unsynced; /* closed by a roll: the flusher still syncs the index files */
    int txn_unsynced;     /* writes of its .txnindex since the flusher synced it */
} st_segment_t;

/* ---- producer state (pstate.c) ------------------------------------------ */

#define ST_PSTATE_BATCHES 5 /* Kafka's NUM_BATCHES_TO_RETAIN */

typedef struct st_pstate_batch {
    int32_t first_seq, last_seq;
    int64_t last_offset;
    int32_t offset_delta; /* last offset - first offset */
    int64_t max_timestamp;
} st_pstate_batch_t;

/* One producer id: its epoch and its last batches, oldest first. */
typedef struct st_pstate_entry {
    int64_t producer_id; /* -1: an empty slot */
    int16_t epoch;       /* -1: not known */
    int nbatches;
    st_pstate_batch_t batches[ST_PSTATE_BATCHES];
    int64_t last_timestamp;
    int32_t coordinator_epoch; /* -1; kept for the transaction work */
    int64_t txn_first_offset;  /* -1: no transaction open */
} st_pstate_entry_t;

/* Producer id -> entry, open addressing (no limit on the count). */
typedef struct st_pstate {
    st_pstate_entry_t *slots;
    size_t cap; /* 0 or a power of two */
    size_t n;
} st_pstate_t;

void st_log__pstate_init(st_pstate_t *t);
void st_log__pstate_fini(st_pstate_t *t);
void st_log__pstate_clear(st_pstate_t *t);
st_pstate_entry_t *st_log__pstate_lookup(const st_pstate_t *t, int64_t pid);
/* The snapshot file's bytes (pstate.c draws them), and back; decode
 * leaves out the entries expired at now_ms. */
void st_log__pstate_encode(const st_pstate_t *t, st_buf_t *out);
st_err_t st_log__pstate_decode(const uint8_t *p, size_t len, int64_t now_ms, int64_t expiration_ms,
                               st_pstate_t *t, const char **why);

/*
 * Lock order: the manager's lock, then a log's lock, then the file cache's
 * lock (innermost).
 */
typedef struct st_log_guard {
    int64_t producer_id;
    int64_t guard;
} st_log_guard_t;

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
    /* Bumped by every change of the cache.  The checkpoint file is written
     * outside log->lock (by the flusher, or after a truncation by the
     * truncating thread), serialized by epoch_file_lock, which guards
     * epoch_gen_written; the epochs of everything below flushed_offset are
     * in the file before flushed_offset covers them. */
    int64_t epoch_gen;
    pthread_mutex_t epoch_file_lock; /* taken before log->lock, never under it */
    int64_t epoch_gen_written;

    /* Bumped by every roll: the new segment's files are in the directory
     * once the flusher has synced it (rolls_synced, guarded by the lock). */
    int64_t rolls, rolls_synced;

    /* Producer state (pstate.c): the table, the offsets of the snapshot
     * files in the directory (ascending), the roll snapshot the flusher
     * has yet to sync (-1: none), batches the last reload replayed. */
    st_pstate_t pstate;
    st_pstate_t pstage; /* an append's staged changes (empty between appends) */
    int64_t *snaps;
    int nsnaps, capsnaps;
    int64_t pstate_snap_unsynced;
    int64_t pstate_replayed;
    /* Aborted transactions (txn.c), ascending marker offset: what the
     * .txnindex files hold, for read_committed fetches. */
    st_log_aborted_txn_t *aborted;
    int naborted, capaborted;
    int txn_replaying; /* a replay re-derives entries: no file writes */
    /* KIP-890 verification guards (txn.c): per producer with no
     * transaction open here, the guard a verification began with; taken
     * away when the producer's transaction begins or a marker ends it.
     * append_guard is the append's own (under the lock, during append). */
    st_log_guard_t *guards;
    int nguards, capguards;
    int64_t next_guard;
    int64_t append_guard;

    int64_t last_flush_ms; /* monotonic: for flush.ms */
    /* Bumped by every truncation: an fsync that started before one must
     * not raise flushed_offset over what the truncation put in its place. */
    int64_t truncations;

    st_log_notify_cb notify;
    void *notify_arg;
    int notifying;               /* callbacks under way (lock) */
    pthread_cond_t notify_cond;  /* signalled when notifying drops to 0 */
    /* guarded by the manager's lock */
    int flush_queued;
    st_log_t *flush_next;
    int mgr_index; /* in the manager's list; -1 when not in it */
};

/* Segment life cycle (segment.c).  With create the three files are
 * created (a new segment); without, only the .log's size is read. */
st_err_t st_log__seg_open(st_fcache_t *fc, const char *dir, int64_t base, int create,
                          st_segment_t **out);
/* A kept file of the segment (ST_SEG_*), through the cache.  Index files
 * are created when missing. */
st_err_t st_log__seg_keep(st_segment_t *s, int kind, st_file_t **out);
/* Called for each batch a validating recovery keeps, in order. */
typedef void (*st_log__seg_batch_cb)(void *arg, const st_batch_info_t *b);
/* Recover a segment: load indexes, and scan from the last trusted index
 * entry (all of it when the indexes are missing or wrong).  With validate,
 * the whole segment is scanned, every batch CRC-checked (cb called for
 * each batch kept, when not NULL) and a bad tail is truncated. */
st_err_t st_log__seg_recover(st_segment_t *s, const char *dir, int validate, int is_last,
                             int64_t next_base, const st_log_config_t *cfg,
                             const char *what, st_log__seg_batch_cb cb, void *cb_arg);
void st_log__seg_index_batch(st_segment_t *s, const st_batch_info_t *b, int64_t pos,
                             int32_t interval);
st_err_t st_log__seg_write_indexes(st_segment_t *s, int final);
/* A roll closes the segment: its index files complete (the closing time
 * entry, cut to their entries) but not synced; the flusher syncs them. */
st_err_t st_log__seg_close_indexes(st_segment_t *s);
/* Cut the segment before the batch holding offset (the .log synced, the
 * index files cut to what stays), and index what stays as an active
 * segment.  Nothing to do when no batch holds offset or a later one. */
st_err_t st_log__seg_truncate(st_segment_t *s, int64_t offset, int32_t index_interval);
/* The same into descriptors the caller opened (the cleaner's new files). */
st_err_t st_log__seg_write_index_fds(st_segment_t *s, int index_fd, int timeindex_fd, int final);
/* Give back blocks allocated past the data (with force even when none
 * were allocated by this process: recovery). */
st_err_t st_log__seg_trim(st_segment_t *s, int force);
void st_log__seg_close(st_segment_t *s);
void st_log__seg_unlink(st_segment_t *s, const char *dir);
/* The same files by base offset (a segment that was never opened whole). */
void st_log__seg_unlink_files(const char *dir, int64_t base);
/* Position of the batch holding offset (or the first batch after it), read
 * through f (the segment's kept .log); returns the size when offset is past
 * the end. */
st_err_t st_log__seg_find(st_segment_t *s, st_file_t *f, int64_t offset, int64_t *pos,
                          st_batch_info_t *bi);
void st_log__seg_path(const char *dir, int64_t base, const char *ext, char *out, size_t n);
/* The earliest timestamp the segment's time index knows (its first
 * batch's), or its max timestamp; -1 when empty. */
int64_t st_log__seg_first_timestamp(const st_segment_t *s);

/* Epoch cache (log.c): changed under log->lock, checkpointed by
 * st_log__epoch_checkpoint without it. */
void st_log__epoch_assign(st_log_t *log, int32_t epoch, int64_t start);
void st_log__epoch_truncate_from(st_log_t *log, int64_t offset);
st_err_t st_log__epoch_checkpoint(st_log_t *log);
st_err_t st_log__epoch_load(st_log_t *log);

/* Opening (log.c): loads segments from dir; used by the manager. */
st_err_t st_log__open(st_logmgr_t *m, const char *parent, const char *topic, int32_t partition,
                      const st_uuid_t *topic_id, const st_log_config_t *cfg, int clean,
                      int64_t log_start_hint, int64_t recovery_point, int64_t hw_hint,
                      st_log_t **out);
void st_log__close(st_log_t *log, int clean);
/* Finish or undo an interrupted cleaning pass in one partition directory
 * (cleaner.c); st_log__open calls it when it sees .cleaned / .swap files. */
st_err_t st_log__cleaner_recover_partition(const char *dir);
/* KIP-354's test (cleaner.c). */
int st_log__compaction_lag_due(int64_t max_compaction_lag_ms, int64_t first_dirty_ts,
                               int64_t now_ms);
/* Producer state of a log (pstate.c), all with log->lock held.  check:
 * the leader's checks of an append whose batches will land from the leo
 * (lat: the LogAppendTime, -1 for CreateTime), staging what they change;
 * a duplicate fills *dup (duplicate = 1).  commit: the staged state
 * becomes the log's after the write.  apply: a follower's written batches,
 * unchecked.  open: after the segments were recovered (log->snaps: the
 * snapshot offsets the directory listing found).  truncated: rebuild
 * after a truncation to the leo.  reset: after truncate_fully.
 * start_moved: snapshots below the log start go.  snapshot: write the
 * state as <offset>.snapshot (sync: durable now; else the flusher syncs
 * it: sync_target names it, synced clears it). */
st_err_t st_log__pstate_check(st_log_t *log, const uint8_t *records, size_t len, int64_t lat,
                              st_pstate_t *stage, st_append_info_t *dup);
void st_log__pstate_commit(st_log_t *log, const st_pstate_t *stage);
void st_log__pstate_apply(st_log_t *log, const uint8_t *records, size_t len);
void st_log__pstate_open(st_log_t *log, int clean);
void st_log__pstate_truncated(st_log_t *log);
void st_log__pstate_reset(st_log_t *log);
/* The producer state from a snapshot's bytes (decoded whole first: on
 * ST_E_CORRUPT nothing changes), also written as the log's snapshot of
 * offset.  log->lock held. */
st_err_t st_log__pstate_install(st_log_t *log, int64_t offset, const void *snap, size_t len,
                                const char **why);
void st_log__pstate_start_moved(st_log_t *log);
st_err_t st_log__pstate_snapshot(st_log_t *log, int64_t offset, int sync);
int64_t st_log__pstate_sync_target(st_log_t *log, char *path, size_t n);
void st_log__pstate_synced(st_log_t *log, int64_t offset);
void st_log__pstate_free(st_log_t *log);

/* Transactions (txn.c), lock held.  Every batch written (leader, follower,
 * replay) passes through txn_apply after the producer state took it:
 * bytes is the whole batch (needed for a control batch's marker type),
 * or NULL when only the header was read (the function then reads a
 * control batch itself from fd at pos). */
void st_log__txn_apply(st_log_t *log, const st_batch_info_t *b, const uint8_t *bytes, int fd,
                       int64_t pos);
void st_log__txn_apply_all(st_log_t *log, const uint8_t *records, size_t len);
/* The leader's checks of one batch against the transaction state. */
st_err_t st_log__txn_check(st_log_t *log, const st_batch_info_t *b, const uint8_t *bytes);
int64_t st_log__lso_locked(st_log_t *log);
/* Load every segment's .txnindex (at open, before the producer state). */
void st_log__txn_load(st_log_t *log);
/* A replay from `from` starts (entries at or above it go) / ended (the
 * .txnindex files of the segments it covered are written again). */
void st_log__txn_replay_begin(st_log_t *log, int64_t from);
void st_log__txn_replay_end(st_log_t *log, int64_t from);
void st_log__txn_start_moved(st_log_t *log);
/* Write segment i's .txnindex again from memory (after a cleaner swap). */
void st_log__txn_rewrite_seg(st_log_t *log, int i);
/* Drop the aborted transactions whose markers (at these offsets) the
 * cleaner removed. */
void st_log__txn_forget(st_log_t *log, const int64_t *marker_offsets, int n);
void st_log__txn_reset(st_log_t *log);
void st_log__txn_free(st_log_t *log);

/* When flush.ms wants the log synced (monotonic ms); INT64_MAX: never. */
int64_t st_log__flush_due(st_log_t *log);

#endif /* ST_LOG_INT_H */

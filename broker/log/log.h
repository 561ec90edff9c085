/*
 * log.h - the partition log: segments, indexes, leader-epoch checkpoint,
 * recovery, retention, and the log directories that hold them.
 *
 * A partition replica is a directory <topic>-<partition> holding, per
 * segment, <20-digit base offset>.log / .index / .timeindex, producer
 * state snapshots <20-digit offset>.snapshot, and a leader-epoch-checkpoint
 * and partition.metadata (Kafka's layout).
 *
 * Offsets of a log, always: log_start_offset <= high_watermark <= leo, and
 * flushed_offset <= leo.  Consumers read below the high watermark; the
 * replica layer moves the high watermark (a single replica sets it to the
 * leo after each append).
 *
 * Threads: a st_log_t is shared by every I/O thread; its mutex guards all of
 * its fields.  File reads done under the mutex are page-cache preads of a
 * few header bytes; the data itself leaves through sendfile outside it.
 * fsync runs outside the mutex on the flusher thread (st_logmgr_t).
 *
 * Descriptors: a log holds none while idle.  Segment files are opened on
 * demand through the manager's bounded cache (log.max.open.files); a read
 * hands out a kept file, which stays open until released however the cache
 * evicts.  When no descriptor can be had, the operation answers
 * ST_E_NOFILE ("too many open files", KAFKA_STORAGE_ERROR on the wire) and
 * the log stays online; only a failed write or fsync takes it offline.
 */
#ifndef ST_LOG_H
#define ST_LOG_H

#include "batch.h"
#include "st_base.h"

/* The settings a log reads (a topic's effective configuration). */
typedef struct st_log_config {
    int64_t segment_bytes;
    int64_t segment_ms;
    int64_t retention_ms;    /* -1: forever */
    int64_t retention_bytes; /* -1: unbounded */
    int32_t index_interval_bytes;
    int32_t segment_index_bytes;
    int32_t max_message_bytes;
    int log_append_time; /* message.timestamp.type=LogAppendTime */
    int64_t ts_before_max_ms;
    int64_t ts_after_max_ms;
    int delete_policy; /* cleanup.policy contains delete */
    int compact;       /* cleanup.policy contains compact: every record needs a key */
    int compression;   /* compression.type (st_batch_target_t); the log itself ignores it */
    /* Tiered storage: local segments go only once the bucket has them
     * (below remote_end), by the local bounds; total retention is the
     * remote log manager's. */
    int remote;
    /* ... with uploads off (remote.log.copy.disable, KIP-950): local
     * segments go by the total bounds whether or not the bucket has them,
     * as in a log that is not tiered (Kafka's
     * remoteLogEnabledAndRemoteCopyEnabled). */
    int remote_copy_disable;
    /* ... a read replica (strata.remote.read.replica): the bucket's part
     * is another cluster's, nothing is appended here. */
    int read_replica;
    int64_t local_retention_ms;
    int64_t local_retention_bytes;
    /* Kafka's flush.messages / flush.ms: fsync once this many offsets are
     * unflushed / once this long has passed since the last fsync (through
     * the flusher, so an acks=0/1 answer does not wait for it).  0: never. */
    int64_t flush_messages;
    int64_t flush_ms;
    /* max.compaction.lag.ms (KIP-354), compacted topics: a log whose oldest
     * dirty record is older is cleaned whatever its dirty ratio.  0: none. */
    int64_t max_compaction_lag_ms;
    /* producer.id.expiration.ms (a broker setting): a producer id whose
     * last timestamp is older is forgotten, unless a transaction of it is
     * open.  <= 0: Kafka's default, one day. */
    int64_t producer_id_expiration_ms;
} st_log_config_t;

typedef struct st_log st_log_t;
typedef struct st_logmgr st_logmgr_t;

/* Called (on the appending or flushing thread, without the log's lock)
 * after the log's end offset or flushed offset moved. */
typedef void (*st_log_notify_cb)(st_log_t *log, void *arg);

/* ---- log manager: log.dirs, locks, checkpoints, flusher, janitor ------ */

/* How the log library makes files durable: fsync(2), or fdatasync(2) when
 * data_only; returns 0, or -1 with errno set.  Every fsync of a segment,
 * an index, a checkpoint or a directory goes through it, so a test can
 * count the calls, see which thread makes them and under which lock, hold
 * them or fail them. */
typedef struct st_log_sync_ops {
    int (*sync)(void *arg, int fd, int data_only);
    void *arg;
} st_log_sync_ops_t;

typedef struct st_logmgr_config {
    char **dirs;
    int ndirs;
    int32_t node_id;
    int64_t retention_check_interval_ms;
    int64_t checkpoint_interval_ms;
    /* log.max.open.files: segment files kept open at most (0: 1024); never
     * more than half the process's RLIMIT_NOFILE.  Files in use by readers
     * and writers are kept beyond it. */
    int max_open_files;
    /* cluster.id: NULL or "": what meta.properties holds, else a new
     * random id; otherwise the dirs must hold this id or none. */
    const char *cluster_id;
    /* producer.id.expiration.check.interval.ms: how often the janitor
     * forgets expired producer ids (<= 0: Kafka's default, 10 minutes). */
    int64_t producer_id_expiration_check_interval_ms;
} st_logmgr_config_t;

/* Lock every directory (a second broker on the same dirs is refused),
 * read or write meta.properties (cluster id), note whether the last stop
 * was clean.  cluster_id_out receives the stored or a new id. */
st_err_t st_logmgr_open(const st_logmgr_config_t *cfg, st_logmgr_t **out, char *err,
                        size_t errlen);
const char *st_logmgr_cluster_id(const st_logmgr_t *m);
int st_logmgr_clean_start(const st_logmgr_t *m);
/* The broker epoch the last stop was clean at (the clean-shutdown marker
 * names it, Kafka's CleanShutdownFile); -1 after an unclean stop, on a
 * new dir or when the dirs disagree. */
int64_t st_logmgr_previous_broker_epoch(const st_logmgr_t *m);
/* The broker epoch the marker names if this run stops cleanly. */
void st_logmgr_set_broker_epoch(st_logmgr_t *m, int64_t epoch);
/* Directory for a new partition: the dir holding the fewest partitions. */
const char *st_logmgr_pick_dir(st_logmgr_t *m);
/* Dirs already holding <topic>-<partition>, or NULL. */
const char *st_logmgr_find_dir(st_logmgr_t *m, const char *topic, int32_t partition);
/* Sync through ops (NULL: the system calls) from here on; borrowed, it
 * outlives the manager.  Call before any log opens. */
void st_logmgr_set_sync_ops(st_logmgr_t *m, const st_log_sync_ops_t *ops);
/* Start the flusher and janitor threads. */
void st_logmgr_start(st_logmgr_t *m);
/* Stop threads, close every log cleanly, write checkpoints and the clean
 * shutdown marker, unlock. */
void st_logmgr_close(st_logmgr_t *m);

/* Open (creating if needed) the log of a partition.  The manager keeps it
 * for flushing, retention and checkpoints until st_logmgr_drop. */
st_err_t st_logmgr_open_log(st_logmgr_t *m, const char *topic, int32_t partition,
                            const st_uuid_t *topic_id, const st_log_config_t *cfg,
                            st_log_t **out);
/* Close and delete a partition's directory (topic deletion).  Takes the
 * caller's reference; others still holding one see a closed log. */
void st_logmgr_delete_log(st_logmgr_t *m, st_log_t *log);
/* Write the recovery-point and log-start checkpoints now. */
void st_logmgr_checkpoint(st_logmgr_t *m);
/* Ask the flusher to fsync this log (group commit: one fsync serves every
 * append that arrived before it starts). */
void st_logmgr_request_flush(st_logmgr_t *m, st_log_t *log);
/* The flusher's times since start: each log's flush (fdatasync of what
 * it holds unsynced: Kafka's LogFlushRateAndTimeMs), and each round's
 * wait from its first request until the flusher took the queue (the
 * previous round and the wait for a CPU).  Any thread. */
void st_logmgr_flush_stats(st_logmgr_t *m, st_histo_t *flush, st_histo_t *wait);
/* The longest time a flush request waited until its log was synced
 * (queue and fsync) since the last call, counting a round still running
 * and requests still queued; -1 when there was no flush to wait on. */
int64_t st_logmgr_take_flush_peak(st_logmgr_t *m);

/* The cache of open segment files (log.max.open.files). */
typedef struct st_log_file_stats {
    int open_files;     /* held by the cache now (idle or in use) */
    int max_open_files; /* its bound */
    int64_t opens, hits, evictions;
    int64_t nofile; /* opens refused: no descriptor and none idle */
} st_log_file_stats_t;

void st_logmgr_file_stats(st_logmgr_t *m, st_log_file_stats_t *out);
/* Logs the manager holds. */
int st_logmgr_nlogs(st_logmgr_t *m);

/* ---- one log ---------------------------------------------------------- */

/* Set (or, with NULL, clear) the callback; returns once no callback with
 * the previous arg is running on another thread.  Not to be called from
 * inside the log's own callback. */
void st_log_set_notify(st_log_t *log, st_log_notify_cb cb, void *arg);
st_log_t *st_log_keep(st_log_t *log);
void st_log_release(st_log_t *log);
void st_log_set_config(st_log_t *log, const st_log_config_t *cfg);
void st_log_get_config(st_log_t *log, st_log_config_t *cfg);
const char *st_log_topic(const st_log_t *log);
int32_t st_log_partition(const st_log_t *log);
const char *st_log_dir(const st_log_t *log);

typedef struct st_log_offsets {
    int64_t log_start_offset;
    int64_t high_watermark;
    int64_t leo;
    int64_t flushed_offset;
    int64_t size_bytes;
    int nsegments;
    int offline;
} st_log_offsets_t;

void st_log_offsets(st_log_t *log, st_log_offsets_t *out);

/* Append already-validated batches (one records blob).  Stamps offsets and
 * the leader epoch into the caller's buffer, writes, indexes.  Returns the
 * base offset, and with LogAppendTime the time used.  ST_E_NOFILE when the
 * segment file could not be opened (nothing written, the log online);
 * KAFKA_STORAGE_ERROR when the write failed (the log is offline).
 *
 * Batches with a producer id (KIP-98) are checked first against the
 * partition's producer state, under the same lock as the write, each
 * against the state the earlier ones of the append leave:
 * ST_E_INVALID_PRODUCER_EPOCH for an epoch older than the producer's,
 * ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER for a sequence that does not follow
 * its last one (or a new epoch not starting at 0; a producer with no state
 * is taken at any sequence, KIP-360); nothing is written then.  A batch
 * the producer already wrote (one of its last 5: same epoch, same first
 * and last sequence) is ST_OK with duplicate set and the original batch's
 * offsets, and nothing of the append is written (Kafka's answer to a
 * retried produce). */
typedef struct st_append_info {
    int64_t base_offset;
    int64_t last_offset;
    int64_t log_append_time; /* -1 for CreateTime */
    int64_t log_start_offset;
    int duplicate; /* 1: nothing written, the offsets are the original batch's */
} st_append_info_t;

st_err_t st_log_append(st_log_t *log, uint8_t *records, size_t len, int32_t leader_epoch,
                       int64_t now_ms, st_append_info_t *info);

/* A follower's append (Kafka's appendAsFollower): the batches already carry
 * their base offsets and leader epochs, which the log keeps.  The first
 * must start at the leo and each next one right after the previous, with
 * epochs that never go down; otherwise ST_E_INVAL and nothing is written.
 * The epochs enter the leader-epoch cache, the producer fields the
 * producer state, unchecked (Kafka's REPLICATION origin), so a follower
 * that becomes leader checks sequences as the old leader did.  Errors as
 * st_log_append. */
st_err_t st_log_append_as_follower(st_log_t *log, const uint8_t *records, size_t len,
                                   int64_t now_ms, st_append_info_t *info);

/* Drop [offset, leo) (Kafka's truncateTo): the batch holding offset and
 * everything after it go, also from the leader-epoch cache; the high
 * watermark and the flushed offset come down with the leo.  The cut is
 * synced before it returns, so divergent batches cannot come back after a
 * crash.  The producer state is rebuilt for the new end (Kafka's
 * truncateAndReload: the newest snapshot at or below it, then the batch
 * headers after it) and the snapshots above it are deleted.  Nothing to do
 * at or past the leo; ST_E_OFFSET_OUT_OF_RANGE below the log start
 * offset. */
st_err_t st_log_truncate_to(st_log_t *log, int64_t offset);

/* From the leader-epoch cache (Kafka's LeaderEpochFileCache.endOffsetFor):
 * the largest epoch <= epoch and where it ends (the start of the next
 * epoch, or the leo); -1 and -1 when every epoch held is larger. */
void st_log_end_offset_for_epoch(st_log_t *log, int32_t epoch, int32_t *out_epoch,
                                 int64_t *out_end);

/* Move the high watermark (replica layer); clamped to the leo. */
void st_log_set_high_watermark(st_log_t *log, int64_t hw);

/* Read from offset up to max_bytes, stopping at the high watermark.  With
 * min_one the first batch comes whole even when larger than max_bytes
 * (KIP-74); without, such a batch gives an empty read.  On success *file,
 * when set, is a reference the caller releases. */
typedef struct st_log_read {
    st_file_t *file;
    int64_t pos;
    int32_t len;
    int64_t high_watermark;
    int64_t log_start_offset;
    int64_t leo;
} st_log_read_t;

st_err_t st_log_read(st_log_t *log, int64_t offset, int32_t max_bytes, int min_one,
                     st_log_read_t *out);
/* The same up to the leo instead of the high watermark: what a follower
 * fetches from its leader. */
st_err_t st_log_read_replica(st_log_t *log, int64_t offset, int32_t max_bytes, int min_one,
                             st_log_read_t *out);

/* One step of a coordinator's replay of its partition (Kafka's loaders
 * read to the log end: a new leader's high watermark may still be behind
 * what its old leader acknowledged): up to max_bytes of batches from *pos
 * (at least one whole), read into *buf (grown as needed), each batch
 * ending at or after *pos given to fn with its bytes, *pos moved past
 * them; a *pos below the log start moves to it.  *done = 1 at the log
 * end.  ST_E_CORRUPT when no whole batch could be read at *pos (the log
 * is damaged from there); another error when it cannot be read. */
typedef void (*st_log_replay_fn)(const st_batch_info_t *b, const uint8_t *bytes, void *arg);
st_err_t st_log_replay_step(st_log_t *log, int64_t *pos, int32_t max_bytes, uint8_t **buf,
                            size_t *bufcap, st_log_replay_fn fn, void *arg, int *done);

/* First offset whose record timestamp is >= ts; ST_E_NOT_FOUND when none. */
st_err_t st_log_offset_for_time(st_log_t *log, int64_t ts, int64_t *offset, int64_t *found_ts,
                                int32_t *epoch);
/* The largest record timestamp below the high watermark (-1 when empty). */
int64_t st_log_max_timestamp(st_log_t *log);
/* The leader epoch of the batch holding offset (-1 when unknown). */
int32_t st_log_epoch_for_offset(st_log_t *log, int64_t offset);
/* Latest leader epoch in the epoch cache (-1 when empty). */
int32_t st_log_latest_epoch(st_log_t *log);

/* DeleteRecords: raise the log start offset to offset (<= high watermark)
 * and drop segments wholly below it.  *low_out is the new log start. */
st_err_t st_log_delete_records(st_log_t *log, int64_t offset, int64_t *low_out);

/* Close the active segment and start a new one (tests and tools); the
 * flusher is asked to sync the closed one, as after a roll by an append. */
st_err_t st_log_roll(st_log_t *log);

/* Retention: drop closed segments past retention.ms / retention.bytes.
 * Returns the number deleted. */
int st_log_apply_retention(st_log_t *log, int64_t now_ms);

/* fsync everything appended so far (rolled segments with their index
 * files and the directory, the leader-epoch checkpoint); returns after the
 * flushed offset has moved.  Blocks on the disk: the flusher's (or a
 * caller's that may wait), never under the log's lock.  ST_E_NOFILE (the
 * log stays online) when a file could not be opened for want of
 * descriptors; KAFKA_STORAGE_ERROR when the fsync failed (the log is
 * offline). */
st_err_t st_log_flush(st_log_t *log);

/* ---- tiered storage ---------------------------------------------------- */

/* A closed segment as the remote log manager needs it. */
typedef struct st_log_segment_info {
    int64_t base_offset;
    int64_t last_offset;
    int64_t max_timestamp;
    int64_t size_bytes;
    char log_path[4096]; /* the log's own path bound: a path always fits */
    char index_path[4096];
    char timeindex_path[4096];
    char txnindex_path[4096]; /* "" when the segment has no aborted transaction */
    char snapshot_path[4096]; /* the producer snapshot at its end; "" when none */
    struct {
        int32_t epoch;
        int64_t start_offset;
    } epochs[32];
    int nepochs;
} st_log_segment_info_t;

/* Up to max closed segments with base_offset >= from, wholly below the high
 * watermark and the flushed offset (data and index files synced), oldest
 * first. */
int st_log_closed_segments(st_log_t *log, int64_t from, st_log_segment_info_t *out, int max);
/* Offsets below remote_end are in the bucket: local retention may delete
 * segments holding only those. */
void st_log_set_remote_end(st_log_t *log, int64_t remote_end);
/* Bytes of segments holding offsets at or above offset. */
int64_t st_log_bytes_above(st_log_t *log, int64_t offset);
/* Drop every local segment and start empty at offset (Kafka's
 * truncateFullyAndStartAt): the local copy is behind what the bucket
 * holds.  No producer is known after it and every snapshot goes. */
st_err_t st_log_truncate_fully(st_log_t *log, int64_t offset);
/* A read replica's empty log follows the bucket's end up to offset, at
 * once for every reader: started again there (as st_log_truncate_fully)
 * keeping the aborted transactions below it, with the producer state of
 * snap (the bucket's at offset; NULL: none), whose open transactions hold
 * the last stable offset back.  ST_E_INVAL when the log is not empty or
 * offset is not above its end. */
st_err_t st_log_follow_remote(st_log_t *log, int64_t offset, const void *snap, size_t len);
/* After st_log_truncate_fully(offset), before anything is appended: the
 * producer state of the batches below offset from a snapshot's bytes (the
 * bucket's, KIP-405), also written as the log's snapshot of offset so a
 * restart has it.  ST_E_INVAL when the log is no longer empty at offset
 * or already knows a producer; ST_E_CORRUPT for bytes that do not decode
 * (nothing changes then).  *producers: how many it now knows. */
st_err_t st_log_restore_producer_state(st_log_t *log, int64_t offset, const void *snap,
                                       size_t len, int *producers);

/* ---- producer state (pstate.c) -----------------------------------------
 *
 * Per producer id, what Kafka's DescribeProducers reports.  The state is
 * the log's: a follower builds it from the batches it appends, a restart
 * from the newest <offset>.snapshot and the batches after it.
 */
typedef struct st_log_producer {
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t last_sequence;  /* -1: no batch known */
    int64_t last_timestamp; /* the last batch's max timestamp */
    int32_t coordinator_epoch;        /* -1: none */
    int64_t current_txn_start_offset; /* -1: no transaction open */
} st_log_producer_t;

/* ---- transactions (txn.c) ----------------------------------------------
 *
 * Transactional batches (attribute bit 4) open a transaction of their
 * producer in this partition at their base offset; a control batch (a
 * commit or abort marker a transaction coordinator had written through
 * WriteTxnMarkers) closes it.  The last stable offset is the first offset
 * of the oldest open transaction, or the high watermark when none is
 * open: read_committed consumers read below it.  Each aborted transaction
 * (producer id, first offset, marker offset, the LSO after it) is kept in
 * memory and in the .txnindex file of the segment holding its marker
 * (Kafka's format: int16 version 0, then four int64), rebuilt by the
 * replay after a crash or truncation.
 */
typedef struct st_log_aborted_txn {
    int64_t producer_id;
    int64_t first_offset;
    int64_t last_offset; /* the abort marker's offset */
    int64_t last_stable_offset;
} st_log_aborted_txn_t;

/* Kafka's control record types (the marker's key). */
#define ST_CONTROL_ABORT 0
#define ST_CONTROL_COMMIT 1

/* KIP-890 part 1, the leader's verification of a transaction.  Before a
 * transactional batch of a producer that has no transaction open in this
 * partition is appended, the transaction coordinator is asked whether the
 * partition is in the producer's transaction.  A marker written while it
 * is asked (the transaction ended, by EndTxn or a timeout) must make that
 * append fail rather than open a transaction nobody will end (a hanging
 * transaction), so the verification begins with a guard:
 *
 *   st_log_txn_verify_begin   0 when pid has a transaction open here (no
 *                             verification; the open one must still be
 *                             open at the append), else its guard (> 0;
 *                             one per producer, shared by verifications
 *                             under way at once)
 *   st_log_append_verified    with the guard: a transactional batch of a
 *                             producer with no transaction open is
 *                             INVALID_TXN_STATE unless its guard is still
 *                             the producer's (no marker came meanwhile)
 *
 * The guard goes when the producer's transaction begins here or a marker
 * of it is written.  st_log_append checks no guard (verification off,
 * ST_LOG_UNVERIFIED). */
#define ST_LOG_UNVERIFIED (-1)
int64_t st_log_txn_verify_begin(st_log_t *log, int64_t producer_id);
st_err_t st_log_append_verified(st_log_t *log, uint8_t *records, size_t len, int32_t leader_epoch,
                                int64_t now_ms, int64_t guard, st_append_info_t *info);

/* The last stable offset: <= the high watermark. */
int64_t st_log_last_stable_offset(st_log_t *log);
/* Read as st_log_read does, stopping at the last stable offset
 * (isolation_level read_committed); *lso_out receives it. */
st_err_t st_log_read_committed(st_log_t *log, int64_t offset, int32_t max_bytes, int min_one,
                               st_log_read_t *out, int64_t *lso_out);
/* The aborted transactions whose marker is at or above from and whose
 * first offset is below upper (Kafka's collectAbortedTransactions), up
 * to max, oldest first; returns how many there are (may exceed max). */
int st_log_aborted_txns(st_log_t *log, int64_t from, int64_t upper, st_log_aborted_txn_t *out,
                        int max);
/* Add aborted transactions known from elsewhere (the bucket's .txnindex
 * objects of a tiered partition), skipping those already held. */
void st_log_add_aborted(st_log_t *log, const st_log_aborted_txn_t *v, int n);
/* A control batch's marker: ST_CONTROL_ABORT or _COMMIT and the
 * coordinator epoch from its value; -1 when the batch holds none. */
int st_batch_control_type(const uint8_t *batch, int32_t size, int32_t *coordinator_epoch);

/* Up to max producers, ascending producer id; returns how many there are
 * (which may be more than max). */
int st_log_producers(st_log_t *log, st_log_producer_t *out, int max);
int st_log_producer_count(st_log_t *log);
/* Forget the producers whose last timestamp is producer.id.expiration.ms
 * older than now_ms and that have no transaction open (the janitor calls
 * it every producer.id.expiration.check.interval.ms); returns how many. */
int st_log_expire_producers(st_log_t *log, int64_t now_ms);

/* ---- compaction (cleaner.c) --------------------------------------------
 *
 * The log cleaner keeps the latest record of each key in the closed
 * segments of topics whose cleanup.policy includes compact: offsets are
 * never renumbered, batches stay whole (a batch that loses records is
 * rebuilt with its base offset, epoch, producer fields and codec), and
 * tombstones go once older than delete.retention.ms.  Each pass rewrites
 * groups of segments into <base>.log.cleaned, renames them to .swap (the
 * commit point), removes the old segments and renames the .swap into
 * place; st_log_cleaner_recover finishes or undoes an interrupted pass
 * before the logs are opened (Kafka's .cleaned / .swap scheme).
 */
typedef struct st_log_compact_config {
    int64_t delete_retention_ms;     /* delete.retention.ms */
    int64_t min_compaction_lag_ms;   /* min.compaction.lag.ms */
    double min_cleanable_dirty_ratio;
    int64_t segment_bytes; /* a group of cleaned segments stays below it */
} st_log_compact_config_t;

/* One pass over one log. */
typedef struct st_log_clean_opts {
    int64_t first_dirty;      /* where the last pass ended (0: from the start) */
    int64_t now_ms;           /* wall clock: compaction lag, tombstone ages */
    int64_t map_bytes;        /* memory for the key map (24 bytes a key) */
    int64_t io_bytes_per_sec; /* <= 0: no limit */
    const volatile int *cancel; /* nonzero: stop (the pass is undone) */
    int force;                /* clean even below min.cleanable.dirty.ratio */
} st_log_clean_opts_t;

typedef struct st_log_clean_result {
    int cleaned;            /* a pass ran (0: nothing to do) */
    int64_t first_dirty;    /* where the next pass starts */
    int64_t tombstone_due;  /* wall ms when a kept tombstone expires; -1 none */
    double dirty_ratio;     /* before the pass */
    int lag_due;            /* max.compaction.lag.ms made it eligible */
    int64_t bytes_read, bytes_written;
    int64_t records_kept, records_removed, tombstones_removed;
    int64_t markers_removed; /* transaction markers (their transactions left nothing) */
    int segments_before, segments_after;
} st_log_clean_result_t;

st_err_t st_log_clean(st_log_t *log, const st_log_compact_config_t *cfg,
                      const st_log_clean_opts_t *opts, st_log_clean_result_t *res);

/* Finish or undo interrupted passes in every partition directory of a log
 * dir (call before its logs are opened). */
st_err_t st_log_cleaner_recover(const char *log_dir);

/* The cleaner thread: visits the logs a source lists, most dirty first. */
typedef struct st_log_cleanable {
    st_log_t *log; /* kept by the source; the cleaner releases it */
    st_log_compact_config_t cfg;
} st_log_cleanable_t;

/* Fill *out (malloc'ed) with the logs to compact; returns the count. */
typedef int (*st_log_cleaner_list_cb)(void *arg, st_log_cleanable_t **out);

typedef struct st_log_cleaner_config {
    int64_t backoff_ms;       /* log.cleaner.backoff.ms */
    int64_t dedupe_bytes;     /* log.cleaner.dedupe.buffer.size */
    int64_t io_bytes_per_sec; /* log.cleaner.io.max.bytes.per.second */
} st_log_cleaner_config_t;

typedef struct st_log_cleaner st_log_cleaner_t;

st_log_cleaner_t *st_log_cleaner_new(const st_log_cleaner_config_t *cfg,
                                     st_log_cleaner_list_cb list, void *arg);
void st_log_cleaner_start(st_log_cleaner_t *c);
/* Stop (a pass in progress is undone) and free. */
void st_log_cleaner_destroy(st_log_cleaner_t *c);

#endif /* ST_LOG_H */

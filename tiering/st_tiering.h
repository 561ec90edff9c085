/*
 * st_tiering.h - the remote log manager: closed segments go to the bucket,
 * old offsets are served from it.
 *
 * Per partition, a manifest object in the bucket is the source of truth for
 * what is remote:
 *
 *   <prefix>/<topic>-<topicId>/<partition>/manifest.json
 *   <prefix>/<topic>-<topicId>/<partition>/<baseOffset:20>-<segmentId>.log
 *                                                                 .index
 *                                                                 .timeindex
 *                                                                 .epochs
 *
 * Segment objects are immutable and named with a fresh id, so a retried
 * upload never overwrites a committed one.  Upload order: the objects, then
 * the manifest naming them (the commit point), then the broker may delete
 * its local copy.  Remote retention: the manifest without the segments
 * first, the objects after.  A crash anywhere leaves the old manifest or
 * the new one, never one naming a missing object; objects no manifest
 * names are orphans, deleted by a later sweep.
 *
 * Reads: an offset below the local log start is found in the manifest,
 * located through the segment's offset index (downloaded once, cached) and
 * served from chunks of the segment (about chunk_bytes, starting on
 * batches), downloaded by ranged GETs
 * into a bounded on-disk chunk cache; two readers of one chunk share one
 * download, and a sequential reader's next chunks are fetched ahead, across
 * segment boundaries.  Nothing here blocks the caller: a read that needs a
 * download answers ST_E_AGAIN and calls the wake callback once.
 *
 * This library knows Kafka's record batch framing (it walks batch headers
 * to find an offset) but includes no broker header: the broker describes
 * closed segments through st_tier_part_ops_t and hears of progress through
 * its callbacks.
 *
 * Threads: the manager's task thread (uploads, retention, sweeps, run on a
 * small pool) and the object store's threads (completions).  Every public
 * function is thread-safe.
 */
#ifndef ST_TIERING_H
#define ST_TIERING_H

#include <limits.h>

#include "st_base.h"
#include "st_objectstore.h"

typedef struct st_tier_config {
    int64_t task_interval_ms;       /* remote.log.manager.task.interval.ms */
    int32_t copy_threads;           /* partitions uploading at once */
    int64_t copy_max_bytes_per_s;   /* 0: unlimited */
    int64_t fetch_max_bytes_per_s;  /* 0: unlimited */
    int64_t retry_backoff_ms;       /* a failing segment: first wait (0: 500) */
    int64_t retry_backoff_max_ms;   /* and the longest (0: 30000) */
    double retry_jitter;            /* random part, a fraction of the wait */
    int64_t orphan_min_age_ms;      /* an unnamed object younger is left alone */
    int64_t chunk_bytes;            /* ranged GET size */
    const char *cache_dir;
    int64_t cache_bytes;            /* chunks on disk */
    int64_t cache_memory_bytes;     /* chunks in memory first (0: straight to disk) */
    int32_t readahead_chunks;
    int64_t index_cache_bytes;      /* downloaded offset indexes kept */
    /* Yielding to live traffic: every 100 ms the task thread asks
     * foreground_latency_us for the longest wait live work had in the
     * window (-1: there was none), and paces downloads (AIMD: halved while
     * it is above yield_latency_us, back up by yield_min_bytes_per_s each
     * window below, unpaced after 2 s below).  NULL or 0: never paced. */
    int64_t (*foreground_latency_us)(void *arg);
    void *foreground_arg;
    int64_t yield_latency_us;
    int64_t yield_min_bytes_per_s;
    /* The store's settings (copied), from which a read replica's source
     * at another location is opened (st_os_config_at).  NULL: replicas
     * read the manager's store only. */
    const st_os_config_t *store_config;
} st_tier_config_t;

typedef struct st_tier st_tier_t;
typedef struct st_tier_part st_tier_part_t;

typedef struct st_tier_epoch {
    int32_t epoch;
    int64_t start_offset;
} st_tier_epoch_t;

/* A closed local segment offered for upload (paths are copied). */
typedef struct st_tier_segment {
    int64_t base_offset;
    int64_t last_offset;
    int64_t max_timestamp;
    int64_t size_bytes;
    char log_path[PATH_MAX]; /* any path the system can open fits */
    char index_path[PATH_MAX];
    char timeindex_path[PATH_MAX];
    char txnindex_path[PATH_MAX]; /* aborted transactions; "" when none */
    char snapshot_path[PATH_MAX]; /* producer state at its end; "" when none */
    st_tier_epoch_t epochs[32]; /* the leader epochs the segment spans */
    int nepochs;
} st_tier_segment_t;

/* How the manager asks the broker about one partition, and tells it. */
typedef struct st_tier_part_ops {
    /* Up to max closed segments with base_offset >= from, wholly below the
     * high watermark, oldest first; returns how many. */
    int (*closed_segments)(void *arg, int64_t from, st_tier_segment_t *out, int max);
    /* The remote part moved: [remote_start, remote_end) is in the bucket
     * (remote_start == remote_end: nothing). */
    void (*remote_changed)(void *arg, int64_t remote_start, int64_t remote_end);
    /* Bytes of the local log not yet in the bucket (for total retention). */
    int64_t (*local_bytes_above)(void *arg, int64_t offset);
    /* Where the local log starts.  While uploads are off
     * (ST_TIER_READ_ONLY), local retention may delete segments the bucket
     * never got: a local log starting above the remote end moves the log
     * start there and the remote segments below go, as Kafka's log start
     * offset moves when a segment goes with remote.log.copy.disable.  May
     * be NULL. */
    int64_t (*local_log_start)(void *arg);
    /* The aborted transactions the bucket's .txnindex objects hold (n
     * entries of producer id, first offset, marker offset, last stable
     * offset), read when the partition's manifest is loaded by its
     * leader: a restart that lost the local files still answers
     * read_committed fetches of remote offsets.  May be NULL. */
    void (*remote_aborted)(void *arg, const int64_t (*entries)[4], int n);
    /* The manager is done with arg (after st_tier_part_close, once no job
     * of the partition runs any more). */
    void (*release)(void *arg);
    void *arg;
} st_tier_part_ops_t;

typedef struct st_tier_retention {
    int64_t retention_ms;    /* total: -1 forever */
    int64_t retention_bytes; /* total: -1 unbounded */
} st_tier_retention_t;

/* ---- the manager ------------------------------------------------------ */

st_err_t st_tier_new(const st_tier_config_t *cfg, st_os_t *os, st_tier_t **out, char *err,
                     size_t errlen);
void st_tier_start(st_tier_t *t);
/* Stops the task thread, waits for uploads and downloads in flight. */
void st_tier_destroy(st_tier_t *t);

typedef struct st_tier_stats {
    uint64_t bytes_uploaded, segments_uploaded, upload_requests, upload_failures;
    uint64_t bytes_fetched, fetch_requests, fetch_failures;
    uint64_t cache_hits, cache_misses, cache_evictions, cache_spills;
    uint64_t segments_deleted, objects_deleted, orphans_deleted;
    int64_t fetch_pace_bytes_per_s;  /* downloads paced at (0: not paced) */
    uint64_t fetch_pace_cuts;        /* windows that halved the pace */
    int64_t cache_used_bytes;        /* chunks on disk */
    int64_t cache_memory_used_bytes; /* chunks in memory */
} st_tier_stats_t;

void st_tier_get_stats(st_tier_t *t, st_tier_stats_t *out);

/* What the manager asked of the object store for each topic: requests by
 * S3's billing class and bytes each way (uploads, manifest reads and
 * writes, index and chunk downloads, retention deletes, orphan listings),
 * counted from the first open of a partition of the topic on this broker
 * for as long as the manager runs (a deleted topic's stay).  Sorted by
 * topic; *out (heap) holds the returned count of entries; free it with
 * st_tier_usage_free. */
typedef struct st_tier_topic_usage {
    char *topic;
    st_os_usage_t usage;
} st_tier_topic_usage_t;

int st_tier_usage(st_tier_t *t, st_tier_topic_usage_t **out);
void st_tier_usage_free(st_tier_topic_usage_t *v, int n);

/* ---- partitions -------------------------------------------------------- */

/*
 * What tiering does for a partition, from its topic's settings (KIP-950):
 *
 *   ST_TIER_ON         remote.storage.enable: closed segments go up, old
 *                      offsets are read back, remote retention runs
 *   ST_TIER_READ_ONLY  ... with remote.log.copy.disable: no more uploads;
 *                      reads of the bucket and remote retention go on
 *   ST_TIER_DELETE     remote.storage.enable=false with
 *                      remote.log.delete.on.disable: the remote part is
 *                      no longer read (at once) and is deleted from the
 *                      bucket by the leader (manifest first)
 *   ST_TIER_REPLICA    a read replica (strata.remote.read.replica): the
 *                      bucket's manifest is another cluster's, written by
 *                      its leader; this broker never writes to the bucket
 *                      (no upload, retention, orphan sweep, descriptor or
 *                      deletion, not even at close with delete_remote).
 *                      While it leads, each job reads the manifest again
 *                      and tells the broker when the remote part moved.
 *                      A part opens in this mode and stays in it.
 *
 *            set_mode(READ_ONLY)              set_mode(DELETE)
 *     ON  ------------------------>  READ_ONLY  ------------------> DELETE
 *      ^ <------------------------             <------------------   |
 *      |        set_mode(ON)            set_mode(READ_ONLY)          |
 *      +-------------------------------------------------------------+
 *           set_mode(ON): tiering starts again from the local log
 *
 * The deletion DELETE owes is recorded in a marker file
 * (ST_TIER_DELETE_PENDING_FILE) beside the cached manifest, written at
 * set_mode(DELETE) and removed once the bucket holds nothing of the
 * partition, so that a restart still owes it.  Back to ON before it is
 * done: this broker, if it leads, deletes first and starts afresh; if it
 * does not, it forgets the marker (the leader owns the bucket, and a
 * marker kept would let this broker, leading one day, delete a remote log
 * written since).
 */
typedef enum st_tier_mode {
    ST_TIER_ON = 0,
    ST_TIER_READ_ONLY = 1,
    ST_TIER_DELETE = 2,
    ST_TIER_REPLICA = 3
} st_tier_mode_t;

/* The marker of a deletion owed (see above), in the partition's directory. */
#define ST_TIER_DELETE_PENDING_FILE "remote-log-delete-pending"

/* Attach a partition in a mode.  ON and READ_ONLY: its manifest is read
 * from the local cache file when there is one, else from the bucket
 * (blocking: the broker must learn the remote end before it appends); the
 * bucket copy is refreshed later.  DELETE: nothing is read; the deletion
 * is owed (marker written, cached manifest removed).  A marker found at
 * open in ON or READ_ONLY mode is forgotten: the topic was tiered again
 * while this broker was away, and whoever led since owns the bucket.
 * ops are called from the manager's threads. */
st_err_t st_tier_part_open(st_tier_t *t, const char *topic, const char *topic_id,
                           int32_t partition, const char *cache_manifest_path,
                           st_tier_mode_t mode, const st_tier_part_ops_t *ops,
                           const st_tier_retention_t *ret, st_tier_part_t **out, char *err,
                           size_t errlen);
/* Attach a read replica's partition (ST_TIER_REPLICA): its manifest and
 * segments are read at location, where another cluster tiers the topic
 * (as st_os_describe writes it: s3://BUCKET/PREFIX, file:///ROOT; NULL or
 * "": the manager's store).  The manager opens a store for each location
 * with the store's settings (store_config) and keeps it until it is
 * destroyed.  No cached manifest, status or marker file: nothing is kept
 * beside the local partition. */
st_err_t st_tier_part_open_replica(st_tier_t *t, const char *location, const char *topic,
                                   const char *topic_id, int32_t partition,
                                   const st_tier_part_ops_t *ops, st_tier_part_t **out, char *err,
                                   size_t errlen);
/* Change the mode (the topic's settings changed; at once, without a
 * restart).  Returns the mode it had. */
st_tier_mode_t st_tier_part_set_mode(st_tier_part_t *p, st_tier_mode_t mode);
st_tier_mode_t st_tier_part_mode(st_tier_part_t *p);
/* Detach; with delete_remote, every object of the partition goes too
 * (topic deletion; done in the background).  Lets go of the reference
 * open gave; the part lives on while others hold one. */
void st_tier_part_close(st_tier_part_t *p, int delete_remote);
/* Another reference to p (for a reader on another thread than the one
 * that closes it), and letting go of one. */
st_tier_part_t *st_tier_part_keep(st_tier_part_t *p);
void st_tier_part_release(st_tier_part_t *p);
void st_tier_part_set_retention(st_tier_part_t *p, const st_tier_retention_t *ret);
/* Whether this broker leads the partition (0 at open), and at which
 * leader epoch: only a leader uploads segments, applies remote retention
 * and sweeps orphans; on becoming leader (or at a new epoch) the manifest
 * is read from the bucket again.  Each manifest written records the
 * epoch, and one found in the bucket at a higher epoch fences this broker:
 * it writes nothing more until it leads at a higher epoch still. */
void st_tier_part_set_leader(st_tier_part_t *p, int leading, int32_t leader_epoch);
/* Whether the bucket's aborted transactions were handed to the broker
 * (remote_aborted) since the partition opened: until then a
 * read_committed fetch of a remote offset must wait, or it could show
 * records of aborted transactions. */
int st_tier_part_aborted_ready(st_tier_part_t *p);
/* Upload now, whatever the task interval (tests, shutdown). */
void st_tier_part_kick(st_tier_part_t *p);

typedef struct st_tier_status {
    int64_t remote_start;   /* first remote offset (== remote_end: none) */
    int64_t remote_end;     /* next offset after the remote part */
    int64_t remote_bytes;
    int remote_segments;
    int64_t durable_log_start; /* log start the bucket's manifest holds */
    int64_t last_upload_ms; /* wall clock; 0: never */
    int loaded;             /* manifest read */
    /* A segment whose upload keeps failing, backed off exponentially
     * (remote.log.manager.task.retry.backoff.ms, .max.ms, .jitter); the
     * same shows in remote-upload-status.json beside the cached manifest. */
    int64_t failing_base_offset; /* -1: none */
    int failures;                /* in a row */
    int64_t retry_in_ms;         /* until the next attempt */
    st_tier_mode_t mode;
    int delete_pending; /* the bucket still owes a deletion (ST_TIER_DELETE) */
} st_tier_status_t;

void st_tier_part_status(st_tier_part_t *p, st_tier_status_t *out);

/* The back-off of a partition's failing segment, as a file beside its
 * cached manifest (written on each failure, removed on success and when
 * the partition opens: the state itself is in memory), for tools. */
#define ST_TIER_UPLOAD_STATUS_FILE "remote-upload-status.json"
/* One line about it (heap; the caller frees it), or NULL when no segment
 * of the partition whose directory this is is backed off. */
char *st_tier_upload_status_describe(const char *partition_dir, int64_t now_ms);
/* The leader epoch in force at offset per the remote epochs (-1). */
int32_t st_tier_part_epoch_for(st_tier_part_t *p, int64_t offset);
/* The producer state of the batches below offset, as the bucket keeps it:
 * the snapshot object of the segment that ends just before offset, named
 * by the manifest installed or else by the bucket's, read anew (Kafka's
 * producerSnapshotIndex, what a
 * replica restored from the bucket starts from, KIP-405).  Blocking.
 * ST_OK with *data (malloc'ed) and *len; ST_E_NOT_FOUND when no segment
 * ends there or it has no snapshot; else an error, err saying what. */
st_err_t st_tier_part_producer_snapshot(st_tier_part_t *p, int64_t offset, void **data,
                                        size_t *len, char *err, size_t errlen);

/* ---- reads ------------------------------------------------------------- */

typedef void (*st_tier_wake_cb)(void *arg);

typedef struct st_tier_read {
    st_file_t *file; /* a cached chunk: [pos, pos+len) of it; caller releases */
    int64_t pos;
    int32_t len;
    int64_t remote_start, remote_end;
} st_tier_read_t;

/* Flags of a read. */
#define ST_TIER_READ_MIN_ONE 1 /* the whole first batch even when larger (KIP-74) */
#define ST_TIER_READ_ONCE 2    /* not a sequential reader: no read-ahead */

/* Read from offset (remote_start <= offset < remote_end) up to max_bytes.
 * ST_OK with data, ST_E_AGAIN while a download runs (wake(arg) is called
 * once when it ends), ST_E_OFFSET_OUT_OF_RANGE outside the remote part,
 * ST_E_KAFKA_STORAGE_ERROR when the bucket failed (retriable). */
st_err_t st_tier_read(st_tier_part_t *p, int64_t offset, int32_t max_bytes, int flags,
                      st_tier_read_t *out, st_tier_wake_cb wake, void *wake_arg);

/* Where a search for the first remote record with a timestamp >= ts
 * starts: in the first segment holding such a record, past what its time
 * index (downloaded once and kept like the offset index) proves older.
 * The caller reads on from *from (st_tier_read) and looks at the records.
 * ST_E_NOT_FOUND when no remote record is that new; ST_E_AGAIN while the
 * time index downloads (wake(arg) is called once when it ends);
 * ST_E_KAFKA_STORAGE_ERROR when the bucket failed. */
st_err_t st_tier_time_search_start(st_tier_part_t *p, int64_t ts, int64_t *from,
                                   st_tier_wake_cb wake, void *wake_arg);

/* DeleteRecords below offset: remote segments wholly below go (manifest
 * first); the remote start becomes offset when it lies in the remote part. */
st_err_t st_tier_delete_records(st_tier_part_t *p, int64_t offset);

/* What a manifest says, for tools: segments, bytes and [start, end). */
typedef struct st_tier_manifest_summary {
    int segments;
    int64_t bytes;
    int64_t start, end;
    int64_t newest_timestamp;
} st_tier_manifest_summary_t;

st_err_t st_tier_manifest_summarize(const char *text, size_t len, st_tier_manifest_summary_t *out,
                                    char *why, size_t whylen);

/* What a manifest names, for a tool restoring the partition: the topic,
 * id and partition it says it is of (NULL / -1 when it does not say), the
 * highest leader epoch it was written at or a segment of it spans (-1:
 * none), and every object key of its segments under prefix (the
 * partition's) with the size and CRC32C the manifest gives (the .log's;
 * -1 for the others). */
typedef struct st_tier_manifest_objects {
    st_tier_manifest_summary_t summary;
    char *topic, *topic_id;
    int32_t partition;
    int32_t max_leader_epoch;
    char **keys;
    int64_t *sizes;
    int64_t *crcs;
    int nkeys;
} st_tier_manifest_objects_t;

st_err_t st_tier_manifest_objects(const char *prefix, const char *text, size_t len,
                                  st_tier_manifest_objects_t *out, char *why, size_t whylen);
void st_tier_manifest_objects_fini(st_tier_manifest_objects_t *o);
/* The same manifest as another topic's partition (its objects copied under
 * that partition's prefix keep their names): heap, or NULL with why. */
char *st_tier_manifest_retarget(const char *text, size_t len, const char *topic,
                                const char *topic_id, int32_t partition, char *why, size_t whylen);

/* The bucket prefix of a partition, without the trailing '/' (heap; the
 * caller frees it; for tools and tests): <topic>-<topicId>/<partition>, or
 * <topic>/<topicId>/<partition> for a topic name too long for the first
 * (over 227 characters), so that no piece of a key passes 250 bytes.  (A
 * long-named partition tiered before that layout existed stays where its
 * manifest is.) */
char *st_tier_part_prefix(const char *topic, const char *topic_id, int32_t partition);
/* The topic's prefix the partitions' are under (<topic>-<topicId>, or
 * <topic>/<topicId> for a long name), without the trailing '/' (heap). */
char *st_tier_topic_prefix(const char *topic, const char *topic_id);

/* ---- the topic's descriptor (what a restore from the bucket needs) ----- */

/* Its name under the topic's prefix. */
#define ST_TIER_TOPIC_DESCRIPTOR "topic.json"
/* The descriptor's text (JSON the broker builds: topic name and id,
 * partition count, replication factor, configs), given to partition 0's
 * part whenever the topic changes; its leader writes it to the bucket when
 * the text is new to it, at each new leadership and when tiering comes
 * back on (never while fenced), and deletes it with the topic or with the
 * remote log (tiering switched off). */
void st_tier_part_set_descriptor(st_tier_part_t *p, const char *json);

typedef struct st_tier_descriptor {
    char *topic, *topic_id;
    int32_t partitions;
    int16_t replication_factor;
    char **config_names, **config_values; /* the topic's overrides */
    int nconfigs;
} st_tier_descriptor_t;

/* The descriptor as JSON (heap), and back: bytes from the bucket are
 * hostile, every field is checked (ST_E_CORRUPT, why saying which). */
char *st_tier_descriptor_encode(const st_tier_descriptor_t *d);
st_err_t st_tier_descriptor_decode(const char *text, size_t len, st_tier_descriptor_t *out,
                                   char *why, size_t whylen);
void st_tier_descriptor_fini(st_tier_descriptor_t *d);

#endif /* ST_TIERING_H */

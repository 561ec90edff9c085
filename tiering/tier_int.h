/* tier_int.h - declarations shared inside the tiering library. */
#ifndef ST_TIER_INT_H
#define ST_TIER_INT_H

#include "st_tiering.h"

/* ---- the manifest ------------------------------------------------------- */

/* One remote segment.  Only segments whose objects were all stored appear
 * in a manifest (the manifest is written after them). */
typedef struct st_rseg {
    char id[23]; /* segment id, Kafka's uuid text */
    int64_t base_offset;
    int64_t last_offset;
    int64_t max_timestamp;
    int64_t size_bytes;
    uint32_t crc32c;
    st_tier_epoch_t *epochs;
    int nepochs;
    int has_txnindex; /* a <...>.txnindex object: the segment's aborted transactions */
    int has_snapshot; /* a <...>.snapshot object: the producer state at its end */
} st_rseg_t;

typedef struct st_manifest {
    int64_t log_start; /* may lie inside the first segment (DeleteRecords) */
    int32_t leader_epoch; /* of the leader that wrote it; -1: not recorded */
    st_rseg_t *segs;   /* ascending base offset, contiguous */
    int nsegs;
} st_manifest_t;

void st_tier__manifest_init(st_manifest_t *m);
void st_tier__manifest_fini(st_manifest_t *m);
void st_tier__manifest_copy(st_manifest_t *dst, const st_manifest_t *src);
int64_t st_tier__manifest_end(const st_manifest_t *m);   /* next offset */
int64_t st_tier__manifest_start(const st_manifest_t *m); /* == end: empty */
int64_t st_tier__manifest_bytes(const st_manifest_t *m);
/* JSON text (malloc'ed) and back; decode checks every field. */
char *st_tier__manifest_encode(const st_manifest_t *m, const char *topic, const char *topic_id,
                               int32_t partition);
st_err_t st_tier__manifest_decode(const char *text, size_t len, st_manifest_t *out, char *why,
                                  size_t whylen);
/* Every object key of a segment (heap strings into keys): the .log
 * first, then .index, .timeindex, .epochs and the .txnindex and .snapshot
 * it has.  Returns how many (at most 6). */
int st_tier__segment_keys(const char *prefix, const st_rseg_t *s, char *keys[6]);
/* Object key of a segment file (heap; the caller frees it): kind is
 * "log", "index", "timeindex", "epochs". */
char *st_tier__object_key(const char *prefix, const st_rseg_t *s, const char *kind);

/* Tests only: called with the manifest's key after a manifest write has
 * read the bucket's manifest and before its conditional put (where another
 * leader's write would land in a real race).  NULL in the broker. */
extern void (*st_tier__manifest_put_hook)(const char *key);

/* ---- record batch framing (enough to find an offset in a segment) ------- */

#define ST_TIER_BATCH_HEADER 61

typedef struct st_batch_hdr {
    int64_t base_offset;
    int64_t last_offset;
    int32_t size; /* whole batch */
} st_batch_hdr_t;

/* baseOffset int64, batchLength int32, partitionLeaderEpoch int32,
 * magic int8 (2), crc, attributes, lastOffsetDelta int32 at byte 23. */
static inline int st_tier__batch_header(const uint8_t *h, st_batch_hdr_t *b) {
    int32_t len = (int32_t)st_be32_get(h + 8);
    int32_t delta = (int32_t)st_be32_get(h + 23);
    if (h[16] != 2 || len < ST_TIER_BATCH_HEADER - 12 || delta < 0) return -1;
    b->base_offset = (int64_t)st_be64_get(h);
    b->last_offset = b->base_offset + delta;
    b->size = len + 12;
    return 0;
}

/* ---- byte-rate quotas (quota.c) ------------------------------------------ */

typedef struct st_tier_quota {
    int64_t rate; /* bytes a second; 0: unlimited */
    double tokens, burst;
    int64_t refill_us;
} st_tier_quota_t;

void st_tier__quota_init(st_tier_quota_t *q, int64_t rate);
/* May work start now (the balance is positive)? */
int st_tier__quota_ready(st_tier_quota_t *q);
/* Take bytes from the balance (into debt if need be); negative: refund. */
void st_tier__quota_charge(st_tier_quota_t *q, double bytes);
/* How long until work may start (0: now). */
int64_t st_tier__quota_wait_ms(st_tier_quota_t *q);

/* ---- the cache of downloaded bytes ---------------------------------------
 *
 * Entries are chunks of segment objects (files in the cache directory) and
 * whole offset indexes (memory).  An entry is LOADING while its GET runs;
 * everyone who asks meanwhile waits on it (one download per chunk); READY
 * entries are evicted least recently used first when the cache is over
 * its bound; a FAILED entry answers errors for a second, then is retried.
 */
typedef struct st_tier_cache st_tier_cache_t;

typedef struct st_cache_ref {
    st_file_t *file; /* chunk: kept reference */
    uint8_t *mem;    /* index: bytes owned by the cache entry... */
    int64_t len;
    void *entry;     /* ...kept alive by this reference */
} st_cache_ref_t;

/* A download is counted in the account of the topic whose object it
 * reads (the account of the reader that started it: every reader of one
 * object key reads for the same topic).
 *
 * fetch_bytes_per_s > 0 puts downloads behind a byte-rate quota: one
 * starts at once while the quota allows it, the rest queue in FIFO order
 * and st_tier__cache_pump (the task thread, every 20 ms) and each
 * download's end release them as it allows. */
st_tier_cache_t *st_tier__cache_new(st_tier_t *t, const char *dir, int64_t file_bytes,
                                    int64_t pool_bytes, int64_t mem_bytes,
                                    int64_t fetch_bytes_per_s);
void st_tier__cache_pump(st_tier_cache_t *c);
/* Downloads at most bytes_per_s from now on (0: not paced); queued ones
 * go as it allows (st_tier__cache_pump). */
void st_tier__cache_set_pace(st_tier_cache_t *c, int64_t bytes_per_s);
void st_tier__cache_destroy(st_tier_cache_t *c);
/* What a lookup is for (flags of st_tier__cache_get). */
enum {
    ST_CACHE_INDEX = 1,  /* an offset or time index: kept in memory, read to its end */
    ST_CACHE_READ = 2,   /* a reader's read (not read-ahead): a READY chunk counts it */
    ST_CACHE_SHARED = 4  /* its partition has a reader behind another: to the disk, not
                          * away, when memory needs the room */
};
/* The bytes [offset, offset + length) of key in os (the manager's store or
 * a read replica's source: it outlives the cache).
 * ST_OK and a reference; ST_E_AGAIN (download started or running; wake is
 * called when it ends; wake may be NULL for read-ahead);
 * ST_E_KAFKA_STORAGE_ERROR after a failed download. */
st_err_t st_tier__cache_get(st_tier_cache_t *c, st_os_t *os, st_os_account_t *account,
                            const char *key, uint64_t offset, uint64_t length, int flags,
                            st_cache_ref_t *ref, st_tier_wake_cb wake, void *arg);
void st_tier__cache_release(st_tier_cache_t *c, st_cache_ref_t *ref);
/* A reader's answer began at the start of the chunk at offset of key: a
 * reader came into it (the disk cache evicts chunks that the most readers
 * passed first). */
void st_tier__cache_entered(st_tier_cache_t *c, const char *key, uint64_t offset);
/* Every chunk in memory whose key starts with prefix goes to the disk
 * rather than away when memory is short: a second reader of the
 * partition is behind the first. */
void st_tier__cache_keep_prefix(st_tier_cache_t *c, const char *prefix);
/* Bytes of chunks on disk and in memory. */
void st_tier__cache_used(st_tier_cache_t *c, int64_t *disk, int64_t *memory);

/* ---- the manager -------------------------------------------------------- */

/* One topic's object store use: every request the manager makes for a
 * partition of the topic carries it (st_os_request_t.account).  Keyed by
 * name, as the metrics label it (a topic deleted and made again under its
 * name continues its series).  Made when the first partition of the topic
 * opens, freed only by st_tier_destroy, after every request finished: a
 * deleted topic's requests were made all the same, and one still in
 * flight counts in it. */
typedef struct st_tier_account {
    char *topic;
    st_os_account_t os;
} st_tier_account_t;

typedef struct st_tier_stats_atomic {
    uint64_t bytes_uploaded, segments_uploaded, upload_requests, upload_failures;
    uint64_t bytes_fetched, fetch_requests, fetch_failures;
    uint64_t cache_hits, cache_misses, cache_evictions, cache_spills;
    uint64_t segments_deleted, objects_deleted, orphans_deleted;
} st_tier_stats_atomic_t;

struct st_tier {
    st_tier_config_t cfg;
    char *cache_dir;
    st_os_t *os;
    st_pool_t *pool;
    st_tier_cache_t *cache;
    pthread_mutex_t lock; /* parts, stopping, kicks, the copy quota */
    pthread_cond_t cond;
    st_tier_part_t **parts;
    int nparts, capparts;
    int stopping;
    pthread_t task;
    int started;
    st_tier_stats_atomic_t stats;
    int pending_jobs; /* pool jobs not finished (guarded by lock) */
    st_tier_quota_t copy_quota; /* shared by every copier thread (lock) */
    /* the pace of downloads, yielding to live traffic (task thread; the
     * rate and the cuts are read by st_tier_get_stats: atomics) */
    int64_t pace_rate, pace_cuts;
    int pace_calm; /* windows in a row without pressure */
    uint64_t pace_fetched; /* bytes_fetched at the last window */
    st_tier_account_t **accounts; /* sorted by topic; lock */
    int naccounts, capaccounts;
    /* read replicas' sources at other locations (st_tier_part_open_replica),
     * opened with store_config, closed at destroy; lock */
    st_os_config_t store_config;
    int has_store_config;
    struct tier_source {
        char *location;
        st_os_t *os;
    } *sources;
    int nsources;
};

/* For tests: wait until the partition has no job running or due (a kick
 * not yet taken, a rerun asked for while its job ran).  Waits on the
 * manager's condition, which every kick and every job's end signal; 0, or
 * -1 after timeout_ms. */
int st_tier__part_wait_idle(st_tier_part_t *p, int64_t timeout_ms);

/* The store a read replica at location reads (opened at the first
 * use); NULL with err when location cannot be opened. */
st_os_t *st_tier__source_store(st_tier_t *t, const char *location, char *err, size_t errlen);

#define ST_TIER_STAT_ADD(t, field, n) __atomic_add_fetch(&(t)->stats.field, (uint64_t)(n), __ATOMIC_RELAXED)

#endif /* ST_TIER_INT_H */

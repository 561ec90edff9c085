/*
 * cache.c - downloaded bytes of remote segments: chunks in memory or on
 * disk, offset indexes in memory, one download per entry however many ask.
 *
 *            get (miss)                 GET ok
 *   (none) ------------> LOADING -----------------> READY --(LRU)--> gone
 *                          |  ^                       
 *                  GET failed |  get, a second later
 *                          v  |
 *                         FAILED
 *
 * Everyone who asks for a LOADING entry is added to its waiters and woken
 * when the GET ends, whatever the outcome.  READY entries are evicted when
 * their kind is over its bound: in memory least recently used first, on
 * disk the chunk the most readers came into first (disk_victim).  A chunk
 * being sent keeps its descriptor (st_file_t) open after eviction, and an
 * index in use is never freed under its reader (refs).
 *
 * A chunk is downloaded to the disk cache while it has room for it (a
 * re-read of recent history is then warm), else into memory (an
 * anonymous memfd each, so a chunk is sent with sendfile like a file's,
 * and its pages are never written back to a disk the log's fsyncs wait
 * on), within remote.log.cache.memory.bytes.  When memory needs the
 * room, a chunk goes to the disk cache (spilled: copied, writeback
 * started at once) if more than one reader wants it (its partition has a
 * reader behind another: ST_CACHE_SHARED lookups and
 * st_tier__cache_keep_prefix), if it was fetched ahead and not read yet
 * (no ST_CACHE_READ lookup found it READY), or if the disk has room
 * again; otherwise it is dropped.  So a long replay by one reader writes
 * at most the disk cache's bound once, then nothing: it never evicts what
 * the disk holds for re-reads.  With no memory bound (0) every chunk goes
 * to the disk as it arrives.
 *
 * Lock: c->lock guards everything here; callbacks run without it.
 */
#include "tier_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <unistd.h>

enum { LOADING, READY, FAILED };

#define FAIL_RETRY_MS 1000
#define NBUCKETS 4096

typedef struct waiter {
    st_tier_wake_cb cb;
    void *arg;
    struct waiter *next;
} waiter_t;

typedef struct centry {
    char *objkey; /* whole: a cut key names another object (or none) */
    st_os_account_t *account; /* its topic's: outlives the cache */
    st_os_t *os;              /* the store it is in: outlives the cache */
    uint64_t offset, length;
    int in_memory; /* an index: bytes in mem */
    int pooled;    /* a chunk in a memfd, counted in pool_used */
    int spill;     /* its partition has a reader behind another: to disk when evicted */
    int spilling;  /* being copied to disk (it stays READY meanwhile) */
    int reads;        /* lookups of a reader that found it READY (not read-ahead) */
    int entered;      /* answers that began at its start: about how many readers came through */
    int64_t pending;  /* counted in file_pending while its download runs */
    int state;
    int refs;      /* readers of mem */
    int in_lru;
    int64_t bytes; /* counted against the bound once READY */
    st_file_t *file;
    char *path; /* the chunk's file while LOADING or READY; NULL */
    uint8_t *mem;
    int64_t failed_ms;
    waiter_t *waiters;
    struct centry *hnext, *lprev, *lnext, *qnext, *snext;
    struct st_tier_cache *cache;
    uint64_t seq;
    double charged; /* taken from the fetch quota when the GET started */
} centry_t;

struct st_tier_cache {
    st_tier_t *tier;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    char *dir;
    int64_t file_cap, mem_cap, file_used, mem_used;
    int64_t pool_cap, pool_used; /* chunks in memory */
    int64_t file_pending;        /* chunks on their way to the disk */
    centry_t *buckets[NBUCKETS];
    centry_t *lru_head, *lru_tail; /* head: most recent */
    int inflight;
    uint64_t seq;
    /* the fetch quota, the pace (yielding to live traffic) and the
     * downloads waiting for them */
    st_tier_quota_t quota, pace;
    centry_t *queue_head, *queue_tail;
};

static uint32_t hash_key(const char *k, uint64_t off) {
    uint32_t h = 2166136261u;
    for (; *k; k++) h = (h ^ (uint8_t)*k) * 16777619u;
    return (h ^ (uint32_t)off ^ (uint32_t)(off >> 32)) * 16777619u;
}

static centry_t **slot(st_tier_cache_t *c, const char *key, uint64_t off) {
    return &c->buckets[hash_key(key, off) % NBUCKETS];
}

/* The entry of key at offset, or NULL.  Lock held. */
static centry_t *find_locked(st_tier_cache_t *c, const char *key, uint64_t off) {
    centry_t *e = *slot(c, key, off);
    while (e && (e->offset != off || strcmp(e->objkey, key))) e = e->hnext;
    return e;
}

static void lru_unlink(st_tier_cache_t *c, centry_t *e) {
    if (!e->in_lru) return;
    if (e->lprev) e->lprev->lnext = e->lnext;
    else c->lru_head = e->lnext;
    if (e->lnext) e->lnext->lprev = e->lprev;
    else c->lru_tail = e->lprev;
    e->lprev = e->lnext = NULL;
    e->in_lru = 0;
}

static void lru_push(st_tier_cache_t *c, centry_t *e) {
    e->lprev = NULL;
    e->lnext = c->lru_head;
    if (c->lru_head) c->lru_head->lprev = e;
    c->lru_head = e;
    if (!c->lru_tail) c->lru_tail = e;
    e->in_lru = 1;
}

static void hash_remove(st_tier_cache_t *c, centry_t *e) {
    centry_t **pp = slot(c, e->objkey, e->offset);
    while (*pp && *pp != e) pp = &(*pp)->hnext;
    if (*pp) *pp = e->hnext;
}

static void entry_free(centry_t *e) {
    if (e->file) st_file_release(e->file);
    if (e->path) unlink(e->path);
    free(e->path);
    free(e->objkey);
    free(e->mem);
    free(e);
}

/* Out of the cache (lock held), counted as evicted; the caller frees it
 * once it let go of the lock. */
static void drop_locked(st_tier_cache_t *c, centry_t *e) {
    lru_unlink(c, e);
    hash_remove(c, e);
    if (e->in_memory) c->mem_used -= e->bytes;
    else if (e->pooled) c->pool_used -= e->bytes;
    else c->file_used -= e->bytes;
    ST_TIER_STAT_ADD(c->tier, cache_evictions, 1);
}

/* The chunk on disk to evict first (lock held), NULL if none may go: the
 * one the most readers came through, the least recently used of those.
 * Readers of a partition go forward, so a chunk every reader passed is
 * wanted by none of them, and one only the fastest passed is wanted soon
 * by the others: plain LRU order would evict it first, since the readers
 * behind touched the chunks they just passed later.  A chunk fetched
 * ahead (no reader yet) goes last; with one reader this is LRU. */
static centry_t *disk_victim(st_tier_cache_t *c) {
    centry_t *best = NULL;
    for (centry_t *e = c->lru_tail; e; e = e->lprev) {
        if (e->in_memory || e->pooled || e->refs > 0 || e->spilling) continue;
        if (!best || e->entered > best->entered) best = e;
    }
    return best;
}

/* Evict READY entries until each kind is under its bound: in memory
 * oldest first, then on disk in disk_victim's order.  Lock held.  Returns
 * them, chained by hnext, for the caller to free (free_evicted) once it
 * let go of the lock: unlinking a chunk's file may wait on the file
 * system's journal, and readers on network threads take the lock.  A
 * chunk in memory that more than one reader wanted goes to the disk
 * instead: with spills, it is chained on *spills (snext) for the caller
 * to copy (spill_all); without (a network thread, which must not write
 * files), it stays until a download's end evicts again. */
static centry_t *evict(st_tier_cache_t *c, centry_t **spills) {
    centry_t *gone = NULL;
    centry_t *e;
    /* Two passes: chunks fetched ahead and not read yet last */
    for (int pass = 0; pass < 2; pass++) {
        e = c->lru_tail;
        while (e && (c->mem_used > c->mem_cap || c->pool_used > c->pool_cap)) {
            centry_t *prev = e->lprev;
            int over = e->in_memory ? c->mem_used > c->mem_cap
                       : e->pooled && c->pool_used > c->pool_cap;
            if (!over || e->refs > 0 || e->spilling || (pass == 0 && e->pooled && !e->reads)) {
                e = prev;
                continue;
            }
            /* To the disk: a chunk more than one reader wants; one fetched
             * ahead and not read yet (memory too small for every reader's
             * read-ahead must not cost a second download); any while the
             * disk cache has room, which it then keeps for re-reads (it
             * never evicts for a chunk only one reader wanted). */
            int to_disk = e->pooled && c->file_cap > 0 &&
                          (e->spill || e->reads == 0 || c->file_used + e->bytes <= c->file_cap);
            if (to_disk) {
                if (spills) {
                    /* counted on the disk from now: its copy is on the way */
                    e->spilling = 1;
                    c->pool_used -= e->bytes;
                    c->file_used += e->bytes;
                    e->snext = *spills;
                    *spills = e;
                    st_file_keep(e->file);
                }
            } else {
                drop_locked(c, e);
                e->hnext = gone;
                gone = e;
            }
            e = prev;
        }
    }
    while (c->file_used > c->file_cap && (e = disk_victim(c))) {
        drop_locked(c, e);
        e->hnext = gone;
        gone = e;
    }
    return gone;
}

/* Copy each chunk of spills from memory to a file of the cache, which
 * then serves it (readers holding the memfd keep it until they let go).
 * No lock held: the entries are READY and spilling, which nothing else
 * changes.  The file's writeback starts at once (sync_file_range), so
 * spilled chunks never pile up as dirty pages the log's fsyncs wait
 * behind. */
static void spill_all(st_tier_cache_t *c, centry_t *e) {
    while (e) {
        centry_t *next = e->snext;
        char *path = st_strprintf("%s/%llu.chunk", c->dir, (unsigned long long)e->seq);
        int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), fd = -1;
        off_t off = 0;
        while (out >= 0 && off < e->bytes) {
            ssize_t n = sendfile(out, e->file->fd, &off, (size_t)(e->bytes - off));
            if (n <= 0 && !(n < 0 && errno == EINTR)) break;
        }
        if (out >= 0) {
            if (off == e->bytes) {
                sync_file_range(out, 0, 0, SYNC_FILE_RANGE_WRITE);
                fd = open(path, O_RDONLY | O_CLOEXEC);
            }
            close(out);
        }
        if (fd < 0) {
            ST_LOG_RATELIMITED(ST_LOG_WARN, "tiering", 5000,
                               "cannot keep a chunk of %s on disk (%s): %s; it is dropped",
                               e->objkey, path, strerror(errno ? errno : EIO));
            unlink(path);
            free(path);
            path = NULL;
        }
        pthread_mutex_lock(&c->lock);
        st_file_t *mem = e->file;
        e->spilling = 0;
        centry_t *gone = NULL;
        if (fd >= 0) {
            e->file = st_file_new(fd);
            e->path = path;
            e->pooled = 0;
            ST_TIER_STAT_ADD(c->tier, cache_spills, 1);
        } else { /* dropped, as if evicted (its bytes count on the disk since evict) */
            e->file = NULL;
            e->pooled = 0;
            drop_locked(c, e);
            gone = e;
        }
        pthread_mutex_unlock(&c->lock);
        st_file_release(mem); /* the reference evict took */
        st_file_release(mem); /* the entry's own: readers may still hold theirs */
        if (gone) entry_free(gone);
        e = next;
    }
}

static void free_evicted(centry_t *e) {
    while (e) {
        centry_t *next = e->hnext;
        entry_free(e);
        e = next;
    }
}

static void download_done(st_os_result_t *res, void *arg);

/* Lock held. */
static void submit(st_tier_cache_t *c, centry_t *e) {
    st_os_request_t rq;
    memset(&rq, 0, sizeof rq);
    rq.op = ST_OS_GET;
    rq.key = e->objkey;
    rq.account = e->account;
    rq.offset = e->offset;
    rq.length = e->length;
    /* Straight to the disk while it has room (one copy less than a spill
     * later: a re-read of recent history finds it there), else memory */
    int mfd = -1;
    int room = c->file_cap > 0 && c->file_used + c->file_pending + (int64_t)e->length <= c->file_cap;
    if (!e->in_memory && c->pool_cap > 0 && !room)
        mfd = memfd_create("strata-chunk", MFD_CLOEXEC);
    if (e->in_memory) {
        rq.sink.kind = ST_OS_SINK_ALLOC;
    } else if (mfd >= 0) { /* the store writes through a dup */
        e->pooled = 1;
        e->file = st_file_new(mfd);
        rq.sink.kind = ST_OS_SINK_FD;
        rq.sink.fd = mfd;
    } else {
        e->pending = (int64_t)e->length;
        c->file_pending += e->pending;
        free(e->path);
        e->path = st_strprintf("%s/%llu.part", c->dir, (unsigned long long)e->seq);
        unlink(e->path);
        rq.sink.kind = ST_OS_SINK_FILE;
        rq.sink.path = e->path;
        rq.sink.offset = 0;
    }
    c->inflight++;
    ST_TIER_STAT_ADD(c->tier, fetch_requests, 1);
    st_os_submit(e->os, &rq, download_done, e);
}

/* Start queued downloads while the fetch quota allows, oldest first.  A
 * chunk is charged its length; an object read to its end (an index) is
 * charged nothing now and what it was when it is known (download_done):
 * its length is UINT64_MAX here, which once sank the balance for good.
 * Lock held. */
static void release(st_tier_cache_t *c) {
    while (c->queue_head && st_tier__quota_ready(&c->quota) && st_tier__quota_ready(&c->pace)) {
        centry_t *e = c->queue_head;
        c->queue_head = e->qnext;
        if (!c->queue_head) c->queue_tail = NULL;
        e->charged = e->length == ST_OS_TO_END ? 0 : (double)e->length;
        st_tier__quota_charge(&c->quota, e->charged);
        st_tier__quota_charge(&c->pace, e->charged);
        submit(c, e);
    }
}

static void start(st_tier_cache_t *c, centry_t *e) {
    e->state = LOADING;
    e->seq = ++c->seq;
    e->charged = 0;
    if (c->quota.rate <= 0 && c->pace.rate <= 0 && !c->queue_head) {
        submit(c, e);
        return;
    }
    e->qnext = NULL;
    if (c->queue_tail) c->queue_tail->qnext = e;
    else c->queue_head = e;
    c->queue_tail = e;
    release(c);
}

void st_tier__cache_pump(st_tier_cache_t *c) {
    pthread_mutex_lock(&c->lock);
    release(c);
    pthread_mutex_unlock(&c->lock);
}

void st_tier__cache_set_pace(st_tier_cache_t *c, int64_t bytes_per_s) {
    pthread_mutex_lock(&c->lock);
    if (bytes_per_s != c->pace.rate) {
        double tokens = c->pace.tokens;
        int was = c->pace.rate > 0;
        st_tier__quota_init(&c->pace, bytes_per_s);
        if (was && c->pace.rate > 0 && tokens < c->pace.tokens) c->pace.tokens = tokens; /* debts stay */
    }
    release(c);
    pthread_mutex_unlock(&c->lock);
}

static void download_done(st_os_result_t *res, void *arg) {
    centry_t *e = arg;
    st_tier_cache_t *c = e->cache;
    int ok = res->status == ST_OK;
    /* The chunk's file is renamed and opened before the lock is taken:
     * a file system call may wait on the journal for milliseconds, and
     * readers on network threads take this lock.  The entry is LOADING
     * and only its download touches path until it is READY. */
    int fd = -1;
    if (ok && !e->in_memory && !e->pooled) {
        char *final = st_strprintf("%s/%llu.chunk", c->dir, (unsigned long long)e->seq);
        if (rename(e->path, final) == 0) {
            free(e->path);
            e->path = final;
            fd = open(e->path, O_RDONLY | O_CLOEXEC);
            /* its writeback starts now: chunk files never pile up as dirty
             * pages that the log's fsyncs would wait behind */
            if (fd >= 0) sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
        } else {
            free(final);
        }
    }
    pthread_mutex_lock(&c->lock);
    c->file_pending -= e->pending;
    e->pending = 0;
    /* what came, not what was asked for, counts */
    st_tier__quota_charge(&c->quota, (double)res->length - e->charged);
    st_tier__quota_charge(&c->pace, (double)res->length - e->charged);
    e->charged = 0;
    if (ok && e->pooled) {
        e->bytes = (int64_t)res->length;
        c->pool_used += e->bytes;
    } else if (ok && !e->in_memory) {
        if (fd < 0) {
            ok = 0;
        } else {
            e->file = st_file_new(fd);
            e->bytes = (int64_t)res->length;
            c->file_used += e->bytes;
        }
    } else if (ok) {
        e->mem = res->data;
        res->data = NULL; /* taken */
        e->bytes = (int64_t)res->length;
        c->mem_used += e->bytes;
    }
    centry_t *gone = NULL, *spills = NULL;
    if (ok) {
        e->state = READY;
        lru_push(c, e);
        ST_TIER_STAT_ADD(c->tier, bytes_fetched, res->length);
        gone = evict(c, &spills);
    } else {
        if (e->path) unlink(e->path);
        free(e->path);
        e->path = NULL;
        if (e->file) st_file_release(e->file); /* a memfd (next time, maybe a file) */
        e->file = NULL;
        e->pooled = 0;
        e->state = FAILED;
        e->failed_ms = st_mono_ms();
        ST_TIER_STAT_ADD(c->tier, fetch_failures, 1);
        ST_LOG_RATELIMITED(ST_LOG_WARN, "tiering", 5000, "download of %s [%llu, +%llu) failed: %s",
                           e->objkey, (unsigned long long)e->offset,
                           (unsigned long long)e->length, res->message);
    }
    waiter_t *w = e->waiters;
    e->waiters = NULL;
    release(c);
    pthread_mutex_unlock(&c->lock);
    free_evicted(gone);
    while (w) {
        waiter_t *next = w->next;
        w->cb(w->arg);
        free(w);
        w = next;
    }
    spill_all(c, spills); /* after the wake-ups: readers first */
    /* Only now is the download over for st_tier__cache_destroy, which
     * must not free entries a spill still copies. */
    pthread_mutex_lock(&c->lock);
    c->inflight--;
    if (c->inflight == 0) pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->lock);
}

st_err_t st_tier__cache_get(st_tier_cache_t *c, st_os_t *os, st_os_account_t *account,
                            const char *key, uint64_t offset, uint64_t length, int flags,
                            st_cache_ref_t *ref, st_tier_wake_cb wake, void *arg) {
    st_err_t rc = ST_E_AGAIN;
    int in_memory = (flags & ST_CACHE_INDEX) != 0;
    pthread_mutex_lock(&c->lock);
    centry_t *e = find_locked(c, key, offset);
    if (e && (flags & ST_CACHE_SHARED)) e->spill = 1;
    if (e && e->state == READY) {
        if (flags & ST_CACHE_READ) e->reads++;
        lru_unlink(c, e);
        lru_push(c, e);
        memset(ref, 0, sizeof *ref);
        ref->len = e->bytes;
        ref->entry = e;
        if (e->in_memory) {
            ref->mem = e->mem;
            e->refs++;
        } else {
            ref->file = st_file_keep(e->file);
        }
        ST_TIER_STAT_ADD(c->tier, cache_hits, 1);
        pthread_mutex_unlock(&c->lock);
        return ST_OK;
    }
    if (e && e->state == FAILED && st_mono_ms() - e->failed_ms < FAIL_RETRY_MS) {
        pthread_mutex_unlock(&c->lock);
        return ST_E_KAFKA_STORAGE_ERROR;
    }
    if (!e) {
        e = st_calloc(1, sizeof *e);
        e->objkey = st_strdup(key);
        e->account = account;
        e->os = os;
        e->offset = offset;
        e->length = length;
        e->in_memory = in_memory;
        e->spill = (flags & ST_CACHE_SHARED) != 0;
        e->cache = c;
        centry_t **s = slot(c, key, offset);
        e->hnext = *s;
        *s = e;
        ST_TIER_STAT_ADD(c->tier, cache_misses, 1);
        start(c, e);
    } else if (e->state == FAILED) {
        start(c, e);
    }
    if (wake) {
        waiter_t *w = st_malloc(sizeof *w);
        w->cb = wake;
        w->arg = arg;
        w->next = e->waiters;
        e->waiters = w;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void st_tier__cache_release(st_tier_cache_t *c, st_cache_ref_t *ref) {
    if (ref->file) st_file_release(ref->file);
    if (ref->mem) {
        pthread_mutex_lock(&c->lock);
        ((centry_t *)ref->entry)->refs--;
        centry_t *gone = evict(c, NULL);
        pthread_mutex_unlock(&c->lock);
        free_evicted(gone);
    }
    memset(ref, 0, sizeof *ref);
}

void st_tier__cache_entered(st_tier_cache_t *c, const char *key, uint64_t offset) {
    pthread_mutex_lock(&c->lock);
    centry_t *e = find_locked(c, key, offset);
    if (e) e->entered++;
    pthread_mutex_unlock(&c->lock);
}

void st_tier__cache_keep_prefix(st_tier_cache_t *c, const char *prefix) {
    size_t n = strlen(prefix);
    pthread_mutex_lock(&c->lock);
    for (centry_t *e = c->lru_head; e; e = e->lnext)
        if (e->pooled && !strncmp(e->objkey, prefix, n)) e->spill = 1;
    pthread_mutex_unlock(&c->lock);
}

void st_tier__cache_used(st_tier_cache_t *c, int64_t *disk, int64_t *memory) {
    pthread_mutex_lock(&c->lock);
    *disk = c->file_used;
    *memory = c->pool_used;
    pthread_mutex_unlock(&c->lock);
}

st_tier_cache_t *st_tier__cache_new(st_tier_t *t, const char *dir, int64_t file_bytes,
                                    int64_t pool_bytes, int64_t mem_bytes,
                                    int64_t fetch_bytes_per_s) {
    st_tier_cache_t *c = st_calloc(1, sizeof *c);
    c->tier = t;
    c->pool_cap = pool_bytes;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->idle, NULL);
    c->dir = st_strdup(dir);
    c->file_cap = file_bytes;
    c->mem_cap = mem_bytes;
    st_tier__quota_init(&c->quota, fetch_bytes_per_s);
    st_tier__quota_init(&c->pace, 0);
    /* A cache starts empty: whatever an earlier run left is removed. */
    st_mkdirs(dir);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            size_t n = strlen(de->d_name);
            if ((n > 6 && !strcmp(de->d_name + n - 6, ".chunk")) ||
                (n > 5 && !strcmp(de->d_name + n - 5, ".part"))) {
                char *p = st_strprintf("%s/%s", dir, de->d_name);
                unlink(p);
                free(p);
            }
        }
        closedir(d);
    }
    return c;
}

void st_tier__cache_destroy(st_tier_cache_t *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    /* queued downloads never started: their waiters still hear of it */
    while (c->queue_head) {
        centry_t *e = c->queue_head;
        c->queue_head = e->qnext;
        e->state = FAILED;
        for (waiter_t *w = e->waiters, *n; w; w = n) {
            n = w->next;
            w->cb(w->arg);
            free(w);
        }
        e->waiters = NULL;
    }
    while (c->inflight > 0) pthread_cond_wait(&c->idle, &c->lock);
    pthread_mutex_unlock(&c->lock);
    for (int b = 0; b < NBUCKETS; b++) {
        centry_t *e = c->buckets[b];
        while (e) {
            centry_t *next = e->hnext;
            entry_free(e);
            e = next;
        }
    }
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->idle);
    free(c->dir);
    free(c);
}

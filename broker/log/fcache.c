/*
 * fcache.c - the bounded cache of open segment files (log.max.open.files,
 * RocksDB's max_open_files): an idle partition holds no descriptor.
 *
 * Every segment file (.log, .index, .timeindex) has a slot; a slot holds an
 * open st_file_t or nothing.  st_log__fcache_keep hands out a kept file,
 * opening it when the slot is empty.  The cache holds one reference of each
 * open file and keeps the open slots on a list, most recently used first.
 *
 *   head <-> MRU slot <-> ... <-> LRU slot <-> head      (nopen slots)
 *
 * When more than max files are open, the least recently used idle ones are
 * closed.  Idle means that only the cache holds the file (refs == 1): a file
 * a reader (a response being sent with sendfile), a writer or the flusher
 * keeps is never closed under it; the cache passes over it and may hold more
 * than max files while that many are in use.  When open() fails with EMFILE
 * or ENFILE, an idle file is closed and the open retried; when none is idle
 * the caller gets ST_E_NOFILE and nothing changes.
 *
 * Why refs == 1 is a safe test: a reference is taken only here, under the
 * cache's lock, or from a reference its holder already has (refs >= 2).
 *
 * Locks: the cache's mutex guards every slot's file pointer and list links,
 * and the counters.  It is the innermost lock: taken under a log's lock,
 * never held while taking another.  A slot is filled and forgotten only by
 * the holder of its log's lock (so one slot is never opened twice at once);
 * any thread may empty it (eviction) under the cache's lock.  open() and
 * close() run outside the cache's lock.
 *
 * A file closed with unflushed pages loses nothing: fsync applies to the
 * file, so the flusher reopens it and syncs what any descriptor wrote (and
 * Linux reports a writeback error no descriptor has seen to the next fsync).
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

struct st_fcache {
    pthread_mutex_t lock;
    int max;
    int nopen;
    st_fslot_t head; /* list sentinel */
    int64_t opens, hits, evictions, nofile;
    const st_log_sync_ops_t *sync; /* NULL: fsync(2) / fdatasync(2) */
};

st_fcache_t *st_log__fcache_new(int max_open) {
    st_fcache_t *c = st_calloc(1, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    c->max = max_open > 0 ? max_open : 1;
    c->head.next = c->head.prev = &c->head;
    return c;
}

void st_log__fcache_destroy(st_fcache_t *c) {
    if (!c) return;
    /* every segment forgot its slots; anything left is released */
    while (c->head.next != &c->head) {
        st_fslot_t *s = c->head.next;
        st_file_t *f = s->file;
        s->prev->next = s->next;
        s->next->prev = s->prev;
        s->prev = s->next = NULL;
        s->file = NULL;
        st_file_release(f);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void lru_unlink(st_fslot_t *s) {
    s->prev->next = s->next;
    s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void lru_push(st_fcache_t *c, st_fslot_t *s) {
    s->prev = &c->head;
    s->next = c->head.next;
    c->head.next->prev = s;
    c->head.next = s;
}

/* Take the least recently used idle file out of its slot (the caller
 * releases it outside the lock); NULL when every open file is in use. */
static st_file_t *evict_one_locked(st_fcache_t *c) {
    for (st_fslot_t *s = c->head.prev; s != &c->head; s = s->prev) {
        if (__atomic_load_n(&s->file->refs, __ATOMIC_ACQUIRE) != 1) continue;
        st_file_t *f = s->file;
        s->file = NULL;
        lru_unlink(s);
        c->nopen--;
        c->evictions++;
        return f;
    }
    return NULL;
}

st_err_t st_log__fcache_keep(st_fcache_t *c, st_fslot_t *s, const char *dir, int64_t base,
                             const char *ext, int create, st_file_t **out) {
    pthread_mutex_lock(&c->lock);
    if (s->file) {
        st_file_t *f = st_file_keep(s->file);
        if (c->head.next != s) {
            lru_unlink(s);
            lru_push(c, s);
        }
        c->hits++;
        pthread_mutex_unlock(&c->lock);
        *out = f;
        return ST_OK;
    }
    pthread_mutex_unlock(&c->lock);

    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%020lld%s", dir, (long long)base, ext);
    if (n < 0 || (size_t)n >= sizeof path) return st_err_from_errno(ENAMETOOLONG);
    int fd, en = 0;
    for (;;) {
        fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
        if (fd >= 0) break;
        en = errno;
        if (en != EMFILE && en != ENFILE) break;
        pthread_mutex_lock(&c->lock);
        st_file_t *victim = evict_one_locked(c);
        if (!victim) c->nofile++;
        pthread_mutex_unlock(&c->lock);
        if (!victim) break;
        st_file_release(victim);
    }
    if (fd < 0) return st_err_from_errno(en);

    st_file_t *f = st_file_new(fd), *victims[8];
    int nv = 0;
    pthread_mutex_lock(&c->lock);
    s->file = f; /* the cache's reference */
    lru_push(c, s);
    c->nopen++;
    c->opens++;
    st_file_keep(f); /* the caller's */
    while (c->nopen > c->max && nv < (int)ST_ARRAY_SIZE(victims)) {
        st_file_t *v = evict_one_locked(c);
        if (!v) break;
        victims[nv++] = v;
    }
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < nv; i++) st_file_release(victims[i]);
    *out = f;
    return ST_OK;
}

void st_log__fcache_forget(st_fcache_t *c, st_fslot_t *s) {
    pthread_mutex_lock(&c->lock);
    st_file_t *f = s->file;
    if (f) {
        s->file = NULL;
        lru_unlink(s);
        c->nopen--;
    }
    pthread_mutex_unlock(&c->lock);
    st_file_release(f); /* a reader still holding it keeps it open */
}

void st_log__fcache_stats(st_fcache_t *c, st_log_file_stats_t *out) {
    pthread_mutex_lock(&c->lock);
    out->open_files = c->nopen;
    out->max_open_files = c->max;
    out->opens = c->opens;
    out->hits = c->hits;
    out->evictions = c->evictions;
    out->nofile = c->nofile;
    pthread_mutex_unlock(&c->lock);
}

/* ---- syncing ------------------------------------------------------------ */

void st_log__fcache_set_sync(st_fcache_t *c, const st_log_sync_ops_t *ops) { c->sync = ops; }

st_err_t st_log__sync(st_fcache_t *c, int fd, int data_only) {
    int rc = c && c->sync && c->sync->sync ? c->sync->sync(c->sync->arg, fd, data_only)
             : data_only                 ? fdatasync(fd)
                                         : fsync(fd);
    return rc == 0 ? ST_OK : st_err_from_errno(errno);
}

st_err_t st_log__sync_dir(st_fcache_t *c, const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return st_err_from_errno(errno);
    st_err_t e = st_log__sync(c, fd, 0);
    close(fd);
    return e;
}

st_err_t st_log__write_file_atomic(st_fcache_t *c, const char *path, const void *data,
                                   size_t len) {
    char tmp[4200], dir[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return st_err_from_errno(errno);
    st_err_t e = st_pwrite_all(fd, data, len, 0);
    if (!e) e = st_log__sync(c, fd, 0);
    close(fd);
    if (!e && rename(tmp, path) != 0) e = st_err_from_errno(errno);
    if (e) {
        unlink(tmp);
        return e;
    }
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return st_log__sync_dir(c, ".");
    if (slash == dir) return st_log__sync_dir(c, "/");
    *slash = 0;
    return st_log__sync_dir(c, dir);
}

/*
 * logmgr.c - the log directories (log.dirs) and what spans every log in
 * them: the lock file, meta.properties, the clean-shutdown marker, the
 * offset checkpoints, the group-commit flusher and the janitor (retention,
 * checkpoints, background flush, producer id expiry).
 *
 * Files in each log dir:
 *   .lock                             flock()ed while a broker runs here
 *   meta.properties                   version, cluster.id, node.id
 *   .strata-clean-shutdown            present only after a clean stop:
 *                                     "broker.epoch=<n>", the broker epoch
 *                                     the broker stopped at (KIP-966)
 *   recovery-point-offset-checkpoint  Kafka's format: version, count,
 *   log-start-offset-checkpoint       then "topic partition offset" lines
 *   replication-offset-checkpoint     (the high watermarks)
 *
 * Threads: the flusher and the janitor; m->lock guards the log list, the
 * flush queue and the flush.ms deadline, and is never held across an
 * fsync (appends take it to queue a flush).  Lock order: ckpt_lock, then
 * the manager, then a log's epoch_file_lock, then the log, then the file
 * cache (fcache.c, innermost).
 *
 * Start-up cost per partition is kept constant: the checkpoints are read
 * once into hash tables, the list of logs is indexed by position, and
 * opening an idle partition's log opens no file (see log.c).
 */
#include "log_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#define CLEAN_MARKER ".strata-clean-shutdown"

typedef struct ckpt_entry {
    char *topic;
    int32_t partition;
    int64_t offset;
} ckpt_entry_t;

/* A checkpoint file's entries, hashed by (topic, partition). */
typedef struct ckpt_table {
    ckpt_entry_t *v;
    int n;
    int *slots; /* index into v + 1; 0: empty */
    size_t cap; /* a power of two, > 2n */
} ckpt_table_t;

/* The offset checkpoints of each dir, by what they hold of a log. */
enum { CKPT_RECOVERY, CKPT_START, CKPT_HW, NCKPT };
static const char *const ckpt_names[NCKPT] = {
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
};

typedef struct logdir {
    char *path;
    int lock_fd;
    int nlogs;
    ckpt_table_t ckpt[NCKPT];
} logdir_t;

struct st_logmgr {
    st_logmgr_config_t cfg;
    logdir_t *dirs;
    int ndirs;
    char cluster_id[64];
    int clean;
    int64_t prev_broker_epoch; /* from the markers; -1: unknown */
    int64_t broker_epoch;      /* written into the markers at close */

    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_mutex_t ckpt_lock; /* one checkpoint writer at a time; taken before m->lock */
    st_log_t **logs;
    int nlogs, caplogs;
    st_log_t *flush_head, *flush_tail;
    int64_t flush_queued_us; /* when the queue stopped being empty */
    int64_t round_queued_us; /* the round running: its first request (0: none runs) */
    int64_t wait_peak_us;    /* the longest request-to-synced since the last take */
    int rounds;              /* rounds ended since then */
    st_histo_t flush_time, flush_wait;
    int64_t flush_due; /* monotonic: the earliest flush.ms deadline known */
    int stopping;
    st_fcache_t *fc;
    pthread_t flusher, janitor;
    int started;
};

/* ---- checkpoints -------------------------------------------------------- */

static uint32_t ckpt_hash(const char *topic, int32_t partition) {
    uint32_t h = 2166136261u;
    for (const char *p = topic; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
    return (h ^ (uint32_t)partition) * 16777619u;
}

static void ckpt_read(const char *dir, const char *name, ckpt_table_t *t) {
    char path[4096], *text;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    memset(t, 0, sizeof *t);
    if (st_read_file(path, &text, NULL)) return;
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    int version = line ? atoi(line) : -1;
    line = strtok_r(NULL, "\n", &save);
    int n = line ? atoi(line) : -1;
    if (version != 0 || n < 0 || n > 10000000) {
        ST_WARN("log", "%s: ignoring malformed checkpoint", path);
        free(text);
        return;
    }
    ckpt_entry_t *v = st_calloc((size_t)n + 1, sizeof *v);
    int k = 0;
    while (k < n && (line = strtok_r(NULL, "\n", &save))) {
        char topic[256];
        int part;
        long long off;
        if (sscanf(line, "%255s %d %lld", topic, &part, &off) != 3) break;
        v[k].topic = st_strdup(topic);
        v[k].partition = part;
        v[k].offset = off;
        k++;
    }
    free(text);
    t->v = v;
    t->n = k;
    t->cap = 16;
    while (t->cap <= (size_t)k * 2) t->cap *= 2;
    t->slots = st_calloc(t->cap, sizeof *t->slots);
    for (int i = 0; i < k; i++) {
        size_t at = ckpt_hash(v[i].topic, v[i].partition) & (t->cap - 1);
        while (t->slots[at]) at = (at + 1) & (t->cap - 1);
        t->slots[at] = i + 1;
    }
}

static int64_t ckpt_lookup(const ckpt_table_t *t, const char *topic, int32_t partition) {
    if (!t->n) return -1;
    for (size_t at = ckpt_hash(topic, partition) & (t->cap - 1); t->slots[at];
         at = (at + 1) & (t->cap - 1)) {
        const ckpt_entry_t *e = &t->v[t->slots[at] - 1];
        if (e->partition == partition && !strcmp(e->topic, topic)) return e->offset;
    }
    return -1;
}

/* A deleted partition's entry: a partition made again in the same run
 * (a replica moved away and back) must not start where it once stood. */
static void ckpt_forget(ckpt_table_t *t, const char *topic, int32_t partition) {
    if (!t->n) return;
    for (size_t at = ckpt_hash(topic, partition) & (t->cap - 1); t->slots[at];
         at = (at + 1) & (t->cap - 1)) {
        ckpt_entry_t *e = &t->v[t->slots[at] - 1];
        if (e->partition == partition && !strcmp(e->topic, topic)) e->offset = -1;
    }
}

static void ckpt_free(ckpt_table_t *t) {
    for (int i = 0; i < t->n; i++) free(t->v[i].topic);
    free(t->v);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* Write the three checkpoints of every dir.  Called without any log lock.  The
 * offsets are read under m->lock, the files written without it (an append
 * takes m->lock to ask for a flush, so it must never wait for these
 * fsyncs); ckpt_lock keeps two writers (the janitor, DeleteRecords, the
 * close) in order, so an older snapshot never replaces a newer one. */
static void write_checkpoints(st_logmgr_t *m) {
    pthread_mutex_lock(&m->ckpt_lock);
    st_buf_t *bufs = st_calloc((size_t)m->ndirs * NCKPT, sizeof *bufs);
    pthread_mutex_lock(&m->lock);
    for (int d = 0; d < m->ndirs; d++) {
        st_buf_t *b = &bufs[d * NCKPT];
        int n = 0;
        for (int i = 0; i < m->nlogs; i++)
            if (!strcmp(m->logs[i]->parent, m->dirs[d].path)) n++;
        for (int k = 0; k < NCKPT; k++) {
            st_buf_init(&b[k]);
            st_buf_printf(&b[k], "0\n%d\n", n);
        }
        for (int i = 0; i < m->nlogs; i++) {
            st_log_t *log = m->logs[i];
            if (strcmp(log->parent, m->dirs[d].path)) continue;
            st_log_offsets_t o;
            st_log_offsets(log, &o);
            const int64_t v[NCKPT] = {o.flushed_offset, o.log_start_offset, o.high_watermark};
            for (int k = 0; k < NCKPT; k++)
                st_buf_printf(&b[k], "%s %d %lld\n", log->topic, (int)log->partition,
                              (long long)v[k]);
        }
    }
    pthread_mutex_unlock(&m->lock);
    for (int d = 0; d < m->ndirs; d++) {
        st_buf_t *b = &bufs[d * NCKPT];
        st_err_t e = ST_OK;
        for (int k = 0; k < NCKPT; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", m->dirs[d].path, ckpt_names[k]);
            if (!e) e = st_log__write_file_atomic(m->fc, path, b[k].data, b[k].len);
            st_buf_fini(&b[k]);
        }
        if (e)
            ST_LOG_RATELIMITED(ST_LOG_ERROR, "log", 10000, "%s: cannot write checkpoints: %s",
                               m->dirs[d].path, st_err_msg(e));
    }
    free(bufs);
    pthread_mutex_unlock(&m->ckpt_lock);
}

/* ---- meta.properties ---------------------------------------------------- */

static st_err_t read_meta(const char *dir, char *cluster_id, size_t n, int32_t *node_id) {
    char path[4096], *text;
    snprintf(path, sizeof path, "%s/meta.properties", dir);
    if (st_read_file(path, &text, NULL)) return ST_E_NOT_FOUND;
    *node_id = -1;
    cluster_id[0] = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "cluster.id=", 11)) snprintf(cluster_id, n, "%s", line + 11);
        else if (!strncmp(line, "node.id=", 8)) *node_id = atoi(line + 8);
    }
    free(text);
    return ST_OK;
}

static st_err_t write_meta(const char *dir, const char *cluster_id, int32_t node_id) {
    char path[4096], body[256];
    snprintf(path, sizeof path, "%s/meta.properties", dir);
    int len = snprintf(body, sizeof body,
                       "#\n#Written by stratad on first start\nversion=1\ncluster.id=%s\nnode.id=%d\n",
                       cluster_id, (int)node_id);
    return st_write_file_atomic(path, body, (size_t)len);
}

/* ---- open / close ------------------------------------------------------- */

st_err_t st_logmgr_open(const st_logmgr_config_t *cfg, st_logmgr_t **out, char *err,
                        size_t errlen) {
    st_logmgr_t *m = st_calloc(1, sizeof *m);
    m->cfg = *cfg;
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->ckpt_lock, NULL);
    pthread_cond_init(&m->cond, NULL);
    m->dirs = st_calloc((size_t)cfg->ndirs, sizeof *m->dirs);
    m->ndirs = cfg->ndirs;
    m->flush_due = INT64_MAX;
    /* log.max.open.files, within half the descriptors the process may
     * open: the other half is for connections, the bucket and the rest */
    int max_files = cfg->max_open_files > 0 ? cfg->max_open_files : ST_LOG_DEFAULT_MAX_OPEN_FILES;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)max_files > rl.rlim_cur / 2) {
        int lowered = (int)ST_MAX(rl.rlim_cur / 2, 4);
        ST_INFO("log", "log.max.open.files %d is more than half the open-file limit (%llu, "
                       "ulimit -n): keeping at most %d segment files open",
                max_files, (unsigned long long)rl.rlim_cur, lowered);
        max_files = lowered;
    }
    m->fc = st_log__fcache_new(max_files);
    for (int i = 0; i < cfg->ndirs; i++) m->dirs[i].lock_fd = -1;
    m->clean = 1;
    m->prev_broker_epoch = -2; /* none read yet */
    m->broker_epoch = -1;
    st_err_t e = ST_OK;
    for (int i = 0; i < cfg->ndirs; i++) {
        logdir_t *d = &m->dirs[i];
        d->path = st_strdup(cfg->dirs[i]);
        d->lock_fd = -1;
        e = st_mkdirs(d->path);
        if (e) {
            snprintf(err, errlen, "log.dirs: cannot create %s: %s", d->path, st_err_msg(e));
            goto fail;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/.lock", d->path);
        d->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (d->lock_fd < 0) {
            /* a read-only mount or a directory we may not write: say so,
             * not "locked" (nothing else holds it) */
            e = st_err_from_errno(errno);
            snprintf(err, errlen, "log.dirs: cannot write in %s: %s", d->path,
                     strerror(errno));
            goto fail;
        }
        if (flock(d->lock_fd, LOCK_EX | LOCK_NB) != 0) {
            if (errno == EWOULDBLOCK)
                snprintf(err, errlen,
                         "log.dirs: %s is locked by another process (is another stratad using it?)",
                         d->path);
            else
                snprintf(err, errlen, "log.dirs: cannot lock %s: %s", path, strerror(errno));
            e = errno == EWOULDBLOCK ? ST_E_LOCKED : st_err_from_errno(errno);
            goto fail;
        }
        char cid[64];
        int32_t node = -1;
        if (read_meta(d->path, cid, sizeof cid, &node) == ST_OK) {
            if (node != cfg->node_id) {
                snprintf(err, errlen, "log.dirs: %s belongs to node.id %d, not %d", d->path,
                         (int)node, (int)cfg->node_id);
                e = ST_E_CONFIG;
                goto fail;
            }
            if (cfg->cluster_id && cfg->cluster_id[0] && strcmp(cfg->cluster_id, cid)) {
                /* Kafka's INCONSISTENT_CLUSTER_ID, caught before joining */
                snprintf(err, errlen,
                         "log.dirs: %s belongs to cluster %s, but cluster.id is %s (a node "
                         "keeps the cluster it was first started in; give it an empty log dir "
                         "to join another)",
                         d->path, cid, cfg->cluster_id);
                e = ST_E_CONFIG;
                goto fail;
            }
            if (m->cluster_id[0] && strcmp(m->cluster_id, cid)) {
                snprintf(err, errlen, "log.dirs: %s belongs to cluster %s, others to %s", d->path,
                         cid, m->cluster_id);
                e = ST_E_CONFIG;
                goto fail;
            }
            snprintf(m->cluster_id, sizeof m->cluster_id, "%s", cid);
        }
        snprintf(path, sizeof path, "%s/" CLEAN_MARKER, d->path);
        DIR *dd = opendir(d->path);
        int has_logs = 0;
        if (dd) {
            struct dirent *de;
            while ((de = readdir(dd)))
                if (de->d_name[0] != '.' && strchr(de->d_name, '-') &&
                    strcmp(de->d_name, "meta.properties"))
                    has_logs = 1;
            closedir(dd);
        }
        if (access(path, F_OK) != 0 && has_logs) m->clean = 0;
        /* every dir must name the same epoch, or none is known */
        char *mk = NULL;
        size_t mklen = 0;
        long long ep = -1;
        if (st_read_file(path, &mk, &mklen) == ST_OK && mk) {
            char *eq = strstr(mk, "broker.epoch=");
            if (eq) ep = strtoll(eq + 13, NULL, 10);
        }
        free(mk);
        m->prev_broker_epoch = m->prev_broker_epoch == -2 || m->prev_broker_epoch == ep ? ep : -1;
        for (int k = 0; k < NCKPT; k++) ckpt_read(d->path, ckpt_names[k], &d->ckpt[k]);
    }
    if (!m->cluster_id[0] && cfg->cluster_id && cfg->cluster_id[0])
        snprintf(m->cluster_id, sizeof m->cluster_id, "%s", cfg->cluster_id);
    if (!m->cluster_id[0]) {
        st_uuid_t u;
        st_uuid_random(&u);
        st_uuid_format(&u, m->cluster_id);
    }
    for (int i = 0; i < m->ndirs; i++) {
        char path[4096];
        e = write_meta(m->dirs[i].path, m->cluster_id, cfg->node_id);
        if (e) {
            snprintf(err, errlen, "log.dirs: cannot write meta.properties in %s: %s",
                     m->dirs[i].path, st_err_msg(e));
            goto fail;
        }
        /* The marker describes one stop only: remove it now that we run. */
        snprintf(path, sizeof path, "%s/" CLEAN_MARKER, m->dirs[i].path);
        unlink(path);
        st_log__sync_dir(m->fc, m->dirs[i].path);
    }
    if (!m->clean || m->prev_broker_epoch < 0) m->prev_broker_epoch = -1;
    if (!m->clean) ST_WARN("log", "the previous stop was not clean: recovering logs");
    *out = m;
    return ST_OK;
fail:
    for (int i = 0; i < m->ndirs; i++) {
        if (m->dirs[i].lock_fd >= 0) close(m->dirs[i].lock_fd);
        free(m->dirs[i].path);
        for (int k = 0; k < NCKPT; k++) ckpt_free(&m->dirs[i].ckpt[k]);
    }
    free(m->dirs);
    st_log__fcache_destroy(m->fc);
    free(m);
    return e;
}

const char *st_logmgr_cluster_id(const st_logmgr_t *m) { return m->cluster_id; }
int st_logmgr_clean_start(const st_logmgr_t *m) { return m->clean; }

int64_t st_logmgr_previous_broker_epoch(const st_logmgr_t *m) { return m->prev_broker_epoch; }

void st_logmgr_set_broker_epoch(st_logmgr_t *m, int64_t epoch) {
    __atomic_store_n(&m->broker_epoch, epoch, __ATOMIC_RELEASE);
}

const char *st_logmgr_find_dir(st_logmgr_t *m, const char *topic, int32_t partition) {
    for (int i = 0; i < m->cfg.ndirs; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s-%d", m->dirs[i].path, topic, (int)partition);
        if (access(path, F_OK) == 0) return m->dirs[i].path;
    }
    return NULL;
}

const char *st_logmgr_pick_dir(st_logmgr_t *m) {
    int best = 0;
    for (int i = 1; i < m->cfg.ndirs; i++)
        if (m->dirs[i].nlogs < m->dirs[best].nlogs) best = i;
    return m->dirs[best].path;
}

static logdir_t *dir_of(st_logmgr_t *m, const char *path) {
    for (int i = 0; i < m->cfg.ndirs; i++)
        if (!strcmp(m->dirs[i].path, path)) return &m->dirs[i];
    return NULL;
}

st_err_t st_logmgr_open_log(st_logmgr_t *m, const char *topic, int32_t partition,
                            const st_uuid_t *topic_id, const st_log_config_t *cfg,
                            st_log_t **out) {
    /* one dir: it holds the partition whether or not it exists yet */
    const char *parent = m->cfg.ndirs == 1 ? m->dirs[0].path : st_logmgr_find_dir(m, topic, partition);
    if (!parent) parent = st_logmgr_pick_dir(m);
    logdir_t *d = dir_of(m, parent);
    pthread_mutex_lock(&m->lock); /* st_logmgr_delete_log forgets entries */
    int64_t start = ckpt_lookup(&d->ckpt[CKPT_START], topic, partition);
    int64_t recovery = ckpt_lookup(&d->ckpt[CKPT_RECOVERY], topic, partition);
    int64_t hw = ckpt_lookup(&d->ckpt[CKPT_HW], topic, partition);
    pthread_mutex_unlock(&m->lock);
    st_log_t *log;
    st_err_t e = st_log__open(m, parent, topic, partition, topic_id, cfg, m->clean,
                              start < 0 ? 0 : start, recovery < 0 ? 0 : recovery,
                              hw < 0 ? 0 : hw, &log);
    if (e) return e;
    pthread_mutex_lock(&m->lock);
    if (m->nlogs == m->caplogs) {
        m->caplogs = m->caplogs ? m->caplogs * 2 : 64;
        m->logs = st_realloc(m->logs, (size_t)m->caplogs * sizeof *m->logs);
    }
    log->mgr_index = m->nlogs;
    m->logs[m->nlogs++] = st_log_keep(log);
    d->nlogs++;
    pthread_mutex_unlock(&m->lock);
    *out = log;
    return ST_OK;
}

static void forget_log(st_logmgr_t *m, st_log_t *log) {
    pthread_mutex_lock(&m->lock);
    int i = log->mgr_index;
    if (i >= 0 && i < m->nlogs && m->logs[i] == log) {
        m->logs[i] = m->logs[--m->nlogs];
        m->logs[i]->mgr_index = i;
        log->mgr_index = -1;
        logdir_t *d = dir_of(m, log->parent);
        if (d) d->nlogs--;
        for (int k = 0; d && log->deleted && k < NCKPT; k++) ckpt_forget(&d->ckpt[k], log->topic, log->partition);
        st_log_release(log);
    }
    /* a queued flush keeps its own reference and finds the log deleted */
    pthread_mutex_unlock(&m->lock);
}

void st_logmgr_delete_log(st_logmgr_t *m, st_log_t *log) {
    pthread_mutex_lock(&log->lock);
    log->deleted = 1;
    log->closed = 1; /* from here no operation opens a file of the renamed directory */
    char *dir = st_strdup(log->dir);
    char gone[4200];
    st_uuid_t u;
    st_uuid_random(&u);
    char id[23];
    st_uuid_format(&u, id);
    /* Rename first (Kafka's "-delete" suffix): a crash mid-removal leaves a
     * directory that no longer looks like a partition. */
    snprintf(gone, sizeof gone, "%s.%s-delete", dir, id);
    int renamed = rename(dir, gone) == 0;
    pthread_mutex_unlock(&log->lock);
    forget_log(m, log);
    st_log__close(log, 0);
    st_err_t e = st_rmtree(renamed ? gone : dir);
    if (e) ST_WARN("log", "cannot remove %s: %s", renamed ? gone : dir, st_err_msg(e));
    free(dir);
}

/* ---- flusher ------------------------------------------------------------ */

void st_logmgr_request_flush(st_logmgr_t *m, st_log_t *log) {
    pthread_mutex_lock(&m->lock);
    if (!log->flush_queued) {
        log->flush_queued = 1;
        log->flush_next = NULL;
        st_log_keep(log);
        if (!m->flush_head) m->flush_queued_us = st_mono_us();
        if (m->flush_tail) m->flush_tail->flush_next = log;
        else m->flush_head = log;
        m->flush_tail = log;
        pthread_cond_broadcast(&m->cond);
    }
    pthread_mutex_unlock(&m->lock);
}

/* Group commit: every log queued while the previous round's fsyncs ran is
 * synced once in the next round, whatever number of appends it took. */
static void *flusher_main(void *arg) {
    st_logmgr_t *m = arg;
    st_thread_set_name("log-flusher");
    /* Producers with acks wait on these fsyncs: ahead of every other
     * write of the broker (uploads' reads, the chunk cache's spills). */
    int io = st_thread_io_priority(ST_IO_BEST_EFFORT, 0);
    if (io) ST_DEBUG("log", "log-flusher: no I/O priority: %s", strerror(io));
    st_log_t **round = NULL;
    int cap = 0;
    pthread_mutex_lock(&m->lock);
    for (;;) {
        while (!m->flush_head && !m->stopping) pthread_cond_wait(&m->cond, &m->lock);
        if (!m->flush_head && m->stopping) break;
        /* Take the whole queue out of the list before unlocking: once a log
         * is unmarked it may be queued again (and relinked) at any time. */
        int n = 0;
        for (st_log_t *l = m->flush_head; l; l = l->flush_next) {
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                round = st_realloc(round, sizeof *round * (size_t)cap);
            }
            round[n++] = l;
            l->flush_queued = 0;
        }
        m->flush_head = m->flush_tail = NULL;
        int64_t start = st_mono_us();
        st_histo_observe(&m->flush_wait, start - m->flush_queued_us);
        m->round_queued_us = m->flush_queued_us;
        pthread_mutex_unlock(&m->lock);
        /* A log that could not get a descriptor is tried again after a
         * pause (descriptors come back as responses finish), not dropped:
         * an acks=all produce waits on it. */
        int retry = 0;
        for (int i = 0; i < n; i++) {
            int64_t t0 = st_mono_us();
            if (st_log_flush(round[i]) == ST_E_NOFILE) {
                round[retry++] = round[i];
                continue;
            }
            st_histo_observe(&m->flush_time, st_mono_us() - t0);
            st_log_release(round[i]); /* a closed log answers at once */
        }
        if (retry) {
            pthread_mutex_lock(&m->lock);
            int stopping = m->stopping;
            if (!stopping) st_cond_wait_ms(&m->cond, &m->lock, 10);
            pthread_mutex_unlock(&m->lock);
            for (int i = 0; i < retry; i++) {
                if (!stopping) st_logmgr_request_flush(m, round[i]); /* at stop, the close syncs */
                st_log_release(round[i]);
            }
        }
        int64_t end = st_mono_us();
        pthread_mutex_lock(&m->lock);
        m->wait_peak_us = ST_MAX(m->wait_peak_us, end - m->round_queued_us);
        m->round_queued_us = 0;
        m->rounds++;
    }
    pthread_mutex_unlock(&m->lock);
    free(round);
    return NULL;
}

int64_t st_logmgr_take_flush_peak(st_logmgr_t *m) {
    int64_t now = st_mono_us();
    pthread_mutex_lock(&m->lock);
    int64_t peak = m->rounds ? m->wait_peak_us : -1;
    if (m->round_queued_us) peak = ST_MAX(peak, now - m->round_queued_us);
    if (m->flush_head) peak = ST_MAX(peak, now - m->flush_queued_us);
    m->wait_peak_us = 0;
    m->rounds = 0;
    pthread_mutex_unlock(&m->lock);
    return peak;
}

void st_logmgr_flush_stats(st_logmgr_t *m, st_histo_t *flush, st_histo_t *wait) {
    st_histo_read(&m->flush_time, flush);
    st_histo_read(&m->flush_wait, wait);
}

/* ---- janitor ------------------------------------------------------------ */

static st_log_t **snapshot_logs(st_logmgr_t *m, int *n) {
    pthread_mutex_lock(&m->lock);
    st_log_t **v = st_malloc((size_t)(m->nlogs + 1) * sizeof *v);
    for (int i = 0; i < m->nlogs; i++) v[i] = st_log_keep(m->logs[i]);
    *n = m->nlogs;
    pthread_mutex_unlock(&m->lock);
    return v;
}

static void *janitor_main(void *arg) {
    st_logmgr_t *m = arg;
    st_thread_set_name("log-janitor");
    int64_t next_retention = st_mono_ms() + ST_MIN(m->cfg.retention_check_interval_ms, 30000);
    int64_t next_ckpt = st_mono_ms() + m->cfg.checkpoint_interval_ms;
    int64_t pid_every = m->cfg.producer_id_expiration_check_interval_ms > 0
                            ? m->cfg.producer_id_expiration_check_interval_ms
                            : 600000; /* Kafka's default */
    int64_t next_pid_expiry = st_mono_ms() + pid_every;
    pthread_mutex_lock(&m->lock);
    while (!m->stopping) {
        int64_t now = st_mono_ms();
        int64_t wake = ST_MIN(ST_MIN(ST_MIN(next_retention, next_ckpt), m->flush_due),
                              next_pid_expiry);
        if (now < wake) {
            st_cond_wait_ms(&m->cond, &m->lock, ST_MIN(wake - now, 1000));
            continue;
        }
        int flush_due = now >= m->flush_due;
        if (flush_due) m->flush_due = INT64_MAX; /* recomputed below; appends lower it */
        pthread_mutex_unlock(&m->lock);
        int n;
        st_log_t **logs = snapshot_logs(m, &n);
        if (now >= next_retention) {
            for (int i = 0; i < n; i++) st_log_apply_retention(logs[i], st_now_ms());
            next_retention = now + m->cfg.retention_check_interval_ms;
        }
        if (now >= next_pid_expiry) {
            /* producer.id.expiration.ms, by the producers' own timestamps
             * (Kafka's removeExpiredProducers) */
            for (int i = 0; i < n; i++) st_log_expire_producers(logs[i], st_now_ms());
            next_pid_expiry = now + pid_every;
        }
        if (flush_due) {
            /* flush.ms: the flusher syncs the logs whose time has come; the
             * others say when theirs comes (a flush that leaves a log dirty
             * reports its next deadline itself) */
            int64_t next = INT64_MAX;
            for (int i = 0; i < n; i++) {
                int64_t due = st_log__flush_due(logs[i]);
                if (due <= now) st_logmgr_request_flush(m, logs[i]);
                else if (due < next) next = due;
            }
            st_log__mgr_flush_due(m, next);
        }
        for (int i = 0; i < n; i++) st_log_release(logs[i]);
        free(logs);
        if (now >= next_ckpt) {
            write_checkpoints(m);
            next_ckpt = now + m->cfg.checkpoint_interval_ms;
        }
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

void st_log__mgr_flush_due(st_logmgr_t *m, int64_t due_mono_ms) {
    pthread_mutex_lock(&m->lock);
    if (due_mono_ms < m->flush_due) {
        m->flush_due = due_mono_ms;
        pthread_cond_broadcast(&m->cond);
    }
    pthread_mutex_unlock(&m->lock);
}

st_fcache_t *st_log__mgr_fcache(st_logmgr_t *m) { return m->fc; }

void st_logmgr_file_stats(st_logmgr_t *m, st_log_file_stats_t *out) {
    st_log__fcache_stats(m->fc, out);
}

int st_logmgr_nlogs(st_logmgr_t *m) {
    pthread_mutex_lock(&m->lock);
    int n = m->nlogs;
    pthread_mutex_unlock(&m->lock);
    return n;
}

void st_logmgr_set_sync_ops(st_logmgr_t *m, const st_log_sync_ops_t *ops) {
    st_log__fcache_set_sync(m->fc, ops);
}

void st_logmgr_start(st_logmgr_t *m) {
    pthread_create(&m->flusher, NULL, flusher_main, m);
    pthread_create(&m->janitor, NULL, janitor_main, m);
    m->started = 1;
}

void st_logmgr_checkpoint(st_logmgr_t *m) { write_checkpoints(m); }

void st_logmgr_close(st_logmgr_t *m) {
    if (!m) return;
    pthread_mutex_lock(&m->lock);
    m->stopping = 1;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (m->started) {
        pthread_join(m->flusher, NULL);
        pthread_join(m->janitor, NULL);
    }
    /* Requests no flusher took (it never started: tests, a failed start)
     * give their references back; the flushes below cover them. */
    pthread_mutex_lock(&m->lock);
    st_log_t *queued = m->flush_head;
    m->flush_head = m->flush_tail = NULL;
    pthread_mutex_unlock(&m->lock);
    while (queued) {
        st_log_t *next = queued->flush_next;
        queued->flush_queued = 0;
        st_log_release(queued);
        queued = next;
    }
    int n;
    st_log_t **logs = snapshot_logs(m, &n);
    int clean = 1;
    for (int i = 0; i < n; i++) {
        if (st_log_flush(logs[i])) clean = 0;
        st_log_offsets_t o;
        st_log_offsets(logs[i], &o);
        if (o.offline) clean = 0;
    }
    write_checkpoints(m);
    for (int i = 0; i < n; i++) {
        forget_log(m, logs[i]);
        st_log__close(logs[i], 1);
    }
    free(logs);
    for (int i = 0; i < m->cfg.ndirs; i++) {
        logdir_t *d = &m->dirs[i];
        if (clean) {
            char path[4096];
            char mk[64];
            int mklen = snprintf(mk, sizeof mk, "broker.epoch=%lld\n",
                                 (long long)__atomic_load_n(&m->broker_epoch, __ATOMIC_ACQUIRE));
            snprintf(path, sizeof path, "%s/" CLEAN_MARKER, d->path);
            st_write_file_atomic(path, mk, (size_t)mklen);
        }
        close(d->lock_fd);
        free(d->path);
        for (int k = 0; k < NCKPT; k++) ckpt_free(&d->ckpt[k]);
    }
    free(m->dirs);
    free(m->logs);
    st_log__fcache_destroy(m->fc);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->ckpt_lock);
    pthread_cond_destroy(&m->cond);
    free(m);
}

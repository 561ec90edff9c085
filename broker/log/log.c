/*
 * log.c - one partition log: open and recover, append, read, time lookup,
 * DeleteRecords, retention, roll, flush, the leader-epoch cache.
 *
 * Lock: log->lock guards every field of the log and its segments.  The
 * notify callback and every fsync run without it, with one exception named
 * at st_log_truncate_to: an append never waits for the disk.  A roll only
 * switches segments; the flusher (st_log_flush) syncs what rolled, the
 * directory and the leader-epoch checkpoint, and only then raises
 * flushed_offset, which the manager checkpoints as the recovery point.
 * Segment files come from the manager's cache (fcache.c) under the lock,
 * each kept for one operation (or handed to a reader); a failure to get a
 * descriptor (ST_E_NOFILE) leaves the log online, a failed write or fsync
 * takes it offline.
 */
#include "log_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define WHAT_FMT "%s-%d"
#define WHAT_ARGS(log) (log)->topic, (int)(log)->partition

static st_segment_t *active_seg(st_log_t *log) { return log->segs[log->nsegs - 1]; }

static void segs_push(st_log_t *log, st_segment_t *s) {
    if (log->nsegs == log->capsegs) {
        log->capsegs = log->capsegs ? log->capsegs * 2 : 8;
        log->segs = st_realloc(log->segs, (size_t)log->capsegs * sizeof *log->segs);
    }
    log->segs[log->nsegs++] = s;
}

static void segs_remove_first(st_log_t *log, int n) {
    memmove(log->segs, log->segs + n, (size_t)(log->nsegs - n) * sizeof *log->segs);
    log->nsegs -= n;
}

/* ---- leader-epoch cache ---------------------------------------------------
 *
 * leader-epoch-checkpoint, text (Kafka's format):
 *   0                 version
 *   N                 number of entries
 *   <epoch> <offset>  N lines: the first offset appended in each epoch
 */
static void epoch_text(st_log_t *log, st_buf_t *b) {
    st_buf_printf(b, "0\n%d\n", log->nepochs);
    for (int i = 0; i < log->nepochs; i++)
        st_buf_printf(b, "%d %lld\n", log->epochs[i].epoch, (long long)log->epochs[i].start);
}

/* Write leader-epoch-checkpoint when the cache changed since the last
 * write.  Never under log->lock: the file's fsyncs must not stall the
 * appends.  Kafka (KAFKA-15046) took the fsyncs after truncations out of
 * the log's lock but still syncs a new epoch's entry inside the append;
 * here that one waits for the flusher as well, which is safe because the
 * file holds the epochs of every offset below flushed_offset before
 * flushed_offset moves, and recovery takes the epochs past the recovery
 * point from the batches it re-reads.  Call without the log's lock. */
st_err_t st_log__epoch_checkpoint(st_log_t *log) {
    st_err_t e = ST_OK;
    st_buf_t b;
    st_buf_init(&b);
    pthread_mutex_lock(&log->epoch_file_lock);
    pthread_mutex_lock(&log->lock);
    int64_t gen = log->epoch_gen;
    int skip = gen == __atomic_load_n(&log->epoch_gen_written, __ATOMIC_RELAXED) || log->closed ||
               log->offline;
    if (!skip) epoch_text(log, &b);
    pthread_mutex_unlock(&log->lock);
    if (!skip) {
        char path[4096];
        snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", log->dir);
        e = st_log__write_file_atomic(st_log__mgr_fcache(log->mgr), path, b.data, b.len);
        if (!e) __atomic_store_n(&log->epoch_gen_written, gen, __ATOMIC_RELAXED);
        else ST_WARN("log", WHAT_FMT ": cannot write leader-epoch-checkpoint: %s", WHAT_ARGS(log),
                     st_err_msg(e));
    }
    pthread_mutex_unlock(&log->epoch_file_lock);
    st_buf_fini(&b);
    return e;
}

static void epoch_push(st_log_t *log, int32_t epoch, int64_t start) {
    if (log->nepochs == log->capepochs) {
        log->capepochs = log->capepochs ? log->capepochs * 2 : 4;
        log->epochs = st_realloc(log->epochs, (size_t)log->capepochs * sizeof *log->epochs);
    }
    log->epochs[log->nepochs].epoch = epoch;
    log->epochs[log->nepochs].start = start;
    log->nepochs++;
}

void st_log__epoch_assign(st_log_t *log, int32_t epoch, int64_t start) {
    if (epoch < 0) return;
    if (log->nepochs && log->epochs[log->nepochs - 1].epoch >= epoch) return;
    epoch_push(log, epoch, start);
    log->epoch_gen++; /* the flusher writes it (st_log_flush) */
}

void st_log__epoch_truncate_from(st_log_t *log, int64_t offset) {
    int n = log->nepochs;
    while (log->nepochs && log->epochs[log->nepochs - 1].start >= offset) log->nepochs--;
    if (n != log->nepochs) log->epoch_gen++;
}

/* The log now starts at offset: entries wholly before it go, and the one
 * spanning it starts there (Kafka's truncateFromStart). */
static void epoch_truncate_start(st_log_t *log, int64_t offset) {
    int k = 0;
    while (k + 1 < log->nepochs && log->epochs[k + 1].start <= offset) k++;
    if (k == 0 && (log->nepochs == 0 || log->epochs[0].start >= offset)) return;
    memmove(log->epochs, log->epochs + k, sizeof *log->epochs * (size_t)(log->nepochs - k));
    log->nepochs -= k;
    if (log->epochs[0].start < offset) log->epochs[0].start = offset;
    log->epoch_gen++;
}

st_err_t st_log__epoch_load(st_log_t *log) {
    char path[4096], *text;
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", log->dir);
    if (st_read_file(path, &text, NULL)) return ST_OK; /* none yet */
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    int version = line ? atoi(line) : -1;
    line = strtok_r(NULL, "\n", &save);
    int n = line ? atoi(line) : -1;
    if (version != 0 || n < 0) {
        ST_WARN("log", WHAT_FMT ": ignoring malformed leader-epoch-checkpoint", WHAT_ARGS(log));
        free(text);
        return ST_OK;
    }
    for (int i = 0; i < n && (line = strtok_r(NULL, "\n", &save)); i++) {
        int epoch;
        long long start;
        if (sscanf(line, "%d %lld", &epoch, &start) != 2) break;
        if (log->nepochs && (log->epochs[log->nepochs - 1].epoch >= epoch ||
                             log->epochs[log->nepochs - 1].start > start))
            break;
        epoch_push(log, epoch, start);
    }
    free(text);
    return ST_OK;
}

/* ---- open / close ------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static st_err_t write_partition_metadata(st_log_t *log, const st_uuid_t *topic_id) {
    char path[4096], idtext[23], body[128];
    snprintf(path, sizeof path, "%s/partition.metadata", log->dir);
    if (!topic_id || st_uuid_is_zero(topic_id)) return ST_OK;
    st_uuid_format(topic_id, idtext);
    int n = snprintf(body, sizeof body, "version: 0\ntopic_id: %s\n", idtext);
    return st_log__write_file_atomic(st_log__mgr_fcache(log->mgr), path, body, (size_t)n);
}

/* The partition's directory listing: segment base offsets (sorted) and the
 * small files present.  Leftovers of an interrupted write (*.tmp) are
 * removed.  The directory is created when missing. */
typedef struct dir_listing {
    int64_t *bases;
    int nbases;
    int64_t *snaps; /* producer snapshot offsets (unsorted) */
    int nsnaps;
    int has_epochs, has_partition_metadata;
    int cleaner_files; /* an interrupted cleaning pass left files */
} dir_listing_t;

static st_err_t list_dir(const char *dir, dir_listing_t *out) {
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d && errno == ENOENT) {
        /* a new partition: one mkdir when the log dir exists (the usual
         * case), every level otherwise */
        st_err_t e = mkdir(dir, 0755) == 0 || errno == EEXIST ? ST_OK : st_mkdirs(dir);
        if (e) return e;
        d = opendir(dir);
    }
    if (!d) return st_err_from_errno(errno);
    int capbases = 0, capsnaps = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if ((len > 8 && !strcmp(de->d_name + len - 8, ".cleaned")) ||
            (len > 5 && !strcmp(de->d_name + len - 5, ".swap")))
            out->cleaner_files = 1;
        if (len > 4 && !strcmp(de->d_name + len - 4, ".tmp")) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
            continue;
        }
        if (!strcmp(de->d_name, "leader-epoch-checkpoint")) out->has_epochs = 1;
        if (!strcmp(de->d_name, "partition.metadata")) out->has_partition_metadata = 1;
        int snap = len == 29 && !strcmp(de->d_name + 20, ".snapshot");
        if (!snap && (len != 24 || strcmp(de->d_name + 20, ".log"))) continue;
        char *end;
        long long base = strtoll(de->d_name, &end, 10);
        if (end != de->d_name + 20 || base < 0) continue;
        if (snap) {
            if (out->nsnaps == capsnaps) {
                capsnaps = capsnaps ? capsnaps * 2 : 4;
                out->snaps = st_realloc(out->snaps, (size_t)capsnaps * sizeof *out->snaps);
            }
            out->snaps[out->nsnaps++] = base;
            continue;
        }
        if (out->nbases == capbases) {
            capbases = capbases ? capbases * 2 : 4;
            out->bases = st_realloc(out->bases, (size_t)capbases * sizeof *out->bases);
        }
        out->bases[out->nbases++] = base;
    }
    closedir(d);
    if (out->nbases > 1) qsort(out->bases, (size_t)out->nbases, sizeof *out->bases, cmp_i64);
    return ST_OK;
}

/* A batch that survived a validating recovery: its epoch starts there
 * unless the cache knows it already. */
static void recovered_batch(void *arg, const st_batch_info_t *b) {
    st_log__epoch_assign(arg, b->leader_epoch, b->base_offset);
}

st_err_t st_log__open(st_logmgr_t *m, const char *parent, const char *topic, int32_t partition,
                      const st_uuid_t *topic_id, const st_log_config_t *cfg, int clean,
                      int64_t log_start_hint, int64_t recovery_point, int64_t hw_hint,
                      st_log_t **out) {
    st_log_t *log = st_calloc(1, sizeof *log);
    pthread_mutex_init(&log->lock, NULL);
    pthread_mutex_init(&log->epoch_file_lock, NULL);
    pthread_cond_init(&log->notify_cond, NULL);
    log->refs = 1;
    log->mgr = m;
    log->mgr_index = -1;
    log->parent = st_strdup(parent);
    log->topic = st_strdup(topic);
    log->partition = partition;
    log->cfg = *cfg;
    log->last_flush_ms = st_mono_ms();
    st_fcache_t *fc = st_log__mgr_fcache(m);
    char dir[4096], what[512];
    snprintf(dir, sizeof dir, "%s/%s-%d", parent, topic, (int)partition);
    snprintf(what, sizeof what, "%s-%d", topic, (int)partition);
    log->dir = st_strdup(dir);
    dir_listing_t ls;
    st_err_t e = list_dir(dir, &ls);
    if (!e && ls.cleaner_files) {
        /* a cleaning pass was cut short: finish or undo it, then look again */
        free(ls.bases);
        free(ls.snaps);
        st_err_t ce = st_log__cleaner_recover_partition(dir);
        if (ce) ST_WARN("log", "%s: cleaner recovery: %s", what, st_err_msg(ce));
        e = list_dir(dir, &ls);
    }
    /* the log owns the snapshot list from here (freed with it) */
    log->snaps = ls.snaps;
    log->nsnaps = log->capsnaps = ls.nsnaps;
    log->pstate_snap_unsynced = -1;
    if (e) goto fail;
    if (!ls.has_partition_metadata) e = write_partition_metadata(log, topic_id);
    if (e) goto fail;
    if (ls.has_epochs) st_log__epoch_load(log);
    __atomic_store_n(&log->epoch_gen_written, log->epoch_gen, __ATOMIC_RELAXED); /* the file's */

    int validating = 0;
    for (int i = 0; i < ls.nbases; i++) {
        st_segment_t *s;
        e = st_log__seg_open(fc, log->dir, ls.bases[i], 0, &s);
        if (e) break;
        int is_last = i == ls.nbases - 1;
        /* After an unclean stop, every segment that may hold unflushed data
         * is re-validated batch by batch: those at or after the recovery
         * point, and always the active one. */
        int64_t seg_end = is_last ? INT64_MAX : ls.bases[i + 1];
        int validate = !clean && (is_last || seg_end > recovery_point);
        if (validate && !validating) {
            /* From here the data may not all have been synced, nor the
             * epoch checkpoint written for it: the epochs are taken from
             * the batches that survive (Kafka's LogSegment.recover assigns
             * them to the cache the same way). */
            validating = 1;
            st_log__epoch_truncate_from(log, ls.bases[i]);
        }
        e = st_log__seg_recover(s, dir, validate, is_last, is_last ? 0 : ls.bases[i + 1], cfg, what,
                                validate ? recovered_batch : NULL, log);
        if (!e && !is_last && s->next_offset != ls.bases[i + 1]) {
            /* A closed segment was cut (its end never reached the disk):
             * what follows would leave a gap, so it goes, and this one is
             * recovered again as the active segment (Kafka's recoverLog
             * deletes the unflushed segments after a truncated one). */
            ST_WARN("log", "%s: segment %020lld ends at offset %lld, not %lld: removing the %d "
                    "segments after it", what, (long long)ls.bases[i], (long long)s->next_offset,
                    (long long)ls.bases[i + 1], ls.nbases - 1 - i);
            for (int k = i + 1; k < ls.nbases; k++) st_log__seg_unlink_files(dir, ls.bases[k]);
            st_log__sync_dir(fc, dir);
            ls.nbases = i + 1;
            st_log__seg_close(s);
            e = st_log__seg_open(fc, log->dir, ls.bases[i], 0, &s);
            if (e) break;
            e = st_log__seg_recover(s, dir, 1, 1, 0, cfg, what, recovered_batch, log);
        }
        if (e) {
            st_log__seg_close(s);
            break;
        }
        segs_push(log, s);
    }
    free(ls.bases);
    if (e) goto fail;
    if (log->nsegs == 0) {
        st_segment_t *s;
        int64_t base = log_start_hint > 0 ? log_start_hint : 0;
        e = st_log__seg_open(fc, log->dir, base, 1, &s);
        if (e) goto fail;
        segs_push(log, s);
    }
    log->leo = active_seg(log)->next_offset;
    log->log_start_offset = ST_MAX(log->segs[0]->base_offset, log_start_hint);
    if (log->log_start_offset > log->leo) log->log_start_offset = log->leo;
    log->flushed_offset = clean ? log->leo : ST_MIN(ST_MAX(recovery_point, 0), log->leo);
    /* The checkpointed high watermark (replication-offset-checkpoint; the
     * log start when the partition is not in it, as Kafka): what this
     * replica knew to be committed, not its log end, which may hold
     * batches no other replica has.  As leader it moves up from there as
     * the ISR fetches (at once with no follower). */
    log->high_watermark = ST_MIN(ST_MAX(hw_hint, log->log_start_offset), log->leo);
    st_log__epoch_truncate_from(log, log->leo);
    st_log__pstate_open(log, clean);
    if (!clean) {
        /* Everything that survived validation goes to disk: a killed
         * process leaves its unsynced segments in the page cache, where
         * recovery read them, and more than the active one may be there
         * since rolls stopped syncing. */
        int ok = 1;
        for (int i = 0; i < log->nsegs && ok; i++) {
            st_segment_t *sg = log->segs[i];
            st_file_t *f;
            if (sg->next_offset <= log->flushed_offset && i < log->nsegs - 1) continue;
            ok = st_log__seg_keep(sg, ST_SEG_LOG, &f) == ST_OK;
            if (ok) {
                ok = st_log__sync(fc, f->fd, 1) == ST_OK;
                st_file_release(f);
            }
        }
        if (ok && st_log__sync_dir(fc, log->dir) == ST_OK) log->flushed_offset = log->leo;
    }
    st_log__epoch_checkpoint(log); /* when recovery or the truncation above changed it */
    *out = log;
    return ST_OK;
fail:
    ST_ERROR("log", "%s: cannot open log in %s: %s", what, dir, st_err_msg(e));
    st_log__close(log, 0);
    return e;
}

void st_log__close(st_log_t *log, int clean) {
    if (!log) return;
    if (clean) st_log__epoch_checkpoint(log);
    pthread_mutex_lock(&log->lock);
    /* Kafka's close takes a snapshot at the log end: the next start
     * replays nothing.  Unchanged since the last one: no I/O. */
    if (clean && !log->offline && !log->deleted && log->nsegs &&
        log->leo > log->log_start_offset &&
        (log->nsnaps == 0 || log->snaps[log->nsnaps - 1] != log->leo))
        st_log__pstate_snapshot(log, log->leo, 1);
    log->closed = 1;
    for (int i = 0; i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        if (clean && !log->offline && !log->deleted) {
            /* only what changed since the open costs I/O: an idle
             * partition closes without opening a file */
            int last = i == log->nsegs - 1;
            int trimmed = last && s->prealloc_end > s->size;
            if (last) st_log__seg_trim(s, 0);
            st_log__seg_write_indexes(s, !last);
            if (last && (trimmed || log->flushed_offset < log->leo)) {
                st_file_t *f;
                if (st_log__seg_keep(s, ST_SEG_LOG, &f) == ST_OK) {
                    st_log__sync(st_log__mgr_fcache(log->mgr), f->fd, 0);
                    st_file_release(f);
                }
            }
        }
        st_log__seg_close(s);
    }
    log->nsegs = 0;
    pthread_mutex_unlock(&log->lock);
    st_log_release(log);
}

st_log_t *st_log_keep(st_log_t *log) {
    __atomic_add_fetch(&log->refs, 1, __ATOMIC_RELAXED);
    return log;
}

void st_log_release(st_log_t *log) {
    if (!log || __atomic_sub_fetch(&log->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int i = 0; i < log->nsegs; i++) st_log__seg_close(log->segs[i]);
    free(log->segs);
    free(log->epochs);
    st_log__pstate_free(log);
    free(log->dir);
    free(log->parent);
    free(log->topic);
    pthread_mutex_destroy(&log->lock);
    pthread_mutex_destroy(&log->epoch_file_lock);
    pthread_cond_destroy(&log->notify_cond);
    free(log);
}

void st_log_set_notify(st_log_t *log, st_log_notify_cb cb, void *arg) {
    pthread_mutex_lock(&log->lock);
    log->notify = cb;
    log->notify_arg = arg;
    /* A callback under way on another thread (the flusher's, an
     * appender's) still holds the old arg: it is waited out, so the caller
     * may free what arg points to once this returns. */
    while (log->notifying > 0) pthread_cond_wait(&log->notify_cond, &log->lock);
    pthread_mutex_unlock(&log->lock);
}

static void notify(st_log_t *log) {
    st_log_notify_cb cb;
    void *arg;
    pthread_mutex_lock(&log->lock);
    cb = log->notify;
    arg = log->notify_arg;
    if (cb) log->notifying++;
    pthread_mutex_unlock(&log->lock);
    if (!cb) return;
    cb(log, arg);
    pthread_mutex_lock(&log->lock);
    if (--log->notifying == 0) pthread_cond_broadcast(&log->notify_cond);
    pthread_mutex_unlock(&log->lock);
}

void st_log_set_config(st_log_t *log, const st_log_config_t *cfg) {
    pthread_mutex_lock(&log->lock);
    log->cfg = *cfg;
    pthread_mutex_unlock(&log->lock);
}

void st_log_get_config(st_log_t *log, st_log_config_t *cfg) {
    pthread_mutex_lock(&log->lock);
    *cfg = log->cfg;
    pthread_mutex_unlock(&log->lock);
}

const char *st_log_topic(const st_log_t *log) { return log->topic; }
int32_t st_log_partition(const st_log_t *log) { return log->partition; }
const char *st_log_dir(const st_log_t *log) { return log->dir; }

void st_log_offsets(st_log_t *log, st_log_offsets_t *out) {
    pthread_mutex_lock(&log->lock);
    out->log_start_offset = log->log_start_offset;
    out->high_watermark = log->high_watermark;
    out->leo = log->leo;
    out->flushed_offset = log->flushed_offset;
    out->size_bytes = 0;
    for (int i = 0; i < log->nsegs; i++) out->size_bytes += log->segs[i]->size;
    out->nsegments = log->nsegs;
    out->offline = log->offline;
    pthread_mutex_unlock(&log->lock);
}

/* ---- append ------------------------------------------------------------- */

/* Close the active segment and start the next.  Lock held.  Only the
 * switch happens here: the old segment's data, its index files and the
 * new files' directory entries are synced by the flusher, which the caller
 * asks once the lock is released (Kafka's roll leaves them to
 * flushUptoOffsetExclusive on the scheduler).  Until then flushed_offset
 * stays below what the roll closed, so the recovery point never passes an
 * unsynced segment.  ST_E_NOFILE when a file could not be opened: nothing
 * changed (the caller keeps the log online); any other error means a
 * write failed. */
static st_err_t roll_locked(st_log_t *log) {
    st_segment_t *old = active_seg(log), *s = NULL;
    st_err_t e = st_log__seg_open(st_log__mgr_fcache(log->mgr), log->dir, log->leo, 1, &s);
    if (e) {
        st_log__seg_unlink_files(log->dir, log->leo);
        return e;
    }
    st_log__seg_trim(old, 0);
    e = st_log__seg_close_indexes(old);
    if (e) {
        st_log__seg_close(s);
        st_log__seg_unlink_files(log->dir, log->leo);
        return e;
    }
    segs_push(log, s);
    log->rolls++;
    /* Kafka's roll snapshots the producer state at the new base offset,
     * here unsynced: the flusher syncs it with the rolled segment. */
    st_log__pstate_snapshot(log, log->leo, 0);
    ST_DEBUG("log", WHAT_FMT ": rolled segment at offset %lld", WHAT_ARGS(log),
             (long long)log->leo);
    return ST_OK;
}

static int needs_roll(st_log_t *log, size_t len, int64_t now_ms, int64_t count) {
    st_segment_t *s = active_seg(log);
    if (s->size == 0) return 0;
    if (s->size + (int64_t)len > log->cfg.segment_bytes) return 1;
    if (log->cfg.segment_ms > 0 && now_ms - s->created_ms >= log->cfg.segment_ms) return 1;
    if ((int64_t)(s->nidx + 1) * 8 > log->cfg.segment_index_bytes) return 1;
    if (log->leo + count - s->base_offset > INT32_MAX) return 1;
    return 0;
}

static void go_offline(st_log_t *log, st_err_t e, const char *op) {
    if (!log->offline)
        ST_ERROR("log", WHAT_FMT ": %s failed (%s); the partition is offline until restart",
                 WHAT_ARGS(log), op, st_err_msg(e));
    log->offline = 1;
}

/* After a failure of op: ST_E_NOFILE leaves the log online (nothing was
 * written; the next attempt may find a descriptor), anything else takes it
 * offline.  Returns what the caller answers.  Lock held. */
static st_err_t failed(st_log_t *log, st_err_t e, const char *op) {
    if (e == ST_E_NOFILE) {
        ST_LOG_RATELIMITED(ST_LOG_WARN, "log", 10000, WHAT_FMT ": %s: %s (log.max.open.files, "
                           "ulimit -n)", WHAT_ARGS(log), op, st_err_msg(e));
        return e;
    }
    go_offline(log, e, op);
    return ST_E_KAFKA_STORAGE_ERROR;
}

/* A follower's batches must continue the log where it ends, one after the
 * other, with epochs that never go down.  Lock held. */
static st_err_t check_follower_batches(st_log_t *log, const uint8_t *records, size_t len) {
    int64_t expect = log->leo;
    int32_t epoch = log->nepochs ? log->epochs[log->nepochs - 1].epoch : -1;
    for (size_t pos = 0; pos < len;) {
        st_batch_info_t b;
        if (st_batch_header(records + pos, len - pos, &b) || (size_t)b.size > len - pos ||
            b.last_offset_delta < 0)
            return ST_E_CORRUPT;
        if (b.base_offset != expect || b.leader_epoch < epoch) {
            ST_WARN("log", WHAT_FMT ": follower append of a batch at offset %lld epoch %d refused: "
                    "the log ends at %lld in epoch %d", WHAT_ARGS(log), (long long)b.base_offset,
                    (int)b.leader_epoch, (long long)expect, (int)epoch);
            return ST_E_INVAL;
        }
        expect = st_batch_last_offset(&b) + 1;
        epoch = b.leader_epoch;
        pos += (size_t)b.size;
    }
    return ST_OK;
}

/* leader_epoch < 0 with as_follower: the batches keep their own. */
static st_err_t append(st_log_t *log, uint8_t *records, size_t len, int32_t leader_epoch,
                       int64_t guard, int as_follower, int64_t now_ms, st_append_info_t *info) {
    st_err_t e = ST_OK;
    st_file_t *f = NULL;
    int want_flush = 0;
    int64_t flush_due = -1;
    /* what this append's batches do to the producer state (the log's
     * scratch table: no allocation per append) */
    st_pstate_t *stage = &log->pstage;
    info->duplicate = 0;
    pthread_mutex_lock(&log->lock);
    if (log->offline || log->closed) {
        e = log->closed ? ST_E_NOT_LEADER_OR_FOLLOWER : ST_E_KAFKA_STORAGE_ERROR;
        goto out;
    }
    if ((int64_t)len > log->cfg.segment_bytes) {
        e = ST_E_RECORD_LIST_TOO_LARGE;
        goto out;
    }
    if (as_follower && (e = check_follower_batches(log, records, len))) goto out;
    /* Count offsets first: a roll must not split one append. */
    int64_t count = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t blen = st_be32_get(records + pos + ST_BATCH_LENGTH_OFFSET);
        count += (int32_t)st_be32_get(records + pos + ST_BATCH_LAST_DELTA_OFFSET) + 1;
        pos += blen + ST_BATCH_LOG_OVERHEAD;
    }
    int64_t lat = log->cfg.log_append_time ? now_ms : -1;
    /* The producer checks (KIP-98) come before anything changes: a refused
     * or duplicate append neither rolls nor writes. */
    if (!as_follower) {
        log->append_guard = guard;
        e = st_log__pstate_check(log, records, len, lat, stage, info);
        if (e || info->duplicate) goto out;
    }
    int rolled = needs_roll(log, len, now_ms, count);
    if (rolled) {
        e = roll_locked(log);
        if (e) {
            e = failed(log, e, "segment roll");
            goto out;
        }
    }
    st_segment_t *s = active_seg(log);
    e = st_log__seg_keep(s, ST_SEG_LOG, &f);
    if (e) {
        e = failed(log, e, "open of the active segment");
        goto out;
    }
    int64_t next = log->leo + (as_follower ? count : 0);
    for (size_t pos = 0; pos < len && !as_follower;) {
        uint32_t blen = st_be32_get(records + pos + ST_BATCH_LENGTH_OFFSET);
        next = st_batch_stamp(records + pos, next, leader_epoch, lat);
        pos += blen + ST_BATCH_LOG_OVERHEAD;
    }
    /* Allocate disk blocks ahead of the appends, a chunk at a time: writing
     * into allocated blocks spares the file system a reservation per page
     * (measured: about a tenth of the append's cost on ext4).  The file's
     * size does not change; a roll or a clean close cuts what is unused. */
    if (s->size + (int64_t)len > s->prealloc_end) {
        int64_t want = ST_MIN(ST_MAX((int64_t)len, (int64_t)ST_LOG_PREALLOC_BYTES),
                              log->cfg.segment_bytes);
        if (fallocate(f->fd, FALLOC_FL_KEEP_SIZE, s->size, want) == 0)
            s->prealloc_end = s->size + want;
        else
            s->prealloc_end = INT64_MAX; /* not supported here: stop trying */
    }
    e = st_pwrite_all(f->fd, records, len, s->size);
    if (e) {
        if (ftruncate(f->fd, s->size) != 0) { /* best effort; recovery trims it */ }
        go_offline(log, e, "write");
        e = ST_E_KAFKA_STORAGE_ERROR;
        goto out;
    }
    if (!as_follower) st_log__epoch_assign(log, leader_epoch, log->leo);
    for (size_t pos = 0; pos < len;) {
        st_batch_info_t b;
        st_batch_header(records + pos, len - pos, &b);
        if (as_follower) st_log__epoch_assign(log, b.leader_epoch, b.base_offset);
        st_log__seg_index_batch(s, &b, s->size + (int64_t)pos, log->cfg.index_interval_bytes);
        pos += (size_t)b.size;
    }
    s->size += (int64_t)len;
    if (as_follower) st_log__pstate_apply(log, records, len);
    else st_log__pstate_commit(log, stage);
    st_log__txn_apply_all(log, records, len);
    info->base_offset = log->leo;
    info->last_offset = next - 1;
    info->log_append_time = lat;
    /* flush.messages counts the offsets not yet synced; flush.ms starts
     * when a synced log takes its first unsynced append (Kafka's
     * timeSinceLastFlush, checked by the janitor). */
    if (log->cfg.flush_ms > 0 && log->flushed_offset >= log->leo)
        flush_due = log->last_flush_ms + log->cfg.flush_ms;
    log->leo = next;
    want_flush = rolled || (log->cfg.flush_messages > 0 &&
                            log->leo - log->flushed_offset >= log->cfg.flush_messages);
    info->log_start_offset = log->log_start_offset;
out:
    if (stage->n) st_log__pstate_clear(stage);
    pthread_mutex_unlock(&log->lock);
    st_file_release(f);
    if (!e && !info->duplicate) {
        if (want_flush) st_logmgr_request_flush(log->mgr, log);
        if (flush_due >= 0) st_log__mgr_flush_due(log->mgr, flush_due);
        notify(log);
    }
    return e;
}

st_err_t st_log_append(st_log_t *log, uint8_t *records, size_t len, int32_t leader_epoch,
                       int64_t now_ms, st_append_info_t *info) {
    return append(log, records, len, leader_epoch, ST_LOG_UNVERIFIED, 0, now_ms, info);
}

st_err_t st_log_append_verified(st_log_t *log, uint8_t *records, size_t len, int32_t leader_epoch,
                                int64_t now_ms, int64_t guard, st_append_info_t *info) {
    return append(log, records, len, leader_epoch, guard, 0, now_ms, info);
}

st_err_t st_log_append_as_follower(st_log_t *log, const uint8_t *records, size_t len,
                                   int64_t now_ms, st_append_info_t *info) {
    /* nothing is stamped: the bytes are written as they are */
    return append(log, (uint8_t *)records, len, -1, ST_LOG_UNVERIFIED, 1, now_ms, info);
}

void st_log_set_high_watermark(st_log_t *log, int64_t hw) {
    pthread_mutex_lock(&log->lock);
    if (hw > log->leo) hw = log->leo;
    if (hw > log->high_watermark) log->high_watermark = hw;
    pthread_mutex_unlock(&log->lock);
}

/* ---- read --------------------------------------------------------------- */

/* Index of the segment that holds offset (largest base <= offset). */
static int seg_for_offset(st_log_t *log, int64_t offset) {
    int lo = 0, hi = log->nsegs - 1, best = 0;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (log->segs[mid]->base_offset <= offset) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return best;
}

/* Read up to `bound` (the high watermark for consumers, the leo for
 * followers).  Out of range only below the log start or past the log end,
 * as Kafka's LocalLog.read: an offset between the bound and the log end is
 * one a consumer may well have seen (a new leader's high watermark lags
 * the old one's until its followers fetch again), so it reads nothing
 * yet rather than sending the consumer back to auto.offset.reset.  Lock
 * held. */
static st_err_t read_locked(st_log_t *log, int64_t offset, int32_t max_bytes, int min_one,
                            int64_t bound, st_log_read_t *out) {
    st_err_t e = ST_OK;
    out->high_watermark = log->high_watermark;
    out->log_start_offset = log->log_start_offset;
    out->leo = log->leo;
    if (log->offline || log->closed)
        return log->closed ? ST_E_NOT_LEADER_OR_FOLLOWER : ST_E_KAFKA_STORAGE_ERROR;
    if (offset < log->log_start_offset || offset > log->leo) return ST_E_OFFSET_OUT_OF_RANGE;
    if (offset >= bound) return ST_OK; /* nothing yet */
    for (int i = seg_for_offset(log, offset); i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        int64_t pos;
        st_batch_info_t b;
        st_file_t *f;
        e = st_log__seg_keep(s, ST_SEG_LOG, &f);
        if (e) {
            e = failed(log, e, "open for a read");
            break;
        }
        e = st_log__seg_find(s, f, offset, &pos, &b);
        if (e == ST_E_NOT_FOUND) {
            st_file_release(f);
            e = ST_OK;
            continue; /* the offset lies in a gap: the next segment has it */
        }
        if (e || b.base_offset >= bound) {
            st_file_release(f);
            break;
        }
        /* Stop at the bound: the end of the segment when the whole segment
         * is below it, else the batch holding the bound. */
        int64_t end = s->size;
        if (bound < s->next_offset) {
            int64_t hwpos;
            if (st_log__seg_find(s, f, bound, &hwpos, NULL) == ST_OK) end = hwpos;
        }
        int64_t len = max_bytes;
        if (b.size > max_bytes) {
            if (!min_one) {
                st_file_release(f);
                break;
            }
            len = b.size;
        }
        if (len > end - pos) len = end - pos;
        if (len > INT32_MAX) len = INT32_MAX;
        out->file = f; /* the reference moves to the caller */
        out->pos = pos;
        out->len = (int32_t)len;
        break;
    }
    return e;
}

static st_err_t read_to(st_log_t *log, int64_t offset, int32_t max_bytes, int min_one, int to_leo,
                        st_log_read_t *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&log->lock);
    st_err_t e = read_locked(log, offset, max_bytes, min_one,
                             to_leo ? log->leo : log->high_watermark, out);
    pthread_mutex_unlock(&log->lock);
    return e;
}

st_err_t st_log_read(st_log_t *log, int64_t offset, int32_t max_bytes, int min_one,
                     st_log_read_t *out) {
    return read_to(log, offset, max_bytes, min_one, 0, out);
}

st_err_t st_log_read_committed(st_log_t *log, int64_t offset, int32_t max_bytes, int min_one,
                               st_log_read_t *out, int64_t *lso_out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&log->lock);
    int64_t lso = st_log__lso_locked(log);
    st_err_t e;
    /* past the LSO (behind an open transaction) reads nothing yet */
    e = read_locked(log, offset, max_bytes, min_one, lso, out);
    pthread_mutex_unlock(&log->lock);
    *lso_out = lso;
    return e;
}

st_err_t st_log_read_replica(st_log_t *log, int64_t offset, int32_t max_bytes, int min_one,
                             st_log_read_t *out) {
    return read_to(log, offset, max_bytes, min_one, 1, out);
}

st_err_t st_log_replay_step(st_log_t *log, int64_t *pos, int32_t max_bytes, uint8_t **buf,
                            size_t *bufcap, st_log_replay_fn fn, void *arg, int *done) {
    *done = 0;
    st_log_read_t rd;
    st_err_t e = st_log_read_replica(log, *pos, max_bytes, 1, &rd);
    if (e == ST_E_OFFSET_OUT_OF_RANGE && *pos < rd.log_start_offset) {
        *pos = rd.log_start_offset; /* DeleteRecords or retention moved the start */
        return ST_OK;
    }
    if (e == ST_E_OFFSET_OUT_OF_RANGE || (!e && !rd.file)) {
        *done = 1;
        return ST_OK;
    }
    if (e) return e;
    if ((size_t)rd.len > *bufcap) {
        *bufcap = (size_t)rd.len;
        *buf = st_realloc(*buf, *bufcap);
    }
    size_t got = 0;
    e = st_pread_all(rd.file->fd, *buf, (size_t)rd.len, rd.pos, &got);
    st_file_release(rd.file);
    if (e) return e;
    int64_t before = *pos;
    for (size_t at = 0; at + ST_BATCH_HEADER_SIZE <= got;) {
        st_batch_info_t b;
        if (st_batch_header(*buf + at, got - at, &b) || at + (size_t)b.size > got) break;
        if (st_batch_last_offset(&b) >= *pos) fn(&b, *buf + at, arg);
        *pos = st_batch_last_offset(&b) + 1;
        at += (size_t)b.size;
    }
    return *pos == before ? ST_E_CORRUPT : ST_OK;
}

/* ---- timestamps --------------------------------------------------------- */

/* The next batch at or after offset after whose max timestamp is >= ts,
 * read into *buf (lock held).  1 when one was read, 0 when none is left;
 * an error through *e. */
static int next_time_candidate(st_log_t *log, int64_t ts, int64_t after, uint8_t **buf,
                               st_batch_info_t *bi, int64_t *log_start, st_err_t *e) {
    for (int i = 0; !log->offline && !log->closed && i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        if (s->max_timestamp < ts || s->next_offset <= after) continue;
        /* Skip what the time index proves is older than ts: entry (t, rel)
         * means every record up to base+rel has a timestamp <= t. */
        int64_t from = ST_MAX(ST_MAX(s->base_offset, log->log_start_offset), after);
        for (int k = 0; k < s->ntidx && s->tidx[k].ts < ts; k++)
            from = ST_MAX(from, s->base_offset + s->tidx[k].rel + 1);
        int64_t pos;
        st_batch_info_t b;
        st_file_t *f;
        st_err_t ke = st_log__seg_keep(s, ST_SEG_LOG, &f);
        if (ke) {
            *e = failed(log, ke, "open for a time lookup");
            return 0;
        }
        if (st_log__seg_find(s, f, from, &pos, &b)) {
            st_file_release(f);
            continue;
        }
        while (pos < s->size && st_batch_last_offset(&b) < log->high_watermark) {
            if (b.max_timestamp >= ts) {
                *buf = st_realloc(*buf, (size_t)b.size);
                size_t got = 0;
                st_pread_all(f->fd, *buf, (size_t)b.size, pos, &got);
                st_file_release(f);
                if (got != (size_t)b.size) {
                    *e = ST_E_KAFKA_STORAGE_ERROR;
                    return 0;
                }
                *bi = b;
                *log_start = log->log_start_offset;
                return 1;
            }
            pos += b.size;
            uint8_t hdr[ST_BATCH_HEADER_SIZE];
            size_t got = 0;
            if (pos >= s->size) break;
            st_pread_all(f->fd, hdr, sizeof hdr, pos, &got);
            if (st_batch_header(hdr, got, &b)) break;
        }
        st_file_release(f);
    }
    return 0;
}

/* Candidate batches are found under the log's lock, but their records
 * (which may have to be inflated) are read outside it, so a lookup never
 * holds up appends to the partition for longer than a pread. */
st_err_t st_log_offset_for_time(st_log_t *log, int64_t ts, int64_t *offset, int64_t *found_ts,
                                int32_t *epoch) {
    st_err_t e = ST_E_NOT_FOUND;
    uint8_t *buf = NULL;
    int64_t after = INT64_MIN;
    for (;;) {
        st_batch_info_t b;
        int64_t start = 0;
        st_err_t ce = ST_OK;
        pthread_mutex_lock(&log->lock);
        int have = next_time_candidate(log, ts, after, &buf, &b, &start, &ce);
        pthread_mutex_unlock(&log->lock);
        if (ce) {
            e = ce;
            break;
        }
        if (!have) break;
        if (st_batch_first_at_time(buf, b.size, start, ts, offset, found_ts)) {
            *epoch = b.leader_epoch;
            e = ST_OK;
            break;
        }
        after = st_batch_last_offset(&b) + 1;
    }
    free(buf);
    return e;
}

int64_t st_log_max_timestamp(st_log_t *log) {
    int64_t ts = -1;
    pthread_mutex_lock(&log->lock);
    for (int i = 0; i < log->nsegs; i++)
        if (log->segs[i]->max_timestamp > ts) ts = log->segs[i]->max_timestamp;
    pthread_mutex_unlock(&log->lock);
    return ts;
}

int32_t st_log_epoch_for_offset(st_log_t *log, int64_t offset) {
    int32_t epoch = -1;
    pthread_mutex_lock(&log->lock);
    for (int i = 0; i < log->nepochs; i++)
        if (log->epochs[i].start <= offset) epoch = log->epochs[i].epoch;
    pthread_mutex_unlock(&log->lock);
    return epoch;
}

void st_log_end_offset_for_epoch(st_log_t *log, int32_t epoch, int32_t *out_epoch,
                                 int64_t *out_end) {
    pthread_mutex_lock(&log->lock);
    *out_epoch = -1;
    *out_end = -1;
    for (int i = log->nepochs - 1; i >= 0; i--) {
        if (log->epochs[i].epoch > epoch) continue;
        *out_epoch = log->epochs[i].epoch;
        *out_end = i + 1 < log->nepochs ? log->epochs[i + 1].start : log->leo;
        break;
    }
    pthread_mutex_unlock(&log->lock);
}

int32_t st_log_latest_epoch(st_log_t *log) {
    pthread_mutex_lock(&log->lock);
    int32_t epoch = log->nepochs ? log->epochs[log->nepochs - 1].epoch : -1;
    pthread_mutex_unlock(&log->lock);
    return epoch;
}

/* ---- deletion ----------------------------------------------------------- */

/* Drop the first n segments (never the active one).  Lock held. */
static void drop_oldest(st_log_t *log, int n, const char *why) {
    for (int i = 0; i < n; i++) {
        st_segment_t *s = log->segs[i];
        ST_INFO("log", WHAT_FMT ": deleting segment %020lld (%lld bytes): %s", WHAT_ARGS(log),
                (long long)s->base_offset, (long long)s->size, why);
        st_log__seg_unlink(s, log->dir);
        st_log__seg_close(s); /* readers keep their own file references */
    }
    segs_remove_first(log, n);
    if (log->segs[0]->base_offset > log->log_start_offset)
        log->log_start_offset = log->segs[0]->base_offset;
    epoch_truncate_start(log, log->log_start_offset);
    st_log__pstate_start_moved(log);
}

st_err_t st_log_delete_records(st_log_t *log, int64_t offset, int64_t *low_out) {
    st_err_t e = ST_OK;
    pthread_mutex_lock(&log->lock);
    if (log->offline || log->closed) {
        e = log->closed ? ST_E_NOT_LEADER_OR_FOLLOWER : ST_E_KAFKA_STORAGE_ERROR;
        goto out;
    }
    if (offset == -1) offset = log->high_watermark;
    if (offset < 0 || offset > log->high_watermark) {
        e = ST_E_OFFSET_OUT_OF_RANGE;
        goto out;
    }
    if (offset > log->log_start_offset) log->log_start_offset = offset;
    int n = 0;
    while (n < log->nsegs - 1 && log->segs[n + 1]->base_offset <= log->log_start_offset) n++;
    if (n) drop_oldest(log, n, "below the log start offset (DeleteRecords)");
    else epoch_truncate_start(log, log->log_start_offset);
    st_log__pstate_start_moved(log);
    *low_out = log->log_start_offset;
out:
    pthread_mutex_unlock(&log->lock);
    if (!e) st_log__epoch_checkpoint(log); /* on the request's worker, without the lock */
    return e;
}

/* Tiered with uploads on: local segments go by the local bounds, once in
 * the bucket. */
static int local_bounds(const st_log_t *log) { return log->cfg.remote && !log->cfg.remote_copy_disable; }

/* How many of the oldest closed segments a time or size bound lets go:
 * time by their newest record, size while the rest still fits.  Only the
 * first `eligible` segments may go. */
static int expired_prefix(st_log_t *log, int64_t now_ms, int64_t ms, int64_t bytes, int eligible,
                          const char **why) {
    int n = 0;
    if (ms >= 0) {
        while (n < eligible && log->segs[n]->max_timestamp >= 0 &&
               now_ms - log->segs[n]->max_timestamp > ms)
            n++;
        if (n) *why = local_bounds(log) ? "older than local.retention.ms" : "older than retention.ms";
    }
    if (bytes >= 0) {
        int64_t total = 0;
        for (int i = n; i < log->nsegs; i++) total += log->segs[i]->size;
        int m = n;
        while (m < eligible && total - log->segs[m]->size >= bytes) {
            total -= log->segs[m]->size;
            m++;
        }
        if (m > n) {
            n = m;
            *why = local_bounds(log) ? "beyond local.retention.bytes" : "beyond retention.bytes";
        }
    }
    return n;
}

int st_log_apply_retention(st_log_t *log, int64_t now_ms) {
    int n = 0;
    pthread_mutex_lock(&log->lock);
    if (log->offline || log->closed || !log->cfg.delete_policy) goto out;
    const char *why = NULL;
    if (local_bounds(log)) {
        /* Tiered: only segments the bucket already holds may go. */
        int eligible = 0;
        while (eligible < log->nsegs - 1 && log->segs[eligible]->next_offset <= log->remote_end)
            eligible++;
        n = expired_prefix(log, now_ms, log->cfg.local_retention_ms, log->cfg.local_retention_bytes,
                           eligible, &why);
    } else {
        n = expired_prefix(log, now_ms, log->cfg.retention_ms, log->cfg.retention_bytes,
                           log->nsegs - 1, &why);
    }
    /* segments wholly below the log start offset */
    while (n < log->nsegs - 1 && log->segs[n + 1]->base_offset <= log->log_start_offset) {
        n++;
        if (!why) why = "below the log start offset";
    }
    if (n) drop_oldest(log, n, why);
out:
    pthread_mutex_unlock(&log->lock);
    if (n) st_log__epoch_checkpoint(log); /* on the janitor, without the lock */
    return n;
}

st_err_t st_log_roll(st_log_t *log) {
    pthread_mutex_lock(&log->lock);
    int roll = !log->closed && !log->offline && active_seg(log)->size;
    st_err_t e = log->closed || log->offline ? ST_E_KAFKA_STORAGE_ERROR
                 : roll ? roll_locked(log) : ST_OK;
    pthread_mutex_unlock(&log->lock);
    if (roll && !e) st_logmgr_request_flush(log->mgr, log);
    return e;
}

/* ---- flush -------------------------------------------------------------- */

/* The files one flush round syncs, at most: whole segments only. */
#define FLUSH_FILES_MAX 64

/* One round of st_log_flush: under the lock, keep the files holding what
 * is not yet durable, oldest segment first (the .log of every segment
 * reaching past flushed_offset, the index files of segments a roll closed
 * and nobody synced yet); without it, write the epoch checkpoint, sync the
 * files and, after a roll, the directory; then raise flushed_offset to
 * what was covered.  *more: the round stopped at FLUSH_FILES_MAX. */
static st_err_t flush_round(st_log_t *log, int *more) {
    st_file_t *files[FLUSH_FILES_MAX];
    uint64_t idx_ids[FLUSH_FILES_MAX], txn_ids[FLUSH_FILES_MAX];
    int64_t txn_bases[FLUSH_FILES_MAX];
    int txn_gens[FLUSH_FILES_MAX];
    int nfiles = 0, nidx = 0, ntxn = 0;
    st_err_t e = ST_OK;
    st_fcache_t *fc = st_log__mgr_fcache(log->mgr);
    *more = 0;
    pthread_mutex_lock(&log->lock);
    int64_t target = log->leo, truncations = log->truncations, rolls = log->rolls;
    int64_t rolls_synced = log->rolls_synced;
    int idx_pending = 0;
    for (int i = 0; i < log->nsegs - 1 && !idx_pending; i++)
        idx_pending = log->segs[i]->indexes_unsynced;
    if (log->offline || log->closed ||
        (target <= log->flushed_offset && rolls == rolls_synced && !idx_pending &&
         log->epoch_gen == __atomic_load_n(&log->epoch_gen_written, __ATOMIC_RELAXED))) {
        /* epoch_gen_written read without its lock: a stale value only
         * costs a round that writes nothing */
        e = log->offline ? ST_E_KAFKA_STORAGE_ERROR : ST_OK;
        if (!log->offline) log->last_flush_ms = st_mono_ms();
        pthread_mutex_unlock(&log->lock);
        return e;
    }
    for (int i = 0; i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        int want_log = s->next_offset > log->flushed_offset;
        int want_idx = i < log->nsegs - 1 && s->indexes_unsynced;
        if (!want_log && !want_idx) continue;
        if (nfiles + want_log + 2 * want_idx > FLUSH_FILES_MAX) {
            /* the rest next round; this one covers what lies before s */
            if (s->base_offset < target) target = s->base_offset;
            *more = 1;
            break;
        }
        if (want_log && !e && !(e = st_log__seg_keep(s, ST_SEG_LOG, &files[nfiles]))) nfiles++;
        if (want_log && s->txn_unsynced) {
            /* the aborted transactions of what this round makes durable */
            txn_ids[ntxn] = s->id;
            txn_gens[ntxn] = s->txn_unsynced;
            txn_bases[ntxn++] = s->base_offset;
        }
        if (want_idx && !e && !(e = st_log__seg_keep(s, ST_SEG_INDEX, &files[nfiles]))) nfiles++;
        if (want_idx && !e && !(e = st_log__seg_keep(s, ST_SEG_TIMEINDEX, &files[nfiles]))) {
            nfiles++;
            idx_ids[nidx++] = s->id;
        }
        if (e) break;
    }
    if (e) {
        e = failed(log, e, "open for an fsync");
        pthread_mutex_unlock(&log->lock);
        for (int i = 0; i < nfiles; i++) st_file_release(files[i]);
        return e;
    }
    st_segment_t *act = active_seg(log);
    if (act->dirty_index) st_log__seg_write_indexes(act, 0);
    char snap[4096];
    int64_t snap_at = st_log__pstate_sync_target(log, snap, sizeof snap);
    pthread_mutex_unlock(&log->lock);

    /* The epochs of everything below target are in the file before
     * flushed_offset says target. */
    e = st_log__epoch_checkpoint(log);
    for (int i = 0; i < nfiles; i++) {
        if (!e) e = st_log__sync(fc, files[i]->fd, 1);
        st_file_release(files[i]);
    }
    for (int i = 0; i < ntxn && !e; i++) {
        char path[4096];
        st_log__seg_path(log->dir, txn_bases[i], ".txnindex", path, sizeof path);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            e = st_log__sync(fc, fd, 1);
            close(fd);
        }
    }
    if (!e && snap_at >= 0) {
        /* the roll's producer snapshot (gone already when a truncation
         * or retention deleted it) */
        int fd = open(snap, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            e = st_log__sync(fc, fd, 1);
            close(fd);
        }
    }
    if (!e && rolls != rolls_synced) e = st_log__sync_dir(fc, log->dir);
    int64_t flush_due = -1;
    pthread_mutex_lock(&log->lock);
    if (e) {
        go_offline(log, e, "fsync");
    } else {
        /* a truncation meanwhile may have put unsynced batches below target */
        if (target > log->flushed_offset && truncations == log->truncations)
            log->flushed_offset = target;
        if (rolls > log->rolls_synced) log->rolls_synced = rolls;
        if (snap_at >= 0) st_log__pstate_synced(log, snap_at);
        for (int i = 0; i < log->nsegs; i++)
            for (int k = 0; k < nidx; k++)
                if (log->segs[i]->id == idx_ids[k]) log->segs[i]->indexes_unsynced = 0;
        for (int i = 0; i < log->nsegs; i++)
            for (int k = 0; k < ntxn; k++)
                if (log->segs[i]->id == txn_ids[k] && log->segs[i]->txn_unsynced == txn_gens[k])
                    log->segs[i]->txn_unsynced = 0; /* none written since */
        log->last_flush_ms = st_mono_ms();
        /* appended meanwhile: the next flush.ms deadline starts now */
        if (log->cfg.flush_ms > 0 && log->flushed_offset < log->leo)
            flush_due = log->last_flush_ms + log->cfg.flush_ms;
    }
    pthread_mutex_unlock(&log->lock);
    if (flush_due >= 0) st_log__mgr_flush_due(log->mgr, flush_due);
    if (!e) notify(log);
    return e ? ST_E_KAFKA_STORAGE_ERROR : ST_OK;
}

/* Sync everything appended so far.  On the flusher (or a caller that may
 * wait for the disk), never with the log's lock held. */
st_err_t st_log_flush(st_log_t *log) {
    int more = 1;
    st_err_t e = ST_OK;
    while (!e && more) e = flush_round(log, &more);
    return e;
}

/* The monotonic time at which flush.ms wants this log synced; INT64_MAX
 * when it has nothing unsynced or no flush.ms. */
int64_t st_log__flush_due(st_log_t *log) {
    int64_t due = INT64_MAX;
    pthread_mutex_lock(&log->lock);
    if (log->cfg.flush_ms > 0 && !log->offline && !log->closed && log->flushed_offset < log->leo)
        due = log->last_flush_ms + log->cfg.flush_ms;
    pthread_mutex_unlock(&log->lock);
    return due;
}

/* ---- tiered storage ------------------------------------------------------ */

int st_log_closed_segments(st_log_t *log, int64_t from, st_log_segment_info_t *out, int max) {
    int n = 0;
    pthread_mutex_lock(&log->lock);
    for (int i = 0; i < log->nsegs - 1 && n < max && !log->closed && !log->offline; i++) {
        st_segment_t *s = log->segs[i];
        if (s->base_offset < from || s->size == 0) continue;
        if (s->next_offset > log->high_watermark) break;
        /* A rolled segment is offered once the flusher synced it: a crash
         * cannot then cut locally what the bucket already holds. */
        if (s->next_offset > log->flushed_offset) break;
        st_log_segment_info_t *o = &out[n++];
        memset(o, 0, sizeof *o);
        o->base_offset = s->base_offset;
        o->last_offset = s->next_offset - 1;
        o->max_timestamp = s->max_timestamp;
        o->size_bytes = s->size;
        st_log__seg_path(log->dir, s->base_offset, ".log", o->log_path, sizeof o->log_path);
        st_log__seg_path(log->dir, s->base_offset, ".index", o->index_path, sizeof o->index_path);
        st_log__seg_path(log->dir, s->base_offset, ".timeindex", o->timeindex_path,
                         sizeof o->timeindex_path);
        st_log__seg_path(log->dir, s->base_offset, ".txnindex", o->txnindex_path,
                         sizeof o->txnindex_path);
        if (access(o->txnindex_path, F_OK) != 0) o->txnindex_path[0] = 0;
        st_log__seg_path(log->dir, s->next_offset, ".snapshot", o->snapshot_path,
                         sizeof o->snapshot_path);
        if (access(o->snapshot_path, F_OK) != 0) o->snapshot_path[0] = 0;
        /* the epochs in force inside [base, next) */
        for (int k = 0; k < log->nepochs && o->nepochs < (int)ST_ARRAY_SIZE(o->epochs); k++) {
            int64_t start = log->epochs[k].start;
            int64_t end = k + 1 < log->nepochs ? log->epochs[k + 1].start : INT64_MAX;
            if (end <= s->base_offset || start >= s->next_offset) continue;
            o->epochs[o->nepochs].epoch = log->epochs[k].epoch;
            o->epochs[o->nepochs].start_offset = ST_MAX(start, s->base_offset);
            o->nepochs++;
        }
    }
    pthread_mutex_unlock(&log->lock);
    return n;
}

void st_log_set_remote_end(st_log_t *log, int64_t remote_end) {
    pthread_mutex_lock(&log->lock);
    log->remote_end = remote_end;
    pthread_mutex_unlock(&log->lock);
}

int64_t st_log_bytes_above(st_log_t *log, int64_t offset) {
    int64_t n = 0;
    pthread_mutex_lock(&log->lock);
    for (int i = 0; i < log->nsegs; i++)
        if (log->segs[i]->next_offset > offset) n += log->segs[i]->size;
    pthread_mutex_unlock(&log->lock);
    return n;
}

/* st_log_truncate_fully under log->lock.  keep_aborted: the aborted
 * transactions below offset stay known (the bucket serves their offsets
 * still: a read replica's list comes from it). */
static st_err_t truncate_fully_locked(st_log_t *log, int64_t offset, int keep_aborted) {
    if (log->closed || log->offline) return ST_E_KAFKA_STORAGE_ERROR;
    /* an empty log moving up (a read replica following its source) drops nothing */
    ST_LOG(log->leo > log->log_start_offset ? ST_LOG_WARN : ST_LOG_INFO, "log",
           WHAT_FMT ": local log [%lld, %lld) is behind the bucket (or a snapshot); starting it "
           "empty at %lld", WHAT_ARGS(log), (long long)log->log_start_offset, (long long)log->leo,
           (long long)offset);
    log->truncations++;
    for (int i = 0; i < log->nsegs; i++) {
        st_log__seg_unlink(log->segs[i], log->dir);
        st_log__seg_close(log->segs[i]); /* readers keep their own file references */
    }
    log->nsegs = 0;
    st_segment_t *s;
    st_err_t e = st_log__seg_open(st_log__mgr_fcache(log->mgr), log->dir, offset, 1, &s);
    if (e) {
        log->offline = 1;
        return e;
    }
    segs_push(log, s);
    log->log_start_offset = log->leo = log->high_watermark = log->flushed_offset = offset;
    st_log__epoch_truncate_from(log, 0);
    int kept = 0; /* sorted by last offset */
    while (keep_aborted && kept < log->naborted && log->aborted[kept].last_offset < offset) kept++;
    st_log__pstate_reset(log); /* Kafka's truncateFullyAndStartAt */
    log->naborted = kept;
    return ST_OK;
}

/* After a truncation in full: the removals and the new segment are
 * durable before this returns, but no append waits for it (the lock is
 * free); the recovery and log-start points on disk come down with it
 * (st_log_truncate_to). */
static void truncated_fully(st_log_t *log) {
    st_log__sync_dir(st_log__mgr_fcache(log->mgr), log->dir);
    st_log__epoch_checkpoint(log);
    st_logmgr_checkpoint(log->mgr);
}

st_err_t st_log_truncate_fully(st_log_t *log, int64_t offset) {
    pthread_mutex_lock(&log->lock);
    st_err_t e = truncate_fully_locked(log, offset, 0);
    pthread_mutex_unlock(&log->lock);
    if (!e) truncated_fully(log);
    return e;
}

st_err_t st_log_follow_remote(st_log_t *log, int64_t offset, const void *snap, size_t len) {
    pthread_mutex_lock(&log->lock);
    st_err_t e = offset > log->leo && log->leo == log->log_start_offset
                     ? truncate_fully_locked(log, offset, 1)
                     : ST_E_INVAL;
    const char *why = NULL;
    st_err_t se = !e && snap ? st_log__pstate_install(log, offset, snap, len, &why) : ST_OK;
    pthread_mutex_unlock(&log->lock);
    if (!e) truncated_fully(log);
    if (se)
        ST_WARN("log", WHAT_FMT ": the producer snapshot for offset %lld is not used (%s): "
                "transactions open there are not known", WHAT_ARGS(log), (long long)offset,
                why ? why : st_err_msg(se));
    return e;
}

st_err_t st_log_truncate_to(st_log_t *log, int64_t offset) {
    st_err_t e = ST_OK;
    int removed = 0, lowered = 0;
    pthread_mutex_lock(&log->lock);
    if (log->closed || log->offline) {
        e = log->closed ? ST_E_NOT_LEADER_OR_FOLLOWER : ST_E_KAFKA_STORAGE_ERROR;
        goto out;
    }
    if (offset >= log->leo) goto out;
    if (offset < log->log_start_offset) {
        e = ST_E_OFFSET_OUT_OF_RANGE;
        goto out;
    }
    int64_t old_leo = log->leo;
    int i = seg_for_offset(log, offset);
    removed = log->nsegs - 1 - i;
    while (log->nsegs - 1 > i) {
        st_segment_t *s = log->segs[--log->nsegs];
        st_log__seg_unlink(s, log->dir);
        st_log__seg_close(s); /* readers keep their own file references */
    }
    log->truncations++;
    /* The cut is synced here, under the lock (with the cleaner's swap, the
     * only fsyncs left under it).
     * A truncation comes from the replica fetcher or the Raft (a follower,
     * or a leader that lost its leadership), never from a produce, which a
     * follower refuses before it reaches the log; and the cut must be on
     * disk before the data that replaces it, or a crash could bring back
     * batches of a lost epoch above the recovery point. */
    e = st_log__seg_truncate(log->segs[i], offset, log->cfg.index_interval_bytes);
    if (e) {
        go_offline(log, e, "truncation");
        e = ST_E_KAFKA_STORAGE_ERROR;
        goto out;
    }
    log->leo = active_seg(log)->next_offset;
    if (log->high_watermark > log->leo) log->high_watermark = log->leo;
    lowered = log->flushed_offset > log->leo;
    if (lowered) log->flushed_offset = log->leo;
    st_log__epoch_truncate_from(log, log->leo);
    /* Kafka's truncateAndReload: the newest snapshot at or below the new
     * end, then the batches after it (at most a segment's headers). */
    st_log__pstate_truncated(log);
    ST_INFO("log", WHAT_FMT ": truncated to offset %lld (was %lld, %d segments removed)",
            WHAT_ARGS(log), (long long)log->leo, (long long)old_leo, removed);
out:
    pthread_mutex_unlock(&log->lock);
    if (!e && removed) st_log__sync_dir(st_log__mgr_fcache(log->mgr), log->dir);
    if (!e) st_log__epoch_checkpoint(log); /* the truncating thread, without the lock */
    /* The recovery point on disk may lie above the cut: bring it down
     * before the caller appends what replaces the cut (Kafka's
     * LogManager.truncateTo checkpoints the dir's recovery points), or
     * after a crash the reopen would trust the new, unsynced segments
     * below it without reading them. */
    if (!e && lowered) st_logmgr_checkpoint(log->mgr);
    return e;
}

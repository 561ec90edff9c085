/*
 * txn.c - a partition's transactions (KIP-98): which producers have a
 * transaction open and from which offset, the last stable offset, and the
 * aborted transactions with their .txnindex files (Kafka's
 * ProducerStateManager ongoing transactions and TransactionIndex).
 *
 * Lock: everything here runs with log->lock held (or before the log is
 * shared).  The open transaction of a producer is its producer state
 * entry's txn_first_offset, so it is snapshotted and replayed with the
 * rest of that state.
 *
 * <20-digit base offset>.txnindex, one entry per aborted transaction whose
 * abort marker lies in that segment, 34 bytes, big-endian:
 *
 *   0 version int16 (0)  2 producer id int64  10 first offset int64
 *   18 last offset int64 (the marker)  26 last stable offset int64
 *
 * Entries are appended as markers are written, without an fsync: a crash
 * that loses some costs nothing, since the replay after it re-derives the
 * entries of every batch it replays and writes those segments' files
 * again.
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define WHAT_FMT "%s-%d"
#define WHAT_ARGS(log) (log)->topic, (int)(log)->partition

#define TXN_ENTRY 34

/* ---- the marker ------------------------------------------------------------ */

typedef struct marker_read {
    int type;
    int32_t coordinator_epoch;
} marker_read_t;

static int marker_record(const st_record_t *r, void *arg) {
    marker_read_t *m = arg;
    if (r->key_len >= 4) m->type = (int16_t)st_be16_get(r->key + 2);
    if (r->value_len >= 6) m->coordinator_epoch = (int32_t)st_be32_get(r->value + 2);
    return 1; /* the first record is the marker */
}

int st_batch_control_type(const uint8_t *batch, int32_t size, int32_t *coordinator_epoch) {
    marker_read_t m = {-1, -1};
    st_batch_foreach_record(batch, size, marker_record, &m);
    if (coordinator_epoch) *coordinator_epoch = m.coordinator_epoch;
    return m.type == ST_CONTROL_ABORT || m.type == ST_CONTROL_COMMIT ? m.type : -1;
}

/* ---- the index files --------------------------------------------------------- */

static void txn_path(const st_log_t *log, int64_t base, char *out, size_t n) {
    st_log__seg_path(log->dir, base, ".txnindex", out, n);
}

static void entry_encode(const st_log_aborted_txn_t *a, uint8_t *p) {
    st_be16_put(p, 0);
    st_be64_put(p + 2, (uint64_t)a->producer_id);
    st_be64_put(p + 10, (uint64_t)a->first_offset);
    st_be64_put(p + 18, (uint64_t)a->last_offset);
    st_be64_put(p + 26, (uint64_t)a->last_stable_offset);
}

/* The segment holding offset (the last one whose base is <= it). */
static st_segment_t *seg_of(st_log_t *log, int64_t offset) {
    st_segment_t *found = NULL;
    for (int i = 0; i < log->nsegs; i++)
        if (log->segs[i]->base_offset <= offset) found = log->segs[i];
    return found;
}

static void file_append(st_log_t *log, const st_log_aborted_txn_t *a) {
    st_segment_t *s = seg_of(log, a->last_offset);
    if (!s) return;
    char path[4096];
    uint8_t buf[TXN_ENTRY];
    txn_path(log, s->base_offset, path, sizeof path);
    entry_encode(a, buf);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    st_err_t e = ST_OK;
    off_t end = fd < 0 ? -1 : lseek(fd, 0, SEEK_END);
    if (fd < 0 || end < 0) e = st_err_from_errno(errno);
    else e = st_pwrite_all(fd, buf, sizeof buf, (int64_t)(end - end % TXN_ENTRY));
    if (fd >= 0) close(fd);
    if (!e) s->txn_unsynced++;
    if (e)
        ST_LOG_RATELIMITED(ST_LOG_WARN, "log", 10000,
                           WHAT_FMT ": cannot write %020lld.txnindex: %s (a restart replays "
                           "more of the log)",
                           WHAT_ARGS(log), (long long)s->base_offset, st_err_msg(e));
}

/* to_file: also in the marker segment's .txnindex (not while a replay
 * re-derives the entries, nor for entries read from a file or the bucket) */
static void add_aborted(st_log_t *log, const st_log_aborted_txn_t *a, int to_file) {
    if (log->naborted == log->capaborted) {
        log->capaborted = log->capaborted ? log->capaborted * 2 : 8;
        log->aborted = st_realloc(log->aborted, (size_t)log->capaborted * sizeof *log->aborted);
    }
    log->aborted[log->naborted++] = *a;
    if (to_file) file_append(log, a);
}

void st_log__txn_forget(st_log_t *log, const int64_t *marker_offsets, int n) {
    int k = 0;
    for (int i = 0; i < log->naborted; i++) {
        int gone = 0;
        for (int j = 0; j < n && !gone; j++) gone = log->aborted[i].last_offset == marker_offsets[j];
        if (!gone) log->aborted[k++] = log->aborted[i];
    }
    log->naborted = k;
}

/* Rewrite the .txnindex of segment i from memory (none when empty). */
void st_log__txn_rewrite_seg(st_log_t *log, int i) {
    st_segment_t *s = log->segs[i];
    int64_t end = i + 1 < log->nsegs ? log->segs[i + 1]->base_offset : INT64_MAX;
    char path[4096];
    txn_path(log, s->base_offset, path, sizeof path);
    st_buf_t b;
    st_buf_init(&b);
    for (int k = 0; k < log->naborted; k++) {
        const st_log_aborted_txn_t *a = &log->aborted[k];
        if (a->last_offset < s->base_offset || a->last_offset >= end) continue;
        uint8_t buf[TXN_ENTRY];
        entry_encode(a, buf);
        st_buf_put(&b, buf, sizeof buf);
    }
    if (!b.len) {
        unlink(path);
    } else {
        /* no fsync (this runs under the log's lock): a file lost by a
         * crash is derived again by the replay after it */
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        st_err_t e = fd < 0 ? st_err_from_errno(errno) : st_pwrite_all(fd, b.data, b.len, 0);
        if (fd >= 0 && close(fd) != 0 && !e) e = st_err_from_errno(errno);
        if (!e && rename(tmp, path) != 0) e = st_err_from_errno(errno);
        if (e) unlink(tmp);
        else s->txn_unsynced++;
        if (e)
            ST_WARN("log", WHAT_FMT ": cannot write %020lld.txnindex: %s", WHAT_ARGS(log),
                    (long long)s->base_offset, st_err_msg(e));
    }
    st_buf_fini(&b);
}

static int cmp_last(const void *x, const void *y) {
    const st_log_aborted_txn_t *a = x, *b = y;
    return a->last_offset < b->last_offset ? -1 : a->last_offset > b->last_offset;
}

void st_log__txn_load(st_log_t *log) {
    log->naborted = 0;
    for (int i = 0; i < log->nsegs; i++) {
        char path[4096], *data = NULL;
        size_t len = 0;
        txn_path(log, log->segs[i]->base_offset, path, sizeof path);
        if (st_read_file(path, &data, &len)) continue; /* none: no abort there */
        for (size_t pos = 0; pos + TXN_ENTRY <= len; pos += TXN_ENTRY) {
            const uint8_t *p = (const uint8_t *)data + pos;
            if (st_be16_get(p) != 0) break;
            st_log_aborted_txn_t a = {(int64_t)st_be64_get(p + 2), (int64_t)st_be64_get(p + 10),
                                      (int64_t)st_be64_get(p + 18), (int64_t)st_be64_get(p + 26)};
            if (a.last_offset < log->log_start_offset || a.first_offset > a.last_offset) continue;
            add_aborted(log, &a, 0);
        }
        free(data);
    }
    if (log->naborted > 1) qsort(log->aborted, (size_t)log->naborted, sizeof *log->aborted, cmp_last);
}

void st_log__txn_replay_begin(st_log_t *log, int64_t from) {
    while (log->naborted && log->aborted[log->naborted - 1].last_offset >= from) log->naborted--;
    log->txn_replaying = 1;
}

void st_log__txn_replay_end(st_log_t *log, int64_t from) {
    log->txn_replaying = 0;
    for (int i = 0; i < log->nsegs; i++) {
        int64_t end = i + 1 < log->nsegs ? log->segs[i + 1]->base_offset : INT64_MAX;
        if (end > from) st_log__txn_rewrite_seg(log, i);
    }
}

void st_log__txn_start_moved(st_log_t *log) {
    /* a tiered log keeps what the bucket still serves; the rest goes with
     * the segments below the log start */
    int64_t keep_from = log->cfg.remote ? 0 : log->log_start_offset;
    int k = 0;
    while (k < log->naborted && log->aborted[k].last_offset < keep_from) k++;
    if (!k) return;
    memmove(log->aborted, log->aborted + k, (size_t)(log->naborted - k) * sizeof *log->aborted);
    log->naborted -= k;
}

void st_log__txn_reset(st_log_t *log) { log->naborted = 0; }

void st_log__txn_free(st_log_t *log) {
    free(log->guards);
    log->guards = NULL;
    log->nguards = log->capguards = 0;
    free(log->aborted);
    log->aborted = NULL;
    log->naborted = log->capaborted = 0;
}

/* ---- open transactions and the LSO -------------------------------------------- */

/* The first offset of the oldest open transaction, other than pid's
 * (-1: none other); INT64_MAX when none is open at all. */
static int64_t first_open(const st_log_t *log, int64_t except_pid) {
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < log->pstate.cap; i++) {
        const st_pstate_entry_t *e = &log->pstate.slots[i];
        if (e->producer_id < 0 || e->producer_id == except_pid || e->txn_first_offset < 0) continue;
        first = ST_MIN(first, e->txn_first_offset);
    }
    return first;
}

int64_t st_log__lso_locked(st_log_t *log) {
    return ST_MIN(first_open(log, -1), log->high_watermark);
}

/* ---- verification guards (KIP-890) --------------------------------------------- */

static int guard_at(const st_log_t *log, int64_t pid) {
    for (int i = 0; i < log->nguards; i++)
        if (log->guards[i].producer_id == pid) return i;
    return -1;
}

static void guard_drop(st_log_t *log, int64_t pid) {
    int i = log->nguards ? guard_at(log, pid) : -1;
    if (i >= 0) log->guards[i] = log->guards[--log->nguards];
}

/* Guards of verifications that never came to an append stay until their
 * producer's next transaction or marker; past this many, the oldest half
 * goes (their appends, if any still come, get INVALID_TXN_STATE). */
#define MAX_GUARDS 65536

int64_t st_log_txn_verify_begin(st_log_t *log, int64_t pid) {
    pthread_mutex_lock(&log->lock);
    const st_pstate_entry_t *e = st_log__pstate_lookup(&log->pstate, pid);
    int64_t g = 0;
    if (!e || e->txn_first_offset < 0) {
        int i = guard_at(log, pid);
        if (i >= 0) {
            g = log->guards[i].guard;
        } else {
            if (log->nguards == MAX_GUARDS) {
                log->nguards /= 2;
                memmove(log->guards, log->guards + log->nguards,
                        sizeof *log->guards * (size_t)log->nguards);
            }
            if (log->nguards == log->capguards) {
                log->capguards = log->capguards ? log->capguards * 2 : 8;
                log->guards = st_realloc(log->guards, sizeof *log->guards * (size_t)log->capguards);
            }
            g = ++log->next_guard;
            log->guards[log->nguards++] = (st_log_guard_t){pid, g};
        }
    }
    pthread_mutex_unlock(&log->lock);
    return g;
}

/* ---- open transactions, markers -------------------------------------------------- */

void st_log__txn_apply(st_log_t *log, const st_batch_info_t *b, const uint8_t *bytes, int fd,
                       int64_t pos) {
    if (b->producer_id < 0 || !(b->attributes & ST_ATTR_TRANSACTIONAL)) return;
    st_pstate_entry_t *e = st_log__pstate_lookup(&log->pstate, b->producer_id);
    if (!e) return; /* the producer state took every batch with an id */
    if (log->nguards) guard_drop(log, b->producer_id); /* begun, or ended by a marker */
    if (!(b->attributes & ST_ATTR_CONTROL)) {
        if (e->txn_first_offset < 0) e->txn_first_offset = b->base_offset;
        return;
    }
    uint8_t small[512];
    uint8_t *heap = NULL;
    if (!bytes) {
        /* a replay reads headers only: fetch the (small) marker batch */
        uint8_t *dst = (size_t)b->size <= sizeof small ? small : (heap = st_malloc((size_t)b->size));
        size_t got = 0;
        if (fd < 0 || st_pread_all(fd, dst, (size_t)b->size, pos, &got) || got != (size_t)b->size) {
            ST_WARN("log", WHAT_FMT ": marker batch at offset %lld unreadable; its transaction "
                    "stays open", WHAT_ARGS(log), (long long)b->base_offset);
            free(heap);
            return;
        }
        bytes = dst;
    }
    int32_t cepoch = -1;
    int type = st_batch_control_type(bytes, b->size, &cepoch);
    free(heap);
    if (type < 0) return;
    if (type == ST_CONTROL_ABORT && e->txn_first_offset >= 0) {
        int64_t other = first_open(log, b->producer_id);
        st_log_aborted_txn_t a = {b->producer_id, e->txn_first_offset, b->base_offset,
                                  other == INT64_MAX ? b->base_offset + 1 : other};
        add_aborted(log, &a, !log->txn_replaying);
    }
    e->txn_first_offset = -1;
    if (cepoch >= 0) e->coordinator_epoch = cepoch;
}

void st_log__txn_apply_all(st_log_t *log, const uint8_t *records, size_t len) {
    for (size_t pos = 0; pos + ST_BATCH_HEADER_SIZE <= len;) {
        st_batch_info_t b;
        if (st_batch_header(records + pos, len - pos, &b)) break;
        st_log__txn_apply(log, &b, records + pos, -1, 0);
        pos += (size_t)b.size;
    }
}

/* Kafka's ProducerAppendInfo checks of the transaction state, client
 * batches and markers alike. */
st_err_t st_log__txn_check(st_log_t *log, const st_batch_info_t *b, const uint8_t *bytes) {
    if (b->producer_id < 0) return ST_OK;
    const st_pstate_entry_t *e = st_log__pstate_lookup(&log->pstate, b->producer_id);
    int txn = (b->attributes & ST_ATTR_TRANSACTIONAL) != 0;
    if (b->attributes & ST_ATTR_CONTROL) {
        int32_t cepoch = -1;
        if (st_batch_control_type(bytes, b->size, &cepoch) < 0) return ST_E_INVALID_RECORD;
        if (e && e->coordinator_epoch >= 0 && cepoch < e->coordinator_epoch) {
            ST_LOG_RATELIMITED(ST_LOG_WARN, "log", 10000,
                               WHAT_FMT ": marker of producer %lld refused: coordinator epoch "
                               "%d is older than %d: TRANSACTION_COORDINATOR_FENCED",
                               WHAT_ARGS(log), (long long)b->producer_id, (int)cepoch,
                               (int)e->coordinator_epoch);
            return ST_E_TRANSACTION_COORDINATOR_FENCED;
        }
        return ST_OK;
    }
    if (!txn && e && e->txn_first_offset >= 0 && b->producer_epoch == e->epoch) {
        ST_LOG_RATELIMITED(ST_LOG_WARN, "log", 10000,
                           WHAT_FMT ": non-transactional batch of producer %lld refused: its "
                           "transaction from offset %lld is open: INVALID_TXN_STATE",
                           WHAT_ARGS(log), (long long)b->producer_id,
                           (long long)e->txn_first_offset);
        return ST_E_INVALID_TXN_STATE;
    }
    /* KIP-890: a transaction begins here only as its coordinator verified
     * it, with no marker of the producer written since */
    if (txn && log->append_guard != ST_LOG_UNVERIFIED && !(e && e->txn_first_offset >= 0)) {
        int i = log->append_guard > 0 ? guard_at(log, b->producer_id) : -1;
        if (i < 0 || log->guards[i].guard != log->append_guard) {
            ST_LOG_RATELIMITED(ST_LOG_WARN, "log", 10000,
                               WHAT_FMT ": transactional batch of producer %lld epoch %d "
                               "refused: %s: INVALID_TXN_STATE",
                               WHAT_ARGS(log), (long long)b->producer_id, (int)b->producer_epoch,
                               log->append_guard > 0
                                   ? "a marker of the producer was written while its "
                                     "transaction was being verified"
                                   : "its transaction here ended before the append");
            return ST_E_INVALID_TXN_STATE;
        }
    }
    return ST_OK;
}

/* ---- public -------------------------------------------------------------------- */

int64_t st_log_last_stable_offset(st_log_t *log) {
    pthread_mutex_lock(&log->lock);
    int64_t lso = st_log__lso_locked(log);
    pthread_mutex_unlock(&log->lock);
    return lso;
}

int st_log_aborted_txns(st_log_t *log, int64_t from, int64_t upper, st_log_aborted_txn_t *out,
                        int max) {
    int n = 0;
    pthread_mutex_lock(&log->lock);
    /* markers ascend: skip those below from by bisection */
    int lo = 0, hi = log->naborted;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (log->aborted[mid].last_offset < from) lo = mid + 1;
        else hi = mid;
    }
    for (int k = lo; k < log->naborted; k++) {
        const st_log_aborted_txn_t *a = &log->aborted[k];
        if (a->first_offset >= upper) continue;
        if (n < max) out[n] = *a;
        n++;
    }
    pthread_mutex_unlock(&log->lock);
    return n;
}

void st_log_add_aborted(st_log_t *log, const st_log_aborted_txn_t *v, int n) {
    pthread_mutex_lock(&log->lock);
    int added = 0;
    for (int i = 0; i < n; i++) {
        int have = 0;
        for (int k = 0; k < log->naborted && !have; k++)
            have = log->aborted[k].producer_id == v[i].producer_id &&
                   log->aborted[k].last_offset == v[i].last_offset;
        if (have) continue;
        add_aborted(log, &v[i], 0); /* in memory only: the bucket holds them */
        added++;
    }
    if (added && log->naborted > 1)
        qsort(log->aborted, (size_t)log->naborted, sizeof *log->aborted, cmp_last);
    pthread_mutex_unlock(&log->lock);
}

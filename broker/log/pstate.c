/*
 * pstate.c - a partition's producer state (KIP-98 idempotence): for each
 * producer id its epoch and the metadata of its last 5 batches, checked on
 * a leader's append, rebuilt from the batches on a follower and after a
 * restart, snapshotted at rolls and at a clean close (Kafka's
 * ProducerStateManager and ProducerAppendInfo).
 *
 * Lock: everything here is called with log->lock held (or before the log
 * is shared), so the state changes atomically with the batches it
 * describes.  No fsync is made here on the produce path: a roll's snapshot
 * is written and renamed into place, the flusher syncs it
 * (st_log__pstate_sync_target); only the clean close syncs its own.
 *
 * Invariants: the table describes exactly the batches in [log start, leo)
 * (less what expired); every snapshot file of log->snaps at offset X holds
 * the state of the batches below X, and none lies above the leo (a
 * truncation deletes them before anything is appended again).  A snapshot
 * lost or torn by a crash costs a longer replay, never a wrong state: each
 * is checked (CRC32C, lengths) before it is trusted.
 *
 * <20-digit offset>.snapshot, big-endian (Kafka's format, version 1):
 *
 *   0        2         6        10
 *   +--------+---------+--------+---- count entries of 46 bytes ----+
 *   | ver=1  | crc32c  | count  | entry | entry | ...                |
 *   +--------+---------+--------+------------------------------------+
 *              CRC32C of every byte from offset 6 to the end
 *
 *   entry:  0 producer id       int64
 *           8 epoch             int16
 *          10 last sequence     int32   -1: no batch
 *          14 last offset       int64   -1: no batch
 *          22 offset delta      int32   last offset - first offset of the batch
 *          26 timestamp         int64   the producer's last timestamp
 *          34 coordinator epoch int32
 *          38 txn first offset  int64   -1: no transaction open
 *
 * Only a producer's last batch is in the file (as Kafka): after a restart
 * the older four are known again once the replay or new appends add them.
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define WHAT_FMT "%s-%d"
#define WHAT_ARGS(log) (log)->topic, (int)(log)->partition

#define SNAP_VERSION 1
#define SNAP_HEADER 10 /* version, crc, count */
#define SNAP_ENTRY 46
#define SNAP_CRC_FROM 6

#define DEFAULT_EXPIRATION_MS (24ll * 3600 * 1000) /* producer.id.expiration.ms */

/* ---- sequences ------------------------------------------------------------ */

/* seq + delta, wrapping past INT32_MAX to 0 (Kafka's incrementSequence). */
static int32_t seq_add(int32_t seq, int32_t delta) {
    if (seq > INT32_MAX - delta) return delta - (INT32_MAX - seq) - 1;
    return seq + delta;
}

/* seq - delta, the inverse (Kafka's decrementSequence). */
static int32_t seq_sub(int32_t seq, int32_t delta) {
    if (seq < delta) return INT32_MAX - (delta - seq) + 1;
    return seq - delta;
}

/* next follows last: last + 1, or 0 after INT32_MAX. */
static int in_sequence(int32_t last, int32_t next) {
    return (int64_t)next == (int64_t)last + 1 || (next == 0 && last == INT32_MAX);
}

static int32_t batch_last_seq(const st_batch_info_t *b) {
    return seq_add(b->base_sequence, b->last_offset_delta);
}

/* ---- the table: open addressing, linear probing --------------------------- */

static uint64_t pid_hash(int64_t pid) {
    uint64_t x = (uint64_t)pid;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

void st_log__pstate_init(st_pstate_t *t) { memset(t, 0, sizeof *t); }

void st_log__pstate_fini(st_pstate_t *t) {
    free(t->slots);
    memset(t, 0, sizeof *t);
}

void st_log__pstate_clear(st_pstate_t *t) {
    if (t->cap > 64) { /* give back what a crowd of producers grew */
        st_log__pstate_fini(t);
        return;
    }
    for (size_t i = 0; i < t->cap; i++) t->slots[i].producer_id = -1;
    t->n = 0;
}

st_pstate_entry_t *st_log__pstate_lookup(const st_pstate_t *t, int64_t pid) {
    if (!t->n) return NULL;
    for (size_t at = pid_hash(pid) & (t->cap - 1);; at = (at + 1) & (t->cap - 1)) {
        st_pstate_entry_t *e = &t->slots[at];
        if (e->producer_id == pid) return e;
        if (e->producer_id < 0) return NULL;
    }
}

static void grow(st_pstate_t *t) {
    size_t oldcap = t->cap;
    st_pstate_entry_t *old = t->slots;
    t->cap = oldcap ? oldcap * 2 : 8;
    t->slots = st_malloc(t->cap * sizeof *t->slots);
    for (size_t i = 0; i < t->cap; i++) t->slots[i].producer_id = -1;
    for (size_t i = 0; i < oldcap; i++) {
        if (old[i].producer_id < 0) continue;
        size_t at = pid_hash(old[i].producer_id) & (t->cap - 1);
        while (t->slots[at].producer_id >= 0) at = (at + 1) & (t->cap - 1);
        t->slots[at] = old[i];
    }
    free(old);
}

/* The entry of pid, a new empty one (no epoch, no batch) when absent. */
static st_pstate_entry_t *upsert(st_pstate_t *t, int64_t pid) {
    st_pstate_entry_t *e = st_log__pstate_lookup(t, pid);
    if (e) return e;
    if ((t->n + 1) * 4 > t->cap * 3) grow(t); /* load at most 3/4 */
    size_t at = pid_hash(pid) & (t->cap - 1);
    while (t->slots[at].producer_id >= 0) at = (at + 1) & (t->cap - 1);
    e = &t->slots[at];
    memset(e, 0, sizeof *e);
    e->producer_id = pid;
    e->epoch = -1;
    e->last_timestamp = -1;
    e->coordinator_epoch = -1;
    e->txn_first_offset = -1;
    t->n++;
    return e;
}

/* Remove the entry in slot at, shifting back the entries of its probe
 * run that would otherwise no longer be found (no tombstones). */
static void remove_at(st_pstate_t *t, size_t at) {
    size_t mask = t->cap - 1, hole = at;
    t->slots[hole].producer_id = -1;
    for (size_t i = (hole + 1) & mask; t->slots[i].producer_id >= 0; i = (i + 1) & mask) {
        size_t home = pid_hash(t->slots[i].producer_id) & mask;
        /* i may move to the hole when its home is not in (hole, i] */
        int stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays) continue;
        t->slots[hole] = t->slots[i];
        t->slots[i].producer_id = -1;
        hole = i;
    }
    t->n--;
}

/* Kafka's ProducerStateEntry.addBatch: a new epoch forgets the batches of
 * the old one; at most ST_PSTATE_BATCHES are kept, the oldest goes. */
static void add_batch(st_pstate_entry_t *e, int16_t epoch, int32_t first_seq, int32_t last_seq,
                      int64_t last_offset, int32_t offset_delta, int64_t ts) {
    if (e->epoch != epoch) {
        e->epoch = epoch;
        e->nbatches = 0;
    }
    if (e->nbatches == ST_PSTATE_BATCHES) {
        memmove(e->batches, e->batches + 1, sizeof e->batches[0] * (ST_PSTATE_BATCHES - 1));
        e->nbatches--;
    }
    e->batches[e->nbatches++] = (st_pstate_batch_t){first_seq, last_seq, last_offset, offset_delta, ts};
    e->last_timestamp = ts;
}

/* A transaction marker (a control batch) carries no sequence: it moves
 * the epoch and the last timestamp (Kafka's appendEndTxnMarker).  Its
 * coordinator epoch and the end of the transaction are in its record,
 * which the transaction work reads. */
static void apply_marker(st_pstate_entry_t *e, int16_t epoch, int64_t ts) {
    if (e->epoch != epoch) {
        e->epoch = epoch;
        e->nbatches = 0;
    }
    e->last_timestamp = ts;
}

/* A batch as a follower or a replay sees it: no checks (Kafka's
 * REPLICATION origin), the state follows the log. */
static void apply_replicated(st_pstate_t *t, const st_batch_info_t *b) {
    if (b->producer_id < 0) return;
    st_pstate_entry_t *e = upsert(t, b->producer_id);
    if ((b->attributes & ST_ATTR_CONTROL) || b->base_sequence < 0) {
        apply_marker(e, b->producer_epoch, b->max_timestamp);
        return;
    }
    add_batch(e, b->producer_epoch, b->base_sequence, batch_last_seq(b), st_batch_last_offset(b),
              b->last_offset_delta, b->max_timestamp);
}

void st_log__pstate_apply(st_log_t *log, const uint8_t *records, size_t len) {
    for (size_t pos = 0; pos + ST_BATCH_HEADER_SIZE <= len;) {
        st_batch_info_t b;
        if (st_batch_header(records + pos, len - pos, &b)) break; /* checked by the caller */
        apply_replicated(&log->pstate, &b);
        pos += (size_t)b.size;
    }
}

/* ---- the leader's checks ----------------------------------------------------- */

/* Kafka's UnifiedLog.analyzeAndValidateProducerState with a client origin,
 * batch by batch:
 *   - a duplicate (same epoch, same first and last sequence as one of the
 *     producer's retained batches, in the state before this append) ends
 *     the check: nothing of the append is written, the original's offsets
 *     are answered;
 *   - an epoch below the producer's: INVALID_PRODUCER_EPOCH;
 *   - a new epoch must start at sequence 0, the same epoch continue at the
 *     last sequence + 1; a producer with no state is taken at any sequence
 *     (KIP-360: its state may have expired or gone with retention).
 * A transaction marker the broker writes is held to the epoch only.
 * Later batches of the same append are checked against the state the
 * earlier ones leave (the stage), which st_log__pstate_commit makes the
 * log's once the write succeeded.  Offsets and timestamps are those the
 * append will stamp: base offsets from the leo, lat when LogAppendTime. */
st_err_t st_log__pstate_check(st_log_t *log, const uint8_t *records, size_t len, int64_t lat,
                              st_pstate_t *stage, st_append_info_t *dup) {
    int64_t offset = log->leo;
    for (size_t pos = 0; pos + ST_BATCH_HEADER_SIZE <= len;) {
        st_batch_info_t b;
        if (st_batch_header(records + pos, len - pos, &b)) return ST_E_CORRUPT;
        int64_t base = offset;
        offset += (int64_t)b.last_offset_delta + 1;
        pos += (size_t)b.size;
        if (b.producer_id < 0) continue;
        int32_t last_seq = batch_last_seq(&b);
        const st_pstate_entry_t *cur = st_log__pstate_lookup(&log->pstate, b.producer_id);
        /* a marker, or a coordinator's own transactional write (no
         * sequence): held to the epoch only; never from a client */
        int control = (b.attributes & ST_ATTR_CONTROL) != 0 || b.base_sequence < 0;
        st_err_t te = st_log__txn_check(log, &b, records + pos - (size_t)b.size);
        if (te) return te;
        if (cur && cur->epoch == b.producer_epoch && !control) {
            for (int i = 0; i < cur->nbatches; i++) {
                const st_pstate_batch_t *m = &cur->batches[i];
                if (m->first_seq != b.base_sequence || m->last_seq != last_seq) continue;
                ST_LOG_RATELIMITED(ST_LOG_INFO, "log", 10000,
                                   WHAT_FMT ": duplicate batch of producer %lld epoch %d, "
                                   "sequences %d..%d: answered with its offset %lld",
                                   WHAT_ARGS(log), (long long)b.producer_id, (int)b.producer_epoch,
                                   (int)b.base_sequence, (int)last_seq,
                                   (long long)(m->last_offset - m->offset_delta));
                dup->duplicate = 1;
                dup->base_offset = m->last_offset - m->offset_delta;
                dup->last_offset = m->last_offset;
                dup->log_append_time = log->cfg.log_append_time ? m->max_timestamp : -1;
                dup->log_start_offset = log->log_start_offset;
                return ST_OK;
            }
        }
        const st_pstate_entry_t *staged = st_log__pstate_lookup(stage, b.producer_id);
        if (staged) cur = staged;
        if (cur && b.producer_epoch < cur->epoch) {
            ST_LOG_RATELIMITED(ST_LOG_WARN, "log", 10000,
                               WHAT_FMT ": batch of producer %lld refused: epoch %d is older than "
                               "its current epoch %d (sequences %d..%d): INVALID_PRODUCER_EPOCH",
                               WHAT_ARGS(log), (long long)b.producer_id, (int)b.producer_epoch,
                               (int)cur->epoch, (int)b.base_sequence, (int)last_seq);
            return ST_E_INVALID_PRODUCER_EPOCH;
        }
        if (cur && b.producer_epoch != cur->epoch && b.base_sequence != 0 && !control) {
            ST_LOG_RATELIMITED(ST_LOG_WARN, "log", 10000,
                               WHAT_FMT ": batch of producer %lld refused: its new epoch %d "
                               "(was %d) starts at sequence %d, not 0: OUT_OF_ORDER_SEQUENCE_NUMBER",
                               WHAT_ARGS(log), (long long)b.producer_id, (int)b.producer_epoch,
                               (int)cur->epoch, (int)b.base_sequence);
            return ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER;
        }
        if (cur && b.producer_epoch == cur->epoch && !control) {
            int32_t last = cur->nbatches ? cur->batches[cur->nbatches - 1].last_seq : -1;
            if (!in_sequence(last, b.base_sequence)) {
                ST_LOG_RATELIMITED(ST_LOG_WARN, "log", 10000,
                                   WHAT_FMT ": batch of producer %lld epoch %d refused: sequences "
                                   "%d..%d do not follow its last sequence %d: "
                                   "OUT_OF_ORDER_SEQUENCE_NUMBER",
                                   WHAT_ARGS(log), (long long)b.producer_id,
                                   (int)b.producer_epoch, (int)b.base_sequence, (int)last_seq,
                                   (int)last);
                return ST_E_OUT_OF_ORDER_SEQUENCE_NUMBER;
            }
        }
        st_pstate_entry_t *e = st_log__pstate_lookup(stage, b.producer_id);
        if (!e) {
            const st_pstate_entry_t *was = st_log__pstate_lookup(&log->pstate, b.producer_id);
            e = upsert(stage, b.producer_id);
            if (was) *e = *was;
        }
        if (control)
            apply_marker(e, b.producer_epoch, lat >= 0 ? lat : b.max_timestamp);
        else
            add_batch(e, b.producer_epoch, b.base_sequence, last_seq, base + b.last_offset_delta,
                      b.last_offset_delta, lat >= 0 ? lat : b.max_timestamp);
    }
    return ST_OK;
}

/* The append was written: what it staged becomes the log's state. */
void st_log__pstate_commit(st_log_t *log, const st_pstate_t *stage) {
    for (size_t i = 0; i < stage->cap; i++) {
        const st_pstate_entry_t *s = &stage->slots[i];
        if (s->producer_id < 0) continue;
        *upsert(&log->pstate, s->producer_id) = *s;
    }
}

/* ---- snapshots -------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void snap_path(const st_log_t *log, int64_t offset, char *out, size_t n) {
    st_log__seg_path(log->dir, offset, ".snapshot", out, n);
}

static int cmp_pid(const void *a, const void *b) {
    int64_t x = (*(const st_pstate_entry_t *const *)a)->producer_id;
    int64_t y = (*(const st_pstate_entry_t *const *)b)->producer_id;
    return x < y ? -1 : x > y;
}

/* The table's entries sorted by producer id (malloc'ed; NULL when empty). */
static const st_pstate_entry_t **sorted_entries(const st_pstate_t *t) {
    if (!t->n) return NULL;
    const st_pstate_entry_t **v = st_malloc(t->n * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].producer_id >= 0) v[k++] = &t->slots[i];
    qsort(v, k, sizeof *v, cmp_pid);
    return v;
}

void st_log__pstate_encode(const st_pstate_t *t, st_buf_t *out) {
    const st_pstate_entry_t **v = sorted_entries(t);
    size_t start = out->len;
    st_buf_put_i16(out, SNAP_VERSION);
    st_buf_put_i32(out, 0); /* the CRC, filled below */
    st_buf_put_i32(out, (int32_t)t->n);
    for (size_t i = 0; i < t->n; i++) {
        const st_pstate_entry_t *e = v[i];
        const st_pstate_batch_t *last = e->nbatches ? &e->batches[e->nbatches - 1] : NULL;
        st_buf_put_i64(out, e->producer_id);
        st_buf_put_i16(out, e->epoch);
        st_buf_put_i32(out, last ? last->last_seq : -1);
        st_buf_put_i64(out, last ? last->last_offset : -1);
        st_buf_put_i32(out, last ? last->offset_delta : 0);
        st_buf_put_i64(out, e->last_timestamp);
        st_buf_put_i32(out, e->coordinator_epoch);
        st_buf_put_i64(out, e->txn_first_offset);
    }
    uint8_t *p = out->data + start;
    st_be32_put(p + 2, st_crc32c(0, p + SNAP_CRC_FROM, out->len - start - SNAP_CRC_FROM));
    free(v);
}

static int expired(const st_pstate_entry_t *e, int64_t now_ms, int64_t expiration_ms) {
    return e->txn_first_offset < 0 && now_ms - e->last_timestamp >= expiration_ms;
}

static int64_t expiration_ms(const st_log_t *log) {
    return log->cfg.producer_id_expiration_ms > 0 ? log->cfg.producer_id_expiration_ms
                                                   : DEFAULT_EXPIRATION_MS;
}

/* Decode a snapshot's bytes into t (which is left empty on failure).
 * Every length is checked: a file cut short, grown, or whose CRC does not
 * match is ST_E_CORRUPT, with *why saying which. */
st_err_t st_log__pstate_decode(const uint8_t *p, size_t len, int64_t now_ms, int64_t expiration,
                               st_pstate_t *t, const char **why) {
    st_rd_t rd;
    st_rd_init(&rd, p, len);
    int16_t version = st_rd_i16(&rd);
    uint32_t crc = (uint32_t)st_rd_i32(&rd);
    int32_t count = st_rd_i32(&rd);
    *why = NULL;
    if (rd.err) *why = "shorter than its header";
    else if (version != SNAP_VERSION) *why = "unknown version";
    else if (count < 0 || (size_t)count != st_rd_left(&rd) / SNAP_ENTRY ||
             st_rd_left(&rd) % SNAP_ENTRY)
        *why = "entry count does not match its length";
    else if (crc != st_crc32c(0, p + SNAP_CRC_FROM, len - SNAP_CRC_FROM)) *why = "CRC32C mismatch";
    if (*why) return ST_CORRUPT_BKPT;
    for (int32_t i = 0; i < count; i++) {
        st_pstate_entry_t e;
        memset(&e, 0, sizeof e);
        e.producer_id = st_rd_i64(&rd);
        e.epoch = st_rd_i16(&rd);
        int32_t last_seq = st_rd_i32(&rd);
        int64_t last_offset = st_rd_i64(&rd);
        int32_t delta = st_rd_i32(&rd);
        e.last_timestamp = st_rd_i64(&rd);
        e.coordinator_epoch = st_rd_i32(&rd);
        e.txn_first_offset = st_rd_i64(&rd);
        if (rd.err || e.producer_id < 0 || delta < 0 || st_log__pstate_lookup(t, e.producer_id)) {
            *why = e.producer_id < 0 ? "negative producer id"
                   : delta < 0       ? "negative offset delta"
                                     : "producer id listed twice";
            st_log__pstate_clear(t);
            return ST_CORRUPT_BKPT;
        }
        if (expired(&e, now_ms, expiration)) continue;
        st_pstate_entry_t *to = upsert(t, e.producer_id);
        *to = e;
        if (last_offset >= 0) {
            to->batches[0] = (st_pstate_batch_t){seq_sub(last_seq, delta), last_seq, last_offset,
                                                 delta, e.last_timestamp};
            to->nbatches = 1;
        }
    }
    return ST_OK;
}

static void snaps_insert(st_log_t *log, int64_t offset) {
    int i = log->nsnaps;
    while (i > 0 && log->snaps[i - 1] >= offset) i--;
    if (i < log->nsnaps && log->snaps[i] == offset) return;
    if (log->nsnaps == log->capsnaps) {
        log->capsnaps = log->capsnaps ? log->capsnaps * 2 : 4;
        log->snaps = st_realloc(log->snaps, (size_t)log->capsnaps * sizeof *log->snaps);
    }
    memmove(log->snaps + i + 1, log->snaps + i, (size_t)(log->nsnaps - i) * sizeof *log->snaps);
    log->snaps[i] = offset;
    log->nsnaps++;
}

static void snap_delete_at(st_log_t *log, int i) {
    char path[4096];
    snap_path(log, log->snaps[i], path, sizeof path);
    unlink(path);
    if (log->pstate_snap_unsynced == log->snaps[i]) log->pstate_snap_unsynced = -1;
    memmove(log->snaps + i, log->snaps + i + 1, (size_t)(log->nsnaps - i - 1) * sizeof *log->snaps);
    log->nsnaps--;
}

/* Write the state as the snapshot of offset (the state of the batches
 * below it).  With sync the file is made durable here (the clean close);
 * without, it is only renamed into place and the flusher syncs it.  A
 * failure costs a longer replay after a restart, nothing else: it is
 * reported and the log goes on. */
st_err_t st_log__pstate_snapshot(st_log_t *log, int64_t offset, int sync) {
    char path[4096], tmp[4200];
    st_buf_t b;
    st_buf_init(&b);
    st_log__pstate_encode(&log->pstate, &b);
    snap_path(log, offset, path, sizeof path);
    st_err_t e = ST_OK;
    if (sync) {
        e = st_log__write_file_atomic(st_log__mgr_fcache(log->mgr), path, b.data, b.len);
    } else {
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) e = st_err_from_errno(errno);
        if (!e) e = st_pwrite_all(fd, b.data, b.len, 0);
        if (fd >= 0 && close(fd) != 0 && !e) e = st_err_from_errno(errno);
        if (!e && rename(tmp, path) != 0) e = st_err_from_errno(errno);
        if (e) unlink(tmp);
    }
    st_buf_fini(&b);
    if (e) {
        ST_LOG_RATELIMITED(ST_LOG_WARN, "log", 10000,
                           WHAT_FMT ": cannot write producer snapshot %020lld.snapshot: %s (a "
                           "restart replays more of the log)",
                           WHAT_ARGS(log), (long long)offset, st_err_msg(e));
        return e;
    }
    snaps_insert(log, offset);
    if (!sync) log->pstate_snap_unsynced = offset;
    return ST_OK;
}

/* Read the snapshot of offset into log->pstate (empty on failure). */
static st_err_t snap_load(st_log_t *log, int64_t offset) {
    char path[4096], *data = NULL;
    size_t len = 0;
    snap_path(log, offset, path, sizeof path);
    st_err_t e = st_read_file(path, &data, &len);
    const char *why = "cannot be read";
    if (!e) e = st_log__pstate_decode((const uint8_t *)data, len, st_now_ms(), expiration_ms(log),
                                      &log->pstate, &why);
    free(data);
    if (e)
        ST_WARN("log", WHAT_FMT ": producer snapshot %020lld.snapshot is corrupt (%s): deleted, "
                "an older one is used", WHAT_ARGS(log), (long long)offset, why);
    return e;
}

/* ---- replay ----------------------------------------------------------------- */

/* Batch headers only, never records: after a small batch the next
 * headers are read a window at a time (one pread for many batches), after
 * a large one (where a window would be mostly records) alone. */
typedef struct hdr_reader {
    int fd;
    uint8_t buf[64 << 10];
    int64_t at;  /* file position of buf[0] */
    size_t have; /* valid bytes in buf */
    int32_t last_size; /* of the previous batch */
} hdr_reader_t;

static st_err_t hdr_read(hdr_reader_t *r, int64_t pos, int64_t size, st_batch_info_t *b) {
    if (pos < r->at || pos + ST_BATCH_HEADER_SIZE > r->at + (int64_t)r->have) {
        int64_t window = r->last_size >= 4096 ? ST_BATCH_HEADER_SIZE : (int64_t)sizeof r->buf;
        size_t want = (size_t)ST_MIN(window, size - pos);
        r->at = pos;
        r->have = 0;
        st_err_t e = st_pread_all(r->fd, r->buf, want, pos, &r->have);
        if (e) return e;
    }
    size_t off = (size_t)(pos - r->at);
    if (r->have - off < ST_BATCH_HEADER_SIZE) return ST_CORRUPT_BKPT;
    if (st_batch_header(r->buf + off, r->have - off, b)) return ST_CORRUPT_BKPT;
    r->last_size = b->size;
    return ST_OK;
}

/* Apply the batches of [from, leo) to the state, from their headers. */
static st_err_t replay(st_log_t *log, int64_t from) {
    st_err_t e = ST_OK;
    hdr_reader_t *r = NULL;
    if (from >= log->leo) return ST_OK;
    for (int i = 0; i < log->nsegs && !e; i++) {
        st_segment_t *s = log->segs[i];
        if (s->next_offset <= from || s->size == 0) continue;
        st_file_t *f;
        e = st_log__seg_keep(s, ST_SEG_LOG, &f);
        if (e) break;
        int64_t pos = 0;
        st_batch_info_t b;
        if (s->base_offset < from && st_log__seg_find(s, f, from, &pos, NULL) != ST_OK) {
            st_file_release(f);
            continue;
        }
        if (!r) r = st_malloc(sizeof *r);
        r->fd = f->fd;
        r->at = 0;
        r->have = 0;
        r->last_size = 0;
        while (pos < s->size && !(e = hdr_read(r, pos, s->size, &b))) {
            if (st_batch_last_offset(&b) >= from) {
                apply_replicated(&log->pstate, &b);
                st_log__txn_apply(log, &b, NULL, f->fd, pos);
                log->pstate_replayed++;
            }
            pos += b.size;
        }
        st_file_release(f);
    }
    free(r);
    if (e)
        ST_WARN("log", WHAT_FMT ": producer state replay from offset %lld stopped: %s",
                WHAT_ARGS(log), (long long)from, st_err_msg(e));
    return e;
}

/* Kafka's truncateAndReload: the newest valid snapshot at or below the leo
 * (corrupt ones deleted), then the batches after it. */
static void reload(st_log_t *log) {
    st_log__pstate_clear(&log->pstate);
    log->pstate_replayed = 0;
    while (log->nsnaps && log->snaps[log->nsnaps - 1] > log->leo) snap_delete_at(log, log->nsnaps - 1);
    int64_t from = log->log_start_offset;
    while (log->nsnaps) {
        int64_t at = log->snaps[log->nsnaps - 1];
        if (snap_load(log, at) == ST_OK) {
            from = ST_MAX(at, log->log_start_offset);
            break;
        }
        snap_delete_at(log, log->nsnaps - 1);
    }
    st_log__txn_replay_begin(log, from);
    replay(log, from);
    st_log__txn_replay_end(log, from);
}

/* At open, after the segments are recovered; log->snaps holds the
 * offsets of the snapshot files the directory listing found.  A clean stop left a snapshot
 * at the leo, so nothing is replayed; after a crash the batches after the
 * newest snapshot are.  A clean stop that left no snapshot at all (a log
 * written before producer state existed) is taken as having none, as
 * Kafka does, and is not read whole: a snapshot is written at the leo. */
void st_log__pstate_open(st_log_t *log, int clean) {
    int nsnaps = log->nsnaps;
    st_log__txn_load(log);
    if (nsnaps > 1) qsort(log->snaps, (size_t)nsnaps, sizeof *log->snaps, cmp_i64);
    /* below the log start: nothing can be replayed from them */
    while (log->nsnaps && log->snaps[0] < log->log_start_offset) snap_delete_at(log, 0);
    if (clean && nsnaps == 0) {
        st_log__pstate_clear(&log->pstate);
        if (log->leo > log->log_start_offset) st_log__pstate_snapshot(log, log->leo, 0);
        return;
    }
    reload(log);
}

/* After st_log_truncate_to cut the log at the leo. */
void st_log__pstate_truncated(st_log_t *log) { reload(log); }

/* After st_log_truncate_fully: no producer is known, no snapshot kept. */
void st_log__pstate_reset(st_log_t *log) {
    st_log__pstate_clear(&log->pstate);
    while (log->nsnaps) snap_delete_at(log, log->nsnaps - 1);
    st_log__txn_reset(log);
}

/* The log start moved (retention, DeleteRecords): the snapshots below it
 * go.  The state itself stays: producers are forgotten by expiry only
 * (Kafka since KIP-360), so one whose batches all went keeps its sequence. */
void st_log__pstate_start_moved(st_log_t *log) {
    while (log->nsnaps && log->snaps[0] < log->log_start_offset) snap_delete_at(log, 0);
    st_log__txn_start_moved(log);
}

/* The flusher's part: which roll snapshot to sync (-1: none). */
int64_t st_log__pstate_sync_target(st_log_t *log, char *path, size_t n) {
    int64_t at = log->pstate_snap_unsynced;
    if (at >= 0) snap_path(log, at, path, n);
    return at;
}

void st_log__pstate_synced(st_log_t *log, int64_t offset) {
    if (log->pstate_snap_unsynced == offset) log->pstate_snap_unsynced = -1;
}

void st_log__pstate_free(st_log_t *log) {
    st_log__pstate_fini(&log->pstate);
    st_log__pstate_fini(&log->pstage);
    st_log__txn_free(log);
    free(log->snaps);
    log->snaps = NULL;
    log->nsnaps = log->capsnaps = 0;
}

/* ---- public: restore, expiry and reads ----------------------------------------- */

st_err_t st_log__pstate_install(st_log_t *log, int64_t offset, const void *snap, size_t len,
                                const char **why) {
    st_pstate_t t;
    st_log__pstate_init(&t);
    st_err_t e = st_log__pstate_decode(snap, len, st_now_ms(), expiration_ms(log), &t, why);
    if (e) {
        st_log__pstate_fini(&t);
        return e;
    }
    st_log__pstate_fini(&log->pstate);
    log->pstate = t;
    st_log__pstate_snapshot(log, offset, 0); /* the flusher syncs it */
    return ST_OK;
}

st_err_t st_log_restore_producer_state(st_log_t *log, int64_t offset, const void *snap,
                                       size_t len, int *producers) {
    st_err_t e = ST_OK;
    const char *why = NULL;
    pthread_mutex_lock(&log->lock);
    if (log->closed || log->offline) {
        e = ST_E_KAFKA_STORAGE_ERROR;
    } else if (log->log_start_offset != offset || log->leo != offset || log->pstate.n) {
        e = ST_E_INVAL;
    } else {
        e = st_log__pstate_install(log, offset, snap, len, &why);
    }
    *producers = (int)log->pstate.n;
    pthread_mutex_unlock(&log->lock);
    if (e == ST_E_CORRUPT)
        ST_WARN("log", WHAT_FMT ": the producer snapshot for offset %lld is corrupt (%s): not used",
                WHAT_ARGS(log), (long long)offset, why ? why : "?");
    return e;
}

/* ---- public: expiry and reads ------------------------------------------------- */

int st_log_expire_producers(st_log_t *log, int64_t now_ms) {
    int n = 0;
    pthread_mutex_lock(&log->lock);
    int64_t ms = expiration_ms(log);
    for (size_t i = 0; i < log->pstate.cap;) {
        st_pstate_entry_t *e = &log->pstate.slots[i];
        if (e->producer_id >= 0 && expired(e, now_ms, ms)) {
            ST_DEBUG("log", WHAT_FMT ": producer %lld expired (last timestamp %lld)",
                     WHAT_ARGS(log), (long long)e->producer_id, (long long)e->last_timestamp);
            remove_at(&log->pstate, i); /* may shift a later entry into i: look again */
            n++;
            continue;
        }
        i++;
    }
    pthread_mutex_unlock(&log->lock);
    return n;
}

int st_log_producers(st_log_t *log, st_log_producer_t *out, int max) {
    pthread_mutex_lock(&log->lock);
    int n = (int)log->pstate.n;
    const st_pstate_entry_t **v = sorted_entries(&log->pstate);
    for (int i = 0; i < n && i < max; i++) {
        const st_pstate_entry_t *e = v[i];
        out[i].producer_id = e->producer_id;
        out[i].producer_epoch = e->epoch;
        out[i].last_sequence = e->nbatches ? e->batches[e->nbatches - 1].last_seq : -1;
        out[i].last_timestamp = e->last_timestamp;
        out[i].coordinator_epoch = e->coordinator_epoch;
        out[i].current_txn_start_offset = e->txn_first_offset;
    }
    pthread_mutex_unlock(&log->lock);
    free(v);
    return n;
}

int st_log_producer_count(st_log_t *log) {
    pthread_mutex_lock(&log->lock);
    int n = (int)log->pstate.n;
    pthread_mutex_unlock(&log->lock);
    return n;
}

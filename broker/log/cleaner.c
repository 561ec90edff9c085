/*
 * cleaner.c - log compaction: the latest record of each key survives in
 * the closed segments of a compacted topic (Kafka's LogCleaner).
 *
 * A pass over one log:
 *
 *   [log start ........ first dirty ......... end) [uncleanable ...  active]
 *    cleaned before      dirty: indexed into        younger than
 *    (one record a key)  the key map                min.compaction.lag.ms,
 *                                                   or the active segment
 *
 *   1. map:     key -> last offset, for every keyed record of the dirty
 *               section (a 128-bit hash of the key, 24 bytes an entry; a
 *               map that fills ends the section early, at a segment start)
 *   2. filter:  segments from the log start to `end`, in groups that stay
 *               below segment.bytes, are rewritten: a record stays when no
 *               later offset of its key is in the map; a tombstone stays
 *               until its batch is delete.retention.ms old; a record
 *               without a key goes (compacted topics refuse them in Kafka)
 *   3. swap:    per group, crash-safe (below); the log's segment list is
 *               changed under its lock, readers keep their descriptors
 *   4. the next pass starts at `end` (cleaner-offset-checkpoint)
 *
 * A batch that keeps every record is copied byte for byte; one that keeps
 * none disappears; one that keeps some is rebuilt around the records'
 * unchanged bytes: same base offset, last offset delta, leader epoch,
 * attributes, producer fields and base timestamp, so no offset is ever
 * renumbered, and its records are compressed again with the same codec.
 *
 * Files of a group whose first segment has base offset B:
 *
 *   B.log.cleaned, B.index.cleaned,   written and fsynced; ignored by the
 *   B.timeindex.cleaned               loader and removed by recovery
 *        |  rename: .index, .timeindex, then .log -> .swap, fsync the dir
 *        v
 *   B.log.swap  <- the commit point: the pass's result is durable
 *        |  unlink the group's other segments; rename the .swap files
 *        v  over B.*; fsync the dir
 *   B.log, B.index, B.timeindex
 *
 * st_log__cleaner_recover_partition, when a log is opened and its
 * directory holds such files (st_log_cleaner_recover does it for every
 * partition of a log dir): *.cleaned
 * files are removed (the pass never committed); a B.log.swap is finished:
 * the segments whose base lies in (B, last offset of the swap] are
 * removed and the swap files renamed into place.
 *
 * Threads: st_log_clean runs on the caller's thread (the cleaner thread).
 * It takes the log's lock to look at the segment list, to keep the .log of
 * the one segment it reads next from the file cache (segments are named by
 * id, so one that went meanwhile stops the pass), and to swap; it reads
 * without the lock.
 */
#include "log_int.h"
#include "compress_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WHAT_FMT "%s-%d"
#define WHAT_ARGS(log) (log)->topic, (int)(log)->partition

/* ---- the key map -------------------------------------------------------- */

typedef struct kentry {
    uint64_t a, b; /* 128-bit hash of the key; (0, 0) is an empty slot */
    int64_t offset;
} kentry_t;

typedef struct keymap {
    kentry_t *v;
    size_t cap, n, max;
} keymap_t;

static uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static uint64_t hash64(const uint8_t *p, size_t n, uint64_t seed) {
    uint64_t h = mix64(seed ^ (n * 0x9E3779B97F4A7C15ull));
    while (n >= 8) {
        uint64_t k;
        memcpy(&k, p, 8);
        h = mix64(h ^ k) * 0x9E3779B97F4A7C15ull;
        p += 8;
        n -= 8;
    }
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++) k |= (uint64_t)p[i] << (8 * i);
    return mix64(h ^ k ^ ((uint64_t)n << 56));
}

static void key_hash(const uint8_t *key, int32_t len, uint64_t *a, uint64_t *b) {
    *a = hash64(key, (size_t)len, 0x5354524154413031ull);
    *b = hash64(key, (size_t)len, 0x6b65792d6d617032ull);
    if (!*a && !*b) *a = 1;
}

static void keymap_init(keymap_t *m, int64_t bytes) {
    size_t want = (size_t)(bytes / (int64_t)sizeof(kentry_t));
    size_t cap = 1024;
    while (cap * 2 <= want) cap *= 2;
    m->v = st_calloc(cap, sizeof *m->v);
    m->cap = cap;
    m->n = 0;
    m->max = cap / 10 * 8; /* 80% full at most */
}

static void keymap_fini(keymap_t *m) { free(m->v); }

/* Returns 0, or -1 when the map is full (nothing stored). */
static int keymap_put(keymap_t *m, uint64_t a, uint64_t b, int64_t offset) {
    for (size_t i = a & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        kentry_t *e = &m->v[i];
        if (!e->a && !e->b) {
            if (m->n >= m->max) return -1;
            *e = (kentry_t){a, b, offset};
            m->n++;
            return 0;
        }
        if (e->a == a && e->b == b) {
            if (offset > e->offset) e->offset = offset;
            return 0;
        }
    }
}

static int64_t keymap_get(const keymap_t *m, uint64_t a, uint64_t b) {
    for (size_t i = a & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const kentry_t *e = &m->v[i];
        if (!e->a && !e->b) return -1;
        if (e->a == a && e->b == b) return e->offset;
    }
}

/* ---- records, seen raw ----------------------------------------------------
 *
 * A record inside a batch (batch.h): varint length, then attributes int8,
 * timestampDelta varlong, offsetDelta varint, key, value, headers.  Records
 * that stay are copied with these bytes unchanged.
 */
typedef struct rec {
    const uint8_t *raw; /* from the length varint to the end of the record */
    size_t raw_len;
    int64_t offset;
    int64_t timestamp;
    const uint8_t *key;
    int32_t key_len; /* -1: null */
    int32_t value_len; /* -1: null (a tombstone) */
} rec_t;

typedef int (*rec_cb)(const rec_t *r, void *arg);

/* Walk the records of one batch (decompressing into plain when needed). */
static st_err_t walk_records(const uint8_t *batch, const st_batch_info_t *b, st_buf_t *plain,
                             rec_cb fn, void *arg) {
    const uint8_t *p;
    size_t len;
    plain->len = 0;
    if ((b->attributes & ST_ATTR_CODEC_MASK) == ST_CODEC_NONE) {
        p = batch + ST_BATCH_HEADER_SIZE;
        len = (size_t)b->size - ST_BATCH_HEADER_SIZE;
    } else {
        st_err_t e = st_batch_decompress(batch, b->size, plain);
        if (e) return e;
        p = plain->data;
        len = plain->len;
    }
    st_rd_t r;
    st_rd_init(&r, p, len);
    for (int32_t i = 0; i < b->record_count; i++) {
        size_t start = r.pos;
        int64_t rlen = st_rd_varint(&r);
        const uint8_t *body = rlen > 0 ? st_rd_bytes(&r, (size_t)rlen) : NULL;
        if (!body) return ST_CORRUPT_BKPT;
        st_rd_t rr;
        st_rd_init(&rr, body, (size_t)rlen);
        rec_t rec;
        rec.raw = p + start;
        rec.raw_len = r.pos - start;
        st_rd_i8(&rr);
        int64_t ts_delta = st_rd_varint(&rr);
        int64_t off_delta = st_rd_varint(&rr);
        /* stored bytes are checked like any others: no signed overflow */
        if (off_delta < 0 || off_delta > INT32_MAX ||
            __builtin_add_overflow(b->base_offset, off_delta, &rec.offset))
            return ST_CORRUPT_BKPT;
        if (b->attributes & ST_ATTR_LOG_APPEND_TIME) rec.timestamp = b->max_timestamp;
        else if (__builtin_add_overflow(b->base_timestamp, ts_delta, &rec.timestamp))
            return ST_CORRUPT_BKPT;
        int64_t kl = st_rd_varint(&rr);
        rec.key_len = kl < 0 ? -1 : (int32_t)kl;
        rec.key = kl > 0 ? st_rd_bytes(&rr, (size_t)kl) : NULL;
        if (kl == 0) rec.key = (const uint8_t *)"";
        int64_t vl = st_rd_varint(&rr);
        rec.value_len = vl < 0 ? -1 : (int32_t)vl;
        if (rr.err || kl > INT32_MAX || vl > INT32_MAX || (kl > 0 && !rec.key)) return ST_CORRUPT_BKPT;
        if (fn(&rec, arg)) break;
    }
    return r.err ? ST_CORRUPT_BKPT : ST_OK;
}

/* ---- compression (the same codec the batch came with) ---------------------- */

/* The kept records, compressed again with the batch's codec by the one
 * writer produce's recompression uses too (compress.c: Kafka's framing of
 * each codec; a snappy batch comes back in the Java client's xerial
 * framing, which every client reads). */
static st_err_t compress_records(int codec, const uint8_t *p, size_t n, st_buf_t *out) {
    st_log__deflate_t d;
    st_err_t e = st_log__deflate_init(&d, codec, out, SIZE_MAX);
    if (!e) e = st_log__deflate_write(&d, p, n);
    if (!e) e = st_log__deflate_finish(&d);
    st_log__deflate_fini(&d);
    return e;
}

/* ---- a pass ------------------------------------------------------------------ */

typedef struct snap {
    int64_t base, next, size, max_ts, first_ts;
    uint64_t id;     /* identifies the segment at the swap */
    st_file_t *file; /* kept while the pass reads this segment, else NULL */
} snap_t;

/* Per producer, what the rewrite saw of its transaction since its last
 * marker: a batch of it kept (the marker must stay), or an aborted batch
 * dropped by this pass (the marker stays one more pass, so a consumer
 * that read the data before it went still finds its end; Kafka's
 * lastObservedBatchOffset). */
typedef struct ptxn {
    int64_t pid; /* -1: free slot */
    int kept, dropped;
} ptxn_t;

typedef struct pass {
    st_log_t *log;
    const st_log_compact_config_t *cfg;
    const st_log_clean_opts_t *o;
    st_log_clean_result_t *res;
    keymap_t map;
    snap_t *segs;
    int nsegs;
    int32_t index_interval;
    int64_t max_lag_ms; /* the log's max.compaction.lag.ms */
    uint8_t *buf;
    size_t bufcap;
    st_buf_t plain, kept, packed, outbatch;
    int64_t io_start_ms, io_bytes;
    /* the batch being filtered */
    const st_batch_info_t *bi;
    int64_t max_ts_kept;
    int32_t nkept, nall;
    int tombstones_removed;
    int map_full;
    /* the log's aborted transactions when the pass began: their batches
     * are neither mapped nor kept (Kafka's cleaner drops aborted data) */
    st_log_aborted_txn_t *aborted;
    int naborted;
    /* the transactions the rewrite goes through, per producer (Kafka's
     * CleanedTransactionMetadata), and the abort markers the current
     * group dropped (their aborted entries go at the swap) */
    ptxn_t *ptx;
    size_t ptx_cap, ptx_n;
    int64_t *dropped;
    int ndropped, capdropped;
    int markers_removed;
} pass_t;

static ptxn_t *ptxn_get(pass_t *p, int64_t pid) {
    if ((p->ptx_n + 1) * 2 > p->ptx_cap) {
        size_t oldcap = p->ptx_cap;
        ptxn_t *old = p->ptx;
        p->ptx_cap = oldcap ? oldcap * 2 : 64;
        p->ptx = st_malloc(sizeof *p->ptx * p->ptx_cap);
        for (size_t i = 0; i < p->ptx_cap; i++) p->ptx[i].pid = -1;
        p->ptx_n = 0;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].pid >= 0) *ptxn_get(p, old[i].pid) = old[i];
        free(old);
    }
    size_t at = (size_t)((uint64_t)pid * 0x9e3779b97f4a7c15u >> 20) & (p->ptx_cap - 1);
    while (p->ptx[at].pid >= 0 && p->ptx[at].pid != pid) at = (at + 1) & (p->ptx_cap - 1);
    if (p->ptx[at].pid < 0) {
        p->ptx[at] = (ptxn_t){pid, 0, 0};
        p->ptx_n++;
    }
    return &p->ptx[at];
}

/* A transactional data batch whose transaction was aborted. */
static int aborted_batch(const pass_t *p, const st_batch_info_t *b) {
    if (b->producer_id < 0 || !(b->attributes & ST_ATTR_TRANSACTIONAL) ||
        (b->attributes & ST_ATTR_CONTROL))
        return 0;
    for (int i = 0; i < p->naborted; i++) {
        const st_log_aborted_txn_t *a = &p->aborted[i];
        if (a->producer_id == b->producer_id && a->first_offset <= b->base_offset &&
            b->base_offset < a->last_offset)
            return 1;
    }
    return 0;
}

static int cancelled(const pass_t *p) { return p->o->cancel && *p->o->cancel; }

/* Keep to log.cleaner.io.max.bytes.per.second. */
static void throttle(pass_t *p, int64_t bytes) {
    p->io_bytes += bytes;
    if (p->o->io_bytes_per_sec <= 0) return;
    for (;;) {
        int64_t want_ms = p->io_bytes * 1000 / p->o->io_bytes_per_sec;
        int64_t ahead = want_ms - (st_mono_ms() - p->io_start_ms);
        if (ahead <= 0 || cancelled(p)) return;
        struct timespec ts = {0, (long)ST_MIN(ahead, 100) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Keep segment k's .log for reading (the cache may have closed it, and a
 * pass reads one segment at a time, so it holds one descriptor at most). */
static st_err_t snap_open(pass_t *p, int k) {
    snap_t *s = &p->segs[k];
    if (s->file) return ST_OK;
    st_log_t *log = p->log;
    st_err_t e = ST_E_AGAIN; /* the segment is gone: the pass stops */
    pthread_mutex_lock(&log->lock);
    for (int i = 0; !log->closed && i < log->nsegs; i++) {
        if (log->segs[i]->id != s->id) continue;
        e = st_log__seg_keep(log->segs[i], ST_SEG_LOG, &s->file);
        break;
    }
    pthread_mutex_unlock(&log->lock);
    return e;
}

static void snap_close(pass_t *p, int k) {
    st_file_release(p->segs[k].file);
    p->segs[k].file = NULL;
}

/* Read the batch at pos of a segment into p->buf; 0 at the end. */
static st_err_t read_batch(pass_t *p, const snap_t *s, int64_t pos, st_batch_info_t *b, int *got) {
    *got = 0;
    if (pos + ST_BATCH_HEADER_SIZE > s->size) return ST_OK;
    uint8_t hdr[ST_BATCH_HEADER_SIZE];
    size_t n = 0;
    st_err_t e = st_pread_all(s->file->fd, hdr, sizeof hdr, pos, &n);
    if (e || n < sizeof hdr) return e ? e : ST_CORRUPT_BKPT;
    if (st_batch_header(hdr, n, b) || pos + b->size > s->size) return ST_CORRUPT_BKPT;
    if ((size_t)b->size > p->bufcap) {
        p->bufcap = (size_t)b->size;
        p->buf = st_realloc(p->buf, p->bufcap);
    }
    e = st_pread_all(s->file->fd, p->buf, (size_t)b->size, pos, &n);
    if (e || n < (size_t)b->size) return e ? e : ST_CORRUPT_BKPT;
    throttle(p, b->size);
    p->res->bytes_read += b->size;
    *got = 1;
    return ST_OK;
}

static int map_record(const rec_t *r, void *arg) {
    pass_t *p = arg;
    if (r->key_len < 0) return 0;
    uint64_t a, b;
    key_hash(r->key, r->key_len, &a, &b);
    if (keymap_put(&p->map, a, b, r->offset)) p->map_full = 1;
    return p->map_full; /* stop when full */
}

/* Index the dirty section [first, end); returns where the mapped section
 * ends (a segment start), which is first when not even one segment fits. */
static st_err_t build_map(pass_t *p, int first, int last, int64_t *end) {
    *end = p->segs[first].base;
    for (int k = first; k <= last; k++) {
        const snap_t *s = &p->segs[k];
        st_err_t e = snap_open(p, k);
        if (e) return e;
        for (int64_t pos = 0;;) {
            st_batch_info_t b;
            int got;
            e = read_batch(p, s, pos, &b, &got);
            if (e) return e;
            if (!got || cancelled(p)) break;
            if (!(b.attributes & ST_ATTR_CONTROL) && !aborted_batch(p, &b)) {
                e = walk_records(p->buf, &b, &p->plain, map_record, p);
                if (e) return e;
                /* full inside this segment: the section ends before it (the
                 * keys it did map are later than anything cleaned) */
                if (p->map_full) return ST_OK;
            }
            pos += b.size;
        }
        snap_close(p, k);
        if (cancelled(p)) return ST_E_CANCELLED;
        *end = s->next;
    }
    return ST_OK;
}

/* The last offset of pid's newest data batch in the producer state (-1:
 * none); *known = 0 when the producer is not known (expired). */
static int64_t producer_newest(pass_t *p, int64_t pid, int *known) {
    st_log_t *log = p->log;
    pthread_mutex_lock(&log->lock);
    const st_pstate_entry_t *e = st_log__pstate_lookup(&log->pstate, pid);
    *known = e != NULL;
    int64_t last = e && e->nbatches > 0 ? e->batches[e->nbatches - 1].last_offset : -1;
    pthread_mutex_unlock(&log->lock);
    return last;
}

/* A batch whose records all go but that is its producer's newest stays
 * as an empty batch (Kafka's RETAIN_EMPTY): its header (offsets, producer
 * id, epoch, sequences) keeps the producer's state for whoever rebuilds
 * it from the log (a new follower, a replay without snapshot), so a
 * retried batch is still answered as a duplicate.  No codec, no records,
 * both timestamps the batch's max. */
static void keep_empty(pass_t *p, const st_batch_info_t *b) {
    if (b->producer_id < 0) return;
    int known;
    if (producer_newest(p, b->producer_id, &known) != st_batch_last_offset(b)) return;
    p->outbatch.len = 0;
    st_buf_put(&p->outbatch, p->buf, ST_BATCH_HEADER_SIZE);
    uint8_t *h = p->outbatch.data;
    st_be32_put(h + ST_BATCH_LENGTH_OFFSET, (uint32_t)(ST_BATCH_HEADER_SIZE - ST_BATCH_LOG_OVERHEAD));
    st_be16_put(h + ST_BATCH_ATTR_OFFSET, (uint16_t)(b->attributes & ~ST_ATTR_CODEC_MASK));
    st_be64_put(h + ST_BATCH_BASE_TS_OFFSET, (uint64_t)b->max_timestamp);
    st_be32_put(h + ST_BATCH_COUNT_OFFSET, 0);
    st_be32_put(h + ST_BATCH_CRC_OFFSET,
                st_crc32c(0, h + ST_BATCH_ATTR_OFFSET, ST_BATCH_HEADER_SIZE - ST_BATCH_ATTR_OFFSET));
}

/* Whether a marker goes (Kafka's cleaner): its transaction left nothing in
 * the log (no batch of it kept, none dropped by this very pass), it is
 * older than delete.retention.ms (a consumer that read the transaction's
 * data meanwhile still finds its end), and it is not its producer's last
 * batch (which keeps the producer's epoch for a replay of the log).  A
 * dropped abort marker takes its aborted-transaction entry with it: a
 * read_committed consumer would otherwise skip the producer's later
 * batches, waiting for a marker that is gone. */
static int marker_goes(pass_t *p, const st_batch_info_t *b) {
    if (b->producer_id < 0) return 0;
    ptxn_t *t = ptxn_get(p, b->producer_id);
    int empty = !t->kept && !t->dropped;
    t->kept = t->dropped = 0;
    if (!empty || b->max_timestamp < 0) return 0;
    int64_t due = b->max_timestamp + p->cfg->delete_retention_ms;
    if (due > p->o->now_ms) {
        if (p->res->tombstone_due < 0 || due < p->res->tombstone_due) p->res->tombstone_due = due;
        return 0;
    }
    int known;
    int64_t newest = producer_newest(p, b->producer_id, &known);
    if (known && newest <= st_batch_last_offset(b)) return 0;
    int32_t cepoch;
    if (st_batch_control_type(p->buf, b->size, &cepoch) == ST_CONTROL_ABORT) {
        if (p->ndropped == p->capdropped) {
            p->capdropped = p->capdropped ? p->capdropped * 2 : 16;
            p->dropped = st_realloc(p->dropped, sizeof *p->dropped * (size_t)p->capdropped);
        }
        p->dropped[p->ndropped++] = b->base_offset;
    }
    p->markers_removed++;
    p->res->records_removed += b->record_count;
    return 1;
}

static int filter_record(const rec_t *r, void *arg) {
    pass_t *p = arg;
    p->nall++;
    int keep;
    if (r->key_len < 0) {
        keep = 0; /* no key: a compacted topic cannot hold it */
    } else {
        uint64_t a, b;
        key_hash(r->key, r->key_len, &a, &b);
        int64_t latest = keymap_get(&p->map, a, b);
        keep = latest < 0 || r->offset >= latest;
        if (keep && r->value_len < 0) {
            int64_t due = p->bi->max_timestamp + p->cfg->delete_retention_ms;
            if (p->bi->max_timestamp >= 0 && due <= p->o->now_ms) {
                keep = 0;
                p->tombstones_removed++;
            } else if (p->res->tombstone_due < 0 || due < p->res->tombstone_due) {
                p->res->tombstone_due = due;
            }
        }
    }
    if (!keep) return 0;
    st_buf_put(&p->kept, r->raw, r->raw_len);
    p->nkept++;
    if (r->timestamp > p->max_ts_kept) p->max_ts_kept = r->timestamp;
    return 0;
}

static st_err_t filter_records(pass_t *p, const st_batch_info_t *b);

/* Filter one batch into p->outbatch (empty when nothing stays). */
static st_err_t filter_batch(pass_t *p, const st_batch_info_t *b) {
    p->outbatch.len = 0;
    if (b->attributes & ST_ATTR_CONTROL) {
        if (!marker_goes(p, b)) st_buf_put(&p->outbatch, p->buf, (size_t)b->size);
        return ST_OK;
    }
    int txn = b->producer_id >= 0 && (b->attributes & ST_ATTR_TRANSACTIONAL);
    if (aborted_batch(p, b)) {
        p->res->records_removed += b->record_count;
        keep_empty(p, b);
        ptxn_t *t = ptxn_get(p, b->producer_id);
        t->dropped = 1;
        t->kept |= p->outbatch.len > 0;
        return ST_OK;
    }
    if (txn) {
        st_err_t e = filter_records(p, b);
        if (!e && p->outbatch.len) ptxn_get(p, b->producer_id)->kept = 1;
        return e;
    }
    return filter_records(p, b);
}

/* The records of a data batch that stay, into p->outbatch. */
static st_err_t filter_records(pass_t *p, const st_batch_info_t *b) {
    p->bi = b;
    p->kept.len = 0;
    p->nkept = p->nall = 0;
    p->max_ts_kept = -1;
    st_err_t e = walk_records(p->buf, b, &p->plain, filter_record, p);
    if (e) return e;
    p->res->records_kept += p->nkept;
    p->res->records_removed += p->nall - p->nkept;
    if (p->nkept == 0) {
        keep_empty(p, b);
        return ST_OK;
    }
    if (p->nkept == p->nall) {
        st_buf_put(&p->outbatch, p->buf, (size_t)b->size);
        return ST_OK;
    }
    /* Rebuild: the original header, the kept records (compressed again). */
    int codec = b->attributes & ST_ATTR_CODEC_MASK;
    p->packed.len = 0;
    e = compress_records(codec, p->kept.data, p->kept.len, &p->packed);
    if (e) return e;
    st_buf_put(&p->outbatch, p->buf, ST_BATCH_HEADER_SIZE);
    st_buf_put(&p->outbatch, p->packed.data, p->packed.len);
    uint8_t *h = p->outbatch.data;
    st_be32_put(h + ST_BATCH_LENGTH_OFFSET,
                (uint32_t)(p->outbatch.len - ST_BATCH_LOG_OVERHEAD));
    if (!(b->attributes & ST_ATTR_LOG_APPEND_TIME) && p->max_ts_kept >= 0)
        st_be64_put(h + ST_BATCH_MAX_TS_OFFSET, (uint64_t)p->max_ts_kept);
    st_be32_put(h + ST_BATCH_COUNT_OFFSET, (uint32_t)p->nkept);
    st_be32_put(h + ST_BATCH_CRC_OFFSET,
                st_crc32c(0, h + ST_BATCH_ATTR_OFFSET, p->outbatch.len - ST_BATCH_ATTR_OFFSET));
    return ST_OK;
}

static void group_path(const st_log_t *log, int64_t base, const char *ext, char *out, size_t n) {
    st_log__seg_path(log->dir, base, ext, out, n);
}

static void unlink_cleaned(const st_log_t *log, int64_t base) {
    static const char *exts[] = {".log.cleaned", ".index.cleaned", ".timeindex.cleaned",
                                 ".log.swap", ".index.swap", ".timeindex.swap"};
    char path[4200];
    for (size_t i = 0; i < ST_ARRAY_SIZE(exts); i++) {
        group_path(log, base, exts[i], path, sizeof path);
        unlink(path);
    }
}

/* Write the cleaned form of segments [g0, g1] to B.*.cleaned. */
static st_err_t write_group(pass_t *p, int g0, int g1) {
    st_log_t *log = p->log;
    int64_t base = p->segs[g0].base;
    char path[4200];
    group_path(log, base, ".log.cleaned", path, sizeof path);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return st_err_from_errno(errno);
    st_segment_t *tmp = st_calloc(1, sizeof *tmp);
    tmp->base_offset = tmp->next_offset = base;
    tmp->max_timestamp = tmp->offset_of_max_timestamp = -1;
    int64_t out_pos = 0;
    st_err_t e = ST_OK;
    for (int k = g0; k <= g1 && !e; k++) {
        const snap_t *s = &p->segs[k];
        e = snap_open(p, k);
        for (int64_t pos = 0; !e;) {
            st_batch_info_t b;
            int got;
            e = read_batch(p, s, pos, &b, &got);
            if (e || !got) break;
            if (cancelled(p)) {
                e = ST_E_CANCELLED;
                break;
            }
            e = filter_batch(p, &b);
            if (!e && p->outbatch.len) {
                e = st_pwrite_all(fd, p->outbatch.data, p->outbatch.len, out_pos);
                st_batch_info_t ob;
                if (!e) e = st_batch_header(p->outbatch.data, p->outbatch.len, &ob);
                if (!e) st_log__seg_index_batch(tmp, &ob, out_pos, p->index_interval);
                out_pos += (int64_t)p->outbatch.len;
                p->res->bytes_written += (int64_t)p->outbatch.len;
                throttle(p, (int64_t)p->outbatch.len);
            }
            pos += b.size;
        }
        snap_close(p, k);
    }
    if (!e && fdatasync(fd) != 0) e = st_err_from_errno(errno);
    close(fd);
    int index_fd = -1, timeindex_fd = -1;
    if (!e) {
        group_path(log, base, ".index.cleaned", path, sizeof path);
        index_fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
        group_path(log, base, ".timeindex.cleaned", path, sizeof path);
        timeindex_fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
        if (index_fd < 0 || timeindex_fd < 0) e = st_err_from_errno(errno);
        else e = st_log__seg_write_index_fds(tmp, index_fd, timeindex_fd, 1);
    }
    if (index_fd >= 0) close(index_fd);
    if (timeindex_fd >= 0) close(timeindex_fd);
    free(tmp->idx);
    free(tmp->tidx);
    free(tmp);
    return e;
}

static int seg_index_of(st_log_t *log, const snap_t *s) {
    for (int i = 0; i < log->nsegs; i++)
        if (log->segs[i]->id == s->id) return i;
    return -1;
}

/* Put the cleaned group in place of segments [g0, g1].  Log lock held. */
static st_err_t swap_group_locked(pass_t *p, int g0, int g1) {
    st_log_t *log = p->log;
    int i0 = seg_index_of(log, &p->segs[g0]);
    if (log->closed || log->offline || log->deleted || i0 < 0 || i0 + (g1 - g0) >= log->nsegs - 1)
        return ST_E_AGAIN;
    for (int k = g0; k <= g1; k++)
        if (log->segs[i0 + k - g0]->id != p->segs[k].id) return ST_E_AGAIN;
    int64_t base = p->segs[g0].base;
    char from[4200], to[4200];
    static const char *kinds[] = {".index", ".timeindex", ".log"}; /* the log last */
    st_err_t e = ST_OK;
    for (size_t i = 0; i < ST_ARRAY_SIZE(kinds) && !e; i++) {
        char c_ext[32], s_ext[32];
        snprintf(c_ext, sizeof c_ext, "%s.cleaned", kinds[i]);
        snprintf(s_ext, sizeof s_ext, "%s.swap", kinds[i]);
        group_path(log, base, c_ext, from, sizeof from);
        group_path(log, base, s_ext, to, sizeof to);
        if (rename(from, to) != 0) e = st_err_from_errno(errno);
    }
    if (!e) e = st_fsync_dir(log->dir);
    if (e) return e; /* not committed: the caller removes the files */
    /* committed: from here a crash is finished by st_log_cleaner_recover */
    for (int k = g0 + 1; k <= g1; k++) st_log__seg_unlink(log->segs[i0 + k - g0], log->dir);
    for (size_t i = 0; i < ST_ARRAY_SIZE(kinds) && !e; i++) {
        char s_ext[32];
        snprintf(s_ext, sizeof s_ext, "%s.swap", kinds[i]);
        group_path(log, base, s_ext, from, sizeof from);
        group_path(log, base, kinds[i], to, sizeof to);
        if (rename(from, to) != 0) e = st_err_from_errno(errno);
    }
    if (!e) e = st_fsync_dir(log->dir);
    st_segment_t *ns = NULL;
    if (!e) e = st_log__seg_open(st_log__mgr_fcache(log->mgr), log->dir, base, 0, &ns);
    if (!e) {
        char what[300];
        snprintf(what, sizeof what, WHAT_FMT, WHAT_ARGS(log));
        int64_t next_base = log->segs[i0 + (g1 - g0) + 1]->base_offset;
        e = st_log__seg_recover(ns, log->dir, 0, 0, next_base, &log->cfg, what, NULL, NULL);
        if (e) {
            st_log__seg_close(ns);
            ns = NULL;
        }
    }
    if (e) {
        /* the files are right but the segment could not be reopened: serve
         * nothing wrong until a restart loads them */
        ST_ERROR("log", WHAT_FMT ": cleaned segment %020lld could not be reopened (%s); offline",
                 WHAT_ARGS(log), (long long)base, st_err_msg(e));
        log->offline = 1;
        return e;
    }
    for (int k = 0; k <= g1 - g0; k++) st_log__seg_close(log->segs[i0 + k]);
    log->segs[i0] = ns;
    memmove(&log->segs[i0 + 1], &log->segs[i0 + 1 + (g1 - g0)],
            sizeof *log->segs * (size_t)(log->nsegs - i0 - 1 - (g1 - g0)));
    log->nsegs -= g1 - g0;
    /* the group's aborted transactions in one file (the others went with
     * their segments; their data was dropped by this pass anyway), without
     * those whose markers this pass dropped */
    st_log__txn_forget(log, p->dropped, p->ndropped);
    st_log__txn_rewrite_seg(log, i0);
    return ST_OK;
}

static void pass_fini(pass_t *p) {
    for (int i = 0; i < p->nsegs; i++) snap_close(p, i);
    free(p->segs);
    free(p->buf);
    st_buf_fini(&p->plain);
    st_buf_fini(&p->kept);
    st_buf_fini(&p->packed);
    st_buf_fini(&p->outbatch);
    keymap_fini(&p->map);
    free(p->aborted);
    free(p->ptx);
    free(p->dropped);
}

/* KIP-354: a log whose oldest dirty record (the first dirty segment's first
 * batch) is older than max.compaction.lag.ms must be cleaned, whatever its
 * dirty ratio.  A segment without timestamps never makes it due. */
int st_log__compaction_lag_due(int64_t lag, int64_t first_dirty_ts, int64_t now_ms) {
    return lag > 0 && lag != INT64_MAX && first_dirty_ts >= 0 && now_ms - first_dirty_ts > lag;
}

st_err_t st_log_clean(st_log_t *log, const st_log_compact_config_t *cfg,
                      const st_log_clean_opts_t *o, st_log_clean_result_t *res) {
    memset(res, 0, sizeof *res);
    res->tombstone_due = -1;
    res->first_dirty = o->first_dirty;
    pass_t p;
    memset(&p, 0, sizeof p);
    p.log = log;
    p.cfg = cfg;
    p.o = o;
    p.res = res;
    p.io_start_ms = st_mono_ms();
    st_buf_init(&p.plain);
    st_buf_init(&p.kept);
    st_buf_init(&p.packed);
    st_buf_init(&p.outbatch);
    st_err_t e = ST_OK;

    /* What is there: the closed segments, wholly below the high watermark. */
    pthread_mutex_lock(&log->lock);
    if (log->closed || log->offline || log->deleted) {
        pthread_mutex_unlock(&log->lock);
        return ST_E_CLOSED;
    }
    p.index_interval = log->cfg.index_interval_bytes;
    p.max_lag_ms = log->cfg.max_compaction_lag_ms;
    p.segs = st_calloc((size_t)log->nsegs + 1, sizeof *p.segs);
    /* never past the last stable offset: an open transaction's batches
     * are neither committed nor aborted yet (Kafka's firstUncleanableOffset) */
    int64_t stable = st_log__lso_locked(log);
    if (log->naborted) {
        p.aborted = st_malloc(sizeof *p.aborted * (size_t)log->naborted);
        memcpy(p.aborted, log->aborted, sizeof *p.aborted * (size_t)log->naborted);
        p.naborted = log->naborted;
    }
    for (int i = 0; i + 1 < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        int64_t next = log->segs[i + 1]->base_offset;
        if (next > stable) break;
        p.segs[p.nsegs++] = (snap_t){s->base_offset, next, s->size, s->max_timestamp,
                                     st_log__seg_first_timestamp(s), s->id, NULL};
    }
    res->segments_before = log->nsegs;
    pthread_mutex_unlock(&log->lock);

    /* The cleanable end: before the first segment still within the
     * compaction lag. */
    int last = p.nsegs - 1;
    for (int i = 0; i < p.nsegs; i++) {
        if (cfg->min_compaction_lag_ms > 0 && p.segs[i].max_ts >= 0 &&
            p.segs[i].max_ts > o->now_ms - cfg->min_compaction_lag_ms) {
            last = i - 1;
            break;
        }
    }
    int first = 0; /* the first dirty segment */
    while (first <= last && p.segs[first].next <= o->first_dirty) first++;
    int64_t clean_bytes = 0, dirty_bytes = 0;
    for (int i = 0; i <= last; i++) {
        if (i < first) clean_bytes += p.segs[i].size;
        else dirty_bytes += p.segs[i].size;
    }
    res->dirty_ratio = clean_bytes + dirty_bytes ? (double)dirty_bytes / (double)(clean_bytes + dirty_bytes) : 0;
    int tombstones_due = o->force;
    res->lag_due = first <= last && st_log__compaction_lag_due(p.max_lag_ms, p.segs[first].first_ts,
                                                               o->now_ms);
    if (last < 0 || (dirty_bytes == 0 && !tombstones_due) ||
        (!o->force && !res->lag_due && res->dirty_ratio < cfg->min_cleanable_dirty_ratio)) {
        res->first_dirty = first <= last ? p.segs[first].base : o->first_dirty;
        goto out; /* nothing worth a pass */
    }

    /* 1. the key map over the dirty section */
    /* no larger than the dirty section is likely to need (compressed
     * records can take 2 bytes), so small logs do not take the whole
     * buffer; a map that fills only shortens the pass */
    int64_t want = (dirty_bytes / 2 + 1024) * (int64_t)sizeof(kentry_t) * 5 / 4;
    keymap_init(&p.map, ST_MIN(o->map_bytes > 0 ? o->map_bytes : 16 << 20, want));
    int64_t end = first <= last ? p.segs[first].base : (last >= 0 ? p.segs[last].next : 0);
    if (first <= last) {
        e = build_map(&p, first, last, &end);
        if (e) goto out;
        if (end == p.segs[first].base) {
            ST_WARN("log", WHAT_FMT ": the cleaner's key map cannot hold one segment's keys "
                           "(log.cleaner.dedupe.buffer.size); not cleaned",
                    WHAT_ARGS(log));
            e = ST_E_NOSPACE;
            goto out;
        }
    }
    res->cleaned = 1;

    /* 2-3. rewrite the segments below end, group by group */
    for (int g0 = 0; g0 < p.nsegs && p.segs[g0].base < end;) {
        int g1 = g0;
        int64_t size = p.segs[g0].size;
        while (g1 + 1 < p.nsegs && p.segs[g1 + 1].next <= end &&
               size + p.segs[g1 + 1].size <= cfg->segment_bytes &&
               p.segs[g1 + 1].next - p.segs[g0].base <= INT32_MAX) {
            g1++;
            size += p.segs[g1].size;
        }
        p.ndropped = 0;
        e = write_group(&p, g0, g1);
        if (!e) {
            pthread_mutex_lock(&log->lock);
            e = swap_group_locked(&p, g0, g1);
            pthread_mutex_unlock(&log->lock);
        }
        if (e) {
            unlink_cleaned(log, p.segs[g0].base);
            if (e == ST_E_AGAIN) ST_INFO("log", WHAT_FMT ": segments changed during cleaning; "
                                                "the pass stops", WHAT_ARGS(log));
            goto out;
        }
        g0 = g1 + 1;
    }
    res->tombstones_removed = p.tombstones_removed;
    res->markers_removed = p.markers_removed;
    res->first_dirty = end;
    pthread_mutex_lock(&log->lock);
    res->segments_after = log->nsegs;
    pthread_mutex_unlock(&log->lock);
out:
    pass_fini(&p);
    return e;
}

/* ---- recovery ------------------------------------------------------------------ */

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* The last offset held by a (complete, fsynced) swap file; base - 1 when
 * it holds nothing. */
static int64_t swap_last_offset(const char *path, int64_t base) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int64_t last = base - 1;
    if (fd < 0) return last;
    struct stat st;
    if (fstat(fd, &st) == 0) {
        for (int64_t pos = 0; pos + ST_BATCH_HEADER_SIZE <= st.st_size;) {
            uint8_t hdr[ST_BATCH_HEADER_SIZE];
            size_t got = 0;
            st_batch_info_t b;
            if (st_pread_all(fd, hdr, sizeof hdr, pos, &got) || got < sizeof hdr ||
                st_batch_header(hdr, got, &b) || pos + b.size > st.st_size)
                break;
            last = st_batch_last_offset(&b);
            pos += b.size;
        }
    }
    close(fd);
    return last;
}

st_err_t st_log__cleaner_recover_partition(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return st_err_from_errno(errno);
    int64_t *swaps = NULL, *bases = NULL;
    int nswaps = 0, nbases = 0;
    struct dirent *de;
    char path[4200];
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (ends_with(n, ".cleaned")) {
            snprintf(path, sizeof path, "%s/%s", dir, n);
            unlink(path);
            ST_INFO("log", "%s: removed %s of an unfinished cleaning pass", dir, n);
        } else if (strlen(n) == 29 && ends_with(n, ".log.swap")) {
            swaps = st_realloc(swaps, sizeof *swaps * (size_t)(nswaps + 1));
            swaps[nswaps++] = strtoll(n, NULL, 10);
        } else if (strlen(n) == 24 && ends_with(n, ".log")) {
            bases = st_realloc(bases, sizeof *bases * (size_t)(nbases + 1));
            bases[nbases++] = strtoll(n, NULL, 10);
        }
    }
    closedir(d);
    for (int i = 0; i < nswaps; i++) {
        int64_t base = swaps[i];
        st_log__seg_path(dir, base, ".log.swap", path, sizeof path);
        int64_t last = swap_last_offset(path, base);
        for (int k = 0; k < nbases; k++) {
            if (bases[k] <= base || bases[k] > last) continue;
            static const char *exts[] = {".log", ".index", ".timeindex"};
            for (size_t x = 0; x < ST_ARRAY_SIZE(exts); x++) {
                st_log__seg_path(dir, bases[k], exts[x], path, sizeof path);
                unlink(path);
            }
        }
        static const char *kinds[] = {".index", ".timeindex", ".log"};
        for (size_t x = 0; x < ST_ARRAY_SIZE(kinds); x++) {
            char from[4200], to[4200], ext[32];
            snprintf(ext, sizeof ext, "%s.swap", kinds[x]);
            st_log__seg_path(dir, base, ext, from, sizeof from);
            st_log__seg_path(dir, base, kinds[x], to, sizeof to);
            if (rename(from, to) != 0 && x < 2) unlink(to); /* no new index: it is rebuilt */
        }
        ST_INFO("log", "%s: finished the swap of cleaned segment %020lld (offsets to %lld)", dir,
                (long long)base, (long long)last);
    }
    /* index swaps without their log never committed */
    d = opendir(dir);
    while (d && (de = readdir(d))) {
        if (!ends_with(de->d_name, ".index.swap") && !ends_with(de->d_name, ".timeindex.swap")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    st_err_t e = nswaps ? st_fsync_dir(dir) : ST_OK;
    free(swaps);
    free(bases);
    return e;
}

st_err_t st_log_cleaner_recover(const char *log_dir) {
    DIR *d = opendir(log_dir);
    if (!d) return st_err_from_errno(errno);
    st_err_t e = ST_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (n[0] == '.' || !strchr(n, '-') || ends_with(n, "-delete")) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", log_dir, n);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        st_err_t pe = st_log__cleaner_recover_partition(path);
        if (pe && !e) e = pe;
    }
    closedir(d);
    return e;
}

/* ---- the cleaner thread ---------------------------------------------------------- */

/*
 * cleaner-offset-checkpoint, in each log dir (Kafka's format):
 *   0                            version
 *   N                            entries
 *   <topic> <partition> <offset> where the next pass of that log starts
 */
typedef struct ckpt {
    char *parent; /* the log dir */
    char *topic;
    int32_t partition;
    int64_t first_dirty;
    int64_t tombstone_due;
} ckpt_t;

struct st_log_cleaner {
    st_log_cleaner_config_t cfg;
    st_log_cleaner_list_cb list;
    void *arg;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    volatile int stopping;
    int started;
    ckpt_t *ck;
    int nck;
    char **loaded; /* log dirs whose checkpoint file was read */
    int nloaded;
};

static ckpt_t *ckpt_find(st_log_cleaner_t *c, const char *parent, const char *topic, int32_t p,
                         int create) {
    for (int i = 0; i < c->nck; i++)
        if (c->ck[i].partition == p && !strcmp(c->ck[i].topic, topic) && !strcmp(c->ck[i].parent, parent))
            return &c->ck[i];
    if (!create) return NULL;
    c->ck = st_realloc(c->ck, sizeof *c->ck * (size_t)(c->nck + 1));
    c->ck[c->nck] = (ckpt_t){st_strdup(parent), st_strdup(topic), p, 0, -1};
    return &c->ck[c->nck++];
}

static void ckpt_load(st_log_cleaner_t *c, const char *parent) {
    for (int i = 0; i < c->nloaded; i++)
        if (!strcmp(c->loaded[i], parent)) return;
    c->loaded = st_realloc(c->loaded, sizeof *c->loaded * (size_t)(c->nloaded + 1));
    c->loaded[c->nloaded++] = st_strdup(parent);
    char path[4200], *text;
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", parent);
    if (st_read_file(path, &text, NULL)) return;
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    int version = line ? atoi(line) : -1;
    line = strtok_r(NULL, "\n", &save);
    int n = line ? atoi(line) : -1;
    for (int i = 0; version == 0 && i < n && (line = strtok_r(NULL, "\n", &save)); i++) {
        char topic[256];
        int part;
        long long off;
        if (sscanf(line, "%255s %d %lld", topic, &part, &off) != 3) break;
        ckpt_find(c, parent, topic, part, 1)->first_dirty = off;
    }
    free(text);
}

static void ckpt_write(st_log_cleaner_t *c, const char *parent) {
    st_buf_t b;
    st_buf_init(&b);
    int n = 0;
    for (int i = 0; i < c->nck; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s-%d", c->ck[i].parent, c->ck[i].topic, (int)c->ck[i].partition);
        if (!strcmp(c->ck[i].parent, parent) && access(dir, F_OK) == 0) n++;
    }
    st_buf_printf(&b, "0\n%d\n", n);
    for (int i = 0; i < c->nck; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s-%d", c->ck[i].parent, c->ck[i].topic, (int)c->ck[i].partition);
        if (strcmp(c->ck[i].parent, parent) || access(dir, F_OK)) continue;
        st_buf_printf(&b, "%s %d %lld\n", c->ck[i].topic, (int)c->ck[i].partition,
                      (long long)c->ck[i].first_dirty);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", parent);
    st_err_t e = st_write_file_atomic(path, b.data, b.len);
    if (e) ST_WARN("log", "cannot write %s: %s", path, st_err_msg(e));
    st_buf_fini(&b);
}

/* The dirty ratio of a log as its next pass would see it, and whether
 * max.compaction.lag.ms makes it due whatever the ratio. */
static double dirty_ratio(st_log_t *log, const st_log_compact_config_t *cfg, int64_t first_dirty,
                          int64_t now, int *lag_due) {
    int64_t clean = 0, dirty = 0;
    *lag_due = 0;
    pthread_mutex_lock(&log->lock);
    for (int i = 0; i + 1 < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        if (log->segs[i + 1]->base_offset > log->high_watermark) break;
        if (cfg->min_compaction_lag_ms > 0 && s->max_timestamp > now - cfg->min_compaction_lag_ms)
            break;
        if (log->segs[i + 1]->base_offset <= first_dirty) {
            clean += s->size;
        } else {
            if (!dirty && s->size)
                *lag_due = st_log__compaction_lag_due(log->cfg.max_compaction_lag_ms,
                                                      st_log__seg_first_timestamp(s), now);
            dirty += s->size;
        }
    }
    pthread_mutex_unlock(&log->lock);
    return clean + dirty ? (double)dirty / (double)(clean + dirty) : 0;
}

static int sleep_until(st_log_cleaner_t *c, int64_t ms) {
    pthread_mutex_lock(&c->lock);
    if (!c->stopping) {
        st_cond_wait_ms(&c->cond, &c->lock, ms);
    }
    int stop = c->stopping;
    pthread_mutex_unlock(&c->lock);
    return stop;
}

static void *cleaner_main(void *arg) {
    st_log_cleaner_t *c = arg;
    st_thread_set_name("log-cleaner");
    while (!c->stopping) {
        st_log_cleanable_t *v = NULL;
        int n = c->list(c->arg, &v);
        int64_t now = st_now_ms();
        int best = -1, best_forced = 0;
        double best_ratio = -1;
        for (int i = 0; i < n; i++) {
            st_log_t *log = v[i].log;
            ckpt_load(c, log->parent);
            ckpt_t *k = ckpt_find(c, log->parent, log->topic, log->partition, 1);
            int lag_due;
            double r = dirty_ratio(log, &v[i].cfg, k->first_dirty, now, &lag_due);
            int forced = (k->tombstone_due >= 0 && k->tombstone_due <= now) || lag_due;
            if (r < v[i].cfg.min_cleanable_dirty_ratio && !forced) continue;
            if (r > best_ratio) {
                best = i;
                best_ratio = r;
                best_forced = forced;
            }
        }
        int progressed = 0;
        if (best >= 0) {
            st_log_t *log = v[best].log;
            ckpt_t *k = ckpt_find(c, log->parent, log->topic, log->partition, 1);
            st_log_clean_opts_t o = {k->first_dirty, now, c->cfg.dedupe_bytes,
                                     c->cfg.io_bytes_per_sec, &c->stopping, best_forced};
            st_log_clean_result_t res;
            int64_t t0 = st_mono_ms();
            st_err_t e = st_log_clean(log, &v[best].cfg, &o, &res);
            if (!e && res.cleaned) {
                progressed = 1;
                k->first_dirty = res.first_dirty;
                k->tombstone_due = res.tombstone_due;
                ckpt_write(c, log->parent);
                ST_INFO("log", WHAT_FMT ": cleaned in %lld ms (dirty ratio %.2f%s): %d -> %d segments, "
                               "%lld -> %lld bytes, %lld records kept, %lld removed (%lld tombstones); "
                               "next pass from offset %lld",
                        WHAT_ARGS(log), (long long)(st_mono_ms() - t0), res.dirty_ratio,
                        res.lag_due ? ", past max.compaction.lag.ms" : "",
                        res.segments_before, res.segments_after, (long long)res.bytes_read,
                        (long long)res.bytes_written, (long long)res.records_kept,
                        (long long)res.records_removed, (long long)res.tombstones_removed,
                        (long long)res.first_dirty);
            } else if (!e) {
                k->first_dirty = res.first_dirty;
                k->tombstone_due = -1;
            } else if (e != ST_E_CANCELLED) {
                ST_WARN("log", WHAT_FMT ": cleaning failed: %s", WHAT_ARGS(log), st_err_msg(e));
                k->tombstone_due = -1;
            }
        }
        for (int i = 0; i < n; i++) st_log_release(v[i].log);
        free(v);
        /* nothing to do, or a pass that failed or found nothing: wait
         * (never spin on a log that cannot be cleaned) */
        if (!progressed && sleep_until(c, c->cfg.backoff_ms)) break;
    }
    return NULL;
}

st_log_cleaner_t *st_log_cleaner_new(const st_log_cleaner_config_t *cfg,
                                     st_log_cleaner_list_cb list, void *arg) {
    st_log_cleaner_t *c = st_calloc(1, sizeof *c);
    c->cfg = *cfg;
    if (c->cfg.backoff_ms <= 0) c->cfg.backoff_ms = 15000;
    if (c->cfg.io_bytes_per_sec == INT64_MAX) c->cfg.io_bytes_per_sec = 0;
    c->list = list;
    c->arg = arg;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    return c;
}

void st_log_cleaner_start(st_log_cleaner_t *c) {
    pthread_create(&c->thread, NULL, cleaner_main, c);
    c->started = 1;
}

void st_log_cleaner_destroy(st_log_cleaner_t *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (c->started) pthread_join(c->thread, NULL);
    for (int i = 0; i < c->nck; i++) {
        free(c->ck[i].parent);
        free(c->ck[i].topic);
    }
    free(c->ck);
    for (int i = 0; i < c->nloaded; i++) free(c->loaded[i]);
    free(c->loaded);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

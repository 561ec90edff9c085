/*
 * tier.c - the remote log manager: partitions, the task thread, uploads,
 * remote retention, orphan sweeps and remote reads.
 *
 * One partition's work (upload, retention, sweep) runs as one job at a
 * time on the manager's pool (copy_threads partitions at once); jobs block
 * on the object store, never a broker thread.  The manifest in memory is
 * replaced only after the bucket holds the new one, so a reader always
 * sees a manifest whose objects exist.
 *
 * A kick (a closed segment, DeleteRecords, a retention change, close) that
 * comes while the partition's job runs is not dropped: the job runs again
 * when it ends, since what it was asked for may have come after it looked.
 * A segment whose upload keeps failing is backed off exponentially and
 * leaves at most one attempt's objects behind (see "a segment that keeps
 * failing" below); the copy quota is shared by every copier (quota.c).
 * A partition's mode (st_tier_mode_t, KIP-950) follows its topic's
 * settings without a restart: uploads stop and resume, and tiering
 * switched off deletes the remote log (see "tiering switched off").
 *
 * Locks: t->lock (the partition list, stopping, kicks); p->lock (the
 * manifest in memory and the partition's state).  Never both in the order
 * p -> t.
 */
#include "tier_int.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define SWEEP_INTERVAL_MS (10 * 60 * 1000)

struct st_tier_part {
    st_tier_t *tier;
    pthread_mutex_t lock;
    int refs;
    char *topic, *topic_id;
    int32_t partition;
    char *prefix; /* <topic>-<topicId>/<partition>, or the long-name layout */
    st_os_account_t *account; /* the topic's (t->accounts), carried by each request */
    st_os_t *os; /* the manager's, or a read replica's source (its owner's) */
    char *cache_path;
    st_tier_part_ops_t ops;
    st_tier_retention_t ret;
    st_manifest_t man;
    int64_t durable_log_start; /* log start the bucket's manifest holds */
    int job_running; /* t->lock and p->lock to write; either to read */
    int kicked;      /* t->lock */
    int rerun;       /* asked for while the job ran; t->lock and p->lock */
    int closing, delete_remote;
    int loaded;
    /* this broker leads the partition: only then does the job write to
     * the bucket; a follower that becomes leader reads the manifest again
     * first (another leader wrote it meanwhile).  p->lock. */
    int leading, reload;
    /* the leader epoch this broker leads at, and the highest epoch of a
     * manifest found in the bucket above it (a newer leader's: this one is
     * deposed and writes nothing more at its epoch).  p->lock. */
    int32_t leader_epoch, fenced_epoch;
    int aborted_ready; /* restore_aborted ran since this leadership began (atomic) */
    /* KIP-950 (st_tier_mode_t): what the topic's settings ask.  purge:
     * the bucket owes a deletion (the marker file at purge_path says so
     * across restarts); copy_was_off: uploads were off since the remote
     * log was last known to follow the local one (see apply_retention).
     * p->lock. */
    int mode, purge, copy_was_off;
    char *purge_path;
    int64_t last_upload_ms;
    int64_t next_sweep_ms; /* mono; 0: at the first job */
    char *last_error; /* NULL: none */
    char *status_path; /* remote-upload-status.json beside the cached manifest */
    /* The segment whose upload keeps failing (uploads go in offset order,
     * so there is at most one), backed off exponentially.  In memory only:
     * a restart tries it at once.  Written by the job, read under p->lock. */
    struct {
        int64_t base, last;  /* -1: none failing */
        int failures;        /* in a row */
        int64_t wait_ms;     /* the current back-off */
        int64_t next_ms;     /* monotonic: no attempt before */
        int64_t next_wall_ms, since_wall_ms;
        char *cause;
        /* objects of the last failed attempt not known to be gone ("":
         * none); in_manifest: it failed storing the manifest, which may
         * name them after all */
        char leftover_id[23];
        int leftover_in_manifest;
    } fail;
    /* The topic's descriptor (ST_TIER_TOPIC_DESCRIPTOR, partition 0 only):
     * the text the broker gave, and whether the bucket may lack it (set
     * by a new text, a new leadership and tiering on again).  p->lock. */
    char *desc;
    int desc_dirty;
    /* Readers of the remote part (st_tier_read): the highest offset read
     * lately and when; a read below it means a second reader (or a
     * re-read), and until shared_until_ms the partition's chunks go to
     * the disk cache rather than away when memory is short.  p->lock. */
    int64_t read_hi, read_hi_ms, shared_until_ms;
};

/*
 * Key pieces (between '/') stay within ST_TIER_KEY_PIECE_MAX bytes, so
 * they fit a file name (the file backend adds '@' to a directory and
 * escapes a leading '.'; MinIO keeps each piece as a file name too).
 * <topic>-<topicId> fits for topics up to 227 characters; a longer one
 * (Kafka allows 249) is laid out as <topic>/<topicId>/<partition>, which
 * no short name's <topic>-<topicId>/<partition> can collide with (the
 * second piece is 22 characters, not a number).
 */
#define ST_TIER_KEY_PIECE_MAX 250

static int long_layout(const char *topic, const char *topic_id) {
    return strlen(topic) + 1 + strlen(topic_id) > ST_TIER_KEY_PIECE_MAX;
}

char *st_tier_topic_prefix(const char *topic, const char *topic_id) {
    if (long_layout(topic, topic_id)) return st_strprintf("%s/%s", topic, topic_id);
    return st_strprintf("%s-%s", topic, topic_id);
}

char *st_tier_part_prefix(const char *topic, const char *topic_id, int32_t partition) {
    char *t = st_tier_topic_prefix(topic, topic_id);
    char *p = st_strprintf("%s/%d", t, (int)partition);
    free(t);
    return p;
}

/* The descriptor's key: beside the partitions' prefixes, whichever
 * layout the partition is under (p->prefix without "/<partition>"). */
static char *descriptor_key(const st_tier_part_t *p) {
    const char *slash = strrchr(p->prefix, '/');
    return st_strprintf("%.*s/" ST_TIER_TOPIC_DESCRIPTOR, (int)(slash - p->prefix), p->prefix);
}

static void purge_owed_locked(st_tier_part_t *p);

static st_tier_part_t *part_keep(st_tier_part_t *p) {
    __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    return p;
}

static void part_release(st_tier_part_t *p) {
    if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (p->ops.release) p->ops.release(p->ops.arg);
    st_tier__manifest_fini(&p->man);
    pthread_mutex_destroy(&p->lock);
    free(p->topic);
    free(p->topic_id);
    free(p->cache_path);
    free(p->prefix);
    free(p->last_error);
    free(p->status_path);
    free(p->purge_path);
    free(p->fail.cause);
    free(p->desc);
    free(p);
}

static void set_error(st_tier_part_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message is whole (keys and causes are long: a 249-character topic
 * makes 330-byte keys); it was cut at 160 bytes. */
static void set_error(st_tier_part_t *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = st_vstrprintf(fmt, ap);
    va_end(ap);
    ST_LOG_RATELIMITED(ST_LOG_WARN, "tiering", 10000, "%s-%d: %s", p->topic, (int)p->partition, msg);
    pthread_mutex_lock(&p->lock);
    free(p->last_error);
    p->last_error = msg;
    pthread_mutex_unlock(&p->lock);
}

static void clear_error(st_tier_part_t *p) {
    pthread_mutex_lock(&p->lock);
    free(p->last_error);
    p->last_error = NULL;
    pthread_mutex_unlock(&p->lock);
}

/* ---- manifests in the bucket and in the local cache ------------------------ */

/* Messages (why) below are heap strings the caller frees: they hold keys
 * and the object store's causes, whatever their length. */

static char *manifest_key(const char *prefix) { return st_strprintf("%s/manifest.json", prefix); }

/* GET a whole object into memory; the caller frees the result. */
static st_os_result_t *get_whole(st_tier_part_t *p, const char *key) {
    st_os_request_t rq = {.op = ST_OS_GET, .key = key, .account = p->account, .offset = 0,
                          .length = ST_OS_TO_END};
    rq.sink.kind = ST_OS_SINK_ALLOC;
    return st_os_run(p->os, &rq);
}

/* The manifest object under prefix as stored: ST_OK with its bytes
 * (malloc'ed, NUL-terminated) and, when etag is asked for, its ETag;
 * ST_E_NOT_FOUND (none yet); or an error (*why says what). */
static st_err_t manifest_get_raw(st_tier_part_t *p, const char *prefix, char **text,
                                 size_t *len, char **etag, char **why) {
    char *key = manifest_key(prefix);
    st_os_result_t *res = get_whole(p, key);
    st_err_t e = res->status;
    if (e == ST_OK) {
        *len = (size_t)res->length;
        *text = st_malloc(*len + 1);
        memcpy(*text, res->data, *len);
        (*text)[*len] = 0;
        if (etag) *etag = st_strdup(res->etag ? res->etag : "");
    } else {
        *why = st_strdup(res->message);
    }
    st_os_result_free(res);
    free(key);
    return e;
}

/* Decode the manifest bytes of prefix's object (*why on failure). */
static st_err_t manifest_decode_at(const char *prefix, const char *text, size_t len,
                                   st_manifest_t *out, char **why) {
    char dwhy[200] = ""; /* decode's own reasons are short */
    st_err_t e = st_tier__manifest_decode(text, len, out, dwhy, sizeof dwhy);
    if (e) {
        char *key = manifest_key(prefix);
        *why = st_strprintf("manifest %s: %s", key, dwhy);
        free(key);
    }
    return e;
}

/* Read the manifest under prefix: ST_OK, ST_E_NOT_FOUND (none yet), or an
 * error (*why says what). */
static st_err_t manifest_fetch_at(st_tier_part_t *p, const char *prefix, st_manifest_t *out,
                                  char **why) {
    char *text = NULL;
    size_t len = 0;
    st_err_t e = manifest_get_raw(p, prefix, &text, &len, NULL, why);
    if (e == ST_OK) e = manifest_decode_at(prefix, text, len, out, why);
    free(text);
    return e;
}

static st_err_t manifest_fetch(st_tier_part_t *p, st_manifest_t *out, char **why) {
    return manifest_fetch_at(p, p->prefix, out, why);
}

/* How many times a manifest write starts over when another writer changed
 * the object between our read and our conditional put. */
#define MANIFEST_CAS_TRIES 5

void (*st_tier__manifest_put_hook)(const char *key);

/* Write m as the bucket's manifest, stamped with this broker's leader
 * epoch.  Fenced: when the bucket's manifest was written at a higher
 * leader epoch, a newer leader owns the partition and this one (deposed,
 * perhaps cut off and not yet told) must not put its older view back:
 * FENCED_LEADER_EPOCH, and the partition writes nothing more until it
 * leads at a newer epoch.  The put is conditional on the ETag of the
 * manifest read (If-Match; If-None-Match when there was none), so a
 * leader elected between the read and the write is never overwritten:
 * the put fails its condition and the loop reads again, then sees the
 * higher epoch.  A store that ignores conditions leaves a window of one
 * write, which that newer leader's next write repairs (its manifest names
 * every segment it holds). */
static st_err_t manifest_store(st_tier_part_t *p, const st_manifest_t *m, char **why) {
    pthread_mutex_lock(&p->lock);
    int32_t epoch = p->leader_epoch;
    pthread_mutex_unlock(&p->lock);
    st_manifest_t w = *m; /* shallow: only the stamp differs */
    w.leader_epoch = epoch;
    char *key = manifest_key(p->prefix);
    char *text = st_tier__manifest_encode(&w, p->topic, p->topic_id, p->partition);
    size_t tlen = strlen(text);
    st_err_t e = ST_E_PRECONDITION_FAILED;
    for (int tries = 0; tries < MANIFEST_CAS_TRIES && e == ST_E_PRECONDITION_FAILED; tries++) {
        st_manifest_t cur;
        st_tier__manifest_init(&cur);
        char *etag = NULL, *fwhy = NULL, *now = NULL;
        size_t nlen = 0;
        st_err_t fe = manifest_get_raw(p, p->prefix, &now, &nlen, &etag, &fwhy);
        if (fe == ST_OK) fe = manifest_decode_at(p->prefix, now, nlen, &cur, &fwhy);
        int32_t theirs = cur.leader_epoch;
        st_tier__manifest_fini(&cur);
        /* after a failed condition, our own earlier put may be what is
         * there: its answer was lost and its retry then found it in place */
        int ours = tries > 0 && fe == ST_OK && nlen == tlen && !memcmp(now, text, tlen);
        free(now);
        if (fe && fe != ST_E_NOT_FOUND) {
            *why = st_strprintf("reading the manifest before writing it: %s", fwhy);
            free(fwhy);
            free(etag);
            e = fe;
            break;
        }
        free(fwhy);
        if (fe == ST_OK && epoch >= 0 && theirs > epoch) {
            pthread_mutex_lock(&p->lock);
            p->fenced_epoch = ST_MAX(p->fenced_epoch, theirs);
            p->leading = 0;
            pthread_mutex_unlock(&p->lock);
            ST_WARN("tiering", "%s-%d: the bucket's manifest was written at leader epoch %d, this "
                    "broker leads at %d: not overwriting it (a newer leader owns the partition)",
                    p->topic, (int)p->partition, (int)theirs, (int)epoch);
            *why = st_strprintf("manifest written at leader epoch %d, above ours (%d)",
                                (int)theirs, (int)epoch);
            free(etag);
            e = ST_E_FENCED_LEADER_EPOCH;
            break;
        }
        if (ours) {
            free(etag);
            e = ST_OK;
            break;
        }
        st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .account = p->account};
        rq.src.kind = ST_OS_SRC_MEM;
        rq.src.data = text;
        rq.src.length = tlen;
        if (fe == ST_OK && etag && etag[0]) rq.if_match = etag;
        else if (fe == ST_E_NOT_FOUND) rq.if_none_match = 1;
        if (st_tier__manifest_put_hook) st_tier__manifest_put_hook(key);
        st_os_result_t *res = st_os_run(p->os, &rq);
        e = res->status;
        if (e == ST_E_PRECONDITION_FAILED)
            ST_INFO("tiering", "%s-%d: the manifest changed while this broker wrote it (%s); "
                    "reading it again", p->topic, (int)p->partition, res->message);
        else if (e)
            *why = st_strprintf("manifest write: %s", res->message);
        st_os_result_free(res);
        free(etag);
    }
    if (e == ST_E_PRECONDITION_FAILED)
        *why = st_strprintf("manifest write: the object changed under %d conditional puts in a row",
                            MANIFEST_CAS_TRIES);
    /* The local copy lets a restart know the remote end without a GET. */
    if (!e && p->cache_path) st_write_file_atomic(p->cache_path, text, tlen);
    free(text);
    free(key);
    return e;
}

/* Install m, which the bucket now holds, as the partition's manifest and
 * tell the broker.  A DeleteRecords that arrived after the job copied the
 * manifest it built m from moved the start in memory past m's: that start
 * is kept (the log start only moves up), and durable_log_start says what
 * the bucket holds, so the next pass stores it. */
static void manifest_install(st_tier_part_t *p, st_manifest_t *m) {
    pthread_mutex_lock(&p->lock);
    if (p->mode == ST_TIER_DELETE) {
        /* tiering went off while this job wrote m (an upload in flight):
         * nothing remote is served any more, and the purge that follows
         * deletes what m names */
        pthread_mutex_unlock(&p->lock);
        st_tier__manifest_fini(m);
        return;
    }
    int64_t asked = p->man.log_start;
    st_tier__manifest_fini(&p->man);
    p->man = *m;
    st_tier__manifest_init(m);
    p->durable_log_start = p->man.log_start;
    if (asked > p->man.log_start) p->man.log_start = asked;
    int64_t start = st_tier__manifest_start(&p->man), end = st_tier__manifest_end(&p->man);
    int tell = !p->closing && p->ops.remote_changed;
    pthread_mutex_unlock(&p->lock);
    if (tell) p->ops.remote_changed(p->ops.arg, start, end);
}

/* ---- uploads ---------------------------------------------------------------- */

/* A segment above the object store's part size goes up in at most this
 * many parts (larger than configured when needed): with 1 GiB segments, 10
 * requests per GiB rather than 134 with 8 MiB parts.  The parts are read
 * from the file, so their size costs no memory. */
#define SEGMENT_MAX_PARTS 4

static st_err_t put_file(st_tier_part_t *p, const char *key, const char *path, int crc_known,
                         uint32_t crc, int max_parts, char **why) {
    st_tier_t *t = p->tier;
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .account = p->account,
                          .crc32c_known = crc_known, .crc32c = crc, .max_parts = max_parts};
    rq.src.kind = ST_OS_SRC_FILE;
    rq.src.path = path;
    rq.src.offset = 0;
    rq.src.length = ST_OS_TO_END;
    st_os_result_t *res = st_os_run(p->os, &rq);
    st_err_t e = res->status;
    ST_TIER_STAT_ADD(t, upload_requests, 1);
    if (e) *why = st_strprintf("upload of %s: %s", key, res->message);
    st_os_result_free(res);
    return e;
}

static st_err_t put_mem(st_tier_part_t *p, const char *key, const void *data, size_t len,
                        char **why) {
    st_tier_t *t = p->tier;
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .account = p->account};
    rq.src.kind = ST_OS_SRC_MEM;
    rq.src.data = data;
    rq.src.length = len;
    st_os_result_t *res = st_os_run(p->os, &rq);
    st_err_t e = res->status;
    ST_TIER_STAT_ADD(t, upload_requests, 1);
    if (e) *why = st_strprintf("upload of %s: %s", key, res->message);
    st_os_result_free(res);
    return e;
}

/* CRC32C of a whole file (the manifest records it; readers of whole
 * objects check it). */
static st_err_t file_crc(const char *path, int64_t size, uint32_t *crc) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return st_err_from_errno(errno);
    uint8_t *buf = st_malloc(1 << 20);
    uint32_t c = 0;
    int64_t off = 0;
    st_err_t e = ST_OK;
    while (off < size) {
        size_t want = (size_t)ST_MIN((int64_t)(1 << 20), size - off), got = 0;
        e = st_pread_all(fd, buf, want, off, &got);
        if (e || got != want) {
            if (!e) e = ST_E_IO;
            break;
        }
        c = st_crc32c(c, buf, got);
        off += (int64_t)got;
    }
    free(buf);
    close(fd);
    *crc = c;
    return e;
}

static int64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* The copy quota, shared by every copier thread: wait until it allows a
 * segment to start, then charge the segment's bytes (its four objects).
 * Once it took a per-thread sleep of at most 10 s after each segment, so
 * two copiers uploaded at twice the quota, a segment worth more than 10 s
 * of it went faster, and shutdown waited for the sleep.  -1 when the
 * manager stops or the partition closes meanwhile. */
static int copy_quota_take(st_tier_part_t *p, int64_t bytes) {
    st_tier_t *t = p->tier;
    if (t->cfg.copy_max_bytes_per_s <= 0) return 0;
    int rc = 0;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        if (t->stopping || p->closing) {
            rc = -1;
            break;
        }
        int64_t wait = st_tier__quota_wait_ms(&t->copy_quota);
        if (wait == 0) break;
        st_cond_wait_ms(&t->cond, &t->lock, ST_MIN(wait, 1000));
    }
    if (rc == 0) st_tier__quota_charge(&t->copy_quota, (double)bytes);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

/* ---- a segment that keeps failing ---------------------------------------------
 *
 *   upload fails ---> upload_failed: its objects deleted at once (unless the
 *        |            manifest step failed: the bucket's manifest may name
 *        |            them), failures++, wait = min(max, base * 2^(n-1)) +-
 *        |            jitter; WARN line; status file written
 *        v
 *   attempt_due: no attempt of that segment before the wait is over;
 *   leftovers_settled: the last attempt's objects go (or, if the bucket's
 *        manifest names them, that attempt did commit) before a new one
 *        starts, so a failing segment never leaves more than one
 *        attempt's objects behind
 *        |
 *   upload succeeds --> fail_reset: INFO line, status file removed
 */

static int64_t retry_wait_ms(const st_tier_t *t, int failures) {
    int64_t base = t->cfg.retry_backoff_ms > 0 ? t->cfg.retry_backoff_ms : 500;
    int64_t max = t->cfg.retry_backoff_max_ms > 0 ? t->cfg.retry_backoff_max_ms : 30000;
    int64_t w = base;
    for (int i = 1; i < failures && w < max; i++) w *= 2;
    if (w > max) w = max;
    double j = t->cfg.retry_jitter;
    if (j > 0) {
        uint32_t r;
        st_random_bytes(&r, sizeof r);
        w = (int64_t)((double)w * (1.0 + j * (2.0 * (double)r / 4294967295.0 - 1.0)));
    }
    return w < 1 ? 1 : w;
}

/* remote-upload-status.json beside the cached manifest: what `strata
 * tiering status` shows of a back-off (the state itself is in memory). */
static void status_write(st_tier_part_t *p) {
    if (!p->status_path) return;
    if (p->fail.base < 0) {
        unlink(p->status_path);
        return;
    }
    json_t *o = json_pack("{s:s, s:i, s:I, s:I, s:i, s:I, s:I, s:I, s:s}", "topic", p->topic,
                          "partition", (int)p->partition, "segment_base_offset",
                          (json_int_t)p->fail.base, "segment_last_offset", (json_int_t)p->fail.last,
                          "failures", p->fail.failures, "backoff_ms", (json_int_t)p->fail.wait_ms,
                          "next_attempt_ms", (json_int_t)p->fail.next_wall_ms, "failing_since_ms",
                          (json_int_t)p->fail.since_wall_ms, "cause",
                          p->fail.cause ? p->fail.cause : "");
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (text) st_write_file_atomic(p->status_path, text, strlen(text));
    free(text);
    json_decref(o);
}

char *st_tier_upload_status_describe(const char *partition_dir, int64_t now_ms) {
    char *path = st_strprintf("%s/" ST_TIER_UPLOAD_STATUS_FILE, partition_dir);
    char *text = NULL, *out = NULL;
    size_t len = 0;
    if (st_read_file(path, &text, &len) == ST_OK) {
        json_error_t jerr;
        json_t *o = json_loadb(text, len, 0, &jerr);
        json_int_t base = 0, last = 0, next = 0;
        int failures = 0;
        const char *cause = "";
        if (o && json_unpack(o, "{s:I, s:I, s:i, s:I, s:s}", "segment_base_offset", &base,
                             "segment_last_offset", &last, "failures", &failures,
                             "next_attempt_ms", &next, "cause", &cause) == 0) {
            int64_t in = (int64_t)next - now_ms;
            char when[64];
            if (in > 0) snprintf(when, sizeof when, "in %.1f s", (double)in / 1000.0);
            else snprintf(when, sizeof when, "due (%.1f s ago)", (double)-in / 1000.0);
            out = st_strprintf("upload of segment %lld-%lld failed %d time%s in a row, backing "
                               "off: next attempt %s; last cause: %s",
                               (long long)base, (long long)last, failures,
                               failures == 1 ? "" : "s", when, cause);
        } else {
            out = st_strprintf("unreadable %s", path);
        }
        json_decref(o);
    }
    free(text);
    free(path);
    return out;
}

static void fail_reset(st_tier_part_t *p) {
    if (p->fail.base < 0 && !p->fail.leftover_id[0]) return;
    pthread_mutex_lock(&p->lock);
    p->fail.base = p->fail.last = -1;
    p->fail.failures = 0;
    p->fail.wait_ms = p->fail.next_ms = p->fail.next_wall_ms = p->fail.since_wall_ms = 0;
    free(p->fail.cause);
    p->fail.cause = NULL;
    p->fail.leftover_id[0] = 0;
    p->fail.leftover_in_manifest = 0;
    pthread_mutex_unlock(&p->lock);
    status_write(p);
}

/* Delete the objects of one attempt (deleting a missing one
 * succeeds); 0 when they are gone. */
static int delete_attempt(st_tier_part_t *p, int64_t base, const char *id) {
    static const char *kinds[] = {"log", "index", "timeindex", "epochs", "txnindex", "snapshot"};
    st_rseg_t r;
    memset(&r, 0, sizeof r);
    r.base_offset = base;
    snprintf(r.id, sizeof r.id, "%s", id);
    char *keys[ST_ARRAY_SIZE(kinds)];
    for (size_t k = 0; k < ST_ARRAY_SIZE(kinds); k++)
        keys[k] = st_tier__object_key(p->prefix, &r, kinds[k]);
    st_os_request_t rq = {.op = ST_OS_DELETE_BATCH, .account = p->account,
                          .keys = (const char *const *)keys, .nkeys = ST_ARRAY_SIZE(kinds)};
    st_os_result_t *res = st_os_run(p->os, &rq);
    int rc = res->status == ST_OK ? 0 : -1;
    if (rc)
        ST_LOG_RATELIMITED(ST_LOG_WARN, "tiering", 10000, "%s-%d: deleting the objects of a failed "
                           "upload of segment %lld (%s.*): %s", p->topic, (int)p->partition,
                           (long long)base, keys[0], res->message);
    st_os_result_free(res);
    for (size_t k = 0; k < ST_ARRAY_SIZE(kinds); k++) free(keys[k]);
    return rc;
}

static void upload_failed(st_tier_part_t *p, const st_tier_segment_t *seg, const char *id,
                          int in_manifest, const char *why) {
    st_tier_t *t = p->tier;
    /* What the attempt wrote goes now, unless the manifest may name it. */
    int leftover = id[0] && (in_manifest || delete_attempt(p, seg->base_offset, id) != 0);
    pthread_mutex_lock(&p->lock);
    if (p->fail.base != seg->base_offset) {
        p->fail.failures = 0;
        p->fail.since_wall_ms = st_now_ms();
    }
    p->fail.base = seg->base_offset;
    p->fail.last = seg->last_offset;
    p->fail.failures++;
    p->fail.wait_ms = retry_wait_ms(t, p->fail.failures);
    p->fail.next_ms = st_mono_ms() + p->fail.wait_ms;
    p->fail.next_wall_ms = st_now_ms() + p->fail.wait_ms;
    free(p->fail.cause);
    p->fail.cause = st_strdup(why);
    if (leftover) {
        snprintf(p->fail.leftover_id, sizeof p->fail.leftover_id, "%s", id);
        p->fail.leftover_in_manifest = in_manifest;
    }
    int failures = p->fail.failures;
    int64_t wait = p->fail.wait_ms;
    free(p->last_error);
    p->last_error = st_strdup(why);
    pthread_mutex_unlock(&p->lock);
    ST_WARN("tiering", "%s-%d: upload of segment %lld-%lld failed (%d time%s in a row): %s; "
            "backing off, next attempt in %lld ms", p->topic, (int)p->partition,
            (long long)seg->base_offset, (long long)seg->last_offset, failures,
            failures == 1 ? "" : "s", why, (long long)wait);
    status_write(p);
}

/* May uploads from the remote end (end) go on now?  The failing segment is
 * the next one unless the remote part already passed it (a leftover that
 * did commit); the first segment of an empty remote part may start above
 * end. */
static int attempt_due(st_tier_part_t *p, int64_t end) {
    return p->fail.base < 0 || p->fail.base < end || st_mono_ms() >= p->fail.next_ms;
}

/* Before a new attempt: the last failed attempt's objects, if they were
 * not deleted, go first; if that attempt failed storing the manifest, the
 * bucket's manifest is read: naming them, that attempt did commit (it is
 * installed).  0: go on; -1: not now (tried again after the back-off). */
static int leftovers_settled(st_tier_part_t *p) {
    if (!p->fail.leftover_id[0]) return 0;
    if (p->fail.leftover_in_manifest) {
        st_manifest_t m;
        st_tier__manifest_init(&m);
        char *why = NULL;
        st_err_t e = manifest_fetch(p, &m, &why);
        free(why);
        if (e != ST_OK && e != ST_E_NOT_FOUND) return -1;
        int named = 0;
        for (int i = 0; i < m.nsegs; i++)
            if (!strcmp(m.segs[i].id, p->fail.leftover_id)) named = 1;
        if (named) {
            ST_INFO("tiering", "%s-%d: the manifest write that seemed to fail did commit "
                    "segment %lld", p->topic, (int)p->partition, (long long)p->fail.base);
            manifest_install(p, &m);
            fail_reset(p);
            return 0;
        }
        st_tier__manifest_fini(&m);
    }
    if (delete_attempt(p, p->fail.base, p->fail.leftover_id)) return -1;
    pthread_mutex_lock(&p->lock);
    p->fail.leftover_id[0] = 0;
    pthread_mutex_unlock(&p->lock);
    return 0;
}

/* Upload a small file of a segment (read whole first) as its kind
 * object; a file gone meanwhile (retention, a truncation) is none:
 * *uploaded stays 0 then. */
static st_err_t put_small_file(st_tier_part_t *p, const st_rseg_t *r, const char *kind,
                               const char *path, int *uploaded, char **why) {
    char *data = NULL;
    size_t len = 0;
    *uploaded = 0;
    if (st_read_file(path, &data, &len)) return ST_OK;
    char *key = st_tier__object_key(p->prefix, r, kind);
    st_err_t e = put_mem(p, key, data, len, why);
    free(key);
    free(data);
    *uploaded = !e;
    return e;
}

static st_err_t upload_segment(st_tier_part_t *p, const st_tier_segment_t *seg) {
    st_tier_t *t = p->tier;
    char *why = NULL, *key = NULL;
    int in_manifest = 0;
    if (copy_quota_take(p, seg->size_bytes + file_size(seg->index_path) +
                               file_size(seg->timeindex_path)))
        return ST_E_RETRYABLE; /* stopping: the segment waits for the next start */
    st_rseg_t r;
    memset(&r, 0, sizeof r);
    st_uuid_t id;
    st_uuid_random(&id);
    st_uuid_format(&id, r.id);
    r.base_offset = seg->base_offset;
    r.last_offset = seg->last_offset;
    r.max_timestamp = seg->max_timestamp;
    r.size_bytes = seg->size_bytes;
    r.nepochs = seg->nepochs;
    r.epochs = st_malloc(sizeof *r.epochs * (size_t)(seg->nepochs + 1));
    memcpy(r.epochs, seg->epochs, sizeof *r.epochs * (size_t)seg->nepochs);
    st_err_t e = file_crc(seg->log_path, seg->size_bytes, &r.crc32c);
    if (e) why = st_strprintf("reading %s: %s", seg->log_path, st_err_msg(e));

    /* The objects first, under a fresh id: a retry never overwrites. */
    if (!e) {
        key = st_tier__object_key(p->prefix, &r, "log");
        e = put_file(p, key, seg->log_path, 1, r.crc32c, SEGMENT_MAX_PARTS, &why);
        free(key);
    }
    if (!e) {
        key = st_tier__object_key(p->prefix, &r, "index");
        e = put_file(p, key, seg->index_path, 0, 0, 0, &why);
        free(key);
    }
    if (!e) {
        key = st_tier__object_key(p->prefix, &r, "timeindex");
        e = put_file(p, key, seg->timeindex_path, 0, 0, 0, &why);
        free(key);
    }
    /* The transaction index and the producer snapshot, when the segment
     * has them (Kafka's RemoteLogSegmentData transactionIndex and
     * producerSnapshotIndex): read_committed fetches of remote offsets
     * after a restart, and a replica restored from the bucket, need them. */
    if (!e && seg->txnindex_path[0]) e = put_small_file(p, &r, "txnindex", seg->txnindex_path,
                                                        &r.has_txnindex, &why);
    if (!e && seg->snapshot_path[0]) e = put_small_file(p, &r, "snapshot", seg->snapshot_path,
                                                        &r.has_snapshot, &why);
    if (!e) {
        st_buf_t b;
        st_buf_init(&b);
        st_buf_printf(&b, "0\n%d\n", seg->nepochs);
        for (int i = 0; i < seg->nepochs; i++)
            st_buf_printf(&b, "%d %lld\n", seg->epochs[i].epoch, (long long)seg->epochs[i].start_offset);
        key = st_tier__object_key(p->prefix, &r, "epochs");
        e = put_mem(p, key, b.data, b.len, &why);
        free(key);
        st_buf_fini(&b);
    }
    /* Then the manifest that names them: the commit point. */
    st_manifest_t next;
    st_tier__manifest_init(&next);
    if (!e) {
        pthread_mutex_lock(&p->lock);
        st_tier__manifest_copy(&next, &p->man);
        pthread_mutex_unlock(&p->lock);
        if (next.nsegs == 0 && next.log_start < r.base_offset) next.log_start = r.base_offset;
        next.segs = st_realloc(next.segs, sizeof *next.segs * (size_t)(next.nsegs + 1));
        next.segs[next.nsegs++] = r;
        memset(&r, 0, sizeof r);
        snprintf(r.id, sizeof r.id, "%s", next.segs[next.nsegs - 1].id); /* for the failure path */
        in_manifest = 1;
        e = manifest_store(p, &next, &why);
    }
    if (e) {
        free(r.epochs);
        st_tier__manifest_fini(&next);
        ST_TIER_STAT_ADD(t, upload_failures, 1);
        upload_failed(p, seg, r.id, in_manifest, why ? why : st_err_msg(e));
        free(why);
        return e;
    }
    manifest_install(p, &next);
    pthread_mutex_lock(&p->lock);
    p->last_upload_ms = st_now_ms();
    pthread_mutex_unlock(&p->lock);
    clear_error(p);
    ST_TIER_STAT_ADD(t, bytes_uploaded, seg->size_bytes);
    ST_TIER_STAT_ADD(t, segments_uploaded, 1);
    int failures = p->fail.base == seg->base_offset ? p->fail.failures : 0;
    if (failures)
        ST_INFO("tiering", "%s-%d: segment %lld-%lld (%lld bytes) is in the bucket, after %d "
                "failed attempt%s", p->topic, (int)p->partition, (long long)seg->base_offset,
                (long long)seg->last_offset, (long long)seg->size_bytes, failures,
                failures == 1 ? "" : "s");
    else
        ST_INFO("tiering", "%s-%d: segment %lld-%lld (%lld bytes) is in the bucket", p->topic,
                (int)p->partition, (long long)seg->base_offset, (long long)seg->last_offset,
                (long long)seg->size_bytes);
    fail_reset(p);
    return ST_OK;
}

/* ---- deletes ---------------------------------------------------------------- */

static void delete_objects(st_tier_part_t *p, const char *const *keys, size_t n) {
    st_tier_t *t = p->tier;
    if (!n) return;
    st_os_request_t rq = {.op = ST_OS_DELETE_BATCH, .account = p->account, .keys = keys,
                          .nkeys = n};
    st_os_result_t *res = st_os_run(p->os, &rq);
    if (res->status == ST_OK) ST_TIER_STAT_ADD(t, objects_deleted, n - res->nfailed);
    else ST_LOG_RATELIMITED(ST_LOG_WARN, "tiering", 10000, "deleting %zu objects: %s", n, res->message);
    st_os_result_free(res);
}

static void delete_segment_objects(st_tier_part_t *p, const st_rseg_t *segs, int n) {
    char **keys = st_malloc(sizeof *keys * (size_t)(6 * n + 1));
    size_t nk = 0;
    for (int i = 0; i < n; i++) nk += (size_t)st_tier__segment_keys(p->prefix, &segs[i], keys + nk);
    delete_objects(p, (const char *const *)keys, nk);
    for (size_t i = 0; i < nk; i++) free(keys[i]);
    free(keys);
}

/* Total retention and DeleteRecords: the manifest without the segments
 * first, their objects after.
 *
 * While uploads are off (remote.log.copy.disable), local retention goes
 * by the total bounds and may delete segments the bucket never got; a
 * local log that then starts above the remote end leaves the remote part
 * cut off from it: a consumer reading on from its end would find nothing
 * (the offsets between are gone), and uploads could not resume without a
 * hole.  Kafka moves the log start offset to the local log start when a
 * segment goes in that mode, and the remote segments below it go; so do
 * we, as soon as the job sees the cut (also right after uploads come
 * back on, until the remote log follows the local one again). */
static void apply_retention(st_tier_part_t *p) {
    st_manifest_t cur, next;
    pthread_mutex_lock(&p->lock);
    st_tier__manifest_copy(&cur, &p->man);
    st_tier_retention_t ret = p->ret;
    int64_t durable = p->durable_log_start;
    int cut_check = p->mode == ST_TIER_READ_ONLY || p->copy_was_off;
    pthread_mutex_unlock(&p->lock);
    int64_t now = st_now_ms();
    int64_t remote = st_tier__manifest_bytes(&cur);
    int64_t local = p->ops.local_bytes_above ? p->ops.local_bytes_above(p->ops.arg, st_tier__manifest_end(&cur)) : 0;
    int64_t local_start = cut_check && p->ops.local_log_start ? p->ops.local_log_start(p->ops.arg) : -1;
    int cut_off = cur.nsegs > 0 && local_start > st_tier__manifest_end(&cur);
    if (cut_check && !cut_off) {
        pthread_mutex_lock(&p->lock);
        if (p->mode == ST_TIER_ON) p->copy_was_off = 0; /* the remote log follows the local one */
        pthread_mutex_unlock(&p->lock);
    }
    if (cut_off)
        ST_INFO("tiering", "%s-%d: the local log starts at %lld, above the remote end %lld (segments "
                "between went while uploads were off): the log start offset moves to %lld and the "
                "remote segments below go", p->topic, (int)p->partition, (long long)local_start,
                (long long)st_tier__manifest_end(&cur), (long long)local_start);
    int n = 0;
    while (n < cur.nsegs) {
        const st_rseg_t *s = &cur.segs[n];
        int go = s->last_offset < cur.log_start || cut_off; /* DeleteRecords, or cut off */
        if (!go && ret.retention_ms >= 0 && now - s->max_timestamp > ret.retention_ms) go = 1;
        if (!go && ret.retention_bytes >= 0 && remote + local - s->size_bytes >= ret.retention_bytes) go = 1;
        if (!go) break;
        remote -= s->size_bytes;
        n++;
    }
    if (n == 0 && durable == cur.log_start) {
        st_tier__manifest_fini(&cur);
        return;
    }
    st_tier__manifest_init(&next);
    next.log_start = cur.log_start;
    if (n > 0) next.log_start = ST_MAX(next.log_start, cur.segs[n - 1].last_offset + 1);
    next.nsegs = cur.nsegs - n;
    next.segs = st_calloc((size_t)next.nsegs + 1, sizeof *next.segs);
    for (int i = 0; i < next.nsegs; i++) {
        next.segs[i] = cur.segs[n + i];
        cur.segs[n + i].epochs = NULL; /* moved */
    }
    char *why = NULL;
    if (manifest_store(p, &next, &why)) {
        set_error(p, "%s", why);
        free(why);
        st_tier__manifest_fini(&next);
        st_tier__manifest_fini(&cur);
        return;
    }
    int64_t stored_start = st_tier__manifest_start(&next);
    manifest_install(p, &next);
    if (n > 0) {
        delete_segment_objects(p, cur.segs, n);
        ST_TIER_STAT_ADD(p->tier, segments_deleted, n);
        ST_INFO("tiering", "%s-%d: %d remote segment(s) past retention deleted; the bucket's "
                "remote log now starts at %lld", p->topic, (int)p->partition, n,
                (long long)stored_start);
    }
    st_tier__manifest_fini(&cur);
}

/* Objects under the partition's prefix that the manifest does not name
 * and that are at least min_age_ms old (by the store's modification
 * time): left by an upload cut short.  Only one job per partition runs
 * here, so this broker is writing none of them; the age keeps it off an
 * upload another broker still has in flight (a leader just deposed that
 * has not heard yet).  Returns the ms until the youngest object left is
 * old enough, -1 when none was left. */
typedef struct orphan_scan {
    st_tier_part_t *p;
    size_t plen; /* the prefix's, stripped from keys */
    int64_t now, min_age_ms, wait;
    size_t young, n, cap;
    char **orphans;
} orphan_scan_t;

static void scan_orphan(const st_os_entry_t *entry, void *arg) {
    orphan_scan_t *o = arg;
    st_tier_part_t *p = o->p;
    const char *k = entry->key + o->plen;
    if (!strcmp(k, "manifest.json")) return;
    int named = 0;
    pthread_mutex_lock(&p->lock);
    for (int s = 0; s < p->man.nsegs && !named; s++) {
        char want[64];
        snprintf(want, sizeof want, "%020lld-%s.", (long long)p->man.segs[s].base_offset,
                 p->man.segs[s].id);
        named = !strncmp(k, want, strlen(want));
    }
    pthread_mutex_unlock(&p->lock);
    if (named) return;
    int64_t mtime = entry->mtime_ms;
    if (o->min_age_ms > 0 && mtime > 0 && o->now - mtime < o->min_age_ms) {
        o->young++;
        o->wait = ST_MAX(o->wait, o->min_age_ms - (o->now - mtime));
        return;
    }
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 16;
        o->orphans = st_realloc(o->orphans, sizeof *o->orphans * o->cap);
    }
    o->orphans[o->n++] = st_strdup(entry->key);
}

static int64_t sweep_orphans(st_tier_part_t *p, int64_t min_age_ms) {
    st_tier_t *t = p->tier;
    char *prefix = st_strprintf("%s/", p->prefix), *why;
    orphan_scan_t o = {.p = p, .plen = strlen(prefix), .now = st_now_ms(),
                       .min_age_ms = min_age_ms, .wait = -1};
    /* a failed page: what the pages before it found is swept all the same */
    if (st_os_list_each(p->os, p->account, prefix, scan_orphan, &o, &why)) free(why);
    char **orphans = o.orphans;
    size_t n = o.n, young = o.young;
    int64_t wait = o.wait;
    if (n) {
        delete_objects(p, (const char *const *)orphans, n);
        ST_TIER_STAT_ADD(t, orphans_deleted, n);
        ST_INFO("tiering", "%s-%d: deleted %zu orphaned object(s) left by interrupted uploads",
                p->topic, (int)p->partition, n);
    }
    if (young)
        ST_INFO("tiering", "%s-%d: %zu object(s) no manifest names are younger than %lld ms: left "
                "for a later sweep", p->topic, (int)p->partition, young, (long long)min_age_ms);
    for (size_t i = 0; i < n; i++) free(orphans[i]);
    free(orphans);
    free(prefix);
    return wait;
}

static void delete_everything(st_tier_part_t *p) {
    pthread_mutex_lock(&p->lock);
    st_tier__manifest_fini(&p->man);
    pthread_mutex_unlock(&p->lock);
    char *key = manifest_key(p->prefix);
    const char *k = key;
    delete_objects(p, &k, 1);
    free(key);
    sweep_orphans(p, 0); /* with an empty manifest: every segment object */
    if (p->partition == 0) { /* the topic is gone: nothing to restore */
        key = descriptor_key(p);
        k = key;
        delete_objects(p, &k, 1);
        free(key);
    }
}

/* ---- the topic's descriptor --------------------------------------------------
 *
 * What a restore needs that no manifest holds (the topic's name and id,
 * partition count, replication factor and configs), as JSON the broker
 * builds, kept by the leader of partition 0 at ST_TIER_TOPIC_DESCRIPTOR
 * beside the partitions.  Written when the text changes, at each new
 * leadership and when tiering comes back on; a leader fenced by a newer
 * one's manifest writes none.  Deleted with the topic, and with the
 * remote log of partition 0 when tiering is switched off. */

static void put_descriptor(st_tier_part_t *p) {
    pthread_mutex_lock(&p->lock);
    char *text = p->desc_dirty && p->desc && p->fenced_epoch <= p->leader_epoch
                     ? st_strdup(p->desc) : NULL;
    p->desc_dirty = 0;
    pthread_mutex_unlock(&p->lock);
    if (!text) return;
    char *key = descriptor_key(p), *why = NULL;
    if (put_mem(p, key, text, strlen(text), &why)) {
        set_error(p, "writing the topic's descriptor: %s", why);
        pthread_mutex_lock(&p->lock);
        p->desc_dirty = 1; /* the next job tries again */
        pthread_mutex_unlock(&p->lock);
    }
    free(why);
    free(key);
    free(text);
}

void st_tier_part_set_descriptor(st_tier_part_t *p, const char *json) {
    pthread_mutex_lock(&p->lock);
    int changed = !p->desc || strcmp(p->desc, json);
    if (changed) {
        free(p->desc);
        p->desc = st_strdup(json);
        p->desc_dirty = 1;
    }
    pthread_mutex_unlock(&p->lock);
    if (changed) st_tier_part_kick(p);
}

/* ---- tiering switched off (KIP-950) ------------------------------------------
 *
 * remote.storage.enable=false with remote.log.delete.on.disable=true:
 * st_tier_part_set_mode(DELETE) stops serving the remote part at once (the
 * manifest in memory is emptied and the broker told) and records that the
 * bucket owes a deletion (the marker).  The leader's job pays it: the
 * manifest first, so that no reader or later leader finds a segment of it,
 * then every object under the partition's prefix (what it named and what
 * uploads cut short left), then the cached manifest (an upload in flight
 * when tiering went off may have written it again) and the marker.  A
 * failure leaves the marker: the next job tries again, also after a
 * restart.
 */

static st_err_t delete_keys(st_tier_part_t *p, const char *const *keys, size_t n, char **why) {
    if (!n) return ST_OK;
    st_os_request_t rq = {.op = ST_OS_DELETE_BATCH, .account = p->account, .keys = keys,
                          .nkeys = n};
    st_os_result_t *res = st_os_run(p->os, &rq);
    st_err_t e = res->status;
    if (!e && res->nfailed) {
        e = res->failed[0].status ? res->failed[0].status : ST_E_IO;
        *why = st_strprintf("deleting %s (and %zu more): %s", res->failed[0].key,
                            res->nfailed - 1, res->failed[0].message);
    } else if (e) {
        *why = st_strprintf("deleting %zu objects: %s", n, res->message);
    }
    if (!e) ST_TIER_STAT_ADD(p->tier, objects_deleted, n);
    st_os_result_free(res);
    return e;
}

static st_err_t purge_remote(st_tier_part_t *p) {
    st_manifest_t m;
    st_tier__manifest_init(&m);
    char *why = NULL, *key = manifest_key(p->prefix), *prefix = st_strprintf("%s/", p->prefix);
    st_os_keys_t all = {0};
    /* read first only to say what goes */
    st_err_t e = manifest_fetch(p, &m, &why);
    int had = e == ST_OK;
    if (e == ST_E_NOT_FOUND) {
        free(why);
        why = NULL;
        e = ST_OK;
    }
    const char *k = key;
    if (!e) e = delete_keys(p, &k, 1, &why);
    if (!e && p->partition == 0) {
        char *dkey = descriptor_key(p);
        const char *dk = dkey;
        e = delete_keys(p, &dk, 1, &why);
        free(dkey);
    }
    if (!e && (e = st_os_list_keys(p->os, p->account, prefix, &all, &why))) {
        char *cause = why;
        why = st_strprintf("listing %s: %s", prefix, cause);
        free(cause);
    }
    if (!e) e = delete_keys(p, (const char *const *)all.keys, all.n, &why);
    if (e) {
        set_error(p, "deleting the remote log (tiered storage off): %s", why ? why : st_err_msg(e));
        goto out;
    }
    if (p->cache_path) unlink(p->cache_path);
    if (p->purge_path && unlink(p->purge_path) && errno != ENOENT)
        ST_WARN("tiering", "%s-%d: removing %s: %s (the deletion will be made again)", p->topic,
                (int)p->partition, p->purge_path, strerror(errno));
    pthread_mutex_lock(&p->lock);
    p->purge = 0;
    pthread_mutex_unlock(&p->lock);
    fail_reset(p); /* a backed-off segment's objects went with the rest */
    ST_TIER_STAT_ADD(p->tier, segments_deleted, m.nsegs);
    if (had)
        ST_INFO("tiering", "%s-%d: tiered storage is off (remote.log.delete.on.disable): the remote "
                "log [%lld, %lld), %d segment(s) of %lld bytes, is deleted from the bucket (%zu "
                "objects and the manifest)", p->topic, (int)p->partition,
                (long long)st_tier__manifest_start(&m), (long long)st_tier__manifest_end(&m),
                m.nsegs, (long long)st_tier__manifest_bytes(&m), all.n);
    else
        ST_INFO("tiering", "%s-%d: tiered storage is off (remote.log.delete.on.disable): the bucket "
                "held no manifest of it; %zu object(s) deleted", p->topic, (int)p->partition, all.n);
    clear_error(p);
out:
    st_os_keys_fini(&all);
    free(prefix);
    free(why);
    free(key);
    st_tier__manifest_fini(&m);
    return e;
}

/* ---- the partition job ------------------------------------------------------- */

static void part_forget(st_tier_part_t *p);

/* Hand the broker the aborted transactions of the segments of m from
 * offset from on that have a .txnindex object.  An object that cannot be
 * read is reported; the next load tries again. */
static void aborted_of(st_tier_part_t *p, const st_manifest_t *m, int64_t from) {
    if (!p->ops.remote_aborted) return;
    int64_t (*v)[4] = NULL;
    int n = 0, cap = 0;
    for (int i = 0; i < m->nsegs; i++) {
        if (!m->segs[i].has_txnindex || m->segs[i].base_offset < from) continue;
        char *key = st_tier__object_key(p->prefix, &m->segs[i], "txnindex");
        st_os_result_t *res = get_whole(p, key);
        if (res->status) {
            ST_WARN("tiering", "%s-%d: reading %s: %s (read_committed fetches of its offsets may "
                    "show aborted records until it is read)", p->topic, (int)p->partition, key,
                    res->message);
        } else {
            const uint8_t *d = (const uint8_t *)res->data;
            for (uint64_t pos = 0; pos + 34 <= (uint64_t)res->length; pos += 34) {
                if (st_be16_get(d + pos) != 0) break;
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    v = st_realloc(v, sizeof *v * (size_t)cap);
                }
                for (int k = 0; k < 4; k++) v[n][k] = (int64_t)st_be64_get(d + pos + 2 + 8 * k);
                n++;
            }
        }
        st_os_result_free(res);
        free(key);
    }
    if (n) p->ops.remote_aborted(p->ops.arg, (const int64_t(*)[4])v, n);
    free(v);
}

/* ... of every remote segment (the partition's first job as leader, once
 * its manifest is known). */
static void restore_aborted(st_tier_part_t *p) {
    st_manifest_t m;
    pthread_mutex_lock(&p->lock);
    st_tier__manifest_copy(&m, &p->man);
    pthread_mutex_unlock(&p->lock);
    aborted_of(p, &m, 0);
    st_tier__manifest_fini(&m);
    __atomic_store_n(&p->aborted_ready, 1, __ATOMIC_RELEASE);
}

/* A read replica's job (ST_TIER_REPLICA, while it leads): the source
 * cluster's leader writes the manifest (uploads, retention), so it is read
 * again; when the remote part moved it is installed, after the aborted
 * transactions of the segments new to this broker were handed over (a
 * read_committed fetch of their offsets must not come first).  Nothing
 * is written to the bucket. */
static void replica_refresh(st_tier_part_t *p) {
    char *why = NULL;
    st_manifest_t m;
    st_tier__manifest_init(&m);
    st_err_t e = manifest_fetch(p, &m, &why);
    if (e) {
        set_error(p, "reading the source's manifest: %s", e == ST_E_NOT_FOUND ? "there is none "
                  "(the topic was deleted at its source?); the part known is still served" : why);
        free(why);
        return;
    }
    pthread_mutex_lock(&p->lock);
    int64_t end = st_tier__manifest_end(&p->man);
    int moved = m.log_start != p->man.log_start || m.nsegs != p->man.nsegs ||
                st_tier__manifest_start(&m) != st_tier__manifest_start(&p->man) ||
                st_tier__manifest_end(&m) != end;
    pthread_mutex_unlock(&p->lock);
    clear_error(p);
    int first = !__atomic_load_n(&p->aborted_ready, __ATOMIC_ACQUIRE);
    if (first || moved) aborted_of(p, &m, first ? 0 : end);
    __atomic_store_n(&p->aborted_ready, 1, __ATOMIC_RELEASE);
    p->loaded = 1;
    if (moved) manifest_install(p, &m);
    st_tier__manifest_fini(&m);
}

int st_tier_part_aborted_ready(st_tier_part_t *p) {
    return !p->ops.remote_aborted || __atomic_load_n(&p->aborted_ready, __ATOMIC_ACQUIRE);
}

/* The orphan sweep when due: at a partition's first job, then every ten
 * minutes, or as soon as the youngest orphan it left is old enough. */
static void maybe_sweep(st_tier_part_t *p) {
    if (st_mono_ms() < p->next_sweep_ms) return;
    int64_t wait = sweep_orphans(p, p->tier->cfg.orphan_min_age_ms);
    int64_t next = wait >= 0 ? ST_MIN(wait + 100, SWEEP_INTERVAL_MS) : SWEEP_INTERVAL_MS;
    p->next_sweep_ms = st_mono_ms() + next;
}

static void part_job(void *arg) {
    st_tier_part_t *p = arg;
    st_tier_t *t = p->tier;
    if (p->closing) {
        if (p->delete_remote && p->mode != ST_TIER_REPLICA) delete_everything(p);
        part_forget(p);
        goto out;
    }
    pthread_mutex_lock(&p->lock);
    int leading = p->leading, fresh = p->reload, purge = p->purge, mode = p->mode;
    if (p->reload) p->loaded = 0;
    p->reload = 0;
    pthread_mutex_unlock(&p->lock);
    if (fresh) p->fail.next_ms = 0; /* a new leadership tries a backed-off segment at once */
    if (!leading) goto out; /* only the leader uploads, sweeps and deletes */
    if (mode == ST_TIER_REPLICA) {
        replica_refresh(p);
        goto out;
    }
    /* a deletion owed comes before anything else, also when tiering came
     * back on meanwhile (it starts afresh after it) */
    if (purge && purge_remote(p)) goto out;
    if (mode == ST_TIER_DELETE) goto out;
    if (purge) p->loaded = 0; /* the bucket is empty now: nothing to install, but read it */
    if (!p->loaded) {
        char *why = NULL;
        st_manifest_t m;
        st_tier__manifest_init(&m);
        st_err_t e = manifest_fetch(p, &m, &why);
        if (e == ST_OK || e == ST_E_NOT_FOUND) {
            if (e == ST_OK) manifest_install(p, &m);
            p->loaded = 1;
            free(why);
        } else {
            set_error(p, "reading the manifest: %s", why);
            free(why);
            goto out;
        }
    }
    if (!__atomic_load_n(&p->aborted_ready, __ATOMIC_ACQUIRE)) restore_aborted(p);
    maybe_sweep(p);
    put_descriptor(p);
    st_tier_segment_t *segs = st_malloc(sizeof *segs * 4);
    for (;;) {
        pthread_mutex_lock(&t->lock);
        int stop = t->stopping || p->closing;
        pthread_mutex_unlock(&t->lock);
        pthread_mutex_lock(&p->lock);
        stop |= p->mode != ST_TIER_ON; /* remote.log.copy.disable, or off */
        pthread_mutex_unlock(&p->lock);
        if (stop) break;
        maybe_sweep(p); /* a job uploading for long still sweeps when due */
        pthread_mutex_lock(&p->lock);
        int64_t end = st_tier__manifest_end(&p->man);
        pthread_mutex_unlock(&p->lock);
        /* a segment backed off is not even looked for until its wait ends */
        if (!attempt_due(p, end) || leftovers_settled(p)) break;
        pthread_mutex_lock(&p->lock);
        end = st_tier__manifest_end(&p->man); /* a leftover may have committed */
        pthread_mutex_unlock(&p->lock);
        int n = p->ops.closed_segments(p->ops.arg, end, segs, 4);
        int done = 0, failed = 0;
        for (int i = 0; i < n && !failed; i++) {
            if (segs[i].base_offset < end) continue;
            if (segs[i].base_offset > end && end > 0 && p->man.nsegs > 0) {
                /* a gap (local segments deleted before upload?): never
                 * leave a hole in the remote log */
                set_error(p, "local segment %lld does not follow remote end %lld",
                          (long long)segs[i].base_offset, (long long)end);
                failed = 1;
                break;
            }
            if (upload_segment(p, &segs[i])) failed = 1;
            else done++;
            end = segs[i].last_offset + 1;
        }
        if (failed || done == 0) break;
    }
    free(segs);
    apply_retention(p);
out:
    /* A kick that came while this job ran (DeleteRecords, a segment
     * closed, a retention change) was not lost: run again. */
    pthread_mutex_lock(&t->lock);
    pthread_mutex_lock(&p->lock);
    p->job_running = 0;
    if (p->rerun) {
        p->rerun = 0;
        p->kicked = 1;
    }
    pthread_mutex_unlock(&p->lock);
    t->pending_jobs--;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    part_release(p);
}

/* Start the partition's job, or have it run again when the one running
 * ends (what it was asked for may have come after it looked).  t->lock
 * held. */
static void schedule_locked(st_tier_t *t, st_tier_part_t *p) {
    pthread_mutex_lock(&p->lock);
    int run = !p->job_running;
    if (run) p->job_running = 1;
    else p->rerun = 1;
    pthread_mutex_unlock(&p->lock);
    if (!run) return;
    t->pending_jobs++;
    st_pool_submit(t->pool, part_job, part_keep(p));
}

/*
 * Yielding to live traffic (once every PACE_WINDOW_MS on the task thread):
 * the broker says how long live work waited at most in the window (its
 * acks=all produces on the log flush), and downloads are paced like a TCP
 * sender: while that is above yield_latency_us and downloads ran, the
 * pace halves (from what they actually fetched in the window when not
 * paced yet), not below yield_min_bytes_per_s; each window below it adds
 * yield_min_bytes_per_s; PACE_CALM_WINDOWS in a row below, and downloads
 * run unpaced again.  A broker with no live traffic never paces, so a
 * replay is as fast as it can be when nothing else runs, and polite when
 * something does.
 */
#define PACE_WINDOW_MS 100
#define PACE_CALM_WINDOWS 20

static void pace_step(st_tier_t *t, int64_t window_ms) {
    int64_t lat = t->cfg.foreground_latency_us(t->cfg.foreground_arg);
    uint64_t fetched = __atomic_load_n(&t->stats.bytes_fetched, __ATOMIC_RELAXED);
    int64_t actual = (int64_t)((fetched - t->pace_fetched) * 1000 / (uint64_t)ST_MAX(window_ms, 1));
    t->pace_fetched = fetched;
    int64_t min_rate = ST_MAX(t->cfg.yield_min_bytes_per_s, 1);
    int64_t rate = __atomic_load_n(&t->pace_rate, __ATOMIC_RELAXED), next = rate;
    if (lat > t->cfg.yield_latency_us && (actual > 0 || rate > 0)) {
        t->pace_calm = 0;
        next = ST_MAX(min_rate, (rate > 0 ? rate : actual) / 2);
        __atomic_add_fetch(&t->pace_cuts, 1, __ATOMIC_RELAXED);
    } else if (rate > 0) {
        next = ++t->pace_calm >= PACE_CALM_WINDOWS ? 0 : rate + min_rate;
    }
    if (next != rate) {
        __atomic_store_n(&t->pace_rate, next, __ATOMIC_RELAXED);
        st_tier__cache_set_pace(t->cache, next);
        if (!rate || !next)
            ST_DEBUG("tiering", "downloads %s (live work waited up to %lld us)",
                     next ? "paced: live traffic waits" : "unpaced again", (long long)lat);
    }
}

static void *task_main(void *arg) {
    st_tier_t *t = arg;
    st_thread_set_name("tier-task");
    int64_t next_round = 0, next_stats = st_mono_ms() + 60000;
    int pacing = t->cfg.foreground_latency_us && t->cfg.yield_latency_us > 0;
    int64_t next_pace = st_mono_ms() + PACE_WINDOW_MS;
    pthread_mutex_lock(&t->lock);
    while (!t->stopping) {
        int64_t now = st_mono_ms();
        if (now >= next_round) {
            for (int i = 0; i < t->nparts; i++) {
                t->parts[i]->kicked = 0;
                schedule_locked(t, t->parts[i]);
            }
            next_round = now + t->cfg.task_interval_ms;
        } else {
            for (int i = 0; i < t->nparts; i++)
                if (t->parts[i]->kicked) {
                    t->parts[i]->kicked = 0;
                    schedule_locked(t, t->parts[i]);
                }
        }
        if (now >= next_stats) {
            st_tier_stats_t s;
            pthread_mutex_unlock(&t->lock);
            st_tier_get_stats(t, &s);
            ST_INFO("tiering", "uploaded %llu segments / %llu bytes (%llu failures); fetched %llu "
                    "bytes in %llu requests (%llu failures); cache hits %llu misses %llu, %lld "
                    "bytes on disk, %lld in memory, %llu spilled; deleted %llu segments, %llu "
                    "orphans",
                    (unsigned long long)s.segments_uploaded, (unsigned long long)s.bytes_uploaded,
                    (unsigned long long)s.upload_failures, (unsigned long long)s.bytes_fetched,
                    (unsigned long long)s.fetch_requests, (unsigned long long)s.fetch_failures,
                    (unsigned long long)s.cache_hits, (unsigned long long)s.cache_misses,
                    (long long)s.cache_used_bytes, (long long)s.cache_memory_used_bytes,
                    (unsigned long long)s.cache_spills, (unsigned long long)s.segments_deleted,
                    (unsigned long long)s.orphans_deleted);
            pthread_mutex_lock(&t->lock);
            next_stats = now + 60000;
        }
        if (pacing && now >= next_pace) {
            pthread_mutex_unlock(&t->lock);
            pace_step(t, now - (next_pace - PACE_WINDOW_MS));
            pthread_mutex_lock(&t->lock);
            next_pace = now + PACE_WINDOW_MS;
        }
        /* short naps while downloads wait for the fetch quota or the pace */
        int paced = t->cfg.fetch_max_bytes_per_s > 0 ||
                    __atomic_load_n(&t->pace_rate, __ATOMIC_RELAXED) > 0;
        int64_t wait = paced ? 20 : ST_MIN(next_round - now, 200);
        if (pacing) wait = ST_MIN(wait, ST_MAX(next_pace - now, 1));
        st_cond_wait_ms(&t->cond, &t->lock, wait);
        if (paced) {
            pthread_mutex_unlock(&t->lock);
            st_tier__cache_pump(t->cache);
            pthread_mutex_lock(&t->lock);
        }
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* ---- the manager -------------------------------------------------------------- */

st_err_t st_tier_new(const st_tier_config_t *cfg, st_os_t *os, st_tier_t **out, char *err,
                     size_t errlen) {
    st_tier_t *t = st_calloc(1, sizeof *t);
    t->cfg = *cfg;
    t->cache_dir = st_strdup(cfg->cache_dir);
    t->cfg.cache_dir = t->cache_dir;
    if (t->cfg.chunk_bytes < 65536) t->cfg.chunk_bytes = 65536;
    st_err_t e = st_mkdirs(t->cache_dir);
    if (e) {
        st_snprintf_marked(err, errlen, "remote.log.cache.dir: cannot create %s: %s", t->cache_dir,
                 st_err_msg(e));
        free(t->cache_dir);
        free(t);
        return e;
    }
    t->os = os;
    if (cfg->store_config) {
        st_cfg_copy(&st_os_config_table, &t->store_config, cfg->store_config);
        t->has_store_config = 1;
    }
    t->cfg.store_config = NULL; /* t->store_config */
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    t->pool = st_pool_new(cfg->copy_threads, "tier-copy");
    st_tier__quota_init(&t->copy_quota, cfg->copy_max_bytes_per_s);
    t->cache = st_tier__cache_new(t, t->cache_dir, cfg->cache_bytes, cfg->cache_memory_bytes,
                                  cfg->index_cache_bytes, cfg->fetch_max_bytes_per_s);
    *out = t;
    return ST_OK;
}

void st_tier_start(st_tier_t *t) {
    pthread_create(&t->task, NULL, task_main, t);
    t->started = 1;
}

void st_tier_destroy(st_tier_t *t) {
    if (!t) return;
    pthread_mutex_lock(&t->lock);
    t->stopping = 1;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    if (t->started) pthread_join(t->task, NULL);
    st_pool_destroy(t->pool); /* runs what is queued: closes, deletes */
    st_tier__cache_destroy(t->cache);
    for (int i = 0; i < t->nparts; i++) part_release(t->parts[i]);
    free(t->parts);
    /* every request is done (the pool ran out, the cache waited for its
     * downloads): no account is in use any more */
    for (int i = 0; i < t->naccounts; i++) {
        free(t->accounts[i]->topic);
        free(t->accounts[i]);
    }
    free(t->accounts);
    for (int i = 0; i < t->nsources; i++) { /* after the cache: no download is left */
        st_os_destroy(t->sources[i].os);
        free(t->sources[i].location);
    }
    free(t->sources);
    if (t->has_store_config) st_os_config_fini(&t->store_config);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cond);
    free(t->cache_dir);
    free(t);
}

void st_tier_get_stats(st_tier_t *t, st_tier_stats_t *out) {
    const st_tier_stats_atomic_t *s = &t->stats;
#define LOAD(f) out->f = __atomic_load_n(&s->f, __ATOMIC_RELAXED)
    LOAD(bytes_uploaded);
    LOAD(segments_uploaded);
    LOAD(upload_requests);
    LOAD(upload_failures);
    LOAD(bytes_fetched);
    LOAD(fetch_requests);
    LOAD(fetch_failures);
    LOAD(cache_hits);
    LOAD(cache_misses);
    LOAD(cache_evictions);
    LOAD(cache_spills);
    out->fetch_pace_bytes_per_s = __atomic_load_n(&t->pace_rate, __ATOMIC_RELAXED);
    out->fetch_pace_cuts = (uint64_t)__atomic_load_n(&t->pace_cuts, __ATOMIC_RELAXED);
    LOAD(segments_deleted);
    LOAD(objects_deleted);
    LOAD(orphans_deleted);
#undef LOAD
    st_tier__cache_used(t->cache, &out->cache_used_bytes, &out->cache_memory_used_bytes);
}

/* ---- topics' accounts -------------------------------------------------------- */

/* The account of topic, made on first use (t->lock held).  Binary search:
 * a broker may host thousands of topics, each partition open asks. */
static st_os_account_t *account_for_locked(st_tier_t *t, const char *topic) {
    int lo = 0, hi = t->naccounts;
    while (lo < hi) {
        int mid = (lo + hi) / 2, c = strcmp(t->accounts[mid]->topic, topic);
        if (c == 0) return &t->accounts[mid]->os;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    if (t->naccounts == t->capaccounts) {
        t->capaccounts = t->capaccounts ? t->capaccounts * 2 : 16;
        t->accounts = st_realloc(t->accounts, sizeof *t->accounts * (size_t)t->capaccounts);
    }
    st_tier_account_t *a = st_calloc(1, sizeof *a);
    a->topic = st_strdup(topic);
    st_os_account_init(&a->os);
    memmove(t->accounts + lo + 1, t->accounts + lo, sizeof *t->accounts * (size_t)(t->naccounts - lo));
    t->accounts[lo] = a;
    t->naccounts++;
    return &a->os;
}

int st_tier_usage(st_tier_t *t, st_tier_topic_usage_t **out) {
    pthread_mutex_lock(&t->lock);
    int n = t->naccounts;
    st_tier_topic_usage_t *v = st_calloc((size_t)n + 1, sizeof *v);
    for (int i = 0; i < n; i++) {
        v[i].topic = st_strdup(t->accounts[i]->topic);
        st_os_account_read(&t->accounts[i]->os, &v[i].usage);
    }
    pthread_mutex_unlock(&t->lock);
    *out = v;
    return n;
}

void st_tier_usage_free(st_tier_topic_usage_t *v, int n) {
    for (int i = 0; i < n; i++) free(v[i].topic);
    free(v);
}

/* ---- partitions ------------------------------------------------------------- */

/* ST_OK when the object exists, ST_E_NOT_FOUND, or an error (*why). */
static st_err_t head(st_tier_part_t *p, const char *key, char **why) {
    st_os_request_t rq = {.op = ST_OS_HEAD, .key = key, .account = p->account};
    st_os_result_t *res = st_os_run(p->os, &rq);
    st_err_t e = res->status;
    if (e && e != ST_E_NOT_FOUND) *why = st_strdup(res->message);
    st_os_result_free(res);
    return e;
}

/* A topic too long for <topic>-<topicId> as one key piece was tiered under
 * that layout before the long-name layout existed (S3 takes such keys; the
 * file backend and MinIO do not).  Its partitions stay where their
 * manifest is: the long-name layout unless only the old one has one. */
static st_err_t choose_layout(st_tier_part_t *p, char **why) {
    if (!long_layout(p->topic, p->topic_id)) return ST_OK;
    char *key = manifest_key(p->prefix);
    st_err_t e = head(p, key, why);
    free(key);
    if (e != ST_E_NOT_FOUND) return e;
    char *old = st_strprintf("%s-%s/%d", p->topic, p->topic_id, (int)p->partition);
    key = manifest_key(old);
    e = head(p, key, why);
    free(key);
    if (e == ST_OK) {
        ST_INFO("tiering", "%s-%d: the bucket holds it under %s/ (written before the layout for "
                "long topic names): it stays there", p->topic, (int)p->partition, old);
        free(p->prefix);
        p->prefix = old;
        return ST_OK;
    }
    free(old);
    return e == ST_E_NOT_FOUND ? ST_OK : e;
}

static st_err_t part_open(st_tier_t *t, st_os_t *os, const char *topic, const char *topic_id,
                          int32_t partition, const char *cache_manifest_path,
                          st_tier_mode_t mode, const st_tier_part_ops_t *ops,
                          const st_tier_retention_t *ret, st_tier_part_t **out, char *err,
                          size_t errlen) {
    st_tier_part_t *p = st_calloc(1, sizeof *p);
    p->tier = t;
    p->os = os;
    p->refs = 1;
    p->leading = 0; /* until told, with its leader epoch (st_tier_part_set_leader) */
    p->leader_epoch = p->fenced_epoch = -1;
    pthread_mutex_init(&p->lock, NULL);
    p->topic = st_strdup(topic);
    p->topic_id = st_strdup(topic_id);
    p->partition = partition;
    p->prefix = st_tier_part_prefix(topic, topic_id, partition);
    pthread_mutex_lock(&t->lock);
    p->account = account_for_locked(t, topic); /* before its first request */
    pthread_mutex_unlock(&t->lock);
    p->cache_path = cache_manifest_path ? st_strdup(cache_manifest_path) : NULL;
    p->fail.base = p->fail.last = -1;
    if (p->cache_path) {
        const char *slash = strrchr(p->cache_path, '/');
        size_t dl = slash ? (size_t)(slash - p->cache_path + 1) : 0;
        p->status_path = st_strprintf("%.*s" ST_TIER_UPLOAD_STATUS_FILE, (int)dl, p->cache_path);
        unlink(p->status_path); /* a back-off is in memory: a restart tries at once */
        p->purge_path = st_strprintf("%.*s" ST_TIER_DELETE_PENDING_FILE, (int)dl, p->cache_path);
    }
    p->ops = *ops;
    p->ret = *ret;
    p->mode = mode;
    p->copy_was_off = mode == ST_TIER_READ_ONLY;
    if (p->purge_path && access(p->purge_path, F_OK) == 0 && mode != ST_TIER_DELETE) {
        /* tiered again while this broker was away: whoever led since owns
         * the bucket (a deletion made now could take a remote log written
         * since); the cached manifest went with the disable */
        ST_INFO("tiering", "%s-%d: tiered again since it was switched off here: the bucket's "
                "manifest is read, no deletion is made by this broker", topic, (int)partition);
        unlink(p->purge_path);
    }
    st_tier__manifest_init(&p->man);
    char dwhy[200], *why = NULL;
    char *text = NULL;
    size_t len = 0;
    st_manifest_t m;
    st_tier__manifest_init(&m);
    st_err_t le = choose_layout(p, &why);
    if (le) {
        st_snprintf_marked(err, errlen, "finding the remote manifest: %s", why);
        free(why);
        part_release(p);
        return le;
    }
    if (mode == ST_TIER_DELETE) {
        /* nothing remote is served: the deletion is owed (again) */
        pthread_mutex_lock(&p->lock);
        purge_owed_locked(p);
        pthread_mutex_unlock(&p->lock);
        p->loaded = 1;
    } else if (p->cache_path && st_read_file(p->cache_path, &text, &len) == ST_OK &&
        st_tier__manifest_decode(text, len, &m, dwhy, sizeof dwhy) == ST_OK) {
        /* The local copy is never ahead of the bucket's; the bucket's is
         * read again by the first job. */
        p->man = m;
        p->durable_log_start = m.log_start;
    } else {
        st_err_t e = manifest_fetch(p, &m, &why);
        if (e == ST_OK) {
            p->man = m;
            p->durable_log_start = m.log_start;
        } else if (e != ST_E_NOT_FOUND) {
            /* the caller names the partition */
            st_snprintf_marked(err, errlen, "reading the remote manifest: %s", why);
            free(why);
            free(text);
            part_release(p);
            return e;
        }
        free(why);
        p->loaded = 1;
    }
    free(text);
    pthread_mutex_lock(&t->lock);
    if (t->nparts == t->capparts) {
        t->capparts = t->capparts ? t->capparts * 2 : 16;
        t->parts = st_realloc(t->parts, sizeof *t->parts * (size_t)t->capparts);
    }
    t->parts[t->nparts++] = part_keep(p);
    p->kicked = 1;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    *out = p;
    return ST_OK;
}

st_err_t st_tier_part_open(st_tier_t *t, const char *topic, const char *topic_id,
                           int32_t partition, const char *cache_manifest_path,
                           st_tier_mode_t mode, const st_tier_part_ops_t *ops,
                           const st_tier_retention_t *ret, st_tier_part_t **out, char *err,
                           size_t errlen) {
    return part_open(t, t->os, topic, topic_id, partition, cache_manifest_path, mode, ops, ret,
                     out, err, errlen);
}

st_os_t *st_tier__source_store(st_tier_t *t, const char *location, char *err, size_t errlen) {
    if (!location || !*location) return t->os;
    st_os_t *os = NULL;
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->nsources && !os; i++)
        if (!strcmp(t->sources[i].location, location)) os = t->sources[i].os;
    st_os_config_t c;
    if (os) {
        /* opened before */
    } else if (!t->has_store_config) {
        st_snprintf_marked(err, errlen, "%s: this broker reads no other store", location);
    } else if (st_os_config_at(&t->store_config, location, &c, err, errlen) == ST_OK) {
        if (st_os_new(&c, &os, err, errlen) == ST_OK) {
            t->sources = st_realloc(t->sources, sizeof *t->sources * (size_t)(t->nsources + 1));
            t->sources[t->nsources++] = (struct tier_source){st_strdup(location), os};
        }
        st_os_config_fini(&c);
    }
    pthread_mutex_unlock(&t->lock);
    return os;
}

st_err_t st_tier_part_open_replica(st_tier_t *t, const char *location, const char *topic,
                                   const char *topic_id, int32_t partition,
                                   const st_tier_part_ops_t *ops, st_tier_part_t **out, char *err,
                                   size_t errlen) {
    st_os_t *os = st_tier__source_store(t, location, err, errlen);
    if (!os) return ST_E_INVAL;
    st_tier_retention_t none = {-1, -1}; /* the source's leader applies retention */
    return part_open(t, os, topic, topic_id, partition, NULL, ST_TIER_REPLICA, ops, &none, out,
                     err, errlen);
}

st_tier_part_t *st_tier_part_keep(st_tier_part_t *p) { return part_keep(p); }

void st_tier_part_release(st_tier_part_t *p) { part_release(p); }

void st_tier_part_close(st_tier_part_t *p, int delete_remote) {
    st_tier_t *t = p->tier;
    pthread_mutex_lock(&t->lock);
    pthread_mutex_lock(&p->lock);
    p->closing = 1;
    p->delete_remote = delete_remote;
    pthread_mutex_unlock(&p->lock);
    /* The partition stays listed until its last job ran (after any job
     * still running: one job per partition at a time). */
    p->kicked = 1;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    part_release(p);
}

/* The closing job: drop the partition from the list. */
static void part_forget(st_tier_part_t *p) {
    st_tier_t *t = p->tier;
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->nparts; i++)
        if (t->parts[i] == p) {
            t->parts[i] = t->parts[--t->nparts];
            part_release(p);
            break;
        }
    pthread_mutex_unlock(&t->lock);
}

void st_tier_part_set_retention(st_tier_part_t *p, const st_tier_retention_t *ret) {
    pthread_mutex_lock(&p->lock);
    p->ret = *ret;
    pthread_mutex_unlock(&p->lock);
}

void st_tier_part_set_leader(st_tier_part_t *p, int leading, int32_t leader_epoch) {
    pthread_mutex_lock(&p->lock);
    int was = p->leading;
    /* fenced by a newer leader's manifest: not again at an epoch as old */
    if (leading && leader_epoch <= p->fenced_epoch) leading = 0;
    p->leading = leading;
    if (leading && (!was || leader_epoch != p->leader_epoch)) {
        p->reload = p->desc_dirty = 1;
        /* the aborted transactions are handed over again (dropped with the
         * local log if it was truncated in full as a follower): until then
         * a read_committed fetch of a remote offset waits */
        __atomic_store_n(&p->aborted_ready, 0, __ATOMIC_RELEASE);
    }
    p->leader_epoch = leader_epoch;
    pthread_mutex_unlock(&p->lock);
    if (leading && !was) st_tier_part_kick(p);
}

/* Record that the bucket owes a deletion (p->lock held): the marker, then
 * the cached manifest goes, so that no restart serves the remote part. */
static void purge_owed_locked(st_tier_part_t *p) {
    p->purge = 1;
    if (!p->purge_path) return;
    st_err_t e = st_write_file_atomic(p->purge_path, "", 0);
    if (e)
        ST_WARN("tiering", "%s-%d: writing %s: %s (a restart before the remote log is deleted "
                "will not delete it)", p->topic, (int)p->partition, p->purge_path, st_err_msg(e));
    if (p->cache_path) unlink(p->cache_path);
}

st_tier_mode_t st_tier_part_set_mode(st_tier_part_t *p, st_tier_mode_t mode) {
    pthread_mutex_lock(&p->lock);
    st_tier_mode_t was = (st_tier_mode_t)p->mode;
    int tell = 0;
    if (was == mode) {
        pthread_mutex_unlock(&p->lock);
        return was;
    }
    p->mode = mode;
    if (mode == ST_TIER_READ_ONLY) p->copy_was_off = 1;
    if (mode == ST_TIER_DELETE) {
        /* nothing remote is served from now on; what the bucket holds goes */
        st_tier__manifest_fini(&p->man);
        p->durable_log_start = 0;
        purge_owed_locked(p);
        tell = !p->closing && p->ops.remote_changed;
    } else if (was == ST_TIER_DELETE) {
        /* on again: the bucket is read anew (whoever deleted it may be
         * another broker) and tiering starts from the local log.  A
         * deletion still owed is paid first by this broker if it leads;
         * one that does not lead forgets it (see st_tiering.h) */
        p->loaded = 0;
        p->desc_dirty = 1;
        if (p->purge && !p->leading) {
            p->purge = 0;
            if (p->purge_path) unlink(p->purge_path);
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (tell) p->ops.remote_changed(p->ops.arg, 0, 0);
    ST_INFO("tiering", "%s-%d: %s", p->topic, (int)p->partition,
            mode == ST_TIER_ON          ? "tiering on: closed segments go to the bucket"
            : mode == ST_TIER_READ_ONLY ? "uploads off (remote.log.copy.disable): the bucket is "
                                          "still read and its retention applied"
                                        : "tiering off: the remote part is no longer served, the "
                                          "leader deletes it from the bucket");
    st_tier_part_kick(p);
    return was;
}

st_tier_mode_t st_tier_part_mode(st_tier_part_t *p) {
    pthread_mutex_lock(&p->lock);
    st_tier_mode_t m = (st_tier_mode_t)p->mode;
    pthread_mutex_unlock(&p->lock);
    return m;
}

void st_tier_part_kick(st_tier_part_t *p) {
    st_tier_t *t = p->tier;
    pthread_mutex_lock(&t->lock);
    p->kicked = 1;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

void st_tier_part_status(st_tier_part_t *p, st_tier_status_t *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&p->lock);
    out->remote_start = st_tier__manifest_start(&p->man);
    out->remote_end = st_tier__manifest_end(&p->man);
    out->remote_bytes = st_tier__manifest_bytes(&p->man);
    out->remote_segments = p->man.nsegs;
    out->last_upload_ms = p->last_upload_ms;
    out->loaded = p->loaded;
    out->durable_log_start = p->durable_log_start;
    out->failing_base_offset = p->fail.base;
    out->failures = p->fail.failures;
    out->retry_in_ms = p->fail.base >= 0 ? ST_MAX(p->fail.next_ms - st_mono_ms(), 0) : 0;
    out->mode = (st_tier_mode_t)p->mode;
    out->delete_pending = p->purge;
    pthread_mutex_unlock(&p->lock);
}

int32_t st_tier_part_epoch_for(st_tier_part_t *p, int64_t offset) {
    int32_t epoch = -1;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->man.nsegs; i++)
        for (int k = 0; k < p->man.segs[i].nepochs; k++)
            if (p->man.segs[i].epochs[k].start_offset <= offset) epoch = p->man.segs[i].epochs[k].epoch;
    pthread_mutex_unlock(&p->lock);
    return epoch;
}

/* The key of the producer snapshot kept with the segment of m that ends
 * just below offset, or NULL when there is none. */
static char *snapshot_key(const char *prefix, const st_manifest_t *m, int64_t offset) {
    for (int i = 0; i < m->nsegs; i++)
        if (m->segs[i].last_offset + 1 == offset && m->segs[i].has_snapshot)
            return st_tier__object_key(prefix, &m->segs[i], "snapshot");
    return NULL;
}

/* A whole object into *data (ours then), or *why. */
static st_err_t get_data(st_tier_part_t *p, const char *key, void **data, size_t *len,
                         char **why) {
    st_os_result_t *res = get_whole(p, key);
    st_err_t e = res->status;
    if (e) {
        *why = st_strdup(res->message);
    } else {
        *data = res->data;
        *len = (size_t)res->length;
        res->data = NULL;
    }
    st_os_result_free(res);
    return e;
}

st_err_t st_tier_part_producer_snapshot(st_tier_part_t *p, int64_t offset, void **data,
                                        size_t *len, char *err, size_t errlen) {
    /* the manifest installed names it when it is fresh (a read replica's
     * refresh has just installed it); the bucket's manifest otherwise, and
     * when the segment installed is gone from the bucket */
    pthread_mutex_lock(&p->lock);
    char *key = snapshot_key(p->prefix, &p->man, offset);
    pthread_mutex_unlock(&p->lock);
    char *why = NULL;
    st_err_t e = key ? get_data(p, key, data, len, &why) : ST_E_NOT_FOUND;
    if (e == ST_E_NOT_FOUND) {
        free(key);
        free(why);
        key = why = NULL;
        st_manifest_t m;
        st_tier__manifest_init(&m);
        e = manifest_fetch(p, &m, &why);
        if (!e && !(key = snapshot_key(p->prefix, &m, offset))) {
            why = st_strprintf("no segment of the bucket ends at %lld with a producer snapshot",
                               (long long)offset);
            e = ST_E_NOT_FOUND;
        }
        st_tier__manifest_fini(&m);
        if (!e) e = get_data(p, key, data, len, &why);
    }
    if (e) snprintf(err, errlen, "%s", why ? why : st_err_msg(e));
    free(why);
    free(key);
    return e;
}

st_err_t st_tier_delete_records(st_tier_part_t *p, int64_t offset) {
    pthread_mutex_lock(&p->lock);
    if (p->mode == ST_TIER_REPLICA) { /* the source's leader owns the log start */
        pthread_mutex_unlock(&p->lock);
        return ST_E_INVAL;
    }
    int64_t start = st_tier__manifest_start(&p->man), end = st_tier__manifest_end(&p->man);
    if (offset > p->man.log_start) p->man.log_start = ST_MIN(offset, ST_MAX(end, start));
    pthread_mutex_unlock(&p->lock);
    st_tier_part_kick(p);
    return ST_OK;
}

int st_tier__part_wait_idle(st_tier_part_t *p, int64_t timeout_ms) {
    st_tier_t *t = p->tier;
    int64_t deadline = st_mono_ms() + timeout_ms;
    int rc = 0;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        if (!p->kicked && !p->job_running && !p->rerun) break;
        int64_t left = deadline - st_mono_ms();
        if (left <= 0) {
            rc = -1;
            break;
        }
        st_cond_wait_ms(&t->cond, &t->lock, left);
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

/* ---- reads ------------------------------------------------------------------ */

/* A copy of what a read needs of one segment, taken under the lock. */
typedef struct seg_view {
    char *index_key, *log_key; /* NULL: no such segment */
    int64_t base, last, size;
    st_os_account_t *account; /* its topic's, for the downloads */
    st_os_t *os;              /* where they are */
} seg_view_t;

static void view_fini(seg_view_t *v) {
    free(v->index_key);
    free(v->log_key);
    memset(v, 0, sizeof *v);
}

static void view_of(st_tier_part_t *p, const st_rseg_t *s, seg_view_t *v) {
    v->index_key = st_tier__object_key(p->prefix, s, "index");
    v->log_key = st_tier__object_key(p->prefix, s, "log");
    v->account = p->account;
    v->os = p->os;
    v->base = s->base_offset;
    v->last = s->last_offset;
    v->size = s->size_bytes;
}

static int find_segment(st_tier_part_t *p, int64_t offset, seg_view_t *v, seg_view_t *next) {
    int lo = 0, hi = p->man.nsegs - 1, at = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (p->man.segs[mid].base_offset <= offset) {
            at = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    if (at < 0 || offset > p->man.segs[at].last_offset) return 0;
    view_of(p, &p->man.segs[at], v);
    next->size = -1;
    if (at + 1 < p->man.nsegs) view_of(p, &p->man.segs[at + 1], next);
    return 1;
}

/* Index entries: 8 bytes, relative offset and position (see the log's
 * offset index).  The position of the batch holding target or before it. */
static int64_t index_lookup(const uint8_t *idx, int64_t len, int64_t rel) {
    int64_t lo = 0, hi = len / 8 - 1, best = -1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        int32_t r = (int32_t)st_be32_get(idx + mid * 8);
        if (r < rel) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    if (best < 0) return 0;
    int32_t pos = (int32_t)st_be32_get(idx + best * 8 + 4);
    return pos < 0 ? 0 : pos;
}

/*
 * Chunks start on batches.  Boundary k is the first batch position the
 * offset index names at or after k * chunk_bytes (0 for k = 0, the segment
 * size past the last entry), so a batch never spans two chunks: an answer
 * that ends at a chunk's end ends on a whole batch, and the next fetch
 * starts a chunk.  Every reader computes the same boundaries from the same
 * index, so cache keys agree.
 *
 *   chunk:  |<-- k*C ... first indexed batch -->|<-- (k+1)*C ... -->|
 */
typedef struct chunk_map {
    const uint8_t *idx;
    int64_t nidx;
    int64_t size, csize;
} chunk_map_t;

static int64_t boundary(const chunk_map_t *m, int64_t k) {
    if (k <= 0) return 0;
    int64_t target = k * m->csize;
    if (target >= m->size) return m->size;
    int64_t lo = 0, hi = m->nidx - 1, best = -1;
    while (lo <= hi) { /* first entry whose position is >= target */
        int64_t mid = (lo + hi) / 2;
        if ((int64_t)st_be32_get(m->idx + mid * 8 + 4) >= target) {
            best = mid;
            hi = mid - 1;
        } else {
            lo = mid + 1;
        }
    }
    if (best < 0) return m->size;
    return ST_MIN((int64_t)st_be32_get(m->idx + best * 8 + 4), m->size);
}

/* [start, end) of the chunk holding pos. */
static void chunk_of(const chunk_map_t *m, int64_t pos, int64_t *start, int64_t *end) {
    int64_t k = pos / m->csize, s = boundary(m, k);
    if (s <= pos) {
        *start = s;
        *end = boundary(m, k + 1);
        return;
    }
    *end = s;
    while (k > 0 && boundary(m, k) > pos) k--;
    *start = boundary(m, k);
}

/* The chunk holding pos, for a reader (kept: release with
 * st_tier__cache_release); shared: its partition has a reader behind. */
static st_err_t get_chunk(st_tier_t *t, const seg_view_t *v, const chunk_map_t *m, int64_t pos,
                          int shared, st_cache_ref_t *ref, int64_t *cstart, st_tier_wake_cb wake,
                          void *arg) {
    int64_t end;
    chunk_of(m, pos, cstart, &end);
    return st_tier__cache_get(t->cache, v->os, v->account, v->log_key, (uint64_t)*cstart,
                              (uint64_t)(end - *cstart),
                              ST_CACHE_READ | (shared ? ST_CACHE_SHARED : 0), ref, wake, arg);
}

/* Fetch the next chunks of a sequential reader ahead, on into the next
 * segment (whose index comes first). */
static void read_ahead(st_tier_t *t, const seg_view_t *v, const chunk_map_t *m,
                       const seg_view_t *next, int64_t pos) {
    st_cache_ref_t ref;
    int64_t start, end;
    chunk_of(m, pos, &start, &end);
    int left = t->cfg.readahead_chunks;
    while (left > 0 && end < v->size) {
        int64_t s = end;
        chunk_of(m, s, &start, &end);
        if (st_tier__cache_get(t->cache, v->os, v->account, v->log_key, (uint64_t)start,
                               (uint64_t)(end - start), 0, &ref, NULL, NULL) == ST_OK)
            st_tier__cache_release(t->cache, &ref);
        left--;
    }
    if (left <= 0 || next->size <= 0) return;
    st_cache_ref_t idx;
    if (st_tier__cache_get(t->cache, next->os, next->account, next->index_key, 0, ST_OS_TO_END,
                           ST_CACHE_INDEX, &idx, NULL, NULL))
        return;
    chunk_map_t nm = {idx.mem, idx.len / 8, next->size, t->cfg.chunk_bytes};
    for (int64_t s = 0; left > 0 && s < next->size; left--) {
        chunk_of(&nm, s, &start, &end);
        if (st_tier__cache_get(t->cache, next->os, next->account, next->log_key, (uint64_t)start,
                               (uint64_t)(end - start), 0, &ref, NULL, NULL) == ST_OK)
            st_tier__cache_release(t->cache, &ref);
        s = end;
    }
    st_tier__cache_release(t->cache, &idx);
}

st_err_t st_tier_read(st_tier_part_t *p, int64_t offset, int32_t max_bytes, int flags,
                      st_tier_read_t *out, st_tier_wake_cb wake, void *wake_arg) {
    st_tier_t *t = p->tier;
    int min_one = flags & ST_TIER_READ_MIN_ONE;
    memset(out, 0, sizeof *out);
    seg_view_t v = {0}, next = {0};
    pthread_mutex_lock(&p->lock);
    out->remote_start = st_tier__manifest_start(&p->man);
    out->remote_end = st_tier__manifest_end(&p->man);
    int found = offset >= out->remote_start && find_segment(p, offset, &v, &next);
    int64_t now = st_mono_ms();
    int newly_shared = 0;
    if (found) {
        /* The highest offset read lately: a reader alone for 5 s has it.
         * A read below it is a reader behind another (or a re-read);
         * what it will need is worth the disk only if the disk cache can
         * hold the distance (bytes estimated from this segment's): a
         * replay that starts over behind a scan longer than the cache
         * would only churn it. */
        if (now - p->read_hi_ms > 5000) p->read_hi = offset;
        int64_t span = v.last - v.base + 1;
        double behind = span > 0 ? (double)(p->read_hi - offset) * (double)v.size / (double)span : 0;
        if (offset < p->read_hi && behind < (double)t->cfg.cache_bytes / 2) {
            newly_shared = now >= p->shared_until_ms;
            p->shared_until_ms = now + 10000;
        }
        if (offset >= p->read_hi) {
            p->read_hi = offset;
            p->read_hi_ms = now;
        }
    }
    int shared = now < p->shared_until_ms;
    char *prefix = newly_shared ? st_strprintf("%s/", p->prefix) : NULL;
    pthread_mutex_unlock(&p->lock);
    if (!found) return ST_E_OFFSET_OUT_OF_RANGE;
    if (prefix) { /* what the reader ahead left in memory, a reader behind needs */
        st_tier__cache_keep_prefix(t->cache, prefix);
        free(prefix);
    }

    st_cache_ref_t idx;
    st_err_t e = st_tier__cache_get(t->cache, v.os, v.account, v.index_key, 0, ST_OS_TO_END,
                                    ST_CACHE_INDEX, &idx, wake, wake_arg);
    if (e) goto out;
    chunk_map_t m = {idx.mem, idx.len / 8, v.size, t->cfg.chunk_bytes};
    int64_t pos = index_lookup(idx.mem, idx.len, offset - v.base);

    /* Walk batch headers from the indexed position to the batch holding
     * offset (at most log.index.interval.bytes of batches). */
    st_cache_ref_t ref = {0};
    int64_t cstart = -1, cend = -1;
    st_batch_hdr_t b;
    for (;;) {
        if (pos + ST_TIER_BATCH_HEADER > v.size) {
            e = ST_E_KAFKA_STORAGE_ERROR; /* the index lied */
            break;
        }
        if (pos < cstart || pos >= cend) {
            if (ref.file) st_tier__cache_release(t->cache, &ref);
            e = get_chunk(t, &v, &m, pos, shared, &ref, &cstart, wake, wake_arg);
            if (e) break;
            cend = cstart + ref.len;
        }
        uint8_t hdr[ST_TIER_BATCH_HEADER];
        size_t got = 0;
        if (pos + ST_TIER_BATCH_HEADER > cend ||
            st_pread_all(ref.file->fd, hdr, sizeof hdr, pos - cstart, &got) || got != sizeof hdr ||
            st_tier__batch_header(hdr, &b) || pos + b.size > cend) {
            ST_LOG_RATELIMITED(ST_LOG_ERROR, "tiering", 5000, "%s: bad batch at byte %lld",
                               v.log_key, (long long)pos);
            e = ST_E_KAFKA_STORAGE_ERROR;
            break;
        }
        if (b.last_offset >= offset) break;
        pos += b.size;
    }
    if (!e && !(flags & ST_TIER_READ_ONCE)) read_ahead(t, &v, &m, &next, pos);
    st_tier__cache_release(t->cache, &idx);
    if (e) {
        if (ref.file) st_tier__cache_release(t->cache, &ref);
        goto out;
    }
    if (b.size > max_bytes && !min_one) { /* nothing fits: an empty read */
        st_tier__cache_release(t->cache, &ref);
        goto out;
    }
    /* Straight from the cached chunk, up to its end (a batch boundary).
     * An answer from a chunk's start is a reader coming into it (a
     * reader going on from its last answer starts each chunk so). */
    if (pos == cstart) st_tier__cache_entered(t->cache, v.log_key, (uint64_t)cstart);
    int64_t want = ST_MAX((int64_t)b.size, (int64_t)max_bytes);
    out->file = ref.file; /* the reference moves to the caller */
    out->pos = pos - cstart;
    out->len = (int32_t)ST_MIN(want, cend - pos);
out:
    view_fini(&v);
    view_fini(&next);
    return e;
}

st_err_t st_tier_time_search_start(st_tier_part_t *p, int64_t ts, int64_t *from,
                                   st_tier_wake_cb wake, void *wake_arg) {
    st_tier_t *t = p->tier;
    char *key = NULL;
    int64_t base = -1, start = 0;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->man.nsegs; i++)
        if (p->man.segs[i].max_timestamp >= ts && p->man.segs[i].last_offset >= p->man.log_start) {
            key = st_tier__object_key(p->prefix, &p->man.segs[i], "timeindex");
            base = p->man.segs[i].base_offset;
            start = ST_MAX(base, p->man.log_start);
            break;
        }
    pthread_mutex_unlock(&p->lock);
    if (base < 0) return ST_E_NOT_FOUND;
    st_cache_ref_t tidx;
    st_err_t e = st_tier__cache_get(t->cache, p->os, p->account, key, 0, ST_OS_TO_END,
                                    ST_CACHE_INDEX, &tidx, wake, wake_arg);
    free(key);
    if (e) return e;
    /* Entries of 12 bytes: the newest timestamp so far and the relative
     * offset of its record, so every record up to there is no newer. */
    for (int64_t k = 0; k + 12 <= tidx.len; k += 12) {
        if ((int64_t)st_be64_get(tidx.mem + k) >= ts) break;
        start = ST_MAX(start, base + (int32_t)st_be32_get(tidx.mem + k + 8) + 1);
    }
    st_tier__cache_release(t->cache, &tidx);
    *from = start;
    return ST_OK;
}

/*
 * metalog.c - the metadata log as Raft entries over broker/log, its flush
 * thread, and the quorum-state file.
 *
 * Offsets: the broker/log high watermark of __cluster_metadata is kept at
 * its log end (so the Raft reads its own uncommitted entries to send them
 * to followers); the Raft's high watermark lives in the Raft, which applies
 * only below it.  Durable end = the log's flushed offset.
 *
 * Threads: the Raft's thread calls everything; the flush thread only runs
 * st_log_flush and the completion callback (m->lock guards the request
 * flag and the flush error).  The log's own mutex orders a flush against
 * appends and truncations (a truncation during an fsync keeps that fsync
 * from claiming the new tail: broker/log's truncation counter).
 */
#include "metalog_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

void st_metalog__fail(st_metalog_t *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = st_vstrprintf(fmt, ap);
    va_end(ap);
    st_snprintf_marked(m->err, sizeof m->err, "%s", msg);
    ST_ERROR("metalog", "%s", msg);
    free(msg);
}

const char *st_metalog_dir(const st_metalog_t *m) { return m->dir; }
void *st_metalog_host(const st_metalog_t *m) { return m->cfg.host; }
const char *st_metalog_error(const st_metalog_t *m) { return m->err; }

/* ---- flush thread ------------------------------------------------------------ */

/* One fsync serves every request that came before it started (group commit);
 * each completed fsync calls cfg.flushed once.  A request still pending at
 * close is served before the thread ends. */
static void *flusher_main(void *arg) {
    st_metalog_t *m = arg;
    st_thread_set_name("metalog-flush");
    pthread_mutex_lock(&m->lock);
    for (;;) {
        while (!m->flush_requested && !m->stopping) pthread_cond_wait(&m->cond, &m->lock);
        if (!m->flush_requested) break;
        m->flush_requested = 0;
        pthread_mutex_unlock(&m->lock);
        st_log_offsets_t before, after;
        st_log_offsets(m->log, &before);
        st_err_t e = st_log_flush(m->log);
        st_log_offsets(m->log, &after);
        /* A truncation raced the fsync: it kept the flushed offset down; one
         * more fsync covers what is there now. */
        if (!e && after.flushed_offset < ST_MIN(before.leo, after.leo)) e = st_log_flush(m->log);
        pthread_mutex_lock(&m->lock);
        if (e) m->flush_err = e;
        pthread_mutex_unlock(&m->lock);
        if (e) ST_ERROR("metalog", "fsync of the metadata log failed: %s", st_err_msg(e));
        if (m->cfg.flushed) m->cfg.flushed(m->cfg.flushed_arg);
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

void st_metalog_flush(st_metalog_t *m) {
    if (m->cfg.sync_flush) {
        st_err_t e = st_log_flush(m->log);
        pthread_mutex_lock(&m->lock);
        if (e) m->flush_err = e;
        pthread_mutex_unlock(&m->lock);
        return;
    }
    pthread_mutex_lock(&m->lock);
    m->flush_requested = 1;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

st_err_t st_metalog_flush_error(const st_metalog_t *m) {
    st_metalog_t *mm = (st_metalog_t *)m;
    pthread_mutex_lock(&mm->lock);
    st_err_t e = mm->flush_err;
    pthread_mutex_unlock(&mm->lock);
    return e;
}

/* ---- open / close ---------------------------------------------------------- */

st_err_t st_metalog_open(const st_metalog_config_t *cfg, st_metalog_t **out, char *err,
                         size_t errlen) {
    st_metalog_t *m = st_calloc(1, sizeof *m);
    m->cfg = *cfg;
    if (m->cfg.snapshots_kept <= 0) m->cfg.snapshots_kept = 2;
    m->log = st_log_keep(cfg->log);
    m->dir = st_strdup(st_log_dir(cfg->log));
    m->recv_fd = -1;
    st_buf_init(&m->abuf);
    st_buf_init(&m->rbuf);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->cond, NULL);
    st_err_t e = ST_OK;

    st_metalog__snapshot_scan(m);
    st_log_offsets_t o;
    st_log_offsets(m->log, &o);
    if (m->have_latest && m->latest.end_offset > o.leo) {
        /* The snapshot was installed and the node stopped before the log
         * was reset (KRaft does the same at start). */
        ST_WARN("metalog", "%s: the log ends at %lld, below the latest snapshot's end %lld: "
                "starting the log at the snapshot", m->dir, (long long)o.leo,
                (long long)m->latest.end_offset);
        e = st_log_truncate_fully(m->log, m->latest.end_offset);
        if (e) {
            st_snprintf_marked(err, errlen, "%s: cannot start the metadata log at the snapshot's "
                               "end %lld: %s", m->dir, (long long)m->latest.end_offset,
                               st_err_msg(e));
            goto fail;
        }
    } else if (o.log_start_offset > 0 &&
               (!m->have_latest || m->latest.end_offset < o.log_start_offset)) {
        /* The offsets below the log start were deleted because a snapshot
         * covered them; without it, committed records would be missing. */
        e = ST_E_CORRUPT;
        if (m->have_latest)
            st_snprintf_marked(err, errlen, "%s: the metadata log starts at offset %lld but the "
                               "latest snapshot ends at %lld: the records between are missing",
                               m->dir, (long long)o.log_start_offset,
                               (long long)m->latest.end_offset);
        else
            st_snprintf_marked(err, errlen, "%s: the metadata log starts at offset %lld and no "
                               "snapshot covers the records below it", m->dir,
                               (long long)o.log_start_offset);
        goto fail;
    }
    st_log_set_high_watermark(m->log, INT64_MAX); /* clamped to the log end */
    if (!cfg->sync_flush) {
        if (pthread_create(&m->flusher, NULL, flusher_main, m) != 0) {
            e = ST_E_NOMEM;
            st_snprintf_marked(err, errlen, "cannot start the metadata log's flush thread");
            goto fail;
        }
        m->started = 1;
    }
    *out = m;
    return ST_OK;
fail:
    st_metalog_close(m);
    return e;
}

void st_metalog_close(st_metalog_t *m) {
    if (!m) return;
    pthread_mutex_lock(&m->lock);
    m->stopping = 1;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (m->started) pthread_join(m->flusher, NULL);
    st_metalog__snapshot_recv_abort(m);
    st_log_release(m->log);
    st_buf_fini(&m->abuf);
    st_buf_fini(&m->rbuf);
    free(m->ents);
    free(m->sbuf);
    free(m->dir);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free(m);
}

/* ---- quorum-state -------------------------------------------------------------- */

st_err_t st_metalog_qstate_read(st_metalog_t *m, st_raft_qstate_t *out, int *found, char *err,
                                size_t errlen) {
    char *path = st_strprintf("%s/%s", m->dir, ST_METALOG_QSTATE_FILE), *text = NULL;
    size_t len = 0;
    char why[512];
    st_err_t e = st_read_file(path, &text, &len);
    if (e == ST_E_NOT_FOUND) {
        *found = 0;
        e = ST_OK;
        goto out;
    }
    if (e) {
        st_snprintf_marked(err, errlen, "%s: cannot be read: %s", path, st_err_msg(e));
        goto out;
    }
    e = st_raft_qstate_decode((const uint8_t *)text, len, out, why, sizeof why);
    if (e) {
        st_snprintf_marked(err, errlen, "%s: %s", path, why);
        st_snprintf_marked(m->err, sizeof m->err, "%s: %s", path, why);
        goto out;
    }
    *found = 1;
out:
    free(text);
    free(path);
    return e;
}

st_err_t st_metalog_qstate_write(st_metalog_t *m, const st_raft_qstate_t *qs) {
    st_buf_t b;
    st_buf_init(&b);
    st_raft_qstate_encode(qs, &b);
    char *path = st_strprintf("%s/%s", m->dir, ST_METALOG_QSTATE_FILE);
    st_err_t e = st_write_file_atomic(path, b.data, b.len);
    if (e) st_metalog__fail(m, "%s: cannot be written: %s", path, st_err_msg(e));
    free(path);
    st_buf_fini(&b);
    return e;
}

/* ---- entries --------------------------------------------------------------------- */

/* A data entry must be exactly one stored-form batch that checks. */
static st_err_t check_data_entry(const st_raft_entry_t *en, char *why, size_t whylen) {
    st_batch_info_t b;
    if (en->len < ST_BATCH_HEADER_SIZE || !en->data ||
        st_batch_header(en->data, (size_t)en->len, &b) || b.size != en->len) {
        st_snprintf_marked(why, whylen, "metadata entry at offset %lld: not one record batch "
                           "(%d bytes)", (long long)en->base_offset, (int)en->len);
        return ST_E_CORRUPT;
    }
    if (!st_batch_crc_ok(en->data, b.size)) {
        st_snprintf_marked(why, whylen, "metadata entry at offset %lld: CRC32C mismatch",
                           (long long)en->base_offset);
        return ST_E_CORRUPT;
    }
    if (b.attributes & ST_ATTR_CONTROL || b.last_offset_delta + 1 != en->record_count ||
        b.record_count != en->record_count) {
        st_snprintf_marked(why, whylen, "metadata entry at offset %lld: its batch holds %d "
                           "records (%s), the entry says %d", (long long)en->base_offset,
                           (int)b.record_count,
                           b.attributes & ST_ATTR_CONTROL ? "a control batch" : "data",
                           (int)en->record_count);
        return ST_E_INVAL;
    }
    return ST_OK;
}

st_err_t st_metalog_entry_encode(const st_raft_entry_t *en, st_buf_t *out, char *why,
                                 size_t whylen) {
    size_t at = out->len;
    if (en->record_count < 1 || en->epoch < 0) {
        st_snprintf_marked(why, whylen, "metadata entry at offset %lld: epoch %d, %d records",
                           (long long)en->base_offset, (int)en->epoch, (int)en->record_count);
        return ST_E_INVAL;
    }
    if (en->control) {
        if (en->record_count != 1 || en->len < 0 || en->control < 0 || en->control > INT16_MAX) {
            st_snprintf_marked(why, whylen, "control entry at offset %lld: %d records, type %d",
                               (long long)en->base_offset, (int)en->record_count,
                               (int)en->control);
            return ST_E_INVAL;
        }
        st_batch_build_control(out, 0, (int16_t)en->control, en->data, en->len, -1);
    } else {
        st_err_t e = check_data_entry(en, why, whylen);
        if (e) return e;
        st_buf_put(out, en->data, (size_t)en->len);
    }
    st_batch_stamp(out->data + at, en->base_offset, en->epoch, -1);
    return ST_OK;
}

st_err_t st_metalog_append(st_metalog_t *m, const st_raft_entry_t *entries, int n) {
    st_err_t e = ST_OK;
    st_log_config_t lc;
    st_log_get_config(m->log, &lc);
    int64_t expect = st_metalog_end_offset(m);
    int32_t last_epoch = st_log_latest_epoch(m->log);
    m->abuf.len = 0;
    for (int i = 0; i < n; i++) {
        const st_raft_entry_t *en = &entries[i];
        if (en->base_offset != expect || en->record_count < 1 || en->epoch < last_epoch ||
            en->epoch < 0) {
            st_metalog__fail(m, "metadata entry at offset %lld (epoch %d, %d records) does not "
                             "continue the log at %lld (epoch %d)", (long long)en->base_offset,
                             (int)en->epoch, (int)en->record_count, (long long)expect,
                             (int)last_epoch);
            return ST_E_INVAL;
        }
        char why[512];
        if ((e = st_metalog_entry_encode(en, &m->abuf, why, sizeof why))) {
            st_metalog__fail(m, "%s", why);
            return e;
        }
        expect = en->base_offset + en->record_count;
        last_epoch = en->epoch;
    }
    /* In runs that fit a segment: broker/log refuses one append larger. */
    size_t pos = 0;
    while (pos < m->abuf.len) {
        size_t end = pos;
        while (end < m->abuf.len) {
            size_t bs = st_be32_get(m->abuf.data + end + ST_BATCH_LENGTH_OFFSET) +
                        ST_BATCH_LOG_OVERHEAD;
            if (end > pos && (int64_t)(end - pos + bs) > lc.segment_bytes) break;
            end += bs;
        }
        st_append_info_t info;
        e = st_log_append_as_follower(m->log, m->abuf.data + pos, end - pos, st_now_ms(), &info);
        if (e) {
            st_metalog__fail(m, "metadata log append at offset %lld failed: %s",
                             (long long)st_be64_get(m->abuf.data + pos), st_err_msg(e));
            return e;
        }
        pos = end;
    }
    st_log_set_high_watermark(m->log, INT64_MAX);
    return ST_OK;
}

int64_t st_metalog_durable_end(st_metalog_t *m) {
    st_log_offsets_t o;
    st_log_offsets(m->log, &o);
    return o.flushed_offset;
}

int64_t st_metalog_start_offset(st_metalog_t *m) {
    st_log_offsets_t o;
    st_log_offsets(m->log, &o);
    return o.log_start_offset;
}

int64_t st_metalog_end_offset(st_metalog_t *m) {
    st_log_offsets_t o;
    st_log_offsets(m->log, &o);
    return o.leo;
}

st_err_t st_metalog_truncate(st_metalog_t *m, int64_t offset) {
    st_err_t e = st_log_truncate_to(m->log, offset);
    if (e) st_metalog__fail(m, "metadata log truncation to %lld failed: %s", (long long)offset,
                            st_err_msg(e));
    return e;
}

void st_metalog_end_offset_for_epoch(st_metalog_t *m, int32_t epoch, int32_t *out_epoch,
                                     int64_t *out_end) {
    st_log_end_offset_for_epoch(m->log, epoch, out_epoch, out_end);
}

st_err_t st_metalog_reset(st_metalog_t *m, st_raft_snapshot_id_t id) {
    st_err_t e = st_log_truncate_fully(m->log, id.end_offset);
    if (e) st_metalog__fail(m, "metadata log reset to %lld failed: %s", (long long)id.end_offset,
                            st_err_msg(e));
    return e;
}

st_err_t st_metalog_delete_before(st_metalog_t *m, int64_t offset) {
    int64_t end = st_metalog_end_offset(m), low;
    if (offset > end) offset = end;
    if (offset <= st_metalog_start_offset(m)) return ST_OK;
    st_err_t e = st_log_delete_records(m->log, offset, &low);
    if (e) st_metalog__fail(m, "metadata log deletion below %lld failed: %s", (long long)offset,
                            st_err_msg(e));
    return e;
}

/* The one record of a control batch: its key's type and its value. */
typedef struct control_rec {
    int n;
    int16_t type;
    const uint8_t *value;
    int32_t value_len;
} control_rec_t;

static int control_cb(const st_record_t *r, void *arg) {
    control_rec_t *c = arg;
    if (++c->n > 1 || r->key_len != 4) return 1;
    c->type = (int16_t)st_be16_get(r->key + 2);
    c->value = r->value;
    c->value_len = r->value_len;
    return 0;
}

st_err_t st_metalog_entry_decode(const uint8_t *p, int32_t size, st_raft_entry_t *out,
                                 char *why, size_t whylen) {
    st_batch_info_t b;
    if (size < ST_BATCH_HEADER_SIZE || st_batch_header(p, (size_t)size, &b) || b.size != size ||
        b.last_offset_delta < 0) {
        st_snprintf_marked(why, whylen, "not one record batch (%d bytes)", (int)size);
        return ST_E_CORRUPT;
    }
    if (!st_batch_crc_ok(p, b.size)) {
        st_snprintf_marked(why, whylen, "metadata batch at offset %lld: CRC32C mismatch",
                           (long long)b.base_offset);
        return ST_E_CORRUPT;
    }
    st_raft_entry_t en = {b.base_offset, b.leader_epoch, b.last_offset_delta + 1,
                          ST_RAFT_CONTROL_NONE, p, b.size};
    if (b.attributes & ST_ATTR_CONTROL) {
        /* uncompressed, so the value lies inside the batch */
        control_rec_t c = {0, 0, NULL, 0};
        st_err_t e = (b.attributes & ST_ATTR_CODEC_MASK) || b.record_count != 1
                         ? ST_E_CORRUPT
                         : st_batch_foreach_record(p, b.size, control_cb, &c);
        if (e || c.n != 1 || c.type <= 0 || c.value_len < 0 || c.value < p ||
            c.value + c.value_len > p + b.size) {
            st_snprintf_marked(why, whylen, "control batch at offset %lld is not one "
                               "uncompressed control record", (long long)b.base_offset);
            return ST_E_CORRUPT;
        }
        en.control = c.type;
        en.data = c.value;
        en.len = c.value_len;
    }
    *out = en;
    return ST_OK;
}

st_err_t st_metalog_read(st_metalog_t *m, int64_t offset, int32_t max_bytes,
                         const st_raft_entry_t **entries, int *n) {
    st_log_read_t rd;
    *entries = m->ents;
    *n = 0;
    st_err_t e = st_log_read(m->log, offset, max_bytes > 0 ? max_bytes : 1, 1, &rd);
    if (e || !rd.file) return e;
    m->rbuf.len = 0;
    st_buf_reserve(&m->rbuf, (size_t)rd.len);
    size_t got = 0;
    e = st_pread_all(rd.file->fd, m->rbuf.data, (size_t)rd.len, rd.pos, &got);
    st_file_release(rd.file);
    if (e) {
        st_metalog__fail(m, "%s: metadata log read at %lld failed: %s", m->dir, (long long)offset,
                         st_err_msg(e));
        return e;
    }
    m->rbuf.len = got;
    int k = 0;
    size_t pos = 0;
    while (pos + ST_BATCH_HEADER_SIZE <= got) {
        st_batch_info_t b;
        if (st_batch_header(m->rbuf.data + pos, got - pos, &b)) {
            st_metalog__fail(m, "%s: metadata log read at %lld: a bad batch header at byte %lld",
                             m->dir, (long long)offset, (long long)(rd.pos + (int64_t)pos));
            return ST_E_CORRUPT;
        }
        if ((size_t)b.size > got - pos) break; /* cut by max_bytes */
        if (k == m->capents) {
            m->capents = m->capents ? m->capents * 2 : 64;
            m->ents = st_realloc(m->ents, sizeof *m->ents * (size_t)m->capents);
        }
        char why[512];
        if ((e = st_metalog_entry_decode(m->rbuf.data + pos, b.size, &m->ents[k], why,
                                         sizeof why))) {
            st_metalog__fail(m, "%s: stored %s", m->dir, why);
            return e;
        }
        k++;
        pos += (size_t)b.size;
    }
    if (k == 0) { /* min_one gave less than a batch: the file is short */
        st_metalog__fail(m, "%s: metadata log read at %lld: a torn batch", m->dir,
                         (long long)offset);
        return ST_E_CORRUPT;
    }
    *entries = m->ents;
    *n = k;
    return ST_OK;
}

/* ---- the ops table --------------------------------------------------------------- */

static st_err_t op_persist(void *arg, const st_raft_qstate_t *qs) {
    return st_metalog_qstate_write(arg, qs);
}
static st_err_t op_log_append(void *arg, const st_raft_entry_t *entries, int n) {
    return st_metalog_append(arg, entries, n);
}
static void op_log_flush(void *arg) { st_metalog_flush(arg); }
static int64_t op_log_durable_end(void *arg) { return st_metalog_durable_end(arg); }
static st_err_t op_log_truncate(void *arg, int64_t offset) {
    return st_metalog_truncate(arg, offset);
}
static st_err_t op_log_read(void *arg, int64_t offset, int32_t max_bytes,
                            const st_raft_entry_t **entries, int *n) {
    return st_metalog_read(arg, offset, max_bytes, entries, n);
}
static int64_t op_log_start_offset(void *arg) { return st_metalog_start_offset(arg); }
static int64_t op_log_end_offset(void *arg) { return st_metalog_end_offset(arg); }
static void op_log_end_offset_for_epoch(void *arg, int32_t epoch, int32_t *out_epoch,
                                        int64_t *out_end) {
    st_metalog_end_offset_for_epoch(arg, epoch, out_epoch, out_end);
}
static st_err_t op_log_reset(void *arg, st_raft_snapshot_id_t id) {
    return st_metalog_reset(arg, id);
}
static st_err_t op_log_delete_before(void *arg, int64_t offset) {
    return st_metalog_delete_before(arg, offset);
}
static st_err_t op_snapshot_create(void *arg, st_raft_snapshot_id_t id) {
    return st_metalog_snapshot_create(arg, id);
}
static int op_snapshot_latest(void *arg, st_raft_snapshot_id_t *id) {
    return st_metalog_snapshot_latest(arg, id);
}
static st_err_t op_snapshot_load(void *arg, st_raft_snapshot_id_t id) {
    return st_metalog_snapshot_load(arg, id);
}
static st_err_t op_snapshot_read(void *arg, st_raft_snapshot_id_t id, int64_t position,
                                 int32_t max_bytes, const uint8_t **p, int32_t *len,
                                 int64_t *size) {
    return st_metalog_snapshot_read(arg, id, position, max_bytes, p, len, size);
}
static st_err_t op_snapshot_write(void *arg, st_raft_snapshot_id_t id, int64_t position,
                                  const uint8_t *p, int32_t len) {
    return st_metalog_snapshot_write(arg, id, position, p, len);
}
static st_err_t op_snapshot_install(void *arg, st_raft_snapshot_id_t id, int64_t size) {
    return st_metalog_snapshot_install(arg, id, size);
}

void st_metalog_fill_ops(st_metalog_t *m, st_raft_ops_t *ops) {
    ops->arg = m;
    ops->persist = op_persist;
    ops->log_append = op_log_append;
    ops->log_flush = op_log_flush;
    ops->log_durable_end = op_log_durable_end;
    ops->log_truncate = op_log_truncate;
    ops->log_read = op_log_read;
    ops->log_start_offset = op_log_start_offset;
    ops->log_end_offset = op_log_end_offset;
    ops->log_end_offset_for_epoch = op_log_end_offset_for_epoch;
    ops->log_reset = op_log_reset;
    ops->log_delete_before = op_log_delete_before;
    ops->snapshot_create = op_snapshot_create;
    ops->snapshot_latest = op_snapshot_latest;
    ops->snapshot_load = op_snapshot_load;
    ops->snapshot_read = op_snapshot_read;
    ops->snapshot_write = op_snapshot_write;
    ops->snapshot_install = op_snapshot_install;
}

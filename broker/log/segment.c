/*
 * segment.c - one segment: its .log, its sparse offset and time indexes,
 * and its recovery.
 *
 * Invariants: idx[] and tidx[] are ascending; every idx entry points at the
 * start of a batch whose last offset is base + rel; size is the end of the
 * last whole, valid batch.  The index files hold a prefix of idx[]/tidx[]
 * (dirty_index says more is pending); they are rewritten whole when a
 * segment is closed and are rebuilt when they disagree with the .log.
 *
 * A segment holds no descriptor: each function keeps the file it needs
 * from the log manager's cache (fcache.c) and releases it before
 * returning.  Called with the owning log's lock held (or before the log is
 * shared).
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const seg_exts[3] = {".log", ".index", ".timeindex"};
static uint64_t seg_next_id;

void st_log__seg_path(const char *dir, int64_t base, const char *ext, char *out, size_t n) {
    snprintf(out, n, "%s/%020lld%s", dir, (long long)base, ext);
}

st_err_t st_log__seg_keep(st_segment_t *s, int kind, st_file_t **out) {
    return st_log__fcache_keep(s->fc, &s->files[kind], s->dir, s->base_offset, seg_exts[kind],
                               kind != ST_SEG_LOG, out);
}

st_err_t st_log__seg_open(st_fcache_t *fc, const char *dir, int64_t base, int create,
                          st_segment_t **out) {
    st_segment_t *s = st_calloc(1, sizeof *s);
    s->base_offset = base;
    s->next_offset = base;
    s->id = __atomic_add_fetch(&seg_next_id, 1, __ATOMIC_RELAXED);
    s->fc = fc;
    s->dir = dir;
    s->max_timestamp = -1;
    s->offset_of_max_timestamp = -1;
    s->created_ms = st_now_ms();
    st_err_t e = ST_OK;
    if (create) {
        /* all three files exist from the start (Kafka's layout); the .log
         * stays in the cache for the appends that follow */
        st_file_t *f = NULL;
        for (int k = ST_SEG_TIMEINDEX; k >= ST_SEG_LOG && !e; k--) {
            e = st_log__fcache_keep(fc, &s->files[k], dir, base, seg_exts[k], 1, &f);
            if (!e && k == ST_SEG_LOG) {
                struct stat st;
                if (fstat(f->fd, &st) != 0) e = st_err_from_errno(errno);
                else s->size = st.st_size;
            }
            if (!e) st_file_release(f);
        }
    } else {
        char path[4096];
        st_log__seg_path(dir, base, ".log", path, sizeof path);
        struct stat st;
        if (stat(path, &st) != 0) e = st_err_from_errno(errno);
        else s->size = st.st_size;
    }
    if (e) {
        st_log__seg_close(s);
        return e;
    }
    *out = s;
    return ST_OK;
}

static void idx_push(st_segment_t *s, int32_t rel, int32_t pos) {
    if (s->nidx == s->capidx) {
        s->capidx = s->capidx ? s->capidx * 2 : 4;
        s->idx = st_realloc(s->idx, (size_t)s->capidx * sizeof *s->idx);
    }
    s->idx[s->nidx++] = (st_idx_entry_t){rel, pos};
    s->dirty_index = 1;
}

static void tidx_push(st_segment_t *s, int64_t ts, int32_t rel) {
    if (s->ntidx && s->tidx[s->ntidx - 1].ts >= ts) return;
    if (s->ntidx == s->captidx) {
        s->captidx = s->captidx ? s->captidx * 2 : 4;
        s->tidx = st_realloc(s->tidx, (size_t)s->captidx * sizeof *s->tidx);
    }
    s->tidx[s->ntidx++] = (st_tidx_entry_t){ts, rel};
    s->dirty_index = 1;
}

/* Index the batch just placed at pos (Kafka indexes a batch's last offset
 * once log.index.interval.bytes have passed since the previous entry). */
void st_log__seg_index_batch(st_segment_t *s, const st_batch_info_t *b, int64_t pos,
                             int32_t interval) {
    int64_t last = st_batch_last_offset(b);
    if (b->max_timestamp > s->max_timestamp) {
        s->max_timestamp = b->max_timestamp;
        s->offset_of_max_timestamp = last;
    }
    if (s->nidx == 0 || s->bytes_since_index >= interval) {
        idx_push(s, (int32_t)(last - s->base_offset), (int32_t)pos);
        if (s->max_timestamp >= 0)
            tidx_push(s, s->max_timestamp, (int32_t)(s->offset_of_max_timestamp - s->base_offset));
        s->bytes_since_index = 0;
    }
    s->bytes_since_index += b->size;
    s->next_offset = last + 1;
}

/* Append the entries not yet in the files (the files only ever grow by
 * whole entries); with final, add the segment's closing time-index entry
 * and cut the files to their entries, and with sync as well sync them. */
static st_err_t write_index_fds(st_segment_t *s, int index_fd, int timeindex_fd, int final,
                                int sync) {
    if (final && s->max_timestamp >= 0)
        tidx_push(s, s->max_timestamp, (int32_t)(s->offset_of_max_timestamp - s->base_offset));
    if (!s->dirty_index && !final) return ST_OK;
    st_err_t e = ST_OK;
    if (s->nidx_written == 0 && ftruncate(index_fd, 0) != 0) e = st_err_from_errno(errno);
    if (s->ntidx_written == 0 && ftruncate(timeindex_fd, 0) != 0) e = st_err_from_errno(errno);
    int n = s->nidx - s->nidx_written, m = s->ntidx - s->ntidx_written;
    uint8_t *buf = st_malloc((size_t)ST_MAX(n * 8, m * 12) + 1);
    for (int i = 0; i < n; i++) {
        st_be32_put(buf + i * 8, (uint32_t)s->idx[s->nidx_written + i].rel);
        st_be32_put(buf + i * 8 + 4, (uint32_t)s->idx[s->nidx_written + i].pos);
    }
    if (!e) e = st_pwrite_all(index_fd, buf, (size_t)n * 8, (int64_t)s->nidx_written * 8);
    for (int i = 0; i < m; i++) {
        st_be64_put(buf + i * 12, (uint64_t)s->tidx[s->ntidx_written + i].ts);
        st_be32_put(buf + i * 12 + 8, (uint32_t)s->tidx[s->ntidx_written + i].rel);
    }
    if (!e) e = st_pwrite_all(timeindex_fd, buf, (size_t)m * 12, (int64_t)s->ntidx_written * 12);
    free(buf);
    if (e) return e;
    s->nidx_written = s->nidx;
    s->ntidx_written = s->ntidx;
    s->dirty_index = 0;
    if (final) {
        if (ftruncate(index_fd, (off_t)s->nidx * 8) != 0 ||
            ftruncate(timeindex_fd, (off_t)s->ntidx * 12) != 0)
            e = st_err_from_errno(errno);
        if (!e && sync) e = st_log__sync(s->fc, index_fd, 1);
        if (!e && sync) e = st_log__sync(s->fc, timeindex_fd, 1);
        if (!e) s->indexes_final = 1;
        s->indexes_unsynced = !sync;
    }
    return e;
}

st_err_t st_log__seg_write_index_fds(st_segment_t *s, int index_fd, int timeindex_fd, int final) {
    return write_index_fds(s, index_fd, timeindex_fd, final, final);
}

st_err_t st_log__seg_close_indexes(st_segment_t *s) {
    if (s->indexes_final) return ST_OK;
    st_file_t *fi = NULL, *ft = NULL;
    st_err_t e = st_log__seg_keep(s, ST_SEG_INDEX, &fi);
    if (!e) e = st_log__seg_keep(s, ST_SEG_TIMEINDEX, &ft);
    if (!e) e = write_index_fds(s, fi->fd, ft->fd, 1, 0);
    st_file_release(fi);
    st_file_release(ft);
    return e;
}

st_err_t st_log__seg_write_indexes(st_segment_t *s, int final) {
    if (final && s->indexes_final && !s->indexes_unsynced) return ST_OK; /* closed, synced */
    if (!s->dirty_index && !final) return ST_OK;
    st_file_t *fi = NULL, *ft = NULL;
    st_err_t e = st_log__seg_keep(s, ST_SEG_INDEX, &fi);
    if (!e) e = st_log__seg_keep(s, ST_SEG_TIMEINDEX, &ft);
    if (!e && final && s->indexes_final) { /* closed by a roll: only the sync is left */
        e = st_log__sync(s->fc, fi->fd, 1);
        if (!e) e = st_log__sync(s->fc, ft->fd, 1);
        if (!e) s->indexes_unsynced = 0;
    } else if (!e) {
        e = st_log__seg_write_index_fds(s, fi->fd, ft->fd, final);
    }
    st_file_release(fi);
    st_file_release(ft);
    return e;
}

/* The index entries of what stays are kept (those naming batches before
 * the cut, and time entries up to the last of them); the batches after the
 * last kept entry are walked again, so bytes_since_index and the segment's
 * newest timestamp are what appending them would have made. */
st_err_t st_log__seg_truncate(st_segment_t *s, int64_t offset, int32_t index_interval) {
    st_file_t *f = NULL, *fi = NULL, *ft = NULL;
    int64_t cut;
    st_err_t e = st_log__seg_keep(s, ST_SEG_LOG, &f);
    if (!e) e = st_log__seg_find(s, f, offset, &cut, NULL);
    if (e == ST_E_NOT_FOUND) { /* nothing at or after offset */
        e = ST_OK;
        goto out;
    }
    if (e) goto out;
    if (ftruncate(f->fd, cut) != 0) e = st_err_from_errno(errno);
    if (!e) e = st_log__sync(s->fc, f->fd, 1);
    if (e) goto out;
    s->size = s->prealloc_end = cut;
    while (s->nidx && s->idx[s->nidx - 1].pos >= cut) s->nidx--;
    int32_t prev_rel = s->nidx ? s->idx[s->nidx - 1].rel : -1;
    while (s->ntidx && s->tidx[s->ntidx - 1].rel > prev_rel) s->ntidx--;
    s->max_timestamp = s->ntidx ? s->tidx[s->ntidx - 1].ts : -1;
    s->offset_of_max_timestamp = s->ntidx ? s->base_offset + s->tidx[s->ntidx - 1].rel : -1;
    s->nidx_written = ST_MIN(s->nidx_written, s->nidx);
    s->ntidx_written = ST_MIN(s->ntidx_written, s->ntidx);
    s->indexes_final = s->indexes_unsynced = 0;
    e = st_log__seg_keep(s, ST_SEG_INDEX, &fi);
    if (!e) e = st_log__seg_keep(s, ST_SEG_TIMEINDEX, &ft);
    if (!e && (ftruncate(fi->fd, (off_t)s->nidx_written * 8) != 0 ||
               ftruncate(ft->fd, (off_t)s->ntidx_written * 12) != 0))
        e = st_err_from_errno(errno);
    if (e) goto out;
    int64_t pos = 0;
    s->next_offset = s->base_offset;
    s->bytes_since_index = 0;
    for (int first = 1; pos < cut; first = 0) {
        uint8_t hdr[ST_BATCH_HEADER_SIZE];
        size_t got = 0;
        st_batch_info_t b;
        if (first && s->nidx) pos = s->idx[s->nidx - 1].pos;
        e = st_pread_all(f->fd, hdr, sizeof hdr, pos, &got);
        if (!e && st_batch_header(hdr, got, &b)) e = ST_CORRUPT_BKPT;
        if (e) goto out;
        if (first && s->nidx) {
            /* the batch of the last kept entry: indexed already */
            s->next_offset = st_batch_last_offset(&b) + 1;
            s->bytes_since_index = b.size;
        } else {
            st_log__seg_index_batch(s, &b, pos, index_interval);
        }
        pos += b.size;
    }
    s->dirty_index = s->nidx > s->nidx_written || s->ntidx > s->ntidx_written;
out:
    st_file_release(f);
    st_file_release(fi);
    st_file_release(ft);
    return e;
}

/* Give back disk blocks allocated past the data (see the append's
 * preallocation): truncating to the current size frees blocks beyond it. */
st_err_t st_log__seg_trim(st_segment_t *s, int force) {
    if (!force && s->prealloc_end <= s->size) return ST_OK;
    st_file_t *f;
    st_err_t e = st_log__seg_keep(s, ST_SEG_LOG, &f);
    if (e) return e;
    if (ftruncate(f->fd, s->size) != 0) { /* best effort: recovery trims too */ }
    st_file_release(f);
    s->prealloc_end = s->size;
    return ST_OK;
}

void st_log__seg_close(st_segment_t *s) {
    if (!s) return;
    for (int k = 0; k < 3; k++) st_log__fcache_forget(s->fc, &s->files[k]);
    free(s->idx);
    free(s->tidx);
    free(s);
}

void st_log__seg_unlink_files(const char *dir, int64_t base) {
    char path[4096];
    for (size_t i = 0; i < ST_ARRAY_SIZE(seg_exts); i++) {
        st_log__seg_path(dir, base, seg_exts[i], path, sizeof path);
        unlink(path);
    }
    st_log__seg_path(dir, base, ".txnindex", path, sizeof path);
    unlink(path);
}

void st_log__seg_unlink(st_segment_t *s, const char *dir) {
    st_log__seg_unlink_files(dir, s->base_offset);
}

int64_t st_log__seg_first_timestamp(const st_segment_t *s) {
    return s->ntidx ? s->tidx[0].ts : s->max_timestamp;
}

/* ---- recovery ----------------------------------------------------------- */

/* Load the index files and keep their longest prefix that agrees with the
 * .log: entries ascending, positions inside the file, and each entry
 * naming a batch whose last offset matches.  last_rel is the relative
 * offset of a closed segment's last record (-1 when not known): its closing
 * time-index entry may name a record past the last offset-index entry.
 * Returns 0 when the files had to be cut (or were missing while the log is
 * not empty). */
static int load_indexes(st_segment_t *s, int64_t last_rel, int log_fd, int index_fd,
                        st_file_t **ftidx) {
    struct stat st;
    int trusted = 1;
    if (fstat(index_fd, &st) == 0 && st.st_size >= 8) {
        size_t n = (size_t)st.st_size / 8;
        uint8_t *buf = st_malloc(n * 8);
        size_t got = 0;
        st_pread_all(index_fd, buf, n * 8, 0, &got);
        n = got / 8;
        if (n && (size_t)s->capidx < n) {
            s->capidx = (int)n;
            s->idx = st_realloc(s->idx, (size_t)s->capidx * sizeof *s->idx);
        }
        for (size_t i = 0; i < n; i++) {
            int32_t rel = (int32_t)st_be32_get(buf + i * 8);
            int32_t pos = (int32_t)st_be32_get(buf + i * 8 + 4);
            if (rel < 0 || pos < 0 || pos >= s->size ||
                (s->nidx && (rel <= s->idx[s->nidx - 1].rel || pos <= s->idx[s->nidx - 1].pos))) {
                trusted = 0;
                break;
            }
            uint8_t hdr[ST_BATCH_HEADER_SIZE];
            size_t hgot = 0;
            st_batch_info_t b;
            st_pread_all(log_fd, hdr, sizeof hdr, pos, &hgot);
            if (st_batch_header(hdr, hgot, &b) ||
                st_batch_last_offset(&b) != s->base_offset + rel || pos + b.size > s->size) {
                trusted = 0;
                break;
            }
            idx_push(s, rel, pos);
        }
        free(buf);
    } else if (s->size > 0) {
        trusted = 0;
    }
    if (trusted && st_log__seg_keep(s, ST_SEG_TIMEINDEX, ftidx) == ST_OK &&
        fstat((*ftidx)->fd, &st) == 0 && st.st_size >= 12) {
        size_t n = (size_t)st.st_size / 12;
        uint8_t *buf = st_malloc(n * 12);
        size_t got = 0;
        st_pread_all((*ftidx)->fd, buf, n * 12, 0, &got);
        n = got / 12;
        int64_t max_rel = s->nidx ? s->idx[s->nidx - 1].rel : -1;
        if (last_rel > max_rel) max_rel = last_rel;
        for (size_t i = 0; i < n; i++) {
            int64_t ts = (int64_t)st_be64_get(buf + i * 12);
            int32_t rel = (int32_t)st_be32_get(buf + i * 12 + 8);
            if (rel < 0 || rel > max_rel || (s->ntidx && ts <= s->tidx[s->ntidx - 1].ts)) break;
            tidx_push(s, ts, rel);
        }
        free(buf);
    }
    if (s->ntidx) {
        s->max_timestamp = s->tidx[s->ntidx - 1].ts;
        s->offset_of_max_timestamp = s->base_offset + s->tidx[s->ntidx - 1].rel;
    }
    s->dirty_index = !trusted;
    s->nidx_written = trusted ? s->nidx : 0;
    s->ntidx_written = trusted ? s->ntidx : 0;
    return trusted;
}

/* Walk batches from pos to the end of the file; index them; stop at the
 * first batch that is torn, misplaced or (with validate) fails its CRC, and
 * truncate the file there. */
static st_err_t scan_from(st_segment_t *s, int fd, int64_t pos, int validate, int32_t interval,
                          const char *what, st_log__seg_batch_cb cb, void *cb_arg) {
    int64_t file_size;
    struct stat st;
    if (fstat(fd, &st) != 0) return st_err_from_errno(errno);
    file_size = st.st_size;
    size_t bufcap = 1 << 20;
    uint8_t *buf = st_malloc(bufcap);
    const char *reason = NULL;
    int64_t expect = s->next_offset;
    while (pos < file_size) {
        uint8_t hdr[ST_BATCH_HEADER_SIZE];
        size_t got = 0;
        st_batch_info_t b;
        st_pread_all(fd, hdr, sizeof hdr, pos, &got);
        if (got < sizeof hdr) {
            reason = "torn batch header";
            break;
        }
        if (st_batch_header(hdr, got, &b)) {
            reason = "invalid batch header";
            break;
        }
        if (pos + b.size > file_size) {
            reason = "torn batch (shorter than its length)";
            break;
        }
        if (b.base_offset < expect || b.last_offset_delta < 0) {
            reason = "batch offsets out of order";
            break;
        }
        if (validate) {
            if ((size_t)b.size > bufcap) {
                bufcap = (size_t)b.size;
                buf = st_realloc(buf, bufcap);
            }
            st_pread_all(fd, buf, (size_t)b.size, pos, &got);
            if (got < (size_t)b.size || !st_batch_crc_ok(buf, b.size)) {
                reason = "CRC32C mismatch";
                break;
            }
        }
        st_log__seg_index_batch(s, &b, pos, interval);
        if (cb) cb(cb_arg, &b);
        expect = st_batch_last_offset(&b) + 1;
        pos += b.size;
    }
    free(buf);
    s->size = pos;
    if (reason) {
        ST_WARN("log", "%s: truncating segment %020lld at byte %lld (offset %lld): %s, %lld bytes removed",
                what, (long long)s->base_offset, (long long)pos, (long long)s->next_offset, reason,
                (long long)(file_size - pos));
        if (ftruncate(fd, pos) != 0) return st_err_from_errno(errno);
        st_err_t e = st_log__sync(s->fc, fd, 0);
        if (e) return e;
    }
    return ST_OK;
}

/* Trim the arrays of a segment that no longer grows. */
static void shrink_arrays(st_segment_t *s) {
    if (s->capidx > s->nidx) {
        s->capidx = s->nidx;
        s->idx = s->nidx ? st_realloc(s->idx, (size_t)s->nidx * sizeof *s->idx) : (free(s->idx), NULL);
    }
    if (s->captidx > s->ntidx) {
        s->captidx = s->ntidx;
        s->tidx = s->ntidx ? st_realloc(s->tidx, (size_t)s->ntidx * sizeof *s->tidx)
                           : (free(s->tidx), NULL);
    }
}

static st_err_t recover_with(st_segment_t *s, st_file_t *flog, st_file_t *fidx, int validate,
                             int is_last, int64_t next_base, const st_log_config_t *cfg,
                             const char *what, st_log__seg_batch_cb cb, void *cb_arg) {
    st_file_t *ftidx = NULL;
    int trusted = load_indexes(s, is_last ? -1 : next_base - 1 - s->base_offset, flog->fd, fidx->fd,
                               &ftidx);
    st_err_t e = ST_OK;
    if (!trusted && s->size > 0)
        ST_WARN("log", "%s: index of segment %020lld is missing or inconsistent; rebuilding",
                what, (long long)s->base_offset);
    /* A segment that may hold unsynced data is read whole: after a lost
     * fsync any page of it may be missing, not only the tail, and index
     * files written before the crash prove nothing about the data (Kafka's
     * LogSegment.recover rebuilds the indexes from position 0). */
    if (validate) trusted = 0;
    if (!trusted) {
        s->nidx = s->ntidx = 0;
        s->max_timestamp = s->offset_of_max_timestamp = -1;
    }
    if (!is_last && trusted && !validate && s->ntidx) {
        /* A closed segment with good indexes: its end comes from the next
         * segment; no scan needed. */
        s->next_offset = next_base;
        s->bytes_since_index = 0;
        s->indexes_final = 1;
        shrink_arrays(s);
        goto out;
    }
    /* Drop the last trusted index entry and scan from right after the batch
     * of the one before it (the start when none), as things stood when the
     * dropped entry was written: the scan puts it back at the same batch,
     * and sees the timestamps of every batch the kept entries do not cover. */
    int64_t pos = 0;
    s->bytes_since_index = 0;
    if (trusted && s->nidx) {
        int32_t prev_rel = -1;
        s->nidx--;
        if (s->nidx) {
            st_idx_entry_t prev = s->idx[s->nidx - 1];
            uint8_t hdr[ST_BATCH_HEADER_SIZE];
            size_t got = 0;
            st_batch_info_t b;
            st_pread_all(flog->fd, hdr, sizeof hdr, prev.pos, &got);
            if (st_batch_header(hdr, got, &b)) { /* load_indexes read it */
                e = ST_CORRUPT_BKPT;
                goto out;
            }
            pos = prev.pos + b.size;
            s->bytes_since_index = b.size;
            prev_rel = prev.rel;
        }
        s->next_offset = s->base_offset + prev_rel + 1;
        /* time entries past the rescanned point are rebuilt as well */
        while (s->ntidx && s->tidx[s->ntidx - 1].rel > prev_rel) s->ntidx--;
        if (s->ntidx) {
            s->max_timestamp = s->tidx[s->ntidx - 1].ts;
            s->offset_of_max_timestamp = s->base_offset + s->tidx[s->ntidx - 1].rel;
        } else {
            s->max_timestamp = s->offset_of_max_timestamp = -1;
        }
        s->nidx_written = ST_MIN(s->nidx_written, s->nidx);
        s->ntidx_written = ST_MIN(s->ntidx_written, s->ntidx);
        if (!ftidx) e = st_log__seg_keep(s, ST_SEG_TIMEINDEX, &ftidx);
        if (e) goto out;
        if (ftruncate(fidx->fd, (off_t)s->nidx_written * 8) != 0 ||
            ftruncate(ftidx->fd, (off_t)s->ntidx_written * 12) != 0) {
            e = st_err_from_errno(errno);
            goto out;
        }
    } else {
        s->next_offset = s->base_offset;
        s->nidx_written = s->ntidx_written = 0;
    }
    e = scan_from(s, flog->fd, pos, validate, cfg->index_interval_bytes, what, validate ? cb : NULL,
                  cb_arg);
    if (e) goto out;
    if (ftruncate(flog->fd, s->size) != 0) { /* best effort: blocks past the data */ }
    s->prealloc_end = s->size;
    if (s->dirty_index) e = st_log__seg_write_indexes(s, !is_last);
    else if (!is_last) s->indexes_final = 1;
    if (!is_last) shrink_arrays(s);
out:
    st_file_release(ftidx);
    return e;
}

st_err_t st_log__seg_recover(st_segment_t *s, const char *dir, int validate, int is_last,
                             int64_t next_base, const st_log_config_t *cfg, const char *what,
                             st_log__seg_batch_cb cb, void *cb_arg) {
    (void)dir;
    if (s->size == 0 && !validate) {
        /* Nothing to index, nothing to read: no file is opened (an idle
         * partition costs a stat at start-up).  Index files left longer are
         * cut at the first write (nothing of them counts as written). */
        s->next_offset = s->base_offset;
        s->indexes_final = !is_last;
        return ST_OK;
    }
    st_file_t *flog = NULL, *fidx = NULL;
    st_err_t e = st_log__seg_keep(s, ST_SEG_LOG, &flog);
    if (!e) e = st_log__seg_keep(s, ST_SEG_INDEX, &fidx);
    if (!e) e = recover_with(s, flog, fidx, validate, is_last, next_base, cfg, what, cb, cb_arg);
    st_file_release(flog);
    st_file_release(fidx);
    return e;
}

/* Binary search of the offset index, then a walk over batch headers. */
st_err_t st_log__seg_find(st_segment_t *s, st_file_t *f, int64_t offset, int64_t *pos_out,
                          st_batch_info_t *bi) {
    int64_t pos = 0;
    int lo = 0, hi = s->nidx - 1, best = -1;
    int64_t rel = offset - s->base_offset;
    /* Start at the batch of the largest entry whose last offset is below
     * the target: the target lies after it, so the walk over headers that
     * follows is short (at most log.index.interval.bytes of batches). */
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (s->idx[mid].rel < rel) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    if (best >= 0) pos = s->idx[best].pos;
    while (pos < s->size) {
        uint8_t hdr[ST_BATCH_HEADER_SIZE];
        size_t got = 0;
        st_err_t e = st_pread_all(f->fd, hdr, sizeof hdr, pos, &got);
        if (e) return e;
        st_batch_info_t b;
        if (st_batch_header(hdr, got, &b)) return ST_CORRUPT_BKPT;
        if (st_batch_last_offset(&b) >= offset) {
            *pos_out = pos;
            if (bi) *bi = b;
            return ST_OK;
        }
        pos += b.size;
    }
    *pos_out = s->size;
    return ST_E_NOT_FOUND;
}

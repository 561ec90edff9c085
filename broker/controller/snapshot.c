/*
 * snapshot.c - snapshots of the metadata image (KRaft's
 * `<end_offset>-<epoch>.checkpoint` in the metadata log directory): the
 * image written as the metadata records the log holds, and read back
 * through the same st_image_apply, so a node started from a snapshot has
 * the image a replay of the log would give.
 *
 * A snapshot file, big-endian:
 *
 *   header, 24 bytes
 *     off  size  field
 *       0     4  magic        "STSN"
 *       4     2  version      1
 *       6     2  flags        0
 *       8     8  end_offset   the state after every entry below it
 *      16     4  epoch        of the entry at end_offset - 1
 *      20     4  CRC32C of bytes 0 .. 20
 *   record batches v2, uncompressed, as in the log: base offsets count
 *   the records from 0, partitionLeaderEpoch = epoch; the records are
 *   RegisterBrokerRecord for each broker (image order), then for each
 *   topic (name order) its TopicRecord, a PartitionRecord per partition
 *   and a ConfigRecord per override (image order), then one
 *   ProducerIdsRecord with the next producer id once any block was given
 *   footer, 28 bytes
 *       0     4  magic        "STSF"
 *       4     4  batches
 *       8     8  records
 *      16     8  size         of the whole file, footer included
 *      24     4  CRC32C of every byte of the file before this field
 *
 * The footer is written last and the size and CRC cover everything, so a
 * file cut short, grown or damaged anywhere is refused, naming the file.
 * A refused latest snapshot stops the node from starting (st_raft_new
 * fails on snapshot_load): the log below it may already be deleted, and
 * starting from an older state would silently drop committed records.
 *
 * Files: created as `<name>.part`, received as `<name>.recv.part`; both
 * are fsynced, renamed into place and the directory fsynced, so a name
 * ending in .checkpoint is always whole; partial files left by a crash are
 * removed when the metalog opens.
 */
#include "metalog_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAP_MAGIC "STSN"
#define SNAP_FOOTER_MAGIC "STSF"
#define SNAP_VERSION 1
#define SNAP_HEADER 24
#define SNAP_FOOTER 28
#define SNAP_BATCH_RECORDS 1000
#define SNAP_BATCH_BYTES (512 << 10)
#define PART_SUFFIX ".part"
#define RECV_SUFFIX ".recv.part"

static char *snap_path(const char *dir, st_raft_snapshot_id_t id, const char *suffix) {
    char name[ST_RAFT_SNAPSHOT_NAME_MAX];
    st_raft_snapshot_name(id, name);
    return st_strprintf("%s/%s%s", dir, name, suffix);
}

/* ---- writing ----------------------------------------------------------------- */

typedef struct snapw {
    int fd;
    uint32_t crc;
    int64_t size;
    int64_t nrecords;
    int32_t nbatches;
    int32_t epoch;
    st_buf_t values; /* record values of the pending batch, back to back */
    size_t *ends;
    int n, cap;
    st_buf_t batch;
    st_err_t err;
} snapw_t;

static void w_bytes(snapw_t *w, const void *p, size_t n) {
    if (w->err) return;
    w->err = st_pwrite_all(w->fd, p, n, w->size);
    w->crc = st_crc32c(w->crc, p, n);
    w->size += (int64_t)n;
}

static void w_batch(snapw_t *w) {
    if (w->n == 0) return;
    st_batch_record_t *recs = st_calloc((size_t)w->n, sizeof *recs);
    size_t start = 0;
    for (int i = 0; i < w->n; i++) {
        recs[i] = (st_batch_record_t){NULL, -1, w->values.data + start,
                                      (int32_t)(w->ends[i] - start)};
        start = w->ends[i];
    }
    w->batch.len = 0;
    st_batch_build(&w->batch, recs, w->n, -1);
    free(recs);
    st_batch_stamp(w->batch.data, w->nrecords, w->epoch, -1);
    w_bytes(w, w->batch.data, w->batch.len);
    w->nrecords += w->n;
    w->nbatches++;
    w->n = 0;
    w->values.len = 0;
}

static void w_record(snapw_t *w, int type, const void *rec) {
    st_mrec_encode(type, 0, rec, &w->values);
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 64;
        w->ends = st_realloc(w->ends, sizeof *w->ends * (size_t)w->cap);
    }
    w->ends[w->n++] = w->values.len;
    if (w->n >= SNAP_BATCH_RECORDS || w->values.len >= SNAP_BATCH_BYTES) w_batch(w);
}

static void w_image(snapw_t *w, const st_meta_image_t *img) {
    for (int i = 0; i < img->nbrokers; i++) {
        const st_meta_broker_t *b = &img->brokers[i];
        st_mrec_register_broker_t r;
        st_schema_defaults(&st_mrec_register_broker_schema, &r);
        st_mrec_endpoint_t *eps = st_calloc((size_t)b->nendpoints + 1, sizeof *eps);
        int neps = b->nendpoints;
        for (int k = 0; k < neps; k++)
            eps[k] = (st_mrec_endpoint_t){st_str(b->endpoints[k].name), st_str(b->endpoints[k].host),
                                          (uint16_t)b->endpoints[k].port, 0};
        r.broker_id = b->id;
        r.broker_epoch = b->epoch;
        r.incarnation_id = b->incarnation;
        r.endpoints.v = eps;
        r.endpoints.n = neps;
        r.features.n = 0;
        r.rack = b->rack ? st_str(b->rack) : ST_STR_NULL;
        r.fenced = (int8_t)b->fenced;
        w_record(w, ST_MREC_REGISTER_BROKER, &r);
        free(eps);
    }
    for (int t = 0; t < img->ntopics; t++) {
        const st_meta_topic_t *tp = img->topics[t];
        st_mrec_topic_t tr = {st_str(tp->name), tp->id};
        w_record(w, ST_MREC_TOPIC, &tr);
        for (int p = 0; p < tp->nparts; p++) {
            const st_meta_partition_t *mp = &tp->parts[p];
            st_mrec_partition_t r;
            st_schema_defaults(&st_mrec_partition_schema, &r);
            r.partition_id = mp->id;
            r.topic_id = tp->id;
            r.replicas.v = mp->replicas;
            r.replicas.n = mp->nreplicas;
            r.isr.v = mp->isr;
            r.isr.n = mp->nisr;
            r.adding_replicas.v = mp->adding;
            r.adding_replicas.n = mp->nadding;
            r.removing_replicas.v = mp->removing;
            r.removing_replicas.n = mp->nremoving;
            if (mp->nelr > 0) r.eligible_leader_replicas.v = mp->elr, r.eligible_leader_replicas.n = mp->nelr;
            if (mp->nlkelr > 0) r.last_known_elr.v = mp->lkelr, r.last_known_elr.n = mp->nlkelr;
            r.leader = mp->leader;
            r.leader_epoch = mp->leader_epoch;
            r.partition_epoch = mp->partition_epoch;
            w_record(w, ST_MREC_PARTITION, &r);
        }
        for (int c = 0; c < tp->nconfigs; c++) {
            st_mrec_config_t cr = {ST_RESOURCE_TOPIC, st_str(tp->name),
                                   st_str(tp->configs[c].name), st_str(tp->configs[c].value)};
            w_record(w, ST_MREC_CONFIG, &cr);
        }
    }
    if (img->next_producer_id > 0) {
        /* the blocks given out so far, as one record: no id is given twice
         * after a restart from this snapshot */
        st_mrec_producer_ids_t pr = {-1, -1, img->next_producer_id};
        w_record(w, ST_MREC_PRODUCER_IDS, &pr);
    }
    const st_meta_security_t *sec = img->sec;
    for (int i = 0; sec && i < sec->nacls; i++) {
        const st_acl_t *a = &sec->acls[i];
        st_mrec_acl_t r = {a->id, a->resource_type, st_str(a->resource_name), a->pattern_type,
                           st_str(a->principal), st_str(a->host), a->operation, a->permission};
        w_record(w, ST_MREC_ACCESS_CONTROL_ENTRY, &r);
    }
    for (int i = 0; sec && i < sec->nscram; i++) {
        const st_scram_cred_t *c = &sec->scram[i].cred;
        st_mrec_user_scram_t r = {st_str(sec->scram[i].user), (int8_t)c->mech,
                                  {c->salt, (int32_t)c->salt_len},
                                  {c->stored_key, (int32_t)c->key_len},
                                  {c->server_key, (int32_t)c->key_len}, c->iterations};
        w_record(w, ST_MREC_USER_SCRAM_CREDENTIAL, &r);
    }
    w_batch(w);
}

st_err_t st_metasnap_write(const char *dir, st_raft_snapshot_id_t id, const st_meta_image_t *img,
                           char *err, size_t errlen) {
    char *part = snap_path(dir, id, PART_SUFFIX), *path = snap_path(dir, id, "");
    snapw_t w;
    memset(&w, 0, sizeof w);
    w.epoch = id.epoch;
    st_buf_init(&w.values);
    st_buf_init(&w.batch);
    const char *step = "create";
    w.fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w.fd < 0) {
        w.err = st_err_from_errno(errno);
        goto out;
    }
    uint8_t h[SNAP_HEADER];
    memcpy(h, SNAP_MAGIC, 4);
    st_be16_put(h + 4, SNAP_VERSION);
    st_be16_put(h + 6, 0);
    st_be64_put(h + 8, (uint64_t)id.end_offset);
    st_be32_put(h + 16, (uint32_t)id.epoch);
    st_be32_put(h + 20, st_crc32c(0, h, 20));
    step = "write";
    w_bytes(&w, h, sizeof h);
    w_image(&w, img);
    uint8_t f[SNAP_FOOTER];
    memcpy(f, SNAP_FOOTER_MAGIC, 4);
    st_be32_put(f + 4, (uint32_t)w.nbatches);
    st_be64_put(f + 8, (uint64_t)w.nrecords);
    st_be64_put(f + 16, (uint64_t)(w.size + SNAP_FOOTER));
    w.crc = st_crc32c(w.crc, f, 24);
    st_be32_put(f + 24, w.crc);
    if (!w.err) w.err = st_pwrite_all(w.fd, f, sizeof f, w.size);
    step = "fsync";
    if (!w.err && fsync(w.fd) != 0) w.err = st_err_from_errno(errno);
    step = "rename";
    if (!w.err && rename(part, path) != 0) w.err = st_err_from_errno(errno);
    step = "directory fsync";
    if (!w.err) w.err = st_fsync_dir(dir);
out:
    if (w.fd >= 0) close(w.fd);
    if (w.err) {
        unlink(part);
        st_snprintf_marked(err, errlen, "%s: snapshot %s failed: %s", path, step,
                           st_err_msg(w.err));
    }
    st_buf_fini(&w.values);
    st_buf_fini(&w.batch);
    free(w.ends);
    free(part);
    free(path);
    return w.err;
}

/* ---- reading ------------------------------------------------------------------- */

/* Header and footer of a whole file in memory. */
static st_err_t check_file(const char *path, const uint8_t *p, size_t len,
                           st_raft_snapshot_id_t id, int32_t *nbatches, int64_t *nrecords,
                           char *err, size_t errlen) {
    if (len < SNAP_HEADER + SNAP_FOOTER) {
        st_snprintf_marked(err, errlen, "%s: truncated snapshot: %zu bytes, a header and footer "
                           "alone take %d", path, len, SNAP_HEADER + SNAP_FOOTER);
        return ST_E_TRUNCATED;
    }
    if (memcmp(p, SNAP_MAGIC, 4) != 0 || st_be32_get(p + 20) != st_crc32c(0, p, 20)) {
        st_snprintf_marked(err, errlen, "%s: not a Strata snapshot, or its header is damaged "
                           "(magic or header CRC32C)", path);
        return ST_E_CORRUPT;
    }
    if (st_be16_get(p + 4) != SNAP_VERSION) {
        st_snprintf_marked(err, errlen, "%s: snapshot version %d; this build reads %d", path,
                           (int)st_be16_get(p + 4), SNAP_VERSION);
        return ST_E_CORRUPT;
    }
    int64_t end = (int64_t)st_be64_get(p + 8);
    int32_t epoch = (int32_t)st_be32_get(p + 16);
    if (end != id.end_offset || epoch != id.epoch) {
        st_snprintf_marked(err, errlen, "%s: the header says end offset %lld epoch %d, not the "
                           "name's %lld and %d", path, (long long)end, (int)epoch,
                           (long long)id.end_offset, (int)id.epoch);
        return ST_E_CORRUPT;
    }
    const uint8_t *f = p + len - SNAP_FOOTER;
    if (memcmp(f, SNAP_FOOTER_MAGIC, 4) != 0) {
        st_snprintf_marked(err, errlen, "%s: truncated or damaged snapshot: %zu bytes and no "
                           "footer at its end", path, len);
        return ST_E_TRUNCATED;
    }
    int64_t size = (int64_t)st_be64_get(f + 16);
    if (size != (int64_t)len) {
        st_snprintf_marked(err, errlen, "%s: the snapshot is %zu bytes, its footer says %lld",
                           path, len, (long long)size);
        return size > (int64_t)len ? ST_E_TRUNCATED : ST_E_CORRUPT;
    }
    uint32_t stored = st_be32_get(f + 24), computed = st_crc32c(0, p, len - 4);
    if (stored != computed) {
        st_snprintf_marked(err, errlen, "%s: snapshot CRC32C mismatch: stored 0x%08x, computed "
                           "0x%08x", path, stored, computed);
        return ST_E_CORRUPT;
    }
    *nbatches = (int32_t)st_be32_get(f + 4);
    *nrecords = (int64_t)st_be64_get(f + 8);
    return ST_OK;
}

/* The whole file, checked. */
static st_err_t read_checked(const char *path, st_raft_snapshot_id_t id, char **buf, size_t *len,
                             int32_t *nbatches, int64_t *nrecords, char *err, size_t errlen) {
    st_err_t e = st_read_file(path, buf, len);
    if (e) {
        st_snprintf_marked(err, errlen, "%s: cannot read the snapshot: %s", path, st_err_msg(e));
        return e;
    }
    e = check_file(path, (const uint8_t *)*buf, *len, id, nbatches, nrecords, err, errlen);
    if (e) {
        free(*buf);
        *buf = NULL;
    }
    return e;
}

typedef struct collect {
    st_arena_t *arena;
    st_mrec_t *recs;
    int64_t n, cap, seen;
    st_err_t err;
} collect_t;

static int collect_cb(const st_record_t *r, void *arg) {
    collect_t *c = arg;
    c->seen++;
    if (r->value_len <= 0) return 0;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 256;
        c->recs = st_realloc(c->recs, sizeof *c->recs * (size_t)c->cap);
    }
    st_err_t e = st_mrec_decode(r->value, (size_t)r->value_len, c->arena, &c->recs[c->n]);
    if (e == ST_E_NOT_FOUND) return 0; /* a type this build does not know, as in a replay */
    if (e) {
        c->err = e;
        return 1;
    }
    c->n++;
    return 0;
}

st_err_t st_metasnap_read(const char *path, st_raft_snapshot_id_t id, st_meta_image_t **out,
                          char *err, size_t errlen) {
    char *buf = NULL;
    size_t len = 0;
    int32_t nbatches = 0;
    int64_t nrecords = 0;
    st_arena_t arena;
    st_arena_init(&arena, 1 << 16);
    collect_t col = {&arena, NULL, 0, 0, 0, ST_OK};
    st_err_t e = read_checked(path, id, &buf, &len, &nbatches, &nrecords, err, errlen);
    if (e) goto out;
    const uint8_t *p = (const uint8_t *)buf;
    size_t pos = SNAP_HEADER, end = len - SNAP_FOOTER;
    int32_t batches = 0;
    while (pos < end) {
        st_batch_info_t b;
        if (end - pos < ST_BATCH_HEADER_SIZE || st_batch_header(p + pos, end - pos, &b) ||
            (size_t)b.size > end - pos || !st_batch_crc_ok(p + pos, b.size) ||
            b.base_offset != col.seen) {
            e = ST_E_CORRUPT;
            st_snprintf_marked(err, errlen, "%s: snapshot batch %d at byte %zu does not check",
                               path, (int)batches, pos);
            goto out;
        }
        e = st_batch_foreach_record(p + pos, b.size, collect_cb, &col);
        if (!e) e = col.err;
        if (e) {
            st_snprintf_marked(err, errlen, "%s: snapshot batch %d at byte %zu: a record does not "
                               "decode: %s", path, (int)batches, pos, st_err_msg(e));
            goto out;
        }
        pos += (size_t)b.size;
        batches++;
    }
    if (batches != nbatches || col.seen != nrecords) {
        e = ST_E_CORRUPT;
        st_snprintf_marked(err, errlen, "%s: the snapshot holds %d batches and %lld records, its "
                           "footer says %d and %lld", path, (int)batches, (long long)col.seen,
                           (int)nbatches, (long long)nrecords);
        goto out;
    }
    /* The same function a replay applies, to an empty image. */
    st_meta_image_t *empty = st_image_apply(NULL, NULL, 0, -1);
    *out = st_image_apply(empty, col.recs, (int)col.n, id.end_offset - 1);
    st_image_release(empty);
out:
    free(col.recs);
    st_arena_fini(&arena);
    free(buf);
    return e;
}

/* ---- the metalog's snapshots ------------------------------------------------------ */

static int id_less(st_raft_snapshot_id_t a, st_raft_snapshot_id_t b) {
    return a.end_offset < b.end_offset || (a.end_offset == b.end_offset && a.epoch < b.epoch);
}

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Every snapshot in the directory, sorted oldest first; partial files are
 * removed with remove_partial. */
static int list_snapshots(st_metalog_t *m, st_raft_snapshot_id_t **out, int remove_partial) {
    DIR *d = opendir(m->dir);
    int n = 0, cap = 0;
    *out = NULL;
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        st_raft_snapshot_id_t id;
        if (has_suffix(de->d_name, PART_SUFFIX) && strstr(de->d_name, ".checkpoint")) {
            if (!remove_partial) continue;
            char *p = st_strprintf("%s/%s", m->dir, de->d_name);
            ST_INFO("metalog", "%s: removing a partial snapshot left by an earlier run", p);
            unlink(p);
            free(p);
            continue;
        }
        if (st_raft_snapshot_name_parse(de->d_name, &id)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            *out = st_realloc(*out, sizeof **out * (size_t)cap);
        }
        (*out)[n++] = id;
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* few: insertion sort */
        for (int k = i; k > 0 && id_less((*out)[k], (*out)[k - 1]); k--) {
            st_raft_snapshot_id_t t = (*out)[k];
            (*out)[k] = (*out)[k - 1];
            (*out)[k - 1] = t;
        }
    return n;
}

void st_metalog__snapshot_scan(st_metalog_t *m) {
    st_raft_snapshot_id_t *ids;
    int n = list_snapshots(m, &ids, 1);
    m->have_latest = n > 0;
    if (n) m->latest = ids[n - 1];
    free(ids);
}

/* Keep the newest snapshots_kept. */
static void delete_old(st_metalog_t *m) {
    st_raft_snapshot_id_t *ids;
    int n = list_snapshots(m, &ids, 0);
    for (int i = 0; i + m->cfg.snapshots_kept < n; i++) {
        char *p = snap_path(m->dir, ids[i], "");
        ST_INFO("metalog", "%s: deleting an older snapshot", p);
        unlink(p);
        free(p);
    }
    free(ids);
}

static void became_latest(st_metalog_t *m, st_raft_snapshot_id_t id) {
    if (!m->have_latest || id_less(m->latest, id)) m->latest = id;
    m->have_latest = 1;
    delete_old(m);
}

st_err_t st_metalog_snapshot_create(st_metalog_t *m, st_raft_snapshot_id_t id) {
    if (!m->cfg.sm.image) {
        st_metalog__fail(m, "%s: no state machine to snapshot", m->dir);
        return ST_E_INVAL;
    }
    int64_t applied = -1;
    st_meta_image_t *img = m->cfg.sm.image(m->cfg.sm.arg, &applied);
    st_err_t e = ST_OK;
    if (applied != id.end_offset) {
        st_metalog__fail(m, "%s: snapshot at %lld asked of an image that has applied the entries "
                         "below %lld", m->dir, (long long)id.end_offset, (long long)applied);
        e = ST_E_INVAL;
        goto out;
    }
    e = st_metasnap_write(m->dir, id, img, m->err, sizeof m->err);
    if (e) {
        ST_ERROR("metalog", "%s", m->err);
        goto out;
    }
    became_latest(m, id);
out:
    st_image_release(img);
    return e;
}

int st_metalog_snapshot_latest(st_metalog_t *m, st_raft_snapshot_id_t *id) {
    if (m->have_latest) *id = m->latest;
    return m->have_latest;
}

st_err_t st_metalog_snapshot_load(st_metalog_t *m, st_raft_snapshot_id_t id) {
    char *path = snap_path(m->dir, id, "");
    st_meta_image_t *img = NULL;
    st_err_t e = st_metasnap_read(path, id, &img, m->err, sizeof m->err);
    if (e) {
        ST_ERROR("metalog", "%s", m->err);
    } else if (m->cfg.sm.load) {
        m->cfg.sm.load(m->cfg.sm.arg, img, id);
    } else {
        st_image_release(img);
    }
    free(path);
    return e;
}

st_err_t st_metalog_snapshot_read(st_metalog_t *m, st_raft_snapshot_id_t id, int64_t position,
                                  int32_t max_bytes, const uint8_t **p, int32_t *len,
                                  int64_t *size) {
    char *path = snap_path(m->dir, id, "");
    st_err_t e = ST_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        e = errno == ENOENT ? ST_E_NOT_FOUND : st_err_from_errno(errno);
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        e = st_err_from_errno(errno);
        goto out;
    }
    if (position < 0) {
        e = ST_E_OFFSET_OUT_OF_RANGE;
        goto out;
    }
    /* past the end: no bytes, and the size tells the Raft to answer
     * POSITION_OUT_OF_RANGE (a hostile position must not fail the node) */
    int64_t want = position >= st.st_size
                       ? 0
                       : ST_MIN((int64_t)ST_MAX(max_bytes, 0), st.st_size - position);
    if (want > m->capsbuf) {
        m->capsbuf = (int32_t)want;
        m->sbuf = st_realloc(m->sbuf, (size_t)want);
    }
    size_t got = 0;
    e = st_pread_all(fd, m->sbuf, (size_t)want, position, &got);
    if (!e && got != (size_t)want) e = ST_E_IO;
    if (e) goto out;
    *p = m->sbuf;
    *len = (int32_t)want;
    *size = st.st_size;
out:
    if (e && e != ST_E_NOT_FOUND && e != ST_E_OFFSET_OUT_OF_RANGE)
        st_metalog__fail(m, "%s: snapshot read at %lld failed: %s", path, (long long)position,
                         st_err_msg(e));
    if (fd >= 0) close(fd);
    free(path);
    return e;
}

void st_metalog__snapshot_recv_abort(st_metalog_t *m) {
    if (m->recv_fd < 0) return;
    close(m->recv_fd);
    m->recv_fd = -1;
    char *part = snap_path(m->dir, m->recv_id, RECV_SUFFIX);
    unlink(part);
    free(part);
}

st_err_t st_metalog_snapshot_write(st_metalog_t *m, st_raft_snapshot_id_t id, int64_t position,
                                   const uint8_t *p, int32_t len) {
    char name[ST_RAFT_SNAPSHOT_NAME_MAX];
    st_raft_snapshot_name(id, name);
    if (len < 0) return ST_E_INVAL;
    if (position == 0) {
        st_metalog__snapshot_recv_abort(m);
        char *part = snap_path(m->dir, id, RECV_SUFFIX);
        m->recv_fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        st_err_t e = m->recv_fd < 0 ? st_err_from_errno(errno) : ST_OK;
        if (e) st_metalog__fail(m, "%s: cannot create: %s", part, st_err_msg(e));
        free(part);
        if (e) return e;
        m->recv_id = id;
        m->recv_pos = 0;
    } else if (m->recv_fd < 0 || m->recv_id.end_offset != id.end_offset ||
               m->recv_id.epoch != id.epoch || position != m->recv_pos) {
        st_metalog__fail(m, "%s: snapshot chunk at %lld refused: %s", name, (long long)position,
                         m->recv_fd < 0 || m->recv_id.end_offset != id.end_offset ||
                                 m->recv_id.epoch != id.epoch
                             ? "no transfer of this snapshot is in progress"
                             : "chunks must come in order");
        return ST_E_INVAL;
    }
    st_err_t e = st_pwrite_all(m->recv_fd, p, (size_t)len, m->recv_pos);
    if (e) {
        st_metalog__fail(m, "%s: snapshot chunk write failed: %s", name, st_err_msg(e));
        st_metalog__snapshot_recv_abort(m);
        return e;
    }
    m->recv_pos += len;
    return ST_OK;
}

st_err_t st_metalog_snapshot_install(st_metalog_t *m, st_raft_snapshot_id_t id, int64_t size) {
    char *part = snap_path(m->dir, id, RECV_SUFFIX), *path = snap_path(m->dir, id, "");
    char *buf = NULL;
    size_t len = 0;
    int32_t nb;
    int64_t nr;
    st_err_t e = ST_OK;
    if (m->recv_fd < 0 || m->recv_id.end_offset != id.end_offset ||
        m->recv_id.epoch != id.epoch || m->recv_pos != size) {
        st_metalog__fail(m, "%s: install refused: %lld bytes received, the snapshot has %lld",
                         path, m->recv_fd < 0 ? 0ll : (long long)m->recv_pos, (long long)size);
        e = m->recv_fd < 0 ? ST_E_INVAL : ST_E_TRUNCATED;
        goto out;
    }
    if (fsync(m->recv_fd) != 0) {
        e = st_err_from_errno(errno);
        st_metalog__fail(m, "%s: fsync failed: %s", part, st_err_msg(e));
        goto out;
    }
    e = read_checked(part, id, &buf, &len, &nb, &nr, m->err, sizeof m->err);
    if (e) {
        ST_ERROR("metalog", "%s (received snapshot refused)", m->err);
        goto out;
    }
    e = rename(part, path) != 0 ? st_err_from_errno(errno) : st_fsync_dir(m->dir);
    if (e) {
        st_metalog__fail(m, "%s: cannot install the received snapshot: %s", path,
                         st_err_msg(e));
        goto out;
    }
    close(m->recv_fd);
    m->recv_fd = -1;
    became_latest(m, id);
out:
    if (e) st_metalog__snapshot_recv_abort(m);
    free(buf);
    free(part);
    free(path);
    return e;
}

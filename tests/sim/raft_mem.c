/*
 * raft_mem.c - st_raft_ops_t over memory, modelling a disk (raft_mem.h).
 */
#include "raft_mem.h"

#include <stdlib.h>

#define NODE(arg) ((rm_node_t *)(arg))

uint64_t rm_entry_hash(int64_t base, int32_t epoch, const uint8_t *data, int32_t len) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)base * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(uint32_t)epoch << 17;
    for (int32_t i = 0; i < len; i++) h = (h ^ data[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

uint64_t rm_sm_step(uint64_t h, uint64_t entry_hash) {
    h = (h ^ entry_hash) * 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 31);
}

static int64_t m_now(void *arg) { return *NODE(arg)->clock; }

static uint32_t m_random(void *arg) {
    rm_node_t *n = NODE(arg);
    uint64_t x = n->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    n->rng = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

static void m_send(void *arg, int32_t dest, const st_raft_msg_t *m) {
    rm_node_t *n = NODE(arg);
    if (n->hooks.send) n->hooks.send(n->hooks.ctx, n, dest, m);
}

static st_err_t m_persist(void *arg, const st_raft_qstate_t *qs) {
    rm_node_t *n = NODE(arg);
    if (n->fail_persist) {
        st_err_t e = n->fail_persist;
        n->fail_persist = ST_OK;
        return e;
    }
    st_buf_t b;
    st_buf_init(&b);
    st_raft_qstate_encode(qs, &b);
    if (b.len > sizeof n->qs) abort();
    memcpy(n->qs, b.data, b.len);
    n->qs_len = b.len;
    st_buf_fini(&b);
    n->persists++;
    return ST_OK;
}

int64_t rm_node_log_end(const rm_node_t *n) {
    if (n->nlog == 0) return n->log_start;
    const rm_entry_t *e = &n->log[n->nlog - 1];
    return e->base + e->count;
}

static int64_t m_log_end(void *arg) { return rm_node_log_end(NODE(arg)); }
static int64_t m_log_start(void *arg) { return NODE(arg)->log_start; }
static int64_t m_durable_end(void *arg) { return NODE(arg)->durable_end; }

static st_err_t m_append(void *arg, const st_raft_entry_t *e, int k) {
    rm_node_t *n = NODE(arg);
    if (n->fail_append) {
        st_err_t err = n->fail_append;
        n->fail_append = ST_OK;
        return err;
    }
    for (int i = 0; i < k; i++) {
        if (e[i].base_offset != rm_node_log_end(n) || e[i].record_count < 1) return ST_E_INVAL;
        if (n->nlog == n->caplog) {
            n->caplog = n->caplog ? 2 * n->caplog : 16;
            n->log = st_realloc(n->log, sizeof *n->log * (size_t)n->caplog);
        }
        rm_entry_t *d = &n->log[n->nlog++];
        d->base = e[i].base_offset;
        d->epoch = e[i].epoch;
        d->count = e[i].record_count;
        d->control = e[i].control;
        d->len = e[i].len;
        d->data = st_malloc((size_t)e[i].len + 1);
        if (e[i].len) memcpy(d->data, e[i].data, (size_t)e[i].len);
    }
    return ST_OK;
}

static void m_flush(void *arg) {
    rm_node_t *n = NODE(arg);
    if (n->nflush == n->capflush) {
        n->capflush = n->capflush ? 2 * n->capflush : 8;
        n->flushes = st_realloc(n->flushes, sizeof *n->flushes * (size_t)n->capflush);
    }
    n->flushes[n->nflush++] = rm_node_log_end(n);
    if (n->hooks.flush_queued) n->hooks.flush_queued(n->hooks.ctx, n);
}

int rm_node_flush_complete(rm_node_t *n) {
    if (n->nflush == 0) return 0;
    int64_t t = n->flushes[0];
    memmove(n->flushes, n->flushes + 1, sizeof *n->flushes * (size_t)(n->nflush - 1));
    n->nflush--;
    int64_t end = rm_node_log_end(n);
    if (t > end) t = end;
    if (t > n->durable_end) n->durable_end = t;
    if (n->r) st_raft_log_flushed(n->r);
    return 1;
}

static void clamp_flushes(rm_node_t *n, int64_t off) {
    for (int i = 0; i < n->nflush; i++)
        if (n->flushes[i] > off) n->flushes[i] = off;
}

static void drop_from(rm_node_t *n, int idx) {
    for (int i = idx; i < n->nlog; i++) free(n->log[i].data);
    n->nlog = idx;
}

static st_err_t m_truncate(void *arg, int64_t off) {
    rm_node_t *n = NODE(arg);
    if (off < n->log_start) return ST_E_INVAL;
    int i = 0;
    while (i < n->nlog && n->log[i].base < off) i++;
    if (i < n->nlog && i > 0 && n->log[i - 1].base + n->log[i - 1].count > off) return ST_E_INVAL;
    drop_from(n, i);
    if (n->durable_end > off) n->durable_end = off;
    clamp_flushes(n, off);
    return ST_OK;
}

static int find(const rm_node_t *n, int64_t off) {
    int lo = 0, hi = n->nlog - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (n->log[mid].base == off) return mid;
        if (n->log[mid].base < off)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

const rm_entry_t *rm_node_entry(const rm_node_t *n, int64_t off) {
    int i = find(n, off);
    return i < 0 ? NULL : &n->log[i];
}

static st_err_t m_read(void *arg, int64_t off, int32_t max_bytes, const st_raft_entry_t **out,
                       int *k) {
    rm_node_t *n = NODE(arg);
    *k = 0;
    *out = n->readbuf;
    if (off == rm_node_log_end(n)) return ST_OK;
    int i = find(n, off);
    if (i < 0) return ST_E_OFFSET_OUT_OF_RANGE;
    int64_t bytes = 0;
    int cnt = 0;
    while (i + cnt < n->nlog && (cnt == 0 || bytes + n->log[i + cnt].len <= max_bytes)) {
        bytes += n->log[i + cnt].len;
        cnt++;
    }
    if (cnt > n->capread) {
        n->capread = cnt + 16;
        n->readbuf = st_realloc(n->readbuf, sizeof *n->readbuf * (size_t)n->capread);
    }
    for (int j = 0; j < cnt; j++) {
        const rm_entry_t *s = &n->log[i + j];
        n->readbuf[j] = (st_raft_entry_t){s->base, s->epoch, s->count, s->control, s->data, s->len};
    }
    *out = n->readbuf;
    *k = cnt;
    return ST_OK;
}

static void m_end_for_epoch(void *arg, int32_t epoch, int32_t *out_epoch, int64_t *out_end) {
    rm_node_t *n = NODE(arg);
    int last = -1;
    for (int i = 0; i < n->nlog && n->log[i].epoch <= epoch; i++) last = i;
    if (last < 0) {
        *out_epoch = -1;
        *out_end = -1;
        return;
    }
    *out_epoch = n->log[last].epoch;
    int i = last + 1;
    *out_end = i < n->nlog ? n->log[i].base : rm_node_log_end(n);
}

static st_err_t m_reset(void *arg, st_raft_snapshot_id_t id) {
    rm_node_t *n = NODE(arg);
    drop_from(n, 0);
    n->log_start = id.end_offset;
    n->durable_end = id.end_offset;
    clamp_flushes(n, id.end_offset);
    return ST_OK;
}

static st_err_t m_delete_before(void *arg, int64_t off) {
    rm_node_t *n = NODE(arg);
    int i = 0;
    while (i < n->nlog && n->log[i].base + n->log[i].count <= off) i++;
    if (i == 0) return ST_OK;
    int64_t end = rm_node_log_end(n);
    for (int j = 0; j < i; j++) free(n->log[j].data);
    memmove(n->log, n->log + i, sizeof *n->log * (size_t)(n->nlog - i));
    n->nlog -= i;
    n->log_start = n->nlog ? n->log[0].base : end;
    if (n->durable_end < n->log_start) n->durable_end = n->log_start;
    return ST_OK;
}

/* Snapshot bytes: end_offset (8), epoch (4), hash (8), then padding that
 * depends on all three. */
static uint8_t pad_byte(uint64_t hash, int64_t end, int i) {
    return (uint8_t)((hash >> ((i % 8) * 8)) ^ (uint64_t)i ^ (uint64_t)end);
}

static st_err_t m_snap_create(void *arg, st_raft_snapshot_id_t id) {
    rm_node_t *n = NODE(arg);
    if (id.end_offset != n->sm_next) return ST_E_INVAL;
    int64_t len = 20 + RM_SNAPSHOT_PAD;
    uint8_t *p = st_malloc((size_t)len);
    st_be64_put(p, (uint64_t)id.end_offset);
    st_be32_put(p + 8, (uint32_t)id.epoch);
    st_be64_put(p + 12, n->sm_hash);
    for (int i = 0; i < RM_SNAPSHOT_PAD; i++) p[20 + i] = pad_byte(n->sm_hash, id.end_offset, i);
    free(n->snap);
    n->snap = p;
    n->snap_len = len;
    n->snap_id = id;
    n->has_snap = 1;
    n->snapshots_made++;
    return ST_OK;
}

static int m_snap_latest(void *arg, st_raft_snapshot_id_t *id) {
    rm_node_t *n = NODE(arg);
    if (!n->has_snap) return 0;
    *id = n->snap_id;
    return 1;
}

static st_err_t m_snap_load(void *arg, st_raft_snapshot_id_t id) {
    rm_node_t *n = NODE(arg);
    if (!n->has_snap || n->snap_id.end_offset != id.end_offset || n->snap_id.epoch != id.epoch)
        return ST_E_NOT_FOUND;
    if (n->snap_len != 20 + RM_SNAPSHOT_PAD) return ST_E_CORRUPT;
    int64_t end = (int64_t)st_be64_get(n->snap);
    int32_t ep = (int32_t)st_be32_get(n->snap + 8);
    uint64_t h = st_be64_get(n->snap + 12);
    if (end != id.end_offset || ep != id.epoch) return ST_E_CORRUPT;
    for (int i = 0; i < RM_SNAPSHOT_PAD; i++)
        if (n->snap[20 + i] != pad_byte(h, end, i)) return ST_E_CORRUPT;
    n->sm_next = end;
    n->sm_hash = h;
    if (n->hooks.loaded) n->hooks.loaded(n->hooks.ctx, n, id);
    return ST_OK;
}

static st_err_t m_snap_read(void *arg, st_raft_snapshot_id_t id, int64_t pos, int32_t max_bytes,
                            const uint8_t **p, int32_t *len, int64_t *size) {
    rm_node_t *n = NODE(arg);
    if (!n->has_snap || n->snap_id.end_offset != id.end_offset || n->snap_id.epoch != id.epoch)
        return ST_E_NOT_FOUND;
    *size = n->snap_len;
    if (pos > n->snap_len) {
        *p = NULL;
        *len = 0;
        return ST_OK;
    }
    *p = n->snap + pos;
    *len = (int32_t)ST_MIN((int64_t)max_bytes, n->snap_len - pos);
    return ST_OK;
}

static st_err_t m_snap_write(void *arg, st_raft_snapshot_id_t id, int64_t pos, const uint8_t *p,
                             int32_t len) {
    rm_node_t *n = NODE(arg);
    if (pos == 0) {
        free(n->stage);
        n->stage = NULL;
        n->stage_len = 0;
        n->has_stage = 1;
        n->stage_id = id;
    }
    if (!n->has_stage || n->stage_id.end_offset != id.end_offset ||
        n->stage_id.epoch != id.epoch || pos != n->stage_len)
        return ST_E_INVAL;
    n->stage = st_realloc(n->stage, (size_t)(n->stage_len + len) + 1);
    memcpy(n->stage + n->stage_len, p, (size_t)len);
    n->stage_len += len;
    return ST_OK;
}

static st_err_t m_snap_install(void *arg, st_raft_snapshot_id_t id, int64_t size) {
    rm_node_t *n = NODE(arg);
    if (!n->has_stage || n->stage_id.end_offset != id.end_offset ||
        n->stage_id.epoch != id.epoch || n->stage_len != size)
        return ST_E_INVAL;
    free(n->snap);
    n->snap = n->stage;
    n->snap_len = n->stage_len;
    n->snap_id = id;
    n->has_snap = 1;
    n->stage = NULL;
    n->stage_len = 0;
    n->has_stage = 0;
    n->snapshots_installed++;
    return ST_OK;
}

static void m_apply(void *arg, const st_raft_entry_t *e, int k) {
    rm_node_t *n = NODE(arg);
    for (int i = 0; i < k; i++) {
        n->sm_hash = rm_sm_step(n->sm_hash, rm_entry_hash(e[i].base_offset, e[i].epoch,
                                                          e[i].data, e[i].len));
        n->sm_next = e[i].base_offset + e[i].record_count;
    }
    if (n->hooks.applied) n->hooks.applied(n->hooks.ctx, n, e, k);
}

void rm_node_init(rm_node_t *n, int32_t id, const int64_t *clock, uint64_t seed,
                  const rm_hooks_t *hooks) {
    memset(n, 0, sizeof *n);
    n->id = id;
    n->clock = clock;
    n->rng = seed ? seed : 88172645463325252ull;
    if (hooks) n->hooks = *hooks;
}

void rm_node_fini(rm_node_t *n) {
    if (n->r) st_raft_destroy(n->r);
    drop_from(n, 0);
    free(n->log);
    free(n->flushes);
    free(n->readbuf);
    free(n->snap);
    free(n->stage);
    memset(n, 0, sizeof *n);
}

st_err_t rm_node_start(rm_node_t *n, const st_raft_config_t *cfg, char *err, size_t errlen) {
    st_raft_ops_t ops = {
        .arg = n,
        .now_ms = m_now,
        .random = m_random,
        .send = m_send,
        .persist = m_persist,
        .log_append = m_append,
        .log_flush = m_flush,
        .log_durable_end = m_durable_end,
        .log_truncate = m_truncate,
        .log_read = m_read,
        .log_start_offset = m_log_start,
        .log_end_offset = m_log_end,
        .log_end_offset_for_epoch = m_end_for_epoch,
        .log_reset = m_reset,
        .log_delete_before = m_delete_before,
        .snapshot_create = m_snap_create,
        .snapshot_latest = m_snap_latest,
        .snapshot_load = m_snap_load,
        .snapshot_read = m_snap_read,
        .snapshot_write = m_snap_write,
        .snapshot_install = m_snap_install,
        .apply = m_apply,
    };
    st_raft_qstate_t qs;
    const st_raft_qstate_t *initial = NULL;
    if (n->qs_len) {
        char why[256];
        st_err_t e = st_raft_qstate_decode(n->qs, n->qs_len, &qs, why, sizeof why);
        if (e) {
            st_snprintf_marked(err, errlen, "%s", why);
            return e;
        }
        initial = &qs;
    }
    n->sm_next = 0;
    n->sm_hash = 0;
    return st_raft_new(cfg, &ops, initial, &n->r, err, errlen);
}

void rm_node_crash(rm_node_t *n, int keep_unflushed) {
    if (n->r) st_raft_destroy(n->r);
    n->r = NULL;
    int i = 0;
    while (i < n->nlog && n->log[i].base < n->durable_end) i++;
    i = ST_MIN(n->nlog, i + ST_MAX(keep_unflushed, 0));
    drop_from(n, i);
    n->durable_end = rm_node_log_end(n);
    n->nflush = 0;
    free(n->stage);
    n->stage = NULL;
    n->stage_len = 0;
    n->has_stage = 0;
    n->sm_next = 0;
    n->sm_hash = 0;
}

st_raft_msg_t *rm_msg_copy(const st_raft_msg_t *m) {
    st_raft_msg_t *c = st_malloc(sizeof *c);
    *c = *m;
    c->cluster_id = m->cluster_id ? st_strdup(m->cluster_id) : NULL;
    if (m->type == ST_RAFT_FETCH_RESPONSE && m->u.fetch_resp.nrecords > 0) {
        int k = m->u.fetch_resp.nrecords;
        st_raft_entry_t *e = st_malloc(sizeof *e * (size_t)k);
        for (int i = 0; i < k; i++) {
            e[i] = m->u.fetch_resp.records[i];
            uint8_t *d = st_malloc((size_t)e[i].len + 1);
            if (e[i].len) memcpy(d, m->u.fetch_resp.records[i].data, (size_t)e[i].len);
            e[i].data = d;
        }
        c->u.fetch_resp.records = e;
    } else if (m->type == ST_RAFT_FETCH_RESPONSE) {
        c->u.fetch_resp.records = NULL;
    }
    if (m->type == ST_RAFT_FETCH_SNAPSHOT_RESPONSE) {
        int32_t len = m->u.fsnap_resp.len;
        uint8_t *d = st_malloc((size_t)(len > 0 ? len : 0) + 1);
        if (len > 0) memcpy(d, m->u.fsnap_resp.unaligned_records, (size_t)len);
        c->u.fsnap_resp.unaligned_records = d;
    }
    return c;
}

void rm_msg_free(st_raft_msg_t *m) {
    if (!m) return;
    free((char *)m->cluster_id);
    if (m->type == ST_RAFT_FETCH_RESPONSE && m->u.fetch_resp.records) {
        for (int i = 0; i < m->u.fetch_resp.nrecords; i++)
            free((uint8_t *)m->u.fetch_resp.records[i].data);
        free((st_raft_entry_t *)m->u.fetch_resp.records);
    }
    if (m->type == ST_RAFT_FETCH_SNAPSHOT_RESPONSE)
        free((uint8_t *)m->u.fsnap_resp.unaligned_records);
    free(m);
}

/*
 * replica.c - the partition table.
 *
 * Two hashes of the same topic entries (id, partitions): by name, and by
 * topic id (Fetch v13+ names topics by id).  Entries are replaced, never
 * edited in place, under the write lock; readers take a reference to the
 * partition they found and drop the lock at once.
 */
#include "replica.h"

#include <stdlib.h>

typedef struct topic_entry {
    char *name;
    st_uuid_t id;
    st_partition_t **parts;
    int nparts;
    struct topic_entry *next;       /* in buckets[] (by name) */
    struct topic_entry *next_by_id; /* in by_id[] */
} topic_entry_t;

#define NBUCKETS 8192

struct st_replicas {
    const st_broker_config_t *cfg;
    st_logmgr_t *logs;
    st_net_t *net;
    st_purgatory_t *(*purgatory_of)(st_loop_t *loop);
    st_tier_t *tier;
    pthread_rwlock_t lock;
    topic_entry_t *buckets[NBUCKETS];
    topic_entry_t *by_id[NBUCKETS];
};

static uint32_t hash_name(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static uint32_t hash_id(const st_uuid_t *id) {
    uint32_t h;
    memcpy(&h, (const uint8_t *)id + 4, sizeof h); /* random bits of a v4 uuid */
    return (h ^ (h >> 15)) * 2654435761u;
}

/* Unlink e from the id hash.  Write lock held. */
static void unlink_by_id(st_replicas_t *rm, topic_entry_t *e) {
    for (topic_entry_t **pp = &rm->by_id[hash_id(&e->id) % NBUCKETS]; *pp; pp = &(*pp)->next_by_id)
        if (*pp == e) {
            *pp = e->next_by_id;
            return;
        }
}

st_replicas_t *st_replicas_new(const st_broker_config_t *cfg, st_logmgr_t *logs) {
    st_replicas_t *rm = st_calloc(1, sizeof *rm);
    rm->cfg = cfg;
    rm->logs = logs;
    pthread_rwlock_init(&rm->lock, NULL);
    return rm;
}

void st_replicas_set_net(st_replicas_t *rm, st_net_t *net) { rm->net = net; }
void st_replicas_set_purgatories(st_replicas_t *rm, st_purgatory_t *(*of_loop)(st_loop_t *loop)) {
    rm->purgatory_of = of_loop;
}
void st_replicas_set_tier(st_replicas_t *rm, st_tier_t *tier) { rm->tier = tier; }

static st_partition_t *partition_keep(st_partition_t *p) {
    __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    return p;
}

void st_partition_release(st_partition_t *p) {
    if (!p || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (p->log) st_log_release(p->log);
    free(p->topic);
    free(p);
}

void st_replicas_destroy(st_replicas_t *rm) {
    if (!rm) return;
    for (int b = 0; b < NBUCKETS; b++) {
        topic_entry_t *t = rm->buckets[b];
        while (t) {
            topic_entry_t *next = t->next;
            for (int i = 0; i < t->nparts; i++) {
                if (!t->parts[i]) continue;
                st_log_set_notify(t->parts[i]->log, NULL, NULL);
                if (t->parts[i]->tier) st_tier_part_close(t->parts[i]->tier, 0);
                t->parts[i]->tier = NULL;
                st_partition_release(t->parts[i]);
            }
            free(t->parts);
            free(t->name);
            free(t);
            t = next;
        }
    }
    pthread_rwlock_destroy(&rm->lock);
    free(rm);
}

static topic_entry_t *find_locked(st_replicas_t *rm, const char *name, size_t len) {
    for (topic_entry_t *t = rm->buckets[hash_name(name, len) % NBUCKETS]; t; t = t->next)
        if (strlen(t->name) == len && !memcmp(t->name, name, len)) return t;
    return NULL;
}

st_partition_t *st_replicas_lookup(st_replicas_t *rm, const char *topic, size_t len,
                                   int32_t partition, int *topic_known) {
    st_partition_t *p = NULL;
    pthread_rwlock_rdlock(&rm->lock);
    topic_entry_t *t = find_locked(rm, topic, len);
    if (topic_known) *topic_known = t ? (partition >= 0 && partition < t->nparts ? 2 : 1) : 0;
    if (t && partition >= 0 && partition < t->nparts && t->parts[partition])
        p = partition_keep(t->parts[partition]);
    pthread_rwlock_unlock(&rm->lock);
    return p;
}

st_err_t st_partition_check_leader(const st_partition_t *p) {
    int32_t leader = __atomic_load_n(&p->leader, __ATOMIC_RELAXED);
    return leader == p->owner->cfg->node_id ? ST_OK : ST_E_NOT_LEADER_OR_FOLLOWER;
}

st_partition_t *st_replicas_lookup_id(st_replicas_t *rm, const st_uuid_t *id, int32_t partition) {
    st_partition_t *p = NULL;
    pthread_rwlock_rdlock(&rm->lock);
    for (topic_entry_t *t = rm->by_id[hash_id(id) % NBUCKETS]; t; t = t->next_by_id)
        if (!memcmp(&t->id, id, sizeof *id)) {
            if (partition >= 0 && partition < t->nparts && t->parts[partition])
                p = partition_keep(t->parts[partition]);
            break;
        }
    pthread_rwlock_unlock(&rm->lock);
    return p;
}

st_partition_t **st_replicas_all(st_replicas_t *rm, int *n) {
    int cnt = 0, cap = 64;
    st_partition_t **v = st_malloc(sizeof *v * (size_t)cap);
    pthread_rwlock_rdlock(&rm->lock);
    for (int b = 0; b < NBUCKETS; b++)
        for (topic_entry_t *t = rm->buckets[b]; t; t = t->next)
            for (int i = 0; i < t->nparts; i++) {
                if (!t->parts[i]) continue;
                if (cnt == cap) {
                    cap *= 2;
                    v = st_realloc(v, sizeof *v * (size_t)cap);
                }
                v[cnt++] = partition_keep(t->parts[i]);
            }
    pthread_rwlock_unlock(&rm->lock);
    *n = cnt;
    return v;
}

/* The bit says "loop i has a watcher of p that was not notified since it
 * last looked"; the change takes the bits (so a burst of appends notifies
 * each loop once until its watchers look again), and the purgatory's key
 * says which of the loop's parked requests to retry. */
void st_partition_watch(st_partition_t *p, st_delayed_t *op, int loop_index) {
    st_delayed_watch(op, p);
    __atomic_or_fetch(&p->waiters, (uint64_t)1 << (loop_index & 63), __ATOMIC_ACQ_REL);
}

/* The log moved (append or flush): notify p to the loops that watch it. */
static void on_log_change(st_log_t *log, void *arg) {
    (void)log;
    st_partition_t *p = arg;
    uint64_t mask = __atomic_exchange_n(&p->waiters, 0, __ATOMIC_ACQ_REL);
    st_net_t *net = p->owner->net;
    if (!net || !mask) return;
    for (int i = 0; i < st_net_nloops(net); i++) {
        if (!(mask & ((uint64_t)1 << (i & 63)))) continue; /* loops i and i+64 share a bit */
        st_loop_t *loop = st_net_loop(net, i);
        if (p->owner->purgatory_of) st_purgatory_notify(p->owner->purgatory_of(loop), p);
        st_loop_wake(loop);
    }
}

st_err_t st_partition_append(st_partition_t *p, uint8_t *records, size_t len,
                             st_append_info_t *info) {
    st_err_t e = st_log_append(p->log, records, len, p->leader_epoch, st_now_ms(), info);
    /* One replica: the ISR is this broker alone, so what is appended is
     * committed. */
    if (!e) st_log_set_high_watermark(p->log, info->last_offset + 1);
    return e;
}

/* ---- tiered storage -------------------------------------------------------- */

int64_t st_partition_log_start(st_partition_t *p) {
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    if (!p->tier) return o.log_start_offset;
    int64_t rs = __atomic_load_n(&p->remote_start, __ATOMIC_ACQUIRE);
    int64_t re = __atomic_load_n(&p->remote_end, __ATOMIC_ACQUIRE);
    return rs < re ? ST_MIN(rs, o.log_start_offset) : o.log_start_offset;
}

int st_partition_is_remote(st_partition_t *p, int64_t offset) {
    if (!p->tier) return 0;
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    int64_t rs = __atomic_load_n(&p->remote_start, __ATOMIC_ACQUIRE);
    int64_t re = __atomic_load_n(&p->remote_end, __ATOMIC_ACQUIRE);
    return offset < o.log_start_offset && offset >= rs && offset < re;
}

static int tier_closed_segments(void *arg, int64_t from, st_tier_segment_t *out, int max) {
    st_partition_t *p = arg;
    /* on the heap: eight of them with their paths are ~100 KB */
    st_log_segment_info_t *info = st_malloc(sizeof *info * 8);
    int n = st_log_closed_segments(p->log, from, info, ST_MIN(max, 8));
    for (int i = 0; i < n; i++) {
        st_tier_segment_t *o = &out[i];
        memset(o, 0, sizeof *o);
        o->base_offset = info[i].base_offset;
        o->last_offset = info[i].last_offset;
        o->max_timestamp = info[i].max_timestamp;
        o->size_bytes = info[i].size_bytes;
        snprintf(o->log_path, sizeof o->log_path, "%s", info[i].log_path);
        snprintf(o->index_path, sizeof o->index_path, "%s", info[i].index_path);
        snprintf(o->timeindex_path, sizeof o->timeindex_path, "%s", info[i].timeindex_path);
        o->nepochs = ST_MIN(info[i].nepochs, (int)ST_ARRAY_SIZE(o->epochs));
        for (int k = 0; k < o->nepochs; k++) {
            o->epochs[k].epoch = info[i].epochs[k].epoch;
            o->epochs[k].start_offset = info[i].epochs[k].start_offset;
        }
    }
    free(info);
    return n;
}

static void on_log_change(st_log_t *log, void *arg);

static void tier_remote_changed(void *arg, int64_t start, int64_t end) {
    st_partition_t *p = arg;
    __atomic_store_n(&p->remote_start, start, __ATOMIC_RELEASE);
    __atomic_store_n(&p->remote_end, end, __ATOMIC_RELEASE);
    st_log_set_remote_end(p->log, end);
    on_log_change(p->log, p); /* parked requests may be waiting on this */
}

static int64_t tier_local_bytes_above(void *arg, int64_t offset) {
    return st_log_bytes_above(((st_partition_t *)arg)->log, offset);
}

static void tier_release(void *arg) { st_partition_release(arg); }

/* Tier the partition: read its manifest, and when the bucket is ahead of
 * the local log (a lost or old disk) start the local log at the remote
 * end. */
static void tier_attach(st_replicas_t *rm, st_partition_t *p, const st_log_config_t *lc) {
    st_tier_part_ops_t ops = {tier_closed_segments, tier_remote_changed, tier_local_bytes_above,
                              tier_release, partition_keep(p)};
    st_tier_retention_t ret = {lc->retention_ms, lc->retention_bytes};
    char id[23], cache[4200], err[512];
    st_uuid_format(&p->topic_id, id);
    snprintf(cache, sizeof cache, "%s/remote-manifest.json", st_log_dir(p->log));
    st_tier_part_t *tp;
    if (st_tier_part_open(rm->tier, p->topic, id, p->index, cache, &ops, &ret, &tp, err, sizeof err)) {
        ST_ERROR("replica", "%s-%d: tiered storage unavailable: %s", p->topic, (int)p->index, err);
        return; /* the partition serves its local data; nothing local is deleted */
    }
    st_tier_status_t s;
    st_tier_part_status(tp, &s);
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    if (s.remote_end > o.leo) st_log_truncate_fully(p->log, s.remote_end);
    __atomic_store_n(&p->remote_start, s.remote_start, __ATOMIC_RELEASE);
    __atomic_store_n(&p->remote_end, s.remote_end, __ATOMIC_RELEASE);
    st_log_set_remote_end(p->log, s.remote_end);
    p->tier = tp;
}

/* ---- keeping up with the image ------------------------------------------- */

static void effective_config(st_replicas_t *rm, const st_meta_topic_t *t, st_log_config_t *lc,
                             int32_t *min_isr) {
    st_topic_config_t tc;
    char why[256];
    if (st_topic_config_build(rm->cfg, t->configs, t->nconfigs, &tc, why, sizeof why)) {
        /* Stored configs were validated when written; fall back to the
         * broker's defaults rather than refusing to serve. */
        ST_WARN("replica", "topic %s: stored config rejected (%s); using broker defaults",
                t->name, why);
        st_topic_config_build(rm->cfg, NULL, 0, &tc, why, sizeof why);
    }
    st_topic_config_to_log(&tc, lc);
    lc->remote = lc->remote && rm->tier != NULL;
    *min_isr = tc.min_insync_replicas;
    st_topic_config_fini(&tc);
}

static int is_replica_here(st_replicas_t *rm, const st_meta_partition_t *mp) {
    for (int i = 0; i < mp->nreplicas; i++)
        if (mp->replicas[i] == rm->cfg->node_id) return 1;
    return 0;
}

static st_partition_t *partition_open(st_replicas_t *rm, const st_meta_topic_t *t,
                                      const st_meta_partition_t *mp, const st_log_config_t *lc,
                                      int32_t min_isr) {
    st_partition_t *p = st_calloc(1, sizeof *p);
    p->refs = 1;
    p->topic = st_strdup(t->name);
    p->topic_id = t->id;
    p->index = mp->id;
    p->leader_epoch = mp->leader_epoch;
    __atomic_store_n(&p->leader, mp->leader, __ATOMIC_RELAXED);
    p->min_insync_replicas = min_isr;
    p->isr_size = mp->nisr;
    p->owner = rm;
    st_err_t e = st_logmgr_open_log(rm->logs, t->name, mp->id, &t->id, lc, &p->log);
    if (e) {
        ST_ERROR("replica", "%s-%d: cannot open log: %s", t->name, (int)mp->id, st_err_msg(e));
        free(p->topic);
        free(p);
        return NULL;
    }
    st_log_set_notify(p->log, on_log_change, p);
    if (lc->remote) tier_attach(rm, p, lc);
    return p;
}

static void entry_free(topic_entry_t *e, int delete_logs, st_logmgr_t *logs) {
    for (int i = 0; i < e->nparts; i++) {
        st_partition_t *p = e->parts[i];
        if (!p) continue;
        st_log_set_notify(p->log, NULL, NULL);
        on_log_change(p->log, p); /* parked readers learn the news */
        if (p->tier) st_tier_part_close(p->tier, delete_logs);
        p->tier = NULL;
        if (delete_logs) {
            st_log_t *log = p->log;
            p->log = st_log_keep(log);
            st_logmgr_delete_log(logs, log);
        }
        st_partition_release(p);
    }
    free(e->parts);
    free(e->name);
    free(e);
}

void st_replicas_sync(const st_meta_image_t *old_img, const st_meta_image_t *new_img, void *arg) {
    st_replicas_t *rm = arg;
    /* Topics gone from the image: unlink from the table, then delete. */
    if (old_img) {
        for (int i = 0; i < old_img->ntopics; i++) {
            const st_meta_topic_t *ot = old_img->topics[i];
            const st_meta_topic_t *nt = st_image_topic(new_img, ot->name, strlen(ot->name));
            if (nt && !memcmp(&nt->id, &ot->id, sizeof nt->id)) continue;
            pthread_rwlock_wrlock(&rm->lock);
            topic_entry_t **pp = &rm->buckets[hash_name(ot->name, strlen(ot->name)) % NBUCKETS];
            topic_entry_t *gone = NULL;
            while (*pp) {
                if (!strcmp((*pp)->name, ot->name)) {
                    gone = *pp;
                    *pp = gone->next;
                    unlink_by_id(rm, gone);
                    break;
                }
                pp = &(*pp)->next;
            }
            pthread_rwlock_unlock(&rm->lock);
            if (gone) entry_free(gone, 1, rm->logs);
        }
    }
    /* New topics, new partitions, changed configs.  Topics without
     * overrides share one effective config (built once: a start-up with
     * many topics builds it once, not per topic). */
    st_log_config_t default_lc;
    int32_t default_min_isr = 0;
    int have_default = 0;
    for (int i = 0; i < new_img->ntopics; i++) {
        const st_meta_topic_t *t = new_img->topics[i];
        const st_meta_topic_t *ot = old_img ? st_image_topic(old_img, t->name, strlen(t->name)) : NULL;
        if (ot == t) continue; /* shared, unchanged */
        st_log_config_t lc;
        int32_t min_isr;
        if (t->nconfigs == 0) {
            if (!have_default) effective_config(rm, t, &default_lc, &default_min_isr);
            have_default = 1;
            lc = default_lc;
            min_isr = default_min_isr;
        } else {
            effective_config(rm, t, &lc, &min_isr);
        }
        pthread_rwlock_rdlock(&rm->lock);
        topic_entry_t *cur = find_locked(rm, t->name, strlen(t->name));
        int have = cur ? cur->nparts : 0;
        pthread_rwlock_unlock(&rm->lock);
        /* Build the replacement entry outside the lock (opening logs may
         * recover them), reusing the partitions already open. */
        topic_entry_t *ne = st_calloc(1, sizeof *ne);
        ne->name = st_strdup(t->name);
        ne->id = t->id;
        ne->nparts = t->nparts;
        ne->parts = st_calloc((size_t)(t->nparts ? t->nparts : 1), sizeof *ne->parts);
        for (int k = 0; k < t->nparts; k++) {
            const st_meta_partition_t *mp = &t->parts[k];
            if (k < have && cur->parts[k]) {
                st_partition_t *p = partition_keep(cur->parts[k]);
                st_log_set_config(p->log, &lc);
                if (lc.remote && !p->tier) tier_attach(rm, p, &lc);
                if (p->tier) {
                    st_tier_retention_t ret = {lc.retention_ms, lc.retention_bytes};
                    st_tier_part_set_retention(p->tier, &ret);
                }
                p->min_insync_replicas = min_isr;
                p->leader_epoch = mp->leader_epoch;
                __atomic_store_n(&p->leader, mp->leader, __ATOMIC_RELAXED);
                p->isr_size = mp->nisr;
                ne->parts[k] = p;
            } else if (is_replica_here(rm, mp)) {
                ne->parts[k] = partition_open(rm, t, mp, &lc, min_isr);
            }
        }
        pthread_rwlock_wrlock(&rm->lock);
        topic_entry_t **pp = &rm->buckets[hash_name(t->name, strlen(t->name)) % NBUCKETS];
        topic_entry_t *old = NULL;
        while (*pp) {
            if (!strcmp((*pp)->name, t->name)) {
                old = *pp;
                *pp = old->next;
                unlink_by_id(rm, old);
                break;
            }
            pp = &(*pp)->next;
        }
        ne->next = rm->buckets[hash_name(t->name, strlen(t->name)) % NBUCKETS];
        rm->buckets[hash_name(t->name, strlen(t->name)) % NBUCKETS] = ne;
        ne->next_by_id = rm->by_id[hash_id(&ne->id) % NBUCKETS];
        rm->by_id[hash_id(&ne->id) % NBUCKETS] = ne;
        pthread_rwlock_unlock(&rm->lock);
        if (old) {
            /* its partitions live on in ne (kept above) */
            for (int k = 0; k < old->nparts; k++) st_partition_release(old->parts[k]);
            free(old->parts);
            free(old->name);
            free(old);
        }
    }
}

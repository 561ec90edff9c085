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
#include <unistd.h>

/* Replicas of one partition: Kafka's bound on a replica list is far above
 * any cluster this serves; a longer list from the image is cut here. */
#define ST_REPLICA_MAX 64

typedef struct st_follower {
    int32_t id;
    int64_t leo; /* -1: not heard from since this broker became leader */
    int64_t last_caught_up_ms;
    int64_t last_fetch_ms; /* -1: none yet */
    int64_t last_fetch_leader_leo;
} st_follower_t;

#define ALTER_RETRY_MS 500

/* Guarded by the partition's rlock. */
typedef struct st_replica_state {
    int leading; /* this broker leads at leader_epoch */
    int32_t leader, leader_epoch, partition_epoch;
    int32_t replicas[ST_REPLICA_MAX];
    int nreplicas;
    int32_t isr[ST_REPLICA_MAX]; /* committed */
    int nisr;
    /* the ISR proposed in AlterPartition and not answered yet (-1: none) */
    int32_t pending[ST_REPLICA_MAX + 1];
    int npending;
    int64_t pending_sent_ms;
    int32_t partition_epoch_sent;
    /* after a refused AlterPartition (a follower still fenced, say) none is
     * sent before this time, so that a follower fetching every few ms
     * does not make as many requests */
    int64_t alter_retry_ms;
    /* while leading: every other replica */
    st_follower_t followers[ST_REPLICA_MAX];
    int nfollowers;
    int64_t epoch_start_offset; /* the leo when this broker began to lead at leader_epoch */
} st_replica_state_t;

static void rs_free(st_replica_state_t *rs) { free(rs); }

static int has_id(const int32_t *v, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (v[i] == id) return 1;
    return 0;
}

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
    const st_client_security_t *sec; /* of the fetchers' connections (borrowed) */
    st_purgatory_t *(*purgatory_of)(st_loop_t *loop);
    st_tier_t *tier;
    st_controller_t *ctl;
    st_fetchers_t *fetchers;
    st_loop_ticker_t isr_ticker; /* on loop 0 */
    int64_t next_isr_check_ms;
    pthread_rwlock_t lock;
    topic_entry_t *buckets[NBUCKETS];
    topic_entry_t *by_id[NBUCKETS];
};

static int self_id(const st_partition_t *p) { return p->owner->cfg->node_id; }

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
void st_replicas_set_client_security(st_replicas_t *rm, const st_client_security_t *sec) {
    rm->sec = sec;
}
const st_client_security_t *st_replicas_client_security(const st_replicas_t *rm) { return rm->sec; }
void st_replicas_set_controller(st_replicas_t *rm, st_controller_t *ctl) {
    rm->ctl = ctl;
    rm->fetchers = st_fetchers_new(rm, rm->cfg, rm->net, ctl);
    st_meta_image_t *img = st_controller_image(ctl);
    if (img) {
        st_fetchers_update(rm->fetchers, img); /* the image of the start-up */
        st_image_release(img);
    }
}
void st_replicas_set_purgatories(st_replicas_t *rm, st_purgatory_t *(*of_loop)(st_loop_t *loop)) {
    rm->purgatory_of = of_loop;
}
void st_replicas_set_tier(st_replicas_t *rm, st_tier_t *tier) { rm->tier = tier; }

static void tier_set(st_partition_t *p, st_tier_part_t *tp, int delete_remote);

static st_partition_t *partition_keep(st_partition_t *p) {
    __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    return p;
}

st_partition_t *st_partition_keep(st_partition_t *p) { return partition_keep(p); }

void st_partition_release(st_partition_t *p) {
    if (!p || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (p->log) st_log_release(p->log);
    rs_free(p->rs);
    pthread_mutex_destroy(&p->rlock);
    pthread_mutex_destroy(&p->tier_lock);
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
                tier_set(t->parts[i], NULL, 0);
                st_partition_release(t->parts[i]);
            }
            free(t->parts);
            free(t->name);
            free(t);
            t = next;
        }
    }
    st_fetchers_destroy(rm->fetchers);
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

static void wake_watchers(st_partition_t *p);
static int advance_hw_locked(st_partition_t *p);
static st_follower_t *follower_of(st_replica_state_t *rs, int32_t id);

/* Take the image's view of the partition (controller thread): leader,
 * epochs, replicas, ISR.  Becoming leader at a new epoch starts the
 * followers afresh (their log ends unknown, the in-sync ones caught up as
 * of now, as Kafka's makeLeader does).  Returns 1 when the role or epoch
 * changed. */
static int rs_from_image(st_partition_t *p, const st_meta_partition_t *mp) {
    int32_t self = p->owner->cfg->node_id;
    int64_t now = st_mono_ms();
    pthread_mutex_lock(&p->rlock);
    st_replica_state_t *rs = p->rs;
    int was_leading = rs->leading;
    int32_t old_epoch = rs->leader_epoch, old_leader = rs->leader;
    rs->leader = mp->leader;
    rs->leader_epoch = mp->leader_epoch;
    if (mp->partition_epoch != rs->partition_epoch) rs->npending = -1; /* answered by the image */
    rs->partition_epoch = mp->partition_epoch;
    rs->nreplicas = ST_MIN(mp->nreplicas, ST_REPLICA_MAX);
    memcpy(rs->replicas, mp->replicas, sizeof(int32_t) * (size_t)rs->nreplicas);
    rs->nisr = ST_MIN(mp->nisr, ST_REPLICA_MAX);
    memcpy(rs->isr, mp->isr, sizeof(int32_t) * (size_t)rs->nisr);
    rs->leading = mp->leader == self;
    int changed = was_leading != rs->leading || old_epoch != rs->leader_epoch || old_leader != rs->leader;
    if (rs->leading && changed) {
        st_log_offsets_t o;
        st_log_offsets(p->log, &o);
        rs->epoch_start_offset = o.leo;
        rs->npending = -1;
        rs->nfollowers = 0;
        for (int i = 0; i < rs->nreplicas; i++) {
            if (rs->replicas[i] == self) continue;
            st_follower_t *f = &rs->followers[rs->nfollowers++];
            f->id = rs->replicas[i];
            f->leo = -1;
            f->last_caught_up_ms = has_id(rs->isr, rs->nisr, f->id) ? now : 0;
            f->last_fetch_ms = -1;
            f->last_fetch_leader_leo = -1;
        }
    } else if (rs->leading) {
        /* the same epoch, new replicas (a reassignment): keep what is known */
        st_follower_t keep[ST_REPLICA_MAX];
        int n = 0;
        for (int i = 0; i < rs->nreplicas; i++) {
            if (rs->replicas[i] == self) continue;
            st_follower_t *f = follower_of(rs, rs->replicas[i]);
            keep[n] = f ? *f : (st_follower_t){rs->replicas[i], -1, 0, -1, -1};
            n++;
        }
        memcpy(rs->followers, keep, sizeof(st_follower_t) * (size_t)n);
        rs->nfollowers = n;
    } else {
        rs->nfollowers = 0;
        rs->npending = -1;
    }
    __atomic_store_n(&p->leader, rs->leader, __ATOMIC_RELEASE);
    __atomic_store_n(&p->leader_epoch, rs->leader_epoch, __ATOMIC_RELEASE);
    __atomic_store_n(&p->isr_size, rs->nisr, __ATOMIC_RELEASE);
    int leading = rs->leading;
    /* a leader alone in its ISR knows its high watermark at once (its log
     * end); with followers it waits for their fetches */
    int moved = leading && advance_hw_locked(p);
    pthread_mutex_unlock(&p->rlock);
    if (moved) wake_watchers(p);
    /* only a leader writes the bucket, fenced by its epoch */
    if (p->tier) st_tier_part_set_leader(p->tier, leading, mp->leader_epoch);
    if (changed && rs->leading)
        ST_INFO("replica", "%s-%d: leader at epoch %d from offset %lld", p->topic, (int)p->index,
                (int)mp->leader_epoch, (long long)rs->epoch_start_offset);
    else if (changed && mp->leader >= 0)
        ST_INFO("replica", "%s-%d: following broker %d at epoch %d", p->topic, (int)p->index,
                (int)mp->leader, (int)mp->leader_epoch);
    return changed;
}

st_err_t st_partition_check_leader(const st_partition_t *p) {
    int32_t leader = __atomic_load_n(&p->leader, __ATOMIC_RELAXED);
    return leader == p->owner->cfg->node_id ? ST_OK : ST_E_NOT_LEADER_OR_FOLLOWER;
}

st_err_t st_partition_check_follower(st_partition_t *p) {
    pthread_mutex_lock(&p->rlock);
    const st_replica_state_t *rs = p->rs;
    int ok = !rs->leading && rs->leader >= 0 && has_id(rs->replicas, rs->nreplicas, self_id(p));
    pthread_mutex_unlock(&p->rlock);
    return ok ? ST_OK : ST_E_NOT_LEADER_OR_FOLLOWER;
}

static int same_rack(const st_meta_broker_t *b, st_str_t rack) {
    return b && b->rack && strlen(b->rack) == (size_t)rack.len && !memcmp(b->rack, rack.p, (size_t)rack.len);
}

int32_t st_partition_preferred_read_replica(st_partition_t *p, st_str_t rack, const st_meta_image_t *img) {
    if (rack.len <= 0) return -1;
    if (same_rack(st_image_broker(img, self_id(p)), rack)) return -1; /* the leader is as near */
    int64_t now = st_mono_ms(), lag = p->owner->cfg->replica_lag_time_max_ms;
    int32_t best = -1;
    int64_t best_leo = -1, best_since = 0;
    pthread_mutex_lock(&p->rlock);
    st_replica_state_t *rs = p->rs;
    for (int i = 0; rs->leading && i < rs->nfollowers; i++) {
        const st_follower_t *f = &rs->followers[i];
        const st_meta_broker_t *b = st_image_broker(img, f->id);
        /* in the ISR and caught up within replica.lag.time.max.ms: what it
         * serves is at most that far behind */
        if (!has_id(rs->isr, rs->nisr, f->id) || f->leo < 0 || now - f->last_caught_up_ms > lag ||
            !b || b->fenced || !same_rack(b, rack))
            continue;
        int64_t since = now - f->last_caught_up_ms;
        if (f->leo > best_leo || (f->leo == best_leo && since < best_since)) {
            best = f->id;
            best_leo = f->leo;
            best_since = since;
        }
    }
    pthread_mutex_unlock(&p->rlock);
    return best;
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

/* ---- replica state ------------------------------------------------------------------- */

int32_t st_partition_leader_epoch(const st_partition_t *p) {
    return __atomic_load_n(&p->leader_epoch, __ATOMIC_ACQUIRE);
}
int32_t st_partition_isr_size(const st_partition_t *p) {
    return __atomic_load_n(&p->isr_size, __ATOMIC_ACQUIRE);
}
int32_t st_partition_min_isr(const st_partition_t *p) {
    return __atomic_load_n(&p->min_insync_replicas, __ATOMIC_ACQUIRE);
}

int64_t st_partition_high_watermark(st_partition_t *p) {
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    return o.high_watermark;
}

st_partition_t *st_replicas_lookup_leader(st_replicas_t *rm, const char *topic, size_t len,
                                          int32_t partition, st_err_t *e) {
    int known = 0;
    st_partition_t *p = st_replicas_lookup(rm, topic, len, partition, &known);
    *e = !p ? (known == 2 ? ST_E_NOT_LEADER_OR_FOLLOWER : ST_E_UNKNOWN_TOPIC_OR_PARTITION)
            : st_partition_check_leader(p);
    if (*e) {
        st_partition_release(p);
        p = NULL;
    }
    return p;
}

int64_t st_partition_epoch_start_offset(st_partition_t *p) {
    pthread_mutex_lock(&p->rlock);
    int64_t v = p->rs->leading ? p->rs->epoch_start_offset : -1;
    pthread_mutex_unlock(&p->rlock);
    return v;
}

static st_follower_t *follower_of(st_replica_state_t *rs, int32_t id) {
    for (int i = 0; i < rs->nfollowers; i++)
        if (rs->followers[i].id == id) return &rs->followers[i];
    return NULL;
}

/* The ISR the high watermark waits for: the committed one and, while an
 * AlterPartition is in flight, the proposed one too (the larger of the
 * two, KIP-497: a replica being added counts at once, one being removed
 * until the removal is committed). */
static int in_maximal_isr(const st_replica_state_t *rs, int32_t id) {
    return has_id(rs->isr, rs->nisr, id) || (rs->npending >= 0 && has_id(rs->pending, rs->npending, id));
}

/* Move the high watermark to the smallest log end over the maximal ISR
 * (Kafka's maybeIncrementLeaderHW).  It stays where it is while the
 * committed ISR is smaller than min.insync.replicas (at most the
 * replication factor): what a replica held when it left such an ISR is
 * then all that is committed, which is what makes it an eligible leader
 * (KIP-966).  rlock held; 1 when it moved. */
static int advance_hw_locked(st_partition_t *p) {
    st_replica_state_t *rs = p->rs;
    if (!rs->leading) return 0;
    if (rs->nisr < ST_MIN(st_partition_min_isr(p), rs->nreplicas)) return 0;
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    int64_t hw = o.leo;
    for (int i = 0; i < rs->nfollowers; i++) {
        const st_follower_t *f = &rs->followers[i];
        if (!in_maximal_isr(rs, f->id)) continue;
        if (f->leo < 0) return 0; /* not heard from since this broker became leader */
        if (f->leo < hw) hw = f->leo;
    }
    if (hw <= o.high_watermark) return 0;
    st_log_set_high_watermark(p->log, hw);
    return 1;
}

static void propose_isr(st_partition_t *p, const int32_t *isr, int n);

static void wake_watchers(st_partition_t *p) { on_log_change(p->log, p); }

st_err_t st_partition_append(st_partition_t *p, uint8_t *records, size_t len,
                             int64_t verify_guard, st_append_info_t *info) {
    if (st_partition_read_replica(p)) return ST_E_INVALID_TOPIC_EXCEPTION; /* its source's */
    pthread_mutex_lock(&p->rlock);
    st_err_t e = ST_E_NOT_LEADER_OR_FOLLOWER;
    int moved = 0;
    if (p->rs->leading) {
        e = st_log_append_verified(p->log, records, len, p->rs->leader_epoch, st_now_ms(),
                                   verify_guard, info);
        /* alone in the ISR, what is appended is committed at once */
        if (!e) moved = advance_hw_locked(p);
    }
    if (!e && !info->duplicate) { /* Kafka's BytesInPerSec / MessagesInPerSec */
        __atomic_add_fetch(&p->counters.bytes_in, (uint64_t)len, __ATOMIC_RELAXED);
        __atomic_add_fetch(&p->counters.messages_in,
                           (uint64_t)(info->last_offset - info->base_offset + 1), __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&p->rlock);
    if (moved) wake_watchers(p);
    return e;
}

int st_partition_committed(st_partition_t *p, int64_t need, st_err_t *e) {
    *e = ST_OK;
    pthread_mutex_lock(&p->rlock);
    int leading = p->rs->leading;
    int nisr = p->rs->nisr;
    pthread_mutex_unlock(&p->rlock);
    if (!leading) {
        *e = ST_E_NOT_LEADER_OR_FOLLOWER;
        return 1;
    }
    if (st_partition_high_watermark(p) < need) return 0;
    if (nisr < st_partition_min_isr(p)) *e = ST_E_NOT_ENOUGH_REPLICAS_AFTER_APPEND;
    return 1;
}

int st_partition_durable(st_partition_t *p, int64_t need, int flush, st_err_t *e) {
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    if (o.offline) {
        *e = ST_E_KAFKA_STORAGE_ERROR;
        return 1;
    }
    if (!st_partition_committed(p, need, e)) return 0;
    return *e || !flush || o.flushed_offset >= need;
}

/* Kafka's Replica.updateFetchStateOrThrow: a fetch at the leader's log end
 * means caught up now; one at or past where the leader's log ended at the
 * follower's previous fetch means caught up as of that fetch. */
static void follower_fetched(st_follower_t *f, int64_t fetch_offset, int64_t leader_leo,
                             int64_t now) {
    if (fetch_offset >= leader_leo) f->last_caught_up_ms = now;
    else if (f->last_fetch_ms >= 0 && fetch_offset >= f->last_fetch_leader_leo)
        f->last_caught_up_ms = ST_MAX(f->last_caught_up_ms, f->last_fetch_ms);
    f->leo = fetch_offset;
    f->last_fetch_ms = now;
    f->last_fetch_leader_leo = leader_leo;
}

st_err_t st_partition_follower_fetch(st_partition_t *p, int32_t replica_id, int32_t current_leader_epoch,
                                     int64_t fetch_offset, int32_t last_fetched_epoch,
                                     int32_t *div_epoch, int64_t *div_end) {
    *div_epoch = -1;
    *div_end = -1;
    int64_t now = st_mono_ms();
    int moved = 0, propose = 0;
    int32_t isr[ST_REPLICA_MAX + 1];
    int nisr = 0;
    pthread_mutex_lock(&p->rlock);
    st_replica_state_t *rs = p->rs;
    st_err_t e = st_check_leader_epoch(current_leader_epoch, rs->leader_epoch);
    st_follower_t *f = follower_of(rs, replica_id);
    if (!e && !rs->leading) e = ST_E_NOT_LEADER_OR_FOLLOWER;
    /* not one of its replicas: with an epoch that matches, the replica set
     * may be newer than this broker's view (a reassignment), so the
     * follower retries (Kafka's followerReplicaOrThrow) */
    if (!e && !f) e = current_leader_epoch >= 0 ? ST_E_UNKNOWN_LEADER_EPOCH : ST_E_NOT_LEADER_OR_FOLLOWER;
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    if (!e && fetch_offset > o.leo) e = ST_E_OFFSET_OUT_OF_RANGE;
    if (!e && fetch_offset < o.log_start_offset)
        e = st_partition_tiered(p) ? ST_E_OFFSET_MOVED_TO_TIERED_STORAGE : ST_E_OFFSET_OUT_OF_RANGE;
    if (!e && last_fetched_epoch >= 0) {
        /* KIP-320: where the leader's log leaves the follower's epoch */
        int32_t ep;
        int64_t end;
        st_log_end_offset_for_epoch(p->log, last_fetched_epoch, &ep, &end);
        if (end < fetch_offset || ep < last_fetched_epoch) {
            *div_epoch = ep;
            *div_end = end;
            goto out; /* the follower truncates first; its position is not known yet */
        }
    }
    if (e) goto out;
    follower_fetched(f, fetch_offset, o.leo, now);
    moved = advance_hw_locked(p);
    /* Kafka's isFollowerInSync: caught up with the high watermark and into
     * this leader's epoch */
    if (!in_maximal_isr(rs, replica_id) && rs->npending < 0 && now >= rs->alter_retry_ms &&
        fetch_offset >= st_partition_high_watermark(p) && fetch_offset >= rs->epoch_start_offset &&
        rs->nisr < ST_REPLICA_MAX) {
        memcpy(isr, rs->isr, sizeof(int32_t) * (size_t)rs->nisr);
        nisr = rs->nisr;
        isr[nisr++] = replica_id;
        propose = 1;
    }
out:
    pthread_mutex_unlock(&p->rlock);
    if (moved) wake_watchers(p);
    if (propose) {
        ST_INFO("replica", "%s-%d: follower %d caught up at offset %lld: asking for it in the ISR",
                p->topic, (int)p->index, (int)replica_id, (long long)fetch_offset);
        propose_isr(p, isr, nisr);
    }
    return e;
}

/* ---- ISR changes (AlterPartition) ------------------------------------------------------ */

typedef struct alter_op {
    st_partition_t *p; /* kept */
    st_arena_t a;
    st_alter_partition_req_t q;
    int32_t leader_epoch, partition_epoch;
} alter_op_t;

static void on_alter_done(void *arg, st_err_t e, const st_alter_partition_resp_t *r) {
    alter_op_t *op = arg;
    st_partition_t *p = op->p;
    const st_alter_partition_resp_part_t *rp = NULL;
    if (!e && r) {
        e = st_err_from_wire(r->error_code);
        if (!e && r->topics.n == 1 && r->topics.v[0].partitions.n == 1)
            rp = &r->topics.v[0].partitions.v[0];
        if (!e && !rp) e = ST_E_UNKNOWN_SERVER_ERROR;
        if (!e) e = st_err_from_wire(rp->error_code);
    }
    int moved = 0;
    pthread_mutex_lock(&p->rlock);
    st_replica_state_t *rs = p->rs;
    if (rs->leading && rs->leader_epoch == op->leader_epoch) {
        if (!e && rp->partition_epoch > rs->partition_epoch && rp->isr.n > 0 &&
            rp->isr.n <= ST_REPLICA_MAX) {
            /* committed: the image brings the same, perhaps later */
            memcpy(rs->isr, rp->isr.v, sizeof(int32_t) * (size_t)rp->isr.n);
            rs->nisr = rp->isr.n;
            rs->partition_epoch = rp->partition_epoch;
            __atomic_store_n(&p->isr_size, rs->nisr, __ATOMIC_RELEASE);
        }
        if (rs->partition_epoch_sent == op->partition_epoch) rs->npending = -1;
        if (e) rs->alter_retry_ms = st_mono_ms() + ALTER_RETRY_MS;
        moved = advance_hw_locked(p);
    }
    pthread_mutex_unlock(&p->rlock);
    if (e)
        ST_LOG_RATELIMITED(ST_LOG_WARN, "replica", 5000, "%s-%d: AlterPartition failed: %s",
                           p->topic, (int)p->index, st_err_name(e));
    if (moved || !e) wake_watchers(p);
    st_arena_fini(&op->a);
    st_partition_release(p);
    free(op);
}

/* Ask the active controller for ISR isr (one proposal in flight at a
 * time: rs->npending; none for ALTER_RETRY_MS after a refusal). */
static void propose_isr(st_partition_t *p, const int32_t *isr, int n) {
    st_replicas_t *rm = p->owner;
    if (!rm->ctl) return;
    alter_op_t *op = st_calloc(1, sizeof *op);
    op->p = partition_keep(p);
    st_arena_init(&op->a, 512);
    pthread_mutex_lock(&p->rlock);
    st_replica_state_t *rs = p->rs;
    if (!rs->leading || rs->npending >= 0 || st_mono_ms() < rs->alter_retry_ms) {
        pthread_mutex_unlock(&p->rlock);
        st_arena_fini(&op->a);
        st_partition_release(p);
        free(op);
        return;
    }
    memcpy(rs->pending, isr, sizeof(int32_t) * (size_t)n);
    rs->npending = n;
    rs->pending_sent_ms = st_mono_ms();
    rs->partition_epoch_sent = rs->partition_epoch;
    op->leader_epoch = rs->leader_epoch;
    op->partition_epoch = rs->partition_epoch;
    pthread_mutex_unlock(&p->rlock);

    st_alter_partition_req_t *q = &op->q;
    st_schema_defaults(&st_alter_partition_req_schema, q);
    q->broker_id = self_id(p);
    q->broker_epoch = -1;
    ST_ARRAY_ALLOC(q->topics, &op->a, 1);
    st_alter_partition_req_topic_t *t = &q->topics.v[0];
    st_schema_defaults(&st_alter_partition_req_topic_schema, t);
    t->topic_name = st_str(p->topic);
    t->topic_id = p->topic_id;
    ST_ARRAY_ALLOC(t->partitions, &op->a, 1);
    st_alter_partition_req_part_t *qp = &t->partitions.v[0];
    st_schema_defaults(&st_alter_partition_req_part_schema, qp);
    qp->partition_index = p->index;
    qp->leader_epoch = op->leader_epoch;
    qp->partition_epoch = op->partition_epoch;
    int32_t *v = st_arena_alloc(&op->a, sizeof(int32_t) * (size_t)(n ? n : 1));
    memcpy(v, isr, sizeof(int32_t) * (size_t)n);
    qp->new_isr.v = v;
    qp->new_isr.n = n;
    st_controller_send_alter_partition(rm->ctl, q, on_alter_done, op);
}

/* The leader's periodic check (Kafka's maybeShrinkIsr): followers in the
 * ISR that have not caught up for replica.lag.time.max.ms leave it; a
 * proposal unanswered for as long is dropped so that it can be made
 * again. */
static void check_isr(st_partition_t *p, int64_t now) {
    int64_t lag = p->owner->cfg->replica_lag_time_max_ms;
    int32_t isr[ST_REPLICA_MAX + 1];
    int n = 0, out = 0;
    pthread_mutex_lock(&p->rlock);
    st_replica_state_t *rs = p->rs;
    if (rs->leading && rs->npending >= 0 && now - rs->pending_sent_ms > lag) rs->npending = -1;
    if (rs->leading && rs->npending < 0) {
        for (int i = 0; i < rs->nisr; i++) {
            st_follower_t *f = follower_of(rs, rs->isr[i]);
            if (f && now - f->last_caught_up_ms > lag) {
                ST_WARN("replica", "%s-%d: follower %d has not caught up for %lld ms "
                                   "(replica.lag.time.max.ms %lld): shrinking the ISR",
                        p->topic, (int)p->index, (int)f->id,
                        (long long)(now - f->last_caught_up_ms), (long long)lag);
                out++;
                continue;
            }
            isr[n++] = rs->isr[i];
        }
    }
    pthread_mutex_unlock(&p->rlock);
    if (out && n > 0) propose_isr(p, isr, n);
}

static int64_t isr_tick(st_loop_ticker_t *t, int64_t now) {
    st_replicas_t *rm = (st_replicas_t *)((char *)t - offsetof(st_replicas_t, isr_ticker));
    int64_t every = ST_MAX(rm->cfg->replica_lag_time_max_ms / 2, 10);
    if (now < rm->next_isr_check_ms) return rm->next_isr_check_ms - now;
    rm->next_isr_check_ms = now + every;
    int n = 0;
    st_partition_t **all = st_replicas_all(rm, &n);
    for (int i = 0; i < n; i++) {
        check_isr(all[i], now);
        st_partition_release(all[i]);
    }
    free(all);
    return every;
}

static void isr_stop(st_loop_ticker_t *t) { (void)t; }

static void add_ticker(void *arg) {
    st_replicas_t *rm = arg;
    st_loop_ticker_add(st_net_loop(rm->net, 0), &rm->isr_ticker);
}

void st_replicas_start(st_replicas_t *rm) {
    if (!rm->net) return;
    rm->isr_ticker.tick = isr_tick;
    rm->isr_ticker.stop = isr_stop;
    rm->next_isr_check_ms = st_mono_ms() + ST_MAX(rm->cfg->replica_lag_time_max_ms / 2, 10);
    st_loop_post(st_net_loop(rm->net, 0), add_ticker, rm);
}


/* ---- tiered storage -------------------------------------------------------- */

int st_partition_read_replica(st_partition_t *p) {
    return __atomic_load_n(&p->tier_mode, __ATOMIC_ACQUIRE) == ST_TIER_REPLICA;
}

static int tier_serves(st_partition_t *p) {
    return __atomic_load_n(&p->tier_mode, __ATOMIC_ACQUIRE) != ST_TIER_DELETE;
}

st_tier_part_t *st_partition_tier(st_partition_t *p) {
    pthread_mutex_lock(&p->tier_lock);
    st_tier_part_t *tp = p->tier && tier_serves(p) ? st_tier_part_keep(p->tier) : NULL;
    pthread_mutex_unlock(&p->tier_lock);
    return tp;
}

int st_partition_tiered(st_partition_t *p) {
    return __atomic_load_n(&p->tier, __ATOMIC_ACQUIRE) != NULL && tier_serves(p);
}

/* The image's thread: p's part becomes tp (NULL: none); the old one, if
 * any, is closed once no reader can take it any more. */
static void tier_set(st_partition_t *p, st_tier_part_t *tp, int delete_remote) {
    pthread_mutex_lock(&p->tier_lock);
    st_tier_part_t *old = p->tier;
    __atomic_store_n(&p->tier, tp, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&p->tier_lock);
    if (old) st_tier_part_close(old, delete_remote);
}

int64_t st_partition_log_start(st_partition_t *p) {
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    if (!st_partition_tiered(p)) return o.log_start_offset;
    int64_t rs = __atomic_load_n(&p->remote_start, __ATOMIC_ACQUIRE);
    int64_t re = __atomic_load_n(&p->remote_end, __ATOMIC_ACQUIRE);
    /* a remote part that ends below the local log start is cut off from
     * it (local segments went while uploads were off): a consumer would
     * read on into offsets that are nowhere; the tier job deletes it */
    return rs < re && re >= o.log_start_offset ? ST_MIN(rs, o.log_start_offset) : o.log_start_offset;
}

int st_partition_is_remote(st_partition_t *p, int64_t offset) {
    if (!st_partition_tiered(p)) return 0;
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
        snprintf(o->txnindex_path, sizeof o->txnindex_path, "%s", info[i].txnindex_path);
        snprintf(o->snapshot_path, sizeof o->snapshot_path, "%s", info[i].snapshot_path);
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
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    if (st_partition_read_replica(p) && end > o.leo) {
        /* its source uploaded more: the empty log starts after it, with
         * the producers (open transactions) the bucket keeps for that
         * offset; the followers follow, as behind a tiered leader's log
         * start.  On the tier job's thread: the GET may block. */
        st_tier_part_t *tp = st_partition_tier(p);
        void *snap = NULL;
        size_t len = 0;
        char err[512];
        st_err_t e = tp ? st_tier_part_producer_snapshot(tp, end, &snap, &len, err, sizeof err)
                        : ST_E_NOT_FOUND;
        if (e) {
            /* none there: the source knew no producer at that offset */
            ST_LOG(e == ST_E_NOT_FOUND ? ST_LOG_DEBUG : ST_LOG_WARN, "replica",
                   "%s-%d: producer state at offset %lld not read from the bucket (%s): "
                   "transactions open there are not known", p->topic, (int)p->index,
                   (long long)end, tp ? err : "not tiered yet");
            snap = NULL;
        }
        st_log_follow_remote(p->log, end, snap, len);
        free(snap);
        if (tp) st_tier_part_release(tp);
    }
    __atomic_store_n(&p->remote_start, start, __ATOMIC_RELEASE);
    __atomic_store_n(&p->remote_end, end, __ATOMIC_RELEASE);
    st_log_set_remote_end(p->log, end);
    on_log_change(p->log, p); /* parked requests may be waiting on this */
}

static int64_t tier_local_bytes_above(void *arg, int64_t offset) {
    return st_log_bytes_above(((st_partition_t *)arg)->log, offset);
}

static int64_t tier_local_log_start(void *arg) {
    st_log_offsets_t o;
    st_log_offsets(((st_partition_t *)arg)->log, &o);
    return o.log_start_offset;
}

static void tier_release(void *arg) { st_partition_release(arg); }

static void tier_remote_aborted(void *arg, const int64_t (*e)[4], int n) {
    st_partition_t *p = arg;
    st_log_aborted_txn_t *v = st_malloc(sizeof *v * (size_t)(n + 1));
    for (int i = 0; i < n; i++) v[i] = (st_log_aborted_txn_t){e[i][0], e[i][1], e[i][2], e[i][3]};
    st_log_add_aborted(p->log, v, n);
    free(v);
}

void st_partition_restore_from_bucket(st_partition_t *p, st_tier_part_t *tp, int64_t offset) {
    void *snap = NULL;
    size_t len = 0;
    char err[512];
    int n = 0;
    st_err_t e = st_tier_part_producer_snapshot(tp, offset, &snap, &len, err, sizeof err);
    if (!e) {
        e = st_log_restore_producer_state(p->log, offset, snap, len, &n);
        snprintf(err, sizeof err, "%s", e == ST_E_INVAL ? "the log is no longer empty there"
                                                        : st_err_msg(e));
    }
    free(snap);
    if (!e)
        ST_INFO("replica", "%s-%d: producer state below offset %lld restored from the bucket: %d "
                "producers", p->topic, (int)p->index, (long long)offset, n);
    else
        ST_WARN("replica", "%s-%d: producer state below offset %lld not restored from the bucket "
                "(%s): producers idle since then are unknown here",
                p->topic, (int)p->index, (long long)offset, err);
}

#define REMOTE_MANIFEST_FILE "remote-manifest.json"

/* What a topic's settings ask of tiering besides its log config. */
typedef struct tier_wish {
    int delete_on_disable;  /* remote.log.delete.on.disable */
    char *replica_location; /* strata.remote.read.replica.location (NULL: none) */
} tier_wish_t;

/* Tier the partition in a mode: read its manifest, and when the bucket is
 * ahead of the local log (a lost or old disk) start the local log at the
 * remote end, with the producer state the bucket keeps for it.  (DELETE:
 * nothing is read; the deletion it owes is made by its leader.) */
static void tier_attach(st_replicas_t *rm, st_partition_t *p, const st_log_config_t *lc,
                        st_tier_mode_t mode, const char *replica_location) {
    st_tier_part_ops_t ops = {tier_closed_segments, tier_remote_changed, tier_local_bytes_above,
                              tier_local_log_start, tier_remote_aborted, tier_release,
                              partition_keep(p)};
    st_tier_retention_t ret = {lc->retention_ms, lc->retention_bytes};
    char id[23], err[512];
    st_uuid_format(&p->topic_id, id);
    char *cache = st_strprintf("%s/" REMOTE_MANIFEST_FILE, st_log_dir(p->log));
    st_tier_part_t *tp;
    st_err_t e = mode == ST_TIER_REPLICA
                     ? st_tier_part_open_replica(rm->tier, replica_location, p->topic, id,
                                                 p->index, &ops, &tp, err, sizeof err)
                     : st_tier_part_open(rm->tier, p->topic, id, p->index, cache, mode, &ops,
                                         &ret, &tp, err, sizeof err);
    free(cache);
    if (e) {
        ST_ERROR("replica", "%s-%d: tiered storage unavailable: %s", p->topic, (int)p->index, err);
        if (mode == ST_TIER_REPLICA) /* nothing to serve, but still no appends */
            __atomic_store_n(&p->tier_mode, (int)mode, __ATOMIC_RELEASE);
        return; /* the partition serves its local data; nothing local is deleted */
    }
    st_tier_status_t s;
    st_tier_part_status(tp, &s);
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    if (s.remote_end > o.leo && st_log_truncate_fully(p->log, s.remote_end) == ST_OK)
        st_partition_restore_from_bucket(p, tp, s.remote_end);
    __atomic_store_n(&p->remote_start, s.remote_start, __ATOMIC_RELEASE);
    __atomic_store_n(&p->remote_end, s.remote_end, __ATOMIC_RELEASE);
    st_log_set_remote_end(p->log, s.remote_end);
    __atomic_store_n(&p->tier_mode, (int)mode, __ATOMIC_RELEASE);
    tier_set(p, tp, 0);
}

/* What the partition's directory tells of the bucket: a deletion owed
 * (tiering was switched off before it was made) or a cached manifest (it
 * was tiered here). */
enum { LEFT_NOTHING, LEFT_MANIFEST, LEFT_DELETION_OWED };

static int remote_left(st_partition_t *p) {
    char *a = st_strprintf("%s/" ST_TIER_DELETE_PENDING_FILE, st_log_dir(p->log));
    char *b = st_strprintf("%s/" REMOTE_MANIFEST_FILE, st_log_dir(p->log));
    int left = access(a, F_OK) == 0 ? LEFT_DELETION_OWED
               : access(b, F_OK) == 0 ? LEFT_MANIFEST
                                      : LEFT_NOTHING;
    free(a);
    free(b);
    return left;
}

/*
 * Tiering switched off and on (KIP-950).  The topic's settings decide the
 * partition's mode, at once on every broker (st_replicas_sync follows each
 * new image; a restart opens the partition in the same mode):
 *
 *   remote.storage.enable  remote.log.copy.disable  .delete.on.disable  mode
 *   true                   false                    -                   ON
 *   true                   true                     -                   READ_ONLY
 *   false                  -                        true                DELETE (*)
 *   false                  -                        false               none (**)
 *
 * (*) when the partition has a tier part or its directory says something
 *     is left in the bucket; a part in DELETE mode stays so while the
 *     topic is off, and so does a deletion owed whatever the settings say
 *     (remote.log.delete.on.disable removed since).
 * (**) the controller refuses that change on a tiered topic
 *     (st_topic_config_check_change), but a topic can reach it unchecked:
 *     log.remote.storage.enable changed in the broker's file, or a
 *     ConfigRecord written before the rule.  Hiding the bucket's data is
 *     what the rule prevents: such a partition stays READ_ONLY (uploads
 *     off, the bucket read) and a WARN line says what to set.
 */
static void tier_follow(st_replicas_t *rm, st_partition_t *p, const st_log_config_t *lc,
                        const tier_wish_t *w) {
    if (!rm->tier) return;
    int have = p->tier != NULL, left;
    st_tier_mode_t cur = have ? st_tier_part_mode(p->tier) : ST_TIER_ON, want;
    if (have && cur == ST_TIER_REPLICA) {
        return; /* a read replica stays one: its bucket part is the source's */
    } else if (lc->remote) {
        want = lc->read_replica          ? ST_TIER_REPLICA
               : lc->remote_copy_disable ? ST_TIER_READ_ONLY
                                         : ST_TIER_ON;
    } else if (have && cur == ST_TIER_DELETE) {
        return;
    } else if ((left = have ? LEFT_MANIFEST : remote_left(p)) == LEFT_NOTHING) {
        return;
    } else if (w->delete_on_disable || left == LEFT_DELETION_OWED) {
        want = ST_TIER_DELETE;
    } else {
        want = ST_TIER_READ_ONLY;
        if (!have || cur != want)
            ST_WARN("replica", "%s-%d: remote.storage.enable is false but "
                    "remote.log.delete.on.disable is not set: the remote log stays readable, "
                    "uploads off; set remote.storage.enable=true,remote.log.copy.disable=true to "
                    "say so, or remote.log.delete.on.disable=true to delete it", p->topic,
                    (int)p->index);
    }
    if (!have) {
        tier_attach(rm, p, lc, want, w->replica_location);
        return;
    }
    if (want == cur) return;
    if (want == ST_TIER_DELETE) {
        int64_t before = st_partition_log_start(p);
        int64_t rs = __atomic_load_n(&p->remote_start, __ATOMIC_ACQUIRE);
        int64_t re = __atomic_load_n(&p->remote_end, __ATOMIC_ACQUIRE);
        /* handlers stop taking the part first, then it forgets its manifest */
        __atomic_store_n(&p->tier_mode, (int)want, __ATOMIC_RELEASE);
        st_tier_part_set_mode(p->tier, want);
        ST_INFO("replica", "%s-%d: tiered storage off (remote.log.delete.on.disable): offsets "
                "[%lld, %lld) are no longer served from the bucket, the log start offset moves "
                "from %lld to %lld (the local log start); the leader deletes the remote log",
                p->topic, (int)p->index, (long long)rs, (long long)re, (long long)before,
                (long long)st_partition_log_start(p));
        on_log_change(p->log, p); /* parked readers learn the news */
        return;
    }
    st_tier_part_set_mode(p->tier, want);
    __atomic_store_n(&p->tier_mode, (int)want, __ATOMIC_RELEASE);
}

/* ---- keeping up with the image ------------------------------------------- */

/* What a restore from the bucket needs of the topic (partition 0's part
 * keeps it in the bucket; its leader writes it when it changes). */
static void tier_describe(st_partition_t *p, const st_meta_topic_t *t) {
    st_tier_part_t *tp = __atomic_load_n(&p->tier, __ATOMIC_ACQUIRE); /* this thread sets it */
    if (!tp) return;
    char id[23];
    st_uuid_format(&t->id, id);
    /* a reassignment's union is not the factor: the original's count */
    int rf = t->parts[0].nreplicas - t->parts[0].nadding;
    st_tier_descriptor_t d = {t->name, id, t->nparts, (int16_t)ST_MAX(rf, 1), NULL, NULL,
                              t->nconfigs};
    d.config_names = st_malloc(sizeof(char *) * (size_t)(t->nconfigs + 1));
    d.config_values = st_malloc(sizeof(char *) * (size_t)(t->nconfigs + 1));
    d.nconfigs = 0;
    for (int i = 0; i < t->nconfigs; i++) {
        if (!t->configs[i].value) continue;
        d.config_names[d.nconfigs] = t->configs[i].name;
        d.config_values[d.nconfigs++] = t->configs[i].value;
    }
    char *json = st_tier_descriptor_encode(&d);
    st_tier_part_set_descriptor(tp, json);
    free(json);
    free(d.config_names);
    free(d.config_values);
}

static void effective_config(st_replicas_t *rm, const st_meta_topic_t *t, st_log_config_t *lc,
                             int32_t *min_isr, tier_wish_t *w) {
    st_topic_config_t tc;
    char why[256];
    if (st_topic_config_build(rm->cfg, t->configs, t->nconfigs, &tc, why, sizeof why)) {
        /* Stored configs were validated when written; fall back to the
         * broker's defaults rather than refusing to serve.  Never for a
         * read replica: as a plain topic it would write to its source's
         * bucket; it stays one, reading its own store at worst. */
        ST_WARN("replica", "topic %s: stored config rejected (%s); using broker defaults",
                t->name, why);
        st_topic_config_build(rm->cfg, NULL, 0, &tc, why, sizeof why);
        for (int i = 0; i < t->nconfigs; i++)
            if (!strcmp(t->configs[i].name, "strata.remote.read.replica"))
                tc.read_replica = tc.remote_storage_enable = 1;
    }
    st_topic_config_to_log(&tc, lc);
    /* internal topics are never tiered (Kafka's rule), whatever the
     * broker default log.remote.storage.enable says */
    lc->remote = lc->remote && rm->tier != NULL && !t->internal;
    lc->remote_copy_disable = lc->remote_copy_disable && lc->remote;
    lc->read_replica = lc->read_replica && lc->remote;
    lc->producer_id_expiration_ms = rm->cfg->producer_id_expiration_ms; /* a broker setting */
    *min_isr = tc.min_insync_replicas;
    w->delete_on_disable = tc.remote_log_delete_on_disable;
    w->replica_location = lc->read_replica ? st_strdup(tc.read_replica_location) : NULL;
    st_topic_config_fini(&tc);
}

static int is_replica_here(st_replicas_t *rm, const st_meta_partition_t *mp) {
    for (int i = 0; i < mp->nreplicas; i++)
        if (mp->replicas[i] == rm->cfg->node_id) return 1;
    return 0;
}

static st_partition_t *partition_open(st_replicas_t *rm, const st_meta_topic_t *t,
                                      const st_meta_partition_t *mp, const st_log_config_t *lc,
                                      int32_t min_isr, const tier_wish_t *w) {
    st_partition_t *p = st_calloc(1, sizeof *p);
    p->refs = 1;
    p->topic = st_strdup(t->name);
    p->topic_id = t->id;
    p->index = mp->id;
    p->min_insync_replicas = min_isr;
    p->owner = rm;
    pthread_mutex_init(&p->rlock, NULL);
    pthread_mutex_init(&p->tier_lock, NULL);
    p->rs = st_calloc(1, sizeof *p->rs);
    p->rs->leader = -1;
    p->rs->leader_epoch = -1;
    p->rs->partition_epoch = -1;
    p->rs->npending = -1;
    st_err_t e = st_logmgr_open_log(rm->logs, t->name, mp->id, &t->id, lc, &p->log);
    if (e) {
        ST_ERROR("replica", "%s-%d: cannot open log: %s", t->name, (int)mp->id, st_err_msg(e));
        rs_free(p->rs);
        pthread_mutex_destroy(&p->rlock);
        free(p->topic);
        free(p);
        return NULL;
    }
    st_log_set_notify(p->log, on_log_change, p);
    tier_follow(rm, p, lc, w);
    rs_from_image(p, mp);
    return p;
}

/* A partition leaves this broker: parked readers are woken, its tier
 * part detached (with delete_remote, the bucket's objects go too: topic
 * deletion) and, with delete_local, its local log deleted; then the
 * reference given is let go.  p->log stays as it is for whoever still
 * holds p (a closed log answers errors, never a deleted file); a request
 * that took the tier part before keeps it until it lets go. */
static void partition_drop(st_partition_t *p, int delete_local, int delete_remote, st_logmgr_t *logs) {
    st_log_set_notify(p->log, NULL, NULL);
    on_log_change(p->log, p); /* parked readers learn the news */
    tier_set(p, NULL, delete_remote);
    if (delete_local) {
        st_log_keep(p->log); /* delete_log takes one; p keeps its own */
        st_logmgr_delete_log(logs, p->log);
    }
    st_partition_release(p);
}

static void entry_free(topic_entry_t *e, int delete_logs, st_logmgr_t *logs) {
    for (int i = 0; i < e->nparts; i++)
        if (e->parts[i]) partition_drop(e->parts[i], delete_logs, delete_logs, logs);
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
    tier_wish_t default_wish = {0, NULL};
    for (int i = 0; i < new_img->ntopics; i++) {
        const st_meta_topic_t *t = new_img->topics[i];
        const st_meta_topic_t *ot = old_img ? st_image_topic(old_img, t->name, strlen(t->name)) : NULL;
        if (ot == t) continue; /* shared, unchanged */
        st_log_config_t lc;
        int32_t min_isr;
        tier_wish_t wish = {0, NULL};
        if (t->nconfigs == 0) {
            if (!have_default)
                effective_config(rm, t, &default_lc, &default_min_isr, &default_wish);
            have_default = 1;
            lc = default_lc;
            min_isr = default_min_isr;
            wish.delete_on_disable = default_wish.delete_on_disable; /* a replica has configs */
        } else {
            effective_config(rm, t, &lc, &min_isr, &wish);
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
        st_partition_t **moved = NULL; /* hosted here no more (a reassignment) */
        int nmoved = 0;
        for (int k = 0; k < t->nparts; k++) {
            const st_meta_partition_t *mp = &t->parts[k];
            if (k < have && cur->parts[k] && !is_replica_here(rm, mp)) {
                /* no longer leading: parked writes are answered
                 * NOT_LEADER_OR_FOLLOWER now, not at their timeout */
                rs_from_image(cur->parts[k], mp);
                wake_watchers(cur->parts[k]);
                if (!moved) moved = st_malloc(sizeof *moved * (size_t)t->nparts);
                moved[nmoved++] = partition_keep(cur->parts[k]);
            } else if (k < have && cur->parts[k]) {
                st_partition_t *p = partition_keep(cur->parts[k]);
                st_log_set_config(p->log, &lc);
                tier_follow(rm, p, &lc, &wish);
                if (p->tier) {
                    st_tier_retention_t ret = {lc.retention_ms, lc.retention_bytes};
                    st_tier_part_set_retention(p->tier, &ret);
                }
                __atomic_store_n(&p->min_insync_replicas, min_isr, __ATOMIC_RELEASE);
                if (rs_from_image(p, mp)) wake_watchers(p); /* parked writes learn the news */
                ne->parts[k] = p;
            } else if (is_replica_here(rm, mp)) {
                ne->parts[k] = partition_open(rm, t, mp, &lc, min_isr, &wish);
            }
        }
        if (t->nparts > 0 && ne->parts[0]) tier_describe(ne->parts[0], t);
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
        /* out of the table now: their local copies go, the bucket stays */
        for (int k = 0; k < nmoved; k++) {
            ST_INFO("replica", "%s-%d: no longer a replica here: deleting the local log",
                    moved[k]->topic, (int)moved[k]->index);
            partition_drop(moved[k], 1, 0, rm->logs);
        }
        free(moved);
        free(wish.replica_location);
    }
    st_fetchers_update(rm->fetchers, new_img);
}

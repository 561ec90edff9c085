/*
 * state.c - the transaction coordinator's state machine, as Kafka's
 * TransactionCoordinator runs it (txn.h draws the states): InitProducerId
 * with its epoch bumps and fences (KIP-98, KIP-360, KIP-588), partitions
 * and offsets added to a transaction, EndTxn, the markers' completion,
 * the abort of transactions past their timeout and the expiry of idle
 * transactional ids, and the replay that rebuilds all of it.
 *
 * Invariant: every change of a transaction is appended to its partition of
 * __transaction_state (persist) before the transaction changes in memory
 * and before anyone is told; a failed append changes nothing.  So a
 * replay of the partition gives back exactly what was answered.
 *
 * No threads, no I/O: the host's ops append, send markers and hand out
 * producer ids.  Everything here runs on the coordinator thread.
 */
#include "txn_int.h"

#include <stdlib.h>

#include "group.h" /* st_group_partition_for: Kafka's abs(hashCode) % n */

typedef struct tnode {
    st_txn_t t; /* first: lookups hand out &node->t */
    struct tnode *next;
} tnode_t;

struct st_tstate {
    st_tstate_config_t cfg;
    st_tstate_ops_t ops;
    st_tpart_state_t *parts;
    tnode_t **buckets;
    size_t nbuckets, count;
    int skipped;
    int closed;
    int64_t next_abort_check;
};

static const char *const status_names[] = {
    "Empty",         "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
    "CompleteAbort", "Dead",    "PrepareEpochFence",
};

const char *st_txn_status_name(int status) {
    if (status < 0 || status >= (int)ST_ARRAY_SIZE(status_names)) return NULL;
    return status_names[status];
}

int st_txn_status_from_name(st_str_t name) {
    for (int i = 0; i < (int)ST_ARRAY_SIZE(status_names); i++)
        if (name.len == (int32_t)strlen(status_names[i]) &&
            memcmp(name.p, status_names[i], (size_t)name.len) == 0)
            return i;
    return -1;
}

/* ---- owned strings and the map ------------------------------------------ */

static st_str_t sdup(st_str_t s) {
    size_t n = s.len > 0 ? (size_t)s.len : 0;
    char *p = st_malloc(n + 1);
    if (n) memcpy(p, s.p, n);
    p[n] = 0;
    return (st_str_t){p, (int32_t)n};
}

static int seq(st_str_t a, st_str_t b) {
    return a.len == b.len && (a.len <= 0 || memcmp(a.p, b.p, (size_t)a.len) == 0);
}

static int scmp(st_str_t a, st_str_t b) {
    int32_t n = ST_MIN(a.len, b.len);
    int c = n > 0 ? memcmp(a.p, b.p, (size_t)n) : 0;
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

static uint64_t shash(st_str_t s) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.p[i]) * 1099511628211ull;
    return h;
}

static void parts_clear(st_txn_t *t) {
    for (int i = 0; i < t->nparts; i++) free((char *)t->parts[i].topic.p);
    t->nparts = 0;
}

static void txn_free(tnode_t *n) {
    parts_clear(&n->t);
    free(n->t.parts);
    free((char *)n->t.id.p);
    free(n);
}

static tnode_t **slot_of(st_tstate_t *s, st_str_t id) {
    tnode_t **pp = &s->buckets[shash(id) % s->nbuckets];
    while (*pp && !seq((*pp)->t.id, id)) pp = &(*pp)->next;
    return pp;
}

static void grow(st_tstate_t *s) {
    size_t nb = s->nbuckets * 2;
    tnode_t **b = st_calloc(nb, sizeof *b);
    for (size_t i = 0; i < s->nbuckets; i++) {
        for (tnode_t *n = s->buckets[i], *next; n; n = next) {
            next = n->next;
            size_t k = shash(n->t.id) % nb;
            n->next = b[k];
            b[k] = n;
        }
    }
    free(s->buckets);
    s->buckets = b;
    s->nbuckets = nb;
}

static st_txn_t *txn_add(st_tstate_t *s, st_str_t id, int32_t partition) {
    if (s->count + 1 > s->nbuckets) grow(s);
    tnode_t *n = st_calloc(1, sizeof *n);
    n->t.id = sdup(id);
    n->t.partition = partition;
    n->t.producer_id = -1;
    n->t.last_producer_id = -1;
    n->t.producer_epoch = ST_TXN_NO_EPOCH;
    n->t.last_producer_epoch = ST_TXN_NO_EPOCH;
    n->t.start_ts = -1;
    tnode_t **pp = slot_of(s, id);
    n->next = *pp;
    *pp = n;
    s->count++;
    return &n->t;
}

static void txn_remove(st_tstate_t *s, st_str_t id) {
    tnode_t **pp = slot_of(s, id);
    tnode_t *n = *pp;
    if (!n) return;
    *pp = n->next;
    s->count--;
    txn_free(n);
}

/* ---- life ------------------------------------------------------------------ */

st_tstate_t *st_tstate_new(const st_tstate_config_t *cfg, const st_tstate_ops_t *ops) {
    st_tstate_t *s = st_calloc(1, sizeof *s);
    s->cfg = *cfg;
    if (s->cfg.num_partitions <= 0) s->cfg.num_partitions = 50;
    if (s->cfg.abort_interval_ms <= 0) s->cfg.abort_interval_ms = 10000;
    s->ops = *ops;
    s->parts = st_calloc((size_t)s->cfg.num_partitions, sizeof *s->parts);
    s->nbuckets = 64;
    s->buckets = st_calloc(s->nbuckets, sizeof *s->buckets);
    s->next_abort_check = s->ops.mono_ms(s->ops.arg) + s->cfg.abort_interval_ms;
    return s;
}

void st_tstate_destroy(st_tstate_t *s) {
    if (!s) return;
    for (size_t i = 0; i < s->nbuckets; i++)
        for (tnode_t *n = s->buckets[i], *next; n; n = next) {
            next = n->next;
            txn_free(n);
        }
    free(s->buckets);
    free(s->parts);
    free(s);
}

const st_tstate_config_t *st_tstate_config(const st_tstate_t *s) { return &s->cfg; }

void st_tstate_close(st_tstate_t *s) { s->closed = 1; }

void st_tstate_set_partition(st_tstate_t *s, int32_t partition, st_tpart_state_t st) {
    if (partition >= 0 && partition < s->cfg.num_partitions) s->parts[partition] = st;
}

st_tpart_state_t st_tstate_partition(const st_tstate_t *s, int32_t partition) {
    if (partition < 0 || partition >= s->cfg.num_partitions) return ST_TPART_NOT_OWNED;
    return s->parts[partition];
}

int32_t st_tstate_partition_of(const st_tstate_t *s, st_str_t id) {
    return st_group_partition_for(id.len > 0 ? id.p : "", (size_t)ST_MAX(id.len, 0),
                                  s->cfg.num_partitions);
}

int st_tstate_loading(const st_tstate_t *s) {
    for (int32_t i = 0; i < s->cfg.num_partitions; i++)
        if (s->parts[i] == ST_TPART_LOADING) return 1;
    return 0;
}

int st_tstate_skipped_records(const st_tstate_t *s) { return s->skipped; }

st_err_t st_tstate_check(st_tstate_t *s, st_str_t id) {
    if (s->closed) return ST_E_NOT_COORDINATOR;
    if (id.len <= 0) return ST_E_INVALID_REQUEST;
    int32_t p = st_tstate_partition_of(s, id);
    if (s->parts[p] == ST_TPART_UNKNOWN && s->ops.ensure_partition)
        s->ops.ensure_partition(s->ops.arg, p);
    switch (s->parts[p]) {
    case ST_TPART_LOADED: return ST_OK;
    case ST_TPART_LOADING: return ST_E_COORDINATOR_LOAD_IN_PROGRESS;
    default: return ST_E_NOT_COORDINATOR;
    }
}

st_txn_t *st_tstate_lookup(st_tstate_t *s, st_str_t id) {
    tnode_t *n = *slot_of(s, id);
    return n ? &n->t : NULL;
}

void st_tstate_foreach(st_tstate_t *s, void (*fn)(const st_txn_t *t, void *arg), void *arg) {
    for (size_t i = 0; i < s->nbuckets; i++)
        for (tnode_t *n = s->buckets[i]; n; n = n->next)
            if (s->parts[n->t.partition] == ST_TPART_LOADED) fn(&n->t, arg);
}

/* ---- transitions -------------------------------------------------------------- */

/* What a transaction becomes (Kafka's TxnTransitMetadata). */
typedef struct transit {
    int64_t producer_id, last_producer_id;
    int16_t producer_epoch, last_producer_epoch;
    int32_t timeout_ms;
    st_txn_status_t status;
    const st_txn_tp_t *parts;
    int nparts;
    int64_t start_ts, update_ts;
} transit_t;

static transit_t transit_of(const st_txn_t *t) {
    return (transit_t){t->producer_id, t->last_producer_id, t->producer_epoch,
                       t->last_producer_epoch, t->timeout_ms, t->status, t->parts, t->nparts,
                       t->start_ts, t->update_ts};
}

/* Kafka's appendTransactionToLog error mapping. */
static st_err_t append_error(st_err_t e) {
    switch (e) {
    case ST_OK: return ST_OK;
    case ST_E_UNKNOWN_TOPIC_OR_PARTITION:
    case ST_E_NOT_ENOUGH_REPLICAS:
    case ST_E_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case ST_E_REQUEST_TIMED_OUT: return ST_E_COORDINATOR_NOT_AVAILABLE;
    case ST_E_NOT_LEADER_OR_FOLLOWER:
    case ST_E_KAFKA_STORAGE_ERROR:
    case ST_E_IO: return ST_E_NOT_COORDINATOR;
    default: return ST_E_UNKNOWN_SERVER_ERROR;
    }
}

/* Append the transaction as tr says, then make it so. */
static st_err_t persist(st_tstate_t *s, st_txn_t *t, const transit_t *tr) {
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_trec_key(&k, t->id);
    st_trec_value_t rv = {tr->producer_id, tr->last_producer_id, tr->producer_epoch,
                          tr->timeout_ms,  (int8_t)tr->status,   (st_txn_tp_t *)tr->parts,
                          tr->nparts,      tr->update_ts,        tr->start_ts};
    st_trec_value(&v, &rv);
    st_batch_record_t rec = {k.data, (int32_t)k.len, v.data, (int32_t)v.len};
    st_err_t e = append_error(s->ops.append(s->ops.arg, t->partition, &rec, 1));
    st_buf_fini(&k);
    st_buf_fini(&v);
    if (e) {
        ST_LOG_RATELIMITED(ST_LOG_WARN, "txn", 5000,
                           "transactional id %.*s: cannot write its state (%s) to %s-%d: %s",
                           (int)ST_MIN(t->id.len, 100), t->id.p, st_txn_status_name(tr->status),
                           ST_TXN_STATE_TOPIC, (int)t->partition, st_err_msg(e));
        return e;
    }
    if (tr->parts != t->parts) {
        st_txn_tp_t *np = st_malloc(sizeof *np * (size_t)(tr->nparts + 1));
        for (int i = 0; i < tr->nparts; i++)
            np[i] = (st_txn_tp_t){sdup(tr->parts[i].topic), tr->parts[i].partition};
        parts_clear(t);
        free(t->parts);
        t->parts = np;
        t->nparts = t->capparts = tr->nparts;
    }
    t->producer_id = tr->producer_id;
    t->last_producer_id = tr->last_producer_id;
    t->producer_epoch = tr->producer_epoch;
    t->last_producer_epoch = tr->last_producer_epoch;
    t->timeout_ms = tr->timeout_ms;
    t->status = tr->status;
    t->start_ts = tr->start_ts;
    t->update_ts = tr->update_ts;
    return ST_OK;
}

static int64_t now_wall(st_tstate_t *s) { return s->ops.wall_ms(s->ops.arg); }

static void send_markers(st_tstate_t *s, st_txn_t *t) {
    if (s->closed) return;
    t->markers_out = 1;
    t->complete_due = 0;
    st_txn_markers_t m = {t->id,           t->partition, t->producer_id,
                          t->producer_epoch, t->status == ST_TXN_PREPARE_COMMIT,
                          t->parts,        t->nparts};
    if (t->nparts == 0) {
        st_tstate_markers_done(s, t->id, t->producer_id, t->producer_epoch);
        return;
    }
    s->ops.send_markers(s->ops.arg, &m);
}

/* Ongoing -> PrepareCommit / PrepareAbort at epoch (a fence bumps it),
 * then the markers go out. */
static st_err_t prepare_end(st_tstate_t *s, st_txn_t *t, int commit, int16_t epoch,
                            int16_t last_epoch) {
    transit_t tr = transit_of(t);
    tr.status = commit ? ST_TXN_PREPARE_COMMIT : ST_TXN_PREPARE_ABORT;
    tr.producer_epoch = epoch;
    tr.last_producer_epoch = last_epoch;
    tr.update_ts = now_wall(s);
    st_err_t e = persist(s, t, &tr);
    if (e) return e;
    ST_DEBUG("txn", "transactional id %.*s: %s (producer %lld epoch %d, %d partitions)",
             (int)ST_MIN(t->id.len, 100), t->id.p, st_txn_status_name(t->status),
             (long long)t->producer_id, (int)t->producer_epoch, t->nparts);
    send_markers(s, t);
    return ST_OK;
}

/* Kafka's prepareFenceProducerEpoch: the epoch a fence moves to. */
static int16_t fenced_epoch(const st_txn_t *t) {
    return t->producer_epoch < INT16_MAX ? (int16_t)(t->producer_epoch + 1) : t->producer_epoch;
}

st_err_t st_tstate_init_pid(st_tstate_t *s, st_str_t id, int32_t timeout_ms,
                            int64_t expected_pid, int16_t expected_epoch, int64_t *pid,
                            int16_t *epoch) {
    st_err_t e = st_tstate_check(s, id);
    if (e) return e;
    if (timeout_ms <= 0 || timeout_ms > s->cfg.max_timeout_ms)
        return ST_E_INVALID_TRANSACTION_TIMEOUT;
    int has_expected = expected_pid >= 0;
    st_txn_t *t = st_tstate_lookup(s, id);
    int created = 0;
    if (!t) {
        int64_t np = s->ops.new_producer_id(s->ops.arg);
        if (np < 0) return ST_E_COORDINATOR_LOAD_IN_PROGRESS; /* the block is on its way */
        t = txn_add(s, id, st_tstate_partition_of(s, id));
        t->producer_id = np;
        t->timeout_ms = timeout_ms;
        t->status = ST_TXN_EMPTY;
        t->update_ts = now_wall(s);
        created = 1;
    }
    /* Kafka's isValidProducerId */
    if (has_expected && !(t->producer_epoch == ST_TXN_NO_EPOCH || expected_pid == t->producer_id ||
                          (expected_pid == t->last_producer_id &&
                           ST_TXN_EPOCH_EXHAUSTED(expected_epoch)))) {
        e = ST_E_PRODUCER_FENCED;
        goto out;
    }
    transit_t tr = transit_of(t);
    switch (t->status) {
    case ST_TXN_PREPARE_COMMIT:
    case ST_TXN_PREPARE_ABORT:
    case ST_TXN_DEAD:
    case ST_TXN_PREPARE_EPOCH_FENCE: e = ST_E_CONCURRENT_TRANSACTIONS; goto out;
    case ST_TXN_ONGOING:
        /* fence the producer and abort its transaction; the client retries
         * on CONCURRENT_TRANSACTIONS and gets the epoch bumped once more */
        e = prepare_end(s, t, 0, fenced_epoch(t), t->producer_epoch);
        if (!e) e = ST_E_CONCURRENT_TRANSACTIONS;
        goto out;
    default: break;
    }
    if (ST_TXN_EPOCH_EXHAUSTED(t->producer_epoch) &&
        (!has_expected || expected_epoch == t->producer_epoch)) {
        /* prepareProducerIdRotation */
        int64_t np = s->ops.new_producer_id(s->ops.arg);
        if (np < 0) {
            e = ST_E_COORDINATOR_LOAD_IN_PROGRESS;
            goto out;
        }
        tr.last_producer_id = t->producer_id;
        tr.producer_id = np;
        tr.last_producer_epoch = has_expected ? t->producer_epoch : ST_TXN_NO_EPOCH;
        tr.producer_epoch = 0;
    } else if (!has_expected) {
        tr.producer_epoch = (int16_t)(t->producer_epoch + 1);
        tr.last_producer_epoch = ST_TXN_NO_EPOCH;
    } else if (t->producer_epoch == ST_TXN_NO_EPOCH || expected_epoch == t->producer_epoch) {
        tr.producer_epoch = (int16_t)(t->producer_epoch + 1);
        tr.last_producer_epoch = t->producer_epoch;
    } else if (expected_epoch == t->last_producer_epoch) {
        /* a retry of a bump that succeeded: the same answer again */
    } else {
        e = ST_E_PRODUCER_FENCED;
        goto out;
    }
    tr.status = ST_TXN_EMPTY;
    tr.parts = NULL;
    tr.nparts = 0;
    tr.timeout_ms = timeout_ms;
    tr.start_ts = -1;
    tr.update_ts = now_wall(s);
    e = persist(s, t, &tr);
    if (!e) {
        *pid = t->producer_id;
        *epoch = t->producer_epoch;
        created = 0;
    }
out:
    if (e && created) txn_remove(s, id); /* never written: it does not exist */
    return e;
}

static int tp_cmp(const void *a, const void *b) {
    const st_txn_tp_t *x = a, *y = b;
    int c = scmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* Whether tp is in t's sorted partitions. */
static int has_part(const st_txn_t *t, const st_txn_tp_t *tp) {
    return bsearch(tp, t->parts, (size_t)t->nparts, sizeof *tp, tp_cmp) != NULL;
}

/* The checks AddPartitionsToTxn, AddOffsetsToTxn and EndTxn share. */
static st_err_t check_producer(st_tstate_t *s, st_str_t id, int64_t pid, int16_t epoch,
                               st_txn_t **out) {
    st_err_t e = st_tstate_check(s, id);
    if (e) return e;
    st_txn_t *t = st_tstate_lookup(s, id);
    if (!t || t->producer_id != pid) return ST_E_INVALID_PRODUCER_ID_MAPPING;
    if (t->producer_epoch != epoch) return ST_E_PRODUCER_FENCED;
    *out = t;
    return ST_OK;
}

st_err_t st_tstate_add_partitions(st_tstate_t *s, st_str_t id, int64_t pid, int16_t epoch,
                                  const st_txn_tp_t *parts, int n) {
    st_txn_t *t;
    st_err_t e = check_producer(s, id, pid, epoch, &t);
    if (e) return e;
    if (t->status == ST_TXN_PREPARE_COMMIT || t->status == ST_TXN_PREPARE_ABORT ||
        t->status == ST_TXN_DEAD || t->status == ST_TXN_PREPARE_EPOCH_FENCE)
        return ST_E_CONCURRENT_TRANSACTIONS;
    int fresh = t->status != ST_TXN_ONGOING;
    int missing = 0;
    for (int i = 0; i < n; i++) missing += fresh || !has_part(t, &parts[i]);
    if (!missing && !fresh) return ST_OK; /* all there: nothing to write */
    /* the union, sorted, without duplicates */
    int cap = (fresh ? 0 : t->nparts) + n;
    st_txn_tp_t *u = st_malloc(sizeof *u * (size_t)(cap + 1));
    int k = 0;
    if (!fresh)
        for (int i = 0; i < t->nparts; i++) u[k++] = t->parts[i];
    for (int i = 0; i < n; i++) u[k++] = parts[i];
    qsort(u, (size_t)k, sizeof *u, tp_cmp);
    int m = 0;
    for (int i = 0; i < k; i++)
        if (!m || tp_cmp(&u[m - 1], &u[i]) != 0) u[m++] = u[i];
    transit_t tr = transit_of(t);
    tr.status = ST_TXN_ONGOING;
    tr.parts = u;
    tr.nparts = m;
    tr.update_ts = now_wall(s);
    if (fresh) tr.start_ts = tr.update_ts;
    e = persist(s, t, &tr);
    free(u);
    return e;
}

st_err_t st_tstate_verify(st_tstate_t *s, st_str_t id, int64_t pid, int16_t epoch,
                          const st_txn_tp_t *parts, int n, st_err_t *errs) {
    st_txn_t *t = NULL;
    st_err_t e = check_producer(s, id, pid, epoch, &t);
    if (!e && (t->status == ST_TXN_PREPARE_COMMIT || t->status == ST_TXN_PREPARE_ABORT ||
               t->status == ST_TXN_PREPARE_EPOCH_FENCE))
        e = ST_E_CONCURRENT_TRANSACTIONS;
    for (int i = 0; i < n; i++)
        errs[i] = e ? e : t->status == ST_TXN_ONGOING && has_part(t, &parts[i])
                              ? ST_OK
                              : ST_E_INVALID_TXN_STATE;
    return e;
}

st_err_t st_tstate_end_txn(st_tstate_t *s, st_str_t id, int64_t pid, int16_t epoch,
                           int commit) {
    st_txn_t *t;
    st_err_t e = check_producer(s, id, pid, epoch, &t);
    if (e) return e;
    switch (t->status) {
    case ST_TXN_ONGOING: return prepare_end(s, t, commit, t->producer_epoch, t->last_producer_epoch);
    case ST_TXN_COMPLETE_COMMIT: return commit ? ST_OK : ST_E_INVALID_TXN_STATE;
    case ST_TXN_COMPLETE_ABORT: return commit ? ST_E_INVALID_TXN_STATE : ST_OK;
    case ST_TXN_PREPARE_COMMIT: return commit ? ST_E_CONCURRENT_TRANSACTIONS : ST_E_INVALID_TXN_STATE;
    case ST_TXN_PREPARE_ABORT: return commit ? ST_E_INVALID_TXN_STATE : ST_E_CONCURRENT_TRANSACTIONS;
    default: return ST_E_INVALID_TXN_STATE;
    }
}

static void complete(st_tstate_t *s, st_txn_t *t) {
    transit_t tr = transit_of(t);
    tr.status = t->status == ST_TXN_PREPARE_COMMIT ? ST_TXN_COMPLETE_COMMIT : ST_TXN_COMPLETE_ABORT;
    tr.parts = NULL;
    tr.nparts = 0;
    tr.update_ts = now_wall(s);
    if (persist(s, t, &tr)) {
        t->complete_due = 1; /* tried again by the tick */
        return;
    }
    t->complete_due = 0;
    ST_DEBUG("txn", "transactional id %.*s: %s", (int)ST_MIN(t->id.len, 100), t->id.p,
             st_txn_status_name(t->status));
}

void st_tstate_markers_done(st_tstate_t *s, st_str_t id, int64_t pid, int16_t epoch) {
    st_txn_t *t = st_tstate_lookup(s, id);
    if (!t || s->closed || s->parts[t->partition] != ST_TPART_LOADED || t->producer_id != pid ||
        t->producer_epoch != epoch ||
        (t->status != ST_TXN_PREPARE_COMMIT && t->status != ST_TXN_PREPARE_ABORT))
        return;
    t->markers_out = 0;
    complete(s, t);
}

/* ---- timers ---------------------------------------------------------------------- */

int64_t st_tstate_tick(st_tstate_t *s) {
    int64_t now = s->ops.mono_ms(s->ops.arg);
    if (s->closed) return now + s->cfg.abort_interval_ms;
    if (now < s->next_abort_check) return s->next_abort_check;
    s->next_abort_check = now + s->cfg.abort_interval_ms;
    int64_t wall = now_wall(s);
    /* collect first: aborts and expiries change the map */
    st_str_t *expired = NULL;
    st_txn_t **timed_out = NULL;
    size_t nexp = 0, nto = 0;
    for (size_t i = 0; i < s->nbuckets; i++) {
        for (tnode_t *n = s->buckets[i]; n; n = n->next) {
            st_txn_t *t = &n->t;
            if (s->parts[t->partition] != ST_TPART_LOADED) continue;
            if (t->status == ST_TXN_ONGOING && t->start_ts >= 0 &&
                t->start_ts + t->timeout_ms < wall) {
                timed_out = st_realloc(timed_out, sizeof *timed_out * (nto + 1));
                timed_out[nto++] = t;
            } else if ((t->status == ST_TXN_EMPTY || t->status == ST_TXN_COMPLETE_COMMIT ||
                        t->status == ST_TXN_COMPLETE_ABORT) &&
                       t->update_ts + s->cfg.id_expiration_ms <= wall) {
                expired = st_realloc(expired, sizeof *expired * (nexp + 1));
                expired[nexp++] = t->id;
            } else if (t->complete_due) {
                complete(s, t);
            }
        }
    }
    for (size_t i = 0; i < nto; i++) {
        st_txn_t *t = timed_out[i];
        ST_INFO("txn", "transactional id %.*s: transaction open for more than %d ms: aborting "
                       "it (producer %lld, epoch %d bumped)",
                (int)ST_MIN(t->id.len, 100), t->id.p, (int)t->timeout_ms,
                (long long)t->producer_id, (int)t->producer_epoch);
        prepare_end(s, t, 0, fenced_epoch(t), t->producer_epoch);
    }
    for (size_t i = 0; i < nexp; i++) {
        st_txn_t *t = st_tstate_lookup(s, expired[i]);
        st_buf_t k;
        st_buf_init(&k);
        st_trec_key(&k, t->id);
        st_batch_record_t rec = {k.data, (int32_t)k.len, NULL, -1};
        st_err_t e = append_error(s->ops.append(s->ops.arg, t->partition, &rec, 1));
        st_buf_fini(&k);
        if (e) continue; /* tried again next time */
        ST_INFO("txn", "transactional id %.*s expired (transactional.id.expiration.ms)",
                (int)ST_MIN(t->id.len, 100), t->id.p);
        txn_remove(s, expired[i]);
    }
    free(expired);
    free(timed_out);
    return s->next_abort_check;
}

/* ---- replay ------------------------------------------------------------------------ */

void st_tstate_load_record(st_tstate_t *s, int32_t partition, const uint8_t *key, int32_t klen,
                           const uint8_t *value, int32_t vlen) {
    st_str_t id;
    if (st_trec_decode_key(key, klen, &id) || id.len <= 0) {
        s->skipped++;
        return;
    }
    if (!value) {
        txn_remove(s, id);
        return;
    }
    st_arena_t a;
    st_arena_init(&a, 256);
    st_trec_value_t v;
    if (st_trec_decode_value(value, vlen, &a, &v)) {
        s->skipped++;
        st_arena_fini(&a);
        return;
    }
    if (v.status == ST_TXN_DEAD) {
        txn_remove(s, id);
        st_arena_fini(&a);
        return;
    }
    st_txn_t *t = st_tstate_lookup(s, id);
    if (!t) t = txn_add(s, id, partition);
    qsort(v.parts, (size_t)v.nparts, sizeof *v.parts, tp_cmp);
    transit_t tr = {v.producer_id,
                    v.previous_producer_id,
                    v.producer_epoch,
                    ST_TXN_NO_EPOCH, /* not in the record (Kafka's loader too) */
                    v.timeout_ms,
                    (st_txn_status_t)v.status,
                    v.parts,
                    v.nparts,
                    v.start_ts,
                    v.update_ts};
    /* as persist, without the append */
    st_txn_tp_t *np = st_malloc(sizeof *np * (size_t)(tr.nparts + 1));
    int m = 0;
    for (int i = 0; i < tr.nparts; i++)
        if (!m || tp_cmp(&np[m - 1], &tr.parts[i]) != 0)
            np[m++] = (st_txn_tp_t){sdup(tr.parts[i].topic), tr.parts[i].partition};
    parts_clear(t);
    free(t->parts);
    t->parts = np;
    t->nparts = t->capparts = m;
    t->producer_id = tr.producer_id;
    t->last_producer_id = tr.last_producer_id;
    t->producer_epoch = tr.producer_epoch;
    t->last_producer_epoch = tr.last_producer_epoch;
    t->timeout_ms = tr.timeout_ms;
    t->status = tr.status;
    t->start_ts = tr.start_ts;
    t->update_ts = tr.update_ts;
    st_arena_fini(&a);
}

void st_tstate_load_done(st_tstate_t *s, int32_t partition) {
    st_tstate_set_partition(s, partition, ST_TPART_LOADED);
    int n = 0, resumed = 0;
    for (size_t i = 0; i < s->nbuckets; i++)
        for (tnode_t *nd = s->buckets[i]; nd; nd = nd->next) {
            st_txn_t *t = &nd->t;
            if (t->partition != partition) continue;
            n++;
            if (t->status == ST_TXN_PREPARE_COMMIT || t->status == ST_TXN_PREPARE_ABORT) {
                resumed++;
                send_markers(s, t);
            }
        }
    if (n)
        ST_INFO("txn", "%s-%d loaded: %d transactional ids, %d transactions completing",
                ST_TXN_STATE_TOPIC, (int)partition, n, resumed);
}

void st_tstate_unload(st_tstate_t *s, int32_t partition) {
    for (size_t i = 0; i < s->nbuckets; i++) {
        tnode_t **pp = &s->buckets[i];
        while (*pp) {
            tnode_t *n = *pp;
            if (n->t.partition == partition) {
                *pp = n->next;
                s->count--;
                txn_free(n);
            } else {
                pp = &n->next;
            }
        }
    }
    st_tstate_set_partition(s, partition, ST_TPART_UNKNOWN);
}

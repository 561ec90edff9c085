/*
 * coordinator.c - the transaction coordinator service: one thread that owns
 * the state machine (state.c), runs the jobs request handlers give it in
 * order, fires its timers, replays the __transaction_state partitions this
 * broker leads, appends the records the state machine writes, and sends
 * the markers of prepared transactions to the partitions' leaders.
 *
 * Loading: at start, and whenever the metadata says this broker became the
 * leader of a partition of __transaction_state (looked at once a second),
 * the partition is LOADING and replayed in steps between jobs (requests
 * for its ids get COORDINATOR_LOAD_IN_PROGRESS); a partition whose leader
 * is now another broker is unloaded (NOT_COORDINATOR from then on).
 *
 * Markers (Kafka's TransactionMarkerChannelManager):
 *
 *   state machine     send_markers: a task with the partitions left
 *        |
 *   WAIT_DURABLE      until the Prepare record is flushed (log.flush.on.ack)
 *        |            and in every in-sync replica (a new coordinator must
 *        v            find it, or it would not finish what was begun)
 *   READY ----------> one WriteTxnMarkers per leader of the partitions
 *        ^            left (this broker included), posted to loop 0 whose
 *        |            netclients (one per broker) send it
 *   retry backoff     answers come back as jobs: acknowledged partitions
 *   (100 ms .. 1 s)   leave the task, partitions of deleted topics too;
 *        |            the others are retried (leader moves, timeouts)
 *        +---------   when none is left: st_tstate_markers_done
 *
 * Durability of answers: an append returns once the batch is in the log;
 * a handler whose answer reports a write waits on its loop until the
 * partition's flushed offset and high watermark pass
 * st_txn_coord_written_end, as h_group.c does.
 *
 * Threads: the coordinator thread owns everything here except the job
 * queue (c->lock) and the netclients (loop 0's, the `clients` array).
 */
#include "txn_int.h"

#include <stdlib.h>

#define MARKER_BACKOFF_MIN_MS 100
#define MARKER_BACKOFF_MAX_MS 1000
#define MARKER_TIMEOUT_MS 30000
#define MARKERS_VERSION 1

typedef struct job {
    st_txn_job_fn fn;
    void *arg;
    struct job *next;
} job_t;

typedef struct part {
    st_partition_t *p; /* kept while loading or loaded */
    int64_t load_pos;
    int64_t written_end;
    int32_t leader_epoch; /* the partition's leader epoch when its load began */
} part_t;

enum { TASK_WAIT_DURABLE, TASK_READY, TASK_INFLIGHT };

typedef struct mtask {
    struct mtask *next;
    uint64_t seq;
    st_str_t id; /* owned */
    int32_t tpart;
    int64_t pid;
    int16_t epoch;
    int commit;
    int64_t need_offset; /* the Prepare record's end */
    st_txn_tp_t *parts;  /* left to acknowledge; topics owned */
    int nparts;
    int state, inflight;
    int64_t next_try;
    int64_t since; /* monotonic ms it began waiting for durability */
    int64_t backoff_ms;
    int attempts;
} mtask_t;

typedef struct client {
    int32_t node_id;
    char *host;
    int port;
    st_netclient_t *nc;
} client_t;

/* An EndTxn answer held until its transaction completes (coordinator
 * thread). */
typedef struct ewait {
    struct ewait *next;
    st_str_t id; /* owned */
    int64_t pid;
    int16_t epoch;
    int64_t deadline; /* monotonic ms */
    st_txn_job_fn fn;
    void *arg;
} ewait_t;

struct st_txn_coord {
    st_txn_coord_config_t cfg;
    st_replicas_t *rm;
    st_controller_t *ctl;
    st_logmgr_t *logs;
    st_net_t *net;
    st_tstate_t *state;
    int32_t nparts;
    part_t *parts;
    uint8_t *buf;
    size_t bufcap;
    mtask_t *tasks;
    ewait_t *ewaits;
    uint64_t next_seq;
    int64_t next_leader_check;

    /* loop 0 */
    client_t *clients;
    int nclients;

    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    job_t *head, *tail;
    int stopping, started;
    int closing; /* set once (atomically); loop 0's callbacks read it */
};

static int closing(st_txn_coord_t *c) { return __atomic_load_n(&c->closing, __ATOMIC_ACQUIRE); }

static st_str_t sdup(st_str_t s) {
    size_t n = s.len > 0 ? (size_t)s.len : 0;
    char *p = st_malloc(n + 1);
    if (n) memcpy(p, s.p, n);
    p[n] = 0;
    return (st_str_t){p, (int32_t)n};
}

static int64_t op_mono(void *arg) {
    (void)arg;
    return st_mono_ms();
}

static int64_t op_wall(void *arg) {
    (void)arg;
    return st_now_ms();
}

static st_err_t op_append(void *arg, int32_t partition, const st_batch_record_t *recs, int n) {
    st_txn_coord_t *c = arg;
    if (partition < 0 || partition >= c->nparts || !c->parts[partition].p)
        return ST_E_NOT_LEADER_OR_FOLLOWER;
    st_partition_t *p = c->parts[partition].p;
    st_buf_t b;
    st_buf_init(&b);
    st_batch_build(&b, recs, n, st_now_ms());
    st_log_config_t lc;
    st_log_get_config(p->log, &lc);
    st_err_t e = ST_OK;
    if ((int64_t)b.len > lc.max_message_bytes) e = ST_E_MESSAGE_TOO_LARGE;
    else if ((int64_t)b.len > lc.segment_bytes) e = ST_E_RECORD_LIST_TOO_LARGE;
    st_append_info_t info;
    if (!e) e = st_partition_append(p, b.data, b.len, ST_LOG_UNVERIFIED, &info);
    if (!e) {
        c->parts[partition].written_end = info.last_offset + 1;
        if (c->cfg.flush_on_ack) st_logmgr_request_flush(c->logs, p->log);
    }
    st_buf_fini(&b);
    return e;
}

static int64_t op_new_pid(void *arg) {
    st_txn_coord_t *c = arg;
    return c->cfg.new_producer_id ? c->cfg.new_producer_id(c->cfg.pid_arg) : -1;
}

static void op_send_markers(void *arg, const st_txn_markers_t *m) {
    st_txn_coord_t *c = arg;
    mtask_t *t = st_calloc(1, sizeof *t);
    t->seq = ++c->next_seq;
    t->id = sdup(m->id);
    t->tpart = m->partition;
    t->pid = m->producer_id;
    t->epoch = m->producer_epoch;
    t->commit = m->commit;
    t->need_offset = m->partition >= 0 && m->partition < c->nparts
                         ? c->parts[m->partition].written_end
                         : 0;
    t->parts = st_malloc(sizeof *t->parts * (size_t)(m->nparts + 1));
    for (int i = 0; i < m->nparts; i++)
        t->parts[i] = (st_txn_tp_t){sdup(m->parts[i].topic), m->parts[i].partition};
    t->nparts = m->nparts;
    t->state = TASK_WAIT_DURABLE;
    t->since = st_mono_ms();
    t->backoff_ms = MARKER_BACKOFF_MIN_MS;
    t->next = c->tasks;
    c->tasks = t;
}

static void task_free(mtask_t *t) {
    for (int i = 0; i < t->nparts; i++) free((char *)t->parts[i].topic.p);
    free(t->parts);
    free((char *)t->id.p);
    free(t);
}

/* ---- loading ------------------------------------------------------------------ */

/* The leader of a partition of __transaction_state and its leader epoch
 * (the coordinator epoch of the markers), from the metadata image. */
static int32_t leader_of(st_txn_coord_t *c, int32_t partition, int32_t *epoch) {
    st_meta_image_t *img = st_controller_image(c->ctl);
    const st_meta_topic_t *t =
        st_image_topic(img, ST_TXN_STATE_TOPIC, strlen(ST_TXN_STATE_TOPIC));
    int32_t leader = t && partition < t->nparts ? t->parts[partition].leader : -1;
    if (epoch) *epoch = t && partition < t->nparts ? t->parts[partition].leader_epoch : 0;
    st_image_release(img);
    return leader;
}

static st_partition_t *led_partition(st_txn_coord_t *c, int32_t partition, int32_t *epoch) {
    if (leader_of(c, partition, epoch) != c->cfg.node_id) return NULL;
    return st_replicas_lookup(c->rm, ST_TXN_STATE_TOPIC, strlen(ST_TXN_STATE_TOPIC), partition,
                              NULL);
}

static void start_load(st_txn_coord_t *c, int32_t partition, st_partition_t *p, int32_t epoch) {
    part_t *pt = &c->parts[partition];
    st_partition_release(pt->p);
    pt->p = p;
    pt->leader_epoch = epoch;
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    pt->load_pos = o.log_start_offset;
    pt->written_end = 0;
    st_tstate_set_partition(c->state, partition, ST_TPART_LOADING);
    if (o.leo > o.log_start_offset)
        ST_INFO("txn", "loading %s-%d (offsets %lld..%lld)", ST_TXN_STATE_TOPIC, (int)partition,
                (long long)o.log_start_offset, (long long)o.leo);
}

static void unload(st_txn_coord_t *c, int32_t partition) {
    st_tstate_unload(c->state, partition);
    st_partition_release(c->parts[partition].p);
    c->parts[partition].p = NULL;
    c->parts[partition].written_end = 0;
    /* its marker tasks go: the next coordinator resends them */
    for (mtask_t **pp = &c->tasks; *pp;) {
        mtask_t *t = *pp;
        if (t->tpart == partition && t->state != TASK_INFLIGHT) {
            *pp = t->next;
            task_free(t);
        } else {
            pp = &t->next;
        }
    }
}

typedef struct replay {
    st_txn_coord_t *c;
    int32_t partition;
} replay_t;

static int replay_record(const st_record_t *r, void *arg) {
    replay_t *rp = arg;
    st_tstate_load_record(rp->c->state, rp->partition, r->key, r->key_len,
                          r->value_len >= 0 ? r->value : NULL, r->value_len);
    return 0;
}

static void replay_batch(const st_batch_info_t *b, const uint8_t *bytes, void *arg) {
    replay_t *rp = arg;
    if (b->attributes & ST_ATTR_CONTROL) return;
    st_err_t re = st_batch_foreach_record(bytes, b->size, replay_record, rp);
    if (re)
        ST_WARN("txn", "%s-%d: batch at offset %lld unreadable (%s); skipped", ST_TXN_STATE_TOPIC,
                (int)rp->partition, (long long)b->base_offset, st_err_name(re));
}

/* One step of replay.  Returns 1 when the partition is loaded (or given up). */
static int load_step(st_txn_coord_t *c, int32_t partition) {
    part_t *pt = &c->parts[partition];
    replay_t rp = {c, partition};
    int64_t before = pt->load_pos;
    int done;
    st_err_t e = st_log_replay_step(pt->p->log, &pt->load_pos, c->cfg.load_buffer_bytes, &c->buf,
                                    &c->bufcap, replay_batch, &rp, &done);
    if (e == ST_E_CORRUPT) {
        ST_ERROR("txn", "%s-%d: no readable batch at offset %lld; loading stops there",
                 ST_TXN_STATE_TOPIC, (int)partition, (long long)before);
        st_tstate_load_done(c->state, partition);
        return 1;
    }
    if (e) {
        ST_ERROR("txn", "%s-%d: cannot read while loading: %s", ST_TXN_STATE_TOPIC,
                 (int)partition, st_err_msg(e));
        unload(c, partition);
        return 1;
    }
    if (done) st_tstate_load_done(c->state, partition);
    return done;
}

static void op_ensure(void *arg, int32_t partition) {
    st_txn_coord_t *c = arg;
    int32_t epoch = 0;
    st_partition_t *p = led_partition(c, partition, &epoch);
    if (!p) return;
    start_load(c, partition, p, epoch);
    for (int i = 0; i < 16; i++)
        if (load_step(c, partition)) break;
}

static int load_some(st_txn_coord_t *c) {
    int loading = 0;
    for (int32_t i = 0; i < c->nparts; i++) {
        if (st_tstate_partition(c->state, i) != ST_TPART_LOADING) continue;
        if (!load_step(c, i)) loading = 1;
    }
    return loading;
}

/* Once a second: load partitions that became ours, unload those that
 * moved away, and load again one whose leader epoch moved on since we
 * loaded it (led elsewhere in between). */
static void follow_leaders(st_txn_coord_t *c) {
    int64_t now = st_mono_ms();
    if (now < c->next_leader_check || closing(c)) return;
    c->next_leader_check = now + 1000;
    st_meta_image_t *img = st_controller_image(c->ctl);
    const st_meta_topic_t *t =
        st_image_topic(img, ST_TXN_STATE_TOPIC, strlen(ST_TXN_STATE_TOPIC));
    for (int32_t i = 0; t && i < c->nparts && i < t->nparts; i++) {
        const st_meta_partition_t *mp = &t->parts[i];
        int mine = mp->leader == c->cfg.node_id;
        st_tpart_state_t ps = st_tstate_partition(c->state, i);
        int held = ps == ST_TPART_LOADED || ps == ST_TPART_LOADING;
        if (held && (!mine || mp->leader_epoch != c->parts[i].leader_epoch)) {
            ST_INFO("txn", "%s-%d is led by node %d at epoch %d now (loaded at epoch %d): "
                    "unloaded", ST_TXN_STATE_TOPIC, (int)i, (int)mp->leader,
                    (int)mp->leader_epoch, (int)c->parts[i].leader_epoch);
            unload(c, i);
            ps = st_tstate_partition(c->state, i);
        }
        if (mine && ps == ST_TPART_UNKNOWN) {
            st_partition_t *p = st_replicas_lookup(c->rm, ST_TXN_STATE_TOPIC,
                                                   strlen(ST_TXN_STATE_TOPIC), i, NULL);
            if (p) start_load(c, i, p, mp->leader_epoch);
        }
    }
    st_image_release(img);
}

/* ---- markers ---------------------------------------------------------------------- */

/* One WriteTxnMarkers to one leader, on its way through loop 0. */
typedef struct msend {
    st_txn_coord_t *c;
    uint64_t seq;
    int32_t node_id;
    char *host;
    int port;
    st_arena_t arena;
    st_write_txn_markers_req_t req;
    /* the answer, for the coordinator */
    st_err_t err;
    st_txn_tp_t *acked; /* topics point into the task's (still alive: it waits for us) */
    int nacked;
    st_txn_tp_t *sent;
    int nsent;
    st_txn_tp_t *unknown; /* UNKNOWN_TOPIC_OR_PARTITION */
    int nunknown;
} msend_t;

static void msend_free(msend_t *s) {
    free(s->host);
    free(s->acked);
    free(s->unknown);
    free(s->sent);
    st_arena_fini(&s->arena);
    free(s);
}

static int tp_same(const st_txn_tp_t *a, st_str_t topic, int32_t partition) {
    return a->partition == partition && a->topic.len == topic.len &&
           (topic.len <= 0 || memcmp(a->topic.p, topic.p, (size_t)topic.len) == 0);
}

static void markers_answered(st_txn_coord_t *c, st_tstate_t *s, void *arg);

static void on_markers(st_netclient_t *nc, const st_netclient_resp_t *resp, void *arg) {
    (void)nc;
    msend_t *m = arg;
    st_txn_coord_t *c = m->c;
    if (closing(c)) {
        msend_free(m);
        return;
    }
    m->err = resp->err;
    if (!m->err) {
        st_arena_t a;
        st_arena_init(&a, 1024);
        st_write_txn_markers_resp_t *r;
        m->err = st_netclient_decode(resp, &a, (void **)&r);
        if (!m->err) {
            m->acked = st_malloc(sizeof *m->acked * (size_t)(m->nsent + 1));
            m->unknown = st_malloc(sizeof *m->unknown * (size_t)(m->nsent + 1));
            for (int i = 0; i < r->markers.n; i++) {
                st_write_txn_marker_result_t *mr = &r->markers.v[i];
                for (int j = 0; j < mr->topics.n; j++) {
                    st_write_txn_markers_resp_topic_t *rt = &mr->topics.v[j];
                    for (int k = 0; k < rt->partitions.n; k++) {
                        st_write_txn_markers_resp_part_t *rp = &rt->partitions.v[k];
                        /* the answer names our partitions: match them to
                         * what was sent (our strings outlive the arena) */
                        for (int x = 0; x < m->nsent; x++) {
                            if (!tp_same(&m->sent[x], rt->name, rp->partition_index)) continue;
                            if (rp->error_code == 0) m->acked[m->nacked++] = m->sent[x];
                            else if (rp->error_code == st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION))
                                m->unknown[m->nunknown++] = m->sent[x];
                            else
                                ST_LOG_RATELIMITED(ST_LOG_INFO, "txn", 5000,
                                                   "WriteTxnMarkers to node %d: %.*s-%d: error %d; "
                                                   "retried",
                                                   (int)m->node_id, (int)rt->name.len, rt->name.p,
                                                   (int)rp->partition_index, (int)rp->error_code);
                            break;
                        }
                    }
                }
            }
        }
        st_arena_fini(&a);
    }
    if (m->err)
        ST_LOG_RATELIMITED(ST_LOG_INFO, "txn", 5000, "WriteTxnMarkers to node %d (%s:%d): %s%s%s",
                           (int)m->node_id, m->host, m->port, st_err_msg(m->err),
                           resp->why ? ": " : "", resp->why ? resp->why : "");
    st_txn_coord_submit(c, markers_answered, m);
}

static client_t *client_for(st_txn_coord_t *c, int32_t node, const char *host, int port) {
    for (int i = 0; i < c->nclients; i++) {
        client_t *k = &c->clients[i];
        if (k->node_id != node) continue;
        if (k->port == port && strcmp(k->host, host) == 0) return k;
        st_netclient_destroy(k->nc); /* the broker moved: a new connection */
        free(k->host);
        *k = c->clients[--c->nclients];
        break;
    }
    st_netclient_config_t cfg = {0};
    cfg.host = host;
    cfg.port = port;
    cfg.client_id = "strata-txn-coordinator";
    cfg.sec = c->cfg.sec;
    cfg.request_timeout_ms = MARKER_TIMEOUT_MS;
    st_netclient_t *nc;
    char err[256];
    if (st_netclient_new(st_net_loop(c->net, 0), &cfg, &nc, err, sizeof err)) {
        ST_LOG_RATELIMITED(ST_LOG_WARN, "txn", 5000, "no client to node %d (%s:%d): %s",
                           (int)node, host, port, err);
        return NULL;
    }
    c->clients = st_realloc(c->clients, sizeof *c->clients * (size_t)(c->nclients + 1));
    client_t *k = &c->clients[c->nclients++];
    *k = (client_t){node, st_strdup(host), port, nc};
    return k;
}

/* Loop 0. */
static void send_on_loop(void *arg) {
    msend_t *m = arg;
    st_txn_coord_t *c = m->c;
    if (closing(c)) {
        msend_free(m);
        return;
    }
    client_t *k = client_for(c, m->node_id, m->host, m->port);
    st_err_t e = k ? st_netclient_send(k->nc, ST_API_WRITE_TXN_MARKERS, MARKERS_VERSION, &m->req,
                                       MARKER_TIMEOUT_MS, on_markers, m)
                   : ST_E_NETWORK_EXCEPTION;
    if (e) {
        m->err = e;
        st_txn_coord_submit(c, markers_answered, m);
    }
}

static mtask_t *task_by_seq(st_txn_coord_t *c, uint64_t seq, mtask_t ***where) {
    for (mtask_t **pp = &c->tasks; *pp; pp = &(*pp)->next)
        if ((*pp)->seq == seq) {
            if (where) *where = pp;
            return *pp;
        }
    return NULL;
}

static void task_drop_part(mtask_t *t, const st_txn_tp_t *tp) {
    for (int i = 0; i < t->nparts; i++) {
        if (!tp_same(&t->parts[i], tp->topic, tp->partition)) continue;
        free((char *)t->parts[i].topic.p);
        t->parts[i] = t->parts[--t->nparts];
        return;
    }
}

/* Whether the task still speaks for its transaction: the partition is
 * loaded here and the transaction is still prepared at that epoch (a
 * partition unloaded, or a transaction completed, leaves it stale). */
static int task_live(st_txn_coord_t *c, const mtask_t *t) {
    if (st_tstate_partition(c->state, t->tpart) != ST_TPART_LOADED) return 0;
    const st_txn_t *x = st_tstate_lookup(c->state, t->id);
    return x && x->producer_id == t->pid && x->producer_epoch == t->epoch &&
           (x->status == ST_TXN_PREPARE_COMMIT || x->status == ST_TXN_PREPARE_ABORT);
}

static void markers_answered(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    msend_t *m = arg;
    mtask_t **where;
    mtask_t *t = task_by_seq(c, m->seq, &where);
    if (!t) {
        msend_free(m);
        return;
    }
    t->inflight--;
    /* unknown partitions are dropped when their topic is gone (Kafka's
     * markers for deleted topics are dropped too); else retried */
    if (m->nunknown) {
        st_meta_image_t *img = st_controller_image(c->ctl);
        for (int i = 0; i < m->nunknown; i++) {
            const st_meta_topic_t *tt =
                st_image_topic(img, m->unknown[i].topic.p, (size_t)m->unknown[i].topic.len);
            if (!tt || m->unknown[i].partition >= tt->nparts) {
                ST_INFO("txn", "transactional id %.*s: %.*s-%d is gone: no marker there",
                        (int)ST_MIN(t->id.len, 100), t->id.p, (int)m->unknown[i].topic.len,
                        m->unknown[i].topic.p, (int)m->unknown[i].partition);
                m->acked = st_realloc(m->acked, sizeof *m->acked * (size_t)(m->nacked + 1));
                m->acked[m->nacked++] = m->unknown[i];
            }
        }
        st_image_release(img);
    }
    /* copy out before the task's strings are freed */
    for (int i = 0; i < m->nacked; i++) {
        st_txn_tp_t tp = m->acked[i];
        task_drop_part(t, &tp);
    }
    msend_free(m);
    if (t->inflight > 0) return;
    if (!task_live(c, t)) {
        *where = t->next;
        task_free(t);
        return;
    }
    if (t->nparts == 0) {
        *where = t->next;
        ST_DEBUG("txn", "transactional id %.*s: every marker written", (int)ST_MIN(t->id.len, 100),
                 t->id.p);
        st_tstate_markers_done(s, t->id, t->pid, t->epoch);
        task_free(t);
        return;
    }
    t->state = TASK_READY;
    t->next_try = st_mono_ms() + t->backoff_ms;
    t->backoff_ms = ST_MIN(t->backoff_ms * 2, MARKER_BACKOFF_MAX_MS);
}

static int tp_cmp_leader(const void *a, const void *b) {
    const int32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Send what a READY task has left: one request per leader. */
static void task_send(st_txn_coord_t *c, mtask_t *t) {
    int32_t coord_epoch = 0;
    leader_of(c, t->tpart, &coord_epoch);
    st_meta_image_t *img = st_controller_image(c->ctl);
    /* (leader, index) pairs, sorted by leader */
    int32_t(*by)[2] = st_malloc(sizeof *by * (size_t)(t->nparts + 1));
    int n = 0;
    for (int i = 0; i < t->nparts; i++) {
        const st_meta_topic_t *tt =
            st_image_topic(img, t->parts[i].topic.p, (size_t)t->parts[i].topic.len);
        int32_t leader = tt && t->parts[i].partition < tt->nparts
                             ? tt->parts[t->parts[i].partition].leader
                             : -2; /* gone: the leader of nothing answers UNKNOWN */
        if (leader == -2) {
            ST_INFO("txn", "transactional id %.*s: %.*s-%d is gone: no marker there",
                    (int)ST_MIN(t->id.len, 100), t->id.p, (int)t->parts[i].topic.len,
                    t->parts[i].topic.p, (int)t->parts[i].partition);
            free((char *)t->parts[i].topic.p);
            t->parts[i] = t->parts[--t->nparts];
            i--;
            continue;
        }
        by[n][0] = leader;
        by[n][1] = i;
        n++;
    }
    qsort(by, (size_t)n, sizeof *by, tp_cmp_leader);
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && by[j][0] == by[i][0]) j++;
        int32_t leader = by[i][0];
        const st_meta_broker_t *b = st_image_broker(img, leader);
        if (!b || b->fenced) {
            i = j; /* no leader now: retried after the backoff */
            continue;
        }
        msend_t *m = st_calloc(1, sizeof *m);
        m->c = c;
        m->seq = t->seq;
        m->node_id = leader;
        const st_meta_endpoint_t *ep = st_meta_broker_endpoint(b, c->cfg.listener);
        m->host = st_strdup(ep ? ep->host : "");
        m->port = ep ? ep->port : 0;
        st_arena_init(&m->arena, 1024);
        m->sent = st_malloc(sizeof *m->sent * (size_t)(j - i + 1));
        /* one marker; topics grouped (the partitions are not sorted) */
        st_write_txn_marker_t *mk = st_arena_alloc(&m->arena, sizeof *mk);
        st_schema_defaults(&st_write_txn_marker_schema, mk);
        mk->producer_id = t->pid;
        mk->producer_epoch = t->epoch;
        mk->transaction_result = (int8_t)t->commit;
        mk->coordinator_epoch = coord_epoch;
        ST_ARRAY_ALLOC(mk->topics, &m->arena, j - i);
        mk->topics.n = 0;
        for (int k = i; k < j; k++) {
            const st_txn_tp_t *tp = &t->parts[by[k][1]];
            m->sent[m->nsent++] = *tp;
            st_write_txn_markers_topic_t *wt = NULL;
            for (int x = 0; x < mk->topics.n; x++)
                if (tp_same(&(st_txn_tp_t){mk->topics.v[x].name, tp->partition}, tp->topic,
                            tp->partition))
                    wt = &mk->topics.v[x];
            if (!wt) {
                wt = &mk->topics.v[mk->topics.n++];
                st_schema_defaults(&st_write_txn_markers_topic_schema, wt);
                wt->name = tp->topic;
                ST_ARRAY_ALLOC(wt->partition_indexes, &m->arena, j - i);
                wt->partition_indexes.n = 0;
            }
            wt->partition_indexes.v[wt->partition_indexes.n++] = tp->partition;
        }
        m->req.markers.v = mk;
        m->req.markers.n = 1;
        t->inflight++;
        st_loop_post(st_net_loop(c->net, 0), send_on_loop, m);
        i = j;
    }
    free(by);
    st_image_release(img);
    if (t->inflight) {
        t->state = TASK_INFLIGHT;
        t->attempts++;
    } else {
        t->next_try = st_mono_ms() + t->backoff_ms;
        t->backoff_ms = ST_MIN(t->backoff_ms * 2, MARKER_BACKOFF_MAX_MS);
    }
}

/* The marker tasks: durable ones go out, due retries go again.  Returns
 * how soon to look again (ms; -1: nothing waits): often for a Prepare
 * record just written (the producer's next transaction waits for its
 * markers), less for one whose replication is slow. */
static int64_t run_tasks(st_txn_coord_t *c) {
    int64_t waiting = -1;
    int64_t now = st_mono_ms();
    for (mtask_t **pp = &c->tasks; *pp;) {
        mtask_t *t = *pp;
        if (t->state == TASK_WAIT_DURABLE) {
            st_partition_t *p = t->tpart >= 0 && t->tpart < c->nparts ? c->parts[t->tpart].p : NULL;
            st_err_t e = ST_OK;
            if (!p) {
                *pp = t->next; /* unloaded meanwhile */
                task_free(t);
                continue;
            }
            st_log_offsets_t o;
            st_log_offsets(p->log, &o);
            int flushed = !c->cfg.flush_on_ack || o.offline || o.flushed_offset >= t->need_offset;
            if (flushed && st_partition_committed(p, t->need_offset, &e)) {
                t->state = TASK_READY;
                t->next_try = now;
            } else {
                int64_t w = now - t->since < 200 ? 2 : 50;
                waiting = waiting < 0 ? w : ST_MIN(waiting, w);
            }
        }
        if (t->state == TASK_READY && !task_live(c, t)) {
            *pp = t->next;
            task_free(t);
            continue;
        }
        if (t->state == TASK_READY && now >= t->next_try && !closing(c)) {
            task_send(c, t);
            if (t->state == TASK_READY && t->nparts == 0) {
                *pp = t->next; /* every partition was gone */
                st_tstate_markers_done(c->state, t->id, t->pid, t->epoch);
                task_free(t);
                continue;
            }
        }
        if (t->state == TASK_READY) {
            int64_t w = ST_MAX(t->next_try - now, 1);
            waiting = waiting < 0 ? w : ST_MIN(waiting, w);
        }
        pp = &t->next;
    }
    return waiting;
}

/* ---- the thread ----------------------------------------------------------------------- */

void st_txn_coord_when_ended(st_txn_coord_t *c, st_str_t id, int64_t pid, int16_t epoch,
                             int32_t wait_ms, st_txn_job_fn fn, void *arg) {
    ewait_t *w = st_malloc(sizeof *w);
    *w = (ewait_t){c->ewaits, sdup(id), pid, epoch, st_mono_ms() + wait_ms, fn, arg};
    c->ewaits = w;
}

/* Run the held answers whose transaction is no longer Prepare* (or whose
 * wait is over; all of them with force); returns the next deadline, -1
 * when none waits. */
static int64_t run_ewaits(st_txn_coord_t *c, int force) {
    int64_t now = st_mono_ms(), next = -1;
    for (ewait_t **pp = &c->ewaits; *pp;) {
        ewait_t *w = *pp;
        const st_txn_t *t = st_tstate_lookup(c->state, w->id);
        int pending = t && t->producer_id == w->pid && t->producer_epoch == w->epoch &&
                      (t->status == ST_TXN_PREPARE_COMMIT || t->status == ST_TXN_PREPARE_ABORT);
        if (!force && pending && now < w->deadline) {
            next = next < 0 ? w->deadline : ST_MIN(next, w->deadline);
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->fn(c, c->state, w->arg);
        free((char *)w->id.p);
        free(w);
    }
    return next;
}

static void *coord_main(void *arg) {
    st_txn_coord_t *c = arg;
    st_thread_set_name("txn-coord");
    for (int32_t i = 0; i < c->nparts; i++) {
        int32_t epoch = 0;
        st_partition_t *p = led_partition(c, i, &epoch);
        if (p) start_load(c, i, p, epoch);
    }
    c->next_leader_check = st_mono_ms() + 1000;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        job_t *j = c->head;
        if (j) {
            c->head = j->next;
            if (!c->head) c->tail = NULL;
        } else if (c->stopping) {
            break;
        }
        pthread_mutex_unlock(&c->lock);
        if (j) {
            j->fn(c, c->state, j->arg);
            free(j);
        }
        int loading = st_tstate_loading(c->state) && load_some(c);
        follow_leaders(c);
        int64_t next = st_tstate_tick(c->state);
        int64_t tasks = run_tasks(c);
        int64_t held = run_ewaits(c, closing(c));
        pthread_mutex_lock(&c->lock);
        if (c->head || c->stopping || loading) continue;
        int64_t wait = ST_MIN(ST_MAX(next - st_mono_ms(), 0), tasks >= 0 ? tasks : 1000);
        if (held >= 0) wait = ST_MIN(wait, ST_MAX(held - st_mono_ms(), 0));
        if (wait <= 0) continue;
        st_cond_wait_ms(&c->cond, &c->lock, wait);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

st_txn_coord_t *st_txn_coord_new(const st_txn_coord_config_t *cfg, st_replicas_t *rm,
                                 st_controller_t *ctl, st_logmgr_t *logs, st_net_t *net) {
    st_txn_coord_t *c = st_calloc(1, sizeof *c);
    c->cfg = *cfg;
    if (c->cfg.load_buffer_bytes <= 0) c->cfg.load_buffer_bytes = 5 << 20;
    c->rm = rm;
    c->ctl = ctl;
    c->logs = logs;
    c->net = net;
    st_meta_image_t *img = st_controller_image(ctl);
    const st_meta_topic_t *t = st_image_topic(img, ST_TXN_STATE_TOPIC, strlen(ST_TXN_STATE_TOPIC));
    c->nparts = t && t->nparts > 0 ? t->nparts : cfg->state.num_partitions;
    st_image_release(img);
    st_tstate_config_t sc = cfg->state;
    sc.num_partitions = c->nparts;
    c->parts = st_calloc((size_t)c->nparts, sizeof *c->parts);
    st_tstate_ops_t ops = {op_mono, op_wall, op_append, op_ensure, op_send_markers, op_new_pid, c};
    c->state = st_tstate_new(&sc, &ops);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    return c;
}

void st_txn_coord_start(st_txn_coord_t *c) {
    pthread_create(&c->thread, NULL, coord_main, c);
    c->started = 1;
}

/* ---- KIP-890: verification for this broker's partitions ---------------------------- */

#define VERIFY_VERSION 4
#define VERIFY_TIMEOUT_MS 10000

typedef struct vreq {
    st_txn_coord_t *c;
    st_str_t id; /* owned */
    int64_t pid;
    int16_t epoch;
    st_txn_tp_t *parts; /* topics owned */
    int n;
    st_err_t *errs;
    st_txn_verify_cb cb;
    void *arg;
    /* to another broker: the request, built in the arena */
    int32_t node;
    st_arena_t arena;
    st_add_partitions_to_txn_req_t req;
    char *host;
    int port;
} vreq_t;

/* Kafka's answers to a producer for what the verification met
 * (AddPartitionsToTxnManager, ReplicaManager): a fenced epoch is
 * INVALID_PRODUCER_EPOCH, a coordinator that cannot say now is
 * NOT_ENOUGH_REPLICAS (retriable: the producer sends again), an
 * authorization failure INVALID_TXN_STATE. */
static st_err_t for_producer(st_err_t e) {
    switch (e) {
    case ST_E_PRODUCER_FENCED: return ST_E_INVALID_PRODUCER_EPOCH;
    case ST_E_CONCURRENT_TRANSACTIONS:
    case ST_E_COORDINATOR_LOAD_IN_PROGRESS:
    case ST_E_COORDINATOR_NOT_AVAILABLE:
    case ST_E_NOT_COORDINATOR: return ST_E_NOT_ENOUGH_REPLICAS;
    case ST_E_CLUSTER_AUTHORIZATION_FAILED: return ST_E_INVALID_TXN_STATE;
    default: return e;
    }
}

static void vreq_done(vreq_t *v) {
    for (int i = 0; i < v->n; i++) v->errs[i] = for_producer(v->errs[i]);
    v->cb(v->arg, v->errs);
    for (int i = 0; i < v->n; i++) free((char *)v->parts[i].topic.p);
    free(v->parts);
    free(v->errs);
    free((char *)v->id.p);
    free(v->host);
    st_arena_fini(&v->arena);
    free(v);
}

static void vreq_fail(vreq_t *v, st_err_t e) {
    for (int i = 0; i < v->n; i++) v->errs[i] = e;
    vreq_done(v);
}

/* Loop 0. */
static void on_verified(st_netclient_t *nc, const st_netclient_resp_t *resp, void *arg) {
    (void)nc;
    vreq_t *v = arg;
    if (resp->err) {
        ST_LOG_RATELIMITED(ST_LOG_INFO, "txn", 5000,
                           "verification of transactional id %.*s at node %d: %s%s%s",
                           (int)ST_MIN(v->id.len, 100), v->id.p, (int)v->node,
                           st_err_msg(resp->err), resp->why ? ": " : "",
                           resp->why ? resp->why : "");
        vreq_fail(v, ST_E_NETWORK_EXCEPTION);
        return;
    }
    st_arena_t a;
    st_arena_init(&a, 1024);
    st_add_partitions_to_txn_resp_t *r;
    st_err_t e = st_netclient_decode(resp, &a, (void **)&r);
    if (!e && r->error_code) e = st_err_from_wire(r->error_code);
    if (e) {
        st_arena_fini(&a);
        vreq_fail(v, e);
        return;
    }
    /* a partition the answer leaves out was not verified */
    for (int i = 0; i < v->n; i++) v->errs[i] = ST_E_NETWORK_EXCEPTION;
    for (int i = 0; i < r->results_by_transaction.n; i++) {
        st_add_partitions_to_txn_result_t *tr = &r->results_by_transaction.v[i];
        if (tr->transactional_id.len != v->id.len ||
            memcmp(tr->transactional_id.p, v->id.p, (size_t)v->id.len) != 0)
            continue;
        for (int j = 0; j < tr->topic_results.n; j++) {
            st_add_partitions_to_txn_topic_result_t *rt = &tr->topic_results.v[j];
            for (int k = 0; k < rt->results_by_partition.n; k++)
                for (int x = 0; x < v->n; x++)
                    if (tp_same(&v->parts[x], rt->name, rt->results_by_partition.v[k].partition_index))
                        v->errs[x] =
                            st_err_from_wire(rt->results_by_partition.v[k].partition_error_code);
        }
    }
    st_arena_fini(&a);
    vreq_done(v);
}

/* Loop 0. */
static void verify_send(void *arg) {
    vreq_t *v = arg;
    st_txn_coord_t *c = v->c;
    if (closing(c)) {
        vreq_fail(v, ST_E_NOT_COORDINATOR);
        return;
    }
    client_t *k = client_for(c, v->node, v->host, v->port);
    st_err_t e = k ? st_netclient_send(k->nc, ST_API_ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, &v->req,
                                       VERIFY_TIMEOUT_MS, on_verified, v)
                   : ST_E_NETWORK_EXCEPTION;
    if (e) vreq_fail(v, ST_E_NETWORK_EXCEPTION);
}

/* The request to the coordinator at node: one transaction, verify only,
 * topics grouped. */
static void verify_build(vreq_t *v) {
    st_schema_defaults(&st_add_partitions_to_txn_req_schema, &v->req);
    st_add_partitions_to_txn_txn_t *t = st_arena_alloc(&v->arena, sizeof *t);
    st_schema_defaults(&st_add_partitions_to_txn_txn_schema, t);
    t->transactional_id = v->id;
    t->producer_id = v->pid;
    t->producer_epoch = v->epoch;
    t->verify_only = 1;
    ST_ARRAY_ALLOC(t->topics, &v->arena, v->n);
    t->topics.n = 0;
    for (int i = 0; i < v->n; i++) {
        st_add_partitions_to_txn_topic_t *at = NULL;
        for (int x = 0; x < t->topics.n && !at; x++)
            if (tp_same(&(st_txn_tp_t){t->topics.v[x].name, v->parts[i].partition},
                        v->parts[i].topic, v->parts[i].partition))
                at = &t->topics.v[x];
        if (!at) {
            at = &t->topics.v[t->topics.n++];
            st_schema_defaults(&st_add_partitions_to_txn_topic_schema, at);
            at->name = v->parts[i].topic;
            at->partitions.v = st_arena_alloc(&v->arena, sizeof(int32_t) * (size_t)v->n);
            at->partitions.n = 0;
        }
        at->partitions.v[at->partitions.n++] = v->parts[i].partition;
    }
    v->req.transactions.v = t;
    v->req.transactions.n = 1;
}

static void verify_job(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    vreq_t *v = arg;
    int32_t tp = st_tstate_partition_of(s, v->id);
    st_tpart_state_t ps = st_tstate_partition(s, tp);
    int32_t leader = ps == ST_TPART_LOADED || ps == ST_TPART_LOADING ? c->cfg.node_id
                                                                     : leader_of(c, tp, NULL);
    if (leader == c->cfg.node_id || leader < 0) {
        /* ours (or nobody's: the state says NOT_COORDINATOR) */
        st_tstate_verify(s, v->id, v->pid, v->epoch, v->parts, v->n, v->errs);
        vreq_done(v);
        return;
    }
    st_meta_image_t *img = st_controller_image(c->ctl);
    const st_meta_broker_t *b = st_image_broker(img, leader);
    const st_meta_endpoint_t *ep = b && !b->fenced ? st_meta_broker_endpoint(b, c->cfg.listener) : NULL;
    if (ep) {
        v->host = st_strdup(ep->host);
        v->port = ep->port;
    }
    if (img) st_image_release(img);
    if (!v->host) {
        vreq_fail(v, ST_E_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    v->node = leader;
    verify_build(v);
    st_loop_post(st_net_loop(c->net, 0), verify_send, v);
}

void st_txn_coord_verify(st_txn_coord_t *c, st_str_t id, int64_t pid, int16_t epoch,
                         const st_txn_tp_t *parts, int n, st_txn_verify_cb cb, void *arg) {
    vreq_t *v = st_calloc(1, sizeof *v);
    v->c = c;
    v->id = sdup(id);
    v->pid = pid;
    v->epoch = epoch;
    v->n = n;
    v->parts = st_malloc(sizeof *v->parts * (size_t)(n + 1));
    v->errs = st_calloc((size_t)n + 1, sizeof *v->errs);
    for (int i = 0; i < n; i++) v->parts[i] = (st_txn_tp_t){sdup(parts[i].topic), parts[i].partition};
    v->cb = cb;
    v->arg = arg;
    st_arena_init(&v->arena, 64);
    st_txn_coord_submit(c, verify_job, v);
}

void st_txn_coord_submit(st_txn_coord_t *c, st_txn_job_fn fn, void *arg) {
    job_t *j = st_malloc(sizeof *j);
    *j = (job_t){fn, arg, NULL};
    pthread_mutex_lock(&c->lock);
    if (c->tail) c->tail->next = j;
    else c->head = j;
    c->tail = j;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

typedef struct close_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
} close_wait_t;

static void close_job(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    close_wait_t *w = arg;
    st_tstate_close(s);
    __atomic_store_n(&c->closing, 1, __ATOMIC_RELEASE);
    run_ewaits(c, 1); /* answered now, before the loops stop */
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void st_txn_coord_close_requests(st_txn_coord_t *c) {
    if (!c || !c->started) return;
    close_wait_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    st_txn_coord_submit(c, close_job, &w);
    pthread_mutex_lock(&w.lock);
    while (!w.done) pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
}

void st_txn_coord_destroy(st_txn_coord_t *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (c->started) pthread_join(c->thread, NULL);
    __atomic_store_n(&c->closing, 1, __ATOMIC_RELEASE);
    /* the loops are stopped: the clients go here (their callbacks free
     * what they carried), then jobs queued meanwhile */
    for (int i = 0; i < c->nclients; i++) {
        st_netclient_destroy(c->clients[i].nc);
        free(c->clients[i].host);
    }
    free(c->clients);
    while (c->head) {
        job_t *j = c->head;
        c->head = j->next;
        j->fn(c, c->state, j->arg);
        free(j);
    }
    run_ewaits(c, 1);
    while (c->tasks) {
        mtask_t *t = c->tasks;
        c->tasks = t->next;
        task_free(t);
    }
    st_tstate_destroy(c->state);
    for (int32_t i = 0; i < c->nparts; i++) st_partition_release(c->parts[i].p);
    free(c->parts);
    free(c->buf);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

int64_t st_txn_coord_written_end(st_txn_coord_t *c, int32_t partition) {
    if (partition < 0 || partition >= c->nparts) return 0;
    return c->parts[partition].written_end;
}

int32_t st_txn_coord_num_partitions(st_txn_coord_t *c) { return c->nparts; }

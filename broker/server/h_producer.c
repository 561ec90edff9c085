/*
 * h_producer.c - producer ids: InitProducerId for idempotent producers,
 * the broker's block of ids, AllocateProducerIds on the active controller,
 * and DescribeProducers (a partition leader's producer state).
 *
 * Ids come in blocks of ST_PRODUCER_ID_BLOCK from the active controller,
 * which commits each block to the metadata log (a ProducerIds record), so
 * no id is given twice across brokers, elections and restarts (KIP-730).
 * A broker asks for its next block when 90% of the current one is used
 * (Kafka's RPCProducerIdManager), so InitProducerId seldom waits; when it
 * must (the first block, or a burst that used the prefetched one too), the
 * request waits in the pool's queue and is answered on its loop when the
 * block comes.  A block that cannot be had is COORDINATOR_LOAD_IN_PROGRESS,
 * which clients retry, as Kafka answers it.
 *
 * An idempotent producer (no transactional id) always gets a new id at
 * epoch 0, whatever id and epoch it sends (KIP-360: that is how Kafka's
 * coordinator answers a producer bumping its epoch without a transactional
 * id).  With a transactional id the request is the transaction
 * coordinator's (h_txn.c), which takes its ids from the same pool.
 *
 * Threads: the pool is shared by every loop and by the controller thread
 * (which runs the block callback); its mutex guards it.  Requests are only
 * ever answered on their own loop.
 */
#include "server.h"

#include <stdlib.h>

/* a queued InitProducerId (its loop's, until answered) */
typedef struct pid_waiter {
    struct pid_waiter *next;
    st_request_t *req;
    int64_t pid; /* set when a block came */
    st_err_t e;
} pid_waiter_t;

struct st_pid_pool {
    pthread_mutex_t lock;
    st_controller_t *ctl;
    int64_t next, end;         /* the block in use: [next, end) */
    int64_t block_start;
    int64_t pre_start, pre_end; /* the block asked for ahead; pre_end 0: none */
    int asking;                 /* a request for a block is out */
    pid_waiter_t *head, *tail;
};

st_pid_pool_t *st_pid_pool_new(st_controller_t *ctl) {
    st_pid_pool_t *p = st_calloc(1, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    p->ctl = ctl;
    return p;
}

void st_pid_pool_free(st_pid_pool_t *p) {
    if (!p) return;
    /* waiters left are answered by nobody: their loops are gone */
    for (pid_waiter_t *w = p->head, *n; w; w = n) {
        n = w->next;
        free(w);
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* The next id, or -1 when none is at hand.  Lock held. */
static int64_t take_locked(st_pid_pool_t *p) {
    if (p->next >= p->end && p->pre_end > 0) {
        p->next = p->block_start = p->pre_start;
        p->end = p->pre_end;
        p->pre_end = 0;
    }
    if (p->next >= p->end) return -1;
    return p->next++;
}

/* Whether a block should be asked for now.  Lock held. */
static int want_block_locked(const st_pid_pool_t *p) {
    if (p->asking || p->pre_end > 0) return 0;
    if (p->next >= p->end) return 1;
    return (p->next - p->block_start) * 10 >= (p->end - p->block_start) * 9;
}

static void ask_block(st_pid_pool_t *p);

static void answer_waiter(void *arg) {
    pid_waiter_t *w = arg;
    st_init_producer_id_resp_t r;
    st_schema_defaults(&st_init_producer_id_resp_schema, &r);
    r.error_code = st_err_wire(w->e);
    r.producer_id = w->e ? -1 : w->pid;
    r.producer_epoch = w->e ? -1 : 0;
    if (!w->e)
        ST_DEBUG("producer", "producer id %lld to %s", (long long)w->pid,
                 st_request_peer(w->req));
    st_request_respond(w->req, &r);
    free(w);
}

static void on_block(void *arg, st_err_t e, int64_t start, int32_t len) {
    st_pid_pool_t *p = arg;
    pid_waiter_t *done = NULL, **tail = &done;
    pthread_mutex_lock(&p->lock);
    p->asking = 0;
    if (!e) {
        p->pre_start = start;
        p->pre_end = start + len;
    } else {
        ST_LOG_RATELIMITED(ST_LOG_WARN, "producer", 5000,
                           "no block of producer ids from the active controller: %s",
                           st_err_msg(e));
    }
    /* the queue, in arrival order: ids while they last */
    while (p->head) {
        pid_waiter_t *w = p->head;
        int64_t id = take_locked(p);
        if (id < 0 && !e) break; /* this block is used up: the next one serves the rest */
        p->head = w->next;
        w->next = NULL;
        w->pid = id;
        w->e = id < 0 ? ST_E_COORDINATOR_LOAD_IN_PROGRESS : ST_OK;
        *tail = w;
        tail = &w->next;
    }
    if (!p->head) p->tail = NULL;
    /* more waiters than ids: the next block (a failed ask is not retried
     * here: the next InitProducerId asks again) */
    int again = !e && p->head && want_block_locked(p);
    pthread_mutex_unlock(&p->lock);
    for (pid_waiter_t *w = done, *n; w; w = n) {
        n = w->next;
        st_loop_post(w->req->loop, answer_waiter, w);
    }
    if (again) ask_block(p);
}

static void ask_block(st_pid_pool_t *p) {
    pthread_mutex_lock(&p->lock);
    int go = !p->asking;
    p->asking = 1;
    pthread_mutex_unlock(&p->lock);
    if (go) st_controller_send_allocate_producer_ids(p->ctl, on_block, p);
}

int64_t st_pid_pool_try_take(st_pid_pool_t *p) {
    pthread_mutex_lock(&p->lock);
    int64_t id = p->head ? -1 : take_locked(p); /* none while requests wait: order */
    int ask = want_block_locked(p);
    pthread_mutex_unlock(&p->lock);
    if (ask) ask_block(p);
    return id;
}

void st_handle_init_producer_id(st_server_t *srv, st_request_t *req) {
    st_init_producer_id_req_t *q = req->body;
    st_init_producer_id_resp_t r;
    st_schema_defaults(&st_init_producer_id_resp_schema, &r);
    r.producer_epoch = -1;
    if (q->transactional_id.len >= 0) {
        /* Kafka: an empty transactional id is INVALID_REQUEST; any other
         * belongs to the transaction coordinator of its __transaction_state
         * partition */
        st_handle_init_producer_id_txn(srv, req);
        return;
    }
    /* an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on
     * some topic (KIP-679) */
    if (!st_authorized_cluster(srv, req, ST_ACL_OP_IDEMPOTENT_WRITE) &&
        !st_authorized_any(srv, req, ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC)) {
        r.error_code = st_err_wire(ST_E_CLUSTER_AUTHORIZATION_FAILED);
        st_request_respond(req, &r);
        return;
    }
    st_pid_pool_t *p = srv->pids;
    pthread_mutex_lock(&p->lock);
    int64_t id = p->head ? -1 : take_locked(p); /* none while others wait: order */
    int ask = want_block_locked(p);
    if (id < 0) {
        pid_waiter_t *w = st_calloc(1, sizeof *w);
        w->req = req;
        if (p->tail) p->tail->next = w;
        else p->head = w;
        p->tail = w;
    }
    pthread_mutex_unlock(&p->lock);
    if (ask) ask_block(p);
    if (id < 0) return; /* answered when the block comes */
    r.producer_id = id;
    r.producer_epoch = 0;
    ST_DEBUG("producer", "producer id %lld to %s", (long long)id, st_request_peer(req));
    st_request_respond(req, &r);
}

/* ---- AllocateProducerIds (on the active controller) ------------------------------ */

typedef struct pids_ctx {
    const st_allocate_producer_ids_req_t *q;
    st_allocate_producer_ids_resp_t r;
} pids_ctx_t;

static void pids_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    pids_ctx_t *x = arg;
    st_controller_allocate_producer_ids(ctl, x->q, &x->r);
}

static void pids_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    pids_ctx_t *x = arg;
    st_request_respond(req, &x->r);
    free(x);
}

void st_handle_allocate_producer_ids(st_server_t *srv, st_request_t *req) {
    if (st_controller_forward(srv->ctl, req)) return;
    pids_ctx_t *x = st_calloc(1, sizeof *x);
    x->q = req->body;
    st_server_via_controller(srv, req, pids_work, pids_done, x);
}

/* ---- produce: ids that cannot have been issued ----------------------------------- */

int st_pid_never_issued(st_server_t *srv, int64_t pid) {
    if (pid < 0) return 0;
    st_meta_image_t *img = st_controller_image(srv->ctl);
    int64_t issued = img ? img->next_producer_id : 0;
    st_image_release(img);
    /* This broker's image may be a moment behind the block another broker
     * was just given and handed out from: only an id further past the
     * blocks it knows than any burst of allocations could reach is taken
     * as never issued. */
    return pid >= issued + ST_PID_ISSUED_SLACK * (int64_t)ST_PRODUCER_ID_BLOCK;
}

/* ---- DescribeProducers (KIP-664) ------------------------------------------------- */

/* One partition's answer: its leader's producer state. */
static void describe_partition(st_server_t *srv, st_request_t *req, st_str_t topic, int32_t index,
                               st_describe_producers_resp_part_t *out) {
    st_schema_defaults(&st_describe_producers_resp_part_schema, out);
    out->partition_index = index;
    st_err_t e = ST_OK;
    st_partition_t *p = NULL;
    if (!st_topic_allowed(srv, req, ST_ACL_OP_READ, topic)) /* Kafka asks READ here */
        e = ST_E_TOPIC_AUTHORIZATION_FAILED;
    else
        p = st_replicas_lookup_leader(srv->rm, topic.p, (size_t)ST_MAX(topic.len, 0), index, &e);
    if (e) {
        out->error_code = st_err_wire(e);
        out->error_message = st_str(st_err_msg(e));
        return;
    }
    /* the count may grow between the two calls: what fits is answered */
    int n = st_log_producer_count(p->log);
    st_log_producer_t *v = st_malloc(sizeof *v * (size_t)(n + 1));
    n = ST_MIN(n, st_log_producers(p->log, v, n));
    ST_ARRAY_ALLOC(out->active_producers, &req->arena, n);
    for (int i = 0; i < n; i++) {
        st_producer_state_t *s = &out->active_producers.v[i];
        s->producer_id = v[i].producer_id;
        s->producer_epoch = v[i].producer_epoch;
        s->last_sequence = v[i].last_sequence;
        s->last_timestamp = v[i].last_timestamp;
        s->coordinator_epoch = v[i].coordinator_epoch;
        s->current_txn_start_offset = v[i].current_txn_start_offset;
    }
    free(v);
    st_partition_release(p);
}

void st_handle_describe_producers(st_server_t *srv, st_request_t *req) {
    st_describe_producers_req_t *q = req->body;
    st_describe_producers_resp_t r;
    st_schema_defaults(&st_describe_producers_resp_schema, &r);
    ST_ARRAY_ALLOC(r.topics, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        st_describe_producers_req_topic_t *qt = &q->topics.v[i];
        st_describe_producers_resp_topic_t *rt = &r.topics.v[i];
        st_schema_defaults(&st_describe_producers_resp_topic_schema, rt);
        rt->name = qt->name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, qt->partition_indexes.n);
        for (int j = 0; j < qt->partition_indexes.n; j++)
            describe_partition(srv, req, qt->name, qt->partition_indexes.v[j], &rt->partitions.v[j]);
    }
    st_request_respond(req, &r);
}

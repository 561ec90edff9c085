/*
 * h_txn.c - the transaction coordinator's APIs: InitProducerId with a
 * transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
 * DescribeTransactions, ListTransactions; __transaction_state as this
 * broker creates it; the coordinator's configuration.
 *
 * A request's life (as h_group.c's):
 *
 *   loop thread         decode, check what needs only metadata (the topics
 *                       of AddPartitionsToTxn), copy the request's strings
 *                       into its arena, hand a job to the coordinator
 *   coordinator thread  run the state machine (broker/txn), build the
 *                       response in the request's arena, post it back
 *   loop thread         wait, when the coordinator wrote for the id, until
 *                       __transaction_state is flushed that far
 *                       (log.flush.on.ack) and its high watermark passed it
 *                       (every in-sync replica has it); respond
 *
 * PRODUCER_FENCED is new in InitProducerId v4 and in v2 of the others
 * (KIP-588): older versions get INVALID_PRODUCER_EPOCH, as Kafka answers.
 */
#include "group.h"
#include "server.h"
#include "txn.h"

#include <stdlib.h>

#define DURABLE_WAIT_MS 30000

/* A partition of __transaction_state the answer waits for. */
typedef struct twait {
    int32_t partition;
    int64_t offset;
    st_partition_t *part;
} twait_t;

typedef struct top {
    st_delayed_t d;
    st_server_t *srv;
    st_request_t *req;
    void *resp;
    void *params;
    twait_t *w; /* one per partition written (AddPartitionsToTxn v4+: several) */
    int nw;
    st_err_t lost; /* a partition waited for lost its leadership, disk or ISR */
} top_t;

static st_str_t acopy(st_request_t *req, st_str_t s) {
    if (s.len < 0) return ST_STR_NULL;
    return (st_str_t){st_arena_strndup(&req->arena, s.len ? s.p : "", (size_t)s.len), s.len};
}

static void *resp_new(st_request_t *req, const st_schema_t *s) {
    void *r = st_arena_alloc(&req->arena, s->size);
    st_schema_defaults(s, r);
    return r;
}

static top_t *top_new(st_server_t *srv, st_request_t *req) {
    top_t *op = st_calloc(1, sizeof *op);
    op->srv = srv;
    op->req = req;
    return op;
}

static void top_free(top_t *op) {
    for (int i = 0; i < op->nw; i++) st_partition_release(op->w[i].part);
    free(op->w);
    free(op);
}

/* The answer reports a write to the id's partition: it waits for it.
 * Coordinator thread. */
static void top_wait(top_t *op, st_tstate_t *s, st_str_t id) {
    if (id.len <= 0) return;
    int32_t p = st_tstate_partition_of(s, id);
    int64_t end = st_txn_coord_written_end(op->srv->txns, p);
    if (end <= 0) return;
    for (int i = 0; i < op->nw; i++)
        if (op->w[i].partition == p) {
            op->w[i].offset = ST_MAX(op->w[i].offset, end);
            return;
        }
    op->w = st_realloc(op->w, sizeof *op->w * (size_t)(op->nw + 1));
    op->w[op->nw++] = (twait_t){p, end, NULL};
}

static int durable_try(st_delayed_t *d) {
    top_t *op = (top_t *)d;
    for (int i = 0; i < op->nw; i++) {
        twait_t *w = &op->w[i];
        if (!w->part) continue;
        st_partition_watch(w->part, &op->d, st_loop_index(op->req->loop));
        st_err_t e;
        if (!st_partition_durable(w->part, w->offset, op->srv->cfg.log_flush_on_ack, &e)) return 0;
        if (e) op->lost = e;
        st_partition_release(w->part);
        w->part = NULL;
    }
    /* lost the partition (or its disk) before the write was everywhere:
     * as h_group.c answers */
    if (op->lost) st_schema_set_errors(op->req->api->resp, op->resp, st_coord_append_error(op->lost));
    st_request_respond(op->req, op->resp);
    return 1;
}

static void durable_expire(st_delayed_t *d) {
    top_t *op = (top_t *)d;
    ST_LOG_RATELIMITED(ST_LOG_WARN, "txn", 5000,
                       "%s answered before __transaction_state was replicated (%d ms)",
                       op->req->api->name, DURABLE_WAIT_MS);
    st_request_respond(op->req, op->resp);
}

static void durable_destroy(st_delayed_t *d) { top_free((top_t *)d); }

static void top_on_loop(void *arg) {
    top_t *op = arg;
    int any = 0;
    for (int i = 0; i < op->nw; i++) {
        op->w[i].part = st_replicas_lookup(op->srv->rm, ST_TXN_STATE_TOPIC,
                                           strlen(ST_TXN_STATE_TOPIC), op->w[i].partition, NULL);
        any |= op->w[i].part != NULL;
    }
    if (!any) {
        st_request_respond(op->req, op->resp);
        top_free(op);
        return;
    }
    op->d.deadline_ms = st_mono_ms() + DURABLE_WAIT_MS;
    op->d.try_complete = durable_try;
    op->d.expire = durable_expire;
    op->d.destroy = durable_destroy;
    st_purgatory_add(st_req_purgatory(op->req), &op->d);
}

/* Coordinator thread; op is not touched afterwards. */
static void top_finish(top_t *op, void *resp) {
    op->resp = resp;
    st_loop_post(op->req->loop, top_on_loop, op);
}

/* KIP-588: PRODUCER_FENCED for versions that know it. */
static int16_t fenced_wire(st_err_t e, int knows_fenced) {
    if (e == ST_E_PRODUCER_FENCED && !knows_fenced) e = ST_E_INVALID_PRODUCER_EPOCH;
    return st_err_wire(e);
}

/* ---- __transaction_state ------------------------------------------------------- */

void st_server_txn_topic_spec(st_server_t *srv, st_new_topic_t *t, st_txn_topic_configs_t *cf) {
    const st_broker_config_t *b = &srv->cfg;
    st_meta_image_t *img = st_controller_image(srv->ctl);
    int live = 0;
    for (int i = 0; img && i < img->nbrokers; i++) live += !img->brokers[i].fenced;
    if (img) st_image_release(img);
    int rf = ST_MAX(1, ST_MIN(b->transaction_state_log_replication_factor, live));
    snprintf(cf->seg, sizeof cf->seg, "%d", (int)b->transaction_state_log_segment_bytes);
    snprintf(cf->isr, sizeof cf->isr, "%d", ST_MIN(b->transaction_state_log_min_isr, rf));
    cf->kv[0] = (st_kv_t){"cleanup.policy", "compact"};
    cf->kv[1] = (st_kv_t){"segment.bytes", cf->seg};
    cf->kv[2] = (st_kv_t){"min.insync.replicas", cf->isr};
    memset(t, 0, sizeof *t);
    t->name = ST_TXN_STATE_TOPIC;
    t->name_len = strlen(ST_TXN_STATE_TOPIC);
    t->num_partitions = st_txn_coord_num_partitions(srv->txns);
    t->replication_factor = (int16_t)rf;
    t->configs = cf->kv;
    t->nconfigs = 3;
}

void st_server_create_txn_topic(st_server_t *srv, st_controller_t *ctl) {
    st_txn_topic_configs_t cf;
    st_new_topic_t t;
    st_server_txn_topic_spec(srv, &t, &cf);
    st_op_result_t res;
    st_controller_create_topic(ctl, &t, 0, &res);
    if (res.error && res.error != ST_E_TOPIC_ALREADY_EXISTS)
        ST_ERROR("txn", "cannot create %s: %s", ST_TXN_STATE_TOPIC, res.message);
    else if (!res.error)
        ST_INFO("txn", "created %s with %d partitions", ST_TXN_STATE_TOPIC, (int)t.num_partitions);
}

int32_t st_server_txn_partition_for(st_server_t *srv, st_str_t id) {
    return st_group_partition_for(id.len > 0 ? id.p : "", (size_t)ST_MAX(id.len, 0),
                                  st_txn_coord_num_partitions(srv->txns));
}

static int64_t take_pid(void *arg) { return st_pid_pool_try_take(arg); }

st_txn_coord_t *st_server_txns_new(st_server_t *srv) {
    const st_broker_config_t *b = &srv->cfg;
    st_txn_coord_config_t c = {
        .state =
            {
                .num_partitions = b->transaction_state_log_num_partitions,
                .max_timeout_ms = b->transaction_max_timeout_ms,
                .id_expiration_ms = b->transactional_id_expiration_ms,
                .abort_interval_ms = b->transaction_abort_timed_out_transaction_cleanup_interval_ms,
            },
        .node_id = b->node_id,
        .listener = b->inter_broker_listener_name,
        .sec = &srv->ib_sec,
        .load_buffer_bytes = b->offsets_load_buffer_size,
        .flush_on_ack = b->log_flush_on_ack,
        .new_producer_id = take_pid,
        .pid_arg = srv->pids,
    };
    return st_txn_coord_new(&c, srv->rm, srv->ctl, srv->logs, srv->net);
}

/* ---- InitProducerId (with a transactional id) ------------------------------------ */

typedef struct init_params {
    st_str_t id;
    int32_t timeout_ms;
    int64_t pid;
    int16_t epoch;
    int knows_fenced;
} init_params_t;

static void init_job(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    (void)c;
    top_t *op = arg;
    init_params_t *p = op->params;
    st_init_producer_id_resp_t *r = resp_new(op->req, &st_init_producer_id_resp_schema);
    int64_t pid = -1;
    int16_t epoch = -1;
    st_err_t e = st_tstate_init_pid(s, p->id, p->timeout_ms, p->pid, p->epoch, &pid, &epoch);
    r->error_code = fenced_wire(e, p->knows_fenced);
    r->producer_id = e ? -1 : pid;
    r->producer_epoch = e ? -1 : epoch;
    /* CONCURRENT_TRANSACTIONS after a fence wrote the abort: durable too */
    if (!e || e == ST_E_CONCURRENT_TRANSACTIONS) top_wait(op, s, p->id);
    ST_DEBUG("txn", "InitProducerId %.*s: %s, producer %lld epoch %d", (int)ST_MIN(p->id.len, 100),
             p->id.p, st_err_name(e), (long long)pid, (int)epoch);
    top_finish(op, r);
}

void st_handle_init_producer_id_txn(st_server_t *srv, st_request_t *req) {
    st_init_producer_id_req_t *q = req->body;
    /* Kafka: both the id and the epoch, or neither (v3+) */
    if ((q->producer_id == -1) != (q->producer_epoch == -1) || q->transactional_id.len == 0) {
        st_init_producer_id_resp_t r;
        st_schema_defaults(&st_init_producer_id_resp_schema, &r);
        r.error_code = st_err_wire(ST_E_INVALID_REQUEST);
        r.producer_epoch = -1;
        st_request_respond(req, &r);
        return;
    }
    if (!st_authorized_str(srv, req, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID,
                           q->transactional_id)) {
        st_server_refuse(req, ST_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        return;
    }
    top_t *op = top_new(srv, req);
    init_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    p->id = acopy(req, q->transactional_id);
    p->timeout_ms = q->transaction_timeout_ms;
    p->pid = q->producer_id;
    p->epoch = q->producer_epoch;
    p->knows_fenced = req->hdr.api_version >= 4;
    op->params = p;
    st_txn_coord_submit(srv->txns, init_job, op);
}

/* ---- AddPartitionsToTxn --------------------------------------------------------------- */

typedef struct add_params {
    st_str_t id;
    int64_t pid;
    int16_t epoch;
    st_txn_tp_t *parts; /* every one asked for, in request order */
    st_err_t *errs;     /* refused before the coordinator (unknown topic), else OK */
    int n, nbad;
    int knows_fenced;
} add_params_t;

/* The results by topic of p's partitions (request order): each its own
 * error (an unknown topic), else its verdict (verdict NULL: all). */
static void topic_results(st_request_t *req, const st_add_partitions_to_txn_topic_t *topics,
                          int ntopics, const add_params_t *p, const st_err_t *verdict, st_err_t all,
                          st_add_partitions_to_txn_topic_result_t *out) {
    int k = 0;
    for (int i = 0; i < ntopics; i++) {
        st_add_partitions_to_txn_topic_result_t *rt = &out[i];
        st_schema_defaults(&st_add_partitions_to_txn_topic_result_schema, rt);
        rt->name = topics[i].name;
        ST_ARRAY_ALLOC(rt->results_by_partition, &req->arena, topics[i].partitions.n);
        for (int j = 0; j < topics[i].partitions.n; j++, k++) {
            st_err_t e = p->errs[k] ? p->errs[k] : verdict ? verdict[k] : all;
            rt->results_by_partition.v[j].partition_index = topics[i].partitions.v[j];
            rt->results_by_partition.v[j].partition_error_code = fenced_wire(e, p->knows_fenced);
        }
    }
}

static void add_partitions_job(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    (void)c;
    top_t *op = arg;
    add_params_t *p = op->params;
    st_request_t *req = op->req;
    st_add_partitions_to_txn_req_t *q = req->body;
    st_err_t e;
    if (p->nbad) {
        /* Kafka: unknown partitions get their error, the others
         * OPERATION_NOT_ATTEMPTED, and nothing is added */
        e = ST_E_OPERATION_NOT_ATTEMPTED;
    } else {
        e = st_tstate_add_partitions(s, p->id, p->pid, p->epoch, p->parts, p->n);
        if (!e) top_wait(op, s, p->id);
    }
    st_add_partitions_to_txn_resp_t *r = resp_new(req, &st_add_partitions_to_txn_resp_schema);
    ST_ARRAY_ALLOC(r->results_by_topic, &req->arena, q->topics.n);
    topic_results(req, q->topics.v, q->topics.n, p, NULL, e, r->results_by_topic.v);
    top_finish(op, r);
}

/* Whether a requested name could be a topic's (legal characters, length). */
static int topic_name_ok(st_str_t n) {
    char why[8];
    return n.len > 0 && st_topic_name_valid(n.p, (size_t)n.len, why, sizeof why);
}

/* The producer's part of an AddPartitionsToTxn / AddOffsetsToTxn (v2+
 * knows PRODUCER_FENCED), in the request's arena. */
static add_params_t *add_params_new(st_request_t *req, st_str_t id, int64_t pid, int16_t epoch) {
    add_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    memset(p, 0, sizeof *p);
    p->id = acopy(req, id);
    p->pid = pid;
    p->epoch = epoch;
    p->knows_fenced = req->hdr.api_version >= 2;
    return p;
}

/* p's partitions: the topics' (request order), copied into the request's
 * arena; those the metadata does not know are UNKNOWN_TOPIC_OR_PARTITION
 * (counted in nbad), the others OK. */
static void take_parts(st_server_t *srv, st_request_t *req, st_meta_image_t *img,
                       const st_add_partitions_to_txn_topic_t *topics, int ntopics, add_params_t *p) {
    /* the authorizer first: WRITE on the transactional id, then on each
     * topic; a refused one is an error like an unknown one (nothing is
     * added, the others answer OPERATION_NOT_ATTEMPTED) */
    int id_denied = !st_authorized_str(srv, req, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID, p->id);
    for (int i = 0; i < ntopics; i++) p->n += ST_MAX(topics[i].partitions.n, 0);
    p->parts = st_arena_alloc(&req->arena, sizeof *p->parts * (size_t)(p->n + 1));
    p->errs = st_arena_alloc(&req->arena, sizeof *p->errs * (size_t)(p->n + 1));
    int k = 0;
    for (int i = 0; i < ntopics; i++) {
        const st_add_partitions_to_txn_topic_t *qt = &topics[i];
        const st_meta_topic_t *t =
            topic_name_ok(qt->name) ? st_image_topic(img, qt->name.p, (size_t)qt->name.len) : NULL;
        st_str_t topic = acopy(req, qt->name);
        int topic_denied = !id_denied && !st_topic_allowed(srv, req, ST_ACL_OP_WRITE, qt->name);
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            int32_t part = qt->partitions.v[j];
            p->parts[k] = (st_txn_tp_t){topic, part};
            p->errs[k] = ST_OK;
            if (id_denied || topic_denied) {
                p->errs[k] = id_denied ? ST_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                                       : ST_E_TOPIC_AUTHORIZATION_FAILED;
                p->nbad++;
            } else if (!t || part < 0 || part >= t->nparts) {
                p->errs[k] = ST_E_UNKNOWN_TOPIC_OR_PARTITION;
                p->nbad++;
            }
        }
    }
}

/* ---- AddPartitionsToTxn v4+: brokers' batches (KIP-890) -------------------------- */

/* One entry per transactional id.  verify_only (a partition leader asking
 * before it appends a transaction's first batch): each partition OK when
 * it is in the ongoing transaction, else INVALID_TXN_STATE, nothing
 * written; otherwise the partitions are added as v0-3 add them.  The
 * answer waits for every __transaction_state partition written. */

typedef struct batch_params {
    add_params_t **t;
    int n;
} batch_params_t;

static void add_batch_job(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    (void)c;
    top_t *op = arg;
    batch_params_t *b = op->params;
    st_request_t *req = op->req;
    st_add_partitions_to_txn_req_t *q = req->body;
    st_add_partitions_to_txn_resp_t *r = resp_new(req, &st_add_partitions_to_txn_resp_schema);
    ST_ARRAY_ALLOC(r->results_by_transaction, &req->arena, b->n);
    for (int i = 0; i < b->n; i++) {
        add_params_t *p = b->t[i];
        st_add_partitions_to_txn_txn_t *qt = &q->transactions.v[i];
        st_err_t *verdict = NULL, e = ST_OK;
        if (qt->verify_only) {
            /* the known partitions are verified; unknown ones keep theirs */
            verdict = st_arena_alloc(&req->arena, sizeof *verdict * (size_t)(p->n + 1));
            st_tstate_verify(s, p->id, p->pid, p->epoch, p->parts, p->n, verdict);
        } else if (p->nbad) {
            e = ST_E_OPERATION_NOT_ATTEMPTED;
        } else if (!(e = st_tstate_add_partitions(s, p->id, p->pid, p->epoch, p->parts, p->n))) {
            top_wait(op, s, p->id);
        }
        st_add_partitions_to_txn_result_t *tr = &r->results_by_transaction.v[i];
        st_schema_defaults(&st_add_partitions_to_txn_result_schema, tr);
        tr->transactional_id = qt->transactional_id;
        ST_ARRAY_ALLOC(tr->topic_results, &req->arena, qt->topics.n);
        topic_results(req, qt->topics.v, qt->topics.n, p, verdict, e, tr->topic_results.v);
    }
    top_finish(op, r);
}

static void add_partitions_batch(st_server_t *srv, st_request_t *req) {
    st_add_partitions_to_txn_req_t *q = req->body;
    /* a partition leader's verification acts for the cluster */
    int verify = 0;
    for (int i = 0; i < q->transactions.n; i++) verify |= q->transactions.v[i].verify_only;
    if (verify && !st_authorized_cluster(srv, req, ST_ACL_OP_CLUSTER_ACTION)) {
        st_add_partitions_to_txn_resp_t *r = resp_new(req, &st_add_partitions_to_txn_resp_schema);
        r->error_code = st_err_wire(ST_E_CLUSTER_AUTHORIZATION_FAILED);
        ST_ARRAY_ALLOC(r->results_by_transaction, &req->arena, 0);
        st_request_respond(req, r);
        return;
    }
    top_t *op = top_new(srv, req);
    batch_params_t *b = st_arena_alloc(&req->arena, sizeof *b);
    b->n = ST_MAX(q->transactions.n, 0);
    b->t = st_arena_alloc(&req->arena, sizeof *b->t * (size_t)(b->n + 1));
    st_meta_image_t *img = st_controller_image(srv->ctl);
    for (int i = 0; i < b->n; i++) {
        st_add_partitions_to_txn_txn_t *qt = &q->transactions.v[i];
        add_params_t *p = b->t[i] =
            add_params_new(req, qt->transactional_id, qt->producer_id, qt->producer_epoch);
        take_parts(srv, req, img, qt->topics.v, qt->topics.n, p);
    }
    st_image_release(img);
    op->params = b;
    st_txn_coord_submit(srv->txns, add_batch_job, op);
}

void st_handle_add_partitions_to_txn(st_server_t *srv, st_request_t *req) {
    if (req->hdr.api_version >= 4) {
        add_partitions_batch(srv, req);
        return;
    }
    st_add_partitions_to_txn_req_t *q = req->body;
    top_t *op = top_new(srv, req);
    add_params_t *p = add_params_new(req, q->transactional_id, q->producer_id, q->producer_epoch);
    st_meta_image_t *img = st_controller_image(srv->ctl);
    take_parts(srv, req, img, q->topics.v, q->topics.n, p);
    st_image_release(img);
    op->params = p;
    st_txn_coord_submit(srv->txns, add_partitions_job, op);
}

/* ---- AddOffsetsToTxn ------------------------------------------------------------------ */

static void add_offsets_job(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    (void)c;
    top_t *op = arg;
    add_params_t *p = op->params;
    st_err_t e = st_tstate_add_partitions(s, p->id, p->pid, p->epoch, p->parts, 1);
    if (!e) top_wait(op, s, p->id);
    st_txn_simple_resp_t *r = resp_new(op->req, &st_txn_simple_resp_schema);
    r->error_code = fenced_wire(e, p->knows_fenced);
    top_finish(op, r);
}

void st_handle_add_offsets_to_txn(st_server_t *srv, st_request_t *req) {
    st_add_offsets_to_txn_req_t *q = req->body;
    if (!st_authorized_str(srv, req, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID,
                           q->transactional_id)) {
        st_server_refuse(req, ST_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        return;
    }
    if (!st_authorized_str(srv, req, ST_ACL_OP_READ, ST_ACL_RES_GROUP, q->group_id)) {
        st_server_refuse(req, ST_E_GROUP_AUTHORIZATION_FAILED);
        return;
    }
    top_t *op = top_new(srv, req);
    add_params_t *p = add_params_new(req, q->transactional_id, q->producer_id, q->producer_epoch);
    p->n = 1;
    p->parts = st_arena_alloc(&req->arena, sizeof *p->parts);
    /* the group's partition of __consumer_offsets joins the transaction:
     * its TxnOffsetCommit is completed by this transaction's marker */
    int32_t gp = st_group_partition_for(q->group_id.len > 0 ? q->group_id.p : "",
                                        (size_t)ST_MAX(q->group_id.len, 0),
                                        st_group_coord_num_partitions(srv->groups));
    p->parts[0] = (st_txn_tp_t){st_str(ST_GROUP_OFFSETS_TOPIC), gp};
    op->params = p;
    st_txn_coord_submit(srv->txns, add_offsets_job, op);
}

/* ---- EndTxn ------------------------------------------------------------------------------ */

typedef struct end_params {
    st_str_t id;
    int64_t pid;
    int16_t epoch;
    int commit;
    int knows_fenced;
} end_params_t;

/* The answer to an EndTxn that prepared its transaction: after the
 * markers, when they come soon (END_WAIT_MS).  Kafka answers at once, and
 * the client's next AddPartitionsToTxn meets CONCURRENT_TRANSACTIONS until
 * the markers are written, then retries after its backoff (librdkafka's
 * and the Java client's 20 ms): held here, a producer's next transaction
 * starts as soon as it can. */
#define END_WAIT_MS 1000

static void end_answer(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    (void)c;
    top_t *op = arg;
    end_params_t *p = op->params;
    top_wait(op, s, p->id);
    st_txn_simple_resp_t *r = resp_new(op->req, &st_txn_simple_resp_schema);
    r->error_code = 0;
    top_finish(op, r);
}

static void end_job(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    top_t *op = arg;
    end_params_t *p = op->params;
    st_err_t e = st_tstate_end_txn(s, p->id, p->pid, p->epoch, p->commit);
    const st_txn_t *t = e ? NULL : st_tstate_lookup(s, p->id);
    if (t && (t->status == ST_TXN_PREPARE_COMMIT || t->status == ST_TXN_PREPARE_ABORT)) {
        st_txn_coord_when_ended(c, p->id, p->pid, p->epoch, END_WAIT_MS, end_answer, op);
        return;
    }
    if (!e) top_wait(op, s, p->id);
    st_txn_simple_resp_t *r = resp_new(op->req, &st_txn_simple_resp_schema);
    r->error_code = fenced_wire(e, p->knows_fenced);
    top_finish(op, r);
}

void st_handle_end_txn(st_server_t *srv, st_request_t *req) {
    st_end_txn_req_t *q = req->body;
    if (!st_authorized_str(srv, req, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID,
                           q->transactional_id)) {
        st_server_refuse(req, ST_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        return;
    }
    top_t *op = top_new(srv, req);
    end_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    p->id = acopy(req, q->transactional_id);
    p->pid = q->producer_id;
    p->epoch = q->producer_epoch;
    p->commit = q->committed != 0;
    p->knows_fenced = req->hdr.api_version >= 2;
    op->params = p;
    st_txn_coord_submit(srv->txns, end_job, op);
}

/* ---- DescribeTransactions ---------------------------------------------------------------- */

static void fill_parts(st_request_t *req, const st_txn_t *t, st_described_txn_t *d) {
    int ntopics = 0;
    for (int i = 0; i < t->nparts; i++)
        ntopics += i == 0 || t->parts[i].topic.len != t->parts[i - 1].topic.len ||
                   memcmp(t->parts[i].topic.p, t->parts[i - 1].topic.p,
                          (size_t)t->parts[i].topic.len) != 0;
    ST_ARRAY_ALLOC(d->topic_partitions, &req->arena, ntopics);
    int k = -1;
    for (int i = 0; i < t->nparts; i++) {
        if (k < 0 || !(d->topic_partitions.v[k].name.len == t->parts[i].topic.len &&
                       memcmp(d->topic_partitions.v[k].name.p, t->parts[i].topic.p,
                              (size_t)t->parts[i].topic.len) == 0)) {
            k++;
            st_txn_topic_data_t *td = &d->topic_partitions.v[k];
            td->name = acopy(req, t->parts[i].topic);
            int n = 0;
            for (int j = i; j < t->nparts && t->parts[j].topic.len == t->parts[i].topic.len &&
                            memcmp(t->parts[j].topic.p, t->parts[i].topic.p,
                                   (size_t)t->parts[i].topic.len) == 0;
                 j++)
                n++;
            ST_ARRAY_ALLOC(td->partition_indexes, &req->arena, n);
            td->partition_indexes.n = 0;
        }
        st_txn_topic_data_t *td = &d->topic_partitions.v[k];
        td->partition_indexes.v[td->partition_indexes.n++] = t->parts[i].partition;
    }
}

static void describe_job(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    (void)c;
    top_t *op = arg;
    st_request_t *req = op->req;
    st_describe_transactions_req_t *q = req->body;
    st_str_t *ids = op->params;
    st_describe_transactions_resp_t *r = resp_new(req, &st_describe_transactions_resp_schema);
    ST_ARRAY_ALLOC(r->transaction_states, &req->arena, q->transactional_ids.n);
    for (int i = 0; i < q->transactional_ids.n; i++) {
        st_described_txn_t *d = &r->transaction_states.v[i];
        st_schema_defaults(&st_described_txn_schema, d);
        d->transactional_id = ids[i];
        d->transaction_state = st_str("");
        ST_ARRAY_ALLOC(d->topic_partitions, &req->arena, 0);
        if (ids[i].len < 0) { /* refused on the loop (the authorizer's mark) */
            d->transactional_id = q->transactional_ids.v[i];
            d->error_code = st_err_wire(ST_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
            continue;
        }
        st_err_t e = st_tstate_check(s, ids[i]);
        const st_txn_t *t = e ? NULL : st_tstate_lookup(s, ids[i]);
        if (!e && !t) e = ST_E_TRANSACTIONAL_ID_NOT_FOUND;
        d->error_code = st_err_wire(e);
        if (e) continue;
        d->transaction_state = st_str(st_txn_status_name(t->status));
        d->transaction_timeout_ms = t->timeout_ms;
        d->transaction_start_time_ms = t->start_ts;
        d->producer_id = t->producer_id;
        d->producer_epoch = t->producer_epoch;
        fill_parts(req, t, d);
    }
    top_finish(op, r);
}

void st_handle_describe_transactions(st_server_t *srv, st_request_t *req) {
    st_describe_transactions_req_t *q = req->body;
    top_t *op = top_new(srv, req);
    st_str_t *ids = st_arena_alloc(&req->arena, sizeof *ids * (size_t)(q->transactional_ids.n + 1));
    for (int i = 0; i < q->transactional_ids.n; i++) {
        ids[i] = acopy(req, q->transactional_ids.v[i]);
        if (ids[i].len < 0) ids[i] = st_str("");
        /* DESCRIBE on each id; a refused one is marked null */
        if (!st_authorized_str(srv, req, ST_ACL_OP_DESCRIBE, ST_ACL_RES_TRANSACTIONAL_ID, ids[i]))
            ids[i] = ST_STR_NULL;
    }
    op->params = ids;
    st_txn_coord_submit(srv->txns, describe_job, op);
}

/* ---- ListTransactions ------------------------------------------------------------------------ */

typedef struct list_ctx {
    st_request_t *req;
    st_list_transactions_req_t *q;
    int *states; /* the state filters known, -1 for the others */
    int64_t now;
    st_listed_txn_t *out;
    int n, cap;
} list_ctx_t;

static void list_one(const st_txn_t *t, void *arg) {
    list_ctx_t *x = arg;
    st_list_transactions_req_t *q = x->q;
    int ok = q->state_filters.n <= 0;
    for (int i = 0; i < q->state_filters.n && !ok; i++) ok = x->states[i] == (int)t->status;
    if (!ok) return;
    ok = q->producer_id_filters.n <= 0;
    for (int i = 0; i < q->producer_id_filters.n && !ok; i++)
        ok = q->producer_id_filters.v[i] == t->producer_id;
    if (!ok) return;
    /* v1: only transactions running longer than the duration */
    if (q->duration_filter >= 0 &&
        !(t->status == ST_TXN_ONGOING && t->start_ts >= 0 && x->now - t->start_ts > q->duration_filter))
        return;
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 16;
        st_listed_txn_t *v = st_arena_alloc(&x->req->arena, sizeof *v * (size_t)x->cap);
        if (x->n) memcpy(v, x->out, sizeof *v * (size_t)x->n);
        x->out = v;
    }
    st_listed_txn_t *l = &x->out[x->n++];
    l->transactional_id = acopy(x->req, t->id);
    l->producer_id = t->producer_id;
    l->transaction_state = st_str(st_txn_status_name(t->status));
}

static void list_job(st_txn_coord_t *c, st_tstate_t *s, void *arg) {
    (void)c;
    top_t *op = arg;
    st_request_t *req = op->req;
    list_ctx_t *x = op->params;
    st_list_transactions_resp_t *r = resp_new(req, &st_list_transactions_resp_schema);
    int unknown = 0;
    for (int i = 0; i < x->q->state_filters.n; i++) unknown += x->states[i] < 0;
    ST_ARRAY_ALLOC(r->unknown_state_filters, &req->arena, unknown);
    unknown = 0;
    for (int i = 0; i < x->q->state_filters.n; i++)
        if (x->states[i] < 0) r->unknown_state_filters.v[unknown++] = x->q->state_filters.v[i];
    x->now = st_now_ms();
    if (st_tstate_loading(s)) r->error_code = st_err_wire(ST_E_COORDINATOR_LOAD_IN_PROGRESS);
    else st_tstate_foreach(s, list_one, x);
    r->transaction_states.v = x->out;
    r->transaction_states.n = x->n;
    top_finish(op, r);
}

/* on_respond: only the ids the principal may describe */
static void list_post(st_request_t *req, void *body) {
    st_list_transactions_resp_t *r = body;
    int k = 0;
    for (int i = 0; i < r->transaction_states.n; i++)
        if (st_authorized_str(req->on_respond_arg, req, ST_ACL_OP_DESCRIBE,
                              ST_ACL_RES_TRANSACTIONAL_ID, r->transaction_states.v[i].transactional_id))
            r->transaction_states.v[k++] = r->transaction_states.v[i];
    r->transaction_states.n = k;
}

void st_handle_list_transactions(st_server_t *srv, st_request_t *req) {
    st_list_transactions_req_t *q = req->body;
    if (*srv->sec->authorizer_class_name) {
        req->on_respond = list_post;
        req->on_respond_arg = srv;
    }
    top_t *op = top_new(srv, req);
    list_ctx_t *x = st_arena_alloc(&req->arena, sizeof *x);
    memset(x, 0, sizeof *x);
    x->req = req;
    x->q = q;
    x->states = st_arena_alloc(&req->arena, sizeof *x->states * (size_t)(q->state_filters.n + 1));
    for (int i = 0; i < q->state_filters.n; i++) {
        q->state_filters.v[i] = acopy(req, q->state_filters.v[i]);
        x->states[i] = st_txn_status_from_name(q->state_filters.v[i]);
    }
    op->params = x;
    st_txn_coord_submit(srv->txns, list_job, op);
}

/*
 * h_produce.c - Produce: check every batch and record, append as leader,
 * answer by acks.
 *
 *   acks=0   no response; an error closes the connection (the client's
 *            only way to learn of it, as in Kafka)
 *   acks=1   answer after the append
 *   acks=-1  answer once the high watermark passes every appended batch
 *            (every in-sync replica has it) and, with log.flush.on.ack,
 *            once a group-commit fsync has covered it (parked;
 *            REQUEST_TIMED_OUT after timeout_ms); min.insync.replicas is
 *            checked before appending (NOT_ENOUGH_REPLICAS) and when the
 *            write is committed (NOT_ENOUGH_REPLICAS_AFTER_APPEND)
 *
 * A request's life:
 *
 *   I/O thread                         worker (num.io.threads)
 *   ----------                         ------
 *   st_handle_produce
 *     transactional batches (KafkaApis), per partition: lookup, acks,
 *     ISR, sizes, st_batches_scan (headers only)
 *     |-- a transaction's first batch in a partition (KIP-890): gate_open,
 *     |   st_txn_coord_verify --> the coordinator's answer, posted back:
 *     |   produce_verified fails the partitions not in the transaction,
 *     |   then goes on below (the gate stays open until produce_done)
 *     |-- every batch uncompressed, no recompression, at most
 *     |   PRODUCE_INLINE_BYTES: st_batches_validate inline (a record
 *     |   walk), produce_finish
 *     '-- else gate_open, st_pool_submit ----> produce_work:
 *                                               st_batches_validate of
 *                                               each partition (inflate,
 *                                               walk, recompress)
 *   produce_done <---------- st_loop_post ------'
 *     produce_finish (append, answer or park), gate_release
 *
 * Order: Kafka handles a connection's requests one after another, and
 * clients rely on a connection's produces being appended in order.  While
 * a produce is on a worker, the connection's later requests (of any API)
 * wait behind it in its gate (st_produce_gate_hold, called for every
 * request) and are handled, in order, when it completes.  Appends always
 * happen on the I/O thread, as for inline produces.
 *
 * Threads: everything here runs on the request's I/O thread except
 * produce_work, which reads only the op (the I/O thread leaves it alone
 * until produce_done) and writes into the request's frame, which nothing
 * else reads meanwhile.
 */
#include "server.h"
#include "txn.h"

#include <stdlib.h>

/* Walking uncompressed records costs 20-150 ns a record (measured: 0.1 ms
 * for 1 MB of 1 KB records, about 1.5 ms for 1 MB of 10-byte ones), cheap
 * enough for the I/O thread per batch; a request carrying more than this
 * goes to a worker anyway, so no request holds an I/O thread for long. */
#define PRODUCE_INLINE_BYTES (4 << 20)

typedef struct produce_wait {
    st_partition_t *part;
    int64_t need; /* committed when the high watermark (and, with
                   * log.flush.on.ack, the flushed offset) reach it */
    int flush;
    st_produce_resp_part_t *out;
} produce_wait_t;

typedef struct produce_part {
    st_partition_t *p; /* kept; NULL once answered with an error */
    st_produce_req_part_t *q;
    st_produce_resp_part_t *out;
    const char *topic; /* for log lines (the request's arena) */
    st_batch_limits_t lim;
    st_batch_verdict_t v;
    st_err_t e;
    int64_t guard;   /* KIP-890 (st_log_txn_verify_begin), ST_LOG_UNVERIFIED when none */
    int verify;      /* asked of the coordinator */
    st_err_t verdict; /* its answer */
} produce_part_t;

typedef struct produce_op {
    st_delayed_t base;
    st_server_t *srv;
    st_request_t *req;
    st_produce_resp_t resp;
    produce_part_t *parts;
    int nparts;
    produce_wait_t *waits;
    int nwaits;
    int64_t now_ms;
    int any_error;
    int on_worker; /* validation goes to a worker (after a verification) */
} produce_op_t;

static int produce_try(st_delayed_t *d) {
    produce_op_t *op = (produce_op_t *)d;
    int loop = st_loop_index(op->req->loop);
    for (int i = 0; i < op->nwaits; i++) {
        produce_wait_t *w = &op->waits[i];
        if (!w->part) continue;
        st_partition_watch(w->part, &op->base, loop);
        st_err_t e;
        if (!st_partition_durable(w->part, w->need, w->flush, &e)) return 0;
        if (e) {
            w->out->error_code = st_err_wire(e);
            w->out->error_message = st_str(st_err_msg(e));
        }
        st_partition_release(w->part);
        w->part = NULL;
    }
    st_request_respond(op->req, &op->resp);
    return 1;
}

static void produce_expire(st_delayed_t *d) {
    produce_op_t *op = (produce_op_t *)d;
    for (int i = 0; i < op->nwaits; i++) {
        produce_wait_t *w = &op->waits[i];
        if (!w->part) continue;
        st_log_offsets_t o;
        st_log_offsets(w->part->log, &o);
        if (o.high_watermark < w->need) {
            w->out->error_code = st_err_wire(ST_E_REQUEST_TIMED_OUT);
            w->out->error_message = st_str("the in-sync replicas did not all have the write "
                                           "within timeout.ms");
        } else if (w->flush && o.flushed_offset < w->need) {
            w->out->error_code = st_err_wire(ST_E_REQUEST_TIMED_OUT);
            w->out->error_message = st_str("the write was not made durable within timeout.ms");
        }
        st_partition_release(w->part);
        w->part = NULL;
    }
    st_request_respond(op->req, &op->resp);
}

static void produce_destroy(st_delayed_t *d) {
    produce_op_t *op = (produce_op_t *)d;
    for (int i = 0; i < op->nwaits; i++) st_partition_release(op->waits[i].part);
    for (int i = 0; i < op->nparts; i++) {
        st_partition_release(op->parts[i].p);
        st_batch_verdict_fini(&op->parts[i].v);
    }
    free(op->parts);
    free(op->waits);
    free(op);
}

static void set_error(st_request_t *req, st_produce_resp_part_t *out, st_err_t e,
                      const char *message) {
    out->error_code = st_err_wire(e);
    out->base_offset = -1;
    if (message && *message) out->error_message = st_str(st_arena_strndup(&req->arena, message, strlen(message)));
    else out->error_message = st_str(st_err_msg(e));
}

/* A partition refused: its answer, a log line, its partition let go. */
static void part_fail(produce_op_t *op, produce_part_t *pp, st_err_t e, const char *why) {
    st_request_t *req = op->req;
    ST_LOG_RATELIMITED(ST_LOG_WARN, "produce", 2000, "%s-%d from %s: %s%s%s", pp->topic,
                       (int)pp->q->index, st_request_peer(req), st_err_name(e), *why ? ": " : "",
                       why);
    set_error(req, pp->out, e, why);
    const st_batch_verdict_t *v = &pp->v;
    if (v->nrecord_errors > 0) {
        /* KIP-467: which records made the batch fail (Produce v8+) */
        ST_ARRAY_ALLOC(pp->out->record_errors, &req->arena, v->nrecord_errors);
        for (int k = 0; k < v->nrecord_errors; k++) {
            st_produce_record_error_t *re = &pp->out->record_errors.v[k];
            const char *m = v->record_errors[k].message;
            re->batch_index = v->record_errors[k].index;
            re->message = st_str(st_arena_strndup(&req->arena, m, strlen(m)));
        }
    }
    st_partition_release(pp->p);
    pp->p = NULL;
    op->any_error = 1;
}

/* The first batch's attributes, when the records hold a whole header
 * (Kafka's RequestUtils.flags looks at the first batch only). */
static int first_batch_transactional(const st_records_t *r) {
    return r->len >= ST_BATCH_HEADER_SIZE && r->p[ST_BATCH_MAGIC_OFFSET] == 2 &&
           (st_be16_get(r->p + ST_BATCH_ATTR_OFFSET) & ST_ATTR_TRANSACTIONAL);
}

/* The first producer id among the records' batches that no InitProducerId
 * can have answered, or -1 (batches cut short are left to the scan). */
static int64_t unissued_producer_id(st_server_t *srv, const st_records_t *r) {
    for (int64_t pos = 0; pos + ST_BATCH_HEADER_SIZE <= r->len;) {
        const uint8_t *b = (const uint8_t *)r->p + pos;
        int64_t pid = (int64_t)st_be64_get(b + ST_BATCH_PRODUCER_ID_OFFSET);
        if (st_pid_never_issued(srv, pid)) return pid;
        pos += (int64_t)st_be32_get(b + ST_BATCH_LENGTH_OFFSET) + ST_BATCH_LOG_OVERHEAD;
    }
    return -1;
}

/* ---- per-connection order ------------------------------------------------------ */

typedef struct held {
    struct held *next;
    st_request_t *req;
} held_t;

typedef struct gate {
    struct gate *next;
    const st_conn_t *conn; /* identity only: the connection outlives its requests */
    int busy;              /* one of its produces is on a worker */
    held_t *head, *tail;   /* its later requests, in arrival order */
} gate_t;

#define GATE_BUCKETS 64

struct st_produce_gates {
    gate_t *buckets[GATE_BUCKETS];
    int count;
};

static gate_t **gate_slot(struct st_produce_gates *g, const st_conn_t *conn) {
    uintptr_t h = (uintptr_t)conn;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15u;
    gate_t **pp = &g->buckets[(h >> 32) % GATE_BUCKETS];
    while (*pp && (*pp)->conn != conn) pp = &(*pp)->next;
    return pp;
}

int st_produce_gate_hold(st_request_t *req) {
    st_loop_state_t *ls = st_loop_user(req->loop);
    if (!ls || !ls->gates || ls->gates->count == 0) return 0;
    gate_t *g = *gate_slot(ls->gates, req->conn);
    if (!g) return 0;
    held_t *h = st_malloc(sizeof *h);
    h->next = NULL;
    h->req = req;
    if (g->tail) g->tail->next = h;
    else g->head = h;
    g->tail = h;
    return 1;
}

static void gate_open(st_request_t *req) {
    st_loop_state_t *ls = st_loop_user(req->loop);
    if (!ls->gates) ls->gates = st_calloc(1, sizeof *ls->gates);
    gate_t **pp = gate_slot(ls->gates, req->conn);
    if (!*pp) {
        *pp = st_calloc(1, sizeof **pp);
        (*pp)->conn = req->conn;
        ls->gates->count++;
    }
    (*pp)->busy = 1;
}

/* The produce on the worker is done: handle what waited, in order, until
 * one of them goes to a worker again. */
static void gate_release(st_server_t *srv, st_loop_t *loop, const st_conn_t *conn) {
    st_loop_state_t *ls = st_loop_user(loop);
    gate_t **pp = gate_slot(ls->gates, conn);
    gate_t *g = *pp;
    if (!g) return;
    g->busy = 0;
    while (!g->busy && g->head) {
        held_t *h = g->head;
        g->head = h->next;
        if (!g->head) g->tail = NULL;
        st_request_t *req = h->req;
        free(h);
        if (st_request_conn_open(req)) st_server_handle(srv, req);
        else st_request_no_response(req); /* closed meanwhile (an acks=0 failure) */
    }
    if (!g->busy) {
        pp = gate_slot(ls->gates, conn); /* handlers may have opened other gates */
        *pp = g->next;
        free(g);
        ls->gates->count--;
    }
}

void st_produce_gates_free(st_loop_state_t *ls) {
    if (!ls->gates) return;
    for (int i = 0; i < GATE_BUCKETS; i++) {
        for (gate_t *g = ls->gates->buckets[i], *gn; g; g = gn) {
            gn = g->next;
            for (held_t *h = g->head, *hn; h; h = hn) {
                hn = h->next;
                free(h);
            }
            free(g);
        }
    }
    free(ls->gates);
    ls->gates = NULL;
}

/* ---- the request ---------------------------------------------------------------- */

static void validate_parts(produce_op_t *op) {
    for (int i = 0; i < op->nparts; i++) {
        produce_part_t *pp = &op->parts[i];
        if (!pp->p) continue;
        pp->e = st_batches_validate((uint8_t *)pp->q->records.p, (size_t)pp->q->records.len,
                                    &pp->lim, op->now_ms, &pp->v);
    }
}

/* Append what passed, fill in the answer, respond or park (I/O thread). */
static void produce_finish(produce_op_t *op) {
    st_server_t *srv = op->srv;
    st_request_t *req = op->req;
    st_produce_req_t *q = req->body;
    for (int i = 0; i < op->nparts; i++) {
        produce_part_t *pp = &op->parts[i];
        if (!pp->p) continue;
        if (pp->e) {
            part_fail(op, pp, pp->e, pp->v.why);
            continue;
        }
        st_append_info_t info;
        /* The batches are stamped in place: the receive buffer (or the
         * rebuilt records) is ours. */
        uint8_t *rec = pp->v.rebuilt.len ? pp->v.rebuilt.data : (uint8_t *)pp->q->records.p;
        size_t len = pp->v.rebuilt.len ? pp->v.rebuilt.len : (size_t)pp->q->records.len;
        st_err_t e = st_partition_append(pp->p, rec, len, pp->guard, &info);
        if (e) {
            part_fail(op, pp, e, "");
            continue;
        }
        pp->out->base_offset = info.base_offset;
        pp->out->log_append_time_ms = info.log_append_time;
        pp->out->log_start_offset = info.log_start_offset;
        if (q->acks == -1) {
            int flush = srv->cfg.log_flush_on_ack;
            if (flush) st_logmgr_request_flush(srv->logs, pp->p->log);
            op->waits[op->nwaits++] = (produce_wait_t){pp->p, info.last_offset + 1, flush, pp->out};
        } else {
            st_partition_release(pp->p);
        }
        pp->p = NULL; /* the wait holds it now, or it was released */
    }

    if (q->acks == 0) {
        int any_error = op->any_error;
        produce_destroy(&op->base);
        if (any_error) st_request_close_conn(req, "acks=0 produce failed");
        st_request_no_response(req);
        return;
    }
    if (op->nwaits == 0) {
        st_request_respond(req, &op->resp);
        produce_destroy(&op->base);
        return;
    }
    op->base.deadline_ms = st_mono_ms() + (q->timeout_ms > 0 ? q->timeout_ms : 30000);
    op->base.try_complete = produce_try;
    op->base.expire = produce_expire;
    op->base.destroy = produce_destroy;
    st_purgatory_add(st_req_purgatory(req), &op->base);
}

static void produce_done(void *arg) {
    produce_op_t *op = arg;
    st_server_t *srv = op->srv;
    st_loop_t *loop = op->req->loop;
    const st_conn_t *conn = op->req->conn;
    produce_finish(op); /* may free op and the request */
    gate_release(srv, loop, conn);
}

static void produce_work(void *arg) {
    produce_op_t *op = arg;
    validate_parts(op);
    st_loop_post(op->req->loop, produce_done, op);
}

/* ---- KIP-890: the transaction's first batch in a partition ----------------------- */

static void produce_verified_on_loop(void *arg) {
    produce_op_t *op = arg;
    for (int i = 0; i < op->nparts; i++) {
        produce_part_t *pp = &op->parts[i];
        if (!pp->p || !pp->verify || !pp->verdict) continue;
        const char *why = pp->verdict == ST_E_INVALID_TXN_STATE
                              ? "the partition was not added to the producer's transaction "
                                "(AddPartitionsToTxn)"
                          : pp->verdict == ST_E_NOT_ENOUGH_REPLICAS
                              ? "the transaction coordinator could not verify the partition "
                                "is in the transaction now"
                              : "the transaction coordinator refused the verification";
        part_fail(op, pp, pp->verdict, why);
    }
    if (op->on_worker) {
        st_pool_submit(op->srv->workers, produce_work, op);
        return;
    }
    validate_parts(op);
    produce_done(op);
}

/* Coordinator thread or loop 0. */
static void produce_verified(void *arg, const st_err_t *errs) {
    produce_op_t *op = arg;
    int k = 0;
    for (int i = 0; i < op->nparts; i++)
        if (op->parts[i].verify) op->parts[i].verdict = errs[k++];
    st_loop_post(op->req->loop, produce_verified_on_loop, op);
}

/* The producer of a partition's first batch. */
static void first_producer(const st_records_t *r, int64_t *pid, int16_t *epoch) {
    *pid = (int64_t)st_be64_get((const uint8_t *)r->p + ST_BATCH_PRODUCER_ID_OFFSET);
    *epoch = (int16_t)st_be16_get((const uint8_t *)r->p + ST_BATCH_PRODUCER_EPOCH_OFFSET);
}

/* Begin the verification of the partitions whose producer has no
 * transaction open there; 1 when the coordinator was asked (the op goes
 * on in produce_verified).  Every transactional partition gets a guard,
 * also those with a transaction open (0: it must still be open at the
 * append).  Kafka's ReplicaManager: the records of one request are one
 * producer's, else INVALID_PRODUCER_ID_MAPPING. */
static int verify_begin(produce_op_t *op) {
    st_server_t *srv = op->srv;
    st_request_t *req = op->req;
    st_produce_req_t *q = req->body;
    int64_t pid = -1;
    int16_t epoch = -1;
    int n = 0, mixed = 0;
    for (int i = 0; i < op->nparts; i++) {
        produce_part_t *pp = &op->parts[i];
        if (!pp->p || !first_batch_transactional(&pp->q->records)) continue;
        int64_t bp;
        int16_t be;
        first_producer(&pp->q->records, &bp, &be);
        if (pid < 0) {
            pid = bp;
            epoch = be;
        }
        mixed |= bp != pid || be != epoch;
    }
    for (int i = 0; i < op->nparts; i++) {
        produce_part_t *pp = &op->parts[i];
        if (!pp->p || !first_batch_transactional(&pp->q->records)) continue;
        if (mixed) {
            part_fail(op, pp, ST_E_INVALID_PRODUCER_ID_MAPPING,
                      "the transactional records of one request must all be one producer's "
                      "(one producer id and epoch)");
            continue;
        }
        pp->guard = st_log_txn_verify_begin(pp->p->log, pid);
        pp->verify = pp->guard > 0;
        n += pp->verify;
    }
    if (!n) return 0;
    st_txn_tp_t *tps = st_malloc(sizeof *tps * (size_t)n);
    int k = 0;
    for (int i = 0; i < op->nparts; i++)
        if (op->parts[i].verify)
            tps[k++] = (st_txn_tp_t){st_str(op->parts[i].topic), op->parts[i].q->index};
    gate_open(req);
    st_txn_coord_verify(srv->txns, q->transactional_id, pid, epoch, tps, n, produce_verified, op);
    free(tps);
    return 1;
}

void st_handle_produce(st_server_t *srv, st_request_t *req) {
    st_produce_req_t *q = req->body;
    produce_op_t *op = st_calloc(1, sizeof *op);
    op->srv = srv;
    op->req = req;
    op->now_ms = st_now_ms();
    st_schema_defaults(&st_produce_resp_schema, &op->resp);
    int acks = q->acks;
    int bad_acks = acks != 0 && acks != 1 && acks != -1;
    int total_parts = 0, deferred = 0, transactional = 0;
    int64_t inline_bytes = 0;
    for (int i = 0; i < q->topics.n; i++) {
        total_parts += q->topics.v[i].partitions.n;
        for (int j = 0; j < q->topics.v[i].partitions.n; j++)
            transactional |= first_batch_transactional(&q->topics.v[i].partitions.v[j].records);
    }
    op->parts = st_calloc((size_t)total_parts + 1, sizeof *op->parts);
    op->waits = st_calloc((size_t)total_parts + 1, sizeof *op->waits);
    /* KafkaApis.handleProduceRequest: transactional records need a
     * transactional id the client may write to, else the whole request is
     * TRANSACTIONAL_ID_AUTHORIZATION_FAILED. */
    st_err_t whole = transactional &&
                             (q->transactional_id.len < 0 ||
                              !st_authorized_str(srv, req, ST_ACL_OP_WRITE,
                                                 ST_ACL_RES_TRANSACTIONAL_ID, q->transactional_id))
                         ? ST_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                         : ST_OK;

    ST_ARRAY_ALLOC(op->resp.responses, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        st_produce_req_topic_t *qt = &q->topics.v[i];
        st_produce_resp_topic_t *rt = &op->resp.responses.v[i];
        rt->name = qt->name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, qt->partitions.n);
        /* WRITE on the topic, asked before whether it exists */
        int denied = !whole && !st_topic_allowed(srv, req, ST_ACL_OP_WRITE, qt->name);
        for (int j = 0; j < qt->partitions.n; j++) {
            st_produce_req_part_t *qp = &qt->partitions.v[j];
            st_produce_resp_part_t *out = &rt->partitions.v[j];
            st_schema_defaults(&st_produce_resp_part_schema, out);
            out->index = qp->index;
            produce_part_t *pp = &op->parts[op->nparts++];
            pp->q = qp;
            pp->out = out;
            pp->topic = st_req_strdup(req, qt->name);
            pp->guard = ST_LOG_UNVERIFIED;
            st_batch_verdict_init(&pp->v);
            if (whole || bad_acks || denied) {
                set_error(req, out,
                          whole      ? whole
                          : denied   ? ST_E_TOPIC_AUTHORIZATION_FAILED
                                     : ST_E_INVALID_REQUIRED_ACKS,
                          NULL);
                op->any_error = 1;
                continue;
            }
            st_err_t le;
            /* only a partition this broker leads is kept: a kept one is
             * validated and appended to below */
            pp->p = st_replicas_lookup_leader(srv->rm, qt->name.p, (size_t)ST_MAX(qt->name.len, 0),
                                              qp->index, &le);
            if (le) {
                set_error(req, out, le, NULL);
                op->any_error = 1;
                continue;
            }
            st_partition_t *p = pp->p;
            char why[256] = "";
            st_err_t e = ST_OK;
            st_log_config_t lc;
            st_log_get_config(p->log, &lc);
            if (qp->records.len <= 0) {
                e = ST_E_INVALID_RECORD;
                snprintf(why, sizeof why, "no records");
            } else if (acks == -1 && st_partition_isr_size(p) < st_partition_min_isr(p)) {
                e = ST_E_NOT_ENOUGH_REPLICAS;
                snprintf(why, sizeof why, "%d in-sync replica(s), min.insync.replicas is %d",
                         st_partition_isr_size(p), st_partition_min_isr(p));
            } else if (qp->records.len > lc.segment_bytes) {
                e = ST_E_RECORD_LIST_TOO_LARGE;
                snprintf(why, sizeof why, "%d bytes of records exceed segment.bytes %lld",
                         qp->records.len, (long long)lc.segment_bytes);
            } else {
                int64_t pid = unissued_producer_id(srv, &qp->records);
                if (pid >= 0) {
                    e = ST_E_UNKNOWN_PRODUCER_ID;
                    snprintf(why, sizeof why, "producer id %lld was never issued by "
                             "InitProducerId", (long long)pid);
                }
            }
            if (!e) {
                pp->lim = (st_batch_limits_t){
                    .max_message_bytes = lc.max_message_bytes,
                    .ts_before_max_ms = lc.ts_before_max_ms,
                    .ts_after_max_ms = lc.ts_after_max_ms,
                    .log_append_time = lc.log_append_time,
                    .compact = lc.compact,
                    /* 0 (no max.message.bytes): the stored batches' bound */
                    .max_inflated_bytes = lc.max_message_bytes > 0
                                              ? (int64_t)lc.max_message_bytes *
                                                    srv->cfg.message_decompression_max_ratio
                                              : 0,
                    .target = (st_batch_target_t)lc.compression,
                    .no_zstd = req->hdr.api_version < 7,
                };
                if ((e = st_batches_scan(qp->records.p, (size_t)qp->records.len, &pp->lim, &pp->v)))
                    snprintf(why, sizeof why, "%s", pp->v.why);
            }
            if (e) {
                part_fail(op, pp, e, why);
                continue;
            }
            deferred |= pp->v.needs_worker;
            inline_bytes += qp->records.len;
        }
    }
    /* Inflating or recompressing costs in proportion to what a batch
     * inflates to: a worker's job, never the I/O thread's. */
    op->on_worker = deferred || inline_bytes > PRODUCE_INLINE_BYTES;
    if (transactional && !whole && srv->cfg.transaction_partition_verification_enable &&
        verify_begin(op))
        return;
    if (op->on_worker) {
        gate_open(req);
        st_pool_submit(srv->workers, produce_work, op);
        return;
    }
    validate_parts(op);
    produce_finish(op);
}

/*
 * h_produce.c - Produce: validate every batch, append as leader, answer by
 * acks.
 *
 *   acks=0   no response; an error closes the connection (the client's
 *            only way to learn of it, as in Kafka)
 *   acks=1   answer after the append
 *   acks=-1  with log.flush.on.ack, answer once a group-commit fsync has
 *            covered every appended batch (parked; REQUEST_TIMED_OUT after
 *            timeout_ms); min.insync.replicas is checked before appending
 */
#include "server.h"

#include <stdlib.h>

typedef struct produce_wait {
    st_partition_t *part;
    int64_t need; /* durable when flushed_offset >= need */
    st_produce_resp_part_t *out;
} produce_wait_t;

typedef struct produce_op {
    st_delayed_t base;
    st_request_t *req;
    st_produce_resp_t resp;
    produce_wait_t *waits;
    int nwaits;
} produce_op_t;

static int produce_try(st_delayed_t *d) {
    produce_op_t *op = (produce_op_t *)d;
    int loop = st_loop_index(op->req->loop);
    for (int i = 0; i < op->nwaits; i++) {
        produce_wait_t *w = &op->waits[i];
        if (!w->part) continue;
        st_partition_watch(w->part, loop);
        st_log_offsets_t o;
        st_log_offsets(w->part->log, &o);
        if (o.offline) {
            w->out->error_code = st_err_wire(ST_E_KAFKA_STORAGE_ERROR);
        } else if (o.flushed_offset < w->need) {
            return 0;
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
        if (o.flushed_offset < w->need) {
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

void st_handle_produce(st_server_t *srv, st_request_t *req) {
    st_produce_req_t *q = req->body;
    produce_op_t *op = st_calloc(1, sizeof *op);
    op->req = req;
    st_schema_defaults(&st_produce_resp_schema, &op->resp);
    int acks = q->acks;
    int bad_acks = acks != 0 && acks != 1 && acks != -1;
    int any_error = 0, total_parts = 0;
    for (int i = 0; i < q->topics.n; i++) total_parts += q->topics.v[i].partitions.n;
    op->waits = st_calloc((size_t)total_parts + 1, sizeof *op->waits);

    ST_ARRAY_ALLOC(op->resp.responses, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        st_produce_req_topic_t *qt = &q->topics.v[i];
        st_produce_resp_topic_t *rt = &op->resp.responses.v[i];
        rt->name = qt->name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, qt->partitions.n);
        for (int j = 0; j < qt->partitions.n; j++) {
            st_produce_req_part_t *qp = &qt->partitions.v[j];
            st_produce_resp_part_t *out = &rt->partitions.v[j];
            st_schema_defaults(&st_produce_resp_part_schema, out);
            out->index = qp->index;
            if (bad_acks) {
                set_error(req, out, ST_E_INVALID_REQUIRED_ACKS, NULL);
                any_error = 1;
                continue;
            }
            int known = 0;
            st_partition_t *p = st_replicas_lookup(srv->rm, qt->name.p, (size_t)ST_MAX(qt->name.len, 0),
                                                   qp->index, &known);
            if (!p) {
                set_error(req, out, ST_E_UNKNOWN_TOPIC_OR_PARTITION, NULL);
                any_error = 1;
                continue;
            }
            st_err_t e = ST_OK;
            char why[256] = "";
            if (qp->records.len <= 0) {
                e = ST_E_INVALID_RECORD;
                snprintf(why, sizeof why, "no records");
            }
            if (!e && acks == -1 && p->isr_size < p->min_insync_replicas) {
                e = ST_E_NOT_ENOUGH_REPLICAS;
                snprintf(why, sizeof why, "%d in-sync replica(s), min.insync.replicas is %d",
                         p->isr_size, p->min_insync_replicas);
            }
            st_log_config_t lc;
            st_log_get_config(p->log, &lc);
            if (!e && qp->records.len > lc.segment_bytes) {
                e = ST_E_RECORD_LIST_TOO_LARGE;
                snprintf(why, sizeof why, "%d bytes of records exceed segment.bytes %lld",
                         qp->records.len, (long long)lc.segment_bytes);
            }
            if (!e) {
                st_batch_limits_t lim = {lc.max_message_bytes, lc.ts_before_max_ms,
                                         lc.ts_after_max_ms, lc.log_append_time};
                int nbatches;
                e = st_batches_validate(qp->records.p, (size_t)qp->records.len, &lim, st_now_ms(),
                                        &nbatches, why, sizeof why);
            }
            if (!e && lc.compact)
                e = st_batches_check_keys(qp->records.p, (size_t)qp->records.len, why, sizeof why);
            st_append_info_t info;
            /* The batches are stamped in place: the receive buffer is ours. */
            if (!e) e = st_partition_append(p, (uint8_t *)qp->records.p, (size_t)qp->records.len, &info);
            if (e) {
                ST_LOG_RATELIMITED(ST_LOG_WARN, "produce", 2000, "%.*s-%d from %s: %s%s%s",
                                   ST_STR_FMT(qt->name), (int)qp->index, st_request_peer(req),
                                   st_err_name(e), *why ? ": " : "", why);
                set_error(req, out, e, why);
                st_partition_release(p);
                any_error = 1;
                continue;
            }
            out->base_offset = info.base_offset;
            out->log_append_time_ms = info.log_append_time;
            out->log_start_offset = info.log_start_offset;
            if (acks == -1 && srv->cfg.log_flush_on_ack) {
                st_logmgr_request_flush(srv->logs, p->log);
                op->waits[op->nwaits++] = (produce_wait_t){p, info.last_offset + 1, out};
            } else {
                st_partition_release(p);
            }
        }
    }

    if (acks == 0) {
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

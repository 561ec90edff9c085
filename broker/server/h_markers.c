/*
 * h_markers.c - WriteTxnMarkers (27): a transaction coordinator has this
 * broker, the leader of some partitions of a transaction, end the
 * transaction there by appending its commit or abort marker (Kafka's
 * ReplicaManager.appendRecords with the coordinator's origin).
 *
 * Each marker is a control batch of one record (key: version 0 and type
 * 0 = abort, 1 = commit; value: version 0 and the coordinator epoch),
 * carrying the producer id and epoch, transactional, without a sequence.
 * The log closes the producer's transaction in the partition, moves the
 * last stable offset and, for an abort, records it in the .txnindex.  A
 * partition's answer waits until the marker is in every in-sync replica
 * (and flushed, with log.flush.on.ack), as an acks=all produce does: the
 * coordinator writes CompleteCommit / CompleteAbort only after every
 * partition answered, so a marker it was told of must survive a leader
 * change.
 *
 * A marker written to a partition of __consumer_offsets also tells the
 * group coordinator, once it is committed, to make the producer's pending
 * offset commits visible (commit) or drop them (abort); one that never
 * is is written again by the coordinator's retry (on the next leader,
 * whose replay of the partition applies it).
 *
 * Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
 * INVALID_PRODUCER_EPOCH (an epoch older than the producer's),
 * TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch),
 * NOT_ENOUGH_REPLICAS(_AFTER_APPEND), KAFKA_STORAGE_ERROR.
 */
#include "group.h"
#include "server.h"

#include <stdlib.h>

#define MARKER_WAIT_MS 30000

typedef struct mwait {
    st_partition_t *p; /* kept; NULL: answered already */
    int64_t need;      /* the marker's offset + 1 */
    int16_t *error_code;
    /* a partition of __consumer_offsets: the group coordinator is told
     * once the marker is committed (Kafka: after the acks=all append) */
    int offsets_partition;
    int64_t producer_id;
    int16_t producer_epoch;
    int commit;
} mwait_t;

typedef struct markers_op {
    st_delayed_t d;
    st_server_t *srv;
    st_request_t *req;
    st_write_txn_markers_resp_t resp;
    mwait_t *waits;
    int nwaits;
} markers_op_t;

/* Append one marker to a partition this broker leads. */
static st_err_t write_marker(st_server_t *srv, st_partition_t *p, const st_write_txn_marker_t *m,
                             int64_t *need) {
    uint8_t value[6];
    st_be16_put(value, 0);
    st_be32_put(value + 2, (uint32_t)m->coordinator_epoch);
    st_buf_t b;
    st_buf_init(&b);
    st_batch_build_control(&b, 0, m->transaction_result ? ST_CONTROL_COMMIT : ST_CONTROL_ABORT,
                           value, sizeof value, st_now_ms());
    st_batch_set_producer(b.data, b.len, m->producer_id, m->producer_epoch, -1,
                          ST_ATTR_TRANSACTIONAL);
    st_append_info_t info;
    st_err_t e = st_partition_append(p, b.data, b.len, ST_LOG_UNVERIFIED, &info);
    st_buf_fini(&b);
    if (e) return e;
    *need = info.last_offset + 1;
    if (srv->cfg.log_flush_on_ack) st_logmgr_request_flush(srv->logs, p->log);
    return ST_OK;
}

static int markers_try(st_delayed_t *d) {
    markers_op_t *op = (markers_op_t *)d;
    int loop = st_loop_index(op->req->loop);
    int pending = 0;
    for (int i = 0; i < op->nwaits; i++) {
        mwait_t *w = &op->waits[i];
        if (!w->p) continue;
        st_partition_watch(w->p, &op->d, loop);
        st_err_t e;
        if (!st_partition_durable(w->p, w->need, op->srv->cfg.log_flush_on_ack, &e)) {
            pending = 1;
            continue;
        }
        *w->error_code = st_err_wire(e);
        if (!e && w->offsets_partition)
            st_group_coord_txn_marker(op->srv->groups, w->p->index, w->producer_id,
                                      w->producer_epoch, w->commit);
        st_partition_release(w->p);
        w->p = NULL;
    }
    if (pending) return 0;
    st_request_respond(op->req, &op->resp);
    return 1;
}

static void markers_expire(st_delayed_t *d) {
    markers_op_t *op = (markers_op_t *)d;
    for (int i = 0; i < op->nwaits; i++)
        if (op->waits[i].p) *op->waits[i].error_code = st_err_wire(ST_E_REQUEST_TIMED_OUT);
    st_request_respond(op->req, &op->resp);
}

static void markers_destroy(st_delayed_t *d) {
    markers_op_t *op = (markers_op_t *)d;
    for (int i = 0; i < op->nwaits; i++) st_partition_release(op->waits[i].p);
    free(op->waits);
    free(op);
}

static int is_offsets_topic(st_str_t name) {
    return name.len == (int32_t)strlen(ST_GROUP_OFFSETS_TOPIC) &&
           !memcmp(name.p, ST_GROUP_OFFSETS_TOPIC, (size_t)name.len);
}

void st_handle_write_txn_markers(st_server_t *srv, st_request_t *req) {
    st_write_txn_markers_req_t *q = req->body;
    markers_op_t *op = st_calloc(1, sizeof *op);
    op->srv = srv;
    op->req = req;
    st_schema_defaults(&st_write_txn_markers_resp_schema, &op->resp);
    /* markers come from transaction coordinators, which act for the cluster */
    int denied = !st_authorized_cluster(srv, req, ST_ACL_OP_CLUSTER_ACTION);
    int total = 0;
    for (int i = 0; i < q->markers.n; i++)
        for (int j = 0; j < q->markers.v[i].topics.n; j++)
            total += q->markers.v[i].topics.v[j].partition_indexes.n;
    op->waits = st_calloc((size_t)total + 1, sizeof *op->waits);
    ST_ARRAY_ALLOC(op->resp.markers, &req->arena, q->markers.n);
    for (int i = 0; i < q->markers.n; i++) {
        const st_write_txn_marker_t *m = &q->markers.v[i];
        st_write_txn_marker_result_t *rm = &op->resp.markers.v[i];
        rm->producer_id = m->producer_id;
        ST_ARRAY_ALLOC(rm->topics, &req->arena, m->topics.n);
        for (int j = 0; j < m->topics.n; j++) {
            const st_write_txn_markers_topic_t *t = &m->topics.v[j];
            st_write_txn_markers_resp_topic_t *rt = &rm->topics.v[j];
            rt->name = t->name;
            ST_ARRAY_ALLOC(rt->partitions, &req->arena, t->partition_indexes.n);
            for (int k = 0; k < t->partition_indexes.n; k++) {
                int32_t idx = t->partition_indexes.v[k];
                st_write_txn_markers_resp_part_t *rp = &rt->partitions.v[k];
                rp->partition_index = idx;
                st_err_t e = denied ? ST_E_CLUSTER_AUTHORIZATION_FAILED : ST_OK;
                st_partition_t *p =
                    !denied && t->name.len > 0 ? st_replicas_lookup_leader(srv->rm, t->name.p,
                                                                (size_t)t->name.len, idx, &e)
                                    : NULL;
                if (!p && !e) e = ST_E_UNKNOWN_TOPIC_OR_PARTITION;
                int64_t need = 0;
                if (p) e = write_marker(srv, p, m, &need);
                rp->error_code = st_err_wire(e);
                if (e) {
                    ST_LOG_RATELIMITED(ST_LOG_WARN, "txn", 5000,
                                       "marker (%s) of producer %lld epoch %d for %.*s-%d "
                                       "refused: %s",
                                       m->transaction_result ? "commit" : "abort",
                                       (long long)m->producer_id, (int)m->producer_epoch,
                                       (int)ST_MAX(t->name.len, 0), t->name.p ? t->name.p : "",
                                       (int)idx, st_err_name(e));
                    st_partition_release(p);
                    continue;
                }
                op->waits[op->nwaits++] = (mwait_t){p,
                                                    need,
                                                    &rp->error_code,
                                                    is_offsets_topic(t->name),
                                                    m->producer_id,
                                                    m->producer_epoch,
                                                    m->transaction_result};
            }
        }
    }
    op->d.deadline_ms = st_mono_ms() + MARKER_WAIT_MS;
    op->d.try_complete = markers_try;
    op->d.expire = markers_expire;
    op->d.destroy = markers_destroy;
    st_purgatory_add(st_req_purgatory(req), &op->d);
}

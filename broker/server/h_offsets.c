/*
 * h_offsets.c - ListOffsets (earliest, latest, max timestamp, by
 * timestamp through the time index) and DeleteRecords.
 */
#include "server.h"

#define TS_LATEST -1
#define TS_EARLIEST -2
#define TS_MAX_TIMESTAMP -3
#define TS_EARLIEST_LOCAL -4 /* KIP-405 */
#define TS_LATEST_TIERED -5  /* KIP-1005 */

void st_handle_list_offsets(st_server_t *srv, st_request_t *req) {
    st_list_offsets_req_t *q = req->body;
    st_list_offsets_resp_t r;
    st_schema_defaults(&st_list_offsets_resp_schema, &r);
    ST_ARRAY_ALLOC(r.topics, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        st_list_offsets_req_topic_t *qt = &q->topics.v[i];
        st_list_offsets_resp_topic_t *rt = &r.topics.v[i];
        rt->name = qt->name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, qt->partitions.n);
        for (int j = 0; j < qt->partitions.n; j++) {
            st_list_offsets_req_part_t *qp = &qt->partitions.v[j];
            st_list_offsets_resp_part_t *out = &rt->partitions.v[j];
            st_schema_defaults(&st_list_offsets_resp_part_schema, out);
            out->partition_index = qp->partition_index;
            ST_ARRAY_ALLOC(out->old_style_offsets, &req->arena, 0);
            st_partition_t *p = st_replicas_lookup(srv->rm, qt->name.p,
                                                   (size_t)ST_MAX(qt->name.len, 0),
                                                   qp->partition_index, NULL);
            if (!p) {
                out->error_code = st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION);
                continue;
            }
            st_err_t e = st_check_leader_epoch(qp->current_leader_epoch, p->leader_epoch);
            st_log_offsets_t o;
            st_log_offsets(p->log, &o);
            if (!e && o.offline) e = ST_E_KAFKA_STORAGE_ERROR;
            if (e) {
                out->error_code = st_err_wire(e);
                st_partition_release(p);
                continue;
            }
            int64_t offset = -1, ts = -1;
            int32_t epoch = -1;
            if (qp->timestamp == TS_EARLIEST) {
                offset = st_partition_log_start(p);
                epoch = offset < o.log_start_offset && p->tier ? st_tier_part_epoch_for(p->tier, offset)
                                                              : st_log_epoch_for_offset(p->log, offset);
            } else if (qp->timestamp == TS_EARLIEST_LOCAL) {
                offset = o.log_start_offset;
                epoch = st_log_epoch_for_offset(p->log, offset);
            } else if (qp->timestamp == TS_LATEST_TIERED) {
                /* the highest offset in the bucket, -1 when none */
                int64_t rs = __atomic_load_n(&p->remote_start, __ATOMIC_ACQUIRE);
                int64_t re = __atomic_load_n(&p->remote_end, __ATOMIC_ACQUIRE);
                offset = p->tier && re > rs ? re - 1 : -1;
                if (offset >= 0) epoch = st_tier_part_epoch_for(p->tier, offset);
            } else if (qp->timestamp == TS_LATEST) {
                /* read_committed stops at the last stable offset, which is
                 * the high watermark while there are no transactions */
                offset = o.high_watermark;
                epoch = st_log_latest_epoch(p->log);
            } else if (qp->timestamp == TS_MAX_TIMESTAMP || qp->timestamp >= 0) {
                int64_t target = qp->timestamp;
                /* the first record carrying the largest timestamp */
                if (target == TS_MAX_TIMESTAMP) target = st_log_max_timestamp(p->log);
                if (target >= 0 && st_log_offset_for_time(p->log, target, &offset, &ts, &epoch)) {
                    offset = -1;
                    ts = -1;
                    epoch = -1;
                }
                /* Older than everything local: the bucket may hold it (to
                 * the segment: its first records may be older). */
                int64_t roff;
                if (p->tier && target >= 0 && (offset < 0 || offset == o.log_start_offset) &&
                    st_tier_offset_for_time(p->tier, target, &roff) == ST_OK && roff < o.log_start_offset) {
                    offset = roff;
                    ts = -1;
                    epoch = st_tier_part_epoch_for(p->tier, roff);
                }
            } else {
                e = ST_E_INVALID_REQUEST;
            }
            out->error_code = st_err_wire(e);
            out->offset = offset;
            out->timestamp = ts;
            out->leader_epoch = epoch;
            if (!e && offset >= 0) {
                ST_ARRAY_ALLOC(out->old_style_offsets, &req->arena, 1);
                out->old_style_offsets.v[0] = offset;
            }
            st_partition_release(p);
        }
    }
    st_request_respond(req, &r);
}

void st_handle_delete_records(st_server_t *srv, st_request_t *req) {
    st_delete_records_req_t *q = req->body;
    st_delete_records_resp_t r;
    st_schema_defaults(&st_delete_records_resp_schema, &r);
    ST_ARRAY_ALLOC(r.topics, &req->arena, q->topics.n);
    int changed = 0;
    for (int i = 0; i < q->topics.n; i++) {
        st_delete_records_req_topic_t *qt = &q->topics.v[i];
        st_delete_records_resp_topic_t *rt = &r.topics.v[i];
        rt->name = qt->name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, qt->partitions.n);
        for (int j = 0; j < qt->partitions.n; j++) {
            st_delete_records_req_part_t *qp = &qt->partitions.v[j];
            st_delete_records_resp_part_t *out = &rt->partitions.v[j];
            out->partition_index = qp->partition_index;
            out->low_watermark = -1;
            st_partition_t *p = st_replicas_lookup(srv->rm, qt->name.p,
                                                   (size_t)ST_MAX(qt->name.len, 0),
                                                   qp->partition_index, NULL);
            if (!p) {
                out->error_code = st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION);
                continue;
            }
            int64_t low = -1;
            st_err_t e = ST_OK;
            st_log_offsets_t o;
            st_log_offsets(p->log, &o);
            int64_t target = qp->offset == -1 ? o.high_watermark : qp->offset;
            if (target < 0 || target > o.high_watermark) e = ST_E_OFFSET_OUT_OF_RANGE;
            /* Across both tiers: the bucket drops what lies wholly below
             * (manifest first); the local log moves its start when the
             * offset reaches it. */
            if (!e && p->tier) st_tier_delete_records(p->tier, target);
            if (!e && (!p->tier || target >= o.log_start_offset))
                e = st_log_delete_records(p->log, target, &low);
            if (!e) low = ST_MAX(target, st_partition_log_start(p));
            out->error_code = st_err_wire(e);
            if (!e) {
                out->low_watermark = low;
                changed = 1;
            }
            st_partition_release(p);
        }
    }
    /* The new log start must survive a restart before we say it moved. */
    if (changed) st_logmgr_checkpoint(srv->logs);
    st_request_respond(req, &r);
}

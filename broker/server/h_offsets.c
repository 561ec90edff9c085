/*
 * h_offsets.c - ListOffsets (earliest, latest, max timestamp, by
 * timestamp through the time index, local or remote) and DeleteRecords.
 *
 * A search by timestamp reads (and may inflate) record batches, so it
 * never runs on an I/O thread (issue 9: nothing inflates there): the
 * request's cheap lookups are answered inline, the searches go to a
 * request worker (num.io.threads), and the request is parked meanwhile.
 *
 *   st_handle_list_offsets (I/O thread): every slot that is not a search
 *     is answered now; no search -> respond
 *     '-- else park (purgatory), offsets_try: state IDLE -> submit
 *   offsets_work (worker): search every slot not yet done; a search that
 *     waits on the bucket stays undone (its download wakes the loop)
 *   offsets_ran (I/O thread, posted): every slot done -> DONE (answered
 *     at the next try); else a wake came during the run -> IDLE (run
 *     again), else WAITING until the next wake -> IDLE
 *   deadline (remote.list.offsets.request.timeout.ms): the slots not done
 *     when the last run began answer REQUEST_TIMED_OUT; a run still going
 *     is orphaned: its job frees itself when it comes back.
 *
 * Threads: the slots are the job's; the worker writes only slots not done
 * when it was submitted, and the I/O thread reads them only between runs
 * (the post back orders the two), or, for an orphaning deadline, only the
 * slots known done before the run (known[]).
 */
#include "server.h"

#include <stdlib.h>

#define TS_LATEST -1
#define TS_EARLIEST -2
#define TS_MAX_TIMESTAMP -3
#define TS_EARLIEST_LOCAL -4 /* KIP-405 */
#define TS_LATEST_TIERED -5  /* KIP-1005 */

static void wake_loop(void *arg) { st_server_wake_all(arg); }

/* The first remote record at or after from whose timestamp is >= ts, read
 * batch by batch from the cached chunks st_tier_read hands out. */
static st_err_t remote_time_scan(st_tier_part_t *tp, int64_t ts, int64_t from, st_loop_t *loop,
                                 int64_t *offset, int64_t *found_ts, int32_t *epoch) {
    uint8_t *buf = NULL;
    st_err_t e;
    for (;;) {
        st_tier_read_t tr;
        e = st_tier_read(tp, from, 1 << 20, ST_TIER_READ_MIN_ONE | ST_TIER_READ_ONCE, &tr,
                         wake_loop, loop);
        if (e == ST_E_OFFSET_OUT_OF_RANGE) e = ST_E_NOT_FOUND; /* past the remote end */
        if (!e && (!tr.file || tr.len <= 0)) {
            if (tr.file) st_file_release(tr.file);
            e = ST_E_KAFKA_STORAGE_ERROR;
        }
        if (e) break;
        int64_t pos = tr.pos, end = tr.pos + tr.len;
        int done = 0;
        while (!done && pos < end) {
            uint8_t hdr[ST_BATCH_HEADER_SIZE];
            size_t got = 0;
            st_batch_info_t b;
            if (st_pread_all(tr.file->fd, hdr, sizeof hdr, pos, &got) ||
                st_batch_header(hdr, got, &b) || pos + b.size > end) {
                e = ST_E_KAFKA_STORAGE_ERROR;
                done = 1;
                break;
            }
            if (b.max_timestamp >= ts) {
                buf = st_realloc(buf, (size_t)b.size);
                if (st_pread_all(tr.file->fd, buf, (size_t)b.size, pos, &got) ||
                    got != (size_t)b.size) {
                    e = ST_E_KAFKA_STORAGE_ERROR;
                    done = 1;
                } else if (st_batch_first_at_time(buf, b.size, from, ts, offset, found_ts)) {
                    *epoch = b.leader_epoch;
                    done = 1;
                }
            }
            from = st_batch_last_offset(&b) + 1;
            pos += b.size;
        }
        st_file_release(tr.file);
        if (done) break;
    }
    free(buf);
    return e;
}

/* One partition's answer, tp its tier part (NULL: not tiered);
 * ST_E_AGAIN while the bucket is being read. */
static st_err_t list_one_in(st_partition_t *p, st_tier_part_t *tp, int64_t timestamp, int committed,
                            st_loop_t *loop, int64_t *offset_out, int64_t *ts_out, int32_t *epoch_out) {
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    if (o.offline) return ST_E_KAFKA_STORAGE_ERROR;
    int64_t offset = -1, ts = -1;
    int32_t epoch = -1;
    if (timestamp == TS_EARLIEST) {
        offset = st_partition_log_start(p);
        epoch = offset < o.log_start_offset && tp ? st_tier_part_epoch_for(tp, offset)
                                                      : st_log_epoch_for_offset(p->log, offset);
    } else if (timestamp == TS_EARLIEST_LOCAL) {
        offset = o.log_start_offset;
        epoch = st_log_epoch_for_offset(p->log, offset);
    } else if (timestamp == TS_LATEST_TIERED) {
        /* the highest offset in the bucket, -1 when none */
        int64_t rs = __atomic_load_n(&p->remote_start, __ATOMIC_ACQUIRE);
        int64_t re = __atomic_load_n(&p->remote_end, __ATOMIC_ACQUIRE);
        offset = tp && re > rs ? re - 1 : -1;
        if (offset >= 0) epoch = st_tier_part_epoch_for(tp, offset);
    } else if (timestamp == TS_LATEST) {
        /* read_committed stops at the last stable offset, which is the
         * high watermark while there are no transactions.  A new leader
         * whose high watermark is still below where its epoch began does
         * not know the latest committed offset yet: Kafka answers
         * OFFSET_NOT_AVAILABLE (retriable) rather than an offset a
         * consumer would start from too early. */
        if (o.high_watermark < st_partition_epoch_start_offset(p)) return ST_E_OFFSET_NOT_AVAILABLE;
        offset = committed ? st_log_last_stable_offset(p->log) : o.high_watermark;
        epoch = st_log_latest_epoch(p->log);
    } else if (timestamp == TS_MAX_TIMESTAMP || timestamp >= 0) {
        int64_t target = timestamp;
        /* the first record carrying the largest timestamp */
        if (target == TS_MAX_TIMESTAMP) target = st_log_max_timestamp(p->log);
        if (target >= 0 && st_log_offset_for_time(p->log, target, &offset, &ts, &epoch)) {
            offset = ts = -1;
            epoch = -1;
        }
        /* Nothing local, or the local start: an older record in the
         * bucket may be the first as new as target. */
        int64_t from;
        if (tp && target >= 0 && (offset < 0 || offset == o.log_start_offset)) {
            st_err_t e = st_tier_time_search_start(tp, target, &from, wake_loop, loop);
            int64_t roff, rts;
            int32_t repoch;
            if (!e) e = remote_time_scan(tp, target, from, loop, &roff, &rts, &repoch);
            if (e == ST_E_AGAIN || e == ST_E_KAFKA_STORAGE_ERROR) return e;
            if (!e && roff < o.log_start_offset) {
                offset = roff;
                ts = rts;
                epoch = repoch;
            }
        }
    } else {
        return ST_E_INVALID_REQUEST;
    }
    *offset_out = offset;
    *ts_out = ts;
    *epoch_out = epoch;
    return ST_OK;
}

static st_err_t list_one(st_partition_t *p, int64_t timestamp, int committed, st_loop_t *loop,
                         int64_t *offset_out, int64_t *ts_out, int32_t *epoch_out) {
    st_tier_part_t *tp = st_partition_tier(p); /* kept while it is used */
    st_err_t e = list_one_in(p, tp, timestamp, committed, loop, offset_out, ts_out, epoch_out);
    if (tp) st_tier_part_release(tp);
    return e;
}

/* ---- ListOffsets: slots, a job on a worker, the parked request -------- */

typedef struct offsets_slot {
    char *topic; /* owned by the job */
    size_t topic_len;
    int32_t partition;
    int32_t leader_epoch; /* current_leader_epoch asked */
    int64_t timestamp;
    int done;
    st_err_t err;
    int64_t offset, ts;
    int32_t epoch;
} offsets_slot_t;

typedef struct offsets_job {
    st_server_t *srv;
    st_loop_t *loop;
    int committed; /* isolation_level read_committed: latest is the LSO */
    offsets_slot_t *slots;
    int nslots;
    struct offsets_op *op; /* NULL once orphaned (I/O thread only) */
} offsets_job_t;

enum { OFFSETS_IDLE, OFFSETS_RUNNING, OFFSETS_WAITING, OFFSETS_DONE };

typedef struct offsets_op {
    st_delayed_t base;
    st_request_t *req;
    offsets_job_t *job;
    int state;
    int woken;     /* a wake came while RUNNING: run again */
    uint8_t *known; /* per slot: done before the current run */
} offsets_op_t;

static int is_search(int64_t timestamp) { return timestamp >= 0 || timestamp == TS_MAX_TIMESTAMP; }

/* Answer one slot, unless it waits on the bucket. */
static void slot_compute(offsets_job_t *job, offsets_slot_t *sl) {
    st_partition_t *p = st_replicas_lookup(job->srv->rm, sl->topic, sl->topic_len, sl->partition,
                                           NULL);
    int64_t offset = -1, ts = -1;
    int32_t epoch = -1;
    st_err_t e = p ? st_check_leader_epoch(sl->leader_epoch, st_partition_leader_epoch(p))
                   : ST_E_UNKNOWN_TOPIC_OR_PARTITION;
    if (!e) e = st_partition_check_leader(p);
    if (!e) e = list_one(p, sl->timestamp, job->committed, job->loop, &offset, &ts, &epoch);
    st_partition_release(p);
    if (e == ST_E_AGAIN) return;
    if (e) offset = ts = epoch = -1;
    sl->err = e;
    sl->offset = offset;
    sl->ts = ts;
    sl->epoch = epoch;
    sl->done = 1;
}

static void job_free(offsets_job_t *job) {
    for (int i = 0; i < job->nslots; i++) free(job->slots[i].topic);
    free(job->slots);
    free(job);
}

static void offsets_ran(void *arg) {
    offsets_job_t *job = arg;
    offsets_op_t *op = job->op;
    if (!op) { /* answered at its deadline while this run went on */
        job_free(job);
        return;
    }
    int all = 1;
    for (int i = 0; i < job->nslots; i++) all &= job->slots[i].done;
    op->state = all ? OFFSETS_DONE : op->woken ? OFFSETS_IDLE : OFFSETS_WAITING;
    op->woken = 0;
    /* the parked request, its own watch key, is tried again */
    st_purgatory_notify(st_server_loop_purgatory(job->loop), op);
    st_loop_wake(job->loop);
}

static void offsets_work(void *arg) {
    offsets_job_t *job = arg;
    for (int i = 0; i < job->nslots; i++)
        if (!job->slots[i].done) slot_compute(job, &job->slots[i]);
    st_loop_post(job->loop, offsets_ran, job);
}

/* The response from the slots; known (when not NULL) says which slots may
 * be read, the others answer REQUEST_TIMED_OUT. */
static void offsets_respond(st_request_t *req, offsets_job_t *job, const uint8_t *known) {
    st_list_offsets_req_t *q = req->body;
    st_list_offsets_resp_t r;
    st_schema_defaults(&st_list_offsets_resp_schema, &r);
    ST_ARRAY_ALLOC(r.topics, &req->arena, q->topics.n);
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        st_list_offsets_req_topic_t *qt = &q->topics.v[i];
        st_list_offsets_resp_topic_t *rt = &r.topics.v[i];
        rt->name = qt->name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, qt->partitions.n);
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            const offsets_slot_t *sl = &job->slots[k];
            st_list_offsets_resp_part_t *out = &rt->partitions.v[j];
            st_schema_defaults(&st_list_offsets_resp_part_schema, out);
            out->partition_index = qt->partitions.v[j].partition_index;
            ST_ARRAY_ALLOC(out->old_style_offsets, &req->arena, 0);
            int ready = known ? known[k] : sl->done;
            st_err_t e = ready ? sl->err : ST_E_REQUEST_TIMED_OUT;
            out->error_code = st_err_wire(e);
            out->offset = e ? -1 : sl->offset;
            out->timestamp = e ? -1 : sl->ts;
            out->leader_epoch = e ? -1 : sl->epoch;
            if (!e && sl->offset >= 0) {
                ST_ARRAY_ALLOC(out->old_style_offsets, &req->arena, 1);
                out->old_style_offsets.v[0] = sl->offset;
            }
        }
    }
    st_request_respond(req, &r);
}

static int offsets_try(st_delayed_t *d) {
    offsets_op_t *op = (offsets_op_t *)d;
    offsets_job_t *job = op->job;
    st_delayed_watch(d, op); /* offsets_ran notifies it */
    switch (op->state) {
    case OFFSETS_RUNNING: op->woken = 1; return 0;
    case OFFSETS_DONE: break;
    default: /* IDLE, or WAITING and woken (a download ended) */
        for (int i = 0; i < job->nslots; i++) op->known[i] = (uint8_t)job->slots[i].done;
        op->state = OFFSETS_RUNNING;
        st_pool_submit(job->srv->workers, offsets_work, job);
        return 0;
    }
    offsets_respond(op->req, job, NULL);
    return 1;
}

static void offsets_expire(st_delayed_t *d) {
    offsets_op_t *op = (offsets_op_t *)d;
    if (op->state == OFFSETS_RUNNING) {
        offsets_respond(op->req, op->job, op->known);
        op->job->op = NULL; /* the run frees its job when it comes back */
        op->job = NULL;
    } else {
        offsets_respond(op->req, op->job, NULL);
    }
}

static void offsets_destroy(st_delayed_t *d) {
    offsets_op_t *op = (offsets_op_t *)d;
    if (op->job) job_free(op->job);
    free(op->known);
    free(op);
}

void st_handle_list_offsets(st_server_t *srv, st_request_t *req) {
    st_list_offsets_req_t *q = req->body;
    offsets_job_t *job = st_calloc(1, sizeof *job);
    job->srv = srv;
    job->loop = req->loop;
    job->committed = req->hdr.api_version >= 2 && q->isolation_level == 1;
    for (int i = 0; i < q->topics.n; i++) job->nslots += q->topics.v[i].partitions.n;
    job->slots = st_calloc((size_t)job->nslots + 1, sizeof *job->slots);
    int searches = 0, k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        st_list_offsets_req_topic_t *qt = &q->topics.v[i];
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            offsets_slot_t *sl = &job->slots[k];
            size_t len = (size_t)ST_MAX(qt->name.len, 0);
            sl->topic = st_strndup(len ? qt->name.p : "", len);
            sl->topic_len = len;
            sl->partition = qt->partitions.v[j].partition_index;
            sl->leader_epoch = qt->partitions.v[j].current_leader_epoch;
            sl->timestamp = qt->partitions.v[j].timestamp;
            if (!st_topic_allowed(srv, req, ST_ACL_OP_DESCRIBE, qt->name)) {
                sl->err = ST_E_TOPIC_AUTHORIZATION_FAILED;
                sl->offset = sl->ts = -1;
                sl->epoch = -1;
                sl->done = 1;
            } else if (is_search(sl->timestamp)) {
                searches++;
            } else {
                slot_compute(job, sl); /* earliest, latest, ...: a few locked reads */
            }
        }
    }
    if (!searches) {
        offsets_respond(req, job, NULL);
        job_free(job);
        return;
    }
    offsets_op_t *op = st_calloc(1, sizeof *op);
    op->req = req;
    op->job = job;
    job->op = op;
    op->state = OFFSETS_IDLE;
    op->known = st_calloc((size_t)job->nslots + 1, 1);
    op->base.deadline_ms = st_mono_ms() + srv->cfg.remote_list_offsets_request_timeout_ms;
    op->base.try_complete = offsets_try;
    op->base.expire = offsets_expire;
    op->base.destroy = offsets_destroy;
    st_purgatory_add(st_req_purgatory(req), &op->base);
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
            if (!st_topic_allowed(srv, req, ST_ACL_OP_DELETE, qt->name)) {
                out->error_code = st_err_wire(ST_E_TOPIC_AUTHORIZATION_FAILED);
                continue;
            }
            st_partition_t *p = st_replicas_lookup(srv->rm, qt->name.p,
                                                   (size_t)ST_MAX(qt->name.len, 0),
                                                   qp->partition_index, NULL);
            st_err_t le = p ? st_partition_check_leader(p) : ST_E_UNKNOWN_TOPIC_OR_PARTITION;
            if (!le && st_partition_read_replica(p)) le = ST_E_INVALID_TOPIC_EXCEPTION;
            if (le) {
                out->error_code = st_err_wire(le);
                st_partition_release(p);
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
            st_tier_part_t *tp = e ? NULL : st_partition_tier(p);
            if (tp) st_tier_delete_records(tp, target);
            if (!e && (!tp || target >= o.log_start_offset))
                e = st_log_delete_records(p->log, target, &low);
            if (tp) st_tier_part_release(tp);
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

/* ---- OffsetForLeaderEpoch (KIP-101, KIP-320) -------------------------------------------- */

/* Where leader epoch `epoch` ends in p's log: the largest epoch at or below
 * it and the offset where the next one starts (the log end for the
 * latest).  The current leader epoch ends at the log end even before a
 * batch carries it (Kafka's leader writes it into its epoch cache when it
 * takes over). */
static void epoch_end(st_partition_t *p, int32_t epoch, int32_t *out_epoch, int64_t *out_end) {
    int32_t current = st_partition_leader_epoch(p);
    if (epoch >= 0 && epoch >= current) {
        st_log_offsets_t o;
        st_log_offsets(p->log, &o);
        *out_epoch = epoch == current ? current : -1;
        *out_end = epoch == current ? o.leo : -1;
        return;
    }
    st_log_end_offset_for_epoch(p->log, epoch, out_epoch, out_end);
}

void st_handle_offset_for_leader_epoch(st_server_t *srv, st_request_t *req) {
    st_offset_for_leader_epoch_req_t *q = req->body;
    st_offset_for_leader_epoch_resp_t r;
    st_schema_defaults(&st_offset_for_leader_epoch_resp_schema, &r);
    /* -2 (every version below 3) is the debug reader, which any replica
     * answers; consumers (-1) and followers ask the leader */
    int32_t replica = req->hdr.api_version >= 3 ? q->replica_id : -2;
    ST_ARRAY_ALLOC(r.topics, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        const st_offset_for_leader_epoch_req_topic_t *qt = &q->topics.v[i];
        st_offset_for_leader_epoch_resp_topic_t *rt = &r.topics.v[i];
        st_schema_defaults(&st_offset_for_leader_epoch_resp_topic_schema, rt);
        rt->topic = qt->topic;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, qt->partitions.n);
        for (int j = 0; j < qt->partitions.n; j++) {
            const st_offset_for_leader_epoch_req_part_t *qp = &qt->partitions.v[j];
            st_offset_for_leader_epoch_resp_part_t *rp = &rt->partitions.v[j];
            st_schema_defaults(&st_offset_for_leader_epoch_resp_part_schema, rp);
            rp->partition = qp->partition;
            /* a follower acts for the cluster, a client describes the topic */
            if (replica >= 0 ? !st_authorized_cluster(srv, req, ST_ACL_OP_CLUSTER_ACTION)
                             : !st_topic_allowed(srv, req, ST_ACL_OP_DESCRIBE, qt->topic)) {
                rp->error_code = st_err_wire(replica >= 0 ? ST_E_CLUSTER_AUTHORIZATION_FAILED
                                                          : ST_E_TOPIC_AUTHORIZATION_FAILED);
                continue;
            }
            int known = 0;
            st_partition_t *p = st_replicas_lookup(srv->rm, qt->topic.p, (size_t)ST_MAX(qt->topic.len, 0),
                                                   qp->partition, &known);
            st_err_t e = !p ? (known == 2 ? ST_E_NOT_LEADER_OR_FOLLOWER : ST_E_UNKNOWN_TOPIC_OR_PARTITION)
                            : st_check_leader_epoch(qp->current_leader_epoch, st_partition_leader_epoch(p));
            if (!e && replica != -2) e = st_partition_check_leader(p);
            if (!e) epoch_end(p, qp->leader_epoch, &rp->leader_epoch, &rp->end_offset);
            rp->error_code = st_err_wire(e);
            st_partition_release(p);
        }
    }
    st_request_respond(req, &r);
}

/*
 * h_fetch.c - Fetch: read many partitions into one response whose record
 * data goes out by sendfile; wait for min_bytes up to max_wait_ms.
 *
 * Limits (KIP-74): partition_max_bytes per partition and max_bytes for the
 * response, except that the first batch of the first partition with data
 * is returned whole even when larger, so a consumer can always progress.
 * Fetch sessions (KIP-227) are not kept: every fetch is a full fetch and
 * the session id answered is 0.
 */
#include "server.h"

#include <stdlib.h>

typedef struct fetch_op {
    st_delayed_t base;
    st_server_t *srv;
    st_request_t *req;
    st_partition_t **parts; /* per requested partition, NULL when unknown */
    int nparts;
    int32_t replica_id; /* >= 0: a follower's fetch */
    char *denied;       /* per partition: READ on its topic refused */
} fetch_op_t;

/* The file references a response holds (local segments, cached remote
 * chunks).  st_request_respond may free the request (and its arena) when
 * the connection is gone, so they are collected first and let go after. */
typedef struct held {
    st_file_t **files;
    int nfiles;
} held_t;

static void collect(const st_fetch_resp_t *r, held_t *h) {
    int cnt = 0;
    for (int i = 0; i < r->responses.n; i++) cnt += r->responses.v[i].partitions.n;
    h->files = st_malloc(sizeof *h->files * (size_t)(cnt + 1));
    h->nfiles = 0;
    for (int i = 0; i < r->responses.n; i++)
        for (int j = 0; j < r->responses.v[i].partitions.n; j++) {
            const st_records_t *rec = &r->responses.v[i].partitions.v[j].records;
            if (rec->file) h->files[h->nfiles++] = rec->file;
        }
}

static void let_go(held_t *h) {
    for (int i = 0; i < h->nfiles; i++) st_file_release(h->files[i]);
    free(h->files);
}

static void wake_loop(void *arg) { st_server_wake_all(arg); }

/* Data of one partition: a file range (local segment or cached remote
 * chunk), or none when nothing is there yet (a remote download running
 * wakes the loop when done). */
typedef struct part_data {
    st_file_t *file;
    int64_t pos;
    int32_t len;
    int64_t high_watermark, log_start_offset;
    int64_t last_stable_offset;
    int remote; /* from the bucket (metrics) */
} part_data_t;

/* isolation_level read_committed (1): a consumer reads below the last
 * stable offset and is told the aborted transactions in what it got. */
static int read_committed(const fetch_op_t *op) {
    const st_fetch_req_t *q = op->req->body;
    return op->replica_id < 0 && q->isolation_level == 1;
}

/* on_follower: a consumer's read from this broker as p's follower
 * (KIP-392): up to its own high watermark and never from the bucket (below
 * the local log start the consumer is told OFFSET_OUT_OF_RANGE and goes
 * back to the leader, as clients do). */
static st_err_t read_partition(fetch_op_t *op, st_partition_t *p, int64_t offset, int32_t limit,
                               int min_one, int on_follower, part_data_t *d) {
    memset(d, 0, sizeof *d);
    st_log_read_t rd = {0};
    st_err_t e = ST_OK;
    /* a follower reads up to the log end and never from the bucket; its
     * log start is the leader's local one */
    int follower = op->replica_id >= 0;
    int64_t lso = -1;
    if (limit > 0)
        e = follower            ? st_log_read_replica(p->log, offset, limit, min_one, &rd)
            : read_committed(op) ? st_log_read_committed(p->log, offset, limit, min_one, &rd, &lso)
                                 : st_log_read(p->log, offset, limit, min_one, &rd);
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    d->high_watermark = o.high_watermark;
    d->last_stable_offset = lso >= 0 ? lso : st_log_last_stable_offset(p->log);
    d->log_start_offset = follower ? o.log_start_offset : st_partition_log_start(p);
    if (!follower && !on_follower && e == ST_E_OFFSET_OUT_OF_RANGE && st_partition_is_remote(p, offset)) {
        /* Below the local log start: from the bucket, never blocking; a
         * read_committed one once the bucket's aborted transactions are
         * known (just after a restart or a leader change they may not be) */
        st_tier_part_t *tp = st_partition_tier(p);
        if (!tp) return ST_E_OFFSET_OUT_OF_RANGE; /* detached meanwhile */
        if (read_committed(op) && !st_tier_part_aborted_ready(tp)) {
            st_tier_part_release(tp);
            return ST_OK;
        }
        st_tier_read_t tr;
        e = st_tier_read(tp, offset, limit, min_one ? ST_TIER_READ_MIN_ONE : 0, &tr, wake_loop,
                         op->req->loop);
        st_tier_part_release(tp);
        if (e == ST_E_AGAIN) return ST_OK;
        if (e == ST_OK) {
            d->file = tr.file;
            d->pos = tr.pos;
            d->len = tr.file ? tr.len : 0;
            d->remote = 1;
        }
        return e;
    }
    if (e) return e;
    d->file = rd.file;
    d->pos = rd.pos;
    d->len = rd.file ? rd.len : 0;
    return ST_OK;
}

/* The aborted transactions a read_committed consumer must skip in what
 * it was sent (Kafka's FetchResponse.abortedTransactions): those whose
 * abort marker is at or after the fetch offset and that began below the
 * last stable offset.  Empty (not null) when none, as Kafka answers. */
#define MAX_ABORTED 4096

static void aborted_in(fetch_op_t *op, st_partition_t *p, int64_t from, const part_data_t *d,
                       st_fetch_resp_part_t *rp) {
    st_log_aborted_txn_t buf[64];
    int n = d->len ? st_log_aborted_txns(p->log, from, d->last_stable_offset, buf, 64) : 0;
    st_log_aborted_txn_t *v = buf;
    if (n > 64) {
        n = ST_MIN(n, MAX_ABORTED);
        v = st_malloc(sizeof *v * (size_t)n);
        n = ST_MIN(st_log_aborted_txns(p->log, from, d->last_stable_offset, v, n), n);
    }
    ST_ARRAY_ALLOC(rp->aborted_transactions, &op->req->arena, n);
    for (int i = 0; i < n; i++) {
        rp->aborted_transactions.v[i].producer_id = v[i].producer_id;
        rp->aborted_transactions.v[i].first_offset = v[i].first_offset;
    }
    if (v != buf) free(v);
}

/* One pass over every partition.  With out == NULL only count the bytes
 * available; otherwise fill the response.  Returns the bytes. */
static int64_t fetch_pass(fetch_op_t *op, st_fetch_resp_t *out, int *errors) {
    st_fetch_req_t *q = op->req->body;
    int64_t total = 0;
    int k = 0;
    int32_t max_bytes = q->max_bytes > 0 ? q->max_bytes : INT32_MAX;
    st_meta_image_t *img = NULL; /* taken once a preferred read replica is looked for */
    if (out) ST_ARRAY_ALLOC(out->responses, &op->req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        st_fetch_req_topic_t *qt = &q->topics.v[i];
        st_fetch_resp_topic_t *rt = out ? &out->responses.v[i] : NULL;
        if (rt) {
            rt->topic = qt->topic;
            rt->topic_id = qt->topic_id;
            ST_ARRAY_ALLOC(rt->partitions, &op->req->arena, qt->partitions.n);
        }
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            st_fetch_req_part_t *qp = &qt->partitions.v[j];
            st_fetch_resp_part_t tmp, *rp = rt ? &rt->partitions.v[j] : &tmp;
            st_schema_defaults(&st_fetch_resp_part_schema, rp);
            /* Empty, never null, also beside an error: Kafka sends empty
             * records there, and librdkafka drops a whole response that
             * holds a null one ("invalid MessageSetSize -1"). */
            rp->records.len = 0;
            rp->partition_index = qp->partition;
            st_partition_t *p = op->parts[k];
            if (op->denied[k] || !p) {
                rp->error_code = st_err_wire(op->denied[k] ? ST_E_TOPIC_AUTHORIZATION_FAILED
                                                           : ST_E_UNKNOWN_TOPIC_OR_PARTITION);
                rp->high_watermark = rp->last_stable_offset = rp->log_start_offset = -1;
                if (errors) (*errors)++;
                continue;
            }
            st_err_t e = ST_OK;
            int on_follower = 0;
            if (op->replica_id >= 0) {
                /* the follower's position, and where its log left the leader's */
                int32_t div_epoch;
                int64_t div_end;
                e = st_partition_follower_fetch(p, op->replica_id, qp->current_leader_epoch,
                                                qp->fetch_offset, qp->last_fetched_epoch,
                                                &div_epoch, &div_end);
                if (!e && div_epoch >= 0) {
                    rp->diverging_epoch.epoch = div_epoch;
                    rp->diverging_epoch.end_offset = div_end;
                    rp->high_watermark = st_partition_high_watermark(p);
                    rp->last_stable_offset = rp->high_watermark;
                    rp->log_start_offset = -1;
                    if (errors) (*errors)++; /* answered at once */
                    continue;
                }
                if (e == ST_E_OFFSET_MOVED_TO_TIERED_STORAGE || e == ST_E_OFFSET_OUT_OF_RANGE) {
                    st_log_offsets_t o;
                    st_log_offsets(p->log, &o);
                    rp->error_code = st_err_wire(e);
                    rp->high_watermark = o.high_watermark;
                    rp->last_stable_offset = o.high_watermark;
                    rp->log_start_offset = o.log_start_offset; /* the local one */
                    if (errors) (*errors)++;
                    continue;
                }
            } else {
                e = st_check_leader_epoch(qp->current_leader_epoch, st_partition_leader_epoch(p));
                if (!e) e = st_partition_check_leader(p);
                if (e == ST_E_NOT_LEADER_OR_FOLLOWER && op->req->hdr.api_version >= 11 &&
                    st_partition_check_follower(p) == ST_OK) {
                    e = ST_OK; /* KIP-392: from v11 a consumer may read a follower */
                    on_follower = 1;
                } else if (!e && q->rack_id.len > 0 && *op->srv->cfg.replica_selector_class) {
                    if (!img) img = st_controller_image(op->srv->ctl);
                    int32_t pref = st_partition_preferred_read_replica(p, q->rack_id, img);
                    if (pref >= 0) {
                        /* no records: the consumer goes to pref (answered at once) */
                        st_log_offsets_t o;
                        st_log_offsets(p->log, &o);
                        rp->preferred_read_replica = pref;
                        rp->high_watermark = o.high_watermark;
                        rp->last_stable_offset = st_log_last_stable_offset(p->log);
                        rp->log_start_offset = st_partition_log_start(p);
                        if (errors) (*errors)++;
                        continue;
                    }
                }
            }
            /* The smaller of the partition's limit and what the response
             * has left, also for the first partition: only the batch that
             * min_one lets through may pass both (KIP-74). */
            int32_t limit = qp->partition_max_bytes;
            if ((int64_t)limit > max_bytes - total) limit = (int32_t)ST_MAX(max_bytes - total, 0);
            part_data_t d = {0};
            if (!e) e = read_partition(op, p, qp->fetch_offset, limit, total == 0, on_follower, &d);
            rp->high_watermark = d.high_watermark;
            rp->last_stable_offset = d.last_stable_offset;
            rp->log_start_offset = d.log_start_offset;
            if (e) {
                rp->error_code = st_err_wire(e);
                if (e == ST_E_FENCED_LEADER_EPOCH || e == ST_E_UNKNOWN_LEADER_EPOCH ||
                    e == ST_E_NOT_LEADER_OR_FOLLOWER) {
                    /* where to go instead (the partition's leader, not the
                     * controller) */
                    rp->current_leader.leader_id = __atomic_load_n(&p->leader, __ATOMIC_ACQUIRE);
                    rp->current_leader.leader_epoch = st_partition_leader_epoch(p);
                }
                if (errors) (*errors)++;
                continue;
            }
            total += d.len;
            if (out && read_committed(op)) aborted_in(op, p, qp->fetch_offset, &d, rp);
            if (out) {
                /* let go of after the response is built */
                rp->records.file = d.file;
                rp->records.file_off = d.pos;
                rp->records.len = d.len;
                st_partition_count_out(p, d.len, op->replica_id >= 0, d.remote);
            } else {
                st_file_release(d.file);
            }
        }
    }
    if (img) st_image_release(img);
    return total;
}

static void fetch_respond(fetch_op_t *op) {
    st_fetch_resp_t r;
    st_schema_defaults(&st_fetch_resp_schema, &r);
    fetch_pass(op, &r, NULL);
    held_t h;
    collect(&r, &h);
    st_request_respond(op->req, &r); /* the encoded response keeps its own references */
    let_go(&h);
}

static int fetch_try(st_delayed_t *d) {
    fetch_op_t *op = (fetch_op_t *)d;
    st_fetch_req_t *q = op->req->body;
    int loop = st_loop_index(op->req->loop);
    for (int i = 0; i < op->nparts; i++)
        if (op->parts[i]) st_partition_watch(op->parts[i], &op->base, loop);
    int errors = 0;
    int64_t bytes = fetch_pass(op, NULL, &errors);
    if (errors == 0 && bytes < q->min_bytes && q->max_wait_ms > 0) return 0;
    fetch_respond(op);
    return 1;
}

static void fetch_expire(st_delayed_t *d) { fetch_respond((fetch_op_t *)d); }

static void fetch_destroy(st_delayed_t *d) {
    fetch_op_t *op = (fetch_op_t *)d;
    for (int i = 0; i < op->nparts; i++) st_partition_release(op->parts[i]);
    free(op->parts);
    free(op->denied);
    free(op);
}

void st_handle_fetch(st_server_t *srv, st_request_t *req) {
    st_fetch_req_t *q = req->body;
    int32_t replica_id = req->hdr.api_version >= 15 ? q->replica_state.replica_id : q->replica_id;
    /* a follower, and every node of the metadata quorum, act for the cluster */
    int raft = st_raft_wire_is_raft_fetch(req->hdr.api_version, q);
    int refused = (replica_id >= 0 || raft) &&
                  !st_authorized_cluster(srv, req, ST_ACL_OP_CLUSTER_ACTION);
    if (q->session_id != 0 || refused) {
        st_fetch_resp_t r;
        st_schema_defaults(&st_fetch_resp_schema, &r);
        r.error_code = st_err_wire(refused ? ST_E_CLUSTER_AUTHORIZATION_FAILED
                                           : ST_E_FETCH_SESSION_ID_NOT_FOUND);
        ST_ARRAY_ALLOC(r.responses, &req->arena, 0);
        st_request_respond(req, &r);
        return;
    }
    if (raft) {
        st_handle_raft_fetch(srv, req); /* another node of the metadata quorum */
        return;
    }
    fetch_op_t *op = st_calloc(1, sizeof *op);
    op->srv = srv;
    op->req = req;
    op->replica_id = replica_id;
    for (int i = 0; i < q->topics.n; i++) op->nparts += q->topics.v[i].partitions.n;
    op->parts = st_calloc((size_t)op->nparts + 1, sizeof *op->parts);
    op->denied = st_calloc((size_t)op->nparts + 1, 1);
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        st_fetch_req_topic_t *qt = &q->topics.v[i];
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            int32_t idx = qt->partitions.v[j].partition;
            /* versions with topic ids leave the name empty, older ones the id */
            op->parts[k] = st_uuid_is_zero(&qt->topic_id)
                               ? st_replicas_lookup(srv->rm, qt->topic.p,
                                                    (size_t)ST_MAX(qt->topic.len, 0), idx, NULL)
                               : st_replicas_lookup_id(srv->rm, &qt->topic_id, idx);
            /* a consumer reads: READ on the topic (by the name its id has) */
            if (replica_id < 0) {
                st_str_t name = st_uuid_is_zero(&qt->topic_id) ? qt->topic
                                : op->parts[k] ? st_str(op->parts[k]->topic)
                                               : ST_STR_NULL;
                op->denied[k] = name.len >= 0 && !st_topic_allowed(srv, req, ST_ACL_OP_READ, name);
            }
        }
    }
    int64_t wait = q->max_wait_ms > 0 ? q->max_wait_ms : 0;
    op->base.deadline_ms = st_mono_ms() + wait;
    op->base.try_complete = fetch_try;
    op->base.expire = fetch_expire;
    op->base.destroy = fetch_destroy;
    st_purgatory_add(st_req_purgatory(req), &op->base);
}

/*
 * h_group.c - the consumer group APIs: FindCoordinator, JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit,
 * OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete.
 *
 * A request's life:
 *
 *   loop thread         decode, check what needs only metadata (topics of
 *                       an OffsetCommit), copy the request's strings into
 *                       its arena, hand a job to the coordinator
 *   coordinator thread  run the state machine (broker/group); build the
 *                       response in the request's arena, at once or when a
 *                       parked JoinGroup / SyncGroup completes; post it back
 *   loop thread         wait, when the coordinator wrote for the groups
 *                       the response speaks of, until __consumer_offsets is
 *                       flushed that far and its high watermark passed it
 *                       (every in-sync replica has it, as acks=all
 *                       waits); respond
 *
 * The request, its arena and its body belong to exactly one thread at a
 * time: the handoffs go through the coordinator's queue and the loop's
 * mailbox.  FindCoordinator needs no group state: it is answered from the
 * metadata image, after creating __consumer_offsets on first use.
 */
#include "group.h"
#include "server.h"
#include "txn.h"

#include <stdlib.h>
#include <strings.h>

#define DURABLE_WAIT_MS 30000

typedef struct gwait {
    int32_t partition;
    int64_t offset;
    st_partition_t *part;
} gwait_t;

typedef struct gop {
    st_group_waiter_t w; /* first: the state machine hands it back */
    st_delayed_t d;      /* parked on the loop until the writes are durable */
    st_server_t *srv;
    st_group_coord_t *coord;
    st_request_t *req;
    void *resp;   /* in the request's arena */
    void *params; /* the API's parameters, in the request's arena */
    char *denied; /* per group (or topic) of the request: refused by the
                   * authorizer on the loop, before the coordinator sees it */
    gwait_t *waits;
    int nwaits;
} gop_t;

/* A copy in the request's arena with its length and every byte (NUL
 * included); none stays none.  Strings go to the coordinator and come back
 * this way, never through strlen. */
static st_str_t acopy(st_request_t *req, st_str_t s) {
    if (s.len < 0) return ST_STR_NULL;
    return (st_str_t){st_arena_strndup(&req->arena, s.len ? s.p : "", (size_t)s.len), s.len};
}

/* ... and none as "" (for fields that are not nullable). */
static st_str_t acopy_nn(st_request_t *req, st_str_t s) {
    return s.len < 0 ? st_str("") : acopy(req, s);
}

static st_bytes_t abytes(st_request_t *req, const uint8_t *p, int32_t len) {
    if (len <= 0) return (st_bytes_t){NULL, 0};
    uint8_t *b = st_arena_alloc(&req->arena, (size_t)len);
    memcpy(b, p, (size_t)len);
    return (st_bytes_t){b, len};
}

/* Whether a requested name could be a topic's: legal characters and
 * length (a NUL byte is not one of them).  Others are never looked up. */
static int topic_name_ok(st_str_t n) {
    char why[8];
    return n.len > 0 && st_topic_name_valid(n.p, (size_t)n.len, why, sizeof why);
}

static gop_t *gop_new(st_server_t *srv, st_request_t *req) {
    gop_t *op = st_calloc(1, sizeof *op);
    op->srv = srv;
    op->coord = srv->groups;
    op->req = req;
    return op;
}

/* The authorizer's answer for a group (loop thread: the session is the
 * connection's). */
static int group_allowed(st_server_t *srv, st_request_t *req, int8_t op, st_str_t gid) {
    return st_authorized_str(srv, req, op, ST_ACL_RES_GROUP, gid);
}



/* The response will speak of a group in this partition: it waits for what
 * the coordinator wrote there.  Coordinator thread. */
static void gop_wait(gop_t *op, int32_t partition) {
    if (partition < 0) return;
    int64_t end = st_group_coord_written_end(op->coord, partition);
    if (end <= 0) return;
    for (int i = 0; i < op->nwaits; i++) {
        if (op->waits[i].partition != partition) continue;
        op->waits[i].offset = ST_MAX(op->waits[i].offset, end);
        return;
    }
    op->waits = st_realloc(op->waits, sizeof *op->waits * (size_t)(op->nwaits + 1));
    op->waits[op->nwaits++] = (gwait_t){partition, end, NULL};
}

static void gop_free(gop_t *op) {
    for (int i = 0; i < op->nwaits; i++) st_partition_release(op->waits[i].part);
    free(op->waits);
    free(op);
}

static int durable_try(st_delayed_t *d) {
    gop_t *op = (gop_t *)((char *)d - offsetof(gop_t, d));
    int loop = st_loop_index(op->req->loop);
    st_err_t lost = ST_OK;
    for (int i = 0; i < op->nwaits; i++) {
        gwait_t *w = &op->waits[i];
        if (!w->part) continue;
        st_partition_watch(w->part, &op->d, loop);
        /* in every in-sync replica (a replicated __consumer_offsets) and
         * flushed (only then are there waits) */
        st_err_t e;
        if (!st_partition_durable(w->part, w->offset, 1, &e)) return 0;
        if (e) lost = e;
    }
    /* A coordinator that lost the partition (or its disk) before the
     * write was everywhere cannot say it is kept: the next one may not
     * have it; the client sends it again there. */
    if (lost) st_schema_set_errors(op->req->api->resp, op->resp, st_coord_append_error(lost));
    st_request_respond(op->req, op->resp);
    return 1;
}

static void durable_expire(st_delayed_t *d) {
    gop_t *op = (gop_t *)((char *)d - offsetof(gop_t, d));
    ST_LOG_RATELIMITED(ST_LOG_WARN, "group", 5000,
                       "%s answered before __consumer_offsets was flushed (%d ms)",
                       op->req->api->name, DURABLE_WAIT_MS);
    st_request_respond(op->req, op->resp);
}

static void durable_destroy(st_delayed_t *d) { gop_free((gop_t *)((char *)d - offsetof(gop_t, d))); }

static void gop_on_loop(void *arg) {
    gop_t *op = arg;
    int parked = 0;
    for (int i = 0; i < op->nwaits; i++) {
        op->waits[i].part = st_replicas_lookup(op->srv->rm, ST_GROUP_OFFSETS_TOPIC,
                                               strlen(ST_GROUP_OFFSETS_TOPIC),
                                               op->waits[i].partition, NULL);
        parked |= op->waits[i].part != NULL;
    }
    if (!parked) {
        st_request_respond(op->req, op->resp);
        gop_free(op);
        return;
    }
    op->d.deadline_ms = st_mono_ms() + DURABLE_WAIT_MS;
    op->d.try_complete = durable_try;
    op->d.expire = durable_expire;
    op->d.destroy = durable_destroy;
    st_purgatory_add(st_req_purgatory(op->req), &op->d);
}

/* Hand the finished response back to the request's loop.  Coordinator
 * thread; op is not touched afterwards. */
static void gop_finish(gop_t *op, void *resp) {
    op->resp = resp;
    st_loop_post(op->req->loop, gop_on_loop, op);
}

static void *resp_new(st_request_t *req, const st_schema_t *s) {
    void *r = st_arena_alloc(&req->arena, s->size);
    st_schema_defaults(s, r);
    return r;
}

/* "/127.0.0.1", as Kafka names a member's host */
static st_str_t client_host(st_request_t *req) {
    const char *peer = st_request_peer(req);
    const char *colon = strrchr(peer, ':');
    size_t n = colon ? (size_t)(colon - peer) : strlen(peer);
    char *h = st_arena_alloc(&req->arena, n + 2);
    h[0] = '/';
    memcpy(h + 1, peer, n);
    h[n + 1] = 0;
    return (st_str_t){h, (int32_t)(n + 1)};
}

/* ---- FindCoordinator ------------------------------------------------------ */

static void coordinator_of(st_server_t *srv, st_request_t *req, const st_meta_image_t *img,
                           st_str_t key, int8_t key_type, int32_t *node, st_str_t *host,
                           int32_t *port, int16_t *err, st_str_t *msg) {
    *node = -1;
    *host = st_str("");
    *port = -1;
    *err = st_err_wire(ST_E_COORDINATOR_NOT_AVAILABLE);
    *msg = ST_STR_NULL;
    if (key_type != 0 && key_type != 1) {
        *err = st_err_wire(ST_E_INVALID_REQUEST);
        *msg = st_str("unknown coordinator key type");
        return;
    }
    /* DESCRIBE on the group or the transactional id it asks about */
    if (!st_authorized_str(srv, req, ST_ACL_OP_DESCRIBE,
                           key_type == 0 ? ST_ACL_RES_GROUP : ST_ACL_RES_TRANSACTIONAL_ID, key)) {
        *err = st_err_wire(key_type == 0 ? ST_E_GROUP_AUTHORIZATION_FAILED
                                         : ST_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        *msg = ST_STR_NULL;
        return;
    }
    /* 0: a group's, in __consumer_offsets; 1: a transactional id's, in
     * __transaction_state (h_txn.c) */
    const char *topic = key_type == 0 ? ST_GROUP_OFFSETS_TOPIC : ST_TXN_STATE_TOPIC;
    const st_meta_topic_t *t = st_image_topic(img, topic, strlen(topic));
    if (!t || t->nparts <= 0) {
        *msg = st_str(st_err_msg(ST_E_COORDINATOR_NOT_AVAILABLE));
        return;
    }
    if (key_type == 1 && key.len <= 0) {
        *err = st_err_wire(ST_E_INVALID_REQUEST);
        *msg = st_str("empty transactional id");
        return;
    }
    int32_t p = key_type == 0
                    ? st_group_partition_for(key.p ? key.p : "", (size_t)ST_MAX(key.len, 0),
                                             st_group_coord_num_partitions(srv->groups))
                    : st_server_txn_partition_for(srv, key);
    int32_t leader = p < t->nparts ? t->parts[p].leader : -1;
    const st_meta_broker_t *b = leader >= 0 ? st_image_broker(img, leader) : NULL;
    if (b && !b->fenced) {
        *node = b->id;
        const st_meta_endpoint_t *ep = st_server_endpoint_for(srv, req, b);
        *host = acopy(req, st_str(ep ? ep->host : ""));
        *port = ep ? ep->port : 0;
        *err = 0;
        return;
    }
    *msg = st_str(st_err_msg(ST_E_COORDINATOR_NOT_AVAILABLE));
}

static void find_coordinator_respond(st_server_t *srv, st_request_t *req) {
    st_find_coordinator_req_t *q = req->body;
    st_find_coordinator_resp_t r;
    st_schema_defaults(&st_find_coordinator_resp_schema, &r);
    st_meta_image_t *img = st_controller_image(srv->ctl);
    if (req->hdr.api_version >= 4) {
        ST_ARRAY_ALLOC(r.coordinators, &req->arena, q->coordinator_keys.n);
        for (int i = 0; i < q->coordinator_keys.n; i++) {
            st_coordinator_t *c = &r.coordinators.v[i];
            st_schema_defaults(&st_coordinator_schema, c);
            c->key = q->coordinator_keys.v[i];
            coordinator_of(srv, req, img, c->key, q->key_type, &c->node_id, &c->host, &c->port,
                           &c->error_code, &c->error_message);
        }
    } else {
        coordinator_of(srv, req, img, q->key, q->key_type, &r.node_id, &r.host, &r.port,
                       &r.error_code, &r.error_message);
    }
    st_image_release(img);
    st_request_respond(req, &r);
}

void st_server_offsets_topic_spec(st_server_t *srv, st_new_topic_t *t,
                                  st_offsets_topic_configs_t *cf) {
    snprintf(cf->seg, sizeof cf->seg, "%d", (int)srv->cfg.offsets_topic_segment_bytes);
    cf->kv[0] = (st_kv_t){"cleanup.policy", "compact"};
    cf->kv[1] = (st_kv_t){"segment.bytes", cf->seg};
    memset(t, 0, sizeof *t);
    t->name = ST_GROUP_OFFSETS_TOPIC;
    t->name_len = strlen(ST_GROUP_OFFSETS_TOPIC);
    t->num_partitions = st_group_coord_num_partitions(srv->groups);
    /* capped by the brokers alive when it is made, so that one node (or a
     * cluster still starting) gets it at all */
    st_meta_image_t *img = st_controller_image(srv->ctl);
    int live = 0;
    for (int i = 0; img && i < img->nbrokers; i++) live += !img->brokers[i].fenced;
    if (img) st_image_release(img);
    t->replication_factor = (int16_t)ST_MAX(1, ST_MIN(srv->cfg.offsets_topic_replication_factor, live));
    t->configs = cf->kv;
    t->nconfigs = 2;
}

static void create_offsets_topic(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)arg;
    st_offsets_topic_configs_t cf;
    st_new_topic_t t;
    st_server_offsets_topic_spec(srv, &t, &cf);
    st_op_result_t res;
    st_controller_create_topic(ctl, &t, 0, &res);
    if (res.error && res.error != ST_E_TOPIC_ALREADY_EXISTS)
        ST_ERROR("group", "cannot create %s: %s", ST_GROUP_OFFSETS_TOPIC, res.message);
    else if (!res.error)
        ST_INFO("group", "created %s with %d partitions", ST_GROUP_OFFSETS_TOPIC,
                (int)t.num_partitions);
}

static void create_txn_topic(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)arg;
    st_server_create_txn_topic(srv, ctl);
}

static void find_coordinator_created(st_server_t *srv, st_request_t *req, void *arg) {
    (void)arg;
    find_coordinator_respond(srv, req);
}

/* Whether the principal may DESCRIBE one of the keys asked about: only
 * then does a first FindCoordinator make the internal topic. */
static int any_key_allowed(st_server_t *srv, st_request_t *req) {
    st_find_coordinator_req_t *q = req->body;
    int8_t res = q->key_type == 0 ? ST_ACL_RES_GROUP : ST_ACL_RES_TRANSACTIONAL_ID;
    if (req->hdr.api_version < 4) return st_authorized_str(srv, req, ST_ACL_OP_DESCRIBE, res, q->key);
    for (int i = 0; i < q->coordinator_keys.n; i++)
        if (st_authorized_str(srv, req, ST_ACL_OP_DESCRIBE, res, q->coordinator_keys.v[i])) return 1;
    return 0;
}

void st_handle_find_coordinator(st_server_t *srv, st_request_t *req) {
    st_find_coordinator_req_t *q = req->body;
    st_meta_image_t *img = st_controller_image(srv->ctl);
    int exists = st_image_topic(img, ST_GROUP_OFFSETS_TOPIC, strlen(ST_GROUP_OFFSETS_TOPIC)) != NULL;
    int txn_exists = st_image_topic(img, ST_TXN_STATE_TOPIC, strlen(ST_TXN_STATE_TOPIC)) != NULL;
    st_image_release(img);
    if (((!exists && q->key_type == 0) || (!txn_exists && q->key_type == 1)) &&
        any_key_allowed(srv, req)) {
        /* first use: create the topic, then answer (the client need not
         * retry on COORDINATOR_NOT_AVAILABLE) */
        st_server_via_controller(srv, req, q->key_type == 0 ? create_offsets_topic : create_txn_topic,
                                 find_coordinator_created, NULL);
        return;
    }
    find_coordinator_respond(srv, req);
}

/* ---- JoinGroup --------------------------------------------------------------- */

static void join_done(st_group_waiter_t *w, const st_group_join_result_t *res) {
    gop_t *op = (gop_t *)w;
    st_request_t *req = op->req;
    st_join_group_resp_t *r = resp_new(req, &st_join_group_resp_schema);
    r->error_code = st_err_wire(res->error);
    r->generation_id = res->generation;
    r->protocol_type = acopy(req, res->protocol_type);
    r->protocol_name = acopy(req, res->protocol_name);
    r->leader = acopy_nn(req, res->leader);
    r->skip_assignment = (int8_t)res->skip_assignment;
    r->member_id = acopy_nn(req, res->member_id);
    ST_ARRAY_ALLOC(r->members, &req->arena, res->nmembers);
    for (int i = 0; i < res->nmembers; i++) {
        st_join_group_member_t *m = &r->members.v[i];
        m->member_id = acopy_nn(req, res->members[i].member_id);
        m->group_instance_id = acopy(req, res->members[i].instance_id);
        m->metadata = abytes(req, res->members[i].metadata, res->members[i].metadata_len);
    }
    gop_wait(op, res->partition);
    gop_finish(op, r);
}

static void join_job(st_group_coord_t *c, st_gstate_t *s, void *arg) {
    (void)c;
    gop_t *op = arg;
    st_gstate_join(s, op->params, &op->w);
}

void st_handle_join_group(st_server_t *srv, st_request_t *req) {
    st_join_group_req_t *q = req->body;
    if (!group_allowed(srv, req, ST_ACL_OP_READ, q->group_id)) {
        st_server_refuse(req, ST_E_GROUP_AUTHORIZATION_FAILED);
        return;
    }
    gop_t *op = gop_new(srv, req);
    op->w.join_done = join_done;
    st_group_join_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    p->group_id = acopy_nn(req, q->group_id);
    p->member_id = acopy_nn(req, q->member_id);
    p->instance_id = acopy(req, q->group_instance_id);
    p->client_id = acopy_nn(req, req->hdr.client_id);
    p->client_host = client_host(req);
    p->protocol_type = acopy_nn(req, q->protocol_type);
    p->reason = acopy(req, q->reason);
    p->session_timeout_ms = q->session_timeout_ms;
    /* v0 has no rebalance timeout: the session timeout stands in */
    p->rebalance_timeout_ms = q->rebalance_timeout_ms >= 0 ? q->rebalance_timeout_ms
                                                           : q->session_timeout_ms;
    st_group_protocol_t *pr = st_arena_alloc(&req->arena, sizeof *pr * (size_t)(q->protocols.n + 1));
    for (int i = 0; i < q->protocols.n; i++) {
        pr[i].name = acopy_nn(req, q->protocols.v[i].name);
        pr[i].metadata = q->protocols.v[i].metadata.p;
        pr[i].metadata_len = ST_MAX(q->protocols.v[i].metadata.len, 0);
    }
    p->protocols = pr;
    p->nprotocols = q->protocols.n;
    /* KIP-394 (v4+): a dynamic member first learns its id, then joins */
    p->require_known_member_id = req->hdr.api_version >= 4 && p->instance_id.len < 0;
    p->support_skip_assignment = req->hdr.api_version >= 9;
    op->params = p;
    st_group_coord_submit(srv->groups, join_job, op);
}

/* ---- SyncGroup --------------------------------------------------------------- */

static void sync_done(st_group_waiter_t *w, const st_group_sync_result_t *res) {
    gop_t *op = (gop_t *)w;
    st_request_t *req = op->req;
    st_sync_group_resp_t *r = resp_new(req, &st_sync_group_resp_schema);
    r->error_code = st_err_wire(res->error);
    r->protocol_type = acopy(req, res->protocol_type);
    r->protocol_name = acopy(req, res->protocol_name);
    r->assignment = abytes(req, res->assignment, res->assignment_len);
    gop_wait(op, res->partition);
    gop_finish(op, r);
}

static void sync_job(st_group_coord_t *c, st_gstate_t *s, void *arg) {
    (void)c;
    gop_t *op = arg;
    st_gstate_sync(s, op->params, &op->w);
}

void st_handle_sync_group(st_server_t *srv, st_request_t *req) {
    st_sync_group_req_t *q = req->body;
    if (!group_allowed(srv, req, ST_ACL_OP_READ, q->group_id)) {
        st_server_refuse(req, ST_E_GROUP_AUTHORIZATION_FAILED);
        return;
    }
    gop_t *op = gop_new(srv, req);
    op->w.sync_done = sync_done;
    st_group_sync_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    p->group_id = acopy_nn(req, q->group_id);
    p->member_id = acopy_nn(req, q->member_id);
    p->instance_id = acopy(req, q->group_instance_id);
    p->protocol_type = acopy(req, q->protocol_type);
    p->protocol_name = acopy(req, q->protocol_name);
    p->generation = q->generation_id;
    st_group_assignment_t *a =
        st_arena_alloc(&req->arena, sizeof *a * (size_t)(q->assignments.n + 1));
    for (int i = 0; i < q->assignments.n; i++) {
        a[i].member_id = acopy_nn(req, q->assignments.v[i].member_id);
        a[i].assignment = q->assignments.v[i].assignment.p;
        a[i].assignment_len = ST_MAX(q->assignments.v[i].assignment.len, 0);
    }
    p->assignments = a;
    p->nassignments = q->assignments.n;
    op->params = p;
    st_group_coord_submit(srv->groups, sync_job, op);
}

/* ---- Heartbeat ---------------------------------------------------------------- */

typedef struct hb_params {
    st_str_t group_id, member_id, instance_id;
    int32_t generation;
} hb_params_t;

static void heartbeat_job(st_group_coord_t *c, st_gstate_t *s, void *arg) {
    (void)c;
    gop_t *op = arg;
    hb_params_t *p = op->params;
    st_heartbeat_resp_t *r = resp_new(op->req, &st_heartbeat_resp_schema);
    r->error_code = st_err_wire(
        st_gstate_heartbeat(s, p->group_id, p->member_id, p->instance_id, p->generation));
    gop_finish(op, r);
}

void st_handle_heartbeat(st_server_t *srv, st_request_t *req) {
    st_heartbeat_req_t *q = req->body;
    if (!group_allowed(srv, req, ST_ACL_OP_READ, q->group_id)) {
        st_server_refuse(req, ST_E_GROUP_AUTHORIZATION_FAILED);
        return;
    }
    gop_t *op = gop_new(srv, req);
    hb_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    p->group_id = acopy_nn(req, q->group_id);
    p->member_id = acopy_nn(req, q->member_id);
    p->instance_id = acopy(req, q->group_instance_id);
    p->generation = q->generation_id;
    op->params = p;
    st_group_coord_submit(srv->groups, heartbeat_job, op);
}

/* ---- LeaveGroup ---------------------------------------------------------------- */

typedef struct leave_params {
    st_str_t group_id;
    st_group_leave_member_t *members;
    int n;
    int batched; /* v3+: members in the response */
} leave_params_t;

static void leave_job(st_group_coord_t *c, st_gstate_t *s, void *arg) {
    (void)c;
    gop_t *op = arg;
    leave_params_t *p = op->params;
    st_request_t *req = op->req;
    st_err_t top = st_gstate_leave(s, p->group_id, p->members, p->n);
    st_leave_group_resp_t *r = resp_new(req, &st_leave_group_resp_schema);
    r->error_code = st_err_wire(top);
    if (!p->batched) {
        /* v0-2: the one member's error is the answer */
        if (!top && p->n == 1) r->error_code = st_err_wire(p->members[0].error);
        ST_ARRAY_ALLOC(r->members, &req->arena, 0);
    } else {
        ST_ARRAY_ALLOC(r->members, &req->arena, top ? 0 : p->n);
        for (int i = 0; !top && i < p->n; i++) {
            r->members.v[i].member_id = acopy_nn(req, p->members[i].member_id);
            r->members.v[i].group_instance_id = acopy(req, p->members[i].instance_id);
            r->members.v[i].error_code = st_err_wire(p->members[i].error);
        }
    }
    if (!top) gop_wait(op, st_gstate_partition_of(s, p->group_id));
    gop_finish(op, r);
}

void st_handle_leave_group(st_server_t *srv, st_request_t *req) {
    st_leave_group_req_t *q = req->body;
    if (!group_allowed(srv, req, ST_ACL_OP_READ, q->group_id)) {
        st_server_refuse(req, ST_E_GROUP_AUTHORIZATION_FAILED);
        return;
    }
    gop_t *op = gop_new(srv, req);
    leave_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    p->group_id = acopy_nn(req, q->group_id);
    p->batched = req->hdr.api_version >= 3;
    if (!p->batched) {
        p->n = 1;
        p->members = st_arena_alloc(&req->arena, sizeof *p->members);
        p->members[0] = (st_group_leave_member_t){acopy_nn(req, q->member_id), ST_STR_NULL,
                                                  ST_STR_NULL, ST_OK};
    } else {
        p->n = q->members.n;
        p->members = st_arena_alloc(&req->arena, sizeof *p->members * (size_t)(p->n + 1));
        for (int i = 0; i < p->n; i++) {
            p->members[i].member_id = acopy_nn(req, q->members.v[i].member_id);
            p->members[i].instance_id = acopy(req, q->members.v[i].group_instance_id);
            p->members[i].reason = acopy(req, q->members.v[i].reason);
            p->members[i].error = ST_OK;
        }
    }
    op->params = p;
    st_group_coord_submit(srv->groups, leave_job, op);
}

/* ---- OffsetCommit -------------------------------------------------------------- */

typedef struct commit_params {
    st_str_t group_id, member_id, instance_id;
    int32_t generation;
    st_group_commit_t *c;
    int n;
} commit_params_t;

static void commit_job(st_group_coord_t *co, st_gstate_t *s, void *arg) {
    (void)co;
    gop_t *op = arg;
    commit_params_t *p = op->params;
    st_request_t *req = op->req;
    st_offset_commit_req_t *q = req->body;
    st_gstate_commit(s, p->group_id, p->member_id, p->instance_id, p->generation, p->c, p->n);
    st_offset_commit_resp_t *r = resp_new(req, &st_offset_commit_resp_schema);
    ST_ARRAY_ALLOC(r->topics, &req->arena, q->topics.n);
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        st_offset_commit_resp_topic_t *rt = &r->topics.v[i];
        rt->name = q->topics.v[i].name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, q->topics.v[i].partitions.n);
        for (int j = 0; j < q->topics.v[i].partitions.n; j++, k++) {
            rt->partitions.v[j].partition_index = q->topics.v[i].partitions.v[j].partition_index;
            rt->partitions.v[j].error_code = st_err_wire(p->c[k].error);
        }
    }
    if (st_gstate_check(s, p->group_id, 1) == ST_OK)
        gop_wait(op, st_gstate_partition_of(s, p->group_id));
    gop_finish(op, r);
}

/* Every partition of a commit answered e (the group refused). */
static void refuse_commit(st_request_t *req, st_err_t e) {
    st_offset_commit_req_t *q = req->body;
    st_offset_commit_resp_t *r = resp_new(req, &st_offset_commit_resp_schema);
    ST_ARRAY_ALLOC(r->topics, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        st_offset_commit_resp_topic_t *rt = &r->topics.v[i];
        rt->name = q->topics.v[i].name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, q->topics.v[i].partitions.n);
        for (int j = 0; j < q->topics.v[i].partitions.n; j++) {
            rt->partitions.v[j].partition_index = q->topics.v[i].partitions.v[j].partition_index;
            rt->partitions.v[j].error_code = st_err_wire(e);
        }
    }
    st_request_respond(req, r);
}

void st_handle_offset_commit(st_server_t *srv, st_request_t *req) {
    st_offset_commit_req_t *q = req->body;
    /* READ on the group, then READ on each topic (KafkaApis's order) */
    if (!group_allowed(srv, req, ST_ACL_OP_READ, q->group_id)) {
        refuse_commit(req, ST_E_GROUP_AUTHORIZATION_FAILED);
        return;
    }
    gop_t *op = gop_new(srv, req);
    commit_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    p->group_id = acopy_nn(req, q->group_id);
    p->member_id = acopy_nn(req, q->member_id);
    p->instance_id = acopy(req, q->group_instance_id);
    p->generation = q->generation_id;
    for (int i = 0; i < q->topics.n; i++) p->n += q->topics.v[i].partitions.n;
    p->c = st_arena_alloc(&req->arena, sizeof *p->c * (size_t)(p->n + 1));
    int64_t now = st_now_ms();
    st_meta_image_t *img = st_controller_image(srv->ctl);
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        st_offset_commit_req_topic_t *qt = &q->topics.v[i];
        /* a name that could not be a topic (a NUL byte, ...) is never looked
         * up: it names no topic, and must not match a shorter one */
        const st_meta_topic_t *t =
            topic_name_ok(qt->name) ? st_image_topic(img, qt->name.p, (size_t)qt->name.len) : NULL;
        st_str_t topic = acopy_nn(req, qt->name);
        int topic_denied = !st_topic_allowed(srv, req, ST_ACL_OP_READ, qt->name);
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            st_offset_commit_req_part_t *qp = &qt->partitions.v[j];
            st_group_commit_t *c = &p->c[k];
            c->topic = topic;
            c->partition = qp->partition_index;
            c->offset = qp->committed_offset;
            c->leader_epoch = qp->committed_leader_epoch;
            c->metadata = acopy(req, qp->committed_metadata);
            c->commit_ts = qp->commit_timestamp; /* v1 only; else -1: now */
            /* v2-4: a retention of the commit's own */
            c->expire_ts = q->retention_time_ms >= 0 ? now + q->retention_time_ms : -1;
            if (topic_denied) c->error = ST_E_TOPIC_AUTHORIZATION_FAILED;
            else if (!t || qp->partition_index < 0 || qp->partition_index >= t->nparts)
                c->error = ST_E_UNKNOWN_TOPIC_OR_PARTITION;
        }
    }
    st_image_release(img);
    op->params = p;
    st_group_coord_submit(srv->groups, commit_job, op);
}

/* ---- TxnOffsetCommit ----------------------------------------------------------- */

typedef struct txn_commit_params {
    st_group_txn_commit_params_t t;
    st_group_commit_t *c;
    int n;
} txn_commit_params_t;

static void txn_commit_job(st_group_coord_t *co, st_gstate_t *s, void *arg) {
    (void)co;
    gop_t *op = arg;
    txn_commit_params_t *p = op->params;
    st_request_t *req = op->req;
    st_txn_offset_commit_req_t *q = req->body;
    st_gstate_txn_commit(s, &p->t, p->c, p->n);
    st_txn_offset_commit_resp_t *r = resp_new(req, &st_txn_offset_commit_resp_schema);
    ST_ARRAY_ALLOC(r->topics, &req->arena, q->topics.n);
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        st_txn_offset_commit_resp_topic_t *rt = &r->topics.v[i];
        rt->name = q->topics.v[i].name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, q->topics.v[i].partitions.n);
        for (int j = 0; j < q->topics.v[i].partitions.n; j++, k++) {
            rt->partitions.v[j].partition_index = q->topics.v[i].partitions.v[j].partition_index;
            rt->partitions.v[j].error_code = st_err_wire(p->c[k].error);
        }
    }
    if (st_gstate_check(s, p->t.group_id, 0) == ST_OK)
        gop_wait(op, st_gstate_partition_of(s, p->t.group_id));
    gop_finish(op, r);
}

/* Every partition of a transactional commit answered e. */
static void refuse_txn_commit(st_request_t *req, st_err_t e) {
    st_txn_offset_commit_req_t *q = req->body;
    st_txn_offset_commit_resp_t *r = resp_new(req, &st_txn_offset_commit_resp_schema);
    ST_ARRAY_ALLOC(r->topics, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        st_txn_offset_commit_resp_topic_t *rt = &r->topics.v[i];
        rt->name = q->topics.v[i].name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, q->topics.v[i].partitions.n);
        for (int j = 0; j < q->topics.v[i].partitions.n; j++) {
            rt->partitions.v[j].partition_index = q->topics.v[i].partitions.v[j].partition_index;
            rt->partitions.v[j].error_code = st_err_wire(e);
        }
    }
    st_request_respond(req, r);
}

void st_handle_txn_offset_commit(st_server_t *srv, st_request_t *req) {
    st_txn_offset_commit_req_t *q = req->body;
    /* WRITE on the transactional id, READ on the group, READ on each topic */
    if (!st_authorized_str(srv, req, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID,
                           q->transactional_id)) {
        refuse_txn_commit(req, ST_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        return;
    }
    if (!group_allowed(srv, req, ST_ACL_OP_READ, q->group_id)) {
        refuse_txn_commit(req, ST_E_GROUP_AUTHORIZATION_FAILED);
        return;
    }
    gop_t *op = gop_new(srv, req);
    txn_commit_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    memset(p, 0, sizeof *p);
    p->t.group_id = acopy_nn(req, q->group_id);
    p->t.transactional_id = acopy_nn(req, q->transactional_id);
    p->t.producer_id = q->producer_id;
    p->t.producer_epoch = q->producer_epoch;
    p->t.generation = q->generation_id; /* -1 before v3 */
    p->t.member_id = acopy_nn(req, q->member_id);
    p->t.instance_id = acopy(req, q->group_instance_id);
    for (int i = 0; i < q->topics.n; i++) p->n += q->topics.v[i].partitions.n;
    p->c = st_arena_alloc(&req->arena, sizeof *p->c * (size_t)(p->n + 1));
    memset(p->c, 0, sizeof *p->c * (size_t)(p->n + 1));
    st_meta_image_t *img = st_controller_image(srv->ctl);
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        st_txn_offset_commit_req_topic_t *qt = &q->topics.v[i];
        const st_meta_topic_t *t =
            topic_name_ok(qt->name) ? st_image_topic(img, qt->name.p, (size_t)qt->name.len) : NULL;
        st_str_t topic = acopy_nn(req, qt->name);
        int topic_denied = !st_topic_allowed(srv, req, ST_ACL_OP_READ, qt->name);
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            st_txn_offset_commit_req_part_t *qp = &qt->partitions.v[j];
            st_group_commit_t *c = &p->c[k];
            c->topic = topic;
            c->partition = qp->partition_index;
            c->offset = qp->committed_offset;
            c->leader_epoch = qp->committed_leader_epoch;
            c->metadata = acopy(req, qp->committed_metadata);
            c->commit_ts = c->expire_ts = -1;
            c->error = ST_OK;
            if (topic_denied) c->error = ST_E_TOPIC_AUTHORIZATION_FAILED;
            else if (!t || qp->partition_index < 0 || qp->partition_index >= t->nparts)
                c->error = ST_E_UNKNOWN_TOPIC_OR_PARTITION;
        }
    }
    st_image_release(img);
    op->params = p;
    st_group_coord_submit(srv->groups, txn_commit_job, op);
}

/* ---- OffsetFetch ---------------------------------------------------------------- */

typedef struct collect {
    const st_goffset_t **v;
    int n, cap;
} collect_t;

static void collect_offset(const st_goffset_t *o, void *arg) {
    collect_t *c = arg;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 32;
        c->v = st_realloc(c->v, sizeof *c->v * (size_t)c->cap);
    }
    c->v[c->n++] = o;
}

static int cmp_offset(const void *a, const void *b) {
    const st_goffset_t *x = *(const st_goffset_t *const *)a, *y = *(const st_goffset_t *const *)b;
    int c = st_gstr_cmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static void fill_fetch_part(st_request_t *req, st_offset_fetch_resp_part_t *rp, int32_t partition,
                            const st_goffset_t *o, st_err_t e) {
    if (e == ST_E_UNSTABLE_OFFSET_COMMIT) o = NULL; /* no offset with it (Kafka's INVALID_OFFSET) */
    st_schema_defaults(&st_offset_fetch_resp_part_schema, rp);
    rp->partition_index = partition;
    rp->committed_offset = o ? o->offset : -1;
    rp->committed_leader_epoch = o ? o->leader_epoch : -1;
    rp->metadata = o ? acopy_nn(req, o->metadata) : st_str("");
    rp->error_code = st_err_wire(e);
}

/* The error of one partition's answer: with require_stable (v7+) a
 * partition whose offset a transaction may still change answers
 * UNSTABLE_OFFSET_COMMIT (the client retries); without, the committed
 * offset stands. */
static st_err_t stable_error(st_group_t *g, int require_stable, st_str_t topic, int32_t part) {
    return g && require_stable && st_gstate_txn_pending(g, topic, part) ? ST_E_UNSTABLE_OFFSET_COMMIT
                                                                      : ST_OK;
}

/* Offsets of one group: the topics asked for (NULL: every committed one).
 * Returns the group's error; with per_partition_errors (v0-1) the error
 * goes into each requested partition instead. */
static st_err_t fetch_group(st_gstate_t *s, st_request_t *req, st_str_t group_id,
                            const st_offset_fetch_req_topic_t *topics, int ntopics,
                            int per_partition_errors, int require_stable,
                            st_offset_fetch_resp_topic_t **out, int *nout) {
    st_err_t e = st_gstate_check(s, group_id, 1);
    st_group_t *g = e ? NULL : st_gstate_group(s, group_id);
    *out = NULL;
    *nout = 0;
    if (e && !per_partition_errors) return e;
    if (topics) {
        st_offset_fetch_resp_topic_t *rt = st_arena_alloc(&req->arena, sizeof *rt * (size_t)(ntopics + 1));
        for (int i = 0; i < ntopics; i++) {
            rt[i].name = topics[i].name;
            st_str_t topic = topics[i].name;
            ST_ARRAY_ALLOC(rt[i].partitions, &req->arena, topics[i].partition_indexes.n);
            for (int j = 0; j < topics[i].partition_indexes.n; j++) {
                int32_t part = topics[i].partition_indexes.v[j];
                st_err_t pe = e ? e : stable_error(g, require_stable, topic, part);
                fill_fetch_part(req, &rt[i].partitions.v[j], part,
                                g ? st_gstate_offset(g, topic, part) : NULL, pe);
            }
        }
        *out = rt;
        *nout = ntopics;
        return e;
    }
    if (!g) return e;
    collect_t c = {0};
    st_gstate_foreach_offset(g, collect_offset, &c);
    if (c.n) qsort(c.v, (size_t)c.n, sizeof *c.v, cmp_offset);
    int nt = 0;
    for (int i = 0; i < c.n; i++) nt += i == 0 || !st_gstr_eq(c.v[i]->topic, c.v[i - 1]->topic);
    st_offset_fetch_resp_topic_t *rt = st_arena_alloc(&req->arena, sizeof *rt * (size_t)(nt + 1));
    int t = -1;
    for (int i = 0, first = 0; i < c.n; i++) {
        if (i == 0 || !st_gstr_eq(c.v[i]->topic, c.v[i - 1]->topic)) {
            t++;
            first = i;
            int cnt = 0;
            while (i + cnt < c.n && st_gstr_eq(c.v[i + cnt]->topic, c.v[i]->topic)) cnt++;
            rt[t].name = acopy_nn(req, c.v[i]->topic);
            ST_ARRAY_ALLOC(rt[t].partitions, &req->arena, cnt);
        }
        fill_fetch_part(req, &rt[t].partitions.v[i - first], c.v[i]->partition, c.v[i],
                        stable_error(g, require_stable, c.v[i]->topic, c.v[i]->partition));
    }
    free(c.v);
    *out = rt;
    *nout = nt;
    return ST_OK;
}

static void fetch_job(st_group_coord_t *co, st_gstate_t *s, void *arg) {
    (void)co;
    gop_t *op = arg;
    st_request_t *req = op->req;
    st_offset_fetch_req_t *q = req->body;
    st_offset_fetch_resp_t *r = resp_new(req, &st_offset_fetch_resp_schema);
    st_offset_fetch_resp_topic_t *topics;
    int n;
    if (req->hdr.api_version >= 8) {
        ST_ARRAY_ALLOC(r->groups, &req->arena, q->groups.n);
        for (int i = 0; i < q->groups.n; i++) {
            st_offset_fetch_req_group_t *qg = &q->groups.v[i];
            st_offset_fetch_resp_group_t *rg = &r->groups.v[i];
            st_str_t gid = qg->group_id;
            rg->group_id = qg->group_id;
            if (op->denied[i]) {
                rg->error_code = st_err_wire(ST_E_GROUP_AUTHORIZATION_FAILED);
                ST_ARRAY_ALLOC(rg->topics, &req->arena, 0);
                continue;
            }
            st_err_t e = fetch_group(s, req, gid, qg->topics.n < 0 ? NULL : qg->topics.v,
                                     qg->topics.n, 0, q->require_stable, &topics, &n);
            rg->error_code = st_err_wire(e);
            rg->topics.v = topics;
            rg->topics.n = n;
            if (!e) gop_wait(op, st_gstate_partition_of(s, gid));
        }
    } else {
        st_str_t gid = q->group_id;
        int v01 = req->hdr.api_version < 2;
        st_err_t e = fetch_group(s, req, gid, q->topics.n < 0 ? NULL : q->topics.v, q->topics.n,
                                 v01, q->require_stable, &topics, &n);
        r->error_code = st_err_wire(e);
        r->topics.v = topics;
        r->topics.n = n;
        if (!e) gop_wait(op, st_gstate_partition_of(s, gid));
    }
    gop_finish(op, r);
}

/* The topics of one group's answer that the principal may not describe:
 * taken out when the group's every topic was asked for, answered
 * TOPIC_AUTHORIZATION_FAILED when named (Kafka's handleOffsetFetchRequest). */
static void fetch_filter_topics(st_server_t *srv, st_request_t *req, st_offset_fetch_resp_topic_t *v,
                                int32_t *n, int named) {
    int k = 0;
    for (int i = 0; i < *n; i++) {
        if (st_topic_allowed(srv, req, ST_ACL_OP_DESCRIBE, v[i].name)) {
            v[k++] = v[i];
            continue;
        }
        if (!named) continue;
        for (int j = 0; j < v[i].partitions.n; j++) {
            st_offset_fetch_resp_part_t *rp = &v[i].partitions.v[j];
            rp->committed_offset = -1;
            rp->committed_leader_epoch = -1;
            rp->metadata = st_str("");
            rp->error_code = st_err_wire(ST_E_TOPIC_AUTHORIZATION_FAILED);
        }
        v[k++] = v[i];
    }
    *n = k;
}

/* on_respond (loop thread): the answer filtered before it goes */
static void fetch_post(st_request_t *req, void *body) {
    st_server_t *srv = req->on_respond_arg;
    st_offset_fetch_req_t *q = req->body;
    st_offset_fetch_resp_t *r = body;
    if (req->hdr.api_version >= 8) {
        for (int i = 0; i < r->groups.n && i < q->groups.n; i++)
            fetch_filter_topics(srv, req, r->groups.v[i].topics.v, &r->groups.v[i].topics.n,
                                q->groups.v[i].topics.n >= 0);
    } else {
        fetch_filter_topics(srv, req, r->topics.v, &r->topics.n, q->topics.n >= 0);
    }
}

void st_handle_offset_fetch(st_server_t *srv, st_request_t *req) {
    st_offset_fetch_req_t *q = req->body;
    /* DESCRIBE on each group here; its topics once the answer is made */
    if (req->hdr.api_version < 8 && !group_allowed(srv, req, ST_ACL_OP_DESCRIBE, q->group_id)) {
        st_offset_fetch_resp_t *r = resp_new(req, &st_offset_fetch_resp_schema);
        ST_ARRAY_ALLOC(r->topics, &req->arena, 0);
        r->error_code = st_err_wire(ST_E_GROUP_AUTHORIZATION_FAILED);
        if (req->hdr.api_version < 2) { /* no top-level error: on every partition asked */
            ST_ARRAY_ALLOC(r->topics, &req->arena, ST_MAX(q->topics.n, 0));
            for (int i = 0; i < r->topics.n; i++) {
                r->topics.v[i].name = q->topics.v[i].name;
                ST_ARRAY_ALLOC(r->topics.v[i].partitions, &req->arena, q->topics.v[i].partition_indexes.n);
                for (int j = 0; j < q->topics.v[i].partition_indexes.n; j++)
                    fill_fetch_part(req, &r->topics.v[i].partitions.v[j],
                                    q->topics.v[i].partition_indexes.v[j], NULL,
                                    ST_E_GROUP_AUTHORIZATION_FAILED);
            }
        }
        st_request_respond(req, r);
        return;
    }
    gop_t *op = gop_new(srv, req);
    if (req->hdr.api_version >= 8) {
        op->denied = st_arena_alloc(&req->arena, (size_t)q->groups.n + 1);
        for (int i = 0; i < q->groups.n; i++)
            op->denied[i] = !group_allowed(srv, req, ST_ACL_OP_DESCRIBE, q->groups.v[i].group_id);
    }
    if (*srv->sec->authorizer_class_name) {
        req->on_respond = fetch_post;
        req->on_respond_arg = srv;
    }
    st_group_coord_submit(srv->groups, fetch_job, op);
}

/* ---- DescribeGroups ---------------------------------------------------------------- */

static void describe_job(st_group_coord_t *co, st_gstate_t *s, void *arg) {
    (void)co;
    gop_t *op = arg;
    st_request_t *req = op->req;
    st_describe_groups_req_t *q = req->body;
    st_describe_groups_resp_t *r = resp_new(req, &st_describe_groups_resp_schema);
    ST_ARRAY_ALLOC(r->groups, &req->arena, q->groups.n);
    for (int i = 0; i < q->groups.n; i++) {
        st_described_group_t *d = &r->groups.v[i];
        st_schema_defaults(&st_described_group_schema, d);
        d->group_id = q->groups.v[i];
        ST_ARRAY_ALLOC(d->members, &req->arena, 0);
        if (op->denied[i]) {
            d->error_code = st_err_wire(ST_E_GROUP_AUTHORIZATION_FAILED);
            continue;
        }
        st_str_t gid = q->groups.v[i];
        st_err_t e = st_gstate_check(s, gid, 1);
        d->error_code = st_err_wire(e);
        if (e) continue;
        st_group_t *g = st_gstate_group(s, gid);
        if (!g) {
            d->group_state = st_str("Dead");
            continue;
        }
        int stable = g->state == ST_GROUP_STABLE;
        d->group_state = st_str(st_group_state_name(g->state));
        d->protocol_type = acopy_nn(req, g->protocol_type);
        d->protocol_data = stable ? acopy_nn(req, g->protocol_name) : st_str("");
        ST_ARRAY_ALLOC(d->members, &req->arena, g->nmembers);
        for (int k = 0; k < g->nmembers; k++) {
            const st_gmember_t *m = g->members[k];
            st_described_group_member_t *dm = &d->members.v[k];
            st_schema_defaults(&st_described_group_member_schema, dm);
            dm->member_id = acopy_nn(req, m->member_id);
            dm->group_instance_id = acopy(req, m->instance_id);
            dm->client_id = acopy_nn(req, m->client_id);
            dm->client_host = acopy_nn(req, m->client_host);
            if (!stable) continue; /* metadata and assignment only when stable */
            for (int j = 0; j < m->nprotocols; j++)
                if (g->protocol_name.len >= 0 && st_gstr_eq(m->protocols[j].name, g->protocol_name))
                    dm->member_metadata = abytes(req, m->protocols[j].metadata,
                                                 m->protocols[j].metadata_len);
            dm->member_assignment = abytes(req, m->assignment, m->assignment_len);
        }
        gop_wait(op, g->partition);
    }
    gop_finish(op, r);
}

/* KIP-430: the group operations each group may see (loop thread). */
static void describe_post(st_request_t *req, void *body) {
    st_server_t *srv = req->on_respond_arg;
    st_describe_groups_req_t *q = req->body;
    st_describe_groups_resp_t *r = body;
    for (int i = 0; q->include_authorized_operations && i < r->groups.n; i++)
        if (r->groups.v[i].error_code != st_err_wire(ST_E_GROUP_AUTHORIZATION_FAILED))
            r->groups.v[i].authorized_operations =
                st_authorized_ops(srv, req, ST_ACL_RES_GROUP, r->groups.v[i].group_id.p,
                                  (size_t)ST_MAX(r->groups.v[i].group_id.len, 0), ST_ACL_OPS_GROUP);
}

void st_handle_describe_groups(st_server_t *srv, st_request_t *req) {
    st_describe_groups_req_t *q = req->body;
    gop_t *op = gop_new(srv, req);
    op->denied = st_arena_alloc(&req->arena, (size_t)q->groups.n + 1);
    for (int i = 0; i < q->groups.n; i++)
        op->denied[i] = !group_allowed(srv, req, ST_ACL_OP_DESCRIBE, q->groups.v[i]);
    req->on_respond = describe_post;
    req->on_respond_arg = srv;
    st_group_coord_submit(srv->groups, describe_job, op);
}

/* ---- ListGroups --------------------------------------------------------------------- */

typedef struct list_ctx {
    st_request_t *req;
    st_list_groups_resp_t *r;
    const st_list_groups_req_t *q;
    int cap;
} list_ctx_t;

/* Whether name is in a filter; an empty filter takes every name.  Both
 * filters compare without case, as Kafka's group coordinator does. */
static int filter_takes(const st_str_t *f, int32_t n, const char *name) {
    if (n <= 0) return 1;
    size_t len = strlen(name);
    for (int i = 0; i < n; i++)
        if (f[i].len >= 0 && (size_t)f[i].len == len && !strncasecmp(f[i].p, name, len)) return 1;
    return 0;
}

/* Every group here runs the classic protocol (KIP-848's "classic" type);
 * a types filter without it lists none. */
#define GROUP_TYPE_CLASSIC "classic"

static void list_one(st_group_t *g, void *arg) {
    list_ctx_t *c = arg;
    const char *state = st_group_state_name(g->state);
    if (!filter_takes(c->q->states_filter.v, c->q->states_filter.n, state)) return;
    if (!filter_takes(c->q->types_filter.v, c->q->types_filter.n, GROUP_TYPE_CLASSIC)) return;
    if (c->r->groups.n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 16;
        st_listed_group_t *v = st_arena_alloc(&c->req->arena, sizeof *v * (size_t)c->cap);
        if (c->r->groups.n) memcpy(v, c->r->groups.v, sizeof *v * (size_t)c->r->groups.n);
        c->r->groups.v = v;
    }
    st_listed_group_t *l = &c->r->groups.v[c->r->groups.n++];
    l->group_id = acopy_nn(c->req, g->id);
    l->protocol_type = acopy_nn(c->req, g->protocol_type);
    l->group_state = st_str(state);
    l->group_type = st_str(GROUP_TYPE_CLASSIC);
}

static void list_job(st_group_coord_t *co, st_gstate_t *s, void *arg) {
    (void)co;
    gop_t *op = arg;
    st_request_t *req = op->req;
    st_list_groups_resp_t *r = resp_new(req, &st_list_groups_resp_schema);
    ST_ARRAY_ALLOC(r->groups, &req->arena, 0);
    if (st_gstate_closed(s)) {
        r->error_code = st_err_wire(ST_E_COORDINATOR_NOT_AVAILABLE);
    } else {
        list_ctx_t c = {req, r, req->body, 0};
        st_gstate_foreach_group(s, list_one, &c);
        if (st_gstate_loading(s)) r->error_code = st_err_wire(ST_E_COORDINATOR_LOAD_IN_PROGRESS);
    }
    gop_finish(op, r);
}

/* Without DESCRIBE on the cluster, the groups the principal may
 * describe (Kafka's handleListGroupsRequest). */
static void list_post(st_request_t *req, void *body) {
    st_list_groups_resp_t *r = body;
    int k = 0;
    for (int i = 0; i < r->groups.n; i++)
        if (group_allowed(req->on_respond_arg, req, ST_ACL_OP_DESCRIBE, r->groups.v[i].group_id))
            r->groups.v[k++] = r->groups.v[i];
    r->groups.n = k;
}

void st_handle_list_groups(st_server_t *srv, st_request_t *req) {
    gop_t *op = gop_new(srv, req);
    if (!st_authorized_cluster(srv, req, ST_ACL_OP_DESCRIBE)) {
        req->on_respond = list_post;
        req->on_respond_arg = srv;
    }
    st_group_coord_submit(srv->groups, list_job, op);
}

/* ---- DeleteGroups --------------------------------------------------------------------- */

static void delete_groups_job(st_group_coord_t *co, st_gstate_t *s, void *arg) {
    (void)co;
    gop_t *op = arg;
    st_request_t *req = op->req;
    st_delete_groups_req_t *q = req->body;
    st_delete_groups_resp_t *r = resp_new(req, &st_delete_groups_resp_schema);
    ST_ARRAY_ALLOC(r->results, &req->arena, q->groups_names.n);
    for (int i = 0; i < q->groups_names.n; i++) {
        st_str_t gid = q->groups_names.v[i];
        st_err_t e = op->denied[i] ? ST_E_GROUP_AUTHORIZATION_FAILED
                                   : st_gstate_delete_group(s, gid);
        r->results.v[i].group_id = q->groups_names.v[i];
        r->results.v[i].error_code = st_err_wire(e);
        if (!e) gop_wait(op, st_gstate_partition_of(s, gid));
    }
    gop_finish(op, r);
}

void st_handle_delete_groups(st_server_t *srv, st_request_t *req) {
    st_delete_groups_req_t *q = req->body;
    gop_t *op = gop_new(srv, req);
    op->denied = st_arena_alloc(&req->arena, (size_t)q->groups_names.n + 1);
    for (int i = 0; i < q->groups_names.n; i++)
        op->denied[i] = !group_allowed(srv, req, ST_ACL_OP_DELETE, q->groups_names.v[i]);
    st_group_coord_submit(srv->groups, delete_groups_job, op);
}

/* ---- OffsetDelete ------------------------------------------------------------------------ */

typedef struct odel_params {
    st_group_offset_delete_t *d;
    st_err_t *pre; /* UNKNOWN_TOPIC_OR_PARTITION found on the loop */
    int n;
} odel_params_t;

static void offset_delete_job(st_group_coord_t *co, st_gstate_t *s, void *arg) {
    (void)co;
    gop_t *op = arg;
    st_request_t *req = op->req;
    st_offset_delete_req_t *q = req->body;
    odel_params_t *p = op->params;
    st_str_t gid = q->group_id;
    /* only partitions that exist are handed to the group */
    st_group_offset_delete_t *known = st_arena_alloc(&req->arena, sizeof *known * (size_t)(p->n + 1));
    int nk = 0;
    for (int i = 0; i < p->n; i++)
        if (!p->pre[i]) known[nk++] = p->d[i];
    st_err_t e = st_gstate_delete_offsets(s, gid, known, nk);
    st_offset_delete_resp_t *r = resp_new(req, &st_offset_delete_resp_schema);
    r->error_code = st_err_wire(e);
    ST_ARRAY_ALLOC(r->topics, &req->arena, e ? 0 : q->topics.n);
    for (int i = 0, k = 0, kk = 0; !e && i < q->topics.n; i++) {
        st_offset_delete_resp_topic_t *rt = &r->topics.v[i];
        rt->name = q->topics.v[i].name;
        ST_ARRAY_ALLOC(rt->partitions, &req->arena, q->topics.v[i].partitions.n);
        for (int j = 0; j < q->topics.v[i].partitions.n; j++, k++) {
            rt->partitions.v[j].partition_index = q->topics.v[i].partitions.v[j].partition_index;
            if (p->pre[k]) {
                rt->partitions.v[j].error_code = st_err_wire(p->pre[k]);
                continue;
            }
            rt->partitions.v[j].error_code = known[kk++].subscribed ? st_err_wire(ST_E_GROUP_SUBSCRIBED_TO_TOPIC) : 0;
        }
    }
    if (!e) gop_wait(op, st_gstate_partition_of(s, gid));
    gop_finish(op, r);
}

void st_handle_offset_delete(st_server_t *srv, st_request_t *req) {
    st_offset_delete_req_t *q = req->body;
    if (!group_allowed(srv, req, ST_ACL_OP_DELETE, q->group_id)) {
        st_server_refuse(req, ST_E_GROUP_AUTHORIZATION_FAILED);
        return;
    }
    gop_t *op = gop_new(srv, req);
    odel_params_t *p = st_arena_alloc(&req->arena, sizeof *p);
    for (int i = 0; i < q->topics.n; i++) p->n += q->topics.v[i].partitions.n;
    p->d = st_arena_alloc(&req->arena, sizeof *p->d * (size_t)(p->n + 1));
    p->pre = st_arena_alloc(&req->arena, sizeof *p->pre * (size_t)(p->n + 1));
    st_meta_image_t *img = st_controller_image(srv->ctl);
    for (int i = 0, k = 0; i < q->topics.n; i++) {
        st_offset_delete_req_topic_t *qt = &q->topics.v[i];
        const st_meta_topic_t *t =
            topic_name_ok(qt->name) ? st_image_topic(img, qt->name.p, (size_t)qt->name.len) : NULL;
        st_str_t topic = acopy_nn(req, qt->name);
        int topic_denied = !st_topic_allowed(srv, req, ST_ACL_OP_READ, qt->name);
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            int32_t part = qt->partitions.v[j].partition_index;
            p->d[k].topic = topic;
            p->d[k].partition = part;
            if (topic_denied) p->pre[k] = ST_E_TOPIC_AUTHORIZATION_FAILED;
            else if (!t || part < 0 || part >= t->nparts) p->pre[k] = ST_E_UNKNOWN_TOPIC_OR_PARTITION;
        }
    }
    st_image_release(img);
    op->params = p;
    st_group_coord_submit(srv->groups, offset_delete_job, op);
}

/* ---- the coordinator, from the broker's settings ------------------------------------------ */

st_group_coord_t *st_server_groups_new(st_server_t *srv) {
    const st_broker_config_t *b = &srv->cfg;
    st_group_coord_config_t c = {
        .state =
            {
                .num_partitions = b->offsets_topic_num_partitions,
                .min_session_timeout_ms = b->group_min_session_timeout_ms,
                .max_session_timeout_ms = b->group_max_session_timeout_ms,
                .initial_rebalance_delay_ms = b->group_initial_rebalance_delay_ms,
                .max_size = b->group_max_size,
                .offset_metadata_max_bytes = b->offset_metadata_max_bytes,
                .offsets_retention_ms = (int64_t)b->offsets_retention_minutes * 60000,
                .offsets_retention_check_interval_ms = b->offsets_retention_check_interval_ms,
            },
        .node_id = b->node_id,
        .load_buffer_bytes = b->offsets_load_buffer_size,
        .flush_on_ack = b->log_flush_on_ack,
    };
    return st_group_coord_new(&c, srv->rm, srv->ctl, srv->logs);
}

/* The log cleaner over the topics that compact (broker/group/compaction.c
 * lists them), or NULL when log.cleaner.enable is off.  One per process. */
st_log_cleaner_t *st_server_cleaner_new(st_server_t *srv) {
    static st_group_cleaner_source_t source;
    if (!srv->cfg.log_cleaner_enable) return NULL;
    source = (st_group_cleaner_source_t){srv->ctl, srv->rm, &srv->cfg};
    st_log_cleaner_config_t c = {srv->cfg.log_cleaner_backoff_ms,
                                 srv->cfg.log_cleaner_dedupe_buffer_size,
                                 srv->cfg.log_cleaner_io_max_bytes_per_second};
    return st_log_cleaner_new(&c, st_group_cleaner_list, &source);
}

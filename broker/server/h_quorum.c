/*
 * h_quorum.c - the metadata quorum's APIs: Vote, BeginQuorumEpoch,
 * EndQuorumEpoch, FetchSnapshot, Fetch of __cluster_metadata by a replica
 * (the Raft's own Fetch), and DescribeQuorum.
 *
 * The Raft runs on the controller thread: a request is decoded here, on
 * its loop, into a Raft message (broker/controller/raft_wire.c) and handed
 * over; the controller answers it on this loop when the Raft does (at once,
 * or when a parked Fetch wakes).  A request that names anything but
 * __cluster_metadata-0 is answered here with the error raft_wire chose.
 */
#include "server.h"

#include <stdlib.h>

/* An answer with only an error, in the request's own shape. */
static void refuse(st_request_t *req, st_raft_msg_type_t type, int16_t code, const char *why) {
    ST_WARN("quorum", "%s v%d from %s refused: %s", req->api->name, (int)req->hdr.api_version,
            st_request_peer(req), why);
    st_raft_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = type + 1; /* its response */
    switch (m.type) {
    case ST_RAFT_VOTE_RESPONSE:
        m.u.vote_resp = (st_raft_vote_response_t){code, -1, -1, 0};
        break;
    case ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE:
    case ST_RAFT_END_QUORUM_EPOCH_RESPONSE:
        m.u.epoch_resp = (st_raft_epoch_response_t){code, -1, -1};
        break;
    case ST_RAFT_FETCH_RESPONSE:
        m.u.fetch_resp.error_code = code;
        m.u.fetch_resp.high_watermark = -1;
        m.u.fetch_resp.log_start_offset = -1;
        m.u.fetch_resp.diverging_epoch.epoch = -1;
        m.u.fetch_resp.diverging_epoch.end_offset = -1;
        m.u.fetch_resp.current_leader = (st_raft_leader_id_and_epoch_t){-1, -1};
        m.u.fetch_resp.snapshot_id = (st_raft_snapshot_id_t){-1, -1};
        break;
    case ST_RAFT_FETCH_SNAPSHOT_RESPONSE:
        m.u.fsnap_resp.error_code = code;
        m.u.fsnap_resp.snapshot_id = (st_raft_snapshot_id_t){-1, -1};
        m.u.fsnap_resp.current_leader = (st_raft_leader_id_and_epoch_t){-1, -1};
        break;
    default: break;
    }
    st_buf_t records;
    st_buf_init(&records);
    void *body = NULL;
    if (st_raft_wire_encode(&m, req->hdr.api_version, NULL, &req->arena, &records, &body)) {
        st_request_close_conn(req, why);
        st_request_no_response(req);
    } else {
        st_request_respond(req, body);
    }
    st_buf_fini(&records);
}

static void to_raft(st_server_t *srv, st_request_t *req, st_raft_msg_type_t type) {
    st_raft_msg_t m;
    int16_t werr;
    char why[256];
    if (st_raft_wire_decode(req->api->key, req->hdr.api_version, 0, req->body, NULL, &req->arena,
                            &m, &werr, why, sizeof why)) {
        refuse(req, type, werr, why);
        return;
    }
    st_controller_raft_request(srv->ctl, req, &m);
}

void st_handle_vote(st_server_t *srv, st_request_t *req) {
    to_raft(srv, req, ST_RAFT_VOTE_REQUEST);
}

void st_handle_begin_quorum_epoch(st_server_t *srv, st_request_t *req) {
    to_raft(srv, req, ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST);
}

void st_handle_end_quorum_epoch(st_server_t *srv, st_request_t *req) {
    to_raft(srv, req, ST_RAFT_END_QUORUM_EPOCH_REQUEST);
}

void st_handle_fetch_snapshot(st_server_t *srv, st_request_t *req) {
    to_raft(srv, req, ST_RAFT_FETCH_SNAPSHOT_REQUEST);
}

void st_handle_raft_fetch(st_server_t *srv, st_request_t *req) {
    to_raft(srv, req, ST_RAFT_FETCH_REQUEST);
}

/* ---- DescribeQuorum ------------------------------------------------------------- */

typedef struct describe_ctx {
    st_err_t err;
    st_quorum_desc_t d;
} describe_ctx_t;

static void describe_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    describe_ctx_t *x = arg;
    x->err = st_controller_describe_quorum(ctl, &x->d);
}

static void fill_states(st_request_t *req, const st_quorum_replica_t *v, int n, void *arr) {
    ST_ARRAY_OF(st_quorum_replica_state_t) *a = arr;
    ST_ARRAY_ALLOC(*a, &req->arena, n);
    for (int i = 0; i < n; i++) {
        st_schema_defaults(&st_quorum_replica_state_schema, &a->v[i]);
        a->v[i].replica_id = v[i].replica_id;
        a->v[i].log_end_offset = v[i].log_end_offset;
        a->v[i].last_fetch_timestamp = v[i].last_fetch_ms;
        a->v[i].last_caught_up_timestamp = v[i].last_caught_up_ms;
    }
}

static void describe_done(st_server_t *srv, st_request_t *req, void *arg) {
    describe_ctx_t *x = arg;
    st_describe_quorum_req_t *q = req->body;
    st_describe_quorum_resp_t r;
    st_schema_defaults(&st_describe_quorum_resp_schema, &r);
    ST_ARRAY_ALLOC(r.topics, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        st_describe_quorum_resp_topic_t *t = &r.topics.v[i];
        st_schema_defaults(&st_describe_quorum_resp_topic_schema, t);
        t->topic_name = q->topics.v[i].topic_name;
        ST_ARRAY_ALLOC(t->partitions, &req->arena, q->topics.v[i].partitions.n);
        for (int j = 0; j < q->topics.v[i].partitions.n; j++) {
            st_describe_quorum_resp_part_t *p = &t->partitions.v[j];
            st_schema_defaults(&st_describe_quorum_resp_part_schema, p);
            p->partition_index = q->topics.v[i].partitions.v[j].partition_index;
            ST_ARRAY_ALLOC(p->current_voters, &req->arena, 0);
            ST_ARRAY_ALLOC(p->observers, &req->arena, 0);
            p->leader_id = x->d.leader_id;
            p->leader_epoch = x->d.leader_epoch;
            p->high_watermark = x->d.high_watermark;
            if (!st_str_eq(t->topic_name, ST_META_LOG_TOPIC) || p->partition_index != 0) {
                p->error_code = st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION);
                p->error_message = st_str("the metadata quorum is __cluster_metadata-0");
                continue;
            }
            if (x->err) {
                p->error_code = st_err_wire(x->err);
                p->error_message = st_str("this node does not lead the metadata quorum; ask "
                                          "the leader");
                continue;
            }
            fill_states(req, x->d.voters, x->d.nvoters, &p->current_voters);
            fill_states(req, x->d.observers, x->d.nobservers, &p->observers);
        }
    }
    /* v2: each voter's controller listener, as controller.quorum.voters
     * gives it (a quorum of one: none is configured) */
    const st_cluster_config_t *cc = &srv->cluster;
    ST_ARRAY_ALLOC(r.nodes, &req->arena, cc->nvoters);
    for (int i = 0; i < cc->nvoters; i++) {
        st_describe_quorum_node_t *n = &r.nodes.v[i];
        st_schema_defaults(&st_describe_quorum_node_schema, n);
        n->node_id = cc->voters[i].id;
        ST_ARRAY_ALLOC(n->listeners, &req->arena, 1);
        st_schema_defaults(&st_raft_listener_schema, &n->listeners.v[0]);
        n->listeners.v[0].name =
            st_str(cc->ncontroller_listeners ? cc->controller_listeners[0] : "CONTROLLER");
        n->listeners.v[0].host = st_str(cc->voters[i].host);
        n->listeners.v[0].port = (uint16_t)cc->voters[i].port;
    }
    st_quorum_desc_fini(&x->d);
    free(x);
    st_request_respond(req, &r);
}

void st_handle_describe_quorum(st_server_t *srv, st_request_t *req) {
    /* Only the leader knows the quorum's state; a broker-only node, which
     * clients reach and the leader's listener is not given to, asks it
     * (Kafka's brokers forward DescribeQuorum to the active controller). */
    if (!(srv->cluster.roles & ST_ROLE_CONTROLLER) && st_controller_forward(srv->ctl, req)) return;
    describe_ctx_t *x = st_calloc(1, sizeof *x);
    st_server_via_controller(srv, req, describe_work, describe_done, x);
}

/* ---- BrokerRegistration and BrokerHeartbeat (to the active controller) ------------ */

typedef struct member_ctx {
    const void *q; /* the request's body */
    st_broker_registration_resp_t reg;
    st_broker_heartbeat_resp_t hb;
} member_ctx_t;

static void registration_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    member_ctx_t *x = arg;
    st_controller_broker_registration(ctl, x->q, &x->reg);
}

static void heartbeat_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    member_ctx_t *x = arg;
    st_controller_broker_heartbeat(ctl, x->q, &x->hb);
}

static void registration_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    member_ctx_t *x = arg;
    st_request_respond(req, &x->reg);
    free(x);
}

static void heartbeat_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    member_ctx_t *x = arg;
    st_request_respond(req, &x->hb);
    free(x);
}

void st_handle_broker_registration(st_server_t *srv, st_request_t *req) {
    member_ctx_t *x = st_calloc(1, sizeof *x);
    x->q = req->body;
    st_server_via_controller(srv, req, registration_work, registration_done, x);
}

void st_handle_broker_heartbeat(st_server_t *srv, st_request_t *req) {
    member_ctx_t *x = st_calloc(1, sizeof *x);
    x->q = req->body;
    st_server_via_controller(srv, req, heartbeat_work, heartbeat_done, x);
}

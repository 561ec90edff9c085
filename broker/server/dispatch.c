/*
 * dispatch.c - from a decoded request to its handler; the loop hooks;
 * work handed to the controller thread; ApiVersions and DescribeCluster.
 */
#include "server.h"

#include <stdlib.h>

static const struct {
    int16_t key;
    st_handler_fn fn;
} handlers[] = {
    {ST_API_PRODUCE, st_handle_produce},
    {ST_API_FETCH, st_handle_fetch},
    {ST_API_LIST_OFFSETS, st_handle_list_offsets},
    {ST_API_OFFSET_FOR_LEADER_EPOCH, st_handle_offset_for_leader_epoch},
    {ST_API_METADATA, st_handle_metadata},
    {ST_API_DESCRIBE_TOPIC_PARTITIONS, st_handle_describe_topic_partitions},
    {ST_API_API_VERSIONS, st_handle_api_versions},
    {ST_API_CREATE_TOPICS, st_handle_create_topics},
    {ST_API_DELETE_TOPICS, st_handle_delete_topics},
    {ST_API_DELETE_RECORDS, st_handle_delete_records},
    {ST_API_DESCRIBE_CONFIGS, st_handle_describe_configs},
    {ST_API_ALTER_CONFIGS, st_handle_alter_configs},
    {ST_API_CREATE_PARTITIONS, st_handle_create_partitions},
    {ST_API_INCREMENTAL_ALTER_CONFIGS, st_handle_incremental_alter_configs},
    {ST_API_DESCRIBE_CLUSTER, st_handle_describe_cluster},
    {ST_API_DESCRIBE_LOG_DIRS, st_handle_describe_log_dirs},
    {ST_API_FIND_COORDINATOR, st_handle_find_coordinator},
    {ST_API_JOIN_GROUP, st_handle_join_group},
    {ST_API_SYNC_GROUP, st_handle_sync_group},
    {ST_API_HEARTBEAT, st_handle_heartbeat},
    {ST_API_LEAVE_GROUP, st_handle_leave_group},
    {ST_API_OFFSET_COMMIT, st_handle_offset_commit},
    {ST_API_OFFSET_FETCH, st_handle_offset_fetch},
    {ST_API_DESCRIBE_GROUPS, st_handle_describe_groups},
    {ST_API_LIST_GROUPS, st_handle_list_groups},
    {ST_API_DELETE_GROUPS, st_handle_delete_groups},
    {ST_API_OFFSET_DELETE, st_handle_offset_delete},
    {ST_API_TXN_OFFSET_COMMIT, st_handle_txn_offset_commit},
    {ST_API_VOTE, st_handle_vote},
    {ST_API_BEGIN_QUORUM_EPOCH, st_handle_begin_quorum_epoch},
    {ST_API_END_QUORUM_EPOCH, st_handle_end_quorum_epoch},
    {ST_API_DESCRIBE_QUORUM, st_handle_describe_quorum},
    {ST_API_FETCH_SNAPSHOT, st_handle_fetch_snapshot},
    {ST_API_BROKER_REGISTRATION, st_handle_broker_registration},
    {ST_API_BROKER_HEARTBEAT, st_handle_broker_heartbeat},
    {ST_API_ELECT_LEADERS, st_handle_elect_leaders},
    {ST_API_ALTER_PARTITION, st_handle_alter_partition},
    {ST_API_ALTER_PARTITION_REASSIGNMENTS, st_handle_alter_partition_reassignments},
    {ST_API_LIST_PARTITION_REASSIGNMENTS, st_handle_list_partition_reassignments},
    {ST_API_INIT_PRODUCER_ID, st_handle_init_producer_id},
    {ST_API_ALLOCATE_PRODUCER_IDS, st_handle_allocate_producer_ids},
    {ST_API_DESCRIBE_PRODUCERS, st_handle_describe_producers},
    {ST_API_ADD_PARTITIONS_TO_TXN, st_handle_add_partitions_to_txn},
    {ST_API_ADD_OFFSETS_TO_TXN, st_handle_add_offsets_to_txn},
    {ST_API_END_TXN, st_handle_end_txn},
    {ST_API_DESCRIBE_TRANSACTIONS, st_handle_describe_transactions},
    {ST_API_LIST_TRANSACTIONS, st_handle_list_transactions},
    {ST_API_WRITE_TXN_MARKERS, st_handle_write_txn_markers},
    {ST_API_SASL_HANDSHAKE, st_handle_sasl_handshake},
    {ST_API_SASL_AUTHENTICATE, st_handle_sasl_authenticate},
    {ST_API_ALTER_USER_SCRAM_CREDENTIALS, st_handle_alter_user_scram_credentials},
    {ST_API_DESCRIBE_USER_SCRAM_CREDENTIALS, st_handle_describe_user_scram_credentials},
    {ST_API_CREATE_ACLS, st_handle_create_acls},
    {ST_API_DELETE_ACLS, st_handle_delete_acls},
    {ST_API_DESCRIBE_ACLS, st_handle_describe_acls},
};

st_handler_fn st_handler_for(int16_t key) {
    for (size_t i = 0; i < ST_ARRAY_SIZE(handlers); i++)
        if (handlers[i].key == key) return handlers[i].fn;
    return NULL;
}

/* What a node serves follows its process.roles, as Kafka scopes its APIs
 * to brokers and controllers.  A combined node serves everything.  A
 * controller-only node serves the quorum, the brokers' calls on the
 * active controller and the admin requests brokers forward to it; a
 * broker-only node serves what clients send, and not the quorum's or
 * the controller's own APIs (it is never asked them: it votes for no one
 * and is never the active controller). */
static const int16_t controller_apis[] = {
    ST_API_API_VERSIONS,        ST_API_FETCH, /* the Raft's Fetch of __cluster_metadata */
    ST_API_VOTE,                ST_API_BEGIN_QUORUM_EPOCH,
    ST_API_END_QUORUM_EPOCH,    ST_API_DESCRIBE_QUORUM,
    ST_API_FETCH_SNAPSHOT,      ST_API_BROKER_REGISTRATION,
    ST_API_BROKER_HEARTBEAT,    ST_API_ALTER_PARTITION,
    ST_API_ALLOCATE_PRODUCER_IDS, ST_API_CREATE_TOPICS,
    ST_API_DELETE_TOPICS,       ST_API_CREATE_PARTITIONS,
    ST_API_ALTER_CONFIGS,       ST_API_INCREMENTAL_ALTER_CONFIGS,
    ST_API_ELECT_LEADERS,       ST_API_DESCRIBE_CLUSTER,
    ST_API_ALTER_PARTITION_REASSIGNMENTS, ST_API_LIST_PARTITION_REASSIGNMENTS,
    ST_API_SASL_HANDSHAKE,      ST_API_SASL_AUTHENTICATE,
    ST_API_ALTER_USER_SCRAM_CREDENTIALS, ST_API_CREATE_ACLS,
    ST_API_DELETE_ACLS,
};
static const int16_t quorum_only_apis[] = {
    ST_API_VOTE,          ST_API_BEGIN_QUORUM_EPOCH,  ST_API_END_QUORUM_EPOCH,
    ST_API_FETCH_SNAPSHOT, ST_API_BROKER_REGISTRATION, ST_API_BROKER_HEARTBEAT,
    ST_API_ALTER_PARTITION, ST_API_ALLOCATE_PRODUCER_IDS,
};

static int in(const int16_t *v, size_t n, int16_t key) {
    for (size_t i = 0; i < n; i++)
        if (v[i] == key) return 1;
    return 0;
}

st_handler_fn st_server_handler(const st_server_t *srv, int16_t key) {
    int roles = srv->cluster.roles;
    if (!(roles & ST_ROLE_BROKER) && !in(controller_apis, ST_ARRAY_SIZE(controller_apis), key))
        return NULL;
    if (!(roles & ST_ROLE_CONTROLLER) && in(quorum_only_apis, ST_ARRAY_SIZE(quorum_only_apis), key))
        return NULL;
    return st_handler_for(key);
}

void st_server_on_request(st_request_t *req, void *arg) {
    st_server_t *srv = arg;
    st_handler_fn fn = st_server_handler(srv, req->api->key);
    if (!fn) {
        st_request_close_conn(req, "API without a handler");
        st_request_no_response(req);
        return;
    }
    if (st_session_gate(srv, req)) return; /* SASL not done, or its session over */
    if (st_cluster_gate(srv, req)) return;  /* a cluster API the principal may not use */
    if (st_produce_gate_hold(req)) return; /* behind a produce still on a worker */
    st_server_handle(srv, req);
}

const st_meta_endpoint_t *st_server_endpoint_for(const st_server_t *srv, const st_request_t *req,
                                                 const st_meta_broker_t *b) {
    int li = st_request_listener(req);
    return st_meta_broker_endpoint(b, li >= 0 && li < srv->nlisteners ? srv->listeners[li].name : NULL);
}

void st_server_handle(st_server_t *srv, st_request_t *req) {
    ST_DEBUG("net", "%s v%d correlation %d from %s", req->api->name, (int)req->hdr.api_version,
             (int)req->hdr.correlation_id, st_request_peer(req));
    st_handler_for(req->api->key)(srv, req);
}

st_purgatory_t *st_server_loop_purgatory(st_loop_t *loop) {
    return &((st_loop_state_t *)st_loop_user(loop))->purgatory;
}

void st_server_wake_all(void *loop) {
    st_purgatory_notify_all(st_server_loop_purgatory(loop));
    st_loop_wake(loop);
}

/* Retries the watchers of the keys notified since the last wake (see
 * broker/delayed): a partition's watchers after its change, every parked
 * request after st_server_wake_all. */
void st_server_on_wake(st_loop_t *loop, void *arg) {
    (void)arg;
    st_loop_state_t *ls = st_loop_user(loop);
    if (ls) st_purgatory_wake(&ls->purgatory);
}

int64_t st_server_on_tick(st_loop_t *loop, int64_t now_ms, void *arg) {
    (void)arg;
    st_loop_state_t *ls = st_loop_user(loop);
    return ls ? st_purgatory_tick(&ls->purgatory, now_ms) : -1;
}

void st_server_on_drain(st_loop_t *loop, void *arg) {
    (void)arg;
    st_loop_state_t *ls = st_loop_user(loop);
    if (!ls) return;
    st_purgatory_drain(&ls->purgatory);
    ST_DEBUG("delayed", "loop %d: %llu try_complete calls in %llu wake passes",
             st_loop_index(loop), (unsigned long long)ls->purgatory.tries,
             (unsigned long long)ls->purgatory.seq);
}

/* ---- controller round trips --------------------------------------------- */

typedef struct ctl_trip {
    st_server_t *srv;
    st_request_t *req;
    st_ctl_work_fn work;
    st_ctl_done_fn done;
    void *ctx;
} ctl_trip_t;

static void trip_done(void *arg) {
    ctl_trip_t *t = arg;
    t->done(t->srv, t->req, t->ctx);
    free(t);
}

static void trip_work(st_controller_t *ctl, void *arg) {
    ctl_trip_t *t = arg;
    t->work(t->srv, ctl, t->ctx);
    st_loop_post(t->req->loop, trip_done, t);
}

void st_server_via_controller(st_server_t *srv, st_request_t *req, st_ctl_work_fn work,
                              st_ctl_done_fn done, void *ctx) {
    ctl_trip_t *t = st_malloc(sizeof *t);
    *t = (ctl_trip_t){srv, req, work, done, ctx};
    st_controller_submit(srv->ctl, trip_work, t);
}

/* ---- ApiVersions -------------------------------------------------------- */

void st_handle_api_versions(st_server_t *srv, st_request_t *req) {
    st_api_versions_resp_t r;
    st_schema_defaults(&st_api_versions_resp_schema, &r);
    if (!req->body) {
        /* A version we do not know: answer in v0 with the error and our
         * ranges, so the client retries with one we support. */
        r.error_code = st_err_wire(ST_E_UNSUPPORTED_VERSION);
        req->hdr.api_version = 0;
    }
    int n = 0;
    for (size_t i = 0; st_api_at(i); i++) n += st_server_handler(srv, st_api_at(i)->key) != NULL;
    ST_ARRAY_ALLOC(r.api_keys, &req->arena, n);
    int k = 0;
    for (size_t i = 0; st_api_at(i); i++) {
        const st_api_t *api = st_api_at(i);
        if (!st_server_handler(srv, api->key)) continue;
        r.api_keys.v[k].api_key = api->key;
        r.api_keys.v[k].min_version = api->adv_min_ver;
        r.api_keys.v[k].max_version = api->max_ver;
        k++;
    }
    st_request_respond(req, &r);
}

/* ---- DescribeCluster ---------------------------------------------------- */

void st_handle_describe_cluster(st_server_t *srv, st_request_t *req) {
    st_describe_cluster_resp_t r;
    st_schema_defaults(&st_describe_cluster_resp_schema, &r);
    st_meta_image_t *img = st_controller_image(srv->ctl);
    r.cluster_id = st_str(st_req_strdup(req, st_str(st_controller_cluster_id(srv->ctl))));
    r.controller_id = st_controller_id_for_clients(srv->ctl, img);
    st_describe_cluster_req_t *q = req->body;
    /* v2 (KIP-1073): fenced brokers too, when asked, marked as such */
    int fenced_too = q->include_fenced_brokers;
    int n = 0;
    for (int i = 0; i < img->nbrokers; i++) n += fenced_too || !img->brokers[i].fenced;
    ST_ARRAY_ALLOC(r.brokers, &req->arena, n);
    int k = 0;
    for (int i = 0; i < img->nbrokers; i++) {
        const st_meta_broker_t *b = &img->brokers[i];
        if (b->fenced && !fenced_too) continue;
        st_schema_defaults(&st_describe_cluster_broker_schema, &r.brokers.v[k]);
        r.brokers.v[k].is_fenced = (int8_t)b->fenced;
        r.brokers.v[k].broker_id = b->id;
        const st_meta_endpoint_t *ep = st_server_endpoint_for(srv, req, b);
        r.brokers.v[k].host = st_str(st_req_strdup(req, st_str(ep ? ep->host : "")));
        r.brokers.v[k].port = ep ? ep->port : 0;
        r.brokers.v[k].rack = b->rack ? st_str(st_req_strdup(req, st_str(b->rack))) : ST_STR_NULL;
        k++;
    }
    if (q->include_cluster_authorized_operations)
        r.cluster_authorized_operations =
            st_authorized_ops(srv, req, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                              strlen(ST_ACL_CLUSTER_NAME), ST_ACL_OPS_CLUSTER);
    st_image_release(img);
    st_request_respond(req, &r);
}

void st_server_refuse(st_request_t *req, st_err_t e) {
    void *r = st_arena_alloc(&req->arena, req->api->resp->size);
    st_schema_defaults(req->api->resp, r);
    st_schema_set_errors(req->api->resp, r, st_err_wire(e));
    st_request_respond(req, r);
}

/*
 * server.h - what the request handlers share: the server context, the
 * per-loop state and the handler table.
 *
 * Handlers run on the I/O thread that read the request.  They answer at
 * once, park a delayed operation on their loop's purgatory, or hand work
 * to the controller thread and answer when it posts back.
 */
#ifndef ST_SERVER_H
#define ST_SERVER_H

#include "config.h"
#include "controller.h"
#include "delayed.h"
#include "log.h"
#include "net.h"
#include "replica.h"
#include "raft_wire.h"
#include "acl.h"
#include "sasl.h"
#include "security.h"

typedef struct st_server {
    st_broker_config_t cfg;
    st_cluster_config_t cluster; /* roles, quorum, controller listeners */
    st_logmgr_t *logs;
    st_controller_t *ctl;
    st_replicas_t *rm;
    st_net_t *net;
    st_listener_spec_t *listeners;
    int nlisteners;
    struct st_listener_sec *lsec; /* per listener: protocol, SASL mechanisms, PLAIN users */
    /* this broker's own connections: to the inter-broker listener (fetchers,
     * transaction markers) and to the voters' controller listener (Raft,
     * forwarding, registration); sec.c, from the listeners' settings */
    st_client_security_t ib_sec, ctl_sec;
    st_sec_config_t *sec;       /* ssl.*, sasl.*, authorizer settings */
    st_listener_spec_t *advertised;
    int nadvertised;
    const st_cfg_bind_t *extra_config; /* the object store's table, etc. */
    size_t nextra_config;
    struct st_group_coord *groups; /* the group coordinator (broker/group) */
    struct st_txn_coord *txns;     /* the transaction coordinator (broker/txn) */
    /* num.io.threads request workers: produce validation of compressed
     * batches and recompression (h_produce.c), never on an I/O thread */
    st_pool_t *workers;
    struct st_pid_pool *pids; /* h_producer.c: this broker's block of producer ids */
} st_server_t;

typedef struct st_loop_state {
    st_server_t *srv;
    st_purgatory_t purgatory;
    struct st_produce_gates *gates; /* h_produce.c: connections waiting on a worker */
} st_loop_state_t;

typedef void (*st_handler_fn)(st_server_t *srv, st_request_t *req);

/* The handler of an API key, or NULL (ApiVersions advertises only keys that
 * have one). */
st_handler_fn st_handler_for(int16_t key);
/* The handler this node serves key with (its process.roles), NULL: none. */
st_handler_fn st_server_handler(const st_server_t *srv, int16_t key);

/* Security of the listeners (sec.c): every TLS listener's context from
 * the ssl.* settings (its listener.name.<l>.ssl.* first); err names the
 * listener and the setting.  Before st_net_new. */
st_err_t st_server_security_open(st_server_t *srv, char *err, size_t errlen);
void st_server_security_close(st_server_t *srv);
/* ib_sec and ctl_sec from the inter-broker and controller listeners'
 * settings: a TLS client context where the listener is SSL or SASL_SSL,
 * and for SASL the mechanism (sasl.mechanism.inter.broker.protocol /
 * sasl.mechanism.controller.protocol, else the listener's first) and the
 * username and password options of its <mechanism>.sasl.jaas.config.
 * Before anything connects; err names the setting at fault. */
st_err_t st_server_client_security_open(st_server_t *srv, char *err, size_t errlen);
/* The ssl.* settings of a listener as a TLS configuration (borrowed
 * strings): its server side, or the client side of this broker's own
 * connections to it. */
void st_server_tls_config(const st_sec_config_t *sec, const char *listener, int client,
                          st_tls_config_t *out);

/* The security of one listener (sec.c). */
typedef struct st_listener_sec {
    struct st_server *srv;
    int proto;               /* ST_SECPROTO_* */
    unsigned mechs;          /* SASL: 1u << st_sasl_mech_t of each enabled mechanism */
    st_jaas_t plain;         /* its plain.sasl.jaas.config: user_<name>="password" */
    st_sasl_server_ops_t ops; /* PLAIN users above, SCRAM credentials from the metadata */
    int64_t reauth_ms;       /* connections.max.reauth.ms (its listener.name.<l>. first) */
} st_listener_sec_t;

/* Who a connection is (sec.c): made at its first request, freed with it. */
typedef struct st_session {
    const st_listener_sec_t *ls;
    int authenticated;        /* a SASL listener: the exchange succeeded */
    st_sasl_server_t *sasl;   /* the exchange under way (after SaslHandshake) */
    st_sasl_mech_t mech;      /* of the last successful exchange */
    int64_t expires_ms;       /* connections.max.reauth.ms: session end (monotonic), 0 none */
    int failed;               /* answered a failure: closing */
    char user[256];           /* SASL user name */
    char principal[512];      /* "User:alice", "User:CN=...", "User:ANONYMOUS" */
} st_session_t;

/* The request's session (made on first use). */
st_session_t *st_session_of(st_server_t *srv, st_request_t *req);
/* 0 when the request may go on to its handler; otherwise the connection
 * was closed (a request out of place during SASL authentication, or a
 * session past its lifetime) and the request is finished. */
int st_session_gate(st_server_t *srv, st_request_t *req);
/* Answer with the API's defaults and every error code e (a request
 * refused whole, e.g. by the authorizer). */
void st_server_refuse(st_request_t *req, st_err_t e);
/* An API acting on the whole cluster (inter-broker, cluster admin) that
 * the principal may not use: answered CLUSTER_AUTHORIZATION_FAILED, 1. */
int st_cluster_gate(st_server_t *srv, st_request_t *req);
/* Answer body after delay_ms, then close the connection (a failed
 * authentication, connection.failed.authentication.delay.ms). */
void st_session_fail_later(st_server_t *srv, st_request_t *req, void *body);

/* Whether the request's principal may do op on a resource (acl.h; always
 * without authorizer.class.name).  Loop thread. */
int st_authorized(st_server_t *srv, st_request_t *req, int8_t op, int8_t rtype, const char *name,
                  size_t len);
static inline int st_authorized_str(st_server_t *srv, st_request_t *req, int8_t op,
                                    int8_t rtype, st_str_t name) {
    return st_authorized(srv, req, op, rtype, name.p ? name.p : "", (size_t)ST_MAX(name.len, 0));
}
/* The same on the cluster resource (kafka-cluster). */
int st_authorized_cluster(st_server_t *srv, st_request_t *req, int8_t op);
/* op allowed on some resource of rtype (st_acl_authorize_any). */
int st_authorized_any(st_server_t *srv, st_request_t *req, int8_t op, int8_t rtype);

/* authz.c: the items of an admin request the principal may not touch are
 * taken out of it and put back into its answer with their error; returns
 * how many.  Before the request is forwarded or carried out. */
int st_authz_create_topics(st_server_t *srv, st_request_t *req);
int st_authz_delete_topics(st_server_t *srv, st_request_t *req);
int st_authz_create_partitions(st_server_t *srv, st_request_t *req);
int st_authz_alter_configs(st_server_t *srv, st_request_t *req);
/* op on a config resource (a topic, or the cluster for a broker); *err
 * the error a refusal answers. */
int st_authz_config_resource(st_server_t *srv, st_request_t *req, int8_t op, int8_t type,
                             st_str_t name, st_err_t *err);

void st_handle_create_acls(st_server_t *srv, st_request_t *req);
void st_handle_delete_acls(st_server_t *srv, st_request_t *req);
void st_handle_describe_acls(st_server_t *srv, st_request_t *req);
void st_handle_sasl_handshake(st_server_t *srv, st_request_t *req);
void st_handle_sasl_authenticate(st_server_t *srv, st_request_t *req);
void st_handle_alter_user_scram_credentials(st_server_t *srv, st_request_t *req);
void st_handle_describe_user_scram_credentials(st_server_t *srv, st_request_t *req);

/* net hooks */
void st_server_on_request(st_request_t *req, void *arg);
void st_server_on_wake(st_loop_t *loop, void *arg);
int64_t st_server_on_tick(st_loop_t *loop, int64_t now_ms, void *arg);
void st_server_on_drain(st_loop_t *loop, void *arg);

/* The loop's purgatory (any thread: the address is fixed). */
st_purgatory_t *st_server_loop_purgatory(st_loop_t *loop);
/* From any thread (st_job_cb-shaped for tiering's callbacks): something
 * without a watch key changed (a remote download ended), so every request
 * parked on loop is retried.  A partition's change wakes only its watchers
 * (st_partition_watch). */
void st_server_wake_all(void *loop);

static inline st_purgatory_t *st_req_purgatory(st_request_t *req) {
    return &((st_loop_state_t *)st_loop_user(req->loop))->purgatory;
}

/* Run work(srv, ctx) on the controller thread, then done(req, ctx) on the
 * request's loop. */
typedef void (*st_ctl_work_fn)(st_server_t *srv, st_controller_t *ctl, void *ctx);
typedef void (*st_ctl_done_fn)(st_server_t *srv, st_request_t *req, void *ctx);
void st_server_via_controller(st_server_t *srv, st_request_t *req, st_ctl_work_fn work,
                              st_ctl_done_fn done, void *ctx);

/* Run the request's handler (st_server_on_request, once the request's
 * turn on its connection has come). */
void st_server_handle(st_server_t *srv, st_request_t *req);
/* b's endpoint for the client of req: the one of the listener req came in
 * on, as Kafka gives each client the addresses of its own listener (the
 * first endpoint when b has none of that name; NULL when b has none). */
const st_meta_endpoint_t *st_server_endpoint_for(const st_server_t *srv, const st_request_t *req,
                                                 const st_meta_broker_t *b);

/* Per-connection order of produce appends (h_produce.c): while a produce
 * of a connection is being validated on a worker, that connection's later
 * requests wait; 1 when req was held (it is handled in its turn). */
int st_produce_gate_hold(st_request_t *req);
/* Free a loop's gates (after the loops stopped). */
void st_produce_gates_free(st_loop_state_t *ls);

/* Handlers */
void st_handle_api_versions(st_server_t *srv, st_request_t *req);
void st_handle_metadata(st_server_t *srv, st_request_t *req);
void st_handle_describe_topic_partitions(st_server_t *srv, st_request_t *req);
void st_handle_produce(st_server_t *srv, st_request_t *req);
void st_handle_fetch(st_server_t *srv, st_request_t *req);
void st_handle_list_offsets(st_server_t *srv, st_request_t *req);
void st_handle_delete_records(st_server_t *srv, st_request_t *req);
void st_handle_create_topics(st_server_t *srv, st_request_t *req);
void st_handle_delete_topics(st_server_t *srv, st_request_t *req);
void st_handle_create_partitions(st_server_t *srv, st_request_t *req);
void st_handle_describe_configs(st_server_t *srv, st_request_t *req);
void st_handle_alter_configs(st_server_t *srv, st_request_t *req);
void st_handle_incremental_alter_configs(st_server_t *srv, st_request_t *req);
void st_handle_describe_cluster(st_server_t *srv, st_request_t *req);
void st_handle_describe_log_dirs(st_server_t *srv, st_request_t *req);
/* consumer groups (h_group.c) */
void st_handle_find_coordinator(st_server_t *srv, st_request_t *req);
void st_handle_join_group(st_server_t *srv, st_request_t *req);
void st_handle_sync_group(st_server_t *srv, st_request_t *req);
void st_handle_heartbeat(st_server_t *srv, st_request_t *req);
void st_handle_leave_group(st_server_t *srv, st_request_t *req);
void st_handle_offset_commit(st_server_t *srv, st_request_t *req);
void st_handle_offset_fetch(st_server_t *srv, st_request_t *req);
void st_handle_describe_groups(st_server_t *srv, st_request_t *req);
void st_handle_list_groups(st_server_t *srv, st_request_t *req);
void st_handle_delete_groups(st_server_t *srv, st_request_t *req);
void st_handle_offset_delete(st_server_t *srv, st_request_t *req);
void st_handle_txn_offset_commit(st_server_t *srv, st_request_t *req);
/* __consumer_offsets as this broker creates it (offsets.topic.*); cf holds
 * the configs t points at. */
typedef struct st_offsets_topic_configs {
    char seg[32];
    st_kv_t kv[2];
} st_offsets_topic_configs_t;
void st_server_offsets_topic_spec(st_server_t *srv, st_new_topic_t *t,
                                  st_offsets_topic_configs_t *cf);
/* the transaction coordinator (h_txn.c) */
void st_handle_init_producer_id_txn(st_server_t *srv, st_request_t *req);
void st_handle_add_partitions_to_txn(st_server_t *srv, st_request_t *req);
void st_handle_add_offsets_to_txn(st_server_t *srv, st_request_t *req);
void st_handle_end_txn(st_server_t *srv, st_request_t *req);
void st_handle_describe_transactions(st_server_t *srv, st_request_t *req);
void st_handle_list_transactions(st_server_t *srv, st_request_t *req);
/* __transaction_state as this broker creates it (transaction.state.log.*);
 * cf holds the configs t points at. */
typedef struct st_txn_topic_configs {
    char seg[32], isr[16];
    st_kv_t kv[3];
} st_txn_topic_configs_t;
void st_server_txn_topic_spec(st_server_t *srv, st_new_topic_t *t, st_txn_topic_configs_t *cf);
/* Create it (controller thread), logging the outcome. */
void st_server_create_txn_topic(st_server_t *srv, st_controller_t *ctl);
/* The __transaction_state partition of a transactional id. */
int32_t st_server_txn_partition_for(st_server_t *srv, st_str_t id);
/* The transaction coordinator configured from srv->cfg (not started;
 * after srv->pids). */
/* What a coordinator answers when the write it waited for met e (Kafka's
 * GroupMetadataManager / TransactionStateManager): fewer in-sync
 * replicas than min.insync.replicas is COORDINATOR_NOT_AVAILABLE, a lost
 * leadership or disk NOT_COORDINATOR; both send the client to retry. */
static inline int16_t st_coord_append_error(st_err_t e) {
    return st_err_wire(e == ST_E_NOT_ENOUGH_REPLICAS || e == ST_E_NOT_ENOUGH_REPLICAS_AFTER_APPEND
                           ? ST_E_COORDINATOR_NOT_AVAILABLE
                           : ST_E_NOT_COORDINATOR);
}
struct st_txn_coord *st_server_txns_new(st_server_t *srv);
/* h_quorum.c: the metadata quorum */
void st_handle_vote(st_server_t *srv, st_request_t *req);
void st_handle_begin_quorum_epoch(st_server_t *srv, st_request_t *req);
void st_handle_end_quorum_epoch(st_server_t *srv, st_request_t *req);
void st_handle_fetch_snapshot(st_server_t *srv, st_request_t *req);
void st_handle_describe_quorum(st_server_t *srv, st_request_t *req);
void st_handle_offset_for_leader_epoch(st_server_t *srv, st_request_t *req);
void st_handle_alter_partition(st_server_t *srv, st_request_t *req);
void st_handle_alter_partition_reassignments(st_server_t *srv, st_request_t *req);
void st_handle_list_partition_reassignments(st_server_t *srv, st_request_t *req);
void st_handle_init_producer_id(st_server_t *srv, st_request_t *req);
void st_handle_allocate_producer_ids(st_server_t *srv, st_request_t *req);
void st_handle_describe_producers(st_server_t *srv, st_request_t *req);
void st_handle_write_txn_markers(st_server_t *srv, st_request_t *req);

/* Producer ids (h_producer.c). */
typedef struct st_pid_pool st_pid_pool_t;
st_pid_pool_t *st_pid_pool_new(st_controller_t *ctl);
void st_pid_pool_free(st_pid_pool_t *p);
/* Blocks past the last one this broker's metadata knows of that an id may
 * be from before the broker takes it as never issued. */
#define ST_PID_ISSUED_SLACK 16
/* 1 when no InitProducerId can have answered pid (UNKNOWN_PRODUCER_ID). */
int st_pid_never_issued(st_server_t *srv, int64_t pid);
/* A producer id from the block at hand, or -1 when none is (a block is
 * then asked for).  Any thread. */
int64_t st_pid_pool_try_take(st_pid_pool_t *p);
void st_handle_elect_leaders(st_server_t *srv, st_request_t *req);
void st_handle_broker_registration(st_server_t *srv, st_request_t *req);
void st_handle_broker_heartbeat(st_server_t *srv, st_request_t *req);
/* a Fetch of __cluster_metadata by a replica (st_handle_fetch sends it) */
void st_handle_raft_fetch(st_server_t *srv, st_request_t *req);
/* The group coordinator configured from srv->cfg (not started). */
struct st_group_coord *st_server_groups_new(st_server_t *srv);
/* The log cleaner (not started), or NULL when log.cleaner.enable is off. */
st_log_cleaner_t *st_server_cleaner_new(st_server_t *srv);

/* Authorized operations (KIP-430) as Kafka reports them without an
 * authorizer: every operation the resource type supports
 * (AclEntry.supportedOperations), bit n for AclOperation code n:
 * READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
 * CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
 * IDEMPOTENT_WRITE 12. */
#define ST_ACL_BIT(code) (1 << (code))
#define ST_ACL_OPS_TOPIC                                                                \
    (ST_ACL_BIT(3) | ST_ACL_BIT(4) | ST_ACL_BIT(5) | ST_ACL_BIT(6) | ST_ACL_BIT(7) |   \
     ST_ACL_BIT(8) | ST_ACL_BIT(10) | ST_ACL_BIT(11))
#define ST_ACL_OPS_GROUP (ST_ACL_BIT(3) | ST_ACL_BIT(6) | ST_ACL_BIT(8))
#define ST_ACL_OPS_CLUSTER                                                              \
    (ST_ACL_BIT(5) | ST_ACL_BIT(7) | ST_ACL_BIT(8) | ST_ACL_BIT(9) | ST_ACL_BIT(10) |  \
     ST_ACL_BIT(11) | ST_ACL_BIT(12))

/* The operations of `supported` the request's principal may do on the
 * resource (KIP-430's authorized operations; `supported` without an
 * authorizer). */
int32_t st_authorized_ops(st_server_t *srv, st_request_t *req, int8_t rtype, const char *name,
                          size_t len, int32_t supported);
/* A topic by its wire name. */
static inline int st_topic_allowed(st_server_t *srv, st_request_t *req, int8_t op, st_str_t name) {
    return st_authorized_str(srv, req, op, ST_ACL_RES_TOPIC, name);
}

/* Copy of a wire string into the request arena, NUL-terminated. */
static inline char *st_req_strdup(st_request_t *req, st_str_t s) {
    return st_arena_strndup(&req->arena, s.len > 0 ? s.p : "", s.len > 0 ? (size_t)s.len : 0);
}

#endif /* ST_SERVER_H */

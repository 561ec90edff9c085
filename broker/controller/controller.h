/*
 * controller.h - cluster metadata as a log of records (KRaft-style).
 *
 * The controller owns the __cluster_metadata log (partition 0).  Every
 * change (topic created, partition added, config set, topic removed,
 * broker registered) is written there as one record batch, made durable,
 * then applied by one deterministic state machine (st_image_apply) that
 * produces a new immutable image.  A restart replays the log through the
 * same function.  A single node is a quorum of one; replicating this log
 * through Raft later changes how a batch becomes committed, not what is
 * stored or how it is applied.
 *
 * Threads: all writes run on the controller thread, one after another
 * (st_controller_submit).  Images are immutable and refcounted: any thread
 * takes one with st_controller_image and releases it when done.
 */
#ifndef ST_CONTROLLER_H
#define ST_CONTROLLER_H

#include "config.h"
#include "log.h"
#include "records.h"
#include "acl.h"
#include "sasl.h"

typedef struct st_meta_partition {
    int32_t id;
    int32_t leader;
    int32_t leader_epoch;
    int32_t partition_epoch;
    int32_t *replicas;
    int nreplicas;
    int32_t *isr;
    int nisr;
    /* a reassignment in progress (KIP-455): replicas is the union of the
     * target and the original; adding = target - original, removing =
     * original - target (both empty when none is) */
    int32_t *adding;
    int nadding;
    int32_t *removing;
    int nremoving;
    /* eligible leader replicas (KIP-966): out of the ISR since it shrank
     * below min.insync.replicas, so they hold everything up to the high
     * watermark (which stopped there); a leader may come from them when
     * the ISR is empty.  lkelr: the last known leader, kept while the
     * partition has none, for when ISR and ELR are both empty. */
    int32_t *elr;
    int nelr;
    int32_t *lkelr;
    int nlkelr;
} st_meta_partition_t;

typedef struct st_meta_topic {
    int refs;
    char *name;
    st_uuid_t id;
    int internal;
    st_meta_partition_t *parts;
    int nparts;
    st_kv_t *configs; /* overrides, sorted by name */
    int nconfigs;
} st_meta_topic_t;

/* One advertised listener of a broker (its registration's endpoints). */
typedef struct st_meta_endpoint {
    char *name; /* the listener name, e.g. PLAINTEXT */
    char *host;
    int32_t port;
} st_meta_endpoint_t;

typedef struct st_meta_broker {
    int32_t id;
    char *host; /* the first endpoint's (empty when none) */
    int32_t port;
    st_meta_endpoint_t *endpoints; /* every one, in registration order */
    int nendpoints;
    char *rack;
    int64_t epoch;
    st_uuid_t incarnation;
    int fenced;
} st_meta_broker_t;

/* A user's SCRAM credential of one mechanism. */
typedef struct st_meta_scram {
    char *user;
    st_scram_cred_t cred;
} st_meta_scram_t;

/* Who may do what: SCRAM credentials (UserScramCredential records, sorted
 * by user, then mechanism) and ACL bindings (AccessControlEntry records,
 * in the order they were made).  Immutable and shared by the images that
 * follow until a batch changes it (refs). */
typedef struct st_meta_security {
    int refs;
    st_meta_scram_t *scram;
    int nscram;
    st_acl_t *acls;
    int nacls;
} st_meta_security_t;

typedef struct st_meta_image {
    int refs;
    int64_t offset; /* metadata log offset of the last record applied */
    st_meta_topic_t **topics; /* sorted by name */
    int ntopics;
    st_meta_broker_t *brokers;
    int nbrokers;
    /* the first producer id no broker has been given yet (ProducerIds
     * records); 0 before the first block */
    int64_t next_producer_id;
    st_meta_security_t *sec; /* NULL: no credential, no ACL */
} st_meta_image_t;

st_meta_image_t *st_image_keep(st_meta_image_t *img);
void st_image_release(st_meta_image_t *img);
const st_meta_topic_t *st_image_topic(const st_meta_image_t *img, const char *name, size_t len);
const st_meta_topic_t *st_image_topic_by_id(const st_meta_image_t *img, const st_uuid_t *id);
const char *st_meta_topic_config(const st_meta_topic_t *t, const char *name);
/* The endpoint of b for listener `name`; with name NULL or empty, or when b
 * has no listener of that name, the first one (NULL: b registered none). */
/* The broker of that id in img (fenced or not), NULL when none. */
const st_meta_broker_t *st_image_broker(const st_meta_image_t *img, int32_t id);
const st_meta_endpoint_t *st_meta_broker_endpoint(const st_meta_broker_t *b, const char *name);
/* The ACL bindings of img as the authorizer reads them (none: n 0). */
void st_image_acls(const st_meta_image_t *img, const st_acl_t **acls, int *n);
/* user's SCRAM credential of mechanism m in img, NULL when none. */
const st_scram_cred_t *st_image_scram(const st_meta_image_t *img, const char *user,
                                      st_sasl_mech_t m);

/* The state machine: a new image from img and the records of one batch.
 * Deterministic: the same records on the same image give the same image. */
st_meta_image_t *st_image_apply(const st_meta_image_t *img, const st_mrec_t *recs, int n,
                                int64_t last_offset);

/* Called on the controller thread after a new image is published, with the
 * previous one (NULL at start). */
typedef void (*st_image_listener_cb)(const st_meta_image_t *old_img,
                                     const st_meta_image_t *new_img, void *arg);

typedef struct st_controller st_controller_t;

typedef struct st_controller_config {
    const st_broker_config_t *broker;
    const char *cluster_id;
    st_listener_spec_t *advertised;
    int nadvertised;
    /* controller.quorum.voters; none: this node alone is the quorum */
    const st_voter_t *voters;
    int nvoters;
    /* the loops the outbound clients to the other voters run on */
    st_net_t *net;
    /* process.roles: whether this node is a broker (registers, heartbeats,
     * hosts partitions); a node that is not in voters follows the quorum
     * as an observer (a broker-only node) */
    int broker_role;
    /* how this node reaches the voters' controller listener (TLS, SASL);
     * borrowed; NULL: plaintext */
    const st_client_security_t *sec;
} st_controller_config_t;

/* Open the metadata log, replay it into an image, register this broker. */
st_err_t st_controller_open(const st_controller_config_t *cfg, st_logmgr_t *logs,
                            st_image_listener_cb listener, void *arg, st_controller_t **out,
                            char *err, size_t errlen);
void st_controller_start(st_controller_t *c);
/* Before the loops stop (SIGTERM): controlled shutdown (the active
 * controller moves this broker's partition leaders away; an active
 * controller resigns so another takes over at once), then the Raft stops
 * and the requests it holds are let go.  Operations submitted afterwards
 * answer NOT_CONTROLLER. */
void st_controller_stop(st_controller_t *c);
void st_controller_close(st_controller_t *c);
st_meta_image_t *st_controller_image(st_controller_t *c);
/* Whether this broker is registered and unfenced in the image it holds:
 * until then (a start-up catching up with the metadata log) the image may
 * lack topics that exist. */
int st_controller_broker_ready(st_controller_t *c);
const char *st_controller_cluster_id(const st_controller_t *c);
/* The active controller (the Raft's leader), -1 while none is known. */
int32_t st_controller_id(st_controller_t *c);
/* The controller a client is told of (Metadata, DescribeCluster): the
 * active controller when it is a broker of img; when it is a
 * controller-only node (clients cannot reach its listener), this broker
 * or another live one, which forwards admin requests to it (Kafka names
 * a live broker the same way); -1 while none is known. */
int32_t st_controller_id_for_clients(st_controller_t *c, const st_meta_image_t *img);
/* Whether this node is a broker (process.roles names broker). */
int st_controller_is_broker(const st_controller_t *c);

/* A Raft request from another node (decoded by raft_wire.c from req, on
 * req's loop): handed to the controller thread, which answers req later
 * on its loop.  msg may point into req. */
struct st_raft_msg;
void st_controller_raft_request(st_controller_t *c, st_request_t *req,
                                const struct st_raft_msg *msg);

/* The metadata quorum as its leader sees it (DescribeQuorum); controller
 * thread only.  NOT_LEADER_OR_FOLLOWER on any other node (leader_id and
 * leader_epoch then say what this node knows).  Arrays are malloc'd: free
 * them with st_quorum_desc_fini. */
typedef struct st_quorum_replica {
    int32_t replica_id;
    int64_t log_end_offset;
    int64_t last_fetch_ms;      /* wall clock, -1: never */
    int64_t last_caught_up_ms; /* wall clock, -1: never */
} st_quorum_replica_t;

typedef struct st_quorum_desc {
    int32_t leader_id;
    int32_t leader_epoch;
    int64_t high_watermark;
    st_quorum_replica_t *voters;
    int nvoters;
    st_quorum_replica_t *observers;
    int nobservers;
} st_quorum_desc_t;

st_err_t st_controller_describe_quorum(st_controller_t *c, st_quorum_desc_t *out);
void st_quorum_desc_fini(st_quorum_desc_t *d);

/* The active controller's answers to BrokerRegistration and BrokerHeartbeat
 * (controller thread; brokers.c). */
void st_controller_broker_registration(st_controller_t *c, const st_broker_registration_req_t *q,
                                       st_broker_registration_resp_t *r);
void st_controller_broker_heartbeat(st_controller_t *c, const st_broker_heartbeat_req_t *q,
                                    st_broker_heartbeat_resp_t *r);

/* An admin request that only the active controller can carry out, sent on
 * to it and answered with its answer (Kafka's forwarding, KIP-590).  On
 * req's loop; 1 when forwarded, 0 when this node is the active controller
 * or none is known (the caller handles req itself). */
int st_controller_forward(st_controller_t *c, st_request_t *req);

/* ElectLeaders (controller thread): election_type 0 preferred, 1 unclean,
 * for each partition named; each gets its error and message. */
typedef struct st_elect_request {
    const char *topic;
    size_t topic_len;
    int32_t partition;
    st_err_t error;
    char message[160];
    int changed; /* internal */
} st_elect_request_t;
void st_controller_elect_leaders(st_controller_t *c, int election_type, st_elect_request_t *parts,
                                 int nparts);

/* AlterPartition (controller thread; brokers.c): the active controller's
 * answer to a leader's ISR change, committed as PartitionChange records;
 * the answer names each partition as it is now.  r lives in a. */
void st_controller_alter_partition(st_controller_t *c, int version,
                                   const st_alter_partition_req_t *q, st_alter_partition_resp_t *r,
                                   st_arena_t *a);

/* This broker's own AlterPartition (the replica layer's ISR change),
 * carried out by the active controller: on the controller thread when this
 * node is it, else sent to it.  done runs once, on the controller thread or
 * a loop, with the answer, or with an error and NULL.  q, at version
 * ST_ALTER_PARTITION_VERSION, stays the caller's until done. */
#define ST_ALTER_PARTITION_VERSION 2
typedef void (*st_alter_done_cb)(void *arg, st_err_t e, const st_alter_partition_resp_t *r);
void st_controller_send_alter_partition(st_controller_t *c, const st_alter_partition_req_t *q,
                                        st_alter_done_cb done, void *arg);

/* AllocateProducerIds (controller thread; brokers.c): the active
 * controller gives the broker the next ST_PRODUCER_ID_BLOCK ids, committed
 * as a ProducerIds record so no id is given twice across brokers,
 * elections and restarts. */
#define ST_PRODUCER_ID_BLOCK 1000 /* Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE */
void st_controller_allocate_producer_ids(st_controller_t *c,
                                         const st_allocate_producer_ids_req_t *q,
                                         st_allocate_producer_ids_resp_t *r);

/* This broker's own request for a block, carried out by the active
 * controller as st_controller_send_alter_partition's.  done runs once, on
 * the controller thread or a loop: ST_OK with the block, or an error. */
typedef void (*st_pid_block_cb)(void *arg, st_err_t e, int64_t start, int32_t len);
void st_controller_send_allocate_producer_ids(st_controller_t *c, st_pid_block_cb done,
                                              void *arg);

/* Run fn(c, arg) on the controller thread. */
typedef void (*st_controller_job_cb)(st_controller_t *c, void *arg);
void st_controller_submit(st_controller_t *c, st_controller_job_cb fn, void *arg);

/* Kafka's rule for topic names: 1-249 of [a-zA-Z0-9._-], not "." or "..".
 * Returns 1 when valid; otherwise writes why. */
int st_topic_name_valid(const char *name, size_t len, char *why, size_t whylen);

/* Kafka's internal topics (__consumer_offsets, __transaction_state) and the
 * metadata log: clients may neither create, delete nor repartition them;
 * the broker creates __consumer_offsets itself, with its own settings. */
int st_topic_is_internal(const char *name, size_t len);

/* ---- operations (controller thread only) ---------------------------------- */

/* Kafka's bound on the partitions one CreateTopics or CreatePartitions
 * request may create (its controller's MAX_PARTITIONS_PER_BATCH and
 * MAX_RECORDS_PER_USER_OP): beyond it the request answers POLICY_VIOLATION.
 * max.broker.partitions (KIP-578) bounds what one broker hosts. */
#define ST_CONTROLLER_MAX_PARTITIONS_PER_REQUEST 10000

typedef struct st_new_topic {
    const char *name;
    size_t name_len;
    int32_t num_partitions;     /* -1: num.partitions */
    int16_t replication_factor; /* -1: default.replication.factor */
    const int32_t *const *assignments; /* optional: per partition, broker ids */
    const int *assignment_sizes;
    int nassignments;
    const st_kv_t *configs;
    int nconfigs;
} st_new_topic_t;

typedef struct st_op_result {
    st_err_t error;
    /* the refusal's reason; with error ST_OK, a notice for the client
     * (a tiered topic switched off) or "" */
    char message[512];
    st_uuid_t topic_id;
    int32_t num_partitions;
    int16_t replication_factor;
} st_op_result_t;

void st_controller_create_topic(st_controller_t *c, const st_new_topic_t *t, int validate_only,
                                st_op_result_t *res);
void st_controller_delete_topic(st_controller_t *c, const char *name, size_t len,
                                const st_uuid_t *id, st_op_result_t *res);
/* AlterPartitionReassignments (KIP-455), on the active controller's thread:
 * starts, replaces or cancels each partition's reassignment (reassign.c);
 * r and what it points at come from a.  NOT_CONTROLLER (the whole answer)
 * on another node. */
void st_controller_alter_reassignments(st_controller_t *c, const st_reassign_req_t *q,
                                       st_reassign_resp_t *r, st_arena_t *a);
/* ListPartitionReassignments from an image: the partitions of q (every one
 * when its topics are null) with a reassignment in progress. */
void st_list_reassignments(const st_meta_image_t *img, const st_list_reassign_req_t *q,
                           st_list_reassign_resp_t *r, st_arena_t *a);
void st_controller_create_partitions(st_controller_t *c, const char *name, size_t len,
                                     int32_t count, int validate_only, st_op_result_t *res);

/* One change of a config (IncrementalAlterConfigs operations; AlterConfigs
 * is SET of every given key after DELETE of the rest). */
enum { ST_CFGOP_SET = 0, ST_CFGOP_DELETE = 1, ST_CFGOP_APPEND = 2, ST_CFGOP_SUBTRACT = 3 };
typedef struct st_config_change {
    const char *name;
    size_t name_len;
    const char *value; /* NULL for delete */
    size_t value_len;
    int op;
} st_config_change_t;

void st_controller_alter_configs(st_controller_t *c, int resource_type, const char *name,
                                 size_t len, const st_config_change_t *changes, int n,
                                 int replace_all, int validate_only, st_op_result_t *res);

/* AlterUserScramCredentials (KIP-554) on the active controller's thread
 * (scram.c): every user's changes checked, then one batch; r and what it
 * points at come from a.  NOT_CONTROLLER for every user on another node. */
void st_controller_alter_scram(st_controller_t *c, const st_alter_scram_req_t *q,
                               st_alter_scram_resp_t *r, st_arena_t *a);
/* DescribeUserScramCredentials from an image (any node): mechanisms and
 * iterations, never a key. */
void st_image_describe_scram(const st_meta_image_t *img, const st_describe_scram_req_t *q,
                             st_describe_scram_resp_t *r, st_arena_t *a);

/* CreateAcls and DeleteAcls on the active controller's thread (acls.c),
 * DescribeAcls from an image; r and what it points at come from a. */
void st_controller_create_acls(st_controller_t *c, const st_create_acls_req_t *q,
                               st_create_acls_resp_t *r, st_arena_t *a);
void st_controller_delete_acls(st_controller_t *c, const st_delete_acls_req_t *q,
                               st_delete_acls_resp_t *r, st_arena_t *a);
void st_image_describe_acls(const st_meta_image_t *img, const st_describe_acls_req_t *q,
                            st_describe_acls_resp_t *r, st_arena_t *a);

#endif /* ST_CONTROLLER_H */

/*
 * records.h - the metadata records of the __cluster_metadata log (KRaft's
 * record types, as Kafka's metadata schemas describe them).
 *
 * Each record's value is framed as
 *   uvarint frame version (1), uvarint record type, uvarint version,
 *   then the record in the flexible encoding of the protocol codec.
 * Keys are null.  One controller operation is one record batch, so a batch
 * is applied whole or not at all.
 */
#ifndef ST_RECORDS_H
#define ST_RECORDS_H

#include "protocol.h"
#include "msg_dsl.h"

enum st_meta_record_type {
    ST_MREC_REGISTER_BROKER = 0,
    ST_MREC_TOPIC = 2,
    ST_MREC_PARTITION = 3,
    ST_MREC_CONFIG = 4,
    ST_MREC_PARTITION_CHANGE = 5,
    ST_MREC_FENCE_BROKER = 7,
    ST_MREC_UNFENCE_BROKER = 8,
    ST_MREC_REMOVE_TOPIC = 9,
    ST_MREC_USER_SCRAM_CREDENTIAL = 11,
    ST_MREC_PRODUCER_IDS = 15,
    ST_MREC_ACCESS_CONTROL_ENTRY = 18,
    ST_MREC_REMOVE_ACCESS_CONTROL_ENTRY = 19,
    ST_MREC_REMOVE_USER_SCRAM_CREDENTIAL = 22
};

/* ConfigRecord resource types (Kafka's ConfigResource.Type) */
enum { ST_RESOURCE_TOPIC = 2, ST_RESOURCE_BROKER = 4, ST_RESOURCE_BROKER_LOGGER = 8 };

#define ST_MREC_TOPIC_FIELDS(X, S)                                                      \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, UUID, topic_id, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_topic, ST_MREC_TOPIC_FIELDS)

#define ST_MREC_PARTITION_FIELDS(X, S)                                                  \
    X(S, INT32, partition_id, V(0), NN, NT, -1, _)                                     \
    X(S, UUID, topic_id, V(0), NN, NT, 0, _)                                           \
    X(S, ARRAY_INT32, replicas, V(0), NN, NT, 0, _)                                    \
    X(S, ARRAY_INT32, isr, V(0), NN, NT, 0, _)                                         \
    X(S, ARRAY_INT32, removing_replicas, V(0), NN, NT, 0, _)                           \
    X(S, ARRAY_INT32, adding_replicas, V(0), NN, NT, 0, _)                             \
    X(S, INT32, leader, V(0), NN, NT, -1, _)                                           \
    X(S, INT8, leader_recovery_state, V(0), NN, 0, 0, _)                               \
    X(S, INT32, leader_epoch, V(0), NN, NT, -1, _)                                     \
    X(S, INT32, partition_epoch, V(0), NN, NT, -1, _)                                  \
    X(S, ARRAY_INT32, eligible_leader_replicas, V(0), NUL(0), 1, ST_DEF_NULL, _)      \
    X(S, ARRAY_INT32, last_known_elr, V(0), NUL(0), 2, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_mrec_partition, ST_MREC_PARTITION_FIELDS)

/* PartitionChangeRecord: only what changes is set; leader -2 and null
 * arrays mean "unchanged" (Kafka's NO_LEADER_CHANGE and absent tags).
 * Both records carry the eligible leader replicas and the last known ELR
 * (KIP-966) in the tags Kafka gives them. */
#define ST_MREC_NO_LEADER_CHANGE (-2)
#define ST_MREC_PARTITION_CHANGE_FIELDS(X, S)                                           \
    X(S, INT32, partition_id, V(0), NN, NT, -1, _)                                     \
    X(S, UUID, topic_id, V(0), NN, NT, 0, _)                                           \
    X(S, ARRAY_INT32, isr, V(0), NUL(0), 0, ST_DEF_NULL, _)                            \
    X(S, INT32, leader, V(0), NN, 1, ST_MREC_NO_LEADER_CHANGE, _)                      \
    X(S, ARRAY_INT32, replicas, V(0), NUL(0), 2, ST_DEF_NULL, _)                      \
    X(S, ARRAY_INT32, removing_replicas, V(0), NUL(0), 3, ST_DEF_NULL, _)             \
    X(S, ARRAY_INT32, adding_replicas, V(0), NUL(0), 4, ST_DEF_NULL, _)              \
    X(S, ARRAY_INT32, eligible_leader_replicas, V(0), NUL(0), 7, ST_DEF_NULL, _)      \
    X(S, ARRAY_INT32, last_known_elr, V(0), NUL(0), 8, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_mrec_partition_change, ST_MREC_PARTITION_CHANGE_FIELDS)

/* FenceBrokerRecord and UnfenceBrokerRecord have the same two fields. */
#define ST_MREC_FENCE_FIELDS(X, S)                                                      \
    X(S, INT32, id, V(0), NN, NT, 0, _)                                                \
    X(S, INT64, epoch, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_fence, ST_MREC_FENCE_FIELDS)

#define ST_MREC_CONFIG_FIELDS(X, S)                                                     \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)                                    \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, STRING, value, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_config, ST_MREC_CONFIG_FIELDS)

#define ST_MREC_REMOVE_TOPIC_FIELDS(X, S) X(S, UUID, topic_id, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_remove_topic, ST_MREC_REMOVE_TOPIC_FIELDS)

#define ST_MREC_ENDPOINT_FIELDS(X, S)                                                   \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, UINT16, port, V(0), NN, NT, 0, _)                                             \
    X(S, INT16, security_protocol, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_endpoint, ST_MREC_ENDPOINT_FIELDS)

#define ST_MREC_FEATURE_FIELDS(X, S)                                                    \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT16, min_supported_version, V(0), NN, NT, 0, _)                             \
    X(S, INT16, max_supported_version, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_feature, ST_MREC_FEATURE_FIELDS)

#define ST_MREC_REGISTER_BROKER_FIELDS(X, S)                                            \
    X(S, INT32, broker_id, V(0), NN, NT, 0, _)                                         \
    X(S, BOOL, is_migrating_zk_broker, V(2), NN, NT, 0, _)                             \
    X(S, UUID, incarnation_id, V(0), NN, NT, 0, _)                                     \
    X(S, INT64, broker_epoch, V(0), NN, NT, 0, _)                                      \
    X(S, ARRAY, endpoints, V(0), NN, NT, 0, st_mrec_endpoint)                          \
    X(S, ARRAY, features, V(0), NN, NT, 0, st_mrec_feature)                            \
    X(S, STRING, rack, V(0), NUL(0), NT, 0, _)                                         \
    X(S, BOOL, fenced, V(0), NN, NT, 1, _)                                             \
    X(S, BOOL, in_controlled_shutdown, V(1), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_register_broker, ST_MREC_REGISTER_BROKER_FIELDS)

/* ProducerIdsRecord: a block of producer ids went to a broker; the next
 * block starts at next_producer_id (KIP-730). */
#define ST_MREC_PRODUCER_IDS_FIELDS(X, S)                                               \
    X(S, INT32, broker_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT64, broker_epoch, V(0), NN, NT, 0, _)                                      \
    X(S, INT64, next_producer_id, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_producer_ids, ST_MREC_PRODUCER_IDS_FIELDS)

/* UserScramCredentialRecord: what the server keeps of a SCRAM password
 * (never the password nor the salted password, KIP-554): mechanism 1
 * SCRAM-SHA-256, 2 SCRAM-SHA-512. */
#define ST_MREC_USER_SCRAM_FIELDS(X, S)                                                 \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT8, mechanism, V(0), NN, NT, 0, _)                                          \
    X(S, BYTES, salt, V(0), NN, NT, 0, _)                                              \
    X(S, BYTES, stored_key, V(0), NN, NT, 0, _)                                        \
    X(S, BYTES, server_key, V(0), NN, NT, 0, _)                                        \
    X(S, INT32, iterations, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_user_scram, ST_MREC_USER_SCRAM_FIELDS)

#define ST_MREC_REMOVE_USER_SCRAM_FIELDS(X, S)                                          \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT8, mechanism, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_remove_user_scram, ST_MREC_REMOVE_USER_SCRAM_FIELDS)

/* AccessControlEntryRecord and RemoveAccessControlEntryRecord: one ACL
 * binding, named by a fresh id (Kafka's StandardAuthorizer records). */
#define ST_MREC_ACL_FIELDS(X, S)                                                        \
    X(S, UUID, id, V(0), NN, NT, 0, _)                                                 \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)                                    \
    X(S, INT8, pattern_type, V(0), NN, NT, 0, _)                                       \
    X(S, STRING, principal, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, INT8, operation, V(0), NN, NT, 0, _)                                          \
    X(S, INT8, permission_type, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_acl, ST_MREC_ACL_FIELDS)

#define ST_MREC_REMOVE_ACL_FIELDS(X, S)                                                 \
    X(S, UUID, id, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_mrec_remove_acl, ST_MREC_REMOVE_ACL_FIELDS)

#include "msg_dsl_end.h"

/* A decoded record: type, version and the struct for that type. */
typedef struct st_mrec {
    int type;
    int version;
    union {
        st_mrec_topic_t topic;
        st_mrec_partition_t partition;
        st_mrec_config_t config;
        st_mrec_remove_topic_t remove_topic;
        st_mrec_register_broker_t register_broker;
        st_mrec_partition_change_t partition_change;
        st_mrec_fence_t fence; /* FenceBroker and UnfenceBroker */
        st_mrec_producer_ids_t producer_ids;
        st_mrec_user_scram_t user_scram;
        st_mrec_remove_user_scram_t remove_user_scram;
        st_mrec_acl_t acl;
        st_mrec_remove_acl_t remove_acl;
    } u;
} st_mrec_t;

/* Frame and encode a record into out (a record value). */
void st_mrec_encode(int type, int version, const void *rec, st_buf_t *out);
/* Decode a record value; unknown types give ST_E_NOT_FOUND (skipped). */
st_err_t st_mrec_decode(const uint8_t *p, size_t len, st_arena_t *a, st_mrec_t *out);

#endif /* ST_RECORDS_H */

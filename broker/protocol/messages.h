/*
 * messages.h - the request and response messages Strata speaks, one
 * description each (rows explained in protocol.h).  Facts (field names,
 * types, versions, tags, defaults) follow Kafka's message schemas; the form
 * is ours.  Nested structs come before the structs that contain them.
 */
#ifndef ST_MESSAGES_H
#define ST_MESSAGES_H

#include "msg_dsl.h"

enum st_api_key {
    ST_API_PRODUCE = 0,
    ST_API_FETCH = 1,
    ST_API_LIST_OFFSETS = 2,
    ST_API_METADATA = 3,
    ST_API_OFFSET_COMMIT = 8,
    ST_API_OFFSET_FETCH = 9,
    ST_API_FIND_COORDINATOR = 10,
    ST_API_JOIN_GROUP = 11,
    ST_API_HEARTBEAT = 12,
    ST_API_LEAVE_GROUP = 13,
    ST_API_SYNC_GROUP = 14,
    ST_API_DESCRIBE_GROUPS = 15,
    ST_API_LIST_GROUPS = 16,
    ST_API_API_VERSIONS = 18,
    ST_API_CREATE_TOPICS = 19,
    ST_API_DELETE_TOPICS = 20,
    ST_API_DELETE_RECORDS = 21,
    ST_API_INIT_PRODUCER_ID = 22,
    ST_API_OFFSET_FOR_LEADER_EPOCH = 23,
    ST_API_TXN_OFFSET_COMMIT = 28,
    ST_API_DESCRIBE_CONFIGS = 32,
    ST_API_ALTER_CONFIGS = 33,
    ST_API_DESCRIBE_LOG_DIRS = 35,
    ST_API_CREATE_PARTITIONS = 37,
    ST_API_DELETE_GROUPS = 42,
    ST_API_ELECT_LEADERS = 43,
    ST_API_INCREMENTAL_ALTER_CONFIGS = 44,
    ST_API_ALTER_PARTITION_REASSIGNMENTS = 45,
    ST_API_LIST_PARTITION_REASSIGNMENTS = 46,
    ST_API_OFFSET_DELETE = 47,
    ST_API_VOTE = 52,
    ST_API_BEGIN_QUORUM_EPOCH = 53,
    ST_API_END_QUORUM_EPOCH = 54,
    ST_API_DESCRIBE_QUORUM = 55,
    ST_API_ALTER_PARTITION = 56,
    ST_API_FETCH_SNAPSHOT = 59,
    ST_API_DESCRIBE_CLUSTER = 60,
    ST_API_BROKER_REGISTRATION = 62,
    ST_API_DESCRIBE_PRODUCERS = 61,
    ST_API_BROKER_HEARTBEAT = 63,
    ST_API_ALLOCATE_PRODUCER_IDS = 67,
    ST_API_WRITE_TXN_MARKERS = 27,
    ST_API_ADD_PARTITIONS_TO_TXN = 24,
    ST_API_ADD_OFFSETS_TO_TXN = 25,
    ST_API_END_TXN = 26,
    ST_API_DESCRIBE_TRANSACTIONS = 65,
    ST_API_LIST_TRANSACTIONS = 66,
    ST_API_DESCRIBE_TOPIC_PARTITIONS = 75,
    ST_API_SASL_HANDSHAKE = 17,
    ST_API_SASL_AUTHENTICATE = 36,
    ST_API_DESCRIBE_USER_SCRAM_CREDENTIALS = 50,
    ST_API_ALTER_USER_SCRAM_CREDENTIALS = 51,
    ST_API_DESCRIBE_ACLS = 29,
    ST_API_CREATE_ACLS = 30,
    ST_API_DELETE_ACLS = 31
};

/* ---- ApiVersions (18) ------------------------------------------------- */
#define ST_API_VERSIONS_REQ(X, S)                                                       \
    X(S, STRING, client_software_name, V(3), NN, NT, 0, _)                             \
    X(S, STRING, client_software_version, V(3), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_api_versions_req, ST_API_VERSIONS_REQ)

#define ST_API_VERSIONS_KEY(X, S)                                                       \
    X(S, INT16, api_key, V(0), NN, NT, 0, _)                                           \
    X(S, INT16, min_version, V(0), NN, NT, 0, _)                                       \
    X(S, INT16, max_version, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_api_versions_key, ST_API_VERSIONS_KEY)

#define ST_API_VERSIONS_FEATURE(X, S)                                                   \
    X(S, STRING, name, V(3), NN, NT, 0, _)                                             \
    X(S, INT16, min_version, V(3), NN, NT, 0, _)                                       \
    X(S, INT16, max_version, V(3), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_api_versions_feature, ST_API_VERSIONS_FEATURE)

/* Kafka's FinalizedFeatureKey: the max level comes before the min level. */
#define ST_API_VERSIONS_FINALIZED(X, S)                                                 \
    X(S, STRING, name, V(3), NN, NT, 0, _)                                             \
    X(S, INT16, max_version_level, V(3), NN, NT, 0, _)                                 \
    X(S, INT16, min_version_level, V(3), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_api_versions_finalized, ST_API_VERSIONS_FINALIZED)

#define ST_API_VERSIONS_RESP(X, S)                                                      \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, api_keys, V(0), NN, NT, 0, st_api_versions_key)                        \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, ARRAY, supported_features, V(3), NN, 0, 0, st_api_versions_feature)           \
    X(S, INT64, finalized_features_epoch, V(3), NN, 1, -1, _)                          \
    X(S, ARRAY, finalized_features, V(3), NN, 2, 0, st_api_versions_finalized)         \
    X(S, BOOL, zk_migration_ready, V(3), NN, 3, 0, _)
ST_SCHEMA_DECLARE(st_api_versions_resp, ST_API_VERSIONS_RESP)

/* ---- Metadata (3) ----------------------------------------------------- */
#define ST_METADATA_REQ_TOPIC(X, S)                                                     \
    X(S, UUID, topic_id, V(10), NN, NT, 0, _)                                          \
    X(S, STRING, name, V(0), NUL(10), NT, 0, _)
ST_SCHEMA_DECLARE(st_metadata_req_topic, ST_METADATA_REQ_TOPIC)

#define ST_METADATA_REQ(X, S)                                                           \
    X(S, ARRAY, topics, V(0), NUL(1), NT, 0, st_metadata_req_topic)                    \
    X(S, BOOL, allow_auto_topic_creation, V(4), NN, NT, 1, _)                          \
    X(S, BOOL, include_cluster_authorized_operations, VR(8, 10), NN, NT, 0, _)         \
    X(S, BOOL, include_topic_authorized_operations, V(8), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_metadata_req, ST_METADATA_REQ)

#define ST_METADATA_BROKER(X, S)                                                        \
    X(S, INT32, node_id, V(0), NN, NT, 0, _)                                           \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, INT32, port, V(0), NN, NT, 0, _)                                              \
    X(S, STRING, rack, V(1), NUL(1), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_metadata_broker, ST_METADATA_BROKER)

#define ST_METADATA_PARTITION(X, S)                                                     \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT32, leader_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(7), NN, NT, -1, _)                                     \
    X(S, ARRAY_INT32, replica_nodes, V(0), NN, NT, 0, _)                               \
    X(S, ARRAY_INT32, isr_nodes, V(0), NN, NT, 0, _)                                   \
    X(S, ARRAY_INT32, offline_replicas, V(5), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_metadata_partition, ST_METADATA_PARTITION)

#define ST_METADATA_TOPIC(X, S)                                                         \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, name, V(0), NUL(12), NT, 0, _)                                        \
    X(S, UUID, topic_id, V(10), NN, NT, 0, _)                                          \
    X(S, BOOL, is_internal, V(1), NN, NT, 0, _)                                        \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_metadata_partition)                    \
    X(S, INT32, topic_authorized_operations, V(8), NN, NT, INT32_MIN, _)
ST_SCHEMA_DECLARE(st_metadata_topic, ST_METADATA_TOPIC)

#define ST_METADATA_RESP(X, S)                                                          \
    X(S, INT32, throttle_time_ms, V(3), NN, NT, 0, _)                                  \
    X(S, ARRAY, brokers, V(0), NN, NT, 0, st_metadata_broker)                          \
    X(S, STRING, cluster_id, V(2), NUL(2), NT, ST_DEF_NULL, _)                         \
    X(S, INT32, controller_id, V(1), NN, NT, -1, _)                                    \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_metadata_topic)                            \
    X(S, INT32, cluster_authorized_operations, VR(8, 10), NN, NT, INT32_MIN, _)
ST_SCHEMA_DECLARE(st_metadata_resp, ST_METADATA_RESP)

/* ---- Produce (0) ------------------------------------------------------ */
#define ST_PRODUCE_REQ_PART(X, S)                                                       \
    X(S, INT32, index, V(0), NN, NT, 0, _)                                             \
    X(S, RECORDS, records, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_produce_req_part, ST_PRODUCE_REQ_PART)

#define ST_PRODUCE_REQ_TOPIC(X, S)                                                      \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_produce_req_part)
ST_SCHEMA_DECLARE(st_produce_req_topic, ST_PRODUCE_REQ_TOPIC)

#define ST_PRODUCE_REQ(X, S)                                                            \
    X(S, STRING, transactional_id, V(3), NUL(3), NT, ST_DEF_NULL, _)                   \
    X(S, INT16, acks, V(0), NN, NT, 0, _)                                              \
    X(S, INT32, timeout_ms, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_produce_req_topic)
ST_SCHEMA_DECLARE(st_produce_req, ST_PRODUCE_REQ)

#define ST_LEADER_ID_EPOCH(X, S)                                                        \
    X(S, INT32, leader_id, V(0), NN, NT, -1, _)                                        \
    X(S, INT32, leader_epoch, V(0), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_leader_id_epoch, ST_LEADER_ID_EPOCH)

#define ST_PRODUCE_RECORD_ERROR(X, S)                                                   \
    X(S, INT32, batch_index, V(8), NN, NT, 0, _)                                       \
    X(S, STRING, message, V(8), NUL(8), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_produce_record_error, ST_PRODUCE_RECORD_ERROR)

#define ST_PRODUCE_RESP_PART(X, S)                                                      \
    X(S, INT32, index, V(0), NN, NT, 0, _)                                             \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT64, base_offset, V(0), NN, NT, 0, _)                                       \
    X(S, INT64, log_append_time_ms, V(2), NN, NT, -1, _)                               \
    X(S, INT64, log_start_offset, V(5), NN, NT, -1, _)                                 \
    X(S, ARRAY, record_errors, V(8), NN, NT, 0, st_produce_record_error)               \
    X(S, STRING, error_message, V(8), NUL(8), NT, ST_DEF_NULL, _)                      \
    X(S, STRUCT, current_leader, V(10), NN, 0, 0, st_leader_id_epoch)
ST_SCHEMA_DECLARE(st_produce_resp_part, ST_PRODUCE_RESP_PART)

#define ST_PRODUCE_RESP_TOPIC(X, S)                                                     \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_produce_resp_part)
ST_SCHEMA_DECLARE(st_produce_resp_topic, ST_PRODUCE_RESP_TOPIC)

#define ST_NODE_ENDPOINT(X, S)                                                          \
    X(S, INT32, node_id, V(0), NN, NT, 0, _)                                           \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, INT32, port, V(0), NN, NT, 0, _)                                              \
    X(S, STRING, rack, V(0), NUL(0), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_node_endpoint, ST_NODE_ENDPOINT)

#define ST_PRODUCE_RESP(X, S)                                                           \
    X(S, ARRAY, responses, V(0), NN, NT, 0, st_produce_resp_topic)                     \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, ARRAY, node_endpoints, V(10), NN, 0, 0, st_node_endpoint)
ST_SCHEMA_DECLARE(st_produce_resp, ST_PRODUCE_RESP)

/* ---- Fetch (1) -------------------------------------------------------- */
#define ST_FETCH_REPLICA_STATE(X, S)                                                    \
    X(S, INT32, replica_id, V(0), NN, NT, -1, _)                                       \
    X(S, INT64, replica_epoch, V(0), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_fetch_replica_state, ST_FETCH_REPLICA_STATE)

#define ST_FETCH_REQ_PART(X, S)                                                         \
    X(S, INT32, partition, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, current_leader_epoch, V(9), NN, NT, -1, _)                             \
    X(S, INT64, fetch_offset, V(0), NN, NT, 0, _)                                      \
    X(S, INT32, last_fetched_epoch, V(12), NN, NT, -1, _)                              \
    X(S, INT64, log_start_offset, V(5), NN, NT, -1, _)                                 \
    X(S, INT32, partition_max_bytes, V(0), NN, NT, 0, _)                               \
    X(S, UUID, replica_directory_id, V(17), NN, 0, 0, _)
ST_SCHEMA_DECLARE(st_fetch_req_part, ST_FETCH_REQ_PART)

#define ST_FETCH_REQ_TOPIC(X, S)                                                        \
    X(S, STRING, topic, VR(0, 12), NN, NT, 0, _)                                       \
    X(S, UUID, topic_id, V(13), NN, NT, 0, _)                                          \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_fetch_req_part)
ST_SCHEMA_DECLARE(st_fetch_req_topic, ST_FETCH_REQ_TOPIC)

#define ST_FETCH_FORGOTTEN(X, S)                                                        \
    X(S, STRING, topic, VR(7, 12), NN, NT, 0, _)                                       \
    X(S, UUID, topic_id, V(13), NN, NT, 0, _)                                          \
    X(S, ARRAY_INT32, partitions, V(7), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_fetch_forgotten, ST_FETCH_FORGOTTEN)

#define ST_FETCH_REQ(X, S)                                                              \
    X(S, STRING, cluster_id, V(12), NUL(12), 0, ST_DEF_NULL, _)                        \
    X(S, INT32, replica_id, VR(0, 14), NN, NT, -1, _)                                  \
    X(S, STRUCT, replica_state, V(15), NN, 1, 0, st_fetch_replica_state)               \
    X(S, INT32, max_wait_ms, V(0), NN, NT, 0, _)                                       \
    X(S, INT32, min_bytes, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, max_bytes, V(3), NN, NT, INT32_MAX, _)                                 \
    X(S, INT8, isolation_level, V(4), NN, NT, 0, _)                                    \
    X(S, INT32, session_id, V(7), NN, NT, 0, _)                                        \
    X(S, INT32, session_epoch, V(7), NN, NT, -1, _)                                    \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_fetch_req_topic)                           \
    X(S, ARRAY, forgotten_topics, V(7), NN, NT, 0, st_fetch_forgotten)                 \
    X(S, STRING, rack_id, V(11), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_fetch_req, ST_FETCH_REQ)

#define ST_EPOCH_END_OFFSET(X, S)                                                       \
    X(S, INT32, epoch, V(0), NN, NT, -1, _)                                            \
    X(S, INT64, end_offset, V(0), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_epoch_end_offset, ST_EPOCH_END_OFFSET)

#define ST_SNAPSHOT_ID(X, S)                                                            \
    X(S, INT64, end_offset, V(0), NN, NT, -1, _)                                       \
    X(S, INT32, epoch, V(0), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_snapshot_id, ST_SNAPSHOT_ID)

#define ST_ABORTED_TXN(X, S)                                                            \
    X(S, INT64, producer_id, V(4), NN, NT, 0, _)                                       \
    X(S, INT64, first_offset, V(4), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_aborted_txn, ST_ABORTED_TXN)

#define ST_FETCH_RESP_PART(X, S)                                                        \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT64, high_watermark, V(0), NN, NT, 0, _)                                    \
    X(S, INT64, last_stable_offset, V(4), NN, NT, -1, _)                               \
    X(S, INT64, log_start_offset, V(5), NN, NT, -1, _)                                 \
    X(S, STRUCT, diverging_epoch, V(12), NN, 0, 0, st_epoch_end_offset)                \
    X(S, STRUCT, current_leader, V(12), NN, 1, 0, st_leader_id_epoch)                  \
    X(S, STRUCT, snapshot_id, V(12), NN, 2, 0, st_snapshot_id)                         \
    X(S, ARRAY, aborted_transactions, V(4), NUL(4), NT, ST_DEF_NULL, st_aborted_txn)   \
    X(S, INT32, preferred_read_replica, V(11), NN, NT, -1, _)                          \
    X(S, RECORDS, records, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_fetch_resp_part, ST_FETCH_RESP_PART)

#define ST_FETCH_RESP_TOPIC(X, S)                                                       \
    X(S, STRING, topic, VR(0, 12), NN, NT, 0, _)                                       \
    X(S, UUID, topic_id, V(13), NN, NT, 0, _)                                          \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_fetch_resp_part)
ST_SCHEMA_DECLARE(st_fetch_resp_topic, ST_FETCH_RESP_TOPIC)

#define ST_FETCH_RESP(X, S)                                                             \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(7), NN, NT, 0, _)                                        \
    X(S, INT32, session_id, V(7), NN, NT, 0, _)                                        \
    X(S, ARRAY, responses, V(0), NN, NT, 0, st_fetch_resp_topic)                       \
    X(S, ARRAY, node_endpoints, V(16), NN, 0, 0, st_node_endpoint)
ST_SCHEMA_DECLARE(st_fetch_resp, ST_FETCH_RESP)

/* ---- ListOffsets (2) -------------------------------------------------- */
#define ST_LIST_OFFSETS_REQ_PART(X, S)                                                  \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT32, current_leader_epoch, V(4), NN, NT, -1, _)                             \
    X(S, INT64, timestamp, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, max_num_offsets, VR(0, 0), NN, NT, 1, _)
ST_SCHEMA_DECLARE(st_list_offsets_req_part, ST_LIST_OFFSETS_REQ_PART)

#define ST_LIST_OFFSETS_REQ_TOPIC(X, S)                                                 \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_list_offsets_req_part)
ST_SCHEMA_DECLARE(st_list_offsets_req_topic, ST_LIST_OFFSETS_REQ_TOPIC)

#define ST_LIST_OFFSETS_REQ(X, S)                                                       \
    X(S, INT32, replica_id, V(0), NN, NT, 0, _)                                        \
    X(S, INT8, isolation_level, V(2), NN, NT, 0, _)                                    \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_list_offsets_req_topic)                    \
    X(S, INT32, timeout_ms, V(10), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_list_offsets_req, ST_LIST_OFFSETS_REQ)

#define ST_LIST_OFFSETS_RESP_PART(X, S)                                                 \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY_INT64, old_style_offsets, VR(0, 0), NN, NT, 0, _)                       \
    X(S, INT64, timestamp, V(1), NN, NT, -1, _)                                        \
    X(S, INT64, offset, V(1), NN, NT, -1, _)                                           \
    X(S, INT32, leader_epoch, V(4), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_list_offsets_resp_part, ST_LIST_OFFSETS_RESP_PART)

#define ST_LIST_OFFSETS_RESP_TOPIC(X, S)                                                \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_list_offsets_resp_part)
ST_SCHEMA_DECLARE(st_list_offsets_resp_topic, ST_LIST_OFFSETS_RESP_TOPIC)

#define ST_LIST_OFFSETS_RESP(X, S)                                                      \
    X(S, INT32, throttle_time_ms, V(2), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_list_offsets_resp_topic)
ST_SCHEMA_DECLARE(st_list_offsets_resp, ST_LIST_OFFSETS_RESP)

/* ---- CreateTopics (19) ------------------------------------------------ */
#define ST_CREATE_TOPICS_ASSIGNMENT(X, S)                                               \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, ARRAY_INT32, broker_ids, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_create_topics_assignment, ST_CREATE_TOPICS_ASSIGNMENT)

#define ST_CONFIG_KV(X, S)                                                              \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, STRING, value, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_config_kv, ST_CONFIG_KV)

#define ST_CREATE_TOPICS_TOPIC(X, S)                                                    \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT32, num_partitions, V(0), NN, NT, 0, _)                                    \
    X(S, INT16, replication_factor, V(0), NN, NT, 0, _)                                \
    X(S, ARRAY, assignments, V(0), NN, NT, 0, st_create_topics_assignment)             \
    X(S, ARRAY, configs, V(0), NN, NT, 0, st_config_kv)
ST_SCHEMA_DECLARE(st_create_topics_topic, ST_CREATE_TOPICS_TOPIC)

#define ST_CREATE_TOPICS_REQ(X, S)                                                      \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_create_topics_topic)                       \
    X(S, INT32, timeout_ms, V(0), NN, NT, 60000, _)                                    \
    X(S, BOOL, validate_only, V(1), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_create_topics_req, ST_CREATE_TOPICS_REQ)

#define ST_CREATE_TOPICS_CONFIG(X, S)                                                   \
    X(S, STRING, name, V(5), NN, NT, 0, _)                                             \
    X(S, STRING, value, V(5), NUL(5), NT, 0, _)                                        \
    X(S, BOOL, read_only, V(5), NN, NT, 0, _)                                          \
    X(S, INT8, config_source, V(5), NN, NT, -1, _)                                     \
    X(S, BOOL, is_sensitive, V(5), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_create_topics_config, ST_CREATE_TOPICS_CONFIG)

#define ST_CREATE_TOPICS_RESULT(X, S)                                                   \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, UUID, topic_id, V(7), NN, NT, 0, _)                                           \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(1), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, INT16, topic_config_error_code, V(5), NN, 0, 0, _)                            \
    X(S, INT32, num_partitions, V(5), NN, NT, -1, _)                                   \
    X(S, INT16, replication_factor, V(5), NN, NT, -1, _)                               \
    X(S, ARRAY, configs, V(5), NUL(5), NT, ST_DEF_NULL, st_create_topics_config)
ST_SCHEMA_DECLARE(st_create_topics_result, ST_CREATE_TOPICS_RESULT)

#define ST_CREATE_TOPICS_RESP(X, S)                                                     \
    X(S, INT32, throttle_time_ms, V(2), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_create_topics_result)
ST_SCHEMA_DECLARE(st_create_topics_resp, ST_CREATE_TOPICS_RESP)

/* ---- DeleteTopics (20) ------------------------------------------------ */
#define ST_DELETE_TOPICS_STATE(X, S)                                                    \
    X(S, STRING, name, V(6), NUL(6), NT, ST_DEF_NULL, _)                               \
    X(S, UUID, topic_id, V(6), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_delete_topics_state, ST_DELETE_TOPICS_STATE)

#define ST_DELETE_TOPICS_REQ(X, S)                                                      \
    X(S, ARRAY, topics, V(6), NN, NT, 0, st_delete_topics_state)                       \
    X(S, ARRAY_STRING, topic_names, VR(0, 5), NN, NT, 0, _)                            \
    X(S, INT32, timeout_ms, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_delete_topics_req, ST_DELETE_TOPICS_REQ)

#define ST_DELETE_TOPICS_RESULT(X, S)                                                   \
    X(S, STRING, name, V(0), NUL(6), NT, 0, _)                                         \
    X(S, UUID, topic_id, V(6), NN, NT, 0, _)                                           \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(5), NUL(5), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_delete_topics_result, ST_DELETE_TOPICS_RESULT)

#define ST_DELETE_TOPICS_RESP(X, S)                                                     \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, ARRAY, responses, V(0), NN, NT, 0, st_delete_topics_result)
ST_SCHEMA_DECLARE(st_delete_topics_resp, ST_DELETE_TOPICS_RESP)

/* ---- DeleteRecords (21) ----------------------------------------------- */
#define ST_DELETE_RECORDS_REQ_PART(X, S)                                                \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT64, offset, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_delete_records_req_part, ST_DELETE_RECORDS_REQ_PART)

#define ST_DELETE_RECORDS_REQ_TOPIC(X, S)                                               \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_delete_records_req_part)
ST_SCHEMA_DECLARE(st_delete_records_req_topic, ST_DELETE_RECORDS_REQ_TOPIC)

#define ST_DELETE_RECORDS_REQ(X, S)                                                     \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_delete_records_req_topic)                  \
    X(S, INT32, timeout_ms, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_delete_records_req, ST_DELETE_RECORDS_REQ)

#define ST_DELETE_RECORDS_RESP_PART(X, S)                                               \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT64, low_watermark, V(0), NN, NT, 0, _)                                     \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_delete_records_resp_part, ST_DELETE_RECORDS_RESP_PART)

#define ST_DELETE_RECORDS_RESP_TOPIC(X, S)                                              \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_delete_records_resp_part)
ST_SCHEMA_DECLARE(st_delete_records_resp_topic, ST_DELETE_RECORDS_RESP_TOPIC)

#define ST_DELETE_RECORDS_RESP(X, S)                                                    \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_delete_records_resp_topic)
ST_SCHEMA_DECLARE(st_delete_records_resp, ST_DELETE_RECORDS_RESP)

/* ---- DescribeConfigs (32) --------------------------------------------- */
#define ST_DESCRIBE_CONFIGS_RESOURCE(X, S)                                              \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)                                    \
    X(S, ARRAY_STRING, configuration_keys, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_configs_resource, ST_DESCRIBE_CONFIGS_RESOURCE)

#define ST_DESCRIBE_CONFIGS_REQ(X, S)                                                   \
    X(S, ARRAY, resources, V(0), NN, NT, 0, st_describe_configs_resource)              \
    X(S, BOOL, include_synonyms, V(1), NN, NT, 0, _)                                   \
    X(S, BOOL, include_documentation, V(3), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_configs_req, ST_DESCRIBE_CONFIGS_REQ)

#define ST_DESCRIBE_CONFIGS_SYNONYM(X, S)                                               \
    X(S, STRING, name, V(1), NN, NT, 0, _)                                             \
    X(S, STRING, value, V(1), NUL(0), NT, 0, _)                                        \
    X(S, INT8, source, V(1), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_configs_synonym, ST_DESCRIBE_CONFIGS_SYNONYM)

#define ST_DESCRIBE_CONFIGS_ENTRY(X, S)                                                 \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, STRING, value, V(0), NUL(0), NT, 0, _)                                        \
    X(S, BOOL, read_only, V(0), NN, NT, 0, _)                                          \
    X(S, BOOL, is_default, VR(0, 0), NN, NT, 0, _)                                     \
    X(S, INT8, config_source, V(1), NN, NT, -1, _)                                     \
    X(S, BOOL, is_sensitive, V(0), NN, NT, 0, _)                                       \
    X(S, ARRAY, synonyms, V(1), NN, NT, 0, st_describe_configs_synonym)                \
    X(S, INT8, config_type, V(3), NN, NT, 0, _)                                        \
    X(S, STRING, documentation, V(3), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_configs_entry, ST_DESCRIBE_CONFIGS_ENTRY)

#define ST_DESCRIBE_CONFIGS_RESULT(X, S)                                                \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)                                    \
    X(S, ARRAY, configs, V(0), NN, NT, 0, st_describe_configs_entry)
ST_SCHEMA_DECLARE(st_describe_configs_result, ST_DESCRIBE_CONFIGS_RESULT)

#define ST_DESCRIBE_CONFIGS_RESP(X, S)                                                  \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, results, V(0), NN, NT, 0, st_describe_configs_result)
ST_SCHEMA_DECLARE(st_describe_configs_resp, ST_DESCRIBE_CONFIGS_RESP)

/* ---- AlterConfigs (33) and IncrementalAlterConfigs (44) ---------------- */
#define ST_ALTER_CONFIG(X, S)                                                           \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, STRING, value, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_alter_config, ST_ALTER_CONFIG)

#define ST_ALTER_CONFIGS_RESOURCE(X, S)                                                 \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)                                    \
    X(S, ARRAY, configs, V(0), NN, NT, 0, st_alter_config)
ST_SCHEMA_DECLARE(st_alter_configs_resource, ST_ALTER_CONFIGS_RESOURCE)

#define ST_ALTER_CONFIGS_REQ(X, S)                                                      \
    X(S, ARRAY, resources, V(0), NN, NT, 0, st_alter_configs_resource)                 \
    X(S, BOOL, validate_only, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_alter_configs_req, ST_ALTER_CONFIGS_REQ)

#define ST_INCR_ALTER_CONFIG(X, S)                                                      \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT8, config_operation, V(0), NN, NT, 0, _)                                   \
    X(S, STRING, value, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_incr_alter_config, ST_INCR_ALTER_CONFIG)

#define ST_INCR_ALTER_CONFIGS_RESOURCE(X, S)                                            \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)                                    \
    X(S, ARRAY, configs, V(0), NN, NT, 0, st_incr_alter_config)
ST_SCHEMA_DECLARE(st_incr_alter_configs_resource, ST_INCR_ALTER_CONFIGS_RESOURCE)

#define ST_INCR_ALTER_CONFIGS_REQ(X, S)                                                 \
    X(S, ARRAY, resources, V(0), NN, NT, 0, st_incr_alter_configs_resource)            \
    X(S, BOOL, validate_only, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_incr_alter_configs_req, ST_INCR_ALTER_CONFIGS_REQ)

/* Both APIs answer with the same shape. */
#define ST_ALTER_CONFIGS_RESULT(X, S)                                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_alter_configs_result, ST_ALTER_CONFIGS_RESULT)

#define ST_ALTER_CONFIGS_RESP(X, S)                                                     \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, responses, V(0), NN, NT, 0, st_alter_configs_result)
ST_SCHEMA_DECLARE(st_alter_configs_resp, ST_ALTER_CONFIGS_RESP)

/* ---- CreatePartitions (37) -------------------------------------------- */
#define ST_CREATE_PARTITIONS_ASSIGNMENT(X, S)                                           \
    X(S, ARRAY_INT32, broker_ids, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_create_partitions_assignment, ST_CREATE_PARTITIONS_ASSIGNMENT)

#define ST_CREATE_PARTITIONS_TOPIC(X, S)                                                \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT32, count, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, assignments, V(0), NUL(0), NT, 0, st_create_partitions_assignment)
ST_SCHEMA_DECLARE(st_create_partitions_topic, ST_CREATE_PARTITIONS_TOPIC)

#define ST_CREATE_PARTITIONS_REQ(X, S)                                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_create_partitions_topic)                   \
    X(S, INT32, timeout_ms, V(0), NN, NT, 0, _)                                        \
    X(S, BOOL, validate_only, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_create_partitions_req, ST_CREATE_PARTITIONS_REQ)

#define ST_CREATE_PARTITIONS_RESULT(X, S)                                               \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_create_partitions_result, ST_CREATE_PARTITIONS_RESULT)

#define ST_CREATE_PARTITIONS_RESP(X, S)                                                 \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, results, V(0), NN, NT, 0, st_create_partitions_result)
ST_SCHEMA_DECLARE(st_create_partitions_resp, ST_CREATE_PARTITIONS_RESP)

/* ---- AlterPartitionReassignments (45), ListPartitionReassignments (46):
 * KIP-455.  Flexible from v0.  A null replicas cancels a partition's
 * reassignment; a null topics lists every one in progress. */
#define ST_REASSIGN_REQ_PART(X, S)                                                      \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, ARRAY_INT32, replicas, V(0), NUL(0), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_reassign_req_part, ST_REASSIGN_REQ_PART)

#define ST_REASSIGN_REQ_TOPIC(X, S)                                                     \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_reassign_req_part)
ST_SCHEMA_DECLARE(st_reassign_req_topic, ST_REASSIGN_REQ_TOPIC)

#define ST_REASSIGN_REQ(X, S)                                                           \
    X(S, INT32, timeout_ms, V(0), NN, NT, 60000, _)                                    \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_reassign_req_topic)
ST_SCHEMA_DECLARE(st_reassign_req, ST_REASSIGN_REQ)

#define ST_REASSIGN_RESP_PART(X, S)                                                     \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_reassign_resp_part, ST_REASSIGN_RESP_PART)

#define ST_REASSIGN_RESP_TOPIC(X, S)                                                    \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_reassign_resp_part)
ST_SCHEMA_DECLARE(st_reassign_resp_topic, ST_REASSIGN_RESP_TOPIC)

#define ST_REASSIGN_RESP(X, S)                                                          \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, ARRAY, responses, V(0), NN, NT, 0, st_reassign_resp_topic)
ST_SCHEMA_DECLARE(st_reassign_resp, ST_REASSIGN_RESP)

#define ST_LIST_REASSIGN_REQ_TOPIC(X, S)                                                \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY_INT32, partition_indexes, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_list_reassign_req_topic, ST_LIST_REASSIGN_REQ_TOPIC)

#define ST_LIST_REASSIGN_REQ(X, S)                                                      \
    X(S, INT32, timeout_ms, V(0), NN, NT, 60000, _)                                    \
    X(S, ARRAY, topics, V(0), NUL(0), NT, ST_DEF_NULL, st_list_reassign_req_topic)
ST_SCHEMA_DECLARE(st_list_reassign_req, ST_LIST_REASSIGN_REQ)

#define ST_LIST_REASSIGN_RESP_PART(X, S)                                                \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, ARRAY_INT32, replicas, V(0), NN, NT, 0, _)                                    \
    X(S, ARRAY_INT32, adding_replicas, V(0), NN, NT, 0, _)                             \
    X(S, ARRAY_INT32, removing_replicas, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_list_reassign_resp_part, ST_LIST_REASSIGN_RESP_PART)

#define ST_LIST_REASSIGN_RESP_TOPIC(X, S)                                               \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_list_reassign_resp_part)
ST_SCHEMA_DECLARE(st_list_reassign_resp_topic, ST_LIST_REASSIGN_RESP_TOPIC)

#define ST_LIST_REASSIGN_RESP(X, S)                                                     \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_list_reassign_resp_topic)
ST_SCHEMA_DECLARE(st_list_reassign_resp, ST_LIST_REASSIGN_RESP)

/* ---- DescribeCluster (60) --------------------------------------------- */
/* ---- SaslHandshake (17) and SaslAuthenticate (36), KIP-152 ------------ *
 * Handshake v1 means every SASL token travels in a SaslAuthenticate
 * request (v0's raw tokens are not served). */
#define ST_SASL_HANDSHAKE_REQ(X, S)                                                     \
    X(S, STRING, mechanism, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_sasl_handshake_req, ST_SASL_HANDSHAKE_REQ)

#define ST_SASL_HANDSHAKE_RESP(X, S)                                                    \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY_STRING, mechanisms, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_sasl_handshake_resp, ST_SASL_HANDSHAKE_RESP)

#define ST_SASL_AUTHENTICATE_REQ(X, S)                                                  \
    X(S, BYTES, auth_bytes, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_sasl_authenticate_req, ST_SASL_AUTHENTICATE_REQ)

#define ST_SASL_AUTHENTICATE_RESP(X, S)                                                 \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, BYTES, auth_bytes, V(0), NN, NT, 0, _)                                        \
    X(S, INT64, session_lifetime_ms, V(1), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_sasl_authenticate_resp, ST_SASL_AUTHENTICATE_RESP)

/* ---- DescribeUserScramCredentials (50), AlterUserScramCredentials (51),
 * KIP-554: mechanism 1 SCRAM-SHA-256, 2 SCRAM-SHA-512; the client salts
 * the password itself and sends the salted password. */
#define ST_SCRAM_USER_NAME(X, S)                                                        \
    X(S, STRING, name, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_scram_user_name, ST_SCRAM_USER_NAME)

#define ST_DESCRIBE_SCRAM_REQ(X, S)                                                     \
    X(S, ARRAY, users, V(0), NUL(0), NT, 0, st_scram_user_name)
ST_SCHEMA_DECLARE(st_describe_scram_req, ST_DESCRIBE_SCRAM_REQ)

#define ST_SCRAM_CREDENTIAL_INFO(X, S)                                                  \
    X(S, INT8, mechanism, V(0), NN, NT, 0, _)                                          \
    X(S, INT32, iterations, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_scram_credential_info, ST_SCRAM_CREDENTIAL_INFO)

#define ST_DESCRIBE_SCRAM_RESULT(X, S)                                                  \
    X(S, STRING, user, V(0), NN, NT, 0, _)                                             \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, ARRAY, credential_infos, V(0), NN, NT, 0, st_scram_credential_info)
ST_SCHEMA_DECLARE(st_describe_scram_result, ST_DESCRIBE_SCRAM_RESULT)

#define ST_DESCRIBE_SCRAM_RESP(X, S)                                                    \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, ARRAY, results, V(0), NN, NT, 0, st_describe_scram_result)
ST_SCHEMA_DECLARE(st_describe_scram_resp, ST_DESCRIBE_SCRAM_RESP)

#define ST_SCRAM_DELETION(X, S)                                                         \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT8, mechanism, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_scram_deletion, ST_SCRAM_DELETION)

#define ST_SCRAM_UPSERTION(X, S)                                                        \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT8, mechanism, V(0), NN, NT, 0, _)                                          \
    X(S, INT32, iterations, V(0), NN, NT, 0, _)                                        \
    X(S, BYTES, salt, V(0), NN, NT, 0, _)                                              \
    X(S, BYTES, salted_password, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_scram_upsertion, ST_SCRAM_UPSERTION)

#define ST_ALTER_SCRAM_REQ(X, S)                                                        \
    X(S, ARRAY, deletions, V(0), NN, NT, 0, st_scram_deletion)                         \
    X(S, ARRAY, upsertions, V(0), NN, NT, 0, st_scram_upsertion)
ST_SCHEMA_DECLARE(st_alter_scram_req, ST_ALTER_SCRAM_REQ)

#define ST_ALTER_SCRAM_RESULT(X, S)                                                     \
    X(S, STRING, user, V(0), NN, NT, 0, _)                                             \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_alter_scram_result, ST_ALTER_SCRAM_RESULT)

#define ST_ALTER_SCRAM_RESP(X, S)                                                       \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, results, V(0), NN, NT, 0, st_alter_scram_result)
ST_SCHEMA_DECLARE(st_alter_scram_resp, ST_ALTER_SCRAM_RESP)

/* ---- DescribeAcls (29), CreateAcls (30), DeleteAcls (31) --------------- *
 * Pattern types from v1 (LITERAL, 3, before). */
#define ST_DESCRIBE_ACLS_REQ(X, S)                                                      \
    X(S, INT8, resource_type_filter, V(0), NN, NT, 0, _)                               \
    X(S, STRING, resource_name_filter, V(0), NUL(0), NT, 0, _)                         \
    X(S, INT8, pattern_type_filter, V(1), NN, NT, 3, _)                                \
    X(S, STRING, principal_filter, V(0), NUL(0), NT, 0, _)                             \
    X(S, STRING, host_filter, V(0), NUL(0), NT, 0, _)                                  \
    X(S, INT8, operation, V(0), NN, NT, 0, _)                                          \
    X(S, INT8, permission_type, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_acls_req, ST_DESCRIBE_ACLS_REQ)

#define ST_ACL_DESCRIPTION(X, S)                                                        \
    X(S, STRING, principal, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, INT8, operation, V(0), NN, NT, 0, _)                                          \
    X(S, INT8, permission_type, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_acl_description, ST_ACL_DESCRIPTION)

#define ST_DESCRIBE_ACLS_RESOURCE(X, S)                                                 \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)                                    \
    X(S, INT8, pattern_type, V(1), NN, NT, 3, _)                                       \
    X(S, ARRAY, acls, V(0), NN, NT, 0, st_acl_description)
ST_SCHEMA_DECLARE(st_describe_acls_resource, ST_DESCRIBE_ACLS_RESOURCE)

#define ST_DESCRIBE_ACLS_RESP(X, S)                                                     \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, ARRAY, resources, V(0), NN, NT, 0, st_describe_acls_resource)
ST_SCHEMA_DECLARE(st_describe_acls_resp, ST_DESCRIBE_ACLS_RESP)

#define ST_ACL_CREATION(X, S)                                                           \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)                                    \
    X(S, INT8, resource_pattern_type, V(1), NN, NT, 3, _)                              \
    X(S, STRING, principal, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, INT8, operation, V(0), NN, NT, 0, _)                                          \
    X(S, INT8, permission_type, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_acl_creation, ST_ACL_CREATION)

#define ST_CREATE_ACLS_REQ(X, S)                                                        \
    X(S, ARRAY, creations, V(0), NN, NT, 0, st_acl_creation)
ST_SCHEMA_DECLARE(st_create_acls_req, ST_CREATE_ACLS_REQ)

#define ST_ACL_CREATION_RESULT(X, S)                                                    \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_acl_creation_result, ST_ACL_CREATION_RESULT)

#define ST_CREATE_ACLS_RESP(X, S)                                                       \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, results, V(0), NN, NT, 0, st_acl_creation_result)
ST_SCHEMA_DECLARE(st_create_acls_resp, ST_CREATE_ACLS_RESP)

#define ST_DELETE_ACLS_FILTER(X, S)                                                     \
    X(S, INT8, resource_type_filter, V(0), NN, NT, 0, _)                               \
    X(S, STRING, resource_name_filter, V(0), NUL(0), NT, 0, _)                         \
    X(S, INT8, pattern_type_filter, V(1), NN, NT, 3, _)                                \
    X(S, STRING, principal_filter, V(0), NUL(0), NT, 0, _)                             \
    X(S, STRING, host_filter, V(0), NUL(0), NT, 0, _)                                  \
    X(S, INT8, operation, V(0), NN, NT, 0, _)                                          \
    X(S, INT8, permission_type, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_delete_acls_filter, ST_DELETE_ACLS_FILTER)

#define ST_DELETE_ACLS_REQ(X, S)                                                        \
    X(S, ARRAY, filters, V(0), NN, NT, 0, st_delete_acls_filter)
ST_SCHEMA_DECLARE(st_delete_acls_req, ST_DELETE_ACLS_REQ)

#define ST_DELETE_ACLS_MATCHING(X, S)                                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, INT8, resource_type, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, resource_name, V(0), NN, NT, 0, _)                                    \
    X(S, INT8, pattern_type, V(1), NN, NT, 3, _)                                       \
    X(S, STRING, principal, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, INT8, operation, V(0), NN, NT, 0, _)                                          \
    X(S, INT8, permission_type, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_delete_acls_matching, ST_DELETE_ACLS_MATCHING)

#define ST_DELETE_ACLS_FILTER_RESULT(X, S)                                              \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, ARRAY, matching_acls, V(0), NN, NT, 0, st_delete_acls_matching)
ST_SCHEMA_DECLARE(st_delete_acls_filter_result, ST_DELETE_ACLS_FILTER_RESULT)

#define ST_DELETE_ACLS_RESP(X, S)                                                       \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, filter_results, V(0), NN, NT, 0, st_delete_acls_filter_result)
ST_SCHEMA_DECLARE(st_delete_acls_resp, ST_DELETE_ACLS_RESP)

#define ST_DESCRIBE_CLUSTER_REQ(X, S)                                                   \
    X(S, BOOL, include_cluster_authorized_operations, V(0), NN, NT, 0, _)              \
    X(S, INT8, endpoint_type, V(1), NN, NT, 1, _)                                      \
    X(S, BOOL, include_fenced_brokers, V(2), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_cluster_req, ST_DESCRIBE_CLUSTER_REQ)

#define ST_DESCRIBE_CLUSTER_BROKER(X, S)                                                \
    X(S, INT32, broker_id, V(0), NN, NT, 0, _)                                         \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, INT32, port, V(0), NN, NT, 0, _)                                              \
    X(S, STRING, rack, V(0), NUL(0), NT, ST_DEF_NULL, _)                               \
    X(S, BOOL, is_fenced, V(2), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_cluster_broker, ST_DESCRIBE_CLUSTER_BROKER)

#define ST_DESCRIBE_CLUSTER_RESP(X, S)                                                  \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, INT8, endpoint_type, V(1), NN, NT, 1, _)                                      \
    X(S, STRING, cluster_id, V(0), NN, NT, 0, _)                                       \
    X(S, INT32, controller_id, V(0), NN, NT, -1, _)                                    \
    X(S, ARRAY, brokers, V(0), NN, NT, 0, st_describe_cluster_broker)                  \
    X(S, INT32, cluster_authorized_operations, V(0), NN, NT, INT32_MIN, _)
ST_SCHEMA_DECLARE(st_describe_cluster_resp, ST_DESCRIBE_CLUSTER_RESP)

/* ---- DescribeTopicPartitions (75, KIP-966): topics and partitions with
 * their eligible leader replicas, a page of partitions at a time.  A null
 * cursor is encoded and decoded as the struct's defaults. ------------- */
#define ST_DTP_CURSOR(X, S)                                                             \
    X(S, STRING, topic_name, V(0), NN, NT, 0, _)                                       \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_dtp_cursor, ST_DTP_CURSOR)

#define ST_DTP_REQ_TOPIC(X, S) X(S, STRING, name, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_dtp_req_topic, ST_DTP_REQ_TOPIC)

#define ST_DTP_REQ(X, S)                                                                \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_dtp_req_topic)                             \
    X(S, INT32, response_partition_limit, V(0), NN, NT, 2000, _)                       \
    X(S, STRUCT, cursor, V(0), NUL(0), NT, 0, st_dtp_cursor)
ST_SCHEMA_DECLARE(st_dtp_req, ST_DTP_REQ)

#define ST_DTP_PARTITION(X, S)                                                          \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT32, leader_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(0), NN, NT, -1, _)                                     \
    X(S, ARRAY_INT32, replica_nodes, V(0), NN, NT, 0, _)                               \
    X(S, ARRAY_INT32, isr_nodes, V(0), NN, NT, 0, _)                                   \
    X(S, ARRAY_INT32, eligible_leader_replicas, V(0), NUL(0), NT, ST_DEF_NULL, _)      \
    X(S, ARRAY_INT32, last_known_elr, V(0), NUL(0), NT, ST_DEF_NULL, _)                \
    X(S, ARRAY_INT32, offline_replicas, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_dtp_partition, ST_DTP_PARTITION)

#define ST_DTP_TOPIC(X, S)                                                              \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, name, V(0), NUL(0), NT, 0, _)                                         \
    X(S, UUID, topic_id, V(0), NN, NT, 0, _)                                           \
    X(S, BOOL, is_internal, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_dtp_partition)                         \
    X(S, INT32, topic_authorized_operations, V(0), NN, NT, INT32_MIN, _)
ST_SCHEMA_DECLARE(st_dtp_topic, ST_DTP_TOPIC)

#define ST_DTP_RESP(X, S)                                                               \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_dtp_topic)                                 \
    X(S, STRUCT, next_cursor, V(0), NUL(0), NT, 0, st_dtp_cursor)
ST_SCHEMA_DECLARE(st_dtp_resp, ST_DTP_RESP)

/* ---- DescribeLogDirs (35) --------------------------------------------- */
#define ST_DESCRIBE_LOG_DIRS_REQ_TOPIC(X, S)                                            \
    X(S, STRING, topic, V(0), NN, NT, 0, _)                                            \
    X(S, ARRAY_INT32, partitions, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_log_dirs_req_topic, ST_DESCRIBE_LOG_DIRS_REQ_TOPIC)

#define ST_DESCRIBE_LOG_DIRS_REQ(X, S)                                                  \
    X(S, ARRAY, topics, V(0), NUL(0), NT, 0, st_describe_log_dirs_req_topic)
ST_SCHEMA_DECLARE(st_describe_log_dirs_req, ST_DESCRIBE_LOG_DIRS_REQ)

#define ST_DESCRIBE_LOG_DIRS_PART(X, S)                                                 \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT64, partition_size, V(0), NN, NT, 0, _)                                    \
    X(S, INT64, offset_lag, V(0), NN, NT, 0, _)                                        \
    X(S, BOOL, is_future_key, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_log_dirs_part, ST_DESCRIBE_LOG_DIRS_PART)

#define ST_DESCRIBE_LOG_DIRS_TOPIC(X, S)                                                \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_describe_log_dirs_part)
ST_SCHEMA_DECLARE(st_describe_log_dirs_topic, ST_DESCRIBE_LOG_DIRS_TOPIC)

#define ST_DESCRIBE_LOG_DIRS_RESULT(X, S)                                               \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, log_dir, V(0), NN, NT, 0, _)                                          \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_describe_log_dirs_topic)                   \
    X(S, INT64, total_bytes, V(4), NN, NT, -1, _)                                      \
    X(S, INT64, usable_bytes, V(4), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_describe_log_dirs_result, ST_DESCRIBE_LOG_DIRS_RESULT)

#define ST_DESCRIBE_LOG_DIRS_RESP(X, S)                                                 \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(3), NN, NT, 0, _)                                        \
    X(S, ARRAY, results, V(0), NN, NT, 0, st_describe_log_dirs_result)
ST_SCHEMA_DECLARE(st_describe_log_dirs_resp, ST_DESCRIBE_LOG_DIRS_RESP)

/* ---- Consumer groups: FindCoordinator (10), JoinGroup (11), Heartbeat
 * (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups
 * (16), OffsetCommit (8), OffsetFetch (9), DeleteGroups (42), OffsetDelete
 * (47) ------------------------------------------------------------------ */
#define ST_FIND_COORDINATOR_REQ(X, S)                                                   \
    X(S, STRING, key, VR(0, 3), NN, NT, 0, _)                                          \
    X(S, INT8, key_type, V(1), NN, NT, 0, _)                                           \
    X(S, ARRAY_STRING, coordinator_keys, V(4), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_find_coordinator_req, ST_FIND_COORDINATOR_REQ)

#define ST_COORDINATOR(X, S)                                                            \
    X(S, STRING, key, V(4), NN, NT, 0, _)                                              \
    X(S, INT32, node_id, V(4), NN, NT, 0, _)                                           \
    X(S, STRING, host, V(4), NN, NT, 0, _)                                             \
    X(S, INT32, port, V(4), NN, NT, 0, _)                                              \
    X(S, INT16, error_code, V(4), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(4), NUL(4), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_coordinator, ST_COORDINATOR)

#define ST_FIND_COORDINATOR_RESP(X, S)                                                  \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, VR(0, 3), NN, NT, 0, _)                                    \
    X(S, STRING, error_message, VR(1, 3), NULR(1, 3), NT, ST_DEF_NULL, _)              \
    X(S, INT32, node_id, VR(0, 3), NN, NT, 0, _)                                       \
    X(S, STRING, host, VR(0, 3), NN, NT, 0, _)                                         \
    X(S, INT32, port, VR(0, 3), NN, NT, 0, _)                                          \
    X(S, ARRAY, coordinators, V(4), NN, NT, 0, st_coordinator)
ST_SCHEMA_DECLARE(st_find_coordinator_resp, ST_FIND_COORDINATOR_RESP)

#define ST_JOIN_GROUP_PROTOCOL(X, S)                                                    \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, BYTES, metadata, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_join_group_protocol, ST_JOIN_GROUP_PROTOCOL)

#define ST_JOIN_GROUP_REQ(X, S)                                                         \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, session_timeout_ms, V(0), NN, NT, 0, _)                                \
    X(S, INT32, rebalance_timeout_ms, V(1), NN, NT, -1, _)                             \
    X(S, STRING, member_id, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(5), NUL(5), NT, ST_DEF_NULL, _)                  \
    X(S, STRING, protocol_type, V(0), NN, NT, 0, _)                                    \
    X(S, ARRAY, protocols, V(0), NN, NT, 0, st_join_group_protocol)                    \
    X(S, STRING, reason, V(8), NUL(8), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_join_group_req, ST_JOIN_GROUP_REQ)

#define ST_JOIN_GROUP_MEMBER(X, S)                                                      \
    X(S, STRING, member_id, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(5), NUL(5), NT, ST_DEF_NULL, _)                  \
    X(S, BYTES, metadata, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_join_group_member, ST_JOIN_GROUP_MEMBER)

#define ST_JOIN_GROUP_RESP(X, S)                                                        \
    X(S, INT32, throttle_time_ms, V(2), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT32, generation_id, V(0), NN, NT, -1, _)                                    \
    X(S, STRING, protocol_type, V(7), NUL(7), NT, ST_DEF_NULL, _)                      \
    X(S, STRING, protocol_name, V(0), NUL(7), NT, 0, _)                                \
    X(S, STRING, leader, V(0), NN, NT, 0, _)                                           \
    X(S, BOOL, skip_assignment, V(9), NN, NT, 0, _)                                    \
    X(S, STRING, member_id, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, members, V(0), NN, NT, 0, st_join_group_member)
ST_SCHEMA_DECLARE(st_join_group_resp, ST_JOIN_GROUP_RESP)

#define ST_SYNC_GROUP_ASSIGNMENT(X, S)                                                  \
    X(S, STRING, member_id, V(0), NN, NT, 0, _)                                        \
    X(S, BYTES, assignment, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_sync_group_assignment, ST_SYNC_GROUP_ASSIGNMENT)

#define ST_SYNC_GROUP_REQ(X, S)                                                         \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, generation_id, V(0), NN, NT, 0, _)                                     \
    X(S, STRING, member_id, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(3), NUL(3), NT, ST_DEF_NULL, _)                  \
    X(S, STRING, protocol_type, V(5), NUL(5), NT, ST_DEF_NULL, _)                      \
    X(S, STRING, protocol_name, V(5), NUL(5), NT, ST_DEF_NULL, _)                      \
    X(S, ARRAY, assignments, V(0), NN, NT, 0, st_sync_group_assignment)
ST_SCHEMA_DECLARE(st_sync_group_req, ST_SYNC_GROUP_REQ)

#define ST_SYNC_GROUP_RESP(X, S)                                                        \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, protocol_type, V(5), NUL(5), NT, ST_DEF_NULL, _)                      \
    X(S, STRING, protocol_name, V(5), NUL(5), NT, ST_DEF_NULL, _)                      \
    X(S, BYTES, assignment, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_sync_group_resp, ST_SYNC_GROUP_RESP)

#define ST_HEARTBEAT_REQ(X, S)                                                          \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, generation_id, V(0), NN, NT, 0, _)                                     \
    X(S, STRING, member_id, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(3), NUL(3), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_heartbeat_req, ST_HEARTBEAT_REQ)

#define ST_HEARTBEAT_RESP(X, S)                                                         \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_heartbeat_resp, ST_HEARTBEAT_RESP)

#define ST_LEAVE_GROUP_MEMBER(X, S)                                                     \
    X(S, STRING, member_id, V(3), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(3), NUL(3), NT, ST_DEF_NULL, _)                  \
    X(S, STRING, reason, V(5), NUL(5), NT, ST_DEF_NULL, _)
ST_SCHEMA_DECLARE(st_leave_group_member, ST_LEAVE_GROUP_MEMBER)

#define ST_LEAVE_GROUP_REQ(X, S)                                                        \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, STRING, member_id, VR(0, 2), NN, NT, 0, _)                                    \
    X(S, ARRAY, members, V(3), NN, NT, 0, st_leave_group_member)
ST_SCHEMA_DECLARE(st_leave_group_req, ST_LEAVE_GROUP_REQ)

#define ST_LEAVE_GROUP_MEMBER_RESP(X, S)                                                \
    X(S, STRING, member_id, V(3), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(3), NUL(3), NT, ST_DEF_NULL, _)                  \
    X(S, INT16, error_code, V(3), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_leave_group_member_resp, ST_LEAVE_GROUP_MEMBER_RESP)

#define ST_LEAVE_GROUP_RESP(X, S)                                                       \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, members, V(3), NN, NT, 0, st_leave_group_member_resp)
ST_SCHEMA_DECLARE(st_leave_group_resp, ST_LEAVE_GROUP_RESP)

#define ST_OFFSET_COMMIT_REQ_PART(X, S)                                                 \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT64, committed_offset, V(0), NN, NT, 0, _)                                  \
    X(S, INT32, committed_leader_epoch, V(6), NN, NT, -1, _)                           \
    X(S, INT64, commit_timestamp, VR(1, 1), NN, NT, -1, _)                             \
    X(S, STRING, committed_metadata, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_offset_commit_req_part, ST_OFFSET_COMMIT_REQ_PART)

#define ST_OFFSET_COMMIT_REQ_TOPIC(X, S)                                                \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_offset_commit_req_part)
ST_SCHEMA_DECLARE(st_offset_commit_req_topic, ST_OFFSET_COMMIT_REQ_TOPIC)

#define ST_OFFSET_COMMIT_REQ(X, S)                                                      \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, generation_id, V(1), NN, NT, -1, _)                                    \
    X(S, STRING, member_id, V(1), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(7), NUL(7), NT, ST_DEF_NULL, _)                  \
    X(S, INT64, retention_time_ms, VR(2, 4), NN, NT, -1, _)                            \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_offset_commit_req_topic)
ST_SCHEMA_DECLARE(st_offset_commit_req, ST_OFFSET_COMMIT_REQ)

#define ST_OFFSET_COMMIT_RESP_PART(X, S)                                                \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_offset_commit_resp_part, ST_OFFSET_COMMIT_RESP_PART)

#define ST_OFFSET_COMMIT_RESP_TOPIC(X, S)                                               \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_offset_commit_resp_part)
ST_SCHEMA_DECLARE(st_offset_commit_resp_topic, ST_OFFSET_COMMIT_RESP_TOPIC)

#define ST_OFFSET_COMMIT_RESP(X, S)                                                     \
    X(S, INT32, throttle_time_ms, V(3), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_offset_commit_resp_topic)
ST_SCHEMA_DECLARE(st_offset_commit_resp, ST_OFFSET_COMMIT_RESP)

/* TxnOffsetCommit (28): offsets committed inside a transaction (KIP-98),
 * sent to the group coordinator; v2 adds the leader epoch, v3 (flexible)
 * the member id, generation and group instance id (KIP-447). */
#define ST_TXN_OFFSET_COMMIT_REQ_PART(X, S)                                             \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT64, committed_offset, V(0), NN, NT, 0, _)                                  \
    X(S, INT32, committed_leader_epoch, V(2), NN, NT, -1, _)                           \
    X(S, STRING, committed_metadata, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_txn_offset_commit_req_part, ST_TXN_OFFSET_COMMIT_REQ_PART)

#define ST_TXN_OFFSET_COMMIT_REQ_TOPIC(X, S)                                            \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_txn_offset_commit_req_part)
ST_SCHEMA_DECLARE(st_txn_offset_commit_req_topic, ST_TXN_OFFSET_COMMIT_REQ_TOPIC)

#define ST_TXN_OFFSET_COMMIT_REQ(X, S)                                                  \
    X(S, STRING, transactional_id, V(0), NN, NT, 0, _)                                 \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT64, producer_id, V(0), NN, NT, 0, _)                                       \
    X(S, INT16, producer_epoch, V(0), NN, NT, 0, _)                                    \
    X(S, INT32, generation_id, V(3), NN, NT, -1, _)                                    \
    X(S, STRING, member_id, V(3), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(3), NUL(3), NT, ST_DEF_NULL, _)                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_txn_offset_commit_req_topic)
ST_SCHEMA_DECLARE(st_txn_offset_commit_req, ST_TXN_OFFSET_COMMIT_REQ)

#define ST_TXN_OFFSET_COMMIT_RESP_PART(X, S)                                            \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_txn_offset_commit_resp_part, ST_TXN_OFFSET_COMMIT_RESP_PART)

#define ST_TXN_OFFSET_COMMIT_RESP_TOPIC(X, S)                                           \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_txn_offset_commit_resp_part)
ST_SCHEMA_DECLARE(st_txn_offset_commit_resp_topic, ST_TXN_OFFSET_COMMIT_RESP_TOPIC)

#define ST_TXN_OFFSET_COMMIT_RESP(X, S)                                                 \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_txn_offset_commit_resp_topic)
ST_SCHEMA_DECLARE(st_txn_offset_commit_resp, ST_TXN_OFFSET_COMMIT_RESP)

/* OffsetFetch: versions 0-7 ask for one group at the top level, 8+ for
 * several in groups[]; the topic and partition shapes are the same. */
#define ST_OFFSET_FETCH_REQ_TOPIC(X, S)                                                 \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY_INT32, partition_indexes, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_offset_fetch_req_topic, ST_OFFSET_FETCH_REQ_TOPIC)

#define ST_OFFSET_FETCH_REQ_GROUP(X, S)                                                 \
    X(S, STRING, group_id, V(8), NN, NT, 0, _)                                         \
    X(S, ARRAY, topics, V(8), NUL(8), NT, 0, st_offset_fetch_req_topic)
ST_SCHEMA_DECLARE(st_offset_fetch_req_group, ST_OFFSET_FETCH_REQ_GROUP)

#define ST_OFFSET_FETCH_REQ(X, S)                                                       \
    X(S, STRING, group_id, VR(0, 7), NN, NT, 0, _)                                     \
    X(S, ARRAY, topics, VR(0, 7), NULR(2, 7), NT, 0, st_offset_fetch_req_topic)        \
    X(S, ARRAY, groups, V(8), NN, NT, 0, st_offset_fetch_req_group)                    \
    X(S, BOOL, require_stable, V(7), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_offset_fetch_req, ST_OFFSET_FETCH_REQ)

#define ST_OFFSET_FETCH_RESP_PART(X, S)                                                 \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT64, committed_offset, V(0), NN, NT, 0, _)                                  \
    X(S, INT32, committed_leader_epoch, V(5), NN, NT, -1, _)                           \
    X(S, STRING, metadata, V(0), NUL(0), NT, 0, _)                                     \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_offset_fetch_resp_part, ST_OFFSET_FETCH_RESP_PART)

#define ST_OFFSET_FETCH_RESP_TOPIC(X, S)                                                \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_offset_fetch_resp_part)
ST_SCHEMA_DECLARE(st_offset_fetch_resp_topic, ST_OFFSET_FETCH_RESP_TOPIC)

#define ST_OFFSET_FETCH_RESP_GROUP(X, S)                                                \
    X(S, STRING, group_id, V(8), NN, NT, 0, _)                                         \
    X(S, ARRAY, topics, V(8), NN, NT, 0, st_offset_fetch_resp_topic)                   \
    X(S, INT16, error_code, V(8), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_offset_fetch_resp_group, ST_OFFSET_FETCH_RESP_GROUP)

#define ST_OFFSET_FETCH_RESP(X, S)                                                      \
    X(S, INT32, throttle_time_ms, V(3), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, VR(0, 7), NN, NT, 0, st_offset_fetch_resp_topic)               \
    X(S, INT16, error_code, VR(2, 7), NN, NT, 0, _)                                    \
    X(S, ARRAY, groups, V(8), NN, NT, 0, st_offset_fetch_resp_group)
ST_SCHEMA_DECLARE(st_offset_fetch_resp, ST_OFFSET_FETCH_RESP)

#define ST_DESCRIBE_GROUPS_REQ(X, S)                                                    \
    X(S, ARRAY_STRING, groups, V(0), NN, NT, 0, _)                                     \
    X(S, BOOL, include_authorized_operations, V(3), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_groups_req, ST_DESCRIBE_GROUPS_REQ)

#define ST_DESCRIBED_GROUP_MEMBER(X, S)                                                 \
    X(S, STRING, member_id, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, group_instance_id, V(4), NUL(4), NT, ST_DEF_NULL, _)                  \
    X(S, STRING, client_id, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, client_host, V(0), NN, NT, 0, _)                                      \
    X(S, BYTES, member_metadata, V(0), NN, NT, 0, _)                                   \
    X(S, BYTES, member_assignment, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_described_group_member, ST_DESCRIBED_GROUP_MEMBER)

#define ST_DESCRIBED_GROUP(X, S)                                                        \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, STRING, group_state, V(0), NN, NT, 0, _)                                      \
    X(S, STRING, protocol_type, V(0), NN, NT, 0, _)                                    \
    X(S, STRING, protocol_data, V(0), NN, NT, 0, _)                                    \
    X(S, ARRAY, members, V(0), NN, NT, 0, st_described_group_member)                   \
    X(S, INT32, authorized_operations, V(3), NN, NT, INT32_MIN, _)
ST_SCHEMA_DECLARE(st_described_group, ST_DESCRIBED_GROUP)

#define ST_DESCRIBE_GROUPS_RESP(X, S)                                                   \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, ARRAY, groups, V(0), NN, NT, 0, st_described_group)
ST_SCHEMA_DECLARE(st_describe_groups_resp, ST_DESCRIBE_GROUPS_RESP)

/* v5 (KIP-848): types_filter in the request, group_type in the answer. */
#define ST_LIST_GROUPS_REQ(X, S)                                                        \
    X(S, ARRAY_STRING, states_filter, V(4), NN, NT, 0, _)                              \
    X(S, ARRAY_STRING, types_filter, V(5), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_list_groups_req, ST_LIST_GROUPS_REQ)

#define ST_LISTED_GROUP(X, S)                                                           \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, STRING, protocol_type, V(0), NN, NT, 0, _)                                    \
    X(S, STRING, group_state, V(4), NN, NT, 0, _)                                      \
    X(S, STRING, group_type, V(5), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_listed_group, ST_LISTED_GROUP)

#define ST_LIST_GROUPS_RESP(X, S)                                                       \
    X(S, INT32, throttle_time_ms, V(1), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, groups, V(0), NN, NT, 0, st_listed_group)
ST_SCHEMA_DECLARE(st_list_groups_resp, ST_LIST_GROUPS_RESP)

#define ST_DELETE_GROUPS_REQ(X, S)                                                      \
    X(S, ARRAY_STRING, groups_names, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_delete_groups_req, ST_DELETE_GROUPS_REQ)

#define ST_DELETE_GROUPS_RESULT(X, S)                                                   \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_delete_groups_result, ST_DELETE_GROUPS_RESULT)

#define ST_DELETE_GROUPS_RESP(X, S)                                                     \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, results, V(0), NN, NT, 0, st_delete_groups_result)
ST_SCHEMA_DECLARE(st_delete_groups_resp, ST_DELETE_GROUPS_RESP)

#define ST_OFFSET_DELETE_REQ_PART(X, S)                                                 \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_offset_delete_req_part, ST_OFFSET_DELETE_REQ_PART)

#define ST_OFFSET_DELETE_REQ_TOPIC(X, S)                                                \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_offset_delete_req_part)
ST_SCHEMA_DECLARE(st_offset_delete_req_topic, ST_OFFSET_DELETE_REQ_TOPIC)

#define ST_OFFSET_DELETE_REQ(X, S)                                                      \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)                                         \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_offset_delete_req_topic)
ST_SCHEMA_DECLARE(st_offset_delete_req, ST_OFFSET_DELETE_REQ)

#define ST_OFFSET_DELETE_RESP_PART(X, S)                                                \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_offset_delete_resp_part, ST_OFFSET_DELETE_RESP_PART)

#define ST_OFFSET_DELETE_RESP_TOPIC(X, S)                                               \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_offset_delete_resp_part)
ST_SCHEMA_DECLARE(st_offset_delete_resp_topic, ST_OFFSET_DELETE_RESP_TOPIC)

#define ST_OFFSET_DELETE_RESP(X, S)                                                     \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_offset_delete_resp_topic)
ST_SCHEMA_DECLARE(st_offset_delete_resp, ST_OFFSET_DELETE_RESP)

/* ---- OffsetForLeaderEpoch (23) ---------------------------------------- */
#define ST_OFFSET_FOR_LEADER_EPOCH_REQ_PART(X, S)                                       \
    X(S, INT32, partition, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, current_leader_epoch, V(2), NN, NT, -1, _)                             \
    X(S, INT32, leader_epoch, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_offset_for_leader_epoch_req_part, ST_OFFSET_FOR_LEADER_EPOCH_REQ_PART)

#define ST_OFFSET_FOR_LEADER_EPOCH_REQ_TOPIC(X, S)                                      \
    X(S, STRING, topic, V(0), NN, NT, 0, _)                                            \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_offset_for_leader_epoch_req_part)
ST_SCHEMA_DECLARE(st_offset_for_leader_epoch_req_topic, ST_OFFSET_FOR_LEADER_EPOCH_REQ_TOPIC)

/* replica_id: -2 is the "debug" consumer (sees past the high watermark),
 * -1 an ordinary consumer, a broker id a follower. */
#define ST_OFFSET_FOR_LEADER_EPOCH_REQ(X, S)                                            \
    X(S, INT32, replica_id, V(3), NN, NT, -2, _)                                       \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_offset_for_leader_epoch_req_topic)
ST_SCHEMA_DECLARE(st_offset_for_leader_epoch_req, ST_OFFSET_FOR_LEADER_EPOCH_REQ)

#define ST_OFFSET_FOR_LEADER_EPOCH_RESP_PART(X, S)                                      \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT32, partition, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(1), NN, NT, -1, _)                                     \
    X(S, INT64, end_offset, V(0), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_offset_for_leader_epoch_resp_part, ST_OFFSET_FOR_LEADER_EPOCH_RESP_PART)

#define ST_OFFSET_FOR_LEADER_EPOCH_RESP_TOPIC(X, S)                                     \
    X(S, STRING, topic, V(0), NN, NT, 0, _)                                            \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_offset_for_leader_epoch_resp_part)
ST_SCHEMA_DECLARE(st_offset_for_leader_epoch_resp_topic, ST_OFFSET_FOR_LEADER_EPOCH_RESP_TOPIC)

#define ST_OFFSET_FOR_LEADER_EPOCH_RESP(X, S)                                           \
    X(S, INT32, throttle_time_ms, V(2), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_offset_for_leader_epoch_resp_topic)
ST_SCHEMA_DECLARE(st_offset_for_leader_epoch_resp, ST_OFFSET_FOR_LEADER_EPOCH_RESP)

/* ---- ElectLeaders (43) ------------------------------------------------ */
#define ST_ELECT_LEADERS_REQ_TOPIC(X, S)                                                \
    X(S, STRING, topic, V(0), NN, NT, 0, _)                                            \
    X(S, ARRAY_INT32, partitions, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_elect_leaders_req_topic, ST_ELECT_LEADERS_REQ_TOPIC)

/* election_type (v1+, KIP-460): 0 preferred, 1 unclean.  A null
 * topic_partitions asks for every partition. */
#define ST_ELECT_LEADERS_REQ(X, S)                                                      \
    X(S, INT8, election_type, V(1), NN, NT, 0, _)                                      \
    X(S, ARRAY, topic_partitions, V(0), NUL(0), NT, 0, st_elect_leaders_req_topic)     \
    X(S, INT32, timeout_ms, V(0), NN, NT, 60000, _)
ST_SCHEMA_DECLARE(st_elect_leaders_req, ST_ELECT_LEADERS_REQ)

#define ST_ELECT_LEADERS_RESP_PART(X, S)                                                \
    X(S, INT32, partition_id, V(0), NN, NT, 0, _)                                      \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, 0, _)
ST_SCHEMA_DECLARE(st_elect_leaders_resp_part, ST_ELECT_LEADERS_RESP_PART)

#define ST_ELECT_LEADERS_RESP_TOPIC(X, S)                                               \
    X(S, STRING, topic, V(0), NN, NT, 0, _)                                            \
    X(S, ARRAY, partition_result, V(0), NN, NT, 0, st_elect_leaders_resp_part)
ST_SCHEMA_DECLARE(st_elect_leaders_resp_topic, ST_ELECT_LEADERS_RESP_TOPIC)

#define ST_ELECT_LEADERS_RESP(X, S)                                                     \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(1), NN, NT, 0, _)                                        \
    X(S, ARRAY, replica_election_results, V(0), NN, NT, 0, st_elect_leaders_resp_topic)
ST_SCHEMA_DECLARE(st_elect_leaders_resp, ST_ELECT_LEADERS_RESP)

/* ---- KRaft (KIP-595, KIP-853, KIP-996): Vote (52), BeginQuorumEpoch (53),
 * EndQuorumEpoch (54), DescribeQuorum (55), FetchSnapshot (59).  The
 * endpoints in these carry a uint16 port, unlike Produce's and Fetch's
 * st_node_endpoint (int32 port and a rack). */
#define ST_RAFT_NODE_ENDPOINT(X, S)                                                     \
    X(S, INT32, node_id, V(0), NN, NT, 0, _)                                           \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, UINT16, port, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_raft_node_endpoint, ST_RAFT_NODE_ENDPOINT)

#define ST_RAFT_LISTENER(X, S)                                                          \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, UINT16, port, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_raft_listener, ST_RAFT_LISTENER)

/* Vote v1 adds the voter's key and the candidate's directory id
 * (KIP-853), v2 pre_vote (KIP-996). */
#define ST_VOTE_REQ_PART(X, S)                                                          \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT32, candidate_epoch, V(0), NN, NT, 0, _)                                   \
    X(S, INT32, candidate_id, V(0), NN, NT, 0, _)                                      \
    X(S, UUID, candidate_directory_id, V(1), NN, NT, 0, _)                             \
    X(S, UUID, voter_directory_id, V(1), NN, NT, 0, _)                                 \
    X(S, INT32, last_offset_epoch, V(0), NN, NT, 0, _)                                 \
    X(S, INT64, last_offset, V(0), NN, NT, 0, _)                                       \
    X(S, BOOL, pre_vote, V(2), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_vote_req_part, ST_VOTE_REQ_PART)

#define ST_VOTE_REQ_TOPIC(X, S)                                                         \
    X(S, STRING, topic_name, V(0), NN, NT, 0, _)                                       \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_vote_req_part)
ST_SCHEMA_DECLARE(st_vote_req_topic, ST_VOTE_REQ_TOPIC)

#define ST_VOTE_REQ(X, S)                                                               \
    X(S, STRING, cluster_id, V(0), NUL(0), NT, ST_DEF_NULL, _)                         \
    X(S, INT32, voter_id, V(1), NN, NT, -1, _)                                         \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_vote_req_topic)
ST_SCHEMA_DECLARE(st_vote_req, ST_VOTE_REQ)

#define ST_VOTE_RESP_PART(X, S)                                                         \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT32, leader_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(0), NN, NT, 0, _)                                      \
    X(S, BOOL, vote_granted, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_vote_resp_part, ST_VOTE_RESP_PART)

#define ST_VOTE_RESP_TOPIC(X, S)                                                        \
    X(S, STRING, topic_name, V(0), NN, NT, 0, _)                                       \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_vote_resp_part)
ST_SCHEMA_DECLARE(st_vote_resp_topic, ST_VOTE_RESP_TOPIC)

#define ST_VOTE_RESP(X, S)                                                              \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_vote_resp_topic)                           \
    X(S, ARRAY, node_endpoints, V(1), NN, 0, 0, st_raft_node_endpoint)
ST_SCHEMA_DECLARE(st_vote_resp, ST_VOTE_RESP)

/* The partition answer shared by BeginQuorumEpoch and EndQuorumEpoch. */
#define ST_QUORUM_RESP_PART(X, S)                                                       \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT32, leader_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_quorum_resp_part, ST_QUORUM_RESP_PART)

#define ST_QUORUM_RESP_TOPIC(X, S)                                                      \
    X(S, STRING, topic_name, V(0), NN, NT, 0, _)                                       \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_quorum_resp_part)
ST_SCHEMA_DECLARE(st_quorum_resp_topic, ST_QUORUM_RESP_TOPIC)

/* BeginQuorumEpoch and EndQuorumEpoch: v0 is not flexible, v1 is (and
 * adds voter keys and the leader's endpoints, KIP-853). */
#define ST_BEGIN_QUORUM_EPOCH_REQ_PART(X, S)                                            \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, UUID, voter_directory_id, V(1), NN, NT, 0, _)                                 \
    X(S, INT32, leader_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_begin_quorum_epoch_req_part, ST_BEGIN_QUORUM_EPOCH_REQ_PART)

#define ST_BEGIN_QUORUM_EPOCH_REQ_TOPIC(X, S)                                           \
    X(S, STRING, topic_name, V(0), NN, NT, 0, _)                                       \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_begin_quorum_epoch_req_part)
ST_SCHEMA_DECLARE(st_begin_quorum_epoch_req_topic, ST_BEGIN_QUORUM_EPOCH_REQ_TOPIC)

#define ST_BEGIN_QUORUM_EPOCH_REQ(X, S)                                                 \
    X(S, STRING, cluster_id, V(0), NUL(0), NT, ST_DEF_NULL, _)                         \
    X(S, INT32, voter_id, V(1), NN, NT, -1, _)                                         \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_begin_quorum_epoch_req_topic)              \
    X(S, ARRAY, leader_endpoints, V(1), NN, NT, 0, st_raft_listener)
ST_SCHEMA_DECLARE(st_begin_quorum_epoch_req, ST_BEGIN_QUORUM_EPOCH_REQ)

#define ST_BEGIN_QUORUM_EPOCH_RESP(X, S)                                                \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_quorum_resp_topic)                         \
    X(S, ARRAY, node_endpoints, V(1), NN, 0, 0, st_raft_node_endpoint)
ST_SCHEMA_DECLARE(st_begin_quorum_epoch_resp, ST_BEGIN_QUORUM_EPOCH_RESP)

#define ST_END_QUORUM_EPOCH_CANDIDATE(X, S)                                             \
    X(S, INT32, candidate_id, V(0), NN, NT, 0, _)                                      \
    X(S, UUID, candidate_directory_id, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_end_quorum_epoch_candidate, ST_END_QUORUM_EPOCH_CANDIDATE)

/* v1 replaces preferred_successors (ids) with preferred_candidates (id and
 * directory id). */
#define ST_END_QUORUM_EPOCH_REQ_PART(X, S)                                              \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT32, leader_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(0), NN, NT, 0, _)                                      \
    X(S, ARRAY_INT32, preferred_successors, VR(0, 0), NN, NT, 0, _)                    \
    X(S, ARRAY, preferred_candidates, V(1), NN, NT, 0, st_end_quorum_epoch_candidate)
ST_SCHEMA_DECLARE(st_end_quorum_epoch_req_part, ST_END_QUORUM_EPOCH_REQ_PART)

#define ST_END_QUORUM_EPOCH_REQ_TOPIC(X, S)                                             \
    X(S, STRING, topic_name, V(0), NN, NT, 0, _)                                       \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_end_quorum_epoch_req_part)
ST_SCHEMA_DECLARE(st_end_quorum_epoch_req_topic, ST_END_QUORUM_EPOCH_REQ_TOPIC)

#define ST_END_QUORUM_EPOCH_REQ(X, S)                                                   \
    X(S, STRING, cluster_id, V(0), NUL(0), NT, ST_DEF_NULL, _)                         \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_end_quorum_epoch_req_topic)                \
    X(S, ARRAY, leader_endpoints, V(1), NN, NT, 0, st_raft_listener)
ST_SCHEMA_DECLARE(st_end_quorum_epoch_req, ST_END_QUORUM_EPOCH_REQ)

#define ST_END_QUORUM_EPOCH_RESP(X, S)                                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_quorum_resp_topic)                         \
    X(S, ARRAY, node_endpoints, V(1), NN, 0, 0, st_raft_node_endpoint)
ST_SCHEMA_DECLARE(st_end_quorum_epoch_resp, ST_END_QUORUM_EPOCH_RESP)

/* DescribeQuorum: v1 adds the replicas' fetch and caught-up times
 * (KIP-836), v2 error messages, directory ids and the nodes' listeners
 * (KIP-853). */
#define ST_DESCRIBE_QUORUM_REQ_PART(X, S)                                               \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_quorum_req_part, ST_DESCRIBE_QUORUM_REQ_PART)

#define ST_DESCRIBE_QUORUM_REQ_TOPIC(X, S)                                              \
    X(S, STRING, topic_name, V(0), NN, NT, 0, _)                                       \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_describe_quorum_req_part)
ST_SCHEMA_DECLARE(st_describe_quorum_req_topic, ST_DESCRIBE_QUORUM_REQ_TOPIC)

#define ST_DESCRIBE_QUORUM_REQ(X, S)                                                    \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_describe_quorum_req_topic)
ST_SCHEMA_DECLARE(st_describe_quorum_req, ST_DESCRIBE_QUORUM_REQ)

#define ST_QUORUM_REPLICA_STATE(X, S)                                                   \
    X(S, INT32, replica_id, V(0), NN, NT, 0, _)                                        \
    X(S, UUID, replica_directory_id, V(2), NN, NT, 0, _)                               \
    X(S, INT64, log_end_offset, V(0), NN, NT, 0, _)                                    \
    X(S, INT64, last_fetch_timestamp, V(1), NN, NT, -1, _)                             \
    X(S, INT64, last_caught_up_timestamp, V(1), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_quorum_replica_state, ST_QUORUM_REPLICA_STATE)

#define ST_DESCRIBE_QUORUM_RESP_PART(X, S)                                              \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(2), NUL(2), NT, ST_DEF_NULL, _)                      \
    X(S, INT32, leader_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(0), NN, NT, 0, _)                                      \
    X(S, INT64, high_watermark, V(0), NN, NT, 0, _)                                    \
    X(S, ARRAY, current_voters, V(0), NN, NT, 0, st_quorum_replica_state)              \
    X(S, ARRAY, observers, V(0), NN, NT, 0, st_quorum_replica_state)
ST_SCHEMA_DECLARE(st_describe_quorum_resp_part, ST_DESCRIBE_QUORUM_RESP_PART)

#define ST_DESCRIBE_QUORUM_RESP_TOPIC(X, S)                                             \
    X(S, STRING, topic_name, V(0), NN, NT, 0, _)                                       \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_describe_quorum_resp_part)
ST_SCHEMA_DECLARE(st_describe_quorum_resp_topic, ST_DESCRIBE_QUORUM_RESP_TOPIC)

#define ST_DESCRIBE_QUORUM_NODE(X, S)                                                   \
    X(S, INT32, node_id, V(0), NN, NT, 0, _)                                           \
    X(S, ARRAY, listeners, V(0), NN, NT, 0, st_raft_listener)
ST_SCHEMA_DECLARE(st_describe_quorum_node, ST_DESCRIBE_QUORUM_NODE)

#define ST_DESCRIBE_QUORUM_RESP(X, S)                                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(2), NUL(2), NT, ST_DEF_NULL, _)                      \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_describe_quorum_resp_topic)                \
    X(S, ARRAY, nodes, V(2), NN, NT, 0, st_describe_quorum_node)
ST_SCHEMA_DECLARE(st_describe_quorum_resp, ST_DESCRIBE_QUORUM_RESP)

/* FetchSnapshot: v1 adds the replica's directory id and the leaders'
 * endpoints (KIP-853).  Kafka's LeaderIdAndEpoch here states no defaults,
 * so (0, 0) is what an absent tag means, unlike Fetch's (-1, -1). */
#define ST_FETCH_SNAPSHOT_REQ_PART(X, S)                                                \
    X(S, INT32, partition, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, current_leader_epoch, V(0), NN, NT, 0, _)                              \
    X(S, STRUCT, snapshot_id, V(0), NN, NT, 0, st_snapshot_id)                         \
    X(S, INT64, position, V(0), NN, NT, 0, _)                                          \
    X(S, UUID, replica_directory_id, V(1), NN, 0, 0, _)
ST_SCHEMA_DECLARE(st_fetch_snapshot_req_part, ST_FETCH_SNAPSHOT_REQ_PART)

#define ST_FETCH_SNAPSHOT_REQ_TOPIC(X, S)                                               \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_fetch_snapshot_req_part)
ST_SCHEMA_DECLARE(st_fetch_snapshot_req_topic, ST_FETCH_SNAPSHOT_REQ_TOPIC)

#define ST_FETCH_SNAPSHOT_REQ(X, S)                                                     \
    X(S, STRING, cluster_id, V(0), NUL(0), 0, ST_DEF_NULL, _)                          \
    X(S, INT32, replica_id, V(0), NN, NT, -1, _)                                       \
    X(S, INT32, max_bytes, V(0), NN, NT, INT32_MAX, _)                                 \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_fetch_snapshot_req_topic)
ST_SCHEMA_DECLARE(st_fetch_snapshot_req, ST_FETCH_SNAPSHOT_REQ)

#define ST_FETCH_SNAPSHOT_LEADER(X, S)                                                  \
    X(S, INT32, leader_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_fetch_snapshot_leader, ST_FETCH_SNAPSHOT_LEADER)

#define ST_FETCH_SNAPSHOT_RESP_PART(X, S)                                               \
    X(S, INT32, index, V(0), NN, NT, 0, _)                                             \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRUCT, snapshot_id, V(0), NN, NT, 0, st_snapshot_id)                         \
    X(S, STRUCT, current_leader, V(0), NN, 0, 0, st_fetch_snapshot_leader)             \
    X(S, INT64, size, V(0), NN, NT, 0, _)                                              \
    X(S, INT64, position, V(0), NN, NT, 0, _)                                          \
    X(S, RECORDS, unaligned_records, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_fetch_snapshot_resp_part, ST_FETCH_SNAPSHOT_RESP_PART)

#define ST_FETCH_SNAPSHOT_RESP_TOPIC(X, S)                                              \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_fetch_snapshot_resp_part)
ST_SCHEMA_DECLARE(st_fetch_snapshot_resp_topic, ST_FETCH_SNAPSHOT_RESP_TOPIC)

#define ST_FETCH_SNAPSHOT_RESP(X, S)                                                    \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_fetch_snapshot_resp_topic)                 \
    X(S, ARRAY, node_endpoints, V(1), NN, 0, 0, st_raft_node_endpoint)
ST_SCHEMA_DECLARE(st_fetch_snapshot_resp, ST_FETCH_SNAPSHOT_RESP)

/* ---- AlterPartition (56): v1 adds the leader recovery state (KIP-704),
 * v2 topic ids (KIP-841), v3 the ISR with broker epochs (KIP-903). ------ */
#define ST_ALTER_PARTITION_BROKER_STATE(X, S)                                           \
    X(S, INT32, broker_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT64, broker_epoch, V(0), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_alter_partition_broker_state, ST_ALTER_PARTITION_BROKER_STATE)

#define ST_ALTER_PARTITION_REQ_PART(X, S)                                               \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT32, leader_epoch, V(0), NN, NT, 0, _)                                      \
    X(S, ARRAY_INT32, new_isr, VR(0, 2), NN, NT, 0, _)                                 \
    X(S, ARRAY, new_isr_with_epochs, V(3), NN, NT, 0, st_alter_partition_broker_state) \
    X(S, INT8, leader_recovery_state, V(1), NN, NT, 0, _)                              \
    X(S, INT32, partition_epoch, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_alter_partition_req_part, ST_ALTER_PARTITION_REQ_PART)

#define ST_ALTER_PARTITION_REQ_TOPIC(X, S)                                              \
    X(S, STRING, topic_name, VR(0, 1), NN, NT, 0, _)                                   \
    X(S, UUID, topic_id, V(2), NN, NT, 0, _)                                           \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_alter_partition_req_part)
ST_SCHEMA_DECLARE(st_alter_partition_req_topic, ST_ALTER_PARTITION_REQ_TOPIC)

#define ST_ALTER_PARTITION_REQ(X, S)                                                    \
    X(S, INT32, broker_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT64, broker_epoch, V(0), NN, NT, -1, _)                                     \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_alter_partition_req_topic)
ST_SCHEMA_DECLARE(st_alter_partition_req, ST_ALTER_PARTITION_REQ)

#define ST_ALTER_PARTITION_RESP_PART(X, S)                                              \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT32, leader_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT32, leader_epoch, V(0), NN, NT, 0, _)                                      \
    X(S, ARRAY_INT32, isr, V(0), NN, NT, 0, _)                                         \
    X(S, INT8, leader_recovery_state, V(1), NN, NT, 0, _)                              \
    X(S, INT32, partition_epoch, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_alter_partition_resp_part, ST_ALTER_PARTITION_RESP_PART)

#define ST_ALTER_PARTITION_RESP_TOPIC(X, S)                                             \
    X(S, STRING, topic_name, VR(0, 1), NN, NT, 0, _)                                   \
    X(S, UUID, topic_id, V(2), NN, NT, 0, _)                                           \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_alter_partition_resp_part)
ST_SCHEMA_DECLARE(st_alter_partition_resp_topic, ST_ALTER_PARTITION_RESP_TOPIC)

#define ST_ALTER_PARTITION_RESP(X, S)                                                   \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_alter_partition_resp_topic)
ST_SCHEMA_DECLARE(st_alter_partition_resp, ST_ALTER_PARTITION_RESP)

/* ---- BrokerRegistration (62): v1 adds the ZooKeeper migration flag, v2
 * log directories (KIP-858), v3 the previous broker epoch (KIP-966); v4
 * only lets a feature's minimum be 0 (KAFKA-17011). -------------------- */
#define ST_BROKER_REG_LISTENER(X, S)                                                    \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, STRING, host, V(0), NN, NT, 0, _)                                             \
    X(S, UINT16, port, V(0), NN, NT, 0, _)                                             \
    X(S, INT16, security_protocol, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_broker_reg_listener, ST_BROKER_REG_LISTENER)

#define ST_BROKER_REG_FEATURE(X, S)                                                     \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, INT16, min_supported_version, V(0), NN, NT, 0, _)                             \
    X(S, INT16, max_supported_version, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_broker_reg_feature, ST_BROKER_REG_FEATURE)

#define ST_BROKER_REGISTRATION_REQ(X, S)                                                \
    X(S, INT32, broker_id, V(0), NN, NT, 0, _)                                         \
    X(S, STRING, cluster_id, V(0), NN, NT, 0, _)                                       \
    X(S, UUID, incarnation_id, V(0), NN, NT, 0, _)                                     \
    X(S, ARRAY, listeners, V(0), NN, NT, 0, st_broker_reg_listener)                    \
    X(S, ARRAY, features, V(0), NN, NT, 0, st_broker_reg_feature)                      \
    X(S, STRING, rack, V(0), NUL(0), NT, 0, _)                                         \
    X(S, BOOL, is_migrating_zk_broker, V(1), NN, NT, 0, _)                             \
    X(S, ARRAY_UUID, log_dirs, V(2), NN, NT, 0, _)                                     \
    X(S, INT64, previous_broker_epoch, V(3), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_broker_registration_req, ST_BROKER_REGISTRATION_REQ)

#define ST_BROKER_REGISTRATION_RESP(X, S)                                               \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT64, broker_epoch, V(0), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_broker_registration_resp, ST_BROKER_REGISTRATION_RESP)

/* ---- BrokerHeartbeat (63): v1 adds the offline log directories
 * (KIP-858). ------------------------------------------------------------ */
#define ST_BROKER_HEARTBEAT_REQ(X, S)                                                   \
    X(S, INT32, broker_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT64, broker_epoch, V(0), NN, NT, -1, _)                                     \
    X(S, INT64, current_metadata_offset, V(0), NN, NT, 0, _)                           \
    X(S, BOOL, want_fence, V(0), NN, NT, 0, _)                                         \
    X(S, BOOL, want_shut_down, V(0), NN, NT, 0, _)                                     \
    X(S, ARRAY_UUID, offline_log_dirs, V(1), NN, 0, 0, _)
ST_SCHEMA_DECLARE(st_broker_heartbeat_req, ST_BROKER_HEARTBEAT_REQ)

#define ST_BROKER_HEARTBEAT_RESP(X, S)                                                  \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, BOOL, is_caught_up, V(0), NN, NT, 0, _)                                       \
    X(S, BOOL, is_fenced, V(0), NN, NT, 1, _)                                          \
    X(S, BOOL, should_shut_down, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_broker_heartbeat_resp, ST_BROKER_HEARTBEAT_RESP)

/* ---- InitProducerId (22): v1 is v0 (throttle on quota), v2 flexible, v3
 * the producer's current id and epoch so it can bump its epoch (KIP-360),
 * v4 PRODUCER_FENCED for a fenced epoch (KIP-588), v5 KIP-890's. ------- */
#define ST_INIT_PRODUCER_ID_REQ(X, S)                                                   \
    X(S, STRING, transactional_id, V(0), NUL(0), NT, ST_DEF_NULL, _)                   \
    X(S, INT32, transaction_timeout_ms, V(0), NN, NT, 0, _)                            \
    X(S, INT64, producer_id, V(3), NN, NT, -1, _)                                      \
    X(S, INT16, producer_epoch, V(3), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_init_producer_id_req, ST_INIT_PRODUCER_ID_REQ)

#define ST_INIT_PRODUCER_ID_RESP(X, S)                                                  \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT64, producer_id, V(0), NN, NT, -1, _)                                      \
    X(S, INT16, producer_epoch, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_init_producer_id_resp, ST_INIT_PRODUCER_ID_RESP)

/* ---- AllocateProducerIds (67, KIP-730): a broker asks the active
 * controller for a block of producer ids; flexible from v0. ------------ */
#define ST_ALLOCATE_PRODUCER_IDS_REQ(X, S)                                              \
    X(S, INT32, broker_id, V(0), NN, NT, 0, _)                                         \
    X(S, INT64, broker_epoch, V(0), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_allocate_producer_ids_req, ST_ALLOCATE_PRODUCER_IDS_REQ)

#define ST_ALLOCATE_PRODUCER_IDS_RESP(X, S)                                             \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, INT64, producer_id_start, V(0), NN, NT, 0, _)                                 \
    X(S, INT32, producer_id_len, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_allocate_producer_ids_resp, ST_ALLOCATE_PRODUCER_IDS_RESP)

/* ---- DescribeProducers (61, KIP-664): the producer state a partition's
 * leader holds; flexible from v0. --------------------------------------- */
#define ST_DESCRIBE_PRODUCERS_REQ_TOPIC(X, S)                                           \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY_INT32, partition_indexes, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_producers_req_topic, ST_DESCRIBE_PRODUCERS_REQ_TOPIC)

#define ST_DESCRIBE_PRODUCERS_REQ(X, S)                                                 \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_describe_producers_req_topic)
ST_SCHEMA_DECLARE(st_describe_producers_req, ST_DESCRIBE_PRODUCERS_REQ)

#define ST_PRODUCER_STATE(X, S)                                                         \
    X(S, INT64, producer_id, V(0), NN, NT, 0, _)                                       \
    X(S, INT32, producer_epoch, V(0), NN, NT, 0, _)                                    \
    X(S, INT32, last_sequence, V(0), NN, NT, -1, _)                                    \
    X(S, INT64, last_timestamp, V(0), NN, NT, -1, _)                                   \
    X(S, INT32, coordinator_epoch, V(0), NN, NT, 0, _)                                 \
    X(S, INT64, current_txn_start_offset, V(0), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_producer_state, ST_PRODUCER_STATE)

#define ST_DESCRIBE_PRODUCERS_RESP_PART(X, S)                                           \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, error_message, V(0), NUL(0), NT, ST_DEF_NULL, _)                      \
    X(S, ARRAY, active_producers, V(0), NN, NT, 0, st_producer_state)
ST_SCHEMA_DECLARE(st_describe_producers_resp_part, ST_DESCRIBE_PRODUCERS_RESP_PART)

#define ST_DESCRIBE_PRODUCERS_RESP_TOPIC(X, S)                                          \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_describe_producers_resp_part)
ST_SCHEMA_DECLARE(st_describe_producers_resp_topic, ST_DESCRIBE_PRODUCERS_RESP_TOPIC)

#define ST_DESCRIBE_PRODUCERS_RESP(X, S)                                                \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_describe_producers_resp_topic)
ST_SCHEMA_DECLARE(st_describe_producers_resp, ST_DESCRIBE_PRODUCERS_RESP)

/* ---- WriteTxnMarkers (27): a transaction coordinator tells a partition's
 * leader to append the commit or abort marker of a producer's transaction;
 * flexible from v1. --------------------------------------------------- */
#define ST_WRITE_TXN_MARKERS_TOPIC(X, S)                                                \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY_INT32, partition_indexes, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_write_txn_markers_topic, ST_WRITE_TXN_MARKERS_TOPIC)

#define ST_WRITE_TXN_MARKER(X, S)                                                       \
    X(S, INT64, producer_id, V(0), NN, NT, 0, _)                                       \
    X(S, INT16, producer_epoch, V(0), NN, NT, 0, _)                                    \
    X(S, BOOL, transaction_result, V(0), NN, NT, 0, _)                                 \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_write_txn_markers_topic)                   \
    X(S, INT32, coordinator_epoch, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_write_txn_marker, ST_WRITE_TXN_MARKER)

#define ST_WRITE_TXN_MARKERS_REQ(X, S)                                                  \
    X(S, ARRAY, markers, V(0), NN, NT, 0, st_write_txn_marker)
ST_SCHEMA_DECLARE(st_write_txn_markers_req, ST_WRITE_TXN_MARKERS_REQ)

#define ST_WRITE_TXN_MARKERS_RESP_PART(X, S)                                            \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_write_txn_markers_resp_part, ST_WRITE_TXN_MARKERS_RESP_PART)

#define ST_WRITE_TXN_MARKERS_RESP_TOPIC(X, S)                                           \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, partitions, V(0), NN, NT, 0, st_write_txn_markers_resp_part)
ST_SCHEMA_DECLARE(st_write_txn_markers_resp_topic, ST_WRITE_TXN_MARKERS_RESP_TOPIC)

#define ST_WRITE_TXN_MARKER_RESULT(X, S)                                                \
    X(S, INT64, producer_id, V(0), NN, NT, 0, _)                                       \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_write_txn_markers_resp_topic)
ST_SCHEMA_DECLARE(st_write_txn_marker_result, ST_WRITE_TXN_MARKER_RESULT)

#define ST_WRITE_TXN_MARKERS_RESP(X, S)                                                 \
    X(S, ARRAY, markers, V(0), NN, NT, 0, st_write_txn_marker_result)
ST_SCHEMA_DECLARE(st_write_txn_markers_resp, ST_WRITE_TXN_MARKERS_RESP)

/* ---- The transaction coordinator's APIs (KIP-98, KIP-664): versions 0-3
 * of AddPartitionsToTxn (24), AddOffsetsToTxn (25) and EndTxn (26), the
 * producer's (v1 = v0, v2 PRODUCER_FENCED, v3 flexible; AddPartitionsToTxn
 * v4-5 is the brokers' batched form, KIP-890's verification, v5 = v4),
 * DescribeTransactions (65) and
 * ListTransactions (66, v1 the duration filter), flexible from v0. ---- */
#define ST_ADD_PARTITIONS_TO_TXN_TOPIC(X, S)                                            \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY_INT32, partitions, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_add_partitions_to_txn_topic, ST_ADD_PARTITIONS_TO_TXN_TOPIC)

/* v4+: a broker's batch, one entry per transactional id (KIP-890) */
#define ST_ADD_PARTITIONS_TO_TXN_TXN(X, S)                                              \
    X(S, STRING, transactional_id, V(0), NN, NT, 0, _)                                 \
    X(S, INT64, producer_id, V(0), NN, NT, 0, _)                                       \
    X(S, INT16, producer_epoch, V(0), NN, NT, 0, _)                                    \
    X(S, BOOL, verify_only, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY, topics, V(0), NN, NT, 0, st_add_partitions_to_txn_topic)
ST_SCHEMA_DECLARE(st_add_partitions_to_txn_txn, ST_ADD_PARTITIONS_TO_TXN_TXN)

#define ST_ADD_PARTITIONS_TO_TXN_REQ(X, S)                                              \
    X(S, ARRAY, transactions, V(4), NN, NT, 0, st_add_partitions_to_txn_txn)           \
    X(S, STRING, transactional_id, VR(0, 3), NN, NT, 0, _)                             \
    X(S, INT64, producer_id, VR(0, 3), NN, NT, 0, _)                                   \
    X(S, INT16, producer_epoch, VR(0, 3), NN, NT, 0, _)                                \
    X(S, ARRAY, topics, VR(0, 3), NN, NT, 0, st_add_partitions_to_txn_topic)
ST_SCHEMA_DECLARE(st_add_partitions_to_txn_req, ST_ADD_PARTITIONS_TO_TXN_REQ)

#define ST_ADD_PARTITIONS_TO_TXN_PART_RESULT(X, S)                                      \
    X(S, INT32, partition_index, V(0), NN, NT, 0, _)                                   \
    X(S, INT16, partition_error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_add_partitions_to_txn_part_result, ST_ADD_PARTITIONS_TO_TXN_PART_RESULT)

#define ST_ADD_PARTITIONS_TO_TXN_TOPIC_RESULT(X, S)                                     \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY, results_by_partition, V(0), NN, NT, 0, st_add_partitions_to_txn_part_result)
ST_SCHEMA_DECLARE(st_add_partitions_to_txn_topic_result, ST_ADD_PARTITIONS_TO_TXN_TOPIC_RESULT)

#define ST_ADD_PARTITIONS_TO_TXN_RESULT(X, S)                                           \
    X(S, STRING, transactional_id, V(0), NN, NT, 0, _)                                 \
    X(S, ARRAY, topic_results, V(0), NN, NT, 0, st_add_partitions_to_txn_topic_result)
ST_SCHEMA_DECLARE(st_add_partitions_to_txn_result, ST_ADD_PARTITIONS_TO_TXN_RESULT)

#define ST_ADD_PARTITIONS_TO_TXN_RESP(X, S)                                             \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(4), NN, NT, 0, _)                                        \
    X(S, ARRAY, results_by_transaction, V(4), NN, NT, 0, st_add_partitions_to_txn_result) \
    X(S, ARRAY, results_by_topic, VR(0, 3), NN, NT, 0, st_add_partitions_to_txn_topic_result)
ST_SCHEMA_DECLARE(st_add_partitions_to_txn_resp, ST_ADD_PARTITIONS_TO_TXN_RESP)

#define ST_ADD_OFFSETS_TO_TXN_REQ(X, S)                                                 \
    X(S, STRING, transactional_id, V(0), NN, NT, 0, _)                                 \
    X(S, INT64, producer_id, V(0), NN, NT, 0, _)                                       \
    X(S, INT16, producer_epoch, V(0), NN, NT, 0, _)                                    \
    X(S, STRING, group_id, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_add_offsets_to_txn_req, ST_ADD_OFFSETS_TO_TXN_REQ)

/* AddOffsetsToTxn's and EndTxn's responses (v0-3) are the same two fields. */
#define ST_TXN_SIMPLE_RESP(X, S)                                                        \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_txn_simple_resp, ST_TXN_SIMPLE_RESP)

#define ST_END_TXN_REQ(X, S)                                                            \
    X(S, STRING, transactional_id, V(0), NN, NT, 0, _)                                 \
    X(S, INT64, producer_id, V(0), NN, NT, 0, _)                                       \
    X(S, INT16, producer_epoch, V(0), NN, NT, 0, _)                                    \
    X(S, BOOL, committed, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_end_txn_req, ST_END_TXN_REQ)

#define ST_DESCRIBE_TRANSACTIONS_REQ(X, S)                                              \
    X(S, ARRAY_STRING, transactional_ids, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_describe_transactions_req, ST_DESCRIBE_TRANSACTIONS_REQ)

#define ST_TXN_TOPIC_DATA(X, S)                                                         \
    X(S, STRING, name, V(0), NN, NT, 0, _)                                             \
    X(S, ARRAY_INT32, partition_indexes, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_txn_topic_data, ST_TXN_TOPIC_DATA)

#define ST_DESCRIBED_TXN(X, S)                                                          \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, STRING, transactional_id, V(0), NN, NT, 0, _)                                 \
    X(S, STRING, transaction_state, V(0), NN, NT, 0, _)                                \
    X(S, INT32, transaction_timeout_ms, V(0), NN, NT, 0, _)                            \
    X(S, INT64, transaction_start_time_ms, V(0), NN, NT, -1, _)                        \
    X(S, INT64, producer_id, V(0), NN, NT, -1, _)                                      \
    X(S, INT32, producer_epoch, V(0), NN, NT, -1, _)                                   \
    X(S, ARRAY, topic_partitions, V(0), NN, NT, 0, st_txn_topic_data)
ST_SCHEMA_DECLARE(st_described_txn, ST_DESCRIBED_TXN)

#define ST_DESCRIBE_TRANSACTIONS_RESP(X, S)                                             \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, ARRAY, transaction_states, V(0), NN, NT, 0, st_described_txn)
ST_SCHEMA_DECLARE(st_describe_transactions_resp, ST_DESCRIBE_TRANSACTIONS_RESP)

#define ST_LIST_TRANSACTIONS_REQ(X, S)                                                  \
    X(S, ARRAY_STRING, state_filters, V(0), NN, NT, 0, _)                              \
    X(S, ARRAY_INT64, producer_id_filters, V(0), NN, NT, 0, _)                         \
    X(S, INT64, duration_filter, V(1), NN, NT, -1, _)
ST_SCHEMA_DECLARE(st_list_transactions_req, ST_LIST_TRANSACTIONS_REQ)

#define ST_LISTED_TXN(X, S)                                                             \
    X(S, STRING, transactional_id, V(0), NN, NT, 0, _)                                 \
    X(S, INT64, producer_id, V(0), NN, NT, 0, _)                                       \
    X(S, STRING, transaction_state, V(0), NN, NT, 0, _)
ST_SCHEMA_DECLARE(st_listed_txn, ST_LISTED_TXN)

#define ST_LIST_TRANSACTIONS_RESP(X, S)                                                 \
    X(S, INT32, throttle_time_ms, V(0), NN, NT, 0, _)                                  \
    X(S, INT16, error_code, V(0), NN, NT, 0, _)                                        \
    X(S, ARRAY_STRING, unknown_state_filters, V(0), NN, NT, 0, _)                      \
    X(S, ARRAY, transaction_states, V(0), NN, NT, 0, st_listed_txn)
ST_SCHEMA_DECLARE(st_list_transactions_resp, ST_LIST_TRANSACTIONS_RESP)

/* Every schema above, for tests that walk them all: X(schema). */
#define ST_ALL_SCHEMAS(X)                                                               \
    X(st_api_versions_req) X(st_api_versions_key) X(st_api_versions_feature)           \
    X(st_api_versions_finalized)                                                       \
    X(st_api_versions_resp) X(st_metadata_req_topic) X(st_metadata_req)                \
    X(st_metadata_broker) X(st_metadata_partition) X(st_metadata_topic)                \
    X(st_metadata_resp) X(st_produce_req_part) X(st_produce_req_topic)                 \
    X(st_produce_req) X(st_leader_id_epoch) X(st_produce_record_error)                 \
    X(st_produce_resp_part) X(st_produce_resp_topic) X(st_node_endpoint)               \
    X(st_produce_resp) X(st_fetch_replica_state) X(st_fetch_req_part)                  \
    X(st_fetch_req_topic) X(st_fetch_forgotten) X(st_fetch_req)                        \
    X(st_epoch_end_offset) X(st_snapshot_id) X(st_aborted_txn)                         \
    X(st_fetch_resp_part) X(st_fetch_resp_topic) X(st_fetch_resp)                      \
    X(st_list_offsets_req_part) X(st_list_offsets_req_topic) X(st_list_offsets_req)    \
    X(st_list_offsets_resp_part) X(st_list_offsets_resp_topic)                         \
    X(st_list_offsets_resp) X(st_create_topics_assignment) X(st_config_kv)             \
    X(st_create_topics_topic) X(st_create_topics_req) X(st_create_topics_config)       \
    X(st_create_topics_result) X(st_create_topics_resp) X(st_delete_topics_state)      \
    X(st_delete_topics_req) X(st_delete_topics_result) X(st_delete_topics_resp)        \
    X(st_delete_records_req_part) X(st_delete_records_req_topic)                       \
    X(st_delete_records_req) X(st_delete_records_resp_part)                            \
    X(st_delete_records_resp_topic) X(st_delete_records_resp)                          \
    X(st_describe_configs_resource) X(st_describe_configs_req)                         \
    X(st_describe_configs_synonym) X(st_describe_configs_entry)                        \
    X(st_describe_configs_result) X(st_describe_configs_resp) X(st_alter_config)       \
    X(st_alter_configs_resource) X(st_alter_configs_req) X(st_incr_alter_config)       \
    X(st_incr_alter_configs_resource) X(st_incr_alter_configs_req)                     \
    X(st_alter_configs_result) X(st_alter_configs_resp)                                \
    X(st_create_partitions_assignment) X(st_create_partitions_topic)                   \
    X(st_create_partitions_req) X(st_create_partitions_result)                         \
    X(st_create_partitions_resp) X(st_describe_cluster_req)                            \
    X(st_describe_cluster_broker) X(st_describe_cluster_resp)                          \
    X(st_describe_log_dirs_req_topic) X(st_describe_log_dirs_req)                      \
    X(st_describe_log_dirs_part) X(st_describe_log_dirs_topic)                         \
    X(st_describe_log_dirs_result) X(st_describe_log_dirs_resp)                        \
    X(st_find_coordinator_req) X(st_coordinator) X(st_find_coordinator_resp)           \
    X(st_join_group_protocol) X(st_join_group_req) X(st_join_group_member)             \
    X(st_join_group_resp) X(st_sync_group_assignment) X(st_sync_group_req)             \
    X(st_sync_group_resp) X(st_heartbeat_req) X(st_heartbeat_resp)                     \
    X(st_leave_group_member) X(st_leave_group_req) X(st_leave_group_member_resp)       \
    X(st_leave_group_resp) X(st_offset_commit_req_part) X(st_offset_commit_req_topic)  \
    X(st_offset_commit_req) X(st_offset_commit_resp_part)                              \
    X(st_offset_commit_resp_topic) X(st_offset_commit_resp)                            \
    X(st_offset_fetch_req_topic) X(st_offset_fetch_req_group) X(st_offset_fetch_req)   \
    X(st_offset_fetch_resp_part) X(st_offset_fetch_resp_topic)                         \
    X(st_offset_fetch_resp_group) X(st_offset_fetch_resp) X(st_describe_groups_req)    \
    X(st_described_group_member) X(st_described_group) X(st_describe_groups_resp)      \
    X(st_list_groups_req) X(st_listed_group) X(st_list_groups_resp)                    \
    X(st_delete_groups_req) X(st_delete_groups_result) X(st_delete_groups_resp)        \
    X(st_offset_delete_req_part) X(st_offset_delete_req_topic) X(st_offset_delete_req) \
    X(st_offset_delete_resp_part) X(st_offset_delete_resp_topic)                       \
    X(st_offset_delete_resp)                                                           \
    X(st_write_txn_markers_topic) X(st_write_txn_marker) X(st_write_txn_markers_req)   \
    X(st_write_txn_markers_resp_part) X(st_write_txn_markers_resp_topic)               \
    X(st_write_txn_marker_result) X(st_write_txn_markers_resp)                         \
    X(st_offset_for_leader_epoch_req_part) X(st_offset_for_leader_epoch_req_topic)     \
    X(st_offset_for_leader_epoch_req) X(st_offset_for_leader_epoch_resp_part)          \
    X(st_offset_for_leader_epoch_resp_topic) X(st_offset_for_leader_epoch_resp)        \
    X(st_elect_leaders_req_topic) X(st_elect_leaders_req)                              \
    X(st_elect_leaders_resp_part) X(st_elect_leaders_resp_topic)                       \
    X(st_elect_leaders_resp) X(st_raft_node_endpoint) X(st_raft_listener)              \
    X(st_vote_req_part) X(st_vote_req_topic) X(st_vote_req) X(st_vote_resp_part)       \
    X(st_vote_resp_topic) X(st_vote_resp) X(st_quorum_resp_part)                       \
    X(st_quorum_resp_topic) X(st_begin_quorum_epoch_req_part)                          \
    X(st_begin_quorum_epoch_req_topic) X(st_begin_quorum_epoch_req)                    \
    X(st_begin_quorum_epoch_resp) X(st_end_quorum_epoch_candidate)                     \
    X(st_end_quorum_epoch_req_part) X(st_end_quorum_epoch_req_topic)                   \
    X(st_end_quorum_epoch_req) X(st_end_quorum_epoch_resp)                             \
    X(st_describe_quorum_req_part) X(st_describe_quorum_req_topic)                     \
    X(st_describe_quorum_req) X(st_quorum_replica_state)                               \
    X(st_describe_quorum_resp_part) X(st_describe_quorum_resp_topic)                   \
    X(st_describe_quorum_node) X(st_describe_quorum_resp)                              \
    X(st_fetch_snapshot_req_part) X(st_fetch_snapshot_req_topic)                       \
    X(st_fetch_snapshot_req) X(st_fetch_snapshot_leader)                               \
    X(st_fetch_snapshot_resp_part) X(st_fetch_snapshot_resp_topic)                     \
    X(st_fetch_snapshot_resp) X(st_alter_partition_broker_state)                       \
    X(st_alter_partition_req_part) X(st_alter_partition_req_topic)                     \
    X(st_alter_partition_req) X(st_alter_partition_resp_part)                          \
    X(st_alter_partition_resp_topic) X(st_alter_partition_resp)                        \
    X(st_broker_reg_listener) X(st_broker_reg_feature) X(st_broker_registration_req)   \
    X(st_broker_registration_resp) X(st_broker_heartbeat_req)                          \
    X(st_broker_heartbeat_resp) X(st_init_producer_id_req) X(st_init_producer_id_resp)    \
    X(st_allocate_producer_ids_req) X(st_allocate_producer_ids_resp)                   \
    X(st_describe_producers_req_topic) X(st_describe_producers_req) X(st_producer_state) \
    X(st_describe_producers_resp_part) X(st_describe_producers_resp_topic)             \
    X(st_describe_producers_resp) X(st_add_partitions_to_txn_topic)                   \
    X(st_add_partitions_to_txn_txn) X(st_add_partitions_to_txn_result)                 \
    X(st_add_partitions_to_txn_req) X(st_add_partitions_to_txn_part_result)           \
    X(st_add_partitions_to_txn_topic_result) X(st_add_partitions_to_txn_resp)         \
    X(st_add_offsets_to_txn_req) X(st_txn_simple_resp) X(st_end_txn_req)              \
    X(st_describe_transactions_req) X(st_txn_topic_data) X(st_described_txn)          \
    X(st_describe_transactions_resp) X(st_list_transactions_req) X(st_listed_txn)     \
    X(st_dtp_cursor) X(st_dtp_req_topic) X(st_dtp_req) X(st_dtp_partition)             \
    X(st_dtp_topic) X(st_dtp_resp)                                                     \
    X(st_list_transactions_resp)

#include "msg_dsl_end.h"

#endif /* ST_MESSAGES_H */

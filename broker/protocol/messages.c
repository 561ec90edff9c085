/* messages.c - field tables for every message in messages.h, and the API
 * table: which versions Strata supports and where flexible encoding
 * starts. */
#define ST_MESSAGES_KEEP_DSL
#include "protocol.h"

ST_SCHEMA_DEFINE(st_api_versions_req, ST_API_VERSIONS_REQ)
ST_SCHEMA_DEFINE(st_api_versions_key, ST_API_VERSIONS_KEY)
ST_SCHEMA_DEFINE(st_api_versions_feature, ST_API_VERSIONS_FEATURE)
ST_SCHEMA_DEFINE(st_api_versions_finalized, ST_API_VERSIONS_FINALIZED)
ST_SCHEMA_DEFINE(st_api_versions_resp, ST_API_VERSIONS_RESP)
ST_SCHEMA_DEFINE(st_metadata_req_topic, ST_METADATA_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_metadata_req, ST_METADATA_REQ)
ST_SCHEMA_DEFINE(st_metadata_broker, ST_METADATA_BROKER)
ST_SCHEMA_DEFINE(st_metadata_partition, ST_METADATA_PARTITION)
ST_SCHEMA_DEFINE(st_metadata_topic, ST_METADATA_TOPIC)
ST_SCHEMA_DEFINE(st_metadata_resp, ST_METADATA_RESP)
ST_SCHEMA_DEFINE(st_produce_req_part, ST_PRODUCE_REQ_PART)
ST_SCHEMA_DEFINE(st_produce_req_topic, ST_PRODUCE_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_produce_req, ST_PRODUCE_REQ)
ST_SCHEMA_DEFINE(st_leader_id_epoch, ST_LEADER_ID_EPOCH)
ST_SCHEMA_DEFINE(st_produce_record_error, ST_PRODUCE_RECORD_ERROR)
ST_SCHEMA_DEFINE(st_produce_resp_part, ST_PRODUCE_RESP_PART)
ST_SCHEMA_DEFINE(st_produce_resp_topic, ST_PRODUCE_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_node_endpoint, ST_NODE_ENDPOINT)
ST_SCHEMA_DEFINE(st_produce_resp, ST_PRODUCE_RESP)
ST_SCHEMA_DEFINE(st_fetch_replica_state, ST_FETCH_REPLICA_STATE)
ST_SCHEMA_DEFINE(st_fetch_req_part, ST_FETCH_REQ_PART)
ST_SCHEMA_DEFINE(st_fetch_req_topic, ST_FETCH_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_fetch_forgotten, ST_FETCH_FORGOTTEN)
ST_SCHEMA_DEFINE(st_fetch_req, ST_FETCH_REQ)
ST_SCHEMA_DEFINE(st_epoch_end_offset, ST_EPOCH_END_OFFSET)
ST_SCHEMA_DEFINE(st_snapshot_id, ST_SNAPSHOT_ID)
ST_SCHEMA_DEFINE(st_aborted_txn, ST_ABORTED_TXN)
ST_SCHEMA_DEFINE(st_fetch_resp_part, ST_FETCH_RESP_PART)
ST_SCHEMA_DEFINE(st_fetch_resp_topic, ST_FETCH_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_fetch_resp, ST_FETCH_RESP)
ST_SCHEMA_DEFINE(st_list_offsets_req_part, ST_LIST_OFFSETS_REQ_PART)
ST_SCHEMA_DEFINE(st_list_offsets_req_topic, ST_LIST_OFFSETS_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_list_offsets_req, ST_LIST_OFFSETS_REQ)
ST_SCHEMA_DEFINE(st_list_offsets_resp_part, ST_LIST_OFFSETS_RESP_PART)
ST_SCHEMA_DEFINE(st_list_offsets_resp_topic, ST_LIST_OFFSETS_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_list_offsets_resp, ST_LIST_OFFSETS_RESP)
ST_SCHEMA_DEFINE(st_create_topics_assignment, ST_CREATE_TOPICS_ASSIGNMENT)
ST_SCHEMA_DEFINE(st_config_kv, ST_CONFIG_KV)
ST_SCHEMA_DEFINE(st_create_topics_topic, ST_CREATE_TOPICS_TOPIC)
ST_SCHEMA_DEFINE(st_create_topics_req, ST_CREATE_TOPICS_REQ)
ST_SCHEMA_DEFINE(st_create_topics_config, ST_CREATE_TOPICS_CONFIG)
ST_SCHEMA_DEFINE(st_create_topics_result, ST_CREATE_TOPICS_RESULT)
ST_SCHEMA_DEFINE(st_create_topics_resp, ST_CREATE_TOPICS_RESP)
ST_SCHEMA_DEFINE(st_delete_topics_state, ST_DELETE_TOPICS_STATE)
ST_SCHEMA_DEFINE(st_delete_topics_req, ST_DELETE_TOPICS_REQ)
ST_SCHEMA_DEFINE(st_delete_topics_result, ST_DELETE_TOPICS_RESULT)
ST_SCHEMA_DEFINE(st_delete_topics_resp, ST_DELETE_TOPICS_RESP)
ST_SCHEMA_DEFINE(st_delete_records_req_part, ST_DELETE_RECORDS_REQ_PART)
ST_SCHEMA_DEFINE(st_delete_records_req_topic, ST_DELETE_RECORDS_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_delete_records_req, ST_DELETE_RECORDS_REQ)
ST_SCHEMA_DEFINE(st_delete_records_resp_part, ST_DELETE_RECORDS_RESP_PART)
ST_SCHEMA_DEFINE(st_delete_records_resp_topic, ST_DELETE_RECORDS_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_delete_records_resp, ST_DELETE_RECORDS_RESP)
ST_SCHEMA_DEFINE(st_describe_configs_resource, ST_DESCRIBE_CONFIGS_RESOURCE)
ST_SCHEMA_DEFINE(st_describe_configs_req, ST_DESCRIBE_CONFIGS_REQ)
ST_SCHEMA_DEFINE(st_describe_configs_synonym, ST_DESCRIBE_CONFIGS_SYNONYM)
ST_SCHEMA_DEFINE(st_describe_configs_entry, ST_DESCRIBE_CONFIGS_ENTRY)
ST_SCHEMA_DEFINE(st_describe_configs_result, ST_DESCRIBE_CONFIGS_RESULT)
ST_SCHEMA_DEFINE(st_describe_configs_resp, ST_DESCRIBE_CONFIGS_RESP)
ST_SCHEMA_DEFINE(st_alter_config, ST_ALTER_CONFIG)
ST_SCHEMA_DEFINE(st_alter_configs_resource, ST_ALTER_CONFIGS_RESOURCE)
ST_SCHEMA_DEFINE(st_alter_configs_req, ST_ALTER_CONFIGS_REQ)
ST_SCHEMA_DEFINE(st_incr_alter_config, ST_INCR_ALTER_CONFIG)
ST_SCHEMA_DEFINE(st_incr_alter_configs_resource, ST_INCR_ALTER_CONFIGS_RESOURCE)
ST_SCHEMA_DEFINE(st_incr_alter_configs_req, ST_INCR_ALTER_CONFIGS_REQ)
ST_SCHEMA_DEFINE(st_alter_configs_result, ST_ALTER_CONFIGS_RESULT)
ST_SCHEMA_DEFINE(st_alter_configs_resp, ST_ALTER_CONFIGS_RESP)
ST_SCHEMA_DEFINE(st_create_partitions_assignment, ST_CREATE_PARTITIONS_ASSIGNMENT)
ST_SCHEMA_DEFINE(st_create_partitions_topic, ST_CREATE_PARTITIONS_TOPIC)
ST_SCHEMA_DEFINE(st_create_partitions_req, ST_CREATE_PARTITIONS_REQ)
ST_SCHEMA_DEFINE(st_create_partitions_result, ST_CREATE_PARTITIONS_RESULT)
ST_SCHEMA_DEFINE(st_create_partitions_resp, ST_CREATE_PARTITIONS_RESP)
ST_SCHEMA_DEFINE(st_reassign_req_part, ST_REASSIGN_REQ_PART)
ST_SCHEMA_DEFINE(st_reassign_req_topic, ST_REASSIGN_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_reassign_req, ST_REASSIGN_REQ)
ST_SCHEMA_DEFINE(st_reassign_resp_part, ST_REASSIGN_RESP_PART)
ST_SCHEMA_DEFINE(st_reassign_resp_topic, ST_REASSIGN_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_reassign_resp, ST_REASSIGN_RESP)
ST_SCHEMA_DEFINE(st_list_reassign_req_topic, ST_LIST_REASSIGN_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_list_reassign_req, ST_LIST_REASSIGN_REQ)
ST_SCHEMA_DEFINE(st_list_reassign_resp_part, ST_LIST_REASSIGN_RESP_PART)
ST_SCHEMA_DEFINE(st_list_reassign_resp_topic, ST_LIST_REASSIGN_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_list_reassign_resp, ST_LIST_REASSIGN_RESP)
ST_SCHEMA_DEFINE(st_dtp_cursor, ST_DTP_CURSOR)
ST_SCHEMA_DEFINE(st_dtp_req_topic, ST_DTP_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_dtp_req, ST_DTP_REQ)
ST_SCHEMA_DEFINE(st_dtp_partition, ST_DTP_PARTITION)
ST_SCHEMA_DEFINE(st_dtp_topic, ST_DTP_TOPIC)
ST_SCHEMA_DEFINE(st_dtp_resp, ST_DTP_RESP)
ST_SCHEMA_DEFINE(st_sasl_handshake_req, ST_SASL_HANDSHAKE_REQ)
ST_SCHEMA_DEFINE(st_sasl_handshake_resp, ST_SASL_HANDSHAKE_RESP)
ST_SCHEMA_DEFINE(st_sasl_authenticate_req, ST_SASL_AUTHENTICATE_REQ)
ST_SCHEMA_DEFINE(st_sasl_authenticate_resp, ST_SASL_AUTHENTICATE_RESP)
ST_SCHEMA_DEFINE(st_scram_user_name, ST_SCRAM_USER_NAME)
ST_SCHEMA_DEFINE(st_describe_scram_req, ST_DESCRIBE_SCRAM_REQ)
ST_SCHEMA_DEFINE(st_scram_credential_info, ST_SCRAM_CREDENTIAL_INFO)
ST_SCHEMA_DEFINE(st_describe_scram_result, ST_DESCRIBE_SCRAM_RESULT)
ST_SCHEMA_DEFINE(st_describe_scram_resp, ST_DESCRIBE_SCRAM_RESP)
ST_SCHEMA_DEFINE(st_scram_deletion, ST_SCRAM_DELETION)
ST_SCHEMA_DEFINE(st_scram_upsertion, ST_SCRAM_UPSERTION)
ST_SCHEMA_DEFINE(st_alter_scram_req, ST_ALTER_SCRAM_REQ)
ST_SCHEMA_DEFINE(st_alter_scram_result, ST_ALTER_SCRAM_RESULT)
ST_SCHEMA_DEFINE(st_alter_scram_resp, ST_ALTER_SCRAM_RESP)
ST_SCHEMA_DEFINE(st_describe_acls_req, ST_DESCRIBE_ACLS_REQ)
ST_SCHEMA_DEFINE(st_acl_description, ST_ACL_DESCRIPTION)
ST_SCHEMA_DEFINE(st_describe_acls_resource, ST_DESCRIBE_ACLS_RESOURCE)
ST_SCHEMA_DEFINE(st_describe_acls_resp, ST_DESCRIBE_ACLS_RESP)
ST_SCHEMA_DEFINE(st_acl_creation, ST_ACL_CREATION)
ST_SCHEMA_DEFINE(st_create_acls_req, ST_CREATE_ACLS_REQ)
ST_SCHEMA_DEFINE(st_acl_creation_result, ST_ACL_CREATION_RESULT)
ST_SCHEMA_DEFINE(st_create_acls_resp, ST_CREATE_ACLS_RESP)
ST_SCHEMA_DEFINE(st_delete_acls_filter, ST_DELETE_ACLS_FILTER)
ST_SCHEMA_DEFINE(st_delete_acls_req, ST_DELETE_ACLS_REQ)
ST_SCHEMA_DEFINE(st_delete_acls_matching, ST_DELETE_ACLS_MATCHING)
ST_SCHEMA_DEFINE(st_delete_acls_filter_result, ST_DELETE_ACLS_FILTER_RESULT)
ST_SCHEMA_DEFINE(st_delete_acls_resp, ST_DELETE_ACLS_RESP)
ST_SCHEMA_DEFINE(st_describe_cluster_req, ST_DESCRIBE_CLUSTER_REQ)
ST_SCHEMA_DEFINE(st_describe_cluster_broker, ST_DESCRIBE_CLUSTER_BROKER)
ST_SCHEMA_DEFINE(st_describe_cluster_resp, ST_DESCRIBE_CLUSTER_RESP)
ST_SCHEMA_DEFINE(st_describe_log_dirs_req_topic, ST_DESCRIBE_LOG_DIRS_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_describe_log_dirs_req, ST_DESCRIBE_LOG_DIRS_REQ)
ST_SCHEMA_DEFINE(st_describe_log_dirs_part, ST_DESCRIBE_LOG_DIRS_PART)
ST_SCHEMA_DEFINE(st_describe_log_dirs_topic, ST_DESCRIBE_LOG_DIRS_TOPIC)
ST_SCHEMA_DEFINE(st_describe_log_dirs_result, ST_DESCRIBE_LOG_DIRS_RESULT)
ST_SCHEMA_DEFINE(st_describe_log_dirs_resp, ST_DESCRIBE_LOG_DIRS_RESP)
ST_SCHEMA_DEFINE(st_find_coordinator_req, ST_FIND_COORDINATOR_REQ)
ST_SCHEMA_DEFINE(st_coordinator, ST_COORDINATOR)
ST_SCHEMA_DEFINE(st_find_coordinator_resp, ST_FIND_COORDINATOR_RESP)
ST_SCHEMA_DEFINE(st_join_group_protocol, ST_JOIN_GROUP_PROTOCOL)
ST_SCHEMA_DEFINE(st_join_group_req, ST_JOIN_GROUP_REQ)
ST_SCHEMA_DEFINE(st_join_group_member, ST_JOIN_GROUP_MEMBER)
ST_SCHEMA_DEFINE(st_join_group_resp, ST_JOIN_GROUP_RESP)
ST_SCHEMA_DEFINE(st_sync_group_assignment, ST_SYNC_GROUP_ASSIGNMENT)
ST_SCHEMA_DEFINE(st_sync_group_req, ST_SYNC_GROUP_REQ)
ST_SCHEMA_DEFINE(st_sync_group_resp, ST_SYNC_GROUP_RESP)
ST_SCHEMA_DEFINE(st_heartbeat_req, ST_HEARTBEAT_REQ)
ST_SCHEMA_DEFINE(st_heartbeat_resp, ST_HEARTBEAT_RESP)
ST_SCHEMA_DEFINE(st_leave_group_member, ST_LEAVE_GROUP_MEMBER)
ST_SCHEMA_DEFINE(st_leave_group_req, ST_LEAVE_GROUP_REQ)
ST_SCHEMA_DEFINE(st_leave_group_member_resp, ST_LEAVE_GROUP_MEMBER_RESP)
ST_SCHEMA_DEFINE(st_leave_group_resp, ST_LEAVE_GROUP_RESP)
ST_SCHEMA_DEFINE(st_offset_commit_req_part, ST_OFFSET_COMMIT_REQ_PART)
ST_SCHEMA_DEFINE(st_offset_commit_req_topic, ST_OFFSET_COMMIT_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_offset_commit_req, ST_OFFSET_COMMIT_REQ)
ST_SCHEMA_DEFINE(st_offset_commit_resp_part, ST_OFFSET_COMMIT_RESP_PART)
ST_SCHEMA_DEFINE(st_offset_commit_resp_topic, ST_OFFSET_COMMIT_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_offset_commit_resp, ST_OFFSET_COMMIT_RESP)
ST_SCHEMA_DEFINE(st_txn_offset_commit_req_part, ST_TXN_OFFSET_COMMIT_REQ_PART)
ST_SCHEMA_DEFINE(st_txn_offset_commit_req_topic, ST_TXN_OFFSET_COMMIT_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_txn_offset_commit_req, ST_TXN_OFFSET_COMMIT_REQ)
ST_SCHEMA_DEFINE(st_txn_offset_commit_resp_part, ST_TXN_OFFSET_COMMIT_RESP_PART)
ST_SCHEMA_DEFINE(st_txn_offset_commit_resp_topic, ST_TXN_OFFSET_COMMIT_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_txn_offset_commit_resp, ST_TXN_OFFSET_COMMIT_RESP)
ST_SCHEMA_DEFINE(st_offset_fetch_req_topic, ST_OFFSET_FETCH_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_offset_fetch_req_group, ST_OFFSET_FETCH_REQ_GROUP)
ST_SCHEMA_DEFINE(st_offset_fetch_req, ST_OFFSET_FETCH_REQ)
ST_SCHEMA_DEFINE(st_offset_fetch_resp_part, ST_OFFSET_FETCH_RESP_PART)
ST_SCHEMA_DEFINE(st_offset_fetch_resp_topic, ST_OFFSET_FETCH_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_offset_fetch_resp_group, ST_OFFSET_FETCH_RESP_GROUP)
ST_SCHEMA_DEFINE(st_offset_fetch_resp, ST_OFFSET_FETCH_RESP)
ST_SCHEMA_DEFINE(st_describe_groups_req, ST_DESCRIBE_GROUPS_REQ)
ST_SCHEMA_DEFINE(st_described_group_member, ST_DESCRIBED_GROUP_MEMBER)
ST_SCHEMA_DEFINE(st_described_group, ST_DESCRIBED_GROUP)
ST_SCHEMA_DEFINE(st_describe_groups_resp, ST_DESCRIBE_GROUPS_RESP)
ST_SCHEMA_DEFINE(st_list_groups_req, ST_LIST_GROUPS_REQ)
ST_SCHEMA_DEFINE(st_listed_group, ST_LISTED_GROUP)
ST_SCHEMA_DEFINE(st_list_groups_resp, ST_LIST_GROUPS_RESP)
ST_SCHEMA_DEFINE(st_delete_groups_req, ST_DELETE_GROUPS_REQ)
ST_SCHEMA_DEFINE(st_delete_groups_result, ST_DELETE_GROUPS_RESULT)
ST_SCHEMA_DEFINE(st_delete_groups_resp, ST_DELETE_GROUPS_RESP)
ST_SCHEMA_DEFINE(st_offset_delete_req_part, ST_OFFSET_DELETE_REQ_PART)
ST_SCHEMA_DEFINE(st_offset_delete_req_topic, ST_OFFSET_DELETE_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_offset_delete_req, ST_OFFSET_DELETE_REQ)
ST_SCHEMA_DEFINE(st_offset_delete_resp_part, ST_OFFSET_DELETE_RESP_PART)
ST_SCHEMA_DEFINE(st_offset_delete_resp_topic, ST_OFFSET_DELETE_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_offset_delete_resp, ST_OFFSET_DELETE_RESP)
ST_SCHEMA_DEFINE(st_offset_for_leader_epoch_req_part, ST_OFFSET_FOR_LEADER_EPOCH_REQ_PART)
ST_SCHEMA_DEFINE(st_offset_for_leader_epoch_req_topic, ST_OFFSET_FOR_LEADER_EPOCH_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_offset_for_leader_epoch_req, ST_OFFSET_FOR_LEADER_EPOCH_REQ)
ST_SCHEMA_DEFINE(st_offset_for_leader_epoch_resp_part, ST_OFFSET_FOR_LEADER_EPOCH_RESP_PART)
ST_SCHEMA_DEFINE(st_offset_for_leader_epoch_resp_topic, ST_OFFSET_FOR_LEADER_EPOCH_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_offset_for_leader_epoch_resp, ST_OFFSET_FOR_LEADER_EPOCH_RESP)
ST_SCHEMA_DEFINE(st_elect_leaders_req_topic, ST_ELECT_LEADERS_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_elect_leaders_req, ST_ELECT_LEADERS_REQ)
ST_SCHEMA_DEFINE(st_elect_leaders_resp_part, ST_ELECT_LEADERS_RESP_PART)
ST_SCHEMA_DEFINE(st_elect_leaders_resp_topic, ST_ELECT_LEADERS_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_elect_leaders_resp, ST_ELECT_LEADERS_RESP)
ST_SCHEMA_DEFINE(st_raft_node_endpoint, ST_RAFT_NODE_ENDPOINT)
ST_SCHEMA_DEFINE(st_raft_listener, ST_RAFT_LISTENER)
ST_SCHEMA_DEFINE(st_vote_req_part, ST_VOTE_REQ_PART)
ST_SCHEMA_DEFINE(st_vote_req_topic, ST_VOTE_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_vote_req, ST_VOTE_REQ)
ST_SCHEMA_DEFINE(st_vote_resp_part, ST_VOTE_RESP_PART)
ST_SCHEMA_DEFINE(st_vote_resp_topic, ST_VOTE_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_vote_resp, ST_VOTE_RESP)
ST_SCHEMA_DEFINE(st_quorum_resp_part, ST_QUORUM_RESP_PART)
ST_SCHEMA_DEFINE(st_quorum_resp_topic, ST_QUORUM_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_begin_quorum_epoch_req_part, ST_BEGIN_QUORUM_EPOCH_REQ_PART)
ST_SCHEMA_DEFINE(st_begin_quorum_epoch_req_topic, ST_BEGIN_QUORUM_EPOCH_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_begin_quorum_epoch_req, ST_BEGIN_QUORUM_EPOCH_REQ)
ST_SCHEMA_DEFINE(st_begin_quorum_epoch_resp, ST_BEGIN_QUORUM_EPOCH_RESP)
ST_SCHEMA_DEFINE(st_end_quorum_epoch_candidate, ST_END_QUORUM_EPOCH_CANDIDATE)
ST_SCHEMA_DEFINE(st_end_quorum_epoch_req_part, ST_END_QUORUM_EPOCH_REQ_PART)
ST_SCHEMA_DEFINE(st_end_quorum_epoch_req_topic, ST_END_QUORUM_EPOCH_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_end_quorum_epoch_req, ST_END_QUORUM_EPOCH_REQ)
ST_SCHEMA_DEFINE(st_end_quorum_epoch_resp, ST_END_QUORUM_EPOCH_RESP)
ST_SCHEMA_DEFINE(st_describe_quorum_req_part, ST_DESCRIBE_QUORUM_REQ_PART)
ST_SCHEMA_DEFINE(st_describe_quorum_req_topic, ST_DESCRIBE_QUORUM_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_describe_quorum_req, ST_DESCRIBE_QUORUM_REQ)
ST_SCHEMA_DEFINE(st_quorum_replica_state, ST_QUORUM_REPLICA_STATE)
ST_SCHEMA_DEFINE(st_describe_quorum_resp_part, ST_DESCRIBE_QUORUM_RESP_PART)
ST_SCHEMA_DEFINE(st_describe_quorum_resp_topic, ST_DESCRIBE_QUORUM_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_describe_quorum_node, ST_DESCRIBE_QUORUM_NODE)
ST_SCHEMA_DEFINE(st_describe_quorum_resp, ST_DESCRIBE_QUORUM_RESP)
ST_SCHEMA_DEFINE(st_fetch_snapshot_req_part, ST_FETCH_SNAPSHOT_REQ_PART)
ST_SCHEMA_DEFINE(st_fetch_snapshot_req_topic, ST_FETCH_SNAPSHOT_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_fetch_snapshot_req, ST_FETCH_SNAPSHOT_REQ)
ST_SCHEMA_DEFINE(st_fetch_snapshot_leader, ST_FETCH_SNAPSHOT_LEADER)
ST_SCHEMA_DEFINE(st_fetch_snapshot_resp_part, ST_FETCH_SNAPSHOT_RESP_PART)
ST_SCHEMA_DEFINE(st_fetch_snapshot_resp_topic, ST_FETCH_SNAPSHOT_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_fetch_snapshot_resp, ST_FETCH_SNAPSHOT_RESP)
ST_SCHEMA_DEFINE(st_alter_partition_broker_state, ST_ALTER_PARTITION_BROKER_STATE)
ST_SCHEMA_DEFINE(st_alter_partition_req_part, ST_ALTER_PARTITION_REQ_PART)
ST_SCHEMA_DEFINE(st_alter_partition_req_topic, ST_ALTER_PARTITION_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_alter_partition_req, ST_ALTER_PARTITION_REQ)
ST_SCHEMA_DEFINE(st_alter_partition_resp_part, ST_ALTER_PARTITION_RESP_PART)
ST_SCHEMA_DEFINE(st_alter_partition_resp_topic, ST_ALTER_PARTITION_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_alter_partition_resp, ST_ALTER_PARTITION_RESP)
ST_SCHEMA_DEFINE(st_broker_reg_listener, ST_BROKER_REG_LISTENER)
ST_SCHEMA_DEFINE(st_broker_reg_feature, ST_BROKER_REG_FEATURE)
ST_SCHEMA_DEFINE(st_broker_registration_req, ST_BROKER_REGISTRATION_REQ)
ST_SCHEMA_DEFINE(st_broker_registration_resp, ST_BROKER_REGISTRATION_RESP)
ST_SCHEMA_DEFINE(st_broker_heartbeat_req, ST_BROKER_HEARTBEAT_REQ)
ST_SCHEMA_DEFINE(st_broker_heartbeat_resp, ST_BROKER_HEARTBEAT_RESP)
ST_SCHEMA_DEFINE(st_init_producer_id_req, ST_INIT_PRODUCER_ID_REQ)
ST_SCHEMA_DEFINE(st_init_producer_id_resp, ST_INIT_PRODUCER_ID_RESP)
ST_SCHEMA_DEFINE(st_allocate_producer_ids_req, ST_ALLOCATE_PRODUCER_IDS_REQ)
ST_SCHEMA_DEFINE(st_allocate_producer_ids_resp, ST_ALLOCATE_PRODUCER_IDS_RESP)
ST_SCHEMA_DEFINE(st_describe_producers_req_topic, ST_DESCRIBE_PRODUCERS_REQ_TOPIC)
ST_SCHEMA_DEFINE(st_describe_producers_req, ST_DESCRIBE_PRODUCERS_REQ)
ST_SCHEMA_DEFINE(st_producer_state, ST_PRODUCER_STATE)
ST_SCHEMA_DEFINE(st_describe_producers_resp_part, ST_DESCRIBE_PRODUCERS_RESP_PART)
ST_SCHEMA_DEFINE(st_describe_producers_resp_topic, ST_DESCRIBE_PRODUCERS_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_describe_producers_resp, ST_DESCRIBE_PRODUCERS_RESP)
ST_SCHEMA_DEFINE(st_write_txn_markers_topic, ST_WRITE_TXN_MARKERS_TOPIC)
ST_SCHEMA_DEFINE(st_write_txn_marker, ST_WRITE_TXN_MARKER)
ST_SCHEMA_DEFINE(st_write_txn_markers_req, ST_WRITE_TXN_MARKERS_REQ)
ST_SCHEMA_DEFINE(st_write_txn_markers_resp_part, ST_WRITE_TXN_MARKERS_RESP_PART)
ST_SCHEMA_DEFINE(st_write_txn_markers_resp_topic, ST_WRITE_TXN_MARKERS_RESP_TOPIC)
ST_SCHEMA_DEFINE(st_write_txn_marker_result, ST_WRITE_TXN_MARKER_RESULT)
ST_SCHEMA_DEFINE(st_write_txn_markers_resp, ST_WRITE_TXN_MARKERS_RESP)
ST_SCHEMA_DEFINE(st_add_partitions_to_txn_topic, ST_ADD_PARTITIONS_TO_TXN_TOPIC)
ST_SCHEMA_DEFINE(st_add_partitions_to_txn_txn, ST_ADD_PARTITIONS_TO_TXN_TXN)
ST_SCHEMA_DEFINE(st_add_partitions_to_txn_req, ST_ADD_PARTITIONS_TO_TXN_REQ)
ST_SCHEMA_DEFINE(st_add_partitions_to_txn_part_result, ST_ADD_PARTITIONS_TO_TXN_PART_RESULT)
ST_SCHEMA_DEFINE(st_add_partitions_to_txn_topic_result, ST_ADD_PARTITIONS_TO_TXN_TOPIC_RESULT)
ST_SCHEMA_DEFINE(st_add_partitions_to_txn_result, ST_ADD_PARTITIONS_TO_TXN_RESULT)
ST_SCHEMA_DEFINE(st_add_partitions_to_txn_resp, ST_ADD_PARTITIONS_TO_TXN_RESP)
ST_SCHEMA_DEFINE(st_add_offsets_to_txn_req, ST_ADD_OFFSETS_TO_TXN_REQ)
ST_SCHEMA_DEFINE(st_txn_simple_resp, ST_TXN_SIMPLE_RESP)
ST_SCHEMA_DEFINE(st_end_txn_req, ST_END_TXN_REQ)
ST_SCHEMA_DEFINE(st_describe_transactions_req, ST_DESCRIBE_TRANSACTIONS_REQ)
ST_SCHEMA_DEFINE(st_txn_topic_data, ST_TXN_TOPIC_DATA)
ST_SCHEMA_DEFINE(st_described_txn, ST_DESCRIBED_TXN)
ST_SCHEMA_DEFINE(st_describe_transactions_resp, ST_DESCRIBE_TRANSACTIONS_RESP)
ST_SCHEMA_DEFINE(st_list_transactions_req, ST_LIST_TRANSACTIONS_REQ)
ST_SCHEMA_DEFINE(st_listed_txn, ST_LISTED_TXN)
ST_SCHEMA_DEFINE(st_list_transactions_resp, ST_LIST_TRANSACTIONS_RESP)


/* key, name, advertised min, min, max, first flexible, request, response.
 * The minimums stay low on purpose: librdkafka turns features on only when
 * our range overlaps the ranges it knows.  Produce is advertised from v0
 * although v0-2 (message sets v0/v1) are refused at decoding: librdkafka
 * before 2.10 compresses with gzip, snappy or lz4 only when the Produce
 * range includes v0, and Kafka 4.0 advertises it for that reason
 * (KAFKA-18659). */
static const st_api_t api_table[] = {
    /* Produce and Fetch are described for every version Kafka 3.7-4.0
     * defines (Produce 0-12, Fetch 0-17: replica state v15, KIP-951's
     * leader hints v16, directory ids v17), so brokers can fetch from each
     * other at versions stratad does not serve yet. */
    {ST_API_PRODUCE, "Produce", 0, 3, 9, 9, &st_produce_req_schema, &st_produce_resp_schema, 0,
     12},
    {ST_API_FETCH, "Fetch", 4, 4, 12, 12, &st_fetch_req_schema, &st_fetch_resp_schema, 0, 17},
    {ST_API_LIST_OFFSETS, "ListOffsets", 1, 1, 9, 6, &st_list_offsets_req_schema,
     &st_list_offsets_resp_schema, 1, 9},
    /* Metadata from v0: kafka-python's version probe and Sarama's admin
     * calls (DescribeCluster, ListTopics) send v0, which is why Kafka 4.0
     * kept versions 0-3 (KAFKA-18648). */
    {ST_API_METADATA, "Metadata", 0, 0, 12, 9, &st_metadata_req_schema, &st_metadata_resp_schema, 0,
     12},
    {ST_API_API_VERSIONS, "ApiVersions", 0, 0, 3, 3, &st_api_versions_req_schema,
     &st_api_versions_resp_schema, 0, 3},
    {ST_API_CREATE_TOPICS, "CreateTopics", 0, 0, 7, 5, &st_create_topics_req_schema,
     &st_create_topics_resp_schema, 0, 7},
    {ST_API_DELETE_TOPICS, "DeleteTopics", 0, 0, 6, 4, &st_delete_topics_req_schema,
     &st_delete_topics_resp_schema, 0, 6},
    {ST_API_DELETE_RECORDS, "DeleteRecords", 0, 0, 2, 2, &st_delete_records_req_schema,
     &st_delete_records_resp_schema, 0, 2},
    /* Idempotent producers (KIP-98, KIP-360). */
    {ST_API_INIT_PRODUCER_ID, "InitProducerId", 0, 0, 5, 2, &st_init_producer_id_req_schema,
     &st_init_producer_id_resp_schema, 0, 5},
    {ST_API_DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0, 0, 0,
     &st_describe_producers_req_schema, &st_describe_producers_resp_schema, 0, 0},
    /* Transactions (KIP-98): a coordinator's markers to partition leaders. */
    {ST_API_WRITE_TXN_MARKERS, "WriteTxnMarkers", 0, 0, 1, 1, &st_write_txn_markers_req_schema,
     &st_write_txn_markers_resp_schema, 0, 1},
    /* The transaction coordinator (broker/txn). */
    {ST_API_ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 0, 5, 3,
     &st_add_partitions_to_txn_req_schema, &st_add_partitions_to_txn_resp_schema, 0, 5},
    {ST_API_ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 0, 3, 3, &st_add_offsets_to_txn_req_schema,
     &st_txn_simple_resp_schema, 0, 3},
    {ST_API_END_TXN, "EndTxn", 0, 0, 3, 3, &st_end_txn_req_schema, &st_txn_simple_resp_schema, 0,
     3},
    {ST_API_DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0, 0, 0,
     &st_describe_transactions_req_schema, &st_describe_transactions_resp_schema, 0, 0},
    {ST_API_LIST_TRANSACTIONS, "ListTransactions", 0, 0, 1, 0, &st_list_transactions_req_schema,
     &st_list_transactions_resp_schema, 0, 1},
    {ST_API_DESCRIBE_CONFIGS, "DescribeConfigs", 0, 0, 4, 4, &st_describe_configs_req_schema,
     &st_describe_configs_resp_schema, 0, 4},
    {ST_API_ALTER_CONFIGS, "AlterConfigs", 0, 0, 2, 2, &st_alter_configs_req_schema,
     &st_alter_configs_resp_schema, 0, 2},
    {ST_API_CREATE_PARTITIONS, "CreatePartitions", 0, 0, 3, 2, &st_create_partitions_req_schema,
     &st_create_partitions_resp_schema, 0, 3},
    {ST_API_ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 0, 0, 0,
     &st_reassign_req_schema, &st_reassign_resp_schema, 0, 0},
    {ST_API_LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0, 0, 0,
     &st_list_reassign_req_schema, &st_list_reassign_resp_schema, 0, 0},
    {ST_API_INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 0, 1, 1,
     &st_incr_alter_configs_req_schema, &st_alter_configs_resp_schema, 0, 1},
    /* SASL (KIP-152): the handshake is served from v1 only, where every
     * token is framed as a SaslAuthenticate request (v0's raw tokens are
     * not); v0 is advertised all the same because librdkafka enables SASL
     * only when the range it sees includes 0 (it then sends v1). */
    {ST_API_SASL_HANDSHAKE, "SaslHandshake", 0, 1, 1, ST_VMAX + 1, &st_sasl_handshake_req_schema,
     &st_sasl_handshake_resp_schema, 0, 1},
    {ST_API_SASL_AUTHENTICATE, "SaslAuthenticate", 0, 0, 2, 2, &st_sasl_authenticate_req_schema,
     &st_sasl_authenticate_resp_schema, 0, 2},
    /* SCRAM credentials (KIP-554), kept in the metadata log */
    {ST_API_DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0, 0, 0,
     &st_describe_scram_req_schema, &st_describe_scram_resp_schema, 0, 0},
    {ST_API_ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0, 0, 0,
     &st_alter_scram_req_schema, &st_alter_scram_resp_schema, 0, 0},
    /* ACLs (KIP-140 pattern types from v1), kept in the metadata log */
    {ST_API_DESCRIBE_ACLS, "DescribeAcls", 0, 0, 3, 2, &st_describe_acls_req_schema,
     &st_describe_acls_resp_schema, 0, 3},
    {ST_API_CREATE_ACLS, "CreateAcls", 0, 0, 3, 2, &st_create_acls_req_schema,
     &st_create_acls_resp_schema, 0, 3},
    {ST_API_DELETE_ACLS, "DeleteAcls", 0, 0, 3, 2, &st_delete_acls_req_schema,
     &st_delete_acls_resp_schema, 0, 3},
    {ST_API_DESCRIBE_CLUSTER, "DescribeCluster", 0, 0, 2, 0, &st_describe_cluster_req_schema,
     &st_describe_cluster_resp_schema, 0, 2},
    {ST_API_DESCRIBE_TOPIC_PARTITIONS, "DescribeTopicPartitions", 0, 0, 0, 0, &st_dtp_req_schema,
     &st_dtp_resp_schema, 0, 0},
    {ST_API_DESCRIBE_LOG_DIRS, "DescribeLogDirs", 0, 0, 4, 2, &st_describe_log_dirs_req_schema,
     &st_describe_log_dirs_resp_schema, 0, 4},
    /* Consumer groups.  Minimums stay at 0 as Kafka 3.x advertises them:
     * librdkafka 2.0.2 needs OffsetCommit to overlap 1-2 and OffsetFetch to
     * include 1, and enables lz4 only when FindCoordinator v0 is listed. */
    {ST_API_OFFSET_COMMIT, "OffsetCommit", 0, 0, 8, 8, &st_offset_commit_req_schema,
     &st_offset_commit_resp_schema, 0, 8},
    {ST_API_OFFSET_FETCH, "OffsetFetch", 0, 0, 8, 6, &st_offset_fetch_req_schema,
     &st_offset_fetch_resp_schema, 0, 8},
    {ST_API_FIND_COORDINATOR, "FindCoordinator", 0, 0, 4, 3, &st_find_coordinator_req_schema,
     &st_find_coordinator_resp_schema, 0, 4},
    {ST_API_JOIN_GROUP, "JoinGroup", 0, 0, 9, 6, &st_join_group_req_schema,
     &st_join_group_resp_schema, 0, 9},
    {ST_API_HEARTBEAT, "Heartbeat", 0, 0, 4, 4, &st_heartbeat_req_schema,
     &st_heartbeat_resp_schema, 0, 4},
    {ST_API_LEAVE_GROUP, "LeaveGroup", 0, 0, 5, 4, &st_leave_group_req_schema,
     &st_leave_group_resp_schema, 0, 5},
    {ST_API_SYNC_GROUP, "SyncGroup", 0, 0, 5, 4, &st_sync_group_req_schema,
     &st_sync_group_resp_schema, 0, 5},
    {ST_API_DESCRIBE_GROUPS, "DescribeGroups", 0, 0, 5, 5, &st_describe_groups_req_schema,
     &st_describe_groups_resp_schema, 0, 5},
    {ST_API_LIST_GROUPS, "ListGroups", 0, 0, 5, 3, &st_list_groups_req_schema,
     &st_list_groups_resp_schema, 0, 5},
    {ST_API_DELETE_GROUPS, "DeleteGroups", 0, 0, 2, 2, &st_delete_groups_req_schema,
     &st_delete_groups_resp_schema, 0, 2},
    {ST_API_OFFSET_DELETE, "OffsetDelete", 0, 0, 0, ST_VMAX + 1, &st_offset_delete_req_schema,
     &st_offset_delete_resp_schema, 0, 0},
    /* Transactions' offsets (KIP-98, KIP-447), served by the group
     * coordinator. */
    {ST_API_TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 0, 3, 3, &st_txn_offset_commit_req_schema,
     &st_txn_offset_commit_resp_schema, 0, 3},
    /* The cluster's broker-to-broker and controller APIs, described for
     * the outbound client at every version Kafka 3.7-4.0 defines.  Those
     * marked (0, -1) are not served: until a handler exists stratad treats
     * their keys as unknown and advertises none of them.  The metadata
     * quorum's (Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum,
     * FetchSnapshot), the brokers' lifecycle (BrokerRegistration,
     * BrokerHeartbeat), ElectLeaders, AlterPartition and
     * OffsetForLeaderEpoch are served. */
    {ST_API_OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 0, 0, 4, 4,
     &st_offset_for_leader_epoch_req_schema, &st_offset_for_leader_epoch_resp_schema, 0, 4},
    {ST_API_ELECT_LEADERS, "ElectLeaders", 0, 0, 2, 2, &st_elect_leaders_req_schema,
     &st_elect_leaders_resp_schema, 0, 2},
    {ST_API_VOTE, "Vote", 0, 0, 2, 0, &st_vote_req_schema, &st_vote_resp_schema, 0, 2},
    {ST_API_BEGIN_QUORUM_EPOCH, "BeginQuorumEpoch", 0, 0, 1, 1, &st_begin_quorum_epoch_req_schema,
     &st_begin_quorum_epoch_resp_schema, 0, 1},
    {ST_API_END_QUORUM_EPOCH, "EndQuorumEpoch", 0, 0, 1, 1, &st_end_quorum_epoch_req_schema,
     &st_end_quorum_epoch_resp_schema, 0, 1},
    {ST_API_DESCRIBE_QUORUM, "DescribeQuorum", 0, 0, 2, 0, &st_describe_quorum_req_schema,
     &st_describe_quorum_resp_schema, 0, 2},
    {ST_API_ALTER_PARTITION, "AlterPartition", 0, 0, 3, 0, &st_alter_partition_req_schema,
     &st_alter_partition_resp_schema, 0, 3},
    {ST_API_FETCH_SNAPSHOT, "FetchSnapshot", 0, 0, 1, 0, &st_fetch_snapshot_req_schema,
     &st_fetch_snapshot_resp_schema, 0, 1},
    {ST_API_BROKER_REGISTRATION, "BrokerRegistration", 0, 0, 4, 0,
     &st_broker_registration_req_schema, &st_broker_registration_resp_schema, 0, 4},
    {ST_API_BROKER_HEARTBEAT, "BrokerHeartbeat", 0, 0, 1, 0, &st_broker_heartbeat_req_schema,
     &st_broker_heartbeat_resp_schema, 0, 1},
    {ST_API_ALLOCATE_PRODUCER_IDS, "AllocateProducerIds", 0, 0, 0, 0,
     &st_allocate_producer_ids_req_schema, &st_allocate_producer_ids_resp_schema, 0, 0},
};

const st_api_t *st_api_lookup(int16_t key) {
    for (size_t i = 0; i < ST_ARRAY_SIZE(api_table); i++)
        if (api_table[i].key == key) return &api_table[i];
    return NULL;
}

const st_api_t *st_api_at(size_t i) { return i < ST_ARRAY_SIZE(api_table) ? &api_table[i] : NULL; }

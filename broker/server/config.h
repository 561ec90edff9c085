/*
 * config.h - the broker's settings and the per-topic settings, each from one
 * descriptor table (Kafka's property names).
 */
#ifndef ST_SERVER_CONFIG_H
#define ST_SERVER_CONFIG_H

#include "log.h"
#include "net.h"
#include "st_base.h"

/* replica.selector.class's one value (Kafka's class name) */
#define ST_RACK_AWARE_SELECTOR "org.apache.kafka.common.replica.RackAwareReplicaSelector"

typedef struct st_broker_config {
    int32_t node_id;
    char *process_roles;
    char *controller_quorum_voters;
    char *controller_quorum_bootstrap_servers;
    char *controller_listener_names;
    char *listener_security_protocol_map;
    char *broker_rack;
    char *replica_selector_class;
    char *cluster_id;
    int32_t broker_heartbeat_interval_ms;
    int32_t broker_session_timeout_ms;
    int auto_leader_rebalance_enable;
    int64_t leader_imbalance_check_interval_seconds;
    int32_t leader_imbalance_per_broker_percentage;
    char *listeners;
    char *advertised_listeners;
    char *inter_broker_listener_name;
    char *log_dirs;
    int32_t num_network_threads;
    int32_t num_io_threads;                  /* request workers (validation, recompression) */
    int32_t message_decompression_max_ratio; /* x max.message.bytes: inflated records bound */
    char *compression_type;                  /* default compression.type of topics */
    int32_t socket_request_max_bytes;
    int64_t connections_max_idle_ms;
    int32_t max_connections;
    int32_t max_connections_per_ip;
    char *max_connections_per_ip_overrides;
    int64_t queued_max_request_bytes;
    int32_t num_partitions;
    int32_t default_replication_factor;
    int auto_create_topics_enable;
    int delete_topic_enable;
    int32_t min_insync_replicas;
    int64_t log_segment_bytes;
    int64_t log_roll_ms;
    int64_t log_retention_ms;
    int64_t log_retention_bytes;
    int64_t log_retention_check_interval_ms;
    int64_t producer_id_expiration_ms;
    int64_t producer_id_expiration_check_interval_ms;
    int32_t log_index_interval_bytes;
    int32_t log_index_size_max_bytes;
    int32_t message_max_bytes;
    char *log_message_timestamp_type;
    int64_t log_message_timestamp_before_max_ms;
    int64_t log_message_timestamp_after_max_ms;
    char *log_cleanup_policy;
    int64_t log_cleaner_delete_retention_ms;
    int64_t log_cleaner_min_compaction_lag_ms;
    double log_cleaner_min_cleanable_ratio;
    int64_t log_flush_interval_ms;
    int64_t log_flush_offset_checkpoint_interval_ms;
    int log_flush_on_ack;
    int64_t file_delete_delay_ms;
    int unclean_leader_election_enable;
    /* replication (the follower's fetchers, the leader's ISR) */
    int32_t num_replica_fetchers;
    int32_t replica_fetch_max_bytes;
    int32_t replica_fetch_response_max_bytes;
    int32_t replica_fetch_min_bytes;
    int32_t replica_fetch_wait_max_ms;
    int32_t replica_fetch_backoff_ms;
    int64_t replica_lag_time_max_ms;
    int64_t metadata_log_segment_bytes;
    char *logger_level;
    char *logger_debug;
    /* tiered storage */
    int remote_log_storage_system_enable;
    int log_remote_storage_enable;
    int64_t log_local_retention_ms;
    int64_t log_local_retention_bytes;
    int64_t remote_log_manager_task_interval_ms;
    int32_t remote_log_manager_copier_threads;
    int64_t remote_log_manager_copy_max_bytes_per_second;
    int64_t remote_log_manager_fetch_max_bytes_per_second;
    int64_t remote_log_manager_task_retry_backoff_ms;
    int64_t remote_log_manager_task_retry_backoff_max_ms;
    double remote_log_manager_task_retry_jitter;
    int64_t remote_log_orphan_min_age_ms;
    int64_t remote_log_fetch_chunk_bytes;
    char *remote_log_cache_dir;
    int64_t remote_log_cache_size_bytes;
    int64_t remote_log_cache_memory_bytes;
    int64_t remote_log_fetch_yield_latency_ms;
    int64_t remote_log_fetch_yield_min_bytes_per_second;
    int32_t remote_log_fetch_readahead_chunks;
    int64_t remote_list_offsets_request_timeout_ms;
    int64_t remote_log_index_file_cache_total_size_bytes;
    /* consumer groups, committed offsets and the log cleaner */
    int32_t offsets_topic_num_partitions;
    int32_t offsets_topic_replication_factor;
    int32_t offsets_topic_segment_bytes;
    int32_t transaction_state_log_num_partitions;
    int32_t transaction_state_log_replication_factor;
    int32_t transaction_state_log_segment_bytes;
    int32_t transaction_state_log_min_isr;
    int32_t transaction_max_timeout_ms;
    int64_t transactional_id_expiration_ms;
    int32_t transaction_abort_timed_out_transaction_cleanup_interval_ms;
    int transaction_partition_verification_enable;
    int32_t offsets_retention_minutes;
    int64_t offsets_retention_check_interval_ms;
    int32_t offsets_load_buffer_size;
    int32_t offset_metadata_max_bytes;
    int32_t group_min_session_timeout_ms;
    int32_t group_max_session_timeout_ms;
    int32_t group_initial_rebalance_delay_ms;
    int32_t group_max_size;
    int log_cleaner_enable;
    int64_t log_cleaner_backoff_ms;
    int64_t log_cleaner_dedupe_buffer_size;
    int64_t log_cleaner_io_max_bytes_per_second;
    /* many partitions */
    int32_t log_max_open_files;
    int64_t log_flush_interval_messages;
    int64_t log_cleaner_max_compaction_lag_ms;
    int32_t max_broker_partitions;
} st_broker_config_t;

/* A topic's settings: every field always holds the effective value (the
 * topic's override, else the broker's default). */
typedef struct st_topic_config {
    char *cleanup_policy;
    int64_t retention_ms;
    int64_t retention_bytes;
    int64_t segment_bytes;
    int64_t segment_ms;
    int32_t segment_index_bytes;
    int32_t index_interval_bytes;
    int32_t max_message_bytes;
    char *message_timestamp_type;
    int64_t message_timestamp_before_max_ms;
    int64_t message_timestamp_after_max_ms;
    int64_t message_timestamp_difference_max_ms;
    int32_t min_insync_replicas;
    int64_t delete_retention_ms;
    int64_t min_compaction_lag_ms;
    double min_cleanable_dirty_ratio;
    char *compression_type;
    int64_t file_delete_delay_ms;
    int unclean_leader_election_enable;
    int remote_storage_enable;
    int64_t local_retention_ms;
    int64_t local_retention_bytes;
    int64_t flush_messages;
    int64_t flush_ms;
    int64_t max_compaction_lag_ms;
    int remote_log_copy_disable;      /* KIP-950 */
    int remote_log_delete_on_disable; /* KIP-950 */
    int read_replica;                 /* strata.remote.read.replica */
    char *read_replica_location;      /* ... .location ("": this broker's store) */
} st_topic_config_t;

extern const st_cfg_table_t st_broker_config_table;
extern const st_cfg_table_t st_topic_config_table;
/* For topic row i, the broker setting that supplies its default (NULL when
 * the topic setting has a fixed default). */
const char *st_topic_config_synonym(size_t i);

/* Defaults, then the file, then each "key=value" override.  Extra tables
 * (the object store's) share the file.  err names the offending key. */
st_err_t st_broker_config_load(st_broker_config_t *cfg, const char *path, char **overrides,
                               int noverrides, const st_cfg_bind_t *extra, size_t nextra,
                               char *err, size_t errlen);
void st_broker_config_fini(st_broker_config_t *cfg);

/* listeners / advertised.listeners: "NAME://host:port,..." */
st_err_t st_parse_listeners(const char *text, st_listener_spec_t **out, int *n, char *err,
                            size_t errlen);

/* ---- the cluster: roles, the controller quorum, listener names ----------
 *
 * Kafka's KRaft settings, checked together as KafkaConfig checks them
 * (cluster.c).  A node with none of them set is a combined broker and
 * controller that is the whole quorum, as easy to start as ever.
 */
enum { ST_ROLE_BROKER = 1, ST_ROLE_CONTROLLER = 2 };

typedef struct st_voter {
    int32_t id;
    char host[256];
    int port;
} st_voter_t;

typedef struct st_cluster_config {
    int roles;            /* ST_ROLE_* */
    st_voter_t *voters;   /* controller.quorum.voters, in the order given */
    int nvoters;          /* 0: a quorum of one, this node */
    st_voter_t *bootstrap; /* controller.quorum.bootstrap.servers (id -1) */
    int nbootstrap;
    char **controller_listeners; /* controller.listener.names */
    int ncontroller_listeners;
} st_cluster_config_t;

/* Parses and checks process.roles, controller.quorum.voters,
 * controller.quorum.bootstrap.servers, controller.listener.names,
 * listener.security.protocol.map and cluster.id against node.id and the
 * listeners; err names the key and what is wrong with it. */
st_err_t st_cluster_config_parse(const st_broker_config_t *cfg, st_cluster_config_t *out,
                                 char *err, size_t errlen);
void st_cluster_config_fini(st_cluster_config_t *cc);
/* Security protocols (listener.security.protocol.map) */
typedef enum st_secproto {
    ST_SECPROTO_PLAINTEXT = 0,
    ST_SECPROTO_SSL = 1,
    ST_SECPROTO_SASL_PLAINTEXT = 2,
    ST_SECPROTO_SASL_SSL = 3
} st_secproto_t;
/* The protocol listener.security.protocol.map gives a listener name, or -1. */
int st_listener_protocol(const st_broker_config_t *cfg, const char *name);
static inline int st_secproto_tls(int p) { return p == ST_SECPROTO_SSL || p == ST_SECPROTO_SASL_SSL; }
static inline int st_secproto_sasl(int p) {
    return p == ST_SECPROTO_SASL_PLAINTEXT || p == ST_SECPROTO_SASL_SSL;
}
/* 1 when a listener of that name carries controller traffic. */
int st_cluster_is_controller_listener(const st_cluster_config_t *cc, const char *name);
/* A broker-only node given controller.quorum.bootstrap.servers: the
 * voters (ids and controller listeners) from the first bootstrap server
 * whose DescribeQuorum v2 names them, asking again for up to wait_ms;
 * fills cc->voters.  Blocking: at start-up, before any loop runs. */
st_err_t st_cluster_discover_voters(st_cluster_config_t *cc, int32_t node_id, int64_t wait_ms,
                                    const st_client_security_t *sec, char *err, size_t errlen);
/* "id@host:port,..." ; on error err says which entry and why. */
st_err_t st_parse_voters(const char *text, st_voter_t **out, int *n, char *err, size_t errlen);

/* log.dirs as an array (caller frees with st_free_strv). */
char **st_split_csv(const char *text, int *n);
void st_free_strv(char **v, int n);

/* Effective topic config: broker defaults, then overrides (name/value
 * pairs).  Returns INVALID_CONFIG with a reason for a bad override. */
typedef struct st_kv {
    char *name;
    char *value;
} st_kv_t;

/* CreateTopics configs that are no topic config: `strata topics restore`
 * recreating a topic from the bucket asks for the topic id it had (the
 * bucket's prefix holds it) and a first leader epoch above the ones its
 * remote manifests were written at (or the new leader would be fenced
 * by them).  The controller takes them out of the configs; the broker
 * that receives the request allows them to a principal with ALTER on the
 * cluster only. */
#define ST_RESTORE_TOPIC_ID_CONFIG "strata.restore.topic.id"
#define ST_RESTORE_LEADER_EPOCH_CONFIG "strata.restore.leader.epoch"
#define ST_RESTORE_CONFIG_PREFIX "strata.restore."

st_err_t st_topic_config_build(const st_broker_config_t *b, const st_kv_t *overrides, int n,
                               st_topic_config_t *out, char *err, size_t errlen);
void st_topic_config_fini(st_topic_config_t *t);
/* Kafka's rules for a change of a topic's tiering settings (KIP-950),
 * old NULL for a new topic: a tiered topic is switched off
 * (remote.storage.enable true -> false) only with
 * remote.log.delete.on.disable=true in the same change, and with
 * remote.log.copy.disable the local retention bounds are -2 or the total
 * ones.  strata.remote.read.replica is set at creation only, with
 * remote.storage.enable=true and uploads on (the source cluster uploads).
 * INVALID_CONFIG with Kafka's message (or ours) in err otherwise. */
st_err_t st_topic_config_check_change(const st_topic_config_t *old, const st_topic_config_t *next,
                                      char *err, size_t errlen);
void st_topic_config_to_log(const st_topic_config_t *t, st_log_config_t *out);

/* The README's configuration reference (markdown). */
void st_config_doc(FILE *out, const st_cfg_table_t *extra, const char *const *titles,
                   size_t nextra);

#endif /* ST_SERVER_CONFIG_H */

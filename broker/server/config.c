/*
 * config.c - the broker and topic descriptor tables, listener parsing and
 * effective topic configuration.
 *
 * Topic settings take their defaults from broker settings (Kafka's
 * synonyms: retention.ms <- log.retention.ms, ...).  A topic setting with
 * an override is DYNAMIC_TOPIC_CONFIG; without one it reports the broker's
 * value.
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>

#define BROW(name, type, field, def, min, max, validate, dynamic, doc)                  \
    {name, type, offsetof(st_broker_config_t, field), def, min, max, validate, dynamic, doc}
#define TROW(name, type, field, min, max, validate, doc)                                \
    {name, type, offsetof(st_topic_config_t, field), NULL, min, max, validate, 1, doc}

static int v_timestamp_type(const char *v, char *why, size_t n) {
    if (!strcmp(v, "CreateTime") || !strcmp(v, "LogAppendTime")) return 0;
    snprintf(why, n, "must be CreateTime or LogAppendTime");
    return 1;
}

static int v_cleanup_policy(const char *v, char *why, size_t n) {
    if (!strcmp(v, "delete") || !strcmp(v, "compact") || !strcmp(v, "compact,delete") ||
        !strcmp(v, "delete,compact"))
        return 0;
    snprintf(why, n, "must be delete, compact or compact,delete");
    return 1;
}

static int v_compression_type(const char *v, char *why, size_t n) {
    st_batch_target_t t;
    if (st_batch_target_parse(v, &t) == 0) return 0;
    snprintf(why, n, "must be producer, uncompressed, gzip, snappy, lz4 or zstd");
    return 1;
}

static int v_store_location(const char *v, char *why, size_t n) {
    if (!*v || !strncmp(v, "s3://", 5) || !strncmp(v, "file:///", 8)) return 0;
    snprintf(why, n, "must be empty (this broker's own bucket location), s3://BUCKET/PREFIX or "
             "file:///ROOT");
    return 1;
}

static int v_listeners(const char *v, char *why, size_t n) {
    st_listener_spec_t *l = NULL;
    int cnt = 0;
    char err[256];
    if (!*v) return 0;
    if (st_parse_listeners(v, &l, &cnt, err, sizeof err)) {
        snprintf(why, n, "%s", err);
        return 1;
    }
    free(l);
    return 0;
}

static int v_max_connections(const char *v, char *why, size_t n) {
    /* Kafka takes 0, which leaves its acceptor waiting for ever */
    if (strcmp(v, "0")) return 0;
    snprintf(why, n, "must be -1 or at least 1 (0 would accept no connection)");
    return 1;
}

static int v_ip_overrides(const char *v, char *why, size_t n) {
    return st_net_ip_overrides_parse(v, 0, NULL, NULL, why, n) ? 1 : 0;
}

static int v_level(const char *v, char *why, size_t n) {
    st_log_level_t l;
    if (st_log_parse_level(v, &l) == 0) return 0;
    snprintf(why, n, "must be ERROR, WARN, INFO, DEBUG or TRACE");
    return 1;
}

static int v_replica_selector(const char *v, char *why, size_t n) {
    if (!*v || !strcmp(v, ST_RACK_AWARE_SELECTOR)) return 0;
    snprintf(why, n, "must be %s (the one selector there is) or empty (consumers read from leaders)",
             ST_RACK_AWARE_SELECTOR);
    return 1;
}

static int v_nonempty(const char *v, char *why, size_t n) {
    if (*v) return 0;
    snprintf(why, n, "must not be empty");
    return 1;
}

#define I32MAX INT32_MAX
#define I64MAX INT64_MAX

static const st_cfg_desc_t broker_rows[] = {
    BROW("node.id", ST_CFG_INT, node_id, "1", 0, I32MAX, NULL, 0,
         "The id of this broker in the cluster."),
    BROW("process.roles", ST_CFG_STRING, process_roles, "broker,controller", 0, 0, NULL, 0,
         "What this node is: broker, controller, or both (combined mode, comma-separated)."),
    BROW("controller.quorum.voters", ST_CFG_STRING, controller_quorum_voters, "", 0, 0, NULL, 0,
         "The controller quorum: comma-separated id@host:port of every voter (the host and port "
         "of its controller listener). Empty: this node alone is the quorum."),
    BROW("controller.quorum.bootstrap.servers", ST_CFG_STRING,
         controller_quorum_bootstrap_servers, "", 0, 0, NULL, 0,
         "Comma-separated host:port of controllers a node would ask for the quorum's voters "
         "(KIP-853's dynamic quorum). Not served yet: a node given it refuses to start; list "
         "the voters in controller.quorum.voters."),
    BROW("controller.listener.names", ST_CFG_STRING, controller_listener_names, "", 0, 0, NULL,
         0,
         "Comma-separated names of the listeners that carry controller traffic (Raft, broker "
         "registration and heartbeats); they are never given to clients. A controller binds the "
         "first one; a broker reaches the controllers with it."),
    BROW("listener.security.protocol.map", ST_CFG_STRING, listener_security_protocol_map,
         "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", 0, 0, NULL,
         0,
         "Comma-separated NAME:PROTOCOL: the security protocol of each listener name. Only "
         "PLAINTEXT is served so far."),
    BROW("broker.rack", ST_CFG_STRING, broker_rack, "", 0, 0, NULL, 0,
         "The rack (or zone) of this broker, given to clients in Metadata and DescribeCluster. "
         "Empty: none."),
    BROW("replica.selector.class", ST_CFG_STRING, replica_selector_class, "", 0, 0,
         v_replica_selector, 0,
         "Follower fetching (KIP-392): with " ST_RACK_AWARE_SELECTOR ", a leader tells a consumer "
         "that gives its client.rack to read from an in-sync replica in that rack, when the "
         "leader is not in it. Empty: consumers read from leaders."),
    BROW("cluster.id", ST_CFG_STRING, cluster_id, "", 0, 0, NULL, 0,
         "The cluster's id, written to meta.properties in every log dir at first start (what "
         "Kafka's storage format --cluster-id does); a node whose log dirs hold another id "
         "refuses to start. Empty: the id already in meta.properties, else a new random one. "
         "Every node of a multi-node quorum must be given the same id."),
    BROW("broker.heartbeat.interval.ms", ST_CFG_INT, broker_heartbeat_interval_ms, "2000", 1,
         I32MAX, NULL, 0, "How often a broker heartbeats to the active controller."),
    BROW("broker.session.timeout.ms", ST_CFG_INT, broker_session_timeout_ms, "9000", 1, I32MAX,
         NULL, 0,
         "A broker the active controller has not heard from for this long is fenced: it leads "
         "no partition and Metadata does not name it until it heartbeats again."),
    BROW("auto.leader.rebalance.enable", ST_CFG_BOOL, auto_leader_rebalance_enable, "true", 0, 0,
         NULL, 0,
         "The active controller moves leadership back to each partition's preferred replica "
         "(its first) when a broker leads too few of the partitions it prefers."),
    BROW("leader.imbalance.check.interval.seconds", ST_CFG_LONG,
         leader_imbalance_check_interval_seconds, "300", 1, I64MAX, NULL, 0,
         "How often the active controller looks at leader imbalance."),
    BROW("leader.imbalance.per.broker.percentage", ST_CFG_INT,
         leader_imbalance_per_broker_percentage, "10", 0, 100, NULL, 0,
         "A broker is imbalanced when more than this share of the partitions it is preferred "
         "for have another leader."),
    BROW("listeners", ST_CFG_STRING, listeners, "PLAINTEXT://localhost:9092", 0, 0, v_listeners, 0,
         "Where to accept connections: comma-separated NAME://host:port. An empty host binds every "
         "interface; port 0 picks a free port."),
    BROW("advertised.listeners", ST_CFG_STRING, advertised_listeners, "", 0, 0, v_listeners, 0,
         "Addresses given to clients in Metadata; empty means the same as listeners. A client "
         "is given each broker's address for the listener it connected to."),
    BROW("inter.broker.listener.name", ST_CFG_STRING, inter_broker_listener_name, "", 0, 0, NULL,
         0,
         "The listener brokers reach each other on (replica fetchers, the transaction "
         "coordinator's markers): its advertised address is what other brokers connect to. "
         "Empty: the first advertised listener that is not a controller listener."),
    BROW("log.dirs", ST_CFG_STRING, log_dirs, "/tmp/strata-logs", 0, 0, v_nonempty, 0,
         "Comma-separated directories holding partition logs (one broker per directory)."),
    BROW("num.network.threads", ST_CFG_INT, num_network_threads, "2", 1, 64, NULL, 0,
         "I/O threads, each with its own event loop and connections."),
    BROW("num.io.threads", ST_CFG_INT, num_io_threads, "8", 1, 256, NULL, 0,
         "Request worker threads: they validate compressed record batches and recompress them "
         "(compression.type), so no I/O thread ever inflates a payload."),
    BROW("socket.request.max.bytes", ST_CFG_INT, socket_request_max_bytes, "104857600", 64,
         I32MAX, NULL, 0, "The largest request accepted; a larger frame closes the connection."),
    BROW("connections.max.idle.ms", ST_CFG_LONG, connections_max_idle_ms, "600000", -1, I64MAX,
         NULL, 0, "Idle connections are closed after this long (-1: never)."),
    BROW("max.connections", ST_CFG_INT, max_connections, "-1", -1, I32MAX, v_max_connections, 0,
         "The most connections open at once (at least 1); at the limit new connections wait in "
         "the listen queue until one closes. -1 (Strata's default; Kafka's is 2147483647): as many as the "
         "fd limit leaves room for after a quarter of it (at least 128, at most half of what is "
         "free at start-up) is kept for the broker's own files. The soft fd limit is raised to the hard one at start-up."),
    BROW("max.connections.per.ip", ST_CFG_INT, max_connections_per_ip, "2147483647", 0, I32MAX,
         NULL, 0,
         "The most connections from one IP address; a connection beyond it is closed at once. "
         "0 is allowed only with max.connections.per.ip.overrides."),
    BROW("max.connections.per.ip.overrides", ST_CFG_STRING, max_connections_per_ip_overrides, "",
         0, 0, v_ip_overrides, 0,
         "Per-address exceptions to max.connections.per.ip: comma-separated host:count or "
         "ip:count ([ipv6]:count), e.g. hostName:100,127.0.0.1:200; hosts are resolved at "
         "start-up."),
    BROW("queued.max.request.bytes", ST_CFG_LONG, queued_max_request_bytes, "104857600", -1,
         I64MAX, NULL, 0,
         "Bytes of requests being read or waiting for their answer, over all connections, before "
         "reading pauses; one request larger than what is left still gets through, so memory "
         "for requests peaks at this plus socket.request.max.bytes. At least "
         "socket.request.max.bytes, or -1 / 0 for no bound (Kafka's default is -1)."),
    BROW("num.partitions", ST_CFG_INT, num_partitions, "1", 1, 100000, NULL, 0,
         "Partitions of a topic created without a count (auto-created or -1)."),
    BROW("default.replication.factor", ST_CFG_INT, default_replication_factor, "1", 1, 32767,
         NULL, 0, "Replication factor of a topic created without one."),
    BROW("auto.create.topics.enable", ST_CFG_BOOL, auto_create_topics_enable, "true", 0, 0, NULL,
         0, "Create a topic when a client asks Metadata for one that does not exist."),
    BROW("delete.topic.enable", ST_CFG_BOOL, delete_topic_enable, "true", 0, 0, NULL, 0,
         "Allow DeleteTopics."),
    BROW("min.insync.replicas", ST_CFG_INT, min_insync_replicas, "1", 1, I32MAX, NULL, 0,
         "Default for topics: in-sync replicas needed to accept an acks=all write; below it "
         "the high watermark waits and replicas leaving the ISR become eligible leaders."),
    BROW("log.segment.bytes", ST_CFG_LONG, log_segment_bytes, "1073741824", 14, I32MAX, NULL, 0,
         "Default for topics: a segment rolls when it would grow past this size."),
    BROW("log.roll.ms", ST_CFG_LONG, log_roll_ms, "604800000", 1, I64MAX, NULL, 0,
         "Default for topics: a segment rolls when it is this old."),
    BROW("log.retention.ms", ST_CFG_LONG, log_retention_ms, "604800000", -1, I64MAX, NULL, 0,
         "Default for topics: closed segments whose newest record is older are deleted (-1: "
         "forever)."),
    BROW("log.retention.bytes", ST_CFG_LONG, log_retention_bytes, "-1", -1, I64MAX, NULL, 0,
         "Default for topics: oldest closed segments are deleted while a partition is larger "
         "(-1: no limit)."),
    BROW("log.retention.check.interval.ms", ST_CFG_LONG, log_retention_check_interval_ms,
         "300000", 1, I64MAX, NULL, 0, "How often retention is applied."),
    BROW("producer.id.expiration.ms", ST_CFG_LONG, producer_id_expiration_ms, "86400000", 1,
         I64MAX, NULL, 0,
         "A partition forgets an idempotent producer this long after the last timestamp it "
         "wrote, unless it has a transaction open (KIP-360: the producer's next write is then "
         "taken at any sequence)."),
    BROW("producer.id.expiration.check.interval.ms", ST_CFG_LONG,
         producer_id_expiration_check_interval_ms, "600000", 1, I64MAX, NULL, 0,
         "How often expired producer ids are looked for."),
    BROW("log.index.interval.bytes", ST_CFG_INT, log_index_interval_bytes, "4096", 0, I32MAX,
         NULL, 0, "Default for topics: bytes of batches between offset index entries."),
    BROW("log.index.size.max.bytes", ST_CFG_INT, log_index_size_max_bytes, "10485760", 4, I32MAX,
         NULL, 0, "Default for topics: a segment rolls when its offset index reaches this size."),
    BROW("message.max.bytes", ST_CFG_INT, message_max_bytes, "1048588", 0, I32MAX, NULL, 0,
         "Default for topics: the largest record batch accepted."),
    BROW("message.decompression.max.ratio", ST_CFG_INT, message_decompression_max_ratio, "64", 1,
         65536, NULL, 0,
         "A compressed batch's records may inflate to at most this many times its topic's "
         "max.message.bytes (64 MiB for the default); beyond, the batch is refused with "
         "MESSAGE_TOO_LARGE while it is being inflated, so a decompression bomb costs bounded "
         "time, and a Java producer splits the batch and retries."),
    BROW("compression.type", ST_CFG_STRING, compression_type, "producer", 0, 0,
         v_compression_type, 0,
         "Default for topics: producer keeps each batch as the producer compressed it; "
         "uncompressed, gzip, snappy, lz4 or zstd recompress batches in another codec."),
    BROW("log.message.timestamp.type", ST_CFG_STRING, log_message_timestamp_type, "CreateTime",
         0, 0, v_timestamp_type, 0,
         "Default for topics: CreateTime keeps the producer's timestamps, LogAppendTime stamps "
         "the broker's."),
    BROW("log.message.timestamp.before.max.ms", ST_CFG_LONG,
         log_message_timestamp_before_max_ms, "9223372036854775807", 0, I64MAX, NULL, 0,
         "Default for topics: how far in the past a CreateTime timestamp may be."),
    BROW("log.message.timestamp.after.max.ms", ST_CFG_LONG, log_message_timestamp_after_max_ms,
         "9223372036854775807", 0, I64MAX, NULL, 0,
         "Default for topics: how far in the future a CreateTime timestamp may be."),
    BROW("log.cleanup.policy", ST_CFG_STRING, log_cleanup_policy, "delete", 0, 0,
         v_cleanup_policy, 0, "Default for topics: delete, compact or compact,delete."),
    BROW("log.cleaner.delete.retention.ms", ST_CFG_LONG, log_cleaner_delete_retention_ms,
         "86400000", 0, I64MAX, NULL, 0, "Default for topics: how long tombstones are kept."),
    BROW("log.cleaner.min.compaction.lag.ms", ST_CFG_LONG, log_cleaner_min_compaction_lag_ms, "0",
         0, I64MAX, NULL, 0, "Default for topics: records younger than this are not compacted."),
    BROW("log.cleaner.min.cleanable.ratio", ST_CFG_DOUBLE, log_cleaner_min_cleanable_ratio, "0.5",
         0, 1, NULL, 0, "Default for topics: dirty ratio that makes a log eligible for cleaning."),
    BROW("log.flush.interval.ms", ST_CFG_LONG, log_flush_interval_ms, "-1", -1, I64MAX, NULL, 0,
         "Default for topics (flush.ms): fsync a log in the background once this long has passed "
         "since its last fsync (-1: only on roll, shutdown and acks=all with log.flush.on.ack)."),
    BROW("log.flush.offset.checkpoint.interval.ms", ST_CFG_LONG,
         log_flush_offset_checkpoint_interval_ms, "60000", 1, I64MAX, NULL, 0,
         "How often the recovery-point and log-start checkpoints are written."),
    BROW("log.flush.on.ack", ST_CFG_BOOL, log_flush_on_ack, "true", 0, 0, NULL, 0,
         "Acknowledge an acks=all write only after a group-commit fsync that covers it."),
    BROW("file.delete.delay.ms", ST_CFG_LONG, file_delete_delay_ms, "60000", 0, I64MAX, NULL, 0,
         "Default for topics (accepted for compatibility; deleted segments stay readable by "
         "in-flight reads through open descriptors)."),
    BROW("unclean.leader.election.enable", ST_CFG_BOOL, unclean_leader_election_enable, "false",
         0, 0, NULL, 0, "Default for topics: may an out-of-sync replica become leader."),
    BROW("num.replica.fetchers", ST_CFG_INT, num_replica_fetchers, "1", 1, 64, NULL, 0,
         "Fetcher connections a follower opens to each broker it replicates from."),
    BROW("replica.fetch.max.bytes", ST_CFG_INT, replica_fetch_max_bytes, "1048576", 1, I32MAX,
         NULL, 0, "Bytes a follower asks for per partition in one fetch (a larger first batch "
         "still comes whole)."),
    BROW("replica.fetch.response.max.bytes", ST_CFG_INT, replica_fetch_response_max_bytes,
         "10485760", 1, I32MAX, NULL, 0, "Bytes a follower asks for in one fetch in all."),
    BROW("replica.fetch.min.bytes", ST_CFG_INT, replica_fetch_min_bytes, "1", 1, I32MAX, NULL, 0,
         "Bytes a follower's fetch waits for on the leader (up to replica.fetch.wait.max.ms)."),
    BROW("replica.fetch.wait.max.ms", ST_CFG_INT, replica_fetch_wait_max_ms, "500", 0, I32MAX,
         NULL, 0, "How long the leader holds a follower's fetch that has nothing new."),
    BROW("replica.fetch.backoff.ms", ST_CFG_INT, replica_fetch_backoff_ms, "1000", 0, I32MAX,
         NULL, 0, "How long a follower waits after a failed fetch before the next."),
    BROW("replica.lag.time.max.ms", ST_CFG_LONG, replica_lag_time_max_ms, "30000", 1, I32MAX,
         NULL, 0, "A follower that has not caught up with the leader's log end for this long "
         "leaves the ISR."),
    BROW("metadata.log.segment.bytes", ST_CFG_LONG, metadata_log_segment_bytes, "8388608", 14,
         I32MAX, NULL, 0, "Segment size of the __cluster_metadata log."),
    BROW("remote.log.storage.system.enable", ST_CFG_BOOL, remote_log_storage_system_enable,
         "false", 0, 0, NULL, 0,
         "Tiered storage: upload closed segments of topics with remote.storage.enable to the "
         "object store (objectstore.*) and serve old offsets from it."),
    BROW("log.remote.storage.enable", ST_CFG_BOOL, log_remote_storage_enable, "false", 0, 0, NULL,
         0, "Default for topics: remote.storage.enable (Strata's; Kafka has no broker default)."),
    BROW("log.local.retention.ms", ST_CFG_LONG, log_local_retention_ms, "-2", -2, I64MAX, NULL, 0,
         "Default for tiered topics: how long segments stay on local disk once in the bucket "
         "(-2: as retention.ms)."),
    BROW("log.local.retention.bytes", ST_CFG_LONG, log_local_retention_bytes, "-2", -2, I64MAX,
         NULL, 0,
         "Default for tiered topics: local bytes kept once in the bucket (-2: as retention.bytes)."),
    BROW("remote.log.manager.task.interval.ms", ST_CFG_LONG, remote_log_manager_task_interval_ms,
         "30000", 10, I64MAX, NULL, 0, "How often each tiered partition uploads and applies "
         "remote retention."),
    BROW("remote.log.manager.copier.thread.pool.size", ST_CFG_INT,
         remote_log_manager_copier_threads, "2", 1, 64, NULL, 0,
         "Partitions uploading (and applying remote retention) at once."),
    BROW("remote.log.manager.copy.max.bytes.per.second", ST_CFG_LONG,
         remote_log_manager_copy_max_bytes_per_second, "9223372036854775807", 1, I64MAX, NULL, 0,
         "Upload byte-rate quota (KIP-956)."),
    BROW("remote.log.manager.fetch.max.bytes.per.second", ST_CFG_LONG,
         remote_log_manager_fetch_max_bytes_per_second, "9223372036854775807", 1, I64MAX, NULL, 0,
         "Download byte-rate quota for remote reads (KIP-956)."),
    BROW("remote.log.manager.task.retry.backoff.ms", ST_CFG_LONG,
         remote_log_manager_task_retry_backoff_ms, "500", 1, I64MAX, NULL, 0,
         "First wait before a segment whose upload failed is tried again; it doubles on each "
         "failure of that segment."),
    BROW("remote.log.manager.task.retry.backoff.max.ms", ST_CFG_LONG,
         remote_log_manager_task_retry_backoff_max_ms, "30000", 1, I64MAX, NULL, 0,
         "Longest wait before a segment whose upload keeps failing is tried again."),
    BROW("remote.log.manager.task.retry.jitter", ST_CFG_DOUBLE, remote_log_manager_task_retry_jitter,
         "0.2", 0, 1, NULL, 0, "Random part of the retry wait, as a fraction of it (up or down)."),
    BROW("remote.log.orphan.min.age.ms", ST_CFG_LONG, remote_log_orphan_min_age_ms, "600000", 0,
         I64MAX, NULL, 0,
         "The orphan sweep deletes an object of a partition's prefix that no manifest names only "
         "once it is this old, so a leader never deletes an upload another broker (a leader just "
         "deposed) still has in flight. Strata's setting."),
    BROW("remote.log.fetch.chunk.bytes", ST_CFG_LONG, remote_log_fetch_chunk_bytes, "4194304",
         65536, 1073741824, NULL, 0, "Remote reads fetch segments in ranged GETs of this size."),
    BROW("remote.log.cache.dir", ST_CFG_STRING, remote_log_cache_dir, "", 0, 0, NULL, 0,
         "Directory of the chunk cache (empty: remote-cache under the first log dir)."),
    BROW("remote.log.cache.size.bytes", ST_CFG_LONG, remote_log_cache_size_bytes, "1073741824",
         0, I64MAX, NULL, 0, "Bound of the on-disk chunk cache."),
    BROW("remote.log.fetch.yield.latency.ms", ST_CFG_LONG, remote_log_fetch_yield_latency_ms,
         "5", 0, 60000, NULL, 0,
         "Downloads from the bucket slow down (their rate halved every 100 ms) while a log "
         "flush that acks=all produces wait on takes longer than this, and speed up again as it "
         "recovers (unpaced after 2 s below it); with no live produce they are never paced "
         "(0: never). Strata's setting."),
    BROW("remote.log.fetch.yield.min.bytes.per.second", ST_CFG_LONG,
         remote_log_fetch_yield_min_bytes_per_second, "16777216", 1, I64MAX, NULL, 0,
         "The slowest pace downloads yield down to, and what each calm 100 ms adds back. "
         "Strata's setting."),
    BROW("remote.log.cache.memory.bytes", ST_CFG_LONG, remote_log_cache_memory_bytes, "134217728",
         0, I64MAX, NULL, 0,
         "Bound of the chunks kept in memory: downloads land there once the disk cache is full; "
         "leaving it, a chunk goes on to the disk cache when a second reader or a re-read wants "
         "it or it was fetched ahead and not read yet, and is dropped otherwise, so a long "
         "replay does not churn the disk (0: every chunk to the disk). Strata's setting."),
    BROW("remote.list.offsets.request.timeout.ms", ST_CFG_LONG,
         remote_list_offsets_request_timeout_ms, "30000", 1, I64MAX, NULL, 0,
         "How long a ListOffsets by timestamp may wait on reads from the bucket before "
         "answering REQUEST_TIMED_OUT for the partitions still waiting (KIP-1075)."),
    BROW("remote.log.fetch.readahead.chunks", ST_CFG_INT, remote_log_fetch_readahead_chunks, "8",
         0, 1024, NULL, 0,
         "Chunks fetched ahead of a sequential remote reader, across segment ends."),
    BROW("remote.log.index.file.cache.total.size.bytes", ST_CFG_LONG,
         remote_log_index_file_cache_total_size_bytes, "268435456", 0, I64MAX, NULL, 0,
         "Bound of the downloaded offset indexes kept in memory."),
    BROW("logger.level", ST_CFG_STRING, logger_level, "INFO", 0, 0, v_level, 0,
         "Log level: ERROR, WARN, INFO, DEBUG or TRACE."),
    BROW("logger.debug", ST_CFG_STRING, logger_debug, "", 0, 0, NULL, 0,
         "Subsystems whose DEBUG lines are shown (comma list: net, log, produce, fetch, "
         "controller, ...; all for every one)."),
    /* consumer groups, committed offsets and the log cleaner */
    BROW("offsets.topic.num.partitions", ST_CFG_INT, offsets_topic_num_partitions, "50", 1,
         100000, NULL, 0,
         "Partitions of __consumer_offsets when it is created (on first use); groups are placed "
         "by abs(hash(group.id)) % this count."),
    BROW("offsets.topic.replication.factor", ST_CFG_INT, offsets_topic_replication_factor, "3",
         1, 32767, NULL, 0,
         "Replication factor of __consumer_offsets when it is created, capped by the brokers "
         "alive then."),
    BROW("offsets.topic.segment.bytes", ST_CFG_INT, offsets_topic_segment_bytes, "104857600",
         14, I32MAX, NULL, 0, "segment.bytes of __consumer_offsets when it is created."),
    /* the transaction coordinator (broker/txn) */
    BROW("transaction.state.log.num.partitions", ST_CFG_INT, transaction_state_log_num_partitions,
         "50", 1, 100000, NULL, 0,
         "Partitions of __transaction_state when it is created (on first use); transactional "
         "ids are placed by abs(hash(transactional.id)) % this count."),
    BROW("transaction.state.log.replication.factor", ST_CFG_INT,
         transaction_state_log_replication_factor, "3", 1, 32767, NULL, 0,
         "Replication factor of __transaction_state when it is created, capped by the brokers "
         "alive then."),
    BROW("transaction.state.log.segment.bytes", ST_CFG_INT, transaction_state_log_segment_bytes,
         "104857600", 14, I32MAX, NULL, 0,
         "segment.bytes of __transaction_state when it is created."),
    BROW("transaction.state.log.min.isr", ST_CFG_INT, transaction_state_log_min_isr, "2", 1,
         32767, NULL, 0,
         "min.insync.replicas of __transaction_state when it is created, capped by its "
         "replication factor."),
    BROW("transaction.max.timeout.ms", ST_CFG_INT, transaction_max_timeout_ms, "900000", 1,
         I32MAX, NULL, 0,
         "The longest transaction timeout a producer may ask for (InitProducerId); longer ones "
         "get INVALID_TRANSACTION_TIMEOUT."),
    BROW("transactional.id.expiration.ms", ST_CFG_LONG, transactional_id_expiration_ms,
         "604800000", 1, I64MAX, NULL, 0,
         "A transactional id without a transaction in progress is forgotten (a tombstone in "
         "__transaction_state) this long after its last update."),
    BROW("transaction.abort.timed.out.transaction.cleanup.interval.ms", ST_CFG_INT,
         transaction_abort_timed_out_transaction_cleanup_interval_ms, "10000", 1, I32MAX, NULL,
         0,
         "How often transactions open longer than their timeout are aborted (and expired "
         "transactional ids removed)."),
    BROW("transaction.partition.verification.enable", ST_CFG_BOOL,
         transaction_partition_verification_enable, "true", 0, 0, NULL, 0,
         "KIP-890: before a partition leader appends the first batch of a producer's "
         "transaction, it asks the transaction coordinator whether the partition was added to "
         "that transaction (INVALID_TXN_STATE if not), so a late or stray batch cannot open a "
         "transaction nobody will end."),
    BROW("offsets.retention.minutes", ST_CFG_INT, offsets_retention_minutes, "10080", 1, I32MAX,
         NULL, 0,
         "Committed offsets of a group without members are deleted this long after it became "
         "empty (of a group that only commits, after the commit)."),
    BROW("offsets.retention.check.interval.ms", ST_CFG_LONG, offsets_retention_check_interval_ms,
         "600000", 1, I64MAX, NULL, 0, "How often expired offsets are looked for."),
    BROW("offsets.load.buffer.size", ST_CFG_INT, offsets_load_buffer_size, "5242880", 1, I32MAX,
         NULL, 0, "Bytes read at a time while replaying __consumer_offsets at start."),
    BROW("offset.metadata.max.bytes", ST_CFG_INT, offset_metadata_max_bytes, "4096", 0, I32MAX,
         NULL, 0, "The longest metadata string an offset commit may carry."),
    BROW("group.min.session.timeout.ms", ST_CFG_INT, group_min_session_timeout_ms, "6000", 0,
         I32MAX, NULL, 0, "The shortest session timeout a group member may ask for."),
    BROW("group.max.session.timeout.ms", ST_CFG_INT, group_max_session_timeout_ms, "1800000", 0,
         I32MAX, NULL, 0, "The longest session timeout a group member may ask for."),
    BROW("group.initial.rebalance.delay.ms", ST_CFG_INT, group_initial_rebalance_delay_ms,
         "3000", 0, I32MAX, NULL, 0,
         "How long the first rebalance of an empty group waits for more members (extended "
         "while members keep joining, up to the rebalance timeout)."),
    BROW("group.max.size", ST_CFG_INT, group_max_size, "2147483647", 1, I32MAX, NULL, 0,
         "The most members a group may have."),
    BROW("log.cleaner.enable", ST_CFG_BOOL, log_cleaner_enable, "true", 0, 0, NULL, 0,
         "Run the log cleaner, which compacts topics whose cleanup.policy includes compact."),
    BROW("log.cleaner.backoff.ms", ST_CFG_LONG, log_cleaner_backoff_ms, "15000", 1, I64MAX, NULL,
         0, "How long the cleaner sleeps when no log needs cleaning."),
    BROW("log.cleaner.dedupe.buffer.size", ST_CFG_LONG, log_cleaner_dedupe_buffer_size,
         "134217728", 1048576, I64MAX, NULL, 0,
         "Memory for the key map of a cleaning (24 bytes per key); a log with more distinct "
         "dirty keys is cleaned in several passes."),
    BROW("log.cleaner.io.max.bytes.per.second", ST_CFG_LONG, log_cleaner_io_max_bytes_per_second,
         "9223372036854775807", 1, I64MAX, NULL, 0,
         "Bytes per second the cleaner may read and write (the default: no limit)."),
    /* many partitions (issue 9) */
    BROW("log.max.open.files", ST_CFG_INT, log_max_open_files, "1024", 4, I32MAX, NULL, 0,
         "Segment files (.log, .index, .timeindex) kept open at most, the least recently used "
         "closed first (Strata's, as RocksDB's max_open_files); never more than half the "
         "open-file limit (ulimit -n). An idle partition holds no descriptor."),
    BROW("log.flush.interval.messages", ST_CFG_LONG, log_flush_interval_messages,
         "9223372036854775807", 1, I64MAX, NULL, 0,
         "Default for topics (flush.messages): fsync a log once this many records are not yet "
         "synced."),
    BROW("log.cleaner.max.compaction.lag.ms", ST_CFG_LONG, log_cleaner_max_compaction_lag_ms,
         "9223372036854775807", 1, I64MAX, NULL, 0,
         "Default for topics (max.compaction.lag.ms): a compacted log whose oldest uncleaned "
         "record is older is cleaned whatever its dirty ratio (KIP-354)."),
    BROW("max.broker.partitions", ST_CFG_INT, max_broker_partitions, "100000", 1, I32MAX, NULL, 0,
         "The most partition replicas this broker hosts (KIP-578): CreateTopics, "
         "CreatePartitions and topic auto-creation that would place more here answer "
         "POLICY_VIOLATION."),
};

const st_cfg_table_t st_broker_config_table = {broker_rows, ST_ARRAY_SIZE(broker_rows)};

static const st_cfg_desc_t topic_rows[] = {
    TROW("cleanup.policy", ST_CFG_STRING, cleanup_policy, 0, 0, v_cleanup_policy,
         "delete, compact or compact,delete."),
    TROW("retention.ms", ST_CFG_LONG, retention_ms, -1, I64MAX, NULL,
         "Closed segments whose newest record is older are deleted (-1: forever)."),
    TROW("retention.bytes", ST_CFG_LONG, retention_bytes, -1, I64MAX, NULL,
         "Oldest closed segments are deleted while the partition is larger (-1: no limit)."),
    TROW("segment.bytes", ST_CFG_LONG, segment_bytes, 14, I32MAX, NULL,
         "A segment rolls when it would grow past this size."),
    TROW("segment.ms", ST_CFG_LONG, segment_ms, 1, I64MAX, NULL, "A segment rolls when this old."),
    TROW("segment.index.bytes", ST_CFG_INT, segment_index_bytes, 4, I32MAX, NULL,
         "A segment rolls when its offset index reaches this size."),
    TROW("index.interval.bytes", ST_CFG_INT, index_interval_bytes, 0, I32MAX, NULL,
         "Bytes of batches between offset index entries."),
    TROW("max.message.bytes", ST_CFG_INT, max_message_bytes, 0, I32MAX, NULL,
         "The largest record batch accepted."),
    TROW("message.timestamp.type", ST_CFG_STRING, message_timestamp_type, 0, 0, v_timestamp_type,
         "CreateTime or LogAppendTime."),
    TROW("message.timestamp.before.max.ms", ST_CFG_LONG, message_timestamp_before_max_ms, 0,
         I64MAX, NULL, "How far in the past a CreateTime timestamp may be."),
    TROW("message.timestamp.after.max.ms", ST_CFG_LONG, message_timestamp_after_max_ms, 0,
         I64MAX, NULL, "How far in the future a CreateTime timestamp may be."),
    TROW("message.timestamp.difference.max.ms", ST_CFG_LONG, message_timestamp_difference_max_ms,
         0, I64MAX, NULL,
         "Older form of both bounds above; used when they are not set on the topic."),
    TROW("min.insync.replicas", ST_CFG_INT, min_insync_replicas, 1, I32MAX, NULL,
         "In-sync replicas needed to accept an acks=all write; below it the high watermark "
         "waits and replicas leaving the ISR become eligible leaders."),
    TROW("delete.retention.ms", ST_CFG_LONG, delete_retention_ms, 0, I64MAX, NULL,
         "How long tombstones are kept in a compacted topic."),
    TROW("min.compaction.lag.ms", ST_CFG_LONG, min_compaction_lag_ms, 0, I64MAX, NULL,
         "Records younger than this are not compacted."),
    TROW("min.cleanable.dirty.ratio", ST_CFG_DOUBLE, min_cleanable_dirty_ratio, 0, 1, NULL,
         "Dirty ratio that makes a compacted log eligible for cleaning."),
    TROW("compression.type", ST_CFG_STRING, compression_type, 0, 0, v_compression_type,
         "producer keeps each batch as the producer compressed it; uncompressed, gzip, snappy, "
         "lz4 or zstd: the broker rebuilds batches in another codec, on its request workers, as "
         "Kafka does."),
    TROW("file.delete.delay.ms", ST_CFG_LONG, file_delete_delay_ms, 0, I64MAX, NULL,
         "Accepted for compatibility."),
    TROW("unclean.leader.election.enable", ST_CFG_BOOL, unclean_leader_election_enable, 0, 0,
         NULL, "May an out-of-sync replica become leader."),
    TROW("remote.storage.enable", ST_CFG_BOOL, remote_storage_enable, 0, 0, NULL,
         "Tier this topic: closed segments go to the object store and are read back from it. "
         "Back to false only with remote.log.delete.on.disable=true (KIP-950)."),
    TROW("local.retention.ms", ST_CFG_LONG, local_retention_ms, -2, I64MAX, NULL,
         "Tiered: how long segments stay locally once in the bucket (-2: as retention.ms)."),
    TROW("local.retention.bytes", ST_CFG_LONG, local_retention_bytes, -2, I64MAX, NULL,
         "Tiered: local bytes kept once in the bucket (-2: as retention.bytes)."),
    TROW("flush.messages", ST_CFG_LONG, flush_messages, 1, I64MAX, NULL,
         "fsync the log once this many records are not yet synced (by the flusher: an acks=0/1 "
         "answer does not wait for it)."),
    TROW("flush.ms", ST_CFG_LONG, flush_ms, 0, I64MAX, NULL,
         "fsync the log once this long has passed since its last fsync."),
    TROW("max.compaction.lag.ms", ST_CFG_LONG, max_compaction_lag_ms, 1, I64MAX, NULL,
         "Compacted topics: a log whose oldest uncleaned record is older is cleaned whatever "
         "its dirty ratio, and its active segment rolls at this age (KIP-354)."),
    TROW("remote.log.copy.disable", ST_CFG_BOOL, remote_log_copy_disable, 0, 0, NULL,
         "Tiered: no more uploads; the bucket is still read and its retention applied, and "
         "local segments go by retention.ms / retention.bytes (local.retention.* must then be "
         "-2 or the same) (KIP-950)."),
    TROW("remote.log.delete.on.disable", ST_CFG_BOOL, remote_log_delete_on_disable, 0, 0, NULL,
         "Required, in the same change, to set remote.storage.enable=false on a tiered topic: "
         "the topic's remote log is deleted from the bucket and its log start offset moves to "
         "the local log start (KIP-950)."),
    TROW("strata.remote.read.replica", ST_CFG_BOOL, read_replica, 0, 0, NULL,
         "A read replica of a topic another cluster tiers (created by `strata topics restore "
         "--read-replica`, with the source's id): its leader reads the source's manifest again "
         "each remote.log.manager.task.interval.ms and serves every offset it names; produce "
         "and DeleteRecords are refused (INVALID_TOPIC_EXCEPTION) and nothing is written to "
         "the bucket, not even when the topic is deleted. Set at creation only."),
    TROW("strata.remote.read.replica.location", ST_CFG_STRING, read_replica_location, 0, 0,
         v_store_location,
         "A read replica's source: where the other cluster tiers the topic, s3://BUCKET/PREFIX "
         "(its objectstore.s3.bucket and .prefix, reached with this broker's endpoint and "
         "credentials) or file:///ROOT (its objectstore.file.root); empty: this broker's own "
         "bucket location. Set at creation only."),
};

const st_cfg_table_t st_topic_config_table = {topic_rows, ST_ARRAY_SIZE(topic_rows)};

/* Same order as topic_rows. */
static const char *topic_synonyms[] = {
    "log.cleanup.policy",
    "log.retention.ms",
    "log.retention.bytes",
    "log.segment.bytes",
    "log.roll.ms",
    "log.index.size.max.bytes",
    "log.index.interval.bytes",
    "message.max.bytes",
    "log.message.timestamp.type",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms",
    NULL, /* message.timestamp.difference.max.ms: fixed default */
    "min.insync.replicas",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
    "compression.type",
    "file.delete.delay.ms",
    "unclean.leader.election.enable",
    "log.remote.storage.enable",
    "log.local.retention.ms",
    "log.local.retention.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.cleaner.max.compaction.lag.ms",
    NULL, /* remote.log.copy.disable: fixed default */
    NULL, /* remote.log.delete.on.disable: fixed default */
    NULL, /* strata.remote.read.replica: fixed default */
    NULL, /* strata.remote.read.replica.location: fixed default */
};

_Static_assert(ST_ARRAY_SIZE(topic_synonyms) == ST_ARRAY_SIZE(topic_rows),
               "topic_synonyms must follow topic_rows");

const char *st_topic_config_synonym(size_t i) {
    return i < ST_ARRAY_SIZE(topic_synonyms) ? topic_synonyms[i] : NULL;
}

static const char *topic_fixed_default(const char *name) {
    if (!strcmp(name, "message.timestamp.difference.max.ms")) return "9223372036854775807";
    if (!strcmp(name, "remote.log.copy.disable")) return "false";
    if (!strcmp(name, "remote.log.delete.on.disable")) return "false";
    if (!strcmp(name, "strata.remote.read.replica")) return "false";
    if (!strcmp(name, "strata.remote.read.replica.location")) return "";
    return NULL;
}

st_err_t st_broker_config_load(st_broker_config_t *cfg, const char *path, char **overrides,
                               int noverrides, const st_cfg_bind_t *extra, size_t nextra,
                               char *err, size_t errlen) {
    memset(cfg, 0, sizeof *cfg);
    st_err_t e = st_cfg_defaults(&st_broker_config_table, cfg, err, errlen);
    st_cfg_bind_t binds[8];
    size_t nb = 0;
    binds[nb++] = (st_cfg_bind_t){&st_broker_config_table, cfg, NULL};
    for (size_t i = 0; i < nextra && nb < ST_ARRAY_SIZE(binds); i++) binds[nb++] = extra[i];
    /* the file, then the overrides, through the config providers */
    if (!e) e = st_cfg_load(binds, nb, path, overrides, noverrides, err, errlen);
    return e;
}

void st_broker_config_fini(st_broker_config_t *cfg) { st_cfg_fini(&st_broker_config_table, cfg); }

st_err_t st_parse_listeners(const char *text, st_listener_spec_t **out, int *n, char *err,
                            size_t errlen) {
    int cnt = 0;
    char **items = st_split_csv(text, &cnt);
    st_listener_spec_t *v = st_calloc((size_t)cnt + 1, sizeof *v);
    st_err_t e = ST_OK;
    for (int i = 0; i < cnt; i++) {
        char *s = items[i];
        char *sep = strstr(s, "://");
        if (!sep) {
            snprintf(err, errlen, "'%s' is not NAME://host:port", s);
            e = ST_E_CONFIG;
            break;
        }
        *sep = 0;
        /* Kafka's listener names are identifiers compared in upper case */
        size_t nl = strlen(s);
        int bad = nl == 0 || nl >= sizeof v[i].name;
        for (size_t j = 0; j < nl && !bad; j++)
            bad = !(isalnum((unsigned char)s[j]) || s[j] == '_' || s[j] == '-');
        if (bad) {
            snprintf(err, errlen, "'%s' is not a listener name (1-%d letters, digits, _ or -)", s,
                     (int)sizeof v[i].name - 1);
            e = ST_E_CONFIG;
            break;
        }
        for (size_t j = 0; j <= nl; j++) v[i].name[j] = (char)toupper((unsigned char)s[j]);
        char *hostport = sep + 3, *colon = strrchr(hostport, ':');
        if (!colon) {
            snprintf(err, errlen, "'%s' has no port", hostport);
            e = ST_E_CONFIG;
            break;
        }
        *colon = 0;
        char *host = hostport;
        if (host[0] == '[') { /* [ipv6] */
            host++;
            char *rb = strchr(host, ']');
            if (rb) *rb = 0;
        }
        snprintf(v[i].host, sizeof v[i].host, "%s", host);
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end || port < 0 || port > 65535 || colon[1] == 0) {
            snprintf(err, errlen, "'%s' is not a port", colon + 1);
            e = ST_E_CONFIG;
            break;
        }
        v[i].port = (int)port;
        for (int j = 0; j < i; j++)
            if (!strcmp(v[j].name, v[i].name)) {
                snprintf(err, errlen, "listener name %s appears twice", v[i].name);
                e = ST_E_CONFIG;
                break;
            }
        if (e) break;
    }
    st_free_strv(items, cnt);
    if (e) {
        free(v);
        return e;
    }
    *out = v;
    *n = cnt;
    return ST_OK;
}

char **st_split_csv(const char *text, int *n) {
    int cap = 4, cnt = 0;
    char **v = st_malloc((size_t)cap * sizeof *v);
    const char *p = text;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len && isspace((unsigned char)p[len - 1])) len--;
        if (len) {
            if (cnt == cap) {
                cap *= 2;
                v = st_realloc(v, (size_t)cap * sizeof *v);
            }
            v[cnt++] = st_strndup(p, len);
        }
        if (!comma) break;
        p = comma + 1;
    }
    *n = cnt;
    return v;
}

void st_free_strv(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

st_err_t st_topic_config_build(const st_broker_config_t *b, const st_kv_t *overrides, int n,
                               st_topic_config_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int have_before = 0, have_after = 0;
    for (size_t i = 0; i < ST_ARRAY_SIZE(topic_rows); i++) {
        const char *syn = topic_synonyms[i];
        char val[256];
        if (syn && !strcmp(syn, "log.flush.interval.ms") && b->log_flush_interval_ms < 0) {
            snprintf(val, sizeof val, "%s", "9223372036854775807"); /* -1: never */
        } else if (syn) {
            st_cfg_format(st_cfg_lookup(&st_broker_config_table, syn), b, val, sizeof val);
        } else {
            snprintf(val, sizeof val, "%s", topic_fixed_default(topic_rows[i].name));
        }
        st_cfg_set(&st_topic_config_table, out, topic_rows[i].name, val, err, errlen);
    }
    for (int i = 0; i < n; i++) {
        if (!overrides[i].value) continue;
        st_err_t e = st_cfg_set(&st_topic_config_table, out, overrides[i].name, overrides[i].value,
                                err, errlen);
        if (e) {
            st_topic_config_fini(out);
            return ST_E_INVALID_CONFIG;
        }
        if (!strcmp(overrides[i].name, "message.timestamp.before.max.ms")) have_before = 1;
        if (!strcmp(overrides[i].name, "message.timestamp.after.max.ms")) have_after = 1;
    }
    /* The older single bound applies where the newer ones were not set. */
    if (out->message_timestamp_difference_max_ms != INT64_MAX) {
        if (!have_before) out->message_timestamp_before_max_ms = out->message_timestamp_difference_max_ms;
        if (!have_after) out->message_timestamp_after_max_ms = out->message_timestamp_difference_max_ms;
    }
    return ST_OK;
}

void st_topic_config_fini(st_topic_config_t *t) { st_cfg_fini(&st_topic_config_table, t); }

/* KIP-950.  A tiered topic switched off without remote.log.delete.on.disable
 * would keep its remote data in the bucket where nothing reads it (the
 * partitions' log start moves up to the local one): Kafka refuses that,
 * and names the two ways out.  With uploads off, local segments go by the
 * total bounds, so local bounds that differ would mean nothing: refused as
 * Kafka refuses them. */
st_err_t st_topic_config_check_change(const st_topic_config_t *old, const st_topic_config_t *next,
                                      char *err, size_t errlen) {
    if (old && (old->read_replica != next->read_replica ||
                strcmp(old->read_replica_location, next->read_replica_location))) {
        st_snprintf_marked(err, errlen, "strata.remote.read.replica and its .location are set "
                           "when a topic is created (strata topics restore --read-replica) and "
                           "never changed.");
        return ST_E_INVALID_CONFIG;
    }
    if (!next->read_replica && *next->read_replica_location) {
        st_snprintf_marked(err, errlen, "strata.remote.read.replica.location is a read "
                           "replica's source: it needs strata.remote.read.replica=true.");
        return ST_E_INVALID_CONFIG;
    }
    if (next->read_replica && (!next->remote_storage_enable || next->remote_log_copy_disable)) {
        st_snprintf_marked(err, errlen, "A read replica (strata.remote.read.replica=true) needs "
                           "remote.storage.enable=true and remote.log.copy.disable=false: it "
                           "serves what its source cluster uploads.");
        return ST_E_INVALID_CONFIG;
    }
    if (old && old->remote_storage_enable && !next->remote_storage_enable &&
        !next->remote_log_delete_on_disable) {
        st_snprintf_marked(err, errlen,
                           "Switching remote.storage.enable off on a tiered topic would leave its "
                           "remote data unread in the bucket: set remote.log.delete.on.disable=true "
                           "in the same change to delete it, or keep remote.storage.enable=true and "
                           "set remote.log.copy.disable=true to stop uploads and keep reading it.");
        return ST_E_INVALID_CONFIG;
    }
    if (next->remote_storage_enable && next->remote_log_copy_disable) {
        if (next->local_retention_bytes != -2 && next->local_retention_bytes != next->retention_bytes) {
            st_snprintf_marked(err, errlen,
                               "With remote.log.copy.disable=true, local.retention.bytes (%lld) must "
                               "be -2 or equal retention.bytes (%lld): nothing more goes to the "
                               "bucket, so local segments go by the total bounds.",
                               (long long)next->local_retention_bytes,
                               (long long)next->retention_bytes);
            return ST_E_INVALID_CONFIG;
        }
        if (next->local_retention_ms != -2 && next->local_retention_ms != next->retention_ms) {
            st_snprintf_marked(err, errlen,
                               "With remote.log.copy.disable=true, local.retention.ms (%lld) must be "
                               "-2 or equal retention.ms (%lld): nothing more goes to the bucket, so "
                               "local segments go by the total bounds.",
                               (long long)next->local_retention_ms, (long long)next->retention_ms);
            return ST_E_INVALID_CONFIG;
        }
    }
    return ST_OK;
}

void st_topic_config_to_log(const st_topic_config_t *t, st_log_config_t *out) {
    memset(out, 0, sizeof *out);
    out->segment_bytes = t->segment_bytes;
    out->segment_ms = t->segment_ms;
    out->retention_ms = t->retention_ms;
    out->retention_bytes = t->retention_bytes;
    out->index_interval_bytes = t->index_interval_bytes;
    out->segment_index_bytes = t->segment_index_bytes;
    out->max_message_bytes = t->max_message_bytes;
    out->log_append_time = !strcmp(t->message_timestamp_type, "LogAppendTime");
    out->ts_before_max_ms = t->message_timestamp_before_max_ms;
    out->ts_after_max_ms = t->message_timestamp_after_max_ms;
    out->delete_policy = strstr(t->cleanup_policy, "delete") != NULL;
    out->compact = strstr(t->cleanup_policy, "compact") != NULL;
    out->remote = t->remote_storage_enable;
    out->remote_copy_disable = t->remote_storage_enable && t->remote_log_copy_disable;
    out->read_replica = t->remote_storage_enable && t->read_replica;
    st_batch_target_t target = ST_TARGET_PRODUCER;
    st_batch_target_parse(t->compression_type, &target); /* validated when set */
    out->compression = (int)target;
    /* -2: the same as the total bound */
    out->local_retention_ms = t->local_retention_ms == -2 ? t->retention_ms : t->local_retention_ms;
    out->local_retention_bytes =
        t->local_retention_bytes == -2 ? t->retention_bytes : t->local_retention_bytes;
    /* INT64_MAX (Kafka's defaults): never */
    out->flush_messages = t->flush_messages == INT64_MAX ? 0 : t->flush_messages;
    out->flush_ms = t->flush_ms == INT64_MAX ? 0 : ST_MAX(t->flush_ms, 1);
    if (out->compact && t->max_compaction_lag_ms != INT64_MAX) {
        out->max_compaction_lag_ms = t->max_compaction_lag_ms;
        /* Kafka's maxSegmentMs: the active segment rolls at the lag, so its
         * records become cleanable in time */
        if (out->segment_ms <= 0 || t->max_compaction_lag_ms < out->segment_ms)
            out->segment_ms = t->max_compaction_lag_ms;
    }
}

void st_config_doc(FILE *out, const st_cfg_table_t *extra, const char *const *titles,
                   size_t nextra) {
    fprintf(out, "### Broker settings\n\n");
    st_cfg_doc_markdown(&st_broker_config_table, out);
    for (size_t i = 0; i < nextra; i++) {
        fprintf(out, "\n### %s\n\n", titles[i]);
        st_cfg_doc_markdown(&extra[i], out);
    }
    fprintf(out, "\n### Topic settings\n\nSet with CreateTopics or IncrementalAlterConfigs; "
                 "each defaults to the broker setting named in the last column.\n\n");
    fprintf(out, "| key | type | valid | broker default from | description |\n");
    fprintf(out, "|---|---|---|---|---|\n");
    for (size_t i = 0; i < ST_ARRAY_SIZE(topic_rows); i++) {
        const st_cfg_desc_t *d = &topic_rows[i];
        const char *syn = topic_synonyms[i];
        char fixed[96];
        if (!syn) snprintf(fixed, sizeof fixed, "(fixed: `%s`)", topic_fixed_default(d->name));
        fprintf(out, "| `%s` | %s | %s | %s%s%s | %s |\n", d->name, st_cfg_type_name(d->type),
                d->validate ? "see description" : "", syn ? "`" : "", syn ? syn : fixed,
                syn ? "`" : "", d->doc);
    }
}

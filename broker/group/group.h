/*
 * group.h - consumer groups: the classic group protocol, committed
 * offsets, and their storage in __consumer_offsets (DESIGN.md decision 10).
 *
 * Two layers:
 *
 *   st_gstate_t       the state machine of every group this broker
 *                     coordinates (state.c).  No threads, no I/O: time and
 *                     the log come in through st_gstate_ops_t, so unit
 *                     tests drive it with a fake clock and a fake log.
 *   st_group_coord_t  the coordinator service (coordinator.c): one thread
 *                     that owns the state machine, runs requests handed to
 *                     it in order, fires its timers, replays the
 *                     __consumer_offsets partitions it leads and appends
 *                     group and offset records to them.
 *
 * The coordinator of a group is the leader of __consumer_offsets partition
 * abs(javaStringHashCode(group.id)) % N (Kafka's rule, so every tool
 * agrees).  Group metadata and committed offsets are records in that
 * partition with Kafka's key and value formats (records.c), so a restart
 * rebuilds every group by replaying it.
 *
 * Threads: every st_gstate_* call and every job given to
 * st_group_coord_submit runs on the coordinator thread.  Waiters
 * (JoinGroup and SyncGroup requests parked in a group) are completed on
 * that thread, exactly once each.
 */
#ifndef ST_GROUP_H
#define ST_GROUP_H

#include "batch.h"
#include "controller.h"
#include "log.h"
#include "protocol.h"
#include "replica.h"
#include "st_base.h"

/*
 * Strings are length-based (st_str_t, protocol.h) from the wire to the log
 * and back: group ids, member ids, client ids, protocol names, topics and
 * commit metadata may hold any bytes, NUL included, and are compared by
 * length and bytes.  The state machine's own copies are malloc'ed with a
 * NUL after the last byte (so a log line can print them); len -1 (p NULL)
 * is "none".  Strings handed in are borrowed for the call.
 */
/* Owned strings (map.c). */
st_str_t st_gstr_dup(st_str_t s); /* len -1 stays none */
void st_gstr_free(st_str_t *s);
void st_gstr_set(st_str_t *dst, st_str_t src);
/* Equal bytes; two nones are equal, none and "" are not. */
static inline int st_gstr_eq(st_str_t a, st_str_t b) {
    if (a.len < 0 || b.len < 0) return a.len < 0 && b.len < 0;
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, (size_t)a.len) == 0);
}
/* Byte order, shorter first on a common prefix (none before all). */
int st_gstr_cmp(st_str_t a, st_str_t b);

#define ST_GROUP_OFFSETS_TOPIC "__consumer_offsets"
#define ST_GROUP_CONSUMER_PROTOCOL "consumer"

/* Kafka's partition of a group: abs(String.hashCode()) % n, the hash taken
 * over the UTF-16 code units of the id (malformed UTF-8 counts as U+FFFD). */
int32_t st_group_java_hash(const char *s, size_t len);
int32_t st_group_partition_for(const char *group_id, size_t len, int32_t npartitions);

/* ------------------------------------------------------------------------
 * Group state (read-only outside state.c)
 *
 *                 first JoinGroup
 *   +-------+  (add_member_and_rebalance)  +--------------------+
 *   | Empty | ---------------------------> | PreparingRebalance |<-----+
 *   +-------+                              +--------------------+      |
 *       ^   last member gone:                   |  every member rejoined |
 *       |   complete_join -> init_next_gen      |  or rebalance timeout  |
 *       +---------------------------------------+  (complete_join)      |
 *                                               v                        |
 *                                     +---------------------+  join /    |
 *                                     | CompletingRebalance | ---------->+
 *                                     +---------------------+  leave /   |
 *                                               |   leader's SyncGroup   |
 *                                               v   stored (do_sync)     |
 *                                          +--------+  member joins with |
 *                                          | Stable | -------------------+
 *                                          +--------+  new metadata, the
 *                                                      leader rejoins, a
 *                                                      member leaves or
 *                                                      expires
 *   Dead: deleted (DeleteGroups, offsets expired, unloaded); never left.
 * ---------------------------------------------------------------------- */
typedef enum st_group_state {
    ST_GROUP_EMPTY = 0,
    ST_GROUP_PREPARING_REBALANCE = 1,
    ST_GROUP_COMPLETING_REBALANCE = 2,
    ST_GROUP_STABLE = 3,
    ST_GROUP_DEAD = 4
} st_group_state_t;

const char *st_group_state_name(st_group_state_t s); /* "Stable", ... (Kafka's) */

typedef struct st_group_waiter st_group_waiter_t;

typedef struct st_gprotocol {
    st_str_t name;
    uint8_t *metadata;
    int32_t metadata_len;
} st_gprotocol_t;

typedef struct st_gmember {
    st_str_t member_id;
    st_str_t instance_id; /* group.instance.id of a static member; none when dynamic */
    st_str_t client_id;
    st_str_t client_host;
    st_str_t protocol_type;
    int32_t rebalance_timeout_ms;
    int32_t session_timeout_ms;
    st_gprotocol_t *protocols; /* in the member's order of preference */
    int nprotocols;
    uint8_t *assignment;
    int32_t assignment_len;
    st_group_waiter_t *join_waiter; /* a JoinGroup parked until the join completes */
    st_group_waiter_t *sync_waiter; /* a SyncGroup parked until the leader assigns */
    int is_new;                     /* joined but no generation yet */
    int pending_sync;               /* joined this generation, no SyncGroup yet */
    int64_t hb_deadline;            /* session expiry (monotonic ms); -1 none */
} st_gmember_t;

typedef struct st_goffset {
    st_str_t topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    st_str_t metadata;
    int64_t commit_ts; /* wall ms */
    int64_t expire_ts; /* wall ms; -1: by offsets.retention.minutes */
    int64_t record_offset; /* of its record in __consumer_offsets; -1 unknown */
    int64_t producer_id;   /* a pending transactional offset's producer; else -1 */
} st_goffset_t;

/* A small open-addressing map from byte strings to pointers. */
typedef struct st_gmap_slot {
    char *key; /* owned copy; NULL empty; ST_GMAP_TOMB deleted */
    size_t len;
    uint64_t hash;
    void *val;
} st_gmap_slot_t;

typedef struct st_gmap {
    st_gmap_slot_t *slots;
    size_t cap, n, used;
} st_gmap_t;

typedef struct st_group {
    st_str_t id;
    int32_t partition; /* of __consumer_offsets */
    st_group_state_t state;
    int64_t state_ts; /* wall ms of the last transition; -1 unknown */
    int32_t generation;
    st_str_t protocol_type; /* none yet: a group that only commits */
    st_str_t protocol_name; /* none outside a generation */
    st_str_t leader_id;
    st_gmember_t **members; /* in order of joining */
    int nmembers, capmembers;
    int num_awaiting_join;
    /* members told MEMBER_ID_REQUIRED that have not joined yet */
    struct st_gpending {
        st_str_t member_id;
        int64_t deadline;
    } *pending;
    int npending, cappending;
    int new_member_added; /* a member joined during the initial delay */
    int64_t join_deadline; /* PreparingRebalance: when the join completes; -1 none */
    int join_initial;      /* the first rebalance of a group: wait the initial delay */
    int64_t join_remaining_ms;
    int64_t sync_deadline; /* members that have not sent SyncGroup by then go */
    /* topics the members subscribe to (consumer protocol); known says
     * whether the list could be read */
    st_str_t *subscribed;
    int nsubscribed;
    int subscribed_known;
    st_gmap_t offsets; /* int32 partition, then the topic bytes -> st_goffset_t */
    /* Transactional offsets not yet committed or aborted (KIP-98): int64
     * producer id, int32 partition, topic bytes -> st_goffset_t; and per
     * partition (the offsets' key) how many producers have one there. */
    st_gmap_t txn_pending;
    st_gmap_t open_txns;
    int has_metadata;  /* a group metadata record stands for it in the log */
} st_group_t;

/* ------------------------------------------------------------------------
 * Results and waiters
 * ---------------------------------------------------------------------- */
typedef struct st_group_join_member {
    st_str_t member_id;
    st_str_t instance_id;
    const uint8_t *metadata;
    int32_t metadata_len;
} st_group_join_member_t;

/* Borrowed for the callback: copy what the response needs. */
typedef struct st_group_join_result {
    st_err_t error;
    st_str_t member_id; /* "" when the member has none */
    int32_t generation;    /* -1 on errors */
    st_str_t protocol_type; /* len -1: none */
    st_str_t protocol_name;
    st_str_t leader; /* "" when none */
    int skip_assignment;
    const st_group_join_member_t *members; /* the leader's view; else none */
    int nmembers;
    int32_t partition; /* -1 when unknown */
} st_group_join_result_t;

typedef struct st_group_sync_result {
    st_err_t error;
    st_str_t protocol_type;
    st_str_t protocol_name;
    const uint8_t *assignment;
    int32_t assignment_len;
    int32_t partition;
} st_group_sync_result_t;

/* A JoinGroup or SyncGroup request parked in a group.  The state machine
 * calls exactly one of the two callbacks, exactly once, for each waiter it
 * is given (also when the coordinator stops). */
struct st_group_waiter {
    void (*join_done)(st_group_waiter_t *w, const st_group_join_result_t *r);
    void (*sync_done)(st_group_waiter_t *w, const st_group_sync_result_t *r);
};

/* ------------------------------------------------------------------------
 * The state machine
 * ---------------------------------------------------------------------- */
typedef struct st_gstate st_gstate_t;

typedef struct st_gstate_ops {
    int64_t (*mono_ms)(void *arg);
    int64_t (*wall_ms)(void *arg);
    /* Append one batch holding recs to __consumer_offsets-partition; with
     * producer_id >= 0 a transactional batch of that producer and epoch
     * (base sequence -1).  *base_offset (when not NULL): the offset of
     * the first record. */
    st_err_t (*append)(void *arg, int32_t partition, int64_t producer_id, int16_t producer_epoch,
                       const st_batch_record_t *recs, int n, int64_t *base_offset);
    /* A request touches a partition whose state is unknown: the host may
     * start (and finish) loading it (st_gstate_set_partition). */
    void (*ensure_partition)(void *arg, int32_t partition);
    void *arg;
} st_gstate_ops_t;

typedef struct st_gstate_config {
    int32_t num_partitions; /* of __consumer_offsets */
    int32_t min_session_timeout_ms;
    int32_t max_session_timeout_ms;
    int32_t initial_rebalance_delay_ms;
    int32_t max_size; /* group.max.size */
    int32_t offset_metadata_max_bytes;
    int64_t offsets_retention_ms;
    int64_t offsets_retention_check_interval_ms;
} st_gstate_config_t;

/* Partition ownership, as the host sees it. */
typedef enum st_gpart_state {
    ST_GPART_UNKNOWN = 0, /* not looked at yet: ensure_partition is asked */
    ST_GPART_NOT_OWNED,   /* not the leader here: NOT_COORDINATOR */
    ST_GPART_LOADING,     /* COORDINATOR_LOAD_IN_PROGRESS */
    ST_GPART_LOADED
} st_gpart_state_t;

st_gstate_t *st_gstate_new(const st_gstate_config_t *cfg, const st_gstate_ops_t *ops);
/* Completes every waiter with NOT_COORDINATOR, frees everything. */
void st_gstate_destroy(st_gstate_t *s);
const st_gstate_config_t *st_gstate_config(const st_gstate_t *s);

void st_gstate_set_partition(st_gstate_t *s, int32_t partition, st_gpart_state_t st);
st_gpart_state_t st_gstate_partition(const st_gstate_t *s, int32_t partition);
int32_t st_gstate_partition_of(const st_gstate_t *s, st_str_t group_id);

/* Replay (partition LOADING): one record of __consumer_offsets at
 * offset, in log order; value NULL is a tombstone.  producer_id: the
 * producer of a transactional batch (its offset commits become pending),
 * -1 for any other.  Unknown or corrupt records are skipped and counted.
 * A control batch's marker is replayed with st_gstate_end_txn. */
void st_gstate_load_record(st_gstate_t *s, int32_t partition, int64_t offset, int64_t producer_id,
                           const uint8_t *key, int32_t klen, const uint8_t *value, int32_t vlen);
/* The partition is replayed: its groups come to life (members get their
 * session timers, as after Kafka's onGroupLoaded). */
void st_gstate_load_done(st_gstate_t *s, int32_t partition);
/* Leadership lost: waiters of its groups get NOT_COORDINATOR; groups go. */
void st_gstate_unload(st_gstate_t *s, int32_t partition);
/* Stopping: every waiter gets NOT_COORDINATOR, later calls answer it too. */
void st_gstate_close(st_gstate_t *s);
int st_gstate_skipped_records(const st_gstate_t *s);

/* The status check of every group API (Kafka's validateGroupStatus):
 * INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
 * NOT_COORDINATOR or OK.  allow_empty_id: OffsetCommit, OffsetFetch,
 * DescribeGroups and DeleteGroups accept "" as a group id. */
st_err_t st_gstate_check(st_gstate_t *s, st_str_t group_id, int allow_empty_id);
st_group_t *st_gstate_group(st_gstate_t *s, st_str_t group_id);
/* Every group of loaded partitions (the callback must not change groups). */
void st_gstate_foreach_group(st_gstate_t *s, void (*fn)(st_group_t *g, void *arg), void *arg);
int st_gstate_loading(const st_gstate_t *s); /* some partition is loading */
int st_gstate_closed(const st_gstate_t *s);

typedef struct st_group_protocol {
    st_str_t name;
    const uint8_t *metadata;
    int32_t metadata_len;
} st_group_protocol_t;

typedef struct st_group_join_params {
    st_str_t group_id;
    st_str_t member_id; /* "" to join anew */
    st_str_t instance_id; /* none: dynamic member */
    st_str_t client_id;
    st_str_t client_host;
    st_str_t protocol_type;
    st_str_t reason;
    int32_t session_timeout_ms;
    int32_t rebalance_timeout_ms;
    const st_group_protocol_t *protocols;
    int nprotocols;
    int require_known_member_id; /* JoinGroup v4+ without an instance id */
    int support_skip_assignment; /* JoinGroup v9+ */
} st_group_join_params_t;

void st_gstate_join(st_gstate_t *s, const st_group_join_params_t *p, st_group_waiter_t *w);

typedef struct st_group_assignment {
    st_str_t member_id;
    const uint8_t *assignment;
    int32_t assignment_len;
} st_group_assignment_t;

typedef struct st_group_sync_params {
    st_str_t group_id;
    st_str_t member_id;
    st_str_t instance_id;
    st_str_t protocol_type; /* none: not sent (before v5) */
    st_str_t protocol_name;
    int32_t generation;
    const st_group_assignment_t *assignments;
    int nassignments;
} st_group_sync_params_t;

void st_gstate_sync(st_gstate_t *s, const st_group_sync_params_t *p, st_group_waiter_t *w);

st_err_t st_gstate_heartbeat(st_gstate_t *s, st_str_t group_id, st_str_t member_id,
                             st_str_t instance_id, int32_t generation);

typedef struct st_group_leave_member {
    st_str_t member_id;
    st_str_t instance_id;
    st_str_t reason;
    st_err_t error; /* out */
} st_group_leave_member_t;

/* Returns the top-level error; each member's error is set. */
st_err_t st_gstate_leave(st_gstate_t *s, st_str_t group_id, st_group_leave_member_t *m,
                         int n);

typedef struct st_group_commit {
    st_str_t topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    st_str_t metadata; /* none: "" */
    int64_t commit_ts;    /* -1: now */
    int64_t expire_ts;    /* -1: none (offsets.retention.minutes applies) */
    st_err_t error;       /* in: already refused (unknown topic); out: result */
} st_group_commit_t;

void st_gstate_commit(st_gstate_t *s, st_str_t group_id, st_str_t member_id,
                      st_str_t instance_id, int32_t generation, st_group_commit_t *c, int n);

const st_goffset_t *st_gstate_offset(st_group_t *g, st_str_t topic, int32_t partition);

/* ---- Transactional offset commits (KIP-98, KIP-447) --------------------
 *
 *   TxnOffsetCommit          st_gstate_txn_commit: one transactional batch
 *        |                   (the producer's id and epoch) of OffsetCommit
 *        v                   records; the offsets are pending for
 *   pending (group,          (group, producer): OffsetFetch does not show
 *   producer, partition)     them; with require_stable their partitions
 *        |                   answer UNSTABLE_OFFSET_COMMIT
 *        | marker in the     st_gstate_end_txn
 *        | partition's log
 *        v
 *   commit: committed, unless the partition's committed offset was
 *           written later in the log (record_offset, as Kafka's
 *           replayEndTransactionMarker); abort: dropped
 *
 * A tombstone of an offset drops the pending offsets of that partition
 * too (as in replay).  Offsets with a transaction pending do not expire,
 * and a group holding pending offsets is kept. */
typedef struct st_group_txn_commit_params {
    st_str_t group_id;
    st_str_t transactional_id;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t generation; /* -1: not given (v0-2) */
    st_str_t member_id; /* "": not given */
    st_str_t instance_id;
} st_group_txn_commit_params_t;

/* Each c[i].error is set (commit_ts, expire_ts are not used: the time is
 * now and the retention the broker's). */
void st_gstate_txn_commit(st_gstate_t *s, const st_group_txn_commit_params_t *p,
                          st_group_commit_t *c, int n);
/* A marker of producer_id is in __consumer_offsets-partition: its pending
 * offsets in the groups of that partition are committed or dropped.  Also
 * replay's (LOADING) way with a control batch. */
void st_gstate_end_txn(st_gstate_t *s, int32_t partition, int64_t producer_id, int commit);
/* Whether some transaction has an offset pending for the partition. */
int st_gstate_txn_pending(st_group_t *g, st_str_t topic, int32_t partition);
/* The pending offset of one producer, or NULL. */
const st_goffset_t *st_gstate_pending_offset(st_group_t *g, int64_t producer_id, st_str_t topic,
                                             int32_t partition);
void st_gstate_foreach_offset(st_group_t *g, void (*fn)(const st_goffset_t *o, void *arg),
                              void *arg);

st_err_t st_gstate_delete_group(st_gstate_t *s, st_str_t group_id);

typedef struct st_group_offset_delete {
    st_str_t topic;
    int32_t partition;
    int subscribed; /* out: GROUP_SUBSCRIBED_TO_TOPIC */
} st_group_offset_delete_t;

st_err_t st_gstate_delete_offsets(st_gstate_t *s, st_str_t group_id,
                                  st_group_offset_delete_t *d, int n);

/* Offsets of topics that are gone (deleted) are removed from every loaded
 * group, with tombstones, as Kafka's handleDeletedPartitions does; groups
 * left empty without offsets go too.  Returns how many offsets went. */
int st_gstate_drop_missing_topics(st_gstate_t *s, int (*exists)(st_str_t topic, void *arg),
                                  void *arg);

/* Topics the group's members subscribe to, as the consumer protocol says;
 * 1 when the topic is one of them or the group cannot tell. */
int st_gstate_subscribed(const st_group_t *g, st_str_t topic);

/* Fire what is due: session expiries, join and sync deadlines, pending
 * members, offset expiry.  Returns the next deadline (monotonic ms), -1
 * when none. */
int64_t st_gstate_tick(st_gstate_t *s);

/* ------------------------------------------------------------------------
 * The coordinator service
 * ---------------------------------------------------------------------- */
typedef struct st_group_coord st_group_coord_t;

typedef struct st_group_coord_config {
    st_gstate_config_t state;
    int32_t node_id;
    int32_t load_buffer_bytes; /* offsets.load.buffer.size */
    int flush_on_ack;          /* log.flush.on.ack: answers wait for the fsync */
} st_group_coord_config_t;

st_group_coord_t *st_group_coord_new(const st_group_coord_config_t *cfg, st_replicas_t *rm,
                                     st_controller_t *ctl, st_logmgr_t *logs);
/* Start the thread; partitions of __consumer_offsets led here start
 * loading at once. */
void st_group_coord_start(st_group_coord_t *c);
/* Before the I/O loops stop: every parked request is answered
 * (NOT_COORDINATOR) and later ones are answered at once. */
void st_group_coord_close_requests(st_group_coord_t *c);
/* After the loops stopped: run what is queued, stop the thread, free. */
void st_group_coord_destroy(st_group_coord_t *c);

/* Run fn on the coordinator thread, in submission order. */
typedef void (*st_group_job_fn)(st_group_coord_t *c, st_gstate_t *s, void *arg);
void st_group_coord_submit(st_group_coord_t *c, st_group_job_fn fn, void *arg);
/* Offset after the last record the coordinator appended to a partition
 * (0 when none): a response that reports a write waits until the
 * partition's flushed offset reaches it.  Coordinator thread. */
int64_t st_group_coord_written_end(st_group_coord_t *c, int32_t partition);
int32_t st_group_coord_num_partitions(st_group_coord_t *c);
/* A transaction marker of producer_id was appended to
 * __consumer_offsets-partition (WriteTxnMarkers): the coordinator thread
 * commits (commit != 0) or aborts that producer's pending offsets in the
 * partition's groups, after the jobs already queued.  Any thread. */
void st_group_coord_txn_marker(st_group_coord_t *c, int32_t partition, int64_t producer_id,
                               int16_t producer_epoch, int commit);

/* What a group looks like from outside (the admin listener's status): a
 * copy, made on the coordinator thread. */
typedef struct st_group_view_offset {
    char *topic;
    int32_t partition;
    int64_t offset;    /* committed: the next record the group reads */
    int64_t commit_ts; /* wall ms */
} st_group_view_offset_t;

typedef struct st_group_view {
    char *group_id;
    const char *state; /* Kafka's name: "Stable", "Empty", ... */
    char *protocol_type; /* "" for a group that only commits offsets */
    int32_t generation;
    int nmembers;
    st_group_view_offset_t *offsets; /* by topic, then partition */
    int noffsets;
} st_group_view_t;

/* Every group of the __consumer_offsets partitions this broker has
 * loaded, by group id, with its committed offsets.  Any thread but the
 * coordinator's: it waits for a job there.  Returns how many (*out
 * malloc'ed, st_group_views_free it). */
int st_group_coord_views(st_group_coord_t *c, st_group_view_t **out);
void st_group_views_free(st_group_view_t *v, int n);

/* ------------------------------------------------------------------------
 * Compaction: which logs the cleaner visits (compaction.c)
 * ---------------------------------------------------------------------- */
typedef struct st_group_cleaner_source {
    st_controller_t *ctl;
    st_replicas_t *rm;
    const st_broker_config_t *cfg;
} st_group_cleaner_source_t;

/* An st_log_cleaner_list_cb: the partitions hosted here whose topic's
 * cleanup.policy includes compact, with their settings.  arg is an
 * st_group_cleaner_source_t. */
int st_group_cleaner_list(void *arg, st_log_cleanable_t **out);

#endif /* ST_GROUP_H */

/*
 * raft.h - the KIP-595 Raft that replicates __cluster_metadata among the
 * controller voters (DESIGN.md decision 9), and that brokers follow as
 * observers.
 *
 * A state machine with no threads, no sockets and no files: the clock, the
 * network, the log, the quorum-state file, snapshots and the metadata state
 * machine are all behind st_raft_ops_t.  stratad drives it on one thread
 * with the real ones; tests/sim/raft_sim.c drives the very same code with a
 * simulated network, disk and clock; tests/unit/test_raft.c with fakes.
 *
 * Replication is pull-based, as KRaft: followers and observers send Fetch
 * to the leader with (fetch_offset, last_fetched_epoch); the leader answers
 * with entries and its high watermark, or with the diverging epoch and its
 * end offset (the follower truncates and asks again), or with a snapshot id
 * when the follower is below the leader's log start (the follower then
 * pulls the snapshot with FetchSnapshot).
 *
 * Roles (Kafka's QuorumState; a node not in the voter set is an observer
 * and is only ever UNATTACHED or FOLLOWER):
 *
 *                 fetch timeout (voter)              election timeout
 *   FOLLOWER ------------------------------> PROSPECTIVE <------------ UNATTACHED
 *      ^   ^                                  |   ^   | pre-vote majority   ^
 *      |   | a leader named at our epoch      |   |   v  (to_candidate)     |
 *      |   +----------------------------------+   |  CANDIDATE             |
 *      |      or above (to_follower)              |   | vote majority       |
 *      |                                  backoff |   v  (to_leader)        |
 *      |                                          +-- (timeout / rejected)  |
 *      |  BeginQuorumEpoch, Fetch answer          LEADER                    |
 *      +--------------------------------------     | check-quorum lost or   |
 *                                                  v st_raft_resign         |
 *                                               RESIGNED -- election timeout -> PROSPECTIVE
 *   any role, a higher epoch seen without a leader: to_unattached --------+
 *
 * Pre-vote (KIP-996): a PROSPECTIVE asks "would you vote for me at the next
 * epoch?" without raising any epoch; only a majority of yes makes it a
 * CANDIDATE, which raises the epoch.  A follower that has fetched from a
 * live leader says no, so a partitioned or restarted node cannot disrupt a
 * healthy leader.  Check-quorum: a leader that has not been fetched from by
 * a majority within 1.5 x controller.quorum.fetch.timeout.ms resigns, so a
 * leader cut off from the majority stops accepting proposals.
 *
 * Durability:
 *   - the quorum state (epoch, leader id, voted-for, voter set) is written
 *     with ops.persist, synchronously durable, before a vote is granted,
 *     before a candidate asks for votes, before a leader acts and before a
 *     follower fetches in a new epoch;
 *   - entries are appended with ops.log_append and made durable by
 *     ops.log_flush, which completes later (st_raft_log_flushed); a
 *     follower fetches again only once its log is durable, so the offset it
 *     fetches from is what it holds durably; the leader counts its own
 *     ops.log_durable_end, never its log end;
 *   - an entry is committed (below the high watermark) once a majority of
 *     voters hold it durably, and the high watermark only moves to an offset
 *     past the start of the leader's own epoch (its first entry, a
 *     LeaderChange control record): entries of earlier epochs commit only
 *     beneath one of the current epoch.
 *
 * Applying: committed entries go to ops.apply in offset order, once each
 * per life of the st_raft_t (a restart starts again from the latest
 * snapshot, which ops.snapshot_load hands to the state machine).
 *
 * Ownership: messages handed to ops.send and to st_raft_recv are borrowed
 * for the call; entries returned by ops.log_read are borrowed until the
 * next log op.  Threads: one thread owns an st_raft_t and calls every
 * function here; ops are called on that thread, never re-entrantly (an op
 * must not call back into st_raft_*).
 */
#ifndef ST_RAFT_H
#define ST_RAFT_H

#include "st_base.h"

#define ST_RAFT_MAX_VOTERS 32

/* Kafka's defaults for the controller.quorum.* settings. */
#define ST_RAFT_ELECTION_TIMEOUT_MS 1000      /* controller.quorum.election.timeout.ms */
#define ST_RAFT_FETCH_TIMEOUT_MS 2000         /* controller.quorum.fetch.timeout.ms */
#define ST_RAFT_ELECTION_BACKOFF_MAX_MS 1000  /* controller.quorum.election.backoff.max.ms */
#define ST_RAFT_REQUEST_TIMEOUT_MS 2000       /* controller.quorum.request.timeout.ms */
#define ST_RAFT_RETRY_BACKOFF_MS 20           /* controller.quorum.retry.backoff.ms */
#define ST_RAFT_FETCH_MAX_WAIT_MS 500         /* KafkaRaftClient's fetchMaxWaitMs */
#define ST_RAFT_FETCH_MAX_BYTES (8 << 20)
#define ST_RAFT_SNAPSHOT_CHUNK_BYTES (1 << 20)

typedef enum st_raft_role {
    ST_RAFT_UNATTACHED = 0, /* an epoch, no leader known (maybe a vote cast) */
    ST_RAFT_PROSPECTIVE,    /* asking for pre-votes, epoch unchanged */
    ST_RAFT_CANDIDATE,      /* epoch raised, voted for itself, asking for votes */
    ST_RAFT_LEADER,
    ST_RAFT_FOLLOWER,       /* a leader known in this epoch; fetching from it */
    ST_RAFT_RESIGNED        /* was leader of this epoch; waits for the next */
} st_raft_role_t;

const char *st_raft_role_name(st_raft_role_t role);

/* ---- the quorum-state file ----------------------------------------------
 *
 * What Kafka's quorum-state JSON holds (leaderEpoch, leaderId, votedId,
 * currentVoters), in a file of our own with magic, version and checksum
 * (STYLE.md).  Big-endian:
 *
 *   off   size  field
 *     0      4  magic          "STQS"
 *     4      2  version        1
 *     6      2  voter count n  1 .. ST_RAFT_MAX_VOTERS
 *     8      4  leader_epoch   >= 0
 *    12      4  leader_id      -1: none known
 *    16      4  voted_id       -1: no vote cast in this epoch
 *    20    4*n  voter ids      ascending, distinct, >= 0
 *  20+4n     4  CRC32C of bytes 0 .. 20+4n
 *
 * The host writes it with st_write_file_atomic (temporary name, fsync,
 * rename, directory fsync) as `quorum-state` in the metadata log directory.
 */
#define ST_RAFT_QSTATE_MAGIC "STQS"
#define ST_RAFT_QSTATE_VERSION 1

typedef struct st_raft_qstate {
    int32_t leader_epoch;
    int32_t leader_id;
    int32_t voted_id;
    int32_t nvoters;
    int32_t voters[ST_RAFT_MAX_VOTERS]; /* ascending */
} st_raft_qstate_t;

void st_raft_qstate_encode(const st_raft_qstate_t *qs, st_buf_t *out);
/* CORRUPT (or TRUNCATED) with a sentence naming the problem in why. */
st_err_t st_raft_qstate_decode(const uint8_t *p, size_t len, st_raft_qstate_t *out, char *why,
                               size_t whylen);

/* ---- entries ---------------------------------------------------------------
 *
 * One entry is one record batch of the metadata log: it takes the offsets
 * [base_offset, base_offset + record_count) and carries the epoch of the
 * leader that appended it (the batch's partitionLeaderEpoch).  Raft never
 * looks inside `data`.  On broker/log, a data entry's data is the record
 * batch itself (the log stamps baseOffset and partitionLeaderEpoch, which
 * the CRC does not cover); a control entry's data is the value of its one
 * control record (LeaderChangeMessage v0, flexible: int16 version, int32
 * LeaderId, compact array of Voter {int32 VoterId, tags}, compact array
 * GrantingVoters, tags), written as a control batch whose record key is
 * (int16 version 0, int16 type 2 = LEADER_CHANGE).
 */
enum { ST_RAFT_CONTROL_NONE = 0, ST_RAFT_CONTROL_LEADER_CHANGE = 2 };

typedef struct st_raft_entry {
    int64_t base_offset;
    int32_t epoch;
    int32_t record_count; /* >= 1 */
    int32_t control;      /* ST_RAFT_CONTROL_* */
    const uint8_t *data;
    int32_t len;
} st_raft_entry_t;

/* `<end_offset>-<epoch>.checkpoint` (KRaft's naming, 20 and 10 digits):
 * the state machine after every entry below end_offset; epoch is that of
 * the entry at end_offset - 1. */
typedef struct st_raft_snapshot_id {
    int64_t end_offset;
    int32_t epoch;
} st_raft_snapshot_id_t;

#define ST_RAFT_SNAPSHOT_NAME_MAX 48
void st_raft_snapshot_name(st_raft_snapshot_id_t id, char out[ST_RAFT_SNAPSHOT_NAME_MAX]);
/* Parses a name written by st_raft_snapshot_name; 0 on success. */
int st_raft_snapshot_name_parse(const char *name, st_raft_snapshot_id_t *id);

/* LeaderChangeMessage v0 (see above), the data of a leader's first entry. */
void st_raft_leader_change_encode(int32_t leader_id, const int32_t *voters, int nvoters,
                                  const int32_t *granting, int ngranting, st_buf_t *out);

/* ---- messages ---------------------------------------------------------------
 *
 * Plain structs with Kafka's field names, so that each maps one to one to
 * its wire schema (VoteRequest/Response v2, BeginQuorumEpoch,
 * EndQuorumEpoch, Fetch's raft fields, FetchSnapshot) for the single
 * partition __cluster_metadata-0.  `error_code` holds Kafka's wire code;
 * the wire layer puts INCONSISTENT_CLUSTER_ID at the top level and every
 * other code at the partition level.  Absent optional structs carry
 * Kafka's defaults (-1).  `request_id` is not a body field: the host
 * carries it as (or maps it to) the request header's correlation id and
 * sets the request's on the response, so raft can tell a current answer
 * from a late or duplicated one.
 */
/* Kafka's wire codes the Raft answers with, from st_base's one table (a
 * Kafka code's st_err_t is its wire number). */
#define ST_RAFT_ERR_INCONSISTENT_VOTER_SET ((int16_t)ST_E_INCONSISTENT_VOTER_SET)
#define ST_RAFT_ERR_SNAPSHOT_NOT_FOUND ((int16_t)ST_E_SNAPSHOT_NOT_FOUND)
#define ST_RAFT_ERR_POSITION_OUT_OF_RANGE ((int16_t)ST_E_POSITION_OUT_OF_RANGE)
#define ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID ((int16_t)ST_E_INCONSISTENT_CLUSTER_ID)

typedef enum st_raft_msg_type {
    ST_RAFT_VOTE_REQUEST = 1,
    ST_RAFT_VOTE_RESPONSE,
    ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST,
    ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE,
    ST_RAFT_END_QUORUM_EPOCH_REQUEST,
    ST_RAFT_END_QUORUM_EPOCH_RESPONSE,
    ST_RAFT_FETCH_REQUEST,
    ST_RAFT_FETCH_RESPONSE,
    ST_RAFT_FETCH_SNAPSHOT_REQUEST,
    ST_RAFT_FETCH_SNAPSHOT_RESPONSE
} st_raft_msg_type_t;

typedef struct st_raft_vote_request {
    int32_t voter_id;          /* the receiver; -1: not sent (Vote v0) */
    int32_t replica_epoch;     /* the sender's epoch (raised for a vote, not a pre-vote) */
    int32_t replica_id;        /* the sender */
    int32_t last_offset_epoch; /* epoch of the sender's last entry */
    int64_t last_offset;       /* the sender's log end offset */
    int8_t pre_vote;
} st_raft_vote_request_t;

typedef struct st_raft_vote_response {
    int16_t error_code;
    int32_t leader_id; /* the receiver's view, -1: none */
    int32_t leader_epoch;
    int8_t vote_granted;
} st_raft_vote_response_t;

typedef struct st_raft_begin_quorum_epoch_request {
    int32_t voter_id; /* -1: not sent (BeginQuorumEpoch v0) */
    int32_t leader_id;
    int32_t leader_epoch;
} st_raft_begin_quorum_epoch_request_t;

typedef struct st_raft_end_quorum_epoch_request {
    int32_t leader_id;
    int32_t leader_epoch;
    int32_t npreferred;
    int32_t preferred_successors[ST_RAFT_MAX_VOTERS]; /* most caught up first */
} st_raft_end_quorum_epoch_request_t;

/* BeginQuorumEpochResponse and EndQuorumEpochResponse have the same fields. */
typedef struct st_raft_epoch_response {
    int16_t error_code;
    int32_t leader_id;
    int32_t leader_epoch;
} st_raft_epoch_response_t;

typedef struct st_raft_leader_id_and_epoch {
    int32_t leader_id;    /* -1 */
    int32_t leader_epoch; /* -1 */
} st_raft_leader_id_and_epoch_t;

typedef struct st_raft_fetch_request {
    int32_t replica_id;           /* ReplicaState.ReplicaId */
    int32_t max_wait_ms;
    int32_t current_leader_epoch;
    int64_t fetch_offset;         /* the sender's log end offset, durable */
    int32_t last_fetched_epoch;   /* epoch of the entry at fetch_offset - 1 */
    int64_t log_start_offset;
    int32_t partition_max_bytes;
} st_raft_fetch_request_t;

typedef struct st_raft_fetch_response {
    int16_t error_code;
    int64_t high_watermark; /* -1: not known yet */
    int64_t log_start_offset;
    struct {
        int32_t epoch;      /* -1: not diverging */
        int64_t end_offset; /* -1 */
    } diverging_epoch;
    st_raft_leader_id_and_epoch_t current_leader;
    st_raft_snapshot_id_t snapshot_id; /* end_offset -1, epoch -1: none */
    const st_raft_entry_t *records;    /* Records: the entries, in order */
    int32_t nrecords;
} st_raft_fetch_response_t;

typedef struct st_raft_fetch_snapshot_request {
    int32_t replica_id;
    int32_t max_bytes;
    int32_t current_leader_epoch;
    st_raft_snapshot_id_t snapshot_id;
    int64_t position;
} st_raft_fetch_snapshot_request_t;

typedef struct st_raft_fetch_snapshot_response {
    int16_t error_code;
    st_raft_snapshot_id_t snapshot_id;
    st_raft_leader_id_and_epoch_t current_leader;
    int64_t size;     /* of the whole snapshot */
    int64_t position; /* of these bytes */
    const uint8_t *unaligned_records;
    int32_t len;
} st_raft_fetch_snapshot_response_t;

typedef struct st_raft_msg {
    st_raft_msg_type_t type;
    int32_t request_id;
    const char *cluster_id; /* requests; NULL: not sent (not checked) */
    union {
        st_raft_vote_request_t vote_req;
        st_raft_vote_response_t vote_resp;
        st_raft_begin_quorum_epoch_request_t begin_req;
        st_raft_end_quorum_epoch_request_t end_req;
        st_raft_epoch_response_t epoch_resp; /* Begin- and EndQuorumEpochResponse */
        st_raft_fetch_request_t fetch_req;
        st_raft_fetch_response_t fetch_resp;
        st_raft_fetch_snapshot_request_t fsnap_req;
        st_raft_fetch_snapshot_response_t fsnap_resp;
    } u;
} st_raft_msg_t;

const char *st_raft_msg_name(st_raft_msg_type_t type);

/* DescribeQuorumResponse's partition, as the leader sees it. */
typedef struct st_raft_replica_state {
    int32_t replica_id;
    int64_t log_end_offset;           /* -1: not fetched in this epoch */
    int64_t last_fetch_timestamp;     /* ops.now_ms clock, -1: never */
    int64_t last_caught_up_timestamp; /* -1: never */
} st_raft_replica_state_t;

typedef struct st_raft_describe {
    int32_t leader_id;
    int32_t leader_epoch;
    int64_t high_watermark;
    const st_raft_replica_state_t *current_voters; /* borrowed until the next call */
    int32_t nvoters;
    const st_raft_replica_state_t *observers;
    int32_t nobservers;
} st_raft_describe_t;

/* ---- the ops table ------------------------------------------------------- */
typedef struct st_raft_ops {
    void *arg;
    int64_t (*now_ms)(void *arg);  /* monotonic */
    uint32_t (*random)(void *arg); /* election jitter and backoff */
    void (*send)(void *arg, int32_t dest, const st_raft_msg_t *msg);

    /* The quorum state, durable when it returns ST_OK. */
    st_err_t (*persist)(void *arg, const st_raft_qstate_t *qs);

    /* The log: entries in offset order, from log_start_offset to
     * log_end_offset.  log_append makes entries readable at once;
     * log_flush starts making everything appended durable and the host
     * calls st_raft_log_flushed when a flush completes; log_durable_end
     * is the end of what is durable (a truncation lowers it). */
    st_err_t (*log_append)(void *arg, const st_raft_entry_t *entries, int n);
    void (*log_flush)(void *arg);
    int64_t (*log_durable_end)(void *arg);
    st_err_t (*log_truncate)(void *arg, int64_t offset); /* drop [offset, end) */
    /* Entries from `offset` (an entry boundary) up to about max_bytes, and
     * at least one when there is one; borrowed until the next log op.
     * OFFSET_OUT_OF_RANGE when offset is not a boundary of an entry held
     * (raft then refuses the Fetch that asked; other errors stop the node). */
    st_err_t (*log_read)(void *arg, int64_t offset, int32_t max_bytes,
                         const st_raft_entry_t **entries, int *n);
    int64_t (*log_start_offset)(void *arg);
    int64_t (*log_end_offset)(void *arg);
    /* The largest epoch <= `epoch` among the entries held, and where it ends
     * (the base offset of the first entry of a larger epoch, else the log
     * end); *out_epoch = -1 when no entry has an epoch <= `epoch`. */
    void (*log_end_offset_for_epoch)(void *arg, int32_t epoch, int32_t *out_epoch,
                                     int64_t *out_end);
    /* After a snapshot was installed: nothing left, the log starts at
     * id.end_offset.  Need not be durable before the next flush. */
    st_err_t (*log_reset)(void *arg, st_raft_snapshot_id_t id);
    /* Entries wholly below offset may be deleted (a snapshot covers them). */
    st_err_t (*log_delete_before)(void *arg, int64_t offset);

    /* Snapshots of the state machine (the image). */
    st_err_t (*snapshot_create)(void *arg, st_raft_snapshot_id_t id); /* durable on return */
    int (*snapshot_latest)(void *arg, st_raft_snapshot_id_t *id);     /* 1 when there is one */
    st_err_t (*snapshot_load)(void *arg, st_raft_snapshot_id_t id);   /* state machine := it */
    st_err_t (*snapshot_read)(void *arg, st_raft_snapshot_id_t id, int64_t position,
                              int32_t max_bytes, const uint8_t **p, int32_t *len,
                              int64_t *size); /* NOT_FOUND: no such snapshot;
                                               * OFFSET_OUT_OF_RANGE: position
                                               * beyond it (or *len 0) */
    /* A snapshot being received: chunks in order from position 0, then
     * snapshot_install makes it whole, durable and the latest. */
    st_err_t (*snapshot_write)(void *arg, st_raft_snapshot_id_t id, int64_t position,
                               const uint8_t *p, int32_t len);
    st_err_t (*snapshot_install)(void *arg, st_raft_snapshot_id_t id, int64_t size);

    /* Committed entries, in order, once each (control entries included:
     * the state machine skips them). */
    void (*apply)(void *arg, const st_raft_entry_t *entries, int n);
    /* Optional: the epoch or the leader changed (leader_id -1: unknown). */
    void (*leader_change)(void *arg, int32_t epoch, int32_t leader_id);
} st_raft_ops_t;

typedef struct st_raft_config {
    int32_t node_id;
    const int32_t *voters; /* controller.quorum.voters ids */
    int32_t nvoters;
    const char *cluster_id; /* NULL: not checked */
    int32_t election_timeout_ms;
    int32_t fetch_timeout_ms;
    int32_t election_backoff_max_ms;
    int32_t request_timeout_ms;
    int32_t retry_backoff_ms;
    int32_t fetch_max_wait_ms;
    int32_t fetch_max_bytes;
    int32_t snapshot_chunk_bytes;
    /* Take a snapshot once this many bytes of entries were applied since
     * the last one (Kafka's metadata.log.max.record.bytes.between.snapshots);
     * 0: never. */
    int64_t snapshot_min_new_bytes;
} st_raft_config_t;

/* Kafka's defaults in every timing field; the caller fills the rest. */
void st_raft_config_defaults(st_raft_config_t *cfg);

typedef struct st_raft st_raft_t;

/* `initial` is the decoded quorum-state file, NULL when there is none.
 * Refuses (CONFIG, with a sentence in err) a configuration that does not
 * hold together or a quorum state whose voters differ from cfg's; loads
 * the latest snapshot into the state machine.  Sends nothing: the first
 * st_raft_tick starts the node (a single voter elects itself there). */
st_err_t st_raft_new(const st_raft_config_t *cfg, const st_raft_ops_t *ops,
                     const st_raft_qstate_t *initial, st_raft_t **out, char *err, size_t errlen);
void st_raft_destroy(st_raft_t *r);

/* Fires what is due; returns when it next wants to be ticked (ops.now_ms
 * clock), or -1 after a failure. */
int64_t st_raft_tick(st_raft_t *r);
int64_t st_raft_next_deadline(const st_raft_t *r);
/* A request or a response from node `from`. */
void st_raft_recv(st_raft_t *r, int32_t from, const st_raft_msg_t *msg);
/* The log's flush completed (log_durable_end may have moved). */
void st_raft_log_flushed(st_raft_t *r);

/* Leader only: appends one entry of this epoch; it is committed when the
 * high watermark passes base_offset (ops.apply tells).  Copies data.
 * NOT_LEADER_OR_FOLLOWER elsewhere (also when resigned). */
st_err_t st_raft_propose(st_raft_t *r, const uint8_t *data, int32_t len, int32_t record_count,
                         int64_t *base_offset, int32_t *epoch);
/* The host's hint that the connection to `leader` failed (lost, refused):
 * a voter following it starts asking for pre-votes now instead of at its
 * fetch timeout.  Safe against a healthy leader: pre-vote changes no
 * epoch, and the voters that still fetch from the leader refuse it
 * (KIP-996); a prospective that fails goes back to following.  An
 * observer following it goes back to asking the voters who leads, and
 * an observer asking a voter that is unreachable asks another.  Ignored
 * in any other state or for any other node. */
void st_raft_leader_unreachable(st_raft_t *r, int32_t leader);
/* Leader only: step down gracefully (controlled shutdown), telling the
 * voters with EndQuorumEpoch, the most caught up first. */
st_err_t st_raft_resign(st_raft_t *r);
/* Leader only; NOT_LEADER_OR_FOLLOWER elsewhere. */
st_err_t st_raft_describe(st_raft_t *r, st_raft_describe_t *out);

st_raft_role_t st_raft_role(const st_raft_t *r);
int st_raft_is_voter(const st_raft_t *r);
int32_t st_raft_epoch(const st_raft_t *r);
int32_t st_raft_leader_id(const st_raft_t *r); /* -1: none known */
int32_t st_raft_voted_id(const st_raft_t *r);
int64_t st_raft_high_watermark(const st_raft_t *r);
int64_t st_raft_applied_offset(const st_raft_t *r); /* everything below is applied */
/* ST_OK, or the error of a persist / log / snapshot op that failed: the
 * node then stops (the host takes the metadata directory offline). */
st_err_t st_raft_failed(const st_raft_t *r);

#endif /* ST_RAFT_H */

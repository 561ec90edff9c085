/*
 * txn.h - the transaction coordinator (KIP-98): transactional ids, their
 * producer id and epoch, the partitions of the transaction in progress,
 * and their storage in __transaction_state.
 *
 * Two layers, as broker/group has:
 *
 *   st_tstate_t      the state machine of every transactional id whose
 *                    __transaction_state partition this broker leads
 *                    (state.c).  No threads, no I/O: time, the log, new
 *                    producer ids and the sending of markers come in and
 *                    go out through st_tstate_ops_t, so unit tests drive it
 *                    with fakes.
 *   st_txn_coord_t   the coordinator service (coordinator.c): one thread
 *                    that owns the state machine, runs the jobs request
 *                    handlers give it in order, fires its timers, replays
 *                    the partitions it leads, appends the records, and
 *                    sends WriteTxnMarkers to partition leaders.
 *
 * The coordinator of a transactional id is the leader of __transaction_state
 * partition abs(javaStringHashCode(id)) % N (Kafka's rule).  Each change of
 * a transaction is one record there, key TransactionLogKey (the id), value
 * TransactionLogValue (records.c), so replaying the partition gives every
 * transaction back; a tombstone removes an expired id.
 *
 * Threads: every st_tstate_* call and every job given to
 * st_txn_coord_submit runs on the coordinator thread.
 */
#ifndef ST_TXN_H
#define ST_TXN_H

#include "batch.h"
#include "controller.h"
#include "log.h"
#include "net.h"
#include "protocol.h"
#include "replica.h"
#include "st_base.h"

#define ST_TXN_STATE_TOPIC "__transaction_state"

/* ------------------------------------------------------------------------
 * Transaction states (Kafka's TransactionState, the same numbers on disk:
 * TransactionLogValue.transaction_status; never renumbered)
 *
 *          InitProducerId (init_pid)
 *   +-------+    AddPartitionsToTxn / AddOffsetsToTxn (add_partitions)
 *   | Empty | ------------------------------------------+
 *   +-------+                                           v
 *     ^  ^                                         +---------+
 *     |  |  InitProducerId (init_pid)              | Ongoing |<---------+
 *     |  +------------------+                      +---------+          |
 *     |                     |     EndTxn (end_txn)  |       |  EndTxn   |
 *     |                     |   commit              |       |  abort, a | add_partitions
 *     |                     |   +-------------------+       |  timeout  | (a new one)
 *     |                     |   v                           |  (tick),  |
 *     |          +---------------+   +--------------+       |  a fence  |
 *     |          | PrepareCommit |   | PrepareAbort |<------+  (init_pid)
 *     |          +---------------+   +--------------+                   |
 *     |                  | markers acknowledged  |  (markers_done)      |
 *     |                  v                       v                      |
 *     |          +----------------+  +---------------+                  |
 *     +----------| CompleteCommit |  | CompleteAbort |------------------+
 *   init_pid     +----------------+  +---------------+
 *
 *   Dead: expired (transactional.id.expiration.ms, tick) and tombstoned.
 *   PrepareEpochFence: Kafka's in-memory step of a fence; here the fence
 *   and its PrepareAbort are one record, so it is never stored.
 * ---------------------------------------------------------------------- */
typedef enum st_txn_status {
    ST_TXN_EMPTY = 0,
    ST_TXN_ONGOING = 1,
    ST_TXN_PREPARE_COMMIT = 2,
    ST_TXN_PREPARE_ABORT = 3,
    ST_TXN_COMPLETE_COMMIT = 4,
    ST_TXN_COMPLETE_ABORT = 5,
    ST_TXN_DEAD = 6,
    ST_TXN_PREPARE_EPOCH_FENCE = 7
} st_txn_status_t;

/* "Ongoing", ... (Kafka's names, as DescribeTransactions and
 * ListTransactions report them); NULL for a number out of range. */
const char *st_txn_status_name(int status);
/* The status of a name (-1 unknown). */
int st_txn_status_from_name(st_str_t name);

#define ST_TXN_NO_EPOCH ((int16_t)-1)
/* Kafka's isEpochExhausted: an epoch this high gets a new producer id. */
#define ST_TXN_EPOCH_EXHAUSTED(e) ((e) >= INT16_MAX - 1)

typedef struct st_txn_tp {
    st_str_t topic; /* owned (NUL after the bytes) */
    int32_t partition;
} st_txn_tp_t;

/* One transactional id.  Read-only outside state.c. */
typedef struct st_txn {
    st_str_t id; /* owned */
    int32_t partition; /* of __transaction_state */
    int64_t producer_id;
    int64_t last_producer_id; /* the one before a rotation; -1 none */
    int16_t producer_epoch;
    int16_t last_producer_epoch; /* the epoch before the last bump; -1 none */
    int32_t timeout_ms;
    st_txn_status_t status;
    st_txn_tp_t *parts; /* the transaction's partitions, sorted, no duplicates */
    int nparts, capparts;
    int64_t start_ts;  /* wall ms the transaction began; -1 none */
    int64_t update_ts; /* wall ms of the last change */
    int markers_out;   /* Prepare*: markers handed to the host, not yet done */
    int complete_due;  /* Prepare*: markers done, the Complete record still to write */
} st_txn_t;

/* ------------------------------------------------------------------------
 * The state machine
 * ---------------------------------------------------------------------- */
typedef struct st_tstate st_tstate_t;

/* What the host must send: the marker of one transaction to the leaders
 * of its partitions.  Borrowed for the call: copy what is kept. */
typedef struct st_txn_markers {
    st_str_t id;
    int32_t partition; /* of __transaction_state */
    int64_t producer_id;
    int16_t producer_epoch;
    int commit;
    const st_txn_tp_t *parts;
    int nparts;
} st_txn_markers_t;

typedef struct st_tstate_ops {
    int64_t (*mono_ms)(void *arg);
    int64_t (*wall_ms)(void *arg);
    /* Append one batch holding recs to __transaction_state-partition. */
    st_err_t (*append)(void *arg, int32_t partition, const st_batch_record_t *recs, int n);
    /* A request touches a partition whose state is unknown: the host may
     * start (and finish) loading it (st_tstate_set_partition). */
    void (*ensure_partition)(void *arg, int32_t partition);
    /* Write the markers of a prepared transaction; the host calls
     * st_tstate_markers_done when every partition acknowledged. */
    void (*send_markers)(void *arg, const st_txn_markers_t *m);
    /* A producer id no one has (a fresh one from the broker's block), or
     * -1 when none is at hand now. */
    int64_t (*new_producer_id)(void *arg);
    void *arg;
} st_tstate_ops_t;

typedef struct st_tstate_config {
    int32_t num_partitions; /* of __transaction_state */
    int32_t max_timeout_ms; /* transaction.max.timeout.ms */
    int64_t id_expiration_ms; /* transactional.id.expiration.ms */
    int32_t abort_interval_ms; /* transaction.abort.timed.out.transaction.cleanup.interval.ms */
} st_tstate_config_t;

typedef enum st_tpart_state {
    ST_TPART_UNKNOWN = 0, /* not looked at yet: ensure_partition is asked */
    ST_TPART_NOT_OWNED,   /* NOT_COORDINATOR */
    ST_TPART_LOADING,     /* COORDINATOR_LOAD_IN_PROGRESS */
    ST_TPART_LOADED
} st_tpart_state_t;

st_tstate_t *st_tstate_new(const st_tstate_config_t *cfg, const st_tstate_ops_t *ops);
void st_tstate_destroy(st_tstate_t *s);
const st_tstate_config_t *st_tstate_config(const st_tstate_t *s);

void st_tstate_set_partition(st_tstate_t *s, int32_t partition, st_tpart_state_t st);
st_tpart_state_t st_tstate_partition(const st_tstate_t *s, int32_t partition);
int32_t st_tstate_partition_of(const st_tstate_t *s, st_str_t transactional_id);
int st_tstate_loading(const st_tstate_t *s);

/* Replay (partition LOADING): one record of __transaction_state in log
 * order; value NULL is a tombstone.  Unknown or corrupt records are
 * skipped and counted. */
void st_tstate_load_record(st_tstate_t *s, int32_t partition, const uint8_t *key, int32_t klen,
                           const uint8_t *value, int32_t vlen);
/* Replayed: transactions found in PrepareCommit / PrepareAbort send their
 * markers again (send_markers). */
void st_tstate_load_done(st_tstate_t *s, int32_t partition);
/* Leadership lost: its transactions go (a markers_done for them later is
 * ignored). */
void st_tstate_unload(st_tstate_t *s, int32_t partition);
int st_tstate_skipped_records(const st_tstate_t *s);
/* Stopping: every later call answers NOT_COORDINATOR, no marker is sent. */
void st_tstate_close(st_tstate_t *s);

/* NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST ("") or
 * OK: the status check every API makes first. */
st_err_t st_tstate_check(st_tstate_t *s, st_str_t transactional_id);
st_txn_t *st_tstate_lookup(st_tstate_t *s, st_str_t transactional_id);
/* Every transaction of loaded partitions. */
void st_tstate_foreach(st_tstate_t *s, void (*fn)(const st_txn_t *t, void *arg), void *arg);

/* InitProducerId with a transactional id (Kafka's handleInitProducerId).
 * expected_pid / expected_epoch: v3+ (KIP-360), -1 when not sent.  On OK
 * *pid and *epoch are the answer. */
st_err_t st_tstate_init_pid(st_tstate_t *s, st_str_t transactional_id, int32_t timeout_ms,
                            int64_t expected_pid, int16_t expected_epoch, int64_t *pid,
                            int16_t *epoch);

/* AddPartitionsToTxn / AddOffsetsToTxn: the error for all of them. */
st_err_t st_tstate_add_partitions(st_tstate_t *s, st_str_t transactional_id, int64_t pid,
                                  int16_t epoch, const st_txn_tp_t *parts, int n);

/* KIP-890's verification (AddPartitionsToTxn v4+ with verify_only, a
 * partition leader asking before it appends a transaction's first batch):
 * per partition, OK when it is in the ongoing transaction of id at pid /
 * epoch, else INVALID_TXN_STATE; the transaction's own error (the
 * return) for all of them when the producer is unknown
 * (INVALID_PRODUCER_ID_MAPPING), fenced (PRODUCER_FENCED), its markers
 * are being written (CONCURRENT_TRANSACTIONS) or the id is not this
 * coordinator's.  Nothing is written. */
st_err_t st_tstate_verify(st_tstate_t *s, st_str_t transactional_id, int64_t pid, int16_t epoch,
                          const st_txn_tp_t *parts, int n, st_err_t *errs);

/* EndTxn. */
st_err_t st_tstate_end_txn(st_tstate_t *s, st_str_t transactional_id, int64_t pid,
                           int16_t epoch, int commit);

/* Every partition acknowledged the markers of the transaction: it
 * completes (CompleteCommit / CompleteAbort).  Ignored when the
 * transaction moved on or went. */
void st_tstate_markers_done(st_tstate_t *s, st_str_t transactional_id, int64_t pid,
                            int16_t epoch);

/* Abort timed-out transactions and expire idle ids when due.  Returns the
 * next deadline (monotonic ms). */
int64_t st_tstate_tick(st_tstate_t *s);

/* ------------------------------------------------------------------------
 * The coordinator service
 * ---------------------------------------------------------------------- */
typedef struct st_txn_coord st_txn_coord_t;

typedef struct st_txn_coord_config {
    st_tstate_config_t state;
    int32_t node_id;
    const char *listener; /* the leaders' listener markers go to (NULL: their first) */
    const st_client_security_t *sec; /* how it reaches that listener (borrowed; NULL: plaintext) */
    int32_t load_buffer_bytes;
    int flush_on_ack;
    int64_t (*new_producer_id)(void *arg); /* -1: none at hand */
    void *pid_arg;
} st_txn_coord_config_t;

st_txn_coord_t *st_txn_coord_new(const st_txn_coord_config_t *cfg, st_replicas_t *rm,
                                 st_controller_t *ctl, st_logmgr_t *logs, st_net_t *net);
void st_txn_coord_start(st_txn_coord_t *c);
/* Before the loops stop: later jobs find every partition NOT_COORDINATOR,
 * no marker is sent any more. */
void st_txn_coord_close_requests(st_txn_coord_t *c);
/* After the loops stopped. */
void st_txn_coord_destroy(st_txn_coord_t *c);

typedef void (*st_txn_job_fn)(st_txn_coord_t *c, st_tstate_t *s, void *arg);
void st_txn_coord_submit(st_txn_coord_t *c, st_txn_job_fn fn, void *arg);
/* Offset after the last record appended to the partition (0 when none or
 * when answers need not wait).  Coordinator thread. */
int64_t st_txn_coord_written_end(st_txn_coord_t *c, int32_t partition);
int32_t st_txn_coord_num_partitions(st_txn_coord_t *c);
/* Run fn (coordinator thread) once the transaction of id at pid / epoch
 * is no longer PrepareCommit / PrepareAbort (its markers are written and
 * the Complete record appended), or after wait_ms, or when the
 * coordinator stops.  Coordinator thread. */
void st_txn_coord_when_ended(st_txn_coord_t *c, st_str_t id, int64_t pid, int16_t epoch,
                             int32_t wait_ms, st_txn_job_fn fn, void *arg);

/* KIP-890 part 1, the partition leader's side: ask the coordinator of id
 * (this broker's state, or AddPartitionsToTxn v4 verify-only to the
 * broker leading its __transaction_state partition) whether each of the
 * partitions is in the ongoing transaction at pid / epoch.  cb gets one
 * error per partition, as a Produce answers it (OK: verified;
 * INVALID_TXN_STATE: not in the transaction; INVALID_PRODUCER_ID_MAPPING,
 * INVALID_PRODUCER_EPOCH; NOT_ENOUGH_REPLICAS or NETWORK_EXCEPTION when
 * the coordinator could not say, which producers retry), once, on the
 * coordinator thread or loop 0; errs is valid during the call. */
typedef void (*st_txn_verify_cb)(void *arg, const st_err_t *errs);
void st_txn_coord_verify(st_txn_coord_t *c, st_str_t id, int64_t pid, int16_t epoch,
                         const st_txn_tp_t *parts, int n, st_txn_verify_cb cb, void *arg);

#endif /* ST_TXN_H */

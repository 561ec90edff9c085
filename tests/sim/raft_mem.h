/*
 * raft_mem.h - one Raft node over memory, for the simulator and the unit
 * tests: st_raft_ops_t over an in-memory log, quorum-state file and
 * snapshot store that model what a disk keeps across a crash.
 *
 * The disk model:
 *   - log_append makes entries readable at once; log_flush queues a flush
 *     covering what was appended so far; the driver completes queued
 *     flushes (rm_node_flush_complete) whenever it likes, in order;
 *   - a crash (rm_node_crash) loses every queued flush and the entries above
 *     the durable end, but perhaps a first few of them; truncation, log_reset and log_delete_before are
 *     durable at once (the host does them with a synchronous write);
 *   - the quorum state is kept as the bytes st_raft_qstate_encode wrote and
 *     decoded at each start, as stratad reads its file;
 *   - snapshots are durable on create and install; a snapshot being
 *     received is lost by a crash.
 *
 * The state machine is a running hash of the applied entries (offset,
 * epoch, bytes); a snapshot holds the hash and its end offset, padded with
 * bytes derived from both so that it takes several FetchSnapshot chunks and
 * any damage shows when it is loaded.
 *
 * Messages leave through the send callback (borrowed for the call, as
 * raft.h says); rm_msg_copy makes an owned deep copy for a network to hold.
 * Single-threaded.
 */
#ifndef ST_RAFT_MEM_H
#define ST_RAFT_MEM_H

#include "raft.h"

typedef struct rm_entry {
    int64_t base;
    int32_t epoch;
    int32_t count;
    int32_t control;
    uint8_t *data;
    int32_t len;
} rm_entry_t;

typedef struct rm_node rm_node_t;

typedef struct rm_hooks {
    void *ctx;
    void (*send)(void *ctx, rm_node_t *from, int32_t dest, const st_raft_msg_t *m);
    /* After the state machine took these entries (checks go here). */
    void (*applied)(void *ctx, rm_node_t *n, const st_raft_entry_t *e, int k);
    /* After a snapshot replaced the state machine. */
    void (*loaded)(void *ctx, rm_node_t *n, st_raft_snapshot_id_t id);
    void (*flush_queued)(void *ctx, rm_node_t *n);
} rm_hooks_t;

#define RM_SNAPSHOT_PAD 2500

struct rm_node {
    int32_t id;
    st_raft_t *r; /* NULL while down */
    const int64_t *clock;
    uint64_t rng;
    rm_hooks_t hooks;

    /* The log: entries[0..nlog) from log_start; durable below durable_end. */
    rm_entry_t *log;
    int nlog, caplog;
    int64_t log_start;
    int64_t durable_end;
    int64_t *flushes; /* queued flush targets, oldest first */
    int nflush, capflush;
    st_raft_entry_t *readbuf;
    int capread;

    /* The quorum-state file. */
    uint8_t qs[32 + 4 * ST_RAFT_MAX_VOTERS];
    size_t qs_len; /* 0: no file */
    int persists;

    /* Snapshots: the latest, and one being received. */
    int has_snap;
    st_raft_snapshot_id_t snap_id;
    uint8_t *snap;
    int64_t snap_len;
    int has_stage;
    st_raft_snapshot_id_t stage_id;
    uint8_t *stage;
    int64_t stage_len;
    int snapshots_made, snapshots_installed;

    /* The state machine. */
    int64_t sm_next;
    uint64_t sm_hash;

    /* Injected faults: the next persist / append fails (once). */
    st_err_t fail_persist, fail_append;
};

void rm_node_init(rm_node_t *n, int32_t id, const int64_t *clock, uint64_t seed,
                  const rm_hooks_t *hooks);
void rm_node_fini(rm_node_t *n);
/* A new st_raft_t from what the disk holds (a start or a restart). */
st_err_t rm_node_start(rm_node_t *n, const st_raft_config_t *cfg, char *err, size_t errlen);
/* The process dies: st_raft_t gone, queued flushes lost, the state
 * machine empty; of the entries appended since the last completed flush,
 * the first keep_unflushed reached the disk anyway (the page cache wrote
 * them) and the rest are lost. */
void rm_node_crash(rm_node_t *n, int keep_unflushed);
/* Completes the oldest queued flush; 0 when none was queued. */
int rm_node_flush_complete(rm_node_t *n);
const rm_entry_t *rm_node_entry(const rm_node_t *n, int64_t offset); /* NULL: not held */
int64_t rm_node_log_end(const rm_node_t *n);
uint64_t rm_entry_hash(int64_t base, int32_t epoch, const uint8_t *data, int32_t len);
/* The running hash after applying an entry. */
uint64_t rm_sm_step(uint64_t h, uint64_t entry_hash);

st_raft_msg_t *rm_msg_copy(const st_raft_msg_t *m);
void rm_msg_free(st_raft_msg_t *m);

#endif

/*
 * metalog.h - the storage half of the Raft's ops for __cluster_metadata
 * (raft.h's st_raft_ops_t): the metadata log as Raft entries over
 * broker/log, the quorum-state file, and snapshots of the metadata image
 * (`<end_offset>-<epoch>.checkpoint`), all in the directory of the
 * __cluster_metadata-0 log (KRaft's layout).
 *
 * The host fills its ops table with st_metalog_fill_ops: the storage ops
 * then get the st_metalog_t as their arg, and the host's own ops (clock,
 * network, apply) reach the host through st_metalog_host(arg).
 *
 * Threads: one thread (the Raft's) calls every function here, except
 * st_metalog_flush's completion, which runs on the metalog's flush thread
 * and calls cfg.flushed there (the host wakes the Raft thread, which then
 * calls st_raft_log_flushed).  Entries and snapshot bytes handed out are
 * borrowed until the next call of the same kind.
 */
#ifndef ST_METALOG_H
#define ST_METALOG_H

#include "controller.h"
#include "raft.h"

typedef struct st_metalog st_metalog_t;

/* A flush completed (log_durable_end may have moved).  On the flush
 * thread, with no lock of the metalog held; must not call into it. */
typedef void (*st_metalog_flushed_cb)(void *arg);

/* The state machine, as snapshots need it. */
typedef struct st_metalog_sm {
    void *arg;
    /* The current image, kept (the metalog releases it), and the end of the
     * entries applied to it: everything below *applied_end. */
    st_meta_image_t *(*image)(void *arg, int64_t *applied_end);
    /* The state machine becomes img (taken), the image of snapshot id. */
    void (*load)(void *arg, st_meta_image_t *img, st_raft_snapshot_id_t id);
} st_metalog_sm_t;

typedef struct st_metalog_config {
    st_log_t *log; /* __cluster_metadata-0, kept by the metalog until close */
    st_metalog_flushed_cb flushed;
    void *flushed_arg;
    /* log_flush fsyncs before it returns and calls no callback (tests,
     * tools); otherwise a flush runs on the metalog's own thread. */
    int sync_flush;
    st_metalog_sm_t sm;
    int snapshots_kept; /* the newest this many stay; 0: 2 */
    void *host;         /* st_metalog_host() */
} st_metalog_config_t;

/* Removes leftover partial snapshots, finds the latest snapshot, starts the
 * log at that snapshot when it ends below it (a crash between an install
 * and the log's reset), and refuses (CORRUPT, with a sentence naming the
 * problem in err) a log whose start no snapshot covers. */
st_err_t st_metalog_open(const st_metalog_config_t *cfg, st_metalog_t **out, char *err,
                         size_t errlen);
/* Waits for a flush in progress (its callback runs), then releases the log.
 * Close before the log manager. */
void st_metalog_close(st_metalog_t *m);
const char *st_metalog_dir(const st_metalog_t *m);
void *st_metalog_host(const st_metalog_t *m);
/* The sentence of the last refusal (a corrupt file, a bad chunk, ...). */
const char *st_metalog_error(const st_metalog_t *m);

/* persist, the log_* and snapshot_* ops, with arg = m. */
void st_metalog_fill_ops(st_metalog_t *m, st_raft_ops_t *ops);

/* ---- the quorum-state file ------------------------------------------------ */

#define ST_METALOG_QSTATE_FILE "quorum-state"

/* *found = 0 when there is no file yet.  A file that does not decode is
 * refused (CORRUPT or TRUNCATED) with err naming the file and the problem:
 * the node must not start, as it could vote twice in an epoch. */
st_err_t st_metalog_qstate_read(st_metalog_t *m, st_raft_qstate_t *out, int *found, char *err,
                                size_t errlen);
/* Durable when it returns ST_OK (temporary file, fsync, rename, dir fsync). */
st_err_t st_metalog_qstate_write(st_metalog_t *m, const st_raft_qstate_t *qs);

/* ---- the log as Raft entries -------------------------------------------------
 *
 * One entry is one record batch: a data entry's data is the batch itself
 * (the log stamps baseOffset and partitionLeaderEpoch), a control entry is
 * a control batch of one record, key (int16 0, int16 type), value = data,
 * timestamp -1 (so every replica stores the same bytes).
 */

/* One entry as one stored-form batch appended to out (a data entry's batch
 * checked and copied, a control entry built), offset and epoch stamped:
 * what the log stores, and what a Fetch response carries.  INVAL or
 * CORRUPT with why. */
st_err_t st_metalog_entry_encode(const st_raft_entry_t *entry, st_buf_t *out, char *why,
                                 size_t whylen);
/* The entry one whole batch holds (CRC checked; a control batch's one
 * record's value as data); out points into p. */
st_err_t st_metalog_entry_decode(const uint8_t *p, int32_t size, st_raft_entry_t *out,
                                 char *why, size_t whylen);

/* entries[0].base_offset must be the log end, the next ones contiguous,
 * epochs never going down; a data entry must be one whole batch with a
 * good CRC and entry.record_count records (INVAL / CORRUPT otherwise,
 * nothing written). */
st_err_t st_metalog_append(st_metalog_t *m, const st_raft_entry_t *entries, int n);
/* Starts making everything appended durable: see the file comment. */
void st_metalog_flush(st_metalog_t *m);
/* The error of the last flush (the log is offline after a failed fsync). */
st_err_t st_metalog_flush_error(const st_metalog_t *m);
int64_t st_metalog_durable_end(st_metalog_t *m);
st_err_t st_metalog_truncate(st_metalog_t *m, int64_t offset);
/* Entries from the one holding offset, about max_bytes of them and at
 * least one when there is one; OFFSET_OUT_OF_RANGE outside [start, end];
 * CORRUPT (message in st_metalog_error) for a stored batch that does not
 * check. */
st_err_t st_metalog_read(st_metalog_t *m, int64_t offset, int32_t max_bytes,
                         const st_raft_entry_t **entries, int *n);
int64_t st_metalog_start_offset(st_metalog_t *m);
int64_t st_metalog_end_offset(st_metalog_t *m);
void st_metalog_end_offset_for_epoch(st_metalog_t *m, int32_t epoch, int32_t *out_epoch,
                                     int64_t *out_end);
/* The log becomes empty and starts at id.end_offset. */
st_err_t st_metalog_reset(st_metalog_t *m, st_raft_snapshot_id_t id);
/* The log start moves to offset (at most the log end); segments wholly
 * below it are deleted. */
st_err_t st_metalog_delete_before(st_metalog_t *m, int64_t offset);

/* ---- snapshots (snapshot.c) --------------------------------------------------- */

/* The image of cfg.sm (which must have applied exactly the entries below
 * id.end_offset) written as snapshot id; durable on return; older
 * snapshots beyond cfg.snapshots_kept are deleted. */
st_err_t st_metalog_snapshot_create(st_metalog_t *m, st_raft_snapshot_id_t id);
/* 1 and the newest snapshot, 0 when there is none. */
int st_metalog_snapshot_latest(st_metalog_t *m, st_raft_snapshot_id_t *id);
/* Verifies the whole file and hands its image to cfg.sm.load; a truncated
 * or corrupt file is refused with its name in st_metalog_error. */
st_err_t st_metalog_snapshot_load(st_metalog_t *m, st_raft_snapshot_id_t id);
/* Up to max_bytes of the file from position (borrowed until the next
 * snapshot call) and its size; NOT_FOUND when there is no such snapshot;
 * past its end no bytes (the caller compares position and size);
 * OFFSET_OUT_OF_RANGE for a negative position. */
st_err_t st_metalog_snapshot_read(st_metalog_t *m, st_raft_snapshot_id_t id, int64_t position,
                                  int32_t max_bytes, const uint8_t **p, int32_t *len,
                                  int64_t *size);
/* A snapshot being received: chunks in order from position 0 into a
 * partial file (position 0 starts it again); INVAL out of order. */
st_err_t st_metalog_snapshot_write(st_metalog_t *m, st_raft_snapshot_id_t id, int64_t position,
                                   const uint8_t *p, int32_t len);
/* The received file must be size bytes and check whole (header, footer,
 * CRC32C); then it is synced, renamed into place and the latest.  A file
 * that does not check is refused (TRUNCATED / CORRUPT, named in
 * st_metalog_error) and removed; nothing else changed, so the transfer
 * can start again from position 0. */
st_err_t st_metalog_snapshot_install(st_metalog_t *m, st_raft_snapshot_id_t id, int64_t size);

/* The file format itself, without a metalog (tools, tests). */
st_err_t st_metasnap_write(const char *dir, st_raft_snapshot_id_t id, const st_meta_image_t *img,
                           char *err, size_t errlen);
/* Reads and checks the file at path, which must hold snapshot id; *out is
 * its image (offset id.end_offset - 1).  CORRUPT or TRUNCATED with err
 * naming the file and what is wrong. */
st_err_t st_metasnap_read(const char *path, st_raft_snapshot_id_t id, st_meta_image_t **out,
                          char *err, size_t errlen);

#endif /* ST_METALOG_H */

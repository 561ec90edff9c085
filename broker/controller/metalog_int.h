/* metalog_int.h - the st_metalog_t shared by metalog.c and snapshot.c. */
#ifndef ST_METALOG_INT_H
#define ST_METALOG_INT_H

#include "metalog.h"

#define ST_METALOG_ERR_MAX 1024

struct st_metalog {
    st_metalog_config_t cfg;
    st_log_t *log;
    char *dir; /* the log's directory: quorum-state and snapshots live there */
    char err[ST_METALOG_ERR_MAX];

    /* Raft thread only */
    st_buf_t abuf;         /* batches being appended */
    st_buf_t rbuf;         /* bytes behind the entries of the last read */
    st_raft_entry_t *ents; /* the entries of the last read */
    int capents;
    uint8_t *sbuf; /* the chunk of the last snapshot read */
    int32_t capsbuf;
    int have_latest;
    st_raft_snapshot_id_t latest;
    int recv_fd; /* the snapshot being received, -1: none */
    st_raft_snapshot_id_t recv_id;
    int64_t recv_pos;

    /* the flush thread; lock guards these */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int flush_requested, stopping, started;
    st_err_t flush_err;
    pthread_t flusher;
};

/* Refusals: the sentence goes to m->err and to the log. */
void st_metalog__fail(st_metalog_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Scan the directory: drop partial snapshots, note the latest. */
void st_metalog__snapshot_scan(st_metalog_t *m);
/* Close a partial received snapshot (it is removed). */
void st_metalog__snapshot_recv_abort(st_metalog_t *m);

#endif /* ST_METALOG_INT_H */

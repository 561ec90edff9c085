/*
 * controller_int.h - the controller's state, shared by controller.c (the
 * operations and the state machine's host) and quorum.c (the Raft that
 * commits the metadata log, and the controller thread's loop).
 *
 * Locks: c->lock guards the image pointer, the job queue, the event queue,
 * the flush count, stopping and the leader fields other threads read;
 * everything else belongs to the controller thread (or to the thread in
 * st_controller_open before the controller thread exists).
 */
#ifndef ST_CONTROLLER_INT_H
#define ST_CONTROLLER_INT_H

#include "controller.h"
#include "metalog.h"
#include "raft.h"
#include "raft_wire.h"

#define META_TOPIC "__cluster_metadata"

typedef struct job {
    struct job *next;
    st_controller_job_cb fn;
    void *arg;
} job_t;

/* What the loops hand the controller thread for the Raft: a request from
 * another node (req set; answered later through the pending table) or the
 * answer to one of ours (arena and frame owned by the event). */
typedef struct ctl_event {
    struct ctl_event *next;
    int32_t from;
    st_raft_msg_t msg;
    st_request_t *req; /* inbound request; NULL for a response */
    int16_t version;   /* of req */
    st_arena_t arena;  /* a response's decoded body */
    uint8_t *frame;    /* a response's bytes (entries point into them) */
} ctl_event_t;

/* An inbound request the Raft has not answered yet. */
typedef struct pending_req {
    int32_t request_id;
    int32_t from;
    st_request_t *req;
    int16_t version;
    int type;          /* ST_RAFT_*_REQUEST */
    int64_t since_ms;
} pending_req_t;

typedef struct peer {
    int32_t id;
    char host[256];
    int port;
    st_netclient_t *nc;
} peer_t;

struct st_controller {
    st_controller_config_t cfg;
    st_logmgr_t *logs;
    st_log_t *log;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    st_meta_image_t *image;
    job_t *head, *tail;
    ctl_event_t *ev_head, *ev_tail;
    int flushes; /* metadata log flushes completed, not yet told to the Raft */
    int stopping;
    int thread_done; /* events arriving now are dropped */
    pthread_t thread;
    int started;
    st_image_listener_cb listener;
    void *listener_arg;
    char cluster_id[64];

    /* the quorum (controller thread) */
    st_metalog_t *ml;
    st_raft_t *raft;
    int64_t applied_end; /* every entry below it is in the image */
    peer_t *peers;       /* the other voters */
    int npeers;
    pending_req_t *pending;
    int npending, cap_pending;
    int32_t next_request_id;
    uint64_t rng;
    /* a commit waiting for its entry: the epoch the entry at wait_base was
     * applied with (-1: not yet) */
    int64_t wait_base;
    int32_t wait_epoch;
    /* read by other threads (under lock) */
    int32_t leader_id; /* -1: none known */
    int32_t leader_epoch;
};

void st_ctl__publish(st_controller_t *c, st_meta_image_t *img);
/* Decodes the records of the batches in [p, p + len) and applies them all
 * to the image in one st_image_apply, last offset `last`; publishes. */
st_err_t st_ctl__apply_batches(st_controller_t *c, const uint8_t *const *batches,
                               const int32_t *lens, int n, int64_t last);

/* quorum.c */
st_err_t st_ctl__quorum_open(st_controller_t *c, char *err, size_t errlen);
/* Waits until the Raft has applied everything the log held at open (a
 * quorum of one elects itself at once; others return at once). */
st_err_t st_ctl__quorum_catch_up(st_controller_t *c, char *err, size_t errlen);
void st_ctl__quorum_close(st_controller_t *c);
void *st_ctl__main(void *arg);
/* Proposes one batch of n records and waits for it to be applied:
 * NOT_CONTROLLER when this node does not lead (or stops leading first),
 * REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR when the log failed. */
st_err_t st_ctl__commit(st_controller_t *c, const uint8_t *batch, size_t len, int n);

#endif /* ST_CONTROLLER_INT_H */

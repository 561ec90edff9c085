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
typedef struct ctl_event ctl_event_t;
typedef void (*ctl_event_fn)(st_controller_t *c, ctl_event_t *ev);
struct ctl_event {
    struct ctl_event *next;
    ctl_event_fn fn;   /* set: not for the Raft, fn handles it (then it is freed) */
    void *body;        /* fn's decoded answer (in arena), NULL on failure */
    st_err_t err;      /* fn's: why body is NULL */
    int32_t from;
    st_raft_msg_t msg;
    st_request_t *req; /* inbound request; NULL for a response */
    int16_t version;   /* of req */
    st_arena_t arena;  /* a response's decoded body */
    uint8_t *frame;    /* a response's bytes (entries point into them) */
};

/* An inbound request the Raft has not answered yet. */
typedef struct pending_req {
    int32_t request_id;
    int32_t from;
    st_request_t *req;
    int16_t version;
    int type;          /* ST_RAFT_*_REQUEST */
    int64_t since_ms;
} pending_req_t;

typedef struct fwd_create fwd_create_t;

typedef struct peer {
    int32_t id;
    char host[256];
    int port;
    st_netclient_t *nc;  /* the Raft's requests */
    /* forwarded admin requests, registration and heartbeats: a connection
     * of their own, so a parked Fetch or a commit waiting on the quorum
     * never holds them up (nor they it) */
    st_netclient_t *nc_admin;
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
    int quiesced;    /* st_controller_stop done: the Raft is no longer driven */
    int shutdown_acked; /* the active controller let this broker go */
    pthread_t thread;
    int started;
    st_image_listener_cb listener;
    void *listener_arg;
    char cluster_id[64];

    /* the quorum (controller thread) */
    st_metalog_t *ml;
    st_raft_t *raft;
    int64_t applied_end; /* every entry below it is in the image */
    int32_t voter_ids[ST_RAFT_MAX_VOTERS]; /* this node's voter set, ascending */
    int nvoter_ids;
    int32_t voters_checked_epoch; /* the last LeaderChange compared with it */
    int voter;  /* this node is one of the voters (else an observer) */
    int alone;  /* the quorum is this node alone: no network, no one to ask */
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
    int64_t wait_seen_us; /* when it reached the high watermark, before its apply
                           * (logger.debug=quorum.commit) */
    /* this node as a broker: its registration with the active controller */
    st_uuid_t incarnation;
    int64_t broker_epoch; /* -1: not registered */
    int64_t previous_broker_epoch; /* of the last clean stop; -1: none */
    int reg_in_flight, hb_in_flight, self_reg_queued;
    int64_t next_reg_ms, next_hb_ms;
    /* the active controller's view of the brokers: last heartbeats */
    struct hb {
        int32_t id;
        int64_t last_ms;
        int fence_queued;
    } *hbs;
    int nhbs;
    int32_t hbs_epoch; /* the epoch the table was started in */
    int64_t next_fence_check_ms;
    int64_t next_rebalance_ms; /* auto.leader.rebalance.enable, 0: not yet set */
    int64_t members_due; /* st_ctl__members_tick's answer, -1: none */
    fwd_create_t *fwd_create; /* the one creation forwarded and awaited */

    /* read by other threads (under lock) */
    int32_t leader_id; /* -1: none known */
    int32_t leader_epoch;
};

void st_ctl__publish(st_controller_t *c, st_meta_image_t *img);
/* Decodes the records of the batches in [p, p + len) and applies them all
 * to the image in one st_image_apply, last offset `last`; publishes. */
st_err_t st_ctl__apply_batches(st_controller_t *c, const uint8_t *const *batches,
                               const int32_t *lens, int n, int64_t last);

/* brokers.c: registration, heartbeats and fencing */
void st_ctl__members_init(st_controller_t *c);
/* After each turn: what membership wants done now; returns when it next
 * wants to run (st_mono_ms clock), -1: nothing due. */
int64_t st_ctl__members_tick(st_controller_t *c);
void st_ctl__members_fini(st_controller_t *c);
/* Controlled shutdown (controller thread): leaders moved off this broker
 * by the active controller, then, if it is this node, the Raft resigns. */
void st_ctl__members_shutdown(st_controller_t *c);
/* Leader only: registers this node (unfenced: the leader is caught up). */
void st_ctl__register_self(st_controller_t *c);

/* quorum.c */
/* Sends a request to node dest on its outbound client; when it is answered
 * (or fails) fn runs on the controller thread with the decoded body. */
st_err_t st_ctl__send(st_controller_t *c, int32_t dest, int16_t api_key, int16_t version,
                      const void *body, ctl_event_fn fn);
/* Pumps the Raft and the events (not jobs) until done(c) or ms pass. */
void st_ctl__pump_until(st_controller_t *c, int (*done)(st_controller_t *), int64_t ms);
/* CreateTopics of this node's own (auto-creation, __consumer_offsets) sent
 * to the active controller when another node leads; ST_OK with res filled
 * when it was, NOT_FOUND when this node should do it itself. */
st_err_t st_ctl__forward_create(st_controller_t *c, const st_new_topic_t *t, int validate_only,
                                st_op_result_t *res);
/* The base offset the next proposal will take (the leader's log end). */
int64_t st_ctl__next_offset(st_controller_t *c);
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
/* controller.c: encode recs (type, struct) as one batch and commit it. */
typedef struct st_ctl_rec {
    int type;
    const void *rec;
} st_ctl_rec_t;
st_err_t st_ctl__commit_records(st_controller_t *c, const st_ctl_rec_t *recs, int n);

/* Whether broker id is registered and not fenced in img. */
static inline int st_ctl__live(const st_meta_image_t *img, int32_t id) {
    const st_meta_broker_t *b = st_image_broker(img, id);
    return b && !b->fenced;
}

/* Whether id is among v[0..n); whether two lists are the same, in order. */
static inline int st_ctl__has(const int32_t *v, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (v[i] == id) return 1;
    return 0;
}
static inline int st_ctl__same_list(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && (na == 0 || !memcmp(a, b, sizeof *a * (size_t)na));
}

/* reassign.c: PartitionChangeRecords gathered into one batch; each change
 * owns the lists it points at. */
enum { ST_CHG_ISR, ST_CHG_REPLICAS, ST_CHG_ADDING, ST_CHG_REMOVING, ST_CHG_ELR, ST_CHG_LKELR, ST_CHG_NLISTS };
typedef struct st_ctl_changes {
    st_mrec_partition_change_t *v;
    int32_t *(*own)[ST_CHG_NLISTS];
    int n, cap;
} st_ctl_changes_t;
/* A change of mp: leader (ST_MREC_NO_LEADER_CHANGE: unchanged) and, with
 * isr set, the ISR; every other list unchanged. */
void st_ctl__changes_add(st_ctl_changes_t *ch, const st_meta_topic_t *t, const st_meta_partition_t *mp,
                         int32_t leader, const int32_t *isr, int nisr);
/* Sets list `which` (ST_CHG_*) of the change added last. */
void st_ctl__changes_list(st_ctl_changes_t *ch, int which, const int32_t *v, int n);
/* The same for change i. */
void st_ctl__changes_list_at(st_ctl_changes_t *ch, int i, int which, const int32_t *v, int n);
void st_ctl__changes_fini(st_ctl_changes_t *ch);
/* Commits `first` (when set) and the changes as one batch, each change's
 * ELR and last known ELR filled in first (st_ctl__changes_elr). */
st_err_t st_ctl__commit_changes(st_controller_t *c, const st_ctl_rec_t *first, st_ctl_changes_t *ch);
/* mp's ISR becomes isr (AlterPartition): that change, or the one that
 * completes mp's reassignment with it. */
void st_ctl__isr_change(st_ctl_changes_t *ch, const st_meta_image_t *img, const st_meta_topic_t *t,
                        const st_meta_partition_t *mp, const int32_t *isr, int nisr);

/* elect.c: the leader, ISR and eligible leader replica rules (KIP-966)
 * every partition change follows. */
/* min.insync.replicas of t, at most its replication factor n. */
int st_ctl__min_isr(const st_controller_t *c, const st_meta_topic_t *t, int n);
int st_ctl__unclean_allowed(const st_controller_t *c, const st_meta_topic_t *t);
/* What a broker event does to mp, added to ch when it changes anything:
 * `removed` (fenced, shutting down) leaves the ISR and may not lead;
 * `added` (being unfenced) may lead though img still shows it fenced;
 * `unclean` (registered again after an unclean stop, so it may have lost
 * what it had not flushed) leaves ISR and ELR and may not lead; -1: none.
 * Where mp then needs a leader one is elected: from the ISR; from the
 * ELR when the ISR is empty; the last known leader when both are; any
 * live replica when unclean.leader.election.enable. */
void st_ctl__broker_change(st_controller_t *c, const st_meta_image_t *img, const st_meta_topic_t *t,
                           const st_meta_partition_t *mp, int32_t removed, int32_t added,
                           int32_t unclean, st_ctl_changes_t *ch);
/* The partitions of every topic where broker id is in the ISR or ELR, or
 * leads (in_elr: the ELR counts), or that have no leader (leaderless). */
typedef enum { ST_CTL_IN_ISR, ST_CTL_IN_ISR_OR_ELR, ST_CTL_LEADERLESS } st_ctl_which_t;
void st_ctl__broker_changes(st_controller_t *c, const st_meta_image_t *img, st_ctl_which_t which,
                            int32_t id, int32_t removed, int32_t added, int32_t unclean,
                            st_ctl_changes_t *ch);
/* Fills in the ELR and last known ELR of each change that leaves them
 * unset, from the partition in c's image and the ISR and leader the
 * change leaves. */
void st_ctl__changes_elr(st_controller_t *c, st_ctl_changes_t *ch);
/* After a config change of topic t: the ELR of its partitions whose ISR
 * now reaches min.insync.replicas is emptied. */
void st_ctl__elr_reconcile(st_controller_t *c, const char *topic, size_t len);

#endif /* ST_CONTROLLER_INT_H */

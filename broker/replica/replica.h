/*
 * replica.h - the partitions this broker hosts, kept in step with the
 * metadata image, and the wake-ups of requests waiting on them.
 *
 * A st_partition_t joins a partition log to what the request handlers need
 * (topic id, leader epoch, min.insync.replicas, effective config), to the
 * loops whose parked requests watch it (after an append, a flush or a move
 * of the high watermark the log's notify callback wakes exactly those
 * loops) and to its replica state: who leads it at which epoch, its
 * replicas and ISR, and, while this broker leads it, where each follower's
 * log ends (Kafka's Partition and its Replica states).
 *
 * Leader: appends stamp the leader epoch; each follower's fetch tells its
 * log end (st_partition_follower_fetch); the high watermark is the
 * smallest log end over the ISR; a follower that caught up joins the ISR
 * and one that has not caught up for replica.lag.time.max.ms leaves it,
 * both through AlterPartition to the active controller, whose
 * PartitionChange record is the truth (until it is committed the leader
 * counts the larger of the two ISRs for the high watermark and the
 * committed one for min.insync.replicas, KIP-497).
 * Follower: fetcher.c fetches from the leader and appends as follower.
 *
 * Threads: lookups from any thread (read lock of the table); the table and
 * the image's fields (leader, epochs, replicas, ISR) change in
 * st_replicas_sync on the controller thread; the followers' states on the
 * loops that serve their fetches.  Every replica-state field is guarded by
 * the partition's rlock; leader, leader_epoch, isr_size and
 * min_insync_replicas are also kept as atomics for lock-free reads on the
 * request path (written only under rlock).  Partitions are refcounted.
 */
#ifndef ST_REPLICA_H
#define ST_REPLICA_H

#include "config.h"
#include "controller.h"
#include "delayed.h"
#include "log.h"
#include "net.h"
#include "st_tiering.h"

/* Leader epoch fencing (KIP-320): -1 accepts any; an older epoch is
 * FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH. */
static inline st_err_t st_check_leader_epoch(int32_t requested, int32_t current) {
    if (requested < 0 || requested == current) return ST_OK;
    return requested < current ? ST_E_FENCED_LEADER_EPOCH : ST_E_UNKNOWN_LEADER_EPOCH;
}

typedef struct st_partition {
    int refs;
    char *topic;
    st_uuid_t topic_id;
    int32_t index;
    st_log_t *log;
    int32_t leader_epoch;        /* atomic */
    int32_t leader;              /* atomic: the broker that leads it (the image's), -1: none */
    int32_t min_insync_replicas; /* atomic */
    int32_t isr_size;            /* atomic: the committed ISR's */
    uint64_t waiters; /* atomic: bit i = loop i has a parked request here */
    struct st_replicas *owner;
    /* replica state, under rlock */
    pthread_mutex_t rlock;
    struct st_replica_state *rs;
    /* tiered storage (NULL when the topic is not tiered); set and cleared
     * by the image's thread under tier_lock, read elsewhere through
     * st_partition_tier (a reference) or st_partition_tiered */
    st_tier_part_t *tier;
    pthread_mutex_t tier_lock;
    /* atomic, the image's thread writes it: st_tier_mode_t of tier as the
     * topic's settings ask (KIP-950); with ST_TIER_DELETE nothing remote
     * is served, so that handlers see no tier part */
    int tier_mode;
    int64_t remote_start, remote_end; /* atomic: [start, end) in the bucket */
    /* metrics (broker/admin's /metrics), relaxed atomics, any thread:
     * Kafka's BrokerTopicMetrics of this partition */
    struct {
        uint64_t bytes_in, messages_in;    /* appended as leader */
        uint64_t bytes_out;                /* sent to consumers */
        uint64_t remote_bytes_out;         /* of those, read from the bucket */
        uint64_t replication_bytes_out;    /* sent to followers */
    } counters;
} st_partition_t;

/* Bytes a Fetch answer carries for p (h_fetch.c): to a consumer, from the
 * bucket or not, or to a follower. */
static inline void st_partition_count_out(st_partition_t *p, int64_t bytes, int follower,
                                          int remote) {
    if (bytes <= 0) return;
    uint64_t n = (uint64_t)bytes;
    if (follower) {
        __atomic_add_fetch(&p->counters.replication_bytes_out, n, __ATOMIC_RELAXED);
        return;
    }
    __atomic_add_fetch(&p->counters.bytes_out, n, __ATOMIC_RELAXED);
    if (remote) __atomic_add_fetch(&p->counters.remote_bytes_out, n, __ATOMIC_RELAXED);
}

typedef struct st_replicas st_replicas_t;

st_replicas_t *st_replicas_new(const st_broker_config_t *cfg, st_logmgr_t *logs);
void st_replicas_set_net(st_replicas_t *rm, st_net_t *net);
/* How the fetchers reach the inter-broker listener (TLS, SASL); borrowed,
 * before st_replicas_set_controller.  NULL: plaintext. */
void st_replicas_set_client_security(st_replicas_t *rm, const st_client_security_t *sec);
const st_client_security_t *st_replicas_client_security(const st_replicas_t *rm);
/* Where a loop's parked requests wait (before st_net_start): a change of a
 * partition is notified to the purgatory of each loop watching it. */
void st_replicas_set_purgatories(st_replicas_t *rm, st_purgatory_t *(*of_loop)(st_loop_t *loop));
/* p's tier part with a reference of the caller's (st_tier_part_release
 * it), or NULL when p is not tiered (or tiering was switched off and its
 * remote log is being deleted): a part stays valid while a request uses
 * it though the partition is deleted meanwhile. */
st_tier_part_t *st_partition_tier(st_partition_t *p);
/* A read replica (strata.remote.read.replica): what it serves is another
 * cluster's, in the bucket; nothing is appended or deleted here. */
int st_partition_read_replica(st_partition_t *p);
/* Whether p is tiered (no reference: for a test, not a use). */
int st_partition_tiered(st_partition_t *p);
/* p's log was just started empty at offset because only the bucket holds
 * what lies below (st_log_truncate_fully): take the producer state of
 * those batches from the bucket's snapshot (KIP-405), so that producers
 * idle since then keep their sequences should this replica lead.
 * Blocking (object store reads); a failure is logged and leaves the state
 * empty, as before. */
void st_partition_restore_from_bucket(st_partition_t *p, st_tier_part_t *tp, int64_t offset);

/* The remote log manager (NULL: tiered storage off). */
void st_replicas_set_tier(st_replicas_t *rm, st_tier_t *tier);
void st_replicas_destroy(st_replicas_t *rm);

/* The image listener: open logs of new partitions, delete those of removed
 * topics, push config changes. */
void st_replicas_sync(const st_meta_image_t *old_img, const st_meta_image_t *new_img, void *rm);

/* A kept partition, or NULL; *topic_known tells an unknown topic (0), an
 * unknown partition (1) and a partition that exists but is not hosted
 * here (2). */
st_partition_t *st_replicas_lookup(st_replicas_t *rm, const char *topic, size_t len,
                                   int32_t partition, int *topic_known);
st_partition_t *st_replicas_lookup_id(st_replicas_t *rm, const st_uuid_t *id, int32_t partition);
void st_partition_release(st_partition_t *p);
/* OK when this broker leads p (clients may produce and fetch), else
 * NOT_LEADER_OR_FOLLOWER: the image names another leader, or none. */
st_err_t st_partition_check_leader(const st_partition_t *p);
/* OK when this broker is a follower of p (the image names another leader
 * and this broker among its replicas): a consumer may fetch from it
 * (KIP-392), up to its high watermark. */
st_err_t st_partition_check_follower(st_partition_t *p);
/* Follower fetching (KIP-392, Kafka's RackAwareReplicaSelector), on the
 * leader: the replica a consumer in `rack` should read p from instead, or
 * -1 for the leader itself.  -1 when rack is empty or the leader is in it;
 * else the follower in that rack with the longest log among those in the
 * ISR that caught up within replica.lag.time.max.ms and are not fenced. */
int32_t st_partition_preferred_read_replica(st_partition_t *p, st_str_t rack, const st_meta_image_t *img);
/* A kept partition this broker leads, or NULL with *e set:
 * UNKNOWN_TOPIC_OR_PARTITION, or NOT_LEADER_OR_FOLLOWER for one hosted
 * elsewhere or led by another broker (what Produce and DescribeProducers
 * answer). */
st_partition_t *st_replicas_lookup_leader(st_replicas_t *rm, const char *topic, size_t len,
                                          int32_t partition, st_err_t *e);

/* Every hosted partition, kept (release each with st_partition_release
 * and free the array). */
st_partition_t **st_replicas_all(st_replicas_t *rm, int *n);

/* The first offset a consumer may read: the remote log start when the
 * bucket holds anything, else the local one. */
int64_t st_partition_log_start(st_partition_t *p);
/* Whether offset lies in the remote part only (below the local start). */
int st_partition_is_remote(st_partition_t *p, int64_t offset);

/* From op's try_complete on loop loop_index, before it reads p's state:
 * retry op at p's next change (append, flush).  The partition is op's
 * watch key in its loop's purgatory; the change notifies that key to the
 * loops that watch p and wakes them, so only p's watchers are retried. */
void st_partition_watch(st_partition_t *p, st_delayed_t *op, int loop_index);

/* Append validated batches as leader (stamped with the leader epoch);
 * moves the high watermark when the ISR is this broker alone.
 * NOT_LEADER_OR_FOLLOWER when this broker does not lead p now.
 * verify_guard: a produce's KIP-890 guard (st_log_append_verified), or
 * ST_LOG_UNVERIFIED. */
st_err_t st_partition_append(st_partition_t *p, uint8_t *records, size_t len,
                             int64_t verify_guard, st_append_info_t *info);

int32_t st_partition_leader_epoch(const st_partition_t *p);
int32_t st_partition_isr_size(const st_partition_t *p);
int32_t st_partition_min_isr(const st_partition_t *p);
int64_t st_partition_high_watermark(st_partition_t *p);
/* While this broker leads: the log end when it began to lead at the
 * current leader epoch (-1 otherwise).  A new leader's high watermark may
 * be below it until the followers fetch: what lies between is committed
 * by the old leader's ISR, but not yet known to be. */
int64_t st_partition_epoch_start_offset(st_partition_t *p);

/* A follower's fetch at the leader (Kafka's Partition.fetchRecords for a
 * replica): checks that this broker leads p at current_leader_epoch (-1:
 * unchecked) and that replica_id is one of its replicas, finds where the
 * follower's log diverged from the leader's (last_fetched_epoch >= 0,
 * KIP-320: *div_epoch / *div_end set, no records to send), records the
 * follower's log end (fetch_offset) and may move the high watermark or
 * propose the follower for the ISR.  Errors: NOT_LEADER_OR_FOLLOWER,
 * FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, OFFSET_OUT_OF_RANGE (past the
 * leo), OFFSET_MOVED_TO_TIERED_STORAGE (below the local log start of a
 * tiered partition). */
st_err_t st_partition_follower_fetch(st_partition_t *p, int32_t replica_id, int32_t current_leader_epoch,
                                     int64_t fetch_offset, int32_t last_fetched_epoch,
                                     int32_t *div_epoch, int64_t *div_end);

/* Whether this broker leads p, and whether an acks=all write ending before
 * `need` is committed: 1 committed, 0 not yet; *e set when it never will
 * be (NOT_LEADER_OR_FOLLOWER) or is but the ISR is below
 * min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND). */
int st_partition_committed(st_partition_t *p, int64_t need, st_err_t *e);
/* What every answer that reports an acks=all write waits for (Produce,
 * WriteTxnMarkers, the coordinators' records): 1 when the write ending
 * before need is done with, *e saying how (OK; KAFKA_STORAGE_ERROR when
 * the log went offline; the errors of st_partition_committed); 0 while it
 * is not yet in every in-sync replica or, with flush, not yet flushed. */
int st_partition_durable(st_partition_t *p, int64_t need, int flush, st_err_t *e);

/* The controller (AlterPartition goes to its active node; the fetchers
 * start with its image) and the leader's periodic ISR check (a ticker on
 * loop 0, started by st_replicas_start before the loops start). */
void st_replicas_set_controller(st_replicas_t *rm, st_controller_t *ctl);
void st_replicas_start(st_replicas_t *rm);

st_partition_t *st_partition_keep(st_partition_t *p);

/* ---- fetcher.c: the follower's fetchers ------------------------------------ */
typedef struct st_fetchers st_fetchers_t;
st_fetchers_t *st_fetchers_new(st_replicas_t *rm, const st_broker_config_t *cfg, st_net_t *net,
                               st_controller_t *ctl);
/* After each image (controller thread): fetchers for new sources, and
 * every fetcher rebuilds its partition list.  A fetcher closes its
 * connection when its loop stops. */
void st_fetchers_update(st_fetchers_t *fs, const st_meta_image_t *img);
void st_fetchers_destroy(st_fetchers_t *fs);

#endif /* ST_REPLICA_H */

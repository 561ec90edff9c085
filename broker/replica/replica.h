/*
 * replica.h - the partitions this broker hosts, kept in step with the
 * metadata image, and the wake-ups of requests waiting on them.
 *
 * A st_partition_t joins a partition log to what the request handlers need
 * (topic id, leader epoch, min.insync.replicas, effective config) and to
 * the loops whose parked requests watch it: after an append or a flush the
 * log's notify callback wakes exactly those loops.
 *
 * Replication comes later; today every partition has one replica, this
 * broker is its leader, the ISR is {this broker} and the high watermark
 * follows the log end after each append.
 *
 * Threads: lookups from any thread (read lock); st_replicas_sync on the
 * controller thread (write lock).  Partitions are refcounted.
 */
#ifndef ST_REPLICA_H
#define ST_REPLICA_H

#include "config.h"
#include "controller.h"
#include "delayed.h"
#include "log.h"
#include "net.h"
#include "st_tiering.h"

typedef struct st_partition {
    int refs;
    char *topic;
    st_uuid_t topic_id;
    int32_t index;
    st_log_t *log;
    int32_t leader_epoch;
    int32_t leader; /* atomic: the broker that leads it (the image's), -1: none */
    int32_t min_insync_replicas;
    int32_t isr_size;
    uint64_t waiters; /* atomic: bit i = loop i has a parked request here */
    struct st_replicas *owner;
    /* tiered storage (NULL when the topic is not tiered) */
    st_tier_part_t *tier;
    int64_t remote_start, remote_end; /* atomic: [start, end) in the bucket */
} st_partition_t;

typedef struct st_replicas st_replicas_t;

st_replicas_t *st_replicas_new(const st_broker_config_t *cfg, st_logmgr_t *logs);
void st_replicas_set_net(st_replicas_t *rm, st_net_t *net);
/* Where a loop's parked requests wait (before st_net_start): a change of a
 * partition is notified to the purgatory of each loop watching it. */
void st_replicas_set_purgatories(st_replicas_t *rm, st_purgatory_t *(*of_loop)(st_loop_t *loop));
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

/* Append validated batches as leader; moves the high watermark. */
st_err_t st_partition_append(st_partition_t *p, uint8_t *records, size_t len,
                             st_append_info_t *info);

#endif /* ST_REPLICA_H */

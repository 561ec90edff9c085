/*
 * placement.h - where the replicas of new partitions go (the controller's
 * decision; the records it writes carry the result, so nothing here is
 * part of the deterministic state machine).
 *
 * Kafka's rack-aware assignment, in outline: the live brokers are laid out
 * rack by rack in turn (racks sorted by name, brokers by id within each:
 * A1 B1 C1 A2 B2 A3 ...), leaders go round that list, and each follower is
 * the next broker in it on a rack the partition does not use yet, until
 * every rack is used; then the next broker not used yet.  So:
 *   - a partition's replicas span min(RF, racks) racks;
 *   - leaders are spread evenly over brokers and racks, and across topics
 *     too, since the walk starts where the cluster's partition count ends;
 *   - followers of successive rounds are shifted, so a broker's partitions
 *     do not all fail over to the same other broker.
 * Brokers without broker.rack count as one rack of their own ("").
 */
#ifndef ST_PLACEMENT_H
#define ST_PLACEMENT_H

#include "st_base.h"

typedef struct st_place_broker {
    int32_t id;
    const char *rack; /* NULL or "": none */
} st_place_broker_t;

/* Replicas for partitions first .. first + count - 1, written to
 * out[p * rf + k] for partition first + p, replica k (k = 0 leads).  start
 * rotates the whole layout (the controller passes the number of partitions
 * the cluster has).  rf must be 1 .. nbrokers. */
void st_place_replicas(const st_place_broker_t *brokers, int nbrokers, int32_t first,
                       int32_t count, int rf, int64_t start, int32_t *out);

#endif /* ST_PLACEMENT_H */

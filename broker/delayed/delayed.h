/*
 * delayed.h - requests that must wait (acks=all until their write is
 * durable, fetch until min.bytes arrive or max.wait passes), parked per
 * event loop.
 *
 * Each loop has one purgatory.  An operation names the keys it waits on
 * (st_delayed_watch: any address, e.g. a partition's; never dereferenced)
 * and is retried only when one of its keys is notified, as Kafka's
 * DelayedOperationPurgatory retries only the watchers of a
 * TopicPartitionOperationKey; it is expired at its deadline.  It completes
 * exactly once, through try_complete returning 1 or through expire, and is
 * then unlinked from every key it watched.  To never miss a wake-up,
 * try_complete registers its keys before it looks at the state it waits
 * for (and whoever changes that state notifies after the change).
 *
 * Threads: everything on the owning loop's thread, except
 * st_purgatory_notify and st_purgatory_notify_all, which any thread may
 * call (they queue the key in a small bounded inbox under inbox_lock; the
 * caller then wakes the loop, whose on_wake runs st_purgatory_wake).
 */
#ifndef ST_DELAYED_H
#define ST_DELAYED_H

#include <pthread.h>
#include <stdint.h>

typedef struct st_delayed st_delayed_t;
typedef struct st_purgatory st_purgatory_t;

/* One key an operation watches: a node in its purgatory's bucket of that
 * key's hash.  Owned by the operation (its watches array). */
typedef struct st_delayed_watch {
    const void *key;
    st_delayed_t *op;
    struct st_delayed_watch *next, **pprev;
} st_delayed_watch_t;

struct st_delayed {
    int64_t deadline_ms; /* monotonic */
    /* Returns 1 when the operation responded and is finished. */
    int (*try_complete)(st_delayed_t *op);
    /* The deadline passed (or the broker is stopping): respond now. */
    void (*expire)(st_delayed_t *op);
    /* Release the operation after it finished. */
    void (*destroy)(st_delayed_t *op);
    /* The purgatory's (zero before st_purgatory_add). */
    st_purgatory_t *pg;
    int heap_idx; /* in pg->heap while parked */
    st_delayed_watch_t *watches;
    int nwatches, capwatches;
    int cursor;         /* watches named so far in this try (see delayed.c) */
    uint64_t tried_seq; /* the wake pass that last tried it */
};

/* Hash buckets of watch keys, and distinct keys the inbox holds between
 * two passes; beyond that the next pass retries every parked operation. */
#define ST_PURGATORY_BUCKETS 1024
#define ST_PURGATORY_INBOX 256

struct st_purgatory {
    /* every parked operation, a binary min-heap by deadline (Kafka keeps a
     * timing wheel): a tick looks at the first due, not at every one */
    st_delayed_t **heap;
    int count, capheap;
    st_delayed_watch_t *buckets[ST_PURGATORY_BUCKETS];
    /* the inbox: any thread, under inbox_lock */
    pthread_mutex_t inbox_lock;
    int ninbox;
    int inbox_all; /* overflow or notify_all: retry everything */
    const void *inbox[ST_PURGATORY_INBOX];
    /* loop thread */
    const void *drained[ST_PURGATORY_INBOX];
    st_delayed_t **batch; /* the operations one pass retries */
    int capbatch;
    uint64_t seq;
    uint64_t tries; /* try_complete calls so far (figures, tests) */
};

void st_purgatory_init(st_purgatory_t *pg);
/* After the loop stopped (st_purgatory_drain ran). */
void st_purgatory_fini(st_purgatory_t *pg);

/* Try once; park when not done. */
void st_purgatory_add(st_purgatory_t *pg, st_delayed_t *op);
/* From op's try_complete: wake op when key is notified.  Naming a key
 * again is cheap (keys named in the same order as in the previous try cost
 * one comparison each), and a key stays watched until op finishes. */
void st_delayed_watch(st_delayed_t *op, const void *key);
/* Any thread: key changed; the loop's next st_purgatory_wake retries its
 * watchers.  The caller wakes the loop afterwards (st_loop_wake). */
void st_purgatory_notify(st_purgatory_t *pg, const void *key);
/* Any thread: something without a key changed (a remote download ended,
 * a worker finished): the next pass retries every parked operation. */
void st_purgatory_notify_all(st_purgatory_t *pg);
/* Retry the watchers of the keys notified since the last pass, each once. */
void st_purgatory_wake(st_purgatory_t *pg);
/* Expire what is due; returns ms until the next deadline, -1 when none. */
int64_t st_purgatory_tick(st_purgatory_t *pg, int64_t now_ms);
/* Expire everything (shutdown). */
void st_purgatory_drain(st_purgatory_t *pg);

#endif /* ST_DELAYED_H */

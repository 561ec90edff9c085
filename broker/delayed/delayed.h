/*
 * delayed.h - requests that must wait (acks=all until their write is
 * durable, fetch until min.bytes arrive or max.wait passes), parked per
 * event loop.
 *
 * Each loop has one purgatory.  An operation is retried when its loop is
 * woken (a partition it watches changed) and expired at its deadline; it
 * completes exactly once, through try_complete returning 1 or through
 * expire.  To never miss a wake-up, try_complete registers its watches
 * (st_partition_watch) before it looks at the state it waits for.
 *
 * Thread: the owning loop's only.
 */
#ifndef ST_DELAYED_H
#define ST_DELAYED_H

#include <stdint.h>

typedef struct st_delayed st_delayed_t;

struct st_delayed {
    int64_t deadline_ms; /* monotonic */
    /* Returns 1 when the operation responded and is finished. */
    int (*try_complete)(st_delayed_t *op);
    /* The deadline passed (or the broker is stopping): respond now. */
    void (*expire)(st_delayed_t *op);
    /* Release the operation after it finished. */
    void (*destroy)(st_delayed_t *op);
    st_delayed_t *next, *prev;
};

typedef struct st_purgatory {
    st_delayed_t *head;
    int count;
} st_purgatory_t;

/* Try once; park when not done. */
void st_purgatory_add(st_purgatory_t *pg, st_delayed_t *op);
/* Retry every parked operation. */
void st_purgatory_wake(st_purgatory_t *pg);
/* Expire what is due; returns ms until the next deadline, -1 when none. */
int64_t st_purgatory_tick(st_purgatory_t *pg, int64_t now_ms);
/* Expire everything (shutdown). */
void st_purgatory_drain(st_purgatory_t *pg);

#endif /* ST_DELAYED_H */

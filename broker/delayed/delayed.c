/*
 * delayed.c - the per-loop purgatory (see delayed.h).
 *
 * Parked operations sit on one list (deadlines, drain) and each watch of
 * theirs in the bucket of its key's hash; a pass retries only the
 * operations found in the buckets of the keys notified since the last
 * pass, each once (tried_seq), so an append to one partition costs the
 * watchers of that partition, not every long-poll of the loop.
 *
 * An operation keeps its watches in one array, linked into the buckets;
 * the array grows by unlinking every watch, reallocating and linking
 * again, which happens only while an operation names new keys (its first
 * try).  At every later try a handler names the same keys in the same
 * order, so st_delayed_watch finds each at the cursor in one comparison.
 *
 * Threads: the loop's, except the inbox (inbox_lock), which notifiers on
 * other threads (the flusher, other loops, the tiering pool) fill.
 */
#include "delayed.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "st_base.h"

static size_t key_bucket(const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing */
    return (size_t)(h >> 54) % ST_PURGATORY_BUCKETS;
}

static void watch_link(st_purgatory_t *pg, st_delayed_watch_t *w) {
    st_delayed_watch_t **head = &pg->buckets[key_bucket(w->key)];
    w->next = *head;
    w->pprev = head;
    if (*head) (*head)->pprev = &w->next;
    *head = w;
}

static void watch_unlink(st_delayed_watch_t *w) {
    *w->pprev = w->next;
    if (w->next) w->next->pprev = w->pprev;
    w->next = NULL;
    w->pprev = NULL;
}

/* Remove op from every key it watched. */
static void unwatch_all(st_delayed_t *op) {
    for (int i = 0; i < op->nwatches; i++) watch_unlink(&op->watches[i]);
    free(op->watches);
    op->watches = NULL;
    op->nwatches = op->capwatches = 0;
}

void st_purgatory_init(st_purgatory_t *pg) {
    memset(pg, 0, sizeof *pg);
    pg->next_due_ms = INT64_MAX;
    pthread_mutex_init(&pg->inbox_lock, NULL);
}

void st_purgatory_fini(st_purgatory_t *pg) {
    free(pg->batch);
    pg->batch = NULL;
    pthread_mutex_destroy(&pg->inbox_lock);
}

void st_delayed_watch(st_delayed_t *op, const void *key) {
    if (op->cursor < op->nwatches && op->watches[op->cursor].key == key) {
        op->cursor++;
        return;
    }
    for (int i = 0; i < op->nwatches; i++)
        if (op->watches[i].key == key) {
            op->cursor = i + 1;
            return;
        }
    if (op->nwatches == op->capwatches) {
        int cap = op->capwatches ? op->capwatches * 2 : 4;
        for (int i = 0; i < op->nwatches; i++) watch_unlink(&op->watches[i]);
        op->watches = st_realloc(op->watches, sizeof *op->watches * (size_t)cap);
        op->capwatches = cap;
        for (int i = 0; i < op->nwatches; i++) watch_link(op->pg, &op->watches[i]);
    }
    st_delayed_watch_t *w = &op->watches[op->nwatches++];
    w->key = key;
    w->op = op;
    watch_link(op->pg, w);
    op->cursor = op->nwatches;
}

static int try_op(st_purgatory_t *pg, st_delayed_t *op) {
    op->cursor = 0;
    pg->tries++;
    return op->try_complete(op);
}

static void unlink_op(st_purgatory_t *pg, st_delayed_t *op) {
    if (op->prev) op->prev->next = op->next;
    else pg->head = op->next;
    if (op->next) op->next->prev = op->prev;
    op->next = op->prev = NULL;
    pg->count--;
}

/* Finished (responded): out of every key, then released.  Exactly once. */
static void finish(st_delayed_t *op) {
    unwatch_all(op);
    op->destroy(op);
}

void st_purgatory_add(st_purgatory_t *pg, st_delayed_t *op) {
    op->pg = pg;
    op->watches = NULL;
    op->nwatches = op->capwatches = op->cursor = 0;
    op->tried_seq = 0;
    /* The first try registers the keys before it checks: a change after
     * the check is notified to them. */
    if (try_op(pg, op)) {
        finish(op);
        return;
    }
    op->prev = NULL;
    op->next = pg->head;
    if (pg->head) pg->head->prev = op;
    pg->head = op;
    pg->count++;
    if (op->deadline_ms < pg->next_due_ms) pg->next_due_ms = op->deadline_ms;
}

void st_purgatory_notify(st_purgatory_t *pg, const void *key) {
    pthread_mutex_lock(&pg->inbox_lock);
    if (!pg->inbox_all) {
        int i = 0;
        while (i < pg->ninbox && pg->inbox[i] != key) i++;
        if (i == pg->ninbox) {
            if (pg->ninbox < ST_PURGATORY_INBOX) pg->inbox[pg->ninbox++] = key;
            else pg->inbox_all = 1; /* bounded: the next pass retries all */
        }
    }
    pthread_mutex_unlock(&pg->inbox_lock);
}

void st_purgatory_notify_all(st_purgatory_t *pg) {
    pthread_mutex_lock(&pg->inbox_lock);
    pg->inbox_all = 1;
    pthread_mutex_unlock(&pg->inbox_lock);
}

static void batch_push(st_purgatory_t *pg, int *n, st_delayed_t *op) {
    if (*n == pg->capbatch) {
        pg->capbatch = pg->capbatch ? pg->capbatch * 2 : 64;
        pg->batch = st_realloc(pg->batch, sizeof *pg->batch * (size_t)pg->capbatch);
    }
    pg->batch[(*n)++] = op;
}

void st_purgatory_wake(st_purgatory_t *pg) {
    pthread_mutex_lock(&pg->inbox_lock);
    int nkeys = pg->ninbox, all = pg->inbox_all;
    memcpy(pg->drained, pg->inbox, sizeof *pg->inbox * (size_t)nkeys);
    pg->ninbox = 0;
    pg->inbox_all = 0;
    pthread_mutex_unlock(&pg->inbox_lock);
    if (!pg->head || (!all && nkeys == 0)) return;

    /* Collect first, then try: a try may add operations and watches (a
     * response lets the connection's next request in), never remove
     * another parked one. */
    uint64_t seq = ++pg->seq;
    int n = 0;
    if (all) {
        for (st_delayed_t *op = pg->head; op; op = op->next) batch_push(pg, &n, op);
    } else {
        for (int k = 0; k < nkeys; k++)
            for (st_delayed_watch_t *w = pg->buckets[key_bucket(pg->drained[k])]; w; w = w->next)
                if (w->key == pg->drained[k] && w->op->tried_seq != seq) {
                    w->op->tried_seq = seq;
                    batch_push(pg, &n, w->op);
                }
    }
    for (int i = 0; i < n; i++) {
        st_delayed_t *op = pg->batch[i];
        if (try_op(pg, op)) {
            unlink_op(pg, op);
            finish(op);
        }
    }
}

int64_t st_purgatory_tick(st_purgatory_t *pg, int64_t now_ms) {
    if (!pg->head) {
        pg->next_due_ms = INT64_MAX;
        return -1;
    }
    /* next_due_ms is a lower bound (operations that left only raise the
     * true one): no walk over the long-polls until it is reached. */
    if (now_ms < pg->next_due_ms) return pg->next_due_ms - now_ms;
    int64_t next_due = INT64_MAX;
    st_delayed_t *op = pg->head;
    while (op) {
        st_delayed_t *next = op->next;
        if (op->deadline_ms <= now_ms) {
            unlink_op(pg, op);
            op->expire(op);
            finish(op);
        } else if (op->deadline_ms < next_due) {
            next_due = op->deadline_ms;
        }
        op = next;
    }
    pg->next_due_ms = next_due;
    return next_due == INT64_MAX ? -1 : next_due - now_ms;
}

void st_purgatory_drain(st_purgatory_t *pg) {
    while (pg->head) {
        st_delayed_t *op = pg->head;
        unlink_op(pg, op);
        op->expire(op);
        finish(op);
    }
    pg->next_due_ms = INT64_MAX;
}

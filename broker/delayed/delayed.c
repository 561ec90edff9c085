/*
 * delayed.c - the per-loop purgatory (see delayed.h).
 *
 * Parked operations sit in a min-heap by deadline (expiry, drain) and each
 * watch of theirs in the bucket of its key's hash; a pass retries only the
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
    pthread_mutex_init(&pg->inbox_lock, NULL);
}

void st_purgatory_fini(st_purgatory_t *pg) {
    free(pg->batch);
    pg->batch = NULL;
    free(pg->heap);
    pg->heap = NULL;
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

/* ---- the deadline heap ---------------------------------------------------- */

static void heap_set(st_purgatory_t *pg, int i, st_delayed_t *op) {
    pg->heap[i] = op;
    op->heap_idx = i;
}

static void sift_up(st_purgatory_t *pg, int i) {
    st_delayed_t *op = pg->heap[i];
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (pg->heap[parent]->deadline_ms <= op->deadline_ms) break;
        heap_set(pg, i, pg->heap[parent]);
        i = parent;
    }
    heap_set(pg, i, op);
}

static void sift_down(st_purgatory_t *pg, int i) {
    st_delayed_t *op = pg->heap[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= pg->count) break;
        if (c + 1 < pg->count && pg->heap[c + 1]->deadline_ms < pg->heap[c]->deadline_ms) c++;
        if (op->deadline_ms <= pg->heap[c]->deadline_ms) break;
        heap_set(pg, i, pg->heap[c]);
        i = c;
    }
    heap_set(pg, i, op);
}

static void heap_push(st_purgatory_t *pg, st_delayed_t *op) {
    if (pg->count == pg->capheap) {
        pg->capheap = pg->capheap ? pg->capheap * 2 : 64;
        pg->heap = st_realloc(pg->heap, sizeof *pg->heap * (size_t)pg->capheap);
    }
    heap_set(pg, pg->count++, op);
    sift_up(pg, pg->count - 1);
}

static void unlink_op(st_purgatory_t *pg, st_delayed_t *op) {
    int i = op->heap_idx;
    st_delayed_t *last = pg->heap[--pg->count];
    if (i < pg->count) {
        heap_set(pg, i, last);
        sift_down(pg, i);
        sift_up(pg, last->heap_idx);
    }
    op->heap_idx = -1;
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
    heap_push(pg, op);
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
    if (pg->count == 0 || (!all && nkeys == 0)) return;

    /* Collect first, then try: a try may add operations and watches (a
     * response lets the connection's next request in), never remove
     * another parked one. */
    uint64_t seq = ++pg->seq;
    int n = 0;
    if (all) {
        for (int i = 0; i < pg->count; i++) batch_push(pg, &n, pg->heap[i]);
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
    /* expire() may let a new request in and park it: look at the heap's
     * top again each time */
    while (pg->count > 0 && pg->heap[0]->deadline_ms <= now_ms) {
        st_delayed_t *op = pg->heap[0];
        unlink_op(pg, op);
        op->expire(op);
        finish(op);
    }
    return pg->count > 0 ? pg->heap[0]->deadline_ms - now_ms : -1;
}

void st_purgatory_drain(st_purgatory_t *pg) {
    while (pg->count > 0) {
        st_delayed_t *op = pg->heap[pg->count - 1];
        unlink_op(pg, op);
        op->expire(op);
        finish(op);
    }
}

/* delayed.c - the per-loop purgatory (see delayed.h). */
#include "delayed.h"

#include <stddef.h>

/* Before the watch keys: keys are accepted and ignored, every wake
 * retries every parked operation. */
void st_purgatory_init(st_purgatory_t *pg) { *pg = (st_purgatory_t){0}; }
void st_purgatory_fini(st_purgatory_t *pg) { (void)pg; }
void st_delayed_watch(st_delayed_t *op, const void *key) { (void)op; (void)key; }
void st_purgatory_notify(st_purgatory_t *pg, const void *key) { (void)pg; (void)key; }
void st_purgatory_notify_all(st_purgatory_t *pg) { (void)pg; }

static void unlink_op(st_purgatory_t *pg, st_delayed_t *op) {
    if (op->prev) op->prev->next = op->next;
    else pg->head = op->next;
    if (op->next) op->next->prev = op->prev;
    op->next = op->prev = NULL;
    pg->count--;
}

void st_purgatory_add(st_purgatory_t *pg, st_delayed_t *op) {
    if (op->try_complete(op)) {
        op->destroy(op);
        return;
    }
    op->prev = NULL;
    op->next = pg->head;
    if (pg->head) pg->head->prev = op;
    pg->head = op;
    pg->count++;
}

void st_purgatory_wake(st_purgatory_t *pg) {
    st_delayed_t *op = pg->head;
    while (op) {
        st_delayed_t *next = op->next;
        if (op->try_complete(op)) {
            unlink_op(pg, op);
            op->destroy(op);
        }
        op = next;
    }
}

int64_t st_purgatory_tick(st_purgatory_t *pg, int64_t now_ms) {
    int64_t next_deadline = -1;
    st_delayed_t *op = pg->head;
    while (op) {
        st_delayed_t *next = op->next;
        if (op->deadline_ms <= now_ms) {
            unlink_op(pg, op);
            op->expire(op);
            op->destroy(op);
        } else if (next_deadline < 0 || op->deadline_ms - now_ms < next_deadline) {
            next_deadline = op->deadline_ms - now_ms;
        }
        op = next;
    }
    return next_deadline;
}

void st_purgatory_drain(st_purgatory_t *pg) {
    while (pg->head) {
        st_delayed_t *op = pg->head;
        unlink_op(pg, op);
        op->expire(op);
        op->destroy(op);
    }
}

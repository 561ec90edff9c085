/*
 * test_delayed.c - unit tests of broker/delayed: the per-loop purgatory and
 * its watch keys.
 *
 * Operations here are plain structs whose try_complete counts its calls,
 * registers its keys before it reads its "state" (the register-then-check
 * rule every handler follows) and completes when its state says ready.
 * Keys are the addresses of elements of an array, as a partition's address
 * is the key of the operations waiting on it.  No loop, no socket: the
 * test calls st_purgatory_wake where a loop's on_wake hook would.
 */
#include "unit.h"

#include <pthread.h>
#include <semaphore.h>

#include "delayed.h"

typedef struct top {
    st_delayed_t base;
    const void *keys[4];
    int nkeys;
    int ready; /* atomic: the state it waits for is there */
    int tries, expires, *destroyed;
} top_t;

static long total_tries;

static int top_try(st_delayed_t *d) {
    top_t *op = (top_t *)d;
    for (int i = 0; i < op->nkeys; i++) st_delayed_watch(d, op->keys[i]);
    op->tries++;
    total_tries++;
    return __atomic_load_n(&op->ready, __ATOMIC_ACQUIRE);
}

static void top_expire(st_delayed_t *d) { ((top_t *)d)->expires++; }

static void top_destroy(st_delayed_t *d) {
    top_t *op = (top_t *)d;
    (*op->destroyed)++;
    op->destroyed = NULL; /* a second destroy would crash here */
}

static void top_init(top_t *op, int *destroyed, int64_t deadline_ms, const void *k0,
                     const void *k1) {
    memset(op, 0, sizeof *op);
    op->base.deadline_ms = deadline_ms;
    op->base.try_complete = top_try;
    op->base.expire = top_expire;
    op->base.destroy = top_destroy;
    op->destroyed = destroyed;
    if (k0) op->keys[op->nkeys++] = k0;
    if (k1) op->keys[op->nkeys++] = k1;
}

#define NOPS 500
static char keys[NOPS];

/* 500 parked operations on 500 keys: a change of one key retries the
 * operations on that key only, however many are parked. */
static void test_wake_retries_only_the_key(void **state) {
    (void)state;
    static top_t ops[NOPS];
    int destroyed = 0;
    st_purgatory_t pg;
    st_purgatory_init(&pg);
    for (int i = 0; i < NOPS; i++) {
        top_init(&ops[i], &destroyed, INT64_MAX, &keys[i], NULL);
        st_purgatory_add(&pg, &ops[i].base);
    }
    assert_int_equal(pg.count, NOPS);
    total_tries = 0;
    st_purgatory_notify(&pg, &keys[7]);
    st_purgatory_wake(&pg);
    fprintf(stderr, "one key of %d woken: %ld try_complete calls\n", NOPS, total_tries);
    assert_int_equal(total_tries, 1);
    assert_int_equal(ops[7].tries, 2);

    /* the same key notified many times before the loop drains: one retry */
    total_tries = 0;
    for (int i = 0; i < 1000; i++) st_purgatory_notify(&pg, &keys[9]);
    st_purgatory_wake(&pg);
    assert_int_equal(total_tries, 1);

    /* a wake with nothing notified retries nothing */
    total_tries = 0;
    st_purgatory_wake(&pg);
    assert_int_equal(total_tries, 0);

    /* completion: only the ready one goes */
    __atomic_store_n(&ops[7].ready, 1, __ATOMIC_RELEASE);
    st_purgatory_notify(&pg, &keys[7]);
    st_purgatory_wake(&pg);
    assert_int_equal(destroyed, 1);
    assert_int_equal(pg.count, NOPS - 1);

    st_purgatory_drain(&pg);
    assert_int_equal(destroyed, NOPS);
    assert_int_equal(pg.count, 0);
    st_purgatory_fini(&pg);
}

/* An operation watching two keys is tried once when both change, completes
 * once, and afterwards neither key reaches it. */
static void test_two_keys_complete_once(void **state) {
    (void)state;
    int destroyed = 0;
    top_t both, other;
    char a, b, c;
    st_purgatory_t pg;
    st_purgatory_init(&pg);
    top_init(&both, &destroyed, INT64_MAX, &a, &b);
    top_init(&other, &destroyed, INT64_MAX, &c, NULL);
    st_purgatory_add(&pg, &both.base);
    st_purgatory_add(&pg, &other.base);

    total_tries = 0;
    st_purgatory_notify(&pg, &a);
    st_purgatory_notify(&pg, &b);
    st_purgatory_wake(&pg);
    assert_int_equal(total_tries, 1);
    assert_int_equal(both.tries, 2);

    __atomic_store_n(&both.ready, 1, __ATOMIC_RELEASE);
    st_purgatory_notify(&pg, &b);
    st_purgatory_notify(&pg, &a);
    st_purgatory_wake(&pg);
    assert_int_equal(destroyed, 1);
    assert_int_equal(both.tries, 3);
    assert_int_equal(pg.count, 1);

    /* unlinked from both keys: a change of either retries nothing (and, in
     * the sanitizer build, touches no freed watch) */
    total_tries = 0;
    st_purgatory_notify(&pg, &a);
    st_purgatory_notify(&pg, &b);
    st_purgatory_wake(&pg);
    assert_int_equal(total_tries, 0);
    assert_int_equal(both.tries, 3);

    st_purgatory_notify(&pg, &c);
    st_purgatory_wake(&pg);
    assert_int_equal(other.tries, 2);
    st_purgatory_drain(&pg);
    assert_int_equal(destroyed, 2);
    assert_int_equal(other.expires, 1);
    st_purgatory_fini(&pg);
}

/* More distinct keys than the inbox holds between two passes: nothing is
 * lost, every parked operation is retried once. */
static void test_inbox_overflow_retries_all(void **state) {
    (void)state;
    static top_t ops[NOPS];
    int destroyed = 0;
    st_purgatory_t pg;
    st_purgatory_init(&pg);
    for (int i = 0; i < NOPS; i++) {
        top_init(&ops[i], &destroyed, INT64_MAX, &keys[i], NULL);
        st_purgatory_add(&pg, &ops[i].base);
    }
    for (int i = 0; i < NOPS; i++) __atomic_store_n(&ops[i].ready, 1, __ATOMIC_RELEASE);
    total_tries = 0;
    for (int i = 0; i < NOPS; i++) st_purgatory_notify(&pg, &keys[i]);
    st_purgatory_wake(&pg);
    assert_int_equal(total_tries, NOPS);
    assert_int_equal(destroyed, NOPS);
    assert_int_equal(pg.count, 0);
    st_purgatory_fini(&pg);
}

/* Deadlines: an expired operation is answered once and unlinked from its
 * keys; the tick says how long until the next deadline. */
static void test_expiry_unlinks(void **state) {
    (void)state;
    int destroyed = 0;
    top_t early, late;
    char a;
    st_purgatory_t pg;
    st_purgatory_init(&pg);
    assert_int_equal(st_purgatory_tick(&pg, 0), -1);
    top_init(&early, &destroyed, 100, &a, NULL);
    top_init(&late, &destroyed, 500, &a, NULL);
    st_purgatory_add(&pg, &late.base);
    st_purgatory_add(&pg, &early.base);
    assert_int_equal(st_purgatory_tick(&pg, 40), 60);
    assert_int_equal(st_purgatory_tick(&pg, 100), 400);
    assert_int_equal(early.expires, 1);
    assert_int_equal(destroyed, 1);
    total_tries = 0;
    st_purgatory_notify(&pg, &a);
    st_purgatory_wake(&pg);
    assert_int_equal(total_tries, 1);
    assert_int_equal(late.tries, 2);
    assert_int_equal(st_purgatory_tick(&pg, 499), 1);
    assert_int_equal(st_purgatory_tick(&pg, 600), -1);
    assert_int_equal(late.expires, 1);
    assert_int_equal(destroyed, 2);
    st_purgatory_fini(&pg);
}

/* Deadlines in any order, some operations completed by their keys in
 * between: each tick expires exactly those due, and says when the next one
 * is. */
static int64_t expired_at_max;
static int expired_late;
static int64_t tick_now;

static void dl_expire(st_delayed_t *d) {
    top_t *op = (top_t *)d;
    op->expires++;
    if (d->deadline_ms > tick_now) expired_late++; /* expired before its deadline */
    if (d->deadline_ms > expired_at_max) expired_at_max = d->deadline_ms;
}

static void test_deadlines_in_order(void **state) {
    (void)state;
    static top_t ops[NOPS];
    int destroyed = 0;
    st_purgatory_t pg;
    st_purgatory_init(&pg);
    unit_seed("delayed deadlines");
    for (int i = 0; i < NOPS; i++) {
        top_init(&ops[i], &destroyed, 1 + (int64_t)(unit_rand() % 10000), &keys[i], NULL);
        ops[i].base.expire = dl_expire;
        st_purgatory_add(&pg, &ops[i].base);
    }
    for (int i = 0; i < NOPS; i += 3) { /* leave from the middle of the heap */
        __atomic_store_n(&ops[i].ready, 1, __ATOMIC_RELEASE);
        st_purgatory_notify(&pg, &keys[i]);
    }
    st_purgatory_wake(&pg);
    int completed = destroyed;
    assert_int_equal(completed, (NOPS + 2) / 3);
    expired_late = 0;
    for (tick_now = 0; tick_now <= 10001; tick_now += 1 + (int64_t)(unit_rand() % 97)) {
        int64_t next = st_purgatory_tick(&pg, tick_now);
        int64_t want = INT64_MAX;
        for (int i = 0; i < NOPS; i++)
            if (!ops[i].expires && i % 3 && ops[i].base.deadline_ms < want)
                want = ops[i].base.deadline_ms;
        for (int i = 0; i < NOPS; i++)
            if (i % 3) assert_int_equal(ops[i].expires, ops[i].base.deadline_ms <= tick_now);
        assert_true(next == (want == INT64_MAX ? -1 : want - tick_now));
    }
    assert_int_equal(expired_late, 0);
    assert_int_equal(destroyed, NOPS);
    assert_int_equal(pg.count, 0);
    for (int i = 0; i < NOPS; i += 3) assert_int_equal(ops[i].expires, 0);
    st_purgatory_fini(&pg);
}

/* An operation that watches many keys (a fetch of many partitions) and
 * names them again at every try, as handlers do: each key wakes it once,
 * and it completes once. */
enum { WIDE_KEYS = 300 };
static char wide_keys[WIDE_KEYS];

typedef struct wide {
    st_delayed_t base;
    int tries, ready, destroyed;
} wide_t;

static int wide_try(st_delayed_t *d) {
    wide_t *op = (wide_t *)d;
    for (int i = 0; i < WIDE_KEYS; i++) st_delayed_watch(d, &wide_keys[i]);
    op->tries++;
    return op->ready;
}

static void wide_expire(st_delayed_t *d) { (void)d; }
static void wide_destroy(st_delayed_t *d) { ((wide_t *)d)->destroyed++; }

static void test_many_keys_one_op(void **state) {
    (void)state;
    wide_t op = {.base = {.deadline_ms = INT64_MAX, .try_complete = wide_try,
                          .expire = wide_expire, .destroy = wide_destroy}};
    int destroyed = 0;
    top_t bystander;
    char other;
    st_purgatory_t pg;
    st_purgatory_init(&pg);
    top_init(&bystander, &destroyed, INT64_MAX, &other, NULL);
    st_purgatory_add(&pg, &op.base);
    st_purgatory_add(&pg, &bystander.base);
    for (int i = 0; i < WIDE_KEYS; i += 37) {
        int before = op.tries;
        st_purgatory_notify(&pg, &wide_keys[i]);
        st_purgatory_wake(&pg);
        assert_int_equal(op.tries, before + 1);
    }
    assert_int_equal(bystander.tries, 1);
    op.ready = 1;
    st_purgatory_notify(&pg, &wide_keys[WIDE_KEYS - 1]);
    st_purgatory_wake(&pg);
    assert_int_equal(op.destroyed, 1);
    total_tries = 0;
    for (int i = 0; i < WIDE_KEYS; i += 7) st_purgatory_notify(&pg, &wide_keys[i]);
    st_purgatory_wake(&pg);
    assert_int_equal(total_tries, 0);
    assert_int_equal(op.destroyed, 1);
    st_purgatory_drain(&pg);
    assert_int_equal(destroyed, 1);
    st_purgatory_fini(&pg);
}

/* ---- a wake from another thread is not lost ------------------------------ */

typedef struct race {
    st_purgatory_t *pg;
    top_t *op;
    sem_t woken; /* the loop's eventfd */
} race_t;

static void *notifier(void *arg) {
    race_t *r = arg;
    /* the state first, then the notification, as the log does */
    __atomic_store_n(&r->op->ready, 1, __ATOMIC_RELEASE);
    st_purgatory_notify(r->pg, r->op->keys[0]);
    sem_post(&r->woken);
    return NULL;
}

/* The state changes on another thread while the operation is being added
 * (before, between its registration and its check, or after): whichever,
 * the wake that follows completes it. */
static void test_cross_thread_wake_not_lost(void **state) {
    (void)state;
    st_purgatory_t pg;
    st_purgatory_init(&pg);
    char key;
    for (int round = 0; round < 2000; round++) {
        int destroyed = 0;
        top_t op;
        top_init(&op, &destroyed, INT64_MAX, &key, NULL);
        race_t r = {&pg, &op, {{0}}};
        sem_init(&r.woken, 0, 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, notifier, &r), 0);
        st_purgatory_add(&pg, &op.base);
        sem_wait(&r.woken);
        st_purgatory_wake(&pg);
        pthread_join(t, NULL);
        sem_destroy(&r.woken);
        assert_int_equal(destroyed, 1);
        assert_int_equal(pg.count, 0);
    }
    st_purgatory_fini(&pg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wake_retries_only_the_key),
        cmocka_unit_test(test_two_keys_complete_once),
        cmocka_unit_test(test_inbox_overflow_retries_all),
        cmocka_unit_test(test_expiry_unlinks),
        cmocka_unit_test(test_deadlines_in_order),
        cmocka_unit_test(test_many_keys_one_op),
        cmocka_unit_test(test_cross_thread_wake_not_lost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

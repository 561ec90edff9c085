/*
 * test_placement.c - rack-aware replica placement (broker/controller/
 * placement.c): replicas distinct, spread over racks, leaders balanced over
 * brokers and racks, and across topics.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

static const char *rack_of(const st_place_broker_t *b, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (b[i].id == id) return b[i].rack ? b[i].rack : "";
    fail_msg("broker %d was never given", (int)id);
    return NULL;
}

/* Checks every partition: distinct brokers from the list, and
 * min(rf, racks) racks; counts leaders and replicas per broker id. */
static void check(const st_place_broker_t *b, int n, int nracks, const int32_t *reps, int32_t count,
                  int rf, int *leaders, int *replicas) {
    for (int32_t p = 0; p < count; p++) {
        const int32_t *r = reps + p * rf;
        const char *seen[64];
        int nseen = 0;
        for (int k = 0; k < rf; k++) {
            for (int j = 0; j < k; j++)
                if (r[j] == r[k]) fail_msg("partition %d names broker %d twice", p, (int)r[k]);
            const char *rk = rack_of(b, n, r[k]);
            int dup = 0;
            for (int j = 0; j < nseen; j++) dup |= !strcmp(seen[j], rk);
            if (!dup) seen[nseen++] = rk;
            replicas[r[k]]++;
        }
        leaders[r[0]]++;
        int want = rf < nracks ? rf : nracks;
        if (nseen != want) fail_msg("partition %d spans %d racks, not %d", p, nseen, want);
    }
}

static void test_three_racks(void **state) {
    (void)state;
    st_place_broker_t b[] = {{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}, {5, "c"}, {6, "c"}};
    int32_t reps[60 * 3];
    int leaders[8] = {0}, replicas[8] = {0};
    st_place_replicas(b, 6, 0, 60, 3, 0, reps);
    check(b, 6, 3, reps, 60, 3, leaders, replicas);
    for (int id = 1; id <= 6; id++) {
        assert_int_equal(leaders[id], 10);
        assert_int_equal(replicas[id], 30);
    }
    /* the first leaders alternate racks: a b c a b c */
    assert_int_equal(reps[0], 1);
    assert_int_equal(reps[3], 3);
    assert_int_equal(reps[6], 5);
    assert_int_equal(reps[9], 2);
}

/* One big rack and one small: every partition of RF 2 still spans both. */
static void test_uneven_racks(void **state) {
    (void)state;
    st_place_broker_t b[] = {{10, "east"}, {11, "east"}, {12, "east"}, {20, "west"}};
    int32_t reps[40 * 2];
    int leaders[32] = {0}, replicas[32] = {0};
    st_place_replicas(b, 4, 0, 40, 2, 0, reps);
    check(b, 4, 2, reps, 40, 2, leaders, replicas);
    for (int i = 0; i < 4; i++) assert_int_equal(leaders[b[i].id], 10);
    /* west holds a replica of every partition */
    assert_int_equal(replicas[20], 40);
}

/* No racks: one rack of its own; replicas distinct, leaders and
 * followers balanced, followers of successive rounds shifted. */
static void test_no_racks(void **state) {
    (void)state;
    st_place_broker_t b[] = {{3, NULL}, {1, NULL}, {2, ""}, {4, NULL}};
    int32_t reps[8 * 2];
    int leaders[8] = {0}, replicas[8] = {0};
    st_place_replicas(b, 4, 0, 8, 2, 0, reps);
    check(b, 4, 1, reps, 8, 2, leaders, replicas);
    for (int id = 1; id <= 4; id++) assert_int_equal(leaders[id], 2);
    /* round 0: 1->2, round 1: 1->3 (shifted) */
    assert_int_equal(reps[0], 1);
    assert_int_equal(reps[1], 2);
    assert_int_equal(reps[8], 1);
    assert_int_equal(reps[9], 3);
    /* RF = brokers, and a single broker */
    int32_t all[4 * 4];
    st_place_replicas(b, 4, 0, 4, 4, 0, all);
    memset(leaders, 0, sizeof leaders);
    memset(replicas, 0, sizeof replicas);
    check(b, 4, 1, all, 4, 4, leaders, replicas);
    int32_t one[3];
    st_place_replicas(b, 1, 0, 3, 1, 7, one);
    assert_int_equal(one[0], 3);
    assert_int_equal(one[2], 3);
}

/* Topics one after another: the walk starts where the cluster's
 * partitions end, so one-partition topics do not all lead on one broker. */
static void test_across_topics(void **state) {
    (void)state;
    st_place_broker_t b[] = {{1, "a"}, {2, "b"}, {3, "c"}};
    int leaders[4] = {0};
    for (int64_t topic = 0; topic < 9; topic++) {
        int32_t r[3];
        st_place_replicas(b, 3, 0, 1, 3, topic, r);
        leaders[r[0]]++;
    }
    for (int id = 1; id <= 3; id++) assert_int_equal(leaders[id], 3);
    /* CreatePartitions continues a topic's walk (first > 0) */
    int32_t x[2 * 3], y[4 * 3];
    st_place_replicas(b, 3, 2, 2, 3, 0, x);
    st_place_replicas(b, 3, 0, 4, 3, 0, y);
    assert_memory_equal(x, y + 2 * 3, sizeof x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_racks),
        cmocka_unit_test(test_uneven_racks),
        cmocka_unit_test(test_no_racks),
        cmocka_unit_test(test_across_topics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

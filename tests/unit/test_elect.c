/*
 * test_elect.c - the eligible leader replica rules (KIP-966) of
 * broker/controller/elect.c, on images the real state machine
 * (st_image_apply) builds from the records the rules produce.
 *
 * One partition on replicas 1, 2, 3 with min.insync.replicas 2 goes
 * through the steps of the KIP's examples: ISR shrinks, fencing, an
 * unclean restart, the last known leader, an unclean election.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "controller_int.h"

typedef struct world {
    st_controller_t c;
    st_broker_config_t b;
    int64_t off;
    st_uuid_t tid;
} world_t;

static void apply(world_t *w, st_mrec_t *recs, int n) {
    st_meta_image_t *next = st_image_apply(w->c.image, recs, n, w->off += n);
    st_image_release(w->c.image);
    w->c.image = next;
}

/* What st_ctl__commit_changes would commit, applied. */
static int commit(world_t *w, st_ctl_changes_t *ch) {
    st_ctl__changes_elr(&w->c, ch);
    int n = ch->n;
    st_mrec_t *recs = calloc((size_t)n + 1, sizeof *recs);
    for (int i = 0; i < n; i++) {
        recs[i].type = ST_MREC_PARTITION_CHANGE;
        recs[i].u.partition_change = ch->v[i];
    }
    if (n) apply(w, recs, n);
    free(recs);
    st_ctl__changes_fini(ch);
    memset(ch, 0, sizeof *ch);
    return n;
}

static void fence_record(world_t *w, int32_t id, int fenced) {
    const st_meta_broker_t *b = st_image_broker(w->c.image, id);
    st_mrec_t r = {.type = fenced ? ST_MREC_FENCE_BROKER : ST_MREC_UNFENCE_BROKER};
    r.u.fence.id = id;
    r.u.fence.epoch = b->epoch;
    apply(w, &r, 1);
}

static void world_init(world_t *w, const char *min_isr, int unclean) {
    memset(w, 0, sizeof *w);
    w->b.min_insync_replicas = 1;
    w->b.unclean_leader_election_enable = unclean;
    w->c.cfg.broker = &w->b;
    w->c.image = st_image_apply(NULL, NULL, 0, -1);
    for (int32_t id = 1; id <= 3; id++) {
        st_mrec_t r = {.type = ST_MREC_REGISTER_BROKER};
        st_schema_defaults(&st_mrec_register_broker_schema, &r.u.register_broker);
        r.u.register_broker.broker_id = id;
        r.u.register_broker.broker_epoch = 10 * id;
        r.u.register_broker.fenced = 0;
        r.u.register_broker.rack = ST_STR_NULL;
        apply(w, &r, 1);
    }
    memset(w->tid.b, 7, sizeof w->tid.b);
    int32_t reps[3] = {1, 2, 3};
    st_mrec_t recs[3];
    memset(recs, 0, sizeof recs);
    recs[0].type = ST_MREC_TOPIC;
    recs[0].u.topic = (st_mrec_topic_t){st_str("t"), w->tid};
    recs[1].type = ST_MREC_PARTITION;
    st_schema_defaults(&st_mrec_partition_schema, &recs[1].u.partition);
    st_mrec_partition_t *p = &recs[1].u.partition;
    p->partition_id = 0;
    p->topic_id = w->tid;
    p->replicas.v = p->isr.v = reps;
    p->replicas.n = p->isr.n = 3;
    p->leader = 1;
    p->leader_epoch = 0;
    p->partition_epoch = 0;
    recs[2].type = ST_MREC_CONFIG;
    recs[2].u.config = (st_mrec_config_t){ST_RESOURCE_TOPIC, st_str("t"), st_str("min.insync.replicas"),
                                         st_str(min_isr)};
    apply(w, recs, 3);
}

static const st_meta_topic_t *topic(world_t *w) { return st_image_topic(w->c.image, "t", 1); }
static const st_meta_partition_t *part(world_t *w) { return &topic(w)->parts[0]; }

/* The leader's AlterPartition: the ISR becomes v. */
static void shrink(world_t *w, const int32_t *v, int n) {
    st_ctl_changes_t ch = {0};
    st_ctl__changes_add(&ch, topic(w), part(w), ST_MREC_NO_LEADER_CHANGE, v, n);
    assert_int_equal(commit(w, &ch), 1);
}

static void fence(world_t *w, int32_t id) {
    st_ctl_changes_t ch = {0};
    st_ctl__broker_changes(&w->c, w->c.image, ST_CTL_IN_ISR, id, id, -1, -1, &ch);
    fence_record(w, id, 1);
    commit(w, &ch);
}

static void unfence(world_t *w, int32_t id) {
    st_ctl_changes_t ch = {0};
    st_ctl__broker_changes(&w->c, w->c.image, ST_CTL_LEADERLESS, id, -1, id, -1, &ch);
    fence_record(w, id, 0);
    commit(w, &ch);
}

static void unclean_restart(world_t *w, int32_t id) {
    st_ctl_changes_t ch = {0};
    st_ctl__broker_changes(&w->c, w->c.image, ST_CTL_IN_ISR_OR_ELR, id, -1, -1, id, &ch);
    commit(w, &ch);
}

#define EXPECT(w, ldr, isr_, elr_, lk_)                                                        \
    do {                                                                                       \
        const st_meta_partition_t *mp_ = part(w);                                              \
        int32_t ei_[] = isr_, ee_[] = elr_, el_[] = lk_;                                       \
        int ni_ = (int)(sizeof ei_ / sizeof ei_[0]) - 1, ne_ = (int)(sizeof ee_ / sizeof ee_[0]) - 1, \
            nl_ = (int)(sizeof el_ / sizeof el_[0]) - 1;                                       \
        assert_int_equal(mp_->leader, ldr);                                                    \
        assert_int_equal(mp_->nisr, ni_);                                                      \
        for (int k_ = 0; k_ < ni_; k_++) assert_int_equal(mp_->isr[k_], ei_[k_ + 1]);          \
        assert_int_equal(mp_->nelr, ne_);                                                      \
        for (int k_ = 0; k_ < ne_; k_++) assert_int_equal(mp_->elr[k_], ee_[k_ + 1]);          \
        assert_int_equal(mp_->nlkelr, nl_);                                                    \
        for (int k_ = 0; k_ < nl_; k_++) assert_int_equal(mp_->lkelr[k_], el_[k_ + 1]);        \
    } while (0)
/* lists are written {0, members...}: the leading 0 is a placeholder */
#define L(...) {0, __VA_ARGS__}

static void test_elr_follows_isr_below_min(void **state) {
    (void)state;
    world_t w;
    world_init(&w, "2", 0);
    int32_t two[2] = {1, 2}, one[1] = {1};
    shrink(&w, two, 2); /* at the minimum: no ELR */
    EXPECT(&w, 1, L(1, 2), L(), L());
    shrink(&w, one, 1); /* below: 2 is eligible */
    EXPECT(&w, 1, L(1), L(2), L());
    /* 2 is still live: fencing the leader elects it from the ELR */
    fence(&w, 1);
    EXPECT(&w, 2, L(2), L(1), L());
    assert_int_equal(part(&w)->leader_epoch, 1);
    /* 1 comes back after an unclean stop: no longer eligible */
    unclean_restart(&w, 1);
    EXPECT(&w, 2, L(2), L(), L());
    /* the ISR back at the minimum: the ELR stays empty */
    shrink(&w, two, 2);
    EXPECT(&w, 2, L(1, 2), L(), L());
    st_image_release(w.c.image);
}

static void test_empty_isr_waits_for_an_eligible_replica(void **state) {
    (void)state;
    world_t w;
    world_init(&w, "2", 0);
    fence(&w, 3);
    EXPECT(&w, 1, L(1, 2), L(), L());
    fence(&w, 2); /* the ISR below the minimum: 2 becomes eligible */
    EXPECT(&w, 1, L(1), L(2), L());
    fence(&w, 1); /* the last ISR member: the ISR empties, no one can lead */
    EXPECT(&w, -1, L(), L(2, 1), L(1));
    unfence(&w, 3); /* not eligible: still no leader */
    EXPECT(&w, -1, L(), L(2, 1), L(1));
    unfence(&w, 2); /* eligible: leads, the ISR is just it */
    EXPECT(&w, 2, L(2), L(1), L());
    st_image_release(w.c.image);
}

static void test_last_known_leader_when_isr_and_elr_are_empty(void **state) {
    (void)state;
    world_t w;
    world_init(&w, "2", 0);
    fence(&w, 3);
    fence(&w, 2);
    fence(&w, 1);
    EXPECT(&w, -1, L(), L(2, 1), L(1));
    unclean_restart(&w, 2);
    unclean_restart(&w, 1);
    EXPECT(&w, -1, L(), L(), L(1));
    unfence(&w, 2); /* not the last known leader */
    EXPECT(&w, -1, L(), L(), L(1));
    unfence(&w, 1); /* the last known leader, elected uncleanly */
    EXPECT(&w, 1, L(1), L(), L());
    st_image_release(w.c.image);
}

static void test_min_isr_one_keeps_the_last_member_eligible(void **state) {
    (void)state;
    world_t w;
    world_init(&w, "1", 0);
    fence(&w, 2);
    fence(&w, 3);
    EXPECT(&w, 1, L(1), L(), L());
    fence(&w, 1); /* the ISR empties below min.insync.replicas 1 */
    EXPECT(&w, -1, L(), L(1), L(1));
    unfence(&w, 2);
    EXPECT(&w, -1, L(), L(1), L(1));
    unfence(&w, 1); /* clean restart: back from the ELR; ISR {1} is the minimum */
    EXPECT(&w, 1, L(1), L(), L());
    st_image_release(w.c.image);
}

static void test_unclean_restart_of_the_only_isr_member(void **state) {
    (void)state;
    world_t w;
    world_init(&w, "2", 0);
    fence(&w, 2);
    fence(&w, 3);
    EXPECT(&w, 1, L(1), L(3), L());
    /* an eligible replica besides it: 1 leaves the ISR */
    unclean_restart(&w, 1);
    EXPECT(&w, -1, L(), L(3), L(1));
    world_t v;
    world_init(&v, "1", 0);
    fence(&v, 2);
    fence(&v, 3);
    EXPECT(&v, 1, L(1), L(), L());
    int32_t epoch = part(&v)->leader_epoch;
    /* none eligible: it keeps leading, at a new epoch (it has followers) */
    unclean_restart(&v, 1);
    EXPECT(&v, 1, L(1), L(), L());
    assert_int_equal(part(&v)->leader_epoch, epoch + 1);
    st_image_release(w.c.image);
    st_image_release(v.c.image);
}

static void test_unclean_election_empties_the_elr(void **state) {
    (void)state;
    world_t w;
    world_init(&w, "3", 1); /* unclean.leader.election.enable */
    fence(&w, 3);
    EXPECT(&w, 1, L(1, 2), L(3), L());
    fence(&w, 2);
    fence(&w, 1);
    EXPECT(&w, -1, L(), L(3, 2, 1), L(1));
    unclean_restart(&w, 1);
    unclean_restart(&w, 2);
    unclean_restart(&w, 3);
    EXPECT(&w, -1, L(), L(), L(1));
    unfence(&w, 3); /* neither eligible nor the last known leader: unclean */
    EXPECT(&w, 3, L(3), L(), L());
    st_image_release(w.c.image);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elr_follows_isr_below_min),
        cmocka_unit_test(test_empty_isr_waits_for_an_eligible_replica),
        cmocka_unit_test(test_last_known_leader_when_isr_and_elr_are_empty),
        cmocka_unit_test(test_min_isr_one_keeps_the_last_member_eligible),
        cmocka_unit_test(test_unclean_restart_of_the_only_isr_member),
        cmocka_unit_test(test_unclean_election_empties_the_elr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

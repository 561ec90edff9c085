/*
 * test_metalog_raft.c - broker/raft's state machine driven over the
 * metalog's real storage ops, as stratad will drive it: one voter on a
 * scratch __cluster_metadata log, the flush completing on the metalog's
 * thread, a clock the test moves.  Proposals are committed and applied to
 * an image, snapshots are taken by size and the log below them deleted; a
 * restart reads quorum-state, loads the latest snapshot, replays the rest
 * and ends with the same image.
 */
#include "unit.h"

#include "metalog.h"

typedef struct host {
    char *root;
    char dir[4096];
    st_logmgr_t *mgr;
    st_log_t *log;
    st_metalog_t *ml;
    st_raft_t *raft;
    int64_t clock_ms;
    st_meta_image_t *img;
    int64_t applied_end;
    int32_t epoch, leader;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int flushes; /* completed, not yet handed to the Raft */
    uint64_t label;
} host_t;

static host_t *host_of(void *arg) { return st_metalog_host(arg); }

static int64_t op_now(void *arg) { return host_of(arg)->clock_ms; }
static uint32_t op_random(void *arg) { return (uint32_t)unit_rand(); }
static void op_send(void *arg, int32_t dest, const st_raft_msg_t *msg) {
    fail_msg("a single voter sent %s to %d", st_raft_msg_name(msg->type), dest);
}

typedef struct decode_ctx {
    st_arena_t *a;
    st_mrec_t *r;
    int n, cap;
} decode_ctx_t;

static int decode_cb(const st_record_t *r, void *arg) {
    decode_ctx_t *c = arg;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->r = st_realloc(c->r, sizeof *c->r * (size_t)c->cap);
    }
    assert_int_equal(st_mrec_decode(r->value, (size_t)r->value_len, c->a, &c->r[c->n]), ST_OK);
    c->n++;
    return 0;
}

static void op_apply(void *arg, const st_raft_entry_t *entries, int n) {
    host_t *h = host_of(arg);
    for (int i = 0; i < n; i++) {
        const st_raft_entry_t *en = &entries[i];
        assert_true(en->base_offset == h->applied_end);
        h->applied_end = en->base_offset + en->record_count;
        if (en->control) continue;
        st_arena_t a;
        st_arena_init(&a, 4096);
        decode_ctx_t c = {&a, NULL, 0, 0};
        assert_int_equal(st_batch_foreach_record(en->data, en->len, decode_cb, &c), ST_OK);
        st_meta_image_t *img = st_image_apply(h->img, c.r, c.n, h->applied_end - 1);
        st_image_release(h->img);
        h->img = img;
        free(c.r);
        st_arena_fini(&a);
    }
}

static void op_leader_change(void *arg, int32_t epoch, int32_t leader) {
    host_t *h = host_of(arg);
    h->epoch = epoch;
    h->leader = leader;
}

static st_meta_image_t *sm_image(void *arg, int64_t *applied_end) {
    host_t *h = arg;
    *applied_end = h->applied_end;
    return st_image_keep(h->img);
}

static void sm_load(void *arg, st_meta_image_t *img, st_raft_snapshot_id_t id) {
    host_t *h = arg;
    st_image_release(h->img);
    h->img = img;
    h->applied_end = id.end_offset;
}

static void on_flushed(void *arg) {
    host_t *h = arg;
    pthread_mutex_lock(&h->lock);
    h->flushes++;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
}

static void host_start(host_t *h) {
    char *dirs[1] = {h->dir};
    st_logmgr_config_t mc = {dirs, 1, 1, 3600 * 1000, 3600 * 1000, 0, NULL, 0};
    char err[1024] = "";
    assert_int_equal(st_logmgr_open(&mc, &h->mgr, err, sizeof err), ST_OK);
    st_log_config_t lc = {.segment_bytes = 16384, .segment_ms = INT64_MAX, .retention_ms = -1,
                          .retention_bytes = -1, .index_interval_bytes = 4096,
                          .segment_index_bytes = 10 << 20, .max_message_bytes = 8 << 20,
                          .ts_before_max_ms = INT64_MAX, .ts_after_max_ms = INT64_MAX};
    assert_int_equal(st_logmgr_open_log(h->mgr, "__cluster_metadata", 0, NULL, &lc, &h->log),
                     ST_OK);
    st_image_release(h->img);
    h->img = st_image_apply(NULL, NULL, 0, -1);
    h->applied_end = 0;
    st_metalog_config_t cfg = {.log = h->log, .flushed = on_flushed, .flushed_arg = h,
                               .sm = {h, sm_image, sm_load}, .host = h};
    st_err_t rc = st_metalog_open(&cfg, &h->ml, err, sizeof err);
    if (rc) fail_msg("metalog: %s", err);
    st_raft_qstate_t qs;
    int found = 0;
    assert_int_equal(st_metalog_qstate_read(h->ml, &qs, &found, err, sizeof err), ST_OK);
    st_raft_ops_t ops;
    memset(&ops, 0, sizeof ops);
    st_metalog_fill_ops(h->ml, &ops);
    ops.now_ms = op_now;
    ops.random = op_random;
    ops.send = op_send;
    ops.apply = op_apply;
    ops.leader_change = op_leader_change;
    st_raft_config_t rc_cfg;
    st_raft_config_defaults(&rc_cfg);
    int32_t voters[1] = {1};
    rc_cfg.node_id = 1;
    rc_cfg.voters = voters;
    rc_cfg.nvoters = 1;
    rc_cfg.snapshot_min_new_bytes = 8192;
    rc = st_raft_new(&rc_cfg, &ops, found ? &qs : NULL, &h->raft, err, sizeof err);
    if (rc) fail_msg("st_raft_new: %s", err);
}

static void host_stop(host_t *h) {
    st_raft_destroy(h->raft);
    st_metalog_close(h->ml);
    st_log_release(h->log);
    st_logmgr_close(h->mgr);
    h->raft = NULL;
    h->ml = NULL;
}

/* One turn of the host's loop: hand completed flushes to the Raft, tick,
 * move the clock to the next deadline (never a sleep). */
static void turn(host_t *h, int wait_flush) {
    pthread_mutex_lock(&h->lock);
    while (wait_flush && h->flushes == 0) pthread_cond_wait(&h->cond, &h->lock);
    int k = h->flushes;
    h->flushes = 0;
    pthread_mutex_unlock(&h->lock);
    if (k) st_raft_log_flushed(h->raft);
    int64_t next = st_raft_tick(h->raft);
    assert_int_equal(st_raft_failed(h->raft), ST_OK);
    if (next > h->clock_ms && next - h->clock_ms < 5000) h->clock_ms = next;
    else h->clock_ms += 10;
}

static void become_leader(host_t *h) {
    for (int i = 0; i < 1000 && st_raft_role(h->raft) != ST_RAFT_LEADER; i++) turn(h, 0);
    assert_int_equal(st_raft_role(h->raft), ST_RAFT_LEADER);
}

static void wait_applied(host_t *h, int64_t end) {
    for (int i = 0; i < 1000 && st_raft_applied_offset(h->raft) < end; i++)
        turn(h, st_metalog_durable_end(h->ml) < st_metalog_end_offset(h->ml));
    assert_true(st_raft_applied_offset(h->raft) >= end);
}

static void propose_topics(host_t *h, int n) {
    for (int i = 0; i < n; i++) {
        st_buf_t v, b;
        st_buf_init(&v);
        st_buf_init(&b);
        char name[64];
        snprintf(name, sizeof name, "raft-topic-%llu", (unsigned long long)h->label++);
        st_mrec_topic_t t = {st_str(name), {{0}}};
        unit_fill(&t.topic_id, sizeof t.topic_id);
        st_mrec_encode(ST_MREC_TOPIC, 0, &t, &v);
        size_t one = v.len;
        int32_t reps[1] = {1};
        st_mrec_partition_t p;
        st_schema_defaults(&st_mrec_partition_schema, &p);
        p.partition_id = 0;
        p.topic_id = t.topic_id;
        p.replicas.v = reps;
        p.replicas.n = 1;
        p.isr.v = reps;
        p.isr.n = 1;
        p.leader = 1;
        st_mrec_encode(ST_MREC_PARTITION, 0, &p, &v);
        st_batch_record_t recs[2] = {{NULL, -1, v.data, (int32_t)one},
                                     {NULL, -1, v.data + one, (int32_t)(v.len - one)}};
        st_batch_build(&b, recs, 2, 1700000000000);
        int64_t base;
        int32_t epoch;
        assert_int_equal(st_raft_propose(h->raft, b.data, (int32_t)b.len, 2, &base, &epoch), ST_OK);
        assert_int_equal(epoch, h->epoch);
        st_buf_fini(&v);
        st_buf_fini(&b);
        wait_applied(h, base + 2);
    }
}

static void test_single_voter_over_metalog(void **state) {
    (void)state;
    host_t h;
    memset(&h, 0, sizeof h);
    h.root = unit_tmpdir();
    snprintf(h.dir, sizeof h.dir, "%s/meta", h.root);
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.cond, NULL);
    h.clock_ms = 1000;
    host_start(&h);
    become_leader(&h);
    int32_t epoch1 = st_raft_epoch(h.raft);
    assert_int_equal(h.leader, 1);
    propose_topics(&h, 150);
    assert_int_equal(h.img->ntopics, 150);
    st_raft_snapshot_id_t snap;
    assert_int_equal(st_metalog_snapshot_latest(h.ml, &snap), 1);
    assert_true(snap.end_offset > 0 && snap.epoch == epoch1);
    assert_true(st_metalog_start_offset(h.ml) == snap.end_offset ||
                st_metalog_start_offset(h.ml) <= snap.end_offset);
    fprintf(stderr, "epoch %d: log [%lld, %lld), latest snapshot %lld-%d\n", (int)epoch1,
            (long long)st_metalog_start_offset(h.ml), (long long)st_metalog_end_offset(h.ml),
            (long long)snap.end_offset, (int)snap.epoch);
    st_meta_image_t *before = st_image_keep(h.img);
    host_stop(&h);

    /* Restart: quorum-state, the snapshot and the rest of the log. */
    host_start(&h);
    assert_true(h.applied_end == snap.end_offset ||
                h.applied_end >= snap.end_offset); /* loaded from the snapshot */
    become_leader(&h);
    assert_true(st_raft_epoch(h.raft) > epoch1);
    wait_applied(&h, st_metalog_end_offset(h.ml));
    assert_int_equal(h.img->ntopics, before->ntopics);
    for (int i = 0; i < before->ntopics; i++)
        assert_string_equal(h.img->topics[i]->name, before->topics[i]->name);
    propose_topics(&h, 10);
    assert_int_equal(h.img->ntopics, 160);
    st_image_release(before);
    host_stop(&h);
    st_image_release(h.img);
    pthread_mutex_destroy(&h.lock);
    pthread_cond_destroy(&h.cond);
    unit_tmpdir_remove(h.root);
}

int main(void) {
    unit_seed("metalog_raft");
    st_log_set_level(ST_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_voter_over_metalog),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

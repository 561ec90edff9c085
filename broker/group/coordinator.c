/*
 * coordinator.c - the group coordinator service: one thread that owns the
 * group state machine (state.c), runs the jobs request handlers give it in
 * order, fires the state machine's timers, replays the __consumer_offsets
 * partitions this broker leads, and appends the records the state machine
 * writes.
 *
 * Loading: at start every partition of __consumer_offsets led here is
 * LOADING; the thread replays each one in steps of offsets.load.buffer.size
 * between jobs, so requests for groups of a partition still loading are
 * answered COORDINATOR_LOAD_IN_PROGRESS and every other group is served
 * meanwhile.  A partition met for the first time later (the topic was just
 * created) is loaded on the spot when small.
 *
 * Durability: an append returns once the batch is in the log; the flusher
 * is asked for an fsync, and a handler whose response reports a write waits
 * (on its own loop) until the partition's flushed offset passes
 * st_group_coord_written_end, as an acks=all produce does.
 *
 *   main loop:  run one queued job (if any), one load step per LOADING
 *               partition, st_gstate_tick; sleep until the next
 *               deadline or job when there is nothing else to do
 *
 * Threads: the coordinator thread owns everything here except the job
 * queue (c->lock).
 */
#include "group_int.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct job {
    st_group_job_fn fn;
    void *arg;
    struct job *next;
} job_t;

typedef struct part {
    st_partition_t *p;    /* kept while loading or loaded */
    int64_t load_pos;     /* next offset to replay */
    int64_t written_end;
    int32_t leader_epoch; /* the partition's leader epoch when its load began */
} part_t;

struct st_group_coord {
    st_group_coord_config_t cfg;
    st_replicas_t *rm;
    st_controller_t *ctl;
    st_logmgr_t *logs;
    st_gstate_t *state;
    int32_t nparts;
    part_t *parts;
    uint8_t *buf;
    size_t bufcap;

    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    job_t *head, *tail;
    int stopping, started;
    int64_t image_offset; /* the metadata image last looked at for deletions */
    int64_t next_image_check;
    int64_t leaders_offset; /* ... and for the leaders of __consumer_offsets */
};

static int64_t op_mono(void *arg) {
    (void)arg;
    return st_mono_ms();
}

static int64_t op_wall(void *arg) {
    (void)arg;
    return st_now_ms();
}

static st_err_t op_append(void *arg, int32_t partition, int64_t producer_id, int16_t producer_epoch,
                          const st_batch_record_t *recs, int n, int64_t *base_offset) {
    st_group_coord_t *c = arg;
    if (partition < 0 || partition >= c->nparts || !c->parts[partition].p)
        return ST_E_NOT_LEADER_OR_FOLLOWER;
    st_partition_t *p = c->parts[partition].p;
    st_buf_t b;
    st_buf_init(&b);
    if (producer_id >= 0)
        st_batch_build_txn(&b, recs, n, st_now_ms(), producer_id, producer_epoch);
    else
        st_batch_build(&b, recs, n, st_now_ms());
    st_log_config_t lc;
    st_log_get_config(p->log, &lc);
    st_err_t e = ST_OK;
    if ((int64_t)b.len > lc.max_message_bytes) e = ST_E_MESSAGE_TOO_LARGE;
    else if ((int64_t)b.len > lc.segment_bytes) e = ST_E_RECORD_LIST_TOO_LARGE;
    st_append_info_t info;
    if (!e) e = st_partition_append(p, b.data, b.len, ST_LOG_UNVERIFIED, &info);
    if (!e) {
        if (base_offset) *base_offset = info.base_offset;
        c->parts[partition].written_end = info.last_offset + 1;
        if (c->cfg.flush_on_ack) st_logmgr_request_flush(c->logs, p->log);
    }
    st_buf_fini(&b);
    return e;
}

/* ---- loading ------------------------------------------------------------- */

/* The partition if this broker leads it (kept, with its leader epoch),
 * else NULL. */
static st_partition_t *led_partition(st_group_coord_t *c, int32_t partition, int32_t *epoch) {
    st_meta_image_t *img = st_controller_image(c->ctl);
    const st_meta_topic_t *t =
        st_image_topic(img, ST_GROUP_OFFSETS_TOPIC, strlen(ST_GROUP_OFFSETS_TOPIC));
    int leader = t && partition < t->nparts && t->parts[partition].leader == c->cfg.node_id;
    if (leader) *epoch = t->parts[partition].leader_epoch;
    if (t && t->nparts != c->nparts)
        ST_LOG_RATELIMITED(ST_LOG_WARN, "group", 60000,
                           "%s has %d partitions but groups are placed over %d (the count when "
                           "the coordinator started)",
                           ST_GROUP_OFFSETS_TOPIC, t->nparts, (int)c->nparts);
    st_image_release(img);
    if (!leader) return NULL;
    return st_replicas_lookup(c->rm, ST_GROUP_OFFSETS_TOPIC, strlen(ST_GROUP_OFFSETS_TOPIC),
                              partition, NULL);
}

static void start_load(st_group_coord_t *c, int32_t partition, st_partition_t *p, int32_t epoch) {
    part_t *pt = &c->parts[partition];
    st_partition_release(pt->p);
    pt->p = p;
    pt->leader_epoch = epoch;
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    pt->load_pos = o.log_start_offset;
    st_gstate_set_partition(c->state, partition, ST_GPART_LOADING);
    ST_INFO("group", "loading %s-%d (offsets %lld..%lld)", ST_GROUP_OFFSETS_TOPIC, (int)partition,
            (long long)o.log_start_offset, (long long)o.leo);
}

/* The partition is not ours (or no longer the one we loaded): its groups
 * go, their parked joins and syncs are answered NOT_COORDINATOR, and the
 * next request for one of them loads it again if it is ours by then. */
static void unload(st_group_coord_t *c, int32_t partition) {
    st_gstate_unload(c->state, partition);
    st_gstate_set_partition(c->state, partition, ST_GPART_UNKNOWN);
    st_partition_release(c->parts[partition].p);
    c->parts[partition].p = NULL;
    c->parts[partition].written_end = 0;
}

typedef struct replay {
    st_group_coord_t *c;
    int32_t partition;
    int64_t producer_id; /* of a transactional batch; else -1 */
} replay_t;

static int replay_record(const st_record_t *r, void *arg) {
    replay_t *rp = arg;
    st_gstate_load_record(rp->c->state, rp->partition, r->offset, rp->producer_id, r->key,
                          r->key_len, r->value_len >= 0 ? r->value : NULL, r->value_len);
    return 0;
}

/* A control batch's record (Kafka's EndTransactionMarker):
 *
 *   key    int16 version (0), int16 type (0 ABORT, 1 COMMIT)
 *   value  int16 version, int32 coordinator epoch (not needed here)
 *
 * Other types (or versions) are not transaction markers: skipped. */
static int replay_marker(const st_record_t *r, void *arg) {
    replay_t *rp = arg;
    if (r->key_len < 4 || st_be16_get(r->key) != 0) return 0;
    int16_t type = (int16_t)st_be16_get(r->key + 2);
    if (type == 0 || type == 1)
        st_gstate_end_txn(rp->c->state, rp->partition, rp->producer_id, type == 1);
    return 0;
}

/* One batch of the replay: a transaction's records are pending until its
 * marker (a control batch of the same producer) commits or aborts them. */
static void replay_batch(const st_batch_info_t *b, const uint8_t *bytes, void *arg) {
    replay_t *rp = arg;
    int control = (b->attributes & ST_ATTR_CONTROL) != 0;
    rp->producer_id =
        (b->attributes & ST_ATTR_TRANSACTIONAL) && b->producer_id >= 0 ? b->producer_id : -1;
    st_err_t re = ST_OK;
    if (!control) re = st_batch_foreach_record(bytes, b->size, replay_record, rp);
    else if (rp->producer_id >= 0) re = st_batch_foreach_record(bytes, b->size, replay_marker, rp);
    if (re)
        ST_WARN("group", "%s-%d: batch at offset %lld unreadable (%s); skipped",
                ST_GROUP_OFFSETS_TOPIC, (int)rp->partition, (long long)b->base_offset,
                st_err_name(re));
}

/* One step of replay: up to offsets.load.buffer.size bytes.  Returns 1
 * when the partition is loaded (or given up). */
static int load_step(st_group_coord_t *c, int32_t partition) {
    part_t *pt = &c->parts[partition];
    replay_t rp = {c, partition, -1};
    int64_t before = pt->load_pos;
    int done;
    st_err_t e = st_log_replay_step(pt->p->log, &pt->load_pos, c->cfg.load_buffer_bytes, &c->buf,
                                    &c->bufcap, replay_batch, &rp, &done);
    if (e == ST_E_CORRUPT) {
        ST_ERROR("group", "%s-%d: no readable batch at offset %lld; loading stops there",
                 ST_GROUP_OFFSETS_TOPIC, (int)partition, (long long)before);
        st_gstate_load_done(c->state, partition);
        return 1;
    }
    if (e) {
        ST_ERROR("group", "%s-%d: cannot read while loading: %s", ST_GROUP_OFFSETS_TOPIC,
                 (int)partition, st_err_msg(e));
        unload(c, partition);
        return 1;
    }
    if (done) {
        st_gstate_load_done(c->state, partition);
        c->image_offset = -1; /* topics deleted while it was away: look again */
        return 1;
    }
    return 0;
}

/* Start loading, and load a small partition (a new one) on the spot, so
 * that the request after it is not told COORDINATOR_LOAD_IN_PROGRESS. */
static void load_now(st_group_coord_t *c, int32_t partition, st_partition_t *p, int32_t epoch) {
    start_load(c, partition, p, epoch);
    for (int i = 0; i < 16; i++)
        if (load_step(c, partition)) break;
}

/* The state machine met a partition it knows nothing about: load it if it
 * is ours, right away when small. */
static void op_ensure(void *arg, int32_t partition) {
    st_group_coord_t *c = arg;
    int32_t epoch = 0;
    st_partition_t *p = led_partition(c, partition, &epoch);
    if (!p) return; /* stays UNKNOWN: asked again next time */
    load_now(c, partition, p, epoch);
}

/* ---- the thread ------------------------------------------------------------- */

static int load_some(st_group_coord_t *c) {
    int loading = 0;
    for (int32_t i = 0; i < c->nparts; i++) {
        if (st_gstate_partition(c->state, i) != ST_GPART_LOADING) continue;
        if (!load_step(c, i)) loading = 1;
    }
    return loading;
}

static int topic_exists(st_str_t topic, void *arg) {
    return topic.len > 0 && st_image_topic(arg, topic.p, (size_t)topic.len) != NULL;
}

/* When the metadata changed (at most once a second), offsets of topics
 * that were deleted go. */
static void follow_deletions(st_group_coord_t *c) {
    int64_t now = st_mono_ms();
    if (now < c->next_image_check) return;
    c->next_image_check = now + 1000;
    st_meta_image_t *img = st_controller_image(c->ctl);
    if (img->offset != c->image_offset) {
        c->image_offset = img->offset;
        st_gstate_drop_missing_topics(c->state, topic_exists, img);
    }
    st_image_release(img);
}

/* Whenever the metadata changed: a partition of __consumer_offsets that
 * became ours is loaded, one led elsewhere now is unloaded, and one whose
 * leader epoch moved on since we loaded it (led elsewhere in between, as
 * through a rolling restart, while we kept the groups as they were) is
 * loaded again from the log, which the other leader's commits reached.
 * Before each job, so that none is served from a stale partition. */
static void follow_leaders(st_group_coord_t *c) {
    st_meta_image_t *img = st_controller_image(c->ctl);
    if (img->offset == c->leaders_offset) {
        st_image_release(img);
        return;
    }
    c->leaders_offset = img->offset;
    const st_meta_topic_t *t =
        st_image_topic(img, ST_GROUP_OFFSETS_TOPIC, strlen(ST_GROUP_OFFSETS_TOPIC));
    for (int32_t i = 0; t && i < c->nparts && i < t->nparts; i++) {
        const st_meta_partition_t *mp = &t->parts[i];
        int mine = mp->leader == c->cfg.node_id;
        st_gpart_state_t ps = st_gstate_partition(c->state, i);
        int held = ps == ST_GPART_LOADED || ps == ST_GPART_LOADING;
        if (held && (!mine || mp->leader_epoch != c->parts[i].leader_epoch)) {
            ST_INFO("group", "%s-%d is led by node %d at epoch %d now (loaded at epoch %d): "
                    "unloaded", ST_GROUP_OFFSETS_TOPIC, (int)i, (int)mp->leader,
                    (int)mp->leader_epoch, (int)c->parts[i].leader_epoch);
            unload(c, i);
            ps = ST_GPART_UNKNOWN;
        }
        if (mine && ps == ST_GPART_UNKNOWN) {
            st_partition_t *p = st_replicas_lookup(c->rm, ST_GROUP_OFFSETS_TOPIC,
                                                   strlen(ST_GROUP_OFFSETS_TOPIC), i, NULL);
            if (p) load_now(c, i, p, mp->leader_epoch);
        }
    }
    st_image_release(img);
}

static void *coord_main(void *arg) {
    st_group_coord_t *c = arg;
    st_thread_set_name("group-coord");
    c->leaders_offset = -2;
    follow_leaders(c);
    pthread_mutex_lock(&c->lock);
    for (;;) {
        /* One job, then one load step and the timers, so that neither
         * loading nor session expiry waits for a quiet moment. */
        job_t *j = c->head;
        if (j) {
            c->head = j->next;
            if (!c->head) c->tail = NULL;
        } else if (c->stopping) {
            break;
        }
        pthread_mutex_unlock(&c->lock);
        if (!st_gstate_closed(c->state)) follow_leaders(c);
        if (j) {
            j->fn(c, c->state, j->arg);
            free(j);
        }
        int loading = st_gstate_loading(c->state) && load_some(c);
        follow_deletions(c);
        int64_t next = st_gstate_tick(c->state);
        pthread_mutex_lock(&c->lock);
        if (c->head || c->stopping || loading) continue;
        int64_t wait = next < 0 ? 1000 : ST_MIN(ST_MAX(next - st_mono_ms(), 0), 1000);
        if (wait <= 0) continue;
        st_cond_wait_ms(&c->cond, &c->lock, wait);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

st_group_coord_t *st_group_coord_new(const st_group_coord_config_t *cfg, st_replicas_t *rm,
                                     st_controller_t *ctl, st_logmgr_t *logs) {
    st_group_coord_t *c = st_calloc(1, sizeof *c);
    c->cfg = *cfg;
    if (c->cfg.load_buffer_bytes <= 0) c->cfg.load_buffer_bytes = 5 << 20;
    c->rm = rm;
    c->ctl = ctl;
    c->logs = logs;
    /* Groups are placed over the partitions the topic has, when it exists */
    st_meta_image_t *img = st_controller_image(ctl);
    const st_meta_topic_t *t =
        st_image_topic(img, ST_GROUP_OFFSETS_TOPIC, strlen(ST_GROUP_OFFSETS_TOPIC));
    c->nparts = t && t->nparts > 0 ? t->nparts : cfg->state.num_partitions;
    st_image_release(img);
    st_gstate_config_t sc = cfg->state;
    sc.num_partitions = c->nparts;
    c->parts = st_calloc((size_t)c->nparts, sizeof *c->parts);
    st_gstate_ops_t ops = {op_mono, op_wall, op_append, op_ensure, c};
    c->state = st_gstate_new(&sc, &ops);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    return c;
}

void st_group_coord_start(st_group_coord_t *c) {
    pthread_create(&c->thread, NULL, coord_main, c);
    c->started = 1;
}

void st_group_coord_submit(st_group_coord_t *c, st_group_job_fn fn, void *arg) {
    job_t *j = st_malloc(sizeof *j);
    *j = (job_t){fn, arg, NULL};
    pthread_mutex_lock(&c->lock);
    if (c->tail) c->tail->next = j;
    else c->head = j;
    c->tail = j;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* A job another thread waits for (run_and_wait). */
typedef struct wait_job {
    st_group_job_fn fn;
    void *arg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
} wait_job_t;

static void wait_job_run(st_group_coord_t *c, st_gstate_t *s, void *arg) {
    wait_job_t *w = arg;
    w->fn(c, s, w->arg);
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Run fn on the coordinator thread and return once it has run (any
 * thread but that one; jobs always run, destroy runs the late ones). */
static void run_and_wait(st_group_coord_t *c, st_group_job_fn fn, void *arg) {
    wait_job_t w = {fn, arg, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    st_group_coord_submit(c, wait_job_run, &w);
    pthread_mutex_lock(&w.lock);
    while (!w.done) pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
}

static void close_job(st_group_coord_t *c, st_gstate_t *s, void *arg) {
    (void)c, (void)arg;
    st_gstate_close(s);
}

void st_group_coord_close_requests(st_group_coord_t *c) {
    if (!c || !c->started) return;
    run_and_wait(c, close_job, NULL);
}

void st_group_coord_destroy(st_group_coord_t *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (c->started) pthread_join(c->thread, NULL);
    /* jobs queued after the thread ended run here (none in a clean stop) */
    while (c->head) {
        job_t *j = c->head;
        c->head = j->next;
        j->fn(c, c->state, j->arg);
        free(j);
    }
    st_gstate_destroy(c->state);
    for (int32_t i = 0; i < c->nparts; i++) st_partition_release(c->parts[i].p);
    free(c->parts);
    free(c->buf);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

/* ---- views (the admin listener) --------------------------------------------- */

typedef struct views_job {
    st_group_view_t *v;
    int n, cap;
} views_job_t;

static char *str_copy(st_str_t s) {
    return st_strndup(s.len > 0 ? s.p : "", s.len > 0 ? (size_t)s.len : 0);
}

static void view_offset(const st_goffset_t *o, void *arg) {
    st_group_view_t *g = arg;
    if (o->producer_id >= 0) return; /* a pending transactional offset */
    g->offsets = st_realloc(g->offsets, sizeof *g->offsets * (size_t)(g->noffsets + 1));
    g->offsets[g->noffsets++] =
        (st_group_view_offset_t){str_copy(o->topic), o->partition, o->offset, o->commit_ts};
}

static int cmp_view_offset(const void *a, const void *b) {
    const st_group_view_offset_t *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static void view_group(st_group_t *g, void *arg) {
    views_job_t *j = arg;
    if (j->n == j->cap) {
        j->cap = j->cap ? j->cap * 2 : 8;
        j->v = st_realloc(j->v, sizeof *j->v * (size_t)j->cap);
    }
    st_group_view_t *v = &j->v[j->n++];
    memset(v, 0, sizeof *v);
    v->group_id = str_copy(g->id);
    v->state = st_group_state_name(g->state);
    v->protocol_type = str_copy(g->protocol_type);
    v->generation = g->generation;
    v->nmembers = g->nmembers;
    st_gstate_foreach_offset(g, view_offset, v);
    if (v->noffsets > 1) qsort(v->offsets, (size_t)v->noffsets, sizeof *v->offsets, cmp_view_offset);
}

static void views_run(st_group_coord_t *c, st_gstate_t *s, void *arg) {
    (void)c;
    st_gstate_foreach_group(s, view_group, arg);
}

static int cmp_view(const void *a, const void *b) {
    return strcmp(((const st_group_view_t *)a)->group_id, ((const st_group_view_t *)b)->group_id);
}

int st_group_coord_views(st_group_coord_t *c, st_group_view_t **out) {
    views_job_t j = {NULL, 0, 0};
    run_and_wait(c, views_run, &j);
    if (j.n > 1) qsort(j.v, (size_t)j.n, sizeof *j.v, cmp_view);
    *out = j.v;
    return j.n;
}

void st_group_views_free(st_group_view_t *v, int n) {
    for (int i = 0; i < n; i++) {
        free(v[i].group_id);
        free(v[i].protocol_type);
        for (int k = 0; k < v[i].noffsets; k++) free(v[i].offsets[k].topic);
        free(v[i].offsets);
    }
    free(v);
}

int64_t st_group_coord_written_end(st_group_coord_t *c, int32_t partition) {
    if (!c->cfg.flush_on_ack || partition < 0 || partition >= c->nparts) return 0;
    return c->parts[partition].written_end;
}

int32_t st_group_coord_num_partitions(st_group_coord_t *c) { return c->nparts; }

typedef struct marker_job {
    int32_t partition;
    int64_t producer_id;
    int16_t producer_epoch;
    int commit;
} marker_job_t;

static void marker_run(st_group_coord_t *c, st_gstate_t *s, void *arg) {
    (void)c;
    marker_job_t *m = arg;
    /* A partition still loading meets the marker in its log (it was
     * appended before this job was queued); one not led here is the new
     * leader's to replay. */
    if (st_gstate_partition(s, m->partition) == ST_GPART_LOADED)
        st_gstate_end_txn(s, m->partition, m->producer_id, m->commit);
    free(m);
}

void st_group_coord_txn_marker(st_group_coord_t *c, int32_t partition, int64_t producer_id,
                               int16_t producer_epoch, int commit) {
    if (!c || partition < 0 || partition >= c->nparts || producer_id < 0) return;
    marker_job_t *m = st_malloc(sizeof *m);
    *m = (marker_job_t){partition, producer_id, producer_epoch, commit != 0};
    st_group_coord_submit(c, marker_run, m);
}

/*
 * controller.c - the operations that write the metadata log, and the
 * state machine's host.
 *
 * Write path (one operation at a time, on the controller thread):
 *
 *   validate against the current image
 *     -> encode records -> one batch -> proposed to the Raft (quorum.c)
 *     -> committed by a majority of the voters, durably
 *     -> the Raft applies it: decode the stored batch, st_image_apply
 *     -> publish the new image -> listener (partitions follow)
 *
 * Every node, leader or not, builds its image only from what the Raft
 * applies, and applies what was decoded from the stored bytes (not the
 * structs the operation built), so the live path, a follower and a replay
 * are identical.
 */
#include "controller_int.h"
#include "placement.h"

#include <ctype.h>
#include <stdlib.h>
#include <strings.h>

st_meta_image_t *st_controller_image(st_controller_t *c) {
    pthread_mutex_lock(&c->lock);
    st_meta_image_t *img = st_image_keep(c->image);
    pthread_mutex_unlock(&c->lock);
    return img;
}

int st_controller_broker_ready(st_controller_t *c) {
    pthread_mutex_lock(&c->lock);
    int ready = 0;
    for (int i = 0; i < c->image->nbrokers; i++)
        if (c->image->brokers[i].id == c->cfg.broker->node_id) ready = !c->image->brokers[i].fenced;
    pthread_mutex_unlock(&c->lock);
    return ready;
}

const char *st_controller_cluster_id(const st_controller_t *c) { return c->cluster_id; }
int32_t st_controller_id(st_controller_t *c) {
    pthread_mutex_lock(&c->lock);
    int32_t id = c->leader_id;
    pthread_mutex_unlock(&c->lock);
    return id;
}

int st_controller_is_broker(const st_controller_t *c) { return c->cfg.broker_role; }

int32_t st_controller_id_for_clients(st_controller_t *c, const st_meta_image_t *img) {
    int32_t leader = st_controller_id(c), self = c->cfg.broker->node_id, any = -1;
    int self_live = 0;
    for (int i = 0; i < img->nbrokers; i++) {
        const st_meta_broker_t *b = &img->brokers[i];
        if (b->id == leader) return leader;
        if (b->fenced) continue;
        if (b->id == self) self_live = 1;
        if (any < 0) any = b->id;
    }
    if (leader < 0) return -1;
    return self_live ? self : any;
}

void st_ctl__publish(st_controller_t *c, st_meta_image_t *img) {
    pthread_mutex_lock(&c->lock);
    st_meta_image_t *old = c->image;
    c->image = img;
    pthread_mutex_unlock(&c->lock);
    if (c->listener) c->listener(old, img, c->listener_arg);
    st_image_release(old);
}

/* Decode every record of the batches in [p, p+len) and apply them batch by
 * batch.  Used by replay and by commit. */
typedef struct collect {
    st_arena_t *arena;
    st_mrec_t *recs;
    int n, cap;
    st_err_t err;
} collect_t;

static int collect_cb(const st_record_t *r, void *arg) {
    collect_t *c = arg;
    if (r->value_len <= 0) return 0;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 16;
        c->recs = st_realloc(c->recs, sizeof *c->recs * (size_t)c->cap);
    }
    st_err_t e = st_mrec_decode(r->value, (size_t)r->value_len, c->arena, &c->recs[c->n]);
    if (e == ST_E_NOT_FOUND) return 0; /* a record type we do not know: skip */
    if (e) {
        c->err = e;
        return 1;
    }
    c->n++;
    return 0;
}

st_err_t st_ctl__apply_batches(st_controller_t *c, const uint8_t *const *batches,
                               const int32_t *lens, int n, int64_t last) {
    st_arena_t arena;
    st_arena_init(&arena, 4096);
    collect_t col = {&arena, NULL, 0, 0, ST_OK};
    st_err_t e = ST_OK;
    for (int i = 0; i < n && !e; i++) {
        e = st_batch_foreach_record(batches[i], lens[i], collect_cb, &col);
        if (!e) e = col.err;
        if (e) ST_ERROR("controller", "a metadata batch before offset %lld cannot be decoded: %s",
                        (long long)last, st_err_msg(e));
    }
    if (!e) st_ctl__publish(c, st_image_apply(c->image, col.recs, col.n, last));
    free(col.recs);
    st_arena_fini(&arena);
    return e;
}

/* Encode, append, sync, apply, publish. */
typedef struct pending {
    st_buf_t values[1]; /* record values, back to back */
    size_t *ends;
    int n, cap;
} pending_t;

static void pending_init(pending_t *p) {
    memset(p, 0, sizeof *p);
    st_buf_init(&p->values[0]);
}

static void pending_add(pending_t *p, int type, int version, const void *rec) {
    st_mrec_encode(type, version, rec, &p->values[0]);
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 8;
        p->ends = st_realloc(p->ends, sizeof *p->ends * (size_t)p->cap);
    }
    p->ends[p->n++] = p->values[0].len;
}

static void pending_fini(pending_t *p) {
    st_buf_fini(&p->values[0]);
    free(p->ends);
}

static st_err_t commit(st_controller_t *c, pending_t *p) {
    if (p->n == 0) return ST_OK;
    st_batch_record_t *recs = st_calloc((size_t)p->n, sizeof *recs);
    size_t start = 0;
    for (int i = 0; i < p->n; i++) {
        recs[i].key = NULL;
        recs[i].key_len = -1;
        recs[i].value = p->values[0].data + start;
        recs[i].value_len = (int32_t)(p->ends[i] - start);
        start = p->ends[i];
    }
    st_buf_t batch;
    st_buf_init(&batch);
    st_batch_build(&batch, recs, p->n, st_now_ms());
    free(recs);
    st_err_t e = st_ctl__commit(c, batch.data, batch.len, p->n);
    st_buf_fini(&batch);
    return e;
}

st_err_t st_ctl__commit_records(st_controller_t *c, const st_ctl_rec_t *recs, int n) {
    pending_t p;
    pending_init(&p);
    for (int i = 0; i < n; i++) pending_add(&p, recs[i].type, 0, recs[i].rec);
    st_err_t e = commit(c, &p);
    pending_fini(&p);
    return e;
}

/* What an operation answers when its commit failed: NOT_CONTROLLER and
 * REQUEST_TIMED_OUT as they are (a client retries them: the quorum is
 * electing, or this node lost it), anything else is the metadata log's. */
static void commit_failed(st_op_result_t *res, st_err_t e) {
    if (e == ST_E_NOT_CONTROLLER || e == ST_E_REQUEST_TIMED_OUT) {
        res->error = e;
        snprintf(res->message, sizeof res->message,
                 e == ST_E_NOT_CONTROLLER
                     ? "This node is not the active controller (the quorum is electing one)."
                     : "The metadata quorum did not commit the change in time.");
        return;
    }
    res->error = ST_E_KAFKA_STORAGE_ERROR;
    snprintf(res->message, sizeof res->message, "metadata log write failed: %s", st_err_msg(e));
}

/* ---- thread ----------------------------------------------------------- */

void st_controller_submit(st_controller_t *c, st_controller_job_cb fn, void *arg) {
    job_t *j = st_malloc(sizeof *j);
    j->next = NULL;
    j->fn = fn;
    j->arg = arg;
    pthread_mutex_lock(&c->lock);
    if (c->tail) c->tail->next = j;
    else c->head = j;
    c->tail = j;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

st_err_t st_controller_open(const st_controller_config_t *cfg, st_logmgr_t *logs,
                            st_image_listener_cb listener, void *arg, st_controller_t **out,
                            char *err, size_t errlen) {
    st_controller_t *c = st_calloc(1, sizeof *c);
    c->cfg = *cfg;
    c->logs = logs;
    c->broker_epoch = -1;
    c->previous_broker_epoch = logs ? st_logmgr_previous_broker_epoch(logs) : -1;
    c->leader_id = -1;
    c->leader_epoch = -1;
    snprintf(c->cluster_id, sizeof c->cluster_id, "%s", cfg->cluster_id);
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    c->image = st_image_apply(NULL, NULL, 0, -1);
    st_log_config_t lc = {
        .segment_bytes = cfg->broker->metadata_log_segment_bytes,
        .segment_ms = INT64_MAX,
        .retention_ms = -1,
        .retention_bytes = -1,
        .index_interval_bytes = 4096,
        .segment_index_bytes = 10 << 20,
        .max_message_bytes = 8 << 20,
        .log_append_time = 0,
        .ts_before_max_ms = INT64_MAX,
        .ts_after_max_ms = INT64_MAX,
        .delete_policy = 0,
    };
    st_err_t e = st_logmgr_open_log(logs, META_TOPIC, 0, NULL, &lc, &c->log);
    if (e) {
        snprintf(err, errlen, "cannot open the metadata log: %s", st_err_msg(e));
        goto fail;
    }
    /* The listener learns every image from the first (a snapshot's, or the
     * replay's) on. */
    c->listener = listener;
    c->listener_arg = arg;
    if (listener) listener(NULL, c->image, arg);
    st_ctl__members_init(c);
    e = st_ctl__quorum_open(c, err, errlen);
    if (!e) e = st_ctl__quorum_catch_up(c, err, errlen);
    if (e) goto fail;
    ST_INFO("controller", "metadata applied up to offset %lld: %d topics, %d brokers",
            (long long)(c->applied_end - 1), c->image->ntopics, c->image->nbrokers);
    if (c->alone && c->cfg.broker_role) {
        /* a quorum of one leads already: register here and now */
        st_ctl__register_self(c);
        if (c->broker_epoch < 0) {
            snprintf(err, errlen, "cannot register this broker in the metadata log");
            e = ST_E_KAFKA_STORAGE_ERROR;
            goto fail;
        }
    }
    *out = c;
    return ST_OK;
fail:
    st_controller_close(c);
    return e;
}

void st_controller_start(st_controller_t *c) {
    pthread_create(&c->thread, NULL, st_ctl__main, c);
    c->started = 1;
}

void st_controller_close(st_controller_t *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (c->started) pthread_join(c->thread, NULL);
    /* a clean stop names this epoch, so the next incarnation keeps its
     * place among the eligible leaders */
    if (c->logs && c->broker_epoch >= 0) st_logmgr_set_broker_epoch(c->logs, c->broker_epoch);
    st_ctl__quorum_close(c);
    st_ctl__members_fini(c);
    if (c->log) st_log_release(c->log);
    st_image_release(c->image);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

/* ---- operations --------------------------------------------------------- */

int st_topic_name_valid(const char *n, size_t len, char *why, size_t whylen) {
    if (len == 0 || len > 249) {
        snprintf(why, whylen, "Topic name must be 1 to 249 characters long");
        return 0;
    }
    if ((len == 1 && n[0] == '.') || (len == 2 && n[0] == '.' && n[1] == '.')) {
        snprintf(why, whylen, "Topic name cannot be \".\" or \"..\"");
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)n[i];
        if (!isalnum(ch) && ch != '.' && ch != '_' && ch != '-') {
            snprintf(why, whylen,
                     "Topic name \"%.*s\" is illegal, it contains a character other than ASCII "
                     "alphanumerics, '.', '_' and '-'",
                     (int)len, n);
            return 0;
        }
    }
    return 1;
}

int st_topic_is_internal(const char *name, size_t len) {
    static const char *const names[] = {"__consumer_offsets", "__transaction_state", META_TOPIC};
    for (size_t i = 0; i < ST_ARRAY_SIZE(names); i++)
        if (len == strlen(names[i]) && !memcmp(name, names[i], len)) return 1;
    return 0;
}

/* Kafka refuses names that differ only by '.' versus '_' (metric names
 * would collide). */
static const st_meta_topic_t *colliding_topic(const st_meta_image_t *img, const char *n,
                                              size_t len) {
    for (int i = 0; i < img->ntopics; i++) {
        const char *m = img->topics[i]->name;
        if (strlen(m) != len) continue;
        size_t k;
        for (k = 0; k < len; k++) {
            char a = n[k] == '.' ? '_' : n[k], b = m[k] == '.' ? '_' : m[k];
            if (a != b) break;
        }
        if (k == len) return img->topics[i];
    }
    return NULL;
}

/* The unfenced brokers, where new replicas may go (caller frees). */
static st_place_broker_t *live_brokers(const st_meta_image_t *img, int *n) {
    st_place_broker_t *v = st_calloc((size_t)img->nbrokers + 1, sizeof *v);
    int k = 0;
    for (int i = 0; i < img->nbrokers; i++)
        if (!img->brokers[i].fenced)
            v[k++] = (st_place_broker_t){img->brokers[i].id, img->brokers[i].rack};
    *n = k;
    return v;
}

static int64_t total_partitions(const st_meta_image_t *img) {
    int64_t n = 0;
    for (int t = 0; t < img->ntopics; t++) n += img->topics[t]->nparts;
    return n;
}

/*
 * max.broker.partitions (KIP-578): would the count new partitions whose
 * replicas are reps[p * rf + k] put more partition replicas on one broker
 * than it may hold?  Returns 1 and names the broker and its would-be count
 * when it would.  Walks every replica: a request holds at most
 * ST_CONTROLLER_MAX_PARTITIONS_PER_REQUEST partitions and num.partitions is
 * bounded, so this is milliseconds at worst.
 */
static int exceeds_broker_limit(st_controller_t *c, const st_meta_image_t *img,
                                const st_place_broker_t *brokers, int nb, const int32_t *reps,
                                int32_t count, int rf, int32_t *broker_out,
                                int64_t *total_out) {
    int64_t limit = c->cfg.broker->max_broker_partitions;
    int64_t *have = st_calloc((size_t)nb + 1, sizeof *have);
    for (int t = 0; t < img->ntopics; t++)
        for (int i = 0; i < img->topics[t]->nparts; i++) {
            const st_meta_partition_t *mp = &img->topics[t]->parts[i];
            for (int r = 0; r < mp->nreplicas; r++)
                for (int b = 0; b < nb; b++)
                    if (brokers[b].id == mp->replicas[r]) have[b]++;
        }
    for (int64_t i = 0; i < (int64_t)count * rf; i++)
        for (int b = 0; b < nb; b++)
            if (brokers[b].id == reps[i]) have[b]++;
    int over = 0;
    for (int b = 0; b < nb && !over; b++) {
        if (have[b] <= limit) continue;
        over = 1;
        *broker_out = brokers[b].id;
        *total_out = have[b];
    }
    free(have);
    return over;
}

/* Replicas placed one by one at most: more cannot be a request the
 * controller takes (Kafka's bound is 10,000 partitions per request, and
 * num.partitions is at most 100,000), and a count of 2^31 - 1 must be
 * refused at once, not walked. */
#define PLACE_MAX_REPLICAS 1000000

/*
 * A count too large to place: answer without placing.  The busiest broker
 * would hold at least the average, so when that is over
 * max.broker.partitions, that is the answer; otherwise the batch is
 * refused for its size, as Kafka's controller refuses it.
 */
static void refuse_unplaceable(st_controller_t *c, const st_meta_image_t *img, int nb,
                               int64_t count, int rf, int more, const char *name, size_t len,
                               st_op_result_t *res) {
    int64_t have = 0;
    for (int t = 0; t < img->ntopics; t++)
        for (int i = 0; i < img->topics[t]->nparts; i++)
            have += img->topics[t]->parts[i].nreplicas;
    int64_t least = (have + count * rf + nb - 1) / nb;
    res->error = ST_E_POLICY_VIOLATION;
    if (least > c->cfg.broker->max_broker_partitions)
        st_snprintf_marked(res->message, sizeof res->message,
                           "More than max.broker.partitions (%d): at least %lld partition "
                           "replicas on one of the %d brokers with %s%lld %spartitions of topic "
                           "'%.*s'.",
                           (int)c->cfg.broker->max_broker_partitions, (long long)least, nb,
                           more ? "" : "the ", (long long)count, more ? "more " : "", (int)len,
                           name);
    else
        snprintf(res->message, sizeof res->message,
                 "Unable to perform excessively large batch operation.");
}

static void add_partition_record(pending_t *p, const st_uuid_t *tid, int32_t index,
                                 const int32_t *replicas, int n, int32_t leader_epoch) {
    st_mrec_partition_t r;
    st_schema_defaults(&st_mrec_partition_schema, &r);
    r.partition_id = index;
    r.topic_id = *tid;
    r.replicas.v = (int32_t *)replicas;
    r.replicas.n = n;
    r.isr.v = (int32_t *)replicas;
    r.isr.n = n;
    r.leader = replicas[0];
    r.leader_epoch = leader_epoch;
    r.partition_epoch = 0;
    pending_add(p, ST_MREC_PARTITION, 0, &r);
}

/* A restore's configs (ST_RESTORE_*): taken out of t's (into *plain, in
 * kv, t's own order) into *id and *epoch.  0, or 1 with res refused. */
static int take_restore_configs(const st_new_topic_t *t, st_new_topic_t *plain, st_kv_t *kv,
                                st_uuid_t *id, int *have_id, int32_t *epoch, st_op_result_t *res) {
    *plain = *t;
    plain->configs = kv;
    plain->nconfigs = 0;
    *have_id = 0;
    *epoch = 0;
    for (int i = 0; i < t->nconfigs; i++) {
        const st_kv_t *e = &t->configs[i];
        if (strncmp(e->name, ST_RESTORE_CONFIG_PREFIX, strlen(ST_RESTORE_CONFIG_PREFIX))) {
            kv[plain->nconfigs++] = *e;
            continue;
        }
        char *end = NULL;
        long long v = e->value ? strtoll(e->value, &end, 10) : -1;
        if (!strcmp(e->name, ST_RESTORE_TOPIC_ID_CONFIG) && e->value &&
            !st_uuid_parse(e->value, id) && !st_uuid_is_zero(id)) {
            *have_id = 1;
        } else if (!strcmp(e->name, ST_RESTORE_LEADER_EPOCH_CONFIG) && e->value && *e->value &&
                   !*end && v >= 0 && v < INT32_MAX) {
            *epoch = (int32_t)v;
        } else {
            res->error = ST_E_INVALID_CONFIG;
            snprintf(res->message, sizeof res->message, "Invalid value %s for configuration %s.",
                     e->value ? e->value : "null", e->name);
            return 1;
        }
    }
    return 0;
}

static void create_topic(st_controller_t *c, const st_new_topic_t *t, int validate_only,
                         const st_uuid_t *restore_id, int32_t first_epoch, st_op_result_t *res);

void st_controller_create_topic(st_controller_t *c, const st_new_topic_t *topic, int validate_only,
                                st_op_result_t *res) {
    memset(res, 0, sizeof *res);
    if (st_ctl__forward_create(c, topic, validate_only, res) == ST_OK) return;
    st_new_topic_t plain;
    st_kv_t *kv = st_malloc(sizeof *kv * (size_t)(topic->nconfigs + 1));
    st_uuid_t restore_id;
    int restoring;
    int32_t first_epoch;
    if (!take_restore_configs(topic, &plain, kv, &restore_id, &restoring, &first_epoch, res))
        create_topic(c, &plain, validate_only, restoring ? &restore_id : NULL, first_epoch, res);
    free(kv);
}

/* t without a restore's configs; restore_id: the id it must have (NULL: a
 * new one), first_epoch: its partitions' first leader epoch. */
static void create_topic(st_controller_t *c, const st_new_topic_t *t, int validate_only,
                         const st_uuid_t *restore_id, int32_t first_epoch, st_op_result_t *res) {
    const st_broker_config_t *b = c->cfg.broker;
    st_meta_image_t *img = c->image;
    const st_meta_topic_t *same_id = restore_id ? st_image_topic_by_id(img, restore_id) : NULL;
    if (same_id) {
        char idtext[23];
        st_uuid_format(restore_id, idtext);
        res->error = ST_E_TOPIC_ALREADY_EXISTS;
        snprintf(res->message, sizeof res->message, "Topic id %s already exists (topic '%s')",
                 idtext, same_id->name);
        return;
    }
    if (!st_topic_name_valid(t->name, t->name_len, res->message, sizeof res->message)) {
        res->error = ST_E_INVALID_TOPIC_EXCEPTION;
        return;
    }
    if (t->name_len == strlen(META_TOPIC) && !memcmp(t->name, META_TOPIC, t->name_len)) {
        res->error = ST_E_INVALID_REQUEST;
        snprintf(res->message, sizeof res->message, "%s is reserved for cluster metadata",
                 META_TOPIC);
        return;
    }
    if (st_image_topic(img, t->name, t->name_len)) {
        res->error = ST_E_TOPIC_ALREADY_EXISTS;
        snprintf(res->message, sizeof res->message, "Topic '%.*s' already exists.",
                 (int)t->name_len, t->name);
        return;
    }
    const st_meta_topic_t *col = colliding_topic(img, t->name, t->name_len);
    if (col) {
        res->error = ST_E_INVALID_TOPIC_EXCEPTION;
        snprintf(res->message, sizeof res->message,
                 "Topic '%.*s' collides with existing topic: %s", (int)t->name_len, t->name,
                 col->name);
        return;
    }
    int nb = 0;
    st_place_broker_t *brokers = live_brokers(img, &nb);
    int32_t *reps = NULL;
    int32_t nparts = t->num_partitions;
    int rf = t->replication_factor;
    if (t->nassignments > 0) {
        if (nparts != -1 || rf != -1) {
            res->error = ST_E_INVALID_REQUEST;
            snprintf(res->message, sizeof res->message,
                     "Both numPartitions or replicationFactor and replicasAssignments were set. "
                     "Both cannot be used at the same time.");
            return;
        }
        nparts = t->nassignments;
        rf = t->assignment_sizes[0];
        for (int i = 0; i < t->nassignments; i++) {
            if (t->assignment_sizes[i] != rf || rf == 0) {
                res->error = ST_E_INVALID_REPLICA_ASSIGNMENT;
                snprintf(res->message, sizeof res->message,
                         "All partitions must have the same, nonzero number of replicas.");
                goto out;
            }
            for (int k = 0; k < rf; k++) {
                int found = 0;
                for (int j = 0; j < nb; j++) found |= brokers[j].id == t->assignments[i][k];
                if (!found) {
                    res->error = ST_E_INVALID_REPLICA_ASSIGNMENT;
                    snprintf(res->message, sizeof res->message,
                             "Replica assignment names broker %d, which is not registered.",
                             (int)t->assignments[i][k]);
                    goto out;
                }
                for (int j = 0; j < k; j++)
                    if (t->assignments[i][j] == t->assignments[i][k]) {
                        res->error = ST_E_INVALID_REPLICA_ASSIGNMENT;
                        snprintf(res->message, sizeof res->message,
                                 "Replica assignment of partition %d names broker %d more than "
                                 "once.",
                                 i, (int)t->assignments[i][k]);
                        goto out;
                    }
            }
        }
    } else {
        if (nparts == -1) nparts = b->num_partitions;
        if (rf == -1) rf = b->default_replication_factor;
    }
    if (nparts <= 0) {
        res->error = ST_E_INVALID_PARTITIONS;
        snprintf(res->message, sizeof res->message, "Number of partitions was set to an invalid "
                 "non-positive value.");
        goto out;
    }
    if (rf <= 0) {
        res->error = ST_E_INVALID_REPLICATION_FACTOR;
        snprintf(res->message, sizeof res->message,
                 "Replication factor must be larger than 0, or -1 to use the default value.");
        goto out;
    }
    if (rf > nb) {
        res->error = ST_E_INVALID_REPLICATION_FACTOR;
        snprintf(res->message, sizeof res->message,
                 "Unable to replicate the partition %d time(s): The target replication factor of "
                 "%d cannot be reached because only %d broker(s) are registered.",
                 rf, rf, nb);
        goto out;
    }
    if ((int64_t)nparts * rf > PLACE_MAX_REPLICAS) {
        refuse_unplaceable(c, img, nb, nparts, rf, 0, t->name, t->name_len, res);
        goto out;
    }
    reps = st_malloc(sizeof *reps * (size_t)nparts * (size_t)rf);
    if (t->nassignments > 0) {
        for (int32_t i = 0; i < nparts; i++)
            memcpy(reps + (size_t)i * (size_t)rf, t->assignments[i], sizeof *reps * (size_t)rf);
    } else {
        st_place_replicas(brokers, nb, 0, nparts, rf, total_partitions(img), reps);
    }
    int32_t over_id;
    int64_t over_n;
    if (exceeds_broker_limit(c, img, brokers, nb, reps, nparts, rf, &over_id, &over_n)) {
        res->error = ST_E_POLICY_VIOLATION;
        /* the cause before the name: a 249-character name does not fit
         * beside it, and a cut is marked */
        st_snprintf_marked(res->message, sizeof res->message,
                           "More than max.broker.partitions (%d): %lld partition replicas on "
                           "broker %d with the %d partitions of topic '%.*s'.",
                           (int)b->max_broker_partitions, (long long)over_n, (int)over_id,
                           (int)nparts, (int)t->name_len, t->name);
        goto out;
    }
    st_topic_config_t tc;
    char why[sizeof res->message];
    if (st_topic_config_build(b, t->configs, t->nconfigs, &tc, why, sizeof why)) {
        res->error = ST_E_INVALID_CONFIG;
        snprintf(res->message, sizeof res->message, "%s", why);
        goto out;
    }
    res->error = st_topic_config_check_change(NULL, &tc, res->message, sizeof res->message);
    if (!res->error && tc.read_replica && !restore_id) {
        /* a new id names nothing in the bucket: it would serve nothing */
        res->error = ST_E_INVALID_CONFIG;
        snprintf(res->message, sizeof res->message, "A read replica serves a topic that is in "
                 "the bucket, with its id: create it with strata topics restore --read-replica.");
    }
    st_topic_config_fini(&tc);
    if (res->error) goto out;
    res->num_partitions = nparts;
    res->replication_factor = (int16_t)rf;
    if (validate_only) goto out;

    if (restore_id) res->topic_id = *restore_id;
    else st_uuid_random(&res->topic_id);
    pending_t p;
    pending_init(&p);
    st_mrec_topic_t tr = {{t->name, (int32_t)t->name_len}, res->topic_id};
    pending_add(&p, ST_MREC_TOPIC, 0, &tr);
    for (int32_t i = 0; i < nparts; i++)
        add_partition_record(&p, &res->topic_id, i, reps + (size_t)i * (size_t)rf, rf,
                             first_epoch);
    for (int i = 0; i < t->nconfigs; i++) {
        if (!t->configs[i].value) continue;
        st_mrec_config_t cr = {ST_RESOURCE_TOPIC, {t->name, (int32_t)t->name_len},
                               st_str(t->configs[i].name), st_str(t->configs[i].value)};
        pending_add(&p, ST_MREC_CONFIG, 0, &cr);
    }
    st_err_t e = commit(c, &p);
    pending_fini(&p);
    if (e) {
        commit_failed(res, e);
        goto out;
    }
    if (restore_id) {
        char idtext[23];
        st_uuid_format(restore_id, idtext);
        ST_INFO("controller", "created topic %.*s with %d partitions (replication factor %d), "
                "restored from the bucket: topic id %s, first leader epoch %d", (int)t->name_len,
                t->name, (int)nparts, rf, idtext, (int)first_epoch);
    } else {
        ST_INFO("controller", "created topic %.*s with %d partitions (replication factor %d)",
                (int)t->name_len, t->name, (int)nparts, rf);
    }
out:
    free(reps);
    free(brokers);
}

void st_controller_delete_topic(st_controller_t *c, const char *name, size_t len,
                                const st_uuid_t *id, st_op_result_t *res) {
    memset(res, 0, sizeof *res);
    const st_meta_topic_t *t = name ? st_image_topic(c->image, name, len)
                                    : st_image_topic_by_id(c->image, id);
    if (!t) {
        res->error = name ? ST_E_UNKNOWN_TOPIC_OR_PARTITION : ST_E_UNKNOWN_TOPIC_ID;
        snprintf(res->message, sizeof res->message, "This server does not host this topic.");
        return;
    }
    if (!c->cfg.broker->delete_topic_enable) {
        res->error = ST_E_TOPIC_DELETION_DISABLED;
        snprintf(res->message, sizeof res->message, "Topic deletion is disabled.");
        return;
    }
    res->topic_id = t->id;
    char *tname = st_strdup(t->name);
    pending_t p;
    pending_init(&p);
    st_mrec_remove_topic_t r = {t->id};
    pending_add(&p, ST_MREC_REMOVE_TOPIC, 0, &r);
    st_err_t e = commit(c, &p);
    pending_fini(&p);
    if (e) {
        commit_failed(res, e);
    } else {
        ST_INFO("controller", "deleted topic %s", tname);
    }
    free(tname);
}

void st_controller_create_partitions(st_controller_t *c, const char *name, size_t len,
                                     int32_t count, int validate_only, st_op_result_t *res) {
    memset(res, 0, sizeof *res);
    const st_meta_topic_t *t = st_image_topic(c->image, name, len);
    if (!t) {
        res->error = ST_E_UNKNOWN_TOPIC_OR_PARTITION;
        snprintf(res->message, sizeof res->message, "The topic '%.*s' does not exist.", (int)len,
                 name);
        return;
    }
    if (count <= t->nparts) {
        res->error = ST_E_INVALID_PARTITIONS;
        snprintf(res->message, sizeof res->message,
                 "Topic currently has %d partitions, which is higher than or equal to the "
                 "requested %d.",
                 t->nparts, (int)count);
        return;
    }
    int nb = 0;
    st_place_broker_t *brokers = live_brokers(c->image, &nb);
    int32_t *reps = NULL;
    int rf = t->nparts ? t->parts[0].nreplicas : 1;
    if (rf > nb) {
        res->error = ST_E_INVALID_REPLICATION_FACTOR;
        snprintf(res->message, sizeof res->message, "Not enough brokers for replication factor %d.",
                 rf);
        goto out;
    }
    int32_t added = count - t->nparts;
    if ((int64_t)added * rf > PLACE_MAX_REPLICAS) {
        refuse_unplaceable(c, c->image, nb, added, rf, 1, name, len, res);
        goto out;
    }
    reps = st_malloc(sizeof *reps * (size_t)added * (size_t)rf);
    st_place_replicas(brokers, nb, t->nparts, added, rf, total_partitions(c->image) - t->nparts,
                      reps);
    int32_t over_id;
    int64_t over_n;
    if (exceeds_broker_limit(c, c->image, brokers, nb, reps, added, rf, &over_id, &over_n)) {
        res->error = ST_E_POLICY_VIOLATION;
        st_snprintf_marked(res->message, sizeof res->message,
                           "More than max.broker.partitions (%d): %lld partition replicas on "
                           "broker %d with %d more partitions of topic '%.*s'.",
                           (int)c->cfg.broker->max_broker_partitions, (long long)over_n,
                           (int)over_id, (int)(count - t->nparts), (int)len, name);
        goto out;
    }
    if (validate_only) goto out;
    st_uuid_t tid = t->id;
    pending_t p;
    pending_init(&p);
    for (int32_t i = 0; i < added; i++)
        add_partition_record(&p, &tid, t->nparts + i, reps + (size_t)i * (size_t)rf, rf, 0);
    st_err_t e = commit(c, &p);
    pending_fini(&p);
    if (e) commit_failed(res, e);
out:
    free(reps);
    free(brokers);
}

/* list helpers for APPEND / SUBTRACT on comma-separated values */
static char *list_edit(const char *cur, const char *item, size_t ilen, int add) {
    int n = 0;
    char **v = st_split_csv(cur ? cur : "", &n);
    st_buf_t out;
    st_buf_init(&out);
    int present = 0;
    for (int i = 0; i < n; i++) {
        int same = strlen(v[i]) == ilen && !memcmp(v[i], item, ilen);
        present |= same;
        if (same && !add) continue;
        st_buf_printf(&out, "%s%s", out.len ? "," : "", v[i]);
    }
    if (add && !present) st_buf_printf(&out, "%s%.*s", out.len ? "," : "", (int)ilen, item);
    st_buf_put(&out, "", 1);
    st_free_strv(v, n);
    char *s = st_strdup((char *)out.data);
    st_buf_fini(&out);
    return s;
}

void st_controller_alter_configs(st_controller_t *c, int resource_type, const char *name,
                                 size_t len, const st_config_change_t *changes, int n,
                                 int replace_all, int validate_only, st_op_result_t *res) {
    memset(res, 0, sizeof *res);
    if (resource_type == ST_RESOURCE_BROKER || resource_type == ST_RESOURCE_BROKER_LOGGER) {
        res->error = ST_E_INVALID_REQUEST;
        snprintf(res->message, sizeof res->message,
                 "Broker settings are static in Strata: change them in the properties file or "
                 "with --override and restart.");
        return;
    }
    if (resource_type != ST_RESOURCE_TOPIC) {
        res->error = ST_E_INVALID_REQUEST;
        snprintf(res->message, sizeof res->message, "Unsupported resource type %d.", resource_type);
        return;
    }
    const st_meta_topic_t *t = st_image_topic(c->image, name, len);
    if (!t) {
        res->error = ST_E_UNKNOWN_TOPIC_OR_PARTITION;
        snprintf(res->message, sizeof res->message, "Topic '%.*s' does not exist.", (int)len, name);
        return;
    }
    /* The new override set: start from the current one (or nothing when
     * every key is replaced), then apply each change. */
    int cap = t->nconfigs + n + 1, cnt = 0;
    st_kv_t *kv = st_calloc((size_t)cap, sizeof *kv);
    if (!replace_all)
        for (int i = 0; i < t->nconfigs; i++) {
            kv[cnt].name = st_strdup(t->configs[i].name);
            kv[cnt].value = st_strdup(t->configs[i].value);
            cnt++;
        }
    for (int i = 0; i < n && !res->error; i++) {
        const st_config_change_t *ch = &changes[i];
        char *key = st_strndup(ch->name, ch->name_len);
        if (!st_cfg_lookup(&st_topic_config_table, key)) {
            res->error = ST_E_INVALID_CONFIG;
            snprintf(res->message, sizeof res->message, "Unknown topic config name: %s", key);
            free(key);
            break;
        }
        int k;
        for (k = 0; k < cnt; k++)
            if (!strcmp(kv[k].name, key)) break;
        if (k == cnt) {
            kv[cnt].name = key;
            kv[cnt].value = NULL;
            cnt++;
        } else {
            free(key);
        }
        char *nv = NULL;
        switch (ch->op) {
        case ST_CFGOP_SET:
            if (!ch->value) {
                res->error = ST_E_INVALID_REQUEST;
                snprintf(res->message, sizeof res->message, "Null value not supported for: %s",
                         kv[k].name);
                break;
            }
            nv = st_strndup(ch->value, ch->value_len);
            break;
        case ST_CFGOP_DELETE: nv = NULL; break;
        case ST_CFGOP_APPEND:
        case ST_CFGOP_SUBTRACT: {
            const char *cur = kv[k].value;
            char dflt[256];
            if (!cur) {
                st_topic_config_t tc;
                char why[128];
                if (!st_topic_config_build(c->cfg.broker, NULL, 0, &tc, why, sizeof why)) {
                    st_cfg_format(st_cfg_lookup(&st_topic_config_table, kv[k].name), &tc, dflt,
                                  sizeof dflt);
                    st_topic_config_fini(&tc);
                    cur = dflt;
                }
            }
            nv = list_edit(cur, ch->value ? ch->value : "", ch->value ? ch->value_len : 0,
                           ch->op == ST_CFGOP_APPEND);
            break;
        }
        default:
            res->error = ST_E_INVALID_REQUEST;
            snprintf(res->message, sizeof res->message, "Unknown config operation %d", ch->op);
            break;
        }
        free(kv[k].value);
        kv[k].value = nv;
    }
    int switched_off = 0; /* tiering off, remote log deleted (KIP-950) */
    if (!res->error) {
        st_topic_config_t tc, was;
        char why[sizeof res->message];
        if (st_topic_config_build(c->cfg.broker, kv, cnt, &tc, why, sizeof why)) {
            res->error = ST_E_INVALID_CONFIG;
            snprintf(res->message, sizeof res->message, "%s", why);
        } else {
            /* the stored set was valid when written: should the broker's
             * defaults have changed since, its own defaults stand in */
            if (st_topic_config_build(c->cfg.broker, t->configs, t->nconfigs, &was, why, sizeof why))
                st_topic_config_build(c->cfg.broker, NULL, 0, &was, why, sizeof why);
            res->error = st_topic_config_check_change(&was, &tc, res->message, sizeof res->message);
            for (int k = 0; !res->error && t->internal && k < cnt; k++)
                if (!strcmp(kv[k].name, "remote.storage.enable") && kv[k].value &&
                    !strcasecmp(kv[k].value, "true")) {
                    res->error = ST_E_INVALID_CONFIG;
                    snprintf(res->message, sizeof res->message,
                             "Internal topic is not allowed to enable remote storage: %s",
                             t->name);
                }
            switched_off = !res->error && was.remote_storage_enable && !tc.remote_storage_enable;
            st_topic_config_fini(&was);
            st_topic_config_fini(&tc);
        }
    }
    if (!res->error && !validate_only) {
        pending_t p;
        pending_init(&p);
        /* removed keys: present before, absent now */
        for (int i = 0; i < t->nconfigs; i++) {
            int k;
            for (k = 0; k < cnt; k++)
                if (!strcmp(kv[k].name, t->configs[i].name) && kv[k].value) break;
            if (k == cnt) {
                st_mrec_config_t cr = {ST_RESOURCE_TOPIC, {name, (int32_t)len},
                                       st_str(t->configs[i].name), ST_STR_NULL};
                pending_add(&p, ST_MREC_CONFIG, 0, &cr);
            }
        }
        for (int k = 0; k < cnt; k++) {
            if (!kv[k].value) continue;
            const char *old = st_meta_topic_config(t, kv[k].name);
            if (old && !strcmp(old, kv[k].value)) continue;
            st_mrec_config_t cr = {ST_RESOURCE_TOPIC, {name, (int32_t)len}, st_str(kv[k].name),
                                   st_str(kv[k].value)};
            pending_add(&p, ST_MREC_CONFIG, 0, &cr);
        }
        st_err_t ce = commit(c, &p);
        if (ce) {
            commit_failed(res, ce);
        } else {
            st_ctl__elr_reconcile(c, name, len); /* min.insync.replicas may have changed */
        }
        pending_fini(&p);
        if (!ce && switched_off) {
            /* said to the client (the answer's message; its error stays
             * NONE) and in the log: what it asked for deletes data */
            st_snprintf_marked(res->message, sizeof res->message,
                               "Tiered storage is off for topic '%.*s' "
                               "(remote.log.delete.on.disable=true): the remote log of each of its "
                               "partitions is being deleted from the object store, and its log "
                               "start offset moves to the local log start offset.",
                               (int)len, name);
            ST_INFO("controller", "topic %.*s: tiered storage switched off with "
                    "remote.log.delete.on.disable: each leader deletes its partition's remote log "
                    "and the log start offsets move to the local ones", (int)len, name);
        }
    }
    for (int i = 0; i < cnt; i++) {
        free(kv[i].name);
        free(kv[i].value);
    }
    free(kv);
}

/*
 * status.c - /v1/ready and /v1/status.
 *
 * Ready (a Kubernetes readiness probe) when this broker is registered and
 * unfenced in the metadata image it holds (so it has caught up with the
 * metadata log far enough to see its own registration), an active
 * controller is known, and every log dir is there, writable, with no
 * partition log in it taken offline.  Otherwise 503 with each reason.
 *
 * The status is the operator's view as JSON: the brokers, and per topic
 * its partitions with leader, replicas, ISR, and where this broker hosts
 * the partition, its local log (start, high watermark, end, bytes) and
 * what the bucket holds of it.  It names the object store by its
 * description (st_os_describe: no credentials), never by its settings.
 *
 * With tiered storage, the cost estimate: per topic (and in all) the
 * object store requests by S3's billing class, the bytes each way, the
 * read requests per GiB received (what a replay from the bucket costs in
 * requests) and, at the objectstore.cost.* prices, the dollars of the
 * requests so far and of a month of the bucket's bytes (the leader's view,
 * as remote_bytes).
 *
 * And the consumer groups this broker coordinates, each partition with
 * its committed offset and, where this broker hosts the partition, its
 * lag: in records (high watermark - committed), in time (now - the
 * timestamp of the batch holding the committed offset, the next record
 * the group reads; unknown while that lies in the bucket) and, from the
 * group's commits seen in the last minute, its rate and the time it
 * needs to catch up at that rate (a replay from the bucket).  The
 * commits are remembered between answers (st_admin_lag_t, under its
 * mutex), so the rate needs two commits seen by the status.
 */
#include "admin.h"
#include "batch.h"

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- consumer group lag ----------------------------------------------------- */

#define LAG_SAMPLES 8
#define LAG_WINDOW_MS 60000

/* One partition of one group: the commits seen (offset, commit time),
 * oldest first, at most LAG_SAMPLES within LAG_WINDOW_MS of the last. */
typedef struct lag_entry {
    char *group, *topic;
    int32_t partition;
    int n;
    int64_t off[LAG_SAMPLES], ts[LAG_SAMPLES];
} lag_entry_t;

/* Sorted by (group, topic, partition), as the coordinator's views come. */
struct st_admin_lag {
    pthread_mutex_t lock;
    lag_entry_t *v;
    int n;
};

st_admin_lag_t *st_admin__lag_new(void) {
    st_admin_lag_t *l = st_calloc(1, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
    return l;
}

static void lag_entries_free(lag_entry_t *v, int n) {
    for (int i = 0; i < n; i++) {
        free(v[i].group);
        free(v[i].topic);
    }
    free(v);
}

void st_admin__lag_free(st_admin_lag_t *l) {
    if (!l) return;
    lag_entries_free(l->v, l->n);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

static int lag_cmp(const lag_entry_t *e, const char *group, const char *topic, int32_t partition) {
    int c = strcmp(e->group, group);
    if (!c) c = strcmp(e->topic, topic);
    if (!c) c = (e->partition > partition) - (e->partition < partition);
    return c;
}

/* Add a commit to e's samples (a commit already seen is not added again). */
static void lag_sample(lag_entry_t *e, int64_t offset, int64_t ts) {
    if (e->n && ts <= e->ts[e->n - 1]) {
        if (ts == e->ts[e->n - 1]) e->off[e->n - 1] = offset;
        return;
    }
    if (e->n == LAG_SAMPLES) {
        memmove(e->off, e->off + 1, sizeof e->off[0] * (LAG_SAMPLES - 1));
        memmove(e->ts, e->ts + 1, sizeof e->ts[0] * (LAG_SAMPLES - 1));
        e->n--;
    }
    e->off[e->n] = offset;
    e->ts[e->n++] = ts;
    int drop = 0;
    while (drop < e->n - 1 && e->ts[e->n - 1] - e->ts[drop] > LAG_WINDOW_MS) drop++;
    if (drop) {
        memmove(e->off, e->off + drop, sizeof e->off[0] * (size_t)(e->n - drop));
        memmove(e->ts, e->ts + drop, sizeof e->ts[0] * (size_t)(e->n - drop));
        e->n -= drop;
    }
}

/* Records per second over e's commits; 0 when there are fewer than two
 * or the last is older than the window (the group stopped committing). */
static double lag_rate(const lag_entry_t *e, int64_t now) {
    if (e->n < 2 || now - e->ts[e->n - 1] > LAG_WINDOW_MS) return 0;
    int64_t dt = e->ts[e->n - 1] - e->ts[0], doff = e->off[e->n - 1] - e->off[0];
    return dt > 0 && doff > 0 ? (double)doff * 1000.0 / (double)dt : 0;
}

/* The timestamp of the batch holding offset in p's local log (its first
 * record's: CreateTime or LogAppendTime as the topic says), -1 when the
 * offset is not there. */
static int64_t batch_time(st_partition_t *p, int64_t offset) {
    st_log_read_t r;
    if (st_log_read(p->log, offset, 1, 1, &r) != ST_OK) return -1;
    int64_t ts = -1;
    uint8_t h[ST_BATCH_HEADER_SIZE];
    size_t got = 0;
    st_batch_info_t b;
    if (r.file && r.len >= ST_BATCH_HEADER_SIZE &&
        st_pread_all(r.file->fd, h, sizeof h, r.pos, &got) == ST_OK && got == sizeof h &&
        st_batch_header(h, sizeof h, &b) == ST_OK && st_batch_last_offset(&b) >= offset)
        ts = (b.attributes & 0x08) ? b.max_timestamp : b.base_timestamp;
    if (r.file) st_file_release(r.file);
    return ts;
}

static json_t *int_or_null(int known, int64_t v) { return known ? json_integer(v) : json_null(); }

/* A client's string (a group id) as JSON: bytes that are not UTF-8 (which
 * jansson refuses) shown as '?'. */
static json_t *client_text(const char *s) {
    json_t *j = json_string(s);
    if (j) return j;
    char *c = st_strdup(s);
    for (char *q = c; *q; q++)
        if ((unsigned char)*q >= 0x80) *q = '?';
    j = json_string(c);
    free(c);
    return j;
}

static json_t *groups_status(const st_admin_sources_t *src, st_admin_lag_t *lag) {
    json_t *out = json_array();
    if (!src->groups) return out;
    st_group_view_t *v = NULL;
    int nv = st_group_coord_views(src->groups, &v);
    int64_t now = st_now_ms();
    int total = 0;
    for (int i = 0; i < nv; i++) total += v[i].noffsets;
    pthread_mutex_lock(&lag->lock);
    lag_entry_t *nl = st_calloc((size_t)total + 1, sizeof *nl);
    int nn = 0, k = 0;
    for (int i = 0; i < nv; i++) {
        const st_group_view_t *g = &v[i];
        json_t *jg = json_object();
        json_object_set_new(jg, "group_id", client_text(g->group_id));
        json_object_set_new(jg, "state", json_string(g->state));
        json_object_set_new(jg, "protocol_type", client_text(g->protocol_type));
        json_object_set_new(jg, "generation", json_integer(g->generation));
        json_object_set_new(jg, "members", json_integer(g->nmembers));
        int64_t g_lag = 0, g_lag_ms = 0, g_eta = 0;
        int lag_known = 1, ms_known = 1, eta_known = 1;
        json_t *jps = json_array();
        for (int j = 0; j < g->noffsets; j++) {
            const st_group_view_offset_t *o = &g->offsets[j];
            /* carry this partition's commits over from the last answer */
            while (k < lag->n && lag_cmp(&lag->v[k], g->group_id, o->topic, o->partition) < 0) k++;
            lag_entry_t *e = &nl[nn++];
            if (k < lag->n && lag_cmp(&lag->v[k], g->group_id, o->topic, o->partition) == 0) {
                *e = lag->v[k];
                lag->v[k].group = lag->v[k].topic = NULL; /* moved */
                k++;
            } else {
                e->group = st_strdup(g->group_id);
                e->topic = st_strdup(o->topic);
                e->partition = o->partition;
            }
            lag_sample(e, o->offset, o->commit_ts);

            json_t *jp = json_object();
            json_object_set_new(jp, "topic", client_text(o->topic));
            json_object_set_new(jp, "partition", json_integer(o->partition));
            json_object_set_new(jp, "committed_offset", json_integer(o->offset));
            json_object_set_new(jp, "commit_timestamp_ms", json_integer(o->commit_ts));
            int known = 0, have = 0, have_ms = 0;
            int64_t hw = 0, rec_lag = 0, ms = 0;
            st_partition_t *p =
                st_replicas_lookup(src->rm, o->topic, strlen(o->topic), o->partition, &known);
            if (p) {
                st_log_offsets_t lo;
                st_log_offsets(p->log, &lo);
                hw = lo.high_watermark;
                have = 1;
                rec_lag = o->offset < hw ? hw - ST_MAX(o->offset, 0) : 0;
                if (rec_lag == 0) {
                    have_ms = 1;
                } else if (o->offset >= lo.log_start_offset) {
                    int64_t ts = batch_time(p, o->offset);
                    if (ts >= 0) have_ms = 1, ms = ST_MAX(now - ts, 0);
                }
                st_partition_release(p);
            }
            double rate = lag_rate(e, now);
            int have_eta = have && rec_lag > 0 && rate > 0;
            int64_t eta = have_eta ? (int64_t)((double)rec_lag * 1000.0 / rate) : 0;
            json_object_set_new(jp, "high_watermark", int_or_null(have, hw));
            json_object_set_new(jp, "lag", int_or_null(have, rec_lag));
            json_object_set_new(jp, "lag_ms", int_or_null(have_ms, ms));
            json_object_set_new(jp, "rate_per_sec", rate > 0 ? json_real(rate) : json_null());
            json_object_set_new(jp, "eta_ms", have && rec_lag == 0 ? json_integer(0)
                                              : int_or_null(have_eta, eta));
            json_array_append_new(jps, jp);
            g_lag += rec_lag;
            lag_known &= have;
            g_lag_ms = ST_MAX(g_lag_ms, ms);
            ms_known &= have_ms;
            g_eta = ST_MAX(g_eta, eta);
            eta_known &= have && (rec_lag == 0 || have_eta);
        }
        /* the group's: summed records, the worst partition's time and ETA */
        json_object_set_new(jg, "lag", int_or_null(lag_known, g_lag));
        json_object_set_new(jg, "lag_ms", int_or_null(ms_known, g_lag_ms));
        json_object_set_new(jg, "eta_ms", int_or_null(eta_known, g_eta));
        json_object_set_new(jg, "partitions", jps);
        json_array_append_new(out, jg);
    }
    lag_entries_free(lag->v, lag->n); /* what was not carried over: gone groups */
    lag->v = nl;
    lag->n = nn;
    pthread_mutex_unlock(&lag->lock);
    st_group_views_free(v, nv);
    return out;
}

int st_admin__ready(const st_admin_sources_t *src, char **body) {
    json_t *reasons = json_array();
    int32_t me = src->cfg->node_id;
    if (st_controller_is_broker(src->ctl) && !st_controller_broker_ready(src->ctl))
        json_array_append_new(reasons, json_sprintf("broker %d is not registered (or is fenced) "
                                                    "in the metadata this node has applied",
                                                    (int)me));
    if (st_controller_id(src->ctl) < 0)
        json_array_append_new(reasons, json_string("no active controller is known"));
    int ndirs = 0;
    char **dirs = st_split_csv(src->cfg->log_dirs, &ndirs);
    for (int i = 0; i < ndirs; i++)
        if (access(dirs[i], W_OK) != 0)
            json_array_append_new(reasons, json_sprintf("log dir %s is not writable", dirs[i]));
    st_free_strv(dirs, ndirs);
    int n = 0;
    st_partition_t **parts = st_replicas_all(src->rm, &n);
    int offline = 0;
    for (int i = 0; i < n; i++) {
        st_log_offsets_t o;
        st_log_offsets(parts[i]->log, &o);
        offline += o.offline;
        st_partition_release(parts[i]);
    }
    free(parts);
    if (offline)
        json_array_append_new(reasons, json_sprintf("%d partition logs are offline (a failed "
                                                    "write or fsync)", offline));
    int ready = json_array_size(reasons) == 0;
    json_t *o = json_object();
    json_object_set_new(o, "ready", json_boolean(ready));
    if (!ready) json_object_set_new(o, "reasons", reasons);
    else json_decref(reasons);
    *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return ready;
}

/* ---- the cost estimate ---------------------------------------------------------- */

/* Requests by class, bytes, requests per GiB read, dollars. */
static json_t *cost_json(const st_os_prices_t *pr, const st_os_usage_t *u, int64_t remote_bytes) {
    json_t *o = json_object(), *r = json_object();
    for (int c = 0; c < ST_OS_NCLASSES; c++)
        json_object_set_new(r, st_os_class_name((st_os_class_t)c),
                            json_integer((json_int_t)u->requests[c]));
    json_object_set_new(o, "requests", r);
    json_object_set_new(o, "sent_bytes", json_integer((json_int_t)u->bytes_out));
    json_object_set_new(o, "received_bytes", json_integer((json_int_t)u->bytes_in));
    double per_gib = st_admin__read_requests_per_gib(u);
    json_object_set_new(o, "read_requests_per_gib",
                        per_gib >= 0 ? json_real(per_gib) : json_null());
    json_object_set_new(o, "request_dollars", json_real(st_os_request_cost(pr, u)));
    json_object_set_new(o, "storage_dollars_per_month",
                        json_real(st_os_storage_cost(pr, remote_bytes)));
    return o;
}

/* The usage of topic in u (sorted by topic), or NULL. */
static const st_os_usage_t *usage_of(const st_tier_topic_usage_t *u, int n, const char *topic) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2, c = strcmp(u[mid].topic, topic);
        if (c == 0) return &u[mid].usage;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static json_t *int_array(const int32_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

char *st_admin__status(const st_admin_sources_t *src, st_admin_lag_t *lag) {
    json_t *root = json_object();
    json_object_set_new(root, "node_id", json_integer(src->cfg->node_id));
    json_object_set_new(root, "cluster_id", json_string(st_controller_cluster_id(src->ctl)));
    json_object_set_new(root, "controller_id", json_integer(st_controller_id(src->ctl)));
    json_object_set_new(root, "registered", json_boolean(st_controller_broker_ready(src->ctl)));
    json_object_set_new(root, "object_store",
                        src->os ? json_string(st_os_describe(src->os)) : json_null());

    /* the cost estimate: with tiered storage only */
    int costed = src->tier && src->os, nu = 0;
    st_tier_topic_usage_t *usage = NULL;
    st_os_prices_t prices;
    if (costed) {
        st_os_get_prices(src->os, &prices);
        nu = st_tier_usage(src->tier, &usage);
    }

    st_meta_image_t *img = st_controller_image(src->ctl);
    json_object_set_new(root, "metadata_offset", json_integer(img->offset));
    json_t *brokers = json_array();
    for (int i = 0; i < img->nbrokers; i++) {
        const st_meta_broker_t *b = &img->brokers[i];
        json_t *jb = json_object();
        json_object_set_new(jb, "id", json_integer(b->id));
        json_object_set_new(jb, "host", json_string(b->host ? b->host : ""));
        json_object_set_new(jb, "port", json_integer(b->port));
        json_object_set_new(jb, "rack", b->rack ? json_string(b->rack) : json_null());
        json_object_set_new(jb, "fenced", json_boolean(b->fenced));
        json_array_append_new(brokers, jb);
    }
    json_object_set_new(root, "brokers", brokers);

    int64_t all_local = 0, all_remote = 0;
    json_t *topics = json_array();
    for (int t = 0; t < img->ntopics; t++) {
        const st_meta_topic_t *mt = img->topics[t];
        json_t *jt = json_object();
        char id[32];
        st_uuid_format(&mt->id, id);
        json_object_set_new(jt, "name", json_string(mt->name));
        json_object_set_new(jt, "id", json_string(id));
        json_object_set_new(jt, "internal", json_boolean(mt->internal));
        int64_t t_local = 0, t_remote = 0;
        json_t *jps = json_array();
        for (int i = 0; i < mt->nparts; i++) {
            const st_meta_partition_t *mp = &mt->parts[i];
            json_t *jp = json_object();
            json_object_set_new(jp, "partition", json_integer(mp->id));
            json_object_set_new(jp, "leader", json_integer(mp->leader));
            json_object_set_new(jp, "leader_epoch", json_integer(mp->leader_epoch));
            json_object_set_new(jp, "replicas", int_array(mp->replicas, mp->nreplicas));
            json_object_set_new(jp, "isr", int_array(mp->isr, mp->nisr));
            int known = 0;
            st_partition_t *p =
                st_replicas_lookup(src->rm, mt->name, strlen(mt->name), mp->id, &known);
            if (p) {
                st_log_offsets_t o;
                st_log_offsets(p->log, &o);
                json_t *jl = json_object();
                json_object_set_new(jl, "log_start_offset", json_integer(o.log_start_offset));
                json_object_set_new(jl, "high_watermark", json_integer(o.high_watermark));
                json_object_set_new(jl, "log_end_offset", json_integer(o.leo));
                json_object_set_new(jl, "size_bytes", json_integer(o.size_bytes));
                json_object_set_new(jl, "segments", json_integer(o.nsegments));
                json_object_set_new(jl, "offline", json_boolean(o.offline));
                json_object_set_new(jp, "local", jl);
                json_object_set_new(jp, "high_watermark", json_integer(o.high_watermark));
                t_local += o.size_bytes;
                st_tier_part_t *tp = st_partition_tier(p);
                if (tp) {
                    st_tier_status_t ts;
                    st_tier_part_status(tp, &ts);
                    json_t *jr = json_object();
                    json_object_set_new(jr, "start_offset", json_integer(ts.remote_start));
                    json_object_set_new(jr, "end_offset", json_integer(ts.remote_end));
                    json_object_set_new(jr, "size_bytes", json_integer(ts.remote_bytes));
                    json_object_set_new(jr, "segments", json_integer(ts.remote_segments));
                    json_object_set_new(jr, "last_upload_ms", json_integer(ts.last_upload_ms));
                    json_object_set_new(jr, "failing_base_offset",
                                        json_integer(ts.failing_base_offset));
                    json_object_set_new(jp, "remote", jr);
                    /* the leader's view (a follower's manifest may lag) */
                    if (mp->leader == src->cfg->node_id) t_remote += ts.remote_bytes;
                    st_tier_part_release(tp);
                }
                st_partition_release(p);
            }
            json_array_append_new(jps, jp);
        }
        json_object_set_new(jt, "local_bytes", json_integer(t_local));
        json_object_set_new(jt, "remote_bytes", json_integer(t_remote));
        if (costed) {
            static const st_os_usage_t none;
            const st_os_usage_t *tu = usage_of(usage, nu, mt->name);
            json_object_set_new(jt, "cost", cost_json(&prices, tu ? tu : &none, t_remote));
        }
        json_object_set_new(jt, "partitions", jps);
        json_array_append_new(topics, jt);
        all_local += t_local;
        all_remote += t_remote;
    }
    st_image_release(img);
    json_object_set_new(root, "topics", topics);
    json_object_set_new(root, "local_bytes", json_integer(all_local));
    json_object_set_new(root, "remote_bytes", json_integer(all_remote));
    if (costed) {
        /* in all: every request the object store counted (the start-up
         * check and deleted topics' included) */
        st_os_stats_t os;
        st_os_get_stats(src->os, &os);
        st_os_usage_t all;
        memset(&all, 0, sizeof all);
        memcpy(all.requests, os.class_requests, sizeof all.requests);
        all.bytes_out = os.bytes_out;
        all.bytes_in = os.bytes_in;
        json_t *jc = cost_json(&prices, &all, all_remote);
        json_t *jp = json_object();
        json_object_set_new(jp, "write_requests_per_1000",
                            json_real(prices.per_1000[ST_OS_CLASS_WRITE]));
        json_object_set_new(jp, "read_requests_per_1000",
                            json_real(prices.per_1000[ST_OS_CLASS_READ]));
        json_object_set_new(jp, "storage_gib_month", json_real(prices.storage_gib_month));
        json_object_set_new(jc, "prices", jp);
        json_object_set_new(root, "cost", jc);
        st_tier_usage_free(usage, nu);
    }
    json_object_set_new(root, "groups", groups_status(src, lag));
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

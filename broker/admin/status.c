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
 */
#include "admin.h"

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

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

static json_t *int_array(const int32_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

char *st_admin__status(const st_admin_sources_t *src) {
    json_t *root = json_object();
    json_object_set_new(root, "node_id", json_integer(src->cfg->node_id));
    json_object_set_new(root, "cluster_id", json_string(st_controller_cluster_id(src->ctl)));
    json_object_set_new(root, "controller_id", json_integer(st_controller_id(src->ctl)));
    json_object_set_new(root, "registered", json_boolean(st_controller_broker_ready(src->ctl)));
    json_object_set_new(root, "object_store",
                        src->os ? json_string(st_os_describe(src->os)) : json_null());

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
        json_object_set_new(jt, "partitions", jps);
        json_array_append_new(topics, jt);
        all_local += t_local;
        all_remote += t_remote;
    }
    st_image_release(img);
    json_object_set_new(root, "topics", topics);
    json_object_set_new(root, "local_bytes", json_integer(all_local));
    json_object_set_new(root, "remote_bytes", json_integer(all_remote));
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

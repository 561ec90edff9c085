/*
 * metrics.c - /metrics: the Prometheus text format (version 0.0.4) with the
 * names Kafka's JMX exporter rules give Kafka's MBeans (lower case,
 * kafka_<domain>_<type>_<name>, "PerSec" meters as <name>_total counters,
 * gauges as they are), so dashboards and alerts written for Kafka read
 * Strata unchanged:
 *
 *   kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions
 *       -> kafka_server_replicamanager_underreplicatedpartitions
 *   kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T
 *       -> kafka_server_brokertopicmetrics_bytesin_total{topic="T"}
 *   kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce
 *       -> kafka_network_requestmetrics_requests_total{request="Produce"}
 *   kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce
 *       -> kafka_network_requestmetrics_totaltimems (a histogram, in ms)
 *   kafka.log:type=Log,name=Size,topic=T,partition=P
 *       -> kafka_log_log_size{topic="T",partition="P"}
 *
 * Strata's own (the object store, the chunk cache, the cost estimate)
 * start with strata_.
 *
 * Everything is read at scrape time: counters are relaxed atomics bumped
 * on the hot paths (a partition's counters, the net layer's per-API
 * histograms, the object store's per-operation ones, the tiering
 * manager's stats); gauges are computed from the metadata image and the
 * hosted partitions.  Replica-state gauges count the partitions this
 * broker leads, as Kafka's ReplicaManager does; controller gauges are
 * non-zero on the active controller only, as Kafka's are.
 */
#include "admin.h"

#include <stdlib.h>

/* ---- text format helpers ---------------------------------------------------- */

static void family(st_buf_t *b, const char *name, const char *type, const char *help) {
    st_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value, escaped as the format wants (\\, \", \n). */
static void label_value(st_buf_t *b, const char *v) {
    st_buf_put(b, "\"", 1);
    for (const char *p = v; *p; p++) {
        if (*p == '\\') st_buf_put(b, "\\\\", 2);
        else if (*p == '"') st_buf_put(b, "\\\"", 2);
        else if (*p == '\n') st_buf_put(b, "\\n", 2);
        else st_buf_put(b, p, 1);
    }
    st_buf_put(b, "\"", 1);
}

static void sample_u(st_buf_t *b, const char *name, uint64_t v) {
    st_buf_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void sample_topic_u(st_buf_t *b, const char *name, const char *topic, uint64_t v) {
    st_buf_printf(b, "%s{topic=", name);
    label_value(b, topic);
    st_buf_printf(b, "} %llu\n", (unsigned long long)v);
}

/* Dollars and ratios: enough digits that a reader recomputing them from
 * the request counts of the same page gets the same value. */
static void sample_topic_d(st_buf_t *b, const char *name, const char *topic, double v) {
    st_buf_printf(b, "%s{topic=", name);
    label_value(b, topic);
    st_buf_printf(b, "} %.12g\n", v);
}

/* A histogram of st_histo_t (microseconds) in unit_us units (1000: ms,
 * 1000000: s), with one label. */
/* A histogram's samples, labelled label=value (label NULL: none). */
static void histogram(st_buf_t *b, const char *name, const char *label, const char *value,
                      const st_histo_t *h, double unit_us) {
    uint64_t cum = 0;
    for (int i = 0; i < ST_HISTO_BUCKETS; i++) {
        cum += h->bucket[i];
        st_buf_printf(b, "%s_bucket{", name);
        if (label) {
            st_buf_printf(b, "%s=", label);
            label_value(b, value);
            st_buf_printf(b, ",");
        }
        if (i < ST_HISTO_BUCKETS - 1)
            st_buf_printf(b, "le=\"%g\"} %llu\n", (double)st_histo_bound_us[i] / unit_us,
                          (unsigned long long)cum);
        else
            st_buf_printf(b, "le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    const char *what[2] = {"sum", "count"};
    for (int k = 0; k < 2; k++) {
        st_buf_printf(b, "%s_%s", name, what[k]);
        if (label) {
            st_buf_printf(b, "{%s=", label);
            label_value(b, value);
            st_buf_printf(b, "}");
        }
        if (k == 0) st_buf_printf(b, " %.6f\n", (double)h->sum_us / unit_us);
        else st_buf_printf(b, " %llu\n", (unsigned long long)cum);
    }
}

/* ---- per partition ------------------------------------------------------------ */

typedef struct part_row {
    st_partition_t *p;
    st_log_offsets_t o;
    uint64_t bytes_in, messages_in, bytes_out, remote_bytes_out, replication_bytes_out;
    int leading;
    /* tiered and led here */
    int tiered;
    st_tier_status_t ts;
    int64_t lag_bytes;
    int64_t lag_segments;
} part_row_t;

static int row_cmp(const void *x, const void *y) {
    const part_row_t *a = x, *b = y;
    int c = strcmp(a->p->topic, b->p->topic);
    if (c) return c;
    return (a->p->index > b->p->index) - (a->p->index < b->p->index);
}

/* Kafka's RemoteCopyLagBytes / Segments (KIP-963): closed segments wholly
 * below the high watermark that the bucket does not hold yet. */
static void copy_lag(part_row_t *r) {
    enum { PAGE = 8 };
    st_log_segment_info_t *info = st_malloc(sizeof *info * PAGE);
    int64_t from = __atomic_load_n(&r->p->remote_end, __ATOMIC_ACQUIRE);
    for (int pages = 0; pages < 4096; pages++) {
        int n = st_log_closed_segments(r->p->log, from, info, PAGE);
        for (int i = 0; i < n; i++) {
            r->lag_bytes += info[i].size_bytes;
            r->lag_segments++;
        }
        if (n < PAGE) break;
        from = info[n - 1].last_offset + 1;
    }
    free(info);
}

static uint64_t load(const uint64_t *v) { return __atomic_load_n(v, __ATOMIC_RELAXED); }

/* The end of the run of rows of rows[i]'s topic. */
static int topic_end(const part_row_t *rows, int n, int i) {
    int j = i + 1;
    while (j < n && !strcmp(rows[j].p->topic, rows[i].p->topic)) j++;
    return j;
}

typedef uint64_t (*row_get_fn)(const part_row_t *r);
static uint64_t get_bytes_in(const part_row_t *r) { return r->bytes_in; }
static uint64_t get_messages_in(const part_row_t *r) { return r->messages_in; }
static uint64_t get_bytes_out(const part_row_t *r) { return r->bytes_out; }
static uint64_t get_remote_bytes_out(const part_row_t *r) { return r->remote_bytes_out; }
static uint64_t get_lag_bytes(const part_row_t *r) { return (uint64_t)r->lag_bytes; }
static uint64_t get_lag_segments(const part_row_t *r) { return (uint64_t)r->lag_segments; }
static uint64_t get_remote_bytes(const part_row_t *r) { return (uint64_t)r->ts.remote_bytes; }
static uint64_t get_remote_segments(const part_row_t *r) { return (uint64_t)r->ts.remote_segments; }

/* One sample per topic: the sum over its partitions (with tiered_only,
 * over the tiered ones this broker leads, and only for topics that have
 * one). */
static void topic_family(st_buf_t *b, const part_row_t *rows, int n, const char *name,
                         const char *type, const char *help, row_get_fn get, int tiered_only) {
    family(b, name, type, help);
    for (int i = 0; i < n;) {
        int j = topic_end(rows, n, i);
        uint64_t s = 0;
        int any = 0;
        for (int k = i; k < j; k++) {
            if (tiered_only && !rows[k].tiered) continue;
            any = 1;
            s += get(&rows[k]);
        }
        if (any) sample_topic_u(b, name, rows[i].p->topic, s);
        i = j;
    }
}

/* ---- the page ------------------------------------------------------------------ */

static void replica_manager(st_buf_t *b, const st_admin_sources_t *src, const st_meta_image_t *img,
                            part_row_t *rows, int n) {
    int32_t me = src->cfg->node_id;
    uint64_t hosted = 0, leaders = 0, under = 0, under_min = 0, at_min = 0, offline_dirs = 0;
    uint64_t ctl_offline = 0, ctl_topics = 0, ctl_parts = 0;
    int active = st_controller_id(src->ctl) == me;
    for (int t = 0; t < img->ntopics; t++) {
        const st_meta_topic_t *mt = img->topics[t];
        ctl_topics++;
        for (int i = 0; i < mt->nparts; i++) {
            const st_meta_partition_t *mp = &mt->parts[i];
            ctl_parts++;
            if (mp->leader < 0) ctl_offline++;
            int here = 0;
            for (int r = 0; r < mp->nreplicas; r++) here |= mp->replicas[r] == me;
            hosted += here;
            if (mp->leader != me) continue;
            leaders++;
            if (mp->nisr < mp->nreplicas) under++;
            /* min.insync.replicas is the partition's (topic config) */
            int st_known = 0;
            st_partition_t *p = st_replicas_lookup(src->rm, mt->name, strlen(mt->name), mp->id,
                                                   &st_known);
            if (p) {
                int32_t min_isr = st_partition_min_isr(p);
                if (mp->nisr < min_isr) under_min++;
                else if (mp->nisr == min_isr) at_min++;
                st_partition_release(p);
            }
        }
    }
    for (int i = 0; i < n; i++) offline_dirs += rows[i].o.offline;

    family(b, "kafka_server_replicamanager_partitioncount", "gauge",
           "Partition replicas this broker hosts (ReplicaManager PartitionCount).");
    sample_u(b, "kafka_server_replicamanager_partitioncount", hosted);
    family(b, "kafka_server_replicamanager_leadercount", "gauge",
           "Partitions this broker leads (ReplicaManager LeaderCount).");
    sample_u(b, "kafka_server_replicamanager_leadercount", leaders);
    family(b, "kafka_server_replicamanager_underreplicatedpartitions", "gauge",
           "Partitions led here whose ISR is smaller than their replica set.");
    sample_u(b, "kafka_server_replicamanager_underreplicatedpartitions", under);
    family(b, "kafka_server_replicamanager_underminisrpartitioncount", "gauge",
           "Partitions led here whose ISR is below min.insync.replicas (acks=all refused).");
    sample_u(b, "kafka_server_replicamanager_underminisrpartitioncount", under_min);
    family(b, "kafka_server_replicamanager_atminisrpartitioncount", "gauge",
           "Partitions led here whose ISR is exactly min.insync.replicas.");
    sample_u(b, "kafka_server_replicamanager_atminisrpartitioncount", at_min);
    family(b, "kafka_server_replicamanager_offlinereplicacount", "gauge",
           "Partition logs on this broker taken offline by a failed write or fsync.");
    sample_u(b, "kafka_server_replicamanager_offlinereplicacount", offline_dirs);

    family(b, "kafka_controller_kafkacontroller_activecontrollercount", "gauge",
           "1 on the active controller, 0 elsewhere.");
    sample_u(b, "kafka_controller_kafkacontroller_activecontrollercount", (uint64_t)active);
    family(b, "kafka_controller_kafkacontroller_offlinepartitionscount", "gauge",
           "Partitions without a leader (reported by the active controller).");
    sample_u(b, "kafka_controller_kafkacontroller_offlinepartitionscount", active ? ctl_offline : 0);
    family(b, "kafka_controller_kafkacontroller_globaltopiccount", "gauge",
           "Topics in the cluster (reported by the active controller).");
    sample_u(b, "kafka_controller_kafkacontroller_globaltopiccount", active ? ctl_topics : 0);
    family(b, "kafka_controller_kafkacontroller_globalpartitioncount", "gauge",
           "Partitions in the cluster (reported by the active controller).");
    sample_u(b, "kafka_controller_kafkacontroller_globalpartitioncount", active ? ctl_parts : 0);
}

static void requests(st_buf_t *b, st_net_t *net) {
    family(b, "kafka_network_requestmetrics_requests_total", "counter",
           "Requests of each API that ended (answered, or dropped with their connection).");
    for (size_t i = 0; st_api_at(i); i++) {
        const st_api_t *api = st_api_at(i);
        st_histo_t h;
        st_net_request_time(net, api->key, &h);
        st_buf_printf(b, "kafka_network_requestmetrics_requests_total{request=");
        label_value(b, api->name);
        st_buf_printf(b, "} %llu\n", (unsigned long long)st_histo_count(&h));
    }
    family(b, "kafka_network_requestmetrics_totaltimems", "histogram",
           "Time from a request's arrival to its end in ms (TotalTimeMs: parked time included).");
    for (size_t i = 0; st_api_at(i); i++) {
        const st_api_t *api = st_api_at(i);
        st_histo_t h;
        st_net_request_time(net, api->key, &h);
        histogram(b, "kafka_network_requestmetrics_totaltimems", "request", api->name, &h, 1000.0);
    }
    static const struct {
        const char *name, *help;
    } phases[ST_NET_PHASES] = {
        [ST_NET_PHASE_LOCAL] = {"kafka_network_requestmetrics_localtimems",
                                "Time from an answered request's arrival until its handler "
                                "returned (or answered at once) in ms (LocalTimeMs)."},
        [ST_NET_PHASE_REMOTE] = {"kafka_network_requestmetrics_remotetimems",
                                 "Time an answered request was parked (in purgatory: acks, "
                                 "fetch.min.bytes; or on a worker) in ms (RemoteTimeMs)."},
        [ST_NET_PHASE_RESPONSE_QUEUE] = {"kafka_network_requestmetrics_responsequeuetimems",
                                         "Time from the wake-up that completed a parked request "
                                         "until its I/O thread answered it in ms "
                                         "(ResponseQueueTimeMs)."},
        [ST_NET_PHASE_RESPONSE_SEND] = {"kafka_network_requestmetrics_responsesendtimems",
                                        "Time from an answer until its last byte was written in "
                                        "ms (ResponseSendTimeMs)."},
    };
    for (int ph = 0; ph < ST_NET_PHASES; ph++) {
        family(b, phases[ph].name, "histogram", phases[ph].help);
        for (size_t i = 0; st_api_at(i); i++) {
            const st_api_t *api = st_api_at(i);
            st_histo_t h;
            st_net_request_phase_time(net, (st_net_phase_t)ph, api->key, &h);
            histogram(b, phases[ph].name, "request", api->name, &h, 1000.0);
        }
    }
}

static void log_sizes(st_buf_t *b, const part_row_t *rows, int n) {
    static const struct {
        const char *name, *help;
        size_t field;
    } gauges[] = {
        {"kafka_log_log_size", "Bytes of the partition's local log (Log Size).",
         offsetof(st_log_offsets_t, size_bytes)},
        {"kafka_log_log_logstartoffset", "The local log's first offset.",
         offsetof(st_log_offsets_t, log_start_offset)},
        {"kafka_log_log_logendoffset", "The local log's end offset (LEO).",
         offsetof(st_log_offsets_t, leo)},
    };
    for (size_t g = 0; g < ST_ARRAY_SIZE(gauges); g++) {
        family(b, gauges[g].name, "gauge", gauges[g].help);
        for (int i = 0; i < n; i++) {
            int64_t v = *(const int64_t *)((const char *)&rows[i].o + gauges[g].field);
            st_buf_printf(b, "%s{topic=", gauges[g].name);
            label_value(b, rows[i].p->topic);
            st_buf_printf(b, ",partition=\"%d\"} %lld\n", (int)rows[i].p->index, (long long)v);
        }
    }
    family(b, "kafka_log_log_numlogsegments", "gauge", "Segments of the partition's local log.");
    for (int i = 0; i < n; i++) {
        st_buf_printf(b, "kafka_log_log_numlogsegments{topic=");
        label_value(b, rows[i].p->topic);
        st_buf_printf(b, ",partition=\"%d\"} %d\n", (int)rows[i].p->index, rows[i].o.nsegments);
    }
    family(b, "kafka_cluster_partition_highwatermark", "gauge",
           "The partition's high watermark on this broker.");
    for (int i = 0; i < n; i++) {
        st_buf_printf(b, "kafka_cluster_partition_highwatermark{topic=");
        label_value(b, rows[i].p->topic);
        st_buf_printf(b, ",partition=\"%d\"} %lld\n", (int)rows[i].p->index,
                      (long long)rows[i].o.high_watermark);
    }
}

static void tiering(st_buf_t *b, const st_admin_sources_t *src, const part_row_t *rows, int n) {
    st_tier_stats_t s;
    memset(&s, 0, sizeof s);
    if (src->tier) st_tier_get_stats(src->tier, &s);
    static const struct {
        const char *name, *help;
    } names[] = {
        {"kafka_server_brokertopicmetrics_remotecopybytes_total",
         "Bytes of segments copied to the bucket (RemoteCopyBytesPerSec, KIP-405)."},
        {"kafka_server_brokertopicmetrics_remotecopyrequests_total",
         "Segment copies tried (RemoteCopyRequestsPerSec)."},
        {"kafka_server_brokertopicmetrics_remotecopyerrors_total",
         "Segment copies that failed (RemoteCopyErrorsPerSec)."},
        {"kafka_server_brokertopicmetrics_remotefetchbytes_total",
         "Bytes read from the bucket into the chunk cache (RemoteFetchBytesPerSec)."},
        {"kafka_server_brokertopicmetrics_remotefetchrequests_total",
         "Ranged reads of the bucket (RemoteFetchRequestsPerSec)."},
        {"kafka_server_brokertopicmetrics_remotefetcherrors_total",
         "Ranged reads of the bucket that failed (RemoteFetchErrorsPerSec)."},
    };
    uint64_t values[] = {s.bytes_uploaded, s.segments_uploaded + s.upload_failures,
                         s.upload_failures,  s.bytes_fetched,
                         s.fetch_requests,   s.fetch_failures};
    for (size_t i = 0; i < ST_ARRAY_SIZE(names); i++) {
        family(b, names[i].name, "counter", names[i].help);
        sample_u(b, names[i].name, values[i]);
    }
    topic_family(b, rows, n, "kafka_server_brokertopicmetrics_remotecopylagbytes", "gauge",
                  "Bytes of closed segments below the high watermark not yet in the bucket "
                  "(RemoteCopyLagBytes, KIP-963; partitions led here).", get_lag_bytes, 1);
    topic_family(b, rows, n, "kafka_server_brokertopicmetrics_remotecopylagsegments", "gauge",
                  "Closed segments below the high watermark not yet in the bucket "
                  "(RemoteCopyLagSegments, KIP-963).", get_lag_segments, 1);
    topic_family(b, rows, n, "kafka_server_brokertopicmetrics_remotelogsizebytes", "gauge",
                  "Bytes of the topic's segments in the bucket (RemoteLogSizeBytes, KIP-963; "
                  "partitions led here).", get_remote_bytes, 1);
    topic_family(b, rows, n, "kafka_server_brokertopicmetrics_remotelogmetadatacount", "gauge",
                  "Segments of the topic in the bucket's manifests (RemoteLogMetadataCount).", get_remote_segments, 1);
    topic_family(b, rows, n, "strata_tiering_served_bytes_total", "counter",
                  "Bytes of Fetch answers read from the bucket, served out of the chunk cache.", get_remote_bytes_out, 0);

    family(b, "strata_tiering_cache_hits_total", "counter",
           "Chunk cache lookups that found the chunk there.");
    sample_u(b, "strata_tiering_cache_hits_total", s.cache_hits);
    family(b, "strata_tiering_cache_misses_total", "counter",
           "Chunk cache lookups that had to download the chunk.");
    sample_u(b, "strata_tiering_cache_misses_total", s.cache_misses);
    family(b, "strata_tiering_cache_downloaded_bytes_total", "counter",
           "Bytes downloaded from the bucket into the chunk cache.");
    sample_u(b, "strata_tiering_cache_downloaded_bytes_total", s.bytes_fetched);
    family(b, "strata_tiering_cache_evictions_total", "counter", "Chunks evicted from the cache.");
    sample_u(b, "strata_tiering_cache_evictions_total", s.cache_evictions);
    family(b, "strata_tiering_fetch_pace_bytes_per_second", "gauge",
           "The pace downloads yield to live traffic at (remote.log.fetch.yield.latency.ms; "
           "0: not paced).");
    st_buf_printf(b, "strata_tiering_fetch_pace_bytes_per_second %lld\n",
                  (long long)s.fetch_pace_bytes_per_s);
    family(b, "strata_tiering_fetch_pace_cuts_total", "counter",
           "100 ms windows in which live traffic waited too long and downloads were slowed.");
    sample_u(b, "strata_tiering_fetch_pace_cuts_total", s.fetch_pace_cuts);
    family(b, "strata_tiering_cache_spilled_total", "counter",
           "Chunks moved from memory to the disk cache because more than one reader wanted them.");
    sample_u(b, "strata_tiering_cache_spilled_total", s.cache_spills);
    family(b, "strata_tiering_cache_used_bytes", "gauge", "Bytes the chunk cache holds on disk.");
    st_buf_printf(b, "strata_tiering_cache_used_bytes %lld\n", (long long)s.cache_used_bytes);
    family(b, "strata_tiering_cache_memory_used_bytes", "gauge",
           "Bytes of chunks the cache holds in memory (remote.log.cache.memory.bytes).");
    st_buf_printf(b, "strata_tiering_cache_memory_used_bytes %lld\n",
                  (long long)s.cache_memory_used_bytes);
    family(b, "strata_tiering_deleted_segments_total", "counter",
           "Remote segments deleted by remote retention.");
    sample_u(b, "strata_tiering_deleted_segments_total", s.segments_deleted);
}

/* ---- the cost estimate ------------------------------------------------------ */

double st_admin__read_requests_per_gib(const st_os_usage_t *u) {
    if (!u->bytes_in) return -1;
    double gib = (double)u->bytes_in / (1024.0 * 1024.0 * 1024.0);
    return (double)u->requests[ST_OS_CLASS_READ] / gib;
}

/* Per topic, what tiering asked of the object store (requests by S3's
 * billing class, bytes each way: st_tier_usage, every request a partition
 * of the topic made on this broker) and the estimate at objectstore.cost.*
 * prices: the requests so far, and a month of keeping what the bucket
 * holds of the partitions led here (their manifests' bytes, as
 * remotelogsizebytes: the leader's view, so brokers' sums do not count a
 * byte twice).  Requests are each broker's own: sum them over brokers. */
static void cost(st_buf_t *b, const st_admin_sources_t *src, const part_row_t *rows, int n) {
    st_os_prices_t pr;
    st_os_get_prices(src->os, &pr);
    st_tier_topic_usage_t *u = NULL;
    int nu = st_tier_usage(src->tier, &u);

    family(b, "strata_tiering_requests_total", "counter",
           "Object store requests made for the topic's partitions, by S3's billing class "
           "(write: PUT, POST, LIST; read: GET, HEAD; free: DELETE).");
    for (int i = 0; i < nu; i++)
        for (int c = 0; c < ST_OS_NCLASSES; c++) {
            st_buf_printf(b, "strata_tiering_requests_total{topic=");
            label_value(b, u[i].topic);
            st_buf_printf(b, ",class=\"%s\"} %llu\n", st_os_class_name((st_os_class_t)c),
                          (unsigned long long)u[i].usage.requests[c]);
        }
    family(b, "strata_tiering_bucket_sent_bytes_total", "counter",
           "Body bytes sent to the object store for the topic (uploads).");
    for (int i = 0; i < nu; i++)
        sample_topic_u(b, "strata_tiering_bucket_sent_bytes_total", u[i].topic,
                       u[i].usage.bytes_out);
    family(b, "strata_tiering_bucket_received_bytes_total", "counter",
           "Body bytes received from the object store for the topic (downloads: replays).");
    for (int i = 0; i < nu; i++)
        sample_topic_u(b, "strata_tiering_bucket_received_bytes_total", u[i].topic,
                       u[i].usage.bytes_in);
    family(b, "strata_tiering_request_cost_dollars_total", "counter",
           "Estimated cost of the topic's object store requests so far, in dollars "
           "(objectstore.cost.*.requests.per.1000).");
    for (int i = 0; i < nu; i++)
        sample_topic_d(b, "strata_tiering_request_cost_dollars_total", u[i].topic,
                       st_os_request_cost(&pr, &u[i].usage));
    family(b, "strata_tiering_read_requests_per_gib", "gauge",
           "Read-class object store requests per GiB received for the topic (what a replay "
           "from the bucket costs in requests; absent until a byte came).");
    for (int i = 0; i < nu; i++) {
        double per_gib = st_admin__read_requests_per_gib(&u[i].usage);
        if (per_gib >= 0)
            sample_topic_d(b, "strata_tiering_read_requests_per_gib", u[i].topic, per_gib);
    }
    family(b, "strata_tiering_storage_cost_dollars_per_month", "gauge",
           "Estimated cost in dollars of keeping the topic's remote log a month at its "
           "current size (remotelogsizebytes, partitions led here; "
           "objectstore.cost.storage.gib.month).");
    for (int i = 0; i < n;) {
        int j = topic_end(rows, n, i), any = 0;
        int64_t bytes = 0;
        for (int k = i; k < j; k++)
            if (rows[k].tiered) any = 1, bytes += rows[k].ts.remote_bytes;
        if (any)
            sample_topic_d(b, "strata_tiering_storage_cost_dollars_per_month", rows[i].p->topic,
                           st_os_storage_cost(&pr, bytes));
        i = j;
    }
    st_tier_usage_free(u, nu);
}

static void objectstore(st_buf_t *b, st_os_t *os) {
    static const st_os_op_t ops[] = {ST_OS_PUT,    ST_OS_GET,          ST_OS_HEAD, ST_OS_LIST,
                                     ST_OS_DELETE, ST_OS_DELETE_BATCH, ST_OS_CHECK};
    st_os_op_stats_t st[ST_ARRAY_SIZE(ops)];
    for (size_t i = 0; i < ST_ARRAY_SIZE(ops); i++) st_os_get_op_stats(os, ops[i], &st[i]);
    family(b, "strata_objectstore_request_duration_seconds", "histogram",
           "Object store requests by operation, from submit to completion (retries included).");
    for (size_t i = 0; i < ST_ARRAY_SIZE(ops); i++)
        histogram(b, "strata_objectstore_request_duration_seconds", "operation",
                  st_os_op_name(ops[i]), &st[i].time, 1e6);
    family(b, "strata_objectstore_request_errors_total", "counter",
           "Object store requests that failed, by operation (a missing key is no failure).");
    for (size_t i = 0; i < ST_ARRAY_SIZE(ops); i++) {
        st_buf_printf(b, "strata_objectstore_request_errors_total{operation=");
        label_value(b, st_os_op_name(ops[i]));
        st_buf_printf(b, "} %llu\n", (unsigned long long)st[i].errors);
    }
    st_os_stats_t s;
    st_os_get_stats(os, &s);
    family(b, "strata_objectstore_http_attempts_total", "counter",
           "HTTP exchanges with the object store (s3), or operations (file), retries and "
           "multipart parts included.");
    sample_u(b, "strata_objectstore_http_attempts_total", s.attempts);
    family(b, "strata_objectstore_retries_total", "counter", "Attempts that were retries.");
    sample_u(b, "strata_objectstore_retries_total", s.retries);
    family(b, "strata_objectstore_sent_bytes_total", "counter", "Body bytes sent to the object store.");
    sample_u(b, "strata_objectstore_sent_bytes_total", s.bytes_out);
    family(b, "strata_objectstore_received_bytes_total", "counter",
           "Body bytes received from the object store.");
    sample_u(b, "strata_objectstore_received_bytes_total", s.bytes_in);
    family(b, "strata_objectstore_requests_total", "counter",
           "Object store requests that reached the store (s3: HTTP exchanges, retries and "
           "multipart steps included), by S3's billing class: every topic's and the start-up "
           "check.");
    st_os_usage_t all;
    memset(&all, 0, sizeof all);
    for (int c = 0; c < ST_OS_NCLASSES; c++) {
        all.requests[c] = s.class_requests[c];
        st_buf_printf(b, "strata_objectstore_requests_total{class=\"%s\"} %llu\n",
                      st_os_class_name((st_os_class_t)c), (unsigned long long)s.class_requests[c]);
    }
    st_os_prices_t pr;
    st_os_get_prices(os, &pr);
    family(b, "strata_objectstore_request_cost_dollars_total", "counter",
           "Estimated cost of all those requests so far, in dollars.");
    st_buf_printf(b, "strata_objectstore_request_cost_dollars_total %.12g\n",
                  st_os_request_cost(&pr, &all));
}

void st_admin__metrics(const st_admin_sources_t *src, st_buf_t *b) {
    int n = 0;
    st_partition_t **parts = st_replicas_all(src->rm, &n);
    part_row_t *rows = st_calloc((size_t)(n ? n : 1), sizeof *rows);
    for (int i = 0; i < n; i++) {
        part_row_t *r = &rows[i];
        st_partition_t *p = parts[i];
        r->p = p;
        st_log_offsets(p->log, &r->o);
        r->bytes_in = load(&p->counters.bytes_in);
        r->messages_in = load(&p->counters.messages_in);
        r->bytes_out = load(&p->counters.bytes_out);
        r->remote_bytes_out = load(&p->counters.remote_bytes_out);
        r->replication_bytes_out = load(&p->counters.replication_bytes_out);
        r->leading = st_partition_check_leader(p) == ST_OK;
        /* a reference: the controller thread detaches it when the topic goes */
        st_tier_part_t *tp = st_partition_tier(p);
        if (tp && r->leading) {
            r->tiered = 1;
            st_tier_part_status(tp, &r->ts);
            copy_lag(r);
        }
        if (tp) st_tier_part_release(tp);
    }
    if (n > 1) qsort(rows, (size_t)n, sizeof *rows, row_cmp);

    st_meta_image_t *img = st_controller_image(src->ctl);
    replica_manager(b, src, img, rows, n);
    st_image_release(img);

    topic_family(b, rows, n, "kafka_server_brokertopicmetrics_bytesin_total", "counter",
                  "Bytes of record batches appended as leader (BytesInPerSec).", get_bytes_in, 0);
    topic_family(b, rows, n, "kafka_server_brokertopicmetrics_messagesin_total", "counter",
                  "Records appended as leader (MessagesInPerSec).", get_messages_in, 0);
    topic_family(b, rows, n, "kafka_server_brokertopicmetrics_bytesout_total", "counter",
                  "Bytes of records sent to consumers (BytesOutPerSec).", get_bytes_out, 0);
    uint64_t repl = 0;
    for (int i = 0; i < n; i++) repl += rows[i].replication_bytes_out;
    family(b, "kafka_server_brokertopicmetrics_replicationbytesout_total", "counter",
           "Bytes of records sent to followers (ReplicationBytesOutPerSec).");
    sample_u(b, "kafka_server_brokertopicmetrics_replicationbytesout_total", repl);

    requests(b, src->net);
    if (src->logs) {
        st_histo_t flush, wait;
        st_logmgr_flush_stats(src->logs, &flush, &wait);
        family(b, "kafka_log_logflushstats_logflushrateandtimems", "histogram",
               "Time of each log flush (fdatasync) in ms (LogFlushRateAndTimeMs).");
        histogram(b, "kafka_log_logflushstats_logflushrateandtimems", NULL, NULL, &flush, 1000.0);
        family(b, "strata_log_logflushstats_flushwaittimems", "histogram",
               "Time from a flush request until the flusher took it in ms (the round before "
               "it and the wait for a CPU).");
        histogram(b, "strata_log_logflushstats_flushwaittimems", NULL, NULL, &wait, 1000.0);
    }
    log_sizes(b, rows, n);
    if (src->tier) tiering(b, src, rows, n);
    if (src->tier && src->os) cost(b, src, rows, n);
    if (src->os) objectstore(b, src->os);

    for (int i = 0; i < n; i++) st_partition_release(parts[i]);
    free(parts);
    free(rows);
}

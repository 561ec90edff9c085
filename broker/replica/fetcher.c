/*
 * fetcher.c - the follower's side of replication: fetchers that pull the
 * partitions this broker follows from their leaders (Kafka's
 * ReplicaFetcherThread, one per source broker and num.replica.fetchers).
 *
 * A fetcher lives on one loop and sends one Fetch at a time to its source
 * broker over an outbound client: replica_id, each partition's log end as
 * fetch offset, the epoch of its last batch (KIP-320) and the leader epoch
 * it knows.  The answer is applied on the loop:
 *
 *   records             appended as follower (offsets and epochs kept),
 *                       then the high watermark is the leader's, capped at
 *                       the local log end;
 *   diverging epoch     the log is truncated to where it left the leader's
 *                       (Kafka's truncation on a fetch response), and the
 *                       next fetch goes on from there;
 *   out of range or     the local log starts again at the leader's local
 *   moved to tiered     log start (a follower far behind, or one with an
 *   storage             empty disk);
 *   another error       the partition waits replica.fetch.backoff.ms (the
 *                       image will say who leads it now).
 *
 * Which partitions a fetcher serves comes from the partition table: after
 * every image the controller thread bumps a generation and wakes the
 * fetchers' loops, which rebuild their lists when it moved.
 *
 * Threads: st_fetchers_update on the controller thread (creates fetchers,
 * posts them to their loops); everything else of a fetcher on its loop,
 * but st_fetchers_destroy, after the loops stopped.
 */
#include "replica.h"

#include <stdlib.h>

typedef struct fpart {
    st_partition_t *p; /* kept */
    int64_t not_before_ms;
} fpart_t;

typedef struct fetcher {
    struct st_fetchers *fs;
    int32_t source;
    int index;
    st_loop_t *loop;
    st_loop_ticker_t ticker;
    st_netclient_t *nc;
    char host[256];
    int port;
    int inflight;
    int stopped;
    int64_t not_before_ms;
    uint64_t gen;
    fpart_t *parts;
    int nparts;
    /* what the request in flight asked, in its order (kept) */
    st_partition_t **sent;
    int nsent;
} fetcher_t;

struct st_fetchers {
    st_replicas_t *rm;
    const st_broker_config_t *cfg;
    st_net_t *net;
    st_controller_t *ctl;
    pthread_mutex_t lock;
    fetcher_t **v;
    int n;
    uint64_t gen; /* atomic */
};

st_fetchers_t *st_fetchers_new(st_replicas_t *rm, const st_broker_config_t *cfg, st_net_t *net,
                               st_controller_t *ctl) {
    st_fetchers_t *fs = st_calloc(1, sizeof *fs);
    fs->rm = rm;
    fs->cfg = cfg;
    fs->net = net;
    fs->ctl = ctl;
    pthread_mutex_init(&fs->lock, NULL);
    return fs;
}

static void parts_release(fetcher_t *f) {
    for (int i = 0; i < f->nparts; i++) st_partition_release(f->parts[i].p);
    free(f->parts);
    f->parts = NULL;
    f->nparts = 0;
}

static void sent_release(fetcher_t *f) {
    for (int i = 0; i < f->nsent; i++) st_partition_release(f->sent[i]);
    free(f->sent);
    f->sent = NULL;
    f->nsent = 0;
}

void st_fetchers_destroy(st_fetchers_t *fs) {
    if (!fs) return;
    for (int i = 0; i < fs->n; i++) {
        fetcher_t *f = fs->v[i];
        f->stopped = 1;
        if (f->nc) st_netclient_destroy(f->nc); /* a fetch in flight ends CANCELLED */
        f->nc = NULL;
        parts_release(f);
        sent_release(f);
        free(f);
    }
    free(fs->v);
    pthread_mutex_destroy(&fs->lock);
    free(fs);
}

static uint32_t part_hash(const st_partition_t *p) {
    uint32_t h = 2166136261u;
    for (const char *c = p->topic; *c; c++) h = (h ^ (uint8_t)*c) * 16777619u;
    return h ^ (uint32_t)p->index;
}

/* The partitions this fetcher serves: followed here, led by its source. */
static void rebuild(fetcher_t *f) {
    st_fetchers_t *fs = f->fs;
    parts_release(f);
    int n = 0;
    st_partition_t **all = st_replicas_all(fs->rm, &n);
    f->parts = st_calloc((size_t)n + 1, sizeof *f->parts);
    for (int i = 0; i < n; i++) {
        st_partition_t *p = all[i];
        if (__atomic_load_n(&p->leader, __ATOMIC_ACQUIRE) == f->source &&
            (int)(part_hash(p) % (uint32_t)fs->cfg->num_replica_fetchers) == f->index)
            f->parts[f->nparts++] = (fpart_t){p, 0};
        else
            st_partition_release(p);
    }
    free(all);
}

/* The source's endpoint from the image; the client is made again when it
 * moved (a broker restarted elsewhere).  0 when there is a client. */
static int ensure_client(fetcher_t *f) {
    st_meta_image_t *img = st_controller_image(f->fs->ctl);
    const st_meta_broker_t *b = st_image_broker(img, f->source);
    const st_meta_endpoint_t *ep =
        b ? st_meta_broker_endpoint(b, f->fs->cfg->inter_broker_listener_name) : NULL;
    int rc = -1;
    if (ep) {
        if (f->nc && (strcmp(f->host, ep->host) || f->port != ep->port)) {
            st_netclient_destroy(f->nc);
            f->nc = NULL;
        }
        if (!f->nc) {
            snprintf(f->host, sizeof f->host, "%s", ep->host);
            f->port = ep->port;
            char cid[64], err[256];
            snprintf(cid, sizeof cid, "strata-replica-fetcher-%d-%d", (int)f->fs->cfg->node_id,
                     f->index);
            st_netclient_config_t nc = {.host = f->host, .port = f->port, .client_id = cid,
                                        .sec = st_replicas_client_security(f->fs->rm)};
            if (st_netclient_new(f->loop, &nc, &f->nc, err, sizeof err))
                ST_LOG_RATELIMITED(ST_LOG_WARN, "replica", 10000,
                                   "fetcher for broker %d: cannot reach %s:%d: %s", (int)f->source,
                                   f->host, f->port, err);
        }
        rc = f->nc ? 0 : -1;
    }
    if (img) st_image_release(img);
    return rc;
}

/* The epoch of the last batch in the log (-1: none). */
static int32_t last_epoch(st_log_t *log) {
    int32_t ep;
    int64_t end;
    st_log_end_offset_for_epoch(log, INT32_MAX, &ep, &end);
    return ep;
}

/* Where a follower truncates on a diverging epoch (Kafka's
 * AbstractFetcherThread): to the end of that epoch on whichever side ends
 * it first when both hold it; else to the end of its own largest epoch
 * below it, and the next fetch tells whether more must go. */
static int64_t truncation_offset(st_log_t *log, int32_t div_epoch, int64_t div_end, int64_t leo) {
    int32_t ep;
    int64_t end;
    st_log_end_offset_for_epoch(log, div_epoch, &ep, &end);
    if (ep < 0) return ST_MIN(div_end, leo);
    if (ep == div_epoch) return ST_MIN(div_end, end);
    return ST_MIN(end, leo);
}

/* The whole batches at the front of records (the last one may be cut by
 * the leader's size limit). */
static size_t whole_batches(const uint8_t *r, size_t len) {
    size_t pos = 0;
    while (len - pos >= 12) {
        uint32_t blen = st_be32_get(r + pos + 8);
        if ((size_t)blen + 12 > len - pos) break;
        pos += (size_t)blen + 12;
    }
    return pos;
}

static void delay_part(fetcher_t *f, st_partition_t *p, int64_t now) {
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].p == p) f->parts[i].not_before_ms = now + f->fs->cfg->replica_fetch_backoff_ms;
}

static void apply_part(fetcher_t *f, st_partition_t *p, const st_fetch_resp_part_t *rp, int64_t now) {
    /* led by another broker (this one, perhaps) since the fetch went out */
    if (__atomic_load_n(&p->leader, __ATOMIC_ACQUIRE) != f->source) return;
    st_err_t e = st_err_from_wire(rp->error_code);
    st_log_offsets_t o;
    st_log_offsets(p->log, &o);
    if (e == ST_E_OFFSET_OUT_OF_RANGE && o.leo > rp->high_watermark && rp->high_watermark >= o.log_start_offset) {
        /* ahead of the leader (it was elected uncleanly): what it lacks goes */
        ST_WARN("replica", "%s-%d: log end %lld is past leader %d's: truncating to %lld", p->topic,
                (int)p->index, (long long)o.leo, (int)f->source, (long long)rp->high_watermark);
        st_log_truncate_to(p->log, rp->high_watermark);
        return;
    }
    if (e == ST_E_OFFSET_OUT_OF_RANGE || e == ST_E_OFFSET_MOVED_TO_TIERED_STORAGE) {
        /* behind the leader's local log start: start again from there
         * (routine for an empty log, a read replica's) */
        ST_LOG(o.leo > o.log_start_offset ? ST_LOG_WARN : ST_LOG_INFO, "replica",
               "%s-%d: offset %lld is below leader %d's local log start %lld (%s): the local log "
               "starts again there", p->topic, (int)p->index, (long long)o.leo, (int)f->source,
               (long long)rp->log_start_offset, st_err_name(e));
        if (rp->log_start_offset > o.leo || rp->log_start_offset > o.log_start_offset) {
            if (st_log_truncate_fully(p->log, rp->log_start_offset) == ST_OK &&
                e == ST_E_OFFSET_MOVED_TO_TIERED_STORAGE) {
                /* what lies below is in the bucket: so is its producer
                 * state (blocking, as Kafka's fetcher builds its remote
                 * auxiliary state; a disk loss is rare) */
                st_tier_part_t *tp = st_partition_tier(p);
                if (tp) {
                    st_partition_restore_from_bucket(p, tp, rp->log_start_offset);
                    st_tier_part_release(tp);
                }
            }
        } else
            delay_part(f, p, now);
        return;
    }
    if (e) {
        ST_LOG_RATELIMITED(ST_LOG_INFO, "replica", 5000, "%s-%d: fetch from broker %d: %s",
                           p->topic, (int)p->index, (int)f->source, st_err_name(e));
        delay_part(f, p, now);
        return;
    }
    if (rp->diverging_epoch.epoch >= 0 || rp->diverging_epoch.end_offset >= 0) {
        int64_t to = rp->diverging_epoch.end_offset < 0
                         ? o.high_watermark
                         : truncation_offset(p->log, rp->diverging_epoch.epoch,
                                             rp->diverging_epoch.end_offset, o.leo);
        ST_INFO("replica", "%s-%d: log diverged from leader %d's at epoch %d (ends at %lld there): "
                           "truncating %lld..%lld",
                p->topic, (int)p->index, (int)f->source, (int)rp->diverging_epoch.epoch,
                (long long)rp->diverging_epoch.end_offset, (long long)to, (long long)o.leo);
        st_err_t te = st_log_truncate_to(p->log, to);
        if (te == ST_E_OFFSET_OUT_OF_RANGE) st_log_truncate_fully(p->log, to);
        else if (te) delay_part(f, p, now);
        return;
    }
    size_t len = rp->records.len > 0 ? whole_batches(rp->records.p, (size_t)rp->records.len) : 0;
    if (len > 0) {
        st_append_info_t info;
        st_err_t ae = st_log_append_as_follower(p->log, rp->records.p, len, st_now_ms(), &info);
        if (ae) {
            ST_LOG_RATELIMITED(ST_LOG_WARN, "replica", 5000,
                               "%s-%d: appending %zu bytes from leader %d at %lld failed: %s",
                               p->topic, (int)p->index, len, (int)f->source, (long long)o.leo,
                               st_err_name(ae));
            delay_part(f, p, now);
            return;
        }
        st_log_offsets(p->log, &o);
    }
    st_log_set_high_watermark(p->log, ST_MIN(rp->high_watermark, o.leo));
}

static void on_fetch(st_netclient_t *nc, const st_netclient_resp_t *resp, void *arg) {
    (void)nc;
    fetcher_t *f = arg;
    f->inflight = 0;
    int64_t now = st_mono_ms();
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_fetch_resp_t *r = NULL;
    st_err_t e = resp->err ? resp->err : st_netclient_decode(resp, &a, (void **)&r);
    if (!e && r->error_code) e = st_err_from_wire(r->error_code);
    if (e) {
        if (e != ST_E_CANCELLED)
            ST_LOG_RATELIMITED(ST_LOG_WARN, "replica", 5000, "fetch from broker %d failed: %s%s%s",
                               (int)f->source, st_err_name(e), resp->why ? ": " : "",
                               resp->why ? resp->why : "");
        f->not_before_ms = now + f->fs->cfg->replica_fetch_backoff_ms;
        goto out;
    }
    /* one topic entry per partition sent, in order */
    int k = 0;
    for (int i = 0; i < r->responses.n; i++)
        for (int j = 0; j < r->responses.v[i].partitions.n; j++, k++) {
            const st_fetch_resp_part_t *rp = &r->responses.v[i].partitions.v[j];
            st_partition_t *p = NULL;
            for (int m = 0; m < f->nsent && !p; m++)
                if (f->sent[m]->index == rp->partition_index &&
                    st_str_eq(r->responses.v[i].topic, f->sent[m]->topic))
                    p = f->sent[m];
            if (p && !f->stopped) apply_part(f, p, rp, now);
        }
out:
    sent_release(f);
    st_arena_fini(&a);
    /* the answer may come from the client's own ticker, after this
     * fetcher's in the same round: another round sends the next fetch now */
    if (!f->stopped) st_loop_wake(f->loop);
}

static void send_fetch(fetcher_t *f, int64_t now) {
    const st_broker_config_t *cfg = f->fs->cfg;
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_fetch_req_t q;
    st_schema_defaults(&st_fetch_req_schema, &q);
    q.replica_id = cfg->node_id;
    q.max_wait_ms = cfg->replica_fetch_wait_max_ms;
    q.min_bytes = cfg->replica_fetch_min_bytes;
    q.max_bytes = cfg->replica_fetch_response_max_bytes;
    q.isolation_level = 0;
    q.session_id = 0;
    q.session_epoch = -1;
    ST_ARRAY_ALLOC(q.topics, &a, f->nparts);
    ST_ARRAY_ALLOC(q.forgotten_topics, &a, 0);
    q.rack_id = st_str("");
    f->sent = st_calloc((size_t)f->nparts + 1, sizeof *f->sent);
    int n = 0;
    for (int i = 0; i < f->nparts; i++) {
        fpart_t *fp = &f->parts[i];
        if (fp->not_before_ms > now) continue;
        st_partition_t *p = fp->p;
        st_log_offsets_t o;
        st_log_offsets(p->log, &o);
        st_fetch_req_topic_t *t = &q.topics.v[n];
        st_schema_defaults(&st_fetch_req_topic_schema, t);
        t->topic = st_str(p->topic);
        ST_ARRAY_ALLOC(t->partitions, &a, 1);
        st_fetch_req_part_t *qp = &t->partitions.v[0];
        st_schema_defaults(&st_fetch_req_part_schema, qp);
        qp->partition = p->index;
        qp->current_leader_epoch = st_partition_leader_epoch(p);
        qp->fetch_offset = o.leo;
        qp->last_fetched_epoch = last_epoch(p->log);
        qp->log_start_offset = o.log_start_offset;
        qp->partition_max_bytes = cfg->replica_fetch_max_bytes;
        f->sent[n++] = p;
        st_partition_keep(p);
    }
    q.topics.n = n;
    f->nsent = n;
    if (n == 0) {
        sent_release(f);
        st_arena_fini(&a);
        return;
    }
    st_err_t e = st_netclient_send(f->nc, ST_API_FETCH, 12, &q,
                                   (int64_t)cfg->replica_fetch_wait_max_ms + 30000, on_fetch, f);
    if (e) {
        sent_release(f);
        f->not_before_ms = now + cfg->replica_fetch_backoff_ms;
    } else {
        f->inflight = 1;
    }
    st_arena_fini(&a);
}

static int64_t fetcher_tick(st_loop_ticker_t *t, int64_t now) {
    fetcher_t *f = (fetcher_t *)((char *)t - offsetof(fetcher_t, ticker));
    if (f->stopped) return ST_LOOP_TICKER_DONE;
    if (f->inflight) return -1;
    uint64_t gen = __atomic_load_n(&f->fs->gen, __ATOMIC_ACQUIRE);
    if (gen != f->gen) {
        f->gen = gen;
        rebuild(f);
    }
    if (f->nparts == 0) return -1; /* woken at the next image */
    if (now < f->not_before_ms) return f->not_before_ms - now;
    if (ensure_client(f)) {
        f->not_before_ms = now + f->fs->cfg->replica_fetch_backoff_ms;
        return f->fs->cfg->replica_fetch_backoff_ms;
    }
    send_fetch(f, now);
    if (f->inflight) return -1;
    /* every partition is backing off: the earliest of them */
    int64_t next = -1;
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].not_before_ms > now && (next < 0 || f->parts[i].not_before_ms - now < next))
            next = f->parts[i].not_before_ms - now;
    return next < 0 ? f->fs->cfg->replica_fetch_backoff_ms : next;
}

/* The loop is exiting: nothing more is sent.  The client goes in
 * st_fetchers_destroy, after the loops stopped (a client destroyed on its
 * loop is freed at the loop's next round, which an exiting loop has not). */
static void fetcher_stop(st_loop_ticker_t *t) {
    fetcher_t *f = (fetcher_t *)((char *)t - offsetof(fetcher_t, ticker));
    f->stopped = 1;
}

static void fetcher_attach(void *arg) {
    fetcher_t *f = arg;
    st_loop_ticker_add(f->loop, &f->ticker);
}

void st_fetchers_update(st_fetchers_t *fs, const st_meta_image_t *img) {
    if (!fs || !fs->net) return;
    int32_t self = fs->cfg->node_id;
    int nf = fs->cfg->num_replica_fetchers;
    for (int ti = 0; ti < img->ntopics; ti++) {
        const st_meta_topic_t *t = img->topics[ti];
        for (int pi = 0; pi < t->nparts; pi++) {
            const st_meta_partition_t *mp = &t->parts[pi];
            if (mp->leader < 0 || mp->leader == self) continue;
            int here = 0;
            for (int r = 0; r < mp->nreplicas; r++) here |= mp->replicas[r] == self;
            if (!here) continue;
            pthread_mutex_lock(&fs->lock);
            int have = 0;
            for (int i = 0; i < fs->n; i++) have |= fs->v[i]->source == mp->leader;
            if (!have) {
                fs->v = st_realloc(fs->v, sizeof *fs->v * (size_t)(fs->n + nf));
                for (int k = 0; k < nf; k++) {
                    fetcher_t *f = st_calloc(1, sizeof *f);
                    f->fs = fs;
                    f->source = mp->leader;
                    f->index = k;
                    f->loop = st_net_loop(fs->net, (int)((mp->leader + k) % st_net_nloops(fs->net)));
                    f->ticker.tick = fetcher_tick;
                    f->ticker.stop = fetcher_stop;
                    f->gen = (uint64_t)-1;
                    fs->v[fs->n++] = f;
                    st_loop_post(f->loop, fetcher_attach, f);
                }
                ST_INFO("replica", "fetching from broker %d (%d fetcher%s)", (int)mp->leader, nf,
                        nf == 1 ? "" : "s");
            }
            pthread_mutex_unlock(&fs->lock);
        }
    }
    __atomic_add_fetch(&fs->gen, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&fs->lock);
    for (int i = 0; i < fs->n; i++) st_loop_wake(fs->v[i]->loop);
    pthread_mutex_unlock(&fs->lock);
}

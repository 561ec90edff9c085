/*
 * quorum.c - the Raft that commits __cluster_metadata (broker/raft), hosted
 * on the controller thread, and that thread's loop.
 *
 * Every node runs one st_raft_t over the metalog's storage ops (metalog.c);
 * this file supplies the rest of its ops:
 *   - clock: st_mono_ms; randomness: a xorshift seeded from the kernel;
 *   - send: a request to another voter goes through its st_netclient (the
 *     loops' outbound client), encoded by raft_wire.c; its answer comes
 *     back on a loop thread, is decoded there into an event that owns its
 *     bytes, and is queued for this thread.  A response to another node's
 *     request finds that request in the pending table by the request id
 *     this file gave it, is encoded into the request's arena and answered
 *     on the request's loop;
 *   - apply: committed data entries are decoded and applied to the image
 *     in one st_image_apply, then published (the listener follows);
 *   - leader_change: remembered for Metadata's controller id.
 *
 * The thread's loop: wait (CLOCK_MONOTONIC) until an event, a completed
 * flush, a job or the Raft's next deadline; hand the Raft what arrived;
 * tick it; then run at most one job.  A job that commits proposes its batch
 * and pumps the same loop, jobs excepted, until its entry is applied, so
 * operations stay one at a time and in order while the Raft keeps running.
 *
 * A single voter is the same code: it elects itself at its first tick
 * (no network hop), and a commit is an append, an fsync on the metalog's
 * flush thread and an apply.
 */
#include "controller_int.h"

#include <stdlib.h>
#include <time.h>

#define COMMIT_TIMEOUT_MS 30000
/* metadata.log.max.record.bytes.between.snapshots, Kafka's default */
#define SNAPSHOT_MIN_NEW_BYTES (20 << 20)

static st_controller_t *host(void *arg) { return st_metalog_host(arg); }

/* ---- clock and randomness --------------------------------------------------- */

static int64_t op_now(void *arg) {
    (void)arg;
    return st_mono_ms();
}

static uint32_t op_random(void *arg) {
    st_controller_t *c = host(arg);
    uint64_t x = c->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c->rng = x;
    return (uint32_t)(x >> 32);
}

/* ---- records of a Fetch response: the metalog's entry codec ------------------ */

static void rec_encode(void *arg, const st_raft_entry_t *e, int n, st_buf_t *out) {
    (void)arg;
    char why[200];
    for (int i = 0; i < n; i++)
        if (st_metalog_entry_encode(&e[i], out, why, sizeof why))
            ST_ERROR("quorum", "entry at offset %lld not sent: %s", (long long)e[i].base_offset,
                     why);
}

static st_err_t rec_decode(void *arg, const uint8_t *p, size_t len, st_arena_t *a,
                           st_raft_entry_t **entries, int *n, char *why, size_t whylen) {
    (void)arg;
    int cap = 16, k = 0;
    st_raft_entry_t *v = st_arena_alloc(a, sizeof *v * (size_t)cap);
    size_t pos = 0;
    while (pos + ST_BATCH_HEADER_SIZE <= len) {
        st_batch_info_t b;
        if (st_batch_header(p + pos, len - pos, &b) || b.size <= 0 || (size_t)b.size > len - pos)
            break; /* a cut batch at the end: Fetch may send one */
        if (k == cap) {
            st_raft_entry_t *w = st_arena_alloc(a, sizeof *w * (size_t)cap * 2);
            memcpy(w, v, sizeof *v * (size_t)k);
            v = w;
            cap *= 2;
        }
        st_err_t e = st_metalog_entry_decode(p + pos, b.size, &v[k], why, whylen);
        if (e) return e;
        k++;
        pos += (size_t)b.size;
    }
    *entries = v;
    *n = k;
    return ST_OK;
}

static const st_raft_records_ops_t records_ops = {NULL, rec_encode, rec_decode};

/* ---- events from the loops ------------------------------------------------------ */

static void event_free(ctl_event_t *ev) {
    if (!ev) return;
    if (!ev->req) st_arena_fini(&ev->arena);
    free(ev->frame);
    free(ev);
}

/* Queues ev for the controller thread, or drops it once the thread is gone. */
static void event_post(st_controller_t *c, ctl_event_t *ev) {
    ev->next = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->thread_done) {
        pthread_mutex_unlock(&c->lock);
        if (ev->req) {
            st_request_close_conn(ev->req, "the controller is stopping");
            st_request_no_response(ev->req);
        }
        event_free(ev);
        return;
    }
    if (c->ev_tail) c->ev_tail->next = ev;
    else c->ev_head = ev;
    c->ev_tail = ev;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

typedef struct out_req {
    st_controller_t *c;
    int32_t dest;
    int32_t request_id;
    int16_t api_key;
    int16_t version;
} out_req_t;

static void on_unreachable(st_controller_t *c, ctl_event_t *ev) {
    st_raft_leader_unreachable(c->raft, ev->from);
}

/* An answer's bytes live only during the netclient's callback: the event
 * keeps a copy (ev->frame) and the body decoded from it (ev->arena). */
static st_err_t event_decode(ctl_event_t *ev, const st_netclient_resp_t *resp, void **body) {
    ev->frame = st_malloc(resp->len ? resp->len : 1);
    memcpy(ev->frame, resp->frame, resp->len);
    st_netclient_resp_t own = *resp;
    own.frame = ev->frame;
    own.body = ev->frame + (resp->body - resp->frame);
    return st_netclient_decode(&own, &ev->arena, body);
}

/* A loop thread: our request to dest was answered (or failed). */
static void on_answer(st_netclient_t *nc, const st_netclient_resp_t *resp, void *arg) {
    (void)nc;
    out_req_t *o = arg;
    st_controller_t *c = o->c;
    if (resp->err) {
        /* the Raft times its requests out itself and sends again; a lost
         * or refused connection is also a hint that the node is down */
        ST_DEBUG("quorum", "%s to node %d: %s%s%s", st_api_lookup(o->api_key)->name, (int)o->dest,
                 st_err_msg(resp->err), resp->why ? ": " : "", resp->why ? resp->why : "");
        if (resp->err == ST_E_CONNECTION_LOST || resp->err == ST_E_CONNECTION_REFUSED) {
            ctl_event_t *ev = st_calloc(1, sizeof *ev);
            st_arena_init(&ev->arena, 64);
            ev->fn = on_unreachable;
            ev->from = o->dest;
            ev->err = resp->err;
            event_post(c, ev);
        }
        free(o);
        return;
    }
    ctl_event_t *ev = st_calloc(1, sizeof *ev);
    st_arena_init(&ev->arena, 4096);
    void *body = NULL;
    int16_t werr;
    char why[256];
    st_err_t e = event_decode(ev, resp, &body);
    if (!e)
        e = st_raft_wire_decode(o->api_key, o->version, 1, body, &records_ops, &ev->arena,
                                &ev->msg, &werr, why, sizeof why);
    else
        snprintf(why, sizeof why, "%s", st_err_msg(e));
    if (e) {
        ST_WARN("quorum", "an answer from node %d to API %d is not understood: %s", (int)o->dest,
                (int)o->api_key, why);
        event_free(ev);
        free(o);
        return;
    }
    ev->from = o->dest;
    ev->msg.request_id = o->request_id;
    free(o);
    event_post(c, ev);
}

/* ---- requests of our own (membership) ----------------------------------------------- */

typedef struct own_req {
    st_controller_t *c;
    int32_t dest;
    ctl_event_fn fn;
} own_req_t;

static void on_own_answer(st_netclient_t *nc, const st_netclient_resp_t *resp, void *arg) {
    (void)nc;
    own_req_t *o = arg;
    ctl_event_t *ev = st_calloc(1, sizeof *ev);
    st_arena_init(&ev->arena, 1024);
    ev->fn = o->fn;
    ev->from = o->dest;
    ev->err = resp->err;
    if (!resp->err) {
        ev->err = event_decode(ev, resp, &ev->body);
        if (ev->err) ev->body = NULL;
    }
    st_controller_t *c = o->c;
    free(o);
    event_post(c, ev);
}

static peer_t *peer_of(st_controller_t *c, int32_t id);

st_err_t st_ctl__send(st_controller_t *c, int32_t dest, int16_t api_key, int16_t version,
                      const void *body, ctl_event_fn fn) {
    peer_t *p = peer_of(c, dest);
    if (!p || !p->nc_admin) return ST_E_NOT_FOUND;
    own_req_t *o = st_malloc(sizeof *o);
    *o = (own_req_t){c, dest, fn};
    st_err_t e = st_netclient_send(p->nc_admin, api_key, version, body, 0, on_own_answer, o);
    if (e) free(o);
    return e;
}

int64_t st_ctl__next_offset(st_controller_t *c) { return st_metalog_end_offset(c->ml); }

/* The node a request comes from, by its fields. */
static int32_t sender_of(const st_raft_msg_t *m) {
    switch (m->type) {
    case ST_RAFT_VOTE_REQUEST: return m->u.vote_req.replica_id;
    case ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST: return m->u.begin_req.leader_id;
    case ST_RAFT_END_QUORUM_EPOCH_REQUEST: return m->u.end_req.leader_id;
    case ST_RAFT_FETCH_REQUEST: return m->u.fetch_req.replica_id;
    case ST_RAFT_FETCH_SNAPSHOT_REQUEST: return m->u.fsnap_req.replica_id;
    default: return -1;
    }
}

void st_controller_raft_request(st_controller_t *c, st_request_t *req, const st_raft_msg_t *msg) {
    ctl_event_t *ev = st_calloc(1, sizeof *ev);
    ev->msg = *msg;
    ev->req = req;
    ev->version = req->hdr.api_version;
    ev->from = sender_of(msg);
    event_post(c, ev);
}

/* ---- answering another node's request ---------------------------------------------- */

typedef struct answer {
    st_request_t *req;
    void *body; /* NULL: close the connection instead */
    st_buf_t records;
} answer_t;

static void answer_on_loop(void *arg) {
    answer_t *a = arg;
    if (a->body) {
        st_request_respond(a->req, a->body);
    } else {
        st_request_close_conn(a->req, "the controller is stopping");
        st_request_no_response(a->req);
    }
    st_buf_fini(&a->records);
    free(a);
}

static void answer(st_controller_t *c, const pending_req_t *p, const st_raft_msg_t *resp) {
    (void)c;
    answer_t *a = st_calloc(1, sizeof *a);
    a->req = p->req;
    st_buf_init(&a->records);
    if (resp) {
        /* the request is ours until answered: its arena too */
        st_err_t e = st_raft_wire_encode(resp, p->version, &records_ops, &p->req->arena,
                                         &a->records, &a->body);
        if (e) {
            ST_ERROR("quorum", "cannot encode %s to node %d: %s", st_raft_msg_name(resp->type),
                     (int)p->from, st_err_msg(e));
            a->body = NULL;
        }
    }
    st_loop_post(p->req->loop, answer_on_loop, a);
}

static pending_req_t *pending_take(st_controller_t *c, int32_t request_id, pending_req_t *out) {
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i].request_id == request_id) {
            *out = c->pending[i];
            c->pending[i] = c->pending[--c->npending];
            return out;
        }
    return NULL;
}

/* ---- send -------------------------------------------------------------------------- */

static peer_t *peer_of(st_controller_t *c, int32_t id) {
    for (int i = 0; i < c->npeers; i++)
        if (c->peers[i].id == id) return &c->peers[i];
    return NULL;
}

static void op_send(void *arg, int32_t dest, const st_raft_msg_t *msg) {
    st_controller_t *c = host(arg);
    ST_DEBUG("quorum", "-> node %d: %s (request %d)", (int)dest, st_raft_msg_name(msg->type),
             (int)msg->request_id);
    if (msg->type % 2 == 0) { /* a response */
        pending_req_t p;
        if (!pending_take(c, msg->request_id, &p)) {
            ST_DEBUG("quorum", "%s to node %d answers no pending request",
                     st_raft_msg_name(msg->type), (int)dest);
            return;
        }
        answer(c, &p, msg);
        return;
    }
    peer_t *peer = peer_of(c, dest);
    if (!peer || !peer->nc) {
        ST_DEBUG("quorum", "%s to node %d: no address for it", st_raft_msg_name(msg->type),
                 (int)dest);
        return;
    }
    int16_t key = st_raft_wire_api(msg->type), version = st_raft_wire_version(key);
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_buf_t records;
    st_buf_init(&records);
    void *body = NULL;
    st_err_t e = st_raft_wire_encode(msg, version, &records_ops, &a, &records, &body);
    if (!e) {
        out_req_t *o = st_malloc(sizeof *o);
        *o = (out_req_t){c, dest, msg->request_id, key, version};
        /* a little longer than the Raft's own wait, so its timer decides */
        int64_t timeout = ST_RAFT_REQUEST_TIMEOUT_MS + ST_RAFT_FETCH_MAX_WAIT_MS;
        e = st_netclient_send(peer->nc, key, version, body, timeout, on_answer, o);
        if (e) free(o);
    }
    if (e)
        ST_WARN("quorum", "%s to node %d not sent: %s", st_raft_msg_name(msg->type), (int)dest,
                st_err_msg(e));
    st_buf_fini(&records);
    st_arena_fini(&a);
}

/* ---- apply and leader changes -------------------------------------------------------- */

/* A LeaderChange names the leader's voter set: a node configured with
 * another controller.quorum.voters says so (the Raft's own messages carry
 * no voter set, so this is where a disagreement shows). */
static void check_voters(st_controller_t *c, const st_raft_entry_t *e) {
    if (e->epoch == c->voters_checked_epoch) return;
    c->voters_checked_epoch = e->epoch;
    st_rd_t r;
    st_rd_init(&r, e->data, (size_t)e->len);
    st_rd_i16(&r); /* version */
    int32_t leader = st_rd_i32(&r);
    int64_t n = (int64_t)st_rd_uvarint(&r) - 1;
    int32_t ids[ST_RAFT_MAX_VOTERS];
    int k = 0, bad = r.err || n < 0 || n > ST_RAFT_MAX_VOTERS;
    for (int64_t i = 0; i < n && !bad; i++) {
        ids[k++] = st_rd_i32(&r);
        for (uint64_t t = st_rd_uvarint(&r); t > 0 && !r.err; t--) { /* tagged fields */
            st_rd_uvarint(&r);
            st_rd_bytes(&r, (size_t)st_rd_uvarint(&r));
        }
        bad = r.err;
    }
    if (bad) {
        ST_WARN("quorum", "the LeaderChange record of epoch %d does not decode", (int)e->epoch);
        return;
    }
    int same = k == c->nvoter_ids;
    for (int i = 0; i < k && same; i++) {
        int found = 0;
        for (int j = 0; j < c->nvoter_ids; j++) found |= ids[i] == c->voter_ids[j];
        same = found;
    }
    if (same) return;
    char theirs[256] = "", ours[256] = "";
    for (int i = 0; i < k; i++)
        snprintf(theirs + strlen(theirs), sizeof theirs - strlen(theirs), "%s%d", i ? "," : "",
                 (int)ids[i]);
    for (int i = 0; i < c->nvoter_ids; i++)
        snprintf(ours + strlen(ours), sizeof ours - strlen(ours), "%s%d", i ? "," : "",
                 (int)c->voter_ids[i]);
    ST_ERROR("quorum", "controller.quorum.voters disagree: node %d, leader of epoch %d, has the "
                       "voters %s, this node has %s; give every node the same voter list",
             (int)leader, (int)e->epoch, theirs, ours);
}

static void op_apply(void *arg, const st_raft_entry_t *entries, int n) {
    st_controller_t *c = host(arg);
    const uint8_t **batches = st_malloc(sizeof *batches * (size_t)(n ? n : 1));
    int32_t *lens = st_malloc(sizeof *lens * (size_t)(n ? n : 1));
    int nb = 0;
    for (int i = 0; i < n; i++) {
        const st_raft_entry_t *e = &entries[i];
        if (e->base_offset == c->wait_base) {
            c->wait_epoch = e->epoch;
            c->wait_seen_us = st_mono_us();
        }
        c->applied_end = e->base_offset + e->record_count;
        if (e->control == ST_RAFT_CONTROL_LEADER_CHANGE) check_voters(c, e);
        if (e->control) continue;
        batches[nb] = e->data;
        lens[nb] = e->len;
        nb++;
    }
    if (nb > 0 && st_ctl__apply_batches(c, batches, lens, nb, c->applied_end - 1))
        ST_ERROR("quorum", "committed metadata up to offset %lld could not be applied",
                 (long long)(c->applied_end - 1));
    free(batches);
    free(lens);
}

static void op_leader_change(void *arg, int32_t epoch, int32_t leader) {
    st_controller_t *c = host(arg);
    pthread_mutex_lock(&c->lock);
    c->leader_id = leader;
    c->leader_epoch = epoch;
    pthread_mutex_unlock(&c->lock);
    if (leader < 0)
        ST_INFO("quorum", "metadata quorum epoch %d: no leader known", (int)epoch);
    else if (leader == c->cfg.broker->node_id)
        ST_INFO("quorum", "metadata quorum epoch %d: this node is the active controller",
                (int)epoch);
    else
        ST_INFO("quorum", "metadata quorum epoch %d: node %d is the active controller", (int)epoch,
                (int)leader);
}

/* ---- the state machine for snapshots ------------------------------------------------- */

static st_meta_image_t *sm_image(void *arg, int64_t *applied_end) {
    st_controller_t *c = arg;
    *applied_end = c->applied_end;
    return st_image_keep(c->image);
}

static void sm_load(void *arg, st_meta_image_t *img, st_raft_snapshot_id_t id) {
    st_controller_t *c = arg;
    c->applied_end = id.end_offset;
    st_ctl__publish(c, img);
}

static void on_flushed(void *arg) {
    st_controller_t *c = arg;
    pthread_mutex_lock(&c->lock);
    c->flushes++;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* ---- open / close ------------------------------------------------------------------------ */

st_err_t st_ctl__quorum_open(st_controller_t *c, char *err, size_t errlen) {
    const st_broker_config_t *b = c->cfg.broker;
    st_random_bytes(&c->rng, sizeof c->rng);
    c->rng |= 1;
    c->wait_base = -1;
    c->wait_epoch = -1;
    st_metalog_config_t mc = {
        .log = c->log, /* the metalog keeps its own reference */
        .flushed = on_flushed,
        .flushed_arg = c,
        .sync_flush = 0,
        .sm = {c, sm_image, sm_load},
        .snapshots_kept = 2,
        .host = c,
    };
    st_err_t e = st_metalog_open(&mc, &c->ml, err, errlen);
    if (e) return e;
    st_raft_qstate_t qs;
    int found = 0;
    e = st_metalog_qstate_read(c->ml, &qs, &found, err, errlen);
    if (e) return e;

    int32_t ids[ST_RAFT_MAX_VOTERS];
    int nvoters = 0;
    if (c->cfg.nvoters == 0) {
        ids[nvoters++] = b->node_id;
    } else {
        if (c->cfg.nvoters > ST_RAFT_MAX_VOTERS) {
            snprintf(err, errlen, "controller.quorum.voters: %d voters, at most %d",
                     c->cfg.nvoters, ST_RAFT_MAX_VOTERS);
            return ST_E_CONFIG;
        }
        c->peers = st_calloc((size_t)c->cfg.nvoters, sizeof *c->peers);
        for (int i = 0; i < c->cfg.nvoters; i++) {
            const st_voter_t *v = &c->cfg.voters[i];
            ids[nvoters++] = v->id;
            if (v->id == b->node_id) continue;
            peer_t *p = &c->peers[c->npeers++];
            p->id = v->id;
            snprintf(p->host, sizeof p->host, "%s", v->host);
            p->port = v->port;
        }
    }
    /* the Raft wants them ascending */
    for (int i = 1; i < nvoters; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            int32_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    memcpy(c->voter_ids, ids, sizeof ids[0] * (size_t)nvoters);
    c->nvoter_ids = nvoters;
    c->voter = 0;
    for (int i = 0; i < nvoters; i++) c->voter |= ids[i] == b->node_id;
    c->alone = c->voter && nvoters == 1;
    c->voters_checked_epoch = -1;
    if (c->npeers > 0 && !c->cfg.net) {
        snprintf(err, errlen, "a quorum of %d voters needs the network", nvoters);
        return ST_E_CONFIG;
    }
    for (int i = 0; i < c->npeers; i++) {
        peer_t *p = &c->peers[i];
        char cid[64];
        snprintf(cid, sizeof cid, "strata-raft-%d", (int)b->node_id);
        st_netclient_config_t nc = {
            .host = p->host,
            .port = p->port,
            .client_id = cid,
            .request_timeout_ms = ST_RAFT_REQUEST_TIMEOUT_MS,
            .sec = c->cfg.sec,
        };
        /* spread the peers over the loops */
        st_loop_t *loop = st_net_loop(c->cfg.net, i % st_net_nloops(c->cfg.net));
        e = st_netclient_new(loop, &nc, &p->nc, err, errlen);
        if (e) return e;
        snprintf(cid, sizeof cid, "strata-broker-%d", (int)b->node_id);
        nc.request_timeout_ms = 0; /* request.timeout.ms's default */
        e = st_netclient_new(st_net_loop(c->cfg.net, (i + 1) % st_net_nloops(c->cfg.net)), &nc,
                             &p->nc_admin, err, errlen);
        if (e) return e;
    }

    st_raft_config_t rc;
    st_raft_config_defaults(&rc);
    rc.node_id = b->node_id;
    rc.voters = ids;
    rc.nvoters = nvoters;
    rc.cluster_id = c->cluster_id;
    rc.snapshot_min_new_bytes = SNAPSHOT_MIN_NEW_BYTES;
    st_raft_ops_t ops;
    memset(&ops, 0, sizeof ops);
    st_metalog_fill_ops(c->ml, &ops);
    ops.now_ms = op_now;
    ops.random = op_random;
    ops.send = op_send;
    ops.apply = op_apply;
    ops.leader_change = op_leader_change;
    char why[512];
    e = st_raft_new(&rc, &ops, found ? &qs : NULL, &c->raft, why, sizeof why);
    if (e) {
        const char *ml_err = st_metalog_error(c->ml);
        snprintf(err, errlen, "the metadata quorum cannot start: %s", ml_err[0] ? ml_err : why);
        return e;
    }
    if (c->voter)
        ST_INFO("quorum", "node %d of a metadata quorum of %d voter%s%s", (int)b->node_id,
                nvoters, nvoters == 1 ? "" : "s", found ? " (quorum-state read)" : "");
    else
        ST_INFO("quorum", "node %d follows a metadata quorum of %d voter%s as an observer%s",
                (int)b->node_id, nvoters, nvoters == 1 ? "" : "s",
                found ? " (quorum-state read)" : "");
    /* A node restarted as the follower of the leader its quorum-state
     * names hears of no leader change while that leader stays: it is the
     * controller known from the start (Metadata's controller_id).  One
     * that led before the restart is resigned and names none. */
    int32_t leader = st_raft_leader_id(c->raft);
    if (leader >= 0 && leader != b->node_id)
        op_leader_change(ops.arg, st_raft_epoch(c->raft), leader);
    return ST_OK;
}

void st_ctl__quorum_close(st_controller_t *c) {
    /* the loops are stopped by now: nothing answers or sends any more */
    for (int i = 0; i < c->npeers; i++)
        if (c->peers[i].nc) st_netclient_destroy(c->peers[i].nc);
    for (int i = 0; i < c->npeers; i++)
        if (c->peers[i].nc_admin) st_netclient_destroy(c->peers[i].nc_admin);
    free(c->peers);
    c->peers = NULL;
    c->npeers = 0;
    if (c->raft) st_raft_destroy(c->raft);
    c->raft = NULL;
    if (c->ml) st_metalog_close(c->ml);
    c->ml = NULL;
    pthread_mutex_lock(&c->lock);
    c->thread_done = 1;
    ctl_event_t *ev = c->ev_head;
    c->ev_head = c->ev_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    while (ev) {
        ctl_event_t *next = ev->next;
        event_free(ev); /* requests among them were closed with their loops */
        ev = next;
    }
    free(c->pending);
    c->pending = NULL;
    c->npending = 0;
}

/* ---- the loop -------------------------------------------------------------------------- */

static void handle(st_controller_t *c, ctl_event_t *ev) {
    if (c->quiesced && !ev->fn) {
        if (ev->req) {
            pending_req_t p = {0, ev->from, ev->req, ev->version, ev->msg.type, 0};
            answer(c, &p, NULL);
            ev->req = NULL;
            free(ev);
        } else {
            event_free(ev);
        }
        return;
    }
    if (ev->fn) {
        ev->fn(c, ev);
        event_free(ev);
        return;
    }
    if (ev->req) {
        if (c->npending == c->cap_pending) {
            c->cap_pending = c->cap_pending ? 2 * c->cap_pending : 16;
            c->pending = st_realloc(c->pending, sizeof *c->pending * (size_t)c->cap_pending);
        }
        int32_t id = ++c->next_request_id;
        if (id <= 0) id = c->next_request_id = 1;
        c->pending[c->npending++] =
            (pending_req_t){id, ev->from, ev->req, ev->version, ev->msg.type, st_mono_ms()};
        ev->msg.request_id = id;
    }
    ST_DEBUG("quorum", "<- node %d: %s (request %d)", (int)ev->from,
             st_raft_msg_name(ev->msg.type), (int)ev->msg.request_id);
    st_raft_recv(c->raft, ev->from, &ev->msg);
    if (ev->req) {
        /* Only a Fetch may be answered later (parked on the leader); one
         * the Raft did not answer now it never will, and must not hold the
         * connection's later answers back.  A Fetch replaces the one
         * parked for the same node. */
        int32_t id = ev->msg.request_id;
        for (int i = 0; i < c->npending; i++) {
            pending_req_t *q = &c->pending[i];
            int ignored = q->request_id == id && q->type != ST_RAFT_FETCH_REQUEST;
            int replaced = q->request_id != id && ev->msg.type == ST_RAFT_FETCH_REQUEST &&
                           q->type == ST_RAFT_FETCH_REQUEST && q->from == ev->from;
            if (ignored || replaced) {
                pending_req_t p = *q;
                c->pending[i--] = c->pending[--c->npending];
                answer(c, &p, NULL);
            }
        }
        ev->req = NULL; /* not ours to free: answered or pending */
        free(ev);
        return;
    }
    event_free(ev);
}

/* One turn: wait for something (at most until the Raft's deadline and
 * until_ms), hand the Raft what arrived, tick it.  With take_job, returns a
 * job to run (or NULL); without, leaves jobs queued. */
static job_t *turn(st_controller_t *c, int take_job, int64_t until_ms) {
    pthread_mutex_lock(&c->lock);
    for (;;) {
        if (c->ev_head || c->flushes || c->stopping || (take_job && c->head)) break;
        int64_t due = c->quiesced ? -1 : st_raft_next_deadline(c->raft);
        int64_t mdue = c->quiesced ? -1 : c->members_due;
        if (mdue >= 0 && (due < 0 || mdue < due)) due = mdue;
        if (until_ms >= 0 && (due < 0 || until_ms < due)) due = until_ms;
        int64_t now = st_mono_ms();
        if (due >= 0 && due <= now) break;
        if (due < 0) {
            pthread_cond_wait(&c->cond, &c->lock);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t wait = due - now;
            ts.tv_sec += wait / 1000;
            ts.tv_nsec += (wait % 1000) * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&c->cond, &c->lock, &ts);
        }
    }
    ctl_event_t *ev = c->ev_head;
    c->ev_head = c->ev_tail = NULL;
    int flushes = c->flushes;
    c->flushes = 0;
    job_t *j = NULL;
    if (take_job && c->head) {
        j = c->head;
        c->head = j->next;
        if (!c->head) c->tail = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    while (ev) {
        ctl_event_t *next = ev->next;
        handle(c, ev);
        ev = next;
    }
    if (c->quiesced) return j;
    if (flushes) st_raft_log_flushed(c->raft);
    st_raft_tick(c->raft);
    c->members_due = st_ctl__members_tick(c);
    return j;
}

st_err_t st_ctl__quorum_catch_up(st_controller_t *c, char *err, size_t errlen) {
    if (!c->alone) return ST_OK; /* the network is not running yet */
    int64_t end = st_metalog_end_offset(c->ml);
    int64_t deadline = st_mono_ms() + COMMIT_TIMEOUT_MS;
    while (st_raft_role(c->raft) != ST_RAFT_LEADER || c->applied_end < end ||
           st_raft_high_watermark(c->raft) < 0) {
        if (st_raft_failed(c->raft)) {
            const char *ml_err = st_metalog_error(c->ml);
            snprintf(err, errlen, "the metadata log failed: %s",
                     ml_err[0] ? ml_err : st_err_msg(st_raft_failed(c->raft)));
            return st_raft_failed(c->raft);
        }
        if (st_mono_ms() > deadline) {
            snprintf(err, errlen, "the metadata log was not replayed within %d s",
                     COMMIT_TIMEOUT_MS / 1000);
            return ST_E_REQUEST_TIMED_OUT;
        }
        turn(c, 0, deadline);
    }
    return ST_OK;
}

st_err_t st_ctl__commit(st_controller_t *c, const uint8_t *batch, size_t len, int n) {
    int64_t base, t0 = st_mono_us(); /* for logger.debug=quorum.commit */
    int32_t epoch;
    if (c->quiesced) return ST_E_NOT_CONTROLLER;
    st_err_t e = st_raft_propose(c->raft, batch, (int32_t)len, n, &base, &epoch);
    if (e) return e == ST_E_NOT_LEADER_OR_FOLLOWER ? ST_E_NOT_CONTROLLER : e;
    c->wait_base = base;
    c->wait_epoch = -1;
    int64_t deadline = st_mono_ms() + COMMIT_TIMEOUT_MS;
    for (;;) {
        if (c->applied_end > base) {
            /* applied; ours only if the epoch that wrote it is ours */
            e = c->wait_epoch == epoch ? ST_OK : ST_E_NOT_CONTROLLER;
            break;
        }
        if (st_raft_failed(c->raft)) {
            e = ST_E_KAFKA_STORAGE_ERROR;
            break;
        }
        if (st_raft_epoch(c->raft) != epoch || st_raft_role(c->raft) != ST_RAFT_LEADER) {
            e = ST_E_NOT_CONTROLLER;
            break;
        }
        if (st_mono_ms() >= deadline) {
            e = ST_E_REQUEST_TIMED_OUT;
            break;
        }
        int stopping;
        pthread_mutex_lock(&c->lock);
        stopping = c->stopping;
        pthread_mutex_unlock(&c->lock);
        if (stopping) {
            e = ST_E_NOT_CONTROLLER;
            break;
        }
        turn(c, 0, deadline);
    }
    c->wait_base = -1;
    if (e) ST_WARN("quorum", "metadata batch at offset %lld not committed: %s", (long long)base,
                   st_err_msg(e));
    else ST_DEBUG("quorum.commit", "metadata batch at offset %lld (%d records) committed in "
                  "%lld us, applied in %lld us", (long long)base, n,
                  (long long)(c->wait_seen_us - t0), (long long)(st_mono_us() - t0));
    return e;
}

void *st_ctl__main(void *arg) {
    st_controller_t *c = arg;
    st_thread_set_name("controller");
    for (;;) {
        job_t *j = turn(c, 1, -1);
        if (j) {
            j->fn(c, j->arg);
            free(j);
            continue;
        }
        pthread_mutex_lock(&c->lock);
        int done = c->stopping && !c->head;
        pthread_mutex_unlock(&c->lock);
        if (done) break;
    }
    /* requests the Raft still holds (parked Fetches) are let go */
    for (int i = 0; i < c->npending; i++) answer(c, &c->pending[i], NULL);
    c->npending = 0;
    return NULL;
}

/* ---- DescribeQuorum ------------------------------------------------------------------ */

static st_quorum_replica_t *copy_replicas(const st_raft_replica_state_t *v, int n,
                                          int64_t mono_to_wall) {
    st_quorum_replica_t *out = st_calloc((size_t)n + 1, sizeof *out);
    for (int i = 0; i < n; i++) {
        out[i].replica_id = v[i].replica_id;
        out[i].log_end_offset = v[i].log_end_offset;
        out[i].last_fetch_ms =
            v[i].last_fetch_timestamp < 0 ? -1 : v[i].last_fetch_timestamp + mono_to_wall;
        out[i].last_caught_up_ms =
            v[i].last_caught_up_timestamp < 0 ? -1 : v[i].last_caught_up_timestamp + mono_to_wall;
    }
    return out;
}

st_err_t st_controller_describe_quorum(st_controller_t *c, st_quorum_desc_t *out) {
    memset(out, 0, sizeof *out);
    out->leader_id = st_raft_leader_id(c->raft);
    out->leader_epoch = st_raft_epoch(c->raft);
    out->high_watermark = st_raft_high_watermark(c->raft);
    st_raft_describe_t d;
    st_err_t e = st_raft_describe(c->raft, &d);
    if (e) return ST_E_NOT_LEADER_OR_FOLLOWER;
    /* the Raft's clock is monotonic; DescribeQuorum's times are the wall's */
    int64_t shift = st_now_ms() - st_mono_ms();
    out->leader_id = d.leader_id;
    out->leader_epoch = d.leader_epoch;
    out->high_watermark = d.high_watermark;
    out->voters = copy_replicas(d.current_voters, d.nvoters, shift);
    out->nvoters = d.nvoters;
    out->observers = copy_replicas(d.observers, d.nobservers, shift);
    out->nobservers = d.nobservers;
    return ST_OK;
}

void st_quorum_desc_fini(st_quorum_desc_t *d) {
    free(d->voters);
    free(d->observers);
    memset(d, 0, sizeof *d);
}

/* ---- forwarding to the active controller (KIP-590) ------------------------------------- */

typedef struct fwd {
    st_request_t *req;
    uint8_t *frame;
    size_t len;
    st_err_t err;
} fwd_t;

/* req's loop: answer req with what the active controller answered. */
static void fwd_answer(void *arg) {
    fwd_t *f = arg;
    st_request_t *req = f->req;
    void *body = NULL;
    int32_t corr;
    st_err_t e = f->err;
    if (!e) {
        uint8_t *copy = st_arena_alloc(&req->arena, f->len ? f->len : 1);
        memcpy(copy, f->frame, f->len);
        e = st_response_decode(req->api, req->hdr.api_version, copy, f->len, &req->arena, &corr,
                               &body);
    }
    if (e) {
        ST_WARN("controller", "%s forwarded to the active controller: %s; closing the "
                              "connection so that the client retries",
                req->api->name, st_err_msg(e));
        st_request_close_conn(req, "the active controller did not answer a forwarded request");
        st_request_no_response(req);
    } else {
        st_request_respond(req, body);
    }
    free(f->frame);
    free(f);
}

static void on_forwarded(st_netclient_t *nc, const st_netclient_resp_t *resp, void *arg) {
    (void)nc;
    fwd_t *f = arg;
    f->err = resp->err;
    if (!resp->err) {
        f->frame = st_malloc(resp->len ? resp->len : 1);
        memcpy(f->frame, resp->frame, resp->len);
        f->len = resp->len;
    }
    st_loop_post(f->req->loop, fwd_answer, f);
}

int st_controller_forward(st_controller_t *c, st_request_t *req) {
    pthread_mutex_lock(&c->lock);
    int32_t leader = c->leader_id;
    pthread_mutex_unlock(&c->lock);
    if (leader < 0 || leader == c->cfg.broker->node_id) return 0;
    peer_t *p = NULL; /* the peers are fixed once open: readable from any thread */
    for (int i = 0; i < c->npeers && !p; i++)
        if (c->peers[i].id == leader) p = &c->peers[i];
    if (!p || !p->nc_admin) return 0;
    fwd_t *f = st_calloc(1, sizeof *f);
    f->req = req;
    st_err_t e = st_netclient_send(p->nc_admin, req->api->key, req->hdr.api_version, req->body, 60000,
                                   on_forwarded, f);
    if (e) {
        free(f);
        return 0;
    }
    ST_DEBUG("controller", "%s from %s forwarded to the active controller %d", req->api->name,
             st_request_peer(req), (int)leader);
    return 1;
}

/* ---- this broker's own calls on the active controller ------------------------------------ */

/* A request of this node's (AlterPartition, AllocateProducerIds) for the
 * active controller: carried out here on the controller thread when this
 * node is it, else sent on the leader's admin client; answer() gets the
 * decoded body, or an error and NULL, once. */
typedef struct active_call active_call_t;
struct active_call {
    int16_t api, version;
    const void *q;
    /* the active controller's handling, for when it is this node; the
     * answer lives in a */
    void (*local)(st_controller_t *c, active_call_t *call, st_arena_t *a, void **resp);
    void (*answer)(active_call_t *call, st_err_t e, const void *resp);
    void *arg;
    union { /* the caller's callback, called by answer */
        st_alter_done_cb alter;
        st_pid_block_cb pids;
    } done;
    st_allocate_producer_ids_req_t pid_q;
};

static void active_call_end(active_call_t *call, st_err_t e, const void *resp) {
    call->answer(call, e, resp);
    free(call);
}

static void on_active_answer(st_netclient_t *nc, const st_netclient_resp_t *resp, void *arg) {
    (void)nc;
    active_call_t *call = arg;
    st_arena_t a;
    st_arena_init(&a, 1024);
    void *body = NULL;
    st_err_t e = resp->err ? resp->err : st_netclient_decode(resp, &a, &body);
    active_call_end(call, e, e ? NULL : body);
    st_arena_fini(&a);
}

static void active_call_job(st_controller_t *c, void *arg) {
    active_call_t *call = arg;
    if (c->quiesced) {
        /* stopping: the loops may be gone, so nothing more is sent */
        active_call_end(call, ST_E_NOT_CONTROLLER, NULL);
        return;
    }
    if (c->raft && st_raft_role(c->raft) == ST_RAFT_LEADER) {
        st_arena_t a;
        st_arena_init(&a, 1024);
        void *resp = NULL;
        call->local(c, call, &a, &resp);
        active_call_end(call, ST_OK, resp);
        st_arena_fini(&a);
        return;
    }
    int32_t leader = c->raft ? st_raft_leader_id(c->raft) : -1;
    peer_t *p = NULL;
    for (int i = 0; i < c->npeers && !p; i++)
        if (c->peers[i].id == leader) p = &c->peers[i];
    st_err_t e = p && p->nc_admin ? st_netclient_send(p->nc_admin, call->api, call->version,
                                                      call->q, 0, on_active_answer, call)
                                  : ST_E_NOT_CONTROLLER;
    if (e) active_call_end(call, e, NULL);
}

static void alter_local(st_controller_t *c, active_call_t *call, st_arena_t *a, void **resp) {
    st_alter_partition_resp_t *r = st_arena_alloc(a, sizeof *r);
    st_controller_alter_partition(c, call->version, call->q, r, a);
    *resp = r;
}

static void alter_answer(active_call_t *call, st_err_t e, const void *resp) {
    call->done.alter(call->arg, e, resp);
}

void st_controller_send_alter_partition(st_controller_t *c, const st_alter_partition_req_t *q,
                                        st_alter_done_cb done, void *arg) {
    active_call_t *call = st_calloc(1, sizeof *call);
    call->api = ST_API_ALTER_PARTITION;
    call->version = ST_ALTER_PARTITION_VERSION;
    call->q = q;
    call->local = alter_local;
    call->answer = alter_answer;
    call->done.alter = done;
    call->arg = arg;
    st_controller_submit(c, active_call_job, call);
}

static void pids_local(st_controller_t *c, active_call_t *call, st_arena_t *a, void **resp) {
    st_allocate_producer_ids_resp_t *r = st_arena_alloc(a, sizeof *r);
    st_controller_allocate_producer_ids(c, call->q, r);
    *resp = r;
}

static void pids_answer(active_call_t *call, st_err_t e, const void *resp) {
    const st_allocate_producer_ids_resp_t *r = resp;
    if (!e && r->error_code) e = st_err_from_wire(r->error_code);
    if (!e && r->producer_id_len <= 0) e = ST_E_UNKNOWN_SERVER_ERROR;
    call->done.pids(call->arg, e, e ? -1 : r->producer_id_start,
                                  e ? 0 : r->producer_id_len);
}

static void pids_job(st_controller_t *c, void *arg) {
    active_call_t *call = arg;
    /* the broker epoch is the controller thread's: read it here */
    call->pid_q.broker_id = c->cfg.broker->node_id;
    call->pid_q.broker_epoch = c->broker_epoch;
    if (c->broker_epoch < 0) {
        active_call_end(call, ST_E_COORDINATOR_NOT_AVAILABLE, NULL);
        return;
    }
    active_call_job(c, call);
}

void st_controller_send_allocate_producer_ids(st_controller_t *c, st_pid_block_cb done,
                                              void *arg) {
    active_call_t *call = st_calloc(1, sizeof *call);
    call->api = ST_API_ALLOCATE_PRODUCER_IDS;
    call->version = 0;
    call->q = &call->pid_q;
    call->local = pids_local;
    call->answer = pids_answer;
    call->done.pids = done;
    call->arg = arg;
    st_controller_submit(c, pids_job, call);
}

/* ---- stopping ------------------------------------------------------------------------- */

typedef struct stop_wait {
    int done;
} stop_wait_t;

static void shutdown_job(st_controller_t *c, void *arg) {
    stop_wait_t *w = arg;
    st_ctl__members_shutdown(c);
    /* from here on the Raft is not driven: what it holds is let go */
    pthread_mutex_lock(&c->lock);
    c->quiesced = 1;
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < c->npending; i++) answer(c, &c->pending[i], NULL);
    c->npending = 0;
    pthread_mutex_lock(&c->lock);
    w->done = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

void st_controller_stop(st_controller_t *c) {
    if (!c || !c->started) return;
    stop_wait_t w = {0};
    st_controller_submit(c, shutdown_job, &w);
    pthread_mutex_lock(&c->lock);
    while (!w.done) pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

/* Pumps the Raft and the events (not jobs) until done(c) or ms pass. */
void st_ctl__pump_until(st_controller_t *c, int (*done)(st_controller_t *), int64_t ms) {
    int64_t deadline = st_mono_ms() + ms;
    while (!done(c) && st_mono_ms() < deadline) turn(c, 0, deadline);
}

/* ---- an operation of this node's own, carried out by the active controller ------------ */

struct fwd_create {
    int done;
    st_err_t err;
    st_op_result_t *res;
};

static void on_created(st_controller_t *c, ctl_event_t *ev) {
    fwd_create_t *f = c->fwd_create;
    if (!f) return;
    const st_create_topics_resp_t *r = ev->body;
    f->done = 1;
    if (ev->err || !r || r->topics.n < 1) {
        f->err = ev->err ? ev->err : ST_E_UNKNOWN_SERVER_ERROR;
        return;
    }
    const st_create_topics_result_t *t = &r->topics.v[0];
    f->res->error = st_err_from_wire(t->error_code);
    if (t->error_message.len > 0)
        snprintf(f->res->message, sizeof f->res->message, "%.*s", (int)t->error_message.len,
                 t->error_message.p);
    f->res->topic_id = t->topic_id;
    f->res->num_partitions = t->num_partitions;
    f->res->replication_factor = t->replication_factor;
}

static int created(st_controller_t *c) { return c->fwd_create->done; }

st_err_t st_ctl__forward_create(st_controller_t *c, const st_new_topic_t *t, int validate_only,
                                st_op_result_t *res) {
    if (!c->raft || c->npeers == 0 || c->quiesced || st_raft_role(c->raft) == ST_RAFT_LEADER)
        return ST_E_NOT_FOUND;
    int32_t leader = st_raft_leader_id(c->raft);
    if (leader < 0) return ST_E_NOT_FOUND;
    st_arena_t a;
    st_arena_init(&a, 1024);
    st_create_topics_req_t q;
    st_schema_defaults(&st_create_topics_req_schema, &q);
    ST_ARRAY_ALLOC(q.topics, &a, 1);
    st_create_topics_topic_t *qt = &q.topics.v[0];
    st_schema_defaults(&st_create_topics_topic_schema, qt);
    qt->name = (st_str_t){t->name, (int32_t)t->name_len};
    qt->num_partitions = t->nassignments > 0 ? -1 : t->num_partitions;
    qt->replication_factor = t->nassignments > 0 ? -1 : t->replication_factor;
    ST_ARRAY_ALLOC(qt->assignments, &a, t->nassignments);
    for (int i = 0; i < t->nassignments; i++) {
        qt->assignments.v[i].partition_index = i;
        qt->assignments.v[i].broker_ids.v = (int32_t *)t->assignments[i];
        qt->assignments.v[i].broker_ids.n = t->assignment_sizes[i];
    }
    ST_ARRAY_ALLOC(qt->configs, &a, t->nconfigs);
    for (int i = 0; i < t->nconfigs; i++) {
        qt->configs.v[i].name = st_str(t->configs[i].name);
        qt->configs.v[i].value = t->configs[i].value ? st_str(t->configs[i].value) : ST_STR_NULL;
    }
    q.timeout_ms = COMMIT_TIMEOUT_MS;
    q.validate_only = (int8_t)validate_only;
    fwd_create_t f = {0, ST_OK, res};
    memset(res, 0, sizeof *res);
    c->fwd_create = &f;
    st_err_t e = st_ctl__send(c, leader, ST_API_CREATE_TOPICS, 5, &q, on_created);
    st_arena_fini(&a);
    if (!e) st_ctl__pump_until(c, created, COMMIT_TIMEOUT_MS + 5000);
    c->fwd_create = NULL;
    if (e || !f.done || f.err) {
        res->error = ST_E_NOT_CONTROLLER;
        snprintf(res->message, sizeof res->message,
                 "the active controller %d did not answer the creation of %.*s (%s)", (int)leader,
                 (int)t->name_len, t->name, st_err_msg(e ? e : f.done ? f.err : ST_E_REQUEST_TIMED_OUT));
    }
    return ST_OK;
}

/*
 * brokers.c - brokers as members of the cluster (KRaft's broker lifecycle):
 * registration with the active controller, heartbeats, fencing.
 *
 * Every node is a broker.  At start it has an incarnation id (random) and
 * no broker epoch; once a controller leads it sends BrokerRegistration
 * (id, incarnation, listeners, rack) and learns its broker epoch (the
 * offset of the RegisterBrokerRecord), then heartbeats every
 * broker.heartbeat.interval.ms with the offset it has applied.  When the
 * active controller is this node, the same happens without a network hop.
 *
 * The active controller (controller thread, role LEADER):
 *   - registers a broker fenced; an id registered with another incarnation
 *     that is still heartbeating is refused DUPLICATE_BROKER_REGISTRATION;
 *   - unfences a broker whose heartbeat shows it has applied its own
 *     registration (caught up), electing it where a partition has no
 *     leader and it is in the ISR;
 *   - fences a broker not heard from for broker.session.timeout.ms: a
 *     FenceBrokerRecord and, for every partition it is in the ISR of, a
 *     PartitionChangeRecord that takes it out of the ISR (the last member
 *     too: it becomes an eligible leader replica) and, where it led,
 *     elects another (elect.c: from the ISR, else the ELR, else none);
 *   - takes a broker that registers again after an unclean stop out of
 *     every ISR and ELR in the batch of its registration.
 * Heartbeat times live in the leader's memory only: a new leader starts
 * every broker's clock at its election, as Kafka's does.
 */
#include "controller_int.h"

#include <stdlib.h>

#define RETRY_MS 500

static int32_t self_id(const st_controller_t *c) { return c->cfg.broker->node_id; }

static int leads(st_controller_t *c) {
    return c->raft && st_raft_role(c->raft) == ST_RAFT_LEADER;
}

void st_ctl__members_init(st_controller_t *c) {
    st_random_bytes(&c->incarnation, sizeof c->incarnation);
    c->broker_epoch = -1;
    c->hbs_epoch = -1;
    c->members_due = -1;
}

void st_ctl__members_fini(st_controller_t *c) {
    free(c->hbs);
    c->hbs = NULL;
    c->nhbs = 0;
}

static struct hb *hb_of(st_controller_t *c, int32_t id, int add) {
    for (int i = 0; i < c->nhbs; i++)
        if (c->hbs[i].id == id) return &c->hbs[i];
    if (!add) return NULL;
    c->hbs = st_realloc(c->hbs, sizeof *c->hbs * (size_t)(c->nhbs + 1));
    c->hbs[c->nhbs] = (struct hb){id, st_mono_ms(), 0};
    return &c->hbs[c->nhbs++];
}

/* ---- the records a registration writes ---------------------------------------------- */

/* A new incarnation of broker id.  Unless it stopped cleanly at the
 * broker epoch it registered last (previous_epoch, from its clean-shutdown
 * marker; -1: none), it may have lost what it had not flushed, so the
 * same batch takes it out of every ISR and ELR (KIP-966); it is then
 * registered fenced, so that it leads again only once unfenced. */
static st_err_t write_registration(st_controller_t *c, int32_t id, const st_uuid_t *incarnation,
                                   const st_mrec_endpoint_t *eps, int neps, st_str_t rack,
                                   int fenced, int64_t previous_epoch, int64_t *epoch_out) {
    const st_meta_broker_t *old = st_image_broker(c->image, id);
    int64_t old_epoch = old ? old->epoch : -1; /* the commit replaces the image old is in */
    st_ctl_changes_t ch = {0};
    if (!old || previous_epoch < 0 || previous_epoch != old_epoch)
        st_ctl__broker_changes(c, c->image, ST_CTL_IN_ISR_OR_ELR, id, -1, -1, id, &ch);
    if (ch.n > 0) fenced = 1;
    st_mrec_register_broker_t r;
    st_schema_defaults(&st_mrec_register_broker_schema, &r);
    r.broker_id = id;
    r.incarnation_id = *incarnation;
    /* the broker epoch is the offset of its registration (Kafka's rule):
     * the leader proposes one batch at a time, so it is the log end */
    r.broker_epoch = st_ctl__next_offset(c);
    r.endpoints.v = (st_mrec_endpoint_t *)eps;
    r.endpoints.n = neps;
    r.features.n = 0;
    r.rack = rack;
    r.fenced = (int8_t)fenced;
    st_ctl_rec_t rec = {ST_MREC_REGISTER_BROKER, &r};
    st_err_t e = st_ctl__commit_changes(c, &rec, &ch);
    if (!e) {
        *epoch_out = r.broker_epoch;
        hb_of(c, id, 1)->last_ms = st_mono_ms();
        ST_INFO("controller", "broker %d registered with broker epoch %lld%s", (int)id,
                (long long)r.broker_epoch, fenced ? " (fenced until it catches up)" : "");
        if (ch.n > 0)
            ST_INFO("controller", "broker %d did not stop cleanly at broker epoch %lld: %d "
                                  "partition%s changed (it left their ISR and ELR, or leads "
                                  "at a new epoch where it is the only in-sync replica)",
                    (int)id, (long long)old_epoch, ch.n, ch.n == 1 ? "" : "s");
    }
    st_ctl__changes_fini(&ch);
    return e;
}

static st_err_t write_fencing(st_controller_t *c, int32_t id, int fence) {
    const st_meta_broker_t *b = st_image_broker(c->image, id);
    if (!b || b->fenced == fence) return ST_OK;
    st_mrec_fence_t f = {id, b->epoch};
    st_ctl_changes_t ch = {0};
    if (fence) st_ctl__broker_changes(c, c->image, ST_CTL_IN_ISR, id, id, -1, -1, &ch);
    else st_ctl__broker_changes(c, c->image, ST_CTL_LEADERLESS, id, -1, id, -1, &ch);
    st_ctl_rec_t rec = {fence ? ST_MREC_FENCE_BROKER : ST_MREC_UNFENCE_BROKER, &f};
    st_err_t e = st_ctl__commit_changes(c, &rec, &ch);
    if (!e)
        ST_INFO("controller", "broker %d %s; %d partition%s changed leader or ISR", (int)id,
                fence ? "fenced (no heartbeat within broker.session.timeout.ms)" : "unfenced",
                ch.n, ch.n == 1 ? "" : "s");
    st_ctl__changes_fini(&ch);
    return e;
}

/* ---- the active controller's side ----------------------------------------------------- */

void st_controller_broker_registration(st_controller_t *c, const st_broker_registration_req_t *q,
                                       st_broker_registration_resp_t *r) {
    st_schema_defaults(&st_broker_registration_resp_schema, r);
    r->broker_epoch = -1;
    st_err_t e = ST_OK;
    if (!leads(c)) {
        e = ST_E_NOT_CONTROLLER;
    } else if (!st_str_eq(q->cluster_id, c->cluster_id)) {
        ST_WARN("controller", "broker %d of cluster %.*s refused: this is cluster %s",
                (int)q->broker_id, (int)ST_MAX(q->cluster_id.len, 0), q->cluster_id.p,
                c->cluster_id);
        e = ST_E_INCONSISTENT_CLUSTER_ID;
    } else {
        const st_meta_broker_t *b = st_image_broker(c->image, q->broker_id);
        struct hb *h = hb_of(c, q->broker_id, 0);
        int same = b && !memcmp(b->incarnation.b, q->incarnation_id.b, 16);
        /* Kafka's hasValidSession: a fenced broker (one that finished a
         * controlled shutdown, or missed its heartbeats) holds no session,
         * so its next incarnation registers at once */
        int live = b && !b->fenced && h &&
                   st_mono_ms() - h->last_ms < c->cfg.broker->broker_session_timeout_ms;
        if (same) {
            r->broker_epoch = b->epoch; /* a retry of a registration that was written */
        } else if (live) {
            ST_WARN("controller", "a second broker %d (another incarnation) refused: broker %d "
                                  "is registered and heartbeating",
                    (int)q->broker_id, (int)q->broker_id);
            e = ST_E_DUPLICATE_BROKER_REGISTRATION;
        } else {
            st_mrec_endpoint_t *eps = st_calloc((size_t)q->listeners.n + 1, sizeof *eps);
            for (int i = 0; i < q->listeners.n; i++) {
                eps[i].name = q->listeners.v[i].name;
                eps[i].host = q->listeners.v[i].host;
                eps[i].port = q->listeners.v[i].port;
                eps[i].security_protocol = q->listeners.v[i].security_protocol;
            }
            e = write_registration(c, q->broker_id, &q->incarnation_id, eps, q->listeners.n,
                                   q->rack, 1, q->previous_broker_epoch, &r->broker_epoch);
            free(eps);
        }
    }
    r->error_code = st_err_wire(e);
}

void st_controller_broker_heartbeat(st_controller_t *c, const st_broker_heartbeat_req_t *q,
                                    st_broker_heartbeat_resp_t *r) {
    st_schema_defaults(&st_broker_heartbeat_resp_schema, r);
    st_err_t e = ST_OK;
    const st_meta_broker_t *b = st_image_broker(c->image, q->broker_id);
    if (!leads(c)) e = ST_E_NOT_CONTROLLER;
    else if (!b) e = ST_E_BROKER_ID_NOT_REGISTERED;
    else if (b->epoch != q->broker_epoch) e = ST_E_STALE_BROKER_EPOCH;
    if (!e) {
        struct hb *h = hb_of(c, q->broker_id, 1);
        h->last_ms = st_mono_ms();
        int caught_up = q->current_metadata_offset >= b->epoch;
        if (q->want_shut_down) {
            /* controlled shutdown: its partitions get other leaders first */
            e = write_fencing(c, q->broker_id, 1);
            if (!e) ST_INFO("controller", "broker %d is shutting down: its partition leaders "
                                          "moved away",
                            (int)q->broker_id);
            r->should_shut_down = (int8_t)(e == ST_OK);
        } else if (b->fenced && caught_up && !q->want_fence) {
            e = write_fencing(c, q->broker_id, 0);
        }
        b = st_image_broker(c->image, q->broker_id);
        r->is_caught_up = (int8_t)caught_up;
        r->is_fenced = (int8_t)(b ? b->fenced : 1);
    }
    r->error_code = st_err_wire(e);
}

/* ---- jobs the tick queues (they commit, so they run as jobs) ---------------------------- */

void st_ctl__register_self(st_controller_t *c) {
    if (c->broker_epoch >= 0 || !leads(c) || !c->cfg.broker_role) return;
    const st_broker_config_t *b = c->cfg.broker;
    const st_meta_broker_t *mine = st_image_broker(c->image, b->node_id);
    if (mine && !memcmp(mine->incarnation.b, c->incarnation.b, 16)) {
        c->broker_epoch = mine->epoch;
        return;
    }
    st_mrec_endpoint_t *eps = st_calloc((size_t)c->cfg.nadvertised + 1, sizeof *eps);
    for (int i = 0; i < c->cfg.nadvertised; i++) {
        eps[i].name = st_str(c->cfg.advertised[i].name);
        eps[i].host = st_str(c->cfg.advertised[i].host);
        eps[i].port = (uint16_t)c->cfg.advertised[i].port;
        eps[i].security_protocol = 0; /* PLAINTEXT */
    }
    int64_t epoch;
    /* the leader has applied everything it committed: caught up, unfenced */
    if (write_registration(c, b->node_id, &c->incarnation, eps, c->cfg.nadvertised,
                           *b->broker_rack ? st_str(b->broker_rack) : ST_STR_NULL, 0,
                           c->previous_broker_epoch, &epoch) == ST_OK)
        c->broker_epoch = epoch;
    free(eps);
}

static void register_self_job(st_controller_t *c, void *arg) {
    (void)arg;
    c->self_reg_queued = 0;
    st_ctl__register_self(c);
}

typedef struct fence_arg {
    int32_t id;
} fence_arg_t;

static void fence_job(st_controller_t *c, void *arg) {
    fence_arg_t *f = arg;
    struct hb *h = hb_of(c, f->id, 0);
    if (h) h->fence_queued = 0;
    /* still silent, still leading? */
    if (leads(c) && h && st_mono_ms() - h->last_ms >= c->cfg.broker->broker_session_timeout_ms)
        write_fencing(c, f->id, 1);
    free(f);
}

static void unfence_self_job(st_controller_t *c, void *arg) {
    (void)arg;
    c->self_reg_queued = 0;
    if (leads(c)) write_fencing(c, self_id(c), 0);
}

/* ---- this node as a broker ----------------------------------------------------------- */

static void on_registered(st_controller_t *c, ctl_event_t *ev) {
    c->reg_in_flight = 0;
    const st_broker_registration_resp_t *r = ev->body;
    st_err_t e = ev->err ? ev->err : (r && r->error_code ? st_err_from_wire(r->error_code) : ST_OK);
    if (e) {
        if (e == ST_E_DUPLICATE_BROKER_REGISTRATION || e == ST_E_INCONSISTENT_CLUSTER_ID)
            ST_ERROR("controller", "node %d cannot register with the active controller %d: %s",
                     (int)self_id(c), (int)ev->from, st_err_msg(e));
        else
            ST_DEBUG("controller", "registration with node %d: %s", (int)ev->from,
                     st_err_msg(e));
        c->next_reg_ms = st_mono_ms() + RETRY_MS;
        return;
    }
    c->broker_epoch = r->broker_epoch;
    c->next_hb_ms = st_mono_ms();
    ST_INFO("controller", "registered with the active controller %d: broker epoch %lld",
            (int)ev->from, (long long)c->broker_epoch);
}

static void on_heartbeat(st_controller_t *c, ctl_event_t *ev) {
    c->hb_in_flight = 0;
    const st_broker_heartbeat_resp_t *r = ev->body;
    st_err_t e = ev->err ? ev->err : (r && r->error_code ? st_err_from_wire(r->error_code) : ST_OK);
    if (e == ST_E_STALE_BROKER_EPOCH || e == ST_E_BROKER_ID_NOT_REGISTERED) {
        ST_INFO("controller", "the active controller %d does not know broker epoch %lld (%s): "
                              "registering again",
                (int)ev->from, (long long)c->broker_epoch, st_err_msg(e));
        c->broker_epoch = -1;
        c->next_reg_ms = st_mono_ms();
    } else if (e) {
        ST_DEBUG("controller", "heartbeat to node %d: %s", (int)ev->from, st_err_msg(e));
        c->next_hb_ms = st_mono_ms() + RETRY_MS;
    }
}

static void send_registration(st_controller_t *c, int32_t leader) {
    const st_broker_config_t *b = c->cfg.broker;
    st_broker_registration_req_t q;
    st_schema_defaults(&st_broker_registration_req_schema, &q);
    q.broker_id = b->node_id;
    q.cluster_id = st_str(c->cluster_id);
    q.incarnation_id = c->incarnation;
    st_broker_reg_listener_t ls[16];
    int n = ST_MIN(c->cfg.nadvertised, 16);
    for (int i = 0; i < n; i++) {
        ls[i].name = st_str(c->cfg.advertised[i].name);
        ls[i].host = st_str(c->cfg.advertised[i].host);
        ls[i].port = (uint16_t)c->cfg.advertised[i].port;
        ls[i].security_protocol = 0;
    }
    q.listeners.v = ls;
    q.listeners.n = n;
    q.features.n = 0;
    q.rack = *b->broker_rack ? st_str(b->broker_rack) : ST_STR_NULL;
    q.log_dirs.n = 0;
    q.previous_broker_epoch = c->previous_broker_epoch;
    if (st_ctl__send(c, leader, ST_API_BROKER_REGISTRATION, 3, &q, on_registered) == ST_OK)
        c->reg_in_flight = 1;
    else
        c->next_reg_ms = st_mono_ms() + RETRY_MS;
}

static void send_heartbeat(st_controller_t *c, int32_t leader) {
    st_broker_heartbeat_req_t q;
    st_schema_defaults(&st_broker_heartbeat_req_schema, &q);
    q.broker_id = self_id(c);
    q.broker_epoch = c->broker_epoch;
    q.current_metadata_offset = c->applied_end - 1;
    if (st_ctl__send(c, leader, ST_API_BROKER_HEARTBEAT, 0, &q, on_heartbeat) == ST_OK)
        c->hb_in_flight = 1;
    c->next_hb_ms = st_mono_ms() + c->cfg.broker->broker_heartbeat_interval_ms;
}

static void rebalance_job(st_controller_t *c, void *arg);

static int64_t earliest(int64_t a, int64_t b) { return a < 0 ? b : b < 0 ? a : ST_MIN(a, b); }

int64_t st_ctl__members_tick(st_controller_t *c) {
    if (!c->raft) return -1;
    if (c->quiesced || c->shutdown_acked) return -1;
    int32_t leader = st_raft_leader_id(c->raft);
    int64_t now = st_mono_ms(), due = -1;
    if (leader < 0) return -1;
    if (leader != self_id(c)) {
        c->hbs_epoch = -1; /* a new term as leader starts the clocks again */
        if (!c->cfg.broker_role) return -1; /* a controller-only node never registers */
        if (c->broker_epoch < 0) {
            if (!c->reg_in_flight && now >= c->next_reg_ms) send_registration(c, leader);
            if (!c->reg_in_flight) due = c->next_reg_ms;
        } else {
            if (!c->hb_in_flight && now >= c->next_hb_ms) send_heartbeat(c, leader);
            if (!c->hb_in_flight) due = c->next_hb_ms;
        }
        return due;
    }
    if (!leads(c)) return -1;
    /* the active controller */
    if (c->hbs_epoch != st_raft_epoch(c->raft)) {
        c->hbs_epoch = st_raft_epoch(c->raft);
        for (int i = 0; i < c->image->nbrokers; i++) hb_of(c, c->image->brokers[i].id, 1);
        for (int i = 0; i < c->nhbs; i++) c->hbs[i].last_ms = now;
    }
    if (c->cfg.broker_role && c->broker_epoch < 0 && !c->self_reg_queued) {
        c->self_reg_queued = 1;
        st_controller_submit(c, register_self_job, NULL);
    }
    if (c->cfg.broker_role && c->broker_epoch >= 0) {
        hb_of(c, self_id(c), 1)->last_ms = now;
        const st_meta_broker_t *me = st_image_broker(c->image, self_id(c));
        if (me && me->fenced && me->epoch == c->broker_epoch && !c->self_reg_queued) {
            c->self_reg_queued = 1; /* reused: one job at a time */
            st_controller_submit(c, unfence_self_job, NULL);
        }
    }
    if (c->cfg.broker->auto_leader_rebalance_enable) {
        int64_t every = c->cfg.broker->leader_imbalance_check_interval_seconds * 1000;
        if (c->next_rebalance_ms == 0) c->next_rebalance_ms = now + every;
        if (now >= c->next_rebalance_ms) {
            c->next_rebalance_ms = now + every;
            st_controller_submit(c, rebalance_job, NULL);
        }
        due = earliest(due, c->next_rebalance_ms);
    }
    if (now >= c->next_fence_check_ms) {
        c->next_fence_check_ms = now + 500;
        for (int i = 0; i < c->image->nbrokers; i++) {
            const st_meta_broker_t *b = &c->image->brokers[i];
            if (b->fenced || b->id == self_id(c)) continue;
            struct hb *h = hb_of(c, b->id, 1);
            if (h->fence_queued || now - h->last_ms < c->cfg.broker->broker_session_timeout_ms)
                continue;
            h->fence_queued = 1;
            fence_arg_t *f = st_malloc(sizeof *f);
            f->id = b->id;
            st_controller_submit(c, fence_job, f);
        }
    }
    return earliest(due, c->next_fence_check_ms);
}

/* ---- controlled shutdown ----------------------------------------------------------------- */

static void on_shutdown_heartbeat(st_controller_t *c, ctl_event_t *ev) {
    c->hb_in_flight = 0;
    const st_broker_heartbeat_resp_t *r = ev->body;
    c->shutdown_acked = !ev->err && r && !r->error_code && r->should_shut_down ? 1 : -1;
}

static int shutdown_answered(st_controller_t *c) { return c->shutdown_acked != 0; }
static int not_leading(st_controller_t *c) { return !leads(c); }

void st_ctl__members_shutdown(st_controller_t *c) {
    if (c->alone || !c->raft) return; /* alone: nobody to hand anything to */
    if (!c->cfg.broker_role) { /* a controller-only node: no partitions to move */
        if (leads(c) && st_raft_resign(c->raft) == ST_OK) {
            ST_INFO("quorum", "resigned as the active controller (EndQuorumEpoch sent)");
            st_ctl__pump_until(c, not_leading, 500);
        }
        return;
    }
    if (leads(c)) {
        if (c->broker_epoch >= 0 && write_fencing(c, self_id(c), 1) == ST_OK)
            ST_INFO("controller", "controlled shutdown: this broker's partition leaders moved "
                                  "away");
        c->shutdown_acked = 1;
        if (st_raft_resign(c->raft) == ST_OK) {
            ST_INFO("quorum", "resigned as the active controller (EndQuorumEpoch sent)");
            st_ctl__pump_until(c, not_leading, 500);
        }
        return;
    }
    int32_t leader = st_raft_leader_id(c->raft);
    if (leader < 0 || c->broker_epoch < 0) return;
    st_broker_heartbeat_req_t q;
    st_schema_defaults(&st_broker_heartbeat_req_schema, &q);
    q.broker_id = self_id(c);
    q.broker_epoch = c->broker_epoch;
    q.current_metadata_offset = c->applied_end - 1;
    q.want_shut_down = 1;
    c->shutdown_acked = 0;
    if (st_ctl__send(c, leader, ST_API_BROKER_HEARTBEAT, 0, &q, on_shutdown_heartbeat) != ST_OK)
        return;
    st_ctl__pump_until(c, shutdown_answered, 5000);
    if (c->shutdown_acked > 0)
        ST_INFO("controller", "controlled shutdown: the active controller %d moved this broker's "
                              "partition leaders away",
                (int)leader);
    else
        ST_WARN("controller", "controlled shutdown: no answer from the active controller %d; "
                              "stopping anyway",
                (int)leader);
}

/* ---- leader elections on request (ElectLeaders) and preferred-leader rebalance ------------ */

/* The change a preferred (unclean = 0) or unclean election makes to mp, in
 * *ch; the reason when none. */
static st_err_t elect_one(st_controller_t *c, const st_meta_topic_t *t,
                          const st_meta_partition_t *mp, int unclean, st_ctl_changes_t *ch, char *msg,
                          size_t msglen) {
    const st_meta_image_t *img = c->image;
    if (!unclean) {
        int32_t pref = mp->nreplicas > 0 ? mp->replicas[0] : -1;
        if (pref == mp->leader) {
            snprintf(msg, msglen, "Leader election not needed for topic partition.");
            return ST_E_ELECTION_NOT_NEEDED;
        }
        int in_isr = 0;
        for (int k = 0; k < mp->nisr; k++) in_isr |= mp->isr[k] == pref;
        if (pref < 0 || !in_isr || !st_ctl__live(img, pref)) {
            snprintf(msg, msglen, "Failed to elect leader: the preferred replica %d is not live "
                                  "and in the ISR.",
                     (int)pref);
            return ST_E_PREFERRED_LEADER_NOT_AVAILABLE;
        }
        st_ctl__changes_add(ch, t, mp, pref, NULL, 0);
        return ST_OK;
    }
    if (mp->leader >= 0) {
        snprintf(msg, msglen, "Leader election not needed for topic partition.");
        return ST_E_ELECTION_NOT_NEEDED;
    }
    for (int r = 0; r < mp->nreplicas; r++)
        if (st_ctl__live(img, mp->replicas[r])) {
            int32_t leader = mp->replicas[r];
            st_ctl__changes_add(ch, t, mp, leader, &leader, 1); /* an unclean leader is the whole ISR */
            return ST_OK;
        }
    snprintf(msg, msglen, "Failed to elect leader: no replica is live.");
    return ST_E_ELIGIBLE_LEADERS_NOT_AVAILABLE;
}

void st_controller_elect_leaders(st_controller_t *c, int election_type, st_elect_request_t *parts,
                                 int nparts) {
    st_ctl_changes_t ch = {0};
    const st_meta_image_t *img = c->image;
    st_err_t e = !leads(c) ? ST_E_NOT_CONTROLLER : election_type == 0 || election_type == 1 ? ST_OK
                                                                                         : ST_E_INVALID_REQUEST;
    for (int i = 0; i < nparts; i++) {
        st_elect_request_t *p = &parts[i];
        p->changed = -1;
        if (e) {
            p->error = e;
            snprintf(p->message, sizeof p->message, "%s", e == ST_E_INVALID_REQUEST
                                                            ? "Unknown election type."
                                                            : "This node is not the controller.");
            continue;
        }
        const st_meta_topic_t *t = st_image_topic(img, p->topic, p->topic_len);
        if (!t || p->partition < 0 || p->partition >= t->nparts) {
            p->error = ST_E_UNKNOWN_TOPIC_OR_PARTITION;
            snprintf(p->message, sizeof p->message, "The partition does not exist.");
            continue;
        }
        int before = ch.n;
        p->error = elect_one(c, t, &t->parts[p->partition], election_type, &ch, p->message,
                             sizeof p->message);
        if (ch.n > before) p->changed = before;
    }
    if (ch.n > 0) {
        st_err_t ce = st_ctl__commit_changes(c, NULL, &ch);
        if (ce)
            for (int i = 0; i < nparts; i++)
                if (parts[i].changed >= 0) {
                    parts[i].error = ce;
                    snprintf(parts[i].message, sizeof parts[i].message,
                             "the election was not committed: %s", st_err_msg(ce));
                }
        if (!ce)
            ST_INFO("controller", "%s election: %d partition%s got a new leader",
                    election_type ? "unclean" : "preferred", ch.n, ch.n == 1 ? "" : "s");
    }
    st_ctl__changes_fini(&ch);
}

/* auto.leader.rebalance.enable: a broker that is the preferred replica of P
 * partitions and leads fewer than P minus the allowed share gets them back
 * (Kafka's leader.imbalance.per.broker.percentage). */
static void rebalance_job(st_controller_t *c, void *arg) {
    (void)arg;
    if (!leads(c)) return;
    const st_meta_image_t *img = c->image;
    const st_broker_config_t *b = c->cfg.broker;
    st_ctl_changes_t ch = {0};
    for (int bi = 0; bi < img->nbrokers; bi++) {
        const st_meta_broker_t *br = &img->brokers[bi];
        if (br->fenced) continue;
        int64_t preferred = 0, elsewhere = 0;
        for (int ti = 0; ti < img->ntopics; ti++)
            for (int pi = 0; pi < img->topics[ti]->nparts; pi++) {
                const st_meta_partition_t *mp = &img->topics[ti]->parts[pi];
                if (mp->nreplicas == 0 || mp->replicas[0] != br->id) continue;
                preferred++;
                elsewhere += mp->leader != br->id;
            }
        if (preferred == 0 || elsewhere * 100 <= preferred * b->leader_imbalance_per_broker_percentage)
            continue;
        for (int ti = 0; ti < img->ntopics; ti++)
            for (int pi = 0; pi < img->topics[ti]->nparts; pi++) {
                const st_meta_partition_t *mp = &img->topics[ti]->parts[pi];
                if (mp->nreplicas == 0 || mp->replicas[0] != br->id || mp->leader == br->id)
                    continue;
                char msg[160];
                elect_one(c, img->topics[ti], mp, 0, &ch, msg, sizeof msg);
            }
    }
    if (ch.n > 0) {
        if (st_ctl__commit_changes(c, NULL, &ch) == ST_OK)
            ST_INFO("controller", "leader rebalance: %d partition%s back on their preferred "
                                  "replica",
                    ch.n, ch.n == 1 ? "" : "s");
    }
    st_ctl__changes_fini(&ch);
}

/* ---- AlterPartition: a leader's ISR change ------------------------------------------------ */

/* One partition of an AlterPartition, checked in the order Kafka's
 * ReplicationControlManager checks it: epochs ahead of this node's mean
 * this node is behind (NOT_CONTROLLER, the leader looks again); only the
 * leader at the current leader epoch may change the ISR, from the
 * partition epoch it last saw, to replicas of the partition that are
 * registered and not fenced, with itself in it. */
static st_err_t alter_one(st_controller_t *c, int version, int32_t broker, const st_meta_topic_t *t,
                          const st_alter_partition_req_part_t *qp, const int32_t *isr, int nisr,
                          st_ctl_changes_t *ch) {
    const st_meta_image_t *img = c->image;
    if (!t || qp->partition_index < 0 || qp->partition_index >= t->nparts)
        return ST_E_UNKNOWN_TOPIC_OR_PARTITION;
    const st_meta_partition_t *mp = &t->parts[qp->partition_index];
    if (qp->leader_epoch > mp->leader_epoch || qp->partition_epoch > mp->partition_epoch)
        return ST_E_NOT_CONTROLLER;
    if (qp->leader_epoch < mp->leader_epoch) return ST_E_FENCED_LEADER_EPOCH;
    if (mp->leader != broker) return ST_E_INVALID_REQUEST;
    if (qp->partition_epoch < mp->partition_epoch) return ST_E_INVALID_UPDATE_VERSION;
    if (nisr < 1 || !st_ctl__has(isr, nisr, broker)) return ST_E_INVALID_REQUEST;
    for (int i = 0; i < nisr; i++)
        if (!st_ctl__has(mp->replicas, mp->nreplicas, isr[i]) || st_ctl__has(isr, i, isr[i]))
            return ST_E_INVALID_REQUEST;
    for (int i = 0; i < nisr; i++)
        if (!st_ctl__live(img, isr[i])) {
            ST_LOG_RATELIMITED(ST_LOG_INFO, "controller", 5000,
                               "AlterPartition from broker %d for %s-%d: replica %d is fenced or "
                               "not registered", (int)broker, t->name, (int)mp->id, (int)isr[i]);
            return version > 1 ? ST_E_INELIGIBLE_REPLICA : ST_E_OPERATION_NOT_ATTEMPTED;
        }
    int same = nisr == mp->nisr;
    for (int i = 0; i < nisr && same; i++) same = st_ctl__has(mp->isr, mp->nisr, isr[i]);
    if (!same) st_ctl__isr_change(ch, img, t, mp, isr, nisr);
    return ST_OK;
}

void st_controller_alter_partition(st_controller_t *c, int version,
                                   const st_alter_partition_req_t *q, st_alter_partition_resp_t *r,
                                   st_arena_t *a) {
    st_schema_defaults(&st_alter_partition_resp_schema, r);
    ST_ARRAY_ALLOC(r->topics, a, q->topics.n);
    st_ctl_changes_t ch = {0};
    st_err_t whole = !leads(c) ? ST_E_NOT_CONTROLLER : ST_OK;
    const st_meta_broker_t *b = st_image_broker(c->image, q->broker_id);
    if (!whole && (!b || (q->broker_epoch >= 0 && q->broker_epoch != b->epoch)))
        whole = ST_E_STALE_BROKER_EPOCH;
    if (whole) {
        r->error_code = st_err_wire(whole);
        r->topics.n = 0;
        return;
    }
    /* each partition's answer; -1 until the batch is committed */
    int n = 0;
    for (int i = 0; i < q->topics.n; i++) n += q->topics.v[i].partitions.n;
    int *change_of = st_malloc(sizeof(int) * (size_t)(n + 1));
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        const st_alter_partition_req_topic_t *qt = &q->topics.v[i];
        st_alter_partition_resp_topic_t *rt = &r->topics.v[i];
        st_schema_defaults(&st_alter_partition_resp_topic_schema, rt);
        rt->topic_name = qt->topic_name;
        rt->topic_id = qt->topic_id;
        ST_ARRAY_ALLOC(rt->partitions, a, qt->partitions.n);
        const st_meta_topic_t *t = version >= 2 ? st_image_topic_by_id(c->image, &qt->topic_id)
                                                : st_image_topic(c->image, qt->topic_name.p,
                                                                 (size_t)ST_MAX(qt->topic_name.len, 0));
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            const st_alter_partition_req_part_t *qp = &qt->partitions.v[j];
            st_alter_partition_resp_part_t *rp = &rt->partitions.v[j];
            st_schema_defaults(&st_alter_partition_resp_part_schema, rp);
            rp->partition_index = qp->partition_index;
            int nisr = version >= 3 ? qp->new_isr_with_epochs.n : qp->new_isr.n;
            int32_t *isr = st_arena_alloc(a, sizeof(int32_t) * (size_t)(nisr > 0 ? nisr : 1));
            for (int m = 0; m < nisr; m++)
                isr[m] = version >= 3 ? qp->new_isr_with_epochs.v[m].broker_id : qp->new_isr.v[m];
            int before = ch.n;
            st_err_t e = !t && version >= 2 ? ST_E_UNKNOWN_TOPIC_ID
                                            : alter_one(c, version, q->broker_id, t, qp, isr, nisr, &ch);
            rp->error_code = st_err_wire(e);
            change_of[k] = e ? -2 : ch.n > before ? before : -1;
        }
    }
    st_err_t ce = ch.n ? st_ctl__commit_changes(c, NULL, &ch) : ST_OK;
    if (!ce && ch.n)
        ST_INFO("controller", "AlterPartition from broker %d: %d ISR change%s", (int)q->broker_id,
                ch.n, ch.n == 1 ? "" : "s");
    /* answer with the partitions as they are now */
    k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        const st_alter_partition_req_topic_t *qt = &q->topics.v[i];
        st_alter_partition_resp_topic_t *rt = &r->topics.v[i];
        const st_meta_topic_t *t = version >= 2 ? st_image_topic_by_id(c->image, &qt->topic_id)
                                                : st_image_topic(c->image, qt->topic_name.p,
                                                                 (size_t)ST_MAX(qt->topic_name.len, 0));
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            st_alter_partition_resp_part_t *rp = &rt->partitions.v[j];
            if (change_of[k] == -2) continue;
            if (ce && change_of[k] >= 0) {
                rp->error_code = st_err_wire(ce);
                continue;
            }
            const st_meta_partition_t *mp = t && rp->partition_index < t->nparts
                                                ? &t->parts[rp->partition_index]
                                                : NULL;
            if (!mp) continue;
            rp->leader_id = mp->leader;
            rp->leader_epoch = mp->leader_epoch;
            rp->partition_epoch = mp->partition_epoch;
            int32_t *isr = st_arena_alloc(a, sizeof(int32_t) * (size_t)(mp->nisr + 1));
            memcpy(isr, mp->isr, sizeof(int32_t) * (size_t)mp->nisr);
            rp->isr.v = isr;
            rp->isr.n = mp->nisr;
        }
    }
    free(change_of);
    st_ctl__changes_fini(&ch);
}

/* ---- AllocateProducerIds: a block of producer ids for a broker (KIP-730) ----------------- */

void st_controller_allocate_producer_ids(st_controller_t *c,
                                         const st_allocate_producer_ids_req_t *q,
                                         st_allocate_producer_ids_resp_t *r) {
    st_schema_defaults(&st_allocate_producer_ids_resp_schema, r);
    st_err_t e = ST_OK;
    const st_meta_broker_t *b = NULL;
    if (!leads(c)) {
        e = ST_E_NOT_CONTROLLER;
    } else if (!(b = st_image_broker(c->image, q->broker_id)) || q->broker_epoch != b->epoch) {
        /* Kafka's check: only a registered broker at its current epoch gets
         * ids, so a zombie incarnation cannot take a block */
        e = ST_E_STALE_BROKER_EPOCH;
    } else {
        int64_t start = c->image->next_producer_id;
        if (start > INT64_MAX - ST_PRODUCER_ID_BLOCK) {
            ST_ERROR("controller", "producer ids exhausted at %lld", (long long)start);
            e = ST_E_UNKNOWN_SERVER_ERROR;
        } else {
            st_mrec_producer_ids_t rec = {q->broker_id, q->broker_epoch,
                                          start + ST_PRODUCER_ID_BLOCK};
            st_ctl_rec_t cr = {ST_MREC_PRODUCER_IDS, &rec};
            e = st_ctl__commit_records(c, &cr, 1);
            if (!e) {
                r->producer_id_start = start;
                r->producer_id_len = ST_PRODUCER_ID_BLOCK;
                ST_INFO("controller", "producer ids %lld-%lld to broker %d", (long long)start,
                        (long long)(start + ST_PRODUCER_ID_BLOCK - 1), (int)q->broker_id);
            }
        }
    }
    r->error_code = st_err_wire(e);
}

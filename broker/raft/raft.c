/*
 * raft.c - the KIP-595 Raft state machine drawn in raft.h: roles and their
 * transitions, Vote (with KIP-996 pre-vote), BeginQuorumEpoch,
 * EndQuorumEpoch, Fetch and FetchSnapshot on both sides, the high
 * watermark, applying, and snapshots by size.
 *
 * The transitions are named as in raft.h's drawing and as Kafka's
 * QuorumState names them: to_unattached, to_prospective, to_candidate,
 * to_leader, to_follower, to_resigned.  Each one that changes the epoch,
 * the leader or the vote persists the quorum state first (ops.persist),
 * so no message that depends on it leaves before it is durable.
 *
 * Elections (KIP-996): a voter whose election or fetch timeout fires
 * becomes PROSPECTIVE and asks for pre-votes at its epoch; a majority of
 * yes makes it a CANDIDATE (epoch + 1, its own vote persisted).  A refusal
 * that names a leader of our epoch makes a prospective follow it again; a
 * round that cannot win backs off (or follows the leader it gave up on,
 * once nobody grants).  A granted pre-vote names no leader.  Two cases the
 * simulator found, handled here: a prospective at an epoch it raised
 * itself as a candidate, answered only by voters still at an older epoch,
 * retries a real Vote at that epoch (its pre-votes could never move them);
 * and a node never leads an epoch twice (it starts Resigned after a
 * restart in an epoch it led, and never retries a candidacy there).
 *
 * Outbound requests: at most one in flight per voter (Kafka's
 * RequestManager), each with a request_id; a response whose request_id is
 * not the one in flight for its sender is stale (late, duplicated, or from
 * before a transition, which forgets every request in flight) and is
 * dropped.  A request unanswered within request_timeout_ms is forgotten
 * and may be sent again after retry_backoff_ms.
 *
 * Fetch on the leader (long poll): a Fetch that finds nothing new to send
 * (no entries at fetch_offset, and the high watermark already told to
 * that replica) is parked, one per replica, until an entry is appended,
 * the high watermark moves, its max_wait_ms (capped by fetch_max_wait_ms)
 * passes, or the leader steps down.  So an idle quorum exchanges one Fetch
 * per follower per fetch_max_wait_ms, and a proposal reaches followers at
 * once.  A follower sends its next Fetch only when its log is durable up
 * to its end (fetch_offset is then what it holds durably, which is what
 * the leader counts toward the high watermark).
 *
 * Timers (ops.now_ms clock, -1 when not set): election_at (unattached
 * voter, prospective round, candidate, resigned), round_at (prospective:
 * the next pre-vote round, after a backoff), fetch_timeout_at (follower),
 * check_quorum_at (leader), each peer's req_deadline and retry_at, each
 * parked fetch's deadline.
 *
 * Errors: an op that fails makes the node stop (r->failed): every entry
 * point then returns at once and st_raft_tick returns -1.
 *
 * Thread: the one that owns the st_raft_t (raft.h).
 */
#include "raft_int.h"

#include <inttypes.h>
#include <stdlib.h>

#define MAX_OBSERVERS 64

static st_raft_planted_bug_t planted_bug;

void st_raft__set_planted_bug(st_raft_planted_bug_t bug) { planted_bug = bug; }

/* What the leader knows of one replica (a voter or an observer). */
typedef struct replica {
    int32_t id;
    int64_t end_offset; /* durable end from its last valid Fetch in this epoch, -1 */
    int64_t last_fetch_ms;
    int64_t last_caught_up_ms;
    int64_t hw_sent; /* the high watermark in our last answer to it, -1 */
    int8_t fetched_since_check;
    int8_t begin_acked; /* BeginQuorumEpoch answered, or fetched from us */
    /* A parked Fetch (long poll). */
    int8_t parked;
    int32_t parked_req_id;
    int64_t parked_deadline;
    st_raft_fetch_request_t parked_req;
} replica_t;

/* One outbound request slot per voter. */
typedef struct peer {
    int32_t req_id; /* 0: nothing in flight */
    st_raft_msg_type_t req_type;
    int8_t pre_vote;
    int64_t req_deadline;
    int64_t retry_at; /* -1: may send now */
    int8_t vote;      /* prospective and candidate: 0 unknown, 1 granted, -1 refused */
} peer_t;

struct st_raft {
    st_raft_config_t cfg;
    int32_t voters[ST_RAFT_MAX_VOTERS]; /* ascending */
    int32_t nvoters;
    char *cluster_id;
    st_raft_ops_t ops;
    st_err_t failed;
    int self_index; /* in voters, -1: observer */

    st_raft_role_t role;
    int32_t epoch;
    int32_t leader_id;
    int32_t voted_id;

    int64_t election_at;
    int64_t round_at;
    int64_t fetch_timeout_at;
    int64_t check_quorum_at;
    int64_t next_fetch_at; /* follower / observer: not before (backoff) */
    int32_t next_request_id;
    int32_t observer_target; /* unattached observer: the voter asked */
    /* Observer: the leader it lost the connection to, and its epoch.  The
     * voters that have not noticed yet still name it; following it again
     * would wait out the fetch timeout, so the observer asks on until a
     * voter names another leader or a later epoch.  It asks the other
     * voters first (lost_leader is also the last voter found
     * unreachable while asking). */
    int32_t lost_leader, lost_epoch;
    /* Prospective: the leader of this epoch we stopped hearing from, and
     * one a voter named in its answer.  A prospective that fails to gather
     * pre-votes goes back to following it (Kafka's ProspectiveState);
     * going back at once, on the first answer that names it, would keep
     * every node that still hears of it from ever starting an election. */
    int32_t abandoned_leader;
    int32_t heard_leader;
    /* Prospective at an epoch we raised ourselves (voted for ourselves in
     * it) and answered by voters still at an older epoch: they cannot learn
     * of ours from a pre-vote, and we cannot go back to theirs, so we ask
     * again with a real Vote at our epoch (a candidate's retry in the
     * Raft paper), which moves them up. */
    int8_t saw_older_epoch;
    int32_t persisted_leader; /* leader_id in the quorum state as last written */

    peer_t peers[ST_RAFT_MAX_VOTERS];

    /* Follower. */
    int8_t has_fetched;  /* a Fetch succeeded in this epoch (pre-vote refusal) */
    int64_t last_leader_fetch_ms;
    int8_t snap_fetching;
    st_raft_snapshot_id_t snap_fetch_id;
    int64_t snap_fetch_pos;

    /* Leader. */
    replica_t reps[ST_RAFT_MAX_VOTERS];
    replica_t obs[MAX_OBSERVERS];
    int32_t nobs;
    int64_t epoch_start_offset;
    st_raft_replica_state_t desc_voters[ST_RAFT_MAX_VOTERS];
    st_raft_replica_state_t desc_obs[MAX_OBSERVERS];

    /* Commit and apply. */
    int64_t hw;
    int64_t applied;
    int32_t applied_epoch; /* of the entry at applied - 1 */
    int64_t bytes_since_snapshot;
    int8_t has_snap;
    st_raft_snapshot_id_t snap_id;
};

/* ---- names and defaults --------------------------------------------------- */

static const char *const role_names[] = {"Unattached", "Prospective", "Candidate",
                                         "Leader",     "Follower",    "Resigned"};

const char *st_raft_role_name(st_raft_role_t role) {
    return (unsigned)role < ST_ARRAY_SIZE(role_names) ? role_names[role] : "Unknown";
}

const char *st_raft_msg_name(st_raft_msg_type_t type) {
    switch (type) {
    case ST_RAFT_VOTE_REQUEST: return "VoteRequest";
    case ST_RAFT_VOTE_RESPONSE: return "VoteResponse";
    case ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST: return "BeginQuorumEpochRequest";
    case ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE: return "BeginQuorumEpochResponse";
    case ST_RAFT_END_QUORUM_EPOCH_REQUEST: return "EndQuorumEpochRequest";
    case ST_RAFT_END_QUORUM_EPOCH_RESPONSE: return "EndQuorumEpochResponse";
    case ST_RAFT_FETCH_REQUEST: return "FetchRequest";
    case ST_RAFT_FETCH_RESPONSE: return "FetchResponse";
    case ST_RAFT_FETCH_SNAPSHOT_REQUEST: return "FetchSnapshotRequest";
    case ST_RAFT_FETCH_SNAPSHOT_RESPONSE: return "FetchSnapshotResponse";
    }
    return "Unknown";
}

void st_raft_config_defaults(st_raft_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->node_id = -1;
    cfg->election_timeout_ms = ST_RAFT_ELECTION_TIMEOUT_MS;
    cfg->fetch_timeout_ms = ST_RAFT_FETCH_TIMEOUT_MS;
    cfg->election_backoff_max_ms = ST_RAFT_ELECTION_BACKOFF_MAX_MS;
    cfg->request_timeout_ms = ST_RAFT_REQUEST_TIMEOUT_MS;
    cfg->retry_backoff_ms = ST_RAFT_RETRY_BACKOFF_MS;
    cfg->fetch_max_wait_ms = ST_RAFT_FETCH_MAX_WAIT_MS;
    cfg->fetch_max_bytes = ST_RAFT_FETCH_MAX_BYTES;
    cfg->snapshot_chunk_bytes = ST_RAFT_SNAPSHOT_CHUNK_BYTES;
    cfg->snapshot_min_new_bytes = 20 << 20;
}

/* ---- small helpers ---------------------------------------------------------- */

static int64_t now_ms(st_raft_t *r) { return r->ops.now_ms(r->ops.arg); }

static int due(st_raft_t *r, int64_t t) { return t >= 0 && t <= now_ms(r); }

static int voter_index(const st_raft_t *r, int32_t id) {
    for (int i = 0; i < r->nvoters; i++)
        if (r->voters[i] == id) return i;
    return -1;
}

static int majority(const st_raft_t *r) { return r->nvoters / 2 + 1; }

static int is_voter(const st_raft_t *r) { return r->self_index >= 0; }

static void fail(st_raft_t *r, st_err_t e, const char *what) {
    if (r->failed) return;
    r->failed = e;
    ST_ERROR("raft", "node %" PRId32 ": %s failed (%s); the metadata log stops here",
             r->cfg.node_id, what, st_err_name(e));
}

static int64_t jitter(st_raft_t *r, int32_t span) {
    if (span <= 0) return 0;
    return (int64_t)(r->ops.random(r->ops.arg) % (uint32_t)span);
}

static int64_t election_timeout(st_raft_t *r) {
    /* Kafka: election.timeout.ms plus a random part of up to as much. */
    return r->cfg.election_timeout_ms + jitter(r, r->cfg.election_timeout_ms);
}

static int64_t election_backoff(st_raft_t *r) {
    return 1 + jitter(r, r->cfg.election_backoff_max_ms);
}

/* The epoch of the last entry held, or of the snapshot the log starts at;
 * 0 for an empty log from offset 0 (epochs start at 1). */
static int32_t last_epoch(st_raft_t *r) {
    int32_t e = -1;
    int64_t end = 0;
    r->ops.log_end_offset_for_epoch(r->ops.arg, INT32_MAX, &e, &end);
    if (e >= 0) return e;
    if (r->has_snap && r->snap_id.end_offset == r->ops.log_end_offset(r->ops.arg))
        return r->snap_id.epoch;
    return 0;
}

static int persist(st_raft_t *r) {
    st_raft_qstate_t qs;
    memset(&qs, 0, sizeof qs);
    qs.leader_epoch = r->epoch;
    qs.leader_id = r->leader_id;
    qs.voted_id = r->voted_id;
    qs.nvoters = r->nvoters;
    memcpy(qs.voters, r->voters, sizeof(int32_t) * (size_t)r->nvoters);
    st_err_t e = r->ops.persist(r->ops.arg, &qs);
    if (e)
        fail(r, e, "persisting the quorum state");
    else
        r->persisted_leader = r->leader_id;
    return e == ST_OK;
}

static void notify_leader(st_raft_t *r) {
    if (r->ops.leader_change) r->ops.leader_change(r->ops.arg, r->epoch, r->leader_id);
}

static int32_t new_request_id(st_raft_t *r) {
    if (++r->next_request_id <= 0) r->next_request_id = 1;
    return r->next_request_id;
}

static void send_msg(st_raft_t *r, int32_t dest, st_raft_msg_t *m) {
    r->ops.send(r->ops.arg, dest, m);
}

/* A request to voter index i, remembered in its slot. */
static void send_request(st_raft_t *r, int i, st_raft_msg_t *m) {
    peer_t *p = &r->peers[i];
    m->request_id = new_request_id(r);
    m->cluster_id = r->cluster_id;
    p->req_id = m->request_id;
    p->req_type = m->type;
    p->pre_vote = m->type == ST_RAFT_VOTE_REQUEST ? m->u.vote_req.pre_vote : 0;
    p->req_deadline = now_ms(r) + r->cfg.request_timeout_ms;
    p->retry_at = -1;
    send_msg(r, r->voters[i], m);
}

/* The slot of `from` if msg answers what is in flight there; else NULL. */
static peer_t *match_response(st_raft_t *r, int32_t from, const st_raft_msg_t *m,
                              st_raft_msg_type_t req_type) {
    int i = voter_index(r, from);
    if (i < 0) return NULL;
    peer_t *p = &r->peers[i];
    if (p->req_id == 0 || p->req_id != m->request_id || p->req_type != req_type) return NULL;
    p->req_id = 0;
    return p;
}

static void backoff_peer(st_raft_t *r, peer_t *p) {
    p->retry_at = now_ms(r) + r->cfg.retry_backoff_ms;
}

static void forget_requests(st_raft_t *r) {
    for (int i = 0; i < r->nvoters; i++) {
        r->peers[i].req_id = 0;
        r->peers[i].retry_at = -1;
        r->peers[i].vote = 0;
    }
}

static int cluster_mismatch(const st_raft_t *r, const st_raft_msg_t *m) {
    return r->cluster_id && m->cluster_id && strcmp(r->cluster_id, m->cluster_id) != 0;
}

/* ---- applying and snapshots --------------------------------------------------- */

static void maybe_snapshot(st_raft_t *r) {
    if (r->cfg.snapshot_min_new_bytes <= 0 || r->bytes_since_snapshot < r->cfg.snapshot_min_new_bytes)
        return;
    if (r->has_snap && r->snap_id.end_offset >= r->applied) return;
    st_raft_snapshot_id_t id = {r->applied, r->applied_epoch};
    st_err_t e = r->ops.snapshot_create(r->ops.arg, id);
    if (e) {
        fail(r, e, "creating a snapshot");
        return;
    }
    r->has_snap = 1;
    r->snap_id = id;
    r->bytes_since_snapshot = 0;
    e = r->ops.log_delete_before(r->ops.arg, id.end_offset);
    if (e) fail(r, e, "deleting the log below a snapshot");
}

/* Hands ops.apply every entry wholly below the high watermark not yet
 * applied, in order. */
static void apply_committed(st_raft_t *r) {
    while (!r->failed && r->applied < r->hw) {
        const st_raft_entry_t *ents = NULL;
        int n = 0;
        st_err_t e = r->ops.log_read(r->ops.arg, r->applied, r->cfg.fetch_max_bytes, &ents, &n);
        if (e) {
            fail(r, e, "reading the log to apply");
            return;
        }
        if (n <= 0 || ents[0].base_offset != r->applied) {
            fail(r, ST_E_CORRUPT, "reading the log to apply (no entry at the applied offset)");
            return;
        }
        int k = 0;
        int64_t bytes = 0;
        while (k < n && ents[k].base_offset + ents[k].record_count <= r->hw) {
            bytes += ents[k].len;
            k++;
        }
        if (k == 0) return; /* the high watermark is inside an entry: wait */
        int32_t ep = ents[k - 1].epoch;
        int64_t end = ents[k - 1].base_offset + ents[k - 1].record_count;
        r->ops.apply(r->ops.arg, ents, k);
        r->applied = end;
        r->applied_epoch = ep;
        r->bytes_since_snapshot += bytes;
        maybe_snapshot(r);
    }
}

/* ---- leader: the high watermark and parked fetches ---------------------------- */

static replica_t *leader_replica(st_raft_t *r, int32_t id, int create) {
    int i = voter_index(r, id);
    if (i >= 0) return &r->reps[i];
    for (int k = 0; k < r->nobs; k++)
        if (r->obs[k].id == id) return &r->obs[k];
    if (!create) return NULL;
    int slot = r->nobs;
    if (r->nobs == MAX_OBSERVERS) {
        /* Forget the observer heard from least recently. */
        slot = 0;
        for (int k = 1; k < r->nobs; k++)
            if (r->obs[k].last_fetch_ms < r->obs[slot].last_fetch_ms) slot = k;
    } else {
        r->nobs++;
    }
    replica_t *rep = &r->obs[slot];
    memset(rep, 0, sizeof *rep);
    rep->id = id;
    rep->end_offset = -1;
    rep->last_fetch_ms = -1;
    rep->last_caught_up_ms = -1;
    rep->hw_sent = -1;
    return rep;
}

static void answer_fetch(st_raft_t *r, replica_t *rep, int32_t from, int32_t req_id,
                         const st_raft_fetch_request_t *req, int may_park);

static void wake_parked(st_raft_t *r, int expired_only) {
    for (int i = 0; i < r->nvoters + r->nobs && !r->failed; i++) {
        replica_t *rep = i < r->nvoters ? &r->reps[i] : &r->obs[i - r->nvoters];
        if (!rep->parked) continue;
        if (expired_only && !due(r, rep->parked_deadline)) continue;
        rep->parked = 0;
        st_raft_fetch_request_t req = rep->parked_req;
        answer_fetch(r, rep, rep->id, rep->parked_req_id, &req, !expired_only);
    }
}

/* A leader stepping down answers its parked fetches with where it stands. */
static void drop_parked(st_raft_t *r) {
    for (int i = 0; i < r->nvoters + r->nobs; i++) {
        replica_t *rep = i < r->nvoters ? &r->reps[i] : &r->obs[i - r->nvoters];
        if (!rep->parked) continue;
        rep->parked = 0;
        st_raft_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = ST_RAFT_FETCH_RESPONSE;
        m.request_id = rep->parked_req_id;
        m.u.fetch_resp.error_code = (int16_t)ST_E_NOT_LEADER_OR_FOLLOWER;
        m.u.fetch_resp.high_watermark = r->hw;
        m.u.fetch_resp.log_start_offset = r->ops.log_start_offset(r->ops.arg);
        m.u.fetch_resp.diverging_epoch.epoch = -1;
        m.u.fetch_resp.diverging_epoch.end_offset = -1;
        m.u.fetch_resp.current_leader.leader_id = r->role == ST_RAFT_LEADER ? -1 : r->leader_id;
        m.u.fetch_resp.current_leader.leader_epoch = r->epoch;
        m.u.fetch_resp.snapshot_id.end_offset = -1;
        m.u.fetch_resp.snapshot_id.epoch = -1;
        send_msg(r, rep->id, &m);
    }
}

static int cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Kafka's LeaderState.maybeUpdateHighWatermark: the largest offset a
 * majority of voters hold durably, taken only once it passes the epoch's
 * first entry (the Raft paper's 5.4.2: entries of earlier epochs commit
 * only beneath one of the current epoch). */
static void update_hw(st_raft_t *r) {
    if (r->role != ST_RAFT_LEADER || r->failed) return;
    int64_t ends[ST_RAFT_MAX_VOTERS];
    int64_t self_end = r->ops.log_durable_end(r->ops.arg);
    for (int i = 0; i < r->nvoters; i++)
        ends[i] = i == r->self_index ? self_end : r->reps[i].end_offset;
    qsort(ends, (size_t)r->nvoters, sizeof ends[0], cmp_desc);
    int64_t m = ends[r->nvoters / 2];
    if (planted_bug == ST_RAFT_BUG_COMMIT_WITHOUT_MAJORITY) m = self_end;
    if (m > r->epoch_start_offset && m > r->hw) {
        r->hw = m;
        apply_committed(r);
        wake_parked(r, 0);
    }
}

/* ---- transitions ----------------------------------------------------------------- */

static void leave_leadership(st_raft_t *r) {
    if (r->role == ST_RAFT_LEADER || r->role == ST_RAFT_RESIGNED) drop_parked(r);
    r->check_quorum_at = -1;
}

static void reset_role_timers(st_raft_t *r) {
    r->election_at = -1;
    r->round_at = -1;
    r->fetch_timeout_at = -1;
    r->check_quorum_at = -1;
    r->next_fetch_at = -1;
    r->snap_fetching = 0;
    r->has_fetched = 0;
    forget_requests(r);
}

static void to_unattached(st_raft_t *r, int32_t epoch) {
    int changed = epoch != r->epoch || r->leader_id != -1;
    leave_leadership(r);
    if (epoch != r->epoch) r->voted_id = -1;
    r->epoch = epoch;
    r->leader_id = -1;
    if (changed && !persist(r)) return;
    r->role = ST_RAFT_UNATTACHED;
    reset_role_timers(r);
    if (is_voter(r))
        r->election_at = now_ms(r) + election_timeout(r);
    else
        r->next_fetch_at = now_ms(r);
    if (changed) notify_leader(r);
}

static void to_follower(st_raft_t *r, int32_t epoch, int32_t leader) {
    int changed = epoch != r->epoch || leader != r->leader_id;
    leave_leadership(r);
    if (epoch != r->epoch) r->voted_id = -1;
    r->epoch = epoch;
    r->leader_id = leader;
    if (changed && !persist(r)) return;
    r->role = ST_RAFT_FOLLOWER;
    reset_role_timers(r);
    r->fetch_timeout_at = now_ms(r) + r->cfg.fetch_timeout_ms;
    notify_leader(r);
}

static void to_leader(st_raft_t *r);
static void to_candidate(st_raft_t *r);

static int count_votes(const st_raft_t *r, int want) {
    int n = 0;
    for (int i = 0; i < r->nvoters; i++) n += r->peers[i].vote == want;
    return n;
}

static void tally(st_raft_t *r);

/* A pre-vote round (or an election) that cannot win: follow the epoch's
 * leader again if one is known, else back off and try again. */
static void round_lost(st_raft_t *r) {
    int32_t l = r->heard_leader >= 0 ? r->heard_leader : r->abandoned_leader;
    if (r->role == ST_RAFT_PROSPECTIVE && l >= 0) {
        to_follower(r, r->epoch, l);
        return;
    }
    if (r->role == ST_RAFT_PROSPECTIVE && r->saw_older_epoch && r->voted_id == r->cfg.node_id &&
        r->persisted_leader == -1) {
        r->saw_older_epoch = 0;
        r->role = ST_RAFT_CANDIDATE;
        forget_requests(r);
        r->peers[r->self_index].vote = 1;
        r->round_at = -1;
        r->election_at = now_ms(r) + election_timeout(r);
        notify_leader(r);
        tally(r);
        return;
    }
    if (r->role == ST_RAFT_CANDIDATE) {
        r->role = ST_RAFT_PROSPECTIVE;
        r->abandoned_leader = r->heard_leader = -1;
        notify_leader(r);
    }
    forget_requests(r);
    r->election_at = -1;
    r->round_at = now_ms(r) + election_backoff(r);
}

/* Granted by a majority: move on; refused by one: back off. */
static void tally(st_raft_t *r) {
    if (r->failed) return;
    if (count_votes(r, 1) >= majority(r)) {
        if (r->role == ST_RAFT_PROSPECTIVE)
            to_candidate(r);
        else if (r->role == ST_RAFT_CANDIDATE)
            to_leader(r);
        return;
    }
    if (count_votes(r, -1) >= r->nvoters - majority(r) + 1) round_lost(r);
}

/* A pre-vote round: asks every voter whether it would vote for us at
 * epoch + 1 (KIP-996); nothing is raised or persisted. */
static void start_round(st_raft_t *r) {
    forget_requests(r);
    r->round_at = -1;
    r->peers[r->self_index].vote = 1;
    r->election_at = now_ms(r) + election_timeout(r);
    tally(r);
}

static void to_prospective(st_raft_t *r, int64_t delay_ms) {
    r->abandoned_leader = r->leader_id == r->cfg.node_id ? -1 : r->leader_id;
    r->heard_leader = -1;
    r->saw_older_epoch = 0;
    leave_leadership(r);
    r->role = ST_RAFT_PROSPECTIVE;
    r->leader_id = -1; /* the persisted state keeps the epoch's leader */
    reset_role_timers(r);
    notify_leader(r);
    if (delay_ms > 0)
        r->round_at = now_ms(r) + delay_ms;
    else
        start_round(r);
}

static void to_candidate(st_raft_t *r) {
    r->epoch++;
    r->voted_id = r->cfg.node_id;
    r->leader_id = -1;
    if (!persist(r)) return;
    r->role = ST_RAFT_CANDIDATE;
    reset_role_timers(r);
    r->peers[r->self_index].vote = 1;
    r->election_at = now_ms(r) + election_timeout(r);
    notify_leader(r);
    tally(r);
}

static st_err_t append_entries(st_raft_t *r, const st_raft_entry_t *e, int n) {
    st_err_t err = r->ops.log_append(r->ops.arg, e, n);
    if (err) {
        fail(r, err, "appending to the log");
        return err;
    }
    r->ops.log_flush(r->ops.arg);
    return ST_OK;
}

static void to_leader(st_raft_t *r) {
    r->leader_id = r->cfg.node_id;
    if (!persist(r)) return;
    int32_t granting[ST_RAFT_MAX_VOTERS];
    int ng = 0;
    for (int i = 0; i < r->nvoters; i++)
        if (r->peers[i].vote == 1) granting[ng++] = r->voters[i];
    r->role = ST_RAFT_LEADER;
    reset_role_timers(r);
    int64_t now = now_ms(r);
    for (int i = 0; i < r->nvoters; i++) {
        replica_t *rep = &r->reps[i];
        memset(rep, 0, sizeof *rep);
        rep->id = r->voters[i];
        rep->end_offset = -1;
        rep->last_fetch_ms = -1;
        rep->last_caught_up_ms = -1;
        rep->hw_sent = -1;
        rep->begin_acked = i == r->self_index;
    }
    r->nobs = 0;
    if (r->nvoters > 1) r->check_quorum_at = now + r->cfg.fetch_timeout_ms * 3 / 2;
    notify_leader(r);

    /* The epoch starts with a LeaderChange control entry (KIP-595). */
    st_buf_t b;
    st_buf_init(&b);
    st_raft_leader_change_encode(r->cfg.node_id, r->voters, r->nvoters, granting, ng, &b);
    st_raft_entry_t e = {.base_offset = r->ops.log_end_offset(r->ops.arg),
                         .epoch = r->epoch,
                         .record_count = 1,
                         .control = ST_RAFT_CONTROL_LEADER_CHANGE,
                         .data = b.data,
                         .len = (int32_t)b.len};
    r->epoch_start_offset = e.base_offset;
    append_entries(r, &e, 1);
    st_buf_fini(&b);
    ST_INFO("raft", "node %" PRId32 " is the leader of epoch %" PRId32 " from offset %" PRId64,
            r->cfg.node_id, r->epoch, r->epoch_start_offset);
}

static void send_end_quorum(st_raft_t *r) {
    /* Preferred successors: the most caught up first (Kafka's
     * LeaderState.nonLeaderVotersByDescendingFetchOffset). */
    st_raft_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = ST_RAFT_END_QUORUM_EPOCH_REQUEST;
    m.u.end_req.leader_id = r->cfg.node_id;
    m.u.end_req.leader_epoch = r->epoch;
    int idx[ST_RAFT_MAX_VOTERS];
    int n = 0;
    for (int i = 0; i < r->nvoters; i++)
        if (i != r->self_index) idx[n++] = i;
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && r->reps[idx[b]].end_offset > r->reps[idx[b - 1]].end_offset; b--) {
            int t = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = t;
        }
    for (int k = 0; k < n; k++) m.u.end_req.preferred_successors[k] = r->voters[idx[k]];
    m.u.end_req.npreferred = n;
    for (int k = 0; k < n; k++) {
        st_raft_msg_t one = m;
        send_request(r, idx[k], &one);
    }
}

static void to_resigned(st_raft_t *r) {
    drop_parked(r);
    r->role = ST_RAFT_RESIGNED;
    reset_role_timers(r);
    r->election_at = now_ms(r) + election_timeout(r);
    send_end_quorum(r);
    ST_INFO("raft", "node %" PRId32 " resigned as leader of epoch %" PRId32, r->cfg.node_id,
            r->epoch);
}

/* A response (or request) naming a newer epoch, or a leader for ours we did
 * not know: follow it.  Returns 1 when it moved us. */
static int maybe_follow(st_raft_t *r, int32_t leader_id, int32_t epoch) {
    if (epoch > r->epoch) {
        if (leader_id >= 0 && leader_id != r->cfg.node_id && voter_index(r, leader_id) >= 0)
            to_follower(r, epoch, leader_id);
        else
            to_unattached(r, epoch);
        return 1;
    }
    if (!is_voter(r) && leader_id == r->lost_leader && epoch == r->lost_epoch) return 0;
    if (epoch == r->epoch && leader_id >= 0 && leader_id != r->cfg.node_id &&
        voter_index(r, leader_id) >= 0 && r->leader_id == -1 && r->role != ST_RAFT_LEADER &&
        r->role != ST_RAFT_RESIGNED) {
        if (r->role == ST_RAFT_PROSPECTIVE) {
            r->heard_leader = leader_id; /* followed if this round fails */
            return 0;
        }
        to_follower(r, epoch, leader_id);
        return 1;
    }
    return 0;
}

/* ---- sending what the role wants ----------------------------------------------- */

static void send_fetch(st_raft_t *r, int i) {
    st_raft_msg_t m;
    memset(&m, 0, sizeof m);
    if (r->snap_fetching) {
        m.type = ST_RAFT_FETCH_SNAPSHOT_REQUEST;
        m.u.fsnap_req.replica_id = r->cfg.node_id;
        m.u.fsnap_req.max_bytes = r->cfg.snapshot_chunk_bytes;
        m.u.fsnap_req.current_leader_epoch = r->epoch;
        m.u.fsnap_req.snapshot_id = r->snap_fetch_id;
        m.u.fsnap_req.position = r->snap_fetch_pos;
    } else {
        m.type = ST_RAFT_FETCH_REQUEST;
        m.u.fetch_req.replica_id = r->cfg.node_id;
        m.u.fetch_req.max_wait_ms = r->cfg.fetch_max_wait_ms;
        m.u.fetch_req.current_leader_epoch = r->epoch;
        m.u.fetch_req.fetch_offset = r->ops.log_end_offset(r->ops.arg);
        m.u.fetch_req.last_fetched_epoch = last_epoch(r);
        m.u.fetch_req.log_start_offset = r->ops.log_start_offset(r->ops.arg);
        m.u.fetch_req.partition_max_bytes = r->cfg.fetch_max_bytes;
    }
    send_request(r, i, &m);
}

static int peer_free(st_raft_t *r, int i) {
    peer_t *p = &r->peers[i];
    if (p->req_id) return 0;
    if (p->retry_at >= 0 && p->retry_at > now_ms(r)) return 0;
    p->retry_at = -1;
    return 1;
}

static void drive(st_raft_t *r) {
    if (r->failed) return;
    switch (r->role) {
    case ST_RAFT_LEADER:
        for (int i = 0; i < r->nvoters; i++) {
            if (r->reps[i].begin_acked || !peer_free(r, i)) continue;
            st_raft_msg_t m;
            memset(&m, 0, sizeof m);
            m.type = ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST;
            m.u.begin_req.voter_id = r->voters[i];
            m.u.begin_req.leader_id = r->cfg.node_id;
            m.u.begin_req.leader_epoch = r->epoch;
            send_request(r, i, &m);
        }
        break;
    case ST_RAFT_PROSPECTIVE:
    case ST_RAFT_CANDIDATE: {
        if (r->round_at >= 0) break; /* backing off between rounds */
        int32_t le = last_epoch(r);
        int64_t lo = r->ops.log_end_offset(r->ops.arg);
        for (int i = 0; i < r->nvoters; i++) {
            if (i == r->self_index || r->peers[i].vote != 0 || !peer_free(r, i)) continue;
            st_raft_msg_t m;
            memset(&m, 0, sizeof m);
            m.type = ST_RAFT_VOTE_REQUEST;
            m.u.vote_req.voter_id = r->voters[i];
            m.u.vote_req.replica_epoch = r->epoch;
            m.u.vote_req.replica_id = r->cfg.node_id;
            m.u.vote_req.last_offset_epoch = le;
            m.u.vote_req.last_offset = lo;
            m.u.vote_req.pre_vote = r->role == ST_RAFT_PROSPECTIVE;
            send_request(r, i, &m);
        }
        break;
    }
    case ST_RAFT_FOLLOWER: {
        int i = voter_index(r, r->leader_id);
        if (i < 0 || !peer_free(r, i)) break;
        if (r->next_fetch_at >= 0 && r->next_fetch_at > now_ms(r)) break;
        r->next_fetch_at = -1;
        /* Fetch only what is durable: fetch_offset is what we hold durably. */
        if (!r->snap_fetching &&
            r->ops.log_durable_end(r->ops.arg) < r->ops.log_end_offset(r->ops.arg))
            break;
        send_fetch(r, i);
        break;
    }
    case ST_RAFT_UNATTACHED:
        if (is_voter(r)) break;
        /* An observer looks for the leader by asking any voter. */
        for (int i = 0; i < r->nvoters; i++)
            if (r->peers[i].req_id) return;
        if (r->next_fetch_at >= 0 && r->next_fetch_at > now_ms(r)) break;
        r->observer_target = (int32_t)jitter(r, r->nvoters);
        if (r->nvoters > 1 && r->voters[r->observer_target] == r->lost_leader)
            r->observer_target = (r->observer_target + 1) % r->nvoters; /* not the lost one */
        r->next_fetch_at = now_ms(r) + r->cfg.retry_backoff_ms;
        if (r->ops.log_durable_end(r->ops.arg) < r->ops.log_end_offset(r->ops.arg)) break;
        send_fetch(r, r->observer_target);
        break;
    case ST_RAFT_RESIGNED:
        break;
    }
}

/* ---- Vote ------------------------------------------------------------------------ */

static int log_up_to_date(st_raft_t *r, int32_t last_offset_epoch, int64_t last_offset) {
    int32_t le = last_epoch(r);
    if (last_offset_epoch != le) return last_offset_epoch > le;
    return last_offset >= r->ops.log_end_offset(r->ops.arg);
}

static int can_grant(st_raft_t *r, const st_raft_vote_request_t *q) {
    if (!log_up_to_date(r, q->last_offset_epoch, q->last_offset)) return 0;
    if (q->pre_vote) {
        /* KIP-996: a follower that hears from a live leader says no. */
        if (r->role == ST_RAFT_LEADER) return 0;
        if (r->role == ST_RAFT_FOLLOWER && r->has_fetched &&
            now_ms(r) - r->last_leader_fetch_ms < r->cfg.fetch_timeout_ms)
            return 0;
        return 1;
    }
    /* A real vote: our epoch equals the candidate's here. */
    switch (r->role) {
    case ST_RAFT_UNATTACHED:
    case ST_RAFT_PROSPECTIVE:
        return r->voted_id == -1 || r->voted_id == q->replica_id;
    default:
        return 0; /* a leader is known in this epoch, or we are a candidate */
    }
}

static void handle_vote_request(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    const st_raft_vote_request_t *q = &m->u.vote_req;
    st_raft_msg_t out;
    memset(&out, 0, sizeof out);
    out.type = ST_RAFT_VOTE_RESPONSE;
    out.request_id = m->request_id;
    int16_t err = 0;
    int granted = 0;
    if (cluster_mismatch(r, m)) {
        err = ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID;
    } else if (!is_voter(r) || (q->voter_id >= 0 && q->voter_id != r->cfg.node_id) ||
               voter_index(r, q->replica_id) < 0 || q->replica_id != from) {
        ST_LOG_RATELIMITED(ST_LOG_WARN, "raft", 10000,
                "node %" PRId32 ": refusing a Vote from node %" PRId32
                " (replica %" PRId32 ", asking voter %" PRId32 "): %s",
                r->cfg.node_id, from, q->replica_id, q->voter_id,
                !is_voter(r) ? "this node is not a voter"
                             : "the sender or the addressee is not among the voters");
        err = ST_RAFT_ERR_INCONSISTENT_VOTER_SET;
    } else if (q->replica_epoch < r->epoch) {
        err = (int16_t)ST_E_FENCED_LEADER_EPOCH;
    } else {
        if (!q->pre_vote && q->replica_epoch > r->epoch) {
            to_unattached(r, q->replica_epoch);
            if (r->failed) return;
        }
        granted = can_grant(r, q);
        if (granted && !q->pre_vote) {
            int changed = r->voted_id != q->replica_id;
            r->voted_id = q->replica_id;
            if (changed && !persist(r)) return; /* the vote is durable before it is told */
            r->role = ST_RAFT_UNATTACHED;
            r->round_at = -1;
            r->election_at = now_ms(r) + election_timeout(r);
        }
    }
    out.u.vote_resp.error_code = err;
    /* A granted pre-vote names no leader (KIP-996), so that the prospective
     * does not take it for a refusal by a follower of a live one. */
    out.u.vote_resp.leader_id = granted && q->pre_vote ? -1 : r->leader_id;
    out.u.vote_resp.leader_epoch = r->epoch;
    out.u.vote_resp.vote_granted = (int8_t)granted;
    send_msg(r, from, &out);
}

static void handle_vote_response(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    peer_t *p = match_response(r, from, m, ST_RAFT_VOTE_REQUEST);
    if (!p) return;
    const st_raft_vote_response_t *v = &m->u.vote_resp;
    if (r->role == ST_RAFT_PROSPECTIVE && !v->vote_granted && v->leader_epoch == r->epoch &&
        v->leader_id >= 0 && v->leader_id != r->cfg.node_id &&
        voter_index(r, v->leader_id) >= 0) {
        /* Refused by a voter that follows a leader of our epoch: follow it
         * too rather than stay a prospective that cannot win (KIP-996). */
        to_follower(r, r->epoch, v->leader_id);
        return;
    }
    if (maybe_follow(r, v->leader_id, v->leader_epoch)) return;
    if (r->role != ST_RAFT_PROSPECTIVE && r->role != ST_RAFT_CANDIDATE) return;
    if (p->pre_vote != (r->role == ST_RAFT_PROSPECTIVE)) {
        backoff_peer(r, p);
        return;
    }
    if (v->leader_epoch < r->epoch) {
        /* It answered from an older epoch: a refusal, and a sign that our
         * epoch has not reached it. */
        r->saw_older_epoch = 1;
        p->vote = -1;
        tally(r);
        return;
    }
    if (v->error_code == ST_RAFT_ERR_INCONSISTENT_VOTER_SET ||
        v->error_code == ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID) {
        p->vote = -1;
    } else if (v->error_code) {
        backoff_peer(r, p);
        return;
    } else {
        p->vote = v->vote_granted ? 1 : -1;
    }
    tally(r);
}

/* ---- BeginQuorumEpoch / EndQuorumEpoch ------------------------------------------- */

static void send_epoch_response(st_raft_t *r, int32_t from, const st_raft_msg_t *m,
                                st_raft_msg_type_t type, int16_t err) {
    st_raft_msg_t out;
    memset(&out, 0, sizeof out);
    out.type = type;
    out.request_id = m->request_id;
    out.u.epoch_resp.error_code = err;
    out.u.epoch_resp.leader_id = r->leader_id;
    out.u.epoch_resp.leader_epoch = r->epoch;
    send_msg(r, from, &out);
}

static void handle_begin_request(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    const st_raft_begin_quorum_epoch_request_t *q = &m->u.begin_req;
    int16_t err = 0;
    if (cluster_mismatch(r, m))
        err = ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID;
    else if (voter_index(r, q->leader_id) < 0 || q->leader_id != from ||
             (q->voter_id >= 0 && q->voter_id != r->cfg.node_id))
        err = ST_RAFT_ERR_INCONSISTENT_VOTER_SET;
    else if (q->leader_epoch < r->epoch)
        err = (int16_t)ST_E_FENCED_LEADER_EPOCH;
    else if (q->leader_epoch == r->epoch &&
             (r->role == ST_RAFT_LEADER || r->role == ST_RAFT_RESIGNED ||
              r->role == ST_RAFT_CANDIDATE))
        err = (int16_t)ST_E_INVALID_REQUEST; /* we hold this epoch ourselves */
    else if (r->role != ST_RAFT_FOLLOWER || r->leader_id != q->leader_id ||
             r->epoch != q->leader_epoch)
        to_follower(r, q->leader_epoch, q->leader_id);
    if (r->failed) return;
    send_epoch_response(r, from, m, ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE, err);
}

static void handle_begin_response(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    peer_t *p = match_response(r, from, m, ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST);
    if (!p) return;
    const st_raft_epoch_response_t *v = &m->u.epoch_resp;
    if (maybe_follow(r, v->leader_id, v->leader_epoch)) return;
    if (r->role != ST_RAFT_LEADER) return;
    if (v->error_code == 0 && v->leader_epoch == r->epoch)
        r->reps[voter_index(r, from)].begin_acked = 1;
    else
        backoff_peer(r, p);
}

static void handle_end_request(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    const st_raft_end_quorum_epoch_request_t *q = &m->u.end_req;
    int16_t err = 0;
    if (cluster_mismatch(r, m)) {
        err = ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID;
    } else if (voter_index(r, q->leader_id) < 0 || q->leader_id != from) {
        err = ST_RAFT_ERR_INCONSISTENT_VOTER_SET;
    } else if (q->leader_epoch < r->epoch) {
        err = (int16_t)ST_E_FENCED_LEADER_EPOCH;
    } else {
        if (q->leader_epoch > r->epoch) to_unattached(r, q->leader_epoch);
        if (r->failed) return;
        if (is_voter(r) && r->leader_id == q->leader_id && r->role == ST_RAFT_FOLLOWER) {
            /* Kafka's strict exponential backoff by our place among the
             * preferred successors: the first one starts at once. */
            int pos = -1;
            for (int k = 0; k < q->npreferred && k < ST_RAFT_MAX_VOTERS; k++)
                if (q->preferred_successors[k] == r->cfg.node_id) pos = k;
            int64_t wait;
            if (pos == 0)
                wait = 0;
            else if (pos > 0)
                wait = ST_MIN((int64_t)r->cfg.retry_backoff_ms << ST_MIN(pos, 20),
                              (int64_t)r->cfg.election_backoff_max_ms);
            else
                wait = election_backoff(r);
            r->fetch_timeout_at = now_ms(r) + wait;
        } else if (is_voter(r) && r->role == ST_RAFT_UNATTACHED) {
            r->election_at = ST_MIN(r->election_at, now_ms(r) + election_backoff(r));
        }
    }
    send_epoch_response(r, from, m, ST_RAFT_END_QUORUM_EPOCH_RESPONSE, err);
}

static void handle_end_response(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    peer_t *p = match_response(r, from, m, ST_RAFT_END_QUORUM_EPOCH_REQUEST);
    if (!p) return;
    maybe_follow(r, m->u.epoch_resp.leader_id, m->u.epoch_resp.leader_epoch);
}

/* ---- Fetch, leader side -------------------------------------------------------------- */

static int16_t validate_leader_request(const st_raft_t *r, int32_t epoch) {
    /* Kafka's validateLeaderOnlyRequest. */
    if (epoch < r->epoch) return (int16_t)ST_E_FENCED_LEADER_EPOCH;
    if (epoch > r->epoch) return (int16_t)ST_E_UNKNOWN_LEADER_EPOCH;
    if (r->role != ST_RAFT_LEADER) return (int16_t)ST_E_NOT_LEADER_OR_FOLLOWER;
    return 0;
}

static void fetch_response_init(st_raft_t *r, st_raft_msg_t *out, int32_t req_id) {
    memset(out, 0, sizeof *out);
    out->type = ST_RAFT_FETCH_RESPONSE;
    out->request_id = req_id;
    st_raft_fetch_response_t *f = &out->u.fetch_resp;
    f->high_watermark = r->hw;
    f->log_start_offset = r->ops.log_start_offset(r->ops.arg);
    f->diverging_epoch.epoch = -1;
    f->diverging_epoch.end_offset = -1;
    f->current_leader.leader_id = r->leader_id;
    f->current_leader.leader_epoch = r->epoch;
    f->snapshot_id.end_offset = -1;
    f->snapshot_id.epoch = -1;
}

static void answer_fetch(st_raft_t *r, replica_t *rep, int32_t from, int32_t req_id,
                         const st_raft_fetch_request_t *req, int may_park) {
    st_raft_msg_t out;
    fetch_response_init(r, &out, req_id);
    st_raft_fetch_response_t *f = &out.u.fetch_resp;
    int64_t off = req->fetch_offset;
    int32_t lfe = req->last_fetched_epoch;
    int64_t start = f->log_start_offset;
    int64_t end = r->ops.log_end_offset(r->ops.arg);
    int need_snapshot = 0;

    /* Kafka's validateOffsetAndEpoch. */
    if (off < start || (off == start && start > 0 && (!r->has_snap || lfe != r->snap_id.epoch))) {
        need_snapshot = 1;
    } else if (off > start) {
        int32_t e = -1;
        int64_t e_end = 0;
        r->ops.log_end_offset_for_epoch(r->ops.arg, lfe, &e, &e_end);
        if (e < 0) {
            if (start > 0) {
                need_snapshot = 1;
            } else {
                f->diverging_epoch.epoch = 0;
                f->diverging_epoch.end_offset = 0;
            }
        } else if (e != lfe || e_end < off) {
            if (e_end < start) {
                need_snapshot = 1;
            } else {
                f->diverging_epoch.epoch = e;
                f->diverging_epoch.end_offset = e_end;
            }
        }
    }
    if (need_snapshot) {
        if (!r->has_snap) {
            /* The log starts above 0 with no snapshot: ours is damaged. */
            fail(r, ST_E_CORRUPT, "answering a Fetch below the log start (no snapshot)");
            return;
        }
        f->snapshot_id = r->snap_id;
        send_msg(r, from, &out);
        return;
    }
    if (f->diverging_epoch.epoch >= 0) {
        send_msg(r, from, &out);
        return;
    }

    /* fetch_offset is valid: the replica holds everything below it durably. */
    int64_t now = now_ms(r);
    rep->last_fetch_ms = now;
    if (off > rep->end_offset) rep->end_offset = off;
    if (off >= r->hw) rep->last_caught_up_ms = now;
    int vi = voter_index(r, from);
    if (vi >= 0) {
        rep->fetched_since_check = 1;
        rep->begin_acked = 1;
        update_hw(r);
        if (r->failed || r->role != ST_RAFT_LEADER) return;
        f->high_watermark = r->hw;
    }
    if (off < end) {
        const st_raft_entry_t *ents = NULL;
        int n = 0;
        int32_t maxb = req->partition_max_bytes > 0
                           ? ST_MIN(req->partition_max_bytes, r->cfg.fetch_max_bytes)
                           : r->cfg.fetch_max_bytes;
        st_err_t e = r->ops.log_read(r->ops.arg, off, maxb, &ents, &n);
        if (e == ST_E_OFFSET_OUT_OF_RANGE || e == ST_E_INVAL) {
            /* Not an entry boundary: no follower of ours asks for that
             * (its log matches ours up to fetch_offset), so the request is
             * refused, not our log. */
            f->error_code = (int16_t)ST_E_OFFSET_OUT_OF_RANGE;
            send_msg(r, from, &out);
            return;
        }
        if (e) {
            fail(r, e, "reading the log for a Fetch");
            return;
        }
        f->records = ents;
        f->nrecords = n;
    } else if (may_park && r->hw == rep->hw_sent && req->max_wait_ms > 0) {
        rep->parked = 1;
        rep->parked_req_id = req_id;
        rep->parked_req = *req;
        rep->parked_deadline = now + ST_MIN(req->max_wait_ms, r->cfg.fetch_max_wait_ms);
        return;
    }
    rep->hw_sent = r->hw;
    send_msg(r, from, &out);
}

static void handle_fetch_request(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    const st_raft_fetch_request_t *q = &m->u.fetch_req;
    st_raft_msg_t out;
    fetch_response_init(r, &out, m->request_id);
    int16_t err = 0;
    if (cluster_mismatch(r, m))
        err = ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID;
    else if (q->fetch_offset < 0 || q->last_fetched_epoch > q->current_leader_epoch ||
             q->replica_id != from || from < 0)
        err = (int16_t)ST_E_INVALID_REQUEST;
    else
        err = validate_leader_request(r, q->current_leader_epoch);
    if (err) {
        out.u.fetch_resp.error_code = err;
        if (r->role == ST_RAFT_RESIGNED) out.u.fetch_resp.current_leader.leader_id = -1;
        send_msg(r, from, &out);
        return;
    }
    replica_t *rep = leader_replica(r, from, 1);
    rep->parked = 0; /* a newer Fetch replaces a parked one */
    answer_fetch(r, rep, from, m->request_id, q, 1);
}

static void handle_fetch_snapshot_request(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    const st_raft_fetch_snapshot_request_t *q = &m->u.fsnap_req;
    st_raft_msg_t out;
    memset(&out, 0, sizeof out);
    out.type = ST_RAFT_FETCH_SNAPSHOT_RESPONSE;
    out.request_id = m->request_id;
    st_raft_fetch_snapshot_response_t *f = &out.u.fsnap_resp;
    f->snapshot_id = q->snapshot_id;
    f->current_leader.leader_id = r->role == ST_RAFT_RESIGNED ? -1 : r->leader_id;
    f->current_leader.leader_epoch = r->epoch;
    f->size = -1;
    f->position = q->position;
    int16_t err = 0;
    if (cluster_mismatch(r, m))
        err = ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID;
    else if (q->replica_id != from)
        err = (int16_t)ST_E_INVALID_REQUEST;
    else
        err = validate_leader_request(r, q->current_leader_epoch);
    if (!err && (!r->has_snap || r->snap_id.end_offset != q->snapshot_id.end_offset ||
                 r->snap_id.epoch != q->snapshot_id.epoch))
        err = ST_RAFT_ERR_SNAPSHOT_NOT_FOUND;
    if (!err && q->position < 0) err = ST_RAFT_ERR_POSITION_OUT_OF_RANGE;
    if (!err) {
        const uint8_t *p = NULL;
        int32_t len = 0;
        int64_t size = 0;
        int32_t maxb = q->max_bytes > 0 ? ST_MIN(q->max_bytes, r->cfg.snapshot_chunk_bytes)
                                        : r->cfg.snapshot_chunk_bytes;
        st_err_t e = r->ops.snapshot_read(r->ops.arg, q->snapshot_id, q->position, maxb, &p,
                                          &len, &size);
        if (e == ST_E_NOT_FOUND) {
            err = ST_RAFT_ERR_SNAPSHOT_NOT_FOUND;
        } else if (e == ST_E_OFFSET_OUT_OF_RANGE || e == ST_E_INVAL) {
            err = ST_RAFT_ERR_POSITION_OUT_OF_RANGE; /* the request's fault, not ours */
        } else if (e) {
            fail(r, e, "reading a snapshot for FetchSnapshot");
            return;
        } else if (q->position > size) {
            err = ST_RAFT_ERR_POSITION_OUT_OF_RANGE;
        } else {
            f->size = size;
            f->unaligned_records = p;
            f->len = len;
            replica_t *rep = leader_replica(r, from, 1);
            rep->last_fetch_ms = now_ms(r);
            if (voter_index(r, from) >= 0) {
                rep->fetched_since_check = 1;
                rep->begin_acked = 1;
            }
        }
    }
    f->error_code = err;
    send_msg(r, from, &out);
}

/* ---- Fetch, follower side ------------------------------------------------------------ */

static void follower_contact(st_raft_t *r) {
    r->has_fetched = 1;
    r->last_leader_fetch_ms = now_ms(r);
    r->fetch_timeout_at = r->last_leader_fetch_ms + r->cfg.fetch_timeout_ms;
}

static void handle_fetch_response(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    peer_t *p = match_response(r, from, m, ST_RAFT_FETCH_REQUEST);
    if (!p) return;
    const st_raft_fetch_response_t *f = &m->u.fetch_resp;
    if (maybe_follow(r, f->current_leader.leader_id, f->current_leader.leader_epoch)) return;
    if (r->role != ST_RAFT_FOLLOWER || from != r->leader_id || f->error_code ||
        f->current_leader.leader_epoch != r->epoch) {
        backoff_peer(r, p);
        r->next_fetch_at = now_ms(r) + r->cfg.retry_backoff_ms;
        return;
    }
    follower_contact(r);
    if (f->diverging_epoch.epoch >= 0 || f->diverging_epoch.end_offset >= 0) {
        /* Truncate to where our log and the leader's agree (KIP-595). */
        int32_t e = -1;
        int64_t e_end = 0;
        r->ops.log_end_offset_for_epoch(r->ops.arg, f->diverging_epoch.epoch, &e, &e_end);
        int64_t to = e < 0 ? r->ops.log_start_offset(r->ops.arg)
                           : ST_MIN(e_end, f->diverging_epoch.end_offset);
        if (to < r->hw) {
            fail(r, ST_E_CORRUPT, "truncating below the high watermark (the leader diverges "
                                  "from a committed entry)");
            return;
        }
        if (to < r->ops.log_end_offset(r->ops.arg)) {
            st_err_t err = r->ops.log_truncate(r->ops.arg, to);
            if (err) fail(r, err, "truncating the log");
        }
        return;
    }
    if (f->snapshot_id.end_offset >= 0) {
        if (f->snapshot_id.end_offset <= r->hw || f->snapshot_id.epoch > r->epoch) {
            /* Not ahead of what we hold committed: not what a leader sends
             * to a replica below its log start. */
            r->next_fetch_at = now_ms(r) + r->cfg.retry_backoff_ms;
            return;
        }
        r->snap_fetching = 1;
        r->snap_fetch_id = f->snapshot_id;
        r->snap_fetch_pos = 0;
        return;
    }
    int64_t end = r->ops.log_end_offset(r->ops.arg);
    if (f->nrecords > 0) {
        if (f->records[0].base_offset != end) return; /* not where we asked: ask again */
        int n = 0;
        int64_t next = end;
        while (n < f->nrecords && f->records[n].base_offset == next &&
               f->records[n].epoch <= r->epoch && f->records[n].record_count >= 1) {
            next += f->records[n].record_count;
            n++;
        }
        if (n > 0 && append_entries(r, f->records, n)) return;
        end = next;
    }
    int64_t hw = ST_MIN(f->high_watermark, end);
    if (hw > r->hw) {
        r->hw = hw;
        apply_committed(r);
    }
}

static void handle_fetch_snapshot_response(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    peer_t *p = match_response(r, from, m, ST_RAFT_FETCH_SNAPSHOT_REQUEST);
    if (!p) return;
    const st_raft_fetch_snapshot_response_t *f = &m->u.fsnap_resp;
    if (maybe_follow(r, f->current_leader.leader_id, f->current_leader.leader_epoch)) return;
    if (r->role != ST_RAFT_FOLLOWER || from != r->leader_id || !r->snap_fetching ||
        f->current_leader.leader_epoch != r->epoch) {
        backoff_peer(r, p);
        return;
    }
    if (f->error_code == ST_RAFT_ERR_SNAPSHOT_NOT_FOUND ||
        f->error_code == ST_RAFT_ERR_POSITION_OUT_OF_RANGE) {
        r->snap_fetching = 0; /* a newer snapshot: Fetch says which */
        return;
    }
    if (f->error_code || f->snapshot_id.end_offset != r->snap_fetch_id.end_offset ||
        f->snapshot_id.epoch != r->snap_fetch_id.epoch || f->position != r->snap_fetch_pos ||
        f->len < 0 || f->size < 0 || f->position + f->len > f->size ||
        (f->len == 0 && f->position < f->size)) {
        backoff_peer(r, p);
        return;
    }
    follower_contact(r);
    st_err_t e = ST_OK;
    if (f->len > 0)
        e = r->ops.snapshot_write(r->ops.arg, r->snap_fetch_id, f->position,
                                  f->unaligned_records, f->len);
    /* Bytes from the network that do not make a whole, checked snapshot
     * (CORRUPT, TRUNCATED, INVAL from the host) are the leader's or the
     * wire's fault, not our disk's: the transfer starts again (the next
     * Fetch names the snapshot), as a bad chunk must not stop a follower.
     * Any other error is the disk's, and stops the node. */
    if (e == ST_E_CORRUPT || e == ST_E_TRUNCATED || e == ST_E_INVAL) {
        ST_WARN("raft", "node %d: a chunk of snapshot %lld-%d from node %d was refused (%s); "
                        "fetching it again",
                (int)r->cfg.node_id, (long long)r->snap_fetch_id.end_offset,
                (int)r->snap_fetch_id.epoch, (int)from, st_err_msg(e));
        r->snap_fetching = 0;
        backoff_peer(r, p);
        return;
    }
    if (e) {
        fail(r, e, "writing a fetched snapshot");
        return;
    }
    r->snap_fetch_pos += f->len;
    if (r->snap_fetch_pos < f->size) return;
    st_raft_snapshot_id_t id = r->snap_fetch_id;
    r->snap_fetching = 0;
    if ((e = r->ops.snapshot_install(r->ops.arg, id, f->size)) != ST_OK) {
        if (e == ST_E_CORRUPT || e == ST_E_TRUNCATED || e == ST_E_INVAL) {
            ST_WARN("raft", "node %d: snapshot %lld-%d from node %d does not check (%s); "
                            "fetching it again",
                    (int)r->cfg.node_id, (long long)id.end_offset, (int)id.epoch, (int)from,
                    st_err_msg(e));
            backoff_peer(r, p);
            return;
        }
        fail(r, e, "installing a fetched snapshot");
        return;
    }
    if ((e = r->ops.log_reset(r->ops.arg, id)) != ST_OK) {
        fail(r, e, "resetting the log to a fetched snapshot");
        return;
    }
    if ((e = r->ops.snapshot_load(r->ops.arg, id)) != ST_OK) {
        fail(r, e, "loading a fetched snapshot");
        return;
    }
    r->has_snap = 1;
    r->snap_id = id;
    r->applied = id.end_offset;
    r->applied_epoch = id.epoch;
    r->bytes_since_snapshot = 0;
    if (r->hw < id.end_offset) r->hw = id.end_offset;
}

/* ---- the public entry points ---------------------------------------------------------- */

void st_raft_recv(st_raft_t *r, int32_t from, const st_raft_msg_t *m) {
    if (r->failed) return;
    switch (m->type) {
    case ST_RAFT_VOTE_REQUEST: handle_vote_request(r, from, m); break;
    case ST_RAFT_VOTE_RESPONSE: handle_vote_response(r, from, m); break;
    case ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST: handle_begin_request(r, from, m); break;
    case ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE: handle_begin_response(r, from, m); break;
    case ST_RAFT_END_QUORUM_EPOCH_REQUEST: handle_end_request(r, from, m); break;
    case ST_RAFT_END_QUORUM_EPOCH_RESPONSE: handle_end_response(r, from, m); break;
    case ST_RAFT_FETCH_REQUEST: handle_fetch_request(r, from, m); break;
    case ST_RAFT_FETCH_RESPONSE: handle_fetch_response(r, from, m); break;
    case ST_RAFT_FETCH_SNAPSHOT_REQUEST: handle_fetch_snapshot_request(r, from, m); break;
    case ST_RAFT_FETCH_SNAPSHOT_RESPONSE: handle_fetch_snapshot_response(r, from, m); break;
    default: return;
    }
    drive(r);
}

void st_raft_log_flushed(st_raft_t *r) {
    if (r->failed) return;
    update_hw(r);
    drive(r);
}

static void check_quorum(st_raft_t *r) {
    int n = 1;
    for (int i = 0; i < r->nvoters; i++)
        if (i != r->self_index) n += r->reps[i].fetched_since_check;
    if (n >= majority(r)) {
        for (int i = 0; i < r->nvoters; i++) r->reps[i].fetched_since_check = 0;
        r->check_quorum_at = now_ms(r) + r->cfg.fetch_timeout_ms * 3 / 2;
        return;
    }
    ST_INFO("raft", "node %" PRId32 ": only %d of %" PRId32 " voters fetched within %d ms; "
            "resigning (check-quorum)", r->cfg.node_id, n, r->nvoters,
            r->cfg.fetch_timeout_ms * 3 / 2);
    to_resigned(r);
}

int64_t st_raft_next_deadline(const st_raft_t *r) {
    if (r->failed) return -1;
    int64_t d = -1;
#define NOTE(t)                                     \
    do {                                            \
        int64_t t_ = (t);                           \
        if (t_ >= 0 && (d < 0 || t_ < d)) d = t_;   \
    } while (0)
    NOTE(r->election_at);
    NOTE(r->round_at);
    NOTE(r->fetch_timeout_at);
    NOTE(r->check_quorum_at);
    NOTE(r->next_fetch_at);
    for (int i = 0; i < r->nvoters; i++) {
        if (r->peers[i].req_id) NOTE(r->peers[i].req_deadline);
        NOTE(r->peers[i].retry_at);
    }
    if (r->role == ST_RAFT_LEADER)
        for (int i = 0; i < r->nvoters + r->nobs; i++) {
            const replica_t *rep = i < r->nvoters ? &r->reps[i] : &r->obs[i - r->nvoters];
            if (rep->parked) NOTE(rep->parked_deadline);
        }
#undef NOTE
    return d;
}

int64_t st_raft_tick(st_raft_t *r) {
    if (r->failed) return -1;
    for (int i = 0; i < r->nvoters; i++) {
        peer_t *p = &r->peers[i];
        if (p->req_id && due(r, p->req_deadline)) {
            p->req_id = 0; /* timed out: its answer, if any, is now stale */
            backoff_peer(r, p);
        }
        if (p->retry_at >= 0 && due(r, p->retry_at) && !p->req_id) p->retry_at = -1;
    }
    if (due(r, r->next_fetch_at)) r->next_fetch_at = -1;
    switch (r->role) {
    case ST_RAFT_UNATTACHED:
        if (is_voter(r) && due(r, r->election_at)) to_prospective(r, 0);
        break;
    case ST_RAFT_PROSPECTIVE:
    case ST_RAFT_CANDIDATE:
        if (due(r, r->round_at)) {
            start_round(r);
        } else if (due(r, r->election_at)) {
            round_lost(r); /* no majority in time */
        }
        break;
    case ST_RAFT_FOLLOWER:
        if (due(r, r->fetch_timeout_at)) {
            if (is_voter(r))
                to_prospective(r, 0);
            else
                to_unattached(r, r->epoch);
        }
        break;
    case ST_RAFT_LEADER:
        if (due(r, r->check_quorum_at)) check_quorum(r);
        if (r->role == ST_RAFT_LEADER) wake_parked(r, 1);
        break;
    case ST_RAFT_RESIGNED:
        if (due(r, r->election_at)) to_prospective(r, 0);
        break;
    }
    drive(r);
    return st_raft_next_deadline(r);
}

st_err_t st_raft_propose(st_raft_t *r, const uint8_t *data, int32_t len, int32_t record_count,
                         int64_t *base_offset, int32_t *epoch) {
    if (r->failed) return r->failed;
    if (r->role != ST_RAFT_LEADER) return ST_E_NOT_LEADER_OR_FOLLOWER;
    if (record_count < 1 || len < 0 || (len > 0 && !data)) return ST_E_INVAL;
    st_raft_entry_t e = {.base_offset = r->ops.log_end_offset(r->ops.arg),
                         .epoch = r->epoch,
                         .record_count = record_count,
                         .control = ST_RAFT_CONTROL_NONE,
                         .data = data,
                         .len = len};
    st_err_t err = append_entries(r, &e, 1);
    if (err) return err;
    if (base_offset) *base_offset = e.base_offset;
    if (epoch) *epoch = e.epoch;
    wake_parked(r, 0);
    return ST_OK;
}

void st_raft_leader_unreachable(st_raft_t *r, int32_t leader) {
    if (r->failed) return;
    if (!is_voter(r) && r->role == ST_RAFT_UNATTACHED) {
        /* An observer asking around: the voter it asked is not there; ask
         * another after the backoff instead of at the request timeout. */
        int i = voter_index(r, leader);
        if (i >= 0 && i == r->observer_target && r->peers[i].req_id) {
            r->peers[i].req_id = 0;
            r->lost_leader = leader;
            r->next_fetch_at = now_ms(r) + r->cfg.retry_backoff_ms;
            drive(r);
        }
        return;
    }
    if (r->role != ST_RAFT_FOLLOWER || r->leader_id != leader) return;
    if (!is_voter(r)) {
        /* An observer cannot elect anyone: it asks the voters who leads
         * now instead of waiting out the fetch timeout. */
        ST_INFO("raft", "node %d: the leader %d of epoch %d is unreachable; asking the voters",
                (int)r->cfg.node_id, (int)leader, (int)r->epoch);
        r->lost_leader = leader;
        r->lost_epoch = r->epoch;
        to_unattached(r, r->epoch);
        drive(r);
        return;
    }
    ST_INFO("raft", "node %d: the leader %d of epoch %d is unreachable; asking for pre-votes",
            (int)r->cfg.node_id, (int)leader, (int)r->epoch);
    to_prospective(r, 0);
    drive(r);
}

st_err_t st_raft_resign(st_raft_t *r) {
    if (r->failed) return r->failed;
    if (r->role != ST_RAFT_LEADER) return ST_E_NOT_LEADER_OR_FOLLOWER;
    to_resigned(r);
    return r->failed;
}

st_err_t st_raft_describe(st_raft_t *r, st_raft_describe_t *out) {
    if (r->failed) return r->failed;
    if (r->role != ST_RAFT_LEADER) return ST_E_NOT_LEADER_OR_FOLLOWER;
    int64_t now = now_ms(r);
    for (int i = 0; i < r->nvoters; i++) {
        st_raft_replica_state_t *d = &r->desc_voters[i];
        d->replica_id = r->voters[i];
        if (i == r->self_index) {
            d->log_end_offset = r->ops.log_end_offset(r->ops.arg);
            d->last_fetch_timestamp = now;
            d->last_caught_up_timestamp = now;
        } else {
            d->log_end_offset = r->reps[i].end_offset;
            d->last_fetch_timestamp = r->reps[i].last_fetch_ms;
            d->last_caught_up_timestamp = r->reps[i].last_caught_up_ms;
        }
    }
    for (int k = 0; k < r->nobs; k++) {
        st_raft_replica_state_t *d = &r->desc_obs[k];
        d->replica_id = r->obs[k].id;
        d->log_end_offset = r->obs[k].end_offset;
        d->last_fetch_timestamp = r->obs[k].last_fetch_ms;
        d->last_caught_up_timestamp = r->obs[k].last_caught_up_ms;
    }
    out->leader_id = r->cfg.node_id;
    out->leader_epoch = r->epoch;
    out->high_watermark = r->hw;
    out->current_voters = r->desc_voters;
    out->nvoters = r->nvoters;
    out->observers = r->desc_obs;
    out->nobservers = r->nobs;
    return ST_OK;
}

st_raft_role_t st_raft_role(const st_raft_t *r) { return r->role; }
int st_raft_is_voter(const st_raft_t *r) { return is_voter(r); }
int32_t st_raft_epoch(const st_raft_t *r) { return r->epoch; }
int32_t st_raft_leader_id(const st_raft_t *r) { return r->leader_id; }
int32_t st_raft_voted_id(const st_raft_t *r) { return r->voted_id; }
int64_t st_raft_high_watermark(const st_raft_t *r) { return r->hw; }
int64_t st_raft_applied_offset(const st_raft_t *r) { return r->applied; }
st_err_t st_raft_failed(const st_raft_t *r) { return r->failed; }

/* ---- creation ---------------------------------------------------------------------------- */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static void format_ids(const int32_t *ids, int n, char *out, size_t outlen) {
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n && used + 1 < outlen; i++) {
        int k = snprintf(out + used, outlen - used, "%s%" PRId32, i ? "," : "", ids[i]);
        if (k < 0) break;
        used += (size_t)k;
    }
}

static st_err_t check_config(const st_raft_config_t *cfg, const st_raft_ops_t *ops,
                             int32_t *sorted, char *err, size_t errlen) {
    if (cfg->node_id < 0) {
        st_snprintf_marked(err, errlen, "raft: node.id must be set (>= 0), not %" PRId32,
                           cfg->node_id);
        return ST_E_CONFIG;
    }
    if (cfg->nvoters < 1 || cfg->nvoters > ST_RAFT_MAX_VOTERS || !cfg->voters) {
        st_snprintf_marked(err, errlen,
                           "raft: controller.quorum.voters names %" PRId32
                           " voters; 1 to %d are allowed",
                           cfg->nvoters, ST_RAFT_MAX_VOTERS);
        return ST_E_CONFIG;
    }
    memcpy(sorted, cfg->voters, sizeof(int32_t) * (size_t)cfg->nvoters);
    qsort(sorted, (size_t)cfg->nvoters, sizeof(int32_t), cmp_i32);
    for (int i = 0; i < cfg->nvoters; i++) {
        if (sorted[i] < 0 || (i > 0 && sorted[i] == sorted[i - 1])) {
            st_snprintf_marked(err, errlen,
                               "raft: controller.quorum.voters ids must be distinct and >= 0 "
                               "(%" PRId32 ")",
                               sorted[i]);
            return ST_E_CONFIG;
        }
    }
    if (cfg->election_timeout_ms <= 0 || cfg->fetch_timeout_ms <= 0 ||
        cfg->election_backoff_max_ms <= 0 || cfg->request_timeout_ms <= 0 ||
        cfg->retry_backoff_ms < 0 || cfg->fetch_max_wait_ms < 0 || cfg->fetch_max_bytes <= 0 ||
        cfg->snapshot_chunk_bytes <= 0 || cfg->snapshot_min_new_bytes < 0) {
        st_snprintf_marked(err, errlen,
                           "raft: the controller.quorum timeouts and sizes must be positive");
        return ST_E_CONFIG;
    }
    if (!ops || !ops->now_ms || !ops->random || !ops->send || !ops->persist ||
        !ops->log_append || !ops->log_flush || !ops->log_durable_end || !ops->log_truncate ||
        !ops->log_read || !ops->log_start_offset || !ops->log_end_offset ||
        !ops->log_end_offset_for_epoch || !ops->log_reset || !ops->log_delete_before ||
        !ops->snapshot_create || !ops->snapshot_latest || !ops->snapshot_load ||
        !ops->snapshot_read || !ops->snapshot_write || !ops->snapshot_install || !ops->apply) {
        st_snprintf_marked(err, errlen, "raft: an operation of st_raft_ops_t is missing");
        return ST_E_INVAL;
    }
    return ST_OK;
}

st_err_t st_raft_new(const st_raft_config_t *cfg, const st_raft_ops_t *ops,
                     const st_raft_qstate_t *initial, st_raft_t **out, char *err, size_t errlen) {
    int32_t sorted[ST_RAFT_MAX_VOTERS];
    st_err_t e = check_config(cfg, ops, sorted, err, errlen);
    if (e) return e;
    if (initial) {
        int same = initial->nvoters == cfg->nvoters &&
                   memcmp(initial->voters, sorted, sizeof(int32_t) * (size_t)cfg->nvoters) == 0;
        if (!same) {
            char a[200], b[200];
            format_ids(initial->voters, ST_MIN(initial->nvoters, ST_RAFT_MAX_VOTERS), a, sizeof a);
            format_ids(sorted, cfg->nvoters, b, sizeof b);
            st_snprintf_marked(err, errlen,
                               "raft: quorum-state lists voters [%s] but "
                               "controller.quorum.voters names [%s]; a voter set is changed "
                               "only by a reconfiguration, not by editing the configuration",
                               a, b);
            return ST_E_CONFIG;
        }
    }
    st_raft_t *r = st_calloc(1, sizeof *r);
    r->cfg = *cfg;
    r->ops = *ops;
    r->nvoters = cfg->nvoters;
    memcpy(r->voters, sorted, sizeof(int32_t) * (size_t)cfg->nvoters);
    r->cfg.voters = r->voters;
    r->cluster_id = cfg->cluster_id ? st_strdup(cfg->cluster_id) : NULL;
    r->cfg.cluster_id = r->cluster_id;
    r->self_index = voter_index(r, cfg->node_id);
    r->epoch = initial ? initial->leader_epoch : 0;
    r->leader_id = initial ? initial->leader_id : -1;
    r->voted_id = initial ? initial->voted_id : -1;
    r->persisted_leader = r->leader_id;
    r->election_at = r->round_at = r->fetch_timeout_at = r->check_quorum_at = -1;
    r->next_fetch_at = -1;
    r->abandoned_leader = r->heard_leader = -1;
    r->lost_leader = r->lost_epoch = -1;
    forget_requests(r);

    /* The state machine starts from the latest snapshot (KRaft loads it at
     * start); the log must continue it. */
    st_raft_snapshot_id_t id;
    if (r->ops.snapshot_latest(r->ops.arg, &id)) {
        if ((e = r->ops.snapshot_load(r->ops.arg, id)) != ST_OK) {
            st_snprintf_marked(err, errlen, "raft: loading snapshot %" PRId64 "-%" PRId32
                               " failed: %s", id.end_offset, id.epoch, st_err_msg(e));
            goto fail;
        }
        r->has_snap = 1;
        r->snap_id = id;
        r->applied = id.end_offset;
        r->applied_epoch = id.epoch;
        int32_t ep = -1;
        int64_t ep_end = 0;
        r->ops.log_end_offset_for_epoch(r->ops.arg, id.epoch, &ep, &ep_end);
        int64_t lend = r->ops.log_end_offset(r->ops.arg);
        int64_t lstart = r->ops.log_start_offset(r->ops.arg);
        /* A log that ends before the snapshot, or does not hold its last
         * entry's epoch there, is replaced by the snapshot. */
        int consistent = lend >= id.end_offset && lstart <= id.end_offset &&
                         (lstart == id.end_offset || (ep == id.epoch && ep_end >= id.end_offset));
        if (!consistent && (e = r->ops.log_reset(r->ops.arg, id)) != ST_OK) {
            st_snprintf_marked(err, errlen, "raft: resetting the log to snapshot %" PRId64
                               "-%" PRId32 " failed: %s", id.end_offset, id.epoch,
                               st_err_msg(e));
            goto fail;
        }
    } else {
        r->applied = r->ops.log_start_offset(r->ops.arg);
        if (r->applied != 0) {
            st_snprintf_marked(err, errlen,
                               "raft: the metadata log starts at offset %" PRId64
                               " but there is no snapshot below it",
                               r->applied);
            e = ST_E_CORRUPT;
            goto fail;
        }
    }
    r->hw = r->applied;

    int64_t now = now_ms(r);
    if (r->leader_id == cfg->node_id) {
        /* We led this epoch before a restart: we cannot go on leading it
         * (what we had appended is unknown to us now), so we wait for the
         * next (Kafka starts such a node Resigned).  The only voter has
         * no one to wait for: it stands at once, as Kafka's does (a
         * single broker restarted served 1.5 s later otherwise, its
         * listener taking connections meanwhile). */
        r->role = ST_RAFT_RESIGNED;
        r->election_at = r->nvoters == 1 ? now : now + election_timeout(r);
    } else if (r->leader_id >= 0) {
        r->role = ST_RAFT_FOLLOWER;
        r->fetch_timeout_at = now + r->cfg.fetch_timeout_ms;
    } else {
        r->role = ST_RAFT_UNATTACHED;
        if (is_voter(r))
            r->election_at = r->nvoters == 1 ? now : now + election_timeout(r);
        else
            r->next_fetch_at = now; /* an observer looks for the leader at once */
    }
    *out = r;
    return ST_OK;
fail:
    free(r->cluster_id);
    free(r);
    return e;
}

void st_raft_destroy(st_raft_t *r) {
    if (!r) return;
    free(r->cluster_id);
    free(r);
}

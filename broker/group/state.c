/*
 * state.c - the classic consumer group protocol: groups, members,
 * generations, the rebalance, session and sync timers, committed offsets,
 * their expiry, and the records that make all of it survive a restart.
 *
 * The behaviour is Kafka's classic GroupCoordinator: the function names
 * below follow its steps (add_member_and_rebalance, prepare_rebalance,
 * complete_join, ...), so a reader can hold the two side by side.  The
 * group's state machine is drawn in group.h.
 *
 * Timers (all monotonic ms, -1 when not set):
 *   member.hb_deadline  session timeout; reset by every sign of life.  A
 *                       member parked in a JoinGroup or SyncGroup is alive
 *                       by definition (Kafka's hasSatisfiedHeartbeat),
 *                       except a new member, which gets 5 minutes to
 *                       finish its first join.
 *   group.join_deadline PreparingRebalance: the rebalance timeout, or the
 *                       initial delay (group.initial.rebalance.delay.ms)
 *                       of a group's first rebalance, extended while new
 *                       members keep arriving (Kafka's InitialDelayedJoin).
 *   group.sync_deadline after a join: members that have not sent their
 *                       SyncGroup within the rebalance timeout are removed.
 *   pending.deadline    a member told MEMBER_ID_REQUIRED must come back
 *                       within its session timeout.
 *
 * Ownership: groups, members and offsets are owned here; strings handed in
 * are copied.  Waiters belong to the caller and are completed exactly once.
 * Thread: the coordinator's only.
 */
#include "group_int.h"

#include <stdlib.h>

#define NEW_MEMBER_JOIN_TIMEOUT_MS (5 * 60 * 1000)

struct st_gstate {
    st_gstate_config_t cfg;
    st_gstate_ops_t ops;
    st_gmap_t groups; /* id -> st_group_t */
    uint8_t *parts;   /* st_gpart_state_t per __consumer_offsets partition */
    int closed;
    int64_t next_deadline;      /* earliest deadline known (may be early) */
    int64_t next_offset_expiry; /* when expired offsets are next looked for */
    int skipped;
    /* int64 producer id -> txn_groups_t: the groups that may hold its
     * pending offsets (ids checked when its marker comes) */
    st_gmap_t txn_groups;
};

typedef struct txn_groups {
    st_str_t *ids; /* owned */
    int n, cap;
} txn_groups_t;

static const char *const state_names[] = {"Empty", "PreparingRebalance", "CompletingRebalance",
                                          "Stable", "Dead"};

const char *st_group_state_name(st_group_state_t s) {
    return (unsigned)s < ST_ARRAY_SIZE(state_names) ? state_names[s] : "Unknown";
}

static int64_t now_ms(st_gstate_t *s) { return s->ops.mono_ms(s->ops.arg); }
static int64_t wall_ms(st_gstate_t *s) { return s->ops.wall_ms(s->ops.arg); }

static void note_deadline(st_gstate_t *s, int64_t d) {
    if (d >= 0 && (s->next_deadline < 0 || d < s->next_deadline)) s->next_deadline = d;
}

/* For log lines: a string's bytes up to its first NUL, "-" when none. */
#define GS(s) ((s).p ? (s).p : "-")

/* ---- life cycle --------------------------------------------------------- */

st_gstate_t *st_gstate_new(const st_gstate_config_t *cfg, const st_gstate_ops_t *ops) {
    st_gstate_t *s = st_calloc(1, sizeof *s);
    s->cfg = *cfg;
    if (s->cfg.num_partitions <= 0) s->cfg.num_partitions = 1;
    s->ops = *ops;
    st_gmap_init(&s->groups);
    st_gmap_init(&s->txn_groups);
    s->parts = st_calloc((size_t)s->cfg.num_partitions, 1);
    s->next_deadline = -1;
    s->next_offset_expiry = now_ms(s) + s->cfg.offsets_retention_check_interval_ms;
    return s;
}

const st_gstate_config_t *st_gstate_config(const st_gstate_t *s) { return &s->cfg; }

static void member_free(st_gmember_t *m) {
    if (!m) return;
    st_gstr_free(&m->member_id);
    st_gstr_free(&m->instance_id);
    st_gstr_free(&m->client_id);
    st_gstr_free(&m->client_host);
    st_gstr_free(&m->protocol_type);
    for (int i = 0; i < m->nprotocols; i++) {
        st_gstr_free(&m->protocols[i].name);
        free(m->protocols[i].metadata);
    }
    free(m->protocols);
    free(m->assignment);
    free(m);
}

static void offset_free(st_goffset_t *o) {
    if (!o) return;
    st_gstr_free(&o->topic);
    st_gstr_free(&o->metadata);
    free(o);
}

static void subscribed_clear(st_group_t *g) {
    for (int i = 0; i < g->nsubscribed; i++) st_gstr_free(&g->subscribed[i]);
    free(g->subscribed);
    g->subscribed = NULL;
    g->nsubscribed = 0;
    g->subscribed_known = 0;
}

static void group_free(st_group_t *g) {
    for (int i = 0; i < g->nmembers; i++) member_free(g->members[i]);
    free(g->members);
    for (int i = 0; i < g->npending; i++) st_gstr_free(&g->pending[i].member_id);
    free(g->pending);
    size_t it = 0;
    st_goffset_t *o;
    while ((o = st_gmap_next(&g->offsets, &it))) offset_free(o);
    st_gmap_fini(&g->offsets);
    it = 0;
    while ((o = st_gmap_next(&g->txn_pending, &it))) offset_free(o);
    st_gmap_fini(&g->txn_pending);
    st_gmap_fini(&g->open_txns);
    subscribed_clear(g);
    st_gstr_free(&g->id);
    st_gstr_free(&g->protocol_type);
    st_gstr_free(&g->protocol_name);
    st_gstr_free(&g->leader_id);
    free(g);
}

/* ---- waiters ------------------------------------------------------------- */

static void join_error(st_group_waiter_t *w, st_err_t e, st_str_t member_id, int32_t part) {
    st_group_join_result_t r = {e, member_id.len < 0 ? st_str("") : member_id, -1, ST_STR_NULL,
                                ST_STR_NULL, st_str(""), 0, NULL, 0, part};
    w->join_done(w, &r);
}

static void sync_error(st_group_waiter_t *w, st_err_t e, int32_t part) {
    st_group_sync_result_t r = {e, ST_STR_NULL, ST_STR_NULL, NULL, 0, part};
    w->sync_done(w, &r);
}

static void complete_member_join(st_group_t *g, st_gmember_t *m, st_err_t e) {
    if (!m->join_waiter) return;
    st_group_waiter_t *w = m->join_waiter;
    m->join_waiter = NULL;
    g->num_awaiting_join--;
    join_error(w, e, e == ST_E_UNKNOWN_MEMBER_ID ? st_str("") : m->member_id, g->partition);
}

static void complete_member_sync(st_group_t *g, st_gmember_t *m, st_err_t e) {
    if (!m->sync_waiter) return;
    st_group_waiter_t *w = m->sync_waiter;
    m->sync_waiter = NULL;
    sync_error(w, e, g->partition);
}

void st_gstate_destroy(st_gstate_t *s) {
    if (!s) return;
    st_gstate_close(s);
    size_t it = 0;
    st_group_t *g;
    while ((g = st_gmap_next(&s->groups, &it))) group_free(g);
    st_gmap_fini(&s->groups);
    it = 0;
    txn_groups_t *t;
    while ((t = st_gmap_next(&s->txn_groups, &it))) {
        for (int i = 0; i < t->n; i++) st_gstr_free(&t->ids[i]);
        free(t->ids);
        free(t);
    }
    st_gmap_fini(&s->txn_groups);
    free(s->parts);
    free(s);
}

void st_gstate_close(st_gstate_t *s) {
    s->closed = 1;
    size_t it = 0;
    st_group_t *g;
    while ((g = st_gmap_next(&s->groups, &it))) {
        for (int i = 0; i < g->nmembers; i++) {
            complete_member_join(g, g->members[i], ST_E_NOT_COORDINATOR);
            complete_member_sync(g, g->members[i], ST_E_NOT_COORDINATOR);
        }
    }
}

/* ---- partitions ---------------------------------------------------------- */

void st_gstate_set_partition(st_gstate_t *s, int32_t p, st_gpart_state_t st) {
    if (p >= 0 && p < s->cfg.num_partitions) s->parts[p] = (uint8_t)st;
}

st_gpart_state_t st_gstate_partition(const st_gstate_t *s, int32_t p) {
    return p >= 0 && p < s->cfg.num_partitions ? (st_gpart_state_t)s->parts[p] : ST_GPART_NOT_OWNED;
}

int32_t st_gstate_partition_of(const st_gstate_t *s, st_str_t group_id) {
    return st_group_partition_for(group_id.p ? group_id.p : "", (size_t)ST_MAX(group_id.len, 0),
                                  s->cfg.num_partitions);
}

int st_gstate_loading(const st_gstate_t *s) {
    for (int i = 0; i < s->cfg.num_partitions; i++)
        if (s->parts[i] == ST_GPART_LOADING) return 1;
    return 0;
}

int st_gstate_skipped_records(const st_gstate_t *s) { return s->skipped; }

int st_gstate_closed(const st_gstate_t *s) { return s->closed; }

st_err_t st_gstate_check(st_gstate_t *s, st_str_t group_id, int allow_empty_id) {
    if (group_id.len < 0 || (!allow_empty_id && group_id.len == 0)) return ST_E_INVALID_GROUP_ID;
    if (s->closed) return ST_E_COORDINATOR_NOT_AVAILABLE;
    int32_t p = st_gstate_partition_of(s, group_id);
    if (s->parts[p] == ST_GPART_UNKNOWN && s->ops.ensure_partition)
        s->ops.ensure_partition(s->ops.arg, p);
    switch (s->parts[p]) {
    case ST_GPART_LOADED: return ST_OK;
    case ST_GPART_LOADING: return ST_E_COORDINATOR_LOAD_IN_PROGRESS;
    default: return ST_E_NOT_COORDINATOR;
    }
}

/* ---- groups, members ------------------------------------------------------ */

st_group_t *st_gstate_group(st_gstate_t *s, st_str_t group_id) {
    if (group_id.len < 0) return NULL;
    st_group_t *g = st_gmap_get(&s->groups, group_id.p, (size_t)group_id.len);
    if (g && s->parts[g->partition] != ST_GPART_LOADED) return NULL;
    return g;
}

void st_gstate_foreach_group(st_gstate_t *s, void (*fn)(st_group_t *g, void *arg), void *arg) {
    size_t it = 0;
    st_group_t *g;
    while ((g = st_gmap_next(&s->groups, &it)))
        if (s->parts[g->partition] == ST_GPART_LOADED) fn(g, arg);
}

static void transition(st_gstate_t *s, st_group_t *g, st_group_state_t to) {
    g->state = to;
    g->state_ts = wall_ms(s);
}

static st_group_t *group_new(st_gstate_t *s, st_str_t id, int32_t partition) {
    st_group_t *g = st_calloc(1, sizeof *g);
    g->id = st_gstr_dup(id.len < 0 ? st_str("") : id);
    g->protocol_type = g->protocol_name = g->leader_id = ST_STR_NULL;
    g->partition = partition;
    g->state = ST_GROUP_EMPTY;
    g->state_ts = wall_ms(s);
    g->join_deadline = g->sync_deadline = -1;
    st_gmap_init(&g->offsets);
    st_gmap_init(&g->txn_pending);
    st_gmap_init(&g->open_txns);
    st_gmap_put(&s->groups, g->id.p, (size_t)g->id.len, g);
    return g;
}

static void group_drop(st_gstate_t *s, st_group_t *g) {
    st_gmap_del(&s->groups, g->id.p, (size_t)g->id.len);
    group_free(g);
}

static st_gmember_t *find_member(const st_group_t *g, st_str_t member_id) {
    for (int i = 0; i < g->nmembers; i++)
        if (st_gstr_eq(g->members[i]->member_id, member_id)) return g->members[i];
    return NULL;
}

static st_gmember_t *static_member(const st_group_t *g, st_str_t instance_id) {
    if (instance_id.len < 0) return NULL;
    for (int i = 0; i < g->nmembers; i++)
        if (st_gstr_eq(g->members[i]->instance_id, instance_id))
            return g->members[i];
    return NULL;
}

static int is_pending(const st_group_t *g, st_str_t member_id) {
    for (int i = 0; i < g->npending; i++)
        if (st_gstr_eq(g->pending[i].member_id, member_id)) return 1;
    return 0;
}

static void remove_pending(st_group_t *g, st_str_t member_id) {
    for (int i = 0; i < g->npending; i++) {
        if (!st_gstr_eq(g->pending[i].member_id, member_id)) continue;
        st_gstr_free(&g->pending[i].member_id);
        g->pending[i] = g->pending[--g->npending];
        return;
    }
}

static void add_pending(st_gstate_t *s, st_group_t *g, st_str_t member_id, int64_t timeout) {
    if (g->npending == g->cappending) {
        g->cappending = g->cappending ? g->cappending * 2 : 4;
        g->pending = st_realloc(g->pending, sizeof *g->pending * (size_t)g->cappending);
    }
    g->pending[g->npending].member_id = st_gstr_dup(member_id);
    g->pending[g->npending].deadline = now_ms(s) + timeout;
    note_deadline(s, g->pending[g->npending].deadline);
    g->npending++;
}

static void set_protocols(st_gmember_t *m, const st_group_protocol_t *p, int n) {
    for (int i = 0; i < m->nprotocols; i++) {
        st_gstr_free(&m->protocols[i].name);
        free(m->protocols[i].metadata);
    }
    free(m->protocols);
    m->protocols = st_calloc((size_t)n + 1, sizeof *m->protocols);
    m->nprotocols = n;
    for (int i = 0; i < n; i++) {
        m->protocols[i].name = st_gstr_dup(p[i].name.len < 0 ? st_str("") : p[i].name);
        m->protocols[i].metadata_len = p[i].metadata_len > 0 ? p[i].metadata_len : 0;
        m->protocols[i].metadata = st_malloc((size_t)m->protocols[i].metadata_len + 1);
        if (m->protocols[i].metadata_len)
            memcpy(m->protocols[i].metadata, p[i].metadata, (size_t)p[i].metadata_len);
    }
}

static const st_gprotocol_t *member_protocol(const st_gmember_t *m, st_str_t name) {
    for (int i = 0; name.len >= 0 && i < m->nprotocols; i++)
        if (st_gstr_eq(m->protocols[i].name, name)) return &m->protocols[i];
    return NULL;
}

/* Kafka's MemberMetadata.matches: same protocols, same order, same bytes. */
static int member_matches(const st_gmember_t *m, const st_group_protocol_t *p, int n) {
    if (n != m->nprotocols) return 0;
    for (int i = 0; i < n; i++) {
        int32_t len = p[i].metadata_len > 0 ? p[i].metadata_len : 0;
        if (!st_gstr_eq(m->protocols[i].name, p[i].name.len < 0 ? st_str("") : p[i].name) ||
            m->protocols[i].metadata_len != len ||
            (len && memcmp(m->protocols[i].metadata, p[i].metadata, (size_t)len)))
            return 0;
    }
    return 1;
}

static int supported_by_all(const st_group_t *g, st_str_t name) {
    for (int i = 0; i < g->nmembers; i++)
        if (!member_protocol(g->members[i], name)) return 0;
    return 1;
}

/* Kafka's supportsProtocols: an empty group takes any non-empty protocol
 * list; otherwise the type must match and one protocol be supported by
 * every member. */
static int supports_protocols(const st_group_t *g, st_str_t type, const st_group_protocol_t *p,
                              int n) {
    if (g->state == ST_GROUP_EMPTY) return type.len > 0 && n > 0;
    if (!st_gstr_eq(g->protocol_type, type)) return 0;
    for (int i = 0; i < n; i++)
        if (supported_by_all(g, p[i].name.len < 0 ? st_str("") : p[i].name)) return 1;
    return 0;
}

/* The vote: each member names its most preferred protocol among those all
 * members support; the most named wins (ties: the earliest member's). */
static st_str_t select_protocol(const st_group_t *g) {
    st_str_t best = ST_STR_NULL;
    int best_votes = 0;
    for (int i = 0; i < g->nmembers; i++) {
        st_str_t vote = ST_STR_NULL;
        for (int k = 0; k < g->members[i]->nprotocols && vote.len < 0; k++)
            if (supported_by_all(g, g->members[i]->protocols[k].name))
                vote = g->members[i]->protocols[k].name;
        if (vote.len < 0) continue;
        int votes = 0;
        for (int j = 0; j < g->nmembers; j++) {
            st_str_t v = ST_STR_NULL;
            for (int k = 0; k < g->members[j]->nprotocols && v.len < 0; k++)
                if (supported_by_all(g, g->members[j]->protocols[k].name))
                    v = g->members[j]->protocols[k].name;
            votes += st_gstr_eq(v, vote);
        }
        if (votes > best_votes) {
            best = vote;
            best_votes = votes;
        }
    }
    return best;
}

static int32_t group_rebalance_timeout(const st_group_t *g) {
    int32_t t = 0;
    for (int i = 0; i < g->nmembers; i++) t = ST_MAX(t, g->members[i]->rebalance_timeout_ms);
    return t;
}

static void schedule_hb(st_gstate_t *s, st_gmember_t *m, int64_t timeout_ms) {
    m->hb_deadline = now_ms(s) + timeout_ms;
    note_deadline(s, m->hb_deadline);
}

static void group_add(st_group_t *g, st_gmember_t *m, st_group_waiter_t *w) {
    if (g->nmembers == 0) st_gstr_set(&g->protocol_type, m->protocol_type);
    if (g->leader_id.len < 0) g->leader_id = st_gstr_dup(m->member_id);
    if (g->nmembers == g->capmembers) {
        g->capmembers = g->capmembers ? g->capmembers * 2 : 8;
        g->members = st_realloc(g->members, sizeof *g->members * (size_t)g->capmembers);
    }
    g->members[g->nmembers++] = m;
    m->join_waiter = w;
    if (w) g->num_awaiting_join++;
    remove_pending(g, m->member_id);
}

/* Unlink a member (its waiters were answered by the caller).  The leader
 * passes to the first remaining member. */
static void group_remove(st_group_t *g, st_gmember_t *m) {
    int i = 0;
    while (i < g->nmembers && g->members[i] != m) i++;
    if (i == g->nmembers) return;
    memmove(&g->members[i], &g->members[i + 1], sizeof *g->members * (size_t)(g->nmembers - i - 1));
    g->nmembers--;
    if (m->join_waiter) g->num_awaiting_join--;
    if (st_gstr_eq(g->leader_id, m->member_id))
        st_gstr_set(&g->leader_id, g->nmembers ? g->members[0]->member_id : ST_STR_NULL);
    remove_pending(g, m->member_id);
}

static st_err_t validate_current_member(const st_group_t *g, st_str_t member_id,
                                        st_str_t instance_id) {
    if (instance_id.len >= 0) {
        const st_gmember_t *m = static_member(g, instance_id);
        if (!m) return ST_E_UNKNOWN_MEMBER_ID;
        if (!st_gstr_eq(m->member_id, member_id)) return ST_E_FENCED_INSTANCE_ID;
    }
    return find_member(g, member_id) ? ST_OK : ST_E_UNKNOWN_MEMBER_ID;
}

static void compute_subscribed(st_group_t *g) {
    subscribed_clear(g);
    if (!st_str_eq(g->protocol_type, ST_GROUP_CONSUMER_PROTOCOL)) return;
    if (g->nmembers == 0) {
        g->subscribed_known = 1;
        return;
    }
    if (g->protocol_name.len < 0) return;
    for (int i = 0; i < g->nmembers; i++) {
        const st_gprotocol_t *p = member_protocol(g->members[i], g->protocol_name);
        st_str_t *topics;
        int n = p ? st_grec_subscription_topics(p->metadata, p->metadata_len, &topics) : -1;
        if (n < 0) {
            subscribed_clear(g);
            return;
        }
        for (int k = 0; k < n; k++) {
            int dup = 0;
            for (int j = 0; j < g->nsubscribed && !dup; j++) dup = st_gstr_eq(g->subscribed[j], topics[k]);
            if (dup) {
                st_gstr_free(&topics[k]);
                continue;
            }
            g->subscribed = st_realloc(g->subscribed, sizeof *g->subscribed * (size_t)(g->nsubscribed + 1));
            g->subscribed[g->nsubscribed++] = topics[k];
        }
        free(topics);
    }
    g->subscribed_known = 1;
}

int st_gstate_subscribed(const st_group_t *g, st_str_t topic) {
    if (!g->subscribed_known) return 1;
    for (int i = 0; i < g->nsubscribed; i++)
        if (st_gstr_eq(g->subscribed[i], topic)) return 1;
    return 0;
}

/* ---- writing records ------------------------------------------------------- */

/* What an error of the group metadata append becomes for the client
 * (Kafka's appendGroupMetadataErrorToResponseError). */
static st_err_t group_store_error(st_err_t e) {
    switch (e) {
    case ST_E_NONE: return ST_OK;
    case ST_E_UNKNOWN_TOPIC_OR_PARTITION:
    case ST_E_NOT_ENOUGH_REPLICAS:
    case ST_E_REQUEST_TIMED_OUT: return ST_E_COORDINATOR_NOT_AVAILABLE;
    case ST_E_NOT_LEADER_OR_FOLLOWER:
    case ST_E_KAFKA_STORAGE_ERROR:
    case ST_E_IO:
    case ST_E_NOFILE:
    case ST_E_PERM:
    case ST_E_READ_ONLY_FS:
    case ST_E_NOSPACE: return ST_E_NOT_COORDINATOR;
    case ST_E_MESSAGE_TOO_LARGE:
    case ST_E_RECORD_LIST_TOO_LARGE:
    case ST_E_INVALID_FETCH_SIZE: return ST_E_UNKNOWN_SERVER_ERROR;
    default: return (int)e >= 1000 ? ST_E_UNKNOWN_SERVER_ERROR : e;
    }
}

/* ... and of an offset commit's append (Kafka's storeOffsets). */
static st_err_t commit_store_error(st_err_t e) {
    switch (e) {
    case ST_E_NONE: return ST_OK;
    case ST_E_UNKNOWN_TOPIC_OR_PARTITION:
    case ST_E_NOT_ENOUGH_REPLICAS:
    case ST_E_NOT_ENOUGH_REPLICAS_AFTER_APPEND: return ST_E_COORDINATOR_NOT_AVAILABLE;
    case ST_E_NOT_LEADER_OR_FOLLOWER:
    case ST_E_KAFKA_STORAGE_ERROR:
    case ST_E_IO:
    case ST_E_NOFILE:
    case ST_E_PERM:
    case ST_E_READ_ONLY_FS:
    case ST_E_NOSPACE: return ST_E_NOT_COORDINATOR;
    case ST_E_MESSAGE_TOO_LARGE:
    case ST_E_RECORD_LIST_TOO_LARGE:
    case ST_E_INVALID_FETCH_SIZE: return ST_E_INVALID_COMMIT_OFFSET_SIZE;
    default: return (int)e >= 1000 ? ST_E_UNKNOWN_SERVER_ERROR : e;
    }
}

/* The group's metadata record (Kafka's storeGroup).  assignment[i] is the
 * new assignment of member i, or NULL to keep what the member has. */
static st_err_t store_group(st_gstate_t *s, st_group_t *g, const st_group_assignment_t *assign) {
    st_grec_group_value_t v;
    memset(&v, 0, sizeof v);
    v.protocol_type = g->protocol_type.len < 0 ? st_str("") : g->protocol_type;
    v.generation = g->generation;
    v.protocol = g->protocol_name;
    v.leader = g->leader_id;
    v.state_ts = g->state_ts;
    v.nmembers = g->nmembers;
    v.members = st_calloc((size_t)g->nmembers + 1, sizeof *v.members);
    for (int i = 0; i < g->nmembers; i++) {
        const st_gmember_t *m = g->members[i];
        const st_gprotocol_t *p = member_protocol(m, g->protocol_name);
        st_grec_member_t *r = &v.members[i];
        r->member_id = m->member_id;
        r->instance_id = m->instance_id;
        r->client_id = m->client_id.len < 0 ? st_str("") : m->client_id;
        r->client_host = m->client_host.len < 0 ? st_str("") : m->client_host;
        r->rebalance_timeout_ms = m->rebalance_timeout_ms;
        r->session_timeout_ms = m->session_timeout_ms;
        r->subscription = p ? (st_bytes_t){p->metadata, p->metadata_len} : (st_bytes_t){NULL, 0};
        r->assignment = assign ? (st_bytes_t){assign[i].assignment, assign[i].assignment_len}
                               : (st_bytes_t){m->assignment, m->assignment_len};
    }
    st_buf_t k, val;
    st_buf_init(&k);
    st_buf_init(&val);
    st_grec_group_key(&k, g->id);
    st_grec_group_value(&val, &v);
    st_batch_record_t rec = {k.data, (int32_t)k.len, val.data, (int32_t)val.len};
    st_err_t e = s->ops.append(s->ops.arg, g->partition, -1, -1, &rec, 1, NULL);
    st_buf_fini(&k);
    st_buf_fini(&val);
    free(v.members);
    if (!e) g->has_metadata = 1;
    else ST_WARN("group", "group %s: storing its metadata failed: %s", GS(g->id), st_err_name(e));
    return group_store_error(e);
}

/* Tombstones for the given offsets, and for the group itself when
 * with_group. */
static st_err_t write_tombstones(st_gstate_t *s, st_group_t *g, st_goffset_t **offs, int n,
                                 int with_group) {
    st_batch_record_t *recs = st_calloc((size_t)n + 2, sizeof *recs);
    st_buf_t *keys = st_calloc((size_t)n + 2, sizeof *keys);
    int k = 0;
    for (int i = 0; i < n; i++, k++) {
        st_buf_init(&keys[k]);
        st_grec_offset_key(&keys[k], g->id, offs[i]->topic, offs[i]->partition);
        recs[k] = (st_batch_record_t){keys[k].data, (int32_t)keys[k].len, NULL, -1};
    }
    if (with_group) {
        st_buf_init(&keys[k]);
        st_grec_group_key(&keys[k], g->id);
        recs[k] = (st_batch_record_t){keys[k].data, (int32_t)keys[k].len, NULL, -1};
        k++;
    }
    st_err_t e = k ? s->ops.append(s->ops.arg, g->partition, -1, -1, recs, k, NULL) : ST_OK;
    for (int i = 0; i < k; i++) st_buf_fini(&keys[i]);
    free(keys);
    free(recs);
    return e;
}

/* ---- offsets ----------------------------------------------------------------- */

/* The offsets map's key: the partition (4 bytes, big-endian), then the
 * topic's bytes.  Small keys live in buf; larger ones are malloc'ed
 * (*heap set, the caller frees it). */
static const char *offset_key(char *buf, size_t cap, st_str_t topic, int32_t partition,
                              size_t *len, char **heap) {
    size_t tl = (size_t)ST_MAX(topic.len, 0);
    char *k = buf;
    *heap = NULL;
    if (tl + 4 > cap) k = *heap = st_malloc(tl + 4);
    st_be32_put((uint8_t *)k, (uint32_t)partition);
    if (tl) memcpy(k + 4, topic.p, tl);
    *len = tl + 4;
    return k;
}

const st_goffset_t *st_gstate_offset(st_group_t *g, st_str_t topic, int32_t partition) {
    char buf[256], *heap;
    size_t n;
    const char *key = offset_key(buf, sizeof buf, topic, partition, &n, &heap);
    const st_goffset_t *o = st_gmap_get(&g->offsets, key, n);
    free(heap);
    return o;
}

void st_gstate_foreach_offset(st_group_t *g, void (*fn)(const st_goffset_t *o, void *arg),
                              void *arg) {
    size_t it = 0;
    st_goffset_t *o;
    while ((o = st_gmap_next(&g->offsets, &it))) fn(o, arg);
}

static st_goffset_t *offset_new(st_str_t topic, int32_t partition, int64_t offset, int32_t epoch,
                                st_str_t metadata, int64_t commit_ts, int64_t expire_ts,
                                int64_t record_offset, int64_t producer_id) {
    st_goffset_t *o = st_calloc(1, sizeof *o);
    o->topic = st_gstr_dup(topic.len < 0 ? st_str("") : topic);
    o->partition = partition;
    o->offset = offset;
    o->leader_epoch = epoch;
    o->metadata = st_gstr_dup(metadata.len < 0 ? st_str("") : metadata);
    o->commit_ts = commit_ts;
    o->expire_ts = expire_ts;
    o->record_offset = record_offset;
    o->producer_id = producer_id;
    return o;
}

/* The committed offset becomes o (owned from here). */
static void offset_put(st_group_t *g, st_goffset_t *o) {
    char buf[256], *heap;
    size_t n;
    const char *key = offset_key(buf, sizeof buf, o->topic, o->partition, &n, &heap);
    o->producer_id = -1;
    offset_free(st_gmap_put(&g->offsets, key, n, o));
    free(heap);
}

static void offset_set(st_group_t *g, st_str_t topic, int32_t partition, int64_t offset,
                       int32_t epoch, st_str_t metadata, int64_t commit_ts, int64_t expire_ts,
                       int64_t record_offset) {
    offset_put(g, offset_new(topic, partition, offset, epoch, metadata, commit_ts, expire_ts,
                             record_offset, -1));
}

static void pending_drop_partition(st_group_t *g, st_str_t topic, int32_t partition);

/* The committed offset goes, and with it (as a tombstone does in replay)
 * every transaction's pending offset of the partition. */
static void offset_remove(st_group_t *g, st_str_t topic, int32_t partition) {
    char buf[256], *heap;
    size_t n;
    const char *key = offset_key(buf, sizeof buf, topic, partition, &n, &heap);
    offset_free(st_gmap_del(&g->offsets, key, n));
    free(heap);
    pending_drop_partition(g, topic, partition);
}

/* ---- pending transactional offsets --------------------------------------------- */

/* The pending map's key: the producer id (8 bytes, big-endian), then the
 * offsets map's key. */
static const char *pending_key(char *buf, size_t cap, int64_t producer_id, st_str_t topic,
                               int32_t partition, size_t *len, char **heap) {
    size_t tl = (size_t)ST_MAX(topic.len, 0);
    char *k = buf;
    *heap = NULL;
    if (tl + 12 > cap) k = *heap = st_malloc(tl + 12);
    st_be64_put((uint8_t *)k, (uint64_t)producer_id);
    st_be32_put((uint8_t *)k + 8, (uint32_t)partition);
    if (tl) memcpy(k + 12, topic.p, tl);
    *len = tl + 12;
    return k;
}

static void open_txns_add(st_group_t *g, st_str_t topic, int32_t partition, intptr_t delta) {
    char buf[256], *heap;
    size_t n;
    const char *key = offset_key(buf, sizeof buf, topic, partition, &n, &heap);
    intptr_t count = (intptr_t)st_gmap_get(&g->open_txns, key, n) + delta;
    if (count > 0) st_gmap_put(&g->open_txns, key, n, (void *)count);
    else st_gmap_del(&g->open_txns, key, n);
    free(heap);
}

int st_gstate_txn_pending(st_group_t *g, st_str_t topic, int32_t partition) {
    char buf[256], *heap;
    size_t n;
    const char *key = offset_key(buf, sizeof buf, topic, partition, &n, &heap);
    int open = st_gmap_get(&g->open_txns, key, n) != NULL;
    free(heap);
    return open;
}

const st_goffset_t *st_gstate_pending_offset(st_group_t *g, int64_t producer_id, st_str_t topic,
                                             int32_t partition) {
    char buf[256], *heap;
    size_t n;
    const char *key = pending_key(buf, sizeof buf, producer_id, topic, partition, &n, &heap);
    const st_goffset_t *o = st_gmap_get(&g->txn_pending, key, n);
    free(heap);
    return o;
}

/* Some producer's pending offset of the partition, or NULL. */
static st_goffset_t *pending_any(st_group_t *g, st_str_t topic, int32_t partition) {
    if (!st_gstate_txn_pending(g, topic, partition)) return NULL;
    size_t it = 0;
    st_goffset_t *o;
    while ((o = st_gmap_next(&g->txn_pending, &it)))
        if (o->partition == partition && st_gstr_eq(o->topic, topic)) return o;
    return NULL;
}

static void txn_index_add(st_gstate_t *s, int64_t producer_id, st_str_t group_id) {
    uint8_t k[8];
    st_be64_put(k, (uint64_t)producer_id);
    txn_groups_t *t = st_gmap_get(&s->txn_groups, k, sizeof k);
    if (!t) {
        t = st_calloc(1, sizeof *t);
        st_gmap_put(&s->txn_groups, k, sizeof k, t);
    }
    for (int i = 0; i < t->n; i++)
        if (st_gstr_eq(t->ids[i], group_id)) return;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 4;
        t->ids = st_realloc(t->ids, sizeof *t->ids * (size_t)t->cap);
    }
    t->ids[t->n++] = st_gstr_dup(group_id);
}

/* Ids of groups that are gone leave the index (a partition unloaded). */
static void txn_index_prune(st_gstate_t *s) {
    size_t it = 0;
    txn_groups_t *t;
    while ((t = st_gmap_next(&s->txn_groups, &it))) {
        for (int i = 0; i < t->n;) {
            if (st_gmap_get(&s->groups, t->ids[i].p, (size_t)t->ids[i].len)) {
                i++;
                continue;
            }
            st_gstr_free(&t->ids[i]);
            t->ids[i] = t->ids[--t->n];
        }
        if (t->n) continue;
        uint8_t k[8]; /* the slot just returned holds the producer id */
        memcpy(k, s->txn_groups.slots[it - 1].key, sizeof k);
        st_gmap_del(&s->txn_groups, k, sizeof k);
        free(t->ids);
        free(t);
    }
}

static void pending_set(st_gstate_t *s, st_group_t *g, int64_t producer_id, st_str_t topic,
                        int32_t partition, int64_t offset, int32_t epoch, st_str_t metadata,
                        int64_t commit_ts, int64_t record_offset) {
    char buf[256], *heap;
    size_t n;
    const char *key = pending_key(buf, sizeof buf, producer_id, topic, partition, &n, &heap);
    st_goffset_t *o = offset_new(topic, partition, offset, epoch, metadata, commit_ts, -1,
                                 record_offset, producer_id);
    st_goffset_t *old = st_gmap_put(&g->txn_pending, key, n, o);
    free(heap);
    if (old) offset_free(old);
    else open_txns_add(g, topic, partition, 1);
    txn_index_add(s, producer_id, g->id);
}

static void pending_drop_partition(st_group_t *g, st_str_t topic, int32_t partition) {
    if (!st_gstate_txn_pending(g, topic, partition)) return;
    st_str_t t = st_gstr_dup(topic.len < 0 ? st_str("") : topic);
    size_t it = 0;
    st_goffset_t *o;
    while ((o = st_gmap_next(&g->txn_pending, &it))) {
        if (o->partition != partition || !st_gstr_eq(o->topic, t)) continue;
        char buf[256], *heap;
        size_t n;
        const char *key = pending_key(buf, sizeof buf, o->producer_id, t, partition, &n, &heap);
        st_gmap_del(&g->txn_pending, key, n);
        free(heap);
        offset_free(o);
    }
    char buf[256], *heap;
    size_t n;
    const char *key = offset_key(buf, sizeof buf, t, partition, &n, &heap);
    st_gmap_del(&g->open_txns, key, n);
    free(heap);
    st_gstr_free(&t);
}

/* Kafka's replayEndTransactionMarker for one group: the producer's pending
 * offsets are committed (unless the committed offset's record is the
 * later one in the log: a non-transactional commit after the
 * transaction's) or dropped. */
static void end_group_txn(st_group_t *g, int64_t producer_id, int commit, int *ncommitted,
                          int *ndropped) {
    size_t it = 0;
    st_goffset_t *o;
    while ((o = st_gmap_next(&g->txn_pending, &it))) {
        if (o->producer_id != producer_id) continue;
        char buf[256], *heap;
        size_t n;
        const char *key = pending_key(buf, sizeof buf, producer_id, o->topic, o->partition, &n, &heap);
        st_gmap_del(&g->txn_pending, key, n);
        free(heap);
        open_txns_add(g, o->topic, o->partition, -1);
        const st_goffset_t *cur = commit ? st_gstate_offset(g, o->topic, o->partition) : NULL;
        if (commit && (!cur || o->record_offset > cur->record_offset)) {
            offset_put(g, o);
            (*ncommitted)++;
        } else {
            offset_free(o);
            (*ndropped)++;
        }
    }
}

static int group_is_hollow(const st_group_t *g) {
    return !g->has_metadata && !g->offsets.n && !g->txn_pending.n && !g->nmembers;
}

static void group_drop(st_gstate_t *s, st_group_t *g);

void st_gstate_end_txn(st_gstate_t *s, int32_t partition, int64_t producer_id, int commit) {
    uint8_t k[8];
    st_be64_put(k, (uint64_t)producer_id);
    txn_groups_t *t = st_gmap_get(&s->txn_groups, k, sizeof k);
    if (!t) return;
    int ncommitted = 0, ndropped = 0, ngroups = 0;
    for (int i = 0; i < t->n;) {
        st_group_t *g = st_gmap_get(&s->groups, t->ids[i].p, (size_t)t->ids[i].len);
        if (g && g->partition != partition) {
            i++; /* its own partition's marker ends it there */
            continue;
        }
        if (g) {
            end_group_txn(g, producer_id, commit, &ncommitted, &ndropped);
            ngroups++;
            /* a group that only held this transaction's offsets is gone
             * (nothing stands for it in the log) */
            if (group_is_hollow(g) && g->state == ST_GROUP_EMPTY) group_drop(s, g);
        }
        st_gstr_free(&t->ids[i]);
        t->ids[i] = t->ids[--t->n];
    }
    if (!t->n) {
        st_gmap_del(&s->txn_groups, k, sizeof k);
        free(t->ids);
        free(t);
    }
    if (ngroups && s->parts[partition] == ST_GPART_LOADED)
        ST_DEBUG("group", "%s-%d: producer %lld %s: %d offsets committed, %d dropped in %d groups",
                 ST_GROUP_OFFSETS_TOPIC, (int)partition, (long long)producer_id,
                 commit ? "committed" : "aborted", ncommitted, ndropped, ngroups);
}

/* ---- the join --------------------------------------------------------------- */

static void prepare_rebalance(st_gstate_t *s, st_group_t *g, const char *reason);
static void maybe_complete_join(st_gstate_t *s, st_group_t *g);

static int can_rebalance(const st_group_t *g) {
    return g->state == ST_GROUP_STABLE || g->state == ST_GROUP_COMPLETING_REBALANCE ||
           g->state == ST_GROUP_EMPTY;
}

static void maybe_prepare_rebalance(st_gstate_t *s, st_group_t *g, const char *reason) {
    if (can_rebalance(g)) prepare_rebalance(s, g, reason);
}

/* Fill a join result for member m of the current generation; with members,
 * the leader's list of every member's metadata (caller frees *list). */
static void join_result(const st_group_t *g, const st_gmember_t *m, int with_members,
                        st_str_t leader, int skip, st_group_join_result_t *r,
                        st_group_join_member_t **list) {
    *list = NULL;
    memset(r, 0, sizeof *r);
    r->error = ST_OK;
    r->member_id = m->member_id;
    r->generation = g->generation;
    r->protocol_type = g->protocol_type;
    r->protocol_name = g->protocol_name;
    r->leader = leader.len < 0 ? st_str("") : leader;
    r->skip_assignment = skip;
    r->partition = g->partition;
    if (!with_members) return;
    *list = st_calloc((size_t)g->nmembers + 1, sizeof **list);
    for (int i = 0; i < g->nmembers; i++) {
        const st_gprotocol_t *p = member_protocol(g->members[i], g->protocol_name);
        (*list)[i] = (st_group_join_member_t){g->members[i]->member_id, g->members[i]->instance_id,
                                              p ? p->metadata : NULL, p ? p->metadata_len : 0};
    }
    r->members = *list;
    r->nmembers = g->nmembers;
}

/* Answer member m's parked JoinGroup with the current generation. */
static void invoke_join(st_group_t *g, st_gmember_t *m, int with_members, st_str_t leader,
                        int skip) {
    if (!m->join_waiter) return;
    st_group_waiter_t *w = m->join_waiter;
    m->join_waiter = NULL;
    g->num_awaiting_join--;
    st_group_join_result_t r;
    st_group_join_member_t *list;
    join_result(g, m, with_members, leader, skip, &r, &list);
    w->join_done(w, &r);
    free(list);
}

/* Answer a JoinGroup directly (not through the member's parked slot). */
static void reply_join(st_group_t *g, st_gmember_t *m, st_group_waiter_t *w, int with_members,
                       st_str_t leader) {
    st_group_join_result_t r;
    st_group_join_member_t *list;
    join_result(g, m, with_members, leader, 0, &r, &list);
    w->join_done(w, &r);
    free(list);
}

static void update_member(st_group_t *g, st_gmember_t *m, const st_group_protocol_t *p, int n,
                          int32_t rebalance_ms, int32_t session_ms, st_group_waiter_t *w) {
    set_protocols(m, p, n);
    m->rebalance_timeout_ms = rebalance_ms;
    m->session_timeout_ms = session_ms;
    if (m->join_waiter && w) {
        /* A second JoinGroup while the first is parked (the client gave up
         * on it): the first one is answered, never dropped. */
        st_group_waiter_t *old = m->join_waiter;
        m->join_waiter = NULL;
        g->num_awaiting_join--;
        join_error(old, ST_E_REBALANCE_IN_PROGRESS, m->member_id, g->partition);
    }
    if (w && !m->join_waiter) g->num_awaiting_join++;
    else if (!w && m->join_waiter) g->num_awaiting_join--;
    m->join_waiter = w;
}

static st_str_t or_empty(st_str_t s) { return s.len < 0 ? st_str("") : s; }

static st_gmember_t *member_new(const st_group_join_params_t *p, st_str_t member_id) {
    st_gmember_t *m = st_calloc(1, sizeof *m);
    m->member_id = st_gstr_dup(member_id);
    m->instance_id = st_gstr_dup(p->instance_id);
    m->client_id = st_gstr_dup(or_empty(p->client_id));
    m->client_host = st_gstr_dup(or_empty(p->client_host));
    m->protocol_type = st_gstr_dup(or_empty(p->protocol_type));
    m->rebalance_timeout_ms = p->rebalance_timeout_ms;
    m->session_timeout_ms = p->session_timeout_ms;
    m->hb_deadline = -1;
    set_protocols(m, p->protocols, p->nprotocols);
    return m;
}

static void add_member_and_rebalance(st_gstate_t *s, st_group_t *g,
                                     const st_group_join_params_t *p, st_str_t member_id,
                                     st_group_waiter_t *w) {
    st_gmember_t *m = member_new(p, member_id);
    m->is_new = 1;
    /* a new member during the initial delay extends it */
    if (g->state == ST_GROUP_PREPARING_REBALANCE && g->generation == 0) g->new_member_added = 1;
    group_add(g, m, w);
    /* New members cannot heartbeat while their JoinGroup is parked; they
     * get a long timeout so that abandoned joins are eventually dropped. */
    schedule_hb(s, m, NEW_MEMBER_JOIN_TIMEOUT_MS);
    ST_INFO("group", "group %s: member %s joins (%.*s)", GS(g->id), GS(m->member_id),
            p->reason.len < 0 ? 15 : (int)ST_MIN(p->reason.len, 200),
            p->reason.len < 0 ? "no reason given" : p->reason.p);
    maybe_prepare_rebalance(s, g, "adding a new member");
}

static void update_static_member_and_rebalance(st_gstate_t *s, st_group_t *g,
                                               st_gmember_t *m,
                                               const st_group_join_params_t *p,
                                               st_str_t new_id, st_group_waiter_t *w) {
    st_str_t old_id = st_gstr_dup(m->member_id);
    st_str_t current_leader = st_gstr_dup(g->leader_id);
    /* fence whoever still waits under the old id */
    complete_member_join(g, m, ST_E_FENCED_INSTANCE_ID);
    complete_member_sync(g, m, ST_E_FENCED_INSTANCE_ID);
    st_gstr_set(&m->member_id, new_id);
    if (st_gstr_eq(g->leader_id, old_id)) st_gstr_set(&g->leader_id, new_id);
    schedule_hb(s, m, m->session_timeout_ms);
    /* keep the old settings to undo the change if it cannot be stored */
    int old_n = m->nprotocols;
    st_group_protocol_t *old_p = st_calloc((size_t)old_n + 1, sizeof *old_p);
    for (int i = 0; i < old_n; i++)
        old_p[i] = (st_group_protocol_t){m->protocols[i].name, m->protocols[i].metadata,
                                         m->protocols[i].metadata_len};
    st_gprotocol_t *old_storage = m->protocols;
    m->protocols = NULL;
    m->nprotocols = 0;
    int32_t old_rebalance = m->rebalance_timeout_ms, old_session = m->session_timeout_ms;
    update_member(g, m, p->protocols, p->nprotocols, p->rebalance_timeout_ms,
                  p->session_timeout_ms, w);
    switch (g->state) {
    case ST_GROUP_STABLE: {
        st_str_t next = select_protocol(g);
        if (next.len >= 0 && st_gstr_eq(g->protocol_name, next)) {
            /* Same protocol: no rebalance; persist the new member id. */
            st_err_t e = store_group(s, g, NULL);
            if (e) {
                update_member(g, m, old_p, old_n, old_rebalance, old_session, NULL);
                st_gstr_set(&m->member_id, old_id);
                if (st_gstr_eq(g->leader_id, new_id)) st_gstr_set(&g->leader_id, old_id);
                schedule_hb(s, m, m->session_timeout_ms);
                st_group_join_result_t r = {e, st_str(""), g->generation, g->protocol_type,
                                            g->protocol_name, or_empty(current_leader),
                                            0, NULL, 0, g->partition};
                w->join_done(w, &r);
            } else if (p->support_skip_assignment) {
                /* v9+: the leader learns it leads, but skips the assignor
                 * while the group stays stable */
                int leader = st_gstr_eq(g->leader_id, new_id);
                invoke_join(g, m, leader, g->leader_id, leader);
            } else {
                /* Older clients are given the previous leader id, so that a
                 * returning leader does not run a needless assignment. */
                invoke_join(g, m, 0, current_leader, 0);
            }
        } else {
            maybe_prepare_rebalance(s, g, "static member rejoins with other protocols");
        }
        break;
    }
    case ST_GROUP_COMPLETING_REBALANCE:
        /* the leader may be assigning for the old id: start over */
        prepare_rebalance(s, g, "static member rejoins during the sync");
        break;
    default: break; /* PreparingRebalance: it waits with the others */
    }
    for (int i = 0; i < old_n; i++) {
        st_gstr_free(&old_storage[i].name);
        free(old_storage[i].metadata);
    }
    free(old_storage);
    free(old_p);
    st_gstr_free(&old_id);
    st_gstr_free(&current_leader);
}

static int accept_joining_member(const st_gstate_t *s, const st_group_t *g, st_str_t member_id) {
    switch (g->state) {
    case ST_GROUP_EMPTY:
    case ST_GROUP_DEAD: return 1;
    case ST_GROUP_PREPARING_REBALANCE: {
        const st_gmember_t *m = find_member(g, member_id);
        return (m && m->join_waiter) || g->num_awaiting_join < s->cfg.max_size;
    }
    default: return find_member(g, member_id) || g->nmembers < s->cfg.max_size;
    }
}

static void new_member_join(st_gstate_t *s, st_group_t *g, const st_group_join_params_t *p,
                            st_group_waiter_t *w) {
    if (g->state == ST_GROUP_DEAD) {
        join_error(w, ST_E_COORDINATOR_NOT_AVAILABLE, st_str(""), g->partition);
        return;
    }
    if (!supports_protocols(g, p->protocol_type, p->protocols, p->nprotocols)) {
        join_error(w, ST_E_INCONSISTENT_GROUP_PROTOCOL, st_str(""), g->partition);
        return;
    }
    /* Kafka's member ids: client id (or instance id), '-', a random UUID */
    uint8_t u[16];
    st_random_bytes(u, sizeof u);
    u[6] = (uint8_t)((u[6] & 0x0F) | 0x40);
    u[8] = (uint8_t)((u[8] & 0x3F) | 0x80);
    char uuid[40];
    snprintf(uuid, sizeof uuid, "-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
             u[13], u[14], u[15]);
    /* the prefix whole, whatever bytes it holds (a client id is a string of
     * up to 32767 bytes) */
    st_str_t prefix = p->instance_id.len >= 0 ? p->instance_id : or_empty(p->client_id);
    size_t ul = strlen(uuid);
    char *buf = st_malloc((size_t)prefix.len + ul + 1);
    if (prefix.len) memcpy(buf, prefix.p, (size_t)prefix.len);
    memcpy(buf + prefix.len, uuid, ul + 1);
    st_str_t id = {buf, (int32_t)((size_t)prefix.len + ul)};
    if (p->instance_id.len >= 0) {
        st_gmember_t *old = static_member(g, p->instance_id);
        if (old) update_static_member_and_rebalance(s, g, old, p, id, w);
        else add_member_and_rebalance(s, g, p, id, w);
    } else if (p->require_known_member_id) {
        /* KIP-394: the member must come back with the id it is given */
        add_pending(s, g, id, p->session_timeout_ms);
        join_error(w, ST_E_MEMBER_ID_REQUIRED, id, g->partition);
    } else {
        add_member_and_rebalance(s, g, p, id, w);
    }
    free(buf);
}

static void current_member_join(st_gstate_t *s, st_group_t *g, const st_group_join_params_t *p,
                                st_group_waiter_t *w) {
    if (g->state == ST_GROUP_DEAD) {
        join_error(w, ST_E_COORDINATOR_NOT_AVAILABLE, p->member_id, g->partition);
        return;
    }
    if (!supports_protocols(g, p->protocol_type, p->protocols, p->nprotocols)) {
        join_error(w, ST_E_INCONSISTENT_GROUP_PROTOCOL, p->member_id, g->partition);
        return;
    }
    if (is_pending(g, p->member_id)) {
        if (p->instance_id.len >= 0) { /* a pending member is never static */
            join_error(w, ST_E_UNKNOWN_MEMBER_ID, p->member_id, g->partition);
            return;
        }
        add_member_and_rebalance(s, g, p, p->member_id, w);
        return;
    }
    st_err_t e = validate_current_member(g, p->member_id, p->instance_id);
    if (e) {
        join_error(w, e, p->member_id, g->partition);
        return;
    }
    st_gmember_t *m = find_member(g, p->member_id);
    int leader = st_gstr_eq(g->leader_id, m->member_id);
    switch (g->state) {
    case ST_GROUP_PREPARING_REBALANCE:
        update_member(g, m, p->protocols, p->nprotocols, p->rebalance_timeout_ms,
                      p->session_timeout_ms, w);
        maybe_prepare_rebalance(s, g, "member rejoins");
        break;
    case ST_GROUP_COMPLETING_REBALANCE:
        if (member_matches(m, p->protocols, p->nprotocols)) {
            /* it missed its JoinGroup response: the same answer again */
            reply_join(g, m, w, leader, g->leader_id);
        } else {
            update_member(g, m, p->protocols, p->nprotocols, p->rebalance_timeout_ms,
                          p->session_timeout_ms, w);
            maybe_prepare_rebalance(s, g, "member changes its metadata during the sync");
        }
        break;
    case ST_GROUP_STABLE:
        if (leader || !member_matches(m, p->protocols, p->nprotocols)) {
            /* the leader may rejoin to trigger a rebalance (topic changes) */
            update_member(g, m, p->protocols, p->nprotocols, p->rebalance_timeout_ms,
                          p->session_timeout_ms, w);
            maybe_prepare_rebalance(s, g, leader ? "leader rejoins" : "member changes metadata");
        } else {
            reply_join(g, m, w, 0, g->leader_id);
        }
        break;
    default:
        join_error(w, ST_E_UNKNOWN_MEMBER_ID, p->member_id, g->partition);
        break;
    }
}

void st_gstate_join(st_gstate_t *s, const st_group_join_params_t *p, st_group_waiter_t *w) {
    st_err_t e = st_gstate_check(s, p->group_id, 0);
    int32_t part = e ? -1 : st_gstate_partition_of(s, p->group_id);
    if (e) {
        join_error(w, e, p->member_id, part);
        return;
    }
    if (p->session_timeout_ms < s->cfg.min_session_timeout_ms ||
        p->session_timeout_ms > s->cfg.max_session_timeout_ms) {
        join_error(w, ST_E_INVALID_SESSION_TIMEOUT, p->member_id, part);
        return;
    }
    int unknown = p->member_id.len <= 0;
    st_group_t *g = st_gstate_group(s, p->group_id);
    if (!g) {
        if (!unknown) {
            join_error(w, ST_E_UNKNOWN_MEMBER_ID, p->member_id, part);
            return;
        }
        g = group_new(s, p->group_id, part);
    }
    if (!accept_joining_member(s, g, unknown ? st_str("") : p->member_id)) {
        st_gmember_t *m = unknown ? NULL : find_member(g, p->member_id);
        if (m) {
            complete_member_join(g, m, ST_E_GROUP_MAX_SIZE_REACHED);
            complete_member_sync(g, m, ST_E_GROUP_MAX_SIZE_REACHED);
            group_remove(g, m);
            member_free(m);
        } else if (!unknown) {
            remove_pending(g, p->member_id);
        }
        join_error(w, ST_E_GROUP_MAX_SIZE_REACHED, st_str(""), part);
    } else if (unknown) {
        new_member_join(s, g, p, w);
    } else {
        current_member_join(s, g, p, w);
    }
    if (g->state == ST_GROUP_PREPARING_REBALANCE) maybe_complete_join(s, g);
}

/* Kafka's prepareRebalance: cancel the sync, start the join timer. */
static void reset_and_propagate_assignment_error(st_gstate_t *s, st_group_t *g, st_err_t e);

static void prepare_rebalance(st_gstate_t *s, st_group_t *g, const char *reason) {
    if (g->state == ST_GROUP_COMPLETING_REBALANCE)
        reset_and_propagate_assignment_error(s, g, ST_E_REBALANCE_IN_PROGRESS);
    for (int i = 0; i < g->nmembers; i++) g->members[i]->pending_sync = 0;
    g->sync_deadline = -1;
    int32_t rebalance = group_rebalance_timeout(g);
    if (g->state == ST_GROUP_EMPTY) {
        g->join_initial = 1;
        g->join_remaining_ms = ST_MAX((int64_t)rebalance - s->cfg.initial_rebalance_delay_ms, 0);
        g->join_deadline = now_ms(s) + s->cfg.initial_rebalance_delay_ms;
    } else {
        g->join_initial = 0;
        g->join_deadline = now_ms(s) + rebalance;
    }
    note_deadline(s, g->join_deadline);
    ST_INFO("group", "group %s: preparing to rebalance in state %s, generation %d (%s)", GS(g->id),
            st_group_state_name(g->state), (int)g->generation, reason);
    transition(s, g, ST_GROUP_PREPARING_REBALANCE);
    maybe_complete_join(s, g);
}

static int has_all_members_joined(const st_group_t *g) {
    return g->nmembers == g->num_awaiting_join && g->npending == 0;
}

static void complete_join(st_gstate_t *s, st_group_t *g);

static void maybe_complete_join(st_gstate_t *s, st_group_t *g) {
    if (g->state == ST_GROUP_PREPARING_REBALANCE && !g->join_initial && has_all_members_joined(g))
        complete_join(s, g);
}

static void remove_member_and_update_group(st_gstate_t *s, st_group_t *g, st_gmember_t *m,
                                           const char *reason) {
    complete_member_join(g, m, ST_E_UNKNOWN_MEMBER_ID);
    complete_member_sync(g, m, ST_E_REBALANCE_IN_PROGRESS);
    ST_INFO("group", "group %s: member %s leaves (%s)", GS(g->id), GS(m->member_id), reason);
    group_remove(g, m);
    member_free(m);
    switch (g->state) {
    case ST_GROUP_STABLE:
    case ST_GROUP_COMPLETING_REBALANCE: maybe_prepare_rebalance(s, g, reason); break;
    case ST_GROUP_PREPARING_REBALANCE: maybe_complete_join(s, g); break;
    default: break;
    }
}

/* A leader that did not rejoin hands over to a member that did. */
static int maybe_elect_new_joined_leader(st_group_t *g) {
    if (g->leader_id.len < 0) return 0;
    st_gmember_t *l = find_member(g, g->leader_id);
    if (l && l->join_waiter) return 1;
    for (int i = 0; i < g->nmembers; i++) {
        if (g->members[i]->join_waiter) {
            st_gstr_set(&g->leader_id, g->members[i]->member_id);
            return 1;
        }
    }
    return 0;
}

static void init_next_generation(st_gstate_t *s, st_group_t *g) {
    g->generation++;
    if (g->nmembers) {
        st_gstr_set(&g->protocol_name, select_protocol(g));
        compute_subscribed(g);
        transition(s, g, ST_GROUP_COMPLETING_REBALANCE);
    } else {
        st_gstr_set(&g->protocol_name, ST_STR_NULL);
        compute_subscribed(g);
        transition(s, g, ST_GROUP_EMPTY);
    }
    for (int i = 0; i < g->nmembers; i++) g->members[i]->pending_sync = 0;
}

/* Kafka's onCompleteJoin. */
static void complete_join(st_gstate_t *s, st_group_t *g) {
    g->join_deadline = -1;
    /* dynamic members that did not rejoin in time are gone */
    for (int i = g->nmembers - 1; i >= 0; i--) {
        st_gmember_t *m = g->members[i];
        if (m->join_waiter || m->instance_id.len >= 0) continue;
        ST_INFO("group", "group %s: member %s did not rejoin in time", GS(g->id), GS(m->member_id));
        complete_member_sync(g, m, ST_E_REBALANCE_IN_PROGRESS);
        group_remove(g, m);
        member_free(m);
    }
    if (g->state == ST_GROUP_DEAD) return;
    if (!maybe_elect_new_joined_leader(g) && g->nmembers > 0) {
        /* nobody rejoined (static members only): wait another round, until
         * session timeouts remove them */
        ST_WARN("group", "group %s: no member rejoined; waiting again", GS(g->id));
        g->join_initial = 0;
        g->join_deadline = now_ms(s) + group_rebalance_timeout(g);
        note_deadline(s, g->join_deadline);
        return;
    }
    init_next_generation(s, g);
    if (g->state == ST_GROUP_EMPTY) {
        ST_INFO("group", "group %s: generation %d is empty", GS(g->id), (int)g->generation);
        store_group(s, g, NULL); /* a failure is only logged, as in Kafka */
        return;
    }
    ST_INFO("group", "group %s: generation %d with %d members, protocol %s, leader %s", GS(g->id),
            (int)g->generation, g->nmembers, GS(g->protocol_name), GS(g->leader_id));
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        int leader = st_gstr_eq(g->leader_id, m->member_id);
        invoke_join(g, m, leader, g->leader_id, 0);
        schedule_hb(s, m, m->session_timeout_ms);
        m->is_new = 0;
        m->pending_sync = 1;
    }
    g->sync_deadline = now_ms(s) + group_rebalance_timeout(g);
    note_deadline(s, g->sync_deadline);
}

/* ---- the sync ----------------------------------------------------------------- */

static void propagate_assignment(st_gstate_t *s, st_group_t *g, st_err_t e) {
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        if (!m->sync_waiter) continue;
        st_group_waiter_t *w = m->sync_waiter;
        m->sync_waiter = NULL;
        st_group_sync_result_t r = {e,
                                    e ? ST_STR_NULL : g->protocol_type,
                                    e ? ST_STR_NULL : g->protocol_name,
                                    m->assignment,
                                    m->assignment_len,
                                    g->partition};
        w->sync_done(w, &r);
        /* the session starts over once the assignment is out */
        schedule_hb(s, m, m->session_timeout_ms);
    }
}

static void set_assignment(st_gmember_t *m, const uint8_t *p, int32_t len) {
    free(m->assignment);
    m->assignment_len = len > 0 ? len : 0;
    m->assignment = st_malloc((size_t)m->assignment_len + 1);
    if (m->assignment_len) memcpy(m->assignment, p, (size_t)len);
}

static void reset_and_propagate_assignment_error(st_gstate_t *s, st_group_t *g, st_err_t e) {
    for (int i = 0; i < g->nmembers; i++) set_assignment(g->members[i], NULL, 0);
    propagate_assignment(s, g, e);
}

static void remove_pending_sync(st_group_t *g, st_gmember_t *m) {
    m->pending_sync = 0;
    for (int i = 0; i < g->nmembers; i++)
        if (g->members[i]->pending_sync) return;
    g->sync_deadline = -1; /* everyone synced */
}

void st_gstate_sync(st_gstate_t *s, const st_group_sync_params_t *p, st_group_waiter_t *w) {
    st_err_t e = st_gstate_check(s, p->group_id, 0);
    int32_t part = e ? -1 : st_gstate_partition_of(s, p->group_id);
    if (e == ST_E_COORDINATOR_LOAD_IN_PROGRESS) {
        /* the rebalance in flight is lost: make the member rejoin */
        sync_error(w, ST_E_REBALANCE_IN_PROGRESS, part);
        return;
    }
    if (e) {
        sync_error(w, e, part);
        return;
    }
    st_group_t *g = st_gstate_group(s, p->group_id);
    if (!g) {
        sync_error(w, ST_E_UNKNOWN_MEMBER_ID, part);
        return;
    }
    if (g->state == ST_GROUP_DEAD) e = ST_E_COORDINATOR_NOT_AVAILABLE;
    if (!e) e = validate_current_member(g, p->member_id, p->instance_id);
    if (!e && p->generation != g->generation) e = ST_E_ILLEGAL_GENERATION;
    if (!e && p->protocol_type.len >= 0 && !st_gstr_eq(g->protocol_type, p->protocol_type))
        e = ST_E_INCONSISTENT_GROUP_PROTOCOL;
    if (!e && p->protocol_name.len >= 0 && !st_gstr_eq(g->protocol_name, p->protocol_name))
        e = ST_E_INCONSISTENT_GROUP_PROTOCOL;
    if (e) {
        sync_error(w, e, part);
        return;
    }
    st_gmember_t *m = find_member(g, p->member_id);
    switch (g->state) {
    case ST_GROUP_EMPTY: sync_error(w, ST_E_UNKNOWN_MEMBER_ID, part); break;
    case ST_GROUP_PREPARING_REBALANCE: sync_error(w, ST_E_REBALANCE_IN_PROGRESS, part); break;
    case ST_GROUP_COMPLETING_REBALANCE: {
        complete_member_sync(g, m, ST_E_REBALANCE_IN_PROGRESS); /* a duplicate */
        m->sync_waiter = w;
        remove_pending_sync(g, m);
        if (!st_gstr_eq(g->leader_id, m->member_id)) break;
        /* the leader's assignment: members it did not name get nothing */
        st_group_assignment_t *a = st_calloc((size_t)g->nmembers + 1, sizeof *a);
        for (int i = 0; i < g->nmembers; i++) {
            a[i].member_id = g->members[i]->member_id;
            for (int k = 0; k < p->nassignments; k++) {
                if (st_gstr_eq(p->assignments[k].member_id, g->members[i]->member_id)) {
                    a[i].assignment = p->assignments[k].assignment;
                    a[i].assignment_len = ST_MAX(p->assignments[k].assignment_len, 0);
                }
            }
        }
        int32_t generation = g->generation;
        st_err_t se = store_group(s, g, a);
        if (g->state == ST_GROUP_COMPLETING_REBALANCE && generation == g->generation) {
            if (se) {
                reset_and_propagate_assignment_error(s, g, se);
                maybe_prepare_rebalance(s, g, "storing the assignment failed");
            } else {
                for (int i = 0; i < g->nmembers; i++)
                    set_assignment(g->members[i], a[i].assignment, a[i].assignment_len);
                transition(s, g, ST_GROUP_STABLE);
                ST_INFO("group", "group %s: generation %d is stable", GS(g->id), (int)g->generation);
                propagate_assignment(s, g, ST_OK);
            }
        }
        free(a);
        break;
    }
    case ST_GROUP_STABLE: {
        remove_pending_sync(g, m);
        st_group_sync_result_t r = {ST_OK, g->protocol_type, g->protocol_name, m->assignment,
                                    m->assignment_len, part};
        w->sync_done(w, &r);
        schedule_hb(s, m, m->session_timeout_ms);
        break;
    }
    default: sync_error(w, ST_E_COORDINATOR_NOT_AVAILABLE, part); break;
    }
}

/* ---- heartbeat, leave ------------------------------------------------------------ */

st_err_t st_gstate_heartbeat(st_gstate_t *s, st_str_t group_id, st_str_t member_id,
                             st_str_t instance_id, int32_t generation) {
    st_err_t e = st_gstate_check(s, group_id, 0);
    if (e == ST_E_COORDINATOR_LOAD_IN_PROGRESS) return ST_OK; /* blindly, as Kafka */
    if (e) return e;
    st_group_t *g = st_gstate_group(s, group_id);
    if (!g) return ST_E_UNKNOWN_MEMBER_ID;
    if (g->state == ST_GROUP_DEAD) return ST_E_COORDINATOR_NOT_AVAILABLE;
    e = validate_current_member(g, member_id, instance_id);
    if (e) return e;
    if (generation != g->generation) return ST_E_ILLEGAL_GENERATION;
    st_gmember_t *m = find_member(g, member_id);
    switch (g->state) {
    case ST_GROUP_EMPTY: return ST_E_UNKNOWN_MEMBER_ID;
    case ST_GROUP_PREPARING_REBALANCE:
        schedule_hb(s, m, m->session_timeout_ms);
        return ST_E_REBALANCE_IN_PROGRESS;
    default: schedule_hb(s, m, m->session_timeout_ms); return ST_OK;
    }
}

st_err_t st_gstate_leave(st_gstate_t *s, st_str_t group_id, st_group_leave_member_t *lm,
                         int n) {
    st_err_t e = st_gstate_check(s, group_id, 0);
    if (e) return e;
    st_group_t *g = st_gstate_group(s, group_id);
    if (!g) {
        for (int i = 0; i < n; i++) lm[i].error = ST_E_UNKNOWN_MEMBER_ID;
        return ST_OK;
    }
    if (g->state == ST_GROUP_DEAD) return ST_E_COORDINATOR_NOT_AVAILABLE;
    for (int i = 0; i < n; i++) {
        st_str_t mid = or_empty(lm[i].member_id);
        char reason[300];
        snprintf(reason, sizeof reason, "LeaveGroup; client reason: %.*s",
                 lm[i].reason.len < 0 ? 12 : (int)ST_MIN(lm[i].reason.len, 200),
                 lm[i].reason.len < 0 ? "not provided" : lm[i].reason.p);
        if (!mid.len) {
            /* administrative removal by group.instance.id */
            st_gmember_t *m = static_member(g, lm[i].instance_id);
            if (m) remove_member_and_update_group(s, g, m, reason);
            lm[i].error = m ? ST_OK : ST_E_UNKNOWN_MEMBER_ID;
        } else if (is_pending(g, mid)) {
            remove_pending(g, mid);
            if (g->state == ST_GROUP_PREPARING_REBALANCE) maybe_complete_join(s, g);
            lm[i].error = ST_OK;
        } else {
            lm[i].error = validate_current_member(g, mid, lm[i].instance_id);
            if (!lm[i].error) remove_member_and_update_group(s, g, find_member(g, mid), reason);
        }
    }
    return ST_OK;
}

/* ---- offsets ------------------------------------------------------------------------ */

/* The group an offset commit goes to, checked as Kafka's
 * validateOffsetCommit / validateTransactionalOffsetCommit (ClassicGroup):
 * an unknown group is made (a group that only stores offsets) when the
 * request names no generation, else ILLEGAL_GENERATION; a transactional
 * commit without member id and generation (TxnOffsetCommit v0-2) goes to
 * any group, and the group's state is not enforced for it. */
static st_err_t commit_target(st_gstate_t *s, st_str_t group_id, st_str_t member_id,
                              st_str_t instance_id, int32_t generation, int txn,
                              st_group_t **out) {
    *out = NULL;
    st_err_t e = st_gstate_check(s, group_id, !txn);
    if (e) return e;
    st_group_t *g = st_gstate_group(s, group_id);
    if (!g) {
        if (generation >= 0) return ST_E_ILLEGAL_GENERATION;
        g = group_new(s, group_id, st_gstate_partition_of(s, group_id));
    }
    if (g->state == ST_GROUP_DEAD) return ST_E_COORDINATOR_NOT_AVAILABLE;
    if (generation < 0 && g->state == ST_GROUP_EMPTY) {
        /* admin clients and consumers without group management */
    } else if (generation >= 0 || member_id.len > 0 || instance_id.len >= 0) {
        e = validate_current_member(g, member_id, instance_id);
        if (!e && generation != g->generation) e = ST_E_ILLEGAL_GENERATION;
    } else if (!txn && g->state != ST_GROUP_EMPTY) {
        e = ST_E_UNKNOWN_MEMBER_ID; /* only members commit to a live group */
    }
    if (!e && !txn && g->state == ST_GROUP_COMPLETING_REBALANCE) e = ST_E_REBALANCE_IN_PROGRESS;
    if (!e) *out = g;
    return e;
}

/* Write the offsets of c that are not refused as one batch (a
 * transactional one of producer_id when >= 0) and keep them, committed
 * or pending, with their records' offsets. */
static void store_offsets(st_gstate_t *s, st_group_t *g, int64_t producer_id,
                          int16_t producer_epoch, st_group_commit_t *c, int n) {
    int64_t now = wall_ms(s);
    st_batch_record_t *recs = st_calloc((size_t)n + 1, sizeof *recs);
    st_buf_t *bufs = st_calloc((size_t)n * 2 + 1, sizeof *bufs);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].error) continue;
        size_t mlen = (size_t)ST_MAX(c[i].metadata.len, 0);
        if ((int64_t)mlen > s->cfg.offset_metadata_max_bytes) {
            c[i].error = ST_E_OFFSET_METADATA_TOO_LARGE;
            continue;
        }
        if (c[i].commit_ts < 0) c[i].commit_ts = now;
        st_grec_offset_value_t v = {c[i].offset, c[i].leader_epoch, or_empty(c[i].metadata),
                                    c[i].commit_ts, c[i].expire_ts};
        st_buf_init(&bufs[2 * k]);
        st_buf_init(&bufs[2 * k + 1]);
        st_grec_offset_key(&bufs[2 * k], g->id, c[i].topic, c[i].partition);
        st_grec_offset_value(&bufs[2 * k + 1], &v);
        recs[k] = (st_batch_record_t){bufs[2 * k].data, (int32_t)bufs[2 * k].len,
                                      bufs[2 * k + 1].data, (int32_t)bufs[2 * k + 1].len};
        k++;
    }
    int64_t base = -1;
    st_err_t ae = k ? commit_store_error(s->ops.append(s->ops.arg, g->partition, producer_id,
                                                       producer_epoch, recs, k, &base))
                    : ST_OK;
    for (int i = 0, j = 0; i < n; i++) {
        if (c[i].error) continue;
        if (ae) {
            c[i].error = ae;
            continue;
        }
        /* records are in c's order: the j-th written is at base + j */
        int64_t at = base >= 0 ? base + j : -1;
        j++;
        if (producer_id >= 0)
            pending_set(s, g, producer_id, c[i].topic, c[i].partition, c[i].offset,
                        c[i].leader_epoch, c[i].metadata, c[i].commit_ts, at);
        else
            offset_set(g, c[i].topic, c[i].partition, c[i].offset, c[i].leader_epoch,
                       c[i].metadata, c[i].commit_ts, c[i].expire_ts, at);
    }
    for (int i = 0; i < 2 * k; i++) st_buf_fini(&bufs[i]);
    free(bufs);
    free(recs);
}

void st_gstate_commit(st_gstate_t *s, st_str_t group_id, st_str_t member_id,
                      st_str_t instance_id, int32_t generation, st_group_commit_t *c, int n) {
    member_id = or_empty(member_id);
    st_group_t *g;
    st_err_t e = commit_target(s, group_id, member_id, instance_id, generation, 0, &g);
    if (e) {
        for (int i = 0; i < n; i++)
            if (!c[i].error) c[i].error = e;
        return;
    }
    if (g->state == ST_GROUP_STABLE || g->state == ST_GROUP_PREPARING_REBALANCE) {
        st_gmember_t *m = find_member(g, member_id);
        if (m) schedule_hb(s, m, m->session_timeout_ms);
    }
    store_offsets(s, g, -1, -1, c, n);
}

void st_gstate_txn_commit(st_gstate_t *s, const st_group_txn_commit_params_t *p,
                          st_group_commit_t *c, int n) {
    st_group_t *g;
    st_str_t member_id = or_empty(p->member_id);
    st_err_t e = p->producer_id < 0 ? ST_E_INVALID_REQUEST
                                    : commit_target(s, p->group_id, member_id, p->instance_id,
                                                    p->generation, 1, &g);
    for (int i = 0; i < n; i++) {
        if (e && !c[i].error) c[i].error = e;
        c[i].commit_ts = -1; /* now */
        c[i].expire_ts = -1;
    }
    if (e) return;
    store_offsets(s, g, p->producer_id, p->producer_epoch, c, n);
}

/* An Empty group with no offsets left is dead: tombstone and forget it
 * (Kafka's cleanupGroupMetadata).  Pending transactional offsets keep it:
 * their transaction may still commit them. */
static void maybe_bury(st_gstate_t *s, st_group_t *g) {
    if (g->state != ST_GROUP_EMPTY || g->offsets.n || g->txn_pending.n || g->nmembers) return;
    transition(s, g, ST_GROUP_DEAD);
    write_tombstones(s, g, NULL, 0, 1);
    ST_INFO("group", "group %s: empty and without offsets; removed", GS(g->id));
    group_drop(s, g);
}

st_err_t st_gstate_delete_group(st_gstate_t *s, st_str_t group_id) {
    st_err_t e = st_gstate_check(s, group_id, 1);
    if (e) return e;
    st_group_t *g = st_gstate_group(s, group_id);
    if (!g || g->state == ST_GROUP_DEAD) return ST_E_GROUP_ID_NOT_FOUND;
    if (g->state != ST_GROUP_EMPTY) return ST_E_NON_EMPTY_GROUP;
    /* the committed offsets and, as Kafka's deleteAllOffsets, the
     * partitions that only have pending transactional ones */
    int n = (int)(g->offsets.n + g->txn_pending.n), k = 0;
    st_goffset_t **v = st_calloc((size_t)n + 1, sizeof *v);
    size_t it = 0;
    st_goffset_t *o;
    while ((o = st_gmap_next(&g->offsets, &it))) v[k++] = o;
    it = 0;
    while ((o = st_gmap_next(&g->txn_pending, &it))) {
        int dup = st_gstate_offset(g, o->topic, o->partition) != NULL;
        for (int j = 0; j < k && !dup; j++)
            dup = v[j]->partition == o->partition && st_gstr_eq(v[j]->topic, o->topic);
        if (!dup) v[k++] = o;
    }
    e = write_tombstones(s, g, v, k, 1);
    free(v);
    if (e) return group_store_error(e);
    ST_INFO("group", "group %s: deleted with %d offsets", GS(g->id), k);
    transition(s, g, ST_GROUP_DEAD);
    group_drop(s, g);
    return ST_OK;
}

st_err_t st_gstate_delete_offsets(st_gstate_t *s, st_str_t group_id,
                                  st_group_offset_delete_t *d, int n) {
    st_err_t e = st_gstate_check(s, group_id, 0);
    if (e) return e;
    st_group_t *g = st_gstate_group(s, group_id);
    if (!g || g->state == ST_GROUP_DEAD) return ST_E_GROUP_ID_NOT_FOUND;
    int consumer = st_str_eq(g->protocol_type, ST_GROUP_CONSUMER_PROTOCOL);
    if (g->state != ST_GROUP_EMPTY && !consumer) return ST_E_NON_EMPTY_GROUP;
    st_goffset_t **v = st_calloc((size_t)n + 1, sizeof *v);
    int k = 0;
    for (int i = 0; i < n; i++) {
        d[i].subscribed = g->state != ST_GROUP_EMPTY && st_gstate_subscribed(g, d[i].topic);
        if (d[i].subscribed) continue;
        st_goffset_t *o = (st_goffset_t *)st_gstate_offset(g, d[i].topic, d[i].partition);
        if (!o) o = pending_any(g, d[i].topic, d[i].partition); /* a tombstone drops it too */
        int dup = 0;
        for (int j = 0; j < k && !dup; j++) dup = v[j] == o;
        if (o && !dup) v[k++] = o;
    }
    e = write_tombstones(s, g, v, k, 0);
    if (!e) {
        for (int i = 0; i < k; i++) {
            st_str_t topic = st_gstr_dup(v[i]->topic);
            offset_remove(g, topic, v[i]->partition);
            st_gstr_free(&topic);
        }
        maybe_bury(s, g);
    }
    free(v);
    return e ? group_store_error(e) : ST_OK;
}

/* Offsets past offsets.retention.minutes (Kafka's removeExpiredOffsets):
 *   - an Empty group with a protocol: counted from when it became Empty
 *     (its state timestamp), else from the commit;
 *   - a consumer group that is Stable: offsets of topics no member
 *     subscribes to, counted from the commit;
 *   - a group that only commits (no protocol): counted from the commit;
 *   - an offset committed with an explicit expire time (OffsetCommit v2-4
 *     retention_time_ms): at that time. */
static void expire_offsets(st_gstate_t *s, st_group_t *g, int64_t now) {
    int mode; /* 0 none, 1 empty, 2 stable consumer, 3 no protocol */
    if (g->protocol_type.len >= 0 && g->state == ST_GROUP_EMPTY) mode = 1;
    else if (st_str_eq(g->protocol_type, ST_GROUP_CONSUMER_PROTOCOL) && g->subscribed_known &&
             g->state == ST_GROUP_STABLE)
        mode = 2;
    else if (g->protocol_type.len < 0) mode = 3;
    else mode = 0;
    if (!mode) return;
    st_goffset_t **v = st_calloc(g->offsets.n + 1, sizeof *v);
    int k = 0;
    size_t it = 0;
    st_goffset_t *o;
    while ((o = st_gmap_next(&g->offsets, &it))) {
        if (mode == 2 && st_gstate_subscribed(g, o->topic)) continue;
        /* not while a transaction may still commit it (Kafka's
         * cleanupExpiredOffsets) */
        if (st_gstate_txn_pending(g, o->topic, o->partition)) continue;
        int expired;
        if (o->expire_ts >= 0) {
            expired = now >= o->expire_ts;
        } else {
            int64_t base = mode == 1 && g->state_ts >= 0 ? g->state_ts : o->commit_ts;
            expired = now - base >= s->cfg.offsets_retention_ms;
        }
        if (expired) v[k++] = o;
    }
    if (k && !write_tombstones(s, g, v, k, 0)) {
        ST_INFO("group", "group %s: %d offsets expired", GS(g->id), k);
        for (int i = 0; i < k; i++) {
            st_str_t topic = st_gstr_dup(v[i]->topic);
            offset_remove(g, topic, v[i]->partition);
            st_gstr_free(&topic);
        }
    }
    free(v);
}

int st_gstate_drop_missing_topics(st_gstate_t *s, int (*exists)(st_str_t topic, void *arg),
                                  void *arg) {
    size_t n = s->groups.n, k = 0, it = 0;
    st_str_t *ids = st_calloc(n + 1, sizeof *ids);
    st_group_t *g;
    while ((g = st_gmap_next(&s->groups, &it)) && k < n)
        if (s->parts[g->partition] == ST_GPART_LOADED) ids[k++] = st_gstr_dup(g->id);
    int dropped = 0;
    for (size_t i = 0; i < k; i++) {
        g = st_gstate_group(s, ids[i]);
        st_gstr_free(&ids[i]);
        if (!g || (!g->offsets.n && !g->txn_pending.n)) continue;
        st_goffset_t **v = st_calloc(g->offsets.n + g->txn_pending.n + 1, sizeof *v);
        int m = 0;
        size_t oit = 0;
        st_goffset_t *o;
        while ((o = st_gmap_next(&g->offsets, &oit)))
            if (!exists(o->topic, arg)) v[m++] = o;
        /* pending offsets of a deleted topic go as well (Kafka's
         * onTopicsDeleted) */
        oit = 0;
        while ((o = st_gmap_next(&g->txn_pending, &oit))) {
            if (exists(o->topic, arg) || st_gstate_offset(g, o->topic, o->partition)) continue;
            int dup = 0;
            for (int j = 0; j < m && !dup; j++)
                dup = v[j]->partition == o->partition && st_gstr_eq(v[j]->topic, o->topic);
            if (!dup) v[m++] = o;
        }
        if (m && !write_tombstones(s, g, v, m, 0)) {
            ST_INFO("group", "group %s: %d offsets of deleted topics removed", GS(g->id), m);
            for (int j = 0; j < m; j++) {
                st_str_t topic = st_gstr_dup(v[j]->topic);
                offset_remove(g, topic, v[j]->partition);
                st_gstr_free(&topic);
            }
            dropped += m;
            maybe_bury(s, g);
        }
        free(v);
    }
    free(ids);
    return dropped;
}

static void run_offset_expiry(st_gstate_t *s) {
    int64_t now = wall_ms(s);
    size_t n = s->groups.n, k = 0, it = 0;
    st_str_t *ids = st_calloc(n + 1, sizeof *ids);
    st_group_t *g;
    while ((g = st_gmap_next(&s->groups, &it)) && k < n)
        if (s->parts[g->partition] == ST_GPART_LOADED) ids[k++] = st_gstr_dup(g->id);
    for (size_t i = 0; i < k; i++) {
        g = st_gstate_group(s, ids[i]);
        if (g) {
            expire_offsets(s, g, now);
            maybe_bury(s, g);
        }
        st_gstr_free(&ids[i]);
    }
    free(ids);
}

/* ---- timers --------------------------------------------------------------------------- */

static void on_join_deadline(st_gstate_t *s, st_group_t *g) {
    g->join_deadline = -1;
    if (g->state != ST_GROUP_PREPARING_REBALANCE) return;
    if (g->join_initial && g->new_member_added && g->join_remaining_ms > 0) {
        /* members are still arriving: wait once more, within the
         * rebalance timeout (Kafka's InitialDelayedJoin) */
        int64_t delay = ST_MIN((int64_t)s->cfg.initial_rebalance_delay_ms, g->join_remaining_ms);
        g->join_remaining_ms = ST_MAX(g->join_remaining_ms - s->cfg.initial_rebalance_delay_ms, 0);
        g->new_member_added = 0;
        g->join_deadline = now_ms(s) + delay;
        return;
    }
    g->join_initial = 0;
    complete_join(s, g);
}

static void on_sync_deadline(st_gstate_t *s, st_group_t *g) {
    g->sync_deadline = -1;
    if (g->state != ST_GROUP_COMPLETING_REBALANCE && g->state != ST_GROUP_STABLE) return;
    int removed = 0;
    for (int i = g->nmembers - 1; i >= 0; i--) {
        st_gmember_t *m = g->members[i];
        if (!m->pending_sync) continue;
        ST_INFO("group", "group %s: member %s sent no SyncGroup in time", GS(g->id), GS(m->member_id));
        complete_member_join(g, m, ST_E_UNKNOWN_MEMBER_ID);
        complete_member_sync(g, m, ST_E_REBALANCE_IN_PROGRESS);
        group_remove(g, m);
        member_free(m);
        removed++;
    }
    if (removed) prepare_rebalance(s, g, "members sent no SyncGroup in time");
}

static void on_session_expired(st_gstate_t *s, st_group_t *g, st_gmember_t *m) {
    m->hb_deadline = -1;
    /* a member parked in a join or a sync is alive, unless it is new */
    if (!m->is_new && (m->join_waiter || m->sync_waiter)) return;
    remove_member_and_update_group(s, g, m, "session timeout expired");
}

/* Fire one due timer of g; returns 0 when none was due. */
static int fire_one(st_gstate_t *s, st_group_t *g, int64_t now) {
    for (int i = 0; i < g->npending; i++) {
        if (g->pending[i].deadline > now) continue;
        ST_INFO("group", "group %s: pending member %s did not come back", GS(g->id),
                GS(g->pending[i].member_id));
        st_gstr_free(&g->pending[i].member_id);
        g->pending[i] = g->pending[--g->npending];
        maybe_complete_join(s, g);
        return 1;
    }
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        if (m->hb_deadline >= 0 && m->hb_deadline <= now) {
            on_session_expired(s, g, m);
            return 1;
        }
    }
    if (g->join_deadline >= 0 && g->join_deadline <= now) {
        on_join_deadline(s, g);
        return 1;
    }
    if (g->sync_deadline >= 0 && g->sync_deadline <= now) {
        on_sync_deadline(s, g);
        return 1;
    }
    return 0;
}

static void note_group_deadlines(st_gstate_t *s, const st_group_t *g) {
    for (int i = 0; i < g->npending; i++) note_deadline(s, g->pending[i].deadline);
    for (int i = 0; i < g->nmembers; i++) note_deadline(s, g->members[i]->hb_deadline);
    note_deadline(s, g->join_deadline);
    note_deadline(s, g->sync_deadline);
}

int64_t st_gstate_tick(st_gstate_t *s) {
    int64_t now = now_ms(s);
    if (!s->closed && s->next_deadline >= 0 && now >= s->next_deadline) {
        s->next_deadline = -1;
        size_t it = 0;
        st_group_t *g;
        while ((g = st_gmap_next(&s->groups, &it))) {
            if (s->parts[g->partition] != ST_GPART_LOADED) continue;
            for (int guard = 0; guard < 100000 && fire_one(s, g, now); guard++) {
            }
            note_group_deadlines(s, g);
        }
    }
    if (!s->closed && now >= s->next_offset_expiry) {
        run_offset_expiry(s);
        s->next_offset_expiry = now + s->cfg.offsets_retention_check_interval_ms;
    }
    int64_t next = s->next_offset_expiry;
    if (s->next_deadline >= 0 && s->next_deadline < next) next = s->next_deadline;
    return next;
}

/* ---- loading --------------------------------------------------------------------------- */

static st_group_t *loading_group(st_gstate_t *s, int32_t partition, st_str_t id) {
    st_group_t *g = st_gmap_get(&s->groups, id.p ? id.p : "", (size_t)ST_MAX(id.len, 0));
    return g ? g : group_new(s, id, partition);
}

static void clear_members(st_group_t *g) {
    for (int i = 0; i < g->nmembers; i++) member_free(g->members[i]);
    g->nmembers = 0;
    g->num_awaiting_join = 0;
    st_gstr_set(&g->leader_id, ST_STR_NULL);
}

void st_gstate_load_record(st_gstate_t *s, int32_t partition, int64_t offset, int64_t producer_id,
                           const uint8_t *key, int32_t klen, const uint8_t *value, int32_t vlen) {
    st_grec_key_t k;
    st_err_t e = st_grec_decode_key(key, klen, &k);
    if (e) {
        if (e != ST_E_NOT_FOUND)
            ST_LOG_RATELIMITED(ST_LOG_WARN, "group", 5000,
                               "%s-%d: skipping a record whose key does not parse",
                               ST_GROUP_OFFSETS_TOPIC, (int)partition);
        s->skipped++;
        return;
    }
    if (k.group.len < 0 || (k.type == ST_GREC_OFFSET && k.topic.len < 0)) {
        s->skipped++;
        return;
    }
    st_group_t *g = loading_group(s, partition, k.group);
    if (k.type == ST_GREC_OFFSET) {
        st_str_t topic = k.topic;
        if (!value) {
            offset_remove(g, topic, k.partition);
        } else {
            st_grec_offset_value_t v;
            if (st_grec_decode_offset_value(value, vlen, &v)) {
                s->skipped++;
            } else if (producer_id >= 0) {
                /* a transaction's: pending until its marker (Kafka's replay) */
                pending_set(s, g, producer_id, topic, k.partition, v.offset, v.leader_epoch,
                            v.metadata, v.commit_ts, offset);
            } else {
                offset_set(g, topic, k.partition, v.offset, v.leader_epoch, v.metadata, v.commit_ts,
                           v.expire_ts, offset);
            }
        }
    } else if (!value) {
        /* the group was deleted (or emptied): what follows starts afresh */
        clear_members(g);
        st_gstr_set(&g->protocol_type, ST_STR_NULL);
        st_gstr_set(&g->protocol_name, ST_STR_NULL);
        g->generation = 0;
        g->state = ST_GROUP_EMPTY;
        g->has_metadata = 0;
    } else {
        st_arena_t a;
        st_arena_init(&a, 4096);
        st_grec_group_value_t v;
        if (st_grec_decode_group_value(value, vlen, &a, &v)) {
            s->skipped++;
        } else {
            clear_members(g);
            st_gstr_set(&g->protocol_type, v.protocol_type.len > 0 ? v.protocol_type : ST_STR_NULL);
            st_str_t proto = v.protocol;
            st_gstr_set(&g->protocol_name, proto);
            g->generation = v.generation;
            g->state_ts = v.state_ts;
            g->has_metadata = 1;
            for (int i = 0; i < v.nmembers; i++) {
                st_grec_member_t *rm = &v.members[i];
                st_gmember_t *m = st_calloc(1, sizeof *m);
                m->member_id = st_gstr_dup(or_empty(rm->member_id));
                m->instance_id = st_gstr_dup(rm->instance_id);
                m->client_id = st_gstr_dup(rm->client_id);
                m->client_host = st_gstr_dup(rm->client_host);
                m->protocol_type = st_gstr_dup(or_empty(g->protocol_type));
                m->session_timeout_ms = rm->session_timeout_ms;
                /* version 0 had no rebalance timeout: the session's stood in */
                m->rebalance_timeout_ms = rm->rebalance_timeout_ms >= 0 ? rm->rebalance_timeout_ms
                                                                         : rm->session_timeout_ms;
                m->hb_deadline = -1;
                if (proto.len >= 0) {
                    st_group_protocol_t gp = {proto, rm->subscription.p,
                                              ST_MAX(rm->subscription.len, 0)};
                    set_protocols(m, &gp, 1);
                }
                set_assignment(m, rm->assignment.p, rm->assignment.len);
                if (g->nmembers == g->capmembers) {
                    g->capmembers = g->capmembers ? g->capmembers * 2 : 8;
                    g->members = st_realloc(g->members, sizeof *g->members * (size_t)g->capmembers);
                }
                g->members[g->nmembers++] = m;
            }
            st_gstr_set(&g->leader_id, v.leader);
            g->state = g->nmembers ? ST_GROUP_STABLE : ST_GROUP_EMPTY;
        }
        st_arena_fini(&a);
    }
    if (group_is_hollow(g)) group_drop(s, g);
}

void st_gstate_load_done(st_gstate_t *s, int32_t partition) {
    int groups = 0, offsets = 0, pending = 0;
    size_t it = 0;
    st_group_t *g;
    while ((g = st_gmap_next(&s->groups, &it))) {
        if (g->partition != partition) continue;
        groups++;
        offsets += (int)g->offsets.n;
        pending += (int)g->txn_pending.n;
        compute_subscribed(g);
        for (int i = 0; i < g->nmembers; i++) schedule_hb(s, g->members[i], g->members[i]->session_timeout_ms);
    }
    st_gstate_set_partition(s, partition, ST_GPART_LOADED);
    it = 0;
    while ((g = st_gmap_next(&s->groups, &it)))
        if (g->partition == partition && g->nmembers > s->cfg.max_size)
            prepare_rebalance(s, g, "loaded group is over group.max.size");
    ST_INFO("group", "%s-%d loaded: %d groups, %d offsets, %d pending in transactions",
            ST_GROUP_OFFSETS_TOPIC, (int)partition, groups, offsets, pending);
}

void st_gstate_unload(st_gstate_t *s, int32_t partition) {
    size_t it = 0;
    st_group_t *g;
    while ((g = st_gmap_next(&s->groups, &it))) {
        if (g->partition != partition) continue;
        for (int i = 0; i < g->nmembers; i++) {
            complete_member_join(g, g->members[i], ST_E_NOT_COORDINATOR);
            complete_member_sync(g, g->members[i], ST_E_NOT_COORDINATOR);
        }
        g->state = ST_GROUP_DEAD;
        group_drop(s, g);
    }
    txn_index_prune(s);
    st_gstate_set_partition(s, partition, ST_GPART_NOT_OWNED);
}

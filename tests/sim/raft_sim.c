/*
 * raft_sim.c - the deterministic simulator of the controller quorum
 * (ISSUE 10 item 3).  It drives broker/raft/raft.c itself, the code stratad
 * runs, with a simulated network, disk and clock; nothing here models Raft.
 *
 * One seed decides everything: 3 or 5 nodes, every message's delay, loss,
 * duplication and reordering, partitions and their healing, crashes and
 * restarts, disk errors (raft_mem.h: a crash loses queued flushes, a snapshot being
 * received and unflushed entries, though sometimes the first few of those
 * survive; the quorum state survives), flush times,
 * client proposals, and each node's random source.  A run is a fault phase
 * followed by a calm phase: every partition healed, every node restarted,
 * no more faults.
 *
 * Invariants, checked after every step (a step is one delivered message,
 * completed flush, timer, fault or proposal):
 *   election safety   at most one leader per epoch, ever;
 *   durability        an entry once applied anywhere (committed) is never
 *                     lost or changed: every leader holds every committed
 *                     entry, identical (or a snapshot that covers it with the
 *                     same state);
 *   log matching      each node's log agrees with the committed entries below
 *                     its high watermark;
 *   state machine     every node applies the same entries in the same order:
 *                     each applied entry is the next offset and equals the
 *                     committed one there, and a loaded snapshot's state is
 *                     the committed state at its offset;
 *   votes             a node acts on the epoch and vote its quorum-state
 *                     holds; the durable epoch never decreases and a vote
 *                     cast in an epoch never changes, across restarts;
 *   no failure        st_raft_failed stays OK, but after an injected disk
 *                     error (the node then stops and is restarted);
 * and at the end of each seed, liveness: in the calm phase a leader is
 * elected and a proposal made then is applied by every node within a bound.
 *
 * Usage: raft_sim --seeds N [--first S] [--keep-going] | --seed S [--verbose]
 *                 [--plant-bug commit-without-majority [--expect-violation]]
 * (--keep-going: run every seed and count those that failed.)
 * A violation prints the seed and the invariant and exits 1; with
 * --expect-violation (the test that the checker catches the planted bug)
 * the exit status is inverted: 0 only when some seed found a violation.
 */
#include "raft_int.h"
#include "raft_mem.h"

#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#define MAXN 6 /* 5 voters and an observer */
#define OBSERVER_ID 9
#define FAULT_PHASE_MS 8000
#define CALM_BOUND_MS 10000
#define MAX_STEPS 200000

/* ---- random numbers (splitmix64): the seed decides everything ------------ */

static uint64_t rng_state;

static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t rnd_range(int64_t lo, int64_t hi) { /* [lo, hi] */
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static int chance(int per_mille) { return (int)(rnd() % 1000) < per_mille; }

/* ---- events ----------------------------------------------------------------- */

enum { EV_DELIVER = 1, EV_FLUSH };

typedef struct ev {
    int64_t at;
    uint64_t seq;
    int kind;
    int node; /* destination index */
    int32_t from;
    int incarnation;
    st_raft_msg_t *msg;
} ev_t;

typedef struct sim_node {
    rm_node_t m;
    int32_t qs_epoch, qs_voted; /* the durable quorum state last seen */
    int up;
    int incarnation;
    int64_t deadline; /* st_raft tick wanted, -1 */
    int64_t applied_next;
    int64_t restart_at;
} sim_node_t;

typedef struct totals {
    uint64_t seeds, steps, elections, commits, crashes, proposals, snapshots_fetched,
        snapshots_made, messages, dropped;
    int64_t calm_ms_max, calm_ms_sum; /* healing to every node applying the probe */
    uint64_t live_seeds, disk_errors;
} totals_t;

static struct {
    uint64_t seed;
    int verbose;
    int n;
    int32_t ids[MAXN];
    sim_node_t nodes[MAXN];
    st_raft_config_t cfg;
    int64_t now;
    uint64_t seq;
    ev_t *heap;
    int nheap, capheap;
    int blocked[MAXN][MAXN];
    int calm;
    int crash_after_step; /* node index + 1 */
    int64_t next_fault, next_propose;
    uint64_t proposal_no;

    /* What is committed: the entry hash at each offset, and the state after
     * applying everything below it. */
    uint64_t *ref;      /* entry hash per offset */
    uint64_t *ref_cum;  /* ref_cum[o]: state after [0, o) */
    int32_t *ref_epoch; /* the epoch of the node that first applied it (who committed it) */
    int64_t committed;  /* offsets below are committed */
    int64_t capref;
    int32_t *leaders;   /* per epoch, -1 */
    int *leader_inc;    /* per epoch: the incarnation of the node that led it */
    int32_t capleaders;

    /* Liveness probe of the calm phase. */
    int64_t probe_offset; /* -1: none yet */
    int32_t probe_epoch;
    uint64_t probe_hash;

    char violation[512];
    totals_t t;
} S;

static void heap_push(ev_t e) {
    if (S.nheap == S.capheap) {
        S.capheap = S.capheap ? 2 * S.capheap : 256;
        S.heap = st_realloc(S.heap, sizeof *S.heap * (size_t)S.capheap);
    }
    e.seq = S.seq++;
    int i = S.nheap++;
    while (i > 0) {
        int p = (i - 1) / 2;
        ev_t *q = &S.heap[p];
        if (q->at < e.at || (q->at == e.at && q->seq < e.seq)) break;
        S.heap[i] = *q;
        i = p;
    }
    S.heap[i] = e;
}

static int ev_less(const ev_t *a, const ev_t *b) {
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static ev_t heap_pop(void) {
    ev_t top = S.heap[0];
    ev_t last = S.heap[--S.nheap];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const ev_t *mv = &last;
        if (l < S.nheap && ev_less(&S.heap[l], mv)) {
            m = l;
            mv = &S.heap[l];
        }
        if (r < S.nheap && ev_less(&S.heap[r], mv)) m = r;
        if (m == i) break;
        S.heap[i] = S.heap[m];
        i = m;
    }
    if (S.nheap > 0) S.heap[i] = last;
    return top;
}

/* ---- violations ------------------------------------------------------------------ */

static void violate(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violate(const char *fmt, ...) {
    if (S.violation[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(S.violation, sizeof S.violation, fmt, ap);
    va_end(ap);
}

static int node_index(int32_t id) {
    for (int i = 0; i < S.n; i++)
        if (S.ids[i] == id) return i;
    return -1;
}

static void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void vlog(const char *fmt, ...) {
    if (!S.verbose) return;
    va_list ap;
    va_start(ap, fmt);
    printf("%8" PRId64 " ms  ", S.now);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* ---- the reference of committed entries -------------------------------------------- */

static void ref_grow(int64_t need) {
    if (need < S.capref) return;
    int64_t cap = S.capref ? S.capref : 1024;
    while (cap <= need) cap *= 2;
    S.ref = st_realloc(S.ref, sizeof *S.ref * (size_t)cap);
    S.ref_cum = st_realloc(S.ref_cum, sizeof *S.ref_cum * (size_t)(cap + 1));
    S.ref_epoch = st_realloc(S.ref_epoch, sizeof *S.ref_epoch * (size_t)cap);
    S.capref = cap;
}

static void hook_applied(void *ctx, rm_node_t *m, const st_raft_entry_t *e, int k) {
    sim_node_t *sn = (sim_node_t *)m;
    for (int i = 0; i < k; i++) {
        int64_t o = e[i].base_offset;
        uint64_t h = rm_entry_hash(o, e[i].epoch, e[i].data, e[i].len);
        if (o != sn->applied_next) {
            violate("state machine: node %" PRId32 " applied offset %" PRId64
                    " but its next was %" PRId64, m->id, o, sn->applied_next);
            return;
        }
        if (e[i].record_count != 1) {
            violate("node %" PRId32 " applied an entry of %" PRId32 " records (sim proposes 1)",
                    m->id, e[i].record_count);
            return;
        }
        if (o < S.committed) {
            if (S.ref[o] != h) {
                violate("state machine: node %" PRId32 " applied at offset %" PRId64
                        " (epoch %" PRId32 ") an entry that differs from the one committed there",
                        m->id, o, e[i].epoch);
                return;
            }
        } else if (o == S.committed) {
            ref_grow(o + 1);
            S.ref[o] = h;
            S.ref_cum[o + 1] = rm_sm_step(S.ref_cum[o], h);
            S.ref_epoch[o] = m->r ? st_raft_epoch(m->r) : 0;
            S.committed = o + 1;
            S.t.commits++;
        } else {
            violate("state machine: node %" PRId32 " applied offset %" PRId64
                    " beyond the committed end %" PRId64, m->id, o, S.committed);
            return;
        }
        sn->applied_next = o + 1;
    }
    if (m->sm_hash != S.ref_cum[sn->applied_next])
        violate("state machine: node %" PRId32 "'s state at %" PRId64 " differs from the "
                "committed state", m->id, sn->applied_next);
}

static void hook_loaded(void *ctx, rm_node_t *m, st_raft_snapshot_id_t id) {
    sim_node_t *sn = (sim_node_t *)m;
    sn->applied_next = id.end_offset;
    if (id.end_offset > S.committed) {
        violate("snapshot: node %" PRId32 " loaded a snapshot ending at %" PRId64
                " beyond the committed end %" PRId64, m->id, id.end_offset, S.committed);
        return;
    }
    if (m->sm_hash != S.ref_cum[id.end_offset])
        violate("snapshot: node %" PRId32 " loaded snapshot %" PRId64 "-%" PRId32
                " whose state differs from the committed state there", m->id, id.end_offset,
                id.epoch);
}

/* ---- network and disk ---------------------------------------------------------------- */

static void hook_send(void *ctx, rm_node_t *m, int32_t dest, const st_raft_msg_t *msg) {
    int from = node_index(m->id);
    int to = node_index(dest);
    S.t.messages++;
    if (to < 0) {
        violate("node %" PRId32 " sent %s to unknown node %" PRId32, m->id,
                st_raft_msg_name(msg->type), dest);
        return;
    }
    if (!S.calm && (S.blocked[from][to] || chance(20))) {
        S.t.dropped++;
        return;
    }
    /* Crash at any step: sometimes the sender dies right after this send
     * (the step finishes first: raft is not re-entered). */
    if (!S.calm && chance(3)) S.crash_after_step = from + 1;
    int copies = !S.calm && chance(10) ? 2 : 1;
    for (int c = 0; c < copies; c++) {
        ev_t e = {0};
        e.kind = EV_DELIVER;
        e.node = to;
        e.from = m->id;
        e.at = S.now + (chance(50) && !S.calm ? rnd_range(20, 150) : rnd_range(1, 8));
        e.msg = rm_msg_copy(msg);
        heap_push(e);
    }
}

static void hook_flush(void *ctx, rm_node_t *m) {
    int i = node_index(m->id);
    ev_t e = {0};
    e.kind = EV_FLUSH;
    e.node = i;
    e.incarnation = S.nodes[i].incarnation;
    e.at = S.now + rnd_range(0, 6);
    heap_push(e);
}

static void refresh_deadline(int i) {
    sim_node_t *sn = &S.nodes[i];
    sn->deadline = sn->up ? st_raft_next_deadline(sn->m.r) : -1;
}

static void start_node(int i) {
    sim_node_t *sn = &S.nodes[i];
    st_raft_config_t cfg = S.cfg;
    cfg.node_id = S.ids[i];
    char err[512];
    sn->applied_next = 0;
    st_err_t e = rm_node_start(&sn->m, &cfg, err, sizeof err);
    if (e) {
        violate("node %" PRId32 " did not restart: %s", S.ids[i], err);
        return;
    }
    sn->up = 1;
    sn->incarnation++;
    refresh_deadline(i);
}

static void crash_node(int i) {
    sim_node_t *sn = &S.nodes[i];
    rm_node_crash(&sn->m, chance(300) ? (int)rnd_range(1, 3) : 0);
    sn->up = 0;
    sn->incarnation++;
    sn->deadline = -1;
    S.t.crashes++;
}

/* ---- faults and clients ------------------------------------------------------------------ */

static void heal(void) { memset(S.blocked, 0, sizeof S.blocked); }

static void fault(void) {
    int i = (int)rnd_range(0, S.n - 1);
    int kind = (int)rnd_range(0, 9);
    if (kind <= 2) {
        if (S.nodes[i].up) {
            vlog("crash node %" PRId32, S.ids[i]);
            crash_node(i);
            S.nodes[i].restart_at = S.now + rnd_range(10, 800);
        }
    } else if (kind <= 4) {
        heal();
        for (int j = 0; j < S.n; j++)
            if (j != i) S.blocked[i][j] = S.blocked[j][i] = 1;
        vlog("partition: node %" PRId32 " isolated", S.ids[i]);
    } else if (kind == 5) {
        heal();
        int side[MAXN];
        for (int j = 0; j < S.n; j++) side[j] = (int)(rnd() & 1);
        for (int a = 0; a < S.n; a++)
            for (int b = 0; b < S.n; b++) S.blocked[a][b] = side[a] != side[b];
        vlog("partition: random split");
    } else if (kind == 6) {
        /* One way only: i hears nobody. */
        for (int j = 0; j < S.n; j++)
            if (j != i) S.blocked[j][i] = 1;
        vlog("partition: node %" PRId32 " deaf", S.ids[i]);
    } else if (kind <= 8) {
        vlog("heal");
        heal();
    } else if (chance(300)) {
        /* A disk error: the next quorum-state write or log append fails;
         * the node stops, and its host takes it down and starts it again. */
        if (S.nodes[i].up) {
            vlog("node %" PRId32 ": the next %s fails", S.ids[i],
                 (rnd() & 1) ? "persist" : "append");
            if (rnd() & 1)
                S.nodes[i].m.fail_persist = ST_E_IO;
            else
                S.nodes[i].m.fail_append = ST_E_IO;
        }
    } else {
        for (int j = 0; j < S.n; j++)
            if (S.nodes[j].up && st_raft_role(S.nodes[j].m.r) == ST_RAFT_LEADER) {
                vlog("node %" PRId32 " resigns", S.ids[j]);
                st_raft_resign(S.nodes[j].m.r);
                refresh_deadline(j);
                break;
            }
    }
}

static void propose(void) {
    int i = (int)rnd_range(0, S.n - 1);
    sim_node_t *sn = &S.nodes[i];
    if (!sn->up) return;
    /* Clients find the leader: try the one that says it leads, else i. */
    for (int j = 0; j < S.n; j++)
        if (S.nodes[j].up && st_raft_role(S.nodes[j].m.r) == ST_RAFT_LEADER && chance(800)) {
            sn = &S.nodes[j];
            break;
        }
    char data[64];
    int len = snprintf(data, sizeof data, "seed %" PRIu64 " proposal %" PRIu64, S.seed,
                       S.proposal_no++);
    int64_t off = 0;
    int32_t ep = 0;
    st_err_t e = st_raft_propose(sn->m.r, (const uint8_t *)data, len, 1, &off, &ep);
    if (e == ST_OK) {
        S.t.proposals++;
        if (S.calm && S.probe_offset < 0) {
            S.probe_offset = off;
            S.probe_epoch = ep;
            S.probe_hash = rm_entry_hash(off, ep, (const uint8_t *)data, len);
            vlog("probe proposal at offset %" PRId64 " epoch %" PRId32, off, ep);
        }
    }
    refresh_deadline((int)(sn - S.nodes));
}

/* ---- invariants ---------------------------------------------------------------------------- */

static void check(void) {
    for (int i = 0; i < S.n && !S.violation[0]; i++) {
        sim_node_t *sn = &S.nodes[i];
        if (!sn->up) continue;
        st_raft_t *r = sn->m.r;
        if (st_raft_failed(r)) {
            violate("node %" PRId32 " failed: %s", S.ids[i], st_err_name(st_raft_failed(r)));
            return;
        }
        int32_t ep = st_raft_epoch(r);
        /* Votes: what a node acts on is durable, the durable epoch never goes
         * back, and a vote cast in an epoch never changes (across restarts). */
        if (sn->m.qs_len) {
            st_raft_qstate_t qs;
            char why[256];
            if (st_raft_qstate_decode(sn->m.qs, sn->m.qs_len, &qs, why, sizeof why)) {
                violate("quorum state: node %" PRId32 ": %s", S.ids[i], why);
                return;
            }
            if (qs.leader_epoch != ep || qs.voted_id != st_raft_voted_id(r)) {
                violate("quorum state: node %" PRId32 " acts in epoch %" PRId32
                        " with vote %" PRId32 " but its quorum-state holds epoch %" PRId32
                        " vote %" PRId32, S.ids[i], ep, st_raft_voted_id(r), qs.leader_epoch,
                        qs.voted_id);
                return;
            }
            if (qs.leader_epoch < sn->qs_epoch ||
                (qs.leader_epoch == sn->qs_epoch && sn->qs_voted != -1 &&
                 qs.voted_id != sn->qs_voted)) {
                violate("quorum state: node %" PRId32 " went from epoch %" PRId32 " vote %" PRId32
                        " to epoch %" PRId32 " vote %" PRId32, S.ids[i], sn->qs_epoch,
                        sn->qs_voted, qs.leader_epoch, qs.voted_id);
                return;
            }
            sn->qs_epoch = qs.leader_epoch;
            sn->qs_voted = qs.voted_id;
        } else if (ep != 0) {
            violate("quorum state: node %" PRId32 " is in epoch %" PRId32
                    " with no quorum-state written", S.ids[i], ep);
            return;
        }
        if (st_raft_role(r) == ST_RAFT_LEADER) {
            if (ep >= S.capleaders) {
                int32_t cap = S.capleaders ? S.capleaders : 64;
                while (cap <= ep) cap *= 2;
                S.leaders = st_realloc(S.leaders, sizeof *S.leaders * (size_t)cap);
                S.leader_inc = st_realloc(S.leader_inc, sizeof *S.leader_inc * (size_t)cap);
                for (int32_t k = S.capleaders; k < cap; k++) S.leaders[k] = -1;
                S.capleaders = cap;
            }
            if (S.leaders[ep] == -1) {
                S.leaders[ep] = S.ids[i];
                S.leader_inc[ep] = sn->incarnation;
                S.t.elections++;
                vlog("node %" PRId32 " leads epoch %" PRId32, S.ids[i], ep);
            } else if (S.leaders[ep] != S.ids[i]) {
                violate("election safety: nodes %" PRId32 " and %" PRId32
                        " both led epoch %" PRId32, S.leaders[ep], S.ids[i], ep);
                return;
            } else if (S.leader_inc[ep] != sn->incarnation) {
                violate("election safety: node %" PRId32 " led epoch %" PRId32
                        " again after a restart", S.ids[i], ep);
                return;
            }
            /* Durability (the Raft paper's leader completeness): a leader of
             * epoch e holds every entry committed in an epoch before e. */
            int64_t before = S.committed;
            while (before > 0 && S.ref_epoch[before - 1] >= ep) before--;
            int64_t end = rm_node_log_end(&sn->m);
            if (end < before) {
                violate("durability: leader %" PRId32 " of epoch %" PRId32
                        " ends its log at %" PRId64 " but entries up to %" PRId64
                        " were committed before its epoch", S.ids[i], ep, end, before);
                return;
            }
            if (sn->m.log_start > 0 &&
                (!sn->m.has_snap || sn->m.snap_id.end_offset < sn->m.log_start)) {
                violate("durability: leader %" PRId32 "'s log starts at %" PRId64
                        " with no snapshot up to there", S.ids[i], sn->m.log_start);
                return;
            }
            for (int64_t o = sn->m.log_start; o < before; o++) {
                const rm_entry_t *e = rm_node_entry(&sn->m, o);
                if (!e || rm_entry_hash(o, e->epoch, e->data, e->len) != S.ref[o]) {
                    violate("durability: leader %" PRId32 " of epoch %" PRId32
                            " holds at offset %" PRId64 " %s than the committed entry",
                            S.ids[i], ep, o, e ? "another entry" : "nothing");
                    return;
                }
            }
        }
        /* Log matching below the high watermark. */
        int64_t hw = st_raft_high_watermark(r);
        int64_t end = ST_MIN(hw, rm_node_log_end(&sn->m));
        if (hw > S.committed) {
            violate("log matching: node %" PRId32 " has high watermark %" PRId64
                    " above everything applied anywhere (%" PRId64 ")", S.ids[i], hw,
                    S.committed);
            return;
        }
        for (int64_t o = sn->m.log_start; o < end; o++) {
            const rm_entry_t *e = rm_node_entry(&sn->m, o);
            if (!e || rm_entry_hash(o, e->epoch, e->data, e->len) != S.ref[o]) {
                violate("log matching: node %" PRId32 " (high watermark %" PRId64
                        ") holds at offset %" PRId64 " %s than the committed entry",
                        S.ids[i], hw, o, e ? "another entry" : "nothing");
                return;
            }
        }
    }
}

/* ---- one seed -------------------------------------------------------------------------------- */

static void reset_seed(uint64_t seed) {
    for (int i = 0; i < MAXN; i++) rm_node_fini(&S.nodes[i].m);
    while (S.nheap) rm_msg_free(heap_pop().msg);
    free(S.ref);
    free(S.ref_cum);
    free(S.ref_epoch);
    free(S.leaders);
    free(S.leader_inc);
    ev_t *heap = S.heap;
    int capheap = S.capheap;
    int verbose = S.verbose;
    totals_t t = S.t;
    memset(&S, 0, sizeof S);
    S.heap = heap;
    S.capheap = capheap;
    S.verbose = verbose;
    S.t = t;
    S.seed = seed;
    rng_state = seed * 0x2545F4914F6CDD1Dull + 12345;
    S.probe_offset = -1;
    ref_grow(16);
    S.ref_cum[0] = 0;
}

static int run_seed(uint64_t seed, uint64_t *steps_out) {
    reset_seed(seed);
    int nvoters = chance(500) ? 3 : 5;
    S.n = nvoters + (chance(500) ? 1 : 0); /* sometimes a broker follows as an observer */
    for (int i = 0; i < S.n; i++) S.ids[i] = i < nvoters ? i + 1 : OBSERVER_ID;
    st_raft_config_defaults(&S.cfg);
    S.cfg.voters = S.ids;
    S.cfg.nvoters = nvoters;
    S.cfg.cluster_id = "sim-cluster";
    S.cfg.election_timeout_ms = 100;
    S.cfg.fetch_timeout_ms = 200;
    S.cfg.election_backoff_max_ms = 100;
    S.cfg.request_timeout_ms = 200;
    S.cfg.retry_backoff_ms = 10;
    S.cfg.fetch_max_wait_ms = 50;
    S.cfg.fetch_max_bytes = chance(400) ? 1 : 400; /* 1: one entry per Fetch */
    S.cfg.snapshot_chunk_bytes = 1000;
    S.cfg.snapshot_min_new_bytes = (int64_t)rnd_range(150, 600);
    rm_hooks_t hooks = {.ctx = NULL,
                        .send = hook_send,
                        .applied = hook_applied,
                        .loaded = hook_loaded,
                        .flush_queued = hook_flush};
    for (int i = 0; i < S.n; i++) {
        rm_node_init(&S.nodes[i].m, S.ids[i], &S.now, rnd() | 1, &hooks);
        S.nodes[i].restart_at = -1;
        S.nodes[i].qs_voted = -1;
    }
    for (int i = 0; i < S.n; i++) start_node(i);
    S.next_fault = rnd_range(50, 400);
    S.next_propose = rnd_range(5, 40);
    int64_t calm_at = FAULT_PHASE_MS;
    uint64_t steps = 0;
    int live = 0;

    while (!S.violation[0] && steps < MAX_STEPS) {
        /* The next thing to happen. */
        int64_t t = S.next_propose;
        int what = 0; /* 0 propose, 1 fault, 2 event, 3 tick, 4 restart, 5 calm */
        int who = -1;
        if (!S.calm && S.next_fault < t) {
            t = S.next_fault;
            what = 1;
        }
        if (!S.calm && calm_at < t) {
            t = calm_at;
            what = 5;
        }
        if (S.nheap && S.heap[0].at < t) {
            t = S.heap[0].at;
            what = 2;
        }
        for (int i = 0; i < S.n; i++) {
            if (S.nodes[i].up && S.nodes[i].deadline >= 0 && S.nodes[i].deadline < t) {
                t = S.nodes[i].deadline;
                what = 3;
                who = i;
            }
            if (!S.nodes[i].up && S.nodes[i].restart_at >= 0 && S.nodes[i].restart_at < t) {
                t = S.nodes[i].restart_at;
                what = 4;
                who = i;
            }
        }
        if (t > S.now) S.now = t;
        if (S.calm && S.now > calm_at + CALM_BOUND_MS) break;
        steps++;
        switch (what) {
        case 0:
            propose();
            S.next_propose = S.now + rnd_range(2, 40);
            break;
        case 1:
            fault();
            S.next_fault = S.now + rnd_range(30, 500);
            break;
        case 5:
            S.calm = 1;
            heal();
            vlog("calm: healed, restarting every node, no more faults");
            for (int i = 0; i < S.n; i++)
                if (!S.nodes[i].up) start_node(i);
            break;
        case 2: {
            ev_t e = heap_pop();
            sim_node_t *sn = &S.nodes[e.node];
            if (e.kind == EV_DELIVER) {
                int from = node_index(e.from);
                if (sn->up) {
                    st_raft_recv(sn->m.r, e.from, e.msg);
                } else if (e.msg->type % 2 == 1 && S.nodes[from].up && chance(500)) {
                    /* a request to a node that is down: the sender's host
                     * sees the connection refused, as stratad's does */
                    st_raft_leader_unreachable(S.nodes[from].m.r, S.ids[e.node]);
                    refresh_deadline(from);
                }
                rm_msg_free(e.msg);
            } else if (e.kind == EV_FLUSH) {
                if (sn->up && e.incarnation == sn->incarnation) rm_node_flush_complete(&sn->m);
            }
            if (sn->up) refresh_deadline(e.node);
            break;
        }
        case 3:
            st_raft_tick(S.nodes[who].m.r);
            refresh_deadline(who);
            break;
        case 4:
            vlog("restart node %" PRId32, S.ids[who]);
            S.nodes[who].restart_at = -1;
            start_node(who);
            break;
        }
        for (int i = 0; i < S.n; i++)
            if (S.nodes[i].up && st_raft_failed(S.nodes[i].m.r) == ST_E_IO) {
                vlog("node %" PRId32 " stopped on a disk error; restarting it", S.ids[i]);
                crash_node(i);
                S.nodes[i].restart_at = S.now + rnd_range(10, 300);
                S.t.disk_errors++;
            }
        if (S.crash_after_step) {
            int c = S.crash_after_step - 1;
            S.crash_after_step = 0;
            if (S.nodes[c].up) {
                vlog("crash node %" PRId32 " right after it sent", S.ids[c]);
                crash_node(c);
                S.nodes[c].restart_at = S.now + rnd_range(0, 300);
            }
        }
        check();
        if (S.calm && S.probe_offset >= 0 && S.committed > S.probe_offset) {
            if (S.ref[S.probe_offset] != S.probe_hash) {
                /* The probe was overwritten (its leader lost the epoch): ask again. */
                S.probe_offset = -1;
            } else {
                int all = 1;
                for (int i = 0; i < S.n; i++)
                    if (S.nodes[i].applied_next <= S.probe_offset) all = 0;
                if (all) {
                    live = 1;
                    int64_t took = S.now - calm_at;
                    S.t.calm_ms_sum += took;
                    S.t.live_seeds++;
                    if (took > S.t.calm_ms_max) S.t.calm_ms_max = took;
                    break;
                }
            }
        }
    }
    if (!S.violation[0] && !live) {
        if (steps >= MAX_STEPS)
            violate("liveness: %d steps without every node applying a proposal made after "
                    "healing", MAX_STEPS);
        else
            violate("liveness: %d ms after healing, no proposal was applied by every node "
                    "(probe offset %" PRId64 ", committed %" PRId64 ")",
                    CALM_BOUND_MS, S.probe_offset, S.committed);
    }
    if (S.violation[0])
        for (int i = 0; i < S.n; i++) {
            sim_node_t *sn = &S.nodes[i];
            if (!sn->up) {
                printf("  node %" PRId32 ": down\n", S.ids[i]);
                continue;
            }
            printf("  node %" PRId32 ": %s epoch %" PRId32 " leader %" PRId32 " voted %" PRId32
                   " log [%" PRId64 ", %" PRId64 ") durable %" PRId64 " hw %" PRId64
                   " applied %" PRId64 "\n",
                   S.ids[i], st_raft_role_name(st_raft_role(sn->m.r)), st_raft_epoch(sn->m.r),
                   st_raft_leader_id(sn->m.r), st_raft_voted_id(sn->m.r), sn->m.log_start,
                   rm_node_log_end(&sn->m), sn->m.durable_end, st_raft_high_watermark(sn->m.r),
                   sn->applied_next);
        }
    for (int i = 0; i < S.n; i++) {
        S.t.snapshots_fetched += (uint64_t)S.nodes[i].m.snapshots_installed;
        S.t.snapshots_made += (uint64_t)S.nodes[i].m.snapshots_made;
    }
    *steps_out = steps;
    return S.violation[0] ? 1 : 0;
}

static void usage(void) {
    fprintf(stderr, "usage: raft_sim --seeds N [--first S] [--keep-going] | --seed S [--verbose]\n"
                    "                [--plant-bug commit-without-majority]\n");
    exit(2);
}

int main(int argc, char **argv) {
    uint64_t nseeds = 0, first = 1;
    int single = 0, expect = 0, keep_going = 0, planted = 0;
    uint64_t bad_seeds = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
            nseeds = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--first") && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
            nseeds = 1;
            single = 1;
        } else if (!strcmp(argv[i], "--keep-going")) {
            keep_going = 1;
        } else if (!strcmp(argv[i], "--expect-violation")) {
            expect = 1;
        } else if (!strcmp(argv[i], "--verbose")) {
            S.verbose = 1;
        } else if (!strcmp(argv[i], "--plant-bug") && i + 1 < argc) {
            if (strcmp(argv[++i], "commit-without-majority") != 0) usage();
            st_raft__set_planted_bug(ST_RAFT_BUG_COMMIT_WITHOUT_MAJORITY);
            planted = 1;
            printf("planted bug: commit-without-majority\n");
        } else {
            usage();
        }
    }
    if (nseeds == 0) usage();
    FILE *devnull = NULL;
    if (!S.verbose) {
        /* raft's own lines (injected disk errors, resignations) only with
         * --verbose: a run prints its verdict and figures. */
        devnull = fopen("/dev/null", "w");
        if (devnull) st_log_set_file(devnull);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = 0;
    for (uint64_t s = first; s < first + nseeds; s++) {
        uint64_t steps = 0;
        int bad = run_seed(s, &steps);
        S.t.seeds++;
        S.t.steps += steps;
        if (bad) {
            printf("seed %" PRIu64 ": VIOLATION: %s\n", s, S.violation);
            if (!single && !keep_going)
                printf("replay: raft_sim --seed %" PRIu64 " --verbose%s\n", s,
                       planted ? " --plant-bug commit-without-majority" : "");
            rc = 1;
            bad_seeds++;
            if (!keep_going) break;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("raft_sim: %" PRIu64 " seeds, %" PRIu64 " steps, %" PRIu64 " elections, %" PRIu64
           " commits, %" PRIu64 " proposals, %" PRIu64 " crashes, %" PRIu64
           " snapshots taken, %" PRIu64 " fetched, %" PRIu64 " messages (%" PRIu64
           " dropped), %" PRIu64 " disk errors, %.1f s%s\n",
           S.t.seeds, S.t.steps, S.t.elections, S.t.commits, S.t.proposals, S.t.crashes,
           S.t.snapshots_made, S.t.snapshots_fetched, S.t.messages, S.t.dropped,
           S.t.disk_errors, secs,
           rc ? "" : ", 0 violations");
    if (S.t.live_seeds)
        printf("raft_sim: after healing, every node applied a new proposal within %.0f ms on "
               "average, %" PRId64 " ms at most (bound %d ms)\n",
               (double)S.t.calm_ms_sum / (double)S.t.live_seeds, S.t.calm_ms_max, CALM_BOUND_MS);
    if (keep_going && rc)
        printf("raft_sim: %" PRIu64 " of %" PRIu64 " seeds violated an invariant\n", bad_seeds,
               S.t.seeds);
    for (int i = 0; i < MAXN; i++) rm_node_fini(&S.nodes[i].m);
    while (S.nheap) rm_msg_free(heap_pop().msg);
    free(S.heap);
    free(S.ref);
    free(S.ref_cum);
    free(S.ref_epoch);
    free(S.leaders);
    free(S.leader_inc);
    if (devnull) {
        st_log_set_file(NULL);
        fclose(devnull);
    }
    if (expect) {
        printf(rc ? "the checker caught the planted bug\n"
                  : "the checker did NOT catch the planted bug\n");
        return rc ? 0 : 1;
    }
    return rc;
}

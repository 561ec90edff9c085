/*
 * reassign.c - the PartitionChangeRecords the active controller's
 * decisions are made of, and partition reassignment (KIP-455) among them.
 *
 * A reassignment moves a partition from its replicas (the original) to a
 * target, grow first, shrink after, as Kafka's controller does:
 *
 *   start     replicas = target + (original - target), adding = target -
 *             original, removing = original - target; ISR and leader stay.
 *             The new replicas open the partition and fetch from the leader.
 *   catch up  the leader adds each caught-up new replica to the ISR
 *             (AlterPartition, as for any follower);
 *   complete  once every adding replica is in the ISR: replicas = target,
 *             the removing ones leave the ISR, adding and removing empty;
 *             a leader being removed hands over to the first target replica
 *             in the ISR that is not fenced (a new leader epoch).  The
 *             brokers that left delete their copy.
 *
 * Completion is tried after every ISR change of a partition being
 * reassigned (st_ctl__isr_change) and at once when nothing is added (a
 * shrink).  A cancel (replicas null) goes back to the original: the
 * replicas being added leave replicas and ISR.  A new reassignment of a
 * partition already being reassigned starts again from its original.
 */
#include "controller_int.h"

#include <stdlib.h>

/* ---- PartitionChangeRecords gathered into one batch ---------------------------------------- */

static int32_t *own_list(st_ctl_changes_t *ch, int i, int which, const int32_t *v, int n) {
    int32_t *d = st_malloc(sizeof *d * (size_t)(n > 0 ? n : 1));
    if (n > 0) memcpy(d, v, sizeof *d * (size_t)n);
    free(ch->own[i][which]);
    ch->own[i][which] = d;
    return d;
}

void st_ctl__changes_list(st_ctl_changes_t *ch, int which, const int32_t *v, int n) {
    st_ctl__changes_list_at(ch, ch->n - 1, which, v, n);
}

void st_ctl__changes_list_at(st_ctl_changes_t *ch, int i, int which, const int32_t *v, int n) {
    st_mrec_partition_change_t *r = &ch->v[i];
    int32_t *d = own_list(ch, i, which, v, n);
    switch (which) {
    case ST_CHG_ISR: r->isr.v = d, r->isr.n = n; break;
    case ST_CHG_REPLICAS: r->replicas.v = d, r->replicas.n = n; break;
    case ST_CHG_ADDING: r->adding_replicas.v = d, r->adding_replicas.n = n; break;
    case ST_CHG_REMOVING: r->removing_replicas.v = d, r->removing_replicas.n = n; break;
    case ST_CHG_ELR: r->eligible_leader_replicas.v = d, r->eligible_leader_replicas.n = n; break;
    default: r->last_known_elr.v = d, r->last_known_elr.n = n; break;
    }
}

void st_ctl__changes_add(st_ctl_changes_t *ch, const st_meta_topic_t *t, const st_meta_partition_t *mp,
                         int32_t leader, const int32_t *isr, int nisr) {
    if (ch->n == ch->cap) {
        ch->cap = ch->cap ? 2 * ch->cap : 16;
        ch->v = st_realloc(ch->v, sizeof *ch->v * (size_t)ch->cap);
        ch->own = st_realloc(ch->own, sizeof *ch->own * (size_t)ch->cap);
    }
    st_mrec_partition_change_t *r = &ch->v[ch->n];
    st_schema_defaults(&st_mrec_partition_change_schema, r); /* every list null: unchanged */
    memset(ch->own[ch->n], 0, sizeof ch->own[ch->n]);
    r->partition_id = mp->id;
    r->topic_id = t->id;
    r->leader = leader;
    ch->n++;
    if (isr) st_ctl__changes_list(ch, ST_CHG_ISR, isr, nisr);
}

void st_ctl__changes_fini(st_ctl_changes_t *ch) {
    for (int i = 0; i < ch->n; i++)
        for (int k = 0; k < ST_CHG_NLISTS; k++) free(ch->own[i][k]);
    free(ch->own);
    free(ch->v);
}

st_err_t st_ctl__commit_changes(st_controller_t *c, const st_ctl_rec_t *first, st_ctl_changes_t *ch) {
    st_ctl__changes_elr(c, ch);
    int k = 0;
    st_ctl_rec_t *recs = st_malloc(sizeof *recs * (size_t)(ch->n + 1));
    if (first) recs[k++] = *first;
    for (int i = 0; i < ch->n; i++) recs[k++] = (st_ctl_rec_t){ST_MREC_PARTITION_CHANGE, &ch->v[i]};
    st_err_t e = st_ctl__commit_records(c, recs, k);
    free(recs);
    return e;
}

/* ---- reassignment --------------------------------------------------------------------------- */

/* replicas of a target; the union of a target and its original is at most
 * twice that, within what a partition's replica state holds */
#define REASSIGN_MAX 32

/* out = a minus b, in a's order; returns its length */
static int minus(const int32_t *a, int na, const int32_t *b, int nb, int32_t *out) {
    int n = 0;
    for (int i = 0; i < na; i++)
        if (!st_ctl__has(b, nb, a[i])) out[n++] = a[i];
    return n;
}

static int same_set(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (!st_ctl__has(b, nb, a[i])) return 0;
    return 1;
}

/* A partition's assignment as a reassignment step leaves it. */
typedef struct plan {
    int32_t replicas[2 * REASSIGN_MAX], adding[REASSIGN_MAX], removing[2 * REASSIGN_MAX];
    int32_t isr[2 * REASSIGN_MAX];
    int nreplicas, nadding, nremoving, nisr;
    int32_t leader;
} plan_t;

/* Completes p when every adding replica is in its ISR, something of the
 * target stays in the ISR and a leader can stay or be found there; 0 (p
 * unchanged) otherwise. */
static int complete(plan_t *p, const st_meta_image_t *img) {
    for (int i = 0; i < p->nadding; i++)
        if (!st_ctl__has(p->isr, p->nisr, p->adding[i])) return 0;
    int32_t target[2 * REASSIGN_MAX], isr[2 * REASSIGN_MAX];
    int nt = minus(p->replicas, p->nreplicas, p->removing, p->nremoving, target);
    int ni = minus(p->isr, p->nisr, p->removing, p->nremoving, isr);
    if (nt == 0 || ni == 0) return 0;
    int32_t leader = p->leader;
    if (leader < 0 || st_ctl__has(p->removing, p->nremoving, leader)) {
        leader = -1;
        for (int i = 0; i < nt && leader < 0; i++)
            if (st_ctl__has(isr, ni, target[i]) && st_ctl__live(img, target[i])) leader = target[i];
        if (leader < 0) return 0;
    }
    memcpy(p->replicas, target, sizeof *target * (size_t)nt);
    p->nreplicas = nt;
    memcpy(p->isr, isr, sizeof *isr * (size_t)ni);
    p->nisr = ni;
    p->nadding = p->nremoving = 0;
    p->leader = leader;
    return 1;
}

/* The change that takes mp to p, in ch. */
static void add_plan(st_ctl_changes_t *ch, const st_meta_topic_t *t, const st_meta_partition_t *mp,
                     const plan_t *p) {
    st_ctl__changes_add(ch, t, mp, p->leader == mp->leader ? ST_MREC_NO_LEADER_CHANGE : p->leader,
                        NULL, 0);
    if (!st_ctl__same_list(p->isr, p->nisr, mp->isr, mp->nisr)) st_ctl__changes_list(ch, ST_CHG_ISR, p->isr, p->nisr);
    if (!st_ctl__same_list(p->replicas, p->nreplicas, mp->replicas, mp->nreplicas))
        st_ctl__changes_list(ch, ST_CHG_REPLICAS, p->replicas, p->nreplicas);
    if (!st_ctl__same_list(p->adding, p->nadding, mp->adding, mp->nadding))
        st_ctl__changes_list(ch, ST_CHG_ADDING, p->adding, p->nadding);
    if (!st_ctl__same_list(p->removing, p->nremoving, mp->removing, mp->nremoving))
        st_ctl__changes_list(ch, ST_CHG_REMOVING, p->removing, p->nremoving);
}

static void plan_of(plan_t *p, const st_meta_partition_t *mp) {
    p->nreplicas = ST_MIN(mp->nreplicas, 2 * REASSIGN_MAX);
    memcpy(p->replicas, mp->replicas, sizeof(int32_t) * (size_t)p->nreplicas);
    p->nadding = ST_MIN(mp->nadding, REASSIGN_MAX);
    memcpy(p->adding, mp->adding, sizeof(int32_t) * (size_t)p->nadding);
    p->nremoving = ST_MIN(mp->nremoving, 2 * REASSIGN_MAX);
    memcpy(p->removing, mp->removing, sizeof(int32_t) * (size_t)p->nremoving);
    p->nisr = ST_MIN(mp->nisr, 2 * REASSIGN_MAX);
    memcpy(p->isr, mp->isr, sizeof(int32_t) * (size_t)p->nisr);
    p->leader = mp->leader;
}

void st_ctl__isr_change(st_ctl_changes_t *ch, const st_meta_image_t *img, const st_meta_topic_t *t,
                        const st_meta_partition_t *mp, const int32_t *isr, int nisr) {
    plan_t p;
    if ((mp->nadding > 0 || mp->nremoving > 0) && nisr <= 2 * REASSIGN_MAX) {
        plan_of(&p, mp);
        memcpy(p.isr, isr, sizeof *isr * (size_t)nisr);
        p.nisr = nisr;
        if (complete(&p, img)) {
            add_plan(ch, t, mp, &p);
            ST_INFO("controller", "%s-%d: reassignment complete: replicas %d of them, leader %d",
                    t->name, (int)mp->id, p.nreplicas, (int)p.leader);
            return;
        }
    }
    st_ctl__changes_add(ch, t, mp, ST_MREC_NO_LEADER_CHANGE, isr, nisr);
}

static int same_name(st_str_t a, st_str_t b) {
    return a.len == b.len && (a.len <= 0 || !memcmp(a.p, b.p, (size_t)a.len));
}

/* One partition of an AlterPartitionReassignments: its change in ch, or
 * an error with Kafka's message. */
static st_err_t reassign_one(st_controller_t *c, const st_meta_topic_t *t, const st_meta_partition_t *mp,
                             const int32_t *target, int nt, st_ctl_changes_t *ch, char *msg, size_t n) {
    const st_meta_image_t *img = c->image;
    int32_t original[2 * REASSIGN_MAX];
    int no = minus(mp->replicas, ST_MIN(mp->nreplicas, 2 * REASSIGN_MAX), mp->adding, mp->nadding, original);
    int busy = mp->nadding > 0 || mp->nremoving > 0;
    plan_t p;
    plan_of(&p, mp);
    if (nt < 0) { /* cancel: back to the original */
        if (!busy) {
            snprintf(msg, n, "No reassignment is in progress for %s-%d.", t->name, (int)mp->id);
            return ST_E_NO_REASSIGNMENT_IN_PROGRESS;
        }
        p.nisr = minus(mp->isr, ST_MIN(mp->nisr, 2 * REASSIGN_MAX), mp->adding, mp->nadding, p.isr);
        memcpy(p.replicas, original, sizeof *original * (size_t)no);
        p.nreplicas = no;
        p.nadding = p.nremoving = 0;
        if (p.leader < 0 || st_ctl__has(mp->adding, mp->nadding, p.leader)) {
            p.leader = -1;
            for (int i = 0; i < no && p.leader < 0; i++)
                if (st_ctl__has(p.isr, p.nisr, original[i]) && st_ctl__live(img, original[i])) p.leader = original[i];
        }
        if (p.nisr == 0 || p.leader < 0) {
            snprintf(msg, n, "Cannot cancel the reassignment of %s-%d: no replica of its original "
                             "assignment is in the ISR.", t->name, (int)mp->id);
            return ST_E_INVALID_REPLICA_ASSIGNMENT;
        }
        add_plan(ch, t, mp, &p);
        return ST_OK;
    }
    if (nt == 0) {
        snprintf(msg, n, "The replica set of %s-%d cannot be empty.", t->name, (int)mp->id);
        return ST_E_INVALID_REPLICA_ASSIGNMENT;
    }
    if (nt > REASSIGN_MAX) {
        snprintf(msg, n, "%d replicas for %s-%d: at most %d are allowed.", nt, t->name, (int)mp->id,
                 REASSIGN_MAX);
        return ST_E_INVALID_REPLICA_ASSIGNMENT;
    }
    for (int i = 0; i < nt; i++) {
        if (st_ctl__has(target, i, target[i])) {
            snprintf(msg, n, "Duplicate replica id %d in the assignment of %s-%d.", (int)target[i],
                     t->name, (int)mp->id);
            return ST_E_INVALID_REPLICA_ASSIGNMENT;
        }
        if (!st_image_broker(img, target[i])) {
            snprintf(msg, n, "The assignment of %s-%d includes broker %d, but no such broker is "
                             "registered.", t->name, (int)mp->id, (int)target[i]);
            return ST_E_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    if (!busy && same_set(target, nt, original, no)) {
        if (st_ctl__same_list(target, nt, mp->replicas, mp->nreplicas)) return ST_OK; /* nothing to do */
        memcpy(p.replicas, target, sizeof *target * (size_t)nt); /* a new preferred order */
        add_plan(ch, t, mp, &p);
        return ST_OK;
    }
    /* grow: target first (its order is the final one), then what leaves */
    memcpy(p.replicas, target, sizeof *target * (size_t)nt);
    int rest = minus(original, no, target, nt, p.replicas + nt);
    p.nreplicas = nt + rest;
    p.nadding = minus(target, nt, original, no, p.adding);
    memcpy(p.removing, p.replicas + nt, sizeof(int32_t) * (size_t)rest);
    p.nremoving = rest;
    /* the ISR of a restart keeps only replicas that stay in the union */
    int32_t isr[2 * REASSIGN_MAX];
    int ni = 0;
    for (int i = 0; i < p.nisr; i++)
        if (st_ctl__has(p.replicas, p.nreplicas, p.isr[i])) isr[ni++] = p.isr[i];
    if (ni > 0) {
        memcpy(p.isr, isr, sizeof *isr * (size_t)ni);
        p.nisr = ni;
    }
    int nadd = p.nadding;
    int done = complete(&p, img); /* nothing to add: a shrink completes at once */
    add_plan(ch, t, mp, &p);
    ST_INFO("controller", "%s-%d: reassignment %s: %d replica(s) to add, %d to remove", t->name,
            (int)mp->id, done ? "done at once" : "started", nadd, rest);
    return ST_OK;
}

void st_controller_alter_reassignments(st_controller_t *c, const st_reassign_req_t *q,
                                       st_reassign_resp_t *r, st_arena_t *a) {
    st_schema_defaults(&st_reassign_resp_schema, r);
    ST_ARRAY_ALLOC(r->responses, a, q->topics.n);
    if (!c->raft || st_raft_role(c->raft) != ST_RAFT_LEADER || !c->image) {
        r->error_code = st_err_wire(ST_E_NOT_CONTROLLER);
        r->responses.n = 0;
        return;
    }
    st_ctl_changes_t ch = {0};
    int total = 0;
    for (int i = 0; i < q->topics.n; i++) total += q->topics.v[i].partitions.n;
    int *change_of = st_malloc(sizeof(int) * (size_t)(total + 1));
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        const st_reassign_req_topic_t *qt = &q->topics.v[i];
        st_reassign_resp_topic_t *rt = &r->responses.v[i];
        st_schema_defaults(&st_reassign_resp_topic_schema, rt);
        rt->name = qt->name;
        ST_ARRAY_ALLOC(rt->partitions, a, qt->partitions.n);
        const st_meta_topic_t *t = st_image_topic(c->image, qt->name.p, (size_t)ST_MAX(qt->name.len, 0));
        for (int j = 0; j < qt->partitions.n; j++, k++) {
            const st_reassign_req_part_t *qp = &qt->partitions.v[j];
            st_reassign_resp_part_t *rp = &rt->partitions.v[j];
            st_schema_defaults(&st_reassign_resp_part_schema, rp);
            rp->partition_index = qp->partition_index;
            change_of[k] = -1;
            char msg[256] = "";
            st_err_t e = ST_OK;
            int dup = 0;
            for (int jj = 0; jj < j; jj++) dup |= qt->partitions.v[jj].partition_index == qp->partition_index;
            for (int ii = 0; ii < i && !dup; ii++)
                if (same_name(q->topics.v[ii].name, qt->name))
                    for (int jj = 0; jj < q->topics.v[ii].partitions.n; jj++)
                        dup |= q->topics.v[ii].partitions.v[jj].partition_index == qp->partition_index;
            if (!t || qp->partition_index < 0 || qp->partition_index >= t->nparts) {
                e = ST_E_UNKNOWN_TOPIC_OR_PARTITION;
                snprintf(msg, sizeof msg, "The partition does not exist.");
            } else if (dup) {
                e = ST_E_INVALID_REQUEST;
                snprintf(msg, sizeof msg, "Partition %d is given twice.", (int)qp->partition_index);
            } else {
                int before = ch.n;
                e = reassign_one(c, t, &t->parts[qp->partition_index], qp->replicas.v, qp->replicas.n, &ch,
                                 msg, sizeof msg);
                if (ch.n > before) change_of[k] = before;
            }
            rp->error_code = st_err_wire(e);
            if (e) rp->error_message = st_str(st_arena_strndup(a, msg, strlen(msg)));
        }
    }
    st_err_t ce = ch.n ? st_ctl__commit_changes(c, NULL, &ch) : ST_OK;
    if (ce) {
        k = 0;
        for (int i = 0; i < q->topics.n; i++)
            for (int j = 0; j < r->responses.v[i].partitions.n; j++, k++)
                if (change_of[k] >= 0) {
                    st_reassign_resp_part_t *rp = &r->responses.v[i].partitions.v[j];
                    rp->error_code = st_err_wire(ce);
                    char msg[160];
                    snprintf(msg, sizeof msg, "the reassignment was not committed: %s", st_err_msg(ce));
                    rp->error_message = st_str(st_arena_strndup(a, msg, strlen(msg)));
                }
    }
    free(change_of);
    st_ctl__changes_fini(&ch);
}

static int wanted(const st_list_reassign_req_t *q, const char *topic, int32_t part) {
    if (q->topics.n < 0) return 1;
    for (int i = 0; i < q->topics.n; i++) {
        const st_list_reassign_req_topic_t *qt = &q->topics.v[i];
        if (!st_str_eq(qt->name, topic)) continue;
        for (int j = 0; j < qt->partition_indexes.n; j++)
            if (qt->partition_indexes.v[j] == part) return 1;
    }
    return 0;
}

void st_list_reassignments(const st_meta_image_t *img, const st_list_reassign_req_t *q,
                           st_list_reassign_resp_t *r, st_arena_t *a) {
    st_schema_defaults(&st_list_reassign_resp_schema, r);
    int nt = 0;
    ST_ARRAY_ALLOC(r->topics, a, img->ntopics);
    for (int i = 0; i < img->ntopics; i++) {
        const st_meta_topic_t *t = img->topics[i];
        int np = 0;
        for (int k = 0; k < t->nparts; k++)
            np += (t->parts[k].nadding > 0 || t->parts[k].nremoving > 0) && wanted(q, t->name, k);
        if (np == 0) continue;
        st_list_reassign_resp_topic_t *rt = &r->topics.v[nt++];
        st_schema_defaults(&st_list_reassign_resp_topic_schema, rt);
        rt->name = st_str(st_arena_strndup(a, t->name, strlen(t->name)));
        ST_ARRAY_ALLOC(rt->partitions, a, np);
        int m = 0;
        for (int k = 0; k < t->nparts; k++) {
            const st_meta_partition_t *mp = &t->parts[k];
            if (!((mp->nadding > 0 || mp->nremoving > 0) && wanted(q, t->name, k))) continue;
            st_list_reassign_resp_part_t *rp = &rt->partitions.v[m++];
            rp->partition_index = k;
            rp->replicas.v = st_arena_dup_i32(a, mp->replicas, mp->nreplicas);
            rp->replicas.n = mp->nreplicas;
            rp->adding_replicas.v = st_arena_dup_i32(a, mp->adding, mp->nadding);
            rp->adding_replicas.n = mp->nadding;
            rp->removing_replicas.v = st_arena_dup_i32(a, mp->removing, mp->nremoving);
            rp->removing_replicas.n = mp->nremoving;
        }
    }
    r->topics.n = nt;
}

/*
 * elect.c - the rules a partition's leader, ISR and eligible leader
 * replicas (KIP-966) follow through every change the active controller
 * makes, as Kafka's PartitionChangeBuilder applies them.
 *
 * The high watermark does not move while the ISR is smaller than
 * min.insync.replicas (the leader's side, replica.c).  So a replica that
 * leaves an ISR which is, or becomes, smaller than that holds everything
 * committed: it is an eligible leader replica (ELR).  Hence:
 *   - ISR >= min.insync.replicas (at most the replication factor): the
 *     ELR is empty;
 *   - below it, the ELR is the old ELR and the old ISR, minus the new ISR,
 *     minus a broker that registered again after an unclean stop (it may
 *     have lost what it had not flushed);
 *   - the ISR may become empty (the last member fenced); a leader is then
 *     elected from the ELR, which leaves the ISR as that one replica;
 *   - with ISR and ELR both empty the last known leader (kept in the last
 *     known ELR while the partition has none) is elected when it is back,
 *     as an unclean election: the ISR is just it and the ELR empty;
 *   - any other unclean election (unclean.leader.election.enable) empties
 *     the ELR too;
 *   - a broker back from an unclean stop leaves every ISR and ELR, except
 *     where it is the only in-sync replica and none is eligible: there it
 *     keeps leading, at a new leader epoch when it has followers (a single
 *     node's restart after kill -9 keeps its partitions online).
 */
#include "controller_int.h"

#include <stdlib.h>

int st_ctl__min_isr(const st_controller_t *c, const st_meta_topic_t *t, int n) {
    const char *v = st_meta_topic_config(t, "min.insync.replicas");
    int m = v ? atoi(v) : c->cfg.broker->min_insync_replicas;
    return ST_MAX(1, ST_MIN(m, n));
}

int st_ctl__unclean_allowed(const st_controller_t *c, const st_meta_topic_t *t) {
    const char *v = st_meta_topic_config(t, "unclean.leader.election.enable");
    if (v) return !strcmp(v, "true");
    return c->cfg.broker->unclean_leader_election_enable;
}

/* The ELR a change leaves: out (room for mp's ELR and ISR) from mp and
 * the ISR and replicas the change leaves; `unclean` excluded. */
static int elr_of(const st_meta_partition_t *mp, const int32_t *isr, int nisr, const int32_t *reps,
                  int nreps, int min_isr, int32_t unclean, int32_t *out) {
    if (nisr >= min_isr) return 0;
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        const int32_t *v = pass ? mp->isr : mp->elr;
        int nv = pass ? mp->nisr : mp->nelr;
        for (int i = 0; i < nv; i++)
            if (v[i] != unclean && !st_ctl__has(isr, nisr, v[i]) && st_ctl__has(reps, nreps, v[i]) && !st_ctl__has(out, n, v[i]))
                out[n++] = v[i];
    }
    return n;
}

static int acceptable(const st_meta_image_t *img, int32_t r, int32_t removed, int32_t added,
                      int32_t unclean) {
    if (r < 0 || r == removed || r == unclean) return 0;
    return r == added || st_ctl__live(img, r);
}

void st_ctl__broker_change(st_controller_t *c, const st_meta_image_t *img, const st_meta_topic_t *t,
                           const st_meta_partition_t *mp, int32_t removed, int32_t added,
                           int32_t unclean, st_ctl_changes_t *ch) {
    size_t cap = (size_t)(mp->nreplicas + mp->nisr + mp->nelr + 1);
    int32_t *isr = st_malloc(sizeof *isr * cap), *elr = st_malloc(sizeof *elr * cap);
    /* A broker back from an unclean stop that is the only in-sync replica,
     * with no eligible one beside it, keeps leading, at a new leader epoch
     * where other replicas may hold what it lost: Kafka's way (out of the
     * ISR, back as the last known leader once unfenced) ends the same,
     * with the partition offline in between. */
    int keep = unclean >= 0 && mp->nisr == 1 && mp->isr[0] == unclean && mp->nelr == 0;
    int32_t out = keep ? -1 : unclean; /* leaves the ISR and may not lead */
    int nisr = 0;
    for (int i = 0; i < mp->nisr; i++)
        if (mp->isr[i] != removed && mp->isr[i] != out) isr[nisr++] = mp->isr[i];
    int min_isr = st_ctl__min_isr(c, t, mp->nreplicas);
    int nelr = elr_of(mp, isr, nisr, mp->replicas, mp->nreplicas, min_isr, unclean, elr);
    int32_t leader = mp->leader;
    if (!(st_ctl__has(isr, nisr, leader) && acceptable(img, leader, removed, added, out))) {
        leader = -1;
        /* the first replica, in preferred order, that may lead */
        for (int r = 0; r < mp->nreplicas && leader < 0; r++)
            if (st_ctl__has(isr, nisr, mp->replicas[r]) && acceptable(img, mp->replicas[r], removed, added, out))
                leader = mp->replicas[r];
        for (int r = 0; r < mp->nreplicas && leader < 0 && nisr == 0; r++)
            if (st_ctl__has(elr, nelr, mp->replicas[r]) && acceptable(img, mp->replicas[r], removed, added, out)) {
                leader = mp->replicas[r];
                int k = 0;
                for (int i = 0; i < nelr; i++)
                    if (elr[i] != leader) elr[k++] = elr[i];
                nelr = k;
            }
        int unclean_election = 0;
        if (leader < 0 && nisr == 0 && nelr == 0 && mp->nlkelr == 1 &&
            acceptable(img, mp->lkelr[0], removed, added, out)) {
            leader = mp->lkelr[0];
            unclean_election = 1;
        }
        for (int r = 0; r < mp->nreplicas && leader < 0 && st_ctl__unclean_allowed(c, t); r++)
            if (acceptable(img, mp->replicas[r], removed, added, out)) {
                leader = mp->replicas[r];
                unclean_election = 1;
            }
        if (leader >= 0 && !st_ctl__has(isr, nisr, leader)) { /* from the ELR, or unclean */
            isr[0] = leader;
            nisr = 1;
        }
        if (unclean_election) {
            nelr = 0;
            ST_WARN("controller", "%s-%d: unclean election of broker %d (%s): what only the "
                                  "other replicas held may be lost",
                    t->name, (int)mp->id, (int)leader,
                    mp->nlkelr == 1 && mp->lkelr[0] == leader ? "the last known leader"
                                                              : "unclean.leader.election.enable");
        }
        if (nisr >= min_isr) nelr = 0;
    }
    int bump = keep && leader == unclean && mp->nreplicas > 1; /* what it lost is not the new epoch's */
    if (bump || leader != mp->leader || !st_ctl__same_list(isr, nisr, mp->isr, mp->nisr) ||
        !st_ctl__same_list(elr, nelr, mp->elr, mp->nelr)) {
        st_ctl__changes_add(ch, t, mp, leader == mp->leader && !bump ? ST_MREC_NO_LEADER_CHANGE : leader,
                            st_ctl__same_list(isr, nisr, mp->isr, mp->nisr) ? NULL : isr, nisr);
        st_ctl__changes_list(ch, ST_CHG_ELR, elr, nelr); /* set: changes_elr leaves it */
    }
    free(isr);
    free(elr);
}

void st_ctl__broker_changes(st_controller_t *c, const st_meta_image_t *img, st_ctl_which_t which,
                            int32_t id, int32_t removed, int32_t added, int32_t unclean,
                            st_ctl_changes_t *ch) {
    for (int ti = 0; ti < img->ntopics; ti++) {
        const st_meta_topic_t *t = img->topics[ti];
        for (int pi = 0; pi < t->nparts; pi++) {
            const st_meta_partition_t *mp = &t->parts[pi];
            int in = which == ST_CTL_LEADERLESS
                         ? mp->leader < 0
                         : mp->leader == id || st_ctl__has(mp->isr, mp->nisr, id) ||
                               (which == ST_CTL_IN_ISR_OR_ELR && st_ctl__has(mp->elr, mp->nelr, id));
            if (in) st_ctl__broker_change(c, img, t, mp, removed, added, unclean, ch);
        }
    }
}

static const st_meta_partition_t *partition_of(const st_meta_image_t *img,
                                               const st_mrec_partition_change_t *r,
                                               const st_meta_topic_t **tp) {
    const st_meta_topic_t *t = st_image_topic_by_id(img, &r->topic_id);
    *tp = t;
    return t && r->partition_id >= 0 && r->partition_id < t->nparts ? &t->parts[r->partition_id] : NULL;
}

void st_ctl__changes_elr(st_controller_t *c, st_ctl_changes_t *ch) {
    for (int i = 0; i < ch->n; i++) {
        st_mrec_partition_change_t *r = &ch->v[i];
        const st_meta_topic_t *t;
        const st_meta_partition_t *mp = partition_of(c->image, r, &t);
        if (!mp) continue;
        const int32_t *isr = r->isr.n >= 0 ? r->isr.v : mp->isr;
        int nisr = r->isr.n >= 0 ? r->isr.n : mp->nisr;
        const int32_t *reps = r->replicas.n >= 0 ? r->replicas.v : mp->replicas;
        int nreps = r->replicas.n >= 0 ? r->replicas.n : mp->nreplicas;
        int32_t leader = r->leader == ST_MREC_NO_LEADER_CHANGE ? mp->leader : r->leader;
        if (r->eligible_leader_replicas.n < 0) {
            int32_t *elr = st_malloc(sizeof *elr * (size_t)(mp->nisr + mp->nelr + 1));
            int nelr = 0;
            /* a leader from outside the old ISR and ELR was elected uncleanly
             * (or completes a reassignment): nothing of the ELR is kept */
            int from_outside = leader >= 0 && leader != mp->leader && !st_ctl__has(mp->isr, mp->nisr, leader) &&
                               !st_ctl__has(mp->elr, mp->nelr, leader);
            if (!from_outside)
                nelr = elr_of(mp, isr, nisr, reps, nreps, st_ctl__min_isr(c, t, nreps), -1, elr);
            if (!st_ctl__same_list(elr, nelr, mp->elr, mp->nelr)) st_ctl__changes_list_at(ch, i, ST_CHG_ELR, elr, nelr);
            free(elr);
        }
        if (r->last_known_elr.n < 0) {
            /* the leader a partition had when its ISR became empty; gone
             * once it has a leader again */
            if (nisr == 0 && mp->leader >= 0 && !(mp->nlkelr == 1 && mp->lkelr[0] == mp->leader))
                st_ctl__changes_list_at(ch, i, ST_CHG_LKELR, &mp->leader, 1);
            else if (leader >= 0 && mp->nlkelr > 0)
                st_ctl__changes_list_at(ch, i, ST_CHG_LKELR, NULL, 0);
        }
    }
}

void st_ctl__elr_reconcile(st_controller_t *c, const char *topic, size_t len) {
    const st_meta_topic_t *t = st_image_topic(c->image, topic, len);
    if (!t) return;
    st_ctl_changes_t ch = {0};
    for (int pi = 0; pi < t->nparts; pi++) {
        const st_meta_partition_t *mp = &t->parts[pi];
        if (mp->nelr > 0 && mp->nisr >= st_ctl__min_isr(c, t, mp->nreplicas)) {
            st_ctl__changes_add(&ch, t, mp, ST_MREC_NO_LEADER_CHANGE, NULL, 0);
            st_ctl__changes_list(&ch, ST_CHG_ELR, NULL, 0);
        }
    }
    /* t is in the image the commit replaces */
    if (ch.n > 0 && st_ctl__commit_changes(c, NULL, &ch) == ST_OK)
        ST_INFO("controller", "%.*s: min.insync.replicas changed: %d partition%s no longer keep "
                              "eligible leader replicas",
                (int)len, topic, ch.n, ch.n == 1 ? "" : "s");
    st_ctl__changes_fini(&ch);
}

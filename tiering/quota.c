/*
 * quota.c - a byte-rate quota (remote.log.manager.copy.max.bytes.per.second,
 * remote.log.manager.fetch.max.bytes.per.second; KIP-956) as a token bucket
 * that may go into debt.
 *
 * Tokens accrue at `rate` bytes a second up to a burst of a tenth of a
 * second's worth.  Work may start while the balance is positive and is
 * charged whole when it starts, so the balance can go below zero (a 4 MiB
 * chunk under a 1 MiB/s quota costs four seconds of debt); nothing else
 * starts until the debt is paid.  Over any stretch longer than the burst
 * the bytes started stay within rate x time plus one item, whatever the
 * size of the items.  A charge made before the size was known (an object
 * read to its end) is corrected when it is (st_tier__quota_charge with the
 * difference; a negative charge is a refund).
 *
 * Not thread-safe: the owner's lock guards it (c->lock for the fetch
 * quota, t->lock for the copy quota).
 */
#include "tier_int.h"

void st_tier__quota_init(st_tier_quota_t *q, int64_t rate) {
    q->rate = rate > 0 ? rate : 0;
    q->burst = (double)q->rate / 10;
    if (q->burst < 1) q->burst = 1;
    q->tokens = q->burst;
    q->refill_us = st_mono_us();
}

static void refill(st_tier_quota_t *q) {
    int64_t now = st_mono_us();
    if (now > q->refill_us) {
        q->tokens += (double)(now - q->refill_us) * (double)q->rate / 1e6;
        if (q->tokens > q->burst) q->tokens = q->burst;
    }
    q->refill_us = now;
}

int st_tier__quota_ready(st_tier_quota_t *q) {
    if (q->rate <= 0) return 1;
    refill(q);
    return q->tokens > 0;
}

void st_tier__quota_charge(st_tier_quota_t *q, double bytes) {
    if (q->rate <= 0) return;
    refill(q);
    q->tokens -= bytes;
    if (q->tokens > q->burst) q->tokens = q->burst;
}

int64_t st_tier__quota_wait_ms(st_tier_quota_t *q) {
    if (st_tier__quota_ready(q)) return 0;
    return (int64_t)(-q->tokens * 1000.0 / (double)q->rate) + 1;
}

/*
 * histo.c - fixed-bucket latency histograms for the metrics endpoint.
 *
 * Each observation is one relaxed atomic add to its bucket and one to the
 * sum: cheap enough for every request on an I/O thread, safe from any
 * thread.  Buckets are not cumulative in memory (one add per observation);
 * a reader makes them cumulative, and takes the count from the buckets so
 * that count and the +Inf bucket always agree in what it shows.
 */
#include "st_base.h"

const int64_t st_histo_bound_us[ST_HISTO_BUCKETS - 1] = {
    500,    1000,    2500,    5000,    10000,   25000,    50000,
    100000, 250000,  500000,  1000000, 2500000, 5000000, 10000000,
};

void st_histo_observe(st_histo_t *h, int64_t us) {
    if (us < 0) us = 0;
    int i = 0;
    while (i < ST_HISTO_BUCKETS - 1 && us > st_histo_bound_us[i]) i++;
    __atomic_add_fetch(&h->bucket[i], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->sum_us, (uint64_t)us, __ATOMIC_RELAXED);
}

void st_histo_read(const st_histo_t *h, st_histo_t *out) {
    for (int i = 0; i < ST_HISTO_BUCKETS; i++)
        out->bucket[i] = __atomic_load_n(&h->bucket[i], __ATOMIC_RELAXED);
    out->sum_us = __atomic_load_n(&h->sum_us, __ATOMIC_RELAXED);
}

uint64_t st_histo_count(const st_histo_t *h) {
    uint64_t n = 0;
    for (int i = 0; i < ST_HISTO_BUCKETS; i++) n += h->bucket[i];
    return n;
}

/*
 * placement.c - rack-aware replica placement (see placement.h).
 */
#include "placement.h"

#include <stdlib.h>

typedef struct slot {
    int32_t id;
    const char *rack;
    int rack_index;
} slot_t;

static const char *rack_of(const st_place_broker_t *b) { return b->rack ? b->rack : ""; }

static int by_rack_then_id(const void *x, const void *y) {
    const slot_t *a = x, *b = y;
    int c = strcmp(a->rack, b->rack);
    if (c) return c;
    return a->id < b->id ? -1 : a->id > b->id;
}

void st_place_replicas(const st_place_broker_t *brokers, int nbrokers, int32_t first,
                       int32_t count, int rf, int64_t start, int32_t *out) {
    int n = nbrokers;
    slot_t *sorted = st_calloc((size_t)n, sizeof *sorted);
    for (int i = 0; i < n; i++) sorted[i] = (slot_t){brokers[i].id, rack_of(&brokers[i]), 0};
    qsort(sorted, (size_t)n, sizeof *sorted, by_rack_then_id);
    /* racks and where each begins in sorted order */
    int nracks = 0;
    int *rack_begin = st_calloc((size_t)n + 1, sizeof *rack_begin);
    for (int i = 0; i < n; i++) {
        if (i == 0 || strcmp(sorted[i].rack, sorted[i - 1].rack)) rack_begin[nracks++] = i;
        sorted[i].rack_index = nracks - 1;
    }
    rack_begin[nracks] = n;
    /* the rack-alternating list: round r takes the r-th broker of each rack */
    slot_t *layout = st_calloc((size_t)n, sizeof *layout);
    int k = 0;
    for (int round = 0; k < n; round++)
        for (int r = 0; r < nracks; r++)
            if (rack_begin[r] + round < rack_begin[r + 1]) layout[k++] = sorted[rack_begin[r] + round];

    uint8_t *chosen = st_calloc((size_t)n, 1), *rack_used = st_calloc((size_t)nracks, 1);
    for (int32_t p = 0; p < count; p++) {
        int64_t s = start + (int64_t)first + p;
        int lead = (int)(s % n);
        int shift = n > 1 ? (int)((s / n) % (n - 1)) : 0;
        memset(chosen, 0, (size_t)n);
        memset(rack_used, 0, (size_t)nracks);
        int32_t *reps = out + (size_t)p * (size_t)rf;
        reps[0] = layout[lead].id;
        chosen[lead] = 1;
        rack_used[layout[lead].rack_index] = 1;
        int racks_used = 1, cursor = lead + 1 + shift;
        for (int r = 1; r < rf; r++) {
            int picked = -1;
            for (int t = 0; t < n && picked < 0; t++) {
                int j = (cursor + t) % n;
                if (chosen[j]) continue;
                if (racks_used < nracks && rack_used[layout[j].rack_index]) continue;
                picked = j;
            }
            /* rf <= n leaves an unchosen broker, and the rack rule only
             * skips while an unused rack (so an unchosen broker) is left */
            chosen[picked] = 1;
            if (!rack_used[layout[picked].rack_index]) {
                rack_used[layout[picked].rack_index] = 1;
                racks_used++;
            }
            reps[r] = layout[picked].id;
            cursor = picked + 1;
        }
    }
    free(chosen);
    free(rack_used);
    free(layout);
    free(rack_begin);
    free(sorted);
}

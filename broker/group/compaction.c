/*
 * compaction.c - which logs the cleaner compacts: every partition hosted
 * here whose topic's effective cleanup.policy includes compact (__consumer_
 * offsets among them), with that topic's delete.retention.ms,
 * min.compaction.lag.ms, min.cleanable.dirty.ratio and segment.bytes.
 *
 * Called on the cleaner thread; reads the current metadata image and the
 * partition table (both safe from any thread).
 */
#include "group_int.h"

#include <stdlib.h>

int st_group_cleaner_list(void *arg, st_log_cleanable_t **out) {
    st_group_cleaner_source_t *src = arg;
    st_meta_image_t *img = st_controller_image(src->ctl);
    st_log_cleanable_t *v = NULL;
    int n = 0, cap = 0;
    /* Topics without overrides share the broker defaults: built once per
     * round, not once per topic (with 10,000 topics that was a third of a
     * start-up profile). */
    int def_state = -1; /* -1 not built, 0 not compacting, 1 compacting */
    st_log_compact_config_t def_cc = {0};
    for (int i = 0; i < img->ntopics; i++) {
        const st_meta_topic_t *t = img->topics[i];
        st_log_compact_config_t cc;
        int compact;
        if (t->nconfigs == 0 && def_state >= 0) {
            compact = def_state;
            cc = def_cc;
        } else {
            st_topic_config_t tc;
            char why[256];
            if (st_topic_config_build(src->cfg, t->configs, t->nconfigs, &tc, why, sizeof why))
                continue;
            compact = strstr(tc.cleanup_policy, "compact") != NULL;
            cc = (st_log_compact_config_t){tc.delete_retention_ms, tc.min_compaction_lag_ms,
                                           tc.min_cleanable_dirty_ratio, tc.segment_bytes};
            st_topic_config_fini(&tc);
            if (t->nconfigs == 0) {
                def_state = compact;
                def_cc = cc;
            }
        }
        if (!compact) continue;
        for (int k = 0; k < t->nparts; k++) {
            st_partition_t *p = st_replicas_lookup(src->rm, t->name, strlen(t->name), k, NULL);
            if (!p) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                v = st_realloc(v, sizeof *v * (size_t)cap);
            }
            v[n++] = (st_log_cleanable_t){st_log_keep(p->log), cc};
            st_partition_release(p);
        }
    }
    st_image_release(img);
    *out = v;
    return n;
}

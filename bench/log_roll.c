/*
 * log_roll.c - strata-log-roll: how long one append to a partition log
 * takes when its segments roll often (a small segment.bytes), with the
 * group-commit flusher and the janitor running as in stratad.
 *
 *   strata-log-roll DIR [COUNT [SEGMENT_BYTES [VALUE_BYTES]]]
 *
 * Appends COUNT batches of one record of VALUE_BYTES (default 200000 of
 * 4096 bytes, segments of 1 MiB) to a new log in DIR (which must not
 * exist), timing each st_log_append, and prints one line: the number of
 * rolls, p50 / p99 / p99.9 / max of all appends and p50 / p99 of those
 * that rolled, in microseconds.  The log is closed (synced) and DIR removed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t pct(const int64_t *v, int n, double p) {
    int i = (int)((double)(n - 1) * p);
    return v[i];
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [COUNT [SEGMENT_BYTES [VALUE_BYTES]]]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int count = argc > 2 ? atoi(argv[2]) : 200000;
    int64_t segment_bytes = argc > 3 ? atoll(argv[3]) : 1 << 20;
    int value_bytes = argc > 4 ? atoi(argv[4]) : 4096;
    if (count <= 0 || segment_bytes < 4096 || value_bytes <= 0) {
        fprintf(stderr, "%s: bad arguments\n", argv[0]);
        return 2;
    }
    char *dirs[1] = {(char *)dir};
    st_logmgr_config_t mc = {dirs, 1, 1, 300000, 60000, 0, NULL, 0};
    st_logmgr_t *m;
    char err[512];
    if (st_logmgr_open(&mc, &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        return 1;
    }
    st_logmgr_start(m);
    st_log_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.segment_bytes = segment_bytes;
    cfg.retention_ms = -1;
    cfg.retention_bytes = -1;
    cfg.index_interval_bytes = 4096;
    cfg.segment_index_bytes = 10 << 20;
    cfg.max_message_bytes = 1 << 20;
    cfg.ts_before_max_ms = INT64_MAX;
    cfg.ts_after_max_ms = INT64_MAX;
    cfg.delete_policy = 1;
    st_log_t *log;
    st_uuid_t id;
    st_uuid_random(&id);
    if (st_logmgr_open_log(m, "bench", 0, &id, &cfg, &log)) {
        fprintf(stderr, "%s: cannot open the log\n", argv[0]);
        return 1;
    }
    uint8_t *value = malloc((size_t)value_bytes);
    for (int i = 0; i < value_bytes; i++) value[i] = (uint8_t)(i * 131 + 7);
    st_batch_record_t rec = {NULL, -1, value, value_bytes};
    st_buf_t b;
    st_buf_init(&b);
    st_batch_build(&b, &rec, 1, st_now_ms());
    uint8_t *copy = malloc(b.len);
    int64_t *lat = malloc(sizeof *lat * (size_t)count);
    int64_t *roll_lat = malloc(sizeof *roll_lat * (size_t)count);
    int rolls = 0;
    st_log_offsets_t o;
    st_log_offsets(log, &o);
    int segs = o.nsegments;
    int64_t t_start = st_mono_us();
    for (int i = 0; i < count; i++) {
        memcpy(copy, b.data, b.len); /* stamped in place */
        st_append_info_t info;
        int64_t t0 = st_mono_us();
        st_err_t e = st_log_append(log, copy, b.len, 1, st_now_ms(), &info);
        lat[i] = st_mono_us() - t0;
        if (e) {
            fprintf(stderr, "%s: append: %s\n", argv[0], st_err_msg(e));
            return 1;
        }
        st_log_offsets(log, &o);
        if (o.nsegments != segs) {
            rolls++;
            segs = o.nsegments;
            roll_lat[rolls - 1] = lat[i];
        }
    }
    double secs = (double)(st_mono_us() - t_start) / 1e6;
    qsort(lat, (size_t)count, sizeof *lat, cmp_i64);
    qsort(roll_lat, (size_t)rolls, sizeof *roll_lat, cmp_i64);
    printf("appends=%d value_bytes=%d segment_bytes=%lld rolls=%d seconds=%.3f p50_us=%lld "
           "p99_us=%lld p999_us=%lld max_us=%lld roll_p50_us=%lld roll_p99_us=%lld\n",
           count, value_bytes, (long long)segment_bytes, rolls, secs,
           (long long)pct(lat, count, 0.5),
           (long long)pct(lat, count, 0.99), (long long)pct(lat, count, 0.999),
           (long long)lat[count - 1], rolls ? (long long)pct(roll_lat, rolls, 0.5) : 0,
           rolls ? (long long)pct(roll_lat, rolls, 0.99) : 0);
    st_log_release(log);
    st_logmgr_close(m);
    st_rmtree(dir);
    free(lat);
    free(roll_lat);
    free(copy);
    free(value);
    st_buf_fini(&b);
    return 0;
}

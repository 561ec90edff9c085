/*
 * os_bench.c - one timed batch of puts or ranged gets through the object
 * store layer, for bench/objectstore/run.sh (which runs curl on the same
 * objects against the same server and compares).
 *
 *   os_bench --env RGWENV --mode put --dir DIR --count N --inflight K --prefix P
 *       uploads DIR/obj-000 .. obj-(N-1) as P/obj-000 ... (file sources)
 *   os_bench --env RGWENV --mode get --count N --size BYTES --range BYTES
 *            --inflight K --prefix P [--discard]
 *       reads every object in ranges of BYTES into memory (--discard: into
 *       /dev/null through a file sink, as curl -o /dev/null does)
 *
 * At most K requests are in flight.  Prints bytes, seconds and MB/s
 * (10^6 bytes) of the transfer phase; run.sh times the whole process, as
 * it does for curl.
 */
#include "rgw_env.h"
#include "st_objectstore.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct bench {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int inflight;
    int failed;
    uint64_t bytes;
    uint8_t **free_bufs; /* get: buffers not in use */
    int nfree;
} bench_t;

typedef struct slot {
    bench_t *b;
    uint8_t *buf;
} slot_t;

static void done(st_os_result_t *res, void *arg) {
    slot_t *s = arg;
    bench_t *b = s->b;
    pthread_mutex_lock(&b->lock);
    if (res->status != ST_OK) {
        if (!b->failed) fprintf(stderr, "os_bench: %s\n", res->message);
        b->failed++;
    }
    if (res->op == ST_OS_GET) {
        b->bytes += res->length;
        b->free_bufs[b->nfree++] = s->buf;
    } else {
        b->bytes += res->object_size;
    }
    b->inflight--;
    pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->lock);
    free(s);
}

static void set(st_os_config_t *c, const char *k, const char *v) {
    char err[512];
    if (st_cfg_set(&st_os_config_table, c, k, v, err, sizeof err)) {
        fprintf(stderr, "os_bench: %s\n", err);
        exit(2);
    }
}

static void usage(void) {
    fprintf(stderr, "usage: os_bench --env FILE --mode put|get --count N --inflight K --prefix P "
                    "[--dir DIR] [--size BYTES --range BYTES [--discard]]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *envfile = NULL, *mode = NULL, *dir = NULL, *prefix = "bench";
    int count = 0, inflight = 1, discard = 0;
    long long size = 0, range = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--discard")) {
            discard = 1;
            continue;
        }
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--env")) envfile = argv[++i];
        else if (!strcmp(argv[i], "--mode")) mode = argv[++i];
        else if (!strcmp(argv[i], "--dir")) dir = argv[++i];
        else if (!strcmp(argv[i], "--prefix")) prefix = argv[++i];
        else if (!strcmp(argv[i], "--count")) count = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--inflight")) inflight = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size")) size = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--range")) range = atoll(argv[++i]);
        else usage();
    }
    int put = mode && !strcmp(mode, "put");
    if (!envfile || !mode || count <= 0 || inflight <= 0 || (put && !dir) ||
        (!put && (strcmp(mode, "get") || size <= 0 || range <= 0)))
        usage();

    /* OS_BENCH_DEBUG=1: one debug line per HTTP exchange (timings). */
    if (getenv("OS_BENCH_DEBUG")) st_log_set_debug("objectstore");
    st_os_config_t cfg;
    st_os_config_init(&cfg);
    set(&cfg, "objectstore.backend", "s3");
    char err[512];
    if (st_rgw_env_load(&cfg, envfile, err, sizeof err)) {
        fprintf(stderr, "os_bench: %s\n", err);
        return 2;
    }
    char n[16];
    snprintf(n, sizeof n, "%d", inflight);
    set(&cfg, "objectstore.s3.max.connections", n);
    st_os_t *os;
    if (st_os_new(&cfg, &os, err, sizeof err)) {
        fprintf(stderr, "os_bench: %s\n", err);
        return 2;
    }

    bench_t b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, NULL, 0};
    if (!put) {
        b.free_bufs = st_calloc((size_t)inflight, sizeof *b.free_bufs);
        for (int i = 0; i < inflight; i++) b.free_bufs[b.nfree++] = st_malloc((size_t)range);
    }
    int64_t t0 = st_mono_us();
    long long per_object = put ? 1 : (size + range - 1) / range;
    for (int i = 0; i < count; i++) {
        for (long long r = 0; r < per_object; r++) {
            char key[512], path[4096];
            snprintf(key, sizeof key, "%s/obj-%03d", prefix, i);
            slot_t *s = st_calloc(1, sizeof *s);
            s->b = &b;
            pthread_mutex_lock(&b.lock);
            while (b.inflight >= inflight) pthread_cond_wait(&b.cond, &b.lock);
            b.inflight++;
            if (!put) s->buf = b.free_bufs[--b.nfree];
            pthread_mutex_unlock(&b.lock);
            st_os_request_t rq = {.key = key};
            if (put) {
                snprintf(path, sizeof path, "%s/obj-%03d", dir, i);
                rq.op = ST_OS_PUT;
                rq.src = (st_os_src_t){.kind = ST_OS_SRC_FILE, .path = path, .length = ST_OS_TO_END};
            } else {
                rq.op = ST_OS_GET;
                rq.offset = (uint64_t)(r * range);
                rq.length = (uint64_t)range;
                rq.sink = discard ? (st_os_sink_t){.kind = ST_OS_SINK_FILE, .path = "/dev/null"}
                                  : (st_os_sink_t){.kind = ST_OS_SINK_MEM, .buf = s->buf, .capacity = (size_t)range};
            }
            st_os_submit(os, &rq, done, s);
        }
    }
    pthread_mutex_lock(&b.lock);
    while (b.inflight) pthread_cond_wait(&b.cond, &b.lock);
    pthread_mutex_unlock(&b.lock);
    double secs = (double)(st_mono_us() - t0) / 1e6;
    st_os_stats_t st;
    st_os_get_stats(os, &st);
    printf("os_bench %s: %llu bytes in %.3f s = %.1f MB/s, %d in flight, %llu retries, %d failed\n",
           mode, (unsigned long long)b.bytes, secs, (double)b.bytes / 1e6 / secs, inflight,
           (unsigned long long)st.retries, b.failed);
    st_os_destroy(os);
    st_os_config_fini(&cfg);
    if (b.free_bufs) {
        for (int i = 0; i < b.nfree; i++) free(b.free_bufs[i]);
        free(b.free_bufs);
    }
    return b.failed ? 1 : 0;
}

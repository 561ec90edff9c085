/*
 * os_fault.c - the s3 backend (puts, heads, copies, gets, lists, deletes)
 * through a proxy that drops connections,
 * delays and stalls answers, cuts bodies short and answers 500 / 503.
 *
 *   os_fault --env RGWENV --endpoint http://127.0.0.1:PROXYPORT [--rounds N]
 *
 * Every operation must still succeed within its retry budget, and every
 * byte read back must match what was written (and its CRC32C).  The run
 * fails if no retry happened at all: then the proxy injected nothing and
 * the test proved nothing.
 */
#include "rgw_env.h"
#include "st_objectstore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define NOBJ 24

static int failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "os_fault: FAILED %s:%d: ", __FILE__, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static void fill(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (size_t i = 0; i < n; i++) {
        if ((i & 7) == 0) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
        }
        p[i] = (uint8_t)(s >> ((i & 7) * 8));
    }
}

typedef struct waitgroup {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int outstanding;
    int max_retries_seen;
} waitgroup_t;

typedef struct job {
    waitgroup_t *wg;
    int index;
    st_err_t status;
    char message[512];
    int attempts;
    uint8_t *data; /* get: taken from the result */
    uint64_t length;
    int verified;
} job_t;

static void job_done(st_os_result_t *res, void *arg) {
    job_t *j = arg;
    j->status = res->status;
    j->attempts = res->attempts;
    snprintf(j->message, sizeof j->message, "%s", res->message);
    if (res->op == ST_OS_GET && res->status == ST_OK) {
        j->data = res->data;
        res->data = NULL;
        j->length = res->length;
        j->verified = res->crc32c_verified;
    }
    pthread_mutex_lock(&j->wg->lock);
    j->wg->outstanding--;
    if (res->retries > j->wg->max_retries_seen) j->wg->max_retries_seen = res->retries;
    pthread_cond_broadcast(&j->wg->cond);
    pthread_mutex_unlock(&j->wg->lock);
}

static void wg_add(waitgroup_t *wg) {
    pthread_mutex_lock(&wg->lock);
    wg->outstanding++;
    pthread_mutex_unlock(&wg->lock);
}

static void wg_wait(waitgroup_t *wg) {
    pthread_mutex_lock(&wg->lock);
    while (wg->outstanding) pthread_cond_wait(&wg->cond, &wg->lock);
    pthread_mutex_unlock(&wg->lock);
}

static void set(st_os_config_t *c, const char *k, const char *v) {
    char err[512];
    if (st_cfg_set(&st_os_config_table, c, k, v, err, sizeof err)) {
        fprintf(stderr, "os_fault: %s\n", err);
        exit(2);
    }
}

int main(int argc, char **argv) {
    const char *envfile = NULL, *endpoint = NULL;
    int rounds = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--env") && i + 1 < argc) envfile = argv[++i];
        else if (!strcmp(argv[i], "--endpoint") && i + 1 < argc) endpoint = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: os_fault --env FILE --endpoint URL [--rounds N]\n");
            return 2;
        }
    }
    if (!envfile || !endpoint) {
        fprintf(stderr, "usage: os_fault --env FILE --endpoint URL [--rounds N]\n");
        return 2;
    }
    st_os_config_t cfg;
    st_os_config_init(&cfg);
    set(&cfg, "objectstore.backend", "s3");
    char err[512];
    if (st_rgw_env_load(&cfg, envfile, err, sizeof err)) {
        fprintf(stderr, "os_fault: %s\n", err);
        return 2;
    }
    set(&cfg, "objectstore.s3.endpoint", endpoint);
    set(&cfg, "objectstore.s3.part.size.bytes", "5242880");
    set(&cfg, "objectstore.s3.retry.attempts", "12");
    set(&cfg, "objectstore.s3.retry.backoff.ms", "20");
    set(&cfg, "objectstore.s3.retry.backoff.max.ms", "400");
    set(&cfg, "objectstore.s3.request.timeout.ms", "2000");
    set(&cfg, "objectstore.s3.connect.timeout.ms", "2000");
    set(&cfg, "objectstore.s3.max.connections", "8");
    st_os_t *os;
    if (st_os_new(&cfg, &os, err, sizeof err)) {
        fprintf(stderr, "os_fault: %s\n", err);
        return 2;
    }
    st_log_set_level(ST_LOG_WARN); /* retries are expected: keep quiet */
    int64_t t0 = st_mono_ms();

    st_uuid_t u;
    char id[23], prefix[64];
    st_uuid_random(&u);
    st_uuid_format(&u, id);
    snprintf(prefix, sizeof prefix, "fault/%s/", id);

    /* Sizes: tiny to multi-part (two objects over the 5 MiB part size). */
    size_t sizes[NOBJ];
    uint8_t *data[NOBJ];
    char keys[NOBJ][128];
    for (int i = 0; i < NOBJ; i++) {
        sizes[i] = i == 0 ? 0 : i < 12 ? (size_t)(i * 977) : i < 22 ? (size_t)(i * 150001) : 12 * (size_t)MIB + (size_t)i;
        data[i] = malloc(sizes[i] ? sizes[i] : 1);
        fill(data[i], sizes[i], (uint64_t)i + 1);
        snprintf(keys[i], sizeof keys[i], "%sobj-%02d", prefix, i);
    }
    /* One multipart object comes from a file. */
    char src[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(src, sizeof src, "%s/os_fault.%d.bin", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, data[NOBJ - 1], sizes[NOBJ - 1]) != (ssize_t)sizes[NOBJ - 1]) {
        fprintf(stderr, "os_fault: cannot write %s\n", src);
        return 2;
    }
    close(fd);

    waitgroup_t wg = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    int ops = 0;
    for (int round = 0; round < rounds; round++) {
        /* Puts, all at once. */
        job_t puts[NOBJ];
        memset(puts, 0, sizeof puts);
        for (int i = 0; i < NOBJ; i++) {
            puts[i].wg = &wg;
            st_os_request_t rq = {.op = ST_OS_PUT, .key = keys[i], .src = {.kind = ST_OS_SRC_MEM, .data = data[i], .length = sizes[i]}};
            if (i == NOBJ - 1) rq.src = (st_os_src_t){.kind = ST_OS_SRC_FILE, .path = src, .length = ST_OS_TO_END};
            wg_add(&wg);
            st_os_submit(os, &rq, job_done, &puts[i]);
        }
        wg_wait(&wg);
        for (int i = 0; i < NOBJ; i++)
            CHECK(puts[i].status == ST_OK, "put %s: %s", keys[i], puts[i].message);
        ops += NOBJ;

        /* Heads. */
        for (int i = 0; i < NOBJ; i++) {
            st_os_request_t rq = {.op = ST_OS_HEAD, .key = keys[i]};
            st_os_result_t *r = st_os_run(os, &rq);
            CHECK(r->status == ST_OK, "head %s: %s", keys[i], r->message);
            if (r->status == ST_OK) {
                CHECK(r->object_size == sizes[i], "head %s: size %llu", keys[i], (unsigned long long)r->object_size);
                CHECK(r->has_crc32c && r->crc32c == st_crc32c(0, data[i], sizes[i]), "head %s: crc", keys[i]);
            }
            st_os_result_free(r);
            ops++;
        }

        /* Copies inside the store, all at once (a copy whose answer was
         * lost or cut is made again: the same copy), read back whole and
         * deleted. */
        job_t copies[NOBJ];
        char ckeys[NOBJ][140];
        const char *cgone[NOBJ];
        memset(copies, 0, sizeof copies);
        for (int i = 0; i < NOBJ; i++) {
            copies[i].wg = &wg;
            snprintf(ckeys[i], sizeof ckeys[i], "%scopy-%02d", prefix, i);
            cgone[i] = ckeys[i];
            st_os_request_t rq = {.op = ST_OS_COPY, .key = ckeys[i], .copy_source = keys[i]};
            wg_add(&wg);
            st_os_submit(os, &rq, job_done, &copies[i]);
        }
        wg_wait(&wg);
        for (int i = 0; i < NOBJ; i++) {
            CHECK(copies[i].status == ST_OK, "copy %s: %s", keys[i], copies[i].message);
            st_os_request_t rq = {.op = ST_OS_GET, .key = ckeys[i], .length = ST_OS_TO_END};
            st_os_result_t *r = st_os_run(os, &rq);
            CHECK(r->status == ST_OK && r->length == sizes[i] &&
                      (!sizes[i] || memcmp(r->data, data[i], sizes[i]) == 0),
                  "get of the copy %s: %s, %llu bytes", ckeys[i], r->message,
                  (unsigned long long)r->length);
            CHECK(r->status != ST_OK || !sizes[i] || r->crc32c_verified,
                  "get of the copy %s: our CRC32C did not come along", ckeys[i]);
            st_os_result_free(r);
        }
        st_os_request_t cdel = {.op = ST_OS_DELETE_BATCH, .keys = cgone, .nkeys = NOBJ};
        st_os_result_t *cr = st_os_run(os, &cdel);
        CHECK(cr->status == ST_OK, "delete of the copies: %s", cr->message);
        st_os_result_free(cr);
        ops += 3 * NOBJ + 1;

        /* Whole gets and ranged gets, all at once. */
        enum { RANGES = 3 };
        job_t gets[NOBJ * (1 + RANGES)];
        uint64_t off[NOBJ * (1 + RANGES)], len[NOBJ * (1 + RANGES)];
        memset(gets, 0, sizeof gets);
        int ng = 0;
        for (int i = 0; i < NOBJ; i++) {
            for (int k = 0; k <= RANGES; k++) {
                if (k > 0 && sizes[i] < 2) continue;
                off[ng] = k == 0 ? 0 : (uint64_t)(((uint64_t)i * 7919 + (uint64_t)k * 104729) % (sizes[i] - 1));
                len[ng] = k == 0 ? ST_OS_TO_END : 1 + (uint64_t)(k * 333331) % (sizes[i] - off[ng]);
                gets[ng].wg = &wg;
                gets[ng].index = i;
                st_os_request_t rq = {.op = ST_OS_GET, .key = keys[i], .offset = off[ng], .length = len[ng]};
                wg_add(&wg);
                st_os_submit(os, &rq, job_done, &gets[ng]);
                ng++;
            }
        }
        wg_wait(&wg);
        for (int g = 0; g < ng; g++) {
            int i = gets[g].index;
            CHECK(gets[g].status == ST_OK, "get %s [%llu+%llu]: %s", keys[i], (unsigned long long)off[g],
                  (unsigned long long)len[g], gets[g].message);
            if (gets[g].status != ST_OK) continue;
            uint64_t want = len[g] == ST_OS_TO_END ? sizes[i] : len[g];
            CHECK(gets[g].length == want, "get %s: %llu bytes, wanted %llu", keys[i],
                  (unsigned long long)gets[g].length, (unsigned long long)want);
            CHECK(gets[g].length != want || memcmp(gets[g].data, data[i] + off[g], want) == 0,
                  "get %s: bytes differ", keys[i]);
            if (len[g] == ST_OS_TO_END)
                CHECK(gets[g].verified, "get %s: whole read not verified by CRC32C", keys[i]);
            free(gets[g].data);
        }
        ops += ng;

        /* Listing in small pages sees every key once, in order. */
        char *token = NULL;
        int listed = 0, pages = 0;
        char last[256] = "";
        for (;;) {
            st_os_request_t rq = {.op = ST_OS_LIST, .prefix = prefix, .token = token, .max_keys = 5};
            st_os_result_t *r = st_os_run(os, &rq);
            ops++;
            pages++;
            CHECK(r->status == ST_OK, "list: %s", r->message);
            if (r->status != ST_OK) {
                st_os_result_free(r);
                break;
            }
            for (size_t k = 0; k < r->nentries; k++) {
                CHECK(strcmp(last, r->entries[k].key) < 0, "list out of order");
                snprintf(last, sizeof last, "%s", r->entries[k].key);
                listed++;
            }
            free(token);
            token = r->next_token ? strdup(r->next_token) : NULL;
            st_os_result_free(r);
            if (!token || pages > 100) break;
        }
        free(token);
        CHECK(listed == NOBJ, "listed %d keys, wanted %d", listed, NOBJ);

        /* Delete: half one by one, the rest in a batch. */
        for (int i = 0; i < NOBJ / 2; i++) {
            st_os_request_t rq = {.op = ST_OS_DELETE, .key = keys[i]};
            st_os_result_t *r = st_os_run(os, &rq);
            CHECK(r->status == ST_OK, "delete %s: %s", keys[i], r->message);
            st_os_result_free(r);
            ops++;
        }
        const char *rest[NOBJ];
        for (int i = NOBJ / 2; i < NOBJ; i++) rest[i - NOBJ / 2] = keys[i];
        st_os_request_t rq = {.op = ST_OS_DELETE_BATCH, .keys = rest, .nkeys = NOBJ - NOBJ / 2};
        st_os_result_t *r = st_os_run(os, &rq);
        CHECK(r->status == ST_OK, "delete batch: %s", r->message);
        st_os_result_free(r);
        ops++;
        st_os_request_t lq = {.op = ST_OS_LIST, .prefix = prefix};
        r = st_os_run(os, &lq);
        CHECK(r->status == ST_OK && r->nentries == 0, "list after delete: %zu keys (%s)", r->nentries, r->message);
        st_os_result_free(r);
        ops++;
    }

    /* A part refused for good (the proxy denies part 2 of this key): the
     * put fails permanently, names the part, and the upload is aborted
     * (the proxy counts the abort). */
    {
        size_t n = 11 * (size_t)MIB;
        uint8_t *big = malloc(n);
        fill(big, n, 99);
        char key[128];
        snprintf(key, sizeof key, "%sdeny-part-upload", prefix);
        st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .src = {.kind = ST_OS_SRC_MEM, .data = big, .length = n}};
        st_os_result_t *r = st_os_run(os, &rq);
        CHECK(r->status == ST_E_PERMANENT, "denied part: status %s (%s)", st_err_name(r->status), r->message);
        CHECK(strstr(r->message, "part 2 of 3") != NULL, "denied part: message '%s'", r->message);
        printf("os_fault: refused part reported as: %s\n", r->message);
        st_os_result_free(r);
        st_os_request_t hq = {.op = ST_OS_HEAD, .key = key};
        r = st_os_run(os, &hq);
        CHECK(r->status == ST_E_NOT_FOUND, "denied part: the object exists (%s)", r->message);
        st_os_result_free(r);
        free(big);
        ops += 2;
    }

    st_os_stats_t s;
    st_os_get_stats(os, &s);
    printf("os_fault: %d operations, %llu HTTP attempts, %llu retries, most retries of one "
           "request %d, %.1f s, %d failures\n",
           ops, (unsigned long long)s.attempts, (unsigned long long)s.retries,
           wg.max_retries_seen, (double)(st_mono_ms() - t0) / 1000.0, failures);
    CHECK(s.retries > 0, "no retry happened: the proxy injected no fault");
    /* Every exchange the proxy saw (the server here), retries and parts
     * included, is one to bill: fault_test.sh compares this line with the
     * proxy's count of requests. */
    printf("os_fault: billable requests %llu (%llu write, %llu read, %llu free)\n",
           (unsigned long long)(s.class_requests[ST_OS_CLASS_WRITE] +
                                s.class_requests[ST_OS_CLASS_READ] +
                                s.class_requests[ST_OS_CLASS_FREE]),
           (unsigned long long)s.class_requests[ST_OS_CLASS_WRITE],
           (unsigned long long)s.class_requests[ST_OS_CLASS_READ],
           (unsigned long long)s.class_requests[ST_OS_CLASS_FREE]);
    st_os_destroy(os);
    st_os_config_fini(&cfg);
    unlink(src);
    for (int i = 0; i < NOBJ; i++) free(data[i]);
    return failures ? 1 : 0;
}

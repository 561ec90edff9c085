/*
 * os_conformance.c - the object store conformance suite: one set of cases,
 * run unchanged against every backend.
 *
 *   os_conformance --backend file [--root DIR]
 *   os_conformance --backend s3 --env FILE      (KEY=VALUE lines: STRATA_RGW_*)
 *   os_conformance --backend s3 --from-env      (STRATA_TEST_S3_* variables)
 *   options: --set key=value (any objectstore.* key), --quick (skip the
 *            100 MiB object and the 2,500-key listing), --name NAME,
 *            --portable (only keys every S3 server accepts: MinIO, which
 *            keeps objects as files, refuses a key that is also a prefix
 *            of others, empty pieces ("a//b"), "." and ".." pieces and a
 *            trailing '/'; S3, RGW and the file backend accept them)
 *
 * Every case works under a fresh prefix of its own, below a prefix unique
 * to the run, and the last case deletes everything the run wrote (which is
 * also the batch delete case).  Cases that cannot apply to a backend (wrong
 * credentials or an unreachable endpoint for a directory) are reported as
 * skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rgw_env.h"
#include "st_objectstore.h"

#define MIB (1024 * 1024)

static struct {
    st_os_config_t cfg;
    st_os_t *os;
    int is_s3;
    int quick;
    int portable;
    char run[96]; /* "conformance/<id>/" */
    char tmpdir[512];
    const char *name;
} g;

/* ------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------- */

static void fill(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        if ((i & 7) == 0) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
        }
        p[i] = (uint8_t)(s >> ((i & 7) * 8));
    }
}

static uint8_t *make_data(size_t n, uint64_t seed) {
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    fill(p, n, seed);
    return p;
}

static char *key_of(const char *test, const char *name) {
    static _Thread_local char buf[8][1200];
    static _Thread_local int i;
    char *k = buf[i++ & 7];
    snprintf(k, 1200, "%s%s/%s", g.run, test, name);
    return k;
}

static void set_cfg(st_os_config_t *c, const char *key, const char *value) {
    char err[512];
    st_err_t e = st_cfg_set(&st_os_config_table, c, key, value, err, sizeof err);
    if (e) fail_msg("config %s=%s: %s", key, value, err);
}

static void copy_cfg(st_os_config_t *dst, const st_os_config_t *src) {
    memset(dst, 0, sizeof *dst);
    st_cfg_copy(&st_os_config_table, dst, src);
}

static st_os_t *open_os(const st_os_config_t *c) {
    char err[512];
    st_os_t *os = NULL;
    if (st_os_new(c, &os, err, sizeof err)) fail_msg("st_os_new: %s", err);
    return os;
}

static void expect_status(const st_os_result_t *r, st_err_t want, const char *what) {
    if (r->status != want)
        fail_msg("%s: status %s (%s), wanted %s", what, st_err_name(r->status), r->message,
                 st_err_name(want));
}

static void put_mem(st_os_t *os, const char *key, const void *p, size_t n) {
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .src = {.kind = ST_OS_SRC_MEM, .data = p, .length = n}};
    st_os_result_t *r = st_os_run(os, &rq);
    expect_status(r, ST_OK, key);
    st_os_result_free(r);
}

static st_os_result_t *get_range(st_os_t *os, const char *key, uint64_t off, uint64_t len) {
    st_os_request_t rq = {.op = ST_OS_GET, .key = key, .offset = off, .length = len};
    return st_os_run(os, &rq);
}

static st_os_result_t *head(st_os_t *os, const char *key) {
    st_os_request_t rq = {.op = ST_OS_HEAD, .key = key};
    return st_os_run(os, &rq);
}

static void delete_key(st_os_t *os, const char *key) {
    st_os_request_t rq = {.op = ST_OS_DELETE, .key = key};
    st_os_result_t *r = st_os_run(os, &rq);
    expect_status(r, ST_OK, key);
    st_os_result_free(r);
}

/* Every key under prefix, all pages; returns the count, keys in *out. */
static size_t list_all(st_os_t *os, const char *prefix, int page, char ***out, int *pages) {
    size_t n = 0, cap = 0;
    char **keys = NULL;
    char *token = NULL;
    int np = 0;
    for (;;) {
        st_os_request_t rq = {.op = ST_OS_LIST, .prefix = prefix, .token = token, .max_keys = page};
        st_os_result_t *r = st_os_run(os, &rq);
        expect_status(r, ST_OK, "list");
        np++;
        for (size_t i = 0; i < r->nentries; i++) {
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                keys = realloc(keys, cap * sizeof *keys);
            }
            keys[n++] = strdup(r->entries[i].key);
        }
        assert_true(page <= 0 || r->nentries <= (size_t)page);
        free(token);
        token = r->next_token ? strdup(r->next_token) : NULL;
        st_os_result_free(r);
        if (!token) break;
        assert_true(np < 10000);
    }
    if (pages) *pages = np;
    *out = keys;
    return n;
}

static void free_keys(char **keys, size_t n) {
    for (size_t i = 0; i < n; i++) free(keys[i]);
    free(keys);
}

/* Many requests in flight, each completed through its callback. */
typedef struct batch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int outstanding;
    int max_inflight;
    atomic_int *calls; /* per request: callbacks seen */
    st_err_t *status;
    uint8_t **bufs;
    uint64_t *lens;
    int *verified;
    char first_error[512];
    pthread_t submitter;
    atomic_int on_submitter_stack;
} batch_t;

typedef struct slot {
    batch_t *b;
    int i;
} slot_t;

static void batch_init(batch_t *b, int n, int max_inflight) {
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->cond, NULL);
    b->max_inflight = max_inflight;
    b->calls = calloc((size_t)n, sizeof *b->calls);
    b->status = calloc((size_t)n, sizeof *b->status);
    b->bufs = calloc((size_t)n, sizeof *b->bufs);
    b->lens = calloc((size_t)n, sizeof *b->lens);
    b->verified = calloc((size_t)n, sizeof *b->verified);
    b->submitter = pthread_self();
}

static void batch_fini(batch_t *b, int n) {
    for (int i = 0; i < n; i++) free(b->bufs[i]);
    free(b->calls);
    free(b->status);
    free(b->bufs);
    free(b->lens);
    free(b->verified);
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->cond);
}

static void batch_cb(st_os_result_t *res, void *arg) {
    slot_t *s = arg;
    batch_t *b = s->b;
    atomic_fetch_add(&b->calls[s->i], 1);
    if (pthread_equal(pthread_self(), b->submitter)) atomic_store(&b->on_submitter_stack, 1);
    b->status[s->i] = res->status;
    if (res->op == ST_OS_GET && res->status == ST_OK) {
        b->bufs[s->i] = res->data; /* take the buffer */
        res->data = NULL;
        b->lens[s->i] = res->length;
        b->verified[s->i] = res->crc32c_verified;
    }
    pthread_mutex_lock(&b->lock);
    if (res->status != ST_OK && !b->first_error[0])
        snprintf(b->first_error, sizeof b->first_error, "%s", res->message);
    b->outstanding--;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
    free(s);
}

static void batch_submit(batch_t *b, st_os_t *os, int i, const st_os_request_t *rq) {
    pthread_mutex_lock(&b->lock);
    while (b->max_inflight && b->outstanding >= b->max_inflight)
        pthread_cond_wait(&b->cond, &b->lock);
    b->outstanding++;
    pthread_mutex_unlock(&b->lock);
    slot_t *s = malloc(sizeof *s);
    s->b = b;
    s->i = i;
    st_os_submit(os, rq, batch_cb, s);
}

static void batch_wait(batch_t *b) {
    pthread_mutex_lock(&b->lock);
    while (b->outstanding > 0) pthread_cond_wait(&b->cond, &b->lock);
    pthread_mutex_unlock(&b->lock);
}

/* A port on loopback that nothing listens on. */
static int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* ------------------------------------------------------------------------
 * Cases
 * ---------------------------------------------------------------------- */

static void test_check(void **state) {
    (void)state;
    char err[512];
    st_err_t e = st_os_check(g.os, err, sizeof err);
    if (e) fail_msg("check: %s", err);
}

/* put, head, whole get (memory), CRC verified, bytes equal. */
static void roundtrip(const char *name, size_t n, uint64_t seed) {
    const char *key = key_of("sizes", name);
    uint8_t *data = make_data(n, seed);
    put_mem(g.os, key, data, n);

    st_os_result_t *h = head(g.os, key);
    expect_status(h, ST_OK, "head");
    assert_true(h->has_object_size);
    assert_int_equal(h->object_size, n);
    assert_true(h->has_crc32c);
    assert_int_equal(h->crc32c, st_crc32c(0, data, n));
    st_os_result_free(h);

    st_os_result_t *r = get_range(g.os, key, 0, ST_OS_TO_END);
    expect_status(r, ST_OK, "get");
    assert_int_equal(r->length, n);
    assert_true(r->crc32c_verified);
    assert_true(r->has_object_size);
    assert_int_equal(r->object_size, n);
    assert_non_null(r->data);
    assert_true(n == 0 || memcmp(r->data, data, n) == 0);
    st_os_result_free(r);
    free(data);
}

static void test_size_empty(void **state) {
    (void)state;
    roundtrip("empty", 0, 1);
}
static void test_size_one(void **state) {
    (void)state;
    roundtrip("one", 1, 2);
}
static void test_size_5m_minus_1(void **state) {
    (void)state;
    roundtrip("5m-1", 5 * MIB - 1, 3);
}
static void test_size_5m_plus_1(void **state) {
    (void)state;
    roundtrip("5m+1", 5 * MIB + 1, 4);
}

/* 100 MiB: from memory and from a file, back into memory and into a file. */
static void test_size_100m(void **state) {
    (void)state;
    if (g.quick) skip();
    size_t n = 100 * (size_t)MIB;
    roundtrip("100m", n, 5);

    uint8_t *data = make_data(n, 6);
    char src[600], dst[600];
    snprintf(src, sizeof src, "%s/src.bin", g.tmpdir);
    snprintf(dst, sizeof dst, "%s/dst.bin", g.tmpdir);
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
    const char *key = key_of("sizes", "100m-file");
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .src = {.kind = ST_OS_SRC_FILE, .path = src, .length = ST_OS_TO_END}};
    st_os_result_t *r = st_os_run(g.os, &rq);
    expect_status(r, ST_OK, "put from file");
    st_os_result_free(r);

    unlink(dst);
    st_os_request_t gq = {.op = ST_OS_GET, .key = key, .length = ST_OS_TO_END, .sink = {.kind = ST_OS_SINK_FILE, .path = dst}};
    r = st_os_run(g.os, &gq);
    expect_status(r, ST_OK, "get into file");
    assert_int_equal(r->length, n);
    assert_true(r->crc32c_verified);
    st_os_result_free(r);
    uint8_t *back = malloc(n);
    fd = open(dst, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, back, n), (ssize_t)n);
    close(fd);
    assert_memory_equal(back, data, n);
    free(back);
    free(data);
    unlink(src);
    unlink(dst);
}

/* A cap on the number of parts grows them: 20 MiB + 3 with parts of 5 MiB
 * and at most 2 parts goes up in 2 (S3's multipart ETag ends in "-2"), and
 * reads back whole. */
static void test_max_parts(void **state) {
    (void)state;
    size_t n = 20 * (size_t)MIB + 3;
    uint8_t *data = make_data(n, 7);
    const char *key = key_of("sizes", "20m-two-parts");
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .max_parts = 2,
                          .src = {.kind = ST_OS_SRC_MEM, .data = data, .length = n}};
    st_os_result_t *r = st_os_run(g.os, &rq);
    expect_status(r, ST_OK, "put with max_parts");
    st_os_result_free(r);
    r = head(g.os, key);
    expect_status(r, ST_OK, "head");
    assert_int_equal(r->object_size, n);
    if (g.is_s3) {
        const char *dash = r->etag ? strrchr(r->etag, '-') : NULL;
        if (!dash || atoi(dash + 1) != 2) fail_msg("ETag %s: not an upload in 2 parts", r->etag);
    }
    st_os_result_free(r);
    r = get_range(g.os, key, 0, ST_OS_TO_END);
    expect_status(r, ST_OK, "get");
    assert_int_equal(r->length, n);
    assert_true(r->crc32c_verified);
    assert_memory_equal(r->data, data, n);
    st_os_result_free(r);
    free(data);
}

static void expect_range(const char *key, const uint8_t *data, size_t size, uint64_t off,
                         uint64_t len, uint64_t want_len) {
    st_os_result_t *r = get_range(g.os, key, off, len);
    char what[128];
    snprintf(what, sizeof what, "range %llu+%llu", (unsigned long long)off,
             (unsigned long long)len);
    expect_status(r, ST_OK, what);
    if (r->length != want_len)
        fail_msg("%s: got %llu bytes, wanted %llu", what, (unsigned long long)r->length,
                 (unsigned long long)want_len);
    assert_memory_equal(r->data, data + off, want_len);
    /* Only a read of the whole object can be verified. */
    assert_int_equal(r->crc32c_verified, off == 0 && want_len == size);
    st_os_result_free(r);
}

static void test_ranges(void **state) {
    (void)state;
    size_t n = 3 * MIB + 12345;
    uint8_t *data = make_data(n, 7);
    const char *key = key_of("ranges", "obj");
    put_mem(g.os, key, data, n);

    expect_range(key, data, n, 0, 1, 1);                   /* start */
    expect_range(key, data, n, 0, 65536, 65536);           /* start, bigger */
    expect_range(key, data, n, n / 2 - 777, 100000, 100000); /* middle */
    expect_range(key, data, n, n - 100, 100, 100);         /* end, exactly */
    expect_range(key, data, n, n - 1, 1, 1);               /* last byte */
    expect_range(key, data, n, n - 10, 1000, 10);          /* runs past the end: cut */
    expect_range(key, data, n, 1000, ST_OS_TO_END, n - 1000); /* to the end */
    expect_range(key, data, n, 0, n, n);                   /* whole, as a range */

    /* Past the end: a permanent error that says so. */
    st_os_result_t *r = get_range(g.os, key, n, 10);
    expect_status(r, ST_E_PERMANENT, "range at the end");
    assert_non_null(strstr(r->message, "past the end"));
    st_os_result_free(r);
    r = get_range(g.os, key, n + 5000, ST_OS_TO_END);
    expect_status(r, ST_E_PERMANENT, "range past the end");
    st_os_result_free(r);

    /* Into a caller's buffer, smaller than the object. */
    uint8_t small[4096];
    st_os_request_t rq = {.op = ST_OS_GET, .key = key, .offset = 500, .length = ST_OS_TO_END, .sink = {.kind = ST_OS_SINK_MEM, .buf = small, .capacity = sizeof small}};
    r = st_os_run(g.os, &rq);
    expect_status(r, ST_OK, "get into buffer");
    assert_int_equal(r->length, sizeof small);
    assert_ptr_equal(r->data, small);
    assert_memory_equal(small, data + 500, sizeof small);
    st_os_result_free(r);

    /* Reading an empty object from its start gives no bytes, not an error. */
    const char *ekey = key_of("ranges", "empty");
    put_mem(g.os, ekey, "", 0);
    r = get_range(g.os, ekey, 0, 100);
    expect_status(r, ST_OK, "range of an empty object");
    assert_int_equal(r->length, 0);
    st_os_result_free(r);
    r = get_range(g.os, ekey, 1, 100);
    expect_status(r, ST_E_PERMANENT, "range past the end of an empty object");
    st_os_result_free(r);
    free(data);
}

typedef struct putter {
    int from, to;
    batch_t *b;
    const char *prefix;
} putter_t;

static void *put_many(void *arg) {
    putter_t *p = arg;
    for (int i = p->from; i < p->to; i++) {
        char key[256];
        snprintf(key, sizeof key, "%s%05d", p->prefix, i);
        char body[32];
        int n = snprintf(body, sizeof body, "object %d", i);
        /* Copied at submit: the key; borrowed till the callback: the data.
         * A static pool of bodies keeps them alive. */
        static char bodies[2500][32];
        memcpy(bodies[i], body, (size_t)n + 1);
        st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .src = {.kind = ST_OS_SRC_MEM, .data = bodies[i], .length = (uint64_t)n}};
        batch_submit(p->b, g.os, i, &rq);
    }
    return NULL;
}

/* 2,500 keys, written by 4 threads at once, listed back in pages of 1000. */
static void test_list_pages(void **state) {
    (void)state;
    if (g.quick) skip();
    enum { N = 2500, THREADS = 4 };
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%slist/k", g.run);
    batch_t b;
    batch_init(&b, N, 64);
    pthread_t th[THREADS];
    putter_t pt[THREADS];
    for (int t = 0; t < THREADS; t++) {
        pt[t] = (putter_t){t * N / THREADS, (t + 1) * N / THREADS, &b, prefix};
        pthread_create(&th[t], NULL, put_many, &pt[t]);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    batch_wait(&b);
    for (int i = 0; i < N; i++) {
        if (b.status[i] != ST_OK) fail_msg("put %d: %s", i, b.first_error);
        assert_int_equal(b.calls[i], 1);
    }
    batch_fini(&b, N);

    char **keys;
    int pages = 0;
    size_t n = list_all(g.os, prefix, 1000, &keys, &pages);
    assert_int_equal(n, N);
    assert_int_equal(pages, 3);
    for (size_t i = 0; i < n; i++) {
        char want[256];
        snprintf(want, sizeof want, "%s%05zu", prefix, i);
        assert_string_equal(keys[i], want); /* all there, in key order */
    }
    free_keys(keys, n);

    /* Small pages walk the same keys. */
    n = list_all(g.os, prefix, 333, &keys, &pages);
    assert_int_equal(n, N);
    assert_int_equal(pages, 8);
    free_keys(keys, n);

    /* A listing reports sizes. */
    st_os_request_t rq = {.op = ST_OS_LIST, .prefix = prefix, .max_keys = 3};
    st_os_result_t *r = st_os_run(g.os, &rq);
    expect_status(r, ST_OK, "list");
    assert_int_equal(r->nentries, 3);
    assert_int_equal(r->entries[0].size, strlen("object 0"));
    assert_non_null(r->next_token);
    st_os_result_free(r);
}

static void expect_listing(const char *prefix, const char *const *want, size_t nwant) {
    char **keys;
    size_t n = list_all(g.os, prefix, 2, &keys, NULL);
    if (n != nwant) {
        for (size_t i = 0; i < n; i++) print_message("  listed %s\n", keys[i]);
        fail_msg("list %s: %zu keys, wanted %zu", prefix, n, nwant);
    }
    for (size_t i = 0; i < n; i++) assert_string_equal(keys[i], want[i]);
    free_keys(keys, n);
}

static void test_prefix_isolation(void **state) {
    (void)state;
    /* k[0] ("a") is an object and a prefix of others: not portable. */
    char k[6][300];
    const char *names[] = {"a", "a-b", "a/1", "a/2/x", "ab/3", "b"};
    int first = g.portable ? 1 : 0;
    for (int i = first; i < 6; i++) {
        snprintf(k[i], sizeof k[i], "%siso/%s", g.run, names[i]);
        put_mem(g.os, k[i], names[i], strlen(names[i]));
    }
    char p[300];
    /* "a/" holds only what is under it. */
    snprintf(p, sizeof p, "%siso/a/", g.run);
    const char *under_a[] = {k[2], k[3]};
    expect_listing(p, under_a, 2);
    /* "a" also matches "a", "a-b" and "ab/3", in byte order ('-' < '/'). */
    snprintf(p, sizeof p, "%siso/a", g.run);
    const char *starts_a[] = {k[0], k[1], k[2], k[3], k[4]};
    expect_listing(p, starts_a + first, 5 - (size_t)first);
    snprintf(p, sizeof p, "%siso/", g.run);
    const char *all[] = {k[0], k[1], k[2], k[3], k[4], k[5]};
    expect_listing(p, all + first, 6 - (size_t)first);
    snprintf(p, sizeof p, "%siso/c", g.run);
    expect_listing(p, NULL, 0);
    snprintf(p, sizeof p, "%siso/a/2/x", g.run);
    const char *exact[] = {k[3]};
    expect_listing(p, exact, 1);
    if (g.portable) return;
    /* "a" and "a/1" are separate objects. */
    st_os_result_t *r = get_range(g.os, k[0], 0, ST_OS_TO_END);
    expect_status(r, ST_OK, "get a");
    assert_int_equal(r->length, 1);
    st_os_result_free(r);
}

static void test_delete(void **state) {
    (void)state;
    const char *key = key_of("delete", "present");
    put_mem(g.os, key, "x", 1);
    delete_key(g.os, key);
    st_os_result_t *r = head(g.os, key);
    expect_status(r, ST_E_NOT_FOUND, "head after delete");
    st_os_result_free(r);
    r = get_range(g.os, key, 0, ST_OS_TO_END);
    expect_status(r, ST_E_NOT_FOUND, "get after delete");
    st_os_result_free(r);
    /* Deleting a missing key succeeds (as S3 does). */
    delete_key(g.os, key_of("delete", "never-there"));
    delete_key(g.os, key_of("delete", "deeper/never/there"));

    /* A batch: some present, some missing. */
    const char *keys[5];
    char kb[5][300];
    for (int i = 0; i < 5; i++) {
        snprintf(kb[i], sizeof kb[i], "%sdelete/batch/%d", g.run, i);
        keys[i] = kb[i];
        if (i % 2 == 0) put_mem(g.os, kb[i], "y", 1);
    }
    st_os_request_t rq = {.op = ST_OS_DELETE_BATCH, .keys = keys, .nkeys = 5};
    r = st_os_run(g.os, &rq);
    expect_status(r, ST_OK, "batch delete");
    assert_int_equal(r->nfailed, 0);
    st_os_result_free(r);
    char p[300];
    snprintf(p, sizeof p, "%sdelete/", g.run);
    expect_listing(p, NULL, 0);
}

static st_os_result_t *put_if(const char *key, const char *text, const char *if_match,
                              int if_none_match) {
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .if_match = if_match,
                          .if_none_match = if_none_match};
    rq.src.kind = ST_OS_SRC_MEM;
    rq.src.data = text;
    rq.src.length = strlen(text);
    return st_os_run(g.os, &rq);
}

/* The object's ETag and whether its bytes are text. */
static char *etag_of(const char *key, const char *text) {
    st_os_result_t *r = get_range(g.os, key, 0, ST_OS_TO_END);
    expect_status(r, ST_OK, "get");
    assert_int_equal(r->length, strlen(text));
    assert_memory_equal(r->data, text, strlen(text));
    assert_non_null(r->etag);
    assert_true(r->etag[0]);
    char *etag = st_strdup(r->etag);
    st_os_result_free(r);
    return etag;
}

/* Conditional puts (If-None-Match: *, If-Match: ETag): what fences a
 * manifest against a writer that read an older one. */
static void test_conditional_put(void **state) {
    (void)state;
    const char *key = key_of("cond", "manifest");
    st_os_result_t *r = put_if(key, "one", NULL, 1);
    expect_status(r, ST_OK, "if-none-match on a missing key");
    st_os_result_free(r);
    r = put_if(key, "two", NULL, 1);
    expect_status(r, ST_E_PRECONDITION_FAILED, "if-none-match on a present key");
    st_os_result_free(r);
    char *e1 = etag_of(key, "one");
    r = put_if(key, "two", "0123456789abcdef0123456789abcdef", 0);
    expect_status(r, ST_E_PRECONDITION_FAILED, "if-match with another ETag");
    st_os_result_free(r);
    free(etag_of(key, "one")); /* unchanged */
    r = put_if(key, "two", e1, 0);
    expect_status(r, ST_OK, "if-match with the object's ETag");
    st_os_result_free(r);
    char *e2 = etag_of(key, "two");
    assert_string_not_equal(e1, e2);
    r = put_if(key, "three", e1, 0); /* a writer that read "one" */
    expect_status(r, ST_E_PRECONDITION_FAILED, "if-match with a stale ETag");
    st_os_result_free(r);
    free(etag_of(key, "two"));
    r = put_if(key_of("cond", "missing"), "x", e1, 0);
    expect_status(r, ST_E_PRECONDITION_FAILED, "if-match on a missing key");
    st_os_result_free(r);
    r = put_if(key, "x", e1, 1);
    expect_status(r, ST_E_PERMANENT, "both conditions");
    st_os_result_free(r);
    free(e1);
    free(e2);
    delete_key(g.os, key);
}

static void test_concurrent_gets(void **state) {
    (void)state;
    enum { OBJECTS = 8, GETS = 64 };
    size_t n = MIB + 333;
    uint8_t *data[OBJECTS];
    char keys[OBJECTS][300];
    for (int i = 0; i < OBJECTS; i++) {
        data[i] = make_data(n, 100 + (uint64_t)i);
        snprintf(keys[i], sizeof keys[i], "%sconcurrent/%d", g.run, i);
        put_mem(g.os, keys[i], data[i], n);
    }
    batch_t b;
    batch_init(&b, GETS, 0); /* all 64 submitted before any is waited for */
    uint64_t off[GETS], len[GETS];
    for (int i = 0; i < GETS; i++) {
        int o = i % OBJECTS;
        off[i] = i % 2 ? (uint64_t)(i * 4099) % (n / 2) : 0;
        len[i] = i % 2 ? 100000 + (uint64_t)i : ST_OS_TO_END;
        st_os_request_t rq = {.op = ST_OS_GET, .key = keys[o], .offset = off[i], .length = len[i]};
        batch_submit(&b, g.os, i, &rq);
    }
    batch_wait(&b);
    assert_false(atomic_load(&b.on_submitter_stack));
    for (int i = 0; i < GETS; i++) {
        assert_int_equal(b.calls[i], 1);
        if (b.status[i] != ST_OK) fail_msg("get %d: %s", i, b.first_error);
        uint64_t want = len[i] == ST_OS_TO_END ? n : len[i];
        assert_int_equal(b.lens[i], want);
        assert_memory_equal(b.bufs[i], data[i % OBJECTS] + off[i], want);
        assert_int_equal(b.verified[i], len[i] == ST_OS_TO_END);
    }
    batch_fini(&b, GETS);
    for (int i = 0; i < OBJECTS; i++) free(data[i]);
}

static void test_metadata_and_overwrite(void **state) {
    (void)state;
    const char *key = key_of("meta", "obj");
    st_os_meta_t meta[] = {{"segment-id", "AAAAAAAAAAAAAAAAAAAAAA"}, {"base-offset", "1234567"}};
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .src = {.kind = ST_OS_SRC_MEM, .data = "first", .length = 5}, .meta = meta, .nmeta = 2};
    st_os_result_t *r = st_os_run(g.os, &rq);
    expect_status(r, ST_OK, "put with metadata");
    st_os_result_free(r);
    r = head(g.os, key);
    expect_status(r, ST_OK, "head");
    assert_int_equal(r->nmeta, 2);
    int seen = 0;
    for (size_t i = 0; i < r->nmeta; i++) {
        if (!strcmp(r->meta[i].name, "segment-id")) {
            assert_string_equal(r->meta[i].value, "AAAAAAAAAAAAAAAAAAAAAA");
            seen |= 1;
        }
        if (!strcmp(r->meta[i].name, "base-offset")) {
            assert_string_equal(r->meta[i].value, "1234567");
            seen |= 2;
        }
    }
    assert_int_equal(seen, 3);
    assert_true(r->mtime_ms > 1600000000000LL);
    st_os_result_free(r);

    /* Overwrite: the new bytes and no old metadata. */
    put_mem(g.os, key, "second!", 7);
    r = get_range(g.os, key, 0, ST_OS_TO_END);
    expect_status(r, ST_OK, "get after overwrite");
    assert_int_equal(r->length, 7);
    assert_memory_equal(r->data, "second!", 7);
    assert_int_equal(r->nmeta, 0);
    st_os_result_free(r);

    /* Bad metadata is refused, through the callback. */
    st_os_meta_t bad[] = {{"Upper", "x"}};
    rq.meta = bad;
    rq.nmeta = 1;
    r = st_os_run(g.os, &rq);
    expect_status(r, ST_E_PERMANENT, "bad metadata name");
    st_os_result_free(r);
    st_os_meta_t reserved[] = {{"strata-crc32c", "00000000"}};
    rq.meta = reserved;
    r = st_os_run(g.os, &rq);
    expect_status(r, ST_E_PERMANENT, "reserved metadata name");
    st_os_result_free(r);
}

/* A copy inside the store: the bytes (a multipart object on s3), our
 * CRC32C and the user metadata come along; the source's name may need
 * encoding; the copy outlives its source; a missing source is not found. */
static void test_copy(void **state) {
    (void)state;
    size_t n = 5 * MIB + 1;
    uint8_t *data = make_data(n, 31);
    char src[300], dst[300];
    snprintf(src, sizeof src, "%scopy/from here+%s", g.run, "\xc3\xa9");
    snprintf(dst, sizeof dst, "%scopy/to", g.run);
    st_os_meta_t meta[] = {{"segment-id", "BBBBBBBBBBBBBBBBBBBBBB"}};
    st_os_request_t put = {.op = ST_OS_PUT, .key = src, .src = {.kind = ST_OS_SRC_MEM, .data = data, .length = n}, .meta = meta, .nmeta = 1};
    st_os_result_t *r = st_os_run(g.os, &put);
    expect_status(r, ST_OK, "put of the source");
    st_os_result_free(r);

    st_os_request_t cp = {.op = ST_OS_COPY, .key = dst, .copy_source = src};
    r = st_os_run(g.os, &cp);
    expect_status(r, ST_OK, "copy");
    st_os_result_free(r);
    delete_key(g.os, src);
    r = get_range(g.os, dst, 0, ST_OS_TO_END);
    expect_status(r, ST_OK, "get of the copy, its source deleted");
    assert_int_equal(r->length, n);
    assert_memory_equal(r->data, data, n);
    assert_true(r->crc32c_verified);
    int seen = 0;
    for (size_t i = 0; i < r->nmeta; i++)
        seen |= !strcmp(r->meta[i].name, "segment-id") &&
                !strcmp(r->meta[i].value, "BBBBBBBBBBBBBBBBBBBBBB");
    assert_true(seen);
    st_os_result_free(r);

    r = st_os_run(g.os, &cp);
    expect_status(r, ST_E_NOT_FOUND, "copy of a missing source");
    if (!strstr(r->message, "from here"))
        fail_msg("the failed copy does not name its source: %s", r->message);
    st_os_result_free(r);
    cp.copy_source = dst;
    r = st_os_run(g.os, &cp);
    expect_status(r, ST_E_PERMANENT, "copy onto itself");
    st_os_result_free(r);
    cp.copy_source = NULL;
    r = st_os_run(g.os, &cp);
    expect_status(r, ST_E_PERMANENT, "copy without a source");
    st_os_result_free(r);
    delete_key(g.os, dst);
    free(data);
}

static void test_odd_keys(void **state) {
    (void)state;
    /* The last four are not portable (see --portable). */
    const char *names[] = {
        "with space", "plus+sign", "percent%41", "tilde~", "unicode-\xc3\xa9\xe2\x82\xac",
        "quote'\"&<>", "star*?#[]", ".hidden", "@at@", "%",
        "a//double", "trailing/", "dot/./seg", "dot/../up",
    };
    size_t nn = sizeof names / sizeof names[0] - (g.portable ? 4 : 0);
    char keys[16][300];
    for (size_t i = 0; i < nn; i++) {
        snprintf(keys[i], sizeof keys[i], "%sodd/%s", g.run, names[i]);
        put_mem(g.os, keys[i], names[i], strlen(names[i]));
    }
    for (size_t i = 0; i < nn; i++) {
        st_os_result_t *r = get_range(g.os, keys[i], 0, ST_OS_TO_END);
        expect_status(r, ST_OK, keys[i]);
        assert_int_equal(r->length, strlen(names[i]));
        assert_memory_equal(r->data, names[i], r->length);
        st_os_result_free(r);
    }
    char p[300], **listed;
    snprintf(p, sizeof p, "%sodd/", g.run);
    size_t n = list_all(g.os, p, 5, &listed, NULL);
    assert_int_equal(n, nn);
    for (size_t i = 1; i < n; i++) assert_true(strcmp(listed[i - 1], listed[i]) < 0);
    for (size_t i = 0; i < nn; i++) {
        int found = 0;
        for (size_t j = 0; j < n; j++) found |= !strcmp(listed[j], keys[i]);
        if (!found) fail_msg("key '%s' missing from the listing", keys[i]);
    }
    free_keys(listed, n);
    /* Keys that cannot be stored are refused. */
    st_os_request_t rq = {.op = ST_OS_PUT, .key = "", .src = {.kind = ST_OS_SRC_MEM, .data = "x", .length = 1}};
    st_os_result_t *r = st_os_run(g.os, &rq);
    expect_status(r, ST_E_PERMANENT, "empty key");
    st_os_result_free(r);
    rq.key = "control\001char";
    r = st_os_run(g.os, &rq);
    expect_status(r, ST_E_PERMANENT, "control character");
    st_os_result_free(r);
}

static void test_file_ranges(void **state) {
    (void)state;
    size_t n = 6 * MIB + 7;
    uint8_t *data = make_data(n, 9);
    char src[600], dst[600];
    snprintf(src, sizeof src, "%s/range-src.bin", g.tmpdir);
    snprintf(dst, sizeof dst, "%s/range-dst.bin", g.tmpdir);
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
    /* A slice of the file (multipart on s3 with 5 MiB parts). */
    uint64_t off = 4099, len = n - 10000;
    const char *key = key_of("filerange", "slice");
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .src = {.kind = ST_OS_SRC_FILE, .path = src, .offset = off, .length = len}};
    st_os_result_t *r = st_os_run(g.os, &rq);
    expect_status(r, ST_OK, "put file slice");
    st_os_result_free(r);
    r = get_range(g.os, key, 0, ST_OS_TO_END);
    expect_status(r, ST_OK, "get slice");
    assert_int_equal(r->length, len);
    assert_memory_equal(r->data, data + off, len);
    assert_true(r->crc32c_verified);
    st_os_result_free(r);
    /* A range of it into the middle of an existing file. */
    fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_int_equal(write(fd, "HEADER--", 8), 8);
    close(fd);
    st_os_request_t gq = {.op = ST_OS_GET, .key = key, .offset = 100, .length = 5000, .sink = {.kind = ST_OS_SINK_FILE, .path = dst, .offset = 8}};
    r = st_os_run(g.os, &gq);
    expect_status(r, ST_OK, "get range into file");
    assert_int_equal(r->length, 5000);
    st_os_result_free(r);
    uint8_t back[5008];
    fd = open(dst, O_RDONLY);
    assert_int_equal(read(fd, back, sizeof back), (ssize_t)sizeof back);
    close(fd);
    assert_memory_equal(back, "HEADER--", 8);
    assert_memory_equal(back + 8, data + off + 100, 5000);
    /* A range past the end of the source file is refused. */
    rq.src.offset = n - 10;
    rq.src.length = 100;
    r = st_os_run(g.os, &rq);
    expect_status(r, ST_E_PERMANENT, "source range past the end");
    st_os_result_free(r);
    rq.src.path = "/nonexistent/file";
    rq.src.offset = 0;
    r = st_os_run(g.os, &rq);
    expect_status(r, ST_E_PERMANENT, "missing source file");
    st_os_result_free(r);
    unlink(src);
    unlink(dst);
    free(data);
}

/* ---- requests by S3's billing class ---- */

/* Runs rq with a fresh account a and returns the result. */
static st_os_result_t *run_counted(st_os_t *os, st_os_request_t rq, st_os_account_t *a) {
    st_os_account_init(a);
    rq.account = a;
    return st_os_run(os, &rq);
}

static void expect_classes(const st_os_account_t *a, uint64_t write, uint64_t read,
                           uint64_t free_, const char *what) {
    st_os_usage_t u;
    st_os_account_read(a, &u);
    if (u.requests[ST_OS_CLASS_WRITE] != write || u.requests[ST_OS_CLASS_READ] != read ||
        u.requests[ST_OS_CLASS_FREE] != free_)
        fail_msg("%s: counted %llu write, %llu read, %llu free requests; wanted %llu, %llu, %llu",
                 what, (unsigned long long)u.requests[ST_OS_CLASS_WRITE],
                 (unsigned long long)u.requests[ST_OS_CLASS_READ],
                 (unsigned long long)u.requests[ST_OS_CLASS_FREE], (unsigned long long)write,
                 (unsigned long long)read, (unsigned long long)free_);
}

/* One step: rq with its own account, its status, its classes; the sums
 * go to *all (what the store's totals must have gained). */
static void counted_step(st_os_request_t rq, st_err_t status, uint64_t write, uint64_t read,
                         uint64_t free_, st_os_usage_t *all, const char *what) {
    st_os_account_t a;
    st_os_result_t *r = run_counted(g.os, rq, &a);
    expect_status(r, status, what);
    st_os_result_free(r);
    expect_classes(&a, write, read, free_, what);
    all->requests[ST_OS_CLASS_WRITE] += write;
    all->requests[ST_OS_CLASS_READ] += read;
    all->requests[ST_OS_CLASS_FREE] += free_;
}

/* What each operation costs by S3's price list: s3 counts its HTTP
 * exchanges (a multipart put is create + parts + complete, a batch delete
 * one POST per 1000 keys), the file backend one request of the class S3
 * would bill; an account sees its request's and the store's totals gain
 * the same. */
static void test_request_classes(void **state) {
    (void)state;
    st_os_stats_t before, after;
    st_os_get_stats(g.os, &before);
    st_os_usage_t all;
    memset(&all, 0, sizeof all);
    size_t big = 5 * MIB + 1; /* two parts of 5 MiB on s3 (see main) */
    uint8_t *data = make_data(big, 21);
    const char *k1 = key_of("classes", "one"), *k2 = key_of("classes", "big");
    const char *k3 = key_of("classes", "three"), *missing = key_of("classes", "missing");

    st_os_request_t put1 = {.op = ST_OS_PUT, .key = k1, .src = {.kind = ST_OS_SRC_MEM, .data = data, .length = 1}};
    counted_step(put1, ST_OK, 1, 0, 0, &all, "put of 1 byte");
    st_os_request_t put3 = put1;
    put3.key = k3;
    counted_step(put3, ST_OK, 1, 0, 0, &all, "put of 1 byte");
    /* the bytes sent are the account's too */
    st_os_account_t a;
    st_os_request_t putbig = {.op = ST_OS_PUT, .key = k2, .src = {.kind = ST_OS_SRC_MEM, .data = data, .length = big}};
    st_os_result_t *r = run_counted(g.os, putbig, &a);
    expect_status(r, ST_OK, "multipart put");
    st_os_result_free(r);
    expect_classes(&a, g.is_s3 ? 4 : 1, 0, 0, "put of 5 MiB + 1 (s3: create, 2 parts, complete)");
    st_os_usage_t u;
    st_os_account_read(&a, &u);
    assert_int_equal(u.bytes_out, big);
    assert_int_equal(u.bytes_in, 0);
    all.requests[ST_OS_CLASS_WRITE] += g.is_s3 ? 4 : 1;

    /* a failed condition reached the store: billed */
    st_os_request_t cput = put1;
    cput.if_none_match = 1;
    counted_step(cput, ST_E_PRECONDITION_FAILED, 1, 0, 0, &all, "conditional put that fails");

    st_os_request_t get = {.op = ST_OS_GET, .key = k2, .length = ST_OS_TO_END};
    r = run_counted(g.os, get, &a);
    expect_status(r, ST_OK, "whole get");
    st_os_result_free(r);
    expect_classes(&a, 0, 1, 0, "whole get");
    st_os_account_read(&a, &u);
    assert_int_equal(u.bytes_in, big);
    assert_int_equal(u.bytes_out, 0);
    all.requests[ST_OS_CLASS_READ]++;
    get.offset = 1000;
    get.length = 4096;
    counted_step(get, ST_OK, 0, 1, 0, &all, "ranged get");
    get.key = missing;
    counted_step(get, ST_E_NOT_FOUND, 0, 1, 0, &all, "get of a missing key");
    st_os_request_t hd = {.op = ST_OS_HEAD, .key = k1};
    counted_step(hd, ST_OK, 0, 1, 0, &all, "head");
    hd.key = missing;
    counted_step(hd, ST_E_NOT_FOUND, 0, 1, 0, &all, "head of a missing key");

    /* three keys in pages of two: two list requests */
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%sclasses/", g.run);
    st_os_request_t lq = {.op = ST_OS_LIST, .prefix = prefix, .max_keys = 2};
    r = run_counted(g.os, lq, &a);
    expect_status(r, ST_OK, "list page 1");
    assert_int_equal(r->nentries, 2);
    assert_non_null(r->next_token);
    char *token = strdup(r->next_token);
    st_os_result_free(r);
    expect_classes(&a, 1, 0, 0, "list page 1");
    lq.token = token;
    counted_step(lq, ST_OK, 1, 0, 0, &all, "list page 2");
    all.requests[ST_OS_CLASS_WRITE]++;
    free(token);

    st_os_request_t ck = {.op = ST_OS_CHECK};
    counted_step(ck, ST_OK, 1, 0, 0, &all, "check (a list)");

    /* a copy is one write (S3's COPY) and no byte passes through us */
    st_os_request_t cp = {.op = ST_OS_COPY, .key = k1, .copy_source = k2};
    r = run_counted(g.os, cp, &a);
    expect_status(r, ST_OK, "copy");
    st_os_result_free(r);
    expect_classes(&a, 1, 0, 0, "copy");
    st_os_account_read(&a, &u);
    assert_int_equal(u.bytes_out + u.bytes_in, 0);
    all.requests[ST_OS_CLASS_WRITE]++;

    st_os_request_t del = {.op = ST_OS_DELETE, .key = k1};
    counted_step(del, ST_OK, 0, 0, 1, &all, "delete");
    del.key = missing;
    counted_step(del, ST_OK, 0, 0, 1, &all, "delete of a missing key");

    /* a batch delete is a POST: one per 1000 keys */
    const char *some[] = {k2, k3, missing};
    st_os_request_t bd = {.op = ST_OS_DELETE_BATCH, .keys = some, .nkeys = 3};
    counted_step(bd, ST_OK, 1, 0, 0, &all, "batch delete of 3 keys");
    enum { MANY = 1001 };
    char **many = malloc(MANY * sizeof *many);
    for (int i = 0; i < MANY; i++) {
        many[i] = malloc(320);
        snprintf(many[i], 320, "%sclasses/none-%04d", g.run, i);
    }
    st_os_request_t bd2 = {.op = ST_OS_DELETE_BATCH, .keys = (const char *const *)many, .nkeys = MANY};
    counted_step(bd2, ST_OK, 2, 0, 0, &all, "batch delete of 1001 keys");
    bd2.nkeys = 0;
    counted_step(bd2, ST_OK, 0, 0, 0, &all, "batch delete of no key");
    for (int i = 0; i < MANY; i++) free(many[i]);
    free(many);

    /* refused before anything is sent: nothing to bill */
    st_os_request_t bad = {.op = ST_OS_PUT, .key = "", .src = {.kind = ST_OS_SRC_MEM, .data = data, .length = 1}};
    counted_step(bad, ST_E_PERMANENT, 0, 0, 0, &all, "put with an empty key");

    /* every request of this case carried an account: the store's totals
     * gained exactly what the accounts did */
    st_os_get_stats(g.os, &after);
    for (int c = 0; c < ST_OS_NCLASSES; c++)
        if (after.class_requests[c] - before.class_requests[c] != all.requests[c])
            fail_msg("the store counted %llu %s requests, its accounts %llu",
                     (unsigned long long)(after.class_requests[c] - before.class_requests[c]),
                     st_os_class_name((st_os_class_t)c), (unsigned long long)all.requests[c]);
    print_message("  %llu write, %llu read, %llu free requests, as S3 bills them\n",
                  (unsigned long long)all.requests[ST_OS_CLASS_WRITE],
                  (unsigned long long)all.requests[ST_OS_CLASS_READ],
                  (unsigned long long)all.requests[ST_OS_CLASS_FREE]);
    free(data);
}

/* A CRC32C that does not match the bytes is caught on a whole read. */
static void test_checksum_mismatch(void **state) {
    (void)state;
    const char *key = key_of("crc", "lying");
    uint8_t data[1000];
    fill(data, sizeof data, 11);
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .src = {.kind = ST_OS_SRC_MEM, .data = data, .length = sizeof data}, .crc32c_known = 1, .crc32c = st_crc32c(0, data, sizeof data) ^ 1};
    st_os_result_t *r = st_os_run(g.os, &rq);
    expect_status(r, ST_OK, "put with a wrong CRC");
    st_os_result_free(r);
    r = get_range(g.os, key, 0, ST_OS_TO_END);
    expect_status(r, ST_E_PERMANENT, "whole read of a corrupt object");
    assert_non_null(strstr(r->message, "corrupt"));
    st_os_result_free(r);
    /* A range read cannot check, and still works. */
    r = get_range(g.os, key, 10, 20);
    expect_status(r, ST_OK, "range read of it");
    assert_memory_equal(r->data, data + 10, 20);
    st_os_result_free(r);
}

static void test_wrong_credentials(void **state) {
    (void)state;
    if (!g.is_s3) skip(); /* a directory has no credentials */
    st_os_config_t c;
    for (int which = 0; which < 2; which++) {
        copy_cfg(&c, &g.cfg);
        if (which == 0) set_cfg(&c, "objectstore.s3.secret.key", "not-the-secret");
        else set_cfg(&c, "objectstore.s3.access.key", "NOSUCHACCESSKEY00000");
        st_os_t *os = open_os(&c);
        char err[600];
        st_err_t e = st_os_check(os, err, sizeof err);
        assert_int_equal(e, ST_E_PERMANENT);
        assert_non_null(strstr(err, "wrong credentials"));
        assert_null(strstr(err, "not-the-secret")); /* never the secret */
        st_os_request_t rq = {.op = ST_OS_PUT, .key = key_of("creds", "x"), .src = {.kind = ST_OS_SRC_MEM, .data = "x", .length = 1}};
        st_os_account_t a;
        st_os_result_t *r = run_counted(os, rq, &a);
        expect_status(r, ST_E_PERMANENT, "put with wrong credentials");
        assert_int_equal(r->attempts, 1); /* not retried */
        expect_classes(&a, 1, 0, 0, "put with wrong credentials"); /* refused, but sent */
        assert_non_null(strstr(r->message, "credentials"));
        st_os_result_free(r);
        r = get_range(os, key_of("creds", "x"), 0, ST_OS_TO_END);
        expect_status(r, ST_E_PERMANENT, "get with wrong credentials");
        st_os_result_free(r);
        st_os_destroy(os);
        st_os_config_fini(&c);
    }
}

static void test_missing_bucket(void **state) {
    (void)state;
    st_os_config_t c;
    copy_cfg(&c, &g.cfg);
    char name[600];
    if (g.is_s3) {
        snprintf(name, sizeof name, "strata-missing-%08x", (unsigned)st_now_ms());
        set_cfg(&c, "objectstore.s3.bucket", name);
    } else {
        snprintf(name, sizeof name, "%s/no-such-bucket-dir", g.tmpdir);
        set_cfg(&c, "objectstore.file.root", name);
        set_cfg(&c, "objectstore.file.create.root", "false");
    }
    st_os_t *os = open_os(&c);
    char err[600];
    st_err_t e = st_os_check(os, err, sizeof err);
    assert_int_equal(e, ST_E_PERMANENT);
    if (!strstr(err, "does not exist")) fail_msg("check said: %s", err);
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key_of("nobucket", "x"), .src = {.kind = ST_OS_SRC_MEM, .data = "x", .length = 1}};
    st_os_result_t *r = st_os_run(os, &rq);
    expect_status(r, ST_E_PERMANENT, "put into a missing bucket");
    assert_non_null(strstr(r->message, "does not exist"));
    st_os_result_free(r);
    r = get_range(os, key_of("nobucket", "x"), 0, ST_OS_TO_END);
    expect_status(r, ST_E_PERMANENT, "get from a missing bucket");
    st_os_result_free(r);
    st_os_request_t lq = {.op = ST_OS_LIST, .prefix = ""};
    r = st_os_run(os, &lq);
    expect_status(r, ST_E_PERMANENT, "list of a missing bucket");
    st_os_result_free(r);
    st_os_destroy(os);
    st_os_config_fini(&c);
    struct stat st;
    if (!g.is_s3) assert_int_not_equal(stat(name, &st), 0); /* not created behind our back */
}

static void test_unreachable_endpoint(void **state) {
    (void)state;
    if (!g.is_s3) skip(); /* a directory is never unreachable */
    st_os_config_t c;
    copy_cfg(&c, &g.cfg);
    char ep[64];
    /* Virtual-host addressing needs a name: bucket.localhost. */
    snprintf(ep, sizeof ep, "http://%s:%d", g.cfg.s3_path_style ? "127.0.0.1" : "localhost",
             closed_port());
    set_cfg(&c, "objectstore.s3.endpoint", ep);
    set_cfg(&c, "objectstore.s3.retry.attempts", "4");
    set_cfg(&c, "objectstore.s3.retry.backoff.ms", "40");
    set_cfg(&c, "objectstore.s3.retry.backoff.max.ms", "200");
    st_os_t *os = open_os(&c);
    int64_t t0 = st_mono_ms();
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key_of("unreachable", "x"), .src = {.kind = ST_OS_SRC_MEM, .data = "x", .length = 1}};
    st_os_account_t a;
    st_os_result_t *r = run_counted(os, rq, &a);
    int64_t took = st_mono_ms() - t0;
    expect_status(r, ST_E_RETRYABLE, "put to an unreachable endpoint");
    assert_int_equal(r->attempts, 4);
    /* four attempts, no connection: nothing reached a server to bill */
    expect_classes(&a, 0, 0, 0, "put to an unreachable endpoint");
    assert_int_equal(r->retries, 3);
    assert_non_null(strstr(r->message, "gave up after 4 attempts"));
    assert_non_null(strstr(r->message, "connect"));
    /* Backoff: at least half of 40 + 80 + 160 ms was waited. */
    assert_true(took >= 140);
    st_os_result_free(r);
    char err[600];
    assert_int_equal(st_os_check(os, err, sizeof err), ST_E_RETRYABLE);
    assert_non_null(strstr(err, "cannot connect"));
    st_os_destroy(os);
    st_os_config_fini(&c);
}

typedef struct cancel_ctx {
    atomic_int calls[300];
    atomic_int cancelled;
    atomic_int ok;
    atomic_int bad; /* cancelled but not ST_E_RETRYABLE */
} cancel_ctx_t;

typedef struct cancel_slot {
    cancel_ctx_t *ctx;
    int i;
} cancel_slot_t;

static void cancel_cb(st_os_result_t *res, void *arg) {
    cancel_slot_t *s = arg;
    atomic_fetch_add(&s->ctx->calls[s->i], 1);
    /* cmocka's asserts belong to the test's thread: only record here. */
    if (res->cancelled) {
        if (res->status != ST_E_RETRYABLE) atomic_fetch_add(&s->ctx->bad, 1);
        atomic_fetch_add(&s->ctx->cancelled, 1);
    } else if (res->status == ST_OK) {
        atomic_fetch_add(&s->ctx->ok, 1);
    }
}

/* Destroying with requests in flight completes each exactly once. */
static void test_destroy_completes_all(void **state) {
    (void)state;
    enum { N = 300 };
    st_os_t *os = open_os(&g.cfg);
    static cancel_ctx_t ctx;
    static cancel_slot_t slots[N];
    memset(&ctx, 0, sizeof ctx);
    size_t n = 2 * MIB;
    uint8_t *data = make_data(n, 12);
    const char *key = key_of("cancel", "obj");
    put_mem(os, key, data, n);
    for (int i = 0; i < N; i++) {
        slots[i] = (cancel_slot_t){&ctx, i};
        st_os_request_t rq = {.op = i % 3 ? ST_OS_GET : ST_OS_PUT, .key = i % 3 ? key : key_of("cancel", "put"), .length = ST_OS_TO_END, .src = {.kind = ST_OS_SRC_MEM, .data = data, .length = n}};
        st_os_submit(os, &rq, cancel_cb, &slots[i]);
    }
    st_os_destroy(os);
    for (int i = 0; i < N; i++) assert_int_equal(atomic_load(&ctx.calls[i]), 1);
    assert_int_equal(atomic_load(&ctx.bad), 0);
    print_message("  destroy: %d completed, %d cancelled, of %d\n", atomic_load(&ctx.ok),
                  atomic_load(&ctx.cancelled), N);
    free(data);
}

/* Last: delete everything the run wrote, in batches, and see it gone.
 * One key may come back: a PUT that test_destroy_completes_all cancelled
 * after its body was sent can still be stored by the server, later than
 * our listing (seen with RGW). Only that key may reappear, and it is
 * deleted again until the listing is empty. */
static void test_batch_delete_all(void **state) {
    (void)state;
    char **keys;
    const char *late = key_of("cancel", "put");
    size_t n = list_all(g.os, g.run, 1000, &keys, NULL);
    assert_true(n > 0);
    for (int round = 0; n > 0; round++) {
        if (round > 0) {
            for (size_t i = 0; i < n; i++) assert_string_equal(keys[i], late);
            assert_true(round < 20);
            usleep(500 * 1000);
        }
        st_os_request_t rq = {.op = ST_OS_DELETE_BATCH, .keys = (const char *const *)keys, .nkeys = n};
        st_os_result_t *r = st_os_run(g.os, &rq);
        expect_status(r, ST_OK, "batch delete of the run");
        assert_int_equal(r->nfailed, 0);
        st_os_result_free(r);
        free_keys(keys, n);
        n = list_all(g.os, g.run, 1000, &keys, NULL);
    }
    free_keys(keys, n);
    print_message("  deleted every key of the run\n");
}

/* ------------------------------------------------------------------------
 * Setup
 * ---------------------------------------------------------------------- */

static int group_setup(void **state) {
    (void)state;
    char err[512];
    if (st_os_new(&g.cfg, &g.os, err, sizeof err)) {
        fprintf(stderr, "os_conformance: %s\n", err);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    st_os_stats_t s;
    st_os_get_stats(g.os, &s);
    print_message("%s: %llu requests, %llu attempts, %llu retries, %.1f MiB out, %.1f MiB in; "
                  "billed as %llu write, %llu read, %llu free\n",
                  st_os_describe(g.os), (unsigned long long)s.requests,
                  (unsigned long long)s.attempts, (unsigned long long)s.retries,
                  (double)s.bytes_out / MIB, (double)s.bytes_in / MIB,
                  (unsigned long long)s.class_requests[ST_OS_CLASS_WRITE],
                  (unsigned long long)s.class_requests[ST_OS_CLASS_READ],
                  (unsigned long long)s.class_requests[ST_OS_CLASS_FREE]);
    st_os_destroy(g.os);
    return 0;
}

static int load_env_file(const char *path) {
    char err[512];
    if (st_rgw_env_load(&g.cfg, path, err, sizeof err)) {
        fprintf(stderr, "os_conformance: %s\n", err);
        return -1;
    }
    return 0;
}

static int from_environment(void) {
    const char *ep = getenv("STRATA_TEST_S3_ENDPOINT");
    const char *ak = getenv("STRATA_TEST_S3_ACCESS_KEY");
    const char *sk = getenv("STRATA_TEST_S3_SECRET_KEY");
    const char *bk = getenv("STRATA_TEST_S3_BUCKET");
    if (!ep || !ak || !sk || !bk) {
        fprintf(stderr, "os_conformance: STRATA_TEST_S3_ENDPOINT, _ACCESS_KEY, _SECRET_KEY and "
                        "_BUCKET must all be set\n");
        return -1;
    }
    set_cfg(&g.cfg, "objectstore.s3.endpoint", ep);
    set_cfg(&g.cfg, "objectstore.s3.access.key", ak);
    set_cfg(&g.cfg, "objectstore.s3.secret.key", sk);
    set_cfg(&g.cfg, "objectstore.s3.bucket", bk);
    const char *rg = getenv("STRATA_TEST_S3_REGION");
    if (rg && *rg) set_cfg(&g.cfg, "objectstore.s3.region", rg);
    const char *ps = getenv("STRATA_TEST_S3_PATH_STYLE");
    if (ps && *ps) set_cfg(&g.cfg, "objectstore.s3.path.style", ps);
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: os_conformance --backend file [--root DIR] | --backend s3 "
                    "(--env FILE | --from-env) [--set key=value]... [--quick] [--portable] "
                    "[--name NAME]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *backend = NULL, *root = NULL, *envfile = NULL;
    int from_env = 0;
    const char *sets[32];
    int nsets = 0;
    g.name = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) root = argv[++i];
        else if (!strcmp(argv[i], "--env") && i + 1 < argc) envfile = argv[++i];
        else if (!strcmp(argv[i], "--from-env")) from_env = 1;
        else if (!strcmp(argv[i], "--set") && i + 1 < argc && nsets < 32) sets[nsets++] = argv[++i];
        else if (!strcmp(argv[i], "--quick")) g.quick = 1;
        else if (!strcmp(argv[i], "--portable")) g.portable = 1;
        else if (!strcmp(argv[i], "--name") && i + 1 < argc) g.name = argv[++i];
        else usage();
    }
    if (!backend) usage();

    const char *tmp = getenv("TMPDIR");
    snprintf(g.tmpdir, sizeof g.tmpdir, "%s/strata-conformance.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g.tmpdir)) {
        perror("mkdtemp");
        return 1;
    }

    st_os_config_init(&g.cfg);
    set_cfg(&g.cfg, "objectstore.backend", backend);
    if (!strcmp(backend, "file")) {
        char r[600];
        snprintf(r, sizeof r, "%s/bucket", g.tmpdir);
        set_cfg(&g.cfg, "objectstore.file.root", root ? root : r);
    } else if (!strcmp(backend, "s3")) {
        g.is_s3 = 1;
        if (envfile ? load_env_file(envfile) : from_env ? from_environment() : -1) usage();
        /* Small parts so that 5 MiB + 1 is multipart; a quick retry budget. */
        set_cfg(&g.cfg, "objectstore.s3.part.size.bytes", "5242880");
        set_cfg(&g.cfg, "objectstore.s3.retry.attempts", "4");
        set_cfg(&g.cfg, "objectstore.s3.retry.backoff.ms", "50");
        set_cfg(&g.cfg, "objectstore.s3.retry.backoff.max.ms", "1000");
    } else {
        usage();
    }
    for (int i = 0; i < nsets; i++) {
        char err[512];
        if (st_cfg_override(&(st_cfg_bind_t){&st_os_config_table, &g.cfg, NULL}, 1, sets[i], err, sizeof err)) {
            fprintf(stderr, "os_conformance: %s\n", err);
            return 2;
        }
    }
    st_uuid_t u;
    char id[23];
    st_uuid_random(&u);
    st_uuid_format(&u, id);
    snprintf(g.run, sizeof g.run, "conformance/%s/", id);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_size_empty),
        cmocka_unit_test(test_size_one),
        cmocka_unit_test(test_size_5m_minus_1),
        cmocka_unit_test(test_size_5m_plus_1),
        cmocka_unit_test(test_size_100m),
        cmocka_unit_test(test_max_parts),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_list_pages),
        cmocka_unit_test(test_prefix_isolation),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_conditional_put),
        cmocka_unit_test(test_concurrent_gets),
        cmocka_unit_test(test_metadata_and_overwrite),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_odd_keys),
        cmocka_unit_test(test_file_ranges),
        cmocka_unit_test(test_request_classes),
        cmocka_unit_test(test_checksum_mismatch),
        cmocka_unit_test(test_wrong_credentials),
        cmocka_unit_test(test_missing_bucket),
        cmocka_unit_test(test_unreachable_endpoint),
        cmocka_unit_test(test_destroy_completes_all),
        cmocka_unit_test(test_batch_delete_all),
    };
    char group[128];
    snprintf(group, sizeof group, "objectstore conformance: %s", g.name ? g.name : backend);
    int failed = cmocka_run_group_tests_name(group, tests, group_setup, group_teardown);
    st_os_config_fini(&g.cfg);
    st_rmtree(g.tmpdir);
    return failed ? 1 : 0;
}

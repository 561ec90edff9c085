/*
 * test_tiering.c - the remote log manager against the file object store:
 * manifests, uploads in offset order, remote reads through the chunk cache
 * (batches inside a chunk, across chunks, across segments), read-ahead,
 * eviction, remote retention, DeleteRecords (also in the same pass as
 * retention), orphan sweeps and restarts
 * from the cached and the bucket's manifest; tiering switched off and on
 * (KIP-950: uploads off, off with the remote log deleted, on again).
 *
 * Segments are real files of record batches built with the log library's
 * batch builder; the "broker" is a table of them behind the ops callbacks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "st_objectstore.h"
#include "st_tiering.h"
#include "tier_int.h"

#define NSEGS 5
#define BATCHES_PER_SEG 40
#define RECS_PER_BATCH 10
#define VALUE_BYTES 900 /* batches of about 9.4 KB: several straddle 64 KiB chunks */

typedef struct fake_seg {
    st_tier_segment_t info;
    uint8_t *bytes;
    size_t len;
} fake_seg_t;

typedef struct env {
    char root[256];
    st_os_t *os;
    st_tier_t *tier;
    st_tier_part_t *part;
    fake_seg_t segs[NSEGS];
    int64_t remote_start, remote_end;
    int changes;
    int wakes;
    /* events from the manager's threads (remote_changed, wake) */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* DeleteRecords at delete_at, sent from inside a job: from
     * remote_changed once the remote start reaches delete_when_start
     * (after a retention pass installed its manifest), or from
     * local_bytes_above (while the pass decides what goes) */
    int delete_hook; /* 0, HOOK_CHANGED, HOOK_LOCAL_BYTES */
    int64_t delete_at, delete_when_start;
    st_err_t hook_rc; /* what the hook's DeleteRecords answered (job thread) */
    int offered;      /* closed segments the "broker" offers (0: all) */
    int64_t asked_us[64]; /* when the manager asked for closed segments */
    int nasked;
    const char *topic; /* NULL: "orders" */
    st_tier_mode_t mode; /* open_part's */
    int64_t local_start; /* where the "broker's" local log starts */
} env_t;

enum { HOOK_CHANGED = 1, HOOK_LOCAL_BYTES = 2 };

#define EVENT_WAIT_MS 60000 /* a bound, so that a bug fails rather than hangs */

static int64_t record_value(int64_t offset, int k) { return offset * 131 + k; }

static void build_segments(env_t *e) {
    int64_t off = 0;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/local", e->root);
    mkdir(dir, 0755);
    for (int s = 0; s < NSEGS; s++) {
        fake_seg_t *fs = &e->segs[s];
        st_buf_t b;
        st_buf_init(&b);
        int64_t base = off;
        uint8_t value[VALUE_BYTES];
        for (int bi = 0; bi < BATCHES_PER_SEG; bi++) {
            st_batch_record_t recs[RECS_PER_BATCH];
            uint8_t vals[RECS_PER_BATCH][VALUE_BYTES];
            for (int k = 0; k < RECS_PER_BATCH; k++) {
                for (int j = 0; j < VALUE_BYTES; j++) vals[k][j] = (uint8_t)(record_value(off + k, j) & 0xff);
                recs[k] = (st_batch_record_t){NULL, -1, vals[k], VALUE_BYTES};
            }
            size_t start = b.len;
            st_batch_build(&b, recs, RECS_PER_BATCH, 1000000 + off);
            st_batch_stamp(b.data + start, off, 0, -1);
            off += RECS_PER_BATCH;
        }
        (void)value;
        fs->bytes = b.data;
        fs->len = b.len;
        st_tier_segment_t *i = &fs->info;
        memset(i, 0, sizeof *i);
        i->base_offset = base;
        i->last_offset = off - 1;
        i->max_timestamp = 1000000 + off - 1;
        i->size_bytes = (int64_t)b.len;
        snprintf(i->log_path, sizeof i->log_path, "%s/%020lld.log", dir, (long long)base);
        snprintf(i->index_path, sizeof i->index_path, "%s/%020lld.index", dir, (long long)base);
        snprintf(i->timeindex_path, sizeof i->timeindex_path, "%s/%020lld.timeindex", dir, (long long)base);
        i->epochs[0] = (st_tier_epoch_t){0, base};
        i->nepochs = 1;
        assert_int_equal(st_write_file_atomic(i->log_path, b.data, b.len), ST_OK);
        /* an index entry every four batches: (last offset - base, position) */
        st_buf_t idx;
        st_buf_init(&idx);
        size_t pos = 0;
        for (int bi = 0; pos < b.len; bi++) {
            int32_t size = (int32_t)st_be32_get(b.data + pos + 8) + 12;
            int64_t bb = (int64_t)st_be64_get(b.data + pos);
            if (bi % 4 == 0) {
                st_buf_put_i32(&idx, (int32_t)(bb + RECS_PER_BATCH - 1 - base));
                st_buf_put_i32(&idx, (int32_t)pos);
            }
            pos += (size_t)size;
        }
        assert_int_equal(st_write_file_atomic(i->index_path, idx.data, idx.len), ST_OK);
        assert_int_equal(st_write_file_atomic(i->timeindex_path, "", 0), ST_OK);
        st_buf_fini(&idx);
    }
}

/* ---- the broker side ------------------------------------------------------ */

static int closed_cb(void *arg, int64_t from, st_tier_segment_t *out, int max) {
    env_t *e = arg;
    pthread_mutex_lock(&e->lock);
    if (e->nasked < (int)ST_ARRAY_SIZE(e->asked_us)) e->asked_us[e->nasked++] = st_mono_us();
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    int n = 0;
    int offered = e->offered ? e->offered : NSEGS;
    for (int s = 0; s < offered && n < max; s++)
        if (e->segs[s].info.base_offset >= from) out[n++] = e->segs[s].info;
    return n;
}

static void changed_cb(void *arg, int64_t start, int64_t end) {
    env_t *e = arg;
    __atomic_store_n(&e->remote_start, start, __ATOMIC_RELEASE);
    __atomic_store_n(&e->remote_end, end, __ATOMIC_RELEASE);
    __atomic_add_fetch(&e->changes, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&e->lock);
    int hook = e->delete_hook == HOOK_CHANGED && start == e->delete_when_start;
    if (hook) e->delete_hook = 0;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    if (hook) e->hook_rc = st_tier_delete_records(e->part, e->delete_at);
}

static int64_t local_bytes_cb(void *arg, int64_t offset) {
    env_t *e = arg;
    (void)offset;
    pthread_mutex_lock(&e->lock);
    int hook = e->delete_hook == HOOK_LOCAL_BYTES;
    if (hook) e->delete_hook = 0;
    pthread_mutex_unlock(&e->lock);
    if (hook) e->hook_rc = st_tier_delete_records(e->part, e->delete_at);
    return 0;
}

static void release_cb(void *arg) { (void)arg; }

static int64_t local_start_cb(void *arg) {
    return __atomic_load_n(&((env_t *)arg)->local_start, __ATOMIC_ACQUIRE);
}

static void wake_cb(void *arg) {
    env_t *e = arg;
    pthread_mutex_lock(&e->lock);
    e->wakes++;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static int wakes_now(env_t *e) {
    pthread_mutex_lock(&e->lock);
    int n = e->wakes;
    pthread_mutex_unlock(&e->lock);
    return n;
}

/* Wait for a wake after the count seen was `seen`. */
static void wait_wake(env_t *e, int seen) {
    int64_t deadline = st_mono_ms() + EVENT_WAIT_MS;
    pthread_mutex_lock(&e->lock);
    while (e->wakes == seen && st_mono_ms() < deadline)
        st_cond_wait_ms(&e->cond, &e->lock, deadline - st_mono_ms());
    int woke = e->wakes != seen;
    pthread_mutex_unlock(&e->lock);
    if (!woke) fail_msg("no wake within %d ms", EVENT_WAIT_MS);
}

static void open_store(env_t *e) {
    st_os_config_t oc;
    st_os_config_init(&oc);
    char root[300], err[256];
    snprintf(root, sizeof root, "%s/bucket", e->root);
    free(oc.backend);
    oc.backend = st_strdup("file");
    free(oc.file_root);
    oc.file_root = st_strdup(root);
    assert_int_equal(st_os_new(&oc, &e->os, err, sizeof err), ST_OK);
    st_os_config_fini(&oc);
}

/* remote.log.cache.memory.bytes of the next open_tier (0: chunks go to
 * the disk, as every test but the memory one has them) */
static int64_t next_memory_bytes;

/* What the broker would say live traffic waited (test_yield_to_live). */
static int64_t fake_latency_us = -1;
static int64_t fake_latency(void *arg) {
    (void)arg;
    return __atomic_load_n(&fake_latency_us, __ATOMIC_RELAXED);
}
static int next_yields; /* the next open_tier paces downloads by fake_latency */
static const st_os_config_t *next_store_config; /* the next open_tier's (replicas' sources) */

static void open_tier_quota(env_t *e, int64_t cache_bytes, int64_t fetch_per_s, int64_t copy_per_s) {
    char cache[300], err[256];
    snprintf(cache, sizeof cache, "%s/cache", e->root);
    st_tier_config_t tc = {.task_interval_ms = 3600 * 1000, .copy_threads = copy_per_s ? 2 : 1,
                           .chunk_bytes = 65536, .cache_dir = cache, .cache_bytes = cache_bytes,
                           .cache_memory_bytes = next_memory_bytes,
                           .foreground_latency_us = next_yields ? fake_latency : NULL,
                           .yield_latency_us = 1000, .yield_min_bytes_per_s = 512 * 1024,
                           .readahead_chunks = 2, .index_cache_bytes = 1 << 20,
                           .fetch_max_bytes_per_s = fetch_per_s, .copy_max_bytes_per_s = copy_per_s,
                           .store_config = next_store_config};
    assert_int_equal(st_tier_new(&tc, e->os, &e->tier, err, sizeof err), ST_OK);
    st_tier_start(e->tier);
}

static void open_tier(env_t *e, int64_t cache_bytes) { open_tier_quota(e, cache_bytes, 0, 0); }

static void open_part(env_t *e, const st_tier_retention_t *ret) {
    st_tier_part_ops_t ops = {closed_cb, changed_cb, local_bytes_cb, local_start_cb, NULL,
                              release_cb, e};
    char cache[300], err[256];
    snprintf(cache, sizeof cache, "%s/remote-manifest.json", e->root);
    assert_int_equal(st_tier_part_open(e->tier, e->topic ? e->topic : "orders",
                                       "AAAAAAAAAAAAAAAAAAAAAA", 3, cache, e->mode, &ops, ret,
                                       &e->part, err, sizeof err),
                     ST_OK);
    st_tier_part_set_leader(e->part, 1, 0); /* as the broker does at once */
}

/* Kick the partition and wait for its job (and any job it asked for) to
 * end: the event, not a poll. */
static void run_job(env_t *e) {
    st_tier_part_kick(e->part);
    if (st_tier__part_wait_idle(e->part, EVENT_WAIT_MS))
        fail_msg("the partition's job did not end within %d ms", EVENT_WAIT_MS);
}

static void wait_remote_end(env_t *e, int64_t end) {
    run_job(e);
    st_tier_status_t s;
    st_tier_part_status(e->part, &s);
    assert_int_equal(s.remote_end, end);
}

static void env_setup(env_t *e) {
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    snprintf(e->root, sizeof e->root, "/tmp/st-tier-XXXXXX");
    assert_non_null(mkdtemp(e->root));
    build_segments(e);
    open_store(e);
    open_tier(e, 64 << 20);
}

/* A partition that keeps everything, leading, its first two segments
 * uploaded: the end of the remote part. */
static const st_tier_retention_t keep_all = {-1, -1};

static int64_t two_uploaded(env_t *e) {
    env_setup(e);
    e->offered = 2;
    open_part(e, &keep_all);
    int64_t end2 = e->segs[1].info.last_offset + 1;
    wait_remote_end(e, end2);
    return end2;
}

static void env_close(env_t *e) {
    if (e->part) st_tier_part_close(e->part, 0);
    e->part = NULL;
    st_tier_destroy(e->tier);
    e->tier = NULL;
}

static void env_teardown(env_t *e) {
    env_close(e);
    st_os_destroy(e->os);
    for (int s = 0; s < NSEGS; s++) free(e->segs[s].bytes);
    st_rmtree(e->root);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
}

/* ---- reading back ---------------------------------------------------------- */

/* Read at offset (with flags besides MIN_ONE), waiting on the wake
 * callback while a download runs, and return the data. */
static int read_remote_flags(env_t *e, int64_t offset, int32_t max, int flags, uint8_t **data,
                             int32_t *len) {
    for (int i = 0; i < 100; i++) {
        st_tier_read_t r;
        int seen = wakes_now(e);
        st_err_t rc = st_tier_read(e->part, offset, max, ST_TIER_READ_MIN_ONE | flags, &r, wake_cb, e);
        if (rc == ST_E_AGAIN) {
            wait_wake(e, seen);
            continue;
        }
        if (rc) return rc;
        *len = r.len;
        *data = st_malloc((size_t)r.len + 1);
        assert_non_null(r.file);
        size_t got = 0;
        assert_int_equal(st_pread_all(r.file->fd, *data, (size_t)r.len, r.pos, &got), ST_OK);
        assert_int_equal(got, (size_t)r.len);
        st_file_release(r.file);
        return ST_OK;
    }
    fail_msg("no data for offset %lld", (long long)offset);
    return -1;
}

static int read_remote(env_t *e, int64_t offset, int32_t max, uint8_t **data, int32_t *len) {
    return read_remote_flags(e, offset, max, 0, data, len);
}

/* Every record of every whole batch in data checks out, and the first batch
 * holds offset. */
static void check_batches(const uint8_t *data, int32_t len, int64_t offset) {
    int32_t pos = 0, whole = 0;
    while (pos + 61 <= len) {
        st_batch_info_t b;
        assert_int_equal(st_batch_header(data + pos, (size_t)(len - pos), &b), ST_OK);
        if (pos + b.size > len) break; /* a cut batch at the end */
        assert_true(st_batch_crc_ok(data + pos, b.size));
        if (whole == 0) {
            assert_true(b.base_offset <= offset);
            assert_true(st_batch_last_offset(&b) >= offset);
        }
        pos += b.size;
        whole++;
    }
    assert_true(whole >= 1);
}

static void test_manifest_round_trip(void **state) {
    (void)state;
    st_manifest_t m, back;
    st_tier__manifest_init(&m);
    m.log_start = 5;
    m.nsegs = 2;
    m.segs = st_calloc(2, sizeof *m.segs);
    for (int i = 0; i < 2; i++) {
        snprintf(m.segs[i].id, sizeof m.segs[i].id, "%s", i ? "BBBBBBBBBBBBBBBBBBBBBB" : "AAAAAAAAAAAAAAAAAAAAAA");
        m.segs[i].base_offset = i * 100;
        m.segs[i].last_offset = i * 100 + 99;
        m.segs[i].max_timestamp = 1234567 + i;
        m.segs[i].size_bytes = 1000 + i;
        m.segs[i].crc32c = 0xdeadbeefu + (uint32_t)i;
        m.segs[i].nepochs = 2;
        m.segs[i].epochs = st_calloc(2, sizeof *m.segs[i].epochs);
        m.segs[i].epochs[0] = (st_tier_epoch_t){1, i * 100};
        m.segs[i].epochs[1] = (st_tier_epoch_t){2, i * 100 + 50};
    }
    char *text = st_tier__manifest_encode(&m, "orders", "AAAAAAAAAAAAAAAAAAAAAA", 3);
    char why[128];
    assert_int_equal(st_tier__manifest_decode(text, strlen(text), &back, why, sizeof why), ST_OK);
    assert_int_equal(back.log_start, 5);
    assert_int_equal(back.nsegs, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(back.segs[i].id, m.segs[i].id);
        assert_int_equal(back.segs[i].base_offset, m.segs[i].base_offset);
        assert_int_equal(back.segs[i].last_offset, m.segs[i].last_offset);
        assert_int_equal(back.segs[i].max_timestamp, m.segs[i].max_timestamp);
        assert_int_equal(back.segs[i].size_bytes, m.segs[i].size_bytes);
        assert_int_equal(back.segs[i].crc32c, m.segs[i].crc32c);
        assert_int_equal(back.segs[i].nepochs, 2);
        assert_int_equal(back.segs[i].epochs[1].start_offset, i * 100 + 50);
    }
    assert_int_equal(st_tier__manifest_start(&back), 5);
    assert_int_equal(st_tier__manifest_end(&back), 200);
    st_tier__manifest_fini(&back);
    free(text);
    st_tier__manifest_fini(&m);

    /* hostile inputs are refused with a reason */
    static const char *bad[] = {
        "",
        "not json",
        "{\"version\":2,\"log_start_offset\":0,\"segments\":[]}",
        "{\"version\":1,\"segments\":[]}",
        "{\"version\":1,\"log_start_offset\":-1,\"segments\":[]}",
        "{\"version\":1,\"log_start_offset\":0,\"segments\":[{\"id\":\"short\",\"crc32c\":\"0\","
        "\"base_offset\":0,\"last_offset\":1,\"max_timestamp\":0,\"size\":1,\"leader_epochs\":[]}]}",
        "{\"version\":1,\"log_start_offset\":0,\"segments\":[{\"id\":\"AAAAAAAAAAAAAAAAAAAAAA\","
        "\"crc32c\":\"0\",\"base_offset\":5,\"last_offset\":1,\"max_timestamp\":0,\"size\":1,"
        "\"leader_epochs\":[]}]}",
        "{\"version\":1,\"log_start_offset\":0,\"segments\":[{\"id\":\"AAAAAAAAAAAAAAAAAAAAAA\","
        "\"crc32c\":\"0\",\"base_offset\":0,\"last_offset\":9,\"max_timestamp\":0,\"size\":1,"
        "\"leader_epochs\":[]},{\"id\":\"BBBBBBBBBBBBBBBBBBBBBB\",\"crc32c\":\"0\",\"base_offset\":"
        "11,\"last_offset\":19,\"max_timestamp\":0,\"size\":1,\"leader_epochs\":[]}]}",
    };
    for (size_t i = 0; i < ST_ARRAY_SIZE(bad); i++) {
        why[0] = 0;
        assert_int_not_equal(st_tier__manifest_decode(bad[i], strlen(bad[i]), &back, why, sizeof why),
                             ST_OK);
        assert_true(why[0] != 0);
    }
}

static void test_upload_and_read(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);
    assert_int_equal(__atomic_load_n(&e.remote_end, __ATOMIC_ACQUIRE), end);

    /* the bucket holds four objects per segment and a manifest */
    char key[700];
    snprintf(key, sizeof key, "orders-AAAAAAAAAAAAAAAAAAAAAA/3/manifest.json");
    st_os_request_t rq = {.op = ST_OS_GET, .key = key, .offset = 0, .length = ST_OS_TO_END};
    rq.sink.kind = ST_OS_SINK_ALLOC;
    st_os_result_t *res = st_os_run(e.os, &rq);
    assert_int_equal(res->status, ST_OK);
    st_tier_manifest_summary_t s;
    char why[128];
    assert_int_equal(st_tier_manifest_summarize(res->data, (size_t)res->length, &s, why, sizeof why),
                     ST_OK);
    st_os_result_free(res);
    assert_int_equal(s.segments, NSEGS);
    assert_int_equal(s.start, 0);
    assert_int_equal(s.end, end);
    st_os_request_t lq = {.op = ST_OS_LIST, .prefix = "orders-AAAAAAAAAAAAAAAAAAAAAA/3/"};
    res = st_os_run(e.os, &lq);
    assert_int_equal(res->status, ST_OK);
    assert_int_equal(res->nentries, 4 * NSEGS + 1);
    st_os_result_free(res);

    /* every offset reads back: inside a chunk, across chunks, at segment
     * ends; the first whole batch holds the offset */
    for (int64_t off = 0; off < end; off += 7) {
        uint8_t *data;
        int32_t len;
        assert_int_equal(read_remote(&e, off, 32768, &data, &len), ST_OK);
        check_batches(data, len, off);
        free(data);
    }
    /* outside the remote part */
    st_tier_read_t r;
    assert_int_equal(st_tier_read(e.part, end, 1000, ST_TIER_READ_MIN_ONE, &r, wake_cb, &e), ST_E_OFFSET_OUT_OF_RANGE);
    assert_int_equal(st_tier_read(e.part, -1, 1000, ST_TIER_READ_MIN_ONE, &r, wake_cb, &e), ST_E_OFFSET_OUT_OF_RANGE);
    /* a first batch larger than max_bytes: whole with min_one, nothing without */
    uint8_t *data;
    int32_t len;
    assert_int_equal(read_remote(&e, 55, 100, &data, &len), ST_OK);
    assert_true(len >= 61 && len > 100);
    free(data);
    assert_int_equal(st_tier_read(e.part, 55, 100, 0, &r, wake_cb, &e), ST_OK);
    assert_int_equal(r.len, 0);

    st_tier_stats_t st;
    st_tier_get_stats(e.tier, &st);
    assert_int_equal(st.segments_uploaded, NSEGS);
    assert_true(st.cache_hits > 0);
    assert_true(e.wakes > 0);
    /* one download per chunk: downloads never exceed the chunks + indexes */
    int64_t chunks = 0;
    for (int i = 0; i < NSEGS; i++) chunks += (e.segs[i].info.size_bytes + 65535) / 65536;
    assert_true((int64_t)st.fetch_requests <= chunks + NSEGS);
    env_teardown(&e);
}

/* Each request the manager makes carries its topic's account: after
 * uploads of two topics, reads of one, and the other's deletion, the two
 * accounts add up to every request and byte the object store counted (the
 * test sends none of its own); the reads cost one read-class request per
 * download and nothing else; a deleted topic's account stays. */
static void test_topic_accounts(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret); /* "orders" */
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);
    st_tier_part_ops_t ops = {closed_cb, changed_cb, local_bytes_cb, NULL, NULL, release_cb, &e};
    st_tier_part_t *pay = NULL;
    char err[256];
    assert_int_equal(st_tier_part_open(e.tier, "payments", "BBBBBBBBBBBBBBBBBBBBBB", 0, NULL,
                                       ST_TIER_ON, &ops, &ret, &pay, err, sizeof err),
                     ST_OK);
    st_tier_part_set_leader(pay, 1, 0);
    st_tier_part_kick(pay);
    assert_int_equal(st_tier__part_wait_idle(pay, EVENT_WAIT_MS), 0);
    st_tier_status_t ts;
    st_tier_part_status(pay, &ts);
    assert_int_equal(ts.remote_end, end);

    /* reading orders back: one read request per download, nothing else */
    st_tier_topic_usage_t *u0, *u1;
    assert_int_equal(st_tier_usage(e.tier, &u0), 2);
    st_tier_stats_t s0, s1;
    st_tier_get_stats(e.tier, &s0);
    /* no read-ahead: once a read answers, no download of it is running */
    for (int64_t off = 0; off < end; off += 50) {
        uint8_t *data;
        int32_t len;
        assert_int_equal(read_remote_flags(&e, off, 32768, ST_TIER_READ_ONCE, &data, &len), ST_OK);
        free(data);
    }
    st_tier_get_stats(e.tier, &s1);
    assert_int_equal(st_tier_usage(e.tier, &u1), 2);
    assert_string_equal(u1[0].topic, "orders");
    assert_string_equal(u1[1].topic, "payments");
    assert_true(s1.fetch_requests > s0.fetch_requests);
    assert_int_equal(u1[0].usage.requests[ST_OS_CLASS_READ] - u0[0].usage.requests[ST_OS_CLASS_READ],
                     s1.fetch_requests - s0.fetch_requests);
    assert_int_equal(u1[0].usage.requests[ST_OS_CLASS_WRITE], u0[0].usage.requests[ST_OS_CLASS_WRITE]);
    assert_int_equal(u1[0].usage.bytes_in - u0[0].usage.bytes_in, s1.bytes_fetched - s0.bytes_fetched);
    assert_true(u1[1].usage.requests[ST_OS_CLASS_WRITE] >= 4 * NSEGS + NSEGS); /* objects, manifests */
    assert_int_equal(memcmp(&u1[1].usage, &u0[1].usage, sizeof u1[1].usage), 0);
    st_tier_usage_free(u0, 2);

    /* payments goes with its objects; its account stays, with the deletes */
    st_tier_part_t *held = st_tier_part_keep(pay);
    st_tier_part_close(pay, 1);
    assert_int_equal(st_tier__part_wait_idle(held, EVENT_WAIT_MS), 0);
    st_tier_part_release(held);
    st_tier_topic_usage_t *u2;
    assert_int_equal(st_tier_usage(e.tier, &u2), 2);
    assert_string_equal(u2[1].topic, "payments");
    assert_true(u2[1].usage.requests[ST_OS_CLASS_WRITE] >= u1[1].usage.requests[ST_OS_CLASS_WRITE] + 2);

    /* the accounts hold every request and byte the store counted */
    st_os_stats_t os;
    st_os_get_stats(e.os, &os);
    for (int c = 0; c < ST_OS_NCLASSES; c++)
        assert_int_equal(u2[0].usage.requests[c] + u2[1].usage.requests[c], os.class_requests[c]);
    assert_int_equal(u2[0].usage.bytes_out + u2[1].usage.bytes_out, os.bytes_out);
    assert_int_equal(u2[0].usage.bytes_in + u2[1].usage.bytes_in, os.bytes_in);
    assert_true(u2[0].usage.bytes_out > 0 && u2[0].usage.bytes_in > 0);
    st_tier_usage_free(u1, 2);
    st_tier_usage_free(u2, 2);
    env_teardown(&e);
}

static void test_restart_and_orphans(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);
    env_close(&e);

    /* an interrupted upload's object: no manifest names it */
    char key[700];
    snprintf(key, sizeof key, "orders-AAAAAAAAAAAAAAAAAAAAAA/3/%020d-ZZZZZZZZZZZZZZZZZZZZZZ.log", 999);
    st_os_request_t put = {.op = ST_OS_PUT, .key = key};
    put.src.kind = ST_OS_SRC_MEM;
    put.src.data = "junk";
    put.src.length = 4;
    st_os_result_t *res = st_os_run(e.os, &put);
    assert_int_equal(res->status, ST_OK);
    st_os_result_free(res);

    /* restart from the bucket alone (no local copy of the manifest) */
    char cache[300];
    snprintf(cache, sizeof cache, "%s/remote-manifest.json", e.root);
    assert_int_equal(unlink(cache), 0);
    open_tier(&e, 64 << 20);
    open_part(&e, &ret);
    st_tier_status_t s;
    st_tier_part_status(e.part, &s);
    assert_int_equal(s.remote_end, end); /* known at open: before any append */
    /* the first job's sweep deletes the orphan */
    run_job(&e);
    st_tier_stats_t st;
    st_tier_get_stats(e.tier, &st);
    assert_int_equal(st.orphans_deleted, 1);
    st_os_request_t head = {.op = ST_OS_HEAD, .key = key};
    res = st_os_run(e.os, &head);
    assert_int_equal(res->status, ST_E_NOT_FOUND);
    st_os_result_free(res);
    uint8_t *data;
    int32_t len;
    assert_int_equal(read_remote(&e, end - 1, 4096, &data, &len), ST_OK);
    check_batches(data, len, end - 1);
    free(data);
    env_teardown(&e);
}

/* The bucket's manifest of the test partition, decoded. */
static void bucket_manifest_full(env_t *e, st_manifest_t *m) {
    st_os_request_t rq = {.op = ST_OS_GET, .key = "orders-AAAAAAAAAAAAAAAAAAAAAA/3/manifest.json",
                          .offset = 0, .length = ST_OS_TO_END};
    rq.sink.kind = ST_OS_SINK_ALLOC;
    st_os_result_t *res = st_os_run(e->os, &rq);
    assert_int_equal(res->status, ST_OK);
    char why[200];
    assert_int_equal(st_tier__manifest_decode(res->data, (size_t)res->length, m, why, sizeof why), ST_OK);
    st_os_result_free(res);
}

/* A manifest in the bucket written at a higher leader epoch fences this
 * broker: its uploads never replace it, until it leads at a higher epoch
 * still, and then its manifest records that epoch. */
static void test_manifest_fenced_by_epoch(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    const char *newer = "{\"version\": 1, \"topic\": \"orders\", \"topic_id\": "
                        "\"AAAAAAAAAAAAAAAAAAAAAA\", \"partition\": 3, \"log_start_offset\": 0, "
                        "\"leader_epoch\": 7, \"segments\": []}";
    st_os_request_t put = {.op = ST_OS_PUT, .key = "orders-AAAAAAAAAAAAAAAAAAAAAA/3/manifest.json"};
    put.src.kind = ST_OS_SRC_MEM;
    put.src.data = newer;
    put.src.length = strlen(newer);
    st_os_result_t *res = st_os_run(e.os, &put);
    assert_int_equal(res->status, ST_OK);
    st_os_result_free(res);
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);
    st_tier_part_set_leader(e.part, 1, 5); /* a deposed leader: 5 < 7 */
    run_job(&e);
    run_job(&e);
    st_manifest_t m;
    bucket_manifest_full(&e, &m);
    assert_int_equal(m.leader_epoch, 7);
    assert_int_equal(m.nsegs, 0);
    st_tier__manifest_fini(&m);
    st_tier_status_t s;
    st_tier_part_status(e.part, &s);
    assert_int_equal(s.remote_end, 0);
    /* leading at 8: the bucket's manifest read again, everything uploaded */
    st_tier_part_set_leader(e.part, 1, 8);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);
    bucket_manifest_full(&e, &m);
    assert_int_equal(m.leader_epoch, 8);
    assert_int_equal(m.nsegs, NSEGS);
    st_tier__manifest_fini(&m);
    env_teardown(&e);
}

/* An empty manifest of the test partition written at epoch. */
static void put_empty_manifest(st_os_t *os, int epoch) {
    char text[300];
    snprintf(text, sizeof text,
             "{\"version\": 1, \"topic\": \"orders\", \"topic_id\": "
             "\"AAAAAAAAAAAAAAAAAAAAAA\", \"partition\": 3, \"log_start_offset\": 0, "
             "\"leader_epoch\": %d, \"segments\": []}",
             epoch);
    st_os_request_t put = {.op = ST_OS_PUT, .key = "orders-AAAAAAAAAAAAAAAAAAAAAA/3/manifest.json"};
    put.src.kind = ST_OS_SRC_MEM;
    put.src.data = text;
    put.src.length = strlen(text);
    st_os_result_t *res = st_os_run(os, &put);
    assert_int_equal(res->status, ST_OK);
    st_os_result_free(res);
}

/* A newer leader's manifest (epoch 7, no segments) written by the hook
 * the first time it runs: between a write's read and its put. */
static st_os_t *race_os;
static int race_writes;

static void race_newer_leader(const char *key) {
    (void)key;
    if (race_writes++ == 0) put_empty_manifest(race_os, 7);
}

/* A leader elected between a deposed one's read of the manifest and its
 * write: the write is conditional on what it read, so it fails, the
 * deposed leader reads again, sees epoch 7 and stops; the newer manifest
 * stays.  (Without the condition the put overwrites epoch 7 with 5.) */
static void test_manifest_race_with_newer_leader(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_retention_t ret = {-1, -1};
    put_empty_manifest(e.os, 4); /* an older leader's: the put is If-Match */
    race_os = e.os;
    race_writes = 0;
    st_tier__manifest_put_hook = race_newer_leader;
    open_part(&e, &ret);
    st_tier_part_set_leader(e.part, 1, 5);
    run_job(&e);
    run_job(&e);
    st_tier__manifest_put_hook = NULL;
    assert_true(race_writes >= 1);
    st_manifest_t m;
    bucket_manifest_full(&e, &m);
    assert_int_equal(m.leader_epoch, 7);
    assert_int_equal(m.nsegs, 0);
    st_tier__manifest_fini(&m);
    /* leading at 8: it writes again, from the bucket's manifest */
    st_tier_part_set_leader(e.part, 1, 8);
    wait_remote_end(&e, e.segs[NSEGS - 1].info.last_offset + 1);
    bucket_manifest_full(&e, &m);
    assert_int_equal(m.leader_epoch, 8);
    assert_int_equal(m.nsegs, NSEGS);
    st_tier__manifest_fini(&m);
    env_teardown(&e);
}

/* The bucket's manifest of the test partition, summarized. */
static void bucket_manifest(env_t *e, st_tier_manifest_summary_t *out, int64_t *log_start) {
    st_os_request_t rq = {.op = ST_OS_GET, .key = "orders-AAAAAAAAAAAAAAAAAAAAAA/3/manifest.json",
                          .offset = 0, .length = ST_OS_TO_END};
    rq.sink.kind = ST_OS_SINK_ALLOC;
    st_os_result_t *res = st_os_run(e->os, &rq);
    assert_int_equal(res->status, ST_OK);
    char why[128];
    assert_int_equal(st_tier_manifest_summarize(res->data, (size_t)res->length, out, why, sizeof why),
                     ST_OK);
    st_manifest_t m;
    assert_int_equal(st_tier__manifest_decode(res->data, (size_t)res->length, &m, why, sizeof why),
                     ST_OK);
    *log_start = m.log_start;
    st_tier__manifest_fini(&m);
    st_os_result_free(res);
}

static int64_t bucket_objects(env_t *e) {
    st_os_request_t lq = {.op = ST_OS_LIST, .prefix = "orders-AAAAAAAAAAAAAAAAAAAAAA/3/"};
    st_os_result_t *res = st_os_run(e->os, &lq);
    assert_int_equal(res->status, ST_OK);
    int64_t n = (int64_t)res->nentries;
    st_os_result_free(res);
    return n;
}

/* After DeleteRecords at cut: the bucket's manifest, the status and reads
 * all start at cut. */
static void check_cut(env_t *e, int64_t cut) {
    st_tier_status_t s;
    st_tier_part_status(e->part, &s);
    assert_int_equal(s.durable_log_start, cut);
    assert_int_equal(s.remote_start, cut);
    st_tier_manifest_summary_t ms;
    int64_t log_start;
    bucket_manifest(e, &ms, &log_start);
    assert_int_equal(log_start, cut);
    assert_int_equal(ms.start, cut);
    st_tier_read_t r;
    assert_int_equal(st_tier_read(e->part, cut - 1, 1000, ST_TIER_READ_MIN_ONE, &r, wake_cb, e),
                     ST_E_OFFSET_OUT_OF_RANGE);
    uint8_t *data;
    int32_t len;
    assert_int_equal(read_remote(e, cut, 4096, &data, &len), ST_OK);
    check_batches(data, len, cut);
    free(data);
}

static void test_retention_and_delete_records(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);

    /* retention.bytes just over two segments: as Kafka, a segment goes
     * only while what remains still reaches the bound, so three stay */
    ret.retention_bytes = e.segs[0].info.size_bytes * 2 + 10;
    st_tier_part_set_retention(e.part, &ret);
    run_job(&e);
    int64_t want_start = e.segs[NSEGS - 3].info.base_offset;
    assert_int_equal(__atomic_load_n(&e.remote_start, __ATOMIC_ACQUIRE), want_start);
    st_tier_read_t r;
    assert_int_equal(st_tier_read(e.part, 0, 1000, ST_TIER_READ_MIN_ONE, &r, wake_cb, &e), ST_E_OFFSET_OUT_OF_RANGE);
    assert_int_equal(bucket_objects(&e), 4 * 3 + 1); /* objects go after the manifest */

    /* DeleteRecords inside the remote part: it kicks the job itself */
    int64_t cut = want_start + 15;
    assert_int_equal(st_tier_delete_records(e.part, cut), ST_OK);
    if (st_tier__part_wait_idle(e.part, EVENT_WAIT_MS)) fail_msg("the job did not end");
    check_cut(&e, cut);
    env_teardown(&e);
}

/*
 * Retention and DeleteRecords in the same pass (a fresh clone under load
 * saw the bucket keep 800 where DeleteRecords had asked for 815).  The
 * DeleteRecords comes from inside the retention job, so the interleaving is
 * certain rather than left to the scheduler:
 *   - HOOK_LOCAL_BYTES: while the pass decides what goes, after it copied
 *     the manifest (the pass must not install a log start below it);
 *   - HOOK_CHANGED: after the pass installed its manifest, before its job
 *     ended (the kick must not be lost because a job runs).
 */
static void same_pass(int hook) {
    env_t e;
    env_setup(&e);
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);

    int64_t want_start = e.segs[NSEGS - 3].info.base_offset, cut = want_start + 15;
    pthread_mutex_lock(&e.lock);
    e.delete_hook = hook;
    e.delete_at = cut;
    e.delete_when_start = want_start;
    e.hook_rc = -1;
    pthread_mutex_unlock(&e.lock);
    ret.retention_bytes = e.segs[0].info.size_bytes * 2 + 10;
    st_tier_part_set_retention(e.part, &ret);
    run_job(&e);
    assert_int_equal(e.delete_hook, 0); /* the hook ran */
    assert_int_equal(e.hook_rc, ST_OK);
    check_cut(&e, cut);
    assert_int_equal(bucket_objects(&e), 4 * 3 + 1);
    env_teardown(&e);
}

static void test_delete_records_while_retention_decides(void **state) {
    (void)state;
    same_pass(HOOK_LOCAL_BYTES);
}

static void test_delete_records_after_retention_installed(void **state) {
    (void)state;
    same_pass(HOOK_CHANGED);
}

static void test_small_cache_evicts(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_destroy(e.tier);
    open_tier(&e, 3 * 65536); /* three chunks */
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);
    for (int round = 0; round < 2; round++)
        for (int64_t off = 0; off < end; off += 33) {
            uint8_t *data;
            int32_t len;
            assert_int_equal(read_remote(&e, off, 20000, &data, &len), ST_OK);
            check_batches(data, len, off);
            free(data);
            int64_t disk, memory;
            st_tier__cache_used(e.tier->cache, &disk, &memory);
            assert_true(disk <= 3 * 65536);
            assert_int_equal(memory, 0);
        }
    st_tier_stats_t st;
    st_tier_get_stats(e.tier, &st);
    assert_true(st.cache_evictions > 0);
    env_teardown(&e);
}

/* The chunk files in the cache directory: how many, and their bytes. */
static int chunk_files(const env_t *e, int64_t *bytes) {
    char dir[300], path[600];
    snprintf(dir, sizeof dir, "%s/cache", e->root);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    *bytes = 0;
    struct dirent *de;
    struct stat sb;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".chunk") || strstr(de->d_name, ".part")) {
            n++;
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            if (stat(path, &sb) == 0) *bytes += sb.st_size;
        }
    closedir(d);
    return n;
}

static int64_t replay_all(env_t *e, int64_t end);

/* A tier with a disk cache of cache_bytes (and next_memory_bytes,
 * next_yields) whose partition has every segment in the bucket: the
 * bytes of the segments, and the remote end in *end. */
static int64_t remote_only(env_t *e, int64_t cache_bytes, int64_t *end) {
    env_setup(e);
    st_tier_destroy(e->tier);
    open_tier(e, cache_bytes);
    st_tier_retention_t ret = {-1, -1};
    open_part(e, &ret);
    *end = e->segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(e, *end);
    int64_t total = 0;
    for (int i = 0; i < NSEGS; i++) total += e->segs[i].info.size_bytes;
    return total;
}

/*
 * Chunks go to the disk while it has room, then to memory
 * (remote.log.cache.memory.bytes): a single reader replaying the whole
 * remote log through a pool of four chunks and a disk cache of three
 * fills the disk once and drops the rest (memory and disk within their
 * bounds); the same replay again at once finds the first chunks on disk,
 * and, further behind than the disk could hold, does not churn it until
 * it nears the first one's end.
 */
static void test_memory_chunks(void **state) {
    (void)state;
    env_t e;
    int64_t end, disk = 3 * 75000; /* three chunks */
    next_memory_bytes = 4 * 65536; /* a chunk and two ahead, with room: chunks end on batches */
    int64_t total = remote_only(&e, disk, &end);
    next_memory_bytes = 0;

    assert_int_equal(replay_all(&e, end), total);
    st_tier_stats_t st;
    st_tier_get_stats(e.tier, &st);
    uint64_t spills = st.cache_spills, downloads = st.fetch_requests;
    int64_t on_disk;
    int files = chunk_files(&e, &on_disk);
    assert_true(files >= 1 && on_disk <= disk);
    assert_true(st.cache_used_bytes > 0 && st.cache_used_bytes <= disk);
    assert_true(st.cache_memory_used_bytes > 0 && st.cache_memory_used_bytes <= 4 * 65536);
    assert_true(st.cache_evictions > 0); /* the rest was dropped */
    print_message("one reader: %lld bytes read, %llu downloads, %d chunks kept on disk (%lld "
                  "bytes), %llu dropped from memory\n", (long long)total,
                  (unsigned long long)downloads, files, (long long)st.cache_used_bytes,
                  (unsigned long long)st.cache_evictions);

    assert_int_equal(replay_all(&e, end), total);
    st_tier_get_stats(e.tier, &st);
    /* only where it caught up with the first replay's end (within half
     * the disk cache) did it count as a reader behind another */
    assert_true(st.cache_spills - spills <= 3);
    /* (files of chunks evicted a moment ago are unlinked after the lock;
     * the last chunk of a segment is short, so bytes, not files, bound) */
    for (int i = 0; i < 100 && (chunk_files(&e, &on_disk), on_disk > disk); i++) usleep(10000);
    assert_true(on_disk <= disk);
    assert_true(st.cache_used_bytes <= disk);
    assert_true(st.fetch_requests - downloads < downloads); /* the disk's chunks were not fetched */
    print_message("again at once: %llu more downloads (the disk's chunks served from it), %llu "
                  "more kept on disk near the end\n",
                  (unsigned long long)(st.fetch_requests - downloads),
                  (unsigned long long)(st.cache_spills - spills));
    env_teardown(&e);
}

/*
 * Downloads yield to live traffic: while the broker says live work waits
 * longer than remote.log.fetch.yield.latency.ms, they slow down to the
 * floor (a replay that takes a tenth of a second unpaced takes seconds);
 * once it is calm for 2 s they are unpaced again.
 */
static void test_yield_to_live(void **state) {
    (void)state;
    env_t e;
    int64_t end;
    next_yields = 1;
    int64_t total = remote_only(&e, 64 << 20, &end);
    next_yields = 0;

    /* live work waits 50 ms; a first read's downloads (its chunk and two
     * ahead) are seen by the next 100 ms window, which paces the rest */
    __atomic_store_n(&fake_latency_us, 50000, __ATOMIC_RELAXED);
    uint8_t *data;
    int32_t len;
    assert_int_equal(read_remote(&e, 0, 1000, &data, &len), ST_OK);
    free(data);
    usleep(400 * 1000);
    int64_t t0 = st_mono_us();
    assert_int_equal(replay_all(&e, end), total);
    double secs = (double)(st_mono_us() - t0) / 1e6;
    st_tier_stats_t st;
    st_tier_get_stats(e.tier, &st);
    print_message("live work waiting 50 ms: %lld bytes replayed in %.2f s (%.0f B/s), paced at "
                  "%lld B/s after %llu cuts\n", (long long)total, secs, (double)total / secs,
                  (long long)st.fetch_pace_bytes_per_s, (unsigned long long)st.fetch_pace_cuts);
    assert_true(st.fetch_pace_cuts >= 1);
    assert_int_equal(st.fetch_pace_bytes_per_s, 512 * 1024);
    assert_true(secs >= 1.5); /* 1.6 MB left at 0.5 MB/s (unpaced: 0.02 s) */

    __atomic_store_n(&fake_latency_us, -1, __ATOMIC_RELAXED);
    int64_t t1 = st_mono_ms();
    do {
        st_tier_get_stats(e.tier, &st);
        if (st.fetch_pace_bytes_per_s == 0) break;
        usleep(50000);
    } while (st_mono_ms() - t1 < 10000);
    assert_int_equal(st.fetch_pace_bytes_per_s, 0);
    print_message("calm again: unpaced after %.1f s\n", (double)(st_mono_ms() - t1) / 1000);
    env_teardown(&e);
}

/* One answer of a consumer at *off, as a fetch of 1 MiB gets it; *off
 * moves past its whole batches.  Returns their bytes. */
static int64_t read_next(env_t *e, int64_t *off) {
    uint8_t *data;
    int32_t len;
    assert_int_equal(read_remote(e, *off, 1 << 20, &data, &len), ST_OK);
    check_batches(data, len, *off);
    int32_t pos = 0;
    while (pos + 61 <= len) { /* on past the whole batches */
        st_batch_info_t b;
        assert_int_equal(st_batch_header(data + pos, (size_t)(len - pos), &b), ST_OK);
        if (pos + b.size > len) break;
        *off = st_batch_last_offset(&b) + 1;
        pos += b.size;
    }
    free(data);
    return pos;
}

/* Read every batch of the remote log once, in order, as a consumer
 * replaying from offset 0 does; returns the bytes read. */
static int64_t replay_all(env_t *e, int64_t end) {
    int64_t off = 0, bytes = 0;
    while (off < end) bytes += read_next(e, &off);
    return bytes;
}

/*
 * Two readers of a partition, one five answers (chunks) behind the other,
 * through a disk cache of 8 chunks, about what they need: the chunks
 * between them and the two fetched ahead of each.  Every chunk is
 * downloaded once, as for one reader: the chunks the reader behind has
 * passed go first.  Least recently used order evicted a chunk only the
 * reader ahead had read (39 downloads against 35), since the reader
 * behind touched the chunks it just passed later.
 */
static void test_readers_apart_full_disk(void **state) {
    (void)state;
    env_t e;
    int64_t end;
    int64_t total = remote_only(&e, 64 << 20, &end);
    assert_int_equal(replay_all(&e, end), total);
    st_tier_stats_t st;
    st_tier_get_stats(e.tier, &st);
    uint64_t alone = st.fetch_requests;
    env_teardown(&e);

    remote_only(&e, 8 * 75000, &end);
    int64_t ahead = 0, behind = 0, bytes = 0;
    for (int steps = 0; behind < end; steps++) {
        if (ahead < end) bytes += read_next(&e, &ahead);
        if (steps >= 5 || ahead >= end) bytes += read_next(&e, &behind);
    }
    assert_int_equal(bytes, 2 * total);
    st_tier_get_stats(e.tier, &st);
    print_message("one reader: %llu downloads; two readers 5 chunks apart, disk cache of 8 "
                  "chunks: %llu downloads, %llu chunks evicted\n", (unsigned long long)alone,
                  (unsigned long long)st.fetch_requests, (unsigned long long)st.cache_evictions);
    assert_true(st.cache_evictions > 0);
    assert_int_equal(st.fetch_requests, alone);
    env_teardown(&e);
}

/*
 * remote.log.manager.fetch.max.bytes.per.second throttles, it does not
 * stop: a replay through a quota gets every byte, at close to the quota.
 * (An offset index is fetched whole, of a length not known before; it
 * once took UINT64_MAX from the token bucket, and no download was ever
 * released again.)
 */
static void fetch_quota(int64_t rate, int measure) {
    env_t e;
    env_setup(&e);
    st_tier_destroy(e.tier);
    open_tier_quota(&e, 64 << 20, rate, 0);
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);
    int64_t t0 = st_mono_us();
    int64_t bytes = replay_all(&e, end);
    double secs = (double)(st_mono_us() - t0) / 1e6;
    st_tier_stats_t st;
    st_tier_get_stats(e.tier, &st);
    int64_t total = 0;
    for (int i = 0; i < NSEGS; i++) total += e.segs[i].info.size_bytes;
    assert_int_equal(bytes, total);
    double got = (double)st.bytes_fetched / secs;
    print_message("fetch quota %lld B/s: %lld bytes downloaded in %.2f s, %.0f B/s (%.2f of the "
                  "quota)\n", (long long)rate, (long long)st.bytes_fetched, secs, got,
                  got / (double)rate);
    if (measure) {
        /* a burst of a tenth of a second is allowed on top */
        double want = (double)st.bytes_fetched / (secs + 0.1);
        assert_true(want <= (double)rate * 1.10);
        assert_true(got >= (double)rate * 0.75);
    }
    env_teardown(&e);
}

static void test_fetch_quota_throttles(void **state) {
    (void)state;
    fetch_quota(1 << 20, 1); /* about 1.9 MB at 1 MiB/s */
}

static void test_fetch_quota_huge(void **state) {
    (void)state;
    fetch_quota(1000000000000LL, 0);
}

/*
 * remote.log.manager.copy.max.bytes.per.second is the broker's, not each
 * copier thread's: two partitions uploading on two threads share it.
 * (It was a sleep per job after each segment, so two copiers went at
 * twice the quota.)  The first segment of each starts at once; from then
 * on the bytes keep to the quota.
 */
static void test_copy_quota_shared(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_destroy(e.tier);
    int64_t rate = 2 << 20;
    open_tier_quota(&e, 64 << 20, 0, rate);
    st_tier_retention_t ret = {-1, -1};
    st_tier_part_ops_t ops = {closed_cb, changed_cb, local_bytes_cb, NULL, NULL, release_cb, &e};
    char cache[300], err[256];
    snprintf(cache, sizeof cache, "%s/remote-manifest-4.json", e.root);
    st_tier_part_t *second;
    int64_t t0 = st_mono_us();
    open_part(&e, &ret);
    assert_int_equal(st_tier_part_open(e.tier, "orders", "AAAAAAAAAAAAAAAAAAAAAA", 4, cache,
                                       ST_TIER_ON, &ops, &ret, &second, err, sizeof err),
                     ST_OK);
    st_tier_part_set_leader(second, 1, 0);
    st_tier_part_kick(e.part);
    st_tier_part_kick(second);
    assert_int_equal(st_tier__part_wait_idle(e.part, EVENT_WAIT_MS), 0);
    assert_int_equal(st_tier__part_wait_idle(second, EVENT_WAIT_MS), 0);
    double secs = (double)(st_mono_us() - t0) / 1e6;
    st_tier_stats_t st;
    st_tier_get_stats(e.tier, &st);
    assert_int_equal(st.segments_uploaded, 2 * NSEGS);
    /* what had to wait: all but the last segment of each (index files
     * are charged too, they are small) and the burst */
    double paced = (double)st.bytes_uploaded - 2.0 * (double)e.segs[0].info.size_bytes -
                   (double)rate / 10;
    print_message("copy quota %lld B/s, 2 copiers: %llu bytes in %.2f s, %.0f B/s paced "
                  "(%.2f of the quota)\n", (long long)rate,
                  (unsigned long long)st.bytes_uploaded, secs, paced / secs,
                  paced / secs / (double)rate);
    assert_true(paced / secs <= (double)rate * 1.10);
    assert_true(paced / secs >= (double)rate * 0.70);
    st_tier_part_close(second, 0);
    env_teardown(&e);
}

/* Stopping does not wait for the copy quota: a copier waiting for it
 * gives up at once (it waited out a sleep of up to 10 s). */
static void test_copy_quota_stop(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_destroy(e.tier);
    open_tier_quota(&e, 64 << 20, 0, 64 << 10); /* a segment is 5.6 s of it */
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);
    st_tier_part_kick(e.part);
    /* the first segment goes at once; the second waits */
    int64_t deadline = st_mono_ms() + EVENT_WAIT_MS;
    pthread_mutex_lock(&e.lock);
    while (__atomic_load_n(&e.changes, __ATOMIC_RELAXED) == 0 && st_mono_ms() < deadline)
        st_cond_wait_ms(&e.cond, &e.lock, deadline - st_mono_ms());
    pthread_mutex_unlock(&e.lock);
    assert_int_equal(__atomic_load_n(&e.remote_end, __ATOMIC_ACQUIRE), e.segs[0].info.last_offset + 1);
    int64_t t0 = st_mono_us();
    env_close(&e);
    double secs = (double)(st_mono_us() - t0) / 1e6;
    print_message("stopped in %.3f s while a copier waited for the quota\n", secs);
    assert_true(secs < 1.0);
    st_os_destroy(e.os);
    for (int s = 0; s < NSEGS; s++) free(e.segs[s].bytes);
    st_rmtree(e.root);
    pthread_mutex_destroy(&e.lock);
    pthread_cond_destroy(&e.cond);
}

/* Every key under prefix ({key, size}), at most 64. */
static size_t list_keys(env_t *e, const char *prefix, char **keys) {
    st_os_request_t lq = {.op = ST_OS_LIST, .prefix = prefix};
    st_os_result_t *res = st_os_run(e->os, &lq);
    assert_int_equal(res->status, ST_OK);
    size_t n = res->nentries;
    assert_true(n <= 64);
    for (size_t i = 0; i < n; i++) keys[i] = st_strdup(res->entries[i].key);
    st_os_result_free(res);
    return n;
}

static void read_everything(env_t *e, int64_t end) {
    for (int64_t off = 0; off < end; off += 37) {
        uint8_t *data;
        int32_t len;
        assert_int_equal(read_remote(e, off, 8192, &data, &len), ST_OK);
        check_batches(data, len, off);
        free(data);
    }
}

/*
 * Long topic names.  Kafka allows 249 characters; <topic>-<topicId> is
 * then 272 bytes, more than a file name (the file backend and MinIO keep
 * each key piece as one), so a name over 227 characters is laid out as
 * <topic>/<topicId>/<partition>.  A 230-character name still fits the old
 * layout on the file backend: one tiered under it (moved there by hand
 * here, as a bucket written before the new layout would hold it) stays
 * where its manifest is, for reads and for new uploads.
 */
static void test_long_topic_names(void **state) {
    (void)state;
    const char *id = "AAAAAAAAAAAAAAAAAAAAAA";
    for (int len = 249; len >= 230; len -= 19) {
        char topic[250];
        for (int i = 0; i < len; i++) topic[i] = "abcdefghijklmnopqrstuvwxyz0123456789._-"[i % 39];
        topic[len] = 0;
        env_t e;
        env_setup(&e);
        e.topic = topic;
        e.offered = 3;
        st_tier_retention_t ret = {-1, -1};
        open_part(&e, &ret);
        int64_t end3 = e.segs[2].info.last_offset + 1, end = e.segs[NSEGS - 1].info.last_offset + 1;
        wait_remote_end(&e, end3);
        char *prefix = st_tier_part_prefix(topic, id, 3);
        char *want = st_strprintf("%s/%s/3", topic, id);
        assert_string_equal(prefix, want);
        free(want);
        char *lp = st_strprintf("%s/", prefix), *keys[64];
        size_t n = list_keys(&e, lp, keys);
        assert_int_equal(n, 4 * 3 + 1);
        for (size_t i = 0; i < n; i++) { /* no piece over 250 bytes */
            for (char *p = keys[i], *q; *p; p = q + (*q != 0)) {
                q = strchr(p, '/');
                if (!q) q = p + strlen(p);
                assert_true(q - p <= 250);
            }
        }
        read_everything(&e, end3);
        if (len == 249) {
            for (size_t i = 0; i < n; i++) free(keys[i]);
            free(lp);
            free(prefix);
            env_teardown(&e);
            continue;
        }
        /* move the partition to the old layout, as an older broker left it */
        env_close(&e);
        char *old = st_strprintf("%s-%s/3/", topic, id);
        for (size_t i = 0; i < n; i++) {
            st_os_request_t g = {.op = ST_OS_GET, .key = keys[i], .offset = 0, .length = ST_OS_TO_END};
            g.sink.kind = ST_OS_SINK_ALLOC;
            st_os_result_t *r = st_os_run(e.os, &g);
            assert_int_equal(r->status, ST_OK);
            char *nk = st_strprintf("%s%s", old, keys[i] + strlen(lp));
            st_os_request_t pq = {.op = ST_OS_PUT, .key = nk};
            pq.src.kind = ST_OS_SRC_MEM;
            pq.src.data = r->data;
            pq.src.length = r->length;
            st_os_result_t *w = st_os_run(e.os, &pq);
            assert_int_equal(w->status, ST_OK);
            st_os_result_free(w);
            st_os_result_free(r);
            st_os_request_t dq = {.op = ST_OS_DELETE, .key = keys[i]};
            w = st_os_run(e.os, &dq);
            assert_int_equal(w->status, ST_OK);
            st_os_result_free(w);
            free(nk);
            free(keys[i]);
        }
        char cache[300];
        snprintf(cache, sizeof cache, "%s/remote-manifest.json", e.root);
        unlink(cache);
        open_tier(&e, 64 << 20);
        e.offered = NSEGS;
        open_part(&e, &ret);
        st_tier_status_t s;
        st_tier_part_status(e.part, &s);
        assert_int_equal(s.remote_end, end3); /* found under the old layout */
        wait_remote_end(&e, end);           /* and new uploads go there too */
        assert_int_equal(list_keys(&e, lp, keys), 0);
        n = list_keys(&e, old, keys);
        assert_int_equal(n, 4 * NSEGS + 1);
        for (size_t i = 0; i < n; i++) free(keys[i]);
        read_everything(&e, end);
        free(old);
        free(lp);
        free(prefix);
        env_teardown(&e);
    }
}

/* Wait (on the change callback) until the remote end is end. */
static void wait_end_event(env_t *e, int64_t end) {
    int64_t deadline = st_mono_ms() + EVENT_WAIT_MS;
    pthread_mutex_lock(&e->lock);
    while (__atomic_load_n(&e->remote_end, __ATOMIC_ACQUIRE) != end && st_mono_ms() < deadline)
        st_cond_wait_ms(&e->cond, &e->lock, deadline - st_mono_ms());
    pthread_mutex_unlock(&e->lock);
    assert_int_equal(__atomic_load_n(&e->remote_end, __ATOMIC_ACQUIRE), end);
}

/*
 * A segment whose upload keeps failing is backed off exponentially
 * (remote.log.manager.task.retry.backoff.ms 100, .max.ms 400, no jitter,
 * under a task interval of 20 ms), the status and the status file say so,
 * and each failed attempt's objects go at once, so the bucket never holds
 * more than one attempt's.  It was tried again every task interval, each
 * attempt leaving its objects behind.  Here the segment's .log goes up and
 * its .index cannot be read; once it can, the segment goes up after its
 * wait and the state is gone.
 */
static void test_upload_backoff(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_destroy(e.tier);
    char cache[300], err[256];
    snprintf(cache, sizeof cache, "%s/cache", e.root);
    st_tier_config_t tc = {.task_interval_ms = 20, .copy_threads = 1, .chunk_bytes = 65536,
                           .cache_dir = cache, .cache_bytes = 64 << 20, .readahead_chunks = 2,
                           .index_cache_bytes = 1 << 20, .retry_backoff_ms = 100,
                           .retry_backoff_max_ms = 400, .retry_jitter = 0};
    assert_int_equal(st_tier_new(&tc, e.os, &e.tier, err, sizeof err), ST_OK);
    st_tier_start(e.tier);
    char hidden[4200];
    snprintf(hidden, sizeof hidden, "%s.hidden", e.segs[0].info.index_path);
    assert_int_equal(rename(e.segs[0].info.index_path, hidden), 0);
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);

    /* the manager asks for closed segments once per attempt: wait for 7 */
    int64_t deadline = st_mono_ms() + EVENT_WAIT_MS;
    pthread_mutex_lock(&e.lock);
    while (e.nasked < 7 && st_mono_ms() < deadline) st_cond_wait_ms(&e.cond, &e.lock, 1000);
    int64_t asked[7];
    memcpy(asked, e.asked_us, sizeof asked);
    pthread_mutex_unlock(&e.lock);
    static const int64_t want_ms[] = {100, 200, 400, 400, 400, 400};
    int64_t gaps[6];
    for (int i = 0; i < 6; i++) {
        gaps[i] = (asked[i + 1] - asked[i]) / 1000;
        print_message("attempt %d after %lld ms (back-off %lld ms)\n", i + 2, (long long)gaps[i],
                      (long long)want_ms[i]);
    }
    char *keys[64];
    size_t n = list_keys(&e, "orders-AAAAAAAAAAAAAAAAAAAAAA/3/", keys);
    print_message("%zu object(s) in the bucket after 7 attempts\n", n);
    for (int i = 0; i < 6; i++) {
        assert_true(gaps[i] >= want_ms[i] * 9 / 10);
        assert_true(gaps[i] <= want_ms[i] + 200);
    }
    /* at most one attempt's objects (the one running, if any) */
    assert_true(n <= 4);
    for (size_t i = 0; i < n; i++) free(keys[i]);
    st_tier_status_t s;
    st_tier_part_status(e.part, &s);
    assert_int_equal(s.failing_base_offset, 0);
    assert_true(s.failures >= 6);
    assert_true(s.retry_in_ms <= 400);
    assert_int_equal(s.remote_end, 0);
    /* the status file names the segment, the count and the cause */
    char path[400], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/remote-upload-status.json", e.root);
    assert_int_equal(st_read_file(path, &text, &len), ST_OK);
    assert_non_null(strstr(text, "\"segment_base_offset\":0"));
    assert_non_null(strstr(text, "\"failures\":"));
    assert_non_null(strstr(text, e.segs[0].info.index_path));
    free(text);
    char *line = st_tier_upload_status_describe(e.root, st_now_ms());
    assert_non_null(line);
    print_message("strata tiering status would say: %s\n", line);
    assert_non_null(strstr(line, "upload of segment 0-399 failed"));
    assert_non_null(strstr(line, "backing off: next attempt"));
    assert_non_null(strstr(line, e.segs[0].info.index_path));
    free(line);

    /* the index is back: the segment goes up after its wait, then the rest */
    assert_int_equal(rename(hidden, e.segs[0].info.index_path), 0);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_end_event(&e, end);
    st_tier_part_status(e.part, &s);
    assert_int_equal(s.failing_base_offset, -1);
    assert_int_equal(s.failures, 0);
    assert_int_equal(access(path, F_OK), -1); /* the status file is gone */
    assert_null(st_tier_upload_status_describe(e.root, st_now_ms()));
    if (st_tier__part_wait_idle(e.part, EVENT_WAIT_MS)) fail_msg("the job did not end");
    n = list_keys(&e, "orders-AAAAAAAAAAAAAAAAAAAAAA/3/", keys);
    assert_int_equal(n, 4 * NSEGS + 1); /* no orphan */
    for (size_t i = 0; i < n; i++) free(keys[i]);
    env_teardown(&e);
}

/* ---- tiering switched off and on (KIP-950) --------------------------------- */

static int exists_in_root(env_t *e, const char *name) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", e->root, name);
    return access(path, F_OK) == 0;
}

/* Read offset from the bucket: ST_OK with whole batches holding it. */
static void check_readable(env_t *e, int64_t offset) {
    uint8_t *data;
    int32_t len;
    assert_int_equal(read_remote(e, offset, 4096, &data, &len), ST_OK);
    check_batches(data, len, offset);
    free(data);
}

/*
 * ON -> READ_ONLY: segments closed meanwhile stay local, the bucket is
 * still read; -> ON: uploads resume at the remote end; -> DELETE: the
 * remote part is not served at once, the marker records the deletion owed
 * and the leader's job deletes every object and the manifest; a restart
 * (a new manager) of a partition still owing it, as a follower, deletes
 * nothing, then as the leader deletes; -> ON: tiering starts from the
 * local log again.
 */
static void test_switched_off_and_on(void **state) {
    (void)state;
    env_t e;
    int64_t end2 = two_uploaded(&e), end4 = e.segs[3].info.last_offset + 1;
    assert_int_equal(bucket_objects(&e), 4 * 2 + 1);

    assert_int_equal(st_tier_part_set_mode(e.part, ST_TIER_READ_ONLY), ST_TIER_ON);
    e.offered = 4;
    wait_remote_end(&e, end2);
    assert_int_equal(bucket_objects(&e), 4 * 2 + 1);
    check_readable(&e, 5);

    assert_int_equal(st_tier_part_set_mode(e.part, ST_TIER_ON), ST_TIER_READ_ONLY);
    wait_remote_end(&e, end4);
    assert_int_equal(bucket_objects(&e), 4 * 4 + 1);

    /* off: as a follower first, so that the deletion is seen owed */
    st_tier_part_set_leader(e.part, 0, 0);
    assert_int_equal(st_tier_part_set_mode(e.part, ST_TIER_DELETE), ST_TIER_ON);
    assert_int_equal(__atomic_load_n(&e.remote_start, __ATOMIC_ACQUIRE),
                     __atomic_load_n(&e.remote_end, __ATOMIC_ACQUIRE));
    st_tier_read_t r;
    assert_int_equal(st_tier_read(e.part, 5, 1000, ST_TIER_READ_MIN_ONE, &r, wake_cb, &e),
                     ST_E_OFFSET_OUT_OF_RANGE);
    assert_true(exists_in_root(&e, ST_TIER_DELETE_PENDING_FILE));
    assert_false(exists_in_root(&e, "remote-manifest.json"));
    run_job(&e);
    assert_int_equal(bucket_objects(&e), 4 * 4 + 1); /* a follower deletes nothing */

    /* a restart owing the deletion: nothing is read, the leader deletes */
    env_close(&e);
    open_tier(&e, 64 << 20);
    e.mode = ST_TIER_DELETE;
    open_part(&e, &keep_all);
    st_tier_status_t s;
    st_tier_part_status(e.part, &s);
    assert_int_equal(s.mode, ST_TIER_DELETE);
    assert_true(s.delete_pending);
    assert_int_equal(s.remote_end, s.remote_start);
    run_job(&e);
    assert_int_equal(bucket_objects(&e), 0);
    assert_false(exists_in_root(&e, ST_TIER_DELETE_PENDING_FILE));
    st_tier_part_status(e.part, &s);
    assert_false(s.delete_pending);

    /* on again: from the local log, which now starts at segment 2 */
    e.offered = NSEGS;
    for (int i = 0; i < 2; i++) e.segs[i].info.base_offset = -1; /* gone locally */
    assert_int_equal(st_tier_part_set_mode(e.part, ST_TIER_ON), ST_TIER_DELETE);
    wait_remote_end(&e, e.segs[NSEGS - 1].info.last_offset + 1);
    st_tier_part_status(e.part, &s);
    assert_int_equal(s.remote_start, e.segs[2].info.base_offset);
    assert_int_equal(bucket_objects(&e), 4 * (NSEGS - 2) + 1);
    check_readable(&e, e.segs[2].info.base_offset);
    env_teardown(&e);
}

/* Back on before the deletion was made: a follower forgets it (the
 * leader owns the bucket); the leader deletes first, then starts afresh. */
static void test_on_again_before_deleted(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    st_tier_retention_t ret = {-1, -1};
    open_part(&e, &ret);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);

    st_tier_part_set_leader(e.part, 0, 0);
    st_tier_part_set_mode(e.part, ST_TIER_DELETE);
    assert_true(exists_in_root(&e, ST_TIER_DELETE_PENDING_FILE));
    st_tier_part_set_mode(e.part, ST_TIER_ON);
    assert_false(exists_in_root(&e, ST_TIER_DELETE_PENDING_FILE));
    st_tier_part_set_leader(e.part, 1, 1); /* reads the bucket's manifest again */
    wait_remote_end(&e, end);
    assert_int_equal(bucket_objects(&e), 4 * NSEGS + 1);
    check_readable(&e, 5);

    /* the leader: its job deletes the old remote log, then uploads anew
     * (the fake's segments all, from 0 again: new ids) */
    st_tier_part_set_mode(e.part, ST_TIER_DELETE);
    st_tier_part_set_mode(e.part, ST_TIER_ON);
    wait_remote_end(&e, end);
    assert_int_equal(bucket_objects(&e), 4 * NSEGS + 1);
    st_tier_stats_t st;
    st_tier_get_stats(e.tier, &st);
    assert_int_equal(st.segments_uploaded, 2 * NSEGS);
    assert_false(exists_in_root(&e, ST_TIER_DELETE_PENDING_FILE));
    check_readable(&e, end - 1);
    env_teardown(&e);
}

/* Uploads off, then local retention deletes segments the bucket never got:
 * the local log starting above the remote end moves the log start there
 * and the remote segments go (Kafka's log start offset); uploads on again
 * continue from the local log without a hole. */
static void test_read_only_cut_off(void **state) {
    (void)state;
    env_t e;
    int64_t end2 = two_uploaded(&e);
    st_tier_part_set_mode(e.part, ST_TIER_READ_ONLY);
    /* the local log still starts inside the remote part: nothing goes */
    e.local_start = e.segs[1].info.base_offset;
    e.offered = NSEGS;
    wait_remote_end(&e, end2);
    assert_int_equal(bucket_objects(&e), 4 * 2 + 1);
    /* segments 0-2 went locally, 2 never uploaded */
    e.local_start = e.segs[3].info.base_offset;
    for (int i = 0; i < 3; i++) e.segs[i].info.base_offset = -1;
    run_job(&e);
    st_tier_status_t s;
    st_tier_part_status(e.part, &s);
    assert_int_equal(s.remote_segments, 0);
    assert_int_equal(s.remote_start, s.remote_end);
    assert_int_equal(bucket_objects(&e), 1); /* the manifest alone */
    st_tier_part_set_mode(e.part, ST_TIER_ON);
    run_job(&e);
    st_tier_part_status(e.part, &s);
    assert_int_equal(s.remote_start, e.local_start);
    assert_int_equal(s.remote_end, e.segs[NSEGS - 1].info.last_offset + 1);
    env_teardown(&e);
}

/* ---- the topic's descriptor and what a restore reads --------------------------- */

static char *bucket_text(env_t *e, const char *key, st_err_t *status) {
    st_os_request_t rq = {.op = ST_OS_GET, .key = key, .length = ST_OS_TO_END};
    rq.sink.kind = ST_OS_SINK_ALLOC;
    st_os_result_t *r = st_os_run(e->os, &rq);
    *status = r->status;
    char *text = r->status ? NULL : st_strprintf("%.*s", (int)r->length, (const char *)r->data);
    st_os_result_free(r);
    return text;
}

static void test_topic_descriptor(void **state) {
    (void)state;
    char *names[] = {"max.message.bytes", "retention.ms"}, *values[] = {"2000000", "-1"};
    st_tier_descriptor_t d = {"hist", "CCCCCCCCCCCCCCCCCCCCCC", 3, 2, names, values, 2}, back;
    char *text = st_tier_descriptor_encode(&d), why[256];
    assert_int_equal(st_tier_descriptor_decode(text, strlen(text), &back, why, sizeof why), ST_OK);
    assert_string_equal(back.topic, "hist");
    assert_string_equal(back.topic_id, "CCCCCCCCCCCCCCCCCCCCCC");
    assert_int_equal(back.partitions, 3);
    assert_int_equal(back.replication_factor, 2);
    assert_int_equal(back.nconfigs, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(back.config_names[i], names[i]);
        assert_string_equal(back.config_values[i], values[i]);
    }
    st_tier_descriptor_fini(&back);
    /* hostile bytes are refused, saying which field */
    static const char *bad[] = {
        "", "[]", "{\"version\":2}",
        "{\"version\":1,\"topic\":\"\",\"topic_id\":\"CCCCCCCCCCCCCCCCCCCCCC\",\"partitions\":1,"
        "\"replication_factor\":1,\"configs\":{}}",
        "{\"version\":1,\"topic\":\"t\",\"topic_id\":\"short\",\"partitions\":1,"
        "\"replication_factor\":1,\"configs\":{}}",
        "{\"version\":1,\"topic\":\"t\",\"topic_id\":\"CCCCCCCCCCCCCCCCCCCCCC\",\"partitions\":0,"
        "\"replication_factor\":1,\"configs\":{}}",
        "{\"version\":1,\"topic\":\"t\",\"topic_id\":\"CCCCCCCCCCCCCCCCCCCCCC\",\"partitions\":1,"
        "\"replication_factor\":0,\"configs\":{}}",
        "{\"version\":1,\"topic\":\"t\",\"topic_id\":\"CCCCCCCCCCCCCCCCCCCCCC\",\"partitions\":1,"
        "\"replication_factor\":1,\"configs\":{\"retention.ms\":5}}",
    };
    for (size_t i = 0; i < ST_ARRAY_SIZE(bad); i++) {
        why[0] = 0;
        assert_int_equal(st_tier_descriptor_decode(bad[i], strlen(bad[i]), &back, why, sizeof why),
                         ST_E_CORRUPT);
        assert_true(why[0] != 0);
    }

    /* partition 0's leader keeps it in the bucket, beside the partitions */
    env_t e;
    env_setup(&e);
    st_tier_retention_t ret = {-1, -1};
    st_tier_part_ops_t ops = {closed_cb, changed_cb, local_bytes_cb, NULL, NULL, release_cb, &e};
    char err[256];
    assert_int_equal(st_tier_part_open(e.tier, "hist", "CCCCCCCCCCCCCCCCCCCCCC", 0, NULL, ST_TIER_ON,
                                       &ops, &ret, &e.part, err, sizeof err),
                     ST_OK);
    st_tier_part_set_descriptor(e.part, text);
    st_tier_part_set_leader(e.part, 1, 4);
    int64_t end = e.segs[NSEGS - 1].info.last_offset + 1;
    wait_remote_end(&e, end);
    st_err_t st;
    char *got = bucket_text(&e, "hist-CCCCCCCCCCCCCCCCCCCCCC/" ST_TIER_TOPIC_DESCRIPTOR, &st);
    assert_int_equal(st, ST_OK);
    assert_string_equal(got, text);
    free(got);
    /* the same text again writes nothing; a change is written */
    st_tier_stats_t s0, s1;
    st_tier_get_stats(e.tier, &s0);
    st_tier_part_set_descriptor(e.part, text);
    run_job(&e);
    st_tier_get_stats(e.tier, &s1);
    assert_int_equal(s1.upload_requests, s0.upload_requests);
    d.partitions = 4;
    char *text4 = st_tier_descriptor_encode(&d);
    st_tier_part_set_descriptor(e.part, text4);
    run_job(&e);
    got = bucket_text(&e, "hist-CCCCCCCCCCCCCCCCCCCCCC/" ST_TIER_TOPIC_DESCRIPTOR, &st);
    assert_string_equal(got, text4);
    free(got);

    /* what a restore reads of the manifest: every object, the .log's size,
     * the highest epoch; and the manifest as another topic's */
    char *man = bucket_text(&e, "hist-CCCCCCCCCCCCCCCCCCCCCC/0/manifest.json", &st);
    assert_int_equal(st, ST_OK);
    st_tier_manifest_objects_t o;
    assert_int_equal(st_tier_manifest_objects("hist-CCCCCCCCCCCCCCCCCCCCCC/0", man, strlen(man), &o,
                                              why, sizeof why), ST_OK);
    assert_string_equal(o.topic, "hist");
    assert_string_equal(o.topic_id, "CCCCCCCCCCCCCCCCCCCCCC");
    assert_int_equal(o.partition, 0);
    assert_int_equal(o.max_leader_epoch, 4); /* written at 4; the segments span epoch 0 */
    assert_int_equal(o.summary.segments, NSEGS);
    assert_int_equal(o.summary.end, end);
    assert_int_equal(o.nkeys, 4 * NSEGS);
    for (int i = 0; i < o.nkeys; i++) {
        st_os_request_t hq = {.op = ST_OS_HEAD, .key = o.keys[i]};
        st_os_result_t *r = st_os_run(e.os, &hq);
        assert_int_equal(r->status, ST_OK);
        if (o.sizes[i] >= 0) assert_int_equal((int64_t)r->object_size, o.sizes[i]);
        st_os_result_free(r);
    }
    assert_int_equal(o.sizes[0], e.segs[0].info.size_bytes);
    st_tier_manifest_objects_fini(&o);
    char *moved = st_tier_manifest_retarget(man, strlen(man), "hist-copy", "DDDDDDDDDDDDDDDDDDDDDD",
                                            0, why, sizeof why);
    assert_non_null(moved);
    assert_int_equal(st_tier_manifest_objects("hist-copy-DDDDDDDDDDDDDDDDDDDDDD/0", moved,
                                              strlen(moved), &o, why, sizeof why), ST_OK);
    assert_string_equal(o.topic, "hist-copy");
    assert_string_equal(o.topic_id, "DDDDDDDDDDDDDDDDDDDDDD");
    assert_int_equal(o.summary.end, end);
    assert_true(!strncmp(o.keys[0], "hist-copy-DDDDDDDDDDDDDDDDDDDDDD/0/", 35));
    st_tier_manifest_objects_fini(&o);
    free(moved);
    assert_null(st_tier_manifest_retarget("{", 1, "x", "DDDDDDDDDDDDDDDDDDDDDD", 0, why, sizeof why));
    free(man);

    /* the topic deleted: the descriptor goes with it */
    st_tier_part_t *held = st_tier_part_keep(e.part);
    st_tier_part_close(e.part, 1);
    e.part = NULL;
    assert_int_equal(st_tier__part_wait_idle(held, EVENT_WAIT_MS), 0);
    st_tier_part_release(held);
    got = bucket_text(&e, "hist-CCCCCCCCCCCCCCCCCCCCCC/" ST_TIER_TOPIC_DESCRIPTOR, &st);
    assert_int_equal(st, ST_E_NOT_FOUND);
    assert_null(got);
    free(text4);
    free(text);
    env_teardown(&e);
}

/* Requests of the kinds that change a bucket, made through os. */
static uint64_t os_writes(st_os_t *os) {
    static const st_os_op_t kinds[] = {ST_OS_PUT, ST_OS_DELETE, ST_OS_DELETE_BATCH, ST_OS_COPY};
    uint64_t n = 0;
    for (size_t i = 0; i < ST_ARRAY_SIZE(kinds); i++) {
        st_os_op_stats_t s;
        st_os_get_op_stats(os, kinds[i], &s);
        n += st_histo_count(&s.time);
    }
    return n;
}

/* The settings of a file store at root. */
static void file_store_config(st_os_config_t *oc, const char *root) {
    st_os_config_init(oc);
    free(oc->backend);
    oc->backend = st_strdup("file");
    free(oc->file_root);
    oc->file_root = st_strdup(root);
}

/* st_os_config_at: a read replica's source location, parsed into the
 * store's settings (bucket and prefix, or root), the rest kept. */
static void test_store_location(void **state) {
    (void)state;
    st_os_config_t base, at;
    st_os_config_init(&base);
    free(base.backend);
    base.backend = st_strdup("s3");
    free(base.s3_endpoint);
    base.s3_endpoint = st_strdup("http://127.0.0.1:9000");
    free(base.s3_bucket);
    base.s3_bucket = st_strdup("mine");
    char err[256];
    assert_int_equal(st_os_config_at(&base, "s3://theirs/cluster-a/", &at, err, sizeof err), ST_OK);
    assert_string_equal(at.s3_bucket, "theirs");
    assert_string_equal(at.s3_prefix, "cluster-a/");
    assert_string_equal(at.s3_endpoint, "http://127.0.0.1:9000");
    st_os_config_fini(&at);
    assert_int_equal(st_os_config_at(&base, "s3://theirs", &at, err, sizeof err), ST_OK);
    assert_string_equal(at.s3_prefix, "");
    st_os_config_fini(&at);
    static const char *bad[] = {"file:///tmp/x", "s3://", "s3:///prefix", "s3://a/x",
                                "s3://theirs//abs", "theirs/x"};
    for (size_t i = 0; i < ST_ARRAY_SIZE(bad); i++) {
        err[0] = 0;
        assert_int_equal(st_os_config_at(&base, bad[i], &at, err, sizeof err), ST_E_INVAL);
        assert_non_null(strstr(err, bad[i])); /* the message names what was given */
    }
    free(base.backend);
    base.backend = st_strdup("file");
    assert_int_equal(st_os_config_at(&base, "file:///srv/a/bucket", &at, err, sizeof err), ST_OK);
    assert_string_equal(at.file_root, "/srv/a/bucket");
    assert_false(at.file_create_root);
    st_os_config_fini(&at);
    assert_int_equal(st_os_config_at(&base, "file://relative", &at, err, sizeof err), ST_E_INVAL);
    st_os_config_fini(&base);
}

static uint64_t os_requests(st_os_t *os) {
    st_os_stats_t st;
    st_os_get_stats(os, &st);
    return st.requests;
}

/* The snapshot of offset: ST_OK and its bytes equal want, or the error. */
static st_err_t snapshot_is(env_t *e, int64_t offset, const char *want, char *err, size_t errlen) {
    void *data = NULL;
    size_t len = 0;
    st_err_t rc = st_tier_part_producer_snapshot(e->part, offset, &data, &len, err, errlen);
    if (!rc) {
        assert_int_equal(len, strlen(want));
        assert_memory_equal(data, want, len);
    }
    free(data);
    return rc;
}

/* The producer snapshot kept with the segment that ends below an offset:
 * one GET of it when the manifest installed names it (the bucket's
 * manifest is not read again); otherwise the bucket's manifest is read,
 * and the answer is ST_E_NOT_FOUND, saying why, where no segment ends or
 * the object named is gone. */
static void test_producer_snapshot(void **state) {
    (void)state;
    env_t e;
    env_setup(&e);
    for (int k = 0; k < NSEGS; k++) {
        st_tier_segment_t *i = &e.segs[k].info;
        snprintf(i->snapshot_path, sizeof i->snapshot_path, "%s/%020lld.snapshot", e.root,
                 (long long)i->base_offset);
        char text[32];
        int n = snprintf(text, sizeof text, "producers below %lld", (long long)i->last_offset + 1);
        assert_int_equal(st_write_file_atomic(i->snapshot_path, text, (size_t)n), ST_OK);
    }
    e.offered = 2;
    open_part(&e, &keep_all);
    int64_t end1 = e.segs[0].info.last_offset + 1, end2 = e.segs[1].info.last_offset + 1;
    wait_remote_end(&e, end2);
    char err[256], want[32];
    uint64_t before = os_requests(e.os);
    snprintf(want, sizeof want, "producers below %lld", (long long)end2);
    assert_int_equal(snapshot_is(&e, end2, want, err, sizeof err), ST_OK);
    snprintf(want, sizeof want, "producers below %lld", (long long)end1);
    assert_int_equal(snapshot_is(&e, end1, want, err, sizeof err), ST_OK);
    assert_int_equal(os_requests(e.os) - before, 2); /* the two snapshots alone */

    before = os_requests(e.os);
    assert_int_equal(snapshot_is(&e, end2 - 1, "", err, sizeof err), ST_E_NOT_FOUND);
    assert_non_null(strstr(err, "no segment of the bucket ends at"));
    assert_int_equal(os_requests(e.os) - before, 1); /* the bucket's manifest */

    /* the object named is gone: the bucket's manifest is read and names it
     * again, whose GET fails too (three requests) */
    st_manifest_t m;
    bucket_manifest_full(&e, &m);
    char *gone = st_tier__object_key("orders-AAAAAAAAAAAAAAAAAAAAAA/3", &m.segs[1], "snapshot");
    st_tier__manifest_fini(&m);
    st_os_request_t dq = {.op = ST_OS_DELETE, .key = gone};
    st_os_result_t *dres = st_os_run(e.os, &dq);
    assert_int_equal(dres->status, ST_OK);
    st_os_result_free(dres);
    free(gone);
    before = os_requests(e.os);
    assert_int_equal(snapshot_is(&e, end2, "", err, sizeof err), ST_E_NOT_FOUND);
    assert_int_equal(os_requests(e.os) - before, 3);
    env_teardown(&e);
}

/* A read replica (ST_TIER_REPLICA): another manager (another cluster's
 * broker, with its own bucket and cache) leads a part of the partition
 * the source uploads, read from the source's bucket through a store handle
 * of its own.  It serves what the source's manifest names and follows it
 * as uploads and DeleteRecords move it, one job at a time; it refuses
 * DeleteRecords, never asks for closed segments and writes nothing to
 * either bucket, not even when closed with delete_remote. */
static void test_read_replica(void **state) {
    (void)state;
    env_t e, r;
    int64_t end2 = two_uploaded(&e), end4 = e.segs[3].info.last_offset + 1;

    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.cond, NULL);
    snprintf(r.root, sizeof r.root, "%s/replica", e.root);
    assert_int_equal(mkdir(r.root, 0755), 0);
    char path[300], location[310], err[256];
    snprintf(path, sizeof path, "%s/bucket", r.root);
    st_os_config_t oc;
    file_store_config(&oc, path);
    assert_int_equal(st_os_new(&oc, &r.os, err, sizeof err), ST_OK);
    next_store_config = &oc;
    open_tier(&r, 64 << 20);
    next_store_config = NULL;
    st_os_config_fini(&oc); /* the manager took a copy */
    st_tier_part_ops_t ops = {closed_cb, changed_cb, local_bytes_cb, local_start_cb, NULL,
                              release_cb, &r};
    /* a location that is not one of this store's kind */
    snprintf(location, sizeof location, "s3://bucket/%s/bucket", e.root);
    assert_int_equal(st_tier_part_open_replica(r.tier, location, "orders",
                                               "AAAAAAAAAAAAAAAAAAAAAA", 3, &ops, &r.part, err,
                                               sizeof err),
                     ST_E_INVAL);
    assert_non_null(strstr(err, "must start with file://"));
    snprintf(location, sizeof location, "file://%s/bucket", e.root);
    assert_int_equal(st_tier_part_open_replica(r.tier, location, "orders",
                                               "AAAAAAAAAAAAAAAAAAAAAA", 3, &ops, &r.part, err,
                                               sizeof err),
                     ST_OK);
    st_tier_part_set_leader(r.part, 1, 0);
    st_tier_status_t s;
    st_tier_part_status(r.part, &s);
    assert_int_equal(s.mode, ST_TIER_REPLICA);
    assert_int_equal(s.remote_end, end2); /* read at open */
    run_job(&r); /* the same manifest: nothing to tell (the broker read the status at open) */
    assert_int_equal(__atomic_load_n(&r.changes, __ATOMIC_ACQUIRE), 0);
    check_readable(&r, 5);
    check_readable(&r, end2 - 1);

    /* the source uploads two more segments: the replica's next job sees them */
    e.offered = 4;
    wait_remote_end(&e, end4);
    st_tier_part_status(r.part, &s);
    assert_int_equal(s.remote_end, end2);
    wait_remote_end(&r, end4);
    assert_int_equal(__atomic_load_n(&r.remote_end, __ATOMIC_ACQUIRE), end4);
    check_readable(&r, end4 - 1);

    /* a job with nothing new installs nothing */
    int changes = __atomic_load_n(&r.changes, __ATOMIC_ACQUIRE);
    run_job(&r);
    assert_int_equal(__atomic_load_n(&r.changes, __ATOMIC_ACQUIRE), changes);

    /* DeleteRecords: refused on the replica, followed when the source moves */
    assert_int_equal(st_tier_delete_records(r.part, e.segs[1].info.base_offset), ST_E_INVAL);
    assert_int_equal(st_tier_delete_records(e.part, e.segs[1].info.base_offset), ST_OK);
    run_job(&e);
    run_job(&r);
    st_tier_part_status(r.part, &s);
    assert_int_equal(s.remote_start, e.segs[1].info.base_offset);
    assert_int_equal(__atomic_load_n(&r.remote_start, __ATOMIC_ACQUIRE),
                     e.segs[1].info.base_offset);
    check_readable(&r, e.segs[1].info.base_offset);

    /* closed as a deleted topic is: the source's objects stay */
    int64_t objects = bucket_objects(&e);
    assert_int_equal(objects, 4 * 3 + 1);
    st_tier_part_t *held = st_tier_part_keep(r.part);
    st_tier_part_close(r.part, 1);
    r.part = NULL;
    assert_int_equal(st_tier__part_wait_idle(held, EVENT_WAIT_MS), 0); /* its closing job ran */
    st_tier_part_release(held);
    st_os_t *source = st_tier__source_store(r.tier, location, err, sizeof err);
    assert_non_null(source);
    assert_int_equal(os_writes(source), 0);
    st_tier_destroy(r.tier); /* closes source */
    assert_int_equal(bucket_objects(&e), objects);
    assert_int_equal(os_writes(r.os), 0);
    st_os_stats_t own;
    st_os_get_stats(r.os, &own);
    assert_int_equal(own.requests, 0); /* everything went to the source's bucket */
    assert_int_equal(r.nasked, 0);
    st_os_destroy(r.os);
    pthread_mutex_destroy(&r.lock);
    pthread_cond_destroy(&r.cond);
    check_readable(&e, end4 - 1);
    env_teardown(&e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest_round_trip),
        cmocka_unit_test(test_topic_descriptor),
        cmocka_unit_test(test_upload_and_read),
        cmocka_unit_test(test_topic_accounts),
        cmocka_unit_test(test_restart_and_orphans),
        cmocka_unit_test(test_retention_and_delete_records),
        cmocka_unit_test(test_delete_records_while_retention_decides),
        cmocka_unit_test(test_delete_records_after_retention_installed),
        cmocka_unit_test(test_small_cache_evicts),
        cmocka_unit_test(test_readers_apart_full_disk),
        cmocka_unit_test(test_memory_chunks),
        cmocka_unit_test(test_yield_to_live),
        cmocka_unit_test(test_fetch_quota_throttles),
        cmocka_unit_test(test_fetch_quota_huge),
        cmocka_unit_test(test_copy_quota_shared),
        cmocka_unit_test(test_copy_quota_stop),
        cmocka_unit_test(test_long_topic_names),
        cmocka_unit_test(test_upload_backoff),
        cmocka_unit_test(test_manifest_fenced_by_epoch),
        cmocka_unit_test(test_manifest_race_with_newer_leader),
        cmocka_unit_test(test_switched_off_and_on),
        cmocka_unit_test(test_on_again_before_deleted),
        cmocka_unit_test(test_read_only_cut_off),
        cmocka_unit_test(test_store_location),
        cmocka_unit_test(test_read_replica),
        cmocka_unit_test(test_producer_snapshot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

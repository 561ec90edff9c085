/*
 * test_netclient.c - unit tests of the outbound client's bookkeeping
 * (broker/net/netclient_int.h) with no sockets: requests queued and
 * pipelined in order, answers matched by correlation id and fed in any
 * split, the cap on bytes in flight, deadlines, a lost connection, and
 * the peer's bad bytes (oversized, undersized, never-sent or out-of-order
 * correlation ids, truncated headers).  Every callback must run exactly
 * once.
 */
#include "unit.h"

#include "netclient_int.h"

typedef struct seen {
    int calls;
    st_err_t err;
    int32_t corr;
    int16_t key;
    size_t body_len;
    uint8_t body0;
    char why[160];
} seen_t;

static int order_log[4096];
static int norder;

static void on_done(st_netclient_t *c, const st_netclient_resp_t *resp, void *arg) {
    (void)c;
    seen_t *s = arg;
    s->calls++;
    s->err = resp->err;
    s->corr = resp->correlation_id;
    s->key = resp->api->key;
    s->body_len = resp->body_len;
    s->body0 = resp->body_len ? resp->body[0] : 0;
    snprintf(s->why, sizeof s->why, "%s", resp->why ? resp->why : "");
    if (norder < (int)ST_ARRAY_SIZE(order_log)) order_log[norder++] = resp->correlation_id;
}

static st_net__req_t *api_versions_req(int32_t corr, int64_t deadline, seen_t *s) {
    st_api_versions_req_t body;
    st_schema_defaults(&st_api_versions_req_schema, &body);
    body.client_software_name = st_str("unit");
    body.client_software_version = st_str("1");
    st_net__req_t *r = NULL;
    assert_int_equal(st_net__req_new(st_api_lookup(ST_API_API_VERSIONS), 3, corr, st_str("t"),
                                     &body, deadline, on_done, s, &r),
                     ST_OK);
    return r;
}

static st_net__req_t *metadata_req(int version, int32_t corr, int64_t deadline, seen_t *s) {
    st_metadata_req_t body;
    st_schema_defaults(&st_metadata_req_schema, &body);
    st_net__req_t *r = NULL;
    assert_int_equal(st_net__req_new(st_api_lookup(ST_API_METADATA), version, corr, st_str("t"),
                                     &body, deadline, on_done, s, &r),
                     ST_OK);
    return r;
}

/* A response frame with its size: correlation id, an empty tag section
 * when flexible (header v1), then body bytes. */
static void put_response(st_buf_t *b, int32_t corr, int header_v1, const uint8_t *body, size_t n) {
    st_buf_put_i32(b, (int32_t)(4 + (header_v1 ? 1 : 0) + n));
    st_buf_put_i32(b, corr);
    if (header_v1) st_buf_put_uvarint(b, 0);
    st_buf_put(b, body, n);
}

/* The request bytes a wire has to write, checked as frames: size, key,
 * version, correlation id. */
static void check_out(st_net__wire_t *w, const int32_t *corrs, int n, int16_t key) {
    const uint8_t *p;
    size_t len = st_net__wire_out(w, &p);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        assert_true(off + 12 <= len);
        uint32_t size = st_be32_get(p + off);
        assert_int_equal((int16_t)st_be16_get(p + off + 4), key);
        assert_int_equal((int32_t)st_be32_get(p + off + 8), corrs[i]);
        off += 4 + size;
    }
    assert_int_equal(off, len);
    st_net__wire_wrote(w, len);
}

static void test_pipelined_in_order(void **state) {
    (void)state;
    enum { N = 1000 };
    st_net__wire_t w;
    st_net__wire_init(&w, NULL, INT64_MAX, 1 << 20);
    static seen_t s[N];
    memset(s, 0, sizeof s);
    norder = 0;
    static int32_t corrs[N];
    for (int i = 0; i < N; i++) {
        corrs[i] = 100 + i;
        st_net__wire_queue(&w, i % 2 ? api_versions_req(corrs[i], 1000, &s[i])
                                     : metadata_req(12, corrs[i], 1000, &s[i]));
    }
    assert_int_equal(w.nwaiting, N);
    assert_true(st_net__wire_fill(&w) > 0);
    assert_int_equal(w.ninflight, N);
    /* the frames go out in order, with the request header the API wants:
     * Metadata v12 (flexible) header v2, ApiVersions v3 header v2 */
    const uint8_t *p;
    size_t len = st_net__wire_out(&w, &p);
    size_t off = 0;
    for (int i = 0; i < N; i++) {
        uint32_t size = st_be32_get(p + off);
        assert_int_equal((int16_t)st_be16_get(p + off + 4), i % 2 ? ST_API_API_VERSIONS : ST_API_METADATA);
        assert_int_equal((int32_t)st_be32_get(p + off + 8), corrs[i]);
        /* client id "t" (classic string) then an empty tag section */
        assert_int_equal(st_be16_get(p + off + 12), 1);
        assert_int_equal(p[off + 14], 't');
        assert_int_equal(p[off + 15], 0);
        off += 4 + size;
    }
    assert_int_equal(off, len);
    st_net__wire_wrote(&w, len);
    assert_int_equal(st_net__wire_out(&w, &p), 0);

    /* The answers, fed in pieces of every size from 1 to 97 bytes.
     * ApiVersions answers with header v0 (KIP-511), Metadata v12 with v1. */
    st_buf_t in;
    st_buf_init(&in);
    for (int i = 0; i < N; i++) {
        uint8_t body[3] = {(uint8_t)i, 1, 2};
        put_response(&in, corrs[i], i % 2 == 0, body, sizeof body);
    }
    size_t pos = 0, step = 1;
    while (pos < in.len) {
        size_t k = ST_MIN(step, in.len - pos);
        char *why = NULL;
        assert_int_equal(st_net__wire_input(&w, in.data + pos, k, &why), ST_OK);
        assert_null(why);
        pos += k;
        step = step % 97 + 1;
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(s[i].calls, 1);
        assert_int_equal(s[i].err, ST_OK);
        assert_int_equal(s[i].corr, corrs[i]);
        assert_int_equal(s[i].body_len, 3);
        assert_int_equal(s[i].body0, (uint8_t)i);
        assert_int_equal(order_log[i], corrs[i]);
    }
    assert_int_equal(w.ninflight, 0);
    assert_int_equal(w.inflight_bytes, 0);
    assert_int_equal(w.answered, N);
    st_buf_fini(&in);
    st_net__wire_fini(&w);
}

static void test_inflight_bytes_cap(void **state) {
    (void)state;
    seen_t s[5] = {0};
    st_net__req_t *one = metadata_req(4, 1, 1000, &s[0]);
    int64_t size = (int64_t)one->size;
    st_net__wire_t w;
    st_net__wire_init(&w, NULL, 2 * size, 1 << 20); /* room for two */
    st_net__wire_queue(&w, one);
    for (int i = 1; i < 5; i++) st_net__wire_queue(&w, metadata_req(4, 1 + i, 1000, &s[i]));
    assert_int_equal(st_net__wire_fill(&w), (size_t)(2 * size));
    assert_int_equal(w.ninflight, 2);
    assert_int_equal(w.nwaiting, 3);
    int32_t first[] = {1, 2};
    check_out(&w, first, 2, ST_API_METADATA);
    assert_int_equal(st_net__wire_fill(&w), 0); /* still full */
    /* one answer makes room for one more */
    st_buf_t in;
    st_buf_init(&in);
    put_response(&in, 1, 0, (const uint8_t *)"x", 1);
    char *why = NULL;
    assert_int_equal(st_net__wire_input(&w, in.data, in.len, &why), ST_OK);
    assert_int_equal(s[0].calls, 1);
    assert_int_equal(st_net__wire_fill(&w), (size_t)size);
    int32_t third[] = {3};
    check_out(&w, third, 1, ST_API_METADATA);
    st_buf_fini(&in);
    /* a request larger than the cap still goes when nothing is in flight */
    st_net__wire_t w2;
    st_net__wire_init(&w2, NULL, 1, 1 << 20);
    seen_t t = {0};
    st_net__wire_queue(&w2, metadata_req(4, 9, 1000, &t));
    assert_true(st_net__wire_fill(&w2) > 1);
    st_net__wire_fini(&w2);
    assert_int_equal(t.calls, 1);
    assert_int_equal(t.err, ST_E_CANCELLED);
    st_net__wire_fini(&w);
    for (int i = 1; i < 5; i++) {
        assert_int_equal(s[i].calls, 1);
        assert_int_equal(s[i].err, ST_E_CANCELLED);
    }
}

/* Bad bytes from the peer: each one is refused with a reason and the
 * requests in flight are then failed by the reset, exactly once. */
static void bad_input_case(const uint8_t *bytes, size_t n, int nreq, const char *want_why) {
    st_net__wire_t w;
    st_net__wire_init(&w, NULL, INT64_MAX, 4096);
    seen_t s[3] = {0};
    for (int i = 0; i < nreq; i++) st_net__wire_queue(&w, metadata_req(12, 7 + i, 1000, &s[i]));
    st_net__wire_fill(&w);
    const uint8_t *p;
    st_net__wire_wrote(&w, st_net__wire_out(&w, &p));
    char *why = NULL;
    assert_int_equal(st_net__wire_input(&w, bytes, n, &why), ST_E_CORRUPT);
    assert_non_null(why);
    if (!strstr(why, want_why)) fail_msg("reason '%s' does not say '%s'", why, want_why);
    for (int i = 0; i < nreq; i++) assert_int_equal(s[i].calls, 0);
    st_net__wire_reset(&w, ST_E_CONNECTION_LOST, why, 0);
    for (int i = 0; i < nreq; i++) {
        assert_int_equal(s[i].calls, 1);
        assert_int_equal(s[i].err, ST_E_CONNECTION_LOST);
        assert_string_equal(s[i].why, why);
    }
    free(why);
    assert_int_equal(w.ninflight, 0);
    assert_null(w.rx);
    st_net__wire_fini(&w);
    for (int i = 0; i < nreq; i++) assert_int_equal(s[i].calls, 1);
}

static void test_bad_bytes(void **state) {
    (void)state;
    /* larger than max_response_bytes (4096): refused on the size alone */
    static const uint8_t big[] = {0x00, 0x00, 0x10, 0x01};
    bad_input_case(big, sizeof big, 2, "over the 4096-byte limit");
    /* negative and too small for a correlation id */
    static const uint8_t neg[] = {0xff, 0xff, 0xff, 0xfe};
    bad_input_case(neg, sizeof neg, 1, "too small");
    static const uint8_t three[] = {0x00, 0x00, 0x00, 0x03, 0, 0, 0};
    bad_input_case(three, sizeof three, 1, "too small");
    /* a correlation id never sent */
    static const uint8_t never[] = {0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x01, 0x00, 0x00};
    bad_input_case(never, sizeof never, 2, "never sent (expected 7)");
    /* the second request's answer first */
    static const uint8_t ahead[] = {0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x08, 0x00};
    bad_input_case(ahead, sizeof ahead, 2, "came before 7's");
    /* Metadata v12 answers with header v1: a frame of only the correlation
     * id lacks the tag section */
    static const uint8_t trunc[] = {0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x07};
    bad_input_case(trunc, sizeof trunc, 1, "truncated Metadata v12 response header");
    /* a tag section that claims more than the frame holds */
    static const uint8_t tags[] = {0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x07, 0x01, 0x00, 0x05};
    bad_input_case(tags, sizeof tags, 1, "truncated");
    /* bytes with nothing in flight */
    st_net__wire_t w;
    st_net__wire_init(&w, NULL, INT64_MAX, 4096);
    static const uint8_t any[] = {0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00};
    char *why = NULL;
    assert_int_equal(st_net__wire_input(&w, any, sizeof any, &why), ST_E_CORRUPT);
    assert_non_null(strstr(why, "no request in flight"));
    free(why);
    st_net__wire_fini(&w);
}

/* A partly read frame and unwritten bytes are dropped by a reset; the
 * waiting requests stay and go out on the next connection first. */
static void test_reset_and_deadlines(void **state) {
    (void)state;
    st_net__wire_t w;
    st_net__wire_init(&w, NULL, INT64_MAX, 1 << 20);
    seen_t s[6] = {0};
    st_net__wire_queue(&w, metadata_req(4, 1, 100, &s[0]));
    st_net__wire_queue(&w, metadata_req(4, 2, 500, &s[1]));
    st_net__wire_fill(&w);
    st_net__wire_queue(&w, metadata_req(4, 3, 150, &s[2])); /* waiting */
    st_net__wire_queue(&w, metadata_req(4, 4, 900, &s[3])); /* waiting */
    assert_int_equal(st_net__wire_next_deadline(&w), 100);
    /* half of an answer */
    static const uint8_t half[] = {0x00, 0x00, 0x00, 0x08, 0x00, 0x00};
    char *why = NULL;
    assert_int_equal(st_net__wire_input(&w, half, sizeof half, &why), ST_OK);
    /* nothing is due before 100 */
    assert_int_equal(st_net__wire_expire(&w, 99), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(s[i].calls, 0);
    /* at 200: request 1 (in flight) is due, request 3 (waiting) times out */
    assert_int_equal(st_net__wire_expire(&w, 200), 1);
    assert_int_equal(s[2].calls, 1);
    assert_int_equal(s[2].err, ST_E_REQUEST_TIMED_OUT);
    assert_int_equal(w.nwaiting, 1);
    /* the connection is closed for it: 1 timed out, 2 lost, 4 waits on */
    st_net__wire_reset(&w, ST_E_CONNECTION_LOST, "test", 200);
    assert_int_equal(s[0].err, ST_E_REQUEST_TIMED_OUT);
    assert_int_equal(s[1].err, ST_E_CONNECTION_LOST);
    assert_int_equal(s[0].calls + s[1].calls, 2);
    assert_int_equal(s[3].calls, 0);
    assert_int_equal(w.rxlen, 0);
    /* the next connection: 4 first, then 5, answered from a fresh frame */
    st_net__wire_queue(&w, metadata_req(4, 5, 900, &s[4]));
    st_net__wire_fill(&w);
    int32_t next[] = {4, 5};
    check_out(&w, next, 2, ST_API_METADATA);
    st_buf_t in;
    st_buf_init(&in);
    put_response(&in, 4, 0, (const uint8_t *)"a", 1);
    put_response(&in, 5, 0, (const uint8_t *)"b", 1);
    assert_int_equal(st_net__wire_input(&w, in.data, in.len, &why), ST_OK);
    assert_int_equal(s[3].err, ST_OK);
    assert_int_equal(s[4].err, ST_OK);
    assert_int_equal(s[4].body0, 'b');
    st_buf_fini(&in);
    /* a refused connection fails what waits */
    st_net__wire_queue(&w, metadata_req(4, 6, 900, &s[5]));
    st_net__wire_fail_waiting(&w, ST_E_CONNECTION_REFUSED, "refused");
    assert_int_equal(s[5].calls, 1);
    assert_int_equal(s[5].err, ST_E_CONNECTION_REFUSED);
    st_net__wire_fini(&w);
    for (int i = 0; i < 6; i++) assert_int_equal(s[i].calls, 1);
}

/* A callback that queues another request while the wire is finished:
 * that one is cancelled too, exactly once, and nothing leaks. */
static st_net__wire_t *requeue_wire;
static int requeue_left;
static seen_t requeued[3];

static void on_requeue(st_netclient_t *c, const st_netclient_resp_t *resp, void *arg) {
    on_done(c, resp, arg);
    if (requeue_left > 0) {
        requeue_left--;
        st_net__req_t *r = metadata_req(4, 50 + requeue_left, 1000, &requeued[requeue_left]);
        r->cb = on_requeue;
        st_net__wire_queue(requeue_wire, r);
    }
}

static void test_fini_with_requeue(void **state) {
    (void)state;
    st_net__wire_t w;
    st_net__wire_init(&w, NULL, INT64_MAX, 1 << 20);
    requeue_wire = &w;
    requeue_left = 3;
    memset(requeued, 0, sizeof requeued);
    seen_t first = {0};
    st_net__req_t *r = metadata_req(4, 1, 1000, &first);
    r->cb = on_requeue;
    st_net__wire_queue(&w, r);
    st_net__wire_fill(&w); /* in flight */
    st_net__wire_fini(&w);
    assert_int_equal(first.calls, 1);
    assert_int_equal(first.err, ST_E_CANCELLED);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(requeued[i].calls, 1);
        assert_int_equal(requeued[i].err, ST_E_CANCELLED);
    }
}

/* Every API in the table encodes a request at its highest described
 * version; a version outside the description is refused. */
static void test_req_new_versions(void **state) {
    (void)state;
    for (size_t i = 0; st_api_at(i); i++) {
        const st_api_t *api = st_api_at(i);
        st_arena_t a;
        st_arena_init(&a, 0);
        void *body = st_arena_alloc(&a, api->req->size);
        st_schema_defaults(api->req, body);
        st_net__req_t *r = NULL;
        assert_int_equal(st_net__req_new(api, api->desc_max_ver, 5, st_str("x"), body, 0, on_done,
                                         NULL, &r),
                         ST_OK);
        assert_int_equal((int16_t)st_be16_get(r->frame + 4), api->key);
        assert_int_equal((int16_t)st_be16_get(r->frame + 6), api->desc_max_ver);
        assert_int_equal(st_be32_get(r->frame), r->size - 4);
        st_net__req_free(r);
        r = NULL;
        assert_int_equal(st_net__req_new(api, api->desc_max_ver + 1, 5, st_str("x"), body, 0,
                                         on_done, NULL, &r),
                         ST_E_UNSUPPORTED_VERSION);
        assert_null(r);
        st_arena_fini(&a);
    }
}

int main(void) {
    unit_seed("netclient");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipelined_in_order),
        cmocka_unit_test(test_inflight_bytes_cap),
        cmocka_unit_test(test_bad_bytes),
        cmocka_unit_test(test_reset_and_deadlines),
        cmocka_unit_test(test_req_new_versions),
        cmocka_unit_test(test_fini_with_requeue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * fuzz_response.c - libFuzzer target: what a peer broker answers the
 * outbound client (broker/net/netclient.c).  The first two input bytes pick
 * an API (by key) and one of its described versions; the rest is
 *   1. a response frame (after its size) for st_response_decode, whose
 *      result, when it decodes, is encoded again;
 *   2. the byte stream of a connection, fed to the client's bookkeeping
 *      (netclient_int.h) with three requests of that API in flight, in
 *      pieces whose sizes the third input byte seeds.  Every callback must
 *      run exactly once, whatever the bytes.
 */
#include <stdlib.h>

#include "netclient_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int calls;

static void on_done(st_netclient_t *c, const st_netclient_resp_t *resp, void *arg) {
    (void)c;
    (void)arg;
    calls++;
    if (resp->err == ST_OK) {
        /* the body is what the API's schema says, or an error: no crash */
        st_arena_t a;
        st_arena_init(&a, 4096);
        void *body = NULL;
        st_netclient_decode(resp, &a, &body);
        st_arena_fini(&a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    /* the first byte is an API key (stable across table changes), else
     * an index into the table */
    const st_api_t *api = st_api_lookup(data[0]);
    if (!api) {
        size_t napis = 0;
        while (st_api_at(napis)) napis++;
        api = st_api_at(data[0] % napis);
    }
    int span = api->desc_max_ver - api->desc_min_ver + 1;
    int v = api->desc_min_ver + data[1] % span;
    uint32_t seed = data[2];
    data += 3;
    size -= 3;

    /* 1. one frame */
    uint8_t *frame = malloc(size ? size : 1);
    if (size) memcpy(frame, data, size);
    st_arena_t a;
    st_arena_init(&a, 4096);
    int32_t corr;
    void *body = NULL;
    if (st_response_decode(api, v, frame, size, &a, &corr, &body) == ST_OK) {
        st_chain_t c;
        st_chain_init(&c);
        st_encode(api->resp, v, st_api_flexible(api, v), body, &c);
        st_chain_fini(&c);
    }
    st_arena_fini(&a);

    /* 2. a connection's bytes, three requests in flight (correlation ids
     * 1-3, the ones a fresh client uses) */
    st_net__wire_t w;
    st_net__wire_init(&w, NULL, INT64_MAX, 1 << 20);
    calls = 0;
    void *req = calloc(1, api->req->size);
    st_schema_defaults(api->req, req);
    for (int32_t i = 1; i <= 3; i++) {
        st_net__req_t *r = NULL;
        if (st_net__req_new(api, v, i, st_str("fuzz"), req, 1000, on_done, NULL, &r) == ST_OK)
            st_net__wire_queue(&w, r);
        else
            calls++; /* not queued: counts as done */
    }
    free(req);
    st_net__wire_fill(&w);
    const uint8_t *p;
    st_net__wire_wrote(&w, st_net__wire_out(&w, &p));
    size_t pos = 0;
    while (pos < size) {
        seed = seed * 1103515245u + 12345u;
        size_t k = 1 + (seed >> 16) % 64;
        if (k > size - pos) k = size - pos;
        char *why = NULL;
        st_err_t e = st_net__wire_input(&w, frame + pos, k, &why);
        pos += k;
        if (e) {
            if (!why) abort(); /* a refusal always says why */
            st_net__wire_reset(&w, ST_E_CONNECTION_LOST, why, 0);
            free(why);
            break;
        }
    }
    st_net__wire_fini(&w);
    if (calls != 3) abort(); /* exactly once each */
    free(frame);
    return 0;
}

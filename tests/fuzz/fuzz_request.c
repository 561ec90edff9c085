/*
 * fuzz_request.c - libFuzzer target: a request frame as an I/O thread gets
 * it (what follows the 4-byte size), through st_request_decode; what
 * decodes is encoded again, and a Produce's records go through the batch
 * validator as h_produce.c would send them.  Requests of APIs described
 * but not served (Vote, BrokerHeartbeat, ...) are decoded from the tables
 * too, as their handlers will.
 *
 * Inputs may carry the size prefix (the captured fixtures do); a prefix
 * that matches the input's length is skipped.
 */
#include <stdlib.h>

#include "batch.h"
#include "protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 4 && st_be32_get(data) == size - 4) {
        data += 4;
        size -= 4;
    }
    /* a private, exactly sized copy: ASan sees any read past it */
    uint8_t *frame = malloc(size ? size : 1);
    if (size) memcpy(frame, data, size);
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_req_header_t h;
    const st_api_t *api = NULL;
    void *body = NULL;
    st_err_t e = st_request_decode(frame, size, &a, &h, &api, &body);
    if (e == ST_E_INVALID_REQUEST && size >= 8) {
        /* A key stratad describes but does not serve (Raft, broker
         * registration): the handlers to come decode it the same way. */
        const st_api_t *d = st_api_lookup((int16_t)st_be16_get(frame));
        int v = (int16_t)st_be16_get(frame + 2);
        if (d && !st_api_served(d) && st_api_described(d, v)) {
            st_rd_t r;
            st_rd_init(&r, frame, size);
            if (st_req_header_decode(&r, st_api_req_header_version(d, v), &h) == ST_OK) {
                void *b = st_arena_alloc(&a, d->req->size);
                if (st_decode(d->req, v, st_api_flexible(d, v), &r, &a, b) == ST_OK) {
                    st_chain_t c;
                    st_chain_init(&c);
                    st_encode(d->req, v, st_api_flexible(d, v), b, &c);
                    st_chain_fini(&c);
                }
            }
        }
    }
    if (e == ST_OK && body) {
        st_chain_t c;
        st_chain_init(&c);
        st_encode(api->req, h.api_version, st_api_flexible(api, h.api_version), body, &c);
        st_chain_fini(&c);
        if (api->key == ST_API_PRODUCE) {
            st_produce_req_t *q = body;
            for (int i = 0; i < q->topics.n; i++) {
                for (int j = 0; j < q->topics.v[i].partitions.n; j++) {
                    st_records_t *r = &q->topics.v[i].partitions.v[j].records;
                    if (r->len <= 0) continue;
                    st_batch_limits_t lim = {.max_message_bytes = 1 << 20,
                                             .ts_before_max_ms = INT64_MAX,
                                             .ts_after_max_ms = INT64_MAX,
                                             .max_inflated_bytes = 4 << 20,
                                             .no_zstd = h.api_version < 7};
                    st_batch_verdict_t v;
                    st_batch_verdict_init(&v);
                    st_batches_validate((uint8_t *)r->p, (size_t)r->len, &lim, 1700000000000, &v);
                    st_batch_verdict_fini(&v);
                }
            }
        }
    }
    st_arena_fini(&a);
    free(frame);
    return 0;
}

/*
 * netclient_int.h - the outbound client's bookkeeping without sockets:
 * requests waiting to be sent and in flight, the bytes to write, and the
 * reading of response frames and their matching.  netclient.c drives it
 * from a socket on a loop; tests/unit/test_netclient.c drives it with
 * bytes.  Not thread-safe: one thread at a time (the client's loop).
 *
 *   st_net__wire_queue --> waiting --st_net__wire_fill--> in flight
 *       (encoded)            |          (bytes appended      |
 *                            |           to out)             +-- answer read by
 *                            |                               |   st_net__wire_input: cb(OK)
 *                            +-- st_net__wire_expire:        +-- st_net__wire_reset:
 *                            |   cb(REQUEST_TIMED_OUT)       |   cb(err, or REQUEST_TIMED_OUT
 *                            +-- st_net__wire_fail_waiting   |   past its deadline)
 *                                cb(err)
 *
 * Every request's callback runs exactly once, from one of those calls.
 */
#ifndef ST_NETCLIENT_INT_H
#define ST_NETCLIENT_INT_H

#include "net.h"

typedef struct st_net__req {
    struct st_net__req *next;
    const st_api_t *api;
    int16_t version;
    int32_t correlation_id;
    uint8_t *frame; /* the encoded request with its size prefix; owned */
    size_t size;
    int64_t deadline_ms;
    int64_t sent_us;
    st_netclient_cb cb;
    void *arg;
} st_net__req_t;

typedef struct st_net__wire {
    st_netclient_t *owner; /* passed to callbacks; may be NULL */
    int64_t max_inflight_bytes, max_response_bytes;
    st_net__req_t *wait_head, *wait_tail; /* not yet written */
    st_net__req_t *fly_head, *fly_tail;   /* written (or being written), unanswered */
    int nwaiting, ninflight;
    int64_t inflight_bytes;
    /* to write: out.data[out_off, out.len) */
    st_buf_t out;
    size_t out_off;
    /* reading: the size, then the frame */
    uint8_t sizebuf[4];
    size_t sizegot;
    uint8_t *rx;
    size_t rxcap, rxlen, rxgot; /* rxlen 0: reading the size */
    int64_t answered;           /* responses matched, for figures */
} st_net__wire_t;

/* A request encoded now: the caller's body is not kept.  *out on success. */
st_err_t st_net__req_new(const st_api_t *api, int version, int32_t correlation_id,
                         st_str_t client_id, const void *body, int64_t deadline_ms,
                         st_netclient_cb cb, void *arg, st_net__req_t **out);
void st_net__req_free(st_net__req_t *r);

void st_net__wire_init(st_net__wire_t *w, st_netclient_t *owner, int64_t max_inflight_bytes,
                       int64_t max_response_bytes);
/* Fails everything (waiting and in flight) with CANCELLED and frees. */
void st_net__wire_fini(st_net__wire_t *w);
void st_net__wire_queue(st_net__wire_t *w, st_net__req_t *r);
/* Move waiting requests in flight while max_inflight_bytes allows (one
 * always may); returns the bytes now waiting to be written. */
size_t st_net__wire_fill(st_net__wire_t *w);
size_t st_net__wire_out(st_net__wire_t *w, const uint8_t **p);
void st_net__wire_wrote(st_net__wire_t *w, size_t n);
/* Bytes read from the peer: complete frames are matched and answered.
 * ST_E_CORRUPT with *why (heap) when the peer broke the protocol: the
 * connection must be closed (st_net__wire_reset). */
st_err_t st_net__wire_input(st_net__wire_t *w, const uint8_t *p, size_t n, char **why);
/* Waiting requests past their deadline fail with REQUEST_TIMED_OUT.
 * Returns 1 when a request in flight is past its deadline (the connection
 * must be closed: st_net__wire_reset answers it). */
int st_net__wire_expire(st_net__wire_t *w, int64_t now_ms);
/* The connection is gone: everything in flight fails with err (or
 * REQUEST_TIMED_OUT when past its deadline), unwritten bytes and a partly
 * read frame are dropped.  Waiting requests stay. */
void st_net__wire_reset(st_net__wire_t *w, st_err_t err, const char *why, int64_t now_ms);
void st_net__wire_fail_waiting(st_net__wire_t *w, st_err_t err, const char *why);
/* The earliest deadline of any request (INT64_MAX: none). */
int64_t st_net__wire_next_deadline(const st_net__wire_t *w);

#endif /* ST_NETCLIENT_INT_H */

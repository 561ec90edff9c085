/*
 * netclient.c - the outbound broker-to-broker client (net.h, st_netclient):
 * one non-blocking connection to one peer on one loop, requests pipelined
 * in order, answers matched by correlation id, timeouts, reconnect backoff.
 *
 * The first half is the socket-free bookkeeping (netclient_int.h); the
 * second drives it from a socket on the loop.
 *
 * Connection states (c->state), each transition named by the function that
 * makes it:
 *
 *             client_tick (something waits, backoff over)
 *   IDLE / BACKOFF ---------------------------> CONNECTING
 *        ^                                        |  client_connected
 *        |                                        v
 *        |                         [TLS: client_tls drives the handshake]
 *        |                                        |  client_secured
 *        |                                        v
 *        |                        [SASL: AUTH, client_sasl_answer steps]
 *        |   client_drop (refused, lost, bad      |  client_ready
 *        |   bytes, timeout in flight, refused    v
 *        |   authentication): in-flight    CONNECTED
 *        +------ requests fail, backoff doubles --+
 *
 * The SASL exchange runs on a wire of its own (c->auth), one request at a
 * time, so that nothing queued on the main wire is written before the
 * connection is authenticated.
 *
 *   CLOSED: st_netclient_destroy; freed by its ticker once no mailbox job
 *   holds it (c->refs).
 *
 * Threads and locks: everything on the loop's thread, except
 * st_netclient_send from another thread, which encodes there and appends
 * to c->mail under c->lock; one loop job at a time (c->mail_posted) moves
 * the mail to the waiting queue.  c->refs (under c->lock) counts those
 * jobs.  Correlation ids are given on the loop's thread, as requests join
 * the waiting queue (client_enqueue), so they grow in sending order
 * whichever thread sent.
 */
#include "netclient_int.h"
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define NC_DEFAULT_TIMEOUT_MS 30000
#define NC_DEFAULT_BACKOFF_MS 50       /* reconnect.backoff.ms */
#define NC_DEFAULT_BACKOFF_MAX_MS 1000 /* reconnect.backoff.max.ms */
#define NC_DEFAULT_INFLIGHT_BYTES ((int64_t)64 << 20)
#define NC_DEFAULT_RESPONSE_BYTES ((int64_t)100 << 20)
#define NC_RX_FIRST_CAP (64 * 1024) /* a frame's buffer grows as its bytes arrive */
#define NC_READ_CHUNK (64 * 1024)

/* ======================================================================
 * Bookkeeping without sockets
 * ==================================================================== */

st_err_t st_net__req_new(const st_api_t *api, int version, int32_t correlation_id,
                         st_str_t client_id, const void *body, int64_t deadline_ms,
                         st_netclient_cb cb, void *arg, st_net__req_t **out) {
    st_chain_t ch;
    st_chain_init(&ch);
    st_err_t e = st_request_encode(api, version, correlation_id, client_id, body, &ch);
    if (e) goto out;
    int64_t total = st_chain_seal(&ch);
    if (total != (int64_t)ch.mem.len) { /* record data by file range: not for requests */
        e = ST_E_INVAL;
        goto out;
    }
    st_net__req_t *r = st_calloc(1, sizeof *r);
    r->api = api;
    r->version = (int16_t)version;
    r->correlation_id = correlation_id;
    r->size = ch.mem.len;
    r->frame = st_malloc(r->size);
    memcpy(r->frame, ch.mem.data, r->size);
    r->deadline_ms = deadline_ms;
    r->sent_us = st_mono_us();
    r->cb = cb;
    r->arg = arg;
    *out = r;
out:
    st_chain_fini(&ch);
    return e;
}

void st_net__req_free(st_net__req_t *r) {
    if (!r) return;
    free(r->frame);
    free(r);
}

static void req_fail(st_net__wire_t *w, st_net__req_t *r, st_err_t err, const char *why) {
    st_netclient_resp_t resp = {0};
    resp.err = err;
    resp.why = why;
    resp.api = r->api;
    resp.version = r->version;
    resp.correlation_id = r->correlation_id;
    resp.sent_us = r->sent_us;
    st_netclient_cb cb = r->cb;
    void *arg = r->arg;
    st_net__req_free(r);
    cb(w->owner, &resp, arg);
}

void st_net__wire_init(st_net__wire_t *w, st_netclient_t *owner, int64_t max_inflight_bytes,
                       int64_t max_response_bytes) {
    memset(w, 0, sizeof *w);
    w->owner = owner;
    w->max_inflight_bytes = max_inflight_bytes;
    w->max_response_bytes = max_response_bytes;
    st_buf_init(&w->out);
}

void st_net__wire_queue(st_net__wire_t *w, st_net__req_t *r) {
    r->next = NULL;
    if (w->wait_tail) w->wait_tail->next = r;
    else w->wait_head = r;
    w->wait_tail = r;
    w->nwaiting++;
}

size_t st_net__wire_fill(st_net__wire_t *w) {
    while (w->wait_head &&
           (!w->fly_head || w->inflight_bytes + (int64_t)w->wait_head->size <= w->max_inflight_bytes)) {
        st_net__req_t *r = w->wait_head;
        w->wait_head = r->next;
        if (!w->wait_head) w->wait_tail = NULL;
        w->nwaiting--;
        r->next = NULL;
        if (w->fly_tail) w->fly_tail->next = r;
        else w->fly_head = r;
        w->fly_tail = r;
        w->ninflight++;
        w->inflight_bytes += (int64_t)r->size;
        if (w->out_off == w->out.len) w->out.len = w->out_off = 0;
        st_buf_put(&w->out, r->frame, r->size);
        /* the bytes now live in out; the request keeps only its size */
        free(r->frame);
        r->frame = NULL;
    }
    return w->out.len - w->out_off;
}

size_t st_net__wire_out(st_net__wire_t *w, const uint8_t **p) {
    *p = w->out.data + w->out_off;
    return w->out.len - w->out_off;
}

void st_net__wire_wrote(st_net__wire_t *w, size_t n) {
    w->out_off += n;
    if (w->out_off == w->out.len) w->out.len = w->out_off = 0;
}

static void rx_reset(st_net__wire_t *w) {
    free(w->rx);
    w->rx = NULL;
    w->rxcap = w->rxlen = w->rxgot = 0;
    w->sizegot = 0;
}

/* A whole frame: it must answer the oldest request in flight. */
static st_err_t frame_done(st_net__wire_t *w, char **why) {
    int32_t corr;
    if (st_response_peek_correlation(w->rx, w->rxlen, &corr)) {
        *why = st_strprintf("a response of %zu bytes has no correlation id", w->rxlen);
        return ST_E_CORRUPT;
    }
    st_net__req_t *r = w->fly_head;
    if (!r) {
        *why = st_strprintf("a response with correlation id %d, and no request in flight", corr);
        return ST_E_CORRUPT;
    }
    if (corr != r->correlation_id) {
        int later = 0;
        for (st_net__req_t *q = r->next; q && !later; q = q->next) later = q->correlation_id == corr;
        *why = later ? st_strprintf("the response to correlation id %d came before %d's "
                                    "(a connection is answered in order)",
                                    corr, r->correlation_id)
                     : st_strprintf("a response with correlation id %d, which was never sent "
                                    "(expected %d)",
                                    corr, r->correlation_id);
        return ST_E_CORRUPT;
    }
    /* Response header v0: the correlation id; v1 adds tagged fields. */
    st_rd_t rd;
    st_rd_init(&rd, w->rx, w->rxlen);
    st_rd_i32(&rd);
    if (st_api_resp_header_version(r->api, r->version) >= 1) {
        uint64_t ntags = st_rd_uvarint(&rd);
        for (uint64_t i = 0; i < ntags && !rd.err; i++) {
            st_rd_uvarint(&rd);
            st_rd_bytes(&rd, (size_t)st_rd_uvarint(&rd));
        }
    }
    if (rd.err) {
        *why = st_strprintf("a truncated %s v%d response header (%zu bytes)", r->api->name,
                            (int)r->version, w->rxlen);
        return ST_E_CORRUPT;
    }
    w->fly_head = r->next;
    if (!w->fly_head) w->fly_tail = NULL;
    w->ninflight--;
    w->inflight_bytes -= (int64_t)r->size;
    w->answered++;
    st_netclient_resp_t resp = {0};
    resp.err = ST_OK;
    resp.api = r->api;
    resp.version = r->version;
    resp.correlation_id = corr;
    resp.frame = w->rx;
    resp.len = w->rxlen;
    resp.body = w->rx + rd.pos;
    resp.body_len = w->rxlen - rd.pos;
    resp.sent_us = r->sent_us;
    st_netclient_cb cb = r->cb;
    void *arg = r->arg;
    st_net__req_free(r);
    /* the frame stays ours during the call */
    uint8_t *frame = w->rx;
    w->rx = NULL;
    w->rxcap = w->rxlen = w->rxgot = 0;
    w->sizegot = 0;
    cb(w->owner, &resp, arg);
    free(frame);
    return ST_OK;
}

st_err_t st_net__wire_input(st_net__wire_t *w, const uint8_t *p, size_t n, char **why) {
    *why = NULL;
    while (n) {
        if (!w->rxlen) {
            size_t k = ST_MIN(n, 4 - w->sizegot);
            memcpy(w->sizebuf + w->sizegot, p, k);
            w->sizegot += k;
            p += k;
            n -= k;
            if (w->sizegot < 4) break;
            int32_t size = (int32_t)st_be32_get(w->sizebuf);
            if (size < 4 || (int64_t)size > w->max_response_bytes) {
                *why = size < 4 ? st_strprintf("a response size of %d bytes, too small for a "
                                               "correlation id",
                                               size)
                                : st_strprintf("a response of %d bytes, over the %lld-byte "
                                               "limit",
                                               size, (long long)w->max_response_bytes);
                return ST_E_CORRUPT;
            }
            if (!w->fly_head) {
                *why = st_strprintf("%d bytes of response, and no request in flight", size);
                return ST_E_CORRUPT;
            }
            w->rxlen = (size_t)size;
            w->rxgot = 0;
            w->rxcap = ST_MIN(w->rxlen, (size_t)NC_RX_FIRST_CAP);
            w->rx = st_malloc(w->rxcap);
        }
        if (w->rxgot == w->rxcap) { /* the announced size is not trusted up front */
            size_t cap = ST_MIN(w->rxcap * 2, w->rxlen);
            w->rx = st_realloc(w->rx, cap);
            w->rxcap = cap;
        }
        size_t k = ST_MIN(n, w->rxcap - w->rxgot);
        memcpy(w->rx + w->rxgot, p, k);
        w->rxgot += k;
        p += k;
        n -= k;
        if (w->rxgot == w->rxlen) {
            st_err_t e = frame_done(w, why);
            if (e) return e;
        }
    }
    return ST_OK;
}

int st_net__wire_expire(st_net__wire_t *w, int64_t now_ms) {
    /* waiting requests time out one by one (never sent: nothing to match) */
    for (st_net__req_t **pp = &w->wait_head; *pp;) {
        st_net__req_t *r = *pp;
        if (r->deadline_ms > now_ms) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        if (w->wait_tail == r) {
            w->wait_tail = NULL;
            for (st_net__req_t *q = w->wait_head; q; q = q->next) w->wait_tail = q;
        }
        w->nwaiting--;
        req_fail(w, r, ST_E_REQUEST_TIMED_OUT, "not sent before its deadline");
    }
    for (st_net__req_t *r = w->fly_head; r; r = r->next)
        if (r->deadline_ms <= now_ms) return 1;
    return 0;
}

void st_net__wire_reset(st_net__wire_t *w, st_err_t err, const char *why, int64_t now_ms) {
    st_net__req_t *r = w->fly_head;
    w->fly_head = w->fly_tail = NULL;
    w->ninflight = 0;
    w->inflight_bytes = 0;
    w->out.len = w->out_off = 0;
    rx_reset(w);
    while (r) {
        st_net__req_t *next = r->next;
        if (r->deadline_ms <= now_ms) req_fail(w, r, ST_E_REQUEST_TIMED_OUT, "no answer before its deadline");
        else req_fail(w, r, err, why);
        r = next;
    }
}

void st_net__wire_fail_waiting(st_net__wire_t *w, st_err_t err, const char *why) {
    st_net__req_t *r = w->wait_head;
    w->wait_head = w->wait_tail = NULL;
    w->nwaiting = 0;
    while (r) {
        st_net__req_t *next = r->next;
        req_fail(w, r, err, why);
        r = next;
    }
}

void st_net__wire_fini(st_net__wire_t *w) {
    /* until both lists stay empty: a callback may queue more */
    while (w->fly_head || w->wait_head) {
        st_net__wire_reset(w, ST_E_CANCELLED, "client closed", INT64_MIN);
        st_net__wire_fail_waiting(w, ST_E_CANCELLED, "client closed");
    }
    st_buf_fini(&w->out);
}

int64_t st_net__wire_next_deadline(const st_net__wire_t *w) {
    int64_t d = INT64_MAX;
    for (const st_net__req_t *r = w->wait_head; r; r = r->next) d = ST_MIN(d, r->deadline_ms);
    for (const st_net__req_t *r = w->fly_head; r; r = r->next) d = ST_MIN(d, r->deadline_ms);
    return d;
}

/* ======================================================================
 * The client on a loop
 * ==================================================================== */

enum { NC_IDLE, NC_BACKOFF, NC_CONNECTING, NC_TLS, NC_AUTH, NC_CONNECTED, NC_CLOSED };

struct st_netclient {
    st_loop_io_t io; /* first: the loop hands us &io */
    st_loop_ticker_t ticker;
    st_loop_t *loop;
    char *host;
    int port;
    char *peer; /* "host:port" for log lines */
    char *client_id;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int64_t timeout_ms, backoff_ms, backoff_max_ms;
    int state;
    int fd;
    int failures;     /* failed or lost connections since the last success */
    int64_t retry_at_ms;
    int connects;
    uint32_t seed;    /* backoff jitter */
    int32_t next_corr; /* loop thread */
    st_net__wire_t wire;
    /* security (st_netclient_config_t.sec): the transport, and the SASL
     * exchange on its own wire before CONNECTED */
    const st_client_security_t *sec;
    st_tport_t *tp;
    int rd_out, wr_in; /* TLS: reading waits to write, writing to read */
    st_net__wire_t auth;
    st_sasl_client_t *sasl;
    int sasl_done;     /* the mechanism ended: the next answer is the last */
    /* from other threads */
    pthread_mutex_t lock;
    st_net__req_t *mail_head, *mail_tail;
    int mail_posted;
    int refs; /* mailbox jobs in the loop's queue (lock) */
};

static void client_drop(st_netclient_t *c, st_err_t err, const char *why, int64_t now,
                        int bad_bytes);
static void client_flush(st_netclient_t *c, int64_t now);

st_loop_t *st_netclient_loop(const st_netclient_t *c) { return c->loop; }
int st_netclient_connects(const st_netclient_t *c) { return c->connects; }
int st_netclient_connected(const st_netclient_t *c) { return c->state == NC_CONNECTED; }
int st_netclient_inflight(const st_netclient_t *c) { return c->wire.ninflight; }
int st_netclient_waiting(const st_netclient_t *c) { return c->wire.nwaiting; }

/* The wire the connection speaks now: the SASL exchange's, then the
 * requests'. */
static st_net__wire_t *live_wire(st_netclient_t *c) {
    return c->state == NC_AUTH ? &c->auth : &c->wire;
}

static void client_events(st_netclient_t *c) {
    if (c->fd < 0) return;
    uint32_t ev = EPOLLIN | EPOLLRDHUP;
    st_net__wire_t *w = live_wire(c);
    if (c->state == NC_CONNECTING || w->out.len > w->out_off || c->rd_out ||
        (c->state == NC_TLS && c->tp->want == EPOLLOUT))
        ev |= EPOLLOUT;
    st_loop_io_mod(c->loop, &c->io, ev);
}

/* reconnect.backoff.ms doubled per failure up to reconnect.backoff.max.ms,
 * with +-20% jitter, as Kafka's ClusterConnectionStates. */
static int64_t backoff_for(st_netclient_t *c) {
    int64_t b = c->backoff_ms;
    for (int i = 1; i < c->failures && b < c->backoff_max_ms; i++) b *= 2;
    if (b > c->backoff_max_ms) b = c->backoff_max_ms;
    c->seed = c->seed * 1103515245u + 12345u;
    int64_t span = b * 2 / 5; /* 40% */
    if (span > 0) b = b - span / 2 + (int64_t)((c->seed >> 8) % (uint32_t)(span + 1));
    return b > 0 ? b : 1;
}

static void client_close_fd(st_netclient_t *c) {
    if (c->fd < 0) return;
    st_loop_io_del(c->loop, &c->io);
    st_tport_free(c->tp);
    c->tp = NULL;
    c->rd_out = c->wr_in = 0;
    close(c->fd);
    c->fd = -1;
    /* an exchange cut short: its requests go with the connection */
    st_net__wire_reset(&c->auth, ST_E_CONNECTION_LOST, "the connection closed", INT64_MIN);
    st_sasl_client_free(c->sasl);
    c->sasl = NULL;
    c->sasl_done = 0;
}

/* The connection failed or ended: in-flight requests fail; when the
 * connection never came up, the waiting ones too (their peer is not
 * there; the caller decides whether to retry). */
static void client_drop(st_netclient_t *c, st_err_t err, const char *why, int64_t now,
                        int bad_bytes) {
    int was_connected = c->state == NC_CONNECTED;
    if (err == ST_E_SASL_AUTHENTICATION_FAILED)
        ST_LOG_RATELIMITED(ST_LOG_WARN, "net", 5000, "authenticating to %s failed: %s", c->peer,
                           why);
    client_close_fd(c);
    c->failures++;
    c->state = NC_BACKOFF;
    c->retry_at_ms = now + backoff_for(c);
    if (err == ST_E_CONNECTION_REFUSED)
        ST_LOG_RATELIMITED(ST_LOG_INFO, "net", 5000, "connection to %s failed: %s", c->peer, why);
    else if (!bad_bytes && !c->wire.ninflight && err == ST_E_CONNECTION_LOST && was_connected)
        ST_INFO("net", "connection to %s closed: %s (nothing in flight)", c->peer, why);
    else
        ST_WARN("net", "connection to %s closed: %s (%d in flight fail)", c->peer, why,
                c->wire.ninflight);
    /* Each list is taken whole before its callbacks run: what they send
     * now waits for the next connection. */
    if (!was_connected) st_net__wire_fail_waiting(&c->wire, err, why);
    st_net__wire_reset(&c->wire, err, why, now);
}

/* Authenticated (or no SASL): requests flow. */
static void client_ready(st_netclient_t *c, int64_t now) {
    c->state = NC_CONNECTED;
    c->failures = 0;
    c->connects++;
    ST_DEBUG("net", "connected to %s%s%s", c->peer, c->tp && *st_tport_describe(c->tp) ? " over " : "",
             c->tp ? st_tport_describe(c->tp) : "");
    client_flush(c, now);
}

static void client_sasl_next(st_netclient_t *c, const uint8_t *in, size_t inlen, int64_t now);

/* One SASL answer (the auth wire's callback, on the loop). */
static void client_sasl_answer(st_netclient_t *nc, const st_netclient_resp_t *resp, void *arg) {
    (void)nc;
    st_netclient_t *c = arg;
    int64_t now = st_mono_ms();
    /* the connection went meanwhile (close_fd clears fd before it fails
     * the exchange's requests) */
    if (c->state != NC_AUTH || c->fd < 0) return;
    if (resp->err) {
        client_drop(c, resp->err, resp->why ? resp->why : st_err_msg(resp->err), now, 0);
        return;
    }
    st_arena_t a;
    st_arena_init(&a, 1024);
    void *body = NULL;
    st_err_t e = st_netclient_decode(resp, &a, &body);
    char why[300];
    if (e) {
        snprintf(why, sizeof why, "malformed %s answer", resp->api->name);
    } else if (resp->api->key == ST_API_SASL_HANDSHAKE) {
        const st_sasl_handshake_resp_t *r = body;
        e = st_err_from_wire(r->error_code);
        snprintf(why, sizeof why, "SASL mechanism %s: %s", st_sasl_mech_name(c->sec->mech),
                 st_err_msg(e));
    } else {
        const st_sasl_authenticate_resp_t *r = body;
        e = st_err_from_wire(r->error_code);
        snprintf(why, sizeof why, "SASL %s as %s: %.*s", st_sasl_mech_name(c->sec->mech),
                 c->sec->user, (int)ST_MAX(r->error_message.len, 0),
                 r->error_message.p ? r->error_message.p : st_err_msg(e));
    }
    if (e) {
        st_arena_fini(&a);
        client_drop(c, e == ST_E_SASL_AUTHENTICATION_FAILED || e == ST_E_UNSUPPORTED_SASL_MECHANISM ||
                               e == ST_E_ILLEGAL_SASL_STATE
                           ? ST_E_SASL_AUTHENTICATION_FAILED
                           : e,
                    why, now, 0);
        return;
    }
    if (resp->api->key == ST_API_SASL_HANDSHAKE) {
        client_sasl_next(c, NULL, 0, now);
    } else if (c->sasl_done) {
        client_ready(c, now); /* PLAIN's one token, accepted */
    } else {
        const st_sasl_authenticate_resp_t *r = body;
        client_sasl_next(c, r->auth_bytes.p, (size_t)ST_MAX(r->auth_bytes.len, 0), now);
    }
    st_arena_fini(&a);
}

/* Queues one request of the exchange on the auth wire. */
static void client_sasl_send(st_netclient_t *c, int16_t key, int version, const void *body) {
    st_net__req_t *r;
    if (st_net__req_new(st_api_lookup(key), version, c->next_corr++, st_str(c->client_id), body,
                        st_mono_ms() + c->timeout_ms, client_sasl_answer, c, &r) == ST_OK)
        st_net__wire_queue(&c->auth, r);
}

/* The client's next token (the first when in is NULL), or the end. */
static void client_sasl_next(st_netclient_t *c, const uint8_t *in, size_t inlen, int64_t now) {
    if (!c->sasl) c->sasl = st_sasl_client_new(c->sec->mech, c->sec->user, c->sec->password);
    st_buf_t tok;
    st_buf_init(&tok);
    char why[256];
    st_sasl_step_t step = st_sasl_client_step(c->sasl, in, inlen, &tok, why, sizeof why);
    if (step == ST_SASL_FAILED) {
        st_buf_fini(&tok);
        client_drop(c, ST_E_SASL_AUTHENTICATION_FAILED, why, now, 0);
        return;
    }
    if (step == ST_SASL_DONE && !tok.len) { /* SCRAM: the server proven */
        st_buf_fini(&tok);
        client_ready(c, now);
        return;
    }
    c->sasl_done = step == ST_SASL_DONE;
    st_sasl_authenticate_req_t q = {{tok.data, (int32_t)tok.len}};
    client_sasl_send(c, ST_API_SASL_AUTHENTICATE, 1, &q);
    st_buf_fini(&tok);
    client_flush(c, now);
}

/* The transport is up (TLS done, or plaintext): SASL, or ready. */
static void client_secured(st_netclient_t *c, int64_t now) {
    if (!c->sec || c->sec->mech == ST_SASL_NONE) {
        client_ready(c, now);
        return;
    }
    c->state = NC_AUTH;
    st_sasl_handshake_req_t q = {st_str(st_sasl_mech_name(c->sec->mech))};
    client_sasl_send(c, ST_API_SASL_HANDSHAKE, 1, &q);
    client_flush(c, now);
}

/* TLS: drive the handshake. */
static void client_tls(st_netclient_t *c, int64_t now) {
    int r = st_tport_handshake(c->tp);
    if (r > 0) {
        client_secured(c, now);
        return;
    }
    if (r < 0) {
        char *why = st_strprintf("TLS handshake: %s", c->tp->why);
        client_drop(c, ST_E_SASL_AUTHENTICATION_FAILED, why, now, 0);
        free(why);
        return;
    }
    client_events(c);
}

static void client_connected(st_netclient_t *c, int64_t now) {
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char err[256];
    c->tp = c->sec && c->sec->tls ? st_tport_tls_new(c->sec->tls, c->fd, c->host, err, sizeof err)
                                  : st_tport_plain_new(c->fd);
    if (!c->tp) {
        client_drop(c, ST_E_CONNECTION_LOST, err, now, 0);
        return;
    }
    if (c->sec && c->sec->tls) {
        c->state = NC_TLS;
        client_tls(c, now);
        return;
    }
    client_secured(c, now);
}

static void client_connect(st_netclient_t *c, int64_t now) {
    int fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        char *why = st_strprintf("socket: %s", strerror(errno));
        c->state = NC_CONNECTING;
        client_drop(c, ST_E_CONNECTION_REFUSED, why, now, 0);
        free(why);
        return;
    }
    c->fd = fd;
    c->state = NC_CONNECTING;
    if (st_loop_io_add(c->loop, &c->io, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP)) {
        close(fd);
        c->fd = -1;
        client_drop(c, ST_E_CONNECTION_REFUSED, "cannot watch the socket", now, 0);
        return;
    }
    if (connect(fd, (struct sockaddr *)&c->addr, c->addrlen) == 0) {
        client_connected(c, now);
    } else if (errno != EINPROGRESS) {
        int en = errno;
        char *why = st_strprintf("connect: %s", strerror(en));
        client_drop(c, en == ECONNREFUSED ? ST_E_CONNECTION_REFUSED : ST_E_CONNECTION_LOST, why,
                    now, 0);
        free(why);
    }
}

static void client_flush(st_netclient_t *c, int64_t now) {
    if (c->state != NC_CONNECTED && c->state != NC_AUTH) return;
    st_net__wire_t *w = live_wire(c);
    st_net__wire_fill(w);
    const uint8_t *p;
    size_t n;
    c->wr_in = 0;
    while ((n = st_net__wire_out(w, &p)) > 0) {
        struct iovec iov = {(void *)p, n};
        ssize_t k = st_tport_writev(c->tp, &iov, 1);
        if (k > 0) {
            st_net__wire_wrote(w, (size_t)k);
            if (!st_net__wire_out(w, &p)) st_net__wire_fill(w);
            continue;
        }
        if (k == 0) { /* would block: on writability, or (TLS) readability */
            c->wr_in = c->tp->want == EPOLLIN;
            break;
        }
        char *why = st_strprintf("send: %s", c->tp->why[0] ? c->tp->why : "connection closed");
        client_drop(c, ST_E_CONNECTION_LOST, why, now, 0);
        free(why);
        return;
    }
    client_events(c);
}

static void client_read(st_netclient_t *c, int64_t now) {
    uint8_t buf[NC_READ_CHUNK];
    c->rd_out = 0;
    for (int rounds = 0; rounds < 16 && (c->state == NC_CONNECTED || c->state == NC_AUTH);
         rounds++) {
        st_net__wire_t *w = live_wire(c);
        ssize_t k = st_tport_recv(c->tp, buf, sizeof buf);
        if (k > 0) {
            char *why = NULL;
            if (st_net__wire_input(w, buf, (size_t)k, &why)) {
                client_drop(c, ST_E_CONNECTION_LOST, why, now, 1);
                free(why);
                return;
            }
            /* a completion may have dropped the connection; else the
             * transport may hold more than the socket shows (TLS) */
            if (!c->tp) return;
            if ((size_t)k < sizeof buf && !st_tport_pending(c->tp)) return;
            continue;
        }
        if (k == 0) {
            c->rd_out = c->tp->want == EPOLLOUT;
            if (c->rd_out) client_events(c);
            return;
        }
        const char *how = c->tp->why[0] ? c->tp->why : "the peer closed the connection";
        char *why = w->rxlen ? st_strprintf("%s %zu bytes into a %zu-byte response (a truncated "
                                            "frame)",
                                            how, w->rxgot, w->rxlen)
                    : w->sizegot ? st_strprintf("%s inside a response's size (a truncated frame)", how)
                    : c->tp->why[0] ? st_strprintf("recv: %s", how)
                                    : st_strprintf("%s", how);
        client_drop(c, ST_E_CONNECTION_LOST, why, now, 0);
        free(why);
        return;
    }
}

static void client_io(st_loop_io_t *io, uint32_t events) {
    st_netclient_t *c = (st_netclient_t *)io;
    int64_t now = st_mono_ms();
    if (c->state == NC_CONNECTING) {
        int soerr = 0;
        socklen_t len = sizeof soerr;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
        if (soerr) {
            char *why = st_strprintf("connect: %s", strerror(soerr));
            client_drop(c, soerr == ECONNREFUSED ? ST_E_CONNECTION_REFUSED : ST_E_CONNECTION_LOST,
                        why, now, 0);
            free(why);
            return;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) != 0) {
            if (events & (EPOLLERR | EPOLLHUP))
                client_drop(c, ST_E_CONNECTION_REFUSED, "connect: no peer", now, 0);
            return; /* still in progress (a stale event) */
        }
        client_connected(c, now);
        return;
    }
    if (c->state == NC_TLS) {
        client_tls(c, now);
        return;
    }
    if (c->state != NC_CONNECTED && c->state != NC_AUTH) return;
    if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) || ((events & EPOLLOUT) && c->rd_out))
        client_read(c, now);
    if ((c->state == NC_CONNECTED || c->state == NC_AUTH) &&
        ((events & EPOLLOUT) || ((events & EPOLLIN) && c->wr_in)))
        client_flush(c, now);
}

static void client_free(st_netclient_t *c) {
    pthread_mutex_destroy(&c->lock);
    free(c->host);
    free(c->peer);
    free(c->client_id);
    free(c);
}

static int64_t client_tick(st_loop_ticker_t *t, int64_t now) {
    st_netclient_t *c = (st_netclient_t *)((char *)t - offsetof(st_netclient_t, ticker));
    if (c->state == NC_CLOSED) {
        pthread_mutex_lock(&c->lock);
        int refs = c->refs;
        pthread_mutex_unlock(&c->lock);
        if (refs) return 0; /* a mailbox job still holds it */
        client_free(c);
        return ST_LOOP_TICKER_DONE;
    }
    if (st_net__wire_expire(&c->wire, now) && c->state == NC_CONNECTED)
        client_drop(c, ST_E_CONNECTION_LOST, "a request timed out in flight", now, 0);
    if (c->state == NC_AUTH && st_net__wire_expire(&c->auth, now))
        client_drop(c, ST_E_CONNECTION_LOST, "no answer to SASL authentication", now, 0);
    int pending = c->wire.wait_head != NULL;
    if (pending && (c->state == NC_IDLE || (c->state == NC_BACKOFF && now >= c->retry_at_ms)))
        client_connect(c, now);
    if (c->state == NC_CONNECTED && c->wire.wait_head) client_flush(c, now);
    int64_t wait = -1;
    int64_t d = ST_MIN(st_net__wire_next_deadline(&c->wire), st_net__wire_next_deadline(&c->auth));
    if (d != INT64_MAX) wait = d > now ? d - now : 0;
    if (c->state == NC_BACKOFF && c->wire.wait_head) {
        int64_t r = c->retry_at_ms > now ? c->retry_at_ms - now : 0;
        if (wait < 0 || r < wait) wait = r;
    }
    return wait;
}

static void client_stop(st_loop_ticker_t *t) {
    st_netclient_t *c = (st_netclient_t *)((char *)t - offsetof(st_netclient_t, ticker));
    if (c->state == NC_CLOSED) return;
    client_close_fd(c);
    c->state = NC_IDLE;
    st_net__wire_reset(&c->wire, ST_E_CANCELLED, "the loop stopped", INT64_MIN);
    st_net__wire_fail_waiting(&c->wire, ST_E_CANCELLED, "the loop stopped");
}

st_err_t st_netclient_new(st_loop_t *loop, const st_netclient_config_t *cfg,
                          st_netclient_t **out, char *err, size_t errlen) {
    st_err_t e = ST_OK;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    if (!cfg->host || cfg->port <= 0 || cfg->port > 65535) {
        st_snprintf_marked(err, errlen, "an outbound connection needs a host and a port (got %s:%d)",
                           cfg->host ? cfg->host : "(none)", cfg->port);
        return ST_E_INVAL;
    }
    int gai = st_getaddrinfo(cfg->host, port, &hints, &res);
    if (gai != 0 || !res) {
        st_snprintf_marked(err, errlen, "cannot resolve %s:%d: %s", cfg->host, cfg->port,
                           gai_strerror(gai));
        e = ST_E_NOT_FOUND;
        goto out;
    }
    st_netclient_t *c = st_calloc(1, sizeof *c);
    memcpy(&c->addr, res->ai_addr, res->ai_addrlen);
    c->addrlen = res->ai_addrlen;
    c->loop = loop;
    c->host = st_strdup(cfg->host);
    c->port = cfg->port;
    c->peer = strchr(cfg->host, ':') ? st_strprintf("[%s]:%d", cfg->host, cfg->port)
                                     : st_strprintf("%s:%d", cfg->host, cfg->port);
    c->client_id = st_strdup(cfg->client_id ? cfg->client_id : "strata");
    c->timeout_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : NC_DEFAULT_TIMEOUT_MS;
    c->backoff_ms = cfg->reconnect_backoff_ms > 0 ? cfg->reconnect_backoff_ms : NC_DEFAULT_BACKOFF_MS;
    c->backoff_max_ms = cfg->reconnect_backoff_max_ms > 0 ? cfg->reconnect_backoff_max_ms
                                                          : NC_DEFAULT_BACKOFF_MAX_MS;
    if (c->backoff_max_ms < c->backoff_ms) c->backoff_max_ms = c->backoff_ms;
    c->fd = -1;
    c->io.fd = -1;
    c->io.cb = client_io;
    c->state = NC_IDLE;
    c->seed = (uint32_t)st_mono_us() ^ (uint32_t)(uintptr_t)c;
    c->next_corr = 1;
    c->sec = cfg->sec;
    st_net__wire_init(&c->auth, c, NC_DEFAULT_INFLIGHT_BYTES, NC_DEFAULT_RESPONSE_BYTES);
    st_net__wire_init(&c->wire, c,
                      cfg->max_inflight_bytes > 0 ? cfg->max_inflight_bytes : NC_DEFAULT_INFLIGHT_BYTES,
                      cfg->max_response_bytes > 0 ? cfg->max_response_bytes : NC_DEFAULT_RESPONSE_BYTES);
    pthread_mutex_init(&c->lock, NULL);
    c->ticker.tick = client_tick;
    c->ticker.stop = client_stop;
    st_loop_ticker_add(loop, &c->ticker);
    *out = c;
out:
    if (res) freeaddrinfo(res);
    return e;
}

/* On the loop's thread: the request's correlation id, written into its
 * header (size, key, version, then the id at byte 8 in every header
 * version), and into the waiting queue. */
static void client_enqueue(st_netclient_t *c, st_net__req_t *r) {
    r->correlation_id = c->next_corr;
    c->next_corr = c->next_corr == INT32_MAX ? 1 : c->next_corr + 1;
    st_be32_put(r->frame + 8, (uint32_t)r->correlation_id);
    st_net__wire_queue(&c->wire, r);
}

/* On the loop: take what other threads sent. */
static void mail_job(void *arg) {
    st_netclient_t *c = arg;
    pthread_mutex_lock(&c->lock);
    st_net__req_t *r = c->mail_head;
    c->mail_head = c->mail_tail = NULL;
    c->mail_posted = 0;
    c->refs--;
    pthread_mutex_unlock(&c->lock);
    while (r) {
        st_net__req_t *next = r->next;
        if (c->state == NC_CLOSED) {
            st_net__req_t *one = r;
            one->next = NULL;
            st_net__wire_t tmp;
            st_net__wire_init(&tmp, c, 1, 1);
            st_net__wire_queue(&tmp, one);
            st_net__wire_fini(&tmp); /* CANCELLED, once */
        } else {
            client_enqueue(c, r);
        }
        r = next;
    }
}

st_err_t st_netclient_send(st_netclient_t *c, int16_t api_key, int version, const void *body,
                           int64_t timeout_ms, st_netclient_cb cb, void *arg) {
    const st_api_t *api = st_api_lookup(api_key);
    if (!api || !st_api_described(api, version)) return ST_E_UNSUPPORTED_VERSION;
    int64_t deadline = st_mono_ms() + (timeout_ms > 0 ? timeout_ms : c->timeout_ms);
    st_net__req_t *r = NULL;
    st_err_t e = st_net__req_new(api, version, 0, st_str(c->client_id), body, deadline, cb, arg, &r);
    if (e) return e;
    if (st_loop_current() == c->loop) {
        if (c->state == NC_CLOSED) { /* a callback of st_netclient_destroy retrying */
            st_net__req_free(r);
            return ST_E_CANCELLED;
        }
        /* the ticker sends it before the loop next waits: never on our stack */
        client_enqueue(c, r);
        return ST_OK;
    }
    pthread_mutex_lock(&c->lock);
    if (c->mail_tail) c->mail_tail->next = r;
    else c->mail_head = r;
    c->mail_tail = r;
    int post = !c->mail_posted;
    if (post) {
        c->mail_posted = 1;
        c->refs++;
    }
    pthread_mutex_unlock(&c->lock);
    if (post) st_loop_post(c->loop, mail_job, c);
    return ST_OK;
}

st_err_t st_netclient_decode(const st_netclient_resp_t *resp, st_arena_t *a, void **body) {
    if (resp->err) return resp->err;
    int32_t corr;
    return st_response_decode(resp->api, resp->version, resp->frame, resp->len, a, &corr, body);
}

void st_netclient_destroy(st_netclient_t *c) {
    if (!c) return;
    client_close_fd(c);
    c->state = NC_CLOSED;
    st_net__wire_fini(&c->wire);
    st_net__wire_fini(&c->auth);
    pthread_mutex_lock(&c->lock);
    st_net__req_t *r = c->mail_head;
    c->mail_head = c->mail_tail = NULL;
    int refs = c->refs;
    pthread_mutex_unlock(&c->lock);
    if (r) {
        st_net__wire_t tmp;
        st_net__wire_init(&tmp, c, 1, 1);
        while (r) {
            st_net__req_t *next = r->next;
            st_net__wire_queue(&tmp, r);
            r = next;
        }
        st_net__wire_fini(&tmp);
    }
    if (st_loop_current() != c->loop && (!refs || st_loop_exited(c->loop))) {
        /* The loop is not running (before st_net_start or after
         * st_net_stop).  A mailbox job posted after the loop's last round
         * (a send from another thread as it stopped) never runs, so it no
         * longer holds the client: before, such a client was never freed. */
        st_loop_ticker_del(c->loop, &c->ticker);
        client_free(c);
    }
    /* else: freed by client_tick once no mailbox job holds it */
}

/*
 * net.h - event loops, connections, request framing and in-order responses,
 * and the outbound client to other brokers (st_netclient, at the end).
 *
 * Each I/O thread runs one loop (epoll) and owns its connections: reading,
 * framing, handing each request to the server, and writing responses back
 * in request order with writev and sendfile.  Other threads reach a loop
 * only through its mailbox (st_loop_post / st_loop_wake, eventfd).
 *
 * Kafka framing: int32 size, then size bytes of request.  A size below the
 * smallest header or above socket.request.max.bytes closes that connection
 * only.
 *
 * Limits (Kafka's ConnectionQuotas and request memory pool):
 *   - max.connections (KIP-402): at the limit the listeners leave epoll, so
 *     new connections wait in the kernel's listen queue until one closes;
 *   - max.connections.per.ip (and overrides): a connection beyond its
 *     address's limit is closed as soon as it is accepted;
 *   - accept failing for want of fds (EMFILE / ENFILE) or memory takes the
 *     listeners out of epoll for a backoff (100 ms doubling to 1 s, or until
 *     a connection closes) instead of retrying at once;
 *   - queued.max.request.bytes (KIP-72) bounds the bytes of requests being
 *     read or waiting for their answer, over all loops.  A frame's buffer grows as
 *     its bytes arrive (a size alone reserves 16 KiB at most); when the
 *     bound is reached the connection stops being read until memory is
 *     freed.  One frame at a time may go past the bound (as Kafka's
 *     non-strict pool lets one request bigger than what is left through),
 *     and frames up to 64 KiB have an eighth of the bound of their own, so
 *     small requests are served while large ones wait.
 *
 * A request's life:
 *
 *   frame read --> st_net_hooks.on_request(req) --+--> st_request_respond()
 *                                                 +--> st_request_no_response()
 *                                                 +--> parked (delayed op),
 *                                                      completed later on
 *                                                      the same loop
 *
 * Responses leave in request order: a completed request waits behind any
 * earlier one still parked.
 */
#ifndef ST_NET_H
#define ST_NET_H

#include "protocol.h"
#include "sasl.h"
#include "st_base.h"

typedef struct st_loop st_loop_t;
typedef struct st_conn st_conn_t;
typedef struct st_net st_net_t;

typedef struct st_request {
    st_conn_t *conn;
    st_loop_t *loop;
    uint8_t *frame; /* owned; decoded strings point into it */
    size_t len;
    st_arena_t arena; /* freed with the request */
    st_req_header_t hdr;
    const st_api_t *api;
    void *body; /* decoded request (api->req schema) */
    st_chain_t resp;
    int state; /* ST_REQ_* */
    int close_after; /* the connection closes once this answer is written */
    /* called by st_request_respond with the answer before it is encoded
     * (the authorizer puts back the items it took out of the request) */
    void (*on_respond)(struct st_request *req, void *body);
    void *on_respond_arg;
    int64_t recv_us;
    int64_t parked_us;   /* its handler returned without an answer (0: answered at once) */
    int64_t answered_us; /* st_request_respond */
    int64_t cause_us;    /* when the wake-up or job that answered it was posted (0: none) */
    struct st_request *next;
    void *op; /* the server's parked operation, if any */
} st_request_t;

enum { ST_REQ_PENDING = 0, ST_REQ_READY = 1, ST_REQ_NONE = 2 };

typedef struct st_net_hooks {
    /* A decoded request (on the loop's thread). */
    void (*on_request)(st_request_t *req, void *arg);
    /* The loop was woken by st_loop_wake. */
    void (*on_wake)(st_loop_t *loop, void *arg);
    /* Called every iteration; returns ms until the loop must call again
     * (-1: no deadline). */
    int64_t (*on_tick)(st_loop_t *loop, int64_t now_ms, void *arg);
    /* Shutting down: complete everything parked now. */
    void (*on_drain)(st_loop_t *loop, void *arg);
    void *arg;
} st_net_hooks_t;

/* ---- TLS contexts (tls.c) ----------------------------------------------- *
 *
 * Kafka's ssl.* settings for one listener (server side) or for the
 * connections this broker makes (client side).  The OpenSSL context is
 * built at st_tls_ctx_new, which fails naming the setting at fault; the
 * files are looked at again by st_tls_ctx_reload_check and a changed
 * keystore or truststore is loaded without a restart.  Strings are copied;
 * passwords are wiped when the context goes. */
typedef struct st_tls_ctx st_tls_ctx_t;

typedef struct st_tls_config {
    const char *name;                /* for the log: "listener SSL" */
    int client;                      /* a client context (outbound) */
    const char *keystore_type;       /* "PEM" (key and chain in one file) or "PKCS12" */
    const char *keystore_location;   /* required for a server */
    const char *keystore_password;   /* PKCS12 */
    const char *key_password;        /* an encrypted PEM key */
    const char *truststore_type;     /* "PEM" */
    const char *truststore_location; /* CAs: of clients (server), of servers (client;
                                      * empty: the system's) */
    const char *client_auth;         /* none | requested | required (server) */
    const char *enabled_protocols;   /* "TLSv1.2,TLSv1.3": nothing older is allowed */
    const char *cipher_suites;       /* IANA or OpenSSL names; empty: OpenSSL's defaults */
    const char *endpoint_identification; /* client: "https" checks the host name */
} st_tls_config_t;

st_err_t st_tls_ctx_new(const st_tls_config_t *cfg, st_tls_ctx_t **out, char *err,
                        size_t errlen);
void st_tls_ctx_destroy(st_tls_ctx_t *t);
/* At most once a second (now_ms: st_mono_ms): reload the files if one
 * changed.  1 reloaded, 0 nothing to do, -1 a change that does not load
 * (logged once; the old context stays).  One thread at a time. */
int st_tls_ctx_reload_check(st_tls_ctx_t *t, int64_t now_ms);
int st_tls_ctx_is_client(const st_tls_ctx_t *t);

/* How this broker (or the strata tool) reaches a secured listener: TLS
 * with a client context, and SASL (SaslHandshake v1, then SaslAuthenticate
 * until the mechanism is done) as user.  All borrowed. */
typedef struct st_client_security {
    st_tls_ctx_t *tls;   /* NULL: plaintext */
    st_sasl_mech_t mech; /* ST_SASL_NONE: no SASL */
    const char *user;
    const char *password;
} st_client_security_t;

typedef struct st_listener_spec {
    char name[32]; /* PLAINTEXT */
    char host[256];
    int port;      /* 0: any free port */
    st_tls_ctx_t *tls; /* borrowed, outlives the net; NULL: plaintext */
} st_listener_spec_t;

typedef struct st_net_config {
    int nthreads;
    int64_t max_request_bytes;     /* socket.request.max.bytes */
    int max_inflight_per_conn;     /* reading pauses beyond this */
    int64_t idle_timeout_ms;       /* connections.max.idle.ms */
    st_listener_spec_t *listeners;
    int nlisteners;
    /* Limits; a zeroed field means none, so a config that names only the
     * fields above accepts and reads as before. */
    int max_connections;           /* accepting waits at this many (<= 0: no limit) */
    int max_connections_per_ip;    /* max.connections.per.ip (<= 0 without overrides: none) */
    const char *ip_overrides;      /* max.connections.per.ip.overrides; borrowed */
    int64_t queued_max_request_bytes; /* <= 0: no bound */
} st_net_config_t;

/* One max.connections.per.ip.overrides entry: an address (IPv4 as an
 * IPv4-mapped IPv6 address) and its limit. */
typedef struct st_net_ip_limit {
    uint8_t addr[16];
    int32_t max;
} st_net_ip_limit_t;

/* Parse "host:count,ip:count,[ipv6]:count".  With resolve, every address
 * of each host is looked up and *out (malloc'ed) gets one entry per
 * address; without, only the syntax is checked and out may be NULL. */
st_err_t st_net_ip_overrides_parse(const char *text, int resolve, st_net_ip_limit_t **out,
                                   int *n, char *err, size_t errlen);

st_err_t st_net_new(const st_net_config_t *cfg, const st_net_hooks_t *hooks, st_net_t **out,
                    char *err, size_t errlen);
/* The port a listener actually bound (for port 0). */
int st_net_bound_port(st_net_t *n, int listener);
/* Requests of an API key ended since start (answered, or dropped with their
 * connection): how long each took from its arrival (Kafka's TotalTimeMs:
 * the time it waited parked included).  Any thread. */
#define ST_NET_API_KEYS 128
void st_net_request_time(st_net_t *n, int16_t api_key, st_histo_t *out);
/* The same requests' time by phase, Kafka's RequestMetrics (answered
 * requests only):
 *   LOCAL   arrival to its handler's return, or to the answer when the
 *           handler answered at once;
 *   REMOTE  parked (in purgatory or on a worker) until the wake-up or job
 *           that answered it was posted;
 *   RESPONSE_QUEUE  from that post until the I/O thread ran it;
 *   RESPONSE_SEND   from the answer to its last byte written. */
typedef enum {
    ST_NET_PHASE_LOCAL,
    ST_NET_PHASE_REMOTE,
    ST_NET_PHASE_RESPONSE_QUEUE,
    ST_NET_PHASE_RESPONSE_SEND,
    ST_NET_PHASES
} st_net_phase_t;
void st_net_request_phase_time(st_net_t *n, st_net_phase_t phase, int16_t api_key,
                               st_histo_t *out);
/* Before st_net_start: the connection limit (<= 0: none), once the broker
 * knows how many fds its own files took at start-up. */
void st_net_set_max_connections(st_net_t *n, int max);
void st_net_start(st_net_t *n);
/* Stop accepting; finish in-flight requests (on_drain completes parked
 * ones); close connections; join the threads. */
void st_net_stop(st_net_t *n);
void st_net_destroy(st_net_t *n);
int st_net_nloops(st_net_t *n);
/* Connections open now (any thread). */
int st_net_connections(st_net_t *n);
st_loop_t *st_net_loop(st_net_t *n, int i);

/* ---- loops -------------------------------------------------------------- */
int st_loop_index(const st_loop_t *loop);
void *st_loop_user(st_loop_t *loop);
void st_loop_set_user(st_loop_t *loop, void *user);
/* From any thread: run fn(arg) on the loop's thread. */
void st_loop_post(st_loop_t *loop, st_job_cb fn, void *arg);
/* From any thread: have the loop call hooks.on_wake soon (coalesced). */
void st_loop_wake(st_loop_t *loop);
/* The loop whose thread calls this, or NULL on any other thread. */
st_loop_t *st_loop_current(void);
/* 1 once the loop's thread has returned (after st_net_stop): jobs posted
 * from then on never run; st_net_destroy frees them unrun. */
int st_loop_exited(st_loop_t *loop);

/* Other users of a loop (the outbound client below): a file descriptor in
 * the loop's epoll, whose cb runs on the loop's thread, and a ticker called
 * once per loop iteration.  All on the loop's thread (or before
 * st_net_start).  An st_loop_io_t must stay allocated until its ticker is
 * done: an event collected before st_loop_io_del may still be delivered in
 * the same iteration (then fd is -1 and cb is not called). */
typedef struct st_loop_io st_loop_io_t;
struct st_loop_io {
    int fd;
    uint32_t events; /* EPOLL* */
    void (*cb)(st_loop_io_t *io, uint32_t events);
};
st_err_t st_loop_io_add(st_loop_t *loop, st_loop_io_t *io, int fd, uint32_t events);
void st_loop_io_mod(st_loop_t *loop, st_loop_io_t *io, uint32_t events);
void st_loop_io_del(st_loop_t *loop, st_loop_io_t *io);

#define ST_LOOP_TICKER_DONE (-2)
typedef struct st_loop_ticker st_loop_ticker_t;
struct st_loop_ticker {
    /* Before each epoll wait: ms until it must run again (-1: no deadline),
     * or ST_LOOP_TICKER_DONE to be unlinked and never touched again. */
    int64_t (*tick)(st_loop_ticker_t *t, int64_t now_ms);
    /* The loop is exiting (st_net_stop): complete what is pending. */
    void (*stop)(st_loop_ticker_t *t);
    st_loop_ticker_t *next;
};
void st_loop_ticker_add(st_loop_t *loop, st_loop_ticker_t *t);
void st_loop_ticker_del(st_loop_t *loop, st_loop_ticker_t *t);

/* ---- the outbound client (broker to broker) ----------------------------- *
 *
 * One connection to one peer (another broker, a controller), on one loop,
 * speaking Kafka's protocol with the codec's tables: Raft, forwarding to
 * the controller and replica fetchers share it (DESIGN.md, "Shape for the
 * cluster").  netclient.c's top comment has the state machine.
 *
 *   - st_netclient_send encodes at once (the body is borrowed for the call)
 *     with the request header version the API's flexible versions call
 *     for; the client gives the correlation id on its loop, so ids grow in
 *     the order requests go out, whichever thread sent; requests go out in
 *     order, many in flight, at most max_inflight_bytes of them (one always
 *     may), and each answer is matched to the oldest request in flight by
 *     correlation id (a Kafka broker answers a connection in order).
 *   - The callback runs exactly once, on the loop's thread, never inside
 *     st_netclient_send: with the response (header decoded, body bytes) or
 *     an error: REQUEST_TIMED_OUT (request.timeout.ms), CONNECTION_LOST,
 *     CONNECTION_REFUSED, CANCELLED (client destroyed, loop stopped).  It may
 *     send more requests; it must not destroy the client.
 *   - Connects when there is something to send; after a failed or lost
 *     connection waits reconnect.backoff.ms, doubling up to
 *     reconnect.backoff.max.ms (Kafka's defaults: 50 ms and 1 s, +-20%
 *     jitter), reset once connected.  A request timing out in flight closes
 *     the connection, as Kafka's NetworkClient does: answers behind it
 *     would otherwise wait on it.
 *   - Bytes from the peer are hostile: a size above max_response_bytes or
 *     too small for a header, a correlation id that is not the oldest in
 *     flight, a truncated header close the connection with a logged reason,
 *     and everything in flight fails with CONNECTION_LOST.
 *
 * Threads: created, destroyed and driven on its loop's thread (or before
 * st_net_start / after st_net_stop).  st_netclient_send may also be called
 * from any other thread (Raft and forwarding run on the controller
 * thread): the request is encoded there and handed to the loop through
 * the client's mailbox (a mutex and the loop's eventfd).  No thread may
 * send once st_netclient_destroy has been called, nor from another thread
 * once the loops are stopped (the mailbox job would never run). */
typedef struct st_netclient st_netclient_t;

typedef struct st_netclient_config {
    const char *host; /* resolved once, by st_netclient_new */
    int port;
    const char *client_id;            /* copied; NULL: "strata" */
    int64_t request_timeout_ms;       /* default per request; 0: 30000 (request.timeout.ms) */
    int64_t reconnect_backoff_ms;     /* 0: 50 (reconnect.backoff.ms) */
    int64_t reconnect_backoff_max_ms; /* 0: 1000 (reconnect.backoff.max.ms) */
    int64_t max_inflight_bytes;       /* 0: 64 MiB of encoded requests awaiting answers */
    int64_t max_response_bytes;       /* 0: 100 MiB (a larger size closes the connection) */
    const st_client_security_t *sec;  /* borrowed for the client's life; NULL: plaintext */
} st_netclient_config_t;

typedef struct st_netclient_resp {
    st_err_t err;    /* ST_OK: frame and body are set */
    const char *why; /* with an error: what happened (may be NULL) */
    const st_api_t *api;
    int16_t version;
    int32_t correlation_id;
    const uint8_t *frame; /* the response after its size: header and body */
    size_t len;
    const uint8_t *body; /* after the response header */
    size_t body_len;
    int64_t sent_us; /* st_mono_us when it was queued */
} st_netclient_resp_t;

/* The bytes are valid only during the call: decode (st_netclient_decode)
 * or copy what must outlive it. */
typedef void (*st_netclient_cb)(st_netclient_t *c, const st_netclient_resp_t *resp, void *arg);

st_err_t st_netclient_new(st_loop_t *loop, const st_netclient_config_t *cfg,
                          st_netclient_t **out, char *err, size_t errlen);
/* Fails every pending request with CANCELLED (their callbacks run now, on
 * this thread) and closes the connection; the memory goes at the loop's
 * next iteration. */
void st_netclient_destroy(st_netclient_t *c);
/* timeout_ms <= 0: the client's request_timeout_ms.  Errors are returned
 * and the callback is not called: UNSUPPORTED_VERSION (the version is not
 * described), CANCELLED (on the loop, once the client is being destroyed:
 * a callback of st_netclient_destroy that would retry). */
st_err_t st_netclient_send(st_netclient_t *c, int16_t api_key, int version, const void *body,
                           int64_t timeout_ms, st_netclient_cb cb, void *arg);
/* Decode a successful response's body (st_response_decode). */
st_err_t st_netclient_decode(const st_netclient_resp_t *resp, st_arena_t *a, void **body);
st_loop_t *st_netclient_loop(const st_netclient_t *c);
/* Connections established so far (reconnects included). */
int st_netclient_connects(const st_netclient_t *c);
int st_netclient_connected(const st_netclient_t *c);
/* Requests written (or being written) and not yet answered; waiting ones. */
int st_netclient_inflight(const st_netclient_t *c);
int st_netclient_waiting(const st_netclient_t *c);

/* ---- requests (loop thread only) ---------------------------------------- */
/* Encode body as this request's response and send when its turn comes. */
void st_request_respond(st_request_t *req, const void *body);
/* Respond, then close the connection once the answer is written (Kafka
 * closes after an authentication failure's answer). */
void st_request_respond_close(st_request_t *req, const void *body);
/* The request gets no response (Produce with acks=0). */
void st_request_no_response(st_request_t *req);
/* Close the request's connection (after a protocol violation). */
void st_request_close_conn(st_request_t *req, const char *why);
int st_request_conn_open(const st_request_t *req);
/* The index in st_net_config_t.listeners of the listener the request's
 * connection came in on. */
int st_request_listener(const st_request_t *req);
const char *st_request_peer(const st_request_t *req);
/* The server's state of the request's connection (who authenticated,
 * where a SASL exchange stands): NULL until set; free_fn(state) runs when
 * the connection is freed, after its last request.  Loop thread. */
void *st_request_conn_state(const st_request_t *req);
void st_request_conn_set_state(st_request_t *req, void *state, void (*free_fn)(void *));
/* The subject of the certificate the TLS peer presented (RFC 2253, e.g.
 * "CN=alice,O=acme"); "" on plaintext or when it sent none. */
const char *st_request_peer_subject(const st_request_t *req);

#endif /* ST_NET_H */

/*
 * transport.h - what carries a connection's bytes: plaintext (the socket
 * itself) or TLS (OpenSSL over the socket), behind one small ops table, as
 * nginx's c->recv / c->send and Redis's ConnectionType.  Framing, the
 * ordered responses and the handlers above never know which.
 *
 * Every call is non-blocking and answers one of:
 *   > 0   bytes read or written
 *   0     would block: t->want says on what (EPOLLIN or EPOLLOUT; TLS may
 *         need to write to read, or to read to write)
 *   -1    the connection is over: t->why says why ("" for the peer's
 *         orderly close)
 *
 * A write that would block must be retried with the same bytes (the TLS
 * transport may already hold them in a record): the connection's response
 * chain does not move until bytes are acknowledged, so it does.
 *
 * Threads: a transport belongs to its connection's loop thread.  The TLS
 * context (st_tls_ctx_t, net.h) it was made from is shared by every loop;
 * each transport keeps its own reference to the OpenSSL context, so a
 * certificate reload never pulls it from under a live connection.
 */
#ifndef ST_NET_TRANSPORT_H
#define ST_NET_TRANSPORT_H

#include "net.h"

#include <sys/types.h>
#include <sys/uio.h>

typedef struct st_tport st_tport_t;

typedef struct st_tport_ops {
    const char *name; /* "plaintext", "tls" */
    /* 1 when the handshake is done, 0 would block, -1 failed (why) */
    int (*handshake)(st_tport_t *t);
    ssize_t (*recv)(st_tport_t *t, void *buf, size_t n);
    ssize_t (*writev)(st_tport_t *t, const struct iovec *iov, int niov);
    /* n bytes of fd from off; a file shorter than promised is an error
     * (a frame whose length lies must never go out) */
    ssize_t (*sendfile)(st_tport_t *t, int fd, off_t off, size_t n);
    /* bytes already read from the socket and not yet handed out: epoll
     * will not say they are there */
    size_t (*pending)(st_tport_t *t);
    /* best-effort orderly close (TLS close_notify), then free; the
     * descriptor stays open: its owner closes it */
    void (*free)(st_tport_t *t);
} st_tport_ops_t;

struct st_tport {
    const st_tport_ops_t *ops;
    int fd;
    uint32_t want;  /* after a 0: EPOLLIN or EPOLLOUT */
    char why[256];  /* after a -1 */
};

st_tport_t *st_tport_plain_new(int fd);
/* A TLS transport over fd: the server side of an accepted connection, or
 * the client side (server_name: the peer's host, sent as SNI and checked
 * against its certificate when the context verifies hosts).  NULL with
 * err on failure. */
st_tport_t *st_tport_tls_new(st_tls_ctx_t *ctx, int fd, const char *server_name, char *err,
                             size_t errlen);

/* What the TLS handshake established (NULL / 0 for plaintext). */
/* The peer's certificate subject in RFC 2253 form ("CN=alice,O=acme"), or
 * "" when it sent none. */
const char *st_tport_peer_subject(const st_tport_t *t);
/* "TLSv1.3 TLS_AES_256_GCM_SHA384", or "" */
const char *st_tport_describe(const st_tport_t *t);

static inline int st_tport_handshake(st_tport_t *t) { return t->ops->handshake(t); }
static inline ssize_t st_tport_recv(st_tport_t *t, void *buf, size_t n) {
    return t->ops->recv(t, buf, n);
}
static inline ssize_t st_tport_writev(st_tport_t *t, const struct iovec *iov, int niov) {
    return t->ops->writev(t, iov, niov);
}
static inline ssize_t st_tport_sendfile(st_tport_t *t, int fd, off_t off, size_t n) {
    return t->ops->sendfile(t, fd, off, n);
}
static inline size_t st_tport_pending(st_tport_t *t) { return t->ops->pending(t); }
static inline void st_tport_free(st_tport_t *t) {
    if (t) t->ops->free(t);
}

#endif /* ST_NET_TRANSPORT_H */

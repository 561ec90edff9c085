/* kclient.c - see kclient.h.  Frames: int32 size, request header v1 or v2
 * (by the API's flexible versions), body; the answer's header is v0 or v1. */
#include "kclient.h"
#include "transport.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

st_err_t st_kclient_open(st_kclient_t *c, const char *bootstrap, char *err, size_t errlen) {
    char host[300]; /* a host name has at most 253 bytes */
    if (strlen(bootstrap) >= sizeof host) {
        st_snprintf_marked(err, errlen, "%s: too long for host:port", bootstrap);
        return ST_E_INVAL;
    }
    snprintf(host, sizeof host, "%s", bootstrap);
    char *colon = strrchr(host, ':');
    if (!colon) {
        st_snprintf_marked(err, errlen, "%s: expected host:port", bootstrap);
        return ST_E_INVAL;
    }
    *colon = 0;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int rc = st_getaddrinfo(host, colon + 1, &hints, &res);
    if (rc) {
        st_snprintf_marked(err, errlen, "%s: %s", bootstrap, gai_strerror(rc));
        return ST_E_INVAL;
    }
    c->fd = -1;
    struct timeval tv = {30, 0}; /* SO_SNDTIMEO bounds connect too (Linux) */
    for (struct addrinfo *ai = res; ai && c->fd < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) c->fd = fd;
        else if (fd >= 0) close(fd);
    }
    freeaddrinfo(res);
    if (c->fd < 0) {
        st_snprintf_marked(err, errlen, "cannot connect to %s: %s", bootstrap, strerror(errno));
        return ST_E_IO;
    }
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    c->correlation_id = 0;
    /* the socket blocks (with the timeouts above), so does its transport */
    c->tp = c->sec && c->sec->tls ? st_tport_tls_new(c->sec->tls, c->fd, host, err, errlen)
                                  : st_tport_plain_new(c->fd);
    if (!c->tp) {
        st_kclient_close(c);
        return ST_E_IO;
    }
    int hs = st_tport_handshake(c->tp);
    if (hs <= 0) {
        st_snprintf_marked(err, errlen, "TLS handshake with %s failed: %s", bootstrap,
                           hs == 0 ? "timed out" : c->tp->why);
        st_kclient_close(c);
        return ST_E_IO;
    }
    if (c->sec && c->sec->mech != ST_SASL_NONE) {
        st_err_t e = st_kclient_sasl(c, err, errlen);
        if (e) {
            st_kclient_close(c);
            return e;
        }
    }
    return ST_OK;
}

void st_kclient_close(st_kclient_t *c) {
    st_tport_free(c->tp);
    c->tp = NULL;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

static st_err_t io_all(st_tport_t *t, void *p, size_t n, int writing) {
    uint8_t *b = p;
    while (n) {
        struct iovec iov = {b, n};
        ssize_t r = writing ? st_tport_writev(t, &iov, 1) : st_tport_recv(t, b, n);
        if (r == 0) return ST_E_TIMEOUT; /* a blocking socket's timeout */
        if (r < 0) return t->why[0] ? ST_E_IO : ST_E_CLOSED;
        b += r;
        n -= (size_t)r;
    }
    return ST_OK;
}

st_err_t st_kclient_call(st_kclient_t *c, int16_t key, int16_t version, const void *req,
                         st_arena_t *a, void **resp, char *err, size_t errlen) {
    const st_api_t *api = st_api_lookup(key);
    if (!api) {
        snprintf(err, errlen, "API %d is not described", key);
        return ST_E_INVAL;
    }
    st_chain_t ch;
    st_chain_init(&ch);
    st_buf_put_i32(&ch.mem, 0);
    st_req_header_t h = {key, version, ++c->correlation_id,
                         st_str(c->client_id ? c->client_id : "strata-cli")};
    st_req_header_encode(&h, st_api_req_header_version(api, version), &ch.mem);
    st_encode(api->req, version, st_api_flexible(api, version), req, &ch);
    st_be32_put(ch.mem.data, (uint32_t)(ch.mem.len - 4));
    st_err_t e = io_all(c->tp, ch.mem.data, ch.mem.len, 1);
    st_chain_fini(&ch);
    uint8_t size[4];
    if (!e) e = io_all(c->tp, size, 4, 0);
    if (e) {
        snprintf(err, errlen, "%s: %s", api->name, st_err_msg(e));
        return e;
    }
    uint32_t n = st_be32_get(size);
    if (n < 4 || n > (1u << 30)) {
        snprintf(err, errlen, "%s: bad answer size %u", api->name, n);
        return ST_E_CORRUPT;
    }
    uint8_t *frame = st_arena_alloc(a, n);
    e = io_all(c->tp, frame, n, 0);
    if (e) {
        snprintf(err, errlen, "%s: %s", api->name, st_err_msg(e));
        return e;
    }
    st_rd_t r;
    st_rd_init(&r, frame, n);
    if (st_rd_i32(&r) != c->correlation_id) {
        snprintf(err, errlen, "%s: answer to another request", api->name);
        return ST_E_CORRUPT;
    }
    if (st_api_resp_header_version(api, version) >= 1) {
        uint64_t tags = st_rd_uvarint(&r);
        for (uint64_t i = 0; i < tags && !r.err; i++) {
            st_rd_uvarint(&r);
            st_rd_bytes(&r, (size_t)st_rd_uvarint(&r));
        }
    }
    void *out = st_arena_alloc(a, api->resp->size);
    if (st_decode(api->resp, version, st_api_flexible(api, version), &r, a, out)) {
        snprintf(err, errlen, "%s: malformed answer", api->name);
        return ST_E_CORRUPT;
    }
    *resp = out;
    return ST_OK;
}

/* SaslHandshake v1, then SaslAuthenticate v1 with each token until the
 * mechanism ends (KIP-152). */
st_err_t st_kclient_sasl(st_kclient_t *c, char *err, size_t errlen) {
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_err_t e = ST_OK;
    st_sasl_client_t *sc = NULL;
    st_buf_t tok;
    st_buf_init(&tok);
    const char *mech = st_sasl_mech_name(c->sec->mech);
    st_sasl_handshake_req_t hq = {st_str(mech)};
    st_sasl_handshake_resp_t *hr = NULL;
    e = st_kclient_call(c, ST_API_SASL_HANDSHAKE, 1, &hq, &a, (void **)&hr, err, errlen);
    if (e) goto out;
    if (hr->error_code) {
        e = st_err_from_wire(hr->error_code);
        snprintf(err, errlen, "SASL mechanism %s: %s", mech, st_err_msg(e));
        goto out;
    }
    sc = st_sasl_client_new(c->sec->mech, c->sec->user, c->sec->password);
    const uint8_t *in = NULL;
    size_t inlen = 0;
    for (int round = 0; round < 4; round++) {
        char why[256];
        tok.len = 0;
        st_sasl_step_t step = st_sasl_client_step(sc, in, inlen, &tok, why, sizeof why);
        if (step == ST_SASL_FAILED) {
            snprintf(err, errlen, "SASL %s: %s", mech, why);
            e = ST_E_SASL_AUTHENTICATION_FAILED;
            goto out;
        }
        if (step == ST_SASL_DONE && !tok.len) goto out; /* SCRAM: the server proven */
        st_sasl_authenticate_req_t aq = {{tok.data, (int32_t)tok.len}};
        st_sasl_authenticate_resp_t *ar = NULL;
        e = st_kclient_call(c, ST_API_SASL_AUTHENTICATE, 1, &aq, &a, (void **)&ar, err, errlen);
        if (e) goto out;
        if (ar->error_code) {
            e = st_err_from_wire(ar->error_code);
            snprintf(err, errlen, "SASL %s as %s: %.*s", mech, c->sec->user,
                     ar->error_message.len > 0 ? (int)ar->error_message.len : 0,
                     ar->error_message.p ? ar->error_message.p : "");
            goto out;
        }
        if (step == ST_SASL_DONE) goto out; /* PLAIN: the server said yes */
        in = ar->auth_bytes.p;
        inlen = (size_t)ST_MAX(ar->auth_bytes.len, 0);
    }
    snprintf(err, errlen, "SASL %s: the exchange did not end", mech);
    e = ST_E_SASL_AUTHENTICATION_FAILED;
out:
    st_sasl_client_free(sc);
    st_buf_fini(&tok);
    st_arena_fini(&a);
    return e;
}

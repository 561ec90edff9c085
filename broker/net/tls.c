/*
 * tls.c - TLS contexts (Kafka's ssl.* settings, certificate reload) and
 * the TLS transport (OpenSSL 3 over a non-blocking socket).
 *
 * A context (st_tls_ctx_t) holds the OpenSSL context its settings make and
 * the files' identity (device, inode, size, mtime) when they were read.
 * st_tls_ctx_reload_check, called by loop 0 as it accepts (at most once a
 * second), looks at the files again; when one changed it builds a whole
 * new OpenSSL context and swaps it in under ctx->lock, so new connections
 * get the new certificate while live ones keep the reference they took
 * (KIP-226's dynamic keystore update, driven by the file).  A change that
 * does not load (a half-written file, a key that does not match) is said
 * once and the old context stays.
 *
 * The transport: the handshake is driven by whichever of read or write the
 * loop sees first; after it, SSL_read / SSL_write move application data.
 *
 *   writes     bytes are staged (at most STAGE_BYTES, copied from the
 *              caller's iovecs, or read from the file for sendfile) and
 *              SSL_write sends the stage; a write that would block keeps
 *              the stage and is retried with it, whatever the caller
 *              passes (the same bytes, since it did not advance);
 *   sendfile   with kernel TLS the file goes out through SSL_sendfile,
 *              without a copy; without it (said once in the log) its
 *              bytes are read into the stage;
 *   reads      SSL_read with read ahead (one read() for many records);
 *              bytes OpenSSL holds, decrypted or not, are `pending` (epoll
 *              cannot see them, the loop reads again before it waits).
 *
 * Only TLS 1.2 and 1.3 are ever enabled; renegotiation is off.
 */
#include "transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define STAGE_BYTES (64 * 1024)
#define READ_AHEAD_BYTES (64 * 1024)
#define RELOAD_CHECK_MS 1000

typedef struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int present;
} file_id_t;

struct st_tls_ctx {
    pthread_mutex_t lock;
    SSL_CTX *ssl; /* current; a transport keeps its own reference */
    int client;
    char *name; /* what the log calls it: "listener SSL", "inter-broker" */
    /* the settings, copied */
    char *keystore_type, *keystore_location, *keystore_password, *key_password;
    char *truststore_type, *truststore_location;
    char *client_auth, *enabled_protocols, *cipher_suites, *endpoint_identification;
    file_id_t keystore_id, truststore_id;
    int64_t next_check_ms; /* loop 0 only */
    int reload_failed;     /* the change seen last failed: said once */
    int ktls_said;         /* atomic */
};

static char *dup_or_empty(const char *s) { return st_strdup(s ? s : ""); }

/* The newest OpenSSL error as text (the queue is cleared). */
static void ssl_error_text(char *out, size_t n, const char *fallback) {
    unsigned long e = ERR_peek_last_error();
    if (!e) {
        snprintf(out, n, "%s", fallback);
    } else {
        const char *reason = ERR_reason_error_string(e);
        if (reason) snprintf(out, n, "%s", reason);
        else ERR_error_string_n(e, out, n);
    }
    ERR_clear_error();
}

static void file_identity(const char *path, file_id_t *out) {
    struct stat st;
    memset(out, 0, sizeof *out);
    if (!path || !path[0] || stat(path, &st) != 0) return;
    out->present = 1;
    out->dev = st.st_dev;
    out->ino = st.st_ino;
    out->size = st.st_size;
    out->mtime = st.st_mtim;
}

static int file_changed(const file_id_t *a, const file_id_t *b) {
    return a->present != b->present || a->dev != b->dev || a->ino != b->ino ||
           a->size != b->size || a->mtime.tv_sec != b->mtime.tv_sec ||
           a->mtime.tv_nsec != b->mtime.tv_nsec;
}

/* ssl.enabled.protocols: TLSv1.2 and TLSv1.3 only.  Sets min and max. */
static st_err_t set_protocols(SSL_CTX *s, const char *list, char *err, size_t errlen) {
    int lo = 0, hi = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list && list[0] ? list : "TLSv1.2,TLSv1.3");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        int v;
        if (!strcmp(tok, "TLSv1.2")) v = TLS1_2_VERSION;
        else if (!strcmp(tok, "TLSv1.3")) v = TLS1_3_VERSION;
        else {
            snprintf(err, errlen,
                     "ssl.enabled.protocols: %s is not allowed (TLSv1.2 and TLSv1.3 only)", tok);
            return ST_E_CONFIG;
        }
        if (!lo || v < lo) lo = v;
        if (!hi || v > hi) hi = v;
    }
    if (!lo) {
        snprintf(err, errlen, "ssl.enabled.protocols: empty (say TLSv1.2, TLSv1.3 or both)");
        return ST_E_CONFIG;
    }
    SSL_CTX_set_min_proto_version(s, lo);
    SSL_CTX_set_max_proto_version(s, hi);
    return ST_OK;
}

/* ssl.cipher.suites: Kafka gives IANA names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
 * TLS_AES_128_GCM_SHA256); OpenSSL names are taken too.  TLS 1.3 suites go
 * to the ciphersuites list, the rest to the cipher list. */
static st_err_t set_ciphers(SSL_CTX *s, const char *list, char *err, size_t errlen) {
    if (!list || !list[0]) return ST_OK;
    st_buf_t v12, v13;
    st_buf_init(&v12);
    st_buf_init(&v13);
    st_err_t e = ST_OK;
    char *copy = st_strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ", ", &save); tok && !e; tok = strtok_r(NULL, ", ", &save)) {
        int tls13 = !strncmp(tok, "TLS_AES_", 8) || !strncmp(tok, "TLS_CHACHA20_", 13);
        if (tls13) {
            st_buf_printf(&v13, "%s%s", v13.len ? ":" : "", tok);
            continue;
        }
        const char *name = OPENSSL_cipher_name(tok);
        if (!name || !strcmp(name, "(NONE)")) name = tok; /* already OpenSSL's name */
        st_buf_printf(&v12, "%s%s", v12.len ? ":" : "", name);
    }
    free(copy);
    if (v12.len) {
        st_buf_put(&v12, "", 1);
        if (!SSL_CTX_set_cipher_list(s, (const char *)v12.data)) {
            snprintf(err, errlen, "ssl.cipher.suites: none of '%s' is a TLS 1.2 cipher suite", list);
            e = ST_E_CONFIG;
        }
    }
    if (!e && v13.len) {
        st_buf_put(&v13, "", 1);
        if (!SSL_CTX_set_ciphersuites(s, (const char *)v13.data)) {
            snprintf(err, errlen, "ssl.cipher.suites: '%s' names an unknown TLS 1.3 suite", list);
            e = ST_E_CONFIG;
        }
    }
    ERR_clear_error();
    st_buf_fini(&v12);
    st_buf_fini(&v13);
    return e;
}

static int key_password_cb(char *buf, int size, int rwflag, void *u) {
    (void)rwflag;
    const char *pw = u;
    int n = (int)strlen(pw);
    if (n > size) n = size;
    memcpy(buf, pw, (size_t)n);
    return n;
}

/* The certificate chain and key: PEM (key and chain in one file, as
 * Kafka's ssl.keystore.type=PEM) or PKCS12. */
static st_err_t load_keystore(st_tls_ctx_t *t, SSL_CTX *s, char *err, size_t errlen) {
    const char *path = t->keystore_location;
    char why[256];
    if (!strcasecmp(t->keystore_type, "PKCS12")) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            snprintf(err, errlen, "ssl.keystore.location: cannot read %s: %s", path, strerror(errno));
            return ST_E_CONFIG;
        }
        PKCS12 *p12 = d2i_PKCS12_fp(f, NULL);
        fclose(f);
        EVP_PKEY *key = NULL;
        X509 *cert = NULL;
        STACK_OF(X509) *ca = NULL;
        int ok = p12 && PKCS12_parse(p12, t->keystore_password, &key, &cert, &ca);
        PKCS12_free(p12);
        if (ok) ok = SSL_CTX_use_certificate(s, cert) && SSL_CTX_use_PrivateKey(s, key);
        for (int i = 0; ok && ca && i < sk_X509_num(ca); i++) {
            X509 *x = sk_X509_value(ca, i);
            ok = SSL_CTX_add1_chain_cert(s, x);
        }
        EVP_PKEY_free(key);
        X509_free(cert);
        sk_X509_pop_free(ca, X509_free);
        if (!ok) {
            ssl_error_text(why, sizeof why, "not a PKCS12 file");
            snprintf(err, errlen,
                     "ssl.keystore.location: %s is not a PKCS12 keystore this "
                     "ssl.keystore.password opens (%s)",
                     path, why);
            return ST_E_CONFIG;
        }
    } else if (!strcasecmp(t->keystore_type, "PEM")) {
        if (access(path, R_OK) != 0) {
            snprintf(err, errlen, "ssl.keystore.location: cannot read %s: %s", path, strerror(errno));
            return ST_E_CONFIG;
        }
        if (SSL_CTX_use_certificate_chain_file(s, path) != 1) {
            ssl_error_text(why, sizeof why, "no certificate");
            snprintf(err, errlen, "ssl.keystore.location: no certificate chain in %s (%s)", path,
                     why);
            return ST_E_CONFIG;
        }
        SSL_CTX_set_default_passwd_cb(s, key_password_cb);
        SSL_CTX_set_default_passwd_cb_userdata(s, t->key_password);
        int ok = SSL_CTX_use_PrivateKey_file(s, path, SSL_FILETYPE_PEM) == 1;
        SSL_CTX_set_default_passwd_cb_userdata(s, NULL);
        if (!ok) {
            ssl_error_text(why, sizeof why, "no private key");
            snprintf(err, errlen,
                     "ssl.keystore.location: no private key in %s that ssl.key.password opens (%s)",
                     path, why);
            return ST_E_CONFIG;
        }
    } else {
        snprintf(err, errlen, "ssl.keystore.type: '%s' is not PEM or PKCS12", t->keystore_type);
        return ST_E_CONFIG;
    }
    if (SSL_CTX_check_private_key(s) != 1) {
        ssl_error_text(why, sizeof why, "they do not match");
        snprintf(err, errlen,
                 "ssl.keystore.location: the private key in %s is not the certificate's (%s)",
                 path, why);
        return ST_E_CONFIG;
    }
    return ST_OK;
}

static st_err_t load_truststore(st_tls_ctx_t *t, SSL_CTX *s, char *err, size_t errlen) {
    char why[256];
    if (strcasecmp(t->truststore_type, "PEM")) {
        snprintf(err, errlen, "ssl.truststore.type: '%s' is not PEM", t->truststore_type);
        return ST_E_CONFIG;
    }
    if (!t->truststore_location[0]) {
        if (t->client) SSL_CTX_set_default_verify_paths(s); /* the system's CAs */
        return ST_OK;
    }
    if (access(t->truststore_location, R_OK) != 0) {
        snprintf(err, errlen, "ssl.truststore.location: cannot read %s: %s",
                 t->truststore_location, strerror(errno));
        return ST_E_CONFIG;
    }
    if (SSL_CTX_load_verify_locations(s, t->truststore_location, NULL) != 1) {
        ssl_error_text(why, sizeof why, "no certificate");
        snprintf(err, errlen, "ssl.truststore.location: no CA certificate in %s (%s)",
                 t->truststore_location, why);
        return ST_E_CONFIG;
    }
    if (!t->client) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->truststore_location);
        if (names) SSL_CTX_set_client_CA_list(s, names);
    }
    ERR_clear_error();
    return ST_OK;
}

/* A new OpenSSL context from t's settings and files. */
static st_err_t build(st_tls_ctx_t *t, SSL_CTX **out, char *err, size_t errlen) {
    SSL_CTX *s = SSL_CTX_new(t->client ? TLS_client_method() : TLS_server_method());
    if (!s) {
        snprintf(err, errlen, "cannot create a TLS context");
        return ST_E_NOMEM;
    }
    SSL_CTX_set_options(s, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE
#ifdef SSL_OP_ENABLE_KTLS
                               | SSL_OP_ENABLE_KTLS
#endif
    );
    SSL_CTX_set_mode(s, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
    /* Read ahead: one read() takes in as many records as the socket holds
     * (up to the buffer), not a 5-byte header then a body per record.
     * librdkafka sends a produce's small values as records of their own,
     * so without it the broker made two read()s per ~1 KB record. */
    SSL_CTX_set_read_ahead(s, 1);
    SSL_CTX_set_default_read_buffer_len(s, READ_AHEAD_BYTES);
    st_err_t e = set_protocols(s, t->enabled_protocols, err, errlen);
    if (!e) e = set_ciphers(s, t->cipher_suites, err, errlen);
    if (!e && (t->keystore_location[0] || !t->client)) {
        if (!t->keystore_location[0]) {
            snprintf(err, errlen, "ssl.keystore.location: an SSL listener needs a keystore "
                                  "(its certificate chain and private key)");
            e = ST_E_CONFIG;
        } else {
            e = load_keystore(t, s, err, errlen);
        }
    }
    if (!e) e = load_truststore(t, s, err, errlen);
    if (!e) {
        if (t->client) {
            SSL_CTX_set_verify(s, SSL_VERIFY_PEER, NULL);
        } else if (!strcasecmp(t->client_auth, "required")) {
            SSL_CTX_set_verify(s, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        } else if (!strcasecmp(t->client_auth, "requested")) {
            SSL_CTX_set_verify(s, SSL_VERIFY_PEER, NULL);
        } else if (!t->client_auth[0] || !strcasecmp(t->client_auth, "none")) {
            SSL_CTX_set_verify(s, SSL_VERIFY_NONE, NULL);
        } else {
            snprintf(err, errlen, "ssl.client.auth: '%s' is not none, requested or required",
                     t->client_auth);
            e = ST_E_CONFIG;
        }
    }
    if (!e && !t->client) {
        /* session resumption within this context only */
        static const unsigned char sid[] = "strata";
        SSL_CTX_set_session_id_context(s, sid, sizeof sid - 1);
    }
    if (e) {
        SSL_CTX_free(s);
        ERR_clear_error();
        return e;
    }
    *out = s;
    return ST_OK;
}

st_err_t st_tls_ctx_new(const st_tls_config_t *cfg, st_tls_ctx_t **out, char *err,
                        size_t errlen) {
    st_tls_ctx_t *t = st_calloc(1, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    t->client = cfg->client;
    t->name = dup_or_empty(cfg->name);
    t->keystore_type = st_strdup(cfg->keystore_type && cfg->keystore_type[0] ? cfg->keystore_type
                                                                             : "PEM");
    t->keystore_location = dup_or_empty(cfg->keystore_location);
    t->keystore_password = dup_or_empty(cfg->keystore_password);
    t->key_password = dup_or_empty(cfg->key_password);
    t->truststore_type = st_strdup(
        cfg->truststore_type && cfg->truststore_type[0] ? cfg->truststore_type : "PEM");
    t->truststore_location = dup_or_empty(cfg->truststore_location);
    t->client_auth = dup_or_empty(cfg->client_auth);
    t->enabled_protocols = dup_or_empty(cfg->enabled_protocols);
    t->cipher_suites = dup_or_empty(cfg->cipher_suites);
    t->endpoint_identification = dup_or_empty(cfg->endpoint_identification);
    file_identity(t->keystore_location, &t->keystore_id);
    file_identity(t->truststore_location, &t->truststore_id);
    st_err_t e = build(t, &t->ssl, err, errlen);
    if (e) {
        st_tls_ctx_destroy(t);
        return e;
    }
    t->next_check_ms = st_mono_ms() + RELOAD_CHECK_MS;
    *out = t;
    return ST_OK;
}

static void wipe_free(char *s) {
    if (!s) return;
    OPENSSL_cleanse(s, strlen(s));
    free(s);
}

void st_tls_ctx_destroy(st_tls_ctx_t *t) {
    if (!t) return;
    SSL_CTX_free(t->ssl);
    pthread_mutex_destroy(&t->lock);
    free(t->name);
    free(t->keystore_type);
    free(t->keystore_location);
    wipe_free(t->keystore_password);
    wipe_free(t->key_password);
    free(t->truststore_type);
    free(t->truststore_location);
    free(t->client_auth);
    free(t->enabled_protocols);
    free(t->cipher_suites);
    free(t->endpoint_identification);
    free(t);
}

int st_tls_ctx_reload_check(st_tls_ctx_t *t, int64_t now_ms) {
    if (now_ms < t->next_check_ms) return 0;
    t->next_check_ms = now_ms + RELOAD_CHECK_MS;
    file_id_t ks, ts;
    file_identity(t->keystore_location, &ks);
    file_identity(t->truststore_location, &ts);
    if (!file_changed(&ks, &t->keystore_id) && !file_changed(&ts, &t->truststore_id)) return 0;
    char err[512];
    SSL_CTX *fresh = NULL;
    if (build(t, &fresh, err, sizeof err)) {
        /* A file being rewritten may not load yet: try again at the next
         * check, but say so only once per change. */
        if (!t->reload_failed)
            ST_WARN("net", "TLS (%s): the changed files do not load, keeping the old ones: %s",
                    t->name, err);
        t->reload_failed = 1;
        return -1;
    }
    t->keystore_id = ks;
    t->truststore_id = ts;
    t->reload_failed = 0;
    pthread_mutex_lock(&t->lock);
    SSL_CTX *old = t->ssl;
    t->ssl = fresh;
    pthread_mutex_unlock(&t->lock);
    SSL_CTX_free(old); /* live connections keep their own reference */
    ST_INFO("net", "TLS (%s): reloaded %s%s%s; new connections use it", t->name,
            t->keystore_location[0] ? t->keystore_location : "",
            t->keystore_location[0] && t->truststore_location[0] ? " and " : "",
            t->truststore_location);
    return 1;
}

int st_tls_ctx_is_client(const st_tls_ctx_t *t) { return t->client; }

/* ---- the transport ------------------------------------------------------- */

typedef struct tls_tport {
    st_tport_t base;
    st_tls_ctx_t *owner;
    SSL *ssl;
    int done;     /* handshake finished */
    int failed;   /* a fatal error: no close_notify */
    int ktls_send;
    uint8_t *stage;
    size_t staged; /* bytes in the stage SSL_write has not taken yet */
    char subject[512];
    char desc[96];
} tls_tport_t;

/* One SSL_* call's outcome: > 0 passes, 0 would block, -1 over. */
static ssize_t tls_result(tls_tport_t *tt, int r, const char *what) {
    if (r > 0) return r;
    int e = SSL_get_error(tt->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        tt->base.want = EPOLLIN;
        return 0;
    case SSL_ERROR_WANT_WRITE:
        tt->base.want = EPOLLOUT;
        return 0;
    case SSL_ERROR_ZERO_RETURN: /* the peer's close_notify */
        tt->base.why[0] = 0;
        ERR_clear_error();
        return -1;
    case SSL_ERROR_SYSCALL:
        if (errno == EAGAIN || errno == EINTR) {
            /* seen with a socket write that would block mid-record */
            tt->base.want = !strcmp(what, "read") ? EPOLLIN : EPOLLOUT;
            ERR_clear_error();
            return 0;
        }
        tt->failed = 1;
        if (ERR_peek_last_error()) {
            char why[200];
            ssl_error_text(why, sizeof why, "error");
            snprintf(tt->base.why, sizeof tt->base.why, "TLS %s: %s", what, why);
        } else if (errno) {
            snprintf(tt->base.why, sizeof tt->base.why, "TLS %s: %s", what, strerror(errno));
        } else if (!tt->done) {
            snprintf(tt->base.why, sizeof tt->base.why,
                     "the peer closed the connection during the TLS handshake");
        } else {
            tt->base.why[0] = 0; /* closed without close_notify */
        }
        ERR_clear_error();
        return -1;
    default: {
        tt->failed = 1;
        char why[200];
        ssl_error_text(why, sizeof why, "error");
        long v = SSL_get_verify_result(tt->ssl);
        if (!tt->done && v != X509_V_OK)
            snprintf(tt->base.why, sizeof tt->base.why, "%s (%s)", why,
                     X509_verify_cert_error_string(v));
        else if (!tt->done)
            snprintf(tt->base.why, sizeof tt->base.why, "%s", why);
        else
            snprintf(tt->base.why, sizeof tt->base.why, "TLS %s failed: %s", what, why);
        return -1;
    }
    }
}

static void handshake_done(tls_tport_t *tt) {
    tt->done = 1;
    const SSL_CIPHER *c = SSL_get_current_cipher(tt->ssl);
    snprintf(tt->desc, sizeof tt->desc, "%s %s", SSL_get_version(tt->ssl),
             c ? SSL_CIPHER_standard_name(c) : "?");
    X509 *peer = SSL_get0_peer_certificate(tt->ssl);
    if (peer) {
        BIO *b = BIO_new(BIO_s_mem());
        if (b) {
            X509_NAME_print_ex(b, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253);
            int n = BIO_read(b, tt->subject, (int)sizeof tt->subject - 1);
            tt->subject[n > 0 ? n : 0] = 0;
            BIO_free(b);
        }
    }
    tt->ktls_send = BIO_get_ktls_send(SSL_get_wbio(tt->ssl)) > 0;
    /* said once, by a server: its fetch answers are what sendfile carries */
    if (!tt->ktls_send && !tt->owner->client &&
        !__atomic_exchange_n(&tt->owner->ktls_said, 1, __ATOMIC_RELAXED))
        ST_INFO("net",
                "TLS (%s): kernel TLS is not available here (no 'tls' in "
                "/proc/sys/net/ipv4/tcp_available_ulp, or the cipher is not one it offloads): "
                "fetch data over TLS is read into user space and encrypted there",
                tt->owner->name);
    ERR_clear_error();
}

static int tls_handshake(st_tport_t *t) {
    tls_tport_t *tt = (tls_tport_t *)t;
    if (tt->done) return 1;
    ERR_clear_error();
    ssize_t r = tls_result(tt, SSL_do_handshake(tt->ssl), "handshake");
    if (r > 0) {
        handshake_done(tt);
        return 1;
    }
    return (int)r;
}

static ssize_t tls_recv(st_tport_t *t, void *buf, size_t n) {
    tls_tport_t *tt = (tls_tport_t *)t;
    if (n > INT32_MAX) n = INT32_MAX;
    ERR_clear_error();
    return tls_result(tt, SSL_read(tt->ssl, buf, (int)n), "read");
}

/* SSL_write of the stage; moves what is left to its front. */
static ssize_t stage_write(tls_tport_t *tt) {
    ERR_clear_error();
    ssize_t r = tls_result(tt, SSL_write(tt->ssl, tt->stage, (int)tt->staged), "write");
    if (r <= 0) return r;
    tt->staged -= (size_t)r;
    if (tt->staged) memmove(tt->stage, tt->stage + r, tt->staged);
    else {
        free(tt->stage); /* an idle connection holds no stage */
        tt->stage = NULL;
    }
    return r;
}

static ssize_t tls_writev(st_tport_t *t, const struct iovec *iov, int niov) {
    tls_tport_t *tt = (tls_tport_t *)t;
    if (!tt->staged) {
        if (niov >= 1 && iov[0].iov_len >= STAGE_BYTES) {
            /* large enough to go as it is: no copy */
            ERR_clear_error();
            size_t n = iov[0].iov_len > INT32_MAX ? INT32_MAX : iov[0].iov_len;
            return tls_result(tt, SSL_write(tt->ssl, iov[0].iov_base, (int)n), "write");
        }
        if (!tt->stage) tt->stage = st_malloc(STAGE_BYTES);
        for (int i = 0; i < niov && tt->staged < STAGE_BYTES; i++) {
            size_t k = ST_MIN(iov[i].iov_len, STAGE_BYTES - tt->staged);
            memcpy(tt->stage + tt->staged, iov[i].iov_base, k);
            tt->staged += k;
        }
        if (!tt->staged) return 0;
    }
    return stage_write(tt);
}

static ssize_t tls_sendfile(st_tport_t *t, int fd, off_t off, size_t n) {
    tls_tport_t *tt = (tls_tport_t *)t;
    if (tt->ktls_send && !tt->staged) {
        ERR_clear_error();
        ossl_ssize_t r = SSL_sendfile(tt->ssl, fd, off, n, 0);
        if (r > 0) return r;
        if (r == 0) {
            snprintf(t->why, sizeof t->why, "file range vanished while sending");
            return -1;
        }
        return tls_result(tt, -1, "sendfile");
    }
    if (!tt->staged) {
        if (!tt->stage) tt->stage = st_malloc(STAGE_BYTES);
        size_t want = ST_MIN(n, (size_t)STAGE_BYTES);
        ssize_t got = pread(fd, tt->stage, want, off);
        if (got <= 0) {
            snprintf(t->why, sizeof t->why, "%s",
                     got == 0 ? "file range vanished while sending" : strerror(errno));
            return -1;
        }
        tt->staged = (size_t)got;
    }
    return stage_write(tt);
}

static size_t tls_pending(st_tport_t *t) {
    tls_tport_t *tt = (tls_tport_t *)t;
    /* with read ahead, whole records may wait in OpenSSL's buffer beyond
     * the one being read (SSL_pending counts only that one) */
    int p = SSL_pending(tt->ssl);
    return p > 0 ? (size_t)p : SSL_has_pending(tt->ssl) ? 1 : 0;
}

static void tls_free(st_tport_t *t) {
    tls_tport_t *tt = (tls_tport_t *)t;
    if (tt->done && !tt->failed) {
        /* close_notify, once, without waiting for the peer's */
        ERR_clear_error();
        SSL_shutdown(tt->ssl);
        ERR_clear_error();
    }
    SSL_free(tt->ssl);
    free(tt->stage);
    free(tt);
}

static const st_tport_ops_t tls_ops = {
    .name = "tls",
    .handshake = tls_handshake,
    .recv = tls_recv,
    .writev = tls_writev,
    .sendfile = tls_sendfile,
    .pending = tls_pending,
    .free = tls_free,
};

static int is_ip_literal(const char *host) {
    unsigned char buf[16];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

st_tport_t *st_tport_tls_new(st_tls_ctx_t *ctx, int fd, const char *server_name, char *err,
                             size_t errlen) {
    pthread_mutex_lock(&ctx->lock);
    SSL *ssl = SSL_new(ctx->ssl);
    pthread_mutex_unlock(&ctx->lock);
    if (!ssl || !SSL_set_fd(ssl, fd)) {
        snprintf(err, errlen, "cannot start TLS on the connection");
        SSL_free(ssl);
        ERR_clear_error();
        return NULL;
    }
    if (ctx->client) {
        SSL_set_connect_state(ssl);
        if (server_name && server_name[0]) {
            int ip = is_ip_literal(server_name);
            if (!ip) SSL_set_tlsext_host_name(ssl, server_name);
            if (!strcasecmp(ctx->endpoint_identification, "https")) {
                X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
                int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, server_name)
                            : SSL_set1_host(ssl, server_name);
                if (!ok) {
                    snprintf(err, errlen, "cannot verify the host name %s", server_name);
                    SSL_free(ssl);
                    ERR_clear_error();
                    return NULL;
                }
            }
        }
    } else {
        SSL_set_accept_state(ssl);
    }
    tls_tport_t *tt = st_calloc(1, sizeof *tt);
    tt->base.ops = &tls_ops;
    tt->base.fd = fd;
    tt->owner = ctx;
    tt->ssl = ssl;
    return &tt->base;
}

const char *st_tport_peer_subject(const st_tport_t *t) {
    return t && t->ops == &tls_ops ? ((const tls_tport_t *)t)->subject : "";
}

const char *st_tport_describe(const st_tport_t *t) {
    return t && t->ops == &tls_ops ? ((const tls_tport_t *)t)->desc : "";
}

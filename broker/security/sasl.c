/*
 * sasl.c - PLAIN (RFC 4616) and SCRAM-SHA-256 / -512 (RFC 5802, 7677),
 * server and client, as pure state machines over the tokens.
 *
 * SCRAM, server side:
 *
 *   START --step(client-first)--> SENT_FIRST --step(client-final)--> DONE
 *     |                              |
 *     +-- malformed ------------------+-- wrong nonce, channel binding,
 *                                         proof --> FAILED
 *
 *   client-first  gs2-header client-first-bare
 *                 gs2-header = ("n" | "y") "," [ "a=" authzid ] ","
 *                 client-first-bare = "n=" saslname ",r=" c-nonce [ "," ext ]
 *   server-first  "r=" c-nonce s-nonce ",s=" base64(salt) ",i=" iterations
 *   client-final  "c=" base64(gs2-header) ",r=" nonce [ "," ext ] ",p=" base64(proof)
 *   server-final  "v=" base64(ServerSignature)
 *
 *   AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
 *   ClientKey       = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey)
 *   ClientSignature = HMAC(StoredKey, AuthMessage); proof = ClientKey XOR ClientSignature
 *   ServerKey       = HMAC(SaltedPassword, "Server Key")
 *   ServerSignature = HMAC(ServerKey, AuthMessage)
 *
 * The server checks H(proof XOR ClientSignature) == StoredKey.  Every
 * token is hostile: lengths are bounded, attributes are parsed in order,
 * and a failure never says more than "invalid credentials".
 */
#include "sasl.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#define MAX_TOKEN 4096 /* no SCRAM or PLAIN message of ours comes near */
#define MAX_NAME 512

static const char *const mech_names[] = {
    [ST_SASL_SCRAM_SHA_256] = "SCRAM-SHA-256",
    [ST_SASL_SCRAM_SHA_512] = "SCRAM-SHA-512",
    [ST_SASL_PLAIN] = "PLAIN",
};

st_sasl_mech_t st_sasl_mech_parse(const char *name) {
    for (int m = 1; m < (int)ST_ARRAY_SIZE(mech_names); m++)
        if (mech_names[m] && name && !strcmp(name, mech_names[m])) return (st_sasl_mech_t)m;
    return ST_SASL_NONE;
}

const char *st_sasl_mech_name(st_sasl_mech_t m) {
    return m > 0 && m < (int)ST_ARRAY_SIZE(mech_names) && mech_names[m] ? mech_names[m] : "?";
}

static const EVP_MD *scram_md(st_sasl_mech_t m) {
    return m == ST_SASL_SCRAM_SHA_256 ? EVP_sha256() : m == ST_SASL_SCRAM_SHA_512 ? EVP_sha512()
                                                                                   : NULL;
}

size_t st_scram_key_len(st_sasl_mech_t m) {
    return m == ST_SASL_SCRAM_SHA_256 ? 32 : m == ST_SASL_SCRAM_SHA_512 ? 64 : 0;
}

static void hmac(const EVP_MD *md, const uint8_t *key, size_t klen, const void *data, size_t n,
                 uint8_t *out) {
    unsigned int len = 0;
    HMAC(md, key, (int)klen, data, n, out, &len);
}

static void hash(const EVP_MD *md, const uint8_t *in, size_t n, uint8_t *out) {
    unsigned int len = 0;
    EVP_Digest(in, n, out, &len, md, NULL);
}

int st_scram_salted_password(st_sasl_mech_t m, const char *password, const uint8_t *salt,
                             size_t salt_len, int32_t iterations, uint8_t *out) {
    const EVP_MD *md = scram_md(m);
    if (!md || iterations < 1) return -1;
    return PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)salt_len, iterations,
                             md, (int)st_scram_key_len(m), out) == 1
               ? 0
               : -1;
}

int st_scram_cred_from_salted(st_sasl_mech_t m, const uint8_t *salt, size_t salt_len,
                              const uint8_t *salted, size_t salted_len, int32_t iterations,
                              st_scram_cred_t *out) {
    const EVP_MD *md = scram_md(m);
    size_t kl = st_scram_key_len(m);
    if (!md || salted_len != kl || salt_len == 0 || salt_len > ST_SCRAM_MAX_SALT) return -1;
    memset(out, 0, sizeof *out);
    out->mech = m;
    out->iterations = iterations;
    memcpy(out->salt, salt, salt_len);
    out->salt_len = salt_len;
    out->key_len = kl;
    uint8_t client_key[ST_SCRAM_MAX_KEY];
    hmac(md, salted, kl, "Client Key", 10, client_key);
    hash(md, client_key, kl, out->stored_key);
    hmac(md, salted, kl, "Server Key", 10, out->server_key);
    OPENSSL_cleanse(client_key, sizeof client_key);
    return 0;
}

int st_scram_cred_make(st_sasl_mech_t m, const char *password, int32_t iterations,
                       st_scram_cred_t *out) {
    uint8_t salt[32], salted[ST_SCRAM_MAX_KEY];
    if (RAND_bytes(salt, sizeof salt) != 1) return -1;
    int rc = st_scram_salted_password(m, password, salt, sizeof salt, iterations, salted);
    if (!rc)
        rc = st_scram_cred_from_salted(m, salt, sizeof salt, salted, st_scram_key_len(m),
                                       iterations, out);
    OPENSSL_cleanse(salted, sizeof salted);
    return rc;
}

/* ---- base64 ------------------------------------------------------------- */

static void b64_put(st_buf_t *b, const uint8_t *p, size_t n) {
    size_t need = 4 * ((n + 2) / 3) + 1;
    uint8_t *dst = st_buf_extend(b, need);
    int k = EVP_EncodeBlock(dst, p, (int)n);
    b->len -= need - (size_t)k; /* keep the text, not the NUL */
}

/* Strict base64 of exactly what fits in cap; -1 when malformed. */
static int b64_get(const char *s, size_t n, uint8_t *out, size_t cap, size_t *outlen) {
    if (n % 4 || n / 4 * 3 > cap + 2) return -1;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 ch == '+' || ch == '/' || (ch == '=' && i >= n - 2);
        if (!ok) return -1;
    }
    if (n >= 2 && s[n - 2] == '=' && s[n - 1] != '=') return -1;
    uint8_t tmp[4 * (ST_SCRAM_MAX_SALT + 3)];
    if (n / 4 * 3 > sizeof tmp) return -1;
    int k = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)n);
    if (k < 0) return -1;
    size_t pad = (n && s[n - 1] == '=') + (n > 1 && s[n - 2] == '=');
    size_t len = (size_t)k - pad;
    if (len > cap) return -1;
    memcpy(out, tmp, len);
    *outlen = len;
    return 0;
}

/* ---- SCRAM attribute parsing -------------------------------------------- */

/* The next "x=value" of a comma-separated message: 0 and the value's
 * bounds, or -1 when the message does not have attribute x here. */
typedef struct cursor {
    const char *p, *end;
} cursor_t;

static int attr(cursor_t *c, char name, const char **v, size_t *vlen) {
    if (c->end - c->p < 2 || c->p[0] != name || c->p[1] != '=') return -1;
    const char *s = c->p + 2, *comma = memchr(s, ',', (size_t)(c->end - s));
    const char *e = comma ? comma : c->end;
    *v = s;
    *vlen = (size_t)(e - s);
    c->p = comma ? comma + 1 : c->end;
    return 0;
}

static int at_end(const cursor_t *c) { return c->p >= c->end; }

/* saslname: "=2C" is ',' and "=3D" is '='; any other '=' is malformed. */
static int unescape_name(const char *s, size_t n, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!ch) return -1;
        if (ch == '=') {
            if (n - i < 3) return -1;
            if (s[i + 1] == '2' && s[i + 2] == 'C') ch = ',';
            else if (s[i + 1] == '3' && s[i + 2] == 'D') ch = '=';
            else return -1;
            i += 2;
        }
        if (k + 1 >= cap) return -1;
        out[k++] = ch;
    }
    out[k] = 0;
    return k ? 0 : -1;
}

static void escape_name(st_buf_t *b, const char *name) {
    for (const char *p = name; *p; p++) {
        if (*p == ',') st_buf_put(b, "=2C", 3);
        else if (*p == '=') st_buf_put(b, "=3D", 3);
        else st_buf_put(b, p, 1);
    }
}

/* printable ASCII except ',' (RFC 5802's "printable") */
static int nonce_ok(const char *s, size_t n) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e || s[i] == ',') return 0;
    return 1;
}

static void random_nonce(char *out, size_t chars) {
    uint8_t raw[48];
    size_t nraw = chars * 3 / 4;
    if (nraw > sizeof raw) nraw = sizeof raw;
    if (RAND_bytes(raw, (int)nraw) != 1) st_random_bytes(raw, nraw);
    uint8_t enc[80];
    int k = EVP_EncodeBlock(enc, raw, (int)nraw);
    memcpy(out, enc, (size_t)k);
    out[k] = 0;
}

/* ---- the server ---------------------------------------------------------- */

enum { SRV_START, SRV_SENT_FIRST, SRV_DONE, SRV_FAILED };

struct st_sasl_server {
    st_sasl_mech_t mech;
    const st_sasl_server_ops_t *ops;
    int state;
    char user[MAX_NAME];
    st_scram_cred_t cred;
    int known; /* the user has a credential of this mechanism */
    char gs2[MAX_NAME + 16];  /* the client's gs2 header, as sent */
    char nonce[MAX_NAME * 2]; /* client nonce + ours */
    st_buf_t auth;            /* AuthMessage so far */
};

/* A per-process secret: unknown users get salts that do not change from
 * one try to the next, so a probe cannot tell them from real ones. */
static uint8_t fake_secret[32];
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;
static void fake_init(void) {
    if (RAND_bytes(fake_secret, sizeof fake_secret) != 1)
        st_random_bytes(fake_secret, sizeof fake_secret);
}

static void fake_cred(st_sasl_server_t *s) {
    pthread_once(&fake_once, fake_init);
    const EVP_MD *md = scram_md(s->mech);
    memset(&s->cred, 0, sizeof s->cred);
    s->cred.mech = s->mech;
    s->cred.iterations = ST_SCRAM_MIN_ITERATIONS;
    s->cred.key_len = st_scram_key_len(s->mech);
    uint8_t h[ST_SCRAM_MAX_KEY];
    hmac(EVP_sha256(), fake_secret, sizeof fake_secret, s->user, strlen(s->user), h);
    memcpy(s->cred.salt, h, 32);
    s->cred.salt_len = 32;
    RAND_bytes(s->cred.stored_key, (int)s->cred.key_len); /* never matches */
    (void)md;
}

st_sasl_server_t *st_sasl_server_new(st_sasl_mech_t m, const st_sasl_server_ops_t *ops) {
    if (m != ST_SASL_PLAIN && !st_sasl_is_scram(m)) return NULL;
    st_sasl_server_t *s = st_calloc(1, sizeof *s);
    s->mech = m;
    s->ops = ops;
    st_buf_init(&s->auth);
    return s;
}

void st_sasl_server_free(st_sasl_server_t *s) {
    if (!s) return;
    OPENSSL_cleanse(&s->cred, sizeof s->cred);
    st_buf_fini(&s->auth);
    free(s);
}

const char *st_sasl_server_user(const st_sasl_server_t *s) { return s->user; }
st_sasl_mech_t st_sasl_server_mech(const st_sasl_server_t *s) { return s->mech; }

static st_sasl_step_t fail(st_sasl_server_t *s, char *why, size_t whylen, const char *msg) {
    s->state = SRV_FAILED;
    snprintf(why, whylen, "%s", msg);
    return ST_SASL_FAILED;
}

#define INVALID_CREDENTIALS_FMT                                                            \
    "Authentication failed during authentication due to invalid credentials with SASL "  \
    "mechanism %s"

static st_sasl_step_t bad_credentials(st_sasl_server_t *s, char *why, size_t whylen) {
    s->state = SRV_FAILED;
    snprintf(why, whylen, INVALID_CREDENTIALS_FMT, st_sasl_mech_name(s->mech));
    return ST_SASL_FAILED;
}

static st_sasl_step_t plain_step(st_sasl_server_t *s, const uint8_t *in, size_t n, char *why,
                                 size_t whylen) {
    /* authzid NUL authcid NUL passwd */
    const uint8_t *nul1 = memchr(in, 0, n);
    const uint8_t *nul2 = nul1 ? memchr(nul1 + 1, 0, n - (size_t)(nul1 + 1 - in)) : NULL;
    if (!nul1 || !nul2)
        return fail(s, why, whylen, "Invalid SASL/PLAIN response: expected 3 tokens");
    size_t zl = (size_t)(nul1 - in), ul = (size_t)(nul2 - nul1 - 1);
    size_t pl = n - (size_t)(nul2 + 1 - in);
    if (!ul) return fail(s, why, whylen, "Authentication failed: username not specified");
    if (!pl) return fail(s, why, whylen, "Authentication failed: password not specified");
    if (ul >= sizeof s->user || memchr(nul2 + 1, 0, pl))
        return fail(s, why, whylen, "Invalid SASL/PLAIN response");
    memcpy(s->user, nul1 + 1, ul);
    s->user[ul] = 0;
    if (zl && (zl != ul || memcmp(in, s->user, ul)))
        return fail(s, why, whylen,
                    "Authentication failed: Client requested an authorization id that is "
                    "different from username");
    char *pw = st_malloc(pl + 1);
    memcpy(pw, nul2 + 1, pl);
    pw[pl] = 0;
    int ok = s->ops->plain_check && s->ops->plain_check(s->ops->arg, s->user, pw);
    OPENSSL_cleanse(pw, pl);
    free(pw);
    if (!ok)
        return fail(s, why, whylen, "Authentication failed: Invalid username or password");
    s->state = SRV_DONE;
    return ST_SASL_DONE;
}

static st_sasl_step_t scram_first(st_sasl_server_t *s, const char *in, size_t n, st_buf_t *out,
                                  char *why, size_t whylen) {
    cursor_t c = {in, in + n};
    /* gs2 header: n or y (no channel binding), an optional authzid */
    if (n < 3 || (in[0] != 'n' && in[0] != 'y') || in[1] != ',') {
        if (n && in[0] == 'p')
            return fail(s, why, whylen, "SCRAM with channel binding is not supported");
        return fail(s, why, whylen, "Invalid SCRAM client first message");
    }
    c.p = in + 2;
    const char *authz = NULL;
    size_t authzl = 0;
    if (c.p < c.end && *c.p == 'a') {
        if (attr(&c, 'a', &authz, &authzl))
            return fail(s, why, whylen, "Invalid SCRAM client first message");
    } else if (c.p < c.end && *c.p == ',') {
        c.p++;
    } else {
        return fail(s, why, whylen, "Invalid SCRAM client first message");
    }
    size_t gl = (size_t)(c.p - in);
    if (gl >= sizeof s->gs2) return fail(s, why, whylen, "Invalid SCRAM client first message");
    memcpy(s->gs2, in, gl);
    s->gs2[gl] = 0;
    const char *bare = c.p;
    const char *name, *cn;
    size_t namel, cnl;
    if (attr(&c, 'n', &name, &namel) || unescape_name(name, namel, s->user, sizeof s->user) ||
        attr(&c, 'r', &cn, &cnl) || !nonce_ok(cn, cnl) || cnl > MAX_NAME - 64)
        return fail(s, why, whylen, "Invalid SCRAM client first message");
    if (authzl) {
        char az[MAX_NAME];
        if (unescape_name(authz, authzl, az, sizeof az) || strcmp(az, s->user))
            return fail(s, why, whylen,
                        "Authentication failed: Client requested an authorization id that is "
                        "different from username");
    }
    /* extensions: Kafka's tokenauth (delegation tokens) is not served */
    while (!at_end(&c)) {
        const char *e = c.p, *comma = memchr(e, ',', (size_t)(c.end - e));
        size_t el = comma ? (size_t)(comma - e) : (size_t)(c.end - e);
        if (el >= 9 && !memcmp(e, "tokenauth", 9))
            return fail(s, why, whylen, "Authentication failed: delegation tokens are not "
                                        "supported");
        /* ext = ALPHA "=" value; m= is reserved for a mandatory one */
        int alpha = el >= 2 && ((e[0] >= 'a' && e[0] <= 'z') || (e[0] >= 'A' && e[0] <= 'Z'));
        if (!alpha || e[1] != '=' || e[0] == 'm')
            return fail(s, why, whylen, "Invalid SCRAM client first message");
        c.p = comma ? comma + 1 : c.end;
    }
    s->known = s->ops->scram_lookup &&
               s->ops->scram_lookup(s->ops->arg, s->user, s->mech, &s->cred) == 0 &&
               s->cred.key_len == st_scram_key_len(s->mech);
    if (!s->known) fake_cred(s);
    char ours[40];
    random_nonce(ours, 32);
    snprintf(s->nonce, sizeof s->nonce, "%.*s%s", (int)cnl, cn, ours);
    /* server-first */
    size_t start = out->len;
    st_buf_printf(out, "r=%s,s=", s->nonce);
    b64_put(out, s->cred.salt, s->cred.salt_len);
    st_buf_printf(out, ",i=%d", (int)s->cred.iterations);
    st_buf_put(&s->auth, bare, (size_t)(in + n - bare));
    st_buf_put(&s->auth, ",", 1);
    st_buf_put(&s->auth, out->data + start, out->len - start);
    st_buf_put(&s->auth, ",", 1);
    s->state = SRV_SENT_FIRST;
    return ST_SASL_CONTINUE;
}

static st_sasl_step_t scram_final(st_sasl_server_t *s, const char *in, size_t n, st_buf_t *out,
                                  char *why, size_t whylen) {
    cursor_t c = {in, in + n};
    const char *cb, *nonce, *proof_b64 = NULL;
    size_t cbl, noncel, proofl = 0;
    if (attr(&c, 'c', &cb, &cbl) || attr(&c, 'r', &nonce, &noncel))
        return fail(s, why, whylen, "Invalid SCRAM client final message");
    /* the channel binding attribute is base64 of the gs2 header */
    uint8_t gs2[sizeof s->gs2];
    size_t gs2l;
    if (b64_get(cb, cbl, gs2, sizeof gs2 - 1, &gs2l) || gs2l != strlen(s->gs2) ||
        memcmp(gs2, s->gs2, gs2l))
        return fail(s, why, whylen, "Invalid SCRAM client final message: channel binding "
                                    "does not match the first message");
    /* The nonce must end with the whole nonce of server-first (client's
     * and ours), as Kafka's ScramSaslServer checks it: librdkafka 2.0
     * sends its own nonce once more in front. */
    size_t want = strlen(s->nonce);
    if (noncel < want || memcmp(nonce + noncel - want, s->nonce, want))
        return fail(s, why, whylen, "Invalid SCRAM client final message: the nonce is not "
                                    "the server's");
    const char *without_proof_end = NULL;
    while (!at_end(&c)) {
        if (c.p[0] == 'p' && c.end - c.p >= 2 && c.p[1] == '=') {
            without_proof_end = c.p - 1; /* before the comma */
            if (attr(&c, 'p', &proof_b64, &proofl) || !at_end(&c))
                return fail(s, why, whylen, "Invalid SCRAM client final message");
            break;
        }
        const char *comma = memchr(c.p, ',', (size_t)(c.end - c.p));
        c.p = comma ? comma + 1 : c.end;
    }
    uint8_t proof[ST_SCRAM_MAX_KEY];
    size_t pl;
    if (!proof_b64 || b64_get(proof_b64, proofl, proof, sizeof proof, &pl) ||
        pl != s->cred.key_len)
        return fail(s, why, whylen, "Invalid SCRAM client final message: no client proof");
    st_buf_put(&s->auth, in, (size_t)(without_proof_end - in));
    const EVP_MD *md = scram_md(s->mech);
    size_t kl = s->cred.key_len;
    uint8_t sig[ST_SCRAM_MAX_KEY], client_key[ST_SCRAM_MAX_KEY], stored[ST_SCRAM_MAX_KEY];
    hmac(md, s->cred.stored_key, kl, s->auth.data, s->auth.len, sig);
    for (size_t i = 0; i < kl; i++) client_key[i] = proof[i] ^ sig[i];
    hash(md, client_key, kl, stored);
    int ok = s->known && CRYPTO_memcmp(stored, s->cred.stored_key, kl) == 0;
    OPENSSL_cleanse(client_key, sizeof client_key);
    if (!ok) return bad_credentials(s, why, whylen);
    uint8_t server_sig[ST_SCRAM_MAX_KEY];
    hmac(md, s->cred.server_key, kl, s->auth.data, s->auth.len, server_sig);
    st_buf_put(out, "v=", 2);
    b64_put(out, server_sig, kl);
    s->state = SRV_DONE;
    return ST_SASL_DONE;
}

st_sasl_step_t st_sasl_server_step(st_sasl_server_t *s, const uint8_t *in, size_t inlen,
                                   st_buf_t *out, char *why, size_t whylen) {
    if (s->state == SRV_DONE || s->state == SRV_FAILED)
        return fail(s, why, whylen, "Unexpected SASL token after the exchange ended");
    if (inlen > MAX_TOKEN) return fail(s, why, whylen, "SASL token too large");
    if (s->mech == ST_SASL_PLAIN) return plain_step(s, in, inlen, why, whylen);
    if (memchr(in, 0, inlen)) return fail(s, why, whylen, "Invalid SCRAM message");
    if (s->state == SRV_START) return scram_first(s, (const char *)in, inlen, out, why, whylen);
    return scram_final(s, (const char *)in, inlen, out, why, whylen);
}

/* ---- the client ---------------------------------------------------------- */

enum { CLI_START, CLI_SENT_FIRST, CLI_SENT_FINAL, CLI_DONE, CLI_FAILED };

struct st_sasl_client {
    st_sasl_mech_t mech;
    int state;
    char *user, *password;
    char cnonce[MAX_NAME];
    st_buf_t auth;
    uint8_t server_key[ST_SCRAM_MAX_KEY];
};

st_sasl_client_t *st_sasl_client_new(st_sasl_mech_t m, const char *user, const char *password) {
    if (m != ST_SASL_PLAIN && !st_sasl_is_scram(m)) return NULL;
    st_sasl_client_t *c = st_calloc(1, sizeof *c);
    c->mech = m;
    c->user = st_strdup(user ? user : "");
    c->password = st_strdup(password ? password : "");
    random_nonce(c->cnonce, 32);
    st_buf_init(&c->auth);
    return c;
}

void st_sasl_client_set_nonce(st_sasl_client_t *c, const char *nonce) {
    snprintf(c->cnonce, sizeof c->cnonce, "%s", nonce);
}

void st_sasl_client_free(st_sasl_client_t *c) {
    if (!c) return;
    OPENSSL_cleanse(c->password, strlen(c->password));
    free(c->password);
    free(c->user);
    OPENSSL_cleanse(c->server_key, sizeof c->server_key);
    st_buf_fini(&c->auth);
    free(c);
}

static st_sasl_step_t cfail(st_sasl_client_t *c, char *why, size_t whylen, const char *msg) {
    c->state = CLI_FAILED;
    snprintf(why, whylen, "%s", msg);
    return ST_SASL_FAILED;
}

st_sasl_step_t st_sasl_client_step(st_sasl_client_t *c, const uint8_t *in, size_t inlen,
                                   st_buf_t *out, char *why, size_t whylen) {
    if (c->mech == ST_SASL_PLAIN) {
        if (c->state != CLI_START) return cfail(c, why, whylen, "PLAIN takes one token");
        st_buf_put(out, "", 1); /* no authzid */
        st_buf_put(out, c->user, strlen(c->user));
        st_buf_put(out, "", 1);
        st_buf_put(out, c->password, strlen(c->password));
        c->state = CLI_DONE;
        return ST_SASL_DONE;
    }
    const EVP_MD *md = scram_md(c->mech);
    size_t kl = st_scram_key_len(c->mech);
    switch (c->state) {
    case CLI_START: {
        size_t start = out->len;
        st_buf_put(out, "n,,n=", 5);
        escape_name(out, c->user);
        st_buf_printf(out, ",r=%s", c->cnonce);
        st_buf_put(&c->auth, out->data + start + 3, out->len - start - 3);
        st_buf_put(&c->auth, ",", 1);
        c->state = CLI_SENT_FIRST;
        return ST_SASL_CONTINUE;
    }
    case CLI_SENT_FIRST: {
        cursor_t cur = {(const char *)in, (const char *)in + inlen};
        const char *nonce, *salt_b64, *iter;
        size_t nl, sl, il;
        if (inlen > MAX_TOKEN || attr(&cur, 'r', &nonce, &nl) || attr(&cur, 's', &salt_b64, &sl) ||
            attr(&cur, 'i', &iter, &il))
            return cfail(c, why, whylen, "malformed SCRAM server first message");
        size_t cnl = strlen(c->cnonce);
        if (nl <= cnl || memcmp(nonce, c->cnonce, cnl) || !nonce_ok(nonce, nl))
            return cfail(c, why, whylen, "the server's nonce does not extend ours");
        uint8_t salt[ST_SCRAM_MAX_SALT];
        size_t saltl;
        char ibuf[16];
        if (b64_get(salt_b64, sl, salt, sizeof salt, &saltl) || !saltl || il == 0 ||
            il >= sizeof ibuf)
            return cfail(c, why, whylen, "malformed SCRAM server first message");
        memcpy(ibuf, iter, il);
        ibuf[il] = 0;
        char *end;
        long iterations = strtol(ibuf, &end, 10);
        if (*end || iterations < ST_SCRAM_MIN_ITERATIONS || iterations > ST_SCRAM_MAX_ITERATIONS)
            return cfail(c, why, whylen, "the server asks for an iteration count out of bounds");
        st_buf_put(&c->auth, in, inlen);
        st_buf_put(&c->auth, ",", 1);
        uint8_t salted[ST_SCRAM_MAX_KEY], client_key[ST_SCRAM_MAX_KEY], stored[ST_SCRAM_MAX_KEY];
        uint8_t sig[ST_SCRAM_MAX_KEY], proof[ST_SCRAM_MAX_KEY];
        st_scram_salted_password(c->mech, c->password, salt, saltl, (int32_t)iterations, salted);
        size_t start = out->len;
        st_buf_put(out, "c=biws,r=", 9); /* biws: base64 of "n,," */
        st_buf_put(out, nonce, nl);
        st_buf_put(&c->auth, out->data + start, out->len - start);
        hmac(md, salted, kl, "Client Key", 10, client_key);
        hash(md, client_key, kl, stored);
        hmac(md, stored, kl, c->auth.data, c->auth.len, sig);
        for (size_t i = 0; i < kl; i++) proof[i] = client_key[i] ^ sig[i];
        hmac(md, salted, kl, "Server Key", 10, c->server_key);
        st_buf_put(out, ",p=", 3);
        b64_put(out, proof, kl);
        OPENSSL_cleanse(salted, sizeof salted);
        OPENSSL_cleanse(client_key, sizeof client_key);
        c->state = CLI_SENT_FINAL;
        return ST_SASL_CONTINUE;
    }
    case CLI_SENT_FINAL: {
        cursor_t cur = {(const char *)in, (const char *)in + inlen};
        const char *v;
        size_t vl;
        if (inlen > 2 && in[0] == 'e' && in[1] == '=')
            return cfail(c, why, whylen, "the server refused the SCRAM proof");
        uint8_t got[ST_SCRAM_MAX_KEY], want[ST_SCRAM_MAX_KEY];
        size_t gl;
        if (attr(&cur, 'v', &v, &vl) || b64_get(v, vl, got, sizeof got, &gl) || gl != kl)
            return cfail(c, why, whylen, "malformed SCRAM server final message");
        hmac(md, c->server_key, kl, c->auth.data, c->auth.len, want);
        if (CRYPTO_memcmp(got, want, kl))
            return cfail(c, why, whylen, "the server's SCRAM signature is wrong: it does not "
                                         "hold this user's credential");
        c->state = CLI_DONE;
        return ST_SASL_DONE;
    }
    default:
        return cfail(c, why, whylen, "the SASL exchange already ended");
    }
}

/*
 * sasl.h - SASL mechanisms without I/O: a server session evaluates the
 * client's tokens one SaslAuthenticate at a time; a client session makes
 * them (the broker's own connections to other brokers, and tests).
 *
 *   PLAIN          RFC 4616: one token, [authzid] NUL user NUL password.
 *   SCRAM-SHA-256  RFC 5802 / 7677, SCRAM-SHA-512: client-first,
 *                  server-first, client-final, server-final.  No channel
 *                  binding ("n,," or "y,," only), no delegation tokens.
 *
 * The server never says whether a user exists: an unknown SCRAM user gets
 * a server-first message made from a per-process secret, and every
 * failure reads the same.
 */
#ifndef ST_SASL_H
#define ST_SASL_H

#include "st_base.h"

/* SCRAM mechanisms keep the numbers Kafka's ScramMechanism gives them on
 * the wire (AlterUserScramCredentials, the metadata records). */
typedef enum st_sasl_mech {
    ST_SASL_NONE = 0,
    ST_SASL_SCRAM_SHA_256 = 1,
    ST_SASL_SCRAM_SHA_512 = 2,
    ST_SASL_PLAIN = 3
} st_sasl_mech_t;

/* "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" (exact case) or ST_SASL_NONE. */
st_sasl_mech_t st_sasl_mech_parse(const char *name);
const char *st_sasl_mech_name(st_sasl_mech_t m);
static inline int st_sasl_is_scram(st_sasl_mech_t m) {
    return m == ST_SASL_SCRAM_SHA_256 || m == ST_SASL_SCRAM_SHA_512;
}

/* Iterations a SCRAM credential may have (Kafka's bounds). */
#define ST_SCRAM_MIN_ITERATIONS 4096
#define ST_SCRAM_MAX_ITERATIONS 16384
#define ST_SCRAM_MAX_KEY 64  /* SHA-512 */
#define ST_SCRAM_MAX_SALT 128

/* What the server keeps of a SCRAM password (never the password). */
typedef struct st_scram_cred {
    st_sasl_mech_t mech;
    int32_t iterations;
    uint8_t salt[ST_SCRAM_MAX_SALT];
    size_t salt_len;
    uint8_t stored_key[ST_SCRAM_MAX_KEY];
    uint8_t server_key[ST_SCRAM_MAX_KEY];
    size_t key_len; /* 32 or 64 */
} st_scram_cred_t;

/* Hi(password, salt, i) (PBKDF2 with the mechanism's HMAC) into out
 * (key length bytes).  0, or -1 for a bad mechanism. */
int st_scram_salted_password(st_sasl_mech_t m, const char *password, const uint8_t *salt,
                             size_t salt_len, int32_t iterations, uint8_t *out);
/* The stored and server keys of a salted password (what
 * AlterUserScramCredentials carries), into out.  -1 when a length is
 * wrong for the mechanism. */
int st_scram_cred_from_salted(st_sasl_mech_t m, const uint8_t *salt, size_t salt_len,
                              const uint8_t *salted, size_t salted_len, int32_t iterations,
                              st_scram_cred_t *out);
/* The whole credential of a password with a fresh random salt. */
int st_scram_cred_make(st_sasl_mech_t m, const char *password, int32_t iterations,
                       st_scram_cred_t *out);
size_t st_scram_key_len(st_sasl_mech_t m);

/* ---- the server side ----------------------------------------------------- */

typedef struct st_sasl_server_ops {
    /* PLAIN: 1 when user's password is password */
    int (*plain_check)(void *arg, const char *user, const char *password);
    /* SCRAM: the credential of user for m: 0 found, -1 none */
    int (*scram_lookup)(void *arg, const char *user, st_sasl_mech_t m, st_scram_cred_t *out);
    void *arg;
} st_sasl_server_ops_t;

typedef enum st_sasl_step {
    ST_SASL_CONTINUE = 0, /* send out, expect another token */
    ST_SASL_DONE = 1,     /* authenticated; send out (may be empty) */
    ST_SASL_FAILED = 2    /* why says what to answer (no secret in it) */
} st_sasl_step_t;

typedef struct st_sasl_server st_sasl_server_t;

/* ops is borrowed for the session's life. */
st_sasl_server_t *st_sasl_server_new(st_sasl_mech_t m, const st_sasl_server_ops_t *ops);
/* One client token; out gets the answer's bytes. */
st_sasl_step_t st_sasl_server_step(st_sasl_server_t *s, const uint8_t *in, size_t inlen,
                                   st_buf_t *out, char *why, size_t whylen);
/* Once DONE: who authenticated. */
const char *st_sasl_server_user(const st_sasl_server_t *s);
st_sasl_mech_t st_sasl_server_mech(const st_sasl_server_t *s);
void st_sasl_server_free(st_sasl_server_t *s);

/* ---- the client side ----------------------------------------------------- */

typedef struct st_sasl_client st_sasl_client_t;

st_sasl_client_t *st_sasl_client_new(st_sasl_mech_t m, const char *user, const char *password);
/* The first call has in NULL; then each server answer.  DONE once the
 * server is proven (SCRAM's server signature) or, for PLAIN, once the
 * token went out: the caller then needs the server's success. */
st_sasl_step_t st_sasl_client_step(st_sasl_client_t *c, const uint8_t *in, size_t inlen,
                                   st_buf_t *out, char *why, size_t whylen);
void st_sasl_client_free(st_sasl_client_t *c);

/* Testing: the client's nonce instead of a random one (RFC 7677's
 * example uses "rOprNGfwEbeRWgbNEkqO"). */
void st_sasl_client_set_nonce(st_sasl_client_t *c, const char *nonce);

#endif /* ST_SASL_H */

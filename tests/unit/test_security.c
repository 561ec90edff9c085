/*
 * test_security.c - broker/security: SCRAM against RFC 7677's example, a
 * server and a client talking, every way an exchange fails (wrong
 * password, wrong nonce, channel binding, unknown user, garbage), PLAIN,
 * JAAS options and the listener.name.<listener>. settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "acl.h"
#include "sasl.h"
#include "security.h"

/* ---- a credential store for the server ---------------------------------- */

typedef struct store {
    st_scram_cred_t creds[4];
    const char *users[4];
    int n;
    const char *plain_user, *plain_password;
} store_t;

static int lookup(void *arg, const char *user, st_sasl_mech_t m, st_scram_cred_t *out) {
    store_t *s = arg;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->users[i], user) && s->creds[i].mech == m) {
            *out = s->creds[i];
            return 0;
        }
    return -1;
}

static int plain_check(void *arg, const char *user, const char *pw) {
    store_t *s = arg;
    return s->plain_user && !strcmp(user, s->plain_user) && !strcmp(pw, s->plain_password);
}

static void add_user(store_t *s, const char *user, st_sasl_mech_t m, const char *pw) {
    assert_int_equal(st_scram_cred_make(m, pw, 4096, &s->creds[s->n]), 0);
    s->users[s->n++] = user;
}

/* Runs client against server until one ends; returns the server's last
 * step (DONE or FAILED) and its why. */
static st_sasl_step_t converse(st_sasl_server_t *srv, st_sasl_client_t *cli, char *why,
                               size_t whylen) {
    st_buf_t to_srv, to_cli;
    st_buf_init(&to_srv);
    st_buf_init(&to_cli);
    char cwhy[256];
    st_sasl_step_t cs = st_sasl_client_step(cli, NULL, 0, &to_srv, cwhy, sizeof cwhy);
    st_sasl_step_t ss = ST_SASL_CONTINUE;
    for (int round = 0; round < 4; round++) {
        to_cli.len = 0;
        ss = st_sasl_server_step(srv, to_srv.data, to_srv.len, &to_cli, why, whylen);
        if (ss != ST_SASL_CONTINUE) break;
        to_srv.len = 0;
        cs = st_sasl_client_step(cli, to_cli.data, to_cli.len, &to_srv, cwhy, sizeof cwhy);
        assert_int_not_equal(cs, ST_SASL_FAILED);
    }
    if (ss == ST_SASL_DONE && to_cli.len) {
        /* SCRAM: the client checks the server's signature */
        st_buf_t none;
        st_buf_init(&none);
        cs = st_sasl_client_step(cli, to_cli.data, to_cli.len, &none, cwhy, sizeof cwhy);
        assert_int_equal(cs, ST_SASL_DONE);
        st_buf_fini(&none);
    }
    st_buf_fini(&to_srv);
    st_buf_fini(&to_cli);
    return ss;
}

/* RFC 7677 section 3: user "user", password "pencil". */
static void test_scram_rfc7677_client(void **state) {
    (void)state;
    st_sasl_client_t *c = st_sasl_client_new(ST_SASL_SCRAM_SHA_256, "user", "pencil");
    st_sasl_client_set_nonce(c, "rOprNGfwEbeRWgbNEkqO");
    st_buf_t out;
    st_buf_init(&out);
    char why[256];
    assert_int_equal(st_sasl_client_step(c, NULL, 0, &out, why, sizeof why), ST_SASL_CONTINUE);
    st_buf_put(&out, "", 1);
    assert_string_equal((char *)out.data, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    const char *first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    out.len = 0;
    assert_int_equal(st_sasl_client_step(c, (const uint8_t *)first, strlen(first), &out, why,
                                         sizeof why),
                     ST_SASL_CONTINUE);
    st_buf_put(&out, "", 1);
    assert_string_equal((char *)out.data,
                        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
    const char *final = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
    out.len = 0;
    assert_int_equal(st_sasl_client_step(c, (const uint8_t *)final, strlen(final), &out, why,
                                         sizeof why),
                     ST_SASL_DONE);
    st_sasl_client_free(c);
    /* a server signature that is not the server's */
    c = st_sasl_client_new(ST_SASL_SCRAM_SHA_256, "user", "pencil");
    st_sasl_client_set_nonce(c, "rOprNGfwEbeRWgbNEkqO");
    out.len = 0;
    st_sasl_client_step(c, NULL, 0, &out, why, sizeof why);
    out.len = 0;
    st_sasl_client_step(c, (const uint8_t *)first, strlen(first), &out, why, sizeof why);
    const char *forged = "v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
    out.len = 0;
    assert_int_equal(st_sasl_client_step(c, (const uint8_t *)forged, strlen(forged), &out, why,
                                         sizeof why),
                     ST_SASL_FAILED);
    st_sasl_client_free(c);
    st_buf_fini(&out);
}

/* The RFC's salted password makes a credential the server accepts the
 * RFC's proof with (the server's nonce is random, so run a client). */
static void test_scram_rfc7677_credential(void **state) {
    (void)state;
    uint8_t salt[16], salted[32];
    size_t n = 0;
    /* W22ZaJ0SNY7soEsUEjb6gQ== */
    static const uint8_t rfc_salt[16] = {0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e,
                                         0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81};
    memcpy(salt, rfc_salt, sizeof salt);
    n = sizeof salt;
    assert_int_equal(st_scram_salted_password(ST_SASL_SCRAM_SHA_256, "pencil", salt, n, 4096, salted),
                     0);
    store_t st = {0};
    assert_int_equal(st_scram_cred_from_salted(ST_SASL_SCRAM_SHA_256, salt, n, salted, 32, 4096,
                                               &st.creds[0]),
                     0);
    st.users[0] = "user";
    st.n = 1;
    st_sasl_server_ops_t ops = {plain_check, lookup, &st};
    st_sasl_server_t *srv = st_sasl_server_new(ST_SASL_SCRAM_SHA_256, &ops);
    st_sasl_client_t *cli = st_sasl_client_new(ST_SASL_SCRAM_SHA_256, "user", "pencil");
    char why[256];
    assert_int_equal(converse(srv, cli, why, sizeof why), ST_SASL_DONE);
    assert_string_equal(st_sasl_server_user(srv), "user");
    st_sasl_server_free(srv);
    st_sasl_client_free(cli);
    /* salted password of the wrong length */
    st_scram_cred_t bad;
    assert_int_equal(st_scram_cred_from_salted(ST_SASL_SCRAM_SHA_512, salt, n, salted, 32, 4096, &bad),
                     -1);
}

static void test_scram_both_mechanisms(void **state) {
    (void)state;
    store_t st = {0};
    add_user(&st, "alice", ST_SASL_SCRAM_SHA_256, "alice-secret");
    add_user(&st, "alice", ST_SASL_SCRAM_SHA_512, "alice-512");
    add_user(&st, "we,ird=name", ST_SASL_SCRAM_SHA_512, "pw");
    st_sasl_server_ops_t ops = {plain_check, lookup, &st};
    const struct {
        st_sasl_mech_t m;
        const char *user, *pw;
        int ok;
    } cases[] = {
        {ST_SASL_SCRAM_SHA_256, "alice", "alice-secret", 1},
        {ST_SASL_SCRAM_SHA_512, "alice", "alice-512", 1},
        {ST_SASL_SCRAM_SHA_256, "alice", "alice-512", 0},  /* the other mechanism's */
        {ST_SASL_SCRAM_SHA_512, "alice", "wrong", 0},
        {ST_SASL_SCRAM_SHA_256, "bob", "alice-secret", 0}, /* unknown */
        {ST_SASL_SCRAM_SHA_512, "we,ird=name", "pw", 1},   /* escaped saslname */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_sasl_server_t *srv = st_sasl_server_new(cases[i].m, &ops);
        st_sasl_client_t *cli = st_sasl_client_new(cases[i].m, cases[i].user, cases[i].pw);
        char why[256] = "";
        st_sasl_step_t r = converse(srv, cli, why, sizeof why);
        assert_int_equal(r, cases[i].ok ? ST_SASL_DONE : ST_SASL_FAILED);
        if (!cases[i].ok) {
            /* the same words for a wrong password and an unknown user */
            assert_non_null(strstr(why, "invalid credentials"));
            assert_null(strstr(why, cases[i].pw));
        } else {
            assert_string_equal(st_sasl_server_user(srv), cases[i].user);
        }
        st_sasl_server_free(srv);
        st_sasl_client_free(cli);
    }
}

/* One step of a server given a client-first, then raw final text. */
static st_sasl_step_t server_final(store_t *st, const char *first, const char *final_fmt,
                                   char *why, size_t whylen) {
    st_sasl_server_ops_t ops = {plain_check, lookup, st};
    st_sasl_server_t *srv = st_sasl_server_new(ST_SASL_SCRAM_SHA_256, &ops);
    st_buf_t out;
    st_buf_init(&out);
    st_sasl_step_t r = st_sasl_server_step(srv, (const uint8_t *)first, strlen(first), &out, why,
                                           whylen);
    if (r == ST_SASL_CONTINUE) {
        st_buf_put(&out, "", 1);
        char nonce[256];
        assert_int_equal(sscanf((char *)out.data, "r=%255[^,]", nonce), 1);
        char final[1024];
        snprintf(final, sizeof final, final_fmt, nonce);
        st_buf_t out2;
        st_buf_init(&out2);
        r = st_sasl_server_step(srv, (const uint8_t *)final, strlen(final), &out2, why, whylen);
        st_buf_fini(&out2);
    }
    st_buf_fini(&out);
    st_sasl_server_free(srv);
    return r;
}

static void test_scram_bad_messages(void **state) {
    (void)state;
    store_t st = {0};
    add_user(&st, "alice", ST_SASL_SCRAM_SHA_256, "alice-secret");
    char why[256];
    /* channel binding asked for */
    assert_int_equal(server_final(&st, "p=tls-unique,,n=alice,r=abc", "", why, sizeof why),
                     ST_SASL_FAILED);
    assert_non_null(strstr(why, "channel binding"));
    /* malformed first messages */
    const char *firsts[] = {"", "n", "n,,", "n,,n=,r=abc", "n,,n=alice", "n,,r=abc,n=alice",
                            "x,,n=alice,r=abc", "n,,n=al=1ce,r=abc", "n,,n=alice,r=a,b",
                            "n,,n=alice,r=abc,m=ext", "n,,n=alice,r=abc,tokenauth=true",
                            "n,a=bob,n=alice,r=abc"};
    for (size_t i = 0; i < sizeof firsts / sizeof firsts[0]; i++) {
        st_sasl_server_ops_t ops = {plain_check, lookup, &st};
        st_sasl_server_t *srv = st_sasl_server_new(ST_SASL_SCRAM_SHA_256, &ops);
        st_buf_t out;
        st_buf_init(&out);
        st_sasl_step_t r = st_sasl_server_step(srv, (const uint8_t *)firsts[i], strlen(firsts[i]),
                                               &out, why, sizeof why);
        if (r != ST_SASL_FAILED) fail_msg("first message '%s' was accepted", firsts[i]);
        st_buf_fini(&out);
        st_sasl_server_free(srv);
    }
    /* librdkafka 2.0's final nonce: its own nonce again, then server-first's
     * (accepted up to the proof, as Kafka accepts it) */
    assert_int_equal(server_final(&st, "n,,n=alice,r=abc", "c=biws,r=abc%s,p=AAAA", why, sizeof why),
                     ST_SASL_FAILED);
    assert_null(strstr(why, "nonce"));
    /* the nonce is not the server's */
    assert_int_equal(server_final(&st, "n,,n=alice,r=abc", "c=biws,r=abcXYZ,p=AAAA", why,
                                  sizeof why),
                     ST_SASL_FAILED);
    assert_non_null(strstr(why, "nonce"));
    /* channel binding data that is not the first message's header */
    assert_int_equal(server_final(&st, "n,,n=alice,r=abc", "c=eSws,r=%s,p=AAAA", why, sizeof why),
                     ST_SASL_FAILED);
    /* no proof, a proof of the wrong length, a wrong proof */
    assert_int_equal(server_final(&st, "n,,n=alice,r=abc", "c=biws,r=%s", why, sizeof why),
                     ST_SASL_FAILED);
    assert_int_equal(server_final(&st, "n,,n=alice,r=abc", "c=biws,r=%s,p=AAAA", why, sizeof why),
                     ST_SASL_FAILED);
    assert_int_equal(server_final(&st, "n,,n=alice,r=abc",
                                  "c=biws,r=%s,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", why,
                                  sizeof why),
                     ST_SASL_FAILED);
    assert_non_null(strstr(why, "invalid credentials"));
    /* garbage: never a crash, never a success */
    srand(7);
    for (int i = 0; i < 2000; i++) {
        uint8_t junk[96];
        size_t n = (size_t)(rand() % (int)sizeof junk);
        for (size_t k = 0; k < n; k++) junk[k] = (uint8_t)(rand() % 4 ? 'a' + rand() % 26 : rand());
        if (i % 3 == 0 && n > 6) memcpy(junk, "n,,n=alice,r=", ST_MIN(n, 13));
        st_sasl_server_ops_t ops = {plain_check, lookup, &st};
        st_sasl_server_t *srv = st_sasl_server_new(ST_SASL_SCRAM_SHA_256, &ops);
        st_buf_t out;
        st_buf_init(&out);
        st_sasl_step_t r = st_sasl_server_step(srv, junk, n, &out, why, sizeof why);
        if (r == ST_SASL_CONTINUE) {
            out.len = 0;
            r = st_sasl_server_step(srv, junk, n, &out, why, sizeof why);
        }
        assert_int_equal(r, ST_SASL_FAILED);
        st_buf_fini(&out);
        st_sasl_server_free(srv);
    }
}

static void test_plain(void **state) {
    (void)state;
    store_t st = {.plain_user = "alice", .plain_password = "alice-secret"};
    st_sasl_server_ops_t ops = {plain_check, lookup, &st};
    const struct {
        const char *tok;
        size_t n;
        int ok;
    } cases[] = {
        {"\0alice\0alice-secret", 19, 1},
        {"alice\0alice\0alice-secret", 24, 1}, /* authzid = username */
        {"bob\0alice\0alice-secret", 22, 0},   /* authzid of another */
        {"\0alice\0wrong", 12, 0},
        {"\0\0alice-secret", 14, 0},
        {"\0alice\0", 7, 0},
        {"\0alice", 6, 0},
        {"", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_sasl_server_t *srv = st_sasl_server_new(ST_SASL_PLAIN, &ops);
        st_buf_t out;
        st_buf_init(&out);
        char why[256] = "";
        st_sasl_step_t r =
            st_sasl_server_step(srv, (const uint8_t *)cases[i].tok, cases[i].n, &out, why, sizeof why);
        assert_int_equal(r, cases[i].ok ? ST_SASL_DONE : ST_SASL_FAILED);
        if (!cases[i].ok) assert_null(strstr(why, "secret"));
        /* nothing more after the end */
        if (r == ST_SASL_DONE)
            assert_int_equal(st_sasl_server_step(srv, (const uint8_t *)"x", 1, &out, why, sizeof why),
                             ST_SASL_FAILED);
        st_buf_fini(&out);
        st_sasl_server_free(srv);
    }
    st_sasl_server_t *srv = st_sasl_server_new(ST_SASL_PLAIN, &ops);
    st_sasl_client_t *cli = st_sasl_client_new(ST_SASL_PLAIN, "alice", "alice-secret");
    char why[256];
    assert_int_equal(converse(srv, cli, why, sizeof why), ST_SASL_DONE);
    st_sasl_server_free(srv);
    st_sasl_client_free(cli);
    assert_int_equal(st_sasl_mech_parse("SCRAM-SHA-512"), ST_SASL_SCRAM_SHA_512);
    assert_int_equal(st_sasl_mech_parse("scram-sha-512"), ST_SASL_NONE);
    assert_int_equal(st_sasl_mech_parse("GSSAPI"), ST_SASL_NONE);
}

static void test_jaas(void **state) {
    (void)state;
    st_jaas_t j;
    char err[256];
    assert_int_equal(st_jaas_parse("org.apache.kafka.common.security.plain.PlainLoginModule "
                                   "required username=\"admin\" password=\"a \\\"q\\\" b\" "
                                   "user_admin=\"admin-secret\" user_alice=alice-secret;",
                                   &j, err, sizeof err),
                     ST_OK);
    assert_string_equal(j.login_module, "org.apache.kafka.common.security.plain.PlainLoginModule");
    assert_int_equal(j.noptions, 4);
    assert_string_equal(st_jaas_get(&j, "password"), "a \"q\" b");
    assert_string_equal(st_jaas_get(&j, "user_alice"), "alice-secret");
    assert_null(st_jaas_get(&j, "user_bob"));
    st_jaas_fini(&j);
    const char *bad[] = {"", "Module", "Module required", "Module maybe x=\"y\";",
                         "Module required x=\"secret-value;", "Module required x;",
                         "Module required x=\"y\"; Other required;"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (st_jaas_parse(bad[i], &j, err, sizeof err) == ST_OK) fail_msg("accepted '%s'", bad[i]);
        assert_null(strstr(err, "secret-value")); /* never the value */
    }
}

static void test_listener_settings(void **state) {
    (void)state;
    st_sec_config_t c;
    st_sec_config_init(&c);
    st_cfg_bind_t b = {&st_sec_config_table, &c, st_sec_config_other};
    char err[512];
    assert_int_equal(st_cfg_bind_set(&b, 1, "ssl.keystore.location", "/a.pem", err, sizeof err),
                     ST_OK);
    assert_int_equal(st_cfg_bind_set(&b, 1, "listener.name.sasl_ssl.ssl.keystore.location",
                                     "/b.pem", err, sizeof err),
                     ST_OK);
    assert_int_equal(st_cfg_bind_set(&b, 1, "listener.name.sasl_ssl.plain.sasl.jaas.config",
                                     "M required;", err, sizeof err),
                     ST_OK);
    assert_string_equal(st_sec_config_get(&c, "SASL_SSL", "ssl.keystore.location"), "/b.pem");
    assert_string_equal(st_sec_config_get(&c, "SSL", "ssl.keystore.location"), "/a.pem");
    assert_string_equal(st_sec_config_get(&c, "SASL_SSL", "plain.sasl.jaas.config"), "M required;");
    assert_string_equal(st_sec_config_get(&c, "OTHER", "plain.sasl.jaas.config"), "");
    /* refused: unknown settings, bad values, old TLS, unknown mechanisms */
    const char *bad[][2] = {
        {"listener.name.x.log.dirs", "/x"},
        {"listener.name..ssl.keystore.location", "/x"},
        {"listener.name.x.ssl.enabled.protocols", "TLSv1.1"},
        {"ssl.enabled.protocols", "TLSv1.2,TLSv1"},
        {"sasl.enabled.mechanisms", "PLAIN,GSSAPI"},
        {"listener.name.x.gssapi.sasl.jaas.config", "M required;"},
        {"listener.name.x.PLAIN.sasl.jaas.config", "M required;"},
        {"ssl.client.auth", "maybe"},
        {"ssl.keystore.type", "JKS"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (st_cfg_bind_set(&b, 1, bad[i][0], bad[i][1], err, sizeof err) == ST_OK)
            fail_msg("%s=%s was accepted", bad[i][0], bad[i][1]);
    assert_true(st_cfg_is_secret("ssl.keystore.password"));
    assert_true(st_cfg_is_secret("listener.name.x.scram-sha-256.sasl.jaas.config"));
    assert_true(st_cfg_is_secret("objectstore.s3.secret.key"));
    assert_true(st_cfg_is_secret("objectstore.s3.session.token"));
    assert_false(st_cfg_is_secret("ssl.keystore.location"));
    st_sec_config_fini(&c);
}

static st_acl_t mk(int8_t rt, const char *name, int8_t pat, const char *principal, const char *host,
                   int8_t op, int8_t perm) {
    st_acl_t a = {{{0}}, rt, (char *)name, pat, (char *)principal, (char *)host, op, perm};
    return a;
}

static int can(const st_acl_set_t *set, const char *who, int8_t op, int8_t rt, const char *name) {
    st_acl_action_t act = {who, "127.0.0.1", op, rt, name, strlen(name)};
    return st_acl_authorize(set, &act);
}

static void test_acl_decisions(void **state) {
    (void)state;
    st_acl_t acls[] = {
        mk(ST_ACL_RES_TOPIC, "orders", ST_ACL_PAT_LITERAL, "User:alice", "*", ST_ACL_OP_READ,
           ST_ACL_PERM_ALLOW),
        mk(ST_ACL_RES_TOPIC, "logs-", ST_ACL_PAT_PREFIXED, "User:bob", "*", ST_ACL_OP_WRITE,
           ST_ACL_PERM_ALLOW),
        mk(ST_ACL_RES_TOPIC, "*", ST_ACL_PAT_LITERAL, "User:carol", "*", ST_ACL_OP_ALL,
           ST_ACL_PERM_ALLOW),
        mk(ST_ACL_RES_TOPIC, "secret", ST_ACL_PAT_LITERAL, "User:carol", "*", ST_ACL_OP_READ,
           ST_ACL_PERM_DENY),
        mk(ST_ACL_RES_GROUP, "g1", ST_ACL_PAT_LITERAL, "User:*", "*", ST_ACL_OP_READ,
           ST_ACL_PERM_ALLOW),
        mk(ST_ACL_RES_GROUP, "g2", ST_ACL_PAT_LITERAL, "User:alice", "10.0.0.9", ST_ACL_OP_READ,
           ST_ACL_PERM_ALLOW),
        mk(ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME, ST_ACL_PAT_LITERAL, "User:ops", "*",
           ST_ACL_OP_ALTER_CONFIGS, ST_ACL_PERM_ALLOW),
    };
    st_acl_set_t set = {acls, (int)(sizeof acls / sizeof acls[0]), "User:admin; User:CN=broker",
                        0};
    assert_true(can(&set, "User:alice", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "orders"));
    assert_true(can(&set, "User:alice", ST_ACL_OP_DESCRIBE, ST_ACL_RES_TOPIC, "orders")); /* implied */
    assert_false(can(&set, "User:alice", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, "orders"));
    assert_false(can(&set, "User:alice", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "orders2"));
    assert_false(can(&set, "User:bob", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "orders"));
    /* prefixed: new topics of the prefix are covered */
    assert_true(can(&set, "User:bob", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, "logs-2026"));
    assert_false(can(&set, "User:bob", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, "logs"));
    /* deny wins over an allow of everything; it refuses what it names only */
    assert_true(can(&set, "User:carol", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, "secret"));
    assert_false(can(&set, "User:carol", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "secret"));
    assert_true(can(&set, "User:carol", ST_ACL_OP_DESCRIBE, ST_ACL_RES_TOPIC, "secret"));
    /* User:* and hosts */
    assert_true(can(&set, "User:anyone", ST_ACL_OP_READ, ST_ACL_RES_GROUP, "g1"));
    assert_false(can(&set, "User:alice", ST_ACL_OP_READ, ST_ACL_RES_GROUP, "g2")); /* other host */
    /* ALTER_CONFIGS implies DESCRIBE_CONFIGS, not ALTER */
    assert_true(can(&set, "User:ops", ST_ACL_OP_DESCRIBE_CONFIGS, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME));
    assert_false(can(&set, "User:ops", ST_ACL_OP_ALTER, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME));
    /* super users do anything */
    assert_true(can(&set, "User:admin", ST_ACL_OP_DELETE, ST_ACL_RES_TOPIC, "secret"));
    assert_true(can(&set, "User:CN=broker", ST_ACL_OP_CLUSTER_ACTION, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME));
    assert_false(can(&set, "User:adm", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "x"));
    /* a resource nobody names: allow.everyone.if.no.acl.found */
    assert_false(can(&set, "User:alice", ST_ACL_OP_READ, ST_ACL_RES_TRANSACTIONAL_ID, "t"));
    set.allow_if_none = 1;
    assert_true(can(&set, "User:alice", ST_ACL_OP_READ, ST_ACL_RES_TRANSACTIONAL_ID, "t"));
    assert_false(can(&set, "User:bob", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "orders")); /* named */
    /* filters */
    st_acl_filter_t f = {ST_ACL_RES_TOPIC, "logs-7", ST_ACL_PAT_MATCH, NULL, NULL, ST_ACL_OP_ANY,
                         ST_ACL_PERM_ANY};
    int n = 0;
    for (size_t i = 0; i < sizeof acls / sizeof acls[0]; i++) n += st_acl_filter_matches(&f, &acls[i]);
    assert_int_equal(n, 2); /* logs- prefixed and the * literal */
    f = (st_acl_filter_t){ST_ACL_RES_ANY, NULL, ST_ACL_PAT_ANY, "User:carol", NULL, ST_ACL_OP_ANY,
                          ST_ACL_PERM_DENY};
    n = 0;
    for (size_t i = 0; i < sizeof acls / sizeof acls[0]; i++) n += st_acl_filter_matches(&f, &acls[i]);
    assert_int_equal(n, 1);
    char why[128];
    st_acl_t bad = mk(ST_ACL_RES_CLUSTER, "other", ST_ACL_PAT_LITERAL, "User:x", "*", ST_ACL_OP_ALTER,
                      ST_ACL_PERM_ALLOW);
    assert_int_equal(st_acl_valid(&bad, why, sizeof why), -1);
    bad = mk(ST_ACL_RES_TOPIC, "t", ST_ACL_PAT_MATCH, "User:x", "*", ST_ACL_OP_READ, ST_ACL_PERM_ALLOW);
    assert_int_equal(st_acl_valid(&bad, why, sizeof why), -1);
    bad = mk(ST_ACL_RES_TOPIC, "t", ST_ACL_PAT_LITERAL, "alice", "*", ST_ACL_OP_READ, ST_ACL_PERM_ALLOW);
    assert_int_equal(st_acl_valid(&bad, why, sizeof why), -1);
    bad = mk(ST_ACL_RES_TOPIC, "t", ST_ACL_PAT_LITERAL, "User:x", "*", ST_ACL_OP_ANY, ST_ACL_PERM_ALLOW);
    assert_int_equal(st_acl_valid(&bad, why, sizeof why), -1);
    assert_int_equal(st_acl_op_parse("describeconfigs"), ST_ACL_OP_DESCRIBE_CONFIGS);
    assert_string_equal(st_acl_resource_name(ST_ACL_RES_TRANSACTIONAL_ID), "TransactionalId");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scram_rfc7677_client),
        cmocka_unit_test(test_scram_rfc7677_credential),
        cmocka_unit_test(test_scram_both_mechanisms),
        cmocka_unit_test(test_scram_bad_messages),
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_jaas),
        cmocka_unit_test(test_listener_settings),
        cmocka_unit_test(test_acl_decisions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

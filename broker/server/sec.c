/*
 * sec.c - who a connection is.
 *
 * At start-up, each listener's security: a TLS context for SSL and
 * SASL_SSL listeners from the ssl.* settings (its own
 * listener.name.<listener>.ssl.* first, Kafka's rule), and for SASL
 * listeners the mechanisms it serves and its PLAIN users (the user_<name>
 * options of listener.name.<listener>.plain.sasl.jaas.config).
 *
 * Per connection, a session (st_session_t) made at its first request:
 *
 *   PLAINTEXT, SSL   authenticated from the start: User:ANONYMOUS, or on
 *                    SSL the subject of the client's certificate
 *   SASL_*           UNAUTHENTICATED: only ApiVersions, SaslHandshake and
 *                    (after a handshake) SaslAuthenticate pass the gate;
 *                    any other request closes the connection, as Kafka's
 *                    SaslServerAuthenticator does
 *                    --SaslAuthenticate ... DONE--> AUTHENTICATED
 *                    (User:<name>); with connections.max.reauth.ms the
 *                    session ends that long after: the client sends
 *                    SaslHandshake + SaslAuthenticate again on the same
 *                    connection (KIP-368, same mechanism and principal),
 *                    and a request of another kind after the end closes
 *                    the connection
 *   a failure        the error answer waits
 *                    connection.failed.authentication.delay.ms, then the
 *                    connection is closed; nothing it sends meanwhile is
 *                    served
 *
 * Sessions live on their connection's loop thread only.
 */
#include "server.h"

#include <ctype.h>
#include <stdlib.h>
#include <strings.h>

#include <openssl/crypto.h>

void st_server_tls_config(const st_sec_config_t *sec, const char *listener, int client,
                          st_tls_config_t *out) {
    memset(out, 0, sizeof *out);
    out->client = client;
    out->keystore_type = st_sec_config_get(sec, listener, "ssl.keystore.type");
    out->keystore_location = st_sec_config_get(sec, listener, "ssl.keystore.location");
    out->keystore_password = st_sec_config_get(sec, listener, "ssl.keystore.password");
    out->key_password = st_sec_config_get(sec, listener, "ssl.key.password");
    out->truststore_type = st_sec_config_get(sec, listener, "ssl.truststore.type");
    out->truststore_location = st_sec_config_get(sec, listener, "ssl.truststore.location");
    out->client_auth = st_sec_config_get(sec, listener, "ssl.client.auth");
    out->enabled_protocols = st_sec_config_get(sec, listener, "ssl.enabled.protocols");
    out->cipher_suites = st_sec_config_get(sec, listener, "ssl.cipher.suites");
    out->endpoint_identification =
        st_sec_config_get(sec, listener, "ssl.endpoint.identification.algorithm");
}

/* PLAIN: the listener's user_<name> option, compared in constant time. */
static int plain_check(void *arg, const char *user, const char *password) {
    const st_listener_sec_t *ls = arg;
    char opt[300];
    if (snprintf(opt, sizeof opt, "user_%s", user) >= (int)sizeof opt) return 0;
    const char *want = st_jaas_get(&ls->plain, opt);
    if (!want) return 0;
    size_t a = strlen(want), b = strlen(password);
    return a == b && CRYPTO_memcmp(want, password, a) == 0;
}

/* SCRAM: the credential in the metadata image this broker holds. */
static int scram_lookup(void *arg, const char *user, st_sasl_mech_t m, st_scram_cred_t *out) {
    const st_listener_sec_t *ls = arg;
    if (!ls->srv->ctl) return -1;
    st_meta_image_t *img = st_controller_image(ls->srv->ctl);
    const st_scram_cred_t *c = img ? st_image_scram(img, user, m) : NULL;
    if (c) *out = *c;
    st_image_release(img);
    return c ? 0 : -1;
}

static st_err_t listener_sasl(st_server_t *srv, st_listener_sec_t *ls, const char *name,
                              char *err, size_t errlen) {
    const char *mechs = st_sec_config_get(srv->sec, name, "sasl.enabled.mechanisms");
    int n = 0;
    char **v = st_split_csv(mechs, &n);
    for (int i = 0; i < n; i++) ls->mechs |= 1u << st_sasl_mech_parse(v[i]);
    st_free_strv(v, n);
    ls->mechs &= ~1u; /* ST_SASL_NONE: an unknown name (refused by the table) */
    if (!ls->mechs) {
        snprintf(err, errlen, "sasl.enabled.mechanisms: listener %s has none", name);
        return ST_E_CONFIG;
    }
    if (ls->mechs & (1u << ST_SASL_PLAIN)) {
        const char *jaas = st_sec_config_get(srv->sec, name, "plain.sasl.jaas.config");
        char why[256];
        if (!jaas || !*jaas) {
            snprintf(err, errlen,
                     "listener.name.%s.plain.sasl.jaas.config: PLAIN is enabled on listener %s "
                     "but no users are configured (org.apache.kafka.common.security.plain."
                     "PlainLoginModule required user_<name>=\"<password>\";)",
                     name, name);
            return ST_E_CONFIG;
        }
        if (st_jaas_parse(jaas, &ls->plain, why, sizeof why)) {
            snprintf(err, errlen, "listener.name.%s.plain.sasl.jaas.config: %s", name, why);
            return ST_E_CONFIG;
        }
    }
    ls->reauth_ms = st_sec_config_get_long(srv->sec, name, "connections.max.reauth.ms");
    ls->ops.plain_check = plain_check;
    ls->ops.scram_lookup = scram_lookup;
    ls->ops.arg = ls;
    return ST_OK;
}

st_err_t st_server_security_open(st_server_t *srv, char *err, size_t errlen) {
    srv->lsec = st_calloc((size_t)srv->nlisteners + 1, sizeof *srv->lsec);
    for (int i = 0; i < srv->nlisteners; i++) {
        st_listener_spec_t *l = &srv->listeners[i];
        st_listener_sec_t *ls = &srv->lsec[i];
        int proto = st_listener_protocol(&srv->cfg, l->name);
        ls->srv = srv;
        ls->proto = proto < 0 ? ST_SECPROTO_PLAINTEXT : proto;
        if (st_secproto_sasl(ls->proto)) {
            st_err_t e = listener_sasl(srv, ls, l->name, err, errlen);
            if (e) return e;
        }
        if (!st_secproto_tls(ls->proto)) continue;
        st_tls_config_t tc;
        char name[64], why[768];
        snprintf(name, sizeof name, "listener %s", l->name);
        st_server_tls_config(srv->sec, l->name, 0, &tc);
        tc.name = name;
        st_err_t e = st_tls_ctx_new(&tc, &l->tls, why, sizeof why);
        if (e) {
            snprintf(err, errlen, "listener %s: %s", l->name, why);
            return e;
        }
    }
    return ST_OK;
}

/* A SASL login of this broker: the username and password options of the
 * listener's <mechanism>.sasl.jaas.config (heap copies). */
static st_err_t own_login(st_server_t *srv, const char *listener, st_sasl_mech_t m, char **user,
                          char **password, char *err, size_t errlen) {
    char key[64], lmech[32], llistener[64];
    snprintf(lmech, sizeof lmech, "%s", st_sasl_mech_name(m));
    snprintf(llistener, sizeof llistener, "%s", listener);
    for (char *p = lmech; *p; p++) *p = (char)tolower((unsigned char)*p);
    for (char *p = llistener; *p; p++) *p = (char)tolower((unsigned char)*p);
    snprintf(key, sizeof key, "%s.sasl.jaas.config", lmech);
    const char *text = st_sec_config_get(srv->sec, listener, key);
    st_jaas_t j;
    char why[256];
    if (!text || !*text || st_jaas_parse(text, &j, why, sizeof why)) {
        snprintf(err, errlen,
                 "listener.name.%s.%s: this broker reaches listener %s with SASL %s and needs "
                 "its username and password options there%s%s",
                 llistener, key, listener, st_sasl_mech_name(m), text && *text ? ": " : "",
                 text && *text ? why : "");
        return ST_E_CONFIG;
    }
    const char *u = st_jaas_get(&j, "username"), *pw = st_jaas_get(&j, "password");
    st_err_t e = ST_OK;
    if (!u || !pw) {
        snprintf(err, errlen, "listener.name.%s.%s: no username and password options (this "
                              "broker's own login to listener %s)", llistener, key, listener);
        e = ST_E_CONFIG;
    } else {
        *user = st_strdup(u);
        *password = st_strdup(pw);
    }
    st_jaas_fini(&j);
    return e;
}

/* One profile of this broker's own connections to listener (NULL: none
 * to speak of, plaintext). */
static st_err_t client_profile(st_server_t *srv, const char *listener, const char *mech_key,
                               st_client_security_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!listener || !*listener) return ST_OK;
    int proto = st_listener_protocol(&srv->cfg, listener);
    if (st_secproto_tls(proto)) {
        st_tls_config_t tc;
        char name[96], why[768];
        snprintf(name, sizeof name, "connections to %s", listener);
        st_server_tls_config(srv->sec, listener, 1, &tc);
        tc.name = name;
        if (st_tls_ctx_new(&tc, &out->tls, why, sizeof why)) {
            snprintf(err, errlen, "listener %s (this broker's own connections): %s", listener, why);
            return ST_E_CONFIG;
        }
    }
    if (st_secproto_sasl(proto)) {
        const char *m = st_sec_config_get(srv->sec, NULL, mech_key);
        if (!m || !*m) { /* the listener's first enabled mechanism */
            const char *list = st_sec_config_get(srv->sec, listener, "sasl.enabled.mechanisms");
            int n = 0;
            char **v = st_split_csv(list, &n);
            out->mech = n ? st_sasl_mech_parse(v[0]) : ST_SASL_NONE;
            st_free_strv(v, n);
        } else {
            out->mech = st_sasl_mech_parse(m);
        }
        char *user = NULL, *password = NULL;
        st_err_t e = own_login(srv, listener, out->mech, &user, &password, err, errlen);
        if (e) return e;
        out->user = user;
        out->password = password;
    }
    return ST_OK;
}

/* The listener other brokers are reached on: inter.broker.listener.name,
 * else the first that is not a controller listener. */
static const char *inter_broker_listener(const st_server_t *srv, char *buf, size_t n) {
    if (*srv->cfg.inter_broker_listener_name) return srv->cfg.inter_broker_listener_name;
    st_listener_spec_t *l = NULL;
    int cnt = 0;
    const char *adv = *srv->cfg.advertised_listeners ? srv->cfg.advertised_listeners
                                                      : srv->cfg.listeners;
    char why[256];
    buf[0] = 0;
    if (st_parse_listeners(adv, &l, &cnt, why, sizeof why) == ST_OK)
        for (int i = 0; i < cnt && !buf[0]; i++)
            if (!st_cluster_is_controller_listener(&srv->cluster, l[i].name))
                snprintf(buf, n, "%s", l[i].name);
    free(l);
    return buf[0] ? buf : NULL;
}

st_err_t st_server_client_security_open(st_server_t *srv, char *err, size_t errlen) {
    char buf[64];
    const char *ib = inter_broker_listener(srv, buf, sizeof buf);
    const char *ctl = srv->cluster.ncontroller_listeners ? srv->cluster.controller_listeners[0] : ib;
    st_err_t e = client_profile(srv, ib, "sasl.mechanism.inter.broker.protocol", &srv->ib_sec, err,
                                errlen);
    if (!e)
        e = client_profile(srv, ctl, "sasl.mechanism.controller.protocol", &srv->ctl_sec, err,
                           errlen);
    return e;
}

static void profile_fini(st_client_security_t *c) {
    st_tls_ctx_destroy(c->tls);
    free((char *)c->user);
    if (c->password) {
        OPENSSL_cleanse((char *)c->password, strlen(c->password));
        free((char *)c->password);
    }
    memset(c, 0, sizeof *c);
}

void st_server_security_close(st_server_t *srv) {
    for (int i = 0; i < srv->nlisteners; i++) {
        st_tls_ctx_destroy(srv->listeners[i].tls);
        srv->listeners[i].tls = NULL;
        if (srv->lsec) st_jaas_fini(&srv->lsec[i].plain);
    }
    free(srv->lsec);
    srv->lsec = NULL;
    profile_fini(&srv->ib_sec);
    profile_fini(&srv->ctl_sec);
}

/* ---- sessions -------------------------------------------------------------- */

static void session_free(void *p) {
    st_session_t *s = p;
    if (!s) return;
    st_sasl_server_free(s->sasl);
    free(s);
}

st_session_t *st_session_of(st_server_t *srv, st_request_t *req) {
    st_session_t *s = st_request_conn_state(req);
    if (s) return s;
    s = st_calloc(1, sizeof *s);
    int li = st_request_listener(req);
    static const st_listener_sec_t plaintext = {.proto = ST_SECPROTO_PLAINTEXT};
    s->ls = srv->lsec && li >= 0 && li < srv->nlisteners ? &srv->lsec[li] : &plaintext;
    if (!st_secproto_sasl(s->ls->proto)) {
        s->authenticated = 1;
        const char *subject = st_request_peer_subject(req);
        snprintf(s->principal, sizeof s->principal, "User:%s", *subject ? subject : "ANONYMOUS");
    }
    st_request_conn_set_state(req, s, session_free);
    return s;
}

static void gate_close(st_request_t *req, const char *why) {
    st_request_close_conn(req, why);
    st_request_no_response(req);
}

int st_session_gate(st_server_t *srv, st_request_t *req) {
    st_session_t *s = st_session_of(srv, req);
    int16_t key = req->api->key;
    if (s->failed) { /* waiting to close: serve nothing more */
        st_request_no_response(req);
        return 1;
    }
    if (!st_secproto_sasl(s->ls->proto)) return 0;
    int sasl_api = key == ST_API_SASL_HANDSHAKE || key == ST_API_SASL_AUTHENTICATE;
    if (!s->authenticated) {
        if (key == ST_API_API_VERSIONS || sasl_api) return 0;
        char why[160];
        snprintf(why, sizeof why, "unexpected %s request during SASL authentication",
                 req->api->name);
        gate_close(req, why);
        return 1;
    }
    if (s->expires_ms && !sasl_api && st_mono_ms() >= s->expires_ms) {
        gate_close(req, "the SASL session expired (connections.max.reauth.ms) and the client "
                        "did not re-authenticate");
        return 1;
    }
    return 0;
}

/* APIs that act on the cluster as a whole, with the operation Kafka's
 * KafkaApis / ControllerApis checks on the cluster resource; refused here
 * with an answer whose every error code is CLUSTER_AUTHORIZATION_FAILED
 * (each of them has a top-level one).  The rest check their own resources
 * in their handlers. */
static const struct {
    int16_t key;
    int8_t op;
} cluster_ops[] = {
    {ST_API_VOTE, ST_ACL_OP_CLUSTER_ACTION},
    {ST_API_BEGIN_QUORUM_EPOCH, ST_ACL_OP_CLUSTER_ACTION},
    {ST_API_END_QUORUM_EPOCH, ST_ACL_OP_CLUSTER_ACTION},
    {ST_API_FETCH_SNAPSHOT, ST_ACL_OP_CLUSTER_ACTION},
    {ST_API_BROKER_REGISTRATION, ST_ACL_OP_CLUSTER_ACTION},
    {ST_API_BROKER_HEARTBEAT, ST_ACL_OP_CLUSTER_ACTION},
    {ST_API_ALTER_PARTITION, ST_ACL_OP_CLUSTER_ACTION},
    {ST_API_ALLOCATE_PRODUCER_IDS, ST_ACL_OP_CLUSTER_ACTION},
    {ST_API_ELECT_LEADERS, ST_ACL_OP_ALTER},
    {ST_API_ALTER_PARTITION_REASSIGNMENTS, ST_ACL_OP_ALTER},
    {ST_API_LIST_PARTITION_REASSIGNMENTS, ST_ACL_OP_DESCRIBE},
    {ST_API_DESCRIBE_QUORUM, ST_ACL_OP_DESCRIBE},
    {ST_API_DESCRIBE_CLUSTER, ST_ACL_OP_DESCRIBE},
    {ST_API_DESCRIBE_LOG_DIRS, ST_ACL_OP_DESCRIBE},
    {ST_API_DESCRIBE_USER_SCRAM_CREDENTIALS, ST_ACL_OP_DESCRIBE},
};

int st_cluster_gate(st_server_t *srv, st_request_t *req) {
    if (!*srv->sec->authorizer_class_name) return 0;
    for (size_t i = 0; i < ST_ARRAY_SIZE(cluster_ops); i++) {
        if (cluster_ops[i].key != req->api->key) continue;
        if (st_authorized_cluster(srv, req, cluster_ops[i].op)) return 0;
        st_server_refuse(req, ST_E_CLUSTER_AUTHORIZATION_FAILED);
        return 1;
    }
    return 0;
}

/* ---- a failure, answered late ----------------------------------------------- */

typedef struct fail_op {
    st_delayed_t d;
    st_request_t *req;
    void *body;
} fail_op_t;

static int fail_try(st_delayed_t *d) {
    (void)d;
    return 0; /* only the deadline ends it */
}

static void fail_expire(st_delayed_t *d) {
    fail_op_t *op = (fail_op_t *)d;
    st_request_respond_close(op->req, op->body);
}

static void fail_destroy(st_delayed_t *d) { free(d); }

void st_session_fail_later(st_server_t *srv, st_request_t *req, void *body) {
    st_session_t *s = st_session_of(srv, req);
    s->failed = 1;
    fail_op_t *op = st_calloc(1, sizeof *op);
    op->req = req;
    op->body = body; /* the request's arena: lives until it is answered */
    op->d.deadline_ms = st_mono_ms() + srv->sec->connection_failed_authentication_delay_ms;
    op->d.try_complete = fail_try;
    op->d.expire = fail_expire;
    op->d.destroy = fail_destroy;
    st_purgatory_add(st_req_purgatory(req), &op->d);
}

/* ---- authorization ------------------------------------------------------------ */

/* The client's address, without its port ("[v6]" is not written). */
static void peer_host(st_request_t *req, char *host, size_t n) {
    const char *peer = st_request_peer(req), *colon = strrchr(peer, ':');
    size_t hl = colon ? (size_t)(colon - peer) : strlen(peer);
    if (hl >= n) hl = n - 1;
    memcpy(host, peer, hl);
    host[hl] = 0;
}

/* What every question to the authorizer starts from: the request's
 * principal and host, and the ACL bindings of the image this broker holds
 * (kept until authz_done). */
typedef struct authz {
    st_session_t *s;
    char host[72];
    st_meta_image_t *img;
    st_acl_set_t set;
} authz_t;

static void authz_begin(st_server_t *srv, st_request_t *req, authz_t *a) {
    a->s = st_session_of(srv, req);
    peer_host(req, a->host, sizeof a->host);
    a->img = srv->ctl ? st_controller_image(srv->ctl) : NULL;
    a->set = (st_acl_set_t){NULL, 0, srv->sec->super_users, srv->sec->allow_everyone_if_no_acl_found};
    st_image_acls(a->img, &a->set.acls, &a->set.n);
}

static void authz_done(authz_t *a) { st_image_release(a->img); }

int st_authorized(st_server_t *srv, st_request_t *req, int8_t op, int8_t rtype, const char *name,
                  size_t len) {
    if (!*srv->sec->authorizer_class_name) return 1;
    authz_t a;
    authz_begin(srv, req, &a);
    st_acl_action_t act = {a.s->principal, a.host, op, rtype, name, len};
    int ok = st_acl_authorize(&a.set, &act);
    if (!ok)
        ST_DEBUG("security", "%s (%s) may not %s %s %.*s (%s)", a.s->principal, a.host,
                 st_acl_op_name(op), st_acl_resource_name(rtype), (int)len, name,
                 req->api->name);
    authz_done(&a);
    return ok;
}

int st_authorized_cluster(st_server_t *srv, st_request_t *req, int8_t op) {
    return st_authorized(srv, req, op, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                         strlen(ST_ACL_CLUSTER_NAME));
}

int32_t st_authorized_ops(st_server_t *srv, st_request_t *req, int8_t rtype, const char *name,
                          size_t len, int32_t supported) {
    if (!*srv->sec->authorizer_class_name) return supported;
    int32_t out = 0;
    for (int op = ST_ACL_OP_READ; op <= ST_ACL_OP_IDEMPOTENT_WRITE; op++)
        if ((supported & ST_ACL_BIT(op)) && st_authorized(srv, req, (int8_t)op, rtype, name, len))
            out |= ST_ACL_BIT(op);
    return out;
}

int st_authorized_any(st_server_t *srv, st_request_t *req, int8_t op, int8_t rtype) {
    if (!*srv->sec->authorizer_class_name) return 1;
    authz_t a;
    authz_begin(srv, req, &a);
    int ok = st_acl_authorize_any(&a.set, a.s->principal, a.host, op, rtype);
    authz_done(&a);
    return ok;
}

/*
 * config.c - the security settings: one descriptor table (Kafka's names),
 * and the listener.name.<listener>.<key> family that overrides a row for
 * one listener, as Kafka's ListenerName.configPrefix does.
 */
#include "security.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#define SROW(name, type, field, def, min, max, validate, doc)                          \
    {name, type, offsetof(st_sec_config_t, field), def, min, max, validate, 0, doc}

/* Each comma-separated item of v is one of names[] (case as written). */
static int one_of_each(const char *v, const char *const *names, size_t n, const char *what,
                       char *why, size_t whylen) {
    char *copy = st_strdup(v), *save = NULL;
    int bad = 0;
    for (char *tok = strtok_r(copy, ", ", &save); tok && !bad; tok = strtok_r(NULL, ", ", &save)) {
        int known = 0;
        for (size_t i = 0; i < n; i++) known |= !strcmp(tok, names[i]);
        if (!known) {
            snprintf(why, whylen, "%s is not %s", tok, what);
            bad = 1;
        }
    }
    free(copy);
    return bad;
}

static int v_protocols(const char *v, char *why, size_t n) {
    static const char *const ok[] = {"TLSv1.2", "TLSv1.3"};
    if (!*v) {
        snprintf(why, n, "must name TLSv1.2, TLSv1.3 or both");
        return 1;
    }
    return one_of_each(v, ok, ST_ARRAY_SIZE(ok), "allowed (TLSv1.2 and TLSv1.3 only)", why, n);
}

static int v_client_auth(const char *v, char *why, size_t n) {
    if (!strcmp(v, "none") || !strcmp(v, "requested") || !strcmp(v, "required")) return 0;
    snprintf(why, n, "must be none, requested or required");
    return 1;
}

static int v_keystore_type(const char *v, char *why, size_t n) {
    if (!strcasecmp(v, "PEM") || !strcasecmp(v, "PKCS12")) return 0;
    snprintf(why, n, "must be PEM or PKCS12 (JKS is Java's own format: convert it with keytool "
                     "-importkeystore -deststoretype PKCS12)");
    return 1;
}

static int v_truststore_type(const char *v, char *why, size_t n) {
    if (!strcasecmp(v, "PEM")) return 0;
    snprintf(why, n, "must be PEM (a file of CA certificates)");
    return 1;
}

static int v_endpoint_id(const char *v, char *why, size_t n) {
    if (!*v || !strcasecmp(v, "https")) return 0;
    snprintf(why, n, "must be https or empty");
    return 1;
}

static const char *const mechanisms[] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"};

static int v_mechanisms(const char *v, char *why, size_t n) {
    return one_of_each(v, mechanisms, ST_ARRAY_SIZE(mechanisms),
                       "a mechanism Strata serves (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", why, n);
}

static int v_mechanism(const char *v, char *why, size_t n) {
    if (!*v) return 0;
    for (size_t i = 0; i < ST_ARRAY_SIZE(mechanisms); i++)
        if (!strcmp(v, mechanisms[i])) return 0;
    snprintf(why, n, "%s is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", v);
    return 1;
}

static int v_authorizer(const char *v, char *why, size_t n) {
    if (!*v || !strcmp(v, "org.apache.kafka.metadata.authorizer.StandardAuthorizer")) return 0;
    snprintf(why, n, "must be empty (no authorization) or "
                     "org.apache.kafka.metadata.authorizer.StandardAuthorizer");
    return 1;
}

static const st_cfg_desc_t rows[] = {
    SROW("ssl.keystore.type", ST_CFG_STRING, ssl_keystore_type, "PEM", 0, 0, v_keystore_type,
         "Format of ssl.keystore.location: PEM (the private key and its certificate chain in one "
         "file) or PKCS12."),
    SROW("ssl.keystore.location", ST_CFG_STRING, ssl_keystore_location, "", 0, 0, NULL,
         "The certificate chain and private key of TLS listeners (and of this broker as a TLS "
         "client, when set). Reloaded when the file changes."),
    SROW("ssl.keystore.password", ST_CFG_STRING, ssl_keystore_password, "", 0, 0, NULL,
         "Password of a PKCS12 keystore. Never shown."),
    SROW("ssl.key.password", ST_CFG_STRING, ssl_key_password, "", 0, 0, NULL,
         "Password of an encrypted PEM private key. Never shown."),
    SROW("ssl.truststore.type", ST_CFG_STRING, ssl_truststore_type, "PEM", 0, 0,
         v_truststore_type, "Format of ssl.truststore.location: PEM."),
    SROW("ssl.truststore.location", ST_CFG_STRING, ssl_truststore_location, "", 0, 0, NULL,
         "CA certificates that client certificates (ssl.client.auth) and, for this broker's own "
         "connections, the other brokers' certificates must chain to; empty: the system's CAs "
         "for outbound connections. Reloaded when the file changes."),
    SROW("ssl.client.auth", ST_CFG_STRING, ssl_client_auth, "none", 0, 0, v_client_auth,
         "Client certificates on TLS listeners: none, requested (checked when sent) or "
         "required. On an SSL listener the principal is the certificate's subject."),
    SROW("ssl.enabled.protocols", ST_CFG_STRING, ssl_enabled_protocols, "TLSv1.2,TLSv1.3", 0, 0,
         v_protocols, "TLS versions accepted: TLSv1.2 and TLSv1.3; nothing older is ever allowed."),
    SROW("ssl.cipher.suites", ST_CFG_STRING, ssl_cipher_suites, "", 0, 0, NULL,
         "Comma-separated cipher suites (IANA names as Kafka's, or OpenSSL's); empty: OpenSSL's "
         "defaults."),
    SROW("ssl.endpoint.identification.algorithm", ST_CFG_STRING,
         ssl_endpoint_identification_algorithm, "https", 0, 0, v_endpoint_id,
         "https: this broker's TLS connections to other brokers check that the certificate "
         "names the host (or IP) connected to; empty: they do not."),
    SROW("sasl.enabled.mechanisms", ST_CFG_STRING, sasl_enabled_mechanisms,
         "SCRAM-SHA-256,SCRAM-SHA-512", 0, 0, v_mechanisms,
         "SASL mechanisms served on SASL_PLAINTEXT and SASL_SSL listeners: PLAIN, SCRAM-SHA-256, "
         "SCRAM-SHA-512. PLAIN sends the password itself: use it over SASL_SSL."),
    SROW("sasl.mechanism.inter.broker.protocol", ST_CFG_STRING,
         sasl_mechanism_inter_broker_protocol, "", 0, 0, v_mechanism,
         "Mechanism of this broker's connections to the inter-broker listener when it is a SASL "
         "one (empty: its first enabled mechanism); the credentials are the username and "
         "password options of that listener's <mechanism>.sasl.jaas.config."),
    SROW("sasl.mechanism.controller.protocol", ST_CFG_STRING, sasl_mechanism_controller_protocol,
         "", 0, 0, v_mechanism,
         "The same for connections to the controller listener (empty: its first enabled "
         "mechanism)."),
    SROW("sasl.server.max.receive.size", ST_CFG_INT, sasl_server_max_receive_size, "524288", 1,
         INT32_MAX, NULL,
         "Largest SASL message accepted before authentication; a larger one closes the "
         "connection."),
    SROW("connections.max.reauth.ms", ST_CFG_LONG, connections_max_reauth_ms, "0", 0, INT64_MAX,
         NULL,
         "Above 0, a SASL session lasts this long (KIP-368): the client re-authenticates within "
         "it on the same connection, or the connection is closed."),
    SROW("connection.failed.authentication.delay.ms", ST_CFG_INT,
         connection_failed_authentication_delay_ms, "100", 0, INT32_MAX, NULL,
         "A failed authentication is answered after this delay, then the connection is closed "
         "(slows down password guessing)."),
    SROW("authorizer.class.name", ST_CFG_STRING, authorizer_class_name, "", 0, 0, v_authorizer,
         "org.apache.kafka.metadata.authorizer.StandardAuthorizer: every request is checked "
         "against the ACLs in the metadata log; empty: no authorization."),
    SROW("super.users", ST_CFG_STRING, super_users, "", 0, 0, NULL,
         "Semicolon-separated principals (User:admin;User:CN=broker) allowed everything."),
    SROW("allow.everyone.if.no.acl.found", ST_CFG_BOOL, allow_everyone_if_no_acl_found, "false",
         0, 0, NULL,
         "With an authorizer: a resource no ACL matches is open to everyone (true) or to no one "
         "but super users (false, Kafka's default)."),
};

const st_cfg_table_t st_sec_config_table = {rows, ST_ARRAY_SIZE(rows)};

void st_sec_config_init(st_sec_config_t *c) {
    memset(c, 0, sizeof *c);
    char err[256];
    st_cfg_defaults(&st_sec_config_table, c, err, sizeof err);
}

static void wipe_free(char *s) {
    if (!s) return;
    OPENSSL_cleanse(s, strlen(s));
    free(s);
}

void st_sec_config_fini(st_sec_config_t *c) {
    for (size_t i = 0; i < st_sec_config_table.count; i++) {
        const st_cfg_desc_t *d = &rows[i];
        if (d->type != ST_CFG_STRING) continue;
        char **p = (char **)((char *)c + d->offset);
        if (st_cfg_is_secret(d->name)) {
            wipe_free(*p);
            *p = NULL;
        }
    }
    st_cfg_fini(&st_sec_config_table, c);
    for (int i = 0; i < c->noverrides; i++) {
        free(c->overrides[i].listener);
        free(c->overrides[i].key);
        wipe_free(c->overrides[i].value);
    }
    free(c->overrides);
    c->overrides = NULL;
    c->noverrides = 0;
}

/* <mechanism>.sasl.jaas.config with a mechanism we serve (lower case) */
static int is_jaas_key(const char *key) {
    static const char suffix[] = ".sasl.jaas.config";
    const char *p = strstr(key, suffix);
    if (!p || p[sizeof suffix - 1]) return 0;
    for (size_t i = 0; i < ST_ARRAY_SIZE(mechanisms); i++) {
        size_t n = strlen(mechanisms[i]);
        if ((size_t)(p - key) == n && !strncasecmp(key, mechanisms[i], n)) {
            for (size_t j = 0; j < n; j++)
                if (isupper((unsigned char)key[j])) return 0; /* Kafka's prefix is lower case */
            return 1;
        }
    }
    return 0;
}

st_err_t st_sec_config_other(void *obj, const char *key, const char *value, char *err,
                             size_t errlen) {
    st_sec_config_t *c = obj;
    static const char prefix[] = "listener.name.";
    if (strncmp(key, prefix, sizeof prefix - 1)) return ST_E_NOT_FOUND;
    const char *l = key + sizeof prefix - 1, *dot = strchr(l, '.');
    if (!dot || dot == l || !dot[1]) {
        snprintf(err, errlen, "%s: expected listener.name.<listener>.<setting>", key);
        return ST_E_CONFIG;
    }
    const char *sub = dot + 1;
    const st_cfg_desc_t *d = st_cfg_lookup(&st_sec_config_table, sub);
    int ok = is_jaas_key(sub) ||
             (d && (!strncmp(sub, "ssl.", 4) || !strncmp(sub, "sasl.", 5) ||
                    !strcmp(sub, "connections.max.reauth.ms")));
    if (!ok) {
        snprintf(err, errlen,
                 "%s: unknown configuration key (a listener may set ssl.*, sasl.* and "
                 "<mechanism>.sasl.jaas.config, e.g. listener.name.sasl_ssl.plain.sasl.jaas.config)",
                 key);
        return ST_E_CONFIG;
    }
    if (d) {
        char inner[300];
        if (st_cfg_check_value(d, value, inner, sizeof inner)) {
            snprintf(err, errlen, "%s: %s", key, inner);
            return ST_E_CONFIG;
        }
    }
    size_t ln = (size_t)(dot - l);
    char *lname = st_malloc(ln + 1);
    for (size_t i = 0; i < ln; i++) lname[i] = (char)toupper((unsigned char)l[i]);
    lname[ln] = 0;
    for (int i = 0; i < c->noverrides; i++) /* a later line wins */
        if (!strcmp(c->overrides[i].listener, lname) && !strcmp(c->overrides[i].key, sub)) {
            free(lname);
            wipe_free(c->overrides[i].value);
            c->overrides[i].value = st_strdup(value);
            return ST_OK;
        }
    c->overrides = st_realloc(c->overrides, (size_t)(c->noverrides + 1) * sizeof *c->overrides);
    c->overrides[c->noverrides].listener = lname;
    c->overrides[c->noverrides].key = st_strdup(sub);
    c->overrides[c->noverrides].value = st_strdup(value);
    c->noverrides++;
    return ST_OK;
}

const char *st_sec_config_get(const st_sec_config_t *c, const char *listener, const char *key) {
    for (int i = 0; listener && i < c->noverrides; i++)
        if (!strcasecmp(c->overrides[i].listener, listener) && !strcmp(c->overrides[i].key, key))
            return c->overrides[i].value;
    const st_cfg_desc_t *d = st_cfg_lookup(&st_sec_config_table, key);
    if (!d) return is_jaas_key(key) ? "" : NULL;
    if (d->type == ST_CFG_STRING) {
        const char *s = *(char *const *)((const char *)c + d->offset);
        return s ? s : "";
    }
    return NULL; /* numbers: read the field */
}

int64_t st_sec_config_get_long(const st_sec_config_t *c, const char *listener, const char *key) {
    const st_cfg_desc_t *d = st_cfg_lookup(&st_sec_config_table, key);
    if (!d || (d->type != ST_CFG_LONG && d->type != ST_CFG_INT && d->type != ST_CFG_BOOL))
        return 0;
    for (int i = 0; listener && i < c->noverrides; i++)
        if (!strcasecmp(c->overrides[i].listener, listener) && !strcmp(c->overrides[i].key, key)) {
            const char *v = c->overrides[i].value; /* checked by the row when it was set */
            if (d->type == ST_CFG_BOOL) return !strcasecmp(v, "true");
            return strtoll(v, NULL, 10);
        }
    const char *field = (const char *)c + d->offset;
    if (d->type == ST_CFG_LONG) return *(const int64_t *)field;
    if (d->type == ST_CFG_INT) return *(const int32_t *)field;
    return *(const int *)field;
}

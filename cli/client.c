/*
 * client.c - the strata tool as a Kafka client of a secured listener:
 * --command-config FILE holds Kafka's client properties, as the file
 * kafka-topics.sh --command-config reads (librdkafka's names for the CA and
 * the SASL credentials are taken too).
 */
#include "cli_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#include <openssl/crypto.h>

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

static void wipe_free(char *s) {
    if (!s) return;
    OPENSSL_cleanse(s, strlen(s));
    free(s);
}

typedef struct props {
    char *protocol, *truststore, *keystore, *key_password, *endpoint_id, *mechanism;
    char *user, *password, *jaas;
} props_t;

static void props_fini(props_t *p) {
    free(p->protocol);
    free(p->truststore);
    free(p->keystore);
    wipe_free(p->key_password);
    free(p->endpoint_id);
    free(p->mechanism);
    free(p->user);
    wipe_free(p->password);
    wipe_free(p->jaas);
}

static int set_prop(props_t *p, const char *key, const char *value) {
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"security.protocol", offsetof(props_t, protocol)},
        {"ssl.truststore.location", offsetof(props_t, truststore)},
        {"ssl.ca.location", offsetof(props_t, truststore)},
        {"ssl.keystore.location", offsetof(props_t, keystore)},
        {"ssl.key.password", offsetof(props_t, key_password)},
        {"ssl.endpoint.identification.algorithm", offsetof(props_t, endpoint_id)},
        {"sasl.mechanism", offsetof(props_t, mechanism)},
        {"sasl.mechanisms", offsetof(props_t, mechanism)},
        {"sasl.username", offsetof(props_t, user)},
        {"sasl.password", offsetof(props_t, password)},
        {"sasl.jaas.config", offsetof(props_t, jaas)},
    };
    /* what a client file commonly holds and the tool has no use for */
    static const char *const ignored[] = {"ssl.truststore.type", "ssl.keystore.type",
                                          "client.id", "request.timeout.ms"};
    for (size_t i = 0; i < ST_ARRAY_SIZE(keys); i++)
        if (!strcmp(key, keys[i].key)) {
            char **f = (char **)((char *)p + keys[i].off);
            wipe_free(*f);
            *f = st_strdup(value);
            return 0;
        }
    for (size_t i = 0; i < ST_ARRAY_SIZE(ignored); i++)
        if (!strcmp(key, ignored[i])) return 0;
    return -1;
}

int st_cli_client_load(const char *path, st_cli_client_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    props_t p = {0};
    int rc = 1;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "--command-config %s: %s", path, strerror(errno));
        return 1;
    }
    char line[8192];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == '!') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected key=value", path, lineno);
            goto out;
        }
        *eq = 0;
        char *key = trim(s);
        if (set_prop(&p, key, trim(eq + 1))) {
            snprintf(err, errlen, "%s:%d: %s is not a client setting the strata tool knows",
                     path, lineno, key);
            goto out;
        }
    }
    const char *proto = p.protocol ? p.protocol : "PLAINTEXT";
    int tls = !strcasecmp(proto, "SSL") || !strcasecmp(proto, "SASL_SSL");
    int sasl = !strcasecmp(proto, "SASL_PLAINTEXT") || !strcasecmp(proto, "SASL_SSL");
    if (!tls && !sasl && strcasecmp(proto, "PLAINTEXT")) {
        snprintf(err, errlen, "%s: security.protocol %s is not PLAINTEXT, SSL, SASL_PLAINTEXT or "
                              "SASL_SSL", path, proto);
        goto out;
    }
    if (tls) {
        st_tls_config_t tc = {.name = "strata tool", .client = 1,
                              .keystore_location = p.keystore,
                              .key_password = p.key_password,
                              .truststore_location = p.truststore,
                              .endpoint_identification = p.endpoint_id ? p.endpoint_id : "https"};
        char why[512];
        if (st_tls_ctx_new(&tc, &out->tls, why, sizeof why)) {
            snprintf(err, errlen, "%s: %s", path, why);
            goto out;
        }
        out->sec.tls = out->tls;
    }
    if (sasl) {
        const char *m = p.mechanism ? p.mechanism : "PLAIN"; /* Kafka clients' default is GSSAPI */
        out->sec.mech = st_sasl_mech_parse(m);
        if (out->sec.mech == ST_SASL_NONE) {
            snprintf(err, errlen, "%s: sasl.mechanism %s is not PLAIN, SCRAM-SHA-256 or "
                                  "SCRAM-SHA-512", path, m);
            goto out;
        }
        if (p.jaas) {
            st_jaas_t j;
            char why[256];
            if (st_jaas_parse(p.jaas, &j, why, sizeof why)) {
                snprintf(err, errlen, "%s: sasl.jaas.config: %s", path, why);
                goto out;
            }
            const char *u = st_jaas_get(&j, "username"), *pw = st_jaas_get(&j, "password");
            if (u && !p.user) p.user = st_strdup(u);
            if (pw && !p.password) p.password = st_strdup(pw);
            st_jaas_fini(&j);
        }
        if (!p.user || !p.password) {
            snprintf(err, errlen, "%s: SASL needs a user and a password (sasl.username and "
                                  "sasl.password, or username and password in sasl.jaas.config)",
                     path);
            goto out;
        }
        out->user = p.user;
        out->password = p.password;
        p.user = p.password = NULL;
        out->sec.user = out->user;
        out->sec.password = out->password;
    }
    rc = 0;
out:
    fclose(f);
    props_fini(&p);
    if (rc) st_cli_client_fini(out);
    return rc;
}

void st_cli_client_fini(st_cli_client_t *c) {
    st_tls_ctx_destroy(c->tls);
    free(c->user);
    wipe_free(c->password);
    memset(c, 0, sizeof *c);
}

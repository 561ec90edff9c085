/*
 * sec.c - the listeners' security at start-up: a TLS context for every SSL
 * and SASL_SSL listener, from the ssl.* settings with that listener's
 * listener.name.<listener>.ssl.* overrides first (Kafka's rule).
 */
#include "server.h"

#include <stdlib.h>

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

st_err_t st_server_security_open(st_server_t *srv, char *err, size_t errlen) {
    srv->listener_proto = st_calloc((size_t)srv->nlisteners + 1, sizeof *srv->listener_proto);
    for (int i = 0; i < srv->nlisteners; i++) {
        st_listener_spec_t *l = &srv->listeners[i];
        int proto = st_listener_protocol(&srv->cfg, l->name);
        srv->listener_proto[i] = proto < 0 ? ST_SECPROTO_PLAINTEXT : proto;
        if (!st_secproto_tls(proto)) continue;
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

void st_server_security_close(st_server_t *srv) {
    for (int i = 0; i < srv->nlisteners; i++) {
        st_tls_ctx_destroy(srv->listeners[i].tls);
        srv->listeners[i].tls = NULL;
    }
    free(srv->listener_proto);
    srv->listener_proto = NULL;
}

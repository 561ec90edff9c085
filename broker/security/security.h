/*
 * security.h - who a connection is and what it may do: the ssl.* and
 * sasl.* settings (with Kafka's listener.name.<listener>. prefixes), SASL
 * mechanisms on the server side (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and
 * the client side (the broker's own connections to other brokers),
 * principals, and the JAAS option strings Kafka's brokers are configured
 * with.
 *
 * This library does no I/O of its own: the SASL exchanges are driven by
 * the broker's SaslHandshake / SaslAuthenticate handlers (server) and by
 * its outbound client (client), and SCRAM credentials come from whoever
 * holds them (the metadata image) through a lookup callback.  Depends on
 * base/ and OpenSSL's libcrypto only.
 */
#ifndef ST_SECURITY_H
#define ST_SECURITY_H

#include "st_base.h"

/* ------------------------------------------------------------------------
 * Settings (config.c)
 * ---------------------------------------------------------------------- */

/* listener.name.<listener>.<key> = value */
typedef struct st_sec_override {
    char *listener; /* upper case, as listener names are compared */
    char *key;
    char *value;
} st_sec_override_t;

typedef struct st_sec_config {
    /* ssl.*: every TLS listener's, unless listener.name.<l>.ssl.* says */
    char *ssl_keystore_type;
    char *ssl_keystore_location;
    char *ssl_keystore_password;
    char *ssl_key_password;
    char *ssl_truststore_type;
    char *ssl_truststore_location;
    char *ssl_client_auth;
    char *ssl_enabled_protocols;
    char *ssl_cipher_suites;
    char *ssl_endpoint_identification_algorithm;
    /* SASL */
    char *sasl_enabled_mechanisms;
    char *sasl_mechanism_inter_broker_protocol;
    char *sasl_mechanism_controller_protocol;
    int32_t sasl_server_max_receive_size;
    int64_t connections_max_reauth_ms;
    int32_t connection_failed_authentication_delay_ms;
    /* authorization */
    char *authorizer_class_name;
    char *super_users;
    int allow_everyone_if_no_acl_found;
    /* listener.name.<listener>.<key> */
    st_sec_override_t *overrides;
    int noverrides;
} st_sec_config_t;

extern const st_cfg_table_t st_sec_config_table;

/* Defaults; st_sec_config_fini frees (and wipes the secrets). */
void st_sec_config_init(st_sec_config_t *c);
void st_sec_config_fini(st_sec_config_t *c);
/* The st_cfg_bind_t `other` for listener.name.<listener>.<key>: the key
 * must be one of this table's ssl.* / sasl.* rows or
 * <mechanism>.sasl.jaas.config (mechanism in lower case); its value is
 * checked as the row's would be. */
st_err_t st_sec_config_other(void *obj, const char *key, const char *value, char *err,
                             size_t errlen);
/* The value of key for a listener: its listener.name.<listener>. override,
 * or the table's value ("" for an unset string; NULL for a key that is
 * neither). */
const char *st_sec_config_get(const st_sec_config_t *c, const char *listener, const char *key);
/* The same for a number or boolean row (connections.max.reauth.ms). */
int64_t st_sec_config_get_long(const st_sec_config_t *c, const char *listener, const char *key);

/* ------------------------------------------------------------------------
 * JAAS options (jaas.c): "org.apache...PlainLoginModule required
 * user_alice=\"alice-secret\" username=\"admin\" password=\"x\";"
 * ---------------------------------------------------------------------- */
typedef struct st_jaas_option {
    char *name;
    char *value;
} st_jaas_option_t;

typedef struct st_jaas {
    char *login_module; /* the class name */
    st_jaas_option_t *options;
    int noptions;
} st_jaas_t;

/* One login module entry; err names what is wrong (never a value). */
st_err_t st_jaas_parse(const char *text, st_jaas_t *out, char *err, size_t errlen);
void st_jaas_fini(st_jaas_t *j);
const char *st_jaas_get(const st_jaas_t *j, const char *name);

#endif /* ST_SECURITY_H */

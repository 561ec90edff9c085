/*
 * cli_int.h - what the files of the `strata` command-line tool share.
 *
 * Each subcommand is one function taking the configuration the tool
 * loaded (--config, --override) and the words after its name.  They return
 * the process's exit status: 0 on success, 1 on a failure (after one line
 * on stderr), 2 on a usage error.
 */
#ifndef CLI_INT_H
#define CLI_INT_H

#include "admin_config.h"
#include "config.h"
#include "kclient.h"
#include "acl.h"
#include "security.h"
#include "st_objectstore.h"

/* What every command gets: the broker's settings as the broker reads
 * them, the object store's, and where to reach the broker. */
typedef struct st_cli_ctx {
    st_broker_config_t broker;
    st_os_config_t os;
    st_admin_config_t admin; /* read with the rest of the file, unused */
    char bootstrap[300];
    /* --command-config: how to reach a secured listener (NULL: plaintext) */
    const st_client_security_t *sec;
} st_cli_ctx_t;

/* Kafka's client properties (--command-config FILE, as kafka-topics.sh
 * takes them): security.protocol, ssl.truststore.location (or
 * ssl.ca.location), ssl.keystore.location, ssl.key.password,
 * ssl.endpoint.identification.algorithm, sasl.mechanism, and the
 * credentials as sasl.username / sasl.password or sasl.jaas.config's
 * username and password options.  0, or 1 with err naming the key
 * (never a value).  client.c */
typedef struct st_cli_client {
    st_client_security_t sec;
    st_tls_ctx_t *tls;
    char *user, *password;
} st_cli_client_t;
int st_cli_client_load(const char *path, st_cli_client_t *out, char *err, size_t errlen);
void st_cli_client_fini(st_cli_client_t *c);

#define ST_CLI_EXIT_OK 0
#define ST_CLI_EXIT_FAIL 1
#define ST_CLI_EXIT_USAGE 2

/* strata bucket ... <verb> [args]: argv[0] is the verb.
 *   ls [PREFIX] | stat KEY | get KEY LOCALFILE | put KEY LOCALFILE | rm KEY */
int st_cli_bucket(const st_os_config_t *cfg, int argc, char **argv);
void st_cli_bucket_usage(FILE *out);

/* strata tiering ... status [TOPIC] */
int st_cli_tiering(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_tiering_usage(FILE *out);

/* strata groups ... list | describe GROUP */
int st_cli_groups(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_groups_usage(FILE *out);

/* strata cluster ... status | brokers */
int st_cli_cluster(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_cluster_usage(FILE *out);

/* strata transactions ... list | describe ID */
int st_cli_transactions(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_transactions_usage(FILE *out);

/* strata topics ... list | describe [TOPIC] [report options] | create TOPIC
 *   | delete TOPIC | alter TOPIC (kafka-topics.sh's verbs and options) */
int st_cli_topics(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_topics_usage(FILE *out);

/* One request to the bootstrap broker on a connection of its own (topics.c):
 * 0 with *resp from a, else 1 with err saying why. */
int st_cli_bootstrap_call(const st_cli_ctx_t *ctx, int16_t key, int16_t version, const void *req,
                          st_arena_t *a, void **resp, char *err, size_t errlen);

/* CreateTopics v7 of one topic through the bootstrap broker, asked again
 * while there is no active controller (topics.c): 0 with *res (from a),
 * else 1 with err saying why. */
int st_cli_create_topic(const st_cli_ctx_t *ctx, st_arena_t *a, st_create_topics_topic_t *t,
                        int validate_only, const st_create_topics_result_t **res, char *err,
                        size_t errlen);
/* Each partition's log start offset and high watermark (n entries, -1
 * where unknown) from its leader, and the topic's id (topics.c).  0, or 1
 * with err saying why the topic could not be asked about at all. */
int st_cli_topic_offsets(const st_cli_ctx_t *ctx, const char *topic, int32_t n, int64_t *start,
                         int64_t *end, st_uuid_t *id, char *err, size_t errlen);

/* strata topics ... restore (TOPIC ... | --all) [--as NAME] (restore.c) */
int st_cli_topics_restore(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_restore_usage(FILE *out);

/* strata acls ... add | remove | list (kafka-acls.sh's options, acls.c) */
int st_cli_acls(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_acls_usage(FILE *out);

/* strata users ... add NAME | delete NAME | list [NAME ...] (SCRAM, users.c) */
int st_cli_users(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_users_usage(FILE *out);

/* strata topics ... reassign ... (reassign.c; its usage lines) */
int st_cli_topics_reassign(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_reassign_usage(FILE *out);

#endif /* CLI_INT_H */

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
#include "st_objectstore.h"

/* What every command gets: the broker's settings as the broker reads
 * them, the object store's, and where to reach the broker. */
typedef struct st_cli_ctx {
    st_broker_config_t broker;
    st_os_config_t os;
    st_admin_config_t admin; /* read with the rest of the file, unused */
    char bootstrap[300];
} st_cli_ctx_t;

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

/* strata topics ... reassign ... (reassign.c; its usage lines) */
int st_cli_topics_reassign(const st_cli_ctx_t *ctx, int argc, char **argv);
void st_cli_reassign_usage(FILE *out);

#endif /* CLI_INT_H */

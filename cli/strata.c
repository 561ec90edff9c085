/*
 * strata.c - the `strata` command-line tool.
 *
 *   strata <command> --config FILE [--override key=value ...]
 *                    [--bootstrap HOST:PORT] [--command-config FILE] <verb> ...
 *
 * The configuration file is the broker's server.properties, read through
 * the same tables stratad reads it with: the tool sees the bucket and the
 * broker exactly as the broker does.  --bootstrap defaults to the first
 * advertised listener (or listener) of that file.
 */
#include "cli_int.h"

#include <stdlib.h>
#include <sys/stat.h>

typedef struct command {
    const char *name;
    const char *what;
    int (*run)(const st_cli_ctx_t *ctx, int argc, char **argv);
    void (*usage)(FILE *out);
} command_t;

static int run_bucket(const st_cli_ctx_t *ctx, int argc, char **argv) {
    return st_cli_bucket(&ctx->os, argc, argv);
}

static const command_t commands[] = {
    {"bucket", "look into the object store (ls, stat, get, put, rm)", run_bucket,
     st_cli_bucket_usage},
    {"tiering", "tiered storage per partition (status)", st_cli_tiering, st_cli_tiering_usage},
    {"groups", "consumer groups (list, describe GROUP)", st_cli_groups, st_cli_groups_usage},
    {"transactions", "transactions and their coordinators (list, describe ID)",
     st_cli_transactions, st_cli_transactions_usage},
    {"cluster", "the metadata quorum and the brokers (status, brokers)", st_cli_cluster,
     st_cli_cluster_usage},
    {"topics", "topics and their partitions (list, describe, create, delete, alter, reassign)",
     st_cli_topics, st_cli_topics_usage},
    {"users", "SCRAM credentials (add, delete, list)", st_cli_users, st_cli_users_usage},
    {"acls", "ACL bindings (add, remove, list)", st_cli_acls, st_cli_acls_usage},
};

static void usage(FILE *out) {
    fprintf(out, "usage: strata <command> --config FILE [--override key=value ...] "
                 "[--bootstrap HOST:PORT] [--command-config CLIENT.properties] <verb> ...\n"
                 "  --command-config: Kafka client properties for a secured listener "
                 "(security.protocol, ssl.truststore.location, sasl.mechanism, sasl.jaas.config)\n"
                 "commands:\n");
    for (size_t i = 0; i < ST_ARRAY_SIZE(commands); i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].what);
    fprintf(out, "\n");
    for (size_t i = 0; i < ST_ARRAY_SIZE(commands); i++) commands[i].usage(out);
}

/* host:port of the first advertised listener, else the first listener. */
static void default_bootstrap(const st_broker_config_t *b, char *out, size_t n) {
    st_listener_spec_t *l = NULL;
    int cnt = 0;
    char err[256];
    const char *text = *b->advertised_listeners ? b->advertised_listeners : b->listeners;
    if (st_parse_listeners(text, &l, &cnt, err, sizeof err) == ST_OK && cnt > 0)
        snprintf(out, n, "%s:%d", *l[0].host ? l[0].host : "localhost", l[0].port);
    else
        snprintf(out, n, "localhost:9092");
    free(l);
}

static int run(const command_t *cmd, int argc, char **argv) {
    static st_cli_ctx_t ctx;
    static st_sec_config_t sec; /* a server.properties' ssl.* and sasl.* keys (unused) */
    static st_cli_client_t client;
    st_os_config_init(&ctx.os);
    st_admin_config_init(&ctx.admin);
    st_sec_config_init(&sec);
    char err[1024];
    int i = 0, rc;
    const char *config = NULL, *bootstrap = NULL, *command_config = NULL;
    /* Overrides apply after the file, whatever their order on the line. */
    char *overrides[64];
    int noverrides = 0;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config = argv[++i];
        } else if (!strncmp(argv[i], "--config=", 9)) {
            config = argv[i] + 9;
        } else if (!strcmp(argv[i], "--command-config") && i + 1 < argc) {
            command_config = argv[++i];
        } else if (!strcmp(argv[i], "--bootstrap") && i + 1 < argc) {
            bootstrap = argv[++i];
        } else if (!strcmp(argv[i], "--override") && i + 1 < argc) {
            if (noverrides == 64) {
                fprintf(stderr, "strata %s: too many --override options\n", cmd->name);
                rc = ST_CLI_EXIT_USAGE;
                goto out;
            }
            overrides[noverrides++] = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            cmd->usage(stdout);
            rc = ST_CLI_EXIT_OK;
            goto out;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "strata %s: unknown option %s\n", cmd->name, argv[i]);
            cmd->usage(stderr);
            rc = ST_CLI_EXIT_USAGE;
            goto out;
        } else {
            break;
        }
    }
    st_cfg_bind_t extra[] = {{&st_os_config_table, &ctx.os, NULL},
                             {&st_admin_config_table, &ctx.admin, NULL},
                             {&st_sec_config_table, &sec, st_sec_config_other}};
    if (st_broker_config_load(&ctx.broker, config, overrides, noverrides, extra, 3, err,
                              sizeof err)) {
        fprintf(stderr, "strata %s: %s\n", cmd->name, err);
        rc = ST_CLI_EXIT_FAIL;
        goto fini;
    }
    if (command_config) {
        if (st_cli_client_load(command_config, &client, err, sizeof err)) {
            fprintf(stderr, "strata %s: %s\n", cmd->name, err);
            rc = ST_CLI_EXIT_FAIL;
            goto fini;
        }
        ctx.sec = &client.sec;
    }
    if (bootstrap && strlen(bootstrap) >= sizeof ctx.bootstrap) {
        fprintf(stderr, "strata %s: --bootstrap %s is too long for host:port\n", cmd->name, bootstrap);
        rc = ST_CLI_EXIT_USAGE;
        goto fini;
    }
    if (bootstrap) snprintf(ctx.bootstrap, sizeof ctx.bootstrap, "%s", bootstrap);
    else default_bootstrap(&ctx.broker, ctx.bootstrap, sizeof ctx.bootstrap);
    rc = cmd->run(&ctx, argc - i, argv + i);
fini:
    st_broker_config_fini(&ctx.broker);
out:
    st_os_config_fini(&ctx.os);
    st_admin_config_fini(&ctx.admin);
    st_sec_config_fini(&sec);
    st_cli_client_fini(&client);
    return rc;
}

int main(int argc, char **argv) {
    umask(077); /* what the tool writes (strata bucket get) is the user's alone */
    if (argc < 2) {
        usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    for (size_t i = 0; i < ST_ARRAY_SIZE(commands); i++)
        if (!strcmp(argv[1], commands[i].name)) return run(&commands[i], argc - 2, argv + 2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return ST_CLI_EXIT_OK;
    }
    fprintf(stderr, "strata: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return ST_CLI_EXIT_USAGE;
}

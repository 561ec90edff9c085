/*
 * strata.c - the `strata` command-line tool.
 *
 *   strata bucket --config FILE [--override key=value ...] <verb> ...
 *
 * The configuration file is the broker's server.properties: the same keys
 * mean the same things here, so the tool sees the bucket exactly as the
 * broker does.
 */
#include "cli_int.h"
#include "config.h"

#include <stdlib.h>

static void usage(FILE *out) {
    fprintf(out, "usage: strata <command> ...\n"
                 "commands:\n"
                 "  bucket   look into the object store (ls, stat, get, put, rm)\n\n");
    st_cli_bucket_usage(out);
}

static int cmd_bucket(int argc, char **argv) {
    st_os_config_t cfg;
    st_os_config_init(&cfg);
    char err[1024];
    int i = 0, rc;
    const char *config = NULL;
    /* Overrides apply after the file, whatever their order on the line. */
    char *overrides[64];
    int noverrides = 0;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config = argv[++i];
        } else if (!strncmp(argv[i], "--config=", 9)) {
            config = argv[i] + 9;
        } else if (!strcmp(argv[i], "--override") && i + 1 < argc) {
            if (noverrides == 64) {
                fprintf(stderr, "strata bucket: too many --override options\n");
                rc = ST_CLI_EXIT_USAGE;
                goto out;
            }
            overrides[noverrides++] = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            st_cli_bucket_usage(stdout);
            rc = ST_CLI_EXIT_OK;
            goto out;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "strata bucket: unknown option %s\n", argv[i]);
            st_cli_bucket_usage(stderr);
            rc = ST_CLI_EXIT_USAGE;
            goto out;
        } else {
            break;
        }
    }
    /* The broker's whole file is read through the broker's table and the
     * object store's, exactly as stratad reads it. */
    st_broker_config_t broker;
    st_cfg_bind_t extra[] = {{&st_os_config_table, &cfg}};
    st_err_t e = st_broker_config_load(&broker, config, overrides, noverrides, extra, 1, err,
                                       sizeof err);
    st_broker_config_fini(&broker);
    if (e) {
        fprintf(stderr, "strata bucket: %s\n", err);
        rc = ST_CLI_EXIT_FAIL;
        goto out;
    }
    rc = st_cli_bucket(&cfg, argc - i, argv + i);
out:
    st_os_config_fini(&cfg);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "bucket")) return cmd_bucket(argc - 2, argv + 2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return ST_CLI_EXIT_OK;
    }
    fprintf(stderr, "strata: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return ST_CLI_EXIT_USAGE;
}

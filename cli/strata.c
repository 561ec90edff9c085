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

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

static void usage(FILE *out) {
    fprintf(out, "usage: strata <command> ...\n"
                 "commands:\n"
                 "  bucket   look into the object store (ls, stat, get, put, rm)\n\n");
    st_cli_bucket_usage(out);
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

/* One key=value setting.  Keys of the object store go to its table; the
 * rest belong to the broker. */
static st_err_t apply(st_os_config_t *cfg, char *line, const char *where, char *err,
                      size_t errlen) {
    char *eq = strchr(line, '=');
    if (!eq) {
        snprintf(err, errlen, "%s: expected key=value, got '%s'", where, line);
        return ST_E_CONFIG;
    }
    *eq = 0;
    char *key = trim(line), *value = trim(eq + 1);
    if (!*key) {
        snprintf(err, errlen, "%s: empty key", where);
        return ST_E_CONFIG;
    }
    st_cfg_bind_t binds[] = {
        {&st_os_config_table, cfg},
        /* broker table bound here once it exists */
    };
    if (strncmp(key, "objectstore.", 12) != 0) {
        /* A broker setting: not ours to check until the broker's table is
         * bound above; then st_cfg_load_file can read the whole file. */
        return ST_OK;
    }
    char inner[600];
    st_err_t e = st_cfg_bind_set(binds, ST_ARRAY_SIZE(binds), key, value, inner, sizeof inner);
    if (e) snprintf(err, errlen, "%s: %s", where, inner);
    return e;
}

static st_err_t load_file(st_os_config_t *cfg, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return ST_E_CONFIG;
    }
    char line[8192];
    int lineno = 0;
    st_err_t e = ST_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == '!') continue;
        char where[600];
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        if ((e = apply(cfg, s, where, err, errlen))) break;
    }
    fclose(f);
    return e;
}

static int cmd_bucket(int argc, char **argv) {
    st_os_config_t cfg;
    st_os_config_init(&cfg);
    char err[1024];
    int i = 0, rc;
    const char *config = NULL;
    /* Overrides apply after the file, whatever their order on the line. */
    const char *overrides[64];
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
    if (config && load_file(&cfg, config, err, sizeof err)) {
        fprintf(stderr, "strata bucket: %s\n", err);
        rc = ST_CLI_EXIT_FAIL;
        goto out;
    }
    for (int k = 0; k < noverrides; k++) {
        char *copy = st_strdup(overrides[k]);
        st_err_t e = apply(&cfg, copy, "--override", err, sizeof err);
        free(copy);
        if (e) {
            fprintf(stderr, "strata bucket: %s\n", err);
            rc = ST_CLI_EXIT_FAIL;
            goto out;
        }
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

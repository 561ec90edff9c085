/*
 * rgw_env.c - see rgw_env.h.
 */
#include "rgw_env.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *var, *key;
} names[] = {
    {"STRATA_RGW_ENDPOINT", "objectstore.s3.endpoint"},
    {"STRATA_RGW_ACCESS_KEY", "objectstore.s3.access.key"},
    {"STRATA_RGW_SECRET_KEY", "objectstore.s3.secret.key"},
    {"STRATA_RGW_BUCKET", "objectstore.s3.bucket"},
    {"STRATA_RGW_REGION", "objectstore.s3.region"},
};

int st_rgw_env_load(st_os_config_t *cfg, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (!strcmp(line, names[i].var) &&
                st_cfg_set(&st_os_config_table, cfg, names[i].key, eq + 1, err, errlen))
                rc = -1;
    }
    fclose(f);
    return rc;
}

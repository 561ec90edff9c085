/*
 * rgw_env.h - object store settings from the KEY=VALUE file tests/s3/rgw.sh
 * writes (STRATA_RGW_ENDPOINT, _ACCESS_KEY, _SECRET_KEY, _BUCKET, _REGION),
 * for the test and bench programs that talk to that RGW.
 */
#ifndef ST_RGW_ENV_H
#define ST_RGW_ENV_H

#include <stddef.h>

#include "st_objectstore.h"

/* Sets the s3 keys the file names into cfg.  0, or -1 with err filled
 * (the file cannot be read, or a value is refused). */
int st_rgw_env_load(st_os_config_t *cfg, const char *path, char *err, size_t errlen);

#endif /* ST_RGW_ENV_H */

/*
 * admin_config.h - the admin listener's settings (admin.listeners), read
 * by stratad and by the strata tool from the same properties file.
 */
#ifndef ST_ADMIN_CONFIG_H
#define ST_ADMIN_CONFIG_H

#include "st_base.h"

#define ADMIN_MAX_LISTENERS 8

typedef struct st_admin_config {
    char *listeners; /* admin.listeners: http://host:port,...; empty: off */
} st_admin_config_t;

extern const st_cfg_table_t st_admin_config_table;
void st_admin_config_init(st_admin_config_t *c);
void st_admin_config_fini(st_admin_config_t *c);

typedef struct st_admin_addr {
    char host[256]; /* empty: every interface */
    int port;
} st_admin_addr_t;

/* Parse "http://host:port,..." into out (ADMIN_MAX_LISTENERS at most);
 * -1 with why set when malformed. */
int st_admin_parse_listeners(const char *v, st_admin_addr_t *out, int *n, char *why,
                             size_t whylen);

#endif /* ST_ADMIN_CONFIG_H */

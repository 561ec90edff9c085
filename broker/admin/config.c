/*
 * config.c - admin.listeners: the admin listener's settings table, which
 * both stratad and the strata tool (reading the same properties file)
 * load, so it lives apart from the HTTP server and needs no HTTP library.
 */
#include "admin_config.h"

#include <stdlib.h>
#include <string.h>

/* ---- admin.listeners ------------------------------------------------------ */

/* "http://host:port" ([v6]:port; an empty host binds every interface). */
static int parse_one(const char *s, size_t n, st_admin_addr_t *out, char *why, size_t whylen) {
    static const char scheme[] = "http://";
    if (n < sizeof scheme - 1 || strncmp(s, scheme, sizeof scheme - 1) != 0) {
        snprintf(why, whylen, "'%.*s' must be http://host:port", (int)n, s);
        return -1;
    }
    const char *h = s + sizeof scheme - 1, *end = s + n;
    const char *hend, *colon;
    if (h < end && *h == '[') {
        hend = memchr(h, ']', (size_t)(end - h));
        if (!hend || hend + 1 >= end || hend[1] != ':') {
            snprintf(why, whylen, "'%.*s': an IPv6 host is written [addr]:port", (int)n, s);
            return -1;
        }
        colon = hend + 1;
        h++;
    } else {
        colon = NULL;
        for (const char *p = h; p < end; p++)
            if (*p == ':') colon = p;
        if (!colon) {
            snprintf(why, whylen, "'%.*s' has no port", (int)n, s);
            return -1;
        }
        hend = colon;
    }
    size_t hl = (size_t)(hend - h);
    if (hl >= sizeof out->host) {
        snprintf(why, whylen, "'%.*s': the host is too long", (int)n, s);
        return -1;
    }
    const char *ps = colon + 1;
    if (ps >= end || end - ps > 5) {
        snprintf(why, whylen, "'%.*s': the port must be 0-65535", (int)n, s);
        return -1;
    }
    long port = 0;
    for (const char *p = ps; p < end; p++) {
        if (*p < '0' || *p > '9') {
            snprintf(why, whylen, "'%.*s': the port must be 0-65535", (int)n, s);
            return -1;
        }
        port = port * 10 + (*p - '0');
    }
    if (port > 65535) {
        snprintf(why, whylen, "'%.*s': the port must be 0-65535", (int)n, s);
        return -1;
    }
    memcpy(out->host, h, hl);
    out->host[hl] = 0;
    out->port = (int)port;
    return 0;
}

int st_admin_parse_listeners(const char *v, st_admin_addr_t *out, int *n, char *why, size_t whylen) {
    *n = 0;
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ') e++;
        if (*n == ADMIN_MAX_LISTENERS) {
            snprintf(why, whylen, "at most %d listeners", ADMIN_MAX_LISTENERS);
            return -1;
        }
        if (parse_one(p, (size_t)(e - p), &out[*n], why, whylen)) return -1;
        (*n)++;
        p = e;
    }
    return 0;
}

static int v_admin_listeners(const char *v, char *why, size_t n) {
    st_admin_addr_t a[ADMIN_MAX_LISTENERS];
    int cnt;
    return st_admin_parse_listeners(v, a, &cnt, why, n) ? 1 : 0;
}

#define AROW(name, type, field, def, min, max, validate, doc)                             \
    {name, type, offsetof(st_admin_config_t, field), def, min, max, validate, 0, doc}

static const st_cfg_desc_t admin_rows[] = {
    AROW("admin.listeners", ST_CFG_STRING, listeners, "", 0, 0, v_admin_listeners,
         "Where the admin HTTP listener serves /metrics (Prometheus, Kafka's metric names), "
         "/v1/health, /v1/ready and /v1/status: comma-separated http://host:port (an empty host "
         "binds every interface, port 0 picks a free one). Empty: no admin listener."),
};

const st_cfg_table_t st_admin_config_table = {admin_rows, ST_ARRAY_SIZE(admin_rows)};

void st_admin_config_init(st_admin_config_t *c) {
    char err[256];
    memset(c, 0, sizeof *c);
    if (st_cfg_defaults(&st_admin_config_table, c, err, sizeof err) != ST_OK) {
        ST_ERROR("admin", "bad default in the admin table: %s", err);
        abort();
    }
}

void st_admin_config_fini(st_admin_config_t *c) { st_cfg_fini(&st_admin_config_table, c); }

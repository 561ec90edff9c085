/*
 * admin.h - the admin HTTP listener (admin.listeners): Prometheus metrics
 * with Kafka's names, health and readiness for probes, a JSON status.
 *
 * Lifetime (main.c):
 *   st_admin_start   binds and serves; /v1/health answers 200 at once,
 *                    /v1/ready 503 "starting", /metrics and /v1/status
 *                    503 until the broker's parts are attached
 *   st_admin_attach  the broker's parts run: every endpoint answers
 *   st_admin_detach  shutting down: the parts are let go of (waits for
 *                    handlers that use them); /v1/ready 503 again
 *   st_admin_stop    stops the listener and frees it
 *
 * Threads: libmicrohttpd's own polling thread, one per listener, runs the
 * handlers; they read the broker's state through its thread-safe calls
 * (images, partition tables, atomics), under the admin's read lock, which
 * attach and detach take for writing.
 */
#ifndef ST_ADMIN_H
#define ST_ADMIN_H

#include "admin_config.h"
#include "controller.h"
#include "group.h"
#include "log.h"
#include "net.h"
#include "replica.h"
#include "st_base.h"
#include "st_objectstore.h"
#include "st_tiering.h"


/* What the endpoints read; borrowed from attach to detach. */
typedef struct st_admin_sources {
    const st_broker_config_t *cfg;
    st_controller_t *ctl;
    st_replicas_t *rm;
    st_net_t *net;
    st_tier_t *tier; /* NULL: tiered storage off */
    st_os_t *os;     /* NULL: tiered storage off */
    st_group_coord_t *groups; /* NULL: no group coordinator (a controller-only node) */
    st_logmgr_t *logs;
} st_admin_sources_t;

/* What /v1/status remembers between answers: the commits it saw of each
 * group's partitions, for their rate (status.c). */
typedef struct st_admin_lag st_admin_lag_t;
st_admin_lag_t *st_admin__lag_new(void);
void st_admin__lag_free(st_admin_lag_t *l);

typedef struct st_admin st_admin_t;

/* NULL in *out (and ST_OK) when admin.listeners is empty.  Fails, naming
 * admin.listeners and the address, when a listener cannot be parsed or
 * bound (a port in use). */
st_err_t st_admin_start(const st_admin_config_t *cfg, st_admin_t **out, char *err,
                        size_t errlen);
/* The port a listener is bound to (its port 0 picks one). */
int st_admin_bound_port(const st_admin_t *a, int listener);
void st_admin_attach(st_admin_t *a, const st_admin_sources_t *src);
void st_admin_detach(st_admin_t *a);
void st_admin_stop(st_admin_t *a);

/* The bodies, for the handlers and tests: st_buf_t filled with the text. */
void st_admin__metrics(const st_admin_sources_t *src, st_buf_t *out);
/* 1 when ready; *body the JSON answer (heap). */
int st_admin__ready(const st_admin_sources_t *src, char **body);
char *st_admin__status(const st_admin_sources_t *src, st_admin_lag_t *lag);
/* Read-class requests per GiB received (metrics.c): what a replay from
 * the bucket costs in requests; below 0 while nothing was received. */
double st_admin__read_requests_per_gib(const st_os_usage_t *u);

#endif /* ST_ADMIN_H */

/*
 * kclient.h - a small Kafka client for the `strata` tool, built on the
 * broker's own codec: one connection, one request at a time.
 */
#ifndef ST_KCLIENT_H
#define ST_KCLIENT_H

#include "protocol.h"

typedef struct st_kclient {
    int fd;
    int32_t correlation_id;
} st_kclient_t;

/* Connect to "host:port". */
st_err_t st_kclient_open(st_kclient_t *c, const char *bootstrap, char *err, size_t errlen);
void st_kclient_close(st_kclient_t *c);
/* Send req (the request struct of key at version) and decode the answer
 * into *resp (allocated from a; strings point into a too). */
st_err_t st_kclient_call(st_kclient_t *c, int16_t key, int16_t version, const void *req,
                         st_arena_t *a, void **resp, char *err, size_t errlen);

#endif /* ST_KCLIENT_H */

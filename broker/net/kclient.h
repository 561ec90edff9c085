/*
 * kclient.h - a small blocking Kafka client built on the broker's own
 * codec: one connection, one request at a time.  The `strata` tool's, and
 * stratad's before its loops run (a broker-only node asking
 * controller.quorum.bootstrap.servers for the voters).  Connecting and
 * each answer wait at most 30 s.
 */
#ifndef ST_KCLIENT_H
#define ST_KCLIENT_H

#include "protocol.h"

typedef struct st_kclient {
    int fd;
    int32_t correlation_id;
    const char *client_id; /* NULL: "strata-cli" */
} st_kclient_t;

/* Connect to "host:port". */
st_err_t st_kclient_open(st_kclient_t *c, const char *bootstrap, char *err, size_t errlen);
void st_kclient_close(st_kclient_t *c);
/* Send req (the request struct of key at version) and decode the answer
 * into *resp (allocated from a; strings point into a too). */
st_err_t st_kclient_call(st_kclient_t *c, int16_t key, int16_t version, const void *req,
                         st_arena_t *a, void **resp, char *err, size_t errlen);

#endif /* ST_KCLIENT_H */

/*
 * kclient.h - a small blocking Kafka client built on the broker's own
 * codec: one connection, one request at a time.  The `strata` tool's, and
 * stratad's before its loops run (a broker-only node asking
 * controller.quorum.bootstrap.servers for the voters).  Connecting and
 * each answer wait at most 30 s.
 */
#ifndef ST_KCLIENT_H
#define ST_KCLIENT_H

#include "net.h"
#include "protocol.h"
#include "sasl.h"


typedef struct st_kclient {
    int fd;
    int32_t correlation_id;
    const char *client_id;            /* NULL: "strata-cli" */
    const st_client_security_t *sec;  /* borrowed; NULL: plaintext (net.h) */
    struct st_tport *tp;              /* what carries the bytes (open to close) */
} st_kclient_t;

#define ST_KCLIENT_INIT(client_id_, sec_) {-1, 0, (client_id_), (sec_), NULL}

/* Connect to "host:port", with c->sec's TLS handshake and SASL exchange;
 * a refused authentication is ST_E_SASL_AUTHENTICATION_FAILED with the
 * broker's words in err. */
st_err_t st_kclient_open(st_kclient_t *c, const char *bootstrap, char *err, size_t errlen);
void st_kclient_close(st_kclient_t *c);
/* Send req (the request struct of key at version) and decode the answer
 * into *resp (allocated from a; strings point into a too). */
st_err_t st_kclient_call(st_kclient_t *c, int16_t key, int16_t version, const void *req,
                         st_arena_t *a, void **resp, char *err, size_t errlen);

/* The SASL exchange on an open connection (st_kclient_open runs it). */
st_err_t st_kclient_sasl(st_kclient_t *c, char *err, size_t errlen);

#endif /* ST_KCLIENT_H */

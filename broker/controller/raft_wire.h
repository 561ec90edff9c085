/*
 * raft_wire.h - the Raft's messages (raft.h) as Kafka requests and
 * responses: Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch with a replica
 * id, and FetchSnapshot, each for the one partition __cluster_metadata-0.
 *
 * raft.h speaks plain structs so that its code and the simulator never see
 * a wire format; this file is the one place that knows how KRaft puts them
 * on the wire (which API, which version, which field at which level):
 *   - INCONSISTENT_CLUSTER_ID is a top-level error, every other code a
 *     partition-level one (Kafka's RaftUtil);
 *   - Fetch names the metadata topic by id (Kafka's Uuid.METADATA_TOPIC_ID)
 *     from v13 and by name below; the fetcher's id and epoch travel in
 *     ReplicaState from v15 and as ReplicaId below;
 *   - a Fetch response's Records are the entries as record batches; how
 *     an entry becomes a batch (and back) belongs to the metadata log, so
 *     it is passed in as st_raft_records_ops_t.
 * Decoding a request checks that it names __cluster_metadata-0 and
 * nothing else; anything else is refused with a Kafka error code and a
 * sentence, and the caller answers with that code.
 *
 * Bodies built here point into the message and into the arena; they live
 * as long as both.  No threads, no state.
 */
#ifndef ST_RAFT_WIRE_H
#define ST_RAFT_WIRE_H

#include "protocol.h"
#include "raft.h"

#define ST_META_LOG_TOPIC "__cluster_metadata"
/* Kafka's fixed id of the metadata topic: 15 zero bytes and a 1. */
extern const st_uuid_t st_metadata_topic_id;

typedef struct st_raft_records_ops {
    void *arg;
    /* The entries as concatenated record batches, appended to out. */
    void (*encode)(void *arg, const st_raft_entry_t *entries, int n, st_buf_t *out);
    /* Record batches back into entries (arena-allocated, data pointing
     * into p); CORRUPT with why on a malformed batch. */
    st_err_t (*decode)(void *arg, const uint8_t *p, size_t len, st_arena_t *a,
                       st_raft_entry_t **entries, int *n, char *why, size_t whylen);
} st_raft_records_ops_t;

/* The API that carries a message type (requests and responses alike), and
 * the version Strata sends it at. */
int16_t st_raft_wire_api(st_raft_msg_type_t type);
int16_t st_raft_wire_version(int16_t api_key);

/* m as the body of its request or response at `version`.  *body is
 * arena-allocated; a Fetch response's records are encoded into `records`
 * (which must outlive the body). */
st_err_t st_raft_wire_encode(const st_raft_msg_t *m, int16_t version,
                             const st_raft_records_ops_t *ro, st_arena_t *a, st_buf_t *records,
                             void **body);

/* A decoded request or response body of api_key at version as a Raft
 * message (request_id left 0: the host sets it from the correlation id).
 * On refusal, *wire_error is the Kafka code to answer with and why says
 * what was wrong. */
st_err_t st_raft_wire_decode(int16_t api_key, int16_t version, int is_response, const void *body,
                             const st_raft_records_ops_t *ro, st_arena_t *a, st_raft_msg_t *out,
                             int16_t *wire_error, char *why, size_t whylen);

/* 1 when a decoded Fetch request is a Raft fetch of the metadata log (a
 * replica id >= 0 and the metadata topic), which the host hands to the
 * Raft rather than to the partition fetch path. */
int st_raft_wire_is_raft_fetch(int16_t version, const st_fetch_req_t *req);

#endif /* ST_RAFT_WIRE_H */

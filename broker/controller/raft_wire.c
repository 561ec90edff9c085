/*
 * raft_wire.c - raft.h's messages to and from Kafka's request and response
 * structs (see raft_wire.h for the rules of placement).
 *
 * Every decoder reads a body the codec already checked for shape, so what
 * is left to refuse is meaning: a topic other than __cluster_metadata, a
 * partition other than 0, more than one of either, or no partition at all.
 */
#include "raft_wire.h"

#include <stdio.h>
#include <string.h>

const st_uuid_t st_metadata_topic_id = {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};

int16_t st_raft_wire_api(st_raft_msg_type_t type) {
    switch (type) {
    case ST_RAFT_VOTE_REQUEST:
    case ST_RAFT_VOTE_RESPONSE: return ST_API_VOTE;
    case ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST:
    case ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE: return ST_API_BEGIN_QUORUM_EPOCH;
    case ST_RAFT_END_QUORUM_EPOCH_REQUEST:
    case ST_RAFT_END_QUORUM_EPOCH_RESPONSE: return ST_API_END_QUORUM_EPOCH;
    case ST_RAFT_FETCH_REQUEST:
    case ST_RAFT_FETCH_RESPONSE: return ST_API_FETCH;
    case ST_RAFT_FETCH_SNAPSHOT_REQUEST:
    case ST_RAFT_FETCH_SNAPSHOT_RESPONSE: return ST_API_FETCH_SNAPSHOT;
    }
    return -1;
}

/* Vote v2 is the first with pre-vote (KIP-996); BeginQuorumEpoch v1 the
 * first that names its voter (the Raft checks it is the receiver);
 * EndQuorumEpoch v1 as Kafka 3.9 speaks it. */
int16_t st_raft_wire_version(int16_t api_key) {
    switch (api_key) {
    case ST_API_VOTE: return 2;
    case ST_API_BEGIN_QUORUM_EPOCH: return 1;
    case ST_API_END_QUORUM_EPOCH: return 1;
    case ST_API_FETCH: return 12; /* the highest stratad serves */
    case ST_API_FETCH_SNAPSHOT: return 0;
    default: return -1;
    }
}

static st_str_t meta_name(void) { return st_str(ST_META_LOG_TOPIC); }

static st_str_t cluster_str(const char *cid) { return cid ? st_str(cid) : ST_STR_NULL; }

/* Top-level code for a Raft error: only INCONSISTENT_CLUSTER_ID lives
 * there; the partition then carries NONE. */
static void split_error(int16_t code, int16_t *top, int16_t *part) {
    if (code == ST_RAFT_ERR_INCONSISTENT_CLUSTER_ID) {
        *top = code;
        *part = 0;
    } else {
        *top = 0;
        *part = code;
    }
}

/* ---- encode ---------------------------------------------------------------- */

st_err_t st_raft_wire_encode(const st_raft_msg_t *m, int16_t version,
                             const st_raft_records_ops_t *ro, st_arena_t *a, st_buf_t *records,
                             void **body) {
    int16_t top, part;
    switch (m->type) {
    case ST_RAFT_VOTE_REQUEST: {
        const st_raft_vote_request_t *q = &m->u.vote_req;
        st_vote_req_t *b = st_arena_alloc(a, sizeof *b);
        st_schema_defaults(&st_vote_req_schema, b);
        b->cluster_id = cluster_str(m->cluster_id);
        b->voter_id = q->voter_id;
        ST_ARRAY_ALLOC(b->topics, a, 1);
        st_schema_defaults(&st_vote_req_topic_schema, &b->topics.v[0]);
        b->topics.v[0].topic_name = meta_name();
        ST_ARRAY_ALLOC(b->topics.v[0].partitions, a, 1);
        st_vote_req_part_t *p = &b->topics.v[0].partitions.v[0];
        st_schema_defaults(&st_vote_req_part_schema, p);
        p->partition_index = 0;
        p->candidate_epoch = q->replica_epoch;
        p->candidate_id = q->replica_id;
        p->last_offset_epoch = q->last_offset_epoch;
        p->last_offset = q->last_offset;
        p->pre_vote = q->pre_vote;
        if (q->pre_vote && version < 2) return ST_E_UNSUPPORTED_VERSION;
        *body = b;
        return ST_OK;
    }
    case ST_RAFT_VOTE_RESPONSE: {
        const st_raft_vote_response_t *q = &m->u.vote_resp;
        st_vote_resp_t *b = st_arena_alloc(a, sizeof *b);
        st_schema_defaults(&st_vote_resp_schema, b);
        split_error(q->error_code, &top, &part);
        b->error_code = top;
        ST_ARRAY_ALLOC(b->topics, a, 1);
        st_schema_defaults(&st_vote_resp_topic_schema, &b->topics.v[0]);
        b->topics.v[0].topic_name = meta_name();
        ST_ARRAY_ALLOC(b->topics.v[0].partitions, a, 1);
        st_vote_resp_part_t *p = &b->topics.v[0].partitions.v[0];
        st_schema_defaults(&st_vote_resp_part_schema, p);
        p->error_code = part;
        p->leader_id = q->leader_id;
        p->leader_epoch = q->leader_epoch;
        p->vote_granted = q->vote_granted;
        *body = b;
        return ST_OK;
    }
    case ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST: {
        const st_raft_begin_quorum_epoch_request_t *q = &m->u.begin_req;
        st_begin_quorum_epoch_req_t *b = st_arena_alloc(a, sizeof *b);
        st_schema_defaults(&st_begin_quorum_epoch_req_schema, b);
        b->cluster_id = cluster_str(m->cluster_id);
        b->voter_id = q->voter_id;
        ST_ARRAY_ALLOC(b->topics, a, 1);
        st_schema_defaults(&st_begin_quorum_epoch_req_topic_schema, &b->topics.v[0]);
        b->topics.v[0].topic_name = meta_name();
        ST_ARRAY_ALLOC(b->topics.v[0].partitions, a, 1);
        st_begin_quorum_epoch_req_part_t *p = &b->topics.v[0].partitions.v[0];
        st_schema_defaults(&st_begin_quorum_epoch_req_part_schema, p);
        p->leader_id = q->leader_id;
        p->leader_epoch = q->leader_epoch;
        ST_ARRAY_ALLOC(b->leader_endpoints, a, 0);
        *body = b;
        return ST_OK;
    }
    case ST_RAFT_END_QUORUM_EPOCH_REQUEST: {
        const st_raft_end_quorum_epoch_request_t *q = &m->u.end_req;
        st_end_quorum_epoch_req_t *b = st_arena_alloc(a, sizeof *b);
        st_schema_defaults(&st_end_quorum_epoch_req_schema, b);
        b->cluster_id = cluster_str(m->cluster_id);
        ST_ARRAY_ALLOC(b->topics, a, 1);
        st_schema_defaults(&st_end_quorum_epoch_req_topic_schema, &b->topics.v[0]);
        b->topics.v[0].topic_name = meta_name();
        ST_ARRAY_ALLOC(b->topics.v[0].partitions, a, 1);
        st_end_quorum_epoch_req_part_t *p = &b->topics.v[0].partitions.v[0];
        st_schema_defaults(&st_end_quorum_epoch_req_part_schema, p);
        p->leader_id = q->leader_id;
        p->leader_epoch = q->leader_epoch;
        ST_ARRAY_ALLOC(p->preferred_successors, a, q->npreferred);
        ST_ARRAY_ALLOC(p->preferred_candidates, a, q->npreferred);
        for (int i = 0; i < q->npreferred; i++) {
            p->preferred_successors.v[i] = q->preferred_successors[i];
            st_schema_defaults(&st_end_quorum_epoch_candidate_schema,
                               &p->preferred_candidates.v[i]);
            p->preferred_candidates.v[i].candidate_id = q->preferred_successors[i];
        }
        ST_ARRAY_ALLOC(b->leader_endpoints, a, 0);
        *body = b;
        return ST_OK;
    }
    case ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE:
    case ST_RAFT_END_QUORUM_EPOCH_RESPONSE: {
        /* the two responses share one shape */
        const st_raft_epoch_response_t *q = &m->u.epoch_resp;
        st_begin_quorum_epoch_resp_t *b = st_arena_alloc(a, sizeof *b);
        st_schema_defaults(&st_begin_quorum_epoch_resp_schema, b);
        split_error(q->error_code, &top, &part);
        b->error_code = top;
        ST_ARRAY_ALLOC(b->topics, a, 1);
        st_schema_defaults(&st_quorum_resp_topic_schema, &b->topics.v[0]);
        b->topics.v[0].topic_name = meta_name();
        ST_ARRAY_ALLOC(b->topics.v[0].partitions, a, 1);
        st_quorum_resp_part_t *p = &b->topics.v[0].partitions.v[0];
        st_schema_defaults(&st_quorum_resp_part_schema, p);
        p->error_code = part;
        p->leader_id = q->leader_id;
        p->leader_epoch = q->leader_epoch;
        ST_ARRAY_ALLOC(b->node_endpoints, a, 0);
        *body = b;
        return ST_OK;
    }
    case ST_RAFT_FETCH_REQUEST: {
        const st_raft_fetch_request_t *q = &m->u.fetch_req;
        st_fetch_req_t *b = st_arena_alloc(a, sizeof *b);
        st_schema_defaults(&st_fetch_req_schema, b);
        b->cluster_id = cluster_str(m->cluster_id);
        b->replica_id = q->replica_id;
        b->replica_state.replica_id = q->replica_id;
        b->replica_state.replica_epoch = -1;
        b->max_wait_ms = q->max_wait_ms;
        b->min_bytes = 0;
        b->max_bytes = q->partition_max_bytes;
        ST_ARRAY_ALLOC(b->topics, a, 1);
        st_fetch_req_topic_t *t = &b->topics.v[0];
        st_schema_defaults(&st_fetch_req_topic_schema, t);
        t->topic = meta_name();
        t->topic_id = st_metadata_topic_id;
        ST_ARRAY_ALLOC(t->partitions, a, 1);
        st_fetch_req_part_t *p = &t->partitions.v[0];
        st_schema_defaults(&st_fetch_req_part_schema, p);
        p->partition = 0;
        p->current_leader_epoch = q->current_leader_epoch;
        p->fetch_offset = q->fetch_offset;
        p->last_fetched_epoch = q->last_fetched_epoch;
        p->log_start_offset = q->log_start_offset;
        p->partition_max_bytes = q->partition_max_bytes;
        ST_ARRAY_ALLOC(b->forgotten_topics, a, 0);
        b->rack_id = st_str("");
        *body = b;
        return ST_OK;
    }
    case ST_RAFT_FETCH_RESPONSE: {
        const st_raft_fetch_response_t *q = &m->u.fetch_resp;
        st_fetch_resp_t *b = st_arena_alloc(a, sizeof *b);
        st_schema_defaults(&st_fetch_resp_schema, b);
        split_error(q->error_code, &top, &part);
        b->error_code = top;
        ST_ARRAY_ALLOC(b->responses, a, 1);
        st_fetch_resp_topic_t *t = &b->responses.v[0];
        st_schema_defaults(&st_fetch_resp_topic_schema, t);
        t->topic = meta_name();
        t->topic_id = st_metadata_topic_id;
        ST_ARRAY_ALLOC(t->partitions, a, 1);
        st_fetch_resp_part_t *p = &t->partitions.v[0];
        st_schema_defaults(&st_fetch_resp_part_schema, p);
        p->error_code = part;
        p->high_watermark = q->high_watermark;
        p->log_start_offset = q->log_start_offset;
        p->diverging_epoch.epoch = q->diverging_epoch.epoch;
        p->diverging_epoch.end_offset = q->diverging_epoch.end_offset;
        p->current_leader.leader_id = q->current_leader.leader_id;
        p->current_leader.leader_epoch = q->current_leader.leader_epoch;
        p->snapshot_id.end_offset = q->snapshot_id.end_offset;
        p->snapshot_id.epoch = q->snapshot_id.epoch;
        size_t start = records->len;
        if (q->nrecords > 0) ro->encode(ro->arg, q->records, q->nrecords, records);
        p->records.p = records->data + start;
        p->records.len = (int32_t)(records->len - start);
        ST_ARRAY_ALLOC(b->node_endpoints, a, 0);
        *body = b;
        return ST_OK;
    }
    case ST_RAFT_FETCH_SNAPSHOT_REQUEST: {
        const st_raft_fetch_snapshot_request_t *q = &m->u.fsnap_req;
        st_fetch_snapshot_req_t *b = st_arena_alloc(a, sizeof *b);
        st_schema_defaults(&st_fetch_snapshot_req_schema, b);
        b->cluster_id = cluster_str(m->cluster_id);
        b->replica_id = q->replica_id;
        b->max_bytes = q->max_bytes;
        ST_ARRAY_ALLOC(b->topics, a, 1);
        st_schema_defaults(&st_fetch_snapshot_req_topic_schema, &b->topics.v[0]);
        b->topics.v[0].name = meta_name();
        ST_ARRAY_ALLOC(b->topics.v[0].partitions, a, 1);
        st_fetch_snapshot_req_part_t *p = &b->topics.v[0].partitions.v[0];
        st_schema_defaults(&st_fetch_snapshot_req_part_schema, p);
        p->current_leader_epoch = q->current_leader_epoch;
        p->snapshot_id.end_offset = q->snapshot_id.end_offset;
        p->snapshot_id.epoch = q->snapshot_id.epoch;
        p->position = q->position;
        *body = b;
        return ST_OK;
    }
    case ST_RAFT_FETCH_SNAPSHOT_RESPONSE: {
        const st_raft_fetch_snapshot_response_t *q = &m->u.fsnap_resp;
        st_fetch_snapshot_resp_t *b = st_arena_alloc(a, sizeof *b);
        st_schema_defaults(&st_fetch_snapshot_resp_schema, b);
        split_error(q->error_code, &top, &part);
        b->error_code = top;
        ST_ARRAY_ALLOC(b->topics, a, 1);
        st_schema_defaults(&st_fetch_snapshot_resp_topic_schema, &b->topics.v[0]);
        b->topics.v[0].name = meta_name();
        ST_ARRAY_ALLOC(b->topics.v[0].partitions, a, 1);
        st_fetch_snapshot_resp_part_t *p = &b->topics.v[0].partitions.v[0];
        st_schema_defaults(&st_fetch_snapshot_resp_part_schema, p);
        p->error_code = part;
        p->snapshot_id.end_offset = q->snapshot_id.end_offset;
        p->snapshot_id.epoch = q->snapshot_id.epoch;
        p->current_leader.leader_id = q->current_leader.leader_id;
        p->current_leader.leader_epoch = q->current_leader.leader_epoch;
        p->size = q->size;
        p->position = q->position;
        p->unaligned_records.p = q->unaligned_records;
        p->unaligned_records.len = q->len;
        ST_ARRAY_ALLOC(b->node_endpoints, a, 0);
        *body = b;
        return ST_OK;
    }
    }
    (void)version;
    return ST_E_INVALID_REQUEST;
}

/* ---- decode ---------------------------------------------------------------- */

/* The one topic and partition a Raft message may name. */
static int refuse_target(st_str_t topic, int has_name, const st_uuid_t *id, int npart,
                         int32_t part, int ntopics, int16_t *wire_error, char *why,
                         size_t whylen) {
    if (ntopics != 1 || npart != 1) {
        *wire_error = (int16_t)ST_E_INVALID_REQUEST;
        snprintf(why, whylen, "names %d topics and %d partitions; the metadata quorum takes "
                              "exactly one of each (__cluster_metadata-0)",
                 ntopics, npart);
        return 1;
    }
    int named = has_name ? st_str_eq(topic, ST_META_LOG_TOPIC)
                         : !memcmp(id->b, st_metadata_topic_id.b, 16);
    if (!named || part != 0) {
        *wire_error = (int16_t)ST_E_UNKNOWN_TOPIC_OR_PARTITION;
        if (has_name)
            snprintf(why, whylen, "names %.*s-%d, not __cluster_metadata-0",
                     topic.len > 0 ? (int)ST_MIN(topic.len, 255) : 0, topic.p ? topic.p : "",
                     (int)part);
        else
            snprintf(why, whylen, "names a topic id other than __cluster_metadata's");
        return 1;
    }
    return 0;
}

static const char *arena_cstr(st_arena_t *a, st_str_t s) {
    if (s.len < 0) return NULL;
    char *c = st_arena_alloc(a, (size_t)s.len + 1);
    memcpy(c, s.p, (size_t)s.len);
    c[s.len] = 0;
    return c;
}

/* Top-level error wins: it is the only place INCONSISTENT_CLUSTER_ID is. */
static int16_t join_error(int16_t top, int16_t part) { return top ? top : part; }

st_err_t st_raft_wire_decode(int16_t api_key, int16_t version, int is_response, const void *body,
                             const st_raft_records_ops_t *ro, st_arena_t *a, st_raft_msg_t *out,
                             int16_t *wire_error, char *why, size_t whylen) {
    memset(out, 0, sizeof *out);
    *wire_error = 0;
    why[0] = 0;
#define TARGET(topics, namefield, part_index_field, by_name)                                 \
    do {                                                                               \
        int np_ = (topics).n > 0 ? (topics).v[0].partitions.n : 0;                     \
        st_uuid_t zero_ = {{0}};                                                       \
        if (refuse_target((topics).n > 0 ? (topics).v[0].namefield : st_str(""), by_name, \
                          &zero_, np_,                                                 \
                          np_ > 0 ? (topics).v[0].partitions.v[0].part_index_field : -1,   \
                          (topics).n, wire_error, why, whylen))                        \
            return ST_E_INVALID_REQUEST;                                               \
    } while (0)
    switch (api_key) {
    case ST_API_VOTE:
        if (!is_response) {
            const st_vote_req_t *b = body;
            TARGET(b->topics, topic_name, partition_index, 1);
            const st_vote_req_part_t *p = &b->topics.v[0].partitions.v[0];
            out->type = ST_RAFT_VOTE_REQUEST;
            out->cluster_id = arena_cstr(a, b->cluster_id);
            out->u.vote_req.voter_id = b->voter_id;
            out->u.vote_req.replica_epoch = p->candidate_epoch;
            out->u.vote_req.replica_id = p->candidate_id;
            out->u.vote_req.last_offset_epoch = p->last_offset_epoch;
            out->u.vote_req.last_offset = p->last_offset;
            out->u.vote_req.pre_vote = version >= 2 ? p->pre_vote : 0;
        } else {
            const st_vote_resp_t *b = body;
            out->type = ST_RAFT_VOTE_RESPONSE;
            if (b->topics.n == 0 && b->error_code) {
                out->u.vote_resp.error_code = b->error_code;
                out->u.vote_resp.leader_id = -1;
                out->u.vote_resp.leader_epoch = -1;
                return ST_OK;
            }
            TARGET(b->topics, topic_name, partition_index, 1);
            const st_vote_resp_part_t *p = &b->topics.v[0].partitions.v[0];
            out->u.vote_resp.error_code = join_error(b->error_code, p->error_code);
            out->u.vote_resp.leader_id = p->leader_id;
            out->u.vote_resp.leader_epoch = p->leader_epoch;
            out->u.vote_resp.vote_granted = p->vote_granted;
        }
        return ST_OK;
    case ST_API_BEGIN_QUORUM_EPOCH:
    case ST_API_END_QUORUM_EPOCH:
        if (is_response) {
            /* both responses have one shape (raft_wire.h) */
            const st_begin_quorum_epoch_resp_t *b = body;
            out->type = api_key == ST_API_BEGIN_QUORUM_EPOCH ? ST_RAFT_BEGIN_QUORUM_EPOCH_RESPONSE
                                                             : ST_RAFT_END_QUORUM_EPOCH_RESPONSE;
            if (b->topics.n == 0 && b->error_code) {
                out->u.epoch_resp.error_code = b->error_code;
                out->u.epoch_resp.leader_id = -1;
                out->u.epoch_resp.leader_epoch = -1;
                return ST_OK;
            }
            TARGET(b->topics, topic_name, partition_index, 1);
            const st_quorum_resp_part_t *p = &b->topics.v[0].partitions.v[0];
            out->u.epoch_resp.error_code = join_error(b->error_code, p->error_code);
            out->u.epoch_resp.leader_id = p->leader_id;
            out->u.epoch_resp.leader_epoch = p->leader_epoch;
        } else if (api_key == ST_API_BEGIN_QUORUM_EPOCH) {
            const st_begin_quorum_epoch_req_t *b = body;
            TARGET(b->topics, topic_name, partition_index, 1);
            const st_begin_quorum_epoch_req_part_t *p = &b->topics.v[0].partitions.v[0];
            out->type = ST_RAFT_BEGIN_QUORUM_EPOCH_REQUEST;
            out->cluster_id = arena_cstr(a, b->cluster_id);
            out->u.begin_req.voter_id = b->voter_id;
            out->u.begin_req.leader_id = p->leader_id;
            out->u.begin_req.leader_epoch = p->leader_epoch;
        } else {
            const st_end_quorum_epoch_req_t *b = body;
            TARGET(b->topics, topic_name, partition_index, 1);
            const st_end_quorum_epoch_req_part_t *p = &b->topics.v[0].partitions.v[0];
            out->type = ST_RAFT_END_QUORUM_EPOCH_REQUEST;
            out->cluster_id = arena_cstr(a, b->cluster_id);
            st_raft_end_quorum_epoch_request_t *q = &out->u.end_req;
            q->leader_id = p->leader_id;
            q->leader_epoch = p->leader_epoch;
            int n = version >= 1 ? p->preferred_candidates.n : p->preferred_successors.n;
            if (n < 0) n = 0;
            if (n > ST_RAFT_MAX_VOTERS) {
                *wire_error = (int16_t)ST_E_INVALID_REQUEST;
                snprintf(why, whylen, "names %d preferred successors; a quorum has at most %d "
                                      "voters",
                         n, ST_RAFT_MAX_VOTERS);
                return ST_E_INVALID_REQUEST;
            }
            q->npreferred = n;
            for (int i = 0; i < n; i++)
                q->preferred_successors[i] = version >= 1
                                                 ? p->preferred_candidates.v[i].candidate_id
                                                 : p->preferred_successors.v[i];
        }
        return ST_OK;
    case ST_API_FETCH:
        if (!is_response) {
            const st_fetch_req_t *b = body;
            int by_name = version < 13;
            int np = b->topics.n > 0 ? b->topics.v[0].partitions.n : 0;
            if (refuse_target(b->topics.n > 0 && by_name ? b->topics.v[0].topic : st_str(""),
                              by_name, b->topics.n > 0 ? &b->topics.v[0].topic_id : &st_metadata_topic_id,
                              np, np > 0 ? b->topics.v[0].partitions.v[0].partition : -1,
                              b->topics.n, wire_error, why, whylen))
                return ST_E_INVALID_REQUEST;
            const st_fetch_req_part_t *p = &b->topics.v[0].partitions.v[0];
            out->type = ST_RAFT_FETCH_REQUEST;
            out->cluster_id = arena_cstr(a, b->cluster_id);
            st_raft_fetch_request_t *q = &out->u.fetch_req;
            q->replica_id = version >= 15 ? b->replica_state.replica_id : b->replica_id;
            q->max_wait_ms = b->max_wait_ms;
            q->current_leader_epoch = p->current_leader_epoch;
            q->fetch_offset = p->fetch_offset;
            q->last_fetched_epoch = p->last_fetched_epoch;
            q->log_start_offset = p->log_start_offset;
            q->partition_max_bytes = p->partition_max_bytes;
        } else {
            const st_fetch_resp_t *b = body;
            out->type = ST_RAFT_FETCH_RESPONSE;
            st_raft_fetch_response_t *q = &out->u.fetch_resp;
            q->high_watermark = -1;
            q->log_start_offset = -1;
            q->diverging_epoch.epoch = -1;
            q->diverging_epoch.end_offset = -1;
            q->current_leader.leader_id = -1;
            q->current_leader.leader_epoch = -1;
            q->snapshot_id.end_offset = -1;
            q->snapshot_id.epoch = -1;
            if (b->responses.n == 0 && b->error_code) {
                q->error_code = b->error_code;
                return ST_OK;
            }
            int by_name = version < 13;
            int np = b->responses.n > 0 ? b->responses.v[0].partitions.n : 0;
            if (refuse_target(b->responses.n > 0 && by_name ? b->responses.v[0].topic : st_str(""),
                              by_name,
                              b->responses.n > 0 ? &b->responses.v[0].topic_id : &st_metadata_topic_id,
                              np, np > 0 ? b->responses.v[0].partitions.v[0].partition_index : -1,
                              b->responses.n, wire_error, why, whylen))
                return ST_E_INVALID_REQUEST;
            const st_fetch_resp_part_t *p = &b->responses.v[0].partitions.v[0];
            q->error_code = join_error(b->error_code, p->error_code);
            q->high_watermark = p->high_watermark;
            q->log_start_offset = p->log_start_offset;
            q->diverging_epoch.epoch = p->diverging_epoch.epoch;
            q->diverging_epoch.end_offset = p->diverging_epoch.end_offset;
            q->current_leader.leader_id = p->current_leader.leader_id;
            q->current_leader.leader_epoch = p->current_leader.leader_epoch;
            q->snapshot_id.end_offset = p->snapshot_id.end_offset;
            q->snapshot_id.epoch = p->snapshot_id.epoch;
            if (p->records.len > 0) {
                st_raft_entry_t *e = NULL;
                int n = 0;
                char bwhy[200];
                st_err_t err = ro->decode(ro->arg, p->records.p, (size_t)p->records.len, a, &e,
                                          &n, bwhy, sizeof bwhy);
                if (err) {
                    *wire_error = (int16_t)ST_E_INVALID_REQUEST;
                    snprintf(why, whylen, "Fetch response records: %s", bwhy);
                    return ST_E_CORRUPT;
                }
                q->records = e;
                q->nrecords = n;
            }
        }
        return ST_OK;
    case ST_API_FETCH_SNAPSHOT:
        if (!is_response) {
            const st_fetch_snapshot_req_t *b = body;
            TARGET(b->topics, name, partition, 1);
            const st_fetch_snapshot_req_part_t *p = &b->topics.v[0].partitions.v[0];
            out->type = ST_RAFT_FETCH_SNAPSHOT_REQUEST;
            out->cluster_id = arena_cstr(a, b->cluster_id);
            st_raft_fetch_snapshot_request_t *q = &out->u.fsnap_req;
            q->replica_id = b->replica_id;
            q->max_bytes = b->max_bytes;
            q->current_leader_epoch = p->current_leader_epoch;
            q->snapshot_id.end_offset = p->snapshot_id.end_offset;
            q->snapshot_id.epoch = p->snapshot_id.epoch;
            q->position = p->position;
        } else {
            const st_fetch_snapshot_resp_t *b = body;
            out->type = ST_RAFT_FETCH_SNAPSHOT_RESPONSE;
            st_raft_fetch_snapshot_response_t *q = &out->u.fsnap_resp;
            q->snapshot_id.end_offset = -1;
            q->snapshot_id.epoch = -1;
            q->current_leader.leader_id = -1;
            q->current_leader.leader_epoch = -1;
            if (b->topics.n == 0 && b->error_code) {
                q->error_code = b->error_code;
                return ST_OK;
            }
            TARGET(b->topics, name, index, 1);
            const st_fetch_snapshot_resp_part_t *p = &b->topics.v[0].partitions.v[0];
            q->error_code = join_error(b->error_code, p->error_code);
            q->snapshot_id.end_offset = p->snapshot_id.end_offset;
            q->snapshot_id.epoch = p->snapshot_id.epoch;
            q->current_leader.leader_id = p->current_leader.leader_id;
            q->current_leader.leader_epoch = p->current_leader.leader_epoch;
            q->size = p->size;
            q->position = p->position;
            q->unaligned_records = p->unaligned_records.p;
            q->len = p->unaligned_records.len > 0 ? p->unaligned_records.len : 0;
            if (p->position < 0 || p->size < 0 || q->len > p->size ||
                p->position > p->size - q->len) {
                *wire_error = (int16_t)ST_E_INVALID_REQUEST;
                snprintf(why, whylen,
                         "FetchSnapshot answer: %d bytes at position %lld of a snapshot of "
                         "%lld bytes",
                         (int)q->len, (long long)p->position, (long long)p->size);
                return ST_E_CORRUPT;
            }
        }
        return ST_OK;
    default:
        break;
    }
#undef TARGET
    *wire_error = (int16_t)ST_E_INVALID_REQUEST;
    snprintf(why, whylen, "API %d carries no Raft message", (int)api_key);
    return ST_E_INVALID_REQUEST;
}

int st_raft_wire_is_raft_fetch(int16_t version, const st_fetch_req_t *req) {
    int32_t rid = version >= 15 ? req->replica_state.replica_id : req->replica_id;
    if (rid < 0 || req->topics.n != 1) return 0;
    const st_fetch_req_topic_t *t = &req->topics.v[0];
    return version >= 13 ? !memcmp(t->topic_id.b, st_metadata_topic_id.b, 16)
                         : st_str_eq(t->topic, ST_META_LOG_TOPIC);
}

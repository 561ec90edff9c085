/*
 * h_metadata.c - Metadata: brokers, the controller (this broker) and
 * topics, creating requested topics when auto.create.topics.enable allows;
 * DescribeTopicPartitions (KIP-966): the same partitions with their
 * eligible leader replicas, a page at a time.
 *
 * A request naming topics that do not exist is answered after the
 * controller has created them (one round trip to the controller thread),
 * so a client sees a usable topic on its first request.
 */
#include "server.h"

#include <stdlib.h>

typedef struct md_ctx {
    char **create; /* topic names to create */
    int ncreate;
} md_ctx_t;

/* Replicas on brokers that are fenced or not registered, into v (room
 * for every replica); returns how many. */
static int32_t offline_replicas(const st_meta_image_t *img, const st_meta_partition_t *mp,
                                int32_t *v) {
    int32_t n = 0;
    for (int r = 0; r < mp->nreplicas; r++) {
        const st_meta_broker_t *b = st_image_broker(img, mp->replicas[r]);
        if (!b || b->fenced) v[n++] = mp->replicas[r];
    }
    return n;
}

static void fill_topic(st_server_t *srv, st_request_t *req, const st_meta_image_t *img,
                       st_metadata_topic_t *out, const st_meta_topic_t *t, int include_ops) {
    out->error_code = 0;
    out->name = st_str(st_req_strdup(req, st_str(t->name)));
    out->topic_id = t->id;
    out->is_internal = (int8_t)t->internal;
    out->topic_authorized_operations =
        include_ops ? st_authorized_ops(srv, req, ST_ACL_RES_TOPIC, t->name, strlen(t->name),
                                        ST_ACL_OPS_TOPIC)
                    : INT32_MIN;
    ST_ARRAY_ALLOC(out->partitions, &req->arena, t->nparts);
    for (int k = 0; k < t->nparts; k++) {
        const st_meta_partition_t *mp = &t->parts[k];
        st_metadata_partition_t *p = &out->partitions.v[k];
        p->error_code = mp->leader < 0 ? st_err_wire(ST_E_LEADER_NOT_AVAILABLE) : 0;
        p->partition_index = mp->id;
        p->leader_id = mp->leader;
        p->leader_epoch = mp->leader_epoch;
        p->replica_nodes.v = st_arena_dup_i32(&req->arena, mp->replicas, mp->nreplicas);
        p->replica_nodes.n = mp->nreplicas;
        p->isr_nodes.v = st_arena_dup_i32(&req->arena, mp->isr, mp->nisr);
        p->isr_nodes.n = mp->nisr;
        ST_ARRAY_ALLOC(p->offline_replicas, &req->arena, mp->nreplicas);
        p->offline_replicas.n = offline_replicas(img, mp, p->offline_replicas.v);
    }
}

static int name_valid(st_str_t n) {
    char why[8];
    return n.len > 0 && st_topic_name_valid(n.p, (size_t)n.len, why, sizeof why);
}

/* Every topic: a null list, or in v0 (which has no null) an empty one
 * (Kafka's MetadataRequest.isAllTopics). */
static int all_topics(const st_request_t *req) {
    const st_metadata_req_t *q = req->body;
    return q->topics.n < 0 || (q->topics.n == 0 && req->hdr.api_version == 0);
}

/* CREATE on the cluster or on the topic (Kafka's rule for creating). */
static int may_create(st_server_t *srv, st_request_t *req, st_str_t name) {
    return st_authorized_cluster(srv, req, ST_ACL_OP_CREATE) ||
           st_topic_allowed(srv, req, ST_ACL_OP_CREATE, name);
}

static void respond(st_server_t *srv, st_request_t *req) {
    st_metadata_req_t *q = req->body;
    st_metadata_resp_t r;
    st_schema_defaults(&st_metadata_resp_schema, &r);
    st_meta_image_t *img = st_controller_image(srv->ctl);
    int ready = st_controller_broker_ready(srv->ctl);
    int nb = 0;
    for (int i = 0; i < img->nbrokers; i++) nb += !img->brokers[i].fenced;
    ST_ARRAY_ALLOC(r.brokers, &req->arena, nb);
    int k = 0;
    for (int i = 0; i < img->nbrokers; i++) {
        const st_meta_broker_t *b = &img->brokers[i];
        if (b->fenced) continue;
        r.brokers.v[k].node_id = b->id;
        const st_meta_endpoint_t *ep = st_server_endpoint_for(srv, req, b);
        r.brokers.v[k].host = st_str(st_req_strdup(req, st_str(ep ? ep->host : "")));
        r.brokers.v[k].port = ep ? ep->port : 0;
        r.brokers.v[k].rack = b->rack ? st_str(st_req_strdup(req, st_str(b->rack))) : ST_STR_NULL;
        k++;
    }
    r.cluster_id = st_str(st_req_strdup(req, st_str(st_controller_cluster_id(srv->ctl))));
    r.controller_id = st_controller_id_for_clients(srv->ctl, img);
    if (q->include_cluster_authorized_operations)
        r.cluster_authorized_operations =
            st_authorized_ops(srv, req, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                              strlen(ST_ACL_CLUSTER_NAME), ST_ACL_OPS_CLUSTER);
    int include_ops = q->include_topic_authorized_operations;
    if (all_topics(req)) {
        /* every topic the principal may describe, and only those */
        ST_ARRAY_ALLOC(r.topics, &req->arena, img->ntopics);
        r.topics.n = 0;
        for (int i = 0; i < img->ntopics; i++)
            if (st_authorized(srv, req, ST_ACL_OP_DESCRIBE, ST_ACL_RES_TOPIC, img->topics[i]->name,
                              strlen(img->topics[i]->name)))
                fill_topic(srv, req, img, &r.topics.v[r.topics.n++], img->topics[i], include_ops);
    } else {
        ST_ARRAY_ALLOC(r.topics, &req->arena, q->topics.n);
        for (int i = 0; i < q->topics.n; i++) {
            st_metadata_req_topic_t *qt = &q->topics.v[i];
            st_metadata_topic_t *out = &r.topics.v[i];
            st_schema_defaults(&st_metadata_topic_schema, out);
            const st_meta_topic_t *t = NULL;
            /* A name that cannot be a topic's (a NUL byte, ...) is answered
             * INVALID_TOPIC_EXCEPTION and never looked up, so that it
             * cannot match a shorter name. */
            if (qt->name.len >= 0) t = name_valid(qt->name) ? st_image_topic(img, qt->name.p, (size_t)qt->name.len) : NULL;
            else t = st_image_topic_by_id(img, &qt->topic_id);
            /* Kafka's order: a topic the principal may not describe is
             * TOPIC_AUTHORIZATION_FAILED whether it exists or not, and so
             * is one it may not create when this request would */
            st_str_t name = t ? st_str(t->name) : qt->name;
            int denied = (name.len >= 0 || t) &&
                         !st_topic_allowed(srv, req, ST_ACL_OP_DESCRIBE, name);
            if (!denied && !t && qt->name.len >= 0 && name_valid(qt->name) &&
                q->allow_auto_topic_creation && srv->cfg.auto_create_topics_enable)
                denied = !may_create(srv, req, qt->name);
            if (t && !denied) {
                fill_topic(srv, req, img, out, t, include_ops);
                continue;
            }
            out->name = qt->name;
            out->topic_id = qt->topic_id;
            if (denied) {
                out->error_code = st_err_wire(ST_E_TOPIC_AUTHORIZATION_FAILED);
                ST_ARRAY_ALLOC(out->partitions, &req->arena, 0);
                continue;
            }
            /* Kafka sets them on every topic it answers, errors too */
            if (include_ops) out->topic_authorized_operations = ST_ACL_OPS_TOPIC;
            ST_ARRAY_ALLOC(out->partitions, &req->arena, 0);
            if (qt->name.len < 0) out->error_code = st_err_wire(ST_E_UNKNOWN_TOPIC_ID);
            else if (!name_valid(qt->name)) out->error_code = st_err_wire(ST_E_INVALID_TOPIC_EXCEPTION);
            /* a node still catching up with the metadata log cannot tell
             * that a topic does not exist: clients retry this one */
            else if (!ready) out->error_code = st_err_wire(ST_E_LEADER_NOT_AVAILABLE);
            else out->error_code = st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION);
        }
    }
    st_image_release(img);
    st_request_respond(req, &r);
}

static void create_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    md_ctx_t *ctx = arg;
    for (int i = 0; i < ctx->ncreate; i++) {
        st_new_topic_t t = {0};
        t.name = ctx->create[i];
        t.name_len = strlen(ctx->create[i]);
        t.num_partitions = -1;
        t.replication_factor = -1;
        st_op_result_t res;
        st_controller_create_topic(ctl, &t, 0, &res);
        if (res.error && res.error != ST_E_TOPIC_ALREADY_EXISTS)
            ST_WARN("controller", "auto-creating topic %s failed: %s", t.name, res.message);
    }
    (void)srv;
}

static void create_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)arg;
    respond(srv, req);
}

void st_handle_metadata(st_server_t *srv, st_request_t *req) {
    st_metadata_req_t *q = req->body;
    if (q->topics.n > 0 && q->allow_auto_topic_creation && srv->cfg.auto_create_topics_enable &&
        st_controller_broker_ready(srv->ctl)) {
        st_meta_image_t *img = st_controller_image(srv->ctl);
        md_ctx_t *ctx = st_arena_alloc(&req->arena, sizeof *ctx);
        ctx->create = st_arena_alloc(&req->arena, sizeof(char *) * (size_t)q->topics.n);
        for (int i = 0; i < q->topics.n; i++) {
            st_str_t n = q->topics.v[i].name;
            /* internal topics are never made here: __consumer_offsets comes
             * with its own settings on the group coordinator's first use */
            if (n.len < 0 || !name_valid(n) || st_topic_is_internal(n.p, (size_t)n.len) ||
                st_image_topic(img, n.p, (size_t)n.len) ||
                !st_topic_allowed(srv, req, ST_ACL_OP_DESCRIBE, n) || !may_create(srv, req, n))
                continue;
            ctx->create[ctx->ncreate++] = st_req_strdup(req, n);
        }
        st_image_release(img);
        if (ctx->ncreate > 0) {
            st_server_via_controller(srv, req, create_work, create_done, ctx);
            return;
        }
    }
    respond(srv, req);
}

/* ---- DescribeTopicPartitions ------------------------------------------------------------ */

/* Kafka's max.request.partition.size.limit (its default): the most
 * partitions one response holds, whatever the request asks. */
#define DTP_MAX_PARTITIONS 2000

static int cmp_str(const void *x, const void *y) {
    const st_str_t *a = x, *b = y;
    size_t m = (size_t)ST_MAX(0, ST_MIN(a->len, b->len));
    int n = m ? memcmp(a->p, b->p, m) : 0; /* an empty name may have no bytes at all */
    return n ? n : (a->len > b->len) - (a->len < b->len);
}

void st_handle_describe_topic_partitions(st_server_t *srv, st_request_t *req) {
    st_dtp_req_t *q = req->body;
    st_dtp_resp_t r;
    st_schema_defaults(&st_dtp_resp_schema, &r);
    st_meta_image_t *img = st_controller_image(srv->ctl);
    int all = q->topics.n <= 0;
    st_str_t cur = q->cursor.topic_name; /* len 0: no cursor */
    int32_t cur_part = q->cursor.partition_index;
    /* the names asked for, from the cursor's on, in order */
    int n = all ? img->ntopics : q->topics.n, k = 0;
    st_str_t *names = st_arena_alloc(&req->arena, sizeof *names * (size_t)(n > 0 ? n : 1));
    int has_cur = cur.len <= 0;
    for (int i = 0; i < n; i++) {
        st_str_t nm = all ? st_str(img->topics[i]->name) : q->topics.v[i].name;
        if (nm.len < 0) continue;
        /* listing every topic: only those the principal may describe */
        if (all && !st_topic_allowed(srv, req, ST_ACL_OP_DESCRIBE, nm)) continue;
        if (cur.len > 0 && cmp_str(&nm, &cur) < 0) continue;
        has_cur |= cur.len > 0 && !cmp_str(&nm, &cur);
        names[k++] = nm;
    }
    if ((!all && !has_cur) || (cur.len > 0 && cur_part < 0)) {
        /* Kafka refuses the whole request: INVALID_REQUEST on every topic */
        ST_ARRAY_ALLOC(r.topics, &req->arena, all ? 0 : q->topics.n);
        for (int i = 0; i < r.topics.n; i++) {
            st_schema_defaults(&st_dtp_topic_schema, &r.topics.v[i]);
            r.topics.v[i].error_code = st_err_wire(ST_E_INVALID_REQUEST);
            r.topics.v[i].name = q->topics.v[i].name;
            ST_ARRAY_ALLOC(r.topics.v[i].partitions, &req->arena, 0);
        }
        st_image_release(img);
        st_request_respond(req, &r);
        return;
    }
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    int remaining = ST_MAX(1, ST_MIN(DTP_MAX_PARTITIONS, q->response_partition_limit));
    ST_ARRAY_ALLOC(r.topics, &req->arena, k);
    r.topics.n = 0;
    for (int i = 0; i < k; i++) {
        if (i > 0 && !cmp_str(&names[i], &names[i - 1])) continue; /* asked twice */
        const st_meta_topic_t *t = name_valid(names[i]) ? st_image_topic(img, names[i].p, (size_t)names[i].len) : NULL;
        if (t && remaining == 0) { /* the next page starts with this topic */
            r.next_cursor.topic_name = st_str(st_req_strdup(req, names[i]));
            r.next_cursor.partition_index = 0;
            break;
        }
        st_dtp_topic_t *ot = &r.topics.v[r.topics.n++];
        st_schema_defaults(&st_dtp_topic_schema, ot);
        ot->name = st_str(st_req_strdup(req, names[i]));
        if (!st_topic_allowed(srv, req, ST_ACL_OP_DESCRIBE, names[i])) {
            ot->error_code = st_err_wire(ST_E_TOPIC_AUTHORIZATION_FAILED);
            ST_ARRAY_ALLOC(ot->partitions, &req->arena, 0);
            continue;
        }
        if (!t) {
            ot->error_code = st_err_wire(!name_valid(names[i]) ? ST_E_INVALID_TOPIC_EXCEPTION
                                                               : ST_E_UNKNOWN_TOPIC_OR_PARTITION);
            ST_ARRAY_ALLOC(ot->partitions, &req->arena, 0);
            continue;
        }
        ot->topic_id = t->id;
        ot->is_internal = (int8_t)t->internal;
        int first = cur.len > 0 && !cmp_str(&names[i], &cur) ? cur_part : 0;
        int np = ST_MAX(0, ST_MIN(t->nparts - first, remaining));
        ST_ARRAY_ALLOC(ot->partitions, &req->arena, np);
        for (int j = 0; j < np; j++) {
            const st_meta_partition_t *mp = &t->parts[first + j];
            st_dtp_partition_t *op = &ot->partitions.v[j];
            st_schema_defaults(&st_dtp_partition_schema, op);
            op->partition_index = mp->id;
            op->leader_id = mp->leader;
            op->leader_epoch = mp->leader_epoch;
            op->replica_nodes.v = st_arena_dup_i32(&req->arena, mp->replicas, mp->nreplicas);
            op->replica_nodes.n = mp->nreplicas;
            op->isr_nodes.v = st_arena_dup_i32(&req->arena, mp->isr, mp->nisr);
            op->isr_nodes.n = mp->nisr;
            op->eligible_leader_replicas.v = st_arena_dup_i32(&req->arena, mp->elr, mp->nelr);
            op->eligible_leader_replicas.n = mp->nelr;
            op->last_known_elr.v = st_arena_dup_i32(&req->arena, mp->lkelr, mp->nlkelr);
            op->last_known_elr.n = mp->nlkelr;
            ST_ARRAY_ALLOC(op->offline_replicas, &req->arena, mp->nreplicas);
            op->offline_replicas.n = offline_replicas(img, mp, op->offline_replicas.v);
        }
        remaining -= np;
        if (first + np < t->nparts) { /* the page ends inside this topic */
            r.next_cursor.topic_name = ot->name;
            r.next_cursor.partition_index = first + np;
            break;
        }
    }
    st_image_release(img);
    st_request_respond(req, &r);
}

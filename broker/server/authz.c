/*
 * authz.c - the authorizer's part in the admin requests that go to the
 * active controller (CreateTopics, DeleteTopics, CreatePartitions,
 * AlterConfigs, IncrementalAlterConfigs).
 *
 * The broker that received the request decides, with the principal of the
 * client's own connection: the items the principal may not touch are taken
 * out of the decoded request before it is carried out here or forwarded
 * (the controller sees the forwarding broker, not the client), and put back
 * into the answer by the request's on_respond hook, each with the error
 * Kafka gives (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED for
 * a broker's configs).  Without an authorizer nothing is taken out.
 */
#include "server.h"

#include <stdlib.h>

/* An item taken out of a request. */
typedef struct denied {
    st_str_t name;
    st_uuid_t id;
    int8_t type; /* the config resource's type */
    st_err_t err;
} denied_t;

typedef struct strip {
    denied_t *v;
    int n;
} strip_t;

static strip_t *strip_new(st_request_t *req, int cap) {
    strip_t *s = st_arena_alloc(&req->arena, sizeof *s);
    s->v = st_arena_alloc(&req->arena, sizeof *s->v * (size_t)(cap + 1));
    return s;
}

/* Appends n items of size sz to an arena array (v, *count), returning the
 * first new one. */
static void *grow(st_request_t *req, void **v, int32_t *count, int n, size_t sz) {
    int old = ST_MAX(*count, 0);
    char *nv = st_arena_alloc(&req->arena, sz * (size_t)(old + n + 1));
    if (old) memcpy(nv, *v, sz * (size_t)old);
    *v = nv;
    *count = old + n;
    return nv + sz * (size_t)old;
}

static int may_create(st_server_t *srv, st_request_t *req, st_str_t name) {
    return st_authorized_cluster(srv, req, ST_ACL_OP_CREATE) ||
           st_topic_allowed(srv, req, ST_ACL_OP_CREATE, name);
}

/* ---- CreateTopics: CREATE on the cluster or the topic ---------------------- */

static void create_topics_back(st_request_t *req, void *body) {
    strip_t *s = req->on_respond_arg;
    st_create_topics_resp_t *r = body;
    st_create_topics_result_t *out =
        grow(req, (void **)&r->topics.v, &r->topics.n, s->n, sizeof *r->topics.v);
    for (int i = 0; i < s->n; i++) {
        st_schema_defaults(&st_create_topics_result_schema, &out[i]);
        out[i].name = s->v[i].name;
        out[i].error_code = st_err_wire(s->v[i].err);
    }
}

/* A topic recreated from the bucket with the id it had (ST_RESTORE_*
 * configs): ALTER on the cluster too, as for other cluster-wide changes. */
static int asks_restore(const st_create_topics_topic_t *t) {
    size_t n = strlen(ST_RESTORE_CONFIG_PREFIX);
    for (int i = 0; i < t->configs.n; i++)
        if (t->configs.v[i].name.len >= (int32_t)n &&
            !memcmp(t->configs.v[i].name.p, ST_RESTORE_CONFIG_PREFIX, n))
            return 1;
    return 0;
}

int st_authz_create_topics(st_server_t *srv, st_request_t *req) {
    if (!*srv->sec->authorizer_class_name) return 0;
    st_create_topics_req_t *q = req->body;
    strip_t *s = strip_new(req, q->topics.n);
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        st_err_t err = ST_OK;
        if (!may_create(srv, req, q->topics.v[i].name)) err = ST_E_TOPIC_AUTHORIZATION_FAILED;
        else if (asks_restore(&q->topics.v[i]) && !st_authorized_cluster(srv, req, ST_ACL_OP_ALTER))
            err = ST_E_CLUSTER_AUTHORIZATION_FAILED;
        if (!err) q->topics.v[k++] = q->topics.v[i];
        else s->v[s->n++] = (denied_t){q->topics.v[i].name, {{0}}, 0, err};
    }
    q->topics.n = k;
    if (s->n) {
        req->on_respond = create_topics_back;
        req->on_respond_arg = s;
    }
    return s->n;
}

/* ---- DeleteTopics: DELETE on each topic ------------------------------------------ */

static void delete_topics_back(st_request_t *req, void *body) {
    strip_t *s = req->on_respond_arg;
    st_delete_topics_resp_t *r = body;
    st_delete_topics_result_t *out =
        grow(req, (void **)&r->responses.v, &r->responses.n, s->n, sizeof *r->responses.v);
    for (int i = 0; i < s->n; i++) {
        st_schema_defaults(&st_delete_topics_result_schema, &out[i]);
        out[i].name = s->v[i].name;
        out[i].topic_id = s->v[i].id;
        out[i].error_code = st_err_wire(s->v[i].err);
    }
}

int st_authz_delete_topics(st_server_t *srv, st_request_t *req) {
    if (!*srv->sec->authorizer_class_name) return 0;
    st_delete_topics_req_t *q = req->body;
    int by_name = q->topic_names.n > 0;
    int n = by_name ? q->topic_names.n : ST_MAX(q->topics.n, 0);
    strip_t *s = strip_new(req, n);
    st_meta_image_t *img = st_controller_image(srv->ctl);
    int k = 0;
    for (int i = 0; i < n; i++) {
        st_str_t name = by_name ? q->topic_names.v[i] : q->topics.v[i].name;
        st_uuid_t id = by_name ? (st_uuid_t){{0}} : q->topics.v[i].topic_id;
        if (name.len < 0) { /* by id: the name it has now */
            const st_meta_topic_t *t = st_image_topic_by_id(img, &id);
            if (!t) { /* unknown: the controller says so */
                q->topics.v[k++] = q->topics.v[i];
                continue;
            }
            name = st_str(st_req_strdup(req, st_str(t->name)));
        }
        if (st_topic_allowed(srv, req, ST_ACL_OP_DELETE, name)) {
            if (by_name) q->topic_names.v[k++] = q->topic_names.v[i];
            else q->topics.v[k++] = q->topics.v[i];
        } else {
            s->v[s->n++] = (denied_t){by_name || q->topics.v[i].name.len >= 0 ? name : ST_STR_NULL,
                                      id, 0, ST_E_TOPIC_AUTHORIZATION_FAILED};
        }
    }
    st_image_release(img);
    if (by_name) q->topic_names.n = k;
    else q->topics.n = k;
    if (s->n) {
        req->on_respond = delete_topics_back;
        req->on_respond_arg = s;
    }
    return s->n;
}

/* ---- CreatePartitions: ALTER on each topic ------------------------------------------ */

static void create_partitions_back(st_request_t *req, void *body) {
    strip_t *s = req->on_respond_arg;
    st_create_partitions_resp_t *r = body;
    st_create_partitions_result_t *out =
        grow(req, (void **)&r->results.v, &r->results.n, s->n, sizeof *r->results.v);
    for (int i = 0; i < s->n; i++) {
        st_schema_defaults(&st_create_partitions_result_schema, &out[i]);
        out[i].name = s->v[i].name;
        out[i].error_code = st_err_wire(s->v[i].err);
    }
}

int st_authz_create_partitions(st_server_t *srv, st_request_t *req) {
    if (!*srv->sec->authorizer_class_name) return 0;
    st_create_partitions_req_t *q = req->body;
    strip_t *s = strip_new(req, q->topics.n);
    int k = 0;
    for (int i = 0; i < q->topics.n; i++) {
        if (st_topic_allowed(srv, req, ST_ACL_OP_ALTER, q->topics.v[i].name))
            q->topics.v[k++] = q->topics.v[i];
        else
            s->v[s->n++] = (denied_t){q->topics.v[i].name, {{0}}, 0, ST_E_TOPIC_AUTHORIZATION_FAILED};
    }
    q->topics.n = k;
    if (s->n) {
        req->on_respond = create_partitions_back;
        req->on_respond_arg = s;
    }
    return s->n;
}

/* ---- AlterConfigs and IncrementalAlterConfigs: ALTER_CONFIGS ------------------------ */

static void alter_configs_back(st_request_t *req, void *body) {
    strip_t *s = req->on_respond_arg;
    st_alter_configs_resp_t *r = body; /* both APIs answer this shape */
    st_alter_configs_result_t *out =
        grow(req, (void **)&r->responses.v, &r->responses.n, s->n, sizeof *r->responses.v);
    for (int i = 0; i < s->n; i++) {
        st_schema_defaults(&st_alter_configs_result_schema, &out[i]);
        out[i].resource_type = s->v[i].type;
        out[i].resource_name = s->v[i].name;
        out[i].error_code = st_err_wire(s->v[i].err);
    }
}

/* A config resource's operation: on the topic for a topic, on the cluster
 * for a broker or its loggers. */
int st_authz_config_resource(st_server_t *srv, st_request_t *req, int8_t op, int8_t type,
                             st_str_t name, st_err_t *err) {
    if (type == ST_RESOURCE_TOPIC) {
        *err = ST_E_TOPIC_AUTHORIZATION_FAILED;
        return st_topic_allowed(srv, req, op, name);
    }
    *err = ST_E_CLUSTER_AUTHORIZATION_FAILED;
    return st_authorized_cluster(srv, req, op);
}

int st_authz_alter_configs(st_server_t *srv, st_request_t *req) {
    if (!*srv->sec->authorizer_class_name) return 0;
    /* the two requests' resources differ only in their configs' shape */
    int incremental = req->api->key == ST_API_INCREMENTAL_ALTER_CONFIGS;
    st_alter_configs_req_t *q = req->body;
    st_incr_alter_configs_req_t *iq = req->body;
    int n = incremental ? iq->resources.n : q->resources.n;
    strip_t *s = strip_new(req, n);
    int k = 0;
    for (int i = 0; i < n; i++) {
        int8_t type = incremental ? iq->resources.v[i].resource_type : q->resources.v[i].resource_type;
        st_str_t name = incremental ? iq->resources.v[i].resource_name : q->resources.v[i].resource_name;
        st_err_t e;
        if (st_authz_config_resource(srv, req, ST_ACL_OP_ALTER_CONFIGS, type, name, &e)) {
            if (incremental) iq->resources.v[k++] = iq->resources.v[i];
            else q->resources.v[k++] = q->resources.v[i];
        } else {
            s->v[s->n++] = (denied_t){name, {{0}}, type, e};
        }
    }
    if (incremental) iq->resources.n = k;
    else q->resources.n = k;
    if (s->n) {
        req->on_respond = alter_configs_back;
        req->on_respond_arg = s;
    }
    return s->n;
}

/*
 * h_admin.c - CreateTopics, DeleteTopics, CreatePartitions,
 * DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.
 *
 * Writes go through the controller thread (one metadata batch per topic or
 * resource); the request is answered when the controller posts back.
 */
#include "server.h"
#include "group.h"
#include "txn.h"

#include <stdlib.h>
#include <sys/statvfs.h>

/* ConfigSource and ConfigType codes of DescribeConfigs. */
enum { SRC_DYNAMIC_TOPIC = 1, SRC_STATIC_BROKER = 4, SRC_DEFAULT = 5 };
enum { TYPE_BOOLEAN = 1, TYPE_STRING = 2, TYPE_INT = 3, TYPE_LONG = 5, TYPE_DOUBLE = 6, TYPE_LIST = 7 };

static int8_t config_type(const st_cfg_desc_t *d) {
    if (!strcmp(d->name, "cleanup.policy") || !strcmp(d->name, "log.cleanup.policy") ||
        !strcmp(d->name, "listeners") || !strcmp(d->name, "advertised.listeners") ||
        !strcmp(d->name, "log.dirs"))
        return TYPE_LIST;
    switch (d->type) {
    case ST_CFG_INT: return TYPE_INT;
    case ST_CFG_LONG: return TYPE_LONG;
    case ST_CFG_BOOL: return TYPE_BOOLEAN;
    case ST_CFG_DOUBLE: return TYPE_DOUBLE;
    default: return TYPE_STRING;
    }
}

static st_str_t arena_str(st_request_t *req, const char *s) {
    return st_str(st_arena_strndup(&req->arena, s, strlen(s)));
}

/* Whether a broker setting differs from its built-in default. */
static int broker_value_set(const st_broker_config_t *b, const char *key) {
    const st_cfg_desc_t *d = st_cfg_lookup(&st_broker_config_table, key);
    if (!d || !d->def) return 0;
    char v[512];
    st_cfg_format(d, b, v, sizeof v);
    return strcmp(v, d->def) != 0;
}

static int key_wanted(const st_describe_configs_resource_t *res, const char *name) {
    if (res->configuration_keys.n < 0) return 1;
    for (int i = 0; i < res->configuration_keys.n; i++)
        if (st_str_eq(res->configuration_keys.v[i], name)) return 1;
    return 0;
}

static void describe_topic(st_server_t *srv, st_request_t *req, const st_meta_topic_t *t,
                           const st_describe_configs_resource_t *res, int synonyms, int docs,
                           st_describe_configs_result_t *out) {
    st_topic_config_t tc;
    char why[256];
    st_topic_config_build(&srv->cfg, t->configs, t->nconfigs, &tc, why, sizeof why);
    int n = 0;
    ST_ARRAY_ALLOC(out->configs, &req->arena, st_topic_config_table.count);
    for (size_t i = 0; i < st_topic_config_table.count; i++) {
        const st_cfg_desc_t *d = &st_topic_config_table.rows[i];
        if (!key_wanted(res, d->name)) continue;
        st_describe_configs_entry_t *e = &out->configs.v[n++];
        st_schema_defaults(&st_describe_configs_entry_schema, e);
        char v[512];
        st_cfg_format(d, &tc, v, sizeof v);
        const char *syn = st_topic_config_synonym(i);
        const char *override = st_meta_topic_config(t, d->name);
        e->name = st_str(d->name);
        e->value = arena_str(req, v);
        e->read_only = 0;
        e->is_default = override == NULL;
        e->config_source = override ? SRC_DYNAMIC_TOPIC
                           : (syn && broker_value_set(&srv->cfg, syn)) ? SRC_STATIC_BROKER
                                                                       : SRC_DEFAULT;
        e->is_sensitive = 0;
        e->config_type = config_type(d);
        e->documentation = docs ? st_str(d->doc) : ST_STR_NULL;
        ST_ARRAY_ALLOC(e->synonyms, &req->arena, synonyms ? 2 : 0);
        int ns = 0;
        if (synonyms && override) {
            e->synonyms.v[ns].name = st_str(d->name);
            e->synonyms.v[ns].value = arena_str(req, override);
            e->synonyms.v[ns].source = SRC_DYNAMIC_TOPIC;
            ns++;
        }
        if (synonyms && syn) {
            char bv[512];
            st_cfg_format(st_cfg_lookup(&st_broker_config_table, syn), &srv->cfg, bv, sizeof bv);
            e->synonyms.v[ns].name = st_str(syn);
            e->synonyms.v[ns].value = arena_str(req, bv);
            e->synonyms.v[ns].source = broker_value_set(&srv->cfg, syn) ? SRC_STATIC_BROKER : SRC_DEFAULT;
            ns++;
        }
        e->synonyms.n = ns;
    }
    out->configs.n = n;
    st_topic_config_fini(&tc);
}

static void describe_broker(st_server_t *srv, st_request_t *req,
                            const st_describe_configs_resource_t *res, int docs,
                            st_describe_configs_result_t *out) {
    size_t total = st_broker_config_table.count;
    for (size_t k = 0; k < srv->nextra_config; k++) total += srv->extra_config[k].table->count;
    ST_ARRAY_ALLOC(out->configs, &req->arena, total);
    int n = 0;
    for (size_t k = 0; k <= srv->nextra_config; k++) {
        const st_cfg_table_t *tab = k == 0 ? &st_broker_config_table : srv->extra_config[k - 1].table;
        const void *obj = k == 0 ? (const void *)&srv->cfg : srv->extra_config[k - 1].obj;
        for (size_t i = 0; i < tab->count; i++) {
            const st_cfg_desc_t *d = &tab->rows[i];
            if (!key_wanted(res, d->name)) continue;
            st_describe_configs_entry_t *e = &out->configs.v[n++];
            st_schema_defaults(&st_describe_configs_entry_schema, e);
            char v[512];
            st_cfg_format(d, obj, v, sizeof v);
            int sensitive = st_cfg_is_secret(d->name);
            e->name = st_str(d->name);
            e->value = sensitive ? ST_STR_NULL : arena_str(req, v);
            e->read_only = 1;
            e->is_default = d->def && !strcmp(v, d->def);
            e->config_source = e->is_default ? SRC_DEFAULT : SRC_STATIC_BROKER;
            e->is_sensitive = (int8_t)(sensitive != 0);
            e->config_type = config_type(d);
            e->documentation = docs ? st_str(d->doc) : ST_STR_NULL;
            ST_ARRAY_ALLOC(e->synonyms, &req->arena, 0);
        }
    }
    out->configs.n = n;
}

void st_handle_describe_configs(st_server_t *srv, st_request_t *req) {
    st_describe_configs_req_t *q = req->body;
    st_describe_configs_resp_t r;
    st_schema_defaults(&st_describe_configs_resp_schema, &r);
    st_meta_image_t *img = st_controller_image(srv->ctl);
    ST_ARRAY_ALLOC(r.results, &req->arena, q->resources.n);
    for (int i = 0; i < q->resources.n; i++) {
        st_describe_configs_resource_t *res = &q->resources.v[i];
        st_describe_configs_result_t *out = &r.results.v[i];
        st_schema_defaults(&st_describe_configs_result_schema, out);
        out->resource_type = res->resource_type;
        out->resource_name = res->resource_name;
        ST_ARRAY_ALLOC(out->configs, &req->arena, 0);
        st_err_t denied;
        if (!st_authz_config_resource(srv, req, ST_ACL_OP_DESCRIBE_CONFIGS, res->resource_type,
                                      res->resource_name, &denied)) {
            out->error_code = st_err_wire(denied);
            continue;
        }
        if (res->resource_type == ST_RESOURCE_TOPIC) {
            const st_meta_topic_t *t = st_image_topic(img, res->resource_name.p,
                                                      (size_t)ST_MAX(res->resource_name.len, 0));
            if (!t) {
                out->error_code = st_err_wire(ST_E_UNKNOWN_TOPIC_OR_PARTITION);
                out->error_message = st_str("Topic does not exist");
                continue;
            }
            describe_topic(srv, req, t, res, q->include_synonyms, q->include_documentation, out);
        } else if (res->resource_type == ST_RESOURCE_BROKER) {
            char self[16];
            snprintf(self, sizeof self, "%d", (int)srv->cfg.node_id);
            if (res->resource_name.len > 0 && !st_str_eq(res->resource_name, self)) {
                out->error_code = st_err_wire(ST_E_INVALID_REQUEST);
                out->error_message = st_str("Unexpected broker id; this broker answers for itself");
                continue;
            }
            describe_broker(srv, req, res, q->include_documentation, out);
        } else {
            out->error_code = st_err_wire(ST_E_INVALID_REQUEST);
            out->error_message = st_str("Unsupported resource type");
        }
    }
    st_image_release(img);
    st_request_respond(req, &r);
}

/* ---- CreateTopics -------------------------------------------------------- */

typedef struct create_ctx {
    st_new_topic_t *topics;
    st_op_result_t *results;
    int *dup;
    int n;
    int validate_only;
} create_ctx_t;

static void create_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    create_ctx_t *c = arg;
    /* Kafka refuses the whole request when its topics add up to more
     * partitions than one request may create. */
    int64_t total = 0;
    for (int i = 0; i < c->n; i++) {
        const st_new_topic_t *t = &c->topics[i];
        if (t->nassignments > 0) total += t->nassignments;
        else if (t->num_partitions == -1) total += srv->cfg.num_partitions;
        else if (t->num_partitions > 0) total += t->num_partitions;
    }
    for (int i = 0; i < c->n; i++) {
        if (c->dup[i]) continue;
        if (total > ST_CONTROLLER_MAX_PARTITIONS_PER_REQUEST) {
            c->results[i].error = ST_E_POLICY_VIOLATION;
            snprintf(c->results[i].message, sizeof c->results[i].message,
                     "Excessively large number of partitions per request.");
            continue;
        }
        st_controller_create_topic(ctl, &c->topics[i], c->validate_only, &c->results[i]);
    }
}

static void create_done(st_server_t *srv, st_request_t *req, void *arg) {
    create_ctx_t *c = arg;
    st_create_topics_req_t *q = req->body;
    st_create_topics_resp_t r;
    st_schema_defaults(&st_create_topics_resp_schema, &r);
    ST_ARRAY_ALLOC(r.topics, &req->arena, c->n);
    st_meta_image_t *img = st_controller_image(srv->ctl);
    for (int i = 0; i < c->n; i++) {
        st_create_topics_result_t *out = &r.topics.v[i];
        st_schema_defaults(&st_create_topics_result_schema, out);
        out->name = q->topics.v[i].name;
        st_op_result_t *res = &c->results[i];
        if (c->dup[i] && !res->error) {
            res->error = ST_E_INVALID_REQUEST;
            snprintf(res->message, sizeof res->message,
                     "Create topics request from client contains a duplicate topic name");
        }
        out->error_code = st_err_wire(res->error);
        out->error_message = res->error ? arena_str(req, res->message) : ST_STR_NULL;
        if (res->error) {
            out->topic_config_error_code = 0;
            continue;
        }
        out->topic_id = res->topic_id;
        out->num_partitions = res->num_partitions;
        out->replication_factor = res->replication_factor;
        const st_meta_topic_t *t = c->validate_only ? NULL
                                   : st_image_topic(img, c->topics[i].name, c->topics[i].name_len);
        if (t) {
            st_describe_configs_resource_t all = {ST_RESOURCE_TOPIC, out->name, {NULL, -1}};
            st_describe_configs_result_t tmp;
            describe_topic(srv, req, t, &all, 0, 0, &tmp);
            ST_ARRAY_ALLOC(out->configs, &req->arena, tmp.configs.n);
            for (int k = 0; k < tmp.configs.n; k++) {
                st_describe_configs_entry_t *e = &tmp.configs.v[k];
                out->configs.v[k].name = e->name;
                out->configs.v[k].value = e->value;
                out->configs.v[k].read_only = e->read_only;
                out->configs.v[k].config_source = e->config_source;
                out->configs.v[k].is_sensitive = e->is_sensitive;
            }
        }
    }
    st_image_release(img);
    st_request_respond(req, &r);
}

typedef struct name_at {
    st_str_t name;
    int index;
} name_at_t;

static int cmp_name_at(const void *x, const void *y) {
    const name_at_t *a = x, *b = y;
    if (a->name.len != b->name.len) return a->name.len < b->name.len ? -1 : 1;
    return a->name.len > 0 ? memcmp(a->name.p, b->name.p, (size_t)a->name.len) : 0;
}

/* dup[i] = 1 for every topic whose name (bytes and length) another topic
 * of the request has too.  Sorted, not compared pair by pair: a 1.4 MB
 * request of 60,000 topics held an I/O thread for 17 s. */
static void mark_duplicate_names(st_request_t *req, const st_create_topics_req_t *q, int *dup) {
    int n = q->topics.n;
    if (n < 2) return;
    name_at_t *v = st_arena_alloc(&req->arena, sizeof *v * (size_t)n);
    for (int i = 0; i < n; i++) v[i] = (name_at_t){q->topics.v[i].name, i};
    qsort(v, (size_t)n, sizeof *v, cmp_name_at);
    for (int i = 1; i < n; i++)
        if (!cmp_name_at(&v[i - 1], &v[i])) dup[v[i - 1].index] = dup[v[i].index] = 1;
}

/* A request from another broker of the cluster (its outbound client's
 * client id; principals come with authentication). */
static int is_broker(const st_request_t *req) {
    static const char prefix[] = "strata-broker-";
    return req->hdr.client_id.len > (int32_t)sizeof prefix - 1 &&
           !memcmp(req->hdr.client_id.p, prefix, sizeof prefix - 1);
}

void st_handle_create_topics(st_server_t *srv, st_request_t *req) {
    st_authz_create_topics(srv, req); /* before forwarding: the client's principal */
    /* only the active controller writes metadata: others pass it on */
    if (st_controller_forward(srv->ctl, req)) return;
    st_create_topics_req_t *q = req->body;
    create_ctx_t *c = st_arena_alloc(&req->arena, sizeof *c);
    c->n = q->topics.n;
    c->validate_only = q->validate_only;
    c->topics = st_arena_alloc(&req->arena, sizeof *c->topics * (size_t)(c->n + 1));
    c->results = st_arena_alloc(&req->arena, sizeof *c->results * (size_t)(c->n + 1));
    c->dup = st_arena_alloc(&req->arena, sizeof *c->dup * (size_t)(c->n + 1));
    mark_duplicate_names(req, q, c->dup);
    for (int i = 0; i < c->n; i++) {
        st_create_topics_topic_t *qt = &q->topics.v[i];
        st_new_topic_t *t = &c->topics[i];
        t->name = qt->name.len > 0 ? qt->name.p : "";
        t->name_len = (size_t)ST_MAX(qt->name.len, 0);
        if (st_topic_is_internal(t->name, t->name_len) && is_broker(req) &&
            t->name_len == strlen(ST_GROUP_OFFSETS_TOPIC) &&
            !memcmp(t->name, ST_GROUP_OFFSETS_TOPIC, t->name_len)) {
            /* another broker's group coordinator, on first use, through the
             * active controller: made with this controller's offsets.topic.*
             * whatever the request says, so a client claiming to be a
             * broker can only cause what a FindCoordinator would */
            st_offsets_topic_configs_t *cf = st_arena_alloc(&req->arena, sizeof *cf);
            st_server_offsets_topic_spec(srv, t, cf);
            continue;
        }
        if (is_broker(req) && t->name_len == strlen(ST_TXN_STATE_TOPIC) &&
            !memcmp(t->name, ST_TXN_STATE_TOPIC, t->name_len)) {
            /* the same for a transaction coordinator's first use */
            st_txn_topic_configs_t *cf = st_arena_alloc(&req->arena, sizeof *cf);
            st_server_txn_topic_spec(srv, t, cf);
            continue;
        }
        if (st_topic_is_internal(t->name, t->name_len)) {
            /* A __consumer_offsets of the client's making (one partition,
             * say) would leave coordinators unplaceable; the broker makes
             * it on first use with offsets.topic.* (Kafka refuses too). */
            c->results[i].error = ST_E_INVALID_REQUEST;
            snprintf(c->results[i].message, sizeof c->results[i].message,
                     "Creation of internal topic %.*s is prohibited.", (int)t->name_len, t->name);
            c->dup[i] = 1; /* not sent to the controller */
            continue;
        }
        t->num_partitions = qt->num_partitions;
        t->replication_factor = qt->replication_factor;
        t->nassignments = qt->assignments.n > 0 ? qt->assignments.n : 0;
        if (t->nassignments) {
            /* partition_index order: assignment i must be for partition i */
            const int32_t **a = st_arena_alloc(&req->arena, sizeof *a * (size_t)t->nassignments);
            int *sz = st_arena_alloc(&req->arena, sizeof *sz * (size_t)t->nassignments);
            for (int k = 0; k < t->nassignments; k++) {
                st_create_topics_assignment_t *as = &qt->assignments.v[k];
                if (as->partition_index < 0 || as->partition_index >= t->nassignments) {
                    c->results[i].error = ST_E_INVALID_REPLICA_ASSIGNMENT;
                    c->dup[i] = 1; /* not sent to the controller */
                    break;
                }
                a[as->partition_index] = as->broker_ids.v;
                sz[as->partition_index] = as->broker_ids.n;
            }
            t->assignments = a;
            t->assignment_sizes = sz;
        }
        t->nconfigs = qt->configs.n > 0 ? qt->configs.n : 0;
        st_kv_t *kv = st_arena_alloc(&req->arena, sizeof *kv * (size_t)(t->nconfigs + 1));
        for (int k = 0; k < t->nconfigs; k++) {
            kv[k].name = st_req_strdup(req, qt->configs.v[k].name);
            kv[k].value = qt->configs.v[k].value.len >= 0 ? st_req_strdup(req, qt->configs.v[k].value)
                                                           : NULL;
        }
        t->configs = kv;
    }
    st_server_via_controller(srv, req, create_work, create_done, c);
}

/* ---- DeleteTopics ----------------------------------------------------- */

typedef struct delete_ctx {
    st_str_t *names;
    st_uuid_t *ids;
    st_op_result_t *results;
    int n;
} delete_ctx_t;

static void delete_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    delete_ctx_t *c = arg;
    st_meta_image_t *img = st_controller_image(srv->ctl);
    for (int i = 0; i < c->n; i++) {
        /* by name, or by id (resolved in the image) */
        const char *name = c->names[i].len >= 0 ? c->names[i].p : NULL;
        size_t len = (size_t)ST_MAX(c->names[i].len, 0);
        if (!name) {
            const st_meta_topic_t *t = st_image_topic_by_id(img, &c->ids[i]);
            if (t) name = t->name, len = strlen(t->name);
        }
        if (name && st_topic_is_internal(name, len)) {
            c->results[i].error = ST_E_INVALID_REQUEST;
            snprintf(c->results[i].message, sizeof c->results[i].message,
                     "Deletion of internal topic %.*s is prohibited.", (int)len, name);
            continue;
        }
        st_controller_delete_topic(ctl, c->names[i].len >= 0 ? c->names[i].p : NULL,
                                   (size_t)ST_MAX(c->names[i].len, 0), &c->ids[i], &c->results[i]);
    }
    st_image_release(img);
}

static void delete_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    delete_ctx_t *c = arg;
    st_delete_topics_resp_t r;
    st_schema_defaults(&st_delete_topics_resp_schema, &r);
    ST_ARRAY_ALLOC(r.responses, &req->arena, c->n);
    for (int i = 0; i < c->n; i++) {
        st_delete_topics_result_t *out = &r.responses.v[i];
        st_schema_defaults(&st_delete_topics_result_schema, out);
        out->name = c->names[i];
        out->topic_id = c->results[i].topic_id;
        out->error_code = st_err_wire(c->results[i].error);
        out->error_message = c->results[i].error ? arena_str(req, c->results[i].message) : ST_STR_NULL;
    }
    st_request_respond(req, &r);
}

void st_handle_delete_topics(st_server_t *srv, st_request_t *req) {
    st_authz_delete_topics(srv, req); /* before forwarding: the client's principal */
    /* only the active controller writes metadata: others pass it on */
    if (st_controller_forward(srv->ctl, req)) return;
    st_delete_topics_req_t *q = req->body;
    delete_ctx_t *c = st_arena_alloc(&req->arena, sizeof *c);
    /* Older versions name topics; newer ones carry name or id. */
    c->n = q->topic_names.n > 0 ? q->topic_names.n : ST_MAX(q->topics.n, 0);
    c->names = st_arena_alloc(&req->arena, sizeof *c->names * (size_t)(c->n + 1));
    c->ids = st_arena_alloc(&req->arena, sizeof *c->ids * (size_t)(c->n + 1));
    c->results = st_arena_alloc(&req->arena, sizeof *c->results * (size_t)(c->n + 1));
    for (int i = 0; i < c->n; i++) {
        if (q->topic_names.n > 0) {
            c->names[i] = q->topic_names.v[i];
        } else {
            c->names[i] = q->topics.v[i].name;
            c->ids[i] = q->topics.v[i].topic_id;
        }
    }
    st_server_via_controller(srv, req, delete_work, delete_done, c);
}

/* ---- CreatePartitions ------------------------------------------------- */

typedef struct partitions_ctx {
    st_op_result_t *results;
    int validate_only;
} partitions_ctx_t;

static void partitions_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    partitions_ctx_t *c = arg;
    st_create_partitions_req_t *q = req->body;
    st_create_partitions_resp_t r;
    st_schema_defaults(&st_create_partitions_resp_schema, &r);
    ST_ARRAY_ALLOC(r.results, &req->arena, q->topics.n);
    for (int i = 0; i < q->topics.n; i++) {
        st_create_partitions_result_t *out = &r.results.v[i];
        out->name = q->topics.v[i].name;
        out->error_code = st_err_wire(c->results[i].error);
        out->error_message = c->results[i].error ? arena_str(req, c->results[i].message) : ST_STR_NULL;
    }
    st_request_respond(req, &r);
}

typedef struct partitions_job {
    partitions_ctx_t *ctx;
    st_create_partitions_req_t *q;
} partitions_job_t;

static void partitions_work_all(st_server_t *srv, st_controller_t *ctl, void *arg) {
    partitions_job_t *j = arg;
    st_meta_image_t *img = st_controller_image(srv->ctl);
    /* More new partitions than one request may create: every topic is
     * refused (Kafka's controller answers a batch over its bound so), with
     * the topic's own error when it has a more specific one
     * (max.broker.partitions among them). */
    int64_t added = 0;
    for (int i = 0; i < j->q->topics.n; i++) {
        st_create_partitions_topic_t *t = &j->q->topics.v[i];
        const st_meta_topic_t *mt = st_image_topic(img, t->name.p, (size_t)ST_MAX(t->name.len, 0));
        if (mt && t->count > mt->nparts) added += t->count - mt->nparts;
    }
    if (added > ST_CONTROLLER_MAX_PARTITIONS_PER_REQUEST) {
        for (int i = 0; i < j->q->topics.n; i++) {
            st_create_partitions_topic_t *t = &j->q->topics.v[i];
            st_op_result_t *res = &j->ctx->results[i];
            st_controller_create_partitions(ctl, t->name.p, (size_t)ST_MAX(t->name.len, 0), t->count,
                                            1, res);
            if (res->error) continue;
            res->error = ST_E_POLICY_VIOLATION;
            snprintf(res->message, sizeof res->message,
                     "Unable to perform excessively large batch operation.");
        }
        st_image_release(img);
        return;
    }
    for (int i = 0; i < j->q->topics.n; i++) {
        st_create_partitions_topic_t *t = &j->q->topics.v[i];
        st_op_result_t *res = &j->ctx->results[i];
        if (st_topic_is_internal(t->name.p, (size_t)ST_MAX(t->name.len, 0))) {
            /* groups are placed by hash(group.id) % the partition count */
            res->error = ST_E_INVALID_REQUEST;
            snprintf(res->message, sizeof res->message,
                     "The partitions of internal topic %.*s cannot be changed.",
                     ST_STR_FMT(t->name));
            continue;
        }
        if (t->assignments.n >= 0) {
            /* Explicit assignments must name registered brokers, one list
             * per new partition. */
            const st_meta_topic_t *mt = st_image_topic(img, t->name.p, (size_t)ST_MAX(t->name.len, 0));
            int want = mt ? t->count - mt->nparts : 0;
            if (mt && t->assignments.n != want) {
                res->error = ST_E_INVALID_REPLICA_ASSIGNMENT;
                snprintf(res->message, sizeof res->message,
                         "Increasing the number of partitions by %d but %d assignments provided.",
                         want, (int)t->assignments.n);
                continue;
            }
            for (int k = 0; k < t->assignments.n && !res->error; k++)
                for (int b = 0; b < t->assignments.v[k].broker_ids.n; b++) {
                    int32_t id = t->assignments.v[k].broker_ids.v[b];
                    int found = 0;
                    for (int x = 0; x < img->nbrokers; x++) found |= img->brokers[x].id == id;
                    if (!found) {
                        res->error = ST_E_INVALID_REPLICA_ASSIGNMENT;
                        snprintf(res->message, sizeof res->message, "Unknown broker id %d", (int)id);
                    }
                }
            if (res->error) continue;
        }
        st_controller_create_partitions(ctl, t->name.p, (size_t)ST_MAX(t->name.len, 0), t->count,
                                        j->ctx->validate_only, res);
    }
    st_image_release(img);
}

static void partitions_done_all(st_server_t *srv, st_request_t *req, void *arg) {
    partitions_job_t *j = arg;
    partitions_done(srv, req, j->ctx);
}

void st_handle_create_partitions(st_server_t *srv, st_request_t *req) {
    st_authz_create_partitions(srv, req); /* before forwarding: the client's principal */
    /* only the active controller writes metadata: others pass it on */
    if (st_controller_forward(srv->ctl, req)) return;
    st_create_partitions_req_t *q = req->body;
    partitions_job_t *j = st_arena_alloc(&req->arena, sizeof *j);
    j->q = q;
    j->ctx = st_arena_alloc(&req->arena, sizeof *j->ctx);
    j->ctx->validate_only = q->validate_only;
    j->ctx->results = st_arena_alloc(&req->arena, sizeof *j->ctx->results * (size_t)(q->topics.n + 1));
    st_server_via_controller(srv, req, partitions_work_all, partitions_done_all, j);
}

/* ---- AlterConfigs and IncrementalAlterConfigs -------------------------- */

typedef struct alter_res {
    int8_t type;
    st_str_t name;
    st_config_change_t *changes;
    int nchanges;
} alter_res_t;

typedef struct alter_ctx {
    alter_res_t *res;
    st_op_result_t *results;
    int n;
    int replace_all;
    int validate_only;
} alter_ctx_t;

static void alter_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    alter_ctx_t *c = arg;
    for (int i = 0; i < c->n; i++)
        st_controller_alter_configs(ctl, c->res[i].type, c->res[i].name.p,
                                    (size_t)ST_MAX(c->res[i].name.len, 0), c->res[i].changes,
                                    c->res[i].nchanges, c->replace_all, c->validate_only,
                                    &c->results[i]);
}

static void alter_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    alter_ctx_t *c = arg;
    st_alter_configs_resp_t r;
    st_schema_defaults(&st_alter_configs_resp_schema, &r);
    ST_ARRAY_ALLOC(r.responses, &req->arena, c->n);
    for (int i = 0; i < c->n; i++) {
        st_alter_configs_result_t *out = &r.responses.v[i];
        out->error_code = st_err_wire(c->results[i].error);
        /* a notice with NONE too (tiering switched off: the remote log is
         * deleted); clients read the message of an error only */
        out->error_message = c->results[i].error || c->results[i].message[0]
                                 ? arena_str(req, c->results[i].message)
                                 : ST_STR_NULL;
        out->resource_type = c->res[i].type;
        out->resource_name = c->res[i].name;
    }
    st_request_respond(req, &r);
}

static alter_ctx_t *alter_ctx_new(st_request_t *req, int n) {
    alter_ctx_t *c = st_arena_alloc(&req->arena, sizeof *c);
    c->n = n;
    c->res = st_arena_alloc(&req->arena, sizeof *c->res * (size_t)(n + 1));
    c->results = st_arena_alloc(&req->arena, sizeof *c->results * (size_t)(n + 1));
    return c;
}

void st_handle_alter_configs(st_server_t *srv, st_request_t *req) {
    st_authz_alter_configs(srv, req); /* before forwarding: the client's principal */
    /* only the active controller writes metadata: others pass it on */
    if (st_controller_forward(srv->ctl, req)) return;
    st_alter_configs_req_t *q = req->body;
    alter_ctx_t *c = alter_ctx_new(req, q->resources.n);
    c->replace_all = 1;
    c->validate_only = q->validate_only;
    for (int i = 0; i < c->n; i++) {
        st_alter_configs_resource_t *res = &q->resources.v[i];
        c->res[i].type = res->resource_type;
        c->res[i].name = res->resource_name;
        c->res[i].nchanges = res->configs.n;
        c->res[i].changes = st_arena_alloc(&req->arena, sizeof(st_config_change_t) * (size_t)(res->configs.n + 1));
        for (int k = 0; k < res->configs.n; k++) {
            st_alter_config_t *a = &res->configs.v[k];
            c->res[i].changes[k] = (st_config_change_t){a->name.p, (size_t)ST_MAX(a->name.len, 0),
                                                        a->value.len >= 0 ? a->value.p : NULL,
                                                        (size_t)ST_MAX(a->value.len, 0),
                                                        a->value.len >= 0 ? ST_CFGOP_SET : ST_CFGOP_DELETE};
        }
    }
    st_server_via_controller(srv, req, alter_work, alter_done, c);
}

void st_handle_incremental_alter_configs(st_server_t *srv, st_request_t *req) {
    st_authz_alter_configs(srv, req); /* before forwarding: the client's principal */
    /* only the active controller writes metadata: others pass it on */
    if (st_controller_forward(srv->ctl, req)) return;
    st_incr_alter_configs_req_t *q = req->body;
    alter_ctx_t *c = alter_ctx_new(req, q->resources.n);
    c->replace_all = 0;
    c->validate_only = q->validate_only;
    for (int i = 0; i < c->n; i++) {
        st_incr_alter_configs_resource_t *res = &q->resources.v[i];
        c->res[i].type = res->resource_type;
        c->res[i].name = res->resource_name;
        c->res[i].nchanges = res->configs.n;
        c->res[i].changes = st_arena_alloc(&req->arena, sizeof(st_config_change_t) * (size_t)(res->configs.n + 1));
        for (int k = 0; k < res->configs.n; k++) {
            st_incr_alter_config_t *a = &res->configs.v[k];
            c->res[i].changes[k] = (st_config_change_t){a->name.p, (size_t)ST_MAX(a->name.len, 0),
                                                        a->value.len >= 0 ? a->value.p : NULL,
                                                        (size_t)ST_MAX(a->value.len, 0),
                                                        a->config_operation};
        }
    }
    st_server_via_controller(srv, req, alter_work, alter_done, c);
}

/* ---- DescribeLogDirs ---------------------------------------------------- */

static int wanted_partition(const st_describe_log_dirs_req_t *q, const st_partition_t *p) {
    if (q->topics.n < 0) return 1;
    for (int i = 0; i < q->topics.n; i++) {
        if (!st_str_eq(q->topics.v[i].topic, p->topic)) continue;
        for (int k = 0; k < q->topics.v[i].partitions.n; k++)
            if (q->topics.v[i].partitions.v[k] == p->index) return 1;
    }
    return 0;
}

/* Per log dir, the size of each partition's local log (the tiered part is
 * not counted: it is in the bucket). */
void st_handle_describe_log_dirs(st_server_t *srv, st_request_t *req) {
    st_describe_log_dirs_req_t *q = req->body;
    st_describe_log_dirs_resp_t r;
    st_schema_defaults(&st_describe_log_dirs_resp_schema, &r);
    int ndirs = 0, nparts = 0;
    char **dirs = st_split_csv(srv->cfg.log_dirs, &ndirs);
    st_partition_t **parts = st_replicas_all(srv->rm, &nparts);
    ST_ARRAY_ALLOC(r.results, &req->arena, ndirs);
    for (int d = 0; d < ndirs; d++) {
        st_describe_log_dirs_result_t *res = &r.results.v[d];
        st_schema_defaults(&st_describe_log_dirs_result_schema, res);
        res->log_dir = arena_str(req, dirs[d]);
        struct statvfs vfs;
        if (statvfs(dirs[d], &vfs) == 0) {
            res->total_bytes = (int64_t)vfs.f_blocks * (int64_t)vfs.f_frsize;
            res->usable_bytes = (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
        }
        ST_ARRAY_ALLOC(res->topics, &req->arena, nparts);
        res->topics.n = 0;
        for (int i = 0; i < nparts; i++) {
            st_partition_t *p = parts[i];
            const char *pdir = st_log_dir(p->log);
            size_t dl = strlen(dirs[d]);
            if (strncmp(pdir, dirs[d], dl) || pdir[dl] != '/' || !wanted_partition(q, p)) continue;
            st_describe_log_dirs_topic_t *t = NULL;
            for (int k = 0; k < res->topics.n; k++)
                if (st_str_eq(res->topics.v[k].name, p->topic)) t = &res->topics.v[k];
            if (!t) {
                t = &res->topics.v[res->topics.n++];
                t->name = arena_str(req, p->topic);
                ST_ARRAY_ALLOC(t->partitions, &req->arena, nparts);
                t->partitions.n = 0;
            }
            st_log_offsets_t o;
            st_log_offsets(p->log, &o);
            st_describe_log_dirs_part_t *dp = &t->partitions.v[t->partitions.n++];
            dp->partition_index = p->index;
            dp->partition_size = o.size_bytes;
            dp->offset_lag = 0;
            dp->is_future_key = 0;
        }
    }
    for (int i = 0; i < nparts; i++) st_partition_release(parts[i]);
    free(parts);
    st_free_strv(dirs, ndirs);
    st_request_respond(req, &r);
}

/* ---- ElectLeaders ------------------------------------------------------------------- */

typedef struct elect_ctx {
    int type;
    st_elect_request_t *parts;
    int n;
    int all;
} elect_ctx_t;

static void elect_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    elect_ctx_t *x = arg;
    st_controller_elect_leaders(ctl, x->type, x->parts, x->n);
}

static void elect_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    elect_ctx_t *x = arg;
    st_elect_leaders_resp_t r;
    st_schema_defaults(&st_elect_leaders_resp_schema, &r);
    /* one result per topic, in the order first named; for "every
     * partition" only those that got a new leader or could not (Kafka
     * leaves out the ones that needed no election) */
    int ntopics = 0;
    ST_ARRAY_ALLOC(r.replica_election_results, &req->arena, x->n);
    for (int i = 0; i < x->n; i++) {
        st_elect_request_t *p = &x->parts[i];
        if (x->all && p->error == ST_E_ELECTION_NOT_NEEDED) continue;
        st_elect_leaders_resp_topic_t *t = NULL;
        for (int k = 0; k < ntopics && !t; k++)
            if (r.replica_election_results.v[k].topic.len == (int32_t)p->topic_len &&
                !memcmp(r.replica_election_results.v[k].topic.p, p->topic, p->topic_len))
                t = &r.replica_election_results.v[k];
        if (!t) {
            t = &r.replica_election_results.v[ntopics++];
            st_schema_defaults(&st_elect_leaders_resp_topic_schema, t);
            t->topic = (st_str_t){p->topic, (int32_t)p->topic_len};
            ST_ARRAY_ALLOC(t->partition_result, &req->arena, x->n);
            t->partition_result.n = 0;
        }
        st_elect_leaders_resp_part_t *o = &t->partition_result.v[t->partition_result.n++];
        st_schema_defaults(&st_elect_leaders_resp_part_schema, o);
        o->partition_id = p->partition;
        o->error_code = st_err_wire(p->error);
        o->error_message = p->error ? st_str(st_req_strdup(req, st_str(p->message))) : ST_STR_NULL;
    }
    r.replica_election_results.n = ntopics;
    st_request_respond(req, &r);
}

void st_handle_elect_leaders(st_server_t *srv, st_request_t *req) {
    if (st_controller_forward(srv->ctl, req)) return;
    st_elect_leaders_req_t *q = req->body;
    elect_ctx_t *x = st_arena_alloc(&req->arena, sizeof *x);
    x->type = req->hdr.api_version >= 1 ? q->election_type : 0;
    x->all = q->topic_partitions.n < 0;
    int n = 0;
    st_meta_image_t *img = NULL;
    if (x->all) {
        img = st_controller_image(srv->ctl);
        for (int t = 0; t < img->ntopics; t++) n += img->topics[t]->nparts;
    } else {
        for (int t = 0; t < q->topic_partitions.n; t++) n += q->topic_partitions.v[t].partitions.n;
    }
    x->parts = st_arena_alloc(&req->arena, sizeof *x->parts * (size_t)(n + 1));
    x->n = 0;
    if (x->all) {
        for (int t = 0; t < img->ntopics; t++)
            for (int p = 0; p < img->topics[t]->nparts; p++) {
                st_elect_request_t *e = &x->parts[x->n++];
                memset(e, 0, sizeof *e);
                e->topic = st_req_strdup(req, st_str(img->topics[t]->name));
                e->topic_len = strlen(img->topics[t]->name);
                e->partition = img->topics[t]->parts[p].id;
            }
        st_image_release(img);
    } else {
        for (int t = 0; t < q->topic_partitions.n; t++) {
            const st_elect_leaders_req_topic_t *qt = &q->topic_partitions.v[t];
            for (int p = 0; p < qt->partitions.n; p++) {
                st_elect_request_t *e = &x->parts[x->n++];
                memset(e, 0, sizeof *e);
                e->topic = qt->topic.len > 0 ? qt->topic.p : "";
                e->topic_len = (size_t)ST_MAX(qt->topic.len, 0);
                e->partition = qt->partitions.v[p];
            }
        }
    }
    st_server_via_controller(srv, req, elect_work, elect_done, x);
}

/* ---- AlterPartition (from a partition's leader) ----------------------------------- */

typedef struct isr_ctx {
    const st_alter_partition_req_t *q;
    int version;
    st_arena_t a; /* the answer's, built on the controller thread */
    st_alter_partition_resp_t r;
} isr_ctx_t;

static void isr_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    isr_ctx_t *x = arg;
    st_controller_alter_partition(ctl, x->version, x->q, &x->r, &x->a);
}

static void isr_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    isr_ctx_t *x = arg;
    st_request_respond(req, &x->r);
    st_arena_fini(&x->a);
    free(x);
}

void st_handle_alter_partition(st_server_t *srv, st_request_t *req) {
    if (st_controller_forward(srv->ctl, req)) return;
    isr_ctx_t *x = st_calloc(1, sizeof *x);
    x->q = req->body;
    x->version = req->hdr.api_version;
    st_arena_init(&x->a, 1024);
    st_server_via_controller(srv, req, isr_work, isr_done, x);
}

/* ---- AlterPartitionReassignments and ListPartitionReassignments (KIP-455) ------------ */

/* Both go to the active controller (forwarded from other nodes) and are
 * answered from its image, so a list made right after an alter sees it. */
typedef struct reassign_ctx {
    const void *q;
    st_arena_t a; /* the answer's, built on the controller thread */
    st_reassign_resp_t alter;
    st_list_reassign_resp_t list;
} reassign_ctx_t;

static void reassign_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    reassign_ctx_t *x = arg;
    st_controller_alter_reassignments(ctl, x->q, &x->alter, &x->a);
}

static void list_reassign_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    reassign_ctx_t *x = arg;
    st_meta_image_t *img = st_controller_image(ctl);
    st_list_reassignments(img, x->q, &x->list, &x->a);
    st_image_release(img);
}

static void reassign_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    reassign_ctx_t *x = arg;
    st_request_respond(req, req->api->key == ST_API_ALTER_PARTITION_REASSIGNMENTS ? (void *)&x->alter
                                                                                  : (void *)&x->list);
    st_arena_fini(&x->a);
    free(x);
}

static void reassign_via_controller(st_server_t *srv, st_request_t *req, st_ctl_work_fn work) {
    if (st_controller_forward(srv->ctl, req)) return;
    reassign_ctx_t *x = st_calloc(1, sizeof *x);
    x->q = req->body;
    st_arena_init(&x->a, 1024);
    st_server_via_controller(srv, req, work, reassign_done, x);
}

void st_handle_alter_partition_reassignments(st_server_t *srv, st_request_t *req) {
    reassign_via_controller(srv, req, reassign_work);
}

void st_handle_list_partition_reassignments(st_server_t *srv, st_request_t *req) {
    reassign_via_controller(srv, req, list_reassign_work);
}

/*
 * h_security.c - SaslHandshake and SaslAuthenticate (KIP-152;
 * re-authentication KIP-368), whose session is sec.c's; SCRAM credentials
 * (KIP-554) and ACLs, kept in the metadata log.
 *
 * SaslHandshake v1: the mechanism the client names must be one the
 * listener enables (else UNSUPPORTED_SASL_MECHANISM with the list, and the
 * connection closes after the failure delay); on an authenticated
 * connection it starts a re-authentication with the same mechanism.
 * SaslAuthenticate carries one token each way; the exchange's end sets
 * the principal, and its failure answers SASL_AUTHENTICATION_FAILED after
 * connection.failed.authentication.delay.ms, then closes.  On a listener
 * without SASL, or outside an exchange, both answer ILLEGAL_SASL_STATE, as
 * Kafka's KafkaApis does.
 */
#include "server.h"

#include <stdlib.h>

static void mechanisms_of(st_request_t *req, const st_listener_sec_t *ls,
                          st_sasl_handshake_resp_t *r) {
    int n = 0;
    for (int m = 1; m <= ST_SASL_PLAIN; m++) n += (ls->mechs >> m) & 1;
    ST_ARRAY_ALLOC(r->mechanisms, &req->arena, n);
    int k = 0;
    /* in the order Kafka lists them: PLAIN, then the SCRAMs */
    static const st_sasl_mech_t order[] = {ST_SASL_PLAIN, ST_SASL_SCRAM_SHA_256,
                                           ST_SASL_SCRAM_SHA_512};
    for (size_t i = 0; i < ST_ARRAY_SIZE(order); i++)
        if (ls->mechs & (1u << order[i])) r->mechanisms.v[k++] = st_str(st_sasl_mech_name(order[i]));
}

void st_handle_sasl_handshake(st_server_t *srv, st_request_t *req) {
    st_session_t *s = st_session_of(srv, req);
    const st_sasl_handshake_req_t *q = req->body;
    st_sasl_handshake_resp_t *r = st_arena_alloc(&req->arena, sizeof *r);
    st_schema_defaults(&st_sasl_handshake_resp_schema, r);
    if (!st_secproto_sasl(s->ls->proto) || s->sasl) {
        r->error_code = st_err_wire(ST_E_ILLEGAL_SASL_STATE);
        st_request_respond(req, r);
        return;
    }
    mechanisms_of(req, s->ls, r);
    char name[64];
    snprintf(name, sizeof name, "%.*s", q->mechanism.len > 0 ? (int)q->mechanism.len : 0,
             q->mechanism.p ? q->mechanism.p : "");
    st_sasl_mech_t m = st_sasl_mech_parse(name);
    if (m == ST_SASL_NONE || !(s->ls->mechs & (1u << m)) ||
        (size_t)q->mechanism.len >= sizeof name) {
        int skipped;
        if (st_log_allow("SaslHandshake mechanism", 1000, &skipped))
            ST_INFO("security", "failed authentication with %s: SASL mechanism '%s' is not enabled",
                    st_request_peer(req), name);
        (void)skipped;
        r->error_code = st_err_wire(ST_E_UNSUPPORTED_SASL_MECHANISM);
        st_session_fail_later(srv, req, r);
        return;
    }
    if (s->authenticated && m != s->mech) {
        /* KIP-368: a re-authentication keeps its mechanism */
        r->error_code = st_err_wire(ST_E_ILLEGAL_SASL_STATE);
        st_session_fail_later(srv, req, r);
        return;
    }
    s->sasl = st_sasl_server_new(m, &s->ls->ops);
    st_request_respond(req, r);
}

void st_handle_sasl_authenticate(st_server_t *srv, st_request_t *req) {
    st_session_t *s = st_session_of(srv, req);
    const st_sasl_authenticate_req_t *q = req->body;
    st_sasl_authenticate_resp_t *r = st_arena_alloc(&req->arena, sizeof *r);
    st_schema_defaults(&st_sasl_authenticate_resp_schema, r);
    if (!s->sasl) {
        /* before a handshake (or on a listener without SASL) */
        r->error_code = st_err_wire(ST_E_ILLEGAL_SASL_STATE);
        r->error_message = st_str(!st_secproto_sasl(s->ls->proto)
                                      ? "SaslAuthenticate on a listener without SASL"
                                  : s->authenticated
                                      ? "SaslAuthenticate after authentication succeeded"
                                      : "SaslAuthenticate before SaslHandshake");
        if (st_secproto_sasl(s->ls->proto) && !s->authenticated) st_session_fail_later(srv, req, r);
        else st_request_respond(req, r);
        return;
    }
    if (q->auth_bytes.len > srv->sec->sasl_server_max_receive_size) {
        st_request_close_conn(req, "SASL token larger than sasl.server.max.receive.size");
        st_request_no_response(req);
        return;
    }
    st_buf_t out;
    st_buf_init(&out);
    char why[256];
    st_sasl_step_t step = st_sasl_server_step(s->sasl, q->auth_bytes.p,
                                              (size_t)ST_MAX(q->auth_bytes.len, 0), &out, why,
                                              sizeof why);
    if (step == ST_SASL_DONE) {
        const char *user = st_sasl_server_user(s->sasl);
        st_sasl_mech_t m = st_sasl_server_mech(s->sasl);
        if (s->authenticated && strcmp(user, s->user)) {
            snprintf(why, sizeof why,
                     "re-authentication as %s on a connection of %s is not allowed", user,
                     s->user);
            step = ST_SASL_FAILED;
        } else {
            snprintf(s->user, sizeof s->user, "%s", user);
            snprintf(s->principal, sizeof s->principal, "User:%s", user);
            s->mech = m;
            int reauth = s->authenticated;
            s->authenticated = 1;
            int64_t life = s->ls->reauth_ms;
            s->expires_ms = life > 0 ? st_mono_ms() + life : 0;
            r->session_lifetime_ms = life > 0 ? life : 0;
            ST_LOG(reauth ? ST_LOG_DEBUG : ST_LOG_INFO, "security", "%s %s with %s as %s",
                   reauth ? "re-authenticated" : "authenticated", st_request_peer(req),
                   st_sasl_mech_name(m), s->principal);
            st_sasl_server_free(s->sasl);
            s->sasl = NULL;
        }
    }
    if (step == ST_SASL_FAILED) {
        int skipped;
        if (st_log_allow(why, 1000, &skipped))
            ST_INFO("security", "failed authentication with %s (%s)%s", st_request_peer(req), why,
                    skipped ? " (and more like it since the last such line)" : "");
        r->error_code = st_err_wire(ST_E_SASL_AUTHENTICATION_FAILED);
        r->error_message = st_str(st_arena_strndup(&req->arena, why, strlen(why)));
        st_buf_fini(&out);
        st_session_fail_later(srv, req, r);
        return;
    }
    uint8_t *bytes = st_arena_alloc(&req->arena, out.len ? out.len : 1);
    if (out.len) memcpy(bytes, out.data, out.len); /* PLAIN's answer is empty */
    r->auth_bytes.p = bytes;
    r->auth_bytes.len = (int32_t)out.len;
    st_buf_fini(&out);
    st_request_respond(req, r);
}

/* ---- SCRAM credentials (KIP-554) -------------------------------------------- */

/* A request carried out on the active controller's thread by `op`
 * (st_controller_alter_scram, _create_acls, _delete_acls: each fills an
 * answer of the API's response schema from the request's arena). */
typedef void (*ctl_op_fn)(st_controller_t *c, const void *q, void *r, st_arena_t *a);

typedef struct ctl_call {
    st_request_t *req;
    ctl_op_fn op;
    void *resp;
} ctl_call_t;

static void ctl_call_work(st_server_t *srv, st_controller_t *ctl, void *arg) {
    (void)srv;
    ctl_call_t *x = arg;
    x->resp = st_arena_alloc(&x->req->arena, x->req->api->resp->size);
    x->op(ctl, x->req->body, x->resp, &x->req->arena);
}

static void ctl_call_done(st_server_t *srv, st_request_t *req, void *arg) {
    (void)srv;
    st_request_respond(req, ((ctl_call_t *)arg)->resp);
}

/* The controller's operations in ctl_op_fn's shape (a call through a
 * cast function pointer of another type would be undefined). */
static void alter_scram_op(st_controller_t *c, const void *q, void *r, st_arena_t *a) {
    st_controller_alter_scram(c, q, r, a);
}
static void create_acls_op(st_controller_t *c, const void *q, void *r, st_arena_t *a) {
    st_controller_create_acls(c, q, r, a);
}
static void delete_acls_op(st_controller_t *c, const void *q, void *r, st_arena_t *a) {
    st_controller_delete_acls(c, q, r, a);
}

/* On the active controller (others forward it there). */
static void via_active_controller(st_server_t *srv, st_request_t *req, ctl_op_fn op) {
    if (st_controller_forward(srv->ctl, req)) return;
    ctl_call_t *x = st_arena_alloc(&req->arena, sizeof *x);
    x->req = req;
    x->op = op;
    st_server_via_controller(srv, req, ctl_call_work, ctl_call_done, x);
}

/* Every user named, refused with e. */
static void scram_refuse(st_request_t *req, st_err_t e) {
    const st_alter_scram_req_t *q = req->body;
    st_alter_scram_resp_t r;
    st_schema_defaults(&st_alter_scram_resp_schema, &r);
    int total = q->deletions.n + q->upsertions.n, n = 0;
    ST_ARRAY_ALLOC(r.results, &req->arena, total);
    for (int i = 0; i < total; i++) {
        st_str_t name = i < q->deletions.n ? q->deletions.v[i].name
                                           : q->upsertions.v[i - q->deletions.n].name;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++)
            seen = r.results.v[k].user.len == name.len &&
                   (name.len <= 0 || !memcmp(r.results.v[k].user.p, name.p, (size_t)name.len));
        if (seen) continue;
        st_schema_defaults(&st_alter_scram_result_schema, &r.results.v[n]);
        r.results.v[n].user = name;
        r.results.v[n].error_code = st_err_wire(e);
        n++;
    }
    r.results.n = n;
    st_request_respond(req, &r);
}

void st_handle_alter_user_scram_credentials(st_server_t *srv, st_request_t *req) {
    if (!st_authorized_cluster(srv, req, ST_ACL_OP_ALTER)) {
        scram_refuse(req, ST_E_CLUSTER_AUTHORIZATION_FAILED);
        return;
    }
    via_active_controller(srv, req, alter_scram_op);
}

void st_handle_describe_user_scram_credentials(st_server_t *srv, st_request_t *req) {
    st_describe_scram_resp_t r;
    st_meta_image_t *img = st_controller_image(srv->ctl);
    st_image_describe_scram(img, req->body, &r, &req->arena);
    st_image_release(img);
    st_request_respond(req, &r);
}

/* ---- ACLs --------------------------------------------------------------------- */

/* No authorizer: Kafka answers the ACL APIs SECURITY_DISABLED. */
static int acls_disabled(const st_server_t *srv) { return !*srv->sec->authorizer_class_name; }

/* Every result of a CreateAcls or DeleteAcls answered with one error. */
static void acls_refuse(st_request_t *req, st_err_t e) {
    void *r = st_arena_alloc(&req->arena, req->api->resp->size);
    st_schema_defaults(req->api->resp, r);
    if (req->api->key == ST_API_CREATE_ACLS) {
        const st_create_acls_req_t *q = req->body;
        st_create_acls_resp_t *cr = r;
        ST_ARRAY_ALLOC(cr->results, &req->arena, q->creations.n);
        for (int i = 0; i < q->creations.n; i++)
            st_schema_defaults(&st_acl_creation_result_schema, &cr->results.v[i]);
    } else {
        const st_delete_acls_req_t *q = req->body;
        st_delete_acls_resp_t *dr = r;
        ST_ARRAY_ALLOC(dr->filter_results, &req->arena, q->filters.n);
        for (int i = 0; i < q->filters.n; i++) {
            st_schema_defaults(&st_delete_acls_filter_result_schema, &dr->filter_results.v[i]);
            ST_ARRAY_ALLOC(dr->filter_results.v[i].matching_acls, &req->arena, 0);
        }
    }
    st_schema_set_errors(req->api->resp, r, st_err_wire(e));
    st_request_respond(req, r);
}

static void alter_acls(st_server_t *srv, st_request_t *req, ctl_op_fn op) {
    if (acls_disabled(srv)) {
        acls_refuse(req, ST_E_SECURITY_DISABLED);
        return;
    }
    if (!st_authorized_cluster(srv, req, ST_ACL_OP_ALTER)) {
        acls_refuse(req, ST_E_CLUSTER_AUTHORIZATION_FAILED);
        return;
    }
    via_active_controller(srv, req, op);
}

void st_handle_create_acls(st_server_t *srv, st_request_t *req) {
    alter_acls(srv, req, create_acls_op);
}

void st_handle_delete_acls(st_server_t *srv, st_request_t *req) {
    alter_acls(srv, req, delete_acls_op);
}

void st_handle_describe_acls(st_server_t *srv, st_request_t *req) {
    st_describe_acls_resp_t r;
    st_schema_defaults(&st_describe_acls_resp_schema, &r);
    ST_ARRAY_ALLOC(r.resources, &req->arena, 0);
    if (acls_disabled(srv)) {
        r.error_code = st_err_wire(ST_E_SECURITY_DISABLED);
        r.error_message = st_str("No authorizer is configured (authorizer.class.name)");
    } else if (!st_authorized_cluster(srv, req, ST_ACL_OP_DESCRIBE)) {
        r.error_code = st_err_wire(ST_E_CLUSTER_AUTHORIZATION_FAILED);
    } else {
        st_meta_image_t *img = st_controller_image(srv->ctl);
        st_image_describe_acls(img, req->body, &r, &req->arena);
        st_image_release(img);
    }
    st_request_respond(req, &r);
}

/*
 * acls.c - CreateAcls and DeleteAcls on the active controller, and
 * DescribeAcls from any node's image.
 *
 * A creation that is not a valid binding answers INVALID_REQUEST and the
 * others go on; one that is already there is a success that writes
 * nothing (Kafka's StandardAuthorizer).  Each binding gets a fresh id in
 * its AccessControlEntry record.  A deletion filter removes every binding
 * it matches (RemoveAccessControlEntry records by id, each once); all the
 * records of one request are one batch.
 */
#include "controller_int.h"

#include <stdlib.h>

static int active(const st_controller_t *c) {
    return c->raft && st_raft_role(c->raft) == ST_RAFT_LEADER && c->image;
}

static char *str_dup(st_str_t s) { return st_strndup(s.p ? s.p : "", (size_t)ST_MAX(s.len, 0)); }

static st_str_t arena_str(st_arena_t *a, const char *s) {
    return st_str(st_arena_strndup(a, s, strlen(s)));
}

static int same_binding(const st_acl_t *x, const st_acl_t *y) {
    return x->resource_type == y->resource_type && x->pattern_type == y->pattern_type &&
           x->operation == y->operation && x->permission == y->permission &&
           !strcmp(x->resource_name, y->resource_name) && !strcmp(x->principal, y->principal) &&
           !strcmp(x->host, y->host);
}

void st_controller_create_acls(st_controller_t *c, const st_create_acls_req_t *q,
                               st_create_acls_resp_t *r, st_arena_t *a) {
    st_schema_defaults(&st_create_acls_resp_schema, r);
    int n = q->creations.n;
    ST_ARRAY_ALLOC(r->results, a, n);
    st_ctl_rec_t *recs = st_arena_alloc(a, sizeof *recs * (size_t)(n + 1));
    st_mrec_acl_t *rows = st_arena_alloc(a, sizeof *rows * (size_t)(n + 1));
    const st_acl_t *have;
    int nhave;
    st_image_acls(c->image, &have, &nhave);
    int nrecs = 0;
    for (int i = 0; i < n; i++) {
        const st_acl_creation_t *x = &q->creations.v[i];
        st_acl_creation_result_t *out = &r->results.v[i];
        st_schema_defaults(&st_acl_creation_result_schema, out);
        if (!active(c)) {
            out->error_code = st_err_wire(ST_E_NOT_CONTROLLER);
            continue;
        }
        st_acl_t b = {{{0}}, x->resource_type, str_dup(x->resource_name), x->resource_pattern_type,
                      str_dup(x->principal), str_dup(x->host), x->operation, x->permission_type};
        char why[256];
        int dup = 0;
        if (st_acl_valid(&b, why, sizeof why)) {
            out->error_code = st_err_wire(ST_E_INVALID_REQUEST);
            out->error_message = arena_str(a, why);
        } else {
            for (int k = 0; k < nhave && !dup; k++) dup = same_binding(&have[k], &b);
            for (int k = 0; k < nrecs && !dup; k++) /* twice in this request */
                dup = rows[k].resource_type == b.resource_type &&
                      rows[k].pattern_type == b.pattern_type && rows[k].operation == b.operation &&
                      rows[k].permission_type == b.permission &&
                      st_str_eq(rows[k].resource_name, b.resource_name) &&
                      st_str_eq(rows[k].principal, b.principal) && st_str_eq(rows[k].host, b.host);
            if (!dup) {
                st_mrec_acl_t *row = &rows[nrecs];
                st_uuid_random(&row->id);
                row->resource_type = b.resource_type;
                row->resource_name = arena_str(a, b.resource_name);
                row->pattern_type = b.pattern_type;
                row->principal = arena_str(a, b.principal);
                row->host = arena_str(a, b.host);
                row->operation = b.operation;
                row->permission_type = b.permission;
                recs[nrecs] = (st_ctl_rec_t){ST_MREC_ACCESS_CONTROL_ENTRY, row};
                nrecs++;
            }
        }
        free(b.resource_name);
        free(b.principal);
        free(b.host);
    }
    if (!nrecs) return;
    st_err_t e = st_ctl__commit_records(c, recs, nrecs);
    if (e) {
        for (int i = 0; i < n; i++)
            if (!r->results.v[i].error_code) r->results.v[i].error_code = st_err_wire(e);
        return;
    }
    ST_INFO("controller", "ACLs: %d bindings created", nrecs);
}

/* A request's filter as the model's (strings point into the request). */
static st_acl_filter_t filter_of(st_arena_t *a, int8_t rt, st_str_t name, int8_t pat,
                                 st_str_t principal, st_str_t host, int8_t op, int8_t perm) {
    st_acl_filter_t f = {rt, name.len >= 0 ? st_arena_strndup(a, name.p ? name.p : "", (size_t)name.len) : NULL,
                         pat,
                         principal.len >= 0 ? st_arena_strndup(a, principal.p ? principal.p : "", (size_t)principal.len) : NULL,
                         host.len >= 0 ? st_arena_strndup(a, host.p ? host.p : "", (size_t)host.len) : NULL,
                         op, perm};
    return f;
}

void st_controller_delete_acls(st_controller_t *c, const st_delete_acls_req_t *q,
                               st_delete_acls_resp_t *r, st_arena_t *a) {
    st_schema_defaults(&st_delete_acls_resp_schema, r);
    int n = q->filters.n;
    ST_ARRAY_ALLOC(r->filter_results, a, n);
    const st_acl_t *have;
    int nhave;
    st_image_acls(c->image, &have, &nhave);
    char *gone = st_arena_alloc(a, (size_t)nhave + 1);
    st_ctl_rec_t *recs = st_arena_alloc(a, sizeof *recs * (size_t)(nhave + 1));
    st_mrec_remove_acl_t *rows = st_arena_alloc(a, sizeof *rows * (size_t)(nhave + 1));
    int nrecs = 0;
    for (int i = 0; i < n; i++) {
        const st_delete_acls_filter_t *x = &q->filters.v[i];
        st_delete_acls_filter_result_t *out = &r->filter_results.v[i];
        st_schema_defaults(&st_delete_acls_filter_result_schema, out);
        ST_ARRAY_ALLOC(out->matching_acls, a, 0);
        if (!active(c)) {
            out->error_code = st_err_wire(ST_E_NOT_CONTROLLER);
            continue;
        }
        st_acl_filter_t f = filter_of(a, x->resource_type_filter, x->resource_name_filter,
                                      x->pattern_type_filter, x->principal_filter, x->host_filter,
                                      x->operation, x->permission_type);
        char why[160];
        if (st_acl_filter_valid(&f, why, sizeof why)) {
            out->error_code = st_err_wire(ST_E_INVALID_REQUEST);
            out->error_message = arena_str(a, why);
            continue;
        }
        int m = 0;
        for (int k = 0; k < nhave; k++) m += st_acl_filter_matches(&f, &have[k]);
        ST_ARRAY_ALLOC(out->matching_acls, a, m);
        m = 0;
        for (int k = 0; k < nhave; k++) {
            if (!st_acl_filter_matches(&f, &have[k])) continue;
            st_delete_acls_matching_t *mm = &out->matching_acls.v[m++];
            st_schema_defaults(&st_delete_acls_matching_schema, mm);
            mm->resource_type = have[k].resource_type;
            mm->resource_name = arena_str(a, have[k].resource_name);
            mm->pattern_type = have[k].pattern_type;
            mm->principal = arena_str(a, have[k].principal);
            mm->host = arena_str(a, have[k].host);
            mm->operation = have[k].operation;
            mm->permission_type = have[k].permission;
            if (!gone[k]) {
                gone[k] = 1;
                rows[nrecs].id = have[k].id;
                recs[nrecs] = (st_ctl_rec_t){ST_MREC_REMOVE_ACCESS_CONTROL_ENTRY, &rows[nrecs]};
                nrecs++;
            }
        }
    }
    if (!nrecs) return;
    st_err_t e = st_ctl__commit_records(c, recs, nrecs);
    if (e) {
        for (int i = 0; i < n; i++) {
            r->filter_results.v[i].error_code = st_err_wire(e);
            r->filter_results.v[i].matching_acls.n = 0;
        }
        return;
    }
    ST_INFO("controller", "ACLs: %d bindings deleted", nrecs);
}

void st_image_describe_acls(const st_meta_image_t *img, const st_describe_acls_req_t *q,
                            st_describe_acls_resp_t *r, st_arena_t *a) {
    st_schema_defaults(&st_describe_acls_resp_schema, r);
    ST_ARRAY_ALLOC(r->resources, a, 0);
    st_acl_filter_t f = filter_of(a, q->resource_type_filter, q->resource_name_filter,
                                  q->pattern_type_filter, q->principal_filter, q->host_filter,
                                  q->operation, q->permission_type);
    char why[160];
    if (st_acl_filter_valid(&f, why, sizeof why)) {
        r->error_code = st_err_wire(ST_E_INVALID_REQUEST);
        r->error_message = arena_str(a, why);
        return;
    }
    const st_acl_t *have;
    int nhave;
    st_image_acls(img, &have, &nhave);
    /* one resource entry per (type, name, pattern), in first-seen order */
    int *res_of = st_arena_alloc(a, sizeof(int) * (size_t)(nhave + 1));
    int nres = 0;
    int *first = st_arena_alloc(a, sizeof(int) * (size_t)(nhave + 1));
    for (int k = 0; k < nhave; k++) {
        res_of[k] = -1;
        if (!st_acl_filter_matches(&f, &have[k])) continue;
        for (int j = 0; j < nres && res_of[k] < 0; j++) {
            const st_acl_t *o = &have[first[j]];
            if (o->resource_type == have[k].resource_type && o->pattern_type == have[k].pattern_type &&
                !strcmp(o->resource_name, have[k].resource_name))
                res_of[k] = j;
        }
        if (res_of[k] < 0) {
            first[nres] = k;
            res_of[k] = nres++;
        }
    }
    ST_ARRAY_ALLOC(r->resources, a, nres);
    for (int j = 0; j < nres; j++) {
        st_describe_acls_resource_t *out = &r->resources.v[j];
        const st_acl_t *o = &have[first[j]];
        st_schema_defaults(&st_describe_acls_resource_schema, out);
        out->resource_type = o->resource_type;
        out->resource_name = arena_str(a, o->resource_name);
        out->pattern_type = o->pattern_type;
        int cnt = 0;
        for (int k = 0; k < nhave; k++) cnt += res_of[k] == j;
        ST_ARRAY_ALLOC(out->acls, a, cnt);
        cnt = 0;
        for (int k = 0; k < nhave; k++) {
            if (res_of[k] != j) continue;
            st_acl_description_t *d = &out->acls.v[cnt++];
            d->principal = arena_str(a, have[k].principal);
            d->host = arena_str(a, have[k].host);
            d->operation = have[k].operation;
            d->permission_type = have[k].permission;
        }
    }
}

/*
 * acls.c - strata acls: ACL bindings (CreateAcls, DeleteAcls, DescribeAcls),
 * with kafka-acls.sh's options.
 *
 *   add    --allow-principal P | --deny-principal P   (repeatable)
 *          [--allow-host H | --deny-host H]           (default *)
 *          --operation OP ...                         (repeatable)
 *          (--topic T | --group G | --cluster | --transactional-id T)
 *          [--resource-pattern-type literal|prefixed]
 *   remove the same, as a filter (an option left out matches anything;
 *          --resource-pattern-type any|match|literal|prefixed)
 *   list   [--principal P] [resource options]
 */
#include "cli_int.h"

#include <stdlib.h>

void st_cli_acls_usage(FILE *out) {
    fprintf(out,
            "strata acls ... add (--allow-principal P | --deny-principal P) [--allow-host H] "
            "[--deny-host H] --operation OP [--operation OP ...] (--topic T | --group G | "
            "--cluster | --transactional-id T) [--resource-pattern-type literal|prefixed]\n"
            "strata acls ... remove [the same options, as a filter]\n"
            "strata acls ... list [--principal P] [--topic T | --group G | --cluster | "
            "--transactional-id T] [--resource-pattern-type any|match|literal|prefixed]\n"
            "  operations: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
            "DescribeConfigs, AlterConfigs, IdempotentWrite\n");
}

#define MAX_ITEMS 16

typedef struct acl_args {
    const char *principals[MAX_ITEMS];
    int8_t perms[MAX_ITEMS];
    int nprincipals;
    const char *host;
    int8_t ops[MAX_ITEMS];
    int nops;
    int8_t rtype;
    const char *rname;
    int8_t pattern;
} acl_args_t;

static int parse(int argc, char **argv, acl_args_t *a, int filter) {
    memset(a, 0, sizeof *a);
    a->rtype = filter ? ST_ACL_RES_ANY : ST_ACL_RES_UNKNOWN;
    a->pattern = filter ? ST_ACL_PAT_ANY : ST_ACL_PAT_LITERAL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--cluster")) {
            a->rtype = ST_ACL_RES_CLUSTER;
            a->rname = ST_ACL_CLUSTER_NAME;
            continue;
        }
        if (!v) {
            fprintf(stderr, "strata acls: %s needs a value\n", o);
            return -1;
        }
        i++;
        if (!strcmp(o, "--allow-principal") || !strcmp(o, "--deny-principal") ||
            !strcmp(o, "--principal")) {
            if (a->nprincipals == MAX_ITEMS) return -1;
            a->perms[a->nprincipals] = !strcmp(o, "--deny-principal") ? ST_ACL_PERM_DENY
                                       : !strcmp(o, "--allow-principal") ? ST_ACL_PERM_ALLOW
                                                                         : ST_ACL_PERM_ANY;
            a->principals[a->nprincipals++] = v;
        } else if (!strcmp(o, "--allow-host") || !strcmp(o, "--deny-host")) {
            a->host = v;
        } else if (!strcmp(o, "--operation")) {
            int op = st_acl_op_parse(v);
            if (!op || a->nops == MAX_ITEMS) {
                fprintf(stderr, "strata acls: --operation %s is not an operation\n", v);
                return -1;
            }
            a->ops[a->nops++] = (int8_t)op;
        } else if (!strcmp(o, "--topic") || !strcmp(o, "--group") ||
                   !strcmp(o, "--transactional-id")) {
            a->rtype = !strcmp(o, "--topic")   ? ST_ACL_RES_TOPIC
                       : !strcmp(o, "--group") ? ST_ACL_RES_GROUP
                                               : ST_ACL_RES_TRANSACTIONAL_ID;
            a->rname = v;
        } else if (!strcmp(o, "--resource-pattern-type")) {
            a->pattern = (int8_t)st_acl_pattern_parse(v);
            if (!a->pattern) {
                fprintf(stderr, "strata acls: --resource-pattern-type %s is not any, match, "
                                "literal or prefixed\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "strata acls: unknown option %s\n", o);
            return -1;
        }
    }
    return 0;
}

static int cmd_add(const st_cli_ctx_t *ctx, int argc, char **argv, st_arena_t *a) {
    acl_args_t x;
    if (parse(argc, argv, &x, 0) || !x.nprincipals || !x.nops || !x.rname) {
        st_cli_acls_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    st_create_acls_req_t q;
    st_schema_defaults(&st_create_acls_req_schema, &q);
    ST_ARRAY_ALLOC(q.creations, a, x.nprincipals * x.nops);
    int k = 0;
    for (int p = 0; p < x.nprincipals; p++)
        for (int o = 0; o < x.nops; o++) {
            st_acl_creation_t *c = &q.creations.v[k++];
            st_schema_defaults(&st_acl_creation_schema, c);
            c->resource_type = x.rtype;
            c->resource_name = st_str(x.rname);
            c->resource_pattern_type = x.pattern;
            c->principal = st_str(x.principals[p]);
            c->host = st_str(x.host ? x.host : "*");
            c->operation = x.ops[o];
            c->permission_type = x.perms[p];
        }
    st_create_acls_resp_t *r = NULL;
    char err[1024];
    if (st_cli_bootstrap_call(ctx, ST_API_CREATE_ACLS, 3, &q, a, (void **)&r, err, sizeof err)) {
        fprintf(stderr, "strata acls: %s\n", err);
        return ST_CLI_EXIT_FAIL;
    }
    int rc = ST_CLI_EXIT_OK;
    for (int i = 0; i < r->results.n && i < k; i++) {
        const st_acl_creation_t *c = &q.creations.v[i];
        const st_acl_creation_result_t *res = &r->results.v[i];
        if (res->error_code) {
            fprintf(stderr, "strata acls: %s %s on %s %s: %s %.*s\n", st_acl_perm_name(c->permission_type),
                    st_acl_op_name(c->operation), st_acl_resource_name(c->resource_type),
                    x.rname, st_err_name(st_err_from_wire(res->error_code)),
                    (int)ST_MAX(res->error_message.len, 0),
                    res->error_message.p ? res->error_message.p : "");
            rc = ST_CLI_EXIT_FAIL;
        } else {
            printf("added: %s %s %s from host %s on %s %s (%s)\n", x.principals[i / x.nops],
                   st_acl_perm_name(c->permission_type), st_acl_op_name(c->operation),
                   x.host ? x.host : "*", st_acl_resource_name(c->resource_type), x.rname,
                   st_acl_pattern_name(c->resource_pattern_type));
        }
    }
    return rc;
}

static int cmd_remove(const st_cli_ctx_t *ctx, int argc, char **argv, st_arena_t *a) {
    acl_args_t x;
    if (parse(argc, argv, &x, 1)) {
        st_cli_acls_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    int np = x.nprincipals ? x.nprincipals : 1, no = x.nops ? x.nops : 1;
    st_delete_acls_req_t q;
    st_schema_defaults(&st_delete_acls_req_schema, &q);
    ST_ARRAY_ALLOC(q.filters, a, np * no);
    int k = 0;
    for (int p = 0; p < np; p++)
        for (int o = 0; o < no; o++) {
            st_delete_acls_filter_t *f = &q.filters.v[k++];
            st_schema_defaults(&st_delete_acls_filter_schema, f);
            f->resource_type_filter = x.rtype;
            f->resource_name_filter = x.rname ? st_str(x.rname) : ST_STR_NULL;
            f->pattern_type_filter = x.pattern;
            f->principal_filter = x.nprincipals ? st_str(x.principals[p]) : ST_STR_NULL;
            f->host_filter = x.host ? st_str(x.host) : ST_STR_NULL;
            f->operation = x.nops ? x.ops[o] : ST_ACL_OP_ANY;
            f->permission_type = x.nprincipals ? x.perms[p] : ST_ACL_PERM_ANY;
        }
    st_delete_acls_resp_t *r = NULL;
    char err[1024];
    if (st_cli_bootstrap_call(ctx, ST_API_DELETE_ACLS, 3, &q, a, (void **)&r, err, sizeof err)) {
        fprintf(stderr, "strata acls: %s\n", err);
        return ST_CLI_EXIT_FAIL;
    }
    int rc = ST_CLI_EXIT_OK, removed = 0;
    for (int i = 0; i < r->filter_results.n; i++) {
        const st_delete_acls_filter_result_t *fr = &r->filter_results.v[i];
        if (fr->error_code) {
            fprintf(stderr, "strata acls: %s %.*s\n", st_err_name(st_err_from_wire(fr->error_code)),
                    (int)ST_MAX(fr->error_message.len, 0), fr->error_message.p ? fr->error_message.p : "");
            rc = ST_CLI_EXIT_FAIL;
            continue;
        }
        for (int j = 0; j < fr->matching_acls.n; j++) {
            const st_delete_acls_matching_t *m = &fr->matching_acls.v[j];
            printf("removed: %.*s %s %s from host %.*s on %s %.*s (%s)\n", (int)m->principal.len,
                   m->principal.p, st_acl_perm_name(m->permission_type), st_acl_op_name(m->operation),
                   (int)m->host.len, m->host.p, st_acl_resource_name(m->resource_type),
                   (int)m->resource_name.len, m->resource_name.p, st_acl_pattern_name(m->pattern_type));
            removed++;
        }
    }
    if (!rc && !removed) printf("no binding matched\n");
    return rc;
}

static int cmd_list(const st_cli_ctx_t *ctx, int argc, char **argv, st_arena_t *a) {
    acl_args_t x;
    if (parse(argc, argv, &x, 1) || x.nprincipals > 1) {
        st_cli_acls_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    st_describe_acls_req_t q;
    st_schema_defaults(&st_describe_acls_req_schema, &q);
    q.resource_type_filter = x.rtype;
    q.resource_name_filter = x.rname ? st_str(x.rname) : ST_STR_NULL;
    q.pattern_type_filter = x.pattern;
    q.principal_filter = x.nprincipals ? st_str(x.principals[0]) : ST_STR_NULL;
    q.host_filter = x.host ? st_str(x.host) : ST_STR_NULL;
    q.operation = x.nops ? x.ops[0] : ST_ACL_OP_ANY;
    q.permission_type = ST_ACL_PERM_ANY;
    st_describe_acls_resp_t *r = NULL;
    char err[1024];
    if (st_cli_bootstrap_call(ctx, ST_API_DESCRIBE_ACLS, 3, &q, a, (void **)&r, err, sizeof err)) {
        fprintf(stderr, "strata acls: %s\n", err);
        return ST_CLI_EXIT_FAIL;
    }
    if (r->error_code) {
        fprintf(stderr, "strata acls: %s %.*s\n", st_err_name(st_err_from_wire(r->error_code)),
                (int)ST_MAX(r->error_message.len, 0), r->error_message.p ? r->error_message.p : "");
        return ST_CLI_EXIT_FAIL;
    }
    printf("%-16s %-24s %-9s %-24s %-16s %-15s %s\n", "RESOURCE-TYPE", "RESOURCE", "PATTERN",
           "PRINCIPAL", "HOST", "OPERATION", "PERMISSION");
    for (int i = 0; i < r->resources.n; i++) {
        const st_describe_acls_resource_t *res = &r->resources.v[i];
        for (int j = 0; j < res->acls.n; j++) {
            const st_acl_description_t *d = &res->acls.v[j];
            printf("%-16s %-24.*s %-9s %-24.*s %-16.*s %-15s %s\n",
                   st_acl_resource_name(res->resource_type), (int)res->resource_name.len,
                   res->resource_name.p, st_acl_pattern_name(res->pattern_type),
                   (int)d->principal.len, d->principal.p, (int)d->host.len, d->host.p,
                   st_acl_op_name(d->operation), st_acl_perm_name(d->permission_type));
        }
    }
    return ST_CLI_EXIT_OK;
}

int st_cli_acls(const st_cli_ctx_t *ctx, int argc, char **argv) {
    if (argc < 1) {
        st_cli_acls_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    st_arena_t a;
    st_arena_init(&a, 4096);
    int rc;
    if (!strcmp(argv[0], "add")) rc = cmd_add(ctx, argc, argv, &a);
    else if (!strcmp(argv[0], "remove")) rc = cmd_remove(ctx, argc, argv, &a);
    else if (!strcmp(argv[0], "list")) rc = cmd_list(ctx, argc, argv, &a);
    else {
        st_cli_acls_usage(stderr);
        rc = ST_CLI_EXIT_USAGE;
    }
    st_arena_fini(&a);
    return rc;
}

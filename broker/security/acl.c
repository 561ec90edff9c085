/*
 * acl.c - ACL bindings, filters and the authorizer's decision (acl.h).
 */
#include "acl.h"

#include <string.h>
#include <strings.h>

static const char *const resources[] = {"Unknown", "Any", "Topic", "Group", "Cluster",
                                        "TransactionalId", "DelegationToken", "User"};
static const char *const patterns[] = {"Unknown", "Any", "Match", "Literal", "Prefixed"};
static const char *const ops[] = {"Unknown", "Any", "All", "Read", "Write", "Create", "Delete",
                                  "Alter", "Describe", "ClusterAction", "DescribeConfigs",
                                  "AlterConfigs", "IdempotentWrite", "CreateTokens",
                                  "DescribeTokens"};
static const char *const perms[] = {"Unknown", "Any", "Deny", "Allow"};

static const char *name_of(const char *const *v, int n, int i) { return i >= 0 && i < n ? v[i] : "Unknown"; }
static int parse_of(const char *const *v, int n, const char *s) {
    for (int i = 0; s && i < n; i++)
        if (!strcasecmp(s, v[i])) return i;
    return 0;
}

const char *st_acl_resource_name(int t) { return name_of(resources, (int)ST_ARRAY_SIZE(resources), t); }
const char *st_acl_pattern_name(int p) { return name_of(patterns, (int)ST_ARRAY_SIZE(patterns), p); }
const char *st_acl_op_name(int op) { return name_of(ops, (int)ST_ARRAY_SIZE(ops), op); }
const char *st_acl_perm_name(int p) { return name_of(perms, (int)ST_ARRAY_SIZE(perms), p); }
int st_acl_resource_parse(const char *s) { return parse_of(resources, (int)ST_ARRAY_SIZE(resources), s); }
int st_acl_pattern_parse(const char *s) { return parse_of(patterns, (int)ST_ARRAY_SIZE(patterns), s); }
int st_acl_op_parse(const char *s) { return parse_of(ops, (int)ST_ARRAY_SIZE(ops), s); }
int st_acl_perm_parse(const char *s) { return parse_of(perms, (int)ST_ARRAY_SIZE(perms), s); }

static int in_range(int v, int lo, int hi) { return v >= lo && v <= hi; }

int st_acl_valid(const st_acl_t *a, char *why, size_t whylen) {
    if (!in_range(a->resource_type, ST_ACL_RES_TOPIC, ST_ACL_RES_USER)) {
        snprintf(why, whylen, "resource type %d is not one a binding may name", a->resource_type);
        return -1;
    }
    if (a->pattern_type != ST_ACL_PAT_LITERAL && a->pattern_type != ST_ACL_PAT_PREFIXED) {
        snprintf(why, whylen, "pattern type %d: a binding is LITERAL or PREFIXED", a->pattern_type);
        return -1;
    }
    if (!a->resource_name || !*a->resource_name) {
        snprintf(why, whylen, "the resource name is empty");
        return -1;
    }
    if (a->resource_type == ST_ACL_RES_CLUSTER && strcmp(a->resource_name, ST_ACL_CLUSTER_NAME)) {
        snprintf(why, whylen, "the cluster resource is named %s", ST_ACL_CLUSTER_NAME);
        return -1;
    }
    const char *colon = a->principal ? strchr(a->principal, ':') : NULL;
    if (!colon || colon == a->principal || !colon[1]) {
        snprintf(why, whylen, "principal '%s' is not Type:name (User:alice)",
                 a->principal ? a->principal : "");
        return -1;
    }
    if (!a->host || !*a->host) {
        snprintf(why, whylen, "the host is empty (\"*\" is every host)");
        return -1;
    }
    if (!in_range(a->operation, ST_ACL_OP_ALL, ST_ACL_OP_DESCRIBE_TOKENS)) {
        snprintf(why, whylen, "operation %d is not one a binding may name", a->operation);
        return -1;
    }
    if (a->permission != ST_ACL_PERM_ALLOW && a->permission != ST_ACL_PERM_DENY) {
        snprintf(why, whylen, "permission %d is not ALLOW or DENY", a->permission);
        return -1;
    }
    return 0;
}

int st_acl_filter_valid(const st_acl_filter_t *f, char *why, size_t whylen) {
    if (!in_range(f->resource_type, ST_ACL_RES_ANY, ST_ACL_RES_USER) ||
        !in_range(f->pattern_type, ST_ACL_PAT_ANY, ST_ACL_PAT_PREFIXED) ||
        !in_range(f->operation, ST_ACL_OP_ANY, ST_ACL_OP_DESCRIBE_TOKENS) ||
        !in_range(f->permission, ST_ACL_PERM_ANY, ST_ACL_PERM_ALLOW)) {
        snprintf(why, whylen, "the filter has an unknown resource type, pattern, operation or "
                              "permission");
        return -1;
    }
    return 0;
}

/* A binding's resource pattern against one concrete resource name. */
static int pattern_covers(const st_acl_t *a, const char *name, size_t len) {
    if (a->pattern_type == ST_ACL_PAT_LITERAL)
        return !strcmp(a->resource_name, ST_ACL_WILDCARD) ||
               (strlen(a->resource_name) == len && !memcmp(a->resource_name, name, len));
    if (a->pattern_type == ST_ACL_PAT_PREFIXED) {
        size_t pl = strlen(a->resource_name);
        return pl <= len && !memcmp(a->resource_name, name, pl);
    }
    return 0;
}

int st_acl_filter_matches(const st_acl_filter_t *f, const st_acl_t *a) {
    if (f->resource_type != ST_ACL_RES_ANY && f->resource_type != a->resource_type) return 0;
    if (f->pattern_type == ST_ACL_PAT_MATCH) {
        /* the bindings that would apply to the named resource */
        if (f->resource_name && !pattern_covers(a, f->resource_name, strlen(f->resource_name)))
            return 0;
    } else {
        if (f->pattern_type != ST_ACL_PAT_ANY && f->pattern_type != a->pattern_type) return 0;
        if (f->resource_name && strcmp(f->resource_name, a->resource_name)) return 0;
    }
    if (f->principal && strcmp(f->principal, a->principal)) return 0;
    if (f->host && strcmp(f->host, a->host)) return 0;
    if (f->operation != ST_ACL_OP_ANY && f->operation != a->operation) return 0;
    if (f->permission != ST_ACL_PERM_ANY && f->permission != a->permission) return 0;
    return 1;
}

static int is_super(const char *list, const char *principal) {
    if (!list || !*list) return 0;
    size_t pl = strlen(principal);
    for (const char *p = list; *p;) {
        while (*p == ';' || *p == ' ') p++;
        const char *e = p;
        while (*e && *e != ';') e++;
        const char *t = e;
        while (t > p && t[-1] == ' ') t--;
        if ((size_t)(t - p) == pl && !memcmp(p, principal, pl)) return 1;
        p = e;
    }
    return 0;
}

/* Whether a binding's operation grants (or, for DENY, refuses) op. */
static int op_covers(int8_t bound, int8_t op, int allow) {
    if (bound == ST_ACL_OP_ALL || bound == op) return 1;
    if (!allow) return 0; /* a DENY refuses what it names (and ALL) only */
    if (op == ST_ACL_OP_DESCRIBE)
        return bound == ST_ACL_OP_READ || bound == ST_ACL_OP_WRITE || bound == ST_ACL_OP_DELETE ||
               bound == ST_ACL_OP_ALTER;
    if (op == ST_ACL_OP_DESCRIBE_CONFIGS) return bound == ST_ACL_OP_ALTER_CONFIGS;
    return 0;
}

int st_acl_authorize(const st_acl_set_t *set, const st_acl_action_t *act) {
    if (is_super(set->super_users, act->principal)) return 1;
    int named = 0, allowed = 0;
    for (int i = 0; i < set->n; i++) {
        const st_acl_t *a = &set->acls[i];
        if (a->resource_type != act->resource_type ||
            !pattern_covers(a, act->resource_name, act->resource_len))
            continue;
        named = 1;
        if (strcmp(a->principal, act->principal) && strcmp(a->principal, "User:*")) continue;
        if (strcmp(a->host, ST_ACL_WILDCARD) && strcmp(a->host, act->host)) continue;
        int allow = a->permission == ST_ACL_PERM_ALLOW;
        if (!op_covers(a->operation, act->operation, allow)) continue;
        if (!allow) return 0; /* deny wins */
        allowed = 1;
    }
    if (allowed) return 1;
    return !named && set->allow_if_none;
}

int st_acl_authorize_any(const st_acl_set_t *set, const char *principal, const char *host,
                         int8_t op, int8_t rtype) {
    if (is_super(set->super_users, principal)) return 1;
    int named = 0, allowed = 0;
    for (int i = 0; i < set->n; i++) {
        const st_acl_t *a = &set->acls[i];
        if (a->resource_type != rtype) continue;
        named = 1;
        if (strcmp(a->principal, principal) && strcmp(a->principal, "User:*")) continue;
        if (strcmp(a->host, ST_ACL_WILDCARD) && strcmp(a->host, host)) continue;
        int allow = a->permission == ST_ACL_PERM_ALLOW;
        if (!op_covers(a->operation, op, allow)) continue;
        if (!allow) {
            /* a DENY of every resource of the type refuses them all */
            int all = (a->pattern_type == ST_ACL_PAT_LITERAL && !strcmp(a->resource_name, ST_ACL_WILDCARD)) ||
                      (a->pattern_type == ST_ACL_PAT_PREFIXED && !*a->resource_name);
            if (all) return 0;
            continue;
        }
        allowed = 1;
    }
    return allowed || (!named && set->allow_if_none);
}

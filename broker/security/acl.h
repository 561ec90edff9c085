/*
 * acl.h - Kafka's ACL model and its authorizer's decision (the
 * StandardAuthorizer's rules), without I/O: the broker keeps the bindings
 * (AccessControlEntry records in the metadata log) and asks here.
 *
 * A binding: resource (type, name, pattern LITERAL or PREFIXED), principal
 * ("User:alice", "User:*"), host ("*" or an address), operation,
 * permission (ALLOW / DENY).  A request's action: principal, host,
 * operation, resource type and name.  The decision:
 *
 *   1. a super user (super.users) may do anything;
 *   2. a DENY binding that matches the action refuses it, whatever allows it;
 *   3. an ALLOW binding that matches allows it; READ, WRITE, DELETE and
 *      ALTER each imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS,
 *      and ALL matches every operation;
 *   4. otherwise, when no binding at all names the resource (for anyone),
 *      allow.everyone.if.no.acl.found decides; else it is refused.
 *
 * A binding matches a resource when its type is the resource's and its
 * name is the resource's (LITERAL), is "*" (LITERAL: every resource of the
 * type), or begins the resource's name (PREFIXED).
 */
#ifndef ST_ACL_H
#define ST_ACL_H

#include "st_base.h"

/* The numbers are Kafka's (AclResourceType, PatternType, AclOperation,
 * AclPermissionType): they travel in requests and records. */
enum st_acl_resource {
    ST_ACL_RES_UNKNOWN = 0,
    ST_ACL_RES_ANY = 1,
    ST_ACL_RES_TOPIC = 2,
    ST_ACL_RES_GROUP = 3,
    ST_ACL_RES_CLUSTER = 4,
    ST_ACL_RES_TRANSACTIONAL_ID = 5,
    ST_ACL_RES_DELEGATION_TOKEN = 6,
    ST_ACL_RES_USER = 7
};
enum st_acl_pattern {
    ST_ACL_PAT_UNKNOWN = 0,
    ST_ACL_PAT_ANY = 1,
    ST_ACL_PAT_MATCH = 2,
    ST_ACL_PAT_LITERAL = 3,
    ST_ACL_PAT_PREFIXED = 4
};
enum st_acl_op {
    ST_ACL_OP_UNKNOWN = 0,
    ST_ACL_OP_ANY = 1,
    ST_ACL_OP_ALL = 2,
    ST_ACL_OP_READ = 3,
    ST_ACL_OP_WRITE = 4,
    ST_ACL_OP_CREATE = 5,
    ST_ACL_OP_DELETE = 6,
    ST_ACL_OP_ALTER = 7,
    ST_ACL_OP_DESCRIBE = 8,
    ST_ACL_OP_CLUSTER_ACTION = 9,
    ST_ACL_OP_DESCRIBE_CONFIGS = 10,
    ST_ACL_OP_ALTER_CONFIGS = 11,
    ST_ACL_OP_IDEMPOTENT_WRITE = 12,
    ST_ACL_OP_CREATE_TOKENS = 13,
    ST_ACL_OP_DESCRIBE_TOKENS = 14
};
enum st_acl_perm { ST_ACL_PERM_UNKNOWN = 0, ST_ACL_PERM_ANY = 1, ST_ACL_PERM_DENY = 2, ST_ACL_PERM_ALLOW = 3 };

#define ST_ACL_CLUSTER_NAME "kafka-cluster"
#define ST_ACL_WILDCARD "*"

/* One binding; strings are owned by whoever holds the binding. */
typedef struct st_acl {
    st_uuid_t id;
    int8_t resource_type;
    char *resource_name;
    int8_t pattern_type;
    char *principal;
    char *host;
    int8_t operation;
    int8_t permission;
} st_acl_t;

/* A filter (DescribeAcls, DeleteAcls): ANY types match all; NULL strings
 * match all; pattern MATCH matches the bindings that would apply to the
 * named resource (LITERAL equal, LITERAL "*", PREFIXED prefixes). */
typedef struct st_acl_filter {
    int8_t resource_type;
    const char *resource_name; /* NULL: any */
    int8_t pattern_type;
    const char *principal; /* NULL: any */
    const char *host;      /* NULL: any */
    int8_t operation;
    int8_t permission;
} st_acl_filter_t;

/* Names as kafka-acls.sh prints them ("Topic", "Read", "Allow", ...) and
 * reads them (any case; "Cluster", "TransactionalId", "Prefixed"). */
const char *st_acl_resource_name(int t);
const char *st_acl_pattern_name(int p);
const char *st_acl_op_name(int op);
const char *st_acl_perm_name(int p);
int st_acl_resource_parse(const char *s);
int st_acl_pattern_parse(const char *s);
int st_acl_op_parse(const char *s);
int st_acl_perm_parse(const char *s);

/* Whether a binding to be created is well formed: known types, a
 * concrete pattern (LITERAL or PREFIXED), a principal "Type:name", an
 * operation that is not ANY or UNKNOWN, ALLOW or DENY, a non-empty
 * name, the cluster's name for CLUSTER.  0, or -1 with why. */
int st_acl_valid(const st_acl_t *a, char *why, size_t whylen);
/* Whether a filter is usable (no UNKNOWN anywhere). */
int st_acl_filter_valid(const st_acl_filter_t *f, char *why, size_t whylen);
int st_acl_filter_matches(const st_acl_filter_t *f, const st_acl_t *a);

/* The decision for one action. */
typedef struct st_acl_action {
    const char *principal; /* "User:alice" */
    const char *host;      /* the client's address */
    int8_t operation;
    int8_t resource_type;
    const char *resource_name;
    size_t resource_len;
} st_acl_action_t;

typedef struct st_acl_set {
    const st_acl_t *acls;
    int n;
    const char *super_users; /* super.users: "User:a;User:b" */
    int allow_if_none;       /* allow.everyone.if.no.acl.found */
} st_acl_set_t;

/* 1 allowed, 0 refused. */
int st_acl_authorize(const st_acl_set_t *set, const st_acl_action_t *act);
/* Whether op is allowed on some resource of rtype (Kafka's
 * authorizeByResourceType, KIP-679: an idempotent producer needs WRITE on
 * any topic): an ALLOW binding of the type for the principal, and no DENY
 * of every resource of it. */
int st_acl_authorize_any(const st_acl_set_t *set, const char *principal, const char *host,
                         int8_t op, int8_t rtype);

#endif /* ST_ACL_H */

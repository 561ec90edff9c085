/*
 * reassign.c - `strata topics reassign`: move partitions between brokers
 * (KIP-455, what kafka-reassign-partitions.sh --execute / --verify /
 * --cancel do), through the bootstrap broker, which passes the requests on
 * to the active controller.
 *
 *   reassign TOPIC:P=B1,B2,... [...] [--wait] [--timeout SECONDS]
 *       AlterPartitionReassignments: each partition to those brokers (the
 *       first is its preferred leader).  With --wait, ListPartitionReassignments
 *       every half second until none of them is in progress, printing each
 *       change (replicas, adding, removing) and at the end where each one
 *       is: replicas, ISR and leader (Metadata).
 *   reassign TOPIC:P [...] --cancel
 *       back to the replicas each had before its reassignment.
 *   reassign --list
 *       every reassignment in progress.
 *
 * A partition the controller refuses is printed with Kafka's error name
 * and message, and the command exits 1 after the others.
 */
#include "cli_int.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct want {
    char topic[256];
    int32_t partition;
    int32_t replicas[64];
    int nreplicas; /* -1: cancel */
} want_t;

/* "TOPIC:P=1,2,3" (or "TOPIC:P" with cancel); 0 when well formed. */
static int parse_want(const char *s, int cancel, want_t *w, char *err, size_t n) {
    const char *eq = strchr(s, '=');
    const char *end = eq ? eq : s + strlen(s);
    const char *colon = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == ':') colon = p;
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof w->topic || colon + 1 == end) {
        snprintf(err, n, "'%s': want TOPIC:PARTITION%s", s, cancel ? "" : "=BROKER,BROKER,...");
        return 1;
    }
    memcpy(w->topic, s, (size_t)(colon - s));
    w->topic[colon - s] = 0;
    char *stop;
    long part = strtol(colon + 1, &stop, 10);
    if (stop != end || part < 0 || part > INT32_MAX) {
        snprintf(err, n, "'%s': the partition is not a number", s);
        return 1;
    }
    w->partition = (int32_t)part;
    w->nreplicas = -1;
    if (cancel) {
        if (eq) {
            snprintf(err, n, "'%s': --cancel takes TOPIC:PARTITION only", s);
            return 1;
        }
        return 0;
    }
    if (!eq || !eq[1]) {
        snprintf(err, n, "'%s': want TOPIC:PARTITION=BROKER,BROKER,...", s);
        return 1;
    }
    w->nreplicas = 0;
    for (const char *p = eq + 1;;) {
        long id = strtol(p, &stop, 10);
        if (stop == p || id < 0 || id > INT32_MAX || (*stop && *stop != ',') ||
            w->nreplicas == (int)(sizeof w->replicas / sizeof w->replicas[0])) {
            snprintf(err, n, "'%s': the brokers must be ids separated by commas", s);
            return 1;
        }
        w->replicas[w->nreplicas++] = (int32_t)id;
        if (!*stop) break;
        p = stop + 1;
    }
    return 0;
}

static const char *ids(char *buf, size_t n, const int32_t *v, int cnt) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < cnt && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%d", i ? "," : "", (int)v[i]);
    return cnt > 0 ? buf : "-";
}

/* st_cli_bootstrap_call, the reason on stderr; Metadata at v12, the
 * reassignment APIs at v0. */
static int call(const st_cli_ctx_t *ctx, int16_t key, const void *req, st_arena_t *a, void **resp) {
    char err[1024];
    if (!st_cli_bootstrap_call(ctx, key, key == ST_API_METADATA ? 12 : 0, req, a, resp, err, sizeof err))
        return 0;
    fprintf(stderr, "strata topics: %s\n", err);
    return 1;
}

/* The reassignments in progress, of wants (or all with nwants < 0). */
static int list_ongoing(const st_cli_ctx_t *ctx, st_arena_t *a, const want_t *wants, int nwants,
                        st_list_reassign_resp_t **out) {
    st_list_reassign_req_t q;
    st_schema_defaults(&st_list_reassign_req_schema, &q);
    if (nwants >= 0) {
        ST_ARRAY_ALLOC(q.topics, a, nwants);
        for (int i = 0; i < nwants; i++) {
            st_list_reassign_req_topic_t *t = &q.topics.v[i];
            t->name = st_str(wants[i].topic);
            t->partition_indexes.v = (int32_t *)&wants[i].partition;
            t->partition_indexes.n = 1;
        }
    }
    if (call(ctx, ST_API_LIST_PARTITION_REASSIGNMENTS, &q, a, (void **)out)) return 1;
    if ((*out)->error_code) {
        fprintf(stderr, "strata topics: ListPartitionReassignments: %s: %.*s\n",
                st_err_name(st_err_from_wire((*out)->error_code)), ST_STR_FMT((*out)->error_message));
        return 1;
    }
    return 0;
}

static void print_ongoing(FILE *out, const st_list_reassign_resp_t *r) {
    char a[400], b[400], c[400];
    for (int i = 0; i < r->topics.n; i++)
        for (int j = 0; j < r->topics.v[i].partitions.n; j++) {
            const st_list_reassign_resp_part_t *p = &r->topics.v[i].partitions.v[j];
            fprintf(out, "%.*s-%d: replicas %s  adding %s  removing %s\n", ST_STR_FMT(r->topics.v[i].name),
                   (int)p->partition_index, ids(a, sizeof a, p->replicas.v, p->replicas.n),
                   ids(b, sizeof b, p->adding_replicas.v, p->adding_replicas.n),
                   ids(c, sizeof c, p->removing_replicas.v, p->removing_replicas.n));
        }
}

static int count_ongoing(const st_list_reassign_resp_t *r) {
    int n = 0;
    for (int i = 0; i < r->topics.n; i++) n += r->topics.v[i].partitions.n;
    return n;
}

/* Where each partition of wants is now, from Metadata. */
static int print_placed(const st_cli_ctx_t *ctx, const want_t *wants, int nwants) {
    st_arena_t a;
    st_arena_init(&a, 1 << 14);
    st_metadata_req_t q;
    st_schema_defaults(&st_metadata_req_schema, &q);
    q.allow_auto_topic_creation = 0;
    ST_ARRAY_ALLOC(q.topics, &a, nwants);
    for (int i = 0; i < nwants; i++) {
        st_schema_defaults(&st_metadata_req_topic_schema, &q.topics.v[i]);
        q.topics.v[i].name = st_str(wants[i].topic);
    }
    st_metadata_resp_t *md;
    int rc = call(ctx, ST_API_METADATA, &q, &a, (void **)&md);
    for (int w = 0; !rc && w < nwants; w++)
        for (int i = 0; i < md->topics.n; i++) {
            if (!st_str_eq(md->topics.v[i].name, wants[w].topic)) continue;
            for (int j = 0; j < md->topics.v[i].partitions.n; j++) {
                const st_metadata_partition_t *p = &md->topics.v[i].partitions.v[j];
                if (p->partition_index != wants[w].partition) continue;
                char r[400], s[400];
                printf("%s-%d: done: replicas %s  isr %s  leader %d\n", wants[w].topic, (int)p->partition_index,
                       ids(r, sizeof r, p->replica_nodes.v, p->replica_nodes.n),
                       ids(s, sizeof s, p->isr_nodes.v, p->isr_nodes.n), (int)p->leader_id);
            }
        }
    st_arena_fini(&a);
    return rc;
}

/* Until none of wants is in progress (or timeout_s passes): each change
 * of what ListPartitionReassignments says is printed. */
static int wait_done(const st_cli_ctx_t *ctx, const want_t *wants, int nwants, int timeout_s) {
    time_t deadline = time(NULL) + timeout_s;
    char last[8192] = "";
    for (;;) {
        st_arena_t a;
        st_arena_init(&a, 1 << 14);
        st_list_reassign_resp_t *r;
        if (list_ongoing(ctx, &a, wants, nwants, &r)) {
            st_arena_fini(&a);
            return 1;
        }
        int left = count_ongoing(r);
        /* print only what changed: the lines of this answer, as one text */
        char now[8192];
        now[0] = 0;
        FILE *m = fmemopen(now, sizeof now - 1, "w");
        if (m) {
            print_ongoing(m, r);
            fclose(m);
        }
        now[sizeof now - 1] = 0;
        st_arena_fini(&a);
        if (strcmp(now, last)) {
            fputs(now, stdout);
            fflush(stdout);
            snprintf(last, sizeof last, "%s", now);
        }
        if (left == 0) return print_placed(ctx, wants, nwants);
        if (time(NULL) >= deadline) {
            fprintf(stderr, "strata topics: %d reassignment(s) still in progress after %d s\n", left,
                    timeout_s);
            return 1;
        }
        usleep(500 * 1000);
    }
}

static int alter(const st_cli_ctx_t *ctx, const want_t *wants, int nwants) {
    st_arena_t a;
    st_arena_init(&a, 1 << 14);
    st_reassign_req_t q;
    st_schema_defaults(&st_reassign_req_schema, &q);
    /* one topic entry per partition: the broker groups nothing itself */
    ST_ARRAY_ALLOC(q.topics, &a, nwants);
    for (int i = 0; i < nwants; i++) {
        st_reassign_req_topic_t *t = &q.topics.v[i];
        t->name = st_str(wants[i].topic);
        ST_ARRAY_ALLOC(t->partitions, &a, 1);
        t->partitions.v[0].partition_index = wants[i].partition;
        t->partitions.v[0].replicas.v = (int32_t *)wants[i].replicas;
        t->partitions.v[0].replicas.n = wants[i].nreplicas;
    }
    st_reassign_resp_t *r;
    int rc = call(ctx, ST_API_ALTER_PARTITION_REASSIGNMENTS, &q, &a, (void **)&r);
    if (!rc && r->error_code) {
        fprintf(stderr, "strata topics: AlterPartitionReassignments: %s: %.*s\n",
                st_err_name(st_err_from_wire(r->error_code)), ST_STR_FMT(r->error_message));
        rc = 1;
    }
    for (int i = 0; !rc && i < r->responses.n; i++)
        for (int j = 0; j < r->responses.v[i].partitions.n; j++) {
            const st_reassign_resp_part_t *p = &r->responses.v[i].partitions.v[j];
            if (p->error_code) {
                fprintf(stderr, "strata topics: %.*s-%d: %s: %.*s\n", ST_STR_FMT(r->responses.v[i].name),
                        (int)p->partition_index, st_err_name(st_err_from_wire(p->error_code)),
                        ST_STR_FMT(p->error_message));
                rc = 2; /* reported; the others still are */
                continue;
            }
            char b[400];
            const want_t *w = &wants[i];
            if (w->nreplicas < 0)
                printf("%s-%d: reassignment cancelled\n", w->topic, (int)w->partition);
            else
                printf("%s-%d: reassigning to %s\n", w->topic, (int)w->partition,
                       ids(b, sizeof b, w->replicas, w->nreplicas));
        }
    fflush(stdout);
    st_arena_fini(&a);
    return rc ? 1 : 0;
}

void st_cli_reassign_usage(FILE *out) {
    fprintf(out, "  reassign TOPIC:P=B1,B2,... [...] [--wait] [--timeout SECONDS]\n"
                 "                   move partitions to those brokers (the first leads), and\n"
                 "                   with --wait follow them until done\n"
                 "  reassign TOPIC:P [...] --cancel    back to the replicas before\n"
                 "  reassign --list  the reassignments in progress\n");
}

int st_cli_topics_reassign(const st_cli_ctx_t *ctx, int argc, char **argv) {
    int wait = 0, cancel = 0, listing = 0, timeout_s = 600, n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--wait")) wait = 1;
        else if (!strcmp(argv[i], "--cancel")) cancel = 1;
        else if (!strcmp(argv[i], "--list")) listing = 1;
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout_s = atoi(argv[++i]);
        else if (argv[i][0] == '-') goto usage;
        else n++;
    }
    if (listing) {
        if (n || cancel || wait) goto usage;
        st_arena_t a;
        st_arena_init(&a, 1 << 14);
        st_list_reassign_resp_t *r;
        int rc = list_ongoing(ctx, &a, NULL, -1, &r);
        if (!rc && count_ongoing(r) == 0) printf("no reassignment in progress\n");
        if (!rc) print_ongoing(stdout, r);
        st_arena_fini(&a);
        return rc ? ST_CLI_EXIT_FAIL : ST_CLI_EXIT_OK;
    }
    if (n == 0 || timeout_s <= 0 || (cancel && wait)) goto usage;
    want_t *wants = st_calloc((size_t)n, sizeof *wants);
    int k = 0;
    char err[512];
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] == '-') {
            i += !strcmp(argv[i], "--timeout");
            continue;
        }
        if (parse_want(argv[i], cancel, &wants[k++], err, sizeof err)) {
            fprintf(stderr, "strata topics: reassign: %s\n", err);
            free(wants);
            return ST_CLI_EXIT_USAGE;
        }
    }
    int rc = alter(ctx, wants, n);
    if (!rc && wait) rc = wait_done(ctx, wants, n, timeout_s);
    free(wants);
    return rc ? ST_CLI_EXIT_FAIL : ST_CLI_EXIT_OK;
usage:
    fprintf(stderr, "usage: strata topics --config FILE [--bootstrap HOST:PORT]\n");
    st_cli_reassign_usage(stderr);
    return ST_CLI_EXIT_USAGE;
}

/*
 * transactions.c - `strata transactions list | describe ID`: transactions
 * as their coordinators see them (kafka-transactions.sh list / describe).
 *
 *   list          every transactional id of every broker's coordinator:
 *                 the coordinator, producer id and state (ListTransactions
 *                 to each broker the metadata names)
 *   describe ID   the id's coordinator (FindCoordinator key type 1), then
 *                 DescribeTransactions: producer id and epoch, state,
 *                 timeout, start time and the partitions of the
 *                 transaction in progress
 *
 * Uses the broker's own codec through kclient.c.
 */
#include "cli_int.h"
#include "kclient.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void st_cli_transactions_usage(FILE *out) {
    fprintf(out,
            "usage: strata transactions --config FILE [--override key=value ...] "
            "[--bootstrap HOST:PORT] list | describe ID\n"
            "  list          every transactional id: coordinator, producer id, state\n"
            "  describe ID   producer id and epoch, state, timeout, start time and the\n"
            "                partitions of the transaction in progress\n");
}

static int list(const st_cli_ctx_t *ctx, char *why, size_t whylen) {
    char err[512];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec);
    if (st_kclient_open(&kc, ctx->bootstrap, err, sizeof err)) goto fail;
    st_metadata_req_t mq;
    st_schema_defaults(&st_metadata_req_schema, &mq);
    ST_ARRAY_ALLOC(mq.topics, &a, 0);
    mq.allow_auto_topic_creation = 0;
    st_metadata_resp_t *md;
    if (st_kclient_call(&kc, ST_API_METADATA, 9, &mq, &a, (void **)&md, err, sizeof err)) goto fail;
    printf("%-40s %-12s %-20s %s\n", "TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE");
    for (int i = 0; i < md->brokers.n; i++) {
        st_metadata_broker_t *b = &md->brokers.v[i];
        char addr[300];
        if (snprintf(addr, sizeof addr, "%.*s:%d", ST_STR_FMT(b->host), (int)b->port) >=
            (int)sizeof addr) {
            st_snprintf_marked(err, sizeof err, "broker %d: its host name is %d bytes long",
                               (int)b->node_id, (int)b->host.len);
            goto fail;
        }
        st_kclient_t bc = ST_KCLIENT_INIT(NULL, ctx->sec);
        st_list_transactions_req_t q;
        st_schema_defaults(&st_list_transactions_req_schema, &q);
        ST_ARRAY_ALLOC(q.state_filters, &a, 0);
        ST_ARRAY_ALLOC(q.producer_id_filters, &a, 0);
        st_list_transactions_resp_t *r;
        if (st_kclient_open(&bc, addr, err, sizeof err) ||
            st_kclient_call(&bc, ST_API_LIST_TRANSACTIONS, 1, &q, &a, (void **)&r, err, sizeof err)) {
            st_kclient_close(&bc);
            goto fail;
        }
        st_kclient_close(&bc);
        if (r->error_code) {
            st_snprintf_marked(err, sizeof err, "ListTransactions at broker %d: %s",
                               (int)b->node_id, st_err_name((st_err_t)r->error_code));
            goto fail;
        }
        for (int j = 0; j < r->transaction_states.n; j++) {
            st_listed_txn_t *t = &r->transaction_states.v[j];
            printf("%-40.*s %-12d %-20lld %.*s\n", ST_STR_FMT(t->transactional_id), (int)b->node_id,
                   (long long)t->producer_id, ST_STR_FMT(t->transaction_state));
        }
    }
    rc = ST_CLI_EXIT_OK;
    goto out;
fail:
    snprintf(why, whylen, "%s", err);
out:
    st_kclient_close(&kc);
    st_arena_fini(&a);
    return rc;
}

static int describe(const st_cli_ctx_t *ctx, const char *id, char *why, size_t whylen) {
    char err[512], coord_addr[300];
    int rc = ST_CLI_EXIT_FAIL;
    st_arena_t a;
    st_arena_init(&a, 1 << 16);
    st_kclient_t kc = ST_KCLIENT_INIT(NULL, ctx->sec), tc = ST_KCLIENT_INIT(NULL, ctx->sec);
    if (st_kclient_open(&kc, ctx->bootstrap, err, sizeof err)) goto fail;
    st_find_coordinator_req_t fq;
    st_schema_defaults(&st_find_coordinator_req_schema, &fq);
    fq.key = st_str(id);
    fq.key_type = 1;
    st_find_coordinator_resp_t *fr;
    if (st_kclient_call(&kc, ST_API_FIND_COORDINATOR, 3, &fq, &a, (void **)&fr, err, sizeof err))
        goto fail;
    if (fr->error_code) {
        st_snprintf_marked(err, sizeof err, "FindCoordinator: %s", st_err_name((st_err_t)fr->error_code));
        goto fail;
    }
    if (snprintf(coord_addr, sizeof coord_addr, "%.*s:%d", ST_STR_FMT(fr->host), (int)fr->port) >=
        (int)sizeof coord_addr) {
        st_snprintf_marked(err, sizeof err, "FindCoordinator: the coordinator's host name is %d "
                           "bytes long", (int)fr->host.len);
        goto fail;
    }
    if (st_kclient_open(&tc, coord_addr, err, sizeof err)) goto fail;
    st_describe_transactions_req_t dq;
    st_schema_defaults(&st_describe_transactions_req_schema, &dq);
    st_str_t tid = st_str(id);
    dq.transactional_ids.v = &tid;
    dq.transactional_ids.n = 1;
    st_describe_transactions_resp_t *dr;
    if (st_kclient_call(&tc, ST_API_DESCRIBE_TRANSACTIONS, 0, &dq, &a, (void **)&dr, err, sizeof err))
        goto fail;
    if (dr->transaction_states.n != 1 || dr->transaction_states.v[0].error_code) {
        int16_t ec = dr->transaction_states.n ? dr->transaction_states.v[0].error_code : -1;
        if (ec == st_err_wire(ST_E_TRANSACTIONAL_ID_NOT_FOUND))
            st_snprintf_marked(err, sizeof err, "transactional id '%s' does not exist", id);
        else
            st_snprintf_marked(err, sizeof err, "DescribeTransactions: %s",
                               ec >= 0 ? st_err_name((st_err_t)ec) : "no answer");
        goto fail;
    }
    st_described_txn_t *t = &dr->transaction_states.v[0];
    char start[64] = "-";
    if (t->transaction_start_time_ms >= 0) {
        time_t secs = (time_t)(t->transaction_start_time_ms / 1000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        strftime(start, sizeof start, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    printf("transactional id  %s\ncoordinator       %d\nproducer id       %lld\n"
           "producer epoch    %d\nstate             %.*s\ntimeout ms        %d\n"
           "started           %s\n",
           id, (int)fr->node_id, (long long)t->producer_id, (int)t->producer_epoch,
           ST_STR_FMT(t->transaction_state), (int)t->transaction_timeout_ms, start);
    printf("partitions       ");
    int n = 0;
    for (int i = 0; i < t->topic_partitions.n; i++)
        for (int j = 0; j < t->topic_partitions.v[i].partition_indexes.n; j++, n++)
            printf(" %.*s-%d", ST_STR_FMT(t->topic_partitions.v[i].name),
                   (int)t->topic_partitions.v[i].partition_indexes.v[j]);
    printf("%s\n", n ? "" : " -");
    rc = ST_CLI_EXIT_OK;
    goto out;
fail:
    snprintf(why, whylen, "%s", err);
out:
    st_kclient_close(&tc);
    st_kclient_close(&kc);
    st_arena_fini(&a);
    return rc;
}

/* The admin client's retriable coordinator errors. */
static int retriable(const char *msg) {
    return strstr(msg, "COORDINATOR_LOAD_IN_PROGRESS") || strstr(msg, "COORDINATOR_NOT_AVAILABLE") ||
           strstr(msg, "NOT_COORDINATOR");
}

int st_cli_transactions(const st_cli_ctx_t *ctx, int argc, char **argv) {
    int listing = argc == 1 && !strcmp(argv[0], "list");
    if (!listing && !(argc == 2 && !strcmp(argv[0], "describe"))) {
        st_cli_transactions_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    for (int attempt = 1;; attempt++) {
        char why[1024] = "";
        int rc = listing ? list(ctx, why, sizeof why) : describe(ctx, argv[1], why, sizeof why);
        if (rc == ST_CLI_EXIT_FAIL && retriable(why) && attempt < 20) {
            usleep(250 * 1000);
            continue;
        }
        if (rc == ST_CLI_EXIT_FAIL) fprintf(stderr, "strata transactions: %s\n", why);
        return rc;
    }
}

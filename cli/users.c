/*
 * users.c - strata users: SCRAM credentials (KIP-554), as kafka-configs.sh
 * --entity-type users manages them.
 *
 *   add NAME [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N]
 *            (--password-file FILE | --password PASSWORD)
 *   delete NAME [--mechanism M]      (without --mechanism: every one it has)
 *   list [NAME ...]
 *
 * The tool salts the password itself (32 random bytes, PBKDF2 with the
 * mechanism's hash) and sends only the salt and the salted password in
 * AlterUserScramCredentials, as Kafka's admin client does; the broker
 * keeps the stored and server keys.  A password is read from a file ('-'
 * for standard input, one line) so that it does not show in ps.
 */
#include "cli_int.h"

#include <errno.h>
#include <stdlib.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

void st_cli_users_usage(FILE *out) {
    fprintf(out,
            "strata users ... add NAME [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] "
            "[--iterations N] (--password-file FILE|- | --password PASSWORD)\n"
            "strata users ... delete NAME [--mechanism M]\n"
            "strata users ... list [NAME ...]\n");
}

/* One line of path ('-': stdin), without its newline; heap. */
static char *read_password(const char *path, char *err, size_t errlen) {
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) {
        snprintf(err, errlen, "--password-file %s: %s", path, strerror(errno));
        return NULL;
    }
    char buf[1024];
    char *line = fgets(buf, sizeof buf, f);
    if (f != stdin) fclose(f);
    if (!line) {
        snprintf(err, errlen, "--password-file %s: empty", path);
        return NULL;
    }
    buf[strcspn(buf, "\r\n")] = 0;
    char *pw = st_strdup(buf);
    OPENSSL_cleanse(buf, sizeof buf);
    return pw;
}

static int alter(const st_cli_ctx_t *ctx, st_alter_scram_req_t *q, st_arena_t *a) {
    st_alter_scram_resp_t *r = NULL;
    char err[1024];
    if (st_cli_bootstrap_call(ctx, ST_API_ALTER_USER_SCRAM_CREDENTIALS, 0, q, a, (void **)&r, err,
                              sizeof err)) {
        fprintf(stderr, "strata users: %s\n", err);
        return ST_CLI_EXIT_FAIL;
    }
    int rc = ST_CLI_EXIT_OK;
    for (int i = 0; i < r->results.n; i++) {
        const st_alter_scram_result_t *x = &r->results.v[i];
        if (!x->error_code) continue;
        fprintf(stderr, "strata users: %.*s: %s: %.*s\n", (int)x->user.len, x->user.p,
                st_err_name(st_err_from_wire(x->error_code)), (int)ST_MAX(x->error_message.len, 0),
                x->error_message.p ? x->error_message.p : "");
        rc = ST_CLI_EXIT_FAIL;
    }
    return rc;
}

static int cmd_add(const st_cli_ctx_t *ctx, int argc, char **argv, st_arena_t *a) {
    const char *name = NULL, *mech = "SCRAM-SHA-512", *pwfile = NULL, *pwarg = NULL;
    long iterations = 8192;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mechanism") && i + 1 < argc) mech = argv[++i];
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--password-file") && i + 1 < argc) pwfile = argv[++i];
        else if (!strcmp(argv[i], "--password") && i + 1 < argc) pwarg = argv[++i];
        else if (argv[i][0] != '-' && !name) name = argv[i];
        else {
            st_cli_users_usage(stderr);
            return ST_CLI_EXIT_USAGE;
        }
    }
    st_sasl_mech_t m = st_sasl_mech_parse(mech);
    if (!name || !*name || (!pwfile == !pwarg)) {
        st_cli_users_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    if (!st_sasl_is_scram(m)) {
        fprintf(stderr, "strata users: --mechanism %s is not SCRAM-SHA-256 or SCRAM-SHA-512\n",
                mech);
        return ST_CLI_EXIT_USAGE;
    }
    char err[512];
    char *pw = pwarg ? st_strdup(pwarg) : read_password(pwfile, err, sizeof err);
    if (!pw) {
        fprintf(stderr, "strata users: %s\n", err);
        return ST_CLI_EXIT_FAIL;
    }
    uint8_t *salt = st_arena_alloc(a, 32), *salted = st_arena_alloc(a, ST_SCRAM_MAX_KEY);
    int ok = RAND_bytes(salt, 32) == 1 && iterations > 0 && iterations <= INT32_MAX &&
             !st_scram_salted_password(m, pw, salt, 32, (int32_t)iterations, salted);
    OPENSSL_cleanse(pw, strlen(pw));
    free(pw);
    if (!ok) {
        fprintf(stderr, "strata users: cannot salt the password (--iterations %ld)\n", iterations);
        return ST_CLI_EXIT_FAIL;
    }
    st_alter_scram_req_t q;
    st_schema_defaults(&st_alter_scram_req_schema, &q);
    ST_ARRAY_ALLOC(q.deletions, a, 0);
    ST_ARRAY_ALLOC(q.upsertions, a, 1);
    q.upsertions.v[0] = (st_scram_upsertion_t){st_str(name), (int8_t)m, (int32_t)iterations,
                                               {salt, 32},
                                               {salted, (int32_t)st_scram_key_len(m)}};
    int rc = alter(ctx, &q, a);
    OPENSSL_cleanse(salted, ST_SCRAM_MAX_KEY);
    if (!rc) printf("%s: %s credential set (%ld iterations)\n", name, mech, iterations);
    return rc;
}

static int cmd_delete(const st_cli_ctx_t *ctx, int argc, char **argv, st_arena_t *a) {
    const char *name = NULL, *mech = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mechanism") && i + 1 < argc) mech = argv[++i];
        else if (argv[i][0] != '-' && !name) name = argv[i];
        else {
            st_cli_users_usage(stderr);
            return ST_CLI_EXIT_USAGE;
        }
    }
    if (!name) {
        st_cli_users_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    st_sasl_mech_t mechs[2];
    int n = 0;
    if (mech) {
        mechs[n] = st_sasl_mech_parse(mech);
        if (!st_sasl_is_scram(mechs[n])) {
            fprintf(stderr, "strata users: --mechanism %s is not SCRAM-SHA-256 or SCRAM-SHA-512\n",
                    mech);
            return ST_CLI_EXIT_USAGE;
        }
        n++;
    } else {
        /* every mechanism the user has */
        st_describe_scram_req_t dq;
        st_schema_defaults(&st_describe_scram_req_schema, &dq);
        ST_ARRAY_ALLOC(dq.users, a, 1);
        dq.users.v[0].name = st_str(name);
        st_describe_scram_resp_t *dr = NULL;
        char err[1024];
        if (st_cli_bootstrap_call(ctx, ST_API_DESCRIBE_USER_SCRAM_CREDENTIALS, 0, &dq, a,
                                  (void **)&dr, err, sizeof err)) {
            fprintf(stderr, "strata users: %s\n", err);
            return ST_CLI_EXIT_FAIL;
        }
        if (dr->results.n != 1 || dr->results.v[0].error_code) {
            fprintf(stderr, "strata users: %s has no SCRAM credential\n", name);
            return ST_CLI_EXIT_FAIL;
        }
        for (int i = 0; i < dr->results.v[0].credential_infos.n && n < 2; i++)
            mechs[n++] = (st_sasl_mech_t)dr->results.v[0].credential_infos.v[i].mechanism;
    }
    st_alter_scram_req_t q;
    st_schema_defaults(&st_alter_scram_req_schema, &q);
    ST_ARRAY_ALLOC(q.upsertions, a, 0);
    ST_ARRAY_ALLOC(q.deletions, a, n);
    for (int i = 0; i < n; i++) q.deletions.v[i] = (st_scram_deletion_t){st_str(name), (int8_t)mechs[i]};
    int rc = alter(ctx, &q, a);
    for (int i = 0; !rc && i < n; i++)
        printf("%s: %s credential deleted\n", name, st_sasl_mech_name(mechs[i]));
    return rc;
}

static int cmd_list(const st_cli_ctx_t *ctx, int argc, char **argv, st_arena_t *a) {
    st_describe_scram_req_t q;
    st_schema_defaults(&st_describe_scram_req_schema, &q);
    if (argc > 1) {
        ST_ARRAY_ALLOC(q.users, a, argc - 1);
        for (int i = 1; i < argc; i++) q.users.v[i - 1].name = st_str(argv[i]);
    } else {
        q.users.v = NULL;
        q.users.n = -1; /* every user */
    }
    st_describe_scram_resp_t *r = NULL;
    char err[1024];
    if (st_cli_bootstrap_call(ctx, ST_API_DESCRIBE_USER_SCRAM_CREDENTIALS, 0, &q, a, (void **)&r,
                              err, sizeof err)) {
        fprintf(stderr, "strata users: %s\n", err);
        return ST_CLI_EXIT_FAIL;
    }
    if (r->error_code) {
        fprintf(stderr, "strata users: %s\n", st_err_name(st_err_from_wire(r->error_code)));
        return ST_CLI_EXIT_FAIL;
    }
    int rc = ST_CLI_EXIT_OK;
    printf("%-32s %-14s %s\n", "USER", "MECHANISM", "ITERATIONS");
    for (int i = 0; i < r->results.n; i++) {
        const st_describe_scram_result_t *x = &r->results.v[i];
        if (x->error_code) {
            fprintf(stderr, "strata users: %.*s: %.*s\n", (int)x->user.len, x->user.p,
                    (int)ST_MAX(x->error_message.len, 0),
                    x->error_message.p ? x->error_message.p : "");
            rc = ST_CLI_EXIT_FAIL;
            continue;
        }
        for (int k = 0; k < x->credential_infos.n; k++)
            printf("%-32.*s %-14s %d\n", (int)x->user.len, x->user.p,
                   st_sasl_mech_name((st_sasl_mech_t)x->credential_infos.v[k].mechanism),
                   (int)x->credential_infos.v[k].iterations);
    }
    return rc;
}

int st_cli_users(const st_cli_ctx_t *ctx, int argc, char **argv) {
    if (argc < 1) {
        st_cli_users_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    st_arena_t a;
    st_arena_init(&a, 4096);
    int rc;
    if (!strcmp(argv[0], "add")) rc = cmd_add(ctx, argc, argv, &a);
    else if (!strcmp(argv[0], "delete")) rc = cmd_delete(ctx, argc, argv, &a);
    else if (!strcmp(argv[0], "list")) rc = cmd_list(ctx, argc, argv, &a);
    else {
        st_cli_users_usage(stderr);
        rc = ST_CLI_EXIT_USAGE;
    }
    st_arena_fini(&a);
    return rc;
}

/*
 * scram.c - AlterUserScramCredentials on the active controller (KIP-554),
 * and DescribeUserScramCredentials from any node's image.
 *
 * An alteration is checked whole before anything is written: one result
 * per user named, and a user with any bad deletion or upsertion has
 * nothing of its changed (Kafka's ScramControlManager).  The changes of
 * every good user go in one batch of UserScramCredential and
 * RemoveUserScramCredential records.  What is stored is the salt, the
 * stored key and the server key (computed here from the salted password
 * the client sent): never the password, never the salted password.
 */
#include "controller_int.h"

#include <stdlib.h>

#include <openssl/crypto.h>

static int name_eq(st_str_t a, st_str_t b) {
    return a.len == b.len && (a.len <= 0 || !memcmp(a.p, b.p, (size_t)a.len));
}

/* The result slot of a user (in order of first appearance). */
static int user_slot(st_str_t *users, int *n, st_str_t name) {
    for (int i = 0; i < *n; i++)
        if (name_eq(users[i], name)) return i;
    users[*n] = name;
    return (*n)++;
}

/* The first error of a user is its answer: fmt's one %.*s is the name. */
static void set_error(st_alter_scram_result_t *r, char **msgs, int slot, st_err_t e,
                      const char *fmt, st_str_t name, st_arena_t *a) {
    if (r[slot].error_code) return;
    char buf[512];
    if (strstr(fmt, "%.*s"))
        snprintf(buf, sizeof buf, fmt, (int)ST_MAX(name.len, 0), name.p ? name.p : "");
    else
        snprintf(buf, sizeof buf, "%s", fmt);
    r[slot].error_code = st_err_wire(e);
    msgs[slot] = st_arena_strndup(a, buf, strlen(buf));
}

void st_controller_alter_scram(st_controller_t *c, const st_alter_scram_req_t *q,
                               st_alter_scram_resp_t *r, st_arena_t *a) {
    st_schema_defaults(&st_alter_scram_resp_schema, r);
    int total = q->deletions.n + q->upsertions.n;
    st_str_t *users = st_arena_alloc(a, sizeof *users * (size_t)(total + 1));
    char **msgs = st_arena_alloc(a, sizeof *msgs * (size_t)(total + 1));
    st_alter_scram_result_t *res = st_arena_alloc(a, sizeof *res * (size_t)(total + 1));
    int nusers = 0;
    int active = c->raft && st_raft_role(c->raft) == ST_RAFT_LEADER && c->image;
    /* every (user, mechanism) once in the request */
    for (int i = 0; i < total; i++) {
        int del = i < q->deletions.n;
        st_str_t name = del ? q->deletions.v[i].name : q->upsertions.v[i - q->deletions.n].name;
        int8_t mech = del ? q->deletions.v[i].mechanism
                          : q->upsertions.v[i - q->deletions.n].mechanism;
        int slot = user_slot(users, &nusers, name);
        st_schema_defaults(&st_alter_scram_result_schema, &res[slot]);
        res[slot].user = name;
        for (int j = 0; j < i; j++) {
            int jdel = j < q->deletions.n;
            st_str_t jn = jdel ? q->deletions.v[j].name : q->upsertions.v[j - q->deletions.n].name;
            int8_t jm = jdel ? q->deletions.v[j].mechanism
                             : q->upsertions.v[j - q->deletions.n].mechanism;
            if (name_eq(jn, name) && jm == mech)
                set_error(res, msgs, slot, ST_E_DUPLICATE_RESOURCE,
                          "A user credential cannot be altered twice in the same request (%.*s)",
                          name, a);
        }
    }
    if (!active) {
        for (int i = 0; i < nusers; i++) {
            res[i].error_code = st_err_wire(ST_E_NOT_CONTROLLER);
            msgs[i] = NULL;
        }
        goto answer;
    }
    for (int i = 0; i < q->deletions.n; i++) {
        const st_scram_deletion_t *d = &q->deletions.v[i];
        int slot = user_slot(users, &nusers, d->name);
        char *user = st_strndup(d->name.p, (size_t)ST_MAX(d->name.len, 0));
        if (d->name.len <= 0)
            set_error(res, msgs, slot, ST_E_UNACCEPTABLE_CREDENTIAL, "Username must not be empty",
                      d->name, a);
        else if (!st_sasl_is_scram((st_sasl_mech_t)d->mechanism))
            set_error(res, msgs, slot, ST_E_UNSUPPORTED_SASL_MECHANISM,
                      "Unknown SCRAM mechanism for user %.*s", d->name, a);
        else if (!st_image_scram(c->image, user, (st_sasl_mech_t)d->mechanism))
            set_error(res, msgs, slot, ST_E_RESOURCE_NOT_FOUND,
                      "Attempt to delete a user credential that does not exist (%.*s)", d->name, a);
        free(user);
    }
    for (int i = 0; i < q->upsertions.n; i++) {
        const st_scram_upsertion_t *u = &q->upsertions.v[i];
        int slot = user_slot(users, &nusers, u->name);
        st_sasl_mech_t m = (st_sasl_mech_t)u->mechanism;
        st_scram_cred_t cred;
        if (u->name.len <= 0)
            set_error(res, msgs, slot, ST_E_UNACCEPTABLE_CREDENTIAL, "Username must not be empty",
                      u->name, a);
        else if (!st_sasl_is_scram(m))
            set_error(res, msgs, slot, ST_E_UNSUPPORTED_SASL_MECHANISM,
                      "Unknown SCRAM mechanism for user %.*s", u->name, a);
        else if (u->iterations < ST_SCRAM_MIN_ITERATIONS)
            set_error(res, msgs, slot, ST_E_UNACCEPTABLE_CREDENTIAL,
                      "Too few iterations for user %.*s (at least 4096)", u->name, a);
        else if (u->iterations > ST_SCRAM_MAX_ITERATIONS)
            set_error(res, msgs, slot, ST_E_UNACCEPTABLE_CREDENTIAL,
                      "Too many iterations for user %.*s (at most 16384)", u->name, a);
        else if (u->salt.len <= 0 || u->salt.len > ST_SCRAM_MAX_SALT ||
                 st_scram_cred_from_salted(m, u->salt.p, (size_t)u->salt.len, u->salted_password.p,
                                           (size_t)ST_MAX(u->salted_password.len, 0),
                                           u->iterations, &cred))
            set_error(res, msgs, slot, ST_E_UNACCEPTABLE_CREDENTIAL,
                      "The salt or the salted password of user %.*s does not fit the mechanism",
                      u->name, a);
        OPENSSL_cleanse(&cred, sizeof cred);
    }
    /* the records of the users without an error, as one batch */
    st_ctl_rec_t *recs = st_arena_alloc(a, sizeof *recs * (size_t)(total + 1));
    st_mrec_user_scram_t *ups = st_arena_alloc(a, sizeof *ups * (size_t)(q->upsertions.n + 1));
    st_mrec_remove_user_scram_t *dels =
        st_arena_alloc(a, sizeof *dels * (size_t)(q->deletions.n + 1));
    st_scram_cred_t *creds = st_arena_alloc(a, sizeof *creds * (size_t)(q->upsertions.n + 1));
    int nrecs = 0, nremoved = 0;
    for (int i = 0; i < q->deletions.n; i++) {
        const st_scram_deletion_t *d = &q->deletions.v[i];
        if (res[user_slot(users, &nusers, d->name)].error_code) continue;
        dels[i] = (st_mrec_remove_user_scram_t){d->name, d->mechanism};
        recs[nrecs++] = (st_ctl_rec_t){ST_MREC_REMOVE_USER_SCRAM_CREDENTIAL, &dels[i]};
        nremoved++;
    }
    for (int i = 0; i < q->upsertions.n; i++) {
        const st_scram_upsertion_t *u = &q->upsertions.v[i];
        if (res[user_slot(users, &nusers, u->name)].error_code) continue;
        st_scram_cred_t *cr = &creds[i];
        st_scram_cred_from_salted((st_sasl_mech_t)u->mechanism, u->salt.p, (size_t)u->salt.len,
                                  u->salted_password.p, (size_t)u->salted_password.len,
                                  u->iterations, cr);
        ups[i] = (st_mrec_user_scram_t){u->name,
                                        u->mechanism,
                                        {cr->salt, (int32_t)cr->salt_len},
                                        {cr->stored_key, (int32_t)cr->key_len},
                                        {cr->server_key, (int32_t)cr->key_len},
                                        u->iterations};
        recs[nrecs++] = (st_ctl_rec_t){ST_MREC_USER_SCRAM_CREDENTIAL, &ups[i]};
    }
    if (nrecs) {
        st_err_t e = st_ctl__commit_records(c, recs, nrecs);
        for (int i = 0; e && i < nusers; i++)
            if (!res[i].error_code) res[i].error_code = st_err_wire(e);
        if (!e)
            ST_INFO("controller", "SCRAM credentials: %d set, %d removed", nrecs - nremoved,
                    nremoved);
    }
    OPENSSL_cleanse(creds, sizeof *creds * (size_t)(q->upsertions.n + 1));
answer:
    ST_ARRAY_ALLOC(r->results, a, nusers);
    for (int i = 0; i < nusers; i++) {
        r->results.v[i] = res[i];
        r->results.v[i].error_message = msgs[i] ? st_str(msgs[i]) : ST_STR_NULL;
    }
}

void st_image_describe_scram(const st_meta_image_t *img, const st_describe_scram_req_t *q,
                             st_describe_scram_resp_t *r, st_arena_t *a) {
    st_schema_defaults(&st_describe_scram_resp_schema, r);
    if (q->users.n < 0) { /* null: every user with a credential */
        const st_meta_scram_t *sc = img && img->sec ? img->sec->scram : NULL;
        int nsc = img && img->sec ? img->sec->nscram : 0;
        int n = 0;
        for (int i = 0; i < nsc; i++) n += i == 0 || strcmp(sc[i].user, sc[i - 1].user);
        ST_ARRAY_ALLOC(r->results, a, n);
        int k = -1;
        for (int i = 0; i < nsc; i++) {
            if (i == 0 || strcmp(sc[i].user, sc[i - 1].user)) {
                k++;
                st_schema_defaults(&st_describe_scram_result_schema, &r->results.v[k]);
                r->results.v[k].user = st_str(st_arena_strndup(a, sc[i].user, strlen(sc[i].user)));
                int cnt = 0;
                for (int j = i; j < nsc && !strcmp(sc[j].user, sc[i].user); j++) cnt++;
                ST_ARRAY_ALLOC(r->results.v[k].credential_infos, a, cnt);
                r->results.v[k].credential_infos.n = 0;
            }
            st_scram_credential_info_t *ci =
                &r->results.v[k].credential_infos.v[r->results.v[k].credential_infos.n++];
            ci->mechanism = (int8_t)sc[i].cred.mech;
            ci->iterations = sc[i].cred.iterations;
        }
        return;
    }
    ST_ARRAY_ALLOC(r->results, a, q->users.n);
    for (int u = 0; u < q->users.n; u++) {
        st_describe_scram_result_t *out = &r->results.v[u];
        st_schema_defaults(&st_describe_scram_result_schema, out);
        st_str_t name = q->users.v[u].name;
        out->user = name;
        int dup = 0;
        for (int j = 0; j < u; j++) dup |= name_eq(q->users.v[j].name, name);
        char buf[512];
        if (dup) {
            out->error_code = st_err_wire(ST_E_DUPLICATE_RESOURCE);
            snprintf(buf, sizeof buf,
                     "Cannot describe SCRAM credentials for the same user twice in a single "
                     "request: %.*s",
                     (int)ST_MAX(name.len, 0), name.p ? name.p : "");
            out->error_message = st_str(st_arena_strndup(a, buf, strlen(buf)));
            continue;
        }
        char *user = st_strndup(name.p ? name.p : "", (size_t)ST_MAX(name.len, 0));
        int cnt = 0;
        for (int m = ST_SASL_SCRAM_SHA_256; m <= ST_SASL_SCRAM_SHA_512; m++)
            cnt += st_image_scram(img, user, (st_sasl_mech_t)m) != NULL;
        ST_ARRAY_ALLOC(out->credential_infos, a, cnt);
        int k = 0;
        for (int m = ST_SASL_SCRAM_SHA_256; m <= ST_SASL_SCRAM_SHA_512; m++) {
            const st_scram_cred_t *cr = st_image_scram(img, user, (st_sasl_mech_t)m);
            if (!cr) continue;
            out->credential_infos.v[k].mechanism = (int8_t)m;
            out->credential_infos.v[k].iterations = cr->iterations;
            k++;
        }
        free(user);
        if (!cnt) {
            out->error_code = st_err_wire(ST_E_RESOURCE_NOT_FOUND);
            snprintf(buf, sizeof buf,
                     "Attempt to describe a user credential that does not exist: %.*s",
                     (int)ST_MAX(name.len, 0), name.p ? name.p : "");
            out->error_message = st_str(st_arena_strndup(a, buf, strlen(buf)));
        }
    }
}

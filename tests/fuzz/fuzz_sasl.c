/*
 * fuzz_sasl.c - libFuzzer target: what a client sends the SASL server
 * (broker/security/sasl.c) and what a server answers the SASL client, and
 * JAAS option text (jaas.c).
 *
 * The first input byte picks the target:
 *   0  the PLAIN server: the rest is one token
 *   1  the SCRAM-SHA-256 server, 2 SCRAM-SHA-512: the rest is split at the
 *      first NUL into the client-first and client-final messages (the
 *      server-first nonce is put into a final message that asks for it
 *      with "%N", so mutations reach the proof checks)
 *   3  the SCRAM client: the rest split at NUL into server-first and
 *      server-final
 *   4  a JAAS entry
 * Nothing may crash, read out of bounds or leak; no garbage authenticates.
 */
#include <stdlib.h>
#include <string.h>

#include "sasl.h"
#include "security.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int lookup(void *arg, const char *user, st_sasl_mech_t m, st_scram_cred_t *out) {
    (void)arg;
    if (strcmp(user, "alice")) return -1;
    static st_scram_cred_t c256, c512;
    static int made;
    if (!made) {
        st_scram_cred_make(ST_SASL_SCRAM_SHA_256, "alice-secret", 4096, &c256);
        st_scram_cred_make(ST_SASL_SCRAM_SHA_512, "alice-secret", 4096, &c512);
        made = 1;
    }
    *out = m == ST_SASL_SCRAM_SHA_256 ? c256 : c512;
    return 0;
}

static int plain_check(void *arg, const char *user, const char *pw) {
    (void)arg;
    return !strcmp(user, "alice") && !strcmp(pw, "alice-secret");
}

/* The input's second part with "%N" replaced by the server's nonce. */
static size_t with_nonce(const uint8_t *p, size_t n, const char *nonce, uint8_t *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap; i++) {
        if (p[i] == '%' && i + 1 < n && p[i + 1] == 'N') {
            size_t l = strlen(nonce);
            if (k + l > cap) break;
            memcpy(out + k, nonce, l);
            k += l;
            i++;
            continue;
        }
        out[k++] = p[i];
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int target = data[0] % 5;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    const uint8_t *nul = memchr(p, 0, n);
    size_t n1 = nul ? (size_t)(nul - p) : n;
    const uint8_t *p2 = nul ? nul + 1 : p + n;
    size_t n2 = nul ? n - n1 - 1 : 0;
    st_sasl_server_ops_t ops = {plain_check, lookup, NULL};
    st_buf_t out;
    st_buf_init(&out);
    char why[256];
    if (target == 0) {
        st_sasl_server_t *s = st_sasl_server_new(ST_SASL_PLAIN, &ops);
        st_sasl_step_t r = st_sasl_server_step(s, p, n, &out, why, sizeof why);
        if (r == ST_SASL_DONE && strcmp(st_sasl_server_user(s), "alice")) abort();
        st_sasl_server_free(s);
    } else if (target <= 2) {
        st_sasl_server_t *s = st_sasl_server_new((st_sasl_mech_t)target, &ops);
        if (st_sasl_server_step(s, p, n1, &out, why, sizeof why) == ST_SASL_CONTINUE) {
            char nonce[1024] = "";
            st_buf_put(&out, "", 1);
            if (out.len > 2 && !memcmp(out.data, "r=", 2)) {
                const char *e = strchr((const char *)out.data + 2, ',');
                size_t l = e ? (size_t)(e - (const char *)out.data - 2) : 0;
                if (l < sizeof nonce) memcpy(nonce, out.data + 2, l), nonce[l] = 0;
            }
            uint8_t *fin = malloc(n2 * 2 + sizeof nonce + 1);
            size_t fl = with_nonce(p2, n2, nonce, fin, n2 * 2 + sizeof nonce);
            out.len = 0;
            /* a random proof never matches a real key */
            if (st_sasl_server_step(s, fin, fl, &out, why, sizeof why) == ST_SASL_DONE) abort();
            free(fin);
        }
        st_sasl_server_free(s);
    } else if (target == 3) {
        st_sasl_client_t *c = st_sasl_client_new(ST_SASL_SCRAM_SHA_256, "alice", "alice-secret");
        st_sasl_client_set_nonce(c, "fuzznonce");
        st_sasl_client_step(c, NULL, 0, &out, why, sizeof why);
        out.len = 0;
        if (st_sasl_client_step(c, p, n1, &out, why, sizeof why) == ST_SASL_CONTINUE) {
            out.len = 0;
            st_sasl_client_step(c, p2, n2, &out, why, sizeof why);
        }
        st_sasl_client_free(c);
    } else {
        char *text = malloc(n + 1);
        memcpy(text, p, n);
        text[n] = 0;
        st_jaas_t j;
        if (st_jaas_parse(text, &j, why, sizeof why) == ST_OK) {
            st_jaas_get(&j, "username");
            st_jaas_fini(&j);
        }
        free(text);
    }
    st_buf_fini(&out);
    return 0;
}

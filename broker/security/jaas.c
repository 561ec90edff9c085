/*
 * jaas.c - one JAAS login module entry, as Kafka's sasl.jaas.config holds:
 *
 *   <class name> <flag> [<name>=<value> ...] ;
 *
 * flag: required | requisite | sufficient | optional; a value is a word or
 * a double-quoted string (\" and \\ escaped).  Errors name the position
 * and the option, never a value: values are passwords.
 */
#include "security.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

typedef struct lex {
    const char *p;
    int bad;
} lex_t;

static void skip_space(lex_t *x) {
    while (isspace((unsigned char)*x->p)) x->p++;
}

static int word_char(char ch) {
    return isalnum((unsigned char)ch) || ch == '.' || ch == '_' || ch == '-' || ch == '$' ||
           ch == '/' || ch == ':' || ch == '@' || ch == '+';
}

/* A word or a quoted string (heap), or NULL. */
static char *token(lex_t *x) {
    skip_space(x);
    if (*x->p == '"') {
        x->p++;
        st_buf_t b;
        st_buf_init(&b);
        while (*x->p && *x->p != '"') {
            if (*x->p == '\\' && x->p[1]) x->p++;
            st_buf_put(&b, x->p, 1);
            x->p++;
        }
        if (*x->p != '"') {
            x->bad = 1;
            OPENSSL_cleanse(b.data, b.len);
            st_buf_fini(&b);
            return NULL;
        }
        x->p++;
        st_buf_put(&b, "", 1);
        char *s = st_strdup((const char *)b.data);
        OPENSSL_cleanse(b.data, b.len);
        st_buf_fini(&b);
        return s;
    }
    const char *start = x->p;
    while (word_char(*x->p)) x->p++;
    if (x->p == start) return NULL;
    char *s = st_malloc((size_t)(x->p - start) + 1);
    memcpy(s, start, (size_t)(x->p - start));
    s[x->p - start] = 0;
    return s;
}

void st_jaas_fini(st_jaas_t *j) {
    free(j->login_module);
    for (int i = 0; i < j->noptions; i++) {
        free(j->options[i].name);
        if (j->options[i].value) {
            OPENSSL_cleanse(j->options[i].value, strlen(j->options[i].value));
            free(j->options[i].value);
        }
    }
    free(j->options);
    memset(j, 0, sizeof *j);
}

st_err_t st_jaas_parse(const char *text, st_jaas_t *out, char *err, size_t errlen) {
    st_jaas_t j = {0};
    lex_t x = {text ? text : "", 0};
    char *flag = NULL;
    j.login_module = token(&x);
    if (!j.login_module) {
        snprintf(err, errlen, "expected a login module class name");
        goto fail;
    }
    flag = token(&x);
    if (!flag || (strcmp(flag, "required") && strcmp(flag, "requisite") &&
                  strcmp(flag, "sufficient") && strcmp(flag, "optional"))) {
        snprintf(err, errlen, "expected required, requisite, sufficient or optional after %s",
                 j.login_module);
        goto fail;
    }
    for (;;) {
        skip_space(&x);
        if (*x.p == ';') {
            x.p++;
            break;
        }
        char *name = token(&x);
        if (!name) {
            snprintf(err, errlen, "expected an option name or ';' at character %d",
                     (int)(x.p - text) + 1);
            goto fail;
        }
        skip_space(&x);
        if (*x.p != '=') {
            snprintf(err, errlen, "option %s: expected '='", name);
            free(name);
            goto fail;
        }
        x.p++;
        char *value = token(&x);
        if (!value) {
            snprintf(err, errlen, "option %s: %s", name,
                     x.bad ? "its quoted value does not end" : "expected a value");
            free(name);
            goto fail;
        }
        j.options = st_realloc(j.options, (size_t)(j.noptions + 1) * sizeof *j.options);
        j.options[j.noptions].name = name;
        j.options[j.noptions].value = value;
        j.noptions++;
    }
    skip_space(&x);
    if (*x.p) {
        snprintf(err, errlen, "one login module only: something follows its ';'");
        goto fail;
    }
    free(flag);
    *out = j;
    return ST_OK;
fail:
    free(flag);
    st_jaas_fini(&j);
    return ST_E_CONFIG;
}

const char *st_jaas_get(const st_jaas_t *j, const char *name) {
    for (int i = 0; i < j->noptions; i++)
        if (!strcmp(j->options[i].name, name)) return j->options[i].value;
    return NULL;
}

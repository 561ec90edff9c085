/*
 * config.c - settings driven by descriptor tables (st_cfg_desc_t).
 *
 * Values are parsed strictly: a number with trailing junk, a value outside
 * the row's bounds or a key not in the table is refused with a message that
 * names the key.  String fields are owned by the struct they live in.
 */
#include "st_base.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

const char *st_cfg_type_name(st_cfg_type_t type) {
    switch (type) {
    case ST_CFG_INT: return "int";
    case ST_CFG_LONG: return "long";
    case ST_CFG_BOOL: return "boolean";
    case ST_CFG_STRING: return "string";
    case ST_CFG_DOUBLE: return "double";
    }
    return "?";
}

const st_cfg_desc_t *st_cfg_lookup(const st_cfg_table_t *t, const char *name) {
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->rows[i].name, name) == 0) return &t->rows[i];
    return NULL;
}

static int parse_i64(const char *s, int64_t *out) {
    if (!*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out) {
    if (!strcasecmp(s, "true")) *out = 1;
    else if (!strcasecmp(s, "false")) *out = 0;
    else return -1;
    return 0;
}

st_err_t st_cfg_check_value(const st_cfg_desc_t *d, const char *value, char *err,
                            size_t errlen) {
    int64_t v;
    int b;
    double dv;
    char *end;
    switch (d->type) {
    case ST_CFG_INT:
    case ST_CFG_LONG:
        if (parse_i64(value, &v)) {
            snprintf(err, errlen, "%s: '%s' is not a whole number", d->name, value);
            return ST_E_CONFIG;
        }
        if (d->type == ST_CFG_INT && (v < INT32_MIN || v > INT32_MAX)) {
            snprintf(err, errlen, "%s: %s does not fit in an int", d->name, value);
            return ST_E_CONFIG;
        }
        if (v < d->min || v > d->max) {
            snprintf(err, errlen, "%s: %s is outside [%lld, %lld]", d->name, value,
                     (long long)d->min, (long long)d->max);
            return ST_E_CONFIG;
        }
        break;
    case ST_CFG_BOOL:
        if (parse_bool(value, &b)) {
            snprintf(err, errlen, "%s: '%s' is not true or false", d->name, value);
            return ST_E_CONFIG;
        }
        break;
    case ST_CFG_DOUBLE:
        errno = 0;
        dv = strtod(value, &end);
        if (!*value || *end || errno || dv < (double)d->min || dv > (double)d->max) {
            snprintf(err, errlen, "%s: '%s' is not a number in [%lld, %lld]", d->name, value,
                     (long long)d->min, (long long)d->max);
            return ST_E_CONFIG;
        }
        break;
    case ST_CFG_STRING:
        break;
    }
    if (d->validate) {
        char why[256] = "";
        if (d->validate(value, why, sizeof why)) {
            snprintf(err, errlen, "%s: '%s' %s", d->name, value, why);
            return ST_E_CONFIG;
        }
    }
    return ST_OK;
}

static void store(const st_cfg_desc_t *d, void *obj, const char *value) {
    char *field = (char *)obj + d->offset;
    int64_t v = 0;
    switch (d->type) {
    case ST_CFG_INT:
        parse_i64(value, &v);
        *(int32_t *)field = (int32_t)v;
        break;
    case ST_CFG_LONG:
        parse_i64(value, &v);
        *(int64_t *)field = v;
        break;
    case ST_CFG_BOOL:
        parse_bool(value, (int *)field);
        break;
    case ST_CFG_DOUBLE:
        *(double *)field = strtod(value, NULL);
        break;
    case ST_CFG_STRING:
        free(*(char **)field);
        *(char **)field = st_strdup(value);
        break;
    }
}

st_err_t st_cfg_defaults(const st_cfg_table_t *t, void *obj, char *err, size_t errlen) {
    for (size_t i = 0; i < t->count; i++) {
        const st_cfg_desc_t *d = &t->rows[i];
        if (!d->def) {
            if (d->type == ST_CFG_STRING) {
                free(*(char **)((char *)obj + d->offset));
                *(char **)((char *)obj + d->offset) = NULL;
            }
            continue;
        }
        st_err_t e = st_cfg_check_value(d, d->def, err, errlen);
        if (e) return e;
        store(d, obj, d->def);
    }
    return ST_OK;
}

st_err_t st_cfg_set(const st_cfg_table_t *t, void *obj, const char *key, const char *value,
                    char *err, size_t errlen) {
    const st_cfg_desc_t *d = st_cfg_lookup(t, key);
    if (!d) {
        snprintf(err, errlen, "%s: unknown configuration key", key);
        return ST_E_CONFIG;
    }
    st_err_t e = st_cfg_check_value(d, value, err, errlen);
    if (e) return e;
    store(d, obj, value);
    return ST_OK;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

st_err_t st_cfg_bind_set(const st_cfg_bind_t *b, size_t nb, const char *key, const char *value,
                         char *err, size_t errlen) {
    for (size_t i = 0; i < nb; i++)
        if (b[i].table && st_cfg_lookup(b[i].table, key))
            return st_cfg_set(b[i].table, b[i].obj, key, value, err, errlen);
    for (size_t i = 0; i < nb; i++) {
        if (!b[i].other) continue;
        st_err_t e = b[i].other(b[i].obj, key, value, err, errlen);
        if (e != ST_E_NOT_FOUND) return e;
    }
    snprintf(err, errlen, "%s: unknown configuration key", key);
    return ST_E_CONFIG;
}

static st_err_t set_kv(const st_cfg_bind_t *b, size_t nb, char *line, const char *where,
                       char *err, size_t errlen) {
    char *eq = strchr(line, '=');
    if (!eq) {
        snprintf(err, errlen, "%s: expected key=value, got '%s'", where, line);
        return ST_E_CONFIG;
    }
    *eq = 0;
    char *key = trim(line), *value = trim(eq + 1);
    if (!*key) {
        snprintf(err, errlen, "%s: empty key", where);
        return ST_E_CONFIG;
    }
    char inner[512];
    st_err_t e = st_cfg_bind_set(b, nb, key, value, inner, sizeof inner);
    if (e) snprintf(err, errlen, "%s: %s", where, inner);
    return e;
}

st_err_t st_cfg_load_file(const st_cfg_bind_t *b, size_t nb, const char *path, char *err,
                          size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return ST_E_CONFIG;
    }
    char line[8192];
    int lineno = 0;
    st_err_t e = ST_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == '!') continue;
        char where[600];
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        e = set_kv(b, nb, s, where, err, errlen);
        if (e) break;
    }
    fclose(f);
    return e;
}

st_err_t st_cfg_override(const st_cfg_bind_t *b, size_t nb, const char *kv, char *err,
                         size_t errlen) {
    char *copy = st_strdup(kv);
    st_err_t e = set_kv(b, nb, copy, "--override", err, errlen);
    free(copy);
    return e;
}

void st_cfg_format(const st_cfg_desc_t *d, const void *obj, char *out, size_t outlen) {
    const char *field = (const char *)obj + d->offset;
    switch (d->type) {
    case ST_CFG_INT: snprintf(out, outlen, "%d", *(const int32_t *)field); break;
    case ST_CFG_LONG: snprintf(out, outlen, "%lld", (long long)*(const int64_t *)field); break;
    case ST_CFG_BOOL: snprintf(out, outlen, "%s", *(const int *)field ? "true" : "false"); break;
    case ST_CFG_DOUBLE: snprintf(out, outlen, "%g", *(const double *)field); break;
    case ST_CFG_STRING: {
        const char *s = *(char *const *)field;
        snprintf(out, outlen, "%s", s ? s : "");
        break;
    }
    }
}

void st_cfg_fini(const st_cfg_table_t *t, void *obj) {
    for (size_t i = 0; i < t->count; i++) {
        if (t->rows[i].type != ST_CFG_STRING) continue;
        char **p = (char **)((char *)obj + t->rows[i].offset);
        free(*p);
        *p = NULL;
    }
}

void st_cfg_copy(const st_cfg_table_t *t, void *dst, const void *src) {
    for (size_t i = 0; i < t->count; i++) {
        const st_cfg_desc_t *d = &t->rows[i];
        char *df = (char *)dst + d->offset;
        const char *sf = (const char *)src + d->offset;
        switch (d->type) {
        case ST_CFG_INT: memcpy(df, sf, sizeof(int32_t)); break;
        case ST_CFG_LONG: memcpy(df, sf, sizeof(int64_t)); break;
        case ST_CFG_BOOL: memcpy(df, sf, sizeof(int)); break;
        case ST_CFG_DOUBLE: memcpy(df, sf, sizeof(double)); break;
        case ST_CFG_STRING: {
            const char *s = *(char *const *)sf;
            free(*(char **)df);
            *(char **)df = s ? st_strdup(s) : NULL;
            break;
        }
        }
    }
}

static void range_text(const st_cfg_desc_t *d, char *out, size_t n) {
    out[0] = 0;
    if (d->type != ST_CFG_INT && d->type != ST_CFG_LONG && d->type != ST_CFG_DOUBLE) return;
    char lo[32] = "", hi[32] = "";
    if (d->min != INT64_MIN && !(d->type == ST_CFG_INT && d->min == INT32_MIN))
        snprintf(lo, sizeof lo, "%lld", (long long)d->min);
    if (d->max != INT64_MAX && !(d->type == ST_CFG_INT && d->max == INT32_MAX))
        snprintf(hi, sizeof hi, "%lld", (long long)d->max);
    if (*lo && *hi) snprintf(out, n, "[%s, %s]", lo, hi);
    else if (*lo) snprintf(out, n, ">= %s", lo);
    else if (*hi) snprintf(out, n, "<= %s", hi);
}

void st_cfg_doc_markdown(const st_cfg_table_t *t, FILE *out) {
    fprintf(out, "| key | type | default | valid | dynamic | description |\n");
    fprintf(out, "|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < t->count; i++) {
        const st_cfg_desc_t *d = &t->rows[i];
        char range[96];
        range_text(d, range, sizeof range);
        fprintf(out, "| `%s` | %s | %s%s%s | %s | %s | %s |\n", d->name, st_cfg_type_name(d->type),
                d->def && *d->def ? "`" : "", d->def ? (*d->def ? d->def : "(empty)") : "(none)",
                d->def && *d->def ? "`" : "", range, d->dynamic ? "yes" : "no", d->doc);
    }
}

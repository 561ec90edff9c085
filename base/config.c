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
#include <string.h>
#include <strings.h>

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

/* "key = value" split in place (both trimmed); err names where. */
static st_err_t split_line(char *line, const char *where, char **key, char **value, char *err,
                           size_t errlen) {
    char *eq = strchr(line, '=');
    if (!eq) {
        snprintf(err, errlen, "%s: expected key=value, got '%s'", where, line);
        return ST_E_CONFIG;
    }
    *eq = 0;
    *key = trim(line);
    *value = trim(eq + 1);
    if (!**key) {
        snprintf(err, errlen, "%s: empty key", where);
        return ST_E_CONFIG;
    }
    return ST_OK;
}

static st_err_t set_kv(const st_cfg_bind_t *b, size_t nb, char *line, const char *where,
                       char *err, size_t errlen) {
    char *key, *value;
    st_err_t se = split_line(line, where, &key, &value, err, errlen);
    if (se) return se;
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

int st_cfg_is_secret(const char *name) {
    static const char *const parts[] = {"password", "secret", "session.token"};
    for (size_t i = 0; i < ST_ARRAY_SIZE(parts); i++)
        if (strcasestr(name, parts[i])) return 1;
    size_t n = strlen(name), k = strlen("jaas.config");
    return n >= k && !strcasecmp(name + n - k, "jaas.config");
}

/* ---- the whole load, with config providers ------------------------------- */

typedef struct kv {
    char *key, *value, *where;
} kv_t;

typedef struct kvs {
    kv_t *v;
    int n;
} kvs_t;

static void kvs_add(kvs_t *l, const char *k, const char *v, const char *where) {
    l->v = st_realloc(l->v, sizeof *l->v * (size_t)(l->n + 1));
    l->v[l->n++] = (kv_t){st_strdup(k), st_strdup(v), st_strdup(where)};
}

static void kvs_free(kvs_t *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].key);
        if (l->v[i].value) memset(l->v[i].value, 0, strlen(l->v[i].value));
        free(l->v[i].value);
        free(l->v[i].where);
    }
    free(l->v);
}

static st_err_t split_kv(char *line, const char *where, kvs_t *out, char *err, size_t errlen) {
    char *key, *value;
    st_err_t e = split_line(line, where, &key, &value, err, errlen);
    if (!e) kvs_add(out, key, value, where);
    return e;
}

static const char *kvs_get(const kvs_t *l, const char *key) {
    const char *v = NULL;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].key, key)) v = l->v[i].value; /* the last one wins */
    return v;
}

enum { PROV_FILE = 1, PROV_ENV, PROV_DIR };

/* The kind of provider `name` (config.providers.<name>.class), or 0. */
static int provider_kind(const kvs_t *l, const char *name, size_t len) {
    const char *list = kvs_get(l, "config.providers");
    if (!list) return 0;
    int listed = 0;
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ') p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ') e++;
        listed |= (size_t)(e - p) == len && !memcmp(p, name, len);
        p = e;
    }
    if (!listed) return 0;
    char key[128];
    snprintf(key, sizeof key, "config.providers.%.*s.class", (int)len, name);
    const char *cls = kvs_get(l, key);
    if (!cls) return 0;
    if (!strcmp(cls, "org.apache.kafka.common.config.provider.FileConfigProvider")) return PROV_FILE;
    if (!strcmp(cls, "org.apache.kafka.common.config.provider.EnvVarConfigProvider")) return PROV_ENV;
    if (!strcmp(cls, "org.apache.kafka.common.config.provider.DirectoryConfigProvider")) return PROV_DIR;
    return 0;
}

/* A file provider's key: the value of key in the properties file at path. */
static char *file_key(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char line[8192];
    char *found = NULL;
    while (fgets(line, sizeof line, f)) {
        char *s = trim(line), *eq = strchr(s, '=');
        if (!*s || *s == '#' || *s == '!' || !eq) continue;
        *eq = 0;
        if (!strcmp(trim(s), key)) {
            free(found);
            found = st_strdup(trim(eq + 1));
        }
    }
    memset(line, 0, sizeof line);
    fclose(f);
    return found;
}

/* value with every ${provider:[path:]key} replaced; NULL with err naming
 * the setting when one cannot be. */
static char *resolve(const kvs_t *l, const kv_t *kv, char *err, size_t errlen) {
    st_buf_t out;
    st_buf_init(&out);
    const char *p = kv->value;
    while (*p) {
        const char *open = strstr(p, "${");
        const char *close = open ? strchr(open, '}') : NULL;
        if (!open || !close) {
            st_buf_put(&out, p, strlen(p));
            break;
        }
        st_buf_put(&out, p, (size_t)(open - p));
        const char *body = open + 2, *c1 = memchr(body, ':', (size_t)(close - body));
        int kind = c1 ? provider_kind(l, body, (size_t)(c1 - body)) : 0;
        if (!kind) { /* not a provider reference: kept as written */
            st_buf_put(&out, open, (size_t)(close + 1 - open));
            p = close + 1;
            continue;
        }
        const char *rest = c1 + 1, *c2 = memchr(rest, ':', (size_t)(close - rest));
        char *path = c2 ? st_strndup(rest, (size_t)(c2 - rest)) : NULL;
        char *key = c2 ? st_strndup(c2 + 1, (size_t)(close - c2 - 1))
                       : st_strndup(rest, (size_t)(close - rest));
        char *val = NULL;
        const char *what = "";
        if (kind == PROV_ENV) {
            const char *e = getenv(key);
            val = e ? st_strdup(e) : NULL;
            what = "the environment has no such variable";
        } else if (!path) {
            what = "a file or directory provider needs ${provider:path:key}";
        } else if (kind == PROV_FILE) {
            val = file_key(path, key);
            what = "the file cannot be read or has no such key";
        } else {
            char *full = st_strprintf("%s/%s", path, key);
            size_t n = 0;
            if (st_read_file(full, &val, &n) == ST_OK) {
                while (n && (val[n - 1] == '\n' || val[n - 1] == '\r')) val[--n] = 0;
            } else {
                val = NULL;
            }
            free(full);
            what = "the directory has no such file";
        }
        if (!val) {
            snprintf(err, errlen, "%s: %s: ${%.*s:...} cannot be resolved: %s", kv->where, kv->key,
                     (int)(c1 - body), body, what);
            free(path);
            free(key);
            if (out.data) memset(out.data, 0, out.len);
            st_buf_fini(&out);
            return NULL;
        }
        st_buf_put(&out, val, strlen(val));
        memset(val, 0, strlen(val));
        free(val);
        free(path);
        free(key);
        p = close + 1;
    }
    st_buf_put(&out, "", 1);
    char *s = st_strdup((const char *)out.data);
    memset(out.data, 0, out.len);
    st_buf_fini(&out);
    return s;
}

st_err_t st_cfg_load(const st_cfg_bind_t *b, size_t nb, const char *path, char *const *overrides,
                     int noverrides, char *err, size_t errlen) {
    kvs_t l = {0};
    st_err_t e = ST_OK;
    if (path) {
        FILE *f = fopen(path, "r");
        if (!f) {
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
            return ST_E_CONFIG;
        }
        char line[8192];
        int lineno = 0;
        while (!e && fgets(line, sizeof line, f)) {
            lineno++;
            char *s = trim(line);
            if (!*s || *s == '#' || *s == '!') continue;
            char where[600];
            snprintf(where, sizeof where, "%s:%d", path, lineno);
            e = split_kv(s, where, &l, err, errlen);
        }
        memset(line, 0, sizeof line);
        fclose(f);
    }
    for (int i = 0; !e && i < noverrides; i++) {
        char *copy = st_strdup(overrides[i]);
        e = split_kv(copy, "--override", &l, err, errlen);
        memset(copy, 0, strlen(copy));
        free(copy);
    }
    for (int i = 0; !e && i < l.n; i++) {
        const kv_t *kv = &l.v[i];
        if (!strncmp(kv->key, "config.providers", 16)) continue; /* the loader's own */
        char *value = resolve(&l, kv, err, errlen);
        if (!value) {
            e = ST_E_CONFIG;
            break;
        }
        char inner[512];
        e = st_cfg_bind_set(b, nb, kv->key, value, inner, sizeof inner);
        if (e) snprintf(err, errlen, "%s: %s", kv->where, inner);
        memset(value, 0, strlen(value));
        free(value);
    }
    kvs_free(&l);
    return e;
}

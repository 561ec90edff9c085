/*
 * objectstore.c - what every backend shares: opening the configured
 * backend, copying and checking a request at submit, completing it exactly
 * once, and the blocking wrapper.
 *
 * Invariants:
 *   - a request is completed by exactly one call of st_os__complete, on a
 *     backend thread; after the callback returns its memory is gone unless
 *     st_os_run keeps it for its waiter;
 *   - res.message never holds a credential: backends build messages from
 *     keys, bucket, endpoint host and server error codes only.
 */
#include "objectstore_int.h"

#include <stdlib.h>

const char *st_os_op_name(st_os_op_t op) {
    switch (op) {
    case ST_OS_PUT: return "put";
    case ST_OS_GET: return "get";
    case ST_OS_HEAD: return "head";
    case ST_OS_LIST: return "list";
    case ST_OS_DELETE: return "delete";
    case ST_OS_DELETE_BATCH: return "delete-batch";
    case ST_OS_CHECK: return "check";
    case ST_OS_COPY: return "copy";
    }
    return "?";
}

const char *st_os_class_name(st_os_class_t c) {
    switch (c) {
    case ST_OS_CLASS_WRITE: return "write";
    case ST_OS_CLASS_READ: return "read";
    case ST_OS_CLASS_FREE: return "free";
    }
    return "?";
}

/* ------------------------------------------------------------------------
 * Accounting and the cost estimate
 * ---------------------------------------------------------------------- */

void st_os_account_init(st_os_account_t *a) { memset(a, 0, sizeof *a); }

static void usage_read(const st_os_usage_t *n, st_os_usage_t *out) {
    for (int c = 0; c < ST_OS_NCLASSES; c++)
        out->requests[c] = __atomic_load_n(&n->requests[c], __ATOMIC_RELAXED);
    out->bytes_out = __atomic_load_n(&n->bytes_out, __ATOMIC_RELAXED);
    out->bytes_in = __atomic_load_n(&n->bytes_in, __ATOMIC_RELAXED);
}

void st_os_account_read(const st_os_account_t *a, st_os_usage_t *out) { usage_read(&a->n, out); }

void st_os__count_requests(st_os_req_t *req, st_os_class_t cls, uint64_t n) {
    if ((int)cls < 0 || cls >= ST_OS_NCLASSES || !n) return;
    __atomic_add_fetch(&req->os->n_class[cls], n, __ATOMIC_RELAXED);
    if (req->rq.account)
        __atomic_add_fetch(&req->rq.account->n.requests[cls], n, __ATOMIC_RELAXED);
}

void st_os__count_bytes(st_os_req_t *req, uint64_t out, uint64_t in) {
    st_os_account_t *a = req->rq.account;
    if (out) {
        atomic_fetch_add(&req->os->n_bytes_out, out);
        if (a) __atomic_add_fetch(&a->n.bytes_out, out, __ATOMIC_RELAXED);
    }
    if (in) {
        atomic_fetch_add(&req->os->n_bytes_in, in);
        if (a) __atomic_add_fetch(&a->n.bytes_in, in, __ATOMIC_RELAXED);
    }
}

void st_os_prices_from_config(const st_os_config_t *cfg, st_os_prices_t *out) {
    memset(out, 0, sizeof *out);
    out->per_1000[ST_OS_CLASS_WRITE] = cfg->cost_write_per_1000;
    out->per_1000[ST_OS_CLASS_READ] = cfg->cost_read_per_1000;
    out->per_1000[ST_OS_CLASS_FREE] = 0;
    out->storage_gib_month = cfg->cost_storage_gib_month;
}

double st_os_request_cost(const st_os_prices_t *p, const st_os_usage_t *u) {
    double d = 0;
    for (int c = 0; c < ST_OS_NCLASSES; c++) d += (double)u->requests[c] * p->per_1000[c] / 1000.0;
    return d;
}

double st_os_storage_cost(const st_os_prices_t *p, int64_t bytes) {
    return bytes > 0 ? (double)bytes / (1024.0 * 1024.0 * 1024.0) * p->storage_gib_month : 0;
}

/* ------------------------------------------------------------------------
 * Opening
 * ---------------------------------------------------------------------- */

static void take_env(char **field, const char *var) {
    if (*field && **field) return;
    const char *v = getenv(var);
    if (!v || !*v) return;
    free(*field);
    *field = st_strdup(v);
}

static st_err_t resolve_config(st_os_config_t *c, char *err, size_t errlen) {
    if (!strcmp(c->backend, "file")) {
        if (!c->file_root || !*c->file_root) {
            st_snprintf_marked(err, errlen, "objectstore.file.root: must name a directory");
            return ST_E_CONFIG;
        }
        return ST_OK;
    }
    if (strcmp(c->backend, "s3") != 0) {
        st_snprintf_marked(err, errlen, "objectstore.backend: '%s' must be file or s3", c->backend);
        return ST_E_CONFIG;
    }
    take_env(&c->s3_access_key, "AWS_ACCESS_KEY_ID");
    take_env(&c->s3_secret_key, "AWS_SECRET_ACCESS_KEY");
    take_env(&c->s3_session_token, "AWS_SESSION_TOKEN");
    take_env(&c->s3_region, "AWS_REGION");
    take_env(&c->s3_region, "AWS_DEFAULT_REGION");
    if (!*c->s3_region) {
        free(c->s3_region);
        c->s3_region = st_strdup("us-east-1");
    }
    if (!*c->s3_bucket) {
        st_snprintf_marked(err, errlen, "objectstore.s3.bucket: must be set when objectstore.backend=s3");
        return ST_E_CONFIG;
    }
    if (!*c->s3_access_key || !*c->s3_secret_key) {
        snprintf(err, errlen,
                 "objectstore.s3.access.key / objectstore.s3.secret.key: not set, and "
                 "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not in the environment");
        return ST_E_CONFIG;
    }
    for (const char *p = c->s3_region; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) {
            st_snprintf_marked(err, errlen, "objectstore.s3.region: '%s' is not a region name",
                     c->s3_region);
            return ST_E_CONFIG;
        }
    }
    if (c->s3_retry_backoff_max_ms < c->s3_retry_backoff_ms) {
        snprintf(err, errlen,
                 "objectstore.s3.retry.backoff.max.ms: %d is below "
                 "objectstore.s3.retry.backoff.ms (%d)",
                 c->s3_retry_backoff_max_ms, c->s3_retry_backoff_ms);
        return ST_E_CONFIG;
    }
    return ST_OK;
}

st_err_t st_os_new(const st_os_config_t *cfg, st_os_t **out, char *err, size_t errlen) {
    st_os_t *os = st_calloc(1, sizeof *os);
    st_cfg_copy(&st_os_config_table, &os->cfg, cfg);
    st_err_t e = resolve_config(&os->cfg, err, errlen);
    if (e) goto fail;
    os->ops = !strcmp(os->cfg.backend, "s3") ? &st_os_s3_ops : &st_os_file_ops;
    e = os->ops->open(os, err, errlen);
    if (e) goto fail;
    *out = os;
    return ST_OK;
fail:
    st_os_config_fini(&os->cfg);
    free(os);
    return e;
}

void st_os_destroy(st_os_t *os) {
    if (!os) return;
    os->ops->close(os);
    st_os_config_fini(&os->cfg);
    free(os);
}

const char *st_os_backend_name(const st_os_t *os) { return os->ops->name; }

const char *st_os_describe(const st_os_t *os) { return os->describe; }

void st_os_get_stats(const st_os_t *os, st_os_stats_t *out) {
    out->requests = atomic_load(&os->n_requests);
    out->attempts = atomic_load(&os->n_attempts);
    out->retries = atomic_load(&os->n_retries);
    out->bytes_out = atomic_load(&os->n_bytes_out);
    out->bytes_in = atomic_load(&os->n_bytes_in);
    for (int c = 0; c < ST_OS_NCLASSES; c++)
        out->class_requests[c] = __atomic_load_n(&os->n_class[c], __ATOMIC_RELAXED);
}

void st_os_get_prices(const st_os_t *os, st_os_prices_t *out) {
    st_os_prices_from_config(&os->cfg, out);
}

void st_os_get_op_stats(const st_os_t *os, st_os_op_t op, st_os_op_stats_t *out) {
    memset(out, 0, sizeof *out);
    if ((int)op < 0 || op >= ST_OS_NOPS) return;
    st_histo_read(&os->op_time[op], &out->time);
    out->errors = __atomic_load_n(&os->op_errors[op], __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------
 * Requests
 * ---------------------------------------------------------------------- */

char *st_os__strdup(st_os_req_t *req, const char *s) {
    if (!s) return NULL;
    return st_arena_strndup(&req->arena, s, strlen(s));
}

void *st_os__alloc(st_os_req_t *req, size_t n) { return st_arena_alloc(&req->arena, n); }

const char *st_os__full_key(st_os_req_t *req, const char *prefix, const char *key) {
    if (!prefix || !*prefix) return key;
    size_t a = strlen(prefix), b = strlen(key);
    char *s = st_os__alloc(req, a + b + 1);
    memcpy(s, prefix, a);
    memcpy(s + a, key, b + 1);
    return s;
}

int st_os__meta_name_ok(const char *name) {
    if (!name || !*name || strlen(name) > 128) return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) return 0;
    return 1;
}

int st_os__meta_value_ok(const char *value) {
    if (!value || strlen(value) > 1024) return 0;
    for (const unsigned char *p = (const unsigned char *)value; *p; p++)
        if (*p < 0x20 || *p > 0x7e) return 0;
    return 1;
}

/* Keys: 1 to 1024 bytes, no control characters (XML 1.0 cannot carry most
 * of them, so S3 batch deletes and listings could not name such a key). */
static int key_ok(const char *key, char *why, size_t n) {
    if (!key || !*key) {
        snprintf(why, n, "the key is empty");
        return 0;
    }
    size_t len = strlen(key);
    if (len > ST_OS_KEY_MAX) {
        snprintf(why, n, "the key is %zu bytes long (at most %d)", len, ST_OS_KEY_MAX);
        return 0;
    }
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            snprintf(why, n, "the key holds a control character (byte %u)", *p);
            return 0;
        }
    }
    return 1;
}

static void fail_early(st_os_req_t *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail_early(st_os_req_t *req, const char *fmt, ...) {
    if (req->early_status) return; /* keep the first reason */
    va_list ap;
    va_start(ap, fmt);
    free(req->msg);
    req->msg = st_vstrprintf(fmt, ap);
    va_end(ap);
    req->early_status = ST_E_PERMANENT;
}

static void copy_and_check(st_os_req_t *req, const st_os_request_t *in) {
    st_os_request_t *rq = &req->rq;
    char why[256];
    *rq = *in;
    rq->key = st_os__strdup(req, in->key);
    rq->prefix = st_os__strdup(req, in->prefix ? in->prefix : "");
    rq->token = st_os__strdup(req, in->token);
    rq->src.path = st_os__strdup(req, in->src.path);
    rq->sink.path = st_os__strdup(req, in->sink.path);
    rq->if_match = st_os__strdup(req, in->if_match);
    rq->copy_source = st_os__strdup(req, in->copy_source);
    rq->meta = NULL;
    rq->nmeta = 0;
    rq->keys = NULL;
    rq->nkeys = 0;
    req->res.key = rq->key;

    switch (in->op) {
    case ST_OS_PUT:
    case ST_OS_GET:
    case ST_OS_HEAD:
    case ST_OS_DELETE:
        if (!key_ok(in->key, why, sizeof why))
            fail_early(req, "%s: %s", st_os_op_name(in->op), why);
        break;
    case ST_OS_COPY:
        if (!key_ok(in->key, why, sizeof why))
            fail_early(req, "copy: %s", why);
        else if (!in->copy_source || !key_ok(in->copy_source, why, sizeof why))
            fail_early(req, "copy to %s: the source: %s", in->key,
                       in->copy_source ? why : "none given");
        else if (!strcmp(in->copy_source, in->key))
            fail_early(req, "copy %s: onto itself", in->key);
        break;
    case ST_OS_LIST:
    case ST_OS_DELETE_BATCH:
    case ST_OS_CHECK:
        break;
    default:
        fail_early(req, "unknown object store operation %d", (int)in->op);
        return;
    }

    if (in->op == ST_OS_PUT) {
        if (in->src.kind == ST_OS_SRC_MEM) {
            if (!in->src.data && in->src.length)
                fail_early(req, "put %s: no data for %llu bytes", in->key,
                           (unsigned long long)in->src.length);
            if (in->src.length == ST_OS_TO_END)
                fail_early(req, "put %s: a memory source needs a length", in->key);
        } else if (in->src.kind == ST_OS_SRC_FILE) {
            if (!in->src.path || !*in->src.path)
                fail_early(req, "put %s: the source file has no path", in->key);
        } else {
            fail_early(req, "put %s: unknown source kind %d", in->key, (int)in->src.kind);
        }
        if (in->if_match && in->if_none_match)
            fail_early(req, "put %s: both if_match and if_none_match", in->key);
        if (in->if_match && (!*in->if_match || strpbrk(in->if_match, "\"\r\n")))
            fail_early(req, "put %s: if_match is not an ETag", in->key);
        if (in->nmeta > 32) fail_early(req, "put %s: more than 32 metadata entries", in->key);
        if (in->nmeta && !in->meta) fail_early(req, "put %s: metadata array missing", in->key);
        if (!req->early_status && in->nmeta) {
            st_os_meta_t *m = st_os__alloc(req, in->nmeta * sizeof *m);
            size_t total = 0;
            for (size_t i = 0; i < in->nmeta; i++) {
                if (!st_os__meta_name_ok(in->meta[i].name) ||
                    !strcmp(in->meta[i].name, ST_OS_CRC_META)) {
                    fail_early(req, "put %s: metadata name '%s' is reserved or not [a-z0-9-]+",
                               in->key, in->meta[i].name ? in->meta[i].name : "");
                    break;
                }
                if (!st_os__meta_value_ok(in->meta[i].value)) {
                    fail_early(req, "put %s: metadata '%s' has a value that is not printable "
                                    "ASCII (or is over 1024 bytes)",
                               in->key, in->meta[i].name);
                    break;
                }
                total += strlen(in->meta[i].name) + strlen(in->meta[i].value);
                m[i].name = st_os__strdup(req, in->meta[i].name);
                m[i].value = st_os__strdup(req, in->meta[i].value);
            }
            /* S3 allows 2 KB of user metadata; keep room for ours. */
            if (total > 1900) fail_early(req, "put %s: metadata over 1900 bytes", in->key);
            rq->meta = m;
            rq->nmeta = in->nmeta;
        }
    }

    if (in->op == ST_OS_GET) {
        if (in->length == 0) fail_early(req, "get %s: empty range", in->key);
        else if (in->length != ST_OS_TO_END && in->offset + in->length < in->offset)
            fail_early(req, "get %s: range overflows", in->key);
        switch (in->sink.kind) {
        case ST_OS_SINK_ALLOC: break;
        case ST_OS_SINK_MEM:
            if (!in->sink.buf || !in->sink.capacity)
                fail_early(req, "get %s: memory sink without a buffer", in->key);
            else if (in->length == ST_OS_TO_END || in->length > in->sink.capacity)
                rq->length = in->sink.capacity; /* at most what fits */
            break;
        case ST_OS_SINK_FILE:
            if (!in->sink.path || !*in->sink.path)
                fail_early(req, "get %s: file sink without a path", in->key);
            break;
        case ST_OS_SINK_FD:
            if (in->sink.fd < 0) fail_early(req, "get %s: descriptor sink without one", in->key);
            break;
        default: fail_early(req, "get %s: unknown sink kind %d", in->key, (int)in->sink.kind);
        }
    }

    if (in->op == ST_OS_LIST) {
        if (strlen(rq->prefix) > ST_OS_KEY_MAX) fail_early(req, "list: prefix too long");
        if (rq->max_keys <= 0 || rq->max_keys > ST_OS_LIST_MAX_KEYS)
            rq->max_keys = ST_OS_LIST_MAX_KEYS;
    }

    if (in->op == ST_OS_DELETE_BATCH && in->nkeys) {
        if (!in->keys) {
            fail_early(req, "delete-batch: key array missing");
            return;
        }
        const char **keys = st_os__alloc(req, in->nkeys * sizeof *keys);
        for (size_t i = 0; i < in->nkeys; i++) {
            if (!key_ok(in->keys[i], why, sizeof why)) {
                fail_early(req, "delete-batch: key %zu: %s", i, why);
                break;
            }
            keys[i] = st_os__strdup(req, in->keys[i]);
        }
        rq->keys = keys;
        rq->nkeys = in->nkeys;
    }
}

st_os_req_t *st_os__req_new(st_os_t *os, const st_os_request_t *rq, st_os_done_cb cb,
                            void *arg) {
    st_os_req_t *req = st_calloc(1, sizeof *req);
    st_arena_init(&req->arena, 4096);
    req->os = os;
    req->cb = cb;
    req->arg = arg;
    req->start_us = st_mono_us();
    req->res.op = rq->op;
    req->res.message = "";
    req->res.attempts = 0;
    copy_and_check(req, rq);
    atomic_fetch_add(&os->n_requests, 1);
    return req;
}

void st_os__complete(st_os_req_t *req, st_err_t status, const char *fmt, ...) {
    char *msg;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        msg = st_vstrprintf(fmt, ap); /* may read the old req->msg */
        va_end(ap);
    } else {
        msg = st_strdup("");
    }
    free(req->msg);
    req->msg = msg;
    req->res.status = status;
    req->res.message = req->msg;
    req->res.elapsed_us = st_mono_us() - req->start_us;
    if ((int)req->rq.op >= 0 && req->rq.op < ST_OS_NOPS) {
        st_os_t *os = req->os;
        st_histo_observe(&os->op_time[req->rq.op], req->res.elapsed_us);
        if (status != ST_OK && status != ST_E_NOT_FOUND)
            __atomic_add_fetch(&os->op_errors[req->rq.op], 1, __ATOMIC_RELAXED);
    }
    if (status != ST_OK && status != ST_E_NOT_FOUND)
        ST_DEBUG(ST_OS_SUBSYS, "%s %s: %s", st_os_op_name(req->rq.op),
                 req->rq.key ? req->rq.key : "", req->msg);
    /* Read before the callback: a waiter may free the record as soon as
     * the callback has signalled it. */
    int keep = req->keep;
    if (req->cb) req->cb(&req->res, req->arg);
    if (!keep) st_os_result_free(&req->res);
}

void st_os__complete_early(st_os_req_t *req) {
    st_os__complete(req, req->early_status, "%s", req->msg ? req->msg : "");
}

void st_os_submit(st_os_t *os, const st_os_request_t *rq, st_os_done_cb cb, void *arg) {
    st_os_req_t *req = st_os__req_new(os, rq, cb, arg);
    os->ops->submit(os, req);
}

/* ------------------------------------------------------------------------
 * Blocking wrapper
 * ---------------------------------------------------------------------- */

typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
} waiter_t;

static void wake_waiter(st_os_result_t *res, void *arg) {
    (void)res;
    waiter_t *w = arg;
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

st_os_result_t *st_os_run(st_os_t *os, const st_os_request_t *rq) {
    waiter_t w;
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    w.done = 0;
    st_os_req_t *req = st_os__req_new(os, rq, wake_waiter, &w);
    req->keep = 1;
    os->ops->submit(os, req);
    pthread_mutex_lock(&w.lock);
    while (!w.done) pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
    return &req->res;
}

void st_os_result_free(st_os_result_t *res) {
    if (!res) return;
    st_os_req_t *req = (st_os_req_t *)((char *)res - offsetof(st_os_req_t, res));
    if (req->rq.op == ST_OS_GET && req->rq.sink.kind == ST_OS_SINK_ALLOC) free(res->data);
    free(req->msg);
    st_arena_fini(&req->arena);
    free(req);
}

st_err_t st_os_list_each(st_os_t *os, st_os_account_t *account, const char *prefix,
                         st_os_entry_cb each, void *arg, char **why) {
    char *token = NULL;
    st_err_t e = ST_OK;
    *why = NULL;
    do {
        st_os_request_t rq = {.op = ST_OS_LIST, .account = account, .prefix = prefix,
                              .token = token};
        st_os_result_t *r = st_os_run(os, &rq);
        free(token);
        token = NULL;
        e = r->status;
        if (e) {
            *why = st_strdup(r->message ? r->message : st_err_msg(e));
        } else {
            for (size_t i = 0; i < r->nentries; i++) each(&r->entries[i], arg);
            if (r->next_token) token = st_strdup(r->next_token);
        }
        st_os_result_free(r);
    } while (token);
    return e;
}

static void add_key(const st_os_entry_t *entry, void *arg) {
    st_os_keys_t *k = arg;
    if (k->n == k->cap) {
        k->cap = k->cap ? k->cap * 2 : 64;
        k->keys = st_realloc(k->keys, sizeof *k->keys * k->cap);
        k->sizes = st_realloc(k->sizes, sizeof *k->sizes * k->cap);
    }
    k->keys[k->n] = st_strdup(entry->key);
    k->sizes[k->n++] = (int64_t)entry->size;
}

st_err_t st_os_list_keys(st_os_t *os, st_os_account_t *account, const char *prefix,
                         st_os_keys_t *out, char **why) {
    memset(out, 0, sizeof *out);
    st_err_t e = st_os_list_each(os, account, prefix, add_key, out, why);
    if (e) st_os_keys_fini(out);
    return e;
}

void st_os_keys_fini(st_os_keys_t *k) {
    for (size_t i = 0; i < k->n; i++) free(k->keys[i]);
    free(k->keys);
    free(k->sizes);
    memset(k, 0, sizeof *k);
}

st_err_t st_os_check(st_os_t *os, char *err, size_t errlen) {
    st_os_request_t rq = {.op = ST_OS_CHECK};
    st_os_result_t *res = st_os_run(os, &rq);
    st_err_t e = res->status;
    if (e) st_snprintf_marked(err, errlen, "%s: %s", st_os_describe(os), res->message);
    st_os_result_free(res);
    return e;
}

/* ------------------------------------------------------------------------
 * Backoff
 * ---------------------------------------------------------------------- */

static uint64_t rand64(void) {
    static _Thread_local uint64_t s;
    if (!s) {
        st_random_bytes(&s, sizeof s);
        s |= 1;
    }
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

int64_t st_os__backoff_ms(const st_os_config_t *cfg, int n) {
    int64_t cap = cfg->s3_retry_backoff_max_ms;
    int64_t d = cfg->s3_retry_backoff_ms;
    for (int i = 1; i < n && d < cap; i++) d *= 2;
    if (d > cap) d = cap;
    int64_t half = d / 2;
    return half + (int64_t)(rand64() % (uint64_t)(d - half + 1));
}

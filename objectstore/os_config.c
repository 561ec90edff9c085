/*
 * os_config.c - the objectstore.* settings: one descriptor row per key.
 *
 * The table is the single source of the keys, their defaults, bounds and
 * documentation; the README's reference is generated from it.  Checks that
 * involve several keys or the environment (a bucket is needed for s3,
 * credentials from AWS_*) happen in st_os_new, not here.
 */
#include "objectstore_int.h"

#include <stddef.h>
#include <stdlib.h>

static int valid_backend(const char *v, char *why, size_t n) {
    if (!strcmp(v, "file") || !strcmp(v, "s3")) return 0;
    snprintf(why, n, "must be file or s3");
    return 1;
}

static int valid_endpoint(const char *v, char *why, size_t n) {
    if (!*v) return 0; /* empty: AWS's endpoint for the region */
    const char *rest = NULL;
    if (!strncmp(v, "http://", 7)) rest = v + 7;
    else if (!strncmp(v, "https://", 8)) rest = v + 8;
    if (!rest || !*rest || *rest == '/' || *rest == ':') {
        snprintf(why, n, "must look like http://host[:port] or https://host[:port]");
        return 1;
    }
    if (strchr(rest, '@') || strchr(rest, '?') || strchr(rest, '#')) {
        snprintf(why, n, "must not contain credentials, a query or a fragment");
        return 1;
    }
    return 0;
}

/* S3's bucket naming rules, slightly relaxed (upper case and '_' are
 * accepted because some older servers allow them). */
static int valid_bucket(const char *v, char *why, size_t n) {
    size_t len = strlen(v);
    if (len == 0) return 0; /* checked at open when backend=s3 */
    if (len < 3 || len > 63) {
        snprintf(why, n, "must be 3 to 63 characters long");
        return 1;
    }
    for (const char *p = v; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_')) {
            snprintf(why, n, "may hold only letters, digits, '-', '.' and '_'");
            return 1;
        }
    }
    return 0;
}

static int valid_prefix(const char *v, char *why, size_t n) {
    if (*v == '/') {
        snprintf(why, n, "must not start with '/'");
        return 1;
    }
    if (strlen(v) > 512) {
        snprintf(why, n, "is longer than 512 bytes");
        return 1;
    }
    return 0;
}

#define F(field) offsetof(st_os_config_t, field)
#define MIB (1024 * 1024)

static const st_cfg_desc_t os_rows[] = {
    {"objectstore.backend", ST_CFG_STRING, F(backend), "file", 0, 0, valid_backend, 0,
     "Where remote segments go: file (a local directory standing for the bucket) or s3."},
    {"objectstore.file.root", ST_CFG_STRING, F(file_root), "/tmp/strata-bucket", 0, 0, NULL, 0,
     "file backend: the directory that stands for the bucket."},
    {"objectstore.file.create.root", ST_CFG_BOOL, F(file_create_root), "true", 0, 0, NULL, 0,
     "file backend: create objectstore.file.root when it does not exist."},
    {"objectstore.file.threads", ST_CFG_INT, F(file_threads), "4", 1, 64, NULL, 0,
     "file backend: worker threads that run requests."},
    {"objectstore.file.fsync", ST_CFG_BOOL, F(file_fsync), "true", 0, 0, NULL, 0,
     "file backend: fsync each object and its directory before a put completes "
     "(turn off only for throwaway data)."},
    {"objectstore.s3.endpoint", ST_CFG_STRING, F(s3_endpoint), "", 0, 0, valid_endpoint, 0,
     "s3 backend: http[s]://host[:port] of the S3 server; empty for AWS "
     "(https://s3.<region>.amazonaws.com)."},
    {"objectstore.s3.bucket", ST_CFG_STRING, F(s3_bucket), "", 0, 0, valid_bucket, 0,
     "s3 backend: the bucket (it must exist)."},
    {"objectstore.s3.region", ST_CFG_STRING, F(s3_region), "", 0, 0, NULL, 0,
     "s3 backend: the signing region; empty: AWS_REGION, AWS_DEFAULT_REGION, then "
     "us-east-1."},
    {"objectstore.s3.prefix", ST_CFG_STRING, F(s3_prefix), "", 0, 0, valid_prefix, 0,
     "s3 backend: put in front of every key (end it with '/' for a folder)."},
    {"objectstore.s3.path.style", ST_CFG_BOOL, F(s3_path_style), "true", 0, 0, NULL, 0,
     "s3 backend: address the bucket in the path (host/bucket/key) rather than "
     "in the host name (bucket.host/key)."},
    {"objectstore.s3.access.key", ST_CFG_STRING, F(s3_access_key), "", 0, 0, NULL, 0,
     "s3 backend: access key id; empty: AWS_ACCESS_KEY_ID."},
    {"objectstore.s3.secret.key", ST_CFG_STRING, F(s3_secret_key), "", 0, 0, NULL, 0,
     "s3 backend: secret access key (never logged); empty: AWS_SECRET_ACCESS_KEY."},
    {"objectstore.s3.session.token", ST_CFG_STRING, F(s3_session_token), "", 0, 0, NULL, 0,
     "s3 backend: session token of temporary credentials; empty: AWS_SESSION_TOKEN."},
    {"objectstore.s3.ca.file", ST_CFG_STRING, F(s3_ca_file), "", 0, 0, NULL, 0,
     "s3 backend: PEM file of the certificate authorities to trust for https; "
     "empty: the system's."},
    {"objectstore.s3.part.size.bytes", ST_CFG_LONG, F(s3_part_size_bytes), "8388608", 5 * MIB,
     (int64_t)5 * 1024 * MIB, NULL, 0,
     "s3 backend: multipart part size; larger objects are uploaded in parts (a tiered "
     "segment in at most 4, larger ones when needed)."},
    {"objectstore.s3.multipart.concurrency", ST_CFG_INT, F(s3_multipart_concurrency), "4", 1,
     64, NULL, 0, "s3 backend: parts of one upload in flight at once."},
    {"objectstore.s3.max.connections", ST_CFG_INT, F(s3_max_connections), "16", 1, 1024, NULL,
     0, "s3 backend: HTTP requests in flight at once (each needs a connection); "
        "idle connections are kept for reuse."},
    {"objectstore.s3.connect.timeout.ms", ST_CFG_INT, F(s3_connect_timeout_ms), "5000", 100,
     600000, NULL, 0, "s3 backend: time allowed to connect (TCP and TLS)."},
    {"objectstore.s3.request.timeout.ms", ST_CFG_INT, F(s3_request_timeout_ms), "120000", 100,
     INT32_MAX, NULL, 0, "s3 backend: time allowed for one attempt of one HTTP request."},
    {"objectstore.s3.stall.timeout.ms", ST_CFG_INT, F(s3_stall_timeout_ms), "30000", 1000,
     INT32_MAX, NULL, 0,
     "s3 backend: an attempt during which no byte moves for this long is abandoned "
     "(rounded up to whole seconds)."},
    {"objectstore.s3.retry.attempts", ST_CFG_INT, F(s3_retry_attempts), "6", 1, 100, NULL, 0,
     "s3 backend: attempts of each HTTP request (the first one included) on errors "
     "that may pass: 5xx, SlowDown, timeouts, connection errors."},
    {"objectstore.s3.retry.backoff.ms", ST_CFG_INT, F(s3_retry_backoff_ms), "100", 1, 600000,
     NULL, 0, "s3 backend: first retry delay; doubles on each retry, with jitter."},
    {"objectstore.s3.retry.backoff.max.ms", ST_CFG_INT, F(s3_retry_backoff_max_ms), "10000", 1,
     3600000, NULL, 0, "s3 backend: longest retry delay."},
    /* S3 Standard's list prices (us-east-1) as defaults; the estimate only
     * reports, so any store's prices may go here. */
    {"objectstore.cost.write.requests.per.1000", ST_CFG_DOUBLE, F(cost_write_per_1000), "0.005",
     0, 1000000, NULL, 0,
     "Cost estimate: dollars per 1,000 write-class requests (S3's PUT, COPY, POST, LIST: puts, "
     "multipart steps, list pages, batch deletes)."},
    {"objectstore.cost.read.requests.per.1000", ST_CFG_DOUBLE, F(cost_read_per_1000), "0.0004",
     0, 1000000, NULL, 0,
     "Cost estimate: dollars per 1,000 read-class requests (S3's GET and all others but "
     "DELETE: ranged reads, HEADs); DELETE is free."},
    {"objectstore.cost.storage.gib.month", ST_CFG_DOUBLE, F(cost_storage_gib_month), "0.023", 0,
     1000000, NULL, 0,
     "Cost estimate: dollars per GiB (S3's GB, 2^30 bytes) stored for a month."},
};

const st_cfg_table_t st_os_config_table = {os_rows, ST_ARRAY_SIZE(os_rows)};

void st_os_config_init(st_os_config_t *cfg) {
    char err[256];
    memset(cfg, 0, sizeof *cfg);
    /* The defaults are ours and valid; a failure here is a bug in the table. */
    if (st_cfg_defaults(&st_os_config_table, cfg, err, sizeof err) != ST_OK) {
        ST_ERROR(ST_OS_SUBSYS, "bad default in the objectstore table: %s", err);
        abort();
    }
}

void st_os_config_fini(st_os_config_t *cfg) {
    st_cfg_fini(&st_os_config_table, cfg);
}

st_err_t st_os_config_at(const st_os_config_t *cfg, const char *location, st_os_config_t *out,
                         char *err, size_t errlen) {
    char why[128];
    const char *scheme = !strcmp(cfg->backend, "s3") ? "s3://" : "file://";
    size_t sl = strlen(scheme);
    if (strncmp(location, scheme, sl)) {
        st_snprintf_marked(err, errlen, "'%s' is not a location of this broker's object store "
                           "(objectstore.backend=%s): it must start with %s", location,
                           cfg->backend, scheme);
        return ST_E_INVAL;
    }
    const char *rest = location + sl;
    memset(out, 0, sizeof *out);
    st_cfg_copy(&st_os_config_table, out, cfg);
    if (!strcmp(cfg->backend, "file")) {
        if (*rest != '/') {
            st_snprintf_marked(err, errlen, "'%s': a file location is file:///ROOT (an absolute "
                               "path)", location);
            st_os_config_fini(out);
            return ST_E_INVAL;
        }
        free(out->file_root);
        out->file_root = st_strdup(rest);
        out->file_create_root = 0; /* another's: it is there, or it is a mistake */
        return ST_OK;
    }
    const char *slash = strchr(rest, '/');
    size_t bl = slash ? (size_t)(slash - rest) : strlen(rest);
    char *bucket = st_strndup(rest, bl);
    const char *prefix = slash ? slash + 1 : "";
    if (!bl || valid_bucket(bucket, why, sizeof why) || valid_prefix(prefix, why, sizeof why)) {
        st_snprintf_marked(err, errlen, "'%s': an s3 location is s3://BUCKET/PREFIX (the "
                           "objectstore.s3.prefix written there): %s", location,
                           bl ? why : "no bucket");
        free(bucket);
        st_os_config_fini(out);
        return ST_E_INVAL;
    }
    free(out->s3_bucket);
    out->s3_bucket = bucket;
    free(out->s3_prefix);
    out->s3_prefix = st_strdup(prefix);
    return ST_OK;
}

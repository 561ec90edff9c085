/*
 * st_objectstore.h - the object store: put, ranged get, head, list by
 * prefix, delete and batch delete, over one of two backends:
 *
 *   s3    any S3-compatible endpoint (libcurl, SigV4, curl_multi)
 *   file  a local directory standing for the bucket (the embedded default)
 *
 * Every request is asynchronous.  It may be submitted from any thread; it
 * runs on the object store's own threads; it completes exactly once through
 * its callback, also when it fails early (bad arguments) or is cancelled by
 * st_os_destroy.  The callback never runs on the submitter's stack: it runs
 * on one of the object store's threads and must not block for long (it may
 * submit further requests, but must not call st_os_run).
 *
 * A completed request has one of four statuses:
 *   ST_OK            done
 *   ST_E_NOT_FOUND   the key does not exist (get, head)
 *   ST_E_RETRYABLE   failed for a reason that may pass (5xx, SlowDown,
 *                    timeouts, connection errors) after the retry budget was
 *                    spent, or cancelled at shutdown; trying later may work
 *   ST_E_PERMANENT   will fail again until someone changes something (wrong
 *                    credentials, missing bucket, range past the end, corrupt
 *                    object, bad argument)
 * and a message a person can act on.  Messages never contain credentials.
 *
 * Every object written through this layer carries our own CRC32C of its
 * bytes (S3: user metadata "strata-crc32c"; file: the object file's
 * header).  A get that covers the whole object verifies it.
 *
 * This library knows nothing of Kafka.
 */
#ifndef ST_OBJECTSTORE_H
#define ST_OBJECTSTORE_H

#include "st_base.h"

/* ------------------------------------------------------------------------
 * Configuration: the objectstore.* keys of the broker's properties file.
 * st_os_config_table fills an st_os_config_t; bind it next to the broker's
 * own table (st_cfg_bind_t).  Credentials and region not set here are
 * taken from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and
 * AWS_REGION (or AWS_DEFAULT_REGION) when the object store is opened.
 * ---------------------------------------------------------------------- */
typedef struct st_os_config {
    char *backend; /* "file" or "s3" */

    char *file_root;
    int file_create_root;
    int32_t file_threads;
    int file_fsync;

    char *s3_endpoint; /* http[s]://host[:port]; empty: AWS for the region */
    char *s3_bucket;
    char *s3_region;
    char *s3_prefix;
    int s3_path_style;
    char *s3_access_key;
    char *s3_secret_key;
    char *s3_session_token;
    char *s3_ca_file;
    int64_t s3_part_size_bytes;
    int32_t s3_multipart_concurrency;
    int32_t s3_max_connections;
    int32_t s3_connect_timeout_ms;
    int32_t s3_request_timeout_ms;
    int32_t s3_stall_timeout_ms;
    int32_t s3_retry_attempts;
    int32_t s3_retry_backoff_ms;
    int32_t s3_retry_backoff_max_ms;

    /* prices of the cost estimate (st_os_prices_t), in dollars */
    double cost_write_per_1000;
    double cost_read_per_1000;
    double cost_storage_gib_month;
} st_os_config_t;

extern const st_cfg_table_t st_os_config_table;

/* Defaults for every key (the struct owns its strings afterwards). */
void st_os_config_init(st_os_config_t *cfg);
void st_os_config_fini(st_os_config_t *cfg);
/* *out: cfg at another location of the same store, written as
 * st_os_describe writes one: s3://BUCKET/PREFIX (the bucket and
 * objectstore.s3.prefix; endpoint, credentials and the rest are cfg's) or
 * file:///ROOT (never created).  ST_E_INVAL with a message otherwise. */
st_err_t st_os_config_at(const st_os_config_t *cfg, const char *location, st_os_config_t *out,
                         char *err, size_t errlen);

/* ------------------------------------------------------------------------
 * Requests
 * ---------------------------------------------------------------------- */
typedef struct st_os st_os_t;

typedef enum st_os_op {
    ST_OS_PUT,          /* whole object; multipart above the part size */
    ST_OS_GET,          /* byte range (or the whole object) */
    ST_OS_HEAD,         /* size, CRC32C, ETag, mtime, user metadata */
    ST_OS_LIST,         /* one page of keys under a prefix, in key order */
    ST_OS_DELETE,       /* a missing key is not an error */
    ST_OS_DELETE_BATCH, /* many keys; split into batches the server accepts */
    ST_OS_CHECK,        /* is the bucket there and are we allowed in? */
    ST_OS_COPY          /* key from copy_source, inside the store (S3's
                         * CopyObject: no byte passes through us); the
                         * object's bytes, CRC32C and user metadata */
} st_os_op_t;
#define ST_OS_NOPS (ST_OS_COPY + 1)

const char *st_os_op_name(st_os_op_t op);

/* A length meaning "to the end of the object". */
#define ST_OS_TO_END UINT64_MAX

/* Where a put takes its bytes from.  Memory and the file's bytes must stay
 * unchanged until the callback (a retry reads them again). */
typedef enum st_os_src_kind {
    ST_OS_SRC_MEM = 0, /* data, length */
    ST_OS_SRC_FILE     /* path, offset, length (ST_OS_TO_END: rest of the file) */
} st_os_src_kind_t;

typedef struct st_os_src {
    st_os_src_kind_t kind;
    const void *data; /* borrowed until the callback */
    const char *path; /* copied at submit */
    uint64_t offset;
    uint64_t length;
} st_os_src_t;

/* Where a get puts its bytes. */
typedef enum st_os_sink_kind {
    ST_OS_SINK_ALLOC = 0, /* a malloc'ed buffer handed over in the result */
    ST_OS_SINK_MEM,       /* the caller's buffer: at most capacity bytes */
    ST_OS_SINK_FILE,      /* written at offset into path (created if missing,
                           * never truncated) */
    ST_OS_SINK_FD         /* written at offset into fd (borrowed until the
                           * callback: the store writes through a dup) */
} st_os_sink_kind_t;

typedef struct st_os_sink {
    st_os_sink_kind_t kind;
    void *buf; /* borrowed until the callback */
    size_t capacity;
    const char *path; /* copied at submit */
    int fd;           /* ST_OS_SINK_FD */
    uint64_t offset;
} st_os_sink_t;

/* User metadata: names are lower-case [a-z0-9-], values printable ASCII.
 * The name "strata-crc32c" is reserved for the layer. */
typedef struct st_os_meta {
    const char *name;
    const char *value;
} st_os_meta_t;

/* ------------------------------------------------------------------------
 * Accounting by S3's billing class
 *
 * S3 prices requests by class, not by operation (S3 Standard's list
 * prices as defaults):
 *
 *   write  PUT, COPY, POST, LIST           $0.005 per 1,000
 *          (a put, each step of a multipart upload: create, every part,
 *          complete; a list page; the start-up check, a list; a batch
 *          delete, a POST: see below)
 *   read   GET, SELECT and every other     $0.0004 per 1,000
 *          (a get, a head, the HEAD that checks a completion)
 *   free   DELETE                          nothing
 *          (a delete; aborting a multipart upload is a DELETE too)
 *
 * A batch delete (DeleteObjects) is a POST of up to 1000 keys.  S3's
 * price list names POST among the writes and no free "DELETE" covers it,
 * so it is counted as a write: one per 1000 keys.  If a bill takes it as
 * free, the estimate is high by $0.005 per million keys deleted.
 *
 * The s3 backend counts every HTTP exchange that reached the server (its
 * request, or part of it, was sent): retries, multipart parts, list
 * pages, HEADs, aborts; a connection that never opened is no request.
 * The file backend counts each operation as the one request of the class
 * S3 would bill (a put is one write whatever its size; a batch delete one
 * write per 1000 keys).
 * ---------------------------------------------------------------------- */
typedef enum st_os_class {
    ST_OS_CLASS_WRITE = 0,
    ST_OS_CLASS_READ,
    ST_OS_CLASS_FREE
} st_os_class_t;
#define ST_OS_NCLASSES (ST_OS_CLASS_FREE + 1)

/* "write", "read", "free" */
const char *st_os_class_name(st_os_class_t c);

/* Requests by class and body bytes each way. */
typedef struct st_os_usage {
    uint64_t requests[ST_OS_NCLASSES];
    uint64_t bytes_out; /* body bytes sent (puts) */
    uint64_t bytes_in;  /* body bytes received (gets) */
} st_os_usage_t;

/* Where a request's exchanges are counted, besides the object store's own
 * totals (a topic's, say).  Relaxed atomic adds from the object store's
 * threads; zero-filled (st_os_account_init) before first use, read with
 * st_os_account_read from any thread. */
typedef struct st_os_account {
    st_os_usage_t n;
} st_os_account_t;

void st_os_account_init(st_os_account_t *a);
void st_os_account_read(const st_os_account_t *a, st_os_usage_t *out);

/* The prices of the estimate (objectstore.cost.*), in dollars. */
typedef struct st_os_prices {
    double per_1000[ST_OS_NCLASSES]; /* requests of each class */
    double storage_gib_month;        /* a GiB (2^30 bytes, S3's "GB") kept a month */
} st_os_prices_t;

void st_os_prices_from_config(const st_os_config_t *cfg, st_os_prices_t *out);
/* Dollars of the requests u counts. */
double st_os_request_cost(const st_os_prices_t *p, const st_os_usage_t *u);
/* Dollars a month for keeping bytes. */
double st_os_storage_cost(const st_os_prices_t *p, int64_t bytes);

/* What to do.  Every pointer is borrowed for the st_os_submit call only
 * (strings and arrays are copied), except src.data and sink.buf, which are
 * borrowed until the callback, and account, which must outlive the
 * request (its callback's return). */
typedef struct st_os_request {
    st_os_op_t op;
    const char *key; /* put, get, head, delete */
    /* NULL, or where this request's exchanges and bytes are counted too */
    st_os_account_t *account;

    /* put */
    st_os_src_t src;
    const st_os_meta_t *meta;
    size_t nmeta;
    int crc32c_known; /* the caller already has the CRC32C of the source */
    uint32_t crc32c;
    int max_parts; /* s3: above 0, parts grow past objectstore.s3.part.size.bytes
                    * so that the object takes at most this many */
    /* A conditional put (S3's If-Match / If-None-Match): written only when
     * the object's ETag is if_match, or with if_none_match only when there
     * is no object; else ST_E_PRECONDITION_FAILED and nothing changes.  At
     * most one of the two; s3 sends it as one PUT, whatever the part size
     * (so at most 5 GiB).  A store that ignores the headers writes
     * unconditionally. */
    const char *if_match;
    int if_none_match;

    /* copy: the key copied to key (in this bucket, under the same prefix).
     * One request, as S3's CopyObject: at most 5 GiB (a larger object fails
     * with the server's error).  The copy is a new object (its own mtime);
     * copying onto an existing key replaces it. */
    const char *copy_source;

    /* get: bytes [offset, offset + length), cut short at the object's end.
     * A range that starts at or past the end fails (permanent), except a
     * whole-object read of an empty object. */
    uint64_t offset;
    uint64_t length; /* ST_OS_TO_END for the rest of the object */
    st_os_sink_t sink;

    /* list: keys starting with prefix, after the page that token ended */
    const char *prefix;
    const char *token; /* NULL for the first page */
    int max_keys;      /* 0: 1000 */

    /* delete batch */
    const char *const *keys;
    size_t nkeys;
} st_os_request_t;

typedef struct st_os_entry {
    const char *key;
    uint64_t size;
    int64_t mtime_ms;
    const char *etag; /* may be "" */
} st_os_entry_t;

typedef struct st_os_key_error {
    const char *key;
    st_err_t status;
    const char *message;
} st_os_key_error_t;

/* The outcome.  Everything it points to lives until the callback returns
 * (or, for st_os_run, until st_os_result_free). */
typedef struct st_os_result {
    st_os_op_t op;
    st_err_t status;     /* ST_OK, ST_E_NOT_FOUND, ST_E_RETRYABLE, ST_E_PERMANENT,
                          * ST_E_PRECONDITION_FAILED (a conditional put) */
    const char *message; /* "" on success */
    const char *key;     /* as requested (NULL for list, batch, check) */
    int attempts;        /* tries of the last step (1: no retry) */
    int retries;         /* retries over all steps of the request */
    int http_status;     /* last HTTP status seen; 0 for the file backend */
    int cancelled;       /* completed by st_os_destroy */
    int64_t elapsed_us;

    /* get: the bytes delivered.  With ST_OS_SINK_ALLOC, data is malloc'ed
     * and freed after the callback unless the callback takes it by setting
     * data to NULL (then it must free() it). */
    void *data;
    uint64_t length;

    /* get, head: what is known of the object */
    int has_object_size;
    uint64_t object_size;
    int has_crc32c; /* the object carries our CRC32C */
    uint32_t crc32c;
    int crc32c_verified; /* get: the whole object was read and matched */
    const char *etag;
    int64_t mtime_ms;
    const st_os_meta_t *meta; /* user metadata (head and get) */
    size_t nmeta;

    /* list */
    const st_os_entry_t *entries;
    size_t nentries;
    const char *next_token; /* NULL on the last page */

    /* delete batch: the keys that could not be deleted */
    const st_os_key_error_t *failed;
    size_t nfailed;
} st_os_result_t;

typedef void (*st_os_done_cb)(st_os_result_t *res, void *arg);

/* Counters since st_os_new (all backends fill what applies). */
typedef struct st_os_stats {
    uint64_t requests;
    uint64_t attempts; /* HTTP exchanges (s3) or operations (file) */
    uint64_t retries;
    uint64_t bytes_out; /* body bytes sent */
    uint64_t bytes_in;  /* body bytes received */
    /* exchanges that reached the server, by billing class (see above):
     * every request's, with an account or without */
    uint64_t class_requests[ST_OS_NCLASSES];
} st_os_stats_t;

/* ------------------------------------------------------------------------
 * Lifetime
 * ---------------------------------------------------------------------- */

/* Opens the backend the configuration names (the configuration is copied).
 * Fails, naming the key, when the configuration cannot work (no bucket, no
 * credentials, bad endpoint); it does not touch the network: use
 * ST_OS_CHECK (st_os_check) for that. */
st_err_t st_os_new(const st_os_config_t *cfg, st_os_t **out, char *err, size_t errlen);

/* Cancels what is still queued or in flight (each such request completes
 * with ST_E_RETRYABLE and res->cancelled set), waits for every callback to
 * return, then frees.  No request may be submitted during or after it, and
 * it must not be called from a callback (it joins the callback's thread).
 * Multipart uploads cut short here are not aborted: a bucket lifecycle rule
 * for incomplete uploads reclaims them. */
void st_os_destroy(st_os_t *os);

const char *st_os_backend_name(const st_os_t *os);
/* "s3://bucket/prefix" or "file:///root" (no credentials). */
const char *st_os_describe(const st_os_t *os);
void st_os_get_stats(const st_os_t *os, st_os_stats_t *out);
/* The prices it was opened with. */
void st_os_get_prices(const st_os_t *os, st_os_prices_t *out);

/* Requests of one operation completed since st_os_new: how long each took
 * from submit to completion (retries included) and how many failed (a
 * missing key is not a failure). */
typedef struct st_os_op_stats {
    st_histo_t time;
    uint64_t errors;
} st_os_op_stats_t;
void st_os_get_op_stats(const st_os_t *os, st_os_op_t op, st_os_op_stats_t *out);

/* ------------------------------------------------------------------------
 * Submitting
 * ---------------------------------------------------------------------- */

/* Queues the request; cb(res, arg) is called exactly once, later, on one of
 * the object store's threads. */
void st_os_submit(st_os_t *os, const st_os_request_t *rq, st_os_done_cb cb, void *arg);

/* Blocking wrapper for tools and tests: runs one request and waits.  The
 * result is never NULL; the caller frees it with st_os_result_free (which
 * also frees an allocated get buffer not taken).  Never call it from a
 * callback. */
st_os_result_t *st_os_run(st_os_t *os, const st_os_request_t *rq);
void st_os_result_free(st_os_result_t *res);

/* Blocking, like st_os_run: every object under prefix, through as many
 * LIST pages as it takes, each handed to each(entry, arg) (borrowed for
 * the call).  ST_OK, or the failed page's status with its message in *why
 * (heap; the caller frees it).  account may be NULL. */
typedef void (*st_os_entry_cb)(const st_os_entry_t *entry, void *arg);
st_err_t st_os_list_each(st_os_t *os, st_os_account_t *account, const char *prefix,
                         st_os_entry_cb each, void *arg, char **why);

/* The keys under prefix and their sizes, all pages of them
 * (st_os_list_each); on failure it is empty.  Free with st_os_keys_fini. */
typedef struct st_os_keys {
    char **keys;
    int64_t *sizes;
    size_t n, cap;
} st_os_keys_t;
st_err_t st_os_list_keys(st_os_t *os, st_os_account_t *account, const char *prefix,
                         st_os_keys_t *out, char **why);
void st_os_keys_fini(st_os_keys_t *k);

/* Start-up check: is the bucket there, are the credentials accepted, can
 * the endpoint be reached?  ST_OK, or an error with one clear line in err. */
st_err_t st_os_check(st_os_t *os, char *err, size_t errlen);

#endif /* ST_OBJECTSTORE_H */

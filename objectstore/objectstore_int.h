/*
 * objectstore_int.h - what the files of the objectstore library share:
 * the request record, the backend ops table and the completion path.
 *
 * Life of a request (st_os_req_t):
 *
 *   st_os_submit ──> st_os__req_new (copy the descriptor into the arena,
 *                    validate it) ──> ops->submit (the backend queues it)
 *        ... backend threads run it; retries stay inside the backend ...
 *   st_os__complete (fill res.status / res.message, call the callback
 *                    once, then free everything unless a waiter keeps it)
 *
 * A request that failed validation still goes through ops->submit; the
 * backend's thread sees req->early_status and completes it at once, so the
 * callback never runs on the submitter's stack.
 */
#ifndef OBJECTSTORE_INT_H
#define OBJECTSTORE_INT_H

#include "st_objectstore.h"

#include <stdatomic.h>

#define ST_OS_SUBSYS "objectstore"
/* S3's limit on a key; the file backend has the same one. */
#define ST_OS_KEY_MAX 1024
/* Metadata name that carries our CRC32C (x-amz-meta-strata-crc32c). */
#define ST_OS_CRC_META "strata-crc32c"
#define ST_OS_LIST_MAX_KEYS 1000
/* S3's most keys in one DeleteObjects request. */
#define ST_OS_DELETE_BATCH_MAX 1000

typedef struct st_os_req st_os_req_t;

/* A backend.  open() runs in st_os_new; submit() takes ownership of req and
 * must complete it exactly once through st_os__complete, never before
 * submit returns; close() completes or cancels every request it holds and
 * frees the backend's state. */
typedef struct st_os_ops {
    const char *name;
    st_err_t (*open)(st_os_t *os, char *err, size_t errlen);
    void (*submit)(st_os_t *os, st_os_req_t *req);
    void (*close)(st_os_t *os);
} st_os_ops_t;

extern const st_os_ops_t st_os_file_ops;
extern const st_os_ops_t st_os_s3_ops;

struct st_os {
    const st_os_ops_t *ops;
    st_os_config_t cfg; /* resolved copy (environment applied) */
    void *impl;         /* the backend's state */
    char describe[512];
    _Atomic uint64_t n_requests, n_attempts, n_retries, n_bytes_out, n_bytes_in;
    uint64_t n_class[ST_OS_NCLASSES]; /* atomic: exchanges by billing class */
    /* per operation, at completion (st_os__complete) */
    st_histo_t op_time[ST_OS_NOPS];
    uint64_t op_errors[ST_OS_NOPS]; /* atomic: completed with an error other than not-found */
};

struct st_os_req {
    st_os_t *os;
    st_os_request_t rq; /* strings and arrays point into arena */
    st_os_done_cb cb;
    void *arg;
    st_os_result_t res;
    st_arena_t arena; /* the request's memory, freed at completion */
    st_err_t early_status; /* validation failed: complete at once */
    int keep;              /* st_os_run owns the record after the callback */
    int64_t start_us;
    void *backend;      /* the backend's per-request state */
    st_os_req_t *next;  /* backend queues */
    char *msg;          /* heap, whole (it names keys and causes): res.message */
};

st_os_req_t *st_os__req_new(st_os_t *os, const st_os_request_t *rq, st_os_done_cb cb,
                            void *arg);
/* Sets status and message (printf-style; fmt may be NULL on success), runs
 * the callback, frees the request.  Exactly once per request. */
void st_os__complete(st_os_req_t *req, st_err_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A validation failure found at submit: complete it with that. */
void st_os__complete_early(st_os_req_t *req);

/* n requests of class cls that reached the store (s3: HTTP exchanges;
 * file: what S3 would have billed), counted in the object store's totals
 * and in the request's account.  Any backend thread. */
void st_os__count_requests(st_os_req_t *req, st_os_class_t cls, uint64_t n);
/* Body bytes sent and received for req, counted both places too. */
void st_os__count_bytes(st_os_req_t *req, uint64_t out, uint64_t in);

/* Copies into the request's arena. */
char *st_os__strdup(st_os_req_t *req, const char *s);
void *st_os__alloc(st_os_req_t *req, size_t n);

/* Metadata names: lower-case letters, digits and '-'.  Values: printable
 * ASCII.  Returns 0 when acceptable. */
int st_os__meta_name_ok(const char *name);
int st_os__meta_value_ok(const char *value);

/* Exponential backoff with jitter for retry number n (1 = first retry):
 * half of min(max, base * 2^(n-1)) plus a random part of the other half. */
int64_t st_os__backoff_ms(const st_os_config_t *cfg, int n);

/* The key the backend stores: configured prefix + key.  Arena memory. */
const char *st_os__full_key(st_os_req_t *req, const char *prefix, const char *key);

/* Object file format and key mapping of the file backend, shared with its
 * tests through this header. */
int st_os__file_encode_component(const char *comp, size_t n, char *out, size_t outlen);
int st_os__file_decode_component(const char *name, char *out, size_t outlen);

/* ------------------------------------------------------------------------
 * S3 XML (s3_xml.c)
 * ---------------------------------------------------------------------- */
typedef struct st_os_s3_error {
    char code[64];
    char message[256];
    char region[64];
} st_os_s3_error_t;

/* 0 when xml is an <Error> document; fills out. */
int st_os__s3_parse_error(const char *xml, size_t len, st_os_s3_error_t *out);
/* ListObjectsV2 page into req->res (entries, next_token); keys lose the
 * configured prefix strip.  0, or -1 with why. */
int st_os__s3_parse_list(st_os_req_t *req, const char *strip, const char *xml, size_t len,
                         char *why, size_t whylen);
/* The UploadId (heap; the caller frees it), or NULL with why. */
char *st_os__s3_parse_upload_id(const char *xml, size_t len, char *why, size_t whylen);
/* What a 200 answer to a request S3 may fail after it began answering
 * (CompleteMultipartUpload, CopyObject) says; root is the element of its
 * result ("CompleteMultipartUploadResult", "CopyObjectResult"). */
enum {
    ST_OS_S3_COMPLETE_OK = 0,    /* <root>: done */
    ST_OS_S3_COMPLETE_ERROR = 1, /* an <Error> inside the 200 (err filled): not done */
    ST_OS_S3_COMPLETE_UNKNOWN = 2 /* anything else (another root element, as moto's
                                   * CompleteMultipartUploadResponse, an empty or broken
                                   * body): the outcome is unknown; why says what came */
};
int st_os__s3_parse_complete(const char *xml, size_t len, const char *root,
                             st_os_s3_error_t *err, char *why, size_t whylen);
/* DeleteObjects answer: the keys that failed (NoSuchKey counts as done). */
int st_os__s3_parse_delete(st_os_req_t *req, const char *strip, const char *xml, size_t len,
                           st_os_key_error_t **failed, size_t *nfailed, char *why,
                           size_t whylen);
int64_t st_os__s3_parse_iso8601(const char *s);
void st_os__xml_escape(st_buf_t *b, const char *s);
/* S3 error codes that mean "try again later". */
int st_os__s3_code_retryable(const char *code);

/* URL pieces (s3.c): key bytes outside A-Za-z0-9-._~ become %XX; '/' is
 * kept in a path and escaped in a query value. */
void st_os__s3_uri_encode(st_buf_t *b, const char *s, int keep_slash);

#endif /* OBJECTSTORE_INT_H */

/*
 * s3.c - the s3 backend: S3's REST API over libcurl.
 *
 * Threads.  One loop thread ("os-s3") owns the curl multi handle and every
 * call below; nothing else touches them.  st_os_submit puts a request in
 * the inbox (mutex) and wakes the loop with curl_multi_wakeup.  A put goes
 * first through a small pool ("os-prep") that opens its source and computes
 * its CRC32C, so the loop never reads a whole file.  Callbacks run on the
 * loop thread.
 *
 * Calls.  A request (op) runs as one or more HTTP calls.  A call is retried
 * as a unit: on a retryable failure it waits (exponential backoff with
 * jitter) on the timer list, then goes back to the ready queue.  At most
 * objectstore.s3.max.connections calls are in the multi handle at once; the
 * rest wait in the ready queue in FIFO order.  Idle connections stay in
 * curl's cache for reuse.
 *
 *   put (size <= part size)    PUT key
 *   put (multipart)            POST key?uploads=  ->  PUT key?partNumber=N&uploadId=U
 *                              (parts in parallel)  ->  POST key?uploadId=U
 *                              on failure: DELETE key?uploadId=U, then report
 *   get                        GET key (Range: bytes=a-b)
 *   head                       HEAD key
 *   list                       GET ?continuation-token=&list-type=2&max-keys=&prefix=
 *   delete                     DELETE key
 *   delete batch               POST ?delete= per 1000 keys (Content-MD5)
 *   check                      GET ?list-type=2&max-keys=1&prefix=
 *
 * SigV4 is curl's (CURLOPT_AWS_SIGV4), which signs the URL exactly as
 * written; so query strings are written in canonical form here (sorted by
 * name, values escaped, '=' always present), x-amz-content-sha256 is sent
 * by us, the body length is always set, and Expect is left to curl.
 *
 * Invariants:
 *   - an op completes once, when its last call has finished;
 *   - a call is in exactly one place: the ready queue, the timer list, the
 *     multi handle, or being finished;
 *   - credentials live in this file's state and curl's handles only; no
 *     message or log line is built from them;
 *   - every attempt that sent its request is counted once, in its billing
 *     class (count_exchange), when it ends or is cancelled in flight.
 */
#include "objectstore_int.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define S3_RESP_MAX (16u * 1024 * 1024) /* XML answers (a list page is < 1 MiB) */
#define S3_ERR_BODY_MAX (64u * 1024)
#define S3_DELETE_PARALLEL 4
#define S3_MAX_PARTS 10000
#define S3_MAX_PART_SIZE ((uint64_t)5 << 30)
#define S3_PREP_THREADS 2
#define S3_PREP_CHUNK (1024 * 1024)

typedef struct s3 s3_t;
typedef struct s3_op s3_op_t;
typedef struct call call_t;

typedef enum call_kind {
    CALL_PUT,
    CALL_MP_INIT,
    CALL_MP_PART,
    CALL_MP_COMPLETE,
    CALL_MP_VERIFY, /* HEAD after a retried complete found no upload */
    CALL_MP_ABORT,
    CALL_GET,
    CALL_HEAD,
    CALL_LIST,
    CALL_DELETE,
    CALL_DELETE_BATCH,
    CALL_CHECK,
    CALL_COPY
} call_kind_t;

struct call {
    call_t *next;
    call_t *iprev, *inext; /* in the multi handle: the live list */
    s3_op_t *op;
    call_kind_t kind;
    const char *method;
    char *url;
    struct curl_slist *headers;
    int part;         /* CALL_MP_PART: 1-based */
    size_t batch_off; /* CALL_DELETE_BATCH: first key index */
    size_t batch_n;

    /* request body: memory (body_mem) or a file (body_fd), body_len bytes */
    const uint8_t *body_mem;
    int body_fd;
    uint64_t body_off, body_len, body_pos;
    char *body_owned;
    int read_errno;

    /* response of the current attempt */
    long http;
    int want_xml; /* a 2xx body is XML to parse, not data */
    st_buf_t resp;
    st_buf_t hdrs; /* "name\0value\0" pairs, names lower-case */
    int64_t content_length;
    int has_range;
    uint64_t range_first, range_total;
    int range_total_known;
    uint64_t skip, limit; /* data: bytes to drop first, bytes to keep */
    int data_started;
    int want_crc;
    uint64_t got;
    uint32_t crc;
    int sink_errno;
    int overflow;

    /* retries */
    int attempt;
    int64_t due_us;
    int outcome_unknown; /* CALL_MP_COMPLETE: a 200 that said neither done nor not */

    /* outcome */
    st_err_t status;
    int cancelled;
    char *msg; /* heap: the outcome, whole */

    CURL *easy;
    char errbuf[CURL_ERROR_SIZE];
};

struct s3_op {
    st_os_req_t *req;
    s3_t *s3;
    const char *fkey; /* prefix + key */
    int active;       /* calls that exist */
    int retries;
    int last_attempts;
    int last_http;
    st_err_t status; /* first failure, kept for the final answer */
    char *msg;       /* heap: its message, whole (keys and causes) */
    int failed;
    int cancelled;

    /* put */
    int src_fd;
    uint64_t size;
    uint32_t crc;
    st_err_t prep_status;

    /* multipart */
    uint64_t part_size;
    char *upload_id;
    int nparts, next_part, parts_active, parts_done;
    char **etags;
    int complete_attempted;
    char *verify_why; /* why the completion is checked with HEAD (NULL: NoSuchUpload) */

    /* get */
    int sink_fd;
    uint8_t *buf;
    size_t buf_cap;

    /* delete batch */
    size_t next_key;
    st_buf_t failed_keys; /* st_os_key_error_t array */
};

struct s3 {
    st_os_t *os;
    const st_os_config_t *cfg;
    CURLM *multi;
    CURLSH *share;
    pthread_t thread;
    st_pool_t *prep;

    pthread_mutex_t lock; /* guards inbox and stopping */
    s3_op_t **inbox;
    size_t ninbox, inbox_cap;
    int stopping;

    /* loop thread only */
    call_t *ready_head, *ready_tail;
    call_t *timers; /* sorted by due_us */
    call_t *live;   /* in the multi handle */
    int inflight;
    CURL **idle;
    int nidle;

    char sigv4[96];
    char base_url[1024];   /* up to, not including, the key's '/' */
    char bucket_url[1100]; /* for bucket-level requests */
    char host[512];        /* for messages */
    char auth_user[256];
    char auth_pass[256];
    char token_header[4200];
};

/* ------------------------------------------------------------------------
 * URLs
 * ---------------------------------------------------------------------- */

void st_os__s3_uri_encode(st_buf_t *b, const char *s, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~' || (c == '/' && keep_slash)) {
            st_buf_put(b, p, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            st_buf_put(b, e, 3);
        }
    }
}

/* Query parameters must be added in sorted order (SigV4 signs the query as
 * written); the assertion guards that. */
typedef struct query {
    st_buf_t *b;
    const char *last;
} query_t;

static void qadd(query_t *q, const char *name, const char *value) {
    if (q->last && strcmp(q->last, name) >= 0) {
        ST_ERROR(ST_OS_SUBSYS, "query parameter %s added after %s", name, q->last);
        abort();
    }
    st_buf_put(q->b, q->last ? "&" : "?", 1);
    st_os__s3_uri_encode(q->b, name, 0);
    st_buf_put(q->b, "=", 1);
    if (value) st_os__s3_uri_encode(q->b, value, 0);
    q->last = name;
}

static char *buf_take_str(st_buf_t *b) {
    st_buf_put(b, "", 1);
    char *s = (char *)b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

static void object_url(s3_t *s3, st_buf_t *b, const char *fkey) {
    st_buf_printf(b, "%s/", s3->base_url);
    st_os__s3_uri_encode(b, fkey, 1);
}

/* ------------------------------------------------------------------------
 * Calls
 * ---------------------------------------------------------------------- */

static call_t *call_new(s3_op_t *op, call_kind_t kind, const char *method) {
    call_t *c = st_calloc(1, sizeof *c);
    c->op = op;
    c->kind = kind;
    c->method = method;
    c->body_fd = -1;
    st_buf_init(&c->resp);
    st_buf_init(&c->hdrs);
    op->active++;
    return c;
}

static void call_free(call_t *c) {
    curl_slist_free_all(c->headers);
    free(c->url);
    free(c->body_owned);
    free(c->msg);
    st_buf_fini(&c->resp);
    st_buf_fini(&c->hdrs);
    free(c);
}

static void add_header(call_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_header(call_t *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *line = st_vstrprintf(fmt, ap);
    va_end(ap);
    struct curl_slist *l = curl_slist_append(c->headers, line);
    free(line);
    if (!l) abort(); /* out of memory for a header line */
    c->headers = l;
}

/* Headers every request carries: the payload hash and the session token. */
static void common_headers(s3_t *s3, call_t *c, const char *payload_sha256) {
    add_header(c, "x-amz-content-sha256: %s", payload_sha256 ? payload_sha256 : "UNSIGNED-PAYLOAD");
    if (s3->token_header[0]) add_header(c, "%s", s3->token_header);
}

static void ready_push(s3_t *s3, call_t *c) {
    c->next = NULL;
    if (s3->ready_tail) s3->ready_tail->next = c;
    else s3->ready_head = c;
    s3->ready_tail = c;
}

static void timer_push(s3_t *s3, call_t *c) {
    call_t **pp = &s3->timers;
    while (*pp && (*pp)->due_us <= c->due_us) pp = &(*pp)->next;
    c->next = *pp;
    *pp = c;
}

/* ---- curl callbacks (loop thread) ---- */

static void reset_attempt(call_t *c) {
    c->http = 0;
    c->resp.len = 0;
    c->hdrs.len = 0;
    c->content_length = -1;
    c->has_range = 0;
    c->range_total_known = 0;
    c->got = 0;
    c->crc = 0;
    c->skip = 0;
    c->limit = UINT64_MAX;
    c->data_started = 0;
    c->want_crc = 0;
    c->sink_errno = 0;
    c->overflow = 0;
    c->read_errno = 0;
    c->body_pos = 0;
    c->errbuf[0] = 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    call_t *c = ud;
    size_t len = size * n;
    if (len >= 5 && !memcmp(p, "HTTP/", 5)) {
        /* A new response (after 100 Continue, say): forget the last one. */
        c->hdrs.len = 0;
        c->content_length = -1;
        c->has_range = 0;
        c->range_total_known = 0;
        return len;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon) return len;
    size_t nl = (size_t)(colon - p);
    const char *v = colon + 1;
    const char *end = p + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
    if (nl == 0 || nl > 200 || end - v > 8192 || c->hdrs.len > 256 * 1024) return len;
    char name[201];
    for (size_t i = 0; i < nl; i++) name[i] = (char)tolower((unsigned char)p[i]);
    name[nl] = 0;
    st_buf_put(&c->hdrs, name, nl + 1);
    st_buf_put(&c->hdrs, v, (size_t)(end - v));
    st_buf_put(&c->hdrs, "", 1);
    char val[64];
    size_t vl = (size_t)(end - v) < sizeof val - 1 ? (size_t)(end - v) : sizeof val - 1;
    memcpy(val, v, vl);
    val[vl] = 0;
    if (!strcmp(name, "content-length")) {
        char *e;
        long long x = strtoll(val, &e, 10);
        if (*val && !*e && x >= 0) c->content_length = x;
    } else if (!strcmp(name, "content-range")) {
        unsigned long long a, b, t;
        char star;
        if (sscanf(val, "bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
            c->has_range = 1;
            c->range_first = a;
            c->range_total = t;
            c->range_total_known = 1;
        } else if (sscanf(val, "bytes %llu-%llu/%c", &a, &b, &star) == 3) {
            c->has_range = 1;
            c->range_first = a;
        } else if (sscanf(val, "bytes */%llu", &t) == 1) {
            c->range_total = t;
            c->range_total_known = 1;
        }
    }
    return len;
}

static const char *header_get(const call_t *c, const char *name) {
    const char *p = (const char *)c->hdrs.data, *end = p + c->hdrs.len;
    while (p < end) {
        const char *v = p + strlen(p) + 1;
        if (v >= end) break;
        if (!strcmp(p, name)) return v;
        p = v + strlen(v) + 1;
    }
    return NULL;
}

/* The data sink of a get; returns 0 or an errno. */
static int sink_write(call_t *c, const uint8_t *p, size_t len) {
    s3_op_t *op = c->op;
    const st_os_request_t *rq = &op->req->rq;
    if (rq->sink.kind == ST_OS_SINK_FILE || rq->sink.kind == ST_OS_SINK_FD)
        return st_pwrite_all(op->sink_fd, p, len, (int64_t)(rq->sink.offset + c->got)) ? errno
                                                                                         : 0;
    if (c->got + len > op->buf_cap) {
        if (rq->sink.kind == ST_OS_SINK_MEM) return EOVERFLOW;
        size_t ncap = op->buf_cap ? op->buf_cap : 256 * 1024;
        while (ncap < c->got + len) ncap *= 2;
        uint8_t *nb = realloc(op->buf, ncap);
        if (!nb) return ENOMEM;
        op->buf = nb;
        op->buf_cap = ncap;
    }
    memcpy(op->buf + c->got, p, len);
    return 0;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
    call_t *c = ud;
    size_t len = size * n;
    if (!c->http) curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->http);
    if (c->http < 200 || c->http >= 300 || c->want_xml) {
        size_t max = c->http >= 200 && c->http < 300 ? S3_RESP_MAX : S3_ERR_BODY_MAX;
        if (c->resp.len + len > max) {
            c->overflow = 1;
            return len; /* keep reading; the answer is judged as too big */
        }
        st_buf_put(&c->resp, p, len);
        return len;
    }
    if (c->kind != CALL_GET) return len; /* bodies we do not want */
    if (!c->data_started) {
        c->data_started = 1;
        const st_os_request_t *rq = &c->op->req->rq;
        /* A server that ignores Range sends the whole object (200). */
        if (c->http == 200) c->skip = rq->offset;
        /* Only an answer holding the whole object is worth a CRC32C. */
        c->want_crc = rq->offset == 0 &&
                      (c->http == 200 || (c->has_range && c->range_first == 0 &&
                                          c->range_total_known && c->content_length >= 0 &&
                                          (uint64_t)c->content_length == c->range_total));
        /* Size the buffer once when the length is known (a length the
         * server claims is believed up to 256 MiB; past that it grows). */
        s3_op_t *op = c->op;
        if (rq->sink.kind == ST_OS_SINK_ALLOC && c->content_length > 0) {
            uint64_t want = ST_MIN((uint64_t)c->content_length, c->limit);
            want = ST_MIN(want, (uint64_t)256 * 1024 * 1024);
            if (want > op->buf_cap && want < SIZE_MAX) {
                uint8_t *nb = realloc(op->buf, (size_t)want);
                if (nb) {
                    op->buf = nb;
                    op->buf_cap = (size_t)want;
                }
            }
        }
    }
    const uint8_t *d = (const uint8_t *)p;
    size_t keep = len;
    if (c->skip) {
        size_t s = (size_t)ST_MIN((uint64_t)keep, c->skip);
        d += s;
        keep -= s;
        c->skip -= s;
    }
    if (keep > c->limit - c->got) keep = (size_t)(c->limit - c->got);
    if (keep) {
        int en = sink_write(c, d, keep);
        if (en) {
            c->sink_errno = en;
            return 0; /* abort the transfer */
        }
        if (c->want_crc) c->crc = st_crc32c(c->crc, d, keep);
        c->got += keep;
    }
    return len;
}

static size_t on_read(char *p, size_t size, size_t n, void *ud) {
    call_t *c = ud;
    size_t want = size * n;
    uint64_t left = c->body_len - c->body_pos;
    if (want > left) want = (size_t)left;
    if (!want) return 0;
    if (c->body_mem) {
        memcpy(p, c->body_mem + c->body_pos, want);
    } else {
        size_t got = 0;
        if (st_pread_all(c->body_fd, p, want, (int64_t)(c->body_off + c->body_pos), &got) ||
            got != want) {
            c->read_errno = got != want ? EIO : errno;
            return CURL_READFUNC_ABORT;
        }
    }
    c->body_pos += want;
    return want;
}

static int on_seek(void *ud, curl_off_t offset, int origin) {
    call_t *c = ud;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > c->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    c->body_pos = (uint64_t)offset;
    return CURL_SEEKFUNC_OK;
}

/* ---- starting an attempt ---- */

static CURL *easy_get(s3_t *s3) {
    if (s3->nidle) {
        CURL *e = s3->idle[--s3->nidle];
        curl_easy_reset(e);
        return e;
    }
    return curl_easy_init();
}

static void easy_put(s3_t *s3, CURL *e) {
    if (s3->nidle < s3->cfg->s3_max_connections) s3->idle[s3->nidle++] = e;
    else curl_easy_cleanup(e);
}

static void finish_attempt(s3_t *s3, call_t *c, CURLcode cc);

static void start_call(s3_t *s3, call_t *c) {
    const st_os_config_t *cfg = s3->cfg;
    reset_attempt(c);
    c->attempt++;
    if (c->attempt > 1) {
        c->op->retries++;
        atomic_fetch_add(&s3->os->n_retries, 1);
    }
    atomic_fetch_add(&s3->os->n_attempts, 1);
    if (c->kind == CALL_GET) {
        const st_os_request_t *rq = &c->op->req->rq;
        c->limit = rq->length;
    }
    CURL *e = easy_get(s3);
    if (!e) {
        finish_attempt(s3, c, CURLE_OUT_OF_MEMORY);
        return;
    }
    c->easy = e;
    curl_easy_setopt(e, CURLOPT_PRIVATE, c);
    curl_easy_setopt(e, CURLOPT_URL, c->url);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* keys may hold "." pieces */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, s3->sigv4);
    curl_easy_setopt(e, CURLOPT_USERNAME, s3->auth_user);
    curl_easy_setopt(e, CURLOPT_PASSWORD, s3->auth_pass);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->s3_connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)cfg->s3_request_timeout_ms);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)((cfg->s3_stall_timeout_ms + 999) / 1000));
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_SHARE, s3->share);
    if (cfg->s3_ca_file[0]) curl_easy_setopt(e, CURLOPT_CAINFO, cfg->s3_ca_file);
    if (!strcmp(c->method, "HEAD")) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (!strcmp(c->method, "POST")) {
        /* Our POST bodies are small XML documents held in memory.  As post
         * fields curl sends them at once: with a read callback it would add
         * "Expect: 100-continue" above 1 KiB, and RGW answers that for a
         * POST only after the body, which costs curl's full 1 s wait. */
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body_mem ? (const char *)c->body_mem : "");
    } else if (!strcmp(c->method, "PUT")) {
        /* UPLOAD sends exactly body_len bytes with a Content-Length and no
         * Content-Type of curl's choosing (which it would sign). */
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)c->body_len);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(e, CURLOPT_READDATA, c);
        curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(e, CURLOPT_SEEKDATA, c);
        curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 512L * 1024);
    } else if (strcmp(c->method, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method);
    }
    CURLMcode mc = curl_multi_add_handle(s3->multi, e);
    if (mc != CURLM_OK) {
        c->easy = NULL;
        easy_put(s3, e);
        snprintf(c->errbuf, sizeof c->errbuf, "%s", curl_multi_strerror(mc));
        finish_attempt(s3, c, CURLE_FAILED_INIT);
        return;
    }
    s3->inflight++;
    c->iprev = NULL;
    c->inext = s3->live;
    if (s3->live) s3->live->iprev = c;
    s3->live = c;
}

/* S3's billing class of a call (st_objectstore.h): what the request is
 * to S3's price list, not to us (a part is a PUT, a batch delete a POST,
 * an abort a DELETE). */
static st_os_class_t call_class(call_kind_t kind) {
    switch (kind) {
    case CALL_PUT:
    case CALL_MP_INIT:
    case CALL_MP_PART:
    case CALL_MP_COMPLETE:
    case CALL_LIST:
    case CALL_CHECK:
    case CALL_DELETE_BATCH:
    case CALL_COPY: return ST_OS_CLASS_WRITE;
    case CALL_GET:
    case CALL_HEAD:
    case CALL_MP_VERIFY: return ST_OS_CLASS_READ;
    case CALL_DELETE:
    case CALL_MP_ABORT: return ST_OS_CLASS_FREE;
    }
    return ST_OS_CLASS_READ;
}

/* Counts the attempt that just ended (before its handle goes back): one
 * whose request, or part of it, went out is one the server saw and may
 * bill, whatever came back (an error, a cut connection, a timeout); one
 * whose connection never opened (refused, unresolvable, a TLS failure)
 * sent nothing and is none. */
static void count_exchange(call_t *c) {
    long sent = 0;
    if (!c->easy || curl_easy_getinfo(c->easy, CURLINFO_REQUEST_SIZE, &sent) != CURLE_OK) return;
    if (sent > 0) st_os__count_requests(c->op->req, call_class(c->kind), 1);
}

/* Takes a call's handle out of the multi handle. */
static void unlive(s3_t *s3, call_t *c) {
    curl_multi_remove_handle(s3->multi, c->easy);
    s3->inflight--;
    if (c->iprev) c->iprev->inext = c->inext;
    else s3->live = c->inext;
    if (c->inext) c->inext->iprev = c->iprev;
    c->iprev = c->inext = NULL;
}

/* ------------------------------------------------------------------------
 * Judging an attempt
 * ---------------------------------------------------------------------- */

typedef struct verdict {
    st_err_t status; /* if this is the last attempt */
    int retry;       /* worth another attempt */
    char *msg; /* heap; NULL until set */
} verdict_t;

static void verdict_set(verdict_t *v, st_err_t status, int retry, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void verdict_set(verdict_t *v, st_err_t status, int retry, const char *fmt, ...) {
    v->status = status;
    v->retry = retry;
    va_list ap;
    va_start(ap, fmt);
    free(v->msg);
    v->msg = st_vstrprintf(fmt, ap);
    va_end(ap);
}

static const char *errbuf_or(const call_t *c, CURLcode cc) {
    return c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc);
}

static void judge_transport(s3_t *s3, call_t *c, CURLcode cc, verdict_t *v) {
    switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST:
        verdict_set(v, ST_E_RETRYABLE, 1, "cannot resolve %s: %s", s3->host, errbuf_or(c, cc));
        break;
    case CURLE_COULDNT_CONNECT:
        verdict_set(v, ST_E_RETRYABLE, 1, "cannot connect to %s: %s", s3->host,
                    errbuf_or(c, cc));
        break;
    case CURLE_OPERATION_TIMEDOUT:
        verdict_set(v, ST_E_RETRYABLE, 1, "timed out: %s", errbuf_or(c, cc));
        break;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_SEND_FAIL_REWIND:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_AGAIN:
        verdict_set(v, ST_E_RETRYABLE, 1, "connection to %s failed: %s", s3->host,
                    errbuf_or(c, cc));
        break;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
        verdict_set(v, ST_E_PERMANENT, 0,
                    "TLS: the certificate of %s is not trusted (%s); set objectstore.s3.ca.file "
                    "to the authority that signed it",
                    s3->host, errbuf_or(c, cc));
        break;
    case CURLE_WRITE_ERROR:
        if (c->sink_errno == EOVERFLOW)
            verdict_set(v, ST_E_RETRYABLE, 1, "the server sent more bytes than asked for");
        else
            verdict_set(v, c->sink_errno == ENOSPC || c->sink_errno == ENOMEM ? ST_E_RETRYABLE
                                                                               : ST_E_PERMANENT,
                        0, "writing what was read failed: %s", strerror(c->sink_errno));
        break;
    case CURLE_READ_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
        verdict_set(v, ST_E_PERMANENT, 0, "reading the data to send failed: %s",
                    strerror(c->read_errno ? c->read_errno : EIO));
        break;
    case CURLE_OUT_OF_MEMORY:
        verdict_set(v, ST_E_RETRYABLE, 1, "out of memory");
        break;
    default:
        verdict_set(v, ST_E_PERMANENT, 0, "HTTP client error %d: %s", (int)cc,
                    errbuf_or(c, cc));
    }
}

/* An HTTP error status: S3's error code says what it means. */
static void judge_http(s3_t *s3, call_t *c, verdict_t *v) {
    const char *bucket = s3->cfg->s3_bucket;
    st_os_s3_error_t e;
    int has = c->resp.len && !c->overflow &&
              st_os__s3_parse_error((const char *)c->resp.data, c->resp.len, &e) == 0;
    if (!has) memset(&e, 0, sizeof e);
    const char *code = e.code;
    char *detail = st_strprintf("HTTP %ld%s%s%s%s", c->http, code[0] ? " " : "", code,
                                e.message[0] ? ": " : "", e.message);
    long h = c->http;

    if (!strcmp(code, "InvalidAccessKeyId"))
        verdict_set(v, ST_E_PERMANENT, 0,
                    "wrong credentials: %s does not know the access key "
                    "(objectstore.s3.access.key or AWS_ACCESS_KEY_ID) [%s]",
                    s3->host, detail);
    else if (!strcmp(code, "SignatureDoesNotMatch"))
        verdict_set(v, ST_E_PERMANENT, 0,
                    "wrong credentials: the request signature does not match, so the secret "
                    "key is wrong (objectstore.s3.secret.key or AWS_SECRET_ACCESS_KEY) [%s]",
                    detail);
    else if (!strcmp(code, "RequestTimeTooSkewed"))
        verdict_set(v, ST_E_PERMANENT, 0,
                    "this machine's clock differs from the server's by more than 15 minutes "
                    "[%s]",
                    detail);
    else if (!strcmp(code, "ExpiredToken") || !strcmp(code, "InvalidToken") ||
             !strcmp(code, "TokenRefreshRequired"))
        verdict_set(v, ST_E_PERMANENT, 0,
                    "wrong credentials: the session token is expired or invalid [%s]", detail);
    else if (!strcmp(code, "AccessDenied") || !strcmp(code, "AllAccessDisabled"))
        verdict_set(v, ST_E_PERMANENT, 0,
                    "access denied to bucket %s: the credentials are valid but lack "
                    "permission [%s]",
                    bucket, detail);
    else if (!strcmp(code, "NoSuchBucket") ||
             (h == 404 && !code[0] &&
              (c->kind == CALL_LIST || c->kind == CALL_CHECK || c->kind == CALL_DELETE_BATCH)))
        verdict_set(v, ST_E_PERMANENT, 0, "bucket %s does not exist at %s [%s]", bucket,
                    s3->host, detail);
    else if (!strcmp(code, "NoSuchUpload"))
        verdict_set(v, ST_E_PERMANENT, 0, "the multipart upload is gone [%s]", detail);
    else if (!strcmp(code, "AuthorizationHeaderMalformed") && e.region[0])
        verdict_set(v, ST_E_PERMANENT, 0,
                    "wrong region: the bucket is in %s, set objectstore.s3.region [%s]",
                    e.region, detail);
    else if (!strcmp(code, "PermanentRedirect") || h == 301)
        verdict_set(v, ST_E_PERMANENT, 0,
                    "the bucket must be reached through another endpoint or region "
                    "(objectstore.s3.endpoint, objectstore.s3.region) [%s]",
                    detail);
    else if (h == 404)
        verdict_set(v, ST_E_NOT_FOUND, 0, "no such key [%s]", detail);
    else if (h == 412)
        verdict_set(v, ST_E_PRECONDITION_FAILED, 0,
                    "the object is not as the conditional put expected [%s]", detail);
    else if (h == 403)
        verdict_set(v, ST_E_PERMANENT, 0,
                    "access denied: wrong credentials or no permission on bucket %s [%s]",
                    bucket, detail);
    else if (st_os__s3_code_retryable(code) || h == 408 || h == 429 || h == 307 ||
             (h >= 500 && h != 501 && h != 505))
        verdict_set(v, ST_E_RETRYABLE, 1, "%s", detail);
    else
        verdict_set(v, ST_E_PERMANENT, 0, "%s", detail);
    free(detail);
}

/* ------------------------------------------------------------------------
 * Ops
 * ---------------------------------------------------------------------- */

static void call_done(s3_t *s3, call_t *c);
static void op_maybe_finish(s3_op_t *op);

static void op_fail(s3_op_t *op, st_err_t status, const char *msg) {
    if (op->failed) return; /* the first failure is the story */
    op->failed = 1;
    op->status = status;
    op->msg = st_strdup(msg);
}

static void op_failf(s3_op_t *op, st_err_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void op_failf(s3_op_t *op, st_err_t status, const char *fmt, ...) {
    if (op->failed) return;
    va_list ap;
    va_start(ap, fmt);
    char *m = st_vstrprintf(fmt, ap);
    va_end(ap);
    op_fail(op, status, m);
    free(m);
}

static void op_free(s3_op_t *op) {
    if (op->src_fd >= 0) close(op->src_fd);
    if (op->sink_fd >= 0) close(op->sink_fd);
    if (op->etags) {
        for (int i = 0; i < op->nparts; i++) free(op->etags[i]);
        free(op->etags);
    }
    free(op->upload_id);
    free(op->verify_why);
    free(op->msg);
    st_buf_fini(&op->failed_keys);
    /* A buffer not handed to the result is ours to free. */
    if (op->buf && op->req->res.data != op->buf) free(op->buf);
    free(op);
}

/* Completes the request once no call of it is left. */
static void op_maybe_finish(s3_op_t *op) {
    if (op->active > 0) return;
    st_os_req_t *req = op->req;
    req->backend = NULL;
    req->res.retries = op->retries;
    req->res.attempts = op->last_attempts;
    req->res.http_status = op->last_http;
    req->res.cancelled = op->cancelled;
    st_err_t status = op->failed ? op->status : ST_OK;
    if (status == ST_OK && req->rq.op == ST_OS_PUT) {
        req->res.has_object_size = 1;
        req->res.object_size = op->size;
        req->res.has_crc32c = 1;
        req->res.crc32c = op->crc;
    }
    char *msg = op->msg;
    op->msg = NULL;
    op_free(op);
    if (status == ST_OK) st_os__complete(req, ST_OK, NULL);
    else st_os__complete(req, status, "%s", msg ? msg : "");
    free(msg);
}

static s3_op_t *op_new(s3_t *s3, st_os_req_t *req) {
    s3_op_t *op = st_calloc(1, sizeof *op);
    op->req = req;
    op->s3 = s3;
    op->src_fd = -1;
    op->sink_fd = -1;
    st_buf_init(&op->failed_keys);
    req->backend = op;
    if (req->rq.key) op->fkey = st_os__full_key(req, s3->cfg->s3_prefix, req->rq.key);
    return op;
}

static call_t *object_call(s3_op_t *op, call_kind_t kind, const char *method) {
    call_t *c = call_new(op, kind, method);
    st_buf_t b;
    st_buf_init(&b);
    object_url(op->s3, &b, op->fkey);
    c->url = buf_take_str(&b);
    return c;
}

static void metadata_headers(s3_op_t *op, call_t *c) {
    const st_os_request_t *rq = &op->req->rq;
    add_header(c, "Content-Type: application/octet-stream");
    add_header(c, "x-amz-meta-%s: %08x", ST_OS_CRC_META, op->crc);
    for (size_t i = 0; i < rq->nmeta; i++)
        add_header(c, "x-amz-meta-%s: %s", rq->meta[i].name, rq->meta[i].value);
}

static void body_source(s3_op_t *op, call_t *c, uint64_t off, uint64_t len) {
    const st_os_request_t *rq = &op->req->rq;
    if (rq->src.kind == ST_OS_SRC_MEM) {
        c->body_mem = (const uint8_t *)rq->src.data + off;
        c->body_len = len;
    } else {
        c->body_fd = op->src_fd;
        c->body_off = rq->src.offset + off;
        c->body_len = len;
    }
}

/* ---- put ---- */

static void mp_next_parts(s3_op_t *op);

/* The configured part size, grown to whole MiB when the request caps the
 * number of parts (fewer, larger parts: fewer requests). */
static uint64_t put_part_size(const s3_op_t *op) {
    uint64_t ps = (uint64_t)op->s3->cfg->s3_part_size_bytes;
    uint64_t maxp = op->req->rq.max_parts > 0 ? (uint64_t)op->req->rq.max_parts : 0;
    if (maxp && op->size > ps * maxp) {
        ps = (op->size + maxp - 1) / maxp;
        ps = (ps + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
        if (ps > S3_MAX_PART_SIZE) ps = S3_MAX_PART_SIZE;
    }
    return ps;
}

static void put_start(s3_op_t *op) {
    s3_t *s3 = op->s3;
    op->part_size = put_part_size(op);
    const st_os_request_t *rq = &op->req->rq;
    int cond = rq->if_match || rq->if_none_match;
    /* a conditional put goes in one request, whatever the part size (S3
     * takes up to 5 GiB so) */
    if (op->size <= op->part_size || (cond && op->size <= S3_MAX_PART_SIZE)) {
        call_t *c = object_call(op, CALL_PUT, "PUT");
        common_headers(s3, c, NULL);
        metadata_headers(op, c);
        if (rq->if_match) add_header(c, "If-Match: %s", rq->if_match);
        if (rq->if_none_match) add_header(c, "If-None-Match: *");
        body_source(op, c, 0, op->size);
        ready_push(s3, c);
        return;
    }
    if (cond) {
        op_failf(op, ST_E_PERMANENT, "put %s: a conditional put of %llu bytes is over 5 GiB, "
                 "the most S3 takes in one request",
                 rq->key, (unsigned long long)op->size);
        op_maybe_finish(op);
        return;
    }
    uint64_t ps = op->part_size;
    uint64_t nparts = (op->size + ps - 1) / ps;
    if (nparts > S3_MAX_PARTS) {
        op_failf(op, ST_E_PERMANENT, "put %s: %llu bytes need %llu parts of %llu bytes, over S3's 10000; raise "
                 "objectstore.s3.part.size.bytes",
                 op->req->rq.key, (unsigned long long)op->size, (unsigned long long)nparts,
                 (unsigned long long)ps);
        op_maybe_finish(op);
        return;
    }
    op->nparts = (int)nparts;
    op->etags = st_calloc((size_t)op->nparts, sizeof *op->etags);
    call_t *c = call_new(op, CALL_MP_INIT, "POST");
    st_buf_t b;
    st_buf_init(&b);
    object_url(s3, &b, op->fkey);
    query_t q = {&b, NULL};
    qadd(&q, "uploads", NULL);
    c->url = buf_take_str(&b);
    c->want_xml = 1;
    common_headers(s3, c, NULL);
    metadata_headers(op, c);
    ready_push(s3, c);
}

static void mp_part_url(s3_op_t *op, call_t *c) {
    st_buf_t b;
    char num[16];
    st_buf_init(&b);
    object_url(op->s3, &b, op->fkey);
    query_t q = {&b, NULL};
    snprintf(num, sizeof num, "%d", c->part);
    qadd(&q, "partNumber", num);
    qadd(&q, "uploadId", op->upload_id);
    c->url = buf_take_str(&b);
}

static void mp_abort(s3_op_t *op) {
    s3_t *s3 = op->s3;
    if (!op->upload_id || op->cancelled) return;
    call_t *c = call_new(op, CALL_MP_ABORT, "DELETE");
    st_buf_t b;
    st_buf_init(&b);
    object_url(s3, &b, op->fkey);
    query_t q = {&b, NULL};
    qadd(&q, "uploadId", op->upload_id);
    c->url = buf_take_str(&b);
    common_headers(s3, c, NULL);
    ready_push(s3, c);
}

static void sha256_hex(const void *p, size_t n, char out[65]) {
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void md5_base64(const void *p, size_t n, char out[32]) {
    unsigned char md[16];
    unsigned int mdlen = 0;
    EVP_Digest(p, n, md, &mdlen, EVP_md5(), NULL);
    EVP_EncodeBlock((unsigned char *)out, md, 16);
}

/* An XML body we wrote: signed with its hash. */
static void xml_body(s3_t *s3, call_t *c, st_buf_t *body, int with_md5) {
    char sha[65], md5[32];
    sha256_hex(body->data, body->len, sha);
    common_headers(s3, c, sha);
    if (with_md5) {
        md5_base64(body->data, body->len, md5);
        add_header(c, "Content-MD5: %s", md5);
    }
    add_header(c, "Content-Type: application/xml");
    c->body_len = body->len;
    c->body_owned = (char *)body->data;
    c->body_mem = body->data;
    body->data = NULL;
    body->len = body->cap = 0;
}

static void mp_complete(s3_op_t *op) {
    s3_t *s3 = op->s3;
    call_t *c = call_new(op, CALL_MP_COMPLETE, "POST");
    st_buf_t b, body;
    st_buf_init(&b);
    st_buf_init(&body);
    object_url(s3, &b, op->fkey);
    query_t q = {&b, NULL};
    qadd(&q, "uploadId", op->upload_id);
    c->url = buf_take_str(&b);
    c->want_xml = 1;
    st_buf_printf(&body, "<CompleteMultipartUpload>");
    for (int i = 0; i < op->nparts; i++) {
        st_buf_printf(&body, "<Part><PartNumber>%d</PartNumber><ETag>", i + 1);
        st_os__xml_escape(&body, op->etags[i]);
        st_buf_printf(&body, "</ETag></Part>");
    }
    st_buf_printf(&body, "</CompleteMultipartUpload>");
    xml_body(s3, c, &body, 0);
    st_buf_fini(&body);
    ready_push(s3, c);
}

static void mp_next_parts(s3_op_t *op) {
    s3_t *s3 = op->s3;
    uint64_t ps = op->part_size;
    while (!op->failed && op->next_part < op->nparts &&
           op->parts_active < s3->cfg->s3_multipart_concurrency) {
        int i = op->next_part++;
        call_t *c = call_new(op, CALL_MP_PART, "PUT");
        c->part = i + 1;
        mp_part_url(op, c);
        common_headers(s3, c, NULL);
        uint64_t off = (uint64_t)i * ps;
        body_source(op, c, off, ST_MIN(ps, op->size - off));
        op->parts_active++;
        ready_push(s3, c);
    }
}

static void mp_verify(s3_op_t *op) {
    call_t *c = object_call(op, CALL_MP_VERIFY, "HEAD");
    common_headers(op->s3, c, NULL);
    ready_push(op->s3, c);
}

/* ---- get ---- */

static void get_start(s3_op_t *op) {
    s3_t *s3 = op->s3;
    st_os_request_t *rq = &op->req->rq;
    if (rq->sink.kind == ST_OS_SINK_FILE || rq->sink.kind == ST_OS_SINK_FD) {
        op->sink_fd = rq->sink.kind == ST_OS_SINK_FD
                          ? fcntl(rq->sink.fd, F_DUPFD_CLOEXEC, 0)
                          : open(rq->sink.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (op->sink_fd < 0) {
            op_failf(op, ST_E_PERMANENT, "get %s: cannot open %s: %s", rq->key,
                     rq->sink.path ? rq->sink.path : "its descriptor", strerror(errno));
            op_maybe_finish(op);
            return;
        }
    } else if (rq->sink.kind == ST_OS_SINK_MEM) {
        op->buf = rq->sink.buf;
        op->buf_cap = rq->sink.capacity;
    }
    call_t *c = object_call(op, CALL_GET, "GET");
    common_headers(s3, c, NULL);
    if (rq->offset != 0 || rq->length != ST_OS_TO_END) {
        if (rq->length == ST_OS_TO_END)
            add_header(c, "Range: bytes=%llu-", (unsigned long long)rq->offset);
        else
            add_header(c, "Range: bytes=%llu-%llu", (unsigned long long)rq->offset,
                       (unsigned long long)(rq->offset + rq->length - 1));
    }
    ready_push(s3, c);
}

/* Object facts from a HEAD or GET answer, into the result. */
static void object_info(s3_op_t *op, call_t *c) {
    st_os_req_t *req = op->req;
    st_os_result_t *res = &req->res;
    const char *v;
    if ((v = header_get(c, "etag"))) {
        char *etag = st_os__strdup(req, v);
        size_t n = strlen(etag);
        if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"') {
            memmove(etag, etag + 1, n - 2);
            etag[n - 2] = 0;
        }
        res->etag = etag;
    } else {
        res->etag = "";
    }
    if ((v = header_get(c, "last-modified"))) {
        time_t t = curl_getdate(v, NULL);
        if (t > 0) res->mtime_ms = (int64_t)t * 1000;
    }
    if ((v = header_get(c, "x-amz-meta-" ST_OS_CRC_META))) {
        char *end;
        unsigned long x = strtoul(v, &end, 16);
        if (*v && !*end && strlen(v) == 8) {
            res->has_crc32c = 1;
            res->crc32c = (uint32_t)x;
        }
    }
    size_t n = 0;
    const char *p = (const char *)c->hdrs.data, *end = p + c->hdrs.len;
    for (const char *q = p; q < end;) {
        const char *val = q + strlen(q) + 1;
        if (!strncmp(q, "x-amz-meta-", 11) && strcmp(q + 11, ST_OS_CRC_META) != 0) n++;
        q = val + strlen(val) + 1;
    }
    if (n) {
        st_os_meta_t *m = st_os__alloc(req, n * sizeof *m);
        size_t i = 0;
        for (const char *q = p; q < end && i < n;) {
            const char *val = q + strlen(q) + 1;
            if (!strncmp(q, "x-amz-meta-", 11) && strcmp(q + 11, ST_OS_CRC_META) != 0) {
                m[i].name = st_os__strdup(req, q + 11);
                m[i].value = st_os__strdup(req, val);
                i++;
            }
            q = val + strlen(val) + 1;
        }
        res->meta = m;
        res->nmeta = n;
    }
}

/* ---- list, check, delete ---- */

static void list_start(s3_op_t *op, call_kind_t kind) {
    s3_t *s3 = op->s3;
    st_os_request_t *rq = &op->req->rq;
    call_t *c = call_new(op, kind, "GET");
    st_buf_t b;
    char max[16];
    st_buf_init(&b);
    st_buf_printf(&b, "%s", s3->bucket_url);
    query_t q = {&b, NULL};
    if (kind == CALL_LIST && rq->token) qadd(&q, "continuation-token", rq->token);
    qadd(&q, "list-type", "2");
    snprintf(max, sizeof max, "%d", kind == CALL_LIST ? rq->max_keys : 1);
    qadd(&q, "max-keys", max);
    const char *prefix = st_os__full_key(op->req, s3->cfg->s3_prefix,
                                         kind == CALL_LIST ? rq->prefix : "");
    qadd(&q, "prefix", prefix);
    c->url = buf_take_str(&b);
    c->want_xml = 1;
    common_headers(s3, c, NULL);
    ready_push(s3, c);
}

static void delete_batch_next(s3_op_t *op) {
    s3_t *s3 = op->s3;
    st_os_request_t *rq = &op->req->rq;
    while (op->next_key < rq->nkeys && op->active < S3_DELETE_PARALLEL) {
        size_t n = ST_MIN((size_t)ST_OS_DELETE_BATCH_MAX, rq->nkeys - op->next_key);
        call_t *c = call_new(op, CALL_DELETE_BATCH, "POST");
        c->batch_off = op->next_key;
        c->batch_n = n;
        op->next_key += n;
        st_buf_t b, body;
        st_buf_init(&b);
        st_buf_init(&body);
        st_buf_printf(&b, "%s", s3->bucket_url);
        query_t q = {&b, NULL};
        qadd(&q, "delete", NULL);
        c->url = buf_take_str(&b);
        c->want_xml = 1;
        st_buf_printf(&body, "<Delete><Quiet>true</Quiet>");
        for (size_t i = 0; i < n; i++) {
            st_buf_printf(&body, "<Object><Key>");
            st_os__xml_escape(&body, st_os__full_key(op->req, s3->cfg->s3_prefix,
                                                     rq->keys[c->batch_off + i]));
            st_buf_printf(&body, "</Key></Object>");
        }
        st_buf_printf(&body, "</Delete>");
        xml_body(s3, c, &body, 1);
        st_buf_fini(&body);
        ready_push(s3, c);
    }
}

/* ---- copy ---- */

/* CopyObject: a PUT with no body naming the source (bucket and key,
 * URI-encoded) in x-amz-copy-source; the object's metadata, our CRC32C
 * with it, is copied too (S3's default directive, COPY).  S3 answers 200
 * before the copy is done, so the body says how it went. */
static void copy_start(s3_op_t *op) {
    s3_t *s3 = op->s3;
    const st_os_request_t *rq = &op->req->rq;
    call_t *c = object_call(op, CALL_COPY, "PUT");
    c->want_xml = 1;
    common_headers(s3, c, NULL);
    st_buf_t b;
    st_buf_init(&b);
    st_os__s3_uri_encode(&b, s3->cfg->s3_bucket, 0);
    st_buf_put(&b, "/", 1);
    st_os__s3_uri_encode(&b, st_os__full_key(op->req, s3->cfg->s3_prefix, rq->copy_source), 1);
    char *src = buf_take_str(&b);
    add_header(c, "x-amz-copy-source: %s", src);
    free(src);
    ready_push(s3, c);
}

/* ---- starting an op (loop thread) ---- */

static void op_start(s3_t *s3, s3_op_t *op) {
    st_os_req_t *req = op->req;
    if (req->early_status) {
        req->backend = NULL;
        op_free(op);
        st_os__complete_early(req);
        return;
    }
    if (op->prep_status) {
        op_maybe_finish(op); /* prep recorded the failure */
        return;
    }
    switch (req->rq.op) {
    case ST_OS_PUT: put_start(op); break;
    case ST_OS_GET: get_start(op); break;
    case ST_OS_HEAD: {
        call_t *c = object_call(op, CALL_HEAD, "HEAD");
        common_headers(s3, c, NULL);
        ready_push(s3, c);
        break;
    }
    case ST_OS_LIST: list_start(op, CALL_LIST); break;
    case ST_OS_CHECK: list_start(op, CALL_CHECK); break;
    case ST_OS_COPY: copy_start(op); break;
    case ST_OS_DELETE: {
        call_t *c = object_call(op, CALL_DELETE, "DELETE");
        common_headers(s3, c, NULL);
        ready_push(s3, c);
        break;
    }
    case ST_OS_DELETE_BATCH:
        delete_batch_next(op);
        op_maybe_finish(op); /* no keys: done */
        break;
    }
}

/* ------------------------------------------------------------------------
 * Finishing calls
 * ---------------------------------------------------------------------- */

static const char *attempts_text(const call_t *c, char *buf, size_t n) {
    if (c->attempt > 1) snprintf(buf, n, " (after %d attempts)", c->attempt);
    else buf[0] = 0;
    return buf;
}

/* A call's final failure becomes the op's. */
static void call_failed(call_t *c, const char *what) {
    s3_op_t *op = c->op;
    char att[48];
    const char *key = op->req->rq.key;
    if (c->status == ST_E_RETRYABLE && !c->cancelled)
        snprintf(att, sizeof att, " (gave up after %d attempts)", c->attempt);
    else
        attempts_text(c, att, sizeof att);
    op_failf(op, c->status, "%s%s%s: %s%s%s%s", st_os_op_name(op->req->rq.op), key ? " " : "",
             key ? key : "", what ? what : "", what ? ": " : "", c->msg ? c->msg : "", att);
}

static void finish_get(s3_op_t *op, call_t *c) {
    st_os_req_t *req = op->req;
    st_os_result_t *res = &req->res;
    if (c->status == ST_E_NOT_FOUND) {
        op_failf(op, ST_E_NOT_FOUND, "get %s: no such key", req->rq.key);
        return;
    }
    if (c->status) {
        call_failed(c, NULL);
        return;
    }
    object_info(op, c);
    if (c->http == 416) { /* only reaches here for offset 0: an empty object */
        res->has_object_size = 1;
        res->object_size = 0;
    } else if (c->http == 206 && c->range_total_known) {
        res->has_object_size = 1;
        res->object_size = c->range_total;
    } else if (c->http == 200 && c->content_length >= 0) {
        res->has_object_size = 1;
        res->object_size = (uint64_t)c->content_length;
    }
    if (req->rq.sink.kind != ST_OS_SINK_FILE && req->rq.sink.kind != ST_OS_SINK_FD) {
        if (!op->buf) op->buf = malloc(1); /* empty result: still a buffer */
        res->data = op->buf;
    }
    res->length = c->got;
    res->crc32c_verified = c->http != 416 && res->has_crc32c && res->has_object_size &&
                           req->rq.offset == 0 && c->got == res->object_size;
    st_os__count_bytes(req, 0, c->got);
}

static void finish_head(s3_op_t *op, call_t *c) {
    st_os_req_t *req = op->req;
    if (c->status == ST_E_NOT_FOUND) {
        op_failf(op, ST_E_NOT_FOUND, "head %s: no such key", req->rq.key);
        return;
    }
    if (c->status) {
        call_failed(c, NULL);
        return;
    }
    object_info(op, c);
    if (c->content_length >= 0) {
        req->res.has_object_size = 1;
        req->res.object_size = (uint64_t)c->content_length;
    }
}

static void finish_part(s3_op_t *op, call_t *c) {
    op->parts_active--;
    if (c->status == ST_OK) {
        const char *etag = header_get(c, "etag");
        op->etags[c->part - 1] = st_strdup(etag);
        op->parts_done++;
        st_os__count_bytes(op->req, c->body_len, 0);
    } else {
        char what[48];
        snprintf(what, sizeof what, "part %d of %d", c->part, op->nparts);
        call_failed(c, what);
    }
    if (op->failed) {
        if (op->parts_active == 0) mp_abort(op);
        return;
    }
    if (op->parts_done == op->nparts) mp_complete(op);
    else mp_next_parts(op);
}

static void call_done(s3_t *s3, call_t *c) {
    s3_op_t *op = c->op;
    op->last_attempts = c->attempt;
    op->last_http = (int)c->http;
    if (c->cancelled) op->cancelled = 1;
    switch (c->kind) {
    case CALL_PUT:
        /* S3 answers If-Match on a missing key 404: the condition failed */
        if (c->status == ST_E_NOT_FOUND && op->req->rq.if_match)
            c->status = ST_E_PRECONDITION_FAILED;
        if (c->status) call_failed(c, NULL);
        else st_os__count_bytes(op->req, c->body_len, 0);
        break;
    case CALL_MP_INIT:
        if (c->status) {
            call_failed(c, "starting the multipart upload");
        } else {
            mp_next_parts(op);
        }
        break;
    case CALL_MP_PART: finish_part(op, c); break;
    case CALL_MP_COMPLETE:
        if (c->status == ST_OK) break;
        if (c->outcome_unknown) {
            /* A 200 that says neither: the object may be there.  Retrying
             * would complete nothing (or a completed upload again, on a
             * server that allows it) and leave the object orphaned. */
            op->verify_why = st_strdup(c->msg);
            mp_verify(op);
            break;
        }
        if (c->status == ST_E_PERMANENT && strstr(c->msg, "NoSuchUpload") && c->attempt > 1) {
            /* An earlier attempt may have completed it and lost the answer. */
            mp_verify(op);
            break;
        }
        call_failed(c, "completing the multipart upload");
        mp_abort(op);
        break;
    case CALL_MP_VERIFY: {
        const char *v = c->status == ST_OK ? header_get(c, "x-amz-meta-" ST_OS_CRC_META) : NULL;
        char want[9];
        snprintf(want, sizeof want, "%08x", op->crc);
        int there = v && !strcmp(v, want) && c->content_length == (int64_t)op->size;
        const char *what = op->verify_why ? op->verify_why : "NoSuchUpload on a retry";
        if (there) {
            ST_INFO(ST_OS_SUBSYS, "put %s: completing the multipart upload answered %s; HEAD "
                    "finds the object with our size and CRC32C, so it is done",
                    op->req->rq.key, what);
            break;
        }
        if (c->status == ST_E_NOT_FOUND || c->status == ST_OK)
            op_failf(op, ST_E_RETRYABLE, "put %s: completing the multipart upload answered %s, and "
                     "the object is not there%s", op->req->rq.key, what,
                     c->status == ST_OK ? " with our size and CRC32C" : "");
        else
            op_failf(op, ST_E_RETRYABLE, "put %s: completing the multipart upload answered %s, and "
                     "checking for the object failed: %s", op->req->rq.key, what,
                     c->msg ? c->msg : "");
        /* Not known to be complete: abort it, so its parts go (a completed
         * one answers NoSuchUpload, which only costs a warning). */
        if (op->verify_why) mp_abort(op);
        break;
    }
    case CALL_MP_ABORT:
        if (c->status)
            ST_WARN(ST_OS_SUBSYS,
                    "put %s: aborting multipart upload failed (%s); a bucket lifecycle rule "
                    "for incomplete uploads reclaims it",
                    op->req->rq.key, c->msg);
        break;
    case CALL_GET: finish_get(op, c); break;
    case CALL_HEAD: finish_head(op, c); break;
    case CALL_LIST:
    case CALL_CHECK:
        if (c->status) call_failed(c, NULL);
        break;
    case CALL_COPY:
        if (c->status) { /* a 404 is the source's */
            char *from = st_strprintf("from %s", op->req->rq.copy_source);
            call_failed(c, from);
            free(from);
        }
        break;
    case CALL_DELETE:
        if (c->status == ST_E_NOT_FOUND) break; /* already gone: fine */
        if (c->status) call_failed(c, NULL);
        break;
    case CALL_DELETE_BATCH:
        if (c->status) {
            /* Every key of the batch failed with it. */
            for (size_t i = 0; i < c->batch_n; i++) {
                st_os_key_error_t ke = {op->req->rq.keys[c->batch_off + i], c->status,
                                        st_os__strdup(op->req, c->msg)};
                st_buf_put(&op->failed_keys, &ke, sizeof ke);
            }
        }
        if (!op->cancelled) delete_batch_next(op);
        break;
    }
    call_free(c);
    op->active--;
    if (op->active == 0 && op->req->rq.op == ST_OS_DELETE_BATCH) {
        size_t nf = op->failed_keys.len / sizeof(st_os_key_error_t);
        st_os_key_error_t *f = (st_os_key_error_t *)op->failed_keys.data;
        if (nf && !op->failed) {
            st_err_t worst = ST_E_RETRYABLE;
            for (size_t i = 0; i < nf; i++)
                if (f[i].status == ST_E_PERMANENT) worst = ST_E_PERMANENT;
            st_os_key_error_t *copy = st_os__alloc(op->req, nf * sizeof *copy);
            memcpy(copy, f, nf * sizeof *copy);
            op->req->res.failed = copy;
            op->req->res.nfailed = nf;
            op_failf(op, worst, "delete-batch: %zu of %zu keys not deleted (first: %s: %s)", nf,
                     op->req->rq.nkeys, copy[0].key, copy[0].message);
        }
    }
    op_maybe_finish(op);
}

/* Looks at a finished attempt: success, retry later, or final failure. */
static void finish_attempt(s3_t *s3, call_t *c, CURLcode cc) {
    s3_op_t *op = c->op;
    verdict_t v = {ST_OK, 0, NULL};
    if (c->easy) {
        if (!c->http) curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->http);
        if (st_log_debug_enabled(ST_OS_SUBSYS)) {
            curl_off_t pre = 0, start = 0, total = 0;
            curl_easy_getinfo(c->easy, CURLINFO_PRETRANSFER_TIME_T, &pre);
            curl_easy_getinfo(c->easy, CURLINFO_STARTTRANSFER_TIME_T, &start);
            curl_easy_getinfo(c->easy, CURLINFO_TOTAL_TIME_T, &total);
            ST_DEBUG(ST_OS_SUBSYS, "%s %s: HTTP %ld, curl %d, attempt %d, %lld bytes, "
                     "pretransfer %lld us, first byte %lld us, total %lld us",
                     c->method, c->url + strlen(s3->base_url), c->http, (int)cc, c->attempt,
                     (long long)(c->body_len + c->got), (long long)pre, (long long)start,
                     (long long)total);
        }
        count_exchange(c);
        easy_put(s3, c->easy);
        c->easy = NULL;
    }
    if (cc != CURLE_OK) {
        judge_transport(s3, c, cc, &v);
    } else if (c->kind == CALL_GET && c->http == 416) {
        if (op->req->rq.offset == 0) {
            v.status = ST_OK; /* reading an empty object from its start */
        } else {
            verdict_set(&v, ST_E_PERMANENT, 0, "range starts at %llu, past the end of the object",
                        (unsigned long long)op->req->rq.offset);
        }
    } else if (c->http < 200 || c->http >= 300) {
        judge_http(s3, c, &v);
    } else if (c->overflow) {
        verdict_set(&v, ST_E_RETRYABLE, 1, "answer larger than %u bytes", S3_RESP_MAX);
    } else {
        /* 2xx: check what the call needed from it. */
        char why[256] = "";
        switch (c->kind) {
        case CALL_MP_INIT: {
            char *id = st_os__s3_parse_upload_id((const char *)c->resp.data, c->resp.len, why,
                                                 sizeof why);
            if (!id) verdict_set(&v, ST_E_RETRYABLE, 1, "%s", why);
            else op->upload_id = id;
            break;
        }
        case CALL_MP_PART:
            if (!header_get(c, "etag"))
                verdict_set(&v, ST_E_RETRYABLE, 1, "part answer has no ETag");
            break;
        case CALL_MP_COMPLETE: {
            st_os_s3_error_t e;
            int rc = st_os__s3_parse_complete((const char *)c->resp.data, c->resp.len,
                                              "CompleteMultipartUploadResult", &e, why, sizeof why);
            c->outcome_unknown = rc == ST_OS_S3_COMPLETE_UNKNOWN;
            if (rc == ST_OS_S3_COMPLETE_ERROR)
                verdict_set(&v, st_os__s3_code_retryable(e.code) ? ST_E_RETRYABLE : ST_E_PERMANENT,
                            st_os__s3_code_retryable(e.code), "%s: %s %s", why, e.code,
                            e.message);
            else if (rc == ST_OS_S3_COMPLETE_UNKNOWN) /* not retried: checked with HEAD */
                verdict_set(&v, ST_E_RETRYABLE, 0, "HTTP 200 with %s", why);
            break;
        }
        case CALL_COPY: {
            /* A copy may be made again: an unknown outcome is retried. */
            st_os_s3_error_t e;
            int rc = st_os__s3_parse_complete((const char *)c->resp.data, c->resp.len,
                                              "CopyObjectResult", &e, why, sizeof why);
            if (rc == ST_OS_S3_COMPLETE_ERROR)
                verdict_set(&v, st_os__s3_code_retryable(e.code) ? ST_E_RETRYABLE : ST_E_PERMANENT,
                            st_os__s3_code_retryable(e.code), "%s: %s %s", why, e.code,
                            e.message);
            else if (rc == ST_OS_S3_COMPLETE_UNKNOWN)
                verdict_set(&v, ST_E_RETRYABLE, 1, "HTTP 200 with %s", why);
            break;
        }
        case CALL_LIST:
            if (st_os__s3_parse_list(op->req, s3->cfg->s3_prefix, (const char *)c->resp.data,
                                     c->resp.len, why, sizeof why))
                verdict_set(&v, ST_E_RETRYABLE, 1, "%s", why);
            break;
        case CALL_DELETE_BATCH: {
            st_os_key_error_t *f = NULL;
            size_t nf = 0;
            if (st_os__s3_parse_delete(op->req, s3->cfg->s3_prefix, (const char *)c->resp.data,
                                       c->resp.len, &f, &nf, why, sizeof why))
                verdict_set(&v, ST_E_RETRYABLE, 1, "%s", why);
            else if (nf)
                st_buf_put(&op->failed_keys, f, nf * sizeof *f);
            break;
        }
        case CALL_GET: {
            const st_os_request_t *rq = &op->req->rq;
            if (c->http == 206 && c->has_range && c->range_first != rq->offset) {
                verdict_set(&v, ST_E_RETRYABLE, 1, "server sent the range from %llu, not %llu",
                            (unsigned long long)c->range_first,
                            (unsigned long long)rq->offset);
                break;
            }
            if (c->http == 200 && (rq->offset || rq->length != ST_OS_TO_END) &&
                c->content_length >= 0 && rq->offset >= (uint64_t)c->content_length &&
                rq->offset > 0) {
                verdict_set(&v, ST_E_PERMANENT, 0,
                            "range starts at %llu, past the end of the %lld-byte object",
                            (unsigned long long)rq->offset, (long long)c->content_length);
                break;
            }
            /* Whole object read: check our CRC32C. */
            const char *crc = header_get(c, "x-amz-meta-" ST_OS_CRC_META);
            uint64_t total = c->http == 206 && c->range_total_known ? c->range_total
                             : c->http == 200 && c->content_length >= 0
                                 ? (uint64_t)c->content_length
                                 : UINT64_MAX;
            if (crc && rq->offset == 0 && c->got == total) {
                char mine[9];
                snprintf(mine, sizeof mine, "%08x", c->crc);
                if (strcmp(mine, crc) != 0)
                    verdict_set(&v, ST_E_PERMANENT, 1,
                                "object is corrupt or was damaged in transit: CRC32C of the "
                                "bytes read is %s, stored %s",
                                mine, crc);
            }
            break;
        }
        default: break;
        }
    }

    if (v.status != ST_OK && v.retry && c->attempt < s3->cfg->s3_retry_attempts &&
        !op->cancelled && !(c->kind == CALL_MP_PART && op->failed)) {
        int64_t delay = st_os__backoff_ms(s3->cfg, c->attempt);
        ST_LOG_RATELIMITED(ST_LOG_INFO, ST_OS_SUBSYS, 5000,
                           "%s %s: attempt %d failed (%s); retrying in %lld ms",
                           st_os_op_name(op->req->rq.op), op->req->rq.key ? op->req->rq.key : "",
                           c->attempt, v.msg, (long long)delay);
        free(v.msg);
        c->due_us = st_mono_us() + delay * 1000;
        timer_push(s3, c);
        return;
    }
    c->status = v.status;
    free(c->msg);
    c->msg = v.msg ? v.msg : st_strdup("");
    call_done(s3, c);
}

/* ------------------------------------------------------------------------
 * Loop
 * ---------------------------------------------------------------------- */

static void cancel_call(s3_t *s3, call_t *c) {
    c->cancelled = 1;
    c->status = ST_E_RETRYABLE;
    free(c->msg);
    c->msg = st_strdup("cancelled, the object store is closing");
    c->op->cancelled = 1;
    call_done(s3, c);
}

static void cancel_everything(s3_t *s3) {
    /* Ops whose calls are finished here may not start new ones: each op is
     * marked cancelled by its first cancelled call. */
    while (s3->ready_head || s3->timers) {
        call_t *c;
        if (s3->ready_head) {
            c = s3->ready_head;
            s3->ready_head = c->next;
            if (!s3->ready_head) s3->ready_tail = NULL;
        } else {
            c = s3->timers;
            s3->timers = c->next;
        }
        c->op->cancelled = 1;
        cancel_call(s3, c);
    }
    /* In flight: take each easy handle out of the multi handle. */
    while (s3->live) {
        call_t *c = s3->live;
        unlive(s3, c);
        count_exchange(c); /* what went out was seen */
        easy_put(s3, c->easy);
        c->easy = NULL;
        c->op->cancelled = 1;
        cancel_call(s3, c);
    }
    /* Cancelling may not queue anything new, but be sure. */
    while (s3->ready_head) {
        call_t *c = s3->ready_head;
        s3->ready_head = c->next;
        cancel_call(s3, c);
    }
    s3->ready_tail = NULL;
}

static void *loop_main(void *arg) {
    s3_t *s3 = arg;
    st_thread_set_name("os-s3");
    /* Uploads read segments and downloads may write the chunk cache: after
     * the log's own writes (its flusher is first in line). */
    st_thread_io_priority(ST_IO_BEST_EFFORT, 7);
    for (;;) {
        pthread_mutex_lock(&s3->lock);
        s3_op_t **ops = s3->inbox;
        size_t nops = s3->ninbox;
        int stopping = s3->stopping;
        s3->inbox = NULL;
        s3->ninbox = s3->inbox_cap = 0;
        pthread_mutex_unlock(&s3->lock);
        for (size_t i = 0; i < nops; i++) {
            if (stopping && !ops[i]->req->early_status) {
                ops[i]->cancelled = 1;
                op_failf(ops[i], ST_E_RETRYABLE, "%s: cancelled, the object store is closing",
                         st_os_op_name(ops[i]->req->rq.op));
                op_maybe_finish(ops[i]);
            } else {
                op_start(s3, ops[i]);
            }
        }
        free(ops);
        if (stopping) {
            cancel_everything(s3);
            break;
        }

        int64_t now = st_mono_us();
        while (s3->timers && s3->timers->due_us <= now) {
            call_t *c = s3->timers;
            s3->timers = c->next;
            if (c->op->failed && c->kind == CALL_MP_PART) {
                /* Its upload already failed: do not send it again. */
                c->status = ST_E_RETRYABLE;
                free(c->msg);
                c->msg = st_strdup("not retried, the upload failed");
                call_done(s3, c);
                continue;
            }
            ready_push(s3, c);
        }
        while (s3->ready_head && s3->inflight < s3->cfg->s3_max_connections) {
            call_t *c = s3->ready_head;
            s3->ready_head = c->next;
            if (!s3->ready_head) s3->ready_tail = NULL;
            start_call(s3, c);
        }

        int running = 0;
        curl_multi_perform(s3->multi, &running);
        CURLMsg *m;
        int left;
        int finished = 0;
        while ((m = curl_multi_info_read(s3->multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            CURL *e = m->easy_handle;
            CURLcode cc = m->data.result;
            call_t *c = NULL;
            curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&c);
            unlive(s3, c);
            finish_attempt(s3, c, cc);
            finished++;
        }
        if (finished || (s3->ready_head && s3->inflight < s3->cfg->s3_max_connections))
            continue; /* new work may be ready: no waiting */

        int timeout_ms = 1000;
        if (s3->timers) {
            int64_t wait = (s3->timers->due_us - st_mono_us() + 999) / 1000;
            if (wait < timeout_ms) timeout_ms = wait < 0 ? 0 : (int)wait;
        }
        curl_multi_poll(s3->multi, NULL, 0, timeout_ms, NULL);
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Submitting
 * ---------------------------------------------------------------------- */

static void inbox_push(s3_t *s3, s3_op_t *op) {
    pthread_mutex_lock(&s3->lock);
    if (s3->ninbox == s3->inbox_cap) {
        s3->inbox_cap = s3->inbox_cap ? s3->inbox_cap * 2 : 64;
        s3->inbox = st_realloc(s3->inbox, s3->inbox_cap * sizeof *s3->inbox);
    }
    s3->inbox[s3->ninbox++] = op;
    pthread_mutex_unlock(&s3->lock);
    curl_multi_wakeup(s3->multi);
}

/* Prep pool: the source's size and CRC32C, before the upload starts. */
static void prep_put(void *arg) {
    s3_op_t *op = arg;
    const st_os_request_t *rq = &op->req->rq;
    char *m = NULL;
    if (rq->src.kind == ST_OS_SRC_MEM) {
        op->size = rq->src.length;
        op->crc = rq->crc32c_known ? rq->crc32c : st_crc32c(0, rq->src.data, op->size);
        inbox_push(op->s3, op);
        return;
    }
    struct stat st;
    uint8_t *chunk = NULL;
    op->src_fd = open(rq->src.path, O_RDONLY | O_CLOEXEC);
    if (op->src_fd < 0 || fstat(op->src_fd, &st) != 0) {
        m = st_strprintf("put %s: cannot open the source file %s: %s", rq->key,
                 rq->src.path, strerror(errno));
        goto fail;
    }
    uint64_t fsize = (uint64_t)st.st_size;
    if (rq->src.offset > fsize ||
        (rq->src.length != ST_OS_TO_END && rq->src.length > fsize - rq->src.offset)) {
        m = st_strprintf("put %s: source %s is %llu bytes, shorter than the range asked",
                 rq->key, rq->src.path, (unsigned long long)fsize);
        goto fail;
    }
    op->size = rq->src.length == ST_OS_TO_END ? fsize - rq->src.offset : rq->src.length;
    if (rq->crc32c_known) {
        op->crc = rq->crc32c;
    } else {
        chunk = st_malloc(S3_PREP_CHUNK);
        uint32_t crc = 0;
        for (uint64_t done = 0; done < op->size;) {
            size_t n = (size_t)ST_MIN((uint64_t)S3_PREP_CHUNK, op->size - done);
            size_t got = 0;
            if (st_pread_all(op->src_fd, chunk, n, (int64_t)(rq->src.offset + done), &got) ||
                got != n) {
                m = st_strprintf("put %s: reading the source file %s failed: %s", rq->key,
                         rq->src.path, got != n ? "it shrank" : strerror(errno));
                goto fail;
            }
            crc = st_crc32c(crc, chunk, n);
            done += n;
        }
        op->crc = crc;
        free(chunk);
    }
    inbox_push(op->s3, op);
    return;
fail:
    free(chunk);
    op->prep_status = ST_E_PERMANENT;
    op_fail(op, ST_E_PERMANENT, m);
    free(m);
    inbox_push(op->s3, op);
}

static void s3_submit(st_os_t *os, st_os_req_t *req) {
    s3_t *s3 = os->impl;
    s3_op_t *op = op_new(s3, req);
    if (req->rq.op == ST_OS_PUT && !req->early_status) st_pool_submit(s3->prep, prep_put, op);
    else inbox_push(s3, op);
}

/* ------------------------------------------------------------------------
 * Opening and closing
 * ---------------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static st_err_t s3_open(st_os_t *os, char *err, size_t errlen) {
    const st_os_config_t *c = &os->cfg;
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK) {
        st_snprintf_marked(err, errlen, "objectstore: libcurl failed to start: %s",
                 curl_easy_strerror(curl_init_rc));
        return ST_E_CONFIG;
    }
    curl_version_info_data *vi = curl_version_info(CURLVERSION_NOW);
    if (vi->version_num < 0x074b00) { /* 7.75: CURLOPT_AWS_SIGV4 */
        st_snprintf_marked(err, errlen, "objectstore: libcurl %s is too old for SigV4 (7.75 or later)",
                 vi->version);
        return ST_E_CONFIG;
    }

    /* Bounds that make every URL buffer below fit (S3 bucket names have
     * at most 63 bytes, regions a few dozen). */
    const char *too_long = strlen(c->s3_endpoint) > 500 ? "objectstore.s3.endpoint"
                           : strlen(c->s3_bucket) > 255 ? "objectstore.s3.bucket"
                           : strlen(c->s3_region) > 64  ? "objectstore.s3.region"
                                                        : NULL;
    if (too_long) {
        st_snprintf_marked(err, errlen, "%s is too long", too_long);
        return ST_E_CONFIG;
    }

    s3_t *s3 = st_calloc(1, sizeof *s3);
    s3->os = os;
    s3->cfg = c;

    /* Endpoint: scheme://host[:port], no trailing '/'. */
    char endpoint[600];
    if (c->s3_endpoint[0]) snprintf(endpoint, sizeof endpoint, "%s", c->s3_endpoint);
    else snprintf(endpoint, sizeof endpoint, "https://s3.%s.amazonaws.com", c->s3_region);
    size_t el = strlen(endpoint);
    while (el && endpoint[el - 1] == '/') endpoint[--el] = 0;
    const char *sep = strstr(endpoint, "://");
    const char *hostpart = sep ? sep + 3 : NULL;
    if (!hostpart || !*hostpart || strchr(hostpart, '/')) {
        st_snprintf_marked(err, errlen, "objectstore.s3.endpoint: '%s' must be scheme://host[:port]",
                 endpoint);
        free(s3);
        return ST_E_CONFIG;
    }
    snprintf(s3->host, sizeof s3->host, "%s", hostpart);
    if (!c->s3_path_style && (hostpart[0] == '[' || strspn(hostpart, "0123456789.:") ==
                                                        strlen(hostpart))) {
        snprintf(err, errlen,
                 "objectstore.s3.path.style: virtual-host addressing needs a host name in "
                 "objectstore.s3.endpoint, not the address %s",
                 hostpart);
        free(s3);
        return ST_E_CONFIG;
    }
    if (c->s3_path_style) {
        snprintf(s3->base_url, sizeof s3->base_url, "%s/%s", endpoint, c->s3_bucket);
        snprintf(s3->bucket_url, sizeof s3->bucket_url, "%s", s3->base_url);
    } else {
        if (strchr(c->s3_bucket, '.') && !strncmp(endpoint, "https", 5))
            ST_WARN(ST_OS_SUBSYS,
                    "bucket %s has dots: its virtual-host name will not match a wildcard TLS "
                    "certificate; consider objectstore.s3.path.style=true",
                    c->s3_bucket);
        snprintf(s3->base_url, sizeof s3->base_url, "%.*s%s.%s",
                 (int)(hostpart - endpoint), endpoint, c->s3_bucket, hostpart);
        snprintf(s3->bucket_url, sizeof s3->bucket_url, "%s/", s3->base_url);
    }
    snprintf(s3->sigv4, sizeof s3->sigv4, "aws:amz:%s:s3", c->s3_region);
    if (strlen(c->s3_access_key) >= sizeof s3->auth_user ||
        strlen(c->s3_secret_key) >= sizeof s3->auth_pass ||
        strlen(c->s3_session_token) + 32 >= sizeof s3->token_header) {
        st_snprintf_marked(err, errlen, "objectstore.s3: credentials are implausibly long");
        free(s3);
        return ST_E_CONFIG;
    }
    snprintf(s3->auth_user, sizeof s3->auth_user, "%s", c->s3_access_key);
    snprintf(s3->auth_pass, sizeof s3->auth_pass, "%s", c->s3_secret_key);
    if (c->s3_session_token[0])
        snprintf(s3->token_header, sizeof s3->token_header, "x-amz-security-token: %s",
                 c->s3_session_token);

    s3->multi = curl_multi_init();
    s3->share = curl_share_init();
    if (!s3->multi || !s3->share) {
        st_snprintf_marked(err, errlen, "objectstore: out of memory for the HTTP client");
        if (s3->multi) curl_multi_cleanup(s3->multi);
        if (s3->share) curl_share_cleanup(s3->share);
        free(s3);
        return ST_E_NOMEM;
    }
    /* One thread uses the share: no lock callbacks needed. */
    curl_share_setopt(s3->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(s3->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_multi_setopt(s3->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)c->s3_max_connections);
    curl_multi_setopt(s3->multi, CURLMOPT_MAXCONNECTS, (long)c->s3_max_connections);
    s3->idle = st_calloc((size_t)c->s3_max_connections, sizeof *s3->idle);
    pthread_mutex_init(&s3->lock, NULL);
    s3->prep = st_pool_new(S3_PREP_THREADS, "os-prep");
    st_snprintf_marked(os->describe, sizeof os->describe, "s3://%s/%s (%s)", c->s3_bucket,
                       c->s3_prefix, endpoint);
    os->impl = s3;
    if (pthread_create(&s3->thread, NULL, loop_main, s3) != 0) {
        st_snprintf_marked(err, errlen, "objectstore: cannot start its thread");
        st_pool_destroy(s3->prep);
        curl_multi_cleanup(s3->multi);
        curl_share_cleanup(s3->share);
        free(s3->idle);
        free(s3);
        os->impl = NULL;
        return ST_E_NOMEM;
    }
    return ST_OK;
}

static void s3_close(st_os_t *os) {
    s3_t *s3 = os->impl;
    st_pool_destroy(s3->prep); /* finishes preps: they land in the inbox */
    pthread_mutex_lock(&s3->lock);
    s3->stopping = 1;
    pthread_mutex_unlock(&s3->lock);
    curl_multi_wakeup(s3->multi);
    pthread_join(s3->thread, NULL);
    for (int i = 0; i < s3->nidle; i++) curl_easy_cleanup(s3->idle[i]);
    curl_multi_cleanup(s3->multi);
    curl_share_cleanup(s3->share);
    pthread_mutex_destroy(&s3->lock);
    free(s3->inbox);
    free(s3->idle);
    /* Wipe the secret before the memory goes back. */
    volatile char *p = s3->auth_pass;
    for (size_t i = 0; i < sizeof s3->auth_pass; i++) p[i] = 0;
    free(s3);
    os->impl = NULL;
}

const st_os_ops_t st_os_s3_ops = {
    .name = "s3",
    .open = s3_open,
    .submit = s3_submit,
    .close = s3_close,
};

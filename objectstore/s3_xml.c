/*
 * s3_xml.c - reading the XML S3 answers with, and writing the XML it
 * wants for CompleteMultipartUpload and DeleteObjects.
 *
 * Parsing uses expat without namespace processing: element names are
 * compared after dropping any "prefix:" part, so answers parse the same
 * whether a server declares the S3 namespace, another one, or none.  The
 * bytes are hostile: sizes and counts are bounded, text that is not a
 * number where a number belongs fails the parse.
 */
#include "objectstore_int.h"

#include <ctype.h>
#include <expat.h>
#include <stdlib.h>
#include <time.h>

#define XML_DEPTH_MAX 8
#define XML_NAME_MAX 64
#define XML_TEXT_MAX 65536

typedef struct walker walker_t;
/* Called when an element closes: its name, its parent's name ("" for the
 * root) and its text (only leaf text is meaningful). */
typedef void (*elem_end_cb)(walker_t *w, const char *parent, const char *name, const char *text);

struct walker {
    XML_Parser parser;
    char stack[XML_DEPTH_MAX][XML_NAME_MAX];
    int depth; /* elements open; deeper ones than XML_DEPTH_MAX are skipped */
    char root[XML_NAME_MAX];
    st_buf_t text;
    int text_overflow;
    elem_end_cb on_end;
    void *ud;
    int failed; /* set by a callback: stop and report */
    char why[160];
};

static const char *local_name(const char *name) {
    const char *colon = strrchr(name, ':');
    return colon ? colon + 1 : name;
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs) {
    (void)attrs;
    walker_t *w = ud;
    if (w->depth < XML_DEPTH_MAX)
        snprintf(w->stack[w->depth], XML_NAME_MAX, "%s", local_name(name));
    if (w->depth == 0) snprintf(w->root, sizeof w->root, "%s", local_name(name));
    w->depth++;
    w->text.len = 0;
    w->text_overflow = 0;
}

static void XMLCALL on_end(void *ud, const XML_Char *name) {
    (void)name;
    walker_t *w = ud;
    w->depth--;
    if (w->depth >= XML_DEPTH_MAX || w->failed) return;
    st_buf_put(&w->text, "", 1);
    const char *parent = w->depth > 0 ? w->stack[w->depth - 1] : "";
    w->on_end(w, parent, w->stack[w->depth], (const char *)w->text.data);
    w->text.len = 0;
}

/* S3 never sends a document type; one could only define entities. */
static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                               const XML_Char *pubid, int has_internal_subset) {
    (void)name;
    (void)sysid;
    (void)pubid;
    (void)has_internal_subset;
    walker_t *w = ud;
    w->failed = 1;
    snprintf(w->why, sizeof w->why, "XML answer with a DOCTYPE refused");
    XML_StopParser(w->parser, XML_FALSE);
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len) {
    walker_t *w = ud;
    if (w->text_overflow || len <= 0) return;
    if (w->text.len + (size_t)len > XML_TEXT_MAX) {
        w->text_overflow = 1;
        return;
    }
    st_buf_put(&w->text, s, (size_t)len);
}

/* Parses xml (len bytes), calling on_end for each element.  0 on success;
 * otherwise why says what went wrong. */
static int walk_xml(const char *xml, size_t len, elem_end_cb cb, void *ud, walker_t *w) {
    memset(w, 0, sizeof *w);
    st_buf_init(&w->text);
    w->on_end = cb;
    w->ud = ud;
    /* Some servers send whitespace before the document while they work
     * (CompleteMultipartUpload); a declaration must come first for expat. */
    while (len && isspace((unsigned char)*xml)) {
        xml++;
        len--;
    }
    if (!len) {
        snprintf(w->why, sizeof w->why, "empty XML answer");
        st_buf_fini(&w->text);
        return -1;
    }
    w->parser = XML_ParserCreate(NULL);
    if (!w->parser) {
        snprintf(w->why, sizeof w->why, "out of memory for the XML parser");
        st_buf_fini(&w->text);
        return -1;
    }
    XML_SetUserData(w->parser, w);
    XML_SetElementHandler(w->parser, on_start, on_end);
    XML_SetCharacterDataHandler(w->parser, on_text);
    XML_SetStartDoctypeDeclHandler(w->parser, on_doctype);
    int rc = 0;
    if (len > INT32_MAX) {
        snprintf(w->why, sizeof w->why, "XML answer too large");
        rc = -1;
    } else if (XML_Parse(w->parser, xml, (int)len, 1) != XML_STATUS_OK && !w->failed) {
        snprintf(w->why, sizeof w->why, "malformed XML answer (%s at line %lu)",
                 XML_ErrorString(XML_GetErrorCode(w->parser)),
                 (unsigned long)XML_GetCurrentLineNumber(w->parser));
        rc = -1;
    } else if (w->failed) {
        rc = -1;
    }
    XML_ParserFree(w->parser);
    st_buf_fini(&w->text);
    return rc;
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!*s) return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        if (v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* "2024-05-01T12:34:56.789Z" -> ms since the epoch; 0 when unparseable. */
int64_t st_os__s3_parse_iso8601(const char *s) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int ms = 0;
    int n = sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec);
    if (n != 6) return 0;
    const char *dot = strchr(s, '.');
    if (dot) {
        int digits = 0;
        for (const char *p = dot + 1; *p >= '0' && *p <= '9' && digits < 3; p++, digits++)
            ms = ms * 10 + (*p - '0');
        while (digits++ < 3) ms *= 10;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    return (int64_t)t * 1000 + ms;
}

/* ETags come quoted; we keep them bare. */
static void unquote(char *s) {
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        memmove(s, s + 1, n - 2);
        s[n - 2] = 0;
    }
}

/* ------------------------------------------------------------------------
 * <Error>
 * ---------------------------------------------------------------------- */

static void error_end(walker_t *w, const char *parent, const char *name, const char *text) {
    st_os_s3_error_t *e = w->ud;
    if (strcmp(parent, "Error") != 0) return;
    /* The server's words, kept within bounds; a cut says so. */
    if (!strcmp(name, "Code")) st_snprintf_marked(e->code, sizeof e->code, "%s", text);
    else if (!strcmp(name, "Message")) st_snprintf_marked(e->message, sizeof e->message, "%s", text);
    else if (!strcmp(name, "Region")) st_snprintf_marked(e->region, sizeof e->region, "%s", text);
}

int st_os__s3_parse_error(const char *xml, size_t len, st_os_s3_error_t *out) {
    walker_t w;
    memset(out, 0, sizeof *out);
    if (walk_xml(xml, len, error_end, out, &w) != 0) return -1;
    if (strcmp(w.root, "Error") != 0) return -1;
    /* Messages go into ours: keep them printable and on one line. */
    for (char *p = out->message; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';
    for (char *p = out->code; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';
    return 0;
}

/* ------------------------------------------------------------------------
 * ListObjectsV2: <ListBucketResult>
 * ---------------------------------------------------------------------- */

typedef struct list_ctx {
    st_os_req_t *req;
    const char *strip; /* configured prefix, removed from every key */
    size_t strip_len;
    st_os_entry_t *entries;
    size_t n, cap;
    st_os_entry_t cur;
    int have_key;
    int truncated;
    char *next_token;
} list_ctx_t;

static void list_end(walker_t *w, const char *parent, const char *name, const char *text) {
    list_ctx_t *c = w->ud;
    if (!strcmp(parent, "Contents")) {
        if (!strcmp(name, "Key")) {
            if (strncmp(text, c->strip, c->strip_len) != 0) {
                w->failed = 1;
                snprintf(w->why, sizeof w->why, "listing returned a key outside the prefix");
                return;
            }
            c->cur.key = st_os__strdup(c->req, text + c->strip_len);
            c->have_key = 1;
        } else if (!strcmp(name, "Size")) {
            if (parse_u64(text, &c->cur.size)) {
                w->failed = 1;
                snprintf(w->why, sizeof w->why, "listing has a Size that is not a number");
            }
        } else if (!strcmp(name, "ETag")) {
            char *etag = st_os__strdup(c->req, text);
            unquote(etag);
            c->cur.etag = etag;
        } else if (!strcmp(name, "LastModified")) {
            c->cur.mtime_ms = st_os__s3_parse_iso8601(text);
        }
        return;
    }
    if (!strcmp(name, "Contents")) {
        if (!c->have_key) {
            w->failed = 1;
            snprintf(w->why, sizeof w->why, "listing has an entry without a Key");
            return;
        }
        if (c->n == c->cap) {
            size_t ncap = c->cap ? c->cap * 2 : 64;
            st_os_entry_t *v = st_os__alloc(c->req, ncap * sizeof *v);
            if (c->n) memcpy(v, c->entries, c->n * sizeof *v);
            c->entries = v;
            c->cap = ncap;
        }
        if (!c->cur.etag) c->cur.etag = "";
        c->entries[c->n++] = c->cur;
        memset(&c->cur, 0, sizeof c->cur);
        c->have_key = 0;
        return;
    }
    if (!strcmp(parent, "ListBucketResult")) {
        if (!strcmp(name, "IsTruncated")) c->truncated = !strcmp(text, "true");
        else if (!strcmp(name, "NextContinuationToken") && *text)
            c->next_token = st_os__strdup(c->req, text);
    }
}

int st_os__s3_parse_list(st_os_req_t *req, const char *strip, const char *xml, size_t len,
                         char *why, size_t whylen) {
    list_ctx_t c;
    walker_t w;
    memset(&c, 0, sizeof c);
    c.req = req;
    c.strip = strip ? strip : "";
    c.strip_len = strlen(c.strip);
    if (walk_xml(xml, len, list_end, &c, &w) != 0) {
        snprintf(why, whylen, "%s", w.why);
        return -1;
    }
    if (strcmp(w.root, "ListBucketResult") != 0) {
        snprintf(why, whylen, "expected a ListBucketResult, got <%s>", w.root);
        return -1;
    }
    if (c.truncated && !c.next_token) {
        snprintf(why, whylen, "listing is truncated but has no NextContinuationToken");
        return -1;
    }
    req->res.entries = c.entries;
    req->res.nentries = c.n;
    req->res.next_token = c.truncated ? c.next_token : NULL;
    return 0;
}

/* ------------------------------------------------------------------------
 * InitiateMultipartUpload and CompleteMultipartUpload
 * ---------------------------------------------------------------------- */

typedef struct upload_ctx {
    char *upload_id; /* whole: a cut id names another upload (or none) */
} upload_ctx_t;

static void upload_end(walker_t *w, const char *parent, const char *name, const char *text) {
    upload_ctx_t *c = w->ud;
    if (!strcmp(parent, "InitiateMultipartUploadResult") && !strcmp(name, "UploadId")) {
        free(c->upload_id);
        c->upload_id = st_strdup(text);
    }
}

char *st_os__s3_parse_upload_id(const char *xml, size_t len, char *why, size_t whylen) {
    upload_ctx_t c = {NULL};
    walker_t w;
    if (walk_xml(xml, len, upload_end, &c, &w) != 0) {
        snprintf(why, whylen, "%s", w.why);
        free(c.upload_id);
        return NULL;
    }
    if (!c.upload_id || !c.upload_id[0]) {
        snprintf(why, whylen, "InitiateMultipartUpload answer has no UploadId (root <%s>)",
                 w.root);
        free(c.upload_id);
        return NULL;
    }
    return c.upload_id;
}

static void ignore_end(walker_t *w, const char *parent, const char *name, const char *text) {
    (void)w;
    (void)parent;
    (void)name;
    (void)text;
}

/* Only the result means done and only an <Error> means not done: S3 sends
 * the 200 (and then whitespace) before it knows, so whatever else comes
 * (moto's CompleteMultipartUploadResponse, an empty body, XML cut short by
 * a proxy) says nothing about the outcome. */
int st_os__s3_parse_complete(const char *xml, size_t len, const char *root,
                             st_os_s3_error_t *err, char *why, size_t whylen) {
    walker_t w;
    memset(err, 0, sizeof *err);
    if (walk_xml(xml, len, ignore_end, NULL, &w) != 0) {
        snprintf(why, whylen, "an unreadable answer (%s)", w.why);
        return ST_OS_S3_COMPLETE_UNKNOWN;
    }
    if (!strcmp(w.root, root)) return ST_OS_S3_COMPLETE_OK;
    if (!strcmp(w.root, "Error") && st_os__s3_parse_error(xml, len, err) == 0 && err->code[0]) {
        snprintf(why, whylen, "server answered 200 with an error: %s", err->code);
        return ST_OS_S3_COMPLETE_ERROR;
    }
    snprintf(why, whylen, "an unexpected <%s> answer", w.root);
    return ST_OS_S3_COMPLETE_UNKNOWN;
}

/* ------------------------------------------------------------------------
 * DeleteObjects: <DeleteResult>
 * ---------------------------------------------------------------------- */

typedef struct delete_ctx {
    st_os_req_t *req;
    const char *strip;
    size_t strip_len;
    st_os_key_error_t *failed;
    size_t n, cap;
    char *key; /* heap, whole (prefix included, so it may pass ST_OS_KEY_MAX) */
    char code[64];
    char message[256];
} delete_ctx_t;

static void delete_end(walker_t *w, const char *parent, const char *name, const char *text) {
    delete_ctx_t *c = w->ud;
    if (!strcmp(parent, "Error")) {
        if (!strcmp(name, "Key")) {
            free(c->key);
            c->key = st_strdup(text);
        }
        else if (!strcmp(name, "Code")) st_snprintf_marked(c->code, sizeof c->code, "%s", text);
        else if (!strcmp(name, "Message")) st_snprintf_marked(c->message, sizeof c->message, "%s", text);
        return;
    }
    if (strcmp(name, "Error") != 0 || strcmp(parent, "DeleteResult") != 0) return;
    /* A key that is already gone counts as deleted. */
    if (!strcmp(c->code, "NoSuchKey")) goto reset;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        st_os_key_error_t *v = st_os__alloc(c->req, ncap * sizeof *v);
        if (c->n) memcpy(v, c->failed, c->n * sizeof *v);
        c->failed = v;
        c->cap = ncap;
    }
    const char *k = c->key ? c->key : "";
    if (!strncmp(k, c->strip, c->strip_len)) k += c->strip_len;
    st_os_key_error_t *f = &c->failed[c->n++];
    f->key = st_os__strdup(c->req, k);
    f->status = st_os__s3_code_retryable(c->code) ? ST_E_RETRYABLE : ST_E_PERMANENT;
    char *m = st_strprintf("%s%s%s", c->code, c->message[0] ? ": " : "", c->message);
    f->message = st_os__strdup(c->req, m);
    free(m);
reset:
    free(c->key);
    c->key = NULL;
    c->code[0] = c->message[0] = 0;
}

int st_os__s3_parse_delete(st_os_req_t *req, const char *strip, const char *xml, size_t len,
                           st_os_key_error_t **failed, size_t *nfailed, char *why,
                           size_t whylen) {
    delete_ctx_t *c = st_os__alloc(req, sizeof *c);
    walker_t w;
    c->req = req;
    c->strip = strip ? strip : "";
    c->strip_len = strlen(c->strip);
    int rc = walk_xml(xml, len, delete_end, c, &w);
    free(c->key); /* an <Error> the answer left open */
    c->key = NULL;
    if (rc != 0) {
        snprintf(why, whylen, "%s", w.why);
        return -1;
    }
    if (strcmp(w.root, "DeleteResult") != 0) {
        snprintf(why, whylen, "expected a DeleteResult, got <%s>", w.root);
        return -1;
    }
    *failed = c->failed;
    *nfailed = c->n;
    return 0;
}

/* ------------------------------------------------------------------------
 * Writing
 * ---------------------------------------------------------------------- */

void st_os__xml_escape(st_buf_t *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': st_buf_put(b, "&amp;", 5); break;
        case '<': st_buf_put(b, "&lt;", 4); break;
        case '>': st_buf_put(b, "&gt;", 4); break;
        case '"': st_buf_put(b, "&quot;", 6); break;
        case '\'': st_buf_put(b, "&apos;", 6); break;
        default: st_buf_put(b, s, 1);
        }
    }
}

int st_os__s3_code_retryable(const char *code) {
    static const char *const codes[] = {
        "InternalError", "SlowDown", "ServiceUnavailable", "RequestTimeout",
        "OperationAborted", "Throttling", "ThrottlingException",
        "TooManyRequests", "InternalFailure",
        "ConditionalRequestConflict" /* two conditional puts at once: retry */};
    for (size_t i = 0; i < ST_ARRAY_SIZE(codes); i++)
        if (!strcmp(code, codes[i])) return 1;
    return 0;
}

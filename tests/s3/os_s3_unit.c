/*
 * os_s3_unit.c - the s3 backend's pure parts, without a server: reading S3's
 * XML (with and without namespaces, hostile or malformed), escaping keys
 * into URLs and XML, and retry backoff bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "objectstore_int.h"

/* A request record, only for its arena and result. */
static st_os_req_t *fake_req(void) {
    st_os_req_t *req = calloc(1, sizeof *req);
    st_arena_init(&req->arena, 4096);
    return req;
}

static void free_req(st_os_req_t *req) {
    st_arena_fini(&req->arena);
    free(req);
}

#define XMLDECL "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
#define MPU_RESULT "CompleteMultipartUploadResult"

static void test_error_plain_and_prefixed(void **state) {
    (void)state;
    const char *a = XMLDECL "<Error><Code>NoSuchBucket</Code><Message>The bucket\nis gone"
                            "</Message><BucketName>b</BucketName></Error>";
    st_os_s3_error_t e;
    assert_int_equal(st_os__s3_parse_error(a, strlen(a), &e), 0);
    assert_string_equal(e.code, "NoSuchBucket");
    assert_string_equal(e.message, "The bucket is gone"); /* one line */
    /* A prefixed namespace parses the same. */
    const char *b = XMLDECL "<s3:Error xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                            "<s3:Code>AuthorizationHeaderMalformed</s3:Code>"
                            "<s3:Region>eu-west-1</s3:Region></s3:Error>";
    assert_int_equal(st_os__s3_parse_error(b, strlen(b), &e), 0);
    assert_string_equal(e.code, "AuthorizationHeaderMalformed");
    assert_string_equal(e.region, "eu-west-1");
    /* Not an error document, or not XML at all. */
    const char *c = XMLDECL "<ListBucketResult/>";
    assert_int_equal(st_os__s3_parse_error(c, strlen(c), &e), -1);
    assert_int_equal(st_os__s3_parse_error("<html>", 6, &e), -1);
    assert_int_equal(st_os__s3_parse_error("", 0, &e), -1);
}

static const char *LIST =
    XMLDECL "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            "<Name>b</Name><Prefix>pre/x</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
            "<IsTruncated>true</IsTruncated><NextContinuationToken>tok/+=</NextContinuationToken>"
            "<Contents><Key>pre/x1</Key><LastModified>2024-05-01T12:34:56.789Z</LastModified>"
            "<ETag>&quot;abc&quot;</ETag><Size>42</Size></Contents>"
            "<Contents><Key>pre/x&amp;2</Key><Size>0</Size></Contents>"
            "</ListBucketResult>";

static void test_list(void **state) {
    (void)state;
    st_os_req_t *req = fake_req();
    char why[256];
    assert_int_equal(st_os__s3_parse_list(req, "pre/", LIST, strlen(LIST), why, sizeof why), 0);
    assert_int_equal(req->res.nentries, 2);
    assert_string_equal(req->res.entries[0].key, "x1"); /* configured prefix removed */
    assert_int_equal(req->res.entries[0].size, 42);
    assert_string_equal(req->res.entries[0].etag, "abc");
    assert_int_equal(req->res.entries[0].mtime_ms, 1714566896789LL);
    assert_string_equal(req->res.entries[1].key, "x&2");
    assert_string_equal(req->res.entries[1].etag, "");
    assert_string_equal(req->res.next_token, "tok/+=");
    free_req(req);

    /* A key outside the configured prefix is a broken answer. */
    req = fake_req();
    assert_int_equal(st_os__s3_parse_list(req, "other/", LIST, strlen(LIST), why, sizeof why), -1);
    assert_non_null(strstr(why, "outside the prefix"));
    free_req(req);

    const char *bad_size = XMLDECL "<ListBucketResult><IsTruncated>false</IsTruncated>"
                                   "<Contents><Key>k</Key><Size>12x</Size></Contents></ListBucketResult>";
    req = fake_req();
    assert_int_equal(st_os__s3_parse_list(req, "", bad_size, strlen(bad_size), why, sizeof why), -1);
    free_req(req);

    const char *no_token = XMLDECL "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
    req = fake_req();
    assert_int_equal(st_os__s3_parse_list(req, "", no_token, strlen(no_token), why, sizeof why), -1);
    assert_non_null(strstr(why, "NextContinuationToken"));
    free_req(req);

    const char *empty = XMLDECL "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";
    req = fake_req();
    assert_int_equal(st_os__s3_parse_list(req, "", empty, strlen(empty), why, sizeof why), 0);
    assert_int_equal(req->res.nentries, 0);
    assert_null(req->res.next_token);
    free_req(req);

    /* Cut short: malformed. */
    req = fake_req();
    assert_int_equal(st_os__s3_parse_list(req, "pre/", LIST, strlen(LIST) / 2, why, sizeof why), -1);
    assert_non_null(strstr(why, "malformed"));
    free_req(req);
}

static void test_multipart_answers(void **state) {
    (void)state;
    char why[256];
    const char *init = XMLDECL "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
                               "<UploadId>2~abc</UploadId></InitiateMultipartUploadResult>";
    char *id = st_os__s3_parse_upload_id(init, strlen(init), why, sizeof why);
    assert_non_null(id);
    assert_string_equal(id, "2~abc");
    free(id);
    const char *noid = XMLDECL "<InitiateMultipartUploadResult/>";
    assert_null(st_os__s3_parse_upload_id(noid, strlen(noid), why, sizeof why));
    /* An id longer than any buffer of ours comes back whole (a cut one
     * would name another upload). */
    st_buf_t b;
    st_buf_init(&b);
    st_buf_printf(&b, XMLDECL "<InitiateMultipartUploadResult><UploadId>");
    for (int i = 0; i < 3000; i++) st_buf_put(&b, i % 2 ? "a" : "Z", 1);
    st_buf_printf(&b, "</UploadId></InitiateMultipartUploadResult>");
    id = st_os__s3_parse_upload_id((const char *)b.data, b.len, why, sizeof why);
    assert_non_null(id);
    assert_int_equal(strlen(id), 3000);
    free(id);
    st_buf_fini(&b);

    /* Whitespace sent while the server works, then the answer. */
    st_os_s3_error_t e;
    const char *ok = "\n   \n" XMLDECL "<CompleteMultipartUploadResult><ETag>\"x-2\"</ETag>"
                     "</CompleteMultipartUploadResult>";
    assert_int_equal(st_os__s3_parse_complete(ok, strlen(ok), MPU_RESULT, &e, why, sizeof why), ST_OS_S3_COMPLETE_OK);
    /* 200 with an error inside. */
    const char *err = "  " XMLDECL "<Error><Code>InternalError</Code><Message>try again</Message></Error>";
    assert_int_equal(st_os__s3_parse_complete(err, strlen(err), MPU_RESULT, &e, why, sizeof why), ST_OS_S3_COMPLETE_ERROR);
    assert_string_equal(e.code, "InternalError");
    assert_true(st_os__s3_code_retryable(e.code));
}

/*
 * A 200 to CompleteMultipartUpload that is neither the result nor an
 * <Error> leaves the outcome unknown: the object may well be there.  moto
 * answers with a CompleteMultipartUploadResponse root; proxies and servers
 * cut short send an empty body or broken XML.  These must come out as
 * UNKNOWN (the backend then checks with HEAD) and never as a failure to
 * retry: a retried completion of a completed upload leaves the object
 * behind as an orphan, one per attempt (35 in 100 s with moto).
 */
static void test_complete_answers(void **state) {
    (void)state;
    static const struct {
        const char *what, *xml;
        int want;
    } cases[] = {
        {"the result", XMLDECL "<CompleteMultipartUploadResult><Location>http://h/b/k</Location>"
                       "<Bucket>b</Bucket><Key>k</Key><ETag>\"3858f6-2\"</ETag>"
                       "</CompleteMultipartUploadResult>", ST_OS_S3_COMPLETE_OK},
        {"the result in S3's namespace, prefixed",
         XMLDECL "<s3:CompleteMultipartUploadResult xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                 "<s3:ETag>\"x-2\"</s3:ETag></s3:CompleteMultipartUploadResult>", ST_OS_S3_COMPLETE_OK},
        {"moto's root element",
         XMLDECL "<CompleteMultipartUploadResponse xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                 "<Location>http://h/b/k</Location><Bucket>b</Bucket><Key>k</Key>"
                 "<ETag>\"3858f6-2\"</ETag></CompleteMultipartUploadResponse>", ST_OS_S3_COMPLETE_UNKNOWN},
        {"an empty body", "", ST_OS_S3_COMPLETE_UNKNOWN},
        {"only whitespace", " \n \n ", ST_OS_S3_COMPLETE_UNKNOWN},
        {"XML cut short", XMLDECL "<CompleteMultipartUploadResult><ETag>\"x-2", ST_OS_S3_COMPLETE_UNKNOWN},
        {"not XML", "OK", ST_OS_S3_COMPLETE_UNKNOWN},
        {"an <Error> that may pass", XMLDECL "<Error><Code>SlowDown</Code><Message>m</Message></Error>",
         ST_OS_S3_COMPLETE_ERROR},
        {"an <Error> that will not", XMLDECL "<Error><Code>InvalidPart</Code><Message>m</Message></Error>",
         ST_OS_S3_COMPLETE_ERROR},
    };
    for (size_t i = 0; i < ST_ARRAY_SIZE(cases); i++) {
        st_os_s3_error_t e;
        char why[256] = "";
        int rc = st_os__s3_parse_complete(cases[i].xml, strlen(cases[i].xml), MPU_RESULT, &e, why, sizeof why);
        if (rc != cases[i].want)
            fail_msg("%s: parse_complete answered %d, want %d (%s)", cases[i].what, rc, cases[i].want, why);
        if (rc == ST_OS_S3_COMPLETE_UNKNOWN) assert_true(why[0] != 0); /* it says what it saw */
        if (rc == ST_OS_S3_COMPLETE_ERROR) assert_true(e.code[0] != 0);
    }
    /* moto's answer is named in the reason, so an operator sees which it was */
    st_os_s3_error_t e;
    char why[256];
    assert_int_equal(st_os__s3_parse_complete(cases[2].xml, strlen(cases[2].xml), MPU_RESULT, &e, why, sizeof why),
                     ST_OS_S3_COMPLETE_UNKNOWN);
    assert_non_null(strstr(why, "CompleteMultipartUploadResponse"));
    /* CopyObject's answer is judged the same way against its own root */
    const char *copied = XMLDECL "<CopyObjectResult><LastModified>2026-12-06T10:00:00.000Z"
                                 "</LastModified><ETag>\"9b2cf5\"</ETag></CopyObjectResult>";
    assert_int_equal(st_os__s3_parse_complete(copied, strlen(copied), "CopyObjectResult", &e, why,
                                              sizeof why),
                     ST_OS_S3_COMPLETE_OK);
    assert_int_equal(st_os__s3_parse_complete(copied, strlen(copied), MPU_RESULT, &e, why,
                                              sizeof why),
                     ST_OS_S3_COMPLETE_UNKNOWN);
    assert_int_equal(st_os__s3_parse_complete(cases[0].xml, strlen(cases[0].xml),
                                              "CopyObjectResult", &e, why, sizeof why),
                     ST_OS_S3_COMPLETE_UNKNOWN);
    /* a server's long message is kept within bounds, and says it was cut */
    st_buf_t b;
    st_buf_init(&b);
    st_buf_printf(&b, XMLDECL "<Error><Code>InternalError</Code><Message>");
    for (int i = 0; i < 1000; i++) st_buf_put(&b, "m", 1);
    st_buf_printf(&b, "</Message></Error>");
    assert_int_equal(st_os__s3_parse_complete((const char *)b.data, b.len, MPU_RESULT, &e, why, sizeof why),
                     ST_OS_S3_COMPLETE_ERROR);
    assert_string_equal(e.message + strlen(e.message) - 8, "...[cut]");
    st_buf_fini(&b);
}

static void test_delete_result(void **state) {
    (void)state;
    const char *x = XMLDECL "<DeleteResult>"
                            "<Deleted><Key>p/a</Key></Deleted>"
                            "<Error><Key>p/b</Key><Code>AccessDenied</Code><Message>no</Message></Error>"
                            "<Error><Key>p/c</Key><Code>NoSuchKey</Code></Error>"
                            "<Error><Key>p/d</Key><Code>InternalError</Code></Error>"
                            "</DeleteResult>";
    st_os_req_t *req = fake_req();
    st_os_key_error_t *f = NULL;
    size_t n = 0;
    char why[256];
    assert_int_equal(st_os__s3_parse_delete(req, "p/", x, strlen(x), &f, &n, why, sizeof why), 0);
    assert_int_equal(n, 2); /* NoSuchKey counts as deleted */
    assert_string_equal(f[0].key, "b");
    assert_int_equal(f[0].status, ST_E_PERMANENT);
    assert_string_equal(f[0].message, "AccessDenied: no");
    assert_string_equal(f[1].key, "d");
    assert_int_equal(f[1].status, ST_E_RETRYABLE);
    free_req(req);
}

/* Entity expansion ("billion laughs") must not be obeyed. */
static void test_hostile_xml(void **state) {
    (void)state;
    char x[4096];
    int o = snprintf(x, sizeof x, "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\">");
    char prev = 'a';
    for (char c = 'b'; c <= 'k'; c++) {
        o += snprintf(x + o, sizeof x - (size_t)o, "<!ENTITY %c \"", c);
        for (int i = 0; i < 10; i++) o += snprintf(x + o, sizeof x - (size_t)o, "&%c;", prev);
        o += snprintf(x + o, sizeof x - (size_t)o, "\">");
        prev = c;
    }
    o += snprintf(x + o, sizeof x - (size_t)o, "]><Error><Code>&k;</Code></Error>");
    st_os_s3_error_t e;
    assert_int_equal(st_os__s3_parse_error(x, (size_t)o, &e), -1);
    /* Deep nesting is walked without trouble. */
    st_buf_t b;
    st_buf_init(&b);
    for (int i = 0; i < 200; i++) st_buf_printf(&b, "<a>");
    for (int i = 0; i < 200; i++) st_buf_printf(&b, "</a>");
    assert_int_equal(st_os__s3_parse_error((const char *)b.data, b.len, &e), -1);
    st_buf_fini(&b);
}

static void test_escaping(void **state) {
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    st_os__s3_uri_encode(&b, "a b/c+d~e_f.g-h%\xc3\xa9", 1);
    st_buf_put(&b, "", 1);
    assert_string_equal((char *)b.data, "a%20b/c%2Bd~e_f.g-h%25%C3%A9");
    b.len = 0;
    st_os__s3_uri_encode(&b, "x/y=z", 0);
    st_buf_put(&b, "", 1);
    assert_string_equal((char *)b.data, "x%2Fy%3Dz");
    b.len = 0;
    st_os__xml_escape(&b, "<a & 'b' \"c\">");
    st_buf_put(&b, "", 1);
    assert_string_equal((char *)b.data, "&lt;a &amp; &apos;b&apos; &quot;c&quot;&gt;");
    st_buf_fini(&b);
}

static void test_backoff(void **state) {
    (void)state;
    st_os_config_t c;
    st_os_config_init(&c);
    c.s3_retry_backoff_ms = 100;
    c.s3_retry_backoff_max_ms = 1000;
    for (int n = 1; n <= 12; n++) {
        int64_t cap = 100;
        for (int i = 1; i < n && cap < 1000; i++) cap *= 2;
        if (cap > 1000) cap = 1000;
        int64_t lo = INT64_MAX, hi = 0;
        for (int k = 0; k < 200; k++) {
            int64_t d = st_os__backoff_ms(&c, n);
            assert_true(d >= cap / 2 && d <= cap);
            lo = ST_MIN(lo, d);
            hi = ST_MAX(hi, d);
        }
        assert_true(hi > lo); /* jitter */
    }
    st_os_config_fini(&c);
}

static void test_config_table(void **state) {
    (void)state;
    st_os_config_t c;
    st_os_config_init(&c);
    assert_string_equal(c.backend, "file");
    assert_int_equal(c.s3_part_size_bytes, 8 * 1024 * 1024);
    char err[512];
    st_cfg_bind_t bind = {&st_os_config_table, &c, NULL};
    assert_int_equal(st_cfg_override(&bind, 1, "objectstore.backend=gcs", err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "objectstore.backend"));
    assert_int_equal(st_cfg_override(&bind, 1, "objectstore.s3.endpoint=ftp://x", err, sizeof err), ST_E_CONFIG);
    assert_int_equal(st_cfg_override(&bind, 1, "objectstore.s3.endpoint=http://u:p@host", err, sizeof err), ST_E_CONFIG);
    assert_int_equal(st_cfg_override(&bind, 1, "objectstore.s3.bucket=a/b", err, sizeof err), ST_E_CONFIG);
    assert_int_equal(st_cfg_override(&bind, 1, "objectstore.s3.part.size.bytes=1000", err, sizeof err), ST_E_CONFIG);
    /* Every key is ours. */
    for (size_t i = 0; i < st_os_config_table.count; i++)
        assert_int_equal(strncmp(st_os_config_table.rows[i].name, "objectstore.", 12), 0);

    /* s3 without a bucket or credentials: one line naming the key. */
    assert_int_equal(st_cfg_override(&bind, 1, "objectstore.backend=s3", err, sizeof err), ST_OK);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    st_os_t *os = NULL;
    assert_int_equal(st_os_new(&c, &os, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "objectstore.s3.bucket"));
    assert_int_equal(st_cfg_override(&bind, 1, "objectstore.s3.bucket=bkt", err, sizeof err), ST_OK);
    assert_int_equal(st_os_new(&c, &os, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "AWS_ACCESS_KEY_ID"));
    /* ... then from the environment. */
    setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SECRET", 1);
    setenv("AWS_REGION", "eu-west-3", 1);
    assert_int_equal(st_os_new(&c, &os, err, sizeof err), ST_OK);
    assert_non_null(strstr(st_os_describe(os), "https://s3.eu-west-3.amazonaws.com"));
    assert_null(strstr(st_os_describe(os), "SECRET"));
    st_os_destroy(os);
    /* Virtual-host addressing needs a name, not an address. */
    assert_int_equal(st_cfg_override(&bind, 1, "objectstore.s3.endpoint=http://10.0.0.1:9000", err, sizeof err), ST_OK);
    assert_int_equal(st_cfg_override(&bind, 1, "objectstore.s3.path.style=false", err, sizeof err), ST_OK);
    assert_int_equal(st_os_new(&c, &os, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "path.style"));
    st_os_config_fini(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_plain_and_prefixed),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_multipart_answers),
        cmocka_unit_test(test_complete_answers),
        cmocka_unit_test(test_delete_result),
        cmocka_unit_test(test_hostile_xml),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_config_table),
    };
    return cmocka_run_group_tests_name("objectstore s3 pieces", tests, NULL, NULL);
}

/*
 * bucket.c - `strata bucket`: the operator's view of the bucket, through
 * the same object store layer and configuration as the broker.
 *
 *   ls [PREFIX]          size, modification time and key of every object
 *   stat KEY             size, CRC32C, ETag, modification time, metadata
 *   get KEY LOCALFILE    the whole object into LOCALFILE ("-": stdout),
 *                        checked against its CRC32C
 *   put KEY LOCALFILE    LOCALFILE as the object KEY
 *   rm KEY               delete KEY (an error if it does not exist)
 *
 * Output goes to stdout; a failure is one line on stderr and exit status 1.
 */
#include "cli_int.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void st_cli_bucket_usage(FILE *out) {
    fprintf(out,
            "usage: strata bucket --config FILE [--override key=value ...] <verb>\n"
            "verbs:\n"
            "  ls [PREFIX]          list objects (size, time, key)\n"
            "  stat KEY             show an object's size, checksum and metadata\n"
            "  get KEY LOCALFILE    download an object (LOCALFILE - for stdout)\n"
            "  put KEY LOCALFILE    upload a file\n"
            "  rm KEY               delete an object\n");
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *line = st_vstrprintf(fmt, ap); /* whole: keys are up to 1024 bytes, causes name them */
    va_end(ap);
    /* One line, whatever the message held. */
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "strata bucket: %s\n", line);
    free(line);
    return ST_CLI_EXIT_FAIL;
}

static void format_time(int64_t ms, char *out, size_t n) {
    if (ms <= 0) {
        snprintf(out, n, "-");
        return;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void print_entry(const st_os_entry_t *entry, void *arg) {
    (void)arg;
    char when[32];
    format_time(entry->mtime_ms, when, sizeof when);
    printf("%12llu  %s  %s\n", (unsigned long long)entry->size, when, entry->key);
}

static int cmd_ls(st_os_t *os, const char *prefix) {
    char *why;
    int rc = ST_CLI_EXIT_OK;
    if (st_os_list_each(os, NULL, prefix, print_entry, NULL, &why)) {
        rc = fail("%s", why);
        free(why);
    }
    if (fflush(stdout) != 0) return fail("ls: writing the listing failed: %s", strerror(errno));
    return rc;
}

static int cmd_stat(st_os_t *os, const char *key) {
    st_os_request_t rq = {.op = ST_OS_HEAD, .key = key};
    st_os_result_t *r = st_os_run(os, &rq);
    int rc = ST_CLI_EXIT_OK;
    if (r->status != ST_OK) {
        rc = r->status == ST_E_NOT_FOUND ? fail("stat %s: no such key", key)
                                          : fail("%s", r->message);
    } else {
        char when[32];
        format_time(r->mtime_ms, when, sizeof when);
        printf("key:           %s\n", key);
        printf("size:          %llu\n", (unsigned long long)r->object_size);
        if (r->has_crc32c) printf("crc32c:        %08x\n", r->crc32c);
        else printf("crc32c:        (none: not written by strata)\n");
        printf("etag:          %s\n", r->etag ? r->etag : "");
        printf("last-modified: %s\n", when);
        for (size_t i = 0; i < r->nmeta; i++)
            printf("meta %s: %s\n", r->meta[i].name, r->meta[i].value);
    }
    st_os_result_free(r);
    return rc;
}

static int write_all(int fd, const void *p, size_t n) {
    const char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int cmd_get(st_os_t *os, const char *key, const char *path) {
    int rc = ST_CLI_EXIT_OK;
    if (!strcmp(path, "-")) {
        st_os_request_t rq = {.op = ST_OS_GET, .key = key, .length = ST_OS_TO_END};
        st_os_result_t *r = st_os_run(os, &rq);
        if (r->status != ST_OK) rc = fail("%s", r->message);
        else if (write_all(STDOUT_FILENO, r->data, r->length))
            rc = fail("get %s: writing to stdout failed: %s", key, strerror(errno));
        st_os_result_free(r);
        return rc;
    }
    /* Into a temporary file beside the target, renamed when complete, so
     * that a failed download never leaves a partial LOCALFILE. */
    char tmp[4200];
    if (strlen(path) > sizeof tmp - 16) return fail("get %s: path too long: %s", key, path);
    snprintf(tmp, sizeof tmp, "%s.strata-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) return fail("get %s: cannot create a file beside %s: %s", key, path, strerror(errno));
    close(fd);
    st_os_request_t rq = {.op = ST_OS_GET, .key = key, .length = ST_OS_TO_END, .sink = {.kind = ST_OS_SINK_FILE, .path = tmp}};
    st_os_result_t *r = st_os_run(os, &rq);
    if (r->status != ST_OK) {
        rc = fail("%s", r->message);
        unlink(tmp);
    } else if (chmod(tmp, 0644) != 0 || rename(tmp, path) != 0) {
        rc = fail("get %s: cannot move the download to %s: %s", key, path, strerror(errno));
        unlink(tmp);
    } else {
        printf("downloaded %s: %llu bytes%s\n", key, (unsigned long long)r->length,
               r->crc32c_verified ? ", CRC32C verified" : "");
    }
    st_os_result_free(r);
    return rc;
}

static int cmd_put(st_os_t *os, const char *key, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return fail("put %s: %s: %s", key, path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return fail("put %s: %s is not a regular file", key, path);
    st_os_request_t rq = {.op = ST_OS_PUT, .key = key, .src = {.kind = ST_OS_SRC_FILE, .path = path, .length = ST_OS_TO_END}};
    st_os_result_t *r = st_os_run(os, &rq);
    int rc = ST_CLI_EXIT_OK;
    if (r->status != ST_OK) rc = fail("%s", r->message);
    else printf("uploaded %s: %llu bytes\n", key, (unsigned long long)st.st_size);
    st_os_result_free(r);
    return rc;
}

static int cmd_rm(st_os_t *os, const char *key) {
    /* S3 deletes a missing key without complaint; an operator who typed a
     * key wants to know it was not there. */
    st_os_request_t hq = {.op = ST_OS_HEAD, .key = key};
    st_os_result_t *r = st_os_run(os, &hq);
    if (r->status != ST_OK) {
        int rc = r->status == ST_E_NOT_FOUND ? fail("rm %s: no such key", key)
                                             : fail("%s", r->message);
        st_os_result_free(r);
        return rc;
    }
    st_os_result_free(r);
    st_os_request_t rq = {.op = ST_OS_DELETE, .key = key};
    r = st_os_run(os, &rq);
    int rc = ST_CLI_EXIT_OK;
    if (r->status != ST_OK) rc = fail("%s", r->message);
    else printf("deleted %s\n", key);
    st_os_result_free(r);
    return rc;
}

int st_cli_bucket(const st_os_config_t *cfg, int argc, char **argv) {
    if (argc < 1) {
        st_cli_bucket_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    const char *verb = argv[0];
    int want = !strcmp(verb, "ls") ? -1
               : !strcmp(verb, "stat") || !strcmp(verb, "rm") ? 2
               : !strcmp(verb, "get") || !strcmp(verb, "put") ? 3
                                                               : 0;
    if (want == 0 || (want == -1 && argc > 2) || (want > 0 && argc != want)) {
        if (want == 0) fprintf(stderr, "strata bucket: unknown verb '%s'\n", verb);
        else fprintf(stderr, "strata bucket: wrong number of arguments for '%s'\n", verb);
        st_cli_bucket_usage(stderr);
        return ST_CLI_EXIT_USAGE;
    }
    /* Retries are reported in the final message; keep stderr to one line. */
    st_log_set_level(ST_LOG_ERROR);
    st_os_t *os;
    char err[1024];
    if (st_os_new(cfg, &os, err, sizeof err)) return fail("%s", err);
    int rc;
    if (!strcmp(verb, "ls")) rc = cmd_ls(os, argc > 1 ? argv[1] : "");
    else if (!strcmp(verb, "stat")) rc = cmd_stat(os, argv[1]);
    else if (!strcmp(verb, "get")) rc = cmd_get(os, argv[1], argv[2]);
    else if (!strcmp(verb, "put")) rc = cmd_put(os, argv[1], argv[2]);
    else rc = cmd_rm(os, argv[1]);
    st_os_destroy(os);
    return rc;
}

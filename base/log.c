/*
 * log.c - log lines, clocks and thread names.
 *
 * A line: time, level, thread, subsystem, message.  Lines are written with a
 * single fwrite under the stream's lock so threads never interleave.
 */
#include "st_base.h"

#include <stdlib.h>
#include <time.h>
#include <sys/time.h>

volatile int st_log_level_g = ST_LOG_INFO;

static FILE *log_file;
static char log_debug_list[256];
static int log_debug_all;
static _Thread_local char thread_name[16] = "main";

static const char *level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

void st_log_set_level(st_log_level_t level) { st_log_level_g = (int)level; }

int st_log_parse_level(const char *s, st_log_level_t *out) {
    for (int i = 0; i < (int)ST_ARRAY_SIZE(level_names); i++)
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (st_log_level_t)i;
            return 0;
        }
    return -1;
}

void st_log_set_file(FILE *f) { log_file = f; }

void st_log_set_debug(const char *subsystems) {
    snprintf(log_debug_list, sizeof log_debug_list, ",%s,", subsystems ? subsystems : "");
    log_debug_all = strstr(log_debug_list, ",all,") != NULL;
}

int st_log_debug_enabled(const char *subsys) {
    if (log_debug_all) return 1;
    if (!log_debug_list[0] || !subsys) return 0;
    char key[64];
    snprintf(key, sizeof key, ",%s,", subsys);
    return strstr(log_debug_list, key) != NULL;
}

void st_thread_set_name(const char *name) {
    snprintf(thread_name, sizeof thread_name, "%s", name);
    pthread_setname_np(pthread_self(), thread_name);
}

const char *st_thread_name(void) { return thread_name; }

void st_log_write(st_log_level_t level, const char *subsys, const char *fmt, ...) {
    char line[2048];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %-5s [%s] %s: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (int)(tv.tv_usec / 1000),
                     level_names[level < 0 || level > ST_LOG_TRACE ? 0 : level], thread_name,
                     subsys ? subsys : "-");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : ST_MIN((size_t)m, sizeof line - (size_t)n - 2));
    line[len++] = '\n';
    FILE *f = log_file ? log_file : stderr;
    fwrite(line, 1, len, f);
    fflush(f);
}

st_err_t st__corrupt_bkpt(const char *file, int line) {
    ST_LOG_RATELIMITED(ST_LOG_WARN, "corrupt", 1000, "corrupt input detected at %s:%d", file,
                       line);
    return ST_E_CORRUPT;
}

int64_t st_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t st_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t st_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

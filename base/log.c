/*
 * log.c - log lines, clocks and thread names.
 *
 * A line: time, level, thread, subsystem, message.  Lines are written with a
 * single fwrite under the stream's lock so threads never interleave.  A
 * message is written whole up to 64 KiB (keys and causes make long lines);
 * past that it is cut with a marker saying how much is missing.
 */
#include "st_base.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

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

int st_thread_io_priority(st_io_class_t cls, int level) {
    /* <linux/ioprio.h>: the class above 13 bits of level data; "who" 1 is
     * a process, which with id 0 is the calling thread. */
    long v = ((long)cls << 13) | (cls == ST_IO_IDLE ? 0 : level);
    return syscall(SYS_ioprio_set, 1, 0, v) == 0 ? 0 : errno;
}

/* A line is formatted on the stack when it fits (nearly always), else on
 * the heap: object keys, paths and causes make lines long, and a line cut
 * short loses the cause at its end.  Past ST_LOG_LINE_MAX a line is cut,
 * saying so and by how much, so it is never cut silently. */
#define ST_LOG_LINE_MAX (64 * 1024)

void st_log_write(st_log_level_t level, const char *subsys, const char *fmt, ...) {
    char stack[2048], *line = stack;
    size_t cap = sizeof stack;
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    char head[160];
    int n = snprintf(head, sizeof head, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %-5s [%s] %.40s: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (int)(tv.tv_usec / 1000),
                     level_names[level < 0 || level > ST_LOG_TRACE ? 0 : level], thread_name,
                     subsys ? subsys : "-");
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof head) n = (int)sizeof head - 1; /* the subsystem is capped above */
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int m = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (m < 0) m = 0;
    size_t want = (size_t)n + (size_t)m + 1; /* and the newline */
    size_t keep = (size_t)m;                /* message bytes written */
    if (want + 1 > cap) {
        size_t size = ST_MIN(want + 1, (size_t)ST_LOG_LINE_MAX);
        char *heap = malloc(size);
        if (heap) {
            line = heap;
            cap = size;
        }
    }
    static const char cut_fmt[] = " ...[line cut: %zu more bytes]";
    char cut[64] = "";
    if (want + 1 > cap) { /* over the cap (or no memory): cut, visibly */
        size_t room = cap - (size_t)n - 1 - sizeof cut;
        snprintf(cut, sizeof cut, cut_fmt, (size_t)m - room);
        keep = room;
    }
    memcpy(line, head, (size_t)n);
    vsnprintf(line + n, keep + 1, fmt, again);
    va_end(again);
    size_t len = (size_t)n + keep;
    size_t cl = strlen(cut);
    memcpy(line + len, cut, cl);
    len += cl;
    line[len++] = '\n';
    FILE *f = log_file ? log_file : stderr;
    fwrite(line, 1, len, f);
    fflush(f);
    if (line != stack) free(line);
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

/* st_log_allow's slots: the time of the last line and the lines skipped
 * since, per hash of the key (atomics: any thread). */
#define ALLOW_SLOTS 64
static int64_t allow_last[ALLOW_SLOTS];
static int allow_skipped[ALLOW_SLOTS];

int st_log_allow(const char *key, int64_t interval_ms, int *suppressed) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = key; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
    int i = (int)(h % ALLOW_SLOTS);
    int64_t now = st_mono_ms();
    int64_t prev = __atomic_load_n(&allow_last[i], __ATOMIC_RELAXED);
    if ((prev == 0 || now - prev >= interval_ms) &&
        __atomic_compare_exchange_n(&allow_last[i], &prev, now, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
        *suppressed = __atomic_exchange_n(&allow_skipped[i], 0, __ATOMIC_RELAXED);
        return 1;
    }
    __atomic_add_fetch(&allow_skipped[i], 1, __ATOMIC_RELAXED);
    return 0;
}

/*
 * st_base.h - the leaf library every other part of Strata builds on.
 *
 * Owns: the error table, logging, configuration descriptor tables, byte
 * buffers and the sticky-error reader, CRC32C, arenas, thread pools, clocks
 * and small file helpers.  Depends on nothing of ours; it knows nothing of
 * Kafka except the wire error codes, which are the error type's first range.
 *
 * Threads: every function here is thread-safe unless its comment says which
 * thread owns the object.
 */
#ifndef ST_BASE_H
#define ST_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>

/* ------------------------------------------------------------------------
 * Errors
 *
 * One table.  Kafka's wire error codes keep their numbers; internal codes
 * live at 1000 and above and say which wire code they become.
 * Columns: name, value, retriable, wire code, message.
 * ---------------------------------------------------------------------- */
#define ST_ERR_MAP(X)                                                                  \
    X(NONE, 0, 0, 0, "no error")                                                       \
    X(UNKNOWN_SERVER_ERROR, -1, 0, -1, "unexpected server error")                     \
    X(OFFSET_OUT_OF_RANGE, 1, 0, 1, "offset out of range")                             \
    X(CORRUPT_MESSAGE, 2, 1, 2, "corrupt message (CRC or format)")                     \
    X(UNKNOWN_TOPIC_OR_PARTITION, 3, 1, 3, "unknown topic or partition")               \
    X(INVALID_FETCH_SIZE, 4, 0, 4, "invalid fetch size")                               \
    X(LEADER_NOT_AVAILABLE, 5, 1, 5, "leader not available")                           \
    X(NOT_LEADER_OR_FOLLOWER, 6, 1, 6, "not leader or follower")                       \
    X(REQUEST_TIMED_OUT, 7, 1, 7, "request timed out")                                 \
    X(BROKER_NOT_AVAILABLE, 8, 0, 8, "broker not available")                           \
    X(REPLICA_NOT_AVAILABLE, 9, 1, 9, "replica not available")                         \
    X(MESSAGE_TOO_LARGE, 10, 0, 10, "message larger than max.message.bytes")           \
    X(STALE_CONTROLLER_EPOCH, 11, 0, 11, "stale controller epoch")                     \
    X(OFFSET_METADATA_TOO_LARGE, 12, 0, 12, "offset metadata too large")               \
    X(NETWORK_EXCEPTION, 13, 1, 13, "network error")                                   \
    X(COORDINATOR_LOAD_IN_PROGRESS, 14, 1, 14, "coordinator load in progress")         \
    X(COORDINATOR_NOT_AVAILABLE, 15, 1, 15, "coordinator not available")               \
    X(NOT_COORDINATOR, 16, 1, 16, "not coordinator")                                   \
    X(INVALID_TOPIC_EXCEPTION, 17, 0, 17, "invalid topic name")                        \
    X(RECORD_LIST_TOO_LARGE, 18, 0, 18, "record list larger than the segment size")   \
    X(NOT_ENOUGH_REPLICAS, 19, 1, 19, "fewer in-sync replicas than min.insync.replicas") \
    X(NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20, 1, 20, "not enough replicas after append") \
    X(INVALID_REQUIRED_ACKS, 21, 0, 21, "acks must be -1, 0 or 1")                     \
    X(ILLEGAL_GENERATION, 22, 0, 22, "illegal generation")                             \
    X(INCONSISTENT_GROUP_PROTOCOL, 23, 0, 23, "inconsistent group protocol")           \
    X(INVALID_GROUP_ID, 24, 0, 24, "invalid group id")                                 \
    X(UNKNOWN_MEMBER_ID, 25, 0, 25, "unknown member id")                               \
    X(INVALID_SESSION_TIMEOUT, 26, 0, 26, "invalid session timeout")                   \
    X(REBALANCE_IN_PROGRESS, 27, 0, 27, "rebalance in progress")                       \
    X(INVALID_COMMIT_OFFSET_SIZE, 28, 0, 28, "invalid commit offset size")             \
    X(TOPIC_AUTHORIZATION_FAILED, 29, 0, 29, "topic authorization failed")             \
    X(GROUP_AUTHORIZATION_FAILED, 30, 0, 30, "group authorization failed")             \
    X(CLUSTER_AUTHORIZATION_FAILED, 31, 0, 31, "cluster authorization failed")         \
    X(INVALID_TIMESTAMP, 32, 0, 32, "timestamp out of the accepted range")             \
    X(UNSUPPORTED_SASL_MECHANISM, 33, 0, 33, "unsupported SASL mechanism")             \
    X(ILLEGAL_SASL_STATE, 34, 0, 34, "illegal SASL state")                             \
    X(UNSUPPORTED_VERSION, 35, 0, 35, "unsupported API version")                       \
    X(TOPIC_ALREADY_EXISTS, 36, 0, 36, "topic already exists")                         \
    X(INVALID_PARTITIONS, 37, 0, 37, "invalid number of partitions")                   \
    X(INVALID_REPLICATION_FACTOR, 38, 0, 38, "invalid replication factor")             \
    X(INVALID_REPLICA_ASSIGNMENT, 39, 0, 39, "invalid replica assignment")             \
    X(INVALID_CONFIG, 40, 0, 40, "invalid configuration")                              \
    X(NOT_CONTROLLER, 41, 1, 41, "not the controller")                                 \
    X(INVALID_REQUEST, 42, 0, 42, "invalid request")                                   \
    X(UNSUPPORTED_FOR_MESSAGE_FORMAT, 43, 0, 43, "unsupported for message format")     \
    X(POLICY_VIOLATION, 44, 0, 44, "policy violation")                                 \
    X(OUT_OF_ORDER_SEQUENCE_NUMBER, 45, 0, 45, "out of order sequence number")         \
    X(DUPLICATE_SEQUENCE_NUMBER, 46, 0, 46, "duplicate sequence number")               \
    X(INVALID_PRODUCER_EPOCH, 47, 0, 47, "invalid producer epoch")                     \
    X(INVALID_TXN_STATE, 48, 0, 48, "invalid transaction state")                       \
    X(INVALID_PRODUCER_ID_MAPPING, 49, 0, 49,                                          \
      "the producer id is not assigned to its transactional id")                       \
    X(INVALID_TRANSACTION_TIMEOUT, 50, 0, 50,                                          \
      "the transaction timeout is larger than transaction.max.timeout.ms")             \
    X(CONCURRENT_TRANSACTIONS, 51, 1, 51,                                              \
      "the producer's previous transaction is still being completed")                  \
    X(TRANSACTION_COORDINATOR_FENCED, 52, 0, 52, "transaction coordinator fenced")     \
    X(TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53, 0, 53, "transactional id authorization failed") \
    X(SECURITY_DISABLED, 54, 0, 54, "security features are disabled (no authorizer)")    \
    X(OPERATION_NOT_ATTEMPTED, 55, 0, 55, "operation not attempted")                   \
    X(KAFKA_STORAGE_ERROR, 56, 1, 56, "storage error: log directory offline")          \
    X(SASL_AUTHENTICATION_FAILED, 58, 0, 58, "SASL authentication failed")             \
    X(LOG_DIR_NOT_FOUND, 57, 0, 57, "log directory not found")                         \
    X(UNKNOWN_PRODUCER_ID, 59, 0, 59, "unknown producer id")                           \
    X(NON_EMPTY_GROUP, 68, 0, 68, "group is not empty")                                \
    X(GROUP_ID_NOT_FOUND, 69, 0, 69, "group id not found")                             \
    X(FETCH_SESSION_ID_NOT_FOUND, 70, 1, 70, "fetch session id not found")             \
    X(INVALID_FETCH_SESSION_EPOCH, 71, 1, 71, "invalid fetch session epoch")           \
    X(TOPIC_DELETION_DISABLED, 73, 0, 73, "topic deletion disabled")                   \
    X(FENCED_LEADER_EPOCH, 74, 1, 74, "fenced leader epoch")                           \
    X(UNKNOWN_LEADER_EPOCH, 75, 1, 75, "unknown leader epoch")                         \
    X(UNSUPPORTED_COMPRESSION_TYPE, 76, 0, 76, "unsupported compression type")         \
    X(OFFSET_NOT_AVAILABLE, 78, 1, 78, "offset not available")                         \
    X(STALE_BROKER_EPOCH, 77, 0, 77, "stale broker epoch")                             \
    X(MEMBER_ID_REQUIRED, 79, 0, 79, "member id required")                             \
    X(PREFERRED_LEADER_NOT_AVAILABLE, 80, 1, 80, "preferred leader not available")     \
    X(GROUP_MAX_SIZE_REACHED, 81, 0, 81, "group max size reached")                     \
    X(FENCED_INSTANCE_ID, 82, 0, 82, "fenced instance id")                             \
    X(GROUP_SUBSCRIBED_TO_TOPIC, 86, 0, 86, "the group is subscribed to the topic")   \
    X(ELIGIBLE_LEADERS_NOT_AVAILABLE, 83, 1, 83, "eligible leaders not available")     \
    X(ELECTION_NOT_NEEDED, 84, 0, 84, "election not needed")                           \
    X(NO_REASSIGNMENT_IN_PROGRESS, 85, 0, 85, "no partition reassignment is in progress") \
    X(INVALID_RECORD, 87, 0, 87, "invalid record")                                     \
    X(UNSTABLE_OFFSET_COMMIT, 88, 1, 88, "there are unstable offsets for the partition") \
    X(THROTTLING_QUOTA_EXCEEDED, 89, 1, 89, "throttling quota exceeded")               \
    X(PRODUCER_FENCED, 90, 0, 90, "a newer producer with the same transactional id fenced this one") \
    X(RESOURCE_NOT_FOUND, 91, 0, 91, "resource not found")                             \
    X(DUPLICATE_RESOURCE, 92, 0, 92, "duplicate resource")                             \
    X(UNACCEPTABLE_CREDENTIAL, 93, 0, 93, "unacceptable credential")                   \
    X(INCONSISTENT_VOTER_SET, 94, 0, 94, "inconsistent voter set")                     \
    X(INVALID_UPDATE_VERSION, 95, 0, 95, "invalid update version")                     \
    X(SNAPSHOT_NOT_FOUND, 98, 0, 98, "snapshot not found")                             \
    X(POSITION_OUT_OF_RANGE, 99, 0, 99, "position out of range")                       \
    X(UNKNOWN_TOPIC_ID, 100, 1, 100, "unknown topic id")                               \
    X(DUPLICATE_BROKER_REGISTRATION, 101, 0, 101, "duplicate broker registration")     \
    X(BROKER_ID_NOT_REGISTERED, 102, 0, 102, "broker id not registered")               \
    X(INCONSISTENT_TOPIC_ID, 103, 1, 103, "inconsistent topic id")                     \
    X(INCONSISTENT_CLUSTER_ID, 104, 0, 104, "inconsistent cluster id")                 \
    X(TRANSACTIONAL_ID_NOT_FOUND, 105, 0, 105, "transactional id not found")           \
    X(INELIGIBLE_REPLICA, 107, 0, 107, "ineligible replica")                           \
    X(OFFSET_MOVED_TO_TIERED_STORAGE, 109, 0, 109, "offset moved to tiered storage")   \
    /* internal codes: never on the wire as such */                                    \
    X(NOMEM, 1000, 0, -1, "out of memory")                                             \
    X(IO, 1001, 0, 56, "I/O error")                                                    \
    X(AGAIN, 1002, 1, -1, "would block")                                               \
    X(CORRUPT, 1003, 0, 2, "corrupt data")                                             \
    X(NOT_FOUND, 1004, 0, -1, "not found")                                             \
    X(EXISTS, 1005, 0, -1, "already exists")                                           \
    X(INVAL, 1006, 0, 42, "invalid argument")                                          \
    X(CONFIG, 1007, 0, 40, "configuration error")                                      \
    X(TIMEOUT, 1008, 1, 7, "timed out")                                                \
    X(CLOSED, 1009, 0, -1, "closed")                                                   \
    X(NOSPACE, 1010, 0, 56, "no space left on device")                                 \
    X(LOCKED, 1011, 0, -1, "locked by another process")                                \
    X(RETRYABLE, 1012, 1, -1, "temporary failure, retry")                              \
    X(PERMANENT, 1013, 0, -1, "permanent failure")                                     \
    X(TRUNCATED, 1014, 0, 42, "input truncated")                                       \
    X(CANCELLED, 1015, 0, -1, "cancelled")                                             \
    X(NOFILE, 1016, 1, 56, "too many open files")                                      \
    X(PERM, 1017, 0, 56, "permission denied")                                          \
    X(READ_ONLY_FS, 1018, 0, 56, "read-only file system")                              \
    /* outbound connections (st_netclient): a disconnection, retriable */             \
    X(CONNECTION_LOST, 1019, 1, 13, "connection lost")                                 \
    X(CONNECTION_REFUSED, 1020, 1, 13, "connection refused")                           \
    /* an object store's conditional write found the object changed */                \
    X(PRECONDITION_FAILED, 1021, 0, -1, "precondition failed")

typedef enum st_err {
#define ST_ERR_ENUM(name, val, retriable, wire, msg) ST_E_##name = (val),
    ST_ERR_MAP(ST_ERR_ENUM)
#undef ST_ERR_ENUM
} st_err_t;

#define ST_OK ST_E_NONE

const char *st_err_name(st_err_t e);     /* "OFFSET_OUT_OF_RANGE" */
const char *st_err_msg(st_err_t e);      /* human sentence */
int st_err_retriable(st_err_t e);
int16_t st_err_wire(st_err_t e);         /* the Kafka error code sent */
st_err_t st_err_from_wire(int16_t code); /* a Kafka code received (unknown: UNKNOWN_SERVER_ERROR) */
st_err_t st_err_from_errno(int errnum);  /* ENOSPC -> NOSPACE, ... */

/* ------------------------------------------------------------------------
 * Logging
 * ---------------------------------------------------------------------- */
typedef enum st_log_level {
    ST_LOG_ERROR = 0,
    ST_LOG_WARN = 1,
    ST_LOG_INFO = 2,
    ST_LOG_DEBUG = 3,
    ST_LOG_TRACE = 4
} st_log_level_t;

extern volatile int st_log_level_g;

/* Subsystems whose debug output is on (comma list, "all" for every one). */
void st_log_set_debug(const char *subsystems);
int st_log_debug_enabled(const char *subsys);
void st_log_set_level(st_log_level_t level);
int st_log_parse_level(const char *s, st_log_level_t *out);
void st_log_set_file(FILE *f);
void st_log_write(st_log_level_t level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The level is checked before any argument is evaluated. */
#define ST_LOG(level, subsys, ...)                                                      \
    do {                                                                               \
        if ((level) <= st_log_level_g ||                                               \
            ((level) == ST_LOG_DEBUG && st_log_debug_enabled(subsys)))                 \
            st_log_write((level), (subsys), __VA_ARGS__);                              \
    } while (0)
#define ST_ERROR(subsys, ...) ST_LOG(ST_LOG_ERROR, subsys, __VA_ARGS__)
#define ST_WARN(subsys, ...) ST_LOG(ST_LOG_WARN, subsys, __VA_ARGS__)
#define ST_INFO(subsys, ...) ST_LOG(ST_LOG_INFO, subsys, __VA_ARGS__)
#define ST_DEBUG(subsys, ...) ST_LOG(ST_LOG_DEBUG, subsys, __VA_ARGS__)

/* For lines whose reasons differ (authentication failures): 1 when a line
 * for `key` may be written now, at most one per key per interval_ms (keys
 * share 64 slots by hash), and *suppressed gets how many were skipped
 * since the last one of that slot.  Any thread. */
int st_log_allow(const char *key, int64_t interval_ms, int *suppressed);

/* At most one line per interval_ms per call site; the skipped count is shown. */
#define ST_LOG_RATELIMITED(level, subsys, interval_ms, fmt, ...)                        \
    do {                                                                               \
        /* Call sites run on several threads: the state is atomic, and the    \
         * thread that wins the compare-and-swap writes the line.  The first   \
         * line takes no count: calls racing it are said on the next one. */  \
        static int64_t st__rl_last_;                                                   \
        static int st__rl_skipped_;                                                    \
        int64_t st__rl_now_ = st_mono_ms();                                            \
        int64_t st__rl_prev_ = __atomic_load_n(&st__rl_last_, __ATOMIC_RELAXED);       \
        if ((st__rl_prev_ == 0 || st__rl_now_ - st__rl_prev_ >= (interval_ms)) &&      \
            __atomic_compare_exchange_n(&st__rl_last_, &st__rl_prev_, st__rl_now_, 0,  \
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {         \
            int st__rl_n_ = st__rl_prev_ == 0 ? 0                                      \
                            : __atomic_exchange_n(&st__rl_skipped_, 0, __ATOMIC_RELAXED); \
            if (st__rl_n_)                                                             \
                ST_LOG(level, subsys, fmt " (%d similar lines suppressed)",            \
                       ##__VA_ARGS__, st__rl_n_);                                      \
            else                                                                       \
                ST_LOG(level, subsys, fmt, ##__VA_ARGS__);                             \
        } else {                                                                       \
            __atomic_add_fetch(&st__rl_skipped_, 1, __ATOMIC_RELAXED);                 \
        }                                                                              \
    } while (0)

/* Name shown in log lines for the calling thread (at most 15 chars). */
void st_thread_set_name(const char *name);
const char *st_thread_name(void);

/* The calling thread's I/O priority (Linux ioprio_set): best effort at
 * level 0 (first) to 7 (last), or idle (only when the disk has nothing
 * else to do).  0 or an errno.  Whether it counts is the block device's
 * scheduler's business: BFQ and mq-deadline honour it, "none" does not. */
typedef enum { ST_IO_BEST_EFFORT = 2, ST_IO_IDLE = 3 } st_io_class_t;
int st_thread_io_priority(st_io_class_t cls, int level);

/* Reports a corrupt input with the file and line that found it. */
#define ST_CORRUPT_BKPT st__corrupt_bkpt(__FILE__, __LINE__)
st_err_t st__corrupt_bkpt(const char *file, int line);

/* ------------------------------------------------------------------------
 * Clocks
 * ---------------------------------------------------------------------- */
int64_t st_now_ms(void);  /* wall clock, ms since the epoch */
int64_t st_mono_ms(void); /* monotonic */
int64_t st_mono_us(void);

/* ------------------------------------------------------------------------
 * Memory
 * ---------------------------------------------------------------------- */
void *st_malloc(size_t n);           /* aborts on failure: only for small, */
void *st_calloc(size_t n, size_t m); /* bounded allocations               */
void *st_realloc(void *p, size_t n);
char *st_strdup(const char *s);
char *st_strndup(const char *s, size_t n);
/* A formatted string on the heap, sized to fit (aborts on failure, as
 * st_malloc): for messages that carry keys, paths and causes, which a
 * fixed buffer would cut. */
char *st_strprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *st_vstrprintf(const char *fmt, va_list ap);
/* snprintf into a caller's buffer (an API's err/errlen) that says so when
 * the message does not fit: it then ends with "...[cut]", never silently
 * short.  Returns the length the whole message needs. */
int st_snprintf_marked(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Arena: many allocations freed at once (a request's lifetime).
 * Owned by one thread at a time. */
typedef struct st_arena_block st_arena_block_t;
typedef struct st_arena {
    st_arena_block_t *head;
    size_t block_size;
} st_arena_t;

void st_arena_init(st_arena_t *a, size_t block_size);
void *st_arena_alloc(st_arena_t *a, size_t n); /* zeroed, 8-aligned */
char *st_arena_strndup(st_arena_t *a, const char *s, size_t n);
/* A copy of n ints (room for one when n is 0). */
int32_t *st_arena_dup_i32(st_arena_t *a, const int32_t *v, int n);
void st_arena_fini(st_arena_t *a);

/* ------------------------------------------------------------------------
 * Growable byte buffer and big-endian helpers
 * ---------------------------------------------------------------------- */
typedef struct st_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} st_buf_t;

void st_buf_init(st_buf_t *b);
void st_buf_fini(st_buf_t *b);
void st_buf_reserve(st_buf_t *b, size_t extra);
uint8_t *st_buf_extend(st_buf_t *b, size_t n); /* returns where to write n bytes */
void st_buf_put(st_buf_t *b, const void *p, size_t n);
void st_buf_put_i8(st_buf_t *b, int8_t v);
void st_buf_put_i16(st_buf_t *b, int16_t v);
void st_buf_put_i32(st_buf_t *b, int32_t v);
void st_buf_put_i64(st_buf_t *b, int64_t v);
void st_buf_put_uvarint(st_buf_t *b, uint64_t v);
void st_buf_put_varint(st_buf_t *b, int64_t v); /* zigzag */
void st_buf_printf(st_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void st_be16_put(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void st_be32_put(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void st_be64_put(uint8_t *p, uint64_t v) {
    st_be32_put(p, (uint32_t)(v >> 32));
    st_be32_put(p + 4, (uint32_t)v);
}
static inline uint16_t st_be16_get(const uint8_t *p) {
    return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t st_be32_get(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t st_be64_get(const uint8_t *p) {
    return ((uint64_t)st_be32_get(p) << 32) | st_be32_get(p + 4);
}

size_t st_uvarint_size(uint64_t v);
size_t st_varint_size(int64_t v);

/* Reader over hostile bytes.  Every read checks what remains; the first
 * failure sets a sticky error and later reads return zero, so a decoder
 * checks once at the end. */
typedef struct st_rd {
    const uint8_t *p;
    size_t len;
    size_t pos;
    st_err_t err;
} st_rd_t;

static inline void st_rd_init(st_rd_t *r, const void *p, size_t len) {
    r->p = (const uint8_t *)p;
    r->len = len;
    r->pos = 0;
    r->err = ST_OK;
}
static inline size_t st_rd_left(const st_rd_t *r) {
    return r->err ? 0 : r->len - r->pos;
}
const uint8_t *st_rd_bytes(st_rd_t *r, size_t n); /* NULL on short input */
int8_t st_rd_i8(st_rd_t *r);
int16_t st_rd_i16(st_rd_t *r);
int32_t st_rd_i32(st_rd_t *r);
int64_t st_rd_i64(st_rd_t *r);
uint64_t st_rd_uvarint(st_rd_t *r);
int64_t st_rd_varint(st_rd_t *r);
void st_rd_fail(st_rd_t *r, st_err_t e);

/* ------------------------------------------------------------------------
 * CRC32C (Castagnoli), with the SSE4.2 instruction where the CPU has it.
 * ---------------------------------------------------------------------- */
uint32_t st_crc32c(uint32_t crc, const void *data, size_t len);
int st_crc32c_hw(void); /* 1 when the hardware path is in use */

/* ------------------------------------------------------------------------
 * Configuration descriptor tables
 *
 * One row per setting: Kafka's property name, type, where it lands in the
 * owning struct, default, bounds, validator, whether it may change at run
 * time, and one line of documentation.  The table drives parsing, command
 * line overrides, validation and the generated reference.
 * ---------------------------------------------------------------------- */
typedef enum st_cfg_type {
    ST_CFG_INT,    /* int32_t */
    ST_CFG_LONG,   /* int64_t */
    ST_CFG_BOOL,   /* int */
    ST_CFG_STRING, /* char * (owned by the struct; st_cfg_fini frees) */
    ST_CFG_DOUBLE  /* double */
} st_cfg_type_t;

typedef struct st_cfg_desc {
    const char *name;
    st_cfg_type_t type;
    size_t offset;
    const char *def; /* NULL for a string with no default */
    int64_t min, max;
    /* Extra check for values that bounds cannot express; returns 0 when fine
     * and writes a reason otherwise. */
    int (*validate)(const char *value, char *why, size_t whylen);
    int dynamic;
    const char *doc;
} st_cfg_desc_t;

typedef struct st_cfg_table {
    const st_cfg_desc_t *rows;
    size_t count;
} st_cfg_table_t;

const st_cfg_desc_t *st_cfg_lookup(const st_cfg_table_t *t, const char *name);
/* Set every field to its default. */
st_err_t st_cfg_defaults(const st_cfg_table_t *t, void *obj, char *err, size_t errlen);
/* Parse and store one value; on failure obj is unchanged and err names the key. */
st_err_t st_cfg_set(const st_cfg_table_t *t, void *obj, const char *key, const char *value,
                    char *err, size_t errlen);
st_err_t st_cfg_check_value(const st_cfg_desc_t *d, const char *value, char *err,
                            size_t errlen);
/* Several tables can share one properties file (the broker's settings and
 * the object store's, say): a binding pairs a table with the struct it fills.
 * Keys that are families rather than rows (Kafka's
 * listener.name.<listener>.ssl.keystore.location) go to a binding's `other`
 * when no table knows them: it stores the value and returns ST_OK, returns
 * ST_E_NOT_FOUND for a key it does not take, or an error naming the key.
 * A key nobody takes stops loading with a message naming it. */
typedef struct st_cfg_bind {
    const st_cfg_table_t *table; /* may be NULL with other set */
    void *obj;
    st_err_t (*other)(void *obj, const char *key, const char *value, char *err, size_t errlen);
} st_cfg_bind_t;

st_err_t st_cfg_bind_set(const st_cfg_bind_t *b, size_t nb, const char *key, const char *value,
                         char *err, size_t errlen);
/* Whether a setting's value must never be shown (logs, DescribeConfigs,
 * the tools' output): names with "password", "secret", "session.token" or
 * ending in "jaas.config" (JAAS options carry passwords). */
int st_cfg_is_secret(const char *name);

/* The whole load: the file's lines, then the "key=value" overrides, each
 * value first resolved through Kafka's config providers (KIP-297, KIP-421,
 * KIP-887) that config.providers names:
 *
 *   config.providers=file,env,dir
 *   config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
 *   config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
 *   config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider
 *   objectstore.s3.secret.key=${file:/etc/strata/s3.properties:secret.key}
 *   ssl.keystore.password=${env:KEYSTORE_PASSWORD}
 *   ssl.key.password=${dir:/run/secrets:key-password}
 *
 * so that a secret need not be written into the properties file.  An
 * unknown provider, a missing file, key or variable stops loading naming
 * the setting (never the value).  path may be NULL. */
st_err_t st_cfg_load(const st_cfg_bind_t *b, size_t nb, const char *path, char *const *overrides,
                     int noverrides, char *err, size_t errlen);

/* Read a key=value properties file ('#' and '!' comments, blank lines). */
st_err_t st_cfg_load_file(const st_cfg_bind_t *b, size_t nb, const char *path, char *err,
                          size_t errlen);
/* "key=value" from the command line. */
st_err_t st_cfg_override(const st_cfg_bind_t *b, size_t nb, const char *kv, char *err,
                         size_t errlen);
/* The current value as text. */
void st_cfg_format(const st_cfg_desc_t *d, const void *obj, char *out, size_t outlen);
void st_cfg_fini(const st_cfg_table_t *t, void *obj);
void st_cfg_copy(const st_cfg_table_t *t, void *dst, const void *src);
/* Markdown table of the settings: name, type, default, range, dynamic, doc. */
void st_cfg_doc_markdown(const st_cfg_table_t *t, FILE *out);
const char *st_cfg_type_name(st_cfg_type_t type);

/* ------------------------------------------------------------------------
 * Thread pool: fixed threads, FIFO jobs.
 * ---------------------------------------------------------------------- */
typedef void (*st_job_cb)(void *arg);
typedef struct st_pool st_pool_t;

st_pool_t *st_pool_new(int nthreads, const char *name);
void st_pool_submit(st_pool_t *p, st_job_cb fn, void *arg);
/* Runs every queued job, then joins the threads. */
void st_pool_destroy(st_pool_t *p);

/* pthread_cond_timedwait for at most ms milliseconds (mutex held). */
void st_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t ms);

/* ------------------------------------------------------------------------
 * Files
 * ---------------------------------------------------------------------- */
st_err_t st_fsync_dir(const char *dir);
st_err_t st_mkdirs(const char *path);
st_err_t st_rmtree(const char *path);
/* Write to path.tmp, fsync, rename over path, fsync the directory. */
st_err_t st_write_file_atomic(const char *path, const void *data, size_t len);
/* Whole file into a malloc'ed NUL-terminated buffer. */
st_err_t st_read_file(const char *path, char **out, size_t *outlen);
/* pwrite / pread of exactly n bytes, retrying on EINTR and short transfers. */
st_err_t st_pwrite_all(int fd, const void *p, size_t n, int64_t off);
st_err_t st_pread_all(int fd, void *p, size_t n, int64_t off, size_t *got);

/* ------------------------------------------------------------------------
 * Names (addr.c)
 * ---------------------------------------------------------------------- */
struct addrinfo;
/* "localhost", "x.localhost", with or without the final dot, any case. */
int st_is_localhost_name(const char *host);
/* getaddrinfo, except that a localhost name the resolver cannot resolve is
 * the loopback address (RFC 6761); returns getaddrinfo's code. */
int st_getaddrinfo(const char *host, const char *port, const struct addrinfo *hints,
                   struct addrinfo **res);

/* ------------------------------------------------------------------------
 * Identifiers: 16 random bytes, shown as Kafka shows them (URL-safe base64
 * without padding, 22 characters).
 * ---------------------------------------------------------------------- */
typedef struct st_uuid {
    uint8_t b[16];
} st_uuid_t;

void st_uuid_random(st_uuid_t *u);
int st_uuid_is_zero(const st_uuid_t *u);
void st_uuid_format(const st_uuid_t *u, char out[23]);
int st_uuid_parse(const char *s, st_uuid_t *u); /* 0 on success */
void st_random_bytes(void *p, size_t n);


/* ------------------------------------------------------------------------
 * Shared file descriptors and output chains
 *
 * A st_file_t is a refcounted descriptor: a segment keeps one, and every
 * queued response that sends a range of it keeps one, so deleting the
 * segment never pulls a file from under a send in flight.
 *
 * A st_chain_t is a response being built: owned bytes and file ranges in
 * order (nginx's buffer chains).  Bytes are written straight into `mem`
 * with the st_buf_put_* helpers; st_chain_add_file closes the pending bytes
 * into a chunk before it adds the file range.
 * ---------------------------------------------------------------------- */
typedef struct st_file {
    int fd;
    int refs; /* atomic */
} st_file_t;

st_file_t *st_file_new(int fd); /* takes ownership of fd; one reference */
st_file_t *st_file_keep(st_file_t *f);
void st_file_release(st_file_t *f); /* closes the fd with the last reference */

typedef struct st_chunk {
    st_file_t *file; /* NULL: bytes of the chain's mem buffer */
    int64_t off;     /* into mem, or into the file */
    int64_t len;
} st_chunk_t;

typedef struct st_chain {
    st_buf_t mem;
    st_chunk_t *chunks;
    size_t nchunks, cap;
    size_t mem_mark; /* mem bytes before this are already in chunks */
} st_chain_t;

void st_chain_init(st_chain_t *c);
void st_chain_fini(st_chain_t *c);
void st_chain_add_file(st_chain_t *c, st_file_t *f, int64_t off, int64_t len);
/* Close pending bytes into a chunk; returns the total length. */
int64_t st_chain_seal(st_chain_t *c);

/* ------------------------------------------------------------------------
 * Latency histograms (histo.c): fixed buckets, updated with relaxed atomics
 * from any thread; the metrics endpoint reads them.
 * ---------------------------------------------------------------------- */
#define ST_HISTO_BUCKETS 15 /* the last one is +Inf */
extern const int64_t st_histo_bound_us[ST_HISTO_BUCKETS - 1]; /* upper bounds, inclusive */
typedef struct st_histo {
    uint64_t bucket[ST_HISTO_BUCKETS]; /* atomic; not cumulative */
    uint64_t sum_us;                   /* atomic */
} st_histo_t;
void st_histo_observe(st_histo_t *h, int64_t us);
/* A copy of h, field by field (each field exact, the whole not a snapshot). */
void st_histo_read(const st_histo_t *h, st_histo_t *out);
/* Observations in a copy (the sum of its buckets). */
uint64_t st_histo_count(const st_histo_t *h);

#define ST_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ST_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ST_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif /* ST_BASE_H */

/*
 * test_base.c - unit tests of base/ (st_base.h): CRC32C, varints and the
 * sticky-error reader, big-endian helpers, configuration tables, arenas,
 * UUIDs, durable file helpers, output chains, the error table and the
 * thread pool.
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The portable path of base/crc32c.c, built by crc32c_table.c. */
uint32_t st_crc32c_table(uint32_t crc, const void *data, size_t len);
int st_crc32c_table_hw(void);

/* ======================================================================
 * CRC32C
 * ==================================================================== */

/* One bit at a time, straight from the definition (reflected 0x82F63B78,
 * initial and final inversion). */
static uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *p, size_t len) {
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
    }
    return ~crc;
}

static void test_crc32c_vectors(void **state) {
    (void)state;
    uint8_t buf[48];

    /* RFC 3720 (iSCSI), appendix B.4 */
    memset(buf, 0, 32);
    assert_int_equal(st_crc32c(0, buf, 32), 0x8A9136AAu);
    assert_int_equal(st_crc32c_table(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, 32);
    assert_int_equal(st_crc32c(0, buf, 32), 0x62A8AB43u);
    assert_int_equal(st_crc32c_table(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
    assert_int_equal(st_crc32c(0, buf, 32), 0x46DD794Eu);
    assert_int_equal(st_crc32c_table(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
    assert_int_equal(st_crc32c(0, buf, 32), 0x113FDB5Cu);
    assert_int_equal(st_crc32c_table(0, buf, 32), 0x113FDB5Cu);

    /* The usual check value. */
    assert_int_equal(st_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(st_crc32c_table(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(crc32c_bitwise(0, (const uint8_t *)"123456789", 9), 0xE3069283u);

    /* Nothing in, nothing changes. */
    assert_int_equal(st_crc32c(0, buf, 0), 0);
    assert_int_equal(st_crc32c(0x12345678u, buf, 0), 0x12345678u);

    /* The portable copy must really be the portable path. */
    assert_int_equal(st_crc32c_table_hw(), 0);
    if (!st_crc32c_hw())
        print_message("note: this CPU has no SSE4.2; only the table path ran\n");
}

/* Every length 0..300 at every alignment 0..15, through the library's
 * chosen path, the portable path and the bitwise reference. */
static void test_crc32c_paths_agree(void **state) {
    (void)state;
    enum { MAXLEN = 300, SLACK = 16 };
    uint8_t *mem = st_malloc(MAXLEN + SLACK);
    unit_fill(mem, MAXLEN + SLACK);
    for (size_t align = 0; align < SLACK; align++) {
        for (size_t len = 0; len <= MAXLEN; len++) {
            const uint8_t *p = mem + align;
            uint32_t want = crc32c_bitwise(0, p, len);
            assert_int_equal(st_crc32c(0, p, len), want);
            assert_int_equal(st_crc32c_table(0, p, len), want);
        }
    }
    free(mem);

    /* Larger random buffers, and a CRC continued over pieces equals the
     * CRC of the whole. */
    for (int round = 0; round < 40; round++) {
        size_t len = 1 + unit_below(70000);
        uint8_t *p = st_malloc(len);
        unit_fill(p, len);
        uint32_t want = crc32c_bitwise(0, p, len);
        assert_int_equal(st_crc32c(0, p, len), want);
        assert_int_equal(st_crc32c_table(0, p, len), want);
        size_t cut = unit_below((uint32_t)len + 1);
        assert_int_equal(st_crc32c(st_crc32c(0, p, cut), p + cut, len - cut), want);
        assert_int_equal(st_crc32c_table(st_crc32c_table(0, p, cut), p + cut, len - cut), want);
        free(p);
    }
}

/* ======================================================================
 * Varints, zigzag, the writer and the sticky-error reader
 * ==================================================================== */

static void test_varint_known_bytes(void **state) {
    (void)state;
    static const struct {
        int64_t v;
        uint8_t bytes[10];
        size_t n;
    } zz[] = {
        {0, {0x00}, 1},
        {-1, {0x01}, 1},
        {1, {0x02}, 1},
        {-2, {0x03}, 1},
        {63, {0x7e}, 1},
        {-64, {0x7f}, 1},
        {64, {0x80, 0x01}, 2},
        {150, {0xac, 0x02}, 2},
        {INT32_MAX, {0xfe, 0xff, 0xff, 0xff, 0x0f}, 5},
        {INT32_MIN, {0xff, 0xff, 0xff, 0xff, 0x0f}, 5},
        {INT64_MIN, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10},
    };
    for (size_t i = 0; i < ST_ARRAY_SIZE(zz); i++) {
        st_buf_t b;
        st_buf_init(&b);
        st_buf_put_varint(&b, zz[i].v);
        assert_int_equal(b.len, zz[i].n);
        assert_memory_equal(b.data, zz[i].bytes, zz[i].n);
        assert_int_equal(st_varint_size(zz[i].v), zz[i].n);
        st_rd_t r;
        st_rd_init(&r, b.data, b.len);
        assert_true(st_rd_varint(&r) == zz[i].v);
        assert_int_equal(r.err, ST_OK);
        assert_int_equal(st_rd_left(&r), 0);
        st_buf_fini(&b);
    }
    /* unsigned: 300 = 0xac 0x02 */
    st_buf_t b;
    st_buf_init(&b);
    st_buf_put_uvarint(&b, 300);
    assert_int_equal(b.len, 2);
    assert_int_equal(b.data[0], 0xac);
    assert_int_equal(b.data[1], 0x02);
    st_buf_fini(&b);
}

static void test_varint_roundtrip(void **state) {
    (void)state;
    static const int64_t edges[] = {0,         1,         -1,        63,         64,
                                    -64,       -65,       127,       128,        8191,
                                    8192,      -8192,     -8193,     INT32_MAX,  INT32_MIN,
                                    INT64_MAX, INT64_MIN, 1ll << 35, -(1ll << 35)};
    st_buf_t b;
    st_buf_init(&b);
    enum { N = 4000 };
    int64_t *vals = st_malloc(N * sizeof *vals);
    for (int i = 0; i < N; i++) {
        if (i < (int)ST_ARRAY_SIZE(edges)) {
            vals[i] = edges[i];
        } else {
            /* random magnitudes of every width */
            int shift = (int)unit_below(64);
            vals[i] = (int64_t)(unit_rand() >> shift);
            if (unit_rand() & 1) vals[i] = -vals[i];
        }
        size_t before = b.len;
        st_buf_put_varint(&b, vals[i]);
        assert_int_equal(b.len - before, st_varint_size(vals[i]));
        before = b.len;
        st_buf_put_uvarint(&b, (uint64_t)vals[i]);
        assert_int_equal(b.len - before, st_uvarint_size((uint64_t)vals[i]));
    }
    st_rd_t r;
    st_rd_init(&r, b.data, b.len);
    for (int i = 0; i < N; i++) {
        assert_true(st_rd_varint(&r) == vals[i]);
        assert_true(st_rd_uvarint(&r) == (uint64_t)vals[i]);
    }
    assert_int_equal(r.err, ST_OK);
    assert_int_equal(st_rd_left(&r), 0);
    free(vals);
    st_buf_fini(&b);
}

static void test_rd_sticky_errors(void **state) {
    (void)state;
    uint8_t bytes[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    st_rd_t r;

    /* Fixed-width reads: big-endian, and a short read sets TRUNCATED. */
    st_rd_init(&r, bytes, sizeof bytes);
    assert_true(st_rd_i64(&r) == 0x0102030405060708ll);
    assert_int_equal(st_rd_left(&r), 2);
    assert_int_equal(st_rd_i32(&r), 0); /* only 2 bytes remain */
    assert_int_equal(r.err, ST_E_TRUNCATED);
    /* Sticky: later reads fail although bytes remain. */
    assert_int_equal(st_rd_left(&r), 0);
    assert_int_equal(st_rd_i8(&r), 0);
    assert_int_equal(st_rd_i16(&r), 0);
    assert_null(st_rd_bytes(&r, 1));
    assert_null(st_rd_bytes(&r, 0));
    assert_int_equal(st_rd_uvarint(&r), 0);
    assert_int_equal(r.err, ST_E_TRUNCATED);
    /* The first error is the one kept. */
    st_rd_fail(&r, ST_E_CORRUPT);
    assert_int_equal(r.err, ST_E_TRUNCATED);

    /* Every width fails cleanly at every short length. */
    for (size_t len = 0; len < 8; len++) {
        st_rd_init(&r, bytes, len);
        if (len < 8) assert_int_equal(st_rd_i64(&r), 0);
        assert_int_equal(r.err, ST_E_TRUNCATED);
        st_rd_init(&r, bytes, len);
        st_rd_i32(&r);
        assert_int_equal(r.err, len < 4 ? ST_E_TRUNCATED : ST_OK);
        st_rd_init(&r, bytes, len);
        st_rd_i16(&r);
        assert_int_equal(r.err, len < 2 ? ST_E_TRUNCATED : ST_OK);
    }

    /* A varint cut in its middle. */
    uint8_t torn[] = {0x80, 0x80, 0x80};
    for (size_t len = 0; len <= sizeof torn; len++) {
        st_rd_init(&r, torn, len);
        assert_int_equal(st_rd_varint(&r), 0);
        assert_int_equal(r.err, ST_E_TRUNCATED);
    }
    /* Longer than any 64-bit value: corrupt, not an endless read. */
    uint8_t overlong[12];
    memset(overlong, 0x80, sizeof overlong);
    st_rd_init(&r, overlong, sizeof overlong);
    assert_int_equal(st_rd_uvarint(&r), 0);
    assert_int_equal(r.err, ST_E_CORRUPT);

    /* st_rd_bytes hands out views in order and refuses to run past the end. */
    st_rd_init(&r, bytes, sizeof bytes);
    const uint8_t *p = st_rd_bytes(&r, 3);
    assert_ptr_equal(p, bytes);
    p = st_rd_bytes(&r, 7);
    assert_ptr_equal(p, bytes + 3);
    assert_int_equal(st_rd_left(&r), 0);
    assert_null(st_rd_bytes(&r, 1));
    assert_int_equal(r.err, ST_E_TRUNCATED);
    /* A huge length cannot wrap the position around. */
    st_rd_init(&r, bytes, sizeof bytes);
    st_rd_i8(&r);
    assert_null(st_rd_bytes(&r, SIZE_MAX));
    assert_int_equal(r.err, ST_E_TRUNCATED);
}

static void test_buf_and_big_endian(void **state) {
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    st_buf_put_i8(&b, -2);
    st_buf_put_i16(&b, 0x1234);
    st_buf_put_i32(&b, (int32_t)0xdeadbeef);
    st_buf_put_i64(&b, 0x0102030405060708ll);
    st_buf_printf(&b, "%s-%d", "x", 42);
    static const uint8_t want[] = {0xfe, 0x12, 0x34, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4,
                                   5,    6,    7,    8,    'x',  '-',  '4',  '2'};
    assert_int_equal(b.len, sizeof want);
    assert_memory_equal(b.data, want, sizeof want);
    assert_int_equal(st_be16_get(b.data + 1), 0x1234);
    assert_int_equal(st_be32_get(b.data + 3), 0xdeadbeefu);
    assert_true(st_be64_get(b.data + 7) == 0x0102030405060708ull);
    /* Growth keeps what was written. */
    for (int i = 0; i < 10000; i++) st_buf_put_i8(&b, (int8_t)i);
    assert_int_equal(b.len, sizeof want + 10000);
    assert_memory_equal(b.data, want, sizeof want);
    assert_int_equal(b.data[sizeof want + 9999], (uint8_t)9999);
    assert_true(b.cap >= b.len);
    st_buf_fini(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
}

/* ======================================================================
 * Configuration tables
 * ==================================================================== */

typedef struct tcfg {
    int32_t port;
    int64_t segment_bytes;
    int flush_on_ack;
    char *listener;
    double ratio;
    char *rack;
} tcfg_t;

static int no_spaces(const char *value, char *why, size_t whylen) {
    if (strchr(value, ' ')) {
        snprintf(why, whylen, "must not contain spaces");
        return 1;
    }
    return 0;
}

static const st_cfg_desc_t tcfg_rows[] = {
    {"port", ST_CFG_INT, offsetof(tcfg_t, port), "9092", 1, 65535, NULL, 0, "TCP port"},
    {"log.segment.bytes", ST_CFG_LONG, offsetof(tcfg_t, segment_bytes), "1073741824", 14,
     INT64_MAX, NULL, 1, "segment size"},
    {"log.flush.on.ack", ST_CFG_BOOL, offsetof(tcfg_t, flush_on_ack), "true", 0, 0, NULL, 0,
     "fsync before acks=all"},
    {"listener.name", ST_CFG_STRING, offsetof(tcfg_t, listener), "PLAINTEXT", 0, 0, no_spaces, 0,
     "listener"},
    {"ratio", ST_CFG_DOUBLE, offsetof(tcfg_t, ratio), "0.5", 0, 1, NULL, 1, "a ratio"},
    {"broker.rack", ST_CFG_STRING, offsetof(tcfg_t, rack), NULL, 0, 0, NULL, 0, "rack"},
};
static const st_cfg_table_t tcfg_table = {tcfg_rows, ST_ARRAY_SIZE(tcfg_rows)};

/* A second table sharing one properties file. */
typedef struct ocfg {
    char *endpoint;
    int32_t parts;
} ocfg_t;
static const st_cfg_desc_t ocfg_rows[] = {
    {"s3.endpoint", ST_CFG_STRING, offsetof(ocfg_t, endpoint), "", 0, 0, NULL, 0, "endpoint"},
    {"s3.multipart.parts", ST_CFG_INT, offsetof(ocfg_t, parts), "4", 1, 10000, NULL, 0, "parts"},
};
static const st_cfg_table_t ocfg_table = {ocfg_rows, ST_ARRAY_SIZE(ocfg_rows)};

static void tcfg_init(tcfg_t *c) {
    memset(c, 0, sizeof *c);
    char err[256] = "";
    assert_int_equal(st_cfg_defaults(&tcfg_table, c, err, sizeof err), ST_OK);
}

static void test_cfg_defaults_and_types(void **state) {
    (void)state;
    tcfg_t c;
    char err[256] = "", out[64];
    tcfg_init(&c);
    assert_int_equal(c.port, 9092);
    assert_true(c.segment_bytes == 1073741824ll);
    assert_int_equal(c.flush_on_ack, 1);
    assert_string_equal(c.listener, "PLAINTEXT");
    assert_true(c.ratio == 0.5);
    assert_null(c.rack);

    assert_int_equal(st_cfg_set(&tcfg_table, &c, "port", "19092", err, sizeof err), ST_OK);
    assert_int_equal(c.port, 19092);
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "log.segment.bytes", "9000000000", err, sizeof err),
                     ST_OK);
    assert_true(c.segment_bytes == 9000000000ll);
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "log.flush.on.ack", "FALSE", err, sizeof err), ST_OK);
    assert_int_equal(c.flush_on_ack, 0);
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "log.flush.on.ack", "True", err, sizeof err), ST_OK);
    assert_int_equal(c.flush_on_ack, 1);
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "listener.name", "INTERNAL", err, sizeof err), ST_OK);
    assert_string_equal(c.listener, "INTERNAL");
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "ratio", "0.25", err, sizeof err), ST_OK);
    assert_true(c.ratio == 0.25);
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "broker.rack", "eu-1a", err, sizeof err), ST_OK);
    assert_string_equal(c.rack, "eu-1a");

    /* The current value as text. */
    st_cfg_format(st_cfg_lookup(&tcfg_table, "port"), &c, out, sizeof out);
    assert_string_equal(out, "19092");
    st_cfg_format(st_cfg_lookup(&tcfg_table, "log.segment.bytes"), &c, out, sizeof out);
    assert_string_equal(out, "9000000000");
    st_cfg_format(st_cfg_lookup(&tcfg_table, "log.flush.on.ack"), &c, out, sizeof out);
    assert_string_equal(out, "true");
    st_cfg_format(st_cfg_lookup(&tcfg_table, "broker.rack"), &c, out, sizeof out);
    assert_string_equal(out, "eu-1a");
    assert_null(st_cfg_lookup(&tcfg_table, "no.such.key"));

    /* A copy owns its own strings. */
    tcfg_t d;
    memset(&d, 0, sizeof d);
    st_cfg_copy(&tcfg_table, &d, &c);
    assert_int_equal(d.port, 19092);
    assert_string_equal(d.listener, "INTERNAL");
    assert_ptr_not_equal(d.listener, c.listener);
    st_cfg_fini(&tcfg_table, &d);
    assert_null(d.listener);

    /* Defaults again reset every field, the string without default too. */
    assert_int_equal(st_cfg_defaults(&tcfg_table, &c, err, sizeof err), ST_OK);
    assert_int_equal(c.port, 9092);
    assert_null(c.rack);
    assert_string_equal(c.listener, "PLAINTEXT");
    st_cfg_fini(&tcfg_table, &c);
    assert_null(c.listener);
}

/* Every refusal names the key, and leaves the struct as it was. */
static void test_cfg_rejects(void **state) {
    (void)state;
    static const struct {
        const char *key, *value;
    } bad[] = {
        {"port", "0"},                        /* below min */
        {"port", "65536"},                    /* above max */
        {"port", "80x"},                      /* trailing junk */
        {"port", ""},                         /* empty */
        {"port", "3000000000"},               /* not an int32 */
        {"port", "99999999999999999999999"},  /* overflows even int64 */
        {"port", "1.5"},                      /* not whole */
        {"log.segment.bytes", "13"},          /* below min */
        {"log.segment.bytes", "1e9"},         /* not whole */
        {"log.flush.on.ack", "yes"},          /* booleans are true/false */
        {"log.flush.on.ack", "1"},
        {"ratio", "1.5"},                     /* above max */
        {"ratio", "abc"},
        {"ratio", ""},
        {"listener.name", "has space"},       /* validator */
    };
    tcfg_t c;
    tcfg_init(&c);
    for (size_t i = 0; i < ST_ARRAY_SIZE(bad); i++) {
        char err[256] = "";
        st_err_t e = st_cfg_set(&tcfg_table, &c, bad[i].key, bad[i].value, err, sizeof err);
        assert_int_equal(e, ST_E_CONFIG);
        if (!strstr(err, bad[i].key)) fail_msg("error for %s=%s does not name the key: %s",
                                               bad[i].key, bad[i].value, err);
    }
    assert_int_equal(c.port, 9092);
    assert_true(c.segment_bytes == 1073741824ll);
    assert_int_equal(c.flush_on_ack, 1);
    assert_true(c.ratio == 0.5);
    assert_string_equal(c.listener, "PLAINTEXT");

    char err[256] = "";
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "log.retention.hourz", "1", err, sizeof err),
                     ST_E_CONFIG);
    assert_non_null(strstr(err, "log.retention.hourz"));
    assert_non_null(strstr(err, "unknown"));
    /* The validator's reason is passed on. */
    st_cfg_set(&tcfg_table, &c, "listener.name", "a b", err, sizeof err);
    assert_non_null(strstr(err, "must not contain spaces"));
    /* Bounds are inclusive. */
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "port", "1", err, sizeof err), ST_OK);
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "port", "65535", err, sizeof err), ST_OK);
    assert_int_equal(st_cfg_set(&tcfg_table, &c, "log.segment.bytes", "14", err, sizeof err), ST_OK);
    st_cfg_fini(&tcfg_table, &c);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_cfg_file_and_overrides(void **state) {
    (void)state;
    char *dir = unit_tmpdir();
    char path[4096], err[1024];
    unit_path(path, sizeof path, dir, "server.properties");
    write_text(path,
               "# a comment\n"
               "! also a comment\n"
               "\n"
               "   port =  29092  \n"
               "log.flush.on.ack=false\n"
               "\t# indented comment\n"
               "s3.endpoint=http://127.0.0.1:9000/bucket?a=b\n"
               "broker.rack=\n"
               "s3.multipart.parts=16\n");
    tcfg_t c;
    ocfg_t o;
    tcfg_init(&c);
    memset(&o, 0, sizeof o);
    assert_int_equal(st_cfg_defaults(&ocfg_table, &o, err, sizeof err), ST_OK);
    st_cfg_bind_t binds[] = {{&tcfg_table, &c, NULL}, {&ocfg_table, &o, NULL}};
    assert_int_equal(st_cfg_load_file(binds, 2, path, err, sizeof err), ST_OK);
    assert_int_equal(c.port, 29092);
    assert_int_equal(c.flush_on_ack, 0);
    /* Only the first '=' splits: the value keeps the rest. */
    assert_string_equal(o.endpoint, "http://127.0.0.1:9000/bucket?a=b");
    assert_int_equal(o.parts, 16);
    assert_non_null(c.rack);
    assert_string_equal(c.rack, "");

    /* Overrides go to whichever table knows the key. */
    assert_int_equal(st_cfg_override(binds, 2, "port=39092", err, sizeof err), ST_OK);
    assert_int_equal(c.port, 39092);
    assert_int_equal(st_cfg_override(binds, 2, " s3.multipart.parts = 7 ", err, sizeof err), ST_OK);
    assert_int_equal(o.parts, 7);
    assert_int_equal(st_cfg_bind_set(binds, 2, "s3.endpoint", "x", err, sizeof err), ST_OK);
    assert_string_equal(o.endpoint, "x");

    /* Override errors name the key. */
    assert_int_equal(st_cfg_override(binds, 2, "nope.key=1", err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "nope.key"));
    assert_int_equal(st_cfg_override(binds, 2, "port", err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "key=value"));
    assert_int_equal(st_cfg_override(binds, 2, "=5", err, sizeof err), ST_E_CONFIG);
    assert_int_equal(st_cfg_override(binds, 2, "s3.multipart.parts=0", err, sizeof err),
                     ST_E_CONFIG);
    assert_non_null(strstr(err, "s3.multipart.parts"));
    assert_int_equal(o.parts, 7);

    /* An unknown key in a file: the message names the key and the line. */
    write_text(path, "port=1000\n\n# fine so far\nlog.retention.hourz=5\nport=2000\n");
    assert_int_equal(st_cfg_load_file(binds, 2, path, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "log.retention.hourz"));
    assert_non_null(strstr(err, ":4"));
    assert_int_equal(c.port, 1000); /* lines before the bad one were applied */

    /* A malformed line. */
    write_text(path, "port=1001\nthis line has no equals sign\n");
    assert_int_equal(st_cfg_load_file(binds, 2, path, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, ":2"));
    assert_non_null(strstr(err, "key=value"));

    /* A bad value in a file. */
    write_text(path, "log.flush.on.ack=maybe\n");
    assert_int_equal(st_cfg_load_file(binds, 2, path, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "log.flush.on.ack"));

    /* A file that is not there. */
    unit_path(path, sizeof path, dir, "missing.properties");
    assert_int_equal(st_cfg_load_file(binds, 2, path, err, sizeof err), ST_E_CONFIG);
    assert_non_null(strstr(err, "missing.properties"));

    st_cfg_fini(&tcfg_table, &c);
    st_cfg_fini(&ocfg_table, &o);
    unit_tmpdir_remove(dir);
}

/* st_cfg_load: Kafka's config providers resolve secrets from a file, the
 * environment and a directory; an unresolvable one names the setting. */
static void test_cfg_config_providers(void **state) {
    (void)state;
    char *dir = unit_tmpdir();
    char path[4096], secrets[4096], sdir[4096], key[4200];
    unit_path(secrets, sizeof secrets, dir, "secrets.properties");
    write_text(secrets, "# the secrets, kept apart\ns3.secret = from-file-value\nother=1\n");
    unit_path(sdir, sizeof sdir, dir, "d");
    mkdir(sdir, 0700);
    snprintf(key, sizeof key, "%s/rack", sdir);
    write_text(key, "from-dir-value\n");
    setenv("STRATA_UNIT_ENV_SECRET", "7", 1);
    unit_path(path, sizeof path, dir, "server.properties");
    char text[12000];
    snprintf(text, sizeof text,
             "s3.endpoint=${file:%s:s3.secret}\n"
             "config.providers=file, env,dir\n"
             "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n"
             "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
             "config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider\n"
             "broker.rack=r-${dir:%s:rack}-${nope:x}\n",
             secrets, sdir);
    write_text(path, text);
    tcfg_t c;
    ocfg_t o;
    tcfg_init(&c);
    memset(&o, 0, sizeof o);
    char err[512];
    assert_int_equal(st_cfg_defaults(&ocfg_table, &o, err, sizeof err), ST_OK);
    st_cfg_bind_t binds[] = {{&tcfg_table, &c, NULL}, {&ocfg_table, &o, NULL}};
    char *ov[] = {"s3.multipart.parts=${env:STRATA_UNIT_ENV_SECRET}"};
    assert_int_equal(st_cfg_load(binds, 2, path, ov, 1, err, sizeof err), ST_OK);
    /* providers declared after their first use still apply: the load is whole */
    assert_string_equal(o.endpoint, "from-file-value");
    assert_int_equal(o.parts, 7);
    /* a ${...} that names no provider stays as written */
    assert_string_equal(c.rack, "r-from-dir-value-${nope:x}");
    /* unresolvable: the setting is named, the value never */
    const char *bad[] = {"s3.endpoint=${file:%s:missing}", "s3.endpoint=${env:STRATA_UNIT_NOT_SET}",
                         "s3.endpoint=${dir:%s:nofile}", "s3.endpoint=${file:nokey}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char line[6000], one[4300];
        snprintf(one, sizeof one, bad[i], i == 2 ? sdir : secrets);
        snprintf(line, sizeof line,
                 "config.providers=file,env,dir\n"
                 "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n"
                 "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
                 "config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider\n"
                 "%s\n", one);
        write_text(path, line);
        assert_int_equal(st_cfg_load(binds, 2, path, NULL, 0, err, sizeof err), ST_E_CONFIG);
        assert_non_null(strstr(err, "s3.endpoint"));
        assert_null(strstr(err, "from-file-value"));
    }
    assert_true(st_cfg_is_secret("objectstore.s3.secret.key"));
    assert_true(st_cfg_is_secret("ssl.key.password"));
    assert_false(st_cfg_is_secret("objectstore.s3.access.key"));
    st_cfg_fini(&tcfg_table, &c);
    st_cfg_fini(&ocfg_table, &o);
    unit_tmpdir_remove(dir);
}

static void test_cfg_doc_markdown(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    st_cfg_doc_markdown(&tcfg_table, f);
    fclose(f);
    assert_non_null(strstr(buf, "| `port` | int | `9092` | [1, 65535] | no | TCP port |"));
    assert_non_null(strstr(buf, "| `log.segment.bytes` | long | `1073741824` | >= 14 | yes |"));
    assert_non_null(strstr(buf, "| `broker.rack` | string | (none) |"));
    assert_string_equal(st_cfg_type_name(ST_CFG_BOOL), "boolean");
    free(buf);
}

/* ======================================================================
 * Arenas
 * ==================================================================== */

static void test_arena(void **state) {
    (void)state;
    st_arena_t a;
    st_arena_init(&a, 256);
    uint8_t *prev[2000];
    size_t sizes[2000];
    for (int i = 0; i < 2000; i++) {
        sizes[i] = unit_below(i % 100 == 0 ? 5000 : 40); /* some bigger than a block */
        prev[i] = st_arena_alloc(&a, sizes[i]);
        assert_non_null(prev[i]);
        assert_int_equal((uintptr_t)prev[i] % 8, 0);
        for (size_t k = 0; k < sizes[i]; k++) assert_int_equal(prev[i][k], 0);
        memset(prev[i], (int)(i & 0xff), sizes[i]);
    }
    /* Nothing overlapped: every allocation still holds its own pattern. */
    for (int i = 0; i < 2000; i++)
        for (size_t k = 0; k < sizes[i]; k++) assert_int_equal(prev[i][k], (uint8_t)(i & 0xff));
    char *s = st_arena_strndup(&a, "hello, world", 5);
    assert_string_equal(s, "hello");
    st_arena_fini(&a);
    assert_null(a.head);
    /* A default block size, and fini of an unused arena. */
    st_arena_init(&a, 0);
    assert_int_equal(a.block_size, 4096);
    st_arena_fini(&a);
}

/* ======================================================================
 * UUIDs
 * ==================================================================== */

static void test_uuid(void **state) {
    (void)state;
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    st_uuid_t u, v;
    char text[23];

    memset(&u, 0, sizeof u);
    assert_true(st_uuid_is_zero(&u));
    st_uuid_format(&u, text);
    assert_string_equal(text, "AAAAAAAAAAAAAAAAAAAAAA");
    memset(&u, 0xff, sizeof u);
    st_uuid_format(&u, text);
    assert_string_equal(text, "_____________________w");
    /* 00 01 02 ... 0f, checked by hand against RFC 4648 base64url */
    for (int i = 0; i < 16; i++) u.b[i] = (uint8_t)i;
    st_uuid_format(&u, text);
    assert_string_equal(text, "AAECAwQFBgcICQoLDA0ODw");
    assert_int_equal(st_uuid_parse("AAECAwQFBgcICQoLDA0ODw", &v), 0);
    assert_memory_equal(u.b, v.b, 16);

    for (int i = 0; i < 2000; i++) {
        st_uuid_random(&u);
        assert_false(st_uuid_is_zero(&u));
        assert_int_equal(u.b[6] >> 4, 4);      /* version 4 */
        assert_int_equal(u.b[8] >> 6, 2);      /* RFC 4122 variant */
        st_uuid_format(&u, text);
        assert_int_equal(strlen(text), 22);
        assert_true(text[0] != '-');           /* Kafka never starts an id with '-' */
        for (int k = 0; k < 22; k++) assert_non_null(strchr(alphabet, text[k]));
        memset(&v, 0, sizeof v);
        assert_int_equal(st_uuid_parse(text, &v), 0);
        assert_memory_equal(u.b, v.b, 16);
    }

    /* Refusals. */
    assert_int_equal(st_uuid_parse("", &v), -1);
    assert_int_equal(st_uuid_parse("AAECAwQFBgcICQoLDA0OD", &v), -1);   /* 21 chars */
    assert_int_equal(st_uuid_parse("AAECAwQFBgcICQoLDA0ODwA", &v), -1); /* 23 chars */
    assert_int_equal(st_uuid_parse("AAECAwQFBgcICQoLDA0OD+", &v), -1);  /* '+' is not url-safe */
    assert_int_equal(st_uuid_parse("AAECAwQFBgcICQoLDA0OD/", &v), -1);
    assert_int_equal(st_uuid_parse("AAECAwQFBgcICQoLDA0OD=", &v), -1);

    st_random_bytes(text, 0); /* a no-op, not a hang */
}

/* ======================================================================
 * Files
 * ==================================================================== */

static void test_write_file_atomic(void **state) {
    (void)state;
    char *dir = unit_tmpdir();
    char path[4096], tmp[4200], *got = NULL;
    size_t len = 0;
    unit_path(path, sizeof path, dir, "state.json");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);

    assert_int_equal(st_write_file_atomic(path, "first version, long", 19), ST_OK);
    assert_int_equal(st_read_file(path, &got, &len), ST_OK);
    assert_int_equal(len, 19);
    assert_string_equal(got, "first version, long");
    free(got);
    assert_int_equal(access(tmp, F_OK), -1); /* no temporary left behind */

    /* Replacing with shorter content leaves no tail of the old one. */
    assert_int_equal(st_write_file_atomic(path, "v2", 2), ST_OK);
    assert_int_equal(st_read_file(path, &got, &len), ST_OK);
    assert_int_equal(len, 2);
    assert_string_equal(got, "v2");
    free(got);

    /* Empty content, and binary content with NULs. */
    assert_int_equal(st_write_file_atomic(path, "", 0), ST_OK);
    assert_int_equal(st_read_file(path, &got, &len), ST_OK);
    assert_int_equal(len, 0);
    free(got);
    uint8_t bin[5000];
    unit_fill(bin, sizeof bin);
    bin[10] = 0;
    assert_int_equal(st_write_file_atomic(path, bin, sizeof bin), ST_OK);
    assert_int_equal(st_read_file(path, &got, &len), ST_OK);
    assert_int_equal(len, sizeof bin);
    assert_memory_equal(got, bin, sizeof bin);
    free(got);

    /* A stale temporary from an earlier crash is simply replaced. */
    write_text(tmp, "stale garbage");
    assert_int_equal(st_write_file_atomic(path, "v3", 2), ST_OK);
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(st_read_file(path, &got, &len), ST_OK);
    assert_string_equal(got, "v3");
    free(got);

    /* A directory that does not exist: an error, nothing created. */
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/no/such/dir/file", dir);
    assert_int_equal(st_write_file_atomic(bad, "x", 1), ST_E_NOT_FOUND);
    assert_int_equal(st_read_file(bad, &got, &len), ST_E_NOT_FOUND);

    /* A bare name lands in the working directory. */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(st_write_file_atomic("bare-name", "here", 4), ST_OK);
    assert_int_equal(chdir(cwd), 0);
    unit_path(path, sizeof path, dir, "bare-name");
    assert_int_equal(st_read_file(path, &got, &len), ST_OK);
    assert_string_equal(got, "here");
    free(got);

    unit_tmpdir_remove(dir);
}

static void test_mkdirs_rmtree_pread(void **state) {
    (void)state;
    char *dir = unit_tmpdir();
    char deep[4096], file[4200];
    snprintf(deep, sizeof deep, "%s/a/b/c/d", dir);
    assert_int_equal(st_mkdirs(deep), ST_OK);
    assert_int_equal(st_mkdirs(deep), ST_OK); /* exists already: fine */
    struct stat st;
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st_fsync_dir(deep), ST_OK);

    snprintf(file, sizeof file, "%s/data", deep);
    int fd = open(file, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    uint8_t out[70000], in[70000];
    unit_fill(out, sizeof out);
    assert_int_equal(st_pwrite_all(fd, out, sizeof out, 100), ST_OK);
    size_t got = 0;
    assert_int_equal(st_pread_all(fd, in, sizeof in, 100, &got), ST_OK);
    assert_int_equal(got, sizeof out);
    assert_memory_equal(in, out, sizeof out);
    /* Reading past the end reports how much there was. */
    assert_int_equal(st_pread_all(fd, in, 1000, 100 + sizeof out - 10, &got), ST_OK);
    assert_int_equal(got, 10);
    close(fd);

    /* A file where a directory is wanted. */
    char under[4300];
    snprintf(under, sizeof under, "%s/x", file);
    assert_true(st_mkdirs(under) != ST_OK);

    char top[4096];
    snprintf(top, sizeof top, "%s/a", dir);
    assert_int_equal(st_rmtree(top), ST_OK);
    assert_int_equal(access(top, F_OK), -1);
    assert_int_equal(st_rmtree(top), ST_OK); /* already gone: fine */
    unit_tmpdir_remove(dir);
}

/* ======================================================================
 * Shared files and output chains
 * ==================================================================== */

static void test_chain(void **state) {
    (void)state;
    char *dir = unit_tmpdir();
    char path[4096];
    unit_path(path, sizeof path, dir, "f");
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    st_file_t *f = st_file_new(fd);

    st_chain_t c;
    st_chain_init(&c);
    st_buf_put_i32(&c.mem, 7);
    st_buf_put_i16(&c.mem, 1);
    st_chain_add_file(&c, f, 1000, 500);
    st_chain_add_file(&c, f, 0, 0); /* empty ranges are dropped */
    st_buf_put_i8(&c.mem, 9);
    st_buf_put_i8(&c.mem, 9);
    assert_int_equal(st_chain_seal(&c), 6 + 500 + 2);
    assert_int_equal(c.nchunks, 3);
    assert_null(c.chunks[0].file);
    assert_int_equal(c.chunks[0].off, 0);
    assert_int_equal(c.chunks[0].len, 6);
    assert_ptr_equal(c.chunks[1].file, f);
    assert_int_equal(c.chunks[1].off, 1000);
    assert_int_equal(c.chunks[1].len, 500);
    assert_int_equal(c.chunks[2].off, 6);
    assert_int_equal(c.chunks[2].len, 2);
    assert_int_equal(f->refs, 2); /* the chain keeps its own reference */
    /* Sealing again, after more bytes, extends the last memory chunk. */
    st_buf_put_i8(&c.mem, 1);
    assert_int_equal(st_chain_seal(&c), 6 + 500 + 3);
    assert_int_equal(c.nchunks, 3);
    assert_int_equal(c.chunks[2].len, 3);
    st_chain_fini(&c);
    assert_int_equal(f->refs, 1);
    st_file_release(f);
    st_file_release(NULL);
    unit_tmpdir_remove(dir);
}

/* ======================================================================
 * Errors, logging levels, thread pool
 * ==================================================================== */

static void test_errors(void **state) {
    (void)state;
    assert_string_equal(st_err_name(ST_E_OFFSET_OUT_OF_RANGE), "OFFSET_OUT_OF_RANGE");
    assert_int_equal(st_err_wire(ST_E_MESSAGE_TOO_LARGE), 10);
    assert_int_equal(st_err_wire(ST_E_UNSUPPORTED_VERSION), 35);
    assert_int_equal(st_err_wire(ST_E_CORRUPT), 2);   /* internal -> CORRUPT_MESSAGE */
    assert_int_equal(st_err_wire(ST_E_IO), 56);       /* -> KAFKA_STORAGE_ERROR */
    assert_int_equal(st_err_wire(ST_E_NOMEM), -1);
    assert_true(st_err_retriable(ST_E_NOT_LEADER_OR_FOLLOWER));
    assert_false(st_err_retriable(ST_E_INVALID_REQUEST));
    assert_string_equal(st_err_name((st_err_t)4242), "UNKNOWN_ERROR");
    assert_int_equal(st_err_wire((st_err_t)4242), -1);
    assert_non_null(strstr(st_err_msg(ST_E_LOCKED), "locked"));
    assert_int_equal(st_err_from_errno(0), ST_OK);
    assert_int_equal(st_err_from_errno(ENOSPC), ST_E_NOSPACE);
    assert_int_equal(st_err_from_errno(ENOENT), ST_E_NOT_FOUND);
    assert_int_equal(st_err_from_errno(EIO), ST_E_IO);
    /* said as what they are, and still a storage error on the wire */
    assert_int_equal(st_err_from_errno(EMFILE), ST_E_NOFILE);
    assert_int_equal(st_err_from_errno(ENFILE), ST_E_NOFILE);
    assert_non_null(strstr(st_err_msg(ST_E_NOFILE), "too many open files"));
    assert_int_equal(st_err_wire(ST_E_NOFILE), 56);
    assert_int_equal(st_err_from_errno(EROFS), ST_E_READ_ONLY_FS);
    assert_int_equal(st_err_from_errno(EACCES), ST_E_PERM);
    /* Kafka's codes keep their numbers. */
    assert_int_equal(ST_E_CORRUPT_MESSAGE, 2);
    assert_int_equal(ST_E_INVALID_TIMESTAMP, 32);
    assert_int_equal(ST_E_OFFSET_MOVED_TO_TIERED_STORAGE, 109);

    st_log_level_t lv;
    assert_int_equal(st_log_parse_level("debug", &lv), 0);
    assert_int_equal(lv, ST_LOG_DEBUG);
    assert_true(st_log_parse_level("chatty", &lv) != 0);
}

static void count_job(void *arg) { __atomic_add_fetch((int *)arg, 1, __ATOMIC_RELAXED); }

/* Log lines keep their cause: a message with a long key is written whole
 * (it was cut at about 2 KB, and callers' buffers cut sooner); one past
 * 64 KiB is cut with a marker that says so.  Heap-formatted and marked
 * strings never cut silently. */
static void test_log_long_lines(void **state) {
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    st_log_set_file(f);
    char *key = st_malloc(5001);
    for (int i = 0; i < 5000; i++) key[i] = (char)('a' + i % 26);
    key[5000] = 0;
    st_log_write(ST_LOG_WARN, "test", "download of %s failed: get %s: no such key", key, key);
    char *huge = st_malloc(100001);
    memset(huge, 'x', 100000);
    huge[100000] = 0;
    st_log_write(ST_LOG_WARN, "test", "%s: the end", huge);
    st_log_set_file(NULL);
    fflush(f);
    rewind(f);
    char *text = st_malloc(1 << 20);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = 0;
    fclose(f);
    char *nl = strchr(text, '\n');
    assert_non_null(nl);
    *nl = 0;
    const char *first = text, *second = nl + 1;
    assert_non_null(strstr(first, key));
    assert_non_null(strstr(strstr(first, key) + 5000, key));
    size_t fl = strlen(first);
    assert_true(fl > 10000);
    assert_string_equal(first + fl - strlen("no such key"), "no such key");
    nl = strchr(second, '\n');
    assert_non_null(nl);
    *nl = 0;
    assert_true(strlen(second) <= 64 * 1024);
    assert_true(strlen(second) > 60 * 1024);
    const char *cut = strstr(second, "...[line cut: ");
    assert_non_null(cut);
    unsigned long more = strtoul(cut + strlen("...[line cut: "), NULL, 10);
    /* what is there and what is said to be missing add up to the message */
    size_t xs = strspn(strchr(second, 'x'), "x");
    assert_int_equal(xs + more, 100000 + strlen(": the end"));
    free(text);
    free(huge);

    char *s = st_strprintf("upload of %s: %s", key, "HTTP 500");
    assert_int_equal(strlen(s), strlen("upload of : HTTP 500") + 5000);
    free(s);
    char small[32];
    int m = st_snprintf_marked(small, sizeof small, "key %s", key);
    assert_int_equal(m, 5004);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_string_equal(small + sizeof small - 9, "...[cut]");
    assert_int_equal(st_snprintf_marked(small, sizeof small, "fits"), 4);
    assert_string_equal(small, "fits");
    free(key);
}

static void test_pool(void **state) {
    (void)state;
    int n = 0;
    st_pool_t *p = st_pool_new(3, "unit");
    for (int i = 0; i < 1000; i++) st_pool_submit(p, count_job, &n);
    st_pool_destroy(p); /* runs every queued job first */
    assert_int_equal(n, 1000);
}

/* ST_LOG_RATELIMITED: the first line at once and without a count, the
 * lines in between counted (from several threads: the state is atomic) and
 * the count said on the next line written. */
static void *rl_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) ST_LOG_RATELIMITED(ST_LOG_WARN, "test", 3600000, "rl line");
    return NULL;
}

static void rl_once(int64_t interval_ms) {
    ST_LOG_RATELIMITED(ST_LOG_WARN, "test", interval_ms, "rl2 line %d", 7);
}

static void test_log_ratelimited(void **state) {
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    st_log_set_file(f);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, rl_thread, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    rl_once(3600000); /* the first: written */
    rl_once(3600000); /* suppressed */
    rl_once(3600000); /* suppressed */
    rl_once(0);       /* due: says two were suppressed */
    st_log_set_file(NULL);
    fflush(f);
    rewind(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    /* 4000 calls from four threads: one line, without a count */
    const char *a = strstr(text, "rl line");
    assert_non_null(a);
    assert_null(strstr(a + 1, "rl line"));
    assert_true(a[strlen("rl line")] == '\n');
    const char *b = strstr(text, "rl2 line 7\n");
    assert_non_null(b);
    assert_non_null(strstr(b, "rl2 line 7 (2 similar lines suppressed)\n"));
}

/* 1 when every address of res is the loopback address. */
static int all_loopback(const struct addrinfo *res) {
    int n = 0;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next, n++) {
        if (ai->ai_family == AF_INET) {
            const struct sockaddr_in *sin = (const void *)ai->ai_addr;
            if (sin->sin_addr.s_addr != htonl(INADDR_LOOPBACK)) return 0;
        } else if (ai->ai_family == AF_INET6) {
            const struct sockaddr_in6 *sin6 = (const void *)ai->ai_addr;
            if (memcmp(&sin6->sin6_addr, &in6addr_loopback, sizeof in6addr_loopback)) return 0;
        } else {
            return 0;
        }
    }
    return n > 0;
}

/* The localhost rule of RFC 6761: the names, and the resolution with and
 * (where this test may hide /etc/hosts in a mount namespace of its own)
 * without a hosts file that names localhost. */
static void test_localhost_names(void **state) {
    (void)state;
    assert_true(st_is_localhost_name("localhost"));
    assert_true(st_is_localhost_name("LocalHost."));
    assert_true(st_is_localhost_name("broker-1.localhost"));
    assert_false(st_is_localhost_name("localhost.example"));
    assert_false(st_is_localhost_name("notlocalhost"));
    assert_false(st_is_localhost_name(".localhost"));
    assert_false(st_is_localhost_name(NULL));

    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    assert_int_equal(st_getaddrinfo("localhost", "9092", &hints, &res), 0);
    assert_true(all_loopback(res));
    freeaddrinfo(res);
    res = NULL;
    assert_int_not_equal(st_getaddrinfo("no-such-name.invalid", "9092", &hints, &res), 0);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* hide /etc/hosts: needs root and mount namespaces, else skipped */
        if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
            mount("/dev/null", "/etc/hosts", NULL, MS_BIND, NULL))
            _exit(77);
        struct addrinfo h = {0}, *r = NULL;
        h.ai_socktype = SOCK_STREAM;
        h.ai_flags = AI_PASSIVE;
        if (st_getaddrinfo("localhost", "9092", &h, &r) || !all_loopback(r)) _exit(1);
        freeaddrinfo(r);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        fprintf(stderr, "test_localhost_names: no mount namespace here; /etc/hosts kept\n");
    else
        assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
    unit_seed("base");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_crc32c_paths_agree),
        cmocka_unit_test(test_varint_known_bytes),
        cmocka_unit_test(test_varint_roundtrip),
        cmocka_unit_test(test_rd_sticky_errors),
        cmocka_unit_test(test_buf_and_big_endian),
        cmocka_unit_test(test_cfg_defaults_and_types),
        cmocka_unit_test(test_cfg_rejects),
        cmocka_unit_test(test_cfg_file_and_overrides),
        cmocka_unit_test(test_cfg_doc_markdown),
        cmocka_unit_test(test_cfg_config_providers),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_uuid),
        cmocka_unit_test(test_write_file_atomic),
        cmocka_unit_test(test_mkdirs_rmtree_pread),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_log_long_lines),
        cmocka_unit_test(test_log_ratelimited),
        cmocka_unit_test(test_localhost_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

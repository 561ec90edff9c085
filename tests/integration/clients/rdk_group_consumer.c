/*
 * rdk_group_consumer.c - one member of a consumer group for the group
 * tests: librdkafka's high-level consumer, with synchronous commits after
 * processing.
 *
 * usage: rdk_group_consumer BOOTSTRAP GROUP TOPIC [-s SESSION_MS]
 *            [-d DELAY_MS] [-i INSTANCE_ID] [-X key=value ...]
 *
 * Lines on stdout (each written with one write(), so a reader never sees
 * half a line, and flushed at once):
 *
 *   ASSIGN <ms> <p,p,...> <member id>
 *                           partitions assigned (wall clock ms)
 *   REVOKE <ms>             assignment revoked
 *   MSG <partition> <offset> <value>
 *                           processed: printed before its commit
 *   COMMITFAIL <partition> <offset> <error>
 *   CLOSED                  left the group cleanly (after SIGTERM)
 *
 * Each message is "processed" (its MSG line written), waits DELAY_MS (to
 * keep a rebalance in the middle of the work), then its offset + 1 is
 * committed synchronously.  SIGTERM: close the consumer (LeaveGroup) and
 * exit 0.  Produce mode, for the test's data:
 *
 *   rdk_group_consumer BOOTSTRAP - TOPIC -P COUNT PARTITIONS
 *
 * sends values "v<seq>" with seq % PARTITIONS as partition, acks=all.
 */
#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...) {
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    if (n >= (int)sizeof line) n = sizeof line - 1;
    ssize_t w;
    do {
        w = write(1, line, (size_t)n);
    } while (w < 0 && errno == EINTR);
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "rdk_group_consumer: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(2);
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char err[512];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(k, err);
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque) {
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        char list[2048] = "";
        size_t n = 0;
        for (int i = 0; i < parts->cnt && n < sizeof list - 16; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", i ? "," : "",
                                  (int)parts->elems[i].partition);
        rd_kafka_assign(rk, parts);
        char *member = rd_kafka_memberid(rk);
        out("ASSIGN %" PRId64 " %s %s\n", wall_ms(), parts->cnt ? list : "-", member ? member : "-");
        rd_kafka_mem_free(rk, member);
    } else {
        rd_kafka_assign(rk, NULL);
        out("REVOKE %" PRId64 "\n", wall_ms());
    }
}

static int produce(const char *bootstrap, const char *topic, long count, int partitions) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "acks", "all");
    set(conf, "linger.ms", "5");
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    for (long i = 0; i < count; i++) {
        char v[32];
        int n = snprintf(v, sizeof v, "v%ld", i);
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
                                      RD_KAFKA_V_PARTITION((int32_t)(i % partitions)),
                                      RD_KAFKA_V_VALUE(v, (size_t)n), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                      RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 10);
        if (e) die("produce", rd_kafka_err2str(e));
        rd_kafka_poll(rk, 0);
    }
    if (rd_kafka_flush(rk, 60000)) die("flush", "timed out");
    rd_kafka_destroy(rk);
    out("PRODUCED %ld\n", count);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: rdk_group_consumer BOOTSTRAP GROUP TOPIC [-s SESSION_MS] "
                        "[-d DELAY_MS] [-i INSTANCE] [-X k=v ...] | BOOTSTRAP - TOPIC -P COUNT PARTS\n");
        return 2;
    }
    const char *bootstrap = argv[1], *group = argv[2], *topic = argv[3];
    if (argc >= 7 && !strcmp(argv[4], "-P")) return produce(bootstrap, topic, atol(argv[5]), atoi(argv[6]));
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "group.id", group);
    set(conf, "enable.auto.commit", "false");
    set(conf, "auto.offset.reset", "earliest");
    set(conf, "session.timeout.ms", "6000");
    set(conf, "heartbeat.interval.ms", "1000");
    set(conf, "max.poll.interval.ms", "20000");
    int delay_ms = 0;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-s")) set(conf, "session.timeout.ms", argv[i + 1]);
        else if (!strcmp(argv[i], "-d")) delay_ms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-i")) set(conf, "group.instance.id", argv[i + 1]);
        else if (!strcmp(argv[i], "-X")) {
            char *kv = strdup(argv[i + 1]), *eq = strchr(kv, '=');
            if (!eq) die("-X needs key=value", argv[i + 1]);
            *eq = 0;
            set(conf, kv, eq + 1);
            free(kv);
        } else {
            die("unknown option", argv[i]);
        }
    }
    rd_kafka_conf_set_rebalance_cb(conf, on_rebalance);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    if (e) die("subscribe", rd_kafka_err2str(e));
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    while (!stop_requested) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                fprintf(stderr, "consumer error: %s\n", rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            continue;
        }
        out("MSG %d %" PRId64 " %.*s\n", (int)m->partition, m->offset, (int)m->len,
            (const char *)m->payload);
        if (delay_ms) usleep((useconds_t)delay_ms * 1000);
        e = rd_kafka_commit_message(rk, m, 0 /* synchronous */);
        if (e) out("COMMITFAIL %d %" PRId64 " %s\n", (int)m->partition, m->offset, rd_kafka_err2name(e));
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    out("CLOSED\n");
    return 0;
}

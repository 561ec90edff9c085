/*
 * rdk_acked_producer.c - the writer of the crash test: produces numbered
 * messages with acks=all and records every acknowledgement.
 *
 * usage: rdk_acked_producer -b BOOTSTRAP -t TOPIC -o ACKFILE
 *            [-p PARTITIONS] [-n COUNT] [-r RATE] [-s SIZE] [-k PREFIX]
 *            [-w FLUSH_MS] [-F] [-X key=value ...]
 *
 * Message seq (from 0) has key "PREFIX-<seq>", goes to partition
 * seq % PARTITIONS, and its value is key + "." repeated and cut to
 * SIZE + seq % 37 bytes, so a reader can rebuild it from the key.
 *
 * For each successful delivery report one line "partition offset key\n"
 * is appended to ACKFILE with a single write(): only this process has to
 * survive for the line to be there, and a reader never sees half a line
 * followed by more data.  Failed deliveries are counted, not recorded.
 *
 * Runs until COUNT messages were produced (0: forever) or SIGTERM/SIGINT,
 * then waits up to FLUSH_MS for outstanding reports, purges the rest and
 * prints "produced N acked A failed F unacked U" (U: purged without a
 * report from the broker).  RATE caps messages per
 * second (0: none).  The producer is not idempotent and retries, so a
 * message may be written twice; only its acknowledged offset is recorded.
 *
 * -F (with enable.idempotence=true): librdkafka before 2.3 raises a fatal
 * error of its own making when a leader dies with several batches in
 * flight (its issue 4438: "rewound sequence number", "sequence
 * desynchronization": it counted a batch the dead leader never persisted
 * as written).  With -F that fatal error, and only that one, is printed and
 * a new producer (a new producer id) goes on with the next message, as an
 * application would; what the old one still held is counted as abandoned,
 * not failed, and never re-sent, so nothing is written twice.  The summary
 * then ends with "replaced R abandoned B".
 */
#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;
static int ack_fd = -1;
static int64_t acked, failed, purged, abandoned;
static char last_error[256];

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "rdk_acked_producer: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(2);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)opaque;
    if (m->err && rd_kafka_fatal_error(rk, NULL, 0)) {
        abandoned++; /* counted as failed unless -F replaces the producer */
        snprintf(last_error, sizeof last_error, "%s", rd_kafka_err2str(m->err));
        return;
    }
    if (m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) {
        purged++;
        return;
    }
    if (m->err) {
        failed++;
        snprintf(last_error, sizeof last_error, "%s", rd_kafka_err2str(m->err));
        return;
    }
    char line[160];
    int n = snprintf(line, sizeof line, "%" PRId32 " %" PRId64 " %.*s\n", m->partition, m->offset,
                     (int)m->key_len, (const char *)m->key);
    if (n <= 0 || n >= (int)sizeof line) die("key too long", NULL);
    ssize_t w;
    do {
        w = write(ack_fd, line, (size_t)n);
    } while (w < 0 && errno == EINTR);
    if (w != n) die("write to the ack file", strerror(errno));
    acked++;
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char err[512];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(k, err);
}

int main(int argc, char **argv) {
    const char *bootstrap = NULL, *topic = NULL, *ackfile = NULL, *prefix = "m";
    long partitions = 1, rate = 0, size = 100, flush_ms = 20000;
    long long count = 0;
    int replace_fatal = 0;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* the crash test's defaults; -X may override any of them */
    conf_set(conf, "acks", "all");
    conf_set(conf, "enable.idempotence", "false");
    conf_set(conf, "linger.ms", "5");
    conf_set(conf, "message.timeout.ms", "60000");
    conf_set(conf, "retry.backoff.ms", "50");
    conf_set(conf, "reconnect.backoff.ms", "20");
    conf_set(conf, "reconnect.backoff.max.ms", "200");
    conf_set(conf, "client.id", "rdk_acked_producer");
    int opt;
    while ((opt = getopt(argc, argv, "b:t:o:p:n:r:s:k:w:FX:")) != -1) {
        switch (opt) {
        case 'b': bootstrap = optarg; break;
        case 't': topic = optarg; break;
        case 'o': ackfile = optarg; break;
        case 'p': partitions = strtol(optarg, NULL, 10); break;
        case 'n': count = strtoll(optarg, NULL, 10); break;
        case 'r': rate = strtol(optarg, NULL, 10); break;
        case 's': size = strtol(optarg, NULL, 10); break;
        case 'k': prefix = optarg; break;
        case 'w': flush_ms = strtol(optarg, NULL, 10); break;
        case 'F': replace_fatal = 1; break;
        case 'X': {
            char *eq = strchr(optarg, '=');
            if (!eq) die("-X wants key=value", optarg);
            *eq = '\0';
            conf_set(conf, optarg, eq + 1);
            break;
        }
        default: die("usage: -b BOOTSTRAP -t TOPIC -o ACKFILE [-p N] [-n N] [-r N] [-s N] [-k P] "
                     "[-w MS] [-F] [-X k=v]", NULL);
        }
    }
    if (!bootstrap || !topic || !ackfile || partitions < 1 || size < 0 || rate < 0 || count < 0)
        die("usage: -b BOOTSTRAP -t TOPIC -o ACKFILE [-p N] [-n N] [-r N] [-s N] [-k P] [-w MS] "
            "[-F] [-X k=v]", NULL);
    conf_set(conf, "bootstrap.servers", bootstrap);

    ack_fd = open(ackfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (ack_fd < 0) die(ackfile, strerror(errno));

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_dup(conf), err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    int replaced = 0;

    size_t keycap = strlen(prefix) + 32, valcap = (size_t)size + 37;
    char *key = malloc(keycap), *val = malloc(valcap + 1);
    if (!key || !val) die("out of memory", NULL);
    long long seq = 0;
    int64_t start = mono_ms();
    while (!stop_requested && (count == 0 || seq < count)) {
        if (rate > 0 && seq >= (mono_ms() - start) * rate / 1000 + 1) {
            rd_kafka_poll(rk, 2);
            continue;
        }
        int klen = snprintf(key, keycap, "%s-%08lld", prefix, seq);
        size_t vlen = (size_t)size + (size_t)(seq % 37);
        size_t period = (size_t)klen + 1;
        for (size_t j = 0; j < vlen; j++) {
            size_t r = j % period;
            val[j] = r < (size_t)klen ? key[r] : '.';
        }
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION((int32_t)(seq % partitions)),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, (size_t)klen),
            RD_KAFKA_V_VALUE(val, vlen), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(rk, 20);
            continue;
        }
        if (e == RD_KAFKA_RESP_ERR__FATAL && replace_fatal) {
            char why[512];
            rd_kafka_fatal_error(rk, why, sizeof why);
            if (!strstr(why, "rewound sequence number") && !strstr(why, "sequence desynchronization"))
                die("produce: fatal error", why);
            fprintf(stderr, "rdk_acked_producer: librdkafka's fatal error (its issue 4438): %s; a new "
                    "producer goes on from message %lld\n", why, seq);
            rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
            rd_kafka_poll(rk, 0);
            rd_kafka_destroy(rk);
            rk = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_dup(conf), err, sizeof err);
            if (!rk) die("rd_kafka_new", err);
            replaced++;
            continue;
        }
        if (e) die("produce", rd_kafka_err2str(e));
        seq++;
        rd_kafka_poll(rk, 0);
    }

    rd_kafka_flush(rk, (int)flush_ms);
    rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(rk, 0);
    if (!replace_fatal) failed += abandoned;
    char more[96] = "";
    if (replace_fatal) snprintf(more, sizeof more, " replaced %d abandoned %" PRId64, replaced, abandoned);
    printf("produced %lld acked %" PRId64 " failed %" PRId64 " unacked %" PRId64 "%s%s%s\n", seq,
           acked, failed, purged, more, failed ? " last error: " : "", failed ? last_error : "");
    fflush(stdout);
    rd_kafka_destroy(rk);
    rd_kafka_conf_destroy(conf);
    free(key);
    free(val);
    close(ack_fd);
    return 0;
}

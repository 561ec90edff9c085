/*
 * rdk_idem_producer.c - the writer of the idempotent producer tests: a
 * librdkafka producer with enable.idempotence=true and acks=all that
 * numbers what it sends per partition and records every acknowledgement.
 *
 * usage: rdk_idem_producer -b BOOTSTRAP -t TOPIC -o ACKFILE -g TAG
 *            [-p PARTITIONS] [-n COUNT] [-r RATE] [-s SIZE] [-w FLUSH_MS]
 *            [-X key=value ...]
 *
 * Message i goes to partition p = i % PARTITIONS with the partition's
 * sequence q = i / PARTITIONS; its key is "TAG" and its value
 * "TAG p q " padded with '.' to SIZE bytes, so a checker can tell, per
 * partition, every message exactly once and in order from a duplicate
 * (q twice), a gap (q missing below a later one) or a reordering.
 *
 * For each successful delivery report one line "p offset q\n" goes to
 * ACKFILE with a single write() (only this process has to survive for it
 * to be there).  A failed delivery is counted and written as
 * "F p q error-name\n": the message may or may not be in the log.
 *
 * Errors librdkafka reports and retries itself (a lost connection, a
 * broker down, NOT_LEADER...) are counted and the run goes on.  A fatal
 * error (the idempotent producer cannot keep its guarantee:
 * rd_kafka_fatal_error) stops the run: it is printed as
 * "FATAL <name>: <reason>" and the exit status is 3.
 *
 * Runs until COUNT messages were produced (0: until SIGTERM/SIGINT), then
 * waits up to FLUSH_MS for outstanding reports, purges the rest and prints
 * "produced N acked A failed F unacked U errors E" (U: purged without a
 * report).  RATE caps messages per second (0: none).  -X sets any
 * librdkafka property (enable.idempotence=false for a control run).
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
static volatile sig_atomic_t fatal_seen;
static int ack_fd = -1;
static int64_t acked, failed, purged, errors;
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
    fprintf(stderr, "rdk_idem_producer: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(2);
}

static void put_line(const char *line, int n) {
    ssize_t w;
    do {
        w = write(ack_fd, line, (size_t)n);
    } while (w < 0 && errno == EINTR);
    if (w != n) die("write to the ack file", strerror(errno));
}

/* The partition sequence travels in the value: "TAG p q ..." */
static long long value_seq(const rd_kafka_message_t *m) {
    const char *v = m->payload;
    size_t n = m->len;
    char buf[96];
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    char *sp = strchr(buf, ' ');
    if (!sp) return -1;
    sp = strchr(sp + 1, ' ');
    if (!sp) return -1;
    return strtoll(sp + 1, NULL, 10);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    char line[160];
    int n;
    if (m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) {
        purged++;
        return;
    }
    if (m->err) {
        failed++;
        snprintf(last_error, sizeof last_error, "%s", rd_kafka_err2str(m->err));
        n = snprintf(line, sizeof line, "F %" PRId32 " %lld %s\n", m->partition, value_seq(m),
                     rd_kafka_err2name(m->err));
    } else {
        acked++;
        n = snprintf(line, sizeof line, "%" PRId32 " %" PRId64 " %lld\n", m->partition, m->offset,
                     value_seq(m));
    }
    if (n <= 0 || n >= (int)sizeof line) die("ack line too long", NULL);
    put_line(line, n);
}

/* Called from librdkafka's poll: transient errors are counted (the first
 * few printed), a fatal one stops the run. */
static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char why[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, why, sizeof why);
        fprintf(stderr, "rdk_idem_producer: FATAL %s: %s\n", rd_kafka_err2name(orig), why);
        printf("FATAL %s: %s\n", rd_kafka_err2name(orig), why);
        fflush(stdout);
        fatal_seen = 1;
        stop_requested = 1;
        return;
    }
    if (errors++ < 10)
        fprintf(stderr, "rdk_idem_producer: %s (%s)\n", rd_kafka_err2name((rd_kafka_resp_err_t)err),
                reason);
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char err[512];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(k, err);
}

#define USAGE "usage: -b BOOTSTRAP -t TOPIC -o ACKFILE -g TAG [-p N] [-n N] [-r N] [-s N] [-w MS] [-X k=v]"

int main(int argc, char **argv) {
    const char *bootstrap = NULL, *topic = NULL, *ackfile = NULL, *tag = NULL;
    long partitions = 1, rate = 0, size = 100, flush_ms = 30000;
    long long count = 0;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* the test's defaults; -X may override any of them.  A long
     * message.timeout.ms: a message that times out in flight is a hole in
     * the sequence the producer must repair, not what the test is for. */
    conf_set(conf, "acks", "all");
    conf_set(conf, "enable.idempotence", "true");
    conf_set(conf, "linger.ms", "5");
    conf_set(conf, "message.timeout.ms", "300000");
    conf_set(conf, "retry.backoff.ms", "50");
    conf_set(conf, "reconnect.backoff.ms", "20");
    conf_set(conf, "reconnect.backoff.max.ms", "200");
    conf_set(conf, "client.id", "rdk_idem_producer");
    int opt;
    while ((opt = getopt(argc, argv, "b:t:o:g:p:n:r:s:w:X:")) != -1) {
        switch (opt) {
        case 'b': bootstrap = optarg; break;
        case 't': topic = optarg; break;
        case 'o': ackfile = optarg; break;
        case 'g': tag = optarg; break;
        case 'p': partitions = strtol(optarg, NULL, 10); break;
        case 'n': count = strtoll(optarg, NULL, 10); break;
        case 'r': rate = strtol(optarg, NULL, 10); break;
        case 's': size = strtol(optarg, NULL, 10); break;
        case 'w': flush_ms = strtol(optarg, NULL, 10); break;
        case 'X': {
            char *eq = strchr(optarg, '=');
            if (!eq) die("-X wants key=value", optarg);
            *eq = '\0';
            conf_set(conf, optarg, eq + 1);
            break;
        }
        default: die(USAGE, NULL);
        }
    }
    if (!bootstrap || !topic || !ackfile || !tag || strchr(tag, ' ') || partitions < 1 ||
        size < 0 || size > 1000000 || rate < 0 || count < 0)
        die(USAGE, NULL);
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
    rd_kafka_conf_set_error_cb(conf, on_error);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);

    size_t valcap = (size_t)size + 96;
    char *val = malloc(valcap);
    if (!val) die("out of memory", NULL);
    long long seq = 0;
    int64_t start = mono_ms();
    while (!stop_requested && (count == 0 || seq < count)) {
        if (rate > 0 && seq >= (mono_ms() - start) * rate / 1000 + 1) {
            rd_kafka_poll(rk, 2);
            continue;
        }
        int32_t p = (int32_t)(seq % partitions);
        long long q = seq / partitions;
        int vlen = snprintf(val, valcap, "%s %" PRId32 " %lld ", tag, p, q);
        if (vlen < 0 || (size_t)vlen >= valcap) die("tag too long", tag);
        if (vlen < size) {
            memset(val + vlen, '.', (size_t)(size - vlen));
            vlen = (int)size;
        }
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(p),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(tag, strlen(tag)),
            RD_KAFKA_V_VALUE(val, (size_t)vlen), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(rk, 20);
            continue;
        }
        if (e == RD_KAFKA_RESP_ERR__FATAL) break; /* on_error says why at the next poll */
        if (e) die("produce", rd_kafka_err2str(e));
        seq++;
        rd_kafka_poll(rk, 0);
    }

    /* flush, unless a fatal error already ended the producer's work */
    int64_t until = mono_ms() + flush_ms;
    while (rd_kafka_outq_len(rk) > 0 && mono_ms() < until) {
        rd_kafka_poll(rk, 50);
        if (fatal_seen) break;
    }
    rd_kafka_poll(rk, 0);
    if (!fatal_seen) {
        char why[512];
        rd_kafka_resp_err_t fe = rd_kafka_fatal_error(rk, why, sizeof why);
        if (fe) {
            printf("FATAL %s: %s\n", rd_kafka_err2name(fe), why);
            fatal_seen = 1;
        }
    }
    rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(rk, 0);
    printf("produced %lld acked %" PRId64 " failed %" PRId64 " unacked %" PRId64 " errors %" PRId64
           "%s%s\n",
           seq, acked, failed, purged, errors, failed ? " last error: " : "",
           failed ? last_error : "");
    fflush(stdout);
    rd_kafka_destroy(rk);
    free(val);
    close(ack_fd);
    return fatal_seen ? 3 : 0;
}

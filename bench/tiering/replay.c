/*
 * replay.c - strata-tier-replay: the consumer of the tiering benchmark
 * (bench/tiering/run.sh).  Reads partitions 0..N-1 of a topic from offset
 * 0 up to an end offset given per partition, with librdkafka, as fast as it
 * can, and prints what it took.
 *
 * usage: strata-tier-replay --bootstrap HOST:PORT --topic T --ends E0,E1,...
 *            [--timeout S] [-X key=value ...]
 *
 * Partition i is read over [0, Ei): the benchmark passes the tiered end of
 * each partition, so the replay covers exactly the segments that are in
 * the bucket (the same bytes curl downloads), or the high watermarks for a
 * local topic.  The assign API is used (no consumer group, nothing
 * committed); librdkafka's fetch settings are those of strata-loadgen's
 * consume mode (50 MB per fetch, 4 MB per partition, a deep queue), and -X
 * overrides any of them.
 *
 * One line on stdout:
 *   mode=replay records=N bytes=B seconds=S mb_per_s=R first_record_s=F
 * bytes are record keys and values (batch framing not counted), seconds
 * run from assign to the last record.  Exit 1 on a timeout or a consumer
 * error, 2 on bad usage.
 */
#include <librdkafka/rdkafka.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PARTS 1024

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *out) {
    fprintf(out, "usage: strata-tier-replay --bootstrap HOST:PORT --topic T --ends E0,E1,... "
                 "[--timeout S] [-X key=value ...]\n");
}

static int set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char err[512];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) == RD_KAFKA_CONF_OK) return 0;
    fprintf(stderr, "strata-tier-replay: %s: %s\n", k, err);
    return -1;
}

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    (void)rk;
    if (level <= 4) fprintf(stderr, "strata-tier-replay: %s: %s\n", fac, buf);
}

int main(int argc, char **argv) {
    const char *bootstrap = NULL, *topic = NULL, *ends_arg = NULL;
    long timeout_s = 600;
    static int64_t end[MAX_PARTS];
    int nparts = 0;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (set(conf, "group.id", "strata-tier-replay") || set(conf, "enable.auto.commit", "false") ||
        set(conf, "enable.auto.offset.store", "false") || set(conf, "enable.partition.eof", "false") ||
        set(conf, "auto.offset.reset", "error") || set(conf, "fetch.max.bytes", "52428800") ||
        set(conf, "max.partition.fetch.bytes", "4194304") || set(conf, "queued.min.messages", "10000000") ||
        set(conf, "queued.max.messages.kbytes", "262144"))
        return 2;
    static const struct option longopts[] = {{"bootstrap", required_argument, NULL, 'b'},
                                             {"topic", required_argument, NULL, 't'},
                                             {"ends", required_argument, NULL, 'e'},
                                             {"timeout", required_argument, NULL, 'T'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "b:t:e:T:X:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b': bootstrap = optarg; break;
        case 't': topic = optarg; break;
        case 'e': ends_arg = optarg; break;
        case 'T': timeout_s = strtol(optarg, NULL, 10); break;
        case 'X': {
            char *eq = strchr(optarg, '=');
            if (!eq) {
                fprintf(stderr, "strata-tier-replay: -X wants key=value\n");
                return 2;
            }
            *eq = '\0';
            if (set(conf, optarg, eq + 1)) return 2;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!bootstrap || !topic || !ends_arg || timeout_s <= 0) {
        usage(stderr);
        return 2;
    }
    for (const char *s = ends_arg; *s;) {
        char *next;
        long long v = strtoll(s, &next, 10);
        if (next == s || v < 0 || nparts == MAX_PARTS || (*next && *next != ',')) {
            fprintf(stderr, "strata-tier-replay: --ends wants non-negative offsets separated by commas\n");
            return 2;
        }
        end[nparts++] = v;
        s = *next ? next + 1 : next;
    }
    set(conf, "bootstrap.servers", bootstrap);
    rd_kafka_conf_set_log_cb(conf, on_log);

    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "strata-tier-replay: %s\n", err);
        return 2;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(nparts);
    int open_parts = 0;
    for (int p = 0; p < nparts; p++) {
        if (end[p] == 0) continue;
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = 0;
        open_parts++;
    }
    double t0 = now_s(), deadline = t0 + (double)timeout_s, t_first = 0;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e) {
        fprintf(stderr, "strata-tier-replay: assign: %s\n", rd_kafka_err2str(e));
        rd_kafka_destroy(rk);
        return 1;
    }
    static int64_t next[MAX_PARTS];
    long long records = 0, bytes = 0, errors = 0;
    double t_last = t0;
    while (open_parts > 0 && now_s() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        if (m->err) {
            if (errors++ < 5) fprintf(stderr, "strata-tier-replay: %s\n", rd_kafka_message_errstr(m));
        } else if (m->partition >= 0 && m->partition < nparts && m->offset < end[m->partition]) {
            if (records == 0) t_first = now_s();
            records++;
            bytes += (long long)m->len + (long long)m->key_len;
            next[m->partition] = m->offset + 1;
            if (next[m->partition] >= end[m->partition]) {
                open_parts--;
                t_last = now_s();
            }
        }
        rd_kafka_message_destroy(m);
    }
    double secs = (open_parts == 0 ? t_last : now_s()) - t0;
    int rc = errors ? 1 : 0;
    for (int p = 0; p < nparts; p++)
        if (next[p] < end[p]) {
            fprintf(stderr, "strata-tier-replay: timed out: partition %d at %" PRId64 " of %" PRId64 "\n",
                    p, next[p], end[p]);
            rc = 1;
        }
    printf("mode=replay records=%lld bytes=%lld seconds=%.3f mb_per_s=%.2f first_record_s=%.3f\n",
           records, bytes, secs, secs > 0 ? (double)bytes / 1e6 / secs : 0.0,
           t_first > 0 ? t_first - t0 : -1.0);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

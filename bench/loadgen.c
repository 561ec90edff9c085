/*
 * loadgen.c - strata-loadgen: a librdkafka load generator for the produce
 * and consume benchmarks (bench/run.sh, docs/BENCHMARKS.md).
 *
 *   produce: send N records of S bytes to a topic, wait for every delivery
 *            report, print records/s and MB/s; any failed delivery makes
 *            the run fail.
 *   consume: assign every partition of the topic at the beginning (no
 *            consumer group) and read until N records have arrived.
 *
 * The payload is generated once from a fixed seed and is incompressible;
 * each record takes a different window of it so no two neighbours are
 * equal.  Records have no key.  Records are handed to librdkafka without
 * copying (the payload outlives the producer).
 *
 * MB means 10^6 bytes of record values; protocol and batch overhead is not
 * counted.  The result is one line of key=value pairs on stdout, readable
 * by people and by bench/run.sh alike.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

typedef struct opts {
    const char *mode;
    const char *bootstrap;
    const char *topic;
    long long count;
    int size;
    const char *acks;
    int linger_ms;
    int timeout_s;
    int quiet;
    const char *debug;
    const char *compression;
} opts_t;

typedef struct dr_stats {
    long long delivered;
    long long failed;
    rd_kafka_resp_err_t first_err;
} dr_stats_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: strata-loadgen produce --bootstrap HOST:PORT --topic T [options]\n"
            "       strata-loadgen consume --bootstrap HOST:PORT --topic T [options]\n"
            "\n"
            "  -b, --bootstrap HOST:PORT  broker to bootstrap from (localhost:9092)\n"
            "  -t, --topic NAME           topic (strata-bench)\n"
            "  -n, --count N              records to produce or to read (100000)\n"
            "  -s, --size BYTES           record value size, produce only (100)\n"
            "  -a, --acks 0|1|all         producer acks (1)\n"
            "  -l, --linger-ms MS         producer linger.ms (5)\n"
            "  -z, --compression CODEC    producer compression.type (none)\n"
            "  -T, --timeout S            give up after S seconds (300)\n"
            "  -q, --quiet                no progress on stderr\n"
            "  -d, --debug CONTEXTS       librdkafka debug contexts (e.g. protocol,msg)\n"
            "  -h, --help                 this text\n"
            "\n"
            "Prints one line: mode=... records=... seconds=... records_per_s=...\n"
            "mb_per_s=... errors=...  (MB = 10^6 bytes of record values).  Exits 1\n"
            "when any record fails or the timeout passes.\n");
}

/* A librdkafka setting that must be accepted: a typo here is a bug. */
static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "strata-loadgen: %s=%s: %s\n", key, value, err);
        exit(2);
    }
}

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    (void)rk;
    fprintf(stderr, "strata-loadgen: librdkafka %d %s: %s\n", level, fac, buf);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    dr_stats_t *st = opaque;
    if (m->err) {
        if (st->failed++ == 0) st->first_err = m->err;
    } else {
        st->delivered++;
    }
}

/* Incompressible bytes from a fixed seed (xorshift64*), so every run sends
 * the same data. */
static unsigned char *make_payload(size_t len) {
    unsigned char *p = malloc(len);
    if (!p) return NULL;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < len; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        p[i] = (unsigned char)((x * 0x2545f4914f6cdd1dull) >> 56);
    }
    return p;
}

/* extra: more key=value pairs for this mode ("" when none). */
static void print_result(const opts_t *o, const char *extra, long long records, long long bytes,
                         double secs, long long errors) {
    if (secs <= 0) secs = 1e-9;
    printf("mode=%s records=%lld size=%d %sseconds=%.3f records_per_s=%.0f mb_per_s=%.2f "
           "errors=%lld\n",
           o->mode, records, o->size, extra, secs, (double)records / secs,
           (double)bytes / secs / 1e6, errors);
    fflush(stdout);
}

static int run_produce(const opts_t *o) {
    char err[512], buf[64];
    dr_stats_t st = {0};
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", o->bootstrap);
    if (o->debug) set(conf, "debug", o->debug);
    set(conf, "acks", o->acks);
    set(conf, "compression.type", o->compression);
    snprintf(buf, sizeof buf, "%d", o->linger_ms);
    set(conf, "linger.ms", buf);
    /* Batches of up to ~1 MB, capped by count only far above what 1 MB of
     * 100-byte records holds, and a queue deep enough that the application
     * never waits on it for long. */
    set(conf, "batch.size", "1000000");
    set(conf, "batch.num.messages", "100000");
    set(conf, "queue.buffering.max.kbytes", "1048576");
    set(conf, "queue.buffering.max.messages", "1000000");
    set(conf, "message.timeout.ms", "120000");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_log_cb(conf, on_log);
    rd_kafka_conf_set_opaque(conf, &st);

    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "strata-loadgen: %s\n", err);
        return 1;
    }

    /* The window a record takes slides by a prime stride through a pool
     * larger than any batch. */
    size_t pool_len = (size_t)o->size + (1u << 20);
    unsigned char *payload = make_payload(pool_len);
    if (!payload) {
        fprintf(stderr, "strata-loadgen: out of memory\n");
        rd_kafka_destroy(rk);
        return 1;
    }

    /* Warm up: one record, delivered, so topic creation and connection set
     * up are not timed.  It is not counted. */
    rd_kafka_resp_err_t e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o->topic),
                                              RD_KAFKA_V_VALUE(payload, (size_t)o->size),
                                              RD_KAFKA_V_END);
    if (e || rd_kafka_flush(rk, o->timeout_s * 1000) || st.failed) {
        fprintf(stderr, "strata-loadgen: warm-up record failed: %s\n",
                rd_kafka_err2str(e ? e : st.failed ? st.first_err : RD_KAFKA_RESP_ERR__TIMED_OUT));
        free(payload);
        rd_kafka_destroy(rk);
        return 1;
    }
    st.delivered = 0;

    double t0 = now_s(), deadline = t0 + o->timeout_s, next_report = t0 + 5;
    size_t off = 0;
    long long sent = 0;
    int rc = 0;
    while (sent < o->count) {
        e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o->topic),
                              RD_KAFKA_V_VALUE(payload + off, (size_t)o->size), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(rk, 5);
            if (now_s() > deadline) break;
            continue;
        }
        if (e) {
            fprintf(stderr, "strata-loadgen: produce: %s\n", rd_kafka_err2str(e));
            rc = 1;
            break;
        }
        sent++;
        off = (off + 7919) % (pool_len - (size_t)o->size);
        if ((sent & 1023) == 0) {
            rd_kafka_poll(rk, 0);
            double t = now_s();
            if (!o->quiet && t >= next_report) {
                fprintf(stderr, "strata-loadgen: %lld sent, %lld delivered\n", sent, st.delivered);
                next_report = t + 5;
            }
        }
    }
    double left = deadline - now_s();
    rd_kafka_resp_err_t fe = rd_kafka_flush(rk, left > 0 ? (int)(left * 1000) : 0);
    double secs = now_s() - t0;

    if (fe || sent < o->count) {
        fprintf(stderr, "strata-loadgen: timed out after %.0f s: %lld of %lld delivered\n", secs,
                st.delivered, o->count);
        rc = 1;
    }
    if (st.failed) {
        fprintf(stderr, "strata-loadgen: %lld records failed, the first with %s\n", st.failed,
                rd_kafka_err2str(st.first_err));
        rc = 1;
    }
    long long lost = o->count - st.delivered - st.failed;
    char extra[32];
    snprintf(extra, sizeof extra, "acks=%s ", o->acks);
    print_result(o, extra, st.delivered, st.delivered * (long long)o->size, secs, st.failed + lost);
    rd_kafka_destroy(rk);
    free(payload);
    return rc;
}

/* Every partition of the topic, at the beginning. */
static rd_kafka_topic_partition_list_t *all_partitions(rd_kafka_t *rk, const opts_t *o) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
    rd_kafka_topic_destroy(rkt);
    if (e || md->topic_cnt != 1 || md->topics[0].err) {
        fprintf(stderr, "strata-loadgen: metadata for %s: %s\n", o->topic,
                rd_kafka_err2str(e ? e : md->topic_cnt != 1 ? RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC
                                                             : md->topics[0].err));
        if (md) rd_kafka_metadata_destroy(md);
        return NULL;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
    for (int i = 0; i < md->topics[0].partition_cnt; i++)
        rd_kafka_topic_partition_list_add(l, o->topic, md->topics[0].partitions[i].id)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_metadata_destroy(md);
    return l;
}

static int run_consume(const opts_t *o) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", o->bootstrap);
    if (o->debug) set(conf, "debug", o->debug);
    /* assign() takes no part in a group, but librdkafka 2.0 refuses it
     * without a group.id; nothing is committed. */
    set(conf, "group.id", "strata-loadgen");
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.auto.offset.store", "false");
    set(conf, "enable.partition.eof", "false");
    set(conf, "fetch.max.bytes", "52428800");
    set(conf, "max.partition.fetch.bytes", "4194304");
    /* Keep fetching ahead of the application: with the default of 100000
     * queued records, small records stall the fetcher for a wake-up cycle. */
    set(conf, "queued.min.messages", "10000000");
    set(conf, "queued.max.messages.kbytes", "262144");
    rd_kafka_conf_set_log_cb(conf, on_log);

    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "strata-loadgen: %s\n", err);
        return 1;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *parts = all_partitions(rk, o);
    if (!parts) {
        rd_kafka_destroy(rk);
        return 1;
    }

    double t0 = now_s(), deadline = t0 + o->timeout_s, next_report = t0 + 5;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    if (e) {
        fprintf(stderr, "strata-loadgen: assign: %s\n", rd_kafka_err2str(e));
        rd_kafka_destroy(rk);
        return 1;
    }

    long long got = 0, bytes = 0, errors = 0;
    double t_first = 0;
    while (got < o->count && now_s() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        if (got == 0 && !m->err) t_first = now_s();
        if (m->err) {
            if (errors++ < 5)
                fprintf(stderr, "strata-loadgen: consume: %s\n", rd_kafka_message_errstr(m));
        } else {
            got++;
            bytes += (long long)m->len;
        }
        rd_kafka_message_destroy(m);
        if (!o->quiet && (got & 4095) == 0 && now_s() >= next_report) {
            fprintf(stderr, "strata-loadgen: %lld received\n", got);
            next_report = now_s() + 5;
        }
    }
    double secs = now_s() - t0;
    int rc = 0;
    if (got < o->count) {
        fprintf(stderr, "strata-loadgen: timed out after %.0f s: %lld of %lld received\n", secs,
                got, o->count);
        rc = 1;
    }
    /* The time to the first record (metadata, ListOffsets, first fetch) is
     * part of seconds; shown apart so a slow start is visible. */
    opts_t shown = *o;
    shown.size = got ? (int)(bytes / got) : 0;
    char extra[48];
    snprintf(extra, sizeof extra, "first_record_s=%.3f ", t_first > 0 ? t_first - t0 : -1.0);
    print_result(&shown, extra, got, bytes, secs, errors);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

int main(int argc, char **argv) {
    opts_t o = {.bootstrap = "localhost:9092",
                .topic = "strata-bench",
                .count = 100000,
                .size = 100,
                .acks = "1",
                .linger_ms = 5,
                .timeout_s = 300,
                .compression = "none"};
    static const struct option longopts[] = {
        {"bootstrap", required_argument, NULL, 'b'}, {"topic", required_argument, NULL, 't'},
        {"count", required_argument, NULL, 'n'},     {"size", required_argument, NULL, 's'},
        {"acks", required_argument, NULL, 'a'},      {"linger-ms", required_argument, NULL, 'l'},
        {"timeout", required_argument, NULL, 'T'},   {"quiet", no_argument, NULL, 'q'},
        {"debug", required_argument, NULL, 'd'},     {"help", no_argument, NULL, 'h'},
        {"compression", required_argument, NULL, 'z'},
        {NULL, 0, NULL, 0}};
    int ch;
    char *end;
    while ((ch = getopt_long(argc, argv, "b:t:n:s:a:l:T:qd:hz:", longopts, NULL)) != -1) {
        errno = 0;
        switch (ch) {
        case 'b': o.bootstrap = optarg; break;
        case 't': o.topic = optarg; break;
        case 'n': o.count = strtoll(optarg, &end, 10); break;
        case 's': o.size = (int)strtol(optarg, &end, 10); break;
        case 'a': o.acks = strcmp(optarg, "-1") == 0 ? "all" : optarg; break;
        case 'l': o.linger_ms = (int)strtol(optarg, &end, 10); break;
        case 'T': o.timeout_s = (int)strtol(optarg, &end, 10); break;
        case 'q': o.quiet = 1; break;
        case 'd': o.debug = optarg; break;
        case 'z': o.compression = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (strchr("nslT", ch) && (errno || *end || end == optarg)) {
            fprintf(stderr, "strata-loadgen: -%c %s: not a number\n", ch, optarg);
            return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    o.mode = argv[optind];
    if (o.count <= 0 || o.size <= 0 || o.size > 900000 || o.timeout_s <= 0 || o.linger_ms < 0) {
        fprintf(stderr, "strata-loadgen: --count, --size (at most 900000) and --timeout must be "
                        "positive\n");
        return 2;
    }
    if (strcmp(o.acks, "0") && strcmp(o.acks, "1") && strcmp(o.acks, "all")) {
        fprintf(stderr, "strata-loadgen: --acks must be 0, 1 or all\n");
        return 2;
    }
    if (strcmp(o.mode, "produce") == 0) return run_produce(&o);
    if (strcmp(o.mode, "consume") == 0) return run_consume(&o);
    fprintf(stderr, "strata-loadgen: unknown mode '%s'\n", o.mode);
    usage(stderr);
    return 2;
}

/*
 * loadgen.c - strata-loadgen: a librdkafka load generator for the produce
 * and consume benchmarks (bench/run.sh, docs/BENCHMARKS.md).
 *
 *   produce: send N records of S bytes to a topic, wait for every delivery
 *            report, print records/s and MB/s; any failed delivery makes
 *            the run fail.
 *   consume: assign every partition of the topic at the beginning (no
 *            consumer group) and read until N records have arrived.
 *   topic:   create a topic (partitions, replication factor, configs) and
 *            wait until every partition has a leader and a full ISR
 *            (bench/replication.sh).
 *
 * Produce options for the replication benchmark: --rate sends at a fixed
 * rate (record i is due at t0 + i / rate), --latency reports percentiles
 * of each record's time from when it was due (or, without --rate, handed
 * to librdkafka) to its delivery report, and --e2e runs a consumer in the
 * same process, assigned at every partition's end before the clock
 * starts, that reports the time from when each record was due to its
 * delivery to the consumer (the time travels in the record's first bytes).
 * Measuring from the due time, not the send time, keeps a producer that
 * falls behind from hiding its delay (no coordinated omission).
 *
 * The payload is generated once from a fixed seed and is incompressible;
 * each record takes a different window of it so no two neighbours are
 * equal.  Records have no key.  Records are handed to librdkafka without
 * copying (the payload outlives the producer).
 *
 * --property KEY=VALUE passes a librdkafka client setting (security.protocol,
 * ssl.ca.location, ...) to every client the mode makes, after the
 * tool's own settings, so it may also override them.
 *
 * MB means 10^6 bytes of record values; protocol and batch overhead is not
 * counted.  The result is one line of key=value pairs on stdout, readable
 * by people and by bench/run.sh alike.
 */
#include <errno.h>
#include <pthread.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    double rate;      /* records/s, 0: as fast as possible */
    int latency;      /* report delivery latency percentiles */
    int e2e;          /* a consumer reads along: produce-to-delivery */
    int idempotent;   /* produce: enable.idempotence=true (KIP-98) */
    long long txn;    /* produce: transactions of this many records (0: none) */
    int max_in_flight; /* produce: max.in.flight per connection, 0: librdkafka's */
    int partitions;   /* topic mode */
    int replication;  /* topic mode */
    const char *configs[16];
    int nconfigs;
    const char *props[16]; /* --property: librdkafka client settings */
    int nprops;
} opts_t;

typedef struct dr_stats {
    long long delivered;
    long long failed;
    rd_kafka_resp_err_t first_err;
    /* --latency: when record i was due (t_due, or t_sent without --rate),
     * and each delivered record's latency in seconds */
    double t0, rate;
    double *t_sent;
    float *lat;
    long long nlat;
    int measuring;
} dr_stats_t;

/* --e2e: the first bytes of every value measured carry this mark and the
 * time the record was due (CLOCK_MONOTONIC, ns). */
#define E2E_MAGIC 0x5354524245324531ull /* "STRBE2E1" */
#define E2E_HDR 16

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
            "  -r, --rate N               produce: N records/s (default: as fast as possible)\n"
            "  -L, --latency              produce: delivery latency percentiles (lat_*_ms)\n"
            "  -I, --idempotent           produce: enable.idempotence=true (needs --acks all)\n"
            "      --txn K                produce: in transactions of K records each (a\n"
            "                             transactional.id of its own, commit after every K)\n"
            "  -F, --max-in-flight N      produce: max.in.flight requests per connection\n"
            "  -E, --e2e                  produce: a consumer reads along; produce-to-delivery\n"
            "                             percentiles (e2e_*_ms); needs --size >= 16\n"
            "  -p, --partitions N         topic: partitions (3)\n"
            "  -R, --replication-factor N topic: replication factor (1)\n"
            "  -c, --config KEY=VALUE     topic: a topic config (repeatable)\n"
            "  -P, --property KEY=VALUE   a librdkafka client setting for every client made\n"
            "                             (e.g. security.protocol=SSL; repeatable)\n"
            "  -h, --help                 this text\n"
            "\n"
            "       strata-loadgen topic --bootstrap HOST:PORT --topic T -p N -R N [-c K=V ...]\n"
            "  creates T and waits until every partition has a leader and a full ISR\n"
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

/* --property settings, after the tool's own (so they win). */
static void set_props(rd_kafka_conf_t *conf, const opts_t *o) {
    for (int i = 0; i < o->nprops; i++) {
        const char *eq = strchr(o->props[i], '=');
        size_t klen = eq ? (size_t)(eq - o->props[i]) : 0;
        char key[128];
        if (!eq || klen == 0 || klen >= sizeof key) {
            fprintf(stderr, "strata-loadgen: --property %s: not KEY=VALUE (a key under 128 bytes)\n",
                    o->props[i]);
            exit(2);
        }
        memcpy(key, o->props[i], klen);
        key[klen] = 0;
        set(conf, key, eq + 1);
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
        if (st->lat && st->measuring) {
            long long i = (long long)(intptr_t)m->_private;
            double due = st->t_sent ? st->t_sent[i] : st->t0 + (double)i / st->rate;
            st->lat[st->nlat++] = (float)(now_s() - due);
        }
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* "NAME_p50_ms=.. NAME_p99_ms=.. NAME_p999_ms=.. NAME_max_ms=.. " of v
 * (sorted here), nearest rank. */
static void fmt_pcts(char *out, size_t cap, const char *name, float *v, long long n) {
    if (n <= 0) {
        snprintf(out, cap, "%s_p50_ms=- %s_p99_ms=- %s_p999_ms=- %s_max_ms=- ", name, name, name,
                 name);
        return;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    long long k50 = (n * 50 + 99) / 100 - 1, k99 = (n * 99 + 99) / 100 - 1;
    long long k999 = (n * 999 + 999) / 1000 - 1;
    snprintf(out, cap, "%s_p50_ms=%.3f %s_p99_ms=%.3f %s_p999_ms=%.3f %s_max_ms=%.3f ", name,
             v[k50] * 1e3, name, v[k99] * 1e3, name, v[k999] * 1e3, name, v[n - 1] * 1e3);
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

static rd_kafka_topic_partition_list_t *all_partitions(rd_kafka_t *rk, const opts_t *o);

/* --e2e: a consumer in this process, on its own thread, reading what the
 * run produces. */
typedef struct e2e {
    rd_kafka_t *rk;
    float *lat;
    long long n, cap, errors;
    atomic_int stop;
    pthread_t th;
} e2e_t;

static void *e2e_main(void *arg) {
    e2e_t *e = arg;
    while (!atomic_load(&e->stop) && e->n < e->cap) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(e->rk, 100);
        if (!m) continue;
        double t = now_s();
        if (m->err) {
            if (e->errors++ < 5)
                fprintf(stderr, "strata-loadgen: e2e consume: %s\n", rd_kafka_message_errstr(m));
        } else if (m->len >= E2E_HDR) {
            uint64_t magic;
            double due;
            memcpy(&magic, m->payload, sizeof magic);
            memcpy(&due, (const unsigned char *)m->payload + 8, sizeof due);
            /* records without the mark (the warm-up ones) are not counted */
            if (magic == E2E_MAGIC) e->lat[e->n++] = (float)(t - due);
        }
        rd_kafka_message_destroy(m);
    }
    return NULL;
}

/* Assign every partition at its current end (so the consumer gets exactly
 * what is produced from now on) and start the thread. */
static int e2e_start(e2e_t *e, const opts_t *o) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", o->bootstrap);
    if (o->debug) set(conf, "debug", o->debug);
    set(conf, "group.id", "strata-loadgen-e2e");
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.auto.offset.store", "false");
    set(conf, "enable.partition.eof", "false");
    set_props(conf, o);
    rd_kafka_conf_set_log_cb(conf, on_log);
    e->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!e->rk) {
        fprintf(stderr, "strata-loadgen: %s\n", err);
        return 1;
    }
    rd_kafka_poll_set_consumer(e->rk);
    rd_kafka_topic_partition_list_t *parts = all_partitions(e->rk, o);
    if (!parts) return 1;
    for (int i = 0; i < parts->cnt; i++) {
        int64_t lo = 0, hi = 0;
        rd_kafka_resp_err_t qe = rd_kafka_query_watermark_offsets(
            e->rk, o->topic, parts->elems[i].partition, &lo, &hi, 10000);
        if (qe) {
            fprintf(stderr, "strata-loadgen: e2e: end of partition %d: %s\n",
                    parts->elems[i].partition, rd_kafka_err2str(qe));
            rd_kafka_topic_partition_list_destroy(parts);
            return 1;
        }
        parts->elems[i].offset = hi;
    }
    rd_kafka_resp_err_t ae = rd_kafka_assign(e->rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    if (ae) {
        fprintf(stderr, "strata-loadgen: e2e assign: %s\n", rd_kafka_err2str(ae));
        return 1;
    }
    if (pthread_create(&e->th, NULL, e2e_main, e)) {
        fprintf(stderr, "strata-loadgen: e2e: no thread\n");
        return 1;
    }
    /* Let it connect to every leader and park its first fetches, so that
     * the first measured records do not pay for connection set-up. */
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    return 0;
}

/* Wait up to wait_s for the consumer to have every record, then stop it. */
static void e2e_stop(e2e_t *e, double wait_s) {
    double until = now_s() + wait_s;
    struct timespec ts = {0, 10 * 1000 * 1000};
    while (now_s() < until && e->n < e->cap) nanosleep(&ts, NULL);
    atomic_store(&e->stop, 1);
    pthread_join(e->th, NULL);
    rd_kafka_consumer_close(e->rk);
}

/* Sleep s seconds (monotonic), serving delivery reports meanwhile. */
static void idle(rd_kafka_t *rk, double s) {
    if (s >= 2e-3) {
        rd_kafka_poll(rk, (int)(s * 1000)); /* returns early on a report */
        return;
    }
    rd_kafka_poll(rk, 0);
    struct timespec ts = {0, (long)(s * 1e9)};
    nanosleep(&ts, NULL);
}

/* One more warm-up record to every partition (explicitly), so that the
 * connection to each partition's leader is up before the clock starts. */
static int warm_every_partition(rd_kafka_t *rk, const opts_t *o, const unsigned char *payload,
                                dr_stats_t *st) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
    rd_kafka_topic_destroy(rkt);
    int n = (!e && md->topic_cnt == 1 && !md->topics[0].err) ? md->topics[0].partition_cnt : 0;
    if (md) rd_kafka_metadata_destroy(md);
    if (n <= 0) {
        fprintf(stderr, "strata-loadgen: metadata for %s: %s\n", o->topic, rd_kafka_err2str(e));
        return 1;
    }
    for (int i = 0; i < n; i++) {
        e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_PARTITION(i),
                              RD_KAFKA_V_VALUE((void *)payload, (size_t)o->size), RD_KAFKA_V_END);
        if (e) break;
    }
    if (e || rd_kafka_flush(rk, o->timeout_s * 1000) || st->failed) {
        fprintf(stderr, "strata-loadgen: warm-up records failed: %s\n",
                rd_kafka_err2str(e ? e : st->failed ? st->first_err : RD_KAFKA_RESP_ERR__TIMED_OUT));
        return 1;
    }
    return 0;
}

/* A transactional call's error, printed; 0 when none. */
static int txn_call(rd_kafka_error_t *e, const char *what) {
    if (!e) return 0;
    fprintf(stderr, "strata-loadgen: %s_transaction: %s: %s\n", what, rd_kafka_error_name(e),
            rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    return 1;
}

static int run_produce(const opts_t *o) {
    char err[512], buf[64];
    dr_stats_t st = {0};
    e2e_t e2e = {0};
    int e2e_on = 0;
    unsigned char *val = NULL;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", o->bootstrap);
    if (o->debug) set(conf, "debug", o->debug);
    set(conf, "acks", o->acks);
    if (o->idempotent) set(conf, "enable.idempotence", "true");
    if (o->txn > 0) {
        snprintf(buf, sizeof buf, "strata-loadgen-%d", (int)getpid());
        set(conf, "transactional.id", buf);
        set(conf, "transaction.timeout.ms", "120000"); /* >= message.timeout.ms below */
    }
    if (o->max_in_flight > 0) {
        snprintf(buf, sizeof buf, "%d", o->max_in_flight);
        set(conf, "max.in.flight", buf);
    }
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
    set_props(conf, o);
    rd_kafka_conf_set_log_cb(conf, on_log);
    rd_kafka_conf_set_opaque(conf, &st);

    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "strata-loadgen: %s\n", err);
        return 1;
    }

    if (o->txn > 0 && txn_call(rd_kafka_init_transactions(rk, o->timeout_s * 1000), "init")) {
        rd_kafka_destroy(rk);
        return 1;
    }
    /* The window a record takes slides by a prime stride through a pool
     * larger than any batch. */
    size_t pool_len = (size_t)o->size + (1u << 20);
    unsigned char *payload = make_payload(pool_len);
    if (o->latency || o->e2e) {
        st.lat = malloc((size_t)o->count * sizeof *st.lat);
        if (o->rate <= 0) st.t_sent = malloc((size_t)o->count * sizeof *st.t_sent);
    }
    if (o->e2e) {
        e2e.cap = o->count;
        e2e.lat = malloc((size_t)o->count * sizeof *e2e.lat);
        val = malloc((size_t)o->size);
    }
    if (!payload || ((o->latency || o->e2e) && !st.lat) || (o->rate <= 0 && st.lat && !st.t_sent) ||
        (o->e2e && (!e2e.lat || !val))) {
        fprintf(stderr, "strata-loadgen: out of memory\n");
        rd_kafka_destroy(rk);
        return 1;
    }

    /* Warm up: one record, delivered, so topic creation and connection set
     * up are not timed.  It is not counted. */
    if (o->txn > 0 && txn_call(rd_kafka_begin_transaction(rk), "begin")) {
        free(payload);
        rd_kafka_destroy(rk);
        return 1;
    }
    rd_kafka_resp_err_t e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o->topic),
                                              RD_KAFKA_V_VALUE(payload, (size_t)o->size),
                                              RD_KAFKA_V_END);
    if (!e && o->txn > 0 && txn_call(rd_kafka_commit_transaction(rk, o->timeout_s * 1000), "commit"))
        e = RD_KAFKA_RESP_ERR__FAIL;
    if (e || rd_kafka_flush(rk, o->timeout_s * 1000) || st.failed) {
        fprintf(stderr, "strata-loadgen: warm-up record failed: %s\n",
                rd_kafka_err2str(e ? e : st.failed ? st.first_err : RD_KAFKA_RESP_ERR__TIMED_OUT));
        free(payload);
        rd_kafka_destroy(rk);
        return 1;
    }
    int rc = 0;
    /* With latencies measured, every leader's connection is warmed too. */
    if ((o->latency || o->e2e || o->rate > 0) && warm_every_partition(rk, o, payload, &st)) rc = 1;
    if (!rc && o->e2e) {
        e2e_on = 1;
        if (e2e_start(&e2e, o)) rc = 1;
    }
    if (rc) goto out;
    st.delivered = 0;

    double t0 = now_s(), deadline = t0 + o->timeout_s, next_report = t0 + 5;
    st.t0 = t0;
    st.rate = o->rate;
    st.measuring = 1;
    /* At a fixed rate the loop sends what is due and sleeps at least this
     * long between rounds (a round's records are late by up to this much,
     * which their latency includes). */
    const double quantum = 250e-6;
    size_t off = 0;
    long long sent = 0;
    while (sent < o->count) {
        double due = 0;
        if (o->rate > 0) {
            due = t0 + (double)sent / o->rate;
            double t = now_s();
            if (due > t) {
                idle(rk, due - t > quantum ? due - t : quantum);
                if (now_s() > deadline) break;
                continue;
            }
        }
        void *v = payload + off;
        int flags = 0;
        if (o->e2e) {
            uint64_t magic = E2E_MAGIC;
            double when = o->rate > 0 ? due : now_s();
            memcpy(val, payload + off, (size_t)o->size);
            memcpy(val, &magic, sizeof magic);
            memcpy(val + 8, &when, sizeof when);
            v = val;
            flags = RD_KAFKA_MSG_F_COPY;
        }
        if (o->txn > 0 && sent % o->txn == 0 && txn_call(rd_kafka_begin_transaction(rk), "begin")) {
            rc = 1;
            break;
        }
        if (st.t_sent) st.t_sent[sent] = now_s();
        e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_MSGFLAGS(flags),
                              RD_KAFKA_V_VALUE(v, (size_t)o->size),
                              RD_KAFKA_V_OPAQUE((void *)(intptr_t)sent), RD_KAFKA_V_END);
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
        if (o->txn > 0 && (sent % o->txn == 0 || sent == o->count) &&
            txn_call(rd_kafka_commit_transaction(rk, (int)(deadline - now_s()) * 1000 + 1), "commit")) {
            rc = 1;
            break;
        }
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
    char extra[512];
    int len = snprintf(extra, sizeof extra, "acks=%s ", o->acks);
    if (o->idempotent) len += snprintf(extra + len, sizeof extra - (size_t)len, "idempotent=1 ");
    if (o->txn > 0) len += snprintf(extra + len, sizeof extra - (size_t)len, "txn=%lld ", o->txn);
    if (o->max_in_flight > 0)
        len += snprintf(extra + len, sizeof extra - (size_t)len, "max_in_flight=%d ", o->max_in_flight);
    if (o->rate > 0) len += snprintf(extra + len, sizeof extra - (size_t)len, "rate=%.0f ", o->rate);
    if (st.lat) fmt_pcts(extra + len, sizeof extra - (size_t)len, "lat", st.lat, st.nlat);
    len = (int)strlen(extra);
    if (o->e2e) {
        e2e_stop(&e2e, 10);
        e2e_on = 0;
        if (e2e.n < o->count) {
            fprintf(stderr, "strata-loadgen: e2e: %lld of %lld records consumed\n", e2e.n, o->count);
            rc = 1;
        }
        fmt_pcts(extra + len, sizeof extra - (size_t)len, "e2e", e2e.lat, e2e.n);
        len = (int)strlen(extra);
        snprintf(extra + len, sizeof extra - (size_t)len, "e2e_records=%lld ", e2e.n);
    }
    print_result(o, extra, st.delivered, st.delivered * (long long)o->size, secs,
                 st.failed + lost + e2e.errors);
out:
    if (e2e_on) e2e_stop(&e2e, 0);
    if (e2e.rk) rd_kafka_destroy(e2e.rk);
    rd_kafka_destroy(rk);
    free(payload);
    free(val);
    free(st.lat);
    free(st.t_sent);
    free(e2e.lat);
    return rc;
}

/* topic mode: create the topic, then wait until every partition has a
 * leader and replicas == ISR == the replication factor. */
static int run_topic(const opts_t *o) {
    char err[512];
    int rc = 1;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", o->bootstrap);
    if (o->debug) set(conf, "debug", o->debug);
    set_props(conf, o);
    rd_kafka_conf_set_log_cb(conf, on_log);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "strata-loadgen: %s\n", err);
        return 1;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(o->topic, o->partitions, o->replication, err,
                                                    sizeof err);
    rd_kafka_event_t *ev = NULL;
    if (!nt) {
        fprintf(stderr, "strata-loadgen: topic %s: %s\n", o->topic, err);
        goto out;
    }
    for (int i = 0; i < o->nconfigs; i++) {
        char kv[256];
        snprintf(kv, sizeof kv, "%s", o->configs[i]);
        char *eq = strchr(kv, '=');
        if (!eq) {
            fprintf(stderr, "strata-loadgen: --config %s: not KEY=VALUE\n", o->configs[i]);
            goto out;
        }
        *eq = 0;
        if (rd_kafka_NewTopic_set_config(nt, kv, eq + 1)) {
            fprintf(stderr, "strata-loadgen: --config %s refused\n", o->configs[i]);
            goto out;
        }
    }
    rd_kafka_AdminOptions_set_operation_timeout(ao, 10000, err, sizeof err);
    rd_kafka_AdminOptions_set_request_timeout(ao, 15000, err, sizeof err);
    /* A cluster just started may have no controller yet, or too few
     * unfenced brokers for the replication factor: try again until the
     * timeout.  TOPIC_ALREADY_EXISTS after a retry means an earlier try
     * got through. */
    double deadline = now_s() + o->timeout_s;
    for (int attempt = 0;; attempt++) {
        rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
        ev = rd_kafka_queue_poll(q, 30000);
        const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
        size_t cnt = 0;
        const rd_kafka_topic_result_t **tr =
            res ? rd_kafka_CreateTopics_result_topics(res, &cnt) : NULL;
        rd_kafka_resp_err_t te = !res                     ? RD_KAFKA_RESP_ERR__TIMED_OUT
                                 : rd_kafka_event_error(ev) ? rd_kafka_event_error(ev)
                                 : cnt != 1                 ? RD_KAFKA_RESP_ERR__BAD_MSG
                                                            : rd_kafka_topic_result_error(tr[0]);
        if (!te || (attempt > 0 && te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)) break;
        const char *why = !res ? "no answer"
                          : rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev)
                          : cnt != 1                 ? "no topic in the answer"
                                                     : rd_kafka_topic_result_error_string(tr[0]);
        if (now_s() >= deadline || te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS ||
            te == RD_KAFKA_RESP_ERR_INVALID_CONFIG) {
            fprintf(stderr, "strata-loadgen: CreateTopics %s: %s\n", o->topic, why);
            goto out;
        }
        if (!o->quiet) fprintf(stderr, "strata-loadgen: CreateTopics %s: %s; again\n", o->topic, why);
        if (ev) rd_kafka_event_destroy(ev);
        ev = NULL;
        struct timespec ts = {0, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* Wait for leaders and a full ISR on every partition. */
    char leaders[256] = "";
    while (now_s() < deadline) {
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
        rd_kafka_topic_destroy(rkt);
        int ready = !e && md->topic_cnt == 1 && !md->topics[0].err &&
                    md->topics[0].partition_cnt == o->partitions;
        size_t len = 0;
        leaders[0] = 0;
        for (int i = 0; ready && i < md->topics[0].partition_cnt; i++) {
            const rd_kafka_metadata_partition_t *mp = &md->topics[0].partitions[i];
            if (mp->err || mp->leader < 0 || mp->replica_cnt != o->replication ||
                mp->isr_cnt != o->replication)
                ready = 0;
            else if (len < sizeof leaders - 16)
                len += (size_t)snprintf(leaders + len, sizeof leaders - len, "%s%d", i ? "," : "",
                                        (int)mp->leader);
        }
        if (md) rd_kafka_metadata_destroy(md);
        if (ready) {
            printf("mode=topic topic=%s partitions=%d replication_factor=%d leaders=%s\n", o->topic,
                   o->partitions, o->replication, leaders);
            fflush(stdout);
            rc = 0;
            goto out;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "strata-loadgen: %s: no full ISR on every partition after %d s\n", o->topic,
            o->timeout_s);
out:
    if (ev) rd_kafka_event_destroy(ev);
    if (nt) rd_kafka_NewTopic_destroy(nt);
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
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
    set_props(conf, o);
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
                .compression = "none",
                .partitions = 3,
                .replication = 1};
    static const struct option longopts[] = {
        {"bootstrap", required_argument, NULL, 'b'}, {"topic", required_argument, NULL, 't'},
        {"count", required_argument, NULL, 'n'},     {"size", required_argument, NULL, 's'},
        {"acks", required_argument, NULL, 'a'},      {"linger-ms", required_argument, NULL, 'l'},
        {"timeout", required_argument, NULL, 'T'},   {"quiet", no_argument, NULL, 'q'},
        {"debug", required_argument, NULL, 'd'},     {"help", no_argument, NULL, 'h'},
        {"compression", required_argument, NULL, 'z'},
        {"rate", required_argument, NULL, 'r'},      {"latency", no_argument, NULL, 'L'},
        {"e2e", no_argument, NULL, 'E'},             {"partitions", required_argument, NULL, 'p'},
        {"replication-factor", required_argument, NULL, 'R'},
        {"config", required_argument, NULL, 'c'},
        {"idempotent", no_argument, NULL, 'I'},
        {"txn", required_argument, NULL, 'X'},
        {"max-in-flight", required_argument, NULL, 'F'},
        {"property", required_argument, NULL, 'P'},
        {NULL, 0, NULL, 0}};
    int ch;
    char *end;
    while ((ch = getopt_long(argc, argv, "b:t:n:s:a:l:T:qd:hz:r:LEp:R:c:IF:X:P:", longopts, NULL)) != -1) {
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
        case 'r': o.rate = strtod(optarg, &end); break;
        case 'L': o.latency = 1; break;
        case 'E': o.e2e = 1; break;
        case 'I': o.idempotent = 1; break;
        case 'X': o.txn = atoll(optarg); break;
        case 'F': o.max_in_flight = (int)strtol(optarg, &end, 10); break;
        case 'p': o.partitions = (int)strtol(optarg, &end, 10); break;
        case 'R': o.replication = (int)strtol(optarg, &end, 10); break;
        case 'c':
            if (o.nconfigs == (int)(sizeof o.configs / sizeof o.configs[0])) {
                fprintf(stderr, "strata-loadgen: at most 16 --config\n");
                return 2;
            }
            o.configs[o.nconfigs++] = optarg;
            break;
        case 'P':
            if (o.nprops == (int)(sizeof o.props / sizeof o.props[0])) {
                fprintf(stderr, "strata-loadgen: at most 16 --property\n");
                return 2;
            }
            o.props[o.nprops++] = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (strchr("nslTrpRF", ch) && (errno || *end || end == optarg)) {
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
    if (o.rate < 0 || o.partitions <= 0 || o.replication <= 0 || (o.e2e && o.size < E2E_HDR)) {
        fprintf(stderr, "strata-loadgen: --rate must be >= 0, --partitions and "
                        "--replication-factor positive, --size >= 16 with --e2e\n");
        return 2;
    }
    if ((o.idempotent || o.txn > 0) && strcmp(o.acks, "all")) {
        fprintf(stderr, "strata-loadgen: --idempotent and --txn need --acks all\n");
        return 2;
    }
    if (strcmp(o.acks, "0") && strcmp(o.acks, "1") && strcmp(o.acks, "all")) {
        fprintf(stderr, "strata-loadgen: --acks must be 0, 1 or all\n");
        return 2;
    }
    if (strcmp(o.mode, "produce") == 0) return run_produce(&o);
    if (strcmp(o.mode, "consume") == 0) return run_consume(&o);
    if (strcmp(o.mode, "topic") == 0) return run_topic(&o);
    fprintf(stderr, "strata-loadgen: unknown mode '%s'\n", o.mode);
    usage(stderr);
    return 2;
}

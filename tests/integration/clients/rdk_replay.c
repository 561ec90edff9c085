/*
 * rdk_replay.c - the replaying consumer of the tiering tests: reads every
 * partition of a topic from an offset up to the high watermark it had when
 * the replay began, with librdkafka, and writes what it got.
 *
 * usage: rdk_replay -b BOOTSTRAP -t TOPIC -d OUTDIR [-o OFFSET] [-p N]
 *            [-r BYTES_PER_S] [-T TIMEOUT_S] [-X key=value ...]
 *
 * OUTDIR/<partition> gets one line "offset value\n" per message, in the
 * order the client delivered them (the format of kcat -f '%o %s\n'), so a
 * driver compares it with what it produced.  OFFSET is where every
 * partition starts (default: the beginning, -2); -p limits the replay to
 * partitions 0..N-1 (default: all of the topic).  -r caps the rate so that
 * a test can do something to the broker while a replay is under way.
 *
 * Errors the broker answers for a fetch are handled inside librdkafka when
 * they are retriable (KAFKA_STORAGE_ERROR among them: it backs off and
 * fetches again); they reach the application only through the client's
 * log, so with -X debug=fetch the log lines that name the storage error
 * are counted (and the first ones printed on stderr).  Errors delivered
 * to the application are counted apart.
 *
 * Prints one line at the end:
 *   replayed N bytes B seconds S mb_per_s R errors E storage_errors F
 * and exits 0 when every partition reached its end, 1 on a timeout, 2 on
 * bad usage or a client that cannot start.
 */
#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PARTS 256

static long storage_errors;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "rdk_replay: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(2);
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char err[512];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(k, err);
}

/* librdkafka's own threads call this; storage_errors is only read after
 * the client is destroyed. */
static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    (void)rk;
    if (strstr(buf, rd_kafka_err2str(RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR))) {
        long n = __atomic_add_fetch(&storage_errors, 1, __ATOMIC_RELAXED);
        if (n <= 5) fprintf(stderr, "rdk_replay: client log %d %s: %s\n", level, fac, buf);
        return;
    }
    if (level <= 4) fprintf(stderr, "rdk_replay: client log %d %s: %s\n", level, fac, buf);
}

int main(int argc, char **argv) {
    const char *bootstrap = NULL, *topic = NULL, *outdir = NULL;
    long long start = RD_KAFKA_OFFSET_BEGINNING;
    long nparts = -1, timeout_s = 300;
    double rate = 0;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* assign() takes no part in a group, but librdkafka 2.0 wants a
     * group.id for a consumer; nothing is committed. */
    conf_set(conf, "group.id", "rdk_replay");
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "enable.auto.offset.store", "false");
    conf_set(conf, "enable.partition.eof", "false");
    conf_set(conf, "auto.offset.reset", "error");
    conf_set(conf, "client.id", "rdk_replay");
    int opt;
    while ((opt = getopt(argc, argv, "b:t:d:o:p:r:T:X:")) != -1) {
        switch (opt) {
        case 'b': bootstrap = optarg; break;
        case 't': topic = optarg; break;
        case 'd': outdir = optarg; break;
        case 'o': start = strtoll(optarg, NULL, 10); break;
        case 'p': nparts = strtol(optarg, NULL, 10); break;
        case 'r': rate = strtod(optarg, NULL); break;
        case 'T': timeout_s = strtol(optarg, NULL, 10); break;
        case 'X': {
            char *eq = strchr(optarg, '=');
            if (!eq) die("-X wants key=value", optarg);
            *eq = '\0';
            conf_set(conf, optarg, eq + 1);
            break;
        }
        default:
            die("usage: -b BOOTSTRAP -t TOPIC -d OUTDIR [-o OFFSET] [-p N] [-r BYTES_PER_S] "
                "[-T TIMEOUT_S] [-X k=v]", NULL);
        }
    }
    if (!bootstrap || !topic || !outdir || nparts == 0 || nparts > MAX_PARTS || rate < 0)
        die("usage: -b BOOTSTRAP -t TOPIC -d OUTDIR [-o OFFSET] [-p N] [-r BYTES_PER_S] "
            "[-T TIMEOUT_S] [-X k=v]", NULL);
    conf_set(conf, "bootstrap.servers", bootstrap);
    rd_kafka_conf_set_log_cb(conf, on_log);

    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    rd_kafka_poll_set_consumer(rk);

    if (nparts < 0) {
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
        rd_kafka_topic_destroy(rkt);
        if (e || md->topic_cnt != 1 || md->topics[0].err)
            die("metadata", rd_kafka_err2str(e ? e : md->topics[0].err));
        nparts = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
        if (nparts < 1 || nparts > MAX_PARTS) die("metadata", "unexpected partition count");
    }

    /* Where each partition ends: its high watermark now. */
    static int64_t end[MAX_PARTS], next[MAX_PARTS];
    static FILE *out[MAX_PARTS];
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)nparts);
    int open_parts = 0;
    for (int p = 0; p < nparts; p++) {
        int64_t lo, hi;
        rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 20000);
        if (e) die("query_watermark_offsets", rd_kafka_err2str(e));
        end[p] = hi;
        next[p] = start >= 0 ? start : lo;
        char path[4096];
        snprintf(path, sizeof path, "%s/%d", outdir, p);
        out[p] = fopen(path, "w");
        if (!out[p]) die(path, strerror(errno));
        if (next[p] < end[p]) {
            rd_kafka_topic_partition_list_add(l, topic, p)->offset = start;
            open_parts++;
        }
    }
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e) die("assign", rd_kafka_err2str(e));

    double t0 = now_s(), deadline = t0 + (double)timeout_s;
    long long msgs = 0, bytes = 0, errors = 0;
    while (open_parts > 0 && now_s() < deadline) {
        if (rate > 0) {
            double ahead = (double)bytes / rate - (now_s() - t0);
            if (ahead > 0) usleep((useconds_t)(ahead > 0.1 ? 100000 : ahead * 1e6));
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        if (m->err) {
            if (errors++ < 10) fprintf(stderr, "rdk_replay: consumer error: %s\n", rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            continue;
        }
        int p = m->partition;
        if (p < 0 || p >= nparts || m->offset >= end[p]) {
            rd_kafka_message_destroy(m);
            continue; /* past the end taken at the start */
        }
        fprintf(out[p], "%" PRId64 " ", m->offset);
        if (m->len) fwrite(m->payload, 1, m->len, out[p]);
        fputc('\n', out[p]);
        msgs++;
        bytes += (long long)m->len;
        next[p] = m->offset + 1;
        if (next[p] >= end[p]) open_parts--;
        rd_kafka_message_destroy(m);
    }
    double secs = now_s() - t0;
    int rc = 0;
    for (int p = 0; p < nparts; p++) {
        if (next[p] < end[p]) {
            fprintf(stderr, "rdk_replay: timed out: partition %d at offset %" PRId64 " of %" PRId64 "\n",
                    p, next[p], end[p]);
            rc = 1;
        }
        if (fclose(out[p]) != 0) die("writing the output", strerror(errno));
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    printf("replayed %lld bytes %lld seconds %.3f mb_per_s %.1f errors %lld storage_errors %ld\n",
           msgs, bytes, secs, secs > 0 ? (double)bytes / 1e6 / secs : 0.0, errors,
           __atomic_load_n(&storage_errors, __ATOMIC_RELAXED));
    return rc;
}

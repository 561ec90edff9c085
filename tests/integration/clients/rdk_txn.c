/*
 * rdk_txn.c - librdkafka's transactional producer and read_committed
 * consumer for the transaction tests.
 *
 *   rdk_txn produce -b B -t TOPIC -i TXN_ID [-n TXNS] [-m MSGS] [-a ABORT_EVERY]
 *                   [-p PARTITIONS] [-k KEYS] [-f] [-X key=value ...]
 *       TXNS transactions of MSGS messages each, message j of
 *       transaction k to partition j % PARTITIONS with value "k j"; every
 *       ABORT_EVERY-th transaction (k % ABORT_EVERY == ABORT_EVERY - 1)
 *       is aborted, the others committed.  -k: message j has key
 *       "kK" with K = j % KEYS (compacted topics).  -f: flush before the
 *       transaction ends, so an aborted one's messages are in the log
 *       (librdkafka otherwise drops what it has not sent yet).  Prints "COMMITTED k" or
 *       "ABORTED k" as each ends (an abortable error aborts the
 *       transaction: "ABORTED k"), "FATAL name: reason" and exit 3 on a
 *       fatal error (fenced).
 *
 *   rdk_txn ctp -b B -i TXN_ID -g GROUP -s SRC -t DST [-n MAX] [-a ABORT_EVERY] [-f]
 *       consume-transform-produce: a read_committed consumer of SRC in
 *       GROUP; each polled message goes to DST as "x VALUE" inside a
 *       transaction that also commits the consumer's position with
 *       send_offsets_to_transaction, one transaction per poll batch of up
 *       to 10 messages; every ABORT_EVERY-th is aborted and the consumer
 *       rewinds to its committed offsets.  Stops after MAX messages were
 *       committed or 10 s without input.  Prints "COMMITTED n" per
 *       committed transaction (n messages) and "ABORTED n".
 *
 *   rdk_txn consume -b B -t TOPIC [-p PARTITIONS] [-I IDLE_MS] [-K] [-X key=value ...]
 *       reads every partition from the start with isolation.level
 *       read_committed (unless -X says otherwise) until IDLE_MS pass
 *       without a message; prints "p offset value" per message (with -K
 *       "p offset key value").
 *
 *   rdk_txn zombie -b B -t TOPIC -i TXN_ID
 *       two producers with the same transactional id: the first begins a
 *       transaction and produces, the second's init_transactions fences
 *       it, the first's commit must fail fatally.  Prints "FENCED name"
 *       (exit 0) or "NOT FENCED" (exit 1), then the second commits its
 *       own transaction ("SECOND COMMITTED").
 */
#include <librdkafka/rdkafka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_MS 60000

static const char *brokers, *topic, *txn_id, *group, *src;
static int ntxns = 10, nmsgs = 10, abort_every = 0, nparts = 1, idle_ms = 5000, max_msgs = 0;
static int nkeys = 0, flush_first = 0, print_keys = 0;
static const char *xprops[32];
static int nx;

static void die(const char *what, rd_kafka_error_t *e) {
    printf("FATAL %s: %s: %s\n", what, rd_kafka_error_name(e), rd_kafka_error_string(e));
    fflush(stdout);
    exit(3);
}

static rd_kafka_conf_t *conf_new(void) {
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", brokers, err, sizeof err);
    for (int i = 0; i < nx; i++) {
        char kv[512];
        snprintf(kv, sizeof kv, "%s", xprops[i]);
        char *eq = strchr(kv, '=');
        if (!eq) continue;
        *eq = 0;
        if (rd_kafka_conf_set(c, kv, eq + 1, err, sizeof err) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "%s\n", err);
            exit(2);
        }
    }
    return c;
}

static rd_kafka_t *producer_new(const char *id) {
    char err[512];
    rd_kafka_conf_t *c = conf_new();
    rd_kafka_conf_set(c, "transactional.id", id, err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "producer: %s\n", err);
        exit(2);
    }
    rd_kafka_error_t *e = rd_kafka_init_transactions(rk, TIMEOUT_MS);
    if (e) die("init_transactions", e);
    return rk;
}

static void produce_keyed(rd_kafka_t *rk, const char *to, int32_t partition, const char *key,
                          const char *value) {
    for (;;) {
        rd_kafka_resp_err_t err =
            rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(to), RD_KAFKA_V_PARTITION(partition),
                              RD_KAFKA_V_KEY((void *)key, key ? strlen(key) : 0),
                              RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(rk, 10);
            continue;
        }
        if (err) fprintf(stderr, "produce: %s\n", rd_kafka_err2name(err));
        return;
    }
}

static void produce_one(rd_kafka_t *rk, const char *to, int32_t partition, const char *value) {
    produce_keyed(rk, to, partition, NULL, value);
}

/* Commit (or abort); 1 committed, 0 aborted.  Retriable errors retry,
 * abortable ones abort, fatal ones end the run. */
static int end_txn(rd_kafka_t *rk, int commit) {
    for (;;) {
        rd_kafka_error_t *e = commit ? rd_kafka_commit_transaction(rk, TIMEOUT_MS)
                                     : rd_kafka_abort_transaction(rk, TIMEOUT_MS);
        if (!e) return commit;
        if (rd_kafka_error_is_fatal(e)) die(commit ? "commit" : "abort", e);
        if (rd_kafka_error_txn_requires_abort(e)) {
            fprintf(stderr, "commit: %s (aborting)\n", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            commit = 0;
            continue;
        }
        fprintf(stderr, "%s: %s (retrying)\n", commit ? "commit" : "abort", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
}

static int do_produce(void) {
    rd_kafka_t *rk = producer_new(txn_id);
    for (int k = 0; k < ntxns; k++) {
        rd_kafka_error_t *e = rd_kafka_begin_transaction(rk);
        if (e) die("begin_transaction", e);
        for (int j = 0; j < nmsgs; j++) {
            char v[64], key[32];
            snprintf(v, sizeof v, "%d %d", k, j);
            snprintf(key, sizeof key, "k%d", nkeys > 0 ? j % nkeys : 0);
            produce_keyed(rk, topic, j % nparts, nkeys > 0 ? key : NULL, v);
        }
        if (flush_first) rd_kafka_flush(rk, TIMEOUT_MS);
        int want_commit = !(abort_every > 0 && k % abort_every == abort_every - 1);
        int committed = end_txn(rk, want_commit);
        printf("%s %d\n", committed ? "COMMITTED" : "ABORTED", k);
        fflush(stdout);
    }
    rd_kafka_destroy(rk);
    return 0;
}

static rd_kafka_t *consumer_new(const char *grp, int committed) {
    char err[512];
    rd_kafka_conf_t *c = conf_new();
    for (int i = 0; i < nx; i++) /* -X isolation.level=... wins */
        if (!strncmp(xprops[i], "isolation.level=", 16)) committed = 0;
    if (committed) rd_kafka_conf_set(c, "isolation.level", "read_committed", err, sizeof err);
    rd_kafka_conf_set(c, "group.id", grp ? grp : "rdk-txn-reader", err, sizeof err);
    rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof err);
    rd_kafka_conf_set(c, "auto.offset.reset", "earliest", err, sizeof err);
    rd_kafka_conf_set(c, "enable.partition.eof", "false", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "consumer: %s\n", err);
        exit(2);
    }
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

static int do_consume(void) {
    /* read_committed unless -X isolation.level=... comes later and wins */
    rd_kafka_t *rk = consumer_new(NULL, 1);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(nparts);
    for (int p = 0; p < nparts; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long last = 0, now = 0;
    for (;;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        now = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (!m) {
            if (now - last > idle_ms) break;
            continue;
        }
        if (m->err) {
            fprintf(stderr, "consume: %s\n", rd_kafka_message_errstr(m));
        } else {
            if (print_keys)
                printf("%d %lld %.*s %.*s\n", (int)m->partition, (long long)m->offset,
                       (int)m->key_len, m->key ? (const char *)m->key : "", (int)m->len,
                       (const char *)m->payload);
            else
                printf("%d %lld %.*s\n", (int)m->partition, (long long)m->offset, (int)m->len,
                       (const char *)m->payload);
            last = now;
        }
        rd_kafka_message_destroy(m);
    }
    fflush(stdout);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}

/* Rewind the consumer to the group's committed offsets (after an abort). */
static void rewind_to_committed(rd_kafka_t *c) {
    rd_kafka_topic_partition_list_t *a = NULL;
    if (rd_kafka_assignment(c, &a) || !a) return;
    rd_kafka_committed(c, a, TIMEOUT_MS);
    for (int i = 0; i < a->cnt; i++)
        if (a->elems[i].offset < 0) a->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_error_t *e = rd_kafka_seek_partitions(c, a, TIMEOUT_MS);
    if (e) {
        fprintf(stderr, "seek: %s\n", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
    rd_kafka_topic_partition_list_destroy(a);
}

static int do_ctp(void) {
    rd_kafka_t *p = producer_new(txn_id);
    rd_kafka_t *c = consumer_new(group, 1);
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, src, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(c, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    int done = 0, ntx = 0;
    time_t last = time(NULL);
    while (!max_msgs || done < max_msgs) {
        rd_kafka_message_t *batch[10];
        int n = 0;
        while (n < 10) {
            rd_kafka_message_t *m = rd_kafka_consumer_poll(c, n ? 50 : 500);
            if (!m) break;
            if (m->err) {
                rd_kafka_message_destroy(m);
                continue;
            }
            batch[n++] = m;
        }
        if (!n) {
            if (time(NULL) - last > 10) break;
            continue;
        }
        last = time(NULL);
        rd_kafka_error_t *e = rd_kafka_begin_transaction(p);
        if (e) die("begin_transaction", e);
        for (int i = 0; i < n; i++) {
            char v[256];
            snprintf(v, sizeof v, "x %.*s", (int)batch[i]->len, (const char *)batch[i]->payload);
            produce_one(p, topic, batch[i]->partition % nparts, v);
        }
        rd_kafka_topic_partition_list_t *pos = NULL;
        rd_kafka_assignment(c, &pos);
        rd_kafka_position(c, pos);
        rd_kafka_consumer_group_metadata_t *gm = rd_kafka_consumer_group_metadata(c);
        e = rd_kafka_send_offsets_to_transaction(p, pos, gm, TIMEOUT_MS);
        rd_kafka_consumer_group_metadata_destroy(gm);
        rd_kafka_topic_partition_list_destroy(pos);
        int commit = !(abort_every > 0 && ntx % abort_every == abort_every - 1);
        if (flush_first) rd_kafka_flush(p, TIMEOUT_MS);
        if (e) {
            if (rd_kafka_error_is_fatal(e)) die("send_offsets_to_transaction", e);
            fprintf(stderr, "send_offsets: %s\n", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            commit = 0;
        }
        int committed = end_txn(p, commit);
        ntx++;
        printf("%s %d\n", committed ? "COMMITTED" : "ABORTED", n);
        fflush(stdout);
        if (committed) done += n;
        else rewind_to_committed(c);
        for (int i = 0; i < n; i++) rd_kafka_message_destroy(batch[i]);
    }
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
    rd_kafka_destroy(p);
    return 0;
}

static int do_zombie(void) {
    rd_kafka_t *a = producer_new(txn_id);
    rd_kafka_error_t *e = rd_kafka_begin_transaction(a);
    if (e) die("begin_transaction", e);
    produce_one(a, topic, 0, "zombie");
    rd_kafka_flush(a, 10000);
    rd_kafka_t *b = producer_new(txn_id); /* fences a */
    e = rd_kafka_commit_transaction(a, TIMEOUT_MS);
    int fenced = e && rd_kafka_error_is_fatal(e);
    if (fenced) printf("FENCED %s\n", rd_kafka_error_name(e));
    else printf("NOT FENCED %s\n", e ? rd_kafka_error_name(e) : "(committed)");
    if (e) rd_kafka_error_destroy(e);
    e = rd_kafka_begin_transaction(b);
    if (e) die("begin_transaction (second)", e);
    produce_one(b, topic, 0, "second");
    if (end_txn(b, 1)) printf("SECOND COMMITTED\n");
    fflush(stdout);
    rd_kafka_destroy(a);
    rd_kafka_destroy(b);
    return fenced ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: rdk_txn produce|ctp|consume|zombie [options]\n");
        return 2;
    }
    const char *mode = argv[1];
    int opt;
    optind = 2;
    while ((opt = getopt(argc, argv, "b:t:i:n:m:a:p:g:s:I:X:k:fK")) != -1) {
        switch (opt) {
        case 'b': brokers = optarg; break;
        case 't': topic = optarg; break;
        case 'i': txn_id = optarg; break;
        case 'n': ntxns = max_msgs = atoi(optarg); break;
        case 'm': nmsgs = atoi(optarg); break;
        case 'a': abort_every = atoi(optarg); break;
        case 'p': nparts = atoi(optarg); break;
        case 'g': group = optarg; break;
        case 's': src = optarg; break;
        case 'I': idle_ms = atoi(optarg); break;
        case 'k': nkeys = atoi(optarg); break;
        case 'f': flush_first = 1; break;
        case 'K': print_keys = 1; break;
        case 'X':
            if (nx < 32) xprops[nx++] = optarg;
            break;
        default: return 2;
        }
    }
    if (!brokers || !topic) {
        fprintf(stderr, "-b and -t are required\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "produce") && txn_id) return do_produce();
    if (!strcmp(mode, "consume")) return do_consume();
    if (!strcmp(mode, "ctp") && txn_id && group && src) return do_ctp();
    if (!strcmp(mode, "zombie") && txn_id) return do_zombie();
    fprintf(stderr, "bad mode or missing options\n");
    return 2;
}

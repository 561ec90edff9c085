"""
kafka-python (Debian's python3-kafka) against a real stratad.  Run it with
Debian's /usr/bin/python3, which has the package and its codecs
(python3-snappy, python3-lz4, python3-zstandard).

  1. Bootstrap: kafka-python probes the broker with ApiVersions v0 and
     Metadata v0 on one connection; then metadata of the cluster.
  2. Admin: create a topic, describe it and the cluster, list topics.
  3. Produce with every codec kafka-python has (none, gzip, snappy, lz4,
     zstd); a consumer reads back the same keys, values and headers.
  4. offsets_for_times finds the first record at or after a timestamp.
  5. A group of two members (threads, synchronous commits after each
     poll): the partitions are split between them, every record is read
     once; both leave, the committed offsets are the log end; two new
     members resume there and read only what came after.
  6. Admin group calls: list, describe and the committed offsets.
  7. The API versions kafka-python sent (the broker's net debug log) are
     printed, and none was refused.
"""
import os
import re
import sys
import threading
import time

try:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
except ImportError:
    print("FAIL: kafka-python is missing (Debian's python3-kafka; run with /usr/bin/python3)")
    sys.exit(1)

from strata_harness import Broker, check, fail

TOPIC, GROUP_TOPIC, GROUP = "kp-codecs", "kp-group", "kp-group-1"
CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 50
GROUP_PARTS, FIRST, SECOND = 4, 200, 80
T0 = time.monotonic()


def step(msg):
    print("[%5.1fs] %s" % (time.monotonic() - T0, msg), flush=True)


class Member(threading.Thread):
    """One group member: polls, remembers what it read, commits after each
    poll that returned records."""

    def __init__(self, bootstrap, name):
        super().__init__(daemon=True)
        self.name_ = name
        self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, client_id=name,
                               enable_auto_commit=False, auto_offset_reset="earliest",
                               session_timeout_ms=6000, heartbeat_interval_ms=500,
                               max_poll_records=20, request_timeout_ms=30000)
        self.c.subscribe([GROUP_TOPIC])
        self.read = []  # (partition, offset, value)
        self.assigned = set()
        self.stop_ = threading.Event()
        self.error = None
        self.lock = threading.Lock()

    def run(self):
        try:
            while not self.stop_.is_set():
                got = self.c.poll(timeout_ms=200)
                with self.lock:
                    self.assigned = {tp.partition for tp in self.c.assignment()}
                    for tp, recs in got.items():
                        for r in recs:
                            self.read.append((tp.partition, r.offset, r.value))
                if got:
                    self.c.commit()
            self.c.close()  # LeaveGroup
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.error = e

    def snapshot(self):
        with self.lock:
            return set(self.assigned), list(self.read)


def wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    fail("timed out (%ds) waiting for %s" % (timeout, what))


def group_round(bootstrap, producer, count, start_index):
    """Two members; count records produced once both own partitions.
    Returns what each read."""
    members = [Member(bootstrap, "kp-member-%d" % i) for i in range(2)]
    for m in members:
        m.start()

    def split():
        a = [m.snapshot()[0] for m in members]
        return all(a) and not (a[0] & a[1]) and len(a[0] | a[1]) == GROUP_PARTS

    wait(split, 40, "the two members to split %d partitions" % GROUP_PARTS)
    for m in members:
        check(m.error is None, "%s failed: %r" % (m.name_, m.error))
    step("group split: %s" % [sorted(m.snapshot()[0]) for m in members])
    for i in range(start_index, start_index + count):
        producer.send(GROUP_TOPIC, key=b"g%d" % i, value=b"g%d" % i, partition=i % GROUP_PARTS)
    producer.flush()
    wait(lambda: sum(len(m.snapshot()[1]) for m in members) >= count, 40,
         "the members to read %d records" % count)
    for m in members:
        m.stop_.set()
    for m in members:
        m.join(30)
        check(not m.is_alive(), "%s did not stop" % m.name_)
        check(m.error is None, "%s failed: %r" % (m.name_, m.error))
    out = []
    for m in members:
        assigned, read = m.snapshot()
        for p, _o, _v in read:
            check(p in assigned, "%s read partition %d it does not own (%s)" % (m.name_, p, assigned))
        out.append(read)
    return out


b = Broker({"logger.debug": "net", "group.initial.rebalance.delay.ms": "300"}).start()
try:
    # 1-2: bootstrap (version probe), admin
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, client_id="kp-admin",
                             request_timeout_ms=10000)
    step("admin connected; kafka-python takes the broker for %s" % (admin.config["api_version"],))
    res = admin.create_topics([NewTopic(TOPIC, 3, 1), NewTopic(GROUP_TOPIC, GROUP_PARTS, 1)])
    check(all(e == 0 for _t, e, *_ in res.topic_errors), "create_topics: %s" % (res.topic_errors,))
    topics = admin.describe_topics([TOPIC, GROUP_TOPIC])
    by_name = {t["topic"]: t for t in topics}
    check(len(by_name[TOPIC]["partitions"]) == 3 and by_name[TOPIC]["error_code"] == 0,
          "describe_topics %s: %s" % (TOPIC, by_name.get(TOPIC)))
    check(len(by_name[GROUP_TOPIC]["partitions"]) == GROUP_PARTS, "describe_topics %s" % GROUP_TOPIC)
    cluster = admin.describe_cluster()
    check(len(cluster["brokers"]) == 1 and cluster["brokers"][0]["port"] == b.port,
          "describe_cluster brokers: %s" % cluster)
    check(cluster.get("controller_id") == cluster["brokers"][0]["node_id"], "controller: %s" % cluster)
    check({TOPIC, GROUP_TOPIC} <= set(admin.list_topics()), "list_topics")
    step("admin: created, described (%d brokers, controller %s), listed" %
         (len(cluster["brokers"]), cluster.get("controller_id")))

    # 3: every codec
    sent = {}
    stamps = []
    for codec in CODECS:
        p = KafkaProducer(bootstrap_servers=b.bootstrap, compression_type=codec, linger_ms=20,
                          acks="all", client_id="kp-producer-%s" % codec)
        futs = []
        for i in range(PER_CODEC):
            k = ("%s-%03d" % (codec, i)).encode()
            v = (("value %s %d " % (codec, i)) * 20).encode()
            h = [("codec", (codec or "none").encode())]
            futs.append(p.send(TOPIC, key=k, value=v, headers=h))
            sent[k] = (v, h)
        p.flush()
        for f in futs:
            md = f.get(timeout=30)
            check(md.offset >= 0, "produce %s: %s" % (codec, md))
        stamps.append((codec, futs[0].get().timestamp, futs[0].get().partition, futs[0].get().offset))
        p.close()
        time.sleep(0.02)  # timestamps of codecs apart, for offsets_for_times
    step("produced %d records with codecs %s" % (len(sent), CODECS))

    cons = KafkaConsumer(TOPIC, bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                         enable_auto_commit=False, consumer_timeout_ms=5000, client_id="kp-reader")
    got = {}
    for r in cons:
        got[r.key] = (r.value, [(k, v) for k, v in r.headers])
        if len(got) == len(sent):
            break
    check(len(got) == len(sent), "consumer read %d of %d records" % (len(got), len(sent)))
    for k, (v, h) in sent.items():
        check(got.get(k) == (v, h), "record %r read back differently" % k)
    step("consumer read every record back with the same key, value and headers")

    # 4: offsets for times
    for codec, ts, part, off in stamps:
        tp = TopicPartition(TOPIC, part)
        found = cons.offsets_for_times({tp: ts})[tp]
        # earlier codecs' records are older: the first of this codec is it
        check(found is not None and found.offset == off and found.timestamp == ts,
              "offsets_for_times(%s, %d) = %s, want offset %d" % (codec, ts, found, off))
    far = cons.offsets_for_times({TopicPartition(TOPIC, 0): int(time.time() * 1000) + 3600000})
    check(far[TopicPartition(TOPIC, 0)] is None, "offsets_for_times in the future: %s" % far)
    ends = cons.end_offsets([TopicPartition(TOPIC, p) for p in range(3)])
    check(sum(ends.values()) == len(sent), "end_offsets %s" % ends)
    cons.close()
    step("offsets_for_times and end_offsets agree with what was produced")

    # 5: a two-member group, commits, resume
    prod = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", client_id="kp-group-producer")
    first = group_round(b.bootstrap, prod, FIRST, 0)
    values = sorted(v for r in first for _p, _o, v in r)
    check(values == sorted(b"g%d" % i for i in range(FIRST)),
          "round 1 read %d records, %d distinct, want %d" % (len(values), len(set(values)), FIRST))
    check(all(first), "each member read records: %s" % [len(r) for r in first])
    step("round 1: members read %s records, each once" % [len(r) for r in first])

    committed = admin.list_consumer_group_offsets(GROUP)
    want = {p: FIRST // GROUP_PARTS for p in range(GROUP_PARTS)}
    have = {tp.partition: om.offset for tp, om in committed.items() if tp.topic == GROUP_TOPIC}
    check(have == want, "committed offsets %s, want %s" % (have, want))
    step("committed offsets are the log end: %s" % have)

    second = group_round(b.bootstrap, prod, SECOND, FIRST)
    values = sorted(v for r in second for _p, _o, v in r)
    check(values == sorted(b"g%d" % i for i in range(FIRST, FIRST + SECOND)),
          "round 2 (resume) read %d records, want exactly the %d new ones" % (len(values), SECOND))
    step("round 2: new members resumed at the committed offsets: %s records" % [len(r) for r in second])
    prod.close()

    # 6: admin group calls
    groups = admin.list_consumer_groups()
    check((GROUP, "consumer") in groups, "list_consumer_groups: %s" % groups)
    desc = admin.describe_consumer_groups([GROUP])
    check(desc[0].group == GROUP and desc[0].state == "Empty", "describe_consumer_groups: %s" % desc)
    admin.close()
    step("admin: group listed and described (%s)" % desc[0].state)

    # 7: what was sent
    used = sorted(set(re.findall(r"net: (\w+) v(\d+) correlation", b.log_text())),
                  key=lambda x: (x[0], int(x[1])))
    print("kafka-python sent: " + ", ".join("%s v%s" % u for u in used), flush=True)
    refused = re.findall(r"closing connection from [^:]+:\d+: (.*)", b.log_text())
    check(not refused, "the broker closed connections: %s" % refused[:5])
except SystemExit:
    print(b.log_tail(40))
    raise
except Exception as e:  # noqa: BLE001
    print(b.log_tail(40))
    fail("%s: %r" % (type(e).__name__, e))
finally:
    rc = b.stop()
    if rc != 0:
        print(b.log_tail(60))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

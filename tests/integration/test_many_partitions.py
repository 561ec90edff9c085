"""
Many partitions on one broker whose process may open 256 descriptors.

  1. 3,000 partitions of one topic are created in batches (CreateTopics with
     1,000, then CreatePartitions to 2,000 and 3,000): the broker keeps its
     open descriptors (counted in /proc/<pid>/fd) below the limit and below
     its cache of open segment files (log.max.open.files, by default half
     the descriptor limit) plus what its sockets and threads need.
  2. Produce and fetch (kcat) to partitions spread over the whole range.
  3. A restart with that many partitions keeps every partition online
     (Metadata: no partition error, this broker leads each one) and the
     records written before it are still there.
  4. A request for more partitions than the broker can hold gets a clear
     error: CreatePartitions to 100,000 (with the 10 partitions of a second
     topic, beyond max.broker.partitions, 100,000 by default)
     and CreateTopics with 10,001 partitions (Kafka's per-request bound)
     answer POLICY_VIOLATION with a message naming the bound (CreatePartitions
     to 2^31 - 1 as fast as any), and the broker keeps serving.
"""
import os
import resource
import struct
import time

from kwire import Conn
from strata_harness import Broker, check, fail, kcat, kstr

NOFILE = 256
TOPIC = "wide"
STEPS = [1000, 2000, 3000]
SAMPLE = [0, 1, 499, 999, 1000, 1777, 2500, 2999]
POLICY_VIOLATION = 44


def limit_fds():
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def open_fds(b):
    return len(os.listdir("/proc/%d/fd" % b.proc.pid))


def create_topic(c, name, partitions):
    """CreateTopics v1 for one topic: (error code, message)."""
    body = struct.pack(">i", 1) + kstr(name) + struct.pack(">ihii", partitions, 1, 0, 0)
    body += struct.pack(">ib", 60000, 0)
    r = c.call(19, 1, body)
    r.take(">i")
    r.string()
    return r.take(">h"), r.string()


def create_partitions(c, name, count):
    """CreatePartitions v0 for one topic: (error code, message)."""
    body = struct.pack(">i", 1) + kstr(name) + struct.pack(">ii", count, -1)
    body += struct.pack(">ib", 60000, 0)
    r = c.call(37, 0, body)
    r.take(">i")  # throttle
    r.take(">i")
    r.string()
    return r.take(">h"), r.string()


def metadata(c, name):
    """Metadata v1 for one topic: (topic error, [(partition, error, leader)])."""
    r = c.call(3, 1, struct.pack(">i", 1) + kstr(name))
    for _ in range(r.take(">i")):
        r.take(">i")
        r.string()
        r.take(">i")
        r.string()
    r.take(">i")  # controller
    out = None
    for _ in range(r.take(">i")):
        terr = r.take(">h")
        r.string()
        r.take(">b")
        parts = []
        for _ in range(r.take(">i")):
            perr, idx, leader = r.take(">hii")
            r.take(">%di" % r.take(">i"))
            r.take(">%di" % r.take(">i"))
            parts.append((idx, perr, leader))
        out = (terr, parts)
    return out


def produce(b, p, values):
    kcat(b, "-P", "-t", TOPIC, "-p", str(p), input=("\n".join(values) + "\n").encode(), timeout=60)


def consume(b, p):
    _, out, _ = kcat(b, "-C", "-t", TOPIC, "-p", str(p), "-o", "beginning", "-e", "-q", timeout=60)
    return out.decode().splitlines()


def check_all_online(c, n, when):
    terr, parts = metadata(c, TOPIC)
    check(terr == 0, "%s: Metadata for %s answered error %d" % (when, TOPIC, terr))
    check(len(parts) == n, "%s: %d partitions in Metadata, want %d" % (when, len(parts), n))
    bad = [(i, e, l) for i, e, l in parts if e != 0 or l != 1]
    check(not bad, "%s: %d partitions offline or led elsewhere, e.g. %s" % (when, len(bad), bad[:5]))


b = Broker()
b.preexec_fn = limit_fds
b.start()
try:
    c = Conn(b.port, timeout=120)
    base = open_fds(b)
    print("descriptors at start: %d (limit %d)" % (base, NOFILE), flush=True)

    # 1. create in batches (and a small second topic)
    err, msg = create_topic(c, "side", 10)
    check(err == 0, "CreateTopics side: error %d %s" % (err, msg))
    t0 = time.time()
    err, msg = create_topic(c, TOPIC, STEPS[0])
    check(err == 0, "CreateTopics %s with %d partitions: error %d %s" % (TOPIC, STEPS[0], err, msg))
    for n in STEPS[1:]:
        err, msg = create_partitions(c, TOPIC, n)
        check(err == 0, "CreatePartitions %s to %d: error %d %s" % (TOPIC, n, err, msg))
    fds = open_fds(b)
    print("created %d partitions in %.1f s; %d descriptors open" % (STEPS[-1], time.time() - t0, fds),
          flush=True)
    check(fds < NOFILE, "%d descriptors open, limit %d" % (fds, NOFILE))
    check(fds <= NOFILE // 2 + base + 8,
          "%d descriptors open: more than the file cache (%d) and the %d at start" % (fds, NOFILE // 2, base))
    check_all_online(c, STEPS[-1], "after creating")

    # 2. produce and fetch across the range
    for p in SAMPLE:
        produce(b, p, ["p%d-r%d" % (p, i) for i in range(3)])
    for p in SAMPLE:
        got = consume(b, p)
        check(got == ["p%d-r%d" % (p, i) for i in range(3)], "partition %d read back %s" % (p, got))
    fds = open_fds(b)
    print("after produce and fetch on %d partitions: %d descriptors open" % (len(SAMPLE), fds), flush=True)
    check(fds <= NOFILE // 2 + base + 8, "%d descriptors open after produce and fetch" % fds)

    # 3. restart: every partition online, the records kept
    c.close()
    check(b.stop() == 0, "stratad did not stop cleanly")
    t0 = time.time()
    b.start(timeout=60)
    print("restarted with %d partitions in %.1f s" % (STEPS[-1], time.time() - t0), flush=True)
    check("cannot open log" not in b.log_text(), "a log failed to open:\n" + b.log_tail())
    c = Conn(b.port, timeout=120)
    check_all_online(c, STEPS[-1], "after the restart")
    for p in SAMPLE:
        produce(b, p, ["p%d-after" % p])
        got = consume(b, p)
        want = ["p%d-r%d" % (p, i) for i in range(3)] + ["p%d-after" % p]
        check(got == want, "partition %d after the restart read back %s" % (p, got))
    fds = open_fds(b)
    print("after the restart: %d descriptors open" % fds, flush=True)
    check(fds <= NOFILE // 2 + base + 8, "%d descriptors open after the restart" % fds)

    # 4. more than the broker can hold: a clear error, nothing created
    err, msg = create_partitions(c, TOPIC, 100000)
    print("CreatePartitions to 100000: error %d: %s" % (err, msg), flush=True)
    check(err == POLICY_VIOLATION and msg and "max.broker.partitions" in msg,
          "CreatePartitions to 100000 answered %d %r" % (err, msg))
    # the most a count can say: refused as fast (counting each replica one
    # by one held the controller thread for 8 s)
    t0 = time.time()
    err, msg = create_partitions(c, TOPIC, 2**31 - 1)
    took = time.time() - t0
    print("CreatePartitions to 2147483647: error %d in %.2f s: %s" % (err, took, msg), flush=True)
    check(err == POLICY_VIOLATION and msg and "max.broker.partitions" in msg,
          "CreatePartitions to 2147483647 answered %d %r" % (err, msg))
    check(took < 2, "CreatePartitions to 2147483647 took %.2f s on the controller thread" % took)
    # a 249-character topic (Kafka's longest) still hears which limit
    longname = "L" * 249
    err, msg = create_topic(c, longname, 1)
    check(err == 0, "CreateTopics %s...: error %d %s" % (longname[:10], err, msg))
    err, msg = create_partitions(c, longname, 100000)
    print("CreatePartitions of a 249-character topic to 100000: error %d: %s" % (err, msg), flush=True)
    check(err == POLICY_VIOLATION and msg and "max.broker.partitions" in msg,
          "CreatePartitions of a 249-character topic answered %d %r" % (err, msg))
    err, msg = create_topic(c, "huge", 10001)
    print("CreateTopics with 10001 partitions: error %d: %s" % (err, msg), flush=True)
    check(err == POLICY_VIOLATION and msg == "Excessively large number of partitions per request.",
          "CreateTopics with 10001 partitions answered %d %r" % (err, msg))
    check_all_online(c, STEPS[-1], "after the refused requests")
    produce(b, SAMPLE[-1], ["last"])
    check(consume(b, SAMPLE[-1])[-1] == "last", "no produce and fetch after the refused requests")
    c.close()
    check(b.stop() == 0, "stratad did not stop cleanly at the end")
    print("OK many partitions")
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    b.cleanup()

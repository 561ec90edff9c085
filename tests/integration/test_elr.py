"""
integration.elr - eligible leader replicas (KIP-966).  Five nodes: 1-3
combined (the quorum, so the cluster keeps a controller throughout), 4
and 5 broker-only.  Each topic has one partition on replicas 4, 5, 3 with
min.insync.replicas 2.

  A. A replica that leaves an ISR already at min.insync.replicas stops
     cleanly; it becomes an eligible leader, and leads when the last ISR
     member is gone:
       1. acks=all records are acknowledged with ISR {4,5,3};
       2. SIGTERM of 3: ISR {4,5};  SIGTERM of 5: ISR {4}, below the
          minimum: acks=all is refused NOT_ENOUGH_REPLICAS, acks=1 is
          written but the high watermark stays where it was (nothing
          written since is visible to a consumer);
       3. kill -9 of 4, the last ISR member: no leader;
       4. node 5 alone back: it is elected from the ELR (before KIP-966
          the partition stayed offline until 4 returned), its log holds
          every acknowledged record (served up to the high watermark it
          knew, which waits for the ISR to reach the minimum), and it
          still refuses acks=all (ISR {5}); min.insync.replicas lowered to
          1 empties the ELR (ISR {5} reaches it) and lets the high
          watermark reach the log end; then back to 2;
       5. node 4 back (after kill -9: an unclean stop), then 3: 4 drops
          the record the high watermark never covered, both rejoin the
          ISR and acks=all works again; every acknowledged record is read
          back from each replica, and nothing else.
  B. A replica that stops uncleanly loses its eligibility:
       1. ISR {4,5,3}; SIGTERM of 3; kill -9 of 5 (ISR {4}, ELR {5});
          kill -9 of 4: no leader;
       2. node 5 back: it registers after an unclean stop, so it is out of
          the ELR and the partition stays without a leader while only 5
          is up (the node log says why);
       3. node 4 back: the last known leader is elected (ISR and ELR are
          both empty; the node log names the election), then 5 and 3
          catch up; every acknowledged record is there.
  Along the way DescribeTopicPartitions (KIP-966) shows each step's ISR,
  ELR and last known ELR (and `strata topics describe` the ELR column);
  at the end it is read a page of 2 partitions at
  a time by cursor, and a cursor outside the topics asked for is refused.
"""
import os
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import CONFIG, Cluster, batch_records, binary, check, run  # noqa: E402

SESSION_MS = 3000
NOT_ENOUGH_REPLICAS = 19
cl = Cluster(5, controllers=3,
             overrides={"broker.session.timeout.ms": SESSION_MS,
                        "broker.heartbeat.interval.ms": 500,
                        "auto.leader.rebalance.enable": "false",
                        "num.partitions": 1,
                        "default.replication.factor": 3})


def create(topic):
    rc, out, err = run([binary("strata"), "topics", "--config", CONFIG, "--bootstrap", cl.bootstrap([1]),
                        "create", topic, "--replica-assignment", "4:5:3", "--config", "min.insync.replicas=2"],
                       check_rc=False, timeout=60)
    check(rc == 0, "create %s: %s %s" % (topic, out, err))


def state(topic, nodes):
    return cl.partition_state(topic, 0, nodes)


def wait_state(topic, nodes, pred, what, timeout=30):
    seen = []

    def ok():
        st = state(topic, nodes)
        seen[:] = [st]
        return st is not None and pred(st)
    cl.wait(ok, timeout, "%s (last seen %s)" % (what, seen))
    return seen[0]


def produce(node, topic, acks, values):
    """Each value as its own batch: [(error, base offset)].  A partition the
    node has not opened yet (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER) is
    tried again for a while."""
    out = []
    c = cl.conn(node, timeout=15)
    try:
        for v in values:
            deadline = time.time() + 15
            while True:
                _idx, err, base = c.produce(topic, 0, kwire.record_batch([v]), acks=acks, timeout_ms=3000)
                if err not in (3, 6) or time.time() > deadline:
                    break
                time.sleep(0.1)
            out.append((err, base))
    finally:
        c.close()
    return out


def read_all(node, topic):
    """(high watermark, the values up to it) as node serves them."""
    c = cl.conn(node, timeout=15)
    try:
        values, off, hw = [], 0, None
        while True:
            err, hw, _start, data = c.fetch(topic, 0, off)
            check(err == 0, "fetch %s at %d from node %d: error %d" % (topic, off, node, err))
            got = kwire.batches(data)
            if not got or off >= hw:
                break
            for base, count, raw in got:
                values += values_of(base, count, raw)
                off = base + count
        return hw, values
    finally:
        c.close()


def values_of(base, count, raw):
    codec = struct.unpack_from(">h", raw, 21)[0] & 7
    ts = struct.unpack_from(">q", raw, 27)[0]
    return [r["value"] for r in batch_records(dict(codec=codec, data=raw, count=count, base_offset=base,
                                                   base_timestamp=ts))]


def on_disk(node, topic):
    """The values in node's local log files, whatever the high watermark."""
    out = []
    for base, raw in sorted(cl.replica_batches(node, topic, 0).items()):
        out += values_of(base, struct.unpack_from(">i", raw, 57)[0], raw)
    return out


def dtp(topic):
    """Partition 0 of topic as DescribeTopicPartitions on node 1 answers."""
    c = cl.conn(1)
    try:
        topics, _nxt = kwire.describe_topic_partitions(c, [topic])
    finally:
        c.close()
    check(len(topics) == 1 and topics[0][0] == 0, "DescribeTopicPartitions %s: %s" % (topic, topics))
    return topics[0][2][0]


def wait_elr(topic, elr, lk, what):
    seen = []

    def ok():
        p = dtp(topic)
        seen[:] = [p]
        return sorted(p["elr"]) == sorted(elr) and p["last_known_elr"] == lk
    cl.wait(ok, 30, "%s: ELR %s, last known ELR %s (seen %s)" % (what, elr, lk, seen))
    return seen[0]


def whole_then_two(topic, prefix):
    """topic made, 50 records acknowledged by ISR {3,4,5}, then node 3
    stopped cleanly (ISR {4,5}, the minimum): the values acknowledged."""
    create(topic)
    wait_state(topic, [1], lambda st: sorted(st["isr"]) == [3, 4, 5] and st["leader"] == 4, "ISR {3,4,5}, leader 4")
    acked = [prefix + b"%03d" % i for i in range(50)]
    res = produce(4, topic, -1, acked)
    check(all(e == 0 for e, _b in res), "acks=all with the whole ISR: %s" % res)
    cl.kill(3, signal.SIGTERM)
    wait_state(topic, [1, 2], lambda st: sorted(st["isr"]) == [4, 5], "ISR {4,5} after 3 stopped")
    return acked


def log_has(i, text):
    return text in cl.log_text(i)


try:
    cl.up(timeout=90)

    # ---- A. a clean ELR member leads after the last ISR member is gone
    T = "elr-a"
    acked = whole_then_two(T, b"a")
    cl.kill(5, signal.SIGTERM)
    wait_state(T, [1, 2], lambda st: st["isr"] == [4] and st["leader"] == 4, "ISR {4} after 5 stopped")
    wait_elr(T, [5], [], "5 left an ISR below the minimum")
    rc, out, err = run([binary("strata"), "topics", "--config", CONFIG, "--bootstrap", cl.bootstrap([1]),
                        "describe", T], check_rc=False, timeout=60)
    row = [ln.split() for ln in out.decode().splitlines() if ln.startswith("0 ")]
    check(rc == 0 and row and row[0][4:8] == ["4", "5,3", "5", "-"],
          "strata topics describe: ISR 4, offline 5,3, ELR 5, no last known ELR:\n%s%s" % (out.decode(), err))
    hw0, _ = read_all(4, T)
    refused = produce(4, T, -1, [b"refused"])
    check(refused[0][0] == NOT_ENOUGH_REPLICAS, "acks=all with ISR {4} below min.insync.replicas 2: %s" % refused)
    loose = produce(4, T, 1, [b"uncommitted"])
    check(loose[0][0] == 0, "acks=1 with ISR {4}: %s" % loose)
    time.sleep(1)
    hw1, seen = read_all(4, T)
    check(hw1 == hw0 == len(acked) and seen == acked,
          "the high watermark stays at %d while the ISR is below min.insync.replicas (now %d, %d values)"
          % (hw0, hw1, len(seen)))
    print("A: ISR {4}: acks=all refused NOT_ENOUGH_REPLICAS, acks=1 written at offset %d, high watermark "
          "stays %d" % (loose[0][1], hw1), flush=True)

    cl.kill(4, signal.SIGKILL)
    wait_state(T, [1, 2], lambda st: st["leader"] == -1, "no leader once 4 (the last ISR member) is fenced",
               timeout=SESSION_MS / 1000 + 20)
    p = wait_elr(T, [5, 4], [4], "the ISR emptied")
    check(p["isr"] == [] and p["leader"] == -1, "DescribeTopicPartitions with 4 and 5 down: %s" % p)
    t0 = time.time()
    cl.start(5)
    st = wait_state(T, [1, 2], lambda st: st["leader"] == 5, "node 5 elected from the ELR while 4 is down")
    took = time.time() - t0
    check(st["isr"] == [5], "ISR after the ELR election: %s" % st)
    wait_elr(T, [4], [], "5 elected from the ELR")
    check(not cl.alive(4), "node 4 is still down")
    # its high watermark is the one it last heard of, a little behind, and
    # stays there while the ISR is below the minimum; the log holds it all
    hw5, seen5 = read_all(5, T)
    disk5 = on_disk(5, T)
    check(disk5 == acked, "node 5's log holds every acknowledged record and nothing else (%d of %d)"
          % (len(disk5), len(acked)))
    check(seen5 == acked[:hw5], "node 5 serves its log up to its high watermark %d" % hw5)
    refused = produce(5, T, -1, [b"refused"])
    check(refused[0][0] == NOT_ENOUGH_REPLICAS, "acks=all with ISR {5}: %s" % refused)
    print("A: node 4 down, node 5 back: leader 5 from the eligible leader replicas after %.1f s, "
          "ISR %s; its log holds all %d acknowledged records, served up to its high watermark %d"
          % (took, st["isr"], len(disk5), hw5), flush=True)
    # min.insync.replicas lowered to 1: ISR {5} reaches it, so the ELR
    # empties and the high watermark moves to the log end; back to 2 after
    c = cl.conn(1)
    check(c.incremental_alter(T, [("min.insync.replicas", 0, "1")])[0] == 0, "min.insync.replicas=1")
    wait_elr(T, [], [], "min.insync.replicas 1 reached by ISR {5}")
    cl.wait(lambda: read_all(5, T)[0] == len(acked), 30, "the high watermark at the log end with ISR {5}")
    check(c.incremental_alter(T, [("min.insync.replicas", 0, "2")])[0] == 0, "min.insync.replicas=2")
    c.close()
    print("A: min.insync.replicas 1: the ELR emptied, the high watermark moved from %d to %d" % (hw5, len(acked)),
          flush=True)

    cl.start(4)
    wait_elr(T, [], [], "4 registered after an unclean stop")
    cl.start(3)
    wait_state(T, [1, 2], lambda st: sorted(st["isr"]) == [3, 4, 5], "ISR {3,4,5} again", timeout=60)
    more = [b"b%03d" % i for i in range(20)]
    res = produce(5, T, -1, more)
    check(all(e == 0 for e, _b in res), "acks=all with the whole ISR again: %s" % res)
    cl.wait(lambda: read_all(5, T)[0] == len(acked) + len(more), 30, "the high watermark at the log end")
    check(read_all(5, T)[1] == acked + more, "the leader serves every acknowledged record")
    cl.wait_same_replicas(T, 0, [5, 4, 3])
    for n in (5, 4, 3):
        vals = on_disk(n, T)
        check(vals == acked + more, "node %d: %d values, want every acknowledged one and nothing else (%s)"
              % (n, len(vals), [v for v in vals if v not in acked + more][:3]))
    print("A: nodes 4 and 3 back: ISR {3,4,5}; %d acknowledged records on each replica, the acks=1 record "
          "the high watermark never covered is gone" % (len(acked) + len(more)), flush=True)

    # ---- B. an unclean stop costs a replica its eligibility
    T = "elr-b"
    acked = whole_then_two(T, b"c")
    cl.kill(5, signal.SIGKILL)
    wait_state(T, [1, 2], lambda st: st["isr"] == [4], "ISR {4} once 5 is fenced", timeout=SESSION_MS / 1000 + 20)
    cl.kill(4, signal.SIGKILL)
    wait_state(T, [1, 2], lambda st: st["leader"] == -1, "no leader once 4 is fenced", timeout=SESSION_MS / 1000 + 20)
    cl.start(5)
    cl.wait(lambda: log_has(5, "registered with the active controller"), 30, "node 5 registered")
    time.sleep(SESSION_MS / 1000 + 1)
    st = state(T, [1, 2])
    check(st["leader"] == -1, "node 5 stopped uncleanly: it must not lead from the ELR (%s)" % st)
    wait_elr(T, [4], [4], "5 registered after an unclean stop")
    controller_logs = "".join(cl.log_text(i) for i in (1, 2, 3) if os.path.exists(cl.logfile(i)))
    check("broker 5 did not stop cleanly" in controller_logs, "the controller's log says why 5 is not eligible")
    print("B: node 5 back after kill -9: out of the eligible leaders, no leader while only it is up", flush=True)
    cl.start(4)
    st = wait_state(T, [1, 2], lambda st: st["leader"] == 4, "the last known leader 4 elected")
    check("the last known leader" in controller_logs + "".join(cl.log_text(i) for i in (1, 2)),
          "the controller's log names the last-known-leader election")
    cl.start(3)
    wait_state(T, [1, 2], lambda st: sorted(st["isr"]) == [3, 4, 5], "ISR {3,4,5} again", timeout=60)
    cl.wait(lambda: read_all(4, T)[0] == len(acked), 30, "the high watermark at the log end")
    check(read_all(4, T)[1] == acked, "the leader serves every acknowledged record")
    cl.wait_same_replicas(T, 0, [4, 5, 3])
    for n in (4, 5, 3):
        check(on_disk(n, T) == acked, "node %d holds every acknowledged record and nothing else" % n)
    print("B: node 4 back: elected as the last known leader; ISR {3,4,5}, %d acknowledged records on "
          "each replica" % len(acked), flush=True)
    wait_elr(T, [], [], "the ISR whole again")

    # ---- DescribeTopicPartitions pages: a cursor at a time, then a bad one
    c = cl.conn(2)
    check(c.create_topic("elr-pages", 5, rf=3) == 0, "create elr-pages")
    cl.wait(lambda: "elr-pages" in [t[1] for t in kwire.describe_topic_partitions(c)[0]], 30, "elr-pages listed")
    whole, nxt = kwire.describe_topic_partitions(c)
    check(nxt is None, "every partition in one answer: next cursor %s" % (nxt,))
    want = [(name, i) for _e, name, parts in whole for i in sorted(parts)]
    got, cursor, pages = [], None, 0
    while True:
        page, cursor = kwire.describe_topic_partitions(c, limit=2, cursor=cursor)
        pages += 1
        got += [(name, i) for _e, name, parts in page for i in sorted(parts)]
        check(sum(len(p) for _e, _n, p in page) <= 2, "a page of at most 2 partitions: %s" % page)
        if cursor is None or pages > 20:
            break
    check(got == want, "pages of 2 cover every partition once, in order: %s vs %s" % (got, want))
    bad, _ = kwire.describe_topic_partitions(c, ["elr-a"], cursor=("elr-b", 0))
    check([e for e, _n, _p in bad] == [42], "a cursor outside the topics asked for: INVALID_REQUEST (%s)" % bad)
    missing, _ = kwire.describe_topic_partitions(c, ["elr-a", "no-such-topic"])
    check([(e, n) for e, n, _p in missing] == [(0, "elr-a"), (3, "no-such-topic")],
          "an unknown topic answered UNKNOWN_TOPIC_OR_PARTITION: %s" % missing)
    c.close()
    print("DescribeTopicPartitions: %d partitions in %d pages of 2 by cursor; a cursor outside the topics "
          "asked for refused INVALID_REQUEST" % (len(got), pages), flush=True)
    reports = cl.sanitizer_reports()
    check(not reports, "sanitizer reports: %s" % reports)
    print("integration.elr: ok", flush=True)
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    cl.cleanup()

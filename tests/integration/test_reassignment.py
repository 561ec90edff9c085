"""
integration.reassignment - partition reassignment (KIP-455:
AlterPartitionReassignments, ListPartitionReassignments) on three nodes,
under an acks=all producer (rdk_acked_producer, librdkafka).

  1. topic ra (2 partitions, replication factor 2, min.insync.replicas 1);
  2. a reassignment that cannot finish: the new replica's node is stopped
     (SIGSTOP, fenced), ra-1 is given it; ListPartitionReassignments shows
     the union of replicas with it adding and the one it replaces
     removing, sent to any node (forwarded to the active controller); the
     reassignment is cancelled and ra-1 is back on its replicas; a second
     cancel is NO_REASSIGNMENT_IN_PROGRESS;
  3. ra-0 moves off one of its nodes to the third: it completes, the node
     left deletes its copy, the new replica holds the leader's batches
     byte for byte;
  4. ra-1 moves off its leader: the leader hands over to a replica that
     stays (a higher leader epoch);
  5. ra-0 goes to replication factor 3, then back to 1;
  6. `strata topics reassign` moves ra-1 and waits, printing progress;
     `--cancel` with nothing in progress fails with the broker's error;
  7. bad input, each answered with Kafka's error, nothing else changed:
     an unknown broker, an empty replica list, a duplicate, an unknown
     topic and partition, the same partition twice;
  8. every record is acknowledged (a write parked on a leader that moves
     away is answered NOT_LEADER_OR_FOLLOWER at once, not at its timeout)
     and read back at its offset, once.
"""
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import CONFIG, Cluster, binary, check, check_acked_topic, read_ack_file  # noqa: E402

TOPIC, PARTS, SIZE = "ra", 2, 60
E_UNKNOWN, E_INVALID_REQUEST, E_INVALID_ASSIGNMENT, E_NO_REASSIGNMENT = 3, 42, 39, 85

cl = Cluster(3, overrides={
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
    "replica.lag.time.max.ms": "1500",
    "log.segment.bytes": "65536",
})


def alter(node, plan):
    c = cl.conn(node, timeout=40)
    try:
        return kwire.alter_reassignments(c, plan)
    finally:
        c.close()


def ongoing(node, topics=None):
    c = cl.conn(node)
    try:
        err, out = kwire.list_reassignments(c, topics)
        check(err == 0, "ListPartitionReassignments: error %d" % err)
        return out
    finally:
        c.close()


def state(p, nodes=None):
    return cl.partition_state(TOPIC, p, nodes)


def wait_assigned(p, want, timeout=60):
    """Every node shows p on exactly `want` (in order), with all of them in
    sync, and no reassignment of it in progress."""
    def done():
        if (TOPIC, p) in ongoing(cl.ids()[0]):
            return False
        for i in cl.ids():
            st = state(p, [i])
            if not st or st["replicas"] != want or sorted(st["isr"]) != sorted(want) or st["leader"] not in want:
                return False
        return True
    cl.wait(done, timeout, "%s-%d to be on %s, all in sync" % (TOPIC, p, want))


def partition_dir(i, p):
    return os.path.join(cl.node_dir(i), "logs", "%s-%d" % (TOPIC, p))


def strata(*args, timeout=120):
    cmd = [binary("strata"), *args[:1], "--config", CONFIG, "--bootstrap", cl.bootstrap([cl.ids()[0]]),
           *args[1:]]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


prod = None
try:
    cl.up(timeout=90)
    c = cl.conn(1)
    check(c.create_topic(TOPIC, PARTS, rf=2, configs={"min.insync.replicas": "1"}) == 0, "create %s" % TOPIC)
    c.close()
    cl.wait_isr(TOPIC, PARTS, 2)
    ackfile = os.path.join(tempfile.mkdtemp(prefix="strata-ra-"), "acks")
    # batches well under segment.bytes (64 KiB): a stall under a sanitizer
    # let librdkafka gather a larger one, refused RECORD_LIST_TOO_LARGE
    prod = cl.acked_producer(TOPIC, PARTS, SIZE, ackfile, "-X", "batch.size=16384")
    time.sleep(2)
    ctl = cl.leader_id()

    # ---- 2. a reassignment held up by a stopped node, then cancelled
    # (a partition whose missing node is not the controller, if one is)
    cands = [(p, [i for i in cl.ids() if i not in state(p)["replicas"]][0]) for p in range(PARTS)]
    held, new = next(((p, n) for p, n in cands if n != ctl), cands[0])
    orig = state(held)["replicas"]
    target = [orig[0], new]
    live = [i for i in cl.ids() if i != new]
    os.kill(cl.pid(new), signal.SIGSTOP)
    try:
        ctl = cl.wait_leader(nodes=live)
        other = [i for i in live if i != ctl][0]
        cl.wait(lambda: new not in cl.metadata(ctl, topics=[])["brokers"], 30, "node %d to be fenced" % new)
        err, msg, res = alter(other, {TOPIC: {held: target}})
        check(err == 0 and res == {(TOPIC, held): (0, None)},
              "reassign %s-%d to %s: %r %r %r" % (TOPIC, held, target, err, msg, res))
        time.sleep(1)
        got = ongoing(other)
        want = (target + [orig[1]], [new], [orig[1]])
        check(got.get((TOPIC, held)) == want, "in progress, from node %d: %r, want %r" % (other, got, want))
        check(ongoing(ctl, {TOPIC: [1 - held]}) == {}, "%s-%d is not being reassigned: %r" %
              (TOPIC, 1 - held, ongoing(ctl, {TOPIC: [1 - held]})))
        print("%s-%d %s -> %s with node %d stopped: in progress as replicas %s adding %s removing %s" %
              (TOPIC, held, orig, target, new, *want), flush=True)
        err, msg, res = alter(ctl, {TOPIC: {held: None}})
        check(err == 0 and res[(TOPIC, held)][0] == 0, "cancel: %r %r %r" % (err, msg, res))
        check(ongoing(ctl) == {}, "after the cancel: %r" % ongoing(ctl))
        st = state(held, [ctl])
        check(st["replicas"] == orig, "after the cancel %s-%d is on %s, want %s" % (TOPIC, held, st["replicas"], orig))
        err, msg, res = alter(ctl, {TOPIC: {held: None}})
        check(res[(TOPIC, held)][0] == E_NO_REASSIGNMENT, "a second cancel: %r" % (res,))
        print("cancelled: %s-%d back on %s; a second cancel: NO_REASSIGNMENT_IN_PROGRESS (%s)" %
              (TOPIC, held, orig, res[(TOPIC, held)][1]), flush=True)
    finally:
        os.kill(cl.pid(new), signal.SIGCONT)
    cl.wait_stable(timeout=60)
    cl.wait_isr(TOPIC, PARTS, 2, timeout=60)
    ctl = cl.leader_id()
    other = [i for i in cl.ids() if i != ctl][0]

    # ---- 3. ra-0 moves off one node to the third
    st0 = state(0)
    a, b = st0["replicas"]
    third = [i for i in cl.ids() if i not in (a, b)][0]
    check(os.path.isdir(partition_dir(a, 0)), "node %d has no %s-0 before the move" % (a, TOPIC))
    t0 = time.time()
    err, msg, res = alter(other, {TOPIC: {0: [b, third]}})
    check(err == 0 and res[(TOPIC, 0)][0] == 0, "reassign %s-0: %r %r %r" % (TOPIC, err, msg, res))
    wait_assigned(0, [b, third])
    took = time.time() - t0
    cl.wait(lambda: not os.path.isdir(partition_dir(a, 0)), 30, "node %d to delete its %s-0" % (a, TOPIC))
    print("%s-0 %s -> %s in %.2f s; node %d deleted its copy" % (TOPIC, [a, b], [b, third], took, a), flush=True)

    # ---- 4. ra-1 moves off its leader
    st1 = state(1)
    lead, epoch = st1["leader"], cl.leader_epoch(TOPIC, 1, st1["leader"])
    stay = [r for r in st1["replicas"] if r != lead][0]
    dest = [i for i in cl.ids() if i not in st1["replicas"]][0]
    err, msg, res = alter(ctl, {TOPIC: {1: [stay, dest]}})
    check(err == 0 and res[(TOPIC, 1)][0] == 0, "reassign %s-1 off its leader: %r %r %r" % (TOPIC, err, msg, res))
    wait_assigned(1, [stay, dest])
    st = state(1)
    e1 = cl.leader_epoch(TOPIC, 1, st["leader"])
    check(st["leader"] in (stay, dest) and e1 > epoch,
          "%s-1's leader %d at epoch %d (was %d at %d)" % (TOPIC, st["leader"], e1, lead, epoch))
    print("%s-1 moved off its leader %d: now on %s, led by %d at epoch %d (was %d)" %
          (TOPIC, lead, [stay, dest], st["leader"], e1, epoch), flush=True)

    # ---- 5. replication factor 2 -> 3 -> 1
    err, msg, res = alter(ctl, {TOPIC: {0: [b, third, a]}})
    check(res[(TOPIC, 0)][0] == 0, "%s-0 to 3 replicas: %r" % (TOPIC, res))
    wait_assigned(0, [b, third, a])
    err, msg, res = alter(ctl, {TOPIC: {0: [third]}})
    check(res[(TOPIC, 0)][0] == 0, "%s-0 to 1 replica: %r" % (TOPIC, res))
    wait_assigned(0, [third])
    cl.wait(lambda: not os.path.isdir(partition_dir(a, 0)) and not os.path.isdir(partition_dir(b, 0)), 30,
            "nodes %d and %d to delete %s-0" % (a, b, TOPIC))
    print("%s-0: 2 -> 3 replicas %s -> 1 replica %s" % (TOPIC, [b, third, a], [third]), flush=True)

    # ---- 6. the command line
    st1 = state(1)
    dest = [i for i in cl.ids() if i not in st1["replicas"]][0]
    target = [dest, st1["replicas"][0]]
    rc, out, err = strata("topics", "reassign", "%s:1=%s" % (TOPIC, ",".join(map(str, target))), "--wait")
    check(rc == 0, "strata topics reassign: exit %d\n%s%s" % (rc, out, err))
    check("done" in out.lower(), "strata topics reassign printed no completion:\n%s" % out)
    wait_assigned(1, target)
    print("strata topics reassign %s:1=%s --wait:\n  %s" % (TOPIC, target, "\n  ".join(out.strip().splitlines())),
          flush=True)
    rc, out, err = strata("topics", "reassign", "%s:1" % TOPIC, "--cancel")
    check(rc == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in err, "a cancel with none in progress: %d %r %r" % (rc, out, err))
    rc, out, err = strata("topics", "reassign", "--list")
    check(rc == 0 and "no reassignment" in out.lower(), "strata topics reassign --list: %d %r %r" % (rc, out, err))

    # ---- 7. bad input
    before = {p: state(p, [ctl])["replicas"] for p in range(PARTS)}
    bad = [({TOPIC: {0: [99]}}, (TOPIC, 0), E_INVALID_ASSIGNMENT, "an unknown broker"),
           ({TOPIC: {0: []}}, (TOPIC, 0), E_INVALID_ASSIGNMENT, "no replicas"),
           ({TOPIC: {0: [1, 1]}}, (TOPIC, 0), E_INVALID_ASSIGNMENT, "a duplicate"),
           ({"no-such-topic": {0: [1]}}, ("no-such-topic", 0), E_UNKNOWN, "an unknown topic"),
           ({TOPIC: {7: [1]}}, (TOPIC, 7), E_UNKNOWN, "an unknown partition")]
    for plan, key, code, what in bad:
        err, msg, res = alter(other, plan)
        check(err == 0 and res[key][0] == code and res[key][1],
              "%s: %r, want error %d with a message" % (what, res, code))
        print("%s: error %d: %s" % (what, res[key][0], res[key][1]), flush=True)
    # the same partition twice in one request (a dict cannot say it): the
    # first as it is (nothing to do), the second refused
    c = cl.conn(ctl)
    try:
        u, cs = kwire.uvarint, kwire.compact_str

        def part(ids):
            return struct.pack(">i", 0) + u(len(ids) + 1) + b"".join(struct.pack(">i", x) for x in ids) + b"\x00"
        body = struct.pack(">i", 30000) + u(2) + cs(TOPIC) + u(3) + part(before[0]) + part([2]) + b"\x00" + b"\x00"
        r = kwire.flex_call(c, 45, 0, body)
        r.take(">ih")
        r.compact_string()
        r.uvarint()
        r.compact_string()
        r.uvarint()
        codes = []
        for _ in range(2):
            _p, e = r.take(">ih")
            r.compact_string()
            r.skip_tags()
            codes.append(e)
    finally:
        c.close()
    check(codes == [0, E_INVALID_REQUEST], "the same partition twice: %r" % codes)
    time.sleep(1)
    after = {p: state(p, [ctl])["replicas"] for p in range(PARTS)}
    check(ongoing(ctl) == {} and after == before, "bad input changed something: %r -> %r, %r" %
          (before, after, ongoing(ctl)))
    print("the same partition twice: errors %s; nothing else changed" % codes, flush=True)

    # ---- 8. nothing acknowledged lost
    prod.send_signal(signal.SIGTERM)
    out = prod.communicate(timeout=60)[0].decode(errors="replace").strip()
    prod = None
    check("produced" in out, "the producer ran to the end: %s" % out)
    # no record may be left without an answer: a write parked on a leader
    # that moved away is told so at once, and the producer sends it again
    check(" failed 0 unacked 0" in out, "the producer's records were not all acknowledged: %s" % out)
    acks = read_ack_file(ackfile)

    class Bootstrap:
        bootstrap = cl.bootstrap()
    counts = check_acked_topic(Bootstrap(), TOPIC, PARTS, SIZE, acks, "after the reassignments")
    for p in range(PARTS):
        reps = state(p)["replicas"]
        n, start = cl.wait_same_replicas(TOPIC, p, reps)
        print("%s-%d: %d records on %s, the same %d bytes of batches from offset %d" %
              (TOPIC, p, counts[p], reps, n, start), flush=True)
    print("producer: %s; %d acknowledged records, none lost" % (out.splitlines()[-1], len(acks)), flush=True)
    print("PASS")
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    if prod is not None:
        prod.kill()
    cl.cleanup()

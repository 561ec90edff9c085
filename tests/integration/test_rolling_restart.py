"""
integration.rolling_restart - clients through a rolling restart of three
combined nodes.

A topic of 3 partitions, replication factor 3, min.insync.replicas 2.
rdk_acked_producer (librdkafka, acks=all) writes numbered messages and
records every acknowledgement; a librdkafka group member
(clients/rdk_group_consumer.c) and a kafkajs one (js/group_member.js),
each in a group of its own, read the topic and commit after each record.
Every node is stopped with SIGTERM, one at a time, started again, and the
test waits until every partition's ISR is whole before the next.  Then:

  - the producer's every message was acknowledged (retriable errors only
    on the way), and kcat finds every acknowledged message at its offset;
  - each group processed every acknowledged message (a record may come
    twice: a commit in flight when its coordinator stops is retried);
    before the coordinator loaded __consumer_offsets to its log end, a
    new coordinator lost commits above its own high watermark and the
    group read some 580 records again;
  - each member, stopped and started again, resumes where its group
    committed: the first record it is given in each partition is the one
    after the last its predecessor processed.
"""
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from group_members import Member  # noqa: E402
from strata_harness import (Cluster, binary, check, check_acked_topic, fail,  # noqa: E402
                            read_ack_file, spawn)

HERE = os.path.dirname(os.path.abspath(__file__))
TOPIC, PARTS, SIZE = "roll", 3, 60
node = shutil.which("node")
script = os.path.join(HERE, "js", "group_member.js")

cl = Cluster(3, overrides={
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
    "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "500",
})


class Bootstrap:
    def __init__(self):
        self.bootstrap = cl.bootstrap()


def partition_isr(p):
    for i in cl.live():
        try:
            return cl.metadata(i, [TOPIC], timeout=2)["topics"][TOPIC][1][p]["isr"]
        except (OSError, ConnectionError, struct.error, KeyError, AssertionError):
            continue
    return []


# STRATA_ROLL_KAFKAJS=0 leaves the kafkajs member out (a machine without
# node)
WITH_JS = os.environ.get("STRATA_ROLL_KAFKAJS", "1") != "0"


def members(tag):
    out = [Member("librdkafka-" + tag, [binary("rdk_group_consumer"), cl.bootstrap(), "g-rdk", TOPIC,
                                        "-s", "6000"])]
    if WITH_JS:
        out.append(Member("kafkajs-" + tag, [node, script, cl.bootstrap(), "g-js", TOPIC, "0", "6000"]))
    return out


def processed(m):
    return {(p, o) for p, o, _v in m.msgs()}


def rewinds(m):
    """Where a member was given a partition's records again: per rewind,
    the partition, the offset it had reached, the one it went back to, and
    the assignment lines just before."""
    top, out, recent = {}, [], []
    for l in m.snapshot():
        if not l.startswith("MSG "):
            recent = (recent + [l])[-3:]
            continue
        _, p, o, _v = l.split(" ", 3)
        p, o = int(p), int(o)
        if p in top and o <= top[p]:
            out.append("partition %d: at %d back to %d after %s" % (p, top[p], o, recent))
        top[p] = max(top.get(p, -1), o)
        recent = []
    return out


try:
    cl.up(timeout=90)
    c = cl.conn(1)
    check(c.create_topic(TOPIC, PARTS, rf=3, configs={"min.insync.replicas": "2"}) == 0, "create %s" % TOPIC)
    c.close()
    cl.wait(lambda: all(len(partition_isr(p)) == 3 for p in range(PARTS)), 60, "a whole ISR everywhere")
    ackfile = os.path.join(tempfile.mkdtemp(prefix="strata-roll-"), "acks")
    prod = spawn([binary("rdk_acked_producer"), "-b", cl.bootstrap(), "-t", TOPIC, "-o", ackfile,
                  "-p", str(PARTS), "-r", "200", "-s", str(SIZE), "-k", "r", "-w", "30000",
                  "-X", "message.timeout.ms=60000", "-X", "retry.backoff.ms=100"],
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    first = members("1")
    time.sleep(3)
    for i in cl.ids():
        t0 = time.time()
        cl.kill(i, signal.SIGTERM)
        cl.restart(i, timeout=90)
        cl.wait(lambda: all(len(partition_isr(p)) == 3 for p in range(PARTS)), 60,
                "a whole ISR after node %d came back" % i)
        print("node %d stopped (SIGTERM), started again and back in every ISR in %.1f s" %
              (i, time.time() - t0), flush=True)
    time.sleep(2)
    prod.send_signal(signal.SIGTERM)
    out = prod.communicate(timeout=60)[0].decode(errors="replace").strip()
    last = out.splitlines()[-1] if out else "(no output)"
    print("producer: %s" % last, flush=True)
    check(prod.returncode == 0 and " failed 0 " in last + " ", "every message acknowledged: %s" % last)
    acks = read_ack_file(ackfile)
    counts = check_acked_topic(Bootstrap(), TOPIC, PARTS, SIZE, acks, "after the rolling restart")
    want = set(acks)
    for m in first:
        deadline = time.time() + 90
        while not want <= processed(m) and time.time() < deadline:
            time.sleep(0.2)
        if not want <= processed(m):
            missing = sorted(want - processed(m))
            print("%s: %d of %d processed; missing e.g. %s; its last lines:\n%s\nstderr:\n%s" %
                  (m.name, len(want & processed(m)), len(want), missing[:5], "\n".join([l for l in m.snapshot() if not l.startswith("MSG")][-30:] + m.snapshot()[-3:]),
                   "\n".join(m.errs[-15:])), flush=True)
            fail("%s did not process every acknowledged record" % m.name)
    dup = {m.name: len(m.msgs()) - len(processed(m)) for m in first}
    # a commit in flight when its coordinator stops may be lost, a few
    # records each; commits lost wholesale on a move come by the hundred
    if not all(n <= 20 for n in dup.values()):
        for m in first:
            print("%s rewound:\n  %s" % (m.name, "\n  ".join(rewinds(m)) or "never"), flush=True)
        for i in cl.ids():
            print("node %d, its group coordinator's log:\n%s" % (i, "\n".join(
                [l for l in cl.log_text(i).splitlines() if "group" in l][-40:])), flush=True)
    check(all(n <= 20 for n in dup.values()), "records processed twice: %s" % dup)
    for m in first:
        fails = [l for l in m.snapshot() if l.startswith("COMMITFAIL")]
        if fails:
            print("%s: %d failed commits, e.g. %s" % (m.name, len(fails), fails[:3]), flush=True)
    print("%d acknowledged records (%s per partition), none lost; %s processed all of them "
          "(records processed twice: %s)" % (len(acks), counts, [m.name for m in first], dup), flush=True)
    # a clean stop commits; the next member of each group resumes there
    lastseen = []
    for m in first:
        check(m.stop() == 0, "%s stops cleanly" % m.name)
        top = {}
        for p, o, _v in m.msgs():
            top[p] = max(top.get(p, -1), o)
        lastseen.append(top)
    prod2 = subprocess.run([binary("rdk_acked_producer"), "-b", cl.bootstrap(), "-t", TOPIC, "-o", ackfile,
                            "-p", str(PARTS), "-n", "30", "-s", str(SIZE), "-k", "s", "-w", "30000"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check(prod2.returncode == 0, "30 more records: %s" % prod2.stdout.decode(errors="replace"))
    second = members("2")
    for m, top in zip(second, lastseen):
        cl.wait(lambda: {p for p, _o, _v in m.msgs()} >= set(range(PARTS)), 90,
                "%s to read every partition" % m.name)
        firsts = {}
        for p, o, _v in m.msgs():
            firsts.setdefault(p, o)
        check(all(firsts[p] == top.get(p, -1) + 1 for p in range(PARTS)),
              "%s resumed at %s; its group had processed up to %s" % (m.name, firsts, top))
        print("%s resumed at the committed offsets %s" % (m.name, firsts), flush=True)
    for m in second:
        m.stop()
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    cl.cleanup()

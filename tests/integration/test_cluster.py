"""
integration.cluster - three combined (broker + controller) nodes started
by scripts/cluster.sh, as a newcomer would, then the fencing of a broker
that stops heartbeating, then bad input at the quorum.

  1. kcat -L lists the 3 brokers and marks the controller, the one every
     node names (Metadata's controller id is the Raft leader); DescribeQuorum
     shows the quorum (leader, epoch, high watermark, the three voters);
     a BeginQuorumEpoch v0 (what the leader sends, no voter id in v0) of
     the current leader and epoch is accepted by the other voters.
  2. CreateTopics with replication factor 3 sent to a node that is not
     the controller (forwarded, KIP-590) succeeds; each partition has 3
     distinct replicas and the leaders are on all 3 brokers; every node
     answers the same Metadata; kcat produces through one node and reads
     back through another.
  3. Fencing: one node that is not the controller is stopped (SIGSTOP).
     Within broker.session.timeout.ms + slack the others' Metadata no
     longer lists it as a broker, names it as leader of no partition (each
     of its partitions is led by another member of its ISR) and lists it
     among the offline replicas.  SIGCONT: it is listed again (unfenced).
     The timeouts are lowered for speed: broker.session.timeout.ms=3000,
     broker.heartbeat.interval.ms=500.
  3b. A node that is not the controller restarted (SIGTERM) while the
     controller stays: it names that controller in Metadata as the others
     do (its quorum-state's leader, of whom it hears no change).
  4. Bad input:
     - a Vote (v2) from node 99, which is no voter, to each node's quorum
       listener, and one naming another cluster id: each answered with an
       error, nothing granted; the leader and its epoch are unchanged;
     - a BrokerRegistration for node 2 with another incarnation while node
       2 is alive and heartbeating: DUPLICATE_BROKER_REGISTRATION (101);
     - node 3 restarted with another cluster.id on its existing dir:
       refuses to start, naming both ids;
     - node 3 restarted with a voter list that disagrees with the one its
       quorum-state holds: refuses to start, saying so;
     - node 3's quorum-state with one byte flipped: refuses to start,
       naming the file; restored, it starts and rejoins;
     - node 3 on a new disk (no quorum-state) with a voter list of four:
       it must refuse or log a WARN/ERROR about the voters (today it
       follows silently: the test fails at its end).
"""
import os
import re
import shutil
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import BIN, Cluster, binary, check, fail, kstr, run  # noqa: E402

SESSION_MS = 3000
SLACK_MS = 3000  # the fencing check's period, a heartbeat in flight, a commit

later = []  # failures found on the way, reported at the end
cl = Cluster(3, overrides={"broker.session.timeout.ms": SESSION_MS,
                           "broker.heartbeat.interval.ms": 500,
                           "num.partitions": 1})


def kcat(i, *args, **kw):
    return run(["kcat", "-b", cl.bootstrap([i])] + list(args), **kw)


def md(i, topics=None):
    return cl.metadata(i, topics)


def same_view(nodes, topics):
    """Metadata of the topics from each node: equal brokers, controller and
    partitions (leader, replicas, ISR, offline), or None."""
    views = []
    for i in nodes:
        m = md(i, topics)
        views.append((sorted(m["brokers"].items()), m["controller_id"], m["cluster_id"],
                      sorted((t, e, sorted((p, sorted(d.items())) for p, d in parts.items()))
                             for t, (e, parts) in m["topics"].items())))
    return views[0] if all(v == views[0] for v in views) else None


def describe_quorum(i):
    """DescribeQuorum v0 to node i: (error, leader, epoch, hw, voter ids)."""
    c = cl.conn(i)
    try:
        err, leader, epoch, hw, voters, _observers = kwire.describe_quorum(c)
        return err, leader, epoch, hw, sorted(voters)
    finally:
        c.close()


def vote(port, candidate, epoch, cluster_id, last_epoch=0, last_offset=0, pre_vote=False):
    """A raw Vote v2 for __cluster_metadata-0: (error, partition error,
    leader, epoch, granted)."""
    c = kwire.Conn(port)
    try:
        body = kwire.compact_str(cluster_id) + struct.pack(">i", -1)  # voter_id: whoever answers
        body += kwire.uvarint(2) + kwire.compact_str("__cluster_metadata") + kwire.uvarint(2)
        body += struct.pack(">iii", 0, epoch, candidate) + b"\x00" * 32  # two directory ids
        body += struct.pack(">iqb", last_epoch, last_offset, pre_vote) + b"\x00" + b"\x00" + b"\x00"
        r = kwire.flex_call(c, 52, 2, body)
        err = r.take(">h")
        r.uvarint()
        r.compact_string()
        r.uvarint()
        _p, perr, leader, lepoch, granted = r.take(">ihiib")
        return err, perr, leader, lepoch, granted
    finally:
        c.close()


def begin_quorum_epoch_v0(port, cluster_id, leader, epoch):
    """A raw BeginQuorumEpoch v0 (not flexible; the voter id came in v1):
    (error, partition error, leader, epoch)."""
    c = kwire.Conn(port)
    try:
        body = kstr(cluster_id) + struct.pack(">i", 1) + kstr("__cluster_metadata") + struct.pack(">i", 1)
        body += struct.pack(">iii", 0, leader, epoch)
        r = c.call(53, 0, body)
        err = r.take(">h")
        r.take(">i")
        r.string()
        r.take(">i")
        _p, perr, lid, lepoch = r.take(">ihii")
        return err, perr, lid, lepoch
    finally:
        c.close()


def broker_registration(port, broker_id, cluster_id, incarnation, lport):
    """A raw BrokerRegistration v0: (error, broker epoch)."""
    c = kwire.Conn(port)
    try:
        body = struct.pack(">i", broker_id) + kwire.compact_str(cluster_id) + incarnation
        body += kwire.uvarint(2) + kwire.compact_str("PLAINTEXT") + kwire.compact_str("127.0.0.1")
        body += struct.pack(">Hh", lport, 0) + b"\x00"
        body += kwire.uvarint(1)  # no features
        body += b"\x00"  # rack null
        body += b"\x00"
        r = kwire.flex_call(c, 62, 0, body)
        r.take(">i")
        return r.take(">hq")
    finally:
        c.close()


def restart_refused(i, node_overrides, what, must):
    """Start node i with node_overrides: it must exit, its log saying each
    regex of must."""
    before = len(cl.log_text(i))
    rc, out = cl.up(wait=False, node_overrides={i: node_overrides}, check_rc=False)
    cl.wait(lambda: not cl.alive(i), 30, "node %d to refuse to start (%s)" % (i, what))
    new = cl.log_text(i)[before:]
    for pat in must:
        if not re.search(pat, new):
            cl.explain()
            fail("%s: node %d's log does not say /%s/; cluster.sh said:\n%s" % (what, i, pat, out))
    line = [l for l in new.splitlines() if re.search(must[0], l)][0]
    print("  %s: refused: %s" % (what, line.strip()), flush=True)


try:
    # ---- 1. up 3, kcat -L
    t0 = time.time()
    _, out = cl.up()
    print(out.strip())
    print("up 3 and stable (one controller named by all, 3 brokers each) in %.1f s" % (time.time() - t0))
    ctl = cl.leader_id()
    _, out, _ = kcat(1, "-L")
    text = out.decode()
    print(text.strip())
    check(re.search(r"^ 3 brokers:", text, re.M), "kcat -L does not list 3 brokers:\n" + text)
    listed = re.findall(r"broker (\d+) at 127\.0\.0\.1:(\d+)( \(controller\))?", text)
    check(sorted(int(b) for b, _, _ in listed) == [1, 2, 3], "kcat -L lists brokers %r" % listed)
    for b, port, _ in listed:
        check(int(port) == cl.port(int(b)), "broker %s at port %s, it serves on %d" % (b, port, cl.port(int(b))))
    marked = [int(b) for b, _, c in listed if c]
    check(marked == [ctl], "kcat -L marks %r as the controller, the nodes name %d" % (marked, ctl))
    err, leader, epoch, hw, voters = describe_quorum(ctl)
    print("DescribeQuorum from node %d: error %d, leader %d, epoch %d, high watermark %d, voters %r" %
          (ctl, err, leader, epoch, hw, voters))
    check(err == 0 and leader == ctl and epoch >= 1 and hw >= 1 and voters == [1, 2, 3],
          "DescribeQuorum does not show the quorum")
    # A leader tells the voters with BeginQuorumEpoch; v0 carries no voter
    # id (KIP-853 added it in v1), so a voter must take it without one.
    # Sent here as the leader of the current epoch, it changes nothing.
    for i in cl.ids():
        if i == ctl:
            continue
        r = begin_quorum_epoch_v0(cl.quorum_port(i), cl.cluster_id(), ctl, epoch)
        print("BeginQuorumEpoch v0 (leader %d, epoch %d) to node %d: error %d, partition error %d, leader %d, epoch %d"
              % (ctl, epoch, i, *r))
        if r != (0, 0, ctl, epoch):  # the rest still runs; the test fails at its end
            later.append("node %d refuses a BeginQuorumEpoch v0 of its own leader and epoch: %r" % (i, r))
            print("FAILS (at the end): " + later[-1], flush=True)
    if os.path.exists(os.path.join(BIN, "strata")):
        rc, sout, serr = run([binary("strata"), "cluster", "--bootstrap", cl.bootstrap([1]), "status"],
                             check_rc=False, timeout=30)
        if "unknown command" in serr:
            print("strata cluster status: not built yet (%s)" % serr.strip().splitlines()[0])
        else:
            print("strata cluster status (rc %d):\n%s%s" % (rc, sout.decode(), serr))
            check(rc == 0, "strata cluster status failed")

    # ---- 2. CreateTopics RF 3 to a node that is not the controller
    other = [i for i in cl.ids() if i != ctl][0]
    c = cl.conn(other, timeout=35)
    err = c.create_topic("spread", 6, 3, {"retention.ms": "3600000"})
    c.close()
    check(err == 0, "CreateTopics RF 3 sent to node %d (not the controller %d): error %d" % (other, ctl, err))
    print("CreateTopics spread (6 partitions, RF 3) sent to node %d, the controller is %d: ok" % (other, ctl))
    cl.wait(lambda: same_view(cl.ids(), ["spread"]) is not None and "spread" in md(1, ["spread"])["topics"]
            and md(1, ["spread"])["topics"]["spread"][0] == 0, 20, "every node to show the same metadata of spread")
    parts = md(3, ["spread"])["topics"]["spread"][1]
    check(sorted(parts) == list(range(6)), "spread has partitions %r" % sorted(parts))
    for p, d in sorted(parts.items()):
        print("  spread-%d: leader %d, replicas %r, isr %r" % (p, d["leader"], d["replicas"], d["isr"]))
        check(len(d["replicas"]) == 3 and set(d["replicas"]) == {1, 2, 3},
              "spread-%d: replicas %r are not 3 distinct brokers" % (p, d["replicas"]))
        check(d["leader"] == d["replicas"][0], "spread-%d: leader %d is not the first replica" % (p, d["leader"]))
        check(sorted(d["isr"]) == [1, 2, 3] and d["offline"] == [], "spread-%d: isr %r offline %r" %
              (p, d["isr"], d["offline"]))
    leaders = sorted(d["leader"] for d in parts.values())
    check(leaders == [1, 1, 2, 2, 3, 3], "leaders are not balanced over the 3 brokers: %r" % leaders)
    print("the same metadata of spread on nodes 1, 2, 3; leaders %r" % leaders)

    msgs = ["k%02d:value-%02d" % (i, i) for i in range(60)]
    kcat(1, "-P", "-t", "spread", "-K", ":", input=("\n".join(msgs) + "\n").encode(), timeout=60)
    _, out, _ = kcat(2, "-C", "-t", "spread", "-e", "-q", "-f", "%k:%s\\n", timeout=60)
    got = sorted(out.decode().splitlines())
    check(got == sorted(msgs), "read back through node 2 %d messages of the %d produced through node 1" %
          (len(got), len(msgs)))
    print("kcat: %d messages produced through node 1, the same read back through node 2" % len(got))

    # ---- 3. fencing
    fenced = [i for i in cl.ids() if i != ctl][-1]
    rest = [i for i in cl.ids() if i != fenced]
    led = sorted(p for p, d in parts.items() if d["leader"] == fenced)
    cl.kill(fenced, signal.SIGSTOP)
    t0 = time.time()
    print("node %d (leader of spread %r) stopped with SIGSTOP" % (fenced, led))

    def fenced_everywhere():
        for i in rest:
            m = md(i, ["spread"])
            if fenced in m["brokers"]:
                return False
            for d in m["topics"]["spread"][1].values():
                if d["leader"] == fenced or fenced not in d["offline"]:
                    return False
        return True
    cl.wait(fenced_everywhere, (SESSION_MS + SLACK_MS) / 1000 + 10, "node %d to be fenced" % fenced, interval=0.05)
    took = time.time() - t0
    print("node %d fenced, as the others' Metadata shows, %.2f s after SIGSTOP (session timeout %.1f s)" %
          (fenced, took, SESSION_MS / 1000))
    check(took <= (SESSION_MS + SLACK_MS) / 1000, "fenced after %.2f s, more than broker.session.timeout.ms %d + %d ms" %
          (took, SESSION_MS, SLACK_MS))
    check(re.search(r"broker %d fenced" % fenced, cl.log_text(cl.leader_id(rest))),
          "the controller's log does not say broker %d was fenced" % fenced)
    for i in rest:
        for p, d in sorted(md(i, ["spread"])["topics"]["spread"][1].items()):
            old = parts[p]
            check(d["leader"] in old["isr"] and d["leader"] != fenced and d["leader"] >= 0,
                  "node %d: spread-%d is led by %d, not by another member of the ISR %r" % (i, p, d["leader"], old["isr"]))
            if p in led:
                print("  node %d: spread-%d now led by %d, isr %r, offline %r" % (i, p, d["leader"], d["isr"], d["offline"]))
    cl.kill(fenced, signal.SIGCONT)
    t0 = time.time()
    cl.wait(lambda: all(fenced in md(i, [])["brokers"] for i in cl.ids()), 30,
            "node %d to be unfenced after SIGCONT" % fenced)
    print("node %d unfenced (listed by every node) %.2f s after SIGCONT" % (fenced, time.time() - t0))
    cl.wait(lambda: all(fenced not in d["offline"] for d in md(rest[0], ["spread"])["topics"]["spread"][1].values()),
            20, "node %d to leave the offline replicas" % fenced)

    # ---- 3b. a follower restarted while the controller stays: it names the
    # controller its quorum-state holds from the start (it hears of no
    # leader change), as every other node does
    ctl = cl.wait_leader()
    _, _, ep_before, _, _ = describe_quorum(ctl)
    f = [i for i in cl.ids() if i != ctl][0]
    cl.kill(f, signal.SIGTERM)
    t0 = time.time()
    cl.restart(f, timeout=30)
    _, lead_after, ep_after, _, _ = describe_quorum(cl.wait_leader())
    print("node %d restarted while node %d led epoch %d: every node names controller %d (epoch %d) "
          "%.1f s after the restart" % (f, ctl, ep_before, lead_after, ep_after, time.time() - t0))

    # ---- 4. bad input
    ctl = cl.wait_leader()
    cid = cl.cluster_id()
    _, _, epoch0, _, _ = describe_quorum(ctl)
    lines0 = cl.leaders_from_logs()
    for i in cl.ids():
        r = vote(cl.quorum_port(i), 99, epoch0 + 1, cid, last_epoch=epoch0, last_offset=1 << 40)
        print("  Vote v2 from node 99 (epoch %d) to node %d: error %d, partition error %d, leader %d, epoch %d, granted %d"
              % (epoch0 + 1, i, *r))
        check(r[0] == 0 and r[1] == 94 and not r[4], "a Vote from node 99 to node %d: %r, want INCONSISTENT_VOTER_SET (94)" % (i, r))
        r = vote(cl.quorum_port(i), 1 if i != 1 else 2, epoch0 + 1, "another-cluster", last_epoch=epoch0,
                 last_offset=1 << 40)
        print("  Vote v2 naming cluster another-cluster to node %d: error %d, partition error %d, granted %d" %
              (i, r[0], r[1], r[4]))
        check(r[0] == 104 and not r[4], "a Vote of another cluster to node %d: %r, want INCONSISTENT_CLUSTER_ID" % (i, r))
    time.sleep(1.5)  # what an election (or a granted vote) would take to show
    _, leader1, epoch1, _, _ = describe_quorum(ctl)
    check((leader1, epoch1) == (ctl, epoch0), "after the Votes of node 99 the quorum moved: leader %d epoch %d, was %d %d"
          % (leader1, epoch1, ctl, epoch0))
    check(cl.leaders_from_logs() == lines0, "a leader was elected after the Votes of node 99: %r" % cl.leaders_from_logs())
    print("Votes from node 99 and of another cluster refused by all; leader %d, epoch %d unchanged" % (ctl, epoch0))

    target = [i for i in cl.ids() if i != ctl][0]
    err, bepoch = broker_registration(cl.quorum_port(ctl), target, cid, os.urandom(16), 9)
    print("  BrokerRegistration of node %d (live) with another incarnation to the controller %d: error %d, epoch %d" %
          (target, ctl, err, bepoch))
    check(err == 101, "a duplicate registration of live broker %d: error %d, want DUPLICATE_BROKER_REGISTRATION (101)"
          % (target, err))
    check(target in md(ctl, [])["brokers"] and md(ctl, [])["brokers"][target][1] == cl.port(target),
          "broker %d's registration changed" % target)

    # node 3 stopped cleanly, then started wrong three ways
    cl.kill(3, signal.SIGTERM)
    qs = os.path.join(cl.metadata_dir(3), "quorum-state")
    check(os.path.exists(qs), "%s is missing" % qs)
    restart_refused(3, {"cluster.id": "another-cluster-id"}, "another cluster.id",
                    [r"another-cluster-id", re.escape(cid)])
    voters = ",".join("%d@127.0.0.1:%d" % (i, cl.quorum_port(i)) for i in (1, 3))
    restart_refused(3, {"controller.quorum.voters": voters}, "a voter list of 1 and 3 (the others say 1, 2, 3)",
                    [r"(?i)voter"])
    saved = qs + ".saved"
    shutil.copyfile(qs, saved)
    with open(qs, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0x40
        f.seek(0)
        f.write(data)
    restart_refused(3, {}, "a corrupt quorum-state", [re.escape(qs)])
    shutil.copyfile(saved, qs)
    os.unlink(saved)
    cl.up()
    # the ISR it rejoins reaches every node's image a little later
    cl.wait(lambda: same_view(cl.ids(), ["spread"]) is not None, 30,
            "node 3, restarted, to show the others' metadata")
    print("node 3 restarted with its quorum-state restored: rejoined, the same metadata on every node")

    # A node with no quorum-state yet (a new disk) and a voter list that
    # is not the others' (a fourth voter): the leader's LeaderChange record
    # names the voters, so the disagreement can be seen; the node should
    # refuse, or at least say so in its log.
    cl.kill(3, signal.SIGTERM)
    shutil.rmtree(os.path.join(cl.node_dir(3), "logs"))
    before = len(cl.log_text(3))
    four = ",".join("%d@127.0.0.1:%d" % (i, cl.quorum_port(i)) for i in cl.ids()) + ",4@127.0.0.1:%d" % cl.quorum_port(1)
    cl.up(wait=False, node_overrides={3: {"controller.quorum.voters": four}})
    said = []

    def noticed():
        said[:] = [l for l in cl.log_text(3)[before:].splitlines() if re.search(r"(WARN|ERROR).*voter", l)]
        return said or not cl.alive(3)
    deadline = time.time() + 10
    while time.time() < deadline and not noticed():
        time.sleep(0.2)
    if said:
        print("  a new node 3 with voters 1-4 (the others: 1-3): %s: %s" %
              ("refused" if not cl.alive(3) else "running", said[0].strip()))
    else:
        later.append("a new node 3 with controller.quorum.voters naming 4 voters (the others name 3) %s "
                     "without a word about the voter sets (it follows node %s)" %
                     ("ran 10 s" if cl.alive(3) else "stopped", cl.controller_id(3)))
        print("FAILS (at the end): " + later[-1], flush=True)
    if cl.alive(3):
        cl.kill(3, signal.SIGTERM)
    shutil.rmtree(os.path.join(cl.node_dir(3), "logs"))
    cl.up()
    cl.wait(lambda: same_view(cl.ids(), ["spread"]) is not None, 20, "node 3 (a new disk) to show the others' metadata")
    print("node 3 on a new disk with the right voters: rejoined, the same metadata on every node")
    check(not later, "%d problem(s) found on the way:\n  %s" % (len(later), "\n  ".join(later)))
    print("PASS")
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    cl.cleanup()

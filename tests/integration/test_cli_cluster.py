"""
`strata cluster status | brokers` against a real cluster started by
scripts/cluster.sh, and against a single broker.

  1. scripts/cluster.sh up 3 (free ports, a temporary directory,
     broker.session.timeout.ms lowered so fencing is quick).  After a
     CreateTopics, `status` shows 3 voters, each with lag 0 and its log end
     at the high watermark, and names as leader the controller id of
     Metadata (asked of a node that is not the leader, too); `brokers`
     lists the 3 brokers at their addresses and rack (broker.rack), unfenced,
     the controller marked.
     `strata tiering status` of a 3-partition topic whose partitions are
     led by different nodes shows every partition's high watermark,
     whichever node is the bootstrap (the tool asks each leader).
  2. kill -9 one follower.  After another CreateTopics `status` shows it
     behind (lag > 0) and its last fetch growing from one call to the
     next; `brokers` shows it fenced within broker.session.timeout.ms
     (plus a heartbeat and the call's own time), the others not.
  3. kill -9 a second node: the survivor has no quorum; `status` fails
     with a sentence saying the quorum has no leader, exit status 1.  A
     bootstrap address where nothing listens: "no broker reachable", 1.
  4. A plain single broker (strata_harness.Broker, no quorum settings):
     `status` shows a quorum of one, itself the leader with lag 0;
     `brokers` lists it as the controller.
"""
import atexit
import os
import random
import re
import shutil
import signal
import socket
import struct
import tempfile
import time

from kwire import Conn
from strata_harness import BIN, CONFIG, ROOT, Broker, binary, check, fail, free_port, kstr, run, wait_for

SESSION_MS = 3000
HEARTBEAT_MS = 500
RACK = "rack-a"
CLUSTER_SH = os.path.join(ROOT, "scripts", "cluster.sh")


def free_base(n):
    """A base port with 2n free ports from it (cluster.sh's layout)."""
    for _ in range(200):
        base = random.randrange(20000, 60000 - 2 * n, 2)
        socks = []
        try:
            for p in range(base, base + 2 * n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            pass
        finally:
            for s in socks:
                s.close()
    fail("no %d free ports in a row" % (2 * n))


class Cluster:
    def __init__(self, n):
        self.n = n
        self.dir = tempfile.mkdtemp(prefix="strata-it-cluster-")
        self.base = free_base(n)
        atexit.register(self.down)

    def sh(self, *args):
        cmd = ["bash", CLUSTER_SH] + list(args) + ["--dir", self.dir, "--base-port", str(self.base),
                                                   "--no-build"]
        env = dict(os.environ, STRATA_BIN_DIR=BIN)
        return run(cmd, env=env, timeout=120)

    def up(self):
        self.sh("up", str(self.n), "--override", "broker.session.timeout.ms=%d" % SESSION_MS,
                "--override", "broker.heartbeat.interval.ms=%d" % HEARTBEAT_MS,
                "--override", "broker.rack=%s" % RACK)

    def port(self, node):
        return self.base + 2 * (node - 1)

    def addr(self, node):
        return "127.0.0.1:%d" % self.port(node)

    def pid(self, node):
        with open(os.path.join(self.dir, "node-%d" % node, "pid")) as f:
            return int(f.read())

    def kill9(self, node):
        pid = self.pid(node)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not os.path.exists("/proc/%d" % pid) or
                 open("/proc/%d/stat" % pid).read().split()[2] == "Z", 10, what="node %d to die" % node)

    def log(self, node):
        with open(os.path.join(self.dir, "node-%d" % node, "stratad.log"), errors="replace") as f:
            return f.read()

    def down(self):
        if os.path.isdir(self.dir):
            self.sh("down")
            shutil.rmtree(self.dir, ignore_errors=True)


def strata(bootstrap, verb, command="cluster", extra=()):
    rc, out, err = run([binary("strata"), command, "--config", CONFIG, "--bootstrap", bootstrap] + list(extra) +
                       verb.split(), check_rc=False, timeout=60)
    return rc, out.decode(), err


def ms_ago(s):
    return -1 if s == "-" else int(s.split()[0])


def parse_status(out):
    """{field: value} of the header and rows {node: (role, leo, lag, fetch ms, caught-up ms)}."""
    fields, rows = {}, {}
    for line in out.splitlines():
        m = re.match(r"^(\w+):\s+(.*)$", line)
        if m:
            fields[m.group(1)] = m.group(2)
            continue
        m = re.match(r"^(\d+)\s+(Leader|Follower|Observer)\s+(\S+)\s+(\S+)\s+(- |\d+ ms ago)\s+(-|\d+ ms ago)$",
                     line)
        if m:
            leo = -1 if m.group(3) == "-" else int(m.group(3))
            lag = None if m.group(4) == "-" else int(m.group(4))
            rows[int(m.group(1))] = (m.group(2), leo, lag, ms_ago(m.group(5).strip()), ms_ago(m.group(6)))
    return fields, rows


def parse_brokers(out):
    """{id: (host:port, rack, fenced, controller, quorum)}"""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^(\d+)\s+(\S+)\s+(\S+)\s+(yes|no)\s+(yes|no)\s+(\S+)$", line)
        if m:
            rows[int(m.group(1))] = (m.group(2), m.group(3), m.group(4) == "yes", m.group(5) == "yes",
                                     m.group(6))
    return rows


def metadata_controller(port):
    """Metadata v1 with no topic: (controller id, [broker ids])."""
    c = Conn(port)
    try:
        r = c.call(3, 1, struct.pack(">i", 0))
        ids = []
        for _ in range(r.take(">i")):
            ids.append(r.take(">i"))
            r.string()
            r.take(">i")
            r.string()
        return r.take(">i"), ids
    finally:
        c.close()


def partition_leaders(port, topic):
    """Metadata v1 for one topic: {partition: leader id}."""
    c = Conn(port)
    try:
        r = c.call(3, 1, struct.pack(">i", 1) + kstr(topic))
        for _ in range(r.take(">i")):
            r.take(">i")
            r.string()
            r.take(">i")
            r.string()
        r.take(">i")  # controller
        out = {}
        for _ in range(r.take(">i")):
            r.take(">h")
            r.string()
            r.take(">b")
            for _ in range(r.take(">i")):
                _err, idx, leader = r.take(">hii")
                for _ in range(2):  # replicas, isr
                    for _ in range(r.take(">i")):
                        r.take(">i")
                out[idx] = leader
        return out
    finally:
        c.close()


def create_topic(port, name, partitions=1):
    c = Conn(port, timeout=40)
    try:
        err = c.create_topic(name, partitions, 1)
    finally:
        c.close()
    check(err == 0, "CreateTopics %s via port %d: error %d" % (name, port, err))


def show(what, rc, out, err):
    print("---- %s (exit %d)\n%s%s" % (what, rc, out, err), flush=True)


def caught_up(fields, rows, ids):
    hw = int(fields.get("HighWatermark", "-1"))
    return set(rows) >= set(ids) and all(rows[i][1] == hw and rows[i][2] == 0 for i in ids)


def three_nodes():
    cl = Cluster(3)
    cl.up()
    # a leader, and every voter caught up after a metadata change
    wait_for(lambda: strata(cl.addr(1), "status")[0] == 0, 30, what="the quorum to elect a leader")
    create_topic(cl.port(1), "cli-cluster-a")
    state = {}

    def settled():
        rc, out, err = strata(cl.addr(1), "status")
        state["s"] = (rc, out, err)
        if rc:
            return False
        fields, rows = parse_status(out)
        return fields.get("CurrentVoters") == "[1,2,3]" and caught_up(fields, rows, [1, 2, 3])

    wait_for(settled, 20, what="3 voters with lag 0")
    rc, out, err = state["s"]
    show("status", rc, out, err)
    fields, rows = parse_status(out)
    leader = int(fields["LeaderId"])
    ctl, _ = metadata_controller(cl.port(1))
    check(ctl == leader, "Metadata names controller %d, status leader %d" % (ctl, leader))
    check(rows[leader][0] == "Leader", "the leader's row says %s" % rows[leader][0])
    check(sum(1 for r in rows.values() if r[0] == "Follower") == 2, "two followers: %s" % rows)
    check(int(fields["HighWatermark"]) > 0, "a high watermark past the topic's record")
    check(fields["CurrentObservers"] == "[]", "no observers: %s" % fields["CurrentObservers"])
    check(fields["ClusterId"] == open(os.path.join(cl.dir, "cluster.id")).read().strip(),
          "cluster id %s is not cluster.sh's" % fields["ClusterId"])
    followers = sorted(i for i in rows if i != leader)
    # the same answer through a follower's listener
    rc, out2, err = strata(cl.addr(followers[0]), "status")
    check(rc == 0 and parse_status(out2)[0]["LeaderId"] == str(leader),
          "status through node %d: exit %d, %s%s" % (followers[0], rc, out2, err))

    # brokers register (and are unfenced) on their own schedule after the
    # election: wait for all three
    def unfenced():
        state["b"] = strata(cl.addr(1), "brokers")
        b = parse_brokers(state["b"][1])
        return state["b"][0] == 0 and sorted(b) == [1, 2, 3] and not any(r[2] for r in b.values())

    t0 = time.time()
    if not unfenced():
        show("brokers (not all unfenced yet)", *state["b"])
        wait_for(unfenced, 20, interval=0.2, what="3 unfenced brokers")
        print("all 3 unfenced %.1f s later" % (time.time() - t0))
    rc, out, err = state["b"]
    show("brokers", rc, out, err)
    b = parse_brokers(out)
    check(sorted(b) == [1, 2, 3], "brokers listed: %s" % sorted(b))
    for i in (1, 2, 3):
        check(b[i][0] == cl.addr(i), "broker %d at %s, not %s" % (i, b[i][0], cl.addr(i)))
        check(b[i][1] == RACK, "broker %d in rack %s, not %s" % (i, b[i][1], RACK))
        check(not b[i][2], "broker %d fenced at start" % i)
        check(b[i][3] == (i == leader), "broker %d controller mark %s" % (i, b[i][3]))
        check(b[i][4] == "voter", "broker %d quorum role %s" % (i, b[i][4]))

    # the strata commands of earlier issues against any broker: tiering
    # status asks each partition's leader, wherever the bootstrap is
    create_topic(cl.port(1), "cli-tiers", 3)
    leaders = {}
    wait_for(lambda: leaders.update(partition_leaders(cl.port(1), "cli-tiers")) or
             (len(leaders) == 3 and min(leaders.values()) > 0), 20, what="cli-tiers to have leaders")
    check(len(set(leaders.values())) > 1, "cli-tiers' partitions all led by one node: %s" % leaders)
    for p in range(3):
        run(["kcat", "-b", cl.addr(1), "-P", "-t", "cli-tiers", "-p", str(p)],
            input=b"".join(b"r%d-%d\n" % (p, i) for i in range(10 + p)))
    for node in (1, 2, 3):
        rc, out, err = strata(cl.addr(node), "status cli-tiers", command="tiering",
                              extra=["--override", "objectstore.file.root=" + os.path.join(cl.dir, "bucket")])
        show("tiering status through node %d (leaders %s)" % (node, leaders), rc, out, err)
        check(rc == 0, "tiering status through node %d exited %d" % (node, rc))
        hw = {}
        for line in out.splitlines():
            f = line.split()
            if f and f[0] == "cli-tiers":
                check("error" not in line, "through node %d: %s" % (node, line))
                hw[int(f[1])] = int(f[5])
        check(hw == {0: 10, 1: 11, 2: 12}, "high watermarks through node %d: %s" % (node, hw))

    # 2. one follower dies
    victim, other = followers[1], followers[0]
    killed = time.time()
    cl.kill9(victim)
    create_topic(cl.port(other), "cli-cluster-b")
    rc, out, err = strata(cl.addr(other), "status")
    show("status after kill -9 of node %d" % victim, rc, out, err)
    check(rc == 0, "status exited %d" % rc)
    f1, r1 = parse_status(out)
    check(r1[victim][2] is not None and r1[victim][2] > 0,
          "node %d shows lag %s after a change it missed" % (victim, r1[victim][2]))
    check(r1[other][2] == 0 or caught_up(*parse_status(strata(cl.addr(other), "status")[1]), [other]),
          "node %d should keep up" % other)
    time.sleep(1.0)  # the victim's last fetch must grow; nothing to wait on but the clock
    rc, out, err = strata(cl.addr(other), "status")
    f2, r2 = parse_status(out)
    show("status 1 s later", rc, out, err)
    check(r2[victim][3] >= r1[victim][3] + 900,
          "node %d's last fetch %d ms ago, then %d ms ago" % (victim, r1[victim][3], r2[victim][3]))
    check(r2[victim][3] >= 1000, "node %d fetched %d ms ago though dead for %.1f s" %
          (victim, r2[victim][3], time.time() - killed))

    def fenced():
        rc, out, err = strata(cl.addr(other), "brokers")
        state["b"] = (rc, out, err)
        return rc == 0 and parse_brokers(out).get(victim, (0, 0, False))[2]

    wait_for(fenced, (SESSION_MS + 5000) / 1000.0, interval=0.2,
             what="node %d shown fenced within broker.session.timeout.ms" % victim)
    took = time.time() - killed
    rc, out, err = state["b"]
    show("brokers %.1f s after the kill (session timeout %d ms)" % (took, SESSION_MS), rc, out, err)
    b = parse_brokers(out)
    check(sorted(b) == [1, 2, 3], "brokers listed: %s" % sorted(b))
    check(not b[leader][2] and not b[other][2], "the live brokers are unfenced: %s" % b)
    check(b[leader][3], "the controller is still marked")
    print("node %d fenced %.1f s after kill -9 (broker.session.timeout.ms=%d)" % (victim, took, SESSION_MS))

    # 3. no majority: the survivor says so
    cl.kill9(leader)
    t0 = time.time()
    rc, out, err = strata(cl.addr(other), "status")
    show("status with 1 of 3 voters", rc, out, err)
    check(rc == 1, "status without a quorum exited %d" % rc)
    check(re.search(r"strata cluster: .*(no leader|knows no (active controller|leader)|does not answer)", err),
          "the error says there is no leader: %r" % err)
    check("\n" not in err.strip(), "one line: %r" % err)
    print("status failed after %.1f s of retries" % (time.time() - t0))
    cl.down()


def errors():
    port = free_port()
    rc, out, err = strata("127.0.0.1:%d" % port, "status")
    show("status with nothing listening", rc, out, err)
    check(rc == 1 and "no broker reachable at 127.0.0.1:%d" % port in err, "exit %d, %r" % (rc, err))
    rc, out, err = strata("127.0.0.1:%d" % port, "brokers")
    check(rc == 1 and "no broker reachable" in err, "brokers: exit %d, %r" % (rc, err))
    rc, out, err = strata("127.0.0.1:%d" % port, "bogus")
    check(rc == 2, "an unknown verb exited %d" % rc)


def single():
    b = Broker().start()
    try:
        rc, out, err = strata(b.bootstrap, "status")
        show("status of a single broker", rc, out, err)
        check(rc == 0, "status exited %d" % rc)
        fields, rows = parse_status(out)
        check(len(rows) == 1, "one voter: %s" % rows)
        (node,) = rows
        check(fields["CurrentVoters"] == "[%d]" % node, "voters %s" % fields["CurrentVoters"])
        check(fields["LeaderId"] == str(node) and rows[node][0] == "Leader", "leader %s" % fields)
        check(rows[node][2] == 0, "the leader's lag is %s" % rows[node][2])
        ctl, _ = metadata_controller(b.port)
        check(ctl == node, "Metadata's controller %d, quorum leader %d" % (ctl, node))
        rc, out, err = strata(b.bootstrap, "brokers")
        show("brokers of a single broker", rc, out, err)
        br = parse_brokers(out)
        check(rc == 0 and list(br) == [node] and br[node][0] == b.bootstrap and br[node][1] == "-" and
              br[node][3] and not br[node][2],
              "brokers: %s" % br)
    finally:
        b.cleanup()


def main():
    errors()
    single()
    three_nodes()
    print("PASS", flush=True)


if __name__ == "__main__":
    main()

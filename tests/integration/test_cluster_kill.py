"""
integration.cluster_kill - three combined nodes with the default Raft and
broker timeouts; the active controller is killed with SIGKILL again and
again (STRATA_KILLS, default 50) while a thread creates topics in a loop
through any live node.

  - after each kill the survivors' Metadata is polled every 10 ms until
    one names a new controller; that time, kill to new leader, is
    measured; then the killed node is started again and the test waits
    until all three name the same controller (so 2 or 3 nodes are always
    running, never 1);
  - the creator sends CreateTopics (1-3 partitions, replication factor 2,
    a retention.ms of its own) to a random live node, and retries on
    NOT_CONTROLLER, REQUEST_TIMED_OUT or a connection that fails or hangs
    (a retry answered TOPIC_ALREADY_EXISTS means the lost attempt was
    committed); an answer KAFKA_STORAGE_ERROR is retried too, and fails
    the test at the end (it is no answer for a leader election);
  - at the end every topic whose CreateTopics was answered without error
    exists on every node with its partition count and its retention.ms,
    every node shows the same topics, and no epoch had two leaders (the
    "is the leader of epoch" lines of every log).

Prints the median, p90, p99 and max of the election times.
"""
import calendar
import os
import random
import re
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import Cluster, check, fail  # noqa: E402

KILLS = int(os.environ.get("STRATA_KILLS", "50"))
BUDGET_S = float(os.environ.get("STRATA_KILL_BUDGET_S", "240"))
RETRY = {7, 41}  # REQUEST_TIMED_OUT, NOT_CONTROLLER

cl = Cluster(3, overrides={"num.partitions": 1})


class Creator(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.acked = {}  # name -> (partitions, retention.ms): answered 0
        self.exists = {}  # a retry answered TOPIC_ALREADY_EXISTS
        self.errors = {}  # code -> count (retried ones included)
        self.attempts = 0
        self.rnd = random.Random(7)
        self.failure = None

    def one(self, name, parts, retention):
        first = True
        while not self.stop.is_set():
            live = cl.live()
            if not live:
                time.sleep(0.05)
                continue
            i = self.rnd.choice(live)
            self.attempts += 1
            try:
                c = kwire.Conn(cl.port(i), timeout=5)
                try:
                    err = c.create_topic(name, parts, 2, {"retention.ms": str(retention)})
                finally:
                    c.close()
            except (OSError, ConnectionError, AssertionError) as e:
                self.errors[type(e).__name__] = self.errors.get(type(e).__name__, 0) + 1
                first = False
                time.sleep(0.02)
                continue
            self.errors[err] = self.errors.get(err, 0) + 1
            if err == 0:
                self.acked[name] = (parts, retention)
                return
            if err == 36 and not first:
                self.exists[name] = (parts, retention)
                return
            if err in RETRY or err == 56:
                # 56 (KAFKA_STORAGE_ERROR) is what stratad answers while no
                # leader is known; the test fails on it at the end
                first = False
                time.sleep(0.02)
                continue
            if err == 38:  # INVALID_REPLICATION_FACTOR: fewer than 2 unfenced brokers
                time.sleep(0.05)
                continue
            self.failure = "CreateTopics %s through node %d: unexpected error %d" % (name, i, err)
            self.stop.set()
            return

    def run(self):
        seq = 0
        while not self.stop.is_set():
            seq += 1
            self.one("kt%05d" % seq, 1 + seq % 3, 3600000 + seq)


LEADER_AT = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z .*raft: node (\d+) is the leader of epoch (\d+)",
                       re.M)


def leader_line_time(node, after_epoch):
    """When node's log says it leads an epoch above after_epoch (epoch
    seconds), or None."""
    for stamp, n, epoch in LEADER_AT.findall(cl.log_text(node)):
        if int(n) == node and int(epoch) > after_epoch:
            return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + int(stamp[20:]) / 1000
    return None


def survivors_name_new_leader(dead, survivors):
    for i in survivors:
        lid = cl.controller_id(i, timeout=0.3)
        if lid is not None and lid >= 0 and lid != dead:
            return lid
    return None


try:
    t_start = time.time()
    cl.up()
    print("3 nodes up, controller %d" % cl.leader_id(), flush=True)
    cr = Creator()
    cr.start()
    elections = []
    not_newest = []  # kills of a node the logs did not show as the newest leader
    in_logs = []  # kill to the new leader's "is the leader of epoch" line
    for k in range(KILLS):
        if time.time() - t_start > BUDGET_S:
            fail("%d kills took more than %.0f s (STRATA_KILL_BUDGET_S)" % (k, BUDGET_S))
        if cr.failure:
            fail(cr.failure)
        lid = cl.wait_leader(timeout=60)
        survivors = [i for i in cl.ids() if i != lid]
        acked_before = len(cr.acked)
        top = max(cl.leaders_from_logs())  # (epoch, node) of the newest election
        if top[1] != lid:
            not_newest.append((k + 1, lid, top))
        t0 = time.time()  # kill() returns once the process is gone
        cl.kill(lid)
        new = None
        while new is None:
            new = survivors_name_new_leader(lid, survivors)
            if new is None:
                if time.time() - t0 > 60:
                    cl.explain()
                    fail("kill %d: no new leader 60 s after node %d was killed" % (k + 1, lid))
                time.sleep(0.01)
        took = time.time() - t0
        elections.append(took)
        at = leader_line_time(new, top[0])
        if at is not None:
            in_logs.append(at - t0)
        cl.restart(lid, wait=False)
        # the next kill waits until all three follow one leader (the
        # restarted node is a voter again); its broker registration may
        # wait for its old incarnation's session to end
        cl.wait_leader(timeout=60)
        print("kill %2d: node %d killed; node %d leads after %.3f s; %d topics acknowledged (+%d)" %
              (k + 1, lid, new, took, len(cr.acked), len(cr.acked) - acked_before), flush=True)
    cr.stop.set()
    cr.join(60)
    check(not cr.is_alive(), "the creator thread did not stop")
    if cr.failure:
        fail(cr.failure)
    cl.wait_stable(timeout=60)
    total = time.time() - t_start
    print("%d kills in %.0f s; %d CreateTopics attempts, %d acknowledged, %d found existing on retry; answers %r" %
          (KILLS, total, cr.attempts, len(cr.acked), len(cr.exists), cr.errors), flush=True)
    check(len(cr.acked) >= KILLS, "only %d topics were acknowledged in %d kills" % (len(cr.acked), KILLS))

    # every acknowledged topic on every node, the same everywhere
    want = dict(cr.acked)
    want.update(cr.exists)
    views = {}

    def node_topics(i):
        m = cl.metadata(i, timeout=30)
        return {t: len(parts) for t, (err, parts) in m["topics"].items() if err == 0}

    def converged():
        for i in cl.ids():
            views[i] = node_topics(i)
        return all(set(cr.acked) <= set(v) for v in views.values()) and views[1] == views[2] == views[3]
    t0 = time.time()
    try:
        cl.wait(converged, 30, "every node to show every acknowledged topic")
    except SystemExit:
        for i in cl.ids():
            print("node %d lacks %d acknowledged topics: %s" %
                  (i, len(set(cr.acked) - set(views.get(i, {}))), sorted(set(cr.acked) - set(views.get(i, {})))[:10]))
        raise
    print("every node shows every acknowledged topic %.1f s after the last kill's recovery" % (time.time() - t0))
    for i in cl.ids():
        topics = views[i]
        for name, (parts, _) in cr.acked.items():
            check(name in topics, "node %d: topic %s, acknowledged, is missing" % (i, name))
            check(topics[name] == parts, "node %d: %s has %d partitions, created with %d" %
                  (i, name, topics[name], parts))
        c = kwire.Conn(cl.port(i), timeout=30)
        names = sorted(want)
        for at in range(0, len(names), 500):
            got = kwire.describe_configs(c, names[at:at + 500])
            for name in names[at:at + 500]:
                err, conf = got.get(name, (-1, {}))
                check(err == 0 and conf.get("retention.ms") == str(want[name][1]),
                      "node %d: %s has retention.ms %r (error %d), created with %d" %
                      (i, name, conf.get("retention.ms"), err, want[name][1]))
        c.close()
        extra = sorted(set(topics) - set(want))
        print("node %d: %d topics, every acknowledged one with its partitions and retention.ms; %d more "
              "(committed, their answer lost)%s" % (i, len(topics), len(extra), (": %s" % extra[:5]) if extra else ""))
    check(views[1] == views[2] == views[3], "the nodes do not show the same topics")

    per_epoch = {}
    for epoch, node in cl.leaders_from_logs():
        per_epoch.setdefault(epoch, set()).add(node)
    two = {e: n for e, n in per_epoch.items() if len(n) > 1}
    check(not two, "epochs with two leaders: %r" % two)
    print("%d epochs in the logs, one leader each" % len(per_epoch))

    check(not not_newest, "kills of a node that was not the newest leader in the logs (kill, node, "
          "newest (epoch, leader)): %r" % not_newest)
    s = sorted(elections)

    def pct(p):
        return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]
    print("election time (kill -9 of the active controller to a survivor naming a new one), %d kills: "
          "median %.3f s, p90 %.3f s, p99 %.3f s, max %.3f s, min %.3f s (default timeouts: "
          "controller.quorum.fetch.timeout.ms 2000, election.timeout.ms 1000)" %
          (len(s), statistics.median(s), pct(90), pct(99), s[-1], s[0]), flush=True)
    if in_logs:
        t = sorted(in_logs)
        print("the same from the logs (kill to the new leader's \"is the leader of epoch\" line), %d kills: "
              "median %.3f s, p99 %.3f s, max %.3f s" %
              (len(t), statistics.median(t), t[min(len(t) - 1, int(round(0.99 * (len(t) - 1))))], t[-1]))
    check(not cr.errors.get(56), "%d CreateTopics were answered KAFKA_STORAGE_ERROR (56) during elections; "
          "NOT_CONTROLLER (41) is Kafka's answer while no controller is known, the one clients retry"
          % cr.errors.get(56, 0))
    print("PASS")
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    cl.cleanup()

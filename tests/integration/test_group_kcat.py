"""
kcat's balanced consumer (-G) and `strata groups` against a real stratad,
then a broker restart with the group alive.

  1. kcat -G on a 4-partition topic consumes everything; `strata groups
     describe` names kcat's member (the id kcat printed) as the owner of
     exactly the partitions kcat says it was assigned, and the committed
     offsets are what kcat consumed.
  2. kcat is paused (SIGSTOP) and records are added: describe shows the lag
     per partition that was produced after it; kcat resumes and the lag
     goes back to 0.
  3. kcat leaves: the group is Empty with its offsets.
  4. The broker restarts (SIGTERM): the group and its committed offsets are
     replayed from __consumer_offsets (`strata groups list` / describe);
     a new kcat of the group starts at the committed offsets.
  5. The broker restarts under a live librdkafka member (kcat itself exits
     when every broker is down): the member keeps its generation and
     assignment and reads the records produced after the restart.
"""
import os
import re
import signal
import subprocess
import threading
import time

from kwire import Conn
from strata_harness import CONFIG, Broker, binary, check, fail, kcat, run

TOPIC, GROUP, NPART = "grp-kcat", "grp-kcat-group", 4


class Kcat:
    def __init__(self, b, extra=()):
        self.out, self.err = [], []
        self.proc = subprocess.Popen(
            ["kcat", "-u", "-b", b.bootstrap, "-G", GROUP, "-f", "%p %o %s\\n",
             "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000",
             "-X", "auto.commit.interval.ms=500"] + list(extra) + [TOPIC],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, sink), daemon=True).start()

    @staticmethod
    def _read(stream, sink):
        for raw in stream:
            sink.append(raw.decode(errors="replace").rstrip("\n"))

    def records(self):
        return [tuple(int(x) for x in l.split(" ", 2)[:2]) for l in list(self.out) if l[:1].isdigit()]

    def assignment(self):
        """(member id, set of partitions) from kcat's last rebalance line."""
        member, parts = None, set()
        for l in list(self.err):
            m = re.search(r"rebalanced \(memberid ([^)]+)\): (assigned|revoked): (.*)", l)
            if not m:
                continue
            member = m.group(1)
            parts = {int(p) for p in re.findall(r"\[(\d+)\]", m.group(3))} if m.group(2) == "assigned" else set()
        return member, parts


def strata(b, *args):
    rc, out, err = run([binary("strata"), "groups", "--config", CONFIG, "--bootstrap", b.bootstrap] + list(args),
                       check_rc=False)
    return rc, out.decode(), err


def describe(b):
    return describe_group(b, GROUP)


def describe_group(b, group):
    """{partition: (committed, end, lag, member)} and the header line."""
    rc, out, err = strata(b, "describe", group)
    check(rc == 0, "strata groups describe failed: %s" % err)
    rows = {}
    for l in out.splitlines():
        f = l.split()
        if len(f) >= 6 and f[0] == TOPIC:
            num = lambda s: -1 if s == "-" else int(s)
            rows[int(f[1])] = (num(f[2]), num(f[3]), num(f[4]), f[5])
    return rows, out.splitlines()[0]


def wait_for(what, cond, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    fail("timed out waiting for " + what)


def produce(b, per_partition):
    for p, n in per_partition.items():
        if n:
            kcat(b, "-P", "-t", TOPIC, "-p", str(p), input="".join("x%d\n" % i for i in range(n)).encode())


b = Broker({"group.initial.rebalance.delay.ms": "300"}).start()
k = k2 = None
try:
    c = Conn(b.port)
    check(c.create_topic(TOPIC, NPART) == 0, "create topic")
    c.close()
    produce(b, {p: 50 + 10 * p for p in range(NPART)})
    total = sum(50 + 10 * p for p in range(NPART))

    # 1. kcat consumes; describe agrees with it
    k = Kcat(b)
    wait_for("kcat to consume %d records" % total, lambda: len(k.records()) >= total, 30)
    member, parts = k.assignment()
    check(member and parts == set(range(NPART)), "kcat's assignment: %s %s" % (member, parts))

    def settled():
        rows, _ = describe(b)
        return rows if all(rows.get(p, (0,))[0] == 50 + 10 * p for p in range(NPART)) else None

    rows = wait_for("the committed offsets", settled, 20)
    for p in range(NPART):
        check(rows[p] == (50 + 10 * p, 50 + 10 * p, 0, member),
              "partition %d: describe says %s, kcat consumed %d as %s" % (p, rows[p], 50 + 10 * p, member))
    print("describe: %s; %d partitions owned by kcat's member %s, lag 0" % (describe(b)[1], NPART, member),
          flush=True)

    # 2. lag while kcat is paused
    k.proc.send_signal(signal.SIGSTOP)
    extra = {0: 7, 1: 0, 2: 3, 3: 0}
    produce(b, extra)
    rows, _ = describe(b)
    for p in range(NPART):
        check(rows[p][2] == extra[p] and rows[p][3] == member,
              "paused: partition %d lag %s, want %d" % (p, rows[p], extra[p]))
    print("paused kcat: lag per partition %s, as produced since" % [rows[p][2] for p in range(NPART)],
          flush=True)
    k.proc.send_signal(signal.SIGCONT)
    total += sum(extra.values())
    wait_for("kcat to catch up", lambda: len(k.records()) >= total, 30)
    wait_for("lag 0", lambda: all(r[2] == 0 for r in describe(b)[0].values()), 20)

    # 3. kcat leaves; the group is Empty with its offsets
    wait_for("lag 0 again", lambda: all(r[2] == 0 for r in describe(b)[0].values()), 20)
    k.proc.send_signal(signal.SIGTERM)
    k.proc.wait(30)
    rows, head = describe(b)
    check("Empty" in head and all(r[3] == "-" and r[2] == 0 for r in rows.values()),
          "after kcat left: %s %s" % (head, rows))
    seen = k.records()
    check(len(set(seen)) == len(seen) == total, "kcat consumed %d records (%d distinct), want %d"
          % (len(seen), len(set(seen)), total))

    # 4. broker restart: the empty group and its offsets come back; a new
    #    kcat of the group starts at the committed offsets
    check(b.stop() == 0, "stratad did not stop cleanly")
    b.start()
    after, head2 = describe(b)
    check(after == rows and head2 == head, "after restart describe changed:\n%s\n%s" % (rows, after))
    rc, out, err = strata(b, "list")
    check(rc == 0 and re.search(r"^%s\s+Empty\s+consumer$" % GROUP, out, re.M), "strata groups list:\n" + out)
    produce(b, {3: 4})
    k2 = Kcat(b, ["-e"])
    k2.proc.wait(30)
    got = k2.records()
    check(sorted(got) == [(3, 80 + i) for i in range(4)], "the new kcat read %s" % got)
    print("restart: group and committed offsets replayed; a new member read only the 4 new records",
          flush=True)

    # 5. broker restart with a live member (librdkafka, which rides over a
    #    broker restart): the same member of the same generation carries on
    live = subprocess.Popen([binary("rdk_group_consumer"), b.bootstrap, GROUP + "-live", TOPIC,
                             "-s", "15000"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines = []
    threading.Thread(target=lambda: [lines.append(x.decode().strip()) for x in live.stdout],
                     daemon=True).start()
    n0 = total + 4
    wait_for("the live member to read everything",
             lambda: sum(1 for l in list(lines) if l.startswith("MSG")) >= n0, 30)
    assigns = [l for l in list(lines) if l.startswith("ASSIGN")]
    live_member = assigns[-1].split()[3]
    before_live, head_live = describe_group(b, GROUP + "-live")
    check(b.stop() == 0, "stratad did not stop cleanly")
    b.start()
    after_live, head_after = describe_group(b, GROUP + "-live")
    check("Stable" in head_after and after_live == before_live,
          "live group after restart: %s\n%s\n%s" % (head_after, before_live, after_live))
    check(all(r[3] == live_member for r in after_live.values()), "owner after restart: %s" % after_live)
    produce(b, {0: 6})
    wait_for("the live member to read past the restart",
             lambda: sum(1 for l in list(lines) if l.startswith("MSG")) >= n0 + 6, 30)
    check([l for l in list(lines) if l.startswith("ASSIGN")] == assigns,
          "the member was reassigned across the broker restart")
    live.send_signal(signal.SIGTERM)
    live.wait(30)
    print("restart with a live member: %s kept its generation and assignment and read on" % live_member,
          flush=True)
finally:
    for kk in (k, k2):
        if kk and kk.proc.poll() is None:
            kk.proc.send_signal(signal.SIGCONT)
            kk.proc.kill()
            kk.proc.wait()
    rc = b.stop()
    if rc != 0:
        print(b.log_tail(80))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

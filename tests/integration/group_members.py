"""
group_members - consumer group members as child processes, for the group
tests, and the checks those tests share.

A member is any program that prints, one line at a time:

  ASSIGN <ms> <p,p,...|-> <member id>   after each assignment
  REVOKE <ms>                           when its assignment is taken away
  MSG <partition> <offset> <value>      a record processed (before its
                                        offset is committed)
  CLOSED                                it left the group cleanly

(tests/integration/clients/rdk_group_consumer.c for librdkafka,
tests/integration/js/group_member.js for kafkajs).
"""
import collections
import signal
import subprocess
import threading
import time

from strata_harness import check, fail


class Member:
    def __init__(self, name, cmd):
        self.name = name
        self.lines = []
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.errs = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.errs), daemon=True).start()

    def _read(self, stream, sink):
        for raw in stream:
            with self.lock:
                sink.append(raw.decode(errors="replace").rstrip("\n"))

    def snapshot(self):
        with self.lock:
            return list(self.lines)

    def assignment(self):
        """The current assignment (a set; empty after a revoke)."""
        cur = set()
        for l in self.snapshot():
            if l.startswith("ASSIGN "):
                parts = l.split()[2]
                cur = set() if parts == "-" else {int(p) for p in parts.split(",")}
            elif l.startswith("REVOKE"):
                cur = set()
        return cur

    def msgs(self):
        out = []
        for l in self.snapshot():
            if l.startswith("MSG "):
                _, p, o, v = l.split(" ", 3)
                out.append((int(p), int(o), v))
        return out

    def stop(self, sig=signal.SIGTERM, timeout=30):
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("%s did not stop after signal %d:\n%s" % (self.name, sig, "\n".join(self.errs[-20:])))
        time.sleep(0.2)  # let the readers drain the pipes
        return rc

    def kill_if_alive(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for(what, cond, timeout, members=()):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return time.time()
        time.sleep(0.05)
    detail = "".join("\n%s: %s\n  %s" % (m.name, m.snapshot()[-3:], m.errs[-5:]) for m in members)
    fail("timed out waiting for " + what + detail)


def scenario(make, npart, total, session_ms, per_member_before=20):
    """The group story of the librdkafka and kafkajs tests.  make(name,
    delay_ms) starts a member.  Returns a summary line."""
    members = []
    try:
        a, bb, cc = make("A", 10), make("B", 10), make("C", 10)
        members += [a, bb, cc]

        def fair():
            asg = [m.assignment() for m in (a, bb, cc)]
            return (all(len(s) == npart // 3 for s in asg) and set().union(*asg) == set(range(npart)))

        wait_for("three members with %d partitions each" % (npart // 3), fair, 60, members)
        print("fair share: A %s, B %s, C %s" % (sorted(a.assignment()), sorted(bb.assignment()),
                                                sorted(cc.assignment())), flush=True)
        wait_for("every member processing",
                 lambda: all(len(m.msgs()) >= per_member_before for m in (a, bb, cc)), 60, members)

        # A leaves cleanly, B is killed: C owns everything within the session timeout
        b_parts = bb.assignment()
        a_parts = a.assignment()
        c_before_handover = len(cc.msgs())
        t0 = time.time()
        bb.stop(signal.SIGKILL)
        check(a.stop() == 0 and "CLOSED" in a.snapshot(), "A did not close cleanly: %s" % a.errs[-5:])
        t1 = wait_for("C to own every partition", lambda: cc.assignment() == set(range(npart)),
                      (session_ms + 10000) / 1000, members)
        took = (t1 - t0) * 1000
        print("after A left and B was killed, C owned all %d partitions in %.0f ms (session timeout %d ms)"
              % (npart, took, session_ms), flush=True)
        check(took <= session_ms + 3000, "C took %.0f ms to own every partition" % took)

        # C works a while and stops cleanly; two fresh members resume
        n_c = len(cc.msgs())
        wait_for("C to process more", lambda: len(cc.msgs()) >= n_c + per_member_before * 5, 60, members)
        check(cc.stop() == 0, "C did not close cleanly")
        last_before = {}
        for m in (a, bb, cc):
            for p, o, _ in m.msgs():
                last_before[p] = max(last_before.get(p, -1), o)
        d, e = make("D", 0), make("E", 0)
        members += [d, e]

        def everything():
            got = set()
            for m in (a, bb, cc, d, e):
                got |= {v for _, _, v in m.msgs()}
            return len(got) >= total

        wait_for("every record processed", everything, 90, members)
        check(d.stop() == 0 and e.stop() == 0, "D or E did not close cleanly")

        # nothing skipped; twice only what the killed member processed last
        delivered = collections.Counter()
        values = set()
        for m in (a, bb, cc, d, e):
            for p, o, v in m.msgs():
                delivered[(p, o)] += 1
                values.add(v)
        check(values == {"v%d" % i for i in range(total)},
              "records skipped: %d of %d processed" % (len(values), total))
        b_last = {}
        for p, o, _ in bb.msgs():
            b_last[p] = max(b_last.get(p, -1), o)
        twice = sorted(k for k, n in delivered.items() if n > 1)
        allowed = {(p, o) for p, o in b_last.items() if p in b_parts}
        check(all(delivered[k] == 2 for k in twice), "a record came more than twice: %s" % twice)
        extra = sorted(set(twice) - allowed)
        check(not extra, "records delivered twice beyond the killed member's last ones: %s (by %s)"
              % (extra, [[m.name for m in (a, bb, cc, d, e) for p, o, _ in m.msgs() if (p, o) == k]
                         for k in extra]))

        # each hand-over starts exactly at the committed offset
        first_after = {}
        for m in (d, e):
            for p, o, _ in m.msgs():
                first_after.setdefault(p, o)
        for p, o in sorted(first_after.items()):
            want = {last_before.get(p, -1) + 1}
            if p in b_last and last_before.get(p) == b_last[p]:
                want.add(b_last[p])  # the killed member's last record was never committed
            check(o in want, "partition %d resumed at %d, committed was %s" % (p, o, sorted(want)))
        # A's partitions: each processed record was committed before the
        # next, by A or, in the rebalances before the fair share, by B or C
        # (A may have got a partition and left before reading any of it)
        done = {}
        for p, o, _ in a.msgs() + bb.msgs() + cc.msgs()[:c_before_handover]:
            done[p] = max(done.get(p, -1), o)
        c_first = {}
        for p, o, _ in cc.msgs()[c_before_handover:]:
            if p in a_parts:
                c_first.setdefault(p, o)
        for p, o in c_first.items():
            check(o == done.get(p, -1) + 1, "after A left, C read partition %d from %d, committed was %d"
                  % (p, o, done.get(p, -1) + 1))
        return ("%d records processed, none skipped; delivered twice: %d (the killed member's last, "
                "uncommitted ones), everything else once; %d partitions resumed at their committed "
                "offsets after the restart" % (total, len(twice), len(first_after)))
    finally:
        for m in members:
            m.kill_if_alive()

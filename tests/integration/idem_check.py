"""
idem_check - what the idempotent producer tests share: reading what a
numbering producer acknowledged, reading a topic back, and counting
duplicates, gaps and reorderings per partition.

The producers (clients/rdk_idem_producer.c, js/idempotent_producer.js,
sarama_client idempotent) all write values "TAG p q ..." where p is the
partition and q the message's sequence within it (0, 1, 2...), and an ack
file of lines "p offset q" (a delivery report) or "F p q error" (a
delivery that failed: the message may or may not be in the log).
"""
import os
import time

from strata_harness import check, kcat


def read_acks(path):
    """({(p, q): offset} acknowledged, [(p, q, error)] failed)."""
    acks, failed = {}, []
    with open(path, "rb") as f:
        data = f.read()
    data = data[:data.rfind(b"\n") + 1]
    for line in data.decode().splitlines():
        f = line.split()
        if f[0] == "F":
            failed.append((int(f[1]), int(f[2]), f[3]))
            continue
        p, o, q = int(f[0]), int(f[1]), int(f[2])
        check((p, q) not in acks, "message %d of partition %d acknowledged twice (at %d and %d)" %
              (q, p, acks.get((p, q), -1), o))
        acks[(p, q)] = o
    return acks, failed


def ack_count(path):
    """Lines in the ack file so far (cheap enough to poll)."""
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


def read_topic(bootstrap, topic, timeout=120):
    """{partition: [(offset, tag, q)]} of the whole topic, in log order
    (kcat, from the beginning to the end)."""
    class B:
        pass
    b = B()
    b.bootstrap = bootstrap
    _, out, _ = kcat(b, "-C", "-t", topic, "-e", "-q", "-f", "%p %o %s\\n", timeout=timeout)
    parts = {}
    for line in out.split(b"\n"):
        if not line:
            continue
        p, o, tag, vp, q = line.split(b" ", 5)[:5]
        check(int(vp) == int(p), "offset %s of partition %s holds a message for partition %s" %
              (o.decode(), p.decode(), vp.decode()))
        parts.setdefault(int(p), []).append((int(o), tag.decode(), int(q)))
    return parts


def count(parts, acks, tag, partitions):
    """Per-partition figures of one producer's messages in the log:
    {p: dict(records, duplicates, gaps, reordered, lost)} and the totals
    under key "all".  duplicates: occurrences of a sequence beyond its
    first; gaps: sequences missing below the highest present; reordered:
    a new sequence below one already read; lost: acknowledged messages not
    at their acknowledged offset."""
    out = {}
    for p in range(partitions):
        recs = [(o, q) for o, t, q in parts.get(p, []) if t == tag]
        at = {o: q for o, q in recs}
        seen, hi, dup, reord = set(), -1, 0, 0
        for _o, q in recs:
            if q in seen:
                dup += 1
                continue
            if q < hi:
                reord += 1
            seen.add(q)
            hi = max(hi, q)
        gaps = hi + 1 - len(seen)
        lost = [(q, o) for (ap, q), o in acks.items() if ap == p and at.get(o) != q]
        out[p] = dict(records=len(recs), duplicates=dup, gaps=gaps, reordered=reord, lost=len(lost),
                      first_lost=sorted(lost)[:3])
    out["all"] = {k: sum(out[p][k] for p in range(partitions))
                  for k in ("records", "duplicates", "gaps", "reordered", "lost")}
    return out


def describe(figs, partitions):
    return "; ".join("p%d: %d records, %d duplicates, %d gaps, %d reordered, %d lost" %
                     (p, figs[p]["records"], figs[p]["duplicates"], figs[p]["gaps"], figs[p]["reordered"],
                      figs[p]["lost"]) for p in range(partitions))


def wait_progress(ackfile, since, want, proc, timeout, what):
    """Wait until the ack file has want more lines than since; fail
    clearly if the producer exited or nothing came within timeout."""
    deadline = time.time() + timeout
    while True:
        n = ack_count(ackfile)
        if n >= since + want:
            return n
        if proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            check(False, "the producer exited (status %s) %s:\n%s" % (proc.returncode, what, out[-3000:]))
        if time.time() > deadline:
            check(False, "no progress %s: %d acknowledgements in %ss (want %d more than %d)" %
                  (what, n - since, timeout, want, since))
        time.sleep(0.02)


class Faults:
    """Cuts and delays of a tcpproxy.TcpProxy, counted.

    lose_replies(): the broker's answers are held (DELAY, replies only,
    hold_ms), then the link is cut while they are held: requests the broker already took lose their
    answers, so the producer sends them again (duplicates without
    idempotence).  cut(): a plain cut."""

    def __init__(self, proxy, hold_ms=400):
        self.proxy = proxy
        self.hold_ms = hold_ms
        self.cuts = 0
        self.delays = 0

    def lose_replies(self):
        from tcpproxy import DELAY, PASS
        self.proxy.set_mode(DELAY, delay_ms=self.hold_ms, replies_only=True)
        time.sleep(self.hold_ms / 1000.0 * 0.75)
        self.proxy.cut()
        self.proxy.set_mode(PASS)
        self.delays += 1
        self.cuts += 1

    def delay(self, seconds):
        """A slow link for a while, no cut: answers arrive late."""
        from tcpproxy import DELAY, PASS
        self.proxy.set_mode(DELAY, delay_ms=self.hold_ms)
        time.sleep(seconds)
        self.proxy.set_mode(PASS)
        self.delays += 1

    def cut(self):
        self.proxy.cut()
        self.cuts += 1

    def crash(self, broker, hold_s=0.3):
        """SIGKILL the broker while its answers to the producer are held
        (batches appended and fsync'd, their answers never sent on), then
        start it again: the producer sends them again, and only a producer
        state rebuilt from the log (no snapshot is written at a SIGKILL)
        tells they are duplicates."""
        from tcpproxy import DELAY, PASS
        self.proxy.set_mode(DELAY, delay_ms=10000, replies_only="produce")
        time.sleep(hold_s)
        broker.kill()
        self.proxy.cut()
        self.proxy.set_mode(PASS)
        broker.start()


def drain(proc, timeout=90):
    """SIGTERM a producer, return (exit status, its output)."""
    import signal
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=timeout)[0]
    return proc.returncode, out.decode(errors="replace") if out else ""


def tmpfile(name):
    import tempfile
    return os.path.join(tempfile.mkdtemp(prefix="strata-idem-"), name)


def finish(proc, ackfile, bootstrap, topic, tag, what, cuts, kills, parts, strict=True):
    """Stop the producer (SIGTERM), read the topic back and print the
    figures; strict: every acknowledged message at its offset, each once,
    in order, no gap, no failed delivery, no fatal error.  Returns the
    figures of count()."""
    rc, out = drain(proc)
    last = [l for l in out.splitlines() if l.startswith("produced")]
    fatal = [l for l in out.splitlines() if l.startswith("FATAL")]
    print("%s: producer: %s" % (what, last[-1] if last else "(no summary)"), flush=True)
    if fatal or rc != 0:
        print(out[-3000:], flush=True)
    check(not fatal, "%s: the producer hit a fatal error: %s" % (what, fatal[0] if fatal else ""))
    check(rc == 0 and last, "%s: the producer exited %s" % (what, rc))
    acks, failed = read_acks(ackfile)
    produced = int(last[-1].split()[1])
    figs = count(read_topic(bootstrap, topic), acks, tag, parts)
    a = figs["all"]
    print("%s: produced %d, acked %d, failed %d, in the log %d, duplicates %d, gaps %d, reordered %d, "
          "lost %d, cuts %d, kills %d" % (what, produced, len(acks), len(failed), a["records"],
                                         a["duplicates"], a["gaps"], a["reordered"], a["lost"], cuts, kills),
          flush=True)
    print("%s: %s" % (what, describe(figs, parts)), flush=True)
    if strict:
        check(len(acks) > 0, "%s: nothing was acknowledged" % what)
        check(not failed, "%s: %d deliveries failed, e.g. %r" % (what, len(failed), failed[:3]))
        for p in range(parts):
            check(not figs[p]["lost"], "%s: partition %d: acknowledged (sequence, offset) not in the log "
                  "there: %r" % (what, p, figs[p]["first_lost"]))
        check(a["duplicates"] == 0, "%s: %d duplicates" % (what, a["duplicates"]))
        check(a["gaps"] == 0, "%s: %d gaps" % (what, a["gaps"]))
        check(a["reordered"] == 0, "%s: %d messages out of order" % (what, a["reordered"]))
        check(a["records"] == len(acks), "%s: %d records in the log, %d acknowledged" %
              (what, a["records"], len(acks)))
    return figs

"""
integration.txn_storage - transactions with librdkafka (`clients/rdk_txn`)
where the log does more than append: consume-transform-produce, a
compacted topic cleaned under transactions, and a tiered topic whose
transactions went to the bucket.  One stratad with tiering to the file
object store.

  - consume-transform-produce: `rdk_txn ctp` reads 300 messages of a
    3-partition topic (read_committed, group ctp-g) and writes each as
    "x VALUE" inside transactions that also commit the group's offsets
    (send_offsets_to_transaction); every 4th transaction is aborted (after
    its messages and offsets were sent: -f) and the consumer rewinds.  A
    read_committed reader of the output sees every input message exactly
    once; the group's committed offsets (OffsetFetch) are the input's
    ends.
  - compacted: 40 transactions of keyed messages (20 keys), every 3rd
    aborted after its messages reached the log; once the cleaner has
    compacted the closed segments, a read_committed reader sees, per key,
    the value of the last committed transaction, and never a value of an
    aborted one; the same after a restart.
  - tiered: 60 transactions over 16 KiB segments with a 16 KiB local
    retention, every 3rd aborted; once the bucket holds segments the local
    log no longer has (aborted transactions among them), read_committed
    from offset 0 sees exactly the committed messages, in order; the same
    after a restart, when the aborted list of the remote part comes from
    the bucket's .txnindex objects.
  - a read replica of the tiered topic (`strata topics restore
    --read-replica --source file://...` on a second stratad with a bucket
    of its own): read_committed through it is exactly the committed
    messages the bucket holds, in order (read_uncommitted shows the
    aborted ones too); after 30 more transactions (every 3rd aborted)
    reach the bucket, it serves them the same way, the first ones' aborted
    transactions still left out.
"""
import os
import re
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import Broker, binary, check, fail, kcat, kstr, run  # noqa: E402


def rdk(*args, timeout=240):
    t = time.time()
    p = subprocess.run([binary("rdk_txn")] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.time() - t


def produce(topic, tid, n, msgs, abort_every, keys=0, parts=1):
    args = ["produce", "-b", b.bootstrap, "-t", topic, "-i", tid, "-n", str(n), "-m", str(msgs),
            "-a", str(abort_every), "-p", str(parts), "-f"]
    if keys:
        args += ["-k", str(keys)]
    rc, out, err, dt = rdk(*args)
    committed = [int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("COMMITTED")]
    aborted = [int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("ABORTED")]
    print("%s: %d committed, %d aborted in %.1f s" % (topic, len(committed), len(aborted), dt), flush=True)
    check(rc == 0, "rdk_txn produce %s: rc %d\n%s\n%s" % (topic, rc, out[-1500:], err[-2000:]))
    return set(committed), set(aborted)


def consume(topic, parts, committed=True, keys=False, via=None):
    args = ["consume", "-b", (via or b).bootstrap, "-t", topic, "-p", str(parts), "-I", "4000"]
    if keys:
        args.append("-K")
    if not committed:
        args += ["-X", "isolation.level=read_uncommitted"]
    rc, out, err, _ = rdk(*args)
    check(rc == 0, "rdk_txn consume %s: rc %d\n%s" % (topic, rc, err[-2000:]))
    rows = []
    for ln in out.splitlines():
        f = ln.split(" ", 3 if keys else 2)
        rows.append((int(f[0]), int(f[1])) + tuple(f[2:]))
    return rows


def offset_fetch(c, group, topic, parts):
    """OffsetFetch v1 (this broker coordinates every group): {p: offset}."""
    body = kstr(group) + struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", parts)
    body += b"".join(struct.pack(">i", p) for p in range(parts))
    r = c.call(9, 1, body)
    out = {}
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            p, off = r.take(">iq")
            r.string()
            err = r.take(">h")
            check(err == 0, "OffsetFetch %s-%d: error %d" % (topic, p, err))
            out[p] = off
    return out


def wait_for(what, cond, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.3)
    fail("timed out waiting for " + what)


b = Broker({"log.cleaner.backoff.ms": "300", "remote.log.storage.system.enable": "true",
            "remote.log.manager.task.interval.ms": "200", "auto.create.topics.enable": "false"}).start()
c = kwire.Conn(b.port)
for name, parts, cfg in (("ctp-in", 3, {}), ("ctp-out", 3, {}),
                         ("txn-compact", 1, {"cleanup.policy": "compact", "segment.bytes": "16384",
                                             "min.cleanable.dirty.ratio": "0.01", "segment.ms": "500"}),
                         ("txn-tiered", 1, {"remote.storage.enable": "true", "segment.bytes": "16384",
                                            "local.retention.bytes": "16384"})):
    err = c.create_topic(name, parts, configs=cfg)
    check(err == 0, "create %s: error %d" % (name, err))

# ---- consume-transform-produce -------------------------------------------------
src = "".join("in-%03d\n" % i for i in range(300))
kcat(b, "-P", "-t", "ctp-in", "-p", "-1", input=src.encode())
rc, out, err, dt = rdk("ctp", "-b", b.bootstrap, "-i", "ctp-tx", "-g", "ctp-g", "-s", "ctp-in", "-t", "ctp-out",
                       "-n", "300", "-a", "4", "-p", "3", "-f")
ncommit = sum(1 for ln in out.splitlines() if ln.startswith("COMMITTED"))
nabort = sum(1 for ln in out.splitlines() if ln.startswith("ABORTED"))
print("ctp: rc %d in %.1f s: %d transactions committed, %d aborted" % (rc, dt, ncommit, nabort), flush=True)
check(rc == 0, "rdk_txn ctp: rc %d\n%s\n%s" % (rc, out[-1500:], err[-3000:]))
check(nabort > 0, "no transaction was aborted")
got = [r[2] for r in consume("ctp-out", 3)]
raw = [r[2] for r in consume("ctp-out", 3, committed=False)]
print("ctp-out: read_committed %d messages (%d distinct), read_uncommitted %d" %
      (len(got), len(set(got)), len(raw)), flush=True)
want = sorted("x in-%03d" % i for i in range(300))
check(sorted(got) == want, "read_committed output is not the input exactly once: %d messages, %d distinct, "
      "missing %s" % (len(got), len(set(got)), sorted(set(want) - set(got))[:5]))
check(len(raw) > len(got), "the aborted transactions' messages are not in the log (read_uncommitted %d)" % len(raw))
ends = {p: kwire.list_offsets_v9(c, "ctp-in", p, kwire.LATEST)[1] for p in range(3)}
committed_offsets = offset_fetch(c, "ctp-g", "ctp-in", 3)
print("ctp-g committed %s, ctp-in ends %s" % (committed_offsets, ends), flush=True)
# a partition kcat left empty has no commit (-1): nothing was consumed there
check({p: o for p, o in committed_offsets.items() if ends[p] > 0} == {p: e for p, e in ends.items() if e > 0},
      "group offsets %s are not the input's ends %s" % (committed_offsets, ends))

# ---- compacted ---------------------------------------------------------------------
ok, bad = produce("txn-compact", "compact-tx", 40, 40, 3, keys=20)
check(bad, "no aborted transaction")
last_committed = max(ok)  # every key is written by every transaction
logfile = b.logfile
wait_for("the cleaner to compact txn-compact", lambda: re.search(r"txn-compact-0: cleaned in .* \d+ removed",
                                                              open(logfile).read()), 60)
for when in ("after cleaning", "after a restart"):
    rows = consume("txn-compact", 1, keys=True)
    latest = {}
    for _p, _off, key, value in rows:
        k = int(value.split()[0])
        check(k not in bad, "%s: read_committed shows %s=%s of aborted transaction %d" % (when, key, value, k))
        latest[key] = k
    print("txn-compact %s: %d records read, last values from transactions %s" %
          (when, len(rows), sorted(set(latest.values()))), flush=True)
    check(len(latest) == 20 and set(latest.values()) == {last_committed},
          "%s: per key the last committed transaction %d, got %s" % (when, last_committed, latest))
    if when == "after cleaning":
        c.close()
        b.stop()
        b.start()
        c = kwire.Conn(b.port)

# ---- tiered ----------------------------------------------------------------------
ok, bad = produce("txn-tiered", "tier-tx", 60, 100, 3)
want = ["%d %d" % (k, j) for k in sorted(ok) for j in range(100)]


def tiered_enough():
    err, local_start, _ = kwire.list_offsets_v9(c, "txn-tiered", 0, kwire.EARLIEST_LOCAL)
    return local_start if err == 0 and local_start > 2000 else None


local_start = wait_for("txn-tiered's old segments to leave the local disk for the bucket", tiered_enough, 90)
print("txn-tiered: local log starts at %d" % local_start, flush=True)
for when in ("with the local aborted list", "after a restart (the bucket's .txnindex)"):
    got = [r[2] for r in consume("txn-tiered", 1)]
    print("txn-tiered %s: read_committed %d messages, want %d" % (when, len(got), len(want)), flush=True)
    check(got == want, "%s: read_committed from 0 is not exactly the committed messages in order "
          "(%d vs %d; first difference at %s)" %
          (when, len(got), len(want), next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), None)))
    if when.startswith("with"):
        c.close()
        b.stop()
        b.start()
        c = kwire.Conn(b.port)

# ---- a read replica of the tiered topic --------------------------------------------
r = Broker({"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "200",
            "auto.create.topics.enable": "false"}).start()
cmd = r.command()
rc, out, err = run([binary("strata"), "topics"] + cmd[1:] + ["restore", "txn-tiered", "--read-replica", "--source",
                    "file://" + os.path.join(b.root, "bucket")], check_rc=False)
check(rc == 0, "restore txn-tiered --read-replica: rc %d\n%s\n%s" % (rc, out, err[-2000:]))
print(out.decode().strip(), flush=True)
rc_ = kwire.Conn(r.port)


def replica_end():
    err, end, _ = kwire.list_offsets_v9(rc_, "txn-tiered", 0, kwire.LATEST)
    check(err == 0, "ListOffsets txn-tiered at the replica: error %d" % err)
    return end


def replica_reads(want, what):
    """read_committed through the replica: a prefix of want, in order, past
    every aborted transaction; returns how many."""
    got = [r_[2] for r_ in consume("txn-tiered", 1, via=r)]
    every = [r_[2] for r_ in consume("txn-tiered", 1, committed=False, via=r)]
    print("replica %s: read_committed %d messages (%d committed in all), read_uncommitted %d (end %d)" %
          (what, len(got), len(want), len(every), replica_end()), flush=True)
    check(got == want[:len(got)], "replica %s: read_committed is not a prefix of the committed messages "
          "(%d of %d; first difference at %s: %r)" %
          (what, len(got), len(want), next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), None),
           next(((x, y) for x, y in zip(got, want) if x != y), None)))
    check(len(every) > len(got), "replica %s: read_uncommitted %d messages, read_committed %d: no aborted "
          "transaction in the part served?" % (what, len(every), len(got)))
    return len(got)


first = replica_reads(want, "after the restore")
check(first > 0, "the replica serves nothing of txn-tiered")
end0 = replica_end()
ok2, _bad2 = produce("txn-tiered", "tier-tx2", 30, 100, 3)
want2 = want + ["%d %d" % (k, j) for k in sorted(ok2) for j in range(100)]
wait_for("the replica to serve what the second producer's transactions added to the bucket",
         lambda: replica_end() > end0 + 2000, 60)
second = replica_reads(want2, "after 30 more transactions")
check(second > first, "the replica's read_committed did not grow: %d then %d" % (first, second))
rc_.close()
r.stop()
c.close()
b.stop()
print("OK")

"""
Recovery of segments that rolled and were not yet synced at a crash.

A roll does not sync the closed segment: the flusher does, and the recovery
point (recovery-point-offset-checkpoint, written by the janitor every
log.flush.offset.checkpoint.interval.ms) moves only after that.  After an
unclean stop, every segment past the recovery point on disk is read whole,
however many rolled after it.

1. A broker with small segments (log.segment.bytes 16384) and a short
   checkpoint interval takes A records (acks=all) and is killed once the
   checkpoint holds A's end: that is the recovery point on disk.
2. Restarted with a checkpoint interval of an hour (the recovery point on
   disk stays at A's end), it takes B records over many more segments and
   is killed.  The pages of a closed segment past the recovery point are
   then cut in the middle of a batch, as a lost fsync would leave them.
3. The restart must report the torn batch in that segment, remove every
   segment after it, serve every record before the cut (all of A, B up to
   the cut) and write new records at the cut.
"""
import os
import re
import time

from strata_harness import Broker, binary, check, kcat, log_starts, read_batches, segment_logs, spawn, wait_for

TOPIC = "unsynced"


def produce(b, n, prefix):
    ackfile = os.path.join(b.root, "acks-" + prefix)
    p = spawn([binary("rdk_acked_producer"), "-b", b.bootstrap, "-t", TOPIC, "-o", ackfile,
               "-n", str(n), "-k", prefix, "-s", "60", "-X", "linger.ms=0",
               "-X", "batch.num.messages=20"], stdout=-1, stderr=-1)
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and out.startswith(b"produced %d acked %d failed 0" % (n, n)),
          "producer: %s %s" % (out.decode(), err.decode()[-2000:]))
    with open(ackfile) as f:
        acks = [line.split(" ") for line in f.read().splitlines()]
    return [(int(o), k) for _, o, k in sorted(acks, key=lambda a: int(a[1]))]


def consume(b):
    _, out, _ = kcat(b, "-C", "-t", TOPIC, "-e", "-q", "-f", "%o %k\\n", timeout=120)
    return [(int(o), k) for o, k in (line.split(" ") for line in out.decode().splitlines())]


def recovery_point(b):
    path = os.path.join(b.logdir, "recovery-point-offset-checkpoint")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        for line in f.read().splitlines()[2:]:
            t, p, o = line.split(" ")
            if t == TOPIC and p == "0":
                return int(o)
    return 0


b = Broker({"num.partitions": "1", "log.segment.bytes": "16384",
            "log.flush.offset.checkpoint.interval.ms": "200"})
b.start()
try:
    first = produce(b, 300, "a")
    check([o for o, _ in first] == list(range(300)), "A was not acked at 0..299")
    wait_for(lambda: recovery_point(b) >= 300, timeout=30, what="the recovery point to reach 300")
    b.kill()
    rp = recovery_point(b)
    print("recovery point on disk after A: %d" % rp)

    b.overrides["log.flush.offset.checkpoint.interval.ms"] = "3600000"
    b.start()
    second = produce(b, 1500, "b")
    check([o for o, _ in second] == list(range(300, 1800)), "B was not acked at 300..1799")
    b.kill()
    check(recovery_point(b) == rp, "the recovery point on disk moved (%d, was %d)" % (recovery_point(b), rp))
    segs = segment_logs(b, TOPIC, 0)
    bases = [int(os.path.basename(s)[:20]) for s in segs]
    # the third closed segment wholly past the recovery point
    past = [i for i in range(len(segs) - 1) if bases[i] >= rp]
    check(len(past) >= 4, "only %d closed segments past the recovery point: %s" % (len(past), bases))
    k = past[2]
    batches = read_batches(segs[k])
    check(len(batches) >= 3, "%s holds %d batches" % (segs[k], len(batches)))
    victim = batches[len(batches) // 2]
    os.truncate(segs[k], victim["pos"] + victim["size"] // 2)
    print("cut %s at byte %d, in the batch at offset %d; %d segments after it" %
          (os.path.basename(segs[k]), victim["pos"] + victim["size"] // 2, victim["base_offset"],
           len(segs) - 1 - k))

    b.start()
    section = log_starts(b)[-1]
    check("the previous stop was not clean" in section, "the restart did not notice the kill")
    want = r"truncating segment 0*%d at byte %d \(offset %d\): torn batch" % (
        bases[k], victim["pos"], victim["base_offset"])
    check(re.search(want, section), "no truncation reported (want /%s/):\n%s" % (want, section[-3000:]))
    want = r"segment 0*%d ends at offset %d, not %d: removing the %d segments after it" % (
        bases[k], victim["base_offset"], bases[k + 1], len(segs) - 1 - k)
    check(re.search(want, section), "no removal reported (want /%s/):\n%s" % (want, section[-3000:]))
    after = [int(os.path.basename(s)[:20]) for s in segment_logs(b, TOPIC, 0)]
    check(after == bases[:k + 1], "segments after recovery: %s, expected %s" % (after, bases[:k + 1]))
    keep = victim["base_offset"]
    good = (first + second)[:keep]
    recs = consume(b)
    check(recs == good, "after recovery: %d records, expected the %d before offset %d" % (len(recs), keep, keep))
    check(keep >= rp, "the cut at %d is below the recovery point %d" % (keep, rp))
    third = produce(b, 100, "c")
    check([o for o, _ in third] == list(range(keep, keep + 100)),
          "new writes went to %d.., expected %d" % (third[0][0], keep))
    check(consume(b) == good + third, "log differs after writing past the cut")
    rc = b.stop()
    check(rc == 0, "stratad exit status %s after SIGTERM" % rc)
    print("ok: %d records kept (A %d, recovery point %d), %d segments removed, writes continue at %d" %
          (keep, len(first), rp, len(segs) - 1 - k, keep))
finally:
    b.cleanup()

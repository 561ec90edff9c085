"""
Kafka's topic configs flush.messages, flush.ms and max.compaction.lag.ms
against a real stratad (log.flush.on.ack=false, so only these settings
fsync; the recovery-point checkpoint, written every 200 ms, shows what was
flushed).

  1. flush.messages=5: four single-record appends (acks=1) leave the
     recovery point at 0 while checkpoints are rewritten; the fifth moves
     it to 5.  A topic without these settings stays at 0 meanwhile.
  2. flush.ms=300: one append is flushed within a few seconds, with no
     further appends.
  3. max.compaction.lag.ms (KIP-354): two compacted topics with
     min.cleanable.dirty.ratio=0.99, everything closed cleaned; then a few
     duplicates of one key, far below the ratio (raised from 0.01 once
     everything closed was cleaned).  The topic with
     max.compaction.lag.ms=2000 is cleaned once its dirty records are
     older than that (one record of the key is left); the other keeps
     every duplicate.
"""
import os
import time

from kwire import Conn, record_batch
from strata_harness import Broker, check, fail, grep_log, read_batches, batch_records, segment_logs, wait_for

b = Broker({"log.flush.on.ack": "false", "log.flush.offset.checkpoint.interval.ms": "200",
            "log.cleaner.backoff.ms": "200"})


def recovery_points():
    path = os.path.join(b.logdir, "recovery-point-offset-checkpoint")
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}, None
    out = {}
    for line in lines[2:]:
        t, p, o = line.split()
        out[(t, int(p))] = int(o)
    return out, os.stat(path).st_mtime_ns


def checkpoints_rewritten(times):
    """Wait until the checkpoint file has been written `times` more times."""
    _, first = recovery_points()
    seen = [first]

    def more():
        _, m = recovery_points()
        if m != seen[-1]:
            seen.append(m)
        return len(seen) > times

    wait_for(more, timeout=10, interval=0.02, what="checkpoints to be rewritten")


def produce(c, topic, values, keys=None):
    _, err, base = c.produce(topic, 0, record_batch(values, keys=keys), acks=1)
    check(err == 0, "produce to %s: error %d" % (topic, err))
    return base


def key_counts(topic):
    counts = {}
    for path in segment_logs(b, topic, 0):
        for batch in read_batches(path):
            for r in batch_records(batch):
                counts[r["key"]] = counts.get(r["key"], 0) + 1
    return counts


b.start()
try:
    c = Conn(b.port)
    for name, configs in [("fm", {"flush.messages": "5"}), ("fms", {"flush.ms": "300"}), ("plain", {})]:
        err = c.create_topic(name, 1, configs=configs)
        check(err == 0, "create %s with %s: error %d" % (name, configs, err))

    # 1. flush.messages
    produce(c, "plain", [b"x"])
    for i in range(4):
        produce(c, "fm", [b"m%d" % i])
    checkpoints_rewritten(3)
    rp, _ = recovery_points()
    check(rp.get(("fm", 0)) == 0, "flush.messages=5: flushed after 4 messages: %s" % rp)
    produce(c, "fm", [b"m4"])
    wait_for(lambda: recovery_points()[0].get(("fm", 0)) == 5, timeout=10,
             what="flush.messages=5 to flush offset 5 (recovery points %s)" % (recovery_points()[0],))
    print("flush.messages=5: recovery point 0 after 4 appends, 5 after the fifth")

    # 2. flush.ms
    t0 = time.time()
    produce(c, "fms", [b"t0", b"t1"])
    wait_for(lambda: recovery_points()[0].get(("fms", 0)) == 2, timeout=5,
             what="flush.ms=300 to flush offset 2")
    print("flush.ms=300: flushed %.2f s after the append" % (time.time() - t0))
    rp, _ = recovery_points()
    check(rp.get(("plain", 0)) == 0, "the topic without flush settings was flushed: %s" % rp)

    # 3. max.compaction.lag.ms: first every closed segment is cleaned
    # (ratio 0.01), then the ratio goes to 0.99 and only "lag" gets the lag
    common = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}
    for t in ("lag", "nolag"):
        check(c.create_topic(t, 1, configs=common) == 0, "create the compacted topic " + t)
        for k in range(60):
            produce(c, t, [b"v" * 20], keys=[b"k%02d" % k])

    def cleaned_to_active(t):
        active = int(os.path.basename(segment_logs(b, t, 0)[-1])[:20])
        return any(int(x) == active for x in grep_log(b, r"\b%s-0: cleaned in .* next pass from offset (\d+)" % t))

    for t in ("lag", "nolag"):
        wait_for(lambda: cleaned_to_active(t), timeout=30, what="every closed segment of %s to be cleaned" % t)
    err, msg = c.incremental_alter("lag", [("min.cleanable.dirty.ratio", 0, "0.99"), ("max.compaction.lag.ms", 0, "2000")])
    check(err == 0, "set max.compaction.lag.ms: error %d %s" % (err, msg))
    err, msg = c.incremental_alter("nolag", [("min.cleanable.dirty.ratio", 0, "0.99")])
    check(err == 0, "set min.cleanable.dirty.ratio: error %d %s" % (err, msg))
    passes = {t: len(grep_log(b, r"\b%s-0: cleaned in" % t)) for t in ("lag", "nolag")}
    # the oldest record the next pass of "lag" sees as dirty: the first of
    # its active segment (max.compaction.lag.ms counts from it)
    oldest_dirty_ms = read_batches(segment_logs(b, "lag", 0)[-1])[0]["max_timestamp"]
    t_dup = time.time()
    for t in ("lag", "nolag"):
        for i in range(4):
            produce(c, t, [b"dup-%d" % i], keys=[b"k00"])
        for k in range(60, 90):  # roll past the duplicates
            produce(c, t, [b"w" * 20], keys=[b"k%02d" % k])
    wait_for(lambda: len(grep_log(b, r"\blag-0: cleaned in")) > passes["lag"], timeout=30,
             what="max.compaction.lag.ms=2000 to clean the log below its dirty ratio")
    waited = time.time() - t_dup
    age_ms = time.time() * 1000 - oldest_dirty_ms
    counts = key_counts("lag")
    check(counts.get(b"k00") == 1, "after the lag pass k00 appears %s times" % counts.get(b"k00"))
    check(age_ms >= 2000, "cleaned when the oldest dirty record was %d ms old, before "
          "max.compaction.lag.ms" % age_ms)
    time.sleep(1)  # a few more cleaner rounds
    check(len(grep_log(b, r"\bnolag-0: cleaned in")) == passes["nolag"], "the topic without the lag was cleaned")
    counts = key_counts("nolag")
    check(counts.get(b"k00") == 5, "without max.compaction.lag.ms k00 appears %s times, want 5" % counts.get(b"k00"))
    print("max.compaction.lag.ms=2000: cleaned %.1f s after the duplicates (oldest dirty record %d ms old); "
          "without it they stay" % (waited, age_ms))
    c.close()
    check(b.stop() == 0, "stratad did not stop cleanly")
    print("OK flush and compaction lag")
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    b.cleanup()

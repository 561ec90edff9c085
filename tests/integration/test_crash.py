"""
Crash test.

usage: test_crash.py [kill-loop | torn-tail]   (both by default; CTest runs
them as integration.crash and integration.crash.torn_tail)

1. Kill loop.  rdk_acked_producer (librdkafka, acks=all, not idempotent,
   retrying) writes numbered messages to a 3-partition topic with small
   segments and records every acknowledgement as "partition offset key".
   stratad is killed with SIGKILL at random moments (some right after it
   came back) and restarted on the same log dir and port while the producer
   keeps going; in some trials it is killed again while starting up.
   After each restart, the acknowledgements recorded so far
   are read first, then the whole topic is consumed with kcat, and:
     - the broker's log for that start says the previous stop was not clean;
     - every partition holds offsets 0..n-1, each once;
     - every record is intact (its value is rebuilt from its key);
     - every acknowledged message is at its acknowledged offset.
   A non-idempotent producer may write a retried message twice; that copy
   is allowed anywhere except on an acknowledged offset.
2. Torn tail.  A fresh broker, one partition, many small batches; after a
   clean stop half of the active segment's last batch is cut off; the
   restart must report "truncating segment" at that batch's position and
   offset, serve every earlier record, and continue at that offset.  Then,
   after a kill, one byte inside the last batch's records is flipped; the
   restart must report a CRC32C mismatch at that batch and keep everything
   before it.

STRATA_CRASH_SEED and STRATA_CRASH_TRIALS reproduce or lengthen a run.
"""
import os
import random
import re
import signal
import subprocess
import sys
import time

from strata_harness import (BATCH_HEADER_SIZE, Broker, binary, check, fail, kcat, log_starts,
                            read_batches, segment_logs, spawn, wait_for)

SEED = int(os.environ.get("STRATA_CRASH_SEED", str(int(time.time() * 1000) % 1000000007)))
TRIALS = int(os.environ.get("STRATA_CRASH_TRIALS", "24"))
LOOP_BUDGET_S = 150  # the kill loop stops early (after 20 trials) past this
TOPIC, PARTITIONS = "crash", 3
rnd = random.Random(SEED)
print("seed %d (STRATA_CRASH_SEED=%d reproduces the kill schedule)" % (SEED, SEED), flush=True)


def expected_value(key, size=60):
    """What rdk_acked_producer -s size writes for key."""
    seq = int(key.rsplit("-", 1)[1])
    n = size + seq % 37
    unit = key + "."
    return (unit * (n // len(unit) + 1))[:n]


def read_acks(path):
    """{(partition, offset): key} from whole lines of the ack file."""
    with open(path, "rb") as f:
        data = f.read()
    data = data[:data.rfind(b"\n") + 1]
    acks, keys = {}, {}
    for line in data.decode().splitlines():
        p, o, k = line.split(" ")
        at = (int(p), int(o))
        check(at not in acks, "offset %s acknowledged twice (%s and %s)" % (at, acks.get(at), k))
        check(k not in keys, "%s acknowledged twice (at %s and %s)" % (k, keys.get(k), at))
        acks[at] = k
        keys[k] = at
    return acks


def consume(b, topic, partitions, size):
    """Every record of the topic as {partition: [(offset, key)]}, after
    checking offsets 0..n-1 each once and every value against its key.
    Nothing may be writing: a consumer only sees the end of a partition in
    an empty fetch."""
    try:
        _, out, _ = kcat(b, "-C", "-t", topic, "-e", "-q", "-f", "%p %o %k %s\\n", timeout=120)
    except subprocess.TimeoutExpired:
        fail("kcat did not reach the end of %s in 120 s:\n%s" % (topic, b.log_tail()))
    parts = {p: [] for p in range(partitions)}
    for line in out.decode(errors="replace").splitlines():
        p, o, k, v = line.split(" ", 3)
        check(v == expected_value(k, size), "%s-%s offset %s: value of %s is damaged" % (topic, p, o, k))
        parts[int(p)].append((int(o), k))
    for p, recs in parts.items():
        offs = [o for o, _ in recs]
        if offs != list(range(len(offs))):
            dup = len(offs) - len(set(offs))
            fail("%s-%d: offsets are not 0..%d (%d repeated, first wrong at %s)" %
                 (topic, p, len(offs) - 1, dup, next(i for i, o in enumerate(offs) if o != i)))
    return parts


def check_acked(acks, parts, when):
    for (p, o), k in acks.items():
        recs = parts.get(p, [])
        check(o < len(recs), "%s: acknowledged %s at %d-%d is gone (the partition ends at %d)" %
              (when, k, p, o, len(recs)))
        check(recs[o][1] == k, "%s: offset %d-%d holds %s, but %s was acknowledged there" %
              (when, p, o, recs[o][1], k))


def start_section(b):
    return log_starts(b)[-1]


# ---- 1. the kill loop ------------------------------------------------------

def kill_loop():
    b = Broker({"num.partitions": str(PARTITIONS), "log.segment.bytes": "262144"})
    b.start()
    ackfile = os.path.join(b.root, "acks")
    errfile = os.path.join(b.root, "producer.stderr")
    with open(errfile, "w") as err:
        prod = spawn([binary("rdk_acked_producer"), "-b", b.bootstrap, "-t", TOPIC, "-o", ackfile,
                      "-p", str(PARTITIONS), "-r", "1500", "-s", "60", "-X", "linger.ms=2",
                      # batches under the 256 KiB segments, whatever queued up during a kill
                      "-X", "batch.size=65536"],
                     stdout=subprocess.PIPE, stderr=err)
    try:
        # the producer's metadata request creates the topic; start killing
        # once writes flow
        wait_for(lambda: os.path.exists(ackfile) and os.path.getsize(ackfile) > 10000, timeout=60,
                 what="the first acknowledgements")
        stats = dict(trials=0, truncations=0, rebuilds=0, dups=0, startup_kills=0)
        loop_start = time.time()
        last_acked = 0
        for trial in range(TRIALS):
            if trial >= 20 and time.time() - loop_start > LOOP_BUDGET_S:
                break
            delay = rnd.uniform(0.0, 0.15) if rnd.random() < 0.25 else rnd.uniform(0.2, 2.0)
            time.sleep(delay)
            check(b.alive(), "stratad died by itself (status %s) in trial %d:\n%s" % (b.proc.returncode, trial, b.log_tail()))
            check(prod.poll() is None, "the producer exited: %s" % open(errfile).read()[-2000:])
            b.kill()
            time.sleep(rnd.uniform(0.0, 0.4))
            if rnd.random() < 0.2:
                # once more while it recovers, before it serves
                b.start(wait=False)
                time.sleep(rnd.uniform(0.0, 0.05))
                b.kill()
                stats["startup_kills"] += 1
            b.start()
            section = start_section(b)
            check("the previous stop was not clean" in section,
                  "trial %d: the restart did not notice the unclean stop:\n%s" % (trial, section[-3000:]))
            truncs = re.findall(r"truncating segment .*", section)
            stats["truncations"] += len(truncs)
            stats["rebuilds"] += len(re.findall(r"is missing or inconsistent; rebuilding", section))
            for t in truncs:
                print("  trial %d: %s" % (trial, t))
            # Pause the writer (its acknowledgements so far are complete
            # lines), check, let it go on: retries of what was in flight at
            # the kill continue against the restarted broker.
            prod.send_signal(signal.SIGSTOP)
            acks = read_acks(ackfile)
            parts = consume(b, TOPIC, PARTITIONS, 60)
            check_acked(acks, parts, "trial %d" % trial)
            prod.send_signal(signal.SIGCONT)
            total = sum(len(r) for r in parts.values())
            print("trial %2d: killed after %.2fs; %d acked (+%d), %d records stored" %
                  (trial, delay, len(acks), len(acks) - last_acked, total), flush=True)
            last_acked = len(acks)
            stats["trials"] += 1

        # Stop the writer, let it drain, then check everything once more,
        # also across a clean restart.
        prod.send_signal(signal.SIGTERM)
        out, _ = prod.communicate(timeout=60)
        summary = out.decode().strip()
        print("producer: " + summary)
        m = re.match(r"produced (\d+) acked (\d+) failed (\d+) unacked (\d+)", summary)
        check(m, "producer summary %r\n%s" % (summary, open(errfile).read()[-2000:]))
        acks = read_acks(ackfile)
        check(len(acks) == int(m.group(2)), "%d acknowledgements in the file, the producer counted %s" %
              (len(acks), m.group(2)))
        check(len(acks) >= 10000, "only %d messages acknowledged: the test did not exercise much" % len(acks))
        rc = b.stop()
        check(rc == 0, "stratad exit status %s after SIGTERM" % rc)
        b.start()
        check("not clean" not in start_section(b), "a clean stop was taken for an unclean one")
        parts = consume(b, TOPIC, PARTITIONS, 60)
        check_acked(acks, parts, "after the clean restart")
        seen = {}
        for recs in parts.values():
            for _, k in recs:
                seen[k] = seen.get(k, 0) + 1
        stats["dups"] = sum(n - 1 for n in seen.values())
        stats["records"] = sum(len(r) for r in parts.values())
        stats["acked"] = len(acks)
        stats["produced"] = int(m.group(1))
        stats["seconds"] = time.time() - loop_start
        check(stats["trials"] >= 20, "only %d trials" % stats["trials"])
        rc = b.stop()
        check(rc == 0, "stratad exit status %s after SIGTERM" % rc)
        return stats
    finally:
        if prod.poll() is None:
            prod.kill()
            prod.wait()
        b.cleanup()


# ---- 2. hand-made torn and corrupt tails ------------------------------------

def produce_n(b, topic, n, prefix):
    ackfile = os.path.join(b.root, "acks-" + prefix)
    p = spawn([binary("rdk_acked_producer"), "-b", b.bootstrap, "-t", topic, "-o", ackfile,
               "-n", str(n), "-k", prefix, "-s", "60", "-X", "linger.ms=0",
               "-X", "batch.num.messages=20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and out.startswith(b"produced %d acked %d failed 0" % (n, n)),
          "producer: %s %s" % (out.decode(), err.decode()[-2000:]))
    acks = read_acks(ackfile)
    return sorted((o, k) for (_, o), k in acks.items())


def last_batch(b, topic):
    seg = segment_logs(b, topic, 0)[-1]
    bs = read_batches(seg)
    check(len(bs) >= 2 and os.path.getsize(seg) == bs[-1]["pos"] + bs[-1]["size"],
          "%s: expected whole batches, found %d in %d bytes" % (seg, len(bs), os.path.getsize(seg)))
    return seg, bs[-1]


def torn_tails():
    topic = "torn"
    b = Broker({"num.partitions": "1"})
    b.start()
    try:
        first = produce_n(b, topic, 500, "a")
        check([o for o, _ in first] == list(range(500)), "the first 500 were not acked at 0..499")
        rc = b.stop()
        check(rc == 0, "stratad exit status %s after SIGTERM" % rc)

        # Half a batch: cut the active segment in the middle of its last batch.
        seg, last = last_batch(b, topic)
        cut = last["pos"] + last["size"] // 2
        os.truncate(seg, cut)
        b.start()
        section = start_section(b)
        want = r"truncating segment 0*%d at byte %d \(offset %d\): torn batch" % (
            int(os.path.basename(seg)[:20]), last["pos"], last["base_offset"])
        check(re.search(want, section), "no truncation of the torn tail reported (want /%s/):\n%s" % (want, section[-3000:]))
        print("torn tail: " + re.search(r"truncating segment .*", section).group(0))
        check(os.path.getsize(seg) == last["pos"], "%s is %d bytes after recovery, expected it cut to %d" %
              (seg, os.path.getsize(seg), last["pos"]))
        keep = last["base_offset"]
        recs = consume(b, topic, 1, 60)[0]
        check(recs == first[:keep], "after cutting the tail: %d records, expected the %d before offset %d" %
              (len(recs), keep, keep))
        second = produce_n(b, topic, 100, "b")
        check([o for o, _ in second] == list(range(keep, keep + 100)),
              "new writes after the truncation went to offsets %d..%d, expected from %d" %
              (second[0][0], second[-1][0], keep))
        good = first[:keep] + second
        check(consume(b, topic, 1, 60)[0] == good, "log differs after writing past the truncation")
        print("torn tail: %d records kept, writes continue at offset %d" % (keep, keep))

        # A flipped byte inside the last batch's records, after a crash.
        b.kill()
        seg, last = last_batch(b, topic)
        at = last["pos"] + BATCH_HEADER_SIZE + (last["size"] - BATCH_HEADER_SIZE) // 2
        with open(seg, "r+b") as f:
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ 0x20]))
        b.start()
        section = start_section(b)
        check("the previous stop was not clean" in section, "the restart did not notice the kill")
        want = r"truncating segment 0*%d at byte %d \(offset %d\): CRC32C mismatch" % (
            int(os.path.basename(seg)[:20]), last["pos"], last["base_offset"])
        check(re.search(want, section), "no CRC32C truncation reported (want /%s/):\n%s" % (want, section[-3000:]))
        print("flipped byte: " + re.search(r"truncating segment .*", section).group(0))
        check(os.path.getsize(seg) == last["pos"], "%s is %d bytes after recovery, expected it cut to %d" %
              (seg, os.path.getsize(seg), last["pos"]))
        keep = last["base_offset"]
        recs = consume(b, topic, 1, 60)[0]
        check(recs == good[:keep], "after the flipped byte: %d records, expected the %d before offset %d" %
              (len(recs), keep, keep))
        third = produce_n(b, topic, 50, "c")
        check([o for o, _ in third] == list(range(keep, keep + 50)),
              "writes after the CRC truncation went to %d.., expected %d" % (third[0][0], keep))
        print("flipped byte: %d records kept, writes continue at offset %d" % (keep, keep))
        rc = b.stop()
        check(rc == 0, "stratad exit status %s after SIGTERM" % rc)
    finally:
        b.cleanup()


STEPS = sys.argv[1:] or ["kill-loop", "torn-tail"]
if not set(STEPS) <= {"kill-loop", "torn-tail"}:
    sys.exit("usage: test_crash.py [kill-loop | torn-tail]")
t0 = time.time()
if "kill-loop" in STEPS:
    stats = kill_loop()
    print("kill loop: %(trials)d trials (%(startup_kills)d with a second kill during start-up), %(produced)d produced, %(acked)d acknowledged, %(records)d "
          "records stored (%(dups)d retried duplicates), %(truncations)d truncations and %(rebuilds)d "
          "index rebuilds reported, %(seconds).1f s" % stats)
if "torn-tail" in STEPS:
    torn_tails()
print("ok: crash test (%s) in %.1f s (seed %d)" % (", ".join(STEPS), time.time() - t0, SEED))

"""
The log cleaner killed mid-pass: stratad is SIGKILLed while it writes a
cleaned segment (its .cleaned file is on disk; the cleaner's I/O is slowed
with log.cleaner.io.max.bytes.per.second so the pass lasts), then started
again.

  - the interrupted pass leaves nothing behind (no .cleaned or .swap files)
  - the log is readable and complete: every key at its latest value, at the
    offset it was written at, offsets in order
  - the restarted cleaner compacts the log to one record per key, and the
    consumer still reads every key's latest value

The crash at each later step of the swap (.swap committed, old segments
partly removed, indexes renamed) is covered by tests/unit/test_cleaner.c.
"""
import os
import signal
import time

from kwire import Conn
from strata_harness import Broker, check, fail, kcat, partition_dir, read_batches, segment_logs

TOPIC, KEYS, ROUNDS = "crashy", 300, 100


def consume(b):
    rc, out, err = kcat(b, "-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-q",
                        "-f", "%o %k %s\\n", timeout=120)
    rows = []
    for line in out.decode().splitlines():
        o, k, v = line.split(" ", 2)
        rows.append((int(o), k, v))
    return rows


def check_latest(rows, what):
    check([r[0] for r in rows] == sorted(r[0] for r in rows), what + ": offsets out of order")
    last = {}
    for o, k, v in rows:
        last[k] = (o, v)
    for k in range(KEYS):
        o, v = last.get("key-%04d" % k, (None, None))
        want = ((ROUNDS - 1) * KEYS + k, "v-%04d-%03d" % (k, ROUNDS - 1))
        check((o, v) == want, "%s: key-%04d at %s %r, want %s" % (what, k, o, v, want))


def cleaner_files(b):
    return [f for f in os.listdir(partition_dir(b, TOPIC, 0)) if f.endswith((".cleaned", ".swap"))]


b = Broker({"log.cleaner.backoff.ms": "300", "log.cleaner.io.max.bytes.per.second": "400000"}).start()
try:
    c = Conn(b.port)
    check(c.create_topic(TOPIC, 1, configs={"cleanup.policy": "compact", "segment.bytes": "65536",
                                            "min.cleanable.dirty.ratio": "0.01"}) == 0, "create topic")
    lines = "".join("key-%04d:v-%04d-%03d\n" % (k, k, r) for r in range(ROUNDS) for k in range(KEYS))
    kcat(b, "-P", "-t", TOPIC, "-p", "0", "-K", ":", "-X", "batch.num.messages=200", input=lines.encode())
    check(c.incremental_alter(TOPIC, [("segment.ms", 0, "300")])[0] == 0, "set segment.ms")
    time.sleep(0.5)
    kcat(b, "-P", "-t", TOPIC, "-p", "0", "-K", ":", input=b"sentinel:last\n")
    c.close()
    nseg = len(segment_logs(b, TOPIC, 0))

    deadline = time.time() + 60
    while not any(f.endswith(".log.cleaned") for f in cleaner_files(b)):
        if time.time() > deadline:
            fail("the cleaner never started writing:\n" + b.log_tail(30))
        time.sleep(0.02)
    # Kill at once: a pass writes one .cleaned file per group of segments and
    # renames it before the next, so a pause here can fall between groups
    # (seen on a loaded machine).  The files a SIGKILL leaves on disk show
    # where the pass stood.
    b.kill()
    cleaned = cleaner_files(b)
    check(cleaned, "the pass ended before the kill; slow the cleaner down more")
    print("SIGKILL while the cleaner wrote %s (%d segments before the pass)" % (cleaned[0], nseg),
          flush=True)

    del b.overrides["log.cleaner.io.max.bytes.per.second"]
    b.overrides["log.cleaner.enable"] = "false"
    b.start()
    check(not cleaner_files(b), "left behind after the restart: %s" % cleaner_files(b))
    rows = consume(b)
    check_latest(rows, "after the crash")
    print("after restart: no cleaner files, %d records readable, every key at its latest value"
          % len(rows), flush=True)

    # the cleaner runs again and finishes
    check(b.stop() == 0, "stratad did not stop cleanly")
    b.overrides["log.cleaner.enable"] = "true"
    b.start()

    def compacted():
        try:
            segs = segment_logs(b, TOPIC, 0)
            return len(segs) > 1 and sum(x["count"] for p in segs[:-1] for x in read_batches(p)) == KEYS
        except FileNotFoundError:
            return False

    deadline = time.time() + 60
    while not compacted():
        if time.time() > deadline:
            fail("the log was not compacted after the restart:\n" + b.log_tail(30))
        time.sleep(0.2)
    rows = consume(b)
    check(len(rows) == KEYS + 1, "consumer read %d records after compaction" % len(rows))
    check_latest(rows, "after compaction")
    print("the restarted cleaner compacted the log: %d records, one per key" % len(rows), flush=True)
finally:
    rc = b.stop()
    if rc not in (0, None, -signal.SIGKILL):
        print(b.log_tail(80))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

"""
Log compaction against a real stratad: 1,000 keys updated 100 times each
(lz4 batches from librdkafka, via kcat), tombstones for 100 of them, then
the log cleaner.

  1. After cleaning, the closed segments hold one record per key (the
     tombstones included while delete.retention.ms has not passed); the
     active segment is left alone.
  2. Offsets are not renumbered: every record kept sits at the offset it
     was written at; every batch's CRC is right; rebuilt batches are still
     lz4.
  3. A consumer reading from the start sees each key's latest value, and
     NULL for the tombstoned keys.
  4. Once delete.retention.ms has passed, the tombstones are cleaned away
     and the consumer no longer sees those keys at all.
"""
import os
import struct
import time

from kwire import Conn, crc32c
from strata_harness import Broker, check, fail, kcat, partition_dir, read_batches, segment_logs

TOPIC, KEYS, ROUNDS, TOMBS = "compacted", 1000, 100, 100
RETENTION_MS = 8000


def produce(b, lines, null_values=False):
    args = ["-P", "-t", TOPIC, "-p", "0", "-K", ":", "-X", "batch.num.messages=500", "-X", "linger.ms=20",
            "-X", "compression.codec=lz4"]
    if null_values:
        args.append("-Z")
    kcat(b, *args, input="".join(lines).encode(), timeout=120)


def closed_batches(b):
    """Batches of every segment but the active (last) one (read again when
    the cleaner swapped files meanwhile)."""
    for _ in range(50):
        try:
            out = []
            for path in segment_logs(b, TOPIC, 0)[:-1]:
                out += read_batches(path)
            return out
        except FileNotFoundError:
            time.sleep(0.05)
    fail("segment files keep changing")


def consume(b):
    """(offset, key, value or None) of every record, read by kcat from 0."""
    rc, out, err = kcat(b, "-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-q", "-Z",
                        "-f", "%o %k %s\\n", timeout=120)
    rows = []
    for line in out.decode().splitlines():
        o, k, v = line.split(" ", 2)
        rows.append((int(o), k, None if v == "NULL" else v))
    return rows


def wait_for(what, cond, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    fail("timed out waiting for " + what)


b = Broker({"log.cleaner.backoff.ms": "300"}).start()
try:
    c = Conn(b.port)
    check(c.create_topic(TOPIC, 1, configs={
        "cleanup.policy": "compact", "segment.bytes": "65536", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(RETENTION_MS)}) == 0, "create the compacted topic")
    lines = ["key-%04d:v-%04d-%03d\n" % (k, k, r) for r in range(ROUNDS) for k in range(KEYS)]
    produce(b, lines)
    produce(b, ["key-%04d:\n" % k for k in range(TOMBS)], null_values=True)
    t_tombstones = time.time()
    # roll: the next append after segment.ms starts a new active segment
    check(c.incremental_alter(TOPIC, [("segment.ms", 0, "300")])[0] == 0, "set segment.ms")
    time.sleep(0.5)
    produce(b, ["sentinel:last\n"])
    check(c.incremental_alter(TOPIC, [("segment.ms", 1, None)])[0] == 0, "reset segment.ms")
    c.close()
    total = KEYS * ROUNDS + TOMBS + 1

    # 1. one record per key in the closed segments (tombstones still there)
    def compacted():
        bs = closed_batches(b)
        n = sum(x["count"] for x in bs)
        return bs if n <= KEYS and len(segment_logs(b, TOPIC, 0)) > 1 else None

    bs = wait_for("the cleaner to compact the closed segments", compacted, 60)
    n_closed = sum(x["count"] for x in bs)
    check(time.time() - t_tombstones < RETENTION_MS / 1000, "the first pass came too late to see tombstones")
    check(n_closed == KEYS, "closed segments hold %d records, want %d (one per key)" % (n_closed, KEYS))
    segs = segment_logs(b, TOPIC, 0)
    print("cleaned: %d records written -> %d records in %d batches, %d closed segment(s) + the "
          "active one" % (total, n_closed, len(bs), len(segs) - 1), flush=True)

    # 2. offsets kept, CRCs right, lz4 kept
    for x in bs:
        want = struct.unpack(">I", x["data"][17:21])[0]
        check(crc32c(x["data"][21:]) == want, "batch at %d: CRC mismatch" % x["base_offset"])
        check(x["codec"] == 3, "batch at %d is no longer lz4" % x["base_offset"])
    rows = consume(b)
    check([r[0] for r in rows] == sorted(r[0] for r in rows), "offsets out of order")
    last_round = (ROUNDS - 1) * KEYS
    for o, k, v in rows:
        if k == "sentinel":
            check(o == total - 1, "sentinel at %d" % o)
            continue
        key = int(k[4:])
        if key < TOMBS:
            check(o == KEYS * ROUNDS + key and v is None, "tombstoned %s: offset %d value %r" % (k, o, v))
        else:
            check(o == last_round + key and v == "v-%04d-%03d" % (key, ROUNDS - 1),
                  "%s: offset %d value %r, want %d %r" % (k, o, v, last_round + key, "v-%04d-099" % key))
    check(len(rows) == KEYS + 1, "consumer read %d records" % len(rows))
    print("consumer: %d keys at their latest values and original offsets, %d tombstones as NULL"
          % (KEYS - TOMBS, TOMBS), flush=True)

    # 3. after delete.retention.ms the tombstones go
    def tombstones_gone():
        n = sum(x["count"] for x in closed_batches(b))
        return n == KEYS - TOMBS

    wait_for("the tombstones to be cleaned away", tombstones_gone, RETENTION_MS / 1000 + 30)
    waited = time.time() - t_tombstones
    check(waited >= RETENTION_MS / 1000, "tombstones removed after %.1f s, before delete.retention.ms" % waited)
    rows = consume(b)
    keys = {k for _, k, _ in rows}
    check(not any(("key-%04d" % k) in keys for k in range(TOMBS)), "tombstoned keys still read")
    check(len(rows) == KEYS - TOMBS + 1, "consumer read %d records after tombstones went" % len(rows))
    print("after %.1f s (delete.retention.ms %d): tombstones gone, %d keys left"
          % (waited, RETENTION_MS, KEYS - TOMBS), flush=True)
    check(not [f for f in os.listdir(partition_dir(b, TOPIC, 0)) if f.endswith((".cleaned", ".swap"))],
          "cleaner files left behind")
finally:
    rc = b.stop()
    if rc != 0:
        print(b.log_tail(80))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

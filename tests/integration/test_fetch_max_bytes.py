"""
Fetch's response limit (KIP-74): a response carries at most max_bytes of
record data over all partitions, each partition at most its
partition_max_bytes, except that the first batch of the first partition
with data comes whole even when it is larger than either, so a consumer
always progresses.

  1. Four partitions of 60 batches of 64 KiB each.  Fetch v5 asks for all
     four from offset 0 with max_bytes 1 MiB and partition_max_bytes
     100 MiB: the record data is at most 1 MiB and the response frame at
     most 1 MiB plus its headers.  Then again with max_bytes 1 MiB and a
     partition limit of 300 KiB: each partition at most 300 KiB.
  2. A partition whose first batch is 2.5 MiB: fetched alone with
     max_bytes 1 MiB (and a partition limit of 512 KiB), the whole batch
     comes back, and nothing more.
  3. librdkafka (kcat) with fetch.max.bytes 1 MiB, max.partition.fetch.bytes
     100 MiB and receive.message.max.bytes 1 MiB + 512 (the smallest it
     allows) reads every record of the four partitions; a response larger
     than that would be refused ("Invalid response size") and retried
     forever.
"""
import struct
import subprocess

from kwire import Conn, Cursor, batches, record_batch
from strata_harness import Broker, check, fail, frame, kcat, kstr, read_frame

TOPIC, BIG = "fmb", "fmb-big"
NPART, NBATCH, VALUE = 4, 60, 64 * 1024
MIB = 1 << 20
HEADROOM = 4096  # response header, topic and partition fields


def fetch(conn, topic, parts, max_bytes, part_max):
    """Fetch v5 of several partitions from offset 0 (or the given one):
    (frame size, {partition: (error, record bytes)})."""
    body = struct.pack(">iiiib", -1, 100, 1, max_bytes, 0) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">i", len(parts))
    for p, off in parts:
        body += struct.pack(">iqqi", p, off, -1, part_max)
    conn.corr += 1
    head = struct.pack(">hhi", 1, 5, conn.corr) + kstr("strata-test")
    conn.s.sendall(frame(head + body))
    r = read_frame(conn.s)
    if r is None:
        fail("the broker closed the connection")
    c = Cursor(r)
    check(c.take(">i") == conn.corr, "correlation id")
    c.take(">i")  # throttle
    out = {}
    for _ in range(c.take(">i")):
        c.string()
        for _ in range(c.take(">i")):
            p, err, _hw, _lso, _ls = c.take(">ihqqq")
            for _ in range(max(c.take(">i"), 0)):
                c.take(">qq")
            out[p] = (err, c.bytes_() or b"")
    return len(r) + 4, out


b = Broker({"message.max.bytes": str(4 * MIB)}).start()
try:
    conn = Conn(b.port, timeout=30)
    check(conn.create_topic(TOPIC, NPART) == 0, "create %s" % TOPIC)
    check(conn.create_topic(BIG, 1) == 0, "create %s" % BIG)
    for p in range(NPART):
        for i in range(NBATCH):
            v = (b"%d:%d:" % (p, i)).ljust(VALUE, b"x")
            err = conn.produce(TOPIC, p, record_batch([v]))[1]
            check(err == 0, "produce %s-%d: error %d" % (TOPIC, p, err))
    check(conn.produce(BIG, 0, record_batch([b"B" * (5 * MIB // 2)]))[1] == 0, "produce the big batch")
    for i in range(5):
        check(conn.produce(BIG, 0, record_batch([b"small %d" % i]))[1] == 0, "produce small")
    per_part = NBATCH * (VALUE + 100)
    print("produced %d partitions x %d batches of %d KiB (%.1f MiB), and a 2.5 MiB batch"
          % (NPART, NBATCH, VALUE // 1024, NPART * per_part / MIB), flush=True)

    # 1. the response limit, over all partitions
    size, parts = fetch(conn, TOPIC, [(p, 0) for p in range(NPART)], MIB, 100 * MIB)
    data = sum(len(d) for _e, d in parts.values())
    print("fetch max_bytes=1MiB partition_max_bytes=100MiB: response %d bytes, record data %d "
          "(per partition %s)" % (size, data, [len(parts[p][1]) for p in range(NPART)]), flush=True)
    check(all(e == 0 for e, _d in parts.values()), "errors: %s" % {p: e for p, (e, _d) in parts.items()})
    check(data <= MIB, "record data %d bytes > max_bytes %d" % (data, MIB))
    check(size <= MIB + HEADROOM, "response %d bytes > max_bytes %d + headers" % (size, MIB))
    check(data >= MIB - 2 * (VALUE + 100), "record data %d bytes: the limit was not filled" % data)
    # whole batches, then (as Kafka sends) perhaps the start of one more
    got = [bt for p in range(NPART) for bt in batches(parts[p][1])]
    whole = sum(len(bt[2]) for bt in got)
    check(got and data - whole < VALUE + 100, "whole batches: %d bytes of %d" % (whole, data))

    size, parts = fetch(conn, TOPIC, [(p, 0) for p in range(NPART)], MIB, 300 * 1024)
    lens = [len(parts[p][1]) for p in range(NPART)]
    print("fetch max_bytes=1MiB partition_max_bytes=300KiB: per partition %s" % lens, flush=True)
    check(all(n <= 300 * 1024 for n in lens) and sum(lens) <= MIB, "limits: %s" % lens)
    check(sum(1 for n in lens if n) >= 3, "the partitions share the response: %s" % lens)

    # 2. one whole first batch, however large
    for part_max in (100 * MIB, 512 * 1024):
        size, parts = fetch(conn, BIG, [(0, 0)], MIB, part_max)
        err, d = parts[0]
        bs = batches(d)
        print("fetch of a 2.5 MiB first batch, max_bytes=1MiB partition_max_bytes=%d: %d bytes, "
              "%d batch(es)" % (part_max, len(d), len(bs)), flush=True)
        check(err == 0 and len(bs) == 1 and bs[0][0] == 0 and len(d) == len(bs[0][2]),
              "want exactly the first batch, whole: error %d, %d bytes, %d batches" % (err, len(d), len(bs)))
        check(len(d) > 5 * MIB // 2, "the batch is whole")
    conn.close()

    # 3. librdkafka
    n = NPART * NBATCH
    try:
        rc, out, err = kcat(b, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%p %o\\n",
                            "-X", "fetch.max.bytes=%d" % MIB,
                            "-X", "max.partition.fetch.bytes=%d" % (100 * MIB),
                            "-X", "receive.message.max.bytes=%d" % (MIB + 512), timeout=60,
                            check_rc=False)
    except subprocess.TimeoutExpired as e:
        rc, out, err = -1, e.stdout or b"", (e.stderr or b"").decode(errors="replace")
    lines = out.decode(errors="replace").split()
    if rc != 0:
        print("kcat exit %d: %s" % (rc, " | ".join(sorted(set(err.splitlines()))[:5])), flush=True)
    seen = len(lines) // 2
    print("kcat with fetch.max.bytes=1MiB read %d of %d records" % (seen, n), flush=True)
    check(rc == 0 and seen == n, "kcat read %d of %d records" % (seen, n))
except SystemExit:
    print(b.log_tail(30))
    raise
finally:
    rc = b.stop()
    if rc != 0:
        print(b.log_tail(60))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

"""
The partition log on disk through a real stratad: segments roll at
segment.bytes and segment.ms with Kafka's file names; retention.bytes and
retention.ms changed at run time (IncrementalAlterConfigs) delete whole
closed segments; DeleteRecords moves the log start offset, which survives a
restart; fetches below it get OFFSET_OUT_OF_RANGE.
"""
import glob
import os
import time

from kwire import Conn, batches, record_batch
from strata_harness import Broker, check, fail, wait_for

b = Broker().start()
try:
    c = Conn(b.port)
    check(c.create_topic("life", 1, configs={"segment.bytes": "20000"}) == 0, "create topic")
    pdir = os.path.join(b.logdir, "life-0")
    old = int(time.time() * 1000) - 3600 * 1000  # an hour ago
    total = 0
    for i in range(200):
        vals = [("%05d-" % (i * 4 + k)).encode() + os.urandom(240) for k in range(4)]
        err, _ = c.produce("life", 0, record_batch(vals, ts=old + i), acks=1)[1:]
        check(err == 0, "produce %d: error %d" % (i, err))
        total += 4
    logs = sorted(glob.glob(os.path.join(pdir, "*.log")))
    check(len(logs) >= 8, "expected several segments, found %d" % len(logs))
    for path in logs:
        name = os.path.basename(path)
        check(len(name) == 24 and name[:20].isdigit(), "segment name %s" % name)
        base = path[:-4]
        check(os.path.exists(base + ".index") and os.path.exists(base + ".timeindex"), "indexes of %s" % name)
    for path in logs[:-1]:
        check(os.path.getsize(path) <= 20000, "%s is larger than segment.bytes" % path)
        check(os.path.getsize(path[:-4] + ".timeindex") >= 12, "closed segment without a time index entry")
    check(os.path.exists(os.path.join(pdir, "leader-epoch-checkpoint")), "no leader-epoch-checkpoint")
    check(os.path.exists(os.path.join(pdir, "partition.metadata")), "no partition.metadata")
    err, latest, _ = c.list_offsets("life", 0, -1)
    check(err == 0 and latest == total, "latest offset %d, want %d" % (latest, total))

    # every offset readable from 0, batch boundaries intact
    off, seen = 0, 0
    while off < total:
        err, hw, _, data = c.fetch("life", 0, off, max_bytes=50000)
        check(err == 0, "fetch at %d: error %d" % (off, err))
        for base, count, _raw in batches(data):
            if base + count <= off:
                continue
            check(base == off, "batch at %d while reading %d" % (base, off))
            off = base + count
            seen += count
    check(seen == total, "read %d of %d records" % (seen, total))

    # retention.bytes at run time: only whole closed segments go
    err, msg = c.incremental_alter("life", [("retention.bytes", 0, "60000")])
    check(err == 0, "alter retention.bytes: %d %s" % (err, msg))
    wait_for(lambda: c.list_offsets("life", 0, -2)[1] > 0, 20, what="retention.bytes to delete segments")
    remaining = sum(os.path.getsize(p) for p in glob.glob(os.path.join(pdir, "*.log")))
    check(remaining <= 60000 + 20000, "%d bytes left after retention.bytes=60000" % remaining)
    start = c.list_offsets("life", 0, -2)[1]
    err, _, lstart, data = c.fetch("life", 0, start)
    check(err == 0 and lstart == start and batches(data)[0][0] == start, "first offset after retention")
    err = c.fetch("life", 0, start - 1)[0]
    check(err == 1, "fetch below the log start: error %d, want OFFSET_OUT_OF_RANGE" % err)

    # DeleteRecords in the middle of a segment
    target = start + (latest - start) // 2 + 1
    err, low = c.delete_records("life", 0, target)
    check(err == 0 and low == target, "DeleteRecords: error %d low %d want %d" % (err, low, target))
    check(c.list_offsets("life", 0, -2)[1] == target, "earliest after DeleteRecords")
    check(c.fetch("life", 0, target - 1)[0] == 1, "fetch below DeleteRecords offset")
    err = c.delete_records("life", 0, latest + 10)[0]
    check(err == 1, "DeleteRecords past the end: error %d, want OFFSET_OUT_OF_RANGE" % err)
    c.close()

    # the new log start survives a restart (clean and unclean)
    check(b.stop() == 0, "clean stop")
    b.start()
    c = Conn(b.port)
    check(c.list_offsets("life", 0, -2)[1] == target, "earliest after a clean restart")
    c.close()
    b.kill()
    b.start()
    c = Conn(b.port)
    check(c.list_offsets("life", 0, -2)[1] == target, "earliest after kill -9")
    check(c.list_offsets("life", 0, -1)[1] == total, "latest after kill -9")

    # retention.ms: records an hour old go once the limit is a minute
    err, msg = c.incremental_alter("life", [("retention.ms", 0, "60000"), ("retention.bytes", 1, None)])
    check(err == 0, "alter retention.ms: %d %s" % (err, msg))
    wait_for(lambda: len(glob.glob(os.path.join(pdir, "*.log"))) == 1, 20, what="retention.ms to delete old segments")

    # segment.ms rolls an idle segment at the next append
    check(c.create_topic("aged", 1, configs={"segment.ms": "300"}) == 0, "create aged")
    c.produce("aged", 0, record_batch([b"first"]), acks=1)
    time.sleep(0.6)
    c.produce("aged", 0, record_batch([b"second"]), acks=1)
    n = len(glob.glob(os.path.join(b.logdir, "aged-0", "*.log")))
    check(n == 2, "segment.ms=300: %d segments, want 2" % n)

    # a bad topic config is refused with INVALID_CONFIG (40)
    err, msg = c.incremental_alter("life", [("segment.bytes", 0, "tiny")])
    check(err == 40, "bad segment.bytes: error %d" % err)
    err, msg = c.incremental_alter("life", [("no.such.config", 0, "1")])
    check(err == 40, "unknown config: error %d" % err)
    c.close()
    print("ok: %d records; roll, retention by bytes and time, DeleteRecords across restarts" % total)
finally:
    rc = b.stop()
    if rc != 0:
        fail("stratad exit status %s" % rc)
    b.cleanup()

"""
Tiered storage through an S3 outage (issue 4): radosgw is stopped and
started again while stratad writes and reads.  The test starts an RGW of
its own (tests/s3/rgw.sh), since it stops it.

The broker tiers a 2-partition topic (segment.bytes 1 MiB,
local.retention.bytes 2 MiB, task interval 500 ms) with a chunk cache of
4 MiB on disk (none in memory) and two attempts per S3 request, so that
failures show quickly, and a failing segment's retry wait capped at 4 s
(remote.log.manager.task.retry.backoff.max.ms, 30 s by default), so that
the outage reaches the cap and the uploads resume within seconds of
radosgw's return instead of up to 30 s later.

1. Writes go on.  rdk_acked_producer writes about 1 MB/s (acks=all).  Once
   the bucket holds segments, radosgw is stopped for STRATA_TIER_OUTAGE_S
   (20) seconds, long enough for about 10 segments a partition to pile
   up.  Meanwhile, sampled every 0.2 s: acknowledgements keep coming;
   ListOffsets -5 (latest tiered) does not move; no local segment
   disappears unless the segment after it starts at or below the tiered
   end + 1 (nothing is deleted locally that the bucket does not hold); the
   local segments pile up past local.retention.bytes.  After radosgw is
   back, the uploads catch up (every closed segment in the bucket, the
   directories back to a few segments).  The writer stops; the whole topic
   is read back: offsets 0..n-1, values intact, every acknowledged
   message at its offset; the manifests name only objects that exist.
2. Reads go on.  With nothing being written, two rdk_replay consumers run
   at a capped rate: one from offset 0 (the bucket), one from the local
   start (local segments only, at a rate that keeps it reading until 10 s
   after the outage).  When the first has read a few MB, radosgw is
   stopped for STRATA_TIER_READ_OUTAGE_S (8) seconds: a raw Fetch of an
   offset in the bucket that is not cached answers KAFKA_STORAGE_ERROR
   (56, retriable), a raw Fetch of a local offset answers data, and the
   local reader is still reading when radosgw comes back.  The remote
   consumer saw the storage error (librdkafka backs off and retries it;
   its fetch debug log says so) and finishes with every message; the
   local one finishes with no error of any kind.
"""
import os
import signal
import subprocess
import threading
import time

from kwire import EARLIEST_LOCAL, LATEST_TIERED, Conn, batches, list_offsets_v9
from strata_harness import (Broker, Bucket, Rgw, binary, check, check_acked_topic, check_replay,
                            acked_value, fail, manifest_problems, read_ack_file, s3_overrides,
                            segment_logs, spawn, tiered_overrides, wait_for)

OUTAGE_S = float(os.environ.get("STRATA_TIER_OUTAGE_S", "20"))
READ_OUTAGE_S = float(os.environ.get("STRATA_TIER_READ_OUTAGE_S", "8"))
TOPIC, PARTS, SIZE = "outage", 2, 1000
SEG, LOCAL = 1 << 20, 2 << 20

t_start = time.time()
rgw = Rgw().start()
print("rgw up in %.1f s" % (time.time() - t_start), flush=True)
b = Broker(tiered_overrides(s3_overrides(rgw.env), num_partitions=PARTS, log_segment_bytes=SEG,
                            log_local_retention_bytes=LOCAL, remote_log_fetch_chunk_bytes=256 * 1024,
                            remote_log_cache_size_bytes=4 << 20, remote_log_cache_memory_bytes=0,
                            remote_log_fetch_readahead_chunks=2,
                            objectstore_s3_retry_attempts=2, objectstore_s3_connect_timeout_ms=1000,
                            remote_log_manager_task_retry_backoff_max_ms=4000))
bucket = Bucket(b.overrides)
prod = None


def local_bases(p):
    return [int(os.path.basename(x)[:20]) for x in segment_logs(b, TOPIC, p)]


def tiered_end(c, p):
    err, off, _ = list_offsets_v9(c, TOPIC, p, LATEST_TIERED)
    check(err == 0, "ListOffsets -5: error %d" % err)
    return off


def settled(p):
    prefix = bucket.partition_prefix(TOPIC, p)
    man = bucket.manifest(prefix) if prefix else None
    bases = local_bases(p)
    return (man is not None and man["segments"] and bases and
            man["segments"][-1]["last_offset"] + 1 == bases[-1] and len(bases) <= LOCAL // SEG + 2)


def acked_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


try:
    b.start()
    c = Conn(b.port, timeout=60)
    check(c.create_topic(TOPIC, PARTS, configs={"remote.storage.enable": "true"}) == 0, "CreateTopics")

    # ---- 1. writes through an outage ------------------------------------------
    ackfile = os.path.join(b.root, "acks")
    errfile = open(os.path.join(b.root, "producer.stderr"), "w")
    prod = spawn([binary("rdk_acked_producer"), "-b", b.bootstrap, "-t", TOPIC, "-o", ackfile, "-p", str(PARTS),
                  "-r", "1000", "-s", str(SIZE), "-X", "linger.ms=5"], stdout=subprocess.PIPE, stderr=errfile)
    wait_for(lambda: all(bucket.partition_prefix(TOPIC, p) and len(local_bases(p)) >= 2 for p in range(PARTS))
             and all(tiered_end(c, p) > 0 for p in range(PARTS)), timeout=90, interval=0.5,
             what="the first segments in the bucket")
    frozen = [tiered_end(c, p) for p in range(PARTS)]
    acks_before = acked_lines(ackfile)
    rgw.gw_stop()
    t_down = time.time()
    print("radosgw stopped; tiered ends %s, %d acknowledged so far" % (frozen, acks_before), flush=True)

    seen = [dict() for _ in range(PARTS)]  # base -> still there
    violations, peak = [], [0] * PARTS

    def watch(until):
        while time.time() < until:
            for p in range(PARTS):
                tiered = tiered_end(c, p)
                if tiered != frozen[p]:
                    violations.append("partition %d: tiered end moved to %d during the outage" % (p, tiered))
                now = set(local_bases(p))
                for base in now:
                    seen[p][base] = True
                order = sorted(seen[p])
                for i, base in enumerate(order[:-1]):
                    if seen[p][base] and base not in now:
                        seen[p][base] = False
                        if order[i + 1] > tiered + 1:
                            violations.append("partition %d: local segment %d (up to %d) deleted while the bucket "
                                              "ends at %d" % (p, base, order[i + 1] - 1, tiered))
                peak[p] = max(peak[p], len(now))
            time.sleep(0.2)

    watch(t_down + OUTAGE_S)
    check(not violations, "; ".join(violations[:5]))
    acks_during = acked_lines(ackfile) - acks_before
    check(prod.poll() is None, "the producer stopped during the outage")
    check(acks_during >= OUTAGE_S * 1000 * 0.5, "only %d writes acknowledged during %.0f s of outage" %
          (acks_during, OUTAGE_S))
    check(all(n > LOCAL // SEG + 2 for n in peak), "local segments did not pile up during the outage: %s" % peak)
    failures = [l for l in b.log_text().splitlines() if "tiering" in l and "WARN" in l]
    check(failures, "no failed upload was logged during the outage")
    print("outage of %.0f s: %d writes acknowledged meanwhile, tiered ends stayed at %s, up to %s local segments "
          "kept, nothing deleted that the bucket lacks; the broker logged e.g.: %s" %
          (time.time() - t_down, acks_during, frozen, peak, failures[0][-160:]), flush=True)
    rgw.gw_start()
    t_up = time.time()
    wait_for(lambda: all(settled(p) for p in range(PARTS)), timeout=120, interval=0.25,
             what="the uploads to catch up after radosgw came back")
    print("caught up %.1f s after radosgw came back: tiered ends %s" %
          (time.time() - t_up, [tiered_end(c, p) for p in range(PARTS)]), flush=True)
    prod.send_signal(signal.SIGTERM)
    out, _ = prod.communicate(timeout=60)
    print("producer: " + out.decode().strip(), flush=True)
    check(b" failed 0 " in out, "the producer had failed deliveries: %s" % out.decode())
    acks = read_ack_file(ackfile)
    ends = check_acked_topic(b, TOPIC, PARTS, SIZE, acks, "after the outage")
    for p in range(PARTS):
        prefix = bucket.partition_prefix(TOPIC, p)
        problems, _ = manifest_problems(bucket.manifest(prefix), bucket.ls(prefix), prefix)
        check(not problems, "partition %d: %s" % (p, "; ".join(problems[:5])))
    print("replay after the outage: %s messages, all %d acknowledged ones in place" % (ends, len(acks)), flush=True)

    # ---- 2. reads through an outage --------------------------------------------
    local_start = [list_offsets_v9(c, TOPIC, p, EARLIEST_LOCAL)[1] for p in range(PARTS)]
    tiered = [tiered_end(c, p) for p in range(PARTS)]
    check(all(tiered[p] > 1000 for p in range(PARTS)), "too little in the bucket: %s" % tiered)
    slow = ["-X", "debug=fetch", "-X", "fetch.max.bytes=1048576", "-X", "max.partition.fetch.bytes=262144",
            "-X", "queued.max.messages.kbytes=1024", "-X", "fetch.error.backoff.ms=200"]
    rdir, ldir = os.path.join(b.root, "remote-read"), os.path.join(b.root, "local-read")
    os.makedirs(rdir)
    os.makedirs(ldir)
    # The local reader spreads what it reads (about SIZE + 18 bytes a
    # message) over the outage and 10 s more, so it reads through all of it.
    local_bytes = sum(ends[p] - max(local_start) for p in range(PARTS)) * (SIZE + 18)
    local_rate = max(1000, int(local_bytes / (READ_OUTAGE_S + 10)))
    remote = spawn([binary("rdk_replay"), "-b", b.bootstrap, "-t", TOPIC, "-d", rdir, "-r", "3000000", "-T", "240"]
                   + slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    local = spawn([binary("rdk_replay"), "-b", b.bootstrap, "-t", TOPIC, "-d", ldir, "-o", str(max(local_start)),
                   "-r", str(local_rate), "-T", "240"] + slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read_mb(d):
        return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) / 1e6

    wait_for(lambda: read_mb(rdir) > 4, timeout=60, what="the remote reader to get going")
    rgw.gw_stop()
    t_down = time.time()
    at_stop = read_mb(rdir)
    # An offset in the bucket far ahead of the reader and before the tail
    # the last replay left in the cache.
    probe = tiered[1] * 2 // 3
    got = None
    deadline = time.time() + READ_OUTAGE_S
    while time.time() < deadline and got is None:
        err, _, _, data = c.fetch(TOPIC, 1, probe, max_wait=2000)
        if err:
            got = err
    check(got == 56, "a fetch from the bucket while radosgw is down answered %s, want KAFKA_STORAGE_ERROR (56)" % got)
    err, _, _, data = c.fetch(TOPIC, 0, local_start[0] + 1)
    check(err == 0 and batches(data), "a local fetch during the outage: error %d, %d bytes" % (err, len(data or b"")))
    print("radosgw stopped during the replay (%.1f MB read): a fetch of offset %d from the bucket answered "
          "KAFKA_STORAGE_ERROR after %.1f s, a local fetch answered data" % (at_stop, probe, time.time() - t_down),
          flush=True)
    time.sleep(max(0.0, t_down + READ_OUTAGE_S - time.time()))
    during = read_mb(rdir) - at_stop
    check(local.poll() is None, "the local reader finished before radosgw came back (%.1f MB at %d bytes/s)" %
          (local_bytes / 1e6, local_rate))
    rgw.gw_start()
    results = {}
    for name, proc, d, first in (("remote", remote, rdir, None), ("local", local, ldir, max(local_start))):
        out, err = proc.communicate(timeout=300)
        check(proc.returncode == 0, "%s reader exited %d: %s %s" % (name, proc.returncode, out.decode(), err.decode()[-2000:]))
        fields = out.decode().split()
        results[name] = dict(zip(fields[0::2], fields[1::2]))
        for p in range(PARTS):
            start = 0 if first is None else first
            path = os.path.join(d, str(p))
            with open(path, "rb") as f:
                lines = f.read().split(b"\n")[:-1]
            check(len(lines) == ends[p] - start, "%s reader, partition %d: %d messages from %d, want %d" %
                  (name, p, len(lines), start, ends[p] - start))
            for i, line in enumerate(lines):
                off, _, v = line.partition(b" ")
                check(int(off) == start + i, "%s reader, partition %d: offset %s where %d was due" % (name, p, off, start + i))
                k = v.split(b".", 1)[0]
                check(v == acked_value(k, SIZE), "%s reader: %d-%s damaged" % (name, p, off))
        print("%s reader: %s" % (name, out.decode().strip()), flush=True)
    check(int(results["remote"]["storage_errors"]) > 0,
          "the remote reader never heard of the storage error (read %.1f MB during the outage)" % during)
    check(results["local"]["errors"] == "0" and results["local"]["storage_errors"] == "0",
          "the local reader saw errors: %s" % results["local"])
    check(results["remote"]["errors"] == "0", "the remote reader got errors it could not retry: %s" % results["remote"])
    print("reads through the outage: the remote reader backed off on KAFKA_STORAGE_ERROR %s times and resumed, "
          "the local reader saw none" % results["remote"]["storage_errors"])
    c.close()
    check(b.stop() == 0, "clean stop")
    print("ok: tiering through S3 outages in %.1f s" % (time.time() - t_start))
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    if prod and prod.poll() is None:
        prod.kill()
        prod.wait()
    b.cleanup()
    rgw.stop()

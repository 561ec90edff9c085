"""
Tiered storage end to end (issue 4), against a real object store.

usage: test_tiering.py rgw ENVFILE     (an RGW started by tests/s3/rgw.sh)
       test_tiering.py file            (the file backend in a temporary dir)

A 3-partition topic with segment.bytes 1 MiB, local.retention.bytes 2 MiB
and remote.storage.enable; remote.log.manager.task.interval.ms 500; chunks
of 256 KiB, so that batches (up to 1 MB) cross chunk ends and read-ahead
crosses segment ends.

1. kcat produces STRATA_TIER_MB (200) MiB of line messages of random
   length, one kcat per partition (partition 0 with large batches, 1 with
   small ones, 2 lz4-compressed).  Soon after the last write, the bucket's
   manifest of every partition covers every closed segment, each named
   segment has its four objects (the .log of the manifest's size), nothing
   else is there, and the partition directories keep only the last few
   segments.  ListOffsets v9: earliest (-2) = the manifest's log start (0),
   earliest local (-4) = the oldest local segment, latest tiered (-5) = the
   manifest's last offset, latest (-1) = the count produced.
   Beside it, topic TIMES (64 KiB segments and local retention): 300
   batches of 10 records, batch k at offsets 10k.. with timestamp
   T0 + 100k; once most of it is in the bucket, ListOffsets by timestamp
   into the remote part answers the exact record (10k for T0 + 100k and
   for just below it, 10(k+1) for just above), with its timestamp: the
   remote time index and the batches it points to are read, not just the
   manifest.  Again after the restart of step 3.
2. kcat (per partition) and rdk_replay (librdkafka, all partitions at
   once) read from offset 0: every message comes back byte for byte, at
   offsets 0..n-1, in order.
3. Clean stop; the local segments the bucket holds are deleted (and
   partition 1's cached manifest, so its manifest comes from the bucket);
   restart: the same replays return everything again.
4. DeleteRecords below the local start (partition 0, inside the third
   remote segment): the low watermark and ListOffsets -2 move there, the
   manifest's log start follows and the segments wholly below leave the
   manifest and the bucket; a fetch below answers OFFSET_OUT_OF_RANGE (and
   kcat placed below resets to the new start); a replay starts there; a
   restart keeps it.  DeleteRecords above the local
   start (partition 1) empties the remote part.
5. Partition 2's directory is lost while the broker is down: the restart
   serves exactly what the bucket holds and new writes go on after it.
6. DeleteTopics removes every object of the topic from the bucket.
"""
import base64
import os
import random
import shutil
import subprocess
import sys
import threading
import time

from kwire import (EARLIEST, EARLIEST_LOCAL, LATEST, LATEST_TIERED, Conn, batches, delete_topic,
                   list_offsets_v9, record_batch)
from strata_harness import (Broker, Bucket, binary, check, check_replay, fail, file_overrides, kcat,
                            line_messages, manifest_problems, partition_dir, rgw_env, s3_overrides,
                            segment_logs, spawn, tiered_overrides, wait_for)

if len(sys.argv) < 2 or sys.argv[1] not in ("rgw", "file") or (sys.argv[1] == "rgw" and len(sys.argv) < 3):
    sys.exit("usage: test_tiering.py rgw ENVFILE | file")
BACKEND = sys.argv[1]
TOTAL_MB = int(os.environ.get("STRATA_TIER_MB", "200"))
PARTS = 3
SEG = 1 << 20
LOCAL = 2 << 20
TASK_MS = 500
SEED = int(os.environ.get("STRATA_TIER_SEED", str(int(time.time()) % 100000)))
rnd = random.Random(SEED)
TOPIC = "tier-e2e-%05d" % rnd.randrange(100000)
print("backend %s, %d MiB, topic %s, seed %d" % (BACKEND, TOTAL_MB, TOPIC, SEED), flush=True)

t_start = time.time()
b = Broker()
if BACKEND == "rgw":
    store = s3_overrides(rgw_env(sys.argv[2]))
else:
    store = file_overrides(os.path.join(b.root, "bucket"))
b.overrides = tiered_overrides(store, num_partitions=PARTS, remote_log_manager_task_interval_ms=TASK_MS,
                               remote_log_fetch_chunk_bytes=256 * 1024,
                               remote_log_cache_size_bytes=64 << 20)
bucket = Bucket(b.overrides)
work = os.path.join(b.root, "work")
os.makedirs(work)


def make_data():
    """Per partition a file of lines (the messages), TOTAL_MB MiB in all."""
    files, msgs = [], []
    per_part = (TOTAL_MB << 20) // PARTS
    for p in range(PARTS):
        path = os.path.join(work, "in-%d" % p)
        size, n = 0, 0
        with open(path, "wb") as f:
            while size < per_part:
                # base64 of random bytes: no newline, hardly compressible
                raw = os.urandom(rnd.choice((rnd.randint(10, 300), rnd.randint(300, 3000))))
                line = b"%d-%08d-" % (p, n) + base64.b64encode(raw) + b"\n"
                f.write(line)
                size += len(line)
                n += 1
        files.append(path)
        msgs.append(line_messages(path))
    return files, msgs


def local_bases(p):
    return [int(os.path.basename(x)[:20]) for x in segment_logs(b, TOPIC, p)]


def offsets(c, p):
    out = {}
    for name, ts in (("earliest", EARLIEST), ("local", EARLIEST_LOCAL), ("tiered", LATEST_TIERED),
                     ("latest", LATEST)):
        err, off, _epoch = list_offsets_v9(c, TOPIC, p, ts)
        check(err == 0, "ListOffsets %d on partition %d: error %d" % (ts, p, err))
        out[name] = off
    return out


def bucket_state(p):
    """(manifest, objects under the partition's prefix, prefix)."""
    prefix = bucket.partition_prefix(TOPIC, p)
    if prefix is None:
        return None, {}, None
    return bucket.manifest(prefix), bucket.ls(prefix), prefix


TIMES = TOPIC + "-times"
T0 = int(time.time() * 1000) - 3600 * 1000
TIMES_BATCHES = 300


def produce_times(c):
    err = c.create_topic(TIMES, 1, configs={"remote.storage.enable": "true", "segment.bytes": str(64 << 10),
                                            "local.retention.bytes": str(64 << 10)})
    check(err == 0, "CreateTopics %s: error %d" % (TIMES, err))
    for k in range(TIMES_BATCHES):
        values = [b"%06d-" % (10 * k + i) + b"t" * 480 for i in range(10)]
        _, err, base = c.produce(TIMES, 0, record_batch(values, ts=T0 + 100 * k))
        check(err == 0 and base == 10 * k, "produce to %s: error %d base %d, want %d" % (TIMES, err, base, 10 * k))
    wait_for(lambda: list_offsets_v9(c, TIMES, 0, EARLIEST_LOCAL)[1] >= 10 * TIMES_BATCHES * 3 // 4, timeout=60,
             what="%s to be mostly in the bucket" % TIMES)


def check_times(c, tag):
    """ListOffsets by timestamp into the remote part of TIMES is exact."""
    local = list_offsets_v9(c, TIMES, 0, EARLIEST_LOCAL)[1]
    ks = sorted(random.Random(SEED).sample(range(1, local // 10 - 1), 12))
    for k in ks:
        for target, want in ((T0 + 100 * k, 10 * k), (T0 + 100 * k - 37, 10 * k), (T0 + 100 * k + 1, 10 * (k + 1))):
            err, off, ts = c.list_offsets(TIMES, 0, target)
            check(err == 0 and off == want and ts == T0 + 100 * (want // 10),
                  "%s: ListOffsets(%d) = error %d offset %d timestamp %d, want offset %d timestamp %d" %
                  (tag, target, err, off, ts, want, T0 + 100 * (want // 10)))
    err, off, _ = c.list_offsets(TIMES, 0, T0 - 5000)
    check(err == 0 and off == 0, "%s: ListOffsets older than every record: error %d offset %d" % (tag, err, off))
    err, off, _ = c.list_offsets(TIMES, 0, T0 + 100 * TIMES_BATCHES + 5000)
    check(err == 0 and off == -1, "%s: ListOffsets newer than every record: error %d offset %d" % (tag, err, off))
    print("%s: ListOffsets by timestamp exact at %d remote batches of %s (local from %d), e.g. batch %d -> offset %d" %
          (tag, len(ks), TIMES, local, ks[0], 10 * ks[0]), flush=True)


def settled(p):
    """The bucket holds every closed segment and the directory keeps only
    the last few."""
    man, _, _ = bucket_state(p)
    bases = local_bases(p)
    if not man or not man["segments"] or not bases:
        return False
    remote_end = man["segments"][-1]["last_offset"] + 1
    return remote_end == bases[-1] and len(bases) <= LOCAL // SEG + 2


def replay_kcat(tag, first=None):
    """kcat from the beginning of every partition; checks each against
    what was produced.  first: {partition: first offset expected}."""
    t0 = time.time()
    nbytes = 0
    for p in range(PARTS):
        out = os.path.join(work, "%s-kcat-%d" % (tag, p))
        with open(out, "wb") as f:
            try:
                subprocess.run(["kcat", "-b", b.bootstrap, "-C", "-t", TOPIC, "-p", str(p), "-o", "beginning",
                                "-e", "-q", "-f", "%o %s\\n"], stdout=f, stderr=subprocess.PIPE, timeout=300,
                               check=True)
            except subprocess.CalledProcessError as e:
                fail("%s: kcat on partition %d exited %d: %s" % (tag, p, e.returncode, e.stderr.decode()[-2000:]))
        check_replay(out, expected[p], (first or {}).get(p, 0), "%s: kcat partition %d" % (tag, p))
        nbytes += os.path.getsize(out)
        os.unlink(out)
    secs = time.time() - t0
    print("%s: kcat read every partition back identical: %.1f MB in %.1f s (%.1f MB/s of output)" %
          (tag, nbytes / 1e6, secs, nbytes / 1e6 / secs), flush=True)


def replay_rdk(tag):
    out = os.path.join(work, tag + "-rdk")
    os.makedirs(out)
    p = subprocess.run([binary("rdk_replay"), "-b", b.bootstrap, "-t", TOPIC, "-d", out, "-T", "300"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=330)
    check(p.returncode == 0, "%s: rdk_replay exited %d: %s %s" % (tag, p.returncode, p.stdout.decode(),
                                                                   p.stderr.decode()[-2000:]))
    for part in range(PARTS):
        check_replay(os.path.join(out, str(part)), expected[part], 0, "%s: rdk_replay partition %d" % (tag, part))
    shutil.rmtree(out)
    print("%s: rdk_replay read every partition back identical: %s" % (tag, p.stdout.decode().strip()), flush=True)


try:
    files, expected = make_data()
    counts = [len(m) for m in expected]
    print("data: %s messages per partition, %.1f MB in all" %
          (counts, sum(os.path.getsize(f) for f in files) / 1e6), flush=True)
    b.start()
    c = Conn(b.port, timeout=60)
    err = c.create_topic(TOPIC, PARTS, configs={"remote.storage.enable": "true", "segment.bytes": str(SEG),
                                                "local.retention.bytes": str(LOCAL)})
    check(err == 0, "CreateTopics: error %d" % err)

    # ---- 1. produce; the bucket takes the closed segments -----------------
    peak = [0] * PARTS
    sampling = [True]

    def sample():
        while sampling[0]:
            for p in range(PARTS):
                try:
                    peak[p] = max(peak[p], sum(os.path.getsize(x) for x in segment_logs(b, TOPIC, p)))
                except OSError:
                    pass  # a segment deleted while we looked
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    extra = [["-X", "batch.size=1000000", "-X", "linger.ms=20"], ["-X", "batch.size=16384", "-X", "linger.ms=1"],
             ["-z", "lz4"]]
    t0 = time.time()
    producers = []
    for p in range(PARTS):
        with open(files[p], "rb") as f:
            producers.append(spawn(["kcat", "-b", b.bootstrap, "-P", "-t", TOPIC, "-p", str(p)] + extra[p],
                                   stdin=f, stderr=subprocess.PIPE))
    for p, proc in enumerate(producers):
        _, errs = proc.communicate(timeout=600)
        check(proc.returncode == 0, "kcat -P partition %d exited %d: %s" % (p, proc.returncode, errs.decode()[-2000:]))
    t_produced = time.time()
    print("produce: %.1f s (%.1f MB/s); local bytes peaked at %s per partition" %
          (t_produced - t0, TOTAL_MB * 1.048576 / (t_produced - t0), peak), flush=True)
    wait_for(lambda: all(settled(p) for p in range(PARTS)), timeout=120, interval=0.25,
             what="the bucket to hold every closed segment and the local dirs to shrink")
    lag = time.time() - t_produced
    sampling[0] = False
    sampler.join()
    print("settled %.2f s after the last write (task interval %d ms, retention check 1000 ms)" %
          (lag, TASK_MS), flush=True)
    check(lag < 30, "the bucket took %.1f s to catch up after the last write" % lag)

    remote_segments = 0
    for p in range(PARTS):
        man, objs, prefix = bucket_state(p)
        problems, orphans = manifest_problems(man, objs, prefix)
        check(not problems, "partition %d: %s" % (p, "; ".join(problems[:5])))
        check(not orphans, "partition %d: objects no manifest names: %s" % (p, orphans[:5]))
        check(man["segments"][0]["base_offset"] == 0 and man["log_start_offset"] == 0,
              "partition %d: the remote log does not start at 0: %s" % (p, man["segments"][0]))
        for s in man["segments"]:
            check(s["size"] <= SEG, "partition %d: remote segment %d is %d bytes" % (p, s["base_offset"], s["size"]))
            check(s["state"] == "COPY_SEGMENT_FINISHED", "segment state %s" % s["state"])
        o = offsets(c, p)
        bases = local_bases(p)
        remote_end = man["segments"][-1]["last_offset"] + 1
        check(o["earliest"] == man["log_start_offset"] == 0, "partition %d: ListOffsets -2 = %d" % (p, o["earliest"]))
        check(o["local"] == bases[0], "partition %d: ListOffsets -4 = %d, oldest local segment %d" %
              (p, o["local"], bases[0]))
        check(o["tiered"] == remote_end - 1, "partition %d: ListOffsets -5 = %d, manifest ends at %d" %
              (p, o["tiered"], remote_end - 1))
        check(o["latest"] == counts[p], "partition %d: ListOffsets -1 = %d, produced %d" % (p, o["latest"], counts[p]))
        check(0 < o["local"] <= o["tiered"] + 1, "partition %d: local part [%d..) and remote part [0, %d] do not meet" %
              (p, o["local"], o["tiered"]))
        remote_segments += len(man["segments"])
        print("partition %d: %d segments (%.1f MB) in the bucket, %d local %s; offsets %s" %
              (p, len(man["segments"]), sum(s["size"] for s in man["segments"]) / 1e6, len(bases), bases, o), flush=True)

    produce_times(c)
    check_times(c, "tiered")

    # ---- 2. replay from offset 0 --------------------------------------------
    replay_kcat("replay")
    replay_rdk("replay")

    # ---- 3. restart without the local segments the bucket holds -------------
    check(b.stop() == 0, "clean stop")
    removed = 0
    for p in range(PARTS):
        man, _, _ = bucket_state(p)
        remote_end = man["segments"][-1]["last_offset"] + 1
        paths = segment_logs(b, TOPIC, p)
        for path, nxt in zip(paths, paths[1:]):
            if int(os.path.basename(nxt)[:20]) <= remote_end:  # wholly in the bucket
                for ext in (".log", ".index", ".timeindex"):
                    os.unlink(path[:-4] + ext)
                removed += 1
    os.unlink(os.path.join(partition_dir(b, TOPIC, 1), "remote-manifest.json"))
    print("restart: %d local segments the bucket holds deleted; partition 1 without its cached manifest" % removed)
    b.start()
    c = Conn(b.port, timeout=60)
    for p in range(PARTS):
        o = offsets(c, p)
        check(o["earliest"] == 0 and o["latest"] == counts[p], "after the restart, partition %d: %s" % (p, o))
    replay_kcat("after restart")
    replay_rdk("after restart")
    check_times(c, "after restart")

    # ---- 4. DeleteRecords across the tiers --------------------------------------
    man, objs, prefix = bucket_state(0)
    segs = man["segments"]
    check(len(segs) >= 4, "partition 0 has only %d remote segments" % len(segs))
    target = segs[2]["base_offset"] + (segs[2]["last_offset"] - segs[2]["base_offset"]) // 2
    local_start = offsets(c, 0)["local"]
    check(target < local_start, "DeleteRecords target %d is not below the local start %d" % (target, local_start))
    err, low = c.delete_records(TOPIC, 0, target)
    check(err == 0 and low == target, "DeleteRecords(0, %d): error %d low watermark %d" % (target, err, low))
    wait_for(lambda: offsets(c, 0)["earliest"] == target, timeout=30, what="ListOffsets -2 to reach %d" % target)
    gone = ["%s%020d-%s.%s" % (prefix, s["base_offset"], s["id"], k) for s in segs[:2] for k in ("log", "index", "timeindex", "epochs")]

    def deleted():
        m, o, _ = bucket_state(0)
        return (m["log_start_offset"] == target and m["segments"][0]["base_offset"] == segs[2]["base_offset"]
                and not any(k in o for k in gone))

    wait_for(deleted, timeout=30, what="the manifest and the bucket to drop the segments below %d" % target)
    check(offsets(c, 0)["local"] == local_start, "DeleteRecords below the local start moved the local start")
    err, _, lstart, _ = c.fetch(TOPIC, 0, target - 1)
    check(err == 1, "fetch at %d below the log start: error %d, want OFFSET_OUT_OF_RANGE" % (target - 1, err))
    err, _, lstart, data = c.fetch(TOPIC, 0, target, max_bytes=2 << 20, max_wait=5000)
    check(err == 0 and lstart == target, "fetch at %d: error %d log start %d" % (target, err, lstart))
    bs = batches(data)
    check(bs and bs[0][0] <= target < bs[0][0] + bs[0][1], "fetch at %d got batches %s" % (target, [x[:2] for x in bs[:3]]))
    # A client positioned below the new start hears OFFSET_OUT_OF_RANGE and
    # resets to it.
    _, got, _ = kcat(b, "-C", "-t", TOPIC, "-p", "0", "-o", "5", "-c", "1", "-q", "-X", "auto.offset.reset=earliest",
                     "-f", "%o\\n", timeout=60)
    check(got == b"%d\n" % target, "kcat at offset 5, below the log start %d, reset to %r" % (target, got))
    print("DeleteRecords(0, %d): low watermark %d, 2 remote segments and their 8 objects gone, local start "
          "still %d" % (target, low, local_start), flush=True)

    p1_local = offsets(c, 1)["local"]
    target1 = p1_local + 10
    err, low = c.delete_records(TOPIC, 1, target1)
    check(err == 0 and low == target1, "DeleteRecords(1, %d): error %d low %d" % (target1, err, low))

    def emptied():
        m, o, pre = bucket_state(1)
        return not m["segments"] and m["log_start_offset"] >= p1_local and set(o) == {pre + "manifest.json"}

    wait_for(emptied, timeout=30, what="partition 1's remote segments to go after DeleteRecords above the local start")
    o1 = offsets(c, 1)
    check(o1["earliest"] == target1 and o1["tiered"] == -1, "partition 1 after DeleteRecords(%d): %s" % (target1, o1))
    print("DeleteRecords(1, %d) above the local start %d: the bucket holds no segment of it; offsets %s" %
          (target1, p1_local, o1), flush=True)
    replay_kcat("after DeleteRecords", first={0: target, 1: target1})
    check(b.stop() == 0, "clean stop")
    b.start()
    c = Conn(b.port, timeout=60)
    check(offsets(c, 0)["earliest"] == target and offsets(c, 1)["earliest"] == target1,
          "the log starts moved by DeleteRecords did not survive a restart")

    # ---- 5. partition 2 loses its disk ----------------------------------------
    man, _, _ = bucket_state(2)
    remote_end = man["segments"][-1]["last_offset"] + 1
    check(b.stop() == 0, "clean stop")
    shutil.rmtree(partition_dir(b, TOPIC, 2))
    b.start()
    c = Conn(b.port, timeout=60)
    o = offsets(c, 2)
    check(o["earliest"] == 0 and o["latest"] == remote_end and o["tiered"] == remote_end - 1,
          "partition 2 rebuilt from the bucket: offsets %s, the bucket ends at %d" % (o, remote_end))
    out = os.path.join(work, "lost-2")
    with open(out, "wb") as f:
        subprocess.run(["kcat", "-b", b.bootstrap, "-C", "-t", TOPIC, "-p", "2", "-o", "beginning", "-e", "-q",
                        "-f", "%o %s\\n"], stdout=f, timeout=300, check=True)
    check_replay(out, expected[2][:remote_end], 0, "partition 2 from the bucket alone")
    kcat(b, "-P", "-t", TOPIC, "-p", "2", input=b"after-loss\n")
    _, got, _ = kcat(b, "-C", "-t", TOPIC, "-p", "2", "-o", str(remote_end), "-e", "-q", "-f", "%o %s\\n")
    check(got == b"%d after-loss\n" % remote_end, "a write after the loss: %r" % got[:200])
    print("partition 2 lost locally: %d messages served from the bucket alone, writes go on at %d" %
          (remote_end, remote_end), flush=True)

    # ---- 6. the topic goes, and its objects with it --------------------------
    prefixes = [bucket_state(p)[2] for p in range(PARTS)]
    check(delete_topic(c, TOPIC) == 0, "DeleteTopics")
    wait_for(lambda: not any(bucket.ls(pre) for pre in prefixes), timeout=60,
             what="the deleted topic's objects to leave the bucket")
    print("DeleteTopics: every object of %s left the bucket" % TOPIC)
    c.close()
    check(b.stop() == 0, "clean stop")
    print("ok: tiering end to end on %s in %.1f s (%d remote segments)" % (BACKEND, time.time() - t_start,
                                                                           remote_segments))
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    b.cleanup()

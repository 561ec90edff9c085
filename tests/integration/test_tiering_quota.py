"""
The remote quotas throttle, they do not stop (issue 9), on the file backend.

usage: test_tiering_quota.py

A broker tiers one topic (segment.bytes 1 MiB, local.retention.bytes
1 MiB, chunks of 256 KiB) with remote.log.manager.copy.max.bytes.per.second
and remote.log.manager.fetch.max.bytes.per.second at QUOTA (4 MiB/s).

1. kcat produces STRATA_QUOTA_MB (24) MiB at full speed; the uploads keep
   to the copy quota: from the log's "is in the bucket" lines, the bytes of
   all segments but the first over the time from the first to the last is
   within [0.75, 1.10] of QUOTA (the first segment goes at once, on the
   quota's burst).
2. kcat replays the partition from offset 0: every message comes back, and
   the bytes the bucket holds over the time of the replay is within
   [0.75, 1.10] of QUOTA (with a quota, 0 bytes came back: an offset
   index, fetched whole, was charged UINT64_MAX bytes and no download was
   released again).
3. Restarted with both quotas at 10^12 B/s (finite, so the quota code runs,
   but never binding): the replay returns every message.
"""
import base64
import os
import random
import re
import subprocess
import time

from strata_harness import (Broker, Bucket, check, check_replay, fail, file_overrides, line_messages,
                            segment_logs, tiered_overrides, wait_for)

QUOTA = 4 << 20
TOTAL_MB = int(os.environ.get("STRATA_QUOTA_MB", "24"))
TOPIC = "quota"
SEG = 1 << 20

t_start = time.time()
b = Broker()
b.overrides = tiered_overrides(file_overrides(os.path.join(b.root, "bucket")), num_partitions=1,
                               remote_log_fetch_chunk_bytes=256 * 1024,
                               remote_log_cache_size_bytes=64 << 20,
                               remote_log_manager_copy_max_bytes_per_second=QUOTA,
                               remote_log_manager_fetch_max_bytes_per_second=QUOTA)
b.overrides["objectstore.file.fsync"] = "false"
bucket = Bucket(b.overrides)
work = os.path.join(b.root, "work")
os.makedirs(work)


def make_data():
    rnd = random.Random(9)
    path = os.path.join(work, "in")
    size, n = 0, 0
    with open(path, "wb") as f:
        while size < TOTAL_MB << 20:
            line = b"%08d-" % n + base64.b64encode(rnd.randbytes(rnd.randint(200, 1500))) + b"\n"
            f.write(line)
            size += len(line)
            n += 1
    return path, line_messages(path)


def manifest():
    prefix = bucket.partition_prefix(TOPIC, 0)
    return bucket.manifest(prefix) if prefix else None


def settled():
    man = manifest()
    bases = [int(os.path.basename(x)[:20]) for x in segment_logs(b, TOPIC, 0)]
    return bool(man and man["segments"] and bases and man["segments"][-1]["last_offset"] + 1 == bases[-1])


def replay(tag, timeout):
    out = os.path.join(work, re.sub(r"[^A-Za-z0-9]+", "-", tag))
    t0 = time.time()
    with open(out, "wb") as f:
        try:
            subprocess.run(["kcat", "-b", b.bootstrap, "-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e",
                            "-q", "-f", "%o %s\\n"], stdout=f, stderr=subprocess.PIPE, timeout=timeout, check=True)
        except subprocess.TimeoutExpired:
            got = os.path.getsize(out)
            fail("%s: the replay got %d bytes in %d s (%d messages produced)" % (tag, got, timeout, len(expected)))
    secs = time.time() - t0
    check_replay(out, expected, 0, tag)
    os.unlink(out)
    return secs


try:
    path, expected = make_data()
    b.start()
    from kwire import Conn
    c = Conn(b.port, timeout=60)
    err = c.create_topic(TOPIC, 1, configs={"remote.storage.enable": "true", "segment.bytes": str(SEG),
                                            "local.retention.bytes": str(SEG)})
    check(err == 0, "CreateTopics: error %d" % err)
    c.close()

    # ---- 1. the copy quota -----------------------------------------------------
    with open(path, "rb") as f:
        subprocess.run(["kcat", "-b", b.bootstrap, "-P", "-t", TOPIC, "-p", "0", "-X", "batch.size=1000000",
                        "-X", "linger.ms=20"], stdin=f, check=True, timeout=300)
    wait_for(settled, timeout=TOTAL_MB * 2 + 60, interval=0.25, what="the bucket to hold every closed segment")
    ups = [(m.group(1), int(m.group(2))) for m in
           re.finditer(r"^(\S+) INFO .*tiering: quota-0: segment \d+-\d+ \((\d+) bytes\) is in the bucket$",
                        b.log_text(), re.M)]
    check(len(ups) >= 8, "only %d segments uploaded" % len(ups))

    def stamp(s):
        t = time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S")
        return time.mktime(t) + float(s[19:-1] or 0)

    span = stamp(ups[-1][0]) - stamp(ups[0][0])
    paced = sum(n for _, n in ups[1:])
    rate = paced / span
    print("copy quota %d B/s: %d segments, %d bytes after the first in %.2f s: %.0f B/s (%.2f of the quota)" %
          (QUOTA, len(ups), paced, span, rate, rate / QUOTA), flush=True)
    check(0.75 * QUOTA <= rate <= 1.10 * QUOTA, "uploads at %.0f B/s under a quota of %d" % (rate, QUOTA))

    # ---- 2. the fetch quota: a replay from the bucket ---------------------------
    check(b.stop() == 0, "clean stop")
    b.start()  # an empty chunk cache
    remote = sum(s["size"] for s in manifest()["segments"])
    secs = replay("quota replay", timeout=max(120, 4 * remote // QUOTA))
    rate = remote / secs
    print("fetch quota %d B/s: the replay read %d remote bytes (and the local rest) in %.2f s: %.0f B/s "
          "(%.2f of the quota)" % (QUOTA, remote, secs, rate, rate / QUOTA), flush=True)
    check(0.75 * QUOTA <= rate <= 1.10 * QUOTA, "replay at %.0f B/s under a quota of %d" % (rate, QUOTA))

    # ---- 3. a quota that never binds -------------------------------------------
    check(b.stop() == 0, "clean stop")
    b.overrides["remote.log.manager.fetch.max.bytes.per.second"] = str(10 ** 12)
    b.overrides["remote.log.manager.copy.max.bytes.per.second"] = str(10 ** 12)
    b.start()
    secs = replay("replay at 10^12 B/s", timeout=120)
    print("fetch quota 10^12 B/s: every message in %.2f s (%.0f B/s of remote bytes)" % (secs, remote / secs),
          flush=True)
    check(b.stop() == 0, "clean stop")
    print("ok: quotas throttle in %.1f s" % (time.time() - t_start))
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    b.cleanup()

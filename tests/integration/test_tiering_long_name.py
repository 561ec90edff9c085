"""
A 249-character topic name (Kafka's longest legal one) tiered end to end,
and log lines that keep their cause whole (issue 9).

usage: test_tiering_long_name.py rgw ENVFILE | file

1. The topic (segment.bytes 64 KiB, local.retention.bytes 64 KiB) gets
   about 3 MB from kcat; the bucket's manifest covers every closed segment
   and names only objects that are there (each key about 330 bytes).
2. Stop; the local segments the bucket holds are deleted; start: kcat from
   offset 0 reads every message back through the bucket (with the cache
   key cut at 319 bytes, every remote read failed and was retried forever).
3. One remote .log object is removed from the bucket while the broker is
   down; after the start (an empty chunk cache) a fetch of an offset
   inside it fails (KAFKA_STORAGE_ERROR), and the broker's log line about
   it holds the whole object key and the object store's cause, which
   names the key again, then "no such key" (messages were cut at 160
   bytes, in the key).
4. DeleteTopics removes every object of the topic from the bucket.
"""
import base64
import os
import random
import subprocess
import sys
import time

from kwire import Conn, delete_topic
from strata_harness import (Broker, Bucket, check, check_replay, fail, file_overrides, line_messages,
                            manifest_problems, rgw_env, s3_overrides, segment_logs, tiered_overrides, wait_for)

if len(sys.argv) < 2 or sys.argv[1] not in ("rgw", "file") or (sys.argv[1] == "rgw" and len(sys.argv) < 3):
    sys.exit("usage: test_tiering_long_name.py rgw ENVFILE | file")
BACKEND = sys.argv[1]
SEG = 64 << 10
_rnd = random.Random(4)
TOPIC = ("long-name-" + "".join(_rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789._-") for _ in range(300)))[:249]
assert len(TOPIC) == 249

t_start = time.time()
b = Broker()
store = s3_overrides(rgw_env(sys.argv[2])) if BACKEND == "rgw" else file_overrides(os.path.join(b.root, "bucket"))
b.overrides = tiered_overrides(store, num_partitions=1, remote_log_fetch_chunk_bytes=64 << 10,
                               remote_log_fetch_readahead_chunks=1, objectstore_s3_retry_attempts=2)
bucket = Bucket(b.overrides)
work = os.path.join(b.root, "work")
os.makedirs(work)


def bucket_state():
    prefix = bucket.partition_prefix(TOPIC, 0)
    if prefix is None:
        return None, {}, None
    return bucket.manifest(prefix), bucket.ls(prefix), prefix


def settled():
    man, _, _ = bucket_state()
    bases = [int(os.path.basename(x)[:20]) for x in segment_logs(b, TOPIC, 0)]
    return bool(man and man["segments"] and bases and man["segments"][-1]["last_offset"] + 1 == bases[-1]
                and len(bases) <= 3)


try:
    rnd = random.Random(7)
    path = os.path.join(work, "in")
    with open(path, "wb") as f:
        for n in range(3000):
            f.write(b"%06d-" % n + base64.b64encode(rnd.randbytes(rnd.randint(300, 1200))) + b"\n")
    expected = line_messages(path)
    b.start()
    c = Conn(b.port, timeout=60)
    err = c.create_topic(TOPIC, 1, configs={"remote.storage.enable": "true", "segment.bytes": str(SEG),
                                            "local.retention.bytes": str(SEG)})
    check(err == 0, "CreateTopics of a %d-character name: error %d" % (len(TOPIC), err))

    # ---- 1. tiered ------------------------------------------------------------
    with open(path, "rb") as f:
        subprocess.run(["kcat", "-b", b.bootstrap, "-P", "-t", TOPIC, "-p", "0", "-X", "batch.size=16384"], stdin=f, check=True, timeout=120)
    wait_for(settled, timeout=60, interval=0.25, what="the bucket to hold every closed segment")
    man, objs, prefix = bucket_state()
    problems, orphans = manifest_problems(man, objs, prefix)
    check(not problems, "; ".join(problems[:3]))
    check(not orphans, "objects no manifest names: %s" % orphans[:3])
    longest = max(len(k) for k in objs)
    print("%s: %d segments in the bucket, keys up to %d bytes, e.g. %s" %
          (BACKEND, len(man["segments"]), longest, max(objs, key=len)), flush=True)

    # ---- 2. read back through the bucket --------------------------------------
    c.close()
    check(b.stop() == 0, "clean stop")
    remote_end = man["segments"][-1]["last_offset"] + 1
    logs = segment_logs(b, TOPIC, 0)
    removed = 0
    for p, nxt in zip(logs, logs[1:]):
        if int(os.path.basename(nxt)[:20]) <= remote_end:
            for ext in (".log", ".index", ".timeindex"):
                os.unlink(p[:-4] + ext)
            removed += 1
    b.start()
    out = os.path.join(work, "replay")
    with open(out, "wb") as f:
        try:
            subprocess.run(["kcat", "-b", b.bootstrap, "-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-q",
                            "-f", "%o %s\\n"], stdout=f, stderr=subprocess.PIPE, timeout=60, check=True)
        except subprocess.TimeoutExpired:
            fail("the replay from offset 0 got %d bytes in 60 s" % os.path.getsize(out))
    check_replay(out, expected, 0, "kcat from offset 0")
    print("kcat read all %d messages from offset 0, offsets below %d from the bucket alone" %
          (len(expected), remote_end), flush=True)

    # ---- 3. a failed download says which object and why -----------------------
    seg = man["segments"][len(man["segments"]) // 2]
    key = "%s%020d-%s.log" % (prefix, seg["base_offset"], seg["id"])
    check(b.stop() == 0, "clean stop")  # the chunk cache starts empty again
    subprocess.run(bucket._cmd("rm", key), check=True, stdout=subprocess.DEVNULL, timeout=60)
    b.start()
    c = Conn(b.port, timeout=60)
    target = seg["base_offset"] + 1
    errs = set()
    deadline = time.time() + 30
    while time.time() < deadline and 56 not in errs:
        err, _, _, _ = c.fetch(TOPIC, 0, target, max_wait=2000)
        errs.add(err)
    check(56 in errs, "a fetch of %d, whose object is gone, answered %s, want 56 (KAFKA_STORAGE_ERROR)" %
          (target, sorted(errs)))
    lines = [ln for ln in b.log_text().splitlines() if "download of" in ln and seg["id"] in ln]
    check(lines, "no log line about the failed download of %s" % key)
    line = lines[0]
    check(line.count(key) == 2 and (key + ": no such key") in line,
          "the log line does not hold the key twice and then the cause (%d characters): %s" % (len(line), line))
    print("the failed download's log line (%d characters) names the %d-byte key twice, then %r" %
          (len(line), len(key), line[line.rindex(key) + len(key):]), flush=True)

    # ---- 4. the topic goes, and its objects with it ---------------------------
    check(delete_topic(c, TOPIC) == 0, "DeleteTopics")
    wait_for(lambda: not bucket.ls(prefix), timeout=60, what="the deleted topic's objects to leave the bucket")
    c.close()
    check(b.stop() == 0, "clean stop")
    print("ok: a %d-character topic tiered on %s in %.1f s" % (len(TOPIC), BACKEND, time.time() - t_start))
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    b.cleanup()

"""
Tiering switched off and on per topic (KIP-950, issue 15): each change
applied at once, without a restart, and a replay from the earliest offset
returning exactly what the topic holds after it, before and after a
restart.

usage: test_tiering_toggle.py

One broker tiering to the file backend (task interval 500 ms), topic
`toggle` (one partition, segment.bytes 16 KiB) created with
remote.storage.enable=false.  Each step changes the topic with `strata
topics alter` (IncrementalAlterConfigs), waits for what the change does,
then replays the partition with kcat from the earliest offset (-o
beginning): the offsets and bytes must be exactly those the topic holds,
then again after SIGTERM and a start.

0. off: batch A; nothing of the topic is in the bucket.
1. off -> on (remote.storage.enable=true, local.retention.bytes 32 KiB):
   the closed segments go up and the local log keeps only the last few;
   the replay is A from offset 0, its start read from the bucket.
2. on -> copy disabled (remote.log.copy.disable=true with
   local.retention.bytes=-2, as Kafka requires; without it the change is
   refused): batch B closes segments, and not one object is added to the
   bucket over several task intervals, nor after the restart; the replay
   is A+B from 0, A's start still from the bucket.  Switching off without
   remote.log.delete.on.disable is refused (INVALID_CONFIG, 40, with a
   message naming the setting), through the wire and through `strata`, and
   the topic is as it was.
3. -> off with delete (remote.storage.enable=false,
   remote.log.delete.on.disable=true): the answer says the remote log is
   deleted; earliest is the local log start at once; every object of the
   partition leaves the bucket, the broker's log says so; the replay is
   what the local log holds, from its start.
4. back on (remote.storage.enable=true, remote.log.copy.disable deleted,
   local.retention.bytes 32 KiB): batch C; the bucket's remote log starts
   again at the local log start; the replay is the same suffix of A+B+C.
5. switched off unchecked: topic `legacy`, tiered by the broker default
   log.remote.storage.enable=true from the start, after a restart with
   that default false in the file (no change the controller could
   refuse): its remote log is still read (replay from 0, byte-exact) and
   a WARN line says what to set; before, its tiered part was no longer
   served.
"""
import base64
import os
import random
import subprocess
import sys
import time

from kwire import Conn, describe_configs, kstr
from strata_harness import (CONFIG, Broker, Bucket, binary, check, check_replay, fail, file_overrides,
                            line_messages, manifest_problems, partition_dir, run, segment_logs,
                            tiered_overrides, wait_for)

TOPIC = "toggle"
SEG = 16 << 10
LOCAL = 2 * SEG
INVALID_CONFIG = 40

t_start = time.time()
b = Broker()
b.overrides = tiered_overrides(file_overrides(os.path.join(b.root, "bucket")), num_partitions=1,
                               remote_log_fetch_chunk_bytes=64 << 10)
bucket = Bucket(b.overrides)
work = os.path.join(b.root, "work")
os.makedirs(work)
rnd = random.Random(int(os.environ.get("STRATA_TIER_SEED", "950")))
produced = []  # every message of TOPIC, at its offset
LEGACY = "legacy"
legacy = []


def produce(n, topic=TOPIC, into=produced):
    path = os.path.join(work, "in-%s-%d" % (topic, len(into)))
    with open(path, "wb") as f:
        for i in range(len(into), len(into) + n):
            f.write(b"%06d-" % i + base64.b64encode(rnd.randbytes(rnd.randint(150, 450))) + b"\n")
    with open(path, "rb") as f:
        subprocess.run(["kcat", "-b", b.bootstrap, "-P", "-t", topic, "-p", "0", "-X", "batch.size=4096"],
                       stdin=f, check=True, timeout=120)
    into.extend(line_messages(path))


def strata(*args):
    rc, out, err = run([binary("strata"), "topics", "--config", CONFIG, "--bootstrap", b.bootstrap] + list(args),
                       check_rc=False, timeout=60)
    return rc, out.decode(), err


def alter(*args):
    rc, out, err = strata("alter", TOPIC, *args)
    check(rc == 0, "strata topics alter %s: exit %d: %s" % (" ".join(args), rc, err))
    return out


def local_start(topic=TOPIC):
    return int(os.path.basename(segment_logs(b, topic, 0)[0])[:20])


def earliest(topic=TOPIC):
    c = Conn(b.port, timeout=30)
    try:
        err, off, _ = c.list_offsets(topic, 0, -2)
    finally:
        c.close()
    check(err == 0, "ListOffsets earliest: error %d" % err)
    return off


def replay(what, topic=TOPIC, expected=produced):
    """kcat from the earliest offset to the end: exactly expected[start:],
    at their offsets; returns the start."""
    start = earliest(topic)
    out = os.path.join(work, "replay")
    with open(out, "wb") as f:
        try:
            subprocess.run(["kcat", "-b", b.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                            "-f", "%o %s\\n"], stdout=f, stderr=subprocess.PIPE, timeout=60, check=True)
        except subprocess.TimeoutExpired:
            fail("%s: the replay got %d bytes in 60 s" % (what, os.path.getsize(out)))
    n = check_replay(out, expected, start, what)
    print("  %s: kcat replayed offsets %d..%d (%d messages, %d bytes), byte-exact" %
          (what, start, start + n - 1, n, os.path.getsize(out)), flush=True)
    return start


def restart():
    check(b.stop() == 0, "clean stop")
    b.start()


def objects(prefix):
    return bucket.ls(prefix) if prefix else {}


def manifest_of(prefix):
    return bucket.manifest(prefix) if prefix else None


def uploaded_all():
    """The bucket holds every closed local segment, and the local log kept
    only what local.retention.bytes allows (uploaded segments went)."""
    prefix = bucket.partition_prefix(TOPIC, 0)
    man = manifest_of(prefix)
    logs = segment_logs(b, TOPIC, 0)
    if not man or not man["segments"] or len(logs) > 4:
        return False
    return man["segments"][-1]["last_offset"] + 1 == int(os.path.basename(logs[-1])[:20])


def check_bucket(prefix, what):
    man, objs = manifest_of(prefix), objects(prefix)
    problems, orphans = manifest_problems(man, objs, prefix)
    check(not problems, "%s: %s" % (what, "; ".join(problems[:3])))
    check(not orphans, "%s: objects no manifest names: %s" % (what, orphans[:3]))
    return man, objs


try:
    b.start()
    c = Conn(b.port, timeout=60)
    check(c.create_topic(TOPIC, 1, configs={"remote.storage.enable": "false", "segment.bytes": str(SEG)}) == 0,
          "CreateTopics")
    check(c.create_topic(LEGACY, 1, configs={"segment.bytes": str(SEG), "local.retention.bytes": str(LOCAL)}) == 0,
          "CreateTopics %s" % LEGACY)
    c.call(10, 0, kstr("toggle-grp"))  # FindCoordinator: creates __consumer_offsets
    c.close()
    produce(400, LEGACY, legacy)

    # ---- 0. off ------------------------------------------------------------
    produce(800)
    print("0. off: %d messages in %d local segments" % (len(produced), len(segment_logs(b, TOPIC, 0))), flush=True)
    time.sleep(1.5)  # three task intervals: nothing may go up
    check(bucket.partition_prefix(TOPIC, 0) is None, "off: the bucket holds objects of the topic")
    # internal topics are never tiered, whatever the broker default says
    # (a tiered partition 0 would have written the topic's descriptor)
    check(not bucket.ls("__consumer_offsets"), "the bucket holds objects of __consumer_offsets: %s" %
          list(bucket.ls("__consumer_offsets"))[:3])
    c = Conn(b.port, timeout=60)
    err, msg = c.incremental_alter("__consumer_offsets", [("remote.storage.enable", 0, "true")])
    c.close()
    check(err == INVALID_CONFIG and "Internal topic" in (msg or ""),
          "remote.storage.enable=true on __consumer_offsets: error %d (%s), want %d" % (err, msg, INVALID_CONFIG))
    print("0. __consumer_offsets: nothing in the bucket with log.remote.storage.enable=true; tiering it "
          "refused: %s" % msg, flush=True)
    check(replay("off") == 0, "off: the replay does not start at 0")

    # ---- 1. off -> on --------------------------------------------------------
    t0 = time.time()
    alter("--config", "remote.storage.enable=true", "--config", "local.retention.bytes=%d" % LOCAL)
    wait_for(uploaded_all, timeout=30, interval=0.2, what="the closed segments to go up and leave the disk")
    prefix = bucket.partition_prefix(TOPIC, 0)
    man, objs = check_bucket(prefix, "on")
    remote_end = man["segments"][-1]["last_offset"] + 1
    print("1. on: in %.1f s, %d segments [0, %d) in the bucket (%d objects), the local log starts at %d" %
          (time.time() - t0, len(man["segments"]), remote_end, len(objs), local_start()), flush=True)
    check(local_start() > 0, "on: nothing left the local log")
    for when in ("on", "on, restarted"):
        check(replay(when) == 0, "%s: the replay does not start at 0" % when)
        if when == "on":
            restart()

    # ---- 2. on -> copy disabled ---------------------------------------------
    c = Conn(b.port, timeout=60)
    err, msg = c.incremental_alter(TOPIC, [("remote.log.copy.disable", 0, "true")])
    check(err == INVALID_CONFIG and "local.retention.bytes" in (msg or ""),
          "copy disable with local.retention.bytes %d: error %d (%s), want %d naming local.retention.bytes" %
          (LOCAL, err, msg, INVALID_CONFIG))
    c.close()
    alter("--config", "remote.log.copy.disable=true", "--config", "local.retention.bytes=-2")
    time.sleep(1.5)  # an upload running when the change came ends
    before = objects(prefix)
    segs_before = len(segment_logs(b, TOPIC, 0))
    produce(500)
    segs_after = len(segment_logs(b, TOPIC, 0))
    check(segs_after - segs_before >= 4, "copy disabled: batch B closed only %d segments" % (segs_after - segs_before))
    time.sleep(3)  # six task intervals
    after = objects(prefix)
    check(after == before, "copy disabled: the bucket changed: %d objects added, %d gone" %
          (len(set(after) - set(before)), len(set(before) - set(after))))
    print("2. copy disabled: %d segments closed, the bucket still %d objects over 3 s" %
          (segs_after - segs_before, len(after)), flush=True)

    # the refusal of a switch-off that would hide the bucket's data
    c = Conn(b.port, timeout=60)
    err, msg = c.incremental_alter(TOPIC, [("remote.storage.enable", 0, "false")])
    check(err == INVALID_CONFIG, "switch-off without remote.log.delete.on.disable: error %d, want %d" %
          (err, INVALID_CONFIG))
    check(msg and "remote.log.delete.on.disable=true" in msg and "remote.log.copy.disable=true" in msg,
          "the refusal's message does not name both ways out: %r" % msg)
    print("   refused: IncrementalAlterConfigs remote.storage.enable=false -> %d INVALID_CONFIG: %s" % (err, msg),
          flush=True)
    rc, _, serr = strata("alter", TOPIC, "--config", "remote.storage.enable=false")
    check(rc != 0 and "INVALID_CONFIG" in serr and "remote.log.delete.on.disable" in serr,
          "strata topics alter remote.storage.enable=false: exit %d: %s" % (rc, serr))
    cfg = describe_configs(c, [TOPIC])[TOPIC][1]
    check(cfg.get("remote.storage.enable") == "true" and cfg.get("remote.log.copy.disable") == "true",
          "the refused change changed the topic: %s" % cfg)
    c.close()
    for when in ("copy disabled", "copy disabled, restarted"):
        check(replay(when) == 0, "%s: the replay does not start at 0" % when)
        check(objects(prefix) == before, "%s: the bucket changed" % when)
        if when == "copy disabled":
            restart()
            time.sleep(1.5)

    # ---- 3. -> off with delete ------------------------------------------------
    low = local_start()
    remote_end = manifest_of(prefix)["segments"][-1]["last_offset"] + 1
    t0 = time.time()
    out = alter("--config", "remote.storage.enable=false", "--config", "remote.log.delete.on.disable=true")
    check("is being deleted" in out and "log start offset moves" in out,
          "the answer does not say the remote log is deleted: %r" % out)
    wait_for(lambda: earliest() == low, timeout=10, interval=0.05, what="earliest to become %d" % low)
    t_earliest = time.time() - t0
    wait_for(lambda: not objects(prefix), timeout=30, interval=0.2, what="the partition's objects to leave the bucket")
    lines = [ln for ln in b.log_text().splitlines() if "is deleted from the bucket" in ln and TOPIC in ln]
    check(lines, "no log line about the deleted remote log")
    print("3. off with delete: %s" % out.strip().splitlines()[-1], flush=True)
    print("   earliest %d (was 0) after %.2f s; remote log [0, %d) and %d objects gone in %.1f s" %
          (low, t_earliest, remote_end, len(before), time.time() - t0), flush=True)
    print("   broker: %s" % lines[-1][lines[-1].index(TOPIC + "-0:"):], flush=True)
    for when in ("off", "off, restarted"):
        check(replay(when) == low, "%s: the replay does not start at the local log start %d" % (when, low))
        check(not objects(prefix), "%s: objects of the topic are in the bucket" % when)
        pdir = partition_dir(b, TOPIC, 0)
        left = [f for f in os.listdir(pdir) if f in ("remote-manifest.json", "remote-log-delete-pending")]
        check(not left, "%s: the partition directory still holds %s" % (when, left))
        if when == "off":
            restart()
            time.sleep(1.5)

    # ---- 4. back on -------------------------------------------------------------
    t0 = time.time()
    alter("--config", "remote.storage.enable=true", "--delete-config", "remote.log.copy.disable",
          "--config", "local.retention.bytes=%d" % LOCAL)
    produce(400)
    wait_for(uploaded_all, timeout=30, interval=0.2, what="tiering to start again")
    man, objs = check_bucket(prefix, "on again")
    check(man["segments"][0]["base_offset"] == low and man["log_start_offset"] == low,
          "on again: the remote log starts at %d (log start %d), want the local log start %d" %
          (man["segments"][0]["base_offset"], man["log_start_offset"], low))
    print("4. on again: in %.1f s, %d segments [%d, %d) in the bucket, the local log starts at %d" %
          (time.time() - t0, len(man["segments"]), low, man["segments"][-1]["last_offset"] + 1, local_start()),
          flush=True)
    check(local_start() > low, "on again: nothing left the local log")
    for when in ("on again", "on again, restarted"):
        check(replay(when) == low, "%s: the replay does not start at %d" % (when, low))
        if when == "on again":
            restart()

    # ---- 5. switched off unchecked ----------------------------------------------
    check(local_start(LEGACY) > 0, "%s: nothing left the local log" % LEGACY)
    check(b.stop() == 0, "clean stop")
    b.overrides["log.remote.storage.enable"] = "false"
    b.start()
    check(replay("%s, off by the broker default" % LEGACY, LEGACY, legacy) == 0,
          "%s: the replay does not start at 0" % LEGACY)
    warn = [ln for ln in b.log_text().splitlines() if "WARN" in ln and LEGACY + "-0:" in ln and
            "remote.log.delete.on.disable" in ln]
    check(warn, "no WARN line about %s being off without remote.log.delete.on.disable" % LEGACY)
    print("5. %s off by the broker default: local log from %d, offsets 0.. still read from the bucket" %
          (LEGACY, local_start(LEGACY)), flush=True)
    print("   broker: %s" % warn[-1][warn[-1].index(LEGACY + "-0:"):], flush=True)
    check(replay("on again, broker default off") == low, "the toggled topic's replay moved")
    check(b.stop() == 0, "clean stop")
    print("ok: every transition in %.1f s" % (time.time() - t_start))
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    b.cleanup()

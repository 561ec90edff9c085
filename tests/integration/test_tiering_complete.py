"""
Unexpected answers to CompleteMultipartUpload, end to end (issue 9): RGW
behind tests/s3/faultproxy.py, which rewrites that answer.

usage: test_tiering_complete.py ENVFILE     (an RGW started by tests/s3/rgw.sh)
       STRATA_COMPLETE_PHASES=moto,empty,error (the default) chooses phases

The broker tiers one partition (segment.bytes 6 MiB, so each .log goes up
in two 5 MiB parts; remote.log.manager.task.retry.backoff.ms 1000,
.max.ms 8000, no jitter; task interval 500 ms; three attempts per S3
request).  Each phase writes 6 MiB more, so one more segment closes.

1. moto: RGW completes the upload, the answer's root element becomes
   CompleteMultipartUploadResponse (as moto sends) and a repeat gets the
   same.  The upload is checked with HEAD and counts as done: every closed
   segment reaches the manifest, with one multipart upload each, and the
   bucket holds no object the manifest does not name.  (It was retried as
   a failure, each attempt leaving a full-size orphan behind.)
2. empty: the same with an empty 200.
3. error: a 200 with an <Error> (InternalError) and the upload never
   completed.  For PHASE_S (30) seconds the segment is backed off: its
   attempts come at 1, 2, 4, 8, 8 ... s (at most 8 in the window; every
   task interval it was), the broker's log says "backing off", `strata
   tiering status` shows the back-off and its cause, and the bucket holds
   at most one attempt's objects of it.  Then the answers are faithful
   again: the segment goes up after its wait, and nothing is orphaned.
"""
import base64
import json
import os
import random
import signal
import subprocess
import sys
import time

from kwire import Conn
from strata_harness import (Broker, Bucket, binary, check, manifest_problems, rgw_env, s3_overrides,
                            segment_logs, spawn, tiered_overrides, wait_for, CONFIG, ROOT)

if len(sys.argv) < 2:
    sys.exit("usage: test_tiering_complete.py ENVFILE")
env = rgw_env(sys.argv[1])
PHASE_S = float(os.environ.get("STRATA_COMPLETE_PHASE_S", "30"))
PHASES = os.environ.get("STRATA_COMPLETE_PHASES", "moto,empty,error").split(",")
TOPIC = "complete-%05d" % random.randrange(100000)
SEG = 6 << 20

t_start = time.time()
b = Broker()
work = os.path.join(b.root, "work")
os.makedirs(work)
control = os.path.join(work, "mode")
stats_file = os.path.join(work, "stats")
port_file = os.path.join(work, "port")
with open(control, "w") as f:
    f.write("")
proxy = spawn([sys.executable, os.path.join(ROOT, "tests", "s3", "faultproxy.py"), "--upstream",
               env["STRATA_RGW_ENDPOINT"].split("://", 1)[1], "--port-file", port_file, "--stats-file", stats_file,
               "--control-file", control])
wait_for(lambda: os.path.exists(port_file), timeout=10, what="the proxy to listen")
with open(port_file) as f:
    endpoint = "http://127.0.0.1:%s" % f.read().strip()
store = s3_overrides(env, endpoint=endpoint)
b.overrides = tiered_overrides(store, num_partitions=1, objectstore_s3_part_size_bytes=5 << 20,
                               objectstore_s3_retry_attempts=3, objectstore_s3_retry_backoff_ms=50,
                               remote_log_manager_task_retry_backoff_ms=1000,
                               remote_log_manager_task_retry_backoff_max_ms=8000,
                               remote_log_manager_task_retry_jitter=0)
bucket = Bucket({k: v for k, v in s3_overrides(env).items()})  # straight to RGW
rnd = random.Random(3)
produced = [0]


def set_mode(mode):
    with open(control + ".tmp", "w") as f:
        f.write(mode)
    os.rename(control + ".tmp", control)


def proxy_stats():
    before = os.path.getmtime(stats_file) if os.path.exists(stats_file) else 0
    proxy.send_signal(signal.SIGUSR1)
    wait_for(lambda: os.path.exists(stats_file) and os.path.getmtime(stats_file) != before, timeout=10,
             interval=0.02, what="the proxy's counts")
    with open(stats_file) as f:
        return json.load(f)


def produce_segment():
    """About 6 MiB more: one more segment closes."""
    path = os.path.join(work, "batch")
    with open(path, "wb") as f:
        size = 0
        while size < SEG + (256 << 10):
            line = b"%08d-" % produced[0] + base64.b64encode(rnd.randbytes(rnd.randint(300, 1500))) + b"\n"
            f.write(line)
            size += len(line)
            produced[0] += 1
    with open(path, "rb") as f:
        subprocess.run(["kcat", "-b", b.bootstrap, "-P", "-t", TOPIC, "-p", "0"], stdin=f, check=True, timeout=120)


def closed_bases():
    return [int(os.path.basename(x)[:20]) for x in segment_logs(b, TOPIC, 0)][:-1]


def state():
    """(manifest, objects, prefix); a manifest with no segment when the
    bucket holds objects of the partition but no manifest yet."""
    prefix = bucket.partition_prefix(TOPIC, 0)
    if prefix is None:
        return None, {}, None
    return (bucket.manifest(prefix) or {"segments": [], "log_start_offset": 0}), bucket.ls(prefix), prefix


def remote_end():
    man, _, _ = state()
    return man["segments"][-1]["last_offset"] + 1 if man and man["segments"] else 0


def check_clean(tag, want_segments):
    man, objs, prefix = state()
    problems, orphans = manifest_problems(man, objs, prefix)
    check(not problems, "%s: %s" % (tag, "; ".join(problems[:3])))
    check(not orphans, "%s: %d objects no manifest names (%d of them .log): %s" %
          (tag, len(orphans), sum(k.endswith(".log") for k in orphans), orphans[:4]))
    check(len(man["segments"]) == want_segments, "%s: %d segments in the manifest, want %d" %
          (tag, len(man["segments"]), want_segments))


def status_line():
    _, out, _ = run_strata("tiering", "status", TOPIC)
    return out.decode()


def run_strata(*args):
    cmd = [binary("strata"), args[0], "--config", CONFIG, "--bootstrap", b.bootstrap]
    for k, v in dict(store, **{"log.dirs": b.logdir}).items():
        cmd += ["--override", "%s=%s" % (k, v)]
    p = subprocess.run(cmd + list(args[1:]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check(p.returncode == 0, "strata %s: %s" % (" ".join(args), p.stderr.decode()[-2000:]))
    return p.returncode, p.stdout, p.stderr.decode()


try:
    b.start()
    c = Conn(b.port, timeout=60)
    err = c.create_topic(TOPIC, 1, configs={"remote.storage.enable": "true", "segment.bytes": str(SEG),
                                            "local.retention.bytes": str(SEG)})
    check(err == 0, "CreateTopics: error %d" % err)
    segments = 0  # in the manifest

    # ---- 1, 2: an ambiguous 200 is checked with HEAD ---------------------------
    for mode in [m for m in ("moto", "empty") if m in PHASES]:
        set_mode(mode)
        before = proxy_stats()
        man, _, _ = state()
        had = len(man["segments"]) if man else 0
        produce_segment()
        target = closed_bases()[-1]
        deadline = time.time() + 60
        while remote_end() < target + 1 and time.time() < deadline:
            time.sleep(0.5)
        after = proxy_stats()
        man, objs, prefix = state()
        man = man or {"segments": [], "log_start_offset": 0}
        got = len(man["segments"])
        initiates = after.get("initiates", 0) - before.get("initiates", 0)
        orphans = manifest_problems(man, objs, prefix)[1]
        print("%s: %d new segment(s) in the manifest; %d multipart upload(s) started, %d completion "
              "answer(s) rewritten, %d of them repeats; %d orphaned object(s) (%d .log)" %
              (mode, got - had, initiates, after.get("complete-" + mode, 0) - before.get("complete-" + mode, 0),
               after.get("complete-repeat", 0) - before.get("complete-repeat", 0), len(orphans),
               sum(k.endswith(".log") for k in orphans)), flush=True)
        check(remote_end() >= target + 1, "%s: segment %d never reached the manifest" % (mode, target))
        check_clean(mode, got)
        check(initiates == got - had, "%s: %d multipart uploads for %d segment(s)" % (mode, initiates, got - had))
        check(b.log_text().count("HEAD finds the object") >= 1, "%s: no upload was checked with HEAD" % mode)
        segments = got

    # ---- 3: a 200 with an <Error>: the segment is backed off ---------------------
    if "error" not in PHASES:
        sys.exit(0)
    man, _, _ = state()
    segments = len(man["segments"]) if man else 0
    set_mode("error")
    before = proxy_stats()
    produce_segment()
    target = closed_bases()[-1]
    t0 = time.time()
    worst = 0
    seen_status = ""
    while time.time() - t0 < PHASE_S:
        man, objs, prefix = state()
        mine = [k for k in manifest_problems(man, objs, prefix)[1] if "/%020d-" % target in k] if man else []
        worst = max(worst, sum(k.endswith(".log") for k in mine))
        line = status_line()
        if "backing off" in line:
            seen_status = line.strip().splitlines()[-1]
        time.sleep(1)
    after = proxy_stats()
    attempts = after.get("complete-error", 0) - before.get("complete-error", 0)
    uploads = after.get("initiates", 0) - before.get("initiates", 0)
    backoffs = b.log_text().count("backing off, next attempt in")
    print("error: in %.0f s, %d upload attempt(s) of segment %d (%d completions answered with an <Error>), "
          "%d back-off line(s) in the log; at most %d .log object(s) of it outside the manifest at once" %
          (PHASE_S, uploads, target, attempts, backoffs, worst), flush=True)
    print("strata tiering status: %s" % seen_status, flush=True)
    check(remote_end() <= target, "error: segment %d reached the manifest" % target)
    check(2 <= uploads <= 8, "error: %d upload attempts in %.0f s under a back-off of 1, 2, 4, 8 s" %
          (uploads, PHASE_S))
    check(backoffs >= 2, "error: the log does not say the segment is backed off")
    check("backing off" in seen_status and "InternalError" in seen_status,
          "error: strata tiering status does not show the back-off and its cause: %r" % seen_status)
    check(worst <= 1, "error: %d attempts' .log objects in the bucket at once" % worst)

    set_mode("")
    wait_for(lambda: remote_end() >= target + 1, timeout=30, interval=0.5,
             what="segment %d to reach the bucket once the answers are faithful" % target)
    check_clean("after the fault", segments + 1)
    check("backing off" not in status_line(), "the back-off is still shown after the segment went up")
    print("healed: segment %d in the bucket, no orphan, the back-off gone from the status" % target, flush=True)
    c.close()
    check(b.stop() == 0, "clean stop")
    print("ok: CompleteMultipartUpload answers verified or backed off in %.1f s" % (time.time() - t_start))
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    if proxy.poll() is None:
        proxy.terminate()
        proxy.wait()
    b.cleanup()

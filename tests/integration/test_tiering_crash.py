"""
Crash during upload (issue 4): stratad is killed with SIGKILL while it
uploads segments to RGW, again and again, and restarted.

usage: test_tiering_crash.py ENVFILE   (an RGW started by tests/s3/rgw.sh)

The broker reaches RGW through tests/s3/faultproxy.py, which delays every
request by up to 150 ms, so an upload (four objects, then the manifest)
takes long enough to be cut in the middle.  The proxy dies with the broker
(a request of a dead broker does not reach the bucket later) and a fresh one
is started for the restart.  rdk_acked_producer writes 2 partitions with
acks=all; segment.bytes 256 KiB, local.retention.bytes 512 KiB, task
interval 200 ms, so there is always something to upload.

Each of STRATA_TIER_CRASH_TRIALS (12) trials kills the broker either after a
random pause or, every other trial, at the moment the bucket holds an object
that no manifest names yet (between the objects and the manifest).  While
the broker is down:
  - every segment a manifest names has its four objects in the bucket, its
    .log of the manifest's size, and the segments follow each other;
  - the oldest local segment starts at or below the remote end: nothing
    was deleted locally that the bucket does not hold;
  - the objects no manifest names (orphans of the cut upload) are noted.
After the restart, the noted orphans must be deleted (the first job of a
partition sweeps its prefix).
At the end the writer stops and the broker is restarted cleanly, straight
to RGW: the proxy is there to make uploads long enough to be cut, and
through it the catch-up of what the kills held back and the final replay
took about 50 s.  The bucket catches up, the manifests name exactly the
objects there (no orphan, nothing missing), and the whole topic, mostly
read back from the bucket, holds offsets 0..n-1 with every value intact
and every acknowledged message at its offset.

STRATA_TIER_CRASH_SEED reproduces a kill schedule.
"""
import os
import random
import signal
import subprocess
import sys
import time

from kwire import EARLIEST_LOCAL, LATEST_TIERED, Conn, list_offsets_v9
from strata_harness import (HERE, Broker, Bucket, binary, check, check_acked_topic, fail, log_starts,
                            manifest_problems, read_ack_file, rgw_env, s3_overrides, segment_logs, spawn,
                            tiered_overrides, wait_for)

if len(sys.argv) != 2:
    sys.exit("usage: test_tiering_crash.py ENVFILE")
SEED = int(os.environ.get("STRATA_TIER_CRASH_SEED", str(int(time.time() * 1000) % 1000000007)))
TRIALS = int(os.environ.get("STRATA_TIER_CRASH_TRIALS", "12"))
TOPIC, PARTS, SIZE = "tier-crash-%d" % (SEED % 100000), 2, 200
SEG, LOCAL = 256 * 1024, 512 * 1024
rnd = random.Random(SEED)
print("seed %d (STRATA_TIER_CRASH_SEED=%d reproduces the kill schedule), topic %s" % (SEED, SEED, TOPIC), flush=True)

env = rgw_env(sys.argv[1])
real = Bucket(s3_overrides(env))  # straight to RGW, not through the proxy
FAULTPROXY = os.path.join(HERE, "..", "s3", "faultproxy.py")
proxy = None


def start_proxy(root, n):
    """A delaying proxy in front of RGW; returns its endpoint."""
    global proxy
    port_file = os.path.join(root, "proxy-%d.port" % n)
    proxy = spawn([sys.executable, FAULTPROXY, "--upstream", env["STRATA_RGW_ENDPOINT"].split("//", 1)[1],
                   "--port-file", port_file, "--seed", str(SEED + n), "--delay", "1.0", "--delay-ms", "150"])
    wait_for(lambda: os.path.exists(port_file), timeout=20, what="the proxy to listen")
    with open(port_file) as f:
        return "http://127.0.0.1:%s" % f.read().strip()


def kill_proxy():
    if proxy and proxy.poll() is None:
        proxy.kill()
        proxy.wait()


b = Broker()
b.overrides = tiered_overrides(s3_overrides(env, start_proxy(b.root, 0)), num_partitions=PARTS,
                               log_segment_bytes=SEG, log_local_retention_bytes=LOCAL,
                               remote_log_manager_task_interval_ms=200,
                               # the sweep leaves what is younger and comes back for it
                               remote_log_orphan_min_age_ms=2000)
prod = None


def prefixes():
    out = {}
    for p in range(PARTS):
        pre = real.partition_prefix(TOPIC, p)
        if pre:
            out[p] = pre
    return out


def inspect(what):
    """With the broker down: the manifests against the bucket and the local
    dirs.  Returns ({partition: remote end}, orphan keys)."""
    ends, orphans = {}, []
    for p, pre in prefixes().items():
        man = real.manifest(pre)
        objs = real.ls(pre)
        if man is None:
            orphans += [k for k in objs]
            continue
        problems, orph = manifest_problems(man, objs, pre)
        check(not problems, "%s, partition %d: %s" % (what, p, "; ".join(problems[:5])))
        orphans += orph
        end = man["segments"][-1]["last_offset"] + 1 if man["segments"] else man["log_start_offset"]
        ends[p] = end
        bases = [int(os.path.basename(x)[:20]) for x in segment_logs(b, TOPIC, p)]
        check(bases and bases[0] <= end, "%s, partition %d: the oldest local segment starts at %s but the bucket "
              "ends at %d: data neither local nor remote" % (what, p, bases[:1], end))
    return ends, orphans


def unnamed_object():
    """An object of the topic no manifest names: an upload under way."""
    for pre in prefixes().values():
        man = real.manifest(pre)
        objs = real.ls(pre)
        if man is not None and manifest_problems(man, objs, pre)[1]:
            return True
    return False


t_start = time.time()
try:
    b.start()
    c = Conn(b.port, timeout=30)
    check(c.create_topic(TOPIC, PARTS, configs={"remote.storage.enable": "true"}) == 0, "CreateTopics")
    c.close()
    ackfile = os.path.join(b.root, "acks")
    errfile = open(os.path.join(b.root, "producer.stderr"), "w")
    prod = spawn([binary("rdk_acked_producer"), "-b", b.bootstrap, "-t", TOPIC, "-o", ackfile, "-p", str(PARTS),
                  "-r", "4000", "-s", str(SIZE), "-X", "linger.ms=5", "-X", "batch.size=65536"],
                 stdout=subprocess.PIPE, stderr=errfile)
    wait_for(lambda: len(prefixes()) == PARTS, timeout=60, interval=0.3, what="the first uploads")
    stats = dict(trials=0, targeted=0, hit=0, orphans=0, swept=0)
    for trial in range(TRIALS):
        targeted = trial % 2 == 1
        t0 = time.time()
        if targeted:
            while time.time() - t0 < 15 and not unnamed_object():
                pass
        else:
            time.sleep(rnd.uniform(0.3, 2.0))
        check(b.alive(), "stratad died by itself in trial %d:\n%s" % (trial, b.log_tail()))
        check(prod.poll() is None, "the producer exited: %s" % open(errfile.name).read()[-2000:])
        b.kill()
        kill_proxy()
        time.sleep(0.3)  # what RGW had already received completes
        ends, orphans = inspect("trial %d" % trial)
        stats["trials"] += 1
        stats["targeted"] += targeted
        stats["hit"] += bool(orphans)
        stats["orphans"] += len(orphans)
        b.overrides["objectstore.s3.endpoint"] = start_proxy(b.root, trial + 1)
        b.start()
        check("the previous stop was not clean" in log_starts(b)[-1], "trial %d: the restart missed the kill" % trial)
        if orphans:
            wait_for(lambda: not set(orphans) & set(k for pre in prefixes().values() for k in real.ls(pre)),
                     timeout=60, interval=0.3, what="trial %d: the orphans to be swept: %s" % (trial, orphans[:4]))
            stats["swept"] += len(orphans)
        print("trial %2d: %s kill after %.2f s; remote ends %s; %d orphaned object(s)%s" %
              (trial, "targeted" if targeted else "random", time.time() - t0, ends, len(orphans),
               ", swept after the restart" if orphans else ""), flush=True)
    check(stats["hit"] >= 1, "no kill landed between an upload's objects and its manifest")

    prod.send_signal(signal.SIGTERM)
    out, _ = prod.communicate(timeout=60)
    print("producer: " + out.decode().strip(), flush=True)
    check(b" failed 0 " in out, "deliveries failed: %s" % out.decode())

    def settled():
        for p in range(PARTS):
            pre = real.partition_prefix(TOPIC, p)
            man = real.manifest(pre)
            bases = [int(os.path.basename(x)[:20]) for x in segment_logs(b, TOPIC, p)]
            if not man or not man["segments"] or man["segments"][-1]["last_offset"] + 1 != bases[-1]:
                return False
            if len(bases) > LOCAL // SEG + 2:
                return False
        return True

    check(b.stop() == 0, "clean stop")
    kill_proxy()
    b.overrides["objectstore.s3.endpoint"] = env["STRATA_RGW_ENDPOINT"]
    b.start()
    wait_for(settled, timeout=120, interval=0.3, what="the bucket to catch up")
    # One more clean restart: its first jobs sweep again; nothing is left.
    check(b.stop() == 0, "clean stop")
    b.start()
    time.sleep(2)
    remote = 0
    c = Conn(b.port, timeout=30)
    for p, pre in prefixes().items():
        man, objs = real.manifest(pre), real.ls(pre)
        problems, orphans = manifest_problems(man, objs, pre)
        check(not problems and not orphans, "partition %d at the end: %s; orphans %s" % (p, problems[:5], orphans[:5]))
        local = list_offsets_v9(c, TOPIC, p, EARLIEST_LOCAL)[1]
        tiered = list_offsets_v9(c, TOPIC, p, LATEST_TIERED)[1]
        check(local > 0 and tiered + 1 >= local, "partition %d: local start %d, tiered end %d" % (p, local, tiered))
        remote += local
    acks = read_ack_file(ackfile)
    ends = check_acked_topic(b, TOPIC, PARTS, SIZE, acks, "the final replay")
    print("final replay: %s messages (%d of them only in the bucket), all %d acknowledged in place" %
          (ends, remote, len(acks)), flush=True)
    c.close()
    check(b.stop() == 0, "clean stop")
    print("ok: %(trials)d kills (%(targeted)d aimed between objects and manifest); %(hit)d left orphans, "
          "%(orphans)d objects, all swept after the restart" % stats +
          "; no manifest ever named a missing object; %.1f s (seed %d)" % (time.time() - t_start, SEED))
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    if prod and prod.poll() is None:
        prod.kill()
        prod.wait()
    kill_proxy()
    b.cleanup()

"""
bench/metadata_commit.py - metadata commit latency: a single node next to a
cluster of 3 combined nodes (scripts/cluster.sh up 3) on loopback, in one
run, defaults otherwise (fsync on).  Run through bench/metadata_commit.sh.

Both setups run at once.  Wait until every broker is registered and
unfenced, find each setup's active controller (Metadata's controller id),
then send each --count CreateTopics of one 1-partition topic, one at a
time on one connection per setup, taking turns (one to the single node,
one to the cluster, ...) so that both meet the shared disk's ups and downs
alike, after --warmup unmeasured ones.  Printed per setup:

  - end to end: the client's time from sending CreateTopics to its answer;
  - Raft commit: the active controller's own time from proposing the
    topic's batch to the Raft until the high watermark passes it (its
    DEBUG line, logger.debug=quorum.commit), which is what a quorum
    costs: the leader's fsync, the followers' Fetch, their fsync and the
    next Fetch that tells the leader;
  - commit + apply: until the batch is applied to the image too, which
    for a partition placed on the controller's own node includes creating
    its log (directory, partition.metadata, fsyncs).

and the ratios cluster / single node; and, as the floor under both, the
time of a 200-byte append + fsync in the same directory.
"""
import argparse
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from kwire import Conn, describe_cluster  # noqa: E402
from strata_harness import BIN, ROOT, Broker, check, fail, wait_for  # noqa: E402

COMMIT_RE = re.compile(r"metadata batch at offset \d+ \((\d+) records\) committed in (\d+) us, "
                       r"applied in (\d+) us")
DEBUG = {"logger.debug": "quorum.commit"}


def pct(v, p):
    """The p-th percentile, nearest rank."""
    s = sorted(v)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def free_base(n):
    for base in range(21000, 60000, 64):
        socks = []
        try:
            for p in range(base, base + 2 * n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            pass
        finally:
            for s in socks:
                s.close()
    fail("no free ports")


def metadata(port):
    """Metadata v1, no topic: (controller id, [broker ids])."""
    c = Conn(port)
    try:
        r = c.call(3, 1, struct.pack(">i", 0))
        ids = []
        for _ in range(r.take(">i")):
            ids.append(r.take(">i"))
            r.string()
            r.take(">i")
            r.string()
        return r.take(">i"), ids
    finally:
        c.close()


def settle(ports, n):
    """Wait until a broker answers with n unfenced brokers and a controller."""
    def ok():
        try:
            err, _cid, ctl, brokers = describe_cluster(Conn(ports[0]))
        except OSError:
            return False
        return err == 0 and ctl >= 0 and len(brokers) == n
    wait_for(ok, 60, interval=0.2, what="%d unfenced brokers and a controller" % n)


def run_creates(targets, count, warmup):
    """CreateTopics to each target in turn (one request to each, then the
    next round), so both setups see the same machine at the same moments:
    the disk is shared and its latency drifts.  {label: [us]}."""
    conns = {t["label"]: Conn(t["port"], timeout=60) for t in targets}
    lat = {t["label"]: [] for t in targets}
    try:
        for i in range(warmup + count):
            for t in targets:
                name = "bench-%s-%05d" % (t["tag"], i)
                t0 = time.perf_counter()
                err = conns[t["label"]].create_topic(name, 1, 1)
                dt = time.perf_counter() - t0
                check(err == 0, "CreateTopics %s on %s: error %d" % (name, t["label"], err))
                if i >= warmup:
                    lat[t["label"]].append(dt * 1e6)
    finally:
        for c in conns.values():
            c.close()
    return lat


def raft_times(logfile, skip):
    """The DEBUG lines' times (us) after the first skip of them:
    ([propose to committed], [propose to applied])."""
    with open(logfile, errors="replace") as f:
        found = [(int(m.group(2)), int(m.group(3))) for m in COMMIT_RE.finditer(f.read())]
    return [c for c, _a in found[skip:]], [a for _c, a in found[skip:]]


def count_lines(logfile):
    with open(logfile, errors="replace") as f:
        return len(COMMIT_RE.findall(f.read()))


def target(label, tag, ports, logfile_of):
    """Where a setup's CreateTopics go: its active controller."""
    ctl, _ = metadata(ports[0])
    check(ctl >= 0, "%s: no controller" % label)
    port = ports[ctl - 1] if len(ports) > 1 else ports[0]
    log = logfile_of(ctl)
    return {"label": label, "tag": tag, "controller": ctl, "port": port, "log": log,
            "before": count_lines(log)}


def fsync_times(d, count):
    """A floor for every commit: append 200 bytes to a file in d and fsync,
    count times (us)."""
    path = os.path.join(d, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    out = []
    try:
        for _ in range(count):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 200)
            os.fsync(fd)
            out.append((time.perf_counter() - t0) * 1e6)
    finally:
        os.close(fd)
        os.unlink(path)
    return out


def row(r):
    e, (c, ap) = r["e2e"], r["raft"]
    raft = ("%d | %d | %d | %d | %d" % (pct(c, 50), pct(c, 99), pct(ap, 50), pct(ap, 99), len(c))) \
        if c else "- | - | - | - | 0"
    return "| %s | %d | %d | %d | %d | %s |" % (r["label"], len(e), pct(e, 50), pct(e, 99), max(e), raft)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--dir", default=None, help="where the nodes keep their logs (default: a temporary dir)")
    a = ap.parse_args()
    top = tempfile.mkdtemp(prefix="strata-bench-meta-", dir=a.dir)
    results = []
    cluster_dir = os.path.join(top, "cluster")
    base = None
    try:
        fs = fsync_times(top, a.count)
        # one node, no quorum settings: a quorum of one
        os.mkdir(os.path.join(top, "single"))
        b = Broker(overrides=DEBUG, root=os.path.join(top, "single")).start()
        # three combined nodes
        base = free_base(3)
        cmd = ["bash", os.path.join(ROOT, "scripts", "cluster.sh"), "up", "3", "--dir", cluster_dir,
               "--base-port", str(base), "--no-build", "--override", "logger.debug=quorum.commit"]
        subprocess.run(cmd, check=True, env=dict(os.environ, STRATA_BIN_DIR=BIN), stdout=subprocess.DEVNULL)
        ports = [base + 2 * i for i in range(3)]
        settle([b.port], 1)
        settle(ports, 3)
        targets = [target("single node", "one", [b.port], lambda _id: b.logfile),
                   target("3 voters", "three", ports,
                          lambda i: os.path.join(cluster_dir, "node-%d" % i, "stratad.log"))]
        lat = run_creates(targets, a.count, a.warmup)
        time.sleep(0.2)  # the DEBUG line is written after the answer is sent
        for t in targets:
            results.append({"label": t["label"], "e2e": lat[t["label"]],
                            "raft": raft_times(t["log"], t["before"] + a.warmup)})
        b.stop()
    finally:
        if base is not None:
            subprocess.run(["bash", os.path.join(ROOT, "scripts", "cluster.sh"), "down", "--dir", cluster_dir,
                            "--base-port", str(base)], stdout=subprocess.DEVNULL)
        shutil.rmtree(top, ignore_errors=True)

    print("CreateTopics of a 1-partition topic, one at a time to the active controller, "
          "%d measured after %d warm-up, the setups taking turns; times in us\n" % (a.count, a.warmup))
    print("| setup | requests | end to end p50 | p99 | max | Raft commit p50 | p99 | "
          "commit + apply p50 | p99 | lines |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(row(r))
    print("\nfloor: append 200 bytes + fsync in the same directory, %d times: p50 %d, p99 %d, max %d us" %
          (len(fs), pct(fs, 50), pct(fs, 99), max(fs)))
    s, c = results
    print("\nratio 3 voters / single node: end to end p50 %.2fx, p99 %.2fx" %
          (pct(c["e2e"], 50) / pct(s["e2e"], 50), pct(c["e2e"], 99) / pct(s["e2e"], 99)))
    if s["raft"][0] and c["raft"][0]:
        sc, cc = s["raft"][0], c["raft"][0]
        print("ratio 3 voters / single node: Raft commit p50 %.2fx, p99 %.2fx" %
              (pct(cc, 50) / pct(sc, 50), pct(cc, 99) / pct(sc, 99)))


if __name__ == "__main__":
    main()

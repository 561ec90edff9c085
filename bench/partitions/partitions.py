"""
bench/partitions/partitions.py - many partitions on one broker: creation in
batches, restart, start-up time, resident memory and open descriptors, and
produce + fetch on a sample.  Run through bench/partitions/run.sh.

Figures per partition are differences against an empty broker started in
the same run (same binary, same settings).
"""
import argparse
import os
import random
import resource
import signal
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))

from kwire import Conn  # noqa: E402
from strata_harness import Broker, check, kcat, kstr  # noqa: E402


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def create_topics(c, topics, partitions):
    """CreateTopics v1: [(name, error, message)]."""
    body = struct.pack(">i", len(topics))
    for t in topics:
        body += kstr(t) + struct.pack(">ihii", partitions, 1, 0, 0)
    body += struct.pack(">ib", 600000, 0)
    r = c.call(19, 1, body)
    out = []
    for _ in range(r.take(">i")):
        name = r.string()
        err = r.take(">h")
        out.append((name, err, r.string()))
    return out


def start_timed(b, timeout):
    t0 = time.time()
    b.start(timeout=timeout)
    return time.time() - t0


def stop_timed(b):
    t0 = time.time()
    rc = b.stop(signal.SIGTERM, timeout=600)
    check(rc == 0, "stratad exited %s" % rc)
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=50000)
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--per-request", type=int, default=10000)
    ap.add_argument("--nofile", type=int, default=4096)
    ap.add_argument("--sample", type=int, default=20)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--max-broker-partitions", type=int, default=-1,
                    help="-1: room for --partitions; 0: leave unset (a stratad without the key)")
    a = ap.parse_args()
    rnd = random.Random(a.seed)

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (a.nofile, a.nofile))

    overrides = {"log.retention.check.interval.ms": "300000"}
    if a.max_broker_partitions:
        overrides["max.broker.partitions"] = str(a.max_broker_partitions if a.max_broker_partitions > 0
                                                 else max(100000, a.partitions + 100))

    # an empty broker: the baseline
    base = Broker(overrides)
    base.preexec_fn = limit
    try:
        start_timed(base, 60)
        time.sleep(1)
        base_rss, base_fds = rss_kib(base.proc.pid), fds(base.proc.pid)
        stop_timed(base)
        base_start = start_timed(base, 60)
        time.sleep(1)
        base_rss, base_fds = rss_kib(base.proc.pid), fds(base.proc.pid)
        stop_timed(base)
    finally:
        base.cleanup()

    b = Broker(overrides)
    b.preexec_fn = limit
    try:
        start_timed(b, 60)
        c = Conn(b.port, timeout=600)
        ntopics = a.partitions // a.per_topic
        names = ["bench-%05d" % i for i in range(ntopics)]
        per_req = max(1, a.per_request // a.per_topic)
        t_create = time.time()
        for i in range(0, ntopics, per_req):
            t0 = time.time()
            res = create_topics(c, names[i:i + per_req], a.per_topic)
            bad = [r for r in res if r[1] != 0]
            check(not bad, "CreateTopics: %s" % bad[:3])
            print("  CreateTopics %d topics x %d partitions: %.2f s (%d partitions so far)"
                  % (len(res), a.per_topic, time.time() - t0, (i + len(res)) * a.per_topic),
                  file=sys.stderr, flush=True)
        create_s = time.time() - t_create
        c.close()
        created_rss, created_fds = rss_kib(b.proc.pid), fds(b.proc.pid)
        stop_s = stop_timed(b)
        start_s = start_timed(b, 600)
        time.sleep(1)
        rss, nfd = rss_kib(b.proc.pid), fds(b.proc.pid)

        # produce and fetch on a sample spread over every topic and index
        sample = [(rnd.choice(names), rnd.randrange(a.per_topic)) for _ in range(a.sample)]
        t0 = time.time()
        for t, p in sample:
            vals = ["%s-%d-%d" % (t, p, k) for k in range(3)]
            kcat(b, "-P", "-t", t, "-p", str(p), input=("\n".join(vals) + "\n").encode(), timeout=120)
            _, out, _ = kcat(b, "-C", "-t", t, "-p", str(p), "-o", "beginning", "-e", "-q", timeout=120)
            check(out.decode().splitlines() == vals, "%s-%d read back %r" % (t, p, out[:200]))
        sample_s = time.time() - t0
        after_rss, after_fds = rss_kib(b.proc.pid), fds(b.proc.pid)
        stop_timed(b)

        n = ntopics * a.per_topic
        print("partitions: %d (%d topics of %d), RLIMIT_NOFILE %d, log.max.open.files default"
              % (n, ntopics, a.per_topic, a.nofile))
        print("")
        print("| measure | empty broker | %d partitions | per partition |" % n)
        print("|---|---|---|---|")
        print("| creation (%d CreateTopics of up to %d partitions) | | %.1f s | %.0f us |"
              % ((ntopics + per_req - 1) // per_req, min(per_req * a.per_topic, n), create_s, create_s * 1e6 / n))
        print("| stop (SIGTERM to exit) | | %.1f s | |" % stop_s)
        print("| start-up (exec to first answer) | %.2f s | %.2f s | %.0f us |"
              % (base_start, start_s, (start_s - base_start) * 1e6 / n))
        print("| RSS after start-up | %d KiB | %d KiB | %.2f KiB |"
              % (base_rss, rss, (rss - base_rss) / n))
        print("| open descriptors after start-up | %d | %d | %.4f |"
              % (base_fds, nfd, (nfd - base_fds) / n))
        print("| RSS / descriptors right after creation | | %d KiB / %d | |" % (created_rss, created_fds))
        print("| RSS / descriptors after produce+fetch on %d partitions | | %d KiB / %d | |"
              % (a.sample, after_rss, after_fds))
        print("")
        print("produce + fetch (kcat, 3 records each) on %d partitions picked at random: all read "
              "back, %.1f s" % (a.sample, sample_s))
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()

"""
kcat against a real stratad: 100,000 keyed messages with headers into a
6-partition topic, consumed back.  Checks every key, value and header byte
for byte, per-partition order and contiguous offsets, and timestamps that
are the producer's and stay the same on a second read.
"""
import collections
import json
import os
import random
import time

from strata_harness import Broker, check, fail, kcat

N = 100000
b = Broker({"num.partitions": "6"}).start()
try:
    rnd = random.Random(42)
    lines = []
    for i in range(N):
        value = "v%06d-%s" % (i, "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789 -_:/") for _ in range(rnd.randint(0, 300))))
        lines.append(("key-%06d" % i, value))
    data = "".join("%s\t%s\n" % kv for kv in lines).encode()
    path = os.path.join(b.root, "input.txt")
    with open(path, "wb") as f:
        f.write(data)

    t0 = int(time.time() * 1000) - 1
    kcat(b, "-P", "-t", "rt", "-K", "\t", "-H", "origin=kcat", "-H", "run=roundtrip", "-l", path)
    t1 = int(time.time() * 1000) + 1

    def consume():
        _, out, _ = kcat(b, "-C", "-t", "rt", "-e", "-q", "-J")
        return [json.loads(l) for l in out.decode().splitlines() if l.strip()]

    got = consume()
    check(len(got) == N, "consumed %d messages, produced %d" % (len(got), N))
    want = dict(lines)
    order = {k: i for i, (k, _) in enumerate(lines)}
    per_part = collections.defaultdict(list)
    for m in got:
        k = m["key"]
        check(k in want, "unexpected key %r" % k)
        check(m["payload"] == want[k], "value of %s differs" % k)
        check(m["headers"] == ["origin", "kcat", "run", "roundtrip"], "headers of %s: %r" % (k, m["headers"]))
        check(m["tstype"] == "create", "timestamp type %r" % m["tstype"])
        check(t0 <= m["ts"] <= t1, "timestamp %d of %s outside the produce window" % (m["ts"], k))
        per_part[m["partition"]].append(m)
    check(sorted(per_part) == list(range(6)), "partitions used: %r" % sorted(per_part))
    for p, msgs in per_part.items():
        msgs.sort(key=lambda m: m["offset"])
        check([m["offset"] for m in msgs] == list(range(len(msgs))), "partition %d offsets are not 0..%d" % (p, len(msgs) - 1))
        seq = [order[m["key"]] for m in msgs]
        check(seq == sorted(seq), "partition %d is out of produce order" % p)
    keys = set(m["key"] for m in got)
    check(len(keys) == N, "duplicates: %d distinct keys" % len(keys))

    again = {(m["partition"], m["offset"]): m["ts"] for m in consume()}
    for m in got:
        check(again[(m["partition"], m["offset"])] == m["ts"], "timestamp changed between reads")
    print("ok: %d messages over %s partitions, keys/values/headers/timestamps equal" %
          (N, {p: len(v) for p, v in sorted(per_part.items())}))
finally:
    rc = b.stop()
    if rc != 0:
        fail("stratad exit status %s after SIGTERM" % rc)
    b.cleanup()

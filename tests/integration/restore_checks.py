"""
What the restore tests (test_restore.py, one broker; test_restore_cluster.py,
three nodes) read back the same way: `strata topics list` and `describe`
parsed, a partition's records through kcat, its batches through Fetch, what
differs between two such reads, and a topic's objects in the bucket.
"""
import json
import re
import struct
import subprocess
import time

from kwire import batches
from strata_harness import check, fail, run


def topic_rows(strata):
    """{topic: (id, partitions, replication factor)} of `strata topics
    list`; strata(*verb) runs `strata topics VERB...`: (rc, stdout, stderr)."""
    rc, out, err = strata("list")
    check(rc == 0, "strata topics list: exit %d: %s" % (rc, err))
    rows = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) >= 4:
            rows[f[0]] = (f[1], int(f[2]), int(f[3]))
    return rows


def describe_topic(strata, topic):
    """`strata topics describe`: (header {field: value}, configs {k: v},
    {partition: leader epoch})."""
    rc, out, err = strata("describe", topic)
    check(rc == 0, "strata topics describe %s: exit %d: %s" % (topic, rc, err))
    lines = out.splitlines()
    head = dict(re.findall(r"(\w+): ([^\t]*)", lines[0]))
    configs, last = {}, None
    for kv in head.get("Configs", "").split(","):
        if "=" in kv:
            last, v = kv.split("=", 1)
            configs[last] = v
        elif last is not None and kv:
            configs[last] += "," + kv
    epochs = {}
    for line in lines[1:]:
        f = line.split()
        if len(f) >= 10 and f[0].isdigit() and f[2].lstrip("-").isdigit():
            epochs[int(f[0])] = int(f[2])
    return head, configs, epochs


def kcat_records(bootstrap, topic, p):
    """kcat from the beginning to the end: [(offset, timestamp, key, value)]."""
    try:
        _, out, _ = run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", str(p), "-o", "beginning", "-e", "-q",
                         "-f", "%o %T %k %s\\n"], timeout=90)
    except subprocess.TimeoutExpired:
        fail("kcat on %s-%d did not reach the end in 90 s" % (topic, p))
    recs = []
    for line in out.split(b"\n")[:-1]:
        o, ts, k, v = line.split(b" ", 3)
        recs.append((int(o), int(ts), k, v))
    return recs


def fetch_batches(conn, topic, p, start, end, where=""):
    """The batches Fetch returns on conn (closed after) for [start, end),
    bytes as sent."""
    out, off, deadline = [], start, time.time() + 60
    try:
        while off < end:
            check(time.time() < deadline, "Fetch of %s-%d%s stuck at offset %d (end %d)" % (topic, p, where, off, end))
            err, _hw, _ls, data = conn.fetch(topic, p, off, max_bytes=1 << 20, max_wait=500)
            check(err == 0, "Fetch %s-%d%s, offset %d: error %d" % (topic, p, where, off, err))
            for base, _count, raw in batches(data or b""):
                last = base + struct.unpack_from(">i", raw, 23)[0]
                if last < off:
                    continue
                if base >= end:
                    off = end
                    break
                out.append(raw)
                off = last + 1
    finally:
        conn.close()
    return out


def same_records(what, got, want, whose="want"):
    """got and want: [(offset, timestamp, key, value)] as kcat_records reads
    them; whose names where want was read ("A serves")."""
    if got == want:
        return
    k = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))

    def brief(recs, i):
        return repr(recs[i])[:200] if i < len(recs) else "(nothing)"
    fail("%s: kcat read %d records from offset %s, %s %d from %s; first difference at #%d: got %s, want %s" %
         (what, len(got), got[0][0] if got else "-", whose, len(want), want[0][0] if want else "-", k,
          brief(got, k), brief(want, k)))


def same_batches(what, got, want, whose="the"):
    """got and want: the raw batches fetch_batches reads; whose names where
    want was read ("A's")."""
    check(got == want, "%s: Fetch returns %d batches (%d bytes), %d of them differ from %s %d (%d bytes)" %
          (what, len(got), sum(map(len, got)), sum(1 for x, y in zip(got, want) if x != y) + abs(len(got) - len(want)),
           whose, len(want), sum(map(len, want))))


def prefix_of(topic, tid):
    return "%s-%s/" % (topic, tid)


def bucket_manifest(bucket, topic, tid, p):
    return bucket.manifest("%s%d/" % (prefix_of(topic, tid), p))


def bucket_descriptor(bucket, topic, tid):
    """The topic's topic.json, decoded (None when absent)."""
    data = bucket.get(prefix_of(topic, tid) + "topic.json")
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        fail("%s's topic.json is not JSON: %r" % (topic, data[:300]))

"""
integration.read_replica - `strata topics restore --read-replica`: a tiered
topic of cluster A served read-only by cluster B, which reads A's bucket
location and never writes to it.

usage: test_read_replica.py [shared]   B's objectstore.file.root is A's, R
       test_read_replica.py source     B tiers to a root of its own, RB, and
                                       reads A's with --source file://R
                                       (strata.remote.read.replica.location);
                                       RB never gets a key of the topic
       test_read_replica.py rgw ENVFILE  the same on an RGW (tests/s3/rgw.sh):
                                       A under prefix .../a/, B under .../b/,
                                       --source s3://BUCKET/.../a/; R is A's
                                       prefix, snapshotted by listing (key,
                                       size, modification time)

Cluster A is one stratad; cluster B three combined nodes (scripts/cluster.sh)
with ports and dirs of their own.  A tiers to a `file` bucket R in the
test's temporary root (objectstore.file.root): task interval 500 ms,
segment.bytes and local.retention.bytes 16 KiB, retention.ms -1.

1. A: topic rr-src (2 partitions, remote.storage.enable=true, max.message.
   bytes 765432); kcat (acks=all) writes 300 records with known keys and
   values of random length to each partition; once every closed segment is
   in the bucket, each manifest's [log start, end) is recorded with what A
   serves there (kcat: offset, timestamp, key, value, checked against what
   was written; Fetch: the batches as sent).
2. B: three nodes, no topic known.  R is snapshotted (every file and
   directory: path, size, mtime) once A holds still (two snapshots three
   task intervals apart equal).
3. `strata topics restore rr-src --read-replica --replication-factor 3`
   through B: exit 0, one line naming the topic, its id and the manifests'
   ranges.  B's topic has A's id, 2 partitions, replication factor 3, A's
   configs plus strata.remote.read.replica=true (describe, DescribeConfigs;
   A's says false); every ISR whole; each B leader's ListOffsets says the
   manifest's [start, end), kcat through B reads exactly A's records of
   that range and the leader's Fetch returns A's batches byte for byte.
4. Refusals on B, each leaving the offsets as they were: Produce (by hand
   to the leader, and kcat) INVALID_TOPIC_EXCEPTION (17, kcat "Invalid
   topic"); DeleteRecords 17; strata.remote.read.replica changed by
   IncrementalAlterConfigs (SET false, DELETE), AlterConfigs and `strata
   topics alter`: INVALID_CONFIG (40), the config still true; on A, SET
   true on the source topic: INVALID_CONFIG; a second restore --read-replica
   of the name: exit 1, "already exists", the same id.  B still serves
   partition 0.  R is as in step 2.
5. B read again, then its three nodes SIGKILLed and started again (same
   dirs): once the leaders hold still (a broker session and a second: the
   registrations from before the kill expire first), every leader is a
   restarted node and serves the whole range byte for byte.  R is still
   as in step 2 (restore, reads, refusals, restarts: nothing written).
6. A: 200 more records a partition; A's manifests and B's leaders are
   polled together: B serves the new ends within 8 task intervals of A's
   manifests saying them (both times printed, from the writes), kcat and
   Fetch equal to A's.  DeleteRecords on A moves partition 1's log start
   into its second remote segment: B's earliest follows within 8 task
   intervals of A's manifest, and B serves [new start, end) as A does.
7. R snapshotted again (A still).  SIGKILL to B's leader of partition 0:
   a survivor leads and serves both partitions' whole ranges byte for byte;
   the node is started again, every ISR whole.
8. DeleteTopics of rr-src on B: gone from every node (metadata and
   partition dirs); a few task intervals later R is as in step 7 (A's
   objects all there, nothing deleted), every object A's manifests name is
   there, and A still serves every record written, as written.
9. Bad input on B: --read-replica with --as (exit 2, a "strata topics:"
   line naming read-replica), a topic the bucket does not hold (exit 1,
   naming it), CreateTopics with strata.remote.read.replica=true and
   remote.storage.enable=false (INVALID_CONFIG): nothing created.
10. `restore --all --read-replica --replication-factor 3` on B: the topic
   is back under its id, a read replica (Produce refused), serving A's
   current ranges byte for byte; R still as in step 7.  No node of B logged
   an upload, a deletion, an orphan sweep or a manifest write of the topic
   (A's log has a line per segment it uploaded).  Clean stops.
"""
import base64
import os
import random
import re
import shutil
import signal
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from restore_checks import (bucket_descriptor, bucket_manifest, describe_topic, fetch_batches,  # noqa: E402
                            kcat_records, prefix_of, same_batches, same_records, topic_rows)
from strata_harness import (CONFIG, Broker, Bucket, Cluster, binary, check, fail, file_overrides,  # noqa: E402
                            kstr, manifest_problems, rgw_env, run, s3_overrides, segment_logs, tiered_overrides,
                            wait_for)

SEG = 16 << 10
N = 300  # records a partition at first
MORE = 200  # records a partition in step 6
TASK_MS = 500
SESSION_MS = 3000
FOLLOW_S = 8 * TASK_MS / 1000  # how long B may take to follow the bucket
# after a node restarts, leaders move until the sessions of its registrations
# before the kill have expired: leaders must hold that long and more
RESTART_HOLD = SESSION_MS / 1000 + 1
T = "rr-src"
PARTS = 2
RF_B = 3
REPLICA = "strata.remote.read.replica"
CONFIGS = {"remote.storage.enable": "true", "segment.bytes": str(SEG), "local.retention.bytes": str(SEG),
           "retention.ms": "-1", "max.message.bytes": "765432"}
INVALID_TOPIC = 17
INVALID_CONFIG = 40

t_start = time.time()
rnd = random.Random(int(os.environ.get("STRATA_TIER_SEED", "4242")))
top = tempfile.mkdtemp(prefix="strata-read-replica-")
MODE = sys.argv[1] if len(sys.argv) > 1 else "shared"
if MODE not in ("shared", "source", "rgw") or (MODE == "rgw") != (len(sys.argv) == 3):
    sys.exit("usage: test_read_replica.py [shared | source | rgw ENVFILE]")
if MODE == "rgw":
    # the fixture's bucket is shared: this run's prefixes only
    env = rgw_env(sys.argv[2])
    R = "it-read-replica-%d-%d/a/" % (int(time.time()), os.getpid())  # A's prefix
    RB = R[:-2] + "b/"  # B's
    store, store_b = s3_overrides(env), s3_overrides(env)
    store["objectstore.s3.prefix"], store_b["objectstore.s3.prefix"] = R, RB
    SOURCE = ["--source", "s3://%s/%s" % (env["STRATA_RGW_BUCKET"], R)]
else:
    R = os.path.join(top, "bucket")  # A's bucket (and B's, shared), outside their dirs
    RB = os.path.join(top, "bucket-b") if MODE == "source" else R  # B's own
    SOURCE = ["--source", "file://" + R] if MODE == "source" else []  # where B's replica reads
    store, store_b = file_overrides(R), file_overrides(RB)
os.makedirs(os.path.join(top, "a"))
os.makedirs(os.path.join(top, "b"))
a = Broker(root=os.path.join(top, "a"),
           overrides=tiered_overrides(store, remote_log_manager_task_interval_ms=TASK_MS,
                                      remote_log_fetch_chunk_bytes=64 << 10))
cl = Cluster(3, root=os.path.join(top, "b"),
             overrides=tiered_overrides(store_b, remote_log_manager_task_interval_ms=TASK_MS,
                                        log_retention_check_interval_ms=1000,
                                        remote_log_fetch_chunk_bytes=64 << 10,
                                        broker_session_timeout_ms=SESSION_MS,
                                        broker_heartbeat_interval_ms=500))
bucket = Bucket(a.overrides)
bucket_b = Bucket(cl.overrides)


# ---- the CLI on each cluster --------------------------------------------------

def strata_a(*verb, timeout=180):
    """`strata topics` with exactly the arguments A's stratad got."""
    cmd = a.command()
    check(cmd[1:3] == ["--config", CONFIG], "stratad's command line: %s" % cmd[:3])
    rc, out, err = run([binary("strata"), "topics"] + cmd[1:] + list(verb), check_rc=False, timeout=timeout)
    return rc, out.decode(errors="replace"), err


strata_b = cl.strata_topics  # through a node of B that is not the active controller


def b_topics():
    return topic_rows(strata_b)


# ---- records ---------------------------------------------------------------------

produced = {}  # partition -> [(key, value)] at offsets 0..


def produce_a(p, n, tag):
    rows = produced.setdefault(p, [])
    new = []
    for i in range(len(rows), len(rows) + n):
        key = b"%s-%d-%s%06d" % (T.encode(), p, tag.encode(), i)
        value = b"%s-%d-v%06d-" % (T.encode(), p, i) + base64.b64encode(rnd.randbytes(rnd.randint(100, 350)))
        new.append((key, value))
    run(["kcat", "-b", a.bootstrap, "-P", "-t", T, "-p", str(p), "-K", ":", "-X", "acks=all",
         "-X", "batch.size=4096"], input=b"".join(k + b":" + v + b"\n" for k, v in new), timeout=120)
    rows.extend(new)


def manifest(p):
    return bucket_manifest(bucket, T, tid, p)


def span(man):
    return man["log_start_offset"], (man["segments"][-1]["last_offset"] + 1 if man["segments"] else
                                     man["log_start_offset"])


def settled(p):
    """Every closed segment of A's partition p is in the bucket's manifest."""
    man = manifest(p)
    logs = segment_logs(a, T, p)
    if not man or not man["segments"] or not logs:
        return False
    return span(man)[1] == int(os.path.basename(logs[-1])[:20])


def from_a(p, start, end):
    """What A serves of [start, end): its records (checked against what was
    written) and the batches of its Fetch."""
    recs = [r for r in kcat_records(a.bootstrap, T, p) if start <= r[0] < end]
    got = [(o, k, v) for o, _ts, k, v in recs]
    want = [(o,) + produced[p][o] for o in range(start, end)]
    check(got == want, "A serves %d records of %s-%d in [%d, %d), want %d as written; first difference at %s" %
          (len(got), T, p, start, end, len(want), next((w[0] for g, w in zip(got, want) if g != w), "the end")))
    raw = fetch_batches(kwire.Conn(a.port, timeout=30), T, p, start, end, " at A")
    return dict(start=start, end=end, recs=recs, raw=raw)


# ---- cluster B ---------------------------------------------------------------------

def b_leader(p, nodes=None):
    st = cl.partition_state(T, p, nodes)
    return st["leader"] if st else -1


def b_offsets(p, node):
    """ListOffsets v9 at node: (error, earliest, latest)."""
    c = cl.conn(node, timeout=30)
    try:
        e1, earliest, _ = kwire.list_offsets_v9(c, T, p, kwire.EARLIEST)
        e2, latest, _ = kwire.list_offsets_v9(c, T, p, kwire.LATEST)
    finally:
        c.close()
    return e1 or e2, earliest, latest


def b_ranges(nodes=None):
    """{p: (leader, error, earliest, latest)} as B's leaders answer."""
    out = {}
    for p in range(PARTS):
        ld = b_leader(p, nodes)
        out[p] = (ld,) + (b_offsets(p, ld) if ld > 0 else (-1, -1, -1))
    return out


def settle_leaders(what, nodes=None, hold=1.5, timeout=30):
    """Until every live node (of nodes) names the same leader of each
    partition, and the same ones for hold seconds (leaders move for a while
    after nodes come back).  Returns {p: leader}."""
    nodes = nodes or cl.live()
    seen = {"since": None, "leaders": None}

    def same():
        leaders = {}
        for p in range(PARTS):
            named = set()
            for i in nodes:
                st = cl.metadata(i, [T], timeout=2)["topics"].get(T, (0, {}))[1].get(p)
                named.add(st["leader"] if st else -1)
            if len(named) != 1 or min(named) not in nodes:
                seen["since"] = None
                return False
            leaders[p] = named.pop()
        if leaders != seen["leaders"]:
            seen["leaders"], seen["since"] = leaders, time.time()
        return time.time() - seen["since"] >= hold

    cl.wait(same, timeout, "%s: the nodes %s to agree on the leaders of %s for %.1f s" % (what, nodes, T, hold),
            interval=0.1)
    return seen["leaders"]


def wait_b_ranges(ref, timeout, what, nodes=None):
    """Until every leader of B says [start, end) of ref; returns the time."""
    t0 = time.time()
    seen = {}

    def there():
        seen["r"] = b_ranges(nodes)
        return all(seen["r"][p][1:] == (0, ref[p]["start"], ref[p]["end"]) for p in range(PARTS))

    deadline = time.time() + timeout
    while not there():
        if time.time() > deadline:
            fail("%s: after %.1f s B's leaders say %s (partition: leader, error, earliest, latest), the bucket "
                 "%s" % (what, timeout, seen["r"], {p: (ref[p]["start"], ref[p]["end"]) for p in range(PARTS)}))
        time.sleep(0.05)
    return time.time() - t0


def b_serves(what, ref, nodes=None):
    """Every partition: its leader's ListOffsets says [start, end), kcat
    through nodes reads A's records, the leader's Fetch A's batches.
    Returns {p: (leader, records, batches, bytes)}."""
    out = {}
    for p in range(PARTS):
        r = ref[p]
        ld = b_leader(p, nodes)
        check(ld > 0, "%s: %s-%d has no leader on B" % (what, T, p))
        e, earliest, latest = b_offsets(p, ld)
        check(e == 0 and (earliest, latest) == (r["start"], r["end"]),
              "%s: %s-%d at B's leader (node %d): error %d, earliest %d, latest %d; the bucket holds [%d, %d)" %
              (what, T, p, ld, e, earliest, latest, r["start"], r["end"]))
        recs = kcat_records(cl.bootstrap(nodes or cl.live()), T, p)
        same_records("%s: %s-%d through B" % (what, T, p), recs, r["recs"], "A serves")
        raw = fetch_batches(cl.conn(ld, timeout=30), T, p, r["start"], r["end"], " at node %d of B" % ld)
        same_batches("%s: %s-%d at node %d of B" % (what, T, p, ld), raw, r["raw"], "A's")
        out[p] = (ld, len(recs), len(raw), sum(map(len, raw)))
    return out


def served_text(s):
    return ", ".join("p%d: node %d, %d records, %d batches (%d bytes)" % ((p,) + s[p]) for p in sorted(s))


def alter_configs(node, configs):
    """AlterConfigs v0 (replaces every override) of T at node: (error, message)."""
    body = struct.pack(">i", 1) + struct.pack(">b", 2) + kstr(T) + struct.pack(">i", len(configs))
    for k, v in configs.items():
        body += kstr(k) + kstr(v)
    body += struct.pack(">b", 0)
    c = cl.conn(node, timeout=30)
    try:
        r = c.call(33, 0, body)
        r.take(">i")  # throttle
        check(r.take(">i") == 1, "AlterConfigs: not one resource in the answer")
        err = r.take(">h")
        return err, r.string()
    finally:
        c.close()


# ---- the bucket as files ---------------------------------------------------------------

def snapshot():
    """{path under R: (size, mtime ns)} of every file and directory (on
    RGW: {key: (size, modification time)} of every object under R)."""
    if MODE == "rgw":
        _, text, _ = run(bucket._cmd("ls"), timeout=120)
        return {key: (size, when) for size, when, key in
                (line.split(None, 2) for line in text.decode().splitlines())}
    out = {}
    for d, dirs, files in os.walk(R):
        for name in dirs + files:
            path = os.path.join(d, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            out[os.path.relpath(path, R) + ("/" if name in dirs else "")] = (st.st_size, st.st_mtime_ns)
    return out


def diff(before, after):
    added = sorted(set(after) - set(before))
    gone = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    parts = []
    for name, keys in (("added", added), ("gone", gone), ("changed", changed)):
        if keys:
            parts.append("%d %s (%s%s)" % (len(keys), name, ", ".join(
                k + ("" if name != "changed" else " %s->%s" % (before[k], after[k])) for k in keys[:6]),
                ", ..." if len(keys) > 6 else ""))
    return "; ".join(parts) or "nothing"


def hold_still(what, timeout=30):
    """A snapshot of R once two taken three task intervals apart are equal."""
    t0 = time.time()
    prev = snapshot()
    while True:
        time.sleep(3 * TASK_MS / 1000)
        cur = snapshot()
        if cur == prev:
            return cur, time.time() - t0
        if time.time() - t0 > timeout:
            fail("%s: the bucket does not hold still: %s" % (what, diff(prev, cur)))
        prev = cur


BUCKET_LINE = re.compile(r"delet|sweep|orphan|manifest|topic\.json|in the bucket|upload|copy", re.I)


def unchanged(before, what):
    if RB != R:  # B's own bucket never holds a key of the topic
        mine = [k for k in bucket_b.ls() if T in k]
        check(not mine, "%s: B's own bucket holds %d keys of %s: %s" % (what, len(mine), T, mine[:5]))
    after = snapshot()
    if after != before:
        # who touched it: the lines of each node's log about the bucket
        for name, text in [("A", a.log_text())] + [("B node %d" % i, cl.log_text(i)) for i in cl.ids()]:
            lines = [ln for ln in text.splitlines() if BUCKET_LINE.search(ln) and "log-janitor" not in ln]
            print("---- %s's log, %d lines about the bucket, the last 15:\n%s" %
                  (name, len(lines), "\n".join(lines[-15:])), flush=True)
        fail("%s: the files under the bucket changed: %s" % (what, diff(before, after)))
    return len(after)


try:
    # ---- 1. cluster A, its topic, what the bucket holds ---------------------------
    a.start()
    c = kwire.Conn(a.port, timeout=60)
    err = c.create_topic(T, PARTS, configs=CONFIGS)
    check(err == 0, "CreateTopics %s on A: error %d" % (T, err))
    c.close()
    rows = topic_rows(strata_a)
    check(T in rows and rows[T][1:] == (PARTS, 1), "A's topic list: %s" % rows)
    tid = rows[T][0]
    for p in range(PARTS):
        produce_a(p, N, "k")
    t0 = time.time()
    wait_for(lambda: all(settled(p) for p in range(PARTS)), timeout=60, interval=0.25,
             what="every closed segment of A in the bucket")
    t_settle = time.time() - t0
    wait_for(lambda: bucket_descriptor(bucket, T, tid) is not None, timeout=10, interval=0.1,
             what="topic.json of %s" % T)
    a_configs = describe_topic(strata_a, T)[1]
    check(a_configs == CONFIGS, "describe %s on A: configs %s, want %s" % (T, a_configs, CONFIGS))
    ref = {}
    for p in range(PARTS):
        man = manifest(p)
        check(man["topic"] == T and man["topic_id"] == tid and man["partition"] == p,
              "the manifest of %s-%d names %s/%s/%s" % (T, p, man["topic"], man["topic_id"], man["partition"]))
        start, end = span(man)
        check(start == 0 and N // 2 <= end < N,
              "%s-%d: the bucket holds [%d, %d) of %d records" % (T, p, start, end, N))
        ref[p] = from_a(p, start, end)
        ref[p]["segments"] = len(man["segments"])
    print("1. A (port %d): %s id %s, %d records a partition; the bucket settled %.1f s after the last write: %s" %
          (a.port, T, tid, N, t_settle, ", ".join("p%d [%d, %d) in %d segments, %d batches" %
                                                   (p, ref[p]["start"], ref[p]["end"], ref[p]["segments"],
                                                    len(ref[p]["raw"])) for p in range(PARTS))), flush=True)

    # ---- 2. cluster B, the bucket held still ----------------------------------------
    t0 = time.time()
    cl.up(timeout=90)
    check(T not in b_topics(), "B knows %s before the restore" % T)
    print("2. B: 3 combined nodes on ports %s up in %.1f s, no topic; strata topics through node %d" %
          ([cl.port(i) for i in cl.ids()], time.time() - t0, cl.cli_node()), flush=True)
    snap0, t_still = hold_still("before the restore")
    print("   the bucket: %d files and directories under R, still for 3 task intervals (%.1f s)" %
          (len(snap0), t_still), flush=True)

    # ---- 3. restore --read-replica through B -------------------------------------------
    via = cl.cli_node()
    t0 = time.time()
    rc, out, err = strata_b("restore", T, "--read-replica", *SOURCE, "--replication-factor", str(RF_B), node=via)
    t_restore = time.time() - t0
    check(rc == 0, "restore %s --read-replica: exit %d\nstdout: %s\nstderr: %s" % (T, rc, out, err[-3000:]))
    lines = out.splitlines()
    check(len(lines) == 1 and re.search(r"\btopic %s\b(?!-)" % re.escape(T), lines[0]) and tid in lines[0],
          "restore --read-replica: stdout %r, want one line naming topic %s and its id %s" % (out, T, tid))
    said = [(int(p), int(s), int(e)) for p, s, e in re.findall(r" (\d+):\[(\d+), (\d+)\)", lines[0])]
    if said:
        check(said == [(p, ref[p]["start"], ref[p]["end"]) for p in range(PARTS)],
              "restore --read-replica says the ranges %s, the manifests %s" %
              (said, [(p, ref[p]["start"], ref[p]["end"]) for p in range(PARTS)]))
    print("3. restore %s --read-replica --replication-factor %d through node %d: exit 0 in %.2f s; stdout:\n     %s" %
          (T, RF_B, via, t_restore, lines[0]), flush=True)
    rows = b_topics()
    check(rows.get(T) == (tid, PARTS, RF_B), "B's topic list: %s is %s, want %s" % (T, rows.get(T), (tid, PARTS, RF_B)))
    head, b_configs, epochs = describe_topic(strata_b, T)
    want_configs = dict(a_configs, **{REPLICA: "true"})
    if SOURCE:
        want_configs[REPLICA + ".location"] = SOURCE[1]
    check(head.get("TopicId") == tid, "describe %s on B: topic id %s, A's %s" % (T, head.get("TopicId"), tid))
    check(b_configs == want_configs, "describe %s on B: configs %s, want %s" % (T, b_configs, want_configs))
    c = cl.conn(cl.cli_node(), timeout=30)
    dcb = kwire.describe_configs(c, [T])[T]
    c.close()
    c = kwire.Conn(a.port, timeout=30)
    dca = kwire.describe_configs(c, [T])[T]
    c.close()
    check(dcb[0] == 0 and dcb[1].get(REPLICA) == "true" and dcb[1].get("remote.storage.enable") == "true",
          "DescribeConfigs %s on B: error %d, %s=%s, remote.storage.enable=%s" %
          (T, dcb[0], REPLICA, dcb[1].get(REPLICA), dcb[1].get("remote.storage.enable")))
    check(dca[0] == 0 and dca[1].get(REPLICA) == "false",
          "DescribeConfigs %s on A: error %d, %s=%s, want false" % (T, dca[0], REPLICA, dca[1].get(REPLICA)))
    t0 = time.time()
    cl.wait_isr(T, PARTS, RF_B, timeout=60)
    settle_leaders("after the restore")
    t_isr = time.time() - t0
    t_range = wait_b_ranges(ref, FOLLOW_S, "after the restore")
    t0 = time.time()
    served = b_serves("after the restore", ref)
    print("   B: id %s, %d partitions, replication factor %d, configs A's plus %s=true; every ISR whole and the "
          "leaders settled %.1f s, their ranges the manifests' %.2f s later; leader epochs %s; read in %.1f s: %s" %
          (tid, PARTS, RF_B, REPLICA, t_isr, t_range, epochs, time.time() - t0, served_text(served)), flush=True)

    # ---- 4. refusals on B ------------------------------------------------------------------
    print("4. refusals:", flush=True)
    ld0 = b_leader(0)
    c = cl.conn(ld0, timeout=30)
    _idx, err, base = c.produce(T, 0, kwire.record_batch([b"refused-1", b"refused-2"], keys=[b"rk1", b"rk2"]))
    check(err == INVALID_TOPIC, "Produce to %s-0 at B's leader (node %d): error %d (base %d), want "
          "INVALID_TOPIC_EXCEPTION (17)" % (T, ld0, err, base))
    print("   Produce to %s-0 at its leader, node %d: error %d" % (T, ld0, err), flush=True)
    err, low = c.delete_records(T, 0, ref[0]["start"] + 1)
    c.close()
    check(err == INVALID_TOPIC, "DeleteRecords(%s-0, %d) at B's leader: error %d (low watermark %d), want "
          "INVALID_TOPIC_EXCEPTION (17)" % (T, ref[0]["start"] + 1, err, low))
    print("   DeleteRecords(%s-0, %d) at node %d: error %d" % (T, ref[0]["start"] + 1, ld0, err), flush=True)
    t0 = time.time()
    rc, out, err = run(["kcat", "-b", cl.bootstrap(), "-P", "-t", T, "-p", "1", "-K", ":", "-X", "acks=all",
                        "-X", "message.timeout.ms=15000"], input=b"rk3:refused-3\n", check_rc=False, timeout=60)
    said = [ln for ln in err.splitlines() if "Invalid topic" in ln]
    check(rc != 0 and said, "kcat -P to %s-1 through B: exit %d, stderr %r; want a failure 'Broker: Invalid topic'" %
          (T, rc, err[-1000:]))
    print("   kcat -P to %s-1 through B: exit %d in %.2f s: %s" % (T, rc, time.time() - t0, said[0].strip()),
          flush=True)
    t_range = wait_b_ranges(ref, 1, "after the refused writes")  # nothing appended, nothing trimmed
    node = cl.cli_node()
    c = cl.conn(node, timeout=30)
    for what, changes in (("SET false", [(REPLICA, 0, "false")]), ("DELETE", [(REPLICA, 1, None)])):
        err, msg = c.incremental_alter(T, changes)
        check(err == INVALID_CONFIG, "IncrementalAlterConfigs %s %s of %s on B: error %d (%s), want INVALID_CONFIG "
              "(40)" % (what, REPLICA, T, err, msg))
        print("   IncrementalAlterConfigs %s %s on B (node %d): error %d: %s" % (what, REPLICA, node, err, msg),
              flush=True)
    c.close()
    err, msg = alter_configs(node, dict(b_configs, **{REPLICA: "false"}))
    check(err == INVALID_CONFIG, "AlterConfigs of %s on B with %s=false: error %d (%s), want INVALID_CONFIG (40)" %
          (T, REPLICA, err, msg))
    print("   AlterConfigs with %s=false on B: error %d: %s" % (REPLICA, err, msg), flush=True)
    rc, out, err = strata_b("alter", T, "--config", REPLICA + "=false")
    check(rc == 1 and "INVALID_CONFIG" in err, "strata topics alter %s --config %s=false on B: exit %d, stdout %r, "
          "stderr %r" % (T, REPLICA, rc, out, err[-1000:]))
    print("   strata topics alter --config %s=false on B: exit 1: %s" % (REPLICA, err.strip().splitlines()[-1]),
          flush=True)
    c = kwire.Conn(a.port, timeout=30)
    err, msg = c.incremental_alter(T, [(REPLICA, 0, "true")])
    dca = kwire.describe_configs(c, [T])[T]
    c.close()
    check(err == INVALID_CONFIG and dca[1].get(REPLICA) == "false",
          "IncrementalAlterConfigs SET %s=true of the source topic on A: error %d (%s), want INVALID_CONFIG (40); "
          "A's config now %s" % (REPLICA, err, msg, dca[1].get(REPLICA)))
    print("   IncrementalAlterConfigs SET %s=true of the source topic on A: error %d: %s" % (REPLICA, err, msg),
          flush=True)
    head, configs, _e = describe_topic(strata_b, T)
    check(configs == want_configs, "B's configs of %s after the refused alters: %s" % (T, configs))
    rc, out, err = strata_b("restore", T, "--read-replica", *SOURCE, "--replication-factor", str(RF_B))
    last = (err.rstrip("\n").splitlines() or [""])[-1]
    check(rc == 1 and last.startswith("strata topics:") and ("already exists" in last or
                                                             "TOPIC_ALREADY_EXISTS" in last) and not out,
          "a second restore %s --read-replica: exit %d, stdout %r, stderr %r" % (T, rc, out, err[-1000:]))
    check(b_topics().get(T) == (tid, PARTS, RF_B), "the refused restore changed %s: %s" % (T, b_topics().get(T)))
    print("   restore %s --read-replica again: exit 1: %s" % (T, last), flush=True)
    same_records("after the refusals: %s-0 through B" % T, kcat_records(cl.bootstrap(), T, 0), ref[0]["recs"],
                 "A serves")
    n = unchanged(snap0, "after the restore, the reads and the refusals")
    print("   B still serves %s-0 (%d records); the bucket: %d files and directories as before the restore" %
          (T, len(ref[0]["recs"]), n), flush=True)

    # ---- 5. read again, every node of B restarted -----------------------------------------
    served = b_serves("read again", ref)
    pids = cl.pids()
    for i in cl.ids():
        os.kill(pids[i], signal.SIGKILL)
    cl.wait(lambda: not cl.live(), 30, "B's nodes to be gone after SIGKILL", interval=0.01)
    t0 = time.time()
    cl.up(timeout=90)
    cl.wait_isr(T, PARTS, RF_B, timeout=60)
    leaders = settle_leaders("after B's restart", hold=RESTART_HOLD)
    t_back = time.time() - t0
    t_range = wait_b_ranges(ref, 30, "after B's restart")
    served = b_serves("after B's restart", ref)
    n = unchanged(snap0, "after B's nodes were SIGKILLed and started again")
    print("5. B read again, its 3 nodes SIGKILLed and started again: every ISR whole and the leaders %s settled in "
          "%.1f s, ranges the manifests' %.2f s later; served: %s; the bucket: %d files and directories as before the "
          "restore" % (leaders, t_back, t_range, served_text(served), n), flush=True)

    # ---- 6. A writes on; retention on A ---------------------------------------------------------
    def follow(what, a_ref, a_timeout=60):
        """Polls A's manifests (a_ref(): the ranges B must serve, or None
        while A has not written them) and B's leaders at once; B has
        FOLLOW_S from the moment A's manifests say them.  Returns (the ranges,
        seconds to A's manifests, seconds to B's leaders), both from the call."""
        t0 = time.time()
        want, a_at, seen = None, None, None
        while True:
            if want is None:
                want = a_ref()
                if want is not None:
                    a_at = time.time()
            seen = b_ranges()
            now = time.time()
            if want is not None and all(seen[p][1:] == (0, want[p]["start"], want[p]["end"]) for p in range(PARTS)):
                return want, a_at - t0, now - t0
            if want is None and now - t0 > a_timeout:
                fail("%s: A's manifests do not say it after %d s" % (what, a_timeout))
            if want is not None and now - a_at > FOLLOW_S:
                fail("%s: %.1f s after A's manifests said %s, B's leaders say %s (partition: leader, error, earliest, "
                     "latest)" % (what, now - a_at, {p: (want[p]["start"], want[p]["end"]) for p in range(PARTS)},
                                  seen))
            time.sleep(0.05)

    old = {p: dict(ref[p]) for p in range(PARTS)}
    for p in range(PARTS):
        produce_a(p, MORE, "n")

    def uploaded():
        if not all(settled(p) for p in range(PARTS)):
            return None
        spans = {p: span(manifest(p)) for p in range(PARTS)}
        if any(spans[p][1] <= old[p]["end"] for p in range(PARTS)):
            return None
        return {p: dict(start=spans[p][0], end=spans[p][1]) for p in range(PARTS)}

    newref, t_up, t_follow = follow("B following A's uploads", uploaded)
    for p in range(PARTS):
        ref[p] = from_a(p, newref[p]["start"], newref[p]["end"])
    served = b_serves("after A's uploads", ref)
    print("6. A: %d more records a partition (%s); after the writes A's manifests said them in %.2f s, B's leaders "
          "served them in %.2f s (%.2f s after A's manifests; deadline %.1f s): %s" %
          (MORE, ", ".join("p%d [%d, %d) -> [%d, %d)" % (p, old[p]["start"], old[p]["end"], ref[p]["start"],
                                                          ref[p]["end"]) for p in range(PARTS)),
           t_up, t_follow, t_follow - t_up, FOLLOW_S, served_text(served)), flush=True)
    mans = {p: manifest(p) for p in range(PARTS)}
    segs = mans[1]["segments"]
    check(len(segs) >= 3, "%s-1 has only %d remote segments" % (T, len(segs)))
    moved = segs[1]["base_offset"] + (segs[1]["last_offset"] - segs[1]["base_offset"]) // 2 + 1
    c = kwire.Conn(a.port, timeout=30)
    err, low = c.delete_records(T, 1, moved)
    c.close()
    check(err == 0 and low == moved, "DeleteRecords(%s-1, %d) on A: error %d, low watermark %d" % (T, moved, err, low))

    def trimmed():
        man = manifest(1)
        if man["log_start_offset"] != moved:
            return None
        return {0: ref[0], 1: dict(start=moved, end=span(man)[1])}

    _r, t_trim_a, t_trim = follow("B following A's log start", trimmed, a_timeout=30)
    ref[1] = from_a(1, moved, ref[1]["end"])
    served = b_serves("after DeleteRecords on A", ref)
    man1 = manifest(1)
    print("   DeleteRecords(%s-1, %d) on A: its manifest started there in %.2f s (first segment %d, %d segments), "
          "B's earliest in %.2f s; served: %s" %
          (T, moved, t_trim_a, man1["segments"][0]["base_offset"], len(man1["segments"]), t_trim,
           served_text(served)), flush=True)

    # ---- 7. the leader of partition 0 killed --------------------------------------------------------
    snap1, t_still = hold_still("after A's writes")
    print("7. the bucket: %d files and directories, still for 3 task intervals (%.1f s)" % (len(snap1), t_still),
          flush=True)
    victim = b_leader(0)
    check(victim > 0, "%s-0 has a leader on B" % T)
    t0 = time.time()
    cl.kill(victim)
    survivors = [i for i in cl.ids() if i != victim]
    cl.wait(lambda: b_leader(0, survivors) in survivors, SESSION_MS / 1000 + 30,
            "a survivor to lead %s-0 after node %d was killed" % (T, victim), interval=0.1)
    t_fail = time.time() - t0
    settle_leaders("after node %d was killed" % victim, nodes=survivors)
    t_range = wait_b_ranges(ref, 30, "after node %d was killed" % victim, nodes=survivors)
    served = b_serves("node %d killed" % victim, ref, nodes=survivors)
    cl.restart(victim, timeout=90)
    cl.wait_isr(T, PARTS, RF_B, timeout=60)
    settle_leaders("after node %d came back" % victim, hold=RESTART_HOLD)
    print("   node %d (leader of %s-0) SIGKILLed: node %d leads after %.2f s, ranges the manifests' %.2f s later; "
          "served through the survivors: %s; node %d back, every ISR whole" %
          (victim, T, b_leader(0), t_fail, t_range, served_text(served), victim), flush=True)

    # ---- 8. the replica deleted -------------------------------------------------------------------
    c = cl.conn(cl.cli_node(), timeout=60)
    err = kwire.delete_topic(c, T)
    c.close()
    check(err == 0, "DeleteTopics %s on B: error %d" % (T, err))
    t0 = time.time()

    def gone():
        if T in b_topics():
            return False
        for i in cl.ids():
            if T in cl.metadata(i)["topics"]:
                return False
            for p in range(PARTS):
                if os.path.exists(os.path.join(cl.node_dir(i), "logs", "%s-%d" % (T, p))):
                    return False
        return True

    cl.wait(gone, 30, "%s to be gone from every node of B" % T, interval=0.2)
    t_gone = time.time() - t0
    time.sleep(4 * TASK_MS / 1000)
    n = unchanged(snap1, "after the read replica was deleted on B")
    for p in range(PARTS):
        pre = "%s%d/" % (prefix_of(T, tid), p)
        problems, _orphans = manifest_problems(manifest(p), bucket.ls(pre), pre)
        check(not problems, "%s-%d's manifest after the delete on B: %s" % (T, p, "; ".join(problems[:5])))
    c = kwire.Conn(a.port, timeout=30)
    firsts = {}
    for p in range(PARTS):
        e1, earliest, _ = c.list_offsets(T, p, -2)
        e2, latest, _ = c.list_offsets(T, p, -1)
        check(e1 == 0 and e2 == 0 and earliest == ref[p]["start"] and latest == len(produced[p]),
              "A after the delete on B, %s-%d: errors %d %d, earliest %d, latest %d; want [%d, %d)" %
              (T, p, e1, e2, earliest, latest, ref[p]["start"], len(produced[p])))
        firsts[p] = earliest
    c.close()
    total = 0
    for p in range(PARTS):
        recs = kcat_records(a.bootstrap, T, p)
        got = [(o, k, v) for o, _ts, k, v in recs]
        want = [(o,) + produced[p][o] for o in range(firsts[p], len(produced[p]))]
        check(got == want, "A after the delete on B: %s-%d serves %d records, want %d as written" %
              (T, p, len(got), len(want)))
        total += len(got)
    print("8. DeleteTopics %s on B: gone from every node in %.1f s; %.1f s later the bucket is as before (%d files "
          "and directories), every object A's manifests name there; A serves its %d records as written" %
          (T, t_gone, 4 * TASK_MS / 1000, n, total), flush=True)

    # ---- 9. bad input ------------------------------------------------------------------------------
    print("9. bad input:", flush=True)
    rc, out, err = strata_b("restore", T, "--read-replica", *SOURCE, "--as", "rr-copy")
    said = [ln for ln in err.splitlines() if ln.startswith("strata topics:")]
    check(rc == 2 and said and re.search(r"read[- ]replica", said[0]) and not out,
          "restore %s --read-replica --as rr-copy: exit %d, stdout %r, stderr %r; want exit 2 and a 'strata topics:' "
          "line naming --read-replica" % (T, rc, out, err[-1500:]))
    print("   --read-replica --as: exit 2: %s" % said[0], flush=True)
    rc, out, err = strata_b("restore", "rr-none", "--read-replica", *SOURCE)
    last = (err.rstrip("\n").splitlines() or [""])[-1]
    check(rc == 1 and last.startswith("strata topics:") and "rr-none" in last and not out,
          "restore rr-none --read-replica (not in the bucket): exit %d, stdout %r, stderr %r" % (rc, out, err[-1500:]))
    print("   --read-replica of a topic the bucket does not hold: exit 1: %s" % last, flush=True)
    if MODE == "rgw":
        bad = [(["--source", "file:///tmp"], 1, "must start with s3://"),
               (["--source", SOURCE[1] + "none/"], 1, "not in the bucket"),
               (["--source", "s3://a/" + R], 1, "3 to 63 characters")]
    else:
        bad = [(["--source", "s3://bucket/a/"], 1, "must start with file://"),
               (["--source", "file://" + os.path.join(top, "none")], 1, "none"),
               (["--source", "file://relative"], 1, "absolute")]
    if SOURCE:
        for verb, code, said in bad + [([], 2, "--source is where a --read-replica reads")]:
            args = ["restore", T] + (["--read-replica"] if verb else SOURCE) + verb
            rc, out, err = strata_b(*args)
            lines = [ln for ln in err.splitlines() if ln.startswith("strata topics:")]
            check(rc == code and lines and said in lines[-1] and not out,
                  "%s: exit %d, stdout %r, stderr %r; want exit %d and a line saying %r" %
                  (" ".join(args), rc, out, err[-1500:], code, said))
            print("   %s: exit %d: %s" % (" ".join(args[2:]), rc, lines[-1]), flush=True)
    c = cl.conn(cl.cli_node(), timeout=30)
    err = c.create_topic("rr-plain", 1, configs={REPLICA: "true", "remote.storage.enable": "false"})
    c.close()
    check(err == INVALID_CONFIG, "CreateTopics with %s=true and remote.storage.enable=false on B: error %d, want "
          "INVALID_CONFIG (40)" % (REPLICA, err))
    print("   CreateTopics with %s=true, remote.storage.enable=false: error %d" % (REPLICA, err), flush=True)
    rows = b_topics()
    made = [t for t in (T, "rr-copy", "rr-none", "rr-plain") if t in rows]
    check(not made, "bad input created %s on B" % made)
    unchanged(snap1, "after the bad input")

    # ---- 10. restore --all --read-replica -----------------------------------------------------------
    t0 = time.time()
    rc, out, err = strata_b("restore", "--all", "--read-replica", *SOURCE, "--replication-factor", str(RF_B))
    t_all = time.time() - t0
    check(rc == 0, "restore --all --read-replica: exit %d\nstdout: %s\nstderr: %s" % (rc, out, err[-3000:]))
    lines = out.splitlines()
    check(len(lines) == 1 and re.search(r"\btopic %s\b(?!-)" % re.escape(T), lines[0]) and tid in lines[0],
          "restore --all --read-replica: stdout %r, want one line naming %s (the bucket holds no other topic)" %
          (out, T))
    check(b_topics().get(T) == (tid, PARTS, RF_B), "after restore --all: %s is %s" % (T, b_topics().get(T)))
    check(describe_topic(strata_b, T)[1] == want_configs, "after restore --all: configs %s" %
          describe_topic(strata_b, T)[1])
    cl.wait_isr(T, PARTS, RF_B, timeout=60)
    settle_leaders("after restore --all")
    wait_b_ranges(ref, FOLLOW_S, "after restore --all")
    served = b_serves("after restore --all", ref)
    ld1 = b_leader(1)
    c = cl.conn(ld1, timeout=30)
    _idx, err, _base = c.produce(T, 1, kwire.record_batch([b"refused-4"]))
    c.close()
    check(err == INVALID_TOPIC, "Produce to %s-1 after restore --all: error %d, want 17" % (T, err))
    n = unchanged(snap1, "after restore --all --read-replica")
    print("10. restore --all --read-replica: exit 0 in %.2f s: %s\n    served: %s; Produce refused (%d); the bucket "
          "as before (%d files and directories)" % (t_all, lines[0], served_text(served), err, n), flush=True)

    # the tiering lines of a broker that writes to the bucket: A's log has
    # them (so the pattern is alive), no node of B's may
    wrote = re.compile(r"tiering: %s-\d+: (segment \d+-\d+ \(\d+ bytes\) is in the bucket|upload of segment|"
                       r"\d+ remote segment\(s\) past retention deleted|deleted \d+ orphaned|removing |"
                       r"the manifest changed while this broker wrote it)" % re.escape(T))
    a_lines = [ln for ln in a.log_text().splitlines() if wrote.search(ln)]
    check(len(a_lines) >= sum(len(m["segments"]) for m in mans.values()),
          "A's log has %d lines of uploads to the bucket, fewer than the %d segments it uploaded" %
          (len(a_lines), sum(len(m["segments"]) for m in mans.values())))
    for i in cl.ids():
        b_lines = [ln for ln in cl.log_text(i).splitlines() if wrote.search(ln)]
        check(not b_lines, "node %d of B says it wrote to the bucket: %s" % (i, b_lines[:3]))
    print("    logs: A's has %d lines of bucket writes about %s, B's nodes none" % (len(a_lines), T), flush=True)
    cl.stop()
    check(a.stop() == 0, "A's clean stop")
    print("ok: read_replica in %.1f s: restore %.2f s; B followed A's uploads in %.2f s and its log start in %.2f s "
          "(from the writes); final ranges %s" % (time.time() - t_start, t_restore, t_follow, t_trim,
                               ", ".join("p%d [%d, %d)" % (p, ref[p]["start"], ref[p]["end"]) for p in range(PARTS))),
          flush=True)
except SystemExit as e:
    if e.code:
        print("---- cluster A:", flush=True)
        a.explain_failure(e)
        print("---- cluster B:", flush=True)
        cl.explain_failure(e)
    raise
finally:
    try:
        a.cleanup()
    finally:
        cl.cleanup()
        if not os.path.exists(a.root) and not os.path.exists(cl.root):
            shutil.rmtree(top, ignore_errors=True)

"""
integration.tiering.cluster.rgw - tiered storage on three combined nodes,
against a real S3 server (Ceph RGW), under leader kills and the loss of a
follower's disk.

usage: test_tiering_cluster.py ENVFILE   (an RGW started by tests/s3/rgw.sh)

Every node tiers to the RGW of ENVFILE: segment.bytes 1 MiB,
local.retention.bytes 1 MiB (what the bucket holds is deleted locally),
retention checked every second (as the single-broker tests' brokers do; by
default a node's first check comes 30 s after its start, so the local
directories shrank only that long after the last kill), task interval 500
ms, orphans swept once 3 s old, broker session 3 s.  The topic (a fresh
name each run, so a fresh prefix in the bucket) has 2 partitions,
replication factor 3, min.insync.replicas 2 and remote.storage.enable=true.
rdk_acked_producer writes it with acks=all (idempotent, retrying) and
records every acknowledgement.  With -F: Debian 12's librdkafka (2.0)
sometimes raises a fatal error of its own after a leader kill (its issue
4438, fixed in 2.3); the producer then starts again under a new producer id
and what the old one held unacknowledged is left out, never written twice.

1. Leader kills while segments go up.  STRATA_TIER_CLUSTER_KILLS rounds
   (default 10): the test watches the leader of partition 0 until it holds
   a closed segment the bucket does not (its log names the remote end: "is
   in the bucket"), so an upload is due or under way, and kills it with
   SIGKILL.  With the node down, the bucket is read: every segment the
   manifest names has all its objects, of the manifest's size, and the
   segments follow each other; objects no manifest names are an upload cut
   in the middle (counted).  A survivor must lead partition 0; the killed
   node is started again (its log may end below the new leader's local
   log start by then: it starts again there, as in step 3) and every
   partition's ISR must be whole before the next kill.  The number of
   kills and of those cut mid-upload is printed.
2. The producer stops; the bucket catches up: the manifest ends where the
   leader's active segment starts and the local directories shrink to the
   local retention.  Past the orphan age, and a sweep later, each
   partition's manifest names every closed segment exactly once (from
   offset 0, no gap, no duplicate base or id, every object present and of
   its size) and no object it does not name is older than the orphan age
   (every object a cut upload left was swept by the next leader).
3. Disk loss of a follower, under a second acks=all producer: a follower
   of partition 0 is killed, its whole log directory (metadata included) is
   deleted, and it is started again alone.  Offset 0 is only in the bucket
   now; its log must say where it starts instead: at the leader's local
   log start, told OFFSET_MOVED_TO_TIERED_STORAGE by the leader when it
   fetches offset 0 (KIP-405), or, when it opens the partition and finds
   the bucket ahead of its empty log, at the bucket's end (which the
   leader holds locally too: at or past its local log start, not past its
   log end).  It catches up from there and rejoins the ISR; its
   leader-epoch cache is rebuilt (the epochs in force from its local log
   start are the leader's) and its batches equal the leader's byte for
   byte from there on.  Its producer state below its start comes from the
   bucket's producer snapshot (its log says how many producers): stopped
   cleanly once the producer is done, it knows the same producers, with
   the same epochs, last sequences and offsets, as the follower that kept
   its disk.
4. kcat replays the whole topic from offset 0 (mostly from the bucket):
   each partition holds offsets 0..n-1, every value intact, and every
   acknowledged record of both producers is read back exactly once, at its
   acknowledged offset: lost, duplicated and misplaced counts are printed
   and must be 0.
5. No sanitizer report in any node's log (sanitizer builds).
"""
import calendar
import collections
import os
import random
import re
import shutil
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import (Bucket, Cluster, acked_value, check, fail, kcat,  # noqa: E402
                            manifest_problems, read_ack_file, rgw_env, run, s3_overrides,
                            tiered_overrides)

if len(sys.argv) != 2:
    sys.exit("usage: test_tiering_cluster.py ENVFILE")
KILLS = int(os.environ.get("STRATA_TIER_CLUSTER_KILLS", "10"))
TOPIC, PARTS, SIZE, RATE = "tier-cluster-%05d" % random.randrange(100000), 2, 800, 1200
SEG = LOCAL = 1 << 20
ORPHAN_AGE_MS = 3000
SESSION_MS = 3000

env = rgw_env(sys.argv[1])
store = s3_overrides(env)
bucket = Bucket(store)
cl = Cluster(3, overrides=tiered_overrides(store, log_segment_bytes=SEG, log_local_retention_bytes=LOCAL,
                                           remote_log_manager_task_interval_ms=500,
                                           log_retention_check_interval_ms=1000,
                                           remote_log_orphan_min_age_ms=ORPHAN_AGE_MS,
                                           broker_session_timeout_ms=SESSION_MS,
                                           broker_heartbeat_interval_ms=500))
UPLOADED = re.compile(r"tiering: %s-(\d+): segment (\d+)-(\d+) \(\d+ bytes\) is in the bucket" % re.escape(TOPIC))
prefixes = {}


class Bootstrap:
    """What kcat() wants of a broker."""

    def __init__(self, nodes=None):
        self.bootstrap = cl.bootstrap(nodes)


def prefix(p):
    if p not in prefixes:
        pre = bucket.partition_prefix(TOPIC, p)
        if pre:
            prefixes[p] = pre
    return prefixes.get(p)


def local_bases(node, p):
    """The base offsets of node's local segments of partition p, in order."""
    d = os.path.join(cl.node_dir(node), "logs", "%s-%d" % (TOPIC, p))
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(int(n[:20]) for n in names if n.endswith(".log") and len(n) == 24)


def logged_remote_end(p):
    """The end of the remote log of partition p as the nodes' logs name it
    (the last "is in the bucket" line of any of them)."""
    end = 0
    for i in cl.ids():
        for part, _base, last in UPLOADED.findall(cl.log_text(i)):
            if int(part) == p:
                end = max(end, int(last) + 1)
    return end


def upload_due(node):
    """node holds a closed segment of partition 0 the bucket does not."""
    bases = local_bases(node, 0)
    return len(bases) >= 2 and bases[-2] >= logged_remote_end(0)


def since_start(node):
    """node's log since its latest start (cluster.sh marks each start): a
    node restarted after a kill may have been sent to the leader's local
    log start before, and only what it said after its disk was lost
    counts in step 3."""
    return cl.log_text(node).rsplit("==== start ", 1)[-1]


def ls_times(pre):
    """{key: (size, mtime seconds or None)} under pre."""
    _, out, _ = run(bucket._cmd("ls", pre), timeout=120)
    objs = {}
    for line in out.decode().splitlines():
        size, when, key = line.split(None, 2)
        t = None
        if when != "-":
            t = calendar.timegm(time.strptime(when, "%Y-%m-%dT%H:%M:%SZ"))
        objs[key] = (int(size), t)
    return objs


def bucket_view(p, what):
    """(manifest, objects, orphans) of partition p; the manifest must name
    nothing missing and leave no gap."""
    pre = prefix(p)
    if pre is None:
        return None, {}, []
    objs = bucket.ls(pre)
    man = bucket.manifest(pre)
    if man is None:
        return None, objs, sorted(objs)
    problems, orphans = manifest_problems(man, objs, pre)
    check(not problems, "%s, partition %d: %s" % (what, p, "; ".join(problems[:5])))
    return man, objs, orphans


def manifest_end(man):
    return man["segments"][-1]["last_offset"] + 1 if man and man["segments"] else 0


def leader(p, nodes=None):
    st = cl.partition_state(TOPIC, p, nodes)
    return st["leader"] if st else -1


def epochs_file(node, p):
    """[(epoch, start offset)] of node's leader-epoch-checkpoint."""
    path = os.path.join(cl.node_dir(node), "logs", "%s-%d" % (TOPIC, p), "leader-epoch-checkpoint")
    with open(path) as f:
        lines = f.read().split("\n")
    n = int(lines[1])
    return [tuple(int(x) for x in ln.split()) for ln in lines[2:2 + n]]


def in_force_from(entries, start):
    """The epochs in force from offset start on: [(epoch, first offset >= start)]."""
    out = []
    for k, (ep, off) in enumerate(entries):
        nxt = entries[k + 1][1] if k + 1 < len(entries) else None
        if nxt is not None and nxt <= start:
            continue
        out.append((ep, max(off, start)))
    return out


def newest_snapshot(node, p):
    """(offset, bytes) of node's newest producer snapshot of partition p."""
    d = os.path.join(cl.node_dir(node), "logs", "%s-%d" % (TOPIC, p))
    offs = sorted(int(n[:20]) for n in os.listdir(d) if n.endswith(".snapshot") and len(n) == 29)
    check(offs, "node %d keeps no producer snapshot of partition %d" % (node, p))
    with open(os.path.join(d, "%020d.snapshot" % offs[-1]), "rb") as f:
        return offs[-1], f.read()


def snapshot_producers(data):
    """{producer id: (epoch, last sequence, last offset)} of a snapshot's bytes."""
    count = struct.unpack_from(">i", data, 6)[0]
    out = {}
    for k in range(count):
        pid, ep, seq, off = struct.unpack_from(">qhiq", data, 10 + 46 * k)
        out[pid] = (ep, seq, off)
    return out


def stop_producer(prod, what):
    prod.send_signal(signal.SIGTERM)
    out = prod.communicate(timeout=90)[0].decode(errors="replace").strip()
    last = out.splitlines()[-1] if out else "(no output)"
    print("%s: %s" % (what, last), flush=True)
    check(prod.returncode == 0 and "produced" in last, "%s ran to the end: %s" % (what, out[-2000:]))
    check(" failed 0 " in last + " ", "%s: deliveries failed: %s" % (what, out[-2000:]))


t_start = time.time()
prod = prod2 = None
try:
    cl.up(timeout=90)
    c = cl.conn(1, timeout=30)
    check(c.create_topic(TOPIC, PARTS, rf=3, configs={"min.insync.replicas": "2",
                                                     "remote.storage.enable": "true"}) == 0,
          "create %s" % TOPIC)
    c.close()
    cl.wait_isr(TOPIC, PARTS, 3)
    ackfile = os.path.join(cl.root, "acks")
    prod = cl.acked_producer(TOPIC, PARTS, SIZE, ackfile, "-r", str(RATE), "-F", "-X", "enable.idempotence=true",
                             "-X", "batch.size=65536")
    cl.wait(lambda: all(prefix(p) for p in range(PARTS)), 60, "the first uploads of every partition",
            interval=0.3)
    print("topic %s: %d partitions, replication factor 3, tiered to %s under %s" %
          (TOPIC, PARTS, env["STRATA_RGW_ENDPOINT"], ", ".join(prefixes[p] for p in range(PARTS))), flush=True)

    # ---- 1. leader kills while segments go up
    stats = dict(kills=0, due=0, cut=0, cut_objects=0)
    seen_orphans, cut_keys = set(), set()
    times = []
    for k in range(KILLS):
        if prod.poll() is not None:
            fail("the producer exited: %s" % prod.communicate()[0].decode(errors="replace")[-2000:])
        old = leader(0)
        check(old > 0, "partition 0 has a leader")
        led = [p for p in range(PARTS) if p == 0 or leader(p) == old]
        t0 = time.time()
        due = False
        while time.time() - t0 < 8:
            if upload_due(old):
                due = True
                break
            time.sleep(0.02)
        time.sleep(random.uniform(0, 0.15))  # into the upload, at a random point
        cl.kill(old)
        t_kill = time.time()
        time.sleep(0.2)  # what RGW had already received completes
        cut = 0
        for p in range(PARTS):
            _man, _objs, orphans = bucket_view(p, "kill %d" % (k + 1))
            fresh = set(orphans) - seen_orphans
            seen_orphans |= set(orphans)
            if p in led:  # the killed node's upload, cut (a live leader's may be under way)
                cut += len(fresh)
                cut_keys |= fresh
        stats["kills"] += 1
        stats["due"] += due
        stats["cut"] += bool(cut)
        stats["cut_objects"] += cut
        survivors = [i for i in cl.ids() if i != old]
        cl.wait(lambda: leader(0, survivors) in survivors, 30,
                "a survivor to lead %s-0 after node %d was killed" % (TOPIC, old))
        times.append(time.time() - t_kill)
        new = leader(0, survivors)
        cl.restart(old, timeout=90)
        cl.wait_isr(TOPIC, PARTS, 3, timeout=90)
        print("kill %2d: node %d led %s-0 (%s); %d object(s) of a cut upload; node %d leads after %.2f s; "
              "ISR whole again after %.1f s" %
              (k + 1, old, TOPIC, "a closed segment not in the bucket yet" if due else "no upload due seen",
               cut, new, times[-1], time.time() - t_kill), flush=True)
    check(stats["due"] >= KILLS // 2, "only %d of %d kills came with an upload due" % (stats["due"], KILLS))
    print("%(kills)d leader kills, %(due)d with a closed segment not yet in the bucket, %(cut)d cut an upload "
          "in the middle (%(cut_objects)d objects left without a manifest entry)" % stats, flush=True)

    # ---- 2. the bucket catches up; the manifests against the listings
    time.sleep(1)
    stop_producer(prod, "producer")
    prod = None
    acks1 = read_ack_file(ackfile)

    def settled():
        for p in range(PARTS):
            ld = leader(p)
            if ld < 0:
                return False
            man, _objs, _orphans = bucket_view(p, "settling")
            bases = local_bases(ld, p)
            if not man or not bases or manifest_end(man) != bases[-1] or len(bases) > LOCAL // SEG + 2:
                return False
        return True
    cl.wait(settled, 120, "the bucket to hold every closed segment and the local dirs to shrink", interval=0.5)
    # past the orphan age, and a sweep (one is due a task interval later)
    time.sleep(ORPHAN_AGE_MS / 1000 + 2)
    cl.wait(lambda: all(not bucket_view(p, "sweeping")[2] for p in range(PARTS)), 30,
            "the orphans to be swept", interval=0.5)
    totals = dict(segments=0, bytes=0)
    for p in range(PARTS):
        ld = leader(p)
        pre = prefix(p)
        man = bucket.manifest(pre)
        timed = ls_times(pre)
        objs = {kk: v[0] for kk, v in timed.items()}
        problems, orphans = manifest_problems(man, objs, pre)
        check(not problems, "partition %d at the end: %s" % (p, "; ".join(problems[:5])))
        segs = man["segments"]
        check(segs and man["log_start_offset"] == 0 and segs[0]["base_offset"] == 0,
              "partition %d: the remote log starts at %s (first segment %s), want 0" %
              (p, man["log_start_offset"], segs[0]["base_offset"] if segs else None))
        bases = [s["base_offset"] for s in segs]
        ids = [s["id"] for s in segs]
        check(len(set(bases)) == len(bases) and len(set(ids)) == len(ids),
              "partition %d: a segment named twice: bases %s" %
              (p, [b for b, n in collections.Counter(bases).items() if n > 1]))
        check(all(s["last_offset"] >= s["base_offset"] for s in segs), "partition %d: an empty segment range" % p)
        local = local_bases(ld, p)
        check(manifest_end(man) == local[-1], "partition %d: the manifest ends at %d, the leader's active segment "
              "starts at %d" % (p, manifest_end(man), local[-1]))
        now = time.time()
        old_orphans = [kk for kk in orphans if timed[kk][1] is None or now - timed[kk][1] > ORPHAN_AGE_MS / 1000 + 1]
        check(not old_orphans, "partition %d: objects no manifest names, older than the orphan age: %s" %
              (p, old_orphans[:5]))
        totals["segments"] += len(segs)
        totals["bytes"] += sum(s["size"] for s in segs)
        print("partition %d: %d segments in the manifest, offsets 0..%d, each once, no gap; %d objects, %d "
              "orphans; the leader (node %d) keeps %d local segments from %d" %
              (p, len(segs), manifest_end(man) - 1, len(objs), len(orphans), ld, len(local), local[0]), flush=True)
    swept = sum(int(n) for i in cl.ids() for n in re.findall(
        r"tiering: %s-\d+: deleted (\d+) orphaned object" % re.escape(TOPIC), cl.log_text(i)))
    left = cut_keys & set(k for p in range(PARTS) for k in bucket.ls(prefix(p)))
    check(not left, "objects of cut uploads still in the bucket: %s" % sorted(left)[:5])
    print("bucket: %d segments (%.1f MB) named once each, no orphan left; the %d object(s) of cut uploads are "
          "gone (the nodes' logs count %d orphans deleted)" %
          (totals["segments"], totals["bytes"] / 1e6, len(cut_keys), swept), flush=True)

    # ---- 3. a follower loses its disk
    prod2 = cl.acked_producer(TOPIC, PARTS, SIZE, ackfile, "-r", str(RATE // 2), "-k", "n", "-F",
                              "-X", "enable.idempotence=true", "-X", "batch.size=65536")
    time.sleep(1)
    st = cl.partition_state(TOPIC, 0)
    ld = st["leader"]
    fol = [r for r in st["replicas"] if r != ld][0]
    c = cl.conn(ld)
    local_start = kwire.list_offsets_v9(c, TOPIC, 0, kwire.EARLIEST_LOCAL)[1]
    c.close()
    check(local_start > 0, "the leader's local log of partition 0 starts at %d: nothing was moved to the bucket"
          % local_start)
    cl.kill(fol)
    shutil.rmtree(os.path.join(cl.node_dir(fol), "logs"))
    others = [i for i in cl.ids() if i != fol]
    cl.wait_isr(TOPIC, PARTS, 2, timeout=SESSION_MS / 1000 + 30, nodes=others)
    t_loss = time.time()
    cl.start(fol)
    # Either the fetcher is told OFFSET_MOVED_TO_TIERED_STORAGE for offset 0
    # and starts again at the leader's local log start, or the partition,
    # opened with the bucket ahead of its empty log, starts at the bucket's
    # end (which the leader holds locally too) before the first fetch.
    moved = re.compile(r"replica: %s-0: offset (\d+) is below leader (\d+)'s local log start (\d+) "
                       r"\(([A-Z_]+)\)" % re.escape(TOPIC))
    behind = re.compile(r"log: %s-0: local log \[0, 0\) is behind the bucket \(or a snapshot\); "
                        r"starting it empty at (\d+)" % re.escape(TOPIC))
    cl.wait(lambda: moved.search(since_start(fol)) or behind.search(since_start(fol)), 60,
            "node %d to start partition 0 again at the leader's local log start or the bucket's end" % fol,
            interval=0.2)
    text = since_start(fol)
    m = moved.search(text)
    if m:
        off, _src, start, err = m.groups()
        check(err == "OFFSET_MOVED_TO_TIERED_STORAGE" and int(off) == 0 and int(start) >= local_start,
              "node %d: fetched from %s and got %s, starting again at %s (the leader's local log started at %d)"
              % (fol, off, err, start, local_start))
        how = "fetched offset 0, told OFFSET_MOVED_TO_TIERED_STORAGE, restarted at the leader's local log start"
    else:
        m = behind.search(text)
        start = m.group(1)
        c = cl.conn(ld)
        leo = c.list_offsets(TOPIC, 0, -1)[1]
        c.close()
        check(local_start <= int(start) <= leo, "node %d started partition 0 at %s, outside the leader's local "
              "log [%d, %d)" % (fol, start, local_start, leo))
        how = "opened with the bucket ahead: started at the bucket's end, which the leader holds locally"
    print("node %d, its disk lost: %s; %s %s (the leader's local log started at %d)" %
          (fol, m.group(0), how, start, local_start), flush=True)
    said = re.compile(r"replica: %s-0: producer state below offset %s (restored from the bucket: (\d+) "
                      r"producers|not restored)" % (re.escape(TOPIC), start))
    cl.wait(lambda: said.search(since_start(fol)), 30, "node %d to say whether it restored the producer state"
            % fol, interval=0.2)
    restored = re.search(r"replica: %s-0: producer state below offset %s restored from the bucket: (\d+) "
                         r"producers" % (re.escape(TOPIC), start), since_start(fol))
    check(restored and int(restored.group(1)) >= 1, "node %d did not restore the producer state below %s from "
          "the bucket: %s" % (fol, start, re.findall(r"replica: %s-0: producer state.*" % re.escape(TOPIC),
                                                      since_start(fol))))
    cl.wait_isr(TOPIC, PARTS, 3, timeout=90)
    rejoin = time.time() - t_loss
    # the epoch cache reaches leader-epoch-checkpoint when the flusher syncs
    # the log, at the latest once a segment rolls: write on until one has
    epath = os.path.join(cl.node_dir(fol), "logs", "%s-0" % TOPIC, "leader-epoch-checkpoint")
    cl.wait(lambda: len(local_bases(fol, 0)) >= 2 and os.path.exists(epath), 90,
            "node %d to roll a segment of partition 0 and write its leader-epoch-checkpoint" % fol, interval=0.3)
    stop_producer(prod2, "second producer")
    prod2 = None
    fol_bases = local_bases(fol, 0)
    check(fol_bases and fol_bases[0] >= int(start), "node %d's log of partition 0 starts at %s, below %s" %
          (fol, fol_bases[:1], start))
    for p in range(PARTS):
        n, frm = cl.wait_same_replicas(TOPIC, p, cl.ids(), timeout=60)
        print("%s-%d: the 3 replicas hold the same %d bytes of batches from offset %d" % (TOPIC, p, n, frm),
              flush=True)
    ld = leader(0)
    fb = local_bases(fol, 0)[0]
    mine, theirs = epochs_file(fol, 0), in_force_from(epochs_file(ld, 0), fb)
    check(mine and mine == theirs, "node %d's leader-epoch cache of partition 0 (local log from %d): %s; the "
          "leader's epochs in force from there: %s" % (fol, fb, mine, theirs))
    print("node %d: back with an empty disk, restarted at offset %s, in the ISR after "
          "%.1f s; its epoch cache rebuilt: %s" % (fol, start, rejoin, mine), flush=True)
    # Its producer state: the bucket's snapshot below its start plus what it
    # fetched, so the same as the other follower's, which kept its disk (both
    # stopped cleanly, so each writes a snapshot at its log end). A producer
    # whose last batch lies below the start is known only through the bucket.
    other = [i for i in cl.ids() if i not in (ld, fol)][0]
    snaps = {}
    for n in (fol, other):
        cl.kill(n, signal.SIGTERM)
        snaps[n] = newest_snapshot(n, 0)
    pf, po = snapshot_producers(snaps[fol][1]), snapshot_producers(snaps[other][1])
    below = sorted(pid for pid, (_e, _s, off) in po.items() if 0 <= off < int(start))
    check(snaps[fol][0] == snaps[other][0] and pf == po,
          "producer state of partition 0 at offset %d on node %d (restored from the bucket): %s; on node %d "
          "(at %d): %s" % (snaps[fol][0], fol, pf, other, snaps[other][0], po))
    print("node %d: producer state restored from the bucket (%s producers below offset %s); at its log end %d "
          "it knows the same %d producers as node %d, %d of them with their last batch below %s" %
          (fol, restored.group(1), start, snaps[fol][0], len(pf), other, len(below), start), flush=True)
    for n in (fol, other):
        cl.start(n)
    cl.wait_isr(TOPIC, PARTS, 3, timeout=90)

    # ---- 4. the whole topic from offset 0
    acks = read_ack_file(ackfile)
    check(len(acks) > len(acks1) > 0, "acknowledgements from both producers (%d, %d)" % (len(acks1), len(acks)))
    _, out, _ = kcat(Bootstrap(), "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%p %o %k %s\\n",
                     timeout=300)
    read = collections.defaultdict(list)
    damaged = gaps = 0
    for line in out.split(b"\n")[:-1]:
        p, o, key, v = line.split(b" ", 3)
        p, o, key = int(p), int(o), key.decode()
        if v != acked_value(key, SIZE):
            damaged += 1
        read[p].append((o, key))
    where = {}
    dup_any = 0
    for p in range(PARTS):
        offs = [o for o, _k in read[p]]
        gaps += sum(1 for i, o in enumerate(offs) if o != i)
        counts = collections.Counter(kk for _o, kk in read[p])
        dup_any += sum(n - 1 for n in counts.values() if n > 1)
        for o, kk in read[p]:
            where.setdefault((p, kk), []).append(o)
    lost = duplicated = misplaced = 0
    for (p, o), kk in acks.items():
        got = where.get((p, kk), [])
        if not got:
            lost += 1
        elif len(got) > 1:
            duplicated += 1
        elif got[0] != o:
            misplaced += 1
    for p, kk in acks.unplaced:  # acknowledged by a later batch's success
        got = where.get((p, kk), [])
        lost += not got
        duplicated += len(got) > 1
    reordered = 0
    for p in range(PARTS):
        mine = sorted((o, kk) for (pp, o), kk in acks.items() if pp == p)
        pos = [where.get((p, kk), [-1])[0] for _o, kk in mine]
        reordered += sum(1 for a, b in zip(pos, pos[1:]) if b <= a)
    total = sum(len(v) for v in read.values())
    print("replay from offset 0: %d records (%s); %d acknowledged (%d of them without an offset): lost %d, "
          "duplicated %d, misplaced %d, reordered %d; offsets out of sequence %d, damaged values %d, "
          "records read twice %d" %
          (total, ", ".join("partition %d: %d" % (p, len(read[p])) for p in range(PARTS)),
           len(acks) + len(acks.unplaced), len(acks.unplaced), lost,
           duplicated, misplaced, reordered, gaps, damaged, dup_any), flush=True)
    check(lost == duplicated == misplaced == reordered == gaps == damaged == dup_any == 0,
          "the replay does not hold every acknowledged record exactly once in offset order")

    reports = cl.sanitizer_reports()
    check(not reports, "sanitizer reports: %s" % reports)
    elapsed = time.time() - t_start
    print("integration.tiering.cluster.rgw: ok: %d kills (%d with an upload due, %d cut mid-upload), %d segments "
          "in the manifests, no orphan, %d records replayed, 0 lost, 0 duplicated; failover median %.2f s; "
          "%.0f s" % (stats["kills"], stats["due"], stats["cut"], totals["segments"], total,
                      sorted(times)[len(times) // 2], elapsed), flush=True)
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    for pr in (prod, prod2):
        if pr and pr.poll() is None:
            pr.kill()
            pr.wait()
    cl.cleanup()

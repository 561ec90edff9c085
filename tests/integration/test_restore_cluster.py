"""
integration.restore.cluster - `strata topics restore --all` on three
combined nodes that lost every local disk, __cluster_metadata included:
the topics come back from the bucket alone with their ids, partition
counts, replication factor 3 and configs, every offset the bucket holds is
served (by any leader), and new writes continue after them.

Three combined nodes (scripts/cluster.sh) tier to one `file` bucket in the
test's temporary root: task interval 500 ms, retention checked every
second, broker session 3 s.  Topics hist-x (2 partitions, replication
factor 3, min.insync.replicas 2, max.message.bytes 765432) and hist-y (1
partition, replication factor 3), both remote.storage.enable=true,
segment.bytes and local.retention.bytes 16 KiB, retention.ms -1.
`strata topics` runs with the cluster's own settings (--config and the
--override arguments every node got) and --bootstrap at one node that is
not the active controller.

1. kcat (acks=all) writes 300 records with distinct keys and values of
   random length to every partition.  Once each leader's closed segments
   are all in the bucket and its local log no longer starts at 0 (the old
   offsets are in the bucket only), each partition's manifest [log start,
   end) is recorded with the records kcat reads there (offset, timestamp,
   key, value) and the batches the leader's Fetch returns, the topic ids
   (`strata topics list`), the configs (`strata topics describe`) and
   each topic.json.
2. Disaster: SIGKILL to the three nodes at once; each node's log.dirs
   (__cluster_metadata-0 with them) and chunk cache deleted.  The
   manifests are as recorded.  The nodes start again on empty dirs (same
   node ids, ports, cluster.id and bucket): no node knows a topic, and a
   few task intervals later the bucket is the same object for object.
3. `strata topics restore --all`: exit 0 and one "Restored topic NAME"
   line per topic on stdout; its time is printed.
4. Each topic has its original id, partition count, replication factor 3
   and configs (list, describe, DescribeConfigs, every replica's
   partition.metadata); topic.json says what it said before; every partition's ISR is the 3 replicas, each leader
   epoch is above its manifest's; ListOffsets at the leader: earliest the
   manifest's log start, latest its end; kcat replays exactly [start, end)
   of every partition with the same offsets, timestamps, keys and values,
   and the leader's Fetch returns the same batches byte for byte.
5. SIGKILL to the leader of hist-x-0: a survivor leads, with a local log
   that starts at the bucket's end (so the remote part comes from the
   bucket through it); its ListOffsets says [start, end), kcat replays
   partition 0 from the bucket start again, identical, and its Fetch
   returns the same batches byte for byte.  The killed node is started
   again and every ISR is whole.
6. New writes: kcat (acks=all) adds 200 records to hist-x-0 and 40 to each
   other partition.  The first new offset of each is the manifest's old
   end; hist-x-0's new segments go up to the bucket (the manifest's end
   moves past the old end, written at the leader's epoch, above the old
   manifest's; every object it names is there, no gap), and kcat replays
   every partition from the bucket start through the new end, old records
   identical and new ones in order.  No node's log says FENCED about the
   topics.
7. Clean stop (SIGTERM): every node exits 0.  Prints the records replayed
   per partition, the manifests' ranges and the restore's time.
"""
import base64
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from restore_checks import (bucket_descriptor, bucket_manifest, describe_topic, fetch_batches, kcat_records,  # noqa: E402
                            prefix_of, same_batches, same_records, topic_rows)
from strata_harness import (Bucket, Cluster, check, file_overrides,  # noqa: E402
                            manifest_problems, run, tiered_overrides)

SEG = 16 << 10
N = 300  # records a partition before the disaster
MORE = {("hist-x", 0): 200, ("hist-x", 1): 40, ("hist-y", 0): 40}  # after the restore
TASK_MS = 500
SESSION_MS = 3000
X, Y = "hist-x", "hist-y"
BASE = {"remote.storage.enable": "true", "segment.bytes": str(SEG), "local.retention.bytes": str(SEG),
        "retention.ms": "-1"}
WANT = {X: (2, dict(BASE, **{"min.insync.replicas": "2", "max.message.bytes": "765432"})),
        Y: (1, dict(BASE))}
TOPICS = [X, Y]
PARTS = [(t, p) for t in TOPICS for p in range(WANT[t][0])]
RF = 3

t_start = time.time()
rnd = random.Random(int(os.environ.get("STRATA_TIER_SEED", "2024")))
root = tempfile.mkdtemp(prefix="strata-restore-cluster-")
store = file_overrides(os.path.join(root, "bucket"))  # one bucket for every node, outside their dirs
cl = Cluster(3, root=root, overrides=tiered_overrides(store, remote_log_manager_task_interval_ms=TASK_MS,
                                                      log_retention_check_interval_ms=1000,
                                                      remote_log_fetch_chunk_bytes=64 << 10,
                                                      broker_session_timeout_ms=SESSION_MS,
                                                      broker_heartbeat_interval_ms=500))
bucket = Bucket(cl.overrides)


# ---- the cluster as clients and the CLI see it -------------------------------

strata = cl.strata_topics  # through a node that is not the active controller


def topic_list():
    return topic_rows(strata)


def describe(topic):
    return describe_topic(strata, topic)


def leader(topic, p, nodes=None):
    st = cl.partition_state(topic, p, nodes)
    return st["leader"] if st else -1


def offsets(topic, p, node):
    """ListOffsets v9 at node: (error, earliest, earliest local, latest)."""
    c = cl.conn(node, timeout=30)
    try:
        e1, earliest, _ = kwire.list_offsets_v9(c, topic, p, kwire.EARLIEST)
        e2, local, _ = kwire.list_offsets_v9(c, topic, p, kwire.EARLIEST_LOCAL)
        e3, latest, _ = kwire.list_offsets_v9(c, topic, p, kwire.LATEST)
    finally:
        c.close()
    return e1 or e2 or e3, earliest, local, latest


def local_bases(node, topic, p):
    """The base offsets of node's local segments of topic-p, in order."""
    d = os.path.join(cl.node_dir(node), "logs", "%s-%d" % (topic, p))
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(int(n[:20]) for n in names if n.endswith(".log") and len(n) == 24)


# ---- records -------------------------------------------------------------------

produced = {}  # (topic, p) -> [(key, value)] in the order written


def produce(topic, p, n, tag):
    """n records to topic-p through kcat with acks=all; returns them."""
    rows = produced.setdefault((topic, p), [])
    first = len(rows)
    new = []
    for i in range(first, first + n):
        key = b"%s-%d-%s%06d" % (topic.encode(), p, tag.encode(), i)
        value = b"%s-%d-v%06d-" % (topic.encode(), p, i) + base64.b64encode(rnd.randbytes(rnd.randint(100, 350)))
        new.append((key, value))
    run(["kcat", "-b", cl.bootstrap(cl.live()), "-P", "-t", topic, "-p", str(p), "-K", ":", "-X", "acks=all",
         "-X", "batch.size=4096", "-X", "message.timeout.ms=30000"],
        input=b"".join(k + b":" + v + b"\n" for k, v in new), timeout=120)
    rows.extend(new)
    return new


def replay(topic, p, nodes=None):
    return kcat_records(cl.bootstrap(nodes or cl.live()), topic, p)


def raw_batches(topic, p, node, start, end):
    """The batches node's Fetch returns for [start, end), bytes as sent."""
    return fetch_batches(cl.conn(node, timeout=30), topic, p, start, end, " at node %d" % node)


# ---- the bucket ------------------------------------------------------------------

def manifest(topic, tid, p):
    return bucket_manifest(bucket, topic, tid, p)


def span(man):
    return man["log_start_offset"], man["segments"][-1]["last_offset"] + 1 if man["segments"] else man[
        "log_start_offset"]


def descriptor(topic, tid):
    return bucket_descriptor(bucket, topic, tid)


def settled(topic, tid, p):
    """The leader's closed segments are all in the bucket and its local log
    no longer holds offset 0."""
    ld = leader(topic, p)
    if ld <= 0:
        return False
    man = manifest(topic, tid, p)
    bases = local_bases(ld, topic, p)
    if not man or not man["segments"] or not bases:
        return False
    return span(man)[1] == bases[-1] and bases[0] > 0


try:
    cl.up(timeout=90)
    print("3 combined nodes on ports %s, tiering to a file bucket; strata topics through node %d" %
          ([cl.port(i) for i in cl.ids()], cl.cli_node()), flush=True)

    # ---- 1. the topics, their records, what the bucket holds ---------------------
    c = cl.conn(cl.cli_node(), timeout=60)
    for t in TOPICS:
        err = c.create_topic(t, WANT[t][0], rf=RF, configs=WANT[t][1])
        check(err == 0, "CreateTopics %s: error %d" % (t, err))
    c.close()
    for t in TOPICS:
        cl.wait_isr(t, WANT[t][0], RF)
    ids = {t: row[0] for t, row in topic_list().items() if t in TOPICS}
    check(sorted(ids) == sorted(TOPICS), "the topic list after the creates: %s" % sorted(ids))
    for t, p in PARTS:
        produce(t, p, N, "k")
    t0 = time.time()
    cl.wait(lambda: all(settled(t, ids[t], p) for t, p in PARTS), 60,
            "every leader's closed segments in the bucket and its local log past offset 0", interval=0.25)
    t_settle = time.time() - t0
    cl.wait(lambda: all(descriptor(t, ids[t]) for t in TOPICS), 10, "topic.json of every topic", interval=0.2)
    desc_before = {t: descriptor(t, ids[t]) for t in TOPICS}
    for t in TOPICS:
        d = desc_before[t]
        check((d.get("topic"), d.get("topic_id"), d.get("partitions"), d.get("replication_factor"), d.get("configs")) ==
              (t, ids[t], WANT[t][0], RF, WANT[t][1]), "topic.json of %s before the disaster: %s" % (t, d))
    orig = {}  # (topic, p) -> dict(man, start, end, recs)
    for t, p in PARTS:
        man = manifest(t, ids[t], p)
        check(man["topic"] == t and man["topic_id"] == ids[t] and man["partition"] == p,
              "the manifest of %s-%d names %s/%s/%s" % (t, p, man["topic"], man["topic_id"], man["partition"]))
        start, end = span(man)
        check(start == 0 and N // 2 <= end < N,
              "%s-%d: the bucket holds [%d, %d) of %d records" % (t, p, start, end, N))
        ld = leader(t, p)
        e, earliest, local, latest = offsets(t, p, ld)
        check(e == 0 and earliest == 0 and 0 < local <= end and latest == N,
              "%s-%d at its leader (node %d): error %d, earliest %d, earliest local %d, latest %d" %
              (t, p, ld, e, earliest, local, latest))
        recs = replay(t, p)
        check([(o, k, v) for o, _ts, k, v in recs] == [(i, k, v) for i, (k, v) in enumerate(produced[(t, p)])],
              "%s-%d: before the disaster kcat does not read back the %d records written (got %d)" %
              (t, p, N, len(recs)))
        orig[(t, p)] = dict(man=man, start=start, end=end, recs=[r for r in recs if r[0] < end], local=local,
                            leader=ld, raw=raw_batches(t, p, ld, start, end))
    configs_before = {t: describe(t)[1] for t in TOPICS}
    for t in TOPICS:
        check(configs_before[t] == WANT[t][1],
              "describe %s shows configs %s, want %s" % (t, configs_before[t], WANT[t][1]))
    print("1. %s (id %s, 2 partitions) and %s (id %s, 1 partition), replication factor 3: %d records each, the "
          "bucket settled %.1f s after the last write:" % (X, ids[X], Y, ids[Y], N, t_settle), flush=True)
    for t, p in PARTS:
        o = orig[(t, p)]
        print("   %s-%d: manifest [%d, %d) in %d segments at leader epoch %s; leader node %d keeps [%d, %d) locally" %
              (t, p, o["start"], o["end"], len(o["man"]["segments"]), o["man"].get("leader_epoch"), o["leader"],
               o["local"], N), flush=True)

    # ---- 2. every local disk lost --------------------------------------------------
    pids = cl.pids()
    for i in cl.ids():
        os.kill(pids[i], signal.SIGKILL)
    cl.wait(lambda: not cl.live(), 30, "the three nodes to be gone after SIGKILL", interval=0.01)
    for i in cl.ids():
        shutil.rmtree(os.path.join(cl.node_dir(i), "logs"))
        shutil.rmtree(os.path.join(cl.node_dir(i), "cache"), ignore_errors=True)
        check(not os.path.exists(cl.metadata_dir(i)), "node %d's __cluster_metadata-0 is still there" % i)
    full = bucket.ls()
    for t, p in PARTS:
        man = manifest(t, ids[t], p)
        check(man["segments"] == orig[(t, p)]["man"]["segments"] and span(man) == span(orig[(t, p)]["man"]),
              "%s-%d's manifest changed between the record and the kill: [%d, %d)" % ((t, p) + span(man)))
    cl.up(timeout=90)
    for i in cl.ids():
        got = sorted(cl.metadata(i)["topics"])
        check(not got, "after the disaster node %d knows the topics %s" % (i, got))
    rows = topic_list()
    check(not rows, "after the disaster `strata topics list` shows %s" % sorted(rows))
    time.sleep(4 * TASK_MS / 1000)
    check(bucket.ls() == full, "a cluster that knows none of the topics changed the bucket")
    print("2. SIGKILL to the 3 nodes, their log.dirs (__cluster_metadata-0 included) and caches deleted, started "
          "again on empty dirs: no topic known; the bucket still %d objects (%d bytes)" %
          (len(full), sum(full.values())), flush=True)

    # ---- 3. restore --all --------------------------------------------------------------
    via = cl.cli_node()
    t0 = time.time()
    rc, out, err = strata("restore", "--all", node=via)
    t_restore = time.time() - t0
    check(rc == 0, "restore --all: exit %d\nstdout: %s\nstderr: %s" % (rc, out, err[-3000:]))
    lines = out.splitlines()
    for t in TOPICS:
        mine = [ln for ln in lines if re.match(r"Restored topic %s\b(?!-)" % re.escape(t), ln)]
        check(len(mine) == 1, "restore --all: %d lines 'Restored topic %s' on stdout: %r" % (len(mine), t, out))
    check(len(lines) == len(TOPICS), "restore --all: stdout holds more than a line per topic: %r" % out)
    print("3. restore --all through node %d (controller: node %s): exit 0 in %.2f s; stdout:" %
          (via, cl.leader_id(), t_restore), flush=True)
    for ln in lines:
        print("     " + ln, flush=True)

    # ---- 4. what came back -------------------------------------------------------------
    rows = topic_list()
    check(sorted(rows) == sorted(TOPICS), "the topic list after the restore: %s" % sorted(rows))
    for t in TOPICS:
        check(rows[t] == (ids[t], WANT[t][0], RF), "%s after the restore: id, partitions, replication factor %s, "
              "want %s" % (t, rows[t], (ids[t], WANT[t][0], RF)))
    t0 = time.time()
    for t in TOPICS:
        cl.wait_isr(t, WANT[t][0], RF, timeout=60)
    t_isr = time.time() - t0
    for t in TOPICS:
        head, configs, epochs = describe(t)
        check(head.get("TopicId") == ids[t], "describe %s: topic id %s, want %s" % (t, head.get("TopicId"), ids[t]))
        check(configs == configs_before[t], "describe %s: configs %s, before the disaster %s" %
              (t, configs, configs_before[t]))
        for p in range(WANT[t][0]):
            st = cl.partition_state(t, p)
            check(sorted(st["replicas"]) == cl.ids() and sorted(st["isr"]) == cl.ids(),
                  "%s-%d: replicas %s, ISR %s" % (t, p, st["replicas"], st["isr"]))
            for i in cl.ids():
                with open(os.path.join(cl.node_dir(i), "logs", "%s-%d" % (t, p), "partition.metadata")) as f:
                    pm = re.search(r"topic_id: (\S+)", f.read())
                check(pm and pm.group(1) == ids[t], "node %d: %s-%d's partition.metadata names %s, want %s" %
                      (i, t, p, pm and pm.group(1), ids[t]))
            man_epoch = orig[(t, p)]["man"].get("leader_epoch", -1)
            check(epochs.get(p, -1) > man_epoch, "%s-%d: leader epoch %s, the manifest's %d" %
                  (t, p, epochs.get(p), man_epoch))
    c = cl.conn(cl.cli_node(), timeout=30)
    dc = kwire.describe_configs(c, TOPICS)
    c.close()
    for t in TOPICS:
        for k, v in WANT[t][1].items():
            check(dc[t][1].get(k) == v, "DescribeConfigs %s: %s=%s, want %s" % (t, k, dc[t][1].get(k), v))
        d = descriptor(t, ids[t])
        check(d == desc_before[t], "topic.json of %s after the restore: %s; before: %s" % (t, d, desc_before[t]))
    t0 = time.time()
    replayed = {}
    for t, p in PARTS:
        o = orig[(t, p)]
        ld = leader(t, p)
        e, earliest, _local, latest = offsets(t, p, ld)
        check(e == 0 and (earliest, latest) == (o["start"], o["end"]),
              "after the restore, %s-%d at its leader (node %d): error %d, earliest %d, latest %d; the manifest "
              "says [%d, %d)" % (t, p, ld, e, earliest, latest, o["start"], o["end"]))
        recs = replay(t, p)
        same_records("%s-%d after the restore" % (t, p), recs, o["recs"])
        same_batches("%s-%d at its leader (node %d) after the restore" % (t, p, ld),
                     raw_batches(t, p, ld, o["start"], o["end"]), o["raw"], "the pre-disaster")
        replayed[(t, p)] = len(recs)
    print("4. ids, partition counts, replication factor 3, configs and topic.json as before; every ISR whole %.1f s "
          "after the restore; leader epochs %s above the manifests'; kcat replayed %s records (offsets, timestamps, "
          "keys, values) and Fetch returned the same %d batches (%d bytes) in %.1f s" %
          (t_isr, {"%s-%d" % tp: describe(tp[0])[2][tp[1]] for tp in PARTS},
           ", ".join("%s-%d: %d" % (t, p, replayed[(t, p)]) for t, p in PARTS),
           sum(len(orig[tp]["raw"]) for tp in PARTS), sum(len(x) for tp in PARTS for x in orig[tp]["raw"]),
           time.time() - t0), flush=True)

    # ---- 5. the leader of hist-x-0 killed ------------------------------------------------
    o = orig[(X, 0)]
    old = leader(X, 0)
    check(old > 0, "%s-0 has a leader" % X)
    t0 = time.time()
    cl.kill(old)
    survivors = [i for i in cl.ids() if i != old]
    cl.wait(lambda: leader(X, 0, survivors) in survivors, SESSION_MS / 1000 + 30,
            "a survivor to lead %s-0 after node %d was killed" % (X, old), interval=0.1)
    t_fail = time.time() - t0
    new = leader(X, 0, survivors)
    e, earliest, local, latest = offsets(X, 0, new)
    check(e == 0 and (earliest, latest) == (o["start"], o["end"]) and local == o["end"],
          "%s-0 at its new leader (node %d): error %d, earliest %d, earliest local %d, latest %d; the manifest "
          "says [%d, %d)" % (X, new, e, earliest, local, latest, o["start"], o["end"]))
    bases = local_bases(new, X, 0)
    check(bases and bases[0] == o["end"], "node %d's local log of %s-0 starts at %s, want the bucket's end %d" %
          (new, X, bases[:1], o["end"]))
    recs = replay(X, 0, survivors)
    same_records("%s-0 through node %d, the new leader" % (X, new), recs, o["recs"])
    same_batches("%s-0 at node %d, the new leader" % (X, new), raw_batches(X, 0, new, o["start"], o["end"]), o["raw"],
                 "the pre-disaster")
    cl.restart(old, timeout=90)
    for t in TOPICS:
        cl.wait_isr(t, WANT[t][0], RF, timeout=60)
    print("5. node %d (the leader of %s-0) killed: node %d leads after %.2f s, its local log starts at %d; kcat "
          "replayed [%d, %d) through it (%d records) and its Fetch the same %d batches; node %d back, every ISR whole" %
          (old, X, new, t_fail, bases[0], o["start"], o["end"], len(recs), len(o["raw"]), old), flush=True)

    # ---- 6. new writes continue at the manifests' ends ---------------------------------
    firsts = {}
    for t, p in PARTS:
        ld = leader(t, p)
        e, _earliest, _local, latest = offsets(t, p, ld)
        check(e == 0 and latest == orig[(t, p)]["end"], "%s-%d before new writes: latest %d, want %d" %
              (t, p, latest, orig[(t, p)]["end"]))
        firsts[(t, p)] = produce(t, p, MORE[(t, p)], "n")
    old_man = orig[(X, 0)]["man"]
    old_end = orig[(X, 0)]["end"]
    t0 = time.time()
    progressed = {}

    def resumed():
        man = manifest(X, ids[X], 0)
        ld = leader(X, 0)
        bases = local_bases(ld, X, 0) if ld > 0 else []
        progressed["man"] = man
        return span(man)[1] > old_end and bases and span(man)[1] == bases[-1]

    cl.wait(resumed, 60, "%s-0's new segments to go up to the bucket" % X, interval=0.25)
    t_up = time.time() - t0
    man = progressed["man"]
    new_end = span(man)[1]
    epoch_now = describe(X)[2][0]
    check(man.get("leader_epoch", -1) > old_man.get("leader_epoch", -1) and man.get("leader_epoch") == epoch_now,
          "%s-0's manifest written at epoch %s, the old one at %s, the leader's is %d" %
          (X, man.get("leader_epoch"), old_man.get("leader_epoch"), epoch_now))
    check(man["log_start_offset"] == o["start"] and man["segments"][:len(old_man["segments"])] == old_man["segments"],
          "%s-0's manifest no longer starts with the restored segments: log start %d" % (X, man["log_start_offset"]))
    pre = "%s0/" % prefix_of(X, ids[X])
    problems, _orphans = manifest_problems(man, bucket.ls(pre), pre)
    check(not problems, "%s-0's manifest after new writes: %s" % (X, "; ".join(problems[:5])))
    totals = {}
    for t, p in PARTS:
        oo = orig[(t, p)]
        recs = replay(t, p)
        same_records("%s-%d after new writes, the restored part" % (t, p), recs[:oo["end"] - oo["start"]], oo["recs"])
        got = [(o_, k, v) for o_, _ts, k, v in recs[oo["end"] - oo["start"]:]]
        want = [(oo["end"] + i, k, v) for i, (k, v) in enumerate(firsts[(t, p)])]
        check(got == want, "%s-%d after new writes: %d new records from offset %s, want %d from %d (the manifest's "
              "old end); first difference at %s" %
              (t, p, len(got), got[0][0] if got else "-", len(want), oo["end"],
               next((w[0] for g, w in zip(got, want) if g != w), "the end")))
        totals[(t, p)] = len(recs)
    for i in cl.ids():
        fenced = [ln for ln in cl.log_text(i).splitlines() if "FENCED" in ln and ("hist-x" in ln or "hist-y" in ln)]
        check(not fenced, "node %d's log: %s" % (i, fenced[:3]))
    print("6. new writes at the manifests' old ends (%s); %s-0's uploads resumed in %.1f s at epoch %d (the old "
          "manifest's %s): the bucket holds [%d, %d) in %d segments; kcat replayed %s records, old and new" %
          (", ".join("%s-%d@%d" % (t, p, orig[(t, p)]["end"]) for t, p in PARTS), X, t_up, epoch_now,
           old_man.get("leader_epoch"), man["log_start_offset"], new_end, len(man["segments"]),
           ", ".join("%s-%d: %d" % (t, p, totals[(t, p)]) for t, p in PARTS)), flush=True)

    # ---- 7. clean stop -----------------------------------------------------------------------
    pids = cl.pids()
    cl.stop()
    cl.wait(lambda: all(pids[i] in cl.exits for i in cl.ids()), 10, "the reaper to see every node exit")
    codes = {i: (os.WEXITSTATUS(cl.exits[pids[i]]) if os.WIFEXITED(cl.exits[pids[i]]) else
                 "signal %d" % os.WTERMSIG(cl.exits[pids[i]])) for i in cl.ids()}
    check(all(v == 0 for v in codes.values()), "exit statuses after SIGTERM: %s" % codes)
    print("7. clean stop: every node exited 0", flush=True)
    print("ok: restore.cluster in %.1f s: restore --all %.2f s; manifests %s; replayed after the restore %s; "
          "%s-0 after new writes [%d, %d) in the bucket, %d records read" %
          (time.time() - t_start, t_restore,
           ", ".join("%s-%d [%d, %d)" % (t, p, orig[(t, p)]["start"], orig[(t, p)]["end"]) for t, p in PARTS),
           ", ".join("%s-%d: %d" % (t, p, replayed[(t, p)]) for t, p in PARTS), X, man["log_start_offset"], new_end,
           totals[(X, 0)]), flush=True)
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    cl.cleanup()

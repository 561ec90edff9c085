"""
`strata topics restore`: tiered topics brought back from the bucket alone
onto a broker that lost every local file, with their topic ids, partition
counts, replication factor and configs; the refusals that leave nothing
created; a copy under a new name.

usage: test_restore.py [file]             (the file backend in a temporary dir)
       test_restore.py rgw ENVFILE        (an RGW started by tests/s3/rgw.sh,
                                           under a prefix of this run's own)

One broker tiering with a 500 ms task interval, segment.bytes and
local.retention.bytes 16 KiB, retention.ms -1.  `strata topics` is run
with the broker's own settings (the same --config and --override
arguments stratad got, no --bootstrap).

1. Topics hist-a (2 partitions, max.message.bytes 765432), hist-b (1;
   max.message.bytes 654321 set by an alter after the create), hist-c
   (created with 1 partition, raised to 2) and hist-d (1), all with
   remote.storage.enable=true.  Each topic's descriptor
   <topic>-<topicId>/topic.json appears, and follows the config change
   and the partition count change: version 1, the topic, its id (as
   `strata topics list` shows it), partitions, replication factor and
   exactly the overrides given.  kcat writes 300 records with distinct
   keys and values of random length to every partition; once every
   closed segment is in the bucket, each partition's manifest [log start,
   end) is recorded with the records in it (kcat from the beginning:
   offset, timestamp, key, value) and the raw batches Fetch returns.
   DeleteRecords moves hist-b-0's log start into its third remote
   segment first, so its manifest's log start is no segment's base.
2. Clean stop; log.dirs (metadata included) and the chunk cache deleted;
   start on the same bucket: no topic is known, and the bucket is the same
   object for object after a few task intervals.
3. Refusals, each exit 1 with a last stderr line beginning "strata
   topics:" that names the problem, no "Restored" line, no topic of the
   request in `strata topics list` and the bucket unchanged.  The good
   topic comes first on the command line, so that a restore creating each
   topic as soon as it had checked it would be caught.
   a) hist-c partition 1's manifest overwritten with garbage: restore of
      hist-a and hist-c names hist-c's partition 1 and a corrupt manifest;
      then the manifest of partition 0 put in its place (valid JSON naming
      another partition): named too;
   b) hist-d's middle segment .log deleted: restore of hist-b and hist-d
      names the missing key; the .log put back at half its size: the key
      named again; the segment's .index deleted: named; the .log put back
      whole with one byte changed: `restore --verify hist-b hist-d` names
      the key and its manifest (its CRC32C is not the manifest's); on the
      file backend the last byte of its object file changed: --verify
      names the key as corrupt;
   c) --all while hist-d is damaged; a topic with nothing in the bucket
      beside a good one (naming it); hist-a with hist-d while a hist-d
      that is not tiered exists on the broker (TOPIC_ALREADY_EXISTS or
      "already exists"; the plain hist-d is then deleted).  --as with two topics or with --all,
      and neither a topic nor --all: exit 1 or 2 (usage), nothing created.
   The original objects are put back: the bucket is as before step 2.
4. `restore --all --verify`: exit 0, one "Restored topic NAME" line per
   topic on stdout, saying every object was read and its CRC32C checked.  As it exits, every partition's earliest offset is the
   manifest's log start (hist-b-0's the DeleteRecords offset) and its
   latest the manifest's end; list and describe show the original topic
   ids (partition.metadata too), partition counts, replication factor 1
   and the configs; each leader epoch is above the manifest's; kcat
   replays exactly [start, end) of every partition with the same offsets,
   timestamps, keys and values, and Fetch returns the same batches byte
   for byte; each topic.json still says what the topic is (no
   restore-only config in it).
5. Restore of hist-a, which exists: refused (TOPIC_ALREADY_EXISTS or
   "already exists"), so is --as onto an existing topic; hist-a unchanged.
6. `restore hist-a --as hist-a-copy` (TMPDIR a directory that does not
   exist: the store copies the objects, nothing passes through a file of
   the tool's): a new topic id, the copy's own
   manifests in the bucket (naming it and its id) and its own descriptor;
   it replays hist-a's records and batches; hist-a keeps its id, its
   segment objects and its records.
7. New writes: the first offset of a Produce to each partition of hist-a
   and to the copy is the manifest's end; more records close segments of
   hist-a-0, which go up to the bucket under the new leader epoch (a
   leader below the manifest's epoch would be fenced); kcat replays
   hist-a-0 from the bucket's start to the new end, old and new.
8. DeleteTopics of every topic: nothing is left in the bucket, the
   descriptors included.
"""
import base64
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

from kwire import Conn, delete_topic, describe_configs, record_batch
from restore_checks import (bucket_descriptor, bucket_manifest, describe_topic, fetch_batches, kcat_records,  # noqa: E402
                            prefix_of, topic_rows)
from strata_harness import (CONFIG, Broker, Bucket, binary, check, file_overrides, rgw_env, run,
                            s3_overrides, segment_logs, tiered_overrides, wait_for)

if len(sys.argv) > 1 and (sys.argv[1] not in ("rgw", "file") or (sys.argv[1] == "rgw" and len(sys.argv) < 3)):
    sys.exit("usage: test_restore.py [file] | rgw ENVFILE")
BACKEND = sys.argv[1] if len(sys.argv) > 1 else "file"
SEG = 16 << 10
N = 300  # records a partition
TASK_MS = 500
A, B, C, D, COPY = "hist-a", "hist-b", "hist-c", "hist-d", "hist-a-copy"
BASE = {"remote.storage.enable": "true", "segment.bytes": str(SEG), "local.retention.bytes": str(SEG),
        "retention.ms": "-1"}
# the overrides each topic ends with (hist-b's last one and hist-c's second
# partition come from alters after the create)
WANT = {A: (2, dict(BASE, **{"max.message.bytes": "765432"})),
        B: (1, dict(BASE, **{"max.message.bytes": "654321"})),
        C: (2, dict(BASE)),
        D: (1, dict(BASE))}
TOPICS = [A, B, C, D]

t_start = time.time()
rnd = random.Random(int(os.environ.get("STRATA_TIER_SEED", "1999")))
b = Broker()
if BACKEND == "rgw":
    store = s3_overrides(rgw_env(sys.argv[2]))
    # the fixture's bucket is shared: --all must see this run's topics only
    store["objectstore.s3.prefix"] = "it-restore-%d-%d/" % (int(time.time()), os.getpid())
else:
    store = file_overrides(os.path.join(b.root, "bucket"))
b.overrides = tiered_overrides(store, remote_log_manager_task_interval_ms=TASK_MS,
                               remote_log_fetch_chunk_bytes=64 << 10)
bucket = Bucket(b.overrides)
work = os.path.join(b.root, "work")
os.makedirs(work)
print("backend %s%s" % (BACKEND, " (prefix %s)" % store["objectstore.s3.prefix"] if BACKEND == "rgw" else ""),
      flush=True)


# ---- strata topics with the broker's own settings -------------------------

def strata(*verb, timeout=180, env=None):
    """`strata topics --config CONFIG --override ... VERB...` with exactly
    the arguments stratad was started with: (rc, stdout, stderr)."""
    cmd = b.command()
    check(cmd[1:3] == ["--config", CONFIG], "stratad's command line: %s" % cmd[:3])
    rc, out, err = run([binary("strata"), "topics"] + cmd[1:] + list(verb), check_rc=False, timeout=timeout,
                       env=env)
    return rc, out.decode(errors="replace"), err


def topic_list():
    return topic_rows(strata)


def describe(topic):
    return describe_topic(strata, topic)


def refused(what, verb, names, absent, words=()):
    """A refusal: exit 1, the last stderr line begins "strata topics:" and
    holds each of words (each a string, or a tuple of alternatives), no
    "Restored" line, none of absent in the topic list, the bucket as it was.
    Returns the line."""
    before = bucket.ls()
    t0 = time.time()
    rc, out, err = strata("restore", *verb)
    secs = time.time() - t0
    lines = err.rstrip("\n").splitlines()
    last = lines[-1] if lines else ""
    check(rc == 1, "%s: `restore %s` exited %d, want 1 (stdout %r, stderr %r)" % (what, " ".join(verb), rc, out, err))
    check(last.startswith("strata topics:"),
          "%s: the last stderr line does not begin with 'strata topics:': %r" % (what, err[-2000:]))
    check("Restored" not in out, "%s: a refusal printed %r" % (what, out))
    for w in list(names) + list(words):
        alts = w if isinstance(w, tuple) else (w,)
        check(any(a.lower() in last.lower() for a in alts),
              "%s: the refusal does not name %s: %r" % (what, " or ".join(repr(a) for a in alts), last))
    rows = topic_list()
    made = [t for t in absent if t in rows]
    check(not made, "%s: the refused restore created %s" % (what, made))
    after = bucket.ls()
    check(after == before, "%s: the refused restore changed the bucket: %d objects added, %d gone, %d resized" %
          (what, len(set(after) - set(before)), len(set(before) - set(after)),
           sum(1 for k in set(after) & set(before) if after[k] != before[k])))
    print("   %s: exit 1 in %.2f s, nothing created: %s" % (what, secs, last), flush=True)
    return last


def misuse(what, verb, word, absent):
    """A request the command line cannot mean: exit 1 or 2 (usage), a
    stderr line beginning "strata topics:" holding word, nothing created."""
    rc, out, err = strata("restore", *verb)
    said = [ln for ln in err.splitlines() if ln.startswith("strata topics:")]
    check(rc in (1, 2) and said and word in said[0] and "Restored" not in out,
          "%s: `restore %s` exited %d, stdout %r, stderr %r" % (what, " ".join(verb), rc, out, err[-2000:]))
    made = [t for t in absent if t in topic_list()]
    check(not made, "%s: created %s" % (what, made))
    print("   %s: exit %d, nothing created: %s" % (what, rc, said[0]), flush=True)


# ---- data ---------------------------------------------------------------------

produced = {}  # (topic, p) -> [(key, value)] at offsets 0..


def produce(topic, p, n):
    rows = produced.setdefault((topic, p), [])
    first = len(rows)
    new = []
    for i in range(first, first + n):
        key = b"%s-%d-k%06d" % (topic.encode(), p, i)
        value = b"%s-%d-v%06d-" % (topic.encode(), p, i) + base64.b64encode(rnd.randbytes(rnd.randint(100, 350)))
        new.append((key, value))
    run(["kcat", "-b", b.bootstrap, "-P", "-t", topic, "-p", str(p), "-K", ":", "-X", "batch.size=4096"],
        input=b"".join(k + b":" + v + b"\n" for k, v in new), timeout=120)
    rows.extend(new)


def replay(topic, p):
    return kcat_records(b.bootstrap, topic, p)


def raw_batches(topic, p, start, end):
    return fetch_batches(Conn(b.port, timeout=30), topic, p, start, end)


def offsets(topic, p):
    c = Conn(b.port, timeout=30)
    try:
        e1, earliest, _ = c.list_offsets(topic, p, -2)
        e2, latest, _ = c.list_offsets(topic, p, -1)
    finally:
        c.close()
    return e1 or e2, earliest, latest


def descriptor(topic, tid):
    return bucket_descriptor(bucket, topic, tid)


def check_descriptor(d, topic, tid, parts, configs, what):
    want = {"version": 1, "topic": topic, "topic_id": tid, "partitions": parts, "replication_factor": 1,
            "configs": configs}
    got = {k: d.get(k) for k in want}
    check(got == want, "%s: topic.json of %s is %s, want %s" % (what, topic, d, want))


def manifest(topic, tid, p):
    return bucket_manifest(bucket, topic, tid, p)


def seg_key(topic, tid, p, seg, kind="log"):
    return "%s%d/%020d-%s.%s" % (prefix_of(topic, tid), p, seg["base_offset"], seg["id"], kind)


def settled(topic, tid, p):
    """Every closed local segment is in the bucket's manifest."""
    man = manifest(topic, tid, p)
    logs = segment_logs(b, topic, p)
    if not man or not man["segments"] or not logs:
        return False
    return man["segments"][-1]["last_offset"] + 1 == int(os.path.basename(logs[-1])[:20])


def put(key, data):
    path = os.path.join(work, "put")
    with open(path, "wb") as f:
        f.write(data)
    run(bucket._cmd("put", key, path), timeout=120)


def rm(key):
    run(bucket._cmd("rm", key), timeout=120)


try:
    b.start()

    # ---- 1. tiered topics, their descriptors, what the bucket holds ----------
    c = Conn(b.port, timeout=60)
    t0 = time.time()
    for t in TOPICS:
        cfg = dict(WANT[t][1])
        if t == B:
            cfg.pop("max.message.bytes")
        err = c.create_topic(t, 1 if t in (B, C, D) else 2, configs=cfg)
        check(err == 0, "CreateTopics %s: error %d" % (t, err))
    ids = {t: row[0] for t, row in topic_list().items() if t in TOPICS}
    check(sorted(ids) == sorted(TOPICS), "the topic list after the creates: %s" % sorted(ids))
    wait_for(lambda: all(descriptor(t, ids[t]) for t in TOPICS), timeout=10, interval=0.1,
             what="topic.json of every tiered topic (10 s: 20 task intervals)")
    t_desc = time.time() - t0
    check_descriptor(descriptor(A, ids[A]), A, ids[A], 2, WANT[A][1], "after the create")
    check_descriptor(descriptor(D, ids[D]), D, ids[D], 1, WANT[D][1], "after the create")
    t0 = time.time()
    err, msg = c.incremental_alter(B, [("max.message.bytes", 0, "654321")])
    check(err == 0, "IncrementalAlterConfigs %s: error %d %s" % (B, err, msg))
    wait_for(lambda: descriptor(B, ids[B]).get("configs") == WANT[B][1], timeout=10, interval=0.1,
             what="%s's topic.json to follow the config change" % B)
    t_alter = time.time() - t0
    c.close()
    t0 = time.time()
    rc, out, err = strata("alter", C, "--partitions", "2")
    check(rc == 0, "strata topics alter %s --partitions 2: exit %d: %s" % (C, rc, err))
    wait_for(lambda: descriptor(C, ids[C]).get("partitions") == 2, timeout=10, interval=0.1,
             what="%s's topic.json to follow the partition count change" % C)
    t_parts = time.time() - t0
    for t in (B, C):
        check_descriptor(descriptor(t, ids[t]), t, ids[t], WANT[t][0], WANT[t][1], "after the alter")
    print("1. topic.json of %d topics within %.2f s of the creates; after a config change %.2f s, after a "
          "partition count change %.2f s" % (len(TOPICS), t_desc, t_alter, t_parts), flush=True)
    print("   %s: %s" % (A, json.dumps(descriptor(A, ids[A]), sort_keys=True)), flush=True)

    parts = [(t, p) for t in TOPICS for p in range(WANT[t][0])]
    for t, p in parts:
        produce(t, p, N)
    t0 = time.time()
    wait_for(lambda: all(settled(t, ids[t], p) for t, p in parts), timeout=60, interval=0.25,
             what="every closed segment in the bucket")
    t_settle = time.time() - t0
    # hist-b-0's log start moved into its third remote segment: the restore
    # must start it there, not at 0 nor at a segment's base
    segs = manifest(B, ids[B], 0)["segments"]
    check(len(segs) >= 4, "%s-0 has only %d remote segments" % (B, len(segs)))
    moved = segs[2]["base_offset"] + (segs[2]["last_offset"] - segs[2]["base_offset"]) // 2 + 1
    c = Conn(b.port, timeout=30)
    err, low = c.delete_records(B, 0, moved)
    c.close()
    check(err == 0 and low == moved, "DeleteRecords(%s-0, %d): error %d, low watermark %d" % (B, moved, err, low))

    def trimmed():
        man = manifest(B, ids[B], 0)
        return man["log_start_offset"] == moved and man["segments"][0]["base_offset"] == segs[2]["base_offset"]

    wait_for(trimmed, timeout=30, interval=0.25, what="%s-0's manifest to start at %d" % (B, moved))
    orig = {}  # (topic, p) -> dict(man, start, end, recs, raw)
    for t, p in parts:
        man = manifest(t, ids[t], p)
        check(man["topic"] == t and man["topic_id"] == ids[t] and man["partition"] == p,
              "the manifest of %s-%d names %s/%s/%s" % (t, p, man["topic"], man["topic_id"], man["partition"]))
        start, end = man["log_start_offset"], man["segments"][-1]["last_offset"] + 1
        first = moved if (t, p) == (B, 0) else 0
        check(start == first and N // 2 <= end < N, "%s-%d: the bucket holds [%d, %d) of %d records, want it from %d" %
              (t, p, start, end, N, first))
        recs = replay(t, p)
        check([(o, k, v) for o, _ts, k, v in recs] ==
              [(start + i, k, v) for i, (k, v) in enumerate(produced[(t, p)][start:])],
              "%s-%d: before the wipe, kcat does not read back the %d records produced from %d (got %d)" %
              (t, p, N - start, start, len(recs)))
        orig[(t, p)] = dict(man=man, start=start, end=end, recs=[r for r in recs if r[0] < end],
                            raw=raw_batches(t, p, start, end))
    remote = sum(o["end"] - o["start"] for o in orig.values())
    print("   %d partitions, %d records each: %d records (%d segments) in the bucket %.1f s after the last write; "
          "e.g. %s-0 [%d, %d) in %d segments, %d batches" %
          (len(parts), N, remote, sum(len(o["man"]["segments"]) for o in orig.values()), t_settle, A,
           orig[(A, 0)]["start"], orig[(A, 0)]["end"], len(orig[(A, 0)]["man"]["segments"]), len(orig[(A, 0)]["raw"])),
          flush=True)
    print("   DeleteRecords(%s-0, %d): the bucket holds [%d, %d) from segment %d on" %
          (B, moved, orig[(B, 0)]["start"], orig[(B, 0)]["end"], segs[2]["base_offset"]), flush=True)
    configs_before = {t: describe(t)[1] for t in TOPICS}
    for t in TOPICS:
        check(configs_before[t] == WANT[t][1], "describe %s shows configs %s, want %s" % (t, configs_before[t], WANT[t][1]))

    # ---- 2. every local file lost ------------------------------------------------
    check(b.stop() == 0, "clean stop")
    full = bucket.ls()
    shutil.rmtree(b.logdir)
    shutil.rmtree(b.overrides.get("remote.log.cache.dir", os.path.join(b.root, "cache")), ignore_errors=True)
    b.start()
    rows = topic_list()
    check(not [t for t in TOPICS if t in rows], "after the wipe the broker knows %s" % sorted(rows))
    time.sleep(4 * TASK_MS / 1000)
    check(bucket.ls() == full, "a broker that knows none of the topics changed the bucket")
    print("2. log.dirs and the cache deleted, started again: no topic known, the bucket still %d objects "
          "(%d bytes)" % (len(full), sum(full.values())), flush=True)

    # ---- 3. refusals --------------------------------------------------------------
    print("3. refusals:", flush=True)
    man_key = "%s1/manifest.json" % prefix_of(C, ids[C])
    man_c1 = bucket.get(man_key)
    man_c0 = bucket.get("%s0/manifest.json" % prefix_of(C, ids[C]))
    check(man_c1 is not None and man_c0 is not None, "the manifests of %s are missing" % C)
    c_part1 = (C + "-1", C + ":1", C + "/1", "/1/manifest.json", "partition 1")
    put(man_key, b"\x00\x13garbage{\"version\": 1, \"segments\": [" + rnd.randbytes(200))
    refused("a) %s partition 1's manifest garbage, after %s" % (C, A), [A, C], [C], [C, A],
            words=[c_part1, "corrupt"])
    put(man_key, man_c0)
    refused("a) %s partition 1's manifest naming partition 0" % C, [C], [C], [C], words=[c_part1])
    put(man_key, man_c1)

    segs = orig[(D, 0)]["man"]["segments"]
    seg = segs[len(segs) // 2]
    log_key = seg_key(D, ids[D], 0, seg)
    log_bytes = bucket.get(log_key)
    check(log_bytes is not None and len(log_bytes) == seg["size"],
          "%s: %s holds %s bytes, the manifest says %d" % (D, log_key, len(log_bytes or b""), seg["size"]))
    rm(log_key)
    refused("b) a .log of %s missing, after %s" % (D, B), [B, D], [log_key], [D, B])
    refused("c) --all with that .log missing", ["--all"], [log_key], TOPICS)
    put(log_key, log_bytes[:len(log_bytes) // 2])
    refused("b) that .log at half its size", [D], [log_key], [D])
    put(log_key, log_bytes)
    idx_key = seg_key(D, ids[D], 0, seg, "index")
    idx_bytes = bucket.get(idx_key)
    check(idx_bytes is not None, "%s is missing" % idx_key)
    rm(idx_key)
    refused("b) its .index missing", [D], [idx_key], [D])
    put(idx_key, idx_bytes)
    # the .log the same size with one byte changed: only --verify reads it.
    # Put whole again it carries its own CRC32C, which is not the manifest's;
    # changed in the file backend's object file, not even its own
    flipped = bytearray(log_bytes)
    flipped[len(flipped) // 2] ^= 0xFF
    put(log_key, bytes(flipped))
    refused("b) --verify: that .log with a byte changed, put again", ["--verify", B, D], [log_key, "manifest"],
            [D, B])
    put(log_key, log_bytes)
    if BACKEND == "file":
        pieces = log_key.split("/")
        path = os.path.join(store["objectstore.file.root"], *[x + "@" for x in pieces[:-1]] + [pieces[-1]])
        check(os.path.getsize(path) > len(log_bytes), "%s is not the object file of %s" % (path, log_key))
        with open(path, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([last[0] ^ 0x01]))
        refused("b) --verify: that .log with its last byte changed in the bucket", ["--verify", D],
                [log_key, "corrupt"], [D])
        with open(path, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            f.write(last)
    # a topic of that name, not tiered, made on the broker meanwhile
    c = Conn(b.port, timeout=30)
    check(c.create_topic(D, 1, configs={"remote.storage.enable": "false"}) == 0, "CreateTopics of a plain %s" % D)
    plain_id = topic_list()[D][0]
    refused("c) %s and %s, which exists on the broker (not tiered)" % (A, D), [A, D], [D], [A],
            words=[("TOPIC_ALREADY_EXISTS", "already exists")])
    check(topic_list()[D][0] == plain_id, "the refused restore replaced the plain %s" % D)
    check(delete_topic(c, D) == 0, "DeleteTopics of the plain %s" % D)
    c.close()
    wait_for(lambda: D not in topic_list() and not os.path.exists(os.path.join(b.logdir, D + "-0")), timeout=30,
             interval=0.2, what="the plain %s to go" % D)
    refused("c) a topic with nothing in the bucket, with %s" % B, [B, "hist-none"], ["hist-none"], [B, "hist-none"])
    misuse("c) --as with two topics", [A, B, "--as", "hist-x"], "--as", [A, B, "hist-x"])
    misuse("c) --as with --all", ["--all", "--as", "hist-x"], "--as", TOPICS + ["hist-x"])
    misuse("c) neither a topic nor --all", [], "restore", TOPICS)
    check(bucket.ls() == full, "the bucket is not as it was before the refusals once the objects are back")

    # ---- 4. restore --all ---------------------------------------------------------
    t0 = time.time()
    rc, out, err = strata("restore", "--all", "--verify")
    t_restore = time.time() - t0
    check(rc == 0, "restore --all --verify: exit %d\nstdout: %s\nstderr: %s" % (rc, out, err[-3000:]))
    lines = out.splitlines()
    for t in TOPICS:
        mine = [ln for ln in lines if re.match(r"Restored topic %s\b(?!-)" % re.escape(t), ln)]
        check(len(mine) == 1, "restore --all: %d lines 'Restored topic %s' on stdout: %r" % (len(mine), t, out))
        check("CRC32C checked" in mine[0], "restore --all --verify: %r does not say the objects were checked" %
              mine[0])
    check(len(lines) == len(TOPICS), "restore --all: stdout holds more than a line per topic: %r" % out)
    for t, p in parts:
        o = orig[(t, p)]
        e, earliest, latest = offsets(t, p)
        check(e == 0 and (earliest, latest) == (o["start"], o["end"]),
              "as restore exits, %s-%d: ListOffsets error %d, earliest %d, latest %d; the manifest says [%d, %d)" %
              (t, p, e, earliest, latest, o["start"], o["end"]))
    print("4. restore --all --verify: exit 0 in %.2f s; stdout:" % t_restore, flush=True)
    for ln in lines:
        print("     " + ln, flush=True)
    rows = topic_list()
    for t in TOPICS:
        check(t in rows, "%s is not in the topic list after the restore" % t)
        check(rows[t] == (ids[t], WANT[t][0], 1), "%s after the restore: id, partitions, replication factor %s, "
              "want %s" % (t, rows[t], (ids[t], WANT[t][0], 1)))
        head, configs, epochs = describe(t)
        check(head.get("TopicId") == ids[t], "describe %s: topic id %s, want %s" % (t, head.get("TopicId"), ids[t]))
        check(configs == configs_before[t], "describe %s: configs %s, before the wipe %s" % (t, configs, configs_before[t]))
        for p in range(WANT[t][0]):
            with open(os.path.join(b.logdir, "%s-%d" % (t, p), "partition.metadata")) as f:
                pm = re.search(r"topic_id: (\S+)", f.read())
            check(pm and pm.group(1) == ids[t], "%s-%d's partition.metadata names %s, want %s" %
                  (t, p, pm and pm.group(1), ids[t]))
            man_epoch = orig[(t, p)]["man"].get("leader_epoch", -1)
            check(epochs.get(p, -1) > man_epoch, "%s-%d: leader epoch %s, the manifest's %d" %
                  (t, p, epochs.get(p), man_epoch))
    c = Conn(b.port, timeout=30)
    dc = describe_configs(c, TOPICS)
    c.close()
    for t in TOPICS:
        for k, v in WANT[t][1].items():
            check(dc[t][1].get(k) == v, "DescribeConfigs %s: %s=%s, want %s" % (t, k, dc[t][1].get(k), v))
    t0 = time.time()
    nbytes = 0
    for t, p in parts:
        o = orig[(t, p)]
        recs = replay(t, p)
        check(len(recs) == o["end"] - o["start"] and (not recs or recs[0][0] == o["start"]),
              "%s-%d after the restore: kcat read %d records from offset %s, want [%d, %d)" %
              (t, p, len(recs), recs[0][0] if recs else "-", o["start"], o["end"]))
        for got, want in zip(recs, o["recs"]):
            check(got == want, "%s-%d after the restore: offset %d is %r, before the wipe %r" %
                  (t, p, want[0], got[:3], want[:3]))
        raw = raw_batches(t, p, o["start"], o["end"])
        check(raw == o["raw"], "%s-%d after the restore: Fetch returns %d batches, %d differ from before the wipe" %
              (t, p, len(raw), sum(1 for x, y in zip(raw, o["raw"]) if x != y) + abs(len(raw) - len(o["raw"]))))
        nbytes += sum(len(x) for x in raw)
    for t in TOPICS:  # rewritten by the new leaders, if at all, with what the topic is
        check_descriptor(descriptor(t, ids[t]), t, ids[t], WANT[t][0], WANT[t][1], "after the restore")
    print("   ids, partition counts, configs as before; leader epochs %s above the manifests'; kcat replayed "
          "%d records of %d partitions (offsets, timestamps, keys, values) and Fetch %d batches (%d bytes) identical "
          "in %.1f s" % (sorted({e for t in TOPICS for e in describe(t)[2].values()}), remote, len(parts),
                         sum(len(o["raw"]) for o in orig.values()), nbytes, time.time() - t0), flush=True)

    # ---- 5. onto an existing topic ------------------------------------------------
    print("5. onto existing topics:", flush=True)
    exists = ("TOPIC_ALREADY_EXISTS", "already exists")
    refused("restore of %s, which exists" % A, [A], [A], [], words=[exists])
    refused("restore of %s --as %s, which exists" % (A, B), [A, "--as", B], [B], [], words=[exists])
    check(topic_list()[A] == (ids[A], 2, 1) and topic_list()[B] == (ids[B], 1, 1),
          "a refused restore onto existing topics changed them")

    # ---- 6. a copy under a new name -----------------------------------------------
    objs_a = {k: v for k, v in bucket.ls(prefix_of(A, ids[A])).items() if not k.endswith(".json")}
    t0 = time.time()
    # the store copies the objects itself: the tool needs no temporary file
    rc, out, err = strata("restore", A, "--as", COPY,
                          env=dict(os.environ, TMPDIR=os.path.join(work, "no-such-dir")))
    t_copy = time.time() - t0
    check(rc == 0, "restore %s --as %s: exit %d\nstdout: %s\nstderr: %s" % (A, COPY, rc, out, err[-3000:]))
    check(len(out.splitlines()) == 1 and out.startswith("Restored topic ") and COPY in out,
          "restore --as: stdout %r, want one line 'Restored topic ... %s'" % (out, COPY))
    rows = topic_list()
    check(COPY in rows, "%s is not in the topic list" % COPY)
    cid = rows[COPY][0]
    check(cid != ids[A] and len(cid) == 22, "%s has topic id %s, %s has %s" % (COPY, cid, A, ids[A]))
    check(rows[COPY][1:] == (2, 1), "%s: partitions, replication factor %s" % (COPY, rows[COPY][1:]))
    check(describe(COPY)[1] == configs_before[A], "%s's configs %s, %s's %s" % (COPY, describe(COPY)[1], A,
                                                                                configs_before[A]))
    copied = 0
    for p in range(2):
        o = orig[(A, p)]
        man = manifest(COPY, cid, p)
        check(man is not None, "no manifest of %s-%d under %s" % (COPY, p, prefix_of(COPY, cid)))
        check(man["topic"] == COPY and man["topic_id"] == cid and man["partition"] == p,
              "the manifest of %s-%d names %s/%s/%s" % (COPY, p, man["topic"], man["topic_id"], man["partition"]))
        span = (man["log_start_offset"], man["segments"][-1]["last_offset"] + 1 if man["segments"] else -1)
        check(span == (o["start"], o["end"]), "%s-%d's manifest holds [%d, %d), %s's [%d, %d)" %
              ((COPY, p) + span + (A, o["start"], o["end"])))
        objs = bucket.ls("%s%d/" % (prefix_of(COPY, cid), p))
        for s in man["segments"]:
            check(objs.get(seg_key(COPY, cid, p, s)) == s["size"], "%s: %s holds %s bytes, the manifest says %d" %
                  (COPY, seg_key(COPY, cid, p, s), objs.get(seg_key(COPY, cid, p, s)), s["size"]))
        copied += len(objs)
        e, earliest, latest = offsets(COPY, p)
        check(e == 0 and (earliest, latest) == (o["start"], o["end"]),
              "%s-%d: earliest %d latest %d (error %d), want [%d, %d)" % (COPY, p, earliest, latest, e, o["start"], o["end"]))
        recs = replay(COPY, p)
        check(recs == o["recs"], "%s-%d: kcat read %d records, %d differ from %s-%d's" %
              (COPY, p, len(recs), sum(1 for x, y in zip(recs, o["recs"]) if x != y), A, p))
        check(raw_batches(COPY, p, o["start"], o["end"]) == o["raw"], "%s-%d: Fetch returns other batches than %s-%d" %
              (COPY, p, A, p))
    wait_for(lambda: descriptor(COPY, cid) is not None, timeout=30, interval=0.1, what="topic.json of %s" % COPY)
    check_descriptor(descriptor(COPY, cid), COPY, cid, 2, WANT[A][1], "the copy")
    check(topic_list()[A] == (ids[A], 2, 1), "%s changed with the copy: %s" % (A, topic_list()[A]))
    after_a = {k: v for k, v in bucket.ls(prefix_of(A, ids[A])).items() if not k.endswith(".json")}
    check(after_a == objs_a, "%s's segment objects changed with the copy: %d added, %d gone" %
          (A, len(set(after_a) - set(objs_a)), len(set(objs_a) - set(after_a))))
    for p in range(2):
        check(replay(A, p) == orig[(A, p)]["recs"], "%s-%d's records changed with the copy" % (A, p))
    print("6. restore %s --as %s: exit 0 in %.2f s, id %s (%s's %s), %d objects under %s, the same records and "
          "batches; %s untouched (%d segment objects)" % (A, COPY, t_copy, cid, A, ids[A], copied,
                                                          prefix_of(COPY, cid), A, len(objs_a)), flush=True)

    # ---- 7. new writes continue at the manifest end -------------------------------
    c = Conn(b.port, timeout=30)
    firsts = []
    for t, p in [(A, 0), (A, 1), (COPY, 0), (COPY, 1)]:
        end = orig[(A, p)]["end"]
        keys = [b"%s-%d-new-%d" % (t.encode(), p, i) for i in range(5)]
        _, err, base = c.produce(t, p, record_batch([k + b"-value" for k in keys], keys=keys))
        check(err == 0 and base == end, "a Produce to %s-%d after the restore: error %d, base offset %d, want %d "
              "(the manifest's end)" % (t, p, err, base, end))
        firsts.append("%s-%d@%d" % (t, p, base))
        e, earliest, latest = offsets(t, p)
        check((e, earliest, latest) == (0, orig[(A, p)]["start"], end + 5),
              "%s-%d after 5 new records: error %d, earliest %d, latest %d" % (t, p, e, earliest, latest))
    c.close()
    old_end = orig[(A, 0)]["end"]
    before = len(produced[(A, 0)])
    produce(A, 0, 200)
    t0 = time.time()

    def resumed():
        man = manifest(A, ids[A], 0)
        return man["segments"][-1]["last_offset"] + 1 > old_end + 5 and settled(A, ids[A], 0)

    wait_for(resumed, timeout=60, interval=0.25, what="%s-0's new segments to go up to the bucket" % A)
    man = manifest(A, ids[A], 0)
    new_end = man["segments"][-1]["last_offset"] + 1
    epoch_now = describe(A)[2][0]
    check(man.get("leader_epoch") == epoch_now, "%s-0's manifest written at epoch %s, the leader's is %d" %
          (A, man.get("leader_epoch"), epoch_now))
    fenced = [ln for ln in b.log_text().splitlines() if "FENCED" in ln and A in ln]
    check(not fenced, "the broker's log: %s" % fenced[:2])
    recs = replay(A, 0)
    want = [(o, k, v) for o, _ts, k, v in orig[(A, 0)]["recs"]]
    want += [(old_end + i, b"%s-0-new-%d" % (A.encode(), i), b"%s-0-new-%d-value" % (A.encode(), i)) for i in range(5)]
    want += [(old_end + 5 + i, k, v) for i, (k, v) in enumerate(produced[(A, 0)][before:])]
    got = [(o, k, v) for o, _ts, k, v in recs]
    check(got == want, "%s-0 after new writes: kcat read %d records from %s, want %d from %d; first difference at "
          "%s" % (A, len(got), got[0][0] if got else "-", len(want), want[0][0],
                  next((w[0] for g, w in zip(got, want) if g != w), "the end")))
    check(recs[:old_end - orig[(A, 0)]["start"]] == orig[(A, 0)]["recs"], "%s-0: the restored part changed" % A)
    print("7. new writes at the manifest ends (%s); %s-0's uploads resumed in %.1f s at epoch %d: the bucket "
          "holds [%d, %d), kcat replayed %d records, old and new" %
          (", ".join(firsts), A, time.time() - t0, epoch_now, man["log_start_offset"], new_end, len(recs)),
          flush=True)

    # ---- 8. the topics go, and everything of them in the bucket -------------------
    c = Conn(b.port, timeout=60)
    for t in TOPICS + [COPY]:
        check(delete_topic(c, t) == 0, "DeleteTopics %s" % t)
    c.close()
    t0 = time.time()
    left = {}

    def emptied():
        left["objs"] = bucket.ls()
        return not left["objs"]

    try:
        wait_for(emptied, timeout=60, interval=0.5, what="the bucket to empty")
    except SystemExit:
        print("left in the bucket: %s" % sorted(left["objs"])[:10], flush=True)
        raise
    print("8. DeleteTopics of %d topics: the bucket empty in %.1f s, descriptors included" %
          (len(TOPICS) + 1, time.time() - t0), flush=True)
    check(b.stop() == 0, "clean stop")
    print("ok: restore on %s in %.1f s" % (BACKEND, time.time() - t_start))
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    if BACKEND == "rgw":
        try:
            for key in bucket.ls():
                subprocess.run(bucket._cmd("rm", key), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=60)
        except (SystemExit, Exception) as e:  # noqa: BLE001 (best effort)
            print("cleaning the test's prefix: %s" % e)
    b.cleanup()

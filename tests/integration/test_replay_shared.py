"""
integration.replay_shared.rgw - several consumers replaying the same tiered
topic at once cost one download per chunk: the GETs RGW served (its usage
log) while three consumers replayed the topic together are those of one
consumer replaying it alone.

usage: test_replay_shared.py ENVFILE   (the env file of tests/s3/rgw.sh: the rgw fixture)

1. A user and a bucket of this test's own in the fixture's RGW (RgwUser of
   test_cost.py), so that the user's usage log holds this broker's requests
   and nothing of other tests sharing the fixture.  stratad tiers to it with
   log.local.retention.bytes 0, 1 MiB chunks and an admin listener; only
   topic "shared" is tiered (its own remote.storage.enable: with the
   broker's default on, __consumer_offsets, created when the first consumer
   looks for a coordinator, would be tiered as well and its 50 partitions'
   start, a LIST and two GETs each, would land in a window).  The topic (2
   partitions, 4 MiB segments) gets STRATA_SHARED_MB (48) MB of line
   messages from kcat, one kcat per partition; the test waits until each
   partition keeps only its active segment and its manifest ends where
   that segment begins (read from the disk: waiting costs no request).
2. stratad is restarted with a chunk cache directory never used before
   (nothing cached, in memory or on disk: /metrics says so); one rdk_replay
   (librdkafka, assign, no group) reads every partition from offset 0 to
   its high watermark, the tiered part (all but the active segment) from
   the bucket.  RGW's get_obj (GetObject; a HEAD too) in that window, from
   the usage log once it settled, and the bytes they sent.
3. Restarted again with another new cache directory; three rdk_replay
   processes started at once, each over every partition from offset 0.
   Each got every offset of every partition, byte for byte what was
   produced, with the same file hashes as the single replay; RGW's get_obj
   in that window.
4. The three replays' GETs are at most the single replay's x 1.10 + 2 (an
   index object or two): one download per chunk however many read it.
5. Again (a new cache) with remote.log.cache.memory.bytes 8 MiB and the
   three consumers at different speeds (as fast as it can, 30 MB/s, 15
   MB/s), so they drift further apart than memory holds: what the reader
   ahead left, the readers behind find in the disk cache; the same bound.
6. Again with a disk cache of 32 MiB (less than the topic), 4 MiB of
   memory and the broker's 8 chunks of read-ahead, the consumers at 12, 8
   and 5 MB/s: the disk fills with the first chunks as they arrive; from
   then on only the rules of what goes from memory on to the disk (a
   reader behind within half the disk cache, read-ahead not read yet) and
   the disk's eviction order (the chunks the most readers came through
   first) keep the bound, which holds again; some chunk must have gone
   that way (stratad's spilled count), or the window did not test them.
   With least recently used order on the disk this window made 75 GETs
   against 60: it evicted chunks only the fastest reader had read, since
   the readers behind touched the chunks they had just passed later.
   STRATA_SHARED_FULL=0 leaves it out.
   No window may be empty or short: no GETs, fewer than one per chunk
   and index object of the tiered segments, or fewer bytes than those
   segments hold, fail; so does a single replay that downloaded a chunk
   twice (more than the chunks and index objects x 1.10 + 2), which would
   make the comparison meaningless.

Printed: both windows' GETs and bytes, GETs per GiB of tiered data (and,
for three consumers, per GiB they were sent in all), stratad's own count of
the topic's reads in each window, its cache figures from /metrics (misses,
hits, chunks spilled to disk, evictions, memory and disk held), and the
time of each window and of the whole test (~35 s).

Settings (to look at the cache under other conditions; the defaults are
the test):
  STRATA_SHARED_MB            MB produced in all (48)
  STRATA_SHARED_MEMORY_BYTES  remote.log.cache.memory.bytes (unset: the
                              broker's default, 128 MiB, more than the data)
  STRATA_SHARED_FULL          0: not step 6
  STRATA_SHARED_FULL_RATES    step 6's bytes/s per consumer
                              (12000000,8000000,5000000)
  STRATA_SHARED_FULL_READAHEAD  step 6's remote.log.fetch.readahead.chunks
                              (unset: the broker's default, 8)
  STRATA_SHARED_RATES         bytes/s per consumer of the three, comma
                              separated, 0 for no cap (0): a capped consumer
                              runs rdk_replay -r with a 16 MiB client queue,
                              so that the consumers drift apart
"""
import base64
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kwire import Conn  # noqa: E402
from strata_harness import (Broker, binary, check, check_replay, fail, free_port, partition_dir,  # noqa: E402
                            rgw_env, s3_overrides, spawn, tiered_overrides, wait_for)
from test_cost import RgwUser, m, scrape  # noqa: E402

if len(sys.argv) != 2:
    sys.exit("usage: test_replay_shared.py ENVFILE")
TOPIC = "shared"
PARTS = 2
SEG = 4 << 20
CHUNK = 1 << 20
MIB = float(1 << 20)
GIB = float(1 << 30)
READERS = 3
SLACK_RATIO, SLACK_GETS = 1.10, 2
REPLAY_TIMEOUT_S = 300
APART_MEMORY = 8 << 20
APART_RATES = [0, 30000000, 15000000]
FULL_MEMORY, FULL_DISK = 4 << 20, 32 << 20
FULL_RATES = [int(x) for x in os.environ.get("STRATA_SHARED_FULL_RATES", "12000000,8000000,5000000").split(",")]
FULL_READAHEAD = os.environ.get("STRATA_SHARED_FULL_READAHEAD")
FULL = os.environ.get("STRATA_SHARED_FULL", "1") != "0"
DATA_MB = int(os.environ.get("STRATA_SHARED_MB", "48"))
MEMORY = os.environ.get("STRATA_SHARED_MEMORY_BYTES")
RATES = [int(x) for x in os.environ.get("STRATA_SHARED_RATES", "0").split(",")]

# stratad's figures, as /metrics names them and as printed
FIGURES = (("strata_tiering_cache_misses_total", "misses"), ("strata_tiering_cache_hits_total", "hits"),
           ("strata_tiering_cache_spilled_total", "spilled"), ("strata_tiering_cache_evictions_total", "evicted"),
           ("strata_tiering_cache_memory_used_bytes", "in memory"), ("strata_tiering_cache_used_bytes", "on disk"),
           ("strata_tiering_cache_downloaded_bytes_total", "downloaded"))


def produce(b, work):
    """DATA_MB MB of line messages, half to each partition, one kcat each;
    the messages of each partition, in order."""
    rnd = random.Random(0x5A4ED)
    expected, procs, files = [], [], []
    for p in range(PARTS):
        path = os.path.join(work, "in-%d" % p)
        msgs, size = [], 0
        with open(path, "wb") as f:
            while size < (DATA_MB << 20) // PARTS:
                line = b"%d-%07d-" % (p, len(msgs)) + base64.b64encode(rnd.randbytes(rnd.randint(500, 1000)))
                msgs.append(line)
                f.write(line + b"\n")
                size += len(line) + 1
        expected.append(msgs)
        files.append(open(path, "rb"))
        procs.append(spawn(["kcat", "-b", b.bootstrap, "-P", "-t", TOPIC, "-p", str(p), "-X", "batch.size=262144"],
                           stdin=files[-1]))
    for p, proc in enumerate(procs):
        try:
            rc = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            fail("kcat -P of partition %d did not finish in 300 s" % p)
        files[p].close()
        check(rc == 0, "kcat -P of partition %d exited %d" % (p, rc))
    return expected


def manifest(b, p):
    """The partition's manifest as the broker keeps it next to the log."""
    try:
        with open(os.path.join(partition_dir(b, TOPIC, p), "remote-manifest.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def settled(b):
    """Each partition keeps only its active segment and its manifest ends
    where that segment begins."""
    for p in range(PARTS):
        segs = sorted(f for f in os.listdir(partition_dir(b, TOPIC, p)) if f.endswith(".log"))
        man = manifest(b, p)
        if len(segs) != 1 or not man or not man.get("segments") or \
                man["segments"][-1]["last_offset"] + 1 != int(segs[0][:20]):
            return False
    return True


def tiered(b):
    """What a replay from offset 0 reads from the bucket: (tiered ends,
    segments, .log bytes, chunks at least, chunks at most).  A chunk ends
    where a batch starts, so a segment of s bytes has s // CHUNK to
    ceil(s / CHUNK) of them."""
    ends, segs, size, lo, hi = [], 0, 0, 0, 0
    for p in range(PARTS):
        ss = manifest(b, p)["segments"]
        check(ss[0]["base_offset"] == 0, "partition %d's remote log starts at %d, not 0" % (p, ss[0]["base_offset"]))
        ends.append(ss[-1]["last_offset"] + 1)
        segs += len(ss)
        for s in ss:
            size += s["size"]
            lo += max(1, s["size"] // CHUNK)
            hi += (s["size"] + CHUNK - 1) // CHUNK
    return ends, segs, size, lo, hi


def restart(b, work, tag):
    """stratad again, with a chunk cache directory never used before."""
    check(b.stop() == 0, "clean stop before the %s replay" % tag)
    cache = os.path.join(work, "cache-" + tag)
    check(not os.path.exists(cache), "%s exists already" % cache)
    b.overrides["remote.log.cache.dir"] = cache
    b.start(timeout=60)


def figures(aport):
    """stratad's own counts since its start, and the topic's read requests."""
    _, ms = scrape(aport)
    out = {short: int(m(ms, name) or 0) for name, short in FIGURES}
    out["topic reads"] = int(m(ms, "strata_tiering_requests_total", topic=TOPIC, **{"class": "read"}) or 0)
    return out


def show(figs):
    return ", ".join(("%s %.1f MiB" % (k, v / MIB)) if k in ("in memory", "on disk", "downloaded") else
                     ("%s %d" % (k, v)) for k, v in figs.items() if k != "topic reads")


def replay(b, work, tag, n, rates):
    """n rdk_replay processes started at once, each over every partition
    from offset 0, consumer i at rates[i % len] bytes/s (0: as fast as it
    can): (seconds until the last ended, [(output dir, its summary
    line)])."""
    dirs, procs = [], []
    for i in range(n):
        d = os.path.join(work, "%s-%d" % (tag, i))
        os.mkdir(d)
        dirs.append(d)
    t0 = time.time()
    for i, d in enumerate(dirs):
        rate = rates[i % len(rates)] if n > 1 else 0
        cap = ["-r", str(rate), "-X", "queued.max.messages.kbytes=16384"] if rate else []
        with open(d + ".out", "wb") as so, open(d + ".err", "wb") as se:
            procs.append(spawn([binary("rdk_replay"), "-b", b.bootstrap, "-t", TOPIC, "-d", d,
                                "-T", str(REPLAY_TIMEOUT_S)] + cap, stdout=so, stderr=se))
    out = []
    for i, (d, p) in enumerate(zip(dirs, procs)):
        try:
            rc = p.wait(timeout=REPLAY_TIMEOUT_S + 60)
        except subprocess.TimeoutExpired:
            fail("%s: rdk_replay %d did not end in %d s" % (tag, i, REPLAY_TIMEOUT_S + 60))
        with open(d + ".out", errors="replace") as f:
            line = f.read().strip()
        with open(d + ".err", errors="replace") as f:
            err = f.read()
        check(rc == 0, "%s: rdk_replay %d exited %d: %s %s" % (tag, i, rc, line, err[-2000:]))
        out.append((d, line))
    return time.time() - t0, out


def verify(tag, outs, expected, want=None):
    """Every consumer got every offset of every partition, byte for byte
    what was produced; the sha256 of its output per partition (equal to
    want, when given, and among the consumers)."""
    hashes = None
    for i, (d, line) in enumerate(outs):
        hs = []
        for p in range(PARTS):
            path = os.path.join(d, str(p))
            check_replay(path, expected[p], 0, "%s: consumer %d partition %d" % (tag, i, p))
            with open(path, "rb") as f:
                hs.append(hashlib.sha256(f.read()).hexdigest())
        check(want is None or hs == want, "%s: consumer %d's output hashes %s differ from the single replay's %s" %
              (tag, i, hs, want))
        check(hashes is None or hs == hashes, "%s: consumer %d's output differs from consumer 0's" % (tag, i))
        hashes = hs
        print("%s: consumer %d read every offset of every partition back identical (sha256 %s): %s" %
              (tag, i, " ".join(h[:12] for h in hs), line), flush=True)
    return hashes


def main():
    t_start = time.time()
    env = rgw_env(sys.argv[1])
    user = RgwUser(env)
    aport = free_port()
    b = Broker()
    store = s3_overrides(env)
    store.update({"objectstore.s3.bucket": user.bucket, "objectstore.s3.access.key": user.access,
                  "objectstore.s3.secret.key": user.secret})
    b.overrides = tiered_overrides(store, num_partitions=PARTS, log_local_retention_bytes=0,
                                   remote_log_fetch_chunk_bytes=CHUNK)
    b.overrides["log.remote.storage.enable"] = "false"  # the topic's own setting tiers it
    if MEMORY is not None:
        b.overrides["remote.log.cache.memory.bytes"] = MEMORY
    b.overrides["admin.listeners"] = "http://127.0.0.1:%d" % aport
    work = tempfile.mkdtemp(prefix="strata-replay-shared-")
    try:
        b.start()

        # ---- 1. the topic, its closed segments only in the bucket
        c = Conn(b.port, timeout=60)
        check(c.create_topic(TOPIC, PARTS, configs={"remote.storage.enable": "true", "segment.bytes": str(SEG),
                                                    "local.retention.bytes": "0"}) == 0, "CreateTopics " + TOPIC)
        c.close()
        expected = produce(b, work)
        wait_for(lambda: settled(b), timeout=240, interval=0.5,
                 what="every closed segment in the bucket and gone locally")
        ends, segs, remote_bytes, chunks_lo, chunks_hi = tiered(b)
        check(segs >= 2 * PARTS, "only %d segments in the bucket" % segs)
        need_lo, need_hi = chunks_lo + segs, chunks_hi + segs
        tgib = remote_bytes / GIB
        print("%s messages written; in the bucket after %.1f s: %d segments, %.1f MiB (tiered ends %s); a "
              "replay from offset 0 downloads %d-%d chunks and %d offset indexes" %
              (" + ".join(str(len(e)) for e in expected), time.time() - t_start, segs, remote_bytes / MIB,
               ends, chunks_lo, chunks_hi, segs), flush=True)

        def window(tag, n, want=None, rates=RATES, memory=MEMORY, disk=None, readahead=None):
            """n consumers at once after a restart with nothing cached:
            (RGW's get_obj, their bytes, the output hashes, stratad's
            figures at the end)."""
            if memory is not None:
                b.overrides["remote.log.cache.memory.bytes"] = memory
            if disk is not None:
                b.overrides["remote.log.cache.size.bytes"] = disk
            if readahead is not None:
                b.overrides["remote.log.fetch.readahead.chunks"] = readahead
            restart(b, work, tag)
            u0 = user.settled_usage()
            f0 = figures(aport)
            check(f0["misses"] == 0 and f0["in memory"] == 0 and f0["on disk"] == 0,
                  "%s: the cache is not empty after the restart: %s" % (tag, show(f0)))
            secs, outs = replay(b, work, tag, n, rates)
            u1 = user.settled_usage()
            f1 = figures(aport)
            hashes = verify(tag, outs, expected, want)
            gets = u1.get("get_obj", (0, 0))[0] - u0.get("get_obj", (0, 0))[0]
            got = u1.get("get_obj", (0, 0))[1] - u0.get("get_obj", (0, 0))[1]
            other = {op: u1[op][0] - u0.get(op, (0, 0))[0] for op in u1
                     if op != "get_obj" and u1[op][0] != u0.get(op, (0, 0))[0]}
            print("%s: %d consumer(s) replayed the topic in %.1f s; RGW served %d get_obj, %.1f MiB%s; stratad "
                  "counted %d reads of the topic; %.1f GETs per GiB of tiered data; stratad's cache: %s" %
                  (tag, n, secs, gets, got / MIB, (" (and %s)" % other) if other else "",
                   f1["topic reads"] - f0["topic reads"], gets / tgib, show(f1)), flush=True)
            check(gets > 0, "%s: RGW served no GET in the replay window: nothing came from the bucket" % tag)
            check(gets >= need_lo, "%s: %d GETs, fewer than the %d chunks and indexes of the tiered segments: "
                  "the replay did not read them all from the bucket" % (tag, gets, need_lo))
            check(got >= remote_bytes, "%s: RGW sent %d bytes, fewer than the %d bytes tiered" %
                  (tag, got, remote_bytes))
            return gets, got, hashes, f1

        # ---- 2. one consumer, nothing cached
        g1, bytes1, hashes, _ = window("single", 1)
        check(g1 <= need_hi * SLACK_RATIO + SLACK_GETS,
              "one consumer alone made RGW serve %d GETs for %d-%d chunks and indexes: chunks downloaded "
              "more than once" % (g1, need_lo, need_hi))
        # ---- 3. three at once, nothing cached
        g3, bytes3, _, _ = window("shared", READERS, hashes)

        # ---- 4. one download per chunk
        limit = g1 * SLACK_RATIO + SLACK_GETS
        print("GETs: one consumer %d (%.1f per GiB), %d consumers at once %d (%.1f per GiB of the topic, %.1f "
              "per GiB sent to them), %+d (%+.1f%%, limit %.1f); from RGW %.1f MiB against %.1f MiB" %
              (g1, g1 / tgib, READERS, g3, g3 / tgib, g3 / (READERS * tgib), g3 - g1, 100.0 * (g3 - g1) / g1,
               limit, bytes1 / MIB, bytes3 / MIB), flush=True)
        check(g3 <= limit, "%d consumers at once made RGW serve %d GETs (%.1f MiB), one consumer %d (%.1f MiB): "
              "more than %.1f, not one download per chunk" %
              (READERS, g3, bytes3 / MIB, g1, bytes1 / MIB, limit))

        # ---- 5. the same, the consumers drifting apart by more than the
        # chunks memory holds (8 MiB; one as fast as it can, one at 30 MB/s,
        # one at 15): what a reader behind needs goes to the disk cache
        # rather than away, so still one download per chunk
        ga, bytesa, _, _ = window("apart", READERS, hashes, rates=APART_RATES, memory=str(APART_MEMORY))
        print("GETs with the consumers apart (memory %d MiB, rates %s B/s): %d (%.1f per GiB), %+d against one "
              "consumer (%+.1f%%, limit %.1f)" % (APART_MEMORY >> 20, APART_RATES, ga, ga / tgib, ga - g1,
                                                   100.0 * (ga - g1) / g1, limit), flush=True)
        check(ga <= limit, "%d consumers apart made RGW serve %d GETs (%.1f MiB), one consumer %d: more than %.1f, "
              "a reader behind downloaded again what the one ahead had" % (READERS, ga, bytesa / MIB, g1, limit))

        if FULL:
            # ---- 6. apart again, with a disk cache smaller than the topic (32
            # MiB) and 4 MiB of memory: the first chunks fill the disk as they
            # arrive, the rest come into memory, and only the rules of what
            # goes on to the disk from there (a reader behind within half the
            # disk cache, read-ahead not read yet) and the disk's eviction
            # order (the chunks the most readers came through first) keep one
            # download per chunk
            gf, bytesf, _, ff = window("full", READERS, hashes, rates=FULL_RATES, memory=str(FULL_MEMORY),
                                       disk=str(FULL_DISK), readahead=FULL_READAHEAD)
            print("GETs with the consumers apart and the disk cache full (memory %d MiB, disk %d MiB, read-ahead %s, "
                  "rates %s B/s): %d (%.1f per GiB), %+d against one consumer (%+.1f%%, limit %.1f)" %
                  (FULL_MEMORY >> 20, FULL_DISK >> 20,
                   FULL_READAHEAD + " chunks" if FULL_READAHEAD else "the broker's default", FULL_RATES, gf,
                   gf / tgib, gf - g1,
                   100.0 * (gf - g1) / g1, limit), flush=True)
            check(gf <= limit, "%d consumers apart with the disk cache full made RGW serve %d GETs (%.1f MiB), one "
                  "consumer %d: more than %.1f, a reader behind downloaded again what the one ahead had" %
                  (READERS, gf, bytesf / MIB, g1, limit))
            check(ff["spilled"] > 0, "full: no chunk went from memory to the disk cache (%s): the window did not reach "
                  "the rules it is for" % show(ff))
        check(b.stop() == 0, "clean stop")
        print("integration.replay_shared.rgw: ok in %.1f s" % (time.time() - t_start), flush=True)
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        b.cleanup()
        user.remove()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""
integration.txn_offset_commit - offsets committed inside a transaction
(TxnOffsetCommit, KIP-98 / KIP-447), sent by hand against a real stratad:

  - ApiVersions advertises TxnOffsetCommit (28) 0-3;
  - TxnOffsetCommit v0 (classic) and v3 (flexible) of a producer: no
    error, and OffsetFetch does not show the offsets while the transaction
    is open (-1, or the offset committed before it); OffsetFetch v7 with
    require_stable answers UNSTABLE_OFFSET_COMMIT (88) for exactly those
    partitions;
  - in __consumer_offsets they are one transactional batch (attribute
    bit 4) of the producer's id and epoch, base sequence -1;
  - bad input, each with Kafka's error while the coordinator keeps serving:
    a topic or partition that does not exist (UNKNOWN_TOPIC_OR_PARTITION
    for it, the others taken), an empty group id (INVALID_GROUP_ID), an
    unknown group with a generation (ILLEGAL_GENERATION), members of a
    live group checked from v3 (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION);
  - WriteTxnMarkers to the group's __consumer_offsets partition, sent by
    hand as the transaction coordinator would: a COMMIT marker makes the
    offsets committed, an ABORT marker drops them, a plain OffsetCommit
    written after a transaction's offset is kept over it at the commit;
  - a restart replays all of it (the control batches too): an open
    transaction stays pending, and its marker after the restart commits it;
  - the cleaner compacts __consumer_offsets full of committed and aborted
    transactions' offsets and markers; a restart after it replays the same
    offsets;
  - a zombie (the producer's older epoch after a newer one wrote) is
    refused with INVALID_PRODUCER_EPOCH and leaves nothing pending.
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from kwire import compact_str, flex_call, uvarint  # noqa: E402
from strata_harness import Broker, check, kstr, read_batches, segment_logs, wait_for  # noqa: E402

TOPIC = "txo"
GROUP = "txo-group"
NPARTS = 3  # offsets.topic.num.partitions here
E_NONE, E_UNKNOWN_TOPIC, E_LOAD, E_NOT_COORD, E_ILLEGAL_GEN = 0, 3, 14, 16, 22
E_INVALID_GROUP, E_UNKNOWN_MEMBER, E_INVALID_EPOCH, E_UNSTABLE = 24, 25, 47, 88


def group_partition(group, n=NPARTS):
    """Kafka's abs(String.hashCode) % n (ASCII ids)."""
    h = 0
    for ch in group.encode():
        h = (31 * h + ch) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % n


def cstr_n(s):
    return uvarint(0) if s is None else compact_str(s)


def txn_commit(c, version, group, pid, epoch, offsets, txid="txo-tx", generation=-1, member="",
               instance=None):
    """TxnOffsetCommit; offsets = {(topic, partition): offset} -> {(topic,
    partition): error}."""
    topics = {}
    for (t, p), off in sorted(offsets.items()):
        topics.setdefault(t, []).append((p, off))
    if version < 3:
        body = kstr(txid) + kstr(group) + struct.pack(">qh", pid, epoch) + struct.pack(">i", len(topics))
        for t, parts in topics.items():
            body += kstr(t) + struct.pack(">i", len(parts))
            for p, off in parts:
                body += struct.pack(">iq", p, off)
                if version >= 2:
                    body += struct.pack(">i", 5)
                body += kstr("meta-%d" % off)
        cur = c.call(28, version, body)
        cur.take(">i")
        out = {}
        for _ in range(cur.take(">i")):
            t = cur.string()
            for _ in range(cur.take(">i")):
                p, err = cur.take(">ih")
                out[(t, p)] = err
        return out
    body = compact_str(txid) + compact_str(group) + struct.pack(">qhi", pid, epoch, generation)
    body += compact_str(member) + cstr_n(instance) + uvarint(len(topics) + 1)
    for t, parts in topics.items():
        body += compact_str(t) + uvarint(len(parts) + 1)
        for p, off in parts:
            body += struct.pack(">iqi", p, off, 5) + compact_str("meta-%d" % off) + b"\x00"
        body += b"\x00"
    cur = flex_call(c, 28, version, body + b"\x00")
    cur.take(">i")
    out = {}
    for _ in range(cur.uvarint() - 1):
        t = cur.compact_string()
        for _ in range(cur.uvarint() - 1):
            p, err = cur.take(">ih")
            cur.skip_tags()
            out[(t, p)] = err
        cur.skip_tags()
    return out


def offset_fetch(c, group, parts, require_stable=False):
    """OffsetFetch v7 -> (group error, {partition of TOPIC: (offset, error)})."""
    body = compact_str(group) + uvarint(2) + compact_str(TOPIC) + uvarint(len(parts) + 1)
    body += b"".join(struct.pack(">i", p) for p in parts) + b"\x00"
    body += struct.pack(">b", 1 if require_stable else 0) + b"\x00"
    cur = flex_call(c, 9, 7, body)
    cur.take(">i")
    out = {}
    for _ in range(cur.uvarint() - 1):
        cur.compact_string()
        for _ in range(cur.uvarint() - 1):
            p, off, _epoch = cur.take(">iqi")
            cur.compact_string()
            out[p] = (off, cur.take(">h"))
            cur.skip_tags()
        cur.skip_tags()
    return cur.take(">h"), out


def offset_commit(c, group, part, offset):
    """OffsetCommit v2 of a group without members -> error."""
    body = kstr(group) + struct.pack(">i", -1) + kstr("") + struct.pack(">q", -1)
    body += struct.pack(">i", 1) + kstr(TOPIC) + struct.pack(">i", 1) + struct.pack(">iq", part, offset) + kstr("")
    cur = c.call(8, 2, body)
    cur.take(">i")
    cur.string()
    cur.take(">i")
    return cur.take(">ih")[1]


def write_markers(c, version, pid, epoch, commit, partition):
    """WriteTxnMarkers of one marker to __consumer_offsets-partition ->
    its error."""
    name = "__consumer_offsets"
    if version == 0:
        body = struct.pack(">i", 1) + struct.pack(">qhb", pid, epoch, 1 if commit else 0)
        body += struct.pack(">i", 1) + kstr(name) + struct.pack(">ii", 1, partition) + struct.pack(">i", 0)
        cur = c.call(27, 0, body)
        cur.take(">i")
        cur.take(">q")
        cur.take(">i")
        cur.string()
        cur.take(">i")
        return cur.take(">ih")[1]
    body = uvarint(2) + struct.pack(">qhb", pid, epoch, 1 if commit else 0)
    body += uvarint(2) + compact_str(name) + uvarint(2) + struct.pack(">i", partition) + b"\x00"
    body += struct.pack(">i", 0) + b"\x00" + b"\x00"
    cur = flex_call(c, 27, version, body)
    cur.uvarint()
    cur.take(">q")
    cur.uvarint()
    cur.compact_string()
    cur.uvarint()
    return cur.take(">ih")[1]


def find_coordinator(c, group):
    cur = c.call(10, 0, kstr(group))
    return cur.take(">h")


b = Broker({"offsets.topic.num.partitions": str(NPARTS), "auto.create.topics.enable": "false",
            "log.cleaner.backoff.ms": "300"}).start()
try:
    c = kwire.Conn(b.port, timeout=15)
    versions = kwire.api_versions(c)
    check(versions.get(28) == (0, 3), "ApiVersions advertises TxnOffsetCommit 0-3: %r" % (versions.get(28),))
    check(c.create_topic(TOPIC, 4) == 0, "CreateTopics %s" % TOPIC)
    wait_for(lambda: find_coordinator(c, GROUP) == 0, what="a coordinator for the group")
    err, pid, epoch = kwire.init_producer_id(c)
    check(err == 0 and pid >= 0, "InitProducerId: %r" % ((err, pid, epoch),))
    print("producer %d epoch %d" % (pid, epoch))

    # a committed offset before the transaction, on partition 3
    wait_for(lambda: offset_commit(c, GROUP, 3, 7) == E_NONE, what="OffsetCommit before the transaction")

    # -- the transaction's offsets: v0 for partitions 0, 3; v3 for 1 ---------
    r = txn_commit(c, 0, GROUP, pid, epoch, {(TOPIC, 0): 42, (TOPIC, 3): 43})
    check(r == {(TOPIC, 0): 0, (TOPIC, 3): 0}, "TxnOffsetCommit v0: %r" % r)
    r = txn_commit(c, 3, GROUP, pid, epoch, {(TOPIC, 1): 44})
    check(r == {(TOPIC, 1): 0}, "TxnOffsetCommit v3: %r" % r)
    r = txn_commit(c, 2, GROUP, pid, epoch, {(TOPIC, 1): 45, ("no-such-topic", 0): 1, (TOPIC, 99): 1})
    check(r == {(TOPIC, 1): 0, ("no-such-topic", 0): E_UNKNOWN_TOPIC, (TOPIC, 99): E_UNKNOWN_TOPIC},
          "TxnOffsetCommit v2 with unknown partitions: %r" % r)

    gerr, seen = offset_fetch(c, GROUP, [0, 1, 2, 3])
    check(gerr == 0 and seen == {0: (-1, 0), 1: (-1, 0), 2: (-1, 0), 3: (7, 0)},
          "OffsetFetch shows no pending offset: %r" % seen)
    gerr, seen = offset_fetch(c, GROUP, [0, 1, 2, 3], require_stable=True)
    check(gerr == 0 and seen == {0: (-1, E_UNSTABLE), 1: (-1, E_UNSTABLE), 2: (-1, 0), 3: (-1, E_UNSTABLE)},
          "OffsetFetch require_stable: %r" % seen)
    print("pending: plain fetch %r, require_stable %r" % (offset_fetch(c, GROUP, [0, 1, 2, 3])[1], seen))

    # -- in the log: one transactional batch per request, the producer's --
    gp = group_partition(GROUP)
    txn_batches = []
    for path in segment_logs(b, "__consumer_offsets", gp):
        for bt in read_batches(path):
            raw = bt["data"]
            attrs, = struct.unpack_from(">h", raw, 21)
            bpid, bepoch, bseq = struct.unpack_from(">qhi", raw, 43)
            if attrs & 0x10:
                txn_batches.append((bpid, bepoch, bseq, struct.unpack_from(">i", raw, 57)[0]))
    check(len(txn_batches) == 3 and all(t[:3] == (pid, epoch, -1) for t in txn_batches),
          "__consumer_offsets-%d holds the 3 transactional batches of producer %d: %r" % (gp, pid, txn_batches))
    print("__consumer_offsets-%d: transactional batches (pid, epoch, base sequence, records) %r" % (gp, txn_batches))

    # -- bad input ------------------------------------------------------------
    r = txn_commit(c, 0, "", pid, epoch, {(TOPIC, 0): 1})
    check(r == {(TOPIC, 0): E_INVALID_GROUP}, "empty group id: %r" % r)
    r = txn_commit(c, 3, "txo-unknown", pid, epoch, {(TOPIC, 0): 1}, generation=5, member="m-1")
    check(r == {(TOPIC, 0): E_ILLEGAL_GEN}, "unknown group with a generation: %r" % r)
    # a live group (one member through JoinGroup/SyncGroup v0)
    LIVE = "txo-live"
    wait_for(lambda: find_coordinator(c, LIVE) == 0, what="a coordinator for the live group")
    sub = struct.pack(">hi", 0, 1) + kstr(TOPIC) + struct.pack(">i", -1)
    jb = kstr(LIVE) + struct.pack(">i", 10000) + kstr("") + kstr("consumer") + struct.pack(">i", 1)
    jb += kstr("range") + struct.pack(">i", len(sub)) + sub
    cur = c.call(11, 0, jb)
    jerr, gen = cur.take(">hi")
    cur.string()
    cur.string()
    mid = cur.string()
    check(jerr == 0, "JoinGroup: %d" % jerr)
    r = txn_commit(c, 3, LIVE, pid, epoch, {(TOPIC, 0): 1}, generation=gen, member="stranger")
    check(r == {(TOPIC, 0): E_UNKNOWN_MEMBER}, "v3 unknown member: %r" % r)
    r = txn_commit(c, 3, LIVE, pid, epoch, {(TOPIC, 0): 1}, generation=gen + 7, member=mid)
    check(r == {(TOPIC, 0): E_ILLEGAL_GEN}, "v3 stale generation: %r" % r)
    r = txn_commit(c, 3, LIVE, pid, epoch, {(TOPIC, 2): 9}, generation=gen, member=mid)
    check(r == {(TOPIC, 2): 0}, "v3 member of the generation: %r" % r)
    # the coordinator still serves everyone
    check(offset_commit(c, "txo-other", 0, 3) == 0, "a plain commit after the bad input")
    check(offset_fetch(c, "txo-other", [0])[1] == {0: (3, 0)}, "the plain commit is visible")

    # -- markers (WriteTxnMarkers, as the transaction coordinator sends them) --
    markers = versions.get(27)
    check(markers is not None, "ApiVersions advertises WriteTxnMarkers (27)")
    mv = markers[0]
    e = write_markers(c, mv, pid, epoch, True, gp)
    check(e == 0, "WriteTxnMarkers COMMIT to __consumer_offsets-%d: %d" % (gp, e))
    want = {0: (42, 0), 1: (45, 0), 2: (-1, 0), 3: (43, 0)}
    wait_for(lambda: offset_fetch(c, GROUP, [0, 1, 2, 3], True)[1] == want, timeout=10,
             what="the committed transaction's offsets")
    print("after COMMIT: %r" % offset_fetch(c, GROUP, [0, 1, 2, 3], True)[1])
    # the next transaction aborts
    check(txn_commit(c, 0, GROUP, pid, epoch, {(TOPIC, 0): 50}) == {(TOPIC, 0): 0}, "second transaction")
    check(offset_fetch(c, GROUP, [0], True)[1] == {0: (-1, E_UNSTABLE)}, "second transaction pending")
    check(offset_fetch(c, GROUP, [0])[1] == {0: (42, 0)}, "the committed offset shows meanwhile")
    check(write_markers(c, mv, pid, epoch, False, gp) == 0, "WriteTxnMarkers ABORT")
    wait_for(lambda: offset_fetch(c, GROUP, [0], True)[1] == {0: (42, 0)}, timeout=10,
             what="the aborted offset dropped")
    print("after ABORT: %r" % offset_fetch(c, GROUP, [0], True)[1])
    # a plain commit after a transaction's on one partition: the later wins
    check(txn_commit(c, 0, GROUP, pid, epoch, {(TOPIC, 3): 70}) == {(TOPIC, 3): 0}, "third transaction")
    check(offset_commit(c, GROUP, 3, 71) == 0, "plain commit during the transaction")
    check(write_markers(c, mv, pid, epoch, True, gp) == 0, "WriteTxnMarkers COMMIT")
    wait_for(lambda: offset_fetch(c, GROUP, [3], True)[1] == {3: (71, 0)}, timeout=10,
             what="the plain commit written after the transaction's kept")
    want_after = {0: (42, 0), 1: (45, 0), 3: (71, 0)}
    # an open transaction over the restart
    check(txn_commit(c, 0, GROUP, pid, epoch, {(TOPIC, 2): 60}) == {(TOPIC, 2): 0}, "open transaction")
    want_after[2] = (-1, E_UNSTABLE)
    c.close()

    # -- restart: replay rebuilds committed and pending offsets ----------------
    b.stop()
    b.start()
    c = kwire.Conn(b.port, timeout=15)

    def replayed():
        try:
            g, seen = offset_fetch(c, GROUP, [0, 1, 2, 3], True)
        except Exception:
            return False
        return g == 0 and seen == want_after
    wait_for(replayed, timeout=30, what="the replayed offsets %r (last: %r)" % (want_after, None))
    print("after restart (require_stable): %r" % offset_fetch(c, GROUP, [0, 1, 2, 3], True)[1])
    plain = offset_fetch(c, GROUP, [2])[1]
    check(plain == {2: (-1, 0)}, "the open transaction's offset is still not shown: %r" % plain)
    check(write_markers(c, mv, pid, epoch, True, gp) == 0, "WriteTxnMarkers after the restart")
    wait_for(lambda: offset_fetch(c, GROUP, [2], True)[1] == {2: (60, 0)}, timeout=10,
             what="the replayed open transaction committed")
    print("open transaction committed after the restart: %r" % offset_fetch(c, GROUP, [2], True)[1])
    # -- the cleaner compacts __consumer_offsets under transactions: rounds
    # of committed and aborted transactions and plain commits over rolled
    # segments; after cleaning a restart replays the same offsets ---------
    co = "__consumer_offsets"
    errs = c.incremental_alter(co, [("segment.ms", 0, "150"), ("min.cleanable.dirty.ratio", 0, "0.01")])
    check(errs[0] == 0, "IncrementalAlterConfigs %s: %r" % (co, errs))
    written = 0
    for rnd in range(12):
        ok = txn_commit(c, 0, GROUP, pid, epoch, {(TOPIC, 0): 100 + rnd, (TOPIC, 1): 200 + rnd})
        check(set(ok.values()) == {0}, "round %d transaction: %r" % (rnd, ok))
        check(write_markers(c, mv, pid, epoch, True, gp) == 0, "round %d commit marker" % rnd)
        ok = txn_commit(c, 0, GROUP, pid, epoch, {(TOPIC, 0): 900 + rnd, (TOPIC, 3): 900 + rnd})
        check(set(ok.values()) == {0}, "round %d aborted transaction: %r" % (rnd, ok))
        check(write_markers(c, mv, pid, epoch, False, gp) == 0, "round %d abort marker" % rnd)
        check(offset_commit(c, GROUP, 3, 300 + rnd) == 0, "round %d plain commit" % rnd)
        written += 6
        time.sleep(0.2)  # past segment.ms: the next append rolls
    want_clean = {0: (111, 0), 1: (211, 0), 2: (60, 0), 3: (311, 0)}
    check(offset_fetch(c, GROUP, [0, 1, 2, 3], True)[1] == want_clean, "offsets after the rounds")

    def cleaned():
        return "%s-%d: cleaned in" % (co, gp) in b.log_text()
    wait_for(cleaned, timeout=60, what="the cleaner to compact %s-%d" % (co, gp))
    closed = [bt for path in segment_logs(b, co, gp)[:-1] for bt in read_batches(path)]
    ctrl = sum(1 for bt in closed if bt["attributes"] & 0x20)
    print("%s-%d cleaned: %d closed segment batches left (%d markers) of ~%d batches written"
          % (co, gp, len(closed), ctrl, written + 20))
    c.close()
    b.stop()
    b.start()
    c = kwire.Conn(b.port, timeout=15)
    wait_for(lambda: offset_fetch(c, GROUP, [0, 1, 2, 3], True)[1] == want_clean, timeout=30,
             what="the offsets replayed from the cleaned log %r" % want_clean)
    print("after cleaning and a restart: %r" % offset_fetch(c, GROUP, [0, 1, 2, 3], True)[1])
    # a zombie: once the producer wrote at a newer epoch, its older epoch's
    # commit is refused by __consumer_offsets (INVALID_PRODUCER_EPOCH) and
    # nothing of it is pending
    check(txn_commit(c, 3, GROUP, pid, epoch + 1, {(TOPIC, 1): 80}) == {(TOPIC, 1): 0}, "newer epoch")
    r = txn_commit(c, 3, GROUP, pid, epoch, {(TOPIC, 0): 81})
    check(r == {(TOPIC, 0): E_INVALID_EPOCH}, "older epoch: %r" % r)
    seen = offset_fetch(c, GROUP, [0, 1], True)[1]
    check(seen == {0: (111, 0), 1: (-1, E_UNSTABLE)}, "only the newer epoch's offset is pending: %r" % seen)
    print("zombie epoch %d refused (%d); pending %r" % (epoch, r[(TOPIC, 0)], seen))
    c.close()
    rc = b.stop()
    check(rc == 0, "stratad exited %s" % rc)
    print("OK")
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    b.cleanup()

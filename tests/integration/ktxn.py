"""
ktxn - the transaction coordinator's requests by hand, for the transaction
tests (kwire.py has the rest): FindCoordinator v1, InitProducerId (through
kwire), AddPartitionsToTxn, AddOffsetsToTxn and EndTxn in their classic
versions, DescribeTransactions v0 and ListTransactions v1 (flexible), a
transactional Produce v3, a read_committed Fetch v5, Kafka's partition of a
transactional id, and the records of __transaction_state
(TransactionLogKey / TransactionLogValue v0).
"""
import struct

import kwire
from strata_harness import check, kstr

STATUS = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
          "PrepareEpochFence"]


def partition_for(tid, n=50):
    h = 0
    for ch in tid.encode("utf-16-be").decode("utf-16-be"):
        for unit in struct.unpack(">%dH" % (len(ch.encode("utf-16-be")) // 2), ch.encode("utf-16-be")):
            h = (h * 31 + unit) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % n


# ---- requests ----------------------------------------------------------------

def find_coordinator(c, key, key_type=1):
    cur = c.call(10, 1, kstr(key) + struct.pack(">b", key_type))
    cur.take(">i")
    err = cur.take(">h")
    cur.string()
    node = cur.take(">i")
    host = cur.string()
    port = cur.take(">i")
    return err, node, host, port


def init_pid(c, tid, timeout_ms=10000, version=4, pid=-1, epoch=-1):
    return kwire.init_producer_id(c, transactional_id=tid, timeout_ms=timeout_ms, version=version,
                                  producer_id=pid, producer_epoch=epoch)


def add_partitions(c, tid, pid, epoch, topics, version=2):
    body = kstr(tid) + struct.pack(">qh", pid, epoch) + struct.pack(">i", len(topics))
    for t, parts in topics:
        body += kstr(t) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    cur = c.call(24, version, body)
    cur.take(">i")
    out = {}
    for _ in range(cur.take(">i")):
        t = cur.string()
        for _ in range(cur.take(">i")):
            p, err = cur.take(">ih")
            out[(t, p)] = err
    return out


def add_offsets(c, tid, pid, epoch, group, version=2):
    cur = c.call(25, version, kstr(tid) + struct.pack(">qh", pid, epoch) + kstr(group))
    cur.take(">i")
    return cur.take(">h")


def end_txn(c, tid, pid, epoch, commit, version=2):
    cur = c.call(26, version, kstr(tid) + struct.pack(">qhb", pid, epoch, 1 if commit else 0))
    cur.take(">i")
    return cur.take(">h")


def carray(items):
    return kwire.uvarint(len(items) + 1) + b"".join(items)


def describe(c, tids):
    body = carray([kwire.compact_str(t) for t in tids]) + b"\x00"
    cur = kwire.flex_call(c, 65, 0, body)
    cur.take(">i")
    out = {}
    for _ in range(cur.uvarint() - 1):
        err = cur.take(">h")
        tid = cur.compact_string()
        state = cur.compact_string()
        timeout, start, pid, epoch = cur.take(">iqqi")
        parts = []
        for _ in range(cur.uvarint() - 1):
            t = cur.compact_string()
            for _ in range(cur.uvarint() - 1):
                parts.append((t, cur.take(">i")))
            cur.skip_tags()
        cur.skip_tags()
        out[tid] = dict(error=err, state=state, timeout=timeout, start=start, pid=pid, epoch=epoch,
                        parts=sorted(parts))
    return out


def list_txns(c, states=(), pids=(), duration=-1):
    body = carray([kwire.compact_str(s) for s in states]) + carray([struct.pack(">q", p) for p in pids])
    body += struct.pack(">q", duration) + b"\x00"
    cur = kwire.flex_call(c, 66, 1, body)
    cur.take(">i")
    err = cur.take(">h")
    unknown = [cur.compact_string() for _ in range(cur.uvarint() - 1)]
    txns = {}
    for _ in range(cur.uvarint() - 1):
        tid = cur.compact_string()
        pid = cur.take(">q")
        state = cur.compact_string()
        cur.skip_tags()
        txns[tid] = (pid, state)
    return err, unknown, txns


# ---- __transaction_state records ---------------------------------------------

def zigzag(d, pos):
    shift = v = 0
    while True:
        b = d[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (v >> 1) ^ -(v & 1), pos


def records(batch):
    pos = 61
    out = []
    for _ in range(struct.unpack_from(">i", batch, 57)[0]):
        _len, pos = zigzag(batch, pos)
        pos += 1  # attributes
        _, pos = zigzag(batch, pos)
        _, pos = zigzag(batch, pos)
        kl, pos = zigzag(batch, pos)
        key = batch[pos:pos + kl] if kl >= 0 else None
        pos += max(kl, 0)
        vl, pos = zigzag(batch, pos)
        value = batch[pos:pos + vl] if vl >= 0 else None
        pos += max(vl, 0)
        nh, pos = zigzag(batch, pos)
        check(nh == 0, "a __transaction_state record with headers")
        out.append((key, value))
    return out


def decode_value(v):
    cur = kwire.Cursor(v)
    version, pid, epoch, timeout, status = cur.take(">hqhib")
    check(version == 0, "TransactionLogValue version %d (Strata writes v0)" % version)
    parts = []
    n = cur.take(">i")
    for _ in range(max(n, 0)):
        t = cur.string()
        for _ in range(cur.take(">i")):
            parts.append((t, cur.take(">i")))
    update, start = cur.take(">qq")
    check(cur.p == len(v), "TransactionLogValue has %d bytes after its fields" % (len(v) - cur.p))
    return dict(pid=pid, epoch=epoch, timeout=timeout, status=STATUS[status], parts=sorted(parts),
                update=update, start=start)


def fetch_committed(c, topic, partition, offset):
    """Fetch v5 read_committed: (error, high watermark, last stable offset,
    [(producer id, first offset)] aborted, records bytes)."""
    body = struct.pack(">iiiib", -1, 100, 1, 1 << 20, 1) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqqi", partition, offset, -1, 1 << 20)
    cur = c.call(1, 5, body)
    cur.take(">i")
    cur.take(">i")
    cur.string()
    cur.take(">i")
    _p, err, hw, lso, _ls = cur.take(">ihqqq")
    aborted = [cur.take(">qq") for _ in range(max(cur.take(">i"), 0))]
    return err, hw, lso, aborted, cur.bytes_()


def produce_txn(c, tid, topic, partition, records):
    """Produce v3 acks=all of a transactional batch: (error, base offset)."""
    body = kstr(tid) + struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", partition, len(records)) + records
    cur = c.call(0, 3, body)
    cur.take(">i")
    cur.string()
    cur.take(">i")
    _idx, err, base, _lat = cur.take(">ihqq")
    return err, base

"""
integration.txn_log - the partition side of transactions, driven by hand
with kwire.py (record batches v2, Produce v3 with a transactional id,
WriteTxnMarkers v0 as a coordinator sends it, Fetch v5 with
isolation_level, ListOffsets v2):

  - a transactional batch opens a transaction at its offset: the last
    stable offset stays there, a read_committed fetch gets nothing past it
    and ListOffsets latest (read_committed) answers it, while
    read_uncommitted sees the records;
  - a plain producer's records after it wait behind the open transaction;
  - an abort marker closes it: the LSO moves to the high watermark, and a
    read_committed fetch gets the records with the aborted transaction
    (producer id, first offset) to skip; a commit marker closes another
    with no aborted entry;
  - a marker with an older coordinator epoch: TRANSACTION_COORDINATOR_FENCED
    (52); at an older producer epoch: INVALID_PRODUCER_EPOCH (47); for an
    unknown partition: UNKNOWN_TOPIC_OR_PARTITION (3); a non-transactional
    batch of a producer whose transaction is open: INVALID_TXN_STATE (48);
  - the aborted transaction is in the segment's .txnindex (Kafka's format),
    and after a clean restart and after SIGKILL (replay) the same aborted
    list and LSO are answered.
"""
import glob
import os
import signal
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import Broker, check, kstr  # noqa: E402

TOPIC = "txn-log"


def produce_txn(c, batch, txn_id="t1"):
    body = kstr(txn_id) + struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + kstr(TOPIC)
    body += struct.pack(">i", 1) + struct.pack(">ii", 0, len(batch)) + batch
    r = c.call(0, 3, body)
    r.take(">i")
    r.string()
    r.take(">i")
    _idx, err, base, _lat = r.take(">ihqq")
    return err, base


def fetch(c, offset, committed):
    """(error, hw, lso, aborted [(pid, first)], batches [(base, count, bytes)])"""
    body = struct.pack(">iiiib", -1, 10, 1, 1 << 20, 1 if committed else 0) + struct.pack(">i", 1)
    body += kstr(TOPIC) + struct.pack(">i", 1) + struct.pack(">iqqi", 0, offset, -1, 1 << 20)
    r = c.call(1, 5, body)
    r.take(">i")
    r.take(">i")
    r.string()
    r.take(">i")
    _p, err, hw, lso, _ls = r.take(">ihqqq")
    n = r.take(">i")
    aborted = [r.take(">qq") for _ in range(max(n, 0))]
    return err, hw, lso, aborted, kwire.batches(r.bytes_() or b"")


def latest(c, committed):
    body = struct.pack(">ib", -1, 1 if committed else 0) + struct.pack(">i", 1) + kstr(TOPIC)
    body += struct.pack(">i", 1) + struct.pack(">iq", 0, -1)
    r = c.call(2, 2, body)
    r.take(">i")  # throttle
    r.take(">i")
    r.string()
    r.take(">i")
    _p, err, _ts, off = r.take(">ihqq")
    return err, off


def marker(c, pid, epoch, commit, coord_epoch=0, topic=TOPIC, partition=0):
    body = struct.pack(">i", 1) + struct.pack(">qh?", pid, epoch, commit)
    body += struct.pack(">i", 1) + kstr(topic) + struct.pack(">ii", 1, partition)
    body += struct.pack(">i", coord_epoch)
    r = c.call(27, 0, body)
    r.take(">i")
    r.take(">q")
    r.take(">i")
    r.string()
    r.take(">i")
    _idx, err = r.take(">ih")
    return err


def recs(n, tag):
    return [("%s-%d" % (tag, i)).encode() for i in range(n)]


# No transaction coordinator takes part here: the transactions are opened
# by hand, so the leader's KIP-890 verification (integration.txn_coordinator
# tests it) is off, as Kafka's transaction.partition.verification.enable.
b = Broker({"auto.create.topics.enable": "false",
            "transaction.partition.verification.enable": "false"}).start()
c = kwire.Conn(b.port)
err = c.create_topic(TOPIC, 1)
check(err == 0, "create %s: error %s" % (TOPIC, err))
r = kwire.init_producer_id(c)
pid, epoch = r[1], r[2]
r2 = kwire.init_producer_id(c)
pid2, epoch2 = r2[1], r2[2]
print("producers %d/%d and %d/%d" % (pid, epoch, pid2, epoch2))

# plain records first
_i, err, base = c.produce(TOPIC, 0, kwire.record_batch(recs(3, "plain")))
check(err == 0 and base == 0, "plain produce: %s at %s" % (err, base))

# transaction A of pid: opens at 3
err, base = produce_txn(c, kwire.record_batch(recs(4, "a"), producer_id=pid, producer_epoch=epoch,
                                              base_sequence=0, transactional=True))
check(err == 0 and base == 3, "transactional produce: %s at %s" % (err, base))
# a plain batch after it (offsets 7-8) and transaction B of pid2 (9-10)
_i, err, base = c.produce(TOPIC, 0, kwire.record_batch(recs(2, "late")))
check(err == 0 and base == 7, "plain produce after: %s at %s" % (err, base))
err, base = produce_txn(c, kwire.record_batch(recs(2, "b"), producer_id=pid2, producer_epoch=epoch2,
                                              base_sequence=0, transactional=True), "t2")
check(err == 0 and base == 9, "second transaction: %s at %s" % (err, base))

e, hw, lso, ab, bs = fetch(c, 0, True)
print("read_committed while open: hw %d lso %d batches %s" % (hw, lso, [x[:2] for x in bs]))
check(e == 0 and hw == 11 and lso == 3, "LSO %d, want 3 (hw %d)" % (lso, hw))
check([x[:2] for x in bs] == [(0, 3)], "read_committed sees only the plain batch before the LSO")
e, hw, lso, ab, bs = fetch(c, 3, True)
check(e == 0 and not bs, "read_committed at the LSO: nothing (%d batches)" % len(bs))
e, hw, lso, ab, bs = fetch(c, 5, True)
check(e == 0 and not bs, "read_committed between LSO and hw: no error, nothing (error %d)" % e)
e, _hw, _lso, _ab, bs = fetch(c, 0, False)
check(len(bs) == 4, "read_uncommitted sees every batch (%d)" % len(bs))
check(latest(c, True) == (0, 3) and latest(c, False) == (0, 11),
      "ListOffsets latest: committed %s uncommitted %s" % (latest(c, True), latest(c, False)))

# a plain batch of a producer whose transaction is open
_i, err, _ = c.produce(TOPIC, 0, kwire.record_batch(recs(1, "x"), producer_id=pid, producer_epoch=epoch,
                                                base_sequence=4))
check(err == 48, "non-transactional batch inside a transaction: %d, want INVALID_TXN_STATE (48)" % err)
# bad markers
check(marker(c, pid, epoch, False, topic="no-such-topic") == 3, "marker for an unknown topic")
check(marker(c, pid, epoch, False, coord_epoch=5) == 0, "abort of A at coordinator epoch 5")
e, hw, lso, ab, bs = fetch(c, 0, True)
print("after abort of A: hw %d lso %d aborted %s" % (hw, lso, ab))
check(lso == 9 and ab == [(pid, 3)], "after the abort: LSO %d (want 9), aborted %s" % (lso, ab))
check(marker(c, pid2, epoch2, True, coord_epoch=2) == 0, "commit of B")
check(marker(c, pid2, epoch2, True, coord_epoch=1) == 52,
      "marker at an older coordinator epoch: want TRANSACTION_COORDINATOR_FENCED (52)")
# pid2 at a bumped epoch opens D; a marker at its old epoch is refused
err, base = produce_txn(c, kwire.record_batch(recs(1, "d"), producer_id=pid2, producer_epoch=epoch2 + 1,
                                              base_sequence=0, transactional=True), "t2")
check(err == 0, "transaction D at epoch %d: %s" % (epoch2 + 1, err))
check(marker(c, pid2, epoch2, True, coord_epoch=3) == 47,
      "marker at an older producer epoch: want INVALID_PRODUCER_EPOCH (47)")
check(marker(c, pid2, epoch2 + 1, True, coord_epoch=3) == 0, "commit of D")
e, hw, lso, ab, bs = fetch(c, 0, True)
print("after commit of B: hw %d lso %d aborted %s" % (hw, lso, ab))
check(lso == hw and ab == [(pid, 3)], "after commit: LSO %d hw %d aborted %s" % (lso, hw, ab))
check(latest(c, True) == (0, hw), "ListOffsets latest committed = hw once all closed")
e, _hw, _lso, ab2, _ = fetch(c, 12, True)
check(ab2 == [], "from offset 12 (past A's marker at 11) nothing to skip: %s" % ab2)

idx = glob.glob(os.path.join(b.logdir, TOPIC + "-0", "*.txnindex"))
check(len(idx) == 1, "one .txnindex file (%s)" % idx)
data = open(idx[0], "rb").read()
check(len(data) == 34, ".txnindex holds one entry (%d bytes)" % len(data))
ver, epid, first, last, elso = struct.unpack(">hqqqq", data)
print(".txnindex: version %d pid %d first %d last %d lso %d" % (ver, epid, first, last, elso))
check((ver, epid, first) == (0, pid, 3) and last == 11, "entry %s" % ((ver, epid, first, last),))
c.close()

want = (lso, ab)
for how in ("clean restart", "SIGKILL"):
    if how == "SIGKILL":
        # another open transaction, then a crash: it must still hold the LSO
        c = kwire.Conn(b.port)
        err, base = produce_txn(c, kwire.record_batch(recs(2, "c"), producer_id=pid, producer_epoch=epoch,
                                                      base_sequence=4, transactional=True))
        check(err == 0, "transaction C: %s" % err)
        c.close()
        want = (base, ab)
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
    else:
        b.stop()
    b.start()
    c = kwire.Conn(b.port)
    e, hw, lso, ab, bs = fetch(c, 0, True)
    print("after %s: hw %d lso %d aborted %s" % (how, hw, lso, ab))
    check((lso, ab) == want, "after %s: LSO %d aborted %s, want %s" % (how, lso, ab, want))
    c.close()

c = kwire.Conn(b.port)
check(marker(c, pid, epoch, False, coord_epoch=6) == 0, "abort of C")
e, hw, lso, ab, bs = fetch(c, 0, True)
check(lso == hw and len(ab) == 2 and ab[0] == (pid, 3), "after aborting C: lso %d hw %d %s" % (lso, hw, ab))
c.close()
b.stop()
print("OK")

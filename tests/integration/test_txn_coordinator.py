"""
integration.txn_coordinator - the transaction coordinator of one stratad,
driven by hand on the wire (its requests written here, classic versions and
the flexible ones of DescribeTransactions / ListTransactions):

  - FindCoordinator key type 1 creates __transaction_state (50 partitions,
    compacted) and names this broker;
  - InitProducerId with a transactional id: a producer id at epoch 0; a
    timeout above transaction.max.timeout.ms: INVALID_TRANSACTION_TIMEOUT;
    a second InitProducerId bumps the epoch and the old epoch is fenced
    (PRODUCER_FENCED from v2 of AddPartitionsToTxn, INVALID_PRODUCER_EPOCH
    before); KIP-360's expected id and epoch (v4);
  - AddPartitionsToTxn: the partitions join (DescribeTransactions shows
    them, Ongoing); an unknown topic: UNKNOWN_TOPIC_OR_PARTITION and
    OPERATION_NOT_ATTEMPTED for the rest; AddOffsetsToTxn adds the group's
    __consumer_offsets partition;
  - EndTxn with a wrong epoch: PRODUCER_FENCED / INVALID_PRODUCER_EPOCH;
    with a wrong producer id: INVALID_PRODUCER_ID_MAPPING; with no
    transaction: INVALID_TXN_STATE; a commit: PrepareCommit, then (when
    this broker serves WriteTxnMarkers) CompleteCommit;
  - InitProducerId during a transaction aborts it with the epoch bumped and
    answers CONCURRENT_TRANSACTIONS;
  - a transaction past its timeout is aborted with the epoch bumped;
  - KIP-890 part 1, the partition leader asks the coordinator before a
    transaction's first batch in a partition: a partition not added, and a
    late batch after the commit, are INVALID_TXN_STATE and open no
    transaction (the LSO stays at the high watermark); a producer id the
    transactional id does not have: INVALID_PRODUCER_ID_MAPPING; an old
    epoch: INVALID_PRODUCER_EPOCH; an unknown transactional id:
    INVALID_PRODUCER_ID_MAPPING; a plain producer meanwhile is served;
  - ListTransactions with state filters (an unknown one reported);
  - every change is a record of __transaction_state in Kafka's
    TransactionLogKey / TransactionLogValue v0 formats, read back here;
  - after a restart (SIGTERM, then SIGKILL) the coordinator replays the
    partitions: the same states, epochs and partitions;
  - `strata transactions list` and `describe ID` show what the wire says;
  - transactional.id.expiration.ms: an idle id is removed (a tombstone)
    and stays removed after a restart, an id in use is kept.
"""
import os
import re
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from ktxn import (add_offsets, add_partitions, decode_value, describe, end_txn, fetch_committed,  # noqa: E402
                  find_coordinator, init_pid, list_txns, partition_for, produce_txn, records)
import subprocess  # noqa: E402
from strata_harness import CONFIG, Broker, binary, check  # noqa: E402

TOPIC = "txn-data"
MAX_TIMEOUT = 300000
NAMES = {0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION", 14: "COORDINATOR_LOAD_IN_PROGRESS",
         15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR", 42: "INVALID_REQUEST",
         47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE", 49: "INVALID_PRODUCER_ID_MAPPING",
         50: "INVALID_TRANSACTION_TIMEOUT", 51: "CONCURRENT_TRANSACTIONS", 55: "OPERATION_NOT_ATTEMPTED",
         90: "PRODUCER_FENCED", 105: "TRANSACTIONAL_ID_NOT_FOUND"}


def name(err):
    return "%s (%d)" % (NAMES.get(err, "?"), err)


def expect(err, want, what):
    check(err == want, "%s: %s, expected %s" % (what, name(err), name(want)))
    print("%-60s %s" % (what, name(err)), flush=True)


def state_log(c, tid):
    """Every value written for tid, in log order (None: tombstone)."""
    part = partition_for(tid)
    out, off = [], 0
    while True:
        err, hw, _ls, data = c.fetch("__transaction_state", part, off)
        check(err == 0, "fetch __transaction_state-%d: %s" % (part, name(err)))
        bs = kwire.batches(data)
        if not bs:
            break
        for base, count, b in bs:
            for key, value in records(b):
                kc = kwire.Cursor(key)
                check(kc.take(">h") == 0, "TransactionLogKey version is not 0")
                if kc.string() == tid:
                    out.append(decode_value(value) if value is not None else None)
            off = base + count
        if off >= hw:
            break
    return out


# ---- the test ---------------------------------------------------------------------

b = Broker({"transaction.max.timeout.ms": str(MAX_TIMEOUT),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}).start()
c = kwire.Conn(b.port, timeout=15)
check(c.create_topic(TOPIC, 3) == 0, "create topic")
versions = kwire.api_versions(c)
for key in (24, 25, 26, 65, 66):
    check(key in versions, "ApiVersions does not advertise key %d" % key)
markers_served = 27 in versions
print("WriteTxnMarkers served here: %s" % markers_served, flush=True)

err, node, host, port = find_coordinator(c, "tx-a")
expect(err, 0, "FindCoordinator(1) tx-a")
check(port == b.port, "coordinator port %d, not this broker's %d" % (port, b.port))
terr, tparts = kwire.metadata(c, ["__transaction_state"])["topics"]["__transaction_state"]
check(terr == 0 and len(tparts) == 50, "__transaction_state: error %d, %d partitions" % (terr, len(tparts)))
cerr, cfg = kwire.describe_configs(c, ["__transaction_state"])["__transaction_state"]
check(cerr == 0 and cfg.get("cleanup.policy") == "compact" and cfg.get("min.insync.replicas") == "1" and
      cfg.get("segment.bytes") == "104857600", "__transaction_state configs: %r" % cfg)
print("__transaction_state: 50 partitions, leader of tx-a's (%d): node %d" %
      (partition_for("tx-a"), tparts[partition_for("tx-a")]["leader"]), flush=True)


def init_ok(tid, **kw):
    """InitProducerId, retried while the partition loads."""
    deadline = time.time() + 15
    while True:
        err, pid, epoch = init_pid(c, tid, **kw)
        if err not in (14, 15, 16) or time.time() > deadline:
            return err, pid, epoch
        time.sleep(0.1)


err, pid_a, ep = init_ok("tx-a")
expect(err, 0, "InitProducerId tx-a")
check(ep == 0 and pid_a >= 0, "tx-a got producer %d epoch %d" % (pid_a, ep))
expect(init_pid(c, "tx-x", timeout_ms=MAX_TIMEOUT + 1)[0], 50, "InitProducerId timeout > max")
expect(init_pid(c, "", timeout_ms=1000, version=2)[0], 42, "InitProducerId empty transactional id")

res = add_partitions(c, "tx-a", pid_a, 0, [(TOPIC, [0, 1])])
check(res == {(TOPIC, 0): 0, (TOPIC, 1): 0}, "AddPartitionsToTxn: %r" % res)
print("AddPartitionsToTxn tx-a %s-0,1: NONE" % TOPIC, flush=True)
res = add_partitions(c, "tx-a", pid_a, 0, [(TOPIC, [2]), ("no-such-topic", [0])])
expect(res[("no-such-topic", 0)], 3, "AddPartitionsToTxn unknown topic")
expect(res[(TOPIC, 2)], 55, "AddPartitionsToTxn with it, a known partition")
d = describe(c, ["tx-a", "tx-never"])
check(d["tx-a"]["state"] == "Ongoing" and d["tx-a"]["parts"] == [(TOPIC, 0), (TOPIC, 1)],
      "DescribeTransactions tx-a: %r" % d["tx-a"])
expect(d["tx-never"]["error"], 105, "DescribeTransactions unknown id")

expect(end_txn(c, "tx-a", pid_a, 5, True), 90, "EndTxn v2 wrong epoch")
expect(end_txn(c, "tx-a", pid_a, 5, True, version=1), 47, "EndTxn v1 wrong epoch")
expect(end_txn(c, "tx-a", pid_a + 1000, 0, True), 49, "EndTxn wrong producer id")
expect(end_txn(c, "tx-a", pid_a, 0, True), 0, "EndTxn commit tx-a")
st = describe(c, ["tx-a"])["tx-a"]["state"]
check(st in ("PrepareCommit", "CompleteCommit"), "tx-a after EndTxn: %s" % st)
if st == "PrepareCommit":
    # the markers are still out: a new transaction waits for them
    r = add_partitions(c, "tx-a", pid_a, 0, [(TOPIC, [0])])
    check(r[(TOPIC, 0)] in (0, 51), "AddPartitionsToTxn during PrepareCommit: %r" % r)
    print("AddPartitionsToTxn during PrepareCommit: %s" % name(r[(TOPIC, 0)]), flush=True)
if markers_served:
    deadline = time.time() + 20
    while describe(c, ["tx-a"])["tx-a"]["state"] != "CompleteCommit" and time.time() < deadline:
        time.sleep(0.1)
    check(describe(c, ["tx-a"])["tx-a"]["state"] == "CompleteCommit", "tx-a never completed its commit")
    print("tx-a CompleteCommit (markers written)", flush=True)

# no transaction to end
err, pid_b, _ = init_ok("tx-b")
expect(err, 0, "InitProducerId tx-b")
expect(end_txn(c, "tx-b", pid_b, 0, True), 48, "EndTxn without a transaction")

# fencing: a second InitProducerId bumps the epoch
err, pid_c, ep0 = init_ok("tx-c")
err, pid_c2, ep1 = init_pid(c, "tx-c")
expect(err, 0, "InitProducerId tx-c again")
check(pid_c2 == pid_c and ep1 == ep0 + 1, "tx-c: %d/%d then %d/%d" % (pid_c, ep0, pid_c2, ep1))
expect(add_partitions(c, "tx-c", pid_c, ep0, [(TOPIC, [0])])[(TOPIC, 0)], 90,
       "AddPartitionsToTxn v2 at the fenced epoch")
expect(add_partitions(c, "tx-c", pid_c, ep0, [(TOPIC, [0])], version=1)[(TOPIC, 0)], 47,
       "AddPartitionsToTxn v1 at the fenced epoch")
expect(add_offsets(c, "tx-c", pid_c, ep0, "g1"), 90, "AddOffsetsToTxn at the fenced epoch")
# KIP-360: the producer's own id and epoch bump it; a stale epoch is fenced
err, pid_c3, ep2 = init_pid(c, "tx-c", timeout_ms=MAX_TIMEOUT, pid=pid_c, epoch=ep1)
expect(err, 0, "InitProducerId v4 with its id and epoch")
check(pid_c3 == pid_c and ep2 == ep1 + 1, "KIP-360 bump: %d/%d" % (pid_c3, ep2))
expect(init_pid(c, "tx-c", pid=pid_c, epoch=ep0)[0], 90, "InitProducerId v4 with a stale epoch")
expect(init_pid(c, "tx-c", pid=pid_c + 77, epoch=ep2)[0], 90, "InitProducerId v4 with another id")
expect(init_pid(c, "tx-c", pid=pid_c, epoch=ep0, version=3)[0], 47, "InitProducerId v3 with a stale epoch")

# AddOffsetsToTxn: the group's __consumer_offsets partition joins
expect(add_offsets(c, "tx-c", pid_c, ep2, "g1"), 0, "AddOffsetsToTxn tx-c g1")
parts = describe(c, ["tx-c"])["tx-c"]["parts"]
check(parts == [("__consumer_offsets", partition_for("g1"))], "tx-c partitions: %r" % parts)

# InitProducerId during a transaction: aborted with the epoch bumped
err, pid_d, epd = init_ok("tx-d")
check(add_partitions(c, "tx-d", pid_d, epd, [(TOPIC, [1])]) == {(TOPIC, 1): 0}, "tx-d add")
expect(init_pid(c, "tx-d")[0], 51, "InitProducerId during a transaction")
dd = describe(c, ["tx-d"])["tx-d"]
check(dd["state"] in ("PrepareAbort", "CompleteAbort") and dd["epoch"] == epd + 1,
      "tx-d after the fence: %r" % dd)
expect(end_txn(c, "tx-d", pid_d, epd, True), 90, "EndTxn of the fenced producer")
if markers_served:
    deadline = time.time() + 20
    while True:
        err, _p, e2 = init_pid(c, "tx-d")
        if err != 51 or time.time() > deadline:
            break
        time.sleep(0.1)
    expect(err, 0, "InitProducerId tx-d once the abort completed")
    check(e2 == epd + 2, "tx-d epoch %d after the fence and the retry" % e2)

# a transaction past its timeout is aborted (epoch bumped)
err, pid_e, epe = init_ok("tx-e", timeout_ms=1000)
check(add_partitions(c, "tx-e", pid_e, epe, [(TOPIC, [2])]) == {(TOPIC, 2): 0}, "tx-e add")
deadline = time.time() + 10
while describe(c, ["tx-e"])["tx-e"]["state"] == "Ongoing" and time.time() < deadline:
    time.sleep(0.1)
de = describe(c, ["tx-e"])["tx-e"]
check(de["state"] in ("PrepareAbort", "CompleteAbort") and de["epoch"] == epe + 1,
      "tx-e after its timeout: %r" % de)
print("tx-e timed out: %s at epoch %d" % (de["state"], de["epoch"]), flush=True)
expect(end_txn(c, "tx-e", pid_e, epe, True), 90, "EndTxn after the timeout abort")

# with data, when the partition leader writes markers: an aborted and a
# committed transaction in txn-data-2, then a read_committed fetch
if markers_served:
    out = {}
    for tid, commit in (("tx-f", False), ("tx-g", True)):
        err, pid, ep = init_ok(tid)
        check(add_partitions(c, tid, pid, ep, [(TOPIC, [2])]) == {(TOPIC, 2): 0}, "%s add" % tid)
        batch = kwire.record_batch([b"%s-%d" % (tid.encode(), i) for i in range(3)], producer_id=pid,
                                   producer_epoch=ep, base_sequence=0, transactional=True)
        perr, base = produce_txn(c, tid, TOPIC, 2, batch)
        check(perr == 0, "transactional produce %s: %s" % (tid, name(perr)))
        expect(end_txn(c, tid, pid, ep, commit), 0, "EndTxn %s %s (3 records at %d)" %
               ("commit" if commit else "abort", tid, base))
        want = "CompleteCommit" if commit else "CompleteAbort"
        deadline = time.time() + 20
        while describe(c, [tid])[tid]["state"] != want and time.time() < deadline:
            time.sleep(0.05)
        check(describe(c, [tid])[tid]["state"] == want, "%s never reached %s" % (tid, want))
        out[tid] = (pid, base)
    err, hw, lso, aborted, data = fetch_committed(c, TOPIC, 2, 0)
    check(err == 0 and lso == hw, "read_committed fetch: %s, high watermark %d, LSO %d" % (name(err), hw, lso))
    check((out["tx-f"][0], out["tx-f"][1]) in [tuple(a) for a in aborted],
          "tx-f (producer %d at %d) not among the aborted transactions %r" % (out["tx-f"][0], out["tx-f"][1], aborted))
    check(all(a[0] != out["tx-g"][0] for a in aborted), "the committed tx-g is listed as aborted: %r" % aborted)
    ctrl = [bb for bb in kwire.batches(data) if struct.unpack_from(">h", bb[2], 21)[0] & 0x20]
    # tx-e's timed-out transaction had txn-data-2 too: its abort marker
    # comes first (it wrote no data, so it is no aborted transaction)
    check(len(ctrl) == 3, "txn-data-2 has %d control batches (markers), expected 3" % len(ctrl))
    print("txn-data-2 read_committed: LSO %d = high watermark, aborted %r, %d markers" % (lso, aborted, len(ctrl)),
          flush=True)

# KIP-890: the leader verifies a transaction's first batch in a partition
err, pid_h, eph = init_ok("tx-h")
expect(err, 0, "InitProducerId tx-h")


def h_batch(seq, pid=None, epoch=None):
    return kwire.record_batch([b"h-%d" % seq], producer_id=pid_h if pid is None else pid,
                              producer_epoch=eph if epoch is None else epoch, base_sequence=seq,
                              transactional=True)


expect(produce_txn(c, "tx-h", TOPIC, 1, h_batch(0))[0], 48,
       "transactional produce to a partition not added")
check(add_partitions(c, "tx-h", pid_h, eph, [(TOPIC, [1])]) == {(TOPIC, 1): 0}, "tx-h add")
expect(produce_txn(c, "tx-h", TOPIC, 0, h_batch(0))[0], 48,
       "transactional produce to another partition than the one added")
expect(produce_txn(c, "tx-h", TOPIC, 1, h_batch(0, pid=pid_b))[0], 49,
       "transactional produce with another id's producer id")
expect(produce_txn(c, "tx-h", TOPIC, 1, h_batch(0, epoch=eph + 3))[0], 47,
       "transactional produce at another epoch")
expect(produce_txn(c, "tx-nobody", TOPIC, 1, h_batch(0))[0], 49,
       "transactional produce for an unknown transactional id")
_i, perr, _b = c.produce(TOPIC, 1, kwire.record_batch([b"plain"]))
expect(perr, 0, "a plain produce to the partition meanwhile")
perr, base_h = produce_txn(c, "tx-h", TOPIC, 1, h_batch(0))
expect(perr, 0, "transactional produce to the partition added")
perr, base_h2 = produce_txn(c, "tx-h", TOPIC, 1, h_batch(1))
expect(perr, 0, "its second batch (the transaction is open there: no verification)")
expect(end_txn(c, "tx-h", pid_h, eph, True), 0, "EndTxn commit tx-h")
deadline = time.time() + 20
while describe(c, ["tx-h"])["tx-h"]["state"] != "CompleteCommit" and time.time() < deadline:
    time.sleep(0.05)
check(describe(c, ["tx-h"])["tx-h"]["state"] == "CompleteCommit", "tx-h never completed")
# a batch of the committed transaction arriving late (a retry delayed in
# the network): without verification it would open a transaction nobody
# ends, holding the LSO of the partition for good
expect(produce_txn(c, "tx-h", TOPIC, 1, h_batch(2))[0], 48, "a late batch after the commit")
err, hw, lso, _ab, _d = fetch_committed(c, TOPIC, 1, 0)
check(err == 0 and lso == hw, "after the late batch: LSO %d, high watermark %d" % (lso, hw))
print("KIP-890: txn-data-1 LSO %d = high watermark after the late batch" % lso, flush=True)

# ListTransactions
err, unknown, txns = list_txns(c)
expect(err, 0, "ListTransactions")
check(set(txns) >= {"tx-a", "tx-b", "tx-c", "tx-d", "tx-e"}, "ListTransactions: %r" % txns)
txns = {k: v for k, v in txns.items() if k not in ("tx-f", "tx-g", "tx-h")}
err, unknown, ongoing = list_txns(c, states=["Ongoing", "Bogus"])
check(unknown == ["Bogus"] and set(ongoing) == {"tx-c"}, "ListTransactions Ongoing: %r %r" % (unknown, ongoing))
err, _u, by_pid = list_txns(c, pids=[pid_b])
check(set(by_pid) == {"tx-b"}, "ListTransactions by producer id: %r" % by_pid)
print("ListTransactions: %s" % sorted((k, v[1]) for k, v in txns.items()), flush=True)

# the records
log_a = state_log(c, "tx-a")
seq = [v["status"] for v in log_a]
print("tx-a in __transaction_state: %s" % seq, flush=True)
check(seq[:3] == ["Empty", "Ongoing", "PrepareCommit"], "tx-a records: %r" % seq)
check(log_a[1]["parts"] == [(TOPIC, 0), (TOPIC, 1)] and log_a[1]["pid"] == pid_a and log_a[1]["start"] > 0,
      "tx-a Ongoing record: %r" % log_a[1])
check(log_a[0]["timeout"] == 10000 and log_a[0]["epoch"] == 0, "tx-a Empty record: %r" % log_a[0])
if markers_served:
    check(seq[3] == "CompleteCommit" and log_a[3]["parts"] == [], "tx-a complete record: %r" % log_a[3:])
log_e = [v["status"] for v in state_log(c, "tx-e")]
check(log_e[:3] == ["Empty", "Ongoing", "PrepareAbort"], "tx-e records: %r" % log_e)

# restart: the state is replayed
before = describe(c, ["tx-a", "tx-b", "tx-c", "tx-d", "tx-e"])
for how in ("SIGTERM", "SIGKILL"):
    c.close()
    if how == "SIGTERM":
        check(b.stop() == 0, "stratad did not stop cleanly")
    else:
        b.kill()
    b.start()
    c = kwire.Conn(b.port, timeout=15)
    deadline = time.time() + 20
    while True:
        after = describe(c, list(before))
        if all(v["error"] not in (14, 16) for v in after.values()) or time.time() > deadline:
            break
        time.sleep(0.1)
    for tid, want in before.items():
        got = after[tid]
        same = {k: got[k] for k in ("error", "pid", "epoch", "parts", "timeout")} == \
            {k: want[k] for k in ("error", "pid", "epoch", "parts", "timeout")}
        # transactions completing may have completed meanwhile
        st_ok = got["state"] == want["state"] or (want["state"], got["state"]) in (
            ("PrepareCommit", "CompleteCommit"), ("PrepareAbort", "CompleteAbort"))
        check(same and st_ok, "after %s, %s: %r, before %r" % (how, tid, got, want))
    print("after %s restart: every transactional id replayed (%s)" %
          (how, ", ".join("%s %s@%d" % (t, v["state"], v["epoch"]) for t, v in sorted(after.items()))),
          flush=True)
    before = after



def strata(*verb):
    p = subprocess.run([binary("strata"), "transactions", "--config", CONFIG, "--bootstrap", b.bootstrap] +
                       list(verb), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


rc, out, err = strata("list")
print(out, end="", flush=True)
check(rc == 0, "strata transactions list: rc %d %s" % (rc, err))
rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[1:]}
for tid, v in before.items():
    check(tid in rows and rows[tid][2] == str(v["pid"]) and rows[tid][3] == v["state"],
          "strata transactions list: %s is %r, the wire says %r" % (tid, rows.get(tid), v))
rc, out, err = strata("describe", "tx-c")
print(out, end="", flush=True)
check(rc == 0 and "producer epoch    %d" % before["tx-c"]["epoch"] in out and
      "__consumer_offsets-%d" % partition_for("g1") in out, "strata transactions describe tx-c: %s %s" % (out, err))
rc, out, err = strata("describe", "tx-none")
check(rc == 1 and "does not exist" in err, "describe of an unknown id: rc %d, %s" % (rc, err))
rc, out, err = strata("describe")
check(rc == 2, "describe without an id: rc %d" % rc)

err, p4, e4 = init_ok("tx-c")
expect(err, 51 if before["tx-c"]["state"] == "Ongoing" else 0, "InitProducerId tx-c after the restarts")
c.close()
check(b.stop() == 0, "stratad did not stop cleanly")
check(not re.search(r"(ERROR|WARNING): (AddressSanitizer|LeakSanitizer)|runtime error: ", b.log_text()),
      "a sanitizer report in stratad's log:\n" + b.log_tail())
b.cleanup()

# transactional.id.expiration.ms: an idle id goes, with a tombstone, and
# stays gone after a restart
b = Broker({"transactional.id.expiration.ms": "1500",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}).start()
c = kwire.Conn(b.port, timeout=15)
expect(find_coordinator(c, "tx-idle")[0], 0, "FindCoordinator(1) tx-idle")
expect(init_ok("tx-idle")[0], 0, "InitProducerId tx-idle")
expect(init_ok("tx-busy")[0], 0, "InitProducerId tx-busy")
deadline = time.time() + 15
while time.time() < deadline:
    init_pid(c, "tx-busy")  # an update: not idle
    if describe(c, ["tx-idle"])["tx-idle"]["error"] == 105:
        break
    time.sleep(0.3)
expect(describe(c, ["tx-idle"])["tx-idle"]["error"], 105, "DescribeTransactions tx-idle after its expiry")
expect(describe(c, ["tx-busy"])["tx-busy"]["error"], 0, "DescribeTransactions tx-busy (kept updating)")
log_idle = state_log(c, "tx-idle")
check(log_idle[-1] is None and log_idle[0]["status"] == "Empty", "tx-idle records: %r" % log_idle)
print("tx-idle in __transaction_state: %s" % [v and v["status"] for v in log_idle], flush=True)
c.close()
check(b.stop() == 0, "stratad did not stop cleanly")
b.start()
c = kwire.Conn(b.port, timeout=15)
d = None
deadline = time.time() + 15
while time.time() < deadline:
    d = describe(c, ["tx-idle"])["tx-idle"]
    if d["error"] not in (14, 16):
        break
    time.sleep(0.1)
expect(d["error"], 105, "DescribeTransactions tx-idle after a restart")
c.close()
check(b.stop() == 0, "stratad did not stop cleanly")
b.cleanup()
print("OK", flush=True)

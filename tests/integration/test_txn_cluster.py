"""
integration.txn_cluster - the transaction coordinator in a cluster of three
combined nodes (requests by hand, ktxn.py):

  - FindCoordinator key type 1 creates __transaction_state with
    replication factor 3 and min.insync.replicas 2 and names the leader of
    the id's partition;
  - a transaction writes to three partitions of a replicated topic, led by
    different nodes; the coordinator is killed (SIGKILL) while it is
    Ongoing; the new leader of the id's __transaction_state partition
    replays it (the same producer, epoch and partitions), commits it on
    EndTxn and writes the markers to every partition's leader, remote ones
    included: read_committed shows the data, LSO = high watermark;
  - the killed node comes back; a second transaction is aborted after its
    coordinator is killed again: read_committed lists it as aborted in
    every partition it wrote;
  - a third is committed while the leader of one of its partitions (a node
    that holds no replica of the id's __transaction_state partition) is
    stopped (SIGSTOP): the transaction stays PrepareCommit, its marker
    there unanswered; the coordinator is killed (and the stopped node
    continued); the new coordinator replays PrepareCommit, sends the
    markers again to the partitions' leaders now and completes the commit.
"""
import signal
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from ktxn import (add_partitions, describe, end_txn, fetch_committed, find_coordinator, init_pid,  # noqa: E402
                  partition_for, produce_txn)
from strata_harness import Cluster, check  # noqa: E402

TOPIC = "txn-cl"
TID = "tx-cluster"
RETRY = (6, 14, 15, 16)  # NOT_LEADER, LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR

# __transaction_state on two of the three nodes, so that the third can
# lead data partitions without holding the coordinator's log; a session
# timeout longer than a controller election (the stopped node may be the
# active controller: the others must not be fenced meanwhile)
cl = Cluster(3, overrides={"broker.session.timeout.ms": 6000, "broker.heartbeat.interval.ms": 500,
                           "transaction.state.log.replication.factor": 2,
                           "transaction.state.log.min.isr": 1})
cl.up()


def any_conn():
    for i in cl.live():
        try:
            return cl.conn(i, timeout=10)
        except OSError:
            pass
    check(False, "no node answers")


def coordinator(not_node=None, timeout=60):
    """The node FindCoordinator(1) names for TID (another than not_node)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = any_conn()
            err, node, _host, port = find_coordinator(c, TID)
            c.close()
            if err == 0 and node != not_node and cl.alive(node):
                return node
        except (OSError, ConnectionError):
            pass
        time.sleep(0.2)
    check(False, "no coordinator for %s (other than %s)" % (TID, not_node))


def retried(fn, what, timeout=60):
    deadline = time.time() + timeout
    while True:
        try:
            r = fn()
        except (OSError, ConnectionError) as e:
            r = e
        err = r[0] if isinstance(r, tuple) else r
        if isinstance(err, int) and err not in RETRY:
            return r
        if time.time() > deadline:
            check(False, "%s: still %r" % (what, r))
        time.sleep(0.2)


def leaders():
    m = cl.metadata(cl.live()[0], [TOPIC])
    return {p: d["leader"] for p, d in m["topics"][TOPIC][1].items()}


c = any_conn()
check(c.create_topic(TOPIC, 3, rf=3) == 0, "create topic")
c.close()
cl.wait(lambda: all(v in cl.ids() for v in leaders().values()), 30, "leaders for %s" % TOPIC)


def write_txn(value):
    """InitProducerId at the coordinator, the three partitions added, a
    transactional batch to each partition's leader: (pid, epoch, bases)."""
    x = coordinator()
    cx = cl.conn(x, timeout=10)
    err, pid, ep = retried(lambda: init_pid(cx, TID), "InitProducerId")
    check(err == 0, "InitProducerId: %d" % err)
    # KIP-890: before the partitions are added, a leader that is not the
    # coordinator asks it (AddPartitionsToTxn v4) and refuses the batch
    remote = [(p, n) for p, n in leaders().items() if n != x]
    if remote:
        p, n = remote[0]
        cp = cl.conn(n, timeout=10)
        early = kwire.record_batch([b"early"], producer_id=pid, producer_epoch=ep, base_sequence=0,
                                   transactional=True)
        r = retried(lambda: (lambda e: (e[0] if e[0] != 19 else 15,))(produce_txn(cp, TID, TOPIC, p, early)),
                    "early produce")
        check(r[0] == 48, "a batch to %s-%d at node %d (coordinator %d) before AddPartitionsToTxn: %d, "
              "want INVALID_TXN_STATE 48" % (TOPIC, p, n, x, r[0]))
        print("%s-%d at node %d, before the partition was added: INVALID_TXN_STATE from coordinator %d" %
              (TOPIC, p, n, x), flush=True)
        cp.close()
    res = retried(lambda: (max(add_partitions(cx, TID, pid, ep, [(TOPIC, [0, 1, 2])]).values()),), "add")
    check(res[0] == 0, "AddPartitionsToTxn: %r" % (res,))
    cx.close()
    bases = {}
    for p, leader in leaders().items():
        cp = cl.conn(leader, timeout=10)
        batch = kwire.record_batch([b"%s-%d" % (value, p)], producer_id=pid, producer_epoch=ep, base_sequence=0,
                                   transactional=True)
        err, bases[p] = produce_txn(cp, TID, TOPIC, p, batch)
        check(err == 0, "transactional produce to %s-%d at node %d: %d" % (TOPIC, p, leader, err))
        cp.close()
    print("%s: producer %d epoch %d wrote %s-0..2 (leaders %r) through coordinator %d" %
          (value.decode(), pid, ep, TOPIC, leaders(), x), flush=True)
    return x, pid, ep, bases


def isr_full():
    """Every replica in sync: the id's __transaction_state partition and
    the data partitions (a kill then leaves an in-sync replica to lead)."""
    m = cl.metadata(cl.live()[0], ["__transaction_state", TOPIC])
    parts = [m["topics"]["__transaction_state"][1][partition_for(TID)]]
    parts += list(m["topics"][TOPIC][1].values())
    return all(sorted(d["isr"]) == sorted(d["replicas"]) and d["leader"] >= 0 for d in parts)


def kill_and_end(x, pid, ep, commit):
    cl.wait(isr_full, 60, "every replica in sync before the kill")
    cl.kill(x)
    y = coordinator(not_node=x)
    cy = cl.conn(y, timeout=10)
    d = retried(lambda: (describe(cy, [TID])[TID]["error"],), "describe at the new coordinator")
    d = describe(cy, [TID])[TID]
    check(d["state"] == "Ongoing" and d["pid"] == pid and d["epoch"] == ep and
          d["parts"] == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)], "replayed at node %d: %r" % (y, d))
    print("coordinator %d killed; node %d replayed %s: %s at epoch %d, %d partitions" %
          (x, y, TID, d["state"], d["epoch"], len(d["parts"])), flush=True)
    err = retried(lambda: end_txn(cy, TID, pid, ep, commit), "EndTxn")
    check(err == 0, "EndTxn at node %d: %d" % (y, err))
    want = "CompleteCommit" if commit else "CompleteAbort"
    cl.wait(lambda: describe(cy, [TID])[TID]["state"] == want, 60, "%s reaching %s" % (TID, want))
    print("EndTxn %s at node %d: %s (markers to leaders %r)" % ("commit" if commit else "abort", y, want,
                                                               leaders()), flush=True)
    cy.close()
    return y


def read_committed(p):
    leader = leaders()[p]
    cp = cl.conn(leader, timeout=10)
    r = fetch_committed(cp, TOPIC, p, 0)
    cp.close()
    return r


x, pid, ep, bases1 = write_txn(b"first")
kill_and_end(x, pid, ep, True)
for p in range(3):
    err, hw, lso, aborted, data = read_committed(p)
    check(err == 0 and lso == hw and not aborted, "%s-%d: err %d hw %d lso %d aborted %r" % (TOPIC, p, err, hw, lso,
                                                                                          aborted))
    check(b"first-%d" % p in data, "%s-%d: the committed record is not read" % (TOPIC, p))
print("read_committed: the committed records in every partition, LSO = high watermark", flush=True)

cl.restart(x)
x2, pid2, ep2, bases2 = write_txn(b"second")
check(pid2 == pid and ep2 == ep + 1, "the second InitProducerId: %d/%d after %d/%d" % (pid2, ep2, pid, ep))
kill_and_end(x2, pid2, ep2, False)
for p in range(3):
    cl.wait(lambda: read_committed(p)[0] == 0, 30, "a leader for %s-%d" % (TOPIC, p))
    err, hw, lso, aborted, data = read_committed(p)
    check(lso == hw and [pid2, bases2[p]] in [list(a) for a in aborted],
          "%s-%d: lso %d hw %d aborted %r (want %d at %d)" % (TOPIC, p, lso, hw, aborted, pid2, bases2[p]))
print("read_committed: the aborted transaction listed in every partition", flush=True)
cl.restart(x2)
cl.wait_stable(timeout=60)

# the third: its coordinator dies while a marker is unanswered.  A
# transactional id whose __transaction_state replicas leave out a node
# that leads a data partition and is not the active controller (stopping
# that one would stall the whole cluster's metadata meanwhile)
m = cl.metadata(cl.live()[0], ["__transaction_state"])
ctl = cl.wait_leader()
lead = set(leaders().values())
for k in range(500):
    TID = "tx-cluster-%d" % k
    tpart = m["topics"]["__transaction_state"][1][partition_for(TID)]
    out = [n for n in cl.ids() if n not in tpart["replicas"]]
    if len(out) == 1 and out[0] != ctl and out[0] in lead:
        stopped = out[0]
        break
else:
    check(False, "no transactional id fits (controller %r, leaders %r)" % (ctl, lead))
print("%s: __transaction_state-%d on %r, node %d to stop (the controller is %d)" %
      (TID, partition_for(TID), tpart["replicas"], stopped, ctl), flush=True)
cl.wait(isr_full, 60, "every replica in sync")
x3, pid3, ep3, bases3 = write_txn(b"third")
check(x3 != stopped, "coordinator %d is the node to stop" % x3)
os.kill(cl.pid(stopped), signal.SIGSTOP)
c3 = cl.conn(x3, timeout=40)
check(end_txn(c3, TID, pid3, ep3, True) == 0, "EndTxn commit with node %d stopped" % stopped)
time.sleep(9.0)  # node `stopped` is fenced meanwhile (6 s): its partitions have other leaders
st = describe(c3, [TID])[TID]["state"]
check(st == "PrepareCommit", "with node %d stopped the transaction is %s, not PrepareCommit" % (stopped, st))
print("node %d stopped: %s stays PrepareCommit at coordinator %d" % (stopped, TID, x3), flush=True)
c3.close()
m = cl.metadata(x3, ["__transaction_state"])
tp_now = m["topics"]["__transaction_state"][1][partition_for(TID)]
check(sorted(tp_now["isr"]) == sorted(tpart["replicas"]),
      "__transaction_state-%d is not fully in sync before the kill: %r" % (partition_for(TID), tp_now))
# the coordinator dies; the stopped node goes on (two of the three
# controllers are needed to move the coordinator's partition)
cl.kill(x3)
os.kill(cl.pid(stopped), signal.SIGCONT)
y3 = coordinator(not_node=x3, timeout=90)
cy = cl.conn(y3, timeout=10)
cl.wait(lambda: describe(cy, [TID])[TID]["state"] == "CompleteCommit", 90,
        "%s completing its commit at node %d" % (TID, y3))
print("coordinator %d killed: node %d replayed PrepareCommit and completed the commit" % (x3, y3), flush=True)
cy.close()
for p in range(3):
    cl.wait(lambda: read_committed(p)[0] == 0, 30, "a leader for %s-%d" % (TOPIC, p))
    err, hw, lso, aborted, data = read_committed(p)
    check(lso == hw and b"third-%d" % p in data, "%s-%d after the resumed commit: lso %d hw %d" % (TOPIC, p, lso, hw))
print("read_committed: the third transaction in every partition", flush=True)
cl.restart(x3)
reports = cl.sanitizer_reports()
check(not reports, "sanitizer reports: %r" % reports)
bad = [i for i in cl.ids() if re.search(r" ERROR ", cl.log_text(i) or "")]
print("nodes with ERROR lines: %r" % bad, flush=True)
cl.cleanup()
print("OK", flush=True)

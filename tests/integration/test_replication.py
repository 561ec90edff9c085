"""
integration.replication - partitions replicated over three combined nodes.

1. Leader kills.  rdk_acked_producer (librdkafka, acks=all, retrying)
   writes numbered messages to a topic of 3 partitions, replication factor
   3, min.insync.replicas 2, and records every acknowledgement.  The
   leader of one of the partitions (a different one each round) is killed
   with SIGKILL; the test waits until a survivor leads it at a higher
   leader epoch, starts the killed node again and waits until every
   partition's ISR is whole.  STRATA_REPL_KILLS rounds (default 6, about
   40 s; STRATA_REPL_KILLS=50 is the 50-kill run, about 4 minutes, too
   long for every CI run: run the script by hand).  Then:
     - every partition holds offsets 0..n-1 once, each value intact, and
       every acknowledged message is at its acknowledged offset (kcat);
     - the three replicas of each partition hold the same batches byte
       for byte (from the highest local log start: a node that comes back
       behind what the leader tiered starts its local log at the bucket's
       end);
     - each failover's time, kill to new leader, is printed.
2. ISR shrink and min.insync.replicas.  A topic with replication factor 2,
   min.insync.replicas 2: its follower is stopped (SIGSTOP); the leader
   drops it from the ISR after replica.lag.time.max.ms, and then acks=all
   writes are refused with NOT_ENOUGH_REPLICAS while acks=1 ones are
   taken; once the follower runs again it catches up, rejoins the ISR,
   acks=all is taken again, and its log equals the leader's.
   OffsetForLeaderEpoch on the leader names where each epoch its log holds
   ends (the first offset of the next one) and the current one at the log
   end; a follower refuses a consumer's (NOT_LEADER_OR_FOLLOWER).
3. Bad input, each answered with Kafka's error while the rest carries on:
     - a produce to a follower: NOT_LEADER_OR_FOLLOWER;
     - a follower fetch from a replica id that is not a replica:
       NOT_LEADER_OR_FOLLOWER (no leader epoch given) / UNKNOWN_LEADER_EPOCH;
     - a follower fetch with a leader epoch older than the leader's:
       FENCED_LEADER_EPOCH;
     - AlterPartition with a stale partition epoch: INVALID_UPDATE_VERSION;
       from a broker that does not lead the partition: INVALID_REQUEST; at an
       old leader epoch: FENCED_LEADER_EPOCH.
"""
import os
import signal
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import (Cluster, check, check_acked_topic, kcat,  # noqa: E402
                            read_ack_file)

KILLS = int(os.environ.get("STRATA_REPL_KILLS", "6"))
SIZE = 60
TOPIC, PARTS = "repl", 3
E_NOT_LEADER, E_NOT_ENOUGH, E_FENCED, E_UNKNOWN_EPOCH = 6, 19, 74, 75
E_INVALID_REQUEST, E_INVALID_UPDATE_VERSION = 42, 95

cl = Cluster(3, overrides={
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
    "replica.lag.time.max.ms": "1500",
    "log.segment.bytes": "131072",
})


class Bootstrap:
    """What kcat() wants of a broker."""

    def __init__(self, nodes=None):
        self.bootstrap = cl.bootstrap(nodes)


partition_state = cl.partition_state
leader_epoch = cl.leader_epoch
wait_isr = cl.wait_isr
replica_batches = cl.replica_batches
wait_same_replicas = cl.wait_same_replicas
produce_one = cl.produce_one


def offset_for_epoch(node, topic, p, epoch, replica_id=-1, current=-1):
    """OffsetForLeaderEpoch v3 of one partition: (error, epoch, end offset)."""
    body = struct.pack(">ii", replica_id, 1) + kwire.kstr(topic) + struct.pack(">iiii", 1, p, current, epoch)
    c = cl.conn(node)
    try:
        r = c.call(23, 3, body)
        r.take(">i")
        check(r.take(">i") == 1, "one topic")
        r.string()
        check(r.take(">i") == 1, "one partition")
        err, _idx, ep, end = r.take(">hiiq")
        return err, ep, end
    finally:
        c.close()


def epoch_starts(node, topic, p):
    """{leader epoch: first offset} from node's local batches."""
    out = {}
    for base, b in sorted(replica_batches(node, topic, p).items()):
        ep = struct.unpack_from(">i", b, 12)[0]
        out.setdefault(ep, base)
    return out


def fetch_v11(node, topic, p, offset, replica_id, leader_epoch=-1):
    """Fetch v11 of one partition as replica replica_id: (error, hw)."""
    c = cl.conn(node)
    try:
        r = kwire.fetch_v11(c, topic, p, offset, replica_id=replica_id, leader_epoch=leader_epoch, max_wait=0)
        return r["error"], r["hw"]
    finally:
        c.close()


def alter_partition(node, broker, topic, p, leader_epoch, partition_epoch, isr):
    """AlterPartition v1 (topic names): the partition's error."""
    u, cs = kwire.uvarint, kwire.compact_str
    body = struct.pack(">iq", broker, -1) + u(2) + cs(topic) + u(2)
    body += struct.pack(">ii", p, leader_epoch) + u(len(isr) + 1) + b"".join(struct.pack(">i", b) for b in isr)
    body += struct.pack(">bi", 0, partition_epoch) + b"\x00" + b"\x00" + b"\x00"
    c = cl.conn(node)
    try:
        r = kwire.flex_call(c, 56, 1, body)
        _thr, err = r.take(">ih")
        if err:
            return err
        check(r.uvarint() == 2, "one topic")
        r.compact_string()
        check(r.uvarint() == 2, "one partition")
        _idx, perr = r.take(">ih")
        return perr
    finally:
        c.close()


try:
    cl.up(timeout=90)
    c = cl.conn(1)
    check(c.create_topic(TOPIC, PARTS, rf=3, configs={"min.insync.replicas": "2"}) == 0, "create %s" % TOPIC)
    c.close()
    wait_isr(TOPIC, PARTS, 3)

    # ---- 1. leader kills under an acks=all producer
    ackfile = os.path.join(tempfile.mkdtemp(prefix="strata-repl-"), "acks")
    prod = cl.acked_producer(TOPIC, PARTS, SIZE, ackfile, "-X", "batch.size=65536")
    time.sleep(1.5)
    times = []
    for k in range(KILLS):
        p = k % PARTS
        st = partition_state(TOPIC, p)
        old = st["leader"]
        epoch0 = leader_epoch(TOPIC, p, old)
        cl.kill(old)
        t0 = time.time()
        survivors = [i for i in cl.ids() if i != old]

        def moved():
            s = partition_state(TOPIC, p, survivors)
            return s is not None and s["leader"] in survivors
        cl.wait(moved, 30, "a survivor to lead %s-%d after node %d was killed" % (TOPIC, p, old))
        times.append(time.time() - t0)
        new = partition_state(TOPIC, p, survivors)["leader"]
        epoch1 = leader_epoch(TOPIC, p, new)
        check(epoch1 is not None and epoch0 is not None and epoch1 > epoch0,
              "%s-%d: the new leader %d is at epoch %s, the old one was at %s" % (TOPIC, p, new, epoch1, epoch0))
        cl.restart(old, timeout=90)
        wait_isr(TOPIC, PARTS, 3)
        print("kill %d: node %d led %s-%d at epoch %d; node %d leads it at epoch %d after %.2f s" %
              (k + 1, old, TOPIC, p, epoch0, new, epoch1, times[-1]), flush=True)
    time.sleep(1)
    prod.send_signal(signal.SIGTERM)
    out = prod.communicate(timeout=60)[0].decode(errors="replace").strip()
    print("producer: %s" % out.splitlines()[-1] if out else "producer: (no output)", flush=True)
    check(prod.returncode == 0 and "produced" in out, "the producer ran to the end: %s" % out)
    acks = read_ack_file(ackfile)
    check(len(acks) > 0, "the producer had acknowledgements")
    counts = check_acked_topic(Bootstrap(), TOPIC, PARTS, SIZE, acks, "after %d leader kills" % KILLS)
    for p in range(PARTS):
        n, start = wait_same_replicas(TOPIC, p, cl.ids())
        print("%s-%d: %d records; the 3 replicas hold the same %d bytes of batches from offset %d" %
              (TOPIC, p, counts[p], n, start), flush=True)
    # OffsetForLeaderEpoch (KIP-320): where each epoch ends on the leader
    st = partition_state(TOPIC, 0)
    starts = epoch_starts(st["leader"], TOPIC, 0)
    eps = sorted(starts)
    for a, b in zip(eps, eps[1:]):
        got = offset_for_epoch(st["leader"], TOPIC, 0, a)
        check(got == (0, a, starts[b]), "OffsetForLeaderEpoch of epoch %d: %s, the log says it ends at %d" % (a, got, starts[b]))
    cur = leader_epoch(TOPIC, 0, st["leader"])
    err, ep, end = offset_for_epoch(st["leader"], TOPIC, 0, cur, current=cur)
    leo = cl.conn(st["leader"]).list_offsets(TOPIC, 0, -1)[1]
    check((err, ep, end) == (0, cur, leo), "OffsetForLeaderEpoch of the current epoch: %s, log end %d" % ((err, ep, end), leo))
    fol = [r for r in st["replicas"] if r != st["leader"]][0]
    check(offset_for_epoch(fol, TOPIC, 0, cur)[0] == E_NOT_LEADER, "OffsetForLeaderEpoch from a consumer at a follower")
    print("OffsetForLeaderEpoch on %s-0: epochs %s end where the next starts; the current one (%d) at the "
          "log end %d" % (TOPIC, eps, cur, leo), flush=True)
    print("%d acknowledged records, none lost; failover (kill to new leader) median %.2f s, max %.2f s "
          "(broker.session.timeout.ms 2500)" % (len(acks), statistics.median(times), max(times)), flush=True)

    # ---- 2. ISR shrink to 1 with min.insync.replicas 2
    c = cl.conn(1)
    check(c.create_topic("isr2", 1, rf=2, configs={"min.insync.replicas": "2"}) == 0, "create isr2")
    c.close()
    wait_isr("isr2", 1, 2)
    st = partition_state("isr2", 0)
    lead, follower = st["leader"], [r for r in st["replicas"] if r != st["leader"]][0]
    # the first write may meet a follower that has not yet fetched the new
    # partition (its fetch came before the leader had it): retried as a
    # client retries a retriable error
    deadline = time.time() + 20
    while True:
        r = produce_one(lead, "isr2", 0, -1)
        if r[1] not in (3, 5, 6, 7) or time.time() > deadline:
            break
        print("first acks=all write to isr2: error %d, retrying" % r[1], flush=True)
        time.sleep(0.2)
    check(r[1] == 0, "acks=all with the whole ISR: error %d" % r[1])
    os.kill(cl.pid(follower), signal.SIGSTOP)
    try:
        t0 = time.time()
        cl.wait(lambda: len((partition_state("isr2", 0, [lead]) or {}).get("isr", [0, 0])) == 1, 30,
                "the leader to drop the stopped follower %d from the ISR" % follower)
        shrink = time.time() - t0
        r = produce_one(lead, "isr2", 0, -1)
        check(r[1] == E_NOT_ENOUGH, "acks=all with ISR 1 < min.insync.replicas 2: error %d" % r[1])
        r1 = produce_one(lead, "isr2", 0, 1)
        check(r1[1] == 0, "acks=1 with ISR 1: error %d" % r1[1])
        print("follower %d stopped: out of the ISR after %.2f s; acks=all -> NOT_ENOUGH_REPLICAS, "
              "acks=1 taken at offset %d" % (follower, shrink, r1[2]), flush=True)
    finally:
        os.kill(cl.pid(follower), signal.SIGCONT)
    t0 = time.time()
    wait_isr("isr2", 1, 2)
    back = time.time() - t0
    r = produce_one(lead, "isr2", 0, -1)
    check(r[1] == 0, "acks=all once the follower is back: error %d" % r[1])
    n, _ = wait_same_replicas("isr2", 0, [lead, follower])
    print("follower %d continued: back in the ISR after %.2f s; acks=all taken at offset %d; both "
          "replicas hold the same %d bytes" % (follower, back, r[2], n), flush=True)

    # ---- 3. bad input
    st = partition_state(TOPIC, 0)
    lead = st["leader"]
    fol = [r for r in st["replicas"] if r != lead][0]
    epoch = leader_epoch(TOPIC, 0, lead)
    leo_before = len(replica_batches(fol, TOPIC, 0))
    for acks in (-1, 1) * 10:
        # a partition kept for a refused write was once validated with no
        # limits (INVALID_TIMESTAMP) and appended to the follower's log
        r = produce_one(fol, TOPIC, 0, acks)
        check(r[1] == E_NOT_LEADER, "produce (acks=%d) to follower %d: error %d" % (acks, fol, r[1]))
    check(len(replica_batches(fol, TOPIC, 0)) == leo_before, "the follower's log took no write")
    err, _ = fetch_v11(lead, TOPIC, 0, 0, 99)
    check(err == E_NOT_LEADER, "fetch as replica 99 without an epoch: error %d" % err)
    err, _ = fetch_v11(lead, TOPIC, 0, 0, 99, epoch)
    check(err == E_UNKNOWN_EPOCH, "fetch as replica 99 at the current epoch: error %d" % err)
    err, _ = fetch_v11(lead, TOPIC, 0, 0, fol, epoch - 1)
    check(err == E_FENCED, "follower fetch at epoch %d (the leader's is %d): error %d" % (epoch - 1, epoch, err))
    ctl = cl.wait_leader()
    e1 = alter_partition(ctl, lead, TOPIC, 0, epoch, 0, st["isr"])
    check(e1 == E_INVALID_UPDATE_VERSION, "AlterPartition at partition epoch 0: error %d" % e1)
    e2 = alter_partition(ctl, fol, TOPIC, 0, epoch, 0, st["isr"])
    check(e2 == E_INVALID_REQUEST, "AlterPartition from the follower: error %d" % e2)
    e3 = alter_partition(ctl, lead, TOPIC, 0, epoch - 1, 0, st["isr"])
    check(e3 == E_FENCED, "AlterPartition at an old leader epoch: error %d" % e3)
    check(produce_one(lead, TOPIC, 0, -1)[1] == 0, "the leader still takes acks=all writes")
    check(partition_state(TOPIC, 0)["isr"] == st["isr"], "the ISR is unchanged")
    print("bad input: produce to a follower -> NOT_LEADER_OR_FOLLOWER; fetch as a non-replica -> "
          "NOT_LEADER_OR_FOLLOWER / UNKNOWN_LEADER_EPOCH; at an old epoch -> FENCED_LEADER_EPOCH; "
          "AlterPartition stale -> INVALID_UPDATE_VERSION, from a follower -> INVALID_REQUEST, old "
          "epoch -> FENCED_LEADER_EPOCH; the partition carries on", flush=True)
    _, out, _ = kcat(Bootstrap(), "-C", "-t", TOPIC, "-p", "0", "-o", "-1", "-e", "-q", "-f", "%o\\n")
    check(out.strip() != b"", "kcat reads the partition after the bad input")
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    cl.cleanup()

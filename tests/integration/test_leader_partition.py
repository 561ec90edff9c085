"""
integration.leader_partition - the leader of a data partition cut off from
the other two nodes by a network partition (not killed), then healed.

Every link between two nodes goes through a proxy of tcpproxy.py, both the
quorum's (controller.quorum.voters per node, as in cluster_partition) and
replication's: node j has a listener FROM<i> for each node i, advertised at
the address of proxy (i, j), and node i sets inter.broker.listener.name to
FROM<i>, so its replica fetchers reach node j through proxy (i, j) only.
Clients reach every node directly on PLAINTEXT and are given PLAINTEXT
addresses (the listener they came in on), so an isolated node still takes
client requests, as a zombie leader does.

  1. 3 nodes, topic lp (3 partitions, replication factor 3,
     min.insync.replicas 2) written by rdk_acked_producer (librdkafka,
     acks=all, every acknowledgement logged);
  2. L, the leader of lp-0, is isolated (every proxy to and from it
     blackholed).  Straight to L, while it still believes it leads:
     acks=all writes, none of which may be acknowledged (no follower can
     fetch them), and acks=1 writes with values of their own, which L
     takes into its log only;
  3. the majority fences L and elects a new leader of lp-0 at a higher
     leader epoch (the time is printed); the producer's acknowledgements
     go on through it;
  4. healed: L comes back as a follower, truncates the suffix it took
     alone (the acks=1 values are in no replica's log) and rejoins the
     ISR;
  5. every acknowledged record is read back at its offset, once, and the
     three replicas of each partition hold the same batches byte for byte.
"""
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import Cluster, check, check_acked_topic, free_port, read_ack_file  # noqa: E402
from tcpproxy import BLACKHOLE, PASS, TcpProxy  # noqa: E402

TOPIC, PARTS, SIZE = "lp", 3, 60
ISOLATED_S = float(os.environ.get("STRATA_ISOLATED_S", "4"))
E_TIMED_OUT, E_NOT_LEADER, E_NOT_ENOUGH, E_NOT_ENOUGH_AFTER = 7, 6, 19, 20

cl = Cluster(3, overrides={
    "num.partitions": 1,
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
    "replica.lag.time.max.ms": "1500",
    "log.segment.bytes": "131072",
})
ids = cl.ids()
names = ["FROM%d" % i for i in ids]
proxies = {}  # (kind, i, j): node i's link to node j
real = {}  # (i, j): node j's real port of listener FROM<i>
for j in ids:
    for i in ids:
        real[(i, j)] = free_port()
for i in ids:
    for j in ids:
        if i != j:
            proxies[("quorum", i, j)] = TcpProxy(("127.0.0.1", cl.quorum_port(j)),
                                                 name="quorum %d->%d" % (i, j)).start()
            proxies[("data", i, j)] = TcpProxy(("127.0.0.1", real[(i, j)]),
                                               name="data %d->%d" % (i, j)).start()
for j in ids:
    voters = ",".join("%d@127.0.0.1:%d" % (k, cl.quorum_port(k) if k == j else proxies[("quorum", j, k)].port)
                      for k in ids)
    listeners = ["PLAINTEXT://127.0.0.1:%d" % cl.port(j), "CONTROLLER://127.0.0.1:%d" % cl.quorum_port(j)]
    advertised = ["PLAINTEXT://127.0.0.1:%d" % cl.port(j)]
    for i in ids:
        listeners.append("FROM%d://127.0.0.1:%d" % (i, real[(i, j)]))
        advertised.append("FROM%d://127.0.0.1:%d" % (i, real[(i, j)] if i == j else proxies[("data", i, j)].port))
    cl.node_overrides[j] = {
        "controller.quorum.voters": voters,
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"] +
                                                   ["%s:PLAINTEXT" % n for n in names]),
        "inter.broker.listener.name": "FROM%d" % j,
    }


def isolate(node, mode):
    for (_kind, i, j), p in proxies.items():
        if node in (i, j):
            p.set_mode(mode)


def produce_to(node, p, acks, value):
    """One record straight to node: (error, base offset)."""
    c = cl.conn(node, timeout=15)
    try:
        _idx, err, base = c.produce(TOPIC, p, kwire.record_batch([value]), acks=acks, timeout_ms=3000)
        return err, base
    finally:
        c.close()


def leader_of(p, nodes):
    st = cl.partition_state(TOPIC, p, nodes)
    return st["leader"] if st else None


prod = None
try:
    cl.up(timeout=90)
    c = cl.conn(1)
    check(c.create_topic(TOPIC, PARTS, rf=3, configs={"min.insync.replicas": "2"}) == 0, "create %s" % TOPIC)
    c.close()
    cl.wait_isr(TOPIC, PARTS, 3)

    ackfile = os.path.join(tempfile.mkdtemp(prefix="strata-lp-"), "acks")
    prod = cl.acked_producer(TOPIC, PARTS, SIZE, ackfile, "-X", "batch.size=65536", "-X", "request.timeout.ms=5000")
    time.sleep(2)
    # the replicas reach each other through the proxies, not around them
    links = sorted("%d->%d" % (i, j) for (k, i, j), p in proxies.items() if k == "data" and p.accepted)
    check(links, "no replica fetcher connected through a data proxy")
    L = leader_of(0, ids)
    leaders = [leader_of(p, ids) for p in range(PARTS)]
    others = [i for i in ids if i != L]
    epoch0 = cl.leader_epoch(TOPIC, 0, L)
    acked_before = len(read_ack_file(ackfile))
    print("3 nodes through %d proxies (replication through links %s); node %d leads %s-0 at epoch %d "
          "(leaders of 0..%d: %s); %d acks so far" % (len(proxies), " ".join(links), L, TOPIC, epoch0, PARTS - 1,
                                                     leaders, acked_before), flush=True)
    check(acked_before > 0, "the producer had acknowledgements before the partition")

    # ---- 2. L isolated; writes straight to it
    isolate(L, BLACKHOLE)
    t0 = time.time()
    print("node %d isolated (its quorum and replication links blackholed both ways)" % L, flush=True)
    all_answers, one_offsets = [], []
    for k in range(2):
        err, base = produce_to(L, 0, -1, b"isolated-all-%d" % k)
        all_answers.append(err)
        check(err != 0, "the isolated leader acknowledged an acks=all write (offset %d)" % base)
        err, base = produce_to(L, 0, 1, b"isolated-one-%d" % k)
        if err == 0:
            one_offsets.append(base)
    print("to node %d while isolated: acks=all answered %s (none taken); acks=1 taken at offsets %s" %
          (L, all_answers, one_offsets), flush=True)
    check(all(e in (E_TIMED_OUT, E_NOT_LEADER, E_NOT_ENOUGH, E_NOT_ENOUGH_AFTER) for e in all_answers),
          "acks=all to the isolated leader: errors %s, want ones a client retries" % all_answers)

    # ---- 3. the majority moves lp-0 on
    cl.wait(lambda: leader_of(0, others) in others, 30,
            "nodes %s to elect a leader of %s-0 among themselves" % (others, TOPIC), interval=0.02)
    took = time.time() - t0
    M = leader_of(0, others)
    epoch1 = cl.leader_epoch(TOPIC, 0, M)
    check(epoch1 > epoch0, "the new leader %d is at epoch %d, the isolated one was at %d" % (M, epoch1, epoch0))
    # lp-0's acknowledgements resume through the new leader (the producer's
    # requests held by L end at request.timeout.ms, then go to M)
    def p0_acks():
        return sum(1 for (p, _o) in read_ack_file(ackfile) if p == 0)
    acked_mid = p0_acks()
    cl.wait(lambda: p0_acks() > acked_mid, 60, "an acks=all write to %s-0 acknowledged by the majority" % TOPIC)
    resumed = time.time() - t0
    time.sleep(ISOLATED_S)
    print("node %d leads %s-0 at epoch %d, %.2f s after the partition; its acks resumed at %.2f s and "
          "grew %d -> %d" % (M, TOPIC, epoch1, took, resumed, acked_mid, p0_acks()), flush=True)
    err, base = produce_to(L, 0, -1, b"isolated-all-late")
    check(err != 0, "the isolated node acknowledged an acks=all write after it lost the leadership")
    print("acks=all to node %d, %.1f s into the partition: error %d" % (L, time.time() - t0, err), flush=True)

    # ---- 4. healed
    isolate(L, PASS)
    t1 = time.time()
    # as the majority sees it, then as every node does
    cl.wait_isr(TOPIC, PARTS, 3, timeout=90, nodes=[M])
    for i in ids:
        cl.wait_isr(TOPIC, PARTS, 3, timeout=30, nodes=[i])
    print("healed: all %d partitions have 3 in-sync replicas again after %.2f s" % (PARTS, time.time() - t1),
          flush=True)
    time.sleep(1)
    prod.send_signal(signal.SIGTERM)
    out = prod.communicate(timeout=60)[0].decode(errors="replace").strip()
    prod = None
    print("producer: %s" % (out.splitlines()[-1] if out else "(no output)"), flush=True)
    check("produced" in out, "the producer ran to the end: %s" % out)

    # ---- 5. nothing acknowledged lost; replicas identical; L's own suffix gone
    acks = read_ack_file(ackfile)

    class Bootstrap:
        bootstrap = cl.bootstrap()
    counts = check_acked_topic(Bootstrap(), TOPIC, PARTS, SIZE, acks, "after node %d was cut off" % L)
    for p in range(PARTS):
        n, start = cl.wait_same_replicas(TOPIC, p, ids)
        print("%s-%d: %d records; the 3 replicas hold the same %d bytes of batches from offset %d" %
              (TOPIC, p, counts[p], n, start), flush=True)
    for i in ids:
        data = b"".join(cl.replica_batches(i, TOPIC, 0).values())
        check(b"isolated-" not in data, "node %d's %s-0 still holds a record only the isolated leader took" %
              (i, TOPIC))
    truncated = [ln for ln in cl.log_text(L).splitlines() if "%s-0:" % TOPIC in ln and
                 ("diverged" in ln or "truncating" in ln)]
    check(not one_offsets or truncated, "node %d logged no truncation of %s-0" % (L, TOPIC))
    print("node %d: %s" % (L, truncated[0].split("replica: ", 1)[-1] if truncated else "nothing to truncate"),
          flush=True)
    print("%d acknowledged records, none lost; the %d acks=1 records the isolated leader took are in no "
          "replica" % (len(acks), len(one_offsets)), flush=True)
    print("PASS")
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    if prod is not None:
        prod.kill()
    for p in proxies.values():
        p.close()
    cl.cleanup()

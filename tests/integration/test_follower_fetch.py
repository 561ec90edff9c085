"""
integration.follower_fetch - consumers read from a replica in their own
rack (KIP-392): three nodes in racks rack-1..rack-3, replica.selector.class
Kafka's RackAwareReplicaSelector.

  1. topic ff (1 partition, replication factor 3) with 2000 records; L
     leads it, F is a follower;
  2. Fetch v11 to L from a consumer in F's rack: no records, preferred
     read replica F, answered at once; from L's own rack, an unknown rack
     or no rack: records from L, no preferred replica;
  3. Fetch v11 to F from a consumer: records up to F's high watermark; v10
     to F: NOT_LEADER_OR_FOLLOWER (before KIP-392 only leaders serve
     consumers); an offset past F's log end: OFFSET_OUT_OF_RANGE; a leader
     epoch newer than F knows: UNKNOWN_LEADER_EPOCH;
  4. a librdkafka consumer (kcat, client.rack F's rack) reads all 2000
     records, and F's kafka_server_brokertopicmetrics_bytesout_total for ff
     grows by their size while L's does not;
  5. F stopped (SIGSTOP) until L drops it from the ISR: L names no
     preferred replica for F's rack any more and serves the records itself;
  6. a node given another replica.selector.class refuses to start, naming
     the setting.
"""
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import CONFIG, Cluster, binary, check, free_port, run  # noqa: E402

TOPIC, N = "ff", 2000
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
E_NOT_LEADER, E_OOR, E_UNKNOWN_EPOCH = 6, 1, 75

admin = {}
cl = Cluster(3, overrides={
    "replica.selector.class": SELECTOR,
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
    "replica.lag.time.max.ms": "1500",
})
for i in cl.ids():
    admin[i] = free_port()
    cl.node_overrides[i] = {"broker.rack": "rack-%d" % i, "admin.listeners": "http://127.0.0.1:%d" % admin[i]}


def bytes_out(i):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin[i], timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'^kafka_server_brokertopicmetrics_bytesout_total\{topic="%s"\} (\d+)' % TOPIC, text, re.M)
    return int(m.group(1)) if m else 0


def fetch(node, offset=0, **kw):
    c = cl.conn(node)
    try:
        return kwire.fetch_v11(c, TOPIC, 0, offset, **kw)
    finally:
        c.close()


try:
    cl.up(timeout=90)
    c = cl.conn(1)
    check(c.create_topic(TOPIC, 1, rf=3) == 0, "create %s" % TOPIC)
    c.close()
    cl.wait_isr(TOPIC, 1, 3)
    st = cl.partition_state(TOPIC, 0)
    L = st["leader"]
    F, G = [r for r in st["replicas"] if r != L]
    payload = b"".join(b"ff-%06d\n" % k for k in range(N))
    run(["kcat", "-b", cl.bootstrap(), "-P", "-t", TOPIC, "-p", "0", "-X", "acks=all"], input=payload)
    cl.wait(lambda: fetch(F, N - 1)["hw"] == N and fetch(G, N - 1)["hw"] == N, 30,
            "the followers' high watermark to reach %d" % N)
    epoch = cl.leader_epoch(TOPIC, 0, L)
    print("%s-0: leader %d (rack-%d), followers %d and %d; %d records" % (TOPIC, L, L, F, G, N), flush=True)

    # ---- 2. the leader names the replica in the consumer's rack
    t0 = time.time()
    r = fetch(L, rack="rack-%d" % F, max_wait=5000)
    took = time.time() - t0
    check(r["error"] == 0 and r["preferred"] == F and r["records"] == b"",
          "Fetch v11 to the leader from rack-%d: error %d, preferred %d, %d bytes" %
          (F, r["error"], r["preferred"], len(r["records"])))
    check(took < 2, "the preferred-replica answer waited %.2f s (max_wait 5 s)" % took)
    check(r["hw"] == N, "the leader's answer names high watermark %d" % r["hw"])
    for rack in ("rack-%d" % L, "rack-9", ""):
        r = fetch(L, rack=rack)
        check(r["error"] == 0 and r["preferred"] == -1 and len(r["records"]) > 0,
              "Fetch v11 to the leader from %r: error %d, preferred %d, %d bytes" %
              (rack, r["error"], r["preferred"], len(r["records"])))
    print("leader %d: a consumer in rack-%d is sent to %d (answered in %.3f s); rack-%d, rack-9 and no rack "
          "read from the leader" % (L, F, F, took, L), flush=True)

    # ---- 3. the follower serves consumers (v11 on)
    r = fetch(F, rack="rack-%d" % F)
    got = kwire.batches(r["records"])
    check(r["error"] == 0 and got and got[0][0] == 0 and r["hw"] == N,
          "Fetch v11 to follower %d: error %d, hw %d, batches %s" % (F, r["error"], r["hw"], [b[:2] for b in got]))
    r10 = fetch(F, version=10)
    check(r10["error"] == E_NOT_LEADER, "Fetch v10 to follower %d: error %d" % (F, r10["error"]))
    roor = fetch(F, offset=N + 5)
    check(roor["error"] == E_OOR, "Fetch v11 to follower %d past its log end: error %d" % (F, roor["error"]))
    rf = fetch(F, leader_epoch=epoch + 1)
    check(rf["error"] == E_UNKNOWN_EPOCH, "Fetch v11 to follower %d at a leader epoch it does not know yet: "
          "error %d" % (F, rf["error"]))
    print("follower %d: v11 serves %d batches from offset 0 (hw %d); v10 NOT_LEADER_OR_FOLLOWER; past the end "
          "OFFSET_OUT_OF_RANGE" % (F, len(got), r["hw"]), flush=True)

    # ---- 4. librdkafka reads from its rack
    before = {i: bytes_out(i) for i in cl.ids()}
    _, out, _ = run(["kcat", "-b", cl.bootstrap([L]), "-C", "-t", TOPIC, "-p", "0", "-o", "beginning",
                     "-c", str(N), "-e", "-X", "client.rack=rack-%d" % F], timeout=60)
    check(out == payload, "kcat in rack-%d read %d bytes, want the %d records' %d" % (F, len(out), N, len(payload)))
    after = {i: bytes_out(i) for i in cl.ids()}
    grew = {i: after[i] - before[i] for i in cl.ids()}
    check(grew[F] >= len(payload), "follower %d sent consumers %d bytes of ff, want >= %d" % (F, grew[F], len(payload)))
    check(grew[L] < len(payload) // 2, "the leader still sent %d bytes of ff to the consumer" % grew[L])
    print("kcat with client.rack=rack-%d read %d records; bytes sent to consumers: %s" %
          (F, N, ", ".join("node %d +%d" % (i, grew[i]) for i in cl.ids())), flush=True)

    # ---- 5. a follower out of the ISR is not named
    os.kill(cl.pid(F), signal.SIGSTOP)
    try:
        cl.wait(lambda: F not in (cl.partition_state(TOPIC, 0, [L]) or {}).get("isr", [F]), 30,
                "the leader to drop the stopped follower %d from the ISR" % F)
        r = fetch(L, rack="rack-%d" % F)
        check(r["error"] == 0 and r["preferred"] == -1 and len(r["records"]) > 0,
              "follower %d out of the ISR: the leader answered preferred %d, %d bytes" %
              (F, r["preferred"], len(r["records"])))
    finally:
        os.kill(cl.pid(F), signal.SIGCONT)
    print("follower %d out of the ISR: a consumer in its rack reads from the leader" % F, flush=True)
    cl.wait_isr(TOPIC, 1, 3, nodes=[L])

    # ---- 6. bad setting
    p = subprocess.run([binary("stratad"), "--config", CONFIG, "--override",
                        "replica.selector.class=org.example.Nearest"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    err = p.stderr.decode()
    check(p.returncode != 0 and "replica.selector.class" in err,
          "an unknown replica.selector.class: exit %d, %r" % (p.returncode, err.strip()))
    print("replica.selector.class=org.example.Nearest: %s" % err.strip().splitlines()[-1], flush=True)
    print("PASS")
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    cl.cleanup()

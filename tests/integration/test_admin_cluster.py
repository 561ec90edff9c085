"""
The admin listener on a cluster of three combined nodes (scripts/cluster.sh):
with one broker stopped, the replica-state gauges summed over the live
nodes are what the topic layout says.

  a: 3 partitions, replication factor 3, min.insync.replicas 2
  b: 2 partitions, replication factor 3, min.insync.replicas 3

All up: no partition under-replicated, a's ISR 3 above its minimum, b's
ISR 3 at it (2 at min ISR).  Node 3 stopped: every partition loses a
replica from its ISR, so 5 under-replicated; a's ISR 2 == 2 (at min ISR,
3), b's ISR 2 < 3 (under min ISR, 2); no partition offline; exactly one
active controller; /v1/ready is 200 on the live nodes and /v1/status's ISRs
agree with the gauges.  Node 2 stopped too: node 1 has no quorum and
/v1/ready answers 503, naming the missing controller.
"""
import json
import os
import signal
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from strata_harness import Cluster, check, free_port, wait_for  # noqa: E402
from test_admin import parse_metrics  # noqa: E402

GAUGES = ["kafka_server_replicamanager_underreplicatedpartitions",
          "kafka_server_replicamanager_underminisrpartitioncount",
          "kafka_server_replicamanager_atminisrpartitioncount",
          "kafka_server_replicamanager_leadercount",
          "kafka_controller_kafkacontroller_activecontrollercount",
          "kafka_controller_kafkacontroller_offlinepartitionscount"]


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def sums(ports, nodes):
    out = {g: 0 for g in GAUGES}
    for i in nodes:
        st, body = get(ports[i], "/metrics")
        check(st == 200, "node %d /metrics: %d" % (i, st))
        ms = parse_metrics(body)
        for g in GAUGES:
            out[g] += int(ms[(g, frozenset())])
    return out


def layout(port, topics):
    """From /v1/status: (under-replicated, under min ISR, at min ISR)."""
    s = json.loads(get(port, "/v1/status")[1])
    min_isr = {"a": 2, "b": 3}
    urp = under = at = 0
    for t in s["topics"]:
        if t["name"] not in topics:
            continue
        for p in t["partitions"]:
            urp += len(p["isr"]) < len(p["replicas"])
            under += len(p["isr"]) < min_isr[t["name"]]
            at += len(p["isr"]) == min_isr[t["name"]]
    return urp, under, at


def main():
    ports = {i: free_port() for i in (1, 2, 3)}
    cl = Cluster(3, overrides={"broker.session.timeout.ms": 3000,
                               "broker.heartbeat.interval.ms": 500,
                               "replica.lag.time.max.ms": 2000},
                 node_overrides={i: {"admin.listeners": "http://127.0.0.1:%d" % ports[i]}
                                 for i in (1, 2, 3)})
    try:
        cl.up()
        c = cl.conn(1)
        check(c.create_topic("a", 3, rf=3, configs={"min.insync.replicas": "2"}) == 0, "create a")
        check(c.create_topic("b", 2, rf=3, configs={"min.insync.replicas": "3"}) == 0, "create b")
        c.close()

        def all_up():
            s = sums(ports, [1, 2, 3])
            return (s["kafka_server_replicamanager_leadercount"] >= 5 and
                    s["kafka_server_replicamanager_underreplicatedpartitions"] == 0 and
                    s["kafka_server_replicamanager_atminisrpartitioncount"] == 2 and
                    s["kafka_controller_kafkacontroller_activecontrollercount"] == 1)
        wait_for(all_up, 60, 0.5, what="every partition fully replicated")
        print("all up: %s" % sums(ports, [1, 2, 3]), flush=True)
        for i in (1, 2, 3):
            check(get(ports[i], "/v1/ready")[0] == 200, "node %d not ready" % i)

        cl.kill(3, signal.SIGTERM)
        want = {"kafka_server_replicamanager_underreplicatedpartitions": 5,
                "kafka_server_replicamanager_underminisrpartitioncount": 2,
                "kafka_server_replicamanager_atminisrpartitioncount": 3,
                "kafka_controller_kafkacontroller_activecontrollercount": 1,
                "kafka_controller_kafkacontroller_offlinepartitionscount": 0}

        def degraded():
            s = sums(ports, [1, 2])
            return all(s[k] == v for k, v in want.items())
        wait_for(degraded, 60, 0.5, what="the gauges to show node 3 gone: %s" % want)
        s = sums(ports, [1, 2])
        print("node 3 stopped: %s" % s, flush=True)
        # __consumer_offsets and other topics may exist: only a and b are
        # in the counts above, since nothing else was created
        check(s["kafka_server_replicamanager_leadercount"] == 5, "leaders on 1 and 2: %s" % s)
        for i in (1, 2):
            check(layout(ports[i], ("a", "b")) == (5, 2, 3),
                  "node %d /v1/status layout %s" % (i, layout(ports[i], ("a", "b"))))
            check(get(ports[i], "/v1/ready")[0] == 200, "node %d not ready with node 3 down" % i)
        # node 2 stopped too: node 1 alone has no quorum, so no active
        # controller, and says so with 503
        cl.kill(2, signal.SIGTERM)

        def unready():
            st, body = get(ports[1], "/v1/ready")
            return st == 503 and body
        wait_for(unready, 60, 0.5, what="node 1 to answer /v1/ready 503 without a quorum")
        st, body = get(ports[1], "/v1/ready")
        r = json.loads(body)
        check(r["ready"] is False and any("controller" in x for x in r["reasons"]),
              "node 1's 503 reasons: %s" % body)
        check(get(ports[1], "/v1/health")[0] == 200, "node 1 health without a quorum")
        print("quorum lost: node 1 /v1/ready 503 %s" % body.strip(), flush=True)
        print("PASS")
    finally:
        cl.stop()
        cl.cleanup()


if __name__ == "__main__":
    main()

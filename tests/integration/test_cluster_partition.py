"""
integration.cluster_partition - the active controller cut off from the
other two voters, then healed.

Every quorum link goes through a proxy of tests/integration/tcpproxy.py:
node i reaches node j at proxy (i, j) (its own controller.quorum.voters,
given with cluster.sh --node-override), so the test can drop the links of
one node both ways while clients still reach every node directly.  Broker
registration, heartbeats and forwarded admin requests take the same links.

  1. 3 nodes up, a topic created; the controller L is isolated (its four
     proxies blackholed: connections stay open, every byte is dropped);
  2. a CreateTopics sent to L at once, while it may still believe it
     leads, and another a few seconds later: neither is answered without
     error (L cannot reach a majority), and the error is one a client
     retries (NOT_CONTROLLER, REQUEST_TIMED_OUT or a closed connection);
  3. the two others elect a new leader M among themselves (the time is
     printed) and accept CreateTopics through either of them (retried as
     clients do on NOT_CONTROLLER, REQUEST_TIMED_OUT, a lost connection);
  4. while cut off, L shows none of the majority's topics and no topic of
     its own, and elects no leader (pre-vote: it cannot gather votes, so
     it does not raise the epoch);
  5. healed: L rejoins without disrupting M (the same leader, the same
     epoch: pre-vote and check-quorum), its metadata matches the others'
     (the majority's topics, none of the topics sent to L), its log end
     is the leader's (DescribeQuorum), and no epoch had two leaders.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import Cluster, check, fail  # noqa: E402
from tcpproxy import BLACKHOLE, PASS, TcpProxy  # noqa: E402

N = 3
later = []  # failures found on the way, reported at the end
cl = Cluster(N, overrides={"num.partitions": 1})
proxies = {}
for i in cl.ids():
    for j in cl.ids():
        if i != j:
            proxies[(i, j)] = TcpProxy(("127.0.0.1", cl.quorum_port(j)), name="link %d->%d" % (i, j)).start()
for i in cl.ids():
    voters = ",".join("%d@127.0.0.1:%d" % (j, cl.quorum_port(j) if j == i else proxies[(i, j)].port)
                      for j in cl.ids())
    cl.node_overrides[i] = {"controller.quorum.voters": voters}


def isolate(n, mode):
    for (i, j), p in proxies.items():
        if n in (i, j):
            p.set_mode(mode)


def create(i, name, timeout=40):
    """CreateTopics through node i: its error code, or the exception's name."""
    try:
        c = kwire.Conn(cl.port(i), timeout=timeout)
        try:
            return c.create_topic(name, 1, 1)
        finally:
            c.close()
    except (OSError, ConnectionError) as e:
        return type(e).__name__


def create_retrying(i, name, within=30):
    """CreateTopics through node i as a client does it: retried on
    NOT_CONTROLLER, REQUEST_TIMED_OUT and lost connections (and on
    KAFKA_STORAGE_ERROR, noted as a failure for the end) until answered."""
    deadline = time.time() + within
    first = True
    while True:
        r = create(i, name, timeout=35)
        if r == 36 and not first:
            return 0  # an attempt whose answer was lost was committed
        if r == 56:
            later.append("CreateTopics %s through node %d answered KAFKA_STORAGE_ERROR (56) during an election; "
                         "NOT_CONTROLLER (41) is the answer clients retry" % (name, i))
            print("FAILS (at the end): " + later[-1], flush=True)
        if r not in (7, 41, 56) and not isinstance(r, str) or time.time() > deadline:
            return r
        first = False
        time.sleep(0.1)


def note_answer(name, r):
    """What a node cut off from the quorum may answer: NOT_CONTROLLER,
    REQUEST_TIMED_OUT, or a closed connection (the client retries)."""
    if r not in (7, 41) and not isinstance(r, str):
        later.append("the isolated node answered CreateTopics %s with %r; want NOT_CONTROLLER (41) or "
                     "REQUEST_TIMED_OUT (7), errors a client retries" % (name, r))
        print("FAILS (at the end): " + later[-1], flush=True)


def topics(i):
    return {t for t, (err, _) in cl.metadata(i, timeout=10)["topics"].items() if err == 0}


def describe_quorum(i):
    """DescribeQuorum v0 to node i: (error, leader, epoch, hw, {voter: log end})."""
    c = cl.conn(i)
    try:
        return kwire.describe_quorum(c)[:5]
    finally:
        c.close()


try:
    cl.up()
    L = cl.leader_id()
    others = [i for i in cl.ids() if i != L]
    check(create_retrying(others[0], "before") == 0, "CreateTopics before the partition failed")
    cl.wait(lambda: all("before" in topics(i) for i in cl.ids()), 20, "every node to show topic before")
    _, _, epoch0, _, _ = describe_quorum(L)
    leaders0 = cl.leaders_from_logs()
    print("3 nodes up through %d proxies; controller %d, epoch %d" % (len(proxies), L, epoch0), flush=True)

    # ---- 1-2: cut L off; a CreateTopics to it at once
    isolate(L, BLACKHOLE)
    t0 = time.time()
    print("node %d isolated (its quorum links blackholed both ways)" % L, flush=True)
    import threading
    early = {}
    th = threading.Thread(target=lambda: early.update(r=create(L, "isolated-early")), daemon=True)
    th.start()

    # ---- 3: the majority elects a new leader
    got = {}

    def majority_leader():
        ids = {cl.controller_id(i, timeout=1) for i in others}
        got["ids"] = ids
        return len(ids) == 1 and list(ids)[0] in others
    cl.wait(majority_leader, 30, "nodes %r to agree on a new leader among themselves" % others, interval=0.02)
    M = list(got["ids"])[0]
    took = time.time() - t0
    check(M in others, "the majority names %d" % M)
    print("nodes %r elected node %d %.2f s after the partition" % (others, M, took), flush=True)
    for i in others:
        r = create_retrying(i, "majority-%d" % i)
        check(r == 0, "CreateTopics majority-%d through node %d (majority side): %r" % (i, i, r))
    print("CreateTopics majority-%d and majority-%d answered 0 by the majority side" % tuple(others), flush=True)

    th.join(45)
    check(not th.is_alive(), "the CreateTopics sent to the isolated node at once was not answered within 45 s")
    print("CreateTopics isolated-early sent to node %d as it was cut off: %r (%.1f s after the cut)" %
          (L, early.get("r"), time.time() - t0), flush=True)
    check(early.get("r") != 0, "the isolated node %d answered CreateTopics isolated-early without error" % L)
    note_answer("isolated-early", early.get("r"))
    t1 = time.time()
    r = create(L, "isolated-late")
    print("CreateTopics isolated-late sent to node %d %.1f s into the partition: %r (after %.1f s)" %
          (L, t1 - t0, r, time.time() - t1), flush=True)
    check(r != 0, "the isolated node %d answered CreateTopics isolated-late without error" % L)
    note_answer("isolated-late", r)

    # ---- 4: the isolated node's view
    seen = topics(L)
    print("node %d (isolated) shows topics %r, names controller %r" % (L, sorted(seen), cl.controller_id(L)))
    check(seen == {"before"}, "node %d, cut off, shows topics %r" % (L, sorted(seen)))
    new_epochs = [(e, n) for e, n in cl.leaders_from_logs() if (e, n) not in leaders0 and n == L]
    check(not new_epochs, "node %d, cut off, was elected: %r" % (L, new_epochs))
    _, mleader, mepoch, _, _ = describe_quorum(M)
    check(mleader == M, "DescribeQuorum at %d: leader %d" % (M, mleader))
    for i in others:
        check({"before", "majority-%d" % others[0], "majority-%d" % others[1]} <= topics(i),
              "node %d (majority) lacks the majority's topics" % i)

    # ---- 5: heal
    isolate(L, PASS)
    t2 = time.time()
    print("healed", flush=True)
    want = {"before", "majority-%d" % others[0], "majority-%d" % others[1]}
    cl.wait(lambda: all(topics(i) == want for i in cl.ids()) and cl.leader_id() is not None, 30,
            "every node to show exactly %r after healing" % sorted(want))
    print("node %d rejoined %.2f s after healing: every node shows %r" % (L, time.time() - t2, sorted(want)), flush=True)

    def caught_up():
        err, leader, _, hw, voters = describe_quorum(cl.leader_id())
        return err == 0 and sorted(voters) == cl.ids() and all(v == voters[leader] for v in voters.values())
    cl.wait(caught_up, 30, "every voter's log end to be the leader's")
    err, leader, epoch, hw, voters = describe_quorum(cl.leader_id())
    print("DescribeQuorum after healing: leader %d, epoch %d, high watermark %d, log ends %r" %
          (leader, epoch, hw, voters), flush=True)
    if (leader, epoch) != (M, mepoch):
        later.append("healing moved the quorum: leader %d epoch %d, was %d epoch %d (a rejoining node must not "
                     "disrupt a healthy leader)" % (leader, epoch, M, mepoch))
        print("FAILS (at the end): " + later[-1], flush=True)
    time.sleep(2)  # an uncommitted topic of L's would have had time to show
    for i in cl.ids():
        got = topics(i)
        check(got == want, "node %d shows %r after healing, want %r" % (i, sorted(got), sorted(want)))
    views = [sorted((t, sorted((p, sorted(d.items())) for p, d in parts.items()))
                    for t, (_, parts) in cl.metadata(i)["topics"].items()) for i in cl.ids()]
    check(views[0] == views[1] == views[2], "the nodes' Metadata differs after healing")
    per_epoch = {}
    for e, n in cl.leaders_from_logs():
        per_epoch.setdefault(e, set()).add(n)
    two = {e: n for e, n in per_epoch.items() if len(n) > 1}
    check(not two, "epochs with two leaders: %r" % two)
    print("epochs and their leader, from the logs: %r" % sorted((e, sorted(n)) for e, n in per_epoch.items()))
    check(not later, "%d problem(s) found on the way:\n  %s" % (len(later), "\n  ".join(later)))
    print("PASS")
except SystemExit as e:
    cl.explain_failure(e)
    raise
finally:
    for p in proxies.values():
        p.close()
    cl.cleanup()

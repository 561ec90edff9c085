"""
integration.cluster_roles - a cluster whose nodes have one role each
(process.roles): nodes 1-3 controller-only, the voters of the metadata
quorum; nodes 4 and 5 broker-only, following the quorum as observers.
Started by scripts/cluster.sh up 5 --controllers 3 --controller-only.

  1. The brokers list brokers 4 and 5 only and name one of them as the
     controller (a client cannot reach a controller-only node);
     DescribeQuorum sent to a broker (forwarded to the active controller)
     names voters 1-3, observers 4 and 5 and a leader among 1-3;
     `strata cluster status | brokers` show the same.
  2. What each role serves: a controller-only node advertises the quorum's
     APIs and not Produce, Metadata or the group APIs, and closes a
     connection that sends Metadata; a broker-only node advertises no
     Vote, BeginQuorumEpoch, BrokerRegistration or AlterPartition.
  3. Topics with replication factor 2 auto-created through a broker are
     placed on brokers 4 and 5 only; records produced with acks=all through
     one broker are read back through the other.
  4. kill -9 of the active controller, 3 times (restarted each time): the
     other two controllers elect a leader, both brokers follow it (their
     log says so), a topic created after each kill exists on both brokers,
     and an acks=all producer through broker 4 loses nothing; no broker is
     ever the Raft leader.  SIGTERM of the active controller: it resigns
     and the brokers follow the next one.
  5. kill -9 of broker 5: it is fenced within broker.session.timeout.ms,
     broker 4 leads every partition; restarted, it is unfenced again.
  6. A broker-only node 6 given controller.quorum.bootstrap.servers (the
     controllers' addresses, no ids) instead of controller.quorum.voters:
     it learns the voters from DescribeQuorum v2, registers, and is listed
     by the other brokers and the quorum (an observer); SIGTERM stops it
     cleanly.
  7. Bad configuration: a controller-only node with a client listener, a
     broker-only node whose node.id is a voter (given as voters, or
     learned from bootstrap servers): each refuses to start, naming the
     setting.
"""
import os
import re
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import CONFIG, Broker, Cluster, binary, check, fail, run, wait_for  # noqa: E402

SESSION_MS = 3000
CONTROLLERS = [1, 2, 3]
BROKERS = [4, 5]
cl = Cluster(5, controllers=3, controller_only=True,
             overrides={"broker.session.timeout.ms": SESSION_MS,
                        "broker.heartbeat.interval.ms": 500,
                        "num.partitions": 4,
                        "default.replication.factor": 2,
                        "min.insync.replicas": 1})


def describe_quorum(port, ends=None):
    """DescribeQuorum v0 to port: (error, leader, epoch, voters, observers);
    ends, a dict, gets each replica's log end offset and "hw"."""
    c = kwire.Conn(port)
    try:
        err, leader, epoch, hw, voters, observers = kwire.describe_quorum(c)
    finally:
        c.close()
    if ends is not None:
        ends.update(voters)
        ends.update(observers)
        ends["hw"] = hw
    return err, leader, epoch, sorted(voters), sorted(observers)


def raft_leader(broker=4):
    """The Raft leader as the active controller tells it (through a
    broker), or None."""
    try:
        err, leader, epoch, _v, _o = describe_quorum(cl.port(broker))
    except (OSError, ConnectionError, struct.error, AssertionError):
        return None, None
    return (leader, epoch) if not err and leader in CONTROLLERS else (None, None)


def brokers_listed(i):
    m = cl.metadata(i, topics=[])
    return sorted(m["brokers"]), m["controller_id"]


ACTIVE = re.compile(r"quorum: metadata quorum epoch (\d+): node (\d+) is the active controller")


def followed(broker, epoch):
    """The leader broker's log names for an epoch above `epoch`, or None."""
    for e, node in reversed(ACTIVE.findall(cl.log_text(broker))):
        if int(e) > epoch:
            return int(node)
    return None


def strata(*args):
    p = subprocess.run([binary("strata"), "cluster", "--bootstrap", cl.bootstrap([4])] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def produce(broker, topic, values):
    run(["kcat", "-P", "-b", cl.bootstrap([broker]), "-t", topic, "-X", "topic.request.required.acks=-1",
         "-X", "message.send.max.retries=100", "-X", "retry.backoff.ms=100"],
        input=("\n".join(values) + "\n").encode(), timeout=120)


def consume(broker, topic):
    out = run(["kcat", "-C", "-b", cl.bootstrap([broker]), "-t", topic, "-e", "-q", "-f", "%s\n"],
              timeout=120)[1]
    return out.decode().split()


def topic_everywhere(topic):
    for b in BROKERS:
        m = cl.metadata(b, topics=[topic])
        err, parts = m["topics"].get(topic, (3, {}))
        if err or len(parts) != 4 or any(p["leader"] not in BROKERS for p in parts.values()):
            return False
    return True


def step1():
    cl.up(wait=False)
    wait_for(lambda: all(brokers_listed(b)[0] == BROKERS for b in BROKERS), 60,
             what="brokers 4 and 5 to list each other")
    for b in BROKERS:
        ids, ctl = brokers_listed(b)
        print("broker %d: Metadata lists brokers %s, controller %d" % (b, ids, ctl), flush=True)
        check(ctl in BROKERS, "broker %d names controller %d, not a broker clients reach" % (b, ctl))
    out = run(["kcat", "-L", "-b", cl.bootstrap(BROKERS)])[1].decode()
    check(re.search(r"2 brokers:", out) and "(controller)" in out, "kcat -L:\n%s" % out)
    wait_for(lambda: raft_leader()[0] is not None, 30, what="DescribeQuorum through broker 4")
    err, leader, epoch, voters, observers = describe_quorum(cl.port(4))
    print("DescribeQuorum through broker 4: leader %d, epoch %d, voters %s, observers %s" %
          (leader, epoch, voters, observers), flush=True)
    check(voters == CONTROLLERS, "voters %s" % voters)
    wait_for(lambda: describe_quorum(cl.port(4))[4] == BROKERS, 20, what="observers 4 and 5")
    rc, out, errs = strata("status")
    print(out, flush=True)
    check(rc == 0 and re.search(r"CurrentVoters:\s+\[1,2,3\]", out), "status: %d %s %s" % (rc, out, errs))
    check(re.search(r"^4\s+Observer", out, re.M) and re.search(r"^5\s+Observer", out, re.M),
          "status shows the brokers as observers:\n%s" % out)
    rc, out, errs = strata("brokers")
    print(out, flush=True)
    check(rc == 0, "brokers: %d %s" % (rc, errs))
    check("2 brokers (2 unfenced, 0 fenced), 3 quorum members that are no broker" in out, "brokers:\n%s" % out)
    for i in CONTROLLERS:
        check(re.search(r"^%d\s+-\s+-\s+-\s+(yes|no)\s+voter$" % i, out, re.M),
              "controller %d shown as a voter that is no broker:\n%s" % (i, out))
    check(re.search(r"^%d\s+\S+\s+-\s+-\s+yes\s+voter$" % leader, out, re.M),
          "the leader %d marked as the controller:\n%s" % (leader, out))


def step2():
    c = kwire.Conn(cl.quorum_port(1))
    try:
        apis = kwire.api_versions(c)
    finally:
        c.close()
    print("controller-only node 1 advertises API keys %s" % sorted(apis), flush=True)
    for key in (52, 53, 54, 55, 59, 62, 63, 56, 67, 19):
        check(key in apis, "controller-only node 1 does not advertise API %d" % key)
    for key in (0, 3, 11, 12, 14, 22, 8):
        check(key not in apis, "controller-only node 1 advertises API %d" % key)
    c = kwire.Conn(cl.quorum_port(1))
    try:
        try:
            kwire.metadata(c, [])
            fail("a controller-only node answered Metadata")
        except (OSError, ConnectionError, struct.error, AssertionError) as e:
            print("Metadata to controller-only node 1: connection closed (%s)" % type(e).__name__)
    finally:
        c.close()
    c = kwire.Conn(cl.port(4))
    try:
        apis = kwire.api_versions(c)
    finally:
        c.close()
    for key in (52, 53, 54, 59, 62, 63, 56, 67):
        check(key not in apis, "broker-only node 4 advertises API %d" % key)
    for key in (0, 1, 3, 11, 55, 60):
        check(key in apis, "broker-only node 4 does not advertise API %d" % key)


def step3():
    values = ["v%05d" % i for i in range(2000)]
    produce(4, "roles-data", values)
    m = cl.metadata(5, topics=["roles-data"])
    _err, parts = m["topics"]["roles-data"]
    print("roles-data: %s" % sorted((p, d["leader"], d["replicas"]) for p, d in parts.items()), flush=True)
    check(len(parts) == 4, "partitions: %d" % len(parts))
    for p, d in parts.items():
        check(sorted(d["replicas"]) == BROKERS, "partition %d replicas %s" % (p, d["replicas"]))
    check({d["leader"] for d in parts.values()} == set(BROKERS), "leaders on both brokers")
    got = consume(5, "roles-data")
    check(sorted(got) == values, "read back %d of %d records through broker 5" % (len(got), len(values)))
    return values


def voters_caught_up():
    """Every controller holds the quorum's high watermark (a restarted one
    is up and fetching again)."""
    ends = {}
    try:
        err = describe_quorum(cl.port(4), ends)[0]
    except (OSError, ConnectionError, struct.error, AssertionError):
        return False
    return not err and all(ends.get(i, -1) >= ends["hw"] for i in CONTROLLERS)


def step4(acked):
    took = []
    for k in range(3):
        wait_for(voters_caught_up, 30, what="the 3 controllers caught up before kill %d" % k)
        leader, epoch = raft_leader()
        check(leader is not None, "no leader before kill %d" % k)
        t0 = time.time()
        cl.kill(leader)
        news = {}

        def both_follow():
            for b in BROKERS:
                n = followed(b, epoch)
                if n is None:
                    return False
                news[b] = n
            return True
        wait_for(both_follow, 30, interval=0.01, what="brokers to follow a new leader after kill %d" % k)
        took.append(time.time() - t0)
        check(len(set(news.values())) == 1 and news[4] in CONTROLLERS and news[4] != leader,
              "after kill %d of %d the brokers follow %s" % (k, leader, news))
        topic = "roles-after-kill-%d" % k
        produce(4, topic, ["x%d" % k])
        wait_for(lambda: topic_everywhere(topic), 30, what="%s on both brokers" % topic)
        more = ["k%d-%04d" % (k, i) for i in range(300)]
        produce(4, "roles-data", more)
        acked += more
        print("kill -9 of controller %d (epoch %d): brokers follow %d after %.3f s; %s created" %
              (leader, epoch, news[4], took[-1], topic), flush=True)
        cl.up(wait=False)
    wait_for(voters_caught_up, 30, what="the 3 controllers caught up before SIGTERM")
    leader, epoch = raft_leader()
    cl.kill(leader, sig=signal.SIGTERM)
    wait_for(lambda: all(followed(b, epoch) not in (None, leader) for b in BROKERS), 30, interval=0.01,
             what="brokers to follow the next leader after SIGTERM of %d" % leader)
    print("SIGTERM of controller %d: brokers follow %d" % (leader, followed(4, epoch)), flush=True)
    check("resigned as the active controller" in cl.log_text(leader), "controller %d did not resign" % leader)
    cl.up(wait=False)
    leaders = {node for _e, node in cl.leaders_from_logs()}
    check(leaders <= set(CONTROLLERS), "Raft leaders seen: %s" % sorted(leaders))
    got = consume(5, "roles-data")
    missing = set(acked) - set(got)
    check(not missing, "%d acknowledged records missing, e.g. %s" % (len(missing), sorted(missing)[:5]))
    print("roles-data: %d records acknowledged, all read back" % len(acked), flush=True)
    print("brokers following a new leader after kill -9: %s s" % ", ".join("%.3f" % t for t in took), flush=True)


def step5():
    t0 = time.time()
    cl.kill(5)
    wait_for(lambda: brokers_listed(4)[0] == [4], (SESSION_MS + 5000) / 1000.0, interval=0.1,
             what="broker 5 fenced")
    fenced_after = time.time() - t0

    def all_on_4():
        _err, parts = cl.metadata(4, topics=["roles-data"])["topics"]["roles-data"]
        return all(d["leader"] == 4 for d in parts.values())
    wait_for(all_on_4, 10, what="broker 4 to lead every partition")
    print("broker 5 killed: fenced after %.1f s (broker.session.timeout.ms=%d); broker 4 leads all" %
          (fenced_after, SESSION_MS), flush=True)
    cl.up(wait=False)
    wait_for(lambda: brokers_listed(4)[0] == BROKERS, 30, what="broker 5 unfenced after its restart")
    print("broker 5 restarted: unfenced", flush=True)


def refused(extra, must):
    d = os.path.join(cl.root, "bad-%d" % len(os.listdir(cl.root)))
    os.makedirs(d)
    cmd = [binary("stratad"), "--config", CONFIG, "--override", "log.dirs=%s" % d,
           "--override", "cluster.id=%s" % cluster_id()]
    cmd += ["--override", "controller.listener.names=CONTROLLER", "--override",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"]
    for k, v in extra.items():
        cmd += ["--override", "%s=%s" % (k, v)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=90)
    err = p.stderr.decode()
    print("refused (exit %d): %s" % (p.returncode, err.strip()), flush=True)
    check(p.returncode != 0 and must in err, "wanted a refusal naming %r: exit %d, %s" % (must, p.returncode, err))


def cluster_id():
    with open(os.path.join(cl.dir, "cluster.id")) as f:
        return f.read().strip()


def bootstrap_servers():
    return ",".join("127.0.0.1:%d" % cl.quorum_port(i) for i in CONTROLLERS)


def step6():
    os.makedirs(os.path.join(cl.root, "node-6"))
    b = Broker({"node.id": 6, "process.roles": "broker", "cluster.id": cluster_id(),
                "controller.quorum.bootstrap.servers": bootstrap_servers(),
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "broker.heartbeat.interval.ms": 500},
               root=os.path.join(cl.root, "node-6"))
    try:
        b.start(timeout=60)
        wait_for(lambda: brokers_listed(4)[0] == [4, 5, 6], 30, what="broker 6 listed by broker 4")
        wait_for(lambda: 6 in describe_quorum(cl.port(4))[4], 20, what="broker 6 an observer")
        line = [x for x in b.log_text().splitlines() if "the quorum's voters, from" in x]
        check(line, "broker 6 does not say where it learned the voters:\n%s" % b.log_tail())
        print("broker 6 (controller.quorum.bootstrap.servers only): %s; listed by broker 4, an observer" %
              line[0].split("cluster: ", 1)[-1], flush=True)
        rc = b.stop()
        check(rc == 0, "broker 6 exited %s on SIGTERM" % rc)
        wait_for(lambda: brokers_listed(4)[0] == BROKERS, 30, what="broker 6 fenced after its stop")
    finally:
        b.cleanup()


def step7():
    voters = "1@127.0.0.1:%d,2@127.0.0.1:%d,3@127.0.0.1:%d" % tuple(cl.quorum_port(i) for i in CONTROLLERS)
    refused({"node.id": 2, "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0",
             "controller.quorum.bootstrap.servers": bootstrap_servers()},
            "include node.id 2, so process.roles must include controller")
    refused({"node.id": 1, "process.roles": "controller", "controller.quorum.voters": voters,
             "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "listeners")
    refused({"node.id": 2, "process.roles": "broker", "controller.quorum.voters": voters,
             "listeners": "PLAINTEXT://127.0.0.1:0"}, "process.roles must include controller")


def main():
    try:
        step1()
        step2()
        acked = step3()
        step4(acked)
        step5()
        step6()
        step7()
        print("PASS: cluster_roles", flush=True)
    except SystemExit as e:
        cl.explain_failure(e)
        raise
    finally:
        cl.cleanup()


if __name__ == "__main__":
    main()

"""
`strata topics list | describe TOPIC` against a single broker and a
3-node cluster started by scripts/cluster.sh (strata_harness.Cluster).

  1. Bad input: nothing listening -> exit 1 naming the address; `describe`
     without a topic and an unknown verb -> usage, exit 2.
  2. A single broker: a 2-partition topic created with configs
     (retention.ms, max.message.bytes), an idempotent kcat producer
     (enable.idempotence=true, acks=all) per partition, DeleteRecords
     moving partition 0's log start.  `list` shows the topic (and the
     internal __consumer_offsets, marked) with its partitions and
     replication factor; `describe` shows the topic id of the partition's
     partition.metadata, the configs given (and not an untouched one), per
     partition leader, replicas, ISR, log start and high watermark as the
     test made them; and the producers (DescribeProducers, which
     stratad must list in ApiVersions): per partition the one producer id
     found in the partition's batches, its last sequence = records - 1,
     epoch 0, no coordinator epoch or transaction, a timestamp of the last
     minute.  An unknown topic -> exit 1 and a sentence saying it does
     not exist.
  3. 3 nodes: a topic of 3 partitions, replication factor 3,
     min.insync.replicas=2, an idempotent producer per partition.  Through
     two different bootstrap nodes: replicas and ISR {1,2,3}, the leader
     of Metadata, the high watermarks, the producers.  A node that is not
     the controller (the leader of one partition, a follower of the
     others) killed: before it is fenced, its partition is shown without
     offsets and the command exits 1 naming it; once it is fenced, every
     partition's ISR lacks it, its offline replicas name it, no partition
     is led by it, the high watermarks are the same and the producers
     those of the batches (the new leader's, for the partition that
     moved); with the dead node as bootstrap: exit 1 naming its address.
"""
import os
import re
import struct
import time

from kwire import Conn, metadata
from strata_harness import CONFIG, Broker, Cluster, binary, check, free_port, kstr, run, wait_for

SESSION_MS = 3000


def strata(bootstrap, *verb):
    rc, out, err = run([binary("strata"), "topics", "--config", CONFIG, "--bootstrap", bootstrap] + list(verb),
                       check_rc=False, timeout=60)
    return rc, out.decode(), err


def show(what, rc, out, err):
    print("---- %s (exit %d)\n%s%s" % (what, rc, out, err), flush=True)


def parse_list(out):
    """{topic: (id, partitions, rf, internal)}"""
    rows = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) >= 5:
            rows[f[0]] = (f[1], int(f[2]), int(f[3]), f[4] == "yes")
    return rows


def ids(s):
    return [] if s == "-" else [int(x) for x in s.split(",")]


PART = re.compile(r"^(\d+)\s+(none|\d+)\s+(-?\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)(\s+\S+)?$")
PROD = re.compile(r"^  (\d+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s+(\S+Z) \((\d+) s ago\)\s+(\S+)$")


def parse_describe(out):
    """(header {field: value}, configs {k: v}, partitions {p: dict}, producers
    {p: [dict] | the text after "producers: "})."""
    lines = out.splitlines()
    head = dict(re.findall(r"(\w+): ([^\t]*)", lines[0]))
    configs = dict(kv.split("=", 1) for kv in head.get("Configs", "").split(",") if kv)
    parts, prods, cur = {}, {}, None
    for line in lines[1:]:
        m = PART.match(line)
        if m and cur is None:
            g = m.groups()
            parts[int(g[0])] = dict(leader=-1 if g[1] == "none" else int(g[1]), epoch=int(g[2]),
                                    replicas=ids(g[3]), isr=ids(g[4]), offline=ids(g[5]),
                                    start=-1 if g[6] == "-" else int(g[6]), hw=-1 if g[7] == "-" else int(g[7]),
                                    error=(g[8] or "").strip())
            continue
        m = re.match(r"^Partition (\d+) \(leader (none|\d+)\):$", line)
        if m:
            cur = int(m.group(1))
            prods[cur] = []
            continue
        if cur is None:
            continue
        m = PROD.match(line)
        if m:
            g = m.groups()
            prods[cur].append(dict(id=int(g[0]), epoch=int(g[1]), coord=int(g[2]), seq=int(g[3]), ts=g[4],
                                   ago=int(g[5]), txn=g[6]))
        elif line.startswith("  producers: "):
            prods[cur] = line[len("  producers: "):]
    return head, configs, parts, prods


def serves_describe_producers(port):
    """Whether ApiVersions (v0) lists DescribeProducers (61) v0."""
    c = Conn(port)
    try:
        r = c.call(18, 0, b"")
        check(r.take(">h") == 0, "ApiVersions failed")
        for _ in range(r.take(">i")):
            key, lo, hi = r.take(">hhh")
            if key == 61:
                return lo <= 0 <= hi
        return False
    finally:
        c.close()


def batch_producers(port, topic, partition, offset=0):
    """[(producer id, epoch, base sequence, records)] of the partition's batches from offset."""
    c = Conn(port)
    try:
        err, _hw, _start, data = c.fetch(topic, partition, offset)
    finally:
        c.close()
    check(err == 0, "Fetch %s-%d: error %d" % (topic, partition, err))
    out, pos = [], 0
    while pos + 61 <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        pid, epoch, seq, count = struct.unpack_from(">qhii", data, pos + 43)
        out.append((pid, epoch, seq, count))
        pos += 12 + length
    return out


def produce(bootstrap, topic, partition, n):
    run(["kcat", "-b", bootstrap, "-P", "-t", topic, "-p", str(partition), "-X", "enable.idempotence=true",
         "-X", "acks=all"], input=b"".join(b"%s-%d-%d\n" % (topic.encode(), partition, i) for i in range(n)))


def check_producers(port_of, topic, leader_of, prods, counts, what, starts=None):
    """port_of(node): the client port of a node; starts {partition: log start}."""
    for p, n in counts.items():
        batches = batch_producers(port_of(leader_of[p]), topic, p, (starts or {}).get(p, 0))
        pids = {b[0] for b in batches}
        check(len(pids) == 1 and min(pids) >= 0, "%s: partition %d written by producers %s" % (what, p, pids))
        check(batches[-1][2] + batches[-1][3] == n, "%s: partition %d's batches end at sequence %d, not %d: %s" %
              (what, p, batches[-1][2] + batches[-1][3] - 1, n - 1, batches))
        got = prods.get(p)
        check(isinstance(got, list) and len(got) == 1, "%s: partition %d's producers: %r" % (what, p, got))
        (g,) = got
        check(g["id"] == batches[0][0] and g["epoch"] == batches[0][1] == 0,
              "%s: partition %d: producer %s, the batches say %s" % (what, p, g, batches))
        check(g["seq"] == n - 1, "%s: partition %d: last sequence %d after %d records" % (what, p, g["seq"], n))
        check(g["coord"] == -1 and g["txn"] == "-", "%s: partition %d: not transactional: %s" % (what, p, g))
        ts = time.mktime(time.strptime(g["ts"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        check(abs(time.time() - ts) < 120 and g["ago"] < 120, "%s: partition %d: last timestamp %s (%d s ago)" %
              (what, p, g["ts"], g["ago"]))


def errors():
    port = free_port()
    for verb in (["list"], ["describe", "x"]):
        rc, out, err = strata("127.0.0.1:%d" % port, *verb)
        show("%s with nothing listening" % " ".join(verb), rc, out, err)
        check(rc == 1 and "no broker reachable at 127.0.0.1:%d" % port in err and err.count("\n") == 1,
              "exit %d, %r" % (rc, err))
    rc, out, err = strata("127.0.0.1:%d" % port, "describe")
    show("describe without a topic", rc, out, err)
    check(rc == 2 and err.startswith("usage: strata topics"), "exit %d, %r" % (rc, err))
    rc, out, err = strata("127.0.0.1:%d" % port, "bogus")
    check(rc == 2 and "usage" in err, "an unknown verb: exit %d" % rc)


def single():
    b = Broker().start()
    try:
        topic, other = "cli-topics-a", "cli-topics-b"
        c = Conn(b.port)
        check(c.create_topic(topic, 2, 1, {"retention.ms": "3600000", "max.message.bytes": "500000"}) == 0,
              "CreateTopics %s" % topic)
        check(c.create_topic(other, 3, 1) == 0, "CreateTopics %s" % other)
        c.call(10, 0, kstr("cli-topics-grp"))  # FindCoordinator: creates __consumer_offsets
        c.close()
        counts = {0: 7, 1: 4}
        for p, n in counts.items():
            produce(b.bootstrap, topic, p, n)
        c = Conn(b.port)
        check(c.delete_records(topic, 0, 2) == (0, 2), "DeleteRecords to 2")
        c.close()
        c = Conn(b.port)
        wait_for(lambda: "__consumer_offsets" in metadata(c)["topics"], 10, what="__consumer_offsets to exist")
        c.close()

        rc, out, err = strata(b.bootstrap, "list")
        show("list", rc, out, err)
        check(rc == 0, "list exited %d" % rc)
        rows = parse_list(out)
        check(rows[topic][1:] == (2, 1, False) and rows[other][1:] == (3, 1, False), "list: %s" % rows)
        check(rows["__consumer_offsets"][3], "__consumer_offsets not marked internal: %s" % rows)

        rc, out, err = strata(b.bootstrap, "describe", topic)
        show("describe %s" % topic, rc, out, err)
        check(rc == 0, "describe exited %d" % rc)
        head, configs, parts, prods = parse_describe(out)
        with open(os.path.join(b.logdir, topic + "-0", "partition.metadata")) as f:
            tid = re.search(r"topic_id: (\S+)", f.read()).group(1)
        check(head["TopicId"] == tid == rows[topic][0], "topic id %s, partition.metadata %s" % (head["TopicId"], tid))
        check(head["PartitionCount"] == "2" and head["ReplicationFactor"] == "1", "header %s" % head)
        check(configs.get("retention.ms") == "3600000" and configs.get("max.message.bytes") == "500000",
              "configs %s" % configs)
        check("cleanup.policy" not in configs and "min.insync.replicas" not in configs,
              "defaults shown: %s" % configs)
        check(sorted(parts) == [0, 1], "partitions %s" % sorted(parts))
        for p, n in counts.items():
            r = parts[p]
            check(r["leader"] == 1 and r["replicas"] == [1] and r["isr"] == [1] and r["offline"] == [] and
                  r["epoch"] >= 0 and not r["error"], "partition %d: %s" % (p, r))
            check(r["hw"] == n and r["start"] == (2 if p == 0 else 0), "partition %d offsets: %s" % (p, r))
        check(serves_describe_producers(b.port), "stratad does not list DescribeProducers (61) in ApiVersions")
        check_producers(lambda _node: b.port, topic, {0: 1, 1: 1}, prods, counts, "single broker",
                        starts={0: 2})

        rc, out, err = strata(b.bootstrap, "describe", other)
        head, _c, parts, prods = parse_describe(out)
        check(rc == 0 and sorted(parts) == [0, 1, 2] and all(r["hw"] == 0 for r in parts.values()),
              "describe %s: exit %d, %s" % (other, rc, parts))
        check(all(prods[p] == "none" for p in parts), "no producers in %s: %s" % (other, prods))

        rc, out, err = strata(b.bootstrap, "describe", "cli-topics-nope")
        show("describe of an unknown topic", rc, out, err)
        check(rc == 1 and "topic 'cli-topics-nope' does not exist" in err and err.count("\n") == 1 and not out,
              "exit %d, %r" % (rc, err))
    finally:
        b.cleanup()


def three_nodes():
    cl = Cluster(3, overrides={"broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": 500})
    try:
        cl.up()
        topic = "cli-topics-r3"
        c = cl.conn(1, timeout=40)
        check(c.create_topic(topic, 3, 3, {"min.insync.replicas": "2"}) == 0, "CreateTopics %s" % topic)
        c.close()
        md = {}

        def led():
            md.update(cl.metadata(1, [topic])["topics"][topic][1])
            return len(md) == 3 and all(r["leader"] > 0 and len(r["isr"]) == 3 for r in md.values())
        cl.wait(led, 20, "every partition of %s led with 3 in-sync replicas" % topic)
        leader_of = {p: r["leader"] for p, r in md.items()}
        counts = {0: 5, 1: 6, 2: 7}
        for p, n in counts.items():
            produce(cl.bootstrap(), topic, p, n)
        print("leaders %s" % leader_of)
        for node in (1, 2):
            rc, out, err = strata("127.0.0.1:%d" % cl.port(node), "describe", topic)
            show("describe %s through node %d" % (topic, node), rc, out, err)
            check(rc == 0, "describe through node %d exited %d" % (node, rc))
            head, configs, parts, prods = parse_describe(out)
            check(head["PartitionCount"] == "3" and head["ReplicationFactor"] == "3", "header %s" % head)
            check(configs.get("min.insync.replicas") == "2", "configs %s" % configs)
            for p, n in counts.items():
                r = parts[p]
                check(sorted(r["replicas"]) == [1, 2, 3] and sorted(r["isr"]) == [1, 2, 3] and r["offline"] == [],
                      "partition %d: %s" % (p, r))
                check(r["leader"] == leader_of[p] and r["hw"] == n and r["start"] == 0,
                      "partition %d: %s (leader %d, %d records)" % (p, r, leader_of[p], n))
            check_producers(cl.port, topic, leader_of, prods, counts, "through node %d" % node)

        # a follower dies: fenced after the session timeout, out of every ISR
        ctl = cl.wait_leader()
        victim = max(i for i in cl.ids() if i != ctl)
        alive = [i for i in cl.ids() if i != victim]
        cl.kill(victim)
        killed = time.time()
        # before it is fenced (broker.session.timeout.ms) Metadata still
        # names it the leader of its partitions: those are shown unknown,
        # the others whole, and the command fails naming the dead leader
        rc, out, err = strata("127.0.0.1:%d" % cl.port(ctl), "describe", topic)
        show("describe %.1f s after kill -9 of node %d, a leader" % (time.time() - killed, victim), rc, out, err)
        check(time.time() - killed < SESSION_MS / 1000.0 - 0.5, "too slow to see the dead leader unfenced")
        check(rc == 1 and "broker %d, a partition leader" % victim in err and
              "127.0.0.1:%d" % cl.port(victim) in err and err.count("\n") == 1, "exit %d, %r" % (rc, err))
        _h, _c, parts, prods = parse_describe(out)
        for p, n in counts.items():
            dead = leader_of[p] == victim
            check(parts[p]["hw"] == (-1 if dead else n), "partition %d (leader %d): %s" % (p, leader_of[p], parts[p]))
            if dead:
                check(prods[p] == "unknown (broker %d did not answer)" % victim, "partition %d: %r" % (p, prods[p]))
        state = {}

        def no_low_hw(parts):
            # a new leader whose high watermark is still below where its
            # epoch began answers OFFSET_NOT_AVAILABLE (shown as "-"), never
            # an offset below what was acknowledged (Kafka's rule)
            for p, n in counts.items():
                hw = parts[p]["hw"] if p in parts else -1
                check(hw < 0 or hw == n, "partition %d: high watermark %d shown, %d records were "
                      "acknowledged: %s" % (p, hw, n, parts[p]))

        def shrunk():
            rc, out, err = strata("127.0.0.1:%d" % cl.port(ctl), "describe", topic)
            state["d"] = (rc, out, err)
            if rc:
                return False
            parts = parse_describe(out)[2]
            no_low_hw(parts)
            return all(sorted(r["isr"]) == alive and r["offline"] == [victim] and r["leader"] in alive
                       for r in parts.values())
        wait_for(shrunk, SESSION_MS / 1000.0 + 15, interval=0.2,
                 what="node %d out of every ISR and offline" % victim)
        show("describe %.1f s after kill -9 of node %d" % (time.time() - killed, victim), *state["d"])
        # a partition that moved to a new leader: its high watermark comes
        # back once the other in-sync replica has fetched from it
        shrunk_at = time.time()

        def caught_up():
            state["d"] = strata("127.0.0.1:%d" % cl.port(ctl), "describe", topic)
            parts = parse_describe(state["d"][1])[2] if state["d"][0] == 0 else {}
            no_low_hw(parts)
            return len(parts) == 3 and all(parts[p]["hw"] == n for p, n in counts.items())
        if not caught_up():
            wait_for(caught_up, 15, interval=0.2, what="the high watermarks %s again" % counts)
            show("describe %.1f s later, high watermarks back" % (time.time() - shrunk_at), *state["d"])
        _h, _c, parts, prods = parse_describe(state["d"][1])
        for p, n in counts.items():
            check(sorted(parts[p]["replicas"]) == [1, 2, 3] and sorted(parts[p]["isr"]) == alive,
                  "partition %d after the kill: %s" % (p, parts[p]))
        # the new leader of the dead node's partition rebuilt its producers
        # from the batches it appended as a follower
        check_producers(cl.port, topic, {p: r["leader"] for p, r in parts.items()}, prods, counts,
                        "after node %d's partition moved" % victim)

        rc, out, err = strata("127.0.0.1:%d" % cl.port(victim), "describe", topic)
        show("describe through the dead node", rc, out, err)
        check(rc == 1 and "127.0.0.1:%d" % cl.port(victim) in err and err.count("\n") == 1,
              "exit %d, %r" % (rc, err))
        rc, out, err = strata("127.0.0.1:%d" % cl.port(alive[0]), "list")
        show("list through node %d" % alive[0], rc, out, err)
        check(rc == 0 and parse_list(out)[topic][1:] == (3, 3, False), "list: exit %d" % rc)
    except SystemExit as e:
        cl.explain_failure(e)
        raise
    finally:
        cl.cleanup()


def main():
    t0 = time.time()
    errors()
    single()
    print("single broker done after %.1f s" % (time.time() - t0), flush=True)
    three_nodes()
    print("PASS (%.1f s)" % (time.time() - t0), flush=True)


if __name__ == "__main__":
    main()

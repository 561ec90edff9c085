"""
`strata topics list | describe [TOPIC] | create | delete | alter` against
a single broker and two 3-node clusters started by scripts/cluster.sh
(strata_harness.Cluster).

  1. Bad input: nothing listening -> exit 1 naming the address (`list`,
     `describe` of a topic and of every topic, `create`); an unknown verb,
     `create` without a topic, `alter` without a change, a --partitions of
     0, --replica-assignment with --partitions, a replica assignment that
     is not broker ids, an option of another verb -> usage, exit 2.
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
  3. The admin verbs on that broker: `create` with --partitions and
     --config (a value with a comma) prints "Created topic X." and
     describe shows them; again -> exit 1 with TOPIC_ALREADY_EXISTS and
     the broker's message, with --if-not-exists exit 0 and nothing
     printed; without options the broker's num.partitions and
     default.replication.factor; --replication-factor 2 on one broker ->
     INVALID_REPLICATION_FACTOR; an unknown config -> INVALID_CONFIG;
     --replica-assignment 1,1,1 -> 3 partitions on broker 1, naming an
     unregistered broker -> INVALID_REPLICA_ASSIGNMENT.  `alter`
     --partitions raises the count (a lower one -> INVALID_PARTITIONS),
     --config / --delete-config set and remove overrides, a refused config
     with a new partition count changes neither; an unknown topic ->
     UNKNOWN_TOPIC_OR_PARTITION, with --if-exists exit 0.  `delete`
     removes the topic from `list`, again -> UNKNOWN_TOPIC_OR_PARTITION,
     with --if-exists exit 0.  `describe` without a topic shows every
     topic (without __consumer_offsets with --exclude-internal); the
     report options: a topic with min.insync.replicas=2 on one broker is
     under min ISR, the others (the default 1, from DescribeConfigs) at
     min ISR, none under-replicated or unavailable.
  4. 3 nodes: a topic of 3 partitions, replication factor 3,
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
  5. The report options on 3 nodes (replica.lag.time.max.ms 1500,
     broker.session.timeout.ms 2500), topics created through a node that
     is not the controller: R3 (3 partitions, RF 3, min ISR 2), R2 (RF 2
     on nodes K and F, min ISR 2), R1 (RF 1 on node K, the default min
     ISR).  Whole: R2 and R1 at min ISR, nothing else reported.  Node F
     stopped (SIGSTOP): R3's partitions under-replicated and at min ISR,
     R2 under-replicated and under min ISR, R1 at min ISR, nothing
     unavailable; two options at once show the union, a topic named
     only its partitions.  F continued: whole again.  Node K killed:
     once it is fenced R1 has no leader and is the one unavailable
     partition (and under min ISR), R2 under min ISR.
"""
import os
import re
import signal
import struct
import time

from kwire import Conn, describe_configs, metadata
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


PART = re.compile(r"^(\d+)\s+(none|\d+)\s+(-?\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)(\s+\S+)?$")
PROD = re.compile(r"^  (\d+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s+(\S+Z) \((\d+) s ago\)\s+(\S+)$")


def parse_configs(text):
    """"k=v,k2=a,b" -> {k: v, k2: "a,b"}: a piece without "=" belongs to
    the value before it (a list value such as cleanup.policy)."""
    out, last = {}, None
    for kv in text.split(","):
        if "=" in kv:
            last, v = kv.split("=", 1)
            out[last] = v
        elif last is not None and kv:
            out[last] += "," + kv
    return out


def parse_describe(out):
    """(header {field: value}, configs {k: v}, partitions {p: dict}, producers
    {p: [dict] | the text after "producers: "})."""
    lines = out.splitlines()
    head = dict(re.findall(r"(\w+): ([^\t]*)", lines[0]))
    configs = parse_configs(head.get("Configs", ""))
    parts, prods, cur = {}, {}, None
    for line in lines[1:]:
        m = PART.match(line)
        if m and cur is None:
            g = m.groups()
            parts[int(g[0])] = dict(leader=-1 if g[1] == "none" else int(g[1]), epoch=int(g[2]),
                                    replicas=ids(g[3]), isr=ids(g[4]), offline=ids(g[5]),
                                    elr=g[6], last_known_elr=g[7],
                                    start=-1 if g[8] == "-" else int(g[8]), hw=-1 if g[9] == "-" else int(g[9]),
                                    error=(g[10] or "").strip())
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
    addr = "127.0.0.1:%d" % port
    for verb in (["list"], ["describe", "x"], ["describe"], ["describe", "--unavailable-partitions"],
                 ["create", "x"], ["delete", "x"], ["alter", "x", "--partitions", "2"]):
        rc, out, err = strata(addr, *verb)
        show("%s with nothing listening" % " ".join(verb), rc, out, err)
        check(rc == 1 and "no broker reachable at %s" % addr in err and err.count("\n") == 1,
              "exit %d, %r" % (rc, err))
    for verb, why in ((["bogus"], "unknown verb 'bogus'"),
                      (["create"], "create needs a topic"),
                      (["alter", "x"], "alter needs --partitions, --config or --delete-config"),
                      (["create", "x", "--partitions", "0"], "--partitions must be a positive number"),
                      (["create", "x", "--replication-factor", "40000"], "--replication-factor must be"),
                      (["create", "x", "--replica-assignment", "1:2", "--partitions", "1"],
                       "--replica-assignment cannot be used with --partitions"),
                      (["create", "x", "--replica-assignment", "1:,2"], "partition 0's replicas are not broker ids"),
                      (["create", "x", "--config", "retention.ms"], "--config takes key=value"),
                      (["alter", "x", "--delete-config", "a,,b"], "--delete-config takes key names"),
                      (["describe", "--partitions", "3"], "--partitions is not an option of describe"),
                      (["create", "x", "y"], "unexpected argument 'y'"),
                      (["list", "--bogus"], "unknown option --bogus")):
        rc, out, err = strata(addr, *verb)
        first = err.split("\n", 1)[0]
        check(rc == 2 and first.startswith("strata topics: ") and why in first and
              "\nusage: strata topics" in err and not out,
              "%s: exit %d, %r" % (" ".join(verb), rc, err))


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
        admin(b)
    finally:
        b.cleanup()


def refused(what, rc, out, err, name):
    """The broker's refusal: exit 1, one line on stderr with its error name
    and message, nothing on stdout."""
    show(what, rc, out, err)
    check(rc == 1 and not out and err.count("\n") == 1 and re.search(r": %s: \S" % name, err),
          "%s: exit %d, out %r, err %r (wanted %s)" % (what, rc, out, err, name))


def quiet(what, rc, out, err, said=""):
    show(what, rc, out, err)
    check(rc == 0 and out == said and not err, "%s: exit %d, out %r, err %r" % (what, rc, out, err))


def broker_default(key):
    with open(CONFIG) as f:
        for line in f:
            if line.startswith(key + "="):
                return int(line.split("=", 1)[1])
    return 1


def parse_report(out):
    """{(topic, partition): dict} of describe's report table."""
    lines = out.splitlines()
    check(lines and lines[0].split()[:2] == ["TOPIC", "PARTITION"], "no report header: %r" % out)
    rows = {}
    for line in lines[1:]:
        f = line.split()
        rows[(f[0], int(f[1]))] = dict(leader=-1 if f[2] == "none" else int(f[2]), epoch=int(f[3]),
                                       replicas=ids(f[4]), isr=ids(f[5]), offline=ids(f[6]),
                                       min_isr=-1 if f[7] == "-" else int(f[7]),
                                       error=f[8] if len(f) > 8 else "")
    return rows


def report(bootstrap, *args):
    """describe with report options: the rows, or None on a failure."""
    rc, out, err = strata(bootstrap, "describe", *args)
    if rc:
        show("describe %s" % " ".join(args), rc, out, err)
        return None
    return parse_report(out)


def admin(b):
    """create, alter, delete, describe of every topic and the report
    options on one broker."""
    t = "cli-admin-a"
    rc, out, err = strata(b.bootstrap, "create", t, "--partitions", "3", "--config", "retention.ms=7200000",
                          "--config", "cleanup.policy=compact,delete")
    quiet("create %s" % t, rc, out, err, "Created topic %s.\n" % t)
    rc, out, err = strata(b.bootstrap, "describe", t)
    head, configs, parts, _p = parse_describe(out)
    check(rc == 0 and head["PartitionCount"] == "3" and head["ReplicationFactor"] == "1" and sorted(parts) == [0, 1, 2],
          "describe %s: exit %d, %s %s" % (t, rc, head, sorted(parts)))
    check(configs.get("retention.ms") == "7200000" and configs.get("cleanup.policy") == "compact,delete",
          "configs of %s: %s" % (t, configs))
    refused("create of an existing topic", *strata(b.bootstrap, "create", t), name="TOPIC_ALREADY_EXISTS")
    quiet("create --if-not-exists of an existing topic", *strata(b.bootstrap, "create", t, "--if-not-exists"))
    rc, out, err = strata(b.bootstrap, "create", t, "--partitions", "1", "--if-not-exists")
    check(rc == 0 and parse_describe(strata(b.bootstrap, "describe", t)[1])[0]["PartitionCount"] == "3",
          "--if-not-exists changed nothing: exit %d" % rc)

    quiet("create with the broker's defaults", *strata(b.bootstrap, "create", "cli-admin-b"),
          said="Created topic cli-admin-b.\n")
    head = parse_describe(strata(b.bootstrap, "describe", "cli-admin-b")[1])[0]
    check(head["PartitionCount"] == str(broker_default("num.partitions")) and
          head["ReplicationFactor"] == str(broker_default("default.replication.factor")),
          "the broker's defaults: %s" % head)
    refused("replication factor 2 on one broker",
            *strata(b.bootstrap, "create", "cli-admin-x", "--replication-factor", "2"), name="INVALID_REPLICATION_FACTOR")
    refused("an unknown config", *strata(b.bootstrap, "create", "cli-admin-x", "--config", "no.such.config=1"),
            name="INVALID_CONFIG")
    refused("an unregistered broker", *strata(b.bootstrap, "create", "cli-admin-x", "--replica-assignment", "1:7"),
            name="INVALID_REPLICA_ASSIGNMENT")
    quiet("create with --replica-assignment", *strata(b.bootstrap, "create", "cli-admin-c", "--replica-assignment",
                                                      "1,1,1"), said="Created topic cli-admin-c.\n")
    _h, _c, parts, _p = parse_describe(strata(b.bootstrap, "describe", "cli-admin-c")[1])
    check(sorted(parts) == [0, 1, 2] and all(r["replicas"] == [1] for r in parts.values()), "assigned: %s" % parts)
    c = Conn(b.port)
    md = metadata(c, ["cli-admin-x"])
    c.close()
    check(md["topics"]["cli-admin-x"][0] == 3, "a refused create made cli-admin-x: %s" % md["topics"])

    # alter: CreatePartitions and IncrementalAlterConfigs
    quiet("alter --partitions 5", *strata(b.bootstrap, "alter", t, "--partitions", "5"),
          said="Increased the partition count of topic %s to 5.\n" % t)
    refused("alter to fewer partitions", *strata(b.bootstrap, "alter", t, "--partitions", "4"), name="INVALID_PARTITIONS")
    quiet("alter --config --delete-config", *strata(b.bootstrap, "alter", t, "--config", "retention.ms=3600000",
                                                    "--delete-config", "cleanup.policy"),
          said="Completed updating config for topic %s.\n" % t)
    refused("alter with a bad config and more partitions",
            *strata(b.bootstrap, "alter", t, "--partitions", "8", "--config", "min.insync.replicas=x"),
            name="INVALID_CONFIG")
    head, configs, parts, _p = parse_describe(strata(b.bootstrap, "describe", t)[1])
    check(head["PartitionCount"] == "5" and sorted(parts) == [0, 1, 2, 3, 4], "after alter: %s" % head)
    check(configs.get("retention.ms") == "3600000" and "cleanup.policy" not in configs and
          "min.insync.replicas" not in configs, "configs after alter: %s" % configs)
    refused("alter of an unknown topic", *strata(b.bootstrap, "alter", "cli-admin-nope", "--partitions", "2"),
            name="UNKNOWN_TOPIC_OR_PARTITION")
    refused("alter --config of an unknown topic",
            *strata(b.bootstrap, "alter", "cli-admin-nope", "--config", "retention.ms=1"), name="UNKNOWN_TOPIC_OR_PARTITION")
    quiet("alter --if-exists of an unknown topic",
          *strata(b.bootstrap, "alter", "cli-admin-nope", "--partitions", "2", "--config", "retention.ms=1", "--if-exists"))

    # delete
    quiet("delete", *strata(b.bootstrap, "delete", "--topic", "cli-admin-b"), said="Deleted topic cli-admin-b.\n")
    wait_for(lambda: "cli-admin-b" not in parse_list(strata(b.bootstrap, "list")[1]), 10,
             what="cli-admin-b out of the list")
    refused("delete of a deleted topic", *strata(b.bootstrap, "delete", "cli-admin-b"),
            name="UNKNOWN_TOPIC_OR_PARTITION")
    quiet("delete --if-exists", *strata(b.bootstrap, "delete", "cli-admin-b", "--if-exists"))
    refused("delete of an internal topic", *strata(b.bootstrap, "delete", "__consumer_offsets"), name="INVALID_REQUEST")

    # describe of every topic
    names = sorted(parse_list(strata(b.bootstrap, "list")[1]))
    rc, out, err = strata(b.bootstrap, "describe")
    shown = re.findall(r"^Topic: (\S+)\t", out, re.M)
    check(rc == 0 and shown == names and "__consumer_offsets" in shown, "describe of every topic: exit %d, %s, "
          "list %s" % (rc, shown, names))
    rc, out, err = strata(b.bootstrap, "describe", "--exclude-internal")
    shown = re.findall(r"^Topic: (\S+)\t", out, re.M)
    check(rc == 0 and shown == [n for n in names if not n.startswith("__")], "--exclude-internal: %s" % shown)
    check(sorted(parse_list(strata(b.bootstrap, "list", "--exclude-internal")[1])) ==
          [n for n in names if not n.startswith("__")], "list --exclude-internal")

    # report options: min.insync.replicas 2 with one replica is under min
    # ISR; the others are at it (the default, 1), none under-replicated
    quiet("create cli-admin-m2", *strata(b.bootstrap, "create", "cli-admin-m2", "--partitions", "2",
                                         "--config", "min.insync.replicas=2"), said="Created topic cli-admin-m2.\n")
    c = Conn(b.port)
    md = metadata(c)["topics"]
    mins = {n: int(cfg["min.insync.replicas"]) for n, (_e, cfg) in describe_configs(c, sorted(md)).items()}
    c.close()
    check(mins["cli-admin-m2"] == 2 and mins[t] == 1, "min.insync.replicas by DescribeConfigs: %s" % mins)

    def expect(pred, internal=True):
        return {(n, p) for n, (_e, ps) in md.items() for p, r in ps.items()
                if pred(n, r) and (internal or not n.startswith("__"))}
    m2 = {("cli-admin-m2", 0), ("cli-admin-m2", 1)}
    check(expect(lambda n, r: r["leader"] < 0 or len(r["isr"]) < mins[n], False) == m2, "the test's premise")
    rows = report(b.bootstrap, "--under-min-isr-partitions")
    check(rows is not None and set(rows) == expect(lambda n, r: r["leader"] < 0 or len(r["isr"]) < mins[n]) and
          all(r["min_isr"] == 2 and r["isr"] == [1] for k, r in rows.items() if k in m2),
          "under min ISR: %s" % rows)
    at_min = expect(lambda n, r: len(r["isr"]) == mins[n])
    rows = report(b.bootstrap, "--at-min-isr-partitions")
    check(rows is not None and set(rows) == at_min and not (m2 & set(rows)) and
          all(r["min_isr"] == mins[k[0]] for k, r in rows.items()), "at min ISR: %s" % sorted(rows or {}))
    rows = report(b.bootstrap, "--at-min-isr-partitions", "--exclude-internal")
    check(rows is not None and set(rows) == expect(lambda n, r: len(r["isr"]) == mins[n], False) and
          (t, 4) in rows and ("cli-topics-b", 2) in rows, "--exclude-internal: %s" % sorted(rows or {}))
    rows = report(b.bootstrap, "cli-admin-m2", "--at-min-isr-partitions", "--under-min-isr-partitions")
    check(rows is not None and set(rows) == m2, "one topic: %s" % rows)
    for opt in ("--under-replicated-partitions", "--unavailable-partitions"):
        rows = report(b.bootstrap, opt)
        check(rows == {}, "%s on one live broker: %s" % (opt, rows))
    rc, out, err = strata(b.bootstrap, "describe", "cli-admin-nope", "--unavailable-partitions")
    check(rc == 1 and "topic 'cli-admin-nope' does not exist" in err, "report of an unknown topic: exit %d" % rc)


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


def reports():
    """The report options on 3 nodes while a follower is stopped and a
    node is killed."""
    cl = Cluster(3, overrides={"broker.session.timeout.ms": "2500", "broker.heartbeat.interval.ms": "300",
                               "replica.lag.time.max.ms": "1500"})
    try:
        cl.up()
        ctl = cl.wait_leader()
        f, k = [i for i in cl.ids() if i != ctl]
        r3, r2, r1 = "cli-rep-3", "cli-rep-2", "cli-rep-1"
        # through a node that is not the controller: it forwards them
        via = "127.0.0.1:%d" % cl.port(k)
        for args in ([r3, "--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2"],
                     [r2, "--replica-assignment", "%d:%d" % (k, f), "--config", "min.insync.replicas=2"],
                     [r1, "--replica-assignment", str(k)]):
            quiet("create %s through node %d" % (" ".join(args), k), *strata(via, "create", *args),
                  said="Created topic %s.\n" % args[0])
        cl.wait_isr(r3, 3, 3, timeout=30)
        cl.wait_isr(r2, 1, 2, timeout=30)
        cl.wait_isr(r1, 1, 1, timeout=30)
        at_ctl = "127.0.0.1:%d" % cl.port(ctl)
        opts = ("--under-replicated-partitions", "--under-min-isr-partitions", "--at-min-isr-partitions",
                "--unavailable-partitions")
        state = {}

        def reported(want, what, timeout=30):
            """Until each option reports the partitions of want[option]."""
            def now():
                state.clear()
                for o in opts:
                    state[o] = report(at_ctl, o)
                    if state[o] is None or set(state[o]) != want[o]:
                        return False
                return True
            t0 = time.time()
            if not now():
                try:
                    wait_for(now, timeout, interval=0.2, what=what)
                except SystemExit:
                    for o in opts:
                        print("%s: %s" % (o, sorted(state.get(o) or {})), flush=True)
                    raise
            print("%s after %.1f s: %s" % (what, time.time() - t0,
                                           {o: sorted(state[o]) for o in opts}), flush=True)
            return state

        all3 = {(r3, 0), (r3, 1), (r3, 2)}
        reported({opts[0]: set(), opts[1]: set(), opts[2]: {(r2, 0), (r1, 0)}, opts[3]: set()}, "a whole cluster")
        check(state[opts[2]][(r2, 0)]["min_isr"] == 2 and state[opts[2]][(r1, 0)]["min_isr"] == 1,
              "min ISR: the topic's 2 and the default 1: %s" % state[opts[2]])

        os.kill(cl.pid(f), signal.SIGSTOP)
        try:
            # out of the ISRs after replica.lag.time.max.ms; its own
            # partitions move once it is fenced
            got = reported({opts[0]: all3 | {(r2, 0)}, opts[1]: {(r2, 0)}, opts[2]: all3 | {(r1, 0)},
                            opts[3]: set()}, "node %d stopped" % f)
            for key in all3:
                r = got[opts[0]][key]
                check(sorted(r["isr"]) == sorted([ctl, k]) and r["leader"] in (ctl, k) and r["min_isr"] == 2,
                      "%s-%d with node %d stopped: %s" % (key[0], key[1], f, r))
            r = got[opts[1]][(r2, 0)]
            check(r["isr"] == [k] and r["leader"] == k and sorted(r["replicas"]) == sorted([k, f]),
                  "%s-0 with node %d stopped: %s" % (r2, f, r))
            rows = report(at_ctl, "--under-replicated-partitions", "--under-min-isr-partitions")
            check(rows is not None and set(rows) == all3 | {(r2, 0)}, "two options: %s" % rows)
            rows = report(at_ctl, r3, "--under-replicated-partitions")
            check(rows is not None and set(rows) == all3, "one topic: %s" % rows)
            rows = report(at_ctl, r2, "--at-min-isr-partitions")
            check(rows == {}, "%s at min ISR: %s" % (r2, rows))
        finally:
            os.kill(cl.pid(f), signal.SIGCONT)
        reported({opts[0]: set(), opts[1]: set(), opts[2]: {(r2, 0), (r1, 0)}, opts[3]: set()},
                 "node %d continued" % f, timeout=60)

        # the only replica of r1 dies: once node k is fenced, r1 has no leader
        cl.kill(k)
        state.clear()

        def led_by_nobody():
            state["u"] = report(at_ctl, "--unavailable-partitions")
            return state["u"] is not None and set(state["u"]) == {(r1, 0)}
        wait_for(led_by_nobody, 30, interval=0.2, what="%s-0 unavailable" % r1)
        r = state["u"][(r1, 0)]
        check(r["leader"] == -1 and r["replicas"] == [k], "%s-0 with node %d dead: %s" % (r1, k, r))
        # a partition without a leader is under min ISR whatever its ISR
        # says; under-replicated and at min ISR go by the ISR shown
        isr1 = len(r["isr"])
        got = reported({opts[0]: all3 | {(r2, 0)} | ({(r1, 0)} if isr1 < 1 else set()),
                        opts[1]: {(r2, 0), (r1, 0)},
                        opts[2]: all3 | ({(r1, 0)} if isr1 == 1 else set()),
                        opts[3]: {(r1, 0)}}, "node %d killed" % k)
        r = got[opts[1]][(r2, 0)]
        check(r["leader"] == f and r["isr"] == [f] and r["offline"] == [k], "%s-0 with node %d dead: %s" % (r2, k, r))
        rc, out, err = strata(at_ctl, "describe", "--unavailable-partitions")
        show("describe --unavailable-partitions", rc, out, err)
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
    print("3 nodes done after %.1f s" % (time.time() - t0), flush=True)
    reports()
    print("PASS (%.1f s)" % (time.time() - t0), flush=True)


if __name__ == "__main__":
    main()

"""
ListGroups v5 (KIP-848: types_filter, group_type) and authorized
operations (KIP-430) as Kafka reports them without an authorizer: every
operation the resource type supports.

  1. Three groups: two that only commit offsets (Empty) and one with a
     member (Stable).  ListGroups v5 lists all three with group_type
     "classic"; the types filter "classic" (any case) keeps them all,
     "consumer" lists none; states and types filters combine.  v4 still
     answers without types.
  2. DescribeCluster v0 with include_cluster_authorized_operations: the
     cluster's operations (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
     DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE); without it
     INT32_MIN (not asked).
  3. Metadata v8 with both include flags: every topic answered, also an
     unknown one, carries the topic operations (READ, WRITE, CREATE,
     DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS), and the
     cluster its operations.
  4. DescribeGroups v3 with include_authorized_operations: READ, DELETE,
     DESCRIBE.
"""
import struct
import time

from kwire import Conn, compact_str, flex_call, uvarint
from strata_harness import Broker, check, fail, kstr

OPS = {"READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
       "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}


def bits(*names):
    return sum(1 << OPS[n] for n in names)


TOPIC_OPS = bits("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
                 "ALTER_CONFIGS")
CLUSTER_OPS = bits("CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
                   "ALTER_CONFIGS", "IDEMPOTENT_WRITE")
GROUP_OPS = bits("READ", "DELETE", "DESCRIBE")
NOT_ASKED = -2147483648
RETRIABLE = (14, 15, 16)


def cstr_array(items):
    return uvarint(len(items) + 1) + b"".join(compact_str(s) for s in items)


def list_groups(conn, version, states=(), types=()):
    body = cstr_array(states)
    if version >= 5:
        body += cstr_array(types)
    c = flex_call(conn, 16, version, body + b"\x00")
    c.take(">i")
    err = c.take(">h")
    out = {}
    for _ in range(c.uvarint() - 1):
        gid, ptype, state = c.compact_string(), c.compact_string(), c.compact_string()
        gtype = c.compact_string() if version >= 5 else None
        c.skip_tags()
        out[gid] = (ptype, state, gtype)
    return err, out


def describe_cluster(conn, include):
    c = flex_call(conn, 60, 0, struct.pack(">b", 1 if include else 0) + b"\x00")
    c.take(">i")
    err = c.take(">h")
    c.compact_string()  # error message
    c.compact_string()  # cluster id
    c.take(">i")  # controller
    for _ in range(c.uvarint() - 1):
        c.take(">i")
        c.compact_string()
        c.take(">i")
        c.compact_string()
        c.skip_tags()
    return err, c.take(">i")


def metadata_v8(conn, topics, include):
    body = struct.pack(">i", len(topics)) + b"".join(kstr(t) for t in topics)
    body += struct.pack(">bbb", 0, 1 if include else 0, 1 if include else 0)
    c = conn.call(3, 8, body)
    c.take(">i")  # throttle
    for _ in range(c.take(">i")):
        c.take(">i")
        c.string()
        c.take(">i")
        c.string()
    c.string()  # cluster id
    c.take(">i")  # controller
    out = {}
    for _ in range(c.take(">i")):
        err = c.take(">h")
        name = c.string()
        c.take(">b")
        for _ in range(c.take(">i")):
            c.take(">hiii")
            for _ in range(3):
                for _ in range(c.take(">i")):
                    c.take(">i")
        out[name] = (err, c.take(">i"))
    return out, c.take(">i")


def describe_groups_v3(conn, group):
    body = struct.pack(">i", 1) + kstr(group) + struct.pack(">b", 1)
    c = conn.call(15, 3, body)
    c.take(">i")  # throttle
    check(c.take(">i") == 1, "one group")
    err = c.take(">h")
    c.string()
    state = c.string()
    c.string()
    c.string()
    for _ in range(c.take(">i")):
        c.string(), c.string(), c.string(), c.bytes_(), c.bytes_()
    return err, state, c.take(">i")


def retry(fn, what):
    for _ in range(100):
        r = fn()
        if r not in RETRIABLE:
            return r
        time.sleep(0.1)
    fail("%s: still %s" % (what, r))


def commit(conn, group):
    body = kstr(group) + struct.pack(">i", -1) + kstr("") + struct.pack(">q", -1)
    body += struct.pack(">i", 1) + kstr("lg-t") + struct.pack(">i", 1) + struct.pack(">iq", 0, 1)
    body += kstr("")
    c = conn.call(8, 2, body)
    c.take(">i")
    c.string()
    c.take(">i")
    return c.take(">ih")[1]


def join_and_sync(conn, group):
    body = kstr(group) + struct.pack(">i", 10000) + kstr("") + kstr("consumer")
    body += struct.pack(">i", 1) + kstr("range") + struct.pack(">i", 0)
    c = conn.call(11, 0, body)
    err, gen = c.take(">hi")
    c.string()
    c.string()
    member = c.string()
    check(err == 0, "JoinGroup: error %d" % err)
    body = kstr(group) + struct.pack(">i", gen) + kstr(member) + struct.pack(">i", 0)
    c = conn.call(14, 0, body)
    check(c.take(">h") == 0, "SyncGroup")


b = Broker({"group.initial.rebalance.delay.ms": "0"}).start()
try:
    conn = Conn(b.port)
    check(conn.create_topic("lg-t", 1) == 0, "create topic")
    conn.call(10, 0, kstr("lg-a"))  # FindCoordinator: creates __consumer_offsets
    retry(lambda: commit(conn, "lg-a"), "commit lg-a")
    retry(lambda: commit(conn, "lg-b"), "commit lg-b")
    join_and_sync(conn, "lg-live")

    # 1. ListGroups v5
    err, groups = list_groups(conn, 5)
    print("ListGroups v5: %s" % sorted(groups.items()), flush=True)
    check(err == 0 and set(groups) == {"lg-a", "lg-b", "lg-live"}, "groups %s" % groups)
    check(all(g[2] == "classic" for g in groups.values()), "group types %s" % groups)
    check(groups["lg-live"][:2] == ("consumer", "Stable") and groups["lg-a"][1] == "Empty",
          "states %s" % groups)
    for types, want in ((["classic"], 3), (["CLASSIC"], 3), (["consumer"], 0),
                        (["consumer", "classic"], 3), (["share"], 0)):
        err, got = list_groups(conn, 5, types=types)
        check(err == 0 and len(got) == want, "types filter %s: %s, want %d" % (types, sorted(got), want))
    err, got = list_groups(conn, 5, states=["stable"], types=["Classic"])
    check(set(got) == {"lg-live"}, "states + types filter: %s" % sorted(got))
    err, got = list_groups(conn, 4, states=["Empty"])
    check(err == 0 and set(got) == {"lg-a", "lg-b"} and got["lg-a"][2] is None, "ListGroups v4: %s" % got)
    print("ListGroups v5 filters: classic (any case) keeps all, consumer/share none, states combine",
          flush=True)

    # 2. DescribeCluster
    err, ops = describe_cluster(conn, True)
    print("DescribeCluster cluster_authorized_operations %d (want %d)" % (ops, CLUSTER_OPS), flush=True)
    check(err == 0 and ops == CLUSTER_OPS, "cluster operations %d, want %d" % (ops, CLUSTER_OPS))
    check(describe_cluster(conn, False) == (0, NOT_ASKED), "not asked: INT32_MIN")

    # 3. Metadata v8
    topics, cops = metadata_v8(conn, ["lg-t", "no-such-topic"], True)
    print("Metadata v8: topics %s, cluster %d" % (topics, cops), flush=True)
    check(topics.get("lg-t") == (0, TOPIC_OPS), "lg-t: %s, want ops %d" % (topics.get("lg-t"), TOPIC_OPS))
    check(topics.get("no-such-topic") == (3, TOPIC_OPS), "unknown topic: %s" % (topics.get("no-such-topic"),))
    check(cops == CLUSTER_OPS, "Metadata cluster operations %d, want %d" % (cops, CLUSTER_OPS))
    topics, cops = metadata_v8(conn, ["lg-t"], False)
    check(topics["lg-t"][1] == NOT_ASKED and cops == NOT_ASKED, "not asked: %s %d" % (topics, cops))

    # 4. DescribeGroups
    err, state, gops = describe_groups_v3(conn, "lg-live")
    check(err == 0 and state == "Stable" and gops == GROUP_OPS, "DescribeGroups: %d %s %d" % (err, state, gops))
    print("DescribeGroups v3 authorized_operations %d" % gops, flush=True)
    conn.close()
except SystemExit:
    print(b.log_tail(30))
    raise
except (ConnectionError, OSError, struct.error) as e:
    print(b.log_tail(30))
    fail("%s: %s" % (type(e).__name__, e))
finally:
    rc = b.stop()
    if rc != 0:
        print(b.log_tail(60))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

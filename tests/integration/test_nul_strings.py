"""
Strings are length-based end to end: a NUL byte inside a group id, a
member id, a client id, a protocol name or commit metadata is kept, never
cut (Kafka's strings are counted, not terminated).  A topic name with a NUL
is not a topic name: refused as invalid, never matched against a shorter
topic.

  1. OffsetCommit v2 with metadata "Hello\\0world!": OffsetFetch v1 gives it
     back whole.
  2. Groups "g\\0a" and "g\\0b" are two groups: each keeps its own offset;
     ListGroups names both, whole.
  3. Topic "r\\0AAA" while "r" exists: Metadata answers
     INVALID_TOPIC_EXCEPTION for "r\\0AAA" (and creates nothing); a commit
     to it gets UNKNOWN_TOPIC_OR_PARTITION and lands nowhere.
  4. A member whose client id is "cl\\0ient" joins (JoinGroup v0) with the
     protocol "ra\\0nge": its member id starts with "cl\\0ient-", the
     response names "ra\\0nge"; SyncGroup, Heartbeat and DescribeGroups
     speak of the same bytes, and a heartbeat under the id cut at the NUL
     is UNKNOWN_MEMBER_ID.
  5. After a restart (the groups replayed from __consumer_offsets) all of
     it is still the same bytes.
"""
import socket
import struct
import time

from kwire import Conn, Cursor
from strata_harness import Broker, check, fail, frame, kstr, read_frame

META = b"Hello\x00world!"
TOPIC = "nul"
CLIENT = b"cl\x00ient"
PROTO = b"ra\x00nge"
JGROUP = b"nul-join"


def rstr(c):
    """A classic string as raw bytes (None when null)."""
    n = c.take(">h")
    if n < 0:
        return None
    v = c.d[c.p:c.p + n]
    c.p += n
    return v


def rbytes(c):
    n = c.take(">i")
    if n < 0:
        return None
    v = c.d[c.p:c.p + n]
    c.p += n
    return v


def call(conn, api, version, body, client_id=b"strata-test"):
    conn.corr += 1
    conn.s.sendall(frame(struct.pack(">hhi", api, version, conn.corr) + kstr(client_id) + body))
    r = read_frame(conn.s)
    if r is None:
        fail("the broker closed the connection (api %d v%d)" % (api, version))
    c = Cursor(r)
    check(c.take(">i") == conn.corr, "correlation id")
    return c


def find_coordinator(conn, group):
    """FindCoordinator v0 (the first one creates __consumer_offsets)."""
    c = call(conn, 10, 0, kstr(group))
    return c.take(">h")


RETRIABLE = (14, 15, 16)  # load in progress, not available, not coordinator


def commit(conn, group, topic, partition, offset, metadata):
    """OffsetCommit v2, no membership: the partition's error (retried while
    the coordinator is loading)."""
    for _ in range(100):
        err = commit_once(conn, group, topic, partition, offset, metadata)
        if err not in RETRIABLE:
            return err
        time.sleep(0.1)
    return err


def commit_once(conn, group, topic, partition, offset, metadata):
    body = kstr(group) + struct.pack(">i", -1) + kstr(b"") + struct.pack(">q", -1)
    body += struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 1)
    body += struct.pack(">iq", partition, offset) + kstr(metadata)
    c = call(conn, 8, 2, body)
    c.take(">i")
    rstr(c)
    c.take(">i")
    _p, err = c.take(">ih")
    return err


def fetch_offset(conn, group, topic, partition):
    """OffsetFetch v1: (offset, metadata, error)."""
    body = kstr(group) + struct.pack(">i", 1) + kstr(topic) + struct.pack(">ii", 1, partition)
    c = call(conn, 9, 1, body)
    c.take(">i")
    rstr(c)
    c.take(">i")
    _p, off = c.take(">iq")
    meta = rstr(c)
    err = c.take(">h")
    return off, meta, err


def list_groups(conn):
    c = call(conn, 16, 0, b"")
    check(c.take(">h") == 0, "ListGroups error")
    return {rstr(c): rstr(c) for _ in range(c.take(">i"))}


def metadata(conn, topic):
    """Metadata v1 for one topic: (error, name as answered, partitions)."""
    c = call(conn, 3, 1, struct.pack(">i", 1) + kstr(topic))
    for _ in range(c.take(">i")):
        c.take(">i")
        rstr(c)
        c.take(">i")
        rstr(c)
    c.take(">i")  # controller
    out = []
    for _ in range(c.take(">i")):
        err = c.take(">h")
        name = rstr(c)
        c.take(">b")
        nparts = c.take(">i")
        for _ in range(nparts):
            c.take(">hii")  # error, index, leader
            for _ in range(2):  # replicas, isr
                for _ in range(c.take(">i")):
                    c.take(">i")
        out.append((err, name, nparts))
    return out


def join_v0(conn):
    """JoinGroup v0 as client CLIENT with protocol PROTO: (error, generation,
    protocol, leader, member id, members)."""
    body = kstr(JGROUP) + struct.pack(">i", 10000) + kstr(b"") + kstr(b"consumer")
    body += struct.pack(">i", 1) + kstr(PROTO) + struct.pack(">i", 4) + b"\x00m\x00d"
    c = call(conn, 11, 0, body, client_id=CLIENT)
    err, gen = c.take(">hi")
    proto, leader, member = rstr(c), rstr(c), rstr(c)
    members = [(rstr(c), rbytes(c)) for _ in range(c.take(">i"))]
    return err, gen, proto, leader, member, members


def sync_v0(conn, gen, member, assignment):
    body = kstr(JGROUP) + struct.pack(">i", gen) + kstr(member)
    body += struct.pack(">i", 1) + kstr(member) + struct.pack(">i", len(assignment)) + assignment
    c = call(conn, 14, 0, body, client_id=CLIENT)
    return c.take(">h"), rbytes(c)


def heartbeat(conn, gen, member):
    c = call(conn, 12, 0, kstr(JGROUP) + struct.pack(">i", gen) + kstr(member), client_id=CLIENT)
    return c.take(">h")


def describe(conn, group):
    """DescribeGroups v0 of one group: (error, state, protocol type,
    protocol, [(member id, client id, host, metadata, assignment)])."""
    c = call(conn, 15, 0, struct.pack(">i", 1) + kstr(group))
    c.take(">i")
    err = c.take(">h")
    rstr(c)
    state, ptype, proto = rstr(c), rstr(c), rstr(c)
    members = [(rstr(c), rstr(c), rstr(c), rbytes(c), rbytes(c)) for _ in range(c.take(">i"))]
    return err, state, ptype, proto, members


b = Broker({"group.initial.rebalance.delay.ms": "0"}).start()
try:
    conn = Conn(b.port)
    check(conn.create_topic(TOPIC, 1) == 0, "create %s" % TOPIC)
    check(conn.create_topic("r", 1) == 0, "create r")

    for _ in range(100):
        if find_coordinator(conn, b"nul-g") == 0:
            break
        time.sleep(0.1)

    # 1. metadata with a NUL
    check(commit(conn, b"nul-g", TOPIC, 0, 5, META) == 0, "commit")
    off, meta, err = fetch_offset(conn, b"nul-g", TOPIC, 0)
    print("commit metadata %r read back as %r (offset %d)" % (META, meta, off), flush=True)
    check(err == 0 and off == 5 and meta == META, "metadata %r, want %r" % (meta, META))

    # 2. group ids that differ after a NUL
    check(commit(conn, b"g\x00a", TOPIC, 0, 1, b"a") == 0, "commit g\\0a")
    check(commit(conn, b"g\x00b", TOPIC, 0, 2, b"b") == 0, "commit g\\0b")
    got = [fetch_offset(conn, g, TOPIC, 0)[:2] for g in (b"g\x00a", b"g\x00b", b"g")]
    print("groups g\\0a, g\\0b, g hold %s" % got, flush=True)
    check(got == [(1, b"a"), (2, b"b"), (-1, b"")], "group offsets %s" % got)
    groups = list_groups(conn)
    check(b"g\x00a" in groups and b"g\x00b" in groups and b"g" not in groups,
          "ListGroups: %s" % sorted(groups))

    # 3. a topic name with a NUL
    md = metadata(conn, b"r\x00AAA")
    print("Metadata for r\\0AAA: %s" % md, flush=True)
    check(md == [(17, b"r\x00AAA", 0)], "want INVALID_TOPIC_EXCEPTION (17) for r\\0AAA, got %s" % md)
    check(commit(conn, b"nul-g", b"r\x00AAA", 0, 9, b"") == 3,
          "a commit to r\\0AAA must be UNKNOWN_TOPIC_OR_PARTITION")
    check(fetch_offset(conn, b"nul-g", "r", 0)[0] == -1, "the commit to r\\0AAA landed on r")
    check(metadata(conn, "r")[0][:1] == (0,), "r is still there")

    # 4. member id, client id, protocol name with NULs
    err, gen, proto, leader, member, members = join_v0(conn)
    print("JoinGroup: error %d, generation %d, protocol %r, member %r" % (err, gen, proto, member),
          flush=True)
    check(err == 0 and proto == PROTO, "JoinGroup protocol %r (error %d)" % (proto, err))
    check(member.startswith(CLIENT + b"-") and len(member) == len(CLIENT) + 37,
          "member id %r must be the whole client id, '-', a UUID" % member)
    check(leader == member and members == [(member, b"\x00m\x00d")], "leader / members %r" % members)
    err, assignment = sync_v0(conn, gen, member, b"\x00as\x00")
    check(err == 0 and assignment == b"\x00as\x00", "SyncGroup: %d %r" % (err, assignment))
    check(heartbeat(conn, gen, member) == 0, "heartbeat")
    check(heartbeat(conn, gen, b"cl") == 25, "a heartbeat under the id cut at the NUL is unknown")
    d = describe(conn, JGROUP)
    print("DescribeGroups: %s" % (d,), flush=True)
    check(d[:4] == (0, b"Stable", b"consumer", PROTO), "DescribeGroups %s" % (d,))
    check(d[4] and d[4][0][0] == member and d[4][0][1] == CLIENT and d[4][0][3] == b"\x00m\x00d"
          and d[4][0][4] == b"\x00as\x00", "DescribeGroups member %s" % (d[4],))
    conn.close()

    # 5. the same after a restart
    check(b.stop() == 0, "stop")
    b.start()
    conn = Conn(b.port)

    def loaded():
        try:
            return fetch_offset(conn, b"nul-g", TOPIC, 0)[2] == 0
        except (ConnectionError, socket.timeout):
            return False

    for _ in range(100):  # the coordinator loads the partition after start-up
        if loaded():
            break
        time.sleep(0.1)
    off, meta, err = fetch_offset(conn, b"nul-g", TOPIC, 0)
    check(err == 0 and meta == META, "after the restart: metadata %r (error %d)" % (meta, err))
    got = [fetch_offset(conn, g, TOPIC, 0)[:2] for g in (b"g\x00a", b"g\x00b")]
    check(got == [(1, b"a"), (2, b"b")], "after the restart: %s" % got)
    d = describe(conn, JGROUP)
    check(d[3] == PROTO and d[4] and d[4][0][0] == member and d[4][0][1] == CLIENT,
          "after the restart: DescribeGroups %s" % (d,))
    check(heartbeat(conn, gen, member) == 0, "after the restart: heartbeat")
    print("after a restart: metadata, group ids, member and client ids, protocol unchanged",
          flush=True)
    conn.close()
except SystemExit:
    print(b.log_tail(30))
    raise
finally:
    rc = b.stop()
    if rc != 0:
        print(b.log_tail(60))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

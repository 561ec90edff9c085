"""
Hostile and wrong group requests, sent by hand, against a real stratad:
each gets Kafka's error and the group keeps working.

  - OffsetCommit naming a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION
    for it, the other partitions of the same request are committed
  - JoinGroup with an empty protocol list: INCONSISTENT_GROUP_PROTOCOL
  - SyncGroup from a stale generation: ILLEGAL_GENERATION
  - a member whose metadata is larger than a record may be (2 MiB against
    message.max.bytes): the leader's SyncGroup gets UNKNOWN_SERVER_ERROR (the
    group's record cannot be stored, as in Kafka) and the group rebalances;
    once that member leaves, the next generation forms and is stored
  - and around them: a session timeout out of bounds, an empty group id,
    metadata above offset.metadata.max.bytes, an unknown member, DeleteGroups
    of a live group, OffsetDelete of a subscribed topic, garbage bodies;
    offsets of a deleted topic are removed
  - afterwards a restart replays the group as it last was, and kcat's
    balanced consumer works in it
"""
import random
import socket
import struct
import threading
import time

from kwire import Conn, Cursor, delete_topic
from strata_harness import Broker, check, fail, kcat, kstr, read_frame, request

TOPIC = "grp-bad"
E_NONE, E_UNKNOWN_TOPIC, E_METADATA_TOO_LARGE = 0, 3, 12
E_ILLEGAL_GENERATION, E_INCONSISTENT_PROTOCOL, E_INVALID_GROUP_ID = 22, 23, 24
E_UNKNOWN_MEMBER, E_INVALID_SESSION, E_REBALANCE, E_UNKNOWN_SERVER = 25, 26, 27, -1
E_NON_EMPTY, E_SUBSCRIBED = 68, 86
E_LOAD_IN_PROGRESS, E_NOT_COORDINATOR = 14, 16


def kbytes(b):
    return struct.pack(">i", len(b)) + b


def subscription(topics):
    """ConsumerProtocolSubscription v0."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(kstr(t) for t in topics) + struct.pack(">i", -1)


def assignment(parts):
    """ConsumerProtocolAssignment v0: one topic."""
    return struct.pack(">hi", 0, 1) + kstr(TOPIC) + struct.pack(">i", len(parts)) + \
        b"".join(struct.pack(">i", p) for p in parts) + struct.pack(">i", -1)


class G(Conn):
    """Group requests in classic versions."""

    def find(self, group):
        """FindCoordinator v0 -> (error, node, host, port)."""
        c = self.call(10, 0, kstr(group))
        err, node = c.take(">hi")
        host = c.string()
        return err, node, host, c.take(">i")

    def join(self, group, member="", protocols=None, session=10000, meta=None):
        """JoinGroup v1 -> (error, generation, protocol, leader, member id, [member ids])."""
        protocols = [("range", meta if meta is not None else subscription([TOPIC]))] if protocols is None else protocols
        body = kstr(group) + struct.pack(">ii", session, 10000) + kstr(member) + kstr("consumer")
        body += struct.pack(">i", len(protocols)) + b"".join(kstr(n) + kbytes(m) for n, m in protocols)
        c = self.call(11, 1, body)
        err, gen = c.take(">hi")
        proto, leader, mid = c.string(), c.string(), c.string()
        members = []
        for _ in range(c.take(">i")):
            members.append(c.string())
            c.bytes_()
        return err, gen, proto, leader, mid, members

    def sync(self, group, gen, member, assignments=()):
        body = kstr(group) + struct.pack(">i", gen) + kstr(member) + struct.pack(">i", len(assignments))
        body += b"".join(kstr(m) + kbytes(a) for m, a in assignments)
        c = self.call(14, 1, body)
        c.take(">i")
        err = c.take(">h")
        return err, c.bytes_()

    def heartbeat(self, group, gen, member):
        c = self.call(12, 1, kstr(group) + struct.pack(">i", gen) + kstr(member))
        c.take(">i")
        return c.take(">h")

    def leave(self, group, member):
        c = self.call(13, 1, kstr(group) + kstr(member))
        c.take(">i")
        return c.take(">h")

    def commit(self, group, parts, gen=-1, member=""):
        """OffsetCommit v2; parts [(topic, partition, offset, metadata)] -> {(t, p): error}."""
        by_topic = {}
        for t, p, o, m in parts:
            by_topic.setdefault(t, []).append((p, o, m))
        body = kstr(group) + struct.pack(">i", gen) + kstr(member) + struct.pack(">q", -1)
        body += struct.pack(">i", len(by_topic))
        for t, ps in by_topic.items():
            body += kstr(t) + struct.pack(">i", len(ps))
            body += b"".join(struct.pack(">iq", p, o) + kstr(m) for p, o, m in ps)
        c = self.call(8, 2, body)
        out = {}
        for _ in range(c.take(">i")):
            t = c.string()
            for _ in range(c.take(">i")):
                p, err = c.take(">ih")
                out[(t, p)] = err
        return out

    def fetch_offsets(self, group, topic, parts):
        """OffsetFetch v1 -> {partition: (offset, metadata, error)}."""
        body = kstr(group) + struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", len(parts))
        body += b"".join(struct.pack(">i", p) for p in parts)
        c = self.call(9, 1, body)
        out = {}
        for _ in range(c.take(">i")):
            c.string()
            for _ in range(c.take(">i")):
                p, o = c.take(">iq")
                m = c.string()
                out[p] = (o, m, c.take(">h"))
        return out

    def describe(self, group):
        """DescribeGroups v1 -> (error, state, [member ids])."""
        c = self.call(15, 1, struct.pack(">i", 1) + kstr(group))
        c.take(">ii")  # throttle, one group
        err = c.take(">h")
        c.string()
        state = c.string()
        c.string()
        c.string()
        members = []
        for _ in range(c.take(">i")):
            members.append(c.string())
            c.string()
            c.string()
            c.bytes_()
            c.bytes_()
        return err, state, members

    def delete_groups(self, group):
        c = self.call(42, 0, struct.pack(">i", 1) + kstr(group))
        c.take(">i")
        c.take(">i")
        c.string()
        return c.take(">h")

    def offset_delete(self, group, topic, part):
        body = kstr(group) + struct.pack(">i", 1) + kstr(topic) + struct.pack(">ii", 1, part)
        c = self.call(47, 0, body)
        err = c.take(">h")
        c.take(">i")
        perr = None
        for _ in range(c.take(">i")):
            c.string()
            for _ in range(c.take(">i")):
                _p, perr = c.take(">ih")
        return err, perr


def in_thread(fn, *args):
    res = {}

    def run():
        try:
            res["v"] = fn(*args)
        except Exception as e:  # reported by the caller
            res["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, res


def result(t, res, what):
    t.join(30)
    if t.is_alive() or "e" in res:
        fail("%s: %s" % (what, res.get("e", "no answer")))
    return res["v"]


def form(port, group):
    """One member, generation 1, stable: (conn, member id, generation)."""
    g = G(port)
    err, gen, _p, leader, mid, members = g.join(group)
    check(err == 0 and leader == mid and members == [mid], "join %s: error %d" % (group, err))
    err, asg = g.sync(group, gen, mid, [(mid, assignment([0, 1]))])
    check(err == 0 and asg == assignment([0, 1]), "sync %s: error %d" % (group, err))
    return g, mid, gen


b = Broker({"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}).start()
try:
    c = Conn(b.port)
    check(c.create_topic(TOPIC, 2) == 0, "create topic")
    c.close()
    kcat(b, "-P", "-t", TOPIC, "-p", "0", input=b"".join(b"r%d\n" % i for i in range(6)))
    g = G(b.port)
    # before __consumer_offsets exists a group has no coordinator; the
    # first FindCoordinator creates the topic and names this broker
    check(g.commit("solo", [(TOPIC, 0, 1, "")]) == {(TOPIC, 0): 16}, "commit before any coordinator")
    check(g.find("solo") == (0, 1, "127.0.0.1", b.port), "FindCoordinator: %s" % (g.find("solo"),))

    # OffsetCommit for an unknown topic: refused alone
    res = g.commit("solo", [(TOPIC, 0, 5, "m"), ("no-such-topic", 0, 1, ""), (TOPIC, 7, 1, "")])
    check(res == {(TOPIC, 0): E_NONE, ("no-such-topic", 0): E_UNKNOWN_TOPIC, (TOPIC, 7): E_UNKNOWN_TOPIC},
          "OffsetCommit errors: %s" % res)
    check(g.fetch_offsets("solo", TOPIC, [0, 1]) == {0: (5, "m", 0), 1: (-1, "", 0)}, "OffsetFetch after it")
    res = g.commit("solo", [(TOPIC, 1, 9, "x" * 5000)])
    check(res == {(TOPIC, 1): E_METADATA_TOO_LARGE}, "metadata too large: %s" % res)
    print("OffsetCommit: unknown topic -> UNKNOWN_TOPIC_OR_PARTITION, long metadata -> "
          "OFFSET_METADATA_TOO_LARGE; the valid partition was committed", flush=True)

    # JoinGroup with no protocol, a bad session timeout, no group id
    check(g.join("empty-protocols", protocols=[])[0] == E_INCONSISTENT_PROTOCOL, "empty protocol list")
    check(g.join("g-session", session=10)[0] == E_INVALID_SESSION, "session timeout 10 ms")
    check(g.join("")[0] == E_INVALID_GROUP_ID, "empty group id")
    check(g.join("g-ghost", member="ghost")[0] == E_UNKNOWN_MEMBER, "unknown member id")
    check(g.heartbeat("g-ghost", 1, "ghost") == E_UNKNOWN_MEMBER, "heartbeat of nobody")
    print("JoinGroup: empty protocols -> INCONSISTENT_GROUP_PROTOCOL; bad session -> "
          "INVALID_SESSION_TIMEOUT; empty id -> INVALID_GROUP_ID; ghost -> UNKNOWN_MEMBER_ID", flush=True)

    # SyncGroup from a stale generation
    g1, m1, gen1 = form(b.port, "g-stale")
    err, gen2, _p, leader, mid, _m = g1.join("g-stale", member=m1)  # the leader rejoins: generation 2
    check(err == 0 and gen2 == gen1 + 1 and mid == m1, "rejoin: %d %d" % (err, gen2))
    check(g1.sync("g-stale", gen1, m1)[0] == E_ILLEGAL_GENERATION, "stale SyncGroup")
    check(g1.sync("g-stale", gen2, m1, [(m1, assignment([0]))])[0] == 0, "current SyncGroup")
    check(g1.heartbeat("g-stale", gen2, m1) == 0, "heartbeat after the stale sync")
    check(g1.heartbeat("g-stale", gen1, m1) == E_ILLEGAL_GENERATION, "stale heartbeat")
    print("SyncGroup of generation %d while %d is current -> ILLEGAL_GENERATION; the group goes on"
          % (gen1, gen2), flush=True)

    # an oversized metadata blob
    ga, ma, gena = form(b.port, "g-big")
    big = G(b.port, timeout=30)
    tb, rb = in_thread(big.join, "g-big", "", None, 10000, b"\x00" * (2 << 20))
    # the leader learns of the rebalance and rejoins: wait for the 2 MiB
    # JoinGroup to arrive (a fixed number of heartbeats could all come
    # back before it did on a loaded machine, and the leader then rejoined
    # alone)
    deadline = time.time() + 20
    while ga.heartbeat("g-big", gena, ma) != E_REBALANCE:
        check(time.time() < deadline, "the big member's JoinGroup never started a rebalance")
        time.sleep(0.01)
    err, gen, _p, leader, _mid, members = ga.join("g-big", member=ma)
    jb = result(tb, rb, "the big member's JoinGroup")
    check(err == 0 and jb[0] == 0 and leader == ma and len(members) == 2, "join with the big member")
    ts, rs = in_thread(big.sync, "g-big", gen, jb[4])
    err, _ = ga.sync("g-big", gen, ma, [(ma, assignment([0])), (jb[4], assignment([1]))])
    check(err == E_UNKNOWN_SERVER, "leader's SyncGroup with a 2 MiB member: error %d" % err)
    check(result(ts, rs, "the big member's SyncGroup")[0] in (E_UNKNOWN_SERVER, E_REBALANCE),
          "the big member's SyncGroup")
    check(big.leave("g-big", jb[4]) == 0, "the big member leaves")
    err, gen3, _p, leader, _mid, members = ga.join("g-big", member=ma)
    check(err == 0 and members == [ma], "rejoin after the big member left: %d %s" % (err, members))
    check(ga.sync("g-big", gen3, ma, [(ma, assignment([0, 1]))])[0] == 0, "sync after it")
    check(ga.heartbeat("g-big", gen3, ma) == 0, "heartbeat after it")
    print("a 2 MiB member: leader's SyncGroup -> UNKNOWN_SERVER_ERROR, rebalance; without it "
          "generation %d is stable" % gen3, flush=True)

    # live groups refuse deletion; subscribed offsets stay
    check(ga.commit("g-big", [(TOPIC, 0, 3, "")], gen=gen3, member=ma) == {(TOPIC, 0): 0}, "member commit")
    check(ga.delete_groups("g-big") == E_NON_EMPTY, "DeleteGroups of a live group")
    check(ga.offset_delete("g-big", TOPIC, 0) == (0, E_SUBSCRIBED), "OffsetDelete of a subscribed topic")
    check(ga.describe("g-big")[:2] == (0, "Stable"), "describe g-big")
    check(ga.describe("never-was")[:2] == (0, "Dead"), "describe of no group")

    # a deleted topic's committed offsets go with it (and a group left
    # with nothing goes too)
    c = Conn(b.port)
    check(c.create_topic("grp-gone", 1) == 0, "create grp-gone")
    check(g.commit("solo-gone", [("grp-gone", 0, 4, "")]) == {("grp-gone", 0): 0}, "commit grp-gone")
    check(delete_topic(c, "grp-gone") == 0, "delete grp-gone")
    c.close()
    deadline = time.time() + 10
    while g.describe("solo-gone")[1] != "Dead" and time.time() < deadline:
        time.sleep(0.1)
    check(g.fetch_offsets("solo-gone", "grp-gone", [0])[0][0] == -1, "offset of a deleted topic")
    check(g.describe("solo-gone")[1] == "Dead", "group left without offsets")
    print("DeleteTopics: the topic's committed offsets and the group left empty went", flush=True)

    # garbage bodies: the connection may close, the broker stays
    rnd = random.Random(5)
    for api in (8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47):
        for _ in range(20):
            try:
                with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:
                    s.sendall(request(api, rnd.randint(0, 5), 1, bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 60)))))
                    read_frame(s)
            except OSError:
                pass
    check(ga.heartbeat("g-big", gen3, ma) == 0, "heartbeat after the garbage")
    print("garbage group requests: the broker and the group carry on", flush=True)

    # a restart replays what the groups last were
    for conn in (g, g1, ga, big):
        conn.close()
    check(b.stop() == 0, "stratad did not stop cleanly")
    b.start()
    g = G(b.port)
    # the coordinator loads its partitions after the restart; until then a
    # client is told COORDINATOR_LOAD_IN_PROGRESS (or NOT_COORDINATOR before
    # the partition is known) and retries, as this does
    deadline = time.time() + 20
    while any(g.describe(grp)[0] in (E_LOAD_IN_PROGRESS, E_NOT_COORDINATOR) for grp in ("g-big", "solo")):
        check(time.time() < deadline, "the groups were still loading 20 s after the restart")
        time.sleep(0.05)
    check(g.describe("g-big") == (0, "Stable", [ma]), "g-big after restart: %s" % (g.describe("g-big"),))
    check(g.fetch_offsets("g-big", TOPIC, [0])[0][0] == 3, "g-big's offset after restart")
    check(g.fetch_offsets("solo", TOPIC, [0])[0][:2] == (5, "m"), "solo's offset after restart")
    g.close()
    # a real client in a group that saw all of the above
    kcat(b, "-P", "-t", TOPIC, "-p", "0", input=b"after\n")
    rc, out, err = kcat(b, "-G", "solo", "-e", "-q", "-f", "%p %o %s\\n", TOPIC, timeout=60)
    check(out.decode().split() == ["0", "5", "r5", "0", "6", "after"], "kcat in group solo read %r" % out.decode())
    print("after a restart the groups are as they were; kcat in group 'solo' resumed at offset 5", flush=True)
finally:
    rc = b.stop()
    if rc != 0:
        print(b.log_tail(80))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

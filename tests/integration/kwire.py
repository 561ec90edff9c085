"""
kwire - just enough of Kafka's wire format, in classic (non-flexible)
versions, for tests that must send requests by hand: record batches with
CRC32C (idempotent and transactional ones too), Produce v3, Fetch v4,
ListOffsets v1, DeleteRecords v0, IncrementalAlterConfigs v0, CreateTopics
v0, Metadata v5, ApiVersions v0, InitProducerId v0 and v4.

Responses are parsed with a small cursor; every function returns plain
tuples and lists.
"""
import socket
import struct
import time

from strata_harness import frame, kstr, read_frame, request

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _CRC_TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def varint(n):
    n = (n << 1) ^ (n >> 63)
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def record_batch(values, ts=None, keys=None, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                 transactional=False):
    """An uncompressed batch v2; values are bytes (None for null).  An
    idempotent producer's batch names its producer id, epoch and the
    sequence of its first record (KIP-98); transactional sets attribute
    bit 4."""
    ts = int(time.time() * 1000) if ts is None else ts
    recs = b""
    for i, v in enumerate(values):
        k = keys[i] if keys else None
        body = b"\x00" + varint(0) + varint(i)
        body += varint(-1) if k is None else varint(len(k)) + k
        body += varint(-1) if v is None else varint(len(v)) + v
        body += varint(0)
        recs += varint(len(body)) + body
    attrs = 0x10 if transactional else 0
    after_crc = struct.pack(">hiqqqhii", attrs, len(values) - 1, ts, ts, producer_id, producer_epoch,
                            base_sequence, len(values)) + recs
    body = struct.pack(">iB", 0, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(body)) + body


class Cursor:
    def __init__(self, data, pos=0):
        self.d, self.p = data, pos

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v if len(v) > 1 else v[0]

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        s = self.d[self.p:self.p + n].decode()
        self.p += n
        return s

    def bytes_(self):
        n = self.take(">i")
        if n < 0:
            return None
        s = self.d[self.p:self.p + n]
        self.p += n
        return s


class Conn:
    """One connection; call() sends a request and returns a Cursor past the
    correlation id of its response."""

    def __init__(self, port, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.corr = 0

    def call(self, api, version, body):
        self.corr += 1
        self.s.sendall(request(api, version, self.corr, body))
        r = read_frame(self.s)
        if r is None:
            raise ConnectionError("connection closed by the broker")
        c = Cursor(r)
        corr = c.take(">i")
        assert corr == self.corr, "correlation %d != %d" % (corr, self.corr)
        return c

    def close(self):
        self.s.close()

    # -- APIs ---------------------------------------------------------------

    def produce(self, topic, partition, records, acks=-1, timeout_ms=10000):
        body = kstr(None) + struct.pack(">hi", acks, timeout_ms) + struct.pack(">i", 1) + kstr(topic)
        body += struct.pack(">i", 1) + struct.pack(">ii", partition, len(records)) + records
        c = self.call(0, 3, body)
        out = []
        for _ in range(c.take(">i")):
            c.string()
            for _ in range(c.take(">i")):
                idx, err, base, _lat = c.take(">ihqq")
                out.append((idx, err, base))
        return out[0]

    def list_offsets(self, topic, partition, timestamp):
        body = struct.pack(">i", -1) + struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 1)
        body += struct.pack(">iq", partition, timestamp)
        c = self.call(2, 1, body)
        c.take(">i")
        c.string()
        c.take(">i")
        _p, err, ts, off = c.take(">ihqq")
        return err, off, ts

    def delete_records(self, topic, partition, offset):
        body = struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 1) + struct.pack(">iq", partition, offset)
        body += struct.pack(">i", 10000)
        c = self.call(21, 0, body)
        c.take(">i")  # throttle
        c.take(">i")
        c.string()
        c.take(">i")
        _p, low, err = c.take(">iqh")
        return err, low

    def incremental_alter(self, topic, changes):
        """changes: [(name, op, value)] with op 0 set, 1 delete."""
        body = struct.pack(">i", 1) + struct.pack(">b", 2) + kstr(topic) + struct.pack(">i", len(changes))
        for name, op, value in changes:
            body += kstr(name) + struct.pack(">b", op) + kstr(value)
        body += struct.pack(">b", 0)
        c = self.call(44, 0, body)
        c.take(">i")
        c.take(">i")
        err = c.take(">h")
        msg = c.string()
        return err, msg

    def create_topic(self, topic, partitions, rf=1, configs=None):
        configs = configs or {}
        body = struct.pack(">i", 1) + kstr(topic) + struct.pack(">ih", partitions, rf) + struct.pack(">i", 0)
        body += struct.pack(">i", len(configs))
        for k, v in configs.items():
            body += kstr(k) + kstr(v)
        body += struct.pack(">i", 30000)
        c = self.call(19, 0, body)
        c.take(">i")
        c.string()
        return c.take(">h")

    def fetch(self, topic, partition, offset, max_bytes=1 << 20, max_wait=100):
        """Returns (error, high watermark, log start, records bytes)."""
        body = struct.pack(">iiiib", -1, max_wait, 1, max_bytes, 0) + struct.pack(">i", 1) + kstr(topic)
        body += struct.pack(">i", 1) + struct.pack(">iqqi", partition, offset, -1, max_bytes)
        c = self.call(1, 5, body)
        c.take(">i")  # throttle
        c.take(">i")
        c.string()
        c.take(">i")
        _p, err, hw, _lso, lstart = c.take(">ihqqq")
        n = c.take(">i")
        for _ in range(max(n, 0)):
            c.take(">qq")
        return err, hw, lstart, c.bytes_()


def batches(data):
    """Split fetched record data into (base offset, record count, bytes)
    for every whole batch."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        count = struct.unpack_from(">i", data, pos + 57)[0]
        out.append((base, count, data[pos:pos + 12 + length]))
        pos += 12 + length
    return out


# ---- flexible versions (KIP-482): compact strings and arrays, tagged fields
#
# Request header v2 = header v1 + an empty tag buffer; response header v1 =
# correlation id + an empty tag buffer.  Only what the tiering tests need:
# ListOffsets v9, which knows EARLIEST_LOCAL (-4, v8+) and LATEST_TIERED
# (-5, v9+).

EARLIEST, LATEST, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -4, -5


def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def compact_str(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


class FlexCursor(Cursor):
    def uvarint(self):
        shift = v = 0
        while True:
            c = self.d[self.p]
            self.p += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return v

    def compact_string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.d[self.p:self.p + n].decode()
        self.p += n
        return s

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.p += self.uvarint()


def flex_call(conn, api, version, body):
    """Send body under request header v2; a FlexCursor past the response
    header (v1)."""
    conn.corr += 1
    head = struct.pack(">hhi", api, version, conn.corr) + kstr("strata-test") + b"\x00"
    conn.s.sendall(frame(head + body))
    r = read_frame(conn.s)
    if r is None:
        raise ConnectionError("connection closed by the broker")
    c = FlexCursor(r)
    corr = c.take(">i")
    assert corr == conn.corr, "correlation %d != %d" % (corr, conn.corr)
    c.skip_tags()
    return c


def fetch_v11(conn, topic, partition, offset, replica_id=-1, leader_epoch=-1, rack="", version=11,
              max_wait=100):
    """Fetch v10 or v11 of one partition: a dict with error, hw, lso,
    log_start, preferred (read replica, -1 before v11) and records."""
    body = struct.pack(">iiiibii", replica_id, max_wait, 1, 1 << 20, 0, 0, -1)
    body += struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 1)
    body += struct.pack(">iiqqi", partition, leader_epoch, offset, -1, 1 << 20)
    body += struct.pack(">i", 0)
    if version >= 11:
        body += kstr(rack)
    r = conn.call(1, version, body)
    r.take(">ihi")
    assert r.take(">i") == 1, "one topic"
    r.string()
    assert r.take(">i") == 1, "one partition"
    _idx, err, hw, lso, start = r.take(">ihqqq")
    for _ in range(max(r.take(">i"), 0)):
        r.take(">qq")
    pref = r.take(">i") if version >= 11 else -1
    return {"error": err, "hw": hw, "lso": lso, "log_start": start, "preferred": pref, "records": r.bytes_()}


def _compact_ids(ids):
    """A compact array of int32; None is null."""
    if ids is None:
        return uvarint(0)
    return uvarint(len(ids) + 1) + b"".join(struct.pack(">i", i) for i in ids)


def _read_ids(r):
    n = r.uvarint() - 1
    return [r.take(">i") for _ in range(max(n, 0))]


def alter_reassignments(conn, plan, timeout_ms=30000):
    """AlterPartitionReassignments v0: plan {topic: {partition: [replicas]
    or None (cancel)}}.  Returns (error, message, {(topic, partition):
    (error, message)})."""
    body = struct.pack(">i", timeout_ms) + uvarint(len(plan) + 1)
    for topic, parts in plan.items():
        body += compact_str(topic) + uvarint(len(parts) + 1)
        for p, ids in parts.items():
            body += struct.pack(">i", p) + _compact_ids(ids) + b"\x00"
        body += b"\x00"
    body += b"\x00"
    r = flex_call(conn, 45, 0, body)
    r.take(">i")
    err = r.take(">h")
    msg = r.compact_string()
    out = {}
    for _ in range(r.uvarint() - 1):
        topic = r.compact_string()
        for _ in range(r.uvarint() - 1):
            p, perr = r.take(">ih")
            out[(topic, p)] = (perr, r.compact_string())
            r.skip_tags()
        r.skip_tags()
    return err, msg, out


def list_reassignments(conn, topics=None, timeout_ms=30000):
    """ListPartitionReassignments v0 (topics {topic: [partitions]}, None:
    every one).  Returns (error, {(topic, partition): (replicas, adding,
    removing)})."""
    body = struct.pack(">i", timeout_ms)
    if topics is None:
        body += uvarint(0)
    else:
        body += uvarint(len(topics) + 1)
        for topic, parts in topics.items():
            body += compact_str(topic) + _compact_ids(parts) + b"\x00"
    body += b"\x00"
    r = flex_call(conn, 46, 0, body)
    r.take(">i")
    err = r.take(">h")
    r.compact_string()
    out = {}
    for _ in range(r.uvarint() - 1):
        topic = r.compact_string()
        for _ in range(r.uvarint() - 1):
            p = r.take(">i")
            out[(topic, p)] = (_read_ids(r), _read_ids(r), _read_ids(r))
            r.skip_tags()
        r.skip_tags()
    return err, out


def list_offsets_v9(conn, topic, partition, timestamp):
    """ListOffsets v9 for one partition: (error, offset, leader epoch)."""
    body = struct.pack(">ib", -1, 0) + uvarint(2) + compact_str(topic) + uvarint(2)
    body += struct.pack(">iiq", partition, -1, timestamp) + b"\x00" + b"\x00" + b"\x00"
    c = flex_call(conn, 2, 9, body)
    c.take(">i")  # throttle
    c.uvarint()
    c.compact_string()
    c.uvarint()
    _p, err, _ts, off, epoch = c.take(">ihqqi")
    return err, off, epoch


def delete_topic(conn, topic, timeout_ms=30000):
    """DeleteTopics v0 for one topic: its error code."""
    body = struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", timeout_ms)
    c = conn.call(20, 0, body)
    c.take(">i")
    c.string()
    return c.take(">h")


def describe_cluster(conn):
    """DescribeCluster v0: (error, cluster id, controller id,
    [(broker id, host, port, rack)])."""
    c = flex_call(conn, 60, 0, b"\x00\x00")
    c.take(">i")  # throttle
    err = c.take(">h")
    c.compact_string()  # error message
    cluster_id = c.compact_string()
    controller = c.take(">i")
    brokers = []
    for _ in range(c.uvarint() - 1):
        bid = c.take(">i")
        host = c.compact_string()
        port = c.take(">i")
        rack = c.compact_string()
        c.skip_tags()
        brokers.append((bid, host, port, rack))
    return err, cluster_id, controller, brokers


def describe_quorum(conn):
    """DescribeQuorum v0 for __cluster_metadata-0: (error, leader, epoch,
    high watermark, {voter: log end offset}, {observer: log end offset});
    error is the top-level one, else the partition's."""
    body = uvarint(2) + compact_str("__cluster_metadata") + uvarint(2)
    body += struct.pack(">i", 0) + b"\x00" + b"\x00" + b"\x00"
    r = flex_call(conn, 55, 0, body)
    err = r.take(">h")
    r.uvarint()
    r.compact_string()
    r.uvarint()
    _p, perr, leader, epoch, hw = r.take(">ihiiq")
    lists = []
    for _ in range(2):
        ends = {}
        for _ in range(r.uvarint() - 1):
            rid, leo = r.take(">iq")
            r.skip_tags()
            ends[rid] = leo
        lists.append(ends)
    return err or perr, leader, epoch, hw, lists[0], lists[1]


def _read_ids_nullable(r):
    n = r.uvarint() - 1
    return None if n < 0 else [r.take(">i") for _ in range(n)]


def describe_topic_partitions(conn, topics=(), limit=2000, cursor=None):
    """DescribeTopicPartitions v0 (KIP-966): (topics, next cursor), topics
    a list of (error, name, {partition: dict(error, leader, epoch,
    replicas, isr, elr, last_known_elr, offline)}) in the order answered;
    cursor and the next one are (topic, partition) or None."""
    body = uvarint(len(topics) + 1) + b"".join(compact_str(t) + b"\x00" for t in topics)
    body += struct.pack(">i", limit)
    body += b"\xff" if cursor is None else b"\x01" + compact_str(cursor[0]) + struct.pack(">i", cursor[1]) + b"\x00"
    body += b"\x00"
    r = flex_call(conn, 75, 0, body)
    r.take(">i")  # throttle
    out = []
    for _ in range(r.uvarint() - 1):
        err = r.take(">h")
        name = r.compact_string()
        r.p += 17  # topic id, is internal
        parts = {}
        for _ in range(r.uvarint() - 1):
            perr, idx, leader, epoch = r.take(">hiii")
            replicas, isr = _read_ids(r), _read_ids(r)
            elr, lk = _read_ids_nullable(r), _read_ids_nullable(r)
            offline = _read_ids(r)
            r.skip_tags()
            parts[idx] = dict(error=perr, leader=leader, epoch=epoch, replicas=replicas, isr=isr, elr=elr,
                              last_known_elr=lk, offline=offline)
        r.take(">i")  # authorized operations
        r.skip_tags()
        out.append((err, name, parts))
    nxt = None
    if r.take(">b") >= 0:
        nxt = (r.compact_string(), r.take(">i"))
        r.skip_tags()
    r.skip_tags()
    return out, nxt


def metadata(conn, topics=None):
    """Metadata v5 (topics None: all): a dict with brokers {id: (host,
    port, rack)}, cluster_id, controller_id and topics {name: (error,
    {partition: dict(error, leader, replicas, isr, offline)})}."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(kstr(t) for t in topics)
    c = conn.call(3, 5, body + b"\x00")  # allow_auto_topic_creation false
    c.take(">i")  # throttle
    brokers = {}
    for _ in range(c.take(">i")):
        bid = c.take(">i")
        host = c.string()
        port = c.take(">i")
        brokers[bid] = (host, port, c.string())
    cluster_id = c.string()
    controller = c.take(">i")
    out = {}

    def ints():
        return [c.take(">i") for _ in range(max(c.take(">i"), 0))]

    for _ in range(c.take(">i")):
        terr = c.take(">h")
        name = c.string()
        c.take(">b")  # is_internal
        parts = {}
        for _ in range(c.take(">i")):
            perr, idx, leader = c.take(">hii")
            parts[idx] = dict(error=perr, leader=leader, replicas=ints(), isr=ints(), offline=ints())
        out[name] = (terr, parts)
    return dict(brokers=brokers, cluster_id=cluster_id, controller_id=controller, topics=out)


def describe_configs(conn, topics):
    """DescribeConfigs v0 of topics: {topic: (error, {name: value})}."""
    body = struct.pack(">i", len(topics))
    for t in topics:
        body += struct.pack(">b", 2) + kstr(t) + struct.pack(">i", -1)
    c = conn.call(32, 0, body)
    c.take(">i")  # throttle
    out = {}
    for _ in range(c.take(">i")):
        err = c.take(">h")
        c.string()
        c.take(">b")
        name = c.string()
        configs = {}
        for _ in range(max(c.take(">i"), 0)):
            k = c.string()
            v = c.string()
            c.take(">bbb")
            configs[k] = v
        out[name] = (err, configs)
    return out


def api_versions(conn):
    """ApiVersions v0: {api key: (min, max)} (empty on an error)."""
    c = conn.call(18, 0, b"")
    if c.take(">h"):
        return {}
    out = {}
    for _ in range(c.take(">i")):
        key, lo, hi = c.take(">hhh")
        out[key] = (lo, hi)
    return out


def init_producer_id(conn, transactional_id=None, timeout_ms=60000, version=0, producer_id=-1,
                     producer_epoch=-1):
    """InitProducerId (API 22) v0-1 (classic) or v2-5 (flexible; v3+ send
    the producer id and epoch a producer already has, KIP-360): (error,
    producer id, epoch)."""
    if version < 2:
        body = kstr(transactional_id) + struct.pack(">i", timeout_ms)
        c = conn.call(22, version, body)
    else:
        tid = uvarint(0) if transactional_id is None else compact_str(transactional_id)
        body = tid + struct.pack(">i", timeout_ms)
        if version >= 3:
            body += struct.pack(">qh", producer_id, producer_epoch)
        c = flex_call(conn, 22, version, body + b"\x00")
    c.take(">i")  # throttle
    err, pid, epoch = c.take(">hqh")
    return err, pid, epoch

"""
strata_harness - start real stratad processes on loopback for integration
tests, and the small helpers the tests share.

Every broker gets a fresh log directory under a temporary root and a free
port; stop() and the atexit hook stop everything this module started, by
pid.  Binaries come from STRATA_BIN_DIR (CTest sets it) or ../../build/bin.
"""
import atexit
import collections
import glob
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.environ.get("STRATA_BIN_DIR") or os.path.join(ROOT, "build", "bin")
CONFIG = os.path.join(ROOT, "config", "server.properties")

_started = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(name):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        raise RuntimeError("%s not found: build first (cmake --build build)" % path)
    return path


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Broker:
    """One stratad process.  Its data survives stop()/start() until
    cleanup(), so restart tests reuse the same log directory."""

    def __init__(self, overrides=None, root=None, port=None, preexec_fn=None):
        self.root = root or tempfile.mkdtemp(prefix="strata-it-")
        self.preexec_fn = preexec_fn  # run in the child before exec (resource limits)
        self.logdir = os.path.join(self.root, "logs")
        self.port = port or free_port()
        self.overrides = dict(overrides or {})
        self.proc = None
        self.logfile = os.path.join(self.root, "stratad.log")
        self.starts = 0

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.port

    def command(self):
        ov = {
            "listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
            "log.dirs": self.logdir,
            "log.retention.check.interval.ms": "1000",
            # config/server.properties tiers to ./data/bucket; tests opt in
            # to tiering and keep every file under their own root
            "remote.log.storage.system.enable": "false",
            "objectstore.file.root": os.path.join(self.root, "bucket"),
            "remote.log.cache.dir": os.path.join(self.root, "cache"),
        }
        ov.update(self.overrides)
        cmd = [binary("stratad"), "--config", CONFIG]
        for k, v in ov.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        return cmd

    def start(self, wait=True, timeout=30):
        out = open(self.logfile, "a")
        out.write("==== start %d ====\n" % self.starts)
        out.flush()
        self.starts += 1
        self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                     preexec_fn=self.preexec_fn)
        out.close()
        _started.append(self)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                fail("stratad exited with %s during start-up:\n%s" % (self.proc.returncode, self.log_tail()))
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    # An ApiVersions v0 round trip proves the loops run.
                    s.sendall(frame(struct.pack(">hhi", 18, 0, 1) + kstr("ready")))
                    if read_frame(s):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        fail("stratad did not become ready in %ss:\n%s" % (timeout, self.log_tail()))

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
            if rc != 0 and sig != signal.SIGKILL:
                print("stratad exited %d; its log ends:\n%s" % (rc, self.log_tail(int(os.environ.get("STRATA_LOG_LINES", "60")))), flush=True)
            return rc
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("stratad did not stop within %ss after signal %d" % (timeout, sig))

    def kill(self):
        return self.stop(signal.SIGKILL)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self):
        try:
            with open(self.logfile, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text().splitlines()[-n:])

    def explain_failure(self, exc, n=60):
        """For `except SystemExit as e`: when the test failed, say whether
        stratad is still running and print the end of its log."""
        if not exc.code:
            return
        if self.proc and self.proc.poll() is not None:
            print("stratad is not running (exit status %s)" % self.proc.returncode)
        print("stratad's log ends:\n" + self.log_tail(n), flush=True)

    def cleanup(self):
        """Stop the broker and remove its files, unless its log holds a
        sanitizer's report (a sanitizer build): then they are kept and the
        test fails."""
        if self.alive():
            self.kill()
        try:
            with open(self.logfile, errors="replace") as f:
                report = sanitizer_report(f.read())
        except OSError:
            report = None
        if not report:
            shutil.rmtree(self.root, ignore_errors=True)
            return
        print("---- stratad's log holds a sanitizer report (files kept in %s):\n%s" % (self.root, report),
              flush=True)
        fail("a sanitizer report in stratad's log")


SANITIZER = re.compile(r"(ERROR|WARNING): (AddressSanitizer|LeakSanitizer|ThreadSanitizer)|runtime error: ")


def sanitizer_report(text):
    """The first lines of the first sanitizer report in a log, or None."""
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if SANITIZER.search(line):
            return "\n".join(lines[max(0, k - 3):k + 25])
    return None


@atexit.register
def _stop_all():
    for b in _started:
        if b.alive():
            b.proc.kill()
            b.proc.wait()


def run(cmd, input=None, timeout=300, check_rc=True, env=None):
    """Run a command; returns (rc, stdout bytes, stderr text)."""
    p = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env)
    if check_rc and p.returncode != 0:
        fail("%s exited %d:\n%s" % (" ".join(cmd[:6]), p.returncode, p.stderr.decode(errors="replace")[-3000:]))
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def kcat(broker, *args, input=None, timeout=300, check_rc=True):
    return run(["kcat", "-b", broker.bootstrap] + list(args), input=input, timeout=timeout,
               check_rc=check_rc)


# ---- raw Kafka wire helpers (for tests that must send what clients never do)

def kstr(s):
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(">h", len(b)) + b


def frame(body):
    return struct.pack(">i", len(body)) + body


def read_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def read_frame(sock):
    hdr = read_exact(sock, 4)
    if hdr is None:
        return None
    (n,) = struct.unpack(">i", hdr)
    return read_exact(sock, n)


def request(api_key, version, correlation_id, body, client_id="strata-test"):
    """A request with header v1 (non-flexible)."""
    return frame(struct.pack(">hhi", api_key, version, correlation_id) + kstr(client_id) + body)


def wait_for(pred, timeout=30, interval=0.1, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(interval)
    fail("timed out waiting for " + what)


def grep_log(broker, pattern):
    return re.findall(pattern, broker.log_text())


# ---- child processes other than brokers (client programs)

_children = []


def spawn(cmd, **kw):
    """Popen a helper process; the atexit hook kills it if the test did not."""
    p = subprocess.Popen(cmd, **kw)
    _children.append(p)
    return p


@atexit.register
def _stop_children():
    for p in _children:
        if p.poll() is None:
            p.kill()
            p.wait()


def log_starts(broker):
    """The broker's log split at each start: element i is what start i wrote."""
    return re.split(r"^==== start \d+ ====\n", broker.log_text(), flags=re.M)[1:]


# ---- segment files (record batch v2 as Kafka lays it out)
#
#   baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
#   magic int8 | crc uint32 | attributes int16 | lastOffsetDelta int32 |
#   baseTimestamp int64 | maxTimestamp int64 | producerId int64 |
#   producerEpoch int16 | baseSequence int32 | recordCount int32 | records
#
# batchLength counts from partitionLeaderEpoch on, so a batch takes
# batchLength + 12 bytes in the file.

BATCH_HEADER_SIZE = 61
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")


def partition_dir(broker, topic, partition):
    return os.path.join(broker.logdir, "%s-%d" % (topic, partition))


def segment_logs(broker, topic, partition):
    """The partition's .log files, oldest first."""
    d = partition_dir(broker, topic, partition)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".log"))


def read_batches(path):
    """The whole batches of one segment file, in file order; a torn tail
    ends the list.  Each is a dict of header fields plus pos, size and the
    batch bytes."""
    with open(path, "rb") as f:
        data = f.read()
    out, pos = [], 0
    while pos + BATCH_HEADER_SIZE <= len(data):
        (base, blen, epoch, magic, crc, attrs, lod, bts, mts, pid, pepoch, bseq,
         count) = _BATCH_HEADER.unpack_from(data, pos)
        size = blen + 12
        if blen < BATCH_HEADER_SIZE - 12 or pos + size > len(data):
            break
        out.append(dict(pos=pos, size=size, base_offset=base, last_offset=base + lod,
                        leader_epoch=epoch, magic=magic, crc=crc, attributes=attrs,
                        codec=attrs & 7, log_append_time=bool(attrs & 8), count=count,
                        base_timestamp=bts, max_timestamp=mts,
                        data=data[pos:pos + size]))
        pos += size
    return out


def _varint(b, i):
    shift = v = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return (v >> 1) ^ -(v & 1), i


def batch_records(batch):
    """The records of an uncompressed batch from read_batches(): dicts with
    offset, timestamp, key, value (None when null) and headers, a list of
    (name, value-or-None)."""
    if batch["codec"] != 0:
        raise ValueError("batch at offset %d is compressed" % batch["base_offset"])
    b, i, out = batch["data"], BATCH_HEADER_SIZE, []

    def nbytes(i):
        n, i = _varint(b, i)
        if n < 0:
            return None, i
        return bytes(b[i:i + n]), i + n

    for _ in range(batch["count"]):
        length, i = _varint(b, i)
        end = i + length
        i += 1  # attributes
        ts_delta, i = _varint(b, i)
        off_delta, i = _varint(b, i)
        key, i = nbytes(i)
        value, i = nbytes(i)
        nh, i = _varint(b, i)
        headers = []
        for _ in range(nh):
            name, i = nbytes(i)
            hv, i = nbytes(i)
            headers.append((name.decode(errors="replace"), hv))
        if i != end:
            raise ValueError("record at offset %d does not end at its length" % (batch["base_offset"] + off_delta))
        out.append(dict(offset=batch["base_offset"] + off_delta,
                        timestamp=batch["base_timestamp"] + ts_delta,
                        key=key, value=value, headers=headers))
    return out


# ---- tiered storage: object store settings, the bucket, a private RGW

import json  # noqa: E402 (kept with the helpers that use it)

RGW_SH = os.path.join(ROOT, "tests", "s3", "rgw.sh")


def rgw_env(path):
    """The KEY=VALUE lines tests/s3/rgw.sh writes, as a dict."""
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            if k:
                out[k] = v
    check("STRATA_RGW_ENDPOINT" in out, "%s holds no RGW endpoint (did rgw.sh start fail?)" % path)
    return out


def s3_overrides(env, endpoint=None):
    """objectstore.* settings for the RGW of an rgw.sh env file (endpoint
    may point at a proxy in front of it)."""
    return {
        "objectstore.backend": "s3",
        "objectstore.s3.endpoint": endpoint or env["STRATA_RGW_ENDPOINT"],
        "objectstore.s3.bucket": env["STRATA_RGW_BUCKET"],
        "objectstore.s3.region": env.get("STRATA_RGW_REGION", "us-east-1"),
        "objectstore.s3.path.style": "true",
        "objectstore.s3.access.key": env["STRATA_RGW_ACCESS_KEY"],
        "objectstore.s3.secret.key": env["STRATA_RGW_SECRET_KEY"],
    }


def file_overrides(root):
    return {"objectstore.backend": "file", "objectstore.file.root": root}


def tiered_overrides(store, **settings):
    """A broker that tiers every topic to store (s3_overrides or
    file_overrides); settings are more overrides, '_' standing for '.'."""
    ov = {"remote.log.storage.system.enable": "true", "log.remote.storage.enable": "true",
          "remote.log.manager.task.interval.ms": "500"}
    ov.update(store)
    ov.update({k.replace("_", "."): str(v) for k, v in settings.items()})
    return ov


class Bucket:
    """The object store a broker tiers to, seen through `strata bucket`
    with the broker's own objectstore.* settings."""

    def __init__(self, overrides):
        self.ov = {k: v for k, v in overrides.items() if k.startswith("objectstore.")}

    def _cmd(self, *args):
        cmd = [binary("strata"), "bucket", "--config", CONFIG]
        for k, v in self.ov.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        return cmd + list(args)

    def ls(self, prefix=""):
        """{key: size} of the objects under prefix."""
        _, out, _ = run(self._cmd("ls", prefix) if prefix else self._cmd("ls"), timeout=120)
        objs = {}
        for line in out.decode().splitlines():
            size, _when, key = line.split(None, 2)
            objs[key] = int(size)
        return objs

    def get(self, key):
        """The object's bytes, or None when it is missing."""
        rc, out, err = run(self._cmd("get", key, "-"), timeout=120, check_rc=False)
        if rc != 0:
            if "not found" in err.lower() or "no such key" in err.lower():
                return None
            fail("strata bucket get %s: %s" % (key, err[-2000:]))
        return out

    def partition_prefix(self, topic, partition):
        """<topic>-<topicId>/<partition>/ as the bucket holds it (None when
        nothing of the topic is there); the topic id comes from the
        listing, so no other topic may be named <topic>-<22 chars>.  A
        topic too long for that as one key piece (over 227 characters) is
        under <topic>/<topicId>/<partition>/ (or, tiered before that
        layout, under the first)."""
        if len(topic) + 23 > 250:
            for key in self.ls(topic + "/"):
                tid, _, rest = key[len(topic) + 1:].partition("/")
                if len(tid) == 22 and rest.split("/", 1)[0] == str(partition):
                    return "%s/%s/%d/" % (topic, tid, partition)
        for key in self.ls(topic + "-"):
            head = key[len(topic) + 1:]
            tid, _, rest = head.partition("/")
            if len(tid) == 22 and rest.split("/", 1)[0] == str(partition):
                return "%s-%s/%d/" % (topic, tid, partition)
        return None

    def manifest(self, prefix):
        """The partition's manifest.json, parsed (None when missing)."""
        data = self.get(prefix + "manifest.json")
        return None if data is None else json.loads(data)


SEGMENT_KINDS = ("log", "index", "timeindex", "epochs")  # and, when the manifest says so,
# "txnindex" (txn_index: true) and "snapshot" (producer_snapshot: true)


def manifest_problems(man, objects, prefix):
    """What is wrong between a manifest and the objects listed under its
    prefix ({key: size}): missing or mis-sized objects of a named segment,
    gaps, a log start beyond the first segment.  Returns (problems, the
    keys no segment names)."""
    problems, named = [], set()
    prev = None
    for s in man["segments"]:
        kinds = SEGMENT_KINDS + (("txnindex",) if s.get("txn_index") else ()) + \
            (("snapshot",) if s.get("producer_snapshot") else ())
        for kind in kinds:
            key = "%s%020d-%s.%s" % (prefix, s["base_offset"], s["id"], kind)
            named.add(key)
            if key not in objects:
                problems.append("segment %d-%d: %s is missing" % (s["base_offset"], s["last_offset"], key))
            elif kind == "log" and objects[key] != s["size"]:
                problems.append("segment %d: %s holds %d bytes, the manifest says %d" %
                                (s["base_offset"], key, objects[key], s["size"]))
        if prev is not None and s["base_offset"] != prev + 1:
            problems.append("segment %d does not follow %d" % (s["base_offset"], prev))
        prev = s["last_offset"]
    orphans = sorted(k for k in objects if k not in named and not k.endswith("/manifest.json"))
    return problems, orphans


class Rgw:
    """A Ceph RGW of this test's own (tests/s3/rgw.sh), for tests that stop
    radosgw; stopped at exit."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="strata-it-rgw-")
        self.envfile = os.path.join(self.dir, "rgw.env")
        self.env = None

    def start(self, timeout=240):
        run(["sh", RGW_SH, "start", self.envfile], timeout=timeout)
        self.env = rgw_env(self.envfile)
        _rgws.append(self)
        return self

    def gw_stop(self):
        run(["sh", RGW_SH, "gw-stop", self.envfile], timeout=60)

    def gw_start(self):
        run(["sh", RGW_SH, "gw-start", self.envfile], timeout=120)

    def stop(self):
        if self in _rgws:
            _rgws.remove(self)
            run(["sh", RGW_SH, "stop", self.envfile], timeout=60, check_rc=False)
        shutil.rmtree(self.dir, ignore_errors=True)


_rgws = []


def rgw_requests(env):
    """radosgw's count of the requests it has served (its perf counters,
    through the admin socket), or None when it cannot be read."""
    sock = os.path.join(env["STRATA_RGW_DIR"], "run", "client.rgw.s3.asok")
    try:
        p = subprocess.run(["ceph", "--admin-daemon", sock, "perf", "dump"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=30)
        return json.loads(p.stdout)["rgw"]["req"] if p.returncode == 0 else None
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None


@atexit.register
def _stop_rgws():
    for r in list(_rgws):
        r.stop()


# ---- replay checks: what a consumer read against what was produced

def line_messages(path):
    """The messages of a file kcat -P reads (one per line), in order."""
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def check_replay(path, expected, first_offset, what):
    """path holds 'offset value' lines (kcat -f '%o %s\\n', rdk_replay);
    they must be offsets first_offset.. with expected[i] at
    first_offset + i, every byte equal, and nothing more."""
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    check(lines[-1] == b"", "%s: the output does not end with a whole line" % what)
    lines.pop()
    want = len(expected) - first_offset
    for i, line in enumerate(lines):
        off, _, value = line.partition(b" ")
        if i >= want:
            fail("%s: more than the %d messages produced (offset %s)" % (what, want, off.decode()))
        if int(off) != first_offset + i:
            fail("%s: message %d has offset %s, want %d" % (what, i, off.decode(), first_offset + i))
        if value != expected[first_offset + i]:
            fail("%s: offset %d differs from what was produced (%d bytes, want %d)" %
                 (what, first_offset + i, len(value), len(expected[first_offset + i])))
    check(len(lines) == want, "%s: %d messages from offset %d, want %d" % (what, len(lines), first_offset, want))
    return len(lines)


# ---- what rdk_acked_producer wrote (see its header comment)

def acked_value(key, size):
    """The value rdk_acked_producer -s size writes for key."""
    if isinstance(key, bytes):
        key = key.decode()
    seq = int(key.rsplit("-", 1)[1])
    n = size + seq % 37
    unit = key + "."
    return (unit * (n // len(unit) + 1))[:n].encode()


class Acks(dict):
    """{(partition, offset): key} of the acknowledged messages, and in
    .unplaced the (partition, key) of those acknowledged without an offset.
    librdkafka's idempotent producer acknowledges a batch implicitly when a
    later batch of the same partition succeeded (a retried request whose
    answer was lost): its delivery report says success at offset -1001
    (RD_KAFKA_OFFSET_INVALID).  Such a message must be in its partition once,
    at an offset nobody can check."""

    def __init__(self):
        super().__init__()
        self.unplaced = []


def read_ack_file(path):
    """Acks from the whole lines of an ack file."""
    with open(path, "rb") as f:
        data = f.read()
    data = data[:data.rfind(b"\n") + 1]
    acks = Acks()
    for line in data.decode().splitlines():
        p, o, k = line.split(" ")
        p, o = int(p), int(o)
        if o == -1001:
            acks.unplaced.append((p, k))
            continue
        check(o >= 0, "a message of partition %d acknowledged at offset %d" % (p, o))
        check((p, o) not in acks, "offset %d-%d acknowledged twice" % (p, o))
        acks[(p, o)] = k
    return acks


def check_acked_topic(broker, topic, partitions, size, acks, what, timeout=300):
    """Read the whole topic with kcat: each partition must hold offsets
    0..n-1 once, every value must match its key, and every acknowledged
    message must be at its offset.  Returns {partition: count}."""
    _, out, _ = kcat(broker, "-C", "-t", topic, "-e", "-q", "-f", "%p %o %k %s\\n", timeout=timeout)
    nexts = {p: 0 for p in range(partitions)}
    keys = {}
    for line in out.split(b"\n")[:-1]:
        p, o, k, v = line.split(b" ", 3)
        p, o = int(p), int(o)
        check(o == nexts[p], "%s: partition %d has offset %d where %d was due" % (what, p, o, nexts[p]))
        nexts[p] = o + 1
        check(v == acked_value(k, size), "%s: %d-%d: the value of %s is damaged" % (what, p, o, k.decode()))
        keys[(p, o)] = k.decode()
    for at, k in acks.items():
        check(keys.get(at) == k, "%s: %s was acknowledged at %d-%d, which holds %s" % (what, k, at[0], at[1], keys.get(at)))
    held = collections.Counter((p, k) for (p, _o), k in keys.items())
    for p, k in acks.unplaced:
        check(held[(p, k)] == 1, "%s: %s was acknowledged in partition %d without an offset and is there %d times"
              % (what, k, p, held[(p, k)]))
    return nexts


# ---- a cluster of combined nodes, started by scripts/cluster.sh
#
# cluster.sh starts every node in the background and exits, so the nodes
# are orphans: this process makes itself their subreaper (PR_SET_CHILD_
# SUBREAPER) and a thread reaps them, so that a node killed or refusing to
# start is gone at once (a zombie would look alive to `kill -0`).

CLUSTER_SH = os.path.join(ROOT, "scripts", "cluster.sh")
_clusters = []


def _become_subreaper():
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def free_port_block(n, tries=200):
    """A base port P with P..P+n-1 all free on loopback right now, below
    the kernel's ephemeral range (so no outgoing connection takes one of
    them between this probe and the nodes' start)."""
    import random
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    for _ in range(tries):
        base = random.randrange(10000, max(low, 10000 + 2 * n) - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no %d consecutive free ports" % n)


class Cluster:
    """N combined (broker + controller) nodes, ids 1..N, started with
    scripts/cluster.sh under a temporary root.  Node i serves clients on
    port(i) and the quorum on quorum_port(i).  node_overrides {i: {k: v}}
    are passed to node i only (cluster.sh --node-override).  With
    controllers=K only nodes 1..K are voters and the others broker-only;
    controller_only makes those K controller-only (no client port)."""

    LEADER_LINE = re.compile(r"raft: node (\d+) is the leader of epoch (\d+)")

    def __init__(self, n=3, overrides=None, node_overrides=None, root=None, controllers=None,
                 controller_only=False):
        self.n = n
        self.controllers = controllers
        self.controller_only = controller_only
        self.root = root or tempfile.mkdtemp(prefix="strata-cluster-")
        self.dir = os.path.join(self.root, "cluster")
        self.base = free_port_block(2 * n)
        self.overrides = dict(overrides or {})
        self.node_overrides = {i: dict(v) for i, v in (node_overrides or {}).items()}
        self.exits = {}  # pid -> wait status, of nodes reaped
        self._reaping = _become_subreaper()
        self._stop_reaper = False
        if self._reaping:
            import threading
            self._reaper = threading.Thread(target=self._reap_loop, daemon=True)
            self._reaper.start()
        _clusters.append(self)

    # -- addresses and files
    def port(self, i):
        return self.base + 2 * (i - 1)

    def quorum_port(self, i):
        return self.port(i) + 1

    def bootstrap(self, nodes=None):
        return ",".join("127.0.0.1:%d" % self.port(i) for i in (nodes or self.ids()))

    def ids(self):
        return list(range(1, self.n + 1))

    def node_dir(self, i):
        return os.path.join(self.dir, "node-%d" % i)

    def logfile(self, i):
        return os.path.join(self.node_dir(i), "stratad.log")

    def metadata_dir(self, i):
        return os.path.join(self.node_dir(i), "logs", "__cluster_metadata-0")

    def cluster_id(self):
        with open(os.path.join(self.dir, "cluster.id")) as f:
            return f.read().strip()

    # -- processes
    def _reap_loop(self):
        while not self._stop_reaper:
            for i in self.ids():
                pid = self.pid(i)
                if pid is None or pid in self.exits:
                    continue
                try:
                    got, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    continue
                if got == pid:
                    self.exits[pid] = status
            time.sleep(0.02)

    def pid(self, i):
        try:
            with open(os.path.join(self.node_dir(i), "pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def pids(self):
        return {i: self.pid(i) for i in self.ids()}

    def alive(self, i):
        pid = self.pid(i)
        if pid is None or pid in self.exits:
            return False
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def live(self):
        return [i for i in self.ids() if self.alive(i)]

    def _sh(self, *args, node_overrides=None, timeout=120, check_rc=True):
        cmd = ["bash", CLUSTER_SH] + list(args) + ["--dir", self.dir, "--base-port", str(self.base),
                                                    "--no-build"]
        if self.controllers:
            cmd += ["--controllers", str(self.controllers)]
        if self.controller_only:
            cmd += ["--controller-only"]
        for k, v in self.overrides.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        nov = {i: dict(v) for i, v in self.node_overrides.items()}
        for i, v in (node_overrides or {}).items():
            nov.setdefault(i, {}).update(v)
        for i, v in sorted(nov.items()):
            for k, val in v.items():
                cmd += ["--node-override", str(i), "%s=%s" % (k, val)]
        env = dict(os.environ, STRATA_BIN_DIR=BIN)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, env=env)
        out = p.stdout.decode(errors="replace")
        if check_rc and p.returncode != 0:
            self.explain()
            fail("cluster.sh %s exited %d:\n%s" % (args[0], p.returncode, out))
        return p.returncode, out

    def up(self, wait=True, timeout=60, node_overrides=None, check_rc=True):
        """cluster.sh up N: starts every node that is not running.  With
        wait, returns once every node names the same controller and lists
        every node as a live broker.  Returns (rc, output)."""
        rc, out = self._sh("up", str(self.n), node_overrides=node_overrides, check_rc=check_rc)
        if rc == 0 and wait:
            self.wait_stable(timeout=timeout)
        return rc, out

    def start(self, i, node_overrides=None):
        """cluster.sh up --only i: node i alone, the others left as they
        are; returns once it answers on its port."""
        check(not self.alive(i), "start(%d): node %d is running" % (i, i))
        return self._sh("up", str(self.n), "--only", str(i), node_overrides=node_overrides)

    def restart(self, i, wait=True, timeout=60, **kw):
        check(not self.alive(i), "restart(%d): node %d is running" % (i, i))
        return self.up(wait=wait, timeout=timeout, **kw)

    def kill(self, i, sig=signal.SIGKILL):
        """Signal node i; for SIGKILL and SIGTERM, wait until it is gone."""
        pid = self.pid(i)
        check(pid is not None and self.alive(i), "kill(%d): node %d is not running" % (i, i))
        os.kill(pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            deadline = time.time() + 30
            while self.alive(i):
                if time.time() > deadline:
                    self.explain()
                    fail("node %d (pid %d) did not stop after signal %d" % (i, pid, sig))
                time.sleep(0.005)

    def stop(self):
        """cluster.sh down (stopped nodes are continued first)."""
        for i in self.live():
            try:
                os.kill(self.pid(i), signal.SIGCONT)
            except OSError:
                pass
        if os.path.isdir(self.dir):
            self._sh("down", check_rc=False)
        self._stop_reaper = True

    def sanitizer_reports(self):
        """{node: the first lines of a sanitizer's report in its log}."""
        out = {}
        for i in self.ids():
            report = sanitizer_report(self.log_text(i))
            if report:
                out[i] = report
        return out

    def cleanup(self):
        """Stop the nodes and remove their files (kept, and named, when
        STRATA_KEEP_CLUSTER is set).  A sanitizer's report in a node's log
        (a sanitizer build) fails the test."""
        self.stop()
        reports = self.sanitizer_reports()
        keep = os.environ.get("STRATA_KEEP_CLUSTER") or reports
        if keep:
            print("the cluster's files are kept in %s" % self.dir, flush=True)
        else:
            shutil.rmtree(self.root, ignore_errors=True)
        if self in _clusters:
            _clusters.remove(self)
        for i, text in sorted(reports.items()):
            print("---- node %d's log holds a sanitizer report:\n%s" % (i, text), flush=True)
        if reports:
            fail("sanitizer reports in the logs of node(s) %s" % sorted(reports))

    # -- what the nodes say
    def conn(self, i, timeout=5):
        import kwire
        return kwire.Conn(self.port(i), timeout=timeout)

    def metadata(self, i, topics=None, timeout=5):
        """Metadata v5 from node i (kwire.metadata's dict)."""
        import kwire
        c = self.conn(i, timeout)
        try:
            return kwire.metadata(c, topics)
        finally:
            c.close()

    def partition_state(self, topic, p, nodes=None):
        """The partition as the first live node that answers sees it."""
        for i in nodes or self.live():
            try:
                return self.metadata(i, [topic], timeout=2)["topics"][topic][1][p]
            except (OSError, ConnectionError, struct.error, KeyError, AssertionError):
                continue
        return None

    def leader_epoch(self, topic, p, node):
        """The partition's leader epoch in node's Metadata (v7)."""
        import kwire
        c = self.conn(node)
        try:
            r = c.call(3, 7, struct.pack(">i", 1) + kwire.kstr(topic) + b"\x00")
            r.take(">i")
            for _ in range(r.take(">i")):
                r.take(">i")
                r.string()
                r.take(">i")
                r.string()
            r.string()
            r.take(">i")
            for _ in range(r.take(">i")):
                r.take(">h")
                r.string()
                r.take(">b")
                for _ in range(r.take(">i")):
                    _err, idx, _leader, epoch = r.take(">hiii")
                    for _ in range(3):
                        for _ in range(max(r.take(">i"), 0)):
                            r.take(">i")
                    if idx == p:
                        return epoch
            return None
        finally:
            c.close()

    def wait_isr(self, topic, parts, n, timeout=60, nodes=None):
        """Every partition has a leader and n in-sync replicas, as the first
        live node (of nodes) that answers sees it."""
        def whole():
            for p in range(parts):
                st = self.partition_state(topic, p, nodes)
                if not st or len(st["isr"]) != n or st["leader"] < 0:
                    return False
            return True
        self.wait(whole, timeout, "every partition of %s to have %d in-sync replicas" % (topic, n))

    def replica_batches(self, i, topic, p):
        """{base offset: batch bytes} of node i's local replica."""
        out = {}
        for f in sorted(glob.glob(os.path.join(self.node_dir(i), "logs", "%s-%d" % (topic, p), "*.log"))):
            data = open(f, "rb").read()
            pos = 0
            while pos + 12 <= len(data):
                base, length = struct.unpack_from(">qi", data, pos)
                out[base] = data[pos:pos + 12 + length]
                pos += 12 + length
        return out

    def wait_same_replicas(self, topic, p, nodes, timeout=30):
        """Every replica holds the same batches, byte for byte, from the
        highest local log start on (a replica that came back behind what the
        leader had tiered starts its local log at the bucket's end).  Returns
        (bytes compared, first offset compared)."""
        got = {}

        def same():
            logs = {i: self.replica_batches(i, topic, p) for i in nodes}
            start = max(min(b) if b else 0 for b in logs.values())
            views = [tuple(sorted((o, v) for o, v in b.items() if o >= start)) for b in logs.values()]
            got["n"] = sum(len(v) for _o, v in views[0])
            got["start"] = start
            return len(set(views)) == 1 and got["n"] > 0
        self.wait(same, timeout, "the replicas of %s-%d to hold the same batches" % (topic, p))
        return got["n"], got["start"]

    def acked_producer(self, topic, partitions, size, ackfile, *extra):
        """rdk_acked_producer on every node: 400 records/s with acks=all,
        each retried for up to a minute, metadata refreshed every 500 ms;
        extra are more of its arguments ("-X", "k=v").  Its output is a
        pipe (communicate() at the end)."""
        return spawn([binary("rdk_acked_producer"), "-b", self.bootstrap(), "-t", topic, "-o", ackfile,
                      "-p", str(partitions), "-r", "400", "-s", str(size), "-k", "m", "-w", "20000",
                      "-X", "message.timeout.ms=60000", "-X", "retry.backoff.ms=50",
                      "-X", "topic.metadata.refresh.interval.ms=500", *extra],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def produce_one(self, node, topic, p, acks):
        """One 100-byte record to topic-p at node: kwire's produce answer."""
        import kwire
        c = self.conn(node)
        try:
            return c.produce(topic, p, kwire.record_batch([b"x" * 100]), acks=acks, timeout_ms=5000)
        finally:
            c.close()

    def controller_id(self, i, timeout=2):
        """The controller node i names, None when it does not answer."""
        try:
            return self.metadata(i, topics=[], timeout=timeout)["controller_id"]
        except (OSError, ConnectionError, struct.error, AssertionError):
            return None

    def leader_id(self, nodes=None):
        """The controller every live node (or each of nodes) names, when
        they agree on one that is running; else None."""
        nodes = nodes or self.live()
        ids = {self.controller_id(i) for i in nodes}
        if len(ids) == 1:
            (lid,) = ids
            if lid is not None and lid >= 0 and self.alive(lid):
                return lid
        return None

    def cli_node(self):
        """A live node that is not the active controller (what it is asked
        is forwarded), or any live node."""
        ctl = self.leader_id()
        live = self.live()
        others = [i for i in live if i != ctl]
        return (others or live)[0]

    def strata_topics(self, *verb, node=None, timeout=180):
        """`strata topics --config CONFIG --override ... --bootstrap NODE
        VERB...` with the settings every node got: (rc, stdout, stderr)."""
        node = node or self.cli_node()
        cmd = [binary("strata"), "topics", "--config", CONFIG]
        for k, v in self.overrides.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        cmd += ["--bootstrap", "127.0.0.1:%d" % self.port(node)]
        rc, out, err = run(cmd + list(verb), check_rc=False, timeout=timeout)
        return rc, out.decode(errors="replace"), err

    def wait_leader(self, nodes=None, timeout=30):
        lid = [None]

        def agreed():
            lid[0] = self.leader_id(nodes)
            return lid[0] is not None
        self.wait(agreed, timeout, "the nodes %s to agree on a controller" % (nodes or self.live()))
        return lid[0]

    def wait_stable(self, timeout=60):
        """Every live node names the same controller and lists every live
        node as an (unfenced) broker."""
        want = set(self.live())
        seen = [None]

        def why(text):
            if text != seen[0]:
                print("  waiting: %s" % text, flush=True)
                seen[0] = text
            return False

        def stable():
            ids = {i: self.controller_id(i) for i in want}
            if self.leader_id() is None:
                return why("controllers named %r" % ids)
            for i in want:
                try:
                    got = set(self.metadata(i, topics=[])["brokers"])
                except (OSError, ConnectionError, struct.error, AssertionError) as e:
                    return why("node %d: Metadata %s" % (i, e))
                if got != want:
                    return why("node %d lists brokers %s" % (i, sorted(got)))
            return True
        self.wait(stable, timeout, "nodes %s to agree on a controller and list each other" % sorted(want))

    def leaders_from_logs(self):
        """[(epoch, node)] of every "is the leader of epoch" line, by epoch."""
        out = set()
        for i in self.ids():
            for node, epoch in self.LEADER_LINE.findall(self.log_text(i)):
                out.add((int(epoch), int(node)))
        return sorted(out)

    def log_text(self, i):
        try:
            with open(self.logfile(i), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, i, n=40):
        return "\n".join(self.log_text(i).splitlines()[-n:])

    def wait(self, pred, timeout, what, interval=0.05):
        """Poll pred until it holds; a node that does not answer (a
        connection error, a cut answer) counts as not yet."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                if pred():
                    return True
            except (OSError, ConnectionError, struct.error) as e:
                last = e
            time.sleep(interval)
        self.explain()
        fail("timed out after %ss waiting for %s%s" % (timeout, what, " (last error: %s)" % last if last else ""))

    def explain(self, n=None):
        """Print each node's state and the end of its log."""
        n = n or int(os.environ.get("STRATA_LOG_LINES", "40"))
        for i in self.ids():
            pid = self.pid(i)
            state = "running" if self.alive(i) else "not running"
            if pid in self.exits:
                st = self.exits[pid]
                state += " (exit %s)" % (os.WEXITSTATUS(st) if os.WIFEXITED(st) else "signal %d" % os.WTERMSIG(st))
            try:
                m = self.metadata(i, topics=[], timeout=2) if self.alive(i) else None
                says = "controller %s, brokers %s" % (m["controller_id"], sorted(m["brokers"])) if m else "-"
            except (OSError, ConnectionError, struct.error, AssertionError) as e:
                says = "no answer (%s)" % e
            print("---- node %d (pid %s, %s, port %d; Metadata: %s); its log ends:\n%s" %
                  (i, pid, state, self.port(i), says, self.log_tail(i, n)), flush=True)

    def explain_failure(self, exc):
        """For `except SystemExit as e`."""
        if exc.code:
            self.explain()


@atexit.register
def _stop_clusters():
    for c in list(_clusters):
        try:
            c.stop()
        except Exception as e:  # noqa: BLE001 (best effort at exit)
            print("stopping a cluster at exit: %s" % e)

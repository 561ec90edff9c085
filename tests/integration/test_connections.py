"""
Connections and request memory against a real stratad: what a flood of
idle connections or of huge frames does to the broker, and Kafka's limits
on both.

1. File descriptors, with stratad under a low fd limit (RLIMIT_NOFILE 512,
   soft and hard, so it cannot raise it):
   a. default max.connections: the broker accepts only as many connections
      as the fd limit leaves room for after a reserve for its own files;
      the rest wait in the listen queue (not spinning), and are served once
      connections close;
   b. max.connections set above what the fds allow: accept runs into "too
      many open files", backs off without spinning, says so once per
      interval, and serves again once connections close.
2. max.connections / max.connections.per.ip(.overrides) with Kafka's
   semantics: at the broker-wide limit a new connection waits until a slot
   frees; over the per-IP limit it is closed at once.
3. A connection paused at 64 requests in flight (parked fetches) whose
   client half-closes: the broker waits for the answers without spinning
   on the peer's FIN.
4. Request memory (queued.max.request.bytes): 12 connections each announce
   a 100 MB frame and trickle, then send the frames whole.  The broker
   reserves no more than the bound while they trickle, reads the frames in
   turn (its peak RSS stays below the bound plus one request), answers all
   of them, and a small client keeps being served throughout.
"""
import os
import re
import resource
import select
import socket
import struct
import subprocess
import threading
import time

from strata_harness import (Broker, binary, check, CONFIG, fail, frame, kcat, kstr, read_frame,
                            request, wait_for)

import kwire

FD_LIMIT = 512
TICKS = os.sysconf("SC_CLK_TCK")
MiB = 1 << 20

# the test itself holds a thousand sockets or so
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if _soft < min(_hard, 8192):
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(_hard, 8192), _hard))


def low_fd_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def cpu_ticks(pid):
    """utime + stime of the whole process, in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def thread_ticks(pid):
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                st = f.read()
        except OSError:
            continue
        name = st[st.index("(") + 1:st.rindex(")")]
        fields = st.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0) + int(fields[11]) + int(fields[12])
    return out


def busy_threads(pid, seconds=2.0):
    """Total CPU ticks over `seconds`, and the threads that used any."""
    t0, c0 = thread_ticks(pid), cpu_ticks(pid)
    time.sleep(seconds)
    t1, c1 = thread_ticks(pid), cpu_ticks(pid)
    per = {k: v - t0.get(k, 0) for k, v in t1.items() if v - t0.get(k, 0) > 0}
    return c1 - c0, per


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    fail("no %s in /proc/%d/status" % (key, pid))


def under_tsan(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "libtsan" in f.read()


def api_versions(corr):
    return frame(struct.pack(">hhi", 18, 0, corr) + kstr("conn-test"))


def connect(port, src=None, timeout=10):
    s = socket.socket()
    if src:
        s.bind((src, 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def probe(s, timeout):
    """Send ApiVersions; 'answered', 'closed' (by the broker) or 'waiting'."""
    try:
        s.sendall(api_versions(7))
    except OSError:
        return "closed"
    s.settimeout(timeout)
    try:
        r = read_frame(s)
    except socket.timeout:
        return "waiting"
    except OSError:
        return "closed"
    return "answered" if r is not None else "closed"


def flood(port, n):
    """n connections, made without waiting for the broker to accept them
    (the kernel completes them into the listen queue)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        socks.append(s)
    pending = {s.fileno(): s for s in socks}
    poller = select.poll()
    for fd in pending:
        poller.register(fd, select.POLLOUT)
    deadline = time.time() + 60
    while pending and time.time() < deadline:
        for fd, _ in poller.poll(1000):
            poller.unregister(fd)
            del pending[fd]
    check(not pending, "%d of %d connections did not complete" % (len(pending), n))
    return socks


def close_all(socks):
    for s in socks:
        s.close()


def log_since(b, mark):
    return b.log_text()[mark:]


def roundtrip(b, topic):
    vals = [b"conn-%d" % i for i in range(20)]
    kcat(b, "-P", "-t", topic, input=b"\n".join(vals) + b"\n", timeout=60)
    _, out, _ = kcat(b, "-C", "-t", topic, "-e", "-q", "-o", "beginning", timeout=60)
    check(out.split(b"\n")[:-1] == vals, "%s: consumed %r" % (topic, out[:200]))


def settled(b, timeout=30):
    """Wait until stratad's fd count has not changed for a second."""
    deadline, last, since = time.time() + timeout, -1, time.time()
    while time.time() < deadline:
        n = open_fds(b.proc.pid)
        if n != last:
            last, since = n, time.time()
        elif time.time() - since >= 1.0:
            return n
        time.sleep(0.1)
    fail("stratad's fd count kept changing for %d s" % timeout)


def no_spin(b, what):
    used, per = busy_threads(b.proc.pid)
    print("%s: %.2f s of CPU in 2 s (%s)" % (what, used / TICKS,
          ", ".join("%s %d" % kv for kv in sorted(per.items())) or "no thread busy"), flush=True)
    check(used <= 0.05 * 2 * TICKS, "%s: stratad used %.2f s of CPU in 2 s (threads: %r)" %
          (what, used / TICKS, per))


# ---- 1a. default max.connections under a low fd limit ------------------------

def fds_default():
    b = Broker(preexec_fn=low_fd_limit).start()
    try:
        mark = len(b.log_text())
        socks = flood(b.port, FD_LIMIT + 200)
        settled(b)
        fds = open_fds(b.proc.pid)
        print("1a: %d connections made, stratad holds %d fds" % (len(socks), fds))
        no_spin(b, "1a: %d connections under an fd limit of %d" % (len(socks), FD_LIMIT))
        m = re.search(r"up to (\d+) connections", b.log_text())
        check(m is not None, "1a: no start-up line saying how many connections the fd limit allows")
        cap = int(m.group(1))
        print("1a: the broker allows %d connections under an fd limit of %d" % (cap, FD_LIMIT))
        check(0 < cap < FD_LIMIT - 64, "1a: %d connections leaves no reserve under %d fds" % (cap, FD_LIMIT))
        check(fds <= FD_LIMIT - 64, "1a: stratad holds %d of its %d fds" % (fds, FD_LIMIT))
        check("the most max.connections allows" in log_since(b, mark),
              "1a: the broker did not say it reached its connection limit")
        late = connect(b.port)
        check(probe(late, 1.5) == "waiting", "1a: a connection beyond the limit was not left waiting")
        close_all(socks)
        late.settimeout(10)
        r = read_frame(late)
        check(r is not None, "1a: the waiting connection was not served once others closed")
        late.close()
        roundtrip(b, "after-limit")
        check(b.stop() == 0, "1a: stratad did not stop cleanly")
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        b.cleanup()


# ---- 1b. max.connections above the fd limit: accept meets EMFILE ---------------

def fds_exhausted():
    b = Broker({"max.connections": "100000"}, preexec_fn=low_fd_limit).start()
    try:
        mark = len(b.log_text())
        socks = flood(b.port, FD_LIMIT + 200)
        wait_for(lambda: "too many open files" in log_since(b, mark).lower(), timeout=30,
                 what="1b: the broker to report too many open files")
        fds = open_fds(b.proc.pid)
        print("1b: %d connections made, stratad holds %d fds" % (len(socks), fds))
        t0 = time.time()
        before = log_since(b, mark).lower().count("too many open files")
        no_spin(b, "1b: out of fds")
        time.sleep(max(0.0, 3.0 - (time.time() - t0)))
        during = log_since(b, mark).lower().count("too many open files") - before
        print("1b: %d more 'too many open files' lines in %.1f s" % (during, time.time() - t0))
        check(during <= 1, "1b: %d 'too many open files' lines in 3 s: not rate-limited" % during)
        close_all(socks)
        roundtrip(b, "after-emfile")
        check(b.stop() == 0, "1b: stratad did not stop cleanly")
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        b.cleanup()


# ---- 2. max.connections and max.connections.per.ip ---------------------------

def limits():
    # Kafka's rule: per-IP 0 only with overrides
    p = subprocess.run([binary("stratad"), "--config", CONFIG, "--override",
                        "max.connections.per.ip=0"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30)
    out = p.stdout.decode(errors="replace")
    check(p.returncode == 1 and "max.connections.per.ip" in out,
          "max.connections.per.ip=0 without overrides: exit %d, %r" % (p.returncode, out[-300:]))

    b = Broker({"max.connections": "11", "max.connections.per.ip": "4",
                "max.connections.per.ip.overrides": "127.0.0.2:6"}).start()
    held = []
    try:
        for i in range(4):
            s = connect(b.port, "127.0.0.1")
            check(probe(s, 10) == "answered", "connection %d from 127.0.0.1 not served" % (i + 1))
            held.append(s)
        s = connect(b.port, "127.0.0.1")
        check(probe(s, 5) == "closed", "a 5th connection from 127.0.0.1 (per-IP limit 4) was not closed")
        s.close()
        for i in range(6):
            s = connect(b.port, "127.0.0.2")
            check(probe(s, 10) == "answered", "connection %d from 127.0.0.2 not served" % (i + 1))
            held.append(s)
        s = connect(b.port, "127.0.0.2")
        check(probe(s, 5) == "closed", "a 7th connection from 127.0.0.2 (override 6) was not closed")
        s.close()
        # (one line a second at most: the first refusal is the one logged)
        check(re.search(r"refused a connection from 127\.0\.0\.1.*max\.connections\.per\.ip", b.log_text()),
              "no log line for the refused connection")
        s = connect(b.port, "127.0.0.3")  # the 11th
        check(probe(s, 10) == "answered", "the 11th connection (max.connections 11) not served")
        held.append(s)
        queued = connect(b.port, "127.0.0.3")
        check(probe(queued, 1.5) == "waiting", "a 12th connection over max.connections 11 was not left waiting")
        held.pop(0).close()
        queued.settimeout(10)
        check(read_frame(queued) is not None, "the waiting connection was not served once a slot freed")
        held.append(queued)
        print("2: per-IP 4 (127.0.0.2: 6) refused at once; the 12th of 11 waited and was served")
        close_all(held)
        check(b.stop() == 0, "2: stratad did not stop cleanly")
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        b.cleanup()


# ---- 3. a paused connection half-closed ---------------------------------------

def fetch_v5(topic, max_wait_ms):
    body = struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqqi", 0, 0, -1, 1 << 20)
    return body


def half_close():
    b = Broker().start()
    try:
        c = kwire.Conn(b.port)
        check(c.create_topic("quiet", 1) == 0, "cannot create topic quiet")
        c.close()
        s = connect(b.port)
        # 70 fetches of an empty partition park for 10 s each: reading
        # pauses at 64 in flight, then the client shuts its side
        for corr in range(1, 71):
            s.sendall(request(1, 5, corr, fetch_v5("quiet", 10000)))
        s.shutdown(socket.SHUT_WR)
        no_spin(b, "3: a connection paused at 64 parked fetches, half-closed")
        check(probe(connect(b.port), 10) == "answered", "3: another client is not served")
        s.close()
        check(b.stop() == 0, "3: stratad did not stop cleanly")
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        b.cleanup()


# ---- 4. request memory -----------------------------------------------------------

BIG = 100_000_000
NBIG = 12


def big_produce_frame():
    """Produce v3 of one batch filling a BIG-byte frame: a header Kafka
    would parse, a CRC that is wrong; any error answer will do."""
    head = struct.pack(">hhi", 0, 3, 1) + kstr("big") + kstr(None) + struct.pack(">hi", 1, 30000)
    head += struct.pack(">i", 1) + kstr("big") + struct.pack(">i", 1) + struct.pack(">i", 0)
    reclen = BIG - len(head) - 4
    head += struct.pack(">i", reclen)
    batch = struct.pack(">qiib", 0, reclen - 12, 0, 2)
    body = bytearray(BIG)
    body[:len(head)] = head
    body[len(head):len(head) + len(batch)] = batch
    return struct.pack(">i", BIG) + bytes(body)


class BigSender(threading.Thread):
    def __init__(self, port, payload, go):
        super().__init__(daemon=True)
        self.port, self.payload, self.go = port, payload, go
        self.trickled = threading.Event()
        self.sent_at = self.answered_at = None
        self.resp, self.error = None, None

    def run(self):
        try:
            s = connect(self.port, timeout=300)
            view = memoryview(self.payload)
            s.sendall(view[:68])
            for i in range(10):  # trickle
                s.sendall(view[68 + i:69 + i])
                time.sleep(0.2)
            self.trickled.set()
            self.go.wait()
            s.sendall(view[78:])
            self.sent_at = time.time()
            self.resp = read_frame(s)
            self.answered_at = time.time()
            s.close()
        except Exception as e:  # noqa: BLE001 - any failure is the finding
            self.error = repr(e)
            self.trickled.set()


class SmallClient(threading.Thread):
    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop, self.n, self.worst, self.error = port, False, 0, 0.0, None

    def run(self):
        try:
            s = connect(self.port, timeout=30)
            corr = 0
            while not self.stop:
                corr += 1
                t0 = time.time()
                s.sendall(api_versions(corr))
                r = read_frame(s)
                if r is None or struct.unpack_from(">i", r)[0] != corr:
                    self.error = "bad answer %r" % (r[:8] if r else r)
                    return
                self.worst = max(self.worst, time.time() - t0)
                self.n += 1
                time.sleep(0.05)
        except Exception as e:  # noqa: BLE001
            self.error = repr(e)


def memory():
    b = Broker().start()
    try:
        c = kwire.Conn(b.port)
        check(c.create_topic("big", 1) == 0, "cannot create topic big")
        c.close()
        bound = 100 * MiB  # queued.max.request.bytes' default
        pid = b.proc.pid
        for _ in range(4):  # every loop has served something
            s = connect(b.port)
            probe(s, 10)
            s.close()
        base_rss, base_vm = status_kb(pid, "VmRSS"), status_kb(pid, "VmData")
        print("4: baseline RSS %d MiB, VmData %d MiB" % (base_rss >> 10, base_vm >> 10))
        payload = big_produce_frame()
        go = threading.Event()
        senders = [BigSender(b.port, payload, go) for _ in range(NBIG)]
        small = SmallClient(b.port)
        small.start()
        for t in senders:
            t.start()
        for t in senders:
            check(t.trickled.wait(60), "a sender did not finish trickling")
            check(t.error is None, "sender: %s" % t.error)
        vm = status_kb(pid, "VmData")
        print("4: %d connections announced %d MB and trickled: VmData +%d MiB, RSS +%d MiB, "
              "small client served %d times (worst %.2f s)" %
              (NBIG, BIG // 10**6, (vm - base_vm) >> 10, (status_kb(pid, "VmRSS") - base_rss) >> 10,
               small.n, small.worst))
        check(small.n > 0 and small.error is None, "4: small client not served while others trickle: %s" % small.error)
        check((vm - base_vm) * 1024 <= bound + 64 * MiB,
              "4: %d trickling 100 MB frames reserved %d MiB (bound %d MiB)" %
              (NBIG, (vm - base_vm) >> 10, bound >> 20))
        served_before = small.n
        t0 = time.time()
        go.set()
        for t in senders:
            t.join(300)
            check(not t.is_alive(), "4: a 100 MB frame was not answered in 300 s")
            check(t.error is None and t.resp is not None, "4: sender: %s" % (t.error or "connection closed"))
            corr, = struct.unpack_from(">i", t.resp)
            check(corr == 1, "4: answer with correlation id %d" % corr)
        small.stop = True
        small.join(30)
        hwm = status_kb(pid, "VmHWM")
        order = sorted(t.answered_at - t0 for t in senders)
        print("4: %d frames answered at %s s; peak RSS +%d MiB (bound %d MiB + one request); "
              "small client served %d times meanwhile (worst %.2f s)" %
              (NBIG, " ".join("%.1f" % x for x in order), (hwm - base_rss) >> 10, bound >> 20,
               small.n - served_before, small.worst))
        check(small.error is None, "4: small client: %s" % small.error)
        check(small.n - served_before > 0, "4: the small client was not served while frames were read")
        check(small.worst < 5, "4: the small client waited %.1f s for an answer" % small.worst)
        if under_tsan(pid):
            print("4: peak RSS not checked: stratad runs under ThreadSanitizer, whose shadow "
                  "memory grows with every byte the frames touched")
        else:
            check((hwm - base_rss) * 1024 <= bound + BIG + 64 * MiB,
                  "4: peak RSS grew by %d MiB for %d frames of 100 MB (bound %d MiB)" %
                  ((hwm - base_rss) >> 10, NBIG, bound >> 20))
        check("queued.max.request.bytes" in b.log_text(),
              "4: the broker never said reading waits on queued.max.request.bytes")
        check(b.stop() == 0, "4: stratad did not stop cleanly")
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        b.cleanup()


if __name__ == "__main__":
    import sys
    parts = sys.argv[1:] or ["fds-default", "fds-exhausted", "limits", "half-close", "memory"]
    if "fds-default" in parts:
        fds_default()
    if "fds-exhausted" in parts:
        fds_exhausted()
    if "limits" in parts:
        limits()
    if "half-close" in parts:
        half_close()
    if "memory" in parts:
        memory()
    print("PASS")

#!/usr/bin/env python3
"""
bench_longpoll - what idle long-polls cost a busy partition (not a test;
run by hand: python3 bench_longpoll.py [idle_polls] [batches]).

N connections each park a Fetch (max_wait 30 s, min_bytes 1) on a
partition of topic "idle" that never gets data; one consumer tails topic
"busy" with long-polls while one producer appends batches to it (acks=1),
each append waking the consumer's parked fetch.  Prints stratad's CPU time
per produced batch, from /proc/<pid>/stat, over the produce phase, and
the try_complete calls of the purgatories (their DEBUG "delayed" lines at
shutdown) per batch.  With
parked requests retried by watch key, the idle polls cost nothing per
batch; when every wake retries every parked request, each batch pays for
all of them.
"""
import os
import re
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import Broker, kstr, request  # noqa: E402


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def fetch_body(topic, partition, offset, max_wait):
    body = struct.pack(">iiiib", -1, max_wait, 1, 1 << 20, 0) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqqi", partition, offset, -1, 1 << 20)
    return body


def main():
    nidle = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    nbatches = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    b = Broker({"logger.debug": "delayed"}).start()
    try:
        c = kwire.Conn(b.port)
        assert c.create_topic("idle", 50) == 0
        assert c.create_topic("busy", 1) == 0
        idle = []
        for i in range(nidle):
            s = socket.create_connection(("127.0.0.1", b.port))
            s.sendall(request(1, 5, 1, fetch_body("idle", i % 50, 0, 30000)))
            idle.append(s)
        time.sleep(1.0)  # let the loops read and park them (a bench, not a test)

        stop = threading.Event()
        got = [0, 0]  # high watermark seen, fetches answered

        def tail():
            cc = kwire.Conn(b.port, timeout=30)
            off = 0
            while not stop.is_set():
                err, hw, _ls, recs = cc.fetch("busy", 0, off, max_wait=5000)
                got[1] += 1
                if recs:
                    off = hw
                    got[0] = hw
            cc.close()

        t = threading.Thread(target=tail)
        t.start()
        time.sleep(0.2)
        p = kwire.Conn(b.port)
        batch = kwire.record_batch([b"x" * 100])
        pid = b.proc.pid
        t0, c0 = time.monotonic(), cpu_ticks(pid)
        for _ in range(nbatches):
            err = p.produce("busy", 0, batch, acks=1)[1]
            assert err == 0, err
        t1, c1 = time.monotonic(), cpu_ticks(pid)
        stop.set()
        p.produce("busy", 0, batch, acks=1)  # ends the tail's last poll
        t.join()
        hz = os.sysconf("SC_CLK_TCK")
        cpu_s = (c1 - c0) / hz
        print("idle long-polls %d, batches %d: %.1f s wall, stratad CPU %.2f s = %.0f us per batch;"
              " the tail read up to %d in %d fetches"
              % (nidle, nbatches, t1 - t0, cpu_s, cpu_s * 1e6 / nbatches, got[0], got[1]))
        for s in idle:
            s.close()
        p.close()
        c.close()
        b.stop()
        # each loop's count of try_complete calls, logged when it drains
        tries = 0
        with open(b.logfile) as f:
            for line in f:
                m = re.search(r"loop \d+: (\d+) try_complete calls", line)
                if m:
                    tries += int(m.group(1))
        print("try_complete calls: %d in all (%d parked at the start, %d tail fetches), %.1f per batch"
              % (tries, nidle, got[1], tries / nbatches))
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()

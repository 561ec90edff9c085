"""
Parked fetches are woken by their own partitions only (watch keys, as
Kafka's purgatory), so idle long-polls cost nothing when another
partition is busy.

  1. 500 connections park a Fetch (max_wait 30 s, min_bytes 1) on the 50
     partitions of topic "idle"; a consumer tails topic "busy" with
     long-polls while 2000 batches are appended to it.  The purgatories'
     try_complete calls (their DEBUG "delayed" lines at shutdown) are at
     most one per parked idle fetch plus two per tail fetch and a few for
     step 2: a wake that retried every parked request of a loop would make
     it hundreds per batch.
  2. After that, every idle fetch is still parked (nothing to read on its
     socket); one record appended to idle partition 7 answers the ten
     fetches parked there at once (long before their max_wait), with that
     record, and no other.
"""
import re
import select
import socket
import struct
import threading

from kwire import Conn, Cursor, record_batch
from strata_harness import Broker, check, kstr, read_frame, request

NIDLE, NPARTS, NBATCHES, HOT = 500, 50, 2000, 7


def fetch_body(topic, partition, offset, max_wait):
    body = struct.pack(">iiiib", -1, max_wait, 1, 1 << 20, 0) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqqi", partition, offset, -1, 1 << 20)
    return body


def fetch_answer(frame_bytes):
    """(error, high watermark, record bytes) of a one-partition Fetch v5 answer."""
    c = Cursor(frame_bytes)
    c.take(">i")  # correlation
    c.take(">i")  # throttle
    c.take(">i")
    c.string()
    c.take(">i")
    _p, err, hw, _lso, _ls = c.take(">ihqqq")
    for _ in range(max(c.take(">i"), 0)):
        c.take(">qq")
    return err, hw, c.bytes_()


def main():
    b = Broker({"logger.debug": "delayed"}).start()
    idle = []
    try:
        c = Conn(b.port)
        check(c.create_topic("idle", NPARTS) == 0, "cannot create topic idle")
        check(c.create_topic("busy", 1) == 0, "cannot create topic busy")
        for i in range(NIDLE):
            s = socket.create_connection(("127.0.0.1", b.port))
            s.sendall(request(1, 5, 1, fetch_body("idle", i % NPARTS, 0, 30000)))
            idle.append(s)

        # 1. the busy partition, tailed
        tail = {"fetches": 0, "hw": 0, "error": None}

        def tailer():
            try:
                tc = Conn(b.port, timeout=30)
                off = 0
                while off < NBATCHES:
                    err, hw, _ls, recs = tc.fetch("busy", 0, off, max_wait=5000)
                    tail["fetches"] += 1
                    if err:
                        raise AssertionError("tail fetch error %d" % err)
                    if recs:
                        off = hw
                        tail["hw"] = hw
                tc.close()
            except Exception as e:  # reported by the main thread
                tail["error"] = e

        t = threading.Thread(target=tailer)
        t.start()
        p = Conn(b.port)
        batch = record_batch([b"b" * 100])
        for _ in range(NBATCHES):
            err = p.produce("busy", 0, batch, acks=1)[1]
            check(err == 0, "1: produce to busy: error %d" % err)
        t.join(30)
        check(not t.is_alive() and tail["error"] is None, "1: the tail failed: %s" % tail["error"])
        check(tail["hw"] == NBATCHES, "1: the tail read to %d, not %d" % (tail["hw"], NBATCHES))

        # 2. nothing answered yet; one record on HOT answers HOT's fetches
        readable, _, _ = select.select(idle, [], [], 0)
        check(not readable, "2: %d idle fetches answered before their partition got data"
              % len(readable))
        err = p.produce("idle", HOT, record_batch([b"hot"]), acks=1)[1]
        check(err == 0, "2: produce to idle-%d: error %d" % (HOT, err))
        for i in range(HOT, NIDLE, NPARTS):
            idle[i].settimeout(10)  # the answer comes at the append, max_wait is 30 s
            r = read_frame(idle[i])
            check(r is not None, "2: fetch %d on idle-%d: no answer" % (i, HOT))
            e, hw, recs = fetch_answer(r)
            check(e == 0 and hw == 1 and b"hot" in recs,
                  "2: fetch %d on idle-%d: error %d, high watermark %d, %d bytes"
                  % (i, HOT, e, hw, len(recs)))
        others = [s for i, s in enumerate(idle) if i % NPARTS != HOT]
        readable, _, _ = select.select(others, [], [], 0)
        check(not readable, "2: %d fetches of other partitions answered" % len(readable))
        for s in idle:
            s.close()
        idle = []
        p.close()
        c.close()
        check(b.stop() == 0, "stratad did not stop cleanly")

        tries = 0
        with open(b.logfile) as f:
            for line in f:
                m = re.search(r"loop \d+: (\d+) try_complete calls", line)
                if m:
                    tries += int(m.group(1))
        bound = NIDLE + 2 * tail["fetches"] + 2 * (NIDLE // NPARTS) + 20
        print("%d idle long-polls, %d batches to another partition, %d tail fetches: "
              "%d try_complete calls (%.2f per batch), bound %d"
              % (NIDLE, NBATCHES, tail["fetches"], tries, tries / NBATCHES, bound))
        check(tries > 0, "no 'try_complete calls' line in the log (logger.debug=delayed)")
        check(tries <= bound, "1: %d try_complete calls for %d batches: idle fetches were retried "
              "on another partition's appends" % (tries, NBATCHES))
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        for s in idle:
            s.close()
        b.cleanup()


if __name__ == "__main__":
    main()

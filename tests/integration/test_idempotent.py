"""
integration.idempotent - the librdkafka idempotent producer
(enable.idempotence=true, acks=all) through a faulty link and broker
crashes: every message exactly once and in order per partition.

    test_idempotent.py [single] [control] [cluster]   (default: single control)

single   one stratad; the producer (clients/rdk_idem_producer) reaches it
         only through tcpproxy.py (advertised.listeners names the proxy,
         so every reconnect goes through it too).  While it writes
         numbered messages to 3 partitions, the link is cut
         STRATA_IDEM_CUTS times (default 20; half of them after a delay
         that holds the broker's responses, so requests the broker has
         appended lose their answers and are sent again), slowed without a
         cut now and then, and stratad is killed with SIGKILL (while its
         answers are held, so it dies with batches written but not
         acknowledged, which its restart must recognise from the log) and
         started again STRATA_IDEM_KILLS times (default 10).  Then the topic is
         read back: per partition every acknowledged message at its
         acknowledged offset, each message once, in order, no gap, and no
         delivery failed nor a fatal error.
control  the same cuts (no kills) with enable.idempotence=false: the
         duplicates the test can see are printed, not asserted (whether
         a lost answer is resent depends on timing; the count shows the
         check would see them).
cluster  three combined nodes, each behind a proxy, a topic of
         replication factor 3, min.insync.replicas 2; the leader of a
         partition is killed STRATA_IDEM_LEADER_KILLS times (default 3)
         under the producer and started again.  Before each kill the
         leader's answers to the producer are held 0.4 s (its batches are
         appended and replicated, their answers never arrive), so the
         producer sends them again to the new leader, which must have the
         producer state (rebuilt from the replicated batches) to recognise
         them: 0 duplicates, 0 gaps.

Each part prints its figures: produced, acknowledged, duplicates, gaps,
reordered, lost, cuts, kills.
"""
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from idem_check import Faults, finish, tmpfile, wait_progress  # noqa: E402
from strata_harness import Broker, Cluster, binary, check, fail, free_port, log_starts, spawn  # noqa: E402
from tcpproxy import DELAY, PASS, TcpProxy  # noqa: E402

PARTS = 3
CUTS = int(os.environ.get("STRATA_IDEM_CUTS", "20"))
KILLS = int(os.environ.get("STRATA_IDEM_KILLS", "10"))
LEADER_KILLS = int(os.environ.get("STRATA_IDEM_LEADER_KILLS", "3"))
parts_wanted = sys.argv[1:] or ["single", "control"]
for w in parts_wanted:
    if w not in ("single", "control", "cluster"):
        fail("unknown part %r (single, control, cluster)" % w)


def producer(bootstrap, topic, tag, ackfile, *extra, rate=1500):
    return spawn([binary("rdk_idem_producer"), "-b", bootstrap, "-t", topic, "-o", ackfile, "-g", tag,
                  "-p", str(PARTS), "-r", str(rate), "-s", "100", "-w", "60000",
                  "-X", "topic.metadata.refresh.interval.ms=1000"] + list(extra),
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def run_single_broker():
    port = free_port()
    proxy = TcpProxy(("127.0.0.1", port), name="client link").start()
    b = Broker({"advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % proxy.port,
                "auto.create.topics.enable": "false"}, port=port)
    try:
        b.start()
        c = kwire.Conn(b.port)
        check(c.create_topic("idem", PARTS) == 0, "create topic idem")
        check(c.create_topic("plain", PARTS) == 0, "create topic plain")
        c.close()
        pb = "127.0.0.1:%d" % proxy.port
        if "single" in parts_wanted:
            ackfile = tmpfile("acks")
            proc = producer(pb, "idem", "I", ackfile)
            n = wait_progress(ackfile, 0, 100, proc, 30, "before the first fault")
            f = Faults(proxy)
            kills = 0
            t0 = time.time()
            steps = max(CUTS, 2 * KILLS)
            for i in range(steps):
                if i < CUTS:
                    if i % 2 == 0:
                        f.lose_replies()
                    else:
                        f.cut()
                    if i % 5 == 4:
                        f.delay(0.3)
                n = wait_progress(ackfile, n, 40, proc, 30, "after cut %d" % f.cuts)
                if i % 2 == 1 and kills < KILLS:
                    f.crash(b)
                    kills += 1
                    n = wait_progress(ackfile, n, 40, proc, 30, "after kill %d" % kills)
            while kills < KILLS:
                f.crash(b)
                kills += 1
                n = wait_progress(ackfile, n, 40, proc, 30, "after kill %d" % kills)
            held = (CUTS + 1) // 2
            print("single broker: %d cuts (%d of them after holding the answers %d ms), %d slow spells, "
                  "%d SIGKILLs (each while the answers were held 0.3 s) + restarts in %.1f s" %
                  (f.cuts, held, f.hold_ms, f.delays - held, kills, time.time() - t0), flush=True)
            wait_progress(ackfile, n, 100, proc, 30, "after the last fault")
            finish(proc, ackfile, b.bootstrap, "idem", "I", "single broker, idempotent", f.cuts, kills, PARTS)
            # evidence that the crashes did what they are for (the broker's
            # log line is rate-limited, so this counts starts, not batches)
            starts = log_starts(b)[1:]
            print("single broker: %d of the %d starts after a SIGKILL answered a batch sent again as a "
                  "duplicate (their log says so)" % (sum("duplicate batch" in s for s in starts), len(starts)),
                  flush=True)
        if "control" in parts_wanted:
            ackfile = tmpfile("acks")
            proc = producer(pb, "plain", "C", ackfile, "-X", "enable.idempotence=false",
                            "-X", "max.in.flight=5")
            n = wait_progress(ackfile, 0, 100, proc, 30, "before the first fault (control)")
            f = Faults(proxy)
            for i in range(CUTS):
                if i % 2 == 0:
                    f.lose_replies()
                else:
                    f.cut()
                n = wait_progress(ackfile, n, 40, proc, 30, "after cut %d (control)" % f.cuts)
            figs = finish(proc, ackfile, b.bootstrap, "plain", "C", "control, enable.idempotence=false",
                          f.cuts, 0, PARTS, strict=False)
            print("control: the same cuts without idempotence wrote %d duplicates (%s)" %
                  (figs["all"]["duplicates"], "the check sees them" if figs["all"]["duplicates"]
                   else "none this time: no answer was lost after an append"), flush=True)
        rc = b.stop()
        check(rc == 0, "stratad exited %s at SIGTERM" % rc)
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        proxy.close()
        b.cleanup()


def run_cluster():
    cl = Cluster(3, overrides={
        "broker.heartbeat.interval.ms": "300",
        "broker.session.timeout.ms": "2500",
        "replica.lag.time.max.ms": "1500",
    })
    # every node is reached through a proxy (its advertised listener), so
    # the answers to the producer can be held while the followers, which
    # fetch through the same proxy, are not
    proxies = {i: TcpProxy(("127.0.0.1", cl.port(i)), name="node %d" % i).start() for i in cl.ids()}
    for i in cl.ids():
        cl.node_overrides[i] = {"advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % proxies[i].port}

    def state(p, nodes=None):
        for i in nodes or cl.live():
            try:
                return cl.metadata(i, ["idem3"], timeout=2)["topics"]["idem3"][1][p]
            except (OSError, ConnectionError, struct.error, KeyError, AssertionError):
                continue
        return None

    def whole_isr():
        for p in range(PARTS):
            s = state(p)
            if not s or len(s["isr"]) != 3 or s["leader"] < 0:
                return False
        return True

    try:
        cl.up(timeout=90)
        c = cl.conn(1)
        check(c.create_topic("idem3", PARTS, rf=3, configs={"min.insync.replicas": "2"}) == 0, "create idem3")
        c.close()
        cl.wait(whole_isr, 60, "every partition of idem3 to have 3 in-sync replicas")
        ackfile = tmpfile("acks")
        pb = ",".join("127.0.0.1:%d" % proxies[i].port for i in cl.ids())
        proc = producer(pb, "idem3", "R", ackfile, "-X", "topic.metadata.refresh.interval.ms=500",
                        rate=1000)
        n = wait_progress(ackfile, 0, 100, proc, 30, "before the first leader kill")
        for k in range(LEADER_KILLS):
            p = k % PARTS
            old = state(p)["leader"]
            # the producer's answers from the leader are held while its
            # batches are appended and replicated, then the leader dies:
            # the batches are committed, their answers lost, and the
            # producer sends them again to the new leader
            proxies[old].set_mode(DELAY, delay_ms=5000, replies_only="produce")
            time.sleep(0.4)
            cl.kill(old)
            proxies[old].cut()
            proxies[old].set_mode(PASS)
            t0 = time.time()
            survivors = [i for i in cl.ids() if i != old]
            cl.wait(lambda: (state(p, survivors) or {}).get("leader") in survivors, 30,
                    "a survivor to lead idem3-%d after node %d was killed" % (p, old))
            new = state(p, survivors)["leader"]
            n = wait_progress(ackfile, n, 50, proc, 30, "after leader kill %d" % (k + 1))
            print("leader kill %d: node %d led idem3-%d, node %d leads it %.2f s later" %
                  (k + 1, old, p, new, time.time() - t0), flush=True)
            cl.restart(old, timeout=90)
            cl.wait(whole_isr, 60, "every partition of idem3 to have 3 in-sync replicas again")
            n = wait_progress(ackfile, n, 50, proc, 30, "after node %d came back" % old)
        finish(proc, ackfile, cl.bootstrap(), "idem3", "R", "3 nodes, RF 3, idempotent", 0, LEADER_KILLS, PARTS)
        # evidence that the resends reached a new leader (its log line is
        # rate-limited: lines, not batches)
        dups = {i: cl.log_text(i).count("duplicate batch") for i in cl.ids()}
        print("3 nodes: log lines of a batch sent again answered as a duplicate, per node: %r" % dups, flush=True)
    except SystemExit as e:
        cl.explain_failure(e)
        raise
    finally:
        for px in proxies.values():
            px.close()
        cl.cleanup()


if "single" in parts_wanted or "control" in parts_wanted:
    run_single_broker()
if "cluster" in parts_wanted:
    run_cluster()
print("PASS", flush=True)

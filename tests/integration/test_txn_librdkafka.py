"""
integration.txn_librdkafka - librdkafka's transactional producer against
one stratad, end to end through the transaction coordinator and the
partition leader's markers (`clients/rdk_txn`):

  - a producer commits 10 transactions of 10 messages over 3 partitions,
    another aborts 5 (each run keeps to one outcome: librdkafka 2.0's
    abort_transaction right after a commit can meet INVALID_TXN_STATE from
    any Kafka coordinator, confluentinc/librdkafka#4849);
  - a read_committed consumer sees exactly the committed messages, each
    once, in order per partition; a read_uncommitted one sees those and
    what the aborted ones had sent before the abort;
  - a zombie: a second producer with the same transactional id fences the
    first, whose commit fails fatally; the second commits;
  - `strata transactions list` shows the ids CompleteCommit /
    CompleteAbort;
  - the coordinator is restarted (SIGKILL) and the committing producer's
    id continues: 3 more committed transactions, read_committed sees them.
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import CONFIG, Broker, binary, check  # noqa: E402

TOPIC = "txn-rdk"


def rdk(*args, timeout=180):
    t = time.time()
    p = subprocess.run([binary("rdk_txn")] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.time() - t


def produce(tid, n, abort_every, what):
    rc, out, err, dt = rdk("produce", "-b", b.bootstrap, "-t", TOPIC, "-i", tid, "-n", str(n), "-m", "10",
                           "-a", str(abort_every), "-p", "3")
    lines = out.splitlines()
    committed = [int(ln.split()[1]) for ln in lines if ln.startswith("COMMITTED")]
    aborted = [int(ln.split()[1]) for ln in lines if ln.startswith("ABORTED")]
    print("%s: rc %d in %.1f s, %d committed, %d aborted" % (what, rc, dt, len(committed), len(aborted)),
          flush=True)
    check(rc == 0, "%s: rc %d\n%s\n%s" % (what, rc, out[-2000:], err[-3000:]))
    return committed, aborted


def consume(isolation):
    rc, out, err, _ = rdk("consume", "-b", b.bootstrap, "-t", TOPIC, "-p", "3", "-I", "4000", "-X",
                          "isolation.level=" + isolation)
    check(rc == 0, "consume %s: rc %d %s" % (isolation, rc, err[-2000:]))
    got = []
    for ln in out.splitlines():
        parts = ln.split(" ")
        if len(parts) == 4 and parts[0].isdigit():
            got.append((int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])))
    return got


b = Broker({}).start()
c = kwire.Conn(b.port, timeout=15)
check(c.create_topic(TOPIC, 3) == 0, "create topic")
c.close()

committed, aborted = produce("rdk-commit", 10, 0, "committing producer")
check(committed == list(range(10)) and not aborted, "committing producer: %r %r" % (committed, aborted))
committed2, aborted2 = produce("rdk-abort", 5, 1, "aborting producer")
check(aborted2 == list(range(5)) and not committed2, "aborting producer: %r %r" % (committed2, aborted2))


def check_committed(got, ntxns):
    # the committing producer's values are "k j": exactly those of its
    # committed transactions, each once, in (k, j) order per partition
    want = sorted((j % 3, k, j) for k in range(ntxns) for j in range(10))
    seen = sorted((p, k, j) for p, _off, k, j in got)
    check(len(got) == len(set((p, o) for p, o, _k, _j in got)), "a message read twice")
    check(seen == want, "read_committed saw %d messages, expected %d (the aborted ones are 50)" %
          (len(seen), len(want)))
    for p in range(3):
        vals = [(k, j) for pp, _o, k, j in sorted(got, key=lambda x: (x[0], x[1])) if pp == p]
        check(vals == sorted(vals), "partition %d out of order" % p)


got = consume("read_committed")
check_committed(got, 10)
print("read_committed: %d messages, exactly the 10 committed transactions, in order" % len(got), flush=True)
allmsgs = consume("read_uncommitted")
# librdkafka purges an aborted transaction's queued messages; what it
# had sent is in the log, visible to read_uncommitted only
check(100 <= len(allmsgs) <= 150, "read_uncommitted saw %d messages" % len(allmsgs))
print("read_uncommitted: %d messages (%d of the aborted transactions' were sent before the abort)" %
      (len(allmsgs), len(allmsgs) - 100), flush=True)

rc, out, err, _ = rdk("zombie", "-b", b.bootstrap, "-t", TOPIC, "-i", "rdk-zombie")
print("zombie: rc %d: %s" % (rc, " | ".join(out.split("\n")).strip(" |")), flush=True)
check(rc == 0 and "FENCED" in out and "SECOND COMMITTED" in out, "zombie: %s %s" % (out, err[-2000:]))

p = subprocess.run([binary("strata"), "transactions", "--config", CONFIG, "--bootstrap", b.bootstrap, "list"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
print(p.stdout.decode(), end="", flush=True)
rows = {ln.split()[0]: ln.split()[3] for ln in p.stdout.decode().splitlines()[1:]}
check(rows.get("rdk-commit") == "CompleteCommit" and rows.get("rdk-abort") in ("CompleteAbort", "Empty") and
      rows.get("rdk-zombie") == "CompleteCommit", "strata transactions list: %r" % rows)

# the coordinator dies and comes back: the id goes on
b.kill()
b.start()
committed3, _ = produce("rdk-commit", 3, 0, "committing producer after a SIGKILL")
check(committed3 == [0, 1, 2], "after the restart: %r" % committed3)
got = consume("read_committed")
check(len(got) == 130, "read_committed after the restart: %d messages, expected 130" % len(got))
print("after SIGKILL and restart: read_committed %d messages" % len(got), flush=True)
check(b.stop() == 0, "stratad did not stop cleanly")
check(not re.search(r"(ERROR|WARNING): (AddressSanitizer|LeakSanitizer)|runtime error: ", b.log_text()),
      "a sanitizer report in stratad's log:\n" + b.log_tail())
b.cleanup()
print("OK", flush=True)

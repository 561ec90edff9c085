"""
integration.txn_kafkajs - kafkajs's transactional producer against one
stratad (js/txn_producer.js):

  - 12 transactions of 9 messages over 3 partitions, every third aborted
    after its sends were acknowledged (so the aborted data is in the log);
  - kafkajs's read_committed consumer sees exactly the 8 committed
    transactions, each message once, in order per partition, and none of
    the aborted ones, which a read_uncommitted fetch (kwire) does see;
  - a zombie producer with the same transactional id is fenced;
  - `strata transactions describe` shows the id CompleteAbort (its last
    transaction was aborted).
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import CONFIG, Broker, binary, check, fail  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
JS = os.path.join(HERE, "js")
TOPIC = "txn-js"

node = shutil.which("node")
if not node or not os.path.isdir(os.path.join(JS, "node_modules", "kafkajs")):
    fail("node and tests/integration/js/node_modules/kafkajs are required (scripts/test.sh installs them)")


def js(*args, timeout=180):
    p = subprocess.run([node, os.path.join(JS, "txn_producer.js")] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode()


b = Broker({}).start()
c = kwire.Conn(b.port, timeout=15)
check(c.create_topic(TOPIC, 3) == 0, "create topic")

rc, out = js("produce", b.bootstrap, TOPIC, "js-txn", "12", "9", "3")
lines = out.splitlines()
committed = [int(ln.split()[1]) for ln in lines if ln.startswith("COMMITTED")]
aborted = [int(ln.split()[1]) for ln in lines if ln.startswith("ABORTED")]
print("kafkajs producer: rc %d, committed %r, aborted %r" % (rc, committed, aborted), flush=True)
check(rc == 0 and aborted == [2, 5, 8, 11] and len(committed) == 8, "kafkajs producer:\n%s" % out[-3000:])

rc, out = js("consume", b.bootstrap, TOPIC, "4000")
check(rc == 0, "kafkajs consumer: rc %d\n%s" % (rc, out[-3000:]))
got = [ln.split(" ", 2) for ln in out.splitlines() if re.match(r"^\d+ \d+ \d+ \d+$", ln)]
vals = [(int(p), int(o), tuple(int(x) for x in v.split())) for p, o, v in got]
want = sorted((j % 3, (k, j)) for k in committed for j in range(9))
check(sorted((p, v) for p, _o, v in vals) == want,
      "read_committed saw %d messages, expected the %d of the committed transactions" % (len(vals), len(want)))
for p in range(3):
    seq = [v for pp, _o, v in sorted(vals) if pp == p]
    check(seq == sorted(seq), "partition %d out of order" % p)
print("kafkajs read_committed: %d messages, exactly the committed transactions, in order" % len(vals), flush=True)

# the aborted data is in the log: a read_uncommitted fetch sees it
n = 0
for p in range(3):
    off = 0
    while True:
        err, hw, _ls, data = c.fetch(TOPIC, p, off)
        check(err == 0, "fetch %s-%d: %d" % (TOPIC, p, err))
        bs = kwire.batches(data)
        for base, count, bb in bs:
            attrs = int.from_bytes(bb[21:23], "big")
            if not attrs & 0x20:  # not a control batch
                n += count
            off = base + count
        if not bs or off >= hw:
            break
check(n == 12 * 9, "read_uncommitted: %d data records, expected all 108" % n)
print("read_uncommitted: all %d records (the aborted ones too)" % n, flush=True)

rc, out = js("zombie", b.bootstrap, TOPIC, "js-zombie")
print("kafkajs zombie: %s" % " | ".join(out.split()), flush=True)
check(rc == 0 and "FENCED" in out and "SECOND COMMITTED" in out, "zombie:\n%s" % out[-2000:])

p = subprocess.run([binary("strata"), "transactions", "--config", CONFIG, "--bootstrap", b.bootstrap, "describe",
                    "js-txn"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
print(p.stdout.decode(), end="", flush=True)
check(p.returncode == 0 and "CompleteAbort" in p.stdout.decode(), "strata transactions describe js-txn")  # 11 aborted
c.close()
check(b.stop() == 0, "stratad did not stop cleanly")
b.cleanup()
print("OK", flush=True)

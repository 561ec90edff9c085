"""
A full disk: one log dir on a 4 MB tmpfs fills up.  Produce to the
partition there gets KAFKA_STORAGE_ERROR (56) and the log goes offline,
while partitions in the other log dir keep taking and serving records, and
the broker keeps running.  Needs to mount a tmpfs (root); skipped
otherwise.
"""
import os
import subprocess
import sys
import tempfile

from kwire import Conn, batches, record_batch
from strata_harness import Broker, check, fail

SKIP = 77
small = tempfile.mkdtemp(prefix="strata-full-")
if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", small],
                  stderr=subprocess.DEVNULL).returncode != 0:
    print("SKIPPED: cannot mount a tmpfs here (needs root)")
    os.rmdir(small)
    sys.exit(SKIP)

b = None
try:
    b = Broker()
    normal = os.path.join(b.root, "logs")
    os.makedirs(normal, exist_ok=True)
    # the metadata log stays in the first dir; the next partition goes to
    # the dir holding the fewest: the small one
    b.overrides["log.dirs"] = "%s,%s" % (normal, small)
    b.start()
    c = Conn(b.port)
    check(c.create_topic("full", 1) == 0, "create full")
    check(os.path.isdir(os.path.join(small, "full-0")), "topic 'full' is not on the small dir")
    check(c.create_topic("fine", 1) == 0, "create fine")
    check(os.path.isdir(os.path.join(normal, "fine-0")), "topic 'fine' is not on the big dir")

    acked, errors = 0, []
    for i in range(200):
        err = c.produce("full", 0, record_batch([os.urandom(50000)]), acks=1)[1]
        if err == 0:
            acked += 1
        else:
            errors.append(err)
            if len(errors) >= 3:
                break
    check(errors and all(e == 56 for e in errors),
          "a full disk gave %r, want KAFKA_STORAGE_ERROR (56)" % errors[:3])
    check(acked > 10, "only %d records before the disk filled" % acked)
    err = c.fetch("full", 0, 0)[0]
    check(err == 56, "fetch from the offline log: error %d, want 56" % err)

    # the rest of the broker serves on
    for i in range(50):
        err = c.produce("fine", 0, record_batch([b"fine-%d" % i]), acks=-1)[1]
        check(err == 0, "produce to the healthy dir: error %d" % err)
    err, hw, _, data = c.fetch("fine", 0, 0)
    check(err == 0 and hw == 50 and len(batches(data)) == 50, "read back from the healthy dir")
    check(b.alive(), "stratad died")
    check("offline" in b.log_text(), "the log does not say the partition went offline")
    print("ok: %d records before the disk filled; then error 56; the other dir kept serving" % acked)
finally:
    if b:
        b.stop()
        b.cleanup()
    subprocess.run(["umount", small])
    os.rmdir(small)

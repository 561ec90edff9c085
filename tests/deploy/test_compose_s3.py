"""
deploy.compose_s3: the compose file's three nodes on loopback (as in
deploy.compose) tiering to a real S3 server with the compose file's own
object store settings (backend s3, path style, region, the credentials in
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY rather than in the properties
file): only the endpoint and the bucket are the Ceph RGW of the `rgw`
fixture's (MinIO is not in Debian), under a prefix of this run's, and
segments are made small so that they close.  Segments of a topic with
three replicas must reach the bucket, the local copies must go once they
are there, and every record must read back from offset 0, the old part
from the bucket.

  test_compose_s3.py RGW_ENV_FILE
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

from compose_loopback import Loopback, resolved
from deploy_util import BIN, check, fail, wait_for

tmp = tempfile.mkdtemp(prefix="strata-compose-s3-")
atexit.register(shutil.rmtree, tmp, True)
rgw = {}
with open(sys.argv[1]) as f:
    for line in f:
        k, _, v = line.strip().partition("=")
        if k:
            rgw[k] = v
check("STRATA_RGW_ENDPOINT" in rgw, "%s holds no RGW endpoint (did rgw.sh start fail?)" % sys.argv[1])

cfg = resolved(tmp)
lb = Loopback(cfg, tmp)
prefix = "compose-s3-%d-%d/" % (os.getpid(), int(time.time()))
lb.start({"STRATA_OBJECTSTORE_S3_ENDPOINT": rgw["STRATA_RGW_ENDPOINT"],
          "STRATA_OBJECTSTORE_S3_BUCKET": rgw["STRATA_RGW_BUCKET"],
          "STRATA_OBJECTSTORE_S3_PREFIX": prefix,
          "AWS_ACCESS_KEY_ID": rgw["STRATA_RGW_ACCESS_KEY"],
          "AWS_SECRET_ACCESS_KEY": rgw["STRATA_RGW_SECRET_KEY"],
          "STRATA_LOG_SEGMENT_BYTES": "524288",
          "STRATA_LOG_LOCAL_RETENTION_BYTES": "524288",
          "STRATA_LOG_RETENTION_CHECK_INTERVAL_MS": "1000",
          "STRATA_REMOTE_LOG_MANAGER_TASK_INTERVAL_MS": "1000"})
lb.wait_brokers()
for n in lb.nodes:
    text = open(os.path.join(tmp, n, "server.properties")).read()
    check(rgw["STRATA_RGW_SECRET_KEY"] not in text and "secret.key" not in text,
          "%s: the secret is in the properties file" % n)
    check("objectstore.backend=s3" in text and "objectstore.s3.path.style=true" in text,
          "%s: not compose's object store settings:\n%s" % (n, text))
print("ok: 3 nodes up with compose's object store settings, the credentials only in AWS_*")

# 3 partitions x ~2 MB: four 512 KB segments each, three of them closed
# (keyed, so that the keys' hashes spread them over the partitions)
records = ["%06d-%s" % (i, "x" * 1000) for i in range(6000)]
topic = "compose-s3"
p = subprocess.run(["kcat", "-b", lb.bootstrap, "-P", "-t", topic, "-K", ":", "-X", "acks=all",
                    "-X", "message.timeout.ms=20000", "-X", "batch.size=65536"], input="".join("k%d:%s\n" % (i, r) for i, r in enumerate(records)), text=True,
                   capture_output=True, timeout=120)
check(p.returncode == 0 and "ERROR" not in p.stderr, "produce: %s" % p.stderr[-2000:])

bucket_env = {"PATH": "/usr/bin:/bin", "AWS_ACCESS_KEY_ID": rgw["STRATA_RGW_ACCESS_KEY"],
              "AWS_SECRET_ACCESS_KEY": rgw["STRATA_RGW_SECRET_KEY"]}
conf = os.path.join(tmp, lb.nodes[0], "server.properties")


listing = {"text": ""}


def segments():
    p = subprocess.run([os.path.join(BIN, "strata"), "bucket", "--config", conf, "ls"],
                       env=bucket_env, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("strata bucket ls: %s" % p.stderr)
    listing["text"] = p.stdout
    keys = [line.split()[-1] for line in p.stdout.splitlines() if line.strip()]
    # keys are shown under the prefix (objectstore.s3.prefix) of the config
    logs = [k for k in keys if k.startswith(topic + "-") and k.endswith(".log")]
    parts = {k[len(topic) + 1:].split("/")[1] for k in logs}
    return logs if parts == {"0", "1", "2"} else None


try:
    logs = wait_for(segments, 120, "closed segments of all 3 partitions in the bucket")
except SystemExit:
    print("the bucket:\n%s\n%s" % (listing["text"][-3000:], lb.logs()))
    raise
print("ok: %d segments of %s's 3 partitions in the bucket under %s" % (len(logs), topic, prefix))


def local_gone():
    # the leader of each partition keeps only what local retention allows
    n = 0
    for node in lb.nodes:
        for part in range(3):
            d = os.path.join(tmp, node, "logs", "%s-%d" % (topic, part))
            if os.path.isdir(d):
                n += sum(1 for f in os.listdir(d) if f.endswith(".log") and f.startswith("00000000000000000000"))
    return n < 9


wait_for(local_gone, 120, "a tiered first segment to leave a local log")
p = subprocess.run(["kcat", "-b", lb.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                   capture_output=True, text=True, timeout=180)
got = p.stdout.split()
check(sorted(got) == sorted(records), "read back %d of %d records" % (len(got), len(records)))
print("ok: first segments gone from local logs; all %d records read back from offset 0" % len(records))
lb.stop()
print("ok: the 3 nodes stopped cleanly")
print("deploy.compose_s3: all checks passed")

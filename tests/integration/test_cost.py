"""
integration.cost.rgw - the object store cost estimate of /metrics, /v1/status
and the console against Ceph RGW's own count of the requests it served (its
usage log), after a replay from the bucket (issue 13: within 5%).

usage: test_cost.py ENVFILE   (the env file of tests/s3/rgw.sh: the rgw fixture)

1. A user and a bucket of this test's own in the fixture's RGW (radosgw-admin
   user create, a signed PUT), so that the user's usage log holds this
   broker's requests and nothing of other tests sharing the fixture.
2. stratad tiers to it with 5 MiB multipart parts and an admin listener.
   Topic cost (one partition, 12 MiB segments, one segment kept locally,
   1 MiB chunks) gets about 48 MB from kcat: each segment's .log goes up
   in CreateMultipartUpload + 3 parts + Complete, and once the uploads
   settle the old segments are only in the bucket.
3. Strata's requests by class (/metrics: strata_objectstore_requests_total)
   against the usage log's operations mapped to the same classes (RGW_CLASS
   below, as RGW 16 names them): per class and in total, within 5%; the
   topic's own (strata_tiering_requests_total) are those less the start-up
   check.
4. kcat replays the topic from offset 0, below the local log start: from
   the bucket. The topic's read requests during the replay against the
   usage log's get_obj during it, within 5%; the requests per GiB replayed
   from both sides.
5. /metrics' cost values are the counts (and the remote bytes) at the
   default prices; /v1/status says the same; the console page, drawn by
   headless Chromium, shows the topic's row and the total with them.

The figures (both sides' counts, the differences in %, requests per GiB
replayed, the dollars) are printed.
"""
import base64
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kwire import Conn  # noqa: E402
from strata_harness import (Broker, check, fail, free_port, rgw_env, run, s3_overrides,  # noqa: E402
                            tiered_overrides, wait_for)
from test_admin import parse_metrics, promtool_check  # noqa: E402
from test_console import Tables, dump_dom  # noqa: E402

if len(sys.argv) != 2:
    sys.exit("usage: test_cost.py ENVFILE")
TOPIC = "cost"
SEG = 12 << 20
PART = 5 << 20
CHUNK = 1 << 20
GIB = float(1 << 30)
# S3 Standard's list prices: the defaults of objectstore.cost.*
PRICE = {"write": 0.005 / 1000, "read": 0.0004 / 1000, "free": 0.0}
STORAGE_GIB_MONTH = 0.023
TOLERANCE = 0.05

# How RGW 16 names the operations in its usage log (measured: `radosgw-admin
# usage show` after each kind of request), by S3's billing class.
RGW_CLASS = {
    "put_obj": "write",             # PutObject, and UploadPart too
    "init_multipart": "write",      # CreateMultipartUpload (POST ?uploads)
    "complete_multipart": "write",  # CompleteMultipartUpload (POST ?uploadId)
    "list_bucket": "write",         # ListObjectsV2 (a LIST), the start-up check's too
    "multi_object_delete": "write",  # DeleteObjects (a POST): Strata counts it as a write
    "copy_obj": "write",
    "get_obj": "read",              # GetObject, and HeadObject too (a HEAD is a get_obj)
    "delete_obj": "free",           # DeleteObject
    "abort_multipart": "free",      # AbortMultipartUpload (a DELETE)
}


# ---- RGW: a user of our own and its usage log

class RgwUser:
    def __init__(self, env):
        self.env = env
        self.conf = os.path.join(env["STRATA_RGW_DIR"], "ceph.conf")
        rnd = random.Random()
        self.uid = "cost-%08x" % rnd.getrandbits(32)
        self.access = "".join(rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(20))
        self.secret = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(40))
        self.bucket = self.uid
        run(["radosgw-admin", "-c", self.conf, "user", "create", "--uid=" + self.uid,
             "--display-name=" + self.uid, "--access-key=" + self.access, "--secret-key=" + self.secret],
            timeout=60)
        url = "%s/%s" % (env["STRATA_RGW_ENDPOINT"], self.bucket)
        _, code, _ = run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT",
                          "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "%s:%s" % (self.access, self.secret),
                          "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-H", "Content-Length: 0", url],
                         timeout=60)
        check(code.decode() == "200", "creating bucket %s answered %s" % (self.bucket, code.decode()))

    def usage(self):
        """{operation: (ops, bytes sent by RGW)} of the user's usage log."""
        _, out, _ = run(["radosgw-admin", "-c", self.conf, "usage", "show", "--uid=" + self.uid,
                         "--show-log-entries=false"], timeout=60)
        ops = {}
        for s in json.loads(out).get("summary", []):
            for c in s["categories"]:
                ops[c["category"]] = (c["ops"], c["bytes_sent"])
        return ops

    def settled_usage(self, quiet_s=3.0, timeout=60):
        """The usage log once it stopped changing for quiet_s (it is written
        out every second: rgw usage log tick interval in tests/s3/rgw.sh)."""
        last, since = None, time.time()
        deadline = time.time() + timeout
        while time.time() < deadline:
            u = self.usage()
            if u != last:
                last, since = u, time.time()
            elif time.time() - since >= quiet_s:
                return u
            time.sleep(0.5)
        fail("RGW's usage log did not settle in %d s" % timeout)

    def remove(self):
        run(["radosgw-admin", "-c", self.conf, "user", "rm", "--uid=" + self.uid, "--purge-data"],
            timeout=120, check_rc=False)


def rgw_classes(usage, base):
    """Requests by class in usage less base; an operation missing from
    RGW_CLASS fails (the mapping must name all that was done)."""
    out = {"write": 0, "read": 0, "free": 0}
    for op, (n, _) in usage.items():
        n -= base.get(op, (0, 0))[0]
        if not n:
            continue
        check(op in RGW_CLASS, "RGW's usage log names an operation the test does not map: %s (%d)" % (op, n))
        out[RGW_CLASS[op]] += n
    return out


# ---- stratad's side

def http(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30) as r:
        return r.read().decode()


def scrape(port):
    body = http(port, "/metrics")
    return body, parse_metrics(body)


def m(ms, name, **labels):
    return ms.get((name, frozenset((k, str(v)) for k, v in labels.items())))


def strata_classes(ms, topic=None):
    if topic is None:
        return {c: int(m(ms, "strata_objectstore_requests_total", **{"class": c}) or 0)
                for c in ("write", "read", "free")}
    return {c: int(m(ms, "strata_tiering_requests_total", topic=topic, **{"class": c}) or 0)
            for c in ("write", "read", "free")}


def settled_metrics(aport, quiet_s=2.0, timeout=120):
    """/metrics once the object store's counts stopped moving for quiet_s."""
    last, since = None, time.time()
    deadline = time.time() + timeout
    while time.time() < deadline:
        body, ms = scrape(aport)
        now = (strata_classes(ms), strata_classes(ms, TOPIC))
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet_s:
            return body, ms
        time.sleep(0.3)
    fail("the broker's object store requests did not settle in %d s" % timeout)


def pct(a, b):
    """a against b in %: 0 when both are 0."""
    return 0.0 if a == b else 100.0 * abs(a - b) / max(a, b)


def near(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def compare(what, strata, rgw):
    """Per class and in total, within TOLERANCE; prints both sides."""
    st, rg = sum(strata.values()), sum(rgw.values())
    print("%s: Strata %s = %d, RGW %s = %d, difference %.2f%%" %
          (what, strata, st, rgw, rg, pct(st, rg)), flush=True)
    for c in ("write", "read", "free"):
        check(pct(strata[c], rgw[c]) <= TOLERANCE * 100,
              "%s: %s requests: Strata counted %d, RGW's usage log %d (%.1f%% apart)" %
              (what, c, strata[c], rgw[c], pct(strata[c], rgw[c])))
    check(st > 0 and pct(st, rg) <= TOLERANCE * 100,
          "%s: Strata counted %d requests, RGW %d (%.1f%% apart)" % (what, st, rg, pct(st, rg)))


def main():
    env = rgw_env(sys.argv[1])
    user = RgwUser(env)
    aport = free_port()
    b = Broker()
    store = s3_overrides(env)
    store.update({"objectstore.s3.bucket": user.bucket, "objectstore.s3.access.key": user.access,
                  "objectstore.s3.secret.key": user.secret})
    b.overrides = tiered_overrides(store, num_partitions=1, objectstore_s3_part_size_bytes=PART,
                                   remote_log_fetch_chunk_bytes=CHUNK)
    b.overrides["admin.listeners"] = "http://127.0.0.1:%d" % aport
    work = tempfile.mkdtemp(prefix="strata-cost-")
    try:
        base = user.settled_usage(quiet_s=2.0)  # the bucket's creation
        b.start()

        # ---- 2. a topic of ~48 MB, its old part only in the bucket
        rnd = random.Random(13)
        path = os.path.join(work, "in")
        n = 0
        with open(path, "wb") as f:
            while f.tell() < 48 << 20:
                f.write(b"%07d-" % n + base64.b64encode(rnd.randbytes(rnd.randint(500, 1000))) + b"\n")
                n += 1
        c = Conn(b.port, timeout=60)
        check(c.create_topic(TOPIC, 1, configs={"remote.storage.enable": "true", "segment.bytes": str(SEG),
                                                "local.retention.bytes": str(SEG)}) == 0, "CreateTopics cost")
        c.close()
        with open(path, "rb") as f:
            subprocess.run(["kcat", "-b", b.bootstrap, "-P", "-t", TOPIC, "-p", "0", "-X", "batch.size=262144"],
                           stdin=f, check=True, timeout=300)

        def uploaded():
            _, ms = scrape(aport)
            return (m(ms, "kafka_server_brokertopicmetrics_remotecopylagsegments", topic=TOPIC) == 0 and
                    (m(ms, "kafka_server_brokertopicmetrics_remotelogmetadatacount", topic=TOPIC) or 0) >= 3 and
                    (m(ms, "kafka_log_log_logstartoffset", topic=TOPIC, partition=0) or 0) > 0)
        wait_for(uploaded, timeout=180, interval=0.5, what="the closed segments in the bucket and gone locally")
        _, ms = settled_metrics(aport)
        u1 = user.settled_usage()
        remote = m(ms, "kafka_server_brokertopicmetrics_remotelogsizebytes", topic=TOPIC)
        segs = m(ms, "kafka_server_brokertopicmetrics_remotelogmetadatacount", topic=TOPIC)
        local_start = m(ms, "kafka_log_log_logstartoffset", topic=TOPIC, partition=0)
        print("%d messages written; %d segments (%.1f MiB) in the bucket, the local log starts at %d" %
              (n, segs, remote / (1 << 20), local_start), flush=True)

        # ---- 3. uploads: Strata's count against RGW's
        s_all, s_topic = strata_classes(ms), strata_classes(ms, TOPIC)
        compare("after the uploads", s_all, rgw_classes(u1, base))
        check(s_topic["write"] == s_all["write"] - 1 and s_topic["read"] == s_all["read"] and
              s_topic["free"] == s_all["free"],
              "the topic's requests %s are not all of the store's %s but the start-up check" % (s_topic, s_all))
        # each .log went up in parts: create + parts + complete (5 writes)
        # besides .index, .timeindex, .epochs and the manifest
        check(s_topic["write"] >= 9 * segs, "%d write requests for %d segments: the multipart steps "
              "are not all counted" % (s_topic["write"], segs))

        # ---- 4. the replay from offset 0
        out = os.path.join(work, "replay")
        with open(out, "wb") as f:
            subprocess.run(["kcat", "-b", b.bootstrap, "-C", "-t", TOPIC, "-p", "0", "-o", "beginning",
                            "-e", "-q", "-f", "%o\\n"], stdout=f, check=True, timeout=300)
        with open(out, "rb") as f:
            offsets = f.read().split()
        check(len(offsets) == n and int(offsets[0]) == 0 and int(offsets[-1]) == n - 1,
              "the replay read %d records (%s..%s), want %d from 0" %
              (len(offsets), offsets[:1], offsets[-1:], n))
        body, ms2 = settled_metrics(aport)
        u2 = user.settled_usage()
        s_all2, s_topic2 = strata_classes(ms2), strata_classes(ms2, TOPIC)
        compare("in all", s_all2, rgw_classes(u2, base))
        win_strata = {k: s_topic2[k] - s_topic[k] for k in s_topic}
        win_rgw = rgw_classes(u2, u1)
        compare("the replay window", win_strata, win_rgw)
        gets_s, gets_r = win_strata["read"], win_rgw["read"]
        check(gets_s > 0, "the replay read nothing from the bucket")
        got_s = m(ms2, "strata_tiering_bucket_received_bytes_total", topic=TOPIC) - \
            m(ms, "strata_tiering_bucket_received_bytes_total", topic=TOPIC)
        got_r = u2.get("get_obj", (0, 0))[1] - u1.get("get_obj", (0, 0))[1]
        per_gib_s, per_gib_r = gets_s / (got_s / GIB), gets_r / (got_r / GIB)
        print("replay: %d records from offset 0; %.1f MiB from the bucket in %d GETs by Strata's count, "
              "%.1f MiB in %d get_obj by RGW's (%.2f%% apart): %.1f read requests per GiB replayed "
              "(RGW: %.1f)" % (len(offsets), got_s / (1 << 20), gets_s, got_r / (1 << 20), gets_r,
                               pct(gets_s, gets_r), per_gib_s, per_gib_r), flush=True)
        check(pct(got_s, got_r) <= TOLERANCE * 100, "bytes replayed: Strata %d, RGW %d" % (got_s, got_r))

        # ---- 5. the dollars at the default prices
        promtool_check(body)
        lifetime = m(ms2, "strata_tiering_read_requests_per_gib", topic=TOPIC)
        recv = m(ms2, "strata_tiering_bucket_received_bytes_total", topic=TOPIC)
        check(lifetime is not None and near(lifetime, s_topic2["read"] / (recv / GIB), 1e-6),
              "strata_tiering_read_requests_per_gib %s, not %d reads / %d bytes" % (lifetime, s_topic2["read"], recv))
        want_topic = sum(s_topic2[k] * PRICE[k] for k in PRICE)
        want_all = sum(s_all2[k] * PRICE[k] for k in PRICE)
        got_topic = m(ms2, "strata_tiering_request_cost_dollars_total", topic=TOPIC)
        got_all = m(ms2, "strata_objectstore_request_cost_dollars_total")
        check(got_topic is not None and near(got_topic, want_topic),
              "strata_tiering_request_cost_dollars_total %s, want %.12g" % (got_topic, want_topic))
        check(got_all is not None and near(got_all, want_all),
              "strata_objectstore_request_cost_dollars_total %s, want %.12g" % (got_all, want_all))
        remote2 = m(ms2, "kafka_server_brokertopicmetrics_remotelogsizebytes", topic=TOPIC)
        want_storage = remote2 / GIB * STORAGE_GIB_MONTH
        got_storage = m(ms2, "strata_tiering_storage_cost_dollars_per_month", topic=TOPIC)
        check(got_storage is not None and near(got_storage, want_storage),
              "strata_tiering_storage_cost_dollars_per_month %s, want %.12g" % (got_storage, want_storage))
        rgw_all = rgw_classes(u2, base)
        rgw_dollars = sum(rgw_all[k] * PRICE[k] for k in PRICE)
        print("cost: requests $%.6f for the topic, $%.6f in all (RGW's count at the same prices: $%.6f, "
              "%.2f%% apart); storage $%.6f a month for %.1f MiB" %
              (got_topic, got_all, rgw_dollars, pct(got_all, rgw_dollars), got_storage, remote2 / (1 << 20)),
              flush=True)

        print("/metrics of the topic:\n" + "\n".join(
            "  " + ln for ln in body.splitlines()
            if ln.startswith(("strata_tiering_requests_total", "strata_tiering_request_cost",
                              "strata_tiering_read_requests_per_gib", "strata_tiering_storage_cost"))
            and 'topic="%s"' % TOPIC in ln), flush=True)

        # /v1/status and the console, with nothing moving any more
        s = json.loads(http(aport, "/v1/status"))
        t = [x for x in s["topics"] if x["name"] == TOPIC][0]
        tc, ac = t["cost"], s["cost"]
        check(tc["requests"] == s_topic2 and ac["requests"] == s_all2,
              "/v1/status requests %s / %s, /metrics %s / %s" % (tc["requests"], ac["requests"], s_topic2, s_all2))
        check(near(tc["request_dollars"], got_topic) and near(ac["request_dollars"], got_all) and
              near(tc["storage_dollars_per_month"], got_storage) and near(tc["read_requests_per_gib"], lifetime),
              "/v1/status cost %s differs from /metrics" % tc)
        check(ac["prices"] == {"write_requests_per_1000": 0.005, "read_requests_per_1000": 0.0004,
                               "storage_gib_month": 0.023}, "prices %s" % ac["prices"])
        profile = tempfile.mkdtemp(prefix="strata-chromium-")
        try:
            dom = dump_dom(aport, profile)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        tables = Tables()
        tables.feed(dom)
        check(tables.body.get("data-loaded") == "1", "the console did not draw /v1/status")
        rows = tables.tables.get("cost", [])
        row = [r for r in rows if r.get("@data-topic") == TOPIC]
        total = [r for r in rows if r.get("@data-total") == "1"]
        check(row and total, "the console's cost table has no row for %s and in all: %s" % (TOPIC, rows))
        row, total = row[0], total[0]
        for cls in ("write", "read", "free"):
            check(row[cls] == str(s_topic2[cls]) and total[cls] == str(s_all2[cls]),
                  "console %s requests: %s / %s, want %d / %d" % (cls, row[cls], total[cls], s_topic2[cls],
                                                                 s_all2[cls]))
        check(row["request-cost"] == "$%.6f" % got_topic and row["storage-cost"] == "$%.6f" % got_storage and
              total["request-cost"] == "$%.6f" % got_all,
              "console cost cells %s / %s, want $%.6f, $%.6f / $%.6f" %
              (row, total, got_topic, got_storage, got_all))
        print("console: %s shows %s write, %s read, %s free requests, %s read requests per GiB, requests %s, "
              "storage %s a month; in all %s" % (TOPIC, row["write"], row["read"], row["free"], row["per-gib"],
                                                 row["request-cost"], row["storage-cost"], total["request-cost"]),
              flush=True)
        check(b.stop() == 0, "clean stop")
        print("integration.cost.rgw: ok")
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        b.cleanup()
        user.remove()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

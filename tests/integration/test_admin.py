"""
The admin HTTP listener (admin.listeners) of one stratad:

- /metrics after a known produce: bytesin and messagesin per topic are the
  exact bytes and records of the batches sent (kwire batches of known
  length), and equal kafka_log_log_size / logendoffset and the bytes of
  the partition's .log files on disk; bytesout after a kcat consume;
  request counts and latency histograms per API; tiering and object store
  metrics after segments went to the (file) bucket and were read back;
- `promtool check metrics` passes on the scrape (promtool is installed by
  scripts/deps.sh: missing, the test fails);
- a real Prometheus server (Debian's prometheus) scrapes stratad and its
  HTTP API answers the bytesin value the broker wrote;
- /v1/health, /v1/ready, /v1/status (leader, ISR, high watermark, local
  and remote bytes), and no endpoint shows the S3 secret it was given;
- bad input: an unknown path (404), another method (405), a huge header
  (431 or closed), malformed requests (400), and Kafka clients are served
  all along;
- the consumer groups in /v1/status: a kcat group's lag in records, in
  time (records stamped one and two hours back) and, after two commits,
  its rate and time to catch up; 0 once it has read everything;
- an admin port already in use stops a second stratad at start-up with a
  message naming admin.listeners, exit status non-zero.
"""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import (Broker, Cluster, check, fail, free_port, kcat, run, sanitizer_report,  # noqa: E402
                            spawn, wait_for)

SECRET = "Sx9-not-to-be-shown-7Qv"
ACCESS = "AKIA-ADMIN-TEST-KEY"


def http(port, path, method="GET", timeout=10):
    """(status, body text) of one request."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def raw(port, data, timeout=10):
    """Send raw bytes; the status line's code, or None when the connection
    was closed without an answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass
        buf = b""
        try:
            while b"\r\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        except OSError:
            pass
    m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
    return int(m.group(1)) if m else None


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def parse_metrics(text):
    """{(name, frozenset of (label, value))}: value."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        check(m is not None, "a line of /metrics is not a sample: %r" % line)
        labels = frozenset(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(ms, name, **labels):
    key = (name, frozenset((k, str(v)) for k, v in labels.items()))
    check(key in ms, "no sample %s%s in /metrics" % (name, labels))
    return ms[key]


def scrape(port):
    st, body = http(port, "/metrics")
    check(st == 200, "/metrics answered %d: %s" % (st, body[:300]))
    return body, parse_metrics(body)


def promtool_check(body):
    promtool = shutil.which("promtool")
    check(promtool is not None, "promtool is missing (scripts/deps.sh test installs prometheus)")
    p = subprocess.run([promtool, "check", "metrics"], input=body.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    check(p.returncode == 0, "promtool check metrics failed (%d):\n%s" % (p.returncode,
                                                                         p.stdout.decode()[-3000:]))


def log_files_bytes(broker, topic):
    total = 0
    for d in glob.glob(os.path.join(broker.logdir, topic + "-*")):
        for f in glob.glob(os.path.join(d, "*.log")):
            total += os.path.getsize(f)
    return total


def group_view(aport, group):
    s = json.loads(http(aport, "/v1/status")[1])
    gs = [g for g in s.get("groups", []) if g["group_id"] == group]
    return gs[0] if gs else None


def groups_lag(b, aport, c):
    """A group's lag in /v1/status: records, time (the committed record's
    timestamp, set an hour or two back by the producer) and, after two
    commits seen, its rate and the time to catch up at it."""
    check(c.create_topic("g", 1) == 0, "CreateTopics g failed")
    now = int(time.time() * 1000)
    wait_for(lambda: c.produce("g", 0, kwire.record_batch([b"o%d" % i for i in range(10)], ts=now - 7200000))[1]
             == 0, 30, what="g-0 to take a produce")
    for i in range(1, 10):
        check(c.produce("g", 0, kwire.record_batch([b"o"] * 10, ts=now - 7200000))[1] == 0, "produce g")
    for i in range(10):
        check(c.produce("g", 0, kwire.record_batch([b"n"] * 10, ts=now - 3600000))[1] == 0, "produce g")

    def consume(n):
        _, out, _ = kcat(b, "-G", "lag-grp", "g", "-c", str(n), "-q", "-X", "auto.offset.reset=earliest",
                         "-X", "enable.auto.commit=true", timeout=60)
        check(out.count(b"\n") == n, "kcat -G read %d records, not %d" % (out.count(b"\n"), n))

    consume(50)
    g = group_view(aport, "lag-grp")
    check(g is not None, "/v1/status shows no group lag-grp")
    (p,) = g["partitions"]
    first = p
    print("group lag-grp after 50 records: %s" % json.dumps(p), flush=True)
    check(p["topic"] == "g" and p["partition"] == 0 and p["committed_offset"] == 50 and
          p["high_watermark"] == 200 and p["lag"] == 150 and g["lag"] == 150, "lag-grp: %s" % g)
    # the record at offset 50 was stamped two hours back
    check(7200000 <= p["lag_ms"] <= 7200000 + (time.time() * 1000 - now) + 5000,
          "lag_ms %s (two hours)" % p["lag_ms"])
    check(p["rate_per_sec"] is None and p["eta_ms"] is None, "a rate after one commit: %s" % p)
    time.sleep(1)
    consume(50)
    g = group_view(aport, "lag-grp")
    (p,) = g["partitions"]
    t2 = time.time() * 1000
    print("group lag-grp after 100 records: %s" % json.dumps(p), flush=True)
    second = p
    check(p["committed_offset"] == 100 and p["lag"] == 100, "lag-grp: %s" % g)
    check(3600000 <= p["lag_ms"] <= 3600000 + (t2 - now) + 5000, "lag_ms %s (an hour)" % p["lag_ms"])
    rate = p["rate_per_sec"]
    check(rate is not None and rate > 0, "no rate after two commits: %s" % p)
    # 50 records between the two commits, as their timestamps say
    dt = (p["commit_timestamp_ms"] - first["commit_timestamp_ms"]) / 1000.0
    check(dt > 0 and abs(rate - 50 / dt) < 1e-6, "rate %s for 50 records in %.3f s between the commits"
          % (rate, dt))
    check(abs(p["eta_ms"] - 100 / rate * 1000) <= 1, "eta %s for 100 records at %s/s" % (p["eta_ms"], rate))
    check(g["state"] == "Empty" and g["protocol_type"] == "consumer" and g["eta_ms"] == p["eta_ms"],
          "lag-grp: %s" % {k: v for k, v in g.items() if k != "partitions"})
    consume(100)
    p = group_view(aport, "lag-grp")["partitions"][0]
    check(p["lag"] == 0 and p["lag_ms"] == 0 and p["eta_ms"] == 0, "caught up: %s" % p)
    print("group lag in /v1/status: %d records and %.1f s behind, then %d records and %.1f s, at %.1f "
          "records/s, ETA %.1f s; caught up: 0" % (first["lag"], first["lag_ms"] / 1000.0, 100,
                                                   second["lag_ms"] / 1000.0, rate, second["eta_ms"] / 1000.0),
          flush=True)


def main():
    aport = free_port()
    b = Broker({
        "admin.listeners": "http://127.0.0.1:%d" % aport,
        "num.partitions": "2",
        # tiering on, to the file backend: the s3 keys are set only to see
        # that no endpoint ever shows them
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "200",
        "objectstore.s3.access.key": ACCESS,
        "objectstore.s3.secret.key": SECRET,
    })
    prom = None
    prom_dir = tempfile.mkdtemp(prefix="strata-prom-")
    try:
        b.start()
        check(b.log_text().count("admin listener serving at http://127.0.0.1:%d" % aport) == 1,
              "the log does not say where the admin listener serves")

        # ---- health and readiness
        st, body = http(aport, "/v1/health")
        check(st == 200 and json.loads(body)["status"] == "ok", "health: %d %s" % (st, body))
        wait_for(lambda: http(aport, "/v1/ready")[0] == 200, 30, what="/v1/ready to answer 200")
        check(json.loads(http(aport, "/v1/ready")[1]) == {"ready": True}, "ready body")

        # ---- a known produce: kwire batches of known length, two partitions
        c = kwire.Conn(b.port)
        check(c.create_topic("m", 2) == 0, "CreateTopics m failed")
        wait_for(lambda: c.produce("m", 0, kwire.record_batch([b"x"]))[1] == 0, 30,
                 what="m-0 to take a produce")
        _, ms0 = scrape(aport)
        base_in = metric(ms0, "kafka_server_brokertopicmetrics_bytesin_total", topic="m")
        base_msgs = metric(ms0, "kafka_server_brokertopicmetrics_messagesin_total", topic="m")
        base_produce = metric(ms0, "kafka_network_requestmetrics_requests_total", request="Produce")
        sent_bytes, sent_records, produces = 0, 0, 0
        for i in range(40):
            values = [("value-%d-%d" % (i, k)).encode() * (1 + i % 7) for k in range(1 + i % 5)]
            batch = kwire.record_batch(values)
            _idx, err, _base = c.produce("m", i % 2, batch)
            check(err == 0, "produce %d answered error %d" % (i, err))
            sent_bytes += len(batch)
            sent_records += len(values)
            produces += 1
        body, ms = scrape(aport)
        bytes_in = metric(ms, "kafka_server_brokertopicmetrics_bytesin_total", topic="m") - base_in
        msgs_in = metric(ms, "kafka_server_brokertopicmetrics_messagesin_total", topic="m") - base_msgs
        check(bytes_in == sent_bytes, "bytesin grew by %d, %d bytes of batches were written" % (bytes_in, sent_bytes))
        check(msgs_in == sent_records, "messagesin grew by %d, %d records were written" % (msgs_in, sent_records))
        # a request is counted when it ends, just after its answer was
        # written: the client may scrape before the last one is counted
        def nprod():
            return metric(scrape(aport)[1], "kafka_network_requestmetrics_requests_total",
                          request="Produce") - base_produce
        wait_for(lambda: nprod() >= produces, 10, 0.05, what="40 produces counted")
        check(nprod() == produces, "requests_total{Produce} grew by %d, %d were sent" % (nprod(), produces))
        body, ms = scrape(aport)
        check(metric(ms, "kafka_network_requestmetrics_totaltimems_count", request="Produce") ==
              metric(ms, "kafka_network_requestmetrics_requests_total", request="Produce"),
              "the Produce histogram's count differs from requests_total")
        check(metric(ms, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") ==
              metric(ms, "kafka_network_requestmetrics_totaltimems_count", request="Produce"),
              "+Inf bucket != count")
        check(metric(ms, "kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0,
              "Produce latency sum is 0")
        # the log size is what was written: the counters, the gauge, the files
        size = sum(metric(ms, "kafka_log_log_size", topic="m", partition=p) for p in (0, 1))
        total_in = metric(ms, "kafka_server_brokertopicmetrics_bytesin_total", topic="m")
        on_disk = log_files_bytes(b, "m")
        check(size == total_in == on_disk,
              "log size %d, bytesin %d, .log files %d bytes: not the same" % (size, total_in, on_disk))
        leo = sum(metric(ms, "kafka_log_log_logendoffset", topic="m", partition=p) for p in (0, 1))
        check(leo == metric(ms, "kafka_server_brokertopicmetrics_messagesin_total", topic="m"),
              "log end offsets %d != messagesin" % leo)
        check(metric(ms, "kafka_server_replicamanager_partitioncount") >= 2, "partitioncount")
        check(metric(ms, "kafka_server_replicamanager_underreplicatedpartitions") == 0, "URP on one node")
        check(metric(ms, "kafka_controller_kafkacontroller_activecontrollercount") == 1,
              "a single node is the active controller")
        print("produce: %d batches, %d records, %d bytes: bytesin and messagesin grew by exactly "
              "that; bytesin, log size and .log files all %d bytes (with the first batch)"
              % (produces, sent_records, sent_bytes, on_disk), flush=True)

        # ---- bytesout after a consume of everything
        kcat(b, "-C", "-t", "m", "-o", "beginning", "-e", "-q", timeout=60)
        _, ms = scrape(aport)
        out = metric(ms, "kafka_server_brokertopicmetrics_bytesout_total", topic="m")
        check(out >= on_disk, "bytesout %d after consuming %d bytes" % (out, on_disk))
        print("consume: bytesout %d (log %d)" % (out, on_disk), flush=True)

        # ---- tiering: segments go to the bucket, then are read back
        check(c.create_topic("t", 1, configs={"remote.storage.enable": "true", "segment.bytes": "2048",
                                               "local.retention.ms": "1"}) == 0,
              "CreateTopics t failed")
        wait_for(lambda: c.produce("t", 0, kwire.record_batch([b"y"]))[1] == 0, 30, what="t-0")
        for i in range(60):
            check(c.produce("t", 0, kwire.record_batch([b"z" * 200] * 3))[1] == 0, "produce t")

        def tiered():
            _, m = scrape(aport)
            return (m.get(("kafka_server_brokertopicmetrics_remotelogsizebytes",
                           frozenset({("topic", "t")})), 0) > 0 and
                    metric(m, "kafka_log_log_logstartoffset", topic="t", partition=0) > 0)
        wait_for(tiered, 60, 0.3, what="segments of t in the bucket and gone locally")
        got = b""
        deadline = time.time() + 30
        while not got and time.time() < deadline:
            err, _hw, _ls, recs = c.fetch("t", 0, 0, max_wait=500)
            check(err == 0, "fetch t from 0: error %d" % err)
            got = recs or b""
        check(got, "no records of t from offset 0 (in the bucket)")
        # uploads run on: once nothing is left to copy, what was copied is
        # what the bucket holds (nothing was deleted from it) and what the
        # status shows
        def settled():
            _, m = scrape(aport)
            st_ = json.loads(http(aport, "/v1/status")[1])
            _, m2 = scrape(aport)
            if m != m2:
                return None
            lagn = metric(m, "kafka_server_brokertopicmetrics_remotecopylagsegments", topic="t")
            cp = metric(m, "kafka_server_brokertopicmetrics_remotecopybytes_total")
            rs = metric(m, "kafka_server_brokertopicmetrics_remotelogsizebytes", topic="t")
            t_ = [t for t in st_["topics"] if t["name"] == "t"][0]
            return lagn == 0 and cp == rs and t_["remote_bytes"] == rs
        wait_for(settled, 30, 0.3, what="uploads of t to settle: no copy lag, copied bytes = remote "
                                       "log size = status remote bytes")
        body, ms = scrape(aport)
        copied = metric(ms, "kafka_server_brokertopicmetrics_remotecopybytes_total")
        remote_size = metric(ms, "kafka_server_brokertopicmetrics_remotelogsizebytes", topic="t")
        check(copied == remote_size, "remotecopybytes %d != remotelogsizebytes %d (nothing deleted)"
              % (copied, remote_size))
        check(metric(ms, "kafka_server_brokertopicmetrics_remotefetchbytes_total") > 0, "remotefetchbytes 0")
        check(metric(ms, "strata_tiering_served_bytes_total", topic="t") >= len(got), "served bytes")
        check(metric(ms, "strata_tiering_cache_downloaded_bytes_total") > 0, "downloaded bytes 0")
        check(metric(ms, "strata_objectstore_request_duration_seconds_count", operation="put") > 0,
              "no object store put counted")
        check(metric(ms, "strata_objectstore_request_duration_seconds_count", operation="get") > 0,
              "no object store get counted")
        check(metric(ms, "kafka_server_brokertopicmetrics_remotecopyerrors_total") == 0, "copy errors")
        lag = metric(ms, "kafka_server_brokertopicmetrics_remotecopylagsegments", topic="t")
        check(lag >= 0, "lag")
        # the cost estimate: every request is a topic's but the start-up
        # check (a list, a write), and costs what the default prices say
        classes = ("write", "read", "free")
        topics = {dict(k[1])["topic"] for k in ms if k[0] == "strata_tiering_requests_total"}
        for cl in classes:
            by_topic = sum(metric(ms, "strata_tiering_requests_total", topic=t_, **{"class": cl}) for t_ in topics)
            check(metric(ms, "strata_objectstore_requests_total", **{"class": cl}) == by_topic + (cl == "write"),
                  "%s requests: %d in all, %d by topic" %
                  (cl, metric(ms, "strata_objectstore_requests_total", **{"class": cl}), by_topic))
        t_req = {cl: metric(ms, "strata_tiering_requests_total", topic="t", **{"class": cl}) for cl in classes}
        check(t_req["write"] > 0 and t_req["read"] > 0, "t's requests %s" % t_req)
        dollars = metric(ms, "strata_tiering_request_cost_dollars_total", topic="t")
        should = t_req["write"] * 0.005 / 1000 + t_req["read"] * 0.0004 / 1000
        check(abs(dollars - should) <= 1e-9 * should, "t's request cost %r, want %r" % (dollars, should))
        dollars = metric(ms, "strata_tiering_storage_cost_dollars_per_month", topic="t")
        should = remote_size / 2 ** 30 * 0.023
        check(abs(dollars - should) <= 1e-9 * should, "t's storage cost %r, want %r" % (dollars, should))
        print("tiering: %d bytes copied = remote log size; %d bytes read back from offset 0"
              % (copied, len(got)), flush=True)

        # ---- promtool on a full scrape
        promtool_check(body)
        print("promtool check metrics: ok (%d samples)" % len(ms), flush=True)

        # ---- status
        st, sbody = http(aport, "/v1/status")
        check(st == 200, "status %d" % st)
        s = json.loads(sbody)
        check([x["id"] for x in s["brokers"]] == [1] and s["controller_id"] == 1, "status brokers")
        tm = [t for t in s["topics"] if t["name"] == "m"][0]
        check(len(tm["partitions"]) == 2, "status: m has 2 partitions")
        for p in tm["partitions"]:
            check(p["leader"] == 1 and p["isr"] == [1] and p["replicas"] == [1], "status m leader/isr")
            check(p["high_watermark"] == metric(ms, "kafka_cluster_partition_highwatermark",
                                                topic="m", partition=p["partition"]), "status hw")
        check(tm["local_bytes"] == on_disk, "status local bytes %d != %d" % (tm["local_bytes"], on_disk))
        tt = [t for t in s["topics"] if t["name"] == "t"][0]
        check(tt["remote_bytes"] == remote_size, "status remote bytes of t")
        check(tt["partitions"][0]["remote"]["size_bytes"] == remote_size, "status remote size")

        groups_lag(b, aport, c)

        # ---- no endpoint shows the credentials
        for path in ("/metrics", "/v1/status", "/v1/ready", "/v1/health", "/nope"):
            _st, text = http(aport, path)
            check(SECRET not in text and ACCESS not in text, "%s shows an S3 credential" % path)
        check(SECRET not in b.log_text(), "the broker's log shows the S3 secret")

        # ---- a real Prometheus scrapes it
        prometheus = shutil.which("prometheus")
        check(prometheus is not None, "prometheus is missing (scripts/deps.sh test installs it)")
        pport = free_port()
        cfg = os.path.join(prom_dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: strata\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % aport)
        plog = open(os.path.join(prom_dir, "prometheus.log"), "w")
        prom = spawn([prometheus, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(prom_dir, "data"),
                      "--web.listen-address=127.0.0.1:%d" % pport], stdout=plog, stderr=subprocess.STDOUT)
        plog.close()
        want = metric(ms, "kafka_server_brokertopicmetrics_bytesin_total", topic="m")

        def prom_value():
            if prom.poll() is not None:
                fail("prometheus exited %s:\n%s" % (prom.returncode,
                                                    open(os.path.join(prom_dir, "prometheus.log")).read()[-2000:]))
            q = urllib.request.quote('kafka_server_brokertopicmetrics_bytesin_total{topic="m",job="strata"}')
            try:
                st, text = http(pport, "/api/v1/query?query=" + q)
            except OSError:
                return None
            if st != 200:
                return None
            r = json.loads(text)["data"]["result"]
            return float(r[0]["value"][1]) if r else None
        wait_for(lambda: prom_value() is not None, 60, 0.5, what="Prometheus to scrape stratad")
        check(prom_value() == want, "Prometheus has bytesin %s, the broker wrote %d" % (prom_value(), want))
        st, text = http(pport, "/api/v1/query?query=up%7Bjob%3D%22strata%22%7D")
        check(json.loads(text)["data"]["result"][0]["value"][1] == "1", "up{job=strata} != 1")
        st, text = http(pport, "/api/v1/targets")
        tg = json.loads(text)["data"]["activeTargets"][0]
        check(tg["health"] == "up" and not tg["lastError"], "target %s" % tg)
        print("prometheus: scraped, bytesin{topic=m} = %d as written" % want, flush=True)
        prom.terminate()
        prom.wait(30)
        prom = None

        # ---- bad input; Kafka clients served throughout
        check(http(aport, "/nope")[0] == 404, "unknown path is not 404")
        check(http(aport, "/metrics/x")[0] == 404, "/metrics/x is not 404")
        check(http(aport, "/metrics", method="POST")[0] == 405, "POST is not 405")
        code = raw(aport, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n")
        check(code in (431, None), "a 200 kB header answered %s" % code)
        code = raw(aport, b"GET /metrics HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"b" * 100)
                                                                for i in range(2000)) + b"\r\n")
        check(code in (431, 400, None), "2000 headers answered %s" % code)
        check(raw(aport, b"GET /metrics HTTP/1.1\r\n\r\n") == 400, "HTTP/1.1 without Host is not 400")
        check(raw(aport, b"GET /metrics HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n") == 400,
              "a header without a colon is not 400")
        code = raw(aport, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(300))
        check(code in (400, None), "TLS bytes answered %s" % code)
        code = raw(aport, b"GARBAGE\r\n\r\n")
        check(code in (400, None), "garbage answered %s" % code)
        for _ in range(3):  # a connection opened and left idle
            s = socket.create_connection(("127.0.0.1", aport))
            s.sendall(b"GET /met")
        check(c.produce("m", 0, kwire.record_batch([b"after"]))[1] == 0, "produce after bad HTTP input")
        _, out_, _ = kcat(b, "-L")
        check(b"1 brokers" in out_, "kcat -L after bad HTTP input:\n%s" % out_.decode())
        check(http(aport, "/v1/health")[0] == 200, "health after bad input")
        print("bad input: 404, 405, 431, 400; Kafka and the admin listener still serve", flush=True)

        # ---- the admin port in use: a second broker refuses to start
        b2 = Broker({"admin.listeners": "http://127.0.0.1:%d" % aport})
        try:
            b2.start(wait=False)
            rc = b2.proc.wait(30)
            text = b2.log_text()
            check(rc != 0, "a second stratad on the same admin port exited 0")
            check("admin.listeners" in text and "Address already in use" in text,
                  "its error does not name admin.listeners and the cause:\n%s" % text[-1500:])
            line = [x for x in text.splitlines() if "admin.listeners" in x][0]
            print("port in use: exit %d, %r" % (rc, line), flush=True)
        finally:
            b2.cleanup()
        # a malformed setting names the key
        rc, _o, err = run([b.command()[0], "--config", b.command()[2], "--override",
                           "admin.listeners=127.0.0.1:9644"], check_rc=False, timeout=30)
        check(rc != 0 and "admin.listeners" in err, "admin.listeners=127.0.0.1:9644 accepted: %s" % err)

        rc = b.stop()
        check(rc == 0, "stratad exited %s" % rc)
        report = sanitizer_report(b.log_text())  # in a sanitizer build
        check(report is None, "a sanitizer's report in stratad's log: %s" % report)
        print("PASS")
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        if prom and prom.poll() is None:
            prom.kill()
            prom.wait()
        shutil.rmtree(prom_dir, ignore_errors=True)
        b.cleanup()


if __name__ == "__main__":
    main()

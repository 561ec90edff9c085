"""
integration.idempotent_clients - the idempotent producers of kafkajs
(js/idempotent_producer.js: idempotent: true, maxInFlightRequests 1) and
Sarama (sarama_client idempotent: Producer.Idempotent, Net.MaxOpenRequests
1, RequiredAcks WaitForAll) through the faults of test_idempotent.py on a
smaller scale: one stratad reached only through tcpproxy.py (its
advertised listener), STRATA_IDEM_CLIENT_CUTS cuts (default 6; every other
one after holding the answers to the producer, so batches the broker took
are sent again) and one SIGKILL + restart (while the answers are held)
while the client writes numbered
messages to 3 partitions.  Then per partition: every acknowledged message
at its offset, each message once, in order, no gap, no failed delivery.

    test_idempotent_clients.py [kafkajs] [sarama]   (default: both)
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from idem_check import Faults, finish, tmpfile, wait_progress  # noqa: E402
from strata_harness import BIN, HERE, Broker, check, fail, free_port, spawn  # noqa: E402
from tcpproxy import TcpProxy  # noqa: E402

PARTS = 3
CUTS = int(os.environ.get("STRATA_IDEM_CLIENT_CUTS", "6"))
which = sys.argv[1:] or ["kafkajs", "sarama"]
GOPATH = "/usr/share/gocode"


def build_sarama():
    """As test_sarama.py builds it: offline, GOPATH mode, Debian's Sarama."""
    go = shutil.which("go") or "/usr/lib/go/bin/go"
    if not os.path.exists(go) or not os.path.isdir(os.path.join(GOPATH, "src/github.com/Shopify/sarama")):
        fail("go and Debian's golang-github-shopify-sarama-dev are required (scripts/deps.sh test)")
    out = os.path.join(BIN, "sarama_client")
    env = dict(os.environ, GOPATH=GOPATH, GO111MODULE="off", GOFLAGS="",
               GOCACHE=os.path.join(os.path.dirname(BIN), "go-cache"), GOPROXY="off",
               CGO_CFLAGS="-Wno-deprecated-declarations")
    r = subprocess.run([go, "build", "-o", out, "."], cwd=os.path.join(HERE, "sarama"), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    if r.returncode != 0:
        print(r.stdout.decode(errors="replace"))
        fail("building the Sarama client failed")
    return out


def command(client, bootstrap, topic, tag, ackfile):
    if client == "kafkajs":
        node = shutil.which("node")
        js = os.path.join(HERE, "js")
        if not node or not os.path.isdir(os.path.join(js, "node_modules", "kafkajs")):
            fail("node and tests/integration/js/node_modules/kafkajs are required (scripts/test.sh installs them)")
        return [node, os.path.join(js, "idempotent_producer.js"), bootstrap, topic, str(PARTS), tag, ackfile]
    return [build_sarama(), "idempotent", bootstrap, topic, str(PARTS), tag, ackfile, "400"]


def run(client):
    port = free_port()
    proxy = TcpProxy(("127.0.0.1", port), name="%s link" % client).start()
    b = Broker({"advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % proxy.port,
                "auto.create.topics.enable": "false"}, port=port)
    try:
        b.start()
        topic, tag = "idem-%s" % client, client[0].upper()
        c = kwire.Conn(b.port)
        check(c.create_topic(topic, PARTS) == 0, "create topic %s" % topic)
        c.close()
        ackfile = tmpfile("acks")
        cmd = command(client, "127.0.0.1:%d" % proxy.port, topic, tag, ackfile)
        proc = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        n = wait_progress(ackfile, 0, 60, proc, 60, "(%s) before the first fault" % client)
        f = Faults(proxy)
        for i in range(CUTS):
            if i % 2 == 0:
                f.lose_replies()
            else:
                f.cut()
            n = wait_progress(ackfile, n, 30, proc, 40, "(%s) after cut %d" % (client, f.cuts))
            if i == CUTS // 2:
                f.crash(b)
                n = wait_progress(ackfile, n, 30, proc, 40, "(%s) after the kill" % client)
        wait_progress(ackfile, n, 60, proc, 40, "(%s) after the last fault" % client)
        finish(proc, ackfile, b.bootstrap, topic, tag, "%s idempotent producer" % client, f.cuts, 1, PARTS)
        check(b.stop() == 0, "stratad did not stop cleanly")
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        proxy.close()
        b.cleanup()


for w in which:
    if w not in ("kafkajs", "sarama"):
        fail("unknown client %r (kafkajs, sarama)" % w)
for w in which:
    run(w)
print("PASS", flush=True)

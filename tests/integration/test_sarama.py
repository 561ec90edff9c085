"""
Sarama (Debian's golang-github-shopify-sarama-dev, 1.22) against a real
stratad.  The Go program tests/integration/sarama/ is built here, offline,
in GOPATH mode from Debian's Go packages; it runs every stage itself (admin
create/describe/list, produce with none/gzip/snappy/lz4, consume, offsets
for times, a two-member group that commits, leaves and is resumed by two
new members) and prints STEP lines, then "ok".

It runs with config.Version 0.11.0.0 (the first that sends record batches
v2: older ones send message sets v0/v1, which Strata refuses by design)
and with 2.2.0 (the newest Sarama 1.22 knows).  Afterwards the API versions
Sarama sent (the broker's net debug log) are printed, and none of them may
have been refused.

    test_sarama.py [KAFKA_VERSION ...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from strata_harness import BIN, HERE, Broker, check, fail

VERSIONS = sys.argv[1:] or ["0.11.0.0", "2.2.0"]
GOPATH = "/usr/share/gocode"


def build():
    go = shutil.which("go") or "/usr/lib/go/bin/go"
    if not os.path.exists(go):
        fail("go is missing (Debian's golang-go; scripts/deps.sh test installs it)")
    if not os.path.isdir(os.path.join(GOPATH, "src/github.com/Shopify/sarama")):
        fail("Sarama is missing (Debian's golang-github-shopify-sarama-dev)")
    out = os.path.join(BIN, "sarama_client")
    cache = os.path.join(os.path.dirname(BIN), "go-cache")
    env = dict(os.environ, GOPATH=GOPATH, GO111MODULE="off", GOFLAGS="", GOCACHE=cache,
               GOPROXY="off", CGO_CFLAGS="-Wno-deprecated-declarations")
    r = subprocess.run([go, "build", "-o", out, "."], cwd=os.path.join(HERE, "sarama"), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    if r.returncode != 0:
        print(r.stdout.decode(errors="replace"))
        fail("building the Sarama client failed")
    return out


prog = build()
for version in VERSIONS:
    root = tempfile.mkdtemp(prefix="strata-sarama-")
    b = Broker({"logger.debug": "net", "group.initial.rebalance.delay.ms": "300"}, root=root).start()
    try:
        print("== Sarama with config.Version %s" % version, flush=True)
        try:
            r = subprocess.run([prog, b.bootstrap, version], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=150)
        except subprocess.TimeoutExpired as e:
            # what the client got to and what the broker was doing (the
            # broker's directory goes with the cleanup below)
            print((e.stdout or b"").decode(errors="replace")[-6000:])
            print(b.log_tail(80))
            fail("the Sarama client did not end within 150 s with config.Version %s" % version)
        out = r.stdout.decode(errors="replace")
        print("\n".join(l for l in out.splitlines() if l.startswith(("STEP", "FAIL", "ok"))), flush=True)
        log = b.log_text()
        used = sorted(set(re.findall(r"net: (\w+) v(\d+) correlation", log)),
                      key=lambda x: (x[0], int(x[1])))
        print("Sarama %s sent: %s" % (version, ", ".join("%s v%s" % u for u in used)), flush=True)
        if r.returncode != 0 or not out.rstrip().endswith("ok"):
            print("\n".join(l for l in out.splitlines()[-40:] if not l.startswith(("STEP", "FAIL"))))
            print(b.log_tail(40))
            fail("the Sarama client failed (exit %d) with config.Version %s" % (r.returncode, version))
        refused = re.findall(r"closing connection from [^:]+:\d+: (.*)", log)
        check(not refused, "the broker closed connections: %s" % refused[:5])
    finally:
        rc = b.stop()
        if rc != 0:
            print(b.log_tail(60))
            fail("stratad did not stop cleanly")
        b.cleanup()
print("ok", flush=True)

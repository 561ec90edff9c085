"""
deploy.image (label `image`, slow: about 3 minutes from nothing, 1 with the
cache): the container image built with Debian's docker from a debootstrap
base (deploy/image/build.sh, which also checks one container: kcat -L,
healthy, not root, a clean docker stop), then the compose file's three
Strata services run by docker-compose from that image.

MinIO's images cannot be pulled here, so the services run without minio
and minio-init and without tiering, and on the host's network (service
names become 127.0.0.1, each node's ports free ones), everything else as
the compose file gives it: the image, the STRATA_* settings, the volumes,
the healthchecks.  They must all become healthy, and kcat -L from this
machine must see three brokers that serve a topic with three replicas.

Skipped (exit 77) unless STRATA_TEST_IMAGE=1: it needs root, Debian's
mirror for debootstrap and apt, and a few GB under STRATA_IMAGE_CACHE.
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

if os.environ.get("STRATA_TEST_IMAGE") != "1":
    print("deploy.image: skipped: set STRATA_TEST_IMAGE=1 to build the image (needs root and Debian's mirror)")
    sys.exit(77)

import yaml  # noqa: E402  (Debian's python3-yaml, with docker-compose)

from compose_loopback import Loopback, resolved  # noqa: E402
from deploy_util import ROOT, check, fail, kcat_metadata, wait_for  # noqa: E402

tag = "strata:test-%d" % os.getpid()
subprocess.run([os.path.join(ROOT, "scripts", "deps.sh"), "image"], check=True)

p = subprocess.run([os.path.join(ROOT, "deploy", "image", "build.sh"), "--tag", tag, "--keep-daemon"],
                   capture_output=True, text=True, timeout=3000)
print(p.stdout + p.stderr, end="")
check(p.returncode == 0, "build.sh exited %d" % p.returncode)
env = dict(os.environ)
m = re.search(r"daemon: DOCKER_HOST=(\S+) \((.*)\)", p.stdout)
started_daemon = bool(m) and m.group(2).startswith("started here")
if m:
    env["DOCKER_HOST"] = m.group(1)
docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
project = "strata-image-test-%d" % os.getpid()
tmp = tempfile.mkdtemp(prefix="strata-image-test-")
atexit.register(shutil.rmtree, tmp, True)
compose_file = os.path.join(tmp, "docker-compose.yml")


def compose(*args, timeout=300):
    return subprocess.run(["docker-compose", "-p", project, "-f", compose_file] + list(args),
                          env=env,
                          capture_output=True, text=True, timeout=timeout)


def cleanup():
    if os.path.exists(compose_file):
        compose("down", "-v", "--remove-orphans")
    subprocess.run([docker, "image", "rm", "-f", tag], env=env, capture_output=True)
    if started_daemon:
        try:
            pid = int(re.search(r"kept: pid (\d+)", m.group(2)).group(1))
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.2)
        except (OSError, ValueError):
            pass


try:
    cfg = resolved(tmp)
    lb = Loopback(cfg, tmp)  # its addresses only: the nodes run in containers
    nodes = lb.nodes
    out = {"version": "3.9", "services": {}, "volumes": {}}
    for n in nodes:
        s = cfg["services"][n]
        e = lb.moved(n)
        e["STRATA_REMOTE_LOG_STORAGE_SYSTEM_ENABLE"] = "false"
        out["services"][n] = {"image": tag, "network_mode": "host", "environment": e,
                              "volumes": s["volumes"], "healthcheck": s["healthcheck"],
                              "stop_grace_period": s.get("stop_grace_period", "60s")}
        for v in s["volumes"]:
            out["volumes"][v.split(":")[0]] = {}
    with open(compose_file, "w") as f:
        yaml.safe_dump(out, f)
    r = compose("up", "-d")
    check(r.returncode == 0, "docker-compose up: %s%s" % (r.stdout, r.stderr))
    print("ok: docker-compose up -d: %s" % ", ".join(nodes))

    def healthy():
        states = {}
        for n in nodes:
            cid = compose("ps", "-q", n).stdout.strip()
            st = json.loads(subprocess.run([docker, "inspect", cid], env=env, capture_output=True,
                                           text=True).stdout)[0]["State"]
            if not st["Running"]:
                fail("%s stopped:\n%s" % (n, compose("logs", n).stdout[-3000:]))
            states[n] = st.get("Health", {}).get("Status")
        return states if all(v == "healthy" for v in states.values()) else None

    states = wait_for(healthy, 180, "the three services to be healthy")
    print("ok: health: %s" % states)
    boot = lb.bootstrap
    rc, text = kcat_metadata(boot)
    check(rc == 0 and " 3 brokers:" in text, "kcat -L:\n" + text)
    print("ok: kcat -L: %s" % ", ".join(l.strip() for l in text.splitlines() if l.strip().startswith("broker ")))
    payload = "".join("r%d\n" % i for i in range(100))
    r = subprocess.run(["kcat", "-b", boot, "-P", "-t", "image-compose", "-X", "acks=all"],
                       input=payload, text=True, capture_output=True, timeout=60)
    check(r.returncode == 0, "produce: " + r.stderr)
    r = subprocess.run(["kcat", "-b", boot, "-C", "-t", "image-compose", "-e", "-q"],
                       capture_output=True, text=True, timeout=60)
    check(sorted(r.stdout.split()) == sorted(payload.split()), "read back %d of 100" % len(r.stdout.split()))
    rc, text = kcat_metadata(boot)
    parts = [l for l in text.splitlines() if "partition" in l and "isrs: " in l]
    check(len(parts) == 3 and all(len(l.split("isrs: ")[1].split(",")) == 3 for l in parts),
          "image-compose:\n" + text)
    print("ok: 100 records with acks=all read back; 3 partitions, 3 in sync each")
    r = compose("stop", "-t", "60", timeout=200)
    check(r.returncode == 0, "docker-compose stop: " + r.stderr)
    logs = compose("logs").stdout
    check(logs.count("stopped cleanly") == 3, "not every node stopped cleanly:\n" + logs[-3000:])
    print("ok: docker-compose stop: the 3 nodes stopped cleanly")
finally:
    cleanup()
print("deploy.image: all checks passed")

"""
deploy.compose: deploy/compose/docker-compose.yml.

1. `docker-compose config -q` (Debian's docker-compose) accepts it, and
   refuses a copy with a misspelt key (so the check can fail);
2. the resolved file holds together: three nodes with distinct node ids,
   one cluster id, a voter list naming each node's own controller listener,
   advertised addresses on the ports they listen on and publish, a volume
   on /var/lib/strata, healthchecks, the nodes waiting for the one-shot
   service that makes the bucket they are given, MinIO's credentials as
   theirs; every STRATA_* variable is a stratad setting (the entry point's
   print-config);
3. the three nodes' environments as compose gives them, run through the
   entry point with this build's stratad on loopback (no docker: service
   names become 127.0.0.1, each node's ports free ones, and the bucket the
   `file` backend, MinIO not being in Debian): they form one quorum, kcat -L
   sees three brokers, a topic gets the compose file's three replicas, 200
   records written with acks=all are read back, and all stop cleanly.

Runs under Debian's python3 (PyYAML comes with docker-compose).  deploy.compose_s3
does 3. with the bucket on a real S3 server.
"""
import atexit
import os
import re
import shutil
import subprocess
import tempfile

from compose_loopback import Loopback, listeners, resolved, strata_nodes
from deploy_util import COMPOSE, check, entrypoint, kcat_metadata, wait_for

tmp = tempfile.mkdtemp(prefix="strata-compose-")
atexit.register(shutil.rmtree, tmp, True)
# compose reads these from the shell: start from none of them
clean = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tmp}


def compose(args, path=COMPOSE):
    return subprocess.run(["docker-compose", "-f", path] + args, env=clean, cwd=tmp,
                          capture_output=True, text=True, timeout=120)


# 1. docker-compose config -q
p = compose(["config", "-q"])
check(p.returncode == 0 and not p.stdout.strip(),
      "docker-compose config -q: exit %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
print("ok: docker-compose config -q accepts %s" % os.path.relpath(COMPOSE))
broken = os.path.join(os.path.dirname(COMPOSE), ".broken-compose-test.yml")
try:
    with open(COMPOSE) as f, open(broken, "w") as g:
        g.write(f.read().replace("    healthcheck:\n      test: [\"CMD\", \"mc\"",
                                 "    healthchek:\n      test: [\"CMD\", \"mc\"", 1))
    p = compose(["config", "-q"], broken)
finally:
    os.unlink(broken)
check(p.returncode != 0 and "healthchek" in p.stderr,
      "a misspelt key was accepted: exit %d %s" % (p.returncode, p.stderr))
print("ok: a copy with 'healthchek' is refused: %s" % p.stderr.strip().splitlines()[-1])

# 2. the resolved file
cfg = resolved(tmp)
svc = cfg["services"]
nodes = strata_nodes(cfg)
check(nodes == ["strata-1", "strata-2", "strata-3"], "strata services: %r" % nodes)
check({"minio", "minio-init"} <= set(svc), "services: %r" % sorted(svc))


def hostport(s):
    m = re.fullmatch(r"([^:]*):(\d+)", s)
    check(m, "not host:port: %r" % s)
    return m.group(1), int(m.group(2))


envs = {n: {k: str(v) for k, v in svc[n]["environment"].items()} for n in nodes}
ids, cids = set(), set()
voters = None
for n in nodes:
    e, s = envs[n], svc[n]
    ids.add(e["STRATA_NODE_ID"])
    cids.add(e["STRATA_CLUSTER_ID"])
    check(e["STRATA_PROCESS_ROLES"] == "broker,controller", "%s: not combined" % n)
    vs = dict((int(i), hostport(hp)) for i, _, hp in
              (v.partition("@") for v in e["STRATA_CONTROLLER_QUORUM_VOTERS"].split(",")))
    check(voters in (None, vs), "%s: another voter list" % n)
    voters = vs
    ls = listeners(e["STRATA_LISTENERS"])
    ctl = e["STRATA_CONTROLLER_LISTENER_NAMES"]
    check(ctl in ls, "%s: no %s listener in %r" % (n, ctl, ls))
    me = vs.get(int(e["STRATA_NODE_ID"]))
    check(me == (s.get("hostname", n), ls[ctl][1]),
          "%s: its voter entry %r is not its host and controller port %r" % (n, me, ls[ctl]))
    adv = listeners(e["STRATA_ADVERTISED_LISTENERS"])
    check(list(adv) == ["PLAINTEXT"] and adv["PLAINTEXT"] == (n, ls["PLAINTEXT"][1]),
          "%s: advertised %r, listening on %r" % (n, adv, ls))
    published = [(int(x["published"]), int(x["target"])) for x in s.get("ports", [])]
    check(published == [(ls["PLAINTEXT"][1], ls["PLAINTEXT"][1])],
          "%s: publishes %r, advertises port %d" % (n, published, ls["PLAINTEXT"][1]))
    check(any(v.endswith(":/var/lib/strata:rw") or v.endswith(":/var/lib/strata")
              for v in s.get("volumes", [])), "%s: no volume on /var/lib/strata" % n)
    check(s["healthcheck"]["test"] == ["CMD", "strata-healthcheck"], "%s: healthcheck %r" % (n, s["healthcheck"]))
    check(s["depends_on"] == {"minio-init": {"condition": "service_completed_successfully"}},
          "%s: depends_on %r" % (n, s["depends_on"]))
    check(e["STRATA_OBJECTSTORE_BACKEND"] == "s3" and e["STRATA_REMOTE_LOG_STORAGE_SYSTEM_ENABLE"] == "true",
          "%s: not tiering to S3" % n)
    host, port = hostport(e["STRATA_OBJECTSTORE_S3_ENDPOINT"].split("://", 1)[1])
    check(host in svc and port == 9000, "%s: endpoint %s is not the minio service" % (n, host))
    check(e["STRATA_OBJECTSTORE_S3_BUCKET"] == svc["minio-init"]["environment"]["BUCKET"],
          "%s: bucket %s is not the one minio-init makes" % (n, e["STRATA_OBJECTSTORE_S3_BUCKET"]))
    check(e["AWS_ACCESS_KEY_ID"] == svc["minio"]["environment"]["MINIO_ROOT_USER"] and
          e["AWS_SECRET_ACCESS_KEY"] == svc["minio"]["environment"]["MINIO_ROOT_PASSWORD"],
          "%s: S3 credentials are not MinIO's" % n)
    check(not any("SECRET" in k for k in e if k.startswith("STRATA_")),
          "%s: a secret in a STRATA_ variable would land in the properties file" % n)
    rc, out, err = entrypoint(["print-config"], {k: v for k, v in e.items() if k.startswith("STRATA_")})
    check(rc == 0, "%s: the entry point refuses its environment: %s" % (n, err))
check(ids == {"1", "2", "3"} and len(cids) == 1, "node ids %r, cluster ids %r" % (ids, cids))
check(sorted(voters) == [1, 2, 3], "voters %r" % voters)
check(svc["minio"].get("healthcheck") and
      svc["minio-init"]["depends_on"] == {"minio": {"condition": "service_healthy"}},
      "minio's healthcheck or minio-init's wait")
check("mc mb" in " ".join(svc["minio-init"]["entrypoint"]) and
      svc["minio-init"]["environment"]["BUCKET"] == envs["strata-1"]["STRATA_OBJECTSTORE_S3_BUCKET"],
      "minio-init does not make the bucket")
check({"minio-data", "strata-1-data", "strata-2-data", "strata-3-data"} <= set(cfg.get("volumes", {})),
      "volumes: %r" % cfg.get("volumes"))
print("ok: 3 combined nodes %s, cluster %s, voters %s; bucket %r made by minio-init; "
      "every STRATA_ variable is a stratad setting"
      % (sorted(ids), cids.pop(), envs["strata-1"]["STRATA_CONTROLLER_QUORUM_VOTERS"],
         envs["strata-1"]["STRATA_OBJECTSTORE_S3_BUCKET"]))

# 3. the same environments on loopback, the file backend for the bucket
lb = Loopback(cfg, tmp)
lb.start({"STRATA_OBJECTSTORE_BACKEND": "file", "STRATA_OBJECTSTORE_FILE_ROOT": os.path.join(tmp, "bucket")})
boot = lb.bootstrap
text = lb.wait_brokers()
print("ok: loopback: kcat -L: 3 brokers, %s" % ", ".join(
    l.strip() for l in text.splitlines() if l.strip().startswith("broker ")))

payload = "".join("record-%d\n" % i for i in range(200))


def produced():
    p = subprocess.run(["kcat", "-b", boot, "-P", "-t", "compose-check", "-X", "acks=all",
                        "-X", "message.timeout.ms=10000"], input=payload, text=True,
                       capture_output=True, timeout=60)
    return p.returncode == 0 and "ERROR" not in p.stderr


wait_for(produced, 60, "200 records written with acks=all")
p = subprocess.run(["kcat", "-b", boot, "-C", "-t", "compose-check", "-e", "-q", "-o", "beginning"],
                   capture_output=True, text=True, timeout=60)
got = sorted(p.stdout.split())
check(got == sorted(payload.split()), "read back %d of 200 records" % len(got))
rc, text = kcat_metadata(boot)
parts = [l for l in text.splitlines() if "partition" in l and "leader" in l]
topic = [l for l in text.splitlines() if 'topic "compose-check"' in l]
check(topic and "3 partitions" in topic[0], "compose-check: %r" % topic)
rep = [re.search(r"replicas: ([\d,]+), isrs: ([\d,]+)", l) for l in parts]
check(len(parts) == 3 and all(m and len(m.group(1).split(",")) == 3 and len(m.group(2).split(",")) == 3
                              for m in rep), "replicas and ISR:\n" + "\n".join(parts))
print("ok: loopback: 200 records written with acks=all and read back; %s, each with 3 replicas, 3 in sync"
      % topic[0].strip())

lb.stop()
print("ok: loopback: the 3 nodes stopped cleanly")
print("deploy.compose: all checks passed")

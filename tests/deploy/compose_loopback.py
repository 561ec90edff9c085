"""
compose_loopback - the Strata services of deploy/compose/docker-compose.yml
as `docker-compose config` resolves them, and the same nodes run on
loopback: service names become 127.0.0.1 and each node's ports free ones,
the environment otherwise as compose gives it.  Needs PyYAML (Debian's
python3-yaml).
"""
import os
import re
import subprocess

import yaml

from deploy_util import (COMPOSE, ENTRYPOINT, base_env, check, fail, free_ports, kcat_metadata,
                         spawn, stop, wait_for)


def resolved(tmp, path=COMPOSE):
    """`docker-compose config` of the file, parsed, with no variable of the
    caller's shell (compose substitutes them)."""
    p = subprocess.run(["docker-compose", "-f", path, "config"], capture_output=True, text=True,
                       env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tmp}, cwd=tmp, timeout=120)
    check(p.returncode == 0, "docker-compose config: %s" % p.stderr)
    return yaml.safe_load(p.stdout)


def strata_nodes(cfg):
    return sorted(n for n in cfg["services"] if n.startswith("strata-"))


def listeners(s):
    """NAME -> (host, port) of a listeners value."""
    out = {}
    for item in s.split(","):
        name, _, hp = item.partition("://")
        m = re.fullmatch(r"([^:]*):(\d+)", hp)
        check(m, "not NAME://host:port: %r" % item)
        out[name] = (m.group(1), int(m.group(2)))
    return out


class Loopback:
    """The compose file's Strata nodes on loopback."""

    def __init__(self, cfg, tmp):
        self.cfg, self.tmp = cfg, tmp
        self.nodes = strata_nodes(cfg)
        ports = free_ports(3 * len(self.nodes))
        self.client_port = {}
        self.admin_port = {}  # the admin listener's port here
        self.addr = {}  # (service, port in compose) -> free port here
        for i, n in enumerate(self.nodes):
            ls = listeners(str(cfg["services"][n]["environment"]["STRATA_LISTENERS"]))
            self.addr[(n, ls["PLAINTEXT"][1])] = ports[2 * i]
            self.addr[(n, ls["CONTROLLER"][1])] = ports[2 * i + 1]
            self.client_port[n] = ports[2 * i]
            self.admin_port[n] = ports[2 * len(self.nodes) + i]
        self.bootstrap = ",".join("127.0.0.1:%d" % self.client_port[n] for n in self.nodes)
        self.procs = {}

    def to_loopback(self, n, value):
        value = re.sub(r"(strata-\d+):(\d+)",
                       lambda m: "127.0.0.1:%d" % self.addr[(m.group(1), int(m.group(2)))], value)
        return re.sub(r"://:(\d+)", lambda m: "://127.0.0.1:%d" % self.addr[(n, int(m.group(1)))], value)

    def moved(self, n):
        """Node n's compose environment with names and ports moved to
        loopback (the admin listener's too: three nodes on one host's
        network cannot all listen on compose's 9644)."""
        e = {k: self.to_loopback(n, str(v)) for k, v in self.cfg["services"][n]["environment"].items()}
        if "STRATA_ADMIN_LISTENERS" in e:
            e["STRATA_ADMIN_LISTENERS"] = "http://127.0.0.1:%d" % self.admin_port[n]
        return e

    def env(self, n, changes=None):
        """Node n's environment here: compose's, names and ports moved to
        loopback, its directories under tmp, then the test's changes."""
        e = self.moved(n)
        d = os.path.join(self.tmp, n)
        e.update({"STRATA_LOG_DIRS": os.path.join(d, "logs"),
                  "STRATA_REMOTE_LOG_CACHE_DIR": os.path.join(d, "cache"),
                  "STRATA_CONFIG_OUT": os.path.join(d, "server.properties")})
        e.update(changes or {})
        return e

    def start(self, changes=None):
        for n in self.nodes:
            os.makedirs(os.path.join(self.tmp, n), exist_ok=True)
            self.procs[n] = spawn(["bash", ENTRYPOINT], base_env(self.env(n, changes)),
                                  os.path.join(self.tmp, n, "stratad.log"))

    def log(self, n):
        with open(os.path.join(self.tmp, n, "stratad.log")) as f:
            return f.read()

    def logs(self):
        return "\n".join("== %s\n%s" % (n, self.log(n)[-1500:]) for n in self.nodes)

    def wait_brokers(self, timeout=60):
        want = " %d brokers:" % len(self.nodes)

        def up():
            for n, p in self.procs.items():
                if p.poll() is not None:
                    fail("%s stopped with %s\n%s" % (n, p.returncode, self.logs()))
            rc, text = kcat_metadata(self.bootstrap)
            return text if rc == 0 and want in text and "(controller)" in text else None
        text = wait_for(up, timeout, "%d brokers in kcat -L" % len(self.nodes))
        for i, n in enumerate(self.nodes):
            check("broker %d at 127.0.0.1:%d" % (i + 1, self.client_port[n]) in text, "kcat -L:\n" + text)
        return text

    def stop(self):
        for n, p in self.procs.items():
            rc = stop(p)
            check(rc == 0 and "stopped cleanly" in self.log(n),
                  "%s: SIGTERM: exit %s\n%s" % (n, rc, self.logs()))

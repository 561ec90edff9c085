"""
deploy_util - what the deploy tests share: where the entry point and the
binaries are, running the entry point with exactly the environment a test
gives it, free ports, and stopping what a test started, by pid.
"""
import atexit
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.environ.get("STRATA_BIN_DIR") or os.path.join(ROOT, "build", "bin")
ENTRYPOINT = os.path.join(ROOT, "deploy", "image", "entrypoint.sh")
HEALTHCHECK = os.path.join(ROOT, "deploy", "image", "healthcheck.sh")
COMPOSE = os.path.join(ROOT, "deploy", "compose", "docker-compose.yml")

_procs = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def base_env(extra=None):
    """Only PATH (stratad of this build first) and what the test sets."""
    env = {"PATH": BIN + ":/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}
    env.update(extra or {})
    return env


def entrypoint(args, env=None, timeout=60):
    """Run strata-entrypoint ARGS with only env set; (rc, stdout, stderr)."""
    p = subprocess.run(["bash", ENTRYPOINT] + list(args), env=base_env(env),
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def parse_props(text):
    """key -> value of a properties text (comments and blanks skipped)."""
    out = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        k, _, v = s.partition("=")
        out[k.strip()] = v.strip()
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n):
    """n distinct free ports (sockets held until all are chosen)."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def spawn(args, env, log_path):
    """Start a long-running command (the entry point that execs stratad)."""
    log = open(log_path, "ab")
    p = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    _procs.append(p)
    return p


def stop(p, timeout=30):
    """SIGTERM, wait; SIGKILL if it does not stop.  Returns the exit code."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


@atexit.register
def _stop_all():
    for p in _procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def kcat_metadata(bootstrap, timeout_s=2):
    p = subprocess.run(["kcat", "-b", bootstrap, "-L", "-m", str(timeout_s)],
                       capture_output=True, text=True, timeout=timeout_s + 30)
    return p.returncode, p.stdout + p.stderr


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        r = pred()
        if r:
            return r
        time.sleep(0.2)
    fail("timed out after %d s waiting for %s" % (timeout, what))

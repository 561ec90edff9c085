"""
deploy.entrypoint_stratad: the entry point's default command on this
machine, no container: it writes the properties file from STRATA_*
variables (and, in the second run, a mounted file under them) and execs
this build's stratad on loopback; kcat -L must find the broker with the
node id and address the variables gave, strata-healthcheck must answer
from the written file, and SIGTERM must stop it cleanly (stratad is the
process the entry point became).
"""
import atexit
import http.server
import os
import shutil
import subprocess
import tempfile
import threading

from deploy_util import (ENTRYPOINT, HEALTHCHECK, base_env, check, fail, free_port,
                         kcat_metadata, parse_props, spawn, stop, wait_for)

tmp = tempfile.mkdtemp(prefix="strata-entrypoint-stratad-")
atexit.register(shutil.rmtree, tmp, True)


def run_broker(name, env, node_id, port):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    out = os.path.join(d, "run", "server.properties")
    env = base_env(dict(env, STRATA_CONFIG_OUT=out))
    log = os.path.join(d, "stratad.log")
    p = spawn(["bash", ENTRYPOINT], env, log)

    def answers():
        if p.poll() is not None:
            fail("%s: stopped with %s:\n%s" % (name, p.returncode, open(log).read()[-3000:]))
        rc, text = kcat_metadata("127.0.0.1:%d" % port)
        return text if rc == 0 else None
    text = wait_for(answers, 30, "%s to answer kcat -L" % name)
    check("1 brokers:" in text and "broker %d at 127.0.0.1:%d" % (node_id, port) in text,
          "%s: kcat -L:\n%s" % (name, text))
    print("ok: %s: kcat -L: broker %d at 127.0.0.1:%d" % (name, node_id, port))
    # the process kcat talks to is the one started: the entry point exec'd stratad
    with open("/proc/%d/comm" % p.pid) as f:
        comm = f.read().strip()
    check(comm == "stratad", "%s: pid %d is %r, not stratad" % (name, p.pid, comm))
    props = parse_props(open(out).read())
    hc = subprocess.run(["bash", HEALTHCHECK], env=env, capture_output=True, text=True, timeout=30)
    check(hc.returncode == 0, "%s: strata-healthcheck exited %d: %s" % (name, hc.returncode, hc.stderr))
    rc = stop(p)
    text = open(log).read()
    check(rc == 0 and "stopped cleanly" in text, "%s: SIGTERM: exit %s\n%s" % (name, rc, text[-2000:]))
    hc = subprocess.run(["bash", HEALTHCHECK], env=env, capture_output=True, text=True, timeout=30)
    check(hc.returncode != 0, "%s: strata-healthcheck passed with stratad stopped" % name)
    print("ok: %s: healthcheck passes while it runs and fails once stopped; SIGTERM: exit 0, stopped cleanly"
          % name)
    return props, d


# 1. variables only
port = free_port()
props, d = run_broker("variables", {
    "STRATA_NODE_ID": "7",
    "STRATA_LISTENERS": "PLAINTEXT://127.0.0.1:%d" % port,
    "STRATA_LOG_DIRS": os.path.join(tmp, "variables", "logs"),
    "STRATA_NUM_PARTITIONS": "2",
}, 7, port)
check(os.path.exists(os.path.join(d, "logs", "meta.properties")),
      "variables: no meta.properties in the log dir the variable named")
check(props["num.partitions"] == "2", "variables: %r" % props)

# 2. a mounted file with a variable over it: the file's listener and node id
#    are replaced, its log dir kept
port2 = free_port()
mounted = os.path.join(tmp, "mounted.properties")
with open(mounted, "w") as f:
    f.write("node.id=4\nlisteners=PLAINTEXT://127.0.0.1:1\nlog.dirs=%s\n"
            % os.path.join(tmp, "file", "logs"))
props, d = run_broker("file", {
    "STRATA_CONFIG_FILE": mounted,
    "STRATA_NODE_ID": "5",
    "STRATA_LISTENERS": "PLAINTEXT://127.0.0.1:%d" % port2,
}, 5, port2)
check(os.path.exists(os.path.join(tmp, "file", "logs", "meta.properties")),
      "file: the mounted file's log.dirs was not used")

# 3. a value stratad refuses stops start-up with stratad's message
env = base_env({"STRATA_LOG_SEGMENT_BYTES": "lots",
                "STRATA_CONFIG_OUT": os.path.join(tmp, "bad", "server.properties")})
p = subprocess.run(["bash", ENTRYPOINT], env=env, capture_output=True, text=True, timeout=30)
check(p.returncode == 1 and "log.segment.bytes: 'lots' is not a whole number" in p.stderr,
      "a bad value: exit %d, %r" % (p.returncode, p.stderr))
print("ok: a bad value: %s" % p.stderr.strip())
# 4. with admin.listeners in the file, the healthcheck asks /v1/ready
#    instead (here of a stand-in HTTP server on loopback: the file is
#    written by hand, so this checks only the script's half of it)
answers = {"code": 200}
paths = []


class Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        paths.append(self.path)
        self.send_response(answers["code"] if self.path == "/v1/ready" else 404)
        self.end_headers()

    def log_message(self, *a):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 0), Ready)
threading.Thread(target=srv.serve_forever, daemon=True).start()
conf = os.path.join(tmp, "admin.properties")
with open(conf, "w") as f:
    f.write("listeners=PLAINTEXT://:1\nadmin.listeners=http://0.0.0.0:%d\n" % srv.server_port)
env = base_env({"STRATA_CONFIG_OUT": conf})
for code, want in ((200, 0), (503, 1)):
    answers["code"] = code
    hc = subprocess.run(["bash", HEALTHCHECK], env=env, capture_output=True, text=True, timeout=30)
    check((hc.returncode == 0) == (want == 0), "healthcheck with /v1/ready answering %d: exit %d %s"
          % (code, hc.returncode, hc.stderr))
srv.shutdown()
check(paths == ["/v1/ready", "/v1/ready"], "the healthcheck asked %r" % paths)
print("ok: with admin.listeners the healthcheck asks GET /v1/ready on 127.0.0.1 (200: healthy, 503: not)")
print("deploy.entrypoint_stratad: all checks passed")

#!/usr/bin/python3
"""The Helm chart (helm/strata) rendered by tools/helm-render, the stand-in
for `helm template` built here offline in GOPATH mode from Debian's Go
packages.

    test_helm.py build      build helm-render (and run its Go unit tests)
    test_helm.py golden     render the defaults and every ci/*-values.yaml
                            and compare with golden/ (STRATA_HELM_UPDATE=1
                            rewrites golden/ instead)
    test_helm.py lint       yamllint every render (yamllint.yaml)
    test_helm.py k8s        k8s_check.py on every render
    test_helm.py bad        every bad/*.yaml is refused with its message
    test_helm.py secrets    S3 credentials appear only as secretKeyRef
    test_helm.py rack       the rack init container's script finds the zone
    test_helm.py stratad    the rendered single-node configuration starts a real stratad
    test_helm.py cluster    the rendered 3-node configuration runs as a quorum

Run with Debian's /usr/bin/python3 (python3-kubernetes, yamllint).
"""
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(ROOT, "helm", "strata")
TOOL_SRC = os.path.join(ROOT, "tools", "helm-render")
BIN = os.environ.get("STRATA_BIN_DIR") or os.path.join(ROOT, "build", "bin")
TOOL = os.path.join(BIN, "helm-render")
GOLDEN = os.path.join(HERE, "golden")
GOPATH = "/usr/share/gocode"
RELEASE = ["--name", "strata", "--namespace", "streaming"]
UPDATE = os.environ.get("STRATA_HELM_UPDATE") == "1"


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def go_env():
    cache = os.path.join(os.path.dirname(BIN), "go-cache")
    return dict(os.environ, GOPATH=GOPATH, GO111MODULE="off", GOFLAGS="", GOCACHE=cache,
                GOPROXY="off")


def build():
    go = shutil.which("go") or "/usr/lib/go/bin/go"
    if not os.path.exists(go):
        fail("go is missing (Debian's golang-go; scripts/deps.sh test installs it)")
    for pkg in ("github.com/Masterminds/sprig", "gopkg.in/yaml.v3", "github.com/xeipuuv/gojsonschema"):
        if not os.path.isdir(os.path.join(GOPATH, "src", pkg)):
            fail("%s is missing from %s (scripts/deps.sh test installs it)" % (pkg, GOPATH))
    os.makedirs(BIN, exist_ok=True)
    r = subprocess.run([go, "test", "."], cwd=TOOL_SRC, env=go_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=600)
    print(r.stdout.decode(errors="replace"), end="")
    if r.returncode != 0:
        fail("the Go tests of helm-render failed")
    r = subprocess.run([go, "build", "-o", TOOL, "."], cwd=TOOL_SRC, env=go_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    if r.returncode != 0:
        print(r.stdout.decode(errors="replace"))
        fail("building helm-render failed")
    print("built %s" % TOOL)


def tool():
    if not os.path.exists(TOOL):
        build()
    return TOOL


def render(args, check=True):
    r = subprocess.run([tool()] + RELEASE + args + [CHART], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    out, err = r.stdout.decode(), r.stderr.decode()
    if check and r.returncode != 0:
        fail("helm-render %s: exit %d\n%s" % (" ".join(args), r.returncode, err))
    return r.returncode, out, err


def cases():
    """(name, helm-render arguments): the defaults and each ci file."""
    cs = [("chart-defaults", [])]
    for f in sorted(glob.glob(os.path.join(CHART, "ci", "*-values.yaml"))):
        cs.append((os.path.basename(f)[:-len("-values.yaml")], ["-f", f]))
    if len(cs) < 5:
        fail("expected the defaults and at least 4 ci/*-values.yaml, found %d cases" % len(cs))
    return cs


def rendered(tmp):
    """Render every case into tmp; returns [(name, path, text)]."""
    out = []
    for name, args in cases():
        _, text, _ = render(args)
        p = os.path.join(tmp, name + ".yaml")
        with open(p, "w") as f:
            f.write(text)
        out.append((name, p, text))
    return out


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d]


def golden():
    os.makedirs(GOLDEN, exist_ok=True)
    bad = []
    seen = set()
    for name, args in cases():
        for suffix, extra in ((".yaml", []), (".notes.txt", ["--notes"])):
            _, text, _ = render(args + extra)
            p = os.path.join(GOLDEN, name + suffix)
            seen.add(p)
            if UPDATE:
                with open(p, "w") as f:
                    f.write(text)
                print("wrote %s" % os.path.relpath(p, ROOT))
                continue
            if not os.path.exists(p):
                bad.append("%s: no golden file (STRATA_HELM_UPDATE=1 writes it)" % os.path.relpath(p, ROOT))
                continue
            want = open(p).read()
            if want != text:
                import difflib
                diff = "".join(list(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                                         "golden/" + name + suffix, "rendered"))[:60])
                bad.append("%s differs from the render:\n%s" % (os.path.relpath(p, ROOT), diff))
            else:
                print("ok %-22s %s (%d lines)" % (name, suffix, text.count("\n")))
    for p in glob.glob(os.path.join(GOLDEN, "*")):
        if p not in seen:
            bad.append("%s: golden file of no case" % os.path.relpath(p, ROOT))
    # what every render must hold, beyond matching its golden file
    for name, args in cases():
        _, text, _ = render(args)
        objs = docs(text)
        kinds = [o["kind"] for o in objs]
        sts = [o for o in objs if o["kind"] == "StatefulSet"]
        if len(sts) != 1 or sts[0]["spec"]["podManagementPolicy"] != "Parallel":
            bad.append("%s: not one StatefulSet with podManagementPolicy Parallel" % name)
            continue
        n = sts[0]["spec"]["replicas"]
        cm = [o for o in objs if o["kind"] == "ConfigMap"][0]
        props = dict(l.split("=", 1) for l in cm["data"]["server.properties"].splitlines()
                     if l and not l.startswith("#"))
        voters = props["controller.quorum.voters"].split(",")
        if len(voters) != n:
            bad.append("%s: %d voters for %d replicas" % (name, len(voters), n))
        headless = [o for o in objs if o["kind"] == "Service" and o["spec"].get("clusterIP") == "None"]
        if not headless or not headless[0]["spec"].get("publishNotReadyAddresses"):
            bad.append("%s: no headless Service publishing not-ready pods" % name)
        _, notes, _ = render(args + ["--notes"])
        client = [o for o in objs if o["kind"] == "Service" and o["spec"].get("clusterIP") != "None"][0]
        boot = "%s.streaming.svc.cluster.local:%d" % (client["metadata"]["name"], client["spec"]["ports"][0]["port"])
        if boot not in notes:
            bad.append("%s: NOTES.txt does not give the bootstrap address %s" % (name, boot))
        print("   %-22s %d objects (%s), %d voters, bootstrap %s" % (name, len(objs), ", ".join(kinds), len(voters), boot))
    if bad:
        fail("\n".join(bad))


def lint():
    with tempfile.TemporaryDirectory() as tmp:
        files = [p for _, p, _ in rendered(tmp)]
        r = subprocess.run(["yamllint", "-f", "parsable", "-c", os.path.join(HERE, "yamllint.yaml")] + files,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        print(r.stdout.decode(), end="")
        if r.returncode != 0:
            fail("yamllint refused a render")
        # the same configuration refuses what it should
        p = os.path.join(tmp, "broken.yaml")
        with open(p, "w") as f:
            f.write("---\na: 1\na: 2\nb:  [1,2]\n")
        r = subprocess.run(["yamllint", "-c", os.path.join(HERE, "yamllint.yaml"), p], stdout=subprocess.PIPE)
        if r.returncode == 0:
            fail("yamllint passed a file with a duplicated key")
        # and the chart's own YAML (documents without a leading ---)
        src = [os.path.join(CHART, "Chart.yaml"), os.path.join(CHART, "values.yaml")] + \
            sorted(glob.glob(os.path.join(CHART, "ci", "*.yaml")))
        r = subprocess.run(["yamllint", "-f", "parsable", "-d",
                            "{extends: default, rules: {document-start: disable, line-length: {max: 120}}}"] + src,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        print(r.stdout.decode(), end="")
        if r.returncode != 0:
            fail("yamllint refused a file of the chart")
        print("yamllint: %d renders and %d files of the chart clean, a broken file refused" % (len(files), len(src)))


def k8s():
    with tempfile.TemporaryDirectory() as tmp:
        rs = rendered(tmp)
        r = subprocess.run([sys.executable, os.path.join(HERE, "k8s_check.py")] + [p for _, p, _ in rs],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        print(r.stdout.decode(), end="")
        if r.returncode != 0:
            fail("the Kubernetes check refused a render")
        # and it refuses a broken StatefulSet: an unknown field, a string
        # count, a port name too long, a bad quantity, a missing volume
        text = rs[0][2]
        broken = (text.replace("podManagementPolicy: Parallel", "podManagementPolicy: Parallel\n  podManagmentPolicy: Parallel")
                      .replace("  replicas: 3\n", "  replicas: \"3\"\n")
                      .replace("- name: admin\n              containerPort", "- name: admin-http-listener\n              containerPort")
                      .replace('storage: "20Gi"', 'storage: "20GB"')
                      .replace("- name: tmp\n              mountPath", "- name: scratch\n              mountPath"))
        p = os.path.join(tmp, "broken.yaml")
        with open(p, "w") as f:
            f.write(broken)
        r = subprocess.run([sys.executable, os.path.join(HERE, "k8s_check.py"), p], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        out = r.stdout.decode()
        want = ["podManagmentPolicy: unknown field", "replicas: expected an integer",
                "port name 'admin-http-listener'", "'20GB' is not a quantity", "volumeMount scratch names no volume",
                "startupProbe port 'admin' is not a port of the container"]
        missing = [w for w in want if w not in out]
        if r.returncode == 0 or missing:
            print(out)
            fail("the Kubernetes check missed: %s" % missing)
        print("k8s_check: a broken StatefulSet refused with %d problems" % out.count("\nk8s_check: ") )


def bad():
    files = sorted(glob.glob(os.path.join(HERE, "bad", "*.yaml")))
    if len(files) < 10:
        fail("expected the bad values files in tests/helm/bad")
    probs = []
    for f in files:
        expect = [l[len("# expect: "):].rstrip("\n") for l in open(f) if l.startswith("# expect: ")]
        if not expect:
            probs.append("%s: no '# expect: ' line" % f)
            continue
        rc, out, err = render(["-f", f], check=False)
        name = os.path.basename(f)
        if rc != 1 or out:
            probs.append("%s: exit %d with %d bytes rendered, expected a refusal" % (name, rc, len(out)))
            continue
        if "values don't meet the specifications of the schema(s)" not in err:
            probs.append("%s: refused, but not by the schema: %s" % (name, err))
        for e in expect:
            if e not in err:
                probs.append("%s: the message lacks %r; it was:\n%s" % (name, e, err))
        print("refused %-28s %s" % (name, err.strip().splitlines()[-1][:110]))
    # the same, through --set
    for args, e in ((["--set", "replicas=0"], "- replicas: Must be greater than or equal to 1 (got 0)"),
                    (["--set-string", "replicas=3"], "- replicas: Invalid type. Expected: integer, given: string"),
                    (["--set", "tieredStorage.enabled=true,tieredStorage.s3.bucket=strata"],
                     "- tieredStorage.credentials.existingSecret: String length must be greater than or equal to 1")):
        rc, out, err = render(args, check=False)
        if rc != 1 or e not in err:
            probs.append("%s: expected a refusal with %r, got exit %d: %s" % (args, e, rc, err))
        else:
            print("refused %-28s %s" % (" ".join(args)[:28], e))
    if probs:
        fail("\n".join(probs))


def secrets():
    sentinel = "c2VudGluZWwtY3JlZGVudGlhbA"
    probs = []
    with tempfile.TemporaryDirectory() as tmp:
        rs = rendered(tmp)
    tiered = 0
    for name, _, text in rs:
        objs = docs(text)
        if any(o["kind"] == "Secret" for o in objs):
            probs.append("%s: the chart renders a Secret" % name)
        for o in objs:
            if o["kind"] == "ConfigMap":
                for k, v in o["data"].items():
                    if re.search(r"(access|secret)\.key|session\.token|AWS_", v):
                        probs.append("%s: ConfigMap %s holds a credential setting" % (name, k))
            if o["kind"] != "StatefulSet":
                continue
            spec = o["spec"]["template"]["spec"]
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                for e in c.get("env", []):
                    if re.match(r"AWS_|.*(SECRET|PASSWORD|TOKEN|ACCESS_KEY)", e["name"]):
                        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                        if "value" in e or not ref or not ref.get("name") or not ref.get("key"):
                            probs.append("%s: env %s is not a secretKeyRef: %r" % (name, e["name"], e))
                        else:
                            tiered += 1
        if re.search(r"AKIA[0-9A-Z]{16}|secret.key=|access.key=", text):
            probs.append("%s: something like a credential in the render" % name)
    if tiered < 2:
        probs.append("no render carries the S3 keys as secretKeyRef (the tiered ci file should)")
    print("secretKeyRef env vars over the renders: %d; no Secret, no credential in a ConfigMap" % tiered)
    # every way of giving the chart a key itself is refused, and the key is
    # not echoed, neither rendered nor in the message
    attempts = [
        ["--set", "config.objectstore\\.s3\\.secret\\.key=" + sentinel],
        ["--set", "config.objectstore\\.s3\\.access\\.key=" + sentinel],
        ["--set", "config.objectstore\\.s3\\.session\\.token=" + sentinel],
        ["--set", "extraEnv[0].name=AWS_SECRET_ACCESS_KEY,extraEnv[0].value=" + sentinel],
        ["--set", "extraEnv[0].name=AWS_ACCESS_KEY_ID,extraEnv[0].value=" + sentinel],
        ["--set", "tieredStorage.enabled=true,tieredStorage.s3.bucket=strata,"
                  "tieredStorage.credentials.existingSecret=s3,tieredStorage.credentials.secretAccessKey=" + sentinel],
        ["--set", "tieredStorage.s3.secretKey=" + sentinel],
    ]
    for a in attempts:
        rc, out, err = render(a, check=False)
        if rc == 0:
            probs.append("%s: accepted" % a)
        if sentinel in out or sentinel in err:
            probs.append("%s: the key was echoed: %s" % (a, err))
        print("refused %s" % a[1].split(",")[-1].split("=")[0])
    if probs:
        fail("\n".join(probs))


def rack():
    """The rack init container's script, as rendered, run with a stand-in
    for curl that answers the Node object as the API server would (pretty
    or compact JSON), with no zone label, or with an error."""
    _, text, _ = render(["-f", os.path.join(CHART, "ci", "zones-values.yaml")])
    sts = [o for o in docs(text) if o["kind"] == "StatefulSet"][0]
    init = [c for c in sts["spec"]["template"]["spec"]["initContainers"] if c["name"] == "rack"][0]
    script = init["command"][2]
    probs = []
    node = {"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "worker-3", "labels": {"kubernetes.io/hostname": "worker-3",
                                                        "topology.kubernetes.io/region": "eu-west-1",
                                                        "topology.kubernetes.io/zone": "eu-west-1b"}},
            "status": {"nodeInfo": {"kubeletVersion": "v1.28.3"}}}
    import json
    unlabelled = json.loads(json.dumps(node))
    del unlabelled["metadata"]["labels"]["topology.kubernetes.io/zone"]
    cases = [("pretty", json.dumps(node, indent=2), 0, "eu-west-1b"),
             ("compact", json.dumps(node, separators=(",", ":")), 0, "eu-west-1b"),
             ("no zone label", json.dumps(unlabelled, indent=2), 0, ""),
             ("API error", None, 22, None)]
    for name, answer, want_rc, want_zone in cases:
        with tempfile.TemporaryDirectory() as tmp:
            sa = os.path.join(tmp, "sa")
            run = os.path.join(tmp, "run")
            bindir = os.path.join(tmp, "bin")
            for d in (sa, run, bindir):
                os.makedirs(d)
            for f in ("ca.crt", "token"):
                with open(os.path.join(sa, f), "w") as fh:
                    fh.write("x")
            with open(os.path.join(tmp, "answer"), "w") as fh:
                fh.write(answer or "")
            with open(os.path.join(bindir, "curl"), "w") as fh:
                fh.write("#!/bin/sh\n"
                         "echo \"$@\" >%s/args\n" % tmp +
                         ("cat %s/answer\n" % tmp if answer is not None
                          else "echo 'curl: (22) The requested URL returned error: 403' >&2; exit 22\n"))
            os.chmod(os.path.join(bindir, "curl"), 0o755)
            sh = script.replace("/var/run/secrets/kubernetes.io/serviceaccount", sa).replace("/var/run/strata", run)
            env = dict(os.environ, NODE_NAME="worker-3", PATH=bindir + ":" + os.environ["PATH"])
            r = subprocess.run(["/bin/sh", "-ec", sh], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out = r.stdout.decode().strip()
            zone = open(os.path.join(run, "rack")).read() if os.path.exists(os.path.join(run, "rack")) else None
            args = open(os.path.join(tmp, "args")).read() if os.path.exists(os.path.join(tmp, "args")) else ""
            print("%-14s exit %d, rack file %r: %s" % (name, r.returncode, zone, out))
            if (r.returncode == 0) != (want_rc == 0) or zone != want_zone:
                probs.append("%s: exit %d, rack %r; expected exit %d, rack %r" % (name, r.returncode, zone, want_rc,
                                                                                  want_zone))
            if "https://kubernetes.default.svc/api/v1/nodes/worker-3" not in args:
                probs.append("%s: curl was asked for %r" % (name, args))
    if probs:
        fail("\n".join(probs))


def cluster():
    """The default render (3 nodes) run as its three pods would be: each
    node's start.sh and server.properties from the ConfigMap, where only
    what the pod network and DNS would give is stood in for: pod i's
    per-pod DNS name is 127.0.0.<i+2> (in the voters and the advertised
    address) and it binds that address instead of every interface of its
    own network namespace.  The three form a quorum, register with the
    racks their init containers would have written, and a topic created
    by a produce gets the chart's replication defaults (3 replicas, all in
    sync) and reads back."""
    exe = os.path.join(BIN, "stratad")
    if not os.path.exists(exe):
        fail("%s is not built" % exe)
    client, ctl, admin = free_ports(3)
    _, text, _ = render(["--set", "listeners.client.port=%d,listeners.controller.port=%d,listeners.admin.port=%d"
                         % (client, ctl, admin)])
    cm = [o for o in docs(text) if o["kind"] == "ConfigMap"][0]
    sts = [o for o in docs(text) if o["kind"] == "StatefulSet"][0]
    name, n = sts["metadata"]["name"], sts["spec"]["replicas"]
    has_admin = b"admin.listeners" in open(exe, "rb").read()
    if not has_admin:
        print("NOTE: this stratad does not know admin.listeners yet: started without it", flush=True)
    root = tempfile.mkdtemp(prefix="strata-helm-cluster-")
    procs, logs = [], []
    try:
        for i in range(n):
            ip = "127.0.0.%d" % (i + 2)
            paths = {"/etc/strata": "%s/pod-%d/etc" % (root, i), "/var/lib/strata": "%s/pod-%d/data" % (root, i),
                     "/var/run/strata": "%s/pod-%d/run" % (root, i)}
            for q in paths.values():
                os.makedirs(q)
            for k, v in cm["data"].items():
                for a, b in paths.items():
                    v = v.replace(a, b)
                for j in range(n):
                    v = v.replace("%s-%d.%s-headless.streaming.svc.cluster.local" % (name, j, name), "127.0.0.%d" % (j + 2))
                v = v.replace("PLAINTEXT://:", "PLAINTEXT://%s:" % ip).replace("CONTROLLER://:", "CONTROLLER://%s:" % ip)
                v = v.replace("http://0.0.0.0:", "http://%s:" % ip)
                if not has_admin:
                    v = v.replace("admin.listeners=", "#admin.listeners=")
                v = re.sub(r"(?m)^host=.*$", 'host="%s"' % ip, v)
                with open(os.path.join(paths["/etc/strata"], k), "w") as f:
                    f.write(v)
            with open(os.path.join(paths["/var/run/strata"], "rack"), "w") as f:
                f.write("zone-" + "abc"[i % 3])
            env = dict(os.environ, POD_NAME="%s-%d" % (name, i), POD_NAMESPACE="streaming",
                       PATH=BIN + ":" + os.environ["PATH"])
            log = open(os.path.join(root, "pod-%d.log" % i), "w+")
            logs.append(log)
            procs.append(subprocess.Popen(["/bin/sh", os.path.join(paths["/etc/strata"], "start.sh")], env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        import kwire

        def conn(timeout=10):  # kwire.Conn, to pod 0's address
            c = kwire.Conn.__new__(kwire.Conn)
            c.s = socket.create_connection(("127.0.0.2", client), timeout=timeout)
            c.corr = 0
            return c
        deadline = time.time() + 40
        brokers = []
        while time.time() < deadline:
            if any(p.poll() is not None for p in procs):
                break
            try:
                _, cid, _, brokers = kwire.describe_cluster(conn(2))
                if len(brokers) == n:
                    break
            except Exception:
                pass
            time.sleep(0.5)
        print("DescribeCluster: %s" % sorted(brokers))
        want = sorted((i, "127.0.0.%d" % (i + 2), client, "zone-" + "abc"[i % 3]) for i in range(n))
        if sorted(brokers) != want:
            for lg in logs:
                lg.seek(0)
                print(lg.read()[-3000:])
            fail("expected brokers %s" % want)
        boot = "127.0.0.2:%d" % client
        r = subprocess.run(["kcat", "-b", boot, "-P", "-t", "helm-check", "-X", "acks=all", "-X",
                            "message.timeout.ms=30000"], input=b"one\ntwo\nthree\n", stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        print(r.stdout.decode(), end="")
        if r.returncode != 0:
            fail("kcat could not produce with acks=all")
        md = kwire.metadata(conn(), ["helm-check"])
        print("helm-check: %r" % (md["topics"].get("helm-check"),))
        terr, parts = md["topics"]["helm-check"]
        if terr != 0 or not parts or any(len(p["replicas"]) != 3 or sorted(p["isr"]) != sorted(p["replicas"])
                                         for p in parts.values()):
            fail("helm-check is not 3 replicas all in sync (default.replication.factor from the chart)")
        cfg = kwire.describe_configs(conn(), ["helm-check"])["helm-check"][1]
        print("helm-check min.insync.replicas=%s" % cfg.get("min.insync.replicas"))
        if cfg.get("min.insync.replicas") != "2":
            fail("min.insync.replicas is not the chart's 2")
        r = subprocess.run(["kcat", "-b", boot, "-C", "-t", "helm-check", "-o", "beginning", "-e", "-q"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        got = sorted(r.stdout.decode().split())
        print("read back: %s" % got)
        if got != ["one", "three", "two"]:
            fail("read back %s" % got)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for lg in logs:
            lg.close()
    shutil.rmtree(root, ignore_errors=True)
    print("three nodes ran the rendered configuration as a quorum")


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def stratad():
    """The single-node render (a quorum of one) run as the pod would run
    it: start.sh from the ConfigMap with POD_NAME and POD_NAMESPACE set,
    the rack file the init container writes, the paths of the pod moved
    into a scratch directory and the ports to free ones."""
    exe = os.path.join(BIN, "stratad")
    if not os.path.exists(exe):
        fail("%s is not built" % exe)
    client, ctl, admin = free_ports(3)
    _, text, _ = render(["-f", os.path.join(CHART, "ci", "single-node-values.yaml"),
                         "--set", "listeners.client.port=%d,listeners.controller.port=%d,listeners.admin.port=%d"
                         % (client, ctl, admin)])
    cm = [o for o in docs(text) if o["kind"] == "ConfigMap"][0]
    sts = [o for o in docs(text) if o["kind"] == "StatefulSet"][0]
    pod = sts["metadata"]["name"] + "-0"
    root = tempfile.mkdtemp(prefix="strata-helm-")
    paths = {"/etc/strata": root + "/etc", "/var/lib/strata": root + "/data", "/var/run/strata": root + "/run"}
    for p in paths.values():
        os.makedirs(p)
    props = cm["data"]["server.properties"]
    for k, v in cm["data"].items():
        for a, b in paths.items():
            v = v.replace(a, b)
        with open(os.path.join(paths["/etc/strata"], k), "w") as f:
            f.write(v)
    with open(os.path.join(paths["/var/run/strata"], "rack"), "w") as f:
        f.write("zone-b")
    env = dict(os.environ, POD_NAME=pod, POD_NAMESPACE="streaming", PATH=BIN + ":" + os.environ["PATH"])
    logpath = os.path.join(root, "stratad.log")

    def start():
        log = open(logpath, "w+")
        p = subprocess.Popen(["/bin/sh", os.path.join(paths["/etc/strata"], "start.sh")], env=env, stdout=log,
                             stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        text = ""
        while time.time() < deadline:
            log.seek(0)
            text = log.read()
            if "is serving at" in text or p.poll() is not None:
                break
            time.sleep(0.2)
        log.close()
        print(text, end="")
        return p, text

    p, text = start()
    if "admin.listeners: unknown configuration key" in text:
        # a stratad from before the admin listener: check the rest
        print("NOTE: this stratad does not know admin.listeners yet: started again without it; "
              "/v1/health and /v1/ready are not checked", flush=True)
        props = props.replace("admin.listeners=", "#admin.listeners=")
        with open(os.path.join(paths["/etc/strata"], "server.properties"), "w") as f:
            f.write(props.replace("/var/lib/strata", paths["/var/lib/strata"]))
        p, text = start()
    try:
        if "is serving at" not in text:
            fail("stratad did not start from the rendered configuration")
        host = "%s.%s-headless.streaming.svc.cluster.local:%d" % (pod, sts["metadata"]["name"], client)
        if "node.id=0 advertised " + host not in text or ("serving at " + host) not in text:
            fail("stratad does not advertise %s" % host)
        r = subprocess.run(["kcat", "-b", "127.0.0.1:%d" % client, "-L", "-m", "5"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=20)
        md = r.stdout.decode()
        print(md, end="")
        if "broker 0 at " + host not in md:
            fail("kcat -L does not show broker 0 at %s" % host)
        # broker.rack from the file the init container writes, and the
        # chart's cluster.id, through DescribeCluster
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        import kwire
        want_id = re.search(r"^cluster.id=(.*)$", props, re.M).group(1)
        e, cid, ctl_id, brokers = kwire.describe_cluster(kwire.Conn(client))
        print("DescribeCluster: error %d, cluster %s, controller %d, brokers %s" % (e, cid, ctl_id, brokers))
        if e != 0 or cid != want_id or [(b[0], b[3]) for b in brokers] != [(0, "zone-b")]:
            fail("DescribeCluster: expected cluster %s, broker 0 in rack zone-b" % want_id)
        if re.search(r"^admin.listeners=", props, re.M):
            import urllib.request
            for path in ("/v1/health", "/v1/ready"):
                deadline = time.time() + 15
                while True:
                    try:
                        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (admin, path), timeout=2) as u:
                            print("GET %s: %d" % (path, u.status))
                            break
                    except Exception as e:
                        if time.time() > deadline:
                            fail("GET %s on the admin port: %s" % (path, e))
                        time.sleep(0.5)
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    shutil.rmtree(root, ignore_errors=True)
    print("stratad served the rendered single-node configuration")


MODES = {"build": build, "golden": golden, "lint": lint, "k8s": k8s, "bad": bad, "secrets": secrets,
         "rack": rack, "stratad": stratad,
         "cluster": cluster}
if len(sys.argv) != 2 or sys.argv[1] not in MODES:
    print("usage: test_helm.py %s" % "|".join(MODES))
    sys.exit(2)
MODES[sys.argv[1]]()
print("ok")

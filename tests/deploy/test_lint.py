"""
deploy.lint: what can be checked of the image and compose files without a
daemon.  hadolint is not in Debian, so this does what it does that matters
here, with Debian's tools:

- shellcheck on the image's scripts, and on the shell of every RUN of the
  Dockerfile (as hadolint does);
- the Dockerfile rules below (hadolint's numbers in brackets), each tried
  first on a planted bad Dockerfile that it must reject;
- yamllint on the compose file.

Not checked (hadolint would): pinned package versions (DL3008: the image
takes Debian 12's current packages on purpose, as scripts/deps.sh does).
"""
import os
import re
import subprocess
import tempfile

from deploy_util import COMPOSE, ROOT, check

DOCKERFILE = os.path.join(ROOT, "Dockerfile")
SCRIPTS = [os.path.join(ROOT, "deploy", "image", n) for n in
           ("entrypoint.sh", "healthcheck.sh", "build.sh", "runtime-packages.sh")]


def instructions(text):
    """(line number, INSTRUCTION, arguments) with continuations joined."""
    out, buf, start = [], "", 0
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not buf and (not s or s.startswith("#")):
            continue
        if not buf:
            start = i
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        buf += s
        word, _, rest = buf.partition(" ")
        out.append((start, word.upper(), rest.strip()))
        buf = ""
    return out


def problems(text):
    ins = instructions(text)
    bad = []
    args = {}
    stages = set()
    for n, word, rest in ins:
        if word == "ARG" and "=" in rest:
            k, _, v = rest.partition("=")
            args[k] = v
        if word == "FROM":
            parts = rest.split()
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), ""), parts[0])
            if ":" not in image.split("/")[-1] and "@" not in image:
                bad.append("%d: FROM %s has no tag [DL3006]" % (n, image))
            elif image.endswith(":latest"):
                bad.append("%d: FROM %s uses latest [DL3007]" % (n, image))
            if len(parts) == 3 and parts[1].upper() == "AS":
                stages.add(parts[2])
        if word == "RUN":
            if re.search(r"(^|[;&|]\s*)cd\s", rest):
                bad.append("%d: RUN cd: use WORKDIR [DL3003]" % n)
            for m in re.finditer(r"apt-get\s+install[^;&|]*", rest):
                if "--no-install-recommends" not in m.group(0):
                    bad.append("%d: apt-get install without --no-install-recommends [DL3015]" % n)
                if not re.search(r"\s-y\b|--yes|--assume-yes", m.group(0)):
                    bad.append("%d: apt-get install without -y [DL3014]" % n)
            if "apt-get update" in rest and "rm -rf /var/lib/apt/lists" not in rest:
                bad.append("%d: apt lists kept in the layer [DL3009]" % n)
            if re.search(r"(?<![|])\|(?![|])", rest) and "pipefail" not in rest:
                bad.append("%d: a pipe without pipefail [DL4006]" % n)
        if word == "ADD" and not re.search(r"https?://|\.tar", rest):
            bad.append("%d: ADD of local files: use COPY [DL3020]" % n)
        if word == "COPY" and "--from=" not in rest:
            for src in rest.split()[:-1]:
                if not src.startswith("--") and not os.path.exists(os.path.join(ROOT, src)):
                    bad.append("%d: COPY %s: no such file in the repository" % (n, src))
        if word in ("CMD", "ENTRYPOINT") and not rest.startswith("["):
            bad.append("%d: %s in shell form [DL3025]" % (n, word))
    final = [i for i in ins if i[1] == "FROM"][-1][0]
    users = [r for n, w, r in ins if w == "USER" and n > final]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        bad.append("the final stage runs as root [DL3002]")
    for w in ("HEALTHCHECK", "ENTRYPOINT", "EXPOSE"):
        if not any(x[1] == w and x[0] > final for x in ins):
            bad.append("the final stage has no %s" % w)
    expose = " ".join(r for n, w, r in ins if w == "EXPOSE")
    for port in ("9092", "9093", "9644"):
        if port not in expose.split():
            bad.append("port %s is not exposed" % port)
    return bad, ins


good = open(DOCKERFILE).read()
planted = {
    "untagged base": ("ARG BASE_IMAGE=debian:bookworm-slim", "ARG BASE_IMAGE=debian", "DL3006"),
    "root at the end": ("USER 10001:10001", "USER root", "DL3002"),
    "recommends": ("apt-get install -y -qq --no-install-recommends \\\n      ca-",
                   "apt-get install -y -qq \\\n      ca-", "DL3015"),
    "apt lists kept": (" && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages", "", "DL3009"),
    "shell-form CMD": ('CMD ["stratad"]', "CMD stratad", "DL3025"),
    "missing COPY source": ("deploy/image/healthcheck.sh", "deploy/image/healthcheck-gone.sh", "no such file"),
    "pipe": ("objcopy --strip-debug /build/bin/strata /out/strata",
             "objcopy --strip-debug /build/bin/strata /out/strata | cat", "DL4006"),
    "cd": (" && mkdir -p /out \\", " && cd /out \\", "DL3003"),
    "admin port": ("EXPOSE 9092 9093 9644", "EXPOSE 9092 9093", "9644"),
}
for what, (old, new, needle) in planted.items():
    check(old in good, "planted %s: %r is not in the Dockerfile" % (what, old))
    bad, _ = problems(good.replace(old, new, 1))
    check(any(needle in b for b in bad), "the lint missed a planted %s: %r" % (what, bad))
print("ok: the Dockerfile rules reject %d planted faults" % len(planted))

bad, ins = problems(good)
check(not bad, "Dockerfile:\n  " + "\n  ".join(bad))
print("ok: Dockerfile: %d instructions, no rule broken" % len(ins))

# shellcheck: the scripts, and each RUN's shell (sh, as the builder runs it)
p = subprocess.run(["shellcheck", "-x"] + SCRIPTS, capture_output=True, text=True)
check(p.returncode == 0, "shellcheck on the image's scripts:\n" + p.stdout + p.stderr)
with tempfile.TemporaryDirectory() as d:
    runs = []
    for n, w, rest in ins:
        if w == "RUN":
            path = os.path.join(d, "run-line-%d.sh" % n)
            with open(path, "w") as f:
                f.write("#!/bin/sh\n" + rest + "\n")
            runs.append(path)
    p = subprocess.run(["shellcheck", "-s", "sh"] + runs, capture_output=True, text=True)
    check(p.returncode == 0, "shellcheck on the Dockerfile's RUN lines:\n" + p.stdout + p.stderr)
    bad_run = os.path.join(d, "planted.sh")
    with open(bad_run, "w") as f:
        f.write("#!/bin/sh\napt-get install $(cat /tmp/list)\n")
    p = subprocess.run(["shellcheck", "-s", "sh", bad_run], capture_output=True, text=True)
    check(p.returncode != 0 and "SC2046" in p.stdout, "shellcheck let a planted SC2046 pass")
print("ok: shellcheck: %d scripts and %d RUN lines clean (a planted unquoted $(...) is caught)"
      % (len(SCRIPTS), len(runs)))

# yamllint on the compose file
conf = "{extends: default, rules: {line-length: {max: 120}, document-start: disable}}"
p = subprocess.run(["yamllint", "-s", "-d", conf, COMPOSE], capture_output=True, text=True)
check(p.returncode == 0, "yamllint:\n" + p.stdout + p.stderr)
p = subprocess.run(["yamllint", "-s", "-d", conf, "-"], input=open(COMPOSE).read() + "  bad:  [1,2\n",
                   capture_output=True, text=True)
check(p.returncode != 0, "yamllint accepted a planted syntax error")
print("ok: yamllint: %s clean (a planted error is caught)" % os.path.relpath(COMPOSE, ROOT))
print("deploy.lint: all checks passed")

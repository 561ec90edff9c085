"""
deploy.entrypoint: strata-entrypoint's mapping of STRATA_* variables and a
mounted properties file onto stratad's settings, through its print-config,
write-config, key-name and env-name commands, with only the environment
each case gives it.  stratad of this build is on PATH: the entry point
checks every key against `stratad --print-config-doc`.
"""
import atexit
import os
import shutil
import stat
import subprocess
import tempfile

from deploy_util import BIN, check, entrypoint, parse_props

tmp = tempfile.mkdtemp(prefix="strata-entrypoint-")
atexit.register(shutil.rmtree, tmp, True)


def config(env, what):
    rc, out, err = entrypoint(["print-config"], env)
    check(rc == 0, "%s: print-config exited %d: %s" % (what, rc, err))
    return out, parse_props(out)


def refused(args, env, needle, what):
    rc, out, err = entrypoint(args, env)
    check(rc == 2, "%s: exit %d, expected 2 (stdout %r, stderr %r)" % (what, rc, out, err))
    check(needle in err, "%s: stderr %r does not say %r" % (what, err, needle))
    print("ok: %s refused: %s" % (what, err.strip()))


# 1. the image's defaults alone
_, p = config({}, "defaults")
check(p == {"listeners": "PLAINTEXT://:9092", "log.dirs": "/var/lib/strata/logs",
            "remote.log.cache.dir": "/var/lib/strata/cache",
            "objectstore.file.root": "/var/lib/strata/bucket"}, "defaults: %r" % p)
print("ok: defaults %s" % sorted(p))

# 2. variables to keys: prefix dropped, lower case, '_' -> '.'; values verbatim
env = {
    "STRATA_LOG_DIRS": "/data/a,/data/b",
    "STRATA_NODE_ID": "7",
    "STRATA_CONTROLLER_QUORUM_VOTERS": "1@n1:9093,2@n2:9093,3@n3:9093",
    "STRATA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "STRATA_LOGGER_LEVEL": "DEBUG",
    "STRATA_OBJECTSTORE_S3_PREFIX": "a=b/ c",          # '=' and a space inside
    "STRATA_REMOTE_LOG_STORAGE_SYSTEM_ENABLE": "true",
    "STRATA_CONFIG_OUT": os.path.join(tmp, "unused.properties"),  # the script's own
    "OTHER_VARIABLE": "x",
    "STRATAFOO": "not ours",
}
text, p = config(env, "variables")
want = {"log.dirs": "/data/a,/data/b", "node.id": "7",
        "controller.quorum.voters": "1@n1:9093,2@n2:9093,3@n3:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "logger.level": "DEBUG", "objectstore.s3.prefix": "a=b/ c",
        "remote.log.storage.system.enable": "true"}
for k, v in want.items():
    check(p.get(k) == v, "variables: %s = %r, expected %r\n%s" % (k, p.get(k), v, text))
check("config.out" not in p, "STRATA_CONFIG_OUT was taken for a setting:\n" + text)
check(not any(k.startswith(("other", "foo")) for k in p), "a foreign variable was mapped:\n" + text)
check("# STRATA_LOG_DIRS\nlog.dirs=/data/a,/data/b\n" in text, "the origin comment is missing:\n" + text)
print("ok: %d variables mapped, others left alone" % len(want))

# 3. a mounted file over the defaults, variables over the file
props = os.path.join(tmp, "server.properties")
with open(props, "w") as f:
    f.write("# a comment\n! another\n\n  node.id = 3  \nlog.dirs=/from/file\n"
            "num.partitions=6\nlog.retention.ms=1000\n")
text, p = config({"STRATA_CONFIG_FILE": props, "STRATA_LOG_RETENTION_MS": "2000"}, "layers")
check(p["node.id"] == "3" and p["log.dirs"] == "/from/file" and p["num.partitions"] == "6",
      "layers: the file's values: %r" % p)
check(p["log.retention.ms"] == "2000", "layers: the variable did not win over the file: %r" % p)
check(p["listeners"] == "PLAINTEXT://:9092", "layers: a default the file does not set is lost")
check("# %s:4\nnode.id=3" % props in text, "layers: the file's line is not named:\n" + text)
check(list(p).count("log.retention.ms") == 1 and text.count("log.retention.ms=") == 1,
      "layers: a key written twice:\n" + text)
print("ok: defaults < file < variables")

# 4. write-config: the real secret in a 0600 file; print-config masks it
out = os.path.join(tmp, "run", "server.properties")
secret_env = {"STRATA_OBJECTSTORE_S3_SECRET_KEY": "s3cr3t-value",
              "STRATA_OBJECTSTORE_S3_ACCESS_KEY": "AKIDEXAMPLE",
              "STRATA_OBJECTSTORE_S3_SESSION_TOKEN": "tok-123"}
rc, so, err = entrypoint(["write-config", out], secret_env)
check(rc == 0 and so.strip() == out, "write-config: rc %d, %r %r" % (rc, so, err))
written = parse_props(open(out).read())
check(written["objectstore.s3.secret.key"] == "s3cr3t-value", "write-config: %r" % written)
mode = stat.S_IMODE(os.stat(out).st_mode)
check(mode == 0o600, "write-config: mode %o, expected 600" % mode)
text, p = config(secret_env, "masking")
check("s3cr3t-value" not in text and "tok-123" not in text, "print-config shows a secret:\n" + text)
check(p["objectstore.s3.secret.key"] == "********" and p["objectstore.s3.session.token"] == "********",
      "print-config: %r" % p)
check(p["objectstore.s3.access.key"] == "AKIDEXAMPLE", "the access key id is not a secret")
print("ok: write-config mode %o with the secret; print-config masks it" % mode)

# 5. the name rule both ways: '__' is '_', '___' is '-'
for var, key in [("STRATA_LOG_DIRS", "log.dirs"), ("STRATA_FOO__BAR_BAZ", "foo_bar.baz"),
                 ("STRATA_LISTENER_NAME_SASL__SSL_X___Y", "listener.name.sasl_ssl.x-y"),
                 ("STRATA_A___B__C_D", "a-b_c.d")]:
    rc, so, _ = entrypoint(["key-name", var])
    check(rc == 0 and so.strip() == key, "key-name %s: %r, expected %r" % (var, so, key))
    rc, so, _ = entrypoint(["env-name", key])
    check(rc == 0 and so.strip() == var, "env-name %s: %r, expected %r" % (key, so, var))
doc = subprocess.run([os.path.join(BIN, "stratad"), "--print-config-doc"], capture_output=True,
                     text=True, check=True).stdout
keys = []
for line in doc.split("### Topic settings")[0].splitlines():
    if line.startswith("| `"):
        keys.append(line.split("`")[1])
check(len(keys) > 100, "stratad --print-config-doc: only %d keys" % len(keys))
for k in keys:
    rc, var, _ = entrypoint(["env-name", k])
    rc2, back, _ = entrypoint(["key-name", var.strip()])
    check(rc == 0 and rc2 == 0 and back.strip() == k,
          "%s -> %s -> %s: not the same key" % (k, var.strip(), back.strip()))
print("ok: every one of stratad's %d keys has a variable that maps back to it" % len(keys))

# 6. Kubernetes' service links (a Service named strata, another named
#    strata-headless) are left out, saying so; a real setting is not
links = {"STRATA_PORT": "tcp://10.0.0.1:9092", "STRATA_PORT_9092_TCP": "tcp://10.0.0.1:9092",
         "STRATA_PORT_9092_TCP_PROTO": "tcp", "STRATA_PORT_9092_TCP_PORT": "9092",
         "STRATA_PORT_9092_TCP_ADDR": "10.0.0.1", "STRATA_SERVICE_HOST": "10.0.0.1",
         "STRATA_SERVICE_PORT": "9092", "STRATA_SERVICE_PORT_KAFKA": "9092",
         "STRATA_HEADLESS_SERVICE_HOST": "10.0.0.2", "STRATA_HEADLESS_PORT_9644_TCP": "tcp://10.0.0.2:9644",
         "STRATA_NODE_ID": "3"}
rc, out, err = entrypoint(["print-config"], links)
check(rc == 0, "service links: exit %d: %s" % (rc, err))
p = parse_props(out)
check(p["node.id"] == "3" and not any("port" in k or "service" in k for k in p), "service links: %r" % p)
check(err.count("a Kubernetes service link") == len(links) - 1, "service links: stderr %r" % err)
print("ok: %d Kubernetes service link variables left out, named on stderr" % (len(links) - 1))

# 7. bad input, each named
refused(["print-config"], {"STRATA_LOG_DIR": "/x"}, "STRATA_LOG_DIR: 'log.dir' is not a stratad setting",
        "a misspelt variable")
refused(["print-config"], {"STRATA_RETENTION_MS": "1"}, "'retention.ms' is not a stratad setting",
        "a topic setting")
refused(["print-config"], {"STRATA_NODE_ID": "1\nlog.dirs=/etc"}, "STRATA_NODE_ID: a value may not span lines",
        "a value with a newline")
refused(["print-config"], {"STRATA_log_dirs": "/x"}, "STRATA_log_dirs: not a setting's name",
        "a lower-case variable")
bad = os.path.join(tmp, "bad.properties")
with open(bad, "w") as f:
    f.write("node.id=1\nthis line has no equals sign\n")
refused(["print-config"], {"STRATA_CONFIG_FILE": bad}, bad + ":2: expected key=value", "a file line without '='")
with open(bad, "w") as f:
    f.write("node.id=1\nlog.dirz=/x\n")
refused(["print-config"], {"STRATA_CONFIG_FILE": bad}, bad + ":2: 'log.dirz' is not a stratad setting",
        "an unknown key in the file")
refused(["print-config"], {"STRATA_CONFIG_FILE": os.path.join(tmp, "missing")}, "cannot read",
        "a missing file")
rc, out, err = entrypoint(["print-config"], {"PATH": "/usr/bin:/bin"})
check(rc == 2 and "stratad is not on PATH" in err, "no stratad: rc %d %r" % (rc, err))

# 8. any other command is run as it is (strata, kcat, a shell)
rc, out, _ = entrypoint(["strata", "--help"])
check(rc == 0 and "strata" in out.lower(), "strata --help through the entry point: rc %d" % rc)
rc, out, _ = entrypoint(["sh", "-c", "echo through; exit 3"])
check(rc == 3 and out == "through\n", "a command through the entry point: rc %d %r" % (rc, out))
print("ok: other commands run as they are")
print("deploy.entrypoint: all checks passed")

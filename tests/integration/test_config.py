"""
Start-up configuration: an unknown key or a malformed value stops stratad
with a message naming the key; a second broker on the same log.dirs is
refused; SIGINT stops cleanly; the README's configuration reference matches
the descriptor tables.
"""
import os
import signal
import subprocess

from strata_harness import Broker, CONFIG, ROOT, binary, check, fail, free_port, run

stratad = binary("stratad")


def start_fails(args, needle):
    p = subprocess.run([stratad] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    err = p.stderr.decode()
    check(p.returncode != 0, "stratad %r started (exit %d)" % (args, p.returncode))
    check(needle in err, "stratad %r: %r does not mention %r" % (args, err.strip(), needle))


start_fails(["--config", CONFIG, "--override", "no.such.key=1"], "no.such.key")
start_fails(["--config", CONFIG, "--override", "log.segment.bytes=lots"], "log.segment.bytes")
start_fails(["--config", CONFIG, "--override", "num.partitions=0"], "num.partitions")
start_fails(["--config", CONFIG, "--override", "log.message.timestamp.type=Sometimes"],
            "log.message.timestamp.type")
start_fails(["--config", CONFIG, "--override", "listeners=nonsense"], "listeners")
start_fails(["--config", "/nonexistent/server.properties"], "/nonexistent/server.properties")

b = Broker().start()
try:
    second = Broker(root=b.root)
    p = subprocess.run(second.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check(p.returncode != 0 and b"locked" in p.stderr,
          "a second broker on the same log.dirs: exit %d, %r" % (p.returncode, p.stderr))
    check(b.alive(), "the first broker died")
    rc = b.stop(signal.SIGINT)
    check(rc == 0, "SIGINT: exit status %s" % rc)
    check(os.path.exists(os.path.join(b.logdir, ".strata-clean-shutdown")), "no clean-shutdown marker")
    check("stopped cleanly" in b.log_text(), "no 'stopped cleanly' line")
    b.start()
    check("not clean" not in b.log_text().split("==== start 1")[1], "clean stop was treated as unclean")
finally:
    b.stop()
    b.cleanup()

# A log dir stratad may not write in is said to be that, not "locked":
# a read-only mount (root can mount one) and a directory without write
# permission for the user stratad runs as.
ro = Broker()
try:
    os.makedirs(ro.logdir)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro.logdir],
                      stderr=subprocess.DEVNULL).returncode == 0:
        try:
            p = subprocess.run(ro.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            err = p.stderr.decode()
            check(p.returncode != 0 and "read-only file system" in err.lower() and "locked" not in err,
                  "a read-only log dir: exit %d, %r" % (p.returncode, err.strip()))
        finally:
            subprocess.run(["umount", ro.logdir])
    else:
        print("note: cannot mount a tmpfs here; the read-only mount case is not tried")
    os.chmod(ro.logdir, 0o555)
    as_other = None
    if os.getuid() == 0:
        def as_other():
            os.setgid(65534)
            os.setuid(65534)
    os.chmod(ro.root, 0o755)
    try:
        p = subprocess.run(ro.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30, preexec_fn=as_other)
    except PermissionError:
        p = None  # the other user may not run the binary from where it lies
        print("note: stratad cannot run as another user here; the permission case is not tried")
    if p:
        err = p.stderr.decode()
        check(p.returncode != 0 and "permission denied" in err.lower() and "locked" not in err,
              "a log dir without write permission: exit %d, %r" % (p.returncode, err.strip()))
finally:
    ro.cleanup()

# The cluster settings (broker/server/cluster.c; every shape is in
# unit_cluster_config): a few refusals as a user meets them at start-up.
start_fails(["--config", CONFIG, "--override", "process.roles=brokr"],
            "process.roles: 'brokr' is not broker or controller")
start_fails(["--config", CONFIG, "--override", "controller.quorum.voters=1@localhost"],
            "controller.quorum.voters: voter 1: 'localhost' is not host:port")
# the security settings (broker/security, integration.security): an SSL
# listener without a keystore, one whose file is missing, TLS 1.1, a SASL
# listener (the only one, so the brokers' own) without the broker's login
start_fails(["--config", CONFIG, "--override", "listeners=SSL://127.0.0.1:0"],
            "listener SSL: ssl.keystore.location: an SSL listener needs a keystore")
start_fails(["--config", CONFIG, "--override", "listeners=SSL://127.0.0.1:0",
             "--override", "ssl.keystore.location=/nonexistent/broker.pem"],
            "ssl.keystore.location: cannot read /nonexistent/broker.pem")
start_fails(["--config", CONFIG, "--override", "ssl.enabled.protocols=TLSv1.1,TLSv1.2"],
            "TLSv1.1 is not allowed (TLSv1.2 and TLSv1.3 only)")
start_fails(["--config", CONFIG, "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
             "--override", "sasl.enabled.mechanisms=PLAIN"],
            "listener.name.sasl_plaintext.plain.sasl.jaas.config: this broker reaches listener "
            "SASL_PLAINTEXT with SASL PLAIN and needs its username and password")
start_fails(["--config", CONFIG, "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0"],
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config: this broker reaches "
            "listener SASL_PLAINTEXT with SASL SCRAM-SHA-256 and needs its username and password")
start_fails(["--config", CONFIG, "--override", "listener.name.x.log.dirs=/tmp"],
            "listener.name.x.log.dirs: unknown configuration key")
start_fails(["--config", CONFIG, "--override", "ssl.key.password=${env:STRATA_TEST_UNSET_VAR}",
             "--override", "config.providers=env", "--override",
             "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider"],
            "ssl.key.password: ${env:...} cannot be resolved: the environment has no such variable")
# A broker-only node whose node.id is a voter (integration.cluster_roles
# runs broker-only and controller-only nodes).
start_fails(["--config", CONFIG, "--override", "process.roles=broker", "--override", "node.id=1",
             "--override", "controller.quorum.voters=1@127.0.0.1:19093",
             "--override", "controller.listener.names=CONTROLLER", "--override",
             "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"],
            "node.id 1 is a voter, so process.roles must include controller")

# cluster.id is fixed at first start (meta.properties); broker.rack and
# the controller listener reach clients as Kafka gives them: the rack in
# DescribeCluster, the controller listener never.
import kwire  # noqa: E402

cport = free_port()
b = Broker({"cluster.id": "MkU3OEVBNTcwNTJENDM2Qk", "broker.rack": "rack-a",
            "controller.quorum.voters": "1@127.0.0.1:%d" % cport,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"})
b.overrides["listeners"] = "PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (b.port, cport)
try:
    b.start()
    conn = kwire.Conn(b.port)
    err, cid, controller, brokers = kwire.describe_cluster(conn)
    conn.close()
    check(err == 0 and cid == "MkU3OEVBNTcwNTJENDM2Qk",
          "DescribeCluster: error %d, cluster id %r" % (err, cid))
    check(controller == 1, "DescribeCluster: controller %d" % controller)
    check(brokers == [(1, "127.0.0.1", b.port, "rack-a")],
          "DescribeCluster names %r (the controller listener must not be given)" % (brokers,))
    meta = open(os.path.join(b.logdir, "meta.properties")).read()
    check("cluster.id=MkU3OEVBNTcwNTJENDM2Qk" in meta, "meta.properties: %r" % meta)
    b.stop()
    b.overrides["cluster.id"] = "another-cluster"
    p = subprocess.run(b.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    err = p.stderr.decode()
    check(p.returncode != 0 and "belongs to cluster MkU3OEVBNTcwNTJENDM2Qk, but cluster.id is "
          "another-cluster" in err, "another cluster.id: exit %d, %r" % (p.returncode, err.strip()))
    # with no cluster.id it keeps the one it has
    del b.overrides["cluster.id"]
    b.start()
    conn = kwire.Conn(b.port)
    check(kwire.describe_cluster(conn)[1] == "MkU3OEVBNTcwNTJENDM2Qk", "cluster id changed")
    conn.close()
finally:
    b.stop()
    b.cleanup()

# Listeners by name: each client is given the addresses of the listener it
# came in on; inter.broker.listener.name must name an advertised listener.
start_fails(["--config", CONFIG, "--override", "inter.broker.listener.name=NOPE"],
            "inter.broker.listener.name: NOPE is not an advertised listener")
p2 = free_port()
b = Broker({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL"})
b.overrides["listeners"] = "PLAINTEXT://127.0.0.1:%d,INTERNAL://127.0.0.1:%d" % (b.port, p2)
b.overrides["advertised.listeners"] = "PLAINTEXT://localhost:%d,INTERNAL://127.0.0.1:%d" % (b.port, p2)
try:
    b.start()
    for port, want in ((b.port, ("localhost", b.port)), (p2, ("127.0.0.1", p2))):
        conn = kwire.Conn(port)
        got = kwire.describe_cluster(conn)[3]
        brokers = kwire.metadata(conn, [])["brokers"]
        conn.close()
        check([x[1:3] for x in got] == [want], "DescribeCluster through port %d names %r, want %r" % (port, got, want))
        check({k: v[:2] for k, v in brokers.items()} == {1: want},
              "Metadata through port %d names %r, want %r" % (port, brokers, want))
finally:
    b.stop()
    b.cleanup()

_, doc, _ = run([stratad, "--print-config-doc"])
readme = open(os.path.join(ROOT, "README.md")).read()
begin, end = "<!-- config-reference:begin -->\n", "<!-- config-reference:end -->\n"
section = readme[readme.index(begin) + len(begin):readme.index(end)]
if section != doc.decode():
    fail("README's configuration reference is stale: run scripts/gen-docs.sh")
print("ok: bad settings refused by name, lock enforced, clean stop, README reference current")

"""integration.security.cluster: three combined nodes whose inter-broker and
controller traffic goes over SASL_SSL (SCRAM for the brokers' replication,
PLAIN on the controller listener), with the authorizer on and the brokers'
own principal the only super user.

Each node has an EXTERNAL listener (PLAINTEXT, for the harness's readiness
probe; its ANONYMOUS principal is given only what the test binds), INTERNAL
(SASL_SSL, inter.broker.listener.name) and CONTROLLER (SASL_SSL).  The
broker user's SCRAM credential is made through the quorum once it runs (the
quorum itself authenticates with PLAIN, which needs no metadata), before the
first topic, so the fetchers' SCRAM logins find it.

Shown: the quorum elects over SASL_SSL (strata cluster status over SASL_SSL);
a topic with replication factor 3 gets every replica in sync through
replication on INTERNAL; acks=all writes are acknowledged and read back
from every node; a node killed and restarted rejoins the ISR; the broker logs
show the brokers authenticated on INTERNAL and CONTROLLER; a client without
credentials cannot fetch as a follower (CLUSTER_AUTHORIZATION_FAILED).
"""
import os
import shutil
import struct
import subprocess
import tempfile
import time

from strata_harness import (CONFIG, Broker, binary, check, free_port, kstr, read_frame, request,
                            run, wait_for)

tmp = tempfile.mkdtemp(prefix="strata-secc-")


def openssl(*args):
    run(["openssl"] + list(args), timeout=60)


ca_key, ca = os.path.join(tmp, "ca.key"), os.path.join(tmp, "ca.pem")
openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
        "-subj", "/CN=Strata Cluster CA")
key, csr, crt = (os.path.join(tmp, "node" + s) for s in (".key", ".csr", ".crt"))
openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
with open(os.path.join(tmp, "ext"), "w") as f:
    f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
        "-days", "2", "-extfile", os.path.join(tmp, "ext"))
keystore = os.path.join(tmp, "node.pem")
with open(keystore, "w") as f:
    f.write(open(key).read() + open(crt).read())

ids = [1, 2, 3]
ports = {i: {"EXTERNAL": free_port(), "INTERNAL": free_port(), "CONTROLLER": free_port()} for i in ids}
voters = ",".join("%d@127.0.0.1:%d" % (i, ports[i]["CONTROLLER"]) for i in ids)
plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"broker\" "
         "password=\"broker-pw\" user_broker=\"broker-pw\" user_ops=\"ops-pw\";")
scram = ("org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" "
         "password=\"broker-scram-pw\";")
common = {
    "process.roles": "broker,controller",
    "controller.quorum.voters": voters,
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "INTERNAL",
    "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
    "cluster.id": "strata-secure-cluster",
    "ssl.keystore.location": keystore,
    "ssl.truststore.location": ca,
    "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.controller.plain.sasl.jaas.config": plain,
    # INTERNAL takes SCRAM from the brokers and PLAIN from the test's admin
    "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
    "listener.name.internal.plain.sasl.jaas.config": plain,
    "listener.name.internal.scram-sha-512.sasl.jaas.config": scram,
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:broker",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "replica.lag.time.max.ms": "5000",
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "500",
}
nodes = {}
for i in ids:
    ov = dict(common)
    ov.update({
        "node.id": str(i),
        "listeners": "EXTERNAL://127.0.0.1:%d,INTERNAL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d"
                     % (ports[i]["EXTERNAL"], ports[i]["INTERNAL"], ports[i]["CONTROLLER"]),
        "advertised.listeners": "EXTERNAL://127.0.0.1:%d,INTERNAL://127.0.0.1:%d"
                                % (ports[i]["EXTERNAL"], ports[i]["INTERNAL"]),
    })
    nodes[i] = Broker(overrides=ov, port=ports[i]["EXTERNAL"])

admin_props = os.path.join(tmp, "admin.properties")
with open(admin_props, "w") as f:
    f.write("security.protocol=SASL_SSL\nssl.truststore.location=%s\nsasl.mechanism=PLAIN\n"
            "sasl.username=broker\nsasl.password=broker-pw\n" % ca)


def strata(*args, check_rc=True, node=1):
    return run([binary("strata"), args[0], "--config", CONFIG, "--bootstrap",
                "127.0.0.1:%d" % ports[node]["INTERNAL"], "--command-config", admin_props]
               + list(args[1:]), check_rc=check_rc, timeout=60)


def kcat_internal(node, *args, input=None, check_rc=True):
    cmd = ["kcat", "-b", "127.0.0.1:%d" % ports[node]["INTERNAL"], "-X", "security.protocol=SASL_SSL",
           "-X", "ssl.ca.location=" + ca, "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=broker",
           "-X", "sasl.password=broker-pw"]
    return run(cmd + list(args), input=input, check_rc=check_rc, timeout=60)


try:
    for i in ids:
        nodes[i].start(wait=False)
    for i in ids:
        nodes[i].wait_ready(60)
    # the quorum, over SASL_SSL on CONTROLLER
    deadline = time.time() + 60
    while True:
        rc, out, err = strata("cluster", "status", check_rc=False)
        if rc == 0 and "leader" in out.decode().lower():
            break
        check(time.time() < deadline, "no quorum over SASL_SSL: %s %s" % (out, err))
        time.sleep(0.5)
    print(out.decode())

    def brokers():
        import json
        rc, out, _ = kcat_internal(1, "-L", "-J", check_rc=False)
        return len(json.loads(out.decode())["brokers"]) if rc == 0 else 0

    wait_for(lambda: brokers() == 3, timeout=60, what="three brokers registered over SASL_SSL")
    # the brokers' SCRAM credential, through the quorum
    strata("users", "add", "broker", "--mechanism", "SCRAM-SHA-512", "--password", "broker-scram-pw")
    strata("topics", "create", "secure-repl", "--partitions", "3", "--replication-factor", "3")

    def all_in_sync():
        import json
        rc, out, _ = kcat_internal(1, "-L", "-J", "-t", "secure-repl", check_rc=False)
        if rc:
            return False
        t = [x for x in json.loads(out.decode())["topics"] if x["topic"] == "secure-repl"]
        parts = t[0]["partitions"] if t else []
        return len(parts) == 3 and all(len(p["isrs"]) == 3 and p["leader"] >= 0 for p in parts)

    wait_for(all_in_sync, timeout=60, what="every replica of secure-repl in sync over SASL_SSL")
    lines = "".join("r-%d\n" % k for k in range(3000)).encode()
    kcat_internal(1, "-P", "-t", "secure-repl", "-X", "acks=all", "-X", "enable.idempotence=true",
                  input=lines)
    for i in ids:
        rc, out, _ = kcat_internal(i, "-C", "-t", "secure-repl", "-e", "-q", "-f", "%s\n")
        check(sorted(out.decode().split()) == sorted(lines.decode().split()),
              "node %d read %d of 3000" % (i, len(out.decode().split())))
    print("3000 records acks=all on a replication factor 3 topic, read back through each node")

    # a node killed and started again rejoins every ISR
    nodes[3].kill()
    time.sleep(1)
    kcat_internal(1, "-P", "-t", "secure-repl", "-X", "acks=all", input=b"after-kill\n")
    nodes[3].start(wait=True, timeout=60)
    wait_for(all_in_sync, timeout=90, what="node 3 back in every ISR over SASL_SSL")
    print("node 3 killed, written past, restarted: back in every ISR")

    logs = {i: nodes[i].log_text() for i in ids}
    for i in ids:
        check("with SCRAM-SHA-512 as User:broker" in logs[i],
              "node %d: no broker authenticated with SCRAM on INTERNAL" % i)
        check("with PLAIN as User:broker" in logs[i], "node %d: no PLAIN login on CONTROLLER" % i)
        for secret in ["broker-pw", "broker-scram-pw", "ops-pw"]:
            check(secret not in logs[i], "node %d's log shows a secret" % i)

    # a client without credentials is not a follower: Fetch v7 (the first
    # with a top-level error) as replica 2 on the PLAINTEXT listener
    import socket
    s = socket.create_connection(("127.0.0.1", ports[1]["EXTERNAL"]), timeout=10)
    body = struct.pack(">iiiib", 2, 0, 1, 1 << 20, 0) + struct.pack(">ii", 0, -1) + \
        struct.pack(">i", 0) + struct.pack(">i", 0)
    s.sendall(request(1, 7, 10, body))
    r = read_frame(s)
    s.close()
    (err_code,) = struct.unpack(">h", r[8:10])
    check(err_code == 31, "an anonymous follower fetch answered %d, not CLUSTER_AUTHORIZATION_FAILED" % err_code)
    print("the brokers authenticated on INTERNAL (SCRAM-SHA-512) and CONTROLLER (PLAIN); an anonymous "
          "follower fetch: CLUSTER_AUTHORIZATION_FAILED; no secret in any log")
    for i in ids:
        check(nodes[i].stop() == 0, "node %d did not stop cleanly" % i)
    print("integration.security.cluster: ok")
except Exception as e:
    for i in ids:
        nodes[i].explain_failure(e)
    raise
finally:
    for i in ids:
        nodes[i].stop()
        nodes[i].cleanup()
    shutil.rmtree(tmp, ignore_errors=True)

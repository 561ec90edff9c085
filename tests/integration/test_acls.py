"""integration.acls: the authorizer with real clients.

A broker with authorizer.class.name=StandardAuthorizer, super.users=User:admin,
allow.everyone.if.no.acl.found=false, and a SASL_PLAINTEXT listener with
PLAIN users admin, alice, bob, carol (the harness's PLAINTEXT listener is
User:ANONYMOUS, who is given nothing).  Bindings are made with
`strata acls add` as admin:

  alice  READ topic orders, READ group alice-g
  bob    WRITE topics prefixed logs-
  carol  ALL on every topic (literal *), DENY READ on payments

and checked with kcat and a librdkafka group member, with Kafka's error
codes: alice consumes orders as alice-g and nothing else, cannot produce to
it, sees only orders in Metadata, cannot join another group; bob's prefix
covers a topic made after the binding; carol's DENY beats her ALLOW; admin
does anything; ANONYMOUS sees no topic; a non-super user cannot make
bindings (CLUSTER_AUTHORIZATION_FAILED); the bindings survive a restart
and a removed one stops allowing.  A broker without an authorizer answers
the ACL APIs SECURITY_DISABLED.
"""
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time

from strata_harness import (CONFIG, Broker, binary, check, free_port, kstr, read_frame, request,
                            run, spawn)

tmp = tempfile.mkdtemp(prefix="strata-acl-")
sasl_port = free_port()
users = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required " +
        " ".join('user_%s="%s"' % kv for kv in users.items()) + ";")
b = None
b = Broker(overrides={
    "listeners": None,  # set below, with the harness's port first
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "allow.everyone.if.no.acl.found": "false",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
})
b.overrides["listeners"] = "PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d" % (b.port, sasl_port)
b.start()


def props(user):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": users[user]}


def client_file(user):
    path = os.path.join(tmp, user + ".properties")
    with open(path, "w") as f:
        f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=%s\n"
                "sasl.password=%s\n" % (user, users[user]))
    return path


def strata(user, *args, check_rc=True):
    return run([binary("strata"), args[0], "--config", CONFIG, "--bootstrap", "127.0.0.1:%d" % sasl_port,
                "--command-config", client_file(user)] + list(args[1:]), check_rc=check_rc)


def kcat_as(user, *args, input=None, check_rc=True, timeout=60):
    cmd = ["kcat", "-b", "127.0.0.1:%d" % sasl_port]
    for k, v in props(user).items():
        cmd += ["-X", "%s=%s" % (k, v)]
    return run(cmd + list(args), input=input, check_rc=check_rc, timeout=timeout)


def produce(user, topic, n):
    lines = "".join("%s-%d\n" % (user, i) for i in range(n)).encode()
    return kcat_as(user, "-P", "-t", topic, "-X", "message.timeout.ms=5000", input=lines, check_rc=False)


def consume(user, topic):
    rc, out, err = kcat_as(user, "-C", "-t", topic, "-e", "-q", "-f", "%s\n", check_rc=False, timeout=30)
    return rc, out.decode().split(), err


def topics_seen(user):
    rc, out, err = kcat_as(user, "-L", "-J", check_rc=False)
    import json
    return sorted(t["topic"] for t in json.loads(out.decode())["topics"]) if rc == 0 else None


try:
    for t in ["orders", "payments", "logs-a"]:
        strata("admin", "topics", "create", t, "--partitions", "1")
    check(produce("admin", "orders", 20)[0] == 0, "admin produces to orders")
    check(produce("admin", "payments", 10)[0] == 0, "admin produces to payments")

    # a non-super user may not make bindings
    rc, out, err = strata("alice", "acls", "add", "--allow-principal", "User:alice", "--operation",
                          "Read", "--topic", "payments", check_rc=False)
    check(rc != 0 and "CLUSTER_AUTHORIZATION_FAILED" in err, "alice made a binding: %s %s" % (out, err))

    strata("admin", "acls", "add", "--allow-principal", "User:alice", "--operation", "Read",
           "--topic", "orders")
    strata("admin", "acls", "add", "--allow-principal", "User:alice", "--operation", "Read",
           "--group", "alice-g")
    strata("admin", "acls", "add", "--allow-principal", "User:bob", "--operation", "Write",
           "--topic", "logs-", "--resource-pattern-type", "prefixed")
    strata("admin", "acls", "add", "--allow-principal", "User:carol", "--operation", "All",
           "--topic", "*")
    strata("admin", "acls", "add", "--deny-principal", "User:carol", "--operation", "Read",
           "--topic", "payments")
    rc, out, _ = strata("admin", "acls", "list")
    listing = out.decode()
    print(listing)
    check(listing.count("\n") == 6, "5 bindings listed")

    # FindCoordinator by ANONYMOUS (the PLAINTEXT listener), which may not
    # DESCRIBE the group: GROUP_AUTHORIZATION_FAILED (30), and the first
    # one does not make __consumer_offsets for it
    import socket
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    s.sendall(request(10, 1, 8, kstr("alice-g") + struct.pack(">b", 0)))
    r = read_frame(s)
    s.close()
    err_code = struct.unpack(">h", r[8:10])[0]  # correlation, throttle, error
    check(err_code == 30, "ANONYMOUS FindCoordinator answered %d, not GROUP_AUTHORIZATION_FAILED (30)"
          % err_code)
    seen = topics_seen("admin")
    check("__consumer_offsets" not in seen, "a refused FindCoordinator made __consumer_offsets: %s" % seen)
    print("ANONYMOUS FindCoordinator: GROUP_AUTHORIZATION_FAILED, no __consumer_offsets made for it")

    # alice: orders only, reading only
    rc, got, err = consume("alice", "orders")
    check(rc == 0 and len(got) == 20, "alice read %d of orders' 20 (%s)" % (len(got), err[-200:]))
    rc, _, err = produce("alice", "orders", 1)
    check(rc != 0 and "Topic authorization failed" in err, "alice's produce: %d %s" % (rc, err[-300:]))
    rc, got, err = consume("alice", "payments")
    check("Topic authorization failed" in err, "alice read payments: %s" % err[-300:])
    seen = topics_seen("alice")
    check(seen == ["orders"], "alice sees %s in Metadata" % seen)
    print("alice: reads orders (20), produce refused (TOPIC_AUTHORIZATION_FAILED), payments refused, "
          "Metadata shows %s" % seen)

    def group_member(user, group, topic, want):
        cmd = [binary("rdk_group_consumer"), "127.0.0.1:%d" % sasl_port, group, topic]
        for k, v in props(user).items():
            cmd += ["-X", "%s=%s" % (k, v)]
        m = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen, deadline = 0, time.time() + 20
        out = []
        # a refused member prints nothing: wait on the pipe with the deadline
        while seen < want and time.time() < deadline:
            ready, _, _ = select.select([m.stdout], [], [], max(0, deadline - time.time()))
            if not ready:
                break
            line = m.stdout.readline().decode()
            if not line:
                break
            out.append(line)
            seen += line.startswith("MSG ")
        m.terminate()
        try:
            rest, err = m.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            m.kill()
            rest, err = m.communicate()
        return seen, "".join(out) + rest.decode(), err.decode()

    seen, out, err = group_member("alice", "alice-g", "orders", 20)
    check(seen == 20, "alice's group member read %d of 20: %s" % (seen, err[-300:]))
    seen, out, err = group_member("alice", "other-g", "orders", 1)
    check(seen == 0 and "authorization failed" in (out + err).lower(),
          "alice joined other-g: %d %s %s" % (seen, out[-200:], err[-300:]))
    print("alice: group alice-g read 20 and committed; group other-g refused")

    # bob: the prefix covers a topic made after the binding
    strata("admin", "topics", "create", "logs-new", "--partitions", "1")
    check(produce("bob", "logs-new", 5)[0] == 0, "bob writes logs-new")
    check(produce("bob", "logs-a", 5)[0] == 0, "bob writes logs-a")
    rc, _, err = produce("bob", "orders", 1)
    check(rc != 0 and "Topic authorization failed" in err, "bob wrote orders")
    rc, got, err = consume("bob", "logs-new")
    check("Topic authorization failed" in err, "bob read logs-new: %s" % err[-200:])
    print("bob: logs-a and logs-new (made after the binding) written, orders refused, reading refused")

    # carol: DENY READ on payments beats ALL on *
    check(produce("carol", "payments", 3)[0] == 0, "carol writes payments")
    rc, got, err = consume("carol", "payments")
    check("Topic authorization failed" in err, "carol read payments: %s" % err[-200:])
    rc, got, err = consume("carol", "orders")
    check(rc == 0 and len(got) == 20, "carol reads orders")
    print("carol: writes payments, reading it denied (DENY over ALLOW), reads orders")

    # a topic with an id of one's choosing (strata topics restore's
    # strata.restore.* configs) needs ALTER on the cluster: carol may
    # create topics (ALL on *) but not that; admin may
    import base64
    rid = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
    rc, _, err = strata("carol", "topics", "create", "restored", "--config",
                        "strata.restore.topic.id=" + rid, check_rc=False)
    check(rc != 0 and "CLUSTER_AUTHORIZATION_FAILED" in err,
          "carol created a topic with the id she chose: %d %s" % (rc, err[-300:]))
    check("restored" not in topics_seen("admin"), "carol's refused topic exists")
    strata("admin", "topics", "create", "restored", "--config", "strata.restore.topic.id=" + rid,
           "--config", "strata.restore.leader.epoch=7")
    rc, out, _ = strata("admin", "topics", "describe", "restored")
    check("TopicId: %s" % rid in out.decode() and "strata.restore" not in out.decode(),
          "the restored topic: " + out.decode()[:400])
    rc, _, err = strata("admin", "topics", "create", "restored2", "--config",
                        "strata.restore.topic.id=" + rid, check_rc=False)
    check(rc != 0 and "TOPIC_ALREADY_EXISTS" in err, "a second topic with that id: " + err)
    print("strata.restore.topic.id: carol refused (CLUSTER_AUTHORIZATION_FAILED), admin's topic has "
          "id %s, a second one with it refused (TOPIC_ALREADY_EXISTS)" % rid)

    # admin bypasses; ANONYMOUS (the PLAINTEXT listener) sees nothing
    rc, got, err = consume("admin", "payments")
    check(rc == 0 and len(got) == 13, "admin read %d of payments' 13" % len(got))
    rc, out, err = run(["kcat", "-b", b.bootstrap, "-L", "-J"])
    import json
    check(json.loads(out.decode())["topics"] == [], "ANONYMOUS sees topics")
    rc, _, err = run(["kcat", "-b", b.bootstrap, "-C", "-t", "orders", "-e", "-q"], check_rc=False, timeout=30)
    check("Topic authorization failed" in err, "ANONYMOUS read orders: " + err[-200:])
    print("admin (super user) reads payments; ANONYMOUS sees no topic and reads nothing")

    # raw: Produce v3 by ANONYMOUS answers 29 (TOPIC_AUTHORIZATION_FAILED) on the partition
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    body = kstr(None) + struct.pack(">hi", -1, 5000) + struct.pack(">i", 1) + kstr("orders") + \
        struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 0)
    s.sendall(request(0, 3, 7, body))
    r = read_frame(s)
    s.close()
    # correlation, topics(1), name, partitions(1), index, error
    (n,) = struct.unpack(">h", r[8:10])
    err_code = struct.unpack(">h", r[10 + n + 8:10 + n + 10])[0]
    check(err_code == 29, "raw Produce answered %d, not TOPIC_AUTHORIZATION_FAILED (29)" % err_code)

    # the bindings survive a restart; a removed one stops allowing
    check(b.stop() == 0, "clean stop")
    b.start()
    rc, got, err = consume("alice", "orders")
    check(rc == 0 and len(got) == 20, "after a restart alice reads orders")
    rc, out, _ = strata("admin", "acls", "remove", "--allow-principal", "User:alice", "--operation",
                        "Read", "--topic", "orders")
    check("removed" in out.decode(), "remove: " + out.decode())
    rc, got, err = consume("alice", "orders")
    check("Topic authorization failed" in err, "alice still reads orders after the removal")
    print("restart: bindings kept; removed: alice refused again")

    # no authorizer: SECURITY_DISABLED
    plain = Broker().start()
    try:
        rc, out, err = run([binary("strata"), "acls", "--config", CONFIG, "--bootstrap", plain.bootstrap,
                            "list"], check_rc=False)
        check(rc != 0 and "SECURITY_DISABLED" in err, "no authorizer: %s" % err)
    finally:
        plain.stop()
        plain.cleanup()
    print("without an authorizer: SECURITY_DISABLED")
    check(b.stop() == 0, "stratad exited non-zero")
    print("integration.acls: ok")
except Exception as e:
    if b:
        b.explain_failure(e)
    raise
finally:
    if b:
        b.stop()
        b.cleanup()
    shutil.rmtree(tmp, ignore_errors=True)

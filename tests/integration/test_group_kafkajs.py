"""
kafkajs consumers in one group against a real stratad (js/group_member.js:
commits after processing): the librdkafka group test's story on a smaller
scale: three members on 6 partitions get 2 each; one disconnects, one is
SIGKILLed and the survivor owns all 6 within the session timeout; after a
restart of the consumers every partition resumes at its committed offset,
nothing is skipped and only the killed member's last records may come twice.
"""
import os
import shutil

from group_members import Member, scenario
from kwire import Conn
from strata_harness import HERE, Broker, check, fail, run

TOPIC, GROUP, NPART, PER = "grp-js", "grp-js-group", 6, 150
SESSION_MS = 6000

node = shutil.which("node")
js = os.path.join(HERE, "js")
if not node or not os.path.isdir(os.path.join(js, "node_modules", "kafkajs")):
    fail("node and tests/integration/js/node_modules/kafkajs are required (scripts/test.sh installs them)")
script = os.path.join(js, "group_member.js")

b = Broker({"group.initial.rebalance.delay.ms": "1000"}).start()
try:
    c = Conn(b.port)
    check(c.create_topic(TOPIC, NPART) == 0, "create topic")
    c.close()
    run([node, script, b.bootstrap, "-", TOPIC, "produce", str(NPART * PER), str(NPART)], timeout=120)

    def make(name, delay_ms):
        return Member(name, [node, script, b.bootstrap, GROUP, TOPIC, str(delay_ms), str(SESSION_MS)])

    print(scenario(make, NPART, NPART * PER, SESSION_MS, per_member_before=10), flush=True)
finally:
    rc = b.stop()
    if rc != 0:
        print(b.log_tail(80))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

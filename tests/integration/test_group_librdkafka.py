"""
librdkafka high-level consumers in one group against a real stratad
(clients/rdk_group_consumer.c: synchronous commits after processing).

  1. Three members on a 12-partition topic: each owns 4, none twice.
  2. One leaves cleanly (close: LeaveGroup), one is SIGKILLed: the survivor
     owns all 12 within the session timeout (plus the rebalance).
  3. The survivor stops cleanly; two fresh consumers of the same group
     resume every partition exactly at the committed offset.
  4. Every record was processed (none skipped) and only the killed member's
     last record of a partition may come twice (at-least-once: it died
     between processing and committing); no clean hand-over repeats one.

The story and its checks are in group_members.scenario (shared with the
kafkajs test).
"""
from group_members import Member, scenario
from kwire import Conn
from strata_harness import Broker, binary, check, fail, run

TOPIC, GROUP, NPART, PER = "grp-rdk", "grp-rdk-group", 12, 400
SESSION_MS = 6000

b = Broker({"group.initial.rebalance.delay.ms": "1000"}).start()
try:
    c = Conn(b.port)
    check(c.create_topic(TOPIC, NPART) == 0, "create topic")
    c.close()
    run([binary("rdk_group_consumer"), b.bootstrap, "-", TOPIC, "-P", str(NPART * PER), str(NPART)],
        timeout=120)

    def make(name, delay_ms):
        return Member(name, [binary("rdk_group_consumer"), b.bootstrap, GROUP, TOPIC, "-d", str(delay_ms),
                             "-s", str(SESSION_MS)])

    print(scenario(make, NPART, NPART * PER, SESSION_MS), flush=True)
finally:
    rc = b.stop()
    if rc != 0:
        print(b.log_tail(80))
        fail("stratad did not stop cleanly")
    b.cleanup()
print("ok", flush=True)

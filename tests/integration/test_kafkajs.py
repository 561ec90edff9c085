"""kafkajs against a real stratad (see js/roundtrip.js for what is checked)."""
import os
import shutil

from strata_harness import Broker, HERE, fail, run

node = shutil.which("node")
js = os.path.join(HERE, "js")
if not node or not os.path.isdir(os.path.join(js, "node_modules", "kafkajs")):
    fail("node and tests/integration/js/node_modules/kafkajs are required (scripts/test.sh installs them)")
b = Broker().start()
try:
    rc, out, err = run([node, os.path.join(js, "roundtrip.js"), b.bootstrap], timeout=240, check_rc=False)
    print(out.decode(), err)
    if rc != 0:
        fail("kafkajs test failed; broker log:\n" + b.log_tail())
finally:
    if b.stop() != 0:
        fail("stratad did not stop cleanly")
    b.cleanup()

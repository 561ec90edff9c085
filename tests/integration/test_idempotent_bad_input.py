"""
integration.idempotent_bad_input - what an idempotent producer's batches
may not do, sent by hand with kwire.py (record batches v2 with a producer
id, epoch and base sequence, Produce v3, InitProducerId v0 and v4), each
answered with Kafka's error while the partition keeps taking writes:

  - InitProducerId without a transactional id: a producer id and epoch;
  - a batch sent again (its answer lost): no error and the offset it was
    first written at, and nothing written twice;
  - a sequence far past the producer's last: OUT_OF_ORDER_SEQUENCE_NUMBER
    (45), nothing written; the producer's next in-order batch is taken;
  - the same producer at a higher epoch (from sequence 0), then a batch at
    the old epoch: INVALID_PRODUCER_EPOCH (47);
  - a producer id never issued (far above any InitProducerId answer):
    UNKNOWN_PRODUCER_ID (59);
  - InitProducerId with a transactional id before any FindCoordinator
    made __transaction_state: NOT_COORDINATOR, not a hang nor a closed
    connection;
and after each, a plain batch (no producer id) and a new idempotent
producer's first batch are both written.  The log holds exactly the batches
that were answered with a new offset.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import Broker, check, fail  # noqa: E402

TOPIC = "idem-bad"
NAMES = {0: "NONE", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR", 35: "UNSUPPORTED_VERSION",
         45: "OUT_OF_ORDER_SEQUENCE_NUMBER", 46: "DUPLICATE_SEQUENCE_NUMBER", 47: "INVALID_PRODUCER_EPOCH",
         48: "INVALID_TXN_STATE", 53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 59: "UNKNOWN_PRODUCER_ID",
         90: "PRODUCER_FENCED"}


def name(err):
    return "%s (%d)" % (NAMES.get(err, "?"), err)


b = Broker({"auto.create.topics.enable": "false"}).start()
written = []  # (base offset, count) of every batch answered with a new offset


def conn():
    return kwire.Conn(b.port, timeout=10)


def init_pid(c, **kw):
    try:
        return kwire.init_producer_id(c, **kw)
    except (OSError, ConnectionError) as e:
        fail("InitProducerId %r: no answer (%s: %s)" % (kw, type(e).__name__, e))


def produce(c, batch, what):
    try:
        _idx, err, base = c.produce(TOPIC, 0, batch, acks=-1, timeout_ms=5000)
    except (OSError, ConnectionError) as e:
        fail("%s: no answer to the produce (%s: %s)" % (what, type(e).__name__, e))
    return err, base


def log_end():
    c = conn()
    try:
        err, off, _ = c.list_offsets(TOPIC, 0, -1)
        check(err == 0, "ListOffsets: %s" % name(err))
        return off
    finally:
        c.close()


def values(n, tag):
    return [("%s-%d" % (tag, i)).encode() for i in range(n)]


def take(c, batch, n, what):
    """A batch that must be written at the log end."""
    end = log_end()
    err, base = produce(c, batch, what)
    check(err == 0, "%s: %s, want NONE" % (what, name(err)))
    check(base == end, "%s: written at %d, the log ended at %d" % (what, base, end))
    written.append((base, n))
    return base


def still_serves(after):
    """A plain batch and a new idempotent producer's first batch."""
    c = conn()
    try:
        take(c, kwire.record_batch(values(2, "plain")), 2, "a plain batch after %s" % after)
        err, pid, epoch = init_pid(c)
        check(err == 0, "InitProducerId after %s: %s" % (after, name(err)))
        take(c, kwire.record_batch(values(2, "fresh"), producer_id=pid, producer_epoch=epoch, base_sequence=0), 2,
             "a new producer's first batch after %s" % after)
    finally:
        c.close()


try:
    c = conn()
    check(c.create_topic(TOPIC, 1) == 0, "create %s" % TOPIC)
    apis = kwire.api_versions(c)
    check(22 in apis, "ApiVersions does not list InitProducerId (22): the broker serves no idempotent producer "
          "(it lists %s)" % sorted(apis))
    print("ApiVersions: InitProducerId v%d-%d, Produce v%d-%d" % (apis[22] + apis[0]), flush=True)

    # ---- a producer id
    err, pid, epoch = init_pid(c)
    check(err == 0 and pid >= 0 and epoch >= 0, "InitProducerId v0: %s, id %d, epoch %d" % (name(err), pid, epoch))
    err4, pid4, epoch4 = init_pid(c, version=4)
    check(err4 == 0 and pid4 >= 0 and pid4 != pid, "InitProducerId v4: %s, id %d (the v0 one was %d)" %
          (name(err4), pid4, pid))
    print("InitProducerId: v0 gave id %d epoch %d, v4 id %d epoch %d" % (pid, epoch, pid4, epoch4), flush=True)

    def batch(seq, n, ep=None, tag="idem", p=None):
        return kwire.record_batch(values(n, "%s-%d" % (tag, seq)), producer_id=pid if p is None else p,
                                  producer_epoch=epoch if ep is None else ep, base_sequence=seq)

    # ---- a batch sent again
    first = batch(0, 3)
    base0 = take(c, first, 3, "sequence 0")
    end = log_end()
    err, base = produce(c, first, "sequence 0 again")
    check(err == 0, "the same batch again: %s, want NONE (a duplicate is answered as written)" % name(err))
    check(base == base0, "the same batch again: offset %d, it was written at %d" % (base, base0))
    check(log_end() == end, "the same batch again was written (log end %d, was %d)" % (log_end(), end))
    c2 = conn()  # a resend comes on a new connection after a lost answer
    err, base = produce(c2, first, "sequence 0 on a new connection")
    c2.close()
    check(err == 0 and base == base0 and log_end() == end,
          "the same batch on a new connection: %s at %d, log end %d (written at %d, end was %d)" %
          (name(err), base, log_end(), base0, end))
    take(c, batch(3, 2), 2, "sequence 3")
    print("a batch sent again: NONE at its first offset %d, nothing written twice" % base0, flush=True)
    still_serves("a duplicate")

    # ---- a sequence far in the future
    end = log_end()
    err, _ = produce(c, batch(1000, 1), "sequence 1000")
    check(err == 45, "sequence 1000 after 4: %s, want OUT_OF_ORDER_SEQUENCE_NUMBER (45)" % name(err))
    check(log_end() == end, "the out-of-order batch was written")
    take(c, batch(5, 2), 2, "sequence 5 after the refused one")
    print("sequence 1000 after 4: %s; the producer's next batch (5) taken" % name(err), flush=True)
    still_serves("an out-of-order sequence")

    # ---- a stale epoch
    take(c, batch(0, 1, ep=epoch + 1), 1, "epoch %d from sequence 0" % (epoch + 1))
    end = log_end()
    err, _ = produce(c, batch(7, 1), "epoch %d after %d" % (epoch, epoch + 1))
    check(err == 47, "epoch %d after epoch %d: %s, want INVALID_PRODUCER_EPOCH (47)" % (epoch, epoch + 1, name(err)))
    check(log_end() == end, "the stale epoch's batch was written")
    take(c, batch(1, 1, ep=epoch + 1), 1, "epoch %d sequence 1" % (epoch + 1))
    print("epoch %d after %d: %s; epoch %d goes on" % (epoch, epoch + 1, name(err), epoch + 1), flush=True)
    still_serves("a stale epoch")

    # ---- a producer id never issued
    never = max(pid, pid4) + (1 << 40)
    end = log_end()
    err, _ = produce(c, batch(0, 1, ep=0, p=never), "producer id %d" % never)
    check(err == 59, "producer id %d (never issued; the last was %d): %s, want UNKNOWN_PRODUCER_ID (59)" %
          (never, max(pid, pid4), name(err)))
    check(log_end() == end, "the unknown producer's batch was written")
    print("producer id %d, never issued: %s" % (never, name(err)), flush=True)
    still_serves("an unknown producer id")

    # ---- InitProducerId with a transactional id
    c.close()
    c = conn()
    err, tpid, tepoch = init_pid(c, transactional_id="idem-bad-txn", timeout_ms=10000)
    print("InitProducerId with transactional id idem-bad-txn: %s (id %d, epoch %d)" % (name(err), tpid, tepoch),
          flush=True)
    # no FindCoordinator key type 1 came first, so there is no
    # __transaction_state and this broker coordinates no transactional id
    check(err == 16, "InitProducerId with a transactional id before __transaction_state exists answered %s, "
          "not NOT_COORDINATOR" % name(err))
    still_serves("InitProducerId with a transactional id")

    # ---- the log holds exactly what was answered with a new offset
    c.close()
    c = conn()
    got, off = [], 0
    while off < log_end():
        err, _hw, _ls, data = c.fetch(TOPIC, 0, off)
        check(err == 0, "fetch at %d: %s" % (off, name(err)))
        bs = kwire.batches(data or b"")
        check(bs, "fetch at %d returned no batch" % off)
        for base, n, _ in bs:
            got.append((base, n))
            off = base + n
    check(got == written, "the log holds batches %r, the answers said %r" % (got, written))
    print("the log holds the %d batches (%d records) answered with a new offset, nothing else" %
          (len(got), sum(n for _, n in got)), flush=True)
    c.close()
    check(b.stop() == 0, "stratad did not stop cleanly")
    print("PASS", flush=True)
except SystemExit as e:
    b.explain_failure(e)
    raise
finally:
    b.cleanup()

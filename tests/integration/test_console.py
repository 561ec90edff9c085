"""
integration.console - the console page of the admin listener ("/"),
rendered by headless Chromium (Debian's chromium) against a live stratad.

One broker with its admin listener. Topic c has 2 partitions; 30 records
go to partition 0, stamped an hour back. A kcat group (con-grp) reads 10
of them (its commit: offset 10, lag 20 records and an hour); then 20
records go to partition 1. Chromium loads "/" (its script fetches
/v1/status) and dumps the DOM once the page has drawn; the test reads the
tables from that DOM and checks them against /v1/status and against what
it wrote:
- the broker row (id 1, serving);
- topic c: 2 partitions, its local bytes;
- each partition of c: leader 1, replicas and ISR "1", high watermark 30
  and 20;
- con-grp on c-0: committed 10, high watermark 30, lag 20, lag in time
  about an hour (its text "1 h 0 min ...");
- a second group whose id is markup (an <img> tag with an onerror
  handler) is shown as that text, not as an element.
Then scripts/console-screenshot.sh writes a PNG of the page, which must
be a PNG of the window's size.

Chromium is installed by scripts/deps.sh test; missing, the test fails.
"""
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from strata_harness import Broker, check, fail, free_port, kcat, run, wait_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read()


class Tables(html.parser.HTMLParser):
    """{table id: [row {cell class: text, and "@attr": row attribute}]}."""

    def __init__(self):
        super().__init__()
        self.tables, self.table, self.row, self.cell, self.text = {}, None, None, None, ""
        self.body = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "table":
            self.table = a.get("id")
            self.tables.setdefault(self.table, [])
        elif tag == "tr" and self.table:
            self.row = {"@" + k: v for k, v in a.items()}
        elif tag == "td" and self.row is not None:
            self.cell, self.text = (a.get("class") or "").split(" ")[-1], ""

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.row[self.cell] = self.text
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if any(not k.startswith("@") for k in self.row):
                self.tables[self.table].append(self.row)
            self.row = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.cell is not None:
            self.text += data


def chromium():
    exe = shutil.which("chromium")
    check(exe is not None, "chromium is missing (scripts/deps.sh test installs it)")
    return exe


def dump_dom(port, profile):
    """The page's DOM after its script ran (virtual time lets its fetch
    finish before the dump)."""
    _, out, _ = run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--user-data-dir=" + profile, "--virtual-time-budget=8000", "--dump-dom",
                     "http://127.0.0.1:%d/" % port], timeout=120)
    return out.decode(errors="replace")


def main():
    aport = free_port()
    b = Broker({"admin.listeners": "http://127.0.0.1:%d" % aport})
    profile = tempfile.mkdtemp(prefix="strata-chromium-")
    try:
        b.start()
        st, ctype, page = get(aport, "/")
        check(st == 200 and ctype.startswith("text/html") and b"<title>Strata console</title>" in page,
              "/ answers %d %s" % (st, ctype))
        c = kwire.Conn(b.port)
        check(c.create_topic("c", 2) == 0, "CreateTopics c")
        hour_ago = int(time.time() * 1000) - 3600000
        wait_for(lambda: c.produce("c", 0, kwire.record_batch([b"a"] * 10, ts=hour_ago))[1] == 0, 30,
                 what="c-0 to take a produce")
        for _ in range(2):
            check(c.produce("c", 0, kwire.record_batch([b"a"] * 10, ts=hour_ago))[1] == 0, "produce c-0")
        # c-1 is empty while the group reads: its 10 records come from c-0
        kcat(b, "-G", "con-grp", "c", "-c", "10", "-q", "-X", "auto.offset.reset=earliest", timeout=60)
        for _ in range(2):
            check(c.produce("c", 1, kwire.record_batch([b"b"] * 10))[1] == 0, "produce c-1")
        odd = '<img src=x onerror="document.title=1">'
        kcat(b, "-G", odd, "c", "-c", "1", "-q", "-X", "auto.offset.reset=earliest", timeout=60)
        status = json.loads(get(aport, "/v1/status")[2])
        g = [x for x in status["groups"] if x["group_id"] == "con-grp"]
        check(g, "/v1/status names no group con-grp: %s" % status.get("groups"))
        committed = {p["partition"]: p for p in g[0]["partitions"]}
        check(list(committed) == [0] and committed[0]["committed_offset"] == 10,
              "con-grp committed %s, not offset 10 of c-0" % committed)

        dom = dump_dom(aport, profile)
        t = Tables()
        t.feed(dom)
        check(t.body.get("data-loaded") == "1", "the page did not draw /v1/status: %s" % dom[-2000:])
        brokers = t.tables.get("brokers", [])
        check(len(brokers) == 1 and brokers[0]["id"] == "1" and brokers[0]["state"] == "serving" and
              brokers[0]["addr"].endswith(":%d" % b.port), "brokers: %s" % brokers)
        topics = {r["topic"]: r for r in t.tables.get("topics", [])}
        sc = [x for x in status["topics"] if x["name"] == "c"][0]
        check("c" in topics and topics["c"]["count"] == "2", "topics: %s" % topics)
        parts = {(r["topic"], r["partition"]): r for r in t.tables.get("partitions", [])}
        for p, hw in ((0, 30), (1, 20)):
            r = parts.get(("c", str(p)))
            check(r is not None, "no row for c-%d: %s" % (p, sorted(parts)))
            check(r["leader"] == "1" and r["replicas"] == "1" and r["isr"] == "1" and r["hw"] == str(hw),
                  "c-%d: %s" % (p, r))
            sp = [x for x in sc["partitions"] if x["partition"] == p][0]
            check(r["local-end"] == str(sp["local"]["log_end_offset"]), "c-%d local end: %s" % (p, r))
        groups = [r for r in t.tables.get("groups", []) if r.get("group") == "con-grp"]
        shown = {int(r["partition"]): r for r in groups}
        for p, sp in committed.items():
            r = shown.get(p)
            check(r is not None, "con-grp c-%d is not shown: %s" % (p, groups))
            hw = 30
            check(r["committed"] == str(sp["committed_offset"]) and r["hw"] == str(hw) and
                  r["lag"] == str(hw - sp["committed_offset"]), "con-grp c-%d: %s, status %s" % (p, r, sp))
        check(any(r.get("group") == odd for r in t.tables.get("groups", [])) and "<img" not in dom,
              "the group %s is not shown as text" % odd)
        r0 = shown[0]
        check(r0["lag-ms"].startswith("1 h 0 min"), "con-grp c-0's lag in time is %r, not an hour" % r0["lag-ms"])
        print("console: broker %s %s; c-0 ISR %s hw %s, c-1 ISR %s hw %s; con-grp c-0 committed %s, lag %s "
              "records, %s" % (brokers[0]["id"], brokers[0]["state"], parts[("c", "0")]["isr"],
                               parts[("c", "0")]["hw"], parts[("c", "1")]["isr"], parts[("c", "1")]["hw"],
                               r0["committed"], r0["lag"], r0["lag-ms"]), flush=True)

        # the screenshot script
        png = os.path.join(profile, "console.png")
        run([os.path.join(ROOT, "scripts", "console-screenshot.sh"), "http://127.0.0.1:%d/" % aport, png],
            timeout=120)
        with open(png, "rb") as f:
            head = f.read(24)
        check(head[:8] == b"\x89PNG\r\n\x1a\n", "console-screenshot.sh did not write a PNG")
        w, h = struct.unpack(">II", head[16:24])
        check((w, h) == (1280, 1024), "the screenshot is %dx%d, not 1280x1024" % (w, h))
        print("console-screenshot.sh: a %dx%d PNG of %d bytes" % (w, h, os.path.getsize(png)), flush=True)
        print("integration.console: ok")
    except SystemExit as e:
        b.explain_failure(e)
        raise
    finally:
        b.cleanup()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""faultproxy.py - an HTTP/1.1 proxy for tests that misbehaves on purpose.

It sits between the object store layer and a real S3 server and, for a
chosen fraction of requests, does one of these instead of forwarding
faithfully:

  drop       close the client's connection without answering
  cut-upload read part of the request body, then close
  error500   answer 500 InternalError without forwarding
  error503   answer 503 SlowDown without forwarding
  delay      wait up to --delay-ms, then forward
  stall      wait --stall-ms (longer than the client's timeout), then close
  truncate   forward, but cut the response body short and close
  lose       forward, let the server do the work, then close without
             answering (so a retry repeats something that already happened)

Two targeted faults make rare paths certain.  --lose-first-complete loses
the answer to the first CompleteMultipartUpload of every upload (after the
server completed it) and answers later ones for that upload with 404
NoSuchUpload, as servers whose completes are not idempotent do; the client
must find out that its upload did complete.  --deny-marker STR answers 403
AccessDenied to part 2 of any multipart upload whose key contains STR (the
upload must then be aborted, which is counted as "aborts").

--complete-answer MODE rewrites the answer to CompleteMultipartUpload
(MODE may also be read, per request, from --control-file, so a test can
switch it while the proxy runs; an empty file means faithful):

  moto   the server completes the upload; its 200 answer reaches the client
         with moto's root element, <CompleteMultipartUploadResponse>, and a
         repeated completion of that upload gets the same answer without
         reaching the server (a server whose completion is idempotent)
  empty  the server completes the upload; the client gets a 200 with an
         empty body, and the same for a repeat
  error  the request never reaches the server; the client gets a 200 whose
         body is an <Error> (InternalError, which may pass), so the upload
         is never completed

Every connection carries one request (the proxy answers with
"Connection: close"), which keeps the bookkeeping simple.  It listens on a
free loopback port, writes that port to --port-file, and writes a count of
what it did to --stats-file when it gets SIGTERM (and SIGUSR1, to look while
it runs).  Standard library only.
"""
import argparse
import json
import os
import random
import signal
import socket
import socketserver
import sys
import threading
import time

FAULTS = ["drop", "cut-upload", "error500", "error503", "delay", "stall", "truncate", "lose"]
COMPLETE_MODES = ("moto", "empty", "error")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {"requests": 0, "forwarded": 0}
        for f in FAULTS:
            self.counts[f] = 0

    def bump(self, name):
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + 1


def read_head(sock, buf):
    """Reads up to the blank line; returns (head, rest) or (None, b'') on EOF."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        buf += chunk
        if len(buf) > 1 << 20:
            return None, b""
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]


def parse_headers(head):
    lines = head.decode("latin-1").split("\r\n")
    first = lines[0]
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    return first, headers


def header(headers, name):
    for n, v in headers:
        if n.lower() == name:
            return v
    return None


def build_head(first, headers):
    out = [first]
    for n, v in headers:
        if n.lower() in ("connection", "keep-alive", "proxy-connection", "expect"):
            continue
        out.append("%s: %s" % (n, v))
    out.append("Connection: close")
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")


def recv_exact(sock, n, pending):
    """Yields body chunks: first from pending, then from the socket."""
    if pending:
        take = pending[:n]
        n -= len(take)
        yield take
    while n > 0:
        chunk = sock.recv(min(n, 262144))
        if not chunk:
            return
        n -= len(chunk)
        yield chunk


def read_body(sock, headers, pending):
    """The whole body of an answer whose head is parsed: by Content-Length,
    chunked, or up to the close."""
    length = header(headers, "content-length")
    if (header(headers, "transfer-encoding") or "").lower() == "chunked":
        data, out = pending, b""
        while True:
            while b"\r\n" not in data:
                more = sock.recv(65536)
                if not more:
                    return out
                data += more
            line, _, data = data.partition(b"\r\n")
            n = int(line.split(b";")[0], 16)
            while len(data) < n + 2:
                more = sock.recv(65536)
                if not more:
                    return out + data[:n]
                data += more
            if n == 0:
                return out
            out += data[:n]
            data = data[n + 2:]
    data = pending
    if length is not None:
        while len(data) < int(length):
            more = sock.recv(262144)
            if not more:
                break
            data += more
        return data[:int(length)]
    while True:
        more = sock.recv(262144)
        if not more:
            return data
        data += more


def answer_200(body):
    head = ("HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
            "Connection: close\r\n\r\n" % len(body)).encode()
    return head + body


def error_response(status, reason, code):
    body = ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code>'
            "<Message>injected by faultproxy</Message></Error>" % code).encode()
    head = ("HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
            "Connection: close\r\n\r\n" % (status, reason, len(body))).encode()
    return head + body


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        cfg = self.server.cfg
        client = self.request
        client.settimeout(30)
        try:
            head, rest = read_head(client, b"")
            if head is None:
                return
            first, headers = parse_headers(head)
            method = first.split(" ", 1)[0]
            length = int(header(headers, "content-length") or "0")
            expect = (header(headers, "expect") or "").lower() == "100-continue"
            self.server.stats.bump("requests")
            path = first.split(" ")[1] if " " in first else ""
            fault = self.server.pick()
            mode = self.server.complete_mode()
            if method == "POST" and "uploadId=" in path and mode:
                self.rewrite_complete(client, first, headers, rest, length, expect, path, mode)
                return
            if method == "POST" and "?uploads" in path:
                self.server.stats.bump("initiates")
            if method == "POST" and "uploadId=" in path and cfg.lose_first_complete:
                upload = path.split("uploadId=", 1)[1].split("&", 1)[0]
                with self.server.rng_lock:
                    again = upload in self.server.completed
                    self.server.completed.add(upload)
                if again:
                    self.server.stats.bump("nosuchupload")
                    if length and not expect:
                        for _ in recv_exact(client, length, rest):
                            pass
                    client.sendall(error_response(404, "Not Found", "NoSuchUpload"))
                    return
                fault = "lose"
                self.server.stats.bump("lose-complete")
            if method == "DELETE" and "uploadId=" in path:
                self.server.stats.bump("aborts")
            if (cfg.deny_marker and method == "PUT" and cfg.deny_marker in path
                    and "partNumber=2&" in path):
                self.server.stats.bump("denied-part")
                if length and not expect:
                    for _ in recv_exact(client, length, rest):
                        pass
                client.sendall(error_response(403, "Forbidden", "AccessDenied"))
                return
            if fault:
                self.server.stats.bump(fault)
            if fault == "drop":
                return
            if fault == "stall":
                time.sleep(cfg.stall_ms / 1000.0)
                return
            if fault == "cut-upload":
                if length > 1:
                    if expect:
                        client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    for _ in recv_exact(client, length // 2, rest):
                        pass
                return
            if fault in ("error500", "error503"):
                if length and not expect:
                    for _ in recv_exact(client, length, rest):
                        pass
                if fault == "error500":
                    client.sendall(error_response(500, "Internal Server Error", "InternalError"))
                else:
                    client.sendall(error_response(503, "Slow Down", "SlowDown"))
                return
            if fault == "delay":
                time.sleep(self.server.rng_uniform(0, cfg.delay_ms) / 1000.0)
            self.forward(client, first, headers, rest, method, length, expect, fault)
        except (OSError, ValueError):
            pass
        finally:
            try:
                client.close()
            except OSError:
                pass

    def rewrite_complete(self, client, first, headers, rest, length, expect, path, mode):
        """CompleteMultipartUpload under --complete-answer (see the top)."""
        upload = path.split("uploadId=", 1)[1].split("&", 1)[0]
        self.server.stats.bump("complete-" + mode)
        with self.server.rng_lock:
            repeat = self.server.rewritten.get(upload)
        if mode == "error" or repeat is not None:
            if expect and length:
                client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            if length:
                for _ in recv_exact(client, length, rest):
                    pass
            if mode == "error":
                client.sendall(answer_200(b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError'
                                          b'</Code><Message>injected by faultproxy: 200 with an error'
                                          b'</Message></Error>'))
            else:
                self.server.stats.bump("complete-repeat")
                client.sendall(answer_200(repeat))
            return
        up = socket.create_connection(self.server.upstream, timeout=60)
        try:
            up.sendall(build_head(first, headers))
            if expect and length:
                client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            if length:
                for chunk in recv_exact(client, length, rest):
                    up.sendall(chunk)
            pending = b""
            while True:
                resp, pending = read_head(up, pending)
                if resp is None:
                    return
                if not resp.split(b" ", 2)[1].startswith(b"1"):
                    break
            rfirst, rheaders = parse_headers(resp)
            body = read_body(up, rheaders, pending)
            if int(rfirst.split(" ", 2)[1]) != 200 or b"CompleteMultipartUploadResult" not in body:
                client.sendall(build_head(rfirst, [(n, v) for n, v in rheaders
                                                   if n.lower() not in ("content-length", "transfer-encoding")]
                                          + [("Content-Length", str(len(body)))]) + body)
                return
            body = body.strip()
            if mode == "moto":
                body = body.replace(b"CompleteMultipartUploadResult", b"CompleteMultipartUploadResponse")
            else:
                body = b""
            with self.server.rng_lock:
                self.server.rewritten[upload] = body
            client.sendall(answer_200(body))
        finally:
            up.close()

    def forward(self, client, first, headers, rest, method, length, expect, fault):
        up = socket.create_connection(self.server.upstream, timeout=30)
        try:
            # The proxy takes the body itself (answering "100 Continue" when
            # asked) and forwards the request without Expect: curl does not
            # sign an Expect header it added, so dropping it is invisible.
            up.sendall(build_head(first, headers))
            pending = b""
            if expect and length:
                client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            if length:
                for chunk in recv_exact(client, length, rest):
                    up.sendall(chunk)
            while True:
                resp, pending = read_head(up, pending)
                if resp is None:
                    return
                if resp.split(b" ", 2)[1].startswith(b"1"):
                    continue  # an interim answer the client no longer waits for
                break
            self.relay(client, up, resp, pending, method, fault)
        finally:
            up.close()

    def relay(self, client, up, resp, pending, method, fault):
        first, headers = parse_headers(resp)
        status = int(first.split(" ", 2)[1])
        length = header(headers, "content-length")
        has_body = method != "HEAD" and status not in (204, 304)
        if fault == "lose":
            # Let the server finish, then vanish.
            while up.recv(262144):
                pass
            return
        client.sendall(build_head(first, headers))
        limit = None
        if fault == "truncate" and has_body:
            n = int(length) if length else 0
            limit = n // 2 if n > 1 else 0
        sent = 0
        data = pending
        while has_body:
            if data:
                if limit is not None and sent + len(data) > limit:
                    client.sendall(data[: limit - sent])
                    return
                client.sendall(data)
                sent += len(data)
                if length is not None and sent >= int(length):
                    break
            data = up.recv(262144)
            if not data:
                break
        if fault is None or fault == "delay":
            self.server.stats.bump("forwarded")


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, cfg):
        self.cfg = cfg
        host, _, port = cfg.upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.stats = Stats()
        self.rng = random.Random(cfg.seed)
        self.rng_lock = threading.Lock()
        self.completed = set()
        self.rewritten = {}  # upload id -> the body its completion got
        self.weights = [(f, getattr(cfg, f.replace("-", "_"))) for f in FAULTS]
        super().__init__(("127.0.0.1", 0), Handler)

    def pick(self):
        with self.rng_lock:
            x = self.rng.random()
        for name, p in self.weights:
            if x < p:
                return name
            x -= p
        return None

    def complete_mode(self):
        mode = self.cfg.complete_answer
        if self.cfg.control_file:
            try:
                with open(self.cfg.control_file) as f:
                    mode = f.read().strip()
            except OSError:
                pass
        return mode if mode in COMPLETE_MODES else ""

    def rng_uniform(self, a, b):
        with self.rng_lock:
            return self.rng.uniform(a, b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", required=True, help="host:port of the real server")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--stats-file")
    ap.add_argument("--seed", type=int, default=1)
    for f in FAULTS:
        ap.add_argument("--" + f, type=float, default=0.0, help="fraction of requests")
    ap.add_argument("--delay-ms", type=float, default=300)
    ap.add_argument("--stall-ms", type=float, default=3000)
    ap.add_argument("--lose-first-complete", action="store_true")
    ap.add_argument("--deny-marker", default="")
    ap.add_argument("--complete-answer", default="", choices=("",) + COMPLETE_MODES)
    ap.add_argument("--control-file", default="", help="holds the --complete-answer mode (or nothing)")
    cfg = ap.parse_args()
    if sum(getattr(cfg, f.replace("-", "_")) for f in FAULTS) > 1:
        sys.exit("faultproxy: the fractions add up to more than 1")
    server = Server(cfg)

    def dump():
        if cfg.stats_file:
            with server.stats.lock:
                counts = dict(server.stats.counts)
            with open(cfg.stats_file + ".tmp", "w") as f:
                json.dump(counts, f, sort_keys=True)
            os.rename(cfg.stats_file + ".tmp", cfg.stats_file)

    def stop(signum, frame):
        dump()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGUSR1, lambda signum, frame: dump())
    with open(cfg.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(cfg.port_file + ".tmp", cfg.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""
tcpproxy - a TCP proxy for fault tests: listens on a loopback port and
forwards each connection to a target, until told otherwise.

Modes (set_mode):
  pass       bytes flow both ways (a new connection is connected to the
             target);
  blackhole  a network partition as the peers see it: connections stay
             open but every byte either side sends is dropped; new
             connections are accepted and held, never connected.  Going
             back to pass closes every connection that lost bytes or was
             held (their streams are cut mid-frame), so the peers
             reconnect;
  reset      every connection is closed, new ones are closed at once;
  delay      a slow link: every chunk either side sends is held delay_ms
             (set_mode(DELAY, delay_ms=N)) and then forwarded, in order;
             with replies_only=True only what the target sends is held;
             with replies_only="produce" only the target's answers on
             connections that carried a Kafka Produce request (API key 0),
             so a producer loses its answers while replicas fetching
             through the same proxy do not.
             Going to reset drops what is still held with the connection:
             a request already delivered whose response is still held is
             a response lost after the peer acted on it.  Going back to
             pass forwards what is held and keeps the connections.

cut() closes every connection at once and stays in the mode it is in (a
momentary loss of the link; the peers reconnect); cuts counts them.

In a test:  p = TcpProxy(("127.0.0.1", port)).start(); p.port; p.set_mode(...)
By hand:    python3 tcpproxy.py LISTEN_PORT HOST:PORT, then type a mode per
            line on stdin.
"""
import select
import socket
import sys
import threading
import time

PASS, BLACKHOLE, RESET = "pass", "blackhole", "reset"
DELAY = "delay"


class TcpProxy:
    def __init__(self, target, listen_port=0, name=None):
        self.target = target
        self.name = name or "proxy->%s:%d" % target
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", listen_port))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.mode = PASS
        self.lock = threading.Lock()
        self.conns = []  # [client, upstream or None, cut flag list]
        self.dropped = 0  # bytes dropped while blackholed
        self.accepted = 0
        self.closed = False
        self.delay_ms = 0
        self.cuts = 0
        self.delayed = 0  # chunks held by DELAY
        self.replies_only = False

    def start(self):
        threading.Thread(target=self._accept_loop, name=self.name, daemon=True).start()
        return self

    def set_mode(self, mode, delay_ms=None, replies_only=False):
        assert mode in (PASS, BLACKHOLE, RESET, DELAY), mode
        with self.lock:
            if delay_ms is not None:
                self.delay_ms = delay_ms
            self.replies_only = replies_only
            self.mode = mode
            doomed = []
            if mode == RESET:
                doomed, self.conns = self.conns, []
            elif mode == PASS:
                doomed = [c for c in self.conns if c[2][0] or c[1] is None]
                self.conns = [c for c in self.conns if c not in doomed]
        for c in doomed:
            self._close(c)

    def cut(self):
        """Close every connection now; new ones are served as before."""
        with self.lock:
            doomed, self.conns = self.conns, []
            self.cuts += 1
        for c in doomed:
            self._close(c)

    def close(self):
        self.closed = True
        self.set_mode(RESET)
        self.ls.close()

    @staticmethod
    def _close(c):
        for s in c[:2]:
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _accept_loop(self):
        while not self.closed:
            try:
                cs, _ = self.ls.accept()
            except OSError:
                return
            self.accepted += 1
            with self.lock:
                mode = self.mode
            if mode == RESET:
                cs.close()
                continue
            up = None
            if mode in (PASS, DELAY):
                try:
                    up = socket.create_connection(self.target, timeout=5)
                    up.settimeout(None)
                except OSError:
                    cs.close()  # the target is down: as a refused connect
                    continue
            c = [cs, up, [False]]
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._pump, args=(c,), daemon=True).start()

    @staticmethod
    def _scan_requests(state, data):
        """Follow the client's Kafka frames (int32 size, int16 API key...):
        state is [bytes left of the current frame, header bytes so far,
        Produce seen]."""
        i = 0
        while i < len(data):
            if state[0] > 0:
                step = min(state[0], len(data) - i)
                state[0] -= step
                i += step
                continue
            need = 6 - len(state[1])
            state[1] += data[i:i + need]
            i += min(need, len(data) - i)
            if len(state[1]) == 6:
                size = int.from_bytes(state[1][:4], "big", signed=True)
                if int.from_bytes(state[1][4:6], "big", signed=True) == 0:
                    state[2] = True
                state[0] = max(size - 2, 0)
                state[1] = b""

    def _pump(self, c):
        cs, up, cut = c
        socks = [s for s in (cs, up) if s is not None]
        held = []  # DELAY: [(due, destination, bytes)] in arrival order
        frames = [0, b"", False]  # _scan_requests' state
        try:
            while True:
                wait = 0.5
                if held:
                    wait = max(0.0, min(wait, held[0][0] - time.monotonic()))
                r, _, _ = select.select(socks, [], [], wait)
                with self.lock:
                    if c not in self.conns:
                        return
                    mode = self.mode
                    delay = self.delay_ms / 1000.0
                    replies_only = self.replies_only
                if held and mode != DELAY:
                    if mode == PASS:
                        for _due, dst, data in held:
                            dst.sendall(data)
                    else:
                        cut[0] = True
                    held = []
                while held and held[0][0] <= time.monotonic():
                    _due, dst, data = held.pop(0)
                    dst.sendall(data)
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        raise EOFError
                    if s is cs and not frames[2]:
                        self._scan_requests(frames, data)
                    hold = s is up or not replies_only
                    if replies_only == "produce":
                        hold = s is up and frames[2]
                    if mode == DELAY and up is not None and hold:
                        held.append((time.monotonic() + delay, up if s is cs else cs, data))
                        self.delayed += 1
                        continue
                    if mode not in (PASS, DELAY) or up is None:
                        cut[0] = True
                        self.dropped += len(data)
                        continue
                    (up if s is cs else cs).sendall(data)
        except (OSError, EOFError, ValueError):
            pass
        finally:
            with self.lock:
                if c in self.conns:
                    self.conns.remove(c)
            self._close(c)


if __name__ == "__main__":
    host, _, port = sys.argv[2].rpartition(":")
    p = TcpProxy((host or "127.0.0.1", int(port)), int(sys.argv[1])).start()
    print("listening on 127.0.0.1:%d, forwarding to %s" % (p.port, sys.argv[2]), flush=True)
    for line in sys.stdin:
        if line.strip():
            p.set_mode(line.strip())
            print("mode %s" % p.mode, flush=True)

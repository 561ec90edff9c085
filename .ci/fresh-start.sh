#!/usr/bin/env bash
# The README's first command on a new machine.  Makes a minimal Debian 12
# root (debootstrap minbase plus git and ca-certificates, what someone who
# just cloned the repository has), clones this repository into it, runs
# ./scripts/run.sh there (which must install what it needs and build), then
# from outside checks that the broker answers ApiVersions and Metadata on
# its port, stops it with SIGTERM and expects a clean stop (exit 0,
# "stopped cleanly").  Any step failing fails the check.
#
#   .ci/fresh-start.sh
#
# Needs root (debootstrap, chroot, mounts) and python3 for the probe.  The
# root shares this machine's network, so the broker listens on loopback
# here.  The minimal root is made once and cached as a tarball in
# $STRATA_FRESH_CACHE (default /var/cache/strata-fresh); each run unpacks a
# new copy.  STRATA_FRESH_TIMEOUT bounds the install + build (seconds,
# default 1500).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${STRATA_FRESH_CACHE:-/var/cache/strata-fresh}
timeout_s=${STRATA_FRESH_TIMEOUT:-1500}
say() { echo "fresh-start: $*"; }
die() { echo "fresh-start: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)"
command -v python3 >/dev/null || die "needs python3 for the probe"
export DEBIAN_FRONTEND=noninteractive
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null
fi

# The Debian mirror this machine's apt uses (deb822 or one-line sources).
mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
         awk '{print $2}' | grep -v security | head -n 1 || true)
[ -n "$mirror" ] || mirror=$(grep -h '^deb ' /etc/apt/sources.list 2>/dev/null |
                             awk '{print $2}' | grep -v security | head -n 1 || true)
[ -n "$mirror" ] || die "no Debian mirror in this machine's apt sources"

tarball=$cache/bookworm-minbase.tar
mkdir -p "$cache"
if [ ! -s "$tarball" ]; then
  say "making a minimal Debian 12 root from $mirror (cached in $cache)"
  base=$(mktemp -d /tmp/strata-fresh-base.XXXXXX)
  debootstrap --variant=minbase bookworm "$base" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { rm -rf "$base"; die "debootstrap failed; see $cache/debootstrap.log"; }
  rm -f "$base/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/*.sources "$base/etc/apt/sources.list.d/" 2>/dev/null ||
    cp /etc/apt/sources.list "$base/etc/apt/sources.list"
  cp /etc/resolv.conf "$base/etc/resolv.conf"
  chroot "$base" /bin/bash -c 'apt-get update -qq &&
      apt-get install -y -qq --no-install-recommends git ca-certificates >/dev/null &&
      apt-get clean && rm -rf /var/lib/apt/lists/*' ||
    { rm -rf "$base"; die "could not install git in the new root"; }
  tar -C "$base" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$base"
fi

root=$(mktemp -d /tmp/strata-fresh.XXXXXX)
log=$root.log
pid=
ok=
mounts=()
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
  # what run.sh printed: kept when the check failed, gone when it passed
  if [ -n "$ok" ]; then rm -f "$log"; elif [ -s "$log" ]; then echo "fresh-start: run.sh's output is in $log" >&2; fi
}
trap cleanup EXIT

tar -C "$root" -xf "$tarball"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc" && mounts+=("$root/proc")
for m in sys dev dev/pts; do mount --bind "/$m" "$root/$m" && mounts+=("$root/$m"); done
mkdir -p "$root/tmp" && chmod 1777 "$root/tmp"
git clone -q "$repo" "$root/root/strata"
say "clone of $(git -C "$repo" rev-parse --short HEAD) in a fresh Debian 12 root"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# chroot, env and bash all exec, and run.sh execs stratad: $pid ends up the broker.
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /bin/bash -c "cd /root/strata && exec ./scripts/run.sh --override listeners=PLAINTEXT://localhost:$port" \
  >"$log" 2>&1 &
pid=$!

start=$SECONDS
until grep -q '^bootstrap.servers=' "$log"; do
  if ! kill -0 "$pid" 2>/dev/null; then
    tail -n 40 "$log" >&2
    die "./scripts/run.sh stopped before the broker served (above: the end of its output)"
  fi
  if [ $((SECONDS - start)) -ge "$timeout_s" ]; then
    tail -n 40 "$log" >&2
    die "./scripts/run.sh did not start a broker within ${timeout_s}s"
  fi
  sleep 1
done
say "./scripts/run.sh served after $((SECONDS - start)) s: $(grep '^bootstrap.servers=' "$log")"

python3 - "$port" <<'PY' || { tail -n 20 "$log" >&2; die "the broker did not answer as it should"; }
import socket, struct, sys

port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=10)

def call(api, version, corr, body):
    hdr = struct.pack(">hhih", api, version, corr, 5) + b"fresh"
    s.sendall(struct.pack(">i", len(hdr) + len(body)) + hdr + body)
    n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    data = s.recv(n, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", data)[0] == corr, "correlation id"
    return data[4:]

r = call(18, 0, 1, b"")                                  # ApiVersions v0
err, nkeys = struct.unpack_from(">hi", r)
keys = {struct.unpack_from(">h", r, 6 + 6 * i)[0] for i in range(nkeys)}
assert err == 0 and {0, 1, 3, 18} <= keys, "ApiVersions: error %d, keys %s" % (err, sorted(keys))
r = call(3, 1, 2, struct.pack(">i", -1))                 # Metadata v1, every topic
(nb,) = struct.unpack_from(">i", r)
node, hl = struct.unpack_from(">ih", r, 4)
host = r[10:10 + hl].decode()
(bport,) = struct.unpack_from(">i", r, 10 + hl)
assert nb == 1 and bport == port, "Metadata: %d brokers, first %s:%d" % (nb, host, bport)
print("fresh-start: ApiVersions answered %d API keys; Metadata names broker %d at %s:%d"
      % (nkeys, node, host, bport))
PY

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
grep -q 'stopped cleanly' "$log" || { tail -n 20 "$log" >&2; die "no clean stop (exit $rc)"; }
[ "$rc" = 0 ] || die "stratad exited with $rc after SIGTERM"
ok=1
say "stopped cleanly on SIGTERM: the README's first command works on a fresh Debian 12 machine"

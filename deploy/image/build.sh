#!/usr/bin/env bash
# Build Strata's image with Debian's docker, where no registry image can be
# pulled: the base is a Debian 12 root made with debootstrap (minbase, then
# trimmed as the slim images are) and imported with `docker import`.  Then,
# unless --no-check, a container from the image on the host's network must
# answer kcat -L, report itself healthy, run as a user other than root and
# stop cleanly on `docker stop`.
#
#   deploy/image/build.sh [--tag TAG] [--no-check] [--keep-daemon]
#
# Uses the docker daemon DOCKER_HOST (or the default socket) names when one
# answers; otherwise, as root, starts one of its own (dockerd with the vfs
# storage driver, no iptables and no bridge, which also runs inside a
# container or a VM without overlayfs) under the cache directory and stops
# it at the end (by pid) unless --keep-daemon.  With a registry,
# `docker build -t strata .` at the repository's root does the same from
# debian:bookworm-slim.
#
# Environment: STRATA_IMAGE_CACHE (default /var/cache/strata-image: the
# debootstrap tarball, the daemon's data), STRATA_DOCKER (the docker client;
# default Debian's /usr/bin/docker), STRATA_IMAGE_JOBS (make jobs, 2).
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
tag=strata:latest
check=1
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --no-check) check=0; shift ;;
    --keep-daemon) keep=1; shift ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
cache="${STRATA_IMAGE_CACHE:-/var/cache/strata-image}"
jobs="${STRATA_IMAGE_JOBS:-2}"
base_tag=strata-base:bookworm-minbase
say() { echo "build.sh: $*"; }
die() { echo "build.sh: $*" >&2; exit 1; }

docker="${STRATA_DOCKER:-}"
if [ -z "$docker" ]; then
    if [ -x /usr/bin/docker ]; then docker=/usr/bin/docker; else docker=docker; fi
fi
command -v "$docker" >/dev/null || die "no docker client (Debian's docker.io: scripts/deps.sh image)"

daemon_pid=""
container=""
workdir="$(mktemp -d "${TMPDIR:-/tmp}/strata-image.XXXXXX")"
cleanup() {
    if [ -n "$container" ]; then "$docker" rm -f "$container" >/dev/null 2>&1 || true; fi
    if [ -n "$daemon_pid" ] && [ "$keep" = 0 ]; then
        kill -TERM "$daemon_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$daemon_pid" 2>/dev/null || true
    fi
    rm -rf "$workdir"
}
trap cleanup EXIT

# -- a daemon
if ! "$docker" info >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || die "no docker daemon answers, and starting one needs root"
    command -v dockerd >/dev/null || die "no docker daemon answers and there is no dockerd"
    mkdir -p "$cache/docker"
    sock="$cache/docker/docker.sock"
    export DOCKER_HOST="unix://$sock"
    if ! "$docker" info >/dev/null 2>&1; then
        say "starting dockerd (vfs, no iptables, no bridge); its log: $cache/docker/dockerd.log"
        dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=vfs \
            --data-root "$cache/docker/root" --exec-root "$cache/docker/exec" \
            --pidfile "$cache/docker/dockerd.pid" -H "$DOCKER_HOST" \
            >>"$cache/docker/dockerd.log" 2>&1 </dev/null &
        daemon_pid=$!
        for _ in $(seq 1 150); do
            "$docker" info >/dev/null 2>&1 && break
            kill -0 "$daemon_pid" 2>/dev/null || { tail -n 20 "$cache/docker/dockerd.log" >&2; die "dockerd stopped"; }
            sleep 0.2
        done
        "$docker" info >/dev/null 2>&1 || die "dockerd did not answer in 30 s"
    fi
    if [ -z "$daemon_pid" ]; then
        say "daemon: DOCKER_HOST=$DOCKER_HOST (already running)"
    elif [ "$keep" = 1 ]; then
        say "daemon: DOCKER_HOST=$DOCKER_HOST (started here, kept: pid $daemon_pid)"
    fi
fi
say "docker $("$docker" version --format '{{.Client.Version}} (client), {{.Server.Version}} (daemon)')"

# -- the base: a Debian 12 root made with debootstrap
if ! "$docker" image inspect "$base_tag" >/dev/null 2>&1; then
    tarball="$cache/bookworm-minbase-slim.tar"
    if [ ! -s "$tarball" ]; then
        [ "$(id -u)" = 0 ] || die "debootstrap needs root"
        command -v debootstrap >/dev/null || die "no debootstrap (scripts/deps.sh image)"
        mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
            awk '{print $2}' | grep -v security | head -n 1 || true)
        [ -n "$mirror" ] || mirror=$(grep -h '^deb ' /etc/apt/sources.list 2>/dev/null |
            awk '{print $2}' | grep -v security | head -n 1 || true)
        [ -n "$mirror" ] || die "no Debian mirror in this machine's apt sources"
        root="$workdir/root"
        say "debootstrap --variant=minbase bookworm from $mirror"
        debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
            die "debootstrap failed; see $cache/debootstrap.log"
        # The apt sources of this machine (the main archive and its security
        # updates), and what the slim images leave out: documentation,
        # manual pages, translations, apt's caches.
        if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
            rm -f "$root/etc/apt/sources.list"
            cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/"
        fi
        cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
CFG
        cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Acquire::GzipIndexes "true";
CFG
        find "$root/usr/share/doc" -mindepth 2 ! -name copyright -delete 2>/dev/null || true
        find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
        rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
            "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
        : >"$root/etc/resolv.conf"
        tar -C "$root" --numeric-owner -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
        rm -rf "$root"
    fi
    say "docker import $tarball as $base_tag ($(du -h "$tarball" | cut -f1))"
    "$docker" import --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        "$tarball" "$base_tag" >/dev/null
fi

# -- the image, from the committed files and those git tracks (a clean context)
say "docker build -t $tag (base $base_tag)"
git -C "$repo" ls-files -z --cached --others --exclude-standard |
    (cd "$repo" && xargs -0 tar --ignore-failed-read -cf "$workdir/context.tar" 2>/dev/null) ||
    die "could not pack the build context"
start=$SECONDS
# The build stage is tagged too (strata-build:latest), so that it is no
# dangling image: a daemon of this script's own drops the dangling ones of
# earlier builds afterwards (vfs keeps every layer whole) and keeps what
# the next build can reuse.
: >"$cache/build.log"
for target in "--target build -t strata-build:latest" "-t $tag"; do
    # shellcheck disable=SC2086 # two words each, on purpose
    "$docker" build --network host --build-arg BASE_IMAGE="$base_tag" --build-arg JOBS="$jobs" \
        $target - <"$workdir/context.tar" >>"$cache/build.log" 2>&1 ||
        { tail -n 30 "$cache/build.log" >&2; die "docker build failed; see $cache/build.log"; }
done
if [ -n "$daemon_pid" ]; then "$docker" image prune -f >/dev/null || true; fi
say "built $tag in $((SECONDS - start)) s: $("$docker" image inspect --format '{{.Size}}' "$tag" |
    awk '{printf "%.0f MB", $1 / 1e6}'), user $("$docker" image inspect --format '{{.Config.User}}' "$tag")"
grep '^runtime packages:' "$cache/build.log" | tail -n 1 | sed 's/^/build.sh: /' || true

[ "$check" = 1 ] || exit 0

# -- a container from it: kcat -L, healthy, not root, a clean stop
command -v kcat >/dev/null || die "no kcat on this machine for the check"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
container="strata-image-check-$$"
"$docker" run -d --name "$container" --network host \
    -e STRATA_LISTENERS="PLAINTEXT://127.0.0.1:$port" \
    -e STRATA_NODE_ID=1 \
    "$tag" >/dev/null
up=0
for _ in $(seq 1 150); do
    if kcat -b "127.0.0.1:$port" -L -m 2 >"$workdir/kcat.out" 2>&1; then up=1; break; fi
    [ "$("$docker" inspect --format '{{.State.Running}}' "$container")" = true ] ||
        { "$docker" logs "$container" >&2 || true; die "the container stopped"; }
    sleep 0.2
done
[ "$up" = 1 ] || { "$docker" logs "$container" >&2 || true; die "kcat -L found no broker on 127.0.0.1:$port"; }
if ! grep -q "1 brokers:" "$workdir/kcat.out" || ! grep -q "broker 1 at 127.0.0.1:$port" "$workdir/kcat.out"; then
    cat "$workdir/kcat.out" >&2
    die "kcat -L did not show broker 1 at 127.0.0.1:$port"
fi
say "kcat -L: $(grep -m1 'brokers:' "$workdir/kcat.out" | sed 's/^ *//') $(grep -m1 'broker 1 at' "$workdir/kcat.out" | sed 's/^ *//')"
uid=$("$docker" exec "$container" id -u)
[ "$uid" != 0 ] || die "stratad runs as root in the container"
owner=$("$docker" exec "$container" stat -c '%U:%G' /var/lib/strata /run/strata/server.properties | sort -u)
[ "$owner" = strata:strata ] || die "/var/lib/strata and the properties file belong to '$owner', not strata:strata"
pid1=$("$docker" exec "$container" cat /proc/1/comm)
[ "$pid1" = stratad ] || die "pid 1 of the container is '$pid1', not stratad"
say "the container runs as $("$docker" exec "$container" id | cut -d' ' -f1-2), stratad as its pid 1; its data and config belong to $owner"
health=""
for _ in $(seq 1 60); do
    health=$("$docker" inspect --format '{{.State.Health.Status}}' "$container")
    [ "$health" = healthy ] && break
    sleep 1
done
[ "$health" = healthy ] || die "the container's health is '$health', not healthy"
say "health: $health"
seq 1 100 | kcat -b "127.0.0.1:$port" -P -t image-check
got=$(kcat -b "127.0.0.1:$port" -C -t image-check -e -q | wc -l)
[ "$got" = 100 ] || die "consumed $got of 100 records"
say "produced and consumed 100 records"
start=$SECONDS
"$docker" stop -t 30 "$container" >/dev/null
rc=$("$docker" inspect --format '{{.State.ExitCode}}' "$container")
"$docker" logs "$container" 2>&1 | grep -q 'stopped cleanly' || { "$docker" logs "$container" 2>&1 | tail -n 20 >&2; die "no clean stop"; }
[ "$rc" = 0 ] || die "stratad exited with $rc on docker stop"
say "docker stop: exit 0 after $((SECONDS - start)) s, 'stopped cleanly'"
say "image $tag works"

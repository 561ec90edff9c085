# bench/tiering/common.sh - what the tiering benchmarks share (sourced by
# run.sh and isolation.sh from the repository root, after their settings):
# the Release build, a work directory removed on exit, a Ceph RGW on
# loopback (tests/s3/rgw.sh) and its request count, one stratad tiered to
# it (start_broker CACHE_DIR, stop_broker; more settings in the array
# EXTRA_OVERRIDES), the CPU each side uses, and the wait until every
# closed segment of topic "tiered" is in the bucket.
#
# Uses: NAME (the script's name for messages), DATA_MB, SEGMENT_MB,
# PART_MB, CHUNK_MB, PARTITIONS, BUILD_DIR, SKIP_BUILD, CACHE_BYTES
# (remote.log.cache.size.bytes; default twice the data).

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target stratad strata strata-loadgen strata-tier-replay >/dev/null
fi
bin="$root/$BUILD_DIR/bin"
for b in stratad strata strata-loadgen strata-tier-replay; do
  [ -x "$bin/$b" ] || { echo "$NAME: $bin/$b is missing" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-tierbench.XXXXXX")
broker_pid=""
cleanup() {
  if [ -n "$broker_pid" ]; then
    kill "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
  fi
  tests/s3/rgw.sh stop "$work/rgw.env" >/dev/null 2>&1 || true
  # KEEP_LOG=FILE: stratad's log survives the run there
  if [ -n "${KEEP_LOG:-}" ] && [ -e "$work/stratad.log" ]; then cp "$work/stratad.log" "$KEEP_LOG"; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

RGW_MEMSTORE_BYTES=${RGW_MEMSTORE_BYTES:-8589934592} tests/s3/rgw.sh start "$work/rgw.env" >/dev/null
# shellcheck disable=SC1091
. "$work/rgw.env"
rgw_requests() {
  ceph --admin-daemon "$STRATA_RGW_DIR/run/client.rgw.s3.asok" perf dump |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["rgw"]["req"])'
}

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
bootstrap=127.0.0.1:$port
overrides=(
  --override "listeners=PLAINTEXT://$bootstrap"
  --override "log.dirs=$work/logs"
  --override "log.segment.bytes=$((SEGMENT_MB * 1048576))"
  --override "log.retention.check.interval.ms=1000"
  --override "remote.log.storage.system.enable=true"
  --override "log.remote.storage.enable=false"
  --override "log.local.retention.bytes=0"
  --override "remote.log.manager.task.interval.ms=1000"
  --override "remote.log.fetch.chunk.bytes=$((CHUNK_MB * 1048576))"
  --override "remote.log.cache.size.bytes=${CACHE_BYTES:-$((DATA_MB * 2 * 1048576))}"
  --override "objectstore.backend=s3"
  --override "objectstore.s3.endpoint=$STRATA_RGW_ENDPOINT"
  --override "objectstore.s3.bucket=$STRATA_RGW_BUCKET"
  --override "objectstore.s3.region=$STRATA_RGW_REGION"
  --override "objectstore.s3.access.key=$STRATA_RGW_ACCESS_KEY"
  --override "objectstore.s3.secret.key=$STRATA_RGW_SECRET_KEY"
  --override "objectstore.s3.part.size.bytes=$((PART_MB * 1048576))"
  "${EXTRA_OVERRIDES[@]}"
)

start_broker() { # CACHE_DIR
  # Served once its log says so: its listener takes connections (into the
  # backlog) before then, which a replay's time would include.
  local served
  served=$(grep -c "is serving at" "$work/stratad.log" 2>/dev/null || true)
  "$bin/stratad" --config config/server.properties "${overrides[@]}" \
    --override "remote.log.cache.dir=$1" >>"$work/stratad.log" 2>&1 &
  broker_pid=$!
  local i
  for i in $(seq 1 200); do
    if [ "$(grep -c "is serving at" "$work/stratad.log")" -gt "${served:-0}" ]; then
      return 0
    fi
    kill -0 "$broker_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "$NAME: stratad did not start:" >&2
  tail -n 20 "$work/stratad.log" >&2
  exit 1
}

stop_broker() {
  kill "$broker_pid" 2>/dev/null || true
  wait "$broker_pid" 2>/dev/null || true
  broker_pid=""
}

strata_cli() { "$bin/strata" "$1" --config config/server.properties "${overrides[@]}" "${@:2}"; }

now() { date +%s.%N; }

# CPU accounting, to say what bounds a replay on a machine this small:
# a snapshot is "machine-busy s3-server broker" in clock ticks (the S3
# server being every Ceph daemon rgw.sh started).
cpu_snap() {
  local pids p
  pids=$(cat "$STRATA_RGW_DIR"/run/*.pid 2>/dev/null || true)
  {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat
    for p in $pids; do awk '{ sub(/.*\) /, ""); s += $12 + $13 } END { print s + 0 }' "/proc/$p/stat" 2>/dev/null; done |
      awk '{ s += $1 } END { print s + 0 }'
    awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$broker_pid/stat"
  } | paste -sd' '
}
# BEFORE AFTER WALL_S -> "s3 A broker B other C" in cores (other: the
# consumer or curl, and the rest of the machine)
cpu_cores() {
  awk -v a="$1" -v b="$2" -v w="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    busy = (y[1] - x[1]) / hz / w; s3 = (y[2] - x[2]) / hz / w; br = (y[3] - x[3]) / hz / w
    printf "s3 %.2f broker %.2f other %.2f\n", s3, br, busy - s3 - br }'
}
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

# Settled: each partition keeps only its active segment, and its cached
# manifest (written after the bucket's) ends where that segment begins.
# Read from the local disk, so that waiting costs no S3 request.
settled() {
  python3 - "$work/logs" "$PARTITIONS" <<'PY'
import json, os, sys
logs, n = sys.argv[1], int(sys.argv[2])
for p in range(n):
    d = os.path.join(logs, "tiered-%d" % p)
    segs = sorted(f for f in os.listdir(d) if f.endswith(".log"))
    try:
        man = json.load(open(os.path.join(d, "remote-manifest.json")))
    except (OSError, ValueError):
        sys.exit(1)
    if len(segs) != 1 or not man["segments"] or man["segments"][-1]["last_offset"] + 1 != int(segs[0][:20]):
        sys.exit(1)
PY
}
wait_settled() { # -> seconds waited
  local i
  for i in $(seq 1 3000); do
    settled && return 0
    sleep 0.1
  done
  echo "$NAME: the uploads did not finish" >&2
  exit 1
}

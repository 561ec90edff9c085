#!/usr/bin/env bash
# bench/run.sh - produce and consume throughput of stratad, measured in one
# run against a sink that answers Produce without storing (the client's own
# limit on this machine).  See bench/README.md and docs/BENCHMARKS.md.
#
# For each record size (100 B, 1 KB) and each acks (1, all), REPEATS times:
# a fresh stratad (empty temporary log dir, free port) takes N records from
# strata-loadgen, and with acks=1 the same N records are read back from it;
# a fresh strata-sink takes the same N records; with acks=1, dd writes the
# same number of bytes.  Medians are printed, and the ratio stratad / sink.
#
# Settings (environment): REPEATS (3), PARTITIONS (1), N_100 (5000000),
# N_1K (2000000), SETTLE_S (4), BUILD_DIR (build-bench), COMPRESSION (the
# producer's compression.type, none), SKIP_BUILD=1 to reuse a build.
# Needs what scripts/deps.sh installs (cmake, a compiler, librdkafka-dev).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

REPEATS=${REPEATS:-3}
PARTITIONS=${PARTITIONS:-1}
N_100=${N_100:-5000000}
N_1K=${N_1K:-2000000}
SETTLE_S=${SETTLE_S:-4}
BUILD_DIR=${BUILD_DIR:-build-bench}
COMPRESSION=${COMPRESSION:-none}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target stratad strata-loadgen strata-sink >/dev/null
fi
bin="$root/$BUILD_DIR/bin"
for b in stratad strata-loadgen strata-sink; do
  [ -x "$bin/$b" ] || { echo "run.sh: $bin/$b is missing" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench.XXXXXX")
# At most one server and one strata-loadgen run at a time; a pid is
# forgotten as soon as its process has been reaped, so cleanup never
# signals a pid that may have been reused.
server_pid=""
loadgen_pid=""

# Stop, by pid, whatever this script still runs; remove the temporary files.
cleanup() {
  local pid
  for pid in $loadgen_pid $server_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bootstrap=""

# start_server NAME CMD...: run a server in the background and wait for its
# "bootstrap.servers=HOST:PORT" line.
start_server() {
  local name=$1
  shift
  "$@" >"$work/$name.out" 2>"$work/$name.err" &
  server_pid=$!
  local i
  for i in $(seq 1 100); do
    bootstrap=$(sed -n 's/^bootstrap.servers=//p' "$work/$name.out")
    [ -n "$bootstrap" ] && return 0
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "run.sh: $name did not start:" >&2
  tail -n 20 "$work/$name.err" >&2
  exit 1
}

stop_server() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# loadgen ARGS...: run strata-loadgen and keep its result line in $result;
# any failed record fails the benchmark.
result=""
loadgen() {
  # In the background and waited for, so that a signal to this script is
  # handled at once (bash runs traps only between foreground commands).
  "$bin/strata-loadgen" --quiet "$@" >"$work/result" &
  loadgen_pid=$!
  local rc=0
  wait "$loadgen_pid" || rc=$?
  loadgen_pid=""
  if [ "$rc" != 0 ]; then
    echo "run.sh: strata-loadgen $* failed" >&2
    exit 1
  fi
  result=$(cat "$work/result")
  case "$result" in
    *" errors=0") ;;
    *) echo "run.sh: strata-loadgen $*: $result" >&2; exit 1 ;;
  esac
}

field() { # field KEY LINE
  sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"
}

median() { # median VALUES...
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# The values of one row, one entry per run: stratad (s_), sink (k_),
# consume (c_), dd (d_).
s_rps=(); s_mbs=(); k_rps=(); k_mbs=(); c_rps=(); c_mbs=(); d_mbs=()

# settle: wait before a measurement that writes through the page cache.
# On a virtual machine, page-cache writes are fast into memory freed a
# moment ago and slow into memory the host has not backed (never touched,
# or handed back by the balloon's free page reporting, ~2 s after a free):
# the first write to such a page is a fault on the host.  Waiting lets what
# the previous measurement freed go back, so stratad and dd each start from
# the same state instead of inheriting warm pages from whatever ran before.
settle() { sleep "$SETTLE_S"; }

# measure_stratad N SIZE ACKS CONSUME: a fresh broker on an empty log dir;
# produce N records, then (CONSUME=1) read them back.
measure_stratad() {
  local n=$1 size=$2 acks=$3 consume=$4 dir="$work/logs"
  rm -rf "$dir"
  start_server stratad "$bin/stratad" --config config/server.properties \
    --override listeners=PLAINTEXT://127.0.0.1:0 --override "log.dirs=$dir" \
    --override "num.partitions=$PARTITIONS"
  settle
  loadgen produce -b "$bootstrap" -t bench -n "$n" -s "$size" -a "$acks" -z "$COMPRESSION"
  echo "    stratad produce: $result" >&2
  s_rps+=("$(field records_per_s "$result")"); s_mbs+=("$(field mb_per_s "$result")")
  if [ "$consume" = 1 ]; then
    loadgen consume -b "$bootstrap" -t bench -n "$n"
    echo "    stratad consume: $result" >&2
    c_rps+=("$(field records_per_s "$result")"); c_mbs+=("$(field mb_per_s "$result")")
  fi
  stop_server
  rm -rf "$dir"
}

# measure_sink N SIZE ACKS: a fresh sink; produce N records.
measure_sink() {
  local n=$1 size=$2 acks=$3
  start_server sink "$bin/strata-sink" --listen 127.0.0.1:0 --partitions "$PARTITIONS"
  loadgen produce -b "$bootstrap" -t bench -n "$n" -s "$size" -a "$acks" -z "$COMPRESSION"
  echo "    sink    produce: $result" >&2
  k_rps+=("$(field records_per_s "$result")"); k_mbs+=("$(field mb_per_s "$result")")
  stop_server
}

# measure_dd BYTES: how fast this machine takes BYTES of plain 1 MiB
# write()s into a new file beside the logs (no fsync): what writing through
# the page cache costs here, which every such log pays (see settle).
measure_dd() {
  local count=$(( ($1 + 1048575) / 1048576 )) line
  settle
  line=$(LC_ALL=C dd if=/dev/zero of="$work/dd" bs=1M count="$count" 2>&1 | grep copied)
  rm -f "$work/dd"
  echo "    dd write:        $line" >&2
  d_mbs+=("$(awk '{ printf "%.2f", $1 / $(NF - 3) / 1e6 }' <<<"$line")")
}

spread() { # spread VALUES... -> "min - max"
  printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo " - " hi }'
}

echo "strata produce/consume benchmark: $(nproc) CPUs, loopback, $PARTITIONS partition(s)," \
     "median of $REPEATS runs"
rev="?"
if head_rev=$(git rev-parse --short HEAD 2>/dev/null); then
  rev=$head_rev
  git diff --quiet HEAD -- base broker || rev="$rev (base/ or broker/ modified)"
fi
echo "stratad at $rev; $(uname -sr), librdkafka $(pkg-config --modversion rdkafka 2>/dev/null || echo '?')," \
     "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

produce_rows=()
consume_rows=()
dd_rows=()
for size in 100 1000; do
  if [ "$size" = 100 ]; then n=$N_100; label="100 B"; else n=$N_1K; label="1 KB"; fi
  for acks in 1 all; do
    consume=0
    [ "$acks" = 1 ] && consume=1
    s_rps=(); s_mbs=(); k_rps=(); k_mbs=(); c_rps=(); c_mbs=(); d_mbs=()
    echo "  $label acks=$acks, $n records:" >&2
    # The measurements take turns, so a slow moment of the machine falls
    # on all of them.
    for r in $(seq 1 "$REPEATS"); do
      measure_stratad "$n" "$size" "$acks" "$consume"
      measure_sink "$n" "$size" "$acks"
      [ "$consume" = 1 ] && measure_dd $((n * size))
    done
    smbs=$(median "${s_mbs[@]}"); kmbs=$(median "${k_mbs[@]}")
    produce_rows+=("$(printf '| %-6s | %-4s | %9s | %13s | %12s | %10s | %9s | %5s |' \
      "$label" "$acks" "$n" "$(median "${s_rps[@]}")" "$smbs" "$(median "${k_rps[@]}")" \
      "$kmbs" "$(ratio "$smbs" "$kmbs")")")
    if [ "$consume" = 1 ]; then
      consume_rows+=("$(printf '| %-6s | %9s | %13s | %12s | %17s |' "$label" "$n" \
        "$(median "${c_rps[@]}")" "$(median "${c_mbs[@]}")" "$(spread "${c_mbs[@]}")")")
      dd_rows+=("$(printf '| %-6s | %9s | %11s | %17s |' "$label" "$((n * size / 1000000))" \
        "$(median "${d_mbs[@]}")" "$(spread "${d_mbs[@]}")")")
    fi
  done
done

echo
echo "Produce (1 KB = 1000 B; MB = 10^6 bytes of record values; ratio = stratad MB/s / sink MB/s)"
echo
echo "| record | acks |   records | stratad rec/s | stratad MB/s | sink rec/s | sink MB/s | ratio |"
echo "|--------|------|-----------|---------------|--------------|------------|-----------|-------|"
printf '%s\n' "${produce_rows[@]}"
echo
echo "Consume from stratad (assign, from the beginning, after the acks=1 produce)"
echo
echo "| record |   records | stratad rec/s | stratad MB/s | MB/s min - max    |"
echo "|--------|-----------|---------------|--------------|-------------------|"
printf '%s\n' "${consume_rows[@]}"
echo
echo "Plain write() of the same bytes on this machine (dd bs=1M into a new file, no fsync)"
echo
echo "| record |        MB |     dd MB/s | MB/s min - max    |"
echo "|--------|-----------|-------------|-------------------|"
printf '%s\n' "${dd_rows[@]}"
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

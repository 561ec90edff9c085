#!/usr/bin/env bash
# bench/replication.sh - what replication costs a producer: acks=all with
# 1 KB records to a topic of replication factor 1 and to one of 3, on 3
# combined nodes of this machine (scripts/cluster.sh up 3), in one run.
# See bench/README.md and docs/BENCHMARKS.md.
#
# Two topics of PARTITIONS partitions (leaders spread over the nodes), RF 1
# with min.insync.replicas 1 and RF 3 with min.insync.replicas 2.  The
# measurements take turns between the topics, REPEATS times each, and the
# medians are printed:
#
#   1. peak: N_PEAK records as fast as the producer can send them;
#   2. latency at half of RF 1's peak (the median of step 1): LAT_S seconds
#      of records at that fixed rate to each topic, percentiles of each
#      record's time from when it was due to its delivery report;
#   3. the same at half of RF 3's peak, with a consumer in the producer's
#      process reading along: produce and end-to-end (due to delivery to the
#      consumer) percentiles.
#
# Settings (environment): REPEATS (3), PARTITIONS (3), N_PEAK (1000000),
# LAT_S (5), SETTLE_S (2), LINGER_MS (5), BUILD_DIR (build-bench),
# SKIP_BUILD=1 to reuse a build, DATA_DIR (where the nodes' logs go; default
# a temporary directory under /tmp, which must be a real disk for fsync to
# count), OVERRIDE (more broker settings, "k=v k=v").
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

REPEATS=${REPEATS:-3}
PARTITIONS=${PARTITIONS:-3}
N_PEAK=${N_PEAK:-1000000}
LAT_S=${LAT_S:-5}
SETTLE_S=${SETTLE_S:-2}
LINGER_MS=${LINGER_MS:-5}
BUILD_DIR=${BUILD_DIR:-build-bench}
SIZE=1000

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target stratad strata-loadgen >/dev/null
fi
bin="$root/$BUILD_DIR/bin"
for b in stratad strata-loadgen; do
  [ -x "$bin/$b" ] || { echo "replication.sh: $bin/$b is missing" >&2; exit 1; }
done

work=$(mktemp -d "${DATA_DIR:-${TMPDIR:-/tmp}}/strata-bench-repl.XXXXXX")
cluster="$work/cluster"
base=""
loadgen_pid=""

# Stop, by pid, whatever this script still runs (cluster.sh down signals
# the pids it wrote); remove the temporary files.
cleanup() {
  if [ -n "$loadgen_pid" ]; then
    kill "$loadgen_pid" 2>/dev/null || true
    wait "$loadgen_pid" 2>/dev/null || true
  fi
  if [ -n "$base" ]; then
    STRATA_BIN_DIR="$bin" bash "$root/scripts/cluster.sh" down --dir "$cluster" \
      --base-port "$base" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A base port below 32768 (outside Linux's ephemeral range) whose 2 x 3
# ports nobody listens on.
for b in $(seq 21000 64 32000); do
  busy=0
  for p in $(seq "$b" $((b + 5))); do
    if (echo >/dev/tcp/127.0.0.1/"$p") 2>/dev/null; then busy=1; break; fi
  done
  if [ "$busy" = 0 ]; then base=$b; break; fi
done
[ -n "$base" ] || { echo "replication.sh: no free ports" >&2; exit 1; }

# Retention keeps the disk bounded (every run writes GBs): 256 MB per
# partition replica, checked every 5 s.
overrides=(--override log.retention.check.interval.ms=5000)
for kv in ${OVERRIDE:-}; do overrides+=(--override "$kv"); done
# cluster.sh up prints the bootstrap list; base is set before it starts
# anything, so cleanup stops what it started even if it fails half way.
bootstrap=$(STRATA_BIN_DIR="$bin" bash "$root/scripts/cluster.sh" up 3 --dir "$cluster" \
  --base-port "$base" --no-build "${overrides[@]}" | sed -n 's/^bootstrap.servers=//p')
[ -n "$bootstrap" ] || { echo "replication.sh: the cluster did not start" >&2; exit 1; }

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
    echo "replication.sh: strata-loadgen $* failed" >&2
    exit 1
  fi
  result=$(cat "$work/result")
  case "$result" in
    *" errors=0" | mode=topic*) ;;
    *) echo "replication.sh: strata-loadgen $*: $result" >&2; exit 1 ;;
  esac
}

field() { # field KEY LINE
  sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"
}

median() { # median VALUES...
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

spread() { # spread VALUES... -> "min - max"
  printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo " - " hi }'
}

# settle: as in bench/run.sh, let the pages the previous run freed go back
# to the host before the next writes (a VM's balloon), and let retention
# and the followers finish.
settle() { sleep "$SETTLE_S"; }

common=(-b "$bootstrap" -s "$SIZE" -a all -l "$LINGER_MS")

# node_cpu: user + system CPU seconds the 3 nodes have used so far (their
# pids from cluster.sh's pid files), to tell what a run cost them.
node_cpu() {
  local i pid total=0 t
  for i in 1 2 3; do
    pid=$(cat "$cluster/node-$i/pid")
    t=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    total=$((total + t))
  done
  awk -v t="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}
# cpu_per_gb BEFORE AFTER RECORDS: node CPU seconds per GB of record values.
cpu_per_gb() {
  awk -v a="$1" -v b="$2" -v n="$3" -v s="$SIZE" 'BEGIN { printf "%.2f", (b - a) / (n * s / 1e9) }'
}

echo "strata replication benchmark: $(nproc) CPUs, 3 combined nodes on loopback, $PARTITIONS" \
     "partitions per topic, 1 KB records, acks=all, median of $REPEATS runs"
rev="?"
if head_rev=$(git rev-parse --short HEAD 2>/dev/null); then
  rev=$head_rev
  git diff --quiet HEAD -- base broker tiering || rev="$rev (base/, broker/ or tiering/ modified)"
fi
flush=$(sed -n 's/^log.flush.on.ack=//p' config/server.properties)
for kv in ${OVERRIDE:-}; do case "$kv" in log.flush.on.ack=*) flush=${kv#*=} ;; esac; done
echo "stratad at $rev; $(uname -sr), librdkafka $(pkg-config --modversion rdkafka 2>/dev/null || echo '?')," \
     "log.flush.on.ack=${flush:-true}, linger.ms $LINGER_MS, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

topic_cfg=(-c remote.storage.enable=false -c retention.bytes=268435456)
loadgen topic -b "$bootstrap" -t rf1 -p "$PARTITIONS" -R 1 -c min.insync.replicas=1 "${topic_cfg[@]}"
echo "  $result" >&2
leaders1=$(field leaders "$result")
loadgen topic -b "$bootstrap" -t rf3 -p "$PARTITIONS" -R 3 -c min.insync.replicas=2 "${topic_cfg[@]}"
echo "  $result" >&2
leaders3=$(field leaders "$result")

# 1. peak
p1_rps=(); p1_mbs=(); p3_rps=(); p3_mbs=(); p1_cpu=(); p3_cpu=()
echo "  peak, $N_PEAK records:" >&2
for r in $(seq 1 "$REPEATS"); do
  for rf in 1 3; do
    settle
    c0=$(node_cpu)
    loadgen produce "${common[@]}" -t "rf$rf" -n "$N_PEAK"
    cpu=$(cpu_per_gb "$c0" "$(node_cpu)" "$N_PEAK")
    echo "    RF $rf: $result node_cpu_s_per_gb=$cpu" >&2
    if [ "$rf" = 1 ]; then
      p1_rps+=("$(field records_per_s "$result")"); p1_mbs+=("$(field mb_per_s "$result")")
      p1_cpu+=("$cpu")
    else
      p3_rps+=("$(field records_per_s "$result")"); p3_mbs+=("$(field mb_per_s "$result")")
      p3_cpu+=("$cpu")
    fi
  done
done
peak1=$(median "${p1_rps[@]}")
peak3=$(median "${p3_rps[@]}")

# lat_runs RATE E2E: REPEATS x (RF 1, RF 3) at RATE records/s; fills
# l1_50 l1_99 l3_50 l3_99 (and e1_*, e3_* with E2E=1) and got1 got3.
lat_runs() {
  local rate=$1 e2e=$2 n rf extra=()
  n=$(awk -v r="$rate" -v s="$LAT_S" 'BEGIN { printf "%d", r * s }')
  [ "$e2e" = 1 ] && extra=(-E)
  l1_50=(); l1_99=(); l3_50=(); l3_99=(); e1_50=(); e1_99=(); e3_50=(); e3_99=(); got1=(); got3=()
  echo "  at $rate records/s, $n records${extra[*]:+, consumer reading along}:" >&2
  for r in $(seq 1 "$REPEATS"); do
    for rf in 1 3; do
      settle
      loadgen produce "${common[@]}" -t "rf$rf" -n "$n" -r "$rate" -L "${extra[@]}"
      echo "    RF $rf: $result" >&2
      eval "l${rf}_50+=(\"\$(field lat_p50_ms \"\$result\")\")"
      eval "l${rf}_99+=(\"\$(field lat_p99_ms \"\$result\")\")"
      eval "got${rf}+=(\"\$(field records_per_s \"\$result\")\")"
      if [ "$e2e" = 1 ]; then
        eval "e${rf}_50+=(\"\$(field e2e_p50_ms \"\$result\")\")"
        eval "e${rf}_99+=(\"\$(field e2e_p99_ms \"\$result\")\")"
      fi
    done
  done
}

# 2. at half of RF 1's peak
rate_a=$(awk -v p="$peak1" 'BEGIN { printf "%d", p / 2 }')
lat_runs "$rate_a" 0
a1_50=$(median "${l1_50[@]}"); a1_99=$(median "${l1_99[@]}")
a3_50=$(median "${l3_50[@]}"); a3_99=$(median "${l3_99[@]}")
a1_got=$(median "${got1[@]}"); a3_got=$(median "${got3[@]}")
a1_sp=$(spread "${l1_99[@]}"); a3_sp=$(spread "${l3_99[@]}")

# 3. at half of RF 3's peak, with a consumer
rate_b=$(awk -v p="$peak3" 'BEGIN { printf "%d", p / 2 }')
lat_runs "$rate_b" 1
b1_50=$(median "${l1_50[@]}"); b1_99=$(median "${l1_99[@]}")
b3_50=$(median "${l3_50[@]}"); b3_99=$(median "${l3_99[@]}")
b1_got=$(median "${got1[@]}"); b3_got=$(median "${got3[@]}")
b1_sp=$(spread "${l1_99[@]}"); b3_sp=$(spread "${l3_99[@]}")
f1_50=$(median "${e1_50[@]}"); f1_99=$(median "${e1_99[@]}")
f3_50=$(median "${e3_50[@]}"); f3_99=$(median "${e3_99[@]}")
f1_sp=$(spread "${e1_99[@]}"); f3_sp=$(spread "${e3_99[@]}")

mb() { awk -v r="$1" -v s="$SIZE" 'BEGIN { printf "%.2f", r * s / 1e6 }'; }

echo
echo "Leaders of partitions 0..$((PARTITIONS - 1)): RF 1 topic $leaders1, RF 3 topic $leaders3"
echo
echo "Peak produce, acks=all, $N_PEAK records of 1 KB (MB = 10^6 bytes of record values)"
echo
echo "| topic | records/s | MB/s | MB/s min - max | nodes' CPU s per GB |"
echo "|-------|-----------|------|----------------|---------------------|"
echo "| RF 1, min.insync 1 | $peak1 | $(median "${p1_mbs[@]}") | $(spread "${p1_mbs[@]}") | $(median "${p1_cpu[@]}") |"
echo "| RF 3, min.insync 2 | $peak3 | $(median "${p3_mbs[@]}") | $(spread "${p3_mbs[@]}") | $(median "${p3_cpu[@]}") |"
echo
echo "RF 3 / RF 1 throughput: $(ratio "$peak3" "$peak1") (aim >= 0.3)"
echo
echo "Produce latency, acks=all (due time to delivery report, ms), ${LAT_S} s at a fixed rate"
echo
echo "| rate | topic | achieved rec/s | p50 | p99 | p99 min - max |"
echo "|------|-------|----------------|-----|-----|---------------|"
echo "| $rate_a/s ($(mb "$rate_a") MB/s, 1/2 RF 1 peak) | RF 1 | $a1_got | $a1_50 | $a1_99 | $a1_sp |"
echo "| $rate_a/s ($(mb "$rate_a") MB/s, 1/2 RF 1 peak) | RF 3 | $a3_got | $a3_50 | $a3_99 | $a3_sp |"
echo "| $rate_b/s ($(mb "$rate_b") MB/s, 1/2 RF 3 peak, consumer on) | RF 1 | $b1_got | $b1_50 | $b1_99 | $b1_sp |"
echo "| $rate_b/s ($(mb "$rate_b") MB/s, 1/2 RF 3 peak, consumer on) | RF 3 | $b3_got | $b3_50 | $b3_99 | $b3_sp |"
echo
echo "RF 3 p99 / RF 1 p99 at 1/2 RF 1 peak: $(ratio "$a3_99" "$a1_99") (aim <= 3);" \
     "at 1/2 RF 3 peak: $(ratio "$b3_99" "$b1_99")"
echo
echo "End to end, acks=all, at $rate_b/s (due time to delivery to a consumer in the producer's process, ms)"
echo
echo "| topic | p50 | p99 | p99 min - max |"
echo "|-------|-----|-----|---------------|"
echo "| RF 1 | $f1_50 | $f1_99 | $f1_sp |"
echo "| RF 3 | $f3_50 | $f3_99 | $f3_sp |"
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# bench/idempotent.sh - what idempotence and transactions cost a producer:
# 1 KB records with acks=all from librdkafka with enable.idempotence=false
# and =true, and in transactions of 100 records, to one stratad on this
# machine, in one run.  See bench/README.md and
# docs/BENCHMARKS.md.
#
# Each measurement starts a fresh stratad (empty temporary log dir, free
# port, config/server.properties otherwise), creates a topic of PARTITIONS
# partitions with the first record, and sends N records with
# strata-loadgen (linger.ms LINGER_MS, batches up to 1 MB) as one of:
#
#   plain       librdkafka's defaults (enable.idempotence=false, up to
#               1,000,000 requests in flight per connection);
#   plain-5     the same with max.in.flight 5, the idempotent producer's
#               limit (KIP-98): what idempotence costs the broker alone;
#   idempotent  --idempotent: InitProducerId first, every batch with its
#               producer id, epoch and sequence, checked by the broker
#               against the producer's state in each partition;
#   txn-100     --txn 100: a transactional.id, transactions of 100 records
#               each (AddPartitionsToTxn, the records, EndTxn commit with
#               its markers), one after another.
#
# The four take turns, REPEATS times each; the medians and the ratios
# idempotent / plain (aim >= 0.95), idempotent / plain-5 and txn-100 /
# idempotent are printed.  TXN_N (N / 5) records go in txn-100 runs: a
# producer commits one transaction at a time.
#
# Settings (environment): REPEATS (5), PARTITIONS (3), N (1000000), SETTLE_S
# (3), LINGER_MS (5), BUILD_DIR (build-bench), SKIP_BUILD=1 to reuse a
# build, OVERRIDE (more broker settings, "k=v k=v").
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

REPEATS=${REPEATS:-5}
PARTITIONS=${PARTITIONS:-3}
N=${N:-1000000}
SETTLE_S=${SETTLE_S:-3}
LINGER_MS=${LINGER_MS:-5}
TXN_N=${TXN_N:-$((N / 5))}
BUILD_DIR=${BUILD_DIR:-build-bench}
SIZE=1000

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target stratad strata-loadgen >/dev/null
fi
bin="$root/$BUILD_DIR/bin"
for b in stratad strata-loadgen; do
  [ -x "$bin/$b" ] || { echo "idempotent.sh: $bin/$b is missing" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-idem.XXXXXX")
# At most one stratad and one strata-loadgen at a time; a pid is forgotten
# once reaped, so cleanup never signals a pid that may have been reused.
server_pid=""
loadgen_pid=""

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
overrides=()
for kv in ${OVERRIDE:-}; do overrides+=(--override "$kv"); done

# start_stratad: a fresh broker on an empty log dir; waits for its
# "bootstrap.servers=HOST:PORT" line.
start_stratad() {
  rm -rf "$work/logs"
  "$bin/stratad" --config config/server.properties --override listeners=PLAINTEXT://127.0.0.1:0 \
    --override "log.dirs=$work/logs" --override "num.partitions=$PARTITIONS" \
    --override remote.log.storage.system.enable=false "${overrides[@]}" \
    >"$work/stratad.out" 2>"$work/stratad.err" &
  server_pid=$!
  local i
  for i in $(seq 1 100); do
    bootstrap=$(sed -n 's/^bootstrap.servers=//p' "$work/stratad.out")
    [ -n "$bootstrap" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "idempotent.sh: stratad did not start:" >&2
  tail -n 20 "$work/stratad.err" >&2
  exit 1
}

stop_stratad() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
  rm -rf "$work/logs"
}

# loadgen ARGS...: run strata-loadgen, keep its result line in $result; any
# failed record fails the benchmark.
result=""
loadgen() {
  "$bin/strata-loadgen" --quiet "$@" >"$work/result" &
  loadgen_pid=$!
  local rc=0
  wait "$loadgen_pid" || rc=$?
  loadgen_pid=""
  result=$(cat "$work/result")
  if [ "$rc" != 0 ]; then
    echo "idempotent.sh: strata-loadgen $* failed: $result" >&2
    if kill -0 "$server_pid" 2>/dev/null; then
      echo "idempotent.sh: stratad (pid $server_pid) is running; its log ends:" >&2
    else
      local st=0
      wait "$server_pid" || st=$?
      server_pid=""
      echo "idempotent.sh: stratad exited with status $st; its log ends:" >&2
    fi
    tail -n 30 "$work/stratad.out" "$work/stratad.err" >&2
    exit 1
  fi
  case "$result" in
    *" errors=0") ;;
    *) echo "idempotent.sh: strata-loadgen $*: $result" >&2; exit 1 ;;
  esac
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
spread() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo " - " hi }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
# cpu_s: user + system CPU seconds stratad has used so far
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$server_pid/stat"; }

echo "strata idempotent producer benchmark: $(nproc) CPUs, loopback, 1 stratad, $PARTITIONS partitions," \
     "$N records of 1 KB, acks=all, median of $REPEATS runs"
rev="?"
if head_rev=$(git rev-parse --short HEAD 2>/dev/null); then
  rev=$head_rev
  git diff --quiet HEAD -- base broker || rev="$rev (base/ or broker/ modified)"
fi
flush=$(sed -n 's/^log.flush.on.ack=//p' config/server.properties)
for kv in ${OVERRIDE:-}; do case "$kv" in log.flush.on.ack=*) flush=${kv#*=} ;; esac; done
echo "stratad at $rev; $(uname -sr), librdkafka $(pkg-config --modversion rdkafka 2>/dev/null || echo '?')," \
     "log.flush.on.ack=${flush:-true}, linger.ms $LINGER_MS, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

declare -A rps mbs cpus
modes=(plain plain-5 idempotent txn-100)
for r in $(seq 1 "$REPEATS"); do
  for mode in "${modes[@]}"; do
    extra=()
    [ "$mode" = plain-5 ] && extra=(--max-in-flight 5)
    [ "$mode" = idempotent ] && extra=(--idempotent)
    n=$N
    if [ "$mode" = txn-100 ]; then extra=(--txn 100); n=$TXN_N; fi
    start_stratad
    sleep "$SETTLE_S"
    c0=$(cpu_s)
    loadgen produce -b "$bootstrap" -t bench -n "$n" -s "$SIZE" -a all -l "$LINGER_MS" "${extra[@]}"
    cpu=$(awk -v a="$c0" -v b="$(cpu_s)" -v n="$n" -v s="$SIZE" 'BEGIN { printf "%.2f", (b - a) / (n * s / 1e9) }')
    echo "    $mode: $result stratad_cpu_s_per_gb=$cpu" >&2
    rps[$mode]+="$(field records_per_s "$result") "
    mbs[$mode]+="$(field mb_per_s "$result") "
    cpus[$mode]+="$cpu "
    stop_stratad
  done
done
# shellcheck disable=SC2086 # the lists are space-separated on purpose
plain=$(median ${rps[plain]}); plain5=$(median ${rps[plain-5]}); idem=$(median ${rps[idempotent]})
txn=$(median ${rps[txn-100]})

echo
echo "Produce, acks=all, $N records of 1 KB to $PARTITIONS partitions (MB = 10^6 bytes of record values)"
echo
echo "| producer | records/s | MB/s | MB/s min - max | stratad CPU s per GB |"
echo "|----------|-----------|------|----------------|----------------------|"
row() { # row LABEL MODE
  # shellcheck disable=SC2086
  echo "| $1 | $(median ${rps[$2]}) | $(median ${mbs[$2]}) | $(spread ${mbs[$2]}) | $(median ${cpus[$2]}) |"
}
row "plain (librdkafka defaults)" plain
row "plain, max.in.flight 5" plain-5
row "idempotent (enable.idempotence=true)" idempotent
row "transactional, 100 records per transaction ($TXN_N records)" txn-100
echo
echo "idempotent / plain throughput: $(ratio "$idem" "$plain") (aim >= 0.95);" \
     "idempotent / plain with max.in.flight 5: $(ratio "$idem" "$plain5");" \
     "transactional / idempotent: $(ratio "$txn" "$idem")"
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

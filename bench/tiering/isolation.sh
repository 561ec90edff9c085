#!/usr/bin/env bash
# bench/tiering/isolation.sh - what a replay of history from the bucket
# does to live produce latency, against a replay of local data, in one
# run, against a Ceph RGW on loopback (tests/s3/rgw.sh) (issue 15).
#
#   1. stratad (Release, tiered to RGW, log.local.retention.bytes 0) takes
#      DATA_MB MiB into topic "tiered" (PARTITIONS partitions, SEGMENT_MB
#      MiB segments) and waits until every closed segment is in the bucket
#      and gone locally; the same into topic "local" (not tiered).  The
#      disk chunk cache is CACHE_MB (0: none; chunks live in memory only,
#      remote.log.cache.memory.bytes, 128 MiB, well below the data), so a
#      replay that starts again from offset 0 downloads every chunk again:
#      each replay of "tiered" is cold.  (Before chunks went to memory
#      first, this bench ran with a 256 MiB disk cache, which every replay
#      churned through.)
#   2. REPEATS times, each phase PHASE_S seconds long:
#      alone   strata-loadgen produces RATE records/s of RECORD bytes to
#              topic "live" (1 partition, acks=all, linger.ms 0) and reports each
#              record's latency from when it was due to its delivery
#              report (p50, p99, p999, max);
#      idle    strata-tier-replay replays "tiered" from 0 to its tiered end,
#              again and again, with no producer: the replay's MB/s on an
#              otherwise idle broker;
#      cold    both at once: the producer's latency during cold replays,
#              and the replays' MB/s;
#      local   the producer during replays of "local" (from the disk and
#              page cache);
#      solo    replays of "local" alone, no producer: their MB/s on an
#              otherwise idle broker;
#      mixed   replays of "local" and of "tiered" at once, no producer:
#              what the cold replays leave the local reader (its MB/s
#              against solo; downloads yield to a fetch of local data that
#              waits on the broker) and what they keep (against idle).
# Replay MB/s are segment bytes (.log) over the replays that finished
# within the phase.  The script also prints the cores each side used
# (from /proc: the S3 server's daemons, stratad, the rest).
#
# Settings (environment): DATA_MB (1024), PARTITIONS (2), SEGMENT_MB (64),
# PART_MB (8), CHUNK_MB (4), CACHE_MB (0), RATE (2000), RECORD (1000),
# PHASE_S (20), REPEATS (2), PHASES ("alone idle cold local solo mixed"),
# BUILD_DIR (build-bench-tier), SKIP_BUILD=1,
# BROKER_OVERRIDES ("key=value ..." for stratad, e.g. to compare settings),
# RGW_MEMSTORE_BYTES (4 GiB).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

DATA_MB=${DATA_MB:-1024}
PARTITIONS=${PARTITIONS:-2}
SEGMENT_MB=${SEGMENT_MB:-64}
PART_MB=${PART_MB:-8}
CHUNK_MB=${CHUNK_MB:-4}
CACHE_MB=${CACHE_MB:-0}
RATE=${RATE:-2000}
RECORD=${RECORD:-1000}
SECONDS_PER_PHASE=${PHASE_S:-20}
REPEATS=${REPEATS:-2}
PHASES=${PHASES:-alone idle cold local solo mixed}
BUILD_DIR=${BUILD_DIR:-build-bench-tier}
RGW_MEMSTORE_BYTES=${RGW_MEMSTORE_BYTES:-4294967296}
export RGW_MEMSTORE_BYTES

NAME=isolation.sh
CACHE_BYTES=$((CACHE_MB * 1048576))
EXTRA_OVERRIDES=()
for kv in ${BROKER_OVERRIDES:-}; do EXTRA_OVERRIDES+=(--override "$kv"); done
# shellcheck source=bench/tiering/common.sh
. "$here/common.sh"

start_broker "$work/cache"
python3 - "$port" "$PARTITIONS" <<'PY'
import sys
sys.path.insert(0, "tests/integration")
from kwire import Conn
c = Conn(int(sys.argv[1]), timeout=60)
for topic, parts, remote in (("tiered", int(sys.argv[2]), "true"), ("local", int(sys.argv[2]), "false"),
                             ("live", 1, "false")):
    err = c.create_topic(topic, parts, configs={"remote.storage.enable": remote})
    if err:
        sys.exit("isolation.sh: CreateTopics %s: error %d" % (topic, err))
PY

count=$((DATA_MB * 1048576 / RECORD))
for t in tiered local; do
  "$bin/strata-loadgen" produce --bootstrap "$bootstrap" --topic "$t" --count "$count" --size "$RECORD" -q \
    >"$work/produce-$t.txt"
done
wait_settled

strata_cli bucket ls tiered- >"$work/objects.txt"
remote_bytes=$(awk '$3 ~ /\.log$/ { s += $1 } END { print s }' "$work/objects.txt")
strata_cli tiering --bootstrap "$bootstrap" status >"$work/status.txt"
ends_of() { # TOPIC COLUMN(5: tiered end, 6: high watermark)
  awk -v t="$1" -v c="$2" '$1 == t { e[$2] = $c } END { for (p = 0; p in e; p++) printf "%s%s", (p ? "," : ""), e[p] }' "$work/status.txt"
}
tiered_ends=$(ends_of tiered 5)
local_ends=$(ends_of local 6)
local_bytes=$(cat "$work"/logs/local-*/*.log | wc -c)

field() { tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k { v = $2 } END { print (v == "" ? "-" : v) }'; }

# Replays of TOPIC (ENDS, BYTES each) one after another until STOPFILE
# exists; one "bytes seconds" line per finished replay into OUT.
replay_loop() { # TOPIC ENDS BYTES STOPFILE OUT
  local t
  while [ ! -e "$4" ]; do
    t=$(now)
    "$bin/strata-tier-replay" --bootstrap "$bootstrap" --topic "$1" --ends "$2" >/dev/null ||
      { echo "$NAME: replay of $1 failed" >&2; tail -n 20 "$work/stratad.log" >&2; return 1; }
    echo "$3 $(elapsed "$t")" >>"$5"
  done
}
loop_mbps() { awk '{ b += $1; s += $2 } END { if (s > 0) printf "%.1f", b / 1e6 / s; else print "-" }' "$1"; }
producer() { # -> the result line
  "$bin/strata-loadgen" produce --bootstrap "$bootstrap" --topic live --acks all --linger-ms 0 --rate "$RATE" --latency \
    --count $((RATE * SECONDS_PER_PHASE)) --size "$RECORD"
}

for rep in $(seq 1 "$REPEATS"); do
  for phase in $PHASES; do
    stop="$work/stop-$rep-$phase"
    out="$work/replays-$rep-$phase"
    out2="$work/replays-local-$rep-$phase"
    : >"$out"
    : >"$out2"
    c0=$(cpu_snap)
    t0=$(now)
    lpid=""
    lpid2=""
    case $phase in
      idle | cold) replay_loop tiered "$tiered_ends" "$remote_bytes" "$stop" "$out" & lpid=$! ;;
      local | solo) replay_loop local "$local_ends" "$local_bytes" "$stop" "$out" & lpid=$! ;;
      mixed)
        replay_loop tiered "$tiered_ends" "$remote_bytes" "$stop" "$out" & lpid=$!
        replay_loop local "$local_ends" "$local_bytes" "$stop" "$out2" & lpid2=$! ;;
    esac
    if [ "$phase" = idle ] || [ "$phase" = solo ] || [ "$phase" = mixed ]; then
      sleep "$SECONDS_PER_PHASE"
      result="-"
    else
      result=$(producer)
      [ "$(field errors "$result")" = 0 ] || { echo "$NAME: produce failed: $result" >&2; exit 1; }
    fi
    wall=$(elapsed "$t0")
    cores=$(cpu_cores "$c0" "$(cpu_snap)" "$wall")
    touch "$stop"
    [ -z "$lpid" ] || wait "$lpid"
    [ -z "$lpid2" ] || wait "$lpid2"
    echo "$rep $phase $(field lat_p50_ms "$result") $(field lat_p99_ms "$result")" \
      "$(field lat_p999_ms "$result") $(field lat_max_ms "$result") $(loop_mbps "$out")" \
      "$(wc -l <"$out") $cores $(loop_mbps "$out2")" >>"$work/results"
    echo "rep $rep $phase: $(tail -n1 "$work/results" | cut -d' ' -f3-)" >&2
  done
done
stop_broker

median() { sort -g | awk 'NF && $1 != "-" { v[++n] = $1 } END { print (n ? v[int((n + 1) / 2)] : "-") }'; }
col() { awk -v p="$1" -v c="$2" '$2 == p { print $c }' "$work/results" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }

echo "# isolation: live produce $RATE x $RECORD B/s, acks=all, ${SECONDS_PER_PHASE} s per phase;" \
  "history $DATA_MB MiB, $PARTITIONS partitions, segments $SEGMENT_MB MiB, chunks $CHUNK_MB MiB," \
  "disk cache $CACHE_MB MiB; RGW on loopback; $REPEATS runs, medians${BROKER_OVERRIDES:+; stratad: $BROKER_OVERRIDES}"
echo
echo "| phase | produce p50 ms | p99 ms | p999 ms | max ms | replay MB/s | local replay MB/s beside it |"
echo "|---|---|---|---|---|---|---|"
for phase in $PHASES; do
  echo "| $phase | $(col "$phase" 3) | $(col "$phase" 4) | $(col "$phase" 5) | $(col "$phase" 6) | $(col "$phase" 7) |" \
    "$(col "$phase" 15) |"
done
echo
echo "p99 during cold replays / alone: $(ratio "$(col cold 4)" "$(col alone 4)");" \
  "during local replays / alone: $(ratio "$(col local 4)" "$(col alone 4)");" \
  "cold replay MB/s with the producer / idle: $(ratio "$(col cold 7)" "$(col idle 7)")"
echo "local replay MB/s beside cold replays / alone: $(ratio "$(col mixed 15)" "$(col solo 7)");" \
  "cold replay MB/s beside local replays / idle: $(ratio "$(col mixed 7)" "$(col idle 7)")"
echo
echo "runs (rep phase p50 p99 p999 max replay-MB/s replays cores local-replay-MB/s):"
sed 's/^/  /' "$work/results"

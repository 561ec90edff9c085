#!/usr/bin/env bash
# bench/tiering/run.sh - replays of a tiered topic from the bucket against
# curl reading the same objects, and from the chunk cache against a local
# replay, with the S3 requests each costs; all in one run, against a Ceph
# RGW on loopback started here (tests/s3/rgw.sh).
#
#   1. stratad (Release, tiered to RGW, local.retention.bytes 0) takes
#      DATA_MB MiB of RECORD-byte records from strata-loadgen into topic
#      "tiered" (PARTITIONS partitions, SEGMENT_MB MiB segments); the run
#      waits until every closed segment is in the bucket and gone locally.
#      The same amount goes into topic "local" (remote.storage.enable=false).
#   2. REPEATS times:
#      cold   stratad restarted with a fresh, empty remote.log.cache.dir;
#             strata-tier-replay reads every partition of "tiered" from 0 to
#             its tiered end (exactly the segments in the bucket);
#      curl   the same .log objects in CHUNK_MB ranges (the broker's chunk
#             size), CURL_PARALLEL at once, into /dev/null;
#      warm   the cold replay again: the chunk cache holds everything;
#      local  strata-tier-replay reads "local" from 0 to its high watermark.
#      Cold and curl take turns going first; an untimed cold replay and curl
#      pass come before the first repetition, and each cold replay starts
#      after the previous cache directory was removed.
# Rates are MB/s (10^6 bytes) of segment bytes (.log files: batches as
# stored), over each process's wall time, start-up included for both sides.
# S3 requests are radosgw's own count (its perf counters through the admin
# socket): during the upload (produce start to settled) per GiB of segments
# uploaded, and during each cold replay per GiB replayed.
#
# Settings (environment): DATA_MB (2048), PARTITIONS (2), SEGMENT_MB (256),
# PART_MB (8, the object store's default: objectstore.s3.part.size.bytes;
# a segment above it goes up in at most 4 parts, larger when needed), CHUNK_MB (4: remote.log.fetch.chunk.bytes), CURL_PARALLEL (16),
# RECORD (1000), REPEATS (3), BUILD_DIR (build-bench-tier), SKIP_BUILD=1 to
# reuse a build, BROKER_OVERRIDES ("key=value ..." for stratad, to compare
# settings), RGW_MEMSTORE_BYTES (8 GiB: the OSD keeps objects in RAM).
# Needs what scripts/deps.sh installs plus the RGW packages (see rgw.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

DATA_MB=${DATA_MB:-2048}
PARTITIONS=${PARTITIONS:-2}
SEGMENT_MB=${SEGMENT_MB:-256}
PART_MB=${PART_MB:-8}
CHUNK_MB=${CHUNK_MB:-4}
CURL_PARALLEL=${CURL_PARALLEL:-16}
RECORD=${RECORD:-1000}
REPEATS=${REPEATS:-3}
BUILD_DIR=${BUILD_DIR:-build-bench-tier}

NAME=run.sh
EXTRA_OVERRIDES=()
for kv in ${BROKER_OVERRIDES:-}; do EXTRA_OVERRIDES+=(--override "$kv"); done
# shellcheck source=bench/tiering/common.sh
. "$here/common.sh"

start_broker "$work/cache-0"
python3 - "$port" "$PARTITIONS" <<'PY'
import sys
sys.path.insert(0, "tests/integration")
from kwire import Conn
c = Conn(int(sys.argv[1]), timeout=60)
for topic, remote in (("tiered", "true"), ("local", "false")):
    err = c.create_topic(topic, int(sys.argv[2]), configs={"remote.storage.enable": remote})
    if err:
        sys.exit("run.sh: CreateTopics %s: error %d" % (topic, err))
PY

count=$((DATA_MB * 1048576 / RECORD))
req0=$(rgw_requests)
t0=$(now)
"$bin/strata-loadgen" produce --bootstrap "$bootstrap" --topic tiered --count "$count" --size "$RECORD" -q \
  >"$work/produce-tiered.txt"
produce_s=$(elapsed "$t0")

wait_settled
upload_s=$(elapsed "$t0")
req_upload=$(($(rgw_requests) - req0))

"$bin/strata-loadgen" produce --bootstrap "$bootstrap" --topic local --count "$count" --size "$RECORD" -q \
  >"$work/produce-local.txt"

# What the bucket holds: the .log objects (curl's work list, and the bytes
# of a replay) and each partition's tiered end.
strata_cli bucket ls tiered- >"$work/objects.txt"
remote_bytes=$(awk '$3 ~ /\.log$/ { s += $1 } END { print s }' "$work/objects.txt")
remote_objects=$(awk '$3 ~ /\.log$/ { n++ } END { print n }' "$work/objects.txt")
strata_cli tiering --bootstrap "$bootstrap" status >"$work/status.txt"
ends_of() { # TOPIC COLUMN(5: tiered end, 6: high watermark)
  awk -v t="$1" -v c="$2" '$1 == t { e[$2] = $c } END { for (p = 0; p in e; p++) printf "%s%s", (p ? "," : ""), e[p] }' "$work/status.txt"
}
tiered_ends=$(ends_of tiered 5)
local_ends=$(ends_of local 6)
local_bytes=$(cat "$work"/logs/local-*/*.log | wc -c)

chunk=$((CHUNK_MB * 1048576))
{
  first=1
  while read -r size _ key; do
    case $key in *.log) ;; *) continue ;; esac
    for ((off = 0; off < size; off += chunk)); do
      [ $first = 1 ] || echo next
      first=0
      end=$((off + chunk - 1))
      [ $end -ge "$size" ] && end=$((size - 1))
      printf 'fail\naws-sigv4 = "aws:amz:%s:s3"\nuser = "%s:%s"\n' "$STRATA_RGW_REGION" \
        "$STRATA_RGW_ACCESS_KEY" "$STRATA_RGW_SECRET_KEY"
      printf 'header = "x-amz-content-sha256: UNSIGNED-PAYLOAD"\noutput = "/dev/null"\n'
      printf 'range = "%d-%d"\nurl = "%s/%s/%s"\n' "$off" "$end" "$STRATA_RGW_ENDPOINT" "$STRATA_RGW_BUCKET" "$key"
    done
  done <"$work/objects.txt"
} >"$work/get.curl"
chmod 600 "$work/get.curl"
curl_gets=$(grep -c '^range' "$work/get.curl")

mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f\n", b / 1e6 / s }'; }
replay() { # TOPIC ENDS -> wall seconds
  local t
  t=$(now)
  "$bin/strata-tier-replay" --bootstrap "$bootstrap" --topic "$1" --ends "$2" >>"$work/replays.txt" ||
    { echo "run.sh: replay of $1 failed" >&2; tail -n 20 "$work/stratad.log" >&2; exit 1; }
  elapsed "$t"
}
curl_get() {
  local t
  t=$(now)
  curl --no-progress-meter --parallel --parallel-immediate --parallel-max "$CURL_PARALLEL" \
    --config "$work/get.curl" >/dev/null || { echo "run.sh: curl failed" >&2; exit 1; }
  elapsed "$t"
}

: >"$work/cold" ; : >"$work/curl" ; : >"$work/warm" ; : >"$work/local" ; : >"$work/coldreq"
# Warm-up (untimed): one cold replay and one curl pass.  On this kind of
# virtual machine the first pass that fills fresh pages (here the chunk
# cache) is much slower than later ones, whoever makes it.
stop_broker
start_broker "$work/cache-warmup"
replay tiered "$tiered_ends" >/dev/null
curl_get >/dev/null
prev="$work/cache-warmup"
for rep in $(seq 1 "$REPEATS"); do
  stop_broker
  rm -rf "$prev"  # its pages go back before the next cold replay fills new ones
  prev="$work/cache-$rep"
  start_broker "$prev"
  if [ $((rep % 2)) = 1 ]; then order="cold curl"; else order="curl cold"; fi
  for who in $order; do
    c0=$(cpu_snap)
    if [ "$who" = cold ]; then
      r0=$(rgw_requests)
      s=$(replay tiered "$tiered_ends")
      echo $(($(rgw_requests) - r0)) >>"$work/coldreq"
      mbps "$remote_bytes" "$s" >>"$work/cold"
    else
      s=$(curl_get)
      mbps "$remote_bytes" "$s" >>"$work/curl"
    fi
    echo "$who: $(cpu_cores "$c0" "$(cpu_snap)" "$s")" >>"$work/cpu-$rep"
  done
  r0=$(rgw_requests)
  s=$(replay tiered "$tiered_ends")
  mbps "$remote_bytes" "$s" >>"$work/warm"
  warm_req=$(($(rgw_requests) - r0))
  s=$(replay local "$local_ends")
  mbps "$local_bytes" "$s" >>"$work/local"
  echo "rep $rep: cold $(tail -n1 "$work/cold") curl $(tail -n1 "$work/curl") warm $(tail -n1 "$work/warm")" \
    "local $(tail -n1 "$work/local") MB/s; cold replay $(tail -n1 "$work/coldreq") requests, warm $warm_req" >&2
  echo "rep $rep: cores used (of $(nproc)): $(paste -sd';' "$work/cpu-$rep" | sed 's/;/; /')" >&2
done
stop_broker

median() { sort -g | awk 'NF { v[++n] = $1 } END { print v[int((n + 1) / 2)] }'; }
cold=$(median <"$work/cold")
curl_mbps=$(median <"$work/curl")
warm=$(median <"$work/warm")
local_mbps=$(median <"$work/local")
coldreq=$(median <"$work/coldreq")
gib() { awk -v n="$1" -v b="$2" 'BEGIN { printf "%.1f", n / (b / 1073741824) }'; }

echo "# tiering: $DATA_MB MiB of $RECORD-byte records, $PARTITIONS partitions, segments $SEGMENT_MB MiB," \
  "parts $PART_MB MiB, chunks $CHUNK_MB MiB, curl $CURL_PARALLEL in flight; RGW on loopback; $REPEATS runs, medians"
echo "produce $(awk -v s="$produce_s" -v b="$((count * RECORD))" 'BEGIN { printf "%.1f", b / 1e6 / s }') MB/s;" \
  "in the bucket $(awk -v s="$upload_s" 'BEGIN { printf "%.1f", s }') s after the first record:" \
  "$remote_objects segments, $(awk -v b="$remote_bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB"
echo
echo "| replay | MB/s | against | MB/s | ratio |"
echo "|---|---|---|---|---|"
echo "| cold (empty chunk cache) | $cold | curl, $curl_gets ranged GETs | $curl_mbps | $(awk -v a="$cold" -v b="$curl_mbps" 'BEGIN { printf "%.2f", a / b }') |"
echo "| warm (chunk cache) | $warm | local topic | $local_mbps | $(awk -v a="$warm" -v b="$local_mbps" 'BEGIN { printf "%.2f", a / b }') |"
echo
echo "| S3 requests | count | per GiB |"
echo "|---|---|---|"
echo "| upload of $remote_objects segments | $req_upload | $(gib "$req_upload" "$remote_bytes") |"
echo "| cold replay (median) | $coldreq | $(gib "$coldreq" "$remote_bytes") |"
echo
pairs() { paste -d' ' "$1" "$2" | awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 / $2 }'; }
echo "runs (MB/s): cold $(paste -sd' ' "$work/cold"); curl $(paste -sd' ' "$work/curl");" \
  "warm $(paste -sd' ' "$work/warm"); local $(paste -sd' ' "$work/local"); cold requests $(paste -sd' ' "$work/coldreq")"
echo "ratios per run: cold / curl $(pairs "$work/cold" "$work/curl"); warm / local $(pairs "$work/warm" "$work/local")"

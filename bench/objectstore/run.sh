#!/usr/bin/env bash
# bench/objectstore/run.sh - put and ranged-get throughput through the
# object store layer against curl, on the same objects, against the same
# server (Ceph RGW on loopback, started here), in the same run.
#
# For 1, 4 and 16 requests in flight, REPEATS times (the order of the two
# clients alternating between repetitions):
#   put  COUNT files of SIZE_MB MiB: `curl --parallel -T` vs os_bench (file
#        sources: the layer also reads each file once for its CRC32C)
#   get  every object in RANGE_MB MiB ranges: `curl --parallel -r` into
#        /dev/null vs os_bench into memory (the path a reader uses; the copy
#        into its buffers is work curl skips when writing to /dev/null)
#   get-null  the same, os_bench also writing into /dev/null (a file sink)
# Each measurement is the wall time of the whole process (curl's or
# os_bench's), so both pay their start-up.  Medians are printed in MB/s
# (10^6 bytes per second) with the ratio layer / curl.
#
# The RGW started here collects the space of overwritten objects after 5 s
# (tests/s3/rgw.sh) and may hold 6 GiB in RAM (RGW_MEMSTORE_BYTES).  Run on
# a quiet machine: with two cores, anything else running moves the figures
# more than the clients differ.
#
# Settings (environment): COUNT (32), SIZE_MB (8), RANGE_MB (4), REPEATS (5),
# INFLIGHT ("1 4 16"), BUILD_DIR (build-bench-os), SKIP_BUILD=1 to reuse a
# build, RGW_ENV=FILE to use a running RGW (as written by tests/s3/rgw.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

COUNT=${COUNT:-32}
SIZE_MB=${SIZE_MB:-8}
RANGE_MB=${RANGE_MB:-4}
REPEATS=${REPEATS:-5}
INFLIGHT=${INFLIGHT:-"1 4 16"}
BUILD_DIR=${BUILD_DIR:-build-bench-os}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target os_bench >/dev/null
fi
os_bench=$BUILD_DIR/bin/os_bench

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-osbench.XXXXXX")
started_rgw=0
cleanup() {
  if [ "$started_rgw" = 1 ]; then tests/s3/rgw.sh stop "$work/rgw.env" >/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ -n "${RGW_ENV:-}" ]; then
  env_file=$RGW_ENV
else
  env_file=$work/rgw.env
  RGW_MEMSTORE_BYTES=${RGW_MEMSTORE_BYTES:-6442450944} tests/s3/rgw.sh start "$env_file" >/dev/null
  started_rgw=1
fi
# shellcheck disable=SC1090
. "$env_file"
endpoint=$STRATA_RGW_ENDPOINT/$STRATA_RGW_BUCKET
prefix=bench-$$

mkdir -p "$work/data"
for i in $(seq 0 $((COUNT - 1))); do
  head -c $((SIZE_MB * 1048576)) /dev/urandom >"$work/data/$(printf 'obj-%03d' "$i")"
done
total=$((COUNT * SIZE_MB * 1048576))
size=$((SIZE_MB * 1048576))
range=$((RANGE_MB * 1048576))

# curl config files: one transfer per section, every option repeated (a
# "next" starts afresh).  SigV4 as S3 wants it: signed by curl, payload
# unsigned, body length known.  (--silent does not quiet curl 7.88's
# parallel progress meter when transfers come from a config file;
# --no-progress-meter does.)
common() {
  printf 'fail\naws-sigv4 = "aws:amz:%s:s3"\nuser = "%s:%s"\n' \
    "$STRATA_RGW_REGION" "$STRATA_RGW_ACCESS_KEY" "$STRATA_RGW_SECRET_KEY"
  printf 'header = "x-amz-content-sha256: UNSIGNED-PAYLOAD"\noutput = "/dev/null"\n'
}
{
  for i in $(seq 0 $((COUNT - 1))); do
    [ "$i" -gt 0 ] && echo next
    common
    name=$(printf 'obj-%03d' "$i")
    printf 'upload-file = "%s"\nurl = "%s/%s/%s"\n' "$work/data/$name" "$endpoint" "$prefix" "$name"
  done
} >"$work/put.curl"
{
  first=1
  for i in $(seq 0 $((COUNT - 1))); do
    name=$(printf 'obj-%03d' "$i")
    for ((off = 0; off < size; off += range)); do
      [ $first = 1 ] || echo next
      first=0
      common
      end=$((off + range - 1))
      [ $end -ge $size ] && end=$((size - 1))
      printf 'range = "%d-%d"\nurl = "%s/%s/%s"\n' "$off" "$end" "$endpoint" "$prefix" "$name"
    done
  done
} >"$work/get.curl"
chmod 600 "$work/put.curl" "$work/get.curl"

now() { date +%s.%N; }
# mbps SECONDS -> MB/s of the whole batch
mbps() { awk -v b="$total" -v s="$1" 'BEGIN { printf "%.1f", b / 1e6 / s }'; }

timed() { # command... ; prints the seconds it took, fails with it
  local t0 t1
  t0=$(now)
  "$@" >/dev/null || return 1
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}

run_curl() { # put|get|get-null inflight
  local what=$1
  [ "$what" = get-null ] && what=get
  curl --no-progress-meter --parallel --parallel-immediate --parallel-max "$2" \
    --config "$work/$what.curl"
}
run_layer() { # put|get|get-null inflight
  if [ "$1" = put ]; then
    "$os_bench" --env "$env_file" --mode put --dir "$work/data" --count "$COUNT" \
      --inflight "$2" --prefix "$prefix"
  else
    "$os_bench" --env "$env_file" --mode get --count "$COUNT" --size "$size" --range "$range" \
      --inflight "$2" --prefix "$prefix" $([ "$1" = get-null ] && echo --discard)
  fi
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Warm up (untimed): the first batch written to a fresh bucket is slow
# whoever sends it.
run_layer put 4 >/dev/null || { echo "run.sh: warm-up put failed" >&2; exit 1; }

echo "# object store vs curl: $COUNT objects of $SIZE_MB MiB, ranges of $RANGE_MB MiB, RGW on loopback, $REPEATS runs, medians"
printf '%-8s %9s %12s %12s %7s\n' op inflight "layer MB/s" "curl MB/s" ratio
results=()
for k in $INFLIGHT; do
  for op in put get get-null; do
    : >"$work/layer.txt"
    : >"$work/curl.txt"
    for rep in $(seq 1 "$REPEATS"); do
      if [ $((rep % 2)) = 1 ]; then order="curl layer"; else order="layer curl"; fi
      for who in $order; do
        t=$(timed "run_$who" "$op" "$k") || { echo "run.sh: $who $op with $k in flight failed" >&2; exit 1; }
        echo "$(mbps "$t")" >>"$work/$who.txt"
      done
    done
    l=$(median <"$work/layer.txt")
    c=$(median <"$work/curl.txt")
    r=$(awk -v l="$l" -v c="$c" 'BEGIN { printf "%.2f", l / c }')
    printf '%-8s %9s %12s %12s %7s   (layer: %s; curl: %s)\n' "$op" "$k" "$l" "$c" "$r" \
      "$(paste -sd' ' "$work/layer.txt")" "$(paste -sd' ' "$work/curl.txt")"
    results+=("| $op | $k | $l | $c | $r |")
  done
done
echo
echo "| operation | in flight | layer MB/s | curl MB/s | layer / curl |"
echo "|---|---|---|---|---|"
printf '%s\n' "${results[@]}"

#!/usr/bin/env bash
# Run each fuzz harness for SECONDS from the seed corpus.
# Usage: tests/fuzz/run.sh FUZZ_BUILD_DIR SECONDS
# The corpus grows in FUZZ_BUILD_DIR/corpus/<harness> across runs; a crash
# leaves its input in FUZZ_BUILD_DIR/artifacts and fails the run.
set -euo pipefail
bin=$1
secs=$2
src=$(cd "$(dirname "$0")" && pwd)
fixtures=$src/../unit/fixtures
mkdir -p "$bin/artifacts"
rc=0
for h in request batch response sasl; do
  mkdir -p "$bin/corpus/$h"
  seeds=("$src/corpus/$h")
  [ "$h" = request ] && seeds+=("$fixtures")
  log=$bin/fuzz_$h.log
  if "$bin/fuzz_$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$bin/artifacts/$h-" \
       "$bin/corpus/$h" "${seeds[@]}" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    echo "fuzz_$h: ${secs}s, ${runs:-?} inputs, no crash; corpus $(ls "$bin/corpus/$h" | wc -l) files"
  else
    echo "fuzz_$h FAILED; its log ends:"
    tail -60 "$log"
    rc=1
  fi
done
exit $rc

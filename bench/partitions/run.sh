#!/usr/bin/env bash
# bench/partitions/run.sh - 50,000 partitions on one broker: created in
# batches (CreateTopics of 10 topics x 1,000 partitions), then a restart;
# prints the start-up time, RSS and open descriptors (total and per
# partition, against an empty broker measured in the same run) and proves
# produce + fetch with kcat on partitions picked at random.  Not a test:
# docs/BENCHMARKS.md records its output.
#
# Settings (environment): PARTITIONS (50000), PER_TOPIC (1000), NOFILE
# (4096: the broker's RLIMIT_NOFILE), SAMPLE (20), BUILD_DIR (build-bench),
# SKIP_BUILD=1 to reuse a build.  Needs kcat and python3.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

BUILD_DIR=${BUILD_DIR:-build-bench}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target stratad >/dev/null
fi
[ -x "$BUILD_DIR/bin/stratad" ] || { echo "run.sh: $BUILD_DIR/bin/stratad is missing" >&2; exit 1; }

export STRATA_BIN_DIR="$root/$BUILD_DIR/bin" PYTHONDONTWRITEBYTECODE=1
exec python3 "$here/partitions.py" --partitions "${PARTITIONS:-50000}" --per-topic "${PER_TOPIC:-1000}" \
  --nofile "${NOFILE:-4096}" --sample "${SAMPLE:-20}"

#!/usr/bin/env bash
# bench/metadata_commit.sh - metadata commit latency, a single node next to
# 3 combined nodes (scripts/cluster.sh up 3) on loopback in the same run,
# fsync on (defaults): COUNT CreateTopics of a 1-partition topic sent one
# at a time to the active controller; prints p50/p99 end to end and at the
# Raft (the controller's propose-to-applied time, its logger.debug=
# quorum.commit line) for both, and the ratios.  Not a test:
# docs/BENCHMARKS.md records its output.
#
# Settings (environment): COUNT (500), WARMUP (20), DATA_DIR (where the
# nodes' logs go; default a temporary directory under /tmp, which must be
# a real disk for fsync to mean anything), BUILD_DIR (build-bench),
# SKIP_BUILD=1 to reuse a build.  Needs python3.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

BUILD_DIR=${BUILD_DIR:-build-bench}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target stratad >/dev/null
fi
[ -x "$BUILD_DIR/bin/stratad" ] || { echo "metadata_commit.sh: $BUILD_DIR/bin/stratad is missing" >&2; exit 1; }

export STRATA_BIN_DIR="$root/$BUILD_DIR/bin" PYTHONDONTWRITEBYTECODE=1
args=(--count "${COUNT:-500}" --warmup "${WARMUP:-20}")
[ -n "${DATA_DIR:-}" ] && args+=(--dir "$DATA_DIR")
exec python3 "$here/metadata_commit.py" "${args[@]}"

#!/usr/bin/env bash
# Build Strata and run one local broker with the embedded defaults
# (config/server.properties: data under ./data, port 9092).
# Extra arguments go to stratad, e.g. --override listeners=PLAINTEXT://localhost:9093
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh run
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_TESTS=OFF >/dev/null
cmake --build build -j2 >/dev/null
mkdir -p data
echo "starting stratad; stop it with Ctrl-C"
exec build/bin/stratad --config config/server.properties "$@"

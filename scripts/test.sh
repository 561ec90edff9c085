#!/usr/bin/env bash
# Build Strata with warnings as errors and run every test (unit, object
# store conformance on the file backend and a real Ceph RGW, integration
# tests with kcat, librdkafka and kafkajs); then the same tests again in an
# AddressSanitizer + UndefinedBehaviorSanitizer build.
# STRATA_TEST_SKIP_ASAN=1 skips the second pass.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test

if [ ! -d tests/integration/js/node_modules/kafkajs ]; then
  (cd tests/integration/js && npm ci --no-audit --no-fund --loglevel=error)
fi

jobs=2
echo "== release build (-Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON -DSTRATA_TESTS=ON >/dev/null
cmake --build build -j"$jobs"
echo "== tests"
(cd build && ctest --output-on-failure --no-tests=error)

if [ "${STRATA_TEST_SKIP_ASAN:-0}" != 1 ]; then
  echo "== sanitizer build (ASan + UBSan)"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=ON -DSTRATA_WERROR=ON -DSTRATA_TESTS=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  echo "== tests under ASan + UBSan"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure --no-tests=error)
fi
echo "== all tests passed"

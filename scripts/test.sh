#!/usr/bin/env bash
# Build Strata with warnings as errors and run every test (unit, object
# store conformance on the file backend and a real Ceph RGW, integration
# tests with kcat, librdkafka and kafkajs); then the tests again in an
# AddressSanitizer + UndefinedBehaviorSanitizer build, all but a few that
# run in the first pass only:
#   - the suites labelled `slow` (integration.crash, .tiering.crash,
#     .tiering.outage; tests/integration/CMakeLists.txt says why each):
#     their time goes into real kills and S3 outages, and the code they
#     reach runs under the sanitizers in other suites;
#   - fuzz_smoke, which a sanitizer build neither builds nor registers:
#     the harnesses are the same clang build with ASan and UBSan in both.
# STRATA_TEST_ASAN_ALL=1 runs the `slow` suites under the sanitizers too;
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
  asan_select=(-LE slow)
  if [ "${STRATA_TEST_ASAN_ALL:-0}" = 1 ]; then
    asan_select=()
    echo "== tests under ASan + UBSan (all of them: STRATA_TEST_ASAN_ALL=1)"
  else
    echo "== tests under ASan + UBSan (not the label slow: STRATA_TEST_ASAN_ALL=1 runs them too)"
  fi
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure --no-tests=error ${asan_select[@]+"${asan_select[@]}"})
fi
echo "== all tests passed"

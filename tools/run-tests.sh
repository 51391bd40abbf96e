#!/usr/bin/env bash
# The tests, from a fresh Debian 12 machine: install the dependencies, build, run every
# CTest test. With --sanitize: a separate ASan + UBSan build (build-asan/) and its tests.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
if [ "${1:-}" = "--sanitize" ]; then
  tools/build.sh build-asan -DARBITER_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DARBITER_BUILD_BENCH=OFF
  # OpenBLAS's threads and dlclose'd plugins leave reachable memory LeakSanitizer would report.
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
else
  tools/build.sh build
  ctest --test-dir build --output-on-failure -j "$(nproc)"
fi

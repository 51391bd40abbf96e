#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: install the dependencies, build, list the
# plugins the embedded default configuration finds, and run the C example.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh build
echo
echo "== arbiter plugins (embedded default configuration)"
build/bin/arbiter plugins
echo
echo "== the C example (examples/c_gemm_rmsnorm.c)"
build/bin/c_gemm_rmsnorm

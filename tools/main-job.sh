#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: install the dependencies, build, list the
# plugins the embedded default configuration finds, then tune the default shape suite
# (bench/suites/cpu-small.toml) on whatever backends are present: every candidate is
# verified and timed, and a per-problem table of candidates, verdicts, median times,
# winners and margins is printed. With a usable GPU (the cublaslt plugin loads) the
# Llama-3-8B suite is tuned on it too. The tuning table goes to build/tuning-table.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh build
echo
echo "== arbiter plugins (embedded default configuration)"
build/bin/arbiter plugins
echo
echo "== arbiter tune --suite=bench/suites/cpu-small.toml"
build/bin/arbiter tune --suite=bench/suites/cpu-small.toml --table=build/tuning-table.toml
plugins=$(build/bin/arbiter plugins 2>/dev/null || true)  # not piped: pipefail and grep -q
if grep -q '^cublaslt ' <<<"$plugins"; then
  echo
  echo "== arbiter tune --suite=bench/suites/llama3-8b.toml --device=cuda"
  build/bin/arbiter tune --suite=bench/suites/llama3-8b.toml --device=cuda --table=build/tuning-table.toml
fi

#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: install the dependencies, build, list the
# plugins the embedded default configuration finds, then tune the default shape suite
# (bench/suites/cpu-small.toml) on whatever backends are present: every candidate is
# verified and timed, and a per-problem table of candidates, verdicts, median times,
# winners and margins is printed. The tuning table goes to build/tuning-table.toml.
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

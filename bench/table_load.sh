#!/usr/bin/env bash
# The cost of loading a tuning table into a context (bench/table_load.cpp), as Markdown:
#   1. instructions (callgrind, exact and repeatable): Context::Context with a 10,000-entry
#      table minus without one (--toggle-collect on the constructor; plugin hashes come from
#      a file hash cache of this run's own, ARBITER_CACHE_DIR, filled by runs before);
#   2. times: medians of 7 runs in one process (read, toml++, SHA-256, context);
#   3. a ~100 MiB table of this machine's 10,000 entries and other devices' entries: time and
#      peak RSS of fresh processes with and without it.
#
#   bench/table_load.sh <build-dir> [mib]        mib: the large table's size (default 100)
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 <build-dir> [mib]" >&2; exit 2; }
bin="$(cd "$1" && pwd)/bin/arbiter_bench_table_load"
mib=${2:-100}
[[ -x "$bin" ]] || { echo "$0: $bin not found; build the arbiter_bench_table_load target" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "$0: valgrind is not installed" >&2; exit 2; }
unset ARBITER_PLUGIN_PATH
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ)"
export ARBITER_CACHE_DIR="$work/cache"
"$bin" --write="$work/t10k.toml"
sleep 4  # the cache keeps no file changed in the last 3 s
for run in 1 2; do "$bin" --load="$work/t10k.toml" >/dev/null; "$bin" --load=- >/dev/null; done
ir() {
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" --toggle-collect='arbiter::Context::Context*' \
    "$bin" --load="$1" >/dev/null 2>"$work/cg.err"
  awk '/^totals:/ {print $2; exit}' "$work/cg.out"
}
with=$(ir "$work/t10k.toml")
without=$(ir -)
echo
echo "## Instructions (callgrind, Context::Context)"
echo "- with the 10,000-entry table:  $with"
echo "- without a table:              $without"
echo "- the table's load:             $((with - without))"
echo "command: valgrind --tool=callgrind --toggle-collect='arbiter::Context::Context*' $bin --load=<table|->"
echo
echo "## Times (medians of 7 runs)"
"$bin"
echo
echo "## A ${mib} MiB table (fresh processes)"
"$bin" --big --mib="$mib"

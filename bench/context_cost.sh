#!/usr/bin/env bash
# The cost of creating a context at a program's start, with and without the file hash cache
# (core/plugin/file_hash_cache.hpp), for the default config, without the OpenBLAS plugin,
# and for the cpu plugin alone; and the default config with the hash cache warm but
# libopenblas loaded at the plugin's entry, as before the openblas plugin's memo
# (plugins/openblas/openblas_memo.hpp: a folder in the memo file's place makes it unusable).
#
#   bench/context_cost.sh <build-dir> [rounds]
#
# Each sample is one fresh process of arbiter_bench_context timing its arb_context_create
# (steady_clock, microseconds). The variants are interleaved round by round, so drift on a
# shared machine touches them alike; the report gives each variant's median, 20th and 80th
# percentiles over the rounds (default 30), then callgrind's instruction count of one create
# per variant (the whole process, start-up included) when valgrind is installed.
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 <build-dir> [rounds]" >&2; exit 2; }
build=$(cd "$1" && pwd)
rounds=${2:-30}
bin="$build/bin/arbiter_bench_context"
[[ -x "$bin" ]] || { echo "$0: $bin not found; build the arbiter_bench_context target" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[plugins]\nenable = ["cpu"]\n' >"$work/cpu-only.toml"
printf '[plugins]\ndisable = ["openblas"]\n' >"$work/no-openblas.toml"
mkdir -p "$work/cache-no-memo/openblas-config"

# name | environment | config
variants=(
  "default config, no hash cache|ARBITER_CACHE_DIR=|"
  "default config, hash cache warm|ARBITER_CACHE_DIR=$work/cache|"
  "default config, hash cache warm, libopenblas loaded at entry (no memo)|ARBITER_CACHE_DIR=$work/cache-no-memo|"
  "default config without openblas, hash cache warm|ARBITER_CACHE_DIR=$work/cache|$work/no-openblas.toml"
  "cpu plugin only, no hash cache|ARBITER_CACHE_DIR=|$work/cpu-only.toml"
  "cpu plugin only, hash cache warm|ARBITER_CACHE_DIR=$work/cache|$work/cpu-only.toml"
)
run() {  # variant -> microseconds
  local env config
  IFS='|' read -r _ env config <<<"$1"
  env "$env" "$bin" ${config:+"$config"}
}
# Warm the cache (and the page cache) once; plugin files changed in the last 3 s are not
# remembered, so wait that long after a fresh build.
sleep 3
for v in "${variants[@]}"; do run "$v" >/dev/null; done
for ((r = 0; r < rounds; ++r)); do
  for i in "${!variants[@]}"; do run "${variants[$i]}" >>"$work/samples-$i"; done
done

echo "# Context creation cost"
echo
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) vCPUs; GPU: $(nvidia-smi -L 2>/dev/null | head -1 || true)${GPU:-none}"
echo "Command: bench/context_cost.sh $1 $rounds ($(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo
echo "| variant | median ms | p20 ms | p80 ms | Ir (callgrind, whole process) |"
echo "| --- | ---: | ---: | ---: | ---: |"
# Under valgrind the CPU reads differently (CPUID is emulated), and the OpenBLAS memo is kept per
# CPU: one run under valgrind first remembers OpenBLAS as valgrind's CPU shows it.
if command -v valgrind >/dev/null; then
  ARBITER_CACHE_DIR="$work/cache" valgrind --tool=callgrind --callgrind-out-file="$work/cg" "$bin" >/dev/null 2>&1 || true
fi
for i in "${!variants[@]}"; do
  stats=$(sort -n "$work/samples-$i" | awk '{v[NR]=$1} END {
    n = NR;
    printf "%.2f | %.2f | %.2f", v[int((n+1)/2)]/1000, v[int(n*0.2)+1]/1000, v[int(n*0.8)]/1000 }')
  ir="-"
  if command -v valgrind >/dev/null; then
    IFS='|' read -r _ env config <<<"${variants[$i]}"
    env "$env" valgrind --tool=callgrind --callgrind-out-file="$work/cg" "$bin" ${config:+"$config"} >/dev/null 2>&1 || true
    ir=$(awk '/^summary:/ {print $2}' "$work/cg" 2>/dev/null | head -1)
    ir=$(printf "%'d" "${ir:-0}" 2>/dev/null || echo "$ir")
  fi
  echo "| ${variants[$i]%%|*} | $stats | $ir |"
done
echo
echo "method: $rounds rounds, the variants interleaved in each; one fresh process per sample,"
echo "timing arb_context_create alone (steady_clock); the cache warmed by one run first."

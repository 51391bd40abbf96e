#!/usr/bin/env bash
# The Python package's overhead per call in instructions (callgrind), on gemm f32 8x8x8, next to
# the C call underneath and NumPy's own matmul: the same difference method as
# bench/dispatch_overhead.sh (two call counts; their difference cancels start-up, imports,
# context creation and warm-up).
#
#   bench/python_overhead.sh <build-dir>     (a build with the Python package and the benchmarks)
#
# Variants (bench/python_overhead.py): numpy.matmul, arbiter.gemm(out=d), arbiter.gemm, extension,
# plan.run(out=d), plan.run, plan extension; and from arbiter_bench_dispatch: api_gemm (arb_gemm
# from C), plan_gemm (arb_plan_run from C) and direct_gemm (the kernel's launch pointer). LOW and
# HIGH call counts from the environment (default 2000 and 12000).
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 <build-dir>" >&2; exit 2; }
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
low=${LOW:-2000}
high=${HIGH:-12000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
unset ARBITER_PLUGIN_PATH ARBITER_CONFIG

total() { awk '/^(summary|totals):/ {print $2; exit}' "$1"; }
declare -A ir
run() {  # run <name> <calls> <command...>
  local name=$1 calls=$2
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$out/$name.$calls" "$@" >"$out/$name.$calls.log" 2>&1 ||
    { echo "$0: failed: $*" >&2; cat "$out/$name.$calls.log" >&2; exit 1; }
  ir[$name.$calls]=$(total "$out/$name.$calls")
}
# Every run trusts the CPU plugin by path and SHA-256, so that no verification runs (its cost
# varies with the gate's random seeds and would not cancel between the two call counts).
export ARBITER_BENCH_TRUST_PATH="$build/lib/arbiter/plugins/arbiter_cpu.so"
ARBITER_BENCH_TRUST_SHA256=$(sha256sum "$ARBITER_BENCH_TRUST_PATH" | cut -d' ' -f1)
export ARBITER_BENCH_TRUST_SHA256
variants=("numpy.matmul" "arbiter.gemm(out=d)" "arbiter.gemm" "extension" "plan.run(out=d)" "plan.run" "plan extension")
for calls in "$low" "$high"; do
  for v in "${variants[@]}"; do
    PYTHONPATH="$build/python" run "$v" "$calls" "$python" "$root/bench/python_overhead.py" --only "$v" --calls "$calls"
  done
  if [[ -x "$build/bin/arbiter_bench_dispatch" ]]; then
    for mode in api_gemm plan_gemm direct_gemm; do run "$mode" "$calls" "$build/bin/arbiter_bench_dispatch" "$mode" "$calls"; done
  fi
done
per_call() { awk -v a="${ir[$1.$low]}" -v b="${ir[$1.$high]}" -v n=$((high - low)) 'BEGIN {printf "%.0f", (b - a) / n}'; }

echo "## Python overhead per call (instructions, gemm f32 8x8x8)"
echo
echo "| variant | what runs | Ir per call |"
echo "| --- | --- | ---: |"
describe() {
  case $1 in
    numpy.matmul) echo "np.matmul(a, b, out=d)" ;;
    "arbiter.gemm(out=d)") echo "ctx.gemm(a, b, out=d): Python layer + extension + C call" ;;
    arbiter.gemm) echo "ctx.gemm(a, b): the same, allocating the result" ;;
    extension) echo "the extension's method called directly (nanobind, DLPack import, C call)" ;;
    "plan.run(out=d)") echo "plan.run(a, b, out=d): Python layer + plan checks + arb_plan_run" ;;
    plan.run) echo "plan.run(a, b): the same, allocating the result" ;;
    "plan extension") echo "the plan's extension method called directly" ;;
    api_gemm) echo "arb_gemm from C (arbiter_bench_dispatch)" ;;
    plan_gemm) echo "arb_plan_run from C (arbiter_bench_dispatch)" ;;
    direct_gemm) echo "the kernel's launch pointer from C" ;;
  esac
}
for v in "${variants[@]}" api_gemm plan_gemm direct_gemm; do
  [[ -n "${ir[$v.$low]:-}" ]] || continue
  echo "| $v | $(describe "$v") | $(per_call "$v") |"
done
echo
echo "Method: callgrind ($(valgrind --version)), Ir per call = (Ir($high calls) - Ir($low calls)) / $((high - low)),"
echo "whole process; Python $("$python" -c 'import platform; print(platform.python_version())'), NumPy"\
     "$("$python" -c 'import numpy; print(numpy.__version__)'); $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)."
echo "Every run trusts the CPU plugin by path and SHA-256 ([[plugins.trust]]), so that no verification runs;"
echo "every counted call is a selection-cache hit on the same kernel."

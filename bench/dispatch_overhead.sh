#!/usr/bin/env bash
# Dispatch overhead in instructions per call, on a selection-cache hit, against calling the
# kernel's function pointer directly. Instruction counts (callgrind's Ir) are repeatable,
# unlike timings on a shared machine.
#
#   bench/dispatch_overhead.sh <build-dir> [keep-dir]
#
# Runs build-dir/bin/arbiter_bench_dispatch under `valgrind --tool=callgrind` in eleven modes
# (api / direct for softmax f32 1x8, api_gemm / direct_gemm for gemm f32 8x8x8, api_rmsnorm /
# direct_rmsnorm for rmsnorm f32 1x8, the softmax and gemm api modes again with shadow checks
# of one call in 1000: api_shadow, api_gemm_shadow, and the three problems as plans: plan,
# plan_gemm, plan_rmsnorm), each at two call counts, and reports per mode
# (Ir(high) - Ir(low)) / (high - low): the difference cancels everything that happens once
# (start-up, context creation, plugin loading, the warm-up call that fills the selection
# cache). api - direct is the dispatch overhead; a direct mode launches the kernel its api
# mode chose (ARBITER_BENCH_KERNEL).
# Call counts: LOW and HIGH in the environment (default 1000 and 11000).
# With keep-dir, the callgrind files are kept there (callgrind_annotate reads them).
# BREAKDOWN=1 adds, for the api and plan modes, the instructions per call spent in each function's
# own code (self cost, same difference method; inlined code is listed under the file it
# comes from): where the dispatch overhead goes.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 <build-dir> [keep-dir]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
bin="$build/bin/arbiter_bench_dispatch"
[[ -x "$bin" ]] || { echo "$0: $bin not found; build the arbiter_bench_dispatch target" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "$0: valgrind is not installed" >&2; exit 2; }
low=${LOW:-1000}
high=${HIGH:-11000}
(( high > low )) || { echo "$0: HIGH must exceed LOW" >&2; exit 2; }

if [[ $# -eq 2 ]]; then
  out=$2
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# The environment that decides which plugins load: none of the user's.
unset ARBITER_PLUGIN_PATH
# No file hash cache: every run hashes the plugin files, so that the two call counts pay the
# same start-up (a cache written between them, by another process too, did not cancel).
export ARBITER_CACHE_DIR=""
# The CPU plugin trusted by content, so that no verification (whose cost varies with the
# gate's random seeds) runs at start-up and the difference of the two call counts cancels it.
export ARBITER_BENCH_TRUST_PATH="$build/lib/arbiter/plugins/arbiter_cpu.so"
ARBITER_BENCH_TRUST_SHA256=$(sha256sum "$ARBITER_BENCH_TRUST_PATH" | cut -d' ' -f1)
export ARBITER_BENCH_TRUST_SHA256

declare -A ir kernel
commands=()
modes=(api direct api_gemm direct_gemm api_rmsnorm direct_rmsnorm api_shadow api_gemm_shadow plan plan_gemm
       plan_rmsnorm)
for mode in "${modes[@]}"; do
  direct_kernel=()
  case $mode in
    direct) direct_kernel=(env "ARBITER_BENCH_KERNEL=${kernel[api]#cpu.}") ;;
    direct_*) direct_kernel=(env "ARBITER_BENCH_KERNEL=${kernel[api_${mode#direct_}]#cpu.}") ;;
  esac
  for calls in "$low" "$high"; do
    file="$out/callgrind.$mode.$calls.out"
    cmd=("${direct_kernel[@]}" valgrind --tool=callgrind --callgrind-out-file="$file" "$bin" "$mode" "$calls")
    commands+=("${cmd[*]}")
    if ! "${cmd[@]}" >"$out/$mode.$calls.stdout" 2>"$out/$mode.$calls.stderr"; then
      echo "$0: failed: ${cmd[*]}" >&2
      cat "$out/$mode.$calls.stderr" >&2
      exit 1
    fi
    # callgrind writes "summary: <Ir>" (older versions) and/or "totals: <Ir>".
    total=$(awk '/^(summary|totals):/ {print $2; exit}' "$file")
    [[ -n "$total" ]] || { echo "$0: no instruction total in $file" >&2; exit 1; }
    ir[$mode.$calls]=$total
    kernel[$mode]=$(sed -n 's/.*kernel=\([^ ]*\).*/\1/p' "$out/$mode.$calls.stdout")
  done
done

per_call() { awk -v a="${ir[$1.$low]}" -v b="${ir[$1.$high]}" -v n=$((high - low)) 'BEGIN {printf "%.1f", (b - a) / n}'; }

status=0
for pair in "api direct" "api_gemm direct_gemm" "api_rmsnorm direct_rmsnorm" "api_shadow direct" \
            "api_gemm_shadow direct_gemm" "plan direct" "plan_gemm direct_gemm" "plan_rmsnorm direct_rmsnorm"; do
  read -r via_api via_pointer <<<"$pair"
  if [[ "${kernel[$via_api]}" != "${kernel[$via_pointer]}" ]]; then
    echo "$0: warning: $via_api ran ${kernel[$via_api]} but $via_pointer ran ${kernel[$via_pointer]};" \
         "the difference is not dispatch alone" >&2
    status=1
  fi
done

build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)

echo "## Dispatch overhead (instructions per call, selection-cache hit)"
echo
echo "| op | problem | kernel | mode | Ir($low calls) | Ir($high calls) | Ir per call |"
echo "| --- | --- | --- | --- | ---: | ---: | ---: |"
for mode in "${modes[@]}"; do
  case $mode in
    *gemm*) op=gemm; problem="f32 m=8 n=8 k=8" ;;
    *rmsnorm*) op=rmsnorm; problem="f32 rows=1 cols=8" ;;
    *) op=softmax; problem="f32 rows=1 cols=8" ;;
  esac
  case $mode in
    api*_shadow) how="arb_${op}, verify.shadow_one_in = 1000" ;;
    api*) how="arb_${op} (libarbiter C ABI)" ;;
    plan*) how="arb_plan_run (a plan made once)" ;;
    *) how="arb_kernel.launch pointer" ;;
  esac
  echo "| $op | $problem | ${kernel[$mode]} | $how | ${ir[$mode.$low]} | ${ir[$mode.$high]} | $(per_call "$mode") |"
done
echo
echo "| op | api Ir/call | direct Ir/call | dispatch overhead Ir/call |"
echo "| --- | ---: | ---: | ---: |"
for pair in "softmax api direct" "gemm api_gemm direct_gemm" "rmsnorm api_rmsnorm direct_rmsnorm" \
            "softmax,shadow-1000 api_shadow direct" "gemm,shadow-1000 api_gemm_shadow direct_gemm" \
            "softmax,plan plan direct" "gemm,plan plan_gemm direct_gemm" "rmsnorm,plan plan_rmsnorm direct_rmsnorm"; do
  read -r op via_api via_pointer <<<"$pair"
  a=$(per_call "$via_api")
  d=$(per_call "$via_pointer")
  echo "| $op | $a | $d | $(awk -v a="$a" -v d="$d" 'BEGIN {printf "%.1f", a - d}') |"
done
echo
echo "Method: Ir = instructions executed, whole program, from callgrind ($(valgrind --version)),"
echo "per call = (Ir($high) - Ir($low)) / $((high - low)), which cancels start-up, context creation,"
echo "plugin loading and the warm-up call. api: every counted call is a selection-cache hit"
echo "(one warm-up call first); the CPU plugin is trusted by path and SHA-256 ([[plugins.trust]]),"
echo "so no verification runs (its cost varies with the gate's random seeds and would not cancel)."
echo "direct: the same prebuilt arb_problem/arb_operands handed to the kernel's launch pointer"
echo "from the dlopen'ed plugin (the plugin's C++ trampoline included on both sides). Build: ${build_type:-?}, ${cxx:-?} ($("${cxx:-c++}" --version 2>/dev/null | head -n1 || true))."
echo "shadow-1000: the same calls with verify.shadow_one_in = 1000, so about (HIGH - LOW) / 1000"
echo "of the counted calls are shadow checks (copies and two fp64 reference runs each; the"
echo "intervals are random, so this row varies between runs by a few checks' cost)."
echo "Instruction counts are not time: they say nothing of cache misses or branch mispredictions."
if [[ "${BREAKDOWN:-0}" == 1 ]]; then
  # file:function -> self Ir, from callgrind_annotate's per-function listing.
  annotate() {
    callgrind_annotate --auto=no --inclusive=no --threshold=100 "$1" 2>/dev/null |
      awk '/^ *[0-9,]+ +\(/ {c = $1; gsub(",", "", c); sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, ""); sub(/ \[.*\]$/, ""); print c "\t" $0}'
  }
  for mode in api api_gemm api_rmsnorm plan plan_gemm plan_rmsnorm; do
    echo
    echo "Breakdown, $mode: self instructions per call, functions with 5 or more"
    echo
    echo '```'
    annotate "$out/callgrind.$mode.$low.out" >"$out/$mode.$low.functions"
    annotate "$out/callgrind.$mode.$high.out" >"$out/$mode.$high.functions"
    awk -F'\t' -v n=$((high - low)) 'NR == FNR {a[$2] += $1; next} {b[$2] += $1}
      END {for (f in b) {d = (b[f] - a[f]) / n; if (d >= 5 && f !~ /PROGRAM TOTALS/) printf "%8.1f  %s\n", d, substr(f, 1, 140)}}' \
      "$out/$mode.$low.functions" "$out/$mode.$high.functions" | sort -rn | head -n 25
    echo '```'
  done
fi
echo
echo "Commands:"
echo
echo '```'
for c in "${commands[@]}"; do echo "$c"; done
echo '```'
exit $status

#!/usr/bin/env bash
# The GPU check, in one go on a machine with a CUDA GPU, within 8 minutes on an H200:
#   1. configure a Release build for sm_90a and build it with every core;
#   2. run the GPU tests (CTest label `gpu`) and the CPU tests;
#   3. tune the square-GEMM and Llama-3 suites on the GPU, writing a tuning table, and
#      benchmark them
#      (bench/gpu_suite.cpp: copy bandwidth, every plugin per shape, the winner and its
#      speedup over cuBLASLt's heuristic, the cost of dispatch at ~10 us);
#   4. print a short table last.
# The report (gpu-bench.md, gpu-bench.csv), the tuning table and the logs (one archive: the
# device tool brings back at most 8 files) go under $OUT (default: gpu-check-out/). On the
# device tool:
#   source .device/unpack.sh && set -o pipefail && bench/gpu-check.sh 2>&1 | tee $OUT/log
# Exit status: 0 when the build, the tests and the benchmark's bars all pass.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
build=${ARBITER_GPU_BUILD:-build-gpu}
logs="$build/gpu-check-logs"
rm -rf "$logs" && mkdir -p "$logs"
# The logs travel back as one archive, also when the check stops early.
trap 'tar czf "$out/gpu-check-logs.tar.gz" -C "$logs" . 2>/dev/null' EXIT
budget_s=${ARBITER_GPU_CHECK_SECONDS:-470}  # leave headroom inside the 8 minutes
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
step() { echo "== [$(elapsed) s] $*"; }

# The GPU's state, at the start and at the end (DESIGN.md section 7: clocks at start and end).
gpu_state() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv 2>&1 | sed "s/^/$1: /"
}
step "machine"
gpu_state start | tee "$logs/machine.txt"
nproc | sed 's/^/cores: /' | tee -a "$logs/machine.txt"

step "configure (Release, sm_90a)"
# NVRTC compiles the generated kernels for the GPU present (sm_90a on an H200) at load time.
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DARBITER_CUDA=ON \
    -DARBITER_BUILD_EXAMPLES=OFF "${launcher[@]}" >"$logs/configure.log" 2>&1; then
  tail -40 "$logs/configure.log"
  echo "GPU CHECK: configure failed"
  exit 1
fi

step "build with $(nproc) cores"
if ! cmake --build "$build" -j "$(nproc)" >"$logs/build.log" 2>&1; then
  grep -E -A6 "error|FAILED" "$logs/build.log" | head -80
  echo "GPU CHECK: build failed"
  exit 1
fi
grep -E "ptxas info|spill" "$logs/build.log" >"$logs/resource-usage.txt" || true

step "GPU tests"
ctest --test-dir "$build" -L gpu --output-on-failure >"$logs/gpu-tests.log" 2>&1
gpu_tests_rc=$?
grep -E "tests passed|tests failed|Skipped|SKIPPED|\(Failed\)|\(Timeout\)|test cases:|assertions:" "$logs/gpu-tests.log"
# Skipped means no usable GPU: the check has not checked anything then.
grep -q "(Skipped)" "$logs/gpu-tests.log" && gpu_tests_rc=77
[ $gpu_tests_rc -eq 0 ] || grep -E -B2 -A12 "ERROR|FAILED|Timeout" "$logs/gpu-tests.log" | head -120

step "CPU tests"
ctest --test-dir "$build" -LE "gpu|bench" -j "$(nproc)" --timeout 120 >"$logs/cpu-tests.log" 2>&1
cpu_tests_rc=$?
grep -E "tests passed|tests failed" "$logs/cpu-tests.log"
[ $cpu_tests_rc -eq 0 ] || grep -E "\(Failed\)|\(Timeout\)|\*\*\*" "$logs/cpu-tests.log" | head -20

left=$((budget_s - $(elapsed)))
[ $left -lt 90 ] && left=90
step "tune and benchmark the square-GEMM and Llama-3 suites on the GPU (at most ${left} s)"
# No new problem starts after the deadline; the report is rewritten after every problem.
timeout "$left" "$build/bin/arbiter_bench_gpu" --suite=bench/suites/square-gemm.toml \
  --suite=bench/suites/llama3-8b.toml --suite=bench/suites/llama3-70b.toml \
  --out="$out" --table="$out/tuning-table.toml" --budget-ms=60 --deadline-s=$((left - 40)) \
  >"$logs/bench-table.txt" 2>"$logs/bench-progress.log"
bench_rc=$?
[ $bench_rc -eq 124 ] && echo "benchmark stopped at the time limit: see bench-progress.log in the logs"
[ $bench_rc -ne 0 ] && tail -15 "$logs/bench-progress.log"

step "done"
gpu_state end | tee -a "$logs/machine.txt"
echo
echo "GPU CHECK SUMMARY ($(elapsed) s): gpu tests rc=$gpu_tests_rc, cpu tests rc=$cpu_tests_rc, benchmark rc=$bench_rc" \
  "(0 = pass; tests 77 = skipped, no GPU; benchmark 1 = a bar missed, 2 = error, 124 = out of time)"
cat "$logs/machine.txt"
cat "$logs/bench-table.txt"
[ $gpu_tests_rc -eq 0 ] && [ $cpu_tests_rc -eq 0 ] && [ $bench_rc -eq 0 ]

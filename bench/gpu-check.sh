#!/usr/bin/env bash
# The GPU check: everything a session with a GPU measures, in one call of at most 9 minutes
# (ARBITER_GPU_CHECK_SECONDS of work, default 480, leave the last minute to spare). On the
# device tool, after ../shared/device/prepare.sh here:
#   source .device/unpack.sh && set -o pipefail && bench/gpu-check.sh 2>&1 | tee $OUT/log
# In order of value, each step only if time is left (what is skipped is said, and why):
#   1. what it runs on: GPU, driver, clocks, CPU, cmake, compiler, nvcc, the toolkit's
#      cuBLASLt, NVRTC and NVRTC builtins, and cuDNN if the toolkit has it;
#   2. configure (Release, sm_90a + sm_80) and build the PTX probes, then run them, one
#      process per probe: $OUT/ptx-probes.txt, every lane's outputs (the emulator's golden data);
#   3. build the benchmark and the plugins; the headline numbers: one 8192^3 bf16 GEMM
#      (hand-written against cuBLASLt), an RMSNorm and a softmax against copy bandwidth,
#      the cost of dispatch at ~10 us (bench/suites/gpu-headline.toml);
#   4. the GPU tests (hard cap); 5. the Python package on CUDA tensors (PyTorch, CuPy:
#      python/tests/test_cuda.py) where the machine's python3 has nanobind; 6. the Llama-3-8B,
#      square-GEMM and Llama-3-70B suites; 7. the CPU tests (output on failure).
# The benchmark survives faulting and hanging kernels: it is restarted with --resume, the
# kernel named in its journal excluded (bench/fault_guard.hpp), and the report names it.
# Under $OUT (default gpu-check-out/): gpu-bench.md / .csv / -state.toml, tuning-table.toml,
# ptx-probes.txt, and gpu-check-logs.tar.gz (every log, rewritten after every step, so a kill
# at any moment leaves logs). Exit status 0 when the build, the probes, the tests and the
# benchmark's bars all pass.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${ARBITER_GPU_BUILD:-build-gpu}
logs="$build/gpu-check-logs"
rm -rf "$logs" && mkdir -p "$logs"
budget_s=${ARBITER_GPU_CHECK_SECONDS:-480}
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((budget_s - $(elapsed))); }
archive() { tar czf "$out/gpu-check-logs.tar.gz.tmp" -C "$logs" . 2>/dev/null && mv -f "$out/gpu-check-logs.tar.gz.tmp" "$out/gpu-check-logs.tar.gz"; }
trap archive EXIT
step() { archive; echo "== [$(elapsed) s] $*"; }
summary=()
note() { summary+=("$1"); echo "-- $1"; }
skip() { note "SKIPPED $1: $2"; }
failed=0

# ---- 1. the machine -----------------------------------------------------------------------
step "machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw,power.limit,persistence_mode,compute_mode \
    --format=csv 2>&1 | sed 's/^/gpu at start: /'
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  echo "cmake: $(cmake --version 2>&1 | head -1)"
  echo "c++: $(c++ --version 2>&1 | head -1)"
  echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
  for lib in libcublasLt.so libnvrtc.so libnvrtc-builtins.so libcudart.so libcudnn.so; do  # cuDNN: for a fused-attention candidate
    found=$(ls -1 /usr/local/cuda/lib64/$lib.* /usr/local/cuda/targets/*/lib/$lib.* 2>/dev/null | sort -V | tail -1)
    echo "toolkit $lib: ${found:-not found}${found:+ -> $(readlink -f "$found")}"
  done
} 2>&1 | tee "$logs/machine.txt"

# ---- 2. configure, the PTX probes ---------------------------------------------------------
step "configure (Release, sm_90a + sm_80)"
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The Python package is built in its own step (5): a nanobind there that our extension does not
# compile with must not take the tests down with it. The emulator is CI's (it runs the CUDA
# kernels without a GPU): here it would only cost build time.
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DARBITER_CUDA=ON -DARBITER_BUILD_EXAMPLES=OFF \
    -DARBITER_PYTHON=OFF -DARBITER_EMULATOR=OFF \
    "${launcher[@]}" >"$logs/configure.log" 2>&1; then
  tail -40 "$logs/configure.log"
  echo "GPU CHECK: configure failed"
  exit 1
fi
grep -E "Found CUDAToolkit|CUDA backends" "$logs/configure.log"

build_targets() {  # log name, targets...
  local name=$1; shift
  if ! cmake --build "$build" -j "$(nproc)" --target "$@" >"$logs/build-$name.log" 2>&1; then
    grep -E -A6 "error|FAILED" "$logs/build-$name.log" | head -60
    return 1
  fi
}

step "build the PTX probes"
if build_targets probes arbiter_ptx_probes; then
  step "PTX probes (one process each)"
  : >"$out/ptx-probes.txt"
  for probe in $("$build/bin/arbiter_ptx_probes" --list); do
    timeout 30 "$build/bin/arbiter_ptx_probes" --probe="$probe" --out="$out/ptx-probes.txt" >>"$logs/ptx-probes.log" 2>&1
    rc=$?
    grep -q "^result $probe " "$out/ptx-probes.txt" || echo "result $probe ERROR the process ended with status $rc" >>"$out/ptx-probes.txt"
  done
  grep "^result" "$out/ptx-probes.txt" | tee "$logs/ptx-probes-results.txt"
  grep -q "^result .* \(MISMATCH\|ERROR\)" "$out/ptx-probes.txt" && failed=1
  cp "$out/ptx-probes.txt" "$logs/"
else
  note "FAILED: the PTX probes did not build"
  failed=1
fi

# ---- 3. the benchmark: headline numbers first ---------------------------------------------
bench_rc=0
bench() {  # phase name, seconds, arbiter_bench_gpu arguments...
  local name=$1 seconds=$2; shift 2
  local attempt rc=0 phase_start
  phase_start=$(date +%s)
  for attempt in 1 2 3 4 5 6; do
    local remaining=$((seconds - ($(date +%s) - phase_start)))
    [ $remaining -lt 15 ] && { note "$name: out of time after $((attempt - 1)) attempt(s)"; break; }
    # No new problem starts after the deadline; the hard limit leaves a problem 60 s to end.
    timeout -k 5 $((remaining + 60)) "$build/bin/arbiter_bench_gpu" --resume --out="$out" \
      --table="$out/tuning-table.toml" --budget-ms=60 --deadline-s="$remaining" --hang-s=60 "$@" \
      >"$logs/bench-$name.txt" 2>>"$logs/bench-progress.log"
    rc=$?
    case $rc in
      0|1) break ;;
      2) note "$name: the benchmark could not run: $(tail -1 "$logs/bench-progress.log")"; break ;;
      # The report is written after each problem; a fault in the first one is only in the log.
      3|4) note "$name: a kernel faulted or hung (status $rc): $(grep -h 'HUNG\|FAULT\|faulted' "$logs/bench-progress.log" | tail -1); resuming without it" ;;
      124|137) printf 'idle\n' >"$out/gpu-bench-journal.txt"; note "$name: stopped at its time limit"; break ;;
      *) note "$name: the benchmark died (status $rc) while: $(head -c 300 "$out/gpu-bench-journal.txt" | tr '\t' ' ' | sed 's/ *$//'); resuming without that kernel" ;;
    esac
  done
  [ $rc -ne 0 ] && bench_rc=$rc
  tail -4 "$logs/bench-$name.txt"
}

step "build the benchmark and the plugins"
if ! build_targets bench arbiter_bench_gpu arbiter_cuda_reports; then
  echo "GPU CHECK: the benchmark did not build"
  exit 1
fi
# ptxas's own reports of every kernel file (registers, spills, shared memory per kernel).
cat "$build"/plugins/cuda/sm_90a/*.resources.txt >"$logs/resource-usage.txt" 2>/dev/null
grep -h "ptxas info" "$logs/build-probes.log" >>"$logs/resource-usage.txt" 2>/dev/null

step "headline: 8192^3 bf16 GEMM, RMSNorm and softmax against copy bandwidth, dispatch cost at ~10 us"
rm -f "$out/gpu-bench-state.toml" "$out/gpu-bench-journal.txt" "$out/tuning-table.toml"
bench headline $(( $(left) < 150 ? $(left) - 60 : 120 )) --suite=bench/suites/gpu-headline.toml --dispatch-cost

# ---- 4. the GPU tests, capped -------------------------------------------------------------
step "build the tests"
gpu_tests_rc=skipped
cpu_tests_rc=skipped
tests_built=0
if [ "$(left)" -ge 90 ] && timeout $(( $(left) - 60 )) cmake --build "$build" -j "$(nproc)" >"$logs/build-all.log" 2>&1; then
  tests_built=1
else
  skip "the tests" "the build failed or ran out of time (build-all.log)"
  grep -E -A6 "error|FAILED" "$logs/build-all.log" | head -40
fi
if [ $tests_built = 1 ]; then
  cap=$(( $(left) - 150 < 180 ? $(left) - 150 : 180 ))
  if [ $cap -ge 30 ]; then
    step "GPU tests (at most $cap s, 120 s a test, two at a time)"
    timeout -k 5 $cap ctest --test-dir "$build" -L gpu -j 2 --timeout 120 --output-on-failure >"$logs/gpu-tests.log" 2>&1
    gpu_tests_rc=$?
    [ $gpu_tests_rc -eq 124 ] && note "GPU tests: stopped at their cap of $cap s"
    grep -E "tests passed|tests failed|\(Skipped\)|\(Failed\)|\(Timeout\)" "$logs/gpu-tests.log"
    # Skipped means no usable GPU: the check has not checked anything then.
    grep -q "(Skipped)" "$logs/gpu-tests.log" && gpu_tests_rc=77
    [ $gpu_tests_rc = 0 ] || grep -E -B2 -A12 "ERROR|FAILED|Timeout" "$logs/gpu-tests.log" | head -80
  else
    skip "GPU tests" "$(left) s left"
  fi
fi

# ---- 5. the Python package on CUDA tensors -----------------------------------------------
python_rc=skipped
if [ $tests_built = 1 ] && [ "$(left)" -ge 120 ] && python3 -m nanobind --cmake_dir >/dev/null 2>&1; then
  step "the Python package on CUDA tensors (at most 90 s)"
  if timeout 60 cmake -S . -B "$build" -DARBITER_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" >"$logs/configure-python.log" 2>&1 &&
     timeout 60 cmake --build "$build" -j "$(nproc)" --target arbiter_python >"$logs/build-python.log" 2>&1; then
    PYTHONPATH="$(cd "$build" && pwd)/python" PYTHONDONTWRITEBYTECODE=1 timeout -k 5 60 python3 -m pytest -q -rs \
      -p no:cacheprovider python/tests/test_cuda.py python/tests/test_torch.py >"$logs/python-cuda.log" 2>&1
    python_rc=$?
    tail -15 "$logs/python-cuda.log"
  else
    skip "the Python package" "it did not configure or build with this machine's python3 and nanobind (configure-python.log, build-python.log)"
    grep -E -A6 "error|Error" "$logs/build-python.log" "$logs/configure-python.log" 2>/dev/null | head -30
  fi
else
  skip "the Python package on CUDA tensors" "no tests built, $(left) s left, or no nanobind in python3"
fi

# ---- 6. the suites ------------------------------------------------------------------------
suites_s=$(( $(left) - 70 ))
if [ $suites_s -ge 30 ]; then
  step "Llama-3-8B, square-GEMM and Llama-3-70B suites (at most $suites_s s)"
  bench suites $suites_s --suite=bench/suites/llama3-8b.toml --suite=bench/suites/square-gemm.toml \
    --suite=bench/suites/llama3-70b.toml
else
  skip "the Llama-3-8B, square-GEMM and Llama-3-70B suites" "$(left) s left"
fi

# ---- 7. the CPU tests ---------------------------------------------------------------------
if [ $tests_built = 1 ] && [ "$(left)" -ge 20 ]; then
  step "CPU tests (at most $(( $(left) - 10 )) s)"
  timeout -k 5 $(( $(left) - 10 )) ctest --test-dir "$build" -LE "gpu|bench|python" -j "$(nproc)" --timeout 60 \
    --output-on-failure >"$logs/cpu-tests.log" 2>&1
  cpu_tests_rc=$?
  grep -E "tests passed|tests failed" "$logs/cpu-tests.log"
  [ $cpu_tests_rc = 0 ] || grep -E -A30 "\(Failed\)|\(Timeout\)|\*\*\*" "$logs/cpu-tests.log" | head -80
else
  skip "CPU tests" "not built or $(left) s left"
fi

step "done"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1 | sed 's/^/gpu at end: /' |
  tee -a "$logs/machine.txt"
cp "$out"/gpu-bench.md "$logs/" 2>/dev/null
echo
echo "GPU CHECK SUMMARY ($(elapsed) s of $budget_s): gpu tests rc=$gpu_tests_rc, python rc=$python_rc, cpu tests rc=$cpu_tests_rc," \
  "benchmark rc=$bench_rc (0 = pass; tests 77 = skipped, no GPU; benchmark 1 = a bar missed, 2 = error)"
for line in "${summary[@]}"; do echo "  $line"; done
grep "^result" "$out/ptx-probes.txt" 2>/dev/null | tr '\n' ';' | sed 's/;/; /g'
echo
grep -A200 "^problem " "$logs/bench-suites.txt" 2>/dev/null ||
  cat "$logs/bench-headline.txt" 2>/dev/null
[ $failed = 0 ] && [ "$gpu_tests_rc" = 0 ] && [ "$cpu_tests_rc" = 0 ] && [ $bench_rc = 0 ] &&
  { [ "$python_rc" = 0 ] || [ "$python_rc" = skipped ]; }

#!/usr/bin/env bash
# Builds the libFuzzer targets (tools/fuzz/) with clang, ASan and UBSan into build-fuzz/ and runs
# each for the given time, then prints what each ran (executions, coverage) and found.
#   tools/fuzz.sh [seconds-per-target]          default 600; CI runs `tools/fuzz.sh 20`
# Environment: FUZZ_TARGETS (default: all five), FUZZ_JOBS (targets run at once; default
# nproc), FUZZ_BUILD_DIR (default build-fuzz).
# Each target's corpus grows in <build>/fuzz/corpus/<target>/ from run to run, seeded from the
# project's own files (tools/fuzz/make_corpus.sh); a finding (crash, sanitizer report,
# unexpected exception, leak, hang over 10 s) is kept as <build>/fuzz/findings/<target>/crash-*
# (or leak-, timeout-, oom-) with its log beside it, and makes the script exit 1. Once fixed,
# the input goes to tools/fuzz/regressions/<target>/, which CTest replays in every build.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
targets=(${FUZZ_TARGETS:-problem_text config table suite manifest})
jobs=${FUZZ_JOBS:-$(nproc)}
build=${FUZZ_BUILD_DIR:-build-fuzz}

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# The parsers are all that is built: no CUDA, tests, examples or benchmarks. RelWithDebInfo,
# as released (NDEBUG: toml++'s assumptions are what the release build assumes).
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DARBITER_FUZZ=ON -DARBITER_WERROR=ON -DARBITER_CUDA=OFF \
  -DARBITER_BUILD_TESTS=OFF -DARBITER_BUILD_EXAMPLES=OFF -DARBITER_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build "$build" --target arbiter_fuzzers -j "$(nproc)"

work="$build/fuzz"
tools/fuzz/make_corpus.sh "$work/seeds"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_target() {
  local target=$1
  rm -rf "$work/findings/$target"  # this run's findings only; the corpus carries over
  mkdir -p "$work/corpus/$target" "$work/findings/$target" "$work/dict"
  local dict="$work/dict/$target.dict"
  if [ "$target" = problem_text ]; then
    cp tools/fuzz/dict/problem_text.dict "$dict"
  else
    cat tools/fuzz/dict/toml.dict "tools/fuzz/dict/$target.dict" > "$dict"
  fi
  local status=0
  "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -dict="$dict" -artifact_prefix="$work/findings/$target/" "$work/corpus/$target" "$work/seeds/$target" \
    > "$work/$target.log" 2>&1 || status=$?
  echo "$status" > "$work/$target.status"
}

start=$(date +%s)
echo "fuzz: ${targets[*]}, ${seconds} s each, $jobs at a time (logs in $work/<target>.log)"
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_target "$target" &
done
wait

found=0
printf '%-13s %6s %12s %8s %7s %7s %16s %s\n' target time executions exec/s cov ft corpus findings
for target in "${targets[@]}"; do
  log="$work/$target.log"
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1 s/p' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  # The last status line ("#N DONE cov: C ft: F corp: U/..."), or the last before a finding.
  status_line=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status_line")
  corpus=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$status_line")  # units/bytes in use
  findings=$(find "$work/findings/$target" -type f ! -name '*.log' | sort)
  if [ "$(cat "$work/$target.status")" != 0 ] || [ -n "$findings" ]; then
    found=1
    for f in $findings; do cp "$log" "$f.log"; done
    summary="FOUND: ${findings:-exit status $(cat "$work/$target.status")} (log: $log)"
  else
    summary=none
  fi
  printf '%-13s %6s %12s %8s %7s %7s %16s %s\n' "$target" "${secs:-?}" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$summary"
done
echo "fuzz: done in $(( $(date +%s) - start )) s"
if [ "$found" != 0 ]; then
  grep -h -A30 -E '^==[0-9]+==ERROR|runtime error|terminate called|deadly signal|^ERROR: libFuzzer' "$work"/*.log | head -120 || true
  exit 1
fi

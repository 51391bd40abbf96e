#!/usr/bin/env bash
# The SIMT emulator's speed, with and without its race check, on this machine.
#
#   bench/emulator-speed.sh <build-dir> [samples]
#
# Runs build-dir/bin/arbiter_bench_emulator (bench/emulator_speed.cu: synthetic kernels for
# the emulator's primitive costs, then arbiter's RMSNorm, mma.sync and wgmma GEMM kernels)
# twice, ARBITER_EMU_RACE_CHECK=1 and =0, and prints both tables under a header naming the
# CPU and the commit. Each figure is a median of `samples` launches (default 5) after a
# warm-up; the schedule is fixed (lockstep) so the two runs do the same work.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 <build-dir> [samples]" >&2
  exit 2
fi
bin="$1/bin/arbiter_bench_emulator"
[[ -x "$bin" ]] || { echo "$0: $bin not found; build the arbiter_bench_emulator target" >&2; exit 2; }
samples=${2:-5}

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "# SIMT emulator speed"
echo
echo "CPU: ${cpu:-unknown} ($(nproc) cores visible); commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown); $(date -u +%Y-%m-%d)"
echo "Command: bench/emulator-speed.sh $1 $samples"
for race in 1 0; do
  echo
  if [[ $race == 1 ]]; then echo "## With the race check (the default)"; else echo "## Without the race check (ARBITER_EMU_RACE_CHECK=0)"; fi
  echo
  ARBITER_EMU_RACE_CHECK=$race ARBITER_EMU_SCHEDULE=lockstep "$bin" --samples="$samples"
done

#!/usr/bin/env bash
# The emulator's PTX probe outputs against a GPU's: every raw output line (not the comments,
# not the `result` lines) of each golden file under tests/emulator/golden/ must be produced
# exactly by the emulator, except the probes a golden file marks as tolerance-compared
# (mma_m16n8k16_bf16_fractions: the tensor core's own accumulation order; sincospi: the math
# library's last bit, the host's libm on the emulator), which must match within 2^-18. Exit 77
# (skipped) when there is no golden file yet: a GPU run of bench/gpu-check.sh writes
# $OUT/ptx-probes.txt, committed here as golden data.
#   tests/emulator/compare_golden.sh EMULATED_PROBES GOLDEN_DIR
set -uo pipefail
probes=${1:?the emulated probe program}
golden_dir=${2:?the golden folder}
shopt -s nullglob
goldens=("$golden_dir"/ptx-probes-*.txt)
[ ${#goldens[@]} -gt 0 ] || { echo "SKIPPED: no golden PTX probe data yet (needs one GPU run of bench/gpu-check.sh)"; exit 77; }
emulated=$(mktemp)
trap 'rm -f "$emulated"' EXIT
"$probes" --out="$emulated" >/dev/null || { echo "the emulated probes failed"; exit 1; }
failed=0
for golden in "${goldens[@]}"; do
  python3 - "$golden" "$emulated" <<'PY' || failed=1
import struct, sys
def probes(path):
    """probe name -> its raw output lines, in order (comments and results left out)"""
    out = {}
    for line in open(path).read().splitlines():
        if line and not line.startswith('#') and not line.startswith('result'):
            out.setdefault(line.split(' ')[0], []).append(line)
    return out
golden, emulated = probes(sys.argv[1]), probes(sys.argv[2])
# the tensor core's own accumulation order; the math library's last bit (the host's libm here)
tolerant = {'mma_m16n8k16_bf16_fractions', 'sincospi'}
def close(a, b):
    wa, wb = a.split(' '), b.split(' ')
    if len(wa) != len(wb) or wa[:2] != wb[:2]:
        return False
    fa = [struct.unpack('>f', bytes.fromhex(w))[0] for w in wa[2:]]
    fb = [struct.unpack('>f', bytes.fromhex(w))[0] for w in wb[2:]]
    return all(abs(x - y) <= 2 ** -18 for x, y in zip(fa, fb))
bad = total = 0
for probe, lines in golden.items():
    mine = emulated.get(probe, [])
    for k, line in enumerate(lines):
        total += 1
        other = mine[k] if k < len(mine) else None
        if other == line or (other is not None and probe in tolerant and close(line, other)):
            continue
        bad += 1
        if bad <= 10:
            print(f"{sys.argv[1]}: differs\n  gpu:      {line}\n  emulator: {other}")
print(f"{sys.argv[1]}: {total - bad} of {total} output lines agree")
sys.exit(1 if bad else 0)
PY
done
exit $failed

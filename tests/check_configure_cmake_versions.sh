#!/usr/bin/env bash
# Configures arbiter with CUDA under every CMake release tools/install-deps.sh put into
# .tools/cmake/ (3.25.0 as Debian 12's stock 3.25.1, 3.28, 3.31, 4.x): each must succeed and
# find the CUDA toolkit. Exit 77 (skipped) when there is no toolkit or no such CMake.
#   tests/check_configure_cmake_versions.sh SOURCE_DIR
set -uo pipefail
source_dir=${1:?source dir}
[ -x /usr/local/cuda/bin/nvcc ] || { echo "SKIPPED: no CUDA toolkit at /usr/local/cuda"; exit 77; }
shopt -s nullglob
cmakes=("$source_dir"/.tools/cmake/*/cmake/data/bin/cmake)
[ ${#cmakes[@]} -gt 0 ] || { echo "SKIPPED: no CMake releases in .tools/cmake (tools/install-deps.sh)"; exit 77; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
for cmake in "${cmakes[@]}"; do
  version=$("$cmake" --version | head -1)
  dir="$scratch/$(basename "$(dirname "$(dirname "$(dirname "$(dirname "$cmake")")")")")"
  if "$cmake" -S "$source_dir" -B "$dir" -DARBITER_CUDA=ON -DARBITER_BUILD_TESTS=OFF -DARBITER_BUILD_BENCH=OFF \
      -DARBITER_BUILD_EXAMPLES=OFF >"$dir.log" 2>&1 && grep -q "CUDA backends ON" "$dir.log"; then
    echo "ok: $version"
  else
    echo "FAILED: $version"
    tail -30 "$dir.log"
    failed=1
  fi
  if grep -q "CMake Warning" "$dir.log"; then
    echo "warnings under $version:"
    grep -A6 "CMake Warning" "$dir.log"
    failed=1
  fi
done
exit $failed

#!/usr/bin/env bash
# Configures and builds arbiter into a build folder (default: build/).
#   tools/build.sh [build-dir] [extra cmake arguments...]
# ccache is used when present; warnings are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# The Python package builds with the interpreter of .venv/ (tools/install-deps.sh), which has nanobind.
python=()
if [ -x .venv/bin/python ]; then python=(-DPython_EXECUTABLE="$PWD/.venv/bin/python"); fi
cmake -S . -B "$build_dir" -G Ninja -DARBITER_WERROR=ON "${launcher[@]}" "${python[@]}" "$@"
cmake --build "$build_dir" -j "$(nproc)"

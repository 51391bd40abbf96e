#!/usr/bin/env bash
# Installs arbiter's build dependencies from Debian 12's packages (the CUDA toolkit, if any,
# is expected at /usr/local/cuda already) and, with CUDA, from PyPI into .tools/: cuobjdump
# and nvdisasm (the toolkit here has neither) for the SASS checks, and four CMake releases
# for the test that the build configures with each (tests/check_configure_cmake_versions.sh).
# Idempotent; uses sudo when not root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libboost-dev libboost-context-dev libspdlog-dev libfmt-dev libtomlplusplus-dev doctest-dev libdlpack-dev libopenblas-dev libdnnl-dev
  valgrind python3 python3-pip python3-dev python3-venv
  clang libclang-rt-14-dev llvm  # tools/fuzz.sh: libFuzzer's runtime is only a Recommends of clang; llvm-symbolizer for stacks
)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == *"install ok installed"* ]] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  echo "install-deps: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# cuobjdump (+ the nvdisasm it runs) for tests/check_cuda_kernels.py, pinned, from PyPI.
cuda_tools_version=13.5.37
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -x /usr/local/cuda/bin/nvcc ] && [ ! -x "$root/.tools/bin/cuobjdump" ]; then
  echo "install-deps: cuobjdump and nvdisasm $cuda_tools_version from PyPI into .tools/bin"
  scratch=$(mktemp -d)
  python3 -m pip download -q --no-deps --dest "$scratch" "nvidia-cuda-cuobjdump==$cuda_tools_version" \
    "nvidia-cuda-nvdisasm==$cuda_tools_version"
  for wheel in "$scratch"/*.whl; do python3 -m zipfile -e "$wheel" "$scratch/unpacked"; done
  mkdir -p "$root/.tools/bin"
  for tool in cuobjdump nvdisasm; do
    install -m 755 "$(find "$scratch/unpacked" -type f -name "$tool" | head -1)" "$root/.tools/bin/$tool"
  done
  rm -rf "$scratch"
fi

# CMake releases the build must configure with, CUDA included: 3.25.0 behaves as Debian 12's
# stock 3.25.1 does with CUDA 13 (3.25.2 fixed FindCUDAToolkit upstream), 3.28 is Ubuntu
# 24.04's, 3.31 and 4.x are what pip gives. Each is unpacked into .tools/cmake/<version>.
cmake_versions=(3.25.0 3.28.4 3.31.6 4.4.5)
if [ -x /usr/local/cuda/bin/nvcc ]; then
  for version in "${cmake_versions[@]}"; do
    [ -x "$root/.tools/cmake/$version/cmake/data/bin/cmake" ] && continue
    echo "install-deps: CMake $version from PyPI into .tools/cmake/$version"
    python3 -m pip install -q --no-deps --disable-pip-version-check --target "$root/.tools/cmake/$version" \
      "cmake==$version" 2>&1 | grep -v "Running pip as the 'root' user" || true
  done
fi

# The Python package's build and test dependencies (python/requirements-test.txt, from PyPI)
# in .venv/, which tools/build.sh hands to CMake; PyTorch too (the PyPI build: about 2.8 GB
# with its CUDA libraries) unless ARBITER_PYTHON_TORCH=0.
torch_version=2.15.0
if [ ! -x "$root/.venv/bin/python" ]; then
  echo "install-deps: a Python virtual environment in .venv"
  python3 -m venv "$root/.venv"
fi
"$root/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/python/requirements-test.txt"
if [ "${ARBITER_PYTHON_TORCH:-1}" != 0 ]; then
  "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$torch_version"
fi

#!/usr/bin/env bash
# Installs arbiter's build dependencies from Debian 12's packages (the CUDA toolkit, if any,
# is expected at /usr/local/cuda already) and, with CUDA, cuobjdump and nvdisasm from PyPI
# (the toolkit here has neither) into .tools/bin for the SASS checks. Idempotent; uses sudo
# when not root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libboost-dev libspdlog-dev libfmt-dev libtomlplusplus-dev doctest-dev libdlpack-dev libopenblas-dev
  valgrind python3 python3-pip
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

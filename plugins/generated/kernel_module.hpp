// A generated kernel compiled for one dtype and loaded, ready to launch: on a GPU, NVRTC's
// cubin in a CUDA library (nvrtc_module.cpp); on the SIMT emulator, emucc's host build in a
// shared library (emulated_module.cpp). generated_plugin.cpp is the same for both; the
// build links one of the two.
#pragma once

#include "kernel_manifest.hpp"

#include <arbiter/plugin.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace arbiter::generated {

class KernelModule {
 public:
  virtual ~KernelModule() = default;
  // Launches the kernel with the arguments of its signature convention (docs/generated-kernels.md),
  // after the dynamic shared memory opt-in when `shared_bytes` is above the default 48 KiB.
  virtual cudaError_t launch(const arb_problem& problem, const arb_operands& operands, dim3 grid, dim3 block,
                             size_t shared_bytes, cudaStream_t stream) const = 0;
};

// What kernels are compiled for, and with what (runtime_version of the plugin): "NVRTC 13.0,
// sm_90a" on a GPU; on the emulator, the host compiler and the emulated architecture.
std::string module_toolchain();

// Compiles (or finds in the cache) and loads the manifest's kernel for one dtype; nullptr,
// with the compiler's log, when that fails.
std::unique_ptr<KernelModule> build_module(const Manifest& manifest, int32_t dtype, std::string& log);

}  // namespace arbiter::generated

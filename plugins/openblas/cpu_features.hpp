// The instruction sets of the CPU this process runs on, as far as OpenBLAS's kernels care.
#pragma once

#include "openblas_coretype.hpp"

namespace arbiter::plugins::openblas {

// From CPUID and XGETBV (libgcc's __builtin_cpu_supports: a feature counts only when the OS
// saves its registers); all false on a CPU that is not x86-64.
CpuFeatures this_cpu_features();

}  // namespace arbiter::plugins::openblas

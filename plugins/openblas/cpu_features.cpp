#include "cpu_features.hpp"

namespace arbiter::plugins::openblas {

CpuFeatures this_cpu_features() {
  CpuFeatures cpu;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();  // the plugin may run before libgcc's own constructor has
  cpu.avx = __builtin_cpu_supports("avx");
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.fma = __builtin_cpu_supports("fma");
  cpu.avx512f = __builtin_cpu_supports("avx512f");
  cpu.avx512bw = __builtin_cpu_supports("avx512bw");
  cpu.avx512vl = __builtin_cpu_supports("avx512vl");
  cpu.avx512dq = __builtin_cpu_supports("avx512dq");
  cpu.avx512cd = __builtin_cpu_supports("avx512cd");
  cpu.avx512vnni = __builtin_cpu_supports("avx512vnni");
  cpu.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#endif
  return cpu;
}

}  // namespace arbiter::plugins::openblas

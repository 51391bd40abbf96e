#include "onednn_isa.hpp"

#include <cctype>
#include <cstdio>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace arbiter::plugins::onednn {
namespace {

struct Isa {
  unsigned value;
  const char* name;
};

// dnnl_cpu_isa_t of oneDNN 2.6 (dnnl_types.h): each value is a bit set that contains the
// sets it extends, so "isa within max" is (isa & max) == isa, as oneDNN tests it.
constexpr Isa kPreference[] = {
    {0x3e7, "avx512_core_amx"}, {0xe7, "avx512_core_bf16"}, {0x67, "avx512_core_vnni"},
    {0x27, "avx512_core"},      {0x407, "avx2_vnni"},       {0x7, "avx2"},
    {0x3, "avx"},               {0x1, "sse41"},
};

bool has(const IsaFeatures& cpu, unsigned value) {
  switch (value) {
    case 0x3e7: return cpu.avx512_core && cpu.avx512_vnni && cpu.avx512_bf16 && cpu.amx;
    case 0xe7: return cpu.avx512_core && cpu.avx512_vnni && cpu.avx512_bf16;
    case 0x67: return cpu.avx512_core && cpu.avx512_vnni;
    case 0x27: return cpu.avx512_core;
    case 0x407: return cpu.avx2 && cpu.avx_vnni;
    case 0x7: return cpu.avx2;
    case 0x3: return cpu.avx;
    case 0x1: return cpu.sse41;
    default: return false;
  }
}

}  // namespace

IsaFeatures this_cpu_isa_features() {
  IsaFeatures cpu;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();  // the plugin may run before libgcc's own constructor has
  cpu.sse41 = __builtin_cpu_supports("sse4.1");
  cpu.avx = __builtin_cpu_supports("avx");
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.avx512_core = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512dq");
  cpu.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  cpu.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  // AVX-VNNI and AMX from CPUID directly (not every libgcc knows them).
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) cpu.avx_vnni = cpu.avx2 && (a & (1u << 4)) != 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    const bool amx_units = (d & (1u << 22)) && (d & (1u << 24)) && (d & (1u << 25));  // BF16, TILE, INT8
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    const bool osxsave = __get_cpuid(1, &a1, &b1, &c1, &d1) && (c1 & (1u << 27));
    if (amx_units && osxsave) {
      unsigned lo = 0, hi = 0;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      cpu.amx = (lo & (3u << 17)) == (3u << 17);  // XTILECFG and XTILEDATA
    }
  }
#endif
  return cpu;
}

IsaChoice expected_isa(const IsaFeatures& cpu, const char* max_isa) {
  unsigned max = ~0u;
  if (max_isa != nullptr) {
    std::string upper;
    for (const char* p = max_isa; *p; ++p) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
    for (const Isa& isa : kPreference) {
      std::string name;
      for (const char* p = isa.name; *p; ++p) name += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
      if (name == upper) max = isa.value;
    }
  }
  for (const Isa& isa : kPreference)
    if ((isa.value & max) == isa.value && has(cpu, isa.value)) return {isa.value, isa.name};
  return {0, "none"};
}

std::string isa_name(unsigned value) {
  for (const Isa& isa : kPreference)
    if (isa.value == value) return isa.name;
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", value);
  return text;
}

}  // namespace arbiter::plugins::onednn

// The instruction set oneDNN will run on this CPU, decided without loading oneDNN: the
// plugin names it in its runtime_version at entry (tables tuned on another ISA are stale),
// and libdnnl is loaded only on first use. The first load checks the guess against
// dnnl_get_effective_cpu_isa(); a wrong guess disables the plugin's kernels.
#pragma once

#include <string>

namespace arbiter::plugins::onednn {

// What oneDNN 2.x's mayiuse() looks at; each true only when the OS saves the registers.
struct IsaFeatures {
  bool sse41 = false, avx = false, avx2 = false, avx_vnni = false;
  bool avx512_core = false;  // F, CD, BW, VL, DQ
  bool avx512_vnni = false, avx512_bf16 = false;
  bool amx = false;  // AMX-TILE, AMX-INT8, AMX-BF16 and the tile state enabled in XCR0
};

IsaFeatures this_cpu_isa_features();

struct IsaChoice {
  unsigned value = 0;  // a dnnl_cpu_isa_t
  std::string name;    // as oneDNN spells it in ONEDNN_MAX_CPU_ISA, lower case
};

// The best ISA the features allow within `max_isa` (the ONEDNN_MAX_CPU_ISA or
// DNNL_MAX_CPU_ISA value, or null/unknown: no limit), in oneDNN 2.6's order of preference.
IsaChoice expected_isa(const IsaFeatures& cpu, const char* max_isa);

// The name of a dnnl_cpu_isa_t value ("0x..." when unknown).
std::string isa_name(unsigned value);

}  // namespace arbiter::plugins::onednn

// Stand-in for CUDA's cuda_bf16.h in emulated builds: __nv_bfloat16, __nv_bfloat162 and
// their functions (arbiter_emulator/float16_types.hpp).
#pragma once

#include "arbiter_emulator/float16_types.hpp"

// Stand-in for CUDA's cuda_fp16.h in emulated builds: __half, __half2 and their functions
// (arbiter_emulator/float16_types.hpp).
#pragma once

#include "arbiter_emulator/float16_types.hpp"

// A cuBLASLt algorithm configuration, identified by its attributes (never by its position
// in a heuristic's list): algorithm id, tile, stages, split-K, reduction scheme, CTA
// swizzling, custom option, inner shape, cluster shape. Its name is the kernel name:
// "algo=23,tile=20,stages=16,splitk=1,reduction=0,swizzle=0,custom=0,inner=0,cluster=0".
#pragma once

#include "lt_problem.hpp"

#include <cstdint>
#include <string>
#include <tuple>

namespace arbiter::cublaslt {

struct AlgoConfig {
  int32_t id = 0;
  uint32_t tile = 0, stages = 0, splitk = 1, reduction = 0, swizzle = 0, custom = 0;
  uint16_t inner = 0, cluster = 0;

  std::string name() const;
  // Reads the attributes of an algorithm (from a heuristic result).
  static AlgoConfig from(const cublasLtMatmulAlgo_t& algo);
  // Split-K reduced in place accumulates in no fixed order.
  bool deterministic() const { return splitk <= 1 || reduction != CUBLASLT_REDUCTION_SCHEME_INPLACE; }

  auto tie() const { return std::tie(id, tile, stages, splitk, reduction, swizzle, custom, inner, cluster); }
  bool operator<(const AlgoConfig& o) const { return tie() < o.tie(); }
};

}  // namespace arbiter::cublaslt

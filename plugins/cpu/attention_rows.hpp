// How the cpu plugin's attention kernels (attention.cpp, attention_avx512_bf16.cpp) walk the
// query rows: per batch and key/value head g, the rows that read the head are its group of
// query heads times q_len, ordered query-major (row r: query r / group, head g * group +
// r % group), so that a block of rows needs the keys its last row sees. Internal linkage: the
// two files are built for different ISAs.
#pragma once

#include <arbiter/plugin.h>

#include <cstdint>

namespace arbiter::cpu {
namespace {

// A block of rows starting at `first`, row r of it the block's r-th.
struct AttentionRows {
  const arb_problem& p;
  int64_t group, g, first;
  int64_t query_of(int64_t r) const { return (first + r) / group; }
  int64_t head_of(int64_t r) const { return g * group + (first + r) % group; }
  // Row r sees keys [0, seen(r)): causal, up to the key aligned with its query at the end.
  int64_t seen(int64_t r) const { return p.causal ? query_of(r) + p.kv_len - p.q_len + 1 : p.kv_len; }
};

}  // namespace
}  // namespace arbiter::cpu

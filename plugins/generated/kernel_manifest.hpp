// A generated kernel: a .cu source and its TOML manifest (docs/generated-kernels.md):
// what op and signature convention it follows, its entry symbol, the dtypes it is compiled
// for, launch geometry as formulas of the problem, the constraints supports() enforces,
// its provenance (generator, date, the source's SHA-256) and the shapes it claims.
#pragma once

#include "launch_geometry.hpp"

#include <arbiter/plugin.h>

#include <optional>
#include <string>
#include <vector>

namespace arbiter::generated {

struct Constraints {
  std::optional<int64_t> min_m, max_m, min_n, max_n, min_k, max_k, min_rows, max_rows, min_cols, max_cols;
  int64_t m_multiple_of = 1, n_multiple_of = 1, k_multiple_of = 1, cols_multiple_of = 1;
  std::optional<int32_t> trans_a, trans_b;
  std::vector<int32_t> activations;  // allowed; empty: all
  bool bias = true, c = true, residual = true;  // may the problem have them
  int32_t alignment = 1;                         // minimum problem.alignment in bytes
};

struct Provenance {
  std::string generator, date, source_sha256, notes;
};

struct Manifest {
  std::string path;         // of the manifest
  std::string name;         // the kernel's name in the generated plugin
  int32_t op = ARB_OP_INVALID;
  std::string signature;    // "gemm.v1", "rmsnorm.v1", "softmax.v1"
  std::string entry;        // extern "C" __global__ symbol
  std::string source_path;  // resolved against the manifest's folder
  std::string source;       // its text
  std::vector<int32_t> dtypes;
  bool deterministic = true;
  std::string description;
  Formula grid[3], block[3], shared_bytes;
  int grid_dims = 1, block_dims = 1;
  Constraints constraints;
  Provenance provenance;
  std::vector<std::string> shapes;  // problems it claims, in the problem syntax
};

// Reads and checks a manifest and its source: every key, the signature against the op, the
// formulas, and that the source's SHA-256 is the one recorded (a changed source must be
// re-declared). Throws std::runtime_error("path:line:column: what").
Manifest load_manifest(const std::string& path);

// The signature convention a manifest must name for an op.
const char* signature_for(int32_t op);

// Does the problem meet the manifest's constraints (and dtypes), and do its launch formulas
// give a launch CUDA accepts for it (launch_dims)? If not, why.
bool satisfies(const Manifest& manifest, const arb_problem& problem, std::string* why);

}  // namespace arbiter::generated

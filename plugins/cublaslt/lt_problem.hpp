// An arbiter GEMM as cuBLASLt sees it. arbiter is row-major and cuBLASLt column-major, so
// D = op(A) op(B) is computed as D^T = op(B)^T op(A)^T: cuBLASLt's A is our B, its B our A,
// its m our n. Descriptors live in this struct (the Init functions fill caller memory),
// so a launch allocates nothing.
#pragma once

#include <arbiter/plugin.h>

#include <cublasLt.h>

#include <string>

namespace arbiter::cublaslt {

struct LtProblem {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F, type = CUDA_R_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  cublasLtMatmulDescOpaque_t desc_storage;
  cublasLtMatrixLayoutOpaque_t a_storage, b_storage, c_storage, d_storage;
  cublasLtMatmulDesc_t desc() { return &desc_storage; }
  cublasLtMatrixLayout_t a() { return &a_storage; }
  cublasLtMatrixLayout_t b() { return &b_storage; }
  cublasLtMatrixLayout_t c() { return &c_storage; }
  cublasLtMatrixLayout_t d() { return &d_storage; }
};

// Fills `lt` for the problem (tf32: f32 math on TF32 tensor cores). Returns false, with
// the reason, for what cuBLASLt cannot express (SiLU and the erf GELU epilogues).
// `bias` may be null when only shapes matter (supports, heuristics).
bool describe(const arb_problem& problem, bool tf32, const void* bias, LtProblem& lt, std::string* why);

const char* status_name(cublasStatus_t status);

}  // namespace arbiter::cublaslt

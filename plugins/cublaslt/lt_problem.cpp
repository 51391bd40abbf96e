#include "lt_problem.hpp"

namespace arbiter::cublaslt {

const char* status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_(unknown)";
  }
}

bool describe(const arb_problem& p, bool tf32, const void* bias, LtProblem& lt, std::string* why) {
  auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (p.op != ARB_OP_GEMM) return no("gemm only");
  if (p.device_type != kDLCUDA) return no("CUDA tensors only");
  if (p.batch != 1) return no("no batched gemm");
  switch (p.dtype) {
    case ARB_DTYPE_F32:
      lt.type = CUDA_R_32F;
      lt.compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      break;
    case ARB_DTYPE_F16:
      if (tf32) return no("TF32 applies to f32 only");
      lt.type = CUDA_R_16F;
      lt.compute = CUBLAS_COMPUTE_32F;
      break;
    case ARB_DTYPE_BF16:
      if (tf32) return no("TF32 applies to f32 only");
      lt.type = CUDA_R_16BF;
      lt.compute = CUBLAS_COMPUTE_32F;
      break;
    default: return no("f32, f16 and bf16 only");
  }
  switch (p.activation) {
    case ARB_ACT_NONE: lt.epilogue = p.has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    case ARB_ACT_RELU: lt.epilogue = p.has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case ARB_ACT_GELU_TANH: lt.epilogue = p.has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; break;
    default: return no("cuBLASLt epilogues: none, relu and the tanh GELU only");
  }
  if (cublasLtMatmulDescInit(lt.desc(), lt.compute, lt.scale) != CUBLAS_STATUS_SUCCESS)
    return no("cublasLtMatmulDescInit failed");
  // Our B is cuBLASLt's A, our A its B (see the header).
  const cublasOperation_t op_a = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(lt.desc(), CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a);
  cublasLtMatmulDescSetAttribute(lt.desc(), CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b);
  cublasLtMatmulDescSetAttribute(lt.desc(), CUBLASLT_MATMUL_DESC_EPILOGUE, &lt.epilogue, sizeof lt.epilogue);
  if (p.has_bias && bias != nullptr)
    cublasLtMatmulDescSetAttribute(lt.desc(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  const uint64_t lt_m = static_cast<uint64_t>(p.n), lt_n = static_cast<uint64_t>(p.m), k = static_cast<uint64_t>(p.k);
  // Stored shapes, column-major: our row-major [r, c] with row stride ld is [c, r], ld.
  const bool ok =
      cublasLtMatrixLayoutInit(lt.a(), lt.type, p.trans_b ? k : lt_m, p.trans_b ? lt_m : k, p.ldb) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutInit(lt.b(), lt.type, p.trans_a ? lt_n : k, p.trans_a ? k : lt_n, p.lda) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutInit(lt.c(), lt.type, lt_m, lt_n, p.has_c ? p.ldc : p.ldd) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutInit(lt.d(), lt.type, lt_m, lt_n, p.ldd) == CUBLAS_STATUS_SUCCESS;
  return ok ? true : no("cublasLtMatrixLayoutInit failed");
}

}  // namespace arbiter::cublaslt

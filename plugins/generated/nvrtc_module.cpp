// Generated kernels on a GPU: NVRTC compiles them for the GPU present (nvrtc_compiler.hpp,
// with its on-disk cache), the CUDA runtime loads the cubin as a library, and launches pass
// the signature's arguments as an array of pointers.
#include "kernel_module.hpp"

#include "nvrtc_compiler.hpp"

namespace arbiter::generated {
namespace {

std::string arch_of_device() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "sm_90a";
  return arch_for(prop.major, prop.minor);
}

const std::string& arch() {
  static const std::string a = arch_of_device();
  return a;
}

class NvrtcModule final : public KernelModule {
 public:
  NvrtcModule(cudaLibrary_t library, cudaKernel_t kernel) : library_(library), kernel_(kernel) {}
  // The library stays loaded for the life of the process: launches may be captured in graphs.

  cudaError_t launch(const arb_problem& p, const arb_operands& o, dim3 grid, dim3 block, size_t shared,
                     cudaStream_t stream) const override {
    const void* function = reinterpret_cast<const void*>(kernel_);
    if (shared > 48 * 1024) {  // above the default limit a kernel must opt in (up to 227 KiB on Hopper)
      cudaFuncAttributes attributes{};  // set only when missing: the query is harmless inside a graph capture
      if (const cudaError_t e = cudaFuncGetAttributes(&attributes, function); e != cudaSuccess) return e;
      if (attributes.maxDynamicSharedSizeBytes < static_cast<int>(shared))
        if (const cudaError_t e =
                cudaFuncSetAttribute(function, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
            e != cudaSuccess)
          return e;
    }
    switch (p.op) {
      case ARB_OP_GEMM: {
        const void *a = o.a, *b = o.b, *c = o.c, *bias = o.bias;
        void* d = o.d;
        long long m = p.m, n = p.n, k = p.k, lda = p.lda, ldb = p.ldb, ldc = p.ldc, ldd = p.ldd;
        float alpha = o.alpha, beta = o.beta;
        int ta = p.trans_a, tb = p.trans_b, act = p.activation, has_c = p.has_c, has_bias = p.has_bias;
        void* args[] = {&a, &b, &c, &bias, &d, &m, &n, &k, &lda, &ldb, &ldc, &ldd, &alpha, &beta, &ta, &tb, &act, &has_c, &has_bias};
        return cudaLaunchKernel(function, grid, block, args, shared, stream);
      }
      case ARB_OP_RMSNORM: {
        void* x = o.x;
        const void *residual = o.residual, *weight = o.weight;
        void* y = o.y;
        long long rows = p.rows, cols = p.cols, ld_x = p.ld_x, ld_r = p.ld_residual, ld_y = p.ld_y;
        float eps = o.eps;
        int has_residual = p.has_residual;
        void* args[] = {&x, &residual, &weight, &y, &rows, &cols, &ld_x, &ld_r, &ld_y, &eps, &has_residual};
        return cudaLaunchKernel(function, grid, block, args, shared, stream);
      }
      case ARB_OP_SOFTMAX: {
        const void* x = o.x;
        void* y = o.y;
        long long rows = p.rows, cols = p.cols, ld_x = p.ld_x, ld_y = p.ld_y;
        void* args[] = {&x, &y, &rows, &cols, &ld_x, &ld_y};
        return cudaLaunchKernel(function, grid, block, args, shared, stream);
      }
      case ARB_OP_ATTENTION: {
        const void *q = o.q, *k = o.k, *v = o.v;
        void* out = o.o;
        long long sizes[6] = {p.batch, p.q_len, p.kv_len, p.heads, p.kv_heads, p.cols};
        long long strides[12] = {p.ld_q_batch, p.ld_q_token, p.ld_q_head, p.ld_k_batch, p.ld_k_token, p.ld_k_head,
                                 p.ld_v_batch, p.ld_v_token, p.ld_v_head, p.ld_o_batch, p.ld_o_token, p.ld_o_head};
        float scale = o.alpha;
        int causal = p.causal;
        void* args[] = {&q, &k, &v, &out, &sizes[0], &sizes[1], &sizes[2], &sizes[3], &sizes[4], &sizes[5],
                        &strides[0], &strides[1], &strides[2], &strides[3], &strides[4], &strides[5], &strides[6],
                        &strides[7], &strides[8], &strides[9], &strides[10], &strides[11], &scale, &causal};
        return cudaLaunchKernel(function, grid, block, args, shared, stream);
      }
      default: return cudaErrorInvalidValue;
    }
  }

 private:
  cudaLibrary_t library_;
  cudaKernel_t kernel_;
};

}  // namespace

std::string module_toolchain() { return "NVRTC " + nvrtc_version() + ", " + arch(); }

std::unique_ptr<KernelModule> build_module(const Manifest& manifest, int32_t dtype, std::string& log) {
  const CompileResult compiled = compile(manifest, dtype, arch(), default_cache_dir());
  if (!compiled.ok) {
    log = "did not compile for " + arch() + ":\n" + compiled.log;
    return nullptr;
  }
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  cudaError_t e = cudaLibraryLoadData(&library, compiled.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (e == cudaSuccess) e = cudaLibraryGetKernel(&kernel, library, manifest.entry.c_str());
  if (e != cudaSuccess) {
    log = std::string("loading the compiled kernel: ") + cudaGetErrorString(e);
    return nullptr;
  }
  return std::make_unique<NvrtcModule>(library, kernel);
}

}  // namespace arbiter::generated

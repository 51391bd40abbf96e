// Helpers for the GPU tests: contexts with the CUDA plugins, device buffers, CUDA errors as
// test failures, and host references for the graph and stream tests. The same tests build
// twice: for a GPU (label `gpu`) and for the SIMT emulator (ARBITER_TEST_EMULATED, label
// `emulated`: the CUDA runtime calls are the emulator's, the plugins its builds, and the
// problem sizes smaller where emulation would take minutes).
#pragma once

#include "device/device.hpp"
#include "test_support.hpp"

#include <cuda_runtime.h>
#include <doctest/doctest.h>
#include <arbiter/float16.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CUDA_REQUIRE(call)                                                                      \
  do {                                                                                          \
    const cudaError_t cuda_status_ = (call);                                                    \
    REQUIRE_MESSAGE(cuda_status_ == cudaSuccess, #call ": ", cudaGetErrorString(cuda_status_)); \
  } while (0)

namespace arbiter::test {

#if !defined(ARBITER_TEST_EMULATED)
#define ARBITER_TEST_EMULATED 0
#endif

// Is this the SIMT emulator's build of the GPU tests?
constexpr bool emulated() { return ARBITER_TEST_EMULATED != 0; }

// The emulated tests in the sanitizers' build: emulated code runs some 9 times slower again
// there, so those tests take their smallest set (every kernel still runs; the plain build
// runs the full emulated set).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool light() { return emulated(); }
#else
constexpr bool light() { return false; }
#endif

// The shipped plugins that matter on a GPU: the reference (the gate's yardstick), cuBLASLt,
// the generated kernels and the hand-written ones. On the emulator, the emulated builds of
// the last two (cuBLASLt is NVIDIA's binary: it has none).
inline std::vector<std::string> cuda_plugins() {
#if ARBITER_TEST_EMULATED
  return {std::string(ARBITER_TEST_EMULATED_PLUGIN_DIR) + "/arbiter_generated.so",
          std::string(ARBITER_TEST_EMULATED_PLUGIN_DIR) + "/arbiter_cuda.so"};
#else
  return {plugin_file("cublaslt"), plugin_file("generated"), plugin_file("cuda")};
#endif
}

// The plugins a context for the GPU tests loads: config_loading's, with the emulator as the
// CUDA device in the emulated build. The load probe gets 10 minutes, not 20 s: an ASan build of
// the emulated generated plugin on a loaded CI machine once took longer than 20 s to load, and
// was refused as hung.
inline std::string gpu_config(const std::vector<std::string>& files, const std::string& extra = "") {
  return config_loading(files, "probe_time_limit_s = 600\n" + extra) + (emulated() ? "[cuda]\ndevice = \"emulated\"\n" : "");
}

// The shipped plugins as an installation finds them (the install's own folders: the build
// tree's lib/arbiter/plugins, and plugins-emulated on the emulator), so that their kernels
// are verified as installed ones are: the hand-written ones in this process (on the
// emulator in a forked child), the AI-generated ones in the kernel sandbox.
inline std::string installed_gpu_config(const std::string& extra = "") {
  return "log_level = \"error\"\n[plugins]\nsearch_default_paths = true\n" + extra +
         (emulated() ? "[cuda]\ndevice = \"emulated\"\n" : "");
}

// The CUDA device the tests run on: the GPU, or the emulator.
inline std::unique_ptr<Device> make_test_cuda_device(std::string* why) {
  return emulated() ? make_emulated_cuda_device(why) : make_cuda_device(0, why);
}

// A device buffer of 16-bit or 32-bit elements, filled from and read back into floats.
class DeviceArray {
 public:
  DeviceArray(int64_t elements, int32_t dtype) : elements_(elements), dtype_(dtype) {
    CUDA_REQUIRE(cudaMalloc(&data_, bytes()));
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  size_t bytes() const { return static_cast<size_t>(elements_) * dtype_size(dtype_); }
  void* data() const { return data_; }
  void upload(const std::vector<float>& values) {
    REQUIRE(static_cast<int64_t>(values.size()) == elements_);
    std::vector<unsigned char> host(bytes());
    for (int64_t i = 0; i < elements_; ++i) store_float(host.data(), i, dtype_, values[static_cast<size_t>(i)]);
    CUDA_REQUIRE(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
    finish();
  }
  std::vector<float> download() const {
    std::vector<unsigned char> host(bytes());
    CUDA_REQUIRE(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    std::vector<float> values(static_cast<size_t>(elements_));
    for (int64_t i = 0; i < elements_; ++i) values[static_cast<size_t>(i)] = load_float(host.data(), i, dtype_);
    return values;
  }
  // Every byte 0xff: NaN in every dtype, so an unwritten output cannot pass.
  void poison() {
    CUDA_REQUIRE(cudaMemset(data_, 0xff, bytes()));
    finish();
  }

 private:
  // cudaMemset and pageable uploads may return before the device has the data, and work on
  // a non-blocking stream does not wait for the legacy stream: wait here.
  static void finish() { CUDA_REQUIRE(cudaStreamSynchronize(nullptr)); }

  void* data_ = nullptr;
  int64_t elements_;
  int32_t dtype_;
};

// A row-major DLTensor on CUDA device 0 over a DeviceArray.
struct CudaTensor {
  CudaTensor(const DeviceArray& array, std::vector<int64_t> shape, int32_t dtype) : shape_(std::move(shape)) {
    t.data = array.data();
    t.device = {kDLCUDA, 0};
    t.ndim = static_cast<int>(shape_.size());
    t.dtype = {static_cast<uint8_t>(dtype == ARB_DTYPE_BF16 ? kDLBfloat : kDLFloat),
               static_cast<uint8_t>(8 * dtype_size(dtype)), 1};
    t.shape = shape_.data();
    t.strides = nullptr;
  }
  CudaTensor(const CudaTensor&) = delete;
  DLTensor t{};

 private:
  std::vector<int64_t> shape_;
};

// Values the dtype holds exactly, so host and device see the same inputs.
inline std::vector<float> random_values(size_t count, uint64_t seed, int32_t dtype, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> v(count);
  std::vector<unsigned char> one(4);
  for (float& x : v) {
    store_float(one.data(), 0, dtype, uniform(rng));
    x = load_float(one.data(), 0, dtype);
  }
  return v;
}

// ||got - want|| / ||want||, infinite if anything is not finite.
inline double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

// D[m,n] = A[m,k] * B[n,k]^T in double (B stored transposed, as LLM weights are).
inline std::vector<double> gemm_nt_reference(const std::vector<float>& a, const std::vector<float>& b, int64_t m,
                                             int64_t n, int64_t k) {
  std::vector<double> d(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(a[size_t(i * k + p)]) * double(b[size_t(j * k + p)]);
      d[size_t(i * n + j)] = s;
    }
  return d;
}

// y = x / sqrt(mean(x^2) + eps) * w per row, in double.
inline std::vector<double> rmsnorm_reference(const std::vector<double>& x, const std::vector<float>& w, int64_t rows,
                                             int64_t cols, double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += x[size_t(r * cols + c)] * x[size_t(r * cols + c)];
    const double scale = 1.0 / std::sqrt(ss / double(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) y[size_t(r * cols + c)] = x[size_t(r * cols + c)] * scale * w[size_t(c)];
  }
  return y;
}

// Rounds every value to the dtype, as a kernel storing an intermediate result would.
inline std::vector<double> rounded_to(const std::vector<double>& values, int32_t dtype) {
  std::vector<double> out(values.size());
  std::vector<unsigned char> one(4);
  for (size_t i = 0; i < values.size(); ++i) {
    store_float(one.data(), 0, dtype, static_cast<float>(values[i]));
    out[i] = load_float(one.data(), 0, dtype);
  }
  return out;
}

}  // namespace arbiter::test

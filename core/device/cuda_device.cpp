// A CUDA GPU as a device (built with ARBITER_WITH_CUDA): cudaMalloc'd memory, copies on
// the caller's stream, fills through a pinned staging buffer, events for timing. The
// runtime is linked statically and finds the driver at run time, so without a driver (or
// a GPU) make_cuda_device says why and the context goes on with the CPU alone.
#include "common/failure.hpp"
#include "device/device.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <vector>

namespace arbiter {
namespace {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  fail(status == cudaErrorMemoryAllocation ? ARB_ERR_OUT_OF_MEMORY : ARB_ERR_KERNEL,
       fmt::format("{}: {} ({})", what, cudaGetErrorString(status), cudaGetErrorName(status)));
}

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

class CudaTimer final : public DeviceTimer {
 public:
  CudaTimer() {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~CudaTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start(void* stream) override { check(cudaEventRecord(start_, as_stream(stream)), "cudaEventRecord"); }
  void stop(void* stream) override { check(cudaEventRecord(stop_, as_stream(stream)), "cudaEventRecord"); }
  double seconds() override {
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

class CudaGraph final : public DeviceGraph {
 public:
  explicit CudaGraph(cudaGraphExec_t exec) : exec_(exec) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  void launch(void* stream) override { check(cudaGraphLaunch(exec_, as_stream(stream)), "cudaGraphLaunch"); }

 private:
  cudaGraphExec_t exec_;
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int id) : id_(id) {
    check(cudaSetDevice(id), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, id), "cudaGetDeviceProperties");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    fingerprint_.kind = "cuda";
    fingerprint_.name = prop.name;
    fingerprint_.details = fmt::format("sm_{}{} sms={} driver={} runtime={}", prop.major, prop.minor,
                                       prop.multiProcessorCount, driver, runtime);
    llc_bytes_ = prop.l2CacheSize > 0 ? static_cast<size_t>(prop.l2CacheSize) : size_t(50) << 20;
  }
  DLDeviceType type() const override { return kDLCUDA; }
  const DeviceFingerprint& fingerprint() const override { return fingerprint_; }
  DeviceMemory allocate(size_t bytes) override {
    check(cudaSetDevice(id_), "cudaSetDevice");
    void* p = nullptr;
    check(cudaMalloc(&p, bytes > 0 ? bytes : 256), fmt::format("cudaMalloc of {} bytes", bytes).c_str());
    return DeviceMemory(p, bytes, [](void* q) { cudaFree(q); });
  }
  void upload(void* dst, const void* src, size_t bytes, void* stream) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(stream)), "cudaMemcpyAsync (upload)");
    check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");  // src may go away
  }
  void download(void* dst, const void* src, size_t bytes, void* stream) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)), "cudaMemcpyAsync (download)");
    check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
  }
  void copy(void* dst, const void* src, size_t bytes, void* stream) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)), "cudaMemcpyAsync (copy)");
  }
  void fill(void* dst, uint32_t pattern, size_t bytes, void* stream) override {
    std::vector<unsigned char> staging(bytes);
    for (size_t i = 0; i < bytes; ++i) staging[i] = static_cast<unsigned char>(pattern >> (8 * (i % 4)));
    upload(dst, staging.data(), bytes, stream);
  }
  void synchronize(void* stream) override { check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize"); }
  bool capturing(void* stream) const override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(as_stream(stream), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone;
  }
  void synchronize_all() override {
    check(cudaSetDevice(id_), "cudaSetDevice");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::unique_ptr<DeviceTimer> timer() override { return std::make_unique<CudaTimer>(); }
  void* create_stream() override {
    check(cudaSetDevice(id_), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return stream;
  }
  void destroy_stream(void* stream) override {
    if (stream != nullptr) cudaStreamDestroy(as_stream(stream));
  }
  std::unique_ptr<DeviceGraph> capture(void* stream, const std::function<void()>& work, std::string* why) override {
    // Thread-local mode: other threads' work (other tuners, the application) is not affected.
    cudaError_t status = cudaStreamBeginCapture(as_stream(stream), cudaStreamCaptureModeThreadLocal);
    std::string failure;
    if (status == cudaSuccess) {
      try {
        work();
      } catch (const std::exception& e) {
        failure = e.what();
      }
      cudaGraph_t graph = nullptr;
      status = cudaStreamEndCapture(as_stream(stream), &graph);  // always ends the capture
      if (failure.empty() && status == cudaSuccess && graph != nullptr) {
        cudaGraphExec_t exec = nullptr;
        status = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        if (status == cudaSuccess) return std::make_unique<CudaGraph>(exec);
      } else if (graph != nullptr) {
        cudaGraphDestroy(graph);
      }
    }
    if (failure.empty()) failure = cudaGetErrorString(status);
    cudaGetLastError();  // a failed capture leaves its error behind: not this thread's next call's
    if (why) *why = failure;
    return nullptr;
  }
  size_t last_level_cache_bytes() const override { return llc_bytes_; }

 private:
  int id_;
  DeviceFingerprint fingerprint_;
  size_t llc_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int id, std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why) *why = fmt::format("no CUDA device: cudaGetDeviceCount: {}", cudaGetErrorString(status));
    return nullptr;
  }
  if (id >= count) {
    if (why) *why = fmt::format("no CUDA device {} ({} present)", id, count);
    return nullptr;
  }
  try {
    return std::make_unique<CudaDevice>(id);
  } catch (const Failure& f) {
    if (why) *why = f.what();
    return nullptr;
  }
}

}  // namespace arbiter

// CUDA device services: memory, copies, fills, timing, the fingerprint, and workspace kept
// per thread and stream.
#include "device/device.hpp"
#include "device/workspace_pool.hpp"
#include "gpu_support.hpp"

#include <cstring>
#include <thread>

using namespace arbiter;

TEST_CASE("CUDA device: memory, copies, fills and the fingerprint") {
  std::string why;
  const auto device = test::make_test_cuda_device(&why);
  REQUIRE_MESSAGE(device != nullptr, why);
  CHECK(device->type() == kDLCUDA);
  CHECK(device->fingerprint().kind == (test::emulated() ? "cuda-emulated" : "cuda"));
  CHECK(device->emulated() == test::emulated());
  CHECK(device->fingerprint().details.find("sm_") != std::string::npos);
  CHECK(device->last_level_cache_bytes() >= (size_t(1) << 20));

  const size_t bytes = 1 << 20;
  DeviceMemory a = device->allocate(bytes), b = device->allocate(bytes);
  CHECK(reinterpret_cast<uintptr_t>(a.data()) % 256 == 0);
  std::vector<uint32_t> host(bytes / 4), back(bytes / 4);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(i * 2654435761u);
  cudaStream_t stream;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  device->upload(a.data(), host.data(), bytes, stream);
  device->copy(b.data(), a.data(), bytes, stream);
  device->download(back.data(), b.data(), bytes, stream);
  CHECK(back == host);

  device->fill(b.data(), 0x7fbadc0du, bytes, stream);
  device->download(back.data(), b.data(), bytes, stream);
  CHECK(std::all_of(back.begin(), back.end(), [](uint32_t v) { return v == 0x7fbadc0du; }));
  CUDA_REQUIRE(cudaStreamDestroy(stream));
}

TEST_CASE("CUDA device: events time work on the caller's stream") {
  const auto device = test::make_test_cuda_device(nullptr);
  REQUIRE(device != nullptr);
  const size_t bytes = test::emulated() ? size_t(16) << 20 : size_t(256) << 20;
  DeviceMemory a = device->allocate(bytes), b = device->allocate(bytes);
  cudaStream_t stream;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto timer = device->timer();
  device->copy(b.data(), a.data(), bytes, stream);  // warm-up
  timer->start(stream);
  for (int i = 0; i < 4; ++i) device->copy(b.data(), a.data(), bytes, stream);
  timer->stop(stream);
  const double seconds = timer->seconds();
  const double bandwidth = 4.0 * 2.0 * static_cast<double>(bytes) / seconds;  // read + write
  MESSAGE("device-to-device copy: " << bandwidth / 1e9 << " GB/s" << (test::emulated() ? " (emulated: host memcpy)" : ""));
  CHECK(seconds > 0);
  if (!test::emulated()) {
    CHECK(bandwidth > 50e9);   // any GPU worth tuning for
    CHECK(bandwidth < 20e12);  // no HBM is this fast: the timer measured something
  }
  CUDA_REQUIRE(cudaStreamDestroy(stream));
}

TEST_CASE("device workspace: one buffer per thread and stream, reused") {
  const auto device = test::make_test_cuda_device(nullptr);
  REQUIRE(device != nullptr);
  WorkspacePool pool;
  cudaStream_t s1, s2;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  void* first = pool.device(*device, 1000, s1);
  CHECK(first != nullptr);
  CHECK(pool.device(*device, 500, s1) == first);  // reused
  void* other = pool.device(*device, 1000, s2);
  CHECK(other != first);  // another stream may run at the same time
  void* from_thread = nullptr;
  std::thread([&] { from_thread = pool.device(*device, 1000, s1); }).join();
  CHECK(from_thread != first);
  CHECK(from_thread != other);
  CHECK(pool.device(*device, 0, s1) == nullptr);
  CUDA_REQUIRE(cudaStreamDestroy(s1));
  CUDA_REQUIRE(cudaStreamDestroy(s2));
}

TEST_CASE("CUDA device: a captured graph replays the work, and uncapturable work says why") {
  const auto device = test::make_test_cuda_device(nullptr);
  REQUIRE(device != nullptr);
  void* stream = device->create_stream();
  REQUIRE(stream != nullptr);
  const size_t bytes = 4096;
  DeviceMemory a = device->allocate(bytes), b = device->allocate(bytes);
  std::vector<uint32_t> host(bytes / 4, 0x12345678u), back(bytes / 4, 0);
  device->upload(a.data(), host.data(), bytes, stream);
  std::string why;
  auto graph = device->capture(stream, [&] { device->copy(b.data(), a.data(), bytes, stream); }, &why);
  REQUIRE_MESSAGE(graph != nullptr, why);
  device->fill(b.data(), 0, bytes, stream);
  graph->launch(stream);  // the copy happens only now
  device->download(back.data(), b.data(), bytes, stream);
  CHECK(back == host);

  // A synchronising call cannot be captured: no graph, a reason, and the stream still works.
  auto broken = device->capture(stream, [&] { device->download(back.data(), b.data(), bytes, stream); }, &why);
  CHECK(broken == nullptr);
  CHECK_FALSE(why.empty());
  device->download(back.data(), b.data(), bytes, stream);
  CHECK(back == host);
  device->destroy_stream(stream);
}

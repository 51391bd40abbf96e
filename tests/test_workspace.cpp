// The workspace pool: per thread (and, for devices, per stream) buffers that grow and are
// reused; outgrown device buffers stay valid (a graph captured earlier may hold them); no
// allocation while a stream is being captured. A CPU device stands in for a GPU here, one
// whose capturing() can be switched on.
#include "common/failure.hpp"
#include "device/device.hpp"
#include "device/workspace_pool.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <thread>

using namespace arbiter;

namespace {

// The host CPU, reporting a stream capture in progress when asked to.
class CapturingDevice final : public Device {
 public:
  bool capture_in_progress = false;
  int allocations = 0;

  DLDeviceType type() const override { return host_->type(); }
  const DeviceFingerprint& fingerprint() const override { return host_->fingerprint(); }
  DeviceMemory allocate(size_t bytes) override {
    ++allocations;
    return host_->allocate(bytes);
  }
  void upload(void* d, const void* s, size_t n, void* st) override { host_->upload(d, s, n, st); }
  void download(void* d, const void* s, size_t n, void* st) override { host_->download(d, s, n, st); }
  void copy(void* d, const void* s, size_t n, void* st) override { host_->copy(d, s, n, st); }
  void fill(void* d, uint32_t p, size_t n, void* st) override { host_->fill(d, p, n, st); }
  void synchronize(void* st) override { host_->synchronize(st); }
  bool capturing(void*) const override { return capture_in_progress; }
  void synchronize_all() override {}
  std::unique_ptr<DeviceTimer> timer() override { return host_->timer(); }
  void* create_stream() override { return nullptr; }
  void destroy_stream(void*) override {}
  std::unique_ptr<DeviceGraph> capture(void* st, const std::function<void()>& w, std::string* why) override {
    return host_->capture(st, w, why);
  }
  size_t last_level_cache_bytes() const override { return host_->last_level_cache_bytes(); }

 private:
  std::unique_ptr<Device> host_ = make_cpu_device();
};

void* const kStream = reinterpret_cast<void*>(0x1);
void* const kOtherStream = reinterpret_cast<void*>(0x2);

}  // namespace

TEST_CASE("device workspace: reused per thread and stream, grown on demand, outgrown buffers kept") {
  CapturingDevice device;
  WorkspacePool pool;
  void* small = pool.device(device, 100, kStream);
  REQUIRE(small != nullptr);
  CHECK(pool.device(device, 64, kStream) == small);  // reused, no allocation
  CHECK(device.allocations == 1);
  void* other = pool.device(device, 100, kOtherStream);
  CHECK(other != small);
  CHECK(pool.device(device, 100, kStream) == small);  // back to the first stream's buffer
  CHECK(device.allocations == 2);

  void* large = pool.device(device, 100000, kStream);
  CHECK(large != small);
  CHECK(device.allocations == 3);
  std::memset(small, 0x5a, 100);  // still valid memory (ASan would object otherwise)
  CHECK(pool.device(device, 0, kStream) == nullptr);

  void* from_thread = nullptr;
  std::thread([&] { from_thread = pool.device(device, 100, kStream); }).join();
  CHECK(from_thread != large);  // another thread, another buffer
}

TEST_CASE("device workspace: nothing is allocated while the stream is being captured") {
  CapturingDevice device;
  WorkspacePool pool;
  void* warm = pool.device(device, 4096, kStream);
  device.capture_in_progress = true;
  CHECK(pool.device(device, 1024, kStream) == warm);  // fits: the capture may use it
  CHECK(pool.device(device, 4096, kStream) == warm);
  CHECK_THROWS_WITH_AS(pool.device(device, 8192, kStream), doctest::Contains("captured into a graph"), Failure);
  CHECK_THROWS_WITH_AS(pool.device(device, 16, kOtherStream), doctest::Contains("make one call of this problem"),
                       Failure);
  CHECK(device.allocations == 1);
  device.capture_in_progress = false;
  CHECK(pool.device(device, 8192, kStream) != nullptr);  // after the capture: grown as usual
  CHECK(device.allocations == 2);
}

// The CPU as a device: memory is aligned host memory, copies are memcpy, work is
// synchronous, time is a steady clock.
#include "common/failure.hpp"
#include "device/device.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

namespace arbiter {
namespace {

class CpuTimer final : public DeviceTimer {
 public:
  void start(void*) override { start_ = std::chrono::steady_clock::now(); }
  void stop(void*) override { stop_ = std::chrono::steady_clock::now(); }
  double seconds() override { return std::chrono::duration<double>(stop_ - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_, stop_;
};

// "model name" and the ISA extensions that change which kernels run, from /proc/cpuinfo.
DeviceFingerprint read_cpu_fingerprint() {
  DeviceFingerprint f;
  f.kind = "cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(cpuinfo, line)) {
    auto value = [&] { return line.substr(line.find(':') == std::string::npos ? line.size() : line.find(':') + 2); };
    if (f.name.empty() && line.rfind("model name", 0) == 0) f.name = value();
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = value();
  }
  if (f.name.empty()) f.name = "unknown cpu";
  std::set<std::string> present;
  std::istringstream words(flags);
  for (std::string w; words >> w;) present.insert(w);
  for (const char* isa : {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512vl", "avx512bw", "avx512_bf16",
                          "avx512_fp16", "amx_tile"})
    if (present.count(isa)) f.details += (f.details.empty() ? "" : " ") + std::string(isa);
  return f;
}

size_t read_llc_bytes() {
  // The highest cache index of cpu0 is the last level; sizes read like "32768K".
  size_t best = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", index));
    std::string size;
    if (!(in >> size)) break;
    size_t value = std::strtoull(size.c_str(), nullptr, 10);
    if (!size.empty() && (size.back() == 'K' || size.back() == 'k')) value <<= 10;
    if (!size.empty() && (size.back() == 'M' || size.back() == 'm')) value <<= 20;
    best = value > best ? value : best;
  }
  return best > 0 ? best : size_t(32) << 20;
}

class CpuDevice final : public Device {
 public:
  CpuDevice() : fingerprint_(read_cpu_fingerprint()), llc_bytes_(read_llc_bytes()) {}
  DLDeviceType type() const override { return kDLCPU; }
  const DeviceFingerprint& fingerprint() const override { return fingerprint_; }
  DeviceMemory allocate(size_t bytes) override {
    const size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded > 0 ? rounded : 256);
    if (p == nullptr) fail(ARB_ERR_OUT_OF_MEMORY, fmt::format("cannot allocate {} bytes of host memory", bytes));
    return DeviceMemory(p, bytes, &std::free);
  }
  void upload(void* dst, const void* src, size_t bytes, void*) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes, void*) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes, void*) override { std::memcpy(dst, src, bytes); }
  void fill(void* dst, uint32_t pattern, size_t bytes, void*) override {
    auto* out = static_cast<unsigned char*>(dst);
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(pattern >> (8 * (i % 4)));
  }
  void synchronize(void*) override {}
  bool capturing(void*) const override { return false; }
  void synchronize_all() override {}
  std::unique_ptr<DeviceTimer> timer() override { return std::make_unique<CpuTimer>(); }
  void* create_stream() override { return nullptr; }
  void destroy_stream(void*) override {}
  std::unique_ptr<DeviceGraph> capture(void*, const std::function<void()>&, std::string* why) override {
    if (why) *why = "the CPU has no graphs: its launches run synchronously";
    return nullptr;
  }
  size_t last_level_cache_bytes() const override { return llc_bytes_; }

 private:
  DeviceFingerprint fingerprint_;
  size_t llc_bytes_;
};

}  // namespace

std::string DeviceFingerprint::id() const {
  // FNV-1a, 64 bits: stable across runs and builds (std::hash is not promised to be).
  uint64_t h = 0xcbf29ce484222325ull;
  for (const std::string* part : {&kind, &name, &details}) {
    for (unsigned char c : *part) h = (h ^ c) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;
  }
  return fmt::format("{}-{:016x}", kind, h);
}

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

Device& Devices::of(int32_t device_type) const {
  if (device_type == kDLCPU && cpu != nullptr) return *cpu;
  if (device_type == kDLCUDA && cuda != nullptr) return *cuda;
  fail(ARB_ERR_UNSUPPORTED, device_type == kDLCUDA ? (cuda_unavailable.empty() ? "no CUDA device" : cuda_unavailable)
                                                  : "device type " + std::to_string(device_type) + " is not supported");
}

}  // namespace arbiter

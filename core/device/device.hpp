// Device services: what the verification gate and the tuner need from a device, behind one
// interface so that CUDA (streams, events) fits beside the CPU. Memory is device memory
// (host memory on the CPU); the runtime stages data through host buffers.
#pragma once

#include <arbiter/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace arbiter {

// An owned block of device memory, freed by its device.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(void* data, size_t bytes, void (*release)(void*)) : data_(data, release), bytes_(bytes) {}
  void* data() const { return data_.get(); }
  size_t size() const { return bytes_; }

 private:
  std::unique_ptr<void, void (*)(void*)> data_{nullptr, [](void*) {}};
  size_t bytes_ = 0;
};

// Measures elapsed device time between two marks on a stream (CPU: a steady clock around
// synchronous work; CUDA: a pair of events).
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual void start(void* stream) = 0;
  virtual void stop(void* stream) = 0;
  // Waits for the stop mark, then returns the seconds between the marks.
  virtual double seconds() = 0;
};

// What identifies a device for the tuning table: a table entry measured on one device is
// only valid on an identical one.
struct DeviceFingerprint {
  std::string kind;     // "cpu", "cuda"
  std::string name;     // CPU model / GPU name
  std::string details;  // ISA extensions; compute capability, SM count, driver and runtime
  std::string id() const;  // a short stable hash of the three
};

// A sequence of launches recorded once and replayed as one (a CUDA graph): how the tuner
// times kernels of a few microseconds without the host's launch cost (docs/architecture.md, "Measurement").
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  virtual void launch(void* stream) = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DLDeviceType type() const = 0;
  virtual const DeviceFingerprint& fingerprint() const = 0;
  // 256-byte aligned; throws Failure(ARB_ERR_OUT_OF_MEMORY) on failure.
  virtual DeviceMemory allocate(size_t bytes) = 0;
  virtual void upload(void* device_dst, const void* host_src, size_t bytes, void* stream) = 0;
  virtual void download(void* host_dst, const void* device_src, size_t bytes, void* stream) = 0;
  // Device-to-device copy on a stream (asynchronous on a GPU).
  virtual void copy(void* device_dst, const void* device_src, size_t bytes, void* stream) = 0;
  // Fills bytes with a repeating 32-bit pattern (poison, canaries).
  virtual void fill(void* device_dst, uint32_t pattern, size_t bytes, void* stream) = 0;
  virtual void synchronize(void* stream) = 0;
  // Is work on this stream being captured into a graph (so nothing may synchronise or
  // allocate)? Always false on the CPU.
  virtual bool capturing(void* stream) const = 0;
  // Waits for all work on the device, every stream (before unloading what launched it).
  virtual void synchronize_all() = 0;
  virtual std::unique_ptr<DeviceTimer> timer() = 0;
  // A stream of the caller's own, destroyed with destroy_stream (nullptr on the CPU, where
  // work is synchronous).
  virtual void* create_stream() = 0;
  virtual void destroy_stream(void* stream) = 0;
  // Records what `work` enqueues on `stream` (the calling thread's launches only) into a
  // graph. nullptr, with the reason in *why, when the device has no graphs or the work
  // cannot be captured; the stream is usable again either way.
  virtual std::unique_ptr<DeviceGraph> capture(void* stream, const std::function<void()>& work, std::string* why) = 0;
  // Bytes of the last-level cache that timing must rotate buffers past.
  virtual size_t last_level_cache_bytes() const = 0;
  // The SIMT emulator standing in for a GPU: results are real, times are not (the tuner only
  // verifies there, and nothing reports an emulated time as a device's).
  virtual bool emulated() const { return false; }
};

// The host CPU.
std::unique_ptr<Device> make_cpu_device();

// CUDA device `id`, or nullptr with the reason in *why (no driver, no GPU, or a build
// without CUDA).
std::unique_ptr<Device> make_cuda_device(int id, std::string* why);

// The SIMT emulator as the CUDA device, or nullptr with the reason (a build without it).
std::unique_ptr<Device> make_emulated_cuda_device(std::string* why);

// The devices one context works with; the CPU is always there.
struct Devices {
  Device* cpu = nullptr;
  Device* cuda = nullptr;        // nullptr without a usable GPU
  std::string cuda_unavailable;  // why cuda is nullptr
  // The device of a problem; throws Failure(ARB_ERR_UNSUPPORTED) naming why it is missing.
  Device& of(int32_t device_type) const;
};

}  // namespace arbiter

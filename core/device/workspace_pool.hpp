// Workspace for kernels that ask for one (arb_kernel.workspace_size): one buffer per calling
// thread (host memory), or per calling thread and stream (device memory), grown on demand
// and reused, so a launch never allocates once the thread has seen its largest problem. A
// thread-local pointer makes the steady state lock-free. A device buffer is replaced only
// after its stream has finished with it, and never freed before the pool: a CUDA graph
// captured earlier may hold its address. During a capture nothing is allocated: a call
// that would need to fails with a clear message instead of breaking the capture. A thread
// keeps the buffers of its two most recent pools at hand: a composite's chain holds its
// intermediates in a pool of its own while its steps take the context's.
#pragma once

#include "device/device.hpp"

#include <cstddef>
#include <map>
#include <tuple>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace arbiter {

class WorkspacePool {
 public:
  WorkspacePool();
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;

  // At least `bytes` of 256-byte aligned host memory, private to the calling thread until
  // its next call; nullptr for 0 bytes.
  void* host(size_t bytes) {
    if (bytes == 0) return nullptr;
    for (const ThreadCache& cache : thread_caches().slot)
      if (cache.pool_id == id_ && cache.size >= bytes) return cache.data;
    return host_slow(bytes);
  }

  // At least `bytes` of `device` memory for work the calling thread queues on `stream`.
  void* device(Device& device, size_t bytes, void* stream) {
    if (bytes == 0) return nullptr;
    for (const ThreadCache& cache : device_caches().slot)
      if (cache.pool_id == id_ && cache.stream == stream && cache.device == &device && cache.size >= bytes)
        return cache.data;
    return device_slow(device, bytes, stream);
  }

 private:
  struct ThreadCache {
    uint64_t pool_id = 0;  // pools are numbered from 1 and numbers are never reused
    void* data = nullptr;
    size_t size = 0;
    void* stream = nullptr;         // device buffers only
    const Device* device = nullptr;
  };
  struct FreeDeleter {
    void operator()(void* p) const noexcept;
  };
  struct Buffer {
    std::unique_ptr<void, FreeDeleter> data;
    size_t size = 0;
  };

  struct ThreadCaches {
    ThreadCache slot[2];  // the most recent pool first
  };
  static ThreadCaches& thread_caches();
  static ThreadCaches& device_caches();
  // Where this pool's buffer goes in the thread's caches: its own slot, else the first, the
  // other pool's moved to the second.
  ThreadCache& cache_slot(ThreadCaches& caches) const;
  void* host_slow(size_t bytes);
  void* device_slow(Device& device, size_t bytes, void* stream);

  struct DeviceKey {
    std::thread::id thread;
    void* stream;
    const Device* device;
    bool operator<(const DeviceKey& o) const {
      return std::tie(thread, stream, device) < std::tie(o.thread, o.stream, o.device);
    }
  };

  const uint64_t id_;
  std::mutex mutex_;
  std::unordered_map<std::thread::id, Buffer> buffers_;
  std::map<DeviceKey, DeviceMemory> device_buffers_;
  std::vector<DeviceMemory> retired_;  // outgrown device buffers, kept for graphs that captured them
};

}  // namespace arbiter

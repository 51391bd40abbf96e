// Host-side workspace for kernels that ask for one (arb_kernel.workspace_size): one buffer
// per calling thread, grown on demand and reused, so a launch never allocates once the
// thread has seen its largest problem. A thread-local pointer makes the steady state
// lock-free. (CUDA workspace, tied to streams, comes with the CUDA device services.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace arbiter {

class WorkspacePool {
 public:
  WorkspacePool();
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;

  // At least `bytes` of 64-byte aligned host memory, private to the calling thread until
  // its next call; nullptr for 0 bytes.
  void* host(size_t bytes) {
    if (bytes == 0) return nullptr;
    const ThreadCache& cache = thread_cache();
    if (cache.pool_id == id_ && cache.size >= bytes) return cache.data;
    return host_slow(bytes);
  }

 private:
  struct ThreadCache {
    uint64_t pool_id = 0;  // pools are numbered from 1 and numbers are never reused
    void* data = nullptr;
    size_t size = 0;
  };
  struct FreeDeleter {
    void operator()(void* p) const noexcept;
  };
  struct Buffer {
    std::unique_ptr<void, FreeDeleter> data;
    size_t size = 0;
  };

  static ThreadCache& thread_cache();
  void* host_slow(size_t bytes);

  const uint64_t id_;
  std::mutex mutex_;
  std::unordered_map<std::thread::id, Buffer> buffers_;
};

}  // namespace arbiter

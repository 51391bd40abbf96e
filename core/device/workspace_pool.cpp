#include "device/workspace_pool.hpp"

#include "common/failure.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace arbiter {
namespace {
std::atomic<uint64_t> next_pool_id{1};
}

void WorkspacePool::FreeDeleter::operator()(void* p) const noexcept { std::free(p); }

WorkspacePool::WorkspacePool() : id_(next_pool_id.fetch_add(1)) {}

WorkspacePool::ThreadCaches& WorkspacePool::thread_caches() {
  thread_local ThreadCaches caches;
  return caches;
}

WorkspacePool::ThreadCaches& WorkspacePool::device_caches() {
  thread_local ThreadCaches caches;
  return caches;
}

WorkspacePool::ThreadCache& WorkspacePool::cache_slot(ThreadCaches& caches) const {
  if (caches.slot[0].pool_id == id_) return caches.slot[0];
  if (caches.slot[1].pool_id == id_) return caches.slot[1];
  caches.slot[1] = caches.slot[0];
  return caches.slot[0];
}

void* WorkspacePool::device_slow(Device& device, size_t bytes, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceMemory& memory = device_buffers_[DeviceKey{std::this_thread::get_id(), stream, &device}];
  if (memory.size() < bytes) {
    if (device.capturing(stream))
      fail(ARB_ERR_INVALID_ARGUMENT,
           fmt::format("this stream is being captured into a graph, and this thread has no {} byte workspace for it "
                       "yet (allocating would break the capture): make one call of this problem on this stream and "
                       "thread before capturing",
                       bytes));
    if (memory.size() > 0) {
      device.synchronize(stream);  // work queued earlier on this stream may still use the old one,
      retired_.push_back(std::move(memory));  // and graphs captured earlier keep its address: never freed
    }
    memory = device.allocate((bytes + 255) / 256 * 256);
  }
  cache_slot(device_caches()) = ThreadCache{id_, memory.data(), memory.size(), stream, &device};
  return memory.data();
}

void* WorkspacePool::host_slow(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Buffer& buffer = buffers_[std::this_thread::get_id()];
  if (buffer.size < bytes) {
    const size_t size = (bytes + 255) / 256 * 256;
    void* data = std::aligned_alloc(256, size);  // 256, as device memory: a chain's steps keep one alignment class
    if (data == nullptr) throw std::bad_alloc();
    buffer.data.reset(data);  // the thread's previous buffer; CPU launches are synchronous
    buffer.size = size;
  }
  cache_slot(thread_caches()) = ThreadCache{id_, buffer.data.get(), buffer.size};
  return buffer.data.get();
}

}  // namespace arbiter

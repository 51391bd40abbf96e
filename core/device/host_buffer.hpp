// An owned, 256-byte aligned block of host memory (the alignment cudaMalloc gives, so a
// problem's alignment class is the same on CPU and GPU buffers).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace arbiter {

class HostBuffer {
 public:
  static constexpr size_t kAlignment = 256;

  HostBuffer() = default;
  explicit HostBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    void* p = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    if (p == nullptr) throw std::bad_alloc();
    data_.reset(static_cast<std::byte*>(p));
  }
  HostBuffer(const HostBuffer& other) : HostBuffer(other.bytes_) {
    if (bytes_ > 0) std::memcpy(data_.get(), other.data_.get(), bytes_);
  }
  HostBuffer& operator=(const HostBuffer& other) {
    if (this != &other) *this = HostBuffer(other);
    return *this;
  }
  HostBuffer(HostBuffer&&) noexcept = default;
  HostBuffer& operator=(HostBuffer&&) noexcept = default;

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t bytes_ = 0;
};

}  // namespace arbiter

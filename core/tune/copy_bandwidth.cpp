#include "tune/copy_bandwidth.hpp"

#include "tune/timing_stats.hpp"

#include <algorithm>
#include <vector>

namespace arbiter {

double measure_copy_bandwidth(Device& device) {
  const size_t bytes = std::max<size_t>(2 * device.last_level_cache_bytes(), size_t(64) << 20);
  DeviceMemory a = device.allocate(bytes), b = device.allocate(bytes);
  device.fill(a.data(), 0x3f800000u, bytes, nullptr);
  device.copy(b.data(), a.data(), bytes, nullptr);  // warm-up
  std::vector<double> seconds;
  for (int i = 0; i < 10; ++i) {
    auto timer = device.timer();
    timer->start(nullptr);
    device.copy(b.data(), a.data(), bytes, nullptr);
    timer->stop(nullptr);
    seconds.push_back(timer->seconds());
  }
  return 2.0 * static_cast<double>(bytes) / statistics(seconds).median;
}

}  // namespace arbiter

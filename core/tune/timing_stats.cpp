#include "tune/timing_stats.hpp"

#include <algorithm>
#include <cmath>

namespace arbiter {

TimingStats statistics(std::vector<double> samples) {
  TimingStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) { return samples[static_cast<size_t>(std::lround(q * static_cast<double>(samples.size() - 1)))]; };
  s.median = at(0.5);
  s.p20 = at(0.2);
  s.p80 = at(0.8);
  s.samples = static_cast<int>(samples.size());
  return s;
}

}  // namespace arbiter

// Timing samples reduced to what the tuner, the table and the reports use: the median and
// the 20th and 80th percentiles (nearest rank), and the spread that is the measured noise.
#pragma once

#include <vector>

namespace arbiter {

struct TimingStats {
  double median = 0, p20 = 0, p80 = 0;  // seconds per launch
  int samples = 0;
  double spread() const { return median > 0 ? (p80 - p20) / (2 * median) : 0; }
};

// The measured noise between two candidates: the larger relative spread (p80 - p20) /
// (2 median) of the two, and at least 1%.
double measured_noise(const TimingStats& a, const TimingStats& b);
// Step 5: does the incumbent stay against a faster challenger? Only a gain (relative to the
// incumbent's median) larger than the measured noise replaces it.
bool incumbent_stays(const TimingStats& incumbent, const TimingStats& challenger);

// Nearest-rank percentiles of seconds per launch; empty samples give zeros.
TimingStats statistics(std::vector<double> samples);

}  // namespace arbiter

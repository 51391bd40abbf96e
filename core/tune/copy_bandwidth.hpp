// The copy bandwidth of a device: bytes read plus bytes written per second by a copy past
// the last-level cache (device to device on a GPU, memcpy on the host). One definition for
// the tuner's too-fast check and the benchmark reports.
#pragma once

#include "device/device.hpp"

namespace arbiter {

// A copy of max(2 x last-level cache, 64 MiB), one warm-up, then the median of 10.
double measure_copy_bandwidth(Device& device);

}  // namespace arbiter

// Test helper: writes tuning-table entries into a table file, one locked update each, as a
// tuning process does. `arbiter_table_writer <path> <prefix> <count>` writes <count>
// entries; a count of 0 rewrites the table with large batches forever (until killed).
#include "common/failure.hpp"
#include "device/device.hpp"
#include "table/table_file.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace arbiter;

namespace {
TableEntry entry(const std::string& prefix, int i) {
  TableEntry e;
  e.key = "softmax f32 rows=" + std::to_string(i + 1) + " cols=" + prefix + " ldx=0 ldy=0 align=4 device=cpu";
  e.device = "";
  e.kernel = "cpu.softmax";
  e.plugin_version = "1.0.0";
  e.build_id = "test";
  e.median_us = 1.0 + i;
  e.p20_us = e.median_us;
  e.p80_us = e.median_us;
  e.samples = 20;
  e.verified = true;
  e.verification = "test";
  e.when = utc_now();
  return e;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: arbiter_table_writer <path> <prefix> <count>\n");
    return 2;
  }
  const std::string path = argv[1], prefix = argv[2];
  const int count = std::atoi(argv[3]);
  DeviceFingerprint device{"cpu", "test machine", prefix};
  try {
    if (count > 0) {
      for (int i = 0; i < count; ++i)
        update_table_file(path, [&](TuningTable& t) {
          TableEntry e = entry(prefix, i);
          e.device = device.id();
          t.put(e, device);
        });
      return 0;
    }
    for (int round = 0;; ++round)  // large rewrites, to be killed in the middle of one
      update_table_file(path, [&](TuningTable& t) {
        for (int i = 0; i < 2000; ++i) {
          TableEntry e = entry(prefix + std::to_string(round % 7), i);
          e.device = device.id();
          t.put(e, device);
        }
      });
  } catch (const Failure& f) {
    std::fprintf(stderr, "arbiter_table_writer: %s\n", f.what());
    return 1;
  }
}

#include "plugin/float_control.hpp"

#include <fmt/format.h>

namespace arbiter {

std::string describe_change(const FloatControl& before, const FloatControl& after) {
#if defined(__x86_64__) || defined(__i386__)
  std::string out;
  if (const uint32_t changed = (before.mxcsr ^ after.mxcsr) & ~FloatControl::kStickyFlags; changed != 0) {
    std::string what;
    auto note = [&](uint32_t bit, const char* name) {
      if (changed & bit) what += std::string(what.empty() ? "" : ", ") + name + ((after.mxcsr & bit) ? " on" : " off");
    };
    note(0x8000, "flush-to-zero");
    note(0x0040, "denormals-are-zero");
    if (changed & 0x6000) what += std::string(what.empty() ? "" : ", ") + "rounding mode";
    if (changed & 0x1f80) what += std::string(what.empty() ? "" : ", ") + "exception masks";
    out = fmt::format("MXCSR {:#06x} -> {:#06x} ({})", before.mxcsr & ~FloatControl::kStickyFlags,
                      after.mxcsr & ~FloatControl::kStickyFlags, what.empty() ? "reserved bits" : what);
  }
  if (before.x87 != after.x87)
    out += fmt::format("{}x87 control word {:#06x} -> {:#06x}", out.empty() ? "" : ", ", before.x87, after.x87);
  return out;
#else
  return fmt::format("rounding mode {} -> {}", before.rounding, after.rounding);
#endif
}

}  // namespace arbiter

// The calling thread's floating-point control state, which a kernel may change for itself but
// must give back: rounding mode, flush-to-zero and denormals-are-zero, exception masks. On
// x86-64 that is MXCSR without its sticky exception flags (bits 0-5, which arithmetic sets)
// and the x87 control word; elsewhere the rounding mode. A kernel that leaves it changed makes
// the application's own arithmetic wrong after the call (1.0f / 3.0f rounded toward zero,
// subnormals flushed), so every launch compares it before and after (kernel_call.cpp).
#pragma once

#include <cstdint>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#else
#include <cfenv>
#endif

namespace arbiter {

struct FloatControl {
#if defined(__x86_64__) || defined(__i386__)
  static constexpr uint32_t kStickyFlags = 0x3f;
  uint32_t mxcsr = 0;
  uint16_t x87 = 0;

  // MXCSR as read, sticky flags included (they are masked where compared: this is on the path
  // of every launch).
  static FloatControl now() noexcept {
    FloatControl c;
    c.mxcsr = _mm_getcsr();
    __asm__ volatile("fnstcw %0" : "=m"(c.x87));
    return c;
  }
  // Puts the control bits back; the sticky flags stay as they are now.
  void restore() const noexcept {
    _mm_setcsr((mxcsr & ~kStickyFlags) | (_mm_getcsr() & kStickyFlags));
    __asm__ volatile("fldcw %0" : : "m"(x87));
  }
  bool operator==(const FloatControl& o) const noexcept {
    return ((mxcsr ^ o.mxcsr) & ~kStickyFlags) == 0 && x87 == o.x87;
  }
#else
  int rounding = 0;
  static FloatControl now() noexcept { return FloatControl{std::fegetround()}; }
  void restore() const noexcept { std::fesetround(rounding); }
  bool operator==(const FloatControl& o) const noexcept { return rounding == o.rounding; }
#endif
  bool operator!=(const FloatControl& o) const noexcept { return !(*this == o); }
};

// What changed between two states, in words ("MXCSR 0x1f80 -> 0x9fc0 (flush-to-zero,
// denormals-are-zero)").
std::string describe_change(const FloatControl& before, const FloatControl& after);

}  // namespace arbiter

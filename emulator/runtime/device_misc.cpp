// The rest of the device API: __trap, clock64, __nanosleep and a plain yield.
#include "engine.hpp"

#include <chrono>

namespace arbiter::emu {

void trap(const char* why, Where where) { fault(kErrorLaunchFailure, std::string(why) + " (the kernel trapped)", where); }

long long clock64() {
  // A steady clock in nanoseconds stands in for the SM's cycle counter: it only ever grows.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void nanosleep(unsigned) { spin("__nanosleep", Where::current()); }

void yield(Where where) { spin("a yield", where); }

}  // namespace arbiter::emu

// One emulated CUDA thread's host-side execution context: a fiber on its own stack, resumed by
// the scheduler and yielding back to it (Boost.Context: fcontext, tens of nanoseconds a switch;
// in AddressSanitizer builds the annotated ucontext path, so that ASan follows the stack
// switches). Stacks come from a pool and carry a guard page (an overflow faults, never corrupts).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace arbiter::emu {

class Fiber {
 public:
  // `body` runs on the fiber's stack at the first resume().
  Fiber(std::function<void()> body, size_t stack_bytes);
  // Destroying a fiber that has not finished unwinds its stack (every destructor on it runs).
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Runs the fiber until it yields or its body returns; false once it has finished.
  bool resume();
  bool finished() const;
  // From inside a fiber: back to whoever resumed it.
  static void yield();
  // The fiber running on this host thread, or nullptr.
  static Fiber* current();

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// The stack size an emulated thread gets (larger under the sanitizers).
size_t default_fiber_stack_bytes();

}  // namespace arbiter::emu

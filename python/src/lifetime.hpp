// The lifetime of a context and of its plans, shared by both: closing a context (explicitly, or
// when Python collects it) destroys its open plans first and must not free anything a call or a
// plan run on another thread is still using.
//
// Lock order: `lifetime` is only ever waited for with the GIL released. A thread may take the GIL
// while it holds `lifetime` (a tune progress callback), since no thread holding the GIL waits for
// `lifetime`; so no wait can close a cycle. A callback may call the context again (glibc's rwlock
// takes a read lock again without waiting for a queued writer), but not close it: that would
// wait for itself, so it is refused. Locks nest in one order: lifetime, a plan's own lock
// (plan.hpp), plans_mutex.
#pragma once

#include "python_errors.hpp"

#include <arbiter/arbiter.h>
#include <nanobind/nanobind.h>

#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace arbiter::python {

namespace nb = nanobind;

// How many ContextUse this thread holds (a callback runs inside one).
inline thread_local int held_context_uses = 0;

// Closing from inside a call of a context (a tune progress callback) would wait for that call.
inline void refuse_close_inside_a_call() {
  if (held_context_uses > 0)
    raise_error(ARB_ERR_INVALID_ARGUMENT, "close() called from inside a callback of an arbiter call on this thread");
}

struct ContextState {
  std::shared_mutex lifetime;  // calls and runs hold it shared; closing takes it alone
  arb_context context = nullptr;
  std::mutex plans_mutex;               // creations hold `lifetime` shared, so they guard the set here
  std::unordered_set<arb_plan*> plans;  // each open plan's handle, destroyed (and nulled) before the context

  // Destroys the open plans, then the context. Call with the GIL released.
  void close() {
    std::unique_lock<std::shared_mutex> lock(lifetime);
    {
      std::lock_guard<std::mutex> plans_lock(plans_mutex);
      for (arb_plan* plan : plans) {
        arb_plan_destroy(*plan);
        *plan = nullptr;
      }
      plans.clear();
    }
    arb_context_destroy(context);
    context = nullptr;
  }
};

[[noreturn]] inline void raise_context_closed() {
  raise_error(ARB_ERR_INVALID_ARGUMENT, "this arbiter context is closed");
}

// The open context for the duration of a call made with the GIL held (explain, plugins, verify,
// tune): the lock is waited for without the GIL, then the GIL is taken back.
class ContextUse {
 public:
  explicit ContextUse(ContextState& state) : lock_(state.lifetime, std::defer_lock) {
    {
      nb::gil_scoped_release release;
      lock_.lock();
    }
    if (state.context == nullptr) raise_context_closed();
    context_ = state.context;
    ++held_context_uses;
  }
  ~ContextUse() { --held_context_uses; }
  ContextUse(const ContextUse&) = delete;
  ContextUse& operator=(const ContextUse&) = delete;
  arb_context get() const { return context_; }

 private:
  std::shared_lock<std::shared_mutex> lock_;
  arb_context context_ = nullptr;
};

}  // namespace arbiter::python

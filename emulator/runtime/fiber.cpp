#include "fiber.hpp"
#include "fork_safe_mutex.hpp"

#include <boost/context/fiber.hpp>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif
#include <boost/context/stack_context.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <new>
#include <stdexcept>
#include <vector>

namespace arbiter::emu {
namespace ctx = boost::context;

namespace {

// mmap'd stacks with a guard page below, kept for reuse: a block of 384 threads would
// otherwise cost three system calls a thread on every launch.
class StackPool {
 public:
  ctx::stack_context take(size_t bytes) {
    {
      std::lock_guard<ForkSafeMutex> lock(mutex_);
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].size == bytes) {
          ctx::stack_context s = free_[i];
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          return s;
        }
    }
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* base = ::mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    ::mprotect(base, page, PROT_NONE);
    ctx::stack_context s;
    s.size = bytes;
    s.sp = static_cast<char*>(base) + page + bytes;  // stacks grow down
    return s;
  }
  void give_back(const ctx::stack_context& s) {
    std::lock_guard<ForkSafeMutex> lock(mutex_);
    if (free_.size() < 4096) {
      free_.push_back(s);
      return;
    }
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    ::munmap(static_cast<char*>(s.sp) - s.size - page, s.size + page);
  }

 private:
  ForkSafeMutex mutex_{fork_rank::stacks};
  std::vector<ctx::stack_context> free_;
};

StackPool& pool() {
  static StackPool* p = new StackPool;  // never destroyed: fibers may outlive static destruction
  return *p;
}

struct PooledStack {
  size_t bytes;
  ctx::stack_context allocate() { return pool().take(bytes); }
  void deallocate(ctx::stack_context& s) noexcept { pool().give_back(s); }
};

thread_local Fiber* running __attribute__((tls_model("initial-exec"))) = nullptr;

// AddressSanitizer must be told of every stack switch (its fake stacks, its idea of where the
// stack is): start before the switch, finish once on the other stack.
#if defined(__SANITIZE_ADDRESS__)
void start_switch(void** fake_stack, const void* bottom, size_t size) { __sanitizer_start_switch_fiber(fake_stack, bottom, size); }
void finish_switch(void* fake_stack, const void** bottom, size_t* size) {
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
}
#else
void start_switch(void**, const void*, size_t) {}
void finish_switch(void*, const void**, size_t*) {}
#endif

}  // namespace

struct Fiber::State {
  ctx::fiber self;    // the fiber while it is suspended (empty while it runs or once finished)
  ctx::fiber caller;  // whoever resumed it, while it runs
  bool done = false;
  const void* stack_bottom = nullptr;  // the fiber's stack
  size_t stack_size = 0;
  const void* caller_bottom = nullptr;  // the resumer's stack (for ASan's switch back)
  size_t caller_size = 0;
  void* fake_stack = nullptr;
};

Fiber::Fiber(std::function<void()> body, size_t stack_bytes) : state_(std::make_unique<State>()) {
  State* s = state_.get();
  ctx::stack_context stack = pool().take(stack_bytes);
  s->stack_bottom = static_cast<char*>(stack.sp) - stack.size;
  s->stack_size = stack.size;
  s->self = ctx::fiber(std::allocator_arg, ctx::preallocated(stack.sp, stack.size, stack), PooledStack{stack_bytes},
                       [s, body = std::move(body)](ctx::fiber&& caller) {
                         finish_switch(nullptr, &s->caller_bottom, &s->caller_size);
                         s->caller = std::move(caller);
                         body();
                         s->done = true;
                         start_switch(nullptr, s->caller_bottom, s->caller_size);  // this stack is done
                         return std::move(s->caller);
                       });
}

Fiber::~Fiber() = default;  // ctx::fiber's destructor unwinds a suspended fiber

bool Fiber::resume() {
  if (state_->done) return false;
  Fiber* outer = running;
  running = this;
  void* fake_stack = nullptr;
  start_switch(&fake_stack, state_->stack_bottom, state_->stack_size);
  state_->self = std::move(state_->self).resume();
  finish_switch(fake_stack, nullptr, nullptr);
  running = outer;
  return !state_->done;
}

bool Fiber::finished() const { return state_->done; }

void Fiber::yield() {
  Fiber* f = running;
  if (f == nullptr) throw std::logic_error("Fiber::yield outside a fiber");
  State& s = *f->state_;
  start_switch(&s.fake_stack, s.caller_bottom, s.caller_size);
  s.caller = std::move(s.caller).resume();
  finish_switch(s.fake_stack, &s.caller_bottom, &s.caller_size);
}

Fiber* Fiber::current() { return running; }

size_t default_fiber_stack_bytes() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return size_t(512) << 10;
#else
  return size_t(128) << 10;
#endif
}

}  // namespace arbiter::emu

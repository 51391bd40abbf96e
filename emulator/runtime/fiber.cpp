#include "fiber.hpp"

#include <boost/context/fiber.hpp>
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
      std::lock_guard<std::mutex> lock(mutex_);
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
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() < 4096) {
      free_.push_back(s);
      return;
    }
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    ::munmap(static_cast<char*>(s.sp) - s.size - page, s.size + page);
  }

 private:
  std::mutex mutex_;
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

thread_local Fiber* running = nullptr;

}  // namespace

struct Fiber::State {
  ctx::fiber self;    // the fiber while it is suspended (empty while it runs or once finished)
  ctx::fiber caller;  // whoever resumed it, while it runs
  bool done = false;
};

Fiber::Fiber(std::function<void()> body, size_t stack_bytes) : state_(std::make_unique<State>()) {
  State* s = state_.get();
  s->self = ctx::fiber(std::allocator_arg, PooledStack{stack_bytes}, [s, body = std::move(body)](ctx::fiber&& caller) {
    s->caller = std::move(caller);
    body();
    s->done = true;
    return std::move(s->caller);
  });
}

Fiber::~Fiber() = default;  // ctx::fiber's destructor unwinds a suspended fiber

bool Fiber::resume() {
  if (state_->done) return false;
  Fiber* outer = running;
  running = this;
  state_->self = std::move(state_->self).resume();
  running = outer;
  return !state_->done;
}

bool Fiber::finished() const { return state_->done; }

void Fiber::yield() {
  Fiber* f = running;
  if (f == nullptr) throw std::logic_error("Fiber::yield outside a fiber");
  f->state_->caller = std::move(f->state_->caller).resume();
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

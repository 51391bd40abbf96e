#include "fork_safe_mutex.hpp"

#include <pthread.h>

#include <algorithm>
#include <vector>

namespace arbiter::emu {
namespace {

struct Registry {
  std::mutex mutex;                    // taken first before fork, released last
  std::vector<ForkSafeMutex*> by_rank;  // ascending
};

Registry& registry() {
  static Registry* r = [] {
    auto* fresh = new Registry;  // never destroyed: a fork may come during static destruction
    pthread_atfork(
        [] {
          registry().mutex.lock();
          for (ForkSafeMutex* m : registry().by_rank) m->lock();
        },
        [] {
          auto& list = registry().by_rank;
          for (auto it = list.rbegin(); it != list.rend(); ++it) (*it)->unlock();
          registry().mutex.unlock();
        },
        [] {
          auto& list = registry().by_rank;
          for (auto it = list.rbegin(); it != list.rend(); ++it) (*it)->unlock();
          registry().mutex.unlock();
        });
    return fresh;
  }();
  return *r;
}

}  // namespace

ForkSafeMutex::ForkSafeMutex(int rank) : rank_(rank) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto at = std::upper_bound(r.by_rank.begin(), r.by_rank.end(), rank,
                             [](int value, const ForkSafeMutex* m) { return value < m->rank(); });
  r.by_rank.insert(at, this);
}

}  // namespace arbiter::emu

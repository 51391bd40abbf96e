// The hot-path map from problem to chosen kernel. Readers take no lock and allocate
// nothing: an open-addressing table whose slots are written once, key first, then the
// value published with a release store. Writers (on a miss) are serialised by the caller.
// When the table fills, a bigger one replaces it; retired tables live until the cache dies,
// so a reader still probing an old table stays safe.
#pragma once

#include "problem/ops/call_key.hpp"
#include "problem/problem.hpp"

#include <atomic>
#include <memory>
#include <vector>

namespace arbiter {

template <typename Value>
class SelectionCache {
 public:
  SelectionCache() { install(std::make_unique<Table>(kInitialCapacity)); }
  SelectionCache(const SelectionCache&) = delete;
  SelectionCache& operator=(const SelectionCache&) = delete;

  // `words`: the words of the problem's op (Op::problem_words()); the cache holds only
  // problems zero outside their op's words (Dispatcher checks on a miss), so comparing those
  // words compares the whole problems.
  const Value* find(const arb_problem& key, uint64_t hash, ProblemWords words = kAllProblemWords) const noexcept {
    const Table* table = current_.load(std::memory_order_acquire);
    for (size_t i = table->home(hash);; i = (i + 1) & table->mask) {
      const Slot& slot = table->slots[i];
      const Value* value = slot.value.load(std::memory_order_acquire);
      if (value == nullptr) return nullptr;
      if (slot.hash == hash && same_problem(slot.key, key, words)) return value;
    }
  }

  // find() of a problem held as its call key (the calls' fast path), comparing the key's first
  // `words` words (call_key_words of its op), and answering the cache's copy of the problem
  // too, which lives as long as the cache. The caller hashes the key as it hashes the problem
  // it packs (Dispatcher::hash).
  struct Hit {
    const Value* value;
    const arb_problem* key;
  };
  Hit find(const CallKey& key, uint64_t hash, size_t words) const noexcept {
    const Table* table = current_.load(std::memory_order_acquire);
    for (size_t i = table->home(hash);; i = (i + 1) & table->mask) {
      const Slot& slot = table->slots[i];
      const Value* value = slot.value.load(std::memory_order_acquire);
      if (value == nullptr) return {nullptr, nullptr};
      // The key alone, which fails at once on most other problems (its tag: op, dtype, flags;
      // then the sizes): on a hit, the hash's compare would be two instructions more.
      if (same_call_key(slot.call_key, key, words)) return {value, &slot.key};
    }
  }

  // Caller holds the writers' lock and has checked that key is absent. The key must be zero
  // outside its op's words (pack_call_key's premise).
  void insert(const arb_problem& key, uint64_t hash, const Value* value) {
    Table* table = current_.load(std::memory_order_relaxed);
    if ((table->used + 1) * 2 > table->mask + 1) {  // keep the load factor under 1/2
      auto bigger = std::make_unique<Table>((table->mask + 1) * 2);
      for (size_t i = 0; i <= table->mask; ++i) {
        const Slot& slot = table->slots[i];
        if (const Value* v = slot.value.load(std::memory_order_relaxed)) place(*bigger, slot.key, slot.hash, v);
      }
      table = install(std::move(bigger));
    }
    place(*table, key, hash, value);
  }

  // Forgets every entry (caller holds the writers' lock): an empty table replaces the
  // current one, which stays alive for readers still probing it.
  void clear() { install(std::make_unique<Table>(kInitialCapacity)); }

  size_t size() const { return current_.load(std::memory_order_acquire)->used; }

 private:
  static constexpr size_t kInitialCapacity = 64;

  struct Slot {
    std::atomic<const Value*> value{nullptr};
    uint64_t hash = 0;
    CallKey call_key = kNoCallKey;  // the problem packed; kNoCallKey where it has no key
    arb_problem key{};
  };
  struct Table {
    explicit Table(size_t capacity)
        : mask(capacity - 1), shift(64 - static_cast<unsigned>(__builtin_ctzll(capacity))), slots(new Slot[capacity]) {}
    // A hash's first slot: its top bits (problem_hash mixes every bit of the problem into them).
    size_t home(uint64_t hash) const { return static_cast<size_t>(hash >> shift); }
    size_t mask;
    unsigned shift;  // 64 - log2(capacity); the capacity is a power of two, at least 64
    std::unique_ptr<Slot[]> slots;
    size_t used = 0;
  };

  static void place(Table& table, const arb_problem& key, uint64_t hash, const Value* value) {
    size_t i = table.home(hash);
    while (table.slots[i].value.load(std::memory_order_relaxed) != nullptr) i = (i + 1) & table.mask;
    table.slots[i].hash = hash;
    if (!pack_call_key(key, table.slots[i].call_key)) table.slots[i].call_key = kNoCallKey;
    table.slots[i].key = key;
    table.slots[i].value.store(value, std::memory_order_release);  // publish after the key
    ++table.used;
  }

  Table* install(std::unique_ptr<Table> table) {
    Table* raw = table.get();
    tables_.push_back(std::move(table));
    current_.store(raw, std::memory_order_release);
    return raw;
  }

  std::atomic<Table*> current_{nullptr};
  std::vector<std::unique_ptr<Table>> tables_;  // every table ever installed
};

}  // namespace arbiter

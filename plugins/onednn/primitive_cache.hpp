// oneDNN primitives, one set per problem, created (JIT code and all) on the first
// supports(), workspace_size() or launch that names the problem and kept for the plugin's
// life, so that a launch on a hit allocates nothing of its own: it finds the entry, takes a
// free slot (memory objects and a stream that only one launch uses at a time), points the
// slot's memory objects at the call's data and executes.
#pragma once

#include "onednn_library.hpp"

#include <arbiter/plugin.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace arbiter::plugins::onednn {

// What a primitive depends on: the problem less what the plugin handles itself (C: copied
// into D first; alpha and beta: run-time scalars; alignment; the device).
struct ProblemKey {
  std::array<int64_t, 13> fields{};
  bool operator==(const ProblemKey& other) const { return fields == other.fields; }
};
struct ProblemKeyHash {
  size_t operator()(const ProblemKey& key) const noexcept;
};
ProblemKey key_of(const arb_problem& p);

// The memory objects of one executing launch. Arguments are in a fixed order.
enum Argument { kSrc, kWeights, kDst, kBias, kScale, kBeta, kScratchpad, kArgumentCount };

struct Slot {
  dnnl_stream_t stream = nullptr;
  std::array<dnnl_memory_t, kArgumentCount> memory{};  // those the variant takes, else NULL
  float scale = 1.0f;  // what kScale points at
  float beta = 1.0f;   // what kBeta points at
};

// One primitive: the problem with alpha == 1 (no scaling), with alpha given at run time, or,
// with C, with alpha / beta and beta given at run time (`rescaled`: D = act(beta (alpha / beta
// A B + C) + bias), C read from D as it is, so that beta C is never rounded to a 16-bit D).
// The primitive is created with the entry, and its implementation and scratchpad are read
// from the primitive's own descriptor, not from the one it was created from: oneDNN's
// primitive cache may hand back an equivalent primitive of another implementation (its key
// ignores the strides of size-1 dimensions: gemm 1x64x64 with lda 64 and with lda 128 meet
// there, though their descriptors chose brgemm, which needs a scratchpad, and jit gemm).
struct Variant {
  dnnl_primitive_desc_t descriptor = nullptr;  // what the primitive was created from (owned)
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t scratchpad{};  // the primitive's, when scratchpad_bytes > 0
  size_t scratchpad_bytes = 0;
  std::string implementation;
  std::array<int, kArgumentCount> argument_id{};  // DNNL_ARG_* of each argument it takes; 0: not taken
  std::mutex slots_mutex;
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<Slot*> free_slots;  // capacity kept >= slots.size(): a release never allocates
};

struct Entry {
  Entry() = default;
  ~Entry();  // releases its oneDNN objects
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

  bool supported = false;
  std::string why;  // when not supported
  Variant plain, scaled, rescaled;  // rescaled: only with C, and only where oneDNN has it fast
  size_t workspace_bytes = 0;
  std::array<dnnl_memory_desc_t, kArgumentCount> descriptor{};  // kScratchpad: per variant
};

// Builds the entry of a problem (a refusal is an entry that says why).
std::unique_ptr<Entry> build_entry(const OneDnnLibrary& library, const arb_problem& p);

class PrimitiveCache {
 public:
  // Entries beyond this are built for one call and dropped (a program with unbounded
  // shapes must not grow without bound).
  static constexpr size_t kCapacity = 4096;

  // The entry of `p`: cached, or built and cached; or, when the cache is full, built into
  // `spare` and returned from there.
  Entry& find(const OneDnnLibrary& library, const arb_problem& p, std::unique_ptr<Entry>& spare);

  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<ProblemKey, std::unique_ptr<Entry>, ProblemKeyHash> entries_;
};

// The process's cache (created after the library, so destroyed before it).
PrimitiveCache& primitive_cache();

// A slot of `variant`, taken for one launch and given back when it goes out of scope.
class SlotLease {
 public:
  SlotLease(const OneDnnLibrary& library, Entry& entry, Variant& variant);
  ~SlotLease();
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  Slot& slot() { return *slot_; }

 private:
  Variant& variant_;
  Slot* slot_ = nullptr;
};

}  // namespace arbiter::plugins::onednn

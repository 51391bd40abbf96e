#include "verify/isolated_verification.hpp"

#include "common/child_process.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

namespace arbiter {
namespace {

template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void put_text(std::string& out, const std::string& text) {
  put<uint64_t>(out, text.size());
  out += text;
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  bool get(T& value) {
    if (bytes_.size() - at_ < sizeof value) return false;
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return true;
  }
  bool get_text(std::string& text) {
    uint64_t size = 0;
    if (!get(size) || bytes_.size() - at_ < size) return false;
    text.assign(bytes_.data() + at_, size);
    at_ += size;
    return true;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
};

}  // namespace

std::string encode_verdict(const Verdict& v) {
  std::string out;
  put<uint8_t>(out, v.passed ? 1 : 0);
  put<int32_t>(out, v.trials);
  put<int32_t>(out, v.shapes);
  put<double>(out, v.max_error);
  put<uint64_t>(out, v.failed_checks.size());
  for (const std::string& check : v.failed_checks) put_text(out, check);
  put_text(out, v.detail);
  return out;
}

std::optional<Verdict> decode_verdict(std::string_view bytes) {
  Reader in(bytes);
  Verdict v;
  uint8_t passed = 0;
  int32_t trials = 0, shapes = 0;
  uint64_t checks = 0;
  if (!in.get(passed) || passed > 1 || !in.get(trials) || !in.get(shapes) || !in.get(v.max_error) || !in.get(checks) ||
      checks > bytes.size())
    return std::nullopt;
  v.passed = passed == 1;
  v.trials = trials;
  v.shapes = shapes;
  v.failed_checks.resize(static_cast<size_t>(checks));
  for (std::string& check : v.failed_checks)
    if (!in.get_text(check)) return std::nullopt;
  if (!in.get_text(v.detail) || !in.done()) return std::nullopt;
  return v;
}

namespace {

// What a child's end most likely means, for the verdict's detail.
std::string likely_cause(const std::string& failure, bool emulated) {
  if (failure.find("SIGSEGV") != std::string::npos || failure.find("SIGBUS") != std::string::npos)
    return "an access through a wild or out-of-bounds pointer";
  if (failure.find("SIGABRT") != std::string::npos) return "abort(): a failed assertion, or heap corruption found by the allocator";
  // emucc builds emulated device code with the alignment sanitizer trapping (SIGILL), as a
  // GPU faults on a misaligned access.
  if (failure.find("SIGILL") != std::string::npos)
    return emulated ? "a misaligned access (trapped, as a GPU faults on it) or a trap instruction"
                    : "an illegal instruction (an ISA extension this CPU lacks?) or a trap";
  if (failure.find("sanitizer") != std::string::npos) return "a sanitizer's report (its stderr names the access)";
  if (failure.find("timed out") != std::string::npos || failure.find("did not finish") != std::string::npos)
    return emulated ? "a hang the emulator's per-launch limit did not stop (a spin that never reaches a barrier?)"
                    : "a hang, or a kernel far slower than the time limit (verify.time_limit_s)";
  if (failure.find("exited") != std::string::npos) return "the kernel ended the process (exit) during a launch";
  if (failure.find("could not load") != std::string::npos) return "the sandbox could not load what this process loaded";
  return "a crash";
}

// Runs `verify` in a child; a child that does not send back a verdict is a failed one.
template <typename Verify>
Verdict in_child(const Device& device, const KernelRecord& kernel, Verify&& verify, double timeout_seconds) {
  const ChildOutcome outcome = run_in_child([&] { return encode_verdict(verify()); }, timeout_seconds);
  if (outcome.completed)
    if (std::optional<Verdict> v = decode_verdict(outcome.answer)) return *v;
  const char* where = device.emulated() ? "on the emulator" : "on the CPU";
  if (!outcome.completed) return crashed_verdict(kernel, where, outcome.failure, device.emulated());
  Verdict v;
  v.failed_checks.push_back("crashed");
  v.detail = fmt::format("crashed: the process verifying {} {} sent back a malformed verdict", kernel.name, where);
  return v;
}

}  // namespace

Verdict crashed_verdict(const KernelRecord& kernel, const std::string& where, const std::string& failure,
                        bool emulated) {
  Verdict v;
  v.failed_checks.push_back("crashed");
  v.detail = fmt::format("crashed: the process verifying {} {} {}: {}; this process is unharmed", kernel.name, where,
                         failure, likely_cause(failure, emulated));
  return v;
}

Verdict verify_kernel_in_child(Device& device, const KernelRecord& kernel, const KernelRecord& reference,
                               const arb_problem& problem, const VerifyOptions& options, double timeout_seconds) {
  return in_child(device, kernel, [&] { return verify_kernel(device, kernel, reference, problem, options); },
                  timeout_seconds);
}

Verdict check_full_size_in_child(Device& device, const KernelRecord& kernel, const KernelRecord& reference,
                                 const arb_problem& problem, uint64_t seed, double tolerance, double timeout_seconds) {
  return in_child(device, kernel, [&] { return check_full_size(device, kernel, reference, problem, seed, tolerance); },
                  timeout_seconds);
}

}  // namespace arbiter

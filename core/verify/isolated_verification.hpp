// Verification in a forked child process, for kernels that run on the SIMT emulator (host
// code there): a wild pointer, exit(), abort() or a hang in the kernel would otherwise take
// the caller's process down or corrupt its memory. The child runs
// verify_kernel and sends its verdict back; a child that dies or hangs is a failed verdict
// (check "crashed") with how it ended, and the caller's memory is untouched.
#pragma once

#include "verify/verifier.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace arbiter {

Verdict verify_kernel_in_child(Device& device, const KernelRecord& kernel, const KernelRecord& reference,
                               const arb_problem& problem, const VerifyOptions& options, double timeout_seconds);
// The same for check_full_size.
Verdict check_full_size_in_child(Device& device, const KernelRecord& kernel, const KernelRecord& reference,
                                 const arb_problem& problem, uint64_t seed, double tolerance, double timeout_seconds);

// The failed verdict (check "crashed") of a kernel whose verification process ended before
// its work was done: `where` ("on the emulator", "in its sandbox"), how it ended, and what
// that most likely means.
Verdict crashed_verdict(const KernelRecord& kernel, const std::string& where, const std::string& failure,
                        bool emulated);

// A verdict as bytes and back (exact: doubles bit for bit). decode: nullopt if malformed.
std::string encode_verdict(const Verdict& verdict);
std::optional<Verdict> decode_verdict(std::string_view bytes);

}  // namespace arbiter

// The one source-to-source step of emucc: a preprocessed CUDA translation unit (prelude.hpp
// force-included, so that its markers are in the text) made into host C++ for the SIMT
// emulator. Three constructs have no header-only equivalent in C++ and are rewritten; every
// other token passes through unchanged, and line markers and line counts are kept, so that
// compiler messages and the emulator's reports name the kernel's own lines.
//
//   __shared__ T name[N];           -> static tag; auto& name = shared_variable<T[N]>(&tag, align);
//   extern __shared__ T name[];     -> auto* const name = dynamic_shared<T>(align);
//   __global__ ... __launch_bounds__(a, b) __cluster_dims__(x) f(...) { body }
//                                   -> f(...) { kernel_entry({a, b, 0, x, 1, 1}); body }
//   asm volatile("ptx" : outputs : inputs : clobbers);
//                                   -> { static AsmSite site{"ptx", file, line}; AsmOperand ops[] = {...};
//                                        run_asm(site, ops, n); }
//   (a failed device assert)        -> device_assert_fail instead of glibc's __assert_fail
//
// Constructs inside system headers (line-marker flag 3) are left alone.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace arbiter::emucc {

struct RewriteResult {
  std::string text;
  std::vector<std::string> errors;  // "file:line: what", for constructs it cannot rewrite
  int shared_declarations = 0, kernels = 0, asm_statements = 0;
};

RewriteResult rewrite_cuda_source(std::string_view preprocessed);

}  // namespace arbiter::emucc

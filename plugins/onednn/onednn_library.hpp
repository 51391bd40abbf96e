// libdnnl, loaded by the plugin on first use (dlopen by SONAME, not linked): loading it costs
// more than a context may spend on a plugin that might never run, so the plugin's entry only
// describes it (the version it was built against, the ISA it will run) and the first
// supports() or launch loads it and checks that description.
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <string>

namespace arbiter::plugins::onednn {

// Every libdnnl function the plugin calls, resolved by name.
#define ARBITER_ONEDNN_FUNCTIONS(X)                                                                        \
  X(dnnl_version) X(dnnl_get_effective_cpu_isa) X(dnnl_engine_create) X(dnnl_engine_destroy)               \
  X(dnnl_stream_create) X(dnnl_stream_wait) X(dnnl_stream_destroy) X(dnnl_memory_desc_init_by_strides)     \
  X(dnnl_memory_desc_get_size) X(dnnl_memory_create) X(dnnl_memory_destroy) X(dnnl_memory_set_data_handle) \
  X(dnnl_matmul_desc_init) X(dnnl_primitive_attr_create)                                                   \
  X(dnnl_primitive_attr_destroy) X(dnnl_primitive_attr_set_scratchpad_mode)                                \
  X(dnnl_primitive_attr_set_output_scales) X(dnnl_primitive_attr_set_post_ops) X(dnnl_post_ops_create)     \
  X(dnnl_post_ops_destroy) X(dnnl_post_ops_append_sum) X(dnnl_post_ops_append_eltwise)                     \
  X(dnnl_post_ops_append_binary) X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_destroy)              \
  X(dnnl_primitive_desc_query) X(dnnl_primitive_desc_query_md) X(dnnl_primitive_create)                    \
  X(dnnl_primitive_destroy) X(dnnl_primitive_execute) X(dnnl_primitive_get_primitive_desc)

class OneDnnLibrary {
 public:
  // Loads libdnnl (never unloaded: it starts OpenMP threads) and creates the CPU engine.
  // Never throws: a failure is kept in error().
  OneDnnLibrary();
  ~OneDnnLibrary();
  OneDnnLibrary(const OneDnnLibrary&) = delete;
  OneDnnLibrary& operator=(const OneDnnLibrary&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }  // why the plugin's kernels refuse everything
  dnnl_engine_t engine() const { return engine_; }
  // "ref:any" and the like: a dnnl_status_t in words.
  static const char* status_name(dnnl_status_t status);

#define ARBITER_ONEDNN_MEMBER(name) decltype(&::name) name = nullptr;
  ARBITER_ONEDNN_FUNCTIONS(ARBITER_ONEDNN_MEMBER)
#undef ARBITER_ONEDNN_MEMBER

 private:
  void* handle_ = nullptr;
  dnnl_engine_t engine_ = nullptr;
  std::string error_;
};

// The one instance, loaded on the first call (thread-safe).
const OneDnnLibrary& onednn_library();

// What the plugin's entry announces, computed without loading libdnnl: the version built
// against, the SONAME, and the ISA this CPU (and ONEDNN_MAX_CPU_ISA) will give.
struct Expectation {
  int major, minor, patch;
  unsigned isa;
  std::string isa_name;
  std::string max_isa_variable;  // "ONEDNN_MAX_CPU_ISA=..." when set, else empty
  std::string runtime_version() const;
};
const Expectation& expectation();

}  // namespace arbiter::plugins::onednn

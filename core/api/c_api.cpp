// The extern "C" layer: checks arguments, converts, hands over to C++ at once, and turns
// every exception into a status plus arb_last_error(). Nothing else lives here.
#include <arbiter/arbiter.h>

#include "api/last_error.hpp"
#include "api/tune_problems.hpp"
#include "api/verify_problem.hpp"
#include "common/failure.hpp"
#include "common/hot_path.hpp"
#include "common/log.hpp"
#include "arbiter_base/abi_names.hpp"
#include "context.hpp"
#include "plan.hpp"
#include "problem/op_table.hpp"
#include "problem/ops/call_fast_path.hpp"
#include "problem/ops/ops.hpp"
#include "problem/problem_text.hpp"
#include "plugin/plugin_record.hpp"
#include "version.hpp"

#include <array>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

struct arb_context_s {
  explicit arb_context_s(arbiter::Config config) : impl(std::move(config)) {}
  arbiter::Context impl;
};

struct arb_report_s {
  std::string json;
};

using arb_plan_runner = arb_status (*)(arb_plan, const arb_plan_operands*, void*) noexcept;
namespace {
arb_plan_runner plan_runner(int layout);
}

struct arb_plan_s {
  arb_plan_s(arbiter::Context& context, const arbiter::Op& op, const void* args)
      : impl(context, op, args), run(plan_runner(impl.layout())) {}
  arbiter::Plan impl;
  arb_plan_runner run;  // arb_plan_run's body for the plan's layout (plan_runner below)
};

namespace {

using arbiter::fail;

template <typename Body>
arb_status guarded(Body&& body) noexcept {
  try {
    body();
    arbiter::clear_last_error();
    return ARB_OK;
  } catch (const arbiter::Failure& e) {
    return arbiter::set_last_error(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return arbiter::set_last_error(ARB_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return arbiter::set_last_error(ARB_ERR_INTERNAL, e.what());
  } catch (...) {
    return arbiter::set_last_error(ARB_ERR_INTERNAL, "unknown exception");
  }
}

arbiter::Context& context_of(arb_context context) {
  if (context == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "context is NULL");
  return context->impl;
}

// Runs one op through dispatch with every check in detail: the calls the fast path below
// does not take, and the ones it refuses (so that a bad argument gets its status and
// message). Out of line: the flattened entry points must not take it in.
[[gnu::noinline]] arb_status run_op(arb_context context, const arbiter::Op& op, const void* args, void* stream) {
  return guarded([&] {
    arbiter::Context& ctx = context_of(context);
    arbiter::Call call;
    op.build_call(args, call);
    if (stream != nullptr && call.problem.device_type == kDLCPU)
      fail(ARB_ERR_INVALID_ARGUMENT, "stream must be NULL for CPU tensors (a CUDA stream goes with CUDA tensors)");
    ctx.run(call.problem, call.operands, stream);
  });
}

const arbiter::Op& op_of(const arb_gemm_args*) { return arbiter::gemm_op(); }
const arbiter::Op& op_of(const arb_rmsnorm_args*) { return arbiter::rmsnorm_op(); }
const arbiter::Op& op_of(const arb_softmax_args*) { return arbiter::softmax_op(); }
const arbiter::Op& op_of(const arb_swiglu_args*) { return arbiter::swiglu_op(); }
const arbiter::Op& op_of(const arb_rope_args*) { return arbiter::rope_op(); }
const arbiter::Op& op_of(const arb_attention_args*) { return arbiter::attention_op(); }
const arbiter::Op& op_of(const arb_mlp_args*) { return arbiter::mlp_op(); }
const arbiter::Op& op_of(const arb_qkv_args*) { return arbiter::qkv_op(); }

// A call of an op, the hot path of arb_gemm, arb_rmsnorm and arb_softmax: the common case
// (every tensor row-major, of one known dtype, sizes up to 2^30) built inline, its problem
// selected and launched; anything else through run_op (call_fast_path.hpp).
// A cache miss (the call's first, or after the context forgot its choices) runs through
// run_op too, which selects.
template <typename Args>
ARBITER_HOT_INLINE arb_status run_call(arb_context context, const Args* args, void* stream) {
  arbiter::CallKey key;  // in registers, apart from the operands, whose address the launch takes
  arb_operands operands;
  if (context == nullptr || !arbiter::build_call_fast(args, key, operands) ||
      (stream != nullptr && static_cast<uint32_t>(key.word[0]) == kDLCPU)) [[unlikely]]  // device_type
    return run_op(context, op_of(args), args, stream);
  bool cached = true;
  const arb_status status = guarded([&] {
    cached = context->impl.run_cached(key, arbiter::fast_key_words(args), operands, stream);
  });
  if (!cached) [[unlikely]]
    return run_op(context, op_of(args), args, stream);
  return status;
}

// arb_plan_run past its NULL tests, for plans of the layout kLayout (or any plan: -1), flattened:
// the checks, the binding at constant offsets, the launch and guarded() in one frame, which
// arb_plan_run jumps to (each layer out of line cost a prologue and spilled registers).
template <int kLayout>
[[gnu::flatten]] arb_status run_plan(arb_plan plan, const arb_plan_operands* operands, void* stream) noexcept {
  return guarded([&] {
    if (stream != nullptr && plan->impl.problem().device_type == kDLCPU) [[unlikely]]
      fail(ARB_ERR_INVALID_ARGUMENT, "stream must be NULL for CPU tensors (a CUDA stream goes with CUDA tensors)");
    plan->impl.run<kLayout>(*operands, stream);
  });
}

// A NULL plan or operands: the status and message.
[[gnu::noinline]] arb_status plan_run_refused(arb_plan plan) {
  return guarded([&] {
    if (plan == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "arb_plan_run: plan is NULL");
    fail(ARB_ERR_INVALID_ARGUMENT, "arb_plan_run: operands is NULL");
  });
}

// Copies a report into the caller's buffer, NUL-terminated, or says how big it must be.
void write_report(const std::string& text, char* buffer, size_t capacity, size_t* length) {
  if (length != nullptr) *length = text.size() + 1;
  if (buffer == nullptr || capacity < text.size() + 1)
    fail(ARB_ERR_BUFFER_TOO_SMALL, "the report needs " + std::to_string(text.size() + 1) + " bytes");
  std::memcpy(buffer, text.c_str(), text.size() + 1);
}

const arbiter::PluginRecord& plugin_at(arb_context context, size_t index) {
  const auto& plugins = context_of(context).registry().plugins();
  if (index >= plugins.size())
    fail(ARB_ERR_INVALID_ARGUMENT,
         "plugin index " + std::to_string(index) + " out of range (" + std::to_string(plugins.size()) + " plugins)");
  return *plugins[index];
}

template <typename Info>
void check_info(Info* info, const char* name, size_t minimum) {
  if (info == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
  if (info->struct_size < minimum)
    fail(ARB_ERR_INVALID_ARGUMENT, std::string(name) + "->struct_size is below the minimum (set it to sizeof)");
}

// A problem's text parsed, or Failure(ARB_ERR_INVALID_ARGUMENT) with the parser's message after `what`.
arbiter::ParsedProblem parsed(const char* text, const std::string& what) {
  if (text == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, what + " is NULL");
  try {
    return arbiter::parse_problem(text);
  } catch (const arbiter::Failure& e) {
    fail(e.status(), what + ": " + e.what());
  }
}

// The output of arb_verify and arb_tune: checked and cleared first, set last.
void clear_report_output(arb_report* report, const char* function) {
  if (report == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, std::string(function) + ": report (the output) is NULL");
  *report = nullptr;
}

std::vector<arbiter::SuiteProblem> tune_problems_of(const arb_tune_options& options) {
  const bool listed = options.problems != nullptr || options.problem_count > 0;
  if (options.problems == nullptr && options.problem_count > 0)
    fail(ARB_ERR_INVALID_ARGUMENT, "arb_tune: options->problems is NULL but problem_count is " +
                                       std::to_string(options.problem_count));
  if (listed && options.suite_path != nullptr)
    fail(ARB_ERR_INVALID_ARGUMENT, "arb_tune: set options->problems or options->suite_path, not both");
  if (!listed && options.suite_path == nullptr)
    fail(ARB_ERR_INVALID_ARGUMENT, "arb_tune: set options->problems (and problem_count) or options->suite_path");
  if (options.suite_path != nullptr) return arbiter::load_suite(options.suite_path).problems;
  if (options.problem_count == 0) fail(ARB_ERR_INVALID_ARGUMENT, "arb_tune: options->problem_count is 0");
  std::vector<arbiter::SuiteProblem> problems(options.problem_count);
  for (size_t i = 0; i < options.problem_count; ++i) {
    const std::string what = "arb_tune: options->problems[" + std::to_string(i) + "]";
    problems[i].parsed = parsed(options.problems[i], what);
    problems[i].text = options.problems[i];
  }
  return problems;
}

arb_plan_runner plan_runner(int layout) {
  static constexpr auto kRunners = []<int... kLayout>(std::integer_sequence<int, kLayout...>) {
    return std::array<arb_plan_runner, sizeof...(kLayout)>{&run_plan<kLayout>...};
  }(std::make_integer_sequence<int, arbiter::kPlanLayoutCount>{});
  return layout >= 0 && layout < arbiter::kPlanLayoutCount ? kRunners[static_cast<size_t>(layout)] : &run_plan<-1>;
}

}  // namespace

extern "C" {

ARB_API uint32_t arb_abi_version(void) { return ARB_MAKE_VERSION(ARB_ABI_VERSION_MAJOR, ARB_ABI_VERSION_MINOR); }

ARB_API const char* arb_library_version(void) { return ARBITER_VERSION_STRING; }

ARB_API const char* arb_status_string(int32_t status) { return arbiter::status_string(status); }

ARB_API const char* arb_provenance_string(int32_t provenance) {
  return arbiter::provenance_name(provenance).data();  // a string literal: NUL-terminated, static
}

ARB_API const char* arb_last_error(void) { return arbiter::last_error(); }

ARB_API arb_status arb_context_create(const arb_context_options* options, arb_context* context) {
  return guarded([&] {
    if (context == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "arb_context_create: context (the output) is NULL");
    *context = nullptr;
    arbiter::Config config;
    if (options == nullptr) {
      config = arbiter::default_config();
    } else {
      if (options->struct_size < ARB_CONTEXT_OPTIONS_STRUCT_SIZE)
        fail(ARB_ERR_INVALID_ARGUMENT, "arb_context_create: options->struct_size is below the minimum");
      if (options->config_path != nullptr && options->config_toml != nullptr)
        fail(ARB_ERR_INVALID_ARGUMENT, "arb_context_create: set config_path or config_toml, not both");
      if (options->config_path != nullptr)
        config = arbiter::load_config_file(options->config_path);
      else if (options->config_toml != nullptr)
        config = arbiter::parse_config(options->config_toml, "<config_toml>", "");
      else
        config = arbiter::default_config();
    }
    arbiter::set_log_level(config.log_level);
    *context = new arb_context_s(std::move(config));
  });
}

ARB_API arb_status arb_context_destroy(arb_context context) {
  return guarded([&] { delete context; });
}

// Flattened, as arb_plan_run: the checks, the selection and the launch in one frame, so that
// the problem's hash and the cache's compare fold with the fields just set.
[[gnu::flatten]] ARB_API arb_status arb_gemm(arb_context context, const arb_gemm_args* args, void* stream) {
  return run_call(context, args, stream);
}

[[gnu::flatten]] ARB_API arb_status arb_rmsnorm(arb_context context, const arb_rmsnorm_args* args, void* stream) {
  return run_call(context, args, stream);
}

[[gnu::flatten]] ARB_API arb_status arb_softmax(arb_context context, const arb_softmax_args* args, void* stream) {
  return run_call(context, args, stream);
}

[[gnu::flatten]] ARB_API arb_status arb_swiglu(arb_context context, const arb_swiglu_args* args, void* stream) {
  return run_call(context, args, stream);
}

// No fast path: rope's checks read the positions on the CPU, and its cost is in the kernel.
ARB_API arb_status arb_rope(arb_context context, const arb_rope_args* args, void* stream) {
  return run_op(context, op_of(args), args, stream);
}

// No fast path: the cost is in the kernel (a decode step reads the whole cache).
ARB_API arb_status arb_attention(arb_context context, const arb_attention_args* args, void* stream) {
  return run_op(context, op_of(args), args, stream);
}

// No fast path: a block's cost is three matrix products over its weights.
ARB_API arb_status arb_mlp(arb_context context, const arb_mlp_args* args, void* stream) {
  return run_op(context, op_of(args), args, stream);
}

// No fast path either: the block's cost is the projection over its weight.
ARB_API arb_status arb_qkv(arb_context context, const arb_qkv_args* args, void* stream) {
  return run_op(context, op_of(args), args, stream);
}

ARB_API arb_status arb_explain(arb_context context, int32_t op, const void* args, char* buffer, size_t capacity,
                               size_t* length) {
  return guarded([&] {
    arbiter::Context& ctx = context_of(context);
    arbiter::Call call;
    arbiter::build_call(op, args, call);
    write_report(ctx.explain(call.problem, &call.operands), buffer, capacity, length);
  });
}

ARB_API arb_status arb_explain_problem(arb_context context, const char* problem, char* buffer, size_t capacity,
                                       size_t* length) {
  return guarded([&] {
    arbiter::Context& ctx = context_of(context);
    if (problem == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "arb_explain_problem: problem is NULL");
    write_report(ctx.explain(arbiter::parse_problem(problem).problem), buffer, capacity, length);
  });
}

ARB_API arb_status arb_plugin_count(arb_context context, size_t* count) {
  return guarded([&] {
    if (count == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "arb_plugin_count: count is NULL");
    *count = context_of(context).registry().plugins().size();
  });
}

ARB_API arb_status arb_plugin_get_info(arb_context context, size_t plugin_index, arb_plugin_info* info) {
  return guarded([&] {
    check_info(info, "info", ARB_PLUGIN_INFO_STRUCT_SIZE);
    const arbiter::PluginRecord& plugin = plugin_at(context, plugin_index);
    info->name = plugin.name.c_str();
    info->version = plugin.version.c_str();
    info->build_id = plugin.build_id.c_str();
    info->path = plugin.path.c_str();
    info->description = plugin.description.c_str();
    info->status = arbiter::state_name(plugin.state);
    info->reason = plugin.reason.c_str();
    info->abi_major = plugin.abi_major;
    info->abi_minor = plugin.abi_minor;
    info->provenance = plugin.provenance;
    info->priority = plugin.priority;
    info->kernel_count = plugin.kernels.size();
    if (ARB_HAS_FIELD(arb_plugin_info, info, runtime_version)) info->runtime_version = plugin.runtime_version.c_str();
    if (ARB_HAS_FIELD(arb_plugin_info, info, sha256)) info->sha256 = plugin.sha256.c_str();
    if (ARB_HAS_FIELD(arb_plugin_info, info, origin)) info->origin = plugin.origin.c_str();
    if (ARB_HAS_FIELD(arb_plugin_info, info, trust)) info->trust = plugin.trust;
    if (ARB_HAS_FIELD(arb_plugin_info, info, reserved)) info->reserved = 0;
  });
}

ARB_API arb_status arb_kernel_get_info(arb_context context, size_t plugin_index, size_t kernel_index,
                                       arb_kernel_info* info) {
  return guarded([&] {
    check_info(info, "info", ARB_KERNEL_INFO_STRUCT_SIZE);
    const arbiter::PluginRecord& plugin = plugin_at(context, plugin_index);
    if (kernel_index >= plugin.kernels.size())
      fail(ARB_ERR_INVALID_ARGUMENT, "kernel index " + std::to_string(kernel_index) + " out of range for plugin '" +
                                         plugin.name + "'");
    const arbiter::KernelRecord& kernel = plugin.kernels[kernel_index];
    info->name = kernel.name.c_str();
    info->op = kernel.abi.op;
    info->device_type = kernel.abi.device_type;
    info->provenance = kernel.provenance;
    info->priority = kernel.abi.priority;
    info->flags = kernel.abi.flags;
    info->reserved = 0;
  });
}

ARB_API const char* arb_report_json(arb_report report) { return report == nullptr ? "" : report->json.c_str(); }

ARB_API arb_status arb_report_destroy(arb_report report) {
  return guarded([&] { delete report; });
}

ARB_API arb_status arb_verify(arb_context context, const arb_verify_options* options, arb_report* report) {
  return guarded([&] {
    clear_report_output(report, "arb_verify");
    arbiter::Context& ctx = context_of(context);
    check_info(options, "arb_verify: options", ARB_VERIFY_OPTIONS_STRUCT_SIZE);
    if (options->reserved != 0) fail(ARB_ERR_INVALID_ARGUMENT, "arb_verify: options->reserved must be 0");
    if ((options->flags & ~ARB_VERIFY_FULL) != 0)
      fail(ARB_ERR_INVALID_ARGUMENT, "arb_verify: unknown bits in options->flags (ARB_VERIFY_FULL is the only flag)");
    const arbiter::ParsedProblem problem = parsed(options->problem, "arb_verify: options->problem");
    arbiter::VerifyRequest request;
    if (options->kernel != nullptr) {
      if (ctx.registry().find(options->kernel) == nullptr)
        fail(ARB_ERR_INVALID_ARGUMENT, std::string("arb_verify: no loaded kernel is named '") + options->kernel +
                                           "' (a name is \"<plugin>.<kernel>\"; arb_kernel_get_info lists them)");
      request.only_kernel = options->kernel;
    }
    request.full = (options->flags & ARB_VERIFY_FULL) != 0;
    auto out = std::make_unique<arb_report_s>();
    out->json = arbiter::verification_json(arbiter::verify_problem(ctx, problem.problem, request));
    *report = out.release();
  });
}

ARB_API arb_status arb_tune(arb_context context, const arb_tune_options* options, arb_report* report) {
  return guarded([&] {
    clear_report_output(report, "arb_tune");
    arbiter::Context& ctx = context_of(context);
    check_info(options, "arb_tune: options", ARB_TUNE_OPTIONS_STRUCT_SIZE);
    const std::vector<arbiter::SuiteProblem> problems = tune_problems_of(*options);
    arbiter::TuneRequest request;
    if (options->table_path != nullptr) request.table_path = options->table_path;
    if (options->progress != nullptr)
      request.progress = [&](size_t done, size_t total, double) {
        const char* next = done < total ? problems[done].text.c_str() : "";
        return options->progress(options->progress_user_data, done, total, next) == 0;
      };
    auto out = std::make_unique<arb_report_s>();
    out->json = arbiter::tuning_json(arbiter::tune_problems(ctx, problems, request));
    *report = out.release();
  });
}

ARB_API arb_status arb_plan_create(arb_context context, int32_t op, const void* args, arb_plan* plan) {
  return guarded([&] {
    if (plan == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "arb_plan_create: plan (the output) is NULL");
    *plan = nullptr;
    arbiter::Context& ctx = context_of(context);
    const arbiter::Op* found = arbiter::find_op(op);
    if (found == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "arb_plan_create: unknown op " + std::to_string(op));
    *plan = new arb_plan_s(ctx, *found, args);
  });
}

// The NULL tests, then a jump to the plan's runner (run_plan for its layout).
ARB_API arb_status arb_plan_run(arb_plan plan, const arb_plan_operands* operands, void* stream) {
  if (plan == nullptr || operands == nullptr) [[unlikely]]
    return plan_run_refused(plan);
  return plan->run(plan, operands, stream);
}

ARB_API arb_status arb_plan_explain(arb_plan plan, char* buffer, size_t capacity, size_t* length) {
  return guarded([&] {
    if (plan == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "arb_plan_explain: plan is NULL");
    write_report(plan->impl.explain(), buffer, capacity, length);
  });
}

ARB_API arb_status arb_plan_destroy(arb_plan plan) {
  return guarded([&] { delete plan; });
}

}  // extern "C"

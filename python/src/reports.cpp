#include "reports.hpp"

#include "calls.hpp"
#include "python_errors.hpp"

#include <nanobind/stl/string.h>

#include <optional>
#include <utility>

namespace arbiter::python {
namespace {

std::string text(const char* s) { return s ? s : ""; }

// Owns an arb_report; its JSON as a string.
std::string take_json(arb_report report) {
  std::string json = arb_report_json(report);
  arb_report_destroy(report);
  return json;
}

struct Progress {
  nb::object callback;
  std::optional<nb::python_error> error;  // raised by the callback, re-raised once the library returns
};

int32_t on_progress(void* user_data, size_t done, size_t total, const char* problem) {
  auto* progress = static_cast<Progress*>(user_data);
  nb::gil_scoped_acquire acquire;
  try {
    progress->callback(done, total, text(problem));
    return 0;
  } catch (nb::python_error& e) {
    progress->error.emplace(std::move(e));
    return 1;
  }
}

}  // namespace

nb::list plugin_list(arb_context context) {
  size_t count = 0;
  if (arb_status s = arb_plugin_count(context, &count); s != ARB_OK) raise_status(s);
  nb::list plugins;
  for (size_t i = 0; i < count; ++i) {
    arb_plugin_info info = ARB_PLUGIN_INFO_INIT;
    if (arb_status s = arb_plugin_get_info(context, i, &info); s != ARB_OK) raise_status(s);
    nb::dict plugin;
    plugin["name"] = text(info.name);
    plugin["version"] = text(info.version);
    plugin["build_id"] = text(info.build_id);
    plugin["path"] = text(info.path);
    plugin["description"] = text(info.description);
    plugin["status"] = text(info.status);
    plugin["reason"] = text(info.reason);
    plugin["abi"] = std::to_string(info.abi_major) + "." + std::to_string(info.abi_minor);
    plugin["provenance"] = text(arb_provenance_string(info.provenance));
    plugin["priority"] = info.priority;
    plugin["runtime_version"] = text(info.runtime_version);
    plugin["sha256"] = text(info.sha256);
    plugin["origin"] = text(info.origin);
    plugin["trust"] = info.trust == ARB_PLUGIN_TRUST_ORACLE ? "oracle" : info.trust == ARB_PLUGIN_TRUST_CONFIG ? "config"
                      : info.trust == ARB_PLUGIN_TRUST_HOST ? "host" : "none";
    nb::list kernels;
    for (size_t k = 0; k < info.kernel_count; ++k) {
      arb_kernel_info kinfo = ARB_KERNEL_INFO_INIT;
      if (arb_status s = arb_kernel_get_info(context, i, k, &kinfo); s != ARB_OK) raise_status(s);
      nb::dict kernel;
      kernel["name"] = text(kinfo.name);
      kernel["op"] = op_name(kinfo.op);
      kernel["device"] = kinfo.device_type == kDLCPU ? "cpu" : kinfo.device_type == kDLCUDA ? "cuda" : "other";
      kernel["provenance"] = text(arb_provenance_string(kinfo.provenance));
      kernel["priority"] = kinfo.priority;
      kernel["nondeterministic"] = (kinfo.flags & ARB_KERNEL_FLAG_NONDETERMINISTIC) != 0;
      kernel["tf32"] = (kinfo.flags & ARB_KERNEL_FLAG_TF32) != 0;
      kernels.append(kernel);
    }
    plugin["kernels"] = kernels;
    plugins.append(plugin);
  }
  return plugins;
}

std::string verify_report(arb_context context, const std::string& problem, const std::optional<std::string>& kernel,
                          bool full) {
  arb_verify_options options = ARB_VERIFY_OPTIONS_INIT;
  options.problem = problem.c_str();
  options.kernel = kernel ? kernel->c_str() : nullptr;
  options.flags = full ? ARB_VERIFY_FULL : 0u;
  arb_report report = nullptr;
  arb_status status;
  {
    nb::gil_scoped_release release;
    status = arb_verify(context, &options, &report);
  }
  if (status != ARB_OK) raise_status(status);
  return take_json(report);
}

std::string tune_report(arb_context context, const std::optional<std::vector<std::string>>& problems,
                        const std::optional<std::string>& suite, const std::optional<std::string>& table,
                        nb::object progress_callback) {
  std::vector<const char*> texts;
  if (problems)
    for (const std::string& p : *problems) texts.push_back(p.c_str());
  Progress progress;
  progress.callback = std::move(progress_callback);
  arb_tune_options options = ARB_TUNE_OPTIONS_INIT;
  options.problems = problems ? texts.data() : nullptr;
  options.problem_count = texts.size();
  options.suite_path = suite ? suite->c_str() : nullptr;
  options.table_path = table ? table->c_str() : nullptr;
  if (!progress.callback.is_none()) {
    options.progress = on_progress;
    options.progress_user_data = &progress;
  }
  arb_report report = nullptr;
  arb_status status;
  {
    nb::gil_scoped_release release;
    status = arb_tune(context, &options, &report);
  }
  if (progress.error) {
    arb_report_destroy(report);
    throw std::move(*progress.error);
  }
  if (status != ARB_OK) raise_status(status);
  return take_json(report);
}

}  // namespace arbiter::python

// The runtime's other half for Python: plugin and kernel listings (plain dicts), and the JSON
// reports of arb_verify and arb_tune (arbiter/reports.py turns them into dataclasses).
#pragma once

#include <arbiter/arbiter.h>
#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <vector>

namespace arbiter::python {

namespace nb = nanobind;

// One dict per plugin seen by the context (loaded, disabled and rejected), each with "kernels".
nb::list plugin_list(arb_context context);

std::string verify_report(arb_context context, const std::string& problem, const std::optional<std::string>& kernel,
                          bool full);

// `progress`, if not None, is called as progress(done, total, problem) from the tuning thread with
// the GIL held; an exception it raises stops tuning after the current problem and is re-raised.
std::string tune_report(arb_context context, const std::optional<std::vector<std::string>>& problems,
                        const std::optional<std::string>& suite, const std::optional<std::string>& table,
                        nb::object progress);

}  // namespace arbiter::python

// The `arbiter` program: shared pieces of its commands.
#pragma once

#include "config/config.hpp"
#include "context.hpp"
#include "tune/shape_suite.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace arbiter::cli {

// Arguments after the command, with the common options taken out.
struct Arguments {
  std::string config_path;              // --config FILE
  std::vector<std::string> options;     // other --name=value / --flag words, in order
  std::vector<std::string> positional;  // everything else
  // The value of --name=V or --name V; empty if absent.
  std::string option(const std::string& name) const;
  bool flag(const std::string& name) const;
};

// A context from --config, or the embedded default, with --table=PATH and --budget-ms=N
// applied, then `adjust` (a command's own defaults). Throws Failure.
std::unique_ptr<Context> make_context(const Arguments& args, const std::function<void(Config&)>& adjust = {});

// Fails (ARB_ERR_PLUGIN, "no plugin loaded: ...", saying why) unless some plugin file was
// loaded: with only the built-in oracle, `run` and `tune` would measure nothing but it.
void require_plugin_files(const Context& context, const char* command);

// The problems a command works on: those of --suite=FILE, or the one problem written as the
// positional words. `command` names the command in messages.
std::vector<SuiteProblem> problems_from(const Arguments& args, const char* command);

// --device=cuda-emulated (or cuda-emulated:N): the SIMT emulator serves the CUDA problems.
bool emulated_device(const Arguments& args);

// The positional words joined by spaces: a problem in the problem syntax.
std::string joined(const std::vector<std::string>& words);

int command_plugins(const Arguments& args);
int command_explain(const Arguments& args);
int command_run(const Arguments& args);
int command_verify(const Arguments& args);
int command_tune(const Arguments& args);
int command_table(const Arguments& args);
int command_try(const Arguments& args);

}  // namespace arbiter::cli

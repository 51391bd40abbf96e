// The `arbiter` program: shared pieces of its commands.
#pragma once

#include "config/config.hpp"
#include "context.hpp"

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

// A context from --config, or the embedded default. Throws Failure.
std::unique_ptr<Context> make_context(const Arguments& args);

// The positional words joined by spaces: a problem in the problem syntax.
std::string joined(const std::vector<std::string>& words);

int command_plugins(const Arguments& args);
int command_explain(const Arguments& args);
int command_run(const Arguments& args);

}  // namespace arbiter::cli

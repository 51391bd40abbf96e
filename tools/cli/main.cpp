// arbiter: the command-line program. `arbiter help` lists the commands.
#include "cli.hpp"

#include "common/failure.hpp"
#include "common/log.hpp"
#include "plugin/plugin_search.hpp"
#include "problem/problem_text.hpp"

#include <arbiter/arbiter.h>

#include <cstdio>
#include <cstring>
#include <string_view>

namespace arbiter::cli {

std::string Arguments::option(const std::string& name) const {
  const std::string prefix = "--" + name + "=";
  for (const std::string& o : options)
    if (o.rfind(prefix, 0) == 0) return o.substr(prefix.size());
  return "";
}

bool Arguments::flag(const std::string& name) const {
  for (const std::string& o : options)
    if (o == "--" + name) return true;
  return false;
}

std::unique_ptr<Context> make_context(const Arguments& args, const std::function<void(Config&)>& adjust) {
  Config config = args.config_path.empty() ? default_config() : load_config_file(args.config_path);
  if (const std::string table = args.option("table"); !table.empty()) config.table.path = table;
  if (const std::string budget = args.option("budget-ms"); !budget.empty()) {
    int value = 0;
    try {
      value = std::stoi(budget);
    } catch (const std::exception&) {
      value = 0;
    }
    if (value < 1 || value > 600000) fail(ARB_ERR_INVALID_ARGUMENT, "--budget-ms needs a number from 1 to 600000");
    config.tune.budget_ms = value;
  }
  if (emulated_device(args)) config.cuda.device = CudaDeviceKind::emulated;
  if (adjust) adjust(config);
  set_log_level(config.log_level);
  return std::make_unique<Context>(std::move(config));
}

void require_plugin_files(const Context& context, const char* command) {
  size_t rejected = 0;
  for (const auto& plugin : context.registry().plugins()) {
    if (plugin->origin == "built-in") continue;
    if (plugin->state == PluginState::loaded) return;
    ++rejected;
  }
  const PluginsConfig& plugins = context.config().plugins;
  std::string why;
  if (rejected > 0)
    why = std::to_string(rejected) + " plugin file(s) found, none loaded (`arbiter plugins` says why)";
  else if (!plugins.search_default_paths)
    why = "no plugin file found in plugins.paths, and plugins.search_default_paths = false";
  else if (install_plugin_dir().empty())
    why = "no plugin file found: this program's installation has no plugin folder (<libdir>/arbiter/plugins), "
          "and neither plugins.paths nor ARBITER_PLUGIN_PATH names one";
  else
    why = "no plugin file found in plugins.paths, ARBITER_PLUGIN_PATH or " + install_plugin_dir().string();
  fail(ARB_ERR_PLUGIN, std::string(command) + ": no plugin loaded: " + why +
                           "; only the built-in reference kernels (the oracle) would run");
}

std::vector<SuiteProblem> problems_from(const Arguments& args, const char* command) {
  std::vector<SuiteProblem> problems;
  if (const std::string suite = args.option("suite"); !suite.empty()) {
    problems = load_suite(suite).problems;
  } else {
    if (args.positional.empty())
      fail(ARB_ERR_INVALID_ARGUMENT, std::string(command) + " needs a problem or --suite=FILE");
    SuiteProblem one;
    one.text = joined(args.positional);
    one.parsed = parse_problem(one.text);
    one.origin = "the command line";
    problems.push_back(one);
  }
  // --device=cuda (or cuda:N, cpu, cuda-emulated) moves every problem to that device: suites
  // are written for no device in particular. The emulator serves device=cuda problems.
  if (std::string device = args.option("device"); !device.empty()) {
    if (emulated_device(args)) device = "cuda" + device.substr(std::string("cuda-emulated").size());
    for (SuiteProblem& p : problems) {
      p.text += " device=" + device;
      p.parsed = parse_problem(p.text);
    }
  }
  return problems;
}

bool emulated_device(const Arguments& args) { return args.option("device").rfind("cuda-emulated", 0) == 0; }

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace arbiter::cli

namespace {

constexpr const char* kUsage = R"(usage: arbiter [--config FILE] <command> [arguments]

commands:
  plugins                 loaded plugins (versions, provenance, kernels) and rejected ones with reasons
  explain <problem>       which kernel a problem goes to, and why
  run <problem>           run a problem on random data through dispatch, check it against the
                          reference, print the time   [--kernel=PLUGIN.KERNEL] [--samples=N] [--seed=N]
  verify <problem | --suite=FILE> [--device=cuda | cuda-emulated]
                          the verification gate's verdict for every kernel, failed checks named
                          [--plugin=NAME] [--kernel=PLUGIN.KERNEL] [--full: also at the problem's
                          own size]; cuda-emulated: on the SIMT emulator (the CUDA plugins'
                          sources run on the CPU)
  tune <problem | --suite=FILE> [--device=cuda]
                          verify and time every candidate of every problem, keep the fastest by more
                          than the noise, write the table as results arrive
                          [--table=PATH] [--budget-ms=N]
                          [--shard=I/N: only shard I (0 to N-1) of N, for N machines of one kind,
                          whose tables `table merge` joins: of the suite's M distinct problem keys,
                          sorted, those of rank I, I+N, I+2N, ..., so M/N of them rounded up or
                          down (the output says how many); I is 0-based, as a Kubernetes
                          JOB_COMPLETION_INDEX or a Slurm --array=0-<N-1> task id]
  table show [PATH]       entries, and which are valid here, stale, or for other devices
  table diff A B          what differs between two tables
  table merge OUT IN...   merge tables into OUT: per problem and device the faster entry by more
                          than the noise
  table prune [PATH]      remove the entries that are stale on this machine
  try <manifest.toml>     compile one generated kernel (NVRTC), verify it and time it against the
                          current winners on the shapes it claims; prints JSON   [--arch=sm_XY]
                          Without a GPU (or with --device=cuda-emulated) it verifies on the SIMT
                          emulator: a real verdict, no time ("emulated: correctness only")
  version                 library and ABI versions

A problem is written as in docs/problem-syntax.md, for example
  gemm bf16 m=128 n=4096 k=4096 tb=1 act=gelu
  rmsnorm f16 rows=32 cols=4096 residual=1
  softmax f32 rows=64 cols=1000
  swiglu bf16 rows=16 cols=14336 fused=1
  rope bf16 tokens=16 heads=32 dim=128 layout=half theta=500000 maxpos=8192
A suite (--suite=FILE) lists problems in TOML: share/arbiter/doc/suite-format.md, with the
example share/arbiter/suites/cpu-small.toml (docs/suite-format.md in the repository).
Without --config the embedded default configuration (configs/default.toml) is used.
)";

// `arbiter COMMAND --help`: COMMAND's entries of kUsage (each a line "  COMMAND ..." and the
// deeper-indented lines under it), and how problems are written when it takes one.
int print_command_help(const std::string& command) {
  const std::string_view usage = kUsage;
  const std::string entry_start = "\n  " + command + " ";
  std::string entries;
  for (size_t start = usage.find(entry_start); start != std::string_view::npos;
       start = usage.find(entry_start, start + 1)) {
    size_t end = usage.find('\n', start + 1);
    while (end != std::string_view::npos && usage.compare(end + 1, 4, "    ") == 0) end = usage.find('\n', end + 1);
    entries += usage.substr(start, end - start);
  }
  if (entries.empty()) {
    std::fprintf(stderr, "arbiter: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
  }
  std::printf("usage: arbiter [--config FILE] %s ...\n%s\n", command.c_str(), entries.c_str());
  if (entries.find("<problem") != std::string::npos) std::printf("%s", usage.substr(usage.find("\nA problem is")).data());
  return 0;
}

// Options with a separate value word ("--config FILE", "--kernel NAME").
bool takes_value(const std::string& word) {
  for (const char* name : {"--config", "--kernel", "--samples", "--seed", "--suite", "--table", "--plugin", "--budget-ms",
                           "--arch", "--device", "--shard"})
    if (word == name) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace arbiter::cli;
  Arguments args;
  std::string command;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "-h" || word == "--help") {
      if (!command.empty() && command != "help") return print_command_help(command);
      word = "help";
    }
    if (takes_value(word)) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "arbiter: %s needs a value\n", word.c_str());
        return 2;
      }
      word += "=" + std::string(argv[++i]);
    }
    if (word.rfind("--config=", 0) == 0) {
      args.config_path = word.substr(9);
    } else if (word.rfind("--", 0) == 0) {
      args.options.push_back(word);
    } else if (command.empty()) {
      command = word;
    } else {
      args.positional.push_back(word);
    }
  }
  try {
    if (command == "plugins") return command_plugins(args);
    if (command == "explain") return command_explain(args);
    if (command == "run") return command_run(args);
    if (command == "verify") return command_verify(args);
    if (command == "tune") return command_tune(args);
    if (command == "table") return command_table(args);
    if (command == "try") return command_try(args);
    if (command == "version") {
      const uint32_t abi = arb_abi_version();
      std::printf("arbiter %s, application ABI %u.%u, plugin ABI %d.%d\n", arb_library_version(), abi >> 16,
                  abi & 0xffff, ARB_PLUGIN_ABI_MAJOR, ARB_PLUGIN_ABI_MINOR);
      return 0;
    }
    if (command == "help" && !args.positional.empty()) return print_command_help(args.positional.front());
    if (command == "help" || command.empty()) {
      std::fputs(kUsage, command.empty() ? stderr : stdout);
      return command.empty() ? 2 : 0;
    }
    std::fprintf(stderr, "arbiter: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const arbiter::Failure& e) {
    std::fprintf(stderr, "arbiter: %s: %s\n", arb_status_string(e.status()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "arbiter: %s\n", e.what());
    return 1;
  }
}

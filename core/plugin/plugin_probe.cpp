#include "plugin/plugin_probe.hpp"

#include "common/child_process.hpp"
#include "common/log.hpp"
#include "plugin/plugin_search.hpp"

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <mutex>

namespace arbiter {

std::filesystem::path probe_helper_path() { return helper_program_path("arbiter-plugin-probe"); }

std::string probe_plugin(const std::filesystem::path& path, const std::string& sha256, double timeout_seconds) {
  static std::mutex mutex;
  static std::map<std::string, std::string> known;  // path and hash -> the answer
  const std::string key = path.string() + '\n' + sha256;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  const std::filesystem::path helper = probe_helper_path();
  std::error_code ec;
  if (helper.empty() || !std::filesystem::is_regular_file(helper, ec)) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      logger().warn("no plugin probe helper at '{}': untrusted plugin files are loaded without a probe process",
                    helper.string());
    return "";
  }
  std::string answer;
  try {
    const ProgramOutcome outcome = run_program({helper.string(), path.string(), sha256}, timeout_seconds);
    if (!outcome.exited)
      answer = fmt::format("a probe process that loaded it first ended: {} (plugins.probe_time_limit_s = {:.0f}): a "
                           "crash or hang in its static constructors or its entry function",
                           outcome.failure, timeout_seconds);
    else if (outcome.exit_status != 0 || outcome.output.rfind("probed ", 0) != 0 || outcome.output.back() != '\n')
      answer = fmt::format("a probe process that loaded it first exited early (status {}{}): exit() in its static "
                           "constructors or its entry function",
                           outcome.exit_status, outcome.output.empty() ? ", nothing reported" : "");
    else if (outcome.output.rfind("probed " + sha256 + " ", 0) != 0)
      answer = "the file changed while a probe process was loading it";
  } catch (const std::exception& e) {  // no process could be started: load as before, say so
    logger().warn("plugin probe for '{}' could not run: {}", path.string(), e.what());
    return "";
  }
  std::lock_guard<std::mutex> lock(mutex);
  known.emplace(key, answer);
  return answer;
}

}  // namespace arbiter

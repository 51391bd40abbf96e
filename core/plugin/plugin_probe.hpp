// The first load of an untrusted plugin file, in a process of its own (docs/architecture.md,
// "Plugin ABI rules", rule 9): a file whose static constructors or entry function crash, call
// exit() or hang would otherwise take the host down before any check could run. A helper
// program (arbiter-plugin-probe, installed beside the plugin folder) loads the file exactly as
// the host does and reports; only a file that came through is then loaded here. The result is
// remembered per path and content hash for the life of the process.
#pragma once

#include <filesystem>
#include <string>

namespace arbiter {

// "" when the probe process loaded the file and its entry returned (whatever it answered:
// the load here reports that), or when no probe can run (no helper found: logged once);
// otherwise why the file must be rejected.
std::string probe_plugin(const std::filesystem::path& path, const std::string& sha256, double timeout_seconds);

// Where the helper is expected: <libdir>/arbiter/arbiter-plugin-probe.
std::filesystem::path probe_helper_path();

}  // namespace arbiter

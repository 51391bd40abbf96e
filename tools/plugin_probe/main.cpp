// arbiter-plugin-probe <plugin-file> <sha256>: loads one plugin file the way the host does
// (core/plugin/plugin_probe.hpp) and prints "probed <sha256 it read> <state>". The host runs
// it before the first load of an untrusted file in its own process: if this program crashes,
// exits early or hangs, the file is rejected there without ever being loaded.
#include "common/log.hpp"
#include "plugin/plugin_loader.hpp"

#include <cstdio>

#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: arbiter-plugin-probe <plugin-file> <sha256>\n");
    return 2;
  }
  arbiter::set_log_level(ARB_LOG_OFF);  // stderr is discarded anyway
  // The parent already checked who could have written the file; here it only has to load.
  const std::unique_ptr<arbiter::PluginRecord> record = arbiter::load_plugin(argv[1], "probe", true);
  std::printf("probed %s %s\n", record->file_sha256.c_str(), arbiter::state_name(record->state));
  std::fflush(stdout);
  ::_exit(0);  // what the entry did is all the host asks; no unload, no exit handlers (nor a leak check)
}

// toml++'s compiled part, for the fuzz build only: built here with the fuzzer's and the
// sanitizers' instrumentation in place of Debian's libtomlplusplus.so (tools/fuzz/CMakeLists.txt).
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>

// Fuzz target: the tuning table (core/table/tuning_table.hpp). Expected: a table, or
// Failure(ARB_ERR_TABLE). A table that parses is written back (to_toml, as every table write
// does) and must read again to the same text: arbiter reads what it wrote, or a tuning run
// would leave a table the next context refuses. And the fast reader of the writer's text
// (WrittenTableReader) never takes text that toml++ (parse_general) refuses or reads otherwise.
#include "common/failure.hpp"
#include "table/tuning_table.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  arbiter::TuningTable table;
  try {
    table = arbiter::TuningTable::parse(text, "fuzz-table.toml");
  } catch (const arbiter::Failure& f) {
    if (f.status() != ARB_ERR_TABLE) throw;
    return 0;
  }
  const std::string written = table.to_toml();
  arbiter::TuningTable fast;
  if (arbiter::WrittenTableReader::read(text, fast)) {
    std::string general;
    try {
      general = arbiter::TuningTable::parse_general(text, "fuzz-table.toml").to_toml();
    } catch (const arbiter::Failure& f) {
      std::fprintf(stderr, "the fast reader took a table toml++ refuses: %s\n", f.what());
      std::abort();
    }
    if (general != fast.to_toml() || general != written) {
      std::fprintf(stderr, "the fast reader and toml++ read a table differently:\n%s\n----\n%s\n", fast.to_toml().c_str(),
                   general.c_str());
      std::abort();
    }
  }
  std::string rewritten;
  try {
    rewritten = arbiter::TuningTable::parse(written, "written-table.toml").to_toml();
  } catch (const arbiter::Failure& f) {
    std::fprintf(stderr, "a table arbiter wrote does not read back: %s\n%s\n", f.what(), written.c_str());
    std::abort();
  }
  if (rewritten != written) {
    std::fprintf(stderr, "a table changes when written twice:\n%s\n----\n%s\n", written.c_str(), rewritten.c_str());
    std::abort();
  }
  return 0;
}

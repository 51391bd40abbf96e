// The other half of toml_screen_check.py: reads NUL-separated documents on stdin; for each one
// prints "refused" when the screen (base/arbiter_base/toml_screen.hpp) refuses it, else parses
// it with toml++ built header-only with its assertions checked (a failed one throws) and
// prints "parsed" or "error". A failed assertion prints "assertion: <expr>" and the
// document; undefined behaviour stops the process under -fsanitize=undefined (the script
// builds it so), after the document was written to $TOML_SCREEN_LAST.
#include "arbiter_base/toml_screen.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

namespace {
struct Assertion : std::logic_error {
  using std::logic_error::logic_error;
};
[[noreturn]] void assertion_failed(const char* expression) { throw Assertion(expression); }
}  // namespace

#undef NDEBUG
#define TOML_HEADER_ONLY 1
#define TOML_ASSERT(expr) ((expr) ? void(0) : assertion_failed(#expr))
#include <toml++/toml.h>

int main() {
  const char* last = std::getenv("TOML_SCREEN_LAST");
  for (std::string doc; std::getline(std::cin, doc, '\0');) {
    if (arbiter::screen_toml(doc)) {
      std::puts("refused");
      continue;
    }
    if (last != nullptr)
      if (FILE* f = std::fopen(last, "wb")) {
        std::fwrite(doc.data(), 1, doc.size(), f);
        std::fclose(f);
      }
    try {
      const toml::table table = toml::parse(std::string_view(doc), std::string_view("doc"));
      std::puts("parsed");
    } catch (const toml::parse_error&) {
      std::puts("error");
    } catch (const Assertion& e) {
      std::printf("assertion: %s\n", e.what());
    }
    std::fflush(stdout);
  }
}

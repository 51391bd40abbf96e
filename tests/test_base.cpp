// base/: the pieces the host and the plugins share (ABI names, path lists, the strict TOML
// reader), tested once here for both.
#include "arbiter_base/abi_names.hpp"
#include "arbiter_base/counted.hpp"
#include "arbiter_base/path_list.hpp"
#include "arbiter_base/sha256.hpp"
#include "arbiter_base/strict_toml.hpp"
#include "arbiter_base/text_file.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

using namespace arbiter;

TEST_CASE("base.names: every ABI value has a name that parses back to it") {
  for (int32_t d : {ARB_DTYPE_F32, ARB_DTYPE_F16, ARB_DTYPE_BF16}) CHECK(parse_dtype(dtype_name(d)) == d);
  for (int32_t a : {ARB_ACT_NONE, ARB_ACT_RELU, ARB_ACT_GELU_TANH, ARB_ACT_GELU_ERF, ARB_ACT_SILU})
    CHECK(parse_activation(activation_name(a)) == a);
  for (int32_t l = ARB_LOG_TRACE; l <= ARB_LOG_OFF; ++l) CHECK(parse_log_level(log_level_name(l)) == l);
  for (int32_t d : {kDLCPU, kDLCUDA}) CHECK(parse_device(device_name(d)) == d);
  CHECK(provenance_name(ARB_PROVENANCE_AI_GENERATED) == "ai_generated");
  CHECK(provenance_name(ARB_PROVENANCE_UNSPECIFIED) == "unspecified");
}

TEST_CASE("base.names: aliases, and values and words outside the ABI") {
  CHECK(parse_dtype("bfloat16") == ARB_DTYPE_BF16);
  CHECK(parse_dtype("float32") == ARB_DTYPE_F32);
  CHECK(parse_activation("gelu_erf") == ARB_ACT_GELU_ERF);
  CHECK(activation_name(ARB_ACT_GELU_ERF) == "gelu");  // the exact form, as PyTorch names it
  CHECK_FALSE(parse_dtype("invalid"));                 // the name of 0 is not a dtype
  CHECK_FALSE(parse_dtype("F32"));
  CHECK_FALSE(parse_dtype(""));
  CHECK_FALSE(parse_activation("gelu_fast"));
  CHECK_FALSE(parse_log_level("verbose"));
  CHECK(dtype_name(-1) == "invalid");
  CHECK(dtype_name(4) == "invalid");
  CHECK(activation_name(99) == "invalid");
  CHECK(provenance_name(5) == "unknown");
  CHECK(log_level_name(-3) == "off");
  CHECK(device_name(7) == "other");
}

TEST_CASE("base.path lists: colons separate, empty items are skipped") {
  CHECK(split_path_list(nullptr).empty());
  CHECK(split_path_list("").empty());
  CHECK(split_path_list("::").empty());
  CHECK(split_path_list("/a") == std::vector<std::string>{"/a"});
  CHECK(split_path_list(":/a::/b c:") == std::vector<std::string>{"/a", "/b c"});
}

namespace {

// A host-side reader that throws its own type, as core's Section does.
struct HostError {
  std::string message;
};
class HostTable : public StrictTable {
 public:
  using StrictTable::StrictTable;

 private:
  void raise(const std::string& message) const override { throw HostError{message}; }
};

std::string error_of(const std::string& text, void (*read)(StrictTable&)) {
  const std::string source = "test.toml";
  const toml::table document = parse_toml_document(text, source);
  HostTable root(document, "", source);
  try {
    read(root);
    root.finish();
  } catch (const HostError& e) {
    return e.message;
  }
  return "";
}

}  // namespace

TEST_CASE("base.strict TOML: typed keys, positions, and keys nobody asked for") {
  auto reads_all = [](StrictTable& t) {
    CHECK(t.required_string("name") == "x");
    CHECK(t.integer("count") == 3);
    CHECK(t.number("scale") == doctest::Approx(0.5));
    CHECK(t.number("count") == doctest::Approx(3.0));  // an integer is a number
    CHECK(t.strings("list") == std::vector<std::string>{"a", "b"});
    CHECK_FALSE(t.boolean("absent"));
    const toml::table* sub = t.table("sub");
    REQUIRE(sub != nullptr);
    HostTable s(*sub, "sub", "test.toml");
    CHECK(s.required_boolean("on"));
    s.finish();
  };
  CHECK(error_of("name = 'x'\ncount = 3\nscale = 0.5\nlist = ['a', 'b']\n[sub]\non = true\n", reads_all) == "");

  auto reads_name = [](StrictTable& t) { t.string("name"); };
  CHECK(error_of("name = 'x'\nnmae = 'y'\n", reads_name) == "test.toml:2:1: unknown key 'nmae'");
  CHECK(error_of("name = 4\n", reads_name) == "test.toml:1:8: 'name' must be a string");
  auto requires_count = [](StrictTable& t) { t.required_integer("count"); };
  CHECK(error_of("count = 1.5\n", requires_count) == "test.toml:1:9: 'count' must be an integer");
  CHECK(error_of("\n", requires_count).find("'count' is missing") != std::string::npos);
  auto reads_list = [](StrictTable& t) { t.required_strings("list"); };
  CHECK(error_of("list = ['a', 2]\n", reads_list) == "test.toml:1:14: 'list' must be an array of strings");
  auto reads_sub = [](StrictTable& t) {
    const toml::table* sub = t.table("sub");
    HostTable s(*sub, "sub", "test.toml");
    s.finish();
  };
  CHECK(error_of("[sub]\nkey = 1\n", reads_sub) == "test.toml:2:1: unknown key 'sub.key'");
  CHECK(error_of("sub = 1\n", reads_sub) == "test.toml:1:7: 'sub' must be a table");
}

TEST_CASE("base.strict TOML: a syntax error names the source, line and column") {
  std::string message;
  try {
    parse_toml_document("a = 1\nb = = 2\n", "bad.toml");
  } catch (const InputError& e) {
    message = e.what();
  }
  CHECK(message.rfind("bad.toml:2:", 0) == 0);
}

namespace {
std::string syntax_error(const std::string& text) {
  try {
    parse_toml_document(text, "t.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// toml++ 3.3.0 reaches undefined behaviour on these (toml_screen.hpp): each must be an error
// with a position, from the screen, before toml++ sees it.
TEST_CASE("base.strict TOML: text that would reach toml++ 3.3.0's bugs is refused with its position") {
  struct Case {
    std::string text, error;
  };
  const std::string outside = "a non-ASCII character outside a string or comment";
  const std::string header = "a table header whose name starts with neither a bare-key character nor a quote";
  for (const Case& c : {Case{"[[[1]]]", "t.toml:1:3: " + header}, Case{"[[[a]]]", "t.toml:1:3: " + header},
                        Case{"[[=", "t.toml:1:3: " + header}, Case{"x = 1\n  [ [a]]\n", "t.toml:2:5: " + header},
                        Case{"[]", "t.toml:1:2: " + header},
                        Case{std::string("\xEF\xBB\xBC\x5B", 4), "t.toml:1:1: " + outside},
                        Case{"\xC3\xA9 = 1", "t.toml:1:1: " + outside}, Case{"[\xC3\xA9]", "t.toml:1:2: " + header},
                        Case{"a = 1 \xC3\xA9", "t.toml:1:7: " + outside},
                        Case{"a = [1,\n\xEF\xBB\xBC]", "t.toml:2:1: " + outside},
                        Case{"a = 1979-05-27 1#", "t.toml:1:5: a malformed date or date-time"},
                        Case{"a = [\n}", "t.toml:2:1: a value is missing before this character"},
                        // Valid TOML, but toml++ tests the non-ASCII character after a
                        // line-ending backslash for whitespace: refused too.
                        Case{"a = \"\"\"x \\\n  \xC3\xA9\"\"\"", "t.toml:2:3: a backslash before a non-ASCII character in a string"}}) {
    CAPTURE(c.text);
    CHECK(syntax_error(c.text) == c.error);
  }
}

TEST_CASE("base.strict TOML: the screen passes valid documents that look like its faults") {
  for (const std::string& text : {
           std::string("\xEF\xBB\xBF" "a = 1\n"),                       // a byte-order mark
           std::string("a = \"\xC3\xA9 \xEF\xBB\xBC\"  # \xC3\xA9\n"),  // non-ASCII in strings and comments
           std::string("a = '''\n[[[1]]]\n\xC3\xA9'''\n"),             // a header's look-alike in a string
           std::string("a = \"\"\"\n[[[x]]] \\\"\"\" \\\n  e\xC3\xA9\"\"\"\"\nb = 1\n"),
           std::string("m = [\n  [1, 2],\n  [[3]],\n]\n[[t]]\nx = 1\n[ \"q\" . r ]\n"),  // arrays at a line's start
           std::string("s = 'it'\n[[ t ]]\n"),
       }) {
    CAPTURE(text);
    CHECK(syntax_error(text) == "");
  }
}

TEST_CASE("base.strict TOML: every TOML file in the project passes the screen") {
  namespace fs = std::filesystem;
  int files = 0;
  for (const char* folder : {"configs", "bench", "plugins", "tests", "examples", "docs"}) {
    const fs::path root = fs::path(ARBITER_TEST_SOURCE_DIR) / folder;
    if (!fs::is_directory(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (entry.path().extension() != ".toml" || !entry.is_regular_file()) continue;
      CAPTURE(entry.path().string());
      const std::optional<TomlScreenError> e = screen_toml(read_text_file(entry.path().string(), "test"));
      CHECK_MESSAGE(!e.has_value(), (e ? std::to_string(e->line) + ":" + std::to_string(e->column) + " " + e->what : ""));
      ++files;
    }
  }
  CHECK(files >= 10);
}

TEST_CASE("base.sha256 matches the standard test vectors, whole or fed in pieces") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex(std::string(1000, 'a')) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(sha256_hex(two_blocks) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  for (size_t piece : {1, 3, 55, 56, 63, 64, 65}) {
    const std::string text = std::string(1000, 'a');
    Sha256 hash;
    for (size_t at = 0; at < text.size(); at += piece) hash.update(std::string_view(text).substr(at, piece));
    CHECK(hash.hex_digest() == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
  }
}

TEST_CASE("base.sha256: the SHA extensions and the portable code agree on every length") {
  if (!Sha256::uses_sha_extensions()) {
    MESSAGE("this CPU has no SHA extensions: only the portable code runs (tested above)");
    return;
  }
  std::string data(5000, '\0');
  uint32_t x = 12345;
  for (char& c : data) c = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
  for (size_t length : {0, 1, 55, 56, 63, 64, 65, 127, 128, 129, 1000, 4999, 5000}) {
    CAPTURE(length);
    Sha256 fast, portable(true);
    fast.update(std::string_view(data).substr(0, length));
    portable.update(std::string_view(data).substr(0, length));
    CHECK(fast.hex_digest() == portable.hex_digest());
  }
}

TEST_CASE("counts in reports agree with their nouns") {
  CHECK(counted(1, "shape") == "1 shape");
  CHECK(counted(6, "shape") == "6 shapes");
  CHECK(counted(0, "problem") == "0 problems");
  CHECK(counted(1, "entry", "entries") == "1 entry");
  CHECK(counted(3, "entry", "entries") == "3 entries");
}

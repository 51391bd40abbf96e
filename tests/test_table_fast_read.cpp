// The fast reader of tuning tables (WrittenTableReader) against toml++ (parse_general): the
// same table from the writer's text, a fall-back for any other text, toml++'s errors, files
// read in pieces, entries of other devices left out, and entries checked when first looked up.
#include "common/failure.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"
#include "table/table_file.hpp"
#include "table/table_index.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <random>

using namespace arbiter;

namespace {

DeviceFingerprint device(const std::string& name) { return {"cpu", name, "avx2 fma"}; }

TableEntry entry(int i, const DeviceFingerprint& d) {
  TableEntry e;
  e.key = "softmax f32 rows=" + std::to_string(1 + i) + " cols=64";
  e.device = d.id();
  e.kernel = "cpu.softmax";
  e.plugin_version = "1.0.0";
  e.build_id = "abc123";
  e.runtime_version = i % 3 == 0 ? "Lib \"2\"\\x" : "";
  e.plugin_sha256 = std::string(64, 'a');
  e.median_us = 0.5 + i * 1.25e-3;
  e.p20_us = e.median_us * 0.98;
  e.p80_us = 123456789.0 + i;
  e.samples = 25 + i;
  e.noise = i % 2 ? 0.0 : 1e-7;
  e.runner_up = "other.kernel";
  e.margin = 0.25 - 0.5 * i;  // not -0: written "-0", an integer, read back as 0
  e.verified = i % 2 == 0;
  e.verification = i % 4 == 0 ? "passed: 3 trials\t\"6 shapes\"\nmax error 1e-03 \x01\x7f \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
                              : "passed";
  e.workspace_bytes = i % 5 == 0 ? -64 : 4096;
  e.when = "2026-11-30T23:59:00Z";
  return e;
}

TuningTable sample_table(int entries = 12) {
  TuningTable table;
  const DeviceFingerprint a = device("Test CPU \xc2\xae"), b = device("Other CPU");
  for (int i = 0; i < entries; ++i) table.put(entry(i, i % 3 == 2 ? b : a), i % 3 == 2 ? b : a);
  return table;
}

// What parse_general makes of `text`: its table written out, or "error: <message>".
std::string general(std::string_view text) {
  try {
    return TuningTable::parse_general(text, "t.toml").to_toml();
  } catch (const Failure& f) {
    return std::string("error: ") + f.what();
  }
}

// The fast reader never accepts what toml++ refuses or reads differently.
void check_agrees(std::string_view text) {
  TuningTable fast;
  if (!WrittenTableReader::read(text, fast)) return;  // falls back: toml++ decides
  const std::string expected = general(text);
  REQUIRE_MESSAGE(expected.rfind("error: ", 0) != 0, "the fast reader accepted what toml++ refuses: ", expected,
                  "\n----\n", text);
  CHECK_MESSAGE(fast.to_toml() == expected, text);
}

// An entry of the shipped cpu plugin's softmax on this machine that is valid here.
TableEntry usable(int rows, Context& probe) {
  const PluginRecord& cpu = *test::plugin_named(probe, "cpu");
  TableEntry e = entry(rows, probe.device().fingerprint());
  e.key = problem_key(parse_problem("softmax f32 rows=" + std::to_string(rows) + " cols=256").problem);
  e.plugin_version = cpu.version;
  e.build_id = cpu.build_id;
  e.runtime_version = "";
  e.plugin_sha256 = cpu.sha256;
  e.verified = true;
  return e;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace

TEST_CASE("table fast read: the writer's text reads to the same table as through toml++") {
  const TuningTable table = sample_table();
  const std::string text = table.to_toml();
  TuningTable fast;
  REQUIRE(WrittenTableReader::read(text, fast));
  CHECK(fast.to_toml() == text);
  CHECK(fast.to_toml() == general(text));
  const TuningTable slow = TuningTable::parse_general(text, "t");
  REQUIRE(fast.entries().size() == table.entries().size());
  REQUIRE(slow.entries().size() == table.entries().size());
  for (size_t i = 0; i < fast.entries().size(); ++i) {
    const TableEntry& x = fast.entries()[i];
    const TableEntry& y = slow.entries()[i];
    CHECK(x.key == y.key);
    CHECK(x.runtime_version == y.runtime_version);
    CHECK(x.verification == y.verification);
    CHECK(x.median_us == y.median_us);  // bit for bit, not to 6 digits
    CHECK(x.p80_us == y.p80_us);
    CHECK(x.margin == y.margin);
    CHECK(x.workspace_bytes == y.workspace_bytes);
  }
  CHECK(fast.find(table.entries()[4].key, table.entries()[4].device) != nullptr);
  CHECK(fast.devices().size() == 2);
}

TEST_CASE("table fast read: any other text is left to toml++, which reads it the same or refuses it") {
  const std::string text = sample_table(3).to_toml();
  auto changed = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  const std::vector<std::string> others = {
      changed("samples = 25\n", "samples  = 25\n"),               // spacing of a hand edit
      changed("samples = 25\n", "samples = 25 # fast\n"),         // a trailing comment
      changed("kernel = \"cpu.softmax\"\n", ""),                  // a key missing
      changed("median_us = 0.5\n", "median_us = +0.5\n"),         // a number of another form
      changed("median_us = 0.5\n", "median_us = inf\n"),          // not finite
      changed("build_id = \"abc123\"\n", "build_id = 'abc123'\n"),  // a literal string
      changed("schema = 1\n", "schema = 2\n"),                    // another schema
      changed("\n[[entry]]\n", "\r\n[[entry]]\r\n"),              // CRLF
      changed("abc123", "abc\\U0001F600"),                        // an escape the writer does not write
      changed("[[entry]]", "[[entry]] "),                         // a header written differently
      text + "extra = 1\n",                                        // a key after the last entry
  };
  for (const std::string& other : others) {
    TuningTable fast;
    CHECK_FALSE(WrittenTableReader::read(other, fast));
    // parse() falls back and says what toml++ says.
    std::string via_parse;
    try {
      via_parse = TuningTable::parse(other, "t.toml").to_toml();
    } catch (const Failure& f) {
      CHECK(f.status() == ARB_ERR_TABLE);
      via_parse = std::string("error: ") + f.what();
    }
    CHECK(via_parse == general(other));
  }
}

TEST_CASE("table fast read: duplicates, unknown devices and bad ids get toml++'s errors") {
  const TuningTable table = sample_table(3);
  const std::string text = table.to_toml();
  const size_t first = text.find("\n[[entry]]");
  const size_t second = text.find("\n[[entry]]", first + 1);
  const std::string duplicate = text + text.substr(first, second - first);
  const std::string unknown = text + "\n[[entry]]" + text.substr(first + 10, second - first - 10);
  std::string unknown_device = unknown;
  const std::string id = table.entries()[0].device;
  unknown_device.replace(unknown_device.rfind(id), id.size(), "cpu-0000000000000000");
  std::string bad_id = text;
  bad_id.replace(bad_id.find("[devices.") + 9, id.size(), "cpu-1111111111111111");
  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {duplicate, "a second entry for"},
           {unknown_device, "entry for unknown device"},
           {bad_id, "does not match its fingerprint"},
           {text.substr(0, text.size() - 20), ""}}) {
    TuningTable fast;
    CHECK_FALSE(WrittenTableReader::read(bad, fast));
    const std::string error = general(bad);
    REQUIRE(error.rfind("error: ", 0) == 0);
    CHECK(error.find(message) != std::string::npos);
    CHECK_THROWS_AS(TuningTable::parse(bad, "t.toml"), Failure);
  }
}

TEST_CASE("table fast read: every truncation and thousands of byte changes agree with toml++") {
  const std::string text = sample_table(4).to_toml();
  for (size_t n = 0; n <= text.size(); ++n) check_agrees(std::string_view(text).substr(0, n));
  std::mt19937 random(14);
  const std::string bytes = "\"\\\n\t =.-+e0159#[]\x7f\x01\xc3\xa9\xff";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string t = text;
    for (int changes = 1 + static_cast<int>(random() % 3); changes > 0; --changes) {
      const size_t at = random() % t.size();
      switch (random() % 3) {
        case 0: t[at] = bytes[random() % bytes.size()]; break;
        case 1: t.insert(at, 1, bytes[random() % bytes.size()]); break;
        default: t.erase(at, 1); break;
      }
    }
    check_agrees(t);
  }
}

TEST_CASE("table fast read: a file read in pieces, with a line longer than a piece") {
  test::TempDir dir;
  TuningTable table = sample_table(3000);  // some 1.5 MiB: more than one piece
  TableEntry long_one = entry(5000, device("Test CPU \xc2\xae"));
  long_one.verification = std::string(3 << 20, 'x') + "\n";
  table.put(long_one, device("Test CPU \xc2\xae"));
  const std::string path = dir.file("table.toml");
  write_table_file(path, table);
  const TuningTable read = load_table_file(path, size_t(64) << 20);
  CHECK(read.entries().size() == 3001);
  CHECK(read.to_toml() == table.to_toml());

  // Only one device's entries kept; the others counted.
  const std::vector<std::string> keep = {device("Other CPU").id()};
  const TuningTable kept = load_table_file(path, size_t(64) << 20, keep);
  CHECK(kept.entries().size() == 1000);
  CHECK(kept.left_out() == 2001);
  for (const TableEntry& e : kept.entries()) CHECK(e.device == keep[0]);

  // The limit holds as for read_text_file.
  CHECK_THROWS_AS(load_table_file(path, 1 << 20), Failure);
}

TEST_CASE("table fast read: a hand-edited table falls back to toml++ in a context, keeping only this machine") {
  test::TempDir dir;
  const std::string path = dir.file("table.toml");
  auto probe = test::make_context(test::config_loading(test::shipped_plugins()));
  const PluginRecord& cpu = *test::plugin_named(*probe, "cpu");
  TuningTable table;
  for (int i = 0; i < 4; ++i) table.put(usable(4 << i, *probe), probe->device().fingerprint());
  TableEntry elsewhere = entry(9, device("Other CPU"));
  table.put(elsewhere, device("Other CPU"));
  const std::string text = table.to_toml();
  std::string by_hand = text;  // a literal string: TOML, but not what the writer writes
  const std::string quoted = "build_id = \"" + cpu.build_id + "\"";
  by_hand.replace(by_hand.find(quoted), quoted.size(), "build_id = '" + cpu.build_id + "'");
  TuningTable unused;
  CHECK_FALSE(WrittenTableReader::read(by_hand, unused));
  for (const std::string& variant : {text, by_hand}) {
    write_file(path, variant);
    const auto context =
        test::make_context(test::config_loading(test::shipped_plugins(), "[table]\npath = \"" + path + "\"\n"));
    REQUIRE(context->table() != nullptr);
    CHECK(context->table()->other_devices() == 1);
    const auto hit = context->table()->lookup(table.entries()[1].key);  // checked now, alone
    REQUIRE(hit.has_value());
    CHECK(hit->entry->median_us == table.entries()[1].median_us);
    CHECK(context->table()->valid() == 4);
    CHECK(context->table()->stale().empty());
  }
}

TEST_CASE("table fast read: an entry is checked when first looked up, and a later one of its key replaces it") {
  test::TempDir dir;
  const std::string path = dir.file("table.toml");
  auto probe = test::make_context(test::config_loading(test::shipped_plugins()));
  const TableEntry good = usable(4, *probe);
  const std::string key = good.key;
  TableEntry stale = good;
  stale.key = problem_key(parse_problem("softmax f32 rows=8 cols=256").problem);
  stale.plugin_version = "0.0.1";
  TuningTable table;
  table.put(good, probe->device().fingerprint());
  table.put(stale, probe->device().fingerprint());
  write_table_file(path, table);
  const auto context =
      test::make_context(test::config_loading(test::shipped_plugins(), "[table]\npath = \"" + path + "\"\n"));
  REQUIRE(context->table() != nullptr);
  CHECK_FALSE(context->table()->lookup(stale.key).has_value());
  CHECK(context->table()->why_not(stale.key).find("is stale: measured with cpu 0.0.1") != std::string::npos);
  REQUIRE(context->table()->lookup(key).has_value());
  // A tuned result replaces the file's entry, checked or not.
  TableEntry tuned = good;
  tuned.median_us = 0.125;
  context->table()->add(tuned, *context->table()->lookup(key)->kernel);
  CHECK(context->table()->lookup(key)->entry->median_us == 0.125);
  CHECK(context->table()->valid() == 1);
  CHECK(context->table()->stale().size() == 1);
}


TEST_CASE("table fast read: the fuzz seed in the writer's layout is one the fast reader takes") {
  std::ifstream in(std::string(ARBITER_TEST_SOURCE_DIR) + "/tools/fuzz/corpus/table/writer-format-two-devices.toml",
                   std::ios::binary);
  REQUIRE(in.good());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TuningTable fast;
  REQUIRE(WrittenTableReader::read(text, fast));
  CHECK(fast.entries().size() == 2);
  check_agrees(text);
}

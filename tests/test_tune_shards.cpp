// Sharded tuning (docs/tuning.md, "Sharded tuning"): `arbiter tune --shard=I/N` in separate
// processes, each writing its own table, joined by `arbiter table merge`; how the split is
// made; bad --shard values; and merges of tables whose validators conflict, which keep the
// entries apart instead of mixing them.
#include "problem/problem.hpp"
#include "shell_command.hpp"
#include "table/table_file.hpp"
#include "test_support.hpp"
#include "tune/shape_suite.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace arbiter;

namespace {

// Seven problems, six keys: the last is the first written in another order. Small enough that
// a whole tune with the cpu plugin takes well under a second.
constexpr const char* kSuite = R"(name = "shards"
[[problem]]
problem = "softmax f32 rows=2 cols=8"
[[problem]]
problem = "rmsnorm f32 rows=2 cols=16"
[[problem]]
problem = "gemm f32 m=2 n=8 k=8"
[[problem]]
problem = "softmax f32 rows=4 cols=32"
[[problem]]
problem = "gemm f32 m=4 n=8 k=16 tb=1"
[[problem]]
problem = "rmsnorm f32 rows=1 cols=64"
[[problem]]
problem = "softmax f32 cols=8 rows=2"
)";

// The shipped cpu plugin only (and the built-in oracle), found beside the program as an
// installation finds it; the shortest tuning budget.
constexpr const char* kConfig = R"(log_level = "error"
[plugins]
enable = ["cpu"]
[tune]
budget_ms = 1
warmup = 1
)";

using Run = test::CommandRun;  // output: stdout and stderr

// The arbiter program in a process of its own, with ARBITER_PLUGIN_PATH unset.
Run run_arbiter(const std::string& arguments) {
  return test::run_shell_command("env -u ARBITER_PLUGIN_PATH '" + std::string(ARBITER_TEST_CLI) + "' " + arguments +
                                 " 2>&1");
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  REQUIRE(out.good());
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using Keys = std::set<std::pair<std::string, std::string>>;  // (key, device)

Keys keys_of(const TuningTable& table) {
  Keys keys;
  for (const TableEntry& e : table.entries()) keys.insert({e.key, e.device});
  return keys;
}

std::set<std::string> problem_keys(const std::vector<SuiteProblem>& problems) {
  std::set<std::string> keys;
  for (const SuiteProblem& p : problems) keys.insert(problem_key(p.parsed.problem));
  return keys;
}

// Every field: an entry is one measurement, never parts of two.
auto fields(const TableEntry& e) {
  return std::tie(e.key, e.device, e.kernel, e.plugin_version, e.build_id, e.runtime_version, e.plugin_sha256,
                  e.median_us, e.p20_us, e.p80_us, e.samples, e.noise, e.runner_up, e.margin, e.verified,
                  e.verification, e.workspace_bytes, e.when);
}
bool same_entry(const TableEntry& a, const TableEntry& b) { return fields(a) == fields(b); }

// A folder with the suite and the config, and the tune of the whole suite in one process.
struct Workspace {
  test::TempDir dir{"arbiter-shards"};
  std::string suite = dir.file("suite.toml"), config = dir.file("config.toml");
  Workspace() {
    write_file(suite, kSuite);
    write_file(config, kConfig);
  }
  // `arbiter tune --suite` into `table`, with `extra` arguments (--shard=I/N).
  Run tune(const std::string& table, const std::string& extra = "") const {
    return run_arbiter("--config '" + config + "' tune --suite='" + suite + "' --table='" + table + "' " + extra);
  }
  Run merge(const std::string& out, const std::vector<std::string>& in) const {
    std::string arguments = "table merge '" + out + "'";
    for (const std::string& path : in) arguments += " '" + path + "'";
    return run_arbiter(arguments);
  }
  TuningTable whole_suite_tuned() const {
    const std::string path = dir.file("single.toml");
    const Run run = tune(path);
    INFO(run.output);
    REQUIRE(run.status == 0);
    return load_table_file(path);
  }
};

}  // namespace

TEST_CASE("tune_shards.the split goes by sorted key: disjoint, complete, balanced, independent of the suite's order") {
  const std::vector<SuiteProblem> problems = parse_suite(kSuite, "suite.toml").problems;
  std::vector<SuiteProblem> reversed(problems.rbegin(), problems.rend());
  const std::set<std::string> all = problem_keys(problems);
  REQUIRE(all.size() == 6);
  for (size_t count = 1; count <= 8; ++count) {
    CAPTURE(count);
    std::multiset<std::string> union_of_shards;
    std::set<std::string> seen;
    size_t least = all.size(), most = 0;
    for (size_t index = 0; index < count; ++index) {
      const std::vector<SuiteProblem> shard = suite_shard(problems, index, count);
      for (const SuiteProblem& p : shard) union_of_shards.insert(p.text);
      const std::set<std::string> keys = problem_keys(shard);
      for (const std::string& key : keys) CHECK(seen.insert(key).second);  // in no other shard
      CHECK(problem_keys(suite_shard(reversed, index, count)) == keys);
      least = std::min(least, keys.size());
      most = std::max(most, keys.size());
    }
    std::multiset<std::string> texts;
    for (const SuiteProblem& p : problems) texts.insert(p.text);
    CHECK(union_of_shards == texts);  // every problem once, duplicates with their key
    CHECK(seen == all);
    CHECK(most - least <= 1);
  }
  // More shards than keys: the last ones are empty.
  CHECK(suite_shard(problems, 7, 8).empty());
  CHECK_THROWS(suite_shard(problems, 3, 3));
  CHECK_THROWS(suite_shard(problems, 0, 0));
}

TEST_CASE("tune_shards.three shard processes merged hold exactly the keys of a single-process tune") {
  const Workspace w;
  const std::vector<SuiteProblem> problems = load_suite(w.suite).problems;
  std::vector<std::string> shard_tables;
  Keys seen;
  for (size_t index = 0; index < 3; ++index) {
    const std::string table = w.dir.file("shard" + std::to_string(index) + ".toml");
    const Run run = w.tune(table, "--shard=" + std::to_string(index) + "/3");
    INFO(run.output);
    REQUIRE(run.status == 0);
    const std::vector<SuiteProblem> expected = suite_shard(problems, index, 3);
    CHECK(contains(run.output, "shard " + std::to_string(index) + "/3 takes " + std::to_string(expected.size()) +
                                   " of 7 problems"));
    CHECK(contains(run.output, "for " + std::to_string(expected.size()) + " problem"));
    CHECK(contains(run.output, "(shard " + std::to_string(index) + "/3 of 7)"));
    const TuningTable tuned = load_table_file(table);
    std::set<std::string> keys;
    for (const auto& [key, device] : keys_of(tuned)) {
      keys.insert(key);
      CHECK(seen.insert({key, device}).second);  // no key tuned by two shards
    }
    CHECK(keys == problem_keys(expected));
    shard_tables.push_back(table);
  }

  const std::string merged_path = w.dir.file("merged.toml");
  const Run merge = w.merge(merged_path, shard_tables);
  INFO(merge.output);
  REQUIRE(merge.status == 0);
  for (size_t index = 0; index < 3; ++index)  // nothing to choose between
    CHECK(contains(merge.output, "shard" + std::to_string(index) + ".toml: " +
                                     std::to_string(problem_keys(suite_shard(problems, index, 3)).size()) +
                                     " added, 0 replaced, 0 kept"));
  CHECK_FALSE(contains(merge.output, "note:"));  // one machine, one build
  const TuningTable merged = load_table_file(merged_path);
  CHECK(keys_of(merged) == seen);
  for (const std::string& path : shard_tables) {
    const TuningTable shard = load_table_file(path);
    for (const TableEntry& e : shard.entries()) {
      const TableEntry* m = merged.find(e.key, e.device);
      REQUIRE(m != nullptr);
      CHECK(same_entry(*m, e));
    }
  }

  const TuningTable single = w.whole_suite_tuned();
  CHECK(keys_of(merged) == keys_of(single));
  CHECK(merged.devices().size() == 1);
  CHECK(single.devices().size() == 1);
}

TEST_CASE("tune_shards.bad --shard values are refused before anything runs, with the reason") {
  const Workspace w;
  const std::string table = w.dir.file("never.toml");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0/0", "the number of shards N must be at least 1"},
      {"3/2", "the shard index runs from 0 to 1 (0-based"},
      {"3/3", "--array=0-2"},
      {"-1/2", "expected I/N, two whole numbers"},
      {"a/b", "expected I/N, two whole numbers"},
      {"1", "expected I/N, two whole numbers"},
      {"1/", "expected I/N, two whole numbers"},
      {"/2", "expected I/N, two whole numbers"},
      {"1/2/3", "expected I/N, two whole numbers"},
      {"+1/2", "expected I/N, two whole numbers"},
      {"", "expected I/N, two whole numbers"},
      {"1/99999999999999999999999", "99999999999999999999999 is too large (at most 1000000 shards)"},
      {"18446744073709551617/3", "is too large"},
      {"0/1000001", "is too large"},
  };
  for (const auto& [value, reason] : cases) {
    const Run run = w.tune(table, "'--shard=" + value + "'");
    INFO(value, "\n", run.output);
    CHECK(run.status == 1);
    CHECK(contains(run.output, "ARB_ERR_INVALID_ARGUMENT: tune --shard=" + value + ": "));
    CHECK(contains(run.output, reason));
  }
  CHECK_FALSE(std::filesystem::exists(table));
  const Run help = run_arbiter("tune --help");
  CHECK(help.status == 0);
  CHECK(contains(help.output, "[--shard=I/N: only shard I (0 to N-1) of N"));
}

TEST_CASE("tune_shards.a shard without a problem says so, writes no table and succeeds") {
  const Workspace w;
  const std::string table = w.dir.file("empty.toml");
  const Run run = w.tune(table, "--shard=7/8");  // six keys
  INFO(run.output);
  CHECK(run.status == 0);
  CHECK(contains(run.output, "shard 7/8 takes 0 of 7 problems"));
  CHECK(contains(run.output, "nothing to tune, no table written"));
  CHECK_FALSE(std::filesystem::exists(table));
}

TEST_CASE("tune_shards.merge keeps the tables of another device apart from this one's") {
  const Workspace w;
  const TuningTable single = w.whole_suite_tuned();
  // The same keys, tuned (say) by a shard that ran on another kind of machine: faster,
  // another kernel, newer.
  const DeviceFingerprint other{"cpu", "Another CPU", "sse4_2 avx avx2 fma"};
  TuningTable elsewhere;
  for (TableEntry e : single.entries()) {
    e.device = other.id();
    e.kernel = "cpu.elsewhere";
    e.median_us /= 10;
    e.when = "2099-01-01T00:00:00Z";
    elsewhere.put(e, other);
  }
  const std::string mine_path = w.dir.file("single.toml"), elsewhere_path = w.dir.file("elsewhere.toml");
  write_table_file(elsewhere_path, elsewhere);
  const TuningTable theirs = load_table_file(elsewhere_path);  // as written (6 significant digits)
  const std::string merged_path = w.dir.file("merged.toml");
  const Run merge = w.merge(merged_path, {mine_path, elsewhere_path});
  INFO(merge.output);
  REQUIRE(merge.status == 0);
  CHECK(contains(merge.output, "elsewhere.toml: " + std::to_string(single.entries().size()) + " added, 0 replaced, 0 kept"));
  const TuningTable merged = load_table_file(merged_path);
  CHECK(merged.entries().size() == 2 * single.entries().size());
  CHECK(merged.devices().size() == 2);
  for (const TuningTable* source : {&single, &theirs})
    for (const TableEntry& e : source->entries()) {
      const TableEntry* m = merged.find(e.key, e.device);
      REQUIRE(m != nullptr);
      CHECK(same_entry(*m, e));  // neither device's entries touched by the other's
    }
  // Here only this machine's entries are used; the others are reported as another device's.
  const Run show = run_arbiter("--config '" + w.config + "' table show '" + merged_path + "'");
  INFO(show.output);
  CHECK(show.status == 0);
  CHECK(contains(show.output, std::to_string(single.entries().size()) + " valid here, 0 stale"));
  CHECK(contains(show.output, std::to_string(single.entries().size()) + " for other devices"));
}

TEST_CASE("tune_shards.merge never mixes entries of one device measured on different plugin builds") {
  const Workspace w;
  const TuningTable single = w.whole_suite_tuned();
  // The same keys as tuned by a machine whose cpu plugin is another build: the first half of
  // the entries newer (and slower), the other half older (and faster).
  TuningTable rebuilt;
  const DeviceFingerprint here = single.devices().begin()->second;
  size_t i = 0;
  for (TableEntry e : single.entries()) {
    e.build_id = "0123456789abcdef";
    e.plugin_sha256 = std::string(64, 'e');
    const bool newer = i++ < single.entries().size() / 2;
    e.median_us *= newer ? 4.0 : 0.25;
    e.samples += 1;
    e.when = newer ? "2099-01-01T00:00:00Z" : "2000-01-01T00:00:00Z";
    rebuilt.put(e, here);
  }
  const std::string mine_path = w.dir.file("single.toml"), rebuilt_path = w.dir.file("rebuilt.toml");
  write_table_file(rebuilt_path, rebuilt);
  rebuilt = load_table_file(rebuilt_path);
  const std::string merged_path = w.dir.file("merged.toml");
  const Run merge = w.merge(merged_path, {mine_path, rebuilt_path});
  INFO(merge.output);
  REQUIRE(merge.status == 0);
  const size_t newer = single.entries().size() / 2, older = single.entries().size() - newer;
  CHECK(contains(merge.output, "rebuilt.toml: 0 added, " + std::to_string(newer) + " replaced, " +
                                   std::to_string(older) + " kept"));
  CHECK(contains(merge.output, "different code, the newer wins"));
  // Times of different code are never compared: the newer entry wins whole, however slow.
  const TuningTable merged = load_table_file(merged_path);
  REQUIRE(merged.entries().size() == single.entries().size());
  for (size_t k = 0; k < single.entries().size(); ++k) {
    const TableEntry& original = single.entries()[k];
    const TableEntry& other = *rebuilt.find(original.key, original.device);
    const TableEntry* m = merged.find(original.key, original.device);
    REQUIRE(m != nullptr);
    CHECK(same_entry(*m, k < newer ? other : original));
  }
  // The merge says that the machines ran two builds of the plugin.
  CHECK(contains(merge.output, "note: device " + here.id()));
  CHECK(contains(merge.output, "cpu entries measured on 2 different builds of the plugin"));
  // Here, the other build's entries are stale, never used; this build's are valid.
  const Run show = run_arbiter("--config '" + w.config + "' table show '" + merged_path + "'");
  INFO(show.output);
  CHECK(show.status == 0);
  CHECK(contains(show.output, std::to_string(older) + " valid here, " + std::to_string(newer) + " stale"));
  CHECK(contains(show.output, "build 0123456789abcdef"));
}

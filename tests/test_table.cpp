// The tuning table: format round trip, strict parsing, validators, policies, the nearest
// shape, concurrent writers, a writer killed mid-write, merging.
#include "common/failure.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"
#include "table/table_file.hpp"
#include "support/table_merge.hpp"
#include "table/tuned_entry.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

extern char** environ;

using namespace arbiter;
namespace fs = std::filesystem;

namespace {


DeviceFingerprint test_device(const std::string& details = "avx2") { return {"cpu", "Test CPU", details}; }

TableEntry sample_entry(const std::string& key, const std::string& kernel, double median_us, const DeviceFingerprint& d) {
  TableEntry e;
  e.key = key;
  e.device = d.id();
  e.kernel = kernel;
  e.plugin_version = "1.0.0";
  e.build_id = "abc123";
  e.runtime_version = "Lib \"2\"\\x";
  e.median_us = median_us;
  e.p20_us = median_us * 0.98;
  e.p80_us = median_us * 1.02;
  e.samples = 25;
  e.noise = 0.02;
  e.runner_up = "other.kernel";
  e.margin = 0.25;
  e.verified = true;
  // Control characters too: a verdict's detail has newlines and tabs, and TOML allows none raw.
  e.verification = "passed: 3 trials\t\"6 shapes\"\nmax error 1e-03 \x01\x7f";
  e.workspace_bytes = 64;
  e.when = "2026-11-30T23:59:00Z";
  return e;
}

std::string parse_error(const std::string& text) {
  try {
    TuningTable::parse(text, "t.toml");
  } catch (const Failure& f) {
    CHECK(f.status() == ARB_ERR_TABLE);
    return f.what();
  }
  return "";
}

// Starts the test helper process that writes table entries.
pid_t start_writer(const std::string& path, const std::string& prefix, int count) {
  std::string program = ARBITER_TEST_TABLE_WRITER, count_text = std::to_string(count);
  char* argv[] = {program.data(), const_cast<char*>(path.c_str()), const_cast<char*>(prefix.c_str()), count_text.data(),
                  nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv, environ) == 0);
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

// The key and kernel of a real problem the shipped plugins run.
const char* kSoftmax = "softmax f32 rows=4 cols=256";

}  // namespace

TEST_CASE("table: TOML round trip keeps every field") {
  TuningTable table;
  const DeviceFingerprint a = test_device(), b = test_device("avx512f");
  table.put(sample_entry("gemm f32 m=8 n=8 k=8", "cpu.gemm_small_avx2", 0.5, a), a);
  table.put(sample_entry("gemm f32 m=8 n=8 k=8", "openblas.sgemm", 0.7, b), b);  // same key, other device
  table.put(sample_entry("softmax f32 rows=1 cols=8", "cpu.softmax", 0.1, a), a);
  const TuningTable again = TuningTable::parse(table.to_toml(), "round-trip");
  REQUIRE(again.entries().size() == 3);
  CHECK(again.devices().size() == 2);
  for (size_t i = 0; i < 3; ++i) {
    const TableEntry& x = table.entries()[i];
    const TableEntry& y = again.entries()[i];
    CHECK(x.key == y.key);
    CHECK(x.device == y.device);
    CHECK(x.kernel == y.kernel);
    CHECK(x.runtime_version == y.runtime_version);  // quotes and backslashes escaped
    CHECK(x.median_us == doctest::Approx(y.median_us));
    CHECK(x.p80_us == doctest::Approx(y.p80_us));
    CHECK(x.samples == y.samples);
    CHECK(x.margin == doctest::Approx(y.margin));
    CHECK(x.verified == y.verified);
    CHECK(x.verification == y.verification);
    CHECK(x.workspace_bytes == y.workspace_bytes);
    CHECK(x.when == y.when);
  }
  CHECK(again.to_toml() == table.to_toml());
}

TEST_CASE("table: corrupt files give clear errors with positions") {
  TuningTable table;
  const DeviceFingerprint d = test_device();
  table.put(sample_entry("k1", "cpu.softmax", 1.0, d), d);
  const std::string good = table.to_toml();
  CHECK(parse_error(good.substr(0, good.size() / 2)).find("t.toml:") == 0);  // truncated
  CHECK(parse_error("\x01\x02 garbage ]]] {").find("t.toml:1:") == 0);
  CHECK(parse_error("schema = 2\n").find("schema 2 is not supported") != std::string::npos);
  CHECK(parse_error("").find("'schema' is missing") != std::string::npos);
  std::string wrong_type = good;
  wrong_type.replace(wrong_type.find("samples = 25"), 12, "samples = \"25\"");
  CHECK(parse_error(wrong_type).find("'entry[0].samples' must be an integer") != std::string::npos);
  std::string unknown = good + "colour = \"blue\"\n";
  CHECK(parse_error(unknown).find("unknown key 'entry[0].colour'") != std::string::npos);
  std::string bad_device = good;
  bad_device.replace(bad_device.find("device = \""), 10, "device = \"x");
  CHECK(parse_error(bad_device).find("entry for unknown device") != std::string::npos);
  CHECK(parse_error(good + good.substr(good.find("[[entry]]"))).find("a second entry") != std::string::npos);
}

TEST_CASE("table: a corrupt table file is reported and the context works without it") {
  test::TempDir dir;
  const std::string path = dir.file("table.toml");
  std::ofstream(path) << "schema = 1\n[[entry]]\nkey = ";
  const auto context = test::make_context(
      test::config_loading(test::shipped_plugins(), "[table]\npath = \"" + path + "\"\n"));
  CHECK(context->table() == nullptr);
  CHECK(context->table_error().find(path + ":3:") == 0);
  CHECK(context->dispatcher().decide(parse_problem(kSoftmax).problem, Dispatcher::Mode::dispatch).kernel != nullptr);
}

TEST_CASE("table: stale validators and other devices are ignored, with reasons") {
  test::TempDir dir;
  const std::string path = dir.file("table.toml");
  auto probe = test::make_context(test::config_loading(test::shipped_plugins()));
  const std::string key = problem_key(parse_problem(kSoftmax).problem);
  const PluginRecord& cpu = *test::plugin_named(*probe, "cpu");
  TuningTable table;
  TableEntry fresh = sample_entry(key, "cpu.softmax", 1.0, probe->device().fingerprint());
  fresh.plugin_version = cpu.version;
  fresh.build_id = cpu.build_id;
  fresh.runtime_version = "";
  fresh.plugin_sha256 = cpu.sha256;
  TableEntry old_version = fresh;
  old_version.key = problem_key(parse_problem("softmax f32 rows=8 cols=256").problem);
  old_version.plugin_version = "0.9.0";
  TableEntry other_machine = fresh;
  const DeviceFingerprint elsewhere = test_device("some other cpu");
  other_machine.device = elsewhere.id();
  TableEntry unknown_kernel = fresh;
  unknown_kernel.key = problem_key(parse_problem("softmax f32 rows=16 cols=256").problem);
  unknown_kernel.kernel = "gone.softmax";
  table.put(fresh, probe->device().fingerprint());
  table.put(old_version, probe->device().fingerprint());
  table.put(other_machine, elsewhere);
  table.put(unknown_kernel, probe->device().fingerprint());
  write_table_file(path, table);

  const auto context = test::make_context(
      test::config_loading(test::shipped_plugins(), "[table]\npath = \"" + path + "\"\n"));
  REQUIRE(context->table() != nullptr);
  CHECK(context->table()->valid() == 1);
  CHECK(context->table()->other_devices() == 1);
  REQUIRE(context->table()->stale().size() == 2);
  const std::string stale_report = context->dispatcher().explain(parse_problem("softmax f32 rows=8 cols=256").problem);
  CHECK(stale_report.find("is stale: measured with cpu 0.9.0") != std::string::npos);
  const std::string hit = context->dispatcher().explain(parse_problem(kSoftmax).problem);
  CHECK(hit.find("rule:    tuning table entry") != std::string::npos);
  const std::string gone = context->table()->why_not(unknown_kernel.key);
  CHECK(gone.find("kernel gone.softmax is not loaded") != std::string::npos);
}

TEST_CASE("table: tune-missing tunes and writes at once, replay then uses the entry") {
  test::TempDir dir;
  const std::string path = dir.file("sub/table.toml");  // the folder is created
  const std::string extra = "[table]\npath = \"" + path + "\"\n";
  {
    const auto tuning = test::make_context(test::config_loading(
        test::shipped_plugins(), extra + "policy = \"tune-missing\"\n[tune]\nbudget_ms = 20\n"));
    const Decision d = tuning->dispatcher().decide(parse_problem(kSoftmax).problem, Dispatcher::Mode::dispatch);
    REQUIRE(d.kernel != nullptr);
    CHECK(d.rule.find("tuned now") == 0);
    const TuningTable written = load_table_file(path);
    REQUIRE(written.entries().size() == 1);
    CHECK(written.entries()[0].key == problem_key(parse_problem(kSoftmax).problem));
    CHECK(written.entries()[0].kernel == d.kernel->name);
    CHECK(written.entries()[0].verified);
    CHECK(written.entries()[0].samples >= 20);
  }
  const auto replay = test::make_context(test::config_loading(test::shipped_plugins(), extra));
  const Decision d = replay->dispatcher().decide(parse_problem(kSoftmax).problem, Dispatcher::Mode::dispatch);
  CHECK(d.rule.find("tuning table entry") == 0);
  // strict: the entry serves, a miss is an error
  const auto strict = test::make_context(test::config_loading(test::shipped_plugins(), extra + "policy = \"strict\"\n"));
  CHECK(strict->dispatcher().decide(parse_problem(kSoftmax).problem, Dispatcher::Mode::dispatch).kernel != nullptr);
  const Decision miss = strict->dispatcher().decide(parse_problem("softmax f32 rows=3 cols=256").problem,
                                                    Dispatcher::Mode::dispatch);
  CHECK(miss.kernel == nullptr);
  CHECK(miss.failure.find("strict") != std::string::npos);
}

TEST_CASE("table: on_miss = nearest uses the closest tuned shape of the class") {
  test::TempDir dir;
  const std::string path = dir.file("table.toml");
  auto probe = test::make_context(test::config_loading(test::shipped_plugins()));
  const PluginRecord& reference = *test::plugin_named(*probe, "reference");
  TuningTable table;
  for (const char* shape : {"softmax f32 rows=4 cols=256", "softmax f32 rows=64 cols=4096"}) {
    TableEntry e = sample_entry(problem_key(parse_problem(shape).problem), "reference.softmax", 1.0,
                                probe->device().fingerprint());
    e.plugin_version = reference.version;
    e.build_id = reference.build_id;
    e.runtime_version = "";
    table.put(e, probe->device().fingerprint());
  }
  write_table_file(path, table);
  const auto context = test::make_context(test::config_loading(
      test::shipped_plugins(), "[dispatch]\non_miss = \"nearest\"\n[table]\npath = \"" + path + "\"\n"));
  double distance = 0;
  const auto near = context->table()->nearest(parse_problem("softmax f32 rows=8 cols=512").problem, &distance);
  REQUIRE(near.has_value());
  CHECK(near->entry->key.find("rows=4 cols=256") != std::string::npos);
  CHECK(distance == doctest::Approx(2.0));  // |log2 8 - log2 4| + |log2 512 - log2 256|
  const Decision d = context->dispatcher().decide(parse_problem("softmax f32 rows=8 cols=512").problem,
                                                  Dispatcher::Mode::dispatch);
  REQUIRE(d.kernel != nullptr);
  CHECK(d.kernel->name == "reference.softmax");
  CHECK(d.rule.find("nearest tuned shape") == 0);
  // Another class (another alignment here) has no nearest entry: the heuristic decides.
  CHECK_FALSE(context->table()->nearest(parse_problem("softmax f32 rows=8 cols=5").problem, &distance).has_value());
}

TEST_CASE("table: two processes writing one table at once lose no entry") {
  test::TempDir dir;
  const std::string path = dir.file("table.toml");
  const pid_t a = start_writer(path, "a", 40);
  const pid_t b = start_writer(path, "b", 40);
  CHECK(wait_for(a) == 0);
  CHECK(wait_for(b) == 0);
  const TuningTable table = load_table_file(path);
  CHECK(table.entries().size() == 80);
  CHECK(table.devices().size() == 2);
}

TEST_CASE("table: a writer killed with SIGKILL mid-write leaves a parseable table") {
  test::TempDir dir;
  const std::string path = dir.file("table.toml");
  for (int round = 0; round < 6; ++round) {
    const pid_t writer = start_writer(path, "k", 0);  // rewrites 2000-entry tables forever
    // Round 0 kills it early (maybe before its first rename); the others once a table exists, so
    // that a slow build (ASan on a loaded machine) still kills it in the middle of a rewrite.
    for (int waited_ms = 0; round > 0 && !fs::exists(path) && waited_ms < 60000; waited_ms += 5)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(round == 0 ? 40 : 3 + 37 * round));
    REQUIRE(kill(writer, SIGKILL) == 0);
    const int status = wait_for(writer);
    CHECK(WIFSIGNALED(status));
    if (!fs::exists(path)) continue;  // killed before its first rename
    const TuningTable table = load_table_file(path);  // throws if half-written
    CHECK(table.entries().size() % 2000 == 0);
  }
  CHECK(fs::exists(path));
}

TEST_CASE("table: merge never compares times of different plugin builds, the newer measurement wins") {
  const DeviceFingerprint d = test_device();
  TuningTable mine, theirs;
  TableEntry old_build = sample_entry("p", "cpu.a", 1.0, d);  // fast, but measured on old code
  old_build.when = "2026-01-01T00:00:00Z";
  TableEntry new_build = sample_entry("p", "cpu.a", 5.0, d);
  new_build.build_id = "def456";
  new_build.when = "2026-11-30T00:00:00Z";
  mine.put(old_build, d);
  theirs.put(new_build, d);
  const MergeReport report = merge_tables(mine, theirs);
  CHECK(report.replaced == 1);
  CHECK(mine.find("p", d.id())->build_id == "def456");
  CHECK_FALSE(same_validators(old_build, new_build));
}

TEST_CASE("table: a winner that ran without a verdict is not recorded as verified") {
  const auto context = test::make_context(test::config_loading(
      {test::fixture_file("speeds")}, test::trusting({test::fixture_file("speeds")}) +
                                         // The oracle runs about as fast as speeds' kernels: out of the race.
                                         "[tune]\nbudget_ms = 20\nexclude = [\"reference.softmax\"]\n"));
  const arb_problem p = parse_problem("softmax f32 rows=4 cols=512").problem;
  const TuneResult r = context->tuner().tune(p, nullptr);
  REQUIRE(r.winning() != nullptr);
  CHECK_FALSE(r.winning()->gated);
  const TableEntry e = tuned_entry(r, p, context->device().fingerprint());
  CHECK_FALSE(e.verified);
  CHECK(e.verification == "not verified (trusted by plugins.trust)");
}

TEST_CASE("table: merge keeps the faster entry only by more than the noise") {
  const DeviceFingerprint d = test_device();
  TuningTable mine, theirs;
  mine.put(sample_entry("p1", "cpu.a", 10.0, d), d);
  mine.put(sample_entry("p2", "cpu.a", 10.0, d), d);
  theirs.put(sample_entry("p1", "cpu.b", 9.9, d), d);  // 1% faster, noise 2%: not enough
  theirs.put(sample_entry("p2", "cpu.b", 5.0, d), d);  // twice as fast
  theirs.put(sample_entry("p3", "cpu.b", 1.0, d), d);  // new
  const MergeReport report = merge_tables(mine, theirs);
  CHECK(report.added == 1);
  CHECK(report.replaced == 1);
  CHECK(report.kept == 1);
  CHECK(mine.find("p1", d.id())->kernel == "cpu.a");
  CHECK(mine.find("p2", d.id())->kernel == "cpu.b");
  CHECK(mine.find("p2", d.id())->median_us == 5.0);  // the whole entry, validators and all
  CHECK(mine.find("p3", d.id()) != nullptr);
  CHECK(report.lines.size() == 2);
}

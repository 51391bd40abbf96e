// Trust set by the host and the operator, never claimed by a plugin (docs/verification.md,
// "Trust"): the built-in oracle, content hashes as identity, [[plugins.trust]], duplicate
// names, files others could have written, and tuning-table verdicts that are claims.
#include "common/failure.hpp"
#include "problem/op.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"
#include "table/table_file.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>

using namespace arbiter;
namespace fs = std::filesystem;

namespace {

constexpr const char* kSoftmax = "softmax f32 rows=3 cols=40";

bool has_note(const Context& context, const std::string& text) {
  for (const std::string& note : context.registry().notes())
    if (note.find(text) != std::string::npos) return true;
  return false;
}

// A copy of a shipped plugin file in its own folder (mode 0700), to play with.
std::string copy_plugin(const test::TempDir& dir, const std::string& name) {
  const std::string target = dir.file("arbiter_" + name + ".so");
  fs::copy_file(test::plugin_file(name), target);
  return target;
}

}  // namespace

TEST_CASE("trust.the oracle is built into the library, trusted by the host and never gated") {
  const auto context = test::make_context(test::config_loading({}));
  const PluginRecord* oracle = test::plugin_named(*context, "reference");
  REQUIRE(oracle != nullptr);
  CHECK(oracle->state == PluginState::loaded);
  CHECK(oracle->origin == "built-in");
  CHECK(oracle->trust == ARB_PLUGIN_TRUST_ORACLE);
  CHECK(oracle->path.find("(built in)") != std::string::npos);
  for (const Op* op : all_ops()) {
    const KernelRecord* kernel = context->registry().oracle(op->code());
    REQUIRE(kernel != nullptr);
    CHECK_FALSE(context->gate().gated(*kernel));
  }
  // Disabled for dispatch, it still verifies.
  const auto without = test::make_context(test::config_loading({test::plugin_file("cpu")}, "disable = [\"reference\"]\n"));
  CHECK(test::plugin_named(*without, "reference")->state == PluginState::disabled);
  for (const KernelRecord* k : without->registry().candidates(ARB_OP_SOFTMAX)) CHECK(k->plugin->name != "reference");
  CHECK(without->gate().verdict(*without->registry().find("cpu.softmax"), parse_problem(kSoftmax).problem).passed);
}

TEST_CASE("trust.a plugin file named like the oracle is rejected, and verdicts still come from the real one") {
  const auto context = test::make_context(test::config_loading(
      {test::fixture_file("shadow_reference"), test::fixture_file("cheaters"), test::plugin_file("cpu")}));
  const PluginRecord* shadow = test::plugin_at_path(*context, test::fixture_file("shadow_reference"));
  REQUIRE(shadow != nullptr);
  CHECK(shadow->state == PluginState::rejected);
  CHECK(shadow->reason.find("the verification oracle's") != std::string::npos);
  CHECK(shadow->kernels.empty());
  // Checked against the shadow, writes_constant (1/cols) would agree with it.
  const arb_problem p = parse_problem(kSoftmax).problem;
  CHECK_FALSE(context->gate().verdict(*context->registry().find("cheaters.writes_constant"), p).passed);
  CHECK(context->gate().verdict(*context->registry().find("cpu.softmax"), p).passed);
}

TEST_CASE("trust.declared reference provenance is information: the plugin is gated and its wrong kernel refused") {
  const auto context = test::make_context(
      test::config_loading({test::fixture_file("claims_reference"), test::plugin_file("cpu")},
                           "[plugins.priority]\nclaims_reference = 1000\n"));
  const KernelRecord* claimed = context->registry().find("claims_reference.softmax");
  REQUIRE(claimed != nullptr);
  CHECK(claimed->provenance == ARB_PROVENANCE_REFERENCE);  // shown as declared
  CHECK(claimed->plugin->trust == ARB_PLUGIN_TRUST_NONE);
  CHECK(context->gate().gated(*claimed));
  const arb_problem p = parse_problem(kSoftmax).problem;
  const Decision d = context->dispatcher().decide(p, Dispatcher::Mode::dispatch);  // priority 1000, refused
  REQUIRE(d.kernel != nullptr);
  CHECK(d.kernel->name == "cpu.softmax");
  CHECK(context->gate().known_verdict(*claimed, p)->failed("accuracy"));
}

TEST_CASE("trust.the host hashes every plugin file, and [[plugins.trust]] needs the path and that hash") {
  const std::string cpu = test::plugin_file("cpu");
  const std::string hash = test::file_sha256(cpu);
  {
    const auto context = test::make_context(test::config_loading({cpu}));
    const PluginRecord* record = test::plugin_named(*context, "cpu");
    CHECK(record->sha256 == hash);
    CHECK(record->trust == ARB_PLUGIN_TRUST_NONE);
    CHECK(context->gate().gated(*context->registry().find("cpu.softmax")));
  }
  {
    const auto context = test::make_context(test::config_loading({cpu}, test::trusting({cpu})));
    CHECK(test::plugin_named(*context, "cpu")->trust == ARB_PLUGIN_TRUST_CONFIG);
    CHECK_FALSE(context->gate().gated(*context->registry().find("cpu.softmax")));
    const Admission a = context->gate().admission(*context->registry().find("cpu.softmax"),
                                                  parse_problem(kSoftmax).problem, false);
    CHECK(a.state == Admission::State::admitted);
    CHECK(a.reason.find("plugins.trust") != std::string::npos);
  }
  {
    const std::string other(64, 'a');
    const auto context = test::make_context(test::config_loading(
        {cpu}, "[[plugins.trust]]\npath = \"" + cpu + "\"\nsha256 = \"" + other + "\"\n"));
    CHECK(test::plugin_named(*context, "cpu")->trust == ARB_PLUGIN_TRUST_NONE);
    CHECK(has_note(*context, "but the file's is " + hash + ": not trusted"));
  }
  {  // the same content at another path is not what the operator named
    test::TempDir dir;
    const std::string copy = copy_plugin(dir, "cpu");
    const auto context = test::make_context(
        test::config_loading({copy}, "[[plugins.trust]]\npath = \"" + cpu + "\"\nsha256 = \"" + hash + "\"\n"));
    CHECK(test::plugin_named(*context, "cpu")->trust == ARB_PLUGIN_TRUST_NONE);
  }
  // AI-generated kernels are gated even in a trusted plugin.
  const auto context = test::make_context(
      test::config_loading({test::fixture_file("cheaters")}, test::trusting({test::fixture_file("cheaters")})));
  CHECK(context->gate().gated(*context->registry().find("cheaters.racy")));
}

TEST_CASE("trust.config: trust entries are checked, and allow_unverified is gone with a pointer") {
  auto error_of = [](const std::string& toml) {
    try {
      parse_config(toml, "t.toml", "");
    } catch (const Failure& f) {
      return std::string(f.what());
    }
    return std::string();
  };
  CHECK(error_of("[verify]\nallow_unverified = true\n").find("[[plugins.trust]]") != std::string::npos);
  CHECK(error_of("[[plugins.trust]]\npath = \"x.so\"\nsha256 = \"ABC\"\n").find("64 lower-case hex") != std::string::npos);
  CHECK(error_of("[[plugins.trust]]\nsha256 = \"" + std::string(64, 'a') + "\"\n").find("'plugins.trust.path' is missing") !=
        std::string::npos);
  CHECK(error_of("[plugins]\ntrust = 3\n").find("an array of tables") != std::string::npos);
  const Config c = parse_config("[plugins.choose]\ncpu = \"my/arbiter_cpu.so\"\n", "t.toml", "/base");
  CHECK(c.plugins.choose.at("cpu") == "/base/my/arbiter_cpu.so");
}

TEST_CASE("trust.a file on a user path does not replace the installed plugin of its name, unless chosen") {
  test::TempDir dir;
  const std::string copy = copy_plugin(dir, "cpu");
  const std::string installed = (fs::path(ARBITER_TEST_PLUGIN_DIR) / "arbiter_cpu.so").string();
  const std::string base = "log_level = \"error\"\n[plugins]\npaths = [\"" + copy + "\"]\n";
  {
    const auto context = test::make_context(base);
    const PluginRecord* user = test::plugin_at_path(*context, copy);
    REQUIRE(user != nullptr);
    CHECK(user->state == PluginState::rejected);
    CHECK(user->reason.find("the installed plugin 'cpu' at") != std::string::npos);
    CHECK(user->reason.find("plugins.choose.cpu") != std::string::npos);
    const PluginRecord* kept = test::plugin_at_path(*context, fs::canonical(installed).string());
    REQUIRE(kept != nullptr);
    CHECK(kept->state == PluginState::loaded);
    CHECK(kept->origin == "install");
  }
  {
    const auto context = test::make_context(base + "[plugins.choose]\ncpu = \"" + copy + "\"\n");
    CHECK(test::plugin_at_path(*context, copy)->state == PluginState::loaded);
    const PluginRecord* other = test::plugin_at_path(*context, fs::canonical(installed).string());
    CHECK(other->state == PluginState::rejected);
    CHECK(other->reason.find("plugins.choose.cpu picks " + copy) != std::string::npos);
  }
}

TEST_CASE("trust.plugin files others could have written are refused unless the config allows them") {
  test::TempDir dir;
  const std::string copy = copy_plugin(dir, "cpu");
  REQUIRE(::chmod(copy.c_str(), 0777) == 0);
  {
    const auto context = test::make_context(test::config_loading({copy}));
    const PluginRecord* record = test::plugin_at_path(*context, copy);
    REQUIRE(record != nullptr);
    CHECK(record->state == PluginState::rejected);
    CHECK(record->reason.find("is writable by every user") != std::string::npos);
    CHECK(record->version.empty());  // never ran
  }
  {
    const auto context = test::make_context(test::config_loading({copy}, "allow_insecure_files = true\n"));
    CHECK(test::plugin_at_path(*context, copy)->state == PluginState::loaded);
  }
  REQUIRE(::chmod(copy.c_str(), 0755) == 0);
  REQUIRE(::chmod(dir.path.c_str(), 0777) == 0);  // a folder anyone may write into, no sticky bit
  const auto context = test::make_context(test::config_loading({copy}));
  CHECK(test::plugin_at_path(*context, copy)->reason.find("the folder " + dir.path + " is writable by every user") !=
        std::string::npos);
  REQUIRE(::chmod(dir.path.c_str(), 01777) == 0);  // sticky, as /tmp: others cannot replace the file
  const auto sticky = test::make_context(test::config_loading({copy}));
  CHECK(test::plugin_at_path(*sticky, copy)->state == PluginState::loaded);
}

TEST_CASE("trust.a tuning-table verdict is a claim: forged ones never dispatch, stale hashes are ignored") {
  test::TempDir dir;
  const std::string path = dir.file("table.toml");
  const std::vector<std::string> plugins = {test::fixture_file("cheaters"), test::plugin_file("cpu")};
  const arb_problem p = parse_problem(kSoftmax).problem;
  {
    auto probe = test::make_context(test::config_loading(plugins));
    const PluginRecord& cheaters = *test::plugin_named(*probe, "cheaters");
    TableEntry forged;
    forged.key = problem_key(p);
    forged.device = probe->device().fingerprint().id();
    forged.kernel = "cheaters.writes_constant";
    forged.plugin_version = cheaters.version;
    forged.build_id = cheaters.build_id;
    forged.plugin_sha256 = cheaters.sha256;  // the real file's: only the verdict is a lie
    forged.median_us = 0.01;
    forged.p20_us = forged.p80_us = 0.01;
    forged.samples = 30;
    forged.verified = true;
    forged.verification = "passed: 3 trials";
    forged.when = utc_now();
    TableEntry stale = forged;
    stale.key = problem_key(parse_problem("softmax f32 rows=5 cols=40").problem);
    stale.plugin_sha256 = std::string(64, '0');
    TuningTable table;
    table.put(forged, probe->device().fingerprint());
    table.put(stale, probe->device().fingerprint());
    write_table_file(path, table);
  }
  const std::string config = test::config_loading(plugins, "[table]\npath = \"" + path + "\"\n");
  {
    const auto context = test::make_context(config);
    REQUIRE(context->table() != nullptr);
    CHECK(context->table()->valid() == 1);
    REQUIRE(context->table()->stale().size() == 1);
    CHECK(context->table()->stale()[0].reason.find("SHA-256 " + std::string(64, '0')) != std::string::npos);
    const std::string before = context->dispatcher().explain(p);
    CHECK(before.find("verified again on first use") != std::string::npos);
    const Decision d = context->dispatcher().decide(p, Dispatcher::Mode::dispatch);
    REQUIRE(d.kernel != nullptr);
    CHECK(d.kernel->name == "cpu.softmax");
    bool refused = false;
    for (const std::string& line : d.trace) refused |= line.find("cheaters.writes_constant refused by the gate") != std::string::npos;
    CHECK(refused);
  }
  // An operator who takes the table's word gets what the table says, and explain says so.
  const auto trusting = test::make_context(config + "[verify]\nrecheck_table_verdicts = false\n");
  CHECK(trusting->dispatcher().explain(p).find("not re-checked") != std::string::npos);
}

TEST_CASE("trust.code a plugin maps beside its file is part of its identity: swapping it revokes trust and entries") {
  test::TempDir dir;
  const std::string built = std::string(ARBITER_TEST_FIXTURE_DIR) + "/sidecar/";
  const std::string plugin = dir.file("arbiter_sidecar.so"), sidecar = dir.file("libarbiter_test_sidecar.so");
  fs::copy_file(built + "arbiter_sidecar.so", plugin);
  fs::copy_file(built + "libfixture_sidecar_exact.so", sidecar);
  const std::string file_hash = test::file_sha256(plugin);

  std::string identity;
  {
    const auto context = test::make_context(test::config_loading({plugin}));
    const PluginRecord* record = test::plugin_named(*context, "sidecar");
    REQUIRE(record != nullptr);
    REQUIRE(record->state == PluginState::loaded);
    CHECK(record->file_sha256 == file_hash);
    REQUIRE(record->companions.size() == 1);
    CHECK(record->companions[0].path == fs::canonical(sidecar).string());
    CHECK(record->companions[0].sha256 == test::file_sha256(sidecar));
    CHECK(record->sha256 != file_hash);  // the identity covers the sidecar too
    identity = record->sha256;
  }
  const std::string trust = "[[plugins.trust]]\npath = \"" + plugin + "\"\nsha256 = \"" + identity + "\"\n";
  {  // the operator trusts what `arbiter plugins` printed: the identity, not the file's hash alone
    const auto context = test::make_context(test::config_loading({plugin}, trust));
    CHECK(test::plugin_named(*context, "sidecar")->trust == ARB_PLUGIN_TRUST_CONFIG);
    const auto by_file_hash = test::make_context(test::config_loading(
        {plugin}, "[[plugins.trust]]\npath = \"" + plugin + "\"\nsha256 = \"" + file_hash + "\"\n"));
    CHECK(test::plugin_named(*by_file_hash, "sidecar")->trust == ARB_PLUGIN_TRUST_NONE);
  }
  // The sidecar is replaced (a new file renamed over it, as an update would); the plugin file is
  // untouched. Its identity changes, so the trust entry no longer matches and its kernel is gated.
  fs::copy_file(built + "libfixture_sidecar_skewed.so", dir.file("next.so"));
  fs::rename(dir.file("next.so"), sidecar);
  const auto context = test::make_context(test::config_loading({plugin}, trust));
  const PluginRecord* record = test::plugin_named(*context, "sidecar");
  REQUIRE(record != nullptr);
  CHECK(record->file_sha256 == file_hash);
  CHECK(record->sha256 != identity);
  CHECK(record->trust == ARB_PLUGIN_TRUST_NONE);
  CHECK(has_note(*context, "not trusted, its kernels are gated"));
  CHECK(context->gate().gated(*context->registry().find("sidecar.softmax")));
}

TEST_CASE("trust.system libraries a plugin links are not companions: a shipped plugin's identity is its file's hash") {
  for (const std::string& file : test::shipped_plugins()) {
    const auto context = test::make_context(test::config_loading({file}));
    for (const auto& record : context->registry().plugins()) {
      if (record->path != file) continue;
      CHECK_MESSAGE(record->companions.empty(), record->name, " maps ", record->companions.size(), " objects of its own");
      CHECK(record->sha256 == test::file_sha256(file));
    }
  }
}

TEST_CASE("trust.a library a kernel maps at launch, after its plugin was hashed, fails the kernel in the sandbox") {
  test::TempDir dir;
  const std::string built = std::string(ARBITER_TEST_FIXTURE_DIR) + "/sidecar/";
  const std::string plugin = dir.file("arbiter_late_sidecar.so");
  fs::copy_file(built + "arbiter_late_sidecar.so", plugin);
  fs::copy_file(built + "libfixture_sidecar_exact.so", dir.file("libarbiter_test_sidecar.so"));
  const auto context = test::make_context(test::config_loading({plugin}));
  const PluginRecord* record = test::plugin_named(*context, "late_sidecar");
  REQUIRE(record != nullptr);
  CHECK(record->companions.empty());  // nothing mapped while it loaded
  const Verdict v = context->gate().verdict(*context->registry().find("late_sidecar.softmax"),
                                           parse_problem(kSoftmax).problem);
  CAPTURE(v.detail);
  CHECK_FALSE(v.passed);
  CHECK(v.detail.find("during a launch: code outside the plugin's identity") != std::string::npos);
}

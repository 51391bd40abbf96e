// A folder of broken plugins next to the good ones: each broken one is rejected with its
// reason, and the host keeps working.
#include "common/failure.hpp"
#include "common/log.hpp"
#include "problem/op_table.hpp"
#include "problem/problem_text.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <cmath>
#include <cstdlib>
#include <map>

using namespace arbiter;

namespace {

// The fixture folder holds plugins that crash, hang or end the process when loaded: each is
// loaded first in a probe process, given 2 s here.
std::unique_ptr<Context> fixtures_and_shipped(const std::string& extra = "") {
  std::vector<std::string> paths = {ARBITER_TEST_FIXTURE_DIR};
  for (const std::string& p : test::shipped_plugins()) paths.push_back(p);
  return test::make_context(test::config_loading(paths, "probe_time_limit_s = 2\n" + extra));
}

// Runs softmax on a 1 x cols f32 row through dispatch.
void softmax_row(Context& context, int64_t cols, std::vector<float>& y) {
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) x[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i % 5);
  y.assign(static_cast<size_t>(cols), NAN);
  test::Tensor tx(x.data(), {1, cols}), ty(y.data(), {1, cols});
  arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
  args.x = &tx.t;
  args.y = &ty.t;
  Call call;
  build_call(ARB_OP_SOFTMAX, &args, call);
  context.run(call.problem, call.operands, nullptr);
}

}  // namespace

TEST_CASE("every broken plugin is rejected with its reason") {
  const auto context = fixtures_and_shipped();
  const std::map<std::string, std::string> expected = {
      {"no_entry", "no 'arbiter_plugin_entry' symbol"},
      {"wrong_major", "incompatible with the host's"},
      {"init_fails", "no suitable device present"},
      {"throws", "threw a C++ exception across the C ABI"},
      {"not_elf", "cannot load"},
      {"bad_kernel", "supports and launch are required"},
      {"too_small", "below the minimum"},
      {"zz_duplicate", "duplicate of plugin 'refuses_all'"},
      {"shadow_reference", "is the verification oracle's, built into"},
      // Never loaded here: a probe process loaded each first (under ASan a SIGSEGV is an exit).
      {"load_crash", "a probe process that loaded it first"},
      {"load_hang", "did not finish within 2 s and was killed"},
      {"load_exits", "exited early (status 3"},
  };
  for (const auto& [file, reason] : expected) {
    CAPTURE(file);
    const PluginRecord* record = test::plugin_at_path(*context, test::fixture_file(file));
    REQUIRE(record != nullptr);
    CHECK(record->state == PluginState::rejected);
    CHECK_MESSAGE(record->reason.find(reason) != std::string::npos, record->reason);
    CHECK(record->kernels.empty());
  }
  // The loader's own message is kept for a file that is not a library.
  const PluginRecord* not_elf = test::plugin_at_path(*context, test::fixture_file("not_elf"));
  CHECK(not_elf->reason.find("arbiter_not_elf.so") != std::string::npos);
  // ...and the plugin's own message for an init failure, with its status.
  const PluginRecord* init = test::plugin_at_path(*context, test::fixture_file("init_fails"));
  CHECK(init->reason.find("status 2") != std::string::npos);
}

TEST_CASE("the host is unharmed: good plugins load and dispatch still works") {
  const auto context = fixtures_and_shipped();
  for (const char* name : {"reference", "cpu", "refuses_all", "misbehaves", "newer_minor", "older_minor"}) {
    CAPTURE(name);
    const PluginRecord* record = test::plugin_named(*context, name);
    REQUIRE(record != nullptr);
    CHECK(record->state == PluginState::loaded);
  }
  std::vector<float> y;
  softmax_row(*context, 16, y);  // refuses_all ranks first and refuses; cpu.softmax runs
  float sum = 0;
  for (float v : y) sum += v;
  CHECK(sum == doctest::Approx(1.0f));
  CHECK(y[4] > y[0]);
}

TEST_CASE("a supports() that refuses everything is never chosen, and explain says why") {
  const auto context = fixtures_and_shipped();
  float x[16] = {0}, out[16] = {0};
  test::Tensor tx(x, {1, 16}), ty(out, {1, 16});
  arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
  args.x = &tx.t;
  args.y = &ty.t;
  Call call;
  build_call(ARB_OP_SOFTMAX, &args, call);
  const Decision decision = context->dispatcher().decide(call.problem, Dispatcher::Mode::explain);
  REQUIRE(decision.kernel != nullptr);
  CHECK(decision.kernel->name == "cpu.softmax");
  const std::string report = context->dispatcher().explain(call.problem);
  CHECK(report.find("refuses_all.softmax") != std::string::npos);
  CHECK(report.find("refuses_all refuses everything") != std::string::npos);
  CHECK(report.find("rejected") != std::string::npos);  // rejected plugins are listed too
}

TEST_CASE("the verification gate keeps kernels that fail or throw at launch out of dispatch") {
  const auto context = fixtures_and_shipped();
  std::vector<float> y;
  softmax_row(*context, 7, y);  // misbehaves.softmax_fails ranks first, fails the gate
  float sum = 0;
  for (float v : y) sum += v;
  CHECK(sum == doctest::Approx(1.0f));
  const arb_problem p = parse_problem("softmax f32 rows=1 cols=7").problem;
  const std::optional<Verdict> verdict = context->gate().known_verdict(*context->registry().find("misbehaves.softmax_fails"), p);
  REQUIRE(verdict.has_value());
  CHECK(verdict->failed("launch_failed"));
  CHECK(verdict->detail.find("misbehaves: deliberate failure") != std::string::npos);
}

TEST_CASE("a kernel that fails or throws at launch gives ARB_ERR_KERNEL with its message") {
  // Without the gate (the fixture trusted by path and hash), the kernel runs and its failure
  // reaches the caller.
  const auto context = fixtures_and_shipped(test::trusting({test::fixture_file("misbehaves")}));
  std::vector<float> y;
  try {
    softmax_row(*context, 7, y);
    FAIL("expected a failure");
  } catch (const Failure& e) {
    CHECK(e.status() == ARB_ERR_KERNEL);
    CHECK(std::string(e.what()).find("misbehaves: deliberate failure") != std::string::npos);
    CHECK(std::string(e.what()).find("misbehaves.softmax_fails") != std::string::npos);
  }
  try {
    softmax_row(*context, 9, y);
    FAIL("expected a failure");
  } catch (const Failure& e) {
    CHECK(e.status() == ARB_ERR_KERNEL);
    CHECK(std::string(e.what()).find("threw") != std::string::npos);
  }
  softmax_row(*context, 8, y);  // still fine for other widths
  CHECK(y[0] == y[0]);
}

TEST_CASE("host workspace reaches a kernel that asks for it") {
  const auto context = fixtures_and_shipped();
  std::vector<float> y;
  softmax_row(*context, 33, y);
  float sum = 0;
  for (float v : y) sum += v;
  CHECK(sum == doctest::Approx(1.0f));
  std::vector<float> x(33);
  test::Tensor tx(x.data(), {1, 33}), ty(y.data(), {1, 33});
  arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
  args.x = &tx.t;
  args.y = &ty.t;
  Call call;
  build_call(ARB_OP_SOFTMAX, &args, call);
  CHECK(context->dispatcher().select(call.problem).kernel->name == "needs_workspace.softmax");
  CHECK(context->dispatcher().select(call.problem).workspace_bytes == 33 * sizeof(float));
}

TEST_CASE("config disables a plugin without opening it, or enables only some") {
  {
    const auto context = test::make_context(test::config_loading(test::shipped_plugins(), "disable = [\"cpu\"]\n"));
    const PluginRecord* cpu = test::plugin_named(*context, "cpu");
    REQUIRE(cpu != nullptr);
    CHECK(cpu->state == PluginState::disabled);
    CHECK(cpu->reason.find("plugins.disable") != std::string::npos);
    CHECK(cpu->version.empty());  // never opened
    CHECK(context->registry().find("cpu.softmax") == nullptr);
  }
  {
    const auto context = test::make_context(test::config_loading(test::shipped_plugins(), "enable = [\"reference\"]\n"));
    CHECK(test::plugin_named(*context, "reference")->state == PluginState::loaded);
    CHECK(test::plugin_named(*context, "cpu")->state == PluginState::disabled);
  }
}

TEST_CASE("ARBITER_PLUGIN_PATH is searched, duplicates of one file are listed once, missing paths noted") {
  const std::string list = std::string(ARBITER_TEST_PLUGIN_DIR) + ":/nonexistent/arbiter/plugins:" + ARBITER_TEST_PLUGIN_DIR;
  const auto context = [&] {
    const test::ScopedEnv env("ARBITER_PLUGIN_PATH", list);
    return test::make_context("[plugins]\nsearch_default_paths = true\n");
  }();
  size_t cpus = 0;
  for (const auto& p : context->registry().plugins()) cpus += p->name == "cpu";
  CHECK(cpus == 1);  // the env folder, again in the env and the install folder: one file
  CHECK(test::plugin_named(*context, "cpu")->state == PluginState::loaded);
  bool noted = false;
  for (const std::string& note : context->registry().notes()) noted |= note.find("/nonexistent") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("the public API lists rejected plugins with reasons") {
  const std::string toml = test::config_loading({test::fixture_file("throws")});
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = toml.c_str();
  arb_context ctx = nullptr;
  REQUIRE(arb_context_create(&options, &ctx) == ARB_OK);
  size_t count = 0;
  REQUIRE(arb_plugin_count(ctx, &count) == ARB_OK);
  REQUIRE(count == 3);  // the oracle, the composite ops' chains (both built in), the file
  int rejected = 0, loaded = 0, chains = 0;
  std::string chain_path, oracle_path;
  for (size_t i = 0; i < count; ++i) {
    arb_plugin_info info = ARB_PLUGIN_INFO_INIT;
    REQUIRE(arb_plugin_get_info(ctx, i, &info) == ARB_OK);
    if (std::string(info.status) == "rejected") {
      ++rejected;
      CHECK(std::string(info.reason).find("threw") != std::string::npos);
      CHECK(std::string(info.path).find("arbiter_throws.so") != std::string::npos);
    } else if (std::string(info.name) == "chain") {
      ++chains;
      CHECK(info.trust == ARB_PLUGIN_TRUST_HOST);
      chain_path = info.path;
      CHECK(info.kernel_count == 2);  // chain.mlp, chain.qkv (no CUDA device here)
    } else {
      ++loaded;
      CHECK(std::string(info.name) == "reference");
      CHECK(info.provenance == ARB_PROVENANCE_REFERENCE);
      oracle_path = info.path;
      CHECK(info.kernel_count == 8);  // gemm, rmsnorm, softmax, swiglu, rope, attention, mlp, qkv
      arb_kernel_info kernel = ARB_KERNEL_INFO_INIT;
      REQUIRE(arb_kernel_get_info(ctx, i, 0, &kernel) == ARB_OK);
      CHECK(std::string(kernel.name).rfind("reference.", 0) == 0);
    }
  }
  CHECK(rejected == 1);
  CHECK(loaded == 1);
  CHECK(chains == 1);
  // Both built in: the file of the code that holds them (libarbiter, or a program linking it
  // statically), "<file> (built in)".
  CHECK(chain_path == oracle_path);
  CHECK(chain_path.find(" (built in)") != std::string::npos);
  CHECK(arb_context_destroy(ctx) == ARB_OK);
}

TEST_CASE("plugins.probe and plugins.probe_time_limit_s are read and checked") {
  const Config config = parse_config("[plugins]\nprobe = false\nprobe_time_limit_s = 5\n", "<t>", "");
  CHECK_FALSE(config.plugins.probe);
  CHECK(config.plugins.probe_time_limit_s == 5);
  CHECK(parse_config("", "<t>", "").plugins.probe);
  for (const char* bad : {"[plugins]\nprobe_time_limit_s = 0\n", "[plugins]\nprobe_time_limit_s = 3601\n",
                          "[plugins]\nprobe = 1\n"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_config(bad, "<t>", ""), Failure);
  }
}

TEST_CASE("a plugin with nothing to offer on this host is info, a broken one a warning") {
  // init_fails refuses with ARB_ERR_UNSUPPORTED (as a CUDA plugin does without a GPU); throws
  // breaks the ABI. Each context logs its rejections: only the second deserves a warning.
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  spdlog::logger& log = logger();
  const spdlog::level::level_enum level_before = log.level();
  log.sinks().push_back(sink);
  log.set_level(spdlog::level::info);
  test::make_context(test::config_loading({test::fixture_file("init_fails"), test::fixture_file("throws")}));
  log.sinks().pop_back();
  log.set_level(level_before);
  std::map<std::string, spdlog::level::level_enum> level_of;
  for (const spdlog::details::log_msg_buffer& m : sink->last_raw()) {
    const std::string text(m.payload.begin(), m.payload.end());
    for (const char* name : {"arbiter_init_fails.so", "arbiter_throws.so"})
      if (text.find(name) != std::string::npos && text.find("rejected") != std::string::npos) level_of[name] = m.level;
  }
  CHECK(level_of.at("arbiter_init_fails.so") == spdlog::level::info);
  CHECK(level_of.at("arbiter_throws.so") == spdlog::level::warn);
}

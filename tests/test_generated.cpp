// Generated kernels without a GPU: manifests, launch formulas, constraints, and the NVRTC
// compile path for real (NVRTC needs no GPU), with its cache; the generated plugin refuses
// to load without a device and says why.
#include "kernel_manifest.hpp"
#include "launch_geometry.hpp"
#include "nvrtc_compiler.hpp"

#include "arbiter_base/sha256.hpp"
#include "problem/problem_text.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace arbiter;
using namespace arbiter::generated;
namespace fs = std::filesystem;

namespace {

const std::string kKernels = std::string(ARBITER_TEST_SOURCE_DIR) + "/plugins/generated/kernels";
const std::string kCheaters = std::string(ARBITER_TEST_SOURCE_DIR) + "/tests/fixtures/generated_cheaters";
const std::string kBroken = std::string(ARBITER_TEST_SOURCE_DIR) + "/tests/fixtures/generated_broken";


// A manifest written next to a source, from a template with one line changed.
std::string write_manifest(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/kernel.toml";
  std::ofstream(path) << text;
  return path;
}

std::string manifest_error(const std::string& path) {
  try {
    load_manifest(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

arb_problem cuda_problem(const std::string& text) { return parse_problem(text + " device=cuda").problem; }

}  // namespace

TEST_CASE("launch formulas: arithmetic, functions, problem fields, errors") {
  const arb_problem p = cuda_problem("gemm f32 m=3 n=1000 k=64");
  CHECK(Formula::parse("ceil_div(n, 8)").evaluate(p) == 125);
  CHECK(Formula::parse("m * (k + 2) - 1").evaluate(p) == 197);
  CHECK(Formula::parse("max(m, 16) % 5 + min(n, 7) / 2").evaluate(p) == 1 + 3);
  CHECK(Formula::parse("k * dtype_bytes").evaluate(p) == 256);
  CHECK(Formula::parse(" 256 ").evaluate(p) == 256);
  CHECK(Formula::parse("n / 0").evaluate(p) == 0);
  CHECK_THROWS_WITH_AS(Formula::parse("ceil_div(n 8)"), doctest::Contains("expected ','"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Formula::parse("rowz"), doctest::Contains("unknown name 'rowz'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Formula::parse("(m"), doctest::Contains("expected ')'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Formula::parse("m m"), doctest::Contains("column 3"), std::invalid_argument);
}

TEST_CASE("the shipped manifests load, with their constraints") {
  for (const char* name : {"softmax_rowblock", "rmsnorm_rowblock", "decode_gemm_nt"}) {
    CAPTURE(name);
    const Manifest m = load_manifest(kKernels + "/" + name + ".toml");
    CHECK(m.name == name);
    CHECK(m.dtypes.size() == 3);
    CHECK(m.provenance.source_sha256 == sha256_hex(m.source));
    CHECK(!m.shapes.empty());
    for (const std::string& shape : m.shapes) CHECK(parse_problem(shape).problem.op == m.op);
  }
  const Manifest gemm = load_manifest(kKernels + "/decode_gemm_nt.toml");
  std::string why;
  CHECK(satisfies(gemm, cuda_problem("gemm bf16 m=16 n=4096 k=4096 tb=1"), &why));
  CHECK_FALSE(satisfies(gemm, cuda_problem("gemm bf16 m=128 n=4096 k=4096 tb=1"), &why));
  CHECK(why == "m above 64");
  CHECK_FALSE(satisfies(gemm, cuda_problem("gemm bf16 m=16 n=4096 k=4096"), &why));
  CHECK(why == "trans_b must be 1");
  CHECK_FALSE(satisfies(gemm, parse_problem("gemm bf16 m=16 n=64 k=64 tb=1").problem, &why));
  CHECK(why == "CUDA tensors only");
  CHECK(gemm.grid[0].evaluate(cuda_problem("gemm bf16 m=16 n=4096 k=4096 tb=1")) == 512);
  CHECK(gemm.grid[1].evaluate(cuda_problem("gemm bf16 m=16 n=4096 k=4096 tb=1")) == 16);
}

TEST_CASE("manifest errors name the file, line and column") {
  test::TempDir dir;
  const std::string source = "extern \"C\" __global__ void k() {}\n";
  std::ofstream(dir.path + "/k.cu") << source;
  const std::string good = "name = \"k\"\nop = \"softmax\"\nsignature = \"softmax.v1\"\nentry = \"k\"\nsource = \"k.cu\"\n"
                           "dtypes = [\"f32\"]\n[launch]\ngrid = [\"rows\"]\nblock = [\"32\"]\n[provenance]\n"
                           "generator = \"test\"\ndate = \"2026-11-30\"\nsource_sha256 = \"" + sha256_hex(source) + "\"\n";
  CHECK(manifest_error(write_manifest(dir.path, good)).empty());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return manifest_error(write_manifest(dir.path, text));
  };
  CHECK(with("op = \"softmax\"\n", "op = \"softmax\"\ncolour = 1\n").find("kernel.toml:3:1: unknown key 'colour'") != std::string::npos);
  CHECK(with("softmax.v1", "gemm.v1").find("op softmax uses signature 'softmax.v1'") != std::string::npos);
  CHECK(with("[\"rows\"]", "[\"rows +\"]").find("launch.grid") == std::string::npos);  // the formula's own message:
  CHECK(with("[\"rows\"]", "[\"rows +\"]").find("expected a number") != std::string::npos);
  CHECK(with("[\"f32\"]", "[\"f64\"]").find("unknown dtype 'f64'") != std::string::npos);
  CHECK(with(sha256_hex(source), std::string(64, '0')).find("a changed kernel must be declared again") != std::string::npos);
  CHECK(with("generator = \"test\"\n", "").find("'provenance.generator' is missing") != std::string::npos);
  CHECK(with("source = \"k.cu\"", "source = \"missing.cu\"").find("cannot read") != std::string::npos);
}

TEST_CASE("NVRTC compiles every shipped kernel for sm_90a and sm_80, and caches it") {
  test::TempDir cache;
  for (const char* name : {"softmax_rowblock", "rmsnorm_rowblock", "decode_gemm_nt"}) {
    const Manifest m = load_manifest(kKernels + "/" + name + ".toml");
    for (const char* arch : {"sm_90a", "sm_80"}) {
      for (int32_t dtype : m.dtypes) {
        CAPTURE(name);
        CAPTURE(arch);
        CAPTURE(dtype);
        const CompileResult first = compile(m, dtype, arch, cache.path);
        CAPTURE(first.log);
        REQUIRE(first.ok);
        CHECK_FALSE(first.from_cache);
        CHECK(first.cubin.size() > 1000);
        CHECK(first.cubin.compare(0, 4, "\x7f" "ELF") == 0);
        const CompileResult again = compile(m, dtype, arch, cache.path);
        CHECK(again.ok);
        CHECK(again.from_cache);
        CHECK(again.key == first.key);
        CHECK(again.cubin == first.cubin);
      }
    }
  }
  // The key covers the dtype and the architecture.
  const Manifest m = load_manifest(kKernels + "/softmax_rowblock.toml");
  CHECK(compile(m, ARB_DTYPE_F32, "sm_90a", "").key != compile(m, ARB_DTYPE_BF16, "sm_90a", "").key);
  CHECK(compile(m, ARB_DTYPE_F32, "sm_90a", "").key != compile(m, ARB_DTYPE_F32, "sm_80", "").key);
  CHECK(arch_for(9, 0) == "sm_90a");
  CHECK(arch_for(8, 6) == "sm_86");
}

TEST_CASE("the CUDA cheating gallery compiles, a broken kernel reports NVRTC's log") {
  for (const auto& entry : fs::directory_iterator(kCheaters)) {
    if (entry.path().extension() != ".toml") continue;
    CAPTURE(entry.path().string());
    const Manifest m = load_manifest(entry.path().string());
    const CompileResult r = compile(m, ARB_DTYPE_F32, "sm_90a", "");
    CAPTURE(r.log);
    CHECK(r.ok);
  }
  const Manifest broken = load_manifest(kBroken + "/broken.toml");
  const CompileResult r = compile(broken, ARB_DTYPE_F32, "sm_90a", "");
  CHECK_FALSE(r.ok);
  CHECK(r.log.find("undefined_name") != std::string::npos);
  CHECK(r.cubin.empty());
}

TEST_CASE("without a GPU the generated plugin is rejected with the reason") {
  const auto context = test::make_context(test::config_loading({test::plugin_file("generated")}));
  const PluginRecord* plugin = test::plugin_named(*context, "generated");
  REQUIRE(plugin != nullptr);
  if (context->devices().cuda != nullptr) {
    CHECK(plugin->state == PluginState::loaded);  // on a GPU machine it loads
    return;
  }
  CHECK(plugin->state == PluginState::rejected);
  CHECK(plugin->reason.find("no CUDA device") != std::string::npos);
  CHECK(context->devices().cuda_unavailable.find("no CUDA device") != std::string::npos);
  // The context still serves the CPU, and says why a CUDA problem cannot run.
  const std::string report = context->dispatcher().explain(parse_problem("softmax f32 rows=2 cols=8 device=cuda").problem);
  CHECK(report.find("kernel:  none") != std::string::npos);
  CHECK(context->dispatcher().decide(parse_problem("softmax f32 rows=2 cols=8").problem, Dispatcher::Mode::dispatch).kernel != nullptr);
}

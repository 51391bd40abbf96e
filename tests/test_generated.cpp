// Generated kernels without a GPU: manifests, launch formulas (checked arithmetic, a nesting
// limit, CUDA's launch limits), constraints, and the NVRTC compile path for real (NVRTC needs
// no GPU), with its cache; the generated plugin refuses to load without a device and says why.
#include "kernel_manifest.hpp"
#include "launch_geometry.hpp"
#include "nvrtc_compiler.hpp"

#include "arbiter_base/sha256.hpp"
#include "problem/problem_text.hpp"
#include "test_support.hpp"

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

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

const std::string kMinimalSource = "extern \"C\" __global__ void k() {}\n";

// The text of a minimal softmax manifest, its source (kMinimalSource) written beside it in `dir`.
std::string minimal_manifest(const std::string& dir) {
  std::ofstream(dir + "/k.cu") << kMinimalSource;
  return "name = \"k\"\nop = \"softmax\"\nsignature = \"softmax.v1\"\nentry = \"k\"\nsource = \"k.cu\"\n"
         "dtypes = [\"f32\"]\n[launch]\ngrid = [\"rows\"]\nblock = [\"32\"]\n[provenance]\n"
         "generator = \"test\"\ndate = \"2026-11-30\"\nsource_sha256 = \"" + sha256_hex(kMinimalSource) + "\"\n";
}

// The text with its one `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  return text.replace(text.find(from), from.size(), to);
}

// Why a formula has no value for the problem ("" if it has one).
std::string evaluation_error(const std::string& formula, const arb_problem& p) {
  std::string why;
  return Formula::parse(formula).evaluate(p, why) ? "" : why;
}

// Why formulas give no launch for the problem ("" if CUDA would take it); missing dimensions are 1.
std::string launch_error(const std::vector<std::string>& grid, const std::vector<std::string>& block,
                         const std::string& shared_bytes, const arb_problem& p) {
  Formula g[3], b[3];
  for (size_t i = 0; i < 3; ++i) {
    g[i] = Formula::parse(i < grid.size() ? grid[i] : "1");
    b[i] = Formula::parse(i < block.size() ? block[i] : "1");
  }
  std::string why;
  return launch_dims(g, b, Formula::parse(shared_bytes), p, why) ? "" : why;
}

constexpr int64_t kTwoTo40 = int64_t{1} << 40;

}  // namespace

TEST_CASE("launch formulas: arithmetic, functions, problem fields, errors") {
  const arb_problem p = cuda_problem("gemm f32 m=3 n=1000 k=64");
  CHECK(Formula::parse("ceil_div(n, 8)").evaluate(p) == 125);
  CHECK(Formula::parse("m * (k + 2) - 1").evaluate(p) == 197);
  CHECK(Formula::parse("max(m, 16) % 5 + min(n, 7) / 2").evaluate(p) == 1 + 3);
  CHECK(Formula::parse("k * dtype_bytes").evaluate(p) == 256);
  CHECK(Formula::parse(" 256 ").evaluate(p) == 256);
  CHECK_THROWS_WITH_AS(Formula::parse("n / 0").evaluate(p), doctest::Contains("divides by zero"), std::range_error);
  CHECK_THROWS_WITH_AS(Formula::parse("ceil_div(n 8)"), doctest::Contains("expected ','"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Formula::parse("rowz"), doctest::Contains("unknown name 'rowz'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Formula::parse("(m"), doctest::Contains("expected ')'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Formula::parse("m m"), doctest::Contains("column 3"), std::invalid_argument);
}

TEST_CASE("launch formulas: nesting past the limit is a parse error, not a stack overflow") {
  const arb_problem p = cuda_problem("gemm f32 m=3 n=1000 k=64");
  const std::string limit = std::to_string(Formula::kMaxNesting);
  // 200,000 parentheses, and 200,000 nested calls: refused at the first level past the limit.
  std::string calls;
  for (int i = 0; i < 200000; ++i) calls += "max(1, ";
  for (const std::string& deep : {std::string(200000, '(') + "m" + std::string(200000, ')'),
                                  calls + "m" + std::string(200000, ')')}) {
    std::string error;
    try {
      Formula::parse(deep);
    } catch (const std::invalid_argument& e) {
      error = e.what();
    }
    CHECK(error.find("nested deeper than " + limit + " levels (the limit)") != std::string::npos);
    CHECK(error.size() < 300);  // the formula quoted in part, not in full
  }
  // At the limit it parses and evaluates, with the most values pending on every level.
  const int depth = Formula::kMaxNesting;
  CHECK(Formula::parse(std::string(depth, '(') + "m" + std::string(depth, ')')).evaluate(p) == 3);
  std::string widest;
  for (int i = 0; i < depth; ++i) widest += "1 + 0 * max(3, ";
  CHECK(Formula::parse(widest + "m" + std::string(depth, ')')).evaluate(p) == 1);
  const std::string column = "at column " + std::to_string(depth + 1) + ": parentheses";  // the first one too many
  CHECK_THROWS_WITH_AS(Formula::parse(std::string(depth + 1, '(') + "m" + std::string(depth + 1, ')')),
                       doctest::Contains(column.c_str()), std::invalid_argument);
  // A long flat formula is not nested: 200,000 terms evaluate (no recursion over its length).
  std::string flat = "m";
  for (int i = 0; i < 199999; ++i) flat += " + 1";
  CHECK(Formula::parse(flat).evaluate(p) == 3 + 199999);
}

TEST_CASE("launch formulas: an integer literal beyond int64 is a parse error") {
  const arb_problem p = cuda_problem("gemm f32 m=3 n=1000 k=64");
  CHECK_THROWS_WITH_AS(Formula::parse("99999999999999999999"),
                       doctest::Contains("at column 1: the number 99999999999999999999 does not fit in int64 "
                                         "(at most 9223372036854775807)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(Formula::parse("m * 9223372036854775808"), doctest::Contains("at column 5: the number"),
                       std::invalid_argument);
  CHECK(Formula::parse("9223372036854775807").evaluate(p) == INT64_MAX);
  CHECK(Formula::parse("00000000000000000000000000042").evaluate(p) == 42);
}

TEST_CASE("launch formulas: overflow and division by zero are errors naming the formula, operation and fields") {
  arb_problem p = cuda_problem("gemm f32 m=3 n=1000 k=64");
  const std::string int64_min = "(0 - 9223372036854775807 - 1)";
  CHECK(evaluation_error(int64_min + " / (0 - 1)", p) ==
        "formula '(0 - 9223372036854775807 - 1) / (0 - 1)': '(0 - 9223372036854775807 - 1) / (0 - 1)' is "
        "-9223372036854775808 / -1, which overflows int64");
  CHECK(evaluation_error("ceil_div(" + int64_min + ", 0 - 1)", p).find("is ceil_div(-9223372036854775808, -1), which "
                                                                      "overflows int64") != std::string::npos);
  CHECK(Formula::parse(int64_min + " % (0 - 1)").evaluate(p) == 0);  // exact, where the CPU would trap
  CHECK(Formula::parse(int64_min).evaluate(p) == INT64_MIN);
  CHECK(evaluation_error("n / (m - 3)", p) ==
        "formula 'n / (m - 3)' with m = 3, n = 1000: 'n / (m - 3)' is 1000 / 0, which divides by zero");
  CHECK(evaluation_error("k + n % (m - 3)", p).find("'n % (m - 3)' is 1000 % 0, which divides by zero") != std::string::npos);
  CHECK(evaluation_error("ceil_div(n, m - 3)", p).find("is ceil_div(1000, 0), which divides by zero") != std::string::npos);
  CHECK(evaluation_error("m + 9223372036854775807", p).find("is 3 + 9223372036854775807, which overflows") != std::string::npos);
  CHECK(evaluation_error("0 - 9223372036854775807 - m", p).find("is -9223372036854775807 - 3, which overflows") !=
        std::string::npos);
  CHECK(evaluation_error("ceil_div(m + 9223372036854775804, 8)", p).empty());

  // A large problem field: m = 2^40 makes m * m overflow, as a launch would see it.
  p.m = kTwoTo40;
  CHECK(evaluation_error("ceil_div(n, 8) * m * m * m", p) ==
        "formula 'ceil_div(n, 8) * m * m * m' with m = 1099511627776, n = 1000: 'ceil_div(n, 8) * m * m' is "
        "137438953472000 * 1099511627776, which overflows int64");
  CHECK_THROWS_WITH_AS(Formula::parse("m * m * dtype_bytes").evaluate(p),
                       doctest::Contains("with m = 1099511627776, dtype_bytes = 4: 'm * m' is"), std::range_error);
  CHECK(Formula::parse("ceil_div(m, 8)").evaluate(p) == kTwoTo40 / 8);

  // ceil_div is the exact ceiling for any signs, with no a + b - 1 to overflow.
  CHECK(Formula::parse("ceil_div(9223372036854775807, 2)").evaluate(p) == int64_t{1} << 62);
  CHECK(Formula::parse("ceil_div(7, 2)").evaluate(p) == 4);
  CHECK(Formula::parse("ceil_div(8, 2)").evaluate(p) == 4);
  CHECK(Formula::parse("ceil_div(0 - 7, 2)").evaluate(p) == -3);
  CHECK(Formula::parse("ceil_div(7, 0 - 2)").evaluate(p) == -3);
  CHECK(Formula::parse("ceil_div(0 - 7, 0 - 2)").evaluate(p) == 4);
}

TEST_CASE("launch geometry: dimensions and shared memory within what CUDA launches") {
  arb_problem p = cuda_problem("gemm f32 m=3 n=1000 k=64");
  Formula grid[3] = {Formula::parse("ceil_div(n, 8)"), Formula::parse("m"), Formula::parse("1")};
  Formula block[3] = {Formula::parse("256"), Formula::parse("1"), Formula::parse("1")};
  std::string why;
  const std::optional<LaunchDims> dims = launch_dims(grid, block, Formula::parse("k * dtype_bytes"), p, why);
  REQUIRE(dims);
  CHECK(dims->grid[0] == 125);
  CHECK(dims->grid[1] == 3);
  CHECK(dims->grid[2] == 1);
  CHECK(dims->block[0] == 256);
  CHECK(dims->shared_bytes == 256);

  CHECK(launch_error({"m - 3"}, {"32"}, "0", p) == "grid x is 0 (formula 'm - 3'): CUDA takes 1 to 2147483647");
  CHECK(launch_error({"0 - m"}, {"32"}, "0", p) == "grid x is -3 (formula '0 - m'): CUDA takes 1 to 2147483647");
  CHECK(launch_error({"2147483647", "65535", "65535"}, {"32"}, "0", p).empty());
  CHECK(launch_error({"2147483648"}, {"32"}, "0", p).find("grid x is 2147483648") == 0);
  CHECK(launch_error({"1", "65536"}, {"32"}, "0", p).find("grid y is 65536") == 0);
  CHECK(launch_error({"1", "1", "n * 66"}, {"32"}, "0", p) == "grid z is 66000 (formula 'n * 66'): CUDA takes 1 to 65535");
  CHECK(launch_error({"1"}, {"1024"}, "0", p).empty());
  CHECK(launch_error({"1"}, {"1025"}, "0", p) == "block x is 1025 (formula '1025'): CUDA takes 1 to 1024");
  CHECK(launch_error({"1"}, {"1", "1", "65"}, "0", p).find("block z is 65") == 0);
  CHECK(launch_error({"1"}, {"1", "0"}, "0", p).find("block y is 0") == 0);
  CHECK(launch_error({"1"}, {"32", "64"}, "0", p) == "block 32 x 64 x 1 is 2048 threads: CUDA takes at most 1024");
  CHECK(launch_error({"1"}, {"32"}, "227 * 1024", p).empty());
  CHECK(launch_error({"1"}, {"32"}, "227 * 1024 + 1", p) ==
        "shared_bytes is 232449 (formula '227 * 1024 + 1'): CUDA takes 0 to 232448");
  CHECK(launch_error({"1"}, {"32"}, "m - 4", p).find("shared_bytes is -1") == 0);
  p.m = kTwoTo40;
  CHECK(launch_error({"1", "m * m"}, {"32"}, "0", p).find("grid y: formula 'm * m' with m = 1099511627776: 'm * m' is") ==
        0);
  CHECK(launch_error({"1"}, {"32"}, "n / (m - m)", p).find("shared_bytes: formula 'n / (m - m)'") == 0);
}

TEST_CASE("the generated kernel refuses a problem its launch formulas give no launch for") {
  test::TempDir dir;
  const std::string text = replaced(replaced(minimal_manifest(dir.path), "[\"rows\"]", "[\"rows * rows * rows\"]"),
                                    "[\"32\"]", "[\"cols\"]");
  const Manifest m = load_manifest(write_manifest(dir.path, text));
  arb_problem p = cuda_problem("softmax f32 rows=4 cols=64");
  std::string why;
  CHECK(satisfies(m, p, &why));
  p.rows = kTwoTo40;  // supports() says no, with the reason, so dispatch never launches it
  CHECK_FALSE(satisfies(m, p, &why));
  CHECK(why == "no launch for it: grid x: formula 'rows * rows * rows' with rows = 1099511627776: 'rows * rows' is "
               "1099511627776 * 1099511627776, which overflows int64");
  // A launch regardless evaluates the same formula: an exception the plugin's edge turns into
  // ARB_ERR_KERNEL with this message, never a wrapped grid.
  CHECK_THROWS_WITH_AS(m.grid[0].evaluate(p), doctest::Contains("overflows int64"), std::range_error);
  p.rows = 4;
  p.cols = 2048;
  CHECK_FALSE(satisfies(m, p, &why));
  CHECK(why == "no launch for it: block x is 2048 (formula 'cols'): CUDA takes 1 to 1024");
  // A literal beyond int64 is the manifest's error, with file, line and column.
  const std::string bad = manifest_error(write_manifest(dir.path, replaced(text, "[\"cols\"]", "[\"99999999999999999999\"]")));
  CHECK(bad.find("kernel.toml:9:") != std::string::npos);
  CHECK(bad.find("does not fit in int64") != std::string::npos);
}

TEST_CASE("the shipped manifests load, with their constraints") {
  for (const char* name : {"softmax_rowblock", "rmsnorm_rowblock", "decode_gemm_nt", "decode_attention"}) {
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
  const Manifest attention = load_manifest(kKernels + "/decode_attention.toml");
  const arb_problem decode = cuda_problem("attention bf16 batch=4 q=3 kv=1024 heads=32 kvheads=8 dim=128 causal=1");
  CHECK(satisfies(attention, decode, &why));
  CHECK(attention.grid[0].evaluate(decode) == 4 * 32);
  CHECK(attention.grid[1].evaluate(decode) == 3);
  CHECK_FALSE(satisfies(attention, cuda_problem("attention bf16 q=1 kv=64 heads=2 dim=320"), &why));
  CHECK(why == "head_dim above 256");
}

TEST_CASE("manifest errors name the file, line and column") {
  test::TempDir dir;
  const std::string good = minimal_manifest(dir.path);
  CHECK(manifest_error(write_manifest(dir.path, good)).empty());
  auto with = [&](const std::string& from, const std::string& to) {
    return manifest_error(write_manifest(dir.path, replaced(good, from, to)));
  };
  CHECK(with("op = \"softmax\"\n", "op = \"softmax\"\ncolour = 1\n").find("kernel.toml:3:1: unknown key 'colour'") != std::string::npos);
  CHECK(with("softmax.v1", "gemm.v1").find("op softmax uses signature 'softmax.v1'") != std::string::npos);
  CHECK(with("[\"rows\"]", "[\"rows +\"]").find("launch.grid") == std::string::npos);  // the formula's own message:
  CHECK(with("[\"rows\"]", "[\"rows +\"]").find("expected a number") != std::string::npos);
  CHECK(with("[\"f32\"]", "[\"f64\"]").find("unknown dtype 'f64'") != std::string::npos);
  CHECK(with(sha256_hex(kMinimalSource), std::string(64, '0')).find("a changed kernel must be declared again") != std::string::npos);
  CHECK(with("generator = \"test\"\n", "").find("'provenance.generator' is missing") != std::string::npos);
  CHECK(with("source = \"k.cu\"", "source = \"missing.cu\"").find("cannot read") != std::string::npos);
}

TEST_CASE("NVRTC compiles every shipped kernel for sm_90a and sm_80, and caches it") {
  test::TempDir cache;
  for (const char* name : {"softmax_rowblock", "rmsnorm_rowblock", "decode_gemm_nt", "decode_attention"}) {
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
  // Without a driver at all the reason says so, not CUDA's "driver version is insufficient".
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(driver);
  } else {
    CHECK(plugin->reason.find("no CUDA driver is installed") != std::string::npos);
    CHECK(context->devices().cuda_unavailable.find("no CUDA driver is installed") != std::string::npos);
  }
  // The context still serves the CPU, and says why a CUDA problem cannot run.
  const std::string report = context->dispatcher().explain(parse_problem("softmax f32 rows=2 cols=8 device=cuda").problem);
  CHECK(report.find("kernel:  none") != std::string::npos);
  CHECK(context->dispatcher().decide(parse_problem("softmax f32 rows=2 cols=8").problem, Dispatcher::Mode::dispatch).kernel != nullptr);
}

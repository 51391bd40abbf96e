// The openblas plugin loads libopenblas at its first use when a memo of an earlier load
// describes it (plugins/openblas/openblas_memo.hpp): a context then does not map the library,
// yet openblas.sgemm is verified and runs; a memo that says other than the library is caught
// before any launch, with the reason; a library someone other than root could have written is
// never left to a later load. Each scenario runs in a fresh process (this program with
// --child), since a process loads OpenBLAS once. Exit 77 (skipped) without the plugin.
#define DOCTEST_CONFIG_IMPLEMENT
#include "doctest_main.hpp"
#include "shell_command.hpp"

#include <arbiter/arbiter.h>
#include <dlpack/dlpack.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const std::string plugin = std::string(ARBITER_TEST_PLUGIN_DIR) + "/arbiter_openblas.so";

bool libopenblas_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libopenblas") != std::string::npos) return true;
  return false;
}

// ---- the child: one context with the openblas plugin alone (and the built-in oracle) -----
// Not probed: a probe process would load the plugin first, and remember OpenBLAS itself.

DLTensor matrix(float* data, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = 2;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  return t;
}

int child() {
  const std::string config = "log_level = \"off\"\n[plugins]\nsearch_default_paths = false\nprobe = false\npaths = [\"" + plugin +
                             "\"]\n[[dispatch.override]]\nop = \"gemm\"\nkernel = \"openblas.sgemm\"\n";
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = config.c_str();
  arb_context ctx = nullptr;
  if (arb_context_create(&options, &ctx) != ARB_OK) {
    std::printf("create failed: %s\n", arb_last_error());
    return 1;
  }
  std::printf("mapped after create: %d\n", libopenblas_mapped() ? 1 : 0);

  const int64_t m = 17, n = 12, k = 9;
  std::vector<float> a(m * k), b(k * n), d(m * n, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5) / 4;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i * 5 % 13) - 6) / 8;
  int64_t sa[2] = {m, k}, sb[2] = {k, n}, sd[2] = {m, n};
  DLTensor ta = matrix(a.data(), sa), tb = matrix(b.data(), sb), td = matrix(d.data(), sd);
  arb_gemm_args args = ARB_GEMM_ARGS_INIT;
  args.a = &ta;
  args.b = &tb;
  args.d = &td;
  char report[8192] = "";
  size_t length = 0;
  arb_explain(ctx, ARB_OP_GEMM, &args, report, sizeof report, &length);
  const arb_status status = arb_gemm(ctx, &args, nullptr);
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += static_cast<double>(a[i * k + p]) * b[p * n + j];
      worst = std::fmax(worst, std::fabs(want - d[i * n + j]));
    }
  std::printf("gemm: %s, worst error %g\n", arb_status_string(status), worst);
  std::printf("mapped after gemm: %d\n", libopenblas_mapped() ? 1 : 0);
  std::printf("explain:\n%s\n", report);
  arb_context_destroy(ctx);
  return status == ARB_OK && worst < 1e-4 ? 0 : 1;
}

// ---- the tests -----------------------------------------------------------------------------

using Run = arbiter::test::CommandRun;

[[noreturn]] void skip(const std::string& why) {
  std::printf("skipped: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(77);
}

std::string self() { return fs::read_symlink("/proc/self/exe").string(); }

// A fresh cache folder for one test.
struct CacheFolder {
  fs::path path;
  CacheFolder() {
    char pattern[] = "/tmp/arbiter-openblas-lazy-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
  }
  ~CacheFolder() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path memo() const { return path / "openblas-config"; }
};

Run run_child(const CacheFolder& cache, const std::string& environment = "") {
  if (!fs::exists(plugin)) skip("the openblas plugin was not built (" + plugin + ")");
  return arbiter::test::run_shell_command("env -u OPENBLAS_CORETYPE -u ARBITER_OPENBLAS_SIMULATE_CORE ARBITER_CACHE_DIR='" +
                                          cache.path.string() + "' " + environment + " '" + self() + "' --child 2>&1");
}

// `arbiter plugins` as the CLI prints it, for the openblas plugin's lines.
std::string plugins_listing(const std::string& cache_dir) {
  if (!fs::exists(plugin)) skip("the openblas plugin was not built (" + plugin + ")");
  const Run run = arbiter::test::run_shell_command("env -u OPENBLAS_CORETYPE -u ARBITER_OPENBLAS_SIMULATE_CORE ARBITER_CACHE_DIR='" +
                                                   cache_dir + "' ARBITER_PLUGIN_PATH='" + ARBITER_TEST_PLUGIN_DIR + "' '" +
                                                   ARBITER_TEST_CLI + "' plugins 2>&1");
  REQUIRE(run.status == 0);
  const size_t at = run.output.find("OpenBLAS cblas_sgemm;");
  REQUIRE(at != std::string::npos);
  const size_t wraps = run.output.find("wraps: ", at);
  REQUIRE(wraps != std::string::npos);
  return run.output.substr(at, run.output.find('\n', wraps) - at);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("openblas_lazy.a remembered OpenBLAS is not mapped by the context, yet openblas.sgemm is verified and runs") {
  const CacheFolder cache;
  const Run first = run_child(cache);
  INFO(first.output);
  REQUIRE(first.status == 0);
  CHECK(contains(first.output, "mapped after create: 1"));  // nothing remembered yet: loaded at the entry
  REQUIRE(fs::exists(cache.memo()));

  const Run second = run_child(cache);
  INFO(second.output);
  REQUIRE(second.status == 0);
  CHECK(contains(second.output, "mapped after create: 0"));
  CHECK(contains(second.output, "gemm: ARB_OK"));
  CHECK(contains(second.output, "mapped after gemm: 1"));
  CHECK(contains(second.output, "openblas.sgemm"));
  CHECK_FALSE(contains(second.output, "not what the plugin announced"));
}

TEST_CASE("openblas_lazy.the plugin says the same from the memo as from the library") {
  const CacheFolder cache;
  const std::string loaded = plugins_listing("");  // no cache: OpenBLAS loaded at the entry
  plugins_listing(cache.path.string());            // remembers
  REQUIRE(fs::exists(cache.memo()));
  const std::string remembered = plugins_listing(cache.path.string());
  CHECK(remembered == loaded);  // the core, why, and runtime_version ("wraps: OpenBLAS ...")
  CHECK(contains(remembered, "Core "));
}

TEST_CASE("openblas_lazy.a memo that says other than the library is caught at first use, before any launch") {
  const CacheFolder cache;
  REQUIRE(run_child(cache).status == 0);
  std::string memo = read(cache.memo());
  const size_t version = memo.find("OpenBLAS ");  // the config field: "OpenBLAS 0.3.21 ..."
  REQUIRE(version != std::string::npos);
  memo.replace(version, 9, "OpenBLAS 9.9.9-forged ");
  {
    std::ofstream out(cache.memo(), std::ios::trunc);
    out << memo;
  }
  REQUIRE(::chmod(cache.memo().c_str(), 0600) == 0);

  const Run run = run_child(cache);
  INFO(run.output);
  CHECK(contains(run.output, "mapped after create: 0"));  // the forged memo was believed at the entry...
  CHECK(contains(run.output, "not what the plugin announced"));  // ...and refused at first use
  CHECK(contains(run.output, "9.9.9-forged"));
  CHECK(contains(run.output, "gemm: ARB_OK"));  // served by the next choice (the oracle), never by openblas
  // The memo now says what the library says, so the next process announces the truth.
  CHECK_FALSE(contains(read(cache.memo()), "forged"));
  const Run after = run_child(cache);
  INFO(after.output);
  CHECK(contains(after.output, "mapped after create: 0"));
  CHECK_FALSE(contains(after.output, "not what the plugin announced"));
}

TEST_CASE("openblas_lazy.an OpenBLAS someone other than root could have written is loaded at the entry every time") {
  const CacheFolder cache;
  const fs::path folder = cache.path / "lib";
  fs::create_directories(folder);
  // A copy of the system's library, found first through LD_LIBRARY_PATH: the host hashes it
  // into the plugin's identity at the entry, which a load at first use would escape.
  const Run where = arbiter::test::run_shell_command(
      "for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /lib/x86_64-linux-gnu; do "
      "[ -e $d/libopenblas.so.0 ] && readlink -f $d/libopenblas.so.0 && break; done");
  if (where.output.empty()) skip("no libopenblas.so.0 in the usual folders to copy");
  const std::string original = where.output.substr(0, where.output.find('\n'));
  fs::copy_file(original, folder / "libopenblas.so.0");
  ::sleep(4);  // past the seconds in which a changed file is never remembered, whoever wrote it
  const std::string environment = "LD_LIBRARY_PATH='" + folder.string() + "'";
  for (int run = 0; run < 2; ++run) {
    const Run child_run = run_child(cache, environment);
    INFO(child_run.output);
    REQUIRE(child_run.status == 0);
    CHECK(contains(child_run.output, "mapped after create: 1"));
  }
  CHECK_FALSE(fs::exists(cache.memo()));
}

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--child") return child();
  if (libopenblas_mapped()) skip("libopenblas is mapped into the test program itself");
  return arbiter::test::run_doctest(argc, argv);
}

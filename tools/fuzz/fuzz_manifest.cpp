// Fuzz target: generated-kernel manifests (plugins/generated/kernel_manifest.hpp) and the
// launch formulas in them (launch_geometry.hpp). load_manifest reads a file, so each input is
// written to a scratch folder that also holds copies of the shipped kernel sources: a seed's
// `source` and `source_sha256` then hold, and mutations reach every key past the hash check.
// Expected: a manifest, or std::runtime_error (InputError). A manifest that loads has its
// formulas evaluated on the problems it claims and on model-sized ones, as a launch would.
#include "kernel_manifest.hpp"
#include "common/failure.hpp"
#include "problem/problem_text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

class ScratchFolder {
 public:
  ScratchFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/arbiter-fuzz-manifest-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = pattern;
    // ARBITER_FUZZ_KERNEL_DIRS: the folders of the seed manifests, ':'-separated.
    const std::string folders = ARBITER_FUZZ_KERNEL_DIRS;
    for (size_t begin = 0, end = 0; begin <= folders.size(); begin = end + 1) {
      end = std::min(folders.find(':', begin), folders.size());
      for (const fs::directory_entry& entry : fs::directory_iterator(folders.substr(begin, end - begin)))
        if (entry.path().extension() == ".cu")
          fs::copy_file(entry.path(), path_ / entry.path().filename(), fs::copy_options::overwrite_existing);
    }
  }
  ~ScratchFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  fs::path manifest_path() const { return path_ / "manifest.toml"; }

 private:
  fs::path path_;
};

// Problems a launch could see: the manifest's own shapes, and large model-sized ones.
std::vector<arb_problem> problems_for(const arbiter::generated::Manifest& manifest) {
  std::vector<std::string> texts = manifest.shapes;
  for (const char* text : {"gemm bf16 m=1 n=4096 k=4096 tb=1 device=cuda", "gemm f16 m=8192 n=28672 k=8192 device=cuda",
                           "rmsnorm bf16 rows=8192 cols=8192 residual=1 device=cuda",
                           "softmax f32 rows=4096 cols=128256 device=cuda"})
    texts.emplace_back(text);
  std::vector<arb_problem> problems;
  for (const std::string& text : texts) {
    try {
      const arb_problem p = arbiter::parse_problem(text).problem;
      if (p.op == manifest.op) problems.push_back(p);
    } catch (const arbiter::Failure&) {  // a shape in bad syntax: the plugin's loader says so, not this target
    }
  }
  return problems;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ScratchFolder scratch;
  const fs::path path = scratch.manifest_path();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  arbiter::generated::Manifest manifest;
  try {
    manifest = arbiter::generated::load_manifest(path.string());
  } catch (const std::runtime_error&) {
    return 0;
  }
  for (const arb_problem& problem : problems_for(manifest)) {
    std::string why;
    arbiter::generated::satisfies(manifest, problem, &why);
    try {
      for (int i = 0; i < 3; ++i) {
        manifest.grid[i].evaluate(problem);
        manifest.block[i].evaluate(problem);
      }
      manifest.shared_bytes.evaluate(problem);
    } catch (const std::runtime_error&) {  // a formula refused at launch (overflow), if it says so
    }
  }
  return 0;
}

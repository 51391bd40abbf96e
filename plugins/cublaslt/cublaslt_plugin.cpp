// The cublaslt plugin: the vendor fallback on CUDA. Its kernels are
//   heuristic         cuBLASLt's own first choice for each problem (the baseline to beat);
//   heuristic_tf32    the same for f32 on TF32 tensor cores (flagged: a declared option);
//   algo=...,tile=... one algorithm configuration each, named by its attributes, collected
//                     at load from cuBLASLt's heuristics over representative LLM shapes;
//                     each serves a problem only where the heuristic proposes it for that
//                     problem, and the tuner times them per problem like any other kernel.
// Descriptors are initialised in caller memory and workspace comes from the host, so a
// launch allocates nothing; each thread has its own cuBLASLt handle.
#include <arbiter/plugin.hpp>

#include "algo_config.hpp"
#include "cuda_plugin_support.hpp"
#include "lt_library.hpp"
#include "lt_problem.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

namespace {

using arbiter::cublaslt::AlgoConfig;
using arbiter::cublaslt::describe;
using arbiter::cublaslt::LtProblem;
using arbiter::cublaslt::status_name;
using arbiter::plugin::Error;
using arbiter::plugin::Launch;
using arbiter::plugin::Why;

constexpr size_t kMaxWorkspace = size_t(64) << 20;
constexpr size_t kMaxConfigs = 64;

// One handle per thread, made on first use and kept for the life of the process (a
// trivially destructible thread_local: nothing runs at thread exit after an unload).
cublasLtHandle_t handle() {
  thread_local cublasLtHandle_t h = nullptr;
  if (h == nullptr) {
    const cublasStatus_t s = cublasLtCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) throw Error(ARB_ERR_KERNEL, std::string("cublasLtCreate: ") + status_name(s));
  }
  return h;
}

// Heuristic preferences: the workspace cap and the problem's alignment.
void prefer(cublasLtMatmulPreferenceOpaque_t& storage, const arb_problem& p) {
  cublasLtMatmulPreference_t pref = &storage;
  cublasLtMatmulPreferenceInit(pref);
  const uint64_t cap = kMaxWorkspace;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof cap);
  const uint32_t alignment = static_cast<uint32_t>(p.alignment);
  for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(pref, attribute, &alignment, sizeof alignment);
}

// What a kernel runs for one problem: the algorithm and its workspace, or why it cannot.
struct Choice {
  bool ok = false;
  std::string why;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

// Answers remembered per problem: cuBLASLt's heuristic query costs microseconds, so
// supports() asks once and workspace_size() and every launch replay the answer (the same
// algorithm each time). A lookup allocates nothing and shares a reader lock.
template <typename Answer>
class ProblemCache {
 public:
  template <typename Compute>
  Answer get(const arb_problem& p, Compute&& compute) {
    Key key;
    std::memcpy(key.data(), &p, sizeof p);
    {
      std::shared_lock<std::shared_mutex> lock(mutex_);
      if (auto it = answers_.find(key); it != answers_.end()) return it->second;
    }
    Answer a = compute(p);
    std::unique_lock<std::shared_mutex> lock(mutex_);
    return answers_.emplace(key, std::move(a)).first->second;
  }

 private:
  using Key = std::array<unsigned char, sizeof(arb_problem)>;
  std::shared_mutex mutex_;
  std::map<Key, Answer> answers_;
};

using ChoiceCache = ProblemCache<Choice>;

// cuBLASLt's first choice for a problem.
Choice heuristic_choice(const arb_problem& p, bool tf32) {
  Choice c;
  LtProblem lt;
  if (!describe(p, tf32, nullptr, lt, &c.why)) return c;
  cublasLtMatmulPreferenceOpaque_t pref;
  prefer(pref, p);
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(handle(), lt.desc(), lt.a(), lt.b(), lt.c(), lt.d(), &pref, 1, &result, &count);
  if (s != CUBLAS_STATUS_SUCCESS || count == 0) {
    c.why = std::string("no cuBLASLt algorithm: ") + status_name(s);
    return c;
  }
  c.ok = true;
  c.algo = result.algo;
  c.workspace = result.workspaceSize;
  return c;
}

// How deep into cuBLASLt's ranked proposals for a problem a configuration may be found.
constexpr int kProposalDepth = 32;

// cuBLASLt's ranked proposals for one problem, as its heuristic built them.
using Proposals = std::vector<cublasLtMatmulHeuristicResult_t>;

Proposals propose(const arb_problem& p) {
  Proposals out;
  LtProblem lt;
  if (!describe(p, false, nullptr, lt, nullptr)) return out;
  cublasLtMatmulPreferenceOpaque_t pref;
  prefer(pref, p);
  out.resize(kProposalDepth);
  int count = 0;
  if (cublasLtMatmulAlgoGetHeuristic(handle(), lt.desc(), lt.a(), lt.b(), lt.c(), lt.d(), &pref, kProposalDepth,
                                     out.data(), &count) != CUBLAS_STATUS_SUCCESS)
    count = 0;
  out.resize(static_cast<size_t>(std::max(count, 0)));
  return out;
}

// A configuration for one problem: only as cuBLASLt's heuristic proposes it for this very
// problem (its algorithm and workspace as the heuristic built them). A configuration seen on
// other shapes and merely passed by cublasLtMatmulAlgoCheck is not enough: on an H200 such
// algorithms hung (algo 66 with cluster shapes, timed at bf16 8192^3 and 512x6144x4096) or
// computed wrong results (split-K 9 and 11 at k = 8, caught by the gate).
Choice check_config(const AlgoConfig& config, const arb_problem& p, const Proposals& proposals) {
  Choice c;
  LtProblem lt;
  if (!describe(p, false, nullptr, lt, &c.why)) return c;
  for (const cublasLtMatmulHeuristicResult_t& proposal : proposals) {
    if (proposal.state != CUBLAS_STATUS_SUCCESS || AlgoConfig::from(proposal.algo).tie() != config.tie()) continue;
    if (proposal.workspaceSize > kMaxWorkspace) {
      c.why = "needs more than 64 MiB of workspace";
      return c;
    }
    c.ok = true;
    c.algo = proposal.algo;
    c.workspace = proposal.workspaceSize;
    return c;
  }
  c.why = "cuBLASLt's heuristic does not propose this configuration for this problem (among its first " +
          std::to_string(kProposalDepth) + ")";
  return c;
}

void matmul(const Launch& l, const cublasLtMatmulAlgo_t& algo, bool tf32) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  LtProblem lt;
  std::string why;
  if (!describe(p, tf32, o.bias, lt, &why)) throw Error(ARB_ERR_UNSUPPORTED, why);
  const float alpha = o.alpha, beta = p.has_c ? o.beta : 0.0f;
  const void* c = p.has_c ? o.c : o.d;
  // Our B is cuBLASLt's A, our A its B (lt_problem.hpp).
  const cublasStatus_t s = cublasLtMatmul(handle(), lt.desc(), &alpha, o.b, lt.a(), o.a, lt.b(), &beta, c, lt.c(), o.d,
                                          lt.d(), &algo, l.workspace, l.workspace_bytes, static_cast<cudaStream_t>(l.stream));
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(ARB_ERR_KERNEL, std::string("cublasLtMatmul: ") + status_name(s));
}

// Algorithm configurations worth timing: cuBLASLt's top choices over representative
// decode and prefill shapes of LLM projections, every dtype and transpose.
std::vector<AlgoConfig> collect_configs() {
  std::map<AlgoConfig, int> seen;
  for (int32_t dtype : {ARB_DTYPE_F32, ARB_DTYPE_F16, ARB_DTYPE_BF16}) {
    for (auto [ta, tb] : {std::pair{0, 0}, std::pair{0, 1}, std::pair{1, 0}}) {
      for (int64_t m : {1, 16, 64, 512, 4096}) {
        for (auto [n, k] : {std::pair<int64_t, int64_t>{4096, 4096}, {14336, 4096}, {4096, 14336}}) {
          arb_problem p{};
          p.struct_size = sizeof p;
          p.op = ARB_OP_GEMM;
          p.dtype = dtype;
          p.device_type = kDLCUDA;
          p.alignment = 256;
          p.m = m;
          p.n = n;
          p.k = k;
          p.batch = 1;
          p.trans_a = ta;
          p.trans_b = tb;
          p.lda = ta ? m : k;
          p.ldb = tb ? k : n;
          p.ldd = n;
          LtProblem lt;
          if (!describe(p, false, nullptr, lt, nullptr)) continue;
          cublasLtMatmulPreferenceOpaque_t pref;
          prefer(pref, p);
          cublasLtMatmulHeuristicResult_t results[8]{};
          int count = 0;
          if (cublasLtMatmulAlgoGetHeuristic(handle(), lt.desc(), lt.a(), lt.b(), lt.c(), lt.d(), &pref, 8, results,
                                             &count) != CUBLAS_STATUS_SUCCESS)
            continue;
          for (int i = 0; i < count; ++i)
            if (results[i].state == CUBLAS_STATUS_SUCCESS) ++seen[AlgoConfig::from(results[i].algo)];
        }
      }
    }
  }
  std::vector<std::pair<int, AlgoConfig>> ranked;  // most often proposed first, then by attributes
  for (const auto& [config, count] : seen) ranked.push_back({-count, config});
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  std::vector<AlgoConfig> configs;
  for (size_t i = 0; i < ranked.size() && i < kMaxConfigs; ++i) configs.push_back(ranked[i].second);
  return configs;
}

arbiter::plugin::Plugin make() {
  arbiter::plugin::require_cuda_device();
  arbiter::plugin::load_cublaslt();  // only now: a host without a GPU never maps it
  const size_t version = cublasLtGetVersion();
  arbiter::plugin::Plugin plugin("cublaslt", "1.0.0");
  plugin.provenance(ARB_PROVENANCE_VENDOR)
      .priority(40)
      .runtime_version("cuBLASLt " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
                       std::to_string(version % 100))
      .description("NVIDIA cuBLASLt: its heuristic's choice, and algorithm configurations to tune among");

  auto heuristic_kernel = [](const char* name, bool tf32) {
    auto cache = std::make_shared<ChoiceCache>();
    auto choose = [cache, tf32](const arb_problem& p) {
      return cache->get(p, [tf32](const arb_problem& q) { return heuristic_choice(q, tf32); });
    };
    arbiter::plugin::Kernel k(name, ARB_OP_GEMM, kDLCUDA);
    k.priority(tf32 ? 0 : 1)
        .supports([choose](const arb_problem& p, Why& why) {
          const Choice c = choose(p);
          return c.ok ? true : why.no("%s", c.why.c_str());
        })
        .workspace([choose](const arb_problem& p) { return choose(p).workspace; })
        .launch([choose, tf32](const Launch& l) {
          const Choice c = choose(l.problem);
          if (!c.ok) throw Error(ARB_ERR_UNSUPPORTED, c.why);
          if (l.workspace_bytes < c.workspace) throw Error(ARB_ERR_KERNEL, "workspace smaller than asked for");
          matmul(l, c.algo, tf32);
        });
    if (tf32) k.tf32();
    return k;
  };
  plugin.kernel(heuristic_kernel("heuristic", false));
  plugin.kernel(heuristic_kernel("heuristic_tf32", true));

  auto proposals = std::make_shared<ProblemCache<Proposals>>();  // one query per problem for all configurations
  for (const AlgoConfig& config : collect_configs()) {
    auto cache = std::make_shared<ChoiceCache>();
    auto choose = [cache, proposals, config](const arb_problem& p) {
      return cache->get(p, [&](const arb_problem& q) { return check_config(config, q, proposals->get(q, propose)); });
    };
    arbiter::plugin::Kernel k(config.name(), ARB_OP_GEMM, kDLCUDA);
    k.supports([choose](const arb_problem& p, Why& why) {
       const Choice c = choose(p);
       return c.ok ? true : why.no("%s", c.why.c_str());
     })
        .workspace([choose](const arb_problem& p) { return choose(p).workspace; })
        .launch([choose](const Launch& l) {
          const Choice c = choose(l.problem);
          if (!c.ok) throw Error(ARB_ERR_UNSUPPORTED, c.why);
          if (l.workspace_bytes < c.workspace) throw Error(ARB_ERR_KERNEL, "workspace smaller than asked for");
          matmul(l, c.algo, false);
        });
    if (!config.deterministic()) k.nondeterministic();
    plugin.kernel(std::move(k));
  }
  return plugin;
}

}  // namespace

ARBITER_PLUGIN(make())

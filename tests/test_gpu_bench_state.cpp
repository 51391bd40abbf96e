// The GPU benchmark's memory between processes (bench/gpu_report.hpp, bench/fault_guard.hpp):
// the state file round-trips, and the fault journal names the kernel a dead or hung process
// was running, so that the next process can go on without it. No GPU needed.
#include "fault_guard.hpp"
#include "gpu_report.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

using namespace arbiter;
using namespace arbiter::bench;

TEST_CASE("the GPU benchmark's state file keeps rows, faults and the dispatch cost") {
  test::TempDir dir;
  RunState s;
  s.device = "NVIDIA H200 [sm_90]";
  s.copy_bw = 4.1e12;
  s.processes = 2;
  Row r;
  r.suite = "gpu-headline";
  r.problem = "gemm bf16 m=8192 n=8192 k=8192 tb=1 device=cuda";
  r.winner = "cuda.gemm_wgmma_sm90";
  r.winner_median = 1.7e-3;
  r.baseline = 1.6e-3;
  r.best_of_plugin = {{"cuda", 1.7e-3}, {kBaseline, 1.6e-3}};
  r.best_kernel_of_plugin = {{"cuda", "cuda.gemm_wgmma_sm90"}, {kBaseline, kBaseline}};
  r.verified = 5;
  r.kept_incumbent = true;
  s.rows.push_back(r);
  s.faults.push_back({"cuda.gemm_mma_sm80", r.problem, "verify", "an illegal memory access"});
  s.cost = {r.problem, "cuda.rmsnorm_vec16", 10e-6, 10.1e-6, 2e-6, 2.5e-6};
  save_state(s, dir.file("state.toml"));
  const RunState t = load_state(dir.file("state.toml"));
  CHECK(t.device == s.device);
  CHECK(t.copy_bw == s.copy_bw);
  CHECK(t.processes == 2);
  REQUIRE(t.rows.size() == 1);
  CHECK(t.rows[0].winner == r.winner);
  CHECK(t.rows[0].winner_median == r.winner_median);
  CHECK(t.rows[0].best_of_plugin == r.best_of_plugin);
  CHECK(t.rows[0].best_kernel_of_plugin == r.best_kernel_of_plugin);
  CHECK(t.rows[0].kept_incumbent);
  CHECK(t.rows[0].p.op == ARB_OP_GEMM);
  CHECK(t.rows[0].p.m == 8192);
  CHECK(t.rows[0].p.device_type == kDLCUDA);
  CHECK(t.find(r.problem) != nullptr);
  CHECK(t.excluded_kernels() == std::vector<std::string>{"cuda.gemm_mma_sm80"});
  CHECK(t.cost.dispatched == s.cost.dispatched);
  CHECK(t.below_baseline() == 0);  // slower than the baseline, but the incumbent was kept
  write_report(t, dir.path);
  CHECK(std::filesystem::exists(dir.file("gpu-bench.md")));
}

TEST_CASE("the fault journal names the kernel a process was running when it ended") {
  test::TempDir dir;
  const std::string journal = dir.file("journal.txt");
  {
    FaultGuard guard(journal, 60);
    guard.running("cuda.gemm_wgmma_sm90", "verify", "gemm bf16 m=1 n=2 k=8 tb=1 device=cuda");
    // The process "dies" here: what the next process reads is the journal as it is now.
    const std::optional<Fault> f = FaultGuard::previous(journal);
    REQUIRE(f.has_value());
    CHECK(f->kernel == "cuda.gemm_wgmma_sm90");
    CHECK(f->phase == "verify");
    CHECK(f->problem == "gemm bf16 m=1 n=2 k=8 tb=1 device=cuda");
    guard.idle();
    CHECK_FALSE(FaultGuard::previous(journal).has_value());  // between kernels: nobody to blame
    guard.running("generated.softmax_rowblock", "time", "softmax f16 rows=1 cols=8 device=cuda");
  }
  CHECK_FALSE(FaultGuard::previous(journal).has_value());  // a clean end
  CHECK_FALSE(FaultGuard::previous(dir.file("absent.txt")).has_value());
}

TEST_CASE("the fault journal's watchdog ends a process whose kernel hangs, and says so") {
  test::TempDir dir;
  const std::string journal = dir.file("journal.txt");
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    FaultGuard guard(journal, 2);  // a short limit
    guard.running("cuda.softmax_cluster8", "time", "softmax bf16 rows=1 cols=131072 device=cuda");
    std::this_thread::sleep_for(std::chrono::seconds(30));  // "hangs"
    std::_Exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 4);
  const std::optional<Fault> f = FaultGuard::previous(journal);
  REQUIRE(f.has_value());
  CHECK(f->kernel == "cuda.softmax_cluster8");
  CHECK(f->what.find("hung") == 0);
}

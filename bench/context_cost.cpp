// The cost of a context, as an application sees it at start: one arb_context_create (config
// parsed, plugins found, hashed, loaded and probed) and arb_context_destroy, in a fresh
// process, since a process remembers plugin hashes once it has read them. Prints the wall
// time of the create in microseconds; bench/context_cost.sh runs it many times per variant.
//
//   arbiter_bench_context [config.toml]
#include <arbiter/arbiter.h>

#include <chrono>
#include <cstdio>

int main(int argc, char** argv) {
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  if (argc > 1) options.config_path = argv[1];
  arb_context ctx = nullptr;
  const auto start = std::chrono::steady_clock::now();
  const arb_status status = arb_context_create(&options, &ctx);
  const auto end = std::chrono::steady_clock::now();
  if (status != ARB_OK) {
    std::fprintf(stderr, "arbiter_bench_context: %s\n", arb_last_error());
    return 1;
  }
  arb_context_destroy(ctx);
  std::printf("%.1f\n", std::chrono::duration<double, std::micro>(end - start).count());
  return 0;
}

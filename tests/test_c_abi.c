/* The application ABI compiled as C11 and linked against libarbiter.so: the headers are
 * valid C, the INIT macros work, and a call round-trips. */
#include <arbiter/arbiter.h>

#include <math.h>
#include <stdio.h>

int main(void) {
  if ((arb_abi_version() >> 16) != ARB_ABI_VERSION_MAJOR) {
    fprintf(stderr, "ABI major mismatch\n");
    return 1;
  }
  arb_context ctx = NULL;
  if (arb_context_create(NULL, &ctx) != ARB_OK) {
    fprintf(stderr, "create: %s\n", arb_last_error());
    return 1;
  }
  float x[4] = {0, 0, 0, 0}, y[4] = {1, 1, 1, 1};
  int64_t shape[2] = {1, 4};
  DLTensor tx = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
  DLTensor ty = {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
  arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
  args.x = &tx;
  args.y = &ty;
  arb_status status = arb_softmax(ctx, &args, NULL);
  int failed = status != ARB_OK || fabsf(y[0] - 0.25f) > 1e-6f || fabsf(y[3] - 0.25f) > 1e-6f;
  if (failed) fprintf(stderr, "softmax: %s %s\n", arb_status_string(status), arb_last_error());
  args.y = NULL;
  if (arb_softmax(ctx, &args, NULL) != ARB_ERR_INVALID_ARGUMENT || arb_last_error()[0] == '\0') failed = 1;
  arb_context_destroy(ctx);
  printf("c abi: %s\n", failed ? "FAIL" : "ok");
  return failed;
}

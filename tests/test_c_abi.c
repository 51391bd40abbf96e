/* The application ABI compiled as C11 and linked against libarbiter.so: the headers are
 * valid C, the INIT macros and size constants work, and a call round-trips. */
#include <arbiter/arbiter.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The size constants are constant expressions in C too; the kernel flags are visible
 * through arbiter.h (types.h). */
_Static_assert(ARB_GEMM_ARGS_STRUCT_SIZE == 72, "arb_gemm_args 1.0");
_Static_assert(ARB_RMSNORM_ARGS_STRUCT_SIZE == 44, "arb_rmsnorm_args 1.0");
_Static_assert(ARB_SOFTMAX_ARGS_STRUCT_SIZE == 24, "arb_softmax_args 1.0");
_Static_assert(ARB_CONTEXT_OPTIONS_STRUCT_SIZE == 24, "arb_context_options 1.0");
_Static_assert(ARB_PLUGIN_INFO_STRUCT_SIZE == 88, "arb_plugin_info 1.0");
_Static_assert(ARB_KERNEL_INFO_STRUCT_SIZE == 40, "arb_kernel_info 1.0");
_Static_assert(ARB_KERNEL_FLAG_NONDETERMINISTIC == 0x1u && ARB_KERNEL_FLAG_TF32 == 0x2u, "kernel flags");

static int check_name(const char* what, int32_t value, const char* got, const char* expected) {
  if (got != NULL && strcmp(got, expected) == 0) return 0;
  fprintf(stderr, "%s(%d): \"%s\", expected \"%s\"\n", what, (int)value, got ? got : "(null)", expected);
  return 1;
}

/* arb_provenance_string: every value, the CLI's names, and "unknown" (never NULL) outside. */
static int check_provenance_strings(void) {
  int failed = 0;
  failed |= check_name("arb_provenance_string", ARB_PROVENANCE_UNSPECIFIED,
                       arb_provenance_string(ARB_PROVENANCE_UNSPECIFIED), "unspecified");
  failed |= check_name("arb_provenance_string", ARB_PROVENANCE_REFERENCE,
                       arb_provenance_string(ARB_PROVENANCE_REFERENCE), "reference");
  failed |= check_name("arb_provenance_string", ARB_PROVENANCE_VENDOR, arb_provenance_string(ARB_PROVENANCE_VENDOR),
                       "vendor");
  failed |= check_name("arb_provenance_string", ARB_PROVENANCE_HAND_TUNED,
                       arb_provenance_string(ARB_PROVENANCE_HAND_TUNED), "hand_tuned");
  failed |= check_name("arb_provenance_string", ARB_PROVENANCE_AI_GENERATED,
                       arb_provenance_string(ARB_PROVENANCE_AI_GENERATED), "ai_generated");
  const int32_t outside[] = {ARB_PROVENANCE_AI_GENERATED + 1, -1, 1000, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof outside / sizeof outside[0]; ++i)
    failed |= check_name("arb_provenance_string", outside[i], arb_provenance_string(outside[i]), "unknown");
  return failed;
}

int main(void) {
  if ((arb_abi_version() >> 16) != ARB_ABI_VERSION_MAJOR) {
    fprintf(stderr, "ABI major mismatch\n");
    return 1;
  }
  int names_failed = check_provenance_strings();
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
  /* A struct shorter than its version 1.0 is refused. */
  args.y = &ty;
  args.struct_size = ARB_SOFTMAX_ARGS_STRUCT_SIZE - 1;
  int short_accepted = arb_softmax(ctx, &args, NULL) != ARB_ERR_INVALID_ARGUMENT;
  arb_kernel_info kinfo = ARB_KERNEL_INFO_INIT;
  kinfo.struct_size = ARB_KERNEL_INFO_STRUCT_SIZE - 1;
  short_accepted |= arb_kernel_get_info(ctx, 0, 0, &kinfo) != ARB_ERR_INVALID_ARGUMENT;
  if (short_accepted) fprintf(stderr, "a struct shorter than its STRUCT_SIZE was accepted\n");
  failed |= short_accepted;
  arb_context_destroy(ctx);
  failed |= names_failed;
  printf("c abi: %s\n", failed ? "FAIL" : "ok");
  return failed;
}

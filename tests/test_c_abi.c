/* The application ABI compiled as C11 and linked against libarbiter.so: the headers are
 * valid C, the INIT macros and size constants work, and a call round-trips; arb_verify and
 * arb_tune (since 1.2) report as JSON, write the table they are given, call progress and stop
 * when it says so, and fail with the right status and a message. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <arbiter/arbiter.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The size constants are constant expressions in C too; the kernel flags are visible
 * through arbiter.h (types.h). */
_Static_assert(ARB_GEMM_ARGS_STRUCT_SIZE == 72, "arb_gemm_args 1.0");
_Static_assert(ARB_RMSNORM_ARGS_STRUCT_SIZE == 44, "arb_rmsnorm_args 1.0");
_Static_assert(ARB_SOFTMAX_ARGS_STRUCT_SIZE == 24, "arb_softmax_args 1.0");
_Static_assert(ARB_CONTEXT_OPTIONS_STRUCT_SIZE == 24, "arb_context_options 1.0");
_Static_assert(ARB_PLUGIN_INFO_STRUCT_SIZE == 88, "arb_plugin_info 1.0");
_Static_assert(ARB_KERNEL_INFO_STRUCT_SIZE == 40, "arb_kernel_info 1.0");
_Static_assert(ARB_VERIFY_OPTIONS_STRUCT_SIZE == 32, "arb_verify_options 1.2");
_Static_assert(ARB_TUNE_OPTIONS_STRUCT_SIZE == 56, "arb_tune_options 1.2");
_Static_assert(ARB_ABI_VERSION_MINOR == 8, "application ABI 1.8");
_Static_assert(ARB_SWIGLU_ARGS_STRUCT_SIZE == 32, "arb_swiglu_args 1.4");
_Static_assert(ARB_ROPE_ARGS_STRUCT_SIZE == 48, "arb_rope_args 1.5");
_Static_assert(ARB_ATTENTION_ARGS_STRUCT_SIZE == 48, "arb_attention_args 1.6");
_Static_assert(ARB_MLP_ARGS_STRUCT_SIZE == 64, "arb_mlp_args 1.7");
_Static_assert(ARB_PLAN_OPERANDS_STRUCT_SIZE == 48, "arb_plan_operands 1.3");
_Static_assert(sizeof(arb_plan_operands) == 72 && ARB_PLAN_MAX_TENSORS == 8, "arb_plan_operands 1.8");
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

/* Fails (returns 1) with what happened unless `status` is `expected`, with a message, and the
 * report output (if any; read after the call, as the pointer is) is NULL. */
static int expect_error(const char* what, arb_status status, arb_status expected, const arb_report* report) {
  const int reported = report != NULL && *report != NULL;
  if (status == expected && arb_last_error()[0] != '\0' && !reported) return 0;
  fprintf(stderr, "%s: %s (\"%s\"), expected %s%s\n", what, arb_status_string(status), arb_last_error(),
          arb_status_string(expected), reported ? "; a report was set" : "");
  return 1;
}

static int contains(const char* text, const char* part, const char* what) {
  if (strstr(text, part) != NULL) return 0;
  fprintf(stderr, "%s: no %s in %s\n", what, part, text);
  return 1;
}

/* contains() for each of `parts`, a NULL-terminated list. */
static int contains_all(const char* text, const char* const* parts, const char* what) {
  int failed = 0;
  for (; *parts != NULL; ++parts) failed |= contains(text, *parts, what);
  return failed;
}

struct progress_log {
  int calls;
  size_t last_done, last_total;
  int stop_at; /* return 1 when done reaches it; -1: never */
};

static int32_t on_progress(void* user_data, size_t done, size_t total, const char* problem) {
  struct progress_log* log = (struct progress_log*)user_data;
  ++log->calls;
  log->last_done = done;
  log->last_total = total;
  if (problem == NULL) log->calls += 1000; /* never NULL: "" at the end */
  return log->stop_at >= 0 && done >= (size_t)log->stop_at;
}

/* A dummy report value: the error paths must overwrite it with NULL. */
#define POISON_REPORT ((arb_report)(uintptr_t)0x1)

static int verify_fails(const char* what, arb_context ctx, const arb_verify_options* options, arb_status expected) {
  arb_report report = POISON_REPORT;
  return expect_error(what, arb_verify(ctx, options, &report), expected, &report);
}

static int tune_fails(const char* what, arb_context ctx, const arb_tune_options* options, arb_status expected) {
  arb_report report = POISON_REPORT;
  return expect_error(what, arb_tune(ctx, options, &report), expected, &report);
}

/* The report of a call that must succeed (read through the pointer after the call), or NULL
 * after saying why. */
static arb_report succeeded(const char* what, arb_status status, const arb_report* report) {
  if (status == ARB_OK && *report != NULL && *report != POISON_REPORT) return *report;
  fprintf(stderr, "%s: %s %s\n", what, arb_status_string(status), arb_last_error());
  return NULL;
}

static int check_verify(arb_context ctx) {
  int failed = 0;
  arb_verify_options good = ARB_VERIFY_OPTIONS_INIT;
  good.problem = "gemm f32 m=64 n=64 k=64";
  arb_report report = POISON_REPORT;
  if (succeeded("arb_verify", arb_verify(ctx, &good, &report), &report) == NULL) return 1;
  const char* json = arb_report_json(report);
  const char* const expected[] = {"\"problem\": \"gemm f32 ", "\"verdicts\": [{", "\"result\": \"passed\"",
                                  "\"kernel\": \"cpu.", "\"result\": \"oracle\"", "\"failed\": 0}", NULL};
  failed |= contains_all(json, expected, "arb_verify");
  arb_report_destroy(report);

  /* One kernel by name, at full size too. */
  arb_verify_options one = good;
  one.kernel = "cpu.gemm_small_avx2";
  one.flags = ARB_VERIFY_FULL;
  report = NULL;
  if (succeeded("arb_verify (one kernel)", arb_verify(ctx, &one, &report), &report) == NULL) return 1;
  json = arb_report_json(report);
  failed |= contains(json, "\"kernel\": \"cpu.gemm_small_avx2\"", "arb_verify (one kernel)");
  if (strstr(json, "\"kernel\": \"reference.") != NULL || strstr(json, "avx512") != NULL) {
    fprintf(stderr, "arb_verify (one kernel): other kernels reported: %s\n", json);
    failed = 1;
  }
  arb_report_destroy(report);

  /* The errors. */
  failed |= verify_fails("arb_verify(NULL context)", NULL, &good, ARB_ERR_INVALID_ARGUMENT);
  failed |= verify_fails("arb_verify(NULL options)", ctx, NULL, ARB_ERR_INVALID_ARGUMENT);
  failed |= expect_error("arb_verify(NULL report)", arb_verify(ctx, &good, NULL), ARB_ERR_INVALID_ARGUMENT, NULL);
  arb_verify_options bad = good;
  bad.struct_size = ARB_VERIFY_OPTIONS_STRUCT_SIZE - 1;
  failed |= verify_fails("arb_verify(short struct)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  bad = good;
  bad.reserved = 1;
  failed |= verify_fails("arb_verify(reserved 1)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  bad = good;
  bad.flags = 0x2u;
  failed |= verify_fails("arb_verify(unknown flag)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  bad = good;
  bad.problem = NULL;
  failed |= verify_fails("arb_verify(NULL problem)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  bad.problem = "gemm f33 m=64 n=64 k=64";
  failed |= verify_fails("arb_verify(bad problem)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  failed |= contains(arb_last_error(), "f33", "arb_verify(bad problem)'s message");
  bad = good;
  bad.kernel = "nosuch.kernel";
  failed |= verify_fails("arb_verify(unknown kernel)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  failed |= contains(arb_last_error(), "nosuch.kernel", "arb_verify(unknown kernel)'s message");
  return failed;
}

static int write_file(const char* path, const char* text) {
  FILE* file = fopen(path, "w");
  if (file == NULL) return 1;
  fputs(text, file);
  return fclose(file) != 0;
}

/* The errors of arb_tune; `dir` is a scratch folder. */
static int check_tune_errors(arb_context ctx, const char* dir) {
  const char* problems[] = {"softmax f32 rows=2 cols=64", "softmax f32 rows=two"};
  arb_tune_options good = ARB_TUNE_OPTIONS_INIT;
  good.problems = problems;
  good.problem_count = 1;
  good.table_path = "";
  int failed = tune_fails("arb_tune(NULL context)", NULL, &good, ARB_ERR_INVALID_ARGUMENT);
  failed |= tune_fails("arb_tune(NULL options)", ctx, NULL, ARB_ERR_INVALID_ARGUMENT);
  failed |= expect_error("arb_tune(NULL report)", arb_tune(ctx, &good, NULL), ARB_ERR_INVALID_ARGUMENT, NULL);
  arb_tune_options bad = good;
  bad.struct_size = ARB_TUNE_OPTIONS_STRUCT_SIZE - 1;
  failed |= tune_fails("arb_tune(short struct)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  bad = good;
  bad.suite_path = "cpu-small.toml";
  failed |= tune_fails("arb_tune(problems and suite)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  bad = good;
  bad.problems = NULL;
  bad.problem_count = 0;
  failed |= tune_fails("arb_tune(neither)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  bad.problem_count = 2;
  failed |= tune_fails("arb_tune(count without problems)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  bad = good;
  bad.problem_count = 2;
  failed |= tune_fails("arb_tune(bad problem)", ctx, &bad, ARB_ERR_INVALID_ARGUMENT);
  failed |= contains(arb_last_error(), "problems[1]", "arb_tune(bad problem)'s message");
  bad = good;
  bad.problems = NULL;
  bad.problem_count = 0;
  bad.suite_path = "/nonexistent/suite.toml";
  failed |= tune_fails("arb_tune(missing suite)", ctx, &bad, ARB_ERR_CONFIG);

  char plain[512], under_plain[600], corrupt[512], config[1024];
  snprintf(plain, sizeof plain, "%s/plain", dir);
  snprintf(under_plain, sizeof under_plain, "%s/sub/table.toml", plain);
  snprintf(corrupt, sizeof corrupt, "%s/corrupt.toml", dir);
  failed |= write_file(plain, "") | write_file(corrupt, "this = = is not a table\n");
  bad = good;
  bad.table_path = under_plain;
  failed |= tune_fails("arb_tune(a table under a file)", ctx, &bad, ARB_ERR_TABLE);
  bad.table_path = dir;
  failed |= tune_fails("arb_tune(a table that is a folder)", ctx, &bad, ARB_ERR_TABLE);
  bad.table_path = corrupt;
  failed |= tune_fails("arb_tune(a corrupt table)", ctx, &bad, ARB_ERR_TABLE);

  /* A context whose own table is unusable: tuning into it fails, as in the CLI. */
  snprintf(config, sizeof config, "log_level = \"off\"\n[table]\npath = \"%s\"\n", corrupt);
  arb_context_options copts = ARB_CONTEXT_OPTIONS_INIT;
  copts.config_toml = config;
  arb_context broken = NULL;
  if (arb_context_create(&copts, &broken) != ARB_OK) {
    fprintf(stderr, "create (corrupt table): %s\n", arb_last_error());
    return 1;
  }
  bad = good;
  bad.table_path = NULL;
  failed |= tune_fails("arb_tune(the context's table unusable)", broken, &bad, ARB_ERR_TABLE);
  arb_context_destroy(broken);
  unlink(corrupt);
  unlink(plain);
  return failed;
}

static int check_tune(arb_context ctx, const char* dir) {
  int failed = 0;
  char table[512], lock[600];
  snprintf(table, sizeof table, "%s/tuned.toml", dir);
  snprintf(lock, sizeof lock, "%s.lock", table);
  const char* problems[] = {"softmax f32 rows=2 cols=64", "rmsnorm f32 rows=2 cols=64"};

  arb_tune_options options = ARB_TUNE_OPTIONS_INIT;
  options.problems = problems;
  options.problem_count = 2;
  options.table_path = table;
  struct progress_log log = {0, 0, 0, -1};
  options.progress = on_progress;
  options.progress_user_data = &log;
  arb_report report = POISON_REPORT;
  if (succeeded("arb_tune", arb_tune(ctx, &options, &report), &report) == NULL) return 1;
  const char* json = arb_report_json(report);
  const char* const expected[] = {"\"cancelled\": false", "\"problem\": \"softmax f32 rows=2 cols=64\"",
                                  "\"problem\": \"rmsnorm f32 rows=2 cols=64\"", "\"winner\": \"", "\"table\": \"",
                                  NULL};
  failed |= contains_all(json, expected, "arb_tune");
  arb_report_destroy(report);
  if (log.calls != 3 || log.last_done != 2 || log.last_total != 2) {
    fprintf(stderr, "arb_tune: progress called %d times, last %zu/%zu; expected 3, last 2/2\n", log.calls,
            log.last_done, log.last_total);
    failed = 1;
  }
  FILE* written = fopen(table, "r");
  char text[8192] = "";
  if (written != NULL) {
    text[fread(text, 1, sizeof text - 1, written)] = '\0';
    fclose(written);
  }
  const char* const entries[] = {"[[entry]]", "softmax f32 rows=2 cols=64", "rmsnorm f32 rows=2 cols=64", NULL};
  failed |= contains_all(text, entries, "the table arb_tune wrote");

  /* Cancelled: the callback stops it after the first problem; reported, not written. */
  struct progress_log stop = {0, 0, 0, 1};
  options.progress_user_data = &stop;
  options.table_path = "";
  report = NULL;
  if (succeeded("arb_tune (cancelled)", arb_tune(ctx, &options, &report), &report) == NULL) return 1;
  json = arb_report_json(report);
  const char* const cancelled[] = {"\"cancelled\": true", "\"table\": null", NULL};
  failed |= contains_all(json, cancelled, "arb_tune (cancelled)");
  if (strstr(json, "rmsnorm") != NULL) {
    fprintf(stderr, "arb_tune (cancelled): the second problem was tuned: %s\n", json);
    failed = 1;
  }
  arb_report_destroy(report);
  if (stop.calls != 2) {
    fprintf(stderr, "arb_tune (cancelled): progress called %d times, expected 2\n", stop.calls);
    failed = 1;
  }
  failed |= check_tune_errors(ctx, dir);
  unlink(table);
  unlink(lock);
  return failed;
}

static int check_reports(arb_context ctx) {
  int failed = 0;
  if (arb_report_destroy(NULL) != ARB_OK) {
    fprintf(stderr, "arb_report_destroy(NULL) failed\n");
    failed = 1;
  }
  if (strcmp(arb_report_json(NULL), "") != 0) {
    fprintf(stderr, "arb_report_json(NULL) is not \"\"\n");
    failed = 1;
  }
  failed |= check_verify(ctx);
  char dir[] = "/tmp/arbiter-c-abi-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  failed |= check_tune(ctx, dir);
  rmdir(dir);
  return failed;
}

/* since 1.3: a softmax plan, run on new data, and a NULL address refused. */
static int check_plan(arb_context ctx) {
  float x[8] = {0, 0, 0, 0, 1, 1, 1, 1}, y[8] = {0}, x2[8] = {2, 2, 2, 2, 0, 0, 0, 0}, y2[8] = {0};
  int64_t shape[2] = {2, 4};
  DLTensor tx = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
  DLTensor ty = {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
  arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
  args.x = &tx;
  args.y = &ty;
  arb_plan plan = NULL;
  if (arb_plan_create(ctx, ARB_OP_SOFTMAX, &args, &plan) != ARB_OK) {
    fprintf(stderr, "arb_plan_create: %s\n", arb_last_error());
    return 1;
  }
  arb_plan_operands operands = ARB_PLAN_OPERANDS_INIT;
  operands.tensors[0] = x2;
  operands.tensors[1] = y2;
  int failed = arb_plan_run(plan, &operands, NULL) != ARB_OK;
  for (int i = 0; i < 8; ++i) failed |= fabsf(y2[i] - 0.25f) > 1e-6f || y[i] != 0.0f;
  operands.tensors[1] = NULL;
  failed |= expect_error("arb_plan_run with a NULL output", arb_plan_run(plan, &operands, NULL), ARB_ERR_INVALID_ARGUMENT, NULL);
  size_t length = 0;
  failed |= arb_plan_explain(plan, NULL, 0, &length) != ARB_ERR_BUFFER_TOO_SMALL;
  char* text = malloc(length);
  failed |= text == NULL || arb_plan_explain(plan, text, length, NULL) != ARB_OK || contains(text, "plan: runs ", "arb_plan_explain");
  free(text);
  arb_plan_destroy(plan);
  if (failed) fprintf(stderr, "plan: %s\n", arb_last_error());
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
  failed |= check_reports(ctx);
  failed |= check_plan(ctx);
  arb_context_destroy(ctx);
  failed |= names_failed;
  printf("c abi: %s\n", failed ? "FAIL" : "ok");
  return failed;
}

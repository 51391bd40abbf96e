/* arb_explain, arb_explain_problem, introspection (plugins and kernels) and
 * arb_status_string. */
#include "c_bad_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVAL ARB_ERR_INVALID_ARGUMENT
#define SMALL ARB_ERR_BUFFER_TOO_SMALL
#define ANY EXPECT_ANY_ERROR

#define REPORT_BYTES 65536u
#define GUARD 0x5A

/* ---- arb_explain on an op's args -------------------------------------------------- */

/* which: the op passed; v1: what is broken (0 nothing, 1 args NULL, 2 y NULL, 3 D over A,
 * 4 eps NaN, 5 context NULL); v2: which fixture builds the args (an enum case_op). */
static void explain_args(const bad_case* c, outcome* out) {
  fx f;
  fx_init(&f, c->v2 ? (int)c->v2 : CASE_SOFTMAX);
  const void* args = f.args;
  arb_context ctx = g_ctx;
  switch (c->v1) {
    case 1: args = NULL; break;
    case 2: f.s.y = NULL; break;
    case 3: f.t[RD].data = f.t[RA].data; break;
    case 4: f.r.eps = (float)strtod("nan", NULL); break;
    case 5: ctx = NULL; break;
    default: break;
  }
  char* report = malloc(REPORT_BYTES);
  if (report == NULL) abort();
  memset(report, GUARD, REPORT_BYTES);
  size_t length = 12345;
  memcpy(f.before, f.arena, f.arena_bytes);
  took(out, arb_explain(ctx, (int32_t)c->which, args, report, REPORT_BYTES, &length));
  if (memcmp(f.before, f.arena, f.arena_bytes) != 0) failed_check(out, "explain wrote into the tensors' memory");
  if (out->status == ARB_OK && (length < 2 || length > REPORT_BYTES || report[length - 1] != '\0' ||
                                strlen(report) + 1 != length))
    failed_check(out, "the report is not NUL-terminated at *length = %zu", length);
  if (out->status == ARB_OK && length < REPORT_BYTES) {
    for (size_t i = length; i < REPORT_BYTES; ++i)
      if (report[i] != GUARD) {
        failed_check(out, "byte %zu past the report's NUL was written", i);
        break;
      }
  }
  free(report);
  fx_free(&f);
}

/* Buffer sizes: which 0: buffer NULL, capacity v1, length given; 1: buffer NULL, length
 * NULL; 2: a buffer of v1 bytes with capacity v1; 3: capacity = the size needed - 1; 4:
 * capacity = exactly the size needed (positive). Problem text: c->text, or a softmax's
 * args when text is NULL. Bytes of the buffer beyond the capacity are never written. */
static void explain_buffer(const bad_case* c, outcome* out) {
  fx f;
  fx_init(&f, CASE_SOFTMAX);
  size_t needed = 0;
  arb_status query = c->text ? arb_explain_problem(g_ctx, c->text, NULL, 0, &needed)
                             : arb_explain(g_ctx, ARB_OP_SOFTMAX, f.args, NULL, 0, &needed);
  if (query != SMALL || needed < 2 || needed > REPORT_BYTES / 2) {
    took(out, query);
    failed_check(out, "the size query (buffer NULL) gave %s and *length = %zu", arb_status_string(query), needed);
    fx_free(&f);
    return;
  }
  char* buffer = malloc(REPORT_BYTES);
  if (buffer == NULL) abort();
  memset(buffer, GUARD, REPORT_BYTES);
  char* pass = buffer;
  size_t capacity = 0, length = 0;
  size_t* length_out = &length;
  switch (c->which) {
    case 0: pass = NULL; capacity = (size_t)c->v1; break;
    case 1: pass = NULL; capacity = 0; length_out = NULL; break;
    case 2: capacity = (size_t)c->v1; break;
    case 3: capacity = needed - 1; break;
    default: capacity = needed; break;
  }
  took(out, c->text ? arb_explain_problem(g_ctx, c->text, pass, capacity, length_out)
                    : arb_explain(g_ctx, ARB_OP_SOFTMAX, f.args, pass, capacity, length_out));
  if (length_out != NULL && length != needed)
    failed_check(out, "*length = %zu, but the size query said %zu", length, needed);
  const size_t keep_from = pass == NULL ? 0 : capacity;
  for (size_t i = keep_from; i < REPORT_BYTES; ++i)
    if ((unsigned char)buffer[i] != GUARD) {
      failed_check(out, "byte %zu of the buffer (capacity %zu) was written", i, capacity);
      break;
    }
  if (out->status == ARB_OK && (buffer[needed - 1] != '\0' || strlen(buffer) + 1 != needed))
    failed_check(out, "the report is not NUL-terminated at its size");
  free(buffer);
  fx_free(&f);
}

/* Room for any report, so that a problem the parser accepts gets ARB_OK (and fails the
 * case), not ARB_ERR_BUFFER_TOO_SMALL; the bytes past the capacity are never written. */
static void explain_problem_text(const bad_case* c, outcome* out) {
  char* report = malloc(REPORT_BYTES);
  if (report == NULL) abort();
  memset(report, GUARD, REPORT_BYTES);
  const size_t capacity = REPORT_BYTES - 256;
  size_t length = 0;
  took(out, arb_explain_problem(c->which ? NULL : g_ctx, c->text, report, capacity, &length));
  for (size_t i = capacity; i < REPORT_BYTES; ++i)
    if ((unsigned char)report[i] != GUARD) {
      failed_check(out, "byte %zu beyond the capacity %zu was written", i, capacity);
      break;
    }
  if (out->status == ARB_OK) { /* show what the library made of the text */
    char* newline = strchr(report, '\n');
    if (newline != NULL) *newline = '\0';
    snprintf(out->message, sizeof out->message, "(not an error message) accepted as: %.1900s", report);
  }
  free(report);
}

/* Problem text built at run time: 2^18 unknown fields. */
static void explain_problem_built(const bad_case* c, outcome* out) {
  (void)c; /* 2^18 fields of up to 11 bytes: about 2.6 MB of text */
  const size_t fields = 1u << 18;
  char* text = malloc(fields * 12 + 64);
  if (text == NULL) abort();
  char* p = text + sprintf(text, "gemm f32 m=1 n=1 k=1");
  for (size_t i = 0; i < fields; ++i) p += sprintf(p, " f%zu=1", i); /* each an unknown field */
  *p = '\0';
  took(out, arb_explain_problem(g_ctx, text, NULL, 0, NULL));
  free(text);
}

/* ---- introspection --------------------------------------------------------------- */

static void plugin_count(const bad_case* c, outcome* out) {
  size_t count = 777;
  took(out, arb_plugin_count(c->which == 0 ? NULL : g_ctx, c->which == 1 ? NULL : &count));
  if (out->status != ARB_OK && count != 777) failed_check(out, "*count was written by a failed call");
  if (out->status == ARB_OK && count < 1) failed_check(out, "no plugin at all (the oracle is built in)");
}

/* The index of a loaded plugin with at least one kernel, or count if none. */
static size_t plugin_with_kernels(size_t* count) {
  *count = 0;
  if (arb_plugin_count(g_ctx, count) != ARB_OK) return 0;
  for (size_t i = 0; i < *count; ++i) {
    arb_plugin_info info = ARB_PLUGIN_INFO_INIT;
    if (arb_plugin_get_info(g_ctx, i, &info) == ARB_OK && info.kernel_count > 0) return i;
  }
  return *count;
}

/* which: 0 context NULL, 1 index = count, 2 index SIZE_MAX, 3 info NULL, 4 struct_size v1,
 * 5 struct_size = v1 in a heap block of exactly that size (positive: the fields beyond it
 * are not written, or ASan says so). */
static void plugin_info(const bad_case* c, outcome* out) {
  size_t count = 0;
  const size_t good = plugin_with_kernels(&count);
  const size_t block = c->which == 5 ? (size_t)c->v1 : sizeof(arb_plugin_info);
  arb_plugin_info* info = malloc(block);
  if (info == NULL) abort();
  memset(info, GUARD, block);
  info->struct_size = c->which == 4 ? (size_t)c->v1 : block;
  unsigned char before[sizeof(arb_plugin_info)];
  memcpy(before, info, block);
  arb_context ctx = c->which == 0 ? NULL : g_ctx;
  const size_t index = c->which == 1 ? count : c->which == 2 ? SIZE_MAX : good;
  took(out, arb_plugin_get_info(ctx, index, c->which == 3 ? NULL : info));
  if (out->status != ARB_OK && memcmp(before, info, block) != 0) failed_check(out, "a failed call wrote into *info");
  if (out->status == ARB_OK && (info->name == NULL || info->status == NULL || info->reason == NULL))
    failed_check(out, "a string field of a loaded plugin is NULL");
  free(info);
}

/* which: 0 context NULL, 1 plugin index out of range, 2 kernel index = kernel_count, 3
 * kernel index SIZE_MAX, 4 info NULL, 5 struct_size v1, 6 valid (positive). */
static void kernel_info(const bad_case* c, outcome* out) {
  size_t count = 0;
  const size_t good = plugin_with_kernels(&count);
  arb_plugin_info plugin = ARB_PLUGIN_INFO_INIT;
  if (good == count || arb_plugin_get_info(g_ctx, good, &plugin) != ARB_OK) {
    took(out, NO_STATUS);
    failed_check(out, "no loaded plugin with a kernel in the default context");
    return;
  }
  arb_kernel_info* info = malloc(sizeof *info);
  if (info == NULL) abort();
  memset(info, GUARD, sizeof *info);
  info->struct_size = c->which == 5 ? (size_t)c->v1 : sizeof *info;
  arb_kernel_info before = *info;
  const size_t plugin_index = c->which == 1 ? count + 3 : good;
  const size_t kernel_index = c->which == 2 ? plugin.kernel_count : c->which == 3 ? SIZE_MAX : 0;
  took(out, arb_kernel_get_info(c->which == 0 ? NULL : g_ctx, plugin_index, kernel_index, c->which == 4 ? NULL : info));
  if (out->status != ARB_OK && memcmp(&before, info, sizeof before) != 0) failed_check(out, "a failed call wrote into *info");
  if (out->status == ARB_OK && (info->name == NULL || strchr(info->name, '.') == NULL))
    failed_check(out, "the kernel's name is not \"<plugin>.<kernel>\"");
  free(info);
}

/* ---- arb_status_string ------------------------------------------------------------ */

/* Every defined status has a name of its own; a value outside the enum gets a non-empty
 * string that is not the name of a defined status (which would misreport the error). */
static void status_string(const bad_case* c, outcome* out) {
  out->status = NO_STATUS;
  out->message[0] = '\0';
  const char* names[ARB_ERR_TABLE + 1];
  for (int s = ARB_OK; s <= ARB_ERR_TABLE; ++s) {
    names[s] = arb_status_string(s);
    if (names[s] == NULL || names[s][0] == '\0') {
      failed_check(out, "arb_status_string(%d) is NULL or empty", s);
      return;
    }
    for (int other = ARB_OK; other < s; ++other)
      if (strcmp(names[s], names[other]) == 0) failed_check(out, "statuses %d and %d share the name %s", other, s, names[s]);
  }
  if (c->which == 0) { /* the defined values only */
    snprintf(out->message, sizeof out->message, "%s ... %s", names[ARB_OK], names[ARB_ERR_TABLE]);
    return;
  }
  const int32_t value = (int32_t)c->v1;
  const char* name = arb_status_string(value);
  if (name == NULL || name[0] == '\0') {
    failed_check(out, "arb_status_string(%d) is NULL or empty", (int)value);
    return;
  }
  snprintf(out->message, sizeof out->message, "%s", name);
  for (int s = ARB_OK; s <= ARB_ERR_TABLE; ++s)
    if (strcmp(name, names[s]) == 0) failed_check(out, "arb_status_string(%d) names a defined status: %s", (int)value, name);
}

#define EXPLAIN(name_, expect_, op_, broken_, fixture_)                                                         \
  {                                                                                                             \
    .name = "explain: " name_, .op = CASE_CUSTOM, .expect = (expect_), .custom = explain_args, .which = (op_), \
    .v1 = (broken_), .v2 = (fixture_)                                                                           \
  }
#define BUFFER(name_, expect_, which_, v1_, text_)                                                                \
  {                                                                                                               \
    .name = "explain buffer: " name_, .op = CASE_CUSTOM, .expect = (expect_), .custom = explain_buffer,          \
    .which = (which_), .v1 = (v1_), .text = (text_)                                                               \
  }
#define PROBLEM(name_, expect_, text_)                                                                         \
  {                                                                                                            \
    .name = "explain_problem: " name_, .op = CASE_CUSTOM, .expect = (expect_), .custom = explain_problem_text, \
    .text = (text_)                                                                                            \
  }

const bad_case misc_cases[] = {
    /* arb_explain on args */
    EXPLAIN("ok: softmax args", ARB_OK, ARB_OP_SOFTMAX, 0, CASE_SOFTMAX),
    EXPLAIN("ok: gemm args", ARB_OK, ARB_OP_GEMM, 0, CASE_GEMM),
    EXPLAIN("context NULL", INVAL, ARB_OP_SOFTMAX, 5, CASE_SOFTMAX),
    EXPLAIN("args NULL", INVAL, ARB_OP_GEMM, 1, CASE_GEMM),
    EXPLAIN("op 0 (ARB_OP_INVALID)", ANY, ARB_OP_INVALID, 0, CASE_SOFTMAX),
    EXPLAIN("op 42", ANY, 42, 0, CASE_SOFTMAX),
    EXPLAIN("op -1", ANY, -1, 0, CASE_SOFTMAX),
    EXPLAIN("op INT32_MIN", ANY, INT32_MIN, 0, CASE_SOFTMAX),
    EXPLAIN("ARB_OP_GEMM given softmax args (struct_size 24 < 72)", INVAL, ARB_OP_GEMM, 0, CASE_SOFTMAX),
    EXPLAIN("ARB_OP_SOFTMAX given gemm args (x = a [4, 5], y = b [5, 6])", INVAL, ARB_OP_SOFTMAX, 0, CASE_GEMM),
    EXPLAIN("softmax with y NULL", INVAL, ARB_OP_SOFTMAX, 2, CASE_SOFTMAX),
    EXPLAIN("gemm with D over A", INVAL, ARB_OP_GEMM, 3, CASE_GEMM),
    EXPLAIN("rmsnorm with eps NaN", ANY, ARB_OP_RMSNORM, 4, CASE_RMSNORM),

    /* report buffers */
    BUFFER("ok: capacity exactly the size needed", ARB_OK, 4, 0, NULL),
    BUFFER("buffer NULL, capacity 0", SMALL, 0, 0, NULL),
    BUFFER("buffer NULL, capacity 1 MiB", SMALL, 0, 1 << 20, NULL),
    BUFFER("buffer NULL, length NULL", SMALL, 1, 0, NULL),
    BUFFER("capacity 0 with a buffer", SMALL, 2, 0, NULL),
    BUFFER("capacity 1", SMALL, 2, 1, NULL),
    BUFFER("capacity the size needed - 1 (no room for the NUL)", SMALL, 3, 0, NULL),
    BUFFER("explain_problem, capacity the size needed - 1", SMALL, 3, 0, "gemm f32 m=8 n=8 k=8"),
    BUFFER("explain_problem ok: capacity exactly the size needed", ARB_OK, 4, 0, "gemm f32 m=8 n=8 k=8"),

    /* problem text: syntax errors are ARB_ERR_INVALID_ARGUMENT (docs/problem-syntax.md) */
    {.name = "explain_problem: context NULL", .op = CASE_CUSTOM, .expect = INVAL, .custom = explain_problem_text,
     .which = 1, .text = "gemm f32 m=8 n=8 k=8"},
    PROBLEM("problem NULL", INVAL, NULL),
    PROBLEM("empty text", INVAL, ""),
    PROBLEM("only spaces and newlines", INVAL, "  \n\t "),
    PROBLEM("an op without a dtype", INVAL, "gemm"),
    PROBLEM("unknown op", INVAL, "conv f32 m=1"),
    PROBLEM("unknown dtype f64", INVAL, "gemm f64 m=1 n=1 k=1"),
    PROBLEM("non-UTF-8 bytes", INVAL, "\xff\xfe f32 m=1"),
    PROBLEM("a key given twice", INVAL, "gemm f32 m=1 n=1 k=1 m=2"),
    PROBLEM("a missing size", INVAL, "gemm f32 m=1 n=1"),
    PROBLEM("m=0", INVAL, "gemm f32 m=0 n=1 k=1"),
    PROBLEM("m=-1", INVAL, "gemm f32 m=-1 n=1 k=1"),
    PROBLEM("m=+4 (no sign allowed)", INVAL, "gemm f32 m=+4 n=1 k=1"),
    PROBLEM("m past int64", INVAL, "gemm f32 m=99999999999999999999 n=1 k=1"),
    PROBLEM("a flag of 2", INVAL, "gemm f32 m=1 n=1 k=1 ta=2"),
    PROBLEM("alpha=1e999 (out of float range)", INVAL, "gemm f32 m=1 n=1 k=1 alpha=1e999"),
    PROBLEM("unknown activation", INVAL, "gemm f32 m=1 n=1 k=1 act=tanh"),
    PROBLEM("lda below the row length", INVAL, "gemm f32 m=4 n=4 k=4 lda=2"),
    PROBLEM("eps=nan", INVAL, "rmsnorm f32 rows=1 cols=1 eps=nan"),
    PROBLEM("device cuda:99999999999 (past int32)", INVAL, "softmax f32 rows=1 cols=1 device=cuda:99999999999"),
    PROBLEM("device cuda:-1", INVAL, "softmax f32 rows=1 cols=1 device=cuda:-1"),
    PROBLEM("device tpu", INVAL, "softmax f32 rows=1 cols=1 device=tpu"),
    PROBLEM("align=3 (not a power of two)", INVAL, "softmax f32 rows=1 cols=1 align=3"),
    PROBLEM("gemm with m = n = k = INT64_MAX (operands cannot fit in memory)", ANY,
            "gemm f32 m=9223372036854775807 n=9223372036854775807 k=9223372036854775807"),
    PROBLEM("softmax rows = cols = INT64_MAX", ANY, "softmax f32 rows=9223372036854775807 cols=9223372036854775807"),
    PROBLEM("softmax ldx = INT64_MAX over 2 rows", ANY, "softmax f32 rows=2 cols=4 ldx=9223372036854775807"),
    {.name = "explain_problem: 2^18 unknown fields (2.6 MB of text)", .op = CASE_CUSTOM, .expect = INVAL,
     .custom = explain_problem_built},

    /* introspection */
    {.name = "plugins ok: arb_plugin_count", .op = CASE_CUSTOM, .expect = ARB_OK, .custom = plugin_count, .which = 2},
    {.name = "plugins: arb_plugin_count, context NULL", .op = CASE_CUSTOM, .expect = INVAL, .custom = plugin_count,
     .which = 0},
    {.name = "plugins: arb_plugin_count, count NULL", .op = CASE_CUSTOM, .expect = INVAL, .custom = plugin_count,
     .which = 1},
    {.name = "plugins ok: struct_size = ARB_PLUGIN_INFO_STRUCT_SIZE, nothing written past it", .op = CASE_CUSTOM,
     .expect = ARB_OK, .custom = plugin_info, .which = 5, .v1 = ARB_PLUGIN_INFO_STRUCT_SIZE},
    {.name = "plugins ok: struct_size through runtime_version (1.0), sha256 (1.1) not written", .op = CASE_CUSTOM,
     .expect = ARB_OK, .custom = plugin_info, .which = 5, .v1 = ARB_STRUCT_SIZE(arb_plugin_info, runtime_version)},
    {.name = "plugins: get_info, context NULL", .op = CASE_CUSTOM, .expect = INVAL, .custom = plugin_info, .which = 0},
    {.name = "plugins: get_info, index = count", .op = CASE_CUSTOM, .expect = INVAL, .custom = plugin_info,
     .which = 1},
    {.name = "plugins: get_info, index SIZE_MAX", .op = CASE_CUSTOM, .expect = INVAL, .custom = plugin_info,
     .which = 2},
    {.name = "plugins: get_info, info NULL", .op = CASE_CUSTOM, .expect = INVAL, .custom = plugin_info, .which = 3},
    {.name = "plugins: get_info, struct_size 0", .op = CASE_CUSTOM, .expect = INVAL, .custom = plugin_info,
     .which = 4, .v1 = 0},
    {.name = "plugins: get_info, struct_size ARB_PLUGIN_INFO_STRUCT_SIZE - 1", .op = CASE_CUSTOM, .expect = INVAL,
     .custom = plugin_info, .which = 4, .v1 = ARB_PLUGIN_INFO_STRUCT_SIZE - 1},
    {.name = "kernels ok: arb_kernel_get_info", .op = CASE_CUSTOM, .expect = ARB_OK, .custom = kernel_info,
     .which = 6},
    {.name = "kernels: context NULL", .op = CASE_CUSTOM, .expect = INVAL, .custom = kernel_info, .which = 0},
    {.name = "kernels: plugin index out of range", .op = CASE_CUSTOM, .expect = INVAL, .custom = kernel_info,
     .which = 1},
    {.name = "kernels: kernel index = kernel_count", .op = CASE_CUSTOM, .expect = INVAL, .custom = kernel_info,
     .which = 2},
    {.name = "kernels: kernel index SIZE_MAX", .op = CASE_CUSTOM, .expect = INVAL, .custom = kernel_info,
     .which = 3},
    {.name = "kernels: info NULL", .op = CASE_CUSTOM, .expect = INVAL, .custom = kernel_info, .which = 4},
    {.name = "kernels: struct_size 0", .op = CASE_CUSTOM, .expect = INVAL, .custom = kernel_info, .which = 5,
     .v1 = 0},
    {.name = "kernels: struct_size ARB_KERNEL_INFO_STRUCT_SIZE - 1", .op = CASE_CUSTOM, .expect = INVAL,
     .custom = kernel_info, .which = 5, .v1 = ARB_KERNEL_INFO_STRUCT_SIZE - 1},

    /* arb_status_string */
    {.name = "status string ok: every defined status named, names distinct", .op = CASE_CUSTOM,
     .expect = EXPECT_CHECKS, .custom = status_string, .which = 0},
    {.name = "status string: -1", .op = CASE_CUSTOM, .expect = EXPECT_CHECKS, .custom = status_string, .which = 1,
     .v1 = -1},
    {.name = "status string: ARB_ERR_TABLE + 1", .op = CASE_CUSTOM, .expect = EXPECT_CHECKS, .custom = status_string,
     .which = 1, .v1 = ARB_ERR_TABLE + 1},
    {.name = "status string: INT32_MIN", .op = CASE_CUSTOM, .expect = EXPECT_CHECKS, .custom = status_string,
     .which = 1, .v1 = INT32_MIN},
    {.name = "status string: INT32_MAX", .op = CASE_CUSTOM, .expect = EXPECT_CHECKS, .custom = status_string,
     .which = 1, .v1 = INT32_MAX},
};
const size_t misc_case_count = sizeof misc_cases / sizeof misc_cases[0];

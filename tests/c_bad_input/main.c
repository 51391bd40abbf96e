/* The runner: every case of every table, one line each, then a summary; exit status 1 if
 * any case failed.
 *
 * An op case (gemm, rmsnorm, softmax) first makes the fixture's valid call and requires
 * ARB_OK (the same setup without the break succeeds), then builds the fixture again, breaks
 * one thing, fills the outputs and the guard bytes around every buffer with sentinels,
 * snapshots the whole arena and calls. A bad call must return the expected status with a
 * non-empty arb_last_error() and leave every byte of the arena as it was (the header:
 * "before any memory is touched"). A positive control must return ARB_OK with
 * arb_last_error() == "", results matching the fp64 reference, and no byte written outside
 * its outputs' elements.
 *
 * Usage: arbiter_c_bad_input_test [substring]   (runs only the cases whose name contains it) */
#define _POSIX_C_SOURCE 200809L

#include "c_bad_input.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

arb_context g_ctx = NULL;
char g_tmpdir[512];

typedef struct table {
  const char* area;
  const bad_case* cases;
  const size_t* count;
} table;

static const char* status_name(int status) {
  if (status == EXPECT_ANY_ERROR) return "any error";
  if (status == NO_STATUS) return "(no status)";
  return arb_status_string(status);
}

/* Prints a message on one line: control characters and bytes outside ASCII as \xNN. */
static void print_clean(const char* text, size_t max) {
  for (size_t i = 0; text[i] != '\0' && i < max; ++i) {
    const unsigned char byte = (unsigned char)text[i];
    if (byte < 0x20 || byte >= 0x7f)
      printf("\\x%02x", byte);
    else
      putchar(byte);
  }
}

static int matches(int expect, int status) {
  if (expect == EXPECT_ANY_ERROR) return status != ARB_OK && status != NO_STATUS;
  return status == expect;
}

/* Runs one op case; fills `out`. */
static void run_op_case(const bad_case* c, outcome* out) {
  fx f;
  if (c->expect != ARB_OK) { /* the same setup without the break succeeds */
    fx_init(&f, c->op);
    const arb_status valid = fx_call(&f);
    if (valid != ARB_OK) failed_check(out, "the valid variant failed: %s: %s", arb_status_string(valid), arb_last_error());
    fx_free(&f);
  }
  fx_init(&f, c->op);
  if (c->brk != NULL) c->brk(&f, c);
  memcpy(f.before, f.arena, f.arena_bytes);
  took(out, fx_call(&f));
  if (out->status != ARB_OK) {
    for (size_t i = 0; i < f.arena_bytes; ++i)
      if (f.arena[i] != f.before[i]) {
        failed_check(out, "a failed call wrote byte %zu of the arena (region %zu, offset %zu)", i,
                     (i - (i < GUARD_BYTES ? i : GUARD_BYTES)) / (REGION_BYTES + GUARD_BYTES),
                     i < GUARD_BYTES ? 0 : (i - GUARD_BYTES) % (REGION_BYTES + GUARD_BYTES));
        break;
      }
  } else if (c->check != NULL) {
    char why[512] = "";
    if (c->check(&f, c, why, sizeof why) != 0) failed_check(out, "wrong result: %s", why);
  }
  fx_free(&f);
}

/* Removes a folder this run made, and everything in it. */
static void remove_tree(const char* path) {
  DIR* dir = opendir(path);
  if (dir == NULL) {
    remove(path);
    return;
  }
  struct dirent* entry;
  char inner[4096];
  while ((entry = readdir(dir)) != NULL) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    snprintf(inner, sizeof inner, "%s/%s", path, entry->d_name);
    if (remove(inner) != 0) remove_tree(inner); /* a folder (remove() does not follow links) */
  }
  closedir(dir);
  rmdir(path);
}

static void remove_tmpdir(void) { remove_tree(g_tmpdir); }

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : NULL;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if ((arb_abi_version() >> 16) != ARB_ABI_VERSION_MAJOR) {
    fprintf(stderr, "c_bad_input: ABI major mismatch\n");
    return 1;
  }
  const char* tmp = getenv("TMPDIR");
  snprintf(g_tmpdir, sizeof g_tmpdir, "%s/arbiter-c-bad-input-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (mkdtemp(g_tmpdir) == NULL) {
    perror("c_bad_input: mkdtemp");
    return 1;
  }
  const arb_status created = arb_context_create(NULL, &g_ctx);
  if (created != ARB_OK) {
    fprintf(stderr, "c_bad_input: arb_context_create(NULL): %s: %s\n", arb_status_string(created), arb_last_error());
    remove_tmpdir();
    return 1;
  }

  const table tables[] = {{"gemm", gemm_cases, &gemm_case_count},
                          {"rows", row_cases, &row_case_count},
                          {"context", context_cases, &context_case_count},
                          {"misc", misc_cases, &misc_case_count}};
  int total = 0, failures = 0, positives = 0;
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; ++t) {
    for (size_t i = 0; i < *tables[t].count; ++i) {
      const bad_case* c = &tables[t].cases[i];
      if (only != NULL && strstr(c->name, only) == NULL) continue;
      printf("%-70s ", c->name);
      fflush(stdout); /* a crash leaves the case's name on the last line */
      outcome out;
      memset(&out, 0, sizeof out);
      out.status = NO_STATUS;
      if (c->op == CASE_CUSTOM)
        c->custom(c, &out);
      else
        run_op_case(c, &out);

      const int is_error = out.status != ARB_OK && out.status != NO_STATUS;
      if (c->expect != EXPECT_CHECKS && !matches(c->expect, out.status))
        failed_check(&out, "expected %s, got %s", status_name(c->expect), status_name(out.status));
      else if (is_error && out.message[0] == '\0')
        failed_check(&out, "%s with an empty arb_last_error()", status_name(out.status));
      else if (out.status == ARB_OK && out.message[0] != '\0')
        failed_check(&out, "ARB_OK but arb_last_error() is \"%s\" (documented: \"\" after a success)", out.message);
      ++total;
      if (c->expect == ARB_OK) ++positives;
      const int ok = out.failed[0] == '\0';
      if (!ok) ++failures;
      printf("%-4s %s", ok ? "ok" : "FAIL", status_name(out.status));
      if (out.message[0] != '\0') {
        printf(": ");
        print_clean(out.message, ok ? 160 : 400);
      }
      printf("\n");
      if (!ok) {
        printf("     ^^^^ ");
        print_clean(out.failed, sizeof out.failed);
        printf("\n");
      }
    }
  }
  arb_context_destroy(g_ctx);
  remove_tmpdir();
  printf("c_bad_input: %d cases (%d positive controls), %d passed, %d failed\n", total, positives, total - failures,
         failures);
  return failures != 0;
}

/* arb_context_create: options, configuration text and files, and tuning tables that
 * cannot be used. */
#define _POSIX_C_SOURCE 200809L

#include "c_bad_input.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INVAL ARB_ERR_INVALID_ARGUMENT
#define CONFIG ARB_ERR_CONFIG
#define ANY EXPECT_ANY_ERROR

/* A value *context must not keep after a failure ("On failure *context is NULL"). */
static struct arb_context_s* const kNotNull = (struct arb_context_s*)&g_tmpdir;

/* Creates a context; on failure *context must be NULL; on success it is destroyed. */
static void create(const arb_context_options* options, outcome* out) {
  arb_context ctx = kNotNull;
  took(out, arb_context_create(options, &ctx));
  if (out->status != ARB_OK && ctx != NULL) failed_check(out, "*context is not NULL after a failure");
  if (out->status == ARB_OK) {
    if (ctx == NULL || ctx == kNotNull) failed_check(out, "ARB_OK without a context");
    else arb_context_destroy(ctx);
  }
}

static void ctx_out_null(const bad_case* c, outcome* out) {
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = "log_level = \"warn\"";
  took(out, arb_context_create(c->which ? &options : NULL, NULL));
}

static void options_struct_size(const bad_case* c, outcome* out) {
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = c->text;
  options.struct_size = (size_t)c->v1;
  if (c->v1 != -1) {
    create(&options, out);
    return;
  }
  /* SIZE_MAX: a newer minor's struct; a heap block of exactly sizeof, so that a read past
   * the fields this library knows is an ASan error. */
  arb_context_options* copy = malloc(sizeof *copy);
  if (copy == NULL) abort();
  *copy = options;
  create(copy, out);
  free(copy);
}

static void both_sources(const bad_case* c, outcome* out) {
  (void)c;
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = "log_level = \"warn\"";
  options.config_path = "/nonexistent/arbiter.toml";
  create(&options, out);
}

static void config_text(const bad_case* c, outcome* out) {
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = c->text;
  create(&options, out);
}

/* Text built at run time: `which` selects it. */
static void config_built(const bad_case* c, outcome* out) {
  const size_t depth = 100000;
  char* text = malloc(2 * depth + 64);
  if (text == NULL) abort();
  char* p = text;
  switch (c->which) {
    case 0: /* arrays nested 100000 deep */
      p += sprintf(p, "x = ");
      for (size_t i = 0; i < depth; ++i) *p++ = '[';
      for (size_t i = 0; i < depth; ++i) *p++ = ']';
      *p = '\0';
      break;
    case 1: /* inline tables nested 50000 deep */
      p += sprintf(p, "x = ");
      for (size_t i = 0; i < depth / 2; ++i) p += sprintf(p, "{a=");
      *p++ = '1';
      for (size_t i = 0; i < depth / 2; ++i) *p++ = '}';
      *p = '\0';
      break;
    default: /* a key of 100000 characters */
      memset(p, 'k', depth);
      strcpy(p + depth, " = 1");
      break;
  }
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = text;
  create(&options, out);
  free(text);
}

static void write_file(const char* path, const char* bytes, size_t size) {
  FILE* file = fopen(path, "wb");
  if (file == NULL || fwrite(bytes, 1, size, file) != size || fclose(file) != 0) {
    perror(path);
    abort();
  }
}

/* A path of the case's kind in the temporary folder (made once per case). */
static void make_path(const bad_case* c, char* path, size_t size) {
  switch (c->which) {
    case 0: snprintf(path, size, "%s", c->text); return; /* as given */
    case 1: snprintf(path, size, "%s", g_tmpdir); return; /* a directory */
    case 2: /* a FIFO without a writer */
      snprintf(path, size, "%s/fifo-%lld", g_tmpdir, (long long)c->v1);
      unlink(path);
      if (mkfifo(path, 0600) != 0) {
        perror("mkfifo");
        abort();
      }
      return;
    case 3: /* a file with the case's bytes (v1 of them; text may hold NULs) */
      snprintf(path, size, "%s/file-%lld.toml", g_tmpdir, (long long)c->v2);
      write_file(path, c->text, (size_t)c->v1);
      return;
    case 4: { /* a sparse file over the documented 64 MiB limit */
      snprintf(path, size, "%s/huge-%lld.toml", g_tmpdir, (long long)c->v2);
      const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0 || ftruncate(fd, (off_t)65 << 20) != 0 || close(fd) != 0) {
        perror(path);
        abort();
      }
      return;
    }
    case 5: { /* a symbolic link loop */
      char other[600];
      snprintf(path, size, "%s/loop-a-%lld", g_tmpdir, (long long)c->v2);
      snprintf(other, sizeof other, "%s/loop-b-%lld", g_tmpdir, (long long)c->v2);
      unlink(path);
      unlink(other);
      if (symlink(other, path) != 0 || symlink(path, other) != 0) {
        perror("symlink");
        abort();
      }
      return;
    }
    default: { /* a path longer than PATH_MAX */
      const size_t length = size - 1 < 9000 ? size - 1 : 9000;
      memset(path, 'p', length);
      path[0] = '/';
      path[length] = '\0';
      return;
    }
  }
}

static void config_file(const bad_case* c, outcome* out) {
  char path[9100];
  make_path(c, path, sizeof path);
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_path = path;
  create(&options, out);
}

/* A context whose tuning table is the case's path, with only the built-in oracle loaded,
 * then a valid softmax through it: with table.policy = "strict" a table that cannot be used
 * leaves no entry, and the call fails (ARB_ERR_UNSUPPORTED) without touching memory; with
 * "replay" the context runs without the table and the call succeeds. */
static void table_file(const bad_case* c, outcome* out) {
  char path[9100], toml[10000];
  make_path(c, path, sizeof path);
  snprintf(toml, sizeof toml,
           "log_level = \"off\"\n[plugins]\nsearch_default_paths = false\n[table]\npath = \"%s\"\npolicy = \"%s\"\n",
           path, c->v3 ? "replay" : "strict");
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = toml;
  arb_context ctx = NULL;
  const arb_status created = arb_context_create(&options, &ctx);
  if (created != ARB_OK) {
    took(out, created);
    failed_check(out, "the context was not created (a table that cannot be used is documented as logged, not fatal)");
    return;
  }
  fx f;
  fx_init(&f, CASE_SOFTMAX);
  f.ctx = ctx;
  memcpy(f.before, f.arena, f.arena_bytes);
  took(out, fx_call(&f));
  if (out->status != ARB_OK && memcmp(f.before, f.arena, f.arena_bytes) != 0)
    failed_check(out, "a failed call wrote into the arena");
  char why[512] = "";
  if (out->status == ARB_OK && check_softmax(&f, c, why, sizeof why) != 0) failed_check(out, "wrong result: %s", why);
  fx_free(&f);
  arb_context_destroy(ctx);
}

/* Plugin paths that are no plugins: a FIFO, a folder, an empty file and a text file named
 * like plugins, and /dev/zero. The context is created (a plugin that cannot be loaded is
 * listed as rejected, docs/config-reference.md), every one of them is rejected, and nothing
 * hangs on the FIFO or reads /dev/zero forever. */
static void hostile_plugin_paths(const bad_case* c, outcome* out) {
  (void)c;
  char folder[600], path[700], toml[2000];
  snprintf(folder, sizeof folder, "%s/plugins", g_tmpdir);
  if (mkdir(folder, 0700) != 0) {
    perror(folder);
    abort();
  }
  snprintf(path, sizeof path, "%s/arbiter_fifo.so", folder);
  if (mkfifo(path, 0600) != 0) abort();
  snprintf(path, sizeof path, "%s/arbiter_folder.so", folder);
  if (mkdir(path, 0700) != 0) abort();
  snprintf(path, sizeof path, "%s/arbiter_empty.so", folder);
  write_file(path, "", 0);
  snprintf(path, sizeof path, "%s/arbiter_text.so", folder);
  write_file(path, "not a shared library\n", 21);
  snprintf(toml, sizeof toml,
           "log_level = \"off\"\n[plugins]\nsearch_default_paths = false\npaths = [\"%s\", \"/dev/zero\", \"%s/arbiter_fifo.so\"]\n",
           folder, folder);
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = toml;
  arb_context ctx = NULL;
  took(out, arb_context_create(&options, &ctx));
  if (out->status != ARB_OK) return;
  size_t count = 0, rejected = 0;
  arb_plugin_count(ctx, &count);
  for (size_t i = 0; i < count; ++i) {
    arb_plugin_info info = ARB_PLUGIN_INFO_INIT;
    if (arb_plugin_get_info(ctx, i, &info) != ARB_OK) {
      failed_check(out, "arb_plugin_get_info(%zu) failed: %s", i, arb_last_error());
      continue;
    }
    if (strcmp(info.status, "rejected") == 0) {
      ++rejected;
      if (info.reason == NULL || info.reason[0] == '\0') failed_check(out, "%s rejected without a reason", info.path);
    } else if (strcmp(info.name, "reference") != 0 && strcmp(info.name, "chain") != 0) {  /* the built-in ones */
      failed_check(out, "%s is %s, not rejected", info.path, info.status);
    }
  }
  if (rejected < 5) failed_check(out, "%zu plugin files rejected, expected 5 (fifo, folder, empty, text, /dev/zero)", rejected);
  arb_context_destroy(ctx);
}

#define TOML(name_, expect_, text_) \
  { .name = "config: " name_, .op = CASE_CUSTOM, .expect = (expect_), .custom = config_text, .text = (text_) }
#define FILE_CASE(name_, expect_, which_, v1_, v2_, text_)                                                       \
  {                                                                                                              \
    .name = "config file: " name_, .op = CASE_CUSTOM, .expect = (expect_), .custom = config_file, .which = (which_), \
    .v1 = (v1_), .v2 = (v2_), .text = (text_)                                                                    \
  }
#define TABLE(name_, expect_, which_, v1_, v2_, replay_, text_)                                                   \
  {                                                                                                              \
    .name = "table: " name_, .op = CASE_CUSTOM, .expect = (expect_), .custom = table_file, .which = (which_),   \
    .v1 = (v1_), .v2 = (v2_), .v3 = (replay_), .text = (text_)                                                   \
  }
/* A file holding a literal's bytes (NULs included); id names the file. */
#define FILE_BYTES(name_, id_, literal_)                                                                         \
  {                                                                                                              \
    .name = "config file: " name_, .op = CASE_CUSTOM, .expect = CONFIG, .custom = config_file, .which = 3,      \
    .v1 = (int64_t)(sizeof literal_ - 1), .v2 = (id_), .text = literal_                                          \
  }
#define TABLE_BYTES(name_, expect_, id_, replay_, literal_)                                                      \
  {                                                                                                              \
    .name = "table: " name_, .op = CASE_CUSTOM, .expect = (expect_), .custom = table_file, .which = 3,          \
    .v1 = (int64_t)(sizeof literal_ - 1), .v2 = (id_), .v3 = (replay_), .text = literal_                         \
  }
#define UNSUP ARB_ERR_UNSUPPORTED

const bad_case context_cases[] = {
    /* options */
    {.name = "context ok: minimal config_toml", .op = CASE_CUSTOM, .expect = ARB_OK, .custom = config_text,
     .text = "log_level = \"warn\"\n"},
    {.name = "context ok: options struct_size = SIZE_MAX (a newer minor's struct)", .op = CASE_CUSTOM,
     .expect = ARB_OK, .custom = options_struct_size, .v1 = -1, .text = "log_level = \"warn\"\n"},
    {.name = "context: the output pointer NULL, options NULL", .op = CASE_CUSTOM, .expect = INVAL,
     .custom = ctx_out_null, .which = 0},
    {.name = "context: the output pointer NULL, valid options", .op = CASE_CUSTOM, .expect = INVAL,
     .custom = ctx_out_null, .which = 1},
    {.name = "context: options struct_size 0", .op = CASE_CUSTOM, .expect = INVAL, .custom = options_struct_size,
     .v1 = 0, .text = "log_level = \"warn\"\n"},
    {.name = "context: options struct_size ARB_CONTEXT_OPTIONS_STRUCT_SIZE - 1", .op = CASE_CUSTOM, .expect = INVAL,
     .custom = options_struct_size, .v1 = ARB_CONTEXT_OPTIONS_STRUCT_SIZE - 1, .text = "log_level = \"warn\"\n"},
    {.name = "context: both config_path and config_toml", .op = CASE_CUSTOM, .expect = INVAL,
     .custom = both_sources},

    /* configuration text */
    TOML("syntax: a key without a value", CONFIG, "log_level = \n"),
    TOML("syntax: an unterminated table header", CONFIG, "[plugins\npaths = []\n"),
    TOML("syntax: an unterminated string", CONFIG, "log_level = \"warn\n"),
    TOML("a key given twice", CONFIG, "log_level = \"warn\"\nlog_level = \"warn\"\n"),
    TOML("unknown top-level key", CONFIG, "colour = \"blue\"\n"),
    TOML("unknown key in [dispatch] (a typo)", CONFIG, "[dispatch]\non_mis = \"error\"\n"),
    TOML("unknown table", CONFIG, "[nonsense]\nx = 1\n"),
    TOML("log_level an integer", CONFIG, "log_level = 3\n"),
    TOML("plugins.paths a string", CONFIG, "[plugins]\npaths = \"plugins\"\n"),
    TOML("plugins.search_default_paths a string", CONFIG, "[plugins]\nsearch_default_paths = \"yes\"\n"),
    TOML("table.path an integer", CONFIG, "[table]\npath = 5\n"),
    TOML("log_level \"loud\"", CONFIG, "log_level = \"loud\"\n"),
    TOML("table.policy \"sometimes\"", CONFIG, "[table]\npolicy = \"sometimes\"\n"),
    TOML("dispatch.on_miss \"panic\"", CONFIG, "[dispatch]\non_miss = \"panic\"\n"),
    TOML("an integer past int64 (TOML overflow)", CONFIG, "[plugins]\nprobe_time_limit_s = 99999999999999999999999\n"),
    TOML("plugins.probe_time_limit_s INT64_MAX (1 to 3600)", CONFIG,
         "[plugins]\nprobe_time_limit_s = 9223372036854775807\n"),
    TOML("plugins.probe_time_limit_s INT64_MIN", CONFIG, "[plugins]\nprobe_time_limit_s = -9223372036854775808\n"),
    TOML("plugins.priority 2^32 (a 32-bit integer)", CONFIG, "[plugins.priority]\ncpu = 4294967296\n"),
    TOML("verify.trials 2 (at least 3)", CONFIG, "[verify]\ntrials = 2\n"),
    TOML("tune.budget_ms inf", ANY, "[tune]\nbudget_ms = inf\n"),
    TOML("tune.screen_factor nan", ANY, "[tune]\nscreen_factor = nan\n"),
    TOML("verify.allow_unverified (removed in 1.1)", CONFIG, "[verify]\nallow_unverified = true\n"),
    TOML("override with an unknown op", CONFIG, "[[dispatch.override]]\nop = \"conv\"\nkernel = \"cpu.x\"\n"),
    TOML("override kernel without a '.'", CONFIG, "[[dispatch.override]]\nop = \"gemm\"\nkernel = \"nodot\"\n"),
    TOML("override without a kernel", CONFIG, "[[dispatch.override]]\nop = \"gemm\"\n"),
    TOML("override range low above high", CONFIG,
         "[[dispatch.override]]\nop = \"gemm\"\nkernel = \"cpu.k\"\nm = [64, 1]\n"),
    TOML("override rows on gemm", CONFIG, "[[dispatch.override]]\nop = \"gemm\"\nkernel = \"cpu.k\"\nrows = 4\n"),
    TOML("plugins.trust sha256 of 3 digits", CONFIG, "[[plugins.trust]]\npath = \"/x.so\"\nsha256 = \"abc\"\n"),
    TOML("non-UTF-8 bytes in a string", CONFIG, "log_level = \"\xff\xfe\"\n"),
    TOML("non-UTF-8 bytes in a comment", CONFIG, "# \xc3\x28\xa0\xa1\nlog_level = \"warn\"\n"),
    TOML("non-UTF-8 bytes as a key", CONFIG, "\xff\xfe = 1\n"),
    TOML("a control character in a string", CONFIG, "log_level = \"wa\x01rn\"\n"),
    {.name = "config: arrays nested 100000 deep", .op = CASE_CUSTOM, .expect = CONFIG, .custom = config_built,
     .which = 0},
    {.name = "config: inline tables nested 50000 deep", .op = CASE_CUSTOM, .expect = CONFIG, .custom = config_built,
     .which = 1},
    {.name = "config: a key of 100000 characters", .op = CASE_CUSTOM, .expect = CONFIG, .custom = config_built,
     .which = 2},

    {.name = "context ok: plugin paths to a FIFO, a folder, empty and text files, /dev/zero: all rejected",
     .op = CASE_CUSTOM, .expect = ARB_OK, .custom = hostile_plugin_paths},

    /* configuration files */
    FILE_CASE("does not exist", CONFIG, 0, 0, 0, "/nonexistent/arbiter-c-bad-input.toml"),
    FILE_CASE("empty path", CONFIG, 0, 0, 0, ""),
    FILE_CASE("a path with non-UTF-8 bytes", CONFIG, 0, 0, 0, "/nonexistent/\xff\xfe.toml"),
    FILE_CASE("a path longer than PATH_MAX", CONFIG, 6, 0, 0, NULL),
    FILE_CASE("a directory", CONFIG, 1, 0, 0, NULL),
    FILE_CASE("/dev/zero", CONFIG, 0, 0, 0, "/dev/zero"),
    FILE_CASE("a FIFO without a writer", CONFIG, 2, 1, 0, NULL),
    FILE_CASE("a symbolic link loop", CONFIG, 5, 0, 1, NULL),
    FILE_CASE("65 MiB (over the 64 MiB limit)", CONFIG, 4, 0, 1, NULL),
    FILE_BYTES("invalid TOML", 1, "[plugins\nthis is = = not toml\n"),
    FILE_BYTES("binary bytes with NULs", 2, "log_level = \"warn\"\n\0\xff\xfe\x01garbage\n"),
    FILE_BYTES("an unknown key, in a file", 3, "[plugins]\nsearch_default_path = false\n"),

    /* tuning tables that cannot be used: with table.policy = "strict" every call is refused */
    TABLE_BYTES("replay with a corrupt table: the context runs without it (positive control)", ARB_OK, 10, 1,
                "this is not a table [[[\n"),
    TABLE_BYTES("strict, invalid TOML", UNSUP, 11, 0, "this is not a table [[[\n"),
    TABLE_BYTES("strict, binary bytes with NULs", UNSUP, 12, 0, "schema = 1\n\0\xff\xfe\x80\n"),
    TABLE_BYTES("strict, an empty file (no schema)", UNSUP, 13, 0, ""),
    TABLE_BYTES("strict, schema 2", UNSUP, 14, 0, "schema = 2\n"),
    TABLE_BYTES("strict, schema past int64", UNSUP, 15, 0, "schema = 99999999999999999999999\n"),
    TABLE_BYTES("strict, an entry with samples = -1 and median_us = nan", UNSUP, 16, 0,
                "schema = 1\n[[entry]]\nkey = \"softmax f32 rows=3 cols=5 ldx=5 ldy=5\"\ndevice = \"x\"\n"
                "kernel = \"reference.softmax\"\nmedian_us = nan\nsamples = -1\nverified = true\n"),
    TABLE("strict, the path is a directory", UNSUP, 1, 0, 0, 0, NULL),
    TABLE("strict, the path is /dev/zero", UNSUP, 0, 0, 0, 0, "/dev/zero"),
    TABLE("strict, the path is a FIFO without a writer", UNSUP, 2, 2, 0, 0, NULL),
    TABLE("strict, 65 MiB (over the 64 MiB limit)", UNSUP, 4, 0, 17, 0, NULL),
    TABLE("strict, a symbolic link loop", UNSUP, 5, 0, 18, 0, NULL),
};
const size_t context_case_count = sizeof context_cases / sizeof context_cases[0];

/* c_gemm_rmsnorm.c: arbiter from plain C11.
 *
 * Runs Y = rmsnorm(relu(A * B + bias)) * w on the CPU through libarbiter, with DLPack
 * tensors built by hand, checks both results against a naive computation done here, and
 * prints what arb_explain_problem says about the GEMM. Exits 0 only if every element
 * matches to 1e-4 (relative, with a floor of 1 on the magnitude).
 *
 * Build: cc c_gemm_rmsnorm.c $(pkg-config --cflags --libs arbiter) -lm */
#include <arbiter/arbiter.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { M = 4, N = 8, K = 16 };

/* Prints a failed call's status and message; returns 1 on success, 0 on failure. */
static int ok(arb_status status, const char* what) {
  if (status == ARB_OK) return 1;
  fprintf(stderr, "%s failed: %s: %s\n", what, arb_status_string(status), arb_last_error());
  return 0;
}

/* Small, exactly representable inputs with both signs, so relu has work to do. */
static float input(int i, int salt) { return (float)((i * 7 + salt) % 17 - 8) / 8.0f; }

static int close_enough(const char* name, const float* got, const double* want, int count) {
  for (int i = 0; i < count; ++i) {
    const double magnitude = fabs(want[i]) > 1.0 ? fabs(want[i]) : 1.0;
    if (!(fabs(got[i] - want[i]) <= 1e-4 * magnitude)) {
      fprintf(stderr, "%s[%d] = %.7g, expected %.7g\n", name, i, got[i], want[i]);
      return 0;
    }
  }
  return 1;
}

static void print_matrix(const char* name, const float* x, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    printf("%s[%d] =", name, r);
    for (int c = 0; c < cols; ++c) printf(" %7.3f", x[r * cols + c]);
    printf("\n");
  }
}

/* Prints arb_explain_problem's report for a problem written in the problem syntax. */
static int explain(arb_context ctx, const char* problem) {
  size_t length = 0;
  arb_status status = arb_explain_problem(ctx, problem, NULL, 0, &length);
  if (status != ARB_ERR_BUFFER_TOO_SMALL) return ok(status, "arb_explain_problem");
  char* report = malloc(length);
  if (report == NULL) return 0;
  const int good = ok(arb_explain_problem(ctx, problem, report, length, &length), "arb_explain_problem");
  if (good) printf("\narb_explain_problem(\"%s\"):\n%s", problem, report);
  free(report);
  return good;
}

int main(void) {
  if (arb_abi_version() >> 16 != ARB_ABI_VERSION_MAJOR) {
    fprintf(stderr, "libarbiter has application ABI %u.x, this program was built for %d.x\n",
            (unsigned)(arb_abi_version() >> 16), ARB_ABI_VERSION_MAJOR);
    return 1;
  }
  printf("libarbiter %s, application ABI %u.%u\n", arb_library_version(), (unsigned)(arb_abi_version() >> 16),
         (unsigned)(arb_abi_version() & 0xffff));

  static float A[M * K], B[K * N], BIAS[N], D[M * N], W[N], Y[M * N];
  for (int i = 0; i < M * K; ++i) A[i] = input(i, 1);
  for (int i = 0; i < K * N; ++i) B[i] = input(i, 5);
  for (int i = 0; i < N; ++i) BIAS[i] = input(i, 3);
  for (int i = 0; i < N; ++i) W[i] = 0.5f + 0.125f * (float)i;

  /* DLPack tensors over our arrays: row-major, so the last stride is 1. */
  int64_t a_shape[2] = {M, K}, a_strides[2] = {K, 1};
  int64_t b_shape[2] = {K, N}, b_strides[2] = {N, 1};
  int64_t d_shape[2] = {M, N}, d_strides[2] = {N, 1};
  int64_t n_shape[1] = {N}, n_strides[1] = {1};
  const DLDevice cpu = {kDLCPU, 0};
  const DLDataType f32 = {kDLFloat, 32, 1};
  DLTensor a = {.data = A, .device = cpu, .ndim = 2, .dtype = f32, .shape = a_shape, .strides = a_strides};
  DLTensor b = {.data = B, .device = cpu, .ndim = 2, .dtype = f32, .shape = b_shape, .strides = b_strides};
  DLTensor d = {.data = D, .device = cpu, .ndim = 2, .dtype = f32, .shape = d_shape, .strides = d_strides};
  DLTensor y = {.data = Y, .device = cpu, .ndim = 2, .dtype = f32, .shape = d_shape, .strides = d_strides};
  DLTensor bias = {.data = BIAS, .device = cpu, .ndim = 1, .dtype = f32, .shape = n_shape, .strides = n_strides};
  DLTensor w = {.data = W, .device = cpu, .ndim = 1, .dtype = f32, .shape = n_shape, .strides = n_strides};

  /* ---- the core: one context, two calls, every status checked ---- */
  arb_gemm_args gemm = ARB_GEMM_ARGS_INIT; /* D = relu(A.B + bias); alpha 1, beta 0 */
  gemm.a = &a; gemm.b = &b; gemm.bias = &bias; gemm.d = &d; gemm.activation = ARB_ACT_RELU;
  arb_rmsnorm_args norm = ARB_RMSNORM_ARGS_INIT; /* Y = D / sqrt(mean(D^2) + eps) * w */
  norm.x = &d; norm.weight = &w; norm.y = &y;

  arb_context ctx = NULL;
  int good = ok(arb_context_create(NULL, &ctx), "arb_context_create") && /* embedded default config */
             ok(arb_gemm(ctx, &gemm, NULL), "arb_gemm") &&                /* NULL stream: CPU */
             ok(arb_rmsnorm(ctx, &norm, NULL), "arb_rmsnorm");

  if (good) {
    /* The same computation, naively, in double. */
    double want_d[M * N], want_y[M * N];
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        double v = BIAS[j];
        for (int q = 0; q < K; ++q) v += (double)A[i * K + q] * B[q * N + j];
        want_d[i * N + j] = v > 0.0 ? v : 0.0;
      }
      /* RMSNorm reads the float D the library wrote, so normalise that. */
      double sum_sq = 0.0;
      for (int j = 0; j < N; ++j) sum_sq += (double)D[i * N + j] * D[i * N + j];
      const double scale = 1.0 / sqrt(sum_sq / N + (double)norm.eps);
      for (int j = 0; j < N; ++j) want_y[i * N + j] = D[i * N + j] * scale * W[j];
    }
    print_matrix("D", D, M, N);
    print_matrix("Y", Y, M, N);
    good = close_enough("D", D, want_d, M * N) && close_enough("Y", Y, want_y, M * N);
    printf("check: %s\n", good ? "D and Y match the naive computation" : "MISMATCH");
  }

  if (good) {
    char problem[128];
    snprintf(problem, sizeof problem, "gemm f32 m=%d n=%d k=%d bias=1 act=relu", M, N, K);
    good = explain(ctx, problem);
  }

  good = ok(arb_context_destroy(ctx), "arb_context_destroy") && good;
  return good ? 0 : 1;
}

// The ABI layout, frozen. Every struct that crosses a boundary (application <-> libarbiter,
// libarbiter <-> plugin) is checked field by field. If one of these fails, a field was
// removed, moved or retyped: that is a major version bump (ABI rule 2, docs/architecture.md).
// Appending a field adds lines here and bumps the minor version.
#include <arbiter/arbiter.h>
#include <arbiter/plugin.h>

#include <doctest/doctest.h>

#include <cstddef>

static_assert(sizeof(void*) == 8, "the frozen layout below is for LP64 platforms");

// arb_context_options
static_assert(offsetof(arb_context_options, struct_size) == 0);
static_assert(offsetof(arb_context_options, config_path) == 8);
static_assert(offsetof(arb_context_options, config_toml) == 16);
static_assert(sizeof(arb_context_options) == 24);
// arb_gemm_args
static_assert(offsetof(arb_gemm_args, struct_size) == 0);
static_assert(offsetof(arb_gemm_args, a) == 8);
static_assert(offsetof(arb_gemm_args, b) == 16);
static_assert(offsetof(arb_gemm_args, c) == 24);
static_assert(offsetof(arb_gemm_args, bias) == 32);
static_assert(offsetof(arb_gemm_args, d) == 40);
static_assert(offsetof(arb_gemm_args, trans_a) == 48);
static_assert(offsetof(arb_gemm_args, trans_b) == 52);
static_assert(offsetof(arb_gemm_args, activation) == 56);
static_assert(offsetof(arb_gemm_args, reserved) == 60);
static_assert(offsetof(arb_gemm_args, alpha) == 64);
static_assert(offsetof(arb_gemm_args, beta) == 68);
static_assert(sizeof(arb_gemm_args) == 72);
// arb_rmsnorm_args
static_assert(offsetof(arb_rmsnorm_args, struct_size) == 0);
static_assert(offsetof(arb_rmsnorm_args, x) == 8);
static_assert(offsetof(arb_rmsnorm_args, residual) == 16);
static_assert(offsetof(arb_rmsnorm_args, weight) == 24);
static_assert(offsetof(arb_rmsnorm_args, y) == 32);
static_assert(offsetof(arb_rmsnorm_args, eps) == 40);
static_assert(offsetof(arb_rmsnorm_args, reserved) == 44);
static_assert(sizeof(arb_rmsnorm_args) == 48);
// arb_softmax_args
static_assert(offsetof(arb_softmax_args, struct_size) == 0);
static_assert(offsetof(arb_softmax_args, x) == 8);
static_assert(offsetof(arb_softmax_args, y) == 16);
static_assert(sizeof(arb_softmax_args) == 24);
// arb_plugin_info
static_assert(offsetof(arb_plugin_info, struct_size) == 0);
static_assert(offsetof(arb_plugin_info, name) == 8);
static_assert(offsetof(arb_plugin_info, version) == 16);
static_assert(offsetof(arb_plugin_info, build_id) == 24);
static_assert(offsetof(arb_plugin_info, path) == 32);
static_assert(offsetof(arb_plugin_info, description) == 40);
static_assert(offsetof(arb_plugin_info, status) == 48);
static_assert(offsetof(arb_plugin_info, reason) == 56);
static_assert(offsetof(arb_plugin_info, abi_major) == 64);
static_assert(offsetof(arb_plugin_info, abi_minor) == 68);
static_assert(offsetof(arb_plugin_info, provenance) == 72);
static_assert(offsetof(arb_plugin_info, priority) == 76);
static_assert(offsetof(arb_plugin_info, kernel_count) == 80);
static_assert(offsetof(arb_plugin_info, runtime_version) == 88);
static_assert(offsetof(arb_plugin_info, sha256) == 96);
static_assert(offsetof(arb_plugin_info, origin) == 104);
static_assert(offsetof(arb_plugin_info, trust) == 112);
static_assert(offsetof(arb_plugin_info, reserved) == 116);
static_assert(sizeof(arb_plugin_info) == 120);
static_assert(ARB_PLUGIN_TRUST_NONE == 0 && ARB_PLUGIN_TRUST_ORACLE == 1 && ARB_PLUGIN_TRUST_CONFIG == 2 &&
              ARB_PLUGIN_TRUST_HOST == 3);
// arb_kernel_info
static_assert(offsetof(arb_kernel_info, struct_size) == 0);
static_assert(offsetof(arb_kernel_info, name) == 8);
static_assert(offsetof(arb_kernel_info, op) == 16);
static_assert(offsetof(arb_kernel_info, device_type) == 20);
static_assert(offsetof(arb_kernel_info, provenance) == 24);
static_assert(offsetof(arb_kernel_info, priority) == 28);
static_assert(offsetof(arb_kernel_info, flags) == 32);
static_assert(offsetof(arb_kernel_info, reserved) == 36);
static_assert(sizeof(arb_kernel_info) == 40);
// arb_verify_options (since 1.2)
static_assert(offsetof(arb_verify_options, struct_size) == 0);
static_assert(offsetof(arb_verify_options, problem) == 8);
static_assert(offsetof(arb_verify_options, kernel) == 16);
static_assert(offsetof(arb_verify_options, flags) == 24);
static_assert(offsetof(arb_verify_options, reserved) == 28);
static_assert(sizeof(arb_verify_options) == 32);
static_assert(ARB_VERIFY_FULL == 0x1u);
// arb_tune_options (since 1.2)
static_assert(offsetof(arb_tune_options, struct_size) == 0);
static_assert(offsetof(arb_tune_options, problems) == 8);
static_assert(offsetof(arb_tune_options, problem_count) == 16);
static_assert(offsetof(arb_tune_options, suite_path) == 24);
static_assert(offsetof(arb_tune_options, table_path) == 32);
static_assert(offsetof(arb_tune_options, progress) == 40);
static_assert(offsetof(arb_tune_options, progress_user_data) == 48);
static_assert(sizeof(arb_tune_options) == 56);
// arb_plan_operands (since 1.3)
static_assert(offsetof(arb_plan_operands, struct_size) == 0);
static_assert(offsetof(arb_plan_operands, tensors) == 8);
static_assert(offsetof(arb_plan_operands, tensors[4]) == 40);  // 1.3-1.7: five tensors, 48 bytes
static_assert(offsetof(arb_plan_operands, tensors[5]) == 48);  // since 1.8: eight (mlp's six)
static_assert(offsetof(arb_plan_operands, tensors[7]) == 64);
static_assert(sizeof(arb_plan_operands) == 72);
static_assert(ARB_PLAN_MAX_TENSORS == 8);
// arb_problem
static_assert(offsetof(arb_problem, struct_size) == 0);
static_assert(offsetof(arb_problem, op) == 8);
static_assert(offsetof(arb_problem, dtype) == 12);
static_assert(offsetof(arb_problem, device_type) == 16);
static_assert(offsetof(arb_problem, device_id) == 20);
static_assert(offsetof(arb_problem, alignment) == 24);
static_assert(offsetof(arb_problem, flags) == 28);
static_assert(offsetof(arb_problem, m) == 32);
static_assert(offsetof(arb_problem, n) == 40);
static_assert(offsetof(arb_problem, k) == 48);
static_assert(offsetof(arb_problem, batch) == 56);
static_assert(offsetof(arb_problem, lda) == 64);
static_assert(offsetof(arb_problem, ldb) == 72);
static_assert(offsetof(arb_problem, ldc) == 80);
static_assert(offsetof(arb_problem, ldd) == 88);
static_assert(offsetof(arb_problem, trans_a) == 96);
static_assert(offsetof(arb_problem, trans_b) == 100);
static_assert(offsetof(arb_problem, activation) == 104);
static_assert(offsetof(arb_problem, has_c) == 108);
static_assert(offsetof(arb_problem, has_bias) == 112);
static_assert(offsetof(arb_problem, c_is_d) == 116);
static_assert(offsetof(arb_problem, rows) == 120);
static_assert(offsetof(arb_problem, cols) == 128);
static_assert(offsetof(arb_problem, ld_x) == 136);
static_assert(offsetof(arb_problem, ld_y) == 144);
static_assert(offsetof(arb_problem, ld_residual) == 152);
static_assert(offsetof(arb_problem, has_residual) == 160);
static_assert(offsetof(arb_problem, reserved) == 164);
static_assert(offsetof(arb_problem, ld_gate) == 168);  // since 1.1 of the plugin ABI: swiglu
static_assert(offsetof(arb_problem, ld_up) == 176);
static_assert(offsetof(arb_problem, heads) == 184);  // since 1.2 of the plugin ABI: rope
static_assert(offsetof(arb_problem, ld_head) == 192);
static_assert(offsetof(arb_problem, max_position) == 200);
static_assert(offsetof(arb_problem, rope_theta) == 208);
static_assert(offsetof(arb_problem, rope_layout) == 216);
static_assert(offsetof(arb_problem, reserved_rope) == 220);
static_assert(offsetof(arb_problem, q_len) == 224);  // since 1.3 of the plugin ABI: attention
static_assert(offsetof(arb_problem, kv_len) == 232);
static_assert(offsetof(arb_problem, kv_heads) == 240);
static_assert(offsetof(arb_problem, ld_q_batch) == 248);
static_assert(offsetof(arb_problem, ld_q_token) == 256);
static_assert(offsetof(arb_problem, ld_q_head) == 264);
static_assert(offsetof(arb_problem, ld_k_batch) == 272);
static_assert(offsetof(arb_problem, ld_k_token) == 280);
static_assert(offsetof(arb_problem, ld_k_head) == 288);
static_assert(offsetof(arb_problem, ld_v_batch) == 296);
static_assert(offsetof(arb_problem, ld_v_token) == 304);
static_assert(offsetof(arb_problem, ld_v_head) == 312);
static_assert(offsetof(arb_problem, ld_o_batch) == 320);
static_assert(offsetof(arb_problem, ld_o_token) == 328);
static_assert(offsetof(arb_problem, ld_o_head) == 336);
static_assert(offsetof(arb_problem, causal) == 344);
static_assert(offsetof(arb_problem, reserved_attention) == 348);
static_assert(offsetof(arb_problem, inter) == 352);  // since 1.4 of the plugin ABI: mlp
static_assert(offsetof(arb_problem, ld_down) == 360);
static_assert(offsetof(arb_problem, head_dim) == 368);  // since 1.5 of the plugin ABI: qkv
static_assert(offsetof(arb_problem, ld_w) == 376);
static_assert(sizeof(arb_problem) == 384);
// arb_operands
static_assert(offsetof(arb_operands, struct_size) == 0);
static_assert(offsetof(arb_operands, a) == 8);
static_assert(offsetof(arb_operands, b) == 16);
static_assert(offsetof(arb_operands, c) == 24);
static_assert(offsetof(arb_operands, bias) == 32);
static_assert(offsetof(arb_operands, d) == 40);
static_assert(offsetof(arb_operands, x) == 48);
static_assert(offsetof(arb_operands, residual) == 56);
static_assert(offsetof(arb_operands, weight) == 64);
static_assert(offsetof(arb_operands, y) == 72);
static_assert(offsetof(arb_operands, alpha) == 80);
static_assert(offsetof(arb_operands, beta) == 84);
static_assert(offsetof(arb_operands, eps) == 88);
static_assert(offsetof(arb_operands, reserved) == 92);
static_assert(offsetof(arb_operands, gate) == 96);  // since 1.1 of the plugin ABI: swiglu
static_assert(offsetof(arb_operands, up) == 104);
static_assert(offsetof(arb_operands, positions) == 112);  // since 1.2 of the plugin ABI: rope
static_assert(offsetof(arb_operands, q) == 120);  // since 1.3 of the plugin ABI: attention
static_assert(offsetof(arb_operands, k) == 128);
static_assert(offsetof(arb_operands, v) == 136);
static_assert(offsetof(arb_operands, o) == 144);
static_assert(offsetof(arb_operands, down) == 152);  // since 1.4 of the plugin ABI: mlp
static_assert(sizeof(arb_operands) == 160);
// arb_kernel
static_assert(offsetof(arb_kernel, struct_size) == 0);
static_assert(offsetof(arb_kernel, name) == 8);
static_assert(offsetof(arb_kernel, op) == 16);
static_assert(offsetof(arb_kernel, device_type) == 20);
static_assert(offsetof(arb_kernel, provenance) == 24);
static_assert(offsetof(arb_kernel, priority) == 28);
static_assert(offsetof(arb_kernel, flags) == 32);
static_assert(offsetof(arb_kernel, reserved) == 36);
static_assert(offsetof(arb_kernel, ctx) == 40);
static_assert(offsetof(arb_kernel, supports) == 48);
static_assert(offsetof(arb_kernel, workspace_size) == 56);
static_assert(offsetof(arb_kernel, launch) == 64);
static_assert(sizeof(arb_kernel) == 72);
// arb_plugin_descriptor
static_assert(offsetof(arb_plugin_descriptor, struct_size) == 0);
static_assert(offsetof(arb_plugin_descriptor, abi_major) == 8);
static_assert(offsetof(arb_plugin_descriptor, abi_minor) == 12);
static_assert(offsetof(arb_plugin_descriptor, name) == 16);
static_assert(offsetof(arb_plugin_descriptor, version) == 24);
static_assert(offsetof(arb_plugin_descriptor, build_id) == 32);
static_assert(offsetof(arb_plugin_descriptor, provenance) == 40);
static_assert(offsetof(arb_plugin_descriptor, priority) == 44);
static_assert(offsetof(arb_plugin_descriptor, kernels) == 48);
static_assert(offsetof(arb_plugin_descriptor, kernel_count) == 56);
static_assert(offsetof(arb_plugin_descriptor, description) == 64);
static_assert(offsetof(arb_plugin_descriptor, plugin_ctx) == 72);
static_assert(offsetof(arb_plugin_descriptor, release) == 80);
static_assert(offsetof(arb_plugin_descriptor, runtime_version) == 88);
static_assert(sizeof(arb_plugin_descriptor) == 96);
// arb_host_api
static_assert(offsetof(arb_host_api, struct_size) == 0);
static_assert(offsetof(arb_host_api, abi_major) == 8);
static_assert(offsetof(arb_host_api, abi_minor) == 12);
static_assert(offsetof(arb_host_api, host_version) == 16);
static_assert(offsetof(arb_host_api, host_ctx) == 24);
static_assert(offsetof(arb_host_api, log) == 32);
static_assert(sizeof(arb_host_api) == 40);

// The size constants: each struct's version 1.0, the least struct_size accepted, frozen like
// the offsets. Fields beyond a constant are the ones noted `optional, since 1.0` (or, later,
// `since 1.N`); appending a field never changes a constant.
static_assert(ARB_STRUCT_SIZE(arb_gemm_args, alpha) == 68);  // the helper: offsetof + sizeof of the field
static_assert(ARB_CONTEXT_OPTIONS_STRUCT_SIZE == 24);
static_assert(ARB_GEMM_ARGS_STRUCT_SIZE == 72);
static_assert(ARB_RMSNORM_ARGS_STRUCT_SIZE == 44);
static_assert(ARB_SOFTMAX_ARGS_STRUCT_SIZE == 24);
static_assert(ARB_PLUGIN_INFO_STRUCT_SIZE == 88);  // runtime_version: optional, since 1.0
static_assert(ARB_KERNEL_INFO_STRUCT_SIZE == 40);
static_assert(ARB_VERIFY_OPTIONS_STRUCT_SIZE == 32);  // added in 1.2: the size of its first version
static_assert(ARB_TUNE_OPTIONS_STRUCT_SIZE == 56);    // added in 1.2: the size of its first version
static_assert(ARB_PLAN_OPERANDS_STRUCT_SIZE == 48);   // added in 1.3: the size of its first version
static_assert(ARB_SWIGLU_ARGS_STRUCT_SIZE == 32);     // added in 1.4: the size of its first version
static_assert(offsetof(arb_swiglu_args, gate) == 8 && offsetof(arb_swiglu_args, up) == 16 &&
              offsetof(arb_swiglu_args, y) == 24 && sizeof(arb_swiglu_args) == 32);
static_assert(ARB_ROPE_ARGS_STRUCT_SIZE == 48);  // added in 1.5: the size of its first version
static_assert(offsetof(arb_rope_args, x) == 8 && offsetof(arb_rope_args, positions) == 16 &&
              offsetof(arb_rope_args, theta) == 24 && offsetof(arb_rope_args, max_position) == 32 &&
              offsetof(arb_rope_args, layout) == 40 && offsetof(arb_rope_args, reserved) == 44 &&
              sizeof(arb_rope_args) == 48);
static_assert(ARB_MLP_ARGS_STRUCT_SIZE == 64);  // added in 1.7: the size of its first version
static_assert(offsetof(arb_mlp_args, x) == 8 && offsetof(arb_mlp_args, norm_weight) == 16 &&
              offsetof(arb_mlp_args, gate) == 24 && offsetof(arb_mlp_args, up) == 32 &&
              offsetof(arb_mlp_args, down) == 40 && offsetof(arb_mlp_args, y) == 48 &&
              offsetof(arb_mlp_args, eps) == 56 && offsetof(arb_mlp_args, reserved) == 60 &&
              sizeof(arb_mlp_args) == 64);
// since 1.8
static_assert(offsetof(arb_qkv_args, x) == 8 && offsetof(arb_qkv_args, norm_weight) == 16 &&
              offsetof(arb_qkv_args, weight) == 24 && offsetof(arb_qkv_args, positions) == 32 &&
              offsetof(arb_qkv_args, y) == 40 && offsetof(arb_qkv_args, heads) == 48 &&
              offsetof(arb_qkv_args, kv_heads) == 56 && offsetof(arb_qkv_args, theta) == 64 &&
              offsetof(arb_qkv_args, max_position) == 72 && offsetof(arb_qkv_args, eps) == 80 &&
              offsetof(arb_qkv_args, layout) == 84 && sizeof(arb_qkv_args) == 88 && ARB_QKV_ARGS_STRUCT_SIZE == 88);
static_assert(ARB_ATTENTION_ARGS_STRUCT_SIZE == 48);  // added in 1.6: the size of its first version
static_assert(offsetof(arb_attention_args, q) == 8 && offsetof(arb_attention_args, k) == 16 &&
              offsetof(arb_attention_args, v) == 24 && offsetof(arb_attention_args, o) == 32 &&
              offsetof(arb_attention_args, scale) == 40 && offsetof(arb_attention_args, causal) == 44 &&
              sizeof(arb_attention_args) == 48);
static_assert(ARB_PROBLEM_STRUCT_SIZE == 168);
static_assert(ARB_OPERANDS_STRUCT_SIZE == 96);
static_assert(ARB_KERNEL_STRUCT_SIZE == 72);
static_assert(ARB_PLUGIN_DESCRIPTOR_STRUCT_SIZE == 64);  // description..runtime_version: optional, since 1.0
static_assert(ARB_HOST_API_STRUCT_SIZE == 40);
// The minimum-size checks that predate the constants compute the same values.
static_assert(ARB_CONTEXT_OPTIONS_STRUCT_SIZE == offsetof(arb_context_options, config_toml) + sizeof(const char*));
static_assert(ARB_GEMM_ARGS_STRUCT_SIZE == offsetof(arb_gemm_args, beta) + sizeof(float));
static_assert(ARB_RMSNORM_ARGS_STRUCT_SIZE == offsetof(arb_rmsnorm_args, eps) + sizeof(float));
static_assert(ARB_SOFTMAX_ARGS_STRUCT_SIZE == offsetof(arb_softmax_args, y) + sizeof(void*));
static_assert(ARB_PLUGIN_INFO_STRUCT_SIZE == offsetof(arb_plugin_info, kernel_count) + sizeof(size_t));
static_assert(ARB_KERNEL_INFO_STRUCT_SIZE == offsetof(arb_kernel_info, reserved) + sizeof(int32_t));
static_assert(ARB_VERIFY_OPTIONS_STRUCT_SIZE == offsetof(arb_verify_options, reserved) + sizeof(int32_t));
static_assert(ARB_TUNE_OPTIONS_STRUCT_SIZE == offsetof(arb_tune_options, progress_user_data) + sizeof(void*));
static_assert(ARB_KERNEL_STRUCT_SIZE == offsetof(arb_kernel, launch) + sizeof(arb_launch_fn));
static_assert(ARB_PLUGIN_DESCRIPTOR_STRUCT_SIZE == offsetof(arb_plugin_descriptor, kernel_count) + sizeof(size_t));
// A struct is never smaller than its version 1.0.
static_assert(sizeof(arb_context_options) >= ARB_CONTEXT_OPTIONS_STRUCT_SIZE);
static_assert(sizeof(arb_gemm_args) >= ARB_GEMM_ARGS_STRUCT_SIZE);
static_assert(sizeof(arb_rmsnorm_args) >= ARB_RMSNORM_ARGS_STRUCT_SIZE);
static_assert(sizeof(arb_softmax_args) >= ARB_SOFTMAX_ARGS_STRUCT_SIZE);
static_assert(sizeof(arb_plugin_info) >= ARB_PLUGIN_INFO_STRUCT_SIZE);
static_assert(sizeof(arb_kernel_info) >= ARB_KERNEL_INFO_STRUCT_SIZE);
static_assert(sizeof(arb_verify_options) >= ARB_VERIFY_OPTIONS_STRUCT_SIZE);
static_assert(sizeof(arb_tune_options) >= ARB_TUNE_OPTIONS_STRUCT_SIZE);
static_assert(sizeof(arb_problem) >= ARB_PROBLEM_STRUCT_SIZE);
static_assert(sizeof(arb_operands) >= ARB_OPERANDS_STRUCT_SIZE);
static_assert(sizeof(arb_kernel) >= ARB_KERNEL_STRUCT_SIZE);
static_assert(sizeof(arb_plugin_descriptor) >= ARB_PLUGIN_DESCRIPTOR_STRUCT_SIZE);
static_assert(sizeof(arb_host_api) >= ARB_HOST_API_STRUCT_SIZE);

// The minimum sizes the host accepts from a plugin (the 1.0 layouts), under their former
// names, which plugins may use.
static_assert(ARB_PLUGIN_DESCRIPTOR_MIN_SIZE == 64);
static_assert(ARB_KERNEL_MIN_SIZE == 72);
static_assert(ARB_PLUGIN_DESCRIPTOR_MIN_SIZE == ARB_PLUGIN_DESCRIPTOR_STRUCT_SIZE);
static_assert(ARB_KERNEL_MIN_SIZE == ARB_KERNEL_STRUCT_SIZE);

// Enumerations cross the boundary as int32_t: their values are frozen too.
static_assert(ARB_OK == 0 && ARB_ERR_INVALID_ARGUMENT == 1 && ARB_ERR_UNSUPPORTED == 2 && ARB_ERR_CONFIG == 3 &&
              ARB_ERR_PLUGIN == 4 && ARB_ERR_KERNEL == 5 && ARB_ERR_OUT_OF_MEMORY == 6 && ARB_ERR_VERSION == 7 &&
              ARB_ERR_BUFFER_TOO_SMALL == 8 && ARB_ERR_INTERNAL == 9 && ARB_ERR_TABLE == 10);
static_assert(ARB_DTYPE_F32 == 1 && ARB_DTYPE_F16 == 2 && ARB_DTYPE_BF16 == 3);
static_assert(ARB_OP_GEMM == 1 && ARB_OP_RMSNORM == 2 && ARB_OP_SOFTMAX == 3 && ARB_OP_SWIGLU == 4 && ARB_OP_ROPE == 5 &&
              ARB_OP_ATTENTION == 6 && ARB_OP_MLP == 7 && ARB_OP_QKV == 8);
static_assert(ARB_ROPE_SPLIT_HALF == 0 && ARB_ROPE_INTERLEAVED == 1);
static_assert(ARB_ACT_NONE == 0 && ARB_ACT_RELU == 1 && ARB_ACT_GELU_TANH == 2 && ARB_ACT_GELU_ERF == 3 &&
              ARB_ACT_SILU == 4);
static_assert(ARB_PROVENANCE_REFERENCE == 1 && ARB_PROVENANCE_VENDOR == 2 && ARB_PROVENANCE_HAND_TUNED == 3 &&
              ARB_PROVENANCE_AI_GENERATED == 4);
static_assert(ARB_KERNEL_FLAG_NONDETERMINISTIC == 0x1u && ARB_KERNEL_FLAG_TF32 == 0x2u);

TEST_CASE("ABI: the versions this build declares") {
  CHECK(ARB_ABI_VERSION_MAJOR == 1);
  CHECK(ARB_ABI_VERSION_MINOR == 8);  // 1.2: arb_verify, arb_tune, arb_report_*; 1.3: arb_plan_*; 1.4: arb_swiglu; 1.5: arb_rope; 1.6: arb_attention; 1.7: arb_mlp; 1.8: arb_plan_operands' eight tensors (mlp plans), arb_qkv
  CHECK(ARB_PLUGIN_ABI_MAJOR == 1);
  CHECK(ARB_PLUGIN_ABI_MINOR == 5);  // 1.1: ARB_OP_SWIGLU, arb_problem ld_gate/ld_up, arb_operands gate/up; 1.2: ARB_OP_ROPE, its fields, positions; 1.3: ARB_OP_ATTENTION, its fields, q/k/v/o; 1.4: ARB_OP_MLP, inter/ld_down, down; 1.5: ARB_OP_QKV, head_dim/ld_w
  CHECK(arb_abi_version() == ARB_MAKE_VERSION(ARB_ABI_VERSION_MAJOR, ARB_ABI_VERSION_MINOR));
}

TEST_CASE("ABI: ARB_HAS_FIELD follows the producer's struct_size") {
  arb_plugin_descriptor d{};
  d.struct_size = ARB_PLUGIN_DESCRIPTOR_MIN_SIZE;
  CHECK(ARB_HAS_FIELD(arb_plugin_descriptor, &d, kernel_count));
  CHECK_FALSE(ARB_HAS_FIELD(arb_plugin_descriptor, &d, description));
  CHECK_FALSE(ARB_HAS_FIELD(arb_plugin_descriptor, &d, release));
  d.struct_size = sizeof d;
  CHECK(ARB_HAS_FIELD(arb_plugin_descriptor, &d, release));
}

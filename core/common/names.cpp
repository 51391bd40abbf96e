#include "common/names.hpp"

namespace arbiter {

std::string_view dtype_name(int32_t dtype) {
  switch (dtype) {
    case ARB_DTYPE_F32: return "f32";
    case ARB_DTYPE_F16: return "f16";
    case ARB_DTYPE_BF16: return "bf16";
    default: return "invalid";
  }
}

std::string_view activation_name(int32_t activation) {
  switch (activation) {
    case ARB_ACT_NONE: return "none";
    case ARB_ACT_RELU: return "relu";
    case ARB_ACT_GELU_TANH: return "gelu_tanh";
    case ARB_ACT_GELU_ERF: return "gelu";
    case ARB_ACT_SILU: return "silu";
    default: return "invalid";
  }
}

std::string_view provenance_name(int32_t provenance) {
  switch (provenance) {
    case ARB_PROVENANCE_REFERENCE: return "reference";
    case ARB_PROVENANCE_VENDOR: return "vendor";
    case ARB_PROVENANCE_HAND_TUNED: return "hand_tuned";
    case ARB_PROVENANCE_AI_GENERATED: return "ai_generated";
    case ARB_PROVENANCE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
  }
}

std::string_view device_name(int32_t device_type) {
  switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    default: return "other";
  }
}

std::string_view log_level_name(int32_t level) {
  switch (level) {
    case ARB_LOG_TRACE: return "trace";
    case ARB_LOG_DEBUG: return "debug";
    case ARB_LOG_INFO: return "info";
    case ARB_LOG_WARN: return "warn";
    case ARB_LOG_ERROR: return "error";
    default: return "off";
  }
}

std::optional<arb_dtype> parse_dtype(std::string_view text) {
  if (text == "f32" || text == "float32") return ARB_DTYPE_F32;
  if (text == "f16" || text == "float16") return ARB_DTYPE_F16;
  if (text == "bf16" || text == "bfloat16") return ARB_DTYPE_BF16;
  return std::nullopt;
}

std::optional<arb_activation> parse_activation(std::string_view text) {
  if (text == "none") return ARB_ACT_NONE;
  if (text == "relu") return ARB_ACT_RELU;
  if (text == "gelu" || text == "gelu_erf") return ARB_ACT_GELU_ERF;
  if (text == "gelu_tanh") return ARB_ACT_GELU_TANH;
  if (text == "silu") return ARB_ACT_SILU;
  return std::nullopt;
}

std::optional<DLDeviceType> parse_device(std::string_view text) {
  if (text == "cpu") return kDLCPU;
  if (text == "cuda") return kDLCUDA;
  return std::nullopt;
}

std::optional<arb_log_level> parse_log_level(std::string_view text) {
  for (int32_t level = ARB_LOG_TRACE; level <= ARB_LOG_OFF; ++level)
    if (text == log_level_name(level)) return static_cast<arb_log_level>(level);
  return std::nullopt;
}

}  // namespace arbiter

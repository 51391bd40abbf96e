// Names of the ABI's enumerations as they appear in configs, problem text, manifests and
// reports. Header-only: the host and the plugins (which cannot link core) read the same
// names. Op names come from the op table (core/problem/op_table.hpp); the generated plugin
// maps its manifests' op names to signature conventions itself.
#pragma once

#include <arbiter/types.h>

#include <optional>
#include <string_view>

namespace arbiter {

// The tables below are indexed by the ABI's values: these are frozen (docs/abi-rules.md).
static_assert(ARB_DTYPE_INVALID == 0 && ARB_DTYPE_F32 == 1 && ARB_DTYPE_F16 == 2 && ARB_DTYPE_BF16 == 3);
static_assert(ARB_ACT_NONE == 0 && ARB_ACT_RELU == 1 && ARB_ACT_GELU_TANH == 2 && ARB_ACT_GELU_ERF == 3 &&
              ARB_ACT_SILU == 4);
static_assert(ARB_PROVENANCE_UNSPECIFIED == 0 && ARB_PROVENANCE_REFERENCE == 1 && ARB_PROVENANCE_VENDOR == 2 &&
              ARB_PROVENANCE_HAND_TUNED == 3 && ARB_PROVENANCE_AI_GENERATED == 4);
static_assert(ARB_LOG_TRACE == 0 && ARB_LOG_DEBUG == 1 && ARB_LOG_INFO == 2 && ARB_LOG_WARN == 3 &&
              ARB_LOG_ERROR == 4 && ARB_LOG_OFF == 5);
static_assert(kDLCPU == 1 && kDLCUDA == 2, "DLPack's device codes");

namespace abi_names {
inline constexpr std::string_view dtypes[] = {"invalid", "f32", "f16", "bf16"};
// "gelu" is the exact (erf) form, as in PyTorch; "gelu_tanh" the approximation.
inline constexpr std::string_view activations[] = {"none", "relu", "gelu_tanh", "gelu", "silu"};
inline constexpr std::string_view provenances[] = {"unspecified", "reference", "vendor", "hand_tuned",
                                                   "ai_generated"};
inline constexpr std::string_view log_levels[] = {"trace", "debug", "info", "warn", "error", "off"};

template <size_t N>
constexpr std::string_view lookup(const std::string_view (&names)[N], int32_t value, std::string_view otherwise) {
  return value >= 0 && static_cast<size_t>(value) < N ? names[value] : otherwise;
}
template <size_t N>
constexpr std::optional<int32_t> find(const std::string_view (&names)[N], std::string_view text, int32_t first) {
  for (size_t i = static_cast<size_t>(first); i < N; ++i)
    if (names[i] == text) return static_cast<int32_t>(i);
  return std::nullopt;
}
}  // namespace abi_names

inline std::string_view dtype_name(int32_t dtype) { return abi_names::lookup(abi_names::dtypes, dtype, "invalid"); }
inline std::string_view activation_name(int32_t activation) {
  return abi_names::lookup(abi_names::activations, activation, "invalid");
}
inline std::string_view provenance_name(int32_t provenance) {
  return abi_names::lookup(abi_names::provenances, provenance, "unknown");
}
inline std::string_view log_level_name(int32_t level) { return abi_names::lookup(abi_names::log_levels, level, "off"); }
inline std::string_view device_name(int32_t device_type) {
  return device_type == kDLCPU ? "cpu" : device_type == kDLCUDA ? "cuda" : "other";
}

// "float32", "float16" and "bfloat16" are accepted as NumPy and PyTorch spell them.
inline std::optional<arb_dtype> parse_dtype(std::string_view text) {
  if (text == "float32") return ARB_DTYPE_F32;
  if (text == "float16") return ARB_DTYPE_F16;
  if (text == "bfloat16") return ARB_DTYPE_BF16;
  if (auto code = abi_names::find(abi_names::dtypes, text, ARB_DTYPE_F32)) return static_cast<arb_dtype>(*code);
  return std::nullopt;
}
inline std::optional<arb_activation> parse_activation(std::string_view text) {
  if (text == "gelu_erf") return ARB_ACT_GELU_ERF;
  if (auto code = abi_names::find(abi_names::activations, text, ARB_ACT_NONE)) return static_cast<arb_activation>(*code);
  return std::nullopt;
}
inline std::optional<DLDeviceType> parse_device(std::string_view text) {
  if (text == "cpu") return kDLCPU;
  if (text == "cuda") return kDLCUDA;
  return std::nullopt;
}
inline std::optional<arb_log_level> parse_log_level(std::string_view text) {
  if (auto code = abi_names::find(abi_names::log_levels, text, ARB_LOG_TRACE)) return static_cast<arb_log_level>(*code);
  return std::nullopt;
}

}  // namespace arbiter

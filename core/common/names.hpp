// Names of the ABI's enumerations as they appear in configs, problem text and reports.
// Op names come from the op table (problem/op_table.hpp).
#pragma once

#include <arbiter/types.h>

#include <optional>
#include <string_view>

namespace arbiter {

std::string_view dtype_name(int32_t dtype);
std::string_view activation_name(int32_t activation);
std::string_view provenance_name(int32_t provenance);
std::string_view device_name(int32_t device_type);
std::string_view log_level_name(int32_t level);

std::optional<arb_dtype> parse_dtype(std::string_view text);
// "gelu" is the exact (erf) form, as in PyTorch; "gelu_tanh" the approximation.
std::optional<arb_activation> parse_activation(std::string_view text);
std::optional<DLDeviceType> parse_device(std::string_view text);
std::optional<arb_log_level> parse_log_level(std::string_view text);

}  // namespace arbiter

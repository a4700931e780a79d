// Internal to io/: the per-family readers behind parse_model_config. Each fills the attention,
// MoE, rope and family-specific fields of `cfg` from `fields`; common fields are read before.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "io/config_json.h"
#include "io/model_config.h"

namespace locus::model_config_internal {

// kInvalidArgument "<name> must be positive, got <value>" unless value > 0.
Status check_positive(const config_json::Fields& fields, std::string_view name, int64_t value);

Status parse_deepseek(const config_json::Fields& fields, ModelConfig& cfg, bool is_v3);
Status parse_glm4_moe(const config_json::Fields& fields, ModelConfig& cfg);
Status parse_minimax_m2(const config_json::Fields& fields, ModelConfig& cfg);
Status parse_qwen3_moe(const config_json::Fields& fields, ModelConfig& cfg);
Status parse_mixtral(const config_json::Fields& fields, ModelConfig& cfg);

}  // namespace locus::model_config_internal

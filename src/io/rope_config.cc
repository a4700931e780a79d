// Parses rope_theta and rope_scaling / rope_parameters in both the transformers 4 and 5 spellings.
#include "io/rope_config.h"

#include <fmt/format.h>

namespace locus {
namespace {

using config_json::Fields;

Expected<RopeScalingType> parse_scaling_type(const Fields& s, bool absent_means_none) {
  // transformers 4.45 renamed "type" to "rope_type" and still reads both; checkpoints carry either.
  std::string_view key = s.has("rope_type") ? "rope_type" : "type";
  LOCUS_ASSIGN_OR_RETURN(auto name, s.optional_string(key));
  if (!name) {
    if (absent_means_none) return RopeScalingType::kNone;
    return s.missing("type");
  }
  if (*name == "default" || *name == "none") return RopeScalingType::kNone;
  if (*name == "linear") return RopeScalingType::kLinear;
  if (*name == "dynamic") return RopeScalingType::kDynamic;
  if (*name == "yarn") return RopeScalingType::kYarn;
  if (*name == "llama3") return RopeScalingType::kLlama3;
  return s.error(ErrorCode::kUnsupported,
                 fmt::format("{} '{}' is not supported (supported: default, linear, dynamic, "
                             "yarn, llama3)",
                             s.field_name(key), *name));
}

Expected<RopeScaling> parse_scaling(const Fields& s, bool absent_means_none) {
  RopeScaling out;
  LOCUS_ASSIGN_OR_RETURN(out.type, parse_scaling_type(s, absent_means_none));
  if (out.type == RopeScalingType::kNone) return out;

  LOCUS_ASSIGN_OR_RETURN(out.factor, s.require_number("factor"));
  if (!(out.factor > 0.0)) {
    return s.invalid(
        fmt::format("{} must be positive, got {}", s.field_name("factor"), out.factor));
  }
  LOCUS_ASSIGN_OR_RETURN(out.original_max_position_embeddings,
                         s.optional_int("original_max_position_embeddings"));
  if (out.original_max_position_embeddings && *out.original_max_position_embeddings <= 0) {
    return s.invalid(fmt::format("{} must be positive, got {}",
                                 s.field_name("original_max_position_embeddings"),
                                 *out.original_max_position_embeddings));
  }
  if (out.type == RopeScalingType::kYarn) {
    LOCUS_ASSIGN_OR_RETURN(out.beta_fast, s.number_or("beta_fast", 32.0));
    LOCUS_ASSIGN_OR_RETURN(out.beta_slow, s.number_or("beta_slow", 1.0));
    LOCUS_ASSIGN_OR_RETURN(out.mscale, s.optional_number("mscale"));
    LOCUS_ASSIGN_OR_RETURN(out.mscale_all_dim, s.optional_number("mscale_all_dim"));
    LOCUS_ASSIGN_OR_RETURN(out.attention_factor, s.optional_number("attention_factor"));
  } else if (out.type == RopeScalingType::kLlama3) {
    LOCUS_ASSIGN_OR_RETURN(out.low_freq_factor, s.number_or("low_freq_factor", 1.0));
    LOCUS_ASSIGN_OR_RETURN(out.high_freq_factor, s.number_or("high_freq_factor", 4.0));
    // Without the pretraining length the llama3 band edges are undefined.
    if (!out.original_max_position_embeddings) {
      return s.missing("original_max_position_embeddings");
    }
  }
  return out;
}

}  // namespace

std::string_view rope_layout_name(RopeLayout layout) {
  return layout == RopeLayout::kNeox ? "neox" : "interleaved";
}

std::string_view rope_scaling_type_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kDynamic:
      return "dynamic";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kLlama3:
      return "llama3";
  }
  return "unknown";
}

Expected<std::optional<double>> read_partial_rotary_factor(const config_json::Fields& fields) {
  LOCUS_ASSIGN_OR_RETURN(auto top, fields.optional_number("partial_rotary_factor"));
  if (top) return top;
  if (fields.has("rope_parameters")) {
    LOCUS_ASSIGN_OR_RETURN(auto params, fields.child("rope_parameters"));
    return params.optional_number("partial_rotary_factor");
  }
  return std::optional<double>();
}

Expected<RopeConfig> parse_rope_config(const config_json::Fields& fields, double default_theta,
                                       int64_t rotary_dim, RopeLayout layout) {
  RopeConfig out;
  out.rotary_dim = rotary_dim;
  out.layout = layout;

  std::optional<Fields> params;
  if (fields.has("rope_parameters")) {
    LOCUS_ASSIGN_OR_RETURN(auto p, fields.child("rope_parameters"));
    params = std::move(p);
  }

  if (fields.has("rope_scaling")) {
    LOCUS_ASSIGN_OR_RETURN(auto s, fields.child("rope_scaling"));
    LOCUS_ASSIGN_OR_RETURN(out.scaling, parse_scaling(s, /*absent_means_none=*/false));
  } else if (params) {
    // transformers 5 folds the scaling into rope_parameters and omits the type for plain rope.
    LOCUS_ASSIGN_OR_RETURN(out.scaling, parse_scaling(*params, /*absent_means_none=*/true));
  }

  LOCUS_ASSIGN_OR_RETURN(auto theta, fields.optional_number("rope_theta"));
  if (!theta && params) {
    LOCUS_ASSIGN_OR_RETURN(theta, params->optional_number("rope_theta"));
  }
  out.theta = theta.value_or(default_theta);
  if (!(out.theta > 0.0)) {
    return fields.invalid(fmt::format("rope_theta must be positive, got {}", out.theta));
  }
  return out;
}

}  // namespace locus

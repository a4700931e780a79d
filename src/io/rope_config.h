// Rotary position embedding settings read from an HF config: base, how many dims rotate, the
// pair layout and the long-context scaling rule. Pure data; the rope op lives in model/layers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "io/config_json.h"

namespace locus {

// Which elements of a head form a rotation pair.
//   kNeox:        (x[i], x[i + rotary_dim/2]) - rotate_half, GPT-NeoX/Llama style.
//   kInterleaved: (x[2i], x[2i + 1])          - GPT-J style.
enum class RopeLayout : uint8_t { kNeox, kInterleaved };

enum class RopeScalingType : uint8_t { kNone, kLinear, kDynamic, kYarn, kLlama3 };

std::string_view rope_layout_name(RopeLayout layout);
std::string_view rope_scaling_type_name(RopeScalingType type);

// The rope_scaling / rope_parameters object. Fields a type does not use keep their defaults.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  // Pretraining context; yarn and llama3 need it, dynamic uses it when present.
  std::optional<int64_t> original_max_position_embeddings;
  // yarn: ramp boundaries (in rotations) and DeepSeek's attention-scale exponents.
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  std::optional<double> attention_factor;
  // llama3: frequency band edges.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
};

struct RopeConfig {
  double theta = 10000.0;
  int64_t rotary_dim = 0;  // leading dims of each q/k head that rotate; the rest pass through
  RopeLayout layout = RopeLayout::kNeox;
  RopeScaling scaling;
};

// Reads rope_theta and the scaling object. Accepts the scaling object under "rope_scaling" or
// transformers 5's "rope_parameters", and its kind under "type" or "rope_type". "default" means
// no scaling. rope_theta may also live inside rope_parameters (transformers 5); when it is in
// neither place `default_theta` is used. rotary_dim and layout are the caller's (per family).
Expected<RopeConfig> parse_rope_config(const config_json::Fields& fields, double default_theta,
                                       int64_t rotary_dim, RopeLayout layout);

// partial_rotary_factor from the top level or from rope_parameters (transformers 5 moved it).
Expected<std::optional<double>> read_partial_rotary_factor(const config_json::Fields& fields);

}  // namespace locus

// RoPE frequencies as transformers' modeling_rope_utils computes them. Each tensor expression
// there is an f32 op, so each step below rounds to f32 where torch does: the goldens were made
// with these exact inv_freq values (to torch's ~1 ulp pow), and at position p an inv_freq error
// becomes a phase error p times larger.
#include "backend/ops_rope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace locus {
namespace {

// torch: base ** (torch.arange(0, dim, 2).float() / dim), all in f32.
std::vector<float> pos_freqs(double base, int64_t dim) {
  std::vector<float> out(static_cast<size_t>(dim / 2));
  const float base_f = static_cast<float>(base);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    out[static_cast<size_t>(i)] =
        static_cast<float>(std::pow(static_cast<double>(base_f), static_cast<double>(exponent)));
  }
  return out;
}

// _compute_yarn_parameters (transformers 5): the explicit factor is used even when
// max_position_embeddings / original_max_position_embeddings disagrees with it.
RopeFrequencies yarn_frequencies(const RopeConfig& rope, int64_t max_position_embeddings) {
  const RopeScaling& s = rope.scaling;
  const int64_t dim = rope.rotary_dim;
  const double base = rope.theta;
  const double factor = s.factor;
  const double original_max =
      static_cast<double>(s.original_max_position_embeddings.value_or(max_position_embeddings));

  RopeFrequencies out;
  // Python truthiness: an mscale of 0 counts as absent.
  const bool has_mscales = s.mscale.value_or(0.0) != 0.0 && s.mscale_all_dim.value_or(0.0) != 0.0;
  double attention_factor;
  if (s.attention_factor) {
    attention_factor = *s.attention_factor;
  } else if (has_mscales) {
    attention_factor =
        yarn_get_mscale(factor, *s.mscale) / yarn_get_mscale(factor, *s.mscale_all_dim);
  } else {
    attention_factor = yarn_get_mscale(factor, 1.0);
  }
  out.attention_factor = static_cast<float>(attention_factor);

  // find_correction_range with truncate=True, in Python floats (double).
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) *
            std::log(original_max / (rotations * 2 * std::numbers::pi))) /
           (2 * std::log(base));
  };
  double low = std::floor(correction_dim(s.beta_fast));
  double high = std::ceil(correction_dim(s.beta_slow));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard against a zero-width ramp

  const std::vector<float> pos = pos_freqs(base, dim);
  const float factor_f = static_cast<float>(factor);
  const float low_f = static_cast<float>(low);
  const float width_f = static_cast<float>(high - low);
  out.inv_freq.resize(pos.size());
  for (size_t i = 0; i < pos.size(); ++i) {
    const float extrapolation = 1.0f / pos[i];
    const float interpolation = 1.0f / (factor_f * pos[i]);
    const float ramp = std::clamp((static_cast<float>(i) - low_f) / width_f, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    out.inv_freq[i] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return out;
}

}  // namespace

double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

Expected<RopeFrequencies> compute_rope_frequencies(const RopeConfig& rope,
                                                   int64_t max_position_embeddings) {
  if (rope.rotary_dim <= 0 || rope.rotary_dim % 2 != 0) {
    return invalid_argument(
        fmt::format("rope: rotary_dim {} must be positive and even", rope.rotary_dim));
  }
  if (!(rope.theta > 0.0)) {
    return invalid_argument(fmt::format("rope: theta {} must be positive", rope.theta));
  }
  switch (rope.scaling.type) {
    case RopeScalingType::kNone:
    case RopeScalingType::kLinear: {
      RopeFrequencies out;
      std::vector<float> pos = pos_freqs(rope.theta, rope.rotary_dim);
      out.inv_freq.resize(pos.size());
      const float factor = static_cast<float>(rope.scaling.factor);
      for (size_t i = 0; i < pos.size(); ++i) {
        out.inv_freq[i] = 1.0f / pos[i];
        // Linear scaling divides the frequencies, which is the same as dividing positions.
        if (rope.scaling.type == RopeScalingType::kLinear) out.inv_freq[i] /= factor;
      }
      return out;
    }
    case RopeScalingType::kYarn:
      if (!(rope.scaling.factor > 0.0)) {
        return invalid_argument(
            fmt::format("rope: yarn factor {} must be positive", rope.scaling.factor));
      }
      return yarn_frequencies(rope, max_position_embeddings);
    case RopeScalingType::kDynamic:
    case RopeScalingType::kLlama3:
      break;
  }
  return unsupported(
      fmt::format("rope scaling '{}' is not implemented (supported: none, linear, "
                  "yarn)",
                  rope_scaling_type_name(rope.scaling.type)));
}

}  // namespace locus

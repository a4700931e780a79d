// Host-side rotary embedding parameters, computed the way Hugging Face transformers (v5) does so
// that logits match its goldens: inverse frequencies in f32 step by step as torch evaluates them,
// and YaRN's attention factor. Shared by every backend (the rope kernels take the result).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "io/rope_config.h"

namespace locus {

struct RopeFrequencies {
  std::vector<float> inv_freq;    // rotary_dim / 2 entries
  float attention_factor = 1.0f;  // multiplies cos and sin (1 except for YaRN)
};

// Supports no scaling, linear and YaRN (kUnsupported for dynamic NTK and llama3, which none of
// the served families use). `max_position_embeddings` is the config's; YaRN falls back to it when
// rope_scaling has no original_max_position_embeddings, as transformers' standardization does.
Expected<RopeFrequencies> compute_rope_frequencies(const RopeConfig& rope,
                                                   int64_t max_position_embeddings);

// DeepSeek's yarn_get_mscale: 1 for scale <= 1, else 0.1 * mscale * ln(scale) + 1.
double yarn_get_mscale(double scale, double mscale);

}  // namespace locus

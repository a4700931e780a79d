#include "bench/roofline.h"

#include <cmath>
#include <string>

#include "model/weight_layout.h"

namespace locus::bench {

double expected_active_experts(int64_t num_experts, int64_t top_k, int64_t tokens) {
  if (num_experts <= 0 || top_k <= 0 || tokens <= 0) return 0.0;
  const double e = static_cast<double>(num_experts);
  const double miss = 1.0 - static_cast<double>(top_k) / e;
  return e * (1.0 - std::pow(miss, static_cast<double>(tokens)));
}

Expected<DecodeBytes> decode_step_bytes(const ModelConfig& config, int64_t batch, int64_t context,
                                        double weight_bytes_per_element,
                                        double kv_bytes_per_element) {
  LOCUS_ASSIGN_OR_RETURN(WeightLayout layout, weight_layout(config));
  DecodeBytes out;
  const double active =
      expected_active_experts(config.moe.num_experts, config.moe.num_experts_per_tok, batch);
  out.expected_active_experts = active;
  for (const WeightSpec& spec : layout.specs) {
    if (spec.role == WeightRole::kWeightScale || spec.role == WeightRole::kGlobalScale) continue;
    if (spec.name == "model.embed_tokens.weight" && !config.tie_word_embeddings) continue;
    const double bytes = static_cast<double>(shape_numel(spec.shape)) * weight_bytes_per_element;
    // Routed experts: "...mlp.experts.<e>..." (shared experts are "shared_experts").
    if (spec.name.find(".experts.") != std::string::npos &&
        spec.name.find("shared_experts") == std::string::npos) {
      // Each expert's tensors are counted once per expert; scale to the expected active share.
      out.expert_weight_bytes += bytes * active / static_cast<double>(config.moe.num_experts);
    } else {
      out.dense_weight_bytes += bytes;
    }
  }
  double per_token = 0;
  if (config.is_mla()) {
    per_token = static_cast<double>(config.attention.mla.kv_lora_rank +
                                    config.attention.mla.qk_rope_head_dim);
  } else {
    per_token = static_cast<double>(config.attention.num_key_value_heads *
                                    (config.attention.head_dim + config.attention.v_head_dim));
  }
  out.kv_bytes = per_token * kv_bytes_per_element * static_cast<double>(config.num_hidden_layers) *
                 static_cast<double>(context) * static_cast<double>(batch);
  return out;
}

}  // namespace locus::bench

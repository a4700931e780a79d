// GLM-4.5 / GLM-4.5-Air weight names: GQA with q/k/v bias and optional per-head q/k norm,
// DeepSeek-style MoE (sigmoid router with correction bias, shared experts) after the dense layers.
#include <string>

#include "model/arch/layouts.h"

namespace locus::arch {

void append_glm4_moe_layer(WeightLayoutBuilder& b, int64_t layer) {
  const ModelConfig& c = b.config();
  const std::string mlp = layer_prefix(layer) + "mlp";
  append_layer_norms(b, layer);
  append_gqa_attention(b, layer);
  if (!c.is_moe_layer(layer)) {
    b.gated_mlp(mlp, c.intermediate_size, "gate_proj", "up_proj", "down_proj");
    return;
  }
  const MoeConfig& moe = c.moe;
  b.tensor(mlp + ".gate.weight", {moe.num_experts, c.hidden_size}, c.dtype, WeightRole::kRouter,
           c.hidden_size);
  if (moe.has_score_correction_bias) {
    b.tensor(mlp + ".gate.e_score_correction_bias", {moe.num_experts}, DType::kF32,
             WeightRole::kCorrectionBias);
  }
  for (int64_t e = 0; e < moe.num_experts; ++e) {
    b.gated_mlp(mlp + ".experts." + std::to_string(e), moe.moe_intermediate_size, "gate_proj",
                "up_proj", "down_proj");
  }
  if (moe.num_shared_experts > 0) {
    b.gated_mlp(mlp + ".shared_experts", moe.shared_expert_intermediate_size, "gate_proj",
                "up_proj", "down_proj");
  }
}

}  // namespace locus::arch

// Qwen3-MoE weight names: GQA with per-head q/k norm; softmax-routed experts under mlp, dense
// MLPs on mlp_only_layers / off decoder_sparse_step.
#include <string>

#include "model/arch/layouts.h"

namespace locus::arch {

void append_qwen3_moe_layer(WeightLayoutBuilder& b, int64_t layer) {
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
  for (int64_t e = 0; e < moe.num_experts; ++e) {
    b.gated_mlp(mlp + ".experts." + std::to_string(e), moe.moe_intermediate_size, "gate_proj",
                "up_proj", "down_proj");
  }
}

}  // namespace locus::arch

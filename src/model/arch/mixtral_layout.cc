// Mixtral weight names: GQA without biases or norms; block_sparse_moe with w1 (gate), w3 (up),
// w2 (down) per expert; every layer is MoE.
#include <string>

#include "model/arch/layouts.h"

namespace locus::arch {

void append_mixtral_layer(WeightLayoutBuilder& b, int64_t layer) {
  const ModelConfig& c = b.config();
  const std::string moe_prefix = layer_prefix(layer) + "block_sparse_moe";
  append_layer_norms(b, layer);
  append_gqa_attention(b, layer);
  b.tensor(moe_prefix + ".gate.weight", {c.moe.num_experts, c.hidden_size}, c.dtype,
           WeightRole::kRouter, c.hidden_size);
  for (int64_t e = 0; e < c.moe.num_experts; ++e) {
    b.gated_mlp(moe_prefix + ".experts." + std::to_string(e), c.moe.moe_intermediate_size, "w1",
                "w3", "w2");
  }
}

}  // namespace locus::arch

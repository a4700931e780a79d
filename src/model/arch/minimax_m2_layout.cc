// MiniMax-M2 weight names: GQA with q/k RMSNorm over all heads at once (per_layer), a sigmoid
// router whose correction bias sits on block_sparse_moe itself (not on the gate), w1/w3/w2 experts.
#include <fmt/format.h>

#include <string>

#include "model/arch/layouts.h"

namespace locus::arch {

void append_minimax_m2_layer(WeightLayoutBuilder& b, int64_t layer) {
  const ModelConfig& c = b.config();
  const std::string moe_prefix = layer_prefix(layer) + "block_sparse_moe";
  if (c.moe.shared_expert_intermediate_size > 0) {
    // MiniMax-M2 ships none; a variant with shared experts needs their names confirmed first.
    b.fail(
        unsupported(fmt::format("{}: MiniMaxM2 with shared experts (shared_intermediate_size "
                                "{}) is not supported",
                                c.source_name, c.moe.shared_expert_intermediate_size)));
    return;
  }
  append_layer_norms(b, layer);
  append_gqa_attention(b, layer);
  b.tensor(moe_prefix + ".gate.weight", {c.moe.num_experts, c.hidden_size}, c.dtype,
           WeightRole::kRouter, c.hidden_size);
  if (c.moe.has_score_correction_bias) {
    b.tensor(moe_prefix + ".e_score_correction_bias", {c.moe.num_experts}, DType::kF32,
             WeightRole::kCorrectionBias);
  }
  for (int64_t e = 0; e < c.moe.num_experts; ++e) {
    b.gated_mlp(moe_prefix + ".experts." + std::to_string(e), c.moe.moe_intermediate_size, "w1",
                "w3", "w2");
  }
}

}  // namespace locus::arch

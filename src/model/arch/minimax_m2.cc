// MiniMax-M2 (MiniMaxM2ForCausalLM): GQA with q/k RMSNorm over all heads at once, partial neox
// rope, every layer MoE under `block_sparse_moe` with w1 (gate) / w3 (up) / w2 (down) experts and
// a sigmoid router whose correction bias sits on the block itself.
//
// transformers' MiniMaxM2 always renormalizes the chosen weights (whatever norm_topk_prob says)
// and builds its mask without a sliding window, so both are fixed here.
#include "model/arch/architecture.h"

namespace locus::arch {

Expected<ArchitectureSpec> minimax_m2_spec(const ModelConfig& config) {
  ArchitectureSpec spec;
  spec.moe_module = "block_sparse_moe";
  spec.expert_gate = "w1";
  spec.expert_up = "w3";
  spec.expert_down = "w2";
  if (config.moe.has_score_correction_bias) {
    spec.correction_bias = "block_sparse_moe.e_score_correction_bias";
  }
  spec.routing = routing_from_config(config);
  spec.routing.renormalize = true;
  spec.honors_sliding_window = false;
  return spec;
}

}  // namespace locus::arch

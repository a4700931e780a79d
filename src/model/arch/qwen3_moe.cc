// Qwen3-MoE (Qwen3MoeForCausalLM): GQA with per-head q/k RMSNorm, full neox rope, softmax top-k
// experts under `mlp` (renormalized when norm_topk_prob), dense MLPs on mlp_only_layers.
//
// Sliding window: applied to every layer when use_sliding_window is set; transformers also
// limits it to layers past max_window_layers, which the config parser does not read yet (no
// released Qwen3-MoE enables the window).
#include "model/arch/architecture.h"

namespace locus::arch {

Expected<ArchitectureSpec> qwen3_moe_spec(const ModelConfig& config) {
  ArchitectureSpec spec;
  spec.moe_module = "mlp";
  spec.routing = routing_from_config(config);
  spec.honors_sliding_window = true;
  return spec;
}

}  // namespace locus::arch

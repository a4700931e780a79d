// Mixtral (MixtralForCausalLM): plain GQA (sliding window when the config sets one), every layer
// MoE under `block_sparse_moe` with w1/w3/w2 experts and a softmax top-k router, renormalized.
#include "model/arch/architecture.h"

namespace locus::arch {

Expected<ArchitectureSpec> mixtral_spec(const ModelConfig& config) {
  ArchitectureSpec spec;
  spec.moe_module = "block_sparse_moe";
  spec.expert_gate = "w1";
  spec.expert_up = "w3";
  spec.expert_down = "w2";
  spec.routing = routing_from_config(config);
  spec.routing.renormalize = true;
  spec.honors_sliding_window = true;
  return spec;
}

}  // namespace locus::arch

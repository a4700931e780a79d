// What differs between the served families once the shared layers exist (model/layers/): the
// Hugging Face names of the MoE block's parts, which router variant it runs and whether the
// config's sliding window applies. One function per family, each in its own file of this folder,
// next to the family's weight layout (*_layout.cc); model_registry.cc maps architectures to them.
#pragma once

#include <string>

#include "backend/ops.h"
#include "core/status.h"
#include "io/model_config.h"

namespace locus {

struct ArchitectureSpec {
  // model.layers.<i>.<moe_module>.{gate, experts.<e>.<expert_*>, shared_experts}
  std::string moe_module = "mlp";
  const char* expert_gate = "gate_proj";
  const char* expert_up = "up_proj";
  const char* expert_down = "down_proj";
  // Under model.layers.<i>.; empty when the router has no e_score_correction_bias.
  std::string correction_bias;
  // Whether config.attention.sliding_window limits attention (transformers' mask for the family).
  // Dense layers (first_k_dense_replace, mlp_only_layers) are model.layers.<i>.mlp.{gate,up,
  // down}_proj in every family.
  bool honors_sliding_window = false;
  MoeRouting routing;
};

// The router as the config describes it (scoring, top-k method, groups, renormalization,
// scaling); families adjust what their reference code does differently.
MoeRouting routing_from_config(const ModelConfig& config);

namespace arch {
Expected<ArchitectureSpec> deepseek_spec(const ModelConfig& config);  // V2, V3, Kimi-K2
Expected<ArchitectureSpec> glm4_moe_spec(const ModelConfig& config);
Expected<ArchitectureSpec> minimax_m2_spec(const ModelConfig& config);
Expected<ArchitectureSpec> qwen3_moe_spec(const ModelConfig& config);
Expected<ArchitectureSpec> mixtral_spec(const ModelConfig& config);
}  // namespace arch

}  // namespace locus

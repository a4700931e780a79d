#include "model/model_registry.h"

#include <fmt/format.h>

#include <array>

namespace locus {
namespace {

// Kimi-K2 is a DeepseekV3ForCausalLM (384 experts, one group) and needs no entry of its own.
constexpr std::array<ArchitectureEntry, 6> kEntries = {{
    {Architecture::kDeepseekV3, "DeepseekV3ForCausalLM", &arch::deepseek_spec},
    {Architecture::kDeepseekV2, "DeepseekV2ForCausalLM", &arch::deepseek_spec},
    {Architecture::kGlm4Moe, "Glm4MoeForCausalLM", &arch::glm4_moe_spec},
    {Architecture::kMiniMaxM2, "MiniMaxM2ForCausalLM", &arch::minimax_m2_spec},
    {Architecture::kQwen3Moe, "Qwen3MoeForCausalLM", &arch::qwen3_moe_spec},
    {Architecture::kMixtral, "MixtralForCausalLM", &arch::mixtral_spec},
}};

std::string supported_names() {
  std::string names;
  for (const auto& e : kEntries) {
    if (!names.empty()) names += ", ";
    names += e.hf_name;
  }
  return names;
}

}  // namespace

MoeRouting routing_from_config(const ModelConfig& config) {
  const MoeConfig& m = config.moe;
  MoeRouting r;
  r.scoring = m.scoring_func;
  r.topk_method = m.topk_method;
  r.top_k = m.num_experts_per_tok;
  r.n_group = m.n_group;
  r.topk_group = m.topk_group;
  r.renormalize = m.norm_topk_prob;
  r.routed_scaling_factor = static_cast<float>(m.routed_scaling_factor);
  return r;
}

std::span<const ArchitectureEntry> registered_architectures() {
  return kEntries;
}

Expected<const ArchitectureEntry*> find_architecture(std::string_view hf_name) {
  for (const auto& e : kEntries) {
    if (e.hf_name == hf_name) return &e;
  }
  return unsupported(fmt::format("architecture '{}' has no model forward (supported: {})", hf_name,
                                 supported_names()));
}

Expected<ArchitectureSpec> architecture_spec(const ModelConfig& config) {
  for (const auto& e : kEntries) {
    if (e.architecture == config.architecture) return e.spec(config);
  }
  return unsupported(fmt::format("{}: architecture '{}' has no model forward (supported: {})",
                                 config.source_name, config.architecture_name, supported_names()));
}

}  // namespace locus

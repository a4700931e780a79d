// DeepSeek-V2/V3 and Kimi-K2 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM): MLA attention,
// dense MLPs before first_k_dense_replace, then routed experts plus fused shared experts under
// `mlp`. V3/Kimi route with sigmoid + e_score_correction_bias and grouped top-k (noaux_tc);
// V2 with softmax, greedy or group_limited_greedy.
//
// V2 and norm_topk_prob: transformers' DeepseekV2Moe never renormalizes, DeepSeek's own code
// renormalizes instead of scaling, vLLM renormalizes and then scales. The released V2 configs
// all say norm_topk_prob=false, where the three agree; locus follows vLLM for the rest.
#include "model/arch/architecture.h"

#include <fmt/format.h>

namespace locus::arch {

Expected<ArchitectureSpec> deepseek_spec(const ModelConfig& config) {
  if (config.attention.qkv_bias) {
    return unsupported(
        fmt::format("{}: DeepSeek attention_bias=true is not supported", config.source_name));
  }
  ArchitectureSpec spec;
  spec.moe_module = "mlp";
  if (config.moe.has_score_correction_bias)
    spec.correction_bias = "mlp.gate.e_score_correction_bias";
  spec.routing = routing_from_config(config);
  return spec;
}

}  // namespace locus::arch

// GLM-4.5 / GLM-4.5-Air (Glm4MoeForCausalLM): GQA with q/k/v bias, optional per-head q/k norm,
// neox rope on the leading half of each head; DeepSeek-V3's router (sigmoid, correction bias,
// grouped top-k) with shared experts after first_k_dense_replace dense layers.
#include "model/arch/architecture.h"

namespace locus::arch {

Expected<ArchitectureSpec> glm4_moe_spec(const ModelConfig& config) {
  ArchitectureSpec spec;
  spec.moe_module = "mlp";
  if (config.moe.has_score_correction_bias)
    spec.correction_bias = "mlp.gate.e_score_correction_bias";
  spec.routing = routing_from_config(config);
  return spec;
}

}  // namespace locus::arch

// DeepSeek-V2/V3 (and Kimi-K2) weight names: MLA attention, dense MLPs before
// first_k_dense_replace, then routed experts + fused shared experts under mlp.
#include <string>

#include "model/arch/layouts.h"

namespace locus::arch {

void append_deepseek_layer(WeightLayoutBuilder& b, int64_t layer) {
  const ModelConfig& c = b.config();
  const MlaConfig& mla = c.attention.mla;
  const int64_t heads = c.attention.num_attention_heads;
  const std::string p = layer_prefix(layer);
  append_layer_norms(b, layer);

  const std::string attn = p + "self_attn.";
  if (mla.q_lora_rank) {
    b.linear(attn + "q_a_proj", *mla.q_lora_rank, c.hidden_size);
    b.norm(attn + "q_a_layernorm.weight", *mla.q_lora_rank);
    b.linear(attn + "q_b_proj", heads * mla.qk_head_dim(), *mla.q_lora_rank);
  } else {
    b.linear(attn + "q_proj", heads * mla.qk_head_dim(), c.hidden_size);
  }
  // The compressed latent (kv_lora_rank) and the shared rope key come out of one projection.
  b.linear(attn + "kv_a_proj_with_mqa", mla.kv_lora_rank + mla.qk_rope_head_dim, c.hidden_size);
  b.norm(attn + "kv_a_layernorm.weight", mla.kv_lora_rank);
  b.linear(attn + "kv_b_proj", heads * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank);
  b.linear(attn + "o_proj", c.hidden_size, heads * mla.v_head_dim);

  const std::string mlp = p + "mlp";
  if (!c.is_moe_layer(layer)) {
    b.gated_mlp(mlp, c.intermediate_size, "gate_proj", "up_proj", "down_proj");
    return;
  }
  const MoeConfig& moe = c.moe;
  b.tensor(mlp + ".gate.weight", {moe.num_experts, c.hidden_size}, c.dtype, WeightRole::kRouter,
           c.hidden_size);
  if (moe.has_score_correction_bias) {
    b.tensor(mlp + ".gate.e_score_correction_bias", {moe.num_experts}, DType::kF32,
             WeightRole::kCorrectionBias);
  }
  for (int64_t e = 0; e < moe.num_experts; ++e) {
    b.gated_mlp(mlp + ".experts." + std::to_string(e), moe.moe_intermediate_size, "gate_proj",
                "up_proj", "down_proj");
  }
  if (moe.num_shared_experts > 0) {
    b.gated_mlp(mlp + ".shared_experts", moe.shared_expert_intermediate_size, "gate_proj",
                "up_proj", "down_proj");
  }
}

}  // namespace locus::arch

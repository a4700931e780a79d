// Tiny configs of every served family with each family feature switched on (shared experts,
// grouped routing, dense first layers, q/k norms, partial rotary, YaRN, sliding window, fp8),
// for model and forward tests that run on DummyWeights. Header-only.
#pragma once

#include <string>
#include <vector>

#include "io/model_config.h"

namespace locus::testing {

struct TinyModel {
  std::string name;
  std::string json;
};

inline std::vector<TinyModel> tiny_models() {
  return {
      {"qwen3_moe", R"({
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 3,
        "max_position_embeddings": 512, "intermediate_size": 48,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
        "norm_topk_prob": true, "mlp_only_layers": [0], "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0})"},
      {"mixtral", R"({
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
        "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2,
        "max_position_embeddings": 512, "intermediate_size": 24,
        "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 5,
        "rms_norm_eps": 1e-5, "rope_theta": 1000000.0})"},
      {"glm4_moe", R"({
        "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe",
        "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 3,
        "max_position_embeddings": 512, "intermediate_size": 48,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "partial_rotary_factor": 0.5, "attention_bias": true, "use_qk_norm": true,
        "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
        "n_shared_experts": 1, "n_group": 2, "topk_group": 1, "routed_scaling_factor": 1.5,
        "norm_topk_prob": true, "first_k_dense_replace": 1, "rope_theta": 10000.0})"},
      {"minimax_m2", R"({
        "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
        "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2,
        "max_position_embeddings": 512, "intermediate_size": 16,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rotary_dim": 8,
        "use_qk_norm": true, "qk_norm_type": "per_layer", "num_local_experts": 8,
        "num_experts_per_tok": 2, "use_routing_bias": true, "rope_theta": 5000000.0})"},
      {"deepseek_v3", R"({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 3,
        "max_position_embeddings": 2048, "intermediate_size": 48,
        "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 24,
        "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 12,
        "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
        "n_shared_experts": 1, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
        "norm_topk_prob": true, "first_k_dense_replace": 1, "topk_method": "noaux_tc",
        "scoring_func": "sigmoid", "num_nextn_predict_layers": 1, "rope_theta": 10000.0,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512,
                         "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}})"},
      {"deepseek_v3_fp8", R"({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2,
        "max_position_embeddings": 2048, "intermediate_size": 48,
        "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 24,
        "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 12,
        "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
        "n_shared_experts": 1, "n_group": 2, "topk_group": 1, "routed_scaling_factor": 2.5,
        "norm_topk_prob": true, "first_k_dense_replace": 1, "rope_theta": 10000.0,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                "activation_scheme": "dynamic", "weight_block_size": [16, 16]}})"},
      {"deepseek_v2", R"({
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
        "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2,
        "max_position_embeddings": 512, "intermediate_size": 48,
        "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": null,
        "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
        "n_routed_experts": 8, "num_experts_per_tok": 3, "moe_intermediate_size": 16,
        "n_shared_experts": 2, "n_group": 2, "topk_group": 1,
        "topk_method": "group_limited_greedy", "first_k_dense_replace": 1,
        "rope_theta": 10000.0})"},
      {"kimi_k2_like", R"({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
        "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2,
        "max_position_embeddings": 512, "intermediate_size": 48,
        "num_attention_heads": 2, "num_key_value_heads": 2, "q_lora_rank": 16,
        "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
        "n_routed_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 8,
        "n_shared_experts": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.827,
        "norm_topk_prob": true, "first_k_dense_replace": 1, "rope_theta": 50000.0})"},
  };
}

inline ModelConfig parse_tiny(const TinyModel& m) {
  return parse_model_config_text(m.json, m.name).value();
}

}  // namespace locus::testing

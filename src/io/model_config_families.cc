// Per-family config.json readers: each knows its family's field names, defaults (those of the
// transformers configuration class) and RoPE layout. Called only from model_config.cc.
#include "io/model_config_families.h"

#include <cmath>
#include <initializer_list>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace locus::model_config_internal {

using config_json::Fields;

Status check_positive(const Fields& f, std::string_view name, int64_t value) {
  if (value > 0) return Status::ok();
  return f.invalid(fmt::format("{} must be positive, got {}", name, value));
}

namespace {

// The first of `names` present in the config; each family has its own spelling of the routed
// expert count and transformers 5 rewrites some of them (Qwen3 num_experts -> num_local_experts).
Expected<int64_t> read_first_int(const Fields& f, std::initializer_list<std::string_view> names) {
  for (auto name : names) {
    if (f.has(name)) return f.require_int(name);
  }
  return f.missing(*names.begin());
}

Expected<int64_t> read_head_dim(const Fields& f, int64_t hidden_size, int64_t num_heads) {
  LOCUS_RETURN_IF_ERROR(check_positive(f, "num_attention_heads", num_heads));
  LOCUS_ASSIGN_OR_RETURN(auto explicit_dim, f.optional_int("head_dim"));
  if (explicit_dim) return *explicit_dim;
  if (hidden_size % num_heads != 0) {
    return f.invalid(fmt::format(
        "hidden_size ({}) is not divisible by num_attention_heads ({}) and head_dim is not given",
        hidden_size, num_heads));
  }
  return hidden_size / num_heads;
}

Status read_gqa_heads(const Fields& f, ModelConfig& cfg) {
  auto& a = cfg.attention;
  a.kind = AttentionKind::kGqa;
  LOCUS_ASSIGN_OR_RETURN(a.num_attention_heads, f.require_int("num_attention_heads"));
  // Llama convention (and transformers' when the field is null): no GQA means MHA.
  LOCUS_ASSIGN_OR_RETURN(a.num_key_value_heads,
                         f.int_or("num_key_value_heads", a.num_attention_heads));
  LOCUS_ASSIGN_OR_RETURN(a.head_dim, read_head_dim(f, cfg.hidden_size, a.num_attention_heads));
  a.v_head_dim = a.head_dim;
  return Status::ok();
}

Expected<ScoringFunc> read_scoring(const Fields& f, std::string_view fallback) {
  LOCUS_ASSIGN_OR_RETURN(auto name, f.string_or("scoring_func", fallback));
  if (name == "softmax") return ScoringFunc::kSoftmax;
  if (name == "sigmoid") return ScoringFunc::kSigmoid;
  return f.error(
      ErrorCode::kUnsupported,
      fmt::format("scoring_func '{}' is not supported (supported: softmax, sigmoid)", name));
}

Expected<TopkMethod> read_topk_method(const Fields& f, std::string_view fallback) {
  LOCUS_ASSIGN_OR_RETURN(auto name, f.string_or("topk_method", fallback));
  if (name == "greedy") return TopkMethod::kGreedy;
  if (name == "group_limited_greedy") return TopkMethod::kGroupLimitedGreedy;
  if (name == "noaux_tc") return TopkMethod::kNoauxTc;
  return f.error(ErrorCode::kUnsupported,
                 fmt::format("topk_method '{}' is not supported (supported: greedy, "
                             "group_limited_greedy, noaux_tc)",
                             name));
}

}  // namespace

// DeepSeek-V2/V3 and Kimi-K2. Defaults are DeepseekV3Config's / DeepseekV2Config's.
//
// RoPE layout: the checkpoints store each q_pe/k_pe head with its rotation pairs interleaved
// (x[2i], x[2i+1]); DeepSeek's reference inference rotates them as complex pairs, transformers
// de-interleaves them (view(d/2, 2).transpose) before rotate_half, and vLLM builds the rope with
// is_neox_style=False. All three are the interleaved (GPT-J) rotation of the stored layout.
Status parse_deepseek(const Fields& f, ModelConfig& cfg, bool is_v3) {
  auto& a = cfg.attention;
  auto& mla = a.mla;
  a.kind = AttentionKind::kMla;
  LOCUS_ASSIGN_OR_RETURN(a.num_attention_heads, f.require_int("num_attention_heads"));
  LOCUS_ASSIGN_OR_RETURN(a.num_key_value_heads,
                         f.int_or("num_key_value_heads", a.num_attention_heads));
  // null is meaningful here (V2-Lite projects q directly), so only a missing key is an error.
  if (!f.object().contains("q_lora_rank")) return f.missing("q_lora_rank");
  LOCUS_ASSIGN_OR_RETURN(mla.q_lora_rank, f.optional_int("q_lora_rank"));
  LOCUS_ASSIGN_OR_RETURN(mla.kv_lora_rank, f.require_int("kv_lora_rank"));
  LOCUS_ASSIGN_OR_RETURN(mla.qk_nope_head_dim, f.require_int("qk_nope_head_dim"));
  LOCUS_ASSIGN_OR_RETURN(mla.qk_rope_head_dim, f.require_int("qk_rope_head_dim"));
  LOCUS_ASSIGN_OR_RETURN(mla.v_head_dim, f.require_int("v_head_dim"));
  a.head_dim = mla.qk_head_dim();
  a.v_head_dim = mla.v_head_dim;
  LOCUS_ASSIGN_OR_RETURN(a.qkv_bias, f.bool_or("attention_bias", false));
  a.o_bias = a.qkv_bias;

  LOCUS_ASSIGN_OR_RETURN(cfg.intermediate_size, f.require_int("intermediate_size"));
  auto& m = cfg.moe;
  LOCUS_ASSIGN_OR_RETURN(m.num_experts, read_first_int(f, {"n_routed_experts", "num_experts"}));
  LOCUS_ASSIGN_OR_RETURN(m.num_experts_per_tok, f.require_int("num_experts_per_tok"));
  LOCUS_ASSIGN_OR_RETURN(m.moe_intermediate_size, f.require_int("moe_intermediate_size"));
  LOCUS_ASSIGN_OR_RETURN(m.num_shared_experts, f.int_or("n_shared_experts", is_v3 ? 1 : 2));
  m.shared_expert_intermediate_size = m.num_shared_experts * m.moe_intermediate_size;
  LOCUS_ASSIGN_OR_RETURN(m.scoring_func, read_scoring(f, is_v3 ? "sigmoid" : "softmax"));
  LOCUS_ASSIGN_OR_RETURN(m.topk_method, read_topk_method(f, is_v3 ? "noaux_tc" : "greedy"));
  m.has_score_correction_bias = m.topk_method == TopkMethod::kNoauxTc;
  LOCUS_ASSIGN_OR_RETURN(m.n_group, f.int_or("n_group", is_v3 ? 8 : 1));
  LOCUS_ASSIGN_OR_RETURN(m.topk_group, f.int_or("topk_group", is_v3 ? 4 : 1));
  LOCUS_ASSIGN_OR_RETURN(m.routed_scaling_factor,
                         f.number_or("routed_scaling_factor", is_v3 ? 2.5 : 1.0));
  LOCUS_ASSIGN_OR_RETURN(m.norm_topk_prob, f.bool_or("norm_topk_prob", is_v3));
  LOCUS_ASSIGN_OR_RETURN(m.first_k_dense_replace, f.int_or("first_k_dense_replace", is_v3 ? 3 : 0));
  LOCUS_ASSIGN_OR_RETURN(m.moe_layer_freq, f.int_or("moe_layer_freq", 1));
  LOCUS_ASSIGN_OR_RETURN(cfg.num_nextn_predict_layers, f.int_or("num_nextn_predict_layers", 0));
  LOCUS_ASSIGN_OR_RETURN(cfg.rms_norm_eps, f.number_or("rms_norm_eps", 1e-6));
  LOCUS_ASSIGN_OR_RETURN(
      cfg.rope, parse_rope_config(f, 10000.0, mla.qk_rope_head_dim, RopeLayout::kInterleaved));
  return Status::ok();
}

// GLM-4.5 / GLM-4.5-Air. Defaults are Glm4MoeConfig's.
//
// RoPE layout: transformers' Glm4Moe imports apply_rotary_pos_emb from gpt_neox, i.e. rotate_half
// over the first head_dim * partial_rotary_factor dims with the rest passed through, and vLLM's
// glm4_moe keeps is_neox_style=True. So: neox pairs on the leading half of each head (unlike the
// dense GLM-4 models, which interleave).
Status parse_glm4_moe(const Fields& f, ModelConfig& cfg) {
  LOCUS_RETURN_IF_ERROR(read_gqa_heads(f, cfg));
  auto& a = cfg.attention;
  LOCUS_ASSIGN_OR_RETURN(bool qk_norm, f.bool_or("use_qk_norm", false));
  a.qk_norm = qk_norm ? QkNorm::kPerHead : QkNorm::kNone;
  // GLM's attention_bias covers q/k/v only; o_proj never has one.
  LOCUS_ASSIGN_OR_RETURN(a.qkv_bias, f.bool_or("attention_bias", false));

  LOCUS_ASSIGN_OR_RETURN(cfg.intermediate_size, f.require_int("intermediate_size"));
  auto& m = cfg.moe;
  LOCUS_ASSIGN_OR_RETURN(m.num_experts, read_first_int(f, {"n_routed_experts", "num_experts"}));
  LOCUS_ASSIGN_OR_RETURN(m.num_experts_per_tok, f.require_int("num_experts_per_tok"));
  LOCUS_ASSIGN_OR_RETURN(m.moe_intermediate_size, f.require_int("moe_intermediate_size"));
  LOCUS_ASSIGN_OR_RETURN(m.num_shared_experts, f.int_or("n_shared_experts", 1));
  m.shared_expert_intermediate_size = m.num_shared_experts * m.moe_intermediate_size;
  // GLM reuses DeepSeek-V3's router (sigmoid, e_score_correction_bias) without writing it down.
  LOCUS_ASSIGN_OR_RETURN(m.scoring_func, read_scoring(f, "sigmoid"));
  m.topk_method = TopkMethod::kNoauxTc;
  m.has_score_correction_bias = true;
  LOCUS_ASSIGN_OR_RETURN(m.n_group, f.int_or("n_group", 1));
  LOCUS_ASSIGN_OR_RETURN(m.topk_group, f.int_or("topk_group", 1));
  LOCUS_ASSIGN_OR_RETURN(m.routed_scaling_factor, f.number_or("routed_scaling_factor", 1.0));
  LOCUS_ASSIGN_OR_RETURN(m.norm_topk_prob, f.bool_or("norm_topk_prob", true));
  LOCUS_ASSIGN_OR_RETURN(m.first_k_dense_replace, f.int_or("first_k_dense_replace", 1));
  LOCUS_ASSIGN_OR_RETURN(cfg.num_nextn_predict_layers, f.int_or("num_nextn_predict_layers", 0));
  LOCUS_ASSIGN_OR_RETURN(cfg.rms_norm_eps, f.number_or("rms_norm_eps", 1e-5));

  LOCUS_ASSIGN_OR_RETURN(auto partial, read_partial_rotary_factor(f));
  const double rotary = static_cast<double>(a.head_dim) * partial.value_or(0.5);
  if (rotary != std::floor(rotary)) {
    return f.invalid(fmt::format("head_dim ({}) * partial_rotary_factor ({}) is not an integer",
                                 a.head_dim, partial.value_or(0.5)));
  }
  LOCUS_ASSIGN_OR_RETURN(
      cfg.rope, parse_rope_config(f, 10000.0, static_cast<int64_t>(rotary), RopeLayout::kNeox));
  return Status::ok();
}

// MiniMax-M2. Every layer is MoE and intermediate_size is the expert width. qk_norm_type
// "per_layer" normalizes q (and k) over all heads at once: the q_norm weight is
// num_heads * head_dim wide, not head_dim. RoPE: neox pairs on the first rotary_dim dims.
Status parse_minimax_m2(const Fields& f, ModelConfig& cfg) {
  LOCUS_RETURN_IF_ERROR(read_gqa_heads(f, cfg));
  auto& a = cfg.attention;
  LOCUS_ASSIGN_OR_RETURN(bool qk_norm, f.bool_or("use_qk_norm", false));
  LOCUS_ASSIGN_OR_RETURN(auto norm_type, f.string_or("qk_norm_type", "per_layer"));
  if (qk_norm) {
    if (norm_type == "per_layer") {
      a.qk_norm = QkNorm::kPerLayer;
    } else if (norm_type == "per_head") {
      a.qk_norm = QkNorm::kPerHead;
    } else {
      return f.invalid(
          fmt::format("qk_norm_type must be \"per_layer\" or \"per_head\", got '{}'", norm_type));
    }
  }
  LOCUS_ASSIGN_OR_RETURN(a.qkv_bias, f.bool_or("attention_bias", false));
  a.o_bias = a.qkv_bias;
  LOCUS_ASSIGN_OR_RETURN(a.sliding_window, f.optional_int("sliding_window"));
  // MiniMax-Text-01 mixes lightning (linear) attention layers (type 0) into the same list.
  LOCUS_ASSIGN_OR_RETURN(auto attn_types, f.int_list("attn_type_list"));
  for (size_t i = 0; i < attn_types.size(); ++i) {
    if (attn_types[i] != 1) {
      return f.error(ErrorCode::kUnsupported,
                     fmt::format("attn_type_list[{}] is {} (linear attention); only full "
                                 "attention layers (1) are supported",
                                 i, attn_types[i]));
    }
  }

  LOCUS_ASSIGN_OR_RETURN(cfg.intermediate_size, f.require_int("intermediate_size"));
  auto& m = cfg.moe;
  m.moe_intermediate_size = cfg.intermediate_size;
  LOCUS_ASSIGN_OR_RETURN(
      m.num_experts, read_first_int(f, {"num_local_experts", "num_experts", "n_routed_experts"}));
  LOCUS_ASSIGN_OR_RETURN(m.num_experts_per_tok, f.require_int("num_experts_per_tok"));
  LOCUS_ASSIGN_OR_RETURN(m.shared_expert_intermediate_size,
                         f.int_or("shared_intermediate_size", 0));
  m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
  LOCUS_ASSIGN_OR_RETURN(m.scoring_func, read_scoring(f, "sigmoid"));
  LOCUS_ASSIGN_OR_RETURN(m.has_score_correction_bias, f.bool_or("use_routing_bias", false));
  // A routing bias with a single group is exactly noaux_tc selection.
  m.topk_method = m.has_score_correction_bias ? TopkMethod::kNoauxTc : TopkMethod::kGreedy;
  LOCUS_ASSIGN_OR_RETURN(m.routed_scaling_factor, f.number_or("routed_scaling_factor", 1.0));
  LOCUS_ASSIGN_OR_RETURN(m.norm_topk_prob, f.bool_or("norm_topk_prob", true));
  LOCUS_ASSIGN_OR_RETURN(bool use_mtp, f.bool_or("use_mtp", false));
  LOCUS_ASSIGN_OR_RETURN(auto mtp_modules, f.int_or("num_mtp_modules", 0));
  cfg.num_nextn_predict_layers = use_mtp ? mtp_modules : 0;
  LOCUS_ASSIGN_OR_RETURN(cfg.rms_norm_eps, f.number_or("rms_norm_eps", 1e-6));

  LOCUS_ASSIGN_OR_RETURN(auto rotary_dim, f.optional_int("rotary_dim"));
  if (!rotary_dim) {
    LOCUS_ASSIGN_OR_RETURN(auto partial, read_partial_rotary_factor(f));
    rotary_dim = static_cast<int64_t>(static_cast<double>(a.head_dim) * partial.value_or(1.0));
  }
  LOCUS_ASSIGN_OR_RETURN(cfg.rope, parse_rope_config(f, 1e6, *rotary_dim, RopeLayout::kNeox));
  return Status::ok();
}

// Qwen3-MoE: per-head q_norm/k_norm always; full-width neox rope; no shared experts.
Status parse_qwen3_moe(const Fields& f, ModelConfig& cfg) {
  LOCUS_RETURN_IF_ERROR(read_gqa_heads(f, cfg));
  auto& a = cfg.attention;
  a.qk_norm = QkNorm::kPerHead;
  LOCUS_ASSIGN_OR_RETURN(a.qkv_bias, f.bool_or("attention_bias", false));
  a.o_bias = a.qkv_bias;
  LOCUS_ASSIGN_OR_RETURN(bool use_sliding, f.bool_or("use_sliding_window", false));
  if (use_sliding) {
    LOCUS_ASSIGN_OR_RETURN(auto window, f.require_int("sliding_window"));
    a.sliding_window = window;
  }

  LOCUS_ASSIGN_OR_RETURN(cfg.intermediate_size, f.require_int("intermediate_size"));
  auto& m = cfg.moe;
  LOCUS_ASSIGN_OR_RETURN(m.num_experts, read_first_int(f, {"num_experts", "num_local_experts"}));
  LOCUS_ASSIGN_OR_RETURN(m.num_experts_per_tok, f.require_int("num_experts_per_tok"));
  LOCUS_ASSIGN_OR_RETURN(m.moe_intermediate_size, f.require_int("moe_intermediate_size"));
  m.scoring_func = ScoringFunc::kSoftmax;
  m.topk_method = TopkMethod::kGreedy;
  LOCUS_ASSIGN_OR_RETURN(m.norm_topk_prob, f.bool_or("norm_topk_prob", false));
  LOCUS_ASSIGN_OR_RETURN(m.decoder_sparse_step, f.int_or("decoder_sparse_step", 1));
  LOCUS_ASSIGN_OR_RETURN(m.mlp_only_layers, f.int_list("mlp_only_layers"));
  LOCUS_ASSIGN_OR_RETURN(cfg.rms_norm_eps, f.number_or("rms_norm_eps", 1e-6));
  LOCUS_ASSIGN_OR_RETURN(cfg.rope, parse_rope_config(f, 10000.0, a.head_dim, RopeLayout::kNeox));
  return Status::ok();
}

// Mixtral: every layer MoE, intermediate_size is the expert width, softmax top-2 renormalized.
Status parse_mixtral(const Fields& f, ModelConfig& cfg) {
  LOCUS_RETURN_IF_ERROR(read_gqa_heads(f, cfg));
  LOCUS_ASSIGN_OR_RETURN(cfg.attention.sliding_window, f.optional_int("sliding_window"));
  LOCUS_ASSIGN_OR_RETURN(cfg.intermediate_size, f.require_int("intermediate_size"));
  auto& m = cfg.moe;
  m.moe_intermediate_size = cfg.intermediate_size;
  LOCUS_ASSIGN_OR_RETURN(m.num_experts, read_first_int(f, {"num_local_experts", "num_experts"}));
  LOCUS_ASSIGN_OR_RETURN(m.num_experts_per_tok, f.require_int("num_experts_per_tok"));
  m.scoring_func = ScoringFunc::kSoftmax;
  m.topk_method = TopkMethod::kGreedy;
  m.norm_topk_prob = true;
  LOCUS_ASSIGN_OR_RETURN(cfg.rms_norm_eps, f.number_or("rms_norm_eps", 1e-5));
  LOCUS_ASSIGN_OR_RETURN(cfg.rope,
                         parse_rope_config(f, 1e6, cfg.attention.head_dim, RopeLayout::kNeox));
  return Status::ok();
}

}  // namespace locus::model_config_internal

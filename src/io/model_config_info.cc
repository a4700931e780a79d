// Questions answered from a parsed ModelConfig: layer placement of MoE blocks, attention scale,
// parameter counts and the one-line summary. Shapes only; nothing here reads files.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "io/model_config.h"

namespace locus {
namespace {

std::string_view scoring_name(ScoringFunc s) {
  return s == ScoringFunc::kSoftmax ? "softmax" : "sigmoid";
}

std::string_view topk_method_name(TopkMethod t) {
  switch (t) {
    case TopkMethod::kGreedy:
      return "greedy";
    case TopkMethod::kGroupLimitedGreedy:
      return "group_limited_greedy";
    case TopkMethod::kNoauxTc:
      return "noaux_tc";
  }
  return "unknown";
}

// 30.5B, 3.3B; below a billion in millions (the demo model is 9.2M).
std::string param_count(int64_t n) {
  if (n < 1'000'000'000) return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
  return fmt::format("{:.1f}B", static_cast<double>(n) / 1e9);
}

int64_t attention_parameters(const ModelConfig& c) {
  const auto& a = c.attention;
  const int64_t h = c.hidden_size;
  const int64_t heads = a.num_attention_heads;
  if (a.kind == AttentionKind::kMla) {
    const auto& m = a.mla;
    int64_t q = 0;
    if (m.q_lora_rank) {
      // q_a_proj, q_a_layernorm, q_b_proj
      q = h * *m.q_lora_rank + *m.q_lora_rank + *m.q_lora_rank * heads * m.qk_head_dim();
    } else {
      q = h * heads * m.qk_head_dim();
    }
    // kv_a_proj_with_mqa (latent + shared rope key), kv_a_layernorm, kv_b_proj, o_proj
    const int64_t kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
                       m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim);
    const int64_t o = heads * m.v_head_dim * h;
    return q + kv + o;
  }
  const int64_t kv_heads = a.num_key_value_heads;
  const int64_t q_width = heads * a.head_dim;
  const int64_t k_width = kv_heads * a.head_dim;
  const int64_t v_width = kv_heads * a.v_head_dim;
  int64_t n = h * (q_width + k_width + v_width) + heads * a.v_head_dim * h;
  if (a.qkv_bias) n += q_width + k_width + v_width;
  if (a.o_bias) n += h;
  if (a.qk_norm == QkNorm::kPerHead) n += 2 * a.head_dim;
  if (a.qk_norm == QkNorm::kPerLayer) n += q_width + k_width;
  return n;
}

// Routed experts counted: all of them, or the num_experts_per_tok one token uses.
int64_t count_parameters(const ModelConfig& c, bool active_only) {
  const int64_t h = c.hidden_size;
  const auto& m = c.moe;
  const int64_t gated_mlp = 3 * h;  // gate, up and down projections per unit of width
  const int64_t routed = active_only ? m.num_experts_per_tok : m.num_experts;
  const int64_t moe_mlp = h * m.num_experts + (m.has_score_correction_bias ? m.num_experts : 0) +
                          routed * gated_mlp * m.moe_intermediate_size +
                          gated_mlp * m.shared_expert_intermediate_size;
  const int64_t dense_mlp = gated_mlp * c.intermediate_size;
  const int64_t per_layer_fixed = attention_parameters(c) + 2 * h;  // + the two RMSNorms
  int64_t n = c.vocab_size * h + h;                                 // embeddings, final norm
  if (!c.tie_word_embeddings) n += c.vocab_size * h;
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    n += per_layer_fixed + (c.is_moe_layer(layer) ? moe_mlp : dense_mlp);
  }
  return n;
}

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (layer < 0 || layer >= num_hidden_layers || moe.num_experts <= 0) return false;
  switch (architecture) {
    case Architecture::kDeepseekV3:
    case Architecture::kDeepseekV2:
      // DeepseekV2/V3 decoder layer: dense for the first k, then every moe_layer_freq-th.
      return layer >= moe.first_k_dense_replace && layer % moe.moe_layer_freq == 0;
    case Architecture::kGlm4Moe:
      return layer >= moe.first_k_dense_replace;
    case Architecture::kQwen3Moe:
      // Qwen3MoeDecoderLayer: listed layers stay dense; otherwise every decoder_sparse_step-th,
      // counted from 1.
      if (std::find(moe.mlp_only_layers.begin(), moe.mlp_only_layers.end(), layer) !=
          moe.mlp_only_layers.end()) {
        return false;
      }
      return (layer + 1) % moe.decoder_sparse_step == 0;
    case Architecture::kMiniMaxM2:
    case Architecture::kMixtral:
      return true;
  }
  return false;
}

int64_t ModelConfig::num_moe_layers() const {
  int64_t n = 0;
  for (int64_t layer = 0; layer < num_hidden_layers; ++layer)
    n += is_moe_layer(layer) ? 1 : 0;
  return n;
}

double ModelConfig::attention_softmax_scale() const {
  const double qk_dim =
      static_cast<double>(is_mla() ? attention.mla.qk_head_dim() : attention.head_dim);
  double scale = 1.0 / std::sqrt(qk_dim);
  const auto& s = rope.scaling;
  // DeepSeek's modeling: softmax_scale *= yarn_get_mscale(factor, mscale_all_dim)^2.
  if (is_mla() && s.type == RopeScalingType::kYarn && s.mscale_all_dim && *s.mscale_all_dim != 0 &&
      s.factor > 1.0) {
    const double m = 0.1 * *s.mscale_all_dim * std::log(s.factor) + 1.0;
    scale *= m * m;
  }
  return scale;
}

int64_t ModelConfig::num_parameters() const {
  return count_parameters(*this, false);
}

int64_t ModelConfig::num_active_parameters() const {
  return count_parameters(*this, true);
}

std::string ModelConfig::summary() const {
  const auto& a = attention;
  std::string s = fmt::format("{} ({}): {} layers ({} MoE), hidden {}, ", architecture_name,
                              model_type.empty() ? "?" : model_type, num_hidden_layers,
                              num_moe_layers(), hidden_size);
  if (is_mla()) {
    const auto& m = a.mla;
    s += fmt::format("MLA {} heads (q_lora {}, kv_lora {}, qk {}+{}, v {})", a.num_attention_heads,
                     m.q_lora_rank ? fmt::format("{}", *m.q_lora_rank) : std::string("none"),
                     m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim);
  } else {
    s += fmt::format("GQA {}/{} x {}", a.num_attention_heads, a.num_key_value_heads, a.head_dim);
    if (a.qk_norm == QkNorm::kPerHead) s += " qk-norm";
    if (a.qk_norm == QkNorm::kPerLayer) s += " qk-norm(per-layer)";
  }
  s += fmt::format(", {} experts top-{}", moe.num_experts, moe.num_experts_per_tok);
  if (moe.num_shared_experts > 0) s += fmt::format(" + {} shared", moe.num_shared_experts);
  s += fmt::format(" (moe_intermediate {}, {} {}", moe.moe_intermediate_size,
                   scoring_name(moe.scoring_func), topk_method_name(moe.topk_method));
  if (moe.n_group > 1) s += fmt::format(", {} groups top-{}", moe.n_group, moe.topk_group);
  if (moe.routed_scaling_factor != 1.0) s += fmt::format(", scale {}", moe.routed_scaling_factor);
  s += fmt::format("), vocab {}, rope {} theta {} rotary {}", vocab_size,
                   rope_layout_name(rope.layout), rope.theta, rope.rotary_dim);
  if (rope.scaling.type != RopeScalingType::kNone) {
    s += fmt::format(" {} x{}", rope_scaling_type_name(rope.scaling.type), rope.scaling.factor);
  }
  s += fmt::format(", {}", dtype_name(dtype));
  if (quant.is_quantized()) s += fmt::format(", {}", quant.summary());
  s += fmt::format(", {} params ({} active)", param_count(num_parameters()),
                   param_count(num_active_parameters()));
  return s;
}

}  // namespace locus

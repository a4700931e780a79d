// Weight names shared by several families.
#include <fmt/format.h>

#include "model/arch/layouts.h"

namespace locus::arch {

std::string layer_prefix(int64_t layer) {
  return fmt::format("model.layers.{}.", layer);
}

void append_layer_norms(WeightLayoutBuilder& b, int64_t layer) {
  const std::string p = layer_prefix(layer);
  b.norm(p + "input_layernorm.weight", b.config().hidden_size);
  b.norm(p + "post_attention_layernorm.weight", b.config().hidden_size);
}

void append_gqa_attention(WeightLayoutBuilder& b, int64_t layer) {
  const ModelConfig& c = b.config();
  const AttentionConfig& a = c.attention;
  const std::string p = layer_prefix(layer) + "self_attn.";
  const int64_t q_width = a.num_attention_heads * a.head_dim;
  const int64_t kv_width = a.num_key_value_heads * a.head_dim;
  b.linear(p + "q_proj", q_width, c.hidden_size, a.qkv_bias);
  b.linear(p + "k_proj", kv_width, c.hidden_size, a.qkv_bias);
  b.linear(p + "v_proj", a.num_key_value_heads * a.v_head_dim, c.hidden_size, a.qkv_bias);
  b.linear(p + "o_proj", c.hidden_size, a.num_attention_heads * a.v_head_dim, a.o_bias);
  switch (a.qk_norm) {
    case QkNorm::kNone:
      break;
    case QkNorm::kPerHead:
      b.norm(p + "q_norm.weight", a.head_dim);
      b.norm(p + "k_norm.weight", a.head_dim);
      break;
    case QkNorm::kPerLayer:
      b.norm(p + "q_norm.weight", q_width);
      b.norm(p + "k_norm.weight", kv_width);
      break;
  }
}

}  // namespace locus::arch

// Per-architecture Hugging Face weight names: one function per family appends the tensors of
// decoder layer `layer`. Shared tensors (embedding, final norm, lm_head) are added by
// weight_layout(); the family functions own everything inside model.layers.<i>.
#pragma once

#include "model/weight_layout.h"

namespace locus::arch {

void append_deepseek_layer(WeightLayoutBuilder& b, int64_t layer);  // V2 and V3 (Kimi-K2)
void append_glm4_moe_layer(WeightLayoutBuilder& b, int64_t layer);
void append_minimax_m2_layer(WeightLayoutBuilder& b, int64_t layer);
void append_qwen3_moe_layer(WeightLayoutBuilder& b, int64_t layer);
void append_mixtral_layer(WeightLayoutBuilder& b, int64_t layer);

// model.layers.<layer>. and the two norms every family has around attention and MLP.
std::string layer_prefix(int64_t layer);
void append_layer_norms(WeightLayoutBuilder& b, int64_t layer);
// q/k/v/o of grouped-query attention with the config's biases and q/k norms.
void append_gqa_attention(WeightLayoutBuilder& b, int64_t layer);

}  // namespace locus::arch

#include "model/layers/gqa_attention.h"

namespace locus {

Expected<GqaAttention> GqaAttention::load(WeightLoader& loader, const std::string& prefix,
                                          const RopeParams& rope,
                                          std::optional<int64_t> sliding_window) {
  const ModelConfig& c = loader.config();
  const AttentionConfig& a = c.attention;
  GqaAttention attn;
  LOCUS_ASSIGN_OR_RETURN(attn.q_proj_, loader.linear(prefix + ".q_proj", a.qkv_bias));
  LOCUS_ASSIGN_OR_RETURN(attn.k_proj_, loader.linear(prefix + ".k_proj", a.qkv_bias));
  LOCUS_ASSIGN_OR_RETURN(attn.v_proj_, loader.linear(prefix + ".v_proj", a.qkv_bias));
  LOCUS_ASSIGN_OR_RETURN(attn.o_proj_, loader.linear(prefix + ".o_proj", a.o_bias));
  attn.qk_norm_ = a.qk_norm;
  if (a.qk_norm != QkNorm::kNone) {
    LOCUS_ASSIGN_OR_RETURN(attn.q_norm_, loader.tensor(prefix + ".q_norm.weight"));
    LOCUS_ASSIGN_OR_RETURN(attn.k_norm_, loader.tensor(prefix + ".k_norm.weight"));
  }
  attn.num_heads_ = a.num_attention_heads;
  attn.num_kv_heads_ = a.num_key_value_heads;
  attn.head_dim_ = a.head_dim;
  attn.v_head_dim_ = a.v_head_dim;
  attn.eps_ = static_cast<float>(c.rms_norm_eps);
  attn.rope_ = rope;
  attn.params_.scale = static_cast<float>(c.attention_softmax_scale());
  attn.params_.sliding_window = sliding_window;
  return attn;
}

Expected<Tensor> GqaAttention::forward(Ops& ops, const Tensor& x, const DeviceBatch& batch,
                                       KvCacheLayer& cache) const {
  const int64_t tokens = x.size(0);
  const DType dtype = ops.activation_dtype();
  LOCUS_ASSIGN_OR_RETURN(Tensor q, ops.empty({tokens, num_heads_ * head_dim_}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor k, ops.empty({tokens, num_kv_heads_ * head_dim_}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor v, ops.empty({tokens, num_kv_heads_ * v_head_dim_}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.linear(x, q_proj_, q));
  LOCUS_RETURN_IF_ERROR(ops.linear(x, k_proj_, k));
  LOCUS_RETURN_IF_ERROR(ops.linear(x, v_proj_, v));

  // q/k-norm comes before rope in every family. Per layer (MiniMax-M2) normalizes the whole
  // projection; per head (Qwen3, GLM) each head_dim slice with one shared weight.
  if (qk_norm_ == QkNorm::kPerLayer) {
    LOCUS_ASSIGN_OR_RETURN(Tensor qn, ops.empty(q.shape(), dtype));
    LOCUS_ASSIGN_OR_RETURN(Tensor kn, ops.empty(k.shape(), dtype));
    LOCUS_RETURN_IF_ERROR(ops.rms_norm(q, q_norm_, eps_, qn));
    LOCUS_RETURN_IF_ERROR(ops.rms_norm(k, k_norm_, eps_, kn));
    q = std::move(qn);
    k = std::move(kn);
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor q3, q.reshape({tokens, num_heads_, head_dim_}));
  LOCUS_ASSIGN_OR_RETURN(Tensor k3, k.reshape({tokens, num_kv_heads_, head_dim_}));
  LOCUS_ASSIGN_OR_RETURN(Tensor v3, v.reshape({tokens, num_kv_heads_, v_head_dim_}));
  if (qk_norm_ == QkNorm::kPerHead) {
    LOCUS_ASSIGN_OR_RETURN(Tensor qn, ops.empty(q3.shape(), dtype));
    LOCUS_ASSIGN_OR_RETURN(Tensor kn, ops.empty(k3.shape(), dtype));
    LOCUS_RETURN_IF_ERROR(ops.rms_norm(q3, q_norm_, eps_, qn));
    LOCUS_RETURN_IF_ERROR(ops.rms_norm(k3, k_norm_, eps_, kn));
    q3 = std::move(qn);
    k3 = std::move(kn);
  }
  LOCUS_RETURN_IF_ERROR(ops.rope(q3, batch.positions, rope_));
  LOCUS_RETURN_IF_ERROR(ops.rope(k3, batch.positions, rope_));

  LOCUS_RETURN_IF_ERROR(ops.write_kv_cache(k3, v3, batch.attention.slot_mapping, cache.k, cache.v));
  LOCUS_ASSIGN_OR_RETURN(Tensor attn, ops.empty({tokens, num_heads_, v_head_dim_}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.paged_attention(q3, cache.k, cache.v, batch.attention, params_, attn));
  LOCUS_ASSIGN_OR_RETURN(Tensor attn2, attn.reshape({tokens, num_heads_ * v_head_dim_}));
  LOCUS_ASSIGN_OR_RETURN(Tensor out, ops.empty({tokens, o_proj_.out_features()}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.linear(attn2, o_proj_, out));
  return out;
}

}  // namespace locus

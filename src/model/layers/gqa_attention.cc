#include "model/layers/gqa_attention.h"

namespace locus {

Expected<GqaAttention> GqaAttention::load(WeightLoader& loader, const std::string& prefix,
                                          const RopeParams& rope,
                                          std::optional<int64_t> sliding_window,
                                          const ModelParallel& parallel) {
  const ModelConfig& c = loader.config();
  const AttentionConfig& a = c.attention;
  // MiniMax-M2's q/k norm takes the RMS over all heads at once, which a head split would need a
  // cross-rank reduction for: such attention runs whole on every rank instead.
  const bool split = parallel.is_parallel() && a.qk_norm != QkNorm::kPerLayer;
  const ShardRange heads = split
                               ? even_shard(a.num_attention_heads, parallel.rank(), parallel.size())
                               : ShardRange{0, a.num_attention_heads};
  const ShardRange kv_heads =
      split ? parallel.kv_heads(a.num_key_value_heads) : ShardRange{0, a.num_key_value_heads};
  std::optional<LinearShard> q, k, v, o;
  if (split) {
    q = LinearShard{0, heads.start * a.head_dim, heads.length * a.head_dim};
    k = LinearShard{0, kv_heads.start * a.head_dim, kv_heads.length * a.head_dim};
    v = LinearShard{0, kv_heads.start * a.v_head_dim, kv_heads.length * a.v_head_dim};
    o = LinearShard{1, heads.start * a.v_head_dim, heads.length * a.v_head_dim,
                    parallel.rank() == 0};
  }
  GqaAttention attn;
  attn.split_ = split;
  LOCUS_ASSIGN_OR_RETURN(attn.q_proj_, loader.linear(prefix + ".q_proj", a.qkv_bias, q));
  LOCUS_ASSIGN_OR_RETURN(attn.k_proj_, loader.linear(prefix + ".k_proj", a.qkv_bias, k));
  LOCUS_ASSIGN_OR_RETURN(attn.v_proj_, loader.linear(prefix + ".v_proj", a.qkv_bias, v));
  LOCUS_ASSIGN_OR_RETURN(attn.o_proj_, loader.linear(prefix + ".o_proj", a.o_bias, o));
  attn.qkv_.norm = a.qk_norm;
  if (a.qk_norm != QkNorm::kNone) {
    LOCUS_ASSIGN_OR_RETURN(attn.qkv_.q_norm, loader.tensor(prefix + ".q_norm.weight"));
    LOCUS_ASSIGN_OR_RETURN(attn.qkv_.k_norm, loader.tensor(prefix + ".k_norm.weight"));
  }
  attn.qkv_.num_heads = heads.length;
  attn.qkv_.num_kv_heads = kv_heads.length;
  attn.qkv_.head_dim = a.head_dim;
  attn.qkv_.v_head_dim = a.v_head_dim;
  attn.qkv_.eps = static_cast<float>(c.rms_norm_eps);
  attn.rope_ = rope;
  attn.params_.scale = static_cast<float>(c.attention_softmax_scale());
  attn.params_.sliding_window = sliding_window;
  return attn;
}

Expected<Tensor> GqaAttention::forward(Ops& ops, const Tensor& x, const DeviceBatch& batch,
                                       KvCacheLayer& cache, const AddRmsNorm* pre) const {
  const int64_t tokens = x.size(0);
  const DType dtype = ops.activation_dtype();
  const QkvSpec& s = qkv_;
  LOCUS_ASSIGN_OR_RETURN(Tensor qkv, ops.empty({tokens, s.width()}, dtype));
  const LinearWeight* parts[] = {&q_proj_, &k_proj_, &v_proj_};
  if (pre != nullptr) {
    LOCUS_RETURN_IF_ERROR(ops.add_rms_norm_merged_linear(*pre, parts, qkv));
  } else {
    LOCUS_RETURN_IF_ERROR(ops.merged_linear(x, parts, qkv));
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor q, ops.empty({tokens, s.num_heads, s.head_dim}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor attn, ops.empty({tokens, s.num_heads, s.v_head_dim}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.qkv_norm_rope_attention(qkv, s, batch.positions, rope_,
                                                    batch.attention.slot_mapping, cache.k, cache.v,
                                                    batch.attention, params_, q, attn));
  LOCUS_ASSIGN_OR_RETURN(Tensor attn2, attn.reshape({tokens, s.num_heads * s.v_head_dim}));
  LOCUS_ASSIGN_OR_RETURN(Tensor out, ops.empty({tokens, o_proj_.out_features()}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.linear(attn2, o_proj_, out));
  return out;
}

}  // namespace locus

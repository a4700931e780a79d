#include "model/layers/gqa_attention.h"

#include <algorithm>

namespace locus {

Expected<GqaAttention> GqaAttention::load(WeightLoader& loader, const std::string& prefix,
                                          const RopeParams& rope,
                                          std::optional<int64_t> sliding_window,
                                          const ModelParallel& parallel) {
  const ModelConfig& c = loader.config();
  const AttentionConfig& a = c.attention;
  const bool split = parallel.is_parallel();
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
  if (split && a.qk_norm == QkNorm::kPerLayer) {
    // MiniMax-M2 takes the RMS over all heads at once: each rank keeps its heads' part of the
    // weights, and forward() sums the squares over the ranks first.
    const int64_t d = a.head_dim;
    LOCUS_ASSIGN_OR_RETURN(
        attn.qkv_.q_norm,
        attn.qkv_.q_norm.slice(0, heads.start * d, (heads.start + heads.length) * d));
    LOCUS_ASSIGN_OR_RETURN(
        attn.qkv_.k_norm,
        attn.qkv_.k_norm.slice(0, kv_heads.start * d, (kv_heads.start + kv_heads.length) * d));
    attn.qkv_.q_norm_width = a.num_attention_heads * d;
    attn.qkv_.k_norm_width = a.num_key_value_heads * d;
    attn.norm_group_ = parallel.tp;
    // With fewer KV heads than ranks, several ranks hold the same head: only the first of them
    // adds its squares.
    const int replicas =
        static_cast<int>(std::max<int64_t>(1, parallel.size() / a.num_key_value_heads));
    attn.adds_k_squares_ = parallel.rank() % replicas == 0;
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

namespace {

// sum_squares of qkv's columns [start, start + width) into row `row` of `sums` [2, T].
Status add_squares(Ops& ops, const Tensor& qkv, int64_t start, int64_t width, Tensor& sums,
                   int64_t row) {
  LOCUS_ASSIGN_OR_RETURN(Tensor part, qkv.slice(1, start, start + width));
  LOCUS_ASSIGN_OR_RETURN(Tensor out, sums.select(0, row));
  return ops.sum_squares(part, out);
}

}  // namespace

Expected<Tensor> GqaAttention::forward(Ops& ops, const Tensor& x, const DeviceBatch& batch,
                                       KvCacheLayer& cache, const AddRmsNorm* pre) const {
  LOCUS_ASSIGN_OR_RETURN(Tensor heads, attend(ops, x, batch, cache, pre));
  LOCUS_ASSIGN_OR_RETURN(Tensor out,
                         ops.empty({x.size(0), o_proj_.out_features()}, ops.activation_dtype()));
  LOCUS_RETURN_IF_ERROR(ops.linear(heads, o_proj_, out));
  return out;
}

Expected<Tensor> GqaAttention::attend(Ops& ops, const Tensor& x, const DeviceBatch& batch,
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
  QkvSpec split_norm;
  if (norm_group_ != nullptr) {
    split_norm = s;
    LOCUS_ASSIGN_OR_RETURN(split_norm.sum_squares, adds_k_squares_
                                                       ? ops.empty({2, tokens}, DType::kF32)
                                                       : ops.zeros({2, tokens}, DType::kF32));
    LOCUS_RETURN_IF_ERROR(add_squares(ops, qkv, 0, s.q_width(), split_norm.sum_squares, 0));
    if (adds_k_squares_) {
      LOCUS_RETURN_IF_ERROR(
          add_squares(ops, qkv, s.q_width(), s.k_width(), split_norm.sum_squares, 1));
    }
    LOCUS_RETURN_IF_ERROR(norm_group_->all_reduce_sum(split_norm.sum_squares));
  }
  const QkvSpec& spec = norm_group_ != nullptr ? split_norm : s;
  LOCUS_ASSIGN_OR_RETURN(Tensor q, ops.empty({tokens, s.num_heads, s.head_dim}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor attn, ops.empty({tokens, s.num_heads, s.v_head_dim}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.qkv_norm_rope_attention(qkv, spec, batch.positions, rope_,
                                                    batch.attention.slot_mapping, cache.k, cache.v,
                                                    batch.attention, params_, q, attn));
  return attn.reshape({tokens, s.num_heads * s.v_head_dim});
}

}  // namespace locus

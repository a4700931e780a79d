#include "model/layers/mla_attention.h"

namespace locus {

Expected<MlaAttention> MlaAttention::load(WeightLoader& loader, const std::string& prefix,
                                          const RopeParams& rope, const ModelParallel& parallel) {
  const ModelConfig& c = loader.config();
  const MlaConfig& mla = c.attention.mla;
  const ShardRange heads =
      even_shard(c.attention.num_attention_heads, parallel.rank(), parallel.size());
  // Per head: q rows [nope | rope], kv_b rows [k nope | v], o columns [v].
  std::optional<LinearShard> q, kv_b, o;
  if (parallel.is_parallel()) {
    const int64_t q_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
    const int64_t kv_head = mla.qk_nope_head_dim + mla.v_head_dim;
    q = LinearShard{0, heads.start * q_head, heads.length * q_head};
    kv_b = LinearShard{0, heads.start * kv_head, heads.length * kv_head};
    o = LinearShard{1, heads.start * mla.v_head_dim, heads.length * mla.v_head_dim,
                    parallel.rank() == 0};
  }
  MlaAttention attn;
  attn.has_q_lora_ = mla.q_lora_rank.has_value();
  if (attn.has_q_lora_) {
    LOCUS_ASSIGN_OR_RETURN(attn.q_a_proj_, loader.linear(prefix + ".q_a_proj"));
    LOCUS_ASSIGN_OR_RETURN(attn.q_a_layernorm_, loader.tensor(prefix + ".q_a_layernorm.weight"));
    LOCUS_ASSIGN_OR_RETURN(attn.q_b_proj_, loader.linear(prefix + ".q_b_proj", false, q));
  } else {
    LOCUS_ASSIGN_OR_RETURN(attn.q_proj_, loader.linear(prefix + ".q_proj", false, q));
  }
  LOCUS_ASSIGN_OR_RETURN(attn.kv_a_proj_with_mqa_, loader.linear(prefix + ".kv_a_proj_with_mqa"));
  LOCUS_ASSIGN_OR_RETURN(attn.kv_a_layernorm_, loader.tensor(prefix + ".kv_a_layernorm.weight"));
  LOCUS_ASSIGN_OR_RETURN(attn.kv_b_proj_, loader.linear(prefix + ".kv_b_proj", false, kv_b));
  LOCUS_ASSIGN_OR_RETURN(attn.o_proj_, loader.linear(prefix + ".o_proj", false, o));
  attn.num_heads_ = heads.length;
  attn.params_.kv_lora_rank = mla.kv_lora_rank;
  attn.params_.qk_nope_head_dim = mla.qk_nope_head_dim;
  attn.params_.qk_rope_head_dim = mla.qk_rope_head_dim;
  attn.params_.v_head_dim = mla.v_head_dim;
  // 1/sqrt(qk_head_dim), times yarn's mscale(mscale_all_dim)^2 when the config has one.
  attn.params_.scale = static_cast<float>(c.attention_softmax_scale());
  attn.eps_ = static_cast<float>(c.rms_norm_eps);
  attn.rope_ = rope;
  return attn;
}

Expected<Tensor> MlaAttention::forward(Ops& ops, const Tensor& x, const DeviceBatch& batch,
                                       KvCacheLayer& cache) const {
  const int64_t tokens = x.size(0);
  const DType dtype = ops.activation_dtype();
  const int64_t rank = params_.kv_lora_rank;
  const int64_t nope = params_.qk_nope_head_dim;
  const int64_t rope_dim = params_.qk_rope_head_dim;

  Tensor q;
  if (has_q_lora_) {
    LOCUS_ASSIGN_OR_RETURN(Tensor qa, ops.empty({tokens, q_a_proj_.out_features()}, dtype));
    LOCUS_RETURN_IF_ERROR(ops.linear(x, q_a_proj_, qa));
    LOCUS_ASSIGN_OR_RETURN(Tensor qa_norm, ops.empty(qa.shape(), dtype));
    LOCUS_RETURN_IF_ERROR(ops.rms_norm(qa, q_a_layernorm_, eps_, qa_norm));
    LOCUS_ASSIGN_OR_RETURN(q, ops.empty({tokens, q_b_proj_.out_features()}, dtype));
    LOCUS_RETURN_IF_ERROR(ops.linear(qa_norm, q_b_proj_, q));
  } else {
    LOCUS_ASSIGN_OR_RETURN(q, ops.empty({tokens, q_proj_.out_features()}, dtype));
    LOCUS_RETURN_IF_ERROR(ops.linear(x, q_proj_, q));
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor q3, q.reshape({tokens, num_heads_, nope + rope_dim}));
  LOCUS_ASSIGN_OR_RETURN(Tensor q_pe, q3.slice(2, nope, nope + rope_dim));
  LOCUS_RETURN_IF_ERROR(ops.rope(q_pe, batch.positions, rope_));

  // One projection yields the latent and the shared rope key: [c_kv (rank) | k_pe (rope)].
  LOCUS_ASSIGN_OR_RETURN(Tensor kv_a, ops.empty({tokens, rank + rope_dim}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.linear(x, kv_a_proj_with_mqa_, kv_a));
  LOCUS_ASSIGN_OR_RETURN(Tensor latent_raw, kv_a.slice(1, 0, rank));
  LOCUS_ASSIGN_OR_RETURN(Tensor latent, ops.empty({tokens, rank}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.rms_norm(latent_raw, kv_a_layernorm_, eps_, latent));
  LOCUS_ASSIGN_OR_RETURN(Tensor kv_a3, kv_a.reshape({tokens, 1, rank + rope_dim}));
  LOCUS_ASSIGN_OR_RETURN(Tensor k_pe3, kv_a3.slice(2, rank, rank + rope_dim));
  LOCUS_RETURN_IF_ERROR(ops.rope(k_pe3, batch.positions, rope_));
  LOCUS_ASSIGN_OR_RETURN(Tensor k_pe, kv_a.slice(1, rank, rank + rope_dim));

  LOCUS_RETURN_IF_ERROR(ops.write_mla_cache(latent, k_pe, batch.attention.slot_mapping, cache.k));
  LOCUS_ASSIGN_OR_RETURN(Tensor attn, ops.empty({tokens, num_heads_, params_.v_head_dim}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.mla_attention(q3, cache.k, kv_b_proj_, batch.attention, params_, attn));
  LOCUS_ASSIGN_OR_RETURN(Tensor attn2, attn.reshape({tokens, num_heads_ * params_.v_head_dim}));
  LOCUS_ASSIGN_OR_RETURN(Tensor out, ops.empty({tokens, o_proj_.out_features()}, dtype));
  LOCUS_RETURN_IF_ERROR(ops.linear(attn2, o_proj_, out));
  return out;
}

}  // namespace locus

// The default forms of the fused ops: compositions of the single ops, so a backend without a
// fused kernel gets the same results (and the CPU reference defines them).
#include <vector>

#include "backend/ops.h"

namespace locus {

Status Ops::do_merged_linear(const Tensor& x, std::span<const LinearWeight* const> parts,
                             Tensor& out) {
  int64_t column = 0;
  for (const LinearWeight* w : parts) {
    const int64_t n = w->out_features();
    LOCUS_ASSIGN_OR_RETURN(Tensor part, empty({x.size(0), n}, out.dtype()));
    LOCUS_RETURN_IF_ERROR(linear(x, *w, part));
    LOCUS_ASSIGN_OR_RETURN(Tensor slice, out.slice(1, column, column + n));
    LOCUS_RETURN_IF_ERROR(copy(part, slice));
    column += n;
  }
  return Status::ok();
}

Status Ops::do_embedding_rms_norm(const Tensor& table, const Tensor& token_ids,
                                  const Tensor& weight, float eps, Tensor& residual,
                                  Tensor& normed) {
  LOCUS_RETURN_IF_ERROR(embedding(table, token_ids, residual));
  return rms_norm(residual, weight, eps, normed);
}

Status Ops::do_moe_router(const Tensor& x, const LinearWeight& router,
                          const Tensor& correction_bias, const MoeRouting& routing,
                          Tensor& router_logits, Tensor& topk_ids, Tensor& topk_weights) {
  LOCUS_RETURN_IF_ERROR(linear(x, router, router_logits));
  return moe_route(router_logits, correction_bias, routing, topk_ids, topk_weights);
}

Status Ops::do_add_rms_norm_merged_linear(const AddRmsNorm& step,
                                          std::span<const LinearWeight* const> parts, Tensor& out) {
  LOCUS_RETURN_IF_ERROR(add_rms_norm_to(step));
  return merged_linear(step.normed, parts, out);
}

Status Ops::do_add_rms_norm_moe_router(const AddRmsNorm& step, const LinearWeight& router,
                                       const Tensor& correction_bias, const MoeRouting& routing,
                                       Tensor& router_logits, Tensor& topk_ids,
                                       Tensor& topk_weights) {
  LOCUS_RETURN_IF_ERROR(add_rms_norm_to(step));
  return moe_router(step.normed, router, correction_bias, routing, router_logits, topk_ids,
                    topk_weights);
}

Status Ops::do_linear_add_rms_norm_moe_router(const Tensor& x, const LinearWeight& proj,
                                              const AddRmsNorm& step, const LinearWeight& router,
                                              const Tensor& correction_bias,
                                              const MoeRouting& routing, Tensor& router_logits,
                                              Tensor& topk_ids, Tensor& topk_weights,
                                              bool /*experts_follow*/) {
  Tensor delta = step.delta;  // linear's out is a non-const reference to the same storage
  LOCUS_RETURN_IF_ERROR(linear(x, proj, delta));
  return add_rms_norm_moe_router(step, router, correction_bias, routing, router_logits, topk_ids,
                                 topk_weights);
}

Status Ops::do_qkv_norm_rope_write_kv(const Tensor& qkv, const QkvSpec& spec,
                                      const Tensor& positions, const RopeParams& rope,
                                      const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache,
                                      Tensor& q_out) {
  const int64_t tokens = qkv.size(0);
  const DType dtype = activation_dtype();
  const int64_t qw = spec.q_width(), kw = spec.k_width();
  LOCUS_ASSIGN_OR_RETURN(Tensor q2, qkv.slice(1, 0, qw));
  LOCUS_ASSIGN_OR_RETURN(Tensor k2, qkv.slice(1, qw, qw + kw));
  LOCUS_ASSIGN_OR_RETURN(Tensor v2, qkv.slice(1, qw + kw, spec.width()));
  LOCUS_ASSIGN_OR_RETURN(Tensor v3, v2.unflatten(1, spec.num_kv_heads));
  LOCUS_ASSIGN_OR_RETURN(Tensor k_out, empty({tokens, spec.num_kv_heads, spec.head_dim}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor q_flat, q_out.reshape({tokens, qw}));
  LOCUS_ASSIGN_OR_RETURN(Tensor k_flat, k_out.reshape({tokens, kw}));
  switch (spec.norm) {
    case QkNorm::kPerLayer:              // over the whole projection
      if (spec.sum_squares.defined()) {  // ... whose heads are split over ranks
        LOCUS_ASSIGN_OR_RETURN(Tensor q_ss, spec.sum_squares.select(0, 0));
        LOCUS_ASSIGN_OR_RETURN(Tensor k_ss, spec.sum_squares.select(0, 1));
        LOCUS_RETURN_IF_ERROR(
            split_rms_norm(q2, spec.q_norm, q_ss, spec.q_norm_width, spec.eps, q_flat));
        LOCUS_RETURN_IF_ERROR(
            split_rms_norm(k2, spec.k_norm, k_ss, spec.k_norm_width, spec.eps, k_flat));
        break;
      }
      LOCUS_RETURN_IF_ERROR(rms_norm(q2, spec.q_norm, spec.eps, q_flat));
      LOCUS_RETURN_IF_ERROR(rms_norm(k2, spec.k_norm, spec.eps, k_flat));
      break;
    case QkNorm::kPerHead: {  // each head_dim slice with the one shared weight
      LOCUS_ASSIGN_OR_RETURN(Tensor q3, q2.unflatten(1, spec.num_heads));
      LOCUS_ASSIGN_OR_RETURN(Tensor k3, k2.unflatten(1, spec.num_kv_heads));
      LOCUS_RETURN_IF_ERROR(rms_norm(q3, spec.q_norm, spec.eps, q_out));
      LOCUS_RETURN_IF_ERROR(rms_norm(k3, spec.k_norm, spec.eps, k_out));
      break;
    }
    case QkNorm::kNone:
      LOCUS_RETURN_IF_ERROR(copy(q2, q_flat));
      LOCUS_RETURN_IF_ERROR(copy(k2, k_flat));
      break;
  }
  LOCUS_RETURN_IF_ERROR(Ops::rope(q_out, positions, rope));
  LOCUS_RETURN_IF_ERROR(Ops::rope(k_out, positions, rope));
  return write_kv_cache(k_out, v3, slot_mapping, k_cache, v_cache);
}

Status Ops::do_qkv_norm_rope_attention(const Tensor& qkv, const QkvSpec& spec,
                                       const Tensor& positions, const RopeParams& rope,
                                       const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache,
                                       const AttentionMetadata& metadata,
                                       const AttentionParams& params, Tensor& q_out, Tensor& out) {
  LOCUS_RETURN_IF_ERROR(
      do_qkv_norm_rope_write_kv(qkv, spec, positions, rope, slot_mapping, k_cache, v_cache, q_out));
  return do_paged_attention(q_out, k_cache, v_cache, metadata, params, out);
}

}  // namespace locus

#include "model/layers/moe_block.h"

#include <algorithm>

#include "model/layers/mlp.h"

namespace locus {

Expected<MoeBlock> MoeBlock::load(WeightLoader& loader, const ArchitectureSpec& spec,
                                  const std::string& layer_prefix, const ModelParallel& parallel) {
  const MoeConfig& moe = loader.config().moe;
  const int rank = parallel.rank();
  const int size = parallel.size();
  std::optional<ShardRange> expert_width;
  if (parallel.is_parallel() && !parallel.expert_parallel) {
    expert_width = even_shard(moe.moe_intermediate_size, rank, size);
  }
  const std::string prefix = layer_prefix + spec.moe_module;
  MoeBlock block;
  LOCUS_ASSIGN_OR_RETURN(block.router_, loader.linear(prefix + ".gate"));
  if (!spec.correction_bias.empty()) {
    LOCUS_ASSIGN_OR_RETURN(block.correction_bias_,
                           loader.tensor(layer_prefix + spec.correction_bias));
  }
  block.experts_.reserve(static_cast<size_t>(moe.num_experts));
  for (int64_t e = 0; e < moe.num_experts; ++e) {
    if (!parallel.owns_expert(e, moe.num_experts)) {
      block.experts_.emplace_back();  // on another rank: left out of this rank's sum
      block.all_experts_local_ = false;
      continue;
    }
    LOCUS_ASSIGN_OR_RETURN(
        ExpertWeights w,
        loader.gated_mlp(prefix + ".experts." + std::to_string(e), spec.expert_gate, spec.expert_up,
                         spec.expert_down, expert_width));
    block.experts_.push_back(std::move(w));
  }
  if (moe.num_shared_experts > 0 && moe.shared_expert_intermediate_size > 0) {
    // Shared experts run on every token: split over the ranks even with expert parallelism.
    std::optional<ShardRange> width;
    if (parallel.is_parallel()) {
      width = even_shard(moe.shared_expert_intermediate_size, rank, size);
    }
    LOCUS_ASSIGN_OR_RETURN(
        block.shared_experts_,
        loader.gated_mlp(prefix + ".shared_experts", "gate_proj", "up_proj", "down_proj", width));
  }
  block.routing_ = spec.routing;
  if (parallel.is_data_parallel())
    block.exchange_ = make_expert_exchange(parallel, moe.num_experts);
  return block;
}

Expected<Tensor> MoeBlock::forward(Ops& ops, const Tensor& x) const {
  return run(ops, x, nullptr, 0, nullptr);
}

Expected<Tensor> MoeBlock::forward(Ops& ops, const AddRmsNorm& step, int64_t dp_max_tokens,
                                   const PendingProjection* proj) const {
  return run(ops, step.normed, &step, dp_max_tokens, proj);
}

Expected<Tensor> MoeBlock::run(Ops& ops, const Tensor& x, const AddRmsNorm* step,
                               int64_t dp_max_tokens, const PendingProjection* proj) const {
  const int64_t tokens = x.size(0);
  const int64_t k = routing_.top_k;
  // The router runs in f32 whatever the activation dtype (transformers casts both sides).
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, ops.empty({tokens, router_.out_features()}, DType::kF32));
  LOCUS_ASSIGN_OR_RETURN(Tensor topk_ids, ops.empty({tokens, k}, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor topk_weights, ops.empty({tokens, k}, DType::kF32));
  if (proj != nullptr) {
    // The experts come next on this rank's own tokens (no exchange, every expert here): the
    // backend may leave the routing's last steps to them.
    const bool experts_follow = exchange_ == nullptr && all_experts_local_;
    LOCUS_RETURN_IF_ERROR(ops.linear_add_rms_norm_moe_router(
        proj->input, *proj->weight, *step, router_, correction_bias_, routing_, logits, topk_ids,
        topk_weights, experts_follow));
  } else if (step != nullptr) {
    LOCUS_RETURN_IF_ERROR(ops.add_rms_norm_moe_router(*step, router_, correction_bias_, routing_,
                                                      logits, topk_ids, topk_weights));
  } else {
    LOCUS_RETURN_IF_ERROR(
        ops.moe_router(x, router_, correction_bias_, routing_, logits, topk_ids, topk_weights));
  }
  Tensor routed;
  if (exchange_ == nullptr) {
    LOCUS_ASSIGN_OR_RETURN(routed, ops.empty(x.shape(), ops.activation_dtype()));
    LOCUS_RETURN_IF_ERROR(ops.moe_experts(x, topk_ids, topk_weights, experts_, routed));
  } else {
    LOCUS_ASSIGN_OR_RETURN(ExpertDispatch dispatch,
                           exchange_->prepare(ops, x, topk_ids, topk_weights, dp_max_tokens));
    LOCUS_ASSIGN_OR_RETURN(Tensor expert_out,
                           ops.empty(dispatch.x.shape(), ops.activation_dtype()));
    if (dispatch.x.size(0) > 0) {
      LOCUS_RETURN_IF_ERROR(ops.moe_experts(dispatch.x, dispatch.topk_ids, dispatch.topk_weights,
                                            experts_, expert_out));
    }
    LOCUS_ASSIGN_OR_RETURN(routed, exchange_->finalize(ops, dispatch, expert_out));
  }
  if (!shared_experts_) return routed;
  LOCUS_ASSIGN_OR_RETURN(Tensor shared, gated_mlp_forward(ops, *shared_experts_, x));
  LOCUS_RETURN_IF_ERROR(ops.add(routed, shared, routed));
  return routed;
}

}  // namespace locus

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
  if (parallel.is_data_parallel()) block.dp_ = parallel.dp;
  return block;
}

Expected<Tensor> MoeBlock::forward(Ops& ops, const Tensor& x) const {
  return run(ops, x, nullptr);
}

Expected<Tensor> MoeBlock::forward(Ops& ops, const AddRmsNorm& step) const {
  return run(ops, step.normed, &step);
}

Expected<Tensor> MoeBlock::run(Ops& ops, const Tensor& x, const AddRmsNorm* step) const {
  if (dp_ != nullptr) {
    if (step != nullptr) LOCUS_RETURN_IF_ERROR(ops.add_rms_norm_to(*step));
    LOCUS_ASSIGN_OR_RETURN(Tensor routed, run_data_parallel(ops, x));
    if (!shared_experts_) return routed;
    LOCUS_ASSIGN_OR_RETURN(Tensor shared, gated_mlp_forward(ops, *shared_experts_, x));
    LOCUS_RETURN_IF_ERROR(ops.add(routed, shared, routed));
    return routed;
  }
  const int64_t tokens = x.size(0);
  const int64_t k = routing_.top_k;
  // The router runs in f32 whatever the activation dtype (transformers casts both sides).
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, ops.empty({tokens, router_.out_features()}, DType::kF32));
  LOCUS_ASSIGN_OR_RETURN(Tensor topk_ids, ops.empty({tokens, k}, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor topk_weights, ops.empty({tokens, k}, DType::kF32));
  if (step != nullptr) {
    LOCUS_RETURN_IF_ERROR(ops.add_rms_norm_moe_router(*step, router_, correction_bias_, routing_,
                                                      logits, topk_ids, topk_weights));
  } else {
    LOCUS_RETURN_IF_ERROR(
        ops.moe_router(x, router_, correction_bias_, routing_, logits, topk_ids, topk_weights));
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor routed, ops.empty(x.shape(), ops.activation_dtype()));
  LOCUS_RETURN_IF_ERROR(ops.moe_experts(x, topk_ids, topk_weights, experts_, routed));
  if (!shared_experts_) return routed;
  LOCUS_ASSIGN_OR_RETURN(Tensor shared, gated_mlp_forward(ops, *shared_experts_, x));
  LOCUS_RETURN_IF_ERROR(ops.add(routed, shared, routed));
  return routed;
}

Expected<Tensor> MoeBlock::run_data_parallel(Ops& ops, const Tensor& x) const {
  const int64_t tokens = x.size(0);
  const int64_t hidden = x.size(1);
  const int ranks = dp_->size();
  const DType dtype = ops.activation_dtype();
  // Every rank's token count (host tensors: the counts size the buffers below).
  LOCUS_ASSIGN_OR_RETURN(Tensor count, Tensor::empty({1}, DType::kI32));
  count.data<int32_t>()[0] = static_cast<int32_t>(tokens);
  LOCUS_ASSIGN_OR_RETURN(Tensor counts, Tensor::empty({ranks}, DType::kI32));
  LOCUS_RETURN_IF_ERROR(dp_->all_gather(count, counts, 0));
  int64_t longest = 0;
  for (int r = 0; r < ranks; ++r)
    longest = std::max<int64_t>(longest, counts.data<int32_t>()[r]);

  // Padded to the longest rank's count so that every rank sends the same shape; padding rows
  // are zeros, routed like any row, and dropped after the reduce-scatter.
  LOCUS_ASSIGN_OR_RETURN(Tensor padded, ops.zeros({longest, hidden}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor head, padded.slice(0, 0, tokens));
  LOCUS_RETURN_IF_ERROR(ops.copy(x, head));
  LOCUS_ASSIGN_OR_RETURN(Tensor all, ops.empty({ranks * longest, hidden}, dtype));
  LOCUS_RETURN_IF_ERROR(dp_->all_gather(padded, all, 0));

  const int64_t k = routing_.top_k;
  const int64_t rows = all.size(0);
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, ops.empty({rows, router_.out_features()}, DType::kF32));
  LOCUS_ASSIGN_OR_RETURN(Tensor topk_ids, ops.empty({rows, k}, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor topk_weights, ops.empty({rows, k}, DType::kF32));
  LOCUS_RETURN_IF_ERROR(
      ops.moe_router(all, router_, correction_bias_, routing_, logits, topk_ids, topk_weights));
  LOCUS_ASSIGN_OR_RETURN(Tensor partial, ops.empty(all.shape(), dtype));
  LOCUS_RETURN_IF_ERROR(ops.moe_experts(all, topk_ids, topk_weights, experts_, partial));
  LOCUS_ASSIGN_OR_RETURN(Tensor mine, ops.empty({longest, hidden}, dtype));
  LOCUS_RETURN_IF_ERROR(dp_->reduce_scatter_sum(partial, mine));
  LOCUS_ASSIGN_OR_RETURN(Tensor out, ops.empty({tokens, hidden}, dtype));
  LOCUS_ASSIGN_OR_RETURN(Tensor used, mine.slice(0, 0, tokens));
  LOCUS_RETURN_IF_ERROR(ops.copy(used, out));
  return out;
}

}  // namespace locus

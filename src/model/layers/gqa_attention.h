// Grouped-query attention as Qwen3-MoE, Mixtral, GLM-4.5 and MiniMax-M2 run it: q/k/v
// projections (optional biases), optional q/k RMSNorm (per head or over all heads), rope on the
// leading rotary dims, paged causal attention, o projection. q/k/v run as one merged projection
// and one norm + rope + cache-write op, which a GPU backend fuses into two kernels.
#pragma once

#include <optional>
#include <string>

#include "backend/ops.h"
#include "io/model_config.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/parallel.h"
#include "model/weight_loader.h"

namespace locus {

class GqaAttention {
 public:
  // `prefix` is "model.layers.<i>.self_attn". With tensor parallelism, this rank's heads only
  // (model/parallel.h); the output is then a partial sum over the ranks.
  static Expected<GqaAttention> load(WeightLoader& loader, const std::string& prefix,
                                     const RopeParams& rope, std::optional<int64_t> sliding_window,
                                     const ModelParallel& parallel = {});

  // x [T, hidden] -> [T, hidden]; writes this step's K/V into `cache` first. With `pre`, x is
  // pre->normed and the QKV projection runs the pre-norm step first (add_rms_norm_merged_linear).
  Expected<Tensor> forward(Ops& ops, const Tensor& x, const DeviceBatch& batch, KvCacheLayer& cache,
                           const AddRmsNorm* pre = nullptr) const;
  // forward without the o projection: the heads' outputs [T, heads * v_head_dim], for a caller
  // that runs o_proj() inside the op that consumes it (linear_add_rms_norm_moe_router).
  Expected<Tensor> attend(Ops& ops, const Tensor& x, const DeviceBatch& batch, KvCacheLayer& cache,
                          const AddRmsNorm* pre = nullptr) const;
  const LinearWeight& o_proj() const { return o_proj_; }

  // Whether the heads are split over the tensor-parallel ranks (the output is a partial sum).
  bool is_split() const { return split_; }
  int64_t num_kv_heads() const { return qkv_.num_kv_heads; }

 private:
  LinearWeight q_proj_, k_proj_, v_proj_, o_proj_;
  QkvSpec qkv_;  // heads, head dims and the q/k norm
  RopeParams rope_;
  AttentionParams params_;
  bool split_ = false;
  // A per-layer q/k norm over split heads: the group whose sums of squares make the RMS, and
  // whether this rank adds its k heads' squares (not when it replicates another rank's head).
  Communicator* norm_group_ = nullptr;
  bool adds_k_squares_ = true;
};

}  // namespace locus

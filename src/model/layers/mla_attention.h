// Multi-head latent attention as DeepSeek-V2/V3 and Kimi-K2 run it. The cache keeps, per token,
// the normalized compressed latent c_kv (kv_lora_rank) and the rotated shared key k_pe; queries
// come from q_proj, or from the q LoRA pair q_a_proj -> q_a_layernorm -> q_b_proj.
#pragma once

#include <string>

#include "backend/ops.h"
#include "io/model_config.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/parallel.h"
#include "model/weight_loader.h"

namespace locus {

class MlaAttention {
 public:
  // `prefix` is "model.layers.<i>.self_attn". With tensor parallelism, this rank's heads only:
  // the latent cache is whole on every rank, and the output is a partial sum over the ranks.
  static Expected<MlaAttention> load(WeightLoader& loader, const std::string& prefix,
                                     const RopeParams& rope, const ModelParallel& parallel = {});

  // x [T, hidden] -> [T, hidden]; writes this step's latents into `cache` first.
  Expected<Tensor> forward(Ops& ops, const Tensor& x, const DeviceBatch& batch,
                           KvCacheLayer& cache) const;

 private:
  bool has_q_lora_ = false;
  LinearWeight q_proj_;  // without q LoRA
  LinearWeight q_a_proj_, q_b_proj_;
  Tensor q_a_layernorm_;
  LinearWeight kv_a_proj_with_mqa_;
  Tensor kv_a_layernorm_;
  LinearWeight kv_b_proj_;
  LinearWeight o_proj_;
  int64_t num_heads_ = 0;
  MlaParams params_;
  float eps_ = 0.0f;
  RopeParams rope_;
};

}  // namespace locus

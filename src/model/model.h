// A decoder-only MoE language model on an ops backend: the five served families share this one
// stack (embedding -> N x [RMSNorm, attention (GQA or MLA), RMSNorm, dense MLP or MoE] ->
// RMSNorm -> lm_head); what differs per family lives in model/arch/. One forward call serves
// prefill, chunked prefill and decode for any mix of sequences.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "backend/ops.h"
#include "io/model_config.h"
#include "model/arch/architecture.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/layers/gqa_attention.h"
#include "model/layers/mla_attention.h"
#include "model/layers/moe_block.h"
#include "model/parallel.h"
#include "model/weight_source.h"

namespace locus {

class Model {
 public:
  // Checks `source` against the architecture's weight layout (check_weights) and the backend's
  // weight budget before reading anything, then prepares every weight on `ops`, which must
  // outlive the model. MTP / next-n layers are skipped (logged). With `parallel`, this rank's
  // part of the model (model/parallel.h): every rank of the group must then run the same
  // forward calls, since each layer ends in collectives over `parallel.tp`.
  static Expected<std::unique_ptr<Model>> load(const ModelConfig& config,
                                               const WeightSource& source, Ops& ops,
                                               const ModelParallel& parallel = {});

  const ModelConfig& config() const { return config_; }
  const ModelParallel& parallel() const { return parallel_; }
  Ops& ops() const { return ops_; }
  int64_t vocab_size() const { return config_.vocab_size; }

  // What each token stores per layer (see model/kv_cache.h for the layout).
  KvCacheShape kv_cache_shape() const;
  Expected<KvCache> allocate_kv_cache(int64_t num_blocks, int64_t block_size) const;

  // Runs the batch: writes every new token's KV into `cache` (at batch.slot_mapping), and
  // returns f32 logits [batch.logits_indices.size(), vocab] in host memory, row i for flat token
  // logits_indices[i].
  Expected<Tensor> forward(const ForwardBatch& batch, KvCache& cache);
  // forward() without the copy to the host: the f32 logits stay on the device (for sampling
  // there).
  Expected<Tensor> forward_on_device(const ForwardBatch& batch, KvCache& cache);
  // The same on arrays already on the backend (no validation, no host synchronization): returns
  // f32 logits [batch.logits_indices.numel(), vocab] on the device. What a captured graph runs.
  Expected<Tensor> forward_device(const DeviceBatch& batch, KvCache& cache);

 private:
  struct DecoderLayer {
    Tensor input_norm;
    Tensor post_attention_norm;
    std::optional<GqaAttention> gqa;
    std::optional<MlaAttention> mla;
    std::optional<ExpertWeights> dense_mlp;
    std::optional<MoeBlock> moe;
  };

  Model(const ModelConfig& config, Ops& ops, const ModelParallel& parallel)
      : config_(config), ops_(ops), parallel_(parallel) {}
  // prepared_bytes: what the weights take on the backend (a progress bar above 256 MiB).
  Status load_weights(const WeightSource& source, const ArchitectureSpec& spec,
                      uint64_t prepared_bytes);
  // With `pre`, x is pre->normed and the layer runs the pre-norm step first. With `o`
  // (GQA layers only), the o projection is left to the caller: o receives its input and weight,
  // and the returned tensor is its (unwritten) output.
  Expected<Tensor> run_layer(const DecoderLayer& layer, const Tensor& x, const AddRmsNorm* pre,
                             const DeviceBatch& batch, KvCacheLayer& cache,
                             PendingProjection* o = nullptr);

  ModelConfig config_;
  Ops& ops_;
  ModelParallel parallel_;
  float eps_ = 0.0f;
  Tensor embed_tokens_;
  std::vector<DecoderLayer> layers_;
  Tensor final_norm_;
  LinearWeight lm_head_;
};

}  // namespace locus

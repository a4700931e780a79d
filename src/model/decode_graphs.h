// CUDA-graph replay of decode steps (vLLM's CUDAGraphRunner): a pure decode batch of n
// sequences is padded to the smallest captured batch size >= n and replayed from a graph, so a
// step costs one launch instead of a few hundred. Graphs are captured lazily, the first time a
// (batch size, context bound) pair is needed, after an eager warm-up of the same shape.
//
// Inputs live in one device buffer at fixed addresses, refreshed by a single host->device copy
// per step. Padding rows decode token 0 at position 0 of a sequence of length 1 whose only block
// is `pad_block` (a spare KV block no request owns), so they compute harmless values that are
// never read. Attention's grid is sized from the context bound of the graph (seq_len buckets
// 4k, 16k, 64k, ... up to max_model_len), not from the step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "backend/ops.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace locus {

struct DecodeGraphOptions {
  int max_batch_size = 256;    // largest captured batch (vLLM: max_num_seqs, capped at 512)
  int64_t max_model_len = 0;   // the largest seq_len any request reaches
  int max_blocks_per_seq = 0;  // width of the block table (>= max_model_len / block_size)
  int32_t pad_block = -1;      // a KV block reserved for padding rows
};

class DecodeGraphs {
 public:
  // Fails when the backend cannot record graphs.
  static Expected<std::unique_ptr<DecodeGraphs>> create(Model& model, KvCache& cache,
                                                        const DecodeGraphOptions& options);

  // The captured batch sizes: 1, 2, 4, 8, 16, 24, ... (step 8 to 256, then 16).
  const std::vector<int>& batch_sizes() const { return sizes_; }
  // A pure decode batch (one new token per sequence, logits for each, in order) that fits.
  bool can_run(const ForwardBatch& batch) const;
  // Host f32 logits [num_seqs, vocab], as Model::forward would return.
  Expected<Tensor> run(const ForwardBatch& batch);
  // Same, leaving the logits on the device: rows [0, num_seqs) of the graph's output buffer,
  // valid until the next run. `feed`, when set, runs after the inputs' upload with the token
  // ids' device view [num_seqs] (async scheduling: the previous step's sampled tokens go there
  // on the device, and batch.token_ids is not read).
  using TokenFeed = std::function<Status(Tensor& token_ids)>;
  Expected<Tensor> run_on_device(const ForwardBatch& batch, const TokenFeed& feed = {});
  int num_captured() const { return static_cast<int>(graphs_.size()); }

 private:
  DecodeGraphs(Model& model, KvCache& cache, const DecodeGraphOptions& options)
      : model_(model), cache_(cache), options_(options) {}
  Status allocate_inputs();
  DeviceBatch view_for(int batch_size, int64_t seq_bound) const;

  Model& model_;
  KvCache& cache_;
  DecodeGraphOptions options_;
  std::vector<int> sizes_;
  std::vector<int64_t> seq_bounds_;
  // One device buffer: slot_mapping (i64) first, then i32 token_ids, positions, seq_lens,
  // query_start_loc, logits_indices and the block table, each sized for the largest batch.
  Tensor inputs_;
  // Two host copies of the inputs (pinned where the backend has it), used in turn: a step may
  // be queued while the one before it has not read its inputs yet (async scheduling).
  std::shared_ptr<uint8_t[]> staging_[2];
  int next_staging_ = 0;
  struct Captured {
    std::unique_ptr<Ops::Graph> graph;
    Tensor logits;  // the graph's output buffer (kept alive: the graph writes it on replay)
  };
  std::map<std::pair<int, int64_t>, Captured> graphs_;
};

}  // namespace locus

// A deterministic toy model for engine tests: the logits at a position are a pure function of
// the token history up to it, so a request's greedy output is known regardless of batching.
// It really uses the paged KV cache: each step stores (token, position) at slot_mapping and
// reads every request's history back through its block table, so a wrong block table, slot
// mapping, prefix hit or preemption shows up as a wrong token (or an error). Tests only.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/model_runner.h"

namespace locus {

struct FakeModelConfig {
  int vocab_size = 64;
  int block_size = 4;
  uint64_t seed = 1;
  float logit_scale = 8.0f;  // logits spread over [-scale/2, scale/2)
  // Draw plain rows itself (execute_sampled, and launch_sampled / collect_sampled for async
  // scheduling) with the host sampler's processors, as a GPU runner would.
  bool device_sampling = false;
};

class FakeModel : public ModelRunner {
 public:
  explicit FakeModel(const FakeModelConfig& config);

  int vocab_size() const override { return config_.vocab_size; }
  const KVCacheSpec& kv_cache_spec() const override { return spec_; }
  Status initialize_kv_cache(int num_blocks) override;
  Expected<Tensor> execute(const ModelInputBatch& batch) override;
  bool supports_device_sampling() const override { return config_.device_sampling; }
  Expected<std::vector<int32_t>> execute_sampled(const ModelInputBatch& batch) override;
  bool supports_async_sampling() const override { return config_.device_sampling; }
  Status launch_sampled(const ModelInputBatch& batch, bool tokens_from_previous) override;
  Expected<std::vector<int32_t>> collect_sampled() override;
  // Steps launched with their input tokens taken from the step before (async scheduling).
  int64_t num_fed_steps() const { return num_fed_steps_; }

  // The logits the model gives after `history` (a reference for tests, no KV involved).
  std::vector<float> reference_logits(const std::vector<int32_t>& history) const;

  // Tokens whose KV this model computed so far (what prefix hits save).
  int64_t num_computed_tokens() const { return num_computed_tokens_; }
  int64_t num_steps() const { return num_steps_; }

 private:
  uint64_t extend_hash(uint64_t h, int32_t token) const;
  void fill_logits(uint64_t history_hash, float* out) const;

  FakeModelConfig config_;
  KVCacheSpec spec_;
  int num_slots_ = 0;
  std::vector<int32_t> kv_tokens_;     // [num_blocks * block_size]
  std::vector<int32_t> kv_positions_;  // the position each slot was written for; -1 = never
  int64_t num_computed_tokens_ = 0;
  int64_t num_steps_ = 0;
  // Async scheduling: the draws of launched steps not yet collected, and the last draw.
  std::deque<std::vector<int32_t>> launched_;
  std::vector<int32_t> last_drawn_;
  int64_t num_fed_steps_ = 0;
};

}  // namespace locus

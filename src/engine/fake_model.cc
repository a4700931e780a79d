// FakeModel: history-hash logits read through a paged fake KV cache.
#include "engine/fake_model.h"

#include <fmt/format.h>

#include "core/counter_rng.h"
#include "sampling/logits_processors.h"
#include "sampling/sampling_params.h"

namespace locus {

FakeModel::FakeModel(const FakeModelConfig& config)
    : config_(config),
      spec_(KVCacheSpec::full_attention(/*num_layers=*/1, /*num_kv_heads=*/1, /*head_dim=*/2,
                                        DType::kI32, config.block_size)) {}

Status FakeModel::initialize_kv_cache(int num_blocks) {
  num_slots_ = num_blocks * config_.block_size;
  kv_tokens_.assign(static_cast<size_t>(num_slots_), -1);
  kv_positions_.assign(static_cast<size_t>(num_slots_), -1);
  return Status::ok();
}

uint64_t FakeModel::extend_hash(uint64_t h, int32_t token) const {
  return mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) * 0x9E3779B97F4A7C15ull));
}

void FakeModel::fill_logits(uint64_t history_hash, float* out) const {
  const uint64_t stream = stream_key(config_.seed, history_hash);
  for (int v = 0; v < config_.vocab_size; ++v) {
    out[v] = config_.logit_scale * (counter_uniform(stream, static_cast<uint64_t>(v)) - 0.5f);
  }
}

std::vector<float> FakeModel::reference_logits(const std::vector<int32_t>& history) const {
  uint64_t h = config_.seed;
  for (int32_t t : history)
    h = extend_hash(h, t);
  std::vector<float> out(static_cast<size_t>(config_.vocab_size));
  fill_logits(h, out.data());
  return out;
}

Expected<Tensor> FakeModel::execute(const ModelInputBatch& b) {
  const int bs = config_.block_size;
  if (b.block_size != bs) {
    return invalid_argument(fmt::format("fake model: batch block_size {} != {}", b.block_size, bs));
  }
  const auto num_tokens = static_cast<size_t>(b.num_tokens());
  if (b.positions.size() != num_tokens || b.slot_mapping.size() != num_tokens ||
      b.query_start_loc.size() != static_cast<size_t>(b.num_reqs) + 1 ||
      b.block_table.size() !=
          static_cast<size_t>(b.num_reqs) * static_cast<size_t>(b.max_num_blocks_per_req)) {
    return invalid_argument("fake model: inconsistent batch array sizes");
  }
  ++num_steps_;
  num_computed_tokens_ += static_cast<int64_t>(num_tokens);

  // 1. Write this step's KV (before reading: a token attends to itself and earlier ones).
  for (size_t i = 0; i < num_tokens; ++i) {
    const int64_t slot = b.slot_mapping[i];
    if (slot < 0 || slot >= num_slots_) {
      return internal_error(
          fmt::format("fake model: token {} has slot {} outside the cache", i, slot));
    }
    kv_tokens_[static_cast<size_t>(slot)] = b.token_ids[i];
    kv_positions_[static_cast<size_t>(slot)] = b.positions[i];
  }

  // 2. For each request, walk its history through the block table once, emitting logits at
  // each wanted position.
  LOCUS_ASSIGN_OR_RETURN(
      Tensor logits,
      Tensor::empty({static_cast<int64_t>(b.logits_indices.size()), config_.vocab_size},
                    DType::kF32));
  float* out = logits.data<float>();
  size_t next_row = 0;
  for (int r = 0; r < b.num_reqs && next_row < b.logits_indices.size(); ++r) {
    const int q_begin = b.query_start_loc[static_cast<size_t>(r)];
    const int q_end = b.query_start_loc[static_cast<size_t>(r) + 1];
    const int32_t* table = b.block_table.data() +
                           static_cast<size_t>(r) * static_cast<size_t>(b.max_num_blocks_per_req);
    uint64_t h = config_.seed;
    int walked = 0;  // positions folded into h
    while (next_row < b.logits_indices.size() && b.logits_indices[next_row] < q_end) {
      const int flat = b.logits_indices[next_row];
      if (flat < q_begin) return internal_error("fake model: logits_indices not ascending");
      const int target = b.positions[static_cast<size_t>(flat)];
      for (; walked <= target; ++walked) {
        const int block_index = walked / bs;
        if (block_index >= b.max_num_blocks_per_req || table[block_index] == kPadBlockId) {
          return internal_error(fmt::format(
              "fake model: request row {} position {} has no block in its block table", r, walked));
        }
        const auto slot = static_cast<size_t>(table[block_index]) * static_cast<size_t>(bs) +
                          static_cast<size_t>(walked % bs);
        if (slot >= static_cast<size_t>(num_slots_) || kv_positions_[slot] != walked) {
          return internal_error(fmt::format(
              "fake model: request row {} position {} reads slot {} holding position {} (wrong "
              "block table or slot mapping)",
              r, walked, slot, slot < static_cast<size_t>(num_slots_) ? kv_positions_[slot] : -2));
        }
        h = extend_hash(h, kv_tokens_[slot]);
      }
      fill_logits(h, out + next_row * static_cast<size_t>(config_.vocab_size));
      ++next_row;
    }
  }
  if (next_row != b.logits_indices.size()) {
    return internal_error("fake model: logits_indices outside every request's tokens");
  }
  return logits;
}

Expected<std::vector<int32_t>> FakeModel::execute_sampled(const ModelInputBatch& batch) {
  if (!config_.device_sampling) return unsupported("fake model: device sampling is off");
  if (batch.device_sampling.size() != batch.logits_indices.size()) {
    return invalid_argument("fake model: one sampling row per logits row");
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, execute(batch));
  const auto vocab = static_cast<size_t>(config_.vocab_size);
  std::vector<int32_t> tokens(batch.device_sampling.size(), -1);
  // The CPU backend's sample_rows draw, row by row.
  DrawScratch scratch;
  for (size_t r = 0; r < tokens.size(); ++r) {
    const SamplingRowParams& p = batch.device_sampling[r];
    tokens[r] = draw_plain(std::span<const float>(logits.data<float>() + r * vocab, vocab),
                           p.temperature, p.top_k, p.top_p, p.min_p, p.u, scratch);
  }
  return tokens;
}

Status FakeModel::launch_sampled(const ModelInputBatch& batch, bool tokens_from_previous) {
  if (launched_.size() >= 2) return internal_error("fake model: two steps already launched");
  Expected<std::vector<int32_t>> tokens = std::vector<int32_t>{};
  if (tokens_from_previous) {
    if (last_drawn_.size() != batch.token_ids.size()) {
      return internal_error(fmt::format("fake model: {} tokens fed from a draw of {}",
                                        batch.token_ids.size(), last_drawn_.size()));
    }
    ModelInputBatch fed = batch;
    fed.token_ids = last_drawn_;
    ++num_fed_steps_;
    tokens = execute_sampled(fed);
  } else {
    tokens = execute_sampled(batch);
  }
  if (!tokens) return tokens.status();
  last_drawn_ = *tokens;
  launched_.push_back(std::move(*tokens));
  return Status::ok();
}

Expected<std::vector<int32_t>> FakeModel::collect_sampled() {
  if (launched_.empty()) return internal_error("fake model: no step was launched");
  std::vector<int32_t> tokens = std::move(launched_.front());
  launched_.pop_front();
  return tokens;
}

}  // namespace locus

// CPU reference sampler.
#include "sampling/sampler.h"

#include <fmt/format.h>

#include "core/counter_rng.h"

namespace locus {

uint64_t request_rng_stream(std::optional<uint64_t> request_seed, uint64_t engine_seed,
                            uint64_t request_id) {
  // Distinct name keys keep seeded and unseeded streams apart even when numbers coincide.
  constexpr uint64_t kSeededKey = 0x5EEDED0000000001ull;
  if (request_seed) return stream_key(*request_seed, kSeededKey);
  return stream_key(engine_seed, request_id);
}

SampleResult Sampler::sample_row(std::span<const float> raw_logits, const SamplingRow& row) {
  const SamplingParams& p = *row.params;
  const auto num_outputs = static_cast<int>(row.output_token_ids.size());
  const bool has_penalties =
      p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (p.is_greedy() && p.logit_bias.empty() && !has_penalties && num_outputs >= p.min_tokens) {
    // Nothing changes the logits: argmax of the raw row, no copy.
    SampleResult result;
    result.token_id = argmax(raw_logits);
    if (p.logprobs) result.logprobs = compute_logprobs(raw_logits, result.token_id, *p.logprobs);
    return result;
  }
  work_.assign(raw_logits.begin(), raw_logits.end());
  std::span<float> logits(work_);

  apply_logit_bias(logits, p.logit_bias);
  if (num_outputs < p.min_tokens) {
    masked_.assign(p.stop_token_ids.begin(), p.stop_token_ids.end());
    if (row.eos_token_id && !p.ignore_eos) masked_.push_back(*row.eos_token_id);
    mask_tokens(logits, masked_);
  }
  apply_penalties(logits, row.prompt_token_ids, row.output_token_ids, p.repetition_penalty,
                  p.frequency_penalty, p.presence_penalty, penalty_scratch_);

  SampleResult result;
  if (p.is_greedy()) {
    result.token_id = argmax(logits);
  } else {
    apply_temperature(logits, p.temperature);
    apply_min_p(logits, p.min_p);
    if (p.has_top_k()) apply_top_k(logits, p.top_k, float_scratch_);
    apply_top_p(logits, p.top_p, index_scratch_);
    const float u = counter_uniform(row.rng_stream, static_cast<uint64_t>(num_outputs));
    result.token_id = sample_from_logits(logits, u, float_scratch_);
  }
  if (p.logprobs) result.logprobs = compute_logprobs(raw_logits, result.token_id, *p.logprobs);
  return result;
}

Expected<std::vector<SampleResult>> Sampler::sample(std::span<const float> logits, int vocab_size,
                                                    std::span<const SamplingRow> rows) {
  if (vocab_size <= 0)
    return invalid_argument(fmt::format("vocab_size {} must be positive", vocab_size));
  const size_t vocab = static_cast<size_t>(vocab_size);
  if (logits.size() != rows.size() * vocab) {
    return invalid_argument(fmt::format("sampler: {} logits for {} rows of vocab {}", logits.size(),
                                        rows.size(), vocab_size));
  }
  std::vector<SampleResult> results;
  results.reserve(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].params == nullptr)
      return invalid_argument(fmt::format("sampler row {} has no params", r));
    results.push_back(sample_row(logits.subspan(r * vocab, vocab), rows[r]));
  }
  return results;
}

}  // namespace locus

// Logits processors for one row of logits (one request), in the order the sampler applies them:
// logit_bias, min_tokens masking, penalties, then temperature, min_p, top_k, top_p. Each works
// on a single row so that a request's result never depends on the rest of the batch.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace locus {

// Adds the bias of each listed token, clamped to [-100, 100] like OpenAI and vLLM.
void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& logit_bias);

// Sets the listed tokens to -inf (EOS and stop ids while min_tokens is not reached).
void mask_tokens(std::span<float> logits, std::span<const int32_t> token_ids);

// Reusable per-vocabulary scratch for counting tokens without a hash map or a per-row memset.
class PenaltyScratch {
 public:
  void resize(int vocab_size);
  std::vector<int32_t> output_counts;
  std::vector<uint8_t> seen;  // in prompt or output (repetition penalty)
  std::vector<int32_t> touched;
};

// vLLM's penalties. Repetition (multiplicative) covers tokens of the prompt and the output:
// positive logits are divided by it, negative ones multiplied. Frequency and presence
// (additive, OpenAI) cover output tokens only: logit -= frequency * count + presence * (count>0).
void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_token_ids,
                     std::span<const int32_t> output_token_ids, float repetition_penalty,
                     float frequency_penalty, float presence_penalty, PenaltyScratch& scratch);

void apply_temperature(std::span<float> logits, float temperature);

// Keeps tokens whose probability is at least min_p times the most likely one's.
void apply_min_p(std::span<float> logits, float min_p);

// The k-th largest value (1-based), k <= values.size().
float kth_largest(std::span<const float> values, int k);

// Keeps the k largest logits (and any tied with the k-th); the rest become -inf.
void apply_top_k(std::span<float> logits, int top_k, std::vector<float>& scratch);

// Keeps the smallest set of most likely tokens whose probability mass reaches top_p.
void apply_top_p(std::span<float> logits, float top_p, std::vector<int32_t>& scratch);

// Index of the largest logit; ties go to the lowest token id.
int32_t argmax(std::span<const float> logits);

// Draws from softmax(logits) with one uniform u in [0, 1) by walking the CDF in token-id order.
// One uniform per token (not one per vocabulary entry) keeps seeded sampling cheap and easy to
// reproduce on any backend.
int32_t sample_from_logits(std::span<const float> logits, float u);
// Same, with caller-owned scratch for the weights (no allocation per draw).
int32_t sample_from_logits(std::span<const float> logits, float u, std::vector<float>& weights);

// One plain draw as a device sampler makes it (no history, no logprobs): argmax below
// kGreedyTemperatureEpsilon, else temperature, min_p, top_k (> 0), top_p, then the draw with u.
// The scratch vectors are the caller's, reused across rows.
struct DrawScratch {
  std::vector<float> work;
  std::vector<float> floats;
  std::vector<int32_t> indices;
};
int32_t draw_plain(std::span<const float> logits, float temperature, int top_k, float top_p,
                   float min_p, float u, DrawScratch& scratch);

}  // namespace locus

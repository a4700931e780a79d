// Log-probabilities reported with a token: the chosen token's, and the top-k alternatives.
// Computed from the model's raw logits (vLLM's default logprobs_mode=raw_logprobs), i.e. before
// penalties, temperature and top-k/top-p, so they describe the model, not the sampler.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace locus {

struct TokenLogprob {
  int32_t token_id = -1;
  float logprob = 0.0f;
  int rank = 0;  // 1 = most likely; ties share the better rank
};

struct Logprobs {
  TokenLogprob token;             // the sampled (or, for prompt logprobs, the actual) token
  std::vector<TokenLogprob> top;  // most likely first; ties by lower token id
};

// log_softmax(logits)[token], its rank, and the `num_top` most likely tokens.
Logprobs compute_logprobs(std::span<const float> logits, int32_t token, int num_top);

}  // namespace locus

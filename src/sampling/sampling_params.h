// Per-request sampling and stopping parameters, with vLLM's names, defaults and validation
// messages, so a vLLM/OpenAI client sees the same behaviour and the same 400 errors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace locus {

// Below this temperature sampling is greedy (vLLM's _SAMPLING_EPS).
inline constexpr float kGreedyTemperatureEpsilon = 1e-5f;

struct SamplingParams {
  int n = 1;  // completions per prompt; fanned out into n child requests by the engine
  float temperature = 1.0f;
  int top_k = 0;  // 0 or -1: disabled
  float top_p = 1.0f;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;  // per-request seed: output independent of batch composition
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::map<int32_t, float> logit_bias;  // token id -> bias, clamped to [-100, 100] when applied

  std::optional<int> logprobs;         // top logprobs per generated token (plus the sampled one)
  std::optional<int> prompt_logprobs;  // top logprobs per prompt position

  std::vector<std::string> stop;        // stop strings, matched on the detokenized text
  std::vector<int32_t> stop_token_ids;  // stop on any of these tokens (kept in token_ids)
  std::optional<int> max_tokens;        // unset: up to the model's max length
  int min_tokens = 0;                   // EOS and stop ids suppressed until this many outputs
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  bool include_stop_str_in_output = false;

  bool is_greedy() const { return temperature < kGreedyTemperatureEpsilon; }
  bool has_top_k() const { return top_k > 0; }

  // Checks ranges that do not depend on the model; messages follow vLLM's wording.
  Status validate() const;
  // Also checks token ids against the vocabulary and logprobs against the server's limit.
  Status validate_for_model(int vocab_size, int max_logprobs) const;
};

}  // namespace locus

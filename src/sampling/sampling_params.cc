// Validation of sampling parameters (vLLM's SamplingParams._verify_args messages).
#include "sampling/sampling_params.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace locus {

Status SamplingParams::validate() const {
  if (n < 1) return invalid_argument(fmt::format("n must be at least 1, got {}.", n));
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return invalid_argument(
        fmt::format("presence_penalty must be in [-2, 2], got {}.", presence_penalty));
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return invalid_argument(
        fmt::format("frequency_penalty must be in [-2, 2], got {}.", frequency_penalty));
  }
  if (!(repetition_penalty > 0.0f)) {
    return invalid_argument(
        fmt::format("repetition_penalty must be greater than zero, got {}.", repetition_penalty));
  }
  if (!(temperature >= 0.0f)) {
    return invalid_argument(fmt::format("temperature must be non-negative, got {}.", temperature));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return invalid_argument(fmt::format("top_p must be in (0, 1], got {}.", top_p));
  }
  if (top_k < -1) {
    return invalid_argument(
        fmt::format("top_k must be 0 or -1 (disable), or at least 1, got {}.", top_k));
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return invalid_argument(fmt::format("min_p must be in [0, 1], got {}.", min_p));
  }
  if (max_tokens && *max_tokens < 1) {
    return invalid_argument(fmt::format("max_tokens must be at least 1, got {}.", *max_tokens));
  }
  if (min_tokens < 0) {
    return invalid_argument(
        fmt::format("min_tokens must be greater than or equal to 0, got {}.", min_tokens));
  }
  if (max_tokens && min_tokens > *max_tokens) {
    return invalid_argument(
        fmt::format("min_tokens must be less than or equal to max_tokens={}, got {}.", *max_tokens,
                    min_tokens));
  }
  if (logprobs && *logprobs < 0) {
    return invalid_argument(fmt::format("logprobs must be non-negative, got {}.", *logprobs));
  }
  if (prompt_logprobs && *prompt_logprobs < 0) {
    return invalid_argument(
        fmt::format("prompt_logprobs must be non-negative, got {}.", *prompt_logprobs));
  }
  for (const std::string& s : stop) {
    if (s.empty()) return invalid_argument("stop cannot contain an empty string.");
  }
  for (const auto& [token, bias] : logit_bias) {
    if (!(bias == bias)) {
      return invalid_argument(fmt::format("logit_bias for token {} is NaN.", token));
    }
  }
  return Status::ok();
}

Status SamplingParams::validate_for_model(int vocab_size, int max_logprobs) const {
  LOCUS_RETURN_IF_ERROR(validate());
  std::vector<int32_t> bad;
  for (const auto& entry : logit_bias) {
    if (entry.first < 0 || entry.first >= vocab_size) bad.push_back(entry.first);
  }
  if (!bad.empty()) {
    return invalid_argument(fmt::format(
        "token_id(s) {} in logit_bias contain out-of-vocab token ids. Vocabulary size: {}",
        fmt::join(bad, ", "), vocab_size));
  }
  for (int32_t t : stop_token_ids) {
    if (t < 0 || t >= vocab_size) {
      return invalid_argument(fmt::format(
          "stop_token_ids contains out-of-vocab token id {}. Vocabulary size: {}", t, vocab_size));
    }
  }
  if (logprobs && *logprobs > max_logprobs) {
    return invalid_argument(
        fmt::format("Requested sample logprobs of {}, which is greater than max allowed: {}",
                    *logprobs, max_logprobs));
  }
  if (prompt_logprobs && *prompt_logprobs > max_logprobs) {
    return invalid_argument(
        fmt::format("Requested prompt logprobs of {}, which is greater than max allowed: {}",
                    *prompt_logprobs, max_logprobs));
  }
  return Status::ok();
}

}  // namespace locus

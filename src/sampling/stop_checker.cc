// Token-level stop checks and the stop-string matcher.
#include "sampling/stop_checker.h"

#include <algorithm>

namespace locus {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "unknown";
}

std::optional<TokenStop> check_token_stop(const SamplingParams& params,
                                          std::optional<int32_t> eos_token_id, int32_t last_token,
                                          int num_output_tokens, int num_tokens, int max_tokens,
                                          int max_model_len) {
  if (num_output_tokens >= params.min_tokens) {
    if (!params.ignore_eos && eos_token_id && last_token == *eos_token_id) {
      return TokenStop{FinishReason::kStop, std::nullopt};
    }
    const auto& ids = params.stop_token_ids;
    if (std::find(ids.begin(), ids.end(), last_token) != ids.end()) {
      return TokenStop{FinishReason::kStop, last_token};
    }
  }
  if (num_output_tokens >= max_tokens || num_tokens >= max_model_len) {
    return TokenStop{FinishReason::kLength, std::nullopt};
  }
  return std::nullopt;
}

StopStringMatcher::StopStringMatcher(const SamplingParams& params)
    : stop_(params.stop), include_in_output_(params.include_stop_str_in_output) {
  size_t longest = 0;
  for (const std::string& s : stop_)
    longest = std::max(longest, s.size());
  holdback_ = (include_in_output_ || longest == 0) ? 0 : longest - 1;
}

std::optional<StopStringMatcher::Match> StopStringMatcher::find(std::string_view text,
                                                                size_t num_new_chars) const {
  num_new_chars = std::min(num_new_chars, text.size());
  if (num_new_chars == 0) return std::nullopt;
  const size_t old_size = text.size() - num_new_chars;
  std::optional<Match> best;
  size_t best_pos = text.size();
  for (const std::string& s : stop_) {
    // A match ending in the new bytes starts no earlier than old_size - (len - 1).
    const size_t from = old_size + 1 >= s.size() ? old_size + 1 - s.size() : 0;
    const size_t pos = text.find(s, from);
    if (pos == std::string_view::npos || pos >= best_pos) continue;
    best_pos = pos;
    best = Match{s, include_in_output_ ? pos + s.size() : pos};
  }
  return best;
}

}  // namespace locus

// When a sequence stops. Token-level stops (EOS, stop_token_ids, max_tokens, max_model_len) are
// checked by the scheduler on the engine thread; stop strings need detokenized text and are
// checked by the output processor off the engine thread (vLLM's split).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/sampling_params.h"

namespace locus {

enum class FinishReason : uint8_t {
  kStop,    // EOS, a stop token id or a stop string
  kLength,  // max_tokens or the model's max length
  kAbort,   // the client went away or the request was cancelled
};

// "stop", "length", "abort": OpenAI's finish_reason values.
std::string_view finish_reason_name(FinishReason reason);

struct TokenStop {
  FinishReason reason = FinishReason::kStop;
  // The stop_token_ids entry that matched; unset for EOS and length (vLLM's stop_reason).
  std::optional<int32_t> stop_token_id;
};

// Checks the sequence after `last_token` was appended. `max_tokens` is already resolved (the
// request's max_tokens or what fits in the model). EOS and stop ids count only once min_tokens
// outputs exist; a token that is both a stop and the last allowed one reports kStop.
std::optional<TokenStop> check_token_stop(const SamplingParams& params,
                                          std::optional<int32_t> eos_token_id, int32_t last_token,
                                          int num_output_tokens, int num_tokens, int max_tokens,
                                          int max_model_len);

// Finds stop strings in the detokenized output, including ones that span token boundaries.
class StopStringMatcher {
 public:
  explicit StopStringMatcher(const SamplingParams& params);

  struct Match {
    std::string stop_string;
    size_t truncate_to = 0;  // output text length to keep
  };

  bool empty() const { return stop_.empty(); }

  // `text` is the whole output text; its last `num_new_chars` bytes arrived with this step.
  // Returns the earliest stop string that ends in the new bytes (earlier text was checked
  // before). The kept text ends before it, or after it with include_stop_str_in_output.
  std::optional<Match> find(std::string_view text, size_t num_new_chars) const;

  // Bytes of text to hold back while streaming: a suffix that might still become the start of
  // a stop string must not be sent before we know (0 with include_stop_str_in_output).
  size_t holdback() const { return holdback_; }

 private:
  std::vector<std::string> stop_;
  bool include_in_output_ = false;
  size_t holdback_ = 0;
};

}  // namespace locus

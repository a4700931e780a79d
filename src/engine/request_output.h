// What a client receives: streamed deltas of one completion (RequestOutput), and the
// accumulated final result (CompletionResult) for non-streaming callers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sampling/logprobs.h"
#include "sampling/stop_checker.h"

namespace locus {

// Times are seconds on the engine's steady clock (LLMEngine::now()).
struct RequestMetrics {
  double arrival_time = 0.0;
  double first_token_time = 0.0;  // 0 until the first token
  double finished_time = 0.0;     // 0 until finished
  int num_prompt_tokens = 0;
  int num_cached_tokens = 0;  // prefix-cache hits
  int num_generation_tokens = 0;

  double time_to_first_token() const {
    return first_token_time > 0.0 ? first_token_time - arrival_time : 0.0;
  }
  double e2e_latency() const { return finished_time > 0.0 ? finished_time - arrival_time : 0.0; }
};

// vLLM's stop_reason: none (EOS or length), the stop_token_ids entry, or the stop string.
using StopReason = std::variant<std::monostate, int32_t, std::string>;

// One delta of one completion. Deltas of a request's n completions interleave; `index` says
// which one this is.
struct RequestOutput {
  RequestId request_id = 0;                   // the id add_request returned
  int index = 0;                              // completion index in [0, n)
  std::string text;                           // new text since this completion's previous delta
  std::vector<int32_t> token_ids;             // new tokens (stop tokens included, like vLLM)
  std::vector<Logprobs> logprobs;             // per new token, when asked
  std::vector<Logprobs> prompt_logprobs;      // new prompt positions (index 0 only)
  double cumulative_logprob = 0.0;            // of all tokens so far, when logprobs were asked
  std::optional<FinishReason> finish_reason;  // set on the completion's last delta
  StopReason stop_reason;
  bool finished = false;          // this completion is done
  bool request_finished = false;  // all n completions are done: the stream's last delta
  RequestMetrics metrics;         // final values once finished
};

struct CompletionResult {
  int index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<Logprobs> logprobs;
  double cumulative_logprob = 0.0;
  std::optional<FinishReason> finish_reason;
  StopReason stop_reason;
  RequestMetrics metrics;
};

struct RequestResult {
  RequestId request_id = 0;
  std::vector<Logprobs> prompt_logprobs;
  std::vector<CompletionResult> completions;  // by index
};

// Folds one delta into an accumulated result (completions grow to fit the index).
void accumulate_output(RequestResult& result, RequestOutput&& delta);

}  // namespace locus

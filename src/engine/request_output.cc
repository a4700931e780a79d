// Accumulating streamed deltas into final results.
#include "engine/request_output.h"

#include <utility>

namespace locus {

void accumulate_output(RequestResult& result, RequestOutput&& delta) {
  result.request_id = delta.request_id;
  for (auto& p : delta.prompt_logprobs)
    result.prompt_logprobs.push_back(std::move(p));
  const auto index = static_cast<size_t>(delta.index);
  if (result.completions.size() <= index) result.completions.resize(index + 1);
  CompletionResult& c = result.completions[index];
  c.index = delta.index;
  c.text += delta.text;
  c.token_ids.insert(c.token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
  for (auto& l : delta.logprobs)
    c.logprobs.push_back(std::move(l));
  c.cumulative_logprob = delta.cumulative_logprob;
  if (delta.finished) {
    c.finish_reason = delta.finish_reason;
    c.stop_reason = std::move(delta.stop_reason);
    c.metrics = delta.metrics;
  }
}

}  // namespace locus

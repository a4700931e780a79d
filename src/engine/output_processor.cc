// Output processor: detokenize, stop strings, fan-in.
#include "engine/output_processor.h"

#include <algorithm>
#include <utility>

namespace locus {

OutputProcessor::OutputProcessor(DetokenizerFactory factory) : factory_(std::move(factory)) {}

void OutputProcessor::add_request(RequestId request_id, std::span<const RequestId> child_ids,
                                  std::span<const int32_t> prompt_token_ids,
                                  const SamplingParams& params, double arrival_time) {
  Parent& p = parents_[request_id];
  p.children.assign(child_ids.begin(), child_ids.end());
  p.num_unfinished = static_cast<int>(child_ids.size());
  p.params = params;
  for (size_t i = 0; i < child_ids.size(); ++i) {
    Completion& c = completions_[child_ids[i]];
    c.parent = request_id;
    c.index = static_cast<int>(i);
    if (factory_) c.detokenizer = factory_(prompt_token_ids, params);
    if (!c.detokenizer) c.detokenizer = std::make_unique<NullDetokenizer>();
    if (!params.stop.empty()) c.stop_strings = std::make_unique<StopStringMatcher>(params);
    c.metrics.arrival_time = arrival_time;
    c.metrics.num_prompt_tokens = static_cast<int>(prompt_token_ids.size());
  }
}

std::string OutputProcessor::take_text(Completion& c, bool final_delta, size_t holdback) {
  size_t end = c.text.size();
  if (!final_delta) {
    end = end > holdback ? end - holdback : 0;
    // Never end a delta inside a UTF-8 sequence: back up to the start of the character.
    while (end > c.num_text_sent && end < c.text.size() &&
           (static_cast<unsigned char>(c.text[end]) & 0xC0) == 0x80) {
      --end;
    }
  }
  if (end <= c.num_text_sent) return {};
  std::string delta = c.text.substr(c.num_text_sent, end - c.num_text_sent);
  c.num_text_sent = end;
  return delta;
}

void OutputProcessor::finish(Completion& c, RequestId child_id, RequestOutput& delta,
                             FinishReason reason, double now) {
  delta.finished = true;
  delta.finish_reason = reason;
  c.metrics.finished_time = now;
  c.metrics.num_generation_tokens = c.num_output_tokens;
  delta.metrics = c.metrics;
  auto pit = parents_.find(c.parent);
  if (pit != parents_.end() && --pit->second.num_unfinished == 0) {
    delta.request_finished = true;
    for (RequestId id : pit->second.children) {
      if (id != child_id) completions_.erase(id);
    }
    parents_.erase(pit);
  }
  completions_.erase(child_id);  // `c` dies here; callers must not touch it afterwards
}

OutputProcessor::Result OutputProcessor::process(std::span<const EngineCoreOutput> outputs,
                                                 double now) {
  Result result;
  for (const EngineCoreOutput& out : outputs) {
    auto it = completions_.find(out.request_id);
    if (it == completions_.end()) continue;
    Completion& c = it->second;
    const SamplingParams& params = parents_.at(c.parent).params;

    RequestOutput delta;
    delta.request_id = c.parent;
    delta.index = c.index;
    delta.prompt_logprobs = out.new_prompt_logprobs;
    delta.token_ids = out.new_token_ids;
    delta.logprobs = out.new_logprobs;
    c.metrics.num_cached_tokens = out.num_cached_tokens;
    if (!out.new_token_ids.empty() && c.metrics.first_token_time == 0.0) {
      c.metrics.first_token_time = now;
    }

    // A stop token (EOS or stop_token_ids) is reported in token_ids but not in the text,
    // unless include_stop_str_in_output (vLLM).
    const bool stopped_by_token = out.finish_reason == FinishReason::kStop;
    const size_t old_size = c.text.size();
    for (size_t i = 0; i < out.new_token_ids.size(); ++i) {
      ++c.num_output_tokens;
      const bool is_stop_token = stopped_by_token && i + 1 == out.new_token_ids.size();
      if (is_stop_token && !params.include_stop_str_in_output) continue;
      c.text += c.detokenizer->step(out.new_token_ids[i]);
    }
    // The engine ended the sequence: whatever the detokenizer still holds is final text.
    if (out.finish_reason) c.text += c.detokenizer->finish();
    for (const Logprobs& l : out.new_logprobs)
      c.cumulative_logprob += l.token.logprob;
    delta.cumulative_logprob = c.cumulative_logprob;

    std::optional<FinishReason> finish_reason = out.finish_reason;
    if (out.stop_token_id) delta.stop_reason = *out.stop_token_id;
    // Stop strings count only past min_tokens (vLLM).
    if (!finish_reason && c.stop_strings && c.num_output_tokens > params.min_tokens) {
      if (auto match = c.stop_strings->find(c.text, c.text.size() - old_size)) {
        c.text.resize(match->truncate_to);
        finish_reason = FinishReason::kStop;
        delta.stop_reason = match->stop_string;
        result.finished_in_engine.push_back(out.request_id);
      }
    }
    const size_t holdback = c.stop_strings ? c.stop_strings->holdback() : 0;
    delta.text = take_text(c, finish_reason.has_value(), holdback);
    if (finish_reason) {
      finish(c, out.request_id, delta, *finish_reason, now);
    } else if (delta.token_ids.empty() && delta.prompt_logprobs.empty() && delta.text.empty()) {
      continue;
    }
    result.outputs.push_back(std::move(delta));
  }
  return result;
}

OutputProcessor::Result OutputProcessor::abort(RequestId request_id, double now) {
  Result result;
  auto pit = parents_.find(request_id);
  if (pit == parents_.end()) return result;
  const std::vector<RequestId> children = pit->second.children;
  for (RequestId child : children) {
    auto it = completions_.find(child);
    if (it == completions_.end()) continue;  // this completion already finished
    result.aborted_in_engine.push_back(child);
    RequestOutput delta;
    delta.request_id = request_id;
    delta.index = it->second.index;
    delta.cumulative_logprob = it->second.cumulative_logprob;
    delta.text = take_text(it->second, /*final_delta=*/true, 0);
    finish(it->second, child, delta, FinishReason::kAbort, now);
    result.outputs.push_back(std::move(delta));
  }
  return result;
}

RequestId OutputProcessor::parent_of(RequestId child_id) const {
  auto it = completions_.find(child_id);
  return it == completions_.end() ? 0 : it->second.parent;
}

std::vector<RequestId> OutputProcessor::request_ids() const {
  std::vector<RequestId> ids;
  ids.reserve(parents_.size());
  for (const auto& entry : parents_)
    ids.push_back(entry.first);
  return ids;
}

void OutputProcessor::clear() {
  completions_.clear();
  parents_.clear();
}

}  // namespace locus

// Turns engine-core outputs (token ids) into client deltas: incremental detokenization, stop
// strings (matched across token boundaries, held back while they might still match), logprob
// bookkeeping, n > 1 fan-in and timing. Runs off the engine thread; not thread-safe by itself
// (LLMEngine serializes calls).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/detokenizer.h"
#include "engine/request_output.h"
#include "sampling/stop_checker.h"
#include "sched/scheduler_output.h"

namespace locus {

class OutputProcessor {
 public:
  // A null factory means NullDetokenizer (token ids only).
  explicit OutputProcessor(DetokenizerFactory factory);

  // Registers a request whose completions run in the engine as `child_ids` (one per index).
  void add_request(RequestId request_id, std::span<const RequestId> child_ids,
                   std::span<const int32_t> prompt_token_ids, const SamplingParams& params,
                   double arrival_time);

  struct Result {
    std::vector<RequestOutput> outputs;
    // Engine-side sequences the processor finished (a stop string matched): the engine must
    // drop them with FinishReason::kStop.
    std::vector<RequestId> finished_in_engine;
    // Engine-side sequences of an aborted request: the engine must abort them.
    std::vector<RequestId> aborted_in_engine;
  };

  // Outputs for sequences that are unknown or already finished are dropped (a late step
  // result after an abort or a stop string).
  Result process(std::span<const EngineCoreOutput> outputs, double now);

  // Client abort: the final delta (finish_reason abort) of each unfinished completion, and the
  // engine sequences to abort. Unknown ids give an empty result.
  Result abort(RequestId request_id, double now);

  // The request an engine sequence belongs to (0 when unknown).
  RequestId parent_of(RequestId child_id) const;
  bool has_request(RequestId request_id) const { return parents_.count(request_id) > 0; }
  size_t num_requests() const { return parents_.size(); }
  // Every registered request id (to fail them all when the engine dies).
  std::vector<RequestId> request_ids() const;
  void clear();

 private:
  struct Completion {
    RequestId parent = 0;
    int index = 0;
    std::unique_ptr<Detokenizer> detokenizer;
    std::unique_ptr<StopStringMatcher> stop_strings;
    std::string text;          // everything detokenized (truncated at a stop string)
    size_t num_text_sent = 0;  // bytes of `text` already in deltas
    int num_output_tokens = 0;
    double cumulative_logprob = 0.0;
    RequestMetrics metrics;
  };
  struct Parent {
    std::vector<RequestId> children;
    int num_unfinished = 0;
    SamplingParams params;
  };

  // Finishes a completion: fills the last delta and removes state that is no longer needed.
  void finish(Completion& c, RequestId child_id, RequestOutput& delta, FinishReason reason,
              double now);
  // The next text delta, holding back what might still start a stop string.
  std::string take_text(Completion& c, bool final_delta, size_t holdback);

  DetokenizerFactory factory_;
  std::unordered_map<RequestId, Completion> completions_;
  std::unordered_map<RequestId, Parent> parents_;
};

}  // namespace locus

// What crosses the scheduler's boundary each step: the plan (SchedulerOutput) handed to the
// model runner, the runner's sampled tokens (ModelRunnerOutput) handed back, and the per-request
// results (EngineCoreOutput) sent to the output processor.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sampling/logprobs.h"
#include "sampling/stop_checker.h"
#include "sched/request.h"

namespace locus {

// One request in a step: compute tokens [num_computed_tokens, num_computed_tokens +
// num_new_tokens) of request->token_ids, with KV in block_ids.
struct ScheduledRequest {
  Request* request = nullptr;   // valid until update_from_output of the same step
  int num_computed_tokens = 0;  // before this step (prefix hits included)
  int num_new_tokens = 0;
  // The chunk ends at the last known token: the step yields logits and a sampled token.
  // False for all but the last chunk of a chunked prefill.
  bool needs_sample = false;
  bool is_prefill = false;  // some of the new tokens are prompt tokens
  bool is_new = false;      // first schedule, or resumed after preemption (runner: fresh state)
  std::span<const BlockId> block_ids;  // the request's whole block table after allocation
};

struct SchedulerOutput {
  // Requests that were running first (mostly decodes), then newly admitted or resumed ones.
  std::vector<ScheduledRequest> scheduled;
  int total_num_scheduled_tokens = 0;
  std::vector<RequestId> preempted;  // preempted this step (their blocks are already free)
  // Requests that finished or were aborted since the previous schedule(): a runner that keeps
  // per-request state drops it.
  std::vector<RequestId> finished;

  bool empty() const { return scheduled.empty(); }
  void clear() {
    scheduled.clear();
    total_num_scheduled_tokens = 0;
    preempted.clear();
    finished.clear();
  }
};

// The model runner's answer, index-aligned with SchedulerOutput::scheduled.
struct ModelRunnerOutput {
  std::vector<int32_t> sampled_token_ids;         // -1 where needs_sample is false
  std::vector<std::optional<Logprobs>> logprobs;  // empty, or one entry per scheduled request
  // Prompt logprobs computed this step per scheduled request (empty vector when none), in
  // prompt-position order starting at request->num_prompt_logprobs_sent.
  std::vector<std::vector<Logprobs>> prompt_logprobs;
};

// One request's news from one step, for the output processor.
struct EngineCoreOutput {
  RequestId request_id = 0;
  std::vector<int32_t> new_token_ids;
  std::vector<Logprobs> new_logprobs;         // one per new token when logprobs were asked
  std::vector<Logprobs> new_prompt_logprobs;  // prompt positions 1.. reported this step
  std::optional<FinishReason> finish_reason;
  std::optional<int32_t> stop_token_id;  // vLLM's stop_reason when a stop_token_ids entry hit
  int num_cached_tokens = 0;             // prefix-cache hits at first schedule
  bool finished() const { return finish_reason.has_value(); }
  // Back to empty, keeping vector capacity (outputs are reused across steps).
  void reset() {
    request_id = 0;
    new_token_ids.clear();
    new_logprobs.clear();
    new_prompt_logprobs.clear();
    finish_reason.reset();
    stop_token_id.reset();
    num_cached_tokens = 0;
  }
};

// Counters for metrics (vLLM's SchedulerStats names).
struct SchedulerStats {
  int num_running_reqs = 0;
  int num_waiting_reqs = 0;
  double kv_cache_usage = 0.0;
  PrefixCacheStats prefix_cache;
  uint64_t num_preemptions = 0;
};

}  // namespace locus

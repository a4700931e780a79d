// A request as the scheduler sees it: tokens, progress (num_computed_tokens) and its state
// machine. Owned by the Scheduler and touched only on the engine thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sampling/sampling_params.h"
#include "sampling/stop_checker.h"

namespace locus {

//   WAITING ──schedule──► RUNNING ──update: EOS/stop id──► FINISHED_STOPPED
//      ▲                    │ │     └─update: max_tokens / max_model_len─► FINISHED_LENGTH
//      │                    │ └─out of KV blocks─► PREEMPTED (blocks freed; back in the waiting
//      └── schedule ◄───────┘                       queue, recomputes from token 0)
//   any non-finished state ──abort──► FINISHED_ABORTED
enum class RequestStatus : uint8_t {
  kWaiting,
  kRunning,
  kPreempted,
  kFinishedStopped,
  kFinishedLength,
  kFinishedAborted,
};

inline bool is_finished(RequestStatus s) {
  return s >= RequestStatus::kFinishedStopped;
}
std::optional<FinishReason> finish_reason_of(RequestStatus s);
RequestStatus finished_status_for(FinishReason reason);
std::string_view request_status_name(RequestStatus s);

// What a caller hands the engine core for one sequence (after n > 1 fan-out).
struct EngineCoreRequest {
  RequestId request_id = 0;
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;
  int priority = 0;           // lower runs first under --scheduling-policy priority (vLLM)
  double arrival_time = 0.0;  // seconds, any monotonic clock; orders equal priorities
  uint64_t cache_salt_key = 0;
  std::optional<int32_t> eos_token_id;
  uint64_t rng_stream = 0;  // request_rng_stream(seed, engine seed, id)
};

struct Request {
  Request(EngineCoreRequest core, int max_model_len);

  RequestId id;
  SamplingParams params;
  int priority;
  double arrival_time;
  uint64_t cache_salt_key;
  std::optional<int32_t> eos_token_id;
  uint64_t rng_stream;

  // The prompt followed by the generated tokens; the prompt part never changes.
  std::vector<int32_t> token_ids;
  int num_prompt_tokens;
  int max_tokens;  // resolved: params.max_tokens, else what fits in max_model_len

  RequestStatus status = RequestStatus::kWaiting;
  // Tokens whose KV is in the cache (or scheduled to be written by the step in flight: the
  // scheduler advances it when it schedules, as vLLM v1 does).
  int num_computed_tokens = 0;
  int num_cached_tokens = -1;  // prefix-cache hits when first scheduled; -1 before that
  int num_preemptions = 0;
  int num_prompt_logprobs_sent = 0;      // prompt positions already reported (chunks, preemption)
  std::optional<int32_t> stop_token_id;  // the stop_token_ids entry that finished it

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt_token_ids() const {
    return std::span<const int32_t>(token_ids).first(static_cast<size_t>(num_prompt_tokens));
  }
  std::span<const int32_t> output_token_ids() const {
    return std::span<const int32_t>(token_ids).subspan(static_cast<size_t>(num_prompt_tokens));
  }
  bool wants_prompt_logprobs() const { return params.prompt_logprobs.has_value(); }
  // Prompt logprobs need logits at every prompt position, so such requests never read the
  // prefix cache (vLLM does the same); they still fill it.
  KVRequestView kv_view() const {
    return {id, token_ids, num_computed_tokens, cache_salt_key, wants_prompt_logprobs()};
  }
};

}  // namespace locus

// Request state names and conversions.
#include "sched/request.h"

#include <algorithm>
#include <utility>

namespace locus {

Request::Request(EngineCoreRequest core, int max_model_len)
    : id(core.request_id),
      params(std::move(core.params)),
      priority(core.priority),
      arrival_time(core.arrival_time),
      cache_salt_key(core.cache_salt_key),
      eos_token_id(core.eos_token_id),
      rng_stream(core.rng_stream),
      token_ids(std::move(core.prompt_token_ids)),
      num_prompt_tokens(static_cast<int>(token_ids.size())),
      max_tokens(params.max_tokens.value_or(std::max(0, max_model_len - num_prompt_tokens))) {}

std::optional<FinishReason> finish_reason_of(RequestStatus s) {
  switch (s) {
    case RequestStatus::kFinishedStopped:
      return FinishReason::kStop;
    case RequestStatus::kFinishedLength:
      return FinishReason::kLength;
    case RequestStatus::kFinishedAborted:
      return FinishReason::kAbort;
    default:
      return std::nullopt;
  }
}

RequestStatus finished_status_for(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return RequestStatus::kFinishedStopped;
    case FinishReason::kLength:
      return RequestStatus::kFinishedLength;
    case FinishReason::kAbort:
      return RequestStatus::kFinishedAborted;
  }
  return RequestStatus::kFinishedAborted;
}

std::string_view request_status_name(RequestStatus s) {
  switch (s) {
    case RequestStatus::kWaiting:
      return "WAITING";
    case RequestStatus::kRunning:
      return "RUNNING";
    case RequestStatus::kPreempted:
      return "PREEMPTED";
    case RequestStatus::kFinishedStopped:
      return "FINISHED_STOPPED";
    case RequestStatus::kFinishedLength:
      return "FINISHED_LENGTH";
    case RequestStatus::kFinishedAborted:
      return "FINISHED_ABORTED";
  }
  return "UNKNOWN";
}

}  // namespace locus

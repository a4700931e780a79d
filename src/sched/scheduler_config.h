// Scheduler limits, with vLLM's flag names.
#pragma once

#include "core/status.h"
#include "sched/request_queue.h"

namespace locus {

struct SchedulerConfig {
  int max_num_seqs = 256;             // --max-num-seqs: requests per step
  int max_num_batched_tokens = 8192;  // --max-num-batched-tokens: tokens per step
  int max_model_len = 8192;           // --max-model-len: prompt + output
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // Without chunked prefill a prompt that does not fit the step's remaining budget waits.
  bool enable_chunked_prefill = true;
  // Caps one request's prefill chunk so a long prompt cannot starve the others (0 = no cap).
  int long_prefill_token_threshold = 0;
  // Extra slots allocated past the scheduled tokens (speculative decoding drafts).
  int num_lookahead_tokens = 0;

  Status validate() const;
};

}  // namespace locus

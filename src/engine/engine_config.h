// Engine-wide settings (vLLM flag names where vLLM has one).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sched/scheduler_config.h"

namespace locus {

struct EngineConfig {
  SchedulerConfig scheduler;
  bool enable_prefix_caching = true;  // --enable-prefix-caching / --no-enable-prefix-caching
  // KV pool size: an explicit block count (--num-gpu-blocks-override, tests) wins; otherwise
  // kv_cache_memory_bytes is divided by the model's bytes per block.
  int num_kv_blocks = 0;
  int64_t kv_cache_memory_bytes = 0;
  uint64_t seed = 0;      // --seed: the stream of requests that bring no seed of their own
  int max_logprobs = 20;  // --max-logprobs
  std::optional<int32_t> eos_token_id;  // from the tokenizer / generation_config.json
  // More end-of-sequence ids (generation_config.json lists several for chat models): added
  // to each request's stop_token_ids unless it sets ignore_eos.
  std::vector<int32_t> extra_eos_token_ids;
  // The engine's first request id: data-parallel replicas start theirs far apart
  // (DataParallelEngine) so that an id names its replica.
  uint64_t first_request_id = 1;
  // --async-scheduling / --no-async-scheduling: queue the next decode step behind the running
  // one before its tokens reach the host (engine_core.h). Unset: on where the runner prefers it
  // (a GPU), off elsewhere, like vLLM since 0.14. Runners that cannot launch steps
  // asynchronously ignore it.
  std::optional<bool> async_scheduling;
};

}  // namespace locus

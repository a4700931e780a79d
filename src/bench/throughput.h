// `locus bench throughput`: vLLM's offline throughput benchmark. N requests of the random
// dataset (input/output lengths with a range ratio) are all submitted at once and run through the
// whole engine (scheduler, KV cache, sampling; ignore_eos, greedy) as fast as it can; reported
// as requests, total tokens and output tokens per second of wall time.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "engine/model_engine.h"

namespace locus::bench {

struct ThroughputOptions {
  int num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;
  uint64_t seed = 0;
};

struct ThroughputResult {
  int num_requests = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // counted from the requests' outputs
  double elapsed_s = 0;
  double requests_per_s = 0;
  double total_tokens_per_s = 0;
  double output_tokens_per_s = 0;
};

Expected<ThroughputResult> run_throughput(ModelEngine& engine, const ThroughputOptions& options);

}  // namespace locus::bench

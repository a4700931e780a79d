// The CPU reference sampler: one row of logits per request in, one token (and its logprobs) out.
// Rows are processed independently with per-request random streams, so a request's token never
// depends on which other requests share the batch. A backend sampler (CUDA, #7) implements the
// same contract and is tested against this one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "sampling/logits_processors.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"

namespace locus {

// What the sampler needs about one request; views valid for the duration of sample().
struct SamplingRow {
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt_token_ids;
  std::span<const int32_t> output_token_ids;  // generated so far; its size is the draw index
  std::optional<int32_t> eos_token_id;
  // counter-RNG stream of the request (see request_rng_stream). Draw i of a request uses
  // counter_uniform(rng_stream, i), so re-running a request (after preemption, or alone)
  // draws the same numbers.
  uint64_t rng_stream = 0;
};

struct SampleResult {
  int32_t token_id = -1;
  std::optional<Logprobs> logprobs;  // when params->logprobs is set
};

// The random stream of a request: from its seed when it has one (same seed, same prompt, same
// output, as in vLLM), else from the engine seed and the request's unique id.
uint64_t request_rng_stream(std::optional<uint64_t> request_seed, uint64_t engine_seed,
                            uint64_t request_id);

class Sampler {
 public:
  // logits: [rows.size(), vocab_size] row-major host f32, untouched (rows are copied).
  Expected<std::vector<SampleResult>> sample(std::span<const float> logits, int vocab_size,
                                             std::span<const SamplingRow> rows);

  // One row (the body of sample()); exposed for tests and benchmarks.
  SampleResult sample_row(std::span<const float> raw_logits, const SamplingRow& row);

 private:
  std::vector<float> work_;
  std::vector<float> float_scratch_;
  std::vector<int32_t> index_scratch_;
  std::vector<int32_t> masked_;
  PenaltyScratch penalty_scratch_;
};

}  // namespace locus

// `locus bench latency`: the offline latency of fixed-shape batches through the whole engine
// (scheduler, KV cache, sampling, detokenizer off), vLLM's `bench latency` plus the per-token
// view: B requests of input_len random token ids arrive together and each generates output_len
// tokens (ignore_eos, greedy). Per batch size it reports TTFT, TPOT, batch latency, and the
// steady decode TPOT: token gaps after the last request of the batch got its first token, when
// every step is a pure decode step of B sequences (what the roofline describes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/model_engine.h"

namespace locus::bench {

struct LatencyOptions {
  int64_t input_len = 1024;
  int64_t output_len = 128;
  std::vector<int> batch_sizes = {1};
  int warmup_iters = 1;
  int iters = 3;
  uint64_t seed = 0;
};

struct Percentiles {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};
Percentiles percentiles(std::vector<double> values);

struct LatencyResult {
  int batch_size = 0;
  Percentiles ttft_s;              // per request
  Percentiles tpot_s;              // per request: (e2e - ttft) / (output_len - 1)
  Percentiles steady_tpot_s;       // per request, pure-decode phase only
  Percentiles batch_latency_s;     // per iteration: arrival to the last token of the batch
  double output_tokens_per_s = 0;  // generated tokens / batch latency, mean over iterations
  int64_t graph_steps = 0;         // decode steps replayed from CUDA graphs during the measurement
  int64_t eager_steps = 0;
  int64_t fed_steps = 0;  // of those, queued before the step ahead's tokens reached the host
  // The fewest of the batch's requests still decoding when its last request got its first
  // token (over the iterations): below batch_size the batch did not fit at once (KV cache,
  // --max-num-seqs), and the steady TPOT is that of a smaller batch.
  int concurrent = 0;
};

Expected<LatencyResult> run_latency(ModelEngine& engine, const LatencyOptions& options,
                                    int batch_size);

}  // namespace locus::bench

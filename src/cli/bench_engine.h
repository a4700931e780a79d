// The in-process engine `bench latency` and `bench throughput` drive: one setup for both (model,
// dummy or checkpoint weights, device flags, scheduler limits), so they measure the same engine.
#pragma once

#include <string>

#include "cli/device_options.h"
#include "engine/model_engine.h"

namespace locus::cli {

struct BenchEngineSpec {
  std::string model;
  std::string load_format = "auto";
  uint64_t seed = 0;
  int block_size = 16;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int max_model_len = 0;
  DeviceCliOptions gpu;
};

// The fields every bench command's options share (model, weights, device flags, limits).
template <typename Options>
BenchEngineSpec bench_engine_spec(const Options& o) {
  BenchEngineSpec spec;
  spec.model = o.model;
  spec.load_format = o.load_format;
  spec.seed = o.seed;
  spec.block_size = o.block_size;
  spec.gpu = o.gpu;
  spec.max_num_batched_tokens = o.max_num_batched_tokens;
  return spec;
}

// Opens the engine (no tokenizer: benches feed token ids) and reports the load time.
inline Expected<ModelEngine> open_bench_engine(const BenchEngineSpec& s, double* load_seconds) {
  ModelEngineOptions mo;
  mo.model_dir = s.model;
  LOCUS_ASSIGN_OR_RETURN(mo.load_format, parse_load_format(s.load_format));
  mo.weight_seed = s.seed;
  mo.block_size = s.block_size;
  s.gpu.apply(mo);
  mo.cpu_batch_invariant = false;
  mo.load_tokenizer = false;
  mo.engine.scheduler.max_num_seqs = s.max_num_seqs;
  mo.engine.scheduler.max_num_batched_tokens = s.max_num_batched_tokens;
  mo.engine.scheduler.max_model_len = s.max_model_len;
  mo.engine.seed = s.seed;
  const double start = LLMEngine::now();
  auto engine = open_model_engine(mo);
  if (load_seconds != nullptr) *load_seconds = LLMEngine::now() - start;
  return engine;
}

}  // namespace locus::cli

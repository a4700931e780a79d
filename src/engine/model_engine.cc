#include "engine/model_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "engine/tokenizer_detokenizer.h"

namespace locus {

SamplingParams ModelEngine::default_sampling_params() const {
  SamplingParams p;
  if (generation.temperature) p.temperature = *generation.temperature;
  if (generation.top_p) p.top_p = *generation.top_p;
  if (generation.top_k) p.top_k = *generation.top_k;
  if (generation.min_p) p.min_p = *generation.min_p;
  if (generation.repetition_penalty) p.repetition_penalty = *generation.repetition_penalty;
  if (generation.max_new_tokens) p.max_tokens = *generation.max_new_tokens;
  return p;
}

Expected<ModelEngine> open_model_engine(const ModelEngineOptions& options) {
  ModelEngine out;
  LOCUS_ASSIGN_OR_RETURN(out.generation, load_generation_config(options.model_dir));
  if (options.load_tokenizer) {
    LOCUS_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load(options.model_dir));
    out.tokenizer = std::move(tokenizer);
  }

  CpuBackendOptions cpu;
  cpu.gemm_engine =
      options.cpu_batch_invariant ? cpu::GemmEngine::kBatchInvariant : cpu::GemmEngine::kOpenBlas;
  cpu.num_threads = options.cpu_threads;
  auto backend = std::make_unique<CpuBackend>(cpu);
  out.backend_name = backend->name();
  LOCUS_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(options.model_dir, options.load_format,
                                                        *backend, options.weight_seed));
  out.config = loaded.config;
  out.weights_description = loaded.weights_description;
  if (out.tokenizer && static_cast<int64_t>(out.tokenizer->id_limit()) > out.config.vocab_size) {
    // Ids the tokenizer can produce must have a logits row; the reverse (padding rows) is fine.
    return invalid_argument(fmt::format(
        "{}: the tokenizer has ids up to {} but the model's vocab_size is {}",
        options.model_dir.string(), out.tokenizer->id_limit() - 1, out.config.vocab_size));
  }

  EngineConfig config = options.engine;
  SchedulerConfig& sched = config.scheduler;
  if (sched.max_model_len <= 0) {
    sched.max_model_len = static_cast<int>(
        std::min<int64_t>(out.config.max_position_embeddings, std::numeric_limits<int>::max()));
  }
  if (sched.max_model_len > out.config.max_position_embeddings) {
    return invalid_argument(
        fmt::format("--max-model-len {} is larger than the model's max_position_embeddings {}",
                    sched.max_model_len, out.config.max_position_embeddings));
  }
  if (!config.eos_token_id) {
    if (out.tokenizer && out.tokenizer->eos_token_id()) {
      config.eos_token_id = *out.tokenizer->eos_token_id();
    } else if (!out.generation.eos_token_ids.empty()) {
      config.eos_token_id = out.generation.eos_token_ids.front();
    }
  }
  for (int32_t id : out.generation.eos_token_ids) {
    if (id != config.eos_token_id) config.extra_eos_token_ids.push_back(id);
  }

  LOCUS_ASSIGN_OR_RETURN(
      auto runner,
      LocalModelRunner::create(std::move(backend), std::move(loaded.model), options.block_size));
  const KVCacheSpec& spec = runner->kv_cache_spec();
  if (config.num_kv_blocks <= 0) {
    // Enough for max_num_seqs sequences of max_model_len (plus one spare block each), capped
    // by the memory budget: the CPU has no profiling pass to size against.
    const int64_t per_seq = (sched.max_model_len + spec.block_size - 1) / spec.block_size + 1;
    int64_t blocks = per_seq * sched.max_num_seqs;
    if (config.kv_cache_memory_bytes > 0) {
      LOCUS_ASSIGN_OR_RETURN(int fit, num_blocks_for_budget(spec, config.kv_cache_memory_bytes));
      blocks = std::min<int64_t>(blocks, fit);
    }
    config.num_kv_blocks = static_cast<int>(std::min<int64_t>(blocks, 1 << 30));
  }
  out.num_kv_blocks = config.num_kv_blocks;
  out.kv_cache_bytes = static_cast<int64_t>(config.num_kv_blocks) * spec.bytes_per_block();

  DetokenizerFactory detokenizers;
  if (out.tokenizer) detokenizers = make_tokenizer_detokenizer_factory(*out.tokenizer);
  LOCUS_ASSIGN_OR_RETURN(out.engine,
                         LLMEngine::create(config, std::move(runner), std::move(detokenizers)));
  return out;
}

}  // namespace locus

// EngineCore: the step loop body.
#include "engine/engine_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/counter_rng.h"

namespace locus {
namespace {

// A draw the runner's device can make: nothing that needs the token history or logprobs.
bool plain_draw(const Request& r) {
  const SamplingParams& p = r.params;
  return !p.logprobs && p.logit_bias.empty() && p.repetition_penalty == 1.0f &&
         p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f &&
         static_cast<int>(r.output_token_ids().size()) >= p.min_tokens;
}

}  // namespace

Expected<std::unique_ptr<EngineCore>> EngineCore::create(const EngineConfig& config,
                                                         std::unique_ptr<ModelRunner> runner) {
  if (!runner) return invalid_argument("EngineCore needs a model runner");
  const KVCacheSpec& spec = runner->kv_cache_spec();
  LOCUS_RETURN_IF_ERROR(spec.validate());
  int num_blocks = config.num_kv_blocks;
  if (num_blocks <= 0) {
    LOCUS_ASSIGN_OR_RETURN(num_blocks, num_blocks_for_budget(spec, config.kv_cache_memory_bytes));
  }
  KVCacheConfig kv{num_blocks, spec.block_size, config.enable_prefix_caching};
  SchedulerConfig scheduler_config = config.scheduler;
  // Async scheduling queues a request's next token before the step that plans it: each step
  // reserves that token's KV slot too, so the queued step never needs a block the scheduler
  // has not handed out yet.
  if (wants_async(config, *runner)) {
    scheduler_config.num_lookahead_tokens = std::max(scheduler_config.num_lookahead_tokens, 1);
  }
  LOCUS_ASSIGN_OR_RETURN(auto scheduler, Scheduler::create(scheduler_config, kv));
  LOCUS_RETURN_IF_ERROR(runner->initialize_kv_cache(num_blocks));
  return std::unique_ptr<EngineCore>(
      new EngineCore(config, std::move(runner), std::move(scheduler), num_blocks));
}

EngineCore::EngineCore(const EngineConfig& config, std::unique_ptr<ModelRunner> runner,
                       std::unique_ptr<Scheduler> scheduler, int num_kv_blocks)
    : config_(config),
      runner_(std::move(runner)),
      scheduler_(std::move(scheduler)),
      num_kv_blocks_(num_kv_blocks),
      async_(wants_async(config, *runner_)) {}

Status EngineCore::add_request(EngineCoreRequest request) {
  if (request.params.n != 1) {
    return invalid_argument(fmt::format(
        "EngineCore takes single sequences (n=1); fan out n={} before", request.params.n));
  }
  LOCUS_RETURN_IF_ERROR(
      request.params.validate_for_model(runner_->vocab_size(), config_.max_logprobs));
  for (int32_t t : request.prompt_token_ids) {
    if (t < 0 || t >= runner_->vocab_size()) {
      return invalid_argument(fmt::format("prompt token id {} is outside the vocabulary (size {})",
                                          t, runner_->vocab_size()));
    }
  }
  if (!request.eos_token_id) request.eos_token_id = config_.eos_token_id;
  // generation_config.json's other end-of-sequence ids stop the request like stop_token_ids
  // (vLLM's update_from_generation_config), unless the request ignores EOS.
  if (!request.params.ignore_eos) {
    for (int32_t id : config_.extra_eos_token_ids) {
      auto& stops = request.params.stop_token_ids;
      if (id != request.eos_token_id && std::find(stops.begin(), stops.end(), id) == stops.end()) {
        stops.push_back(id);
      }
    }
  }
  request.rng_stream = request_rng_stream(request.params.seed, config_.seed, request.request_id);
  return scheduler_->add_request(std::move(request));
}

void EngineCore::abort_requests(std::span<const RequestId> request_ids) {
  if (launched_) {
    for (RequestId id : request_ids)
      deferred_finishes_.emplace_back(id, RequestStatus::kFinishedAborted);
    return;
  }
  scheduler_->finish_requests(request_ids, RequestStatus::kFinishedAborted);
}

void EngineCore::finish_requests(std::span<const RequestId> request_ids, FinishReason reason) {
  if (launched_) {
    for (RequestId id : request_ids)
      deferred_finishes_.emplace_back(id, finished_status_for(reason));
    return;
  }
  scheduler_->finish_requests(request_ids, finished_status_for(reason));
}

Expected<std::vector<EngineCoreOutput>> EngineCore::step() {
  std::vector<EngineCoreOutput> outputs;
  LOCUS_RETURN_IF_ERROR(step(outputs));
  return outputs;
}

Status EngineCore::step(std::vector<EngineCoreOutput>& outputs) {
  if (async_) return step_async(outputs);
  scheduler_->schedule(scheduled_);
  if (scheduled_.empty()) {
    outputs.clear();
    return Status::ok();
  }
  return run_planned(outputs);
}

Status EngineCore::run_planned(std::vector<EngineCoreOutput>& outputs) {
  build_model_input(scheduled_, runner_->kv_cache_spec().block_size, built_);
  return run_built(outputs);
}

Status EngineCore::run_built(std::vector<EngineCoreOutput>& outputs) {
  SchedulerOutput& scheduled = scheduled_;
  const int vocab = runner_->vocab_size();
  BuiltBatch& built = built_;
  const size_t n = scheduled.scheduled.size();
  ModelRunnerOutput& out = runner_output_;
  out.sampled_token_ids.assign(n, -1);
  out.logprobs.clear();
  out.prompt_logprobs.clear();
  if (try_device_sampling(scheduled, built)) {
    LOCUS_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, runner_->execute_sampled(built.batch));
    for (size_t k = 0; k < n; ++k) {
      const int row = built.layout[k].sample_row;
      if (row >= 0) out.sampled_token_ids[k] = tokens[static_cast<size_t>(row)];
    }
    return scheduler_->update_from_output(scheduled, out, outputs);
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, runner_->execute(built.batch));
  const auto num_rows = static_cast<int64_t>(built.batch.logits_indices.size());
  if (logits.dtype() != DType::kF32 || logits.ndim() != 2 || logits.size(0) != num_rows ||
      logits.size(1) != vocab || !logits.is_contiguous()) {
    return internal_error(fmt::format("model runner returned logits {}, expected f32[{}, {}]",
                                      logits.to_string(), num_rows, vocab));
  }
  const float* data = logits.data<float>();
  auto row_span = [&](int row) {
    return std::span<const float>(data + static_cast<size_t>(row) * static_cast<size_t>(vocab),
                                  static_cast<size_t>(vocab));
  };

  for (size_t k = 0; k < n; ++k) {
    const LogitsLayout& layout = built.layout[k];
    const Request& r = *scheduled.scheduled[k].request;
    if (layout.num_prompt_logprob_rows > 0) {
      if (out.prompt_logprobs.empty()) out.prompt_logprobs.resize(n);
      auto& prompt = out.prompt_logprobs[k];
      for (int j = 0; j < layout.num_prompt_logprob_rows; ++j) {
        const int position = layout.first_prompt_logprob_position + j;
        const int32_t next_token = r.token_ids[static_cast<size_t>(position) + 1];
        prompt.push_back(compute_logprobs(row_span(layout.first_row + j), next_token,
                                          *r.params.prompt_logprobs));
      }
    }
    if (layout.sample_row < 0) continue;
    SamplingRow row;
    row.params = &r.params;
    row.prompt_token_ids = r.prompt_token_ids();
    row.output_token_ids = r.output_token_ids();
    row.eos_token_id = r.eos_token_id;
    row.rng_stream = r.rng_stream;
    SampleResult result = sampler_.sample_row(row_span(layout.sample_row), row);
    out.sampled_token_ids[k] = result.token_id;
    if (result.logprobs) {
      if (out.logprobs.empty()) out.logprobs.resize(n);
      out.logprobs[k] = std::move(result.logprobs);
    }
  }
  return scheduler_->update_from_output(scheduled, out, outputs);
}

bool EngineCore::try_device_sampling(const SchedulerOutput& scheduled, BuiltBatch& built) {
  built.batch.device_sampling.clear();
  if (!runner_->supports_device_sampling() || built.batch.logits_indices.empty()) return false;
  // All or nothing: a step with prompt logprobs, logprobs or history-dependent processors
  // copies its logits to the host sampler (the device then only saves time on plain steps).
  for (size_t k = 0; k < scheduled.scheduled.size(); ++k) {
    const LogitsLayout& layout = built.layout[k];
    if (layout.num_prompt_logprob_rows > 0) return false;
    if (layout.sample_row >= 0 && !plain_draw(*scheduled.scheduled[k].request)) return false;
  }
  built.batch.device_sampling.resize(built.batch.logits_indices.size());
  std::vector<bool> covered(built.batch.device_sampling.size(), false);
  for (size_t k = 0; k < scheduled.scheduled.size(); ++k) {
    const int row = built.layout[k].sample_row;
    if (row < 0) continue;
    const Request& r = *scheduled.scheduled[k].request;
    SamplingRowParams& d = built.batch.device_sampling[static_cast<size_t>(row)];
    d.temperature = r.params.temperature;
    d.top_k = r.params.top_k;
    d.top_p = r.params.top_p;
    d.min_p = r.params.min_p;
    // The same draw the host sampler would use: a request's tokens do not depend on the path.
    d.u = counter_uniform(r.rng_stream, static_cast<uint64_t>(r.output_token_ids().size()));
    covered[static_cast<size_t>(row)] = true;
  }
  if (std::find(covered.begin(), covered.end(), false) != covered.end()) {
    built.batch.device_sampling.clear();  // a logits row nobody samples: keep the host path
    return false;
  }
  return true;
}

}  // namespace locus

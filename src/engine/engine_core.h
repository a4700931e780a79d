// One engine step = schedule -> build the flat batch -> run the model -> sample -> update.
// Owns the scheduler (and through it the KV manager), the model runner and the sampler.
// Single-threaded: LLMEngine runs it on its engine thread; tests drive it directly.
//
// Async scheduling (EngineConfig::async_scheduling, vLLM's --async-scheduling): while a step
// runs, the engine queues the next one behind it, before the step's tokens reach the host.
// That is only done where the next plan is known without them: every running request decodes
// one token a step, none can stop on length, none needs a new KV block, nothing waits to be
// admitted, and every draw is made on the device; the next step's input tokens are then the
// ones this step draws, copied where they were drawn. When the step's tokens arrive the
// scheduler plans the next step as usual; if a request stopped (EOS, a stop token), the queued
// step is dropped once it has run (its KV writes are the values a real step would write, for
// tokens that were really drawn) and the next call plans afresh. A request's tokens are the same
// either way. Aborts that arrive while a step is queued take effect after it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/engine_config.h"
#include "engine/input_batch.h"
#include "engine/model_runner.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"

namespace locus {

class EngineCore {
 public:
  // Sizes the KV pool from the config and the runner's KV spec, then initializes the runner's
  // KV cache. Fails when the pool cannot hold one max_model_len sequence.
  static Expected<std::unique_ptr<EngineCore>> create(const EngineConfig& config,
                                                      std::unique_ptr<ModelRunner> runner);

  // Validates and queues one sequence (n == 1). Its random stream and, when unset, its EOS
  // come from the engine config.
  Status add_request(EngineCoreRequest request);

  // Client aborts: gone before the next step, blocks freed now.
  void abort_requests(std::span<const RequestId> request_ids);
  // Requests the output processor finished (a stop string): freed like aborts, but recorded
  // with their real reason.
  void finish_requests(std::span<const RequestId> request_ids, FinishReason reason);

  // Runs one step; fills `outputs` with per-request news, reusing its entries (LLMEngine
  // recycles these vectors, so steady-state steps allocate nothing on the host). A model
  // failure is returned as an error and leaves the engine unusable (the caller fails every
  // request).
  Status step(std::vector<EngineCoreOutput>& outputs);
  Expected<std::vector<EngineCoreOutput>> step();

  bool has_unfinished_requests() const { return scheduler_->has_unfinished_requests(); }
  SchedulerStats stats() const { return scheduler_->stats(); }
  const Scheduler& scheduler() const { return *scheduler_; }
  const ModelRunner& model_runner() const { return *runner_; }
  const EngineConfig& config() const { return config_; }
  int num_kv_blocks() const { return num_kv_blocks_; }
  // Async scheduling: steps queued behind the running one, and those of them dropped because
  // a request stopped first.
  int64_t steps_queued_ahead() const { return steps_queued_ahead_; }
  int64_t steps_dropped() const { return steps_dropped_; }
  // Whether steps are queued ahead: the config asks (or leaves it to a runner that prefers it)
  // and the runner can launch asynchronously.
  bool async_scheduling() const { return async_; }
  static bool wants_async(const EngineConfig& config, const ModelRunner& runner) {
    return config.async_scheduling.value_or(runner.prefers_async_sampling()) &&
           runner.supports_async_sampling();
  }

 private:
  EngineCore(const EngineConfig& config, std::unique_ptr<ModelRunner> runner,
             std::unique_ptr<Scheduler> scheduler, int num_kv_blocks);
  // Fills built.batch.device_sampling when the runner samples on its device and every logits
  // row of the step is a plain draw; false leaves the step to the host sampler.
  bool try_device_sampling(const SchedulerOutput& scheduled, BuiltBatch& built);
  // The planned step (scheduled_) from building its inputs on, synchronously.
  Status run_planned(std::vector<EngineCoreOutput>& outputs);
  // The same once built_ holds the planned step's inputs.
  Status run_built(std::vector<EngineCoreOutput>& outputs);
  Status step_async(std::vector<EngineCoreOutput>& outputs);
  // The step after the launched one (scheduled_ / built_) into next_, when it is known without
  // the launched step's tokens; false when it is not.
  bool build_next_step();
  // Finishes the requests whose abort or stop arrived while a step was in flight, dropping
  // their news from `outputs`.
  void apply_deferred_finishes(std::vector<EngineCoreOutput>& outputs);

  EngineConfig config_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  Sampler sampler_;
  int num_kv_blocks_;
  // Per-step buffers, reused.
  SchedulerOutput scheduled_;
  BuiltBatch built_;
  ModelRunnerOutput runner_output_;
  // Async scheduling: whether scheduled_ / built_ describe a step launched and not collected,
  // the step queued behind it, and finishes held back until the launched step is collected.
  bool async_ = false;
  bool launched_ = false;
  BuiltBatch next_;
  std::vector<std::pair<RequestId, RequestStatus>> deferred_finishes_;
  int64_t steps_queued_ahead_ = 0;
  int64_t steps_dropped_ = 0;
};

}  // namespace locus

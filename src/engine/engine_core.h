// One engine step = schedule -> build the flat batch -> run the model -> sample -> update.
// Owns the scheduler (and through it the KV manager), the model runner and the sampler.
// Single-threaded: LLMEngine runs it on its engine thread; tests drive it directly.
#pragma once

#include <memory>
#include <span>
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

 private:
  EngineCore(const EngineConfig& config, std::unique_ptr<ModelRunner> runner,
             std::unique_ptr<Scheduler> scheduler, int num_kv_blocks);
  // Fills built.batch.device_sampling when the runner samples on its device and every logits
  // row of the step is a plain draw; false leaves the step to the host sampler.
  bool try_device_sampling(const SchedulerOutput& scheduled, BuiltBatch& built);

  EngineConfig config_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  Sampler sampler_;
  int num_kv_blocks_;
  // Per-step buffers, reused.
  SchedulerOutput scheduled_;
  BuiltBatch built_;
  ModelRunnerOutput runner_output_;
};

}  // namespace locus

// Keeps data-parallel replicas that share their experts (DP attention + EP MoE) stepping
// together. Every MoE layer is then a collective over all replicas, so whenever one replica runs
// a step every other must run one too: a one-token dummy step on a scratch KV block when its
// scheduler has nothing (vLLM's dummy batches). Only real steps start a new round; a replica
// that is idle when a round starts joins it with a dummy step from its own thread, and a
// replica's steps run in the order they were claimed.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/communicator.h"
#include "engine/model_runner.h"

namespace locus {

// The rounds the replicas share.
class LockstepGroup {
 public:
  explicit LockstepGroup(int replicas)
      : claimed_(static_cast<size_t>(replicas), 0), done_(static_cast<size_t>(replicas), 0) {}

  // The step replica r runs for its own batch: the round others have started and r has not
  // joined yet, or a new round.
  uint64_t claim_real(int r);
  // Waits until a round that replica r has not joined exists (returns its step), or the group
  // stops (returns 0).
  uint64_t claim_dummy(int r);
  // Waits until replica r finished every step before `step`; false once stopped.
  bool wait_turn(int r, uint64_t step);
  // A replica runs `tokens` tokens in `step`: waits until every replica has said how many it
  // runs in that step and returns the most (what the MoE layers pad to); 0 once stopped.
  int64_t max_tokens(uint64_t step, int64_t tokens);
  void finish(int r, uint64_t step);
  void stop();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t rounds_ = 0;
  std::vector<uint64_t> claimed_;
  std::vector<uint64_t> done_;
  struct Counts {
    int posted = 0;
    int read = 0;
    int64_t most = 0;
  };
  std::map<uint64_t, Counts> counts_;  // by step, until every replica has read its entry
  bool stopped_ = false;
};

class LockstepRunner final : public ModelRunner {
 public:
  // `inner` runs the replica's model: one rank (LocalModelRunner) or a tensor-parallel group
  // (ParallelModelRunner). `comms` are the replica's ends of the groups its model's MoE layers
  // exchange over (ModelParallel::dp, one per tensor-parallel rank), kept until the model is
  // gone; `abort_group` releases peers blocked in a collective when this replica fails or stops.
  // The communicators are shared so that `abort_group` may hold every replica's and reach them
  // whichever replica is destroyed first.
  LockstepRunner(std::vector<std::shared_ptr<Communicator>> comms,
                 std::unique_ptr<ModelRunner> inner, std::shared_ptr<LockstepGroup> group,
                 int replica, std::function<void(const std::string&)> abort_group);
  ~LockstepRunner() override;

  int vocab_size() const override { return inner_->vocab_size(); }
  const KVCacheSpec& kv_cache_spec() const override { return inner_->kv_cache_spec(); }
  // One block more than the scheduler's: the dummy steps' scratch block.
  Status initialize_kv_cache(int num_blocks) override;
  Expected<Tensor> execute(const ModelInputBatch& batch) override;
  bool supports_device_sampling() const override { return inner_->supports_device_sampling(); }
  Expected<std::vector<int32_t>> execute_sampled(const ModelInputBatch& batch) override;

  uint64_t dummy_steps() const;

 private:
  // Runs `batch` as this replica's share of `step` through `forward` (which gets the batch with
  // the step's most tokens filled in).
  Status run(uint64_t step, const ModelInputBatch& batch,
             const std::function<Status(const ModelInputBatch&)>& forward);
  void dummy_loop();

  std::vector<std::shared_ptr<Communicator>> comms_;  // outlive the model that points at them
  std::unique_ptr<ModelRunner> inner_;
  std::shared_ptr<LockstepGroup> group_;
  const int replica_;
  std::function<void(const std::string&)> abort_group_;
  ModelInputBatch dummy_;
  mutable std::mutex stats_mutex_;
  uint64_t dummy_steps_ = 0;
  std::thread dummy_thread_;  // started by initialize_kv_cache
};

}  // namespace locus

// A ModelRunner over the ranks of one tensor/expert-parallel group, one thread per rank in this
// process (each rank has its own backend, model shard and KV cache). Why threads rather than a
// process per rank: the ranks share the scheduler's batch by pointer, so a step costs no
// serialization or IPC, and one process owns the tokenizer, scheduler and HTTP server; NCCL
// runs the same way with one thread per GPU (ncclCommInitRank per device), and across nodes
// each node is one such process. Rank 0 runs in the engine thread; the others wait on the step.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dist/communicator.h"
#include "engine/local_model_runner.h"

namespace locus {

class ParallelModelRunner final : public ModelRunner {
 public:
  // `ranks[r]` runs rank r's model, whose ModelParallel points into `comms[r]`; `abort_group`
  // releases ranks blocked in a collective when another rank has failed; `bind_rank(r)` runs on
  // the thread about to drive rank r (a GPU rank makes its device current).
  static Expected<std::unique_ptr<ParallelModelRunner>> create(
      std::vector<std::unique_ptr<Communicator>> comms,
      std::vector<std::unique_ptr<LocalModelRunner>> ranks,
      std::function<void(const std::string&)> abort_group,
      std::function<Status(int)> bind_rank = {});
  ~ParallelModelRunner() override;

  int vocab_size() const override { return ranks_.front()->vocab_size(); }
  // Rank 0's cache layout; every rank allocates the same number of blocks of its own heads.
  const KVCacheSpec& kv_cache_spec() const override { return ranks_.front()->kv_cache_spec(); }
  Status initialize_kv_cache(int num_blocks) override;
  // Every rank runs the step; the logits are rank 0's (all ranks hold the same gathered ones).
  Expected<Tensor> execute(const ModelInputBatch& batch) override;
  // Rank 0 samples where its logits are (the GPU); its peers drop theirs there.
  bool supports_device_sampling() const override {
    return ranks_.front()->supports_device_sampling();
  }
  Expected<std::vector<int32_t>> execute_sampled(const ModelInputBatch& batch) override;
  Status execute_dropping_logits(const ModelInputBatch& batch) override;

  int size() const { return static_cast<int>(ranks_.size()); }
  LocalModelRunner& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }
  const LocalModelRunner& rank(int r) const { return *ranks_[static_cast<size_t>(r)]; }

  // Runs `work(r)` on every rank at once (rank 0 on the calling thread) and returns the first
  // failure; a failing rank aborts the group so that its peers do not wait in a collective.
  Status on_every_rank(const std::function<Status(int)>& work);

 private:
  ParallelModelRunner(std::vector<std::unique_ptr<Communicator>> comms,
                      std::vector<std::unique_ptr<LocalModelRunner>> ranks,
                      std::function<void(const std::string&)> abort_group,
                      std::function<Status(int)> bind_rank);
  void worker(int rank);

  std::vector<std::unique_ptr<Communicator>> comms_;  // outlive the models that point at them
  std::vector<std::unique_ptr<LocalModelRunner>> ranks_;
  std::function<void(const std::string&)> abort_group_;
  std::function<Status(int)> bind_rank_;

  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  const std::function<Status(int)>* work_ = nullptr;
  uint64_t posted_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::vector<Status> results_;
  std::vector<std::thread> threads_;
};

}  // namespace locus

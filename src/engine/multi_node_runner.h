// Tensor/expert parallelism across nodes (--nnodes N): node 0's ModelRunner drives its own ranks
// (a ParallelModelRunner, one thread per rank) and, through the NodeGroup's links, the ranks of
// every worker node, which run the same step from a copy of node 0's batch. The ranks' collectives
// cross nodes on their communicators (NCCL on GPUs, the TCP group on CPUs); the links carry only
// the step's inputs and each node's status. Only node 0 gets logits (every rank holds the same).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dist/node_group.h"
#include "engine/parallel_model_runner.h"

namespace locus {

enum class NodeCommand : uint8_t {
  kInitializeKvCache = 1,  // payload: i32 blocks
  kExecute = 2,            // payload: encode_batch()
  kPlanMemory = 3,         // GPU memory plan (a profiled step); reply: the hook's bytes
  kShutdown = 4,           // no reply
};

class MultiNodeRunner final : public ModelRunner {
 public:
  // `abort_local` releases node 0's ranks from a collective (the workers are told separately).
  MultiNodeRunner(std::unique_ptr<NodeGroup> nodes, std::unique_ptr<ParallelModelRunner> local,
                  std::function<void(const std::string&)> abort_local);
  // Tells the workers to exit.
  ~MultiNodeRunner() override;

  int vocab_size() const override { return local_->vocab_size(); }
  const KVCacheSpec& kv_cache_spec() const override { return local_->kv_cache_spec(); }
  Status initialize_kv_cache(int num_blocks) override;
  Expected<Tensor> execute(const ModelInputBatch& batch) override;

  ParallelModelRunner& local() { return *local_; }
  NodeGroup& nodes() { return *nodes_; }
  // Sends `command` to every worker, runs `here` on this node meanwhile, and returns the
  // workers' reply payloads (node 1 first). Any node's failure aborts the whole group, so that
  // no rank waits in a collective for a peer that will not come. Returned: a worker whose link
  // broke, else this node's failure, else the first worker's error reply.
  Expected<std::vector<std::string>> run_on_every_node(NodeCommand command, std::string payload,
                                                       const std::function<Status()>& here);
  // Every rank on every node is released from its collectives and fails from now on.
  void abort(const std::string& reason);

 private:
  std::unique_ptr<NodeGroup> nodes_;  // outlives local_, whose abort handler tells the workers
  std::unique_ptr<ParallelModelRunner> local_;
  std::function<void(const std::string&)> abort_local_;
  Tensor logits_;
};

// What a worker answers to commands that depend on its device (kPlanMemory).
struct WorkerHooks {
  // kPlanMemory's payload in, the reply's payload out.
  std::function<Expected<std::string>(std::string_view)> plan_memory;
};

// A worker node's life after loading: runs node 0's commands on `local` until node 0 shuts the
// run down (ok) or its link drops (an error). A failed command is reported to node 0, which
// aborts the group; `abort_local` releases this node's ranks when node 0 aborts.
Status serve_worker_node(NodeGroup& nodes, ParallelModelRunner& local,
                         const std::function<void(const std::string&)>& abort_local,
                         const WorkerHooks& hooks = {});

}  // namespace locus

// Loading a multi-node run (--nnodes N): the rendezvous, this node's ranks with communicators
// that reach the other nodes' ranks, and the runner that steps them together.
#pragma once

#include <memory>

#include "engine/gpu_memory_plan.h"
#include "engine/model_engine.h"
#include "engine/multi_node_runner.h"
#include "io/model_config.h"

namespace locus {

struct MultiNodeLoad {
  ModelConfig config;
  std::string weights_description;
  std::unique_ptr<MultiNodeRunner> runner;
};

// Node 0: joins the workers and loads ranks [0, tp / nnodes).
Expected<MultiNodeLoad> load_multi_node(const ModelEngineOptions& options);

#ifdef LOCUS_HAS_CUDA
// Node 0, GPUs: every node's ranks profile a worst-case step at once (its collectives span the
// nodes); the tightest rank anywhere sizes the KV pool, which every rank holds alike.
Expected<GpuMemoryPlan> plan_multi_node_gpu(MultiNodeRunner& runner, const SchedulerConfig& sched,
                                            const ModelEngineOptions& options);
#endif

}  // namespace locus

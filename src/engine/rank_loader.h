// How model_engine.cc and multi_node_loader.cc make backends and load one rank's shard of a
// model: the pieces every single-node, data-parallel and multi-node load shares. Internal to the
// engine (the public entry point is open_model_engine).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "backend/ops.h"
#include "engine/local_model_runner.h"
#include "engine/model_engine.h"
#include "engine/parallel_model_runner.h"
#include "model/parallel.h"

namespace locus {

// A CPU backend with `threads` cores (the --cpu-batch-invariant GEMM choice applied).
std::unique_ptr<Ops> make_cpu_backend(const ModelEngineOptions& options, int threads);
// The --device the options name: a GPU (the first) where asked and present, else the CPU.
Expected<std::unique_ptr<Ops>> make_backend(const ModelEngineOptions& options);
// The CPU cores a run may use: --cpu-threads, else all of them.
int cpu_cores(const ModelEngineOptions& options);

// What every parallel load returns from its first rank (all ranks load the same model).
struct ParallelLoad {
  ModelConfig config;
  std::string weights_description;
  std::unique_ptr<ParallelModelRunner> runner;
};

// How `options` splits the model, over these groups (either may be null).
Expected<ModelParallel> model_parallel(const ModelEngineOptions& options, Communicator* tp,
                                       Communicator* dp);

// Rank `r`'s shard of the model on `ops`, in a runner; `group` names the rank in errors. The
// first rank's config and weights description go to `first` (r == first_rank).
Expected<std::unique_ptr<LocalModelRunner>> load_rank(const ModelEngineOptions& options,
                                                      std::unique_ptr<Ops> ops,
                                                      const ModelParallel& parallel, int r,
                                                      std::string_view group, ParallelLoad& first,
                                                      int first_rank = 0);

}  // namespace locus

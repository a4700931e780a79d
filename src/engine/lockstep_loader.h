// Loading DP attention + EP MoE (--data-parallel-size D --enable-expert-parallel, optionally
// with --tensor-parallel-size T inside each replica): D replicas that each run attention on
// their own requests and share the routed experts, spread over all D x T ranks; LockstepRunner
// keeps them stepping together. Internal to the engine (open_model_engine).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/local_model_runner.h"
#include "engine/model_engine.h"
#include "engine/rank_loader.h"

namespace locus {

struct LockstepLoad {
  ParallelLoad info;                                  // config and weights description (no runner)
  std::vector<std::unique_ptr<ModelRunner>> runners;  // one LockstepRunner per replica
  // Every rank's runner inside `runners`, replica-major (replica d's rank t at d * T + t): the
  // GPU memory plan profiles them all at once.
  std::vector<LocalModelRunner*> ranks;
  // Releases every rank blocked in an expert exchange (a failure anywhere, or shutdown).
  std::function<void(const std::string&)> abort;
};

// On the CPU: the replicas' ranks are threads over in-process groups, sharing out the cores.
Expected<LockstepLoad> load_lockstep(const ModelEngineOptions& options);

#ifdef LOCUS_HAS_CUDA
// On GPUs: replica d's rank t on cuda:(d * T + t); NCCL groups for each replica's tensor
// parallelism and for each column (rank t of every replica) that exchanges tokens.
Expected<LockstepLoad> load_lockstep_gpu(const ModelEngineOptions& options);
#endif

}  // namespace locus

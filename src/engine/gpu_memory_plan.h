// How much of a GPU the KV cache gets (vLLM's memory profiling): --gpu-memory-utilization of the
// GPU, less the weights and the activation peak of a profiled worst-case step. CUDA builds only.
#pragma once

#ifdef LOCUS_HAS_CUDA
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "backend/cuda/runtime/cuda_backend.h"
#include "engine/model_engine.h"
#include "engine/parallel_model_runner.h"
#include "model/model.h"
#include "sched/scheduler_config.h"

namespace locus {

struct GpuMemoryPlan {
  uint64_t weight_bytes = 0;
  uint64_t activation_peak_bytes = 0;
  int64_t kv_cache_bytes = 0;
};

// The KV cache's share of one GPU: --gpu-memory-utilization of it, less the weights and the
// profiled worst-case step.
Expected<GpuMemoryPlan> plan_gpu_memory(CudaBackend& gpu, Model& model,
                                        const SchedulerConfig& sched,
                                        const ModelEngineOptions& options);

// Every rank profiles at once (the forward's collectives need all of them); the KV pool is sized
// by the tightest rank, since all ranks hold the same number of blocks. Returns rank 0's plan
// with that size.
Expected<GpuMemoryPlan> plan_parallel_gpu(ParallelModelRunner& runner, const SchedulerConfig& sched,
                                          const ModelEngineOptions& options);

// Data-parallel replicas that share their experts (DP attention + EP MoE): every replica
// profiles at once, each from its own thread (the MoE exchange pairs them up), and the KV pool is
// sized by the tightest, since every replica holds as many blocks. A replica that fails calls
// `abort` so that the others do not wait for it in a collective. Returns replica 0's plan with
// that size.
Expected<GpuMemoryPlan> plan_lockstep_gpu(std::span<LocalModelRunner* const> replicas,
                                          const SchedulerConfig& sched,
                                          const ModelEngineOptions& options,
                                          const std::function<void(const std::string&)>& abort);

}  // namespace locus
#endif

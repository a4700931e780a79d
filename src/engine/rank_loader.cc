#include "engine/rank_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/runtime/cuda_backend.h"
#endif

namespace locus {

std::unique_ptr<Ops> make_cpu_backend(const ModelEngineOptions& options, int threads) {
  CpuBackendOptions cpu;
  cpu.gemm_engine =
      options.cpu_batch_invariant ? cpu::GemmEngine::kBatchInvariant : cpu::GemmEngine::kOpenBlas;
  cpu.num_threads = threads;
  return std::make_unique<CpuBackend>(cpu);
}

Expected<std::unique_ptr<Ops>> make_backend(const ModelEngineOptions& options) {
  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda") {
    return invalid_argument(fmt::format("--device {}: choose auto, cuda or cpu", options.device));
  }
  if (options.device != "cpu") {
#ifdef LOCUS_HAS_CUDA
    const DeviceReport report = query_devices();
    if (!report.gpus.empty()) {
      CudaBackendOptions cuda;
      cuda.gpu_memory_utilization = options.gpu_memory_utilization;
      LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::create(cuda));
      return std::unique_ptr<Ops>(std::move(backend));
    }
    if (options.device == "cuda") {
      return unsupported(
          fmt::format("--device cuda: no usable GPU ({})", report.cuda_unavailable_reason));
    }
#else
    if (options.device == "cuda") {
      return unsupported("--device cuda: this locus was built without CUDA (LOCUS_CUDA=OFF)");
    }
#endif
  }
  return make_cpu_backend(options, options.cpu_threads);
}

int cpu_cores(const ModelEngineOptions& options) {
  return options.cpu_threads > 0
             ? options.cpu_threads
             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Expected<ModelParallel> model_parallel(const ModelEngineOptions& options, Communicator* tp,
                                       Communicator* dp) {
  ModelParallel parallel;
  parallel.tp = tp;
  parallel.dp = dp;
  parallel.expert_parallel = options.enable_expert_parallel;
  LOCUS_ASSIGN_OR_RETURN(parallel.placement, parse_expert_placement(options.expert_placement));
  LOCUS_ASSIGN_OR_RETURN(parallel.all2all, parse_all2all_backend(options.all2all_backend));
  return parallel;
}

Expected<std::unique_ptr<LocalModelRunner>> load_rank(const ModelEngineOptions& options,
                                                      std::unique_ptr<Ops> ops,
                                                      const ModelParallel& parallel, int r,
                                                      std::string_view group, ParallelLoad& first,
                                                      int first_rank) {
  auto loaded =
      load_model(options.model_dir, options.load_format, *ops, options.weight_seed, parallel);
  if (!loaded) return loaded.status().with_context(fmt::format("{} rank {}", group, r));
  if (r == first_rank) {
    first.config = loaded->config;
    first.weights_description = loaded->weights_description;
  }
  return LocalModelRunner::create(std::move(ops), std::move(loaded->model), options.block_size);
}

}  // namespace locus

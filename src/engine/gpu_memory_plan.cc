// Only CUDA builds plan GPU memory.
#ifdef LOCUS_HAS_CUDA
#include "engine/gpu_memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "model/forward_batch.h"

namespace locus {

namespace {

// vLLM's profile run: one forward of the largest step the scheduler may build
// (max_num_batched_tokens tokens over up to max_num_seqs sequences) on a scratch KV cache,
// measuring the allocator's peak above the weights. What is left of the utilization budget
// after weights and that peak goes to the KV cache.
Expected<uint64_t> profile_activation_peak(CudaBackend& gpu, Model& model,
                                           const SchedulerConfig& sched, int block_size) {
  const int64_t tokens = std::max<int64_t>(
      1, std::min<int64_t>(sched.max_num_batched_tokens,
                           static_cast<int64_t>(sched.max_num_seqs) * sched.max_model_len));
  const int64_t seqs = std::max<int64_t>(1, std::min<int64_t>(sched.max_num_seqs, tokens));
  ForwardBatchBuilder builder(block_size);
  int32_t next_block = 0;
  std::vector<int32_t> ids;
  std::vector<int32_t> table;
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t n = tokens / seqs + (s < tokens % seqs ? 1 : 0);
    ids.assign(static_cast<size_t>(n), 1);
    table.clear();
    for (int64_t b = 0; b < (n + block_size - 1) / block_size; ++b)
      table.push_back(next_block++);
    LOCUS_RETURN_IF_ERROR(builder.add_sequence(ids, 0, table, LogitsFor::kLastToken));
  }
  ForwardBatch batch = std::move(builder).build();
  LOCUS_RETURN_IF_ERROR(gpu.synchronize());
  const uint64_t before = gpu.memory_stats().in_use_bytes;
  gpu.reset_peak_memory();
  {
    LOCUS_ASSIGN_OR_RETURN(KvCache scratch, model.allocate_kv_cache(next_block, block_size));
    const uint64_t cache_bytes = gpu.memory_stats().in_use_bytes - before;
    LOCUS_ASSIGN_OR_RETURN(Tensor logits, model.forward(batch, scratch));
    (void)logits;
    LOCUS_RETURN_IF_ERROR(gpu.synchronize());
    const uint64_t peak = gpu.memory_stats().peak_in_use_bytes;
    return peak - before - cache_bytes;
  }
}

// The first plan with the smallest KV budget of all: every rank or replica holds as many blocks.
GpuMemoryPlan tightest(const std::vector<GpuMemoryPlan>& plans) {
  GpuMemoryPlan out = plans.front();
  for (const GpuMemoryPlan& p : plans)
    out.kv_cache_bytes = std::min(out.kv_cache_bytes, p.kv_cache_bytes);
  return out;
}

}  // namespace

// The KV cache's share of one GPU: --gpu-memory-utilization of it, less the weights and the
// profiled worst-case step.
Expected<GpuMemoryPlan> plan_gpu_memory(CudaBackend& gpu, Model& model,
                                        const SchedulerConfig& sched,
                                        const ModelEngineOptions& options) {
  GpuMemoryPlan plan;
  plan.weight_bytes = gpu.weight_memory_bytes() + gpu.memory_stats().in_use_bytes;
  LOCUS_ASSIGN_OR_RETURN(plan.activation_peak_bytes,
                         profile_activation_peak(gpu, model, sched, options.block_size));
  const auto budget = static_cast<uint64_t>(options.gpu_memory_utilization *
                                            static_cast<double>(gpu.total_memory_bytes()));
  const std::string name = gpu.name();
  // vLLM's per-instance meaning: this process may use `budget` bytes, whatever other
  // processes hold, so two servers at 0.45 share one GPU; the budget must be free to take.
  const uint64_t ours = gpu.memory_stats().reserved_bytes + gpu.weight_memory_bytes();
  const uint64_t available = gpu.free_memory_bytes() + ours;
  if (available < budget) {
    return resource_exhausted(fmt::format(
        "--gpu-memory-utilization {:.2f} asks for {:.2f} GiB of {}, but only {:.2f} GiB are "
        "free (other processes hold {:.2f} GiB); lower --gpu-memory-utilization",
        options.gpu_memory_utilization, static_cast<double>(budget) / (1ull << 30), name,
        static_cast<double>(available) / (1ull << 30),
        static_cast<double>(gpu.total_memory_bytes() - available) / (1ull << 30)));
  }
  const uint64_t used = plan.weight_bytes + plan.activation_peak_bytes;
  if (used >= budget) {
    return resource_exhausted(fmt::format(
        "--gpu-memory-utilization {:.2f} ({:.2f} GiB) leaves nothing for the KV cache on {}: "
        "weights {:.2f} GiB + profiled activations {:.2f} GiB",
        options.gpu_memory_utilization, static_cast<double>(budget) / (1ull << 30), name,
        static_cast<double>(plan.weight_bytes) / (1ull << 30),
        static_cast<double>(plan.activation_peak_bytes) / (1ull << 30)));
  }
  plan.kv_cache_bytes = static_cast<int64_t>(budget - used);
  log::info(
      "GPU memory plan on {}: budget {:.2f} GiB = weights {:.2f} + activations {:.2f} + "
      "KV cache up to {:.2f} GiB",
      name, static_cast<double>(budget) / (1ull << 30),
      static_cast<double>(plan.weight_bytes) / (1ull << 30),
      static_cast<double>(plan.activation_peak_bytes) / (1ull << 30),
      static_cast<double>(budget - used) / (1ull << 30));
  return plan;
}

// Every rank profiles at once (the forward's collectives need all of them); the KV pool is sized
// by the tightest rank, since all ranks hold the same number of blocks. `first` gets rank 0's
// plan with that size.
Expected<GpuMemoryPlan> plan_parallel_gpu(ParallelModelRunner& runner, const SchedulerConfig& sched,
                                          const ModelEngineOptions& options) {
  std::vector<GpuMemoryPlan> plans(static_cast<size_t>(runner.size()));
  LOCUS_RETURN_IF_ERROR(runner.on_every_rank([&](int r) -> Status {
    LocalModelRunner& rank = runner.rank(r);
    auto* rank_gpu = dynamic_cast<CudaBackend*>(&rank.ops());
    if (rank_gpu == nullptr) return internal_error("a tensor-parallel rank is not on a GPU");
    LOCUS_ASSIGN_OR_RETURN(plans[static_cast<size_t>(r)],
                           plan_gpu_memory(*rank_gpu, rank.model(), sched, options));
    return Status::ok();
  }));
  return tightest(plans);
}

Expected<GpuMemoryPlan> plan_lockstep_gpu(std::span<LocalModelRunner* const> replicas,
                                          const SchedulerConfig& sched,
                                          const ModelEngineOptions& options,
                                          const std::function<void(const std::string&)>& abort) {
  const size_t n = replicas.size();
  std::vector<GpuMemoryPlan> plans(n);
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      results[r] = [&]() -> Status {
        LocalModelRunner& replica = *replicas[r];
        auto* gpu = dynamic_cast<CudaBackend*>(&replica.ops());
        if (gpu == nullptr) return internal_error("a data-parallel replica is not on a GPU");
        LOCUS_RETURN_IF_ERROR(gpu->make_current());
        LOCUS_ASSIGN_OR_RETURN(plans[r], plan_gpu_memory(*gpu, replica.model(), sched, options));
        return Status::ok();
      }();
      if (!results[r].is_ok()) {
        abort(fmt::format("data-parallel replica {} failed to plan its GPU memory: {}", r,
                          results[r].to_string()));
      }
    });
  }
  for (std::thread& t : threads)
    t.join();
  for (size_t r = 0; r < n; ++r) {
    if (!results[r].is_ok()) {
      return results[r].with_context(fmt::format("data-parallel replica {}", r));
    }
  }
  return tightest(plans);
}

}  // namespace locus
#endif

#include "engine/model_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "core/logging.h"
#include "dist/fake_communicator.h"
#include "engine/data_parallel_engine.h"
#include "engine/gpu_memory_plan.h"
#include "engine/lockstep_loader.h"
#include "engine/multi_node_loader.h"
#include "engine/parallel_model_runner.h"
#include "engine/rank_loader.h"
#include "engine/tokenizer_detokenizer.h"
#include "model/forward_batch.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/cuda/runtime/nccl_communicator.h"
#endif

namespace locus {

SamplingParams ModelEngine::default_sampling_params() const {
  SamplingParams p;
  if (generation.temperature) p.temperature = *generation.temperature;
  if (generation.top_p) p.top_p = *generation.top_p;
  if (generation.top_k) p.top_k = *generation.top_k;
  if (generation.min_p) p.min_p = *generation.min_p;
  if (generation.repetition_penalty) p.repetition_penalty = *generation.repetition_penalty;
  if (generation.max_new_tokens) p.max_tokens = *generation.max_new_tokens;
  return p;
}

namespace {

// The kernel family a --attention-backend / --moe-backend choice names, checked against the
// device this run uses. Each device has one family per op today; the flag exists so scripts
// written for vLLM keep working and an impossible choice fails loudly instead of silently.
Expected<std::string> resolve_kernel_choice(std::string_view flag, const std::string& choice,
                                            bool on_gpu, std::string_view gpu_family) {
  const std::string picked = on_gpu ? std::string(gpu_family) : "cpu";
  if (choice == "auto" || choice == picked) return picked;
  if (choice == gpu_family) {
    return unsupported(fmt::format(
        "{} {} needs a GPU, but this run uses the CPU backend (--device cpu, no GPU found, or a "
        "build without CUDA)",
        flag, choice));
  }
  if (choice == "cpu") {
    return unsupported(fmt::format(
        "{} cpu: the CPU kernels run only with the CPU backend; add --device cpu", flag));
  }
  return invalid_argument(fmt::format("{} {}: choose auto, {} or cpu", flag, choice, gpu_family));
}

Status check_parallel_options(const ModelEngineOptions& options) {
  const int tp = options.tensor_parallel_size;
  if (tp < 1) {
    return invalid_argument(fmt::format("--tensor-parallel-size {} must be at least 1", tp));
  }
  const int dp = options.data_parallel_size;
  if (dp < 1) {
    return invalid_argument(fmt::format("--data-parallel-size {} must be at least 1", dp));
  }
  if (auto placement = parse_expert_placement(options.expert_placement); !placement) {
    return placement.status();
  }
  LOCUS_ASSIGN_OR_RETURN(All2AllBackend a2a, parse_all2all_backend(options.all2all_backend));
  if (a2a != All2AllBackend::kAllGatherReduceScatter &&
      !(dp > 1 && options.enable_expert_parallel)) {
    return invalid_argument(fmt::format(
        "--all2all-backend {} moves tokens between data-parallel ranks that share experts "
        "(--data-parallel-size N --enable-expert-parallel); tensor-parallel ranks already see "
        "every token",
        options.all2all_backend));
  }
  return Status::ok();
}

// --tensor-parallel-size > 1 on the CPU: one in-process group, each rank a thread with its own
// CPU backend (the cores shared out), model shard and KV cache.
Expected<ParallelLoad> load_parallel(const ModelEngineOptions& options) {
  const int tp = options.tensor_parallel_size;
  std::shared_ptr<FakeGroup> group = FakeGroup::create(tp, std::chrono::minutes(10));
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::unique_ptr<LocalModelRunner>> ranks;
  ParallelLoad out;
  for (int r = 0; r < tp; ++r) {
    comms.push_back(group->communicator(r));
    LOCUS_ASSIGN_OR_RETURN(ModelParallel parallel,
                           model_parallel(options, comms.back().get(), nullptr));
    LOCUS_ASSIGN_OR_RETURN(
        auto runner,
        load_rank(options, make_cpu_backend(options, std::max(1, cpu_cores(options) / tp)),
                  parallel, r, "tensor-parallel", out));
    ranks.push_back(std::move(runner));
  }
  log::info("{} ranks ({}) on the CPU: {}", tp,
            options.enable_expert_parallel ? "expert parallel" : "tensor parallel",
            comms.front()->description());
  LOCUS_ASSIGN_OR_RETURN(
      out.runner,
      ParallelModelRunner::create(std::move(comms), std::move(ranks),
                                  [group](const std::string& reason) { group->abort(reason); }));
  return out;
}

// Data-parallel replicas after the first: the same model on its own CPU backend(s).
Expected<std::unique_ptr<ModelRunner>> open_cpu_replica(const ModelEngineOptions& options) {
  if (options.tensor_parallel_size > 1) {
    LOCUS_ASSIGN_OR_RETURN(ParallelLoad p, load_parallel(options));
    return std::unique_ptr<ModelRunner>(std::move(p.runner));
  }
  LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, make_backend(options));
  LOCUS_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(options.model_dir, options.load_format,
                                                        *ops, options.weight_seed));
  LOCUS_ASSIGN_OR_RETURN(
      auto local,
      LocalModelRunner::create(std::move(ops), std::move(loaded.model), options.block_size));
  return std::unique_ptr<ModelRunner>(std::move(local));
}

#ifdef LOCUS_HAS_CUDA
// The GPUs a run needs (one per rank of every replica), checked before anything loads.
Status check_gpu_count(const ModelEngineOptions& options) {
  const int need =
      options.tensor_parallel_size / std::max(1, options.nnodes) * options.data_parallel_size;
  const DeviceReport report = query_devices();
  if (static_cast<int>(report.gpus.size()) < need) {
    return unsupported(fmt::format(
        "--tensor-parallel-size {} x --data-parallel-size {} needs {} GPUs; this machine has {}",
        options.tensor_parallel_size, options.data_parallel_size, need, report.gpus.size()));
  }
  return Status::ok();
}

// --tensor-parallel-size > 1 on GPUs: rank r on cuda:(first_gpu + r), NCCL between them, one
// thread per GPU.
Expected<ParallelLoad> load_parallel_gpu(const ModelEngineOptions& options, int first_gpu) {
  const int tp = options.tensor_parallel_size;
  std::vector<std::unique_ptr<CudaBackend>> backends;
  std::vector<CudaBackend*> gpus;
  for (int r = 0; r < tp; ++r) {
    CudaBackendOptions cuda;
    cuda.device_index = first_gpu + r;
    cuda.gpu_memory_utilization = options.gpu_memory_utilization;
    LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::create(cuda));
    gpus.push_back(b.get());
    backends.push_back(std::move(b));
  }
  LOCUS_ASSIGN_OR_RETURN(auto nccl, NcclCommunicator::create_local_group(gpus));
  ParallelLoad out;
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::unique_ptr<LocalModelRunner>> ranks;
  for (int r = 0; r < tp; ++r) {
    LOCUS_RETURN_IF_ERROR(gpus[static_cast<size_t>(r)]->make_current());
    LOCUS_ASSIGN_OR_RETURN(ModelParallel parallel,
                           model_parallel(options, nccl[static_cast<size_t>(r)].get(), nullptr));
    LOCUS_ASSIGN_OR_RETURN(
        auto runner, load_rank(options, std::move(backends[static_cast<size_t>(r)]), parallel, r,
                               "tensor-parallel", out));
    ranks.push_back(std::move(runner));
  }
  std::vector<NcclCommunicator*> group;
  for (auto& c : nccl) {
    group.push_back(c.get());
    comms.push_back(std::move(c));
  }
  log::info("{} ranks ({}) on {} GPUs: {}", tp,
            options.enable_expert_parallel ? "expert parallel" : "tensor parallel", tp,
            comms.front()->description());
  LOCUS_ASSIGN_OR_RETURN(
      out.runner, ParallelModelRunner::create(
                      std::move(comms), std::move(ranks),
                      [group](const std::string& reason) {
                        // A rank that fails would leave its peers inside NCCL kernels waiting
                        // for it: abort every rank's communicator, which releases them; the
                        // engine reports the failure and stops serving.
                        log::error("tensor-parallel group failed: {}", reason);
                        for (NcclCommunicator* c : group)
                          c->abort(reason);
                      },
                      [gpus](int r) { return gpus[static_cast<size_t>(r)]->make_current(); }));
  return out;
}

#endif

// CUDA graphs for decode at batch sizes up to --max-cudagraph-capture-size (vLLM's default 512),
// unless --enforce-eager.
void enable_graphs(LocalModelRunner& local, const ModelEngineOptions& options,
                   const SchedulerConfig& sched) {
  if (options.enforce_eager) return;
  const int largest = options.max_cudagraph_capture_size > 0 ? options.max_cudagraph_capture_size
                                                             : std::min(sched.max_num_seqs, 512);
  local.enable_decode_graphs(std::min(largest, sched.max_num_seqs), sched.max_model_len);
}

#ifdef LOCUS_HAS_CUDA
// Data-parallel replica `replica` > 0 on GPUs: its own GPU (or tensor-parallel GPUs
// [replica * tp, (replica + 1) * tp)), model, memory plan and decode graphs, like replica 0.
// Its KV budget must hold the `kv_bytes` replica 0's pool takes (every replica has as many
// blocks).
Expected<std::unique_ptr<ModelRunner>> open_gpu_replica(const ModelEngineOptions& options,
                                                        const SchedulerConfig& sched, int replica,
                                                        int64_t kv_bytes) {
  const int tp = options.tensor_parallel_size;
  auto fits = [&](int64_t budget) -> Status {
    if (budget >= kv_bytes) return Status::ok();
    return resource_exhausted(fmt::format(
        "data-parallel replica {} has room for {:.2f} GiB of KV cache, less than the {:.2f} GiB "
        "of replica 0 (every replica holds as many blocks); free its GPU or lower "
        "--gpu-memory-utilization",
        replica, static_cast<double>(budget) / (1ull << 30),
        static_cast<double>(kv_bytes) / (1ull << 30)));
  };
  if (tp > 1) {
    LOCUS_ASSIGN_OR_RETURN(ParallelLoad p, load_parallel_gpu(options, replica * tp));
    LOCUS_ASSIGN_OR_RETURN(GpuMemoryPlan plan, plan_parallel_gpu(*p.runner, sched, options));
    LOCUS_RETURN_IF_ERROR(fits(plan.kv_cache_bytes));
    if (options.tensor_parallel_cuda_graphs) {
      for (int r = 0; r < tp; ++r)
        enable_graphs(p.runner->rank(r), options, sched);
    }
    return std::unique_ptr<ModelRunner>(std::move(p.runner));
  }
  CudaBackendOptions cuda;
  cuda.device_index = replica;
  cuda.gpu_memory_utilization = options.gpu_memory_utilization;
  LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> gpu, CudaBackend::create(cuda));
  LOCUS_RETURN_IF_ERROR(gpu->make_current());
  LOCUS_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(options.model_dir, options.load_format,
                                                        *gpu, options.weight_seed));
  LOCUS_ASSIGN_OR_RETURN(GpuMemoryPlan plan, plan_gpu_memory(*gpu, *loaded.model, sched, options));
  LOCUS_RETURN_IF_ERROR(fits(plan.kv_cache_bytes));
  CudaBackend* raw = gpu.get();
  LOCUS_ASSIGN_OR_RETURN(
      auto local,
      LocalModelRunner::create(std::move(gpu), std::move(loaded.model), options.block_size));
  enable_graphs(*local, options, sched);
  local->bind_thread([raw] { return raw->make_current(); });
  return std::unique_ptr<ModelRunner>(std::move(local));
}
#endif

}  // namespace

Expected<ModelEngine> open_model_engine(const ModelEngineOptions& options) {
  ModelEngine out;
  // With data parallelism each replica gets its share of the CPU cores.
  ModelEngineOptions replica_options = options;
  if (options.data_parallel_size > 1) {
    replica_options.cpu_threads = std::max(1, cpu_cores(options) / options.data_parallel_size);
  }
  LOCUS_ASSIGN_OR_RETURN(out.generation, load_generation_config(options.model_dir));
  if (options.load_tokenizer) {
    LOCUS_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load(options.model_dir));
    out.tokenizer = std::move(tokenizer);
  }

  LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<Ops> backend, make_backend(replica_options));
  out.backend_name = backend->name();
  out.on_gpu = !backend->device().is_cpu();
  LOCUS_ASSIGN_OR_RETURN(out.attention_backend,
                         resolve_kernel_choice("--attention-backend", options.attention_backend,
                                               out.on_gpu, "cuda_paged"));
  LOCUS_ASSIGN_OR_RETURN(
      out.moe_backend,
      resolve_kernel_choice("--moe-backend", options.moe_backend, out.on_gpu, "cuda_grouped"));
  LOCUS_RETURN_IF_ERROR(check_parallel_options(options));
#ifdef LOCUS_HAS_CUDA
  if (out.on_gpu) LOCUS_RETURN_IF_ERROR(check_gpu_count(options));
#endif
  out.tensor_parallel_size = options.tensor_parallel_size;
  LoadedModel loaded;
  std::unique_ptr<ParallelModelRunner> parallel_runner;
  std::unique_ptr<MultiNodeRunner> multi_node_runner;
  LockstepLoad lockstep;
  if (options.nnodes > 1) {
    if (options.node_rank != 0) {
      return invalid_argument(
          fmt::format("--node-rank {} runs headless (run_worker_node); only node 0 opens an engine",
                      options.node_rank));
    }
    backend.reset();  // each rank makes its own
    LOCUS_ASSIGN_OR_RETURN(MultiNodeLoad m, load_multi_node(options));
    loaded.config = std::move(m.config);
    loaded.weights_description = std::move(m.weights_description);
    multi_node_runner = std::move(m.runner);
  } else if (options.data_parallel_size > 1 && options.enable_expert_parallel) {
#ifdef LOCUS_HAS_CUDA
    if (out.on_gpu) {
      backend.reset();  // replica 0 makes its own on the same GPU
      LOCUS_ASSIGN_OR_RETURN(lockstep, load_lockstep_gpu(replica_options));
    } else {
      LOCUS_ASSIGN_OR_RETURN(lockstep, load_lockstep(replica_options));
    }
#else
    LOCUS_ASSIGN_OR_RETURN(lockstep, load_lockstep(replica_options));
#endif
    loaded.config = lockstep.info.config;
    loaded.weights_description = lockstep.info.weights_description;
    backend.reset();  // each replica made its own
  } else if (options.tensor_parallel_size > 1) {
    backend.reset();  // each rank makes its own
    ParallelLoad p;
#ifdef LOCUS_HAS_CUDA
    if (out.on_gpu) {
      LOCUS_ASSIGN_OR_RETURN(p, load_parallel_gpu(replica_options, 0));
    } else {
      LOCUS_ASSIGN_OR_RETURN(p, load_parallel(replica_options));
    }
#else
    LOCUS_ASSIGN_OR_RETURN(p, load_parallel(replica_options));
#endif
    loaded.config = std::move(p.config);
    loaded.weights_description = std::move(p.weights_description);
    parallel_runner = std::move(p.runner);
  } else {
    LOCUS_ASSIGN_OR_RETURN(
        loaded, load_model(options.model_dir, options.load_format, *backend, options.weight_seed));
  }
  out.config = loaded.config;
  out.weights_description = loaded.weights_description;
  if (out.tokenizer && static_cast<int64_t>(out.tokenizer->id_limit()) > out.config.vocab_size) {
    // Ids the tokenizer can produce must have a logits row; the reverse (padding rows) is fine.
    return invalid_argument(fmt::format(
        "{}: the tokenizer has ids up to {} but the model's vocab_size is {}",
        options.model_dir.string(), out.tokenizer->id_limit() - 1, out.config.vocab_size));
  }

  EngineConfig config = options.engine;
  SchedulerConfig& sched = config.scheduler;
  if (sched.max_model_len <= 0) {
    sched.max_model_len = static_cast<int>(
        std::min<int64_t>(out.config.max_position_embeddings, std::numeric_limits<int>::max()));
  }
  if (sched.max_model_len > out.config.max_position_embeddings) {
    return invalid_argument(
        fmt::format("--max-model-len {} is larger than the model's max_position_embeddings {}",
                    sched.max_model_len, out.config.max_position_embeddings));
  }
  if (!config.eos_token_id) {
    if (out.tokenizer && out.tokenizer->eos_token_id()) {
      config.eos_token_id = *out.tokenizer->eos_token_id();
    } else if (!out.generation.eos_token_ids.empty()) {
      config.eos_token_id = out.generation.eos_token_ids.front();
    }
  }
  for (int32_t id : out.generation.eos_token_ids) {
    if (id != config.eos_token_id) config.extra_eos_token_ids.push_back(id);
  }

#ifdef LOCUS_HAS_CUDA
  if (auto* gpu = dynamic_cast<CudaBackend*>(backend.get()); gpu != nullptr && loaded.model) {
    LOCUS_ASSIGN_OR_RETURN(GpuMemoryPlan plan,
                           plan_gpu_memory(*gpu, *loaded.model, sched, options));
    out.weight_bytes = plan.weight_bytes;
    out.activation_peak_bytes = plan.activation_peak_bytes;
    config.kv_cache_memory_bytes = plan.kv_cache_bytes;
  } else if (multi_node_runner && out.on_gpu) {
    LOCUS_ASSIGN_OR_RETURN(GpuMemoryPlan plan,
                           plan_multi_node_gpu(*multi_node_runner, sched, options));
    config.kv_cache_memory_bytes = plan.kv_cache_bytes;
    out.weight_bytes = plan.weight_bytes;
    out.activation_peak_bytes = plan.activation_peak_bytes;
  } else if (!lockstep.ranks.empty() && out.on_gpu) {
    LOCUS_ASSIGN_OR_RETURN(GpuMemoryPlan plan,
                           plan_lockstep_gpu(lockstep.ranks, sched, options, lockstep.abort));
    // Each replica's dummy steps take one block on top of the scheduler's.
    config.kv_cache_memory_bytes = std::max<int64_t>(
        1, plan.kv_cache_bytes - lockstep.ranks.front()->kv_cache_spec().bytes_per_block());
    out.weight_bytes = plan.weight_bytes;
    out.activation_peak_bytes = plan.activation_peak_bytes;
  } else if (parallel_runner && out.on_gpu) {
    LOCUS_ASSIGN_OR_RETURN(GpuMemoryPlan plan, plan_parallel_gpu(*parallel_runner, sched, options));
    config.kv_cache_memory_bytes = plan.kv_cache_bytes;
    out.weight_bytes = plan.weight_bytes;
    out.activation_peak_bytes = plan.activation_peak_bytes;
  }
#endif
  std::unique_ptr<ModelRunner> runner;
  if (!lockstep.runners.empty()) {
    out.runner = lockstep.ranks.front();
    runner = std::move(lockstep.runners.front());
  } else if (parallel_runner) {
    if (out.on_gpu && options.tensor_parallel_cuda_graphs) {
      for (int r = 0; r < parallel_runner->size(); ++r)
        enable_graphs(parallel_runner->rank(r), options, sched);
    }
    out.runner = &parallel_runner->rank(0);
    runner = std::move(parallel_runner);
  } else if (multi_node_runner) {
    out.runner = &multi_node_runner->local().rank(0);
    runner = std::move(multi_node_runner);
  } else {
    LOCUS_ASSIGN_OR_RETURN(
        auto local,
        LocalModelRunner::create(std::move(backend), std::move(loaded.model), options.block_size));
    if (out.on_gpu) enable_graphs(*local, options, sched);
    out.runner = local.get();
    runner = std::move(local);
  }
  const KVCacheSpec& spec = runner->kv_cache_spec();
  if (config.num_kv_blocks <= 0) {
    // Enough for max_num_seqs sequences of max_model_len (plus one spare block each), capped
    // by the memory budget: the CPU has no profiling pass to size against.
    const int64_t per_seq = (sched.max_model_len + spec.block_size - 1) / spec.block_size + 1;
    int64_t blocks = per_seq * sched.max_num_seqs;
    if (config.kv_cache_memory_bytes > 0) {
      LOCUS_ASSIGN_OR_RETURN(int fit, num_blocks_for_budget(spec, config.kv_cache_memory_bytes));
      blocks = std::min<int64_t>(blocks, fit);
    }
    config.num_kv_blocks = static_cast<int>(std::min<int64_t>(blocks, 1 << 30));
  }
  out.num_kv_blocks = config.num_kv_blocks;
  out.kv_cache_bytes = static_cast<int64_t>(config.num_kv_blocks) * spec.bytes_per_block();

  DetokenizerFactory detokenizers;
  if (out.tokenizer) detokenizers = make_tokenizer_detokenizer_factory(*out.tokenizer);
  out.data_parallel_size = options.data_parallel_size;
  if (options.data_parallel_size == 1) {
    LOCUS_ASSIGN_OR_RETURN(out.engine,
                           LLMEngine::create(config, std::move(runner), std::move(detokenizers)));
    return out;
  }
  // Data-parallel replicas: the one above, then the others alike, each with its own KV pool.
  std::vector<std::unique_ptr<LLMEngine>> replicas;
  for (int r = 0; r < options.data_parallel_size; ++r) {
    if (r > 0 && !lockstep.runners.empty()) {
      runner = std::move(lockstep.runners[static_cast<size_t>(r)]);
    } else if (r > 0) {
      Expected<std::unique_ptr<ModelRunner>> more = unsupported("no GPU replicas in this build");
#ifdef LOCUS_HAS_CUDA
      if (out.on_gpu) more = open_gpu_replica(replica_options, sched, r, out.kv_cache_bytes);
#endif
      if (!out.on_gpu) more = open_cpu_replica(replica_options);
      if (!more) return more.status().with_context(fmt::format("data-parallel replica {}", r));
      runner = std::move(*more);
    }
    config.first_request_id = DataParallelEngine::first_request_id(r);
    LOCUS_ASSIGN_OR_RETURN(auto engine, LLMEngine::create(config, std::move(runner), detokenizers));
    replicas.push_back(std::move(engine));
  }
  log::info("{} data-parallel replicas on {}, {} KV blocks each", replicas.size(),
            out.on_gpu ? "their own GPUs" : "the CPU", config.num_kv_blocks);
  LOCUS_ASSIGN_OR_RETURN(
      out.engine,
      DataParallelEngine::create(std::move(replicas), options.block_size, config.num_kv_blocks));
  return out;
}

}  // namespace locus

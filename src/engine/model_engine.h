// Everything between a model folder and a running LLMEngine, shared by `locus generate`, the
// server and the benchmarks: config.json, generation_config.json, the tokenizer, the weights on
// a backend, the KV budget, and the engine threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine_config.h"
#include "engine/llm_engine.h"
#include "engine/local_model_runner.h"
#include "io/generation_config.h"
#include "io/model_config.h"
#include "tokenizer/tokenizer.h"

namespace locus {

struct ModelEngineOptions {
  std::filesystem::path model_dir;
  LoadFormat load_format = LoadFormat::kAuto;
  uint64_t weight_seed = 0;  // dummy weights
  int block_size = 16;       // --block-size
  // Scheduler limits, prefix caching, seed. max_model_len 0 = the model's
  // max_position_embeddings. num_kv_blocks 0 = as many as kv_cache_memory_bytes holds, but no
  // more than max_num_seqs full-length sequences need.
  EngineConfig engine;
  // --device: "auto" (a GPU when this build has CUDA and one is present, else the CPU), "cuda"
  // (error without a GPU) or "cpu". The CLI defaults to auto; library callers (tests) get the
  // deterministic CPU unless they ask.
  std::string device = "cpu";
  // GPU: fraction of the GPU's memory for weights, activations and the KV cache (vLLM's
  // --gpu-memory-utilization); the KV cache gets what a profiled worst-case step leaves.
  double gpu_memory_utilization = 0.9;
  // GPU: run every step eagerly (no CUDA graphs), vLLM's --enforce-eager.
  bool enforce_eager = false;
  // Kernel families (vLLM's --attention-backend, SGLang's --moe-runner-backend): "auto" picks
  // the fastest the device has; an explicit name the device cannot run is an error saying why.
  // attention: cuda_paged (GPU: paged FlashAttention-style prefill + split-KV decode) | cpu.
  // moe: cuda_grouped (GPU: device-side align + grouped tensor-core expert GEMMs) | cpu.
  std::string attention_backend = "auto";
  std::string moe_backend = "auto";
  // Largest decode batch replayed from a CUDA graph (vLLM's max_cudagraph_capture_size);
  // 0 = min(max_num_seqs, 512).
  int max_cudagraph_capture_size = 0;
  // Tensor-parallel GPU ranks also replay decode steps from CUDA graphs (NCCL collectives
  // captured inside). Off until measured on several GPUs; single-GPU runs use graphs anyway.
  bool tensor_parallel_cuda_graphs = false;
  // Use the CPU backend's batch-invariant GEMM (bit-identical rows whatever the batch).
  bool cpu_batch_invariant = true;
  int cpu_threads = 0;
  // Without a tokenizer the engine takes and returns token ids only.
  bool load_tokenizer = true;
  // Parallelism (vLLM's flags). --tensor-parallel-size ranks split every layer
  // (model/parallel.h); --enable-expert-parallel spreads whole experts over them instead of
  // splitting each (--expert-placement-strategy linear | round_robin). The CPU runs the ranks
  // as threads over the in-process communicator, GPUs as threads over NCCL.
  // --data-parallel-size runs replicas behind a prefix-aware balancer (one GPU or TP group
  // each); with --enable-expert-parallel the replicas share their experts and step together
  // (LockstepRunner; on GPUs replica r on cuda:r, NCCL between them), exchanging tokens by
  // --all2all-backend.
  int tensor_parallel_size = 1;
  bool enable_expert_parallel = false;
  std::string expert_placement = "linear";
  int data_parallel_size = 1;
  std::string all2all_backend = "auto";
  // Several nodes (vLLM's --nnodes, --node-rank, --master-addr, --master-port): the
  // --tensor-parallel-size ranks split evenly over the nodes. Node 0 serves; the others run
  // headless (run_worker_node) and join node 0 at master_addr:master_port.
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29501;
  // How long the nodes wait for each other at start-up.
  std::chrono::milliseconds node_join_timeout = std::chrono::minutes(10);
};

struct ModelEngine {
  ModelConfig config;
  GenerationConfig generation;
  std::optional<Tokenizer> tokenizer;
  std::string backend_name;
  std::string attention_backend;  // the resolved --attention-backend / --moe-backend
  std::string moe_backend;
  bool on_gpu = false;
  // GPU memory plan (bytes), reported at startup: weights, the profiled step's activation peak,
  // and the KV cache; zero on the CPU.
  uint64_t weight_bytes = 0;
  uint64_t activation_peak_bytes = 0;
  std::string weights_description;
  int num_kv_blocks = 0;
  int64_t kv_cache_bytes = 0;
  // One LLMEngine, or DataParallelEngine over --data-parallel-size replicas.
  std::unique_ptr<EngineClient> engine;
  // The engine's model runner (owned by `engine`; rank 0's with tensor parallelism), for step
  // counters.
  const LocalModelRunner* runner = nullptr;
  int tensor_parallel_size = 1;
  int data_parallel_size = 1;

  // Sampling defaults from generation_config.json (vLLM --generation-config auto): temperature,
  // top_p, top_k, min_p, repetition_penalty, max_new_tokens.
  SamplingParams default_sampling_params() const;
};

Expected<ModelEngine> open_model_engine(const ModelEngineOptions& options);

// A worker node of a multi-node run (--node-rank > 0): loads this node's ranks, joins node 0
// and runs its steps until node 0 shuts the run down. No tokenizer, scheduler or server.
Status run_worker_node(const ModelEngineOptions& options);

}  // namespace locus

// The device flags serve, generate and bench share (vLLM's names): --device,
// --gpu-memory-utilization, --enforce-eager, --async-scheduling, --max-cudagraph-capture-size,
// --attention-backend, --moe-backend, and the parallelism flags --tensor-parallel-size,
// --enable-expert-parallel, --expert-placement-strategy, --data-parallel-size,
// --all2all-backend, and the multi-node flags --nnodes, --node-rank, --master-addr and
// --master-port.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "engine/model_engine.h"

namespace locus::cli {

struct DeviceCliOptions {
  std::string device = "auto";
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  int max_cudagraph_capture_size = 0;
  bool tensor_parallel_cuda_graphs = false;
  std::string attention_backend = "auto";
  std::string moe_backend = "auto";
  int tensor_parallel_size = 1;
  bool enable_expert_parallel = false;
  std::string expert_placement = "linear";
  int data_parallel_size = 1;
  std::string all2all_backend = "auto";
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29501;
  int async_scheduling = -1;  // -1: the engine's default (on for GPU runners)

  // A node other than node 0 runs headless: the same command line, with its --node-rank.
  bool headless() const { return nnodes > 1 && node_rank > 0; }

  void add_to(CLI::App* cmd) {
    cmd->add_option("--device", device, "auto | cuda | cpu (auto: a GPU when there is one)")
        ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
    cmd->add_option("--gpu-memory-utilization", gpu_memory_utilization,
                    "Share of GPU memory for weights, activations and the KV cache")
        ->check(CLI::Range(0.01, 1.0));
    cmd->add_flag("--enforce-eager", enforce_eager, "Run every step eagerly (no CUDA graphs)");
    cmd->add_flag_callback(
        "--async-scheduling", [this] { async_scheduling = 1; },
        "Queue the next decode step on the device before the current one's tokens reach the "
        "host (the default on a GPU)");
    cmd->add_flag_callback(
        "--no-async-scheduling", [this] { async_scheduling = 0; },
        "Run each step only after the one before has returned its tokens (the CPU's default)");
    cmd->add_option("--max-cudagraph-capture-size", max_cudagraph_capture_size,
                    "Largest decode batch replayed from a CUDA graph (0 = max-num-seqs, <= 512)")
        ->check(CLI::Range(0, 4096));
    cmd->add_flag("--experimental-tp-cuda-graphs", tensor_parallel_cuda_graphs,
                  "Tensor-parallel GPU ranks replay decode from CUDA graphs too (not yet measured "
                  "on several GPUs, so off by default)");
    cmd->add_option("--attention-backend", attention_backend,
                    "auto | cuda_paged | cpu (auto: the device's fastest)");
    cmd->add_option("--moe-backend", moe_backend,
                    "auto | cuda_grouped | cpu (auto: the device's fastest)");
    cmd->add_option("--tensor-parallel-size", tensor_parallel_size,
                    "Ranks that split every layer (one thread per rank: CPU cores or one GPU each)")
        ->check(CLI::Range(1, 1024));
    cmd->add_flag("--enable-expert-parallel", enable_expert_parallel,
                  "Spread whole experts over the ranks instead of splitting each expert");
    cmd->add_option("--expert-placement-strategy", expert_placement,
                    "linear | round_robin: which experts each rank holds")
        ->check(CLI::IsMember({"linear", "round_robin"}));
    cmd->add_option("--data-parallel-size", data_parallel_size,
                    "Engine replicas behind one server (GPUs: one per replica; with "
                    "--enable-expert-parallel they share the experts and step together)")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--all2all-backend", all2all_backend,
                    "How data-parallel ranks that share experts exchange tokens: auto | "
                    "allgather_reducescatter | naive | low_latency");
    cmd->add_option("--nnodes", nnodes,
                    "Nodes that split the --tensor-parallel-size ranks evenly (node 0 serves)")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--node-rank", node_rank,
                    "This node's index; nodes other than 0 run headless, stepping with node 0")
        ->check(CLI::Range(0, 1023));
    cmd->add_option("--master-addr", master_addr, "Node 0's address, where the other nodes join");
    cmd->add_option("--master-port", master_port, "Node 0's port for the other nodes to join")
        ->check(CLI::Range(1, 65535));
  }

  void apply(ModelEngineOptions& mo) const {
    mo.device = device;
    mo.gpu_memory_utilization = gpu_memory_utilization;
    mo.enforce_eager = enforce_eager;
    if (async_scheduling >= 0) mo.engine.async_scheduling = async_scheduling == 1;
    mo.max_cudagraph_capture_size = max_cudagraph_capture_size;
    mo.tensor_parallel_cuda_graphs = tensor_parallel_cuda_graphs;
    mo.attention_backend = attention_backend;
    mo.moe_backend = moe_backend;
    mo.tensor_parallel_size = tensor_parallel_size;
    mo.enable_expert_parallel = enable_expert_parallel;
    mo.expert_placement = expert_placement;
    mo.data_parallel_size = data_parallel_size;
    mo.all2all_backend = all2all_backend;
    mo.nnodes = nnodes;
    mo.node_rank = node_rank;
    mo.master_addr = master_addr;
    mo.master_port = master_port;
  }

  // Runs this node's ranks headless until node 0 ends the run; the process's exit code.
  static int run_headless(const ModelEngineOptions& mo) {
    if (Status s = run_worker_node(mo); !s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
      return 1;
    }
    return 0;
  }
};

}  // namespace locus::cli

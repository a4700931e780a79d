// The device flags serve, generate and bench share (vLLM's names): --device,
// --gpu-memory-utilization, --enforce-eager, --max-cudagraph-capture-size,
// --attention-backend and --moe-backend.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "engine/model_engine.h"

namespace locus::cli {

struct DeviceCliOptions {
  std::string device = "auto";
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  int max_cudagraph_capture_size = 0;
  std::string attention_backend = "auto";
  std::string moe_backend = "auto";

  void add_to(CLI::App* cmd) {
    cmd->add_option("--device", device, "auto | cuda | cpu (auto: a GPU when there is one)")
        ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
    cmd->add_option("--gpu-memory-utilization", gpu_memory_utilization,
                    "Share of GPU memory for weights, activations and the KV cache")
        ->check(CLI::Range(0.01, 1.0));
    cmd->add_flag("--enforce-eager", enforce_eager, "Run every step eagerly (no CUDA graphs)");
    cmd->add_option("--max-cudagraph-capture-size", max_cudagraph_capture_size,
                    "Largest decode batch replayed from a CUDA graph (0 = max-num-seqs, <= 512)")
        ->check(CLI::Range(0, 4096));
    cmd->add_option("--attention-backend", attention_backend,
                    "auto | cuda_paged | cpu (auto: the device's fastest)");
    cmd->add_option("--moe-backend", moe_backend,
                    "auto | cuda_grouped | cpu (auto: the device's fastest)");
  }

  void apply(ModelEngineOptions& mo) const {
    mo.device = device;
    mo.gpu_memory_utilization = gpu_memory_utilization;
    mo.enforce_eager = enforce_eager;
    mo.max_cudagraph_capture_size = max_cudagraph_capture_size;
    mo.attention_backend = attention_backend;
    mo.moe_backend = moe_backend;
  }
};

}  // namespace locus::cli

// The memory roofline of a decode step: every byte the step must read from device memory
// (active weights once, each sequence's KV cache once) over the measured bandwidth. MoE decode
// is memory-bound at the batch sizes served interactively, so this is the floor a TPOT is
// compared against (DESIGN.md: "Roofline for batch-1 decode").
#pragma once

#include <cstdint>

#include "core/status.h"
#include "io/model_config.h"

namespace locus::bench {

struct DecodeBytes {
  double dense_weight_bytes = 0;  // attention, norms, router, shared experts, dense layers, lm_head
  double expert_weight_bytes = 0;      // routed experts expected to be active, all MoE layers
  double kv_bytes = 0;                 // K/V (or MLA latents) of every sequence, all layers
  double expected_active_experts = 0;  // per MoE layer
  double total() const { return dense_weight_bytes + expert_weight_bytes + kv_bytes; }
};

// Expected distinct experts hit when `tokens` tokens each pick `top_k` of `num_experts`
// uniformly: E * (1 - (1 - k/E)^T). Real routers are less uniform (fewer distinct experts).
double expected_active_experts(int64_t num_experts, int64_t top_k, int64_t tokens);

// Bytes one decode step of `batch` sequences of `context` tokens reads, with weights of
// `weight_bytes_per_element` bytes (2 = bf16) and KV entries of `kv_bytes_per_element`. The
// embedding table is not counted (a step reads only `batch` rows of it).
Expected<DecodeBytes> decode_step_bytes(const ModelConfig& config, int64_t batch, int64_t context,
                                        double weight_bytes_per_element = 2.0,
                                        double kv_bytes_per_element = 2.0);

}  // namespace locus::bench

// Host entry points of the mixture-of-experts kernels: routing, and the routed experts as
// align (expert-contiguous, block-aligned order, computed on the device) -> grouped gate/up GEMM
// with SiLU-and-mul -> grouped down GEMM -> weighted combine. No host synchronization and no
// allocation inside: every launch can be captured in a CUDA graph (scratch from `workspace`).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace locus::cuda {

enum class MoeScoring : int { kSoftmax = 0, kSigmoid = 1 };
enum class MoeTopk : int { kGreedy = 0, kGroupLimitedGreedy = 1, kNoauxTc = 2 };

// Same contract as Ops::moe_route (backend/ops.h): logits f32 [T, E] -> topk_ids i32 [T, k],
// topk_weights f32 [T, k], in descending order of the selection score; ties to the lower id.
// correction_bias f32 [E] or null. E <= 1024, k <= 32, E % n_group == 0.
struct MoeRouteArgs {
  const float* logits = nullptr;
  const float* correction_bias = nullptr;
  int32_t* topk_ids = nullptr;
  float* topk_weights = nullptr;
  int num_tokens = 0;
  int num_experts = 0;
  int top_k = 1;
  MoeScoring scoring = MoeScoring::kSoftmax;
  MoeTopk topk_method = MoeTopk::kGreedy;
  int n_group = 1;
  int topk_group = 1;
  bool renormalize = false;
  float routed_scaling_factor = 1.0f;
};
cudaError_t launch_moe_route(const MoeRouteArgs& args, cudaStream_t stream);
// Whether the routing kernels take these arguments (expert and group counts, top_k); when
// they do, returns the n_group the kernels use (1 for ungrouped routing) in *n_group.
bool moe_route_supported(const MoeRouteArgs& args, int* n_group);

// out[t] = sum_j topk_weights[t, j] * down_e(silu(gate_e(x[t])) * up_e(x[t])), e = topk_ids[t, j].
// Weights per expert, nn.Linear layout (row-major [out, in], bf16): gate_w[e], up_w[e]
// [inter, hidden], down_w[e] [hidden, inter]. The pointer arrays are device arrays of E pointers.
// x bf16 rows with stride x_row_stride elements; out bf16 [T, hidden] contiguous. The
// intermediate silu(g) * u is rounded to bf16 (as vLLM does); accumulation is f32. The sum over
// j runs in a fixed order (deterministic). hidden and inter are multiples of 8.
struct MoeExpertsArgs {
  const void* x = nullptr;
  int64_t x_row_stride = 0;
  const int32_t* topk_ids = nullptr;
  const float* topk_weights = nullptr;
  const void* const* gate_w = nullptr;
  const void* const* up_w = nullptr;
  const void* const* down_w = nullptr;
  void* out = nullptr;
  int num_tokens = 0;
  int num_experts = 0;
  int top_k = 1;
  int hidden = 0;
  int inter = 0;
  void* workspace = nullptr;  // at least moe_experts_workspace_bytes(*this) bytes
  size_t workspace_bytes = 0;
};

// Scratch for the sorted order, the intermediate activations and the per-(token, j) outputs,
// from num_tokens, num_experts, top_k, hidden and inter only (graph replays with fewer tokens
// fit in the scratch of the captured size).
size_t moe_experts_workspace_bytes(const MoeExpertsArgs& args);

// Returns cudaErrorInvalidValue for unsupported shapes or a too-small workspace.
cudaError_t launch_moe_experts(const MoeExpertsArgs& args, cudaStream_t stream);

// Expert parallelism: out[i] = local_of[ids[i]] (ids outside [0, num_experts) -> -1) for i < n,
// where local_of[e] = e for the experts this rank holds and -1 for the others, so that the
// expert kernels above skip the assignments of experts held by other ranks. out may be ids.
cudaError_t launch_moe_local_ids(const int32_t* ids, const int32_t* local_of, int n,
                                 int num_experts, int32_t* out, cudaStream_t stream);

// Ops::moe_dispatch_plan: the blocks of `capacity` slots each of `ranks` ranks receives from
// this one (token order within a block), and each token's slot per rank (-1: not sent there).
// ids/weights [tokens, k], owner [experts] (rank of each expert; ids outside [0, experts) go
// nowhere); send_index [ranks * capacity], send_ids / send_weights [ranks * capacity, k],
// combine_index [ranks, tokens]. capacity >= tokens.
cudaError_t launch_moe_dispatch_plan(const int32_t* ids, const float* weights, int tokens, int k,
                                     const int32_t* owner, int experts, int ranks, int capacity,
                                     int32_t* send_index, int32_t* send_ids, float* send_weights,
                                     int32_t* combine_index, cudaStream_t stream);

}  // namespace locus::cuda

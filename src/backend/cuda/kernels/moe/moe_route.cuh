// Router kernel: one warp per token turns f32 logits into top-k expert ids and weights exactly
// as Ops::moe_route (and the CPU twin, backend/cpu/moe.cc) defines them, in f32. Each warp
// works in its own slice of shared memory and never touches another token's data. The kernel
// is static: only moe_route.cu includes this header.
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include <climits>
#include <cstdint>

#include "backend/cuda/kernels/moe/moe_launch.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace locus::cuda::moe {

constexpr int kRouteWarpsPerBlock = 4;

// Per-warp scratch in floats: scores[E], choice[E], group_scores[n_group]. At E = n_group =
// 1024 four warps need exactly 48 KB, the most a kernel gets without opting in.
__host__ __device__ inline int route_scratch_floats(int num_experts, int n_group) {
  return 2 * num_experts + n_group;
}

namespace route_detail {

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Index of the largest of values[0, count) for the whole warp; lane l scans l, l + 32, ...
// Ties go to the lower index, as the CPU's stable sort does. A taken entry is marked NaN and
// never wins (every comparison with NaN is false); -inf entries still can, so a top-k returns
// k distinct indices even when fewer than k finite values remain, again like the CPU.
__device__ __forceinline__ int warp_argmax(const float* values, int count, int lane) {
  float best = -CUDART_INF_F;
  int best_index = INT_MAX;
  for (int i = lane; i < count; i += 32) {
    const float v = values[i];
    if (v > best || (v == best && i < best_index)) {
      best = v;
      best_index = i;
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
    if (other > best || (other == best && other_index < best_index)) {
      best = other;
      best_index = other_index;
    }
  }
  return best_index;
}

}  // namespace route_detail

// Softmax over one token's experts, one warp (lane l takes e = l, l + 32, ...): sets max_logit
// and returns the sum of expf(logit(e) - max_logit), both on every lane, and hands each term to
// visit(e, term). The folded router (gemv.cuh's fold_weights) shares it and routed_weight with
// route_token, so that their weights round alike.
template <class Logit, class Visit>
__device__ __forceinline__ float softmax_terms(int num_experts, int lane, Logit logit,
                                               float& max_logit, Visit visit) {
  max_logit = -CUDART_INF_F;
  for (int e = lane; e < num_experts; e += 32)
    max_logit = fmaxf(max_logit, logit(e));
  max_logit = route_detail::warp_max(max_logit);
  float sum = 0.0f;
  for (int e = lane; e < num_experts; e += 32) {
    const float p = expf(logit(e) - max_logit);
    visit(e, p);
    sum += p;
  }
  return route_detail::warp_sum(sum);
}

// A picked expert's weight from its score and the sum of the picked scores (in pick order).
__device__ __forceinline__ float routed_weight(float score, float picked_sum, bool renormalize,
                                               bool sigmoid, float scale) {
  // DeepSeek-V3 guards the sigmoid sum with +1e-20; softmax sums are never near zero.
  if (renormalize) score /= sigmoid ? picked_sum + 1e-20f : picked_sum;
  return score * scale;
}

// Routes one token with one warp: `scratch` holds route_scratch_floats(E, n_group) floats that
// only this warp touches. Shared by the router kernel below and kernels that route in their
// epilogue (the router GEMV).
__device__ inline void route_token(const MoeRouteArgs& args, int token, float* scratch) {
  using namespace route_detail;
  const int lane = threadIdx.x % 32;
  const int num_experts = args.num_experts;
  float* scores = scratch;
  float* choice = scores + num_experts;
  float* group_scores = choice + num_experts;
  // Read through L2 only: a fused caller's logits were just written by other CTAs.
  const float* logits = args.logits + static_cast<int64_t>(token) * num_experts;
  // Lane l owns experts l, l + 32, ...: it alone writes them until the __syncwarp below.
  if (args.scoring == MoeScoring::kSoftmax) {
    float max_logit;
    const float sum = softmax_terms(
        num_experts, lane, [&](int e) { return __ldcg(logits + e); }, max_logit,
        [&](int e, float p) { scores[e] = p; });
    for (int e = lane; e < num_experts; e += 32)
      scores[e] /= sum;
  } else {
    for (int e = lane; e < num_experts; e += 32)
      scores[e] = 1.0f / (1.0f + expf(-__ldcg(logits + e)));
  }
  // The correction bias steers which experts are chosen, never their weights.
  for (int e = lane; e < num_experts; e += 32)
    choice[e] = args.correction_bias != nullptr ? scores[e] + args.correction_bias[e] : scores[e];
  __syncwarp();

  if (args.topk_method != MoeTopk::kGreedy && args.n_group > 1) {
    const int group_size = num_experts / args.n_group;
    const bool top2 = args.topk_method == MoeTopk::kNoauxTc;
    for (int g = lane; g < args.n_group; g += 32) {
      // group_limited_greedy scores a group by its best expert, noaux_tc by its best two (a
      // repeated maximum counts twice, as in the CPU's sorted members[0] + members[1]).
      float first = -CUDART_INF_F;
      float second = -CUDART_INF_F;
      for (int i = 0; i < group_size; ++i) {
        const float v = choice[g * group_size + i];
        if (v > first) {
          second = first;
          first = v;
        } else if (v > second) {
          second = v;
        }
      }
      group_scores[g] = top2 ? first + second : first;
    }
    __syncwarp();
    // Keep the topk_group best groups: each pick is marked NaN, so afterwards NaN = kept.
    for (int i = 0; i < args.topk_group; ++i) {
      const int g = warp_argmax(group_scores, args.n_group, lane);
      if (g % 32 == lane) group_scores[g] = CUDART_NAN_F;
      __syncwarp();
    }
    // Experts of dropped groups can never win (-inf, as DeepSeek's reference and vLLM do).
    for (int e = lane; e < num_experts; e += 32) {
      if (!isnan(group_scores[e / group_size])) choice[e] = -CUDART_INF_F;
    }
    __syncwarp();
  }

  // Top-k, best first. Lane j keeps pick j; every lane accumulates the same sum in the same
  // order as the CPU (j = 0, 1, ...), so renormalization rounds identically.
  int my_id = 0;
  float my_weight = 0.0f;
  float sum = 0.0f;
  for (int j = 0; j < args.top_k; ++j) {
    const int e = warp_argmax(choice, num_experts, lane);
    const float weight = scores[e];
    sum += weight;
    if (lane == j) {
      my_id = e;
      my_weight = weight;
    }
    if (e % 32 == lane) choice[e] = CUDART_NAN_F;
    __syncwarp();
  }
  if (lane < args.top_k) {
    const float weight =
        routed_weight(my_weight, sum, args.renormalize, args.scoring == MoeScoring::kSigmoid,
                      args.routed_scaling_factor);
    const int64_t out = static_cast<int64_t>(token) * args.top_k + lane;
    args.topk_ids[out] = my_id;
    args.topk_weights[out] = weight;
  }
}

static __global__ void __launch_bounds__(kRouteWarpsPerBlock * 32)
    moe_route_kernel(const MoeRouteArgs args) {
  extern __shared__ float route_scratch[];
  pdl_launch_dependents();
  const int warp = threadIdx.x / 32;
  const int token = blockIdx.x * kRouteWarpsPerBlock + warp;
  if (token >= args.num_tokens) return;  // no block-wide barrier below, so this is safe
  route_token(args, token,
              route_scratch + warp * route_scratch_floats(args.num_experts, args.n_group));
}

}  // namespace locus::cuda::moe

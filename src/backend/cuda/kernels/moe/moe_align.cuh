// The data-movement ends of the experts chain: align (topk_ids -> expert-contiguous,
// BLOCK_M-aligned order of assignments, built on the device) and combine (each token's weighted
// expert outputs summed in j order into bf16). Both are deterministic: no atomic decides an
// order or a sum. The kernels are static: only moe_experts.cu includes this header.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace locus::cuda::moe {

// Warps of the single align CTA: as many as keep the per-warp expert counters within 32 KB.
__host__ __device__ inline int align_warps(int num_experts) {
  const int warps = 8192 / num_experts;
  return warps < 1 ? 1 : (warps > 32 ? 32 : warps);
}
__host__ __device__ inline size_t align_smem_bytes(int num_experts) {
  return (static_cast<size_t>(align_warps(num_experts)) * num_experts + 2 * (num_experts + 1)) *
         sizeof(int);
}

namespace align_detail {
constexpr int kUnroll = 4;  // id loads in flight per lane before the first is used
}

// One CTA of align_warps(E) warps. Warp w owns the contiguous assignment range
// [w * span, (w + 1) * span) and walks it 32 at a time in index order; within a step, lanes
// with the same expert rank themselves by lane (__match_any_sync). Pass 1 counts per warp and
// expert; the counts become per-expert starts (each expert's rows padded to block_m) and
// per-warp offsets; pass 2 repeats the walk and writes each assignment at
// start[e] + (earlier warps' count of e) + (own earlier count of e) + rank. So within an
// expert, assignments appear in increasing index order, and the result never depends on timing.
//
// Outputs: sorted_rows[0, total padded rows) = assignment index t * top_k + j, or -1 for
// padding; block_expert[0, max_blocks) = expert of each block_m block, -1 past the used ones.
// Ids outside [0, num_experts) are dropped (they contribute nothing, like expert parallelism's
// -1 for experts on another rank).
static __global__ void __launch_bounds__(1024)
    moe_align_kernel(const int32_t* __restrict__ topk_ids, int num_assignments, int num_experts,
                     int block_m, int max_blocks, int32_t* __restrict__ sorted_rows,
                     int32_t* __restrict__ block_expert) {
  using align_detail::kUnroll;
  extern __shared__ int align_smem[];
  const int num_warps = blockDim.x / 32;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  int* warp_counts = align_smem;                           // [num_warps][num_experts]
  int* row_start = warp_counts + num_warps * num_experts;  // [num_experts + 1]
  int* block_start = row_start + num_experts + 1;          // [num_experts + 1]
  int* my_counts = warp_counts + warp * num_experts;

  for (int i = tid; i < num_warps * num_experts; i += blockDim.x)
    warp_counts[i] = 0;
  __syncthreads();

  // Whole 32-wide steps per warp, so each step is one aligned, coalesced load per unroll slot.
  const int span = ((num_assignments + num_warps - 1) / num_warps + 31) / 32 * 32;
  const int begin = warp * span;
  const int end = min(num_assignments, begin + span);
  const unsigned lanes_below = (1u << lane) - 1u;

  // Pass 1: per-warp counts.
  for (int base = begin; base < end; base += 32 * kUnroll) {
    int ids[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int a = base + u * 32 + lane;
      ids[u] = a < end ? topk_ids[a] : -1;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const bool valid = ids[u] >= 0 && ids[u] < num_experts;
      const unsigned peers = __match_any_sync(0xffffffffu, valid ? ids[u] : -1);
      if (valid && lane == __ffs(peers) - 1) my_counts[ids[u]] += __popc(peers);
      __syncwarp();  // the next step's leader for this expert may be another lane
    }
  }
  __syncthreads();

  // Per expert: total count, and each warp's count turned into the count of earlier warps.
  for (int e = tid; e < num_experts; e += blockDim.x) {
    int running = 0;
    for (int w = 0; w < num_warps; ++w) {
      const int count = warp_counts[w * num_experts + e];
      warp_counts[w * num_experts + e] = running;
      running += count;
    }
    row_start[e] = running;  // the total for now; the scan below turns it into the start
  }
  __syncthreads();

  // Exclusive scan of the padded counts over experts: warp 0, each lane a contiguous run.
  if (warp == 0) {
    const int per_lane = (num_experts + 31) / 32;
    const int lo = lane * per_lane;
    const int hi = min(num_experts, lo + per_lane);
    int local = 0;
    for (int e = lo; e < hi; ++e)
      local += (row_start[e] + block_m - 1) / block_m * block_m;
    int inclusive = local;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += v;
    }
    int start = inclusive - local;
    for (int e = lo; e < hi; ++e) {
      const int count = row_start[e];
      row_start[e] = start;
      block_start[e] = start / block_m;
      start += (count + block_m - 1) / block_m * block_m;
    }
    if (lane == 31) {
      row_start[num_experts] = inclusive;
      block_start[num_experts] = inclusive / block_m;
    }
  }
  __syncthreads();

  const int total_rows = row_start[num_experts];
  const int total_blocks = block_start[num_experts];
  for (int p = tid; p < total_rows; p += blockDim.x)
    sorted_rows[p] = -1;  // padding; pass 2 overwrites the real rows after the barrier
  for (int b = tid; b < max_blocks; b += blockDim.x) {
    int expert = -1;
    if (b < total_blocks) {
      // The last expert whose first block is <= b (experts without rows have empty ranges).
      int lo = 0;
      int hi = num_experts - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (block_start[mid] <= b) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      expert = lo;
    }
    block_expert[b] = expert;
  }
  __syncthreads();  // orders the -1 fill before pass 2's writes to the same rows

  // Pass 2: the same walk, writing each assignment at its place.
  for (int base = begin; base < end; base += 32 * kUnroll) {
    int ids[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int a = base + u * 32 + lane;
      ids[u] = a < end ? topk_ids[a] : -1;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = ids[u];
      const bool valid = e >= 0 && e < num_experts;
      const unsigned peers = __match_any_sync(0xffffffffu, valid ? e : -1);
      if (valid) {
        const int rank = __popc(peers & lanes_below);
        sorted_rows[row_start[e] + my_counts[e] + rank] = base + u * 32 + lane;
      }
      __syncwarp();  // every peer has read my_counts[e] before the leader advances it
      if (valid && lane == __ffs(peers) - 1) my_counts[e] += __popc(peers);
      __syncwarp();
    }
  }
}

// out[t] = bf16(sum over j = 0 .. top_k - 1, in that order, of y[t * top_k + j]); y rows are
// already scaled by their routing weight. One thread per 4 consecutive columns.
static __global__ void moe_combine_kernel(const float* __restrict__ y,
                                          const int32_t* __restrict__ topk_ids, int num_experts,
                                          int num_tokens, int top_k, int hidden,
                                          __nv_bfloat16* __restrict__ out) {
  const int vecs_per_row = hidden / 4;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(num_tokens) * vecs_per_row) return;
  const int64_t token = i / vecs_per_row;
  const int column = static_cast<int>(i % vecs_per_row) * 4;
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int j = 0; j < top_k; ++j) {
    const int64_t assignment = token * top_k + j;
    const int expert = topk_ids[assignment];
    if (expert < 0 || expert >= num_experts) continue;  // dropped by align: y row never written
    const float4 v = *reinterpret_cast<const float4*>(y + assignment * hidden + column);
    sum.x += v.x;
    sum.y += v.y;
    sum.z += v.z;
    sum.w += v.w;
  }
  __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(out + token * hidden + column);
  dst[0] = __floats2bfloat162_rn(sum.x, sum.y);
  dst[1] = __floats2bfloat162_rn(sum.z, sum.w);
}

}  // namespace locus::cuda::moe

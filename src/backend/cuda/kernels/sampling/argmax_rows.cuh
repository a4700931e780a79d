// Greedy rows' argmax split over many CTAs. The sampling kernel gives each row one CTA, which at
// a decode batch of a few rows reads a 150k-entry row from one SM (~10 µs) while the rest of the
// GPU idles; here each CTA takes a slice of kSliceLen logits and the last CTA of a row to finish
// merges the slices' winners. The order is sample_rows_kernel's block_argmax: largest value,
// ties to the lowest id, NaN never wins, a row with no winner gives token 0.
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include <climits>
#include <cstdint>

#include "backend/cuda/kernels/last_block.cuh"
#include "backend/cuda/kernels/sampling/sampling_launch.h"

namespace locus::cuda::argmax {
namespace {

constexpr int kThreads = 256;
constexpr int kVecPerThread = 4;  // float4 loads in flight per thread
constexpr int kSliceLen = kThreads * kVecPerThread * 4;
constexpr int kWarps = kThreads / 32;

struct Best {
  float value;
  int id;
};

__device__ __forceinline__ void take(Best& b, float v, int i) {
  if (v > b.value || (v == b.value && i < b.id)) b = Best{v, i};
}

__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, b.value, offset);
    const int i = __shfl_xor_sync(0xffffffffu, b.id, offset);
    take(b, v, i);
  }
  return b;
}

// The CTA's best over its threads' candidates; valid in thread 0.
__device__ Best block_best(Best b) {
  __shared__ Best warps[kWarps];
  b = warp_best(b);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = b;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w)
      take(b, warps[w].value, warps[w].id);
  }
  return b;
}

// grid (slices, rows): counters[rows] (see launch_argmax_rows), partials[rows][slices].
__global__ void __launch_bounds__(kThreads)
    argmax_rows_kernel(const float* logits, int64_t ld, int vocab, int* counters, Best* partials,
                       int32_t* out) {
  const int row = static_cast<int>(blockIdx.y);
  const int slices = static_cast<int>(gridDim.x);
  const float* r = logits + static_cast<int64_t>(row) * ld;
  const int begin = static_cast<int>(blockIdx.x) * kSliceLen;
  const int end = min(vocab, begin + kSliceLen);
  Best b{-CUDART_INF_F, INT_MAX};
  // Scalar head up to 16-byte alignment, float4 body, scalar tail.
  const int misalign =
      static_cast<int>((reinterpret_cast<uintptr_t>(r + begin) / sizeof(float)) & 3);
  const int body_begin = min(end, begin + ((4 - misalign) & 3));
  const int body = (end - body_begin) / 4;
  const int t = static_cast<int>(threadIdx.x);
  if (begin + t < body_begin) take(b, r[begin + t], begin + t);
  const float4* vec = reinterpret_cast<const float4*>(r + body_begin);
  float4 v[kVecPerThread];
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int q = t + j * kThreads;
    v[j] = q < body ? __ldcs(vec + q)
                    : make_float4(CUDART_NAN_F, CUDART_NAN_F, CUDART_NAN_F, CUDART_NAN_F);
  }
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int i = body_begin + 4 * (t + j * kThreads);
    take(b, v[j].x, i);
    take(b, v[j].y, i + 1);
    take(b, v[j].z, i + 2);
    take(b, v[j].w, i + 3);
  }
  const int tail = body_begin + 4 * body + t;
  if (tail < end) take(b, r[tail], tail);
  b = block_best(b);
  Best* mine = partials + static_cast<int64_t>(row) * slices;
  if (threadIdx.x == 0) mine[blockIdx.x] = b;
  if (!last_to_arrive(counters + row, slices, [] { __syncthreads(); })) return;
  Best m{-CUDART_INF_F, INT_MAX};
  for (int s = t; s < slices; s += kThreads)
    take(m, mine[s].value, mine[s].id);
  m = block_best(m);
  if (threadIdx.x == 0) out[row] = m.id == INT_MAX ? 0 : m.id;
}

}  // namespace
}  // namespace locus::cuda::argmax

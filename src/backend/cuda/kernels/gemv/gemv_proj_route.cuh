// The attention's output projection with the MoE router as its tail, in one launch (decode).
// In a batch-1 layer the router launch is a short chain after the projection's: wait for the
// projection's grid, stage residual + delta, the router rows, the last-CTA handoff, routing.
// Here the projection's first R CTAs (R = the router's 8-row units) each also own one router
// unit: its rows are copied into shared memory before pdl_wait, and once every CTA has published
// its projection rows (a counter; the other CTAs never wait, so the grid needs no
// co-residency), they run the pre-norm from L2, the router rows and the last of them routes.
// The arithmetic is dense_gemv_stream_kernel's for both halves, so y, the pre-norm's outputs,
// the logits and the routing are bit-identical to the two launches.
#pragma once

#include "backend/cuda/kernels/gemv/gemv_stream.cuh"

namespace locus::cuda::gemv {
namespace {

__device__ __forceinline__ void release_add(int* counter) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(counter) : "memory");
#endif
}

__device__ __forceinline__ int acquire_load(const int* counter) {
  int v = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
#endif
  return v;
}

// y [M, n] = bf16(x W^T) (W bf16 [n, k], no bias); then, as dense_gemv_stream_kernel<M, true,
// true> with `pre` (pre.delta == y): residual_out / normed, logits f32 [M, E] = normed Wr^T
// (Wr bf16 [E, n]; route.logits == logits) and route's picks. Shared memory: barriers, x (M *
// max(k, n) bf16, reused for the normalized rows), one router unit (8 rows of n), then the
// projection's stages; the router unit's barrier is the last `full` slot (stages < kMaxStages).
// *arrived and *counter are zero at launch and left zero.
template <int M>
__global__ void __launch_bounds__(kStreamThreads, 1)
    proj_route_stream_kernel(const bf16* __restrict__ x, int64_t x_stride,
                             const bf16* __restrict__ w, bf16* y, int n, int k, int stages,
                             const bf16* __restrict__ wr, float* logits, MoeRouteArgs route,
                             int* arrived, int* counter, GemvAddRmsNorm pre, int poll_ns) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int chunks = k / 8;
  const int n_chunks = n / 8;
  const size_t xs_bytes = round_up_128(static_cast<size_t>(M) * (k > n ? k : n) * sizeof(bf16));
  const size_t wr_bytes = static_cast<size_t>(kUnitRows) * n * sizeof(bf16);
  const StreamSmem s = stream_smem(smem, xs_bytes + wr_bytes);
  unsigned char* wr_s = reinterpret_cast<unsigned char*>(s.xs) + xs_bytes;
  uint64_t* wr_full = s.full + (kMaxStages - 1);
  const size_t stage_bytes = static_cast<size_t>(kUnitRows) * k * sizeof(bf16);
  const int experts = route.num_experts;
  const int router_ctas = (experts + kUnitRows - 1) / kUnitRows;
  const bool router_cta = static_cast<int>(blockIdx.x) < router_ctas;
  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i) {
      bulk::mbar_init(s.full + i, 1);
      bulk::mbar_init(s.empty + i, kConsumerWarps);
    }
    bulk::mbar_init(wr_full, 1);
    bulk::mbar_init_fence();
  }
  __syncthreads();
  pdl_launch_dependents();
  int64_t u0, u1;
  cta_units((n + kUnitRows - 1) / kUnitRows, u0, u1);
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  if (warp == kConsumerWarps) {
    if (lane != 0) return;
    const uint64_t policy = bulk::evict_first_policy();
    // The router unit goes out behind the projection's first stages: those are needed first.
    auto copy_router_unit = [&] {
      if (!router_cta) return;
      const int row0 = static_cast<int>(blockIdx.x) * kUnitRows;
      const int rows = experts - row0 < kUnitRows ? experts - row0 : kUnitRows;
      bulk::mbar_arrive_expect_tx(wr_full, static_cast<uint32_t>(rows * n * sizeof(bf16)));
      for (int q = 0; q < rows; ++q)
        bulk::copy_g2s(wr_s + static_cast<size_t>(q) * n * sizeof(bf16),
                       wr + static_cast<int64_t>(row0 + q) * n,
                       static_cast<uint32_t>(n * sizeof(bf16)), wr_full, policy);
    };
    const int64_t units = u1 - u0;
    const int64_t first = units < stages ? units : stages;
    for (int64_t i = 0; i < units; ++i) {
      if (i == first) copy_router_unit();
      acquire_stage(s, i, stages);
      const int row0 = static_cast<int>((u0 + i) * kUnitRows);
      const int rows = n - row0 < kUnitRows ? n - row0 : kUnitRows;
      uint64_t* bar = s.full + i % stages;
      bulk::mbar_arrive_expect_tx(bar, static_cast<uint32_t>(rows * k * sizeof(bf16)));
      unsigned char* dst = s.stage0 + (i % stages) * stage_bytes;
      for (int q = 0; q < rows; ++q)
        bulk::copy_g2s(dst + static_cast<size_t>(q) * k * sizeof(bf16),
                       w + static_cast<int64_t>(row0 + q) * k,
                       static_cast<uint32_t>(k * sizeof(bf16)), bar, policy);
    }
    if (first == units) copy_router_unit();
    return;
  }
  auto sync = [] { bulk::named_sync(kConsumerWarps * 32); };
  NormWeights nw{};
  if (router_cta) nw = preload_norm_weight(pre, n);
  pdl_wait();
  for (int m = 0; m < M; ++m)
    for (int c = threadIdx.x; c < chunks; c += kConsumerWarps * 32)
      s.xs[m * chunks + c] =
          *reinterpret_cast<const uint4*>(x + m * x_stride + static_cast<int64_t>(c) * 8);
  sync();
  for (int64_t i = 0; i < u1 - u0; ++i) {
    const int row = static_cast<int>((u0 + i) * kUnitRows) + warp;
    wait_stage(s, i, stages);
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m)
      acc[m] = 0.0f;
    if (row < n) {
      const auto* wrow = reinterpret_cast<const uint4*>(s.stage0 + (i % stages) * stage_bytes +
                                                        static_cast<size_t>(warp) * k * 2);
#pragma unroll 4
      for (int c = lane; c < chunks; c += 32) {
        const uint4 wv = wrow[c];
#pragma unroll
        for (int m = 0; m < M; ++m)
          acc[m] += dot8(wv, s.xs[m * chunks + c]);
      }
    }
    release_stage(s, i, stages);
    if (row >= n) continue;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[m]);
      if (lane == 0) y[static_cast<int64_t>(m) * n + row] = __float2bfloat16(v);
    }
  }
  // Publish this CTA's rows: the barrier orders every warp's stores before thread 0's release.
  sync();
  if (threadIdx.x == 0) release_add(arrived);
  if (!router_cta) return;
  if (threadIdx.x == 0) {
    while (acquire_load(arrived) < static_cast<int>(gridDim.x)) {
      if (poll_ns > 0) __nanosleep(poll_ns);
    }
  }
  sync();
  // Every projection row is in y: the pre-norm of residual + y into xs (CTA 0 writes
  // residual_out and normed), then this CTA's router rows from shared memory.
  add_rms_norm_rows<M, true>(pre, nw, s.xs, n, sync);
  sync();
  bulk::mbar_wait(wr_full, 0);
  const int row = static_cast<int>(blockIdx.x) * kUnitRows + warp;
  if (row < experts) {
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m)
      acc[m] = 0.0f;
    const auto* wrow = reinterpret_cast<const uint4*>(wr_s + static_cast<size_t>(warp) * n * 2);
#pragma unroll 4
    for (int c = lane; c < n_chunks; c += 32) {
      const uint4 wv = wrow[c];
#pragma unroll
      for (int m = 0; m < M; ++m)
        acc[m] += dot8(wv, s.xs[m * n_chunks + c]);
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[m]);
      if (lane == 0) logits[static_cast<int64_t>(m) * experts + row] = v;
    }
  }
  if (!last_to_arrive(counter, router_ctas, sync)) return;
  // Every router CTA is past its wait on *arrived, and every CTA has counted itself in.
  if (threadIdx.x == 0) *arrived = 0;
  // Every stage has been consumed: its shared memory is free for the routing scratch.
  float* scratch =
      reinterpret_cast<float*>(s.stage0) + warp * moe::route_scratch_floats(experts, route.n_group);
  for (int t = warp; t < M; t += kConsumerWarps)
    moe::route_token(route, t, scratch);
}

}  // namespace
}  // namespace locus::cuda::gemv

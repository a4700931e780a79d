// The attention's output projection and a folded MoE router in one launch (decode,
// CudaBackendOptions::fold_router). For softmax routing without a bias the router's choice depends
// on the post-attention norm only through a positive scale: with s = residual + o, o = Wo a,
//   logits = Wr (g * s) / rms(s) = (Wg residual + Mf a) / rms(s),  Wg = Wr * g, Mf = Wg Wo,
// so the top-k ids follow from raw = Wg residual + Mf a, which needs only what the projection
// itself reads. The router units therefore run beside the projection's rows instead of after
// them; the expert gate_up launch applies 1 / rms(s) when it turns raw into weights (see
// moe_gate_up_gemv_kernel's fold arguments), and the expert launches pick the top-k from raw
// themselves, so no CTA here waits for another. Numerically this differs from the unfolded router
// by rounding only (Mf is rounded to bf16 once, where the unfolded path rounds o and the
// normed row).
#pragma once

#include "backend/cuda/kernels/gemv/gemv_stream.cuh"

namespace locus::cuda::gemv {
namespace {

constexpr int kFoldExperts = kConsumerWarps / 2;  // experts per router CTA: two warps each

// y [M, n] = bf16(x W^T) (W bf16 [n, k]) as dense_gemv_stream_kernel, and f's raw logits. CTA
// b < ceil(E / 4) also owns experts [4b, 4b + 4): their Mf and Wg rows are copied into shared
// memory first (before pdl_wait) and computed right after the wait, before the CTA's projection
// rows. Shared memory: barriers, x (M * k), residual (M * n), the router unit, then the stages;
// the router unit's barrier is the last `full` slot (stages < kMaxStages).
template <int M>
__global__ void __launch_bounds__(kStreamThreads, 1)
    fold_route_stream_kernel(const bf16* __restrict__ x, int64_t x_stride,
                             const bf16* __restrict__ w, bf16* __restrict__ y, int n, int k,
                             int stages, FoldRouteArgs f) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ float fold_part[kConsumerWarps][M];
  const int chunks = k / 8;
  const int n_chunks = n / 8;
  const size_t xs_bytes = round_up_128(static_cast<size_t>(M) * k * sizeof(bf16));
  const size_t rs_bytes = round_up_128(static_cast<size_t>(M) * n * sizeof(bf16));
  const size_t fr_row = static_cast<size_t>(k + n) * sizeof(bf16);
  const StreamSmem s = stream_smem(smem, xs_bytes + rs_bytes + kFoldExperts * fr_row);
  auto* rs = reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(s.xs) + xs_bytes);
  unsigned char* fr = reinterpret_cast<unsigned char*>(s.xs) + xs_bytes + rs_bytes;
  uint64_t* fr_full = s.full + (kMaxStages - 1);
  const int router_ctas = (f.experts + kFoldExperts - 1) / kFoldExperts;
  const bool router_cta = static_cast<int>(blockIdx.x) < router_ctas;
  const int e0 = static_cast<int>(blockIdx.x) * kFoldExperts;
  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i) {
      bulk::mbar_init(s.full + i, 1);
      bulk::mbar_init(s.empty + i, kConsumerWarps);
    }
    bulk::mbar_init(fr_full, 1);
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
    if (router_cta) {  // first: the router unit is what the CTA computes first
      const int rows = f.experts - e0 < kFoldExperts ? f.experts - e0 : kFoldExperts;
      bulk::mbar_arrive_expect_tx(fr_full, static_cast<uint32_t>(rows * fr_row));
      for (int q = 0; q < rows; ++q) {
        unsigned char* dst = fr + q * fr_row;
        bulk::copy_g2s(dst, static_cast<const bf16*>(f.mf) + static_cast<int64_t>(e0 + q) * k,
                       static_cast<uint32_t>(k * sizeof(bf16)), fr_full, policy);
        bulk::copy_g2s(dst + static_cast<size_t>(k) * sizeof(bf16),
                       static_cast<const bf16*>(f.wg) + static_cast<int64_t>(e0 + q) * n,
                       static_cast<uint32_t>(n * sizeof(bf16)), fr_full, policy);
      }
    }
    GemvSegments one;
    one.seg[0].w = w;
    one.seg[0].rows = n;
    one.count = 1;
    produce_dense_units(s, one, n, k, u0, u1, stages, policy);
    return;
  }
  auto sync = [] { bulk::named_sync(kConsumerWarps * 32); };
  pdl_wait();
  // Past L1: the attention output and the residual come from this step's earlier kernels.
  for (int m = 0; m < M; ++m)
    for (int c = threadIdx.x; c < chunks; c += kConsumerWarps * 32)
      s.xs[m * chunks + c] =
          __ldcg(reinterpret_cast<const uint4*>(x + m * x_stride + static_cast<int64_t>(c) * 8));
  if (router_cta) {
    for (int m = 0; m < M; ++m)
      for (int c = threadIdx.x; c < n_chunks; c += kConsumerWarps * 32)
        rs[m * n_chunks + c] = __ldcg(reinterpret_cast<const uint4*>(
            static_cast<const bf16*>(f.residual) + static_cast<int64_t>(m) * n +
            static_cast<int64_t>(c) * 8));
  }
  sync();
  if (router_cta) {
    bulk::mbar_wait(fr_full, 0);
    const int q = warp >> 1;
    const bool wg_part = (warp & 1) != 0;
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m)
      acc[m] = 0.0f;
    if (e0 + q < f.experts) {
      const int len = wg_part ? n_chunks : chunks;
      const auto* row =
          reinterpret_cast<const uint4*>(fr + q * fr_row + (wg_part ? k * sizeof(bf16) : 0));
      const uint4* xv = wg_part ? rs : s.xs;
#pragma unroll 4
      for (int c = lane; c < len; c += 32) {
        const uint4 wv = row[c];
#pragma unroll
        for (int m = 0; m < M; ++m)
          acc[m] += dot8(wv, xv[m * len + c]);
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[m]);
      if (lane == 0) fold_part[warp][m] = v;
    }
    sync();
    if (threadIdx.x < kFoldExperts * M) {
      const int qe = threadIdx.x % kFoldExperts;
      const int m = threadIdx.x / kFoldExperts;
      if (e0 + qe < f.experts)
        f.logits[static_cast<int64_t>(m) * f.experts + e0 + qe] =
            fold_part[2 * qe][m] + fold_part[2 * qe + 1][m];
    }
  }
  for (int64_t i = 0; i < u1 - u0; ++i) {
    const int row = static_cast<int>((u0 + i) * kUnitRows) + warp;
    float acc[M];
    consume_dense_unit<M>(s, i, stages, k, row < n, acc);
    if (row >= n) continue;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[m]);
      if (lane == 0) y[static_cast<int64_t>(m) * n + row] = __float2bfloat16(v);
    }
  }
}

// Mf [E, k] = bf16((Wr * g) Wo) with the products in f32, and Wg [E, n] = bf16(Wr * g); Wr
// bf16 [E, n], g f32 [n], Wo bf16 [n, k]. Block (x, y): columns [256x, 256x + 256) of experts
// [8y, 8y + 8). Runs once per layer when the folded weights are made.
constexpr int kFoldBuildExperts = 8;
constexpr int kFoldBuildTile = 512;
__global__ void __launch_bounds__(256)
    fold_router_weights_kernel(const bf16* __restrict__ wr, const float* __restrict__ g,
                               const bf16* __restrict__ wo, bf16* __restrict__ mf,
                               bf16* __restrict__ wg, int experts, int n, int k) {
  __shared__ float wrg[kFoldBuildExperts][kFoldBuildTile];
  const int col = static_cast<int>(blockIdx.x) * 256 + static_cast<int>(threadIdx.x);
  const int e0 = static_cast<int>(blockIdx.y) * kFoldBuildExperts;
  float acc[kFoldBuildExperts] = {};
  for (int j0 = 0; j0 < n; j0 += kFoldBuildTile) {
    const int tile = n - j0 < kFoldBuildTile ? n - j0 : kFoldBuildTile;
    for (int i = threadIdx.x; i < kFoldBuildExperts * kFoldBuildTile; i += 256) {
      const int q = i / kFoldBuildTile, jj = i % kFoldBuildTile;
      float v = 0.0f;
      if (e0 + q < experts && jj < tile) {
        v = __bfloat162float(wr[static_cast<int64_t>(e0 + q) * n + j0 + jj]) * g[j0 + jj];
        if (blockIdx.x == 0) wg[static_cast<int64_t>(e0 + q) * n + j0 + jj] = __float2bfloat16(v);
      }
      wrg[q][jj] = v;
    }
    __syncthreads();
    if (col < k) {
      for (int jj = 0; jj < tile; ++jj) {
        const float o = __bfloat162float(wo[static_cast<int64_t>(j0 + jj) * k + col]);
#pragma unroll
        for (int q = 0; q < kFoldBuildExperts; ++q)
          acc[q] = fmaf(wrg[q][jj], o, acc[q]);
      }
    }
    __syncthreads();
  }
  if (col >= k) return;
#pragma unroll
  for (int q = 0; q < kFoldBuildExperts; ++q)
    if (e0 + q < experts) mf[static_cast<int64_t>(e0 + q) * k + col] = __float2bfloat16(acc[q]);
}

}  // namespace
}  // namespace locus::cuda::gemv

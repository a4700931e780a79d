// Small-batch GEMV kernels (see gemv_launch.h). One warp per output row (or per intermediate
// index for the experts), 16-byte weight loads spread over the lanes and several rows in
// flight per warp, x staged in shared memory, f32 accumulation, a warp-shuffle reduction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels/gemv/gemv_launch.h"
#include "backend/cuda/kernels/moe/moe_route.cuh"
#include "backend/cuda/kernels/pdl.cuh"

// Internal linkage: each .cu that includes this gets its own copy of the kernels it launches.
namespace locus::cuda::gemv {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 2;  // weight rows each warp streams side by side
constexpr size_t kMaxSharedBytes = 96u << 10;

__device__ inline float dot8(const uint4& a, const uint4& b) {
  const auto* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
  const auto* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __bfloat1622float2(pa[i]);
    const float2 fb = __bfloat1622float2(pb[i]);
    s = fmaf(fa.x, fb.x, s);
    s = fmaf(fa.y, fb.y, s);
  }
  return s;
}

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Weights are read once per step: keep them from displacing activations in L1.
__device__ inline uint4 load_weight(const uint4* p) {
  return __ldcs(p);
}

// Copies `chunks` 16-byte chunks of a row into shared memory, cooperatively.
__device__ inline void stage_row(uint4* dst, const bf16* src, int chunks) {
  for (int c = threadIdx.x; c < chunks; c += kThreads)
    dst[c] = *reinterpret_cast<const uint4*>(src + static_cast<int64_t>(c) * 8);
}

// The pre-norm weight of a thread's first kNormPreChunks 16-byte chunks (t, t + 256, ...; k up
// to 4096 at 256 threads), loaded before pdl_wait: it is a constant, and loading it after the
// sums of squares would put one more dependent L2 round trip on the step's critical path.
// A kernel short of registers holds fewer (N).
constexpr int kNormPreChunks = 2;
template <int N = kNormPreChunks>
struct NormWeights {
  float4 w[N][2];
};

template <int N = kNormPreChunks>
__device__ inline NormWeights<N> preload_norm_weight(const GemvAddRmsNorm& pre, int k) {
  NormWeights<N> nw{};
  if (pre.residual == nullptr) return nw;
  const auto* w4 = reinterpret_cast<const float4*>(pre.weight);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    if (c < k / 8) {
      nw.w[i][0] = w4[c * 2];
      nw.w[i][1] = w4[c * 2 + 1];
    }
  }
  return nw;
}

// The pre-norm step as a GEMV prologue (GemvAddRmsNorm): 256 threads (`sync` is their barrier) turn
// the M rows of residual + delta into normalized bf16 rows in xs, and CTA 0 writes residual_out and
// normed. Thread t takes 16-byte chunks t, t + 256, ...; the sums of squares reduce by warp
// shuffles and then over the warps in order, so at k = 2048 (one chunk per thread) every value
// is bit-identical to add_rms_norm_vec_kernel's.
// kL2: residual and delta are read past L1 (__ldcg), for rows other CTAs of the same launch wrote.
template <int M, bool kL2 = false, int N = kNormPreChunks, typename Sync>
// writer: whether this CTA writes residual_out and normed (-1: CTA 0 does); inv_out gets each
// row's 1 / rms.
__device__ inline void add_rms_norm_rows(const GemvAddRmsNorm& pre, const NormWeights<N>& nw,
                                         uint4* xs, int k, Sync sync, int writer_cta = -1,
                                         float* inv_out = nullptr) {
  __shared__ float partial[M][kWarps];
  const int chunks = k / 8;
  const int t = threadIdx.x;
  const bool writer = writer_cta < 0 ? blockIdx.x == 0 : writer_cta != 0;
  const auto* residual = static_cast<const bf16*>(pre.residual);
  const auto* delta = static_cast<const bf16*>(pre.delta);
  auto at = [k](int m, int c) { return static_cast<int64_t>(m) * k + static_cast<int64_t>(c) * 8; };
  float ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m)
    ss[m] = 0.0f;
  for (int c = t; c < chunks; c += kWarps * 32) {
    // Every row's loads before any store: one round trip for the M rows, not M (the stores to
    // residual_out could alias the loads as far as the compiler knows).
    uint4 rv[M], dv[M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if constexpr (kL2) {
        rv[m] = __ldcg(reinterpret_cast<const uint4*>(residual + at(m, c)));
        dv[m] = __ldcg(reinterpret_cast<const uint4*>(delta + at(m, c)));
      } else {
        rv[m] = *reinterpret_cast<const uint4*>(residual + at(m, c));
        dv[m] = *reinterpret_cast<const uint4*>(delta + at(m, c));
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const auto* r2 = reinterpret_cast<const __nv_bfloat162*>(&rv[m]);
      const auto* d2 = reinterpret_cast<const __nv_bfloat162*>(&dv[m]);
      uint4 sum_bits;
      auto* s2 = reinterpret_cast<__nv_bfloat162*>(&sum_bits);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 a = __bfloat1622float2(r2[i]);
        const float2 b = __bfloat1622float2(d2[i]);
        s2[i] = __floats2bfloat162_rn(a.x + b.x, a.y + b.y);
        const float2 rounded = __bfloat1622float2(s2[i]);
        ss[m] += rounded.x * rounded.x;
        ss[m] += rounded.y * rounded.y;
      }
      xs[m * chunks + c] = sum_bits;
      if (writer)
        *reinterpret_cast<uint4*>(static_cast<bf16*>(pre.residual_out) + at(m, c)) = sum_bits;
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = warp_sum(ss[m]);
    if ((t & 31) == 0) partial[m][t >> 5] = v;
  }
  sync();
  float inv[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      total += partial[m][w];
    inv[m] = rsqrtf(total / static_cast<float>(k) + pre.eps);
    if (inv_out != nullptr) inv_out[m] = inv[m];
  }
  int i = 0;
  for (int c = t; c < chunks; c += kWarps * 32, ++i) {  // only this thread's own chunks
    float4 w0, w1;
    if (i == 0) {  // constant indices: nw stays in registers
      w0 = nw.w[0][0];
      w1 = nw.w[0][1];
    } else if (N > 1 && i == 1) {
      w0 = nw.w[N - 1][0];
      w1 = nw.w[N - 1][1];
    } else {
      w0 = reinterpret_cast<const float4*>(pre.weight)[c * 2];
      w1 = reinterpret_cast<const float4*>(pre.weight)[c * 2 + 1];
    }
    const float w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const uint4 sum_bits = xs[m * chunks + c];
      const auto* s2 = reinterpret_cast<const __nv_bfloat162*>(&sum_bits);
      uint4 out_bits;
      auto* o2 = reinterpret_cast<__nv_bfloat162*>(&out_bits);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 v2 = __bfloat1622float2(s2[i]);
        o2[i] = __floats2bfloat162_rn(v2.x * inv[m] * w[2 * i], v2.y * inv[m] * w[2 * i + 1]);
      }
      xs[m * chunks + c] = out_bits;
      if (writer) *reinterpret_cast<uint4*>(static_cast<bf16*>(pre.normed) + at(m, c)) = out_bits;
    }
  }
}

// y[m, j] for M rows of x and output columns j of the segments; grid.x covers the columns in
// kWarps * kRowsPerWarp rows. Launched as a programmatic dependent: the weights (constant
// across steps) are prefetched into L2 before waiting on the previous kernel, whose output x is.
template <int M, bool kF32Out>
__global__ void __launch_bounds__(kThreads)
    dense_gemv_kernel(const bf16* __restrict__ x, int64_t x_stride, GemvSegments w,
                      void* __restrict__ y, int n, int k, GemvAddRmsNorm pre) {
  extern __shared__ uint4 xs[];  // [M][k / 8]
  pdl_launch_dependents();
  const int chunks = k / 8;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int row0 = (blockIdx.x * kWarps + warp) * kRowsPerWarp;
  const uint4* wrow[kRowsPerWarp];
  const float* brow[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    int row = row0 + r < n ? row0 + r : n - 1;  // a duplicate row past n is never written
    int s = 0;
    while (s + 1 < w.count && row >= w.seg[s].rows) {
      row -= w.seg[s].rows;
      ++s;
    }
    wrow[r] = reinterpret_cast<const uint4*>(static_cast<const bf16*>(w.seg[s].w) +
                                             static_cast<int64_t>(row) * k);
    brow[r] = w.seg[s].bias != nullptr ? w.seg[s].bias + row : nullptr;
  }
  if (row0 < n) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      for (int c = lane * 8; c < chunks; c += 32 * 8)  // one prefetch per 128-byte line
        prefetch_l2(wrow[r] + c);
  }
  const NormWeights<> nw = preload_norm_weight(pre, k);
  pdl_wait();
  if (pre.residual != nullptr) {
    add_rms_norm_rows<M>(pre, nw, xs, k, [] { __syncthreads(); });
  } else {
    for (int m = 0; m < M; ++m)
      stage_row(xs + m * chunks, x + m * x_stride, chunks);
  }
  __syncthreads();
  if (row0 >= n) return;
  float acc[kRowsPerWarp][M];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m)
      acc[r][m] = 0.0f;
#pragma unroll 8
  for (int c = lane; c < chunks; c += 32) {
    uint4 wv[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      wv[r] = load_weight(wrow[r] + c);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const uint4 xv = xs[m * chunks + c];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        acc[r][m] += dot8(wv[r], xv);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v = warp_sum(acc[r][m]);
      if (brow[r] != nullptr) v += *brow[r];
      if (lane == 0 && row0 + r < n) {
        const int64_t at = static_cast<int64_t>(m) * n + row0 + r;
        if constexpr (kF32Out) {
          static_cast<float*>(y)[at] = v;
        } else {
          static_cast<bf16*>(y)[at] = __float2bfloat16(v);
        }
      }
    }
  }
}

// A folded router's picks (MoeFoldArgs): the top-k of token t's raw logits (raw_s, in shared
// memory; at most kThreads experts), ties to the lower index and NaN last, as route_token picks.
// Thread e ranks expert e against all others; the expert of rank j goes to picks[j].
constexpr int kFoldMaxExperts = kThreads;
__device__ inline float fold_key(float v) {
  return isnan(v) ? -INFINITY : v;
}
__device__ inline void fold_rank_picks(const float* raw_s, int experts, int top_k, int* picks) {
  const int e = threadIdx.x;
  if (e >= experts) return;
  const float v = fold_key(raw_s[e]);
  // Four independent counts: the compares do not wait on one add chain.
  int r0 = 0, r1 = 0, r2 = 0, r3 = 0;
  int j = 0;
  for (; j + 4 <= experts; j += 4) {
    const float u0 = fold_key(raw_s[j]), u1 = fold_key(raw_s[j + 1]);
    const float u2 = fold_key(raw_s[j + 2]), u3 = fold_key(raw_s[j + 3]);
    r0 += (u0 > v || (u0 == v && j < e)) ? 1 : 0;
    r1 += (u1 > v || (u1 == v && j + 1 < e)) ? 1 : 0;
    r2 += (u2 > v || (u2 == v && j + 2 < e)) ? 1 : 0;
    r3 += (u3 > v || (u3 == v && j + 3 < e)) ? 1 : 0;
  }
  for (; j < experts; ++j) {
    const float u = fold_key(raw_s[j]);
    r0 += (u > v || (u == v && j < e)) ? 1 : 0;
  }
  const int rank = r0 + r1 + r2 + r3;
  if (rank < top_k) picks[rank] = e;
}

// Token t's raw logits staged in raw_s (read past L1: the kernel before wrote them) and its
// top-k ranked into picks, by the whole CTA (barriers inside).
__device__ inline void fold_load_picks(const MoeFoldArgs& f, int t, int top_k, float* raw_s,
                                       int* picks) {
  if (static_cast<int>(threadIdx.x) < f.experts)
    raw_s[threadIdx.x] = __ldcg(f.logits + static_cast<int64_t>(t) * f.experts + threadIdx.x);
  __syncthreads();
  fold_rank_picks(raw_s, f.experts, top_k, picks);
  __syncthreads();
}

// Token t's routing weights from a folded router's raw logits: route_token's softmax scores of
// logits raw * inv, taken at the picks, renormalized in j order and scaled (one warp).
__device__ inline void fold_weights(const MoeFoldArgs& f, int t, float inv, const float* raw_s,
                                    const int* picks, int top_k, int lane) {
  float max_logit;
  const float sum = moe::softmax_terms(
      f.experts, lane, [&](int e) { return raw_s[e] * inv; }, max_logit, [](int, float) {});
  for (int e = lane; e < f.experts; e += 32)
    f.logits_out[static_cast<int64_t>(t) * f.experts + e] = raw_s[e] * inv;
  float score = 0.0f;
  if (lane < top_k) score = expf(raw_s[picks[lane]] * inv - max_logit) / sum;
  float picked = 0.0f;
  for (int j = 0; j < top_k; ++j)
    picked += __shfl_sync(0xffffffffu, score, j);
  if (lane < top_k)
    f.topk_weights[static_cast<int64_t>(t) * top_k + lane] =
        moe::routed_weight(score, picked, f.renormalize, false, f.scale);
}

__device__ inline float silu(float g) {
  return g / (1.0f + __expf(-g));
}

// The two expert kernels spell out a minimum of 1 CTA per SM: the compiler then keeps more
// loads in flight per warp (77 and 80 registers instead of 44 and 48, so fewer CTAs fit an
// SM). Measured on the H200 (docs/benchmarks.md): gate_up 17.2 -> 14.3 us and down 10.6 ->
// 10.5 us alone; batch-1 steps 3.79 ms with neither, 3.84 with gate_up's alone, 3.55 with both
// (with PDL the two kernels' CTAs share SMs, so they are tuned together).
//
// h[p, i] = bf16(silu(gate_e[i] . x_t) * (up_e[i] . x_t)), p = blockIdx.y = t * top_k + j.
//
// kFold (a folded router, MoeFoldArgs): x is the pre-norm step of token t's row, run here, and
// the expert is the CTA's own pick from the raw logits; the CTAs (0, p) write topk_ids[p], the
// CTA (0, t * top_k) residual_out and normed, and after its rows its warp 0 the token's weights.
// The fold's prologue would take the kernel from 77 to 86 registers, two CTAs per SM instead of
// three (a third wave at batch 1): its bound keeps three.
// kRows: intermediate rows per warp. At 2 the batch-1 grid (inter 768, top-k 8) is 384 CTAs,
// one wave at three CTAs per SM on 132 SMs, so no CTA runs the prologue after another's rows.
// kEarly (kFold only): 16-byte chunks per lane and row of the gate and up weights put in flight
// between the picks and the pre-norm, whose loads then overlap them (the weights need only the
// pick; only the dot products need x).
template <bool kFold, int kRows, int kEarly>
__global__ void __launch_bounds__(kThreads, kFold ? 3 : 1)
    moe_gate_up_gemv_kernel(const bf16* __restrict__ x, int64_t x_stride,
                            const int32_t* __restrict__ topk_ids, const void* const* gate_w,
                            const void* const* up_w, bf16* __restrict__ h, int num_experts,
                            int top_k, int hidden, int inter, MoeFoldArgs fold) {
  extern __shared__ uint4 xs[];  // [hidden / 8]
  const int p = blockIdx.y;
  const int t = p / top_k;
  const int chunks = hidden / 8;
  // One pre-norm weight chunk per thread held (hidden 2048 needs no more): the early weight
  // loads below need the registers.
  NormWeights<1> nw{};
  if constexpr (kFold) nw = preload_norm_weight<1>(fold.pre, hidden);
  pdl_wait();  // x and topk_ids come from the kernels before
  // Only now: the down kernel reads topk_ids (or the raw logits) before its own pdl_wait, which
  // is safe once every CTA here is past this wait (the routing grid has then finished).
  pdl_launch_dependents();
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const bool fold_writer = kFold && blockIdx.x == 0 && p % top_k == 0;
  __shared__ float inv_rms;
  __shared__ __align__(16) float raw_s[kFold ? kFoldMaxExperts : 1];
  __shared__ int picks[kFold ? 32 : 1];
  const int i0 = (blockIdx.x * kWarps + warp) * kRows;  // this warp's first row
  int e = -1;
  const uint4* g_row[kRows];
  const uint4* u_row[kRows];
  auto find_rows = [&] {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = min(i0 + r, inter - 1);  // a duplicate row past inter is never written
      g_row[r] = reinterpret_cast<const uint4*>(static_cast<const bf16*>(gate_w[e]) + i * hidden);
      u_row[r] = reinterpret_cast<const uint4*>(static_cast<const bf16*>(up_w[e]) + i * hidden);
    }
  };
  static_assert(kFold || kEarly == 0, "only the fold's prologue has weights to overlap");
  uint4 early_g[kRows][kEarly > 0 ? kEarly : 1], early_u[kRows][kEarly > 0 ? kEarly : 1];
  if constexpr (kFold) {
    fold_load_picks(fold, t, top_k, raw_s, picks);
    e = picks[p % top_k];
    if (blockIdx.x == 0 && threadIdx.x == 0) fold.topk_ids_out[p] = e;
    if (i0 < inter && e >= 0 && e < num_experts) {
      find_rows();
#pragma unroll
      for (int k = 0; k < kEarly; ++k) {
        const int c = lane + 32 * k;
        if (c < chunks) {
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            early_g[r][k] = load_weight(g_row[r] + c);
            early_u[r][k] = load_weight(u_row[r] + c);
          }
        }
      }
    }
    GemvAddRmsNorm row = fold.pre;
    const int64_t at = static_cast<int64_t>(t) * hidden;
    row.residual = static_cast<const bf16*>(row.residual) + at;
    row.delta = static_cast<const bf16*>(row.delta) + at;
    row.residual_out = static_cast<bf16*>(row.residual_out) + at;
    row.normed = static_cast<bf16*>(row.normed) + at;
    add_rms_norm_rows<1, true, 1>(
        row, nw, xs, hidden, [] { __syncthreads(); }, fold_writer ? 1 : 0,
        threadIdx.x == 0 ? &inv_rms : nullptr);
  } else {
    stage_row(xs, x + t * x_stride, chunks);
  }
  __syncthreads();
  if (i0 >= inter) return;
  if constexpr (!kFold) e = topk_ids[p];
  if (e < 0 || e >= num_experts) {  // not a routed expert: contributes nothing
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (lane == 0 && i0 + r < inter)
        h[static_cast<int64_t>(p) * inter + i0 + r] = __float2bfloat16(0.0f);
    return;
  }
  if constexpr (!kFold) find_rows();
  float g[kRows], u[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    g[r] = u[r] = 0.0f;
  int c = lane;
  if constexpr (kFold) {
#pragma unroll
    for (int k = 0; k < kEarly; ++k, c += 32) {
      if (c < chunks) {
        const uint4 xv = xs[c];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          g[r] += dot8(early_g[r][k], xv);
          u[r] += dot8(early_u[r][k], xv);
        }
      }
    }
  }
  // The same bytes in flight per warp whatever kRows (4 chunk pairs per lane).
  constexpr int kUnroll = 4 / kRows;
#pragma unroll kUnroll
  for (; c < chunks; c += 32) {
    uint4 gv[kRows], uv[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      gv[r] = load_weight(g_row[r] + c);
      uv[r] = load_weight(u_row[r] + c);
    }
    const uint4 xv = xs[c];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      g[r] += dot8(gv[r], xv);
      u[r] += dot8(uv[r], xv);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float gs = warp_sum(g[r]);
    const float us = warp_sum(u[r]);
    if (lane == 0 && i0 + r < inter)
      h[static_cast<int64_t>(p) * inter + i0 + r] = __float2bfloat16(silu(gs) * us);
  }
  if constexpr (kFold) {
    // The down launch reads the weights only after its wait: off this CTA's critical path.
    if (fold_writer && warp == 0) fold_weights(fold, t, inv_rms, raw_s, picks, top_k, lane);
  }
}

// out[t, n] = bf16(sum_j w[t, j] * (down_e[n] . h[t * top_k + j])), j in order; t = blockIdx.y.
// Before pdl_wait each warp reads the routing and has its first experts' weight chunks in
// flight: gate_up triggers this launch only after its own pdl_wait, so the kernel that wrote
// topk_ids has finished (read past L1, which may hold an earlier layer's ids). The weights then
// arrive while gate_up's last CTAs finish.
// kFold: the picks come from the raw logits of a folded router (fold_rank_picks), which the
// kernel before gate_up wrote; gate_up writes topk_ids itself, after this kernel may start.
template <int kPre, bool kFold>
__global__ void __launch_bounds__(kThreads, 2)
    moe_down_gemv_kernel(const bf16* __restrict__ h, const int32_t* __restrict__ topk_ids,
                         const float* __restrict__ topk_weights, const void* const* down_w,
                         bf16* __restrict__ out, int num_experts, int top_k, int hidden, int inter,
                         MoeFoldArgs fold) {
  extern __shared__ uint4 hs[];  // [top_k][inter / 8]
  pdl_launch_dependents();
  const int t = blockIdx.y;
  __shared__ __align__(16) float raw_s[kFold ? kFoldMaxExperts : 1];
  __shared__ int picks[kFold ? 32 : 1];
  if constexpr (kFold) {
    fold_load_picks(fold, t, top_k, raw_s, picks);
  }
  const int chunks = inter / 8;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int col = blockIdx.x * kWarps + warp;
  // Experts in groups of kJ so the group's weight rows are all in flight at once (one DRAM
  // round trip per group, not per expert); the sum still runs in j order. The first group's
  // first kPre chunks per lane are loaded before pdl_wait. Two CTAs per SM at most 128
  // registers: a 256-CTA grid (hidden 2048) stays one wave.
  constexpr int kJ = 4;
  const uint4* d_row[kJ];
  auto expert_rows = [&](int j0) {
#pragma unroll
    for (int q = 0; q < kJ; ++q) {
      const int j = j0 + q;
      int e = -1;
      if (col < hidden && j < top_k) {
        if constexpr (kFold) {
          e = picks[j];
        } else {
          e = __ldcg(topk_ids + t * top_k + j);
        }
      }
      d_row[q] = e >= 0 && e < num_experts
                     ? reinterpret_cast<const uint4*>(static_cast<const bf16*>(down_w[e]) +
                                                      int64_t{col} * inter)
                     : nullptr;
    }
  };
  expert_rows(0);
  uint4 pre[kJ][kPre > 0 ? kPre : 1];
#pragma unroll
  for (int i = 0; i < kPre; ++i) {
    const int c = lane + 32 * i;
#pragma unroll
    for (int q = 0; q < kJ; ++q)
      pre[q][i] =
          d_row[q] != nullptr && c < chunks ? load_weight(d_row[q] + c) : make_uint4(0, 0, 0, 0);
  }
  pdl_wait();
  stage_row(hs, h + static_cast<int64_t>(t) * top_k * inter, chunks * top_k);
  __syncthreads();
  if (col >= hidden) return;
  float total = 0.0f;
  for (int j0 = 0; j0 < top_k; j0 += kJ) {
    float d[kJ];
#pragma unroll
    for (int q = 0; q < kJ; ++q)
      d[q] = 0.0f;
    int c = lane;
    if (j0 == 0) {
#pragma unroll
      for (int i = 0; i < kPre; ++i, c += 32) {
        if (c < chunks) {
#pragma unroll
          for (int q = 0; q < kJ; ++q)
            if (d_row[q] != nullptr) d[q] += dot8(pre[q][i], hs[q * chunks + c]);
        }
      }
    } else {
      expert_rows(j0);
    }
    for (; c < chunks; c += 32) {
      uint4 w[kJ];
#pragma unroll
      for (int q = 0; q < kJ; ++q)
        w[q] = d_row[q] != nullptr ? load_weight(d_row[q] + c) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int q = 0; q < kJ; ++q)
        if (d_row[q] != nullptr) d[q] += dot8(w[q], hs[(j0 + q) * chunks + c]);
    }
#pragma unroll
    for (int q = 0; q < kJ; ++q) {
      const float sum = warp_sum(d[q]);
      if (d_row[q] != nullptr) total += topk_weights[t * top_k + j0 + q] * sum;
    }
  }
  if (lane == 0) out[static_cast<int64_t>(t) * hidden + col] = __float2bfloat16(total);
}

}  // namespace
}  // namespace locus::cuda::gemv

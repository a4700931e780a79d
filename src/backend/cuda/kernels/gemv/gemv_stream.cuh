// Small-batch GEMV kernels that stream the weights through shared memory with the bulk copy
// engine (see gemv_launch.h for the contracts). At batch 1 a decode step is a chain of GEMVs
// that each move 1-50 MB. Here one producer thread per CTA keeps `stages` copies of 12-96 KB
// in flight on mbarriers while eight consumer warps compute from shared memory, and the grid
// is one CTA per SM with the work split evenly.
//
// Measured on the H200 (docs/benchmarks.md): alone, back to back, the dense shapes run 20-35%
// faster than the register-streaming kernels (gemv.cuh); inside a decode step the gain is a
// few percent, and the expert kernels are slower (they wait on routing before they can start
// copying), so only the dense launches use them by default.
//
// The arithmetic is the warp kernels' exactly (each lane sums the same 16-byte chunks in the
// same order, then the same shuffle reduction), so both paths give identical bits.
#pragma once

#include "backend/cuda/kernels/bulk_copy.cuh"
#include "backend/cuda/kernels/gemv/gemv.cuh"
#include "backend/cuda/kernels/last_block.cuh"
#include "backend/cuda/kernels/moe/moe_route.cuh"

namespace locus::cuda::gemv {
namespace {

constexpr int kConsumerWarps = 8;
constexpr int kStreamThreads = (kConsumerWarps + 1) * 32;
static_assert(kConsumerWarps * 32 == kThreads, "the pre-norm prologue runs on 256 threads");
constexpr int kUnitRows = 8;  // weight rows per stage per matrix: one per consumer warp
constexpr int kMaxStages = 8;
constexpr size_t kBarrierBytes = 2 * kMaxStages * sizeof(uint64_t);

constexpr size_t round_up_128(size_t x) {
  return (x + 127) & ~size_t{127};
}

// Shared memory of a streaming launch: barriers, the staged activations, then the stages.
struct StreamSmem {
  uint64_t* full;   // [kMaxStages] the copy of a stage has landed
  uint64_t* empty;  // [kMaxStages] every consumer warp is done with a stage
  uint4* xs;
  unsigned char* stage0;
};

__device__ inline StreamSmem stream_smem(unsigned char* smem, size_t x_bytes) {
  StreamSmem s;
  s.full = reinterpret_cast<uint64_t*>(smem);
  s.empty = s.full + kMaxStages;
  s.xs = reinterpret_cast<uint4*>(smem + kBarrierBytes);
  s.stage0 = smem + kBarrierBytes + round_up_128(x_bytes);
  return s;
}

__device__ inline void init_barriers(const StreamSmem& s, int stages) {
  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i) {
      bulk::mbar_init(s.full + i, 1);
      bulk::mbar_init(s.empty + i, kConsumerWarps);
    }
    bulk::mbar_init_fence();
  }
  __syncthreads();
}

// The CTA's share of `units` work units: [begin, end), sizes differing by at most one.
__device__ inline void cta_units(int64_t units, int64_t& begin, int64_t& end) {
  begin = static_cast<int64_t>(blockIdx.x) * units / gridDim.x;
  end = static_cast<int64_t>(blockIdx.x + 1) * units / gridDim.x;
}

// Producer side of iteration i: waits until the consumers released the stage's previous use.
__device__ inline void acquire_stage(const StreamSmem& s, int64_t i, int stages) {
  if (i >= stages)
    bulk::mbar_wait(s.empty + i % stages, static_cast<uint32_t>((i / stages - 1) & 1));
}

// Consumer side: waits for iteration i's copy, and after the warp read it, releases the stage.
__device__ inline void wait_stage(const StreamSmem& s, int64_t i, int stages) {
  bulk::mbar_wait(s.full + i % stages, static_cast<uint32_t>((i / stages) & 1));
}
__device__ inline void release_stage(const StreamSmem& s, int64_t i, int stages) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0) bulk::mbar_arrive(s.empty + i % stages);
}

// Copies `count` rows (threadIdx.x < 256) of `chunks` 16-byte chunks each into shared memory.
__device__ inline void stage_rows(uint4* dst, const bf16* src, int64_t src_stride, int count,
                                  int chunks) {
  for (int r = 0; r < count; ++r)
    for (int c = threadIdx.x; c < chunks; c += kConsumerWarps * 32)
      dst[r * chunks + c] =
          *reinterpret_cast<const uint4*>(src + r * src_stride + static_cast<int64_t>(c) * 8);
}

// Producer of a dense launch: streams the CTA's units [u0, u1) of w's rows (eight per unit,
// across the segments) into the stages.
__device__ inline void produce_dense_units(const StreamSmem& s, const GemvSegments& w, int n, int k,
                                           int64_t u0, int64_t u1, int stages, uint64_t policy) {
  const size_t stage_bytes = static_cast<size_t>(kUnitRows) * k * sizeof(bf16);
  for (int64_t i = 0; i < u1 - u0; ++i) {
    acquire_stage(s, i, stages);
    const int row0 = static_cast<int>((u0 + i) * kUnitRows);
    const int rows = n - row0 < kUnitRows ? n - row0 : kUnitRows;
    uint64_t* bar = s.full + i % stages;
    bulk::mbar_arrive_expect_tx(bar, static_cast<uint32_t>(rows * k * sizeof(bf16)));
    unsigned char* dst = s.stage0 + (i % stages) * stage_bytes;
    int seg = 0, first = row0;  // row0 relative to segment seg
    while (seg + 1 < w.count && first >= w.seg[seg].rows)
      first -= w.seg[seg++].rows;
    // One copy per row, not one per run of rows: a CTA's bytes land sooner with more, smaller
    // copies outstanding. Measured in a batch-1 step on the H200: the o projection's two
    // 64 KB copies per CTA landed ~17 us after they were issued, its sixteen 8 KB ones in
    // 4 us (docs/benchmarks.md).
    for (int r = 0; r < rows;) {
      const int run = rows - r < w.seg[seg].rows - first ? rows - r : w.seg[seg].rows - first;
      const bf16* src = static_cast<const bf16*>(w.seg[seg].w) + static_cast<int64_t>(first) * k;
      for (int q = 0; q < run; ++q)
        bulk::copy_g2s(dst + static_cast<size_t>(r + q) * k * sizeof(bf16),
                       src + static_cast<int64_t>(q) * k, static_cast<uint32_t>(k * sizeof(bf16)),
                       bar, policy);
      r += run;
      ++seg;
      first = 0;
    }
  }
}

// A consumer warp's part of a dense launch's iteration i: acc[m] = its lane's share of the dot
// of the warp's staged row with the M staged activation rows (zero where the row is past n).
// Waits for the stage and releases it.
template <int M>
__device__ inline void consume_dense_unit(const StreamSmem& s, int64_t i, int stages, int k,
                                          bool row_valid, float (&acc)[M]) {
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int chunks = k / 8;
  wait_stage(s, i, stages);
#pragma unroll
  for (int m = 0; m < M; ++m)
    acc[m] = 0.0f;
  if (row_valid) {
    const auto* wrow = reinterpret_cast<const uint4*>(
        s.stage0 + (i % stages) * (static_cast<size_t>(kUnitRows) * k * sizeof(bf16)) +
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
}

// Dense y = x W^T over weight segments. Unit u = output rows [8u, 8u + 8); consumer warp w
// owns row 8u + w. Weights are constant: the producer starts streaming before pdl_wait.
// kRoute (the MoE router, f32 logits): the last CTA to finish routes the M tokens from y with
// moe::route_token, one warp per token, and resets *counter for the next launch. With
// pre.residual set, x is the pre-norm step's output (add_rms_norm_rows), not read from x.
template <int M, bool kF32Out, bool kRoute = false>
__global__ void __launch_bounds__(kStreamThreads, 1)
    dense_gemv_stream_kernel(const bf16* __restrict__ x, int64_t x_stride, GemvSegments w,
                             void* __restrict__ y, int n, int k, int stages, MoeRouteArgs route,
                             int* counter, GemvAddRmsNorm pre) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int chunks = k / 8;
  const StreamSmem s = stream_smem(smem, static_cast<size_t>(M) * k * sizeof(bf16));
  init_barriers(s, stages);
  pdl_launch_dependents();
  int64_t u0, u1;
  cta_units((n + kUnitRows - 1) / kUnitRows, u0, u1);
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  if (warp == kConsumerWarps) {
    if (lane != 0) return;
    produce_dense_units(s, w, n, k, u0, u1, stages, bulk::evict_first_policy());
    return;
  }
  const NormWeights<> nw = preload_norm_weight(pre, k);
  pdl_wait();
  if (pre.residual != nullptr) {
    add_rms_norm_rows<M>(pre, nw, s.xs, k, [] { bulk::named_sync(kConsumerWarps * 32); });
  } else {
    for (int m = 0; m < M; ++m)
      for (int c = threadIdx.x; c < chunks; c += kConsumerWarps * 32)
        s.xs[m * chunks + c] =
            *reinterpret_cast<const uint4*>(x + m * x_stride + static_cast<int64_t>(c) * 8);
  }
  bulk::named_sync(kConsumerWarps * 32);
  for (int64_t i = 0; i < u1 - u0; ++i) {
    const int row = static_cast<int>((u0 + i) * kUnitRows) + warp;
    float acc[M];
    consume_dense_unit<M>(s, i, stages, k, row < n, acc);
    if (row >= n) continue;
    int seg = 0, local = row;
    while (seg + 1 < w.count && local >= w.seg[seg].rows)
      local -= w.seg[seg++].rows;
    const float bias = w.seg[seg].bias != nullptr ? w.seg[seg].bias[local] : 0.0f;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v = warp_sum(acc[m]);
      if (w.seg[seg].bias != nullptr) v += bias;
      if (lane == 0) {
        const int64_t at = static_cast<int64_t>(m) * n + row;
        if constexpr (kF32Out) {
          static_cast<float*>(y)[at] = v;
        } else {
          static_cast<bf16*>(y)[at] = __float2bfloat16(v);
        }
      }
    }
  }
  if constexpr (kRoute) {
    // The last CTA to finish (last_block.cuh) sees every CTA's logits and routes.
    if (!last_to_arrive(counter, static_cast<int>(gridDim.x),
                        [] { bulk::named_sync(kConsumerWarps * 32); }))
      return;
    // Every stage has been consumed: its shared memory is free for the routing scratch.
    float* scratch = reinterpret_cast<float*>(s.stage0) +
                     warp * moe::route_scratch_floats(route.num_experts, route.n_group);
    for (int t = warp; t < M; t += kConsumerWarps)
      moe::route_token(route, t, scratch);
  }
}

// h[p, i] = bf16(silu(gate_e[i] . x_t) * (up_e[i] . x_t)) for pair p = t * top_k + j.
// Unit u = (pair p, intermediate rows [8v, 8v + 8)); a stage holds the 8 gate rows then the 8
// up rows; warp w owns index 8v + w. The experts come from routing: streaming waits for it.
__global__ void __launch_bounds__(kStreamThreads, 1)
    moe_gate_up_stream_kernel(const bf16* __restrict__ x, int64_t x_stride,
                              const int32_t* __restrict__ topk_ids, const void* const* gate_w,
                              const void* const* up_w, bf16* __restrict__ h, int num_tokens,
                              int num_experts, int top_k, int hidden, int inter, int stages) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int chunks = hidden / 8;
  const StreamSmem s = stream_smem(smem, static_cast<size_t>(num_tokens) * hidden * sizeof(bf16));
  const size_t half_bytes = static_cast<size_t>(kUnitRows) * hidden * sizeof(bf16);
  init_barriers(s, stages);
  pdl_wait();               // x and topk_ids come from the kernels before
  pdl_launch_dependents();  // after the wait: the down kernel reads topk_ids before its own
  const int per_pair = (inter + kUnitRows - 1) / kUnitRows;
  int64_t u0, u1;
  cta_units(static_cast<int64_t>(num_tokens) * top_k * per_pair, u0, u1);
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  if (warp == kConsumerWarps) {
    if (lane != 0) return;
    const uint64_t policy = bulk::evict_first_policy();
    for (int64_t i = 0; i < u1 - u0; ++i) {
      acquire_stage(s, i, stages);
      const int p = static_cast<int>((u0 + i) / per_pair);
      const int i0 = static_cast<int>((u0 + i) % per_pair) * kUnitRows;
      const int rows = inter - i0 < kUnitRows ? inter - i0 : kUnitRows;
      const int e = topk_ids[p];
      uint64_t* bar = s.full + i % stages;
      if (e < 0 || e >= num_experts) {
        bulk::mbar_arrive(bar);
        continue;
      }
      const auto bytes = static_cast<uint32_t>(rows * hidden * sizeof(bf16));
      bulk::mbar_arrive_expect_tx(bar, 2 * bytes);
      unsigned char* dst = s.stage0 + (i % stages) * 2 * half_bytes;
      const int64_t offset = static_cast<int64_t>(i0) * hidden;
      bulk::copy_g2s(dst, static_cast<const bf16*>(gate_w[e]) + offset, bytes, bar, policy);
      bulk::copy_g2s(dst + half_bytes, static_cast<const bf16*>(up_w[e]) + offset, bytes, bar,
                     policy);
    }
    return;
  }
  stage_rows(s.xs, x, x_stride, num_tokens, chunks);
  bulk::named_sync(kConsumerWarps * 32);
  for (int64_t i = 0; i < u1 - u0; ++i) {
    const int p = static_cast<int>((u0 + i) / per_pair);
    const int index = static_cast<int>((u0 + i) % per_pair) * kUnitRows + warp;
    const int e = topk_ids[p];
    const bool routed = e >= 0 && e < num_experts;
    wait_stage(s, i, stages);
    float g = 0.0f, u = 0.0f;
    if (index < inter && routed) {
      const unsigned char* stage = s.stage0 + (i % stages) * 2 * half_bytes;
      const auto* g_row =
          reinterpret_cast<const uint4*>(stage + static_cast<size_t>(warp) * hidden * 2);
      const auto* u_row = reinterpret_cast<const uint4*>(stage + half_bytes +
                                                         static_cast<size_t>(warp) * hidden * 2);
      const uint4* xv = s.xs + static_cast<int64_t>(p / top_k) * chunks;
#pragma unroll 4
      for (int c = lane; c < chunks; c += 32) {
        g += dot8(g_row[c], xv[c]);
        u += dot8(u_row[c], xv[c]);
      }
    }
    release_stage(s, i, stages);
    if (index >= inter) continue;
    g = warp_sum(g);
    u = warp_sum(u);
    if (lane == 0)
      h[static_cast<int64_t>(p) * inter + index] = __float2bfloat16(routed ? silu(g) * u : 0.0f);
  }
}

// out[t, n] = bf16(sum_j w[t, j] * (down_e[n] . h[t * top_k + j])), j in order. Unit u =
// (token t, output columns [8v, 8v + 8)); a stage holds, for each j, expert e_j's 8 rows for
// those columns (one contiguous copy each); warp w owns column 8v + w.
__global__ void __launch_bounds__(kStreamThreads, 1)
    moe_down_stream_kernel(const bf16* __restrict__ h, const int32_t* __restrict__ topk_ids,
                           const float* __restrict__ topk_weights, const void* const* down_w,
                           bf16* __restrict__ out, int num_tokens, int num_experts, int top_k,
                           int hidden, int inter, int stages) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int chunks = inter / 8;
  const int pairs = num_tokens * top_k;
  const StreamSmem s = stream_smem(smem, static_cast<size_t>(pairs) * inter * sizeof(bf16));
  const size_t block_bytes = static_cast<size_t>(kUnitRows) * inter * sizeof(bf16);
  const size_t stage_bytes = block_bytes * top_k;
  init_barriers(s, stages);
  pdl_launch_dependents();
  pdl_wait();
  const int per_token = (hidden + kUnitRows - 1) / kUnitRows;
  int64_t u0, u1;
  cta_units(static_cast<int64_t>(num_tokens) * per_token, u0, u1);
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  if (warp == kConsumerWarps) {
    if (lane != 0) return;
    const uint64_t policy = bulk::evict_first_policy();
    for (int64_t i = 0; i < u1 - u0; ++i) {
      acquire_stage(s, i, stages);
      const int t = static_cast<int>((u0 + i) / per_token);
      const int c0 = static_cast<int>((u0 + i) % per_token) * kUnitRows;
      const int cols = hidden - c0 < kUnitRows ? hidden - c0 : kUnitRows;
      const auto bytes = static_cast<uint32_t>(cols * inter * sizeof(bf16));
      uint32_t total = 0;
      for (int j = 0; j < top_k; ++j) {
        const int e = topk_ids[t * top_k + j];
        if (e >= 0 && e < num_experts) total += bytes;
      }
      uint64_t* bar = s.full + i % stages;
      bulk::mbar_arrive_expect_tx(bar, total);
      unsigned char* dst = s.stage0 + (i % stages) * stage_bytes;
      for (int j = 0; j < top_k; ++j) {
        const int e = topk_ids[t * top_k + j];
        if (e < 0 || e >= num_experts) continue;
        bulk::copy_g2s(dst + j * block_bytes,
                       static_cast<const bf16*>(down_w[e]) + static_cast<int64_t>(c0) * inter,
                       bytes, bar, policy);
      }
    }
    return;
  }
  stage_rows(s.xs, h, inter, pairs, chunks);
  bulk::named_sync(kConsumerWarps * 32);
  for (int64_t i = 0; i < u1 - u0; ++i) {
    const int t = static_cast<int>((u0 + i) / per_token);
    const int col = static_cast<int>((u0 + i) % per_token) * kUnitRows + warp;
    wait_stage(s, i, stages);
    const unsigned char* stage = s.stage0 + (i % stages) * stage_bytes;
    float total = 0.0f;
    if (col < hidden) {
      for (int j = 0; j < top_k; ++j) {
        const int e = topk_ids[t * top_k + j];
        if (e < 0 || e >= num_experts) continue;
        const auto* d_row = reinterpret_cast<const uint4*>(stage + j * block_bytes +
                                                           static_cast<size_t>(warp) * inter * 2);
        const uint4* hv = s.xs + static_cast<int64_t>(t * top_k + j) * chunks;
        float d = 0.0f;
        for (int c = lane; c < chunks; c += 32)
          d += dot8(d_row[c], hv[c]);
        total += topk_weights[t * top_k + j] * warp_sum(d);
      }
    }
    release_stage(s, i, stages);
    if (col < hidden && lane == 0)
      out[static_cast<int64_t>(t) * hidden + col] = __float2bfloat16(total);
  }
}

}  // namespace
}  // namespace locus::cuda::gemv

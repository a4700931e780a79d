// Grouped expert GEMM over the expert-contiguous, BLOCK_M-aligned order that moe_align builds.
// Each CTA takes one block of rows (one expert) and one BLOCK_N slice of that expert's weight
// (nn.Linear layout [N, K] bf16), gathers the rows, and multiplies on the tensor cores
// (mma.sync m16n8k16 bf16, f32 accumulate) through a cp.async multi-stage shared-memory
// pipeline. Two epilogues: gate/up (both weights in one CTA, so each row tile loads once) with
// SiLU-and-mul into bf16 h, and down scaled by the routing weight into f32 y. Rows are written
// by assignment index. Never synchronizes with the host; CTAs of unused blocks exit at once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/kernels/moe/moe_grouped_gemm_launch.h"

namespace locus::cuda::moe {

namespace gemm_detail {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy global -> shared. When !valid no global byte is read and the
// destination is zero-filled: padding rows and the ragged N and K edges then add exact zeros.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPendingGroups>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPendingGroups) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(p)));
}

// c += a * b for one 16x8x16 tile: a row-major 16x16, b 16x8 given as [n][k] (the weight's own
// layout), c 16x8 f32.
__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace gemm_detail

// Tile shape of one kernel instantiation. Warps tile the CTA's BLOCK_M x BLOCK_N output as
// kWarpsM x kWarpsN; each warp owns (BLOCK_M / kWarpsM) x (BLOCK_N / kWarpsN) in 16x8 pieces.
template <int kBlockM_, int kBlockN_, int kWarpsM_, int kWarpsN_, int kStages_, bool kGated_>
struct GemmTile {
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarpsM = kWarpsM_;
  static constexpr int kWarpsN = kWarpsN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kGated = kGated_;

  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kBlockK = 64;
  // Rows padded by 16 bytes (144-byte pitch): the 8 row addresses of one ldmatrix then fall in
  // 8 distinct 16-byte bank groups, so fragment loads are conflict-free.
  static constexpr int kRowPitch = kBlockK + 8;
  static constexpr int kChunksPerRow = kBlockK / 8;  // 16-byte chunks
  static constexpr int kWeights = kGated ? 2 : 1;
  static constexpr int kStageElems = (kBlockM + kWeights * kBlockN) * kRowPitch;
  static constexpr size_t kSmemBytes =
      static_cast<size_t>(kStages) * kStageElems * sizeof(__nv_bfloat16);
  static constexpr int kWarpM = kBlockM / kWarpsM;
  static constexpr int kWarpN = kBlockN / kWarpsN;
  static constexpr int kFragsM = kWarpM / 16;
  static constexpr int kFragsN = kWarpN / 8;

  // Each thread issues the same number of 16-byte copies per tile (no tail iterations).
  static constexpr int kACopiesPerThread = kBlockM * kChunksPerRow / kThreads;
  static constexpr int kBCopiesPerThread = kBlockN * kChunksPerRow / kThreads;

  static_assert(kWarpM % 16 == 0 && kWarpN % 8 == 0, "warp tile must be whole 16x8 pieces");
  static_assert(kBlockM * kChunksPerRow % kThreads == 0, "A tile copies must divide evenly");
  static_assert(kBlockN * kChunksPerRow % kThreads == 0, "B tile copies must divide evenly");
  static_assert(kStages >= 2, "the pipeline needs at least two stages");
};

template <class Tile>
__global__ void __launch_bounds__(Tile::kThreads)
    moe_grouped_gemm_kernel(const GroupedGemmParams p) {
  using bf16 = __nv_bfloat16;
  using namespace gemm_detail;
  constexpr int kBlockM = Tile::kBlockM;
  constexpr int kBlockN = Tile::kBlockN;
  constexpr int kBlockK = Tile::kBlockK;
  constexpr int kRowPitch = Tile::kRowPitch;
  constexpr int kChunksPerRow = Tile::kChunksPerRow;
  constexpr int kStages = Tile::kStages;
  constexpr int kThreads = Tile::kThreads;

  extern __shared__ __align__(16) unsigned char moe_gemm_smem[];
  __shared__ int64_t s_a_offset[kBlockM];  // element offset of each row in `a`, -1 = padding
  __shared__ int32_t s_assignment[kBlockM];

  const int m_block = blockIdx.x;
  const int expert = p.block_expert[m_block];
  if (expert < 0) return;  // past the used blocks (the grid is sized for the worst case)
  const int n0 = blockIdx.y * kBlockN;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warp_m = warp / Tile::kWarpsN;
  const int warp_n = warp % Tile::kWarpsN;

  for (int r = tid; r < kBlockM; r += kThreads) {
    const int assignment = p.sorted_rows[static_cast<int64_t>(m_block) * kBlockM + r];
    s_assignment[r] = assignment;
    s_a_offset[r] = assignment < 0 ? -1
                                   : static_cast<int64_t>(assignment / p.assignments_per_a_row) *
                                         p.a_row_stride;
  }
  __syncthreads();

  const bf16* a = static_cast<const bf16*>(p.a);
  const bf16* w0 = static_cast<const bf16*>(p.w0[expert]);
  const bf16* w1 = Tile::kGated ? static_cast<const bf16*>(p.w1[expert]) : w0;
  bf16* smem = reinterpret_cast<bf16*>(moe_gemm_smem);
  const int num_k_tiles = (p.k + kBlockK - 1) / kBlockK;

  // Issues the copies of k tile `k_tile` into pipeline stage `stage` (no commit).
  auto load_stage = [&](int stage, int k_tile) {
    bf16* a_tile = smem + stage * Tile::kStageElems;
    const int k0 = k_tile * kBlockK;
#pragma unroll
    for (int i = 0; i < Tile::kACopiesPerThread; ++i) {
      const int c = tid + i * kThreads;
      const int r = c / kChunksPerRow;
      const int kk = k0 + (c % kChunksPerRow) * 8;
      const int64_t offset = s_a_offset[r];
      const bool valid = offset >= 0 && kk < p.k;
      cp_async_16(a_tile + r * kRowPitch + (kk - k0), valid ? a + offset + kk : a, valid);
    }
#pragma unroll
    for (int w = 0; w < Tile::kWeights; ++w) {
      const bf16* weight = w == 0 ? w0 : w1;
      bf16* b_tile = a_tile + (kBlockM + w * kBlockN) * kRowPitch;
#pragma unroll
      for (int i = 0; i < Tile::kBCopiesPerThread; ++i) {
        const int c = tid + i * kThreads;
        const int r = c / kChunksPerRow;
        const int kk = k0 + (c % kChunksPerRow) * 8;
        const int n = n0 + r;
        const bool valid = n < p.n && kk < p.k;
        cp_async_16(b_tile + r * kRowPitch + (kk - k0),
                    valid ? weight + static_cast<int64_t>(n) * p.k + kk : weight, valid);
      }
    }
  };

  float acc[Tile::kWeights][Tile::kFragsM][Tile::kFragsN][4];
#pragma unroll
  for (int w = 0; w < Tile::kWeights; ++w) {
#pragma unroll
    for (int mi = 0; mi < Tile::kFragsM; ++mi) {
#pragma unroll
      for (int ni = 0; ni < Tile::kFragsN; ++ni) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[w][mi][ni][i] = 0.0f;
        }
      }
    }
  }

  // Prologue: kStages - 1 tiles in flight. Every iteration commits exactly one group (possibly
  // empty), so "wait until at most kStages - 2 groups are pending" always means "tile kt landed".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_k_tiles) load_stage(s, s);
    cp_async_commit();
  }

  for (int kt = 0; kt < num_k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    // Makes tile kt visible to all warps, and guarantees every warp has finished computing on
    // tile kt - 1, whose stage the prefetch below overwrites.
    __syncthreads();
    const int next = kt + kStages - 1;
    if (next < num_k_tiles) load_stage(next % kStages, next);
    cp_async_commit();

    const bf16* a_tile = smem + (kt % kStages) * Tile::kStageElems;
#pragma unroll
    for (int ks = 0; ks < kBlockK; ks += 16) {
      // A fragments: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
      // (rows 8-15, k 8-15), addressed by lanes 0-7, 8-15, 16-23, 24-31 in that order.
      uint32_t a_frag[Tile::kFragsM][4];
#pragma unroll
      for (int mi = 0; mi < Tile::kFragsM; ++mi) {
        const int row = warp_m * Tile::kWarpM + mi * 16 + lane % 16;
        ldmatrix_x4(a_frag[mi], a_tile + row * kRowPitch + ks + (lane / 16) * 8);
      }
#pragma unroll
      for (int w = 0; w < Tile::kWeights; ++w) {
        const bf16* b_tile = a_tile + (kBlockM + w * kBlockN) * kRowPitch;
#pragma unroll
        for (int ni = 0; ni < Tile::kFragsN; ++ni) {
          // B fragment: matrices (n 0-7, k 0-7) and (n 0-7, k 8-15) from lanes 0-7 and 8-15
          // (the upper lanes' addresses are ignored but stay in bounds).
          uint32_t b_frag[2];
          const int row = warp_n * Tile::kWarpN + ni * 8 + lane % 8;
          ldmatrix_x2(b_frag, b_tile + row * kRowPitch + ks + ((lane / 8) % 2) * 8);
#pragma unroll
          for (int mi = 0; mi < Tile::kFragsM; ++mi)
            mma_bf16_16816(acc[w][mi][ni], a_frag[mi], b_frag);
        }
      }
    }
  }
  // Retire the trailing (empty) groups before the CTA exits with copies still counted.
  cp_async_wait<0>();

  // Epilogue. Accumulator element i of a 16x8 piece sits at row lane / 4 (+ 8 for i >= 2),
  // column (lane % 4) * 2 + (i % 2). N is a multiple of 8, so a column pair is in or out whole.
#pragma unroll
  for (int mi = 0; mi < Tile::kFragsM; ++mi) {
#pragma unroll
    for (int ni = 0; ni < Tile::kFragsN; ++ni) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = warp_m * Tile::kWarpM + mi * 16 + half * 8 + lane / 4;
        const int n = n0 + warp_n * Tile::kWarpN + ni * 8 + (lane % 4) * 2;
        const int assignment = s_assignment[r];
        if (assignment < 0 || n >= p.n) continue;
        const float c0 = acc[0][mi][ni][half * 2];
        const float c1 = acc[0][mi][ni][half * 2 + 1];
        const int64_t out_index = static_cast<int64_t>(assignment) * p.n + n;
        if constexpr (Tile::kGated) {
          // silu(g) * u in f32, rounded once to bf16 (vLLM's intermediate precision).
          const float u0 = acc[Tile::kWeights - 1][mi][ni][half * 2];
          const float u1 = acc[Tile::kWeights - 1][mi][ni][half * 2 + 1];
          const float h0 = c0 / (1.0f + expf(-c0)) * u0;
          const float h1 = c1 / (1.0f + expf(-c1)) * u1;
          *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.out) + out_index) =
              __floats2bfloat162_rn(h0, h1);
        } else {
          const float scale = p.topk_weights[assignment];
          *reinterpret_cast<float2*>(static_cast<float*>(p.out) + out_index) =
              make_float2(c0 * scale, c1 * scale);
        }
      }
    }
  }
}

template <class Tile>
cudaError_t launch_grouped_gemm(const GroupedGemmParams& params, int num_m_blocks,
                                cudaStream_t stream) {
  if (num_m_blocks <= 0 || params.n <= 0) return cudaSuccess;
  const int n_tiles = (params.n + Tile::kBlockN - 1) / Tile::kBlockN;
  if (n_tiles > 65535) return cudaErrorInvalidValue;
  const auto kernel = moe_grouped_gemm_kernel<Tile>;
  // Above 48 KB a kernel must opt in; setting it on every call keeps multi-device processes
  // right (the limit is per device context) and is allowed while a graph is being captured.
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(Tile::kSmemBytes));
  if (err != cudaSuccess) return err;
  // blockIdx.x walks the blocks (an expert's blocks are adjacent), so CTAs that run together
  // share one weight slice through L2 and each expert's weights come from HBM about once.
  const dim3 grid(static_cast<unsigned>(num_m_blocks), static_cast<unsigned>(n_tiles));
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(params);
  return cudaGetLastError();
}

// Tile shapes per BLOCK_M. Small BLOCK_M is the decode regime (memory-bound): narrow N slices
// give many CTAs, and four stages keep ~30 KB of weight loads in flight per CTA. Larger BLOCK_M
// is prefill (tensor-core-bound): 32x32 or 32x64 warp tiles, three stages.
template <int kBlockM>
struct ExpertTiles;
template <>
struct ExpertTiles<16> {
  using GateUp = GemmTile<16, 32, 1, 4, 4, true>;
  using Down = GemmTile<16, 64, 1, 4, 4, false>;
};
template <>
struct ExpertTiles<64> {
  using GateUp = GemmTile<64, 64, 2, 2, 3, true>;
  using Down = GemmTile<64, 128, 2, 2, 3, false>;
};
template <>
struct ExpertTiles<128> {
  using GateUp = GemmTile<128, 64, 4, 2, 3, true>;
  using Down = GemmTile<128, 128, 4, 2, 3, false>;
};

template <int kBlockM>
cudaError_t launch_moe_gate_up(const GroupedGemmParams& params, int num_m_blocks,
                               cudaStream_t stream) {
  return launch_grouped_gemm<typename ExpertTiles<kBlockM>::GateUp>(params, num_m_blocks, stream);
}

template <int kBlockM>
cudaError_t launch_moe_down(const GroupedGemmParams& params, int num_m_blocks,
                            cudaStream_t stream) {
  return launch_grouped_gemm<typename ExpertTiles<kBlockM>::Down>(params, num_m_blocks, stream);
}

}  // namespace locus::cuda::moe

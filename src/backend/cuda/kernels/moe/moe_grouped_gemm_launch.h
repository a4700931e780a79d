// Host-side declarations of the grouped expert GEMMs (kernels in moe_grouped_gemm.cuh, one
// BLOCK_M per .cu file). Internal to kernels/moe: the experts launcher is the only caller.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace locus::cuda::moe {

// The BLOCK_M values that have kernels; the experts launcher picks one per call.
inline constexpr int kGemmBlockMs[] = {16, 64, 128};

// One grouped GEMM over the expert-contiguous order built by moe_align: block b (BLOCK_M rows)
// belongs to expert block_expert[b] and its rows are the assignments sorted_rows[b * BLOCK_M +
// r] (t * top_k + j, or -1 for padding). out rows are indexed by assignment.
struct GroupedGemmParams {
  const void* a = nullptr;   // bf16 rows: x (gate/up) or h (down)
  int64_t a_row_stride = 0;  // elements between consecutive rows of `a`
  // Row of `a` that assignment i reads: i / assignments_per_a_row (top_k for x, 1 for h).
  int assignments_per_a_row = 1;
  const int32_t* sorted_rows = nullptr;
  const int32_t* block_expert = nullptr;  // -1 past the used blocks: those CTAs exit at once
  const void* const* w0 = nullptr;        // device array of expert pointers: gate_w or down_w
  const void* const* w1 = nullptr;        // up_w (gate/up) or null (down)
  const float* topk_weights = nullptr;    // down only: scales each assignment's row
  void* out = nullptr;  // gate/up: h bf16 [assignments, n]; down: y f32 [assignments, n]
  int n = 0;            // output columns (weight rows)
  int k = 0;            // reduction length (weight columns), a multiple of 8
};

// h[i] = bf16(silu(a_i gate^T) * (a_i up^T)) for every assignment i of the used blocks.
template <int kBlockM>
cudaError_t launch_moe_gate_up(const GroupedGemmParams& params, int num_m_blocks,
                               cudaStream_t stream);
// y[i] = topk_weights[i] * (h_i down^T) for every assignment i of the used blocks.
template <int kBlockM>
cudaError_t launch_moe_down(const GroupedGemmParams& params, int num_m_blocks, cudaStream_t stream);

}  // namespace locus::cuda::moe

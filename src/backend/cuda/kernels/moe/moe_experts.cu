// Host entry of the routed experts: checks the shape, carves the workspace and launches
// align -> gate/up GEMM -> down GEMM -> combine on one stream. Grid sizes depend only on
// (tokens, experts, top_k), never on the routing, so the chain can be captured in a graph.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/kernels/moe/moe_align.cuh"
#include "backend/cuda/kernels/moe/moe_grouped_gemm_launch.h"
#include "backend/cuda/kernels/moe/moe_launch.h"

namespace locus::cuda {
namespace {

constexpr size_t kRegionAlignment = 256;
// Bounds the assignments (tokens x top_k) so that every padded row index fits an int.
constexpr int64_t kMaxAssignments = int64_t{1} << 26;

size_t align_region(size_t bytes) {
  return (bytes + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
}

// The most BLOCK_M blocks a routing can need: each active expert (at most min(E, assignments)
// of them) pads its rows by at most block_m - 1, so the blocks number at most
// (assignments + active * (block_m - 1)) / block_m (the true count is an integer below it).
int64_t max_m_blocks(int64_t assignments, int64_t num_experts, int64_t block_m) {
  const int64_t active = std::min(num_experts, assignments);
  return (assignments + active * (block_m - 1)) / block_m;
}

// BLOCK_M from the mean rows per expert, which the host knows. While experts see few rows
// (decode) the GEMMs are memory-bound and small blocks waste no loads; once rows per expert can
// fill them (prefill), larger blocks give fewer, fuller tensor-core tiles. Blocks of one expert
// run side by side and share its weight slices through L2 either way.
int choose_block_m(int64_t assignments, int64_t num_experts) {
  if (assignments <= 16 * num_experts) return 16;
  if (assignments <= 64 * num_experts) return 64;
  return 128;
}

bool is_valid_shape(const MoeExpertsArgs& args) {
  if (args.num_tokens < 0 || args.num_experts < 1 || args.num_experts > 1024) return false;
  if (args.top_k < 1 || args.hidden <= 0 || args.inter <= 0) return false;
  // 16-byte rows: every cp.async chunk is all in or all out of a row.
  if (args.hidden % 8 != 0 || args.inter % 8 != 0) return false;
  if (args.x_row_stride < args.hidden || args.x_row_stride % 8 != 0) return false;
  return static_cast<int64_t>(args.num_tokens) * args.top_k <= kMaxAssignments;
}

// Byte offsets into the workspace. Sized for the largest need over every BLOCK_M, so the layout
// depends on the shape only and a graph captured at T tokens replays at fewer in the same space.
struct WorkspaceLayout {
  size_t sorted_rows = 0;   // i32 [padded rows]: assignment of each row, -1 = padding
  size_t block_expert = 0;  // i32 [blocks]: expert of each BLOCK_M block, -1 = unused
  size_t h = 0;             // bf16 [assignments, inter]: silu(gate) * up, by assignment
  size_t y = 0;             // f32 [assignments, hidden]: weighted down output, by assignment
  size_t total = 0;
};

WorkspaceLayout workspace_layout(const MoeExpertsArgs& args) {
  const int64_t assignments = static_cast<int64_t>(args.num_tokens) * args.top_k;
  int64_t rows = 0;
  int64_t blocks = 0;
  for (int block_m : moe::kGemmBlockMs) {
    const int64_t b = max_m_blocks(assignments, args.num_experts, block_m);
    blocks = std::max(blocks, b);
    rows = std::max(rows, b * block_m);
  }
  WorkspaceLayout layout;
  size_t offset = 0;
  layout.sorted_rows = offset;
  offset += align_region(static_cast<size_t>(rows) * sizeof(int32_t));
  layout.block_expert = offset;
  offset += align_region(static_cast<size_t>(blocks) * sizeof(int32_t));
  layout.h = offset;
  offset += align_region(static_cast<size_t>(assignments) * args.inter * sizeof(uint16_t));
  layout.y = offset;
  offset += align_region(static_cast<size_t>(assignments) * args.hidden * sizeof(float));
  layout.total = offset;
  return layout;
}

bool is_aligned_16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

size_t moe_experts_workspace_bytes(const MoeExpertsArgs& args) {
  if (!is_valid_shape(args)) return 0;
  return workspace_layout(args).total;
}

cudaError_t launch_moe_experts(const MoeExpertsArgs& args, cudaStream_t stream) {
  if (!is_valid_shape(args)) return cudaErrorInvalidValue;
  if (args.num_tokens == 0) return cudaSuccess;
  if (args.x == nullptr || args.topk_ids == nullptr || args.topk_weights == nullptr ||
      args.gate_w == nullptr || args.up_w == nullptr || args.down_w == nullptr ||
      args.out == nullptr || args.workspace == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (!is_aligned_16(args.x) || !is_aligned_16(args.out) || !is_aligned_16(args.workspace)) {
    return cudaErrorInvalidValue;
  }
  const WorkspaceLayout layout = workspace_layout(args);
  if (args.workspace_bytes < layout.total) return cudaErrorInvalidValue;

  char* base = static_cast<char*>(args.workspace);
  auto* sorted_rows = reinterpret_cast<int32_t*>(base + layout.sorted_rows);
  auto* block_expert = reinterpret_cast<int32_t*>(base + layout.block_expert);
  void* h = base + layout.h;
  auto* y = reinterpret_cast<float*>(base + layout.y);

  const int64_t assignments = static_cast<int64_t>(args.num_tokens) * args.top_k;
  const int block_m = choose_block_m(assignments, args.num_experts);
  const int num_m_blocks = static_cast<int>(max_m_blocks(assignments, args.num_experts, block_m));

  moe::moe_align_kernel<<<1, moe::align_warps(args.num_experts) * 32,
                          moe::align_smem_bytes(args.num_experts), stream>>>(
      args.topk_ids, static_cast<int>(assignments), args.num_experts, block_m, num_m_blocks,
      sorted_rows, block_expert);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  moe::GroupedGemmParams gate_up;
  gate_up.a = args.x;
  gate_up.a_row_stride = args.x_row_stride;
  gate_up.assignments_per_a_row = args.top_k;  // assignment t * top_k + j reads token t
  gate_up.sorted_rows = sorted_rows;
  gate_up.block_expert = block_expert;
  gate_up.w0 = args.gate_w;
  gate_up.w1 = args.up_w;
  gate_up.out = h;
  gate_up.n = args.inter;
  gate_up.k = args.hidden;

  moe::GroupedGemmParams down;
  down.a = h;
  down.a_row_stride = args.inter;
  down.assignments_per_a_row = 1;
  down.sorted_rows = sorted_rows;
  down.block_expert = block_expert;
  down.w0 = args.down_w;
  down.topk_weights = args.topk_weights;
  down.out = y;
  down.n = args.hidden;
  down.k = args.inter;

  switch (block_m) {
    case 16:
      err = moe::launch_moe_gate_up<16>(gate_up, num_m_blocks, stream);
      if (err == cudaSuccess) err = moe::launch_moe_down<16>(down, num_m_blocks, stream);
      break;
    case 64:
      err = moe::launch_moe_gate_up<64>(gate_up, num_m_blocks, stream);
      if (err == cudaSuccess) err = moe::launch_moe_down<64>(down, num_m_blocks, stream);
      break;
    default:
      err = moe::launch_moe_gate_up<128>(gate_up, num_m_blocks, stream);
      if (err == cudaSuccess) err = moe::launch_moe_down<128>(down, num_m_blocks, stream);
      break;
  }
  if (err != cudaSuccess) return err;

  constexpr int kCombineThreads = 256;
  const int64_t vectors = static_cast<int64_t>(args.num_tokens) * (args.hidden / 4);
  const auto combine_blocks =
      static_cast<unsigned>((vectors + kCombineThreads - 1) / kCombineThreads);
  moe::moe_combine_kernel<<<combine_blocks, kCombineThreads, 0, stream>>>(
      y, args.topk_ids, args.num_experts, args.num_tokens, args.top_k, args.hidden,
      static_cast<__nv_bfloat16*>(args.out));
  return cudaGetLastError();
}

}  // namespace locus::cuda

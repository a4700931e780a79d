// Host entry points of the small-batch GEMV kernels: y = x W^T for a handful of rows (decode),
// where a tensor-core GEMM tile wastes most of its rows and cuBLAS picks kernels far from the
// memory roofline. Every output row is one warp streaming its weight row with 16-byte loads;
// x sits in shared memory. No host synchronization, no allocation: graph-capturable.
// The dense launches use programmatic dependent launch (sm_90): a GEMV starts while the kernel
// before it finishes and pulls its weights into L2 before it waits for that kernel's output.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/kernels/moe/moe_launch.h"

namespace locus::cuda {

// Which kernels the launches below use. kAuto: the bulk-copy streaming kernels
// (gemv_stream.cuh) for the dense launches wherever the shape fits their shared memory, the
// warp kernels for the experts (LOCUS_CUDA_GEMV_STREAM = 0 / dense / moe / all changes that);
// kStream / kWarp force one family (kStream still falls back for shapes it cannot take). Both
// give identical results; the switch exists to measure one against the other.
enum class GemvKernels { kAuto, kStream, kWarp };
void set_gemv_kernels(GemvKernels kernels);

// Tests: the expert gate_up GEMV with `rows` (1 or 2) intermediate rows per warp and, for the
// folded router's launch, its early weight loads on or off. All variants give identical bits.
// rows 0 restores the defaults (LOCUS_CUDA_GATE_UP_ROWS / LOCUS_CUDA_GATE_UP_EARLY).
void set_gate_up_variant(int rows, bool early);

// Whether the streaming kernels would take a dense launch of m rows of length k, or both
// halves of a MoE launch (used by tests and benchmarks to know which family they measure).
bool gemv_stream_fits(int m, int k);
struct MoeGemvArgs;
bool moe_gemv_stream_fits(const MoeGemvArgs& args);

// The most rows a GEMV launch takes; larger batches belong to the tensor-core GEMMs.
inline constexpr int kGemvMaxRows = 8;

// Whether launch_gemv takes this shape: 1 <= m <= kGemvMaxRows, k a multiple of 8 whose x rows
// fit in shared memory (m * k * 2 bytes <= 96 KiB), n >= 1.
bool gemv_supported(int m, int n, int k);

// y[i, j] = sum_k x[i, k] * w[j, k] for i < m, j < n. x bf16 rows of stride x_row_stride
// elements; w bf16 row-major [n, k] (nn.Linear); y contiguous [m, n], f32 when y_f32 else bf16.
// Accumulation in f32. x, w 16-byte aligned, x_row_stride a multiple of 8.
cudaError_t launch_gemv(const void* x, int64_t x_row_stride, const void* w, void* y, bool y_f32,
                        int m, int n, int k, cudaStream_t stream);

// Several weights that read the same x, as one launch (fused QKV): output columns
// [0, rows_0) come from segment 0, the next rows_1 from segment 1, and so on; each segment may
// add an f32 bias. y is contiguous [m, sum of rows] (bf16, or f32 when y_f32).
inline constexpr int kGemvMaxSegments = 4;
struct GemvSegment {
  const void* w = nullptr;      // bf16 [rows, k], 16-byte aligned
  const float* bias = nullptr;  // [rows] or null
  int rows = 0;
};
struct GemvSegments {
  GemvSegment seg[kGemvMaxSegments];
  int count = 0;
};
// The pre-norm step (Ops::AddRmsNorm) a dense GEMV can run on its input itself: every CTA
// computes x = rms_norm(residual + delta) * weight for the m rows (bf16 [m, k] contiguous,
// weight f32 [k], all 16-byte aligned), with add_rms_norm's arithmetic, and CTA 0 writes
// residual_out and normed. residual_out must not alias residual or delta (other CTAs may still
// be reading them). The fused router (launch_gemv_route) takes it only where it streams;
// cudaErrorNotSupported tells the caller to run the two ops instead.
struct GemvAddRmsNorm {
  const void* residual = nullptr;
  const void* delta = nullptr;
  const float* weight = nullptr;
  float eps = 0.0f;
  void* residual_out = nullptr;
  void* normed = nullptr;
};

// With `pre`, x and x_row_stride are ignored.
cudaError_t launch_gemv_segments(const void* x, int64_t x_row_stride, const GemvSegments& w,
                                 void* y, bool y_f32, int m, int k, cudaStream_t stream,
                                 const GemvAddRmsNorm* pre = nullptr);

// The MoE router and routing in one launch (streaming kernels only): logits f32 [m, E] =
// x W^T with W bf16 [E, k] (E = route.num_experts, route.num_tokens = m), then
// launch_moe_route's contract on them, run by the last CTA to finish. `counter` is a zeroed
// int the launch leaves zero. cudaErrorNotSupported: the caller runs the two ops instead.
cudaError_t launch_gemv_route(const void* x, int64_t x_row_stride, const void* w, float* logits,
                              int m, int k, const MoeRouteArgs& route, int* counter,
                              cudaStream_t stream, const GemvAddRmsNorm* pre = nullptr);

// The folded router (gemv_fold_route.cuh; experiment): for softmax routing without a bias,
// raw[m, e] = Wg[e] . residual[m] + Mf[e] . x[m] (Wg = Wr * g, Mf = Wg Wo) orders the experts as
// the router's logits do, so it runs beside the o projection. logits gets raw f32 [M, E]; the
// picks and weights are left to the expert launches (MoeGemvArgs::fold).
struct FoldRouteArgs {
  const void* mf = nullptr;        // bf16 [E, k]
  const void* wg = nullptr;        // bf16 [E, n]
  const void* residual = nullptr;  // bf16 [M, n], the pre-norm step's residual
  float* logits = nullptr;         // [M, E] raw
  int experts = 0;
};
// y bf16 [m, n] = x W^T plus f. cudaErrorNotSupported: the caller runs something else.
cudaError_t launch_gemv_fold_route(const void* x, int64_t x_row_stride, const void* w, void* y,
                                   int m, int n, int k, const FoldRouteArgs& f,
                                   cudaStream_t stream);
// Mf and Wg from Wr bf16 [E, n], g f32 [n], Wo bf16 [n, k] (once per layer).
cudaError_t launch_fold_router_weights(const void* wr, const float* g, const void* wo, void* mf,
                                       void* wg, int experts, int n, int k, cudaStream_t stream);

// What the expert launches do for a folded router: every gate_up CTA runs the pre-norm step on
// its token's row (residual + delta, the o projection's output) instead of reading x and picks
// the top-k of the raw logits itself (ties to the lower index), as every down CTA does; gate_up
// writes topk_ids, and turns raw logits into topk_weights as route_token does with logits
// raw / rms. Then topk_ids and topk_weights are outputs, not inputs.
struct MoeFoldArgs {
  GemvAddRmsNorm pre;
  const float* logits = nullptr;    // raw [T, E]
  float* logits_out = nullptr;      // [T, E], written: raw / rms, the router's logits
  int32_t* topk_ids_out = nullptr;  // [T, top_k], written
  float* topk_weights = nullptr;    // [T, top_k], written
  int experts = 0;
  bool renormalize = false;
  float scale = 1.0f;
};
// Whether launch_moe_gemv takes a fold for this many tokens (the warp expert kernels only).
bool moe_gemv_fold_ok(int num_tokens, int top_k, int experts);

// The routed experts for a few tokens (the contract of MoeExpertsArgs in moe/moe_launch.h):
// h[t, j] = bf16(silu(gate_e . x_t) * (up_e . x_t)) for e = topk_ids[t, j], then
// out[t] = bf16(sum_j topk_weights[t, j] * (down_e . h[t, j])) summed in j order. Each expert's
// rows are read once per (token, j) pair, which is the whole cost when pairs rarely share an
// expert (decode at small batch).
struct MoeGemvArgs {
  const void* x = nullptr;
  int64_t x_row_stride = 0;
  const int32_t* topk_ids = nullptr;    // [T, top_k]
  const float* topk_weights = nullptr;  // [T, top_k]
  const void* const* gate_w = nullptr;  // [E] device pointers to [inter, hidden]
  const void* const* up_w = nullptr;    // [E] -> [inter, hidden]
  const void* const* down_w = nullptr;  // [E] -> [hidden, inter]
  void* out = nullptr;                  // bf16 [T, hidden]
  int num_tokens = 0;
  int num_experts = 0;
  int top_k = 0;
  int hidden = 0;
  int inter = 0;
  void* workspace = nullptr;  // moe_gemv_workspace_bytes(*this) bytes
  size_t workspace_bytes = 0;
  const MoeFoldArgs* fold = nullptr;  // with it, x is fold->pre's normed output (written here)
};

// The most (token, expert) pairs the GEMV path is meant for; the grouped GEMMs take over above.
inline constexpr int kMoeGemvMaxPairs = 32;

bool moe_gemv_supported(const MoeGemvArgs& args);
size_t moe_gemv_workspace_bytes(const MoeGemvArgs& args);
cudaError_t launch_moe_gemv(const MoeGemvArgs& args, cudaStream_t stream);

}  // namespace locus::cuda

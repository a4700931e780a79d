// Launchers of the small-batch GEMV kernels: shape checks, the M dispatch, grids.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "backend/cuda/kernels/gemv/gemv_fold_route.cuh"
#include "backend/cuda/kernels/gemv/gemv_stream.cuh"

namespace locus::cuda {
namespace {

using gemv::bf16;

// Raises a kernel's dynamic shared memory limit when it needs more than the default 48 KiB. A
// function attribute, not a stream operation: allowed while a graph is being captured.
template <typename Kernel>
cudaError_t allow_smem(Kernel* kernel, size_t smem) {
  if (smem <= 48u * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(smem));
}

template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, int threads, size_t smem,
                       cudaStream_t stream, Args&&... args) {
  return cuda::launch_pdl(kernel, grid, dim3(static_cast<unsigned>(threads)), smem, stream,
                          std::forward<Args>(args)...);
}

template <int M>
cudaError_t launch_dense(const void* x, int64_t x_stride, const GemvSegments& w, void* y,
                         bool y_f32, int n, int k, cudaStream_t stream, const GemvAddRmsNorm& pre) {
  const size_t smem = static_cast<size_t>(M) * static_cast<size_t>(k) * sizeof(bf16);
  const int rows_per_cta = gemv::kWarps * gemv::kRowsPerWarp;
  const dim3 grid(static_cast<unsigned>((n + rows_per_cta - 1) / rows_per_cta));
  auto* kernel = y_f32 ? gemv::dense_gemv_kernel<M, true> : gemv::dense_gemv_kernel<M, false>;
  const cudaError_t err = allow_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  return launch_pdl(kernel, grid, gemv::kThreads, smem, stream, static_cast<const bf16*>(x),
                    x_stride, w, y, n, k, pre);
}

// Whether environment variable `name` is unset or set to anything but `off`.
bool env_not(const char* name, const char* off) {
  const char* v = std::getenv(name);
  return v == nullptr || std::string(v) != off;
}

// The streaming kernels (gemv_stream.cuh): one CTA per SM, `stages` copies in flight.
GemvKernels g_kernels = GemvKernels::kAuto;

// set_gate_up_variant: 0 = the environment's defaults.
int g_up_rows = 0;
bool g_up_early = true;

// Which launches the streaming kernels take by default: LOCUS_CUDA_GEMV_STREAM = dense (the
// projections and the fused router; the default), router (the fused router only), 1 / all,
// moe (the experts), or 0 (none). Measured on the H200 at batch 1 (PDL off, per kernel): the
// dense ones gain a little over the warp kernels, the expert ones lose (gate_up 18.2 vs
// 17.2 us, down 15.2 vs 10.7 us).
enum class StreamUse { kDense = 1, kMoe = 2, kRouter = 4 };
bool stream_enabled(StreamUse use) {
  if (g_kernels != GemvKernels::kAuto) return g_kernels == GemvKernels::kStream;
  static const int mask = [] {
    const char* v = std::getenv("LOCUS_CUDA_GEMV_STREAM");
    const std::string s = v != nullptr ? v : "dense";
    if (s == "1" || s == "all") return 7;
    if (s == "dense") return 5;
    if (s == "router") return 4;
    if (s == "moe") return 2;
    return 0;
  }();
  return (mask & static_cast<int>(use)) != 0;
}

int sm_count() {
  static const int count = [] {
    int device = 0, n = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return 1;
    return n > 0 ? n : 1;
  }();
  return count;
}

// Weight stages get up to this much shared memory; more buys nothing once each SM has a few
// DRAM latencies' worth of bytes in flight (~36 GB/s per SM x ~2 us = ~72 KB).
constexpr size_t kStageBudget = 192u << 10;
constexpr size_t kActivationBudget = 64u << 10;
// The opt-in limit (227 KB on sm_90) less 1 KB for the kernels' static shared memory (the
// pre-norm prologue's partial sums, the router's last-CTA flag).
constexpr size_t kMaxBlockSmem = (227u << 10) - 1024;

struct StreamPlan {
  int stages = 0;  // 0: the shape does not fit; use the warp kernels
  size_t smem = 0;
};

StreamPlan stream_plan(size_t activation_bytes, size_t stage_bytes) {
  StreamPlan plan;
  if (activation_bytes > kActivationBudget || stage_bytes == 0) return plan;
  // Everything must also fit one CTA's opt-in limit (227 KB on sm_90).
  const size_t fixed = gemv::kBarrierBytes + gemv::round_up_128(activation_bytes);
  if (fixed >= kMaxBlockSmem) return plan;
  size_t stages = std::min(kStageBudget, kMaxBlockSmem - fixed) / stage_bytes;
  if (stages > static_cast<size_t>(gemv::kMaxStages)) stages = gemv::kMaxStages;
  if (stages < 2) return plan;
  plan.stages = static_cast<int>(stages);
  plan.smem = fixed + stages * stage_bytes;
  return plan;
}

unsigned stream_grid(int64_t units) {
  return static_cast<unsigned>(units < sm_count() ? units : sm_count());
}

template <int M>
cudaError_t launch_dense_stream(const StreamPlan& plan, const void* x, int64_t x_stride,
                                const GemvSegments& w, void* y, bool y_f32, int n, int k,
                                cudaStream_t stream, const GemvAddRmsNorm& pre) {
  auto* kernel =
      y_f32 ? gemv::dense_gemv_stream_kernel<M, true> : gemv::dense_gemv_stream_kernel<M, false>;
  const cudaError_t err = allow_smem(kernel, plan.smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(stream_grid((n + gemv::kUnitRows - 1) / gemv::kUnitRows));
  return launch_pdl(kernel, grid, gemv::kStreamThreads, plan.smem, stream,
                    static_cast<const bf16*>(x), x_stride, w, y, n, k, plan.stages, MoeRouteArgs{},
                    static_cast<int*>(nullptr), pre);
}

template <int M>
cudaError_t launch_dense_any(const void* x, int64_t x_stride, const GemvSegments& w, void* y,
                             bool y_f32, int n, int k, cudaStream_t stream,
                             const GemvAddRmsNorm* pre) {
  const StreamPlan plan = stream_enabled(StreamUse::kDense)
                              ? stream_plan(static_cast<size_t>(M) * k * sizeof(bf16),
                                            static_cast<size_t>(gemv::kUnitRows) * k * sizeof(bf16))
                              : StreamPlan{};
  const GemvAddRmsNorm no_pre;
  if (plan.stages > 0)
    return launch_dense_stream<M>(plan, x, x_stride, w, y, y_f32, n, k, stream,
                                  pre != nullptr ? *pre : no_pre);
  return launch_dense<M>(x, x_stride, w, y, y_f32, n, k, stream, pre != nullptr ? *pre : no_pre);
}

bool aligned_16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

bool pre_norm_ok(const GemvAddRmsNorm& pre) {
  return pre.residual != nullptr && pre.delta != nullptr && pre.weight != nullptr &&
         pre.residual_out != nullptr && pre.normed != nullptr && aligned_16(pre.residual) &&
         aligned_16(pre.delta) && aligned_16(pre.weight) && aligned_16(pre.residual_out) &&
         aligned_16(pre.normed) && pre.residual_out != pre.residual &&
         pre.residual_out != pre.delta;
}

}  // namespace

bool gemv_supported(int m, int n, int k) {
  return m >= 1 && m <= kGemvMaxRows && n >= 1 && k >= 8 && k % 8 == 0 &&
         static_cast<size_t>(m) * static_cast<size_t>(k) * sizeof(bf16) <= gemv::kMaxSharedBytes;
}

cudaError_t launch_gemv_segments(const void* x, int64_t x_row_stride, const GemvSegments& w,
                                 void* y, bool y_f32, int m, int k, cudaStream_t stream,
                                 const GemvAddRmsNorm* pre) {
  if (w.count < 1 || w.count > kGemvMaxSegments) return cudaErrorInvalidValue;
  int n = 0;
  for (int s = 0; s < w.count; ++s) {
    if (w.seg[s].rows < 1 || !aligned_16(w.seg[s].w)) return cudaErrorInvalidValue;
    n += w.seg[s].rows;
  }
  if (pre != nullptr) {
    if (!pre_norm_ok(*pre)) return cudaErrorInvalidValue;
    x = nullptr;
    x_row_stride = k;
  } else if (x_row_stride < k || x_row_stride % 8 != 0 || !aligned_16(x)) {
    return cudaErrorInvalidValue;
  }
  if (!gemv_supported(m, n, k) || y == nullptr) return cudaErrorInvalidValue;
  switch (m) {
    case 1:
      return launch_dense_any<1>(x, x_row_stride, w, y, y_f32, n, k, stream, pre);
    case 2:
      return launch_dense_any<2>(x, x_row_stride, w, y, y_f32, n, k, stream, pre);
    case 3:
      return launch_dense_any<3>(x, x_row_stride, w, y, y_f32, n, k, stream, pre);
    case 4:
      return launch_dense_any<4>(x, x_row_stride, w, y, y_f32, n, k, stream, pre);
    case 5:
      return launch_dense_any<5>(x, x_row_stride, w, y, y_f32, n, k, stream, pre);
    case 6:
      return launch_dense_any<6>(x, x_row_stride, w, y, y_f32, n, k, stream, pre);
    case 7:
      return launch_dense_any<7>(x, x_row_stride, w, y, y_f32, n, k, stream, pre);
    default:
      return launch_dense_any<8>(x, x_row_stride, w, y, y_f32, n, k, stream, pre);
  }
}

cudaError_t launch_gemv(const void* x, int64_t x_row_stride, const void* w, void* y, bool y_f32,
                        int m, int n, int k, cudaStream_t stream) {
  GemvSegments segments;
  segments.seg[0].w = w;
  segments.seg[0].rows = n;
  segments.count = 1;
  return launch_gemv_segments(x, x_row_stride, segments, y, y_f32, m, k, stream);
}

bool moe_gemv_supported(const MoeGemvArgs& a) {
  if (a.num_tokens < 1 || a.num_experts < 1 || a.top_k < 1 || a.hidden < 8 || a.inter < 8)
    return false;
  if (a.hidden % 8 != 0 || a.inter % 8 != 0) return false;
  if (a.x_row_stride < a.hidden || a.x_row_stride % 8 != 0) return false;
  if (static_cast<int64_t>(a.num_tokens) * a.top_k > kMoeGemvMaxPairs) return false;
  return static_cast<size_t>(a.hidden) * sizeof(bf16) <= gemv::kMaxSharedBytes &&
         static_cast<size_t>(a.top_k) * static_cast<size_t>(a.inter) * sizeof(bf16) <=
             gemv::kMaxSharedBytes;
}

size_t moe_gemv_workspace_bytes(const MoeGemvArgs& a) {
  return static_cast<size_t>(a.num_tokens) * static_cast<size_t>(a.top_k) *
         static_cast<size_t>(a.inter) * sizeof(bf16);
}

cudaError_t launch_moe_gemv(const MoeGemvArgs& a, cudaStream_t stream) {
  if (!moe_gemv_supported(a) || a.x == nullptr || a.out == nullptr || a.topk_ids == nullptr ||
      a.topk_weights == nullptr || a.gate_w == nullptr || a.up_w == nullptr ||
      a.down_w == nullptr || !aligned_16(a.x) || a.workspace == nullptr ||
      !aligned_16(a.workspace) || a.workspace_bytes < moe_gemv_workspace_bytes(a))
    return cudaErrorInvalidValue;
  auto* h = static_cast<bf16*>(a.workspace);
  const int pairs = a.num_tokens * a.top_k;
  cudaError_t err;
  const bool moe_stream = stream_enabled(StreamUse::kMoe);
  const StreamPlan up_plan =
      !moe_stream ? StreamPlan{}
                  : stream_plan(static_cast<size_t>(a.num_tokens) * a.hidden * sizeof(bf16),
                                2 * static_cast<size_t>(gemv::kUnitRows) * a.hidden * sizeof(bf16));
  if (a.fold != nullptr && up_plan.stages > 0) return cudaErrorNotSupported;
  if (up_plan.stages > 0) {
    err = allow_smem(gemv::moe_gate_up_stream_kernel, up_plan.smem);
    if (err != cudaSuccess) return err;
    const int64_t units =
        static_cast<int64_t>(pairs) * ((a.inter + gemv::kUnitRows - 1) / gemv::kUnitRows);
    err = launch_pdl(gemv::moe_gate_up_stream_kernel, dim3(stream_grid(units)),
                     gemv::kStreamThreads, up_plan.smem, stream, static_cast<const bf16*>(a.x),
                     a.x_row_stride, a.topk_ids, a.gate_w, a.up_w, h, a.num_tokens, a.num_experts,
                     a.top_k, a.hidden, a.inter, up_plan.stages);
  } else {
    const size_t up_smem = static_cast<size_t>(a.hidden) * sizeof(bf16);
    // Two intermediate rows per warp (LOCUS_CUDA_GATE_UP_ROWS=1: one, twice the CTAs); the
    // fold's early weight loads (LOCUS_CUDA_GATE_UP_EARLY=0: none). docs/benchmarks.md has both.
    static const bool env_two_rows = env_not("LOCUS_CUDA_GATE_UP_ROWS", "1");
    static const bool env_early = env_not("LOCUS_CUDA_GATE_UP_EARLY", "0");
    const bool two_rows = g_up_rows == 0 ? env_two_rows : g_up_rows == 2;
    const bool early = g_up_rows == 0 ? env_early : g_up_early;
    using UpKernel = decltype(&gemv::moe_gate_up_gemv_kernel<false, 1, 0>);
    UpKernel up_kernel;
    if (a.fold == nullptr) {
      up_kernel = two_rows ? gemv::moe_gate_up_gemv_kernel<false, 2, 0>
                           : gemv::moe_gate_up_gemv_kernel<false, 1, 0>;
    } else if (two_rows) {
      up_kernel = early ? gemv::moe_gate_up_gemv_kernel<true, 2, 2>
                        : gemv::moe_gate_up_gemv_kernel<true, 2, 0>;
    } else {
      up_kernel = early ? gemv::moe_gate_up_gemv_kernel<true, 1, 4>
                        : gemv::moe_gate_up_gemv_kernel<true, 1, 0>;
    }
    const int rows = two_rows ? 2 : 1;
    err = allow_smem(up_kernel, up_smem);
    if (err != cudaSuccess) return err;
    const int rows_per_cta = gemv::kWarps * rows;
    const dim3 up_grid(static_cast<unsigned>((a.inter + rows_per_cta - 1) / rows_per_cta),
                       static_cast<unsigned>(pairs));
    err = launch_pdl(up_kernel, up_grid, gemv::kThreads, up_smem, stream,
                     static_cast<const bf16*>(a.x), a.x_row_stride, a.topk_ids, a.gate_w, a.up_w, h,
                     a.num_experts, a.top_k, a.hidden, a.inter,
                     a.fold != nullptr ? *a.fold : MoeFoldArgs{});
  }
  if (err != cudaSuccess) return err;
  const StreamPlan down_plan =
      !moe_stream
          ? StreamPlan{}
          : stream_plan(static_cast<size_t>(pairs) * a.inter * sizeof(bf16),
                        static_cast<size_t>(a.top_k) * gemv::kUnitRows * a.inter * sizeof(bf16));
  if (down_plan.stages > 0) {
    err = allow_smem(gemv::moe_down_stream_kernel, down_plan.smem);
    if (err != cudaSuccess) return err;
    const int64_t units =
        static_cast<int64_t>(a.num_tokens) * ((a.hidden + gemv::kUnitRows - 1) / gemv::kUnitRows);
    return launch_pdl(gemv::moe_down_stream_kernel, dim3(stream_grid(units)), gemv::kStreamThreads,
                      down_plan.smem, stream, static_cast<const bf16*>(h), a.topk_ids,
                      a.topk_weights, a.down_w, static_cast<bf16*>(a.out), a.num_tokens,
                      a.num_experts, a.top_k, a.hidden, a.inter, down_plan.stages);
  }
  const size_t down_smem =
      static_cast<size_t>(a.top_k) * static_cast<size_t>(a.inter) * sizeof(bf16);
  // LOCUS_CUDA_DOWN_PRELOAD=0: no weight loads before pdl_wait (to measure them).
  static const bool preload = [] {
    const char* v = std::getenv("LOCUS_CUDA_DOWN_PRELOAD");
    return v == nullptr || std::string(v) != "0";
  }();
  auto* down_kernel =
      a.fold != nullptr
          ? (preload ? gemv::moe_down_gemv_kernel<2, true> : gemv::moe_down_gemv_kernel<0, true>)
          : (preload ? gemv::moe_down_gemv_kernel<2, false> : gemv::moe_down_gemv_kernel<0, false>);
  err = allow_smem(down_kernel, down_smem);
  if (err != cudaSuccess) return err;
  const dim3 down_grid(static_cast<unsigned>((a.hidden + gemv::kWarps - 1) / gemv::kWarps),
                       static_cast<unsigned>(a.num_tokens));
  return launch_pdl(down_kernel, down_grid, gemv::kThreads, down_smem, stream,
                    static_cast<const bf16*>(h), a.topk_ids, a.topk_weights, a.down_w,
                    static_cast<bf16*>(a.out), a.num_experts, a.top_k, a.hidden, a.inter,
                    a.fold != nullptr ? *a.fold : MoeFoldArgs{});
}

cudaError_t launch_gemv_route(const void* x, int64_t x_row_stride, const void* w, float* logits,
                              int m, int k, const MoeRouteArgs& route, int* counter,
                              cudaStream_t stream, const GemvAddRmsNorm* pre) {
  MoeRouteArgs r = route;
  if (pre != nullptr) {
    if (!pre_norm_ok(*pre)) return cudaErrorNotSupported;
    x = nullptr;
    x_row_stride = k;
  } else if (x_row_stride < k || x_row_stride % 8 != 0 || !aligned_16(x)) {
    return cudaErrorNotSupported;
  }
  if (m < 1 || m > kGemvMaxRows || k < 8 || k % 8 != 0 || !aligned_16(w) || logits == nullptr ||
      counter == nullptr || route.num_tokens != m || !moe_route_supported(route, &r.n_group))
    return cudaErrorNotSupported;
  if (!stream_enabled(StreamUse::kRouter)) return cudaErrorNotSupported;
  const StreamPlan plan = stream_plan(static_cast<size_t>(m) * k * sizeof(bf16),
                                      static_cast<size_t>(gemv::kUnitRows) * k * sizeof(bf16));
  const size_t scratch = static_cast<size_t>(gemv::kConsumerWarps) *
                         moe::route_scratch_floats(r.num_experts, r.n_group) * sizeof(float);
  if (plan.stages == 0 || scratch > plan.stages * static_cast<size_t>(gemv::kUnitRows) * k * 2)
    return cudaErrorNotSupported;
  r.logits = logits;
  GemvSegments segs;
  segs.seg[0].w = w;
  segs.seg[0].rows = r.num_experts;
  segs.count = 1;
  const int n = r.num_experts;
  const dim3 grid(stream_grid((n + gemv::kUnitRows - 1) / gemv::kUnitRows));
  auto launch = [&](auto* kernel) {
    const cudaError_t err = allow_smem(kernel, plan.smem);
    if (err != cudaSuccess) return err;
    return launch_pdl(kernel, grid, gemv::kStreamThreads, plan.smem, stream,
                      static_cast<const bf16*>(x), x_row_stride, segs, static_cast<void*>(logits),
                      n, k, plan.stages, r, counter, pre != nullptr ? *pre : GemvAddRmsNorm{});
  };
  switch (m) {
    case 1:
      return launch(gemv::dense_gemv_stream_kernel<1, true, true>);
    case 2:
      return launch(gemv::dense_gemv_stream_kernel<2, true, true>);
    case 3:
      return launch(gemv::dense_gemv_stream_kernel<3, true, true>);
    case 4:
      return launch(gemv::dense_gemv_stream_kernel<4, true, true>);
    case 5:
      return launch(gemv::dense_gemv_stream_kernel<5, true, true>);
    case 6:
      return launch(gemv::dense_gemv_stream_kernel<6, true, true>);
    case 7:
      return launch(gemv::dense_gemv_stream_kernel<7, true, true>);
    default:
      return launch(gemv::dense_gemv_stream_kernel<8, true, true>);
  }
}

bool moe_gemv_fold_ok(int num_tokens, int top_k, int experts) {
  return num_tokens >= 1 && num_tokens <= 4 && top_k >= 1 && top_k <= 32 && top_k <= experts &&
         experts <= gemv::kFoldMaxExperts && num_tokens * top_k <= kMoeGemvMaxPairs &&
         !stream_enabled(StreamUse::kMoe);
}

cudaError_t launch_gemv_fold_route(const void* x, int64_t x_row_stride, const void* w, void* y,
                                   int m, int n, int k, const FoldRouteArgs& f,
                                   cudaStream_t stream) {
  if (x_row_stride < k || x_row_stride % 8 != 0 || !aligned_16(x) || !aligned_16(w) ||
      !aligned_16(y) || !aligned_16(f.mf) || !aligned_16(f.wg) || !aligned_16(f.residual))
    return cudaErrorNotSupported;
  if (m < 1 || m > 4 || k < 8 || k % 8 != 0 || n < 8 || n % 8 != 0 || f.logits == nullptr ||
      f.experts < 1)
    return cudaErrorNotSupported;
  if (!stream_enabled(StreamUse::kDense)) return cudaErrorNotSupported;
  const size_t xs_bytes = gemv::round_up_128(static_cast<size_t>(m) * k * sizeof(bf16));
  const size_t rs_bytes = gemv::round_up_128(static_cast<size_t>(m) * n * sizeof(bf16));
  const size_t fr_bytes = static_cast<size_t>(gemv::kFoldExperts) * (k + n) * sizeof(bf16);
  const size_t stage_bytes = static_cast<size_t>(gemv::kUnitRows) * k * sizeof(bf16);
  const size_t fixed = gemv::kBarrierBytes + xs_bytes + rs_bytes + fr_bytes;
  if (fixed >= kMaxBlockSmem) return cudaErrorNotSupported;
  const size_t stages = std::min<size_t>(
      std::min(kStageBudget, kMaxBlockSmem - fixed) / stage_bytes, gemv::kMaxStages - 1);
  if (stages < 2) return cudaErrorNotSupported;
  const unsigned grid = stream_grid((n + gemv::kUnitRows - 1) / gemv::kUnitRows);
  const int router_ctas = (f.experts + gemv::kFoldExperts - 1) / gemv::kFoldExperts;
  if (static_cast<int>(grid) < router_ctas) return cudaErrorNotSupported;
  const size_t smem = fixed + stages * stage_bytes;
  auto launch = [&](auto* kernel) {
    const cudaError_t err = allow_smem(kernel, smem);
    if (err != cudaSuccess) return err;
    return launch_pdl(kernel, dim3(grid), gemv::kStreamThreads, smem, stream,
                      static_cast<const bf16*>(x), x_row_stride, static_cast<const bf16*>(w),
                      static_cast<bf16*>(y), n, k, static_cast<int>(stages), f);
  };
  switch (m) {
    case 1:
      return launch(gemv::fold_route_stream_kernel<1>);
    case 2:
      return launch(gemv::fold_route_stream_kernel<2>);
    case 3:
      return launch(gemv::fold_route_stream_kernel<3>);
    default:
      return launch(gemv::fold_route_stream_kernel<4>);
  }
}

cudaError_t launch_fold_router_weights(const void* wr, const float* g, const void* wo, void* mf,
                                       void* wg, int experts, int n, int k, cudaStream_t stream) {
  const dim3 grid(
      static_cast<unsigned>((k + 255) / 256),
      static_cast<unsigned>((experts + gemv::kFoldBuildExperts - 1) / gemv::kFoldBuildExperts));
  gemv::fold_router_weights_kernel<<<grid, 256, 0, stream>>>(
      static_cast<const bf16*>(wr), g, static_cast<const bf16*>(wo), static_cast<bf16*>(mf),
      static_cast<bf16*>(wg), experts, n, k);
  return cudaGetLastError();
}

void set_gemv_kernels(GemvKernels kernels) {
  g_kernels = kernels;
}

void set_gate_up_variant(int rows, bool early) {
  g_up_rows = rows == 1 || rows == 2 ? rows : 0;
  g_up_early = early;
}

bool gemv_stream_fits(int m, int k) {
  return m >= 1 && m <= kGemvMaxRows && k >= 8 && k % 8 == 0 &&
         stream_plan(static_cast<size_t>(m) * k * sizeof(bf16),
                     static_cast<size_t>(gemv::kUnitRows) * k * sizeof(bf16))
                 .stages > 0;
}

bool moe_gemv_stream_fits(const MoeGemvArgs& a) {
  if (!moe_gemv_supported(a)) return false;
  const size_t pairs = static_cast<size_t>(a.num_tokens) * a.top_k;
  return stream_plan(static_cast<size_t>(a.num_tokens) * a.hidden * sizeof(bf16),
                     2 * static_cast<size_t>(gemv::kUnitRows) * a.hidden * sizeof(bf16))
                 .stages > 0 &&
         stream_plan(pairs * a.inter * sizeof(bf16),
                     static_cast<size_t>(a.top_k) * gemv::kUnitRows * a.inter * sizeof(bf16))
                 .stages > 0;
}

}  // namespace locus::cuda

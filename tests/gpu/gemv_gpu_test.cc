// The small-batch GEMV kernels: the bulk-copy streaming family against the register-streaming
// warp family (bit-identical by construction: same per-lane chunk order, same reduction) and
// both against a double-precision host reference. Shapes cover partial 8-row units, segments
// that start inside a unit, biases, f32 output, unrouted experts (-1) and several tokens.
// SKIPPED where no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/device.h"
#include "core/float_convert.h"
#include "gpu/gpu_test_util.h"

#ifdef LOCUS_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/kernels/gemv/gemv_launch.h"
#include "gpu/late_writer.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

TEST(GpuGemv, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

class GpuGemv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (query_devices().gpus.empty()) GTEST_SKIP() << "no CUDA GPU";
  }
  void TearDown() override {
    cuda::set_gemv_kernels(cuda::GemvKernels::kAuto);
    cuda::set_gate_up_variant(0, true);
    for (void* p : allocations_)
      cudaFree(p);
  }

  template <typename T>
  T* upload(const std::vector<T>& host) {
    void* p = nullptr;
    if (cudaMalloc(&p, host.size() * sizeof(T) + 16) != cudaSuccess) return nullptr;
    allocations_.push_back(p);
    cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return static_cast<T*>(p);
  }
  void* zeros(size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    allocations_.push_back(p);
    cudaMemset(p, 0xff, bytes);  // NaN-ish garbage: every output must be written
    return p;
  }

  std::mt19937 rng_{11};
  std::vector<uint16_t> random_bf16(size_t count, float scale) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<uint16_t> v(count);
    for (auto& e : v)
      e = f32_to_bf16_bits(dist(rng_));
    return v;
  }

 private:
  std::vector<void*> allocations_;
};

template <typename T>
std::vector<T> download(const void* device, size_t count) {
  std::vector<T> host(count);
  cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / (den > 0.0 ? den : 1.0));
}

struct DenseCase {
  int m;
  std::vector<int> seg_rows;
  int k;
  bool bias;
  bool f32_out;
};

TEST_F(GpuGemv, DenseStreamMatchesWarpKernelsAndReference) {
  const std::vector<DenseCase> cases = {
      {1, {5120}, 2048, false, false},           // qwen3 QKV as one matrix
      {1, {4096, 512, 512}, 2048, true, false},  // QKV as three segments, biases
      {1, {2048}, 4096, false, false},           // o projection
      {1, {128}, 2048, false, true},             // router, f32 logits
      {3, {13, 7, 21}, 768, true, false},        // segments starting inside 8-row units
      {8, {1001}, 512, false, true},             // partial last unit, f32
      {2, {3}, 64, true, false},                 // fewer rows than one unit
      {5, {300, 44}, 1536, false, false},
      {8, {2048}, 4096, false, false},  // largest x: fewer stages fit
      {2, {520}, 6144, true, false},
  };
  for (const DenseCase& c : cases) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) +
                 " segments=" + std::to_string(c.seg_rows.size()));
    ASSERT_TRUE(cuda::gemv_stream_fits(c.m, c.k)) << "shape should take the streaming kernel";
    const int64_t x_stride = c.k + 8;
    const auto x = random_bf16(static_cast<size_t>(c.m * x_stride), 1.0f);
    cuda::GemvSegments segs;
    std::vector<std::vector<uint16_t>> w_host;
    std::vector<std::vector<float>> b_host;
    int n = 0;
    for (int rows : c.seg_rows) {
      w_host.push_back(random_bf16(static_cast<size_t>(rows) * c.k, 0.05f));
      std::vector<float> b(static_cast<size_t>(rows));
      for (auto& v : b)
        v = std::normal_distribution<float>(0.0f, 0.5f)(rng_);
      b_host.push_back(b);
      cuda::GemvSegment& s = segs.seg[segs.count++];
      s.w = upload(w_host.back());
      s.bias = c.bias ? upload(b_host.back()) : nullptr;
      s.rows = rows;
      n += rows;
    }
    const uint16_t* d_x = upload(x);
    const size_t out_bytes = static_cast<size_t>(c.m) * n * (c.f32_out ? 4 : 2);
    void* y_warp = zeros(out_bytes);
    void* y_stream = zeros(out_bytes);
    cuda::set_gemv_kernels(cuda::GemvKernels::kWarp);
    CUDA_ASSERT(cuda::launch_gemv_segments(d_x, x_stride, segs, y_warp, c.f32_out, c.m, c.k, 0));
    cuda::set_gemv_kernels(cuda::GemvKernels::kStream);
    CUDA_ASSERT(cuda::launch_gemv_segments(d_x, x_stride, segs, y_stream, c.f32_out, c.m, c.k, 0));
    CUDA_ASSERT(cudaDeviceSynchronize());
    const auto warp_bytes = download<uint8_t>(y_warp, out_bytes);
    const auto stream_bytes = download<uint8_t>(y_stream, out_bytes);
    EXPECT_EQ(std::memcmp(warp_bytes.data(), stream_bytes.data(), out_bytes), 0)
        << "streaming and warp kernels differ";

    std::vector<double> want, got;
    for (int m = 0; m < c.m; ++m) {
      int col = 0;
      for (size_t s = 0; s < c.seg_rows.size(); ++s) {
        for (int r = 0; r < c.seg_rows[s]; ++r, ++col) {
          double acc = c.bias ? b_host[s][static_cast<size_t>(r)] : 0.0;
          for (int i = 0; i < c.k; ++i)
            acc += static_cast<double>(bf16_bits_to_f32(x[static_cast<size_t>(m * x_stride + i)])) *
                   bf16_bits_to_f32(w_host[s][static_cast<size_t>(r) * c.k + i]);
          want.push_back(acc);
          const size_t at = static_cast<size_t>(m) * n + col;
          if (c.f32_out) {
            float v;
            std::memcpy(&v, stream_bytes.data() + at * 4, 4);
            got.push_back(v);
          } else {
            uint16_t v;
            std::memcpy(&v, stream_bytes.data() + at * 2, 2);
            got.push_back(bf16_bits_to_f32(v));
          }
        }
      }
    }
    EXPECT_LT(rel_l2(got, want), c.f32_out ? 1e-4 : 1e-2);
  }
}

struct MoeCase {
  int tokens;
  int experts;
  int top_k;
  int hidden;
  int inter;
};

TEST_F(GpuGemv, MoeStreamMatchesWarpKernelsAndReference) {
  const std::vector<MoeCase> cases = {
      {1, 32, 8, 2048, 768},  // qwen3-30b-a3b decode at batch 1 (fewer experts allocated)
      {4, 16, 8, 512, 96},
      {3, 8, 2, 256, 40},
  };
  for (const MoeCase& c : cases) {
    SCOPED_TRACE("tokens=" + std::to_string(c.tokens) + " hidden=" + std::to_string(c.hidden) +
                 " inter=" + std::to_string(c.inter));
    std::vector<std::vector<uint16_t>> gate, up, down;
    std::vector<const void*> gate_d, up_d, down_d;
    for (int e = 0; e < c.experts; ++e) {
      gate.push_back(random_bf16(static_cast<size_t>(c.inter) * c.hidden, 0.05f));
      up.push_back(random_bf16(static_cast<size_t>(c.inter) * c.hidden, 0.05f));
      down.push_back(random_bf16(static_cast<size_t>(c.hidden) * c.inter, 0.05f));
      gate_d.push_back(upload(gate.back()));
      up_d.push_back(upload(up.back()));
      down_d.push_back(upload(down.back()));
    }
    const int pairs = c.tokens * c.top_k;
    std::vector<int32_t> ids(static_cast<size_t>(pairs));
    std::vector<float> weights(static_cast<size_t>(pairs));
    for (int p = 0; p < pairs; ++p) {
      // Distinct experts per token, and one unrouted slot (-1) in the second token.
      ids[static_cast<size_t>(p)] = (p % c.top_k * 3 + p / c.top_k) % c.experts;
      weights[static_cast<size_t>(p)] = 0.1f + 0.05f * static_cast<float>(p % c.top_k);
    }
    if (c.tokens > 1) ids[static_cast<size_t>(c.top_k + 1)] = -1;
    const auto x = random_bf16(static_cast<size_t>(c.tokens) * c.hidden, 1.0f);

    cuda::MoeGemvArgs a;
    a.x = upload(x);
    a.x_row_stride = c.hidden;
    a.topk_ids = upload(ids);
    a.topk_weights = upload(weights);
    a.gate_w = upload(gate_d);
    a.up_w = upload(up_d);
    a.down_w = upload(down_d);
    a.num_tokens = c.tokens;
    a.num_experts = c.experts;
    a.top_k = c.top_k;
    a.hidden = c.hidden;
    a.inter = c.inter;
    a.workspace_bytes = cuda::moe_gemv_workspace_bytes(a);
    a.workspace = zeros(a.workspace_bytes);
    ASSERT_TRUE(cuda::moe_gemv_supported(a));
    ASSERT_TRUE(cuda::moe_gemv_stream_fits(a)) << "shape should take the streaming kernels";
    const size_t out_elems = static_cast<size_t>(c.tokens) * c.hidden;
    void* out_warp = zeros(out_elems * 2);
    void* out_stream = zeros(out_elems * 2);
    cuda::set_gemv_kernels(cuda::GemvKernels::kWarp);
    a.out = out_warp;
    CUDA_ASSERT(cuda::launch_moe_gemv(a, 0));
    CUDA_ASSERT(cudaDeviceSynchronize());
    const auto h_warp = download<uint16_t>(a.workspace, a.workspace_bytes / 2);
    cuda::set_gemv_kernels(cuda::GemvKernels::kStream);
    a.out = out_stream;
    CUDA_ASSERT(cuda::launch_moe_gemv(a, 0));
    CUDA_ASSERT(cudaDeviceSynchronize());
    const auto h_stream = download<uint16_t>(a.workspace, a.workspace_bytes / 2);
    const auto warp = download<uint16_t>(out_warp, out_elems);
    const auto stream = download<uint16_t>(out_stream, out_elems);
    EXPECT_EQ(h_warp, h_stream) << "gate_up differs";
    EXPECT_EQ(warp, stream) << "down differs";

    // The routing arrives late: the down kernel reads topk_ids before its pdl_wait, which is
    // only right if gate_up lets it start after the routing's writer has finished. Stale ids
    // (every expert shifted by one) sit in the buffer until a kernel that lets gate_up start at
    // once writes the right ones 50 us later; both GEMV families must still match.
    for (const cuda::GemvKernels kernels : {cuda::GemvKernels::kWarp, cuda::GemvKernels::kStream}) {
      std::vector<int32_t> stale(ids.size());
      for (size_t i = 0; i < ids.size(); ++i)
        stale[i] = ids[i] < 0 ? ids[i] : (ids[i] + 1) % c.experts;
      std::vector<int32_t> padded = ids;
      padded.resize((ids.size() + 3) / 4 * 4, -1);
      const int32_t* ids_src = upload(padded);
      int32_t* ids_dst = upload(stale);
      const std::vector<int64_t> row0 = {0};
      gpu_test::RowCopy copy{ids_src, ids_dst, upload(row0), 1, padded.size() * 4};
      cuda::MoeGemvArgs late = a;
      late.topk_ids = ids_dst;
      late.out = zeros(out_elems * 2);
      cudaStream_t s = nullptr;
      CUDA_ASSERT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      cuda::set_gemv_kernels(kernels);
      CUDA_ASSERT(gpu_test::launch_late_writer(&copy, 1, 50000, s));
      CUDA_ASSERT(cuda::launch_moe_gemv(late, s));
      CUDA_ASSERT(cudaStreamSynchronize(s));
      CUDA_ASSERT(cudaStreamDestroy(s));
      EXPECT_EQ(download<uint16_t>(late.out, out_elems), warp)
          << "late routing, " << (kernels == cuda::GemvKernels::kWarp ? "warp" : "stream")
          << " kernels";
    }

    // Reference from the kernels' own bf16 intermediate h (rounding h is part of the contract).
    std::vector<double> want, got;
    for (int t = 0; t < c.tokens; ++t) {
      for (int col = 0; col < c.hidden; ++col) {
        double total = 0.0;
        for (int j = 0; j < c.top_k; ++j) {
          const int p = t * c.top_k + j;
          const int e = ids[static_cast<size_t>(p)];
          if (e < 0) continue;
          double d = 0.0;
          for (int i = 0; i < c.inter; ++i)
            d += static_cast<double>(
                     bf16_bits_to_f32(h_stream[static_cast<size_t>(p) * c.inter + i])) *
                 bf16_bits_to_f32(
                     down[static_cast<size_t>(e)][static_cast<size_t>(col) * c.inter + i]);
          total += weights[static_cast<size_t>(p)] * d;
        }
        want.push_back(total);
        got.push_back(bf16_bits_to_f32(stream[static_cast<size_t>(t) * c.hidden + col]));
      }
    }
    EXPECT_LT(rel_l2(got, want), 1e-2);
    std::vector<double> h_want, h_got;
    for (int p = 0; p < pairs; ++p) {
      const int e = ids[static_cast<size_t>(p)];
      for (int i = 0; i < c.inter; ++i) {
        double g = 0.0, u = 0.0;
        if (e >= 0) {
          for (int q = 0; q < c.hidden; ++q) {
            const double xv = bf16_bits_to_f32(x[static_cast<size_t>(p / c.top_k) * c.hidden + q]);
            g += xv * bf16_bits_to_f32(
                          gate[static_cast<size_t>(e)][static_cast<size_t>(i) * c.hidden + q]);
            u += xv * bf16_bits_to_f32(
                          up[static_cast<size_t>(e)][static_cast<size_t>(i) * c.hidden + q]);
          }
        }
        h_want.push_back(e >= 0 ? g / (1.0 + std::exp(-g)) * u : 0.0);
        h_got.push_back(bf16_bits_to_f32(h_stream[static_cast<size_t>(p) * c.inter + i]));
      }
    }
    EXPECT_LT(rel_l2(h_got, h_want), 1e-2);
  }
}

// The router GEMV whose last CTA routes: logits bit-equal to the plain GEMV's, ids and weights
// bit-equal to the routing kernel's on those logits; and the counter left at zero.
TEST_F(GpuGemv, RouterGemvRoutesInItsLastCta) {
  struct RouteCase {
    int m, experts, k, top_k;
    cuda::MoeScoring scoring;
    cuda::MoeTopk method;
    int n_group, topk_group;
    bool bias;
  };
  const std::vector<RouteCase> cases = {
      {1, 128, 2048, 8, cuda::MoeScoring::kSoftmax, cuda::MoeTopk::kGreedy, 1, 1, false},
      {5, 128, 2048, 8, cuda::MoeScoring::kSoftmax, cuda::MoeTopk::kGreedy, 1, 1, false},
      {8, 64, 512, 6, cuda::MoeScoring::kSigmoid, cuda::MoeTopk::kNoauxTc, 8, 4, true},
      {3, 256, 1024, 8, cuda::MoeScoring::kSigmoid, cuda::MoeTopk::kGroupLimitedGreedy, 8, 3,
       false},
  };
  int* counter = static_cast<int*>(zeros(sizeof(int)));
  ASSERT_EQ(cudaMemset(counter, 0, sizeof(int)), cudaSuccess);
  for (const RouteCase& c : cases) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " experts=" + std::to_string(c.experts));
    const auto x = random_bf16(static_cast<size_t>(c.m) * c.k, 1.0f);
    const auto w = random_bf16(static_cast<size_t>(c.experts) * c.k, 0.05f);
    std::vector<float> bias(static_cast<size_t>(c.experts));
    for (auto& v : bias)
      v = std::normal_distribution<float>(0.0f, 0.1f)(rng_);
    const uint16_t* d_x = upload(x);
    const uint16_t* d_w = upload(w);
    cuda::MoeRouteArgs r;
    r.correction_bias = c.bias ? upload(bias) : nullptr;
    r.num_tokens = c.m;
    r.num_experts = c.experts;
    r.top_k = c.top_k;
    r.scoring = c.scoring;
    r.topk_method = c.method;
    r.n_group = c.n_group;
    r.topk_group = c.topk_group;
    r.renormalize = true;
    r.routed_scaling_factor = 2.5f;
    const size_t logits_bytes = static_cast<size_t>(c.m) * c.experts * 4;
    const size_t pick_bytes = static_cast<size_t>(c.m) * c.top_k * 4;
    // Reference: the plain GEMV, then the routing kernel.
    cuda::set_gemv_kernels(cuda::GemvKernels::kStream);
    auto* logits_ref = static_cast<float*>(zeros(logits_bytes));
    cuda::MoeRouteArgs ref = r;
    ref.logits = logits_ref;
    ref.topk_ids = static_cast<int32_t*>(zeros(pick_bytes));
    ref.topk_weights = static_cast<float*>(zeros(pick_bytes));
    CUDA_ASSERT(cuda::launch_gemv(d_x, c.k, d_w, logits_ref, true, c.m, c.experts, c.k, 0));
    CUDA_ASSERT(cuda::launch_moe_route(ref, 0));
    // Fused, twice (the second launch checks the counter was reset).
    auto* logits = static_cast<float*>(zeros(logits_bytes));
    cuda::MoeRouteArgs fused = r;
    fused.topk_ids = static_cast<int32_t*>(zeros(pick_bytes));
    fused.topk_weights = static_cast<float*>(zeros(pick_bytes));
    for (int rep = 0; rep < 2; ++rep) {
      CUDA_ASSERT(cudaMemset(fused.topk_ids, 0xff, pick_bytes));
      CUDA_ASSERT(cuda::launch_gemv_route(d_x, c.k, d_w, logits, c.m, c.k, fused, counter, 0));
      CUDA_ASSERT(cudaDeviceSynchronize());
      EXPECT_EQ(download<uint8_t>(logits, logits_bytes),
                download<uint8_t>(logits_ref, logits_bytes));
      EXPECT_EQ(download<int32_t>(fused.topk_ids, pick_bytes / 4),
                download<int32_t>(ref.topk_ids, pick_bytes / 4));
      EXPECT_EQ(download<float>(fused.topk_weights, pick_bytes / 4),
                download<float>(ref.topk_weights, pick_bytes / 4));
      EXPECT_EQ(download<int>(counter, 1)[0], 0) << "counter not reset";
    }
  }
}

// The folded router (gemv_fold_route.cuh) against the projection + fused router launches: the
// projection and the pre-norm outputs bit-equal, the logits equal up to rounding (raw / rms
// against normed . Wr), the same experts unless two logits are within rounding of each other,
// weights within rounding, and the experts' output close to the unfolded one's.
TEST_F(GpuGemv, FoldedRouterMatchesTheUnfoldedRouterUpToRounding) {
  struct Case {
    int m, n, k, experts, top_k, inter;
    bool renormalize;
  };
  const std::vector<Case> cases = {
      {1, 2048, 4096, 128, 8, 96, true},  // qwen3-30b-a3b (narrower experts)
      {3, 2048, 4096, 128, 8, 64, true}, {4, 1024, 2048, 64, 6, 40, false},
      {2, 768, 512, 60, 4, 32, true},    {1, 4096, 4096, 8, 2, 64, true},  // Mixtral-like
  };
  int* counters = static_cast<int*>(zeros(4 * sizeof(int)));
  ASSERT_EQ(cudaMemset(counters, 0, 4 * sizeof(int)), cudaSuccess);
  for (const Case& c : cases) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                 " k=" + std::to_string(c.k) + " experts=" + std::to_string(c.experts));
    const size_t mn = static_cast<size_t>(c.m) * c.n;
    const auto x = random_bf16(static_cast<size_t>(c.m) * c.k, 1.0f);
    const auto w = random_bf16(static_cast<size_t>(c.n) * c.k, 0.02f);
    const auto wr = random_bf16(static_cast<size_t>(c.experts) * c.n, 0.05f);
    const auto residual = random_bf16(mn, 1.0f);
    std::vector<float> norm_w(static_cast<size_t>(c.n));
    for (auto& v : norm_w)
      v = std::normal_distribution<float>(1.0f, 0.2f)(rng_);
    const uint16_t* d_x = upload(x);
    const uint16_t* d_w = upload(w);
    const uint16_t* d_wr = upload(wr);
    const uint16_t* d_residual = upload(residual);
    const float* d_norm_w = upload(norm_w);
    std::vector<const void*> gate_d, up_d, down_d;
    for (int e = 0; e < c.experts; ++e) {
      gate_d.push_back(upload(random_bf16(static_cast<size_t>(c.inter) * c.n, 0.05f)));
      up_d.push_back(upload(random_bf16(static_cast<size_t>(c.inter) * c.n, 0.05f)));
      down_d.push_back(upload(random_bf16(static_cast<size_t>(c.n) * c.inter, 0.05f)));
    }
    const size_t logits_n = static_cast<size_t>(c.m) * c.experts;
    const size_t picks = static_cast<size_t>(c.m) * c.top_k;
    struct Run {
      void* y;
      void* residual_out;
      void* normed;
      float* logits;
      int32_t* ids;
      float* weights;
      void* out;
      cuda::GemvAddRmsNorm pre;
      cuda::MoeGemvArgs moe;
    };
    auto make_run = [&] {
      Run r;
      r.y = zeros(mn * 2);
      r.residual_out = zeros(mn * 2);
      r.normed = zeros(mn * 2);
      r.logits = static_cast<float*>(zeros(logits_n * 4));
      r.ids = static_cast<int32_t*>(zeros(picks * 4));
      r.weights = static_cast<float*>(zeros(picks * 4));
      r.out = zeros(mn * 2);
      r.pre.residual = d_residual;
      r.pre.delta = r.y;
      r.pre.weight = d_norm_w;
      r.pre.eps = 1e-6f;
      r.pre.residual_out = r.residual_out;
      r.pre.normed = r.normed;
      r.moe.x = r.normed;
      r.moe.x_row_stride = c.n;
      r.moe.topk_ids = r.ids;
      r.moe.topk_weights = r.weights;
      r.moe.gate_w = upload(gate_d);
      r.moe.up_w = upload(up_d);
      r.moe.down_w = upload(down_d);
      r.moe.out = r.out;
      r.moe.num_tokens = c.m;
      r.moe.num_experts = c.experts;
      r.moe.top_k = c.top_k;
      r.moe.hidden = c.n;
      r.moe.inter = c.inter;
      r.moe.workspace_bytes = cuda::moe_gemv_workspace_bytes(r.moe);
      r.moe.workspace = zeros(r.moe.workspace_bytes);
      return r;
    };
    Run ref = make_run();
    cuda::MoeRouteArgs route;
    route.num_tokens = c.m;
    route.num_experts = c.experts;
    route.top_k = c.top_k;
    route.renormalize = c.renormalize;
    route.routed_scaling_factor = 1.5f;
    route.topk_ids = ref.ids;
    route.topk_weights = ref.weights;
    CUDA_ASSERT(cuda::launch_gemv(d_x, c.k, d_w, ref.y, false, c.m, c.n, c.k, 0));
    CUDA_ASSERT(cuda::launch_gemv_route(nullptr, c.n, d_wr, ref.logits, c.m, c.n, route,
                                        counters + 1, 0, &ref.pre));
    CUDA_ASSERT(cuda::launch_moe_gemv(ref.moe, 0));

    void* mf = zeros(static_cast<size_t>(c.experts) * c.k * 2);
    void* wg = zeros(static_cast<size_t>(c.experts) * c.n * 2);
    CUDA_ASSERT(
        cuda::launch_fold_router_weights(d_wr, d_norm_w, d_w, mf, wg, c.experts, c.n, c.k, 0));
    ASSERT_TRUE(cuda::moe_gemv_fold_ok(c.m, c.top_k, c.experts));
    Run fold = make_run();
    cuda::FoldRouteArgs f;
    f.mf = mf;
    f.wg = wg;
    f.residual = d_residual;
    f.logits = fold.logits;
    f.experts = c.experts;
    cuda::MoeFoldArgs fa;
    fa.pre = fold.pre;
    fa.logits = fold.logits;
    float* logits_out = static_cast<float*>(zeros(logits_n * 4));
    fa.logits_out = logits_out;
    fa.topk_ids_out = fold.ids;
    fa.topk_weights = fold.weights;
    fa.experts = c.experts;
    fa.renormalize = c.renormalize;
    fa.scale = 1.5f;
    fold.moe.fold = &fa;
    // Once per gate_up variant (two rows or one per warp, early weight loads or not): each launch
    // must find the counter reset by the one before and give the same bits.
    struct Variant {
      int rows;
      bool early;
    };
    const Variant variants[] = {{2, true}, {2, false}, {1, true}, {1, false}};
    std::vector<uint16_t> first_out;
    std::vector<int32_t> first_ids;
    std::vector<float> first_weights;
    for (const Variant& v : variants) {
      SCOPED_TRACE("gate_up rows=" + std::to_string(v.rows) + " early=" + std::to_string(v.early));
      cuda::set_gate_up_variant(v.rows, v.early);
      CUDA_ASSERT(cudaMemset(fold.out, 0xff, mn * 2));
      CUDA_ASSERT(cudaMemset(fold.ids, 0xff, picks * 4));
      CUDA_ASSERT(cudaMemset(fold.weights, 0xff, picks * 4));
      CUDA_ASSERT(cuda::launch_gemv_fold_route(d_x, c.k, d_w, fold.y, c.m, c.n, c.k, f, 0));
      CUDA_ASSERT(cuda::launch_moe_gemv(fold.moe, 0));
      CUDA_ASSERT(cudaDeviceSynchronize());
      EXPECT_EQ(download<int>(counters + 1, 1), (std::vector<int>{0})) << "counter not reset";
      if (first_out.empty()) {
        first_out = download<uint16_t>(fold.out, mn);
        first_ids = download<int32_t>(fold.ids, picks);
        first_weights = download<float>(fold.weights, picks);
      } else {
        EXPECT_EQ(download<uint16_t>(fold.out, mn), first_out) << "out";
        EXPECT_EQ(download<int32_t>(fold.ids, picks), first_ids) << "ids";
        EXPECT_EQ(download<float>(fold.weights, picks), first_weights) << "weights";
      }
    }
    cuda::set_gate_up_variant(0, true);
    EXPECT_EQ(download<uint16_t>(fold.y, mn), download<uint16_t>(ref.y, mn)) << "y";
    EXPECT_EQ(download<uint16_t>(fold.residual_out, mn), download<uint16_t>(ref.residual_out, mn))
        << "residual_out";
    EXPECT_EQ(download<uint16_t>(fold.normed, mn), download<uint16_t>(ref.normed, mn)) << "normed";
    const auto res_out = download<uint16_t>(ref.residual_out, mn);
    const auto ref_logits = download<float>(ref.logits, logits_n);
    const auto raw = download<float>(fold.logits, logits_n);
    const auto scaled = download<float>(logits_out, logits_n);
    const auto ref_ids = download<int32_t>(ref.ids, picks);
    const auto fold_ids = download<int32_t>(fold.ids, picks);
    const auto ref_w = download<float>(ref.weights, picks);
    const auto fold_w = download<float>(fold.weights, picks);
    const auto fold_out = download<uint16_t>(fold.out, mn);
    for (int t = 0; t < c.m; ++t) {
      double ss = 0.0;
      for (int j = 0; j < c.n; ++j) {
        const double v = bf16_bits_to_f32(res_out[static_cast<size_t>(t) * c.n + j]);
        ss += v * v;
      }
      const double inv = 1.0 / std::sqrt(ss / c.n + 1e-6);
      std::vector<double> got, want;
      for (int e = 0; e < c.experts; ++e) {
        got.push_back(raw[static_cast<size_t>(t) * c.experts + e] * inv);
        want.push_back(ref_logits[static_cast<size_t>(t) * c.experts + e]);
      }
      EXPECT_LT(rel_l2(got, want), 1e-2) << "token " << t << " logits";
      std::vector<double> out_logits;
      for (int e = 0; e < c.experts; ++e)
        out_logits.push_back(scaled[static_cast<size_t>(t) * c.experts + e]);
      EXPECT_LT(rel_l2(out_logits, got), 1e-5) << "token " << t << " logits_out = raw / rms";
      std::vector<double> sorted = want;
      std::sort(sorted.rbegin(), sorted.rend());
      const double gap =
          sorted[static_cast<size_t>(c.top_k) - 1] - sorted[static_cast<size_t>(c.top_k)];
      const auto row = [&](const auto& v) {
        return std::vector(v.begin() + static_cast<int64_t>(t) * c.top_k,
                           v.begin() + static_cast<int64_t>(t + 1) * c.top_k);
      };
      if (row(fold_ids) != row(ref_ids)) {
        // Only a near tie may pick differently: within rounding of the logits' scale.
        EXPECT_LT(gap, 2e-2 * (sorted.front() - sorted.back())) << "token " << t << " ids differ";
      }
      // The fold's own picks and weights from its raw logits, in double on the host.
      std::vector<int> order(static_cast<size_t>(c.experts));
      for (int e = 0; e < c.experts; ++e)
        order[static_cast<size_t>(e)] = e;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return got[static_cast<size_t>(a)] > got[static_cast<size_t>(b)];
      });
      const double top = got[static_cast<size_t>(order[0])];
      double total = 0.0, picked = 0.0;
      for (double v : got)
        total += std::exp(v - top);
      for (int j = 0; j < c.top_k; ++j)
        picked += std::exp(got[static_cast<size_t>(order[static_cast<size_t>(j)])] - top) / total;
      for (int j = 0; j < c.top_k; ++j) {
        const size_t i = static_cast<size_t>(t) * c.top_k + j;
        EXPECT_EQ(fold_ids[i], order[static_cast<size_t>(j)]) << "pick " << j;
        double want_w =
            std::exp(got[static_cast<size_t>(order[static_cast<size_t>(j)])] - top) / total;
        if (c.renormalize) want_w /= picked;
        EXPECT_NEAR(fold_w[i], 1.5 * want_w, 1e-4 * 1.5 * want_w + 1e-7) << "weight " << j;
        if (row(fold_ids) == row(ref_ids)) {
          EXPECT_NEAR(fold_w[i], ref_w[i], 3e-2 * ref_w[i] + 1e-6) << "weight vs unfolded " << j;
        }
      }
    }
    // The experts of the folded launch equal the plain launch on the same normed rows, picks and
    // weights, bit for bit, with two rows per warp or one.
    Run check = make_run();
    check.moe.x = ref.normed;
    check.moe.topk_ids = fold.ids;
    check.moe.topk_weights = fold.weights;
    for (int rows : {2, 1}) {
      cuda::set_gate_up_variant(rows, true);
      CUDA_ASSERT(cudaMemset(check.out, 0xff, mn * 2));
      CUDA_ASSERT(cuda::launch_moe_gemv(check.moe, 0));
      CUDA_ASSERT(cudaDeviceSynchronize());
      EXPECT_EQ(download<uint16_t>(check.out, mn), fold_out) << "expert output, rows " << rows;
    }
    cuda::set_gate_up_variant(0, true);
  }
}

#endif

}  // namespace
}  // namespace locus

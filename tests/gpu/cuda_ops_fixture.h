// The fixture of the CUDA op tests (cuda_ops_gpu_test.cc, qkv_rope_gpu_test.cc): a CudaBackend
// next to the CPU backend, bf16 upload / download helpers, poisoned outputs, and the relative
// L2 comparison (bound 1e-2: bf16 operands, f32 accumulation). Skips where no GPU is present.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/device.h"
#include "unit/ops_test_util.h"

namespace locus::gpu_test {

using testing::random_f32;
using testing::rel_l2;
using testing::to_floats;

constexpr double kBound = 1e-2;

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const DeviceReport report = query_devices();
    if (report.gpus.empty()) GTEST_SKIP() << "no CUDA GPU: " << report.cuda_unavailable_reason;
    auto b = CudaBackend::create();
    ASSERT_TRUE(b.has_value()) << b.status().to_string();
    gpu_ = std::move(*b);
  }

  // f32 values rounded through bf16 (what both backends then see).
  static Tensor bf16_exact(const Tensor& t) {
    return testing::widen(testing::convert_to(t, DType::kBF16));
  }
  Tensor up(const Tensor& f32) {
    return gpu_->to_device(testing::convert_to(f32, DType::kBF16)).value();
  }
  Tensor up_raw(const Tensor& t) { return gpu_->to_device(t).value(); }
  std::vector<float> down(const Tensor& t) {
    Tensor h = gpu_->to_host(t).value();
    return h.dtype() == DType::kF32 ? to_floats(h) : to_floats(testing::widen(h));
  }
  Tensor out_bf16(const Dims& shape) {
    // Poisoned (0xFF bytes = NaN) so an unwritten element fails the comparison.
    Tensor t = gpu_->empty(shape, DType::kBF16).value();
    Tensor h = Tensor::empty(shape, DType::kBF16).value();
    std::memset(h.raw_data(), 0xFF, h.nbytes());
    EXPECT_TRUE(gpu_->copy_into(h.raw_data(), t, h.nbytes()).is_ok());
    EXPECT_TRUE(gpu_->synchronize().is_ok());
    return t;
  }
  void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                    double bound = kBound) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (float v : got)
      ASSERT_FALSE(std::isnan(v)) << what << ": NaN (unwritten output?)";
    const double e = rel_l2(got, want);
    std::printf("  %-40s rel L2 %.2e\n", what, e);
    EXPECT_LT(e, bound) << what;
  }

  // Random bf16 experts [inter, hidden] on the GPU and, unless `cpu` is null, on the CPU; only
  // `held(i)` ones defined (the others are on another rank).
  void make_experts(int64_t e, int64_t hidden, int64_t inter, uint64_t seed,
                    const std::function<bool(int64_t)>& held, std::vector<ExpertWeights>* cpu,
                    std::vector<ExpertWeights>& gpu) {
    if (cpu != nullptr) cpu->assign(static_cast<size_t>(e), {});
    gpu.assign(static_cast<size_t>(e), {});
    for (int64_t i = 0; i < e; ++i) {
      if (!held(i)) continue;
      ExpertWeights w;
      w.gate.weight = bf16_exact(random_f32({inter, hidden}, seed + i, -0.1f, 0.1f));
      w.up.weight = bf16_exact(random_f32({inter, hidden}, seed + 100 + i, -0.1f, 0.1f));
      w.down.weight = bf16_exact(random_f32({hidden, inter}, seed + 200 + i, -0.1f, 0.1f));
      if (cpu != nullptr)
        (*cpu)[static_cast<size_t>(i)] = {cpu_.prepare_linear(w.gate).value(),
                                          cpu_.prepare_linear(w.up).value(),
                                          cpu_.prepare_linear(w.down).value()};
      gpu[static_cast<size_t>(i)] = {gpu_->prepare_linear(w.gate).value(),
                                     gpu_->prepare_linear(w.up).value(),
                                     gpu_->prepare_linear(w.down).value()};
    }
  }

  // Random f32 logits [t, e] (seed) routed top-k with renormalized softmax weights on the CPU.
  struct Routed {
    MoeRouting routing;
    Tensor logits, ids, weights;
  };
  Routed route_on_cpu(int64_t t, int64_t e, int64_t k, uint64_t seed) {
    Routed out;
    out.routing.top_k = k;
    out.routing.renormalize = true;
    out.logits = random_f32({t, e}, seed, -3.0f, 3.0f);
    out.ids = Tensor::empty({t, k}, DType::kI32).value();
    out.weights = Tensor::empty({t, k}, DType::kF32).value();
    const Status s = cpu_.moe_route(out.logits, Tensor(), out.routing, out.ids, out.weights);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return out;
  }

  // t tokens routed top-k over the experts on the CPU, then moe_experts on both backends
  // compared; the GPU must leave the caller's routing as it was.
  void compare_moe_experts(int64_t t, int64_t k, int64_t hidden, uint64_t seed,
                           const std::vector<ExpertWeights>& cpu_experts,
                           const std::vector<ExpertWeights>& gpu_experts, const char* what) {
    const Routed routed = route_on_cpu(t, static_cast<int64_t>(cpu_experts.size()), k, seed);
    const Tensor& ids = routed.ids;
    const Tensor& wts = routed.weights;
    Tensor x = bf16_exact(random_f32({t, hidden}, seed + 50));
    Tensor want = Tensor::empty({t, hidden}, DType::kF32).value();
    ASSERT_TRUE(cpu_.moe_experts(x, ids, wts, cpu_experts, want).is_ok());
    Tensor got = out_bf16({t, hidden});
    Tensor gids = up_raw(ids);
    const Status s = gpu_->moe_experts(up(x), gids, up_raw(wts), gpu_experts, got);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    expect_close(down(got), to_floats(want), what);
    Tensor back = gpu_->to_host(gids).value();
    EXPECT_EQ(std::memcmp(back.raw_data(), ids.raw_data(), ids.nbytes()), 0) << what;
  }

  // The folded-router tests' case (cuda_ops_gpu_test.cc): an o projection [hidden, heads] and a
  // softmax router (top-6, renormalized) over 64 experts, with its norm weight, on the GPU; from
  // `seed`: projection seed, router seed + 1, norm weight seed + 2, experts seed + 100.
  struct FoldCase {
    static constexpr int64_t kHidden = 512, kHeads = 1024, kExperts = 64, kTopK = 6, kInter = 96;
    LinearWeight proj, router;
    Tensor norm_w;
    MoeRouting routing;
    std::vector<ExpertWeights> experts;
  };
  FoldCase fold_case(uint64_t seed) {
    FoldCase c;
    LinearWeight proj, router;
    proj.weight = bf16_exact(random_f32({c.kHidden, c.kHeads}, seed, -0.05f, 0.05f));
    router.weight = bf16_exact(random_f32({c.kExperts, c.kHidden}, seed + 1, -0.1f, 0.1f));
    c.proj = gpu_->prepare_linear(proj).value();
    c.router = gpu_->prepare_linear(router).value();
    c.norm_w = random_f32({c.kHidden}, seed + 2, 0.5f, 1.5f);
    c.routing.top_k = c.kTopK;
    c.routing.renormalize = true;
    make_experts(
        c.kExperts, c.kHidden, c.kInter, seed + 100, [](int64_t) { return true; }, nullptr,
        c.experts);
    return c;
  }
  // linear_add_rms_norm_moe_router of the case on x [m, heads] and residual [m, hidden], into
  // fresh (poisoned) outputs.
  struct FoldRouted {
    AddRmsNorm step;
    Tensor logits, ids, weights;
  };
  Status fold_route(const FoldCase& c, const Tensor& x, const Tensor& residual, bool experts_follow,
                    FoldRouted& o) {
    const int64_t m = x.size(0);
    o = FoldRouted{AddRmsNorm{residual, out_bf16({m, c.kHidden}), c.norm_w, 1e-6f,
                              out_bf16({m, c.kHidden}), out_bf16({m, c.kHidden})},
                   gpu_->empty({m, c.kExperts}, DType::kF32).value(),
                   gpu_->empty({m, c.kTopK}, DType::kI32).value(),
                   gpu_->empty({m, c.kTopK}, DType::kF32).value()};
    return gpu_->linear_add_rms_norm_moe_router(x, c.proj, o.step, c.router, Tensor(), c.routing,
                                                o.logits, o.ids, o.weights, experts_follow);
  }

  CpuBackend cpu_;
  std::unique_ptr<CudaBackend> gpu_;
};

}  // namespace locus::gpu_test

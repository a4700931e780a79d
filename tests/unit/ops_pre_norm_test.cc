// The pre-norm step as the ops take it (AddRmsNorm): add_rms_norm_to is add_rms_norm out of
// place, and the fused forms (add_rms_norm_merged_linear, add_rms_norm_moe_router) equal the
// step followed by the op, bit for bit, on the CPU reference. Aliasing that a fused kernel
// cannot survive (residual_out over an input) is refused with the op's name.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::random_f32;
using testing::to_floats;

struct Step {
  AddRmsNorm step;
  Tensor expected_residual;
  Tensor expected_normed;
};

// A step on random rows plus what the in-place add_rms_norm gives for it.
Step make_step(CpuBackend& cpu, int64_t t, int64_t hidden, uint64_t seed) {
  Step s;
  s.step.residual = random_f32({t, hidden}, seed);
  s.step.delta = random_f32({t, hidden}, seed + 1);
  s.step.weight = random_f32({hidden}, seed + 2, 0.5f, 1.5f);
  s.step.eps = 1e-6f;
  s.step.residual_out = Tensor::empty({t, hidden}, DType::kF32).value();
  s.step.normed = Tensor::empty({t, hidden}, DType::kF32).value();
  s.expected_residual = Tensor::empty({t, hidden}, DType::kF32).value();
  std::memcpy(s.expected_residual.raw_data(), s.step.residual.raw_data(), s.step.residual.nbytes());
  s.expected_normed = Tensor::empty({t, hidden}, DType::kF32).value();
  EXPECT_TRUE(cpu.add_rms_norm(s.expected_residual, s.step.delta, s.step.weight, s.step.eps,
                               s.expected_normed)
                  .is_ok());
  return s;
}

TEST(OpsPreNorm, AddRmsNormToIsTheInPlaceStepOutOfPlace) {
  CpuBackend cpu;
  Step s = make_step(cpu, 3, 40, 1);
  const std::vector<float> residual_before = to_floats(s.step.residual);
  ASSERT_TRUE(cpu.add_rms_norm_to(s.step).is_ok());
  EXPECT_EQ(to_floats(s.step.residual_out), to_floats(s.expected_residual));
  EXPECT_EQ(to_floats(s.step.normed), to_floats(s.expected_normed));
  EXPECT_EQ(to_floats(s.step.residual), residual_before) << "the input residual is read only";
}

TEST(OpsPreNorm, MergedLinearEqualsTheStepThenTheProjection) {
  CpuBackend cpu;
  const int64_t t = 4, k = 48;
  Step s = make_step(cpu, t, k, 10);
  std::vector<LinearWeight> w(2);
  for (int i = 0; i < 2; ++i) {
    LinearWeight host;
    host.weight = random_f32({24, k}, 20 + static_cast<uint64_t>(i));
    w[static_cast<size_t>(i)] = cpu.prepare_linear(host).value();
  }
  const LinearWeight* parts[] = {&w[0], &w[1]};
  Tensor out = Tensor::empty({t, 48}, DType::kF32).value();
  ASSERT_TRUE(cpu.add_rms_norm_merged_linear(s.step, parts, out).is_ok());
  Tensor want = Tensor::empty({t, 48}, DType::kF32).value();
  ASSERT_TRUE(cpu.merged_linear(s.expected_normed, parts, want).is_ok());
  EXPECT_EQ(to_floats(out), to_floats(want));
  EXPECT_EQ(to_floats(s.step.residual_out), to_floats(s.expected_residual));
  EXPECT_EQ(to_floats(s.step.normed), to_floats(s.expected_normed));

  LinearWeight wrong;
  wrong.weight = random_f32({24, k + 8}, 30);
  wrong = cpu.prepare_linear(wrong).value();
  const LinearWeight* bad_parts[] = {&wrong};
  Tensor out24 = Tensor::empty({t, 24}, DType::kF32).value();
  const Status st = cpu.add_rms_norm_merged_linear(s.step, bad_parts, out24);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("add_rms_norm_merged_linear"), std::string::npos) << st.to_string();
}

TEST(OpsPreNorm, MoeRouterEqualsTheStepThenTheRouter) {
  CpuBackend cpu;
  const int64_t t = 5, hidden = 32, experts = 16, k = 4;
  Step s = make_step(cpu, t, hidden, 40);
  LinearWeight w;
  w.weight = random_f32({experts, hidden}, 41, -0.3f, 0.3f);
  w = cpu.prepare_linear(w).value();
  MoeRouting r;
  r.top_k = k;
  r.renormalize = true;
  Tensor logits = Tensor::empty({t, experts}, DType::kF32).value();
  Tensor ids = Tensor::empty({t, k}, DType::kI32).value();
  Tensor wts = Tensor::empty({t, k}, DType::kF32).value();
  ASSERT_TRUE(cpu.add_rms_norm_moe_router(s.step, w, Tensor(), r, logits, ids, wts).is_ok());
  Tensor want_logits = Tensor::empty({t, experts}, DType::kF32).value();
  Tensor want_ids = Tensor::empty({t, k}, DType::kI32).value();
  Tensor want_wts = Tensor::empty({t, k}, DType::kF32).value();
  ASSERT_TRUE(
      cpu.moe_router(s.expected_normed, w, Tensor(), r, want_logits, want_ids, want_wts).is_ok());
  EXPECT_EQ(to_floats(logits), to_floats(want_logits));
  EXPECT_EQ(std::memcmp(ids.raw_data(), want_ids.raw_data(), ids.nbytes()), 0);
  EXPECT_EQ(to_floats(wts), to_floats(want_wts));
  EXPECT_EQ(to_floats(s.step.residual_out), to_floats(s.expected_residual));
}

TEST(OpsPreNorm, ProjectionThenMoeRouterEqualsTheTwoOps) {
  CpuBackend cpu;
  const int64_t t = 3, heads = 24, hidden = 32, experts = 16, k = 4;
  Step s = make_step(cpu, t, hidden, 60);
  LinearWeight proj, router;
  proj.weight = random_f32({hidden, heads}, 61, -0.3f, 0.3f);
  proj = cpu.prepare_linear(proj).value();
  router.weight = random_f32({experts, hidden}, 62, -0.3f, 0.3f);
  router = cpu.prepare_linear(router).value();
  const Tensor x = random_f32({t, heads}, 63);
  MoeRouting r;
  r.top_k = k;
  r.renormalize = true;
  Tensor logits = Tensor::empty({t, experts}, DType::kF32).value();
  Tensor ids = Tensor::empty({t, k}, DType::kI32).value();
  Tensor wts = Tensor::empty({t, k}, DType::kF32).value();
  AddRmsNorm step = s.step;
  step.delta = Tensor::empty({t, hidden}, DType::kF32).value();
  ASSERT_TRUE(
      cpu.linear_add_rms_norm_moe_router(x, proj, step, router, Tensor(), r, logits, ids, wts)
          .is_ok());
  // The two ops, one after the other.
  AddRmsNorm ref = s.step;
  ref.delta = Tensor::empty({t, hidden}, DType::kF32).value();
  ref.residual_out = Tensor::empty({t, hidden}, DType::kF32).value();
  ref.normed = Tensor::empty({t, hidden}, DType::kF32).value();
  ASSERT_TRUE(cpu.linear(x, proj, ref.delta).is_ok());
  Tensor want_logits = Tensor::empty({t, experts}, DType::kF32).value();
  Tensor want_ids = Tensor::empty({t, k}, DType::kI32).value();
  Tensor want_wts = Tensor::empty({t, k}, DType::kF32).value();
  ASSERT_TRUE(cpu.add_rms_norm_moe_router(ref, router, Tensor(), r, want_logits, want_ids, want_wts)
                  .is_ok());
  EXPECT_EQ(to_floats(step.delta), to_floats(ref.delta));
  EXPECT_EQ(to_floats(step.residual_out), to_floats(ref.residual_out));
  EXPECT_EQ(to_floats(step.normed), to_floats(ref.normed));
  EXPECT_EQ(to_floats(logits), to_floats(want_logits));
  EXPECT_EQ(std::memcmp(ids.raw_data(), want_ids.raw_data(), ids.nbytes()), 0);
  EXPECT_EQ(to_floats(wts), to_floats(want_wts));

  // A projection whose output is not the step's width is refused with the op's name.
  LinearWeight narrow;
  narrow.weight = random_f32({hidden - 8, heads}, 64);
  narrow = cpu.prepare_linear(narrow).value();
  const Status st =
      cpu.linear_add_rms_norm_moe_router(x, narrow, step, router, Tensor(), r, logits, ids, wts);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("linear_add_rms_norm_moe_router"), std::string::npos)
      << st.to_string();
}

TEST(OpsPreNorm, RefusesAliasingAFusedKernelCannotSurvive) {
  CpuBackend cpu;
  Step s = make_step(cpu, 2, 16, 50);
  auto refused = [&](AddRmsNorm step, const std::string& words) {
    const Status st = cpu.add_rms_norm_to(step);
    ASSERT_FALSE(st.is_ok()) << words;
    EXPECT_NE(st.to_string().find("add_rms_norm_to"), std::string::npos) << st.to_string();
    EXPECT_NE(st.to_string().find(words), std::string::npos) << st.to_string();
  };
  AddRmsNorm in_place = s.step;
  in_place.residual_out = in_place.residual;
  refused(in_place, "residual_out must not alias");
  AddRmsNorm over_delta = s.step;
  over_delta.residual_out = over_delta.delta;
  refused(over_delta, "residual_out must not alias");
  AddRmsNorm normed_over_residual = s.step;
  normed_over_residual.normed = normed_over_residual.residual;
  refused(normed_over_residual, "normed must not alias");
  AddRmsNorm short_delta = s.step;
  short_delta.delta = random_f32({1, 16}, 51);
  refused(short_delta, "delta");
  AddRmsNorm no_weight = s.step;
  no_weight.weight = random_f32({8}, 52);
  refused(no_weight, "weight");
}

}  // namespace
}  // namespace locus

// The fused ops' reference forms on the CPU: merged_linear equals the separate projections side
// by side, embedding_rms_norm the embedding then the norm, and qkv_norm_rope_write_kv equals
// rms_norm -> rope -> write_kv_cache run one by one (bit for bit: same arithmetic in the same
// order). Also the views they rely on: unflatten of a column slice and copy between row views.
#include <gtest/gtest.h>

#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops_rope.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::random_f32;
using testing::to_floats;

std::vector<float> floats_of(const Tensor& t) {
  // Element by element, so strided views read what they view.
  std::vector<float> out;
  const auto* base = static_cast<const float*>(t.raw_data());
  const int nd = t.ndim();
  const int64_t d0 = nd == 3 ? t.size(0) : 1, d1 = nd >= 2 ? t.size(nd - 2) : 1, n = t.size(-1);
  for (int64_t i = 0; i < d0; ++i)
    for (int64_t j = 0; j < d1; ++j)
      for (int64_t c = 0; c < n; ++c)
        out.push_back(
            base[(nd == 3 ? i * t.stride(0) : 0) + (nd >= 2 ? j * t.stride(nd - 2) : 0) + c]);
  return out;
}

TEST(TensorViews, UnflattenSplitsAColumnSliceIntoHeads) {
  Tensor m = random_f32({3, 20}, 1);
  Tensor cols = m.slice(1, 4, 16).value();  // [3, 12], row stride 20
  Tensor heads = cols.unflatten(1, 3).value();
  ASSERT_EQ(heads.shape(), (Dims{3, 3, 4}));
  EXPECT_EQ(heads.strides(), (Dims{20, 4, 1}));
  EXPECT_FALSE(heads.is_contiguous());
  EXPECT_EQ(heads.data<float>()[2 * 20 + 1 * 4 + 3], m.data<float>()[2 * 20 + 4 + 7]);
  EXPECT_FALSE(cols.unflatten(1, 5).has_value()) << "12 is not a multiple of 5";
  EXPECT_FALSE(cols.unflatten(1, 0).has_value());
  EXPECT_FALSE(cols.unflatten(2, 3).has_value());
}

TEST(OpsCopy, CopiesBetweenRowViewsAndRejectsOverlapAndMismatch) {
  CpuBackend cpu;
  Tensor src = random_f32({4, 10}, 2);
  Tensor dst = Tensor::zeros({4, 16}, DType::kF32).value();
  Tensor dst_cols = dst.slice(1, 3, 13).value();
  ASSERT_TRUE(cpu.copy(src, dst_cols).is_ok());
  EXPECT_EQ(floats_of(dst_cols), to_floats(src));
  EXPECT_EQ(dst.data<float>()[2], 0.0f) << "columns outside the slice untouched";
  // 3-d: [T, H, D] view of a wider row into a contiguous tensor.
  Tensor wide = random_f32({2, 30}, 3);
  Tensor heads = wide.slice(1, 6, 30).value().unflatten(1, 4).value();
  Tensor out = Tensor::empty({2, 4, 6}, DType::kF32).value();
  ASSERT_TRUE(cpu.copy(heads, out).is_ok());
  EXPECT_EQ(to_floats(out), floats_of(heads));

  Tensor self = random_f32({4, 8}, 4);
  Tensor a = self.slice(1, 0, 5).value();
  Tensor b = self.slice(1, 3, 8).value();
  const Status overlap = cpu.copy(a, b);
  EXPECT_FALSE(overlap.is_ok());
  EXPECT_NE(overlap.to_string().find("overlap"), std::string::npos) << overlap.to_string();
  Tensor wrong = Tensor::empty({4, 9}, DType::kF32).value();
  EXPECT_FALSE(cpu.copy(src, wrong).is_ok());
}

TEST(OpsFused, MergedLinearEqualsTheSeparateProjections) {
  CpuBackend cpu;
  const int64_t t = 5, k = 48;
  Tensor x = random_f32({t, k}, 10);
  std::vector<LinearWeight> w(3);
  const int64_t widths[] = {32, 8, 8};
  for (int i = 0; i < 3; ++i) {
    LinearWeight host;
    host.weight = random_f32({widths[i], k}, 20 + static_cast<uint64_t>(i));
    host.bias = random_f32({widths[i]}, 30 + static_cast<uint64_t>(i));
    w[static_cast<size_t>(i)] = cpu.prepare_linear(host).value();
  }
  const LinearWeight* parts[] = {&w[0], &w[1], &w[2]};
  Tensor merged = Tensor::empty({t, 48}, DType::kF32).value();
  ASSERT_TRUE(cpu.merged_linear(x, parts, merged).is_ok());
  int64_t col = 0;
  for (int i = 0; i < 3; ++i) {
    Tensor one = Tensor::empty({t, widths[i]}, DType::kF32).value();
    ASSERT_TRUE(cpu.linear(x, w[static_cast<size_t>(i)], one).is_ok());
    EXPECT_EQ(floats_of(merged.slice(1, col, col + widths[i]).value()), to_floats(one));
    col += widths[i];
  }
  Tensor narrow = Tensor::empty({t, 47}, DType::kF32).value();
  EXPECT_FALSE(cpu.merged_linear(x, parts, narrow).is_ok()) << "out must be 48 wide";
}

TEST(OpsFused, EmbeddingRmsNormEqualsTheTwoOps) {
  CpuBackend cpu;
  const int64_t vocab = 40, hidden = 24;
  Tensor table = random_f32({vocab, hidden}, 40);
  Tensor weight = random_f32({hidden}, 41, 0.5f, 1.5f);
  Tensor ids = testing::from_i32({39, 0, 7, 7}, {4});
  Tensor residual = Tensor::empty({4, hidden}, DType::kF32).value();
  Tensor normed = Tensor::empty({4, hidden}, DType::kF32).value();
  ASSERT_TRUE(cpu.embedding_rms_norm(table, ids, weight, 1e-6f, residual, normed).is_ok());
  Tensor want_r = Tensor::empty({4, hidden}, DType::kF32).value();
  Tensor want_n = Tensor::empty({4, hidden}, DType::kF32).value();
  ASSERT_TRUE(cpu.embedding(table, ids, want_r).is_ok());
  ASSERT_TRUE(cpu.rms_norm(want_r, weight, 1e-6f, want_n).is_ok());
  EXPECT_EQ(to_floats(residual), to_floats(want_r));
  EXPECT_EQ(to_floats(normed), to_floats(want_n));

  // Bad shapes are errors that name the op and the operand.
  Tensor short_weight = random_f32({hidden - 1}, 42);
  const Status bad_weight =
      cpu.embedding_rms_norm(table, ids, short_weight, 1e-6f, residual, normed);
  EXPECT_FALSE(bad_weight.is_ok());
  EXPECT_NE(bad_weight.to_string().find("embedding_rms_norm"), std::string::npos)
      << bad_weight.to_string();
  Tensor few_rows = Tensor::empty({3, hidden}, DType::kF32).value();
  const Status bad_out = cpu.embedding_rms_norm(table, ids, weight, 1e-6f, few_rows, normed);
  EXPECT_FALSE(bad_out.is_ok());
  EXPECT_NE(bad_out.to_string().find("embedding_rms_norm"), std::string::npos)
      << bad_out.to_string();
}

RopeParams rope_params(int64_t rotary_dim, RopeLayout layout) {
  RopeConfig rc;
  rc.theta = 10000;
  rc.layout = layout;
  rc.rotary_dim = rotary_dim;
  return testing::rope_params_for(rc, 4096);
}

TEST(OpsFused, QkvNormRopeWriteKvEqualsTheOpsOneByOne) {
  CpuBackend cpu;
  const int64_t t = 4, hq = 4, hk = 2, d = 16, blocks = 3, bs = 4;
  for (QkNorm norm : {QkNorm::kNone, QkNorm::kPerHead, QkNorm::kPerLayer}) {
    for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kInterleaved}) {
      SCOPED_TRACE(static_cast<int>(norm) * 10 + static_cast<int>(layout));
      QkvSpec s = testing::make_qkv_spec(hq, hk, d, norm);
      const bool per_head = norm == QkNorm::kPerHead;
      if (norm != QkNorm::kNone) {
        s.q_norm = random_f32({per_head ? d : hq * d}, 40, 0.5f, 1.5f);
        s.k_norm = random_f32({per_head ? d : hk * d}, 41, 0.5f, 1.5f);
      }
      const RopeParams rope = rope_params(layout == RopeLayout::kNeox ? d : d / 2, layout);
      Tensor qkv = random_f32({t, s.width()}, 42);
      Tensor positions = testing::from_i32({0, 7, 300, 4000}, {t});
      Tensor slots = testing::from_i64({5, 2, 0, 11}, {t});

      Tensor kc = Tensor::zeros({blocks, bs, hk, d}, DType::kF32).value();
      Tensor vc = Tensor::zeros({blocks, bs, hk, d}, DType::kF32).value();
      Tensor q = Tensor::empty({t, hq, d}, DType::kF32).value();
      const Status st = cpu.qkv_norm_rope_write_kv(qkv, s, positions, rope, slots, kc, vc, q);
      ASSERT_TRUE(st.is_ok()) << st.to_string();

      // The unfused sequence on contiguous copies of the three parts.
      Tensor q2 = Tensor::empty({t, hq * d}, DType::kF32).value();
      Tensor k2 = Tensor::empty({t, hk * d}, DType::kF32).value();
      Tensor v2 = Tensor::empty({t, hk * d}, DType::kF32).value();
      ASSERT_TRUE(cpu.copy(qkv.slice(1, 0, hq * d).value(), q2).is_ok());
      ASSERT_TRUE(cpu.copy(qkv.slice(1, hq * d, (hq + hk) * d).value(), k2).is_ok());
      ASSERT_TRUE(cpu.copy(qkv.slice(1, (hq + hk) * d, s.width()).value(), v2).is_ok());
      Tensor wq = q2, wk = k2;
      if (norm != QkNorm::kNone) {
        wq = Tensor::empty(per_head ? Dims{t, hq, d} : Dims{t, hq * d}, DType::kF32).value();
        wk = Tensor::empty(per_head ? Dims{t, hk, d} : Dims{t, hk * d}, DType::kF32).value();
        ASSERT_TRUE(
            cpu.rms_norm(per_head ? q2.reshape({t, hq, d}).value() : q2, s.q_norm, s.eps, wq)
                .is_ok());
        ASSERT_TRUE(
            cpu.rms_norm(per_head ? k2.reshape({t, hk, d}).value() : k2, s.k_norm, s.eps, wk)
                .is_ok());
      }
      Tensor q3 = wq.reshape({t, hq, d}).value(), k3 = wk.reshape({t, hk, d}).value();
      ASSERT_TRUE(cpu.rope(q3, positions, rope).is_ok());
      ASSERT_TRUE(cpu.rope(k3, positions, rope).is_ok());
      Tensor kc2 = Tensor::zeros({blocks, bs, hk, d}, DType::kF32).value();
      Tensor vc2 = Tensor::zeros({blocks, bs, hk, d}, DType::kF32).value();
      ASSERT_TRUE(cpu.write_kv_cache(k3, v2.reshape({t, hk, d}).value(), slots, kc2, vc2).is_ok());
      EXPECT_EQ(to_floats(q), to_floats(q3));
      EXPECT_EQ(to_floats(kc), to_floats(kc2));
      EXPECT_EQ(to_floats(vc), to_floats(vc2));
    }
  }
}

TEST(OpsFused, QkvNormRopeWriteKvRejectsBadShapes) {
  CpuBackend cpu;
  QkvSpec s = testing::make_qkv_spec(4, 2, 8);
  const RopeParams rope = rope_params(8, RopeLayout::kNeox);
  Tensor qkv = random_f32({2, s.width() - 1}, 1);
  Tensor pos = testing::from_i32({0, 1}, {2});
  Tensor slots = testing::from_i64({0, 1}, {2});
  Tensor kc = Tensor::zeros({1, 4, 2, 8}, DType::kF32).value();
  Tensor vc = Tensor::zeros({1, 4, 2, 8}, DType::kF32).value();
  Tensor q = Tensor::empty({2, 4, 8}, DType::kF32).value();
  const Status st = cpu.qkv_norm_rope_write_kv(qkv, s, pos, rope, slots, kc, vc, q);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("wide"), std::string::npos) << st.to_string();
  s.num_kv_heads = 3;  // 4 heads are not a multiple of 3
  qkv = random_f32({2, s.width()}, 1);
  EXPECT_FALSE(cpu.qkv_norm_rope_write_kv(qkv, s, pos, rope, slots, kc, vc, q).is_ok());
}

// The op a backend may fold at decode: on the CPU it is the two ops, and its checks name it.
TEST(OpsFused, QkvNormRopeAttentionEqualsTheTwoOps) {
  CpuBackend cpu;
  const int64_t hq = 4, hk = 2, d = 16, bs = 4;
  QkvSpec s = testing::make_qkv_spec(hq, hk, d, QkNorm::kPerHead);
  s.q_norm = random_f32({d}, 50, 0.5f, 1.5f);
  s.k_norm = random_f32({d}, 51, 0.5f, 1.5f);
  const RopeParams rope = rope_params(d, RopeLayout::kNeox);
  // Two sequences: 3 cached + 1 new token, 1 cached + 2 new tokens; blocks 0-1 and 2.
  Tensor qkv = random_f32({3, s.width()}, 52);
  Tensor pos = testing::from_i32({3, 1, 2}, {3});
  Tensor slots = testing::from_i64({3, 9, 10}, {3});
  AttentionMetadata m;
  m.block_size = bs;
  m.query_start_loc = testing::from_i32({0, 1, 3}, {3});
  m.seq_lens = testing::from_i32({4, 3}, {2});
  m.block_table = testing::from_i32({0, 1, 2, -1}, {2, 2});
  m.slot_mapping = slots;
  AttentionParams params;
  params.scale = 0.25f;
  Tensor kc[2], vc[2], q[2], out[2];
  for (int i = 0; i < 2; ++i) {
    kc[i] = random_f32({3, bs, hk, d}, 53);  // the cached tokens' keys and values
    vc[i] = random_f32({3, bs, hk, d}, 54);
    q[i] = Tensor::empty({3, hq, d}, DType::kF32).value();
    out[i] = Tensor::empty({3, hq, d}, DType::kF32).value();
  }
  ASSERT_TRUE(cpu.qkv_norm_rope_write_kv(qkv, s, pos, rope, slots, kc[0], vc[0], q[0]).is_ok());
  ASSERT_TRUE(cpu.paged_attention(q[0], kc[0], vc[0], m, params, out[0]).is_ok());
  const Status st =
      cpu.qkv_norm_rope_attention(qkv, s, pos, rope, slots, kc[1], vc[1], m, params, q[1], out[1]);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(to_floats(out[1]), to_floats(out[0]));
  EXPECT_EQ(to_floats(kc[1]), to_floats(kc[0]));
  EXPECT_EQ(to_floats(vc[1]), to_floats(vc[0]));

  Tensor short_out = Tensor::empty({3, hq, d - 1}, DType::kF32).value();
  const Status bad = cpu.qkv_norm_rope_attention(qkv, s, pos, rope, slots, kc[1], vc[1], m, params,
                                                 q[1], short_out);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.to_string().find("qkv_norm_rope_attention"), std::string::npos) << bad.to_string();
  Tensor narrow = random_f32({3, s.width() - 1}, 55);
  EXPECT_FALSE(cpu.qkv_norm_rope_attention(narrow, s, pos, rope, slots, kc[1], vc[1], m, params,
                                           q[1], out[1])
                   .is_ok());
}

TEST(OpsFused, MoeRouterEqualsLinearThenRoute) {
  CpuBackend cpu;
  const int64_t t = 5, hidden = 32, experts = 16;
  LinearWeight w;
  w.weight = random_f32({experts, hidden}, 21, -0.3f, 0.3f);
  w = cpu.prepare_linear(w).value();
  Tensor x = random_f32({t, hidden}, 22);
  Tensor bias = random_f32({experts}, 23, -0.1f, 0.1f);
  MoeRouting r;
  r.scoring = ScoringFunc::kSigmoid;
  r.topk_method = TopkMethod::kNoauxTc;
  r.n_group = 4;
  r.topk_group = 2;
  r.top_k = 3;
  r.renormalize = true;
  r.routed_scaling_factor = 2.5f;
  Tensor logits = Tensor::empty({t, experts}, DType::kF32).value();
  Tensor ids = Tensor::empty({t, 3}, DType::kI32).value();
  Tensor wts = Tensor::empty({t, 3}, DType::kF32).value();
  ASSERT_TRUE(cpu.moe_router(x, w, bias, r, logits, ids, wts).is_ok());
  Tensor want_logits = Tensor::empty({t, experts}, DType::kF32).value();
  Tensor want_ids = Tensor::empty({t, 3}, DType::kI32).value();
  Tensor want_wts = Tensor::empty({t, 3}, DType::kF32).value();
  ASSERT_TRUE(cpu.linear(x, w, want_logits).is_ok());
  ASSERT_TRUE(cpu.moe_route(want_logits, bias, r, want_ids, want_wts).is_ok());
  EXPECT_EQ(to_floats(logits), to_floats(want_logits));
  EXPECT_EQ(std::memcmp(ids.raw_data(), want_ids.raw_data(), ids.nbytes()), 0);
  EXPECT_EQ(to_floats(wts), to_floats(want_wts));

  // Logits must be f32 (the router's contract), and the error names the fused op.
  Tensor bf16_logits = Tensor::empty({t, experts}, DType::kBF16).value();
  const Status st = cpu.moe_router(x, w, bias, r, bf16_logits, ids, wts);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("moe_router"), std::string::npos) << st.to_string();
  Tensor short_ids = Tensor::empty({t, 2}, DType::kI32).value();
  EXPECT_FALSE(cpu.moe_router(x, w, bias, r, logits, short_ids, wts).is_ok());
}

}  // namespace
}  // namespace locus

// The CUDA backend's ops against their CPU twins on random inputs: the inputs are rounded to bf16
// first so both sides see the same values; the GPU computes in bf16 with f32 accumulation, so
// the bound is relative L2 < 1e-2 (METHOD.md: bf16 operands land between 1e-3 and 1e-2).
// SKIPPED where no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "backend/ops_rope.h"
#include "unit/ops_test_util.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/kernels/gemv/gemv_launch.h"
#include "backend/cuda/runtime/cuda_backend.h"
#include "gpu/cuda_ops_fixture.h"
#endif

namespace locus {
namespace {

using testing::random_f32;
using testing::rel_l2;
using testing::to_floats;

#ifndef LOCUS_HAS_CUDA
TEST(CudaOps, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}
#else

using CudaOps = gpu_test::CudaOpsTest;

TEST_F(CudaOps, LinearBf16AndF32OutputsWithBiasAndStridedInput) {
  for (auto [m, k, n] : {std::tuple{1, 128, 48}, {7, 2048, 768}, {300, 256, 1024}, {64, 96, 4}}) {
    Tensor wide = bf16_exact(random_f32({m, k + 8}, 1000 + m));
    Tensor x = wide.slice(1, 8, 8 + k).value();
    LinearWeight w;
    w.weight = bf16_exact(random_f32({n, k}, 2000 + n, -0.1f, 0.1f));
    w.bias = random_f32({n}, 3000 + n);
    Tensor want = Tensor::empty({m, n}, DType::kF32).value();
    ASSERT_TRUE(cpu_.linear(x, cpu_.prepare_linear(w).value(), want).is_ok());
    LinearWeight gw = gpu_->prepare_linear(w).value();
    Tensor gx = up(wide).slice(1, 8, 8 + k).value();
    Tensor got = out_bf16({m, n});
    ASSERT_TRUE(gpu_->linear(gx, gw, got).is_ok());
    expect_close(down(got), to_floats(want), "linear bf16 out");
    Tensor got32 = gpu_->empty({m, n}, DType::kF32).value();
    ASSERT_TRUE(gpu_->linear(gx, gw, got32).is_ok());
    expect_close(down(got32), to_floats(want), "linear f32 out");
  }
}

TEST_F(CudaOps, NormsRopeActivationsAndGathers) {
  const int64_t t = 37, h = 4, d = 64, hidden = 2048;
  // rms_norm over rows, and per head of a [T, H, D] view.
  Tensor x = bf16_exact(random_f32({t, hidden}, 1));
  Tensor wn = random_f32({hidden}, 2, 0.5f, 1.5f);
  Tensor want = Tensor::empty({t, hidden}, DType::kF32).value();
  ASSERT_TRUE(cpu_.rms_norm(x, wn, 1e-6f, want).is_ok());
  Tensor got = out_bf16({t, hidden});
  ASSERT_TRUE(gpu_->rms_norm(up(x), gpu_->prepare_weight(wn).value(), 1e-6f, got).is_ok());
  expect_close(down(got), to_floats(want), "rms_norm");

  // Per head: a [T, H, D] tensor with one [D] weight (q/k-norm).
  Tensor heads = bf16_exact(random_f32({t, h, d}, 3));
  Tensor wd = random_f32({d}, 4, 0.5f, 1.5f);
  Tensor want_h = Tensor::empty({t, h, d}, DType::kF32).value();
  ASSERT_TRUE(cpu_.rms_norm(heads, wd, 1e-6f, want_h).is_ok());
  Tensor got_h = out_bf16({t, h, d});
  ASSERT_TRUE(gpu_->rms_norm(up(heads), gpu_->prepare_weight(wd).value(), 1e-6f, got_h).is_ok());
  expect_close(down(got_h), to_floats(want_h), "rms_norm per head");

  // add_rms_norm: residual updated in place and the normalized output.
  Tensor res = bf16_exact(random_f32({t, hidden}, 5));
  Tensor delta = bf16_exact(random_f32({t, hidden}, 6));
  Tensor gres = up(res);
  Tensor cres = testing::from_floats(to_floats(res), {t, hidden});
  ASSERT_TRUE(cpu_.add_rms_norm(cres, delta, wn, 1e-5f, want).is_ok());
  Tensor got2 = out_bf16({t, hidden});
  ASSERT_TRUE(
      gpu_->add_rms_norm(gres, up(delta), gpu_->prepare_weight(wn).value(), 1e-5f, got2).is_ok());
  expect_close(down(got2), to_floats(want), "add_rms_norm out");
  expect_close(down(gres), to_floats(cres), "add_rms_norm residual");
  {  // a row length off the vectorized path (n not a multiple of 256)
    const int64_t n = 200;
    Tensor r2 = bf16_exact(random_f32({3, n}, 15));
    Tensor d2 = bf16_exact(random_f32({3, n}, 16));
    Tensor w2 = random_f32({n}, 17, 0.5f, 1.5f);
    Tensor gr2 = up(r2);
    Tensor cr2 = testing::from_floats(to_floats(r2), {3, n});
    Tensor want2 = Tensor::empty({3, n}, DType::kF32).value();
    ASSERT_TRUE(cpu_.add_rms_norm(cr2, d2, w2, 1e-5f, want2).is_ok());
    Tensor got3 = out_bf16({3, n});
    ASSERT_TRUE(
        gpu_->add_rms_norm(gr2, up(d2), gpu_->prepare_weight(w2).value(), 1e-5f, got3).is_ok());
    expect_close(down(got3), to_floats(want2), "add_rms_norm out (n 200)");
    expect_close(down(gr2), to_floats(cr2), "add_rms_norm residual (n 200)");
  }

  // rope: neox and interleaved, partial rotary, YaRN attention factor; positions up to 40k.
  for (bool neox : {true, false}) {
    RopeConfig rc;
    rc.theta = 1e6;
    rc.layout = neox ? RopeLayout::kNeox : RopeLayout::kInterleaved;
    rc.rotary_dim = neox ? d : d / 2;
    const RopeParams p = testing::rope_params_for(rc, 40960, neox ? 1.0f : 1.1f);
    std::vector<int32_t> pos(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i)
      pos[static_cast<size_t>(i)] = static_cast<int32_t>((i * 997) % 40000);
    Tensor positions = testing::from_i32(pos, {t});
    Tensor q = bf16_exact(random_f32({t, h, d}, 7));
    Tensor cq = testing::from_floats(to_floats(q), {t, h, d});
    ASSERT_TRUE(cpu_.rope(cq, positions, p).is_ok());
    Tensor gq = up(q);
    ASSERT_TRUE(gpu_->rope(gq, up_raw(positions), p).is_ok());
    expect_close(down(gq), to_floats(cq), neox ? "rope neox" : "rope interleaved partial");
  }

  // silu_and_mul on column halves of one [T, 2n] projection; add; gather_rows; embedding.
  const int64_t n = 768;
  Tensor gu = bf16_exact(random_f32({t, 2 * n}, 8, -4.0f, 4.0f));
  Tensor want_act = Tensor::empty({t, n}, DType::kF32).value();
  ASSERT_TRUE(cpu_.silu_and_mul(gu.slice(1, 0, n).value(), gu.slice(1, n, 2 * n).value(), want_act)
                  .is_ok());
  Tensor ggu = up(gu);
  Tensor got_act = out_bf16({t, n});
  ASSERT_TRUE(
      gpu_->silu_and_mul(ggu.slice(1, 0, n).value(), ggu.slice(1, n, 2 * n).value(), got_act)
          .is_ok());
  expect_close(down(got_act), to_floats(want_act), "silu_and_mul");

  Tensor a = bf16_exact(random_f32({t, n}, 9));
  Tensor b = bf16_exact(random_f32({t, n}, 10));
  Tensor want_add = Tensor::empty({t, n}, DType::kF32).value();
  ASSERT_TRUE(cpu_.add(a, b, want_add).is_ok());
  Tensor got_add = out_bf16({t, n});
  ASSERT_TRUE(gpu_->add(up(a), up(b), got_add).is_ok());
  expect_close(down(got_add), to_floats(want_add), "add");

  Tensor idx = testing::from_i32({36, 0, 5, 5, 17}, {5});
  Tensor want_g = Tensor::empty({5, n}, DType::kF32).value();
  ASSERT_TRUE(cpu_.gather_rows(a, idx, want_g).is_ok());
  Tensor got_g = out_bf16({5, n});
  ASSERT_TRUE(gpu_->gather_rows(up(a), up_raw(idx), got_g).is_ok());
  expect_close(down(got_g), to_floats(want_g), "gather_rows");

  Tensor table = bf16_exact(random_f32({1000, 256}, 11));
  Tensor ids = testing::from_i32({999, 0, 3, 3, 512, 7}, {6});
  Tensor want_e = Tensor::empty({6, 256}, DType::kF32).value();
  ASSERT_TRUE(cpu_.embedding(table, ids, want_e).is_ok());
  Tensor got_e = out_bf16({6, 256});
  ASSERT_TRUE(gpu_->embedding(gpu_->prepare_weight(table).value(), up_raw(ids), got_e).is_ok());
  expect_close(down(got_e), to_floats(want_e), "embedding");
}

// The first layer's input as one op: residual is exactly the gathered table rows, normed is
// rms_norm's output (the vectorized kernel at hidden 2048, embedding + rms_norm at 200).
TEST_F(CudaOps, EmbeddingRmsNormEqualsTheTwoOps) {
  for (int64_t hidden : {2048, 200}) {
    Tensor table = bf16_exact(random_f32({1000, hidden}, 21));
    Tensor wn = random_f32({hidden}, 22, 0.5f, 1.5f);
    Tensor ids = testing::from_i32({999, 0, 3, 3, 512, 7, 123}, {7});
    Tensor want_r = Tensor::empty({7, hidden}, DType::kF32).value();
    ASSERT_TRUE(cpu_.embedding(table, ids, want_r).is_ok());
    Tensor want_n = Tensor::empty({7, hidden}, DType::kF32).value();
    ASSERT_TRUE(cpu_.rms_norm(want_r, wn, 1e-6f, want_n).is_ok());
    Tensor got_r = out_bf16({7, hidden});
    Tensor got_n = out_bf16({7, hidden});
    ASSERT_TRUE(gpu_->embedding_rms_norm(gpu_->prepare_weight(table).value(), up_raw(ids),
                                         gpu_->prepare_weight(wn).value(), 1e-6f, got_r, got_n)
                    .is_ok());
    EXPECT_EQ(down(got_r), to_floats(want_r)) << "hidden " << hidden << ": residual";
    expect_close(down(got_n), to_floats(want_n), "embedding_rms_norm normed");
  }
}

// Paged GQA attention through the Ops layer (cache write + attention), mixed decode and
// prefill, scattered blocks; then MLA (absorbed on the GPU, expanded on the CPU).
TEST_F(CudaOps, PagedAttentionAndMla) {
  std::mt19937 rng(42);
  const int64_t hq = 8, hkv = 2, d = 128, bs = 16;
  struct Seq {
    int64_t context, num_new;
  };
  const std::vector<Seq> seqs = {{1, 1}, {300, 1}, {77, 77}, {1500, 40}, {33, 1}};
  int64_t max_blocks = 0, total_blocks = 0;
  for (const Seq& s : seqs) {
    max_blocks = std::max(max_blocks, (s.context + bs - 1) / bs);
    total_blocks += (s.context + bs - 1) / bs;
  }
  std::vector<int32_t> perm(static_cast<size_t>(total_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(seqs.size() * static_cast<size_t>(max_blocks), -1);
  std::vector<int32_t> qsl = {0}, lens;
  std::vector<int64_t> all_slots;  // every cached token's slot, sequences back to back
  std::vector<int64_t> new_slots;
  size_t next = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int64_t nb = (seqs[i].context + bs - 1) / bs;
    for (int64_t b = 0; b < nb; ++b)
      table[i * static_cast<size_t>(max_blocks) + static_cast<size_t>(b)] = perm[next++];
    for (int64_t j = 0; j < seqs[i].context; ++j) {
      const int64_t slot =
          table[i * static_cast<size_t>(max_blocks) + static_cast<size_t>(j / bs)] * bs + j % bs;
      all_slots.push_back(slot);
      if (j >= seqs[i].context - seqs[i].num_new) new_slots.push_back(slot);
    }
    qsl.push_back(qsl.back() + static_cast<int32_t>(seqs[i].num_new));
    lens.push_back(static_cast<int32_t>(seqs[i].context));
  }
  const auto total = static_cast<int64_t>(all_slots.size());
  const int64_t tokens = qsl.back();
  const auto nseq = static_cast<int64_t>(seqs.size());
  AttentionMetadata m;
  m.block_size = bs;
  m.query_start_loc = testing::from_i32(qsl, {nseq + 1});
  m.seq_lens = testing::from_i32(lens, {nseq});
  m.block_table = testing::from_i32(table, {nseq, max_blocks});
  m.slot_mapping = testing::from_i64(all_slots, {total});

  // Fill both caches with every token (history and new) in one write, then attend with the new
  // tokens' queries.
  Tensor k = bf16_exact(random_f32({total, hkv, d}, 20));
  Tensor v = bf16_exact(random_f32({total, hkv, d}, 21));
  Tensor q = bf16_exact(random_f32({tokens, hq, d}, 22));
  Tensor kc = cpu_.zeros({total_blocks, bs, hkv, d}, DType::kF32).value();
  Tensor vc = cpu_.zeros({total_blocks, bs, hkv, d}, DType::kF32).value();
  ASSERT_TRUE(cpu_.write_kv_cache(k, v, m.slot_mapping, kc, vc).is_ok());
  AttentionMetadata mq = m;
  mq.slot_mapping = testing::from_i64(new_slots, {tokens});
  AttentionParams params;
  params.scale = 0.0883883f;
  Tensor want = Tensor::empty({tokens, hq, d}, DType::kF32).value();
  ASSERT_TRUE(cpu_.paged_attention(q, kc, vc, mq, params, want).is_ok());

  Tensor gkc = gpu_->zeros({total_blocks, bs, hkv, d}, DType::kBF16).value();
  Tensor gvc = gpu_->zeros({total_blocks, bs, hkv, d}, DType::kBF16).value();
  AttentionMetadata gm;
  gm.block_size = bs;
  gm.query_start_loc = up_raw(m.query_start_loc);
  gm.seq_lens = up_raw(m.seq_lens);
  gm.block_table = up_raw(m.block_table);
  gm.slot_mapping = up_raw(m.slot_mapping);
  ASSERT_TRUE(gpu_->write_kv_cache(up(k), up(v), gm.slot_mapping, gkc, gvc).is_ok());
  gm.slot_mapping = up_raw(mq.slot_mapping);
  Tensor got = out_bf16({tokens, hq, d});
  ASSERT_TRUE(gpu_->paged_attention(up(q), gkc, gvc, gm, params, got).is_ok());
  expect_close(down(got), to_floats(want), "paged_attention (no host bounds)");
  gm.max_query_len = 77;
  gm.max_seq_len = 4096;  // larger than any seq_len: what a captured graph passes
  Tensor got2 = out_bf16({tokens, hq, d});
  ASSERT_TRUE(gpu_->paged_attention(up(q), gkc, gvc, gm, params, got2).is_ok());
  expect_close(down(got2), to_floats(want), "paged_attention (loose host bounds)");

  // MLA: rank 64 + rope 16, nope 32, v 32, 4 heads.
  const int64_t rank = 64, rope = 16, nope = 32, vd = 32, heads = 4;
  Tensor latent = bf16_exact(random_f32({total, rank}, 30));
  Tensor kpe = bf16_exact(random_f32({total, rope}, 31));
  Tensor mc = cpu_.zeros({total_blocks, bs, rank + rope}, DType::kF32).value();
  ASSERT_TRUE(cpu_.write_mla_cache(latent, kpe, m.slot_mapping, mc).is_ok());
  LinearWeight kvb;
  kvb.weight = bf16_exact(random_f32({heads * (nope + vd), rank}, 32, -0.2f, 0.2f));
  Tensor mq_in = bf16_exact(random_f32({tokens, heads, nope + rope}, 33));
  MlaParams mp{rank, nope, rope, vd, 0.125f};
  Tensor want_mla = Tensor::empty({tokens, heads, vd}, DType::kF32).value();
  ASSERT_TRUE(
      cpu_.mla_attention(mq_in, mc, cpu_.prepare_linear(kvb).value(), mq, mp, want_mla).is_ok());
  Tensor gmc = gpu_->zeros({total_blocks, bs, rank + rope}, DType::kBF16).value();
  gm.slot_mapping = up_raw(m.slot_mapping);
  ASSERT_TRUE(gpu_->write_mla_cache(up(latent), up(kpe), gm.slot_mapping, gmc).is_ok());
  gm.slot_mapping = up_raw(mq.slot_mapping);
  Tensor got_mla = out_bf16({tokens, heads, vd});
  ASSERT_TRUE(
      gpu_->mla_attention(up(mq_in), gmc, gpu_->prepare_linear(kvb).value(), gm, mp, got_mla)
          .is_ok());
  expect_close(down(got_mla), to_floats(want_mla), "mla_attention (absorbed)");
}

TEST_F(CudaOps, MoeRouteAndExperts) {
  const int64_t t = 45, e = 16, k = 4, hidden = 256, inter = 96;
  const Routed routed = route_on_cpu(t, e, k, 50);
  const MoeRouting& r = routed.routing;
  const Tensor& logits = routed.logits;
  const Tensor& ids = routed.ids;
  const Tensor& wts = routed.weights;
  Tensor gids = gpu_->empty({t, k}, DType::kI32).value();
  Tensor gwts = gpu_->empty({t, k}, DType::kF32).value();
  ASSERT_TRUE(gpu_->moe_route(up_raw(logits), Tensor(), r, gids, gwts).is_ok());
  Tensor hid = gpu_->to_host(gids).value();
  EXPECT_EQ(std::memcmp(hid.raw_data(), ids.raw_data(), ids.nbytes()), 0) << "topk ids differ";
  expect_close(down(gwts), to_floats(wts), "moe_route weights", 1e-5);

  std::vector<ExpertWeights> cpu_experts, gpu_experts;
  for (int64_t i = 0; i < e; ++i) {
    ExpertWeights w;
    w.gate.weight = bf16_exact(random_f32({inter, hidden}, 100 + i, -0.1f, 0.1f));
    w.up.weight = bf16_exact(random_f32({inter, hidden}, 200 + i, -0.1f, 0.1f));
    w.down.weight = bf16_exact(random_f32({hidden, inter}, 300 + i, -0.1f, 0.1f));
    ExpertWeights c{cpu_.prepare_linear(w.gate).value(), cpu_.prepare_linear(w.up).value(),
                    cpu_.prepare_linear(w.down).value()};
    ExpertWeights g{gpu_->prepare_linear(w.gate).value(), gpu_->prepare_linear(w.up).value(),
                    gpu_->prepare_linear(w.down).value()};
    cpu_experts.push_back(std::move(c));
    gpu_experts.push_back(std::move(g));
  }
  Tensor x = bf16_exact(random_f32({t, hidden}, 60));
  Tensor want = Tensor::empty({t, hidden}, DType::kF32).value();
  ASSERT_TRUE(cpu_.moe_experts(x, ids, wts, cpu_experts, want).is_ok());
  Tensor got = out_bf16({t, hidden});
  ASSERT_TRUE(gpu_->moe_experts(up(x), gids, gwts, gpu_experts, got).is_ok());
  expect_close(down(got), to_floats(want), "moe_experts");
}

// Decode-sized linears take the GEMV kernels (<= 8 rows): every row count, output widths that
// are not a multiple of the 16 rows a CTA covers, f32 output (the router), strided input.
TEST_F(CudaOps, SmallBatchGemvLinears) {
  for (auto [k, n] : {std::pair{2048, 512}, {4096, 2048}, {768, 130}, {2048, 128}}) {
    for (int m = 1; m <= 8; ++m) {
      Tensor wide = bf16_exact(random_f32({m, k + 16}, 4000 + m));
      Tensor x = wide.slice(1, 16, 16 + k).value();
      LinearWeight w;
      w.weight = bf16_exact(random_f32({n, k}, 5000 + n, -0.05f, 0.05f));
      Tensor want = Tensor::empty({m, n}, DType::kF32).value();
      ASSERT_TRUE(cpu_.linear(x, cpu_.prepare_linear(w).value(), want).is_ok());
      LinearWeight gw = gpu_->prepare_linear(w).value();
      Tensor gx = up(wide).slice(1, 16, 16 + k).value();
      Tensor got = out_bf16({m, n});
      ASSERT_TRUE(gpu_->linear(gx, gw, got).is_ok());
      expect_close(down(got), to_floats(want), "gemv bf16 out");
      Tensor got32 = gpu_->empty({m, n}, DType::kF32).value();
      ASSERT_TRUE(gpu_->linear(gx, gw, got32).is_ok());
      expect_close(down(got32), to_floats(want), "gemv f32 out");
    }
  }
}

// A few tokens' routed experts take the GEMV path (<= 32 token-expert pairs), including pairs
// that share an expert.
TEST_F(CudaOps, MoeExpertsGemvForFewTokens) {
  std::vector<ExpertWeights> cpu_experts, gpu_experts;
  make_experts(
      16, 256, 96, 600, [](int64_t) { return true; }, &cpu_experts, gpu_experts);
  for (int64_t t = 1; t <= 4; ++t)
    compare_moe_experts(t, 8, 256, 900 + t, cpu_experts, gpu_experts, "moe_experts (gemv)");
}

// Expert parallelism: the experts held by another rank are undefined on both backends (expert 0
// among them, so nothing may read the first expert's shape) and their shares are left out; the
// GEMV path (few tokens) and the grouped GEMMs (more) both skip them.
TEST_F(CudaOps, MoeExpertsSkipExpertsOnOtherRanks) {
  std::vector<ExpertWeights> cpu_experts, gpu_experts;
  make_experts(
      16, 256, 96, 1100, [](int64_t i) { return i % 2 == 1; }, &cpu_experts, gpu_experts);
  for (int64_t t : {1, 3, 45, 300}) {
    compare_moe_experts(t, 4, 256, 1400 + t, cpu_experts, gpu_experts,
                        "moe_experts, half on another rank");
  }
}

// The fused router (GEMV whose last CTA routes) against the same GPU's two ops, which the
// MoeRoute test above checks against the CPU; logits also against the CPU's linear.
TEST_F(CudaOps, MoeRouterFusedEqualsLinearThenRoute) {
  cuda::set_gemv_kernels(cuda::GemvKernels::kStream);  // the fused kernel is a streaming one
  const int64_t hidden = 512, e = 64, k = 6;
  LinearWeight w;
  w.weight = bf16_exact(random_f32({e, hidden}, 1200, -0.1f, 0.1f));
  LinearWeight cw = cpu_.prepare_linear(w).value(), gw = gpu_->prepare_linear(w).value();
  Tensor bias = random_f32({e}, 1201, -0.05f, 0.05f);
  MoeRouting r;
  r.scoring = ScoringFunc::kSigmoid;
  r.topk_method = TopkMethod::kNoauxTc;
  r.n_group = 8;
  r.topk_group = 4;
  r.top_k = k;
  r.renormalize = true;
  r.routed_scaling_factor = 2.5f;
  for (int64_t t : {1, 4, 8, 9}) {  // 9: above the GEMV rows, the two ops run
    Tensor x = bf16_exact(random_f32({t, hidden}, 1210 + static_cast<uint64_t>(t)));
    Tensor gx = up(x);
    Tensor logits = gpu_->empty({t, e}, DType::kF32).value();
    Tensor ids = gpu_->empty({t, k}, DType::kI32).value();
    Tensor wts = gpu_->empty({t, k}, DType::kF32).value();
    ASSERT_TRUE(gpu_->moe_router(gx, gw, bias, r, logits, ids, wts).is_ok());
    Tensor ref_logits = gpu_->empty({t, e}, DType::kF32).value();
    Tensor ref_ids = gpu_->empty({t, k}, DType::kI32).value();
    Tensor ref_wts = gpu_->empty({t, k}, DType::kF32).value();
    ASSERT_TRUE(gpu_->linear(gx, gw, ref_logits).is_ok());
    ASSERT_TRUE(gpu_->moe_route(ref_logits, bias, r, ref_ids, ref_wts).is_ok());
    EXPECT_EQ(down(logits), down(ref_logits)) << "t=" << t;
    EXPECT_EQ(down(wts), down(ref_wts)) << "t=" << t;
    Tensor hi = gpu_->to_host(ids).value(), hr = gpu_->to_host(ref_ids).value();
    EXPECT_EQ(std::memcmp(hi.raw_data(), hr.raw_data(), hi.nbytes()), 0) << "t=" << t;
    Tensor want = Tensor::empty({t, e}, DType::kF32).value();
    ASSERT_TRUE(cpu_.linear(x, cw, want).is_ok());
    expect_close(down(logits), to_floats(want), "moe_router logits", 1e-4);
  }
  cuda::set_gemv_kernels(cuda::GemvKernels::kAuto);
}

// The pre-norm step run by the projection that consumes it (AddRmsNorm): the streaming GEMV's
// prologue must give the same bits as add_rms_norm then the projection, for the QKV-style merged
// linear and for the fused router, and the fallbacks (warp kernels, more rows than a GEMV takes)
// the same results through the two ops. Bitwise where every thread of the prologue owns at most
// one 16-byte chunk (k <= 2048); k = 4096 sums the squares in another order, so it is compared
// with the two ops and the CPU within bounds.
TEST_F(CudaOps, PreNormFusedIntoTheGemvEqualsTheTwoOps) {
  for (const cuda::GemvKernels kernels : {cuda::GemvKernels::kStream, cuda::GemvKernels::kWarp}) {
    cuda::set_gemv_kernels(kernels);
    for (const int64_t k : {512, 2048, 4096}) {
      const bool bitwise = k <= 2048;
      const int64_t widths[] = {256, 64, 64};
      std::vector<LinearWeight> cw, gw;
      for (int i = 0; i < 3; ++i) {
        LinearWeight w;
        w.weight = bf16_exact(
            random_f32({widths[i], k}, 8000 + static_cast<uint64_t>(i + k), -0.05f, 0.05f));
        cw.push_back(cpu_.prepare_linear(w).value());
        gw.push_back(gpu_->prepare_linear(w).value());
      }
      const LinearWeight* cparts[] = {&cw[0], &cw[1], &cw[2]};
      const LinearWeight* gparts[] = {&gw[0], &gw[1], &gw[2]};
      LinearWeight router;
      router.weight = bf16_exact(random_f32({64, k}, 8100 + static_cast<uint64_t>(k), -0.1f, 0.1f));
      LinearWeight grouter = gpu_->prepare_linear(router).value();
      MoeRouting r;
      r.top_k = 6;
      r.renormalize = true;
      const Tensor norm_w = random_f32({k}, 8200 + static_cast<uint64_t>(k), 0.5f, 1.5f);
      for (const int64_t m : {1, 3, 8, 9}) {
        SCOPED_TRACE("kernels " + std::to_string(static_cast<int>(kernels)) + " k " +
                     std::to_string(k) + " m " + std::to_string(m));
        const uint64_t seed = 8300 + static_cast<uint64_t>(k + m);
        const Tensor residual = bf16_exact(random_f32({m, k}, seed));
        const Tensor delta = bf16_exact(random_f32({m, k}, seed + 1));
        AddRmsNorm step{up(residual), up(delta), norm_w, 1e-6f, out_bf16({m, k}), out_bf16({m, k})};
        // The two ops on the GPU, on a copy of the residual (add_rms_norm is in place).
        Tensor ref_residual = gpu_->empty({m, k}, DType::kBF16).value();
        ASSERT_TRUE(gpu_->copy(step.residual, ref_residual).is_ok());
        Tensor ref_normed = out_bf16({m, k});
        ASSERT_TRUE(
            gpu_->add_rms_norm(ref_residual, step.delta, norm_w, 1e-6f, ref_normed).is_ok());

        Tensor qkv = out_bf16({m, 384});
        ASSERT_TRUE(gpu_->add_rms_norm_merged_linear(step, gparts, qkv).is_ok());
        Tensor ref_qkv = out_bf16({m, 384});
        ASSERT_TRUE(gpu_->merged_linear(ref_normed, gparts, ref_qkv).is_ok());
        if (bitwise) {
          EXPECT_EQ(down(step.residual_out), down(ref_residual));
          EXPECT_EQ(down(step.normed), down(ref_normed));
          EXPECT_EQ(down(qkv), down(ref_qkv));
        } else {
          EXPECT_EQ(down(step.residual_out), down(ref_residual));  // the sum has one order
          expect_close(down(step.normed), down(ref_normed), "pre-norm normed (k 4096)", 1e-3);
          expect_close(down(qkv), down(ref_qkv), "pre-norm qkv (k 4096)", 1e-3);
        }
        // And against the CPU reference.
        Tensor cpu_residual = Tensor::empty({m, k}, DType::kF32).value();
        std::memcpy(cpu_residual.raw_data(), residual.raw_data(), residual.nbytes());
        Tensor cpu_normed = Tensor::empty({m, k}, DType::kF32).value();
        ASSERT_TRUE(cpu_.add_rms_norm(cpu_residual, delta, norm_w, 1e-6f, cpu_normed).is_ok());
        Tensor want = Tensor::empty({m, 384}, DType::kF32).value();
        ASSERT_TRUE(cpu_.merged_linear(cpu_normed, cparts, want).is_ok());
        expect_close(down(qkv), to_floats(want), "add_rms_norm_merged_linear vs cpu");

        // The router form: a fresh step (its residual_out and normed poisoned again).
        AddRmsNorm step2{step.residual, step.delta,       norm_w,
                         1e-6f,         out_bf16({m, k}), out_bf16({m, k})};
        Tensor logits = gpu_->empty({m, 64}, DType::kF32).value();
        Tensor ids = gpu_->empty({m, 6}, DType::kI32).value();
        Tensor wts = gpu_->empty({m, 6}, DType::kF32).value();
        ASSERT_TRUE(
            gpu_->add_rms_norm_moe_router(step2, grouter, Tensor(), r, logits, ids, wts).is_ok());
        Tensor ref_logits = gpu_->empty({m, 64}, DType::kF32).value();
        Tensor ref_ids = gpu_->empty({m, 6}, DType::kI32).value();
        Tensor ref_wts = gpu_->empty({m, 6}, DType::kF32).value();
        ASSERT_TRUE(
            gpu_->moe_router(step2.normed, grouter, Tensor(), r, ref_logits, ref_ids, ref_wts)
                .is_ok());
        EXPECT_EQ(down(logits), down(ref_logits)) << "same normed row in, same kernel";
        EXPECT_EQ(down(wts), down(ref_wts));
        Tensor hi = gpu_->to_host(ids).value(), hr = gpu_->to_host(ref_ids).value();
        EXPECT_EQ(std::memcmp(hi.raw_data(), hr.raw_data(), hi.nbytes()), 0);
        if (bitwise) {
          EXPECT_EQ(down(step2.normed), down(ref_normed));
          EXPECT_EQ(down(step2.residual_out), down(ref_residual));
        }
      }
    }
  }
  cuda::set_gemv_kernels(cuda::GemvKernels::kAuto);
}

// The o projection and the router as one op: at decode sizes one launch (the router as the
// projection's tail), above them the two ops; either way bit-equal to linear followed by
// add_rms_norm_moe_router on the GPU.
TEST_F(CudaOps, ProjectionThenRouterEqualsTheTwoOps) {
  const int64_t hidden = 512, heads = 1024, experts = 64;
  LinearWeight proj, router;
  proj.weight = bf16_exact(random_f32({hidden, heads}, 9100, -0.05f, 0.05f));
  router.weight = bf16_exact(random_f32({experts, hidden}, 9101, -0.1f, 0.1f));
  const LinearWeight gproj = gpu_->prepare_linear(proj).value();
  const LinearWeight grouter = gpu_->prepare_linear(router).value();
  MoeRouting r;
  r.top_k = 6;
  r.renormalize = true;
  const Tensor norm_w = random_f32({hidden}, 9102, 0.5f, 1.5f);
  for (const int64_t m : {1, 3, 8, 9}) {
    SCOPED_TRACE("m " + std::to_string(m));
    const uint64_t seed = 9200 + static_cast<uint64_t>(m);
    const Tensor x = up(bf16_exact(random_f32({m, heads}, seed)));
    const Tensor residual = up(bf16_exact(random_f32({m, hidden}, seed + 1)));
    auto fresh_step = [&] {
      return AddRmsNorm{residual, out_bf16({m, hidden}), norm_w,
                        1e-6f,    out_bf16({m, hidden}), out_bf16({m, hidden})};
    };
    struct RouterOut {
      Tensor logits, ids, weights;
    };
    auto fresh_routed = [&] {
      return RouterOut{gpu_->empty({m, experts}, DType::kF32).value(),
                       gpu_->empty({m, 6}, DType::kI32).value(),
                       gpu_->empty({m, 6}, DType::kF32).value()};
    };
    AddRmsNorm step = fresh_step();
    RouterOut got = fresh_routed();
    ASSERT_TRUE(gpu_->linear_add_rms_norm_moe_router(x, gproj, step, grouter, Tensor(), r,
                                                     got.logits, got.ids, got.weights)
                    .is_ok());
    AddRmsNorm ref = fresh_step();
    RouterOut want = fresh_routed();
    Tensor ref_delta = ref.delta;
    ASSERT_TRUE(gpu_->linear(x, gproj, ref_delta).is_ok());
    ASSERT_TRUE(gpu_->add_rms_norm_moe_router(ref, grouter, Tensor(), r, want.logits, want.ids,
                                              want.weights)
                    .is_ok());
    EXPECT_EQ(down(step.delta), down(ref.delta));
    EXPECT_EQ(down(step.residual_out), down(ref.residual_out));
    EXPECT_EQ(down(step.normed), down(ref.normed));
    EXPECT_EQ(down(got.logits), down(want.logits));
    EXPECT_EQ(down(got.weights), down(want.weights));
    Tensor gi = gpu_->to_host(got.ids).value(), wi = gpu_->to_host(want.ids).value();
    EXPECT_EQ(std::memcmp(gi.raw_data(), wi.raw_data(), gi.nbytes()), 0);
  }
}

// The folded router through the backend: linear_add_rms_norm_moe_router with experts_follow,
// then moe_experts, against the same two ops without it (the unfolded ops above). At one token
// the router folds (CudaBackendOptions::fold_router): the projection and the pre-norm outputs
// are bit-equal, the logits equal up to rounding, the same experts (no near tie at these seeds),
// the weights and the experts' output close. At three tokens it does not fold: all bit-equal.
TEST_F(CudaOps, FoldedRouterThenExpertsMatchesTheUnfoldedOps) {
  const FoldCase c = fold_case(9300);
  for (const int64_t m : {1, 3}) {
    SCOPED_TRACE("m " + std::to_string(m));
    const uint64_t seed = 9500 + static_cast<uint64_t>(m);
    const Tensor x = up(bf16_exact(random_f32({m, c.kHeads}, seed)));
    const Tensor residual = up(bf16_exact(random_f32({m, c.kHidden}, seed + 1)));
    auto run = [&](bool experts_follow, FoldRouted& o, Tensor& out) {
      out = out_bf16({m, c.kHidden});
      EXPECT_TRUE(fold_route(c, x, residual, experts_follow, o).is_ok());
      EXPECT_TRUE(gpu_->moe_experts(o.step.normed, o.ids, o.weights, c.experts, out).is_ok());
    };
    FoldRouted got, want;
    Tensor got_out, want_out;
    run(true, got, got_out);
    run(false, want, want_out);
    EXPECT_EQ(down(got.step.delta), down(want.step.delta));
    EXPECT_EQ(down(got.step.residual_out), down(want.step.residual_out));
    EXPECT_EQ(down(got.step.normed), down(want.step.normed));
    Tensor gi = gpu_->to_host(got.ids).value(), wi = gpu_->to_host(want.ids).value();
    EXPECT_EQ(std::memcmp(gi.raw_data(), wi.raw_data(), gi.nbytes()), 0) << "ids";
    if (m == 1) {
      expect_close(down(got.logits), down(want.logits), "folded router logits");
      expect_close(down(got.weights), down(want.weights), "folded router weights");
      expect_close(down(got_out), down(want_out), "experts after the folded router");
    } else {
      EXPECT_EQ(down(got.logits), down(want.logits));
      EXPECT_EQ(down(got.weights), down(want.weights));
      EXPECT_EQ(down(got_out), down(want_out));
    }
  }
}

// A folded router whose experts do not follow it (another input reaches moe_experts) is a bug in
// the caller: moe_experts says so instead of running the experts on routing it never finished,
// and the next router call starts afresh.
TEST_F(CudaOps, FoldedRouterNotFollowedByItsExpertsIsAnError) {
  const FoldCase c = fold_case(9600);
  const Tensor x = up(bf16_exact(random_f32({1, c.kHeads}, 9604)));
  const Tensor residual = up(bf16_exact(random_f32({1, c.kHidden}, 9605)));
  const Tensor other = up(bf16_exact(random_f32({1, c.kHidden}, 9606)));
  FoldRouted got, want;
  ASSERT_TRUE(fold_route(c, x, residual, true, got).is_ok());
  Tensor out = out_bf16({1, c.kHidden});
  const Status s = gpu_->moe_experts(other, got.ids, got.weights, c.experts, out);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::kInternal);
  EXPECT_NE(s.message().find("must follow it"), std::string::npos) << s.message();
  // The handoff was dropped: a fresh folded call and its own experts match the unfolded ops.
  ASSERT_TRUE(fold_route(c, x, residual, true, got).is_ok());
  ASSERT_TRUE(gpu_->moe_experts(got.step.normed, got.ids, got.weights, c.experts, out).is_ok());
  ASSERT_TRUE(fold_route(c, x, residual, false, want).is_ok());
  Tensor want_out = out_bf16({1, c.kHidden});
  ASSERT_TRUE(
      gpu_->moe_experts(want.step.normed, want.ids, want.weights, c.experts, want_out).is_ok());
  Tensor gi = gpu_->to_host(got.ids).value(), wi = gpu_->to_host(want.ids).value();
  EXPECT_EQ(std::memcmp(gi.raw_data(), wi.raw_data(), gi.nbytes()), 0) << "ids";
  expect_close(down(out), down(want_out), "experts after the folded router");
}

// The merged projection (fused QKV): one GEMV launch over three weights with biases at decode
// sizes, cuBLASLt GEMMs into column slices above; both against the CPU's separate projections.
TEST_F(CudaOps, MergedLinearOverThreeWeights) {
  const int64_t k = 512;
  const int64_t widths[] = {512, 128, 128};
  std::vector<LinearWeight> cw, gw;
  for (int i = 0; i < 3; ++i) {
    LinearWeight w;
    w.weight =
        bf16_exact(random_f32({widths[i], k}, 7000 + static_cast<uint64_t>(i), -0.05f, 0.05f));
    w.bias = random_f32({widths[i]}, 7100 + static_cast<uint64_t>(i));
    cw.push_back(cpu_.prepare_linear(w).value());
    gw.push_back(gpu_->prepare_linear(w).value());
  }
  const LinearWeight* cparts[] = {&cw[0], &cw[1], &cw[2]};
  const LinearWeight* gparts[] = {&gw[0], &gw[1], &gw[2]};
  for (int64_t m : {1, 3, 8, 9, 40}) {
    Tensor wide = bf16_exact(random_f32({m, k + 8}, 7200 + static_cast<uint64_t>(m)));
    Tensor want = Tensor::empty({m, 768}, DType::kF32).value();
    ASSERT_TRUE(cpu_.merged_linear(wide.slice(1, 8, 8 + k).value(), cparts, want).is_ok());
    Tensor got = out_bf16({m, 768});
    ASSERT_TRUE(gpu_->merged_linear(up(wide).slice(1, 8, 8 + k).value(), gparts, got).is_ok());
    expect_close(down(got), to_floats(want),
                 m <= 8 ? "merged_linear (gemv)" : "merged_linear (gemm)");
  }
}

// An RMSNorm whose rows are split into column parts (MiniMax-M2's q/k norm under tensor
// parallelism): each part's sum of squares on the GPU, added up, then each part normalized with
// the total, against the CPU's rms_norm of the whole row.
TEST_F(CudaOps, SplitRmsNormOverPartsEqualsTheWholeRow) {
  const int64_t t = 7, n = 6144;                        // MiniMax-M2's q: 48 heads x 128
  Tensor x = bf16_exact(random_f32({t, n + 512}, 30));  // parts are column slices of a wider row
  const auto xs = to_floats(x);
  std::vector<float> whole;
  for (int64_t r = 0; r < t; ++r)
    for (int64_t c = 0; c < n; ++c)
      whole.push_back(xs[static_cast<size_t>(r * (n + 512) + c)]);
  Tensor whole_x = testing::from_floats(whole, {t, n});
  Tensor w = random_f32({n}, 31, 0.5f, 1.5f);
  const auto ws = to_floats(w);
  Tensor want = Tensor::empty({t, n}, DType::kF32).value();
  ASSERT_TRUE(cpu_.rms_norm(whole_x, w, 1e-6f, want).is_ok());
  Tensor gx = up(x);
  const std::vector<int64_t> cuts = {0, 1536, 3072, 6144};
  std::vector<float> total(static_cast<size_t>(t), 0.0f);
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    Tensor part = gx.slice(1, cuts[p], cuts[p + 1]).value();
    Tensor ss = gpu_->empty({t}, DType::kF32).value();
    ASSERT_TRUE(gpu_->sum_squares(part, ss).is_ok());
    const auto got = down(ss);
    for (size_t r = 0; r < got.size(); ++r)
      total[r] += got[r];
  }
  Tensor sums = up_raw(testing::from_floats(total, {t}));
  std::vector<float> got_all(static_cast<size_t>(t * n));
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    const int64_t width = cuts[p + 1] - cuts[p];
    Tensor part = gx.slice(1, cuts[p], cuts[p + 1]).value();
    Tensor pw = gpu_->prepare_weight(testing::from_floats(
                                         {ws.begin() + cuts[p], ws.begin() + cuts[p + 1]}, {width}))
                    .value();
    Tensor out = out_bf16({t, width});
    ASSERT_TRUE(gpu_->split_rms_norm(part, pw, sums, n, 1e-6f, out).is_ok());
    const auto o = down(out);
    for (int64_t r = 0; r < t; ++r)
      for (int64_t c = 0; c < width; ++c)
        got_all[static_cast<size_t>(r * n + cuts[p] + c)] = o[static_cast<size_t>(r * width + c)];
  }
  expect_close(got_all, to_floats(want), "split_rms_norm over 3 parts");
}

// The low_latency exchange's plan on the GPU equals the CPU's exactly (token order within each
// block, over several 256-token chunks), and its combine adds the same rows.
TEST_F(CudaOps, MoeDispatchPlanAndGatherSumRowsMatchTheCpu) {
  const int64_t e = 64, k = 8;
  for (int64_t ranks : {2, 8}) {
    for (int64_t t : {1, 5, 600}) {
      const int64_t cap = t + 3;
      std::vector<int32_t> id_values, owner_values;
      for (int64_t i = 0; i < t * k; ++i)
        id_values.push_back(static_cast<int32_t>((i * 7919 + i / k * 13) % e));
      for (int64_t x = 0; x < e; ++x)
        owner_values.push_back(static_cast<int32_t>((x * 5) % ranks));
      Tensor ids = testing::from_i32(id_values, {t, k});
      Tensor w = random_f32({t, k}, 40, 0.0f, 1.0f);
      Tensor owner = testing::from_i32(owner_values, {e});
      Tensor si = Tensor::empty({ranks * cap}, DType::kI32).value();
      Tensor sid = Tensor::empty({ranks * cap, k}, DType::kI32).value();
      Tensor sw = Tensor::empty({ranks * cap, k}, DType::kF32).value();
      Tensor ci = Tensor::empty({ranks, t}, DType::kI32).value();
      ASSERT_TRUE(cpu_.moe_dispatch_plan(ids, w, owner, ranks, cap, si, sid, sw, ci).is_ok());
      Tensor gsi = gpu_->empty({ranks * cap}, DType::kI32).value();
      Tensor gsid = gpu_->empty({ranks * cap, k}, DType::kI32).value();
      Tensor gsw = gpu_->empty({ranks * cap, k}, DType::kF32).value();
      Tensor gci = gpu_->empty({ranks, t}, DType::kI32).value();
      const Status st = gpu_->moe_dispatch_plan(up_raw(ids), up_raw(w), up_raw(owner), ranks, cap,
                                                gsi, gsid, gsw, gci);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      const std::string what = std::to_string(ranks) + " ranks, " + std::to_string(t) + " tokens";
      for (auto [cpu, gpu] : {std::pair{&si, &gsi}, {&sid, &gsid}, {&sw, &gsw}, {&ci, &gci}}) {
        Tensor back = gpu_->to_host(*gpu).value();
        EXPECT_EQ(std::memcmp(back.raw_data(), cpu->raw_data(), cpu->nbytes()), 0) << what;
      }
      // Combine: every token's rows from the blocks it went to.
      const int64_t hidden = 256;
      Tensor blocks = bf16_exact(random_f32({ranks * cap, hidden}, 41));
      Tensor want = Tensor::empty({t, hidden}, DType::kF32).value();
      ASSERT_TRUE(cpu_.gather_sum_rows(blocks, ci, want).is_ok());
      Tensor got = out_bf16({t, hidden});
      ASSERT_TRUE(gpu_->gather_sum_rows(up(blocks), gci, got).is_ok());
      expect_close(down(got), to_floats(want), ("gather_sum_rows " + what).c_str());
    }
  }
}

#endif

}  // namespace
}  // namespace locus

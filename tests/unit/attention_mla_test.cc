// MLA attention over the paged latent cache against two f64 references: the expanded form
// (per-head k_nope and v from kv_b_proj, as transformers computes it) and the absorbed form
// (attention in latent space, as fast MLA kernels compute it). Both must agree with the op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::from_i32;
using testing::from_i64;
using testing::random_f32;
using testing::to_floats;

constexpr int64_t kHeads = 3, kRank = 16, kNope = 8, kRope = 4, kV = 6;
constexpr int64_t kBlocks = 12, kBlockSize = 4;

struct Seq {
  int64_t context, num_new;
  std::vector<int32_t> blocks;
  std::vector<float> latent, k_pe;  // [context, rank], [context, rope]
  int64_t slot(int64_t j) const {
    return blocks[static_cast<size_t>(j / kBlockSize)] * kBlockSize + j % kBlockSize;
  }
};

enum class Form { kExpanded, kAbsorbed };

// out[t, h, :] for every new token, in f64.
std::vector<float> reference(const std::vector<Seq>& seqs, const std::vector<float>& q,
                             const std::vector<float>& w, double scale, Form form) {
  const int64_t per_head = kNope + kV;
  auto W = [&](int64_t h, int64_t row, int64_t col) {  // kv_b_proj[h * per_head + row][col]
    return static_cast<double>(w[static_cast<size_t>((h * per_head + row) * kRank + col)]);
  };
  std::vector<float> out;
  size_t t = 0;
  for (const Seq& s : seqs) {
    for (int64_t i = 0; i < s.num_new; ++i, ++t) {
      const int64_t p = s.context - s.num_new + i;
      for (int64_t h = 0; h < kHeads; ++h) {
        const float* qh = q.data() + (t * kHeads + static_cast<size_t>(h)) * (kNope + kRope);
        // Absorbed: W_UK^T q_nope, a query in latent space.
        std::vector<double> q_latent(kRank, 0.0);
        for (int64_t c = 0; c < kRank; ++c)
          for (int64_t r = 0; r < kNope; ++r)
            q_latent[static_cast<size_t>(c)] += W(h, r, c) * qh[r];
        std::vector<double> scores;
        for (int64_t j = 0; j <= p; ++j) {
          const float* c = s.latent.data() + j * kRank;
          double d = 0;
          if (form == Form::kExpanded) {
            for (int64_t r = 0; r < kNope; ++r) {
              double k_nope = 0;
              for (int64_t x = 0; x < kRank; ++x)
                k_nope += W(h, r, x) * c[x];
              d += qh[r] * k_nope;
            }
          } else {
            for (int64_t x = 0; x < kRank; ++x)
              d += q_latent[static_cast<size_t>(x)] * c[x];
          }
          for (int64_t r = 0; r < kRope; ++r)
            d += static_cast<double>(qh[kNope + r]) * s.k_pe[static_cast<size_t>(j * kRope + r)];
          scores.push_back(d * scale);
        }
        const double m = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double& x : scores)
          sum += (x = std::exp(x - m));
        std::vector<double> latent_out(kRank, 0.0);
        std::vector<double> v_out(kV, 0.0);
        for (int64_t j = 0; j <= p; ++j) {
          const double pj = scores[static_cast<size_t>(j)] / sum;
          const float* c = s.latent.data() + j * kRank;
          for (int64_t x = 0; x < kRank; ++x)
            latent_out[static_cast<size_t>(x)] += pj * c[x];
          if (form == Form::kExpanded) {
            for (int64_t r = 0; r < kV; ++r) {
              double v = 0;
              for (int64_t x = 0; x < kRank; ++x)
                v += W(h, kNope + r, x) * c[x];
              v_out[static_cast<size_t>(r)] += pj * v;
            }
          }
        }
        if (form == Form::kAbsorbed) {  // W_UV applied once, after the weighted sum
          for (int64_t r = 0; r < kV; ++r)
            for (int64_t x = 0; x < kRank; ++x)
              v_out[static_cast<size_t>(r)] +=
                  W(h, kNope + r, x) * latent_out[static_cast<size_t>(x)];
        }
        for (double v : v_out)
          out.push_back(static_cast<float>(v));
      }
    }
  }
  return out;
}

TEST(MlaAttention, MatchesExpandedAndAbsorbedReferences) {
  CpuBackend backend;
  std::vector<Seq> seqs = {
      {10, 10, {7, 2, 9}, {}, {}}, {6, 1, {0, 11}, {}, {}}, {9, 4, {5, 3, 1}, {}, {}}};
  uint64_t seed = 500;
  Tensor cache = backend.zeros({kBlocks, kBlockSize, kRank + kRope}, DType::kF32).value();
  std::vector<float> new_latent, new_pe;
  std::vector<int64_t> slots;
  std::vector<int32_t> qsl = {0}, seq_lens, table(seqs.size() * 3, -1);
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = seqs[i];
    s.latent = to_floats(random_f32({s.context, kRank}, ++seed));
    s.k_pe = to_floats(random_f32({s.context, kRope}, ++seed));
    std::copy(s.blocks.begin(), s.blocks.end(), table.begin() + static_cast<long>(i * 3));
    for (int64_t j = 0; j < s.context; ++j) {
      if (j < s.context - s.num_new) {  // history, written by earlier steps
        float* dst = cache.data<float>() + s.slot(j) * (kRank + kRope);
        std::copy_n(s.latent.begin() + j * kRank, kRank, dst);
        std::copy_n(s.k_pe.begin() + j * kRope, kRope, dst + kRank);
      } else {
        slots.push_back(s.slot(j));
        new_latent.insert(new_latent.end(), s.latent.begin() + j * kRank,
                          s.latent.begin() + (j + 1) * kRank);
        new_pe.insert(new_pe.end(), s.k_pe.begin() + j * kRope, s.k_pe.begin() + (j + 1) * kRope);
      }
    }
    qsl.push_back(qsl.back() + static_cast<int32_t>(s.num_new));
    seq_lens.push_back(static_cast<int32_t>(s.context));
  }
  const int64_t tokens = qsl.back();
  AttentionMetadata m;
  m.block_size = kBlockSize;
  m.query_start_loc = from_i32(qsl, {4});
  m.seq_lens = from_i32(seq_lens, {3});
  m.block_table = from_i32(table, {3, 3});
  m.slot_mapping = from_i64(slots, {tokens});
  ASSERT_TRUE(backend
                  .write_mla_cache(testing::from_floats(new_latent, {tokens, kRank}),
                                   testing::from_floats(new_pe, {tokens, kRope}), m.slot_mapping,
                                   cache)
                  .is_ok());

  LinearWeight kv_b;
  kv_b.weight = random_f32({kHeads * (kNope + kV), kRank}, 600);
  Tensor q = random_f32({tokens, kHeads, kNope + kRope}, 601);
  MlaParams params{kRank, kNope, kRope, kV, 0.35f};
  Tensor out = Tensor::empty({tokens, kHeads, kV}, DType::kF32).value();
  ASSERT_TRUE(backend.mla_attention(q, cache, kv_b, m, params, out).is_ok());

  const auto got = to_floats(out);
  const auto w = to_floats(kv_b.weight);
  EXPECT_LT(testing::max_abs_diff(got, reference(seqs, to_floats(q), w, 0.35, Form::kExpanded)),
            2e-6);
  EXPECT_LT(testing::max_abs_diff(got, reference(seqs, to_floats(q), w, 0.35, Form::kAbsorbed)),
            2e-6);
}

TEST(MlaAttention, KvBProjShapeIsChecked) {
  CpuBackend backend;
  Tensor cache = backend.zeros({2, kBlockSize, kRank + kRope}, DType::kF32).value();
  AttentionMetadata m;
  m.block_size = kBlockSize;
  m.query_start_loc = from_i32({0, 1}, {2});
  m.seq_lens = from_i32({1}, {1});
  m.block_table = from_i32({0}, {1, 1});
  m.slot_mapping = from_i64({0}, {1});
  LinearWeight kv_b;
  kv_b.weight = random_f32({kHeads * kNope, kRank}, 1);  // missing the v rows
  Tensor q = random_f32({1, kHeads, kNope + kRope}, 2);
  Tensor out = Tensor::empty({1, kHeads, kV}, DType::kF32).value();
  Status s =
      backend.mla_attention(q, cache, kv_b, m, MlaParams{kRank, kNope, kRope, kV, 1.0f}, out);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("kv_b_proj f32[24, 16]"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace locus

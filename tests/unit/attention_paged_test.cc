// Paged GQA attention against dense attention in f64: sequences with history in scattered
// blocks, unequal numbers of new tokens (prefill, decode and a chunk in one batch), grouped
// heads, sliding windows, and the checks on bad block tables and slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::from_i32;
using testing::from_i64;
using testing::random_f32;
using testing::to_floats;

constexpr int64_t kBlocks = 24;
constexpr int64_t kBlockSize = 4;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kQHeads = 6;
constexpr int64_t kDim = 8;
constexpr int64_t kVDim = 6;

struct Sequence {
  int64_t context = 0;  // tokens after this step
  int64_t num_new = 0;
  std::vector<int32_t> blocks;
  std::vector<float> k, v;  // dense [context, kv_heads, dim] / [context, kv_heads, v_dim]
  int64_t slot(int64_t j) const {
    return blocks[static_cast<size_t>(j / kBlockSize)] * kBlockSize + j % kBlockSize;
  }
};

// Scatters each sequence over a shuffled set of block ids, so reading through the block table
// (not contiguity) is what finds the history.
std::vector<Sequence> make_sequences(const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  std::vector<int32_t> ids(kBlocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::reverse(ids.begin(), ids.end());
  std::rotate(ids.begin(), ids.begin() + 5, ids.end());
  size_t next = 0;
  std::vector<Sequence> seqs;
  uint64_t seed = 300;
  for (auto [context, num_new] : shapes) {
    Sequence s;
    s.context = context;
    s.num_new = num_new;
    for (int64_t b = 0; b < (context + kBlockSize - 1) / kBlockSize; ++b)
      s.blocks.push_back(ids[next++]);
    s.k = to_floats(random_f32({context, kKvHeads, kDim}, ++seed));
    s.v = to_floats(random_f32({context, kKvHeads, kVDim}, ++seed));
    seqs.push_back(std::move(s));
  }
  return seqs;
}

struct PagedSetup {
  Tensor q, k_cache, v_cache;
  AttentionMetadata metadata;
};

// Writes each sequence's history, then this step's K/V through write_kv_cache, and builds the
// metadata and queries for the new tokens.
PagedSetup prepare(CpuBackend& backend, const std::vector<Sequence>& seqs) {
  PagedSetup s;
  s.k_cache = backend.zeros({kBlocks, kBlockSize, kKvHeads, kDim}, DType::kF32).value();
  s.v_cache = backend.zeros({kBlocks, kBlockSize, kKvHeads, kVDim}, DType::kF32).value();
  std::vector<int32_t> qsl = {0};
  std::vector<int32_t> seq_lens;
  std::vector<int64_t> slots;
  std::vector<float> new_k, new_v;
  size_t width = 0;
  for (const auto& seq : seqs)
    width = std::max(width, seq.blocks.size());
  std::vector<int32_t> table(seqs.size() * width, -1);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& seq = seqs[i];
    std::copy(seq.blocks.begin(), seq.blocks.end(), table.begin() + static_cast<long>(i * width));
    const int64_t history = seq.context - seq.num_new;
    for (int64_t j = 0; j < history; ++j) {  // as if written by earlier steps
      std::copy_n(seq.k.begin() + j * kKvHeads * kDim, kKvHeads * kDim,
                  s.k_cache.data<float>() + seq.slot(j) * kKvHeads * kDim);
      std::copy_n(seq.v.begin() + j * kKvHeads * kVDim, kKvHeads * kVDim,
                  s.v_cache.data<float>() + seq.slot(j) * kKvHeads * kVDim);
    }
    for (int64_t j = history; j < seq.context; ++j) {
      slots.push_back(seq.slot(j));
      new_k.insert(new_k.end(), seq.k.begin() + j * kKvHeads * kDim,
                   seq.k.begin() + (j + 1) * kKvHeads * kDim);
      new_v.insert(new_v.end(), seq.v.begin() + j * kKvHeads * kVDim,
                   seq.v.begin() + (j + 1) * kKvHeads * kVDim);
    }
    qsl.push_back(qsl.back() + static_cast<int32_t>(seq.num_new));
    seq_lens.push_back(static_cast<int32_t>(seq.context));
  }
  const int64_t tokens = qsl.back();
  Tensor k = testing::from_floats(new_k, {tokens, kKvHeads, kDim});
  Tensor v = testing::from_floats(new_v, {tokens, kKvHeads, kVDim});
  Tensor slot_mapping = from_i64(slots, {tokens});
  EXPECT_TRUE(backend.write_kv_cache(k, v, slot_mapping, s.k_cache, s.v_cache).is_ok());
  s.metadata.block_size = kBlockSize;
  s.metadata.query_start_loc = from_i32(qsl, {static_cast<int64_t>(qsl.size())});
  s.metadata.seq_lens = from_i32(seq_lens, {static_cast<int64_t>(seq_lens.size())});
  s.metadata.block_table =
      from_i32(table, {static_cast<int64_t>(seqs.size()), static_cast<int64_t>(width)});
  s.metadata.slot_mapping = slot_mapping;
  s.q = random_f32({tokens, kQHeads, kDim}, 400);
  return s;
}

// Dense causal attention of each sequence's new tokens over its full K/V, in f64.
std::vector<float> reference(const std::vector<Sequence>& seqs, const std::vector<float>& q,
                             float scale, std::optional<int64_t> window) {
  std::vector<float> out;
  size_t t = 0;
  for (const auto& seq : seqs) {
    for (int64_t i = 0; i < seq.num_new; ++i, ++t) {
      const int64_t p = seq.context - seq.num_new + i;
      const int64_t first = window ? std::max<int64_t>(0, p - *window + 1) : 0;
      for (int64_t h = 0; h < kQHeads; ++h) {
        const int64_t kvh = h / (kQHeads / kKvHeads);
        std::vector<double> w;
        for (int64_t j = first; j <= p; ++j) {
          double d = 0;
          for (int64_t x = 0; x < kDim; ++x)
            d += static_cast<double>(
                     q[(t * kQHeads + static_cast<size_t>(h)) * kDim + static_cast<size_t>(x)]) *
                 seq.k[static_cast<size_t>((j * kKvHeads + kvh) * kDim + x)];
          w.push_back(d * scale);
        }
        const double m = *std::max_element(w.begin(), w.end());
        double sum = 0;
        for (double& x : w)
          sum += (x = std::exp(x - m));
        for (int64_t x = 0; x < kVDim; ++x) {
          double acc = 0;
          for (int64_t j = first; j <= p; ++j)
            acc += w[static_cast<size_t>(j - first)] / sum *
                   seq.v[static_cast<size_t>((j * kKvHeads + kvh) * kVDim + x)];
          out.push_back(static_cast<float>(acc));
        }
      }
    }
  }
  return out;
}

TEST(PagedAttention, MixedPrefillDecodeAndChunkMatchDenseAttention) {
  CpuBackend backend;
  // (context after the step, new tokens): a prefill, a decode, a chunk after history, and a
  // sequence whose context ends exactly on a block boundary.
  auto seqs = make_sequences({{9, 9}, {7, 1}, {13, 5}, {8, 2}});
  PagedSetup s = prepare(backend, seqs);
  AttentionParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  Tensor out = Tensor::empty({s.q.size(0), kQHeads, kVDim}, DType::kF32).value();
  ASSERT_TRUE(backend.paged_attention(s.q, s.k_cache, s.v_cache, s.metadata, params, out).is_ok());
  auto expected = reference(seqs, to_floats(s.q), params.scale, std::nullopt);
  EXPECT_LT(testing::max_abs_diff(to_floats(out), expected), 1e-6);
}

TEST(PagedAttention, SlidingWindowSeesOnlyTheLastTokens) {
  CpuBackend backend;
  auto seqs = make_sequences({{11, 11}, {10, 3}});
  PagedSetup s = prepare(backend, seqs);
  AttentionParams params;
  params.scale = 0.3f;
  params.sliding_window = 3;
  Tensor out = Tensor::empty({s.q.size(0), kQHeads, kVDim}, DType::kF32).value();
  ASSERT_TRUE(backend.paged_attention(s.q, s.k_cache, s.v_cache, s.metadata, params, out).is_ok());
  EXPECT_LT(testing::max_abs_diff(to_floats(out), reference(seqs, to_floats(s.q), 0.3f, 3)), 1e-6);
  // And it really differs from full attention.
  EXPECT_GT(
      testing::max_abs_diff(to_floats(out), reference(seqs, to_floats(s.q), 0.3f, std::nullopt)),
      1e-3);
}

TEST(PagedAttention, BadBlockTablesAndSlotsAreErrors) {
  CpuBackend backend;
  auto seqs = make_sequences({{6, 2}});
  PagedSetup s = prepare(backend, seqs);
  AttentionParams params;
  Tensor out = Tensor::empty({2, kQHeads, kVDim}, DType::kF32).value();
  s.metadata.block_table.data<int32_t>()[1] = static_cast<int32_t>(kBlocks);
  Status st = backend.paged_attention(s.q, s.k_cache, s.v_cache, s.metadata, params, out);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("sequence 0 block 1 is id 24"), std::string::npos) << st.message();

  Tensor k = random_f32({1, kKvHeads, kDim}, 1);
  Tensor v = random_f32({1, kKvHeads, kVDim}, 2);
  st = backend.write_kv_cache(k, v, from_i64({kBlocks * kBlockSize}, {1}), s.k_cache, s.v_cache);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("slot 96"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace locus

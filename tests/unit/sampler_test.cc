// CPU reference sampler: processors match vLLM's formulas, seeded sampling is reproducible and
// independent of batch composition, draws follow the distribution, logprobs are right.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "core/counter_rng.h"

namespace locus {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> random_logits(uint64_t seed, int vocab) {
  std::vector<float> v(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i)
    v[static_cast<size_t>(i)] = 6.0f * (counter_uniform(seed, static_cast<uint64_t>(i)) - 0.5f);
  return v;
}

SamplingRow row_for(const SamplingParams& p, uint64_t stream = 1,
                    std::span<const int32_t> prompt = {}, std::span<const int32_t> output = {}) {
  SamplingRow r;
  r.params = &p;
  r.prompt_token_ids = prompt;
  r.output_token_ids = output;
  r.rng_stream = stream;
  return r;
}

TEST(LogitsProcessors, PenaltiesFollowVllm) {
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  const std::vector<int32_t> prompt = {0, 1};
  const std::vector<int32_t> output = {2, 2, 1};
  PenaltyScratch scratch;
  apply_penalties(logits, prompt, output, /*repetition=*/2.0f, /*frequency=*/0.5f,
                  /*presence=*/0.25f, scratch);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);                  // prompt only: 2 / 2
  EXPECT_FLOAT_EQ(logits[1], -4.0f - 0.5f - 0.25f);  // prompt+output: -2 * 2, count 1
  EXPECT_FLOAT_EQ(logits[2], 0.5f - 1.0f - 0.25f);   // output twice: 1 / 2 - 0.5*2 - 0.25
  EXPECT_FLOAT_EQ(logits[3], 0.5f);                  // unseen
  EXPECT_FLOAT_EQ(logits[4], 3.0f);
  // The scratch is clean for the next row.
  std::vector<float> again = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  apply_penalties(again, {}, std::vector<int32_t>{4}, 1.0f, 1.0f, 0.0f, scratch);
  EXPECT_EQ(again, (std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f, 0.0f}));
}

TEST(LogitsProcessors, TopKTopPMinPKeepTheRightSets) {
  const std::vector<float> base = {std::log(0.5f), std::log(0.25f), std::log(0.125f),
                                   std::log(0.0625f), std::log(0.0625f)};
  std::vector<float> fs;
  std::vector<int32_t> is;
  auto kept = [](const std::vector<float>& v) {
    std::vector<int> k;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != kNegInf) k.push_back(static_cast<int>(i));
    }
    return k;
  };
  auto v = base;
  apply_top_k(v, 2, fs);
  EXPECT_EQ(kept(v), (std::vector<int>{0, 1}));
  v = base;
  apply_top_p(v, 0.7f, is);  // 0.5 < 0.7 <= 0.75
  EXPECT_EQ(kept(v), (std::vector<int>{0, 1}));
  v = base;
  apply_top_p(v, 0.45f, is);
  EXPECT_EQ(kept(v), (std::vector<int>{0}));
  v = base;
  apply_top_p(v, 0.76f, is);
  EXPECT_EQ(kept(v), (std::vector<int>{0, 1, 2}));
  v = base;
  apply_top_p(v, 1e-6f, is);  // always keeps the most likely token
  EXPECT_EQ(kept(v), (std::vector<int>{0}));
  v = base;
  apply_min_p(v, 0.2f);  // p >= 0.1
  EXPECT_EQ(kept(v), (std::vector<int>{0, 1, 2}));
}

// Naive references for the fast paths: full sorts of the whole vocabulary.
std::vector<int32_t> order_desc(const std::vector<float>& v) {
  std::vector<int32_t> ids(v.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const float la = v[static_cast<size_t>(a)];
    const float lb = v[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  });
  return ids;
}

std::vector<float> quantized_logits(uint64_t seed, int vocab, float levels) {
  // Few distinct values, so ties are everywhere.
  auto v = random_logits(seed, vocab);
  for (float& x : v)
    x = std::round(x * levels) / levels;
  return v;
}

TEST(LogitsProcessors, FastPathsMatchFullSortsAtLargeVocab) {
  constexpr int kBig = 50000;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const auto v = quantized_logits(seed, kBig, seed == 1 ? 2.0f : 1000.0f);
    const auto order = order_desc(v);
    for (int k : {1, 7, 50, 3000}) {
      EXPECT_EQ(kth_largest(v, k), v[static_cast<size_t>(order[static_cast<size_t>(k - 1)])]);
    }
    // top_p: both the 1024-candidate path (small p) and the fallback (p close to 1 on flat
    // logits) against a cumulative walk over the full order.
    for (float p : {0.05f, 0.5f, 0.999f}) {
      auto got = v;
      std::vector<int32_t> scratch;
      apply_top_p(got, p, scratch);
      double max_logit = v[static_cast<size_t>(order[0])];
      double total = 0.0;
      for (float x : v)
        total += std::exp(static_cast<double>(x) - max_logit);
      double mass = 0.0;
      size_t keep = 0;
      while (keep < order.size()) {
        mass += std::exp(static_cast<double>(v[static_cast<size_t>(order[keep])]) - max_logit);
        ++keep;
        if (mass >= p * total) break;
      }
      size_t kept = 0;
      for (float x : got)
        kept += x != kNegInf ? 1 : 0;
      EXPECT_NEAR(static_cast<double>(kept), static_cast<double>(keep), 1.0) << "p " << p;
      for (size_t j = 0; j + 1 < std::min(keep, kept); ++j) {
        EXPECT_NE(got[static_cast<size_t>(order[j])], kNegInf) << "p " << p << " rank " << j;
      }
    }
    // Top logprobs through the heap equal the head of the full order, ties by lower id.
    const Logprobs lp = compute_logprobs(v, order[100], 20);
    ASSERT_EQ(lp.top.size(), 20u);
    for (size_t i = 0; i < 20; ++i)
      EXPECT_EQ(lp.top[i].token_id, order[i]);
    int rank = 1;
    for (float x : v)
      rank += x > v[static_cast<size_t>(order[100])] ? 1 : 0;
    EXPECT_EQ(lp.token.rank, rank);
    EXPECT_EQ(argmax(v), order[0]);
  }
}

TEST(Sampler, GreedyIsArgmaxAfterBiasAndPenalties) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0.0f;
  std::vector<float> logits = {0.0f, 3.0f, 2.0f, 1.0f};
  EXPECT_EQ(sampler.sample_row(logits, row_for(p)).token_id, 1);
  p.logit_bias = {{3, 5.0f}};
  EXPECT_EQ(sampler.sample_row(logits, row_for(p)).token_id, 3);
  p.logit_bias = {{3, -1000.0f}, {0, 1000.0f}};  // clamped to +-100
  EXPECT_EQ(sampler.sample_row(logits, row_for(p)).token_id, 0);
  p.logit_bias.clear();
  p.presence_penalty = 2.0f;
  const std::vector<int32_t> out = {1};
  EXPECT_EQ(sampler.sample_row(logits, row_for(p, 1, {}, out)).token_id, 2);
}

TEST(Sampler, MinTokensMasksEosAndStopIdsUntilReached) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {2};
  std::vector<float> logits = {0.0f, 5.0f, 4.0f, 1.0f};  // EOS (1) then stop id (2) lead
  SamplingRow r = row_for(p);
  r.eos_token_id = 1;
  EXPECT_EQ(sampler.sample_row(logits, r).token_id, 3);
  const std::vector<int32_t> one = {3};
  r.output_token_ids = one;
  EXPECT_EQ(sampler.sample_row(logits, r).token_id, 3);
  const std::vector<int32_t> two = {3, 3};
  r.output_token_ids = two;
  EXPECT_EQ(sampler.sample_row(logits, r).token_id, 1);
  p.ignore_eos = true;  // EOS is no stop then, so it is not masked either
  r.output_token_ids = one;
  EXPECT_EQ(sampler.sample_row(logits, r).token_id, 1);
}

TEST(Sampler, SeededSamplingDoesNotDependOnBatchComposition) {
  constexpr int kVocab = 97;
  SamplingParams seeded;
  seeded.temperature = 0.9f;
  seeded.top_p = 0.95f;
  seeded.top_k = 40;
  seeded.seed = 1234;
  SamplingParams other;
  other.temperature = 1.3f;
  const auto target = random_logits(7, kVocab);
  const uint64_t stream = request_rng_stream(seeded.seed, 0, 55);

  Sampler alone;
  std::vector<int32_t> history;
  std::vector<int32_t> alone_tokens;
  for (int i = 0; i < 20; ++i) {
    SamplingRow r = row_for(seeded, stream, {}, history);
    auto res = alone.sample(target, kVocab, std::span<const SamplingRow>(&r, 1));
    ASSERT_TRUE(res.has_value());
    alone_tokens.push_back((*res)[0].token_id);
    history.push_back((*res)[0].token_id);
  }
  // The same request in position 3 of a batch of 6 with other random requests around it.
  Sampler batched;
  history.clear();
  for (int i = 0; i < 20; ++i) {
    std::vector<float> logits;
    std::vector<SamplingRow> rows;
    for (int b = 0; b < 6; ++b) {
      const auto l =
          b == 3 ? target : random_logits(100 + static_cast<uint64_t>(b * 31 + i), kVocab);
      logits.insert(logits.end(), l.begin(), l.end());
      rows.push_back(
          b == 3 ? row_for(seeded, stream, {}, history)
                 : row_for(other, request_rng_stream(std::nullopt, 9, static_cast<uint64_t>(b))));
    }
    auto res = batched.sample(logits, kVocab, rows);
    ASSERT_TRUE(res.has_value());
    EXPECT_EQ((*res)[3].token_id, alone_tokens[static_cast<size_t>(i)]) << "draw " << i;
    history.push_back((*res)[3].token_id);
  }
  // A different seed gives a different sequence (with overwhelming probability).
  SamplingParams reseeded = seeded;
  reseeded.seed = 4321;
  Sampler third;
  history.clear();
  int same = 0;
  for (int i = 0; i < 20; ++i) {
    SamplingRow r = row_for(reseeded, request_rng_stream(reseeded.seed, 0, 55), {}, history);
    const int32_t t = third.sample_row(target, r).token_id;
    same += t == alone_tokens[static_cast<size_t>(i)] ? 1 : 0;
    history.push_back(t);
  }
  EXPECT_LT(same, 20);
}

TEST(Sampler, DrawsFollowTheDistribution) {
  // Four tokens with p = 0.1, 0.2, 0.3, 0.4; 20000 draws (one per output index).
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f),
                                     std::log(0.4f)};
  std::vector<int> counts(4, 0);
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    const float u =
        counter_uniform(request_rng_stream(std::nullopt, 3, 3), static_cast<uint64_t>(i));
    ++counts[static_cast<size_t>(sample_from_logits(logits, u))];
  }
  for (int t = 0; t < 4; ++t) {
    const double expected = 0.1 * (t + 1) * kDraws;
    EXPECT_NEAR(counts[static_cast<size_t>(t)], expected, 5.0 * std::sqrt(expected))
        << "token " << t;
  }
}

TEST(Sampler, TopKOneIsGreedyEvenWithHighTemperature) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  const auto logits = random_logits(3, 50);
  const int32_t best = argmax(logits);
  for (uint64_t s = 0; s < 20; ++s)
    EXPECT_EQ(sampler.sample_row(logits, row_for(p, s)).token_id, best);
}

TEST(Sampler, LogprobsComeFromRawLogitsWithRanks) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 2;
  p.logit_bias = {{0, 10.0f}};  // changes the choice, not the reported logprobs
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  SampleResult r = sampler.sample_row(logits, row_for(p));
  ASSERT_EQ(r.token_id, 0);
  ASSERT_TRUE(r.logprobs.has_value());
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(r.logprobs->token.logprob, 1.0 - z, 1e-6);
  EXPECT_EQ(r.logprobs->token.rank, 4);
  ASSERT_EQ(r.logprobs->top.size(), 2u);
  EXPECT_EQ(r.logprobs->top[0].token_id, 1);  // tie broken by lower id
  EXPECT_EQ(r.logprobs->top[1].token_id, 3);
  EXPECT_EQ(r.logprobs->top[0].rank, 1);
  EXPECT_EQ(r.logprobs->top[1].rank, 1);
  EXPECT_NEAR(r.logprobs->top[0].logprob, 3.0 - z, 1e-6);
}

TEST(Sampler, RejectsMisshapenInput) {
  Sampler sampler;
  SamplingParams p;
  std::vector<float> logits(10);
  SamplingRow r = row_for(p);
  EXPECT_FALSE(sampler.sample(logits, 4, std::span<const SamplingRow>(&r, 1)).has_value());
  EXPECT_FALSE(sampler.sample(logits, 0, {}).has_value());
}

}  // namespace
}  // namespace locus

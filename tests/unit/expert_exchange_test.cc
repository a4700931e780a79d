// The MoE exchanges between data-parallel ranks that share experts (--all2all-backend): every
// rank's tokens reach the ranks of their experts and each token gets back the sum of its experts'
// weighted outputs, with uneven token counts, ranks that receive nothing and both placements.
// The "experts" here scale a row by (expert id + 1), so the expected sum is known exactly.
#include "model/moe/expert_exchange.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "dist/fake_communicator.h"

namespace locus {
namespace {

constexpr int64_t kHidden = 3;
constexpr int64_t kTopK = 2;
constexpr int64_t kExperts = 8;

struct Routing {
  std::function<int64_t(int rank)> tokens;
  // Expert of slot j of token t on rank r.
  std::function<int32_t(int r, int64_t t, int64_t j)> expert;
};

float x_value(int r, int64_t t, int64_t c) {
  return static_cast<float>(100 * r + 10 * t + c) * 0.01f + 0.5f;
}
float weight(int64_t t, int64_t j) {
  return 0.25f + 0.5f * static_cast<float>((t + j) % 2);
}

// This rank's "experts" on the dispatched rows: sum over the local experts of w * (e + 1) * x.
Tensor fake_experts(const ModelParallel& parallel, const ExpertDispatch& d) {
  const int64_t rows = d.x.size(0);
  Tensor out = Tensor::zeros({rows, kHidden}, DType::kF32).value();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < kTopK; ++j) {
      const int32_t e = d.topk_ids.data<int32_t>()[i * kTopK + j];
      if (!parallel.owns_expert(e, kExperts)) continue;
      const float w = d.topk_weights.data<float>()[i * kTopK + j];
      for (int64_t c = 0; c < kHidden; ++c)
        out.data<float>()[i * kHidden + c] +=
            w * static_cast<float>(e + 1) * d.x.data<float>()[i * kHidden + c];
    }
  }
  return out;
}

// Runs prepare -> fake experts -> finalize on `ranks` threads; returns each rank's errors.
// `max_tokens`: what prepare is told about the step's longest rank (0: it asks the ranks).
void check_exchange(int ranks, All2AllBackend backend, ExpertPlacement placement,
                    const Routing& routing, std::vector<int64_t>* received = nullptr,
                    int64_t max_tokens = 0) {
  auto group = FakeGroup::create(ranks, std::chrono::seconds(30));
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  if (received != nullptr) received->assign(static_cast<size_t>(ranks), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::string& error = errors[static_cast<size_t>(r)];
      auto comm = group->communicator(r);
      CpuBackend ops;
      ModelParallel parallel;
      parallel.expert_parallel = true;
      parallel.placement = placement;
      parallel.all2all = backend;
      parallel.dp = comm.get();
      auto exchange = make_expert_exchange(parallel, kExperts);
      const int64_t tokens = routing.tokens(r);
      Tensor x = Tensor::empty({tokens, kHidden}, DType::kF32).value();
      Tensor ids = Tensor::empty({tokens, kTopK}, DType::kI32).value();
      Tensor w = Tensor::empty({tokens, kTopK}, DType::kF32).value();
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t c = 0; c < kHidden; ++c)
          x.data<float>()[t * kHidden + c] = x_value(r, t, c);
        for (int64_t j = 0; j < kTopK; ++j) {
          ids.data<int32_t>()[t * kTopK + j] = routing.expert(r, t, j);
          w.data<float>()[t * kTopK + j] = weight(t, j);
        }
      }
      auto d = exchange->prepare(ops, x, ids, w, max_tokens);
      if (!d) {
        error = d.status().to_string();
        return;
      }
      if (received != nullptr) (*received)[static_cast<size_t>(r)] = d->x.size(0);
      auto out = exchange->finalize(ops, *d, fake_experts(parallel, *d));
      if (!out) {
        error = out.status().to_string();
        return;
      }
      if (out->size(0) != tokens) {
        error = "got " + out->to_string();
        return;
      }
      for (int64_t t = 0; t < tokens; ++t) {
        float scale = 0.0f;
        for (int64_t j = 0; j < kTopK; ++j)
          scale += weight(t, j) * static_cast<float>(routing.expert(r, t, j) + 1);
        for (int64_t c = 0; c < kHidden; ++c) {
          const float want = scale * x_value(r, t, c);
          const float got = out->data<float>()[t * kHidden + c];
          if (std::abs(got - want) > 1e-5f * std::abs(want)) {
            error = "rank " + std::to_string(r) + " token " + std::to_string(t) + " column " +
                    std::to_string(c) + ": got " + std::to_string(got) + ", want " +
                    std::to_string(want);
            return;
          }
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

class ExpertExchangeTest
    : public ::testing::TestWithParam<std::tuple<All2AllBackend, ExpertPlacement, int>> {};

TEST_P(ExpertExchangeTest, EveryTokenGetsItsExpertsSum) {
  const auto [backend, placement, ranks] = GetParam();
  Routing routing;
  routing.tokens = [](int r) { return static_cast<int64_t>(1 + 2 * r); };
  routing.expert = [](int r, int64_t t, int64_t j) {
    return static_cast<int32_t>((3 * t + 5 * r + j * (1 + t % 3)) % kExperts);
  };
  check_exchange(ranks, backend, placement, routing);
  // Told the step's most tokens (the engine agrees on it once per step), or more than that.
  const int64_t longest = routing.tokens(ranks - 1);
  check_exchange(ranks, backend, placement, routing, nullptr, longest);
  std::vector<int64_t> received;
  check_exchange(ranks, backend, placement, routing, &received, longest + 2);
  if (backend != All2AllBackend::kNaive) {  // blocks of the step's most tokens from every rank
    EXPECT_EQ(received[0], ranks * (longest + 2));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Backends, ExpertExchangeTest,
    ::testing::Combine(::testing::Values(All2AllBackend::kAllGatherReduceScatter,
                                         All2AllBackend::kNaive, All2AllBackend::kLowLatency),
                       ::testing::Values(ExpertPlacement::kLinear, ExpertPlacement::kRoundRobin),
                       ::testing::Values(2, 3, 4)),
    [](const auto& param_info) {
      return std::string(all2all_backend_name(std::get<0>(param_info.param))) +
             (std::get<1>(param_info.param) == ExpertPlacement::kLinear ? "_linear"
                                                                        : "_round_robin") +
             "_" + std::to_string(std::get<2>(param_info.param));
    });

TEST(ExpertExchange, NaiveSendsOnlyToTheExpertsRanks) {
  // Linear placement over 2 ranks: experts 0-3 on rank 0. Every token picks experts 1 and 2, so
  // rank 1 receives nothing and rank 0 receives every token once.
  Routing routing;
  routing.tokens = [](int r) { return static_cast<int64_t>(r == 0 ? 2 : 5); };
  routing.expert = [](int, int64_t, int64_t j) { return static_cast<int32_t>(1 + j); };
  std::vector<int64_t> received;
  check_exchange(2, All2AllBackend::kNaive, ExpertPlacement::kLinear, routing, &received);
  EXPECT_EQ(received, (std::vector<int64_t>{7, 0}));
  // The baseline sends every (padded) token everywhere.
  check_exchange(2, All2AllBackend::kAllGatherReduceScatter, ExpertPlacement::kLinear, routing,
                 &received);
  EXPECT_EQ(received, (std::vector<int64_t>{10, 10}));
  // low_latency sends what naive sends, in blocks of the step's most tokens (5): rank 1's
  // blocks arrive empty, its experts see only padding (routed nowhere), and it sends zeros back.
  check_exchange(2, All2AllBackend::kLowLatency, ExpertPlacement::kLinear, routing, &received);
  EXPECT_EQ(received, (std::vector<int64_t>{10, 10}));
}

// A rank with no tokens in the step still takes part in every exchange (it sends empty blocks
// and receives the others' tokens for its experts).
TEST(ExpertExchange, ARankWithNoTokensStillServesItsExperts) {
  Routing routing;
  routing.tokens = [](int r) { return static_cast<int64_t>(r == 1 ? 0 : 3); };
  routing.expert = [](int r, int64_t t, int64_t j) {
    return static_cast<int32_t>((2 * t + r + 3 * j) % kExperts);
  };
  for (All2AllBackend b : {All2AllBackend::kAllGatherReduceScatter, All2AllBackend::kNaive,
                           All2AllBackend::kLowLatency}) {
    SCOPED_TRACE(all2all_backend_name(b));
    check_exchange(3, b, ExpertPlacement::kRoundRobin, routing);
    check_exchange(3, b, ExpertPlacement::kLinear, routing, nullptr, 3);
  }
}

}  // namespace
}  // namespace locus

// Tensor, expert and data parallelism on the fixtures: 2 or 4 ranks, one thread each over the
// in-process communicator, must give the logits of one rank (relative L2 < 1e-5: only the
// order of f32 sums differs) and the same greedy tokens; every rank returns the same logits
// (the all-reduce and gather are deterministic). Splits a model cannot take fail with a message
// that names the dimension.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "dist/fake_communicator.h"
#include "model/weight_source.h"
#include "unit/forward_test_util.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

struct Split {
  int ranks = 1;
  bool expert_parallel = false;
  ExpertPlacement placement = ExpertPlacement::kLinear;
  std::string name() const {
    if (!expert_parallel) return "tp" + std::to_string(ranks);
    return "ep" + std::to_string(ranks) +
           (placement == ExpertPlacement::kRoundRobin ? "_round_robin" : "");
  }
};

struct Case {
  std::string fixture;
  Split split;
};

std::vector<Case> cases() {
  const std::vector<std::string> fixtures = {"qwen3-moe",  "mixtral",        "glm4-moe",
                                             "minimax-m2", "deepseek-v3",    "deepseek-v2",
                                             "kimi-k2",    "deepseek-v3-fp8"};
  const std::vector<Split> splits = {
      {2, false}, {4, false}, {2, true}, {4, true}, {4, true, ExpertPlacement::kRoundRobin}};
  std::vector<Case> out;
  for (const auto& f : fixtures)
    for (const auto& s : splits)
      out.push_back({f, s});
  return out;
}

// What one run of the fixture's prompts produced.
struct Outputs {
  std::vector<std::vector<float>> batched;  // all prompts prefilled in one batch
  std::vector<std::vector<float>> chunked;  // in chunks of 5
  testing::Prompts greedy;
  std::vector<std::vector<float>> greedy_logits;
};

Outputs run(Model& model, const testing::Goldens& g) {
  size_t longest = 0;
  for (size_t i = 0; i < g.prompts.size(); ++i)
    longest = std::max(longest, g.prompts[i].size() + g.greedy[i].size());
  testing::Driver driver{model, 16, static_cast<int64_t>(longest)};
  Outputs o;
  o.batched = driver.prefill_logits(g.prompts, 0);
  o.chunked = driver.prefill_logits(g.prompts, 5);
  o.greedy = driver.greedy(g.prompts, static_cast<int64_t>(g.greedy[0].size()), &o.greedy_logits);
  return o;
}

double max_rel_l2(const std::vector<std::vector<float>>& got,
                  const std::vector<std::vector<float>>& want) {
  double worst = 0.0;
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    EXPECT_EQ(got[i].size(), want[i].size()) << "prompt " << i;
    if (got[i].size() == want[i].size()) worst = std::max(worst, testing::rel_l2(got[i], want[i]));
  }
  return worst;
}

class ParallelForward : public ::testing::TestWithParam<Case> {};

TEST_P(ParallelForward, MatchesOneRank) {
  const Case c = GetParam();
  auto opened = testing::open_fixture(c.fixture);
  ASSERT_TRUE(opened.has_value());
  const ModelConfig& config = opened->config;
  const WeightSource& weights = *opened->weights;
  const testing::Goldens& g = opened->goldens;

  // A split the model's shapes do not allow must say so, before any weight is read.
  auto group = FakeGroup::create(c.split.ranks, std::chrono::seconds(60));
  {
    auto comm = group->communicator(0);
    ModelParallel parallel{comm.get(), c.split.expert_parallel, c.split.placement};
    const Status allowed = parallel.check(config);
    if (!allowed.is_ok()) {
      EXPECT_NE(allowed.to_string().find("does not split evenly"), std::string::npos)
          << allowed.to_string();
      CpuBackend backend;
      auto refused = Model::load(config, weights, backend, parallel);
      ASSERT_FALSE(refused.has_value());
      std::printf("[parallel] %-16s %-16s refused: %s\n", c.fixture.c_str(), c.split.name().c_str(),
                  allowed.to_string().c_str());
      return;
    }
  }

  CpuBackend one_backend;
  auto one = Model::load(config, weights, one_backend);
  ASSERT_TRUE(one.has_value()) << one.status().to_string();
  const Outputs want = run(**one, g);

  std::vector<Outputs> got(static_cast<size_t>(c.split.ranks));
  std::vector<std::string> load_errors(static_cast<size_t>(c.split.ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < c.split.ranks; ++r) {
    threads.emplace_back([&, r] {
      auto comm = group->communicator(r);
      CpuBackend backend;
      ModelParallel parallel{comm.get(), c.split.expert_parallel, c.split.placement};
      auto model = Model::load(config, weights, backend, parallel);
      if (!model) {
        load_errors[static_cast<size_t>(r)] = model.status().to_string();
        group->abort("rank " + std::to_string(r) + " failed to load");
        return;
      }
      got[static_cast<size_t>(r)] = run(**model, g);
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < c.split.ranks; ++r)
    ASSERT_EQ(load_errors[static_cast<size_t>(r)], "") << "rank " << r;

  const Outputs& rank0 = got[0];
  const double batched = max_rel_l2(rank0.batched, want.batched);
  const double chunked = max_rel_l2(rank0.chunked, want.chunked);
  const double greedy_logits = max_rel_l2(rank0.greedy_logits, want.greedy_logits);
  EXPECT_LT(batched, 1e-5);
  EXPECT_LT(chunked, 1e-5);
  EXPECT_LT(greedy_logits, 1e-5);
  EXPECT_EQ(rank0.greedy, want.greedy);
  EXPECT_EQ(rank0.greedy, g.greedy) << "the transformers greedy continuation";
  for (int r = 1; r < c.split.ranks; ++r) {
    const Outputs& o = got[static_cast<size_t>(r)];
    EXPECT_EQ(o.batched, rank0.batched) << "rank " << r;
    EXPECT_EQ(o.chunked, rank0.chunked) << "rank " << r;
    EXPECT_EQ(o.greedy, rank0.greedy) << "rank " << r;
  }
  std::printf(
      "[parallel] %-16s %-16s logits rel L2 vs one rank: batched %.2e, chunked %.2e, decode "
      "%.2e; greedy %s\n",
      c.fixture.c_str(), c.split.name().c_str(), batched, chunked, greedy_logits,
      rank0.greedy == want.greedy ? "identical" : "DIFFER");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ParallelForward, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           std::string n =
                               param_info.param.fixture + "_" + param_info.param.split.name();
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// DP attention + EP MoE: each data-parallel rank prefills and decodes its own prompts (prompt i
// on rank i % ranks, so the ranks' token counts differ and the MoE gather pads), and the experts
// are spread over the ranks. Each rank's logits must be one rank's for the same prompts. The
// ranks step together: one whole-prompt prefill, then one decode step per token. Both exchanges
// (--all2all-backend): every token to every rank, or each token only to its experts' ranks
// (planned on the host, or in fixed blocks planned by the backend).
// With `tp` > 1 each replica is a tensor-parallel group and the experts spread over all
// ranks x tp ranks; every rank of a replica must return the replica's logits.
struct DpCase {
  std::string fixture;
  int ranks = 2;
  All2AllBackend all2all = All2AllBackend::kAllGatherReduceScatter;
  ExpertPlacement placement = ExpertPlacement::kLinear;
  int tp = 1;
};

class DataParallelForward : public ::testing::TestWithParam<DpCase> {};

TEST_P(DataParallelForward, EachRankMatchesOneRankOnItsPrompts) {
  const std::string fixture = GetParam().fixture;
  const int ranks = GetParam().ranks;
  auto opened = testing::open_fixture(fixture);
  ASSERT_TRUE(opened.has_value());
  const ModelConfig& config = opened->config;
  const WeightSource& weights = *opened->weights;
  const testing::Goldens& g = opened->goldens;
  ASSERT_GE(g.prompts.size(), static_cast<size_t>(ranks));

  CpuBackend one_backend;
  auto one = Model::load(config, weights, one_backend);
  ASSERT_TRUE(one.has_value()) << one.status().to_string();
  const Outputs want = run(**one, g);

  const int tp = GetParam().tp;
  // columns[t]: rank t of every replica (the expert exchange); replicas[d]: replica d's ranks.
  std::vector<std::shared_ptr<FakeGroup>> columns;
  for (int t = 0; t < tp; ++t)
    columns.push_back(FakeGroup::create(ranks, std::chrono::seconds(60)));
  std::vector<std::shared_ptr<FakeGroup>> replicas;
  for (int r = 0; r < ranks; ++r)
    replicas.push_back(FakeGroup::create(tp, std::chrono::seconds(60)));
  auto abort_all = [&](const std::string& why) {
    for (auto& c : columns)
      c->abort(why);
    for (auto& c : replicas)
      c->abort(why);
  };
  std::vector<std::vector<size_t>> mine(static_cast<size_t>(ranks));
  for (size_t i = 0; i < g.prompts.size(); ++i)
    mine[i % static_cast<size_t>(ranks)].push_back(i);
  // Replica r's rank t at r * tp + t.
  const auto world = static_cast<size_t>(ranks * tp);
  std::vector<Outputs> got(world);
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int w = 0; w < ranks * tp; ++w) {
    threads.emplace_back([&, w] {
      const int r = w / tp;
      const int t = w % tp;
      auto comm = columns[static_cast<size_t>(t)]->communicator(r);
      auto tp_comm = replicas[static_cast<size_t>(r)]->communicator(t);
      CpuBackend backend;
      ModelParallel parallel;
      if (tp > 1) parallel.tp = tp_comm.get();
      parallel.expert_parallel = true;
      parallel.dp = comm.get();
      parallel.all2all = GetParam().all2all;
      parallel.placement = GetParam().placement;
      auto model = Model::load(config, weights, backend, parallel);
      if (!model) {
        errors[static_cast<size_t>(w)] = model.status().to_string();
        abort_all("rank " + std::to_string(w) + " failed to load");
        return;
      }
      testing::Goldens own;
      for (size_t i : mine[static_cast<size_t>(r)]) {
        own.prompts.push_back(g.prompts[i]);
        own.greedy.push_back(g.greedy[i]);
      }
      size_t longest = 0;
      for (size_t i = 0; i < g.prompts.size(); ++i)
        longest = std::max(longest, g.prompts[i].size() + g.greedy[i].size());
      testing::Driver driver{**model, 16, static_cast<int64_t>(longest)};
      Outputs& o = got[static_cast<size_t>(w)];
      o.batched = driver.prefill_logits(own.prompts, 0);
      o.greedy =
          driver.greedy(own.prompts, static_cast<int64_t>(g.greedy[0].size()), &o.greedy_logits);
    });
  }
  for (auto& t : threads)
    t.join();
  double worst = 0.0;
  for (int w = 0; w < ranks * tp; ++w) {
    const int r = w / tp;
    ASSERT_EQ(errors[static_cast<size_t>(w)], "") << "rank " << w;
    const Outputs& o = got[static_cast<size_t>(w)];
    const auto& idx = mine[static_cast<size_t>(r)];
    ASSERT_EQ(o.batched.size(), idx.size()) << "rank " << r;
    ASSERT_EQ(o.greedy.size(), idx.size()) << "rank " << r;
    for (size_t j = 0; j < idx.size(); ++j) {
      const size_t i = idx[j];
      const double prefill = testing::rel_l2(o.batched[j], want.batched[i]);
      const double decode = testing::rel_l2(o.greedy_logits[j], want.greedy_logits[i]);
      EXPECT_LT(prefill, 1e-5) << "rank " << r << " prompt " << i;
      EXPECT_LT(decode, 1e-5) << "rank " << r << " prompt " << i;
      worst = std::max({worst, prefill, decode});
      EXPECT_EQ(o.greedy[j], g.greedy[i]) << "rank " << r << " prompt " << i;
    }
  }
  std::printf("[parallel] %-16s dp%d tp%d +ep %-23s logits rel L2 vs one rank: %.2e\n",
              fixture.c_str(), ranks, tp, all2all_backend_name(GetParam().all2all), worst);
}

std::vector<DpCase> dp_cases() {
  std::vector<DpCase> out;
  const std::vector<std::pair<std::string, int>> fixtures = {
      {"qwen3-moe", 2},       {"qwen3-moe", 4},  {"deepseek-v3", 2},
      {"deepseek-v3-fp8", 4}, {"minimax-m2", 2}, {"kimi-k2", 4}};
  for (const auto& [fixture, ranks] : fixtures) {
    out.push_back({fixture, ranks, All2AllBackend::kAllGatherReduceScatter});
    out.push_back({fixture, ranks, All2AllBackend::kNaive});
    out.push_back({fixture, ranks, All2AllBackend::kLowLatency});
  }
  out.push_back({"qwen3-moe", 3, All2AllBackend::kNaive, ExpertPlacement::kRoundRobin});
  out.push_back({"qwen3-moe", 3, All2AllBackend::kLowLatency, ExpertPlacement::kRoundRobin});
  // Tensor parallelism inside the replicas: each column exchanges only its own ranks' experts.
  for (All2AllBackend a2a : {All2AllBackend::kAllGatherReduceScatter, All2AllBackend::kNaive,
                             All2AllBackend::kLowLatency}) {
    out.push_back({"qwen3-moe", 2, a2a, ExpertPlacement::kLinear, 2});
    out.push_back({"deepseek-v3", 2, a2a, ExpertPlacement::kLinear, 2});
  }
  out.push_back({"minimax-m2", 2, All2AllBackend::kNaive, ExpertPlacement::kRoundRobin, 2});
  out.push_back({"kimi-k2", 2, All2AllBackend::kLowLatency, ExpertPlacement::kRoundRobin, 2});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DataParallelForward, ::testing::ValuesIn(dp_cases()),
                         [](const ::testing::TestParamInfo<DpCase>& param_info) {
                           const DpCase& c = param_info.param;
                           std::string n =
                               c.fixture + "_dp" + std::to_string(c.ranks) +
                               (c.tp > 1 ? "_tp" + std::to_string(c.tp) : "") +
                               (c.all2all == All2AllBackend::kNaive        ? "_naive"
                                : c.all2all == All2AllBackend::kLowLatency ? "_low_latency"
                                                                           : "") +
                               (c.placement == ExpertPlacement::kRoundRobin ? "_round_robin" : "");
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Expert placement: every expert on exactly one rank, linear ranges in order, round robin by
// remainder, uneven counts spread one extra expert over the first ranks.
TEST(ModelParallel, ExpertPlacementCoversEveryExpertOnce) {
  for (ExpertPlacement placement : {ExpertPlacement::kLinear, ExpertPlacement::kRoundRobin}) {
    for (int ranks : {2, 3, 4}) {
      auto group = FakeGroup::create(ranks);
      std::vector<std::unique_ptr<Communicator>> comms;
      for (int r = 0; r < ranks; ++r)
        comms.push_back(group->communicator(r));
      const int64_t experts = 10;
      std::vector<int> owner(experts, -1);
      for (int r = 0; r < ranks; ++r) {
        ModelParallel p{comms[static_cast<size_t>(r)].get(), true, placement};
        for (int64_t e = 0; e < experts; ++e) {
          EXPECT_EQ(p.owns_expert(e, experts), p.expert_owner(e, experts) == r) << e;
          if (!p.owns_expert(e, experts)) continue;
          EXPECT_EQ(owner[static_cast<size_t>(e)], -1) << "expert " << e << " on two ranks";
          owner[static_cast<size_t>(e)] = r;
        }
      }
      for (int64_t e = 0; e < experts; ++e) {
        const int want = placement == ExpertPlacement::kRoundRobin ? static_cast<int>(e % ranks)
                                                                   : -2;  // checked below
        if (want >= 0) {
          EXPECT_EQ(owner[static_cast<size_t>(e)], want) << e;
        }
        EXPECT_GE(owner[static_cast<size_t>(e)], 0) << "expert " << e << " on no rank";
      }
      if (placement == ExpertPlacement::kLinear) {
        EXPECT_TRUE(std::is_sorted(owner.begin(), owner.end()));
        // 10 experts over 4 ranks: 3, 3, 2, 2.
        if (ranks == 4) {
          EXPECT_EQ(owner, (std::vector<int>{0, 0, 0, 1, 1, 1, 2, 2, 3, 3}));
        }
      }
    }
  }
  // Data-parallel replicas of tensor-parallel ranks: replica d's rank t is expert rank
  // d * tp + t, and its column's exchange sends expert e to the replica that holds it within
  // the column, or nowhere when another column holds it.
  for (ExpertPlacement placement : {ExpertPlacement::kLinear, ExpertPlacement::kRoundRobin}) {
    constexpr int kDp = 2;
    constexpr int kTp = 2;
    const int64_t experts = 10;
    std::vector<std::shared_ptr<FakeGroup>> columns;
    std::vector<std::shared_ptr<FakeGroup>> replicas;
    for (int i = 0; i < 2; ++i) {
      columns.push_back(FakeGroup::create(kDp));
      replicas.push_back(FakeGroup::create(kTp));
    }
    std::vector<int> owner(experts, -1);
    for (int d = 0; d < kDp; ++d) {
      for (int t = 0; t < kTp; ++t) {
        auto dp = columns[static_cast<size_t>(t)]->communicator(d);
        auto tp = replicas[static_cast<size_t>(d)]->communicator(t);
        ModelParallel p{tp.get(), true, placement, dp.get()};
        EXPECT_EQ(p.expert_rank(), d * kTp + t);
        EXPECT_EQ(p.expert_size(), kDp * kTp);
        for (int64_t e = 0; e < experts; ++e) {
          const int in_column = p.exchange_owner(e, experts);
          const int holder = p.expert_owner(e, experts);
          EXPECT_EQ(in_column, holder % kTp == t ? holder / kTp : -1) << e;
          if (!p.owns_expert(e, experts)) continue;
          EXPECT_EQ(in_column, d) << e;
          EXPECT_EQ(owner[static_cast<size_t>(e)], -1) << "expert " << e << " on two ranks";
          owner[static_cast<size_t>(e)] = d * kTp + t;
        }
      }
    }
    for (int64_t e = 0; e < experts; ++e)
      EXPECT_GE(owner[static_cast<size_t>(e)], 0) << "expert " << e << " on no rank";
    if (placement == ExpertPlacement::kRoundRobin) {
      EXPECT_EQ(owner, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}));
    }
  }

  EXPECT_TRUE(parse_expert_placement("round_robin").has_value());
  EXPECT_FALSE(parse_expert_placement("random").has_value());
  EXPECT_EQ(parse_all2all_backend("auto").value(), All2AllBackend::kAllGatherReduceScatter);
  EXPECT_EQ(parse_all2all_backend("naive").value(), All2AllBackend::kNaive);
  EXPECT_EQ(parse_all2all_backend("low_latency").value(), All2AllBackend::kLowLatency);
  EXPECT_EQ(parse_all2all_backend("deepep").status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace locus

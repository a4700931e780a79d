// Several nodes on one machine: each "node" is a thread with its own NodeGroup links over
// loopback TCP, as separate hosts would be. The rendezvous refuses nodes that disagree, the
// links carry frames both ways, and a whole engine split over two nodes (tensor-parallel ranks
// on each, collectives over the TCP group) gives transformers' greedy tokens.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dist/node_group.h"  // Asio, included the way Boost 1.74 needs
#include "engine/batch_codec.h"
#include "engine/model_engine.h"
#include "engine/multi_node_runner.h"
#include "unit/engine_test_util.h"
#include "unit/forward_test_util.h"

namespace locus {
namespace {

using namespace std::chrono_literals;

// A port nothing listens on now, below Linux's ephemeral range (32768 and up) so that no
// outgoing connection of a concurrent test takes it before node 0 listens.
int free_port() {
  static std::mt19937 rng(std::random_device{}());
  boost::asio::io_context io;
  while (true) {
    const int port = 20000 + static_cast<int>(rng() % 12000);
    boost::asio::ip::tcp::acceptor a(io);
    boost::system::error_code ec;
    a.open(boost::asio::ip::tcp::v4(), ec);
    if (!ec) a.bind({boost::asio::ip::tcp::v4(), static_cast<unsigned short>(port)}, ec);
    if (!ec) return port;
  }
}

NodeGroupOptions node(int port, int rank, int nnodes, std::string fingerprint = "model A") {
  NodeGroupOptions o;
  o.master_port = port;
  o.node_rank = rank;
  o.nnodes = nnodes;
  o.fingerprint = std::move(fingerprint);
  o.timeout = 20s;
  return o;
}

ModelInputBatch sample_batch() {
  ModelInputBatch b;
  b.num_reqs = 2;
  b.block_size = 4;
  b.token_ids = {5, 6, 7, 8, 9};
  b.positions = {0, 1, 2, 7, 8};
  b.query_start_loc = {0, 3, 5};
  b.seq_lens = {3, 9};
  b.num_computed_tokens = {0, 7};
  b.max_num_blocks_per_req = 3;
  b.block_table = {4, kPadBlockId, kPadBlockId, 1, 2, 3};
  b.slot_mapping = {16, 17, 18, 11, 12};
  b.logits_indices = {2, 4};
  b.device_sampling = {{0.5f, 3, 0.9f, 0.1f, 0.25f}, {1.0f, 0, 1.0f, 0.0f, 0.75f}};
  b.dp_max_tokens = 11;
  return b;
}

TEST(BatchCodec, RoundTripsEveryField) {
  const ModelInputBatch b = sample_batch();
  auto back = decode_batch(encode_batch(b));
  ASSERT_TRUE(back.has_value()) << back.status().to_string();
  EXPECT_EQ(back->num_reqs, b.num_reqs);
  EXPECT_EQ(back->block_size, b.block_size);
  EXPECT_EQ(back->token_ids, b.token_ids);
  EXPECT_EQ(back->positions, b.positions);
  EXPECT_EQ(back->query_start_loc, b.query_start_loc);
  EXPECT_EQ(back->seq_lens, b.seq_lens);
  EXPECT_EQ(back->num_computed_tokens, b.num_computed_tokens);
  EXPECT_EQ(back->max_num_blocks_per_req, b.max_num_blocks_per_req);
  EXPECT_EQ(back->block_table, b.block_table);
  EXPECT_EQ(back->slot_mapping, b.slot_mapping);
  EXPECT_EQ(back->logits_indices, b.logits_indices);
  ASSERT_EQ(back->device_sampling.size(), 2u);
  EXPECT_EQ(back->device_sampling[0].top_k, 3);
  EXPECT_EQ(back->device_sampling[1].u, 0.75f);
  EXPECT_EQ(back->dp_max_tokens, 11);
}

TEST(BatchCodec, RefusesDamagedFrames) {
  const std::string bytes = encode_batch(sample_batch());
  // Every truncation fails (never reads past the end), and says where.
  for (size_t n = 0; n < bytes.size(); n += 7) {
    auto r = decode_batch(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(r.has_value()) << n;
    EXPECT_NE(r.status().message().find("step batch"), std::string::npos);
  }
  EXPECT_NE(decode_batch(bytes + "x").status().message().find("after the last field"),
            std::string::npos);
  std::string magic = bytes;
  magic[0] ^= 0x55;
  EXPECT_NE(decode_batch(magic).status().message().find("magic"), std::string::npos);
  ModelInputBatch bad = sample_batch();
  bad.positions.pop_back();
  EXPECT_NE(decode_batch(encode_batch(bad)).status().message().find("inconsistent"),
            std::string::npos);
}

// Runs node 0 here and nodes 1.. on threads; returns every node's group (or the error).
std::vector<Expected<std::unique_ptr<NodeGroup>>> join(std::vector<NodeGroupOptions> nodes) {
  std::vector<std::future<Expected<std::unique_ptr<NodeGroup>>>> workers;
  for (size_t k = 1; k < nodes.size(); ++k) {
    workers.push_back(
        std::async(std::launch::async, [o = nodes[k]] { return NodeGroup::create(o); }));
  }
  std::vector<Expected<std::unique_ptr<NodeGroup>>> out;
  out.push_back(NodeGroup::create(nodes[0]));
  for (auto& w : workers)
    out.push_back(w.get());
  return out;
}

TEST(NodeGroup, GathersAndCarriesFramesBothWays) {
  const int port = free_port();
  auto groups = join({node(port, 0, 3), node(port, 1, 3), node(port, 2, 3)});
  for (auto& g : groups)
    ASSERT_TRUE(g.has_value()) << g.status().to_string();
  EXPECT_EQ((*groups[0])->local_address(), "127.0.0.1");
  EXPECT_EQ((*groups[2])->local_address(), "127.0.0.1");

  // all_gather: node order, whatever order the workers joined in.
  std::vector<std::future<Expected<std::vector<std::string>>>> lists;
  for (int k = 1; k < 3; ++k) {
    lists.push_back(std::async(std::launch::async, [&, k] {
      return (*groups[static_cast<size_t>(k)])->all_gather("node" + std::to_string(k));
    }));
  }
  auto at0 = (*groups[0])->all_gather("node0");
  ASSERT_TRUE(at0.has_value()) << at0.status().to_string();
  const std::vector<std::string> want{"node0", "node1", "node2"};
  EXPECT_EQ(*at0, want);
  for (auto& l : lists) {
    auto got = l.get();
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    EXPECT_EQ(*got, want);
  }

  // A command out, a reply back from each worker (read on threads of their own).
  ASSERT_TRUE((*groups[0])->send_to_workers(std::string(100000, 'c')).is_ok());
  for (int k = 1; k < 3; ++k) {
    auto cmd = (*groups[static_cast<size_t>(k)])->read_command();
    ASSERT_TRUE(cmd.has_value());
    EXPECT_EQ(cmd->size(), 100000u);
    ASSERT_TRUE((*groups[static_cast<size_t>(k)])->reply("r" + std::to_string(k)).is_ok());
  }
  EXPECT_EQ(*(*groups[0])->read_reply(2), "r2");
  EXPECT_EQ(*(*groups[0])->read_reply(1), "r1");

  // An abort reaches every worker's handler while its command thread could be busy.
  std::promise<std::string> heard1;
  std::promise<std::string> heard2;
  (*groups[1])->on_abort([&](const std::string& r) { heard1.set_value(r); });
  (*groups[2])->on_abort([&](const std::string& r) { heard2.set_value(r); });
  (*groups[0])->abort_workers("rank 1 ran out of memory");
  EXPECT_NE(heard1.get_future().get().find("rank 1 ran out of memory"), std::string::npos);
  EXPECT_NE(heard2.get_future().get().find("rank 1 ran out of memory"), std::string::npos);
}

TEST(NodeGroup, RefusesNodesThatDisagree) {
  {
    const int port = free_port();
    auto groups = join({node(port, 0, 2, "model A"), node(port, 1, 2, "model B")});
    ASSERT_FALSE(groups[0].has_value());
    EXPECT_NE(groups[0].status().message().find("it runs [model B], this node [model A]"),
              std::string::npos)
        << groups[0].status().to_string();
    ASSERT_FALSE(groups[1].has_value());
    EXPECT_NE(groups[1].status().message().find("node 0 refused this node"), std::string::npos)
        << groups[1].status().to_string();
  }
  {
    const int port = free_port();
    auto groups = join({node(port, 0, 2), node(port, 1, 3)});
    ASSERT_FALSE(groups[0].has_value());
    EXPECT_NE(groups[0].status().message().find("--nnodes 3, this node 2"), std::string::npos)
        << groups[0].status().to_string();
  }
  {
    // The duplicate is refused; the worker it raced gives up waiting on node 0 soon after.
    const int port = free_port();
    std::vector<NodeGroupOptions> nodes{node(port, 0, 3), node(port, 1, 3), node(port, 1, 3)};
    for (NodeGroupOptions& n : nodes)
      n.timeout = 2s;
    auto groups = join(nodes);
    ASSERT_FALSE(groups[0].has_value());
    EXPECT_NE(groups[0].status().message().find("joined twice"), std::string::npos)
        << groups[0].status().to_string();
  }
  EXPECT_FALSE(NodeGroup::create(node(free_port(), 2, 2)).has_value());
  EXPECT_FALSE(NodeGroup::create(node(free_port(), 0, 1)).has_value());
}

TEST(NodeGroup, WaitingEndsWithAMessageThatNamesWhoIsMissing) {
  NodeGroupOptions leader = node(free_port(), 0, 3);
  leader.timeout = 300ms;
  auto alone = NodeGroup::create(leader);
  ASSERT_FALSE(alone.has_value());
  EXPECT_NE(alone.status().message().find("nodes 1, 2 have not joined"), std::string::npos)
      << alone.status().to_string();

  NodeGroupOptions worker = node(free_port(), 1, 2);
  worker.timeout = 300ms;
  auto orphan = NodeGroup::create(worker);
  ASSERT_FALSE(orphan.has_value());
  EXPECT_NE(orphan.status().to_string().find(std::to_string(worker.master_port)), std::string::npos)
      << orphan.status().to_string();
}

ModelEngineOptions engine_options(const std::string& fixture, int tp, int nnodes, int node_rank,
                                  int port) {
  ModelEngineOptions o = testing::cpu_engine_options(fixture);
  o.tensor_parallel_size = tp;
  o.nnodes = nnodes;
  o.node_rank = node_rank;
  o.master_port = port;
  o.node_join_timeout = 60s;
  return o;
}

struct Split {
  std::string fixture;
  int tp;
  int nnodes;
  bool ep;
};

class MultiNodeEngine : public ::testing::TestWithParam<Split> {};

TEST_P(MultiNodeEngine, GreedyMatchesTransformers) {
  const Split p = GetParam();
  const testing::Goldens g =
      testing::load_goldens(std::filesystem::path(LOCUS_TEST_DATA_DIR) / "models" / p.fixture);
  ASSERT_FALSE(g.prompts.empty());
  const int port = free_port();
  std::vector<std::future<Status>> workers;
  for (int k = 1; k < p.nnodes; ++k) {
    ModelEngineOptions o = engine_options(p.fixture, p.tp, p.nnodes, k, port);
    o.enable_expert_parallel = p.ep;
    workers.push_back(std::async(std::launch::async, [o] { return run_worker_node(o); }));
  }
  {
    ModelEngineOptions o = engine_options(p.fixture, p.tp, p.nnodes, 0, port);
    o.enable_expert_parallel = p.ep;
    auto me = open_model_engine(o);
    ASSERT_TRUE(me.has_value()) << me.status().to_string();
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    greedy.max_tokens = static_cast<int>(g.greedy[0].size());
    greedy.ignore_eos = true;
    auto results = me->engine->generate(g.prompts, greedy);
    ASSERT_TRUE(results.has_value()) << results.status().to_string();
    for (size_t i = 0; i < g.prompts.size(); ++i)
      EXPECT_EQ((*results)[i].completions[0].token_ids, g.greedy[i]) << "prompt " << i;
    EXPECT_GT(me->runner->eager_steps(), 0);
    me->engine->shutdown();
  }
  // Node 0's engine is gone: every worker was told to stop and did, cleanly.
  for (auto& w : workers) {
    const Status s = w.get();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MultiNodeEngine,
                         ::testing::Values(Split{"qwen3-moe", 2, 2, false},
                                           Split{"qwen3-moe", 4, 2, true},
                                           Split{"deepseek-v3", 4, 2, false}),
                         [](const ::testing::TestParamInfo<Split>& param_info) {
                           std::string s = param_info.param.fixture + "_tp" +
                                           std::to_string(param_info.param.tp) + "_nodes" +
                                           std::to_string(param_info.param.nnodes) +
                                           (param_info.param.ep ? "_ep" : "");
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// A worker whose flags split the model differently is refused before anything runs, and both
// sides say why; so is a --tensor-parallel-size that does not split over the nodes.
TEST(MultiNodeEngineErrors, MismatchedNodesAndUnevenSplits) {
  const int port = free_port();
  ModelEngineOptions w = engine_options("qwen3-moe", 2, 2, 1, port);
  w.enable_expert_parallel = true;
  auto worker = std::async(std::launch::async, [w] { return run_worker_node(w); });
  auto me = open_model_engine(engine_options("qwen3-moe", 2, 2, 0, port));
  ASSERT_FALSE(me.has_value());
  EXPECT_NE(me.status().message().find("--enable-expert-parallel"), std::string::npos)
      << me.status().to_string();
  const Status ws = worker.get();
  EXPECT_NE(ws.message().find("node 0 refused this node"), std::string::npos) << ws.to_string();

  auto uneven = open_model_engine(engine_options("qwen3-moe", 3, 2, 0, free_port()));
  ASSERT_FALSE(uneven.has_value());
  EXPECT_NE(uneven.status().message().find("does not split evenly over --nnodes 2"),
            std::string::npos);
  auto headless = open_model_engine(engine_options("qwen3-moe", 2, 2, 1, free_port()));
  ASSERT_FALSE(headless.has_value());
  EXPECT_NE(headless.status().message().find("runs headless"), std::string::npos);
}

}  // namespace
}  // namespace locus

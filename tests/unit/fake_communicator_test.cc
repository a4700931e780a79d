// The in-process communicator: each collective's result on every rank, bit-identical across
// ranks; mismatched calls, aborts and missing peers fail instead of hanging.
#include "dist/fake_communicator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "core/float_convert.h"

namespace locus {
namespace {

// Runs body(rank, comm) on `size` threads of one group.
void run_group(int size, const std::function<void(int, Communicator&)>& body,
               std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto group = FakeGroup::create(size, timeout);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto comm = group->communicator(r);
      body(r, *comm);
    });
  }
  for (auto& t : threads)
    t.join();
}

Tensor filled(const Dims& shape, float base) {
  Tensor t = Tensor::empty(shape, DType::kF32).value();
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = base + 0.1f * static_cast<float>(i);
  return t;
}

TEST(FakeCommunicator, AllReduceSumsInRankOrder) {
  constexpr int kRanks = 4;
  std::vector<std::vector<float>> got(kRanks);
  run_group(kRanks, [&](int r, Communicator& comm) {
    EXPECT_EQ(comm.rank(), r);
    EXPECT_EQ(comm.size(), kRanks);
    Tensor t = filled({3, 5}, static_cast<float>(r) * 1.7f);
    ASSERT_TRUE(comm.all_reduce_sum(t).is_ok());
    got[static_cast<size_t>(r)].assign(t.data<float>(), t.data<float>() + t.numel());
  });
  for (int64_t i = 0; i < 15; ++i) {
    float want = 0.0f;
    for (int r = 0; r < kRanks; ++r)
      want += static_cast<float>(r) * 1.7f + 0.1f * static_cast<float>(i);
    EXPECT_EQ(got[0][static_cast<size_t>(i)], want) << i;
  }
  for (int r = 1; r < kRanks; ++r)
    EXPECT_EQ(got[static_cast<size_t>(r)], got[0]) << "rank " << r;
}

TEST(FakeCommunicator, AllReduceBf16RoundsOnce) {
  // 1 + 2^-8 + 2^-8: bf16 steps by 2^-7 above 1, so rounding after each addition (ties to even)
  // would stay at 1; the f32 sum rounds once to 1 + 2^-7.
  std::vector<uint16_t> got(3);
  run_group(3, [&](int r, Communicator& comm) {
    Tensor t = Tensor::empty({1}, DType::kBF16).value();
    t.data<uint16_t>()[0] = f32_to_bf16_bits(r == 0 ? 1.0f : 0.00390625f);
    ASSERT_TRUE(comm.all_reduce_sum(t).is_ok());
    got[static_cast<size_t>(r)] = t.data<uint16_t>()[0];
  });
  EXPECT_EQ(bf16_bits_to_f32(got[0]), 1.0078125f);
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got[0], got[2]);
}

TEST(FakeCommunicator, AllGatherAlongFirstAndLastDim) {
  constexpr int kRanks = 3;
  run_group(kRanks, [&](int r, Communicator& comm) {
    Tensor in = filled({2, 4}, 100.0f * static_cast<float>(r));
    Tensor rows = Tensor::empty({6, 4}, DType::kF32).value();
    ASSERT_TRUE(comm.all_gather(in, rows, 0).is_ok());
    Tensor cols = Tensor::empty({2, 12}, DType::kF32).value();
    ASSERT_TRUE(comm.all_gather(in, cols, -1).is_ok());
    for (int src = 0; src < kRanks; ++src) {
      for (int64_t i = 0; i < 2; ++i) {
        for (int64_t j = 0; j < 4; ++j) {
          const float want =
              100.0f * static_cast<float>(src) + 0.1f * static_cast<float>(i * 4 + j);
          EXPECT_EQ(rows.data<float>()[(src * 2 + i) * 4 + j], want);
          EXPECT_EQ(cols.data<float>()[i * 12 + src * 4 + j], want);
        }
      }
    }
    Tensor wrong = Tensor::empty({5, 4}, DType::kF32).value();
    EXPECT_FALSE(comm.all_gather(in, wrong, 0).is_ok());  // checked before any rendezvous
  });
}

TEST(FakeCommunicator, ReduceScatterAndBroadcast) {
  constexpr int kRanks = 2;
  run_group(kRanks, [&](int r, Communicator& comm) {
    Tensor in = filled({4, 3}, static_cast<float>(r));
    Tensor out = Tensor::empty({2, 3}, DType::kF32).value();
    ASSERT_TRUE(comm.reduce_scatter_sum(in, out).is_ok());
    for (int64_t i = 0; i < 6; ++i) {
      const float x = 0.1f * static_cast<float>(r * 6 + i);
      EXPECT_EQ(out.data<float>()[i], (0.0f + x) + (1.0f + x)) << i;
    }
    Tensor b = filled({7}, 10.0f * static_cast<float>(r + 1));
    ASSERT_TRUE(comm.broadcast(b, 1).is_ok());
    for (int64_t i = 0; i < 7; ++i)
      EXPECT_EQ(b.data<float>()[i], 20.0f + 0.1f * static_cast<float>(i));
  });
}

TEST(FakeCommunicator, AllToAllMovesUnevenRowsInRankOrder) {
  // Rank s sends (s + d) % 3 rows to rank d (some zero), except rank 0, which sends none but
  // receives; row values name sender, receiver, row.
  constexpr int kRanks = 3;
  auto count = [](int s, int d) { return static_cast<int64_t>(s == 0 ? 0 : (s + d) % 3); };
  run_group(kRanks, [&](int r, Communicator& comm) {
    std::vector<int64_t> send(kRanks), recv(kRanks);
    int64_t sent = 0, received = 0;
    for (int q = 0; q < kRanks; ++q) {
      send[static_cast<size_t>(q)] = count(r, q);
      recv[static_cast<size_t>(q)] = count(q, r);
      sent += count(r, q);
      received += count(q, r);
    }
    Tensor in = Tensor::empty({sent, 2}, DType::kF32).value();
    int64_t row = 0;
    for (int d = 0; d < kRanks; ++d) {
      for (int64_t i = 0; i < count(r, d); ++i, ++row) {
        in.data<float>()[row * 2] = static_cast<float>(100 * r + 10 * d + i);
        in.data<float>()[row * 2 + 1] = -static_cast<float>(row);
      }
    }
    Tensor out = Tensor::empty({received, 2}, DType::kF32).value();
    ASSERT_TRUE(comm.all_to_all(in, send, out, recv).is_ok());
    row = 0;
    for (int s = 0; s < kRanks; ++s) {
      for (int64_t i = 0; i < count(s, r); ++i, ++row)
        EXPECT_EQ(out.data<float>()[row * 2], static_cast<float>(100 * s + 10 * r + i));
    }
    EXPECT_EQ(row, received);
    // Counts that do not add up to the tensors are refused before any rendezvous.
    Tensor short_out = Tensor::empty({received + 1, 2}, DType::kF32).value();
    EXPECT_FALSE(comm.all_to_all(in, send, short_out, recv).is_ok());
  });
}

TEST(FakeCommunicator, AllToAllWithDisagreeingCountsFailsOnEveryRank) {
  std::vector<Status> got(2);
  run_group(2, [&](int r, Communicator& comm) {
    // Rank 0 sends one row to rank 1, which expects two.
    std::vector<int64_t> send = {0, r == 0 ? 1 : 0};
    std::vector<int64_t> recv = {r == 1 ? 2 : 0, 0};
    Tensor in = Tensor::empty({send[1], 4}, DType::kF32).value();
    Tensor out = Tensor::empty({recv[0], 4}, DType::kF32).value();
    got[static_cast<size_t>(r)] = comm.all_to_all(in, send, out, recv);
  });
  for (const Status& s : got) {
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.to_string().find("sends 1 rows to rank 1, which expects 2"), std::string::npos)
        << s.to_string();
  }
}

TEST(FakeCommunicator, DisagreeingCallsFailOnEveryRank) {
  std::vector<std::string> errors(2);
  run_group(2, [&](int r, Communicator& comm) {
    Tensor t = filled({r == 0 ? 3 : 4}, 0.0f);
    const Status s = comm.all_reduce_sum(t);
    EXPECT_FALSE(s.is_ok());
    errors[static_cast<size_t>(r)] = s.to_string();
  });
  for (const auto& e : errors)
    EXPECT_NE(e.find("disagree"), std::string::npos) << e;
}

TEST(FakeCommunicator, AbortReleasesWaitingRanks) {
  auto group = FakeGroup::create(2, std::chrono::minutes(5));
  Status waited;
  std::thread waiter([&] {
    auto comm = group->communicator(0);
    Tensor t = filled({2}, 0.0f);
    waited = comm->all_reduce_sum(t);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  group->abort("rank 1 failed to load");
  waiter.join();
  EXPECT_FALSE(waited.is_ok());
  EXPECT_NE(waited.to_string().find("rank 1 failed to load"), std::string::npos)
      << waited.to_string();
  // Later collectives fail at once.
  auto comm = group->communicator(1);
  Tensor t = filled({2}, 0.0f);
  EXPECT_FALSE(comm->all_reduce_sum(t).is_ok());
}

TEST(FakeCommunicator, AMissingPeerTimesOut) {
  auto group = FakeGroup::create(2, std::chrono::milliseconds(50));
  auto comm = group->communicator(0);
  Tensor t = filled({2}, 0.0f);
  const Status s = comm->all_reduce_sum(t);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("waited over 50 ms"), std::string::npos) << s.to_string();
}

TEST(FakeCommunicator, NonHostOrIntegerTensorsAreRefused) {
  run_group(1, [&](int, Communicator& comm) {
    Tensor ids = Tensor::empty({4}, DType::kI32).value();
    EXPECT_FALSE(comm.all_reduce_sum(ids).is_ok());
    Tensor undefined;
    EXPECT_FALSE(comm.all_reduce_sum(undefined).is_ok());
  });
}

}  // namespace
}  // namespace locus

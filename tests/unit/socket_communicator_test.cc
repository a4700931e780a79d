// The TCP communicator: ranks as threads of one process over 127.0.0.1 give the in-process
// group's results bit for bit, large buffers do not deadlock, and aborts, vanished peers and
// mismatched set-ups fail with a message instead of hanging. Also the frame and connect helpers.
#include "dist/socket_communicator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/convert.h"
#include "core/counter_rng.h"
#include "dist/fake_communicator.h"
#include "dist/tcp_util.h"

namespace locus {
namespace {

using std::chrono::milliseconds;

std::string endpoint_of(const SocketListener& listener) {
  return "127.0.0.1:" + std::to_string(listener.port());
}

// Connects `size` ranks, each from its own thread as separate processes would.
std::vector<std::unique_ptr<SocketCommunicator>> connect_group(
    int size, milliseconds collective_timeout = std::chrono::seconds(20)) {
  std::vector<std::unique_ptr<SocketListener>> listeners;
  std::vector<std::string> endpoints;
  for (int r = 0; r < size; ++r) {
    listeners.push_back(SocketListener::listen("127.0.0.1").value());
    endpoints.push_back(endpoint_of(*listeners.back()));
  }
  std::vector<std::unique_ptr<SocketCommunicator>> comms(static_cast<size_t>(size));
  std::vector<Status> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      const auto i = static_cast<size_t>(r);
      auto comm = SocketCommunicator::connect(std::move(listeners[i]), r, endpoints,
                                              std::chrono::seconds(10), collective_timeout);
      if (comm) comms[i] = std::move(*comm);
      errors[i] = comm.status();
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < size; ++r)
    EXPECT_TRUE(errors[static_cast<size_t>(r)].is_ok())
        << errors[static_cast<size_t>(r)].to_string();
  return comms;
}

void run_on_threads(std::vector<Communicator*> comms,
                    const std::function<void(int, Communicator&)>& body) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] { body(static_cast<int>(r), *comms[r]); });
  for (auto& t : threads)
    t.join();
}

// Fresh values in [-1, 1) for each (seed, rank), in f32 or rounded to bf16.
Tensor random_tensor(const Dims& shape, DType dtype, uint64_t seed, int rank) {
  Tensor f32 = Tensor::empty(shape, DType::kF32).value();
  const uint64_t stream = stream_key(seed, static_cast<uint64_t>(rank));
  for (int64_t i = 0; i < f32.numel(); ++i)
    f32.data<float>()[i] = 2.0f * counter_uniform(stream, static_cast<uint64_t>(i)) - 1.0f;
  if (dtype == DType::kF32) return f32;
  Tensor t = Tensor::empty(shape, dtype).value();
  EXPECT_TRUE(convert_tensor(f32, t).is_ok());
  return t;
}

std::string bytes_of(const Tensor& t) {
  return {static_cast<const char*>(t.raw_data()), t.nbytes()};
}

// Every collective once, on random data; returns each output's bytes in call order.
std::vector<std::string> run_every_collective(int rank, Communicator& comm, DType dtype) {
  const int size = comm.size();
  std::vector<std::string> outputs;
  auto check = [&](const Status& s) { EXPECT_TRUE(s.is_ok()) << s.to_string(); };

  Tensor sum = random_tensor({5, 7}, dtype, 1, rank);
  check(comm.all_reduce_sum(sum));
  outputs.push_back(bytes_of(sum));

  Tensor in = random_tensor({2, 3, 4}, dtype, 2, rank);
  Tensor rows = Tensor::empty({2 * size, 3, 4}, dtype).value();
  check(comm.all_gather(in, rows, 0));
  outputs.push_back(bytes_of(rows));
  Tensor inner = Tensor::empty({2, 3 * size, 4}, dtype).value();
  check(comm.all_gather(in, inner, 1));
  outputs.push_back(bytes_of(inner));

  Tensor parts = random_tensor({3 * size, 5}, dtype, 3, rank);
  Tensor part = Tensor::empty({3, 5}, dtype).value();
  check(comm.reduce_scatter_sum(parts, part));
  outputs.push_back(bytes_of(part));

  Tensor b = random_tensor({9}, dtype, 4, rank);
  check(comm.broadcast(b, size - 1));
  outputs.push_back(bytes_of(b));

  // Rank s sends (s + d) % 3 rows to rank d, and rank 0 sends none: zero counts included.
  auto count = [](int s, int d) { return static_cast<int64_t>(s == 0 ? 0 : (s + d) % 3); };
  std::vector<int64_t> send, recv;
  int64_t sent = 0, received = 0;
  for (int q = 0; q < size; ++q) {
    send.push_back(count(rank, q));
    recv.push_back(count(q, rank));
    sent += count(rank, q);
    received += count(q, rank);
  }
  Tensor to_send = random_tensor({sent, 2, 3}, dtype, 5, rank);
  Tensor got = Tensor::empty({received, 2, 3}, dtype).value();
  check(comm.all_to_all(to_send, send, got, recv));
  outputs.push_back(bytes_of(got));
  return outputs;
}

class SocketParity : public ::testing::TestWithParam<int> {};

TEST_P(SocketParity, EveryCollectiveMatchesTheInProcessGroup) {
  const int size = GetParam();
  auto group = FakeGroup::create(size, std::chrono::seconds(20));
  std::vector<std::unique_ptr<Communicator>> fakes;
  std::vector<Communicator*> fake_ptrs;
  for (int r = 0; r < size; ++r) {
    fakes.push_back(group->communicator(r));
    fake_ptrs.push_back(fakes.back().get());
  }
  auto sockets = connect_group(size);
  ASSERT_EQ(sockets.size(), static_cast<size_t>(size));
  std::vector<Communicator*> socket_ptrs;
  for (auto& c : sockets) {
    ASSERT_NE(c, nullptr);
    socket_ptrs.push_back(c.get());
  }
  EXPECT_EQ(sockets[1]->description(), fmt::format("TCP group of {} (rank 1)", size));
  EXPECT_EQ(sockets[0]->device(), Device::cpu());

  for (DType dtype : {DType::kF32, DType::kBF16}) {
    std::vector<std::vector<std::string>> want(static_cast<size_t>(size));
    std::vector<std::vector<std::string>> got(static_cast<size_t>(size));
    run_on_threads(fake_ptrs, [&](int r, Communicator& comm) {
      want[static_cast<size_t>(r)] = run_every_collective(r, comm, dtype);
    });
    run_on_threads(socket_ptrs, [&](int r, Communicator& comm) {
      EXPECT_EQ(comm.rank(), r);
      EXPECT_EQ(comm.size(), size);
      got[static_cast<size_t>(r)] = run_every_collective(r, comm, dtype);
    });
    const char* names[] = {"all_reduce_sum",     "all_gather dim 0", "all_gather dim 1",
                           "reduce_scatter_sum", "broadcast",        "all_to_all"};
    for (size_t r = 0; r < static_cast<size_t>(size); ++r) {
      ASSERT_EQ(got[r].size(), want[r].size());
      for (size_t op = 0; op < want[r].size(); ++op) {
        EXPECT_EQ(got[r][op], want[r][op])
            << names[op] << " differs on rank " << r << " (" << dtype_name(dtype) << ")";
      }
      EXPECT_EQ(got[r][0], got[0][0]) << "all_reduce_sum differs between ranks";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SocketParity, ::testing::Values(2, 3, 4));

TEST(SocketCommunicator, LargeBuffersBothWaysDoNotDeadlock) {
  // 8 MB each way at once: far more than the kernel's socket buffers.
  auto comms = connect_group(2);
  constexpr int64_t kElements = 2 << 20;
  run_on_threads({comms[0].get(), comms[1].get()}, [&](int r, Communicator& comm) {
    Tensor t = Tensor::empty({kElements}, DType::kF32).value();
    for (int64_t i = 0; i < kElements; ++i)
      t.data<float>()[i] = static_cast<float>(r + 1) * static_cast<float>(i % 1000);
    ASSERT_TRUE(comm.all_reduce_sum(t).is_ok());
    for (int64_t i : {int64_t{0}, int64_t{12345}, kElements - 1})
      EXPECT_EQ(t.data<float>()[i], 3.0f * static_cast<float>(i % 1000)) << i;
    Tensor all = Tensor::empty({2 * kElements}, DType::kF32).value();
    ASSERT_TRUE(comm.all_gather(t, all, 0).is_ok());
    EXPECT_EQ(std::memcmp(all.data<float>() + kElements, t.raw_data(), t.nbytes()), 0);
  });
}

TEST(SocketCommunicator, AbortReleasesARankWaitingForAMissingPeer) {
  auto comms = connect_group(2, std::chrono::minutes(5));
  Status waited;
  std::thread waiter([&] {
    Tensor t = Tensor::zeros({4}, DType::kF32).value();
    waited = comms[0]->all_reduce_sum(t);
  });
  std::this_thread::sleep_for(milliseconds(50));
  comms[0]->abort("rank 1 failed to load");
  waiter.join();
  EXPECT_FALSE(waited.is_ok());
  EXPECT_NE(waited.message().find("rank 1 failed to load"), std::string::npos)
      << waited.to_string();
  Tensor t = Tensor::zeros({4}, DType::kF32).value();
  const Status later = comms[0]->all_reduce_sum(t);
  EXPECT_NE(later.message().find("rank 1 failed to load"), std::string::npos) << later.to_string();
  // The aborted rank closed its connections, so its peer fails too instead of waiting. (Its
  // first call may still complete: rank 0's frame of the aborted call had already arrived.)
  Status peer = comms[1]->all_reduce_sum(t);
  if (peer.is_ok()) peer = comms[1]->all_reduce_sum(t);
  EXPECT_NE(peer.message().find("rank 0: the peer closed the connection"), std::string::npos)
      << peer.to_string();
}

TEST(SocketCommunicator, APeerThatGoesAwayFailsTheNextCollective) {
  auto comms = connect_group(3, std::chrono::minutes(5));
  comms[2].reset();  // as if its process exited: the kernel closes the sockets
  std::vector<Status> got(2);
  run_on_threads({comms[0].get(), comms[1].get()}, [&](int r, Communicator& comm) {
    Tensor t = Tensor::zeros({1000}, DType::kBF16).value();
    got[static_cast<size_t>(r)] = comm.all_reduce_sum(t);
  });
  // Whichever rank notices first closes its connections too, so the other may name it instead.
  for (const Status& s : got) {
    EXPECT_NE(s.message().find("the peer closed the connection"), std::string::npos)
        << s.to_string();
  }
  const std::string both = got[0].message() + " | " + got[1].message();
  EXPECT_NE(both.find("rank 2: the peer closed the connection"), std::string::npos) << both;
}

TEST(SocketCommunicator, AMissingPeerTimesOut) {
  auto comms = connect_group(2, milliseconds(100));
  Tensor t = Tensor::zeros({4}, DType::kF32).value();
  const Status s = comms[0]->all_reduce_sum(t);
  EXPECT_NE(s.message().find("rank 0: all_reduce_sum: waited over 100 ms for rank 1"),
            std::string::npos)
      << s.to_string();
}

TEST(SocketCommunicator, DisagreeingCallsFailWithBothCallsNamed) {
  auto comms = connect_group(2);
  std::vector<Status> got(2);
  run_on_threads({comms[0].get(), comms[1].get()}, [&](int r, Communicator& comm) {
    Tensor t = Tensor::zeros({4}, DType::kF32).value();
    Tensor out = Tensor::empty({8}, DType::kF32).value();
    got[static_cast<size_t>(r)] = r == 0 ? comm.all_reduce_sum(t) : comm.all_gather(t, out, 0);
  });
  const std::string all = got[0].message() + " | " + got[1].message();
  EXPECT_NE(all.find("collectives disagree"), std::string::npos) << all;
  EXPECT_NE(all.find("all_gather(f32, dim 0)"), std::string::npos) << all;
  EXPECT_FALSE(got[0].is_ok());
  EXPECT_FALSE(got[1].is_ok());
}

TEST(SocketCommunicator, AWrongWorldSizeFailsOnBothEnds) {
  auto l0 = SocketListener::listen("127.0.0.1").value();
  auto l1 = SocketListener::listen("127.0.0.1").value();
  const std::vector<std::string> two = {endpoint_of(*l0), endpoint_of(*l1)};
  const std::vector<std::string> three = {two[0], two[1], "127.0.0.1:1"};
  Status s0, s1;
  std::thread t0([&] {
    s0 = SocketCommunicator::connect(std::move(l0), 0, two, std::chrono::seconds(5)).status();
  });
  std::thread t1([&] {
    s1 = SocketCommunicator::connect(std::move(l1), 1, three, std::chrono::seconds(5)).status();
  });
  t0.join();
  t1.join();
  for (const Status& s : {s0, s1}) {
    EXPECT_NE(s.message().find("rank 1 was told the group has 3 ranks, rank 0 was told 2"),
              std::string::npos)
        << s.to_string();
  }
  EXPECT_NE(s1.message().find("refused"), std::string::npos) << s1.to_string();
}

TEST(SocketCommunicator, ASingleRankNeedsNoPeers) {
  auto listener = SocketListener::listen("127.0.0.1").value();
  auto comm =
      SocketCommunicator::connect(std::move(listener), 0, {"unused:1"}, std::chrono::seconds(1))
          .value();
  Tensor t = random_tensor({6}, DType::kBF16, 7, 0);
  const std::string before = bytes_of(t);
  ASSERT_TRUE(comm->all_reduce_sum(t).is_ok());
  EXPECT_EQ(bytes_of(t), before);
}

TEST(TcpUtil, FramesRoundTripAndAClosedPeerIsNamed) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const int port = acceptor.local_endpoint().port();
  auto client = connect_tcp(io, "127.0.0.1", port,
                            std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(client.has_value()) << client.status().to_string();
  boost::asio::ip::tcp::socket server = acceptor.accept();
  ASSERT_TRUE(write_frame(*client, "hello").is_ok());
  ASSERT_TRUE(write_frame(*client, "").is_ok());
  EXPECT_EQ(read_frame(server).value(), "hello");
  EXPECT_EQ(read_frame(server).value(), "");
  // A header announcing 2 GiB is refused before anything is allocated.
  unsigned char header[kFrameHeaderBytes];
  encode_frame_header(uint64_t{2} << 30, header);
  boost::asio::write(*client, boost::asio::buffer(header));
  const auto huge = read_frame(server);
  EXPECT_NE(huge.status().message().find("over the limit"), std::string::npos)
      << huge.status().to_string();
  client->close();
  const auto closed = read_frame(server);
  EXPECT_NE(closed.status().message().find("the peer closed the connection"), std::string::npos)
      << closed.status().to_string();
}

TEST(TcpUtil, ConnectGivesUpAtTheDeadlineNamingTheEndpoint) {
  boost::asio::io_context io;
  int port = 0;
  {
    // A port that was just free: nothing listens there now.
    boost::asio::ip::tcp::acceptor probe(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = probe.local_endpoint().port();
  }
  const auto start = std::chrono::steady_clock::now();
  auto socket = connect_tcp(io, "127.0.0.1", port, start + milliseconds(300));
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(socket.has_value());
  EXPECT_NE(socket.status().message().find(fmt::format("127.0.0.1:{}", port)), std::string::npos)
      << socket.status().to_string();
  EXPECT_GE(waited, milliseconds(250));  // it retried rather than failing at once
  EXPECT_LT(waited, std::chrono::seconds(3));
}

TEST(TcpUtil, SplitHostPort) {
  EXPECT_EQ(split_host_port("node-3:29500").value(), std::make_pair(std::string("node-3"), 29500));
  EXPECT_EQ(split_host_port("[::1]:80").value(), std::make_pair(std::string("::1"), 80));
  EXPECT_FALSE(split_host_port("node-3").has_value());
  EXPECT_FALSE(split_host_port("node-3:http").has_value());
  EXPECT_FALSE(split_host_port("node-3:70000").has_value());
}

}  // namespace
}  // namespace locus

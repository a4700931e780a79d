#include "dist/socket_communicator.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <optional>

#include "core/convert.h"
#include "core/logging.h"
#include "dist/tcp_util.h"

namespace locus {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Set-up: a connecting rank sends a hello frame (magic, version, its rank, the group size) and
// waits for a reply frame, empty when accepted, else the reason it was refused.
constexpr char kHelloMagic[8] = {'L', 'O', 'C', 'U', 'S', 'T', 'C', 'P'};
constexpr uint32_t kProtocolVersion = 1;
constexpr size_t kHelloBytes = sizeof(kHelloMagic) + 12;
constexpr uint64_t kMaxReplyBytes = 64 * 1024;

// Every collective frame starts with a tag saying which call sent it, so that ranks that call
// different collectives (a bug) fail with both calls named instead of misreading bytes.
enum class Op : uint8_t { kAllReduceSum, kAllGather, kReduceScatterSum, kBroadcast, kAllToAll };
constexpr size_t kTagBytes = 24;  // op u8, dtype u8, 6 zero bytes, arg i64, sequence u64
constexpr size_t kHeadBytes = kFrameHeaderBytes + kTagBytes;

const char* op_name(Op op) {
  switch (op) {
    case Op::kAllReduceSum:
      return "all_reduce_sum";
    case Op::kAllGather:
      return "all_gather";
    case Op::kReduceScatterSum:
      return "reduce_scatter_sum";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kAllToAll:
      return "all_to_all";
  }
  return "an unknown collective";
}

// One collective call as the frames describe it. `arg` is the dim, the root or the row bytes.
struct Call {
  Op op = Op::kAllReduceSum;
  DType dtype = DType::kF32;
  int64_t arg = 0;
  uint64_t sequence = 0;

  friend bool operator==(const Call&, const Call&) = default;
};

std::string describe(const Call& call) {
  const std::string_view dtype = dtype_name(call.dtype);
  switch (call.op) {
    case Op::kAllGather:
      return fmt::format("all_gather({}, dim {})", dtype, call.arg);
    case Op::kBroadcast:
      return fmt::format("broadcast({}, root {})", dtype, call.arg);
    case Op::kAllToAll:
      return fmt::format("all_to_all({}, rows of {} bytes)", dtype, call.arg);
    default:
      return fmt::format("{}({})", op_name(call.op), dtype);
  }
}

void put_u64(unsigned char* p, uint64_t v) {
  for (size_t i = 0; i < 8; ++i)
    p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void encode_head(const Call& call, size_t data_bytes, unsigned char (&head)[kHeadBytes]) {
  unsigned char frame_header[kFrameHeaderBytes];
  encode_frame_header(kTagBytes + data_bytes, frame_header);
  std::memcpy(head, frame_header, kFrameHeaderBytes);
  unsigned char* tag = head + kFrameHeaderBytes;
  std::memset(tag, 0, kTagBytes);
  tag[0] = static_cast<unsigned char>(call.op);
  tag[1] = static_cast<unsigned char>(call.dtype);
  put_u64(tag + 8, static_cast<uint64_t>(call.arg));
  put_u64(tag + 16, call.sequence);
}

Call decode_tag(const unsigned char* tag) {
  return {static_cast<Op>(tag[0]), static_cast<DType>(tag[1]),
          static_cast<int64_t>(get_u64(tag + 8)), get_u64(tag + 16)};
}

std::string encode_hello(int rank, int size) {
  std::string hello(kHelloBytes, '\0');
  auto* p = reinterpret_cast<unsigned char*>(hello.data());
  std::memcpy(p, kHelloMagic, sizeof(kHelloMagic));
  const uint32_t fields[3] = {kProtocolVersion, static_cast<uint32_t>(rank),
                              static_cast<uint32_t>(size)};
  for (size_t f = 0; f < 3; ++f) {
    for (size_t i = 0; i < 4; ++i)
      p[sizeof(kHelloMagic) + 4 * f + i] = static_cast<unsigned char>(fields[f] >> (8 * i));
  }
  return hello;
}

// Adds one rank's elements, decoded to f32, into `sum`: the same arithmetic as FakeGroup's, so
// both groups give the same bits.
Status add_rank(std::vector<float>& sum, std::vector<float>& scratch, DType dtype,
                const void* data) {
  const float* values = static_cast<const float*>(data);
  if (dtype != DType::kF32) {
    LOCUS_RETURN_IF_ERROR(convert_to_f32(dtype, data, scratch.data(), scratch.size()));
    values = scratch.data();
  }
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] += values[i];
  return Status::ok();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The listener

struct SocketListener::State {
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

SocketListener::SocketListener(std::unique_ptr<State> state) : state_(std::move(state)) {}
SocketListener::~SocketListener() = default;

Expected<std::unique_ptr<SocketListener>> SocketListener::listen(const std::string& bind_host) {
  auto state = std::make_unique<State>();
  boost::system::error_code error;
  tcp::resolver resolver(state->io);
  const auto endpoints = resolver.resolve(bind_host, "0", tcp::resolver::passive, error);
  if (error || endpoints.empty()) {
    return io_error(fmt::format("cannot listen on {}: {}", bind_host,
                                error ? error.message() : std::string("no address")));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  state->acceptor.open(endpoint.protocol(), error);
  if (!error) state->acceptor.bind(endpoint, error);
  if (!error) state->acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    return io_error(fmt::format("cannot listen on {}: {}", bind_host, error.message()));
  }
  return std::unique_ptr<SocketListener>(new SocketListener(std::move(state)));
}

int SocketListener::port() const {
  boost::system::error_code error;
  const tcp::endpoint endpoint = state_->acceptor.local_endpoint(error);
  return error ? 0 : endpoint.port();
}

// ---------------------------------------------------------------------------------------------
// The mesh and its set-up

struct SocketMesh {
  SocketMesh(std::unique_ptr<SocketListener> owned_listener, asio::io_context& context,
             tcp::acceptor& listening, int my_rank, int ranks, std::chrono::milliseconds timeout)
      : listener(std::move(owned_listener)),
        io(context),
        acceptor(listening),
        rank(my_rank),
        size(ranks),
        collective_timeout(timeout),
        peers(static_cast<size_t>(ranks)),
        native_handles(static_cast<size_t>(ranks), -1) {}

  std::optional<std::string> abort_reason() {
    std::lock_guard lock(abort_mutex);
    return aborted;
  }

  // Ends every pending operation at once, here and (by the closed connection) at the peers.
  // Only from the thread that runs `io`.
  void shut_down_peers() {
    for (auto& peer : peers) {
      if (!peer) continue;
      boost::system::error_code ignored;
      peer->cancel(ignored);
      peer->shutdown(tcp::socket::shutdown_both, ignored);
    }
  }

  // Owns `io`, so it is declared first and destroyed after the sockets that use it.
  std::unique_ptr<SocketListener> listener;
  asio::io_context& io;
  tcp::acceptor& acceptor;
  const int rank;
  const int size;
  const std::chrono::milliseconds collective_timeout;
  std::vector<std::optional<tcp::socket>> peers;  // by rank; none for this rank
  // The sockets' descriptors, for abort() from another thread: asio's socket objects are not
  // thread-safe, ::shutdown on a descriptor is.
  std::vector<int> native_handles;
  uint64_t sequence = 0;
  // The first failed collective: after it the streams are out of step, so every later one fails.
  std::optional<std::string> failure;

  std::mutex abort_mutex;
  std::optional<std::string> aborted;
};

namespace {

// Accepts a connection from every higher rank (checking its hello and replying) and reads the
// replies of every lower rank, all at once on the mesh's io_context.
class Handshake {
 public:
  Handshake(SocketMesh& mesh, std::chrono::steady_clock::time_point deadline)
      : mesh_(mesh),
        deadline_(deadline),
        remaining_hellos_(mesh.size - 1 - mesh.rank),
        is_replied_(static_cast<size_t>(mesh.size), false) {}

  Status run() {
    if (remaining_hellos_ > 0) accept_next();
    for (int peer = 0; peer < mesh_.rank; ++peer)
      read_reply(peer);
    mesh_.io.restart();
    mesh_.io.run_until(deadline_);
    if (!failure_ && (remaining_hellos_ > 0 || received_replies_ < mesh_.rank)) {
      std::string missing;
      for (int peer = 0; peer < mesh_.size; ++peer) {
        const bool is_missing = peer > mesh_.rank ? !mesh_.peers[static_cast<size_t>(peer)]
                                                  : peer < mesh_.rank && !is_replied(peer);
        if (is_missing) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", peer);
      }
      failure_ = fmt::format("no answer from rank(s) {} before the set-up deadline", missing);
    }
    if (failure_) {
      mesh_.io.stop();  // the mesh and its pending handlers die with the failed connect()
      return io_error(
          fmt::format("rank {} of a TCP group of {}: {}", mesh_.rank, mesh_.size, *failure_));
    }
    // Stray connections still saying nothing must not leave handlers for the first collective.
    for (auto& stray : incoming_) {
      boost::system::error_code ignored;
      stray->socket.close(ignored);
    }
    mesh_.io.restart();
    mesh_.io.run();
    return Status::ok();
  }

 private:
  struct Incoming {
    explicit Incoming(asio::io_context& io) : socket(io) {}
    tcp::socket socket;
    unsigned char header[kFrameHeaderBytes] = {};
    std::array<unsigned char, kHelloBytes> hello = {};
  };
  struct Reply {
    unsigned char header[kFrameHeaderBytes] = {};
    std::string text;
  };

  void fail(std::string reason) {
    if (failure_) return;
    failure_ = std::move(reason);
    mesh_.io.stop();
  }

  bool is_replied(int peer) const { return is_replied_[static_cast<size_t>(peer)]; }

  // Stops the loop once every peer is in; stray connections may still be pending.
  void stop_if_done() {
    if (remaining_hellos_ == 0 && received_replies_ == mesh_.rank) mesh_.io.stop();
  }

  void accept_next() {
    auto incoming = std::make_shared<Incoming>(mesh_.io);
    incoming_.push_back(incoming);
    mesh_.acceptor.async_accept(incoming->socket, [this, incoming](boost::system::error_code e) {
      if (failure_ || remaining_hellos_ == 0 || e == asio::error::operation_aborted) return;
      if (e) return fail("accepting a connection: " + e.message());
      accept_next();
      read_hello(incoming);
    });
  }

  void read_hello(std::shared_ptr<Incoming> incoming) {
    asio::async_read(incoming->socket, asio::buffer(incoming->header),
                     [this, incoming](boost::system::error_code e, size_t) {
                       if (failure_ || e) return drop(*incoming);  // a stray client, not a rank
                       if (decode_frame_header(incoming->header) != kHelloBytes)
                         return drop(*incoming);
                       asio::async_read(incoming->socket, asio::buffer(incoming->hello),
                                        [this, incoming](boost::system::error_code e2, size_t) {
                                          if (failure_) return;
                                          if (e2 || std::memcmp(incoming->hello.data(), kHelloMagic,
                                                                sizeof(kHelloMagic)) != 0) {
                                            return drop(*incoming);
                                          }
                                          check_hello(*incoming);
                                        });
                     });
  }

  void drop(Incoming& incoming) {
    if (failure_) return;
    boost::system::error_code ignored;
    const tcp::endpoint from = incoming.socket.remote_endpoint(ignored);
    log::warn("rank {}: ignoring a connection from {} that is not a locus rank", mesh_.rank,
              from.address().to_string());
    incoming.socket.close(ignored);
  }

  void check_hello(Incoming& incoming) {
    uint32_t fields[3] = {};
    for (size_t f = 0; f < 3; ++f) {
      for (size_t i = 0; i < 4; ++i) {
        fields[f] |= static_cast<uint32_t>(incoming.hello[sizeof(kHelloMagic) + 4 * f + i])
                     << (8 * i);
      }
    }
    const auto peer = static_cast<int64_t>(fields[1]);
    const auto peer_size = static_cast<int64_t>(fields[2]);
    std::string refusal;
    if (fields[0] != kProtocolVersion) {
      refusal = fmt::format("rank {} speaks protocol version {}, rank {} speaks {}", peer,
                            fields[0], mesh_.rank, kProtocolVersion);
    } else if (peer_size != mesh_.size) {
      refusal = fmt::format("rank {} was told the group has {} ranks, rank {} was told {}", peer,
                            peer_size, mesh_.rank, mesh_.size);
    } else if (peer <= mesh_.rank || peer >= mesh_.size) {
      refusal = fmt::format("a peer says it is rank {}, but rank {} accepts only ranks {} to {}",
                            peer, mesh_.rank, mesh_.rank + 1, mesh_.size - 1);
    } else if (mesh_.peers[static_cast<size_t>(peer)]) {
      refusal = fmt::format("two peers say they are rank {} (was a rank started twice?)", peer);
    }
    // The reply is a few bytes into a fresh socket's buffer, so writing it synchronously does not
    // block; the refused peer learns why instead of seeing a closed connection.
    const Status replied = write_frame(incoming.socket, refusal);
    if (!refusal.empty()) return fail(refusal);
    if (!replied) return fail(fmt::format("replying to rank {}: {}", peer, replied.message()));
    boost::system::error_code error;
    incoming.socket.set_option(tcp::no_delay(true), error);
    if (error) return fail(fmt::format("rank {}: {}", peer, error.message()));
    mesh_.peers[static_cast<size_t>(peer)].emplace(std::move(incoming.socket));
    if (--remaining_hellos_ == 0) {
      boost::system::error_code ignored;
      mesh_.acceptor.close(ignored);
    }
    stop_if_done();
  }

  void read_reply(int peer) {
    auto reply = std::make_shared<Reply>();
    tcp::socket& socket = *mesh_.peers[static_cast<size_t>(peer)];
    asio::async_read(
        socket, asio::buffer(reply->header),
        [this, peer, reply, &socket](boost::system::error_code e, size_t) {
          if (failure_) return;
          if (e)
            return fail(fmt::format("rank {} did not accept: {}", peer, describe_socket_error(e)));
          const uint64_t bytes = decode_frame_header(reply->header);
          if (bytes > kMaxReplyBytes) return fail(fmt::format("rank {} is not a locus rank", peer));
          reply->text.resize(static_cast<size_t>(bytes));
          asio::async_read(
              socket, asio::buffer(reply->text),
              [this, peer, reply](boost::system::error_code e2, size_t) {
                if (failure_) return;
                if (e2) {
                  return fail(
                      fmt::format("rank {} did not accept: {}", peer, describe_socket_error(e2)));
                }
                if (!reply->text.empty()) {
                  return fail(fmt::format("rank {} refused the connection: {}", peer, reply->text));
                }
                is_replied_[static_cast<size_t>(peer)] = true;
                ++received_replies_;
                stop_if_done();
              });
        });
  }

  SocketMesh& mesh_;
  const std::chrono::steady_clock::time_point deadline_;
  int remaining_hellos_;
  int received_replies_ = 0;
  std::vector<bool> is_replied_;
  std::vector<std::shared_ptr<Incoming>> incoming_;
  std::optional<std::string> failure_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Collectives

namespace {

// What one collective sends to and receives from one peer; the sizes are known on both ends.
struct Transfer {
  int peer = 0;
  bool has_send = false;
  const void* send_data = nullptr;
  size_t send_bytes = 0;
  bool has_recv = false;
  void* recv_data = nullptr;
  size_t recv_bytes = 0;
  // Row bytes, so that a wrong all_to_all count is reported in rows; 0 elsewhere.
  size_t row_bytes = 0;

  unsigned char send_head[kHeadBytes] = {};
  unsigned char recv_head[kHeadBytes] = {};
  bool is_sent = false;
  bool is_received = false;
};

Transfer both_ways(int peer, const void* send_data, size_t send_bytes, void* recv_data,
                   size_t recv_bytes) {
  Transfer t;
  t.peer = peer;
  t.has_send = true;
  t.send_data = send_data;
  t.send_bytes = send_bytes;
  t.has_recv = true;
  t.recv_data = recv_data;
  t.recv_bytes = recv_bytes;
  return t;
}

Transfer send_only(int peer, const void* data, size_t bytes) {
  Transfer t = both_ways(peer, data, bytes, nullptr, 0);
  t.has_recv = false;
  return t;
}

Transfer receive_only(int peer, void* data, size_t bytes) {
  Transfer t = both_ways(peer, nullptr, 0, data, bytes);
  t.has_send = false;
  return t;
}

std::string aborted_message(const SocketMesh& mesh, const char* op, const std::string& reason) {
  return fmt::format("rank {}: {}: the group was aborted: {}", mesh.rank, op, reason);
}

// Checks the head of a frame from `t.peer` against this rank's call; empty when they agree.
std::string check_head(const SocketMesh& mesh, const Call& mine, const Transfer& t) {
  unsigned char frame_header[kFrameHeaderBytes];
  std::memcpy(frame_header, t.recv_head, kFrameHeaderBytes);
  const uint64_t bytes = decode_frame_header(frame_header);
  const Call theirs = decode_tag(t.recv_head + kFrameHeaderBytes);
  if (theirs != mine || bytes < kTagBytes) {
    return fmt::format(
        "collectives disagree: rank {} called {} as collective {} while rank {} called {} as "
        "collective {}",
        mesh.rank, describe(mine), mine.sequence, t.peer, describe(theirs), theirs.sequence);
  }
  const uint64_t data_bytes = bytes - kTagBytes;
  if (data_bytes == t.recv_bytes) return {};
  if (t.row_bytes > 0) {
    return fmt::format("{}: rank {} sends {} rows to rank {}, which expects {}", op_name(mine.op),
                       t.peer, data_bytes / t.row_bytes, mesh.rank, t.recv_bytes / t.row_bytes);
  }
  return fmt::format("{}: rank {} sends {} bytes, rank {} expects {} (shapes disagree)",
                     describe(mine), t.peer, data_bytes, mesh.rank, t.recv_bytes);
}

// Runs one collective's transfers at once on the calling thread until all are done, one fails,
// the timeout passes or the group is aborted. Both directions to every peer are in flight
// together, so two ranks sending large buffers to each other cannot block each other.
Status exchange(SocketMesh& mesh, Call call, std::vector<Transfer>& transfers) {
  const char* op = op_name(call.op);
  if (auto reason = mesh.abort_reason()) return internal_error(aborted_message(mesh, op, *reason));
  if (mesh.failure) {
    return internal_error(
        fmt::format("rank {}: {}: the TCP group failed earlier: {}", mesh.rank, op, *mesh.failure));
  }
  call.sequence = mesh.sequence++;
  std::optional<std::string> failure;
  size_t pending = 0;
  asio::steady_timer timer(mesh.io);
  auto fail = [&](std::string reason) {
    if (failure) return;
    failure = std::move(reason);
    timer.cancel();
    mesh.shut_down_peers();
  };
  auto peer_failed = [&](const Transfer& t, const char* what, boost::system::error_code error) {
    fail(fmt::format("rank {}: {}: {} rank {}: {}", mesh.rank, op, what, t.peer,
                     describe_socket_error(error)));
  };
  auto finish_one = [&] {
    if (--pending == 0) timer.cancel();
  };

  // The handlers find their transfer by index: they run after this loop, from io.run() below.
  for (size_t i = 0; i < transfers.size(); ++i) {
    Transfer& t = transfers[i];
    tcp::socket& socket = *mesh.peers[static_cast<size_t>(t.peer)];
    if (t.has_send) {
      encode_head(call, t.send_bytes, t.send_head);
      const std::array<asio::const_buffer, 2> buffers = {
          asio::buffer(t.send_head), asio::const_buffer(t.send_data, t.send_bytes)};
      ++pending;
      asio::async_write(socket, buffers, [&, i](boost::system::error_code error, size_t) {
        if (error) peer_failed(transfers[i], "sending to", error);
        transfers[i].is_sent = !error;
        finish_one();
      });
    }
    if (t.has_recv) {
      ++pending;
      asio::async_read(
          socket, asio::buffer(t.recv_head), [&, i](boost::system::error_code error, size_t) {
            Transfer& in = transfers[i];
            if (error) {
              peer_failed(in, "receiving from", error);
              return finish_one();
            }
            if (std::string mismatch = check_head(mesh, call, in); !mismatch.empty()) {
              fail(fmt::format("rank {}: {}", mesh.rank, mismatch));
              return finish_one();
            }
            asio::async_read(*mesh.peers[static_cast<size_t>(in.peer)],
                             asio::mutable_buffer(in.recv_data, in.recv_bytes),
                             [&, i](boost::system::error_code body_error, size_t) {
                               if (body_error)
                                 peer_failed(transfers[i], "receiving from", body_error);
                               transfers[i].is_received = !body_error;
                               finish_one();
                             });
          });
    }
  }
  if (pending == 0) return Status::ok();

  timer.expires_after(mesh.collective_timeout);
  timer.async_wait([&](boost::system::error_code error) {
    if (error == asio::error::operation_aborted || pending == 0) return;
    // Name a peer whose frame has not come, else one that has not taken all of ours.
    auto late = std::find_if(transfers.begin(), transfers.end(),
                             [](const Transfer& t) { return t.has_recv && !t.is_received; });
    if (late == transfers.end()) {
      late = std::find_if(transfers.begin(), transfers.end(),
                          [](const Transfer& t) { return t.has_send && !t.is_sent; });
    }
    fail(fmt::format("rank {}: {}: waited over {} ms for rank {}", mesh.rank, op,
                     mesh.collective_timeout.count(), late->peer));
  });
  mesh.io.restart();
  mesh.io.run();  // returns once every handler above has run: no reference outlives this frame

  if (!failure) return Status::ok();
  // An abort closes the sockets under the transfers; say why rather than "connection closed".
  if (auto reason = mesh.abort_reason()) failure = aborted_message(mesh, op, *reason);
  mesh.failure = failure;
  return io_error(*failure);
}

// Fails this collective and every later one here and, by closing the connections, at the peers.
Status fail_group(SocketMesh& mesh, std::string reason) {
  reason = fmt::format("rank {}: {}", mesh.rank, reason);
  if (!mesh.failure) mesh.failure = reason;
  mesh.shut_down_peers();
  return internal_error(std::move(reason));
}

// Uninitialized: every byte is received before it is read.
std::unique_ptr<char[]> peer_buffer(size_t bytes) {
  return std::make_unique_for_overwrite<char[]>(bytes);
}

// Where the peers' tensors land when they cannot go straight to the output: one slot per peer.
size_t slot_of(const SocketMesh& mesh, int peer) {
  return static_cast<size_t>(peer < mesh.rank ? peer : peer - 1);
}

}  // namespace

Expected<std::unique_ptr<SocketCommunicator>> SocketCommunicator::connect(
    std::unique_ptr<SocketListener> listener, int rank, std::vector<std::string> endpoints,
    std::chrono::milliseconds connect_timeout, std::chrono::milliseconds collective_timeout) {
  const auto size = static_cast<int>(endpoints.size());
  if (!listener) return invalid_argument("SocketCommunicator::connect: no listener");
  if (rank < 0 || rank >= size) {
    return invalid_argument(fmt::format(
        "SocketCommunicator::connect: rank {} is not a rank of the {} endpoints", rank, size));
  }
  const auto deadline = std::chrono::steady_clock::now() + connect_timeout;
  SocketListener::State& state = *listener->state_;
  auto mesh = std::make_unique<SocketMesh>(std::move(listener), state.io, state.acceptor, rank,
                                           size, collective_timeout);
  const std::string context = fmt::format("rank {} of a TCP group of {}", rank, size);

  // Lower ranks first. This never waits for a peer's code to run: the kernel completes the
  // connection into the listen backlog, so the ranks' set-ups cannot wait on each other in a
  // cycle.
  for (int peer = 0; peer < rank; ++peer) {
    const std::string where = fmt::format("{}: connecting to rank {}", context, peer);
    auto host_port = split_host_port(endpoints[static_cast<size_t>(peer)]);
    if (!host_port) return host_port.error().with_context(where);
    auto socket = connect_tcp(mesh->io, host_port->first, host_port->second, deadline);
    if (!socket) return socket.error().with_context(where);
    LOCUS_RETURN_IF_ERROR(write_frame(*socket, encode_hello(rank, size)).with_context(where));
    mesh->peers[static_cast<size_t>(peer)].emplace(std::move(*socket));
  }
  LOCUS_RETURN_IF_ERROR(Handshake(*mesh, deadline).run());
  boost::system::error_code ignored;
  mesh->acceptor.close(ignored);
  for (int peer = 0; peer < size; ++peer) {
    if (auto& socket = mesh->peers[static_cast<size_t>(peer)])
      mesh->native_handles[static_cast<size_t>(peer)] = socket->native_handle();
  }
  return std::unique_ptr<SocketCommunicator>(new SocketCommunicator(std::move(mesh)));
}

SocketCommunicator::SocketCommunicator(std::unique_ptr<SocketMesh> mesh) : mesh_(std::move(mesh)) {}
SocketCommunicator::~SocketCommunicator() = default;

int SocketCommunicator::rank() const {
  return mesh_->rank;
}
int SocketCommunicator::size() const {
  return mesh_->size;
}
std::string SocketCommunicator::description() const {
  return fmt::format("TCP group of {} (rank {})", mesh_->size, mesh_->rank);
}

void SocketCommunicator::abort(const std::string& reason) {
  std::lock_guard lock(mesh_->abort_mutex);
  if (mesh_->aborted) return;
  mesh_->aborted = reason;
  // The reason is set before the sockets close, so the failing transfers find it.
  for (int handle : mesh_->native_handles) {
    if (handle >= 0) ::shutdown(handle, SHUT_RDWR);
  }
}

Status SocketCommunicator::do_all_reduce_sum(Tensor& t) {
  // Every rank receives every peer's whole tensor and sums all of them in rank order: more
  // bytes than a ring, but each rank does the very additions FakeGroup does, hence its bits.
  const size_t bytes = t.nbytes();
  auto received = peer_buffer(bytes * static_cast<size_t>(size() - 1));
  std::vector<Transfer> transfers;
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    char* slot = received.get() + slot_of(*mesh_, peer) * bytes;
    transfers.push_back(both_ways(peer, t.raw_data(), bytes, slot, bytes));
  }
  LOCUS_RETURN_IF_ERROR(exchange(*mesh_, {.op = Op::kAllReduceSum, .dtype = t.dtype()}, transfers));
  const auto n = static_cast<size_t>(t.numel());
  std::vector<float> sum(n, 0.0f);
  std::vector<float> scratch(t.dtype() == DType::kF32 ? 0 : n);
  for (int r = 0; r < size(); ++r) {
    const void* data = r == rank() ? t.raw_data() : received.get() + slot_of(*mesh_, r) * bytes;
    LOCUS_RETURN_IF_ERROR(add_rank(sum, scratch, t.dtype(), data));
  }
  return convert_from_f32(sum.data(), t.dtype(), t.raw_data(), n);
}

Status SocketCommunicator::do_all_gather(const Tensor& in, Tensor& out, int dim) {
  // in viewed as [outer, chunk] bytes; rank r's chunk lands at column r of out's [outer, size].
  int64_t outer = 1;
  for (int i = 0; i < dim; ++i)
    outer *= in.size(i);
  const size_t bytes = in.nbytes();
  const auto ranks = static_cast<size_t>(size());
  auto* dst = static_cast<char*>(out.raw_data());
  // Gathering along dim 0 (or below size-1 dims) places each rank's bytes in one piece, so
  // they are received straight into out.
  const bool is_direct = outer == 1;
  auto received = peer_buffer(is_direct ? 0 : bytes * (ranks - 1));
  auto part_of = [&](int r) -> char* {
    if (is_direct) return dst + static_cast<size_t>(r) * bytes;
    return received.get() + slot_of(*mesh_, r) * bytes;
  };
  std::vector<Transfer> transfers;
  for (int peer = 0; peer < size(); ++peer) {
    if (peer != rank())
      transfers.push_back(both_ways(peer, in.raw_data(), bytes, part_of(peer), bytes));
  }
  LOCUS_RETURN_IF_ERROR(
      exchange(*mesh_, {.op = Op::kAllGather, .dtype = in.dtype(), .arg = dim}, transfers));
  if (is_direct) {
    if (bytes > 0) std::memcpy(part_of(rank()), in.raw_data(), bytes);
    return Status::ok();
  }
  const size_t chunk = bytes / static_cast<size_t>(std::max<int64_t>(outer, 1));
  for (int r = 0; r < size(); ++r) {
    const char* src = r == rank() ? static_cast<const char*>(in.raw_data()) : part_of(r);
    for (int64_t o = 0; o < outer; ++o) {
      const auto row = static_cast<size_t>(o);
      std::memcpy(dst + (row * ranks + static_cast<size_t>(r)) * chunk, src + row * chunk, chunk);
    }
  }
  return Status::ok();
}

Status SocketCommunicator::do_reduce_scatter_sum(const Tensor& in, Tensor& out) {
  // Each peer gets only its part; the parts are summed in rank order as in all_reduce_sum.
  const size_t part_bytes = out.nbytes();
  const auto* parts = static_cast<const char*>(in.raw_data());
  auto received = peer_buffer(part_bytes * static_cast<size_t>(size() - 1));
  std::vector<Transfer> transfers;
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    transfers.push_back(both_ways(peer, parts + static_cast<size_t>(peer) * part_bytes, part_bytes,
                                  received.get() + slot_of(*mesh_, peer) * part_bytes, part_bytes));
  }
  LOCUS_RETURN_IF_ERROR(
      exchange(*mesh_, {.op = Op::kReduceScatterSum, .dtype = in.dtype()}, transfers));
  const auto n = static_cast<size_t>(out.numel());
  std::vector<float> sum(n, 0.0f);
  std::vector<float> scratch(in.dtype() == DType::kF32 ? 0 : n);
  for (int r = 0; r < size(); ++r) {
    const void* data = r == rank() ? parts + static_cast<size_t>(r) * part_bytes
                                   : received.get() + slot_of(*mesh_, r) * part_bytes;
    LOCUS_RETURN_IF_ERROR(add_rank(sum, scratch, in.dtype(), data));
  }
  return convert_from_f32(sum.data(), out.dtype(), out.raw_data(), n);
}

Status SocketCommunicator::do_broadcast(Tensor& t, int root) {
  // Received straight into t: a failed broadcast leaves t undefined, like the group.
  std::vector<Transfer> transfers;
  const size_t bytes = t.nbytes();
  if (rank() == root) {
    for (int peer = 0; peer < size(); ++peer) {
      if (peer != rank()) transfers.push_back(send_only(peer, t.raw_data(), bytes));
    }
  } else {
    transfers.push_back(receive_only(root, t.raw_data(), bytes));
  }
  return exchange(*mesh_, {.op = Op::kBroadcast, .dtype = t.dtype(), .arg = root}, transfers);
}

Status SocketCommunicator::do_all_to_all(const Tensor& in, std::span<const int64_t> send_counts,
                                         Tensor& out, std::span<const int64_t> recv_counts) {
  // From the row shape, not from in's bytes: a rank may send no rows and still receive some.
  Dims row = in.shape();
  row[0] = 1;
  const size_t row_bytes = dtype_bytes(in.dtype(), static_cast<size_t>(shape_numel(row)));
  const auto* src = static_cast<const char*>(in.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  std::vector<Transfer> transfers;
  size_t sent = 0;
  size_t received = 0;
  for (int peer = 0; peer < size(); ++peer) {
    const size_t send_bytes =
        static_cast<size_t>(send_counts[static_cast<size_t>(peer)]) * row_bytes;
    const size_t recv_bytes =
        static_cast<size_t>(recv_counts[static_cast<size_t>(peer)]) * row_bytes;
    if (peer == rank()) {
      if (send_bytes != recv_bytes) {
        // The peers are about to wait for this rank's frames: fail them too.
        return fail_group(*mesh_, fmt::format("all_to_all: rank {} sends {} rows to rank {}, "
                                              "which expects {}",
                                              rank(), send_counts[static_cast<size_t>(peer)],
                                              rank(), recv_counts[static_cast<size_t>(peer)]));
      }
      if (send_bytes > 0) std::memcpy(dst + received, src + sent, send_bytes);
    } else {
      // A frame even for no rows, so that every pair exchanges one frame per collective.
      Transfer t = both_ways(peer, src + sent, send_bytes, dst + received, recv_bytes);
      t.row_bytes = row_bytes;
      transfers.push_back(t);
    }
    sent += send_bytes;
    received += recv_bytes;
  }
  const Call call = {
      .op = Op::kAllToAll, .dtype = in.dtype(), .arg = static_cast<int64_t>(row_bytes)};
  return exchange(*mesh_, call, transfers);
}

}  // namespace locus

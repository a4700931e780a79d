// A group of ranks in different processes (different nodes) that run collectives on host tensors
// over TCP, as gloo does for PyTorch: what CPU tensor parallelism across nodes runs with. Every
// pair of ranks holds one connection (a full mesh); a collective sends at most one frame to and
// receives at most one frame from each peer, all at once on the calling thread, so two peers
// sending large buffers to each other cannot deadlock. Sums run in rank order in f32, as in
// FakeGroup, so every rank gets bit-identical results and the same bits as the in-process group.
//
// Set-up takes two steps so that someone else (a launcher, a rendezvous store) can exchange the
// endpoints in between: SocketListener::listen() on every rank, publish "host:port", then
// SocketCommunicator::connect() with every rank's endpoint. Communicators share nothing, so the
// ranks of one process may connect and run from different threads.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace locus {

struct SocketMesh;  // the connections and their state, in socket_communicator.cc

class SocketListener {
 public:
  // Listens on an ephemeral port of `bind_host` ("0.0.0.0" for every interface, "127.0.0.1").
  static Expected<std::unique_ptr<SocketListener>> listen(const std::string& bind_host);
  ~SocketListener();

  // The port to publish with this node's address.
  int port() const;

 private:
  friend class SocketCommunicator;
  struct State;
  explicit SocketListener(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class SocketCommunicator final : public Communicator {
 public:
  // Builds the mesh: connects to every lower rank and accepts a connection from every higher
  // one, each introducing itself with its rank and the group size (a mismatch fails on both
  // ends). `endpoints` holds every rank's "host:port", size() of them. Set-up fails after
  // `connect_timeout`; each later collective fails when it waits longer than
  // `collective_timeout` for a peer.
  static Expected<std::unique_ptr<SocketCommunicator>> connect(
      std::unique_ptr<SocketListener> listener, int rank, std::vector<std::string> endpoints,
      std::chrono::milliseconds connect_timeout,
      std::chrono::milliseconds collective_timeout = std::chrono::minutes(2));
  ~SocketCommunicator() override;

  int rank() const override;
  int size() const override;
  // "TCP group of 4 (rank 1)".
  std::string description() const override;
  Device device() const override { return Device::cpu(); }

  // A collective that fails (timeout, lost peer, disagreeing calls, abort) leaves its outputs
  // undefined and the group unusable: this rank closes its connections, so its peers fail too,
  // and every later collective fails at once with the first error.
  //
  // Callable from any thread while the communicator lives: fails the collective now running and
  // every later one with `reason`, and closes the connections so that the peers fail too
  // instead of waiting for this rank.
  void abort(const std::string& reason);

 protected:
  Status do_all_reduce_sum(Tensor& t) override;
  Status do_all_gather(const Tensor& in, Tensor& out, int dim) override;
  Status do_reduce_scatter_sum(const Tensor& in, Tensor& out) override;
  Status do_broadcast(Tensor& t, int root) override;
  Status do_all_to_all(const Tensor& in, std::span<const int64_t> send_counts, Tensor& out,
                       std::span<const int64_t> recv_counts) override;

 private:
  explicit SocketCommunicator(std::unique_ptr<SocketMesh> mesh);

  std::unique_ptr<SocketMesh> mesh_;
};

}  // namespace locus

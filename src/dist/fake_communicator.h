// An in-process group of ranks, one thread each, over host memory: what the CPU tests use to
// check that TP/EP ranks reproduce one rank's logits, and what CPU serving runs with
// --tensor-parallel-size. Collectives rendezvous on a shared barrier and read the peers' buffers
// directly. Sums run in rank order in f32, so every rank gets bit-identical results.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace locus {

class FakeGroup : public std::enable_shared_from_this<FakeGroup> {
 public:
  // A collective that waits longer than `timeout` for its peers fails on every rank that waits.
  static std::shared_ptr<FakeGroup> create(
      int size, std::chrono::milliseconds timeout = std::chrono::minutes(2));

  int size() const { return size_; }
  // Rank `rank`'s end; the group lives as long as any of them.
  std::unique_ptr<Communicator> communicator(int rank);
  // Fails every collective now waiting and every later one with `reason`: a rank that cannot go
  // on calls this so that its peers do not wait for it.
  void abort(const std::string& reason);

 private:
  friend class FakeCommunicator;
  struct Post {
    const char* op = nullptr;
    const void* data = nullptr;
    DType dtype = DType::kF32;
    Dims shape;
    int arg = 0;  // dim or root
    // all_to_all: the row counts to and from each rank (copies: a failing rank returns while
    // its peers may still be reading its post).
    std::vector<int64_t> send_counts;
    std::vector<int64_t> recv_counts;
  };

  FakeGroup(int size, std::chrono::milliseconds timeout)
      : size_(size), timeout_(timeout), posts_(static_cast<size_t>(size)) {}
  // Blocks until every rank has arrived (the barrier is reusable), or fails when the group is
  // aborted or the wait times out.
  Status arrive_and_wait(int rank);
  // Publishes this rank's argument and waits for every rank's; checks they agree (every rank
  // checks every pair, so all reach the same verdict before any reads a peer's data).
  Status exchange(int rank, Post post);

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::optional<std::string> aborted_;
  std::vector<Post> posts_;
};

}  // namespace locus

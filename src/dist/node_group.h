// The nodes of one multi-node run and the host links between them (vLLM's --nnodes,
// --node-rank, --master-addr, --master-port). Node 0 runs the scheduler, the tokenizer and the
// API server; every other node is headless: it loads its ranks' shards and runs each step that
// node 0 sends it. The links carry set-up (the rendezvous: a check that every node runs the same
// model and parallel layout, then whatever the ranks' communicators need to find each other,
// such as NCCL's unique id or the TCP group's endpoints) and, per step, one command frame out
// and one reply back. The collectives themselves run over the ranks' communicators, not here.
//
// Each worker has two connections to node 0: commands (request / reply, used by one thread at
// a time) and aborts (node 0 writes a reason when a rank failed, so that a worker stuck in a
// collective is released even while its command thread is busy).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "dist/tcp_util.h"  // Asio, included the way Boost 1.74 needs

namespace locus {

struct NodeGroupOptions {
  std::string master_addr = "127.0.0.1";
  int master_port = 29501;
  int nnodes = 1;
  int node_rank = 0;
  // What every node must agree on (model, parallel layout, load format...): node 0 refuses a
  // worker whose fingerprint differs, naming both.
  std::string fingerprint;
  // How long node 0 waits for the workers and a worker for node 0.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
};

class NodeGroup {
 public:
  // Node 0 listens on master_port until every worker has joined; a worker connects to
  // master_addr:master_port (retrying until node 0 listens or the timeout passes).
  static Expected<std::unique_ptr<NodeGroup>> create(const NodeGroupOptions& options);
  ~NodeGroup();

  int node_rank() const { return options_.node_rank; }
  int nnodes() const { return options_.nnodes; }
  // This node's address on its link to node 0 (node 0: the address the workers reached): the
  // host its ranks' peers on other nodes can connect to.
  const std::string& local_address() const { return local_address_; }

  // Every node's `mine`, in node order (node 0 gathers, then sends the list to every worker).
  Expected<std::vector<std::string>> all_gather(const std::string& mine);

  // Node 0: one frame to every worker; then node k's reply (k in [1, nnodes)). Replies of
  // different nodes may be read on different threads at once.
  Status send_to_workers(std::string_view frame);
  Expected<std::string> read_reply(int node);
  // Node 0, any thread, once: every worker's abort handler runs with `reason`.
  void abort_workers(const std::string& reason);

  // Workers: the next command from node 0, and its reply.
  Expected<std::string> read_command();
  Status reply(std::string_view frame);
  // Workers: runs `handler` (on a thread of the group) when node 0 aborts the run or its link
  // drops. Set once, before the first command.
  void on_abort(std::function<void(const std::string&)> handler);

 private:
  using Socket = boost::asio::ip::tcp::socket;
  explicit NodeGroup(NodeGroupOptions options) : options_(std::move(options)) {}
  Status accept_workers();
  Status join_leader();
  Status unavailable_workers(int joined) const;
  void close_all();

  NodeGroupOptions options_;
  boost::asio::io_context io_;
  std::string local_address_;
  // Node 0: workers[k - 1] is node k's. Workers: element 0 is the link to node 0.
  std::vector<std::unique_ptr<Socket>> commands_;
  std::vector<std::unique_ptr<Socket>> aborts_;
  std::mutex abort_mutex_;
  bool aborted_ = false;  // node 0: abort_workers ran
  std::atomic<bool> closing_{false};
  std::thread abort_listener_;  // workers
};

}  // namespace locus

#include "dist/node_group.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/socket.h>

#include <bit>
#include <cstring>

#include "dist/tcp_util.h"

namespace locus {
namespace {

using boost::asio::ip::tcp;

constexpr std::string_view kProtocol = "locus-node-1";

// A list of strings in one frame: u64 count, then u64 length + bytes each.
std::string encode_list(const std::vector<std::string>& items) {
  std::string out;
  auto put = [&](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(items.size());
  for (const std::string& s : items) {
    put(s.size());
    out += s;
  }
  return out;
}

Expected<std::vector<std::string>> decode_list(std::string_view in, std::string_view what) {
  auto get = [&](uint64_t& v) {
    if (in.size() < sizeof v) return false;
    std::memcpy(&v, in.data(), sizeof v);
    in.remove_prefix(sizeof v);
    return true;
  };
  uint64_t n = 0;
  if (!get(n) || n > in.size()) return parse_error(fmt::format("{}: malformed frame", what));
  std::vector<std::string> out;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len = 0;
    if (!get(len) || len > in.size()) return parse_error(fmt::format("{}: malformed frame", what));
    out.emplace_back(in.substr(0, len));
    in.remove_prefix(len);
  }
  return out;
}

// What a worker says first on each of its links. The byte-order mark lets node 0 refuse a node
// whose step frames it could not read.
std::string hello(const NodeGroupOptions& o, std::string_view link) {
  return encode_list({std::string(kProtocol), std::string(link), std::to_string(o.node_rank),
                      std::to_string(o.nnodes), o.fingerprint,
                      std::endian::native == std::endian::little ? "le" : "be"});
}

}  // namespace

Expected<std::unique_ptr<NodeGroup>> NodeGroup::create(const NodeGroupOptions& options) {
  if (options.nnodes < 2) {
    return invalid_argument(
        fmt::format("--nnodes {}: a node group has at least 2", options.nnodes));
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    return invalid_argument(fmt::format("--node-rank {} is not in [0, --nnodes {})",
                                        options.node_rank, options.nnodes));
  }
  if (options.master_port <= 0 || options.master_port > 65535) {
    return invalid_argument(fmt::format("--master-port {} is not a TCP port", options.master_port));
  }
  std::unique_ptr<NodeGroup> group(new NodeGroup(options));
  Status s = options.node_rank == 0 ? group->accept_workers() : group->join_leader();
  if (!s.is_ok()) {
    return std::move(s).with_context(fmt::format("node {} of {} (master {}:{})", options.node_rank,
                                                 options.nnodes, options.master_addr,
                                                 options.master_port));
  }
  return group;
}

Status NodeGroup::accept_workers() {
  const int workers = options_.nnodes - 1;
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  tcp::acceptor acceptor(io_);
  boost::system::error_code ec;
  const tcp::endpoint bind(tcp::v4(), static_cast<unsigned short>(options_.master_port));
  acceptor.open(bind.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(bind, ec);
  if (!ec) acceptor.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return io_error(
        fmt::format("cannot listen on port {}: {}", options_.master_port, ec.message()));
  }
  commands_.resize(static_cast<size_t>(workers));
  aborts_.resize(static_cast<size_t>(workers));
  for (int joined = 0; joined < 2 * workers;) {
    auto socket = std::make_unique<Socket>(io_);
    bool done = false;
    acceptor.async_accept(*socket, [&](const boost::system::error_code& e) {
      ec = e;
      done = true;
    });
    io_.restart();
    io_.run_until(deadline);
    if (!done) {
      acceptor.cancel();
      io_.restart();
      io_.run();
      return unavailable_workers(joined);
    }
    if (ec) return io_error(fmt::format("accepting a worker: {}", ec.message()));
    socket->set_option(tcp::no_delay(true), ec);
    LOCUS_ASSIGN_OR_RETURN(std::string frame, read_frame(*socket));
    LOCUS_ASSIGN_OR_RETURN(std::vector<std::string> h, decode_list(frame, "a worker's hello"));
    const std::string mine = hello(options_, h.size() > 1 ? h[1] : "");
    LOCUS_ASSIGN_OR_RETURN(std::vector<std::string> want, decode_list(mine, "hello"));
    std::string problem;
    int node = -1;
    if (h.size() != want.size() || h[0] != kProtocol || (h[1] != "command" && h[1] != "abort")) {
      problem = "it does not speak this locus version's node protocol";
    } else if (h[3] != want[3]) {
      problem = fmt::format("it has --nnodes {}, this node {}", h[3], want[3]);
    } else if (h[5] != want[5]) {
      problem = "its byte order differs from this node's";
    } else if (h[4] != want[4]) {
      problem = fmt::format("it runs [{}], this node [{}]", h[4], want[4]);
    } else {
      node = std::atoi(h[2].c_str());
      auto& slot = (h[1] == "command" ? commands_ : aborts_);
      if (node < 1 || node >= options_.nnodes) {
        problem = fmt::format("its --node-rank {} is not in [1, {})", h[2], options_.nnodes);
      } else if (slot[static_cast<size_t>(node - 1)]) {
        problem =
            fmt::format("node {} joined twice (two workers with --node-rank {}?)", node, node);
      }
    }
    if (!problem.empty()) {
      (void)write_frame(*socket, encode_list({"error", problem}));
      return invalid_argument(fmt::format("a worker cannot join: {}", problem));
    }
    if (h[1] == "command") {
      LOCUS_RETURN_IF_ERROR(write_frame(*socket, encode_list({"ok"})));
      local_address_ = socket->local_endpoint(ec).address().to_string();
      commands_[static_cast<size_t>(node - 1)] = std::move(socket);
    } else {
      aborts_[static_cast<size_t>(node - 1)] = std::move(socket);
    }
    ++joined;
  }
  return Status::ok();
}

Status NodeGroup::unavailable_workers(int joined) const {
  std::vector<int> missing;
  for (size_t k = 0; k < commands_.size(); ++k) {
    if (!commands_[k] || !aborts_[k]) missing.push_back(static_cast<int>(k) + 1);
  }
  return resource_exhausted(fmt::format(
      "waited {} s for the workers: {} of {} links open; nodes {} have not joined (start them "
      "with --nnodes {} --node-rank K --master-addr <this host> --master-port {})",
      std::chrono::duration_cast<std::chrono::seconds>(options_.timeout).count(), joined,
      2 * (options_.nnodes - 1), fmt::join(missing, ", "), options_.nnodes, options_.master_port));
}

Status NodeGroup::join_leader() {
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  for (const char* link : {"command", "abort"}) {
    LOCUS_ASSIGN_OR_RETURN(Socket socket,
                           connect_tcp(io_, options_.master_addr, options_.master_port, deadline));
    LOCUS_RETURN_IF_ERROR(write_frame(socket, hello(options_, link)));
    auto owned = std::make_unique<Socket>(std::move(socket));
    if (std::string_view(link) == "command") {
      LOCUS_ASSIGN_OR_RETURN(std::string frame, read_frame(*owned));
      LOCUS_ASSIGN_OR_RETURN(std::vector<std::string> answer,
                             decode_list(frame, "node 0's answer"));
      if (answer.empty() || answer[0] != "ok") {
        return invalid_argument(fmt::format("node 0 refused this node: {}",
                                            answer.size() > 1 ? answer[1] : "no reason given"));
      }
      boost::system::error_code ec;
      local_address_ = owned->local_endpoint(ec).address().to_string();
      commands_.push_back(std::move(owned));
    } else {
      aborts_.push_back(std::move(owned));
    }
  }
  return Status::ok();
}

NodeGroup::~NodeGroup() {
  close_all();
}

void NodeGroup::close_all() {
  closing_.store(true);
  // shutdown(2) on the descriptors, not Asio's close: another thread may be reading.
  for (auto* links : {&commands_, &aborts_}) {
    for (auto& s : *links) {
      if (s) ::shutdown(s->native_handle(), SHUT_RDWR);
    }
  }
  if (abort_listener_.joinable()) abort_listener_.join();
}

Expected<std::vector<std::string>> NodeGroup::all_gather(const std::string& mine) {
  if (node_rank() != 0) {
    LOCUS_RETURN_IF_ERROR(write_frame(*commands_.front(), mine));
    LOCUS_ASSIGN_OR_RETURN(std::string frame, read_frame(*commands_.front()));
    return decode_list(frame, "node 0's gathered list");
  }
  std::vector<std::string> all{mine};
  for (auto& s : commands_) {
    LOCUS_ASSIGN_OR_RETURN(std::string frame, read_frame(*s));
    all.push_back(std::move(frame));
  }
  LOCUS_RETURN_IF_ERROR(send_to_workers(encode_list(all)));
  return all;
}

Status NodeGroup::send_to_workers(std::string_view frame) {
  for (size_t k = 0; k < commands_.size(); ++k) {
    if (Status s = write_frame(*commands_[k], frame); !s.is_ok()) {
      return std::move(s).with_context(fmt::format("sending to node {}", k + 1));
    }
  }
  return Status::ok();
}

Expected<std::string> NodeGroup::read_reply(int node) {
  auto frame = read_frame(*commands_[static_cast<size_t>(node - 1)]);
  if (!frame) return frame.status().with_context(fmt::format("node {}'s reply", node));
  return frame;
}

void NodeGroup::abort_workers(const std::string& reason) {
  std::lock_guard lock(abort_mutex_);
  if (aborted_ || node_rank() != 0) return;
  aborted_ = true;
  for (auto& s : aborts_) {
    if (s) (void)write_frame(*s, reason);
  }
}

Expected<std::string> NodeGroup::read_command() {
  return read_frame(*commands_.front());
}

Status NodeGroup::reply(std::string_view frame) {
  return write_frame(*commands_.front(), frame);
}

void NodeGroup::on_abort(std::function<void(const std::string&)> handler) {
  if (node_rank() == 0 || abort_listener_.joinable()) return;
  abort_listener_ = std::thread([this, handler = std::move(handler)] {
    auto reason = read_frame(*aborts_.front());
    if (closing_.load()) return;
    handler(reason ? fmt::format("node 0 aborted the run: {}", *reason)
                   : fmt::format("the link to node 0 dropped: {}", reason.status().message()));
  });
}

}  // namespace locus

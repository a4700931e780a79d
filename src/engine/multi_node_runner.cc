#include "engine/multi_node_runner.h"

#include <fmt/format.h>

#include <cstring>
#include <thread>

#include "core/logging.h"
#include "engine/batch_codec.h"

namespace locus {
namespace {

// A reply: one byte of ErrorCode (kOk = the payload follows), then the payload or the message.
std::string encode_reply(const Status& s, std::string_view payload = {}) {
  std::string out(1, static_cast<char>(s.code()));
  out += s.is_ok() ? payload : std::string_view(s.message());
  return out;
}

Expected<std::string> decode_reply(std::string_view frame) {
  if (frame.empty()) return parse_error("an empty reply");
  const auto code = static_cast<ErrorCode>(static_cast<uint8_t>(frame[0]));
  frame.remove_prefix(1);
  if (code == ErrorCode::kOk) return std::string(frame);
  return Status(code, std::string(frame));
}

std::string command_frame(NodeCommand command, std::string_view payload) {
  std::string out(1, static_cast<char>(command));
  out += payload;
  return out;
}

std::string encode_i32(int32_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 4);
}

}  // namespace

MultiNodeRunner::MultiNodeRunner(std::unique_ptr<NodeGroup> nodes,
                                 std::unique_ptr<ParallelModelRunner> local,
                                 std::function<void(const std::string&)> abort_local)
    : nodes_(std::move(nodes)), local_(std::move(local)), abort_local_(std::move(abort_local)) {}

MultiNodeRunner::~MultiNodeRunner() {
  // No reply to wait for: a worker that is gone already cannot be helped, and one that is alive
  // exits on the command (or on the link closing right after).
  (void)nodes_->send_to_workers(command_frame(NodeCommand::kShutdown, {}));
}

void MultiNodeRunner::abort(const std::string& reason) {
  nodes_->abort_workers(reason);
  abort_local_(reason);
}

Expected<std::vector<std::string>> MultiNodeRunner::run_on_every_node(
    NodeCommand command, std::string payload, const std::function<Status()>& here) {
  LOCUS_RETURN_IF_ERROR(nodes_->send_to_workers(command_frame(command, payload)));
  const int workers = nodes_->nnodes() - 1;
  std::vector<Expected<std::string>> replies(static_cast<size_t>(workers),
                                             internal_error("no reply"));
  // Workers whose link broke (the process died or the network went) rather than replying.
  std::vector<char> link_lost(static_cast<size_t>(workers), 0);
  // One reader per worker: a worker that fails while another waits in a collective for it
  // must be heard at once, so that the abort releases the waiting ones (NCCL would not).
  // A thread per step costs tens of microseconds, small beside a step that crosses nodes.
  std::vector<std::thread> readers;
  for (int k = 1; k <= workers; ++k) {
    readers.emplace_back([this, k, &replies, &link_lost] {
      auto& slot = replies[static_cast<size_t>(k - 1)];
      auto frame = nodes_->read_reply(k);
      link_lost[static_cast<size_t>(k - 1)] = frame ? 0 : 1;
      slot = frame ? decode_reply(*frame) : Expected<std::string>(frame.status());
      if (!slot) abort(fmt::format("node {} failed: {}", k, slot.status().to_string()));
    });
  }
  Status mine = here();
  if (!mine.is_ok()) abort(fmt::format("node 0 failed: {}", mine.to_string()));
  for (std::thread& t : readers)
    t.join();
  // A lost worker is the cause of whatever else failed: this node's collectives with its ranks
  // fail too ("receiving from rank 2: the peer closed the connection"), and which of the two
  // is seen first is a race. So a lost link is reported first, then this node's own failure,
  // then a worker's error reply.
  for (int k = 1; k <= workers; ++k) {
    if (link_lost[static_cast<size_t>(k - 1)]) {
      return replies[static_cast<size_t>(k - 1)].status().with_context(
          fmt::format("node {} is gone", k));
    }
  }
  if (!mine.is_ok()) return mine;
  std::vector<std::string> out;
  for (int k = 1; k <= workers; ++k) {
    auto& r = replies[static_cast<size_t>(k - 1)];
    if (!r) return r.status().with_context(fmt::format("node {}", k));
    out.push_back(std::move(*r));
  }
  return out;
}

Status MultiNodeRunner::initialize_kv_cache(int num_blocks) {
  return run_on_every_node(NodeCommand::kInitializeKvCache, encode_i32(num_blocks),
                           [&] { return local_->initialize_kv_cache(num_blocks); })
      .status();
}

Expected<Tensor> MultiNodeRunner::execute(const ModelInputBatch& batch) {
  LOCUS_RETURN_IF_ERROR(run_on_every_node(NodeCommand::kExecute, encode_batch(batch), [&] {
                          auto logits = local_->execute(batch);
                          if (!logits) return logits.status();
                          logits_ = std::move(*logits);
                          return Status::ok();
                        }).status());
  return std::move(logits_);
}

Status serve_worker_node(NodeGroup& nodes, ParallelModelRunner& local,
                         const std::function<void(const std::string&)>& abort_local,
                         const WorkerHooks& hooks) {
  nodes.on_abort([&abort_local](const std::string& reason) {
    log::error("{}", reason);
    abort_local(reason);
  });
  while (true) {
    auto frame = nodes.read_command();
    if (!frame) {
      return frame.status().with_context("node 0's link closed without a shutdown");
    }
    if (frame->empty()) return parse_error("node 0 sent an empty command");
    const auto command = static_cast<NodeCommand>(static_cast<uint8_t>((*frame)[0]));
    const std::string_view payload = std::string_view(*frame).substr(1);
    Status s;
    std::string answer;
    switch (command) {
      case NodeCommand::kShutdown:
        return Status::ok();
      case NodeCommand::kInitializeKvCache: {
        int32_t blocks = 0;
        if (payload.size() != sizeof blocks) {
          s = parse_error("initialize_kv_cache: a malformed block count");
          break;
        }
        std::memcpy(&blocks, payload.data(), sizeof blocks);
        s = local.initialize_kv_cache(blocks);
        break;
      }
      case NodeCommand::kExecute: {
        auto batch = decode_batch(payload);
        if (!batch) {
          s = batch.status();
          break;
        }
        s = local.execute(*batch).status();
        break;
      }
      case NodeCommand::kPlanMemory: {
        if (!hooks.plan_memory) {
          s = unsupported("this worker has no device memory to plan");
          break;
        }
        auto plan = hooks.plan_memory(payload);
        if (plan) answer = std::move(*plan);
        s = plan.status();
        break;
      }
      default:
        s = parse_error(fmt::format("node 0 sent an unknown command {}",
                                    static_cast<int>(static_cast<uint8_t>((*frame)[0]))));
    }
    LOCUS_RETURN_IF_ERROR(nodes.reply(encode_reply(s, answer)));
  }
}

}  // namespace locus

#include "engine/multi_node_loader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/logging.h"
#include "dist/socket_communicator.h"
#include "engine/rank_loader.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/runtime/nccl_communicator.h"
#include "engine/gpu_memory_plan.h"
#endif

namespace locus {
namespace {

// What the nodes must agree on to split one model the same way: refusing a mismatch at join
// time beats a run whose ranks hold shards of different models.
std::string fingerprint(const ModelEngineOptions& o, const ModelConfig& c) {
  return fmt::format(
      "{}, {} layers, hidden {}, vocab {}, {} experts; --tensor-parallel-size {}{} ({}); "
      "--nnodes {}; weights {} (seed {}); --block-size {}; --device {}",
      c.architecture_name, c.num_hidden_layers, c.hidden_size, c.vocab_size, c.moe.num_experts,
      o.tensor_parallel_size, o.enable_expert_parallel ? " --enable-expert-parallel" : "",
      o.expert_placement, o.nnodes, static_cast<int>(o.load_format), o.weight_seed, o.block_size,
      o.device);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(sep, start), s.size());
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// This node's ranks, joined to the other nodes' over communicators that span the run.
struct NodeRanks {
  std::unique_ptr<NodeGroup> nodes;
  ParallelLoad load;  // the runner over this node's ranks, and rank `first`'s config
  std::function<void(const std::string&)> abort_local;
  // NodeRanks' runner over this node's ranks, from their communicators (rank `first` first).
  Status make_runner(std::vector<std::unique_ptr<Communicator>> comms,
                     std::vector<std::unique_ptr<LocalModelRunner>> ranks,
                     std::function<Status(int)> bind_rank = {}) {
    NodeGroup* group = nodes.get();
    auto local = abort_local;
    LOCUS_ASSIGN_OR_RETURN(load.runner, ParallelModelRunner::create(
                                            std::move(comms), std::move(ranks),
                                            [group, local](const std::string& reason) {
                                              // Node 0 tells the workers; a worker's
                                              // failure reaches node 0 in its reply, and
                                              // node 0 tells the rest.
                                              group->abort_workers(reason);
                                              local(reason);
                                            },
                                            std::move(bind_rank)));
    return Status::ok();
  }
};

// The TCP group for CPU ranks: every rank listens, the nodes swap their ranks' endpoints over
// the node links, and the ranks connect into one mesh.
Expected<std::vector<std::unique_ptr<SocketCommunicator>>> connect_cpu_ranks(
    NodeGroup& nodes, int world, int first, int local, std::chrono::milliseconds timeout) {
  std::vector<std::unique_ptr<SocketListener>> listeners;
  std::vector<std::string> mine;
  for (int i = 0; i < local; ++i) {
    LOCUS_ASSIGN_OR_RETURN(auto listener, SocketListener::listen("0.0.0.0"));
    mine.push_back(fmt::format("{}:{}", nodes.local_address(), listener->port()));
    listeners.push_back(std::move(listener));
  }
  LOCUS_ASSIGN_OR_RETURN(std::vector<std::string> per_node,
                         nodes.all_gather(fmt::format("{}", fmt::join(mine, ","))));
  std::vector<std::string> endpoints;
  for (const std::string& n : per_node) {
    for (std::string& e : split(n, ','))
      endpoints.push_back(std::move(e));
  }
  if (static_cast<int>(endpoints.size()) != world) {
    return internal_error(
        fmt::format("the nodes announced {} rank endpoints for {} ranks", endpoints.size(), world));
  }
  // Each rank accepts its higher peers while connecting to its lower ones: all at once.
  std::vector<Expected<std::unique_ptr<SocketCommunicator>>> made;
  for (int i = 0; i < local; ++i)
    made.emplace_back(internal_error("not connected"));
  std::vector<std::thread> threads;
  for (int i = 0; i < local; ++i) {
    threads.emplace_back([&, i] {
      made[static_cast<size_t>(i)] = SocketCommunicator::connect(
          std::move(listeners[static_cast<size_t>(i)]), first + i, endpoints, timeout,
          // As the in-process group's: a collective waits for the slowest rank's layer.
          std::chrono::minutes(10));
    });
  }
  for (std::thread& t : threads)
    t.join();
  std::vector<std::unique_ptr<SocketCommunicator>> out;
  for (int i = 0; i < local; ++i) {
    auto& m = made[static_cast<size_t>(i)];
    if (!m) return m.status().with_context(fmt::format("rank {}", first + i));
    out.push_back(std::move(*m));
  }
  return out;
}

// This node's CPU ranks over the TCP group that spans the nodes.
Status load_cpu_ranks(const ModelEngineOptions& options, int first, int local, NodeRanks& out) {
  LOCUS_ASSIGN_OR_RETURN(auto sockets, connect_cpu_ranks(*out.nodes, options.tensor_parallel_size,
                                                         first, local, options.node_join_timeout));
  std::vector<SocketCommunicator*> raw;
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::unique_ptr<LocalModelRunner>> ranks;
  for (int i = 0; i < local; ++i) {
    raw.push_back(sockets[static_cast<size_t>(i)].get());
    LOCUS_ASSIGN_OR_RETURN(ModelParallel parallel, model_parallel(options, raw.back(), nullptr));
    LOCUS_ASSIGN_OR_RETURN(
        auto runner,
        load_rank(options, make_cpu_backend(options, std::max(1, cpu_cores(options) / local)),
                  parallel, first + i, "tensor-parallel", out.load, first));
    ranks.push_back(std::move(runner));
    comms.push_back(std::move(sockets[static_cast<size_t>(i)]));
  }
  out.abort_local = [raw](const std::string& reason) {
    for (SocketCommunicator* c : raw)
      c->abort(reason);
  };
  return out.make_runner(std::move(comms), std::move(ranks));
}

#ifdef LOCUS_HAS_CUDA
// This node's GPU ranks, rank first + i on cuda:i, in one NCCL group across the nodes: node 0
// makes the unique id and the node links carry it (NCCL then finds its own transports).
Status load_gpu_ranks(const ModelEngineOptions& options, int first, int local, NodeRanks& out) {
  std::vector<std::unique_ptr<CudaBackend>> backends;
  std::vector<CudaBackend*> gpus;
  for (int i = 0; i < local; ++i) {
    CudaBackendOptions cuda;
    cuda.device_index = i;
    cuda.gpu_memory_utilization = options.gpu_memory_utilization;
    LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::create(cuda));
    gpus.push_back(b.get());
    backends.push_back(std::move(b));
  }
  std::string id;
  if (options.node_rank == 0) {
    LOCUS_ASSIGN_OR_RETURN(id, NcclCommunicator::unique_id());
  }
  LOCUS_ASSIGN_OR_RETURN(std::vector<std::string> ids, out.nodes->all_gather(id));
  LOCUS_ASSIGN_OR_RETURN(auto nccl, NcclCommunicator::create_ranks(
                                        ids.front(), options.tensor_parallel_size, first, gpus));
  std::vector<NcclCommunicator*> raw;
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::unique_ptr<LocalModelRunner>> ranks;
  for (int i = 0; i < local; ++i) {
    const auto u = static_cast<size_t>(i);
    LOCUS_RETURN_IF_ERROR(gpus[u]->make_current());
    raw.push_back(nccl[u].get());
    LOCUS_ASSIGN_OR_RETURN(ModelParallel parallel, model_parallel(options, raw.back(), nullptr));
    LOCUS_ASSIGN_OR_RETURN(auto runner, load_rank(options, std::move(backends[u]), parallel,
                                                  first + i, "tensor-parallel", out.load, first));
    ranks.push_back(std::move(runner));
    comms.push_back(std::move(nccl[u]));
  }
  out.abort_local = [raw](const std::string& reason) {
    log::error("tensor-parallel group failed: {}", reason);
    for (NcclCommunicator* c : raw)
      c->abort(reason);
  };
  return out.make_runner(std::move(comms), std::move(ranks),
                         [gpus](int r) { return gpus[static_cast<size_t>(r)]->make_current(); });
}

// kPlanMemory's payload: the scheduler limits that shape the profiled step, which must be the
// same on every rank (its collectives pair up).
std::string encode_sched(const SchedulerConfig& s) {
  const int32_t v[3] = {s.max_num_batched_tokens, s.max_num_seqs, s.max_model_len};
  return std::string(reinterpret_cast<const char*>(v), sizeof v);
}

Expected<SchedulerConfig> decode_sched(std::string_view payload) {
  int32_t v[3];
  if (payload.size() != sizeof v) return parse_error("plan_memory: a malformed payload");
  std::memcpy(v, payload.data(), sizeof v);
  SchedulerConfig s;
  s.max_num_batched_tokens = v[0];
  s.max_num_seqs = v[1];
  s.max_model_len = v[2];
  return s;
}
#endif

Expected<NodeRanks> join_and_load(const ModelEngineOptions& options) {
  const int tp = options.tensor_parallel_size;
  const int nnodes = options.nnodes;
  if (tp < nnodes || tp % nnodes != 0) {
    return invalid_argument(fmt::format(
        "--tensor-parallel-size {} does not split evenly over --nnodes {} (each node runs the "
        "same number of ranks)",
        tp, nnodes));
  }
  if (options.data_parallel_size > 1) {
    return unsupported(
        fmt::format("--data-parallel-size {} with --nnodes {} is not built yet: nodes split one "
                    "--tensor-parallel-size group",
                    options.data_parallel_size, nnodes));
  }
  LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<Ops> probe, make_backend(options));
  const bool on_gpu = !probe->device().is_cpu();
  probe.reset();
  LOCUS_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(options.model_dir));
  NodeGroupOptions group;
  group.master_addr = options.master_addr;
  group.master_port = options.master_port;
  group.nnodes = nnodes;
  group.node_rank = options.node_rank;
  group.fingerprint = fingerprint(options, config);
  group.timeout = options.node_join_timeout;
  NodeRanks out;
  LOCUS_ASSIGN_OR_RETURN(out.nodes, NodeGroup::create(group));
  const int local = tp / nnodes;
  const int first = options.node_rank * local;
  if (on_gpu) {
#ifdef LOCUS_HAS_CUDA
    LOCUS_RETURN_IF_ERROR(load_gpu_ranks(options, first, local, out));
#endif
  } else {
    LOCUS_RETURN_IF_ERROR(load_cpu_ranks(options, first, local, out));
  }
  log::info("node {} of {}: ranks {}-{} of {} ({}) on {}", options.node_rank, nnodes, first,
            first + local - 1, tp,
            options.enable_expert_parallel ? "expert parallel" : "tensor parallel",
            out.load.runner->rank(0).ops().name());
  return out;
}

}  // namespace

Expected<MultiNodeLoad> load_multi_node(const ModelEngineOptions& options) {
  if (options.node_rank != 0) {
    return internal_error("load_multi_node runs on node 0; workers call run_worker_node");
  }
  LOCUS_ASSIGN_OR_RETURN(NodeRanks node, join_and_load(options));
  MultiNodeLoad out;
  out.config = std::move(node.load.config);
  out.weights_description = std::move(node.load.weights_description);
  out.runner = std::make_unique<MultiNodeRunner>(std::move(node.nodes), std::move(node.load.runner),
                                                 node.abort_local);
  return out;
}

#ifdef LOCUS_HAS_CUDA
Expected<GpuMemoryPlan> plan_multi_node_gpu(MultiNodeRunner& runner, const SchedulerConfig& sched,
                                            const ModelEngineOptions& options) {
  GpuMemoryPlan plan;
  LOCUS_ASSIGN_OR_RETURN(
      std::vector<std::string> replies,
      runner.run_on_every_node(NodeCommand::kPlanMemory, encode_sched(sched), [&]() -> Status {
        LOCUS_ASSIGN_OR_RETURN(plan, plan_parallel_gpu(runner.local(), sched, options));
        return Status::ok();
      }));
  for (size_t k = 0; k < replies.size(); ++k) {
    int64_t bytes = 0;
    if (replies[k].size() != sizeof bytes) {
      return parse_error(fmt::format("node {}'s memory plan is malformed", k + 1));
    }
    std::memcpy(&bytes, replies[k].data(), sizeof bytes);
    plan.kv_cache_bytes = std::min(plan.kv_cache_bytes, bytes);
  }
  return plan;
}
#endif

Status run_worker_node(const ModelEngineOptions& options) {
  if (options.nnodes < 2 || options.node_rank < 1 || options.node_rank >= options.nnodes) {
    return invalid_argument(fmt::format("a worker node has --node-rank in [1, --nnodes {}), got {}",
                                        options.nnodes, options.node_rank));
  }
  LOCUS_ASSIGN_OR_RETURN(NodeRanks node, join_and_load(options));
  log::info("node {} of {}: joined node 0 at {}:{}; running its steps", options.node_rank,
            options.nnodes, options.master_addr, options.master_port);
  WorkerHooks hooks;
#ifdef LOCUS_HAS_CUDA
  ParallelModelRunner* local = node.load.runner.get();
  hooks.plan_memory = [local, &options](std::string_view payload) -> Expected<std::string> {
    LOCUS_ASSIGN_OR_RETURN(SchedulerConfig sched, decode_sched(payload));
    LOCUS_ASSIGN_OR_RETURN(GpuMemoryPlan plan, plan_parallel_gpu(*local, sched, options));
    return std::string(reinterpret_cast<const char*>(&plan.kv_cache_bytes),
                       sizeof plan.kv_cache_bytes);
  };
#endif
  Status s = serve_worker_node(*node.nodes, *node.load.runner, node.abort_local, hooks);
  // The links go first: their abort listener must not call into ranks that are gone.
  node.nodes.reset();
  node.load.runner.reset();
  if (s.is_ok()) log::info("node {}: node 0 ended the run", options.node_rank);
  return s;
}

}  // namespace locus

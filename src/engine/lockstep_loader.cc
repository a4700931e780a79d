#include "engine/lockstep_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/logging.h"
#include "dist/fake_communicator.h"
#include "engine/lockstep_runner.h"
#include "engine/parallel_model_runner.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/cuda/runtime/nccl_communicator.h"
#endif

namespace locus {

namespace {

// The groups a lockstep load wires its ranks into, for D replicas of T ranks:
//  - columns[d][t]: rank d of column t's group (rank t of every replica), which replica d's
//    rank t exchanges tokens over; shared, so that `abort_columns` can reach every one of them
//    whichever replica is destroyed first;
//  - tp[d][t]: rank t of replica d's tensor-parallel group (empty when T == 1), owned by the
//    replica's ParallelModelRunner; abort_tp[d] aborts that group.
struct LockstepGroups {
  std::vector<std::vector<std::shared_ptr<Communicator>>> columns;
  std::vector<std::vector<std::unique_ptr<Communicator>>> tp;
  std::vector<std::function<void(const std::string&)>> abort_tp;
  std::function<void(const std::string&)> abort_columns;
};

using RankBackend = std::function<Expected<std::unique_ptr<Ops>>(int d, int t)>;
using RankBind = std::function<Status(int d, int t)>;

// Loads every rank's shard and wraps each replica (one rank, or a tensor-parallel group) in a
// LockstepRunner. `bind(d, t)`, when set, makes rank (d, t)'s GPU current on a calling thread.
Expected<LockstepLoad> assemble(const ModelEngineOptions& options, LockstepGroups groups,
                                const RankBackend& backend, const RankBind& bind) {
  const int dp = options.data_parallel_size;
  const int tp = options.tensor_parallel_size;
  LockstepLoad out;
  out.abort = groups.abort_columns;
  auto rounds = std::make_shared<LockstepGroup>(dp);
  for (int d = 0; d < dp; ++d) {
    const auto replica = static_cast<size_t>(d);
    std::vector<std::unique_ptr<LocalModelRunner>> ranks;
    for (int t = 0; t < tp; ++t) {
      if (bind) LOCUS_RETURN_IF_ERROR(bind(d, t));
      Communicator* tp_comm = tp > 1 ? groups.tp[replica][static_cast<size_t>(t)].get() : nullptr;
      LOCUS_ASSIGN_OR_RETURN(
          ModelParallel parallel,
          model_parallel(options, tp_comm, groups.columns[replica][static_cast<size_t>(t)].get()));
      LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, backend(d, t));
      auto local = load_rank(options, std::move(ops), parallel, t, "tensor-parallel", out.info);
      if (!local) return local.status().with_context(fmt::format("data-parallel replica {}", d));
      if (bind && tp == 1) (*local)->bind_thread([bind, d] { return bind(d, 0); });
      out.ranks.push_back(local->get());
      ranks.push_back(std::move(*local));
    }
    std::unique_ptr<ModelRunner> inner;
    if (tp == 1) {
      inner = std::move(ranks.front());
    } else {
      // A failed rank releases its replica's peers and every replica's exchanges.
      auto abort_replica = [abort_tp = groups.abort_tp[replica],
                            abort_columns = groups.abort_columns](const std::string& reason) {
        abort_tp(reason);
        abort_columns(reason);
      };
      std::function<Status(int)> bind_rank;
      if (bind) bind_rank = [bind, d](int t) { return bind(d, t); };
      LOCUS_ASSIGN_OR_RETURN(
          inner, ParallelModelRunner::create(std::move(groups.tp[replica]), std::move(ranks),
                                             abort_replica, std::move(bind_rank)));
    }
    out.runners.push_back(std::make_unique<LockstepRunner>(std::move(groups.columns[replica]),
                                                           std::move(inner), rounds, d, out.abort));
  }
  return out;
}

// For the log: "2 data-parallel replicas of 2 tensor-parallel ranks sharing experts (...)".
std::string describe(const ModelEngineOptions& options) {
  const int tp = options.tensor_parallel_size;
  auto a2a = parse_all2all_backend(options.all2all_backend);
  return fmt::format("{} data-parallel replicas{} sharing experts (DP attention + EP MoE, {})",
                     options.data_parallel_size,
                     tp > 1 ? fmt::format(" of {} tensor-parallel ranks", tp) : "",
                     a2a ? all2all_backend_name(*a2a) : options.all2all_backend);
}

}  // namespace

Expected<LockstepLoad> load_lockstep(const ModelEngineOptions& options) {
  const int dp = options.data_parallel_size;
  const int tp = options.tensor_parallel_size;
  constexpr auto kCollectiveTimeout = std::chrono::minutes(10);
  LockstepGroups groups;
  std::vector<std::shared_ptr<FakeGroup>> columns;
  for (int t = 0; t < tp; ++t)
    columns.push_back(FakeGroup::create(dp, kCollectiveTimeout));
  groups.columns.resize(static_cast<size_t>(dp));
  for (int d = 0; d < dp; ++d) {
    for (const auto& column : columns)
      groups.columns[static_cast<size_t>(d)].push_back(column->communicator(d));
  }
  groups.abort_columns = [columns](const std::string& reason) {
    for (const auto& column : columns)
      column->abort(reason);
  };
  if (tp > 1) {
    for (int d = 0; d < dp; ++d) {
      std::shared_ptr<FakeGroup> replica = FakeGroup::create(tp, kCollectiveTimeout);
      groups.tp.emplace_back();
      for (int t = 0; t < tp; ++t)
        groups.tp.back().push_back(replica->communicator(t));
      groups.abort_tp.push_back([replica](const std::string& reason) { replica->abort(reason); });
    }
  }
  // `options` already holds this replica's share of the cores; its ranks split them.
  const int threads = std::max(1, cpu_cores(options) / tp);
  LOCUS_ASSIGN_OR_RETURN(LockstepLoad out,
                         assemble(options, std::move(groups),
                                  [&](int, int) -> Expected<std::unique_ptr<Ops>> {
                                    return make_cpu_backend(options, threads);
                                  },
                                  {}));
  log::info("{} on the CPU", describe(options));
  return out;
}

#ifdef LOCUS_HAS_CUDA
Expected<LockstepLoad> load_lockstep_gpu(const ModelEngineOptions& options) {
  const int dp = options.data_parallel_size;
  const int tp = options.tensor_parallel_size;
  std::vector<std::unique_ptr<CudaBackend>> backends;
  std::vector<CudaBackend*> gpus;  // replica-major: rank (d, t) at d * tp + t, on that GPU
  for (int g = 0; g < dp * tp; ++g) {
    CudaBackendOptions cuda;
    cuda.device_index = g;
    cuda.gpu_memory_utilization = options.gpu_memory_utilization;
    LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::create(cuda));
    gpus.push_back(b.get());
    backends.push_back(std::move(b));
  }
  auto gpu = [&](int d, int t) { return gpus[static_cast<size_t>(d * tp + t)]; };

  LockstepGroups groups;
  groups.columns.resize(static_cast<size_t>(dp));
  std::vector<std::shared_ptr<NcclCommunicator>> columns;
  for (int t = 0; t < tp; ++t) {
    std::vector<CudaBackend*> members;
    for (int d = 0; d < dp; ++d)
      members.push_back(gpu(d, t));
    LOCUS_ASSIGN_OR_RETURN(auto column, NcclCommunicator::create_local_group(members));
    for (int d = 0; d < dp; ++d) {
      std::shared_ptr<NcclCommunicator> c = std::move(column[static_cast<size_t>(d)]);
      columns.push_back(c);
      groups.columns[static_cast<size_t>(d)].push_back(std::move(c));
    }
  }
  // A rank that fails would leave its peers inside NCCL kernels waiting for it: aborting the
  // communicators releases them, and the engine reports the failure.
  groups.abort_columns = [columns](const std::string& reason) {
    for (const auto& c : columns)
      c->abort(reason);
  };
  if (tp > 1) {
    for (int d = 0; d < dp; ++d) {
      std::vector<CudaBackend*> members;
      for (int t = 0; t < tp; ++t)
        members.push_back(gpu(d, t));
      LOCUS_ASSIGN_OR_RETURN(auto replica, NcclCommunicator::create_local_group(members));
      std::vector<NcclCommunicator*> raw;
      groups.tp.emplace_back();
      for (auto& c : replica) {
        raw.push_back(c.get());
        groups.tp.back().push_back(std::move(c));
      }
      groups.abort_tp.push_back([raw](const std::string& reason) {
        for (NcclCommunicator* c : raw)
          c->abort(reason);
      });
    }
  }
  LOCUS_ASSIGN_OR_RETURN(
      LockstepLoad out,
      assemble(
          options, std::move(groups),
          [&](int d, int t) -> Expected<std::unique_ptr<Ops>> {
            return std::unique_ptr<Ops>(std::move(backends[static_cast<size_t>(d * tp + t)]));
          },
          [gpus, tp](int d, int t) {
            return gpus[static_cast<size_t>(d * tp + t)]->make_current();
          }));
  LOCUS_RETURN_IF_ERROR(gpus.front()->make_current());
  log::info("{} on {} GPUs: {}", describe(options), dp * tp, columns.front()->description());
  return out;
}
#endif

}  // namespace locus

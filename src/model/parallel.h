// How one rank's model is cut out of the whole (Megatron-style tensor parallelism, vLLM's names):
//  - attention: each rank owns num_heads / tp query heads and their KV heads (a KV head is
//    replicated on tp / kv_heads ranks when there are fewer KV heads than ranks); q/k/v are
//    column-parallel, o_proj row-parallel;
//  - dense MLPs and shared experts: gate/up column-parallel, down row-parallel;
//  - routed experts: split the same way (every rank holds a slice of every expert), or with
//    expert parallelism whole experts spread over the ranks (linear: contiguous ranges;
//    round_robin: expert e on rank e % size);
//  - lm_head: vocab-parallel, the logits gathered; the embedding table is replicated;
//  - norms, routers and correction biases are replicated.
// Row-parallel outputs are partial sums: the model all-reduces the attention output and the
// MLP / MoE output once per layer (the routed and shared experts' shares together).
//
// Data parallelism with expert parallelism (DP attention + EP MoE, DeepSeek's serving layout):
// each data-parallel replica runs the whole attention on its own sequences, and the routed
// experts are spread over every rank of every replica. Each MoE layer gathers every rank's tokens
// (padded to the longest rank's count), runs this rank's experts on all of them and
// reduce-scatters the sums back (the allgather_reducescatter backend), or sends each token only
// to the ranks that hold its experts (naive, low_latency); shared experts run on the rank's own
// tokens. Every rank of the group must then run a forward for every step, with at least one
// token.
// With tensor parallelism inside the replicas (vLLM's -dp D -tp T --enable-expert-parallel),
// replica d's tensor-parallel rank t is expert rank d * T + t, and the `dp` group of rank t is
// rank t of every replica (a "column"). All ranks of a replica hold its tokens, so each column
// exchanges tokens only for the experts its own ranks hold; each rank's routed output is then a
// partial sum, which the tensor-parallel all-reduce after the MoE layer completes (as it does
// for the shared experts' split).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "dist/communicator.h"
#include "io/model_config.h"

namespace locus {

enum class ExpertPlacement : uint8_t { kLinear, kRoundRobin };

Expected<ExpertPlacement> parse_expert_placement(const std::string& name);

// How data-parallel ranks that share experts exchange a MoE layer's tokens
// (--all2all-backend, model/moe/expert_exchange.h).
enum class All2AllBackend : uint8_t {
  kAllGatherReduceScatter,  // every rank sees every token; sums come back by reduce-scatter
  kNaive,                   // each token goes only to the ranks holding its experts (send/recv)
  kLowLatency,              // the same in blocks of fixed size, planned on the device: no host sync
};

// "auto" and "allgather_reducescatter" -> the baseline; "naive"; "low_latency"; anything else
// is an error.
Expected<All2AllBackend> parse_all2all_backend(const std::string& name);
// The flag's name of `backend`: "allgather_reducescatter", "naive" or "low_latency".
const char* all2all_backend_name(All2AllBackend backend);

struct ModelParallel {
  Communicator* tp = nullptr;  // the tensor-parallel group; null = one rank. Outlives the model.
  bool expert_parallel = false;
  ExpertPlacement placement = ExpertPlacement::kLinear;
  // The data-parallel ranks that share the experts (with tensor parallelism, this rank's column:
  // the same tensor-parallel rank of every replica); null = none.
  Communicator* dp = nullptr;
  All2AllBackend all2all = All2AllBackend::kAllGatherReduceScatter;

  int rank() const { return tp != nullptr ? tp->rank() : 0; }
  int size() const { return tp != nullptr ? tp->size() : 1; }
  bool is_parallel() const { return size() > 1; }
  bool is_data_parallel() const { return dp != nullptr && dp->size() > 1; }
  // The ranks the routed experts are spread over: every rank of every data-parallel replica
  // (replica-major), else the tp group.
  int expert_rank() const { return is_data_parallel() ? dp->rank() * size() + rank() : rank(); }
  int expert_size() const { return is_data_parallel() ? dp->size() * size() : size(); }
  // The expert rank that holds routed expert `e` of `num_experts`.
  int expert_owner(int64_t e, int64_t num_experts) const;
  // Data parallel: the rank of the dp group (this column) that holds routed expert `e`, or -1
  // when another column holds it.
  int exchange_owner(int64_t e, int64_t num_experts) const;
  // Whether routed expert `e` of `num_experts` lives on this rank.
  bool owns_expert(int64_t e, int64_t num_experts) const;
  // The KV heads this rank holds: [start, start + length).
  ShardRange kv_heads(int64_t num_kv_heads) const;

  // Whether `config` splits this way: every split dimension divides evenly. The message names
  // the dimension and the flag.
  Status check(const ModelConfig& config) const;
};

}  // namespace locus

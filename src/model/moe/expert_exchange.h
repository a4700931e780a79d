// How a MoE layer's tokens meet experts spread over data-parallel ranks, and how the experts'
// outputs come back (DESIGN.md's prepare / finalize around the same experts). Each rank routes
// its own tokens; then
//   prepare:  the rows this rank's experts must see, with their routing;
//   experts:  Ops::moe_experts over those rows (experts held by other ranks are skipped);
//   finalize: each of this rank's tokens gets the sum of its experts' weighted outputs.
// Every rank of the group calls prepare and finalize for every MoE layer of every step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/ops.h"
#include "dist/communicator.h"
#include "model/parallel.h"

namespace locus {

struct ExpertDispatch {
  Tensor x;             // [rows, hidden]: what this rank's experts process
  Tensor topk_ids;      // i32 [rows, k]
  Tensor topk_weights;  // f32 [rows, k]

  // What finalize needs (filled by the exchange that made this dispatch).
  int64_t tokens = 0;                // this rank's tokens
  int64_t padded = 0;                // allgather_reducescatter: rows each rank contributed
  std::vector<int64_t> send_counts;  // naive: rows sent to each rank
  std::vector<int64_t> recv_counts;  // naive: rows received from each rank
  // naive: combine_index[j][t] = the row of the returned outputs that holds token t's share
  // from the j-th rank it was sent to, or the zero row past the end.
  std::vector<Tensor> combine_index;
  // low_latency: rows per block (every pair exchanges one block) and i32 [ranks, T], the row of
  // the returned blocks holding token t's share from rank r, or -1.
  int64_t capacity = 0;
  Tensor block_combine_index;
};

class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;

  // x [T, hidden] with topk_ids i32 [T, k] and topk_weights f32 [T, k]: this rank's tokens.
  // `max_tokens`: the most tokens any rank of the group has in this step when the caller knows
  // it (agreed once per step), else 0 and the exchange asks the ranks.
  virtual Expected<ExpertDispatch> prepare(Ops& ops, const Tensor& x, const Tensor& topk_ids,
                                           const Tensor& topk_weights,
                                           int64_t max_tokens) const = 0;
  // expert_out [dispatch.x rows, hidden] -> [T, hidden].
  virtual Expected<Tensor> finalize(Ops& ops, const ExpertDispatch& dispatch,
                                    const Tensor& expert_out) const = 0;
};

// The exchange `parallel.all2all` names over `parallel.dp` (which must be data-parallel), for a
// layer of `num_experts` routed experts placed by `parallel`.
std::unique_ptr<ExpertExchange> make_expert_exchange(const ModelParallel& parallel,
                                                     int64_t num_experts);

}  // namespace locus

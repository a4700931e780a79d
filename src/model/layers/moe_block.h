// A sparse MoE block: router -> top-k experts -> weighted combine, plus the always-on shared
// experts where the family has them (DeepSeek, GLM): out = experts(x) + shared(x).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "model/arch/architecture.h"
#include "model/moe/expert_exchange.h"
#include "model/parallel.h"
#include "model/weight_loader.h"

namespace locus {

// A linear not run yet whose output is a pre-norm step's delta (the attention's o projection):
// the router op runs it (linear_add_rms_norm_moe_router), so a backend can fuse the two.
struct PendingProjection {
  Tensor input;
  const LinearWeight* weight = nullptr;
};

class MoeBlock {
 public:
  // `layer_prefix` is "model.layers.<i>.". With tensor parallelism each rank holds a slice of
  // every expert, with expert parallelism whole experts (model/parallel.h); either way the
  // output is this rank's share of a sum over the ranks.
  static Expected<MoeBlock> load(WeightLoader& loader, const ArchitectureSpec& spec,
                                 const std::string& layer_prefix,
                                 const ModelParallel& parallel = {});

  // x [T, hidden] -> [T, hidden].
  Expected<Tensor> forward(Ops& ops, const Tensor& x) const;
  // The same on step.normed, with the pre-norm step run by the router
  // (add_rms_norm_moe_router). `dp_max_tokens`: see ExpertExchange::prepare.
  // With `proj`, step.delta is proj's output, computed here first.
  Expected<Tensor> forward(Ops& ops, const AddRmsNorm& step, int64_t dp_max_tokens = 0,
                           const PendingProjection* proj = nullptr) const;

 private:
  LinearWeight router_;
  Tensor correction_bias_;  // undefined when the router has none
  std::vector<ExpertWeights> experts_;
  bool all_experts_local_ = true;  // false with expert parallelism
  std::optional<ExpertWeights> shared_experts_;
  Expected<Tensor> run(Ops& ops, const Tensor& x, const AddRmsNorm* step, int64_t dp_max_tokens,
                       const PendingProjection* proj) const;
  MoeRouting routing_;
  // Set when the experts are spread over data-parallel ranks: takes each rank's routed tokens
  // to the experts' ranks and the outputs back.
  std::shared_ptr<const ExpertExchange> exchange_;
};

}  // namespace locus

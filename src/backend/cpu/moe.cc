// MoE routing and experts on the CPU. Routing follows the HF/DeepSeek definitions (see
// Ops::moe_route); experts run as router -> dispatch (tokens grouped by expert, in token order)
// -> one GEMM chain per expert -> combine, where each token sums its experts' outputs in
// ascending expert id (as transformers' index_add_ loop does), so a token's result does not
// depend on which other tokens share the batch.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace locus {
namespace {

// Indices of the k largest values, largest first; equal values keep the lower index first
// (torch.topk gives no guarantee; this is the deterministic choice).
std::vector<int64_t> top_k_indices(const std::vector<float>& values, int64_t k) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return values[static_cast<size_t>(a)] > values[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(k));
  return order;
}

// Routes one token: scores, selection (with groups), weights.
void route_token(const float* logits, const float* bias, int64_t experts, const MoeRouting& routing,
                 int32_t* ids, float* weights) {
  std::vector<float> scores(static_cast<size_t>(experts));
  if (routing.scoring == ScoringFunc::kSoftmax) {
    double max_logit = -std::numeric_limits<double>::infinity();
    for (int64_t e = 0; e < experts; ++e)
      max_logit = std::max(max_logit, static_cast<double>(logits[e]));
    double sum = 0.0;
    for (int64_t e = 0; e < experts; ++e)
      sum += std::exp(static_cast<double>(logits[e]) - max_logit);
    for (int64_t e = 0; e < experts; ++e) {
      scores[static_cast<size_t>(e)] =
          static_cast<float>(std::exp(static_cast<double>(logits[e]) - max_logit) / sum);
    }
  } else {
    for (int64_t e = 0; e < experts; ++e) {
      scores[static_cast<size_t>(e)] =
          static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[e]))));
    }
  }

  // The correction bias steers which experts are chosen, never their weights.
  std::vector<float> choice = scores;
  if (bias != nullptr) {
    for (int64_t e = 0; e < experts; ++e)
      choice[static_cast<size_t>(e)] += bias[e];
  }

  if (routing.topk_method != TopkMethod::kGreedy && routing.n_group > 1) {
    const int64_t group_size = experts / routing.n_group;
    std::vector<float> group_scores(static_cast<size_t>(routing.n_group));
    for (int64_t g = 0; g < routing.n_group; ++g) {
      std::vector<float> members(choice.begin() + g * group_size,
                                 choice.begin() + (g + 1) * group_size);
      std::sort(members.begin(), members.end(), std::greater<float>());
      // group_limited_greedy (V2): the group's best expert; noaux_tc (V3): its best two.
      group_scores[static_cast<size_t>(g)] =
          routing.topk_method == TopkMethod::kNoauxTc ? members[0] + members[1] : members[0];
    }
    std::vector<bool> keep(static_cast<size_t>(routing.n_group), false);
    for (int64_t g : top_k_indices(group_scores, routing.topk_group))
      keep[static_cast<size_t>(g)] = true;
    // Experts of dropped groups can never win. (transformers fills them with 0.0 rather than
    // -inf; the two differ only if a kept expert scores below 0, which DeepSeek's reference
    // and vLLM treat as -inf does.)
    for (int64_t e = 0; e < experts; ++e) {
      if (!keep[static_cast<size_t>(e / group_size)]) {
        choice[static_cast<size_t>(e)] = -std::numeric_limits<float>::infinity();
      }
    }
  }

  const std::vector<int64_t> chosen = top_k_indices(choice, routing.top_k);
  float sum = 0.0f;
  for (size_t j = 0; j < chosen.size(); ++j) {
    ids[j] = static_cast<int32_t>(chosen[j]);
    weights[j] = scores[static_cast<size_t>(chosen[j])];
    sum += weights[j];
  }
  if (routing.renormalize) {
    // DeepSeek-V3 guards the sigmoid sum with +1e-20; softmax sums are never near zero.
    const float denominator = routing.scoring == ScoringFunc::kSigmoid ? sum + 1e-20f : sum;
    for (size_t j = 0; j < chosen.size(); ++j)
      weights[j] /= denominator;
  }
  for (size_t j = 0; j < chosen.size(); ++j)
    weights[j] *= routing.routed_scaling_factor;
}

}  // namespace

Status CpuBackend::do_moe_route(const Tensor& router_logits, const Tensor& correction_bias,
                                const MoeRouting& routing, Tensor& topk_ids, Tensor& topk_weights) {
  const int64_t experts = router_logits.size(1);
  const float* bias = correction_bias.defined() ? correction_bias.data<float>() : nullptr;
  for (int64_t t = 0; t < router_logits.size(0); ++t) {
    route_token(router_logits.data<float>() + t * experts, bias, experts, routing,
                topk_ids.data<int32_t>() + t * routing.top_k,
                topk_weights.data<float>() + t * routing.top_k);
  }
  return Status::ok();
}

Status CpuBackend::do_moe_experts(const Tensor& x_in, const Tensor& topk_ids,
                                  const Tensor& topk_weights,
                                  std::span<const ExpertWeights> experts, Tensor& out) {
  const Tensor x = act(x_in);
  const int64_t tokens = x.size(0);
  const int64_t hidden = x.size(1);
  const int64_t k = topk_ids.size(1);
  const int64_t num_experts = static_cast<int64_t>(experts.size());
  const int32_t* ids = topk_ids.data<int32_t>();
  const float* weights = topk_weights.data<float>();

  // Dispatch: for each expert, its (token, weight) pairs in token order.
  std::vector<std::vector<std::pair<int64_t, float>>> routed(experts.size());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[t * k + j];
      if (e == -1) continue;  // an empty slot
      if (e < 0 || e >= num_experts) {
        return out_of_range(
            fmt::format("moe_experts: token {} slot {} routes to expert {}, "
                        "outside [0, {})",
                        t, j, e, num_experts));
      }
      routed[static_cast<size_t>(e)].emplace_back(t, weights[t * k + j]);
    }
  }

  std::memset(out.data<float>(), 0, out.nbytes());
  std::vector<float> rows;
  std::vector<float> gate;
  std::vector<float> up;
  std::vector<float> down;
  for (int64_t e = 0; e < num_experts; ++e) {
    const auto& assigned = routed[static_cast<size_t>(e)];
    const ExpertWeights& w = experts[static_cast<size_t>(e)];
    if (assigned.empty() || !w.gate.weight.defined()) continue;  // unused, or on another rank
    const int64_t n = static_cast<int64_t>(assigned.size());
    const int64_t width = w.gate.out_features();
    rows.resize(static_cast<size_t>(n * hidden));
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(rows.data() + r * hidden, x.data<float>() + assigned[r].first * hidden,
                  static_cast<size_t>(hidden) * sizeof(float));
    }
    gate.resize(static_cast<size_t>(n * width));
    up.resize(static_cast<size_t>(n * width));
    down.resize(static_cast<size_t>(n * hidden));
    LOCUS_RETURN_IF_ERROR(cpu::linear_rows(context(), rows.data(), hidden, n, w.gate, gate.data()));
    LOCUS_RETURN_IF_ERROR(cpu::linear_rows(context(), rows.data(), hidden, n, w.up, up.data()));
    for (int64_t i = 0; i < n * width; ++i) {
      const float g = gate[static_cast<size_t>(i)];
      const float sigmoid = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(g))));
      gate[static_cast<size_t>(i)] = (g * sigmoid) * up[static_cast<size_t>(i)];
    }
    LOCUS_RETURN_IF_ERROR(cpu::linear_rows(context(), gate.data(), width, n, w.down, down.data()));
    // Combine: weight each output row and add it to its token.
    for (int64_t r = 0; r < n; ++r) {
      float* dst = out.data<float>() + assigned[r].first * hidden;
      const float* src = down.data() + r * hidden;
      const float weight = assigned[r].second;
      for (int64_t d = 0; d < hidden; ++d)
        dst[d] += src[d] * weight;
    }
  }
  return Status::ok();
}

Status CpuBackend::do_moe_dispatch_plan(const Tensor& topk_ids, const Tensor& topk_weights,
                                        const Tensor& expert_owner, int64_t ranks, int64_t capacity,
                                        Tensor& send_index, Tensor& send_ids, Tensor& send_weights,
                                        Tensor& combine_index) {
  const int64_t tokens = topk_ids.size(0);
  const int64_t k = topk_ids.size(1);
  const int64_t experts = expert_owner.size(0);
  const int32_t* ids = topk_ids.data<int32_t>();
  const int32_t* owner = expert_owner.data<int32_t>();
  for (int64_t e = 0; e < experts; ++e) {
    if (owner[e] < -1 || owner[e] >= ranks) {
      return out_of_range(fmt::format("moe_dispatch_plan: expert {} is owned by rank {} of {}", e,
                                      owner[e], ranks));
    }
  }
  std::fill_n(send_index.data<int32_t>(), send_index.numel(), -1);
  std::fill_n(send_ids.data<int32_t>(), send_ids.numel(), -1);
  std::fill_n(send_weights.data<float>(), send_weights.numel(), 0.0f);
  std::fill_n(combine_index.data<int32_t>(), combine_index.numel(), -1);
  std::vector<int64_t> used(static_cast<size_t>(ranks), 0);
  std::vector<char> goes(static_cast<size_t>(ranks));
  for (int64_t t = 0; t < tokens; ++t) {
    std::fill(goes.begin(), goes.end(), 0);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[t * k + j];
      if (e < 0 || e >= experts) {
        return out_of_range(fmt::format(
            "moe_dispatch_plan: token {} is routed to expert {}, outside [0, {})", t, e, experts));
      }
      if (owner[e] >= 0) goes[static_cast<size_t>(owner[e])] = 1;
    }
    for (int64_t r = 0; r < ranks; ++r) {
      if (!goes[static_cast<size_t>(r)]) continue;
      const int64_t slot = r * capacity + used[static_cast<size_t>(r)]++;
      send_index.data<int32_t>()[slot] = static_cast<int32_t>(t);
      std::copy_n(ids + t * k, k, send_ids.data<int32_t>() + slot * k);
      std::copy_n(topk_weights.data<float>() + t * k, k, send_weights.data<float>() + slot * k);
      combine_index.data<int32_t>()[r * tokens + t] = static_cast<int32_t>(slot);
    }
  }
  return Status::ok();
}

}  // namespace locus

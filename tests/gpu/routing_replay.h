// Routing replay for the fixture tests: the CUDA backend records every expert choice it makes,
// and a CPU backend then makes the same choices instead of its own. The fixtures are tiny random
// models whose routers see near-equal scores, so bf16 rounding anywhere upstream flips an expert
// at a few positions and moves those logits far; with the GPU's choices replayed, what is left
// between the two backends is arithmetic, which every position must then match. The choices
// themselves are checked separately: the CPU's routing of the GPU's router logits must give
// exactly the GPU's ids, and the GPU's router logits must be close to the CPU's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/runtime/cuda_backend.h"
#include "unit/ops_test_util.h"

namespace locus::testing {

// One moe_experts call: the router logits [tokens, experts] and the chosen ids [tokens, k].
struct RoutingRecord {
  int64_t tokens = 0;
  int64_t experts = 0;
  int64_t top_k = 0;
  std::vector<float> logits;
  std::vector<int32_t> ids;
};

// The CUDA backend, recording. The logits come from whichever router op ran last (the fused
// router, the plain router or moe_route); the ids are what moe_experts is handed, read once it
// has run.
class RecordingCudaBackend final : public CudaBackend {
 public:
  explicit RecordingCudaBackend(const CudaBackendOptions& options) : CudaBackend(options) {}
  using CudaBackend::initialize;

  std::vector<RoutingRecord> tape;
  std::string error;  // the first recording failure, if any

 protected:
  Status do_moe_router(const Tensor& x, const LinearWeight& router, const Tensor& correction_bias,
                       const MoeRouting& routing, Tensor& router_logits, Tensor& topk_ids,
                       Tensor& topk_weights) override {
    logits_ = router_logits;
    return CudaBackend::do_moe_router(x, router, correction_bias, routing, router_logits, topk_ids,
                                      topk_weights);
  }
  Status do_add_rms_norm_moe_router(const AddRmsNorm& step, const LinearWeight& router,
                                    const Tensor& correction_bias, const MoeRouting& routing,
                                    Tensor& router_logits, Tensor& topk_ids,
                                    Tensor& topk_weights) override {
    logits_ = router_logits;
    return CudaBackend::do_add_rms_norm_moe_router(step, router, correction_bias, routing,
                                                   router_logits, topk_ids, topk_weights);
  }
  Status do_linear_add_rms_norm_moe_router(const Tensor& x, const LinearWeight& proj,
                                           const AddRmsNorm& step, const LinearWeight& router,
                                           const Tensor& correction_bias, const MoeRouting& routing,
                                           Tensor& router_logits, Tensor& topk_ids,
                                           Tensor& topk_weights, bool experts_follow) override {
    logits_ = router_logits;
    return CudaBackend::do_linear_add_rms_norm_moe_router(x, proj, step, router, correction_bias,
                                                          routing, router_logits, topk_ids,
                                                          topk_weights, experts_follow);
  }
  Status do_moe_route(const Tensor& router_logits, const Tensor& correction_bias,
                      const MoeRouting& routing, Tensor& topk_ids, Tensor& topk_weights) override {
    logits_ = router_logits;
    return CudaBackend::do_moe_route(router_logits, correction_bias, routing, topk_ids,
                                     topk_weights);
  }
  Status do_moe_experts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                        std::span<const ExpertWeights> experts, Tensor& out) override {
    // Read back after the experts ran: a folded router leaves its ids and logits to them.
    LOCUS_RETURN_IF_ERROR(CudaBackend::do_moe_experts(x, topk_ids, topk_weights, experts, out));
    RoutingRecord r;
    r.tokens = topk_ids.size(0);
    r.top_k = topk_ids.size(1);
    auto ids = to_host(topk_ids);
    auto logits = to_host(logits_);
    if (!ids.has_value() || !logits.has_value() || ids->dtype() != DType::kI32 ||
        logits->dtype() != DType::kF32 || logits->size(0) != r.tokens) {
      if (error.empty()) error = "moe_experts: could not read the routing back";
    } else {
      r.experts = logits->size(1);
      r.ids.assign(ids->data<int32_t>(), ids->data<int32_t>() + ids->numel());
      r.logits = to_floats(*logits);
      tape.push_back(std::move(r));
    }
    return Status::ok();
  }

 private:
  Tensor logits_;
};

// The CPU backend, replaying a tape: each moe_route call routes as usual, then takes the next
// record's ids in their order (the weights still come from the CPU's own scores).
class ReplayingCpuBackend final : public CpuBackend {
 public:
  explicit ReplayingCpuBackend(const CpuBackendOptions& options) : CpuBackend(options) {}

  // same_inputs: both backends ran the same tokens (prefill), so their router logits and own
  // choices can be compared; greedy runs feed each backend its own tokens.
  void replay(const std::vector<RoutingRecord>* tape, bool same_inputs) {
    tape_ = tape;
    next_ = 0;
    same_inputs_ = same_inputs;
  }
  bool finished() const { return tape_ == nullptr || next_ == tape_->size(); }

  // Rows whose ids differ between the CPU routing the GPU's logits and the GPU: must stay 0.
  int64_t route_mismatches = 0;
  // Same inputs only: rows where the GPU chose another set of experts than the CPU did from its
  // own logits, and per call the rel. L2 of the GPU's router logits against the CPU's.
  int64_t flips = 0;
  int64_t rows = 0;
  std::vector<double> logit_errors;
  std::string error;

 protected:
  Status do_moe_route(const Tensor& router_logits, const Tensor& correction_bias,
                      const MoeRouting& routing, Tensor& topk_ids, Tensor& topk_weights) override {
    LOCUS_RETURN_IF_ERROR(
        CpuBackend::do_moe_route(router_logits, correction_bias, routing, topk_ids, topk_weights));
    if (tape_ == nullptr) return Status::ok();
    if (next_ >= tape_->size()) return fail("the CPU routed more often than the GPU");
    const RoutingRecord& r = (*tape_)[next_++];
    const int64_t tokens = router_logits.size(0);
    const int64_t experts = router_logits.size(1);
    const int64_t k = topk_ids.size(1);
    if (r.tokens != tokens || r.experts != experts || r.top_k != k)
      return fail("the GPU's routing calls do not line up with the CPU's");
    const std::vector<float> cpu_logits = to_floats(router_logits);
    if (same_inputs_) logit_errors.push_back(rel_l2(r.logits, cpu_logits));

    // The GPU's logits, routed by the CPU: must be the GPU's ids exactly.
    Tensor gpu_ids = Tensor::empty({tokens, k}, DType::kI32).value();
    Tensor gpu_weights = Tensor::empty({tokens, k}, DType::kF32).value();
    LOCUS_RETURN_IF_ERROR(CpuBackend::do_moe_route(from_floats(r.logits, {tokens, experts}),
                                                   correction_bias, routing, gpu_ids, gpu_weights));
    std::vector<float> bias(static_cast<size_t>(experts), 0.0f);
    if (correction_bias.defined()) bias = to_floats(correction_bias);
    int32_t* ids = topk_ids.data<int32_t>();
    float* weights = topk_weights.data<float>();
    for (int64_t t = 0; t < tokens; ++t) {
      if (same_inputs_) ++rows;
      const int32_t* want = r.ids.data() + t * k;
      if (std::memcmp(gpu_ids.data<int32_t>() + t * k, want, k * sizeof(int32_t)) != 0)
        ++route_mismatches;
      std::vector<int32_t> mine(ids + t * k, ids + (t + 1) * k), theirs(want, want + k);
      std::sort(mine.begin(), mine.end());
      std::sort(theirs.begin(), theirs.end());
      // Row t becomes the GPU's ids in the GPU's order, each with the weight `got` gave it.
      auto take_gpu_order = [&](const int32_t* got_ids, const float* got_weights) {
        const std::vector<int32_t> g(got_ids, got_ids + k);
        const std::vector<float> w(got_weights, got_weights + k);
        for (int64_t j = 0; j < k; ++j) {
          const auto at = std::find(g.begin(), g.end(), want[j]) - g.begin();
          if (at == k) return false;
          weights[t * k + j] = w[static_cast<size_t>(at)];
        }
        std::memcpy(ids + t * k, want, k * sizeof(int32_t));
        return true;
      };
      if (mine == theirs) {  // same set: only the order may differ
        take_gpu_order(ids + t * k, weights + t * k);
        continue;
      }
      if (same_inputs_) ++flips;
      // Steer the CPU's own routing onto the GPU's experts with a bias only they get (larger
      // than any choice score: scores are in [0, 1]); the weights are still the CPU's scores of
      // those experts, normalized and scaled as usual, then put in the GPU's order.
      float steer_by = 2.0f;
      for (float v : bias)
        steer_by = std::max(steer_by, 2.0f * std::abs(v) + 2.0f);
      std::vector<float> steer = bias;
      for (int64_t j = 0; j < k; ++j)
        steer[static_cast<size_t>(want[j])] += steer_by;
      Tensor row_ids = Tensor::empty({1, k}, DType::kI32).value();
      Tensor row_weights = Tensor::empty({1, k}, DType::kF32).value();
      const Tensor row_logits =
          from_floats(std::vector<float>(cpu_logits.begin() + t * experts,
                                         cpu_logits.begin() + (t + 1) * experts),
                      {1, experts});
      LOCUS_RETURN_IF_ERROR(CpuBackend::do_moe_route(row_logits, from_floats(steer, {experts}),
                                                     routing, row_ids, row_weights));
      if (!take_gpu_order(row_ids.data<int32_t>(), row_weights.data<float>()))
        return fail("steering the CPU onto the GPU's experts missed one");
    }
    return Status::ok();
  }

 private:
  Status fail(const std::string& why) {
    if (error.empty()) error = why;
    return internal_error(why);
  }

  const std::vector<RoutingRecord>* tape_ = nullptr;
  size_t next_ = 0;
  bool same_inputs_ = false;
};

}  // namespace locus::testing

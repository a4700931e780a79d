// CudaBackend's mixture-of-experts ops: routing, the device arrays of expert weight pointers,
// and the routed experts (the GEMV path for a few tokens, the aligned grouped GEMMs otherwise).
#include <fmt/format.h>

#include <cstring>
#include <utility>
#include <vector>

#include "backend/cuda/kernels/gemv/gemv_launch.h"
#include "backend/cuda/kernels/moe/moe_launch.h"
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/cuda/runtime/cuda_status.h"

namespace locus {

namespace {

// The kernels' routing arguments for `routing` (pointers left for the caller).
cuda::MoeRouteArgs route_args(const MoeRouting& routing, int64_t tokens, int64_t experts) {
  cuda::MoeRouteArgs a;
  a.num_tokens = static_cast<int>(tokens);
  a.num_experts = static_cast<int>(experts);
  a.top_k = static_cast<int>(routing.top_k);
  a.scoring = routing.scoring == ScoringFunc::kSigmoid ? cuda::MoeScoring::kSigmoid
                                                       : cuda::MoeScoring::kSoftmax;
  switch (routing.topk_method) {
    case TopkMethod::kGreedy:
      a.topk_method = cuda::MoeTopk::kGreedy;
      break;
    case TopkMethod::kGroupLimitedGreedy:
      a.topk_method = cuda::MoeTopk::kGroupLimitedGreedy;
      break;
    case TopkMethod::kNoauxTc:
      a.topk_method = cuda::MoeTopk::kNoauxTc;
      break;
  }
  a.n_group = static_cast<int>(routing.n_group);
  a.topk_group = static_cast<int>(routing.topk_group);
  a.renormalize = routing.renormalize;
  a.routed_scaling_factor = routing.routed_scaling_factor;
  return a;
}

}  // namespace

Status CudaBackend::do_moe_route(const Tensor& router_logits, const Tensor& correction_bias,
                                 const MoeRouting& routing, Tensor& topk_ids,
                                 Tensor& topk_weights) {
  auto timer = profile("moe_route", router_logits.size(0));
  LOCUS_ASSIGN_OR_RETURN(Tensor logits, ensure_device(router_logits, DType::kF32));
  Tensor bias;
  if (correction_bias.defined()) {
    LOCUS_ASSIGN_OR_RETURN(bias, ensure_device(correction_bias, DType::kF32));
  }
  cuda::MoeRouteArgs a = route_args(routing, logits.size(0), logits.size(1));
  a.logits = logits.data<float>();
  a.correction_bias = bias.defined() ? bias.data<float>() : nullptr;
  a.topk_ids = topk_ids.data<int32_t>();
  a.topk_weights = topk_weights.data<float>();
  const cudaError_t err = cuda::launch_moe_route(a, stream_);
  if (err == cudaErrorInvalidValue) {
    cudaGetLastError();
    return unsupported(fmt::format("moe_route on cuda: unsupported routing ({} experts, top {})",
                                   a.num_experts, a.top_k));
  }
  return cuda_status("moe_route", err);
}

Expected<cudaError_t> CudaBackend::launch_router_gemv(
    const void* x, int64_t x_stride, int64_t m, int64_t k, const LinearWeight& router_in,
    const Tensor& correction_bias, const MoeRouting& routing, Tensor& router_logits,
    Tensor& topk_ids, Tensor& topk_weights, const cuda::GemvAddRmsNorm* pre) {
  LOCUS_ASSIGN_OR_RETURN(LinearWeight w, ensure_prepared(router_in));
  Tensor bias;
  if (correction_bias.defined()) {
    LOCUS_ASSIGN_OR_RETURN(bias, ensure_device(correction_bias, DType::kF32));
  }
  LOCUS_ASSIGN_OR_RETURN(int* counters, split_counters());
  cuda::MoeRouteArgs a = route_args(routing, m, w.out_features());
  a.correction_bias = bias.defined() ? bias.data<float>() : nullptr;
  a.topk_ids = topk_ids.data<int32_t>();
  a.topk_weights = topk_weights.data<float>();
  const cudaError_t err = cuda::launch_gemv_route(
      x, x_stride, w.weight.raw_data(), router_logits.data<float>(), static_cast<int>(m),
      static_cast<int>(k), a, counters + kRouterCounterSlot, stream_, pre);
  if (err == cudaErrorNotSupported) cudaGetLastError();
  return err;
}

Status CudaBackend::do_moe_router(const Tensor& x, const LinearWeight& router_in,
                                  const Tensor& correction_bias, const MoeRouting& routing,
                                  Tensor& router_logits, Tensor& topk_ids, Tensor& topk_weights) {
  const int64_t m = x.size(0);
  auto unfused = [&] {
    return Ops::do_moe_router(x, router_in, correction_bias, routing, router_logits, topk_ids,
                              topk_weights);
  };
  // Decode: one streaming GEMV whose last CTA routes (no routing launch, no logits round trip
  // through a second kernel). Anything else: the two ops.
  if (!options_.small_batch_gemv || m > cuda::kGemvMaxRows || router_in.bias.defined() ||
      x.dtype() != DType::kBF16 || !on_cuda(x) || x.stride(0) % 8 != 0 || !on_cuda(router_logits) ||
      !on_cuda(topk_ids) || !on_cuda(topk_weights))
    return unfused();
  auto timer = profile("moe_router", m, router_in.out_features());
  LOCUS_ASSIGN_OR_RETURN(
      cudaError_t err,
      launch_router_gemv(x.raw_data(), x.stride(0), m, x.size(1), router_in, correction_bias,
                         routing, router_logits, topk_ids, topk_weights, nullptr));
  if (err == cudaErrorNotSupported) return unfused();
  return cuda_status("moe_router (gemv)", err);
}

Status CudaBackend::do_add_rms_norm_moe_router(const AddRmsNorm& step,
                                               const LinearWeight& router_in,
                                               const Tensor& correction_bias,
                                               const MoeRouting& routing, Tensor& router_logits,
                                               Tensor& topk_ids, Tensor& topk_weights) {
  const int64_t m = step.normed.size(0), k = step.normed.size(1);
  auto unfused = [&] {
    return Ops::do_add_rms_norm_moe_router(step, router_in, correction_bias, routing, router_logits,
                                           topk_ids, topk_weights);
  };
  if (!options_.small_batch_gemv || m > cuda::kGemvMaxRows || router_in.bias.defined() ||
      !on_cuda(router_logits) || !on_cuda(topk_ids) || !on_cuda(topk_weights))
    return unfused();
  cuda::GemvAddRmsNorm pre;
  Tensor norm_weight;  // held until the launch is enqueued
  LOCUS_ASSIGN_OR_RETURN(bool fits, gemv_pre_norm(step, pre, norm_weight));
  if (!fits) return unfused();
  auto timer = profile("add_rms_norm_moe_router", m, router_in.out_features());
  LOCUS_ASSIGN_OR_RETURN(cudaError_t err,
                         launch_router_gemv(nullptr, k, m, k, router_in, correction_bias, routing,
                                            router_logits, topk_ids, topk_weights, &pre));
  if (err == cudaErrorNotSupported) return unfused();
  return cuda_status("add_rms_norm_moe_router (gemv)", err);
}

Status CudaBackend::do_linear_add_rms_norm_moe_router(
    const Tensor& x, const LinearWeight& proj, const AddRmsNorm& step, const LinearWeight& router,
    const Tensor& correction_bias, const MoeRouting& routing, Tensor& router_logits,
    Tensor& topk_ids, Tensor& topk_weights, bool experts_follow) {
  if (experts_follow && options_.fold_router) {
    LOCUS_ASSIGN_OR_RETURN(bool folded, fold_route(x, proj, step, router, correction_bias, routing,
                                                   router_logits, topk_ids, topk_weights));
    if (folded) return Status::ok();
  }
  return Ops::do_linear_add_rms_norm_moe_router(x, proj, step, router, correction_bias, routing,
                                                router_logits, topk_ids, topk_weights,
                                                experts_follow);
}

Expected<bool> CudaBackend::fold_route(const Tensor& x, const LinearWeight& proj_in,
                                       const AddRmsNorm& step, const LinearWeight& router_in,
                                       const Tensor& correction_bias, const MoeRouting& routing,
                                       Tensor& router_logits, Tensor& topk_ids,
                                       Tensor& topk_weights) {
  const int64_t m = x.size(0), k = x.size(1), n = step.normed.size(1);
  // Only softmax routing without a bias or groups: there the norm's scale cannot change the
  // order of the experts.
  if (routing.scoring != ScoringFunc::kSoftmax || correction_bias.defined() ||
      routing.topk_method != TopkMethod::kGreedy || !options_.small_batch_gemv ||
      proj_in.bias.defined() || router_in.bias.defined() || x.dtype() != DType::kBF16 ||
      !on_cuda(x) || x.stride(0) % 8 != 0 || x.stride(1) != 1 || !on_cuda(router_logits) ||
      !on_cuda(topk_ids) || !on_cuda(topk_weights))
    return false;
  cuda::GemvAddRmsNorm pre;
  // Held by the pending fold until the experts' launch reads it: a host weight's upload would
  // otherwise go back to the allocator when this call returns.
  Tensor norm_weight;
  LOCUS_ASSIGN_OR_RETURN(bool fits, gemv_pre_norm(step, pre, norm_weight));
  if (!fits) return false;
  LOCUS_ASSIGN_OR_RETURN(LinearWeight proj, ensure_prepared(proj_in));
  LOCUS_ASSIGN_OR_RETURN(LinearWeight router, ensure_prepared(router_in));
  const int64_t experts = router.out_features();
  // The folded weights, made on the first call outside capture (the profiling step).
  const void* key = router.weight.raw_data();
  auto it = folded_routers_.find(key);
  if (it == folded_routers_.end()) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream_, &capturing);
    if (capturing != cudaStreamCaptureStatusNone) return false;
    if (proj.weight.dtype() != DType::kBF16 || router.weight.dtype() != DType::kBF16 ||
        proj.out_features() != n || router.in_features() != n)
      return false;
    FoldedRouter f;
    f.router = router.weight;
    LOCUS_ASSIGN_OR_RETURN(f.mf, do_empty({experts, k}, DType::kBF16));
    LOCUS_ASSIGN_OR_RETURN(f.wg, do_empty({experts, n}, DType::kBF16));
    LOCUS_RETURN_IF_ERROR(cuda_status(
        "fold_router_weights", cuda::launch_fold_router_weights(
                                   router.weight.raw_data(), pre.weight, proj.weight.raw_data(),
                                   f.mf.raw_data(), f.wg.raw_data(), static_cast<int>(experts),
                                   static_cast<int>(n), static_cast<int>(k), stream_)));
    it = folded_routers_.emplace(key, std::move(f)).first;
  }
  // One token only: at two and four, every gate_up CTA's own pre-norm and pick cost more than
  // the router launch they replace (docs/benchmarks.md, "The folded router").
  if (m > kFoldMaxTokens ||
      !cuda::moe_gemv_fold_ok(static_cast<int>(m), static_cast<int>(routing.top_k),
                              static_cast<int>(experts)))
    return false;
  auto timer = profile("fold_route", m, experts);
  PendingFold pending;
  LOCUS_ASSIGN_OR_RETURN(pending.raw, do_empty({m, experts}, DType::kF32));
  cuda::FoldRouteArgs f;
  f.mf = it->second.mf.raw_data();
  f.wg = it->second.wg.raw_data();
  f.residual = pre.residual;
  f.logits = pending.raw.data<float>();
  f.experts = static_cast<int>(experts);
  const cudaError_t err = cuda::launch_gemv_fold_route(
      x.raw_data(), x.stride(0), proj.weight.raw_data(), step.delta.raw_data(), static_cast<int>(m),
      static_cast<int>(n), static_cast<int>(k), f, stream_);
  if (err == cudaErrorNotSupported) {
    cudaGetLastError();
    return false;
  }
  LOCUS_RETURN_IF_ERROR(cuda_status("fold_route (gemv)", err));
  pending.normed = step.normed.raw_data();
  pending.norm_weight = std::move(norm_weight);
  pending.args.pre = pre;
  pending.args.logits = pending.raw.data<float>();
  pending.args.logits_out = router_logits.data<float>();
  pending.args.topk_ids_out = topk_ids.data<int32_t>();
  pending.args.topk_weights = topk_weights.data<float>();
  pending.args.experts = static_cast<int>(experts);
  pending.args.renormalize = routing.renormalize;
  pending.args.scale = routing.routed_scaling_factor;
  pending_fold_ = std::move(pending);
  return true;
}

Expected<Tensor> CudaBackend::cached_upload(std::unordered_map<const void*, CachedUpload>& cache,
                                            const void* key, std::vector<uint64_t> key_bytes,
                                            const Tensor& host) {
  auto it = cache.find(key);
  if (it != cache.end() && it->second.key_bytes == key_bytes) return it->second.device;
  LOCUS_ASSIGN_OR_RETURN(Tensor device, do_to_device(host));
  LOCUS_RETURN_IF_ERROR(synchronize());  // the caller's host tensor may die right after
  cache[key] = CachedUpload{std::move(key_bytes), device};
  return device;
}

Expected<CudaBackend::ExpertTable> CudaBackend::expert_pointer_table(
    std::span<const ExpertWeights> experts) {
  const size_t e = experts.size();
  std::vector<uint64_t> ptrs(3 * e);
  std::vector<int32_t> local_of(e, -1);
  bool remote = false;
  ExpertTable out;
  for (size_t i = 0; i < e; ++i) {
    const ExpertWeights& w = experts[i];
    if (!w.gate.weight.defined()) {
      remote = true;  // on another rank (expert parallelism): null pointers, never read
      continue;
    }
    for (const LinearWeight* lw : {&w.gate, &w.up, &w.down}) {
      if (!on_cuda(lw->weight) || lw->weight.dtype() != DType::kBF16 ||
          !lw->weight.is_contiguous()) {
        return unsupported(fmt::format(
            "moe_experts on cuda: expert {} weight {} must be a prepared bf16 GPU weight", i,
            lw->weight.to_string()));
      }
      if (lw->bias.defined()) {
        return unsupported(fmt::format("moe_experts on cuda: expert {} has a bias", i));
      }
    }
    if (out.inter == 0) out.inter = w.gate.out_features();
    local_of[i] = static_cast<int32_t>(i);
    ptrs[i] = reinterpret_cast<uint64_t>(w.gate.weight.raw_data());
    ptrs[e + i] = reinterpret_cast<uint64_t>(w.up.weight.raw_data());
    ptrs[2 * e + i] = reinterpret_cast<uint64_t>(w.down.weight.raw_data());
  }
  if (remote) {
    // local_of packed behind the pointers, two int32 per 64-bit word.
    const size_t words = ptrs.size();
    ptrs.resize(words + (e + 1) / 2, 0);
    std::memcpy(ptrs.data() + words, local_of.data(), e * sizeof(int32_t));
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor host,
                         Tensor::empty({static_cast<int64_t>(ptrs.size())}, DType::kI64));
  std::memcpy(host.raw_data(), ptrs.data(), ptrs.size() * sizeof(uint64_t));
  LOCUS_ASSIGN_OR_RETURN(out.table,
                         cached_upload(expert_tables_, experts.data(), std::move(ptrs), host));
  if (remote) {
    out.local_of = reinterpret_cast<const int32_t*>(out.table.data<int64_t>() + 3 * e);
  }
  return out;
}

Status CudaBackend::do_moe_experts(const Tensor& x, const Tensor& topk_ids,
                                   const Tensor& topk_weights,
                                   std::span<const ExpertWeights> experts, Tensor& out) {
  auto timer = profile("moe_experts", x.size(0));
  // A folded router's pre-norm step and weights run in this call's gate_up launch.
  const std::optional<PendingFold> fold = std::exchange(pending_fold_, std::nullopt);
  LOCUS_RETURN_IF_ERROR(need_bf16("moe_experts", "x", x));
  LOCUS_RETURN_IF_ERROR(need_bf16("moe_experts", "out", out));
  LOCUS_ASSIGN_OR_RETURN(ExpertTable experts_table, expert_pointer_table(experts));
  LOCUS_ASSIGN_OR_RETURN(Tensor ids, ensure_device(topk_ids, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor weights, ensure_device(topk_weights, DType::kF32));
  const auto e = static_cast<int64_t>(experts.size());
  if (experts_table.local_of != nullptr) {
    // Expert parallelism: the assignments of experts on other ranks become -1 (skipped).
    LOCUS_ASSIGN_OR_RETURN(Tensor local_ids, do_empty(ids.shape(), DType::kI32));
    LOCUS_RETURN_IF_ERROR(
        cuda_status("moe_experts (remote experts)",
                    cuda::launch_moe_local_ids(ids.data<int32_t>(), experts_table.local_of,
                                               static_cast<int>(ids.numel()), static_cast<int>(e),
                                               local_ids.data<int32_t>(), stream_)));
    ids = std::move(local_ids);
  }
  const auto* p = static_cast<const void* const*>(experts_table.table.raw_data());
  cuda::MoeExpertsArgs a;
  a.x = x.raw_data();
  a.x_row_stride = x.stride(0);
  a.topk_ids = ids.data<int32_t>();
  a.topk_weights = weights.data<float>();
  a.gate_w = p;
  a.up_w = p + e;
  a.down_w = p + 2 * e;
  a.out = out.raw_data();
  a.num_tokens = static_cast<int>(x.size(0));
  a.num_experts = static_cast<int>(e);
  a.top_k = static_cast<int>(ids.size(1));
  a.hidden = static_cast<int>(x.size(1));
  a.inter = static_cast<int>(experts_table.inter);
  if (options_.small_batch_gemv) {
    cuda::MoeGemvArgs g;
    g.x = a.x;
    g.x_row_stride = a.x_row_stride;
    g.topk_ids = a.topk_ids;
    g.topk_weights = a.topk_weights;
    g.gate_w = a.gate_w;
    g.up_w = a.up_w;
    g.down_w = a.down_w;
    g.out = a.out;
    g.num_tokens = a.num_tokens;
    g.num_experts = a.num_experts;
    g.top_k = a.top_k;
    g.hidden = a.hidden;
    g.inter = a.inter;
    if (fold.has_value()) {
      if (x.raw_data() != fold->normed || !cuda::moe_gemv_supported(g))
        return internal_error("moe_experts on cuda: a folded router's experts must follow it");
      g.fold = &fold->args;
    }
    if (cuda::moe_gemv_supported(g)) {
      g.workspace_bytes = cuda::moe_gemv_workspace_bytes(g);
      LOCUS_ASSIGN_OR_RETURN(Tensor h,
                             do_empty({static_cast<int64_t>(g.workspace_bytes)}, DType::kU8));
      g.workspace = h.raw_data();
      return cuda_status("moe_experts (gemv)", cuda::launch_moe_gemv(g, stream_));
    }
  }
  if (fold.has_value())
    return internal_error("moe_experts on cuda: a folded router's experts must take the GEMVs");
  const size_t ws = cuda::moe_experts_workspace_bytes(a);
  Tensor workspace;
  if (ws > 0) {
    LOCUS_ASSIGN_OR_RETURN(workspace, do_empty({static_cast<int64_t>(ws)}, DType::kU8));
    a.workspace = workspace.raw_data();
    a.workspace_bytes = ws;
  }
  const cudaError_t err = cuda::launch_moe_experts(a, stream_);
  if (err == cudaErrorInvalidValue) {
    cudaGetLastError();
    return unsupported(fmt::format(
        "moe_experts on cuda: unsupported shape (hidden {}, inter {}, {} experts, top {})",
        a.hidden, a.inter, a.num_experts, a.top_k));
  }
  return cuda_status("moe_experts", err);
}

Status CudaBackend::do_moe_dispatch_plan(const Tensor& topk_ids, const Tensor& topk_weights,
                                         const Tensor& expert_owner, int64_t ranks,
                                         int64_t capacity, Tensor& send_index, Tensor& send_ids,
                                         Tensor& send_weights, Tensor& combine_index) {
  auto timer = profile("moe_dispatch_plan", topk_ids.size(0), ranks);
  LOCUS_ASSIGN_OR_RETURN(Tensor ids, ensure_device(topk_ids, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor weights, ensure_device(topk_weights, DType::kF32));
  LOCUS_ASSIGN_OR_RETURN(Tensor owner, ensure_device(expert_owner, DType::kI32));
  if (!on_cuda(send_index) || !on_cuda(send_ids) || !on_cuda(send_weights) ||
      !on_cuda(combine_index)) {
    return invalid_argument("moe_dispatch_plan on cuda: the outputs must be on the GPU");
  }
  return cuda_status(
      "moe_dispatch_plan",
      cuda::launch_moe_dispatch_plan(
          ids.data<int32_t>(), weights.data<float>(), static_cast<int>(ids.size(0)),
          static_cast<int>(ids.size(1)), owner.data<int32_t>(), static_cast<int>(owner.size(0)),
          static_cast<int>(ranks), static_cast<int>(capacity), send_index.data<int32_t>(),
          send_ids.data<int32_t>(), send_weights.data<float>(), combine_index.data<int32_t>(),
          stream_));
}

}  // namespace locus

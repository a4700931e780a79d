// CudaBackend's copy and fused ops: the merged projection (one GEMV launch over all the weights
// at decode, cuBLASLt GEMMs writing column slices otherwise) and the fused GQA q/k-norm + rope +
// KV-cache write.
#include <cuda_runtime_api.h>

#include <vector>

#include "backend/cuda/kernels/elementwise/elementwise_launch.h"
#include "backend/cuda/kernels/gemv/gemv_launch.h"
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/cuda/runtime/cuda_status.h"

namespace locus {

Status CudaBackend::do_copy(const Tensor& src, Tensor& dst) {
  auto timer = profile("copy", src.numel());
  if (!on_cuda(src) || !on_cuda(dst)) return invalid_argument("copy on cuda: not on the GPU");
  const size_t elem = dtype_bytes(src.dtype(), 1);
  const int nd = src.ndim();
  const auto width = static_cast<size_t>(src.size(nd - 1)) * elem;
  const int64_t rows = nd >= 2 ? src.size(nd - 2) : 1;
  auto pitch = [&](const Tensor& t) {
    return nd >= 2 ? static_cast<size_t>(t.stride(nd - 2)) * elem : width;
  };
  // A 3-d view is one 2-d copy per leading index (cudaMemcpy2D takes one row pitch).
  const int64_t outer = nd == 3 ? src.size(0) : 1;
  for (int64_t i = 0; i < outer; ++i) {
    const auto* s = static_cast<const char*>(src.raw_data()) +
                    (nd == 3 ? static_cast<size_t>(i * src.stride(0)) * elem : 0);
    auto* d = static_cast<char*>(dst.raw_data()) +
              (nd == 3 ? static_cast<size_t>(i * dst.stride(0)) * elem : 0);
    LOCUS_CUDA_OK("copy",
                  cudaMemcpy2DAsync(d, pitch(dst), s, pitch(src), width, static_cast<size_t>(rows),
                                    cudaMemcpyDeviceToDevice, stream_));
  }
  return Status::ok();
}

namespace {

// The merged projection's weights as GEMV segments; false when they do not fit one launch.
bool gemv_segments(std::span<const LinearWeight> w, cuda::GemvSegments& seg) {
  if (w.size() > static_cast<size_t>(cuda::kGemvMaxSegments)) return false;
  for (const LinearWeight& p : w) {
    seg.seg[seg.count++] = {p.weight.raw_data(), p.bias.defined() ? p.bias.data<float>() : nullptr,
                            static_cast<int>(p.out_features())};
  }
  return true;
}

}  // namespace

Expected<bool> CudaBackend::gemv_pre_norm(const AddRmsNorm& step, cuda::GemvAddRmsNorm& pre,
                                          Tensor& weight) {
  for (const Tensor* t : {&step.residual, &step.delta, &step.residual_out, &step.normed}) {
    if (!on_cuda(*t) || t->dtype() != DType::kBF16 || !t->is_contiguous()) return false;
  }
  LOCUS_ASSIGN_OR_RETURN(weight, ensure_device(step.weight, DType::kF32));
  pre.residual = step.residual.raw_data();
  pre.delta = step.delta.raw_data();
  pre.weight = weight.data<float>();
  pre.eps = step.eps;
  pre.residual_out = step.residual_out.raw_data();
  pre.normed = step.normed.raw_data();
  return true;
}

Status CudaBackend::do_merged_linear(const Tensor& x_in, std::span<const LinearWeight* const> parts,
                                     Tensor& out) {
  auto timer = profile("merged_linear", x_in.size(0), out.size(1));
  LOCUS_RETURN_IF_ERROR(need_bf16("merged_linear", "x", x_in));
  std::vector<LinearWeight> w;
  w.reserve(parts.size());
  for (const LinearWeight* p : parts) {
    LOCUS_ASSIGN_OR_RETURN(LinearWeight prepared, ensure_prepared(*p));
    w.push_back(std::move(prepared));
  }
  const Tensor& x = x_in;
  const int64_t m = x.size(0), k = x.size(1), n = out.size(1);
  cuda::GemvSegments seg;
  if (options_.small_batch_gemv && x.stride(0) % 8 == 0 &&
      cuda::gemv_supported(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k)) &&
      gemv_segments(w, seg)) {
    return cuda_status(
        "merged_linear (gemv)",
        cuda::launch_gemv_segments(x.raw_data(), x.stride(0), seg, out.raw_data(), false,
                                   static_cast<int>(m), static_cast<int>(k), stream_));
  }
  // One GEMM per part, each writing its column slice of out directly.
  int64_t column = 0;
  auto* y = static_cast<char*>(out.raw_data());
  for (const LinearWeight& p : w) {
    const int64_t np = p.out_features();
    void* slice = y + static_cast<size_t>(column) * 2;
    LOCUS_RETURN_IF_ERROR(
        gemm_->linear(x.raw_data(), x.stride(0), p.weight.raw_data(), slice, false, m, np, k, n));
    if (p.bias.defined()) {
      LOCUS_CUDA_OK("merged_linear bias",
                    cuda::launch_add_bias(slice, n, p.bias.data<float>(), m, np, false, stream_));
    }
    column += np;
  }
  return Status::ok();
}

Status CudaBackend::do_add_rms_norm_merged_linear(const AddRmsNorm& step,
                                                  std::span<const LinearWeight* const> parts,
                                                  Tensor& out) {
  const int64_t m = step.normed.size(0), k = step.normed.size(1), n = out.size(1);
  cuda::GemvAddRmsNorm pre;
  if (!options_.small_batch_gemv ||
      !cuda::gemv_supported(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k)))
    return Ops::do_add_rms_norm_merged_linear(step, parts, out);
  Tensor norm_weight;  // held until the launch is enqueued
  LOCUS_ASSIGN_OR_RETURN(bool fits, gemv_pre_norm(step, pre, norm_weight));
  std::vector<LinearWeight> w;
  w.reserve(parts.size());
  for (const LinearWeight* p : parts) {
    LOCUS_ASSIGN_OR_RETURN(LinearWeight prepared, ensure_prepared(*p));
    w.push_back(std::move(prepared));
  }
  cuda::GemvSegments seg;
  if (!fits || !gemv_segments(w, seg) || out.dtype() != DType::kBF16 || !on_cuda(out))
    return Ops::do_add_rms_norm_merged_linear(step, parts, out);
  auto timer = profile("add_rms_norm_merged_linear", m, n);
  const cudaError_t err =
      cuda::launch_gemv_segments(nullptr, k, seg, out.raw_data(), false, static_cast<int>(m),
                                 static_cast<int>(k), stream_, &pre);
  if (err == cudaErrorNotSupported) {  // the warp kernels were chosen: no prologue there
    cudaGetLastError();
    return Ops::do_add_rms_norm_merged_linear(step, parts, out);
  }
  return cuda_status("add_rms_norm_merged_linear (gemv)", err);
}

Status CudaBackend::do_qkv_norm_rope_write_kv(const Tensor& qkv, const QkvSpec& spec,
                                              const Tensor& positions, const RopeParams& rope,
                                              const Tensor& slot_mapping, Tensor& k_cache,
                                              Tensor& v_cache, Tensor& q_out) {
  // MiniMax-M2's norm over all heads needs a cross-head reduction: the composed path.
  if (spec.norm == QkNorm::kPerLayer || qkv.size(0) > 65535 || spec.head_dim > 512) {
    return Ops::do_qkv_norm_rope_write_kv(qkv, spec, positions, rope, slot_mapping, k_cache,
                                          v_cache, q_out);
  }
  auto timer = profile("qkv_norm_rope_write_kv", qkv.size(0));
  std::vector<Tensor> keep;
  LOCUS_ASSIGN_OR_RETURN(
      cuda::QkvRopeArgs a,
      qkv_rope_args(qkv, spec, positions, rope, slot_mapping, k_cache, v_cache, q_out, keep));
  return cuda_status("qkv_norm_rope_write_kv", cuda::launch_qkv_norm_rope_write_kv(a, stream_));
}

Expected<cuda::QkvRopeArgs> CudaBackend::qkv_rope_args(const Tensor& qkv, const QkvSpec& spec,
                                                       const Tensor& positions,
                                                       const RopeParams& rope,
                                                       const Tensor& slot_mapping, Tensor& k_cache,
                                                       Tensor& v_cache, Tensor& q_out,
                                                       std::vector<Tensor>& keep) {
  LOCUS_RETURN_IF_ERROR(need_bf16("qkv_norm_rope_write_kv", "qkv", qkv));
  LOCUS_RETURN_IF_ERROR(need_bf16("qkv_norm_rope_write_kv", "k_cache", k_cache));
  LOCUS_RETURN_IF_ERROR(need_bf16("qkv_norm_rope_write_kv", "v_cache", v_cache));
  LOCUS_ASSIGN_OR_RETURN(Tensor pos, ensure_device(positions, DType::kI32));
  LOCUS_ASSIGN_OR_RETURN(Tensor slots, ensure_device(slot_mapping, DType::kI64));
  LOCUS_ASSIGN_OR_RETURN(Tensor table, rope_table(rope));
  Tensor qn, kn;
  if (spec.norm == QkNorm::kPerHead) {
    LOCUS_ASSIGN_OR_RETURN(qn, ensure_device(spec.q_norm, DType::kF32));
    LOCUS_ASSIGN_OR_RETURN(kn, ensure_device(spec.k_norm, DType::kF32));
  }
  cuda::QkvRopeArgs a;
  a.qkv = qkv.raw_data();
  a.qkv_stride = qkv.stride(0);
  a.tokens = qkv.size(0);
  a.num_heads = static_cast<int>(spec.num_heads);
  a.num_kv_heads = static_cast<int>(spec.num_kv_heads);
  a.head_dim = static_cast<int>(spec.head_dim);
  a.v_head_dim = static_cast<int>(spec.v_head_dim);
  a.q_norm = qn.defined() ? qn.data<float>() : nullptr;
  a.k_norm = kn.defined() ? kn.data<float>() : nullptr;
  a.eps = spec.eps;
  a.positions = pos.data<int32_t>();
  a.inv_freq = table.data<float>();
  a.rotary_dim = static_cast<int>(rope.rotary_dim());
  a.attention_factor = rope.attention_factor;
  a.neox = rope.layout == RopeLayout::kNeox;
  a.slot_mapping = slots.data<int64_t>();
  a.k_cache = k_cache.raw_data();
  a.v_cache = v_cache.raw_data();
  a.q_out = q_out.raw_data();
  keep = {pos, slots, table, qn, kn};
  return a;
}

}  // namespace locus

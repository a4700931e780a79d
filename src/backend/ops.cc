// Argument checks shared by every backend: shapes, dtypes, strides. A backend's do_* hook runs
// only after these pass, so kernels may assume what the header promises.
#include "backend/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "backend/op_checks.h"

namespace locus {
using namespace op_checks;  // the checks are this file's vocabulary

// ---- memory -------------------------------------------------------------------------------------

Expected<Tensor> Ops::empty(const Dims& shape, DType dtype) {
  return do_empty(shape, dtype);
}

Expected<Tensor> Ops::zeros(const Dims& shape, DType dtype) {
  LOCUS_ASSIGN_OR_RETURN(Tensor t, do_empty(shape, dtype));
  LOCUS_RETURN_IF_ERROR(do_fill_zero(t));
  return t;
}

Expected<Tensor> Ops::to_device(const Tensor& host) {
  LOCUS_RETURN_IF_ERROR(check_defined("to_device", "tensor", host));
  if (!host.device().is_cpu()) {
    return fail("to_device", fmt::format("{} is not a host tensor", host.to_string()));
  }
  return do_to_device(host);
}

Expected<Tensor> Ops::to_host(const Tensor& tensor) {
  LOCUS_RETURN_IF_ERROR(check_defined("to_host", "tensor", tensor));
  return do_to_host(tensor);
}

Status Ops::copy_into(const void* host, Tensor& dst, size_t bytes) {
  if (!dst.is_contiguous() || bytes > dst.nbytes()) {
    return fail("copy_into", fmt::format("{} bytes into {}", bytes, dst.to_string()));
  }
  if (!dst.device().is_cpu()) return fail("copy_into", "this backend has no device copy");
  std::memcpy(dst.raw_data(), host, bytes);
  return Status::ok();
}

Status Ops::sample_rows(const Tensor& logits, std::span<const SamplingRowParams> rows,
                        std::span<int32_t> tokens) {
  (void)logits, (void)rows, (void)tokens;
  return unsupported(fmt::format("{} does not sample on its device", name()));
}

Status Ops::sample_rows_async(const Tensor& logits, std::span<const SamplingRowParams> rows,
                              int slot) {
  if (slot != 0 && slot != 1) return fail("sample_rows_async", fmt::format("slot {}", slot));
  std::vector<int32_t>& tokens = host_sampled_[slot];
  tokens.assign(rows.size(), -1);
  return sample_rows(logits, rows, tokens);
}

Status Ops::collect_sampled(int slot, std::span<int32_t> tokens) {
  if (slot != 0 && slot != 1) return fail("collect_sampled", fmt::format("slot {}", slot));
  const std::vector<int32_t>& drawn = host_sampled_[slot];
  if (tokens.size() > drawn.size()) {
    return fail("collect_sampled", fmt::format("{} tokens asked, {} drawn in slot {}",
                                               tokens.size(), drawn.size(), slot));
  }
  std::copy_n(drawn.begin(), tokens.size(), tokens.begin());
  return Status::ok();
}

Status Ops::copy_sampled_tokens(int slot, Tensor& dst) {
  if (slot != 0 && slot != 1) return fail("copy_sampled_tokens", fmt::format("slot {}", slot));
  const std::vector<int32_t>& drawn = host_sampled_[slot];
  if (dst.dtype() != DType::kI32 || static_cast<size_t>(dst.numel()) > drawn.size()) {
    return fail("copy_sampled_tokens",
                fmt::format("{} from {} tokens in slot {}", dst.to_string(), drawn.size(), slot));
  }
  return copy_into(drawn.data(), dst, static_cast<size_t>(dst.numel()) * sizeof(int32_t));
}

Expected<std::shared_ptr<uint8_t[]>> Ops::host_staging(size_t bytes) {
  return std::shared_ptr<uint8_t[]>(new uint8_t[bytes > 0 ? bytes : 1]());
}

Expected<std::unique_ptr<Ops::Graph>> Ops::capture_graph(const std::function<Status()>& body) {
  (void)body;
  return unsupported(fmt::format("{} cannot record graphs", name()));
}

Expected<LinearWeight> Ops::prepare_linear(const LinearWeight& host) {
  LOCUS_RETURN_IF_ERROR(check_linear_weight("prepare_linear", host));
  return do_prepare_linear(host);
}

Expected<Tensor> Ops::prepare_weight(const Tensor& host) {
  LOCUS_RETURN_IF_ERROR(check_float("prepare_weight", "tensor", host));
  return do_prepare_weight(host);
}

// ---- compute ------------------------------------------------------------------------------------

Status Ops::embedding(const Tensor& table, const Tensor& token_ids, Tensor& out) {
  LOCUS_RETURN_IF_ERROR(validate_embedding("embedding", table, token_ids, out));
  return do_embedding(table, token_ids, out);
}

Status Ops::validate_embedding(std::string_view op, const Tensor& table, const Tensor& token_ids,
                               const Tensor& out) const {
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "table", table, 2, "[vocab, hidden]"));
  LOCUS_RETURN_IF_ERROR(check_float(op, "table", table));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "table", table));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "token_ids", token_ids, 1, "[tokens]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "token_ids", token_ids, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "token_ids", token_ids));
  return check_output(op, "out", out, {token_ids.size(0), table.size(1)}, activation_dtype());
}

Status Ops::embedding_rms_norm(const Tensor& table, const Tensor& token_ids, const Tensor& weight,
                               float eps, Tensor& residual, Tensor& normed) {
  constexpr std::string_view op = "embedding_rms_norm";
  LOCUS_RETURN_IF_ERROR(validate_embedding(op, table, token_ids, residual));
  LOCUS_RETURN_IF_ERROR(validate_rms_norm(op, residual, weight, eps, normed));
  return do_embedding_rms_norm(table, token_ids, weight, eps, residual, normed);
}

Status Ops::linear(const Tensor& x, const LinearWeight& w, Tensor& out) {
  LOCUS_RETURN_IF_ERROR(validate_linear("linear", x, w, out));
  return do_linear(x, w, out);
}

Status Ops::validate_linear(std::string_view op, const Tensor& x, const LinearWeight& w,
                            const Tensor& out) const {
  LOCUS_RETURN_IF_ERROR(check_linear_weight(op, w));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "x", x, 2, "[tokens, in]"));
  LOCUS_RETURN_IF_ERROR(check_float(op, "x", x));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "x", x));
  if (x.size(1) != w.in_features()) {
    return fail(op, fmt::format("x {} has {} features but weight {} expects {}", x.to_string(),
                                x.size(1), w.weight.to_string(), w.in_features()));
  }
  // f32 out is always allowed (router logits want it); otherwise the activation dtype.
  LOCUS_RETURN_IF_ERROR(check_defined(op, "out", out));
  const DType out_dtype = out.dtype() == DType::kF32 ? DType::kF32 : activation_dtype();
  return check_output(op, "out", out, {x.size(0), w.out_features()}, out_dtype);
}

Status Ops::merged_linear(const Tensor& x, std::span<const LinearWeight* const> parts,
                          Tensor& out) {
  constexpr std::string_view op = "merged_linear";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "x", x, 2, "[tokens, in_features]"));
  LOCUS_RETURN_IF_ERROR(check_float(op, "x", x));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "x", x));
  if (parts.empty()) return fail(op, "no weights");
  int64_t width = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == nullptr || !parts[i]->weight.defined()) {
      return fail(op, fmt::format("weight {} is undefined", i));
    }
    if (parts[i]->in_features() != x.size(1)) {
      return fail(op,
                  fmt::format("x {} has {} features but weight {} {} expects {}", x.to_string(),
                              x.size(1), i, parts[i]->weight.to_string(), parts[i]->in_features()));
    }
    width += parts[i]->out_features();
  }
  LOCUS_RETURN_IF_ERROR(check_output(op, "out", out, {x.size(0), width}, activation_dtype()));
  return do_merged_linear(x, parts, out);
}

Status Ops::add_rms_norm_merged_linear(const AddRmsNorm& step,
                                       std::span<const LinearWeight* const> parts, Tensor& out) {
  constexpr std::string_view op = "add_rms_norm_merged_linear";
  LOCUS_RETURN_IF_ERROR(validate_add_rms_norm(op, step));
  if (parts.empty()) return fail(op, "no weights");
  int64_t width = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == nullptr || !parts[i]->weight.defined()) {
      return fail(op, fmt::format("weight {} is undefined", i));
    }
    if (parts[i]->in_features() != step.normed.size(1)) {
      return fail(op, fmt::format("hidden size {} but weight {} {} expects {}", step.normed.size(1),
                                  i, parts[i]->weight.to_string(), parts[i]->in_features()));
    }
    width += parts[i]->out_features();
  }
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "out", out, {step.normed.size(0), width}, activation_dtype()));
  return do_add_rms_norm_merged_linear(step, parts, out);
}

Status Ops::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  LOCUS_RETURN_IF_ERROR(validate_rms_norm("rms_norm", x, weight, eps, out));
  return do_rms_norm(x, weight, eps, out);
}

Status Ops::validate_rms_norm(std::string_view op, const Tensor& x, const Tensor& weight, float eps,
                              const Tensor& out) const {
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "x", x, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "x", x));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "weight", weight, 1, "[n]"));
  LOCUS_RETURN_IF_ERROR(check_norm_weight(op, weight, activation_dtype()));
  if (weight.size(0) != x.size(-1)) {
    return fail(op, fmt::format("x {} and weight {} disagree on the normalized size ({} vs {})",
                                x.to_string(), weight.to_string(), x.size(-1), weight.size(0)));
  }
  if (!(eps >= 0.0f)) return fail(op, fmt::format("eps {} must be non-negative", eps));
  return check_output(op, "out", out, x.shape(), activation_dtype());
}

Status Ops::sum_squares(const Tensor& x, Tensor& out) {
  constexpr std::string_view op = "sum_squares";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "x", x, 2, "[rows, n]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "x", x, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "x", x));
  LOCUS_RETURN_IF_ERROR(check_output(op, "out", out, Dims{x.size(0)}, DType::kF32));
  return do_sum_squares(x, out);
}

Status Ops::split_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& sum_squares,
                           int64_t width, float eps, Tensor& out) {
  constexpr std::string_view op = "split_rms_norm";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "x", x, 2, "[rows, n]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "x", x, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "x", x));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "weight", weight, 1, "[n]"));
  LOCUS_RETURN_IF_ERROR(check_norm_weight(op, weight, activation_dtype()));
  if (weight.size(0) != x.size(1)) {
    return fail(op, fmt::format("x {} and weight {} disagree on the normalized size ({} vs {})",
                                x.to_string(), weight.to_string(), x.size(1), weight.size(0)));
  }
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "sum_squares", sum_squares, 1, "[rows]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "sum_squares", sum_squares, DType::kF32));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "sum_squares", sum_squares));
  if (sum_squares.size(0) != x.size(0)) {
    return fail(op, fmt::format("sum_squares {} must have one entry per row of x {}",
                                sum_squares.to_string(), x.to_string()));
  }
  if (width < x.size(1) || width < 1) {
    return fail(op, fmt::format("the whole row's width {} must be at least x's {} and positive",
                                width, x.size(1)));
  }
  if (!(eps >= 0.0f)) return fail(op, fmt::format("eps {} must be non-negative", eps));
  LOCUS_RETURN_IF_ERROR(check_output(op, "out", out, x.shape(), activation_dtype()));
  return do_split_rms_norm(x, weight, sum_squares, width, eps, out);
}

Status Ops::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                         Tensor& out) {
  constexpr std::string_view op = "add_rms_norm";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "residual", residual, 2, "[tokens, hidden]"));
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "residual", residual, residual.shape(), activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_output(op, "x", x, residual.shape(), activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "weight", weight, 1, "[hidden]"));
  LOCUS_RETURN_IF_ERROR(check_norm_weight(op, weight, activation_dtype()));
  if (weight.size(0) != residual.size(1)) {
    return fail(
        op, fmt::format("weight {} must have {} elements", weight.to_string(), residual.size(1)));
  }
  LOCUS_RETURN_IF_ERROR(check_output(op, "out", out, residual.shape(), activation_dtype()));
  if (out.raw_data() == residual.raw_data()) return fail(op, "out must not alias residual");
  if (!(eps >= 0.0f)) return fail(op, fmt::format("eps {} must be non-negative", eps));
  return do_add_rms_norm(residual, x, weight, eps, residual, out);
}

Status Ops::validate_add_rms_norm(std::string_view op, const AddRmsNorm& step) const {
  LOCUS_RETURN_IF_ERROR(check_defined(op, "residual", step.residual));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "residual", step.residual, 2, "[tokens, hidden]"));
  const Dims& shape = step.residual.shape();
  const DType dtype = activation_dtype();
  LOCUS_RETURN_IF_ERROR(check_output(op, "residual", step.residual, shape, dtype));
  LOCUS_RETURN_IF_ERROR(check_output(op, "delta", step.delta, shape, dtype));
  LOCUS_RETURN_IF_ERROR(check_output(op, "residual_out", step.residual_out, shape, dtype));
  LOCUS_RETURN_IF_ERROR(check_output(op, "normed", step.normed, shape, dtype));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "weight", step.weight, 1, "[hidden]"));
  LOCUS_RETURN_IF_ERROR(check_norm_weight(op, step.weight, dtype));
  if (step.weight.size(0) != shape[1]) {
    return fail(op,
                fmt::format("weight {} must have {} elements", step.weight.to_string(), shape[1]));
  }
  const void* out = step.residual_out.raw_data();
  if (out == step.residual.raw_data() || out == step.delta.raw_data() ||
      out == step.normed.raw_data()) {
    return fail(op, "residual_out must not alias residual, delta or normed");
  }
  if (step.normed.raw_data() == step.residual.raw_data() ||
      step.normed.raw_data() == step.delta.raw_data()) {
    return fail(op, "normed must not alias residual or delta");
  }
  if (!(step.eps >= 0.0f)) return fail(op, fmt::format("eps {} must be non-negative", step.eps));
  return Status::ok();
}

Status Ops::add_rms_norm_to(const AddRmsNorm& step) {
  LOCUS_RETURN_IF_ERROR(validate_add_rms_norm("add_rms_norm_to", step));
  Tensor residual_out = step.residual_out, normed = step.normed;
  return do_add_rms_norm(step.residual, step.delta, step.weight, step.eps, residual_out, normed);
}

Status Ops::rope(Tensor& x, const Tensor& positions, const RopeParams& params) {
  constexpr std::string_view op = "rope";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "x", x, 3, "[tokens, heads, head_dim]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "x", x, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "x", x));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "positions", positions, 1, "[tokens]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "positions", positions, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "positions", positions));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "inv_freq", params.inv_freq, 1, "[rotary_dim / 2]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "inv_freq", params.inv_freq, DType::kF32));
  if (!params.inv_freq.device().is_cpu()) return fail(op, "inv_freq must be a host tensor");
  if (positions.size(0) != x.size(0)) {
    return fail(
        op, fmt::format("positions {} do not match x {}", positions.to_string(), x.to_string()));
  }
  if (params.rotary_dim() <= 0 || params.rotary_dim() > x.size(2)) {
    return fail(op, fmt::format("rotary_dim {} must be in (0, head_dim {}] of x {}",
                                params.rotary_dim(), x.size(2), x.to_string()));
  }
  return do_rope(x, positions, params);
}

Status Ops::silu_and_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  constexpr std::string_view op = "silu_and_mul";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "gate", gate, 2, "[tokens, n]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "gate", gate, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "gate", gate));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "up", up, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "up", up));
  if (!(up.shape() == gate.shape())) {
    return fail(op, fmt::format("gate {} and up {} differ", gate.to_string(), up.to_string()));
  }
  LOCUS_RETURN_IF_ERROR(check_output(op, "out", out, gate.shape(), activation_dtype()));
  return do_silu_and_mul(gate, up, out);
}

Status Ops::add(const Tensor& a, const Tensor& b, Tensor& out) {
  constexpr std::string_view op = "add";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "a", a, 2, "[tokens, n]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "a", a, a.shape(), activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_output(op, "b", b, a.shape(), activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_output(op, "out", out, a.shape(), activation_dtype()));
  return do_add(a, b, out);
}

Status Ops::gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) {
  constexpr std::string_view op = "gather_rows";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "x", x, 2, "[tokens, n]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "x", x, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "x", x));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "indices", indices, 1, "[rows]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "indices", indices, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "indices", indices));
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "out", out, {indices.size(0), x.size(1)}, activation_dtype()));
  return do_gather_rows(x, indices, out);
}

Status Ops::copy(const Tensor& src, Tensor& dst) {
  constexpr std::string_view op = "copy";
  LOCUS_RETURN_IF_ERROR(check_defined(op, "src", src));
  LOCUS_RETURN_IF_ERROR(check_defined(op, "dst", dst));
  if (src.ndim() < 1 || src.ndim() > 3 || !(src.shape() == dst.shape()) ||
      src.dtype() != dst.dtype()) {
    return fail(op, fmt::format("src {} and dst {} must have one shape (1 to 3 dims) and dtype",
                                src.to_string(), dst.to_string()));
  }
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "src", src));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "dst", dst));
  if (src.storage() == dst.storage()) {
    // A conservative overlap test on the spans the two views touch.
    auto span = [](const Tensor& t) {
      int64_t last = 0;
      for (int i = 0; i < t.ndim(); ++i)
        last += (t.size(i) - 1) * t.stride(i);
      const auto begin = static_cast<int64_t>(t.byte_offset());
      return std::pair<int64_t, int64_t>(
          begin,
          begin + static_cast<int64_t>(dtype_bytes(t.dtype(), static_cast<size_t>(last + 1))));
    };
    const auto a = span(src), b = span(dst);
    if (src.numel() > 0 && a.first < b.second && b.first < a.second) {
      return fail(op, fmt::format("src {} and dst {} overlap", src.to_string(), dst.to_string()));
    }
  }
  return do_copy(src, dst);
}

Status Ops::write_kv_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                           Tensor& k_cache, Tensor& v_cache) {
  constexpr std::string_view op = "write_kv_cache";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "k", k, 3, "[tokens, kv_heads, head_dim]"));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "v", v, 3, "[tokens, kv_heads, v_head_dim]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "k", k, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "v", v, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "k", k));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "v", v));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "k_cache", k_cache, 4, "[blocks, block_size, kv_heads, D]"));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "v_cache", v_cache, 4, "[blocks, block_size, kv_heads, D]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "k_cache", k_cache, k_cache.shape(), kv_cache_dtype()));
  LOCUS_RETURN_IF_ERROR(check_output(op, "v_cache", v_cache, v_cache.shape(), kv_cache_dtype()));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "slot_mapping", slot_mapping, 1, "[tokens]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "slot_mapping", slot_mapping, DType::kI64));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "slot_mapping", slot_mapping));
  if (v.size(0) != k.size(0) || slot_mapping.size(0) != k.size(0) || v.size(1) != k.size(1)) {
    return fail(op, fmt::format("k {}, v {} and slot_mapping {} disagree on tokens or heads",
                                k.to_string(), v.to_string(), slot_mapping.to_string()));
  }
  if (k_cache.size(0) != v_cache.size(0) || k_cache.size(1) != v_cache.size(1) ||
      k_cache.size(2) != k.size(1) || v_cache.size(2) != v.size(1) ||
      k_cache.size(3) != k.size(2) || v_cache.size(3) != v.size(2)) {
    return fail(op, fmt::format("k {} / v {} do not fit k_cache {} / v_cache {}", k.to_string(),
                                v.to_string(), k_cache.to_string(), v_cache.to_string()));
  }
  return do_write_kv_cache(k, v, slot_mapping, k_cache, v_cache);
}

Status Ops::qkv_norm_rope_write_kv(const Tensor& qkv, const QkvSpec& spec, const Tensor& positions,
                                   const RopeParams& rope, const Tensor& slot_mapping,
                                   Tensor& k_cache, Tensor& v_cache, Tensor& q_out) {
  LOCUS_RETURN_IF_ERROR(validate_qkv_norm_rope_write_kv(
      "qkv_norm_rope_write_kv", qkv, spec, positions, rope, slot_mapping, k_cache, v_cache, q_out));
  return do_qkv_norm_rope_write_kv(qkv, spec, positions, rope, slot_mapping, k_cache, v_cache,
                                   q_out);
}

Status Ops::qkv_norm_rope_attention(const Tensor& qkv, const QkvSpec& spec, const Tensor& positions,
                                    const RopeParams& rope, const Tensor& slot_mapping,
                                    Tensor& k_cache, Tensor& v_cache,
                                    const AttentionMetadata& metadata,
                                    const AttentionParams& params, Tensor& q_out, Tensor& out) {
  constexpr std::string_view op = "qkv_norm_rope_attention";
  LOCUS_RETURN_IF_ERROR(validate_qkv_norm_rope_write_kv(op, qkv, spec, positions, rope,
                                                        slot_mapping, k_cache, v_cache, q_out));
  LOCUS_RETURN_IF_ERROR(
      validate_paged_attention(op, q_out, k_cache, v_cache, metadata, params, out));
  return do_qkv_norm_rope_attention(qkv, spec, positions, rope, slot_mapping, k_cache, v_cache,
                                    metadata, params, q_out, out);
}

Status Ops::validate_qkv_norm_rope_write_kv(std::string_view op, const Tensor& qkv,
                                            const QkvSpec& spec, const Tensor& positions,
                                            const RopeParams& rope, const Tensor& slot_mapping,
                                            const Tensor& k_cache, const Tensor& v_cache,
                                            const Tensor& q_out) const {
  if (spec.num_heads < 1 || spec.num_kv_heads < 1 || spec.head_dim < 1 || spec.v_head_dim < 1 ||
      spec.num_heads % spec.num_kv_heads != 0) {
    return fail(op, fmt::format("bad spec: {} heads, {} kv heads, head_dim {}, v_head_dim {}",
                                spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.v_head_dim));
  }
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "qkv", qkv, 2, "[tokens, width]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "qkv", qkv, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "qkv", qkv));
  if (qkv.size(1) != spec.width()) {
    return fail(op, fmt::format("qkv {} must be {} wide", qkv.to_string(), spec.width()));
  }
  if (spec.norm != QkNorm::kNone) {
    const bool per_head = spec.norm == QkNorm::kPerHead;
    const int64_t qn = per_head ? spec.head_dim : spec.q_width();
    const int64_t kn = per_head ? spec.head_dim : spec.k_width();
    LOCUS_RETURN_IF_ERROR(check_ndim(op, "q_norm", spec.q_norm, 1, "[n]"));
    LOCUS_RETURN_IF_ERROR(check_ndim(op, "k_norm", spec.k_norm, 1, "[n]"));
    LOCUS_RETURN_IF_ERROR(check_norm_weight(op, spec.q_norm, activation_dtype()));
    LOCUS_RETURN_IF_ERROR(check_norm_weight(op, spec.k_norm, activation_dtype()));
    if (spec.q_norm.size(0) != qn || spec.k_norm.size(0) != kn) {
      return fail(op, fmt::format("q_norm {} / k_norm {} must have {} / {} elements",
                                  spec.q_norm.to_string(), spec.k_norm.to_string(), qn, kn));
    }
    if (!(spec.eps >= 0.0f)) return fail(op, fmt::format("eps {} must be non-negative", spec.eps));
  }
  if (spec.sum_squares.defined()) {
    if (spec.norm != QkNorm::kPerLayer) {
      return fail(op, "sum_squares is for a per-layer q/k norm split over ranks");
    }
    LOCUS_RETURN_IF_ERROR(
        check_output(op, "sum_squares", spec.sum_squares, Dims{2, qkv.size(0)}, DType::kF32));
    if (spec.q_norm_width < spec.q_width() || spec.k_norm_width < spec.k_width()) {
      return fail(
          op, fmt::format("the whole q / k widths {} / {} must cover this rank's {} / {}",
                          spec.q_norm_width, spec.k_norm_width, spec.q_width(), spec.k_width()));
    }
  }
  const int64_t tokens = qkv.size(0);
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "positions", positions, 1, "[tokens]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "positions", positions, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "positions", positions));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "slot_mapping", slot_mapping, 1, "[tokens]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "slot_mapping", slot_mapping, DType::kI64));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "slot_mapping", slot_mapping));
  if (positions.size(0) != tokens || slot_mapping.size(0) != tokens) {
    return fail(op, fmt::format("positions {} and slot_mapping {} must have {} tokens",
                                positions.to_string(), slot_mapping.to_string(), tokens));
  }
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "inv_freq", rope.inv_freq, 1, "[rotary_dim / 2]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "inv_freq", rope.inv_freq, DType::kF32));
  if (!rope.inv_freq.device().is_cpu()) return fail(op, "inv_freq must be a host tensor");
  if (rope.rotary_dim() <= 0 || rope.rotary_dim() > spec.head_dim) {
    return fail(op, fmt::format("rotary_dim {} must be in (0, head_dim {}]", rope.rotary_dim(),
                                spec.head_dim));
  }
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "k_cache", k_cache, 4, "[blocks, block_size, kv_heads, D]"));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "v_cache", v_cache, 4, "[blocks, block_size, kv_heads, D]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "k_cache", k_cache, k_cache.shape(), kv_cache_dtype()));
  LOCUS_RETURN_IF_ERROR(check_output(op, "v_cache", v_cache, v_cache.shape(), kv_cache_dtype()));
  if (k_cache.size(0) != v_cache.size(0) || k_cache.size(1) != v_cache.size(1) ||
      k_cache.size(2) != spec.num_kv_heads || v_cache.size(2) != spec.num_kv_heads ||
      k_cache.size(3) != spec.head_dim || v_cache.size(3) != spec.v_head_dim) {
    return fail(op, fmt::format("k_cache {} and v_cache {} do not fit {} kv heads of {} / {}",
                                k_cache.to_string(), v_cache.to_string(), spec.num_kv_heads,
                                spec.head_dim, spec.v_head_dim));
  }
  return check_output(op, "q_out", q_out, {tokens, spec.num_heads, spec.head_dim},
                      activation_dtype());
}

Status Ops::paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttentionMetadata& metadata, const AttentionParams& params,
                            Tensor& out) {
  LOCUS_RETURN_IF_ERROR(
      validate_paged_attention("paged_attention", q, k_cache, v_cache, metadata, params, out));
  return do_paged_attention(q, k_cache, v_cache, metadata, params, out);
}

Status Ops::validate_paged_attention(std::string_view op, const Tensor& q, const Tensor& k_cache,
                                     const Tensor& v_cache, const AttentionMetadata& metadata,
                                     const AttentionParams& params, const Tensor& out) const {
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "q", q, 3, "[tokens, heads, head_dim]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "q", q, q.shape(), activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "k_cache", k_cache, 4, "[blocks, block_size, kv_heads, D]"));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "v_cache", v_cache, 4, "[blocks, block_size, kv_heads, D]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "k_cache", k_cache, k_cache.shape(), kv_cache_dtype()));
  LOCUS_RETURN_IF_ERROR(check_output(op, "v_cache", v_cache, v_cache.shape(), kv_cache_dtype()));
  LOCUS_RETURN_IF_ERROR(check_metadata(op, metadata, q.size(0)));
  const int64_t kv_heads = k_cache.size(2);
  if (k_cache.size(3) != q.size(2) || v_cache.size(2) != kv_heads ||
      k_cache.size(0) != v_cache.size(0) || k_cache.size(1) != v_cache.size(1) ||
      k_cache.size(1) != metadata.block_size) {
    return fail(op, fmt::format("q {}, k_cache {}, v_cache {} and block_size {} do not agree",
                                q.to_string(), k_cache.to_string(), v_cache.to_string(),
                                metadata.block_size));
  }
  if (q.size(1) % kv_heads != 0) {
    return fail(
        op, fmt::format("{} query heads are not a multiple of {} kv heads", q.size(1), kv_heads));
  }
  if (params.sliding_window && *params.sliding_window <= 0) {
    return fail(op, fmt::format("sliding_window {} must be positive", *params.sliding_window));
  }
  return check_output(op, "out", out, {q.size(0), q.size(1), v_cache.size(3)}, activation_dtype());
}

Status Ops::write_mla_cache(const Tensor& latent, const Tensor& k_pe, const Tensor& slot_mapping,
                            Tensor& cache) {
  constexpr std::string_view op = "write_mla_cache";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "latent", latent, 2, "[tokens, kv_lora_rank]"));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "k_pe", k_pe, 2, "[tokens, qk_rope_head_dim]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "latent", latent, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "k_pe", k_pe, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "latent", latent));
  LOCUS_RETURN_IF_ERROR(check_row_view(op, "k_pe", k_pe));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "cache", cache, 3, "[blocks, block_size, rank + rope]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "cache", cache, cache.shape(), kv_cache_dtype()));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "slot_mapping", slot_mapping, 1, "[tokens]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "slot_mapping", slot_mapping, DType::kI64));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "slot_mapping", slot_mapping));
  if (k_pe.size(0) != latent.size(0) || slot_mapping.size(0) != latent.size(0) ||
      cache.size(2) != latent.size(1) + k_pe.size(1)) {
    return fail(op, fmt::format("latent {}, k_pe {}, slot_mapping {} do not fit cache {}",
                                latent.to_string(), k_pe.to_string(), slot_mapping.to_string(),
                                cache.to_string()));
  }
  return do_write_mla_cache(latent, k_pe, slot_mapping, cache);
}

Status Ops::mla_attention(const Tensor& q, const Tensor& cache, const LinearWeight& kv_b_proj,
                          const AttentionMetadata& metadata, const MlaParams& params, Tensor& out) {
  constexpr std::string_view op = "mla_attention";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "q", q, 3, "[tokens, heads, nope + rope]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "q", q, q.shape(), activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "cache", cache, 3, "[blocks, block_size, rank + rope]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "cache", cache, cache.shape(), kv_cache_dtype()));
  LOCUS_RETURN_IF_ERROR(check_linear_weight(op, kv_b_proj));
  LOCUS_RETURN_IF_ERROR(check_metadata(op, metadata, q.size(0)));
  const int64_t heads = q.size(1);
  if (params.kv_lora_rank <= 0 || params.qk_nope_head_dim < 0 || params.qk_rope_head_dim <= 0 ||
      params.v_head_dim <= 0) {
    return fail(op, fmt::format("invalid MLA dims: kv_lora_rank {}, qk_nope {}, qk_rope {}, v {}",
                                params.kv_lora_rank, params.qk_nope_head_dim,
                                params.qk_rope_head_dim, params.v_head_dim));
  }
  if (q.size(2) != params.qk_nope_head_dim + params.qk_rope_head_dim ||
      cache.size(2) != params.kv_lora_rank + params.qk_rope_head_dim ||
      cache.size(1) != metadata.block_size) {
    return fail(op,
                fmt::format("q {} and cache {} do not match MLA dims (rank {}, nope {}, rope "
                            "{}) and block_size {}",
                            q.to_string(), cache.to_string(), params.kv_lora_rank,
                            params.qk_nope_head_dim, params.qk_rope_head_dim, metadata.block_size));
  }
  if (kv_b_proj.in_features() != params.kv_lora_rank ||
      kv_b_proj.out_features() != heads * (params.qk_nope_head_dim + params.v_head_dim)) {
    return fail(op, fmt::format("kv_b_proj {} must be [{} heads x (nope {} + v {}), rank {}]",
                                kv_b_proj.weight.to_string(), heads, params.qk_nope_head_dim,
                                params.v_head_dim, params.kv_lora_rank));
  }
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "out", out, {q.size(0), heads, params.v_head_dim}, activation_dtype()));
  return do_mla_attention(q, cache, kv_b_proj, metadata, params, out);
}

Status Ops::moe_route(const Tensor& router_logits, const Tensor& correction_bias,
                      const MoeRouting& routing, Tensor& topk_ids, Tensor& topk_weights) {
  LOCUS_RETURN_IF_ERROR(validate_moe_route("moe_route", router_logits, correction_bias, routing,
                                           topk_ids, topk_weights));
  return do_moe_route(router_logits, correction_bias, routing, topk_ids, topk_weights);
}

Status Ops::moe_router(const Tensor& x, const LinearWeight& router, const Tensor& correction_bias,
                       const MoeRouting& routing, Tensor& router_logits, Tensor& topk_ids,
                       Tensor& topk_weights) {
  constexpr std::string_view op = "moe_router";
  LOCUS_RETURN_IF_ERROR(check_defined(op, "router_logits", router_logits));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "router_logits", router_logits, DType::kF32));
  LOCUS_RETURN_IF_ERROR(validate_linear(op, x, router, router_logits));
  LOCUS_RETURN_IF_ERROR(
      validate_moe_route(op, router_logits, correction_bias, routing, topk_ids, topk_weights));
  return do_moe_router(x, router, correction_bias, routing, router_logits, topk_ids, topk_weights);
}

Status Ops::add_rms_norm_moe_router(const AddRmsNorm& step, const LinearWeight& router,
                                    const Tensor& correction_bias, const MoeRouting& routing,
                                    Tensor& router_logits, Tensor& topk_ids, Tensor& topk_weights) {
  constexpr std::string_view op = "add_rms_norm_moe_router";
  LOCUS_RETURN_IF_ERROR(validate_add_rms_norm(op, step));
  LOCUS_RETURN_IF_ERROR(check_defined(op, "router_logits", router_logits));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "router_logits", router_logits, DType::kF32));
  LOCUS_RETURN_IF_ERROR(validate_linear(op, step.normed, router, router_logits));
  LOCUS_RETURN_IF_ERROR(
      validate_moe_route(op, router_logits, correction_bias, routing, topk_ids, topk_weights));
  return do_add_rms_norm_moe_router(step, router, correction_bias, routing, router_logits, topk_ids,
                                    topk_weights);
}

Status Ops::linear_add_rms_norm_moe_router(const Tensor& x, const LinearWeight& proj,
                                           const AddRmsNorm& step, const LinearWeight& router,
                                           const Tensor& correction_bias, const MoeRouting& routing,
                                           Tensor& router_logits, Tensor& topk_ids,
                                           Tensor& topk_weights, bool experts_follow) {
  constexpr std::string_view op = "linear_add_rms_norm_moe_router";
  LOCUS_RETURN_IF_ERROR(check_defined(op, "step.delta", step.delta));
  LOCUS_RETURN_IF_ERROR(validate_linear(op, x, proj, step.delta));
  LOCUS_RETURN_IF_ERROR(validate_add_rms_norm(op, step));
  LOCUS_RETURN_IF_ERROR(check_defined(op, "router_logits", router_logits));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "router_logits", router_logits, DType::kF32));
  LOCUS_RETURN_IF_ERROR(validate_linear(op, step.normed, router, router_logits));
  LOCUS_RETURN_IF_ERROR(
      validate_moe_route(op, router_logits, correction_bias, routing, topk_ids, topk_weights));
  return do_linear_add_rms_norm_moe_router(x, proj, step, router, correction_bias, routing,
                                           router_logits, topk_ids, topk_weights, experts_follow);
}

Status Ops::validate_moe_route(std::string_view op, const Tensor& router_logits,
                               const Tensor& correction_bias, const MoeRouting& routing,
                               const Tensor& topk_ids, const Tensor& topk_weights) const {
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "router_logits", router_logits, 2, "[tokens, experts]"));
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "router_logits", router_logits, router_logits.shape(), DType::kF32));
  const int64_t tokens = router_logits.size(0);
  const int64_t experts = router_logits.size(1);
  if (correction_bias.defined()) {
    LOCUS_RETURN_IF_ERROR(
        check_output(op, "correction_bias", correction_bias, {experts}, DType::kF32));
  }
  if (routing.top_k <= 0 || routing.top_k > experts) {
    return fail(op, fmt::format("top_k {} must be in [1, {} experts]", routing.top_k, experts));
  }
  if (routing.topk_method != TopkMethod::kGreedy) {
    if (routing.n_group <= 0 || experts % routing.n_group != 0 || routing.topk_group <= 0 ||
        routing.topk_group > routing.n_group) {
      return fail(op, fmt::format("{} experts cannot form n_group {} with topk_group {}", experts,
                                  routing.n_group, routing.topk_group));
    }
    if (routing.top_k > routing.topk_group * (experts / routing.n_group)) {
      return fail(
          op, fmt::format("top_k {} exceeds the {} experts of {} groups", routing.top_k,
                          routing.topk_group * (experts / routing.n_group), routing.topk_group));
    }
    if (routing.topk_method == TopkMethod::kNoauxTc && experts / routing.n_group < 2) {
      return fail(op, "noaux_tc needs at least two experts per group (group score = top-2 sum)");
    }
  }
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "topk_ids", topk_ids, {tokens, routing.top_k}, DType::kI32));
  return check_output(op, "topk_weights", topk_weights, {tokens, routing.top_k}, DType::kF32);
}

Status Ops::moe_experts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                        std::span<const ExpertWeights> experts, Tensor& out) {
  constexpr std::string_view op = "moe_experts";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "x", x, 2, "[tokens, hidden]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "x", x, x.shape(), activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "topk_ids", topk_ids, 2, "[tokens, k]"));
  LOCUS_RETURN_IF_ERROR(check_output(op, "topk_ids", topk_ids, topk_ids.shape(), DType::kI32));
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "topk_weights", topk_weights, topk_ids.shape(), DType::kF32));
  if (topk_ids.size(0) != x.size(0)) {
    return fail(op,
                fmt::format("topk_ids {} do not match x {}", topk_ids.to_string(), x.to_string()));
  }
  if (experts.empty()) return fail(op, "no experts");
  const int64_t hidden = x.size(1);
  size_t local = 0;
  for (size_t e = 0; e < experts.size(); ++e) {
    const ExpertWeights& w = experts[e];
    if (!w.gate.weight.defined() && !w.up.weight.defined() && !w.down.weight.defined()) {
      continue;  // on another rank
    }
    ++local;
    const std::string where = fmt::format("{} expert {}", op, e);
    LOCUS_RETURN_IF_ERROR(check_linear_weight(where, w.gate));
    LOCUS_RETURN_IF_ERROR(check_linear_weight(where, w.up));
    LOCUS_RETURN_IF_ERROR(check_linear_weight(where, w.down));
    const int64_t width = w.gate.out_features();
    if (w.gate.in_features() != hidden || w.up.in_features() != hidden ||
        w.up.out_features() != width || w.down.in_features() != width ||
        w.down.out_features() != hidden) {
      return fail(where, fmt::format("gate {}, up {}, down {} do not form a hidden {} MLP",
                                     w.gate.weight.to_string(), w.up.weight.to_string(),
                                     w.down.weight.to_string(), hidden));
    }
  }
  if (local == 0) return fail(op, "none of the experts is on this rank");
  LOCUS_RETURN_IF_ERROR(check_output(op, "out", out, x.shape(), activation_dtype()));
  return do_moe_experts(x, topk_ids, topk_weights, experts, out);
}

}  // namespace locus

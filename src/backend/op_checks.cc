// The argument checks of the Ops entry points.
#include "backend/op_checks.h"

#include <fmt/format.h>

namespace locus::op_checks {

Status fail(std::string_view op, std::string message) {
  return invalid_argument(fmt::format("{}: {}", op, message));
}

Status check_defined(std::string_view op, std::string_view arg, const Tensor& t) {
  if (!t.defined()) return fail(op, fmt::format("{} is undefined", arg));
  return Status::ok();
}

Status check_dtype(std::string_view op, std::string_view arg, const Tensor& t, DType dtype) {
  LOCUS_RETURN_IF_ERROR(check_defined(op, arg, t));
  if (t.dtype() != dtype) {
    return fail(op, fmt::format("{} {} must be {}", arg, t.to_string(), dtype_name(dtype)));
  }
  return Status::ok();
}

Status check_float(std::string_view op, std::string_view arg, const Tensor& t) {
  LOCUS_RETURN_IF_ERROR(check_defined(op, arg, t));
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16 && t.dtype() != DType::kF16) {
    return fail(op, fmt::format("{} {} must be f32, bf16 or f16", arg, t.to_string()));
  }
  return Status::ok();
}

Status check_ndim(std::string_view op, std::string_view arg, const Tensor& t, int ndim,
                  std::string_view layout) {
  LOCUS_RETURN_IF_ERROR(check_defined(op, arg, t));
  if (t.ndim() != ndim) {
    return fail(op, fmt::format("{} {} must be {}-d {}", arg, t.to_string(), ndim, layout));
  }
  return Status::ok();
}

Status check_contiguous(std::string_view op, std::string_view arg, const Tensor& t) {
  if (!t.is_contiguous()) {
    return fail(op, fmt::format("{} {} must be contiguous (strides {})", arg, t.to_string(),
                                t.strides().to_string()));
  }
  return Status::ok();
}

Status check_row_view(std::string_view op, std::string_view arg, const Tensor& t) {
  if (t.ndim() == 0 || t.stride(-1) != 1) {
    return fail(op, fmt::format("{} {} needs unit stride in its last dim (strides {})", arg,
                                t.to_string(), t.strides().to_string()));
  }
  return Status::ok();
}

// `arg` must have exactly `shape` and be contiguous: the contract of every output.
Status check_output(std::string_view op, std::string_view arg, const Tensor& t, const Dims& shape,
                    DType dtype) {
  LOCUS_RETURN_IF_ERROR(check_dtype(op, arg, t, dtype));
  if (!(t.shape() == shape)) {
    return fail(op, fmt::format("{} {} must have shape {}", arg, t.to_string(), shape.to_string()));
  }
  return check_contiguous(op, arg, t);
}

// Norm weights come prepared: in the activation dtype, or f32 (what the GPU keeps them in).
Status check_norm_weight(std::string_view op, const Tensor& weight, DType activation) {
  if (weight.dtype() != activation && weight.dtype() != DType::kF32) {
    return fail(
        op, fmt::format("weight {} must be {} or f32", weight.to_string(), dtype_name(activation)));
  }
  return check_contiguous(op, "weight", weight);
}

Status check_linear_weight(std::string_view op, const LinearWeight& w) {
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "weight", w.weight, 2, "[out, in]"));
  const DType d = w.weight.dtype();
  if (d == DType::kF8E4M3) {
    LOCUS_RETURN_IF_ERROR(check_ndim(op, "scale_inv", w.scale_inv, 2, "[out blocks, in blocks]"));
    LOCUS_RETURN_IF_ERROR(check_dtype(op, "scale_inv", w.scale_inv, DType::kF32));
    if (w.block_out <= 0 || w.block_in <= 0) {
      return fail(op, fmt::format("fp8 weight {} needs a positive block size, got [{}, {}]",
                                  w.weight.to_string(), w.block_out, w.block_in));
    }
    const int64_t rows = (w.out_features() + w.block_out - 1) / w.block_out;
    const int64_t cols = (w.in_features() + w.block_in - 1) / w.block_in;
    if (w.scale_inv.size(0) != rows || w.scale_inv.size(1) != cols) {
      return fail(op, fmt::format("fp8 weight {} with blocks [{}, {}] needs scale_inv [{}, {}], "
                                  "got {}",
                                  w.weight.to_string(), w.block_out, w.block_in, rows, cols,
                                  w.scale_inv.to_string()));
    }
  } else if (d != DType::kF32 && d != DType::kBF16 && d != DType::kF16) {
    return unsupported(
        fmt::format("{}: weight {} has an unsupported dtype (f32, bf16, f16 or "
                    "block-scaled f8_e4m3)",
                    op, w.weight.to_string()));
  }
  if (w.bias.defined()) {
    LOCUS_RETURN_IF_ERROR(check_float(op, "bias", w.bias));
    if (w.bias.ndim() != 1 || w.bias.size(0) != w.out_features()) {
      return fail(op, fmt::format("bias {} does not match weight {}", w.bias.to_string(),
                                  w.weight.to_string()));
    }
  }
  return Status::ok();
}

Status check_metadata(std::string_view op, const AttentionMetadata& m, int64_t num_tokens) {
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "query_start_loc", m.query_start_loc, 1, "[seqs + 1]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "query_start_loc", m.query_start_loc, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "seq_lens", m.seq_lens, 1, "[seqs]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "seq_lens", m.seq_lens, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "block_table", m.block_table, 2, "[seqs, max blocks]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "block_table", m.block_table, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "slot_mapping", m.slot_mapping, 1, "[tokens]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "slot_mapping", m.slot_mapping, DType::kI64));
  const int64_t seqs = m.seq_lens.size(0);
  if (m.query_start_loc.size(0) != seqs + 1 || m.block_table.size(0) != seqs) {
    return fail(op, fmt::format("metadata disagrees on the number of sequences: query_start_loc "
                                "{}, seq_lens {}, block_table {}",
                                m.query_start_loc.to_string(), m.seq_lens.to_string(),
                                m.block_table.to_string()));
  }
  if (m.slot_mapping.size(0) != num_tokens) {
    return fail(op, fmt::format("slot_mapping {} does not cover the {} tokens",
                                m.slot_mapping.to_string(), num_tokens));
  }
  if (m.block_size <= 0)
    return fail(op, fmt::format("block_size {} must be positive", m.block_size));
  for (const Tensor* t : {&m.query_start_loc, &m.seq_lens, &m.block_table, &m.slot_mapping}) {
    LOCUS_RETURN_IF_ERROR(check_contiguous(op, "attention metadata", *t));
  }
  return Status::ok();
}

}  // namespace locus::op_checks

// The argument checks of the Ops entry points (ops.cc, ops_exchange.cc): each names the op
// and the argument in its message.
#pragma once

#include <string>
#include <string_view>

#include "backend/ops.h"

namespace locus::op_checks {

Status fail(std::string_view op, std::string message);
Status check_defined(std::string_view op, std::string_view arg, const Tensor& t);
Status check_dtype(std::string_view op, std::string_view arg, const Tensor& t, DType dtype);
Status check_float(std::string_view op, std::string_view arg, const Tensor& t);
Status check_ndim(std::string_view op, std::string_view arg, const Tensor& t, int ndim,
                  std::string_view layout);
Status check_contiguous(std::string_view op, std::string_view arg, const Tensor& t);
Status check_row_view(std::string_view op, std::string_view arg, const Tensor& t);
// `arg` must have exactly `shape` and be contiguous: the contract of every output.
Status check_output(std::string_view op, std::string_view arg, const Tensor& t, const Dims& shape,
                    DType dtype);
// Norm weights come prepared: in the activation dtype, or f32 (what the GPU keeps them in).
Status check_norm_weight(std::string_view op, const Tensor& weight, DType activation);
Status check_linear_weight(std::string_view op, const LinearWeight& w);
Status check_metadata(std::string_view op, const AttentionMetadata& m, int64_t num_tokens);

}  // namespace locus::op_checks

// The expert-exchange ops (ops.h, "expert exchange planned on the device"): argument checks.
#include <fmt/format.h>

#include "backend/op_checks.h"
#include "backend/ops.h"

namespace locus {
using namespace op_checks;  // the checks are this file's vocabulary

Status Ops::moe_dispatch_plan(const Tensor& topk_ids, const Tensor& topk_weights,
                              const Tensor& expert_owner, int64_t ranks, int64_t capacity,
                              Tensor& send_index, Tensor& send_ids, Tensor& send_weights,
                              Tensor& combine_index) {
  constexpr std::string_view op = "moe_dispatch_plan";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "topk_ids", topk_ids, 2, "[tokens, k]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "topk_ids", topk_ids, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "topk_ids", topk_ids));
  const int64_t tokens = topk_ids.size(0);
  const int64_t k = topk_ids.size(1);
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "topk_weights", topk_weights, topk_ids.shape(), DType::kF32));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "expert_owner", expert_owner, 1, "[experts]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "expert_owner", expert_owner, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "expert_owner", expert_owner));
  if (ranks < 1 || capacity < tokens) {
    return fail(op, fmt::format("{} ranks with blocks of {} rows cannot take {} tokens", ranks,
                                capacity, tokens));
  }
  if (ranks * capacity > (int64_t{1} << 31) - 1) {
    return fail(op, fmt::format("{} ranks x {} rows overflow the i32 slot index", ranks, capacity));
  }
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "send_index", send_index, Dims{ranks * capacity}, DType::kI32));
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "send_ids", send_ids, Dims{ranks * capacity, k}, DType::kI32));
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "send_weights", send_weights, Dims{ranks * capacity, k}, DType::kF32));
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "combine_index", combine_index, Dims{ranks, tokens}, DType::kI32));
  return do_moe_dispatch_plan(topk_ids, topk_weights, expert_owner, ranks, capacity, send_index,
                              send_ids, send_weights, combine_index);
}

Status Ops::gather_sum_rows(const Tensor& x, const Tensor& index, Tensor& out) {
  constexpr std::string_view op = "gather_sum_rows";
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "x", x, 2, "[rows, n]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "x", x, activation_dtype()));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "x", x));
  LOCUS_RETURN_IF_ERROR(check_ndim(op, "index", index, 2, "[m, tokens]"));
  LOCUS_RETURN_IF_ERROR(check_dtype(op, "index", index, DType::kI32));
  LOCUS_RETURN_IF_ERROR(check_contiguous(op, "index", index));
  LOCUS_RETURN_IF_ERROR(
      check_output(op, "out", out, Dims{index.size(1), x.size(1)}, activation_dtype()));
  return do_gather_sum_rows(x, index, out);
}

}  // namespace locus

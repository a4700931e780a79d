#include "dist/communicator.h"

#include <fmt/format.h>

namespace locus {

Status Communicator::check_tensor(const char* op, const char* name, const Tensor& t) const {
  if (!t.defined() || t.device() != device() || !t.is_contiguous()) {
    return invalid_argument(
        fmt::format("{}: {} must be a contiguous tensor on {} (rank {} of the {}), got {}", op,
                    name, device().to_string(), rank(), description(),
                    t.defined() ? t.to_string() : std::string("an undefined tensor")));
  }
  return Status::ok();
}

Status Communicator::check_summable(const char* op, const Tensor& t) const {
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16 && t.dtype() != DType::kF16) {
    return invalid_argument(fmt::format("{}: {} tensors cannot be summed (f32, bf16 or f16)", op,
                                        dtype_name(t.dtype())));
  }
  return Status::ok();
}

Status Communicator::all_reduce_sum(Tensor& t) {
  constexpr const char* op = "all_reduce_sum";
  LOCUS_RETURN_IF_ERROR(check_tensor(op, "t", t));
  LOCUS_RETURN_IF_ERROR(check_summable(op, t));
  return do_all_reduce_sum(t);
}

Status Communicator::all_gather(const Tensor& in, Tensor& out, int dim) {
  constexpr const char* op = "all_gather";
  LOCUS_RETURN_IF_ERROR(check_tensor(op, "in", in));
  LOCUS_RETURN_IF_ERROR(check_tensor(op, "out", out));
  const int nd = dim < 0 ? dim + in.ndim() : dim;
  if (nd < 0 || nd >= in.ndim()) {
    return invalid_argument(
        fmt::format("{}: dim {} is not a dimension of {}", op, dim, in.to_string()));
  }
  Dims want = in.shape();
  want[nd] = in.size(nd) * size();
  if (out.shape() != want || out.dtype() != in.dtype()) {
    return invalid_argument(fmt::format("{}: out is {}, want {} {}", op, out.to_string(),
                                        dtype_name(in.dtype()), want.to_string()));
  }
  return do_all_gather(in, out, nd);
}

Status Communicator::reduce_scatter_sum(const Tensor& in, Tensor& out) {
  constexpr const char* op = "reduce_scatter_sum";
  LOCUS_RETURN_IF_ERROR(check_tensor(op, "in", in));
  LOCUS_RETURN_IF_ERROR(check_tensor(op, "out", out));
  LOCUS_RETURN_IF_ERROR(check_summable(op, in));
  Dims want = in.shape();
  if (want.empty() || want[0] % size() != 0) {
    return invalid_argument(
        fmt::format("{}: in {} does not split into {} parts", op, in.to_string(), size()));
  }
  want[0] /= size();
  if (out.shape() != want || out.dtype() != in.dtype()) {
    return invalid_argument(fmt::format("{}: out is {}, want {} {}", op, out.to_string(),
                                        dtype_name(in.dtype()), want.to_string()));
  }
  return do_reduce_scatter_sum(in, out);
}

Status Communicator::broadcast(Tensor& t, int root) {
  constexpr const char* op = "broadcast";
  LOCUS_RETURN_IF_ERROR(check_tensor(op, "t", t));
  if (root < 0 || root >= size()) {
    return invalid_argument(
        fmt::format("{}: root {} is not a rank of a group of {}", op, root, size()));
  }
  return do_broadcast(t, root);
}

Status Communicator::all_to_all(const Tensor& in, std::span<const int64_t> send_counts, Tensor& out,
                                std::span<const int64_t> recv_counts) {
  constexpr const char* op = "all_to_all";
  LOCUS_RETURN_IF_ERROR(check_tensor(op, "in", in));
  LOCUS_RETURN_IF_ERROR(check_tensor(op, "out", out));
  if (in.ndim() < 1 || out.ndim() != in.ndim() || out.dtype() != in.dtype()) {
    return invalid_argument(fmt::format("{}: in {} and out {} must be rows of one shape and dtype",
                                        op, in.to_string(), out.to_string()));
  }
  for (int i = 1; i < in.ndim(); ++i) {
    if (in.size(i) != out.size(i)) {
      return invalid_argument(fmt::format("{}: in {} and out {} must have the same row shape", op,
                                          in.to_string(), out.to_string()));
    }
  }
  const auto ranks = static_cast<size_t>(size());
  if (send_counts.size() != ranks || recv_counts.size() != ranks) {
    return invalid_argument(fmt::format("{}: {} send and {} receive counts for a group of {}", op,
                                        send_counts.size(), recv_counts.size(), ranks));
  }
  int64_t sent = 0;
  int64_t received = 0;
  for (size_t r = 0; r < ranks; ++r) {
    if (send_counts[r] < 0 || recv_counts[r] < 0) {
      return invalid_argument(fmt::format("{}: negative count for rank {}", op, r));
    }
    sent += send_counts[r];
    received += recv_counts[r];
  }
  if (sent != in.size(0) || received != out.size(0)) {
    return invalid_argument(
        fmt::format("{}: the counts send {} and receive {} rows, but in is {} and out is {}", op,
                    sent, received, in.to_string(), out.to_string()));
  }
  return do_all_to_all(in, send_counts, out, recv_counts);
}

}  // namespace locus

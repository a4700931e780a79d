#include "dist/fake_communicator.h"

#include <fmt/format.h>

#include <cstring>

#include "core/float_convert.h"

namespace locus {
namespace {

Status check_host_contiguous(const char* op, const Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous()) {
    return invalid_argument(
        fmt::format("{}: the fake communicator needs a contiguous host tensor, got {}", op,
                    t.defined() ? t.to_string() : std::string("an undefined tensor")));
  }
  return Status::ok();
}

float load(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16:
      return bf16_bits_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF16:
      return f16_bits_to_f32(static_cast<const uint16_t*>(base)[i]);
    default:
      return static_cast<const float*>(base)[i];
  }
}

void store(void* base, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::kBF16:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16_bits(v);
      break;
    case DType::kF16:
      static_cast<uint16_t*>(base)[i] = f32_to_f16_bits(v);
      break;
    default:
      static_cast<float*>(base)[i] = v;
  }
}

bool summable(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

}  // namespace

class FakeCommunicator final : public Communicator {
 public:
  FakeCommunicator(std::shared_ptr<FakeGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size_; }
  std::string description() const override {
    return fmt::format("in-process group of {}", group_->size_);
  }

  Status all_reduce_sum(Tensor& t) override {
    LOCUS_RETURN_IF_ERROR(check_host_contiguous("all_reduce_sum", t));
    if (!summable(t.dtype())) {
      return invalid_argument(
          fmt::format("all_reduce_sum: {} tensors cannot be summed", dtype_name(t.dtype())));
    }
    LOCUS_RETURN_IF_ERROR(
        group_->exchange(rank_, {"all_reduce_sum", t.raw_data(), t.dtype(), t.shape(), 0}));
    // Summed into a private buffer: the peers are still reading this rank's t.
    const int64_t n = t.numel();
    std::vector<float> sum(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < size(); ++r) {
      const void* src = group_->posts_[static_cast<size_t>(r)].data;
      for (int64_t i = 0; i < n; ++i)
        sum[static_cast<size_t>(i)] += load(src, t.dtype(), i);
    }
    LOCUS_RETURN_IF_ERROR(group_->arrive_and_wait(rank_));
    for (int64_t i = 0; i < n; ++i)
      store(t.raw_data(), t.dtype(), i, sum[static_cast<size_t>(i)]);
    return Status::ok();
  }

  Status all_gather(const Tensor& in, Tensor& out, int dim) override {
    LOCUS_RETURN_IF_ERROR(check_host_contiguous("all_gather", in));
    LOCUS_RETURN_IF_ERROR(check_host_contiguous("all_gather", out));
    const int nd = dim < 0 ? dim + in.ndim() : dim;
    if (nd < 0 || nd >= in.ndim()) {
      return invalid_argument(
          fmt::format("all_gather: dim {} is not a dimension of {}", dim, in.to_string()));
    }
    Dims want = in.shape();
    want[nd] = in.size(nd) * size();
    if (out.shape() != want || out.dtype() != in.dtype()) {
      return invalid_argument(fmt::format("all_gather: out is {}, want {} {}", out.to_string(),
                                          dtype_name(in.dtype()), want.to_string()));
    }
    LOCUS_RETURN_IF_ERROR(
        group_->exchange(rank_, {"all_gather", in.raw_data(), in.dtype(), in.shape(), nd}));
    // in viewed as [outer, chunk] bytes; rank r's chunk lands at column r of out's [outer, size].
    int64_t outer = 1;
    for (int i = 0; i < nd; ++i)
      outer *= in.size(i);
    const size_t chunk = in.nbytes() / static_cast<size_t>(std::max<int64_t>(outer, 1));
    auto* dst = static_cast<char*>(out.raw_data());
    for (int r = 0; r < size(); ++r) {
      const auto* src = static_cast<const char*>(group_->posts_[static_cast<size_t>(r)].data);
      for (int64_t o = 0; o < outer; ++o) {
        std::memcpy(
            dst + (static_cast<size_t>(o) * static_cast<size_t>(size()) + static_cast<size_t>(r)) *
                      chunk,
            src + static_cast<size_t>(o) * chunk, chunk);
      }
    }
    return group_->arrive_and_wait(rank_);
  }

  Status reduce_scatter_sum(const Tensor& in, Tensor& out) override {
    LOCUS_RETURN_IF_ERROR(check_host_contiguous("reduce_scatter_sum", in));
    LOCUS_RETURN_IF_ERROR(check_host_contiguous("reduce_scatter_sum", out));
    if (!summable(in.dtype())) {
      return invalid_argument(
          fmt::format("reduce_scatter_sum: {} tensors cannot be summed", dtype_name(in.dtype())));
    }
    Dims want = in.shape();
    if (want.empty() || want[0] % size() != 0) {
      return invalid_argument(fmt::format("reduce_scatter_sum: in {} does not split into {} parts",
                                          in.to_string(), size()));
    }
    want[0] /= size();
    if (out.shape() != want || out.dtype() != in.dtype()) {
      return invalid_argument(fmt::format("reduce_scatter_sum: out is {}, want {} {}",
                                          out.to_string(), dtype_name(in.dtype()),
                                          want.to_string()));
    }
    LOCUS_RETURN_IF_ERROR(
        group_->exchange(rank_, {"reduce_scatter_sum", in.raw_data(), in.dtype(), in.shape(), 0}));
    const int64_t n = out.numel();
    const int64_t base = n * rank_;
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < size(); ++r)
        sum += load(group_->posts_[static_cast<size_t>(r)].data, in.dtype(), base + i);
      store(out.raw_data(), out.dtype(), i, sum);
    }
    return group_->arrive_and_wait(rank_);
  }

  Status broadcast(Tensor& t, int root) override {
    LOCUS_RETURN_IF_ERROR(check_host_contiguous("broadcast", t));
    if (root < 0 || root >= size()) {
      return invalid_argument(
          fmt::format("broadcast: root {} is not a rank of a group of {}", root, size()));
    }
    LOCUS_RETURN_IF_ERROR(
        group_->exchange(rank_, {"broadcast", t.raw_data(), t.dtype(), t.shape(), root}));
    std::vector<char> copy;
    if (rank_ != root) {
      const auto* src = static_cast<const char*>(group_->posts_[static_cast<size_t>(root)].data);
      copy.assign(src, src + t.nbytes());
    }
    LOCUS_RETURN_IF_ERROR(group_->arrive_and_wait(rank_));
    if (rank_ != root) std::memcpy(t.raw_data(), copy.data(), copy.size());
    return Status::ok();
  }

 private:
  std::shared_ptr<FakeGroup> group_;
  int rank_;
};

std::shared_ptr<FakeGroup> FakeGroup::create(int size, std::chrono::milliseconds timeout) {
  return std::shared_ptr<FakeGroup>(new FakeGroup(std::max(size, 1), timeout));
}

std::unique_ptr<Communicator> FakeGroup::communicator(int rank) {
  return std::make_unique<FakeCommunicator>(shared_from_this(), rank);
}

void FakeGroup::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (!aborted_) aborted_ = reason;
  cv_.notify_all();
}

Status FakeGroup::arrive_and_wait(int rank) {
  std::unique_lock lock(mutex_);
  if (aborted_)
    return internal_error(fmt::format("rank {}: the group was aborted: {}", rank, *aborted_));
  const uint64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return Status::ok();
  }
  const bool passed = cv_.wait_for(
      lock, timeout_, [&] { return generation_ != generation || aborted_.has_value(); });
  if (generation_ != generation) return Status::ok();
  if (aborted_)
    return internal_error(fmt::format("rank {}: the group was aborted: {}", rank, *aborted_));
  (void)passed;
  const std::string reason =
      fmt::format("rank {}: a collective waited over {} ms for its peers", rank, timeout_.count());
  aborted_ = reason;
  cv_.notify_all();
  return internal_error(reason);
}

Status FakeGroup::exchange(int rank, Post post) {
  {
    std::lock_guard lock(mutex_);
    posts_[static_cast<size_t>(rank)] = std::move(post);
  }
  LOCUS_RETURN_IF_ERROR(arrive_and_wait(rank));
  // Between the two barriers the posts are read-only, so no lock is needed to compare them.
  const Post& mine = posts_[static_cast<size_t>(rank)];
  for (int r = 0; r < size_; ++r) {
    const Post& other = posts_[static_cast<size_t>(r)];
    if (std::strcmp(other.op, mine.op) != 0 || other.dtype != mine.dtype ||
        other.shape != mine.shape || other.arg != mine.arg) {
      const std::string reason = fmt::format(
          "collectives disagree: rank {} called {}({} {}, {}) while rank {} called {}({} {}, {})",
          rank, mine.op, dtype_name(mine.dtype), mine.shape.to_string(), mine.arg, r, other.op,
          dtype_name(other.dtype), other.shape.to_string(), other.arg);
      abort(reason);
      return internal_error(reason);
    }
  }
  return Status::ok();
}

}  // namespace locus

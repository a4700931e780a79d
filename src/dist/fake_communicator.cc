#include "dist/fake_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/float_convert.h"

namespace locus {
namespace {

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
  Device device() const override { return Device::cpu(); }

 protected:
  Status do_all_reduce_sum(Tensor& t) override {
    LOCUS_RETURN_IF_ERROR(
        group_->exchange(rank_, {"all_reduce_sum", t.raw_data(), t.dtype(), t.shape(), 0, {}, {}}));
    // Summed into a private buffer: the peers are still reading this rank's t.
    const int64_t n = t.numel();
    std::vector<float> sum(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < size(); ++r) {
      const void* src = post(r).data;
      for (int64_t i = 0; i < n; ++i)
        sum[static_cast<size_t>(i)] += load(src, t.dtype(), i);
    }
    LOCUS_RETURN_IF_ERROR(group_->arrive_and_wait(rank_));
    for (int64_t i = 0; i < n; ++i)
      store(t.raw_data(), t.dtype(), i, sum[static_cast<size_t>(i)]);
    return Status::ok();
  }

  Status do_all_gather(const Tensor& in, Tensor& out, int dim) override {
    LOCUS_RETURN_IF_ERROR(group_->exchange(
        rank_, {"all_gather", in.raw_data(), in.dtype(), in.shape(), dim, {}, {}}));
    // in viewed as [outer, chunk] bytes; rank r's chunk lands at column r of out's [outer, size].
    int64_t outer = 1;
    for (int i = 0; i < dim; ++i)
      outer *= in.size(i);
    const size_t chunk = in.nbytes() / static_cast<size_t>(std::max<int64_t>(outer, 1));
    const auto ranks = static_cast<size_t>(size());
    auto* dst = static_cast<char*>(out.raw_data());
    for (int r = 0; r < size(); ++r) {
      const auto* src = static_cast<const char*>(post(r).data);
      for (int64_t o = 0; o < outer; ++o) {
        const auto row = static_cast<size_t>(o);
        std::memcpy(dst + (row * ranks + static_cast<size_t>(r)) * chunk, src + row * chunk, chunk);
      }
    }
    return group_->arrive_and_wait(rank_);
  }

  Status do_reduce_scatter_sum(const Tensor& in, Tensor& out) override {
    LOCUS_RETURN_IF_ERROR(group_->exchange(
        rank_, {"reduce_scatter_sum", in.raw_data(), in.dtype(), in.shape(), 0, {}, {}}));
    const int64_t n = out.numel();
    const int64_t base = n * rank_;
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < size(); ++r)
        sum += load(post(r).data, in.dtype(), base + i);
      store(out.raw_data(), out.dtype(), i, sum);
    }
    return group_->arrive_and_wait(rank_);
  }

  Status do_broadcast(Tensor& t, int root) override {
    LOCUS_RETURN_IF_ERROR(
        group_->exchange(rank_, {"broadcast", t.raw_data(), t.dtype(), t.shape(), root, {}, {}}));
    std::vector<char> copy;
    if (rank_ != root) {
      const auto* src = static_cast<const char*>(post(root).data);
      copy.assign(src, src + t.nbytes());
    }
    LOCUS_RETURN_IF_ERROR(group_->arrive_and_wait(rank_));
    if (rank_ != root) std::memcpy(t.raw_data(), copy.data(), copy.size());
    return Status::ok();
  }

  Status do_all_to_all(const Tensor& in, std::span<const int64_t> send_counts, Tensor& out,
                       std::span<const int64_t> recv_counts) override {
    // The ranks agree on the row shape, not on the row counts.
    Dims row = in.shape();
    row[0] = 1;
    LOCUS_RETURN_IF_ERROR(group_->exchange(rank_, {"all_to_all",
                                                   in.raw_data(),
                                                   in.dtype(),
                                                   row,
                                                   0,
                                                   {send_counts.begin(), send_counts.end()},
                                                   {recv_counts.begin(), recv_counts.end()}}));
    // From the row shape, not from in's bytes: a rank may send no rows and still receive some.
    const size_t row_bytes = dtype_bytes(in.dtype(), static_cast<size_t>(shape_numel(row)));
    const auto me = static_cast<size_t>(rank_);
    auto* dst = static_cast<char*>(out.raw_data());
    for (int r = 0; r < size(); ++r) {
      const std::vector<int64_t>& theirs = post(r).send_counts;
      int64_t offset = 0;  // rank r's rows for this rank start after those for lower ranks
      for (size_t q = 0; q < me; ++q)
        offset += theirs[q];
      const size_t bytes = static_cast<size_t>(theirs[me]) * row_bytes;
      if (bytes > 0) {
        std::memcpy(
            dst, static_cast<const char*>(post(r).data) + static_cast<size_t>(offset) * row_bytes,
            bytes);
      }
      dst += bytes;
    }
    return group_->arrive_and_wait(rank_);
  }

 private:
  const FakeGroup::Post& post(int r) const { return group_->posts_[static_cast<size_t>(r)]; }

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
    // An aborted group's posts may still be read by peers that have not noticed yet.
    if (aborted_)
      return internal_error(fmt::format("rank {}: the group was aborted: {}", rank, *aborted_));
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
  for (int s = 0; s < size_ && !mine.send_counts.empty(); ++s) {
    for (int d = 0; d < size_; ++d) {
      const int64_t sends = posts_[static_cast<size_t>(s)].send_counts[static_cast<size_t>(d)];
      const int64_t expects = posts_[static_cast<size_t>(d)].recv_counts[static_cast<size_t>(s)];
      if (sends != expects) {
        const std::string reason =
            fmt::format("{}: rank {} sends {} rows to rank {}, which expects {}", mine.op, s, sends,
                        d, expects);
        abort(reason);
        return internal_error(reason);
      }
    }
  }
  return Status::ok();
}

}  // namespace locus

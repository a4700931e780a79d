// A group of ranks that run collectives together: tensor parallelism all-reduces the row-parallel
// projections' partial sums and gathers vocab-parallel logits; expert parallelism sums what each
// rank's experts contributed, or sends tokens to their experts' ranks (all_to_all). Every rank
// calls the same collectives in the same order with tensors of the same shape and dtype (NCCL's
// contract). Implementations: an in-process group of threads over host memory
// (fake_communicator.h, the CPU tests and CPU serving), NCCL on GPUs.
//
// The public methods check their arguments once, here, and call the implementation's do_*
// hooks with contiguous tensors on device() whose shapes agree (the Ops pattern).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace locus {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "in-process group of 4", "NCCL group of 8 (rank 3 on cuda:3)".
  virtual std::string description() const = 0;
  // Where this rank's tensors live.
  virtual Device device() const = 0;

  // In place: t = the sum of every rank's t. f32, bf16 or f16.
  Status all_reduce_sum(Tensor& t);
  // out = every rank's `in` concatenated along `dim` in rank order: out has in's shape except
  // out.size(dim) = size() * in.size(dim).
  Status all_gather(const Tensor& in, Tensor& out, int dim);
  // out = this rank's part (along dim 0) of the sum of every rank's `in`:
  // in [size() * n, ...], out [n, ...].
  Status reduce_scatter_sum(const Tensor& in, Tensor& out);
  // In place: every rank's t becomes root's t.
  Status broadcast(Tensor& t, int root);
  // Rows (dim 0) to every rank: the first send_counts[0] rows of `in` go to rank 0, the next
  // send_counts[1] to rank 1, ...; out receives recv_counts[r] rows from each rank r, in rank
  // order. in and out have the same row shape and dtype; rank a's send_counts[b] must equal
  // rank b's recv_counts[a] (an exchange of counts first, all_to_all of one row each, tells
  // every rank what it receives). Counts live on the host.
  Status all_to_all(const Tensor& in, std::span<const int64_t> send_counts, Tensor& out,
                    std::span<const int64_t> recv_counts);

 protected:
  virtual Status do_all_reduce_sum(Tensor& t) = 0;
  // dim is in [0, in.ndim()).
  virtual Status do_all_gather(const Tensor& in, Tensor& out, int dim) = 0;
  virtual Status do_reduce_scatter_sum(const Tensor& in, Tensor& out) = 0;
  virtual Status do_broadcast(Tensor& t, int root) = 0;
  // Both spans have size() entries; their sums match in's and out's rows.
  virtual Status do_all_to_all(const Tensor& in, std::span<const int64_t> send_counts, Tensor& out,
                               std::span<const int64_t> recv_counts) = 0;

 private:
  Status check_tensor(const char* op, const char* name, const Tensor& t) const;
  Status check_summable(const char* op, const Tensor& t) const;
};

// The rank of `n` items (heads, rows, experts) split into `size` equal contiguous parts.
struct ShardRange {
  int64_t start = 0;
  int64_t length = 0;
};

inline ShardRange even_shard(int64_t n, int rank, int size) {
  const int64_t part = n / size;
  return {part * rank, part};
}

}  // namespace locus

// A group of ranks that run collectives together: tensor parallelism all-reduces the row-parallel
// projections' partial sums and gathers vocab-parallel logits; expert parallelism sums what each
// rank's experts contributed. Every rank calls the same collectives in the same order with
// tensors of the same shape and dtype (NCCL's contract). Implementations: an in-process group of
// threads over host memory (fake_communicator.h, the CPU tests and CPU serving), NCCL on GPUs.
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace locus {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "fake group of 4", "nccl group of 8 (node 0 of 2)".
  virtual std::string description() const = 0;

  // In place: t = the sum of every rank's t. Contiguous f32, bf16 or f16.
  virtual Status all_reduce_sum(Tensor& t) = 0;
  // out = every rank's `in` concatenated along `dim` in rank order. Contiguous; out has in's
  // shape except out.size(dim) = size() * in.size(dim).
  virtual Status all_gather(const Tensor& in, Tensor& out, int dim) = 0;
  // out = this rank's part (along dim 0) of the sum of every rank's `in`:
  // in [size() * n, ...], out [n, ...].
  virtual Status reduce_scatter_sum(const Tensor& in, Tensor& out) = 0;
  // In place: every rank's t becomes root's t.
  virtual Status broadcast(Tensor& t, int root) = 0;
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

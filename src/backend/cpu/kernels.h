// Internal to backend/cpu/: the GEMM engines, weight dequantization and row iteration shared by
// the CPU ops. Plain loops over raw pointers; callers (CpuBackend::do_*) have checked shapes.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/ops.h"
#include "core/status.h"
#include "core/tensor.h"

namespace locus::cpu {

enum class GemmEngine : uint8_t {
  // OpenBLAS cblas_sgemm. Fast; its blocking and kernel choice depend on the number of rows,
  // so a row's result can change in the last bits with the batch it is computed in.
  kOpenBlas,
  // Plain dot products in a fixed order that depends only on the reduction length: a row's
  // result is bit-identical whatever else is in the batch (exact batch invariance).
  kBatchInvariant,
};

struct Context {
  GemmEngine gemm_engine = GemmEngine::kOpenBlas;
  ThreadPool* pool = nullptr;
};

// c[i, j] = sum_l a[i, l] * w[j, l] (+ bias[j]), f32 accumulation. a: m rows with row stride
// lda; w: dense [n, k]; c: dense [m, n]; bias may be null.
void gemm(const Context& ctx, const float* a, int64_t lda, const float* w, const float* bias,
          float* c, int64_t m, int64_t n, int64_t k);

// A dense, contiguous f32 copy of any float tensor (a no-copy view when it already is one).
// Reads unaligned and read-only checkpoint views safely.
Expected<Tensor> to_dense_f32(const Tensor& t);

// The weight as dense f32 [out, in]: bf16/f16 widened exactly; fp8 e4m3 dequantized as
// fp8 * scale_inv[i / block_out][j / block_in] (partial edge blocks use their own scale).
Expected<Tensor> dense_weight(const LinearWeight& w);

// out[rows, out_features] = x W^T + bias for f32 rows x (row stride lda).
Status linear_rows(const Context& ctx, const float* x, int64_t lda, int64_t rows,
                   const LinearWeight& w, float* out);

// Visits every row of a tensor with unit stride in its last dim, in row-major order of the
// leading indices: fn(row_number, pointer to the row's first element).
template <typename T, typename Fn>
void for_each_row(const Tensor& t, Fn&& fn) {
  const int ndim = t.ndim();
  const int64_t rows = t.size(-1) == 0 ? 0 : t.numel() / t.size(-1);
  std::vector<int64_t> index(static_cast<size_t>(ndim > 0 ? ndim - 1 : 0), 0);
  T* base = t.data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = 0;
    for (int d = 0; d < ndim - 1; ++d)
      offset += index[static_cast<size_t>(d)] * t.stride(d);
    fn(r, base + offset);
    for (int d = ndim - 2; d >= 0; --d) {
      if (++index[static_cast<size_t>(d)] < t.size(d)) break;
      index[static_cast<size_t>(d)] = 0;
    }
  }
}

}  // namespace locus::cpu

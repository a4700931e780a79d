// GEMM and weight dequantization for the CPU reference. Every product accumulates in f32.
#include <cblas.h>
#include <fmt/format.h>

#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/convert.h"

namespace locus::cpu {
namespace {

// One output element. 16 interleaved partial sums over l, folded pairwise, then the tail: the
// order depends on k alone, so the value never depends on the batch, the row's position in it
// or the thread split. 16 lanes give the compiler room to vectorize without reassociating.
float dot_fixed_order(const float* a, const float* b, int64_t k) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t l = 0;
  for (; l + kLanes <= k; l += kLanes) {
    for (int j = 0; j < kLanes; ++j)
      acc[j] += a[l + j] * b[l + j];
  }
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j)
      acc[j] += acc[j + width];
  }
  float tail = 0.0f;
  for (; l < k; ++l)
    tail += a[l] * b[l];
  return acc[0] + tail;
}

void gemm_batch_invariant(const Context& ctx, const float* a, int64_t lda, const float* w,
                          const float* bias, float* c, int64_t m, int64_t n, int64_t k) {
  // Split over output columns; each element is still one serial dot product.
  auto columns = [&](int64_t begin, int64_t end) {
    for (int64_t i = 0; i < m; ++i) {
      const float* row = a + i * lda;
      float* out = c + i * n;
      for (int64_t j = begin; j < end; ++j)
        out[j] = dot_fixed_order(row, w + j * k, k) + (bias ? bias[j] : 0.0f);
    }
  };
  const int64_t work = m * n * k;
  if (ctx.pool != nullptr && work >= (int64_t{1} << 18)) {
    ctx.pool->parallel_for(n, 16, columns);
  } else {
    columns(0, n);
  }
}

void gemm_openblas(const float* a, int64_t lda, const float* w, const float* bias, float* c,
                   int64_t m, int64_t n, int64_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(lda),
              w, static_cast<blasint>(k), 0.0f, c, static_cast<blasint>(n));
  if (bias == nullptr) return;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j)
      c[i * n + j] += bias[j];
  }
}

}  // namespace

void gemm(const Context& ctx, const float* a, int64_t lda, const float* w, const float* bias,
          float* c, int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j)
        c[i * n + j] = bias ? bias[j] : 0.0f;
    }
    return;
  }
  if (ctx.gemm_engine == GemmEngine::kOpenBlas) {
    gemm_openblas(a, lda, w, bias, c, m, n, k);
  } else {
    gemm_batch_invariant(ctx, a, lda, w, bias, c, m, n, k);
  }
}

Expected<Tensor> to_dense_f32(const Tensor& t) {
  if (t.dtype() == DType::kF32 && t.is_contiguous() &&
      reinterpret_cast<uintptr_t>(t.raw_data()) % alignof(float) == 0) {
    return t;
  }
  if (!t.is_contiguous()) {
    return invalid_argument(fmt::format("to_dense_f32: {} is not contiguous", t.to_string()));
  }
  LOCUS_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(t.shape(), DType::kF32));
  const void* src = t.raw_data();
  // Checkpoint views may be misaligned for their element type (safetensors does not pad):
  // copy the bytes to aligned memory before reading them as 16-bit words.
  Tensor aligned;
  if (reinterpret_cast<uintptr_t>(src) % 8 != 0) {
    LOCUS_ASSIGN_OR_RETURN(aligned, Tensor::empty(t.shape(), t.dtype()));
    std::memcpy(aligned.raw_data(), src, t.nbytes());
    src = aligned.raw_data();
  }
  LOCUS_RETURN_IF_ERROR(
      convert_to_f32(t.dtype(), src, out.data<float>(), static_cast<size_t>(t.numel())));
  return out;
}

Expected<Tensor> dense_weight(const LinearWeight& w) {
  LOCUS_ASSIGN_OR_RETURN(Tensor dense, to_dense_f32(w.weight));
  if (!w.is_block_fp8()) return dense;
  LOCUS_ASSIGN_OR_RETURN(Tensor scales, to_dense_f32(w.scale_inv));
  // to_dense_f32 decoded the fp8 codes exactly; now apply each block's inverse scale.
  if (dense.raw_data() == w.weight.raw_data()) {
    return internal_error("dense_weight: fp8 weight was not copied");
  }
  const int64_t rows = w.out_features();
  const int64_t cols = w.in_features();
  const int64_t scale_cols = scales.size(1);
  float* d = dense.data<float>();
  const float* s = scales.data<float>();
  for (int64_t i = 0; i < rows; ++i) {
    const float* scale_row = s + (i / w.block_out) * scale_cols;
    for (int64_t j = 0; j < cols; ++j)
      d[i * cols + j] *= scale_row[j / w.block_in];
  }
  return dense;
}

Status linear_rows(const Context& ctx, const float* x, int64_t lda, int64_t rows,
                   const LinearWeight& w, float* out) {
  LOCUS_ASSIGN_OR_RETURN(Tensor weight, dense_weight(w));
  Tensor bias;
  if (w.bias.defined()) {
    LOCUS_ASSIGN_OR_RETURN(bias, to_dense_f32(w.bias));
  }
  gemm(ctx, x, lda, weight.data<float>(), bias.defined() ? bias.data<float>() : nullptr, out, rows,
       w.out_features(), w.in_features());
  return Status::ok();
}

}  // namespace locus::cpu

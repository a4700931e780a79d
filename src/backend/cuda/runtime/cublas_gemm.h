// bf16 GEMMs through cuBLASLt (f32 accumulation): y[T, N] = x[T, K] W[N, K]^T with row-major
// x (row stride ldx) and W (nn.Linear layout), y bf16 or f32. Plans (descriptors and the
// heuristic's algorithm) are cached per shape, so a decode step pays the heuristic once.
// Also the strided-batched GEMMs of MLA's weight absorption (cuBLAS).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "backend/cuda/runtime/cublas_api.h"
#include "core/status.h"

namespace locus::cuda {

class CublasGemm {
 public:
  // `workspace` must stay valid as long as this object (cuBLASLt scratch, captured in graphs).
  static Expected<std::unique_ptr<CublasGemm>> create(cudaStream_t stream, void* workspace,
                                                      size_t workspace_bytes);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // y = x W^T: x bf16 [m, k] (row stride ldx), w bf16 [n, k] contiguous, y [m, n] with row
  // stride ldy (0 = n; bf16, or f32 when y_f32).
  Status linear(const void* x, int64_t ldx, const void* w, void* y, bool y_f32, int64_t m,
                int64_t n, int64_t k, int64_t ldy = 0);

  // Column-major strided-batched bf16 GEMM C = op(A) op(B) (cublasGemmStridedBatchedEx, f32
  // compute): the MLA absorption products.
  Status batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
                 int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b,
                 void* c, int64_t ldc, int64_t stride_c, int64_t batch);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool>;

  CublasGemm() = default;
  Expected<Plan*> plan(int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldy, bool y_f32);

  const CublasApi* api_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::mutex mutex_;
  std::map<Key, Plan> plans_;
};

}  // namespace locus::cuda

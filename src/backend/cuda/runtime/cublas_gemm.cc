#include "backend/cuda/runtime/cublas_gemm.h"

#include <fmt/format.h>

namespace locus::cuda {
namespace {

Status lt_error(const char* what, cublasStatus_t s) {
  return internal_error(fmt::format("cuBLASLt {}: status {}", what, static_cast<int>(s)));
}

#define LOCUS_LT(call)                                           \
  do {                                                           \
    cublasStatus_t _s = (call);                                  \
    if (_s != CUBLAS_STATUS_SUCCESS) return lt_error(#call, _s); \
  } while (0)

}  // namespace

Expected<std::unique_ptr<CublasGemm>> CublasGemm::create(cudaStream_t stream, void* workspace,
                                                         size_t workspace_bytes) {
  std::unique_ptr<CublasGemm> g(new CublasGemm());
  LOCUS_ASSIGN_OR_RETURN(g->api_, cublas_api());
  g->stream_ = stream;
  g->workspace_ = workspace;
  g->workspace_bytes_ = workspace_bytes;
  LOCUS_LT(g->api_->lt_create(&g->lt_));
  LOCUS_LT(g->api_->create(&g->blas_));
  LOCUS_LT(g->api_->set_stream(g->blas_, stream));
  LOCUS_LT(g->api_->set_workspace(g->blas_, workspace, workspace_bytes));
  return g;
}

CublasGemm::~CublasGemm() {
  if (api_ == nullptr) return;
  for (auto& [key, p] : plans_) {
    api_->lt_layout_destroy(p.a);
    api_->lt_layout_destroy(p.b);
    api_->lt_layout_destroy(p.c);
    api_->lt_desc_destroy(p.desc);
  }
  if (blas_ != nullptr) api_->destroy(blas_);
  if (lt_ != nullptr) api_->lt_destroy(lt_);
}

// Row-major y[m, n] = x[m, k] W[n, k]^T is column-major y^T[n, m] = W^T... with W's bytes read
// as a column-major [k, n] matrix (transposed: op T) and x's as column-major [k, m] (op N).
Expected<CublasGemm::Plan*> CublasGemm::plan(int64_t m, int64_t n, int64_t k, int64_t ldx,
                                             int64_t ldy, bool y_f32) {
  const Key key{m, n, k, ldx, ldy, y_f32};
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;
  Plan p;
  LOCUS_LT(api_->lt_desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LOCUS_LT(api_->lt_desc_set(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LOCUS_LT(api_->lt_desc_set(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  LOCUS_LT(api_->lt_layout_create(&p.a, CUDA_R_16BF, static_cast<uint64_t>(k),
                                  static_cast<uint64_t>(n), k));
  LOCUS_LT(api_->lt_layout_create(&p.b, CUDA_R_16BF, static_cast<uint64_t>(k),
                                  static_cast<uint64_t>(m), ldx));
  LOCUS_LT(api_->lt_layout_create(&p.c, y_f32 ? CUDA_R_32F : CUDA_R_16BF, static_cast<uint64_t>(n),
                                  static_cast<uint64_t>(m), ldy));
  cublasLtMatmulPreference_t pref = nullptr;
  LOCUS_LT(api_->lt_pref_create(&pref));
  const uint64_t ws = workspace_bytes_;
  api_->lt_pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t s = api_->lt_heuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  api_->lt_pref_destroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
    api_->lt_layout_destroy(p.a);
    api_->lt_layout_destroy(p.b);
    api_->lt_layout_destroy(p.c);
    api_->lt_desc_destroy(p.desc);
    return internal_error(fmt::format(
        "cuBLASLt has no algorithm for a bf16 GEMM of m={} n={} k={} (ldx {}): status {}", m, n, k,
        ldx, static_cast<int>(s)));
  }
  p.algo = result.algo;
  return &plans_.emplace(key, p).first->second;
}

Status CublasGemm::linear(const void* x, int64_t ldx, const void* w, void* y, bool y_f32, int64_t m,
                          int64_t n, int64_t k, int64_t ldy) {
  if (m == 0 || n == 0) return Status::ok();
  std::lock_guard lock(mutex_);
  LOCUS_ASSIGN_OR_RETURN(Plan * p, plan(m, n, k, ldx, ldy > 0 ? ldy : n, y_f32));
  const float alpha = 1.0f, beta = 0.0f;
  LOCUS_LT(api_->lt_matmul(lt_, p->desc, &alpha, w, p->a, x, p->b, &beta, y, p->c, y, p->c,
                           &p->algo, workspace_, workspace_bytes_, stream_));
  return Status::ok();
}

Status CublasGemm::batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                           const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
                           int64_t stride_b, void* c, int64_t ldc, int64_t stride_c,
                           int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return Status::ok();
  std::lock_guard lock(mutex_);
  const float alpha = 1.0f, beta = 0.0f;
  LOCUS_LT(api_->gemm_strided_batched_ex(
      blas_, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha, a, CUDA_R_16BF,
      static_cast<int>(lda), stride_a, b, CUDA_R_16BF, static_cast<int>(ldb), stride_b, &beta, c,
      CUDA_R_16BF, static_cast<int>(ldc), stride_c, static_cast<int>(batch), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
  return Status::ok();
}

}  // namespace locus::cuda

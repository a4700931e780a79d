// Launchers of the norm and rope kernels.
#include "backend/cuda/kernels/elementwise/elementwise.cuh"

namespace locus::cuda {
using namespace elementwise;

namespace {
int norm_threads(int64_t n) {
  if (n >= 2048) return 512;
  if (n >= 512) return 256;
  return 128;
}
}  // namespace

cudaError_t launch_rms_norm(const RowView& x, const float* weight, float eps, void* out,
                            cudaStream_t stream) {
  const int64_t rows = x.dim0 * x.dim1;
  if (rows == 0) return cudaSuccess;
  rms_norm_kernel<<<static_cast<unsigned>(rows), norm_threads(x.n), 0, stream>>>(
      x, weight, eps, static_cast<bf16*>(out));
  return cudaGetLastError();
}

cudaError_t launch_embedding_rms_norm(const void* table, int64_t table_rows, int64_t n,
                                      const int32_t* ids, int64_t num_ids, const float* weight,
                                      float eps, void* residual, void* out, cudaStream_t stream) {
  if (num_ids == 0) return cudaSuccess;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n % 256 == 0 && n <= 8192 && aligned(table) && aligned(weight) && aligned(residual) &&
      aligned(out)) {
    embedding_rms_norm_vec_kernel<<<static_cast<unsigned>(num_ids), static_cast<unsigned>(n / 8), 0,
                                    stream>>>(static_cast<const bf16*>(table), table_rows, ids, n,
                                              weight, eps, static_cast<bf16*>(residual),
                                              static_cast<bf16*>(out));
    return cudaGetLastError();
  }
  const cudaError_t err =
      launch_embedding(table, table_rows, n, sizeof(bf16), ids, num_ids, residual, stream);
  if (err != cudaSuccess) return err;
  RowView x;
  x.data = residual;
  x.dim0 = num_ids;
  x.dim1 = 1;
  x.stride0 = n;
  x.stride1 = 0;
  x.n = n;
  return launch_rms_norm(x, weight, eps, out, stream);
}

cudaError_t launch_sum_squares(const RowView& x, float* out, cudaStream_t stream) {
  if (x.dim0 == 0) return cudaSuccess;
  sum_squares_kernel<<<static_cast<unsigned>(x.dim0), norm_threads(x.n), 0, stream>>>(x, out);
  return cudaGetLastError();
}

cudaError_t launch_split_rms_norm(const RowView& x, const float* weight, const float* sum_squares,
                                  int64_t width, float eps, void* out, cudaStream_t stream) {
  if (x.dim0 == 0) return cudaSuccess;
  split_rms_norm_kernel<<<static_cast<unsigned>(x.dim0), norm_threads(x.n), 0, stream>>>(
      x, weight, sum_squares, static_cast<float>(width), eps, static_cast<bf16*>(out));
  return cudaGetLastError();
}

cudaError_t launch_add_rms_norm(const void* residual, const void* x, int64_t rows, int64_t n,
                                const float* weight, float eps, void* residual_out, void* out,
                                cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const auto* r = static_cast<const bf16*>(residual);
  const auto* xs = static_cast<const bf16*>(x);
  auto* r_out = static_cast<bf16*>(residual_out);
  if (n % 256 == 0 && n <= 8192 && aligned(residual) && aligned(x) && aligned(weight) &&
      aligned(residual_out) && aligned(out)) {
    add_rms_norm_vec_kernel<<<static_cast<unsigned>(rows), static_cast<unsigned>(n / 8), 0,
                              stream>>>(r, xs, n, weight, eps, r_out, static_cast<bf16*>(out));
    return cudaGetLastError();
  }
  add_rms_norm_kernel<<<static_cast<unsigned>(rows), norm_threads(n), 0, stream>>>(
      r, xs, n, weight, eps, r_out, static_cast<bf16*>(out));
  return cudaGetLastError();
}

cudaError_t launch_rope(void* x, int64_t tokens, int64_t heads, int64_t stride_token,
                        int64_t stride_head, const int32_t* positions, const float* inv_freq,
                        int rotary_dim, float attention_factor, bool neox, cudaStream_t stream) {
  if (tokens == 0 || rotary_dim == 0) return cudaSuccess;
  const int64_t work = heads * (rotary_dim / 2);
  const int threads = work >= 256 ? 256 : (work >= 128 ? 128 : 64);
  rope_kernel<<<static_cast<unsigned>(tokens), threads, 0, stream>>>(
      static_cast<bf16*>(x), tokens, heads, stride_token, stride_head, positions, inv_freq,
      rotary_dim / 2, attention_factor, neox);
  return cudaGetLastError();
}

}  // namespace locus::cuda

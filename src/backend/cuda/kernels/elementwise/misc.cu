// Launchers of the gather, activation, add, conversion and KV-cache write kernels.
#include "backend/cuda/kernels/elementwise/elementwise.cuh"

namespace locus::cuda {
using namespace elementwise;

namespace {
constexpr int kThreads = 256;
}

cudaError_t launch_embedding(const void* table, int64_t table_rows, int64_t n, size_t elem_bytes,
                             const int32_t* ids, int64_t num_ids, void* out, cudaStream_t stream) {
  if (num_ids == 0) return cudaSuccess;
  gather_rows_kernel<<<static_cast<unsigned>(num_ids), 128, 0, stream>>>(
      static_cast<const char*>(table), table_rows, n * static_cast<int64_t>(elem_bytes), ids,
      num_ids, static_cast<char*>(out));
  return cudaGetLastError();
}

cudaError_t launch_gather_rows(const void* x, int64_t n, size_t elem_bytes, const int32_t* indices,
                               int64_t num_indices, void* out, cudaStream_t stream) {
  // The Ops layer has checked indices against x's rows; INT64_MAX disables the clamp.
  return launch_embedding(x, INT64_MAX, n, elem_bytes, indices, num_indices, out, stream);
}

cudaError_t launch_gather_sum_rows(const void* x, const int32_t* index, int m, int64_t tokens,
                                   int64_t n, void* out, cudaStream_t stream) {
  if (tokens == 0 || n == 0) return cudaSuccess;
  const int threads = n >= 1024 ? 256 : 128;
  gather_sum_rows_kernel<<<static_cast<unsigned>(tokens), threads, 0, stream>>>(
      static_cast<const bf16*>(x), index, m, tokens, n, static_cast<bf16*>(out));
  return cudaGetLastError();
}

cudaError_t launch_silu_and_mul(const void* gate, int64_t gate_stride, const void* up,
                                int64_t up_stride, int64_t rows, int64_t n, void* out,
                                cudaStream_t stream) {
  if (rows * n == 0) return cudaSuccess;
  silu_and_mul_kernel<<<grid_for(rows * n, kThreads), kThreads, 0, stream>>>(
      static_cast<const bf16*>(gate), gate_stride, static_cast<const bf16*>(up), up_stride, rows, n,
      static_cast<bf16*>(out));
  return cudaGetLastError();
}

cudaError_t launch_add(const void* a, const void* b, void* out, int64_t n, bool is_f32,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (is_f32) {
    add_kernel<float><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(out), n);
  } else {
    add_kernel<bf16><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const bf16*>(a), static_cast<const bf16*>(b), static_cast<bf16*>(out), n);
  }
  return cudaGetLastError();
}

cudaError_t launch_add_bias(void* out, int64_t ld, const float* bias, int64_t rows, int64_t n,
                            bool is_f32, cudaStream_t stream) {
  if (rows * n == 0) return cudaSuccess;
  if (is_f32) {
    add_bias_kernel<float><<<grid_for(rows * n, kThreads), kThreads, 0, stream>>>(
        static_cast<float*>(out), ld, bias, rows, n);
  } else {
    add_bias_kernel<bf16><<<grid_for(rows * n, kThreads), kThreads, 0, stream>>>(
        static_cast<bf16*>(out), ld, bias, rows, n);
  }
  return cudaGetLastError();
}

cudaError_t launch_f32_to_bf16(const float* src, void* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  f32_to_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(src, static_cast<bf16*>(dst),
                                                                     n);
  return cudaGetLastError();
}

cudaError_t launch_bf16_to_f32(const void* src, float* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  bf16_to_f32_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const bf16*>(src),
                                                                     dst, n);
  return cudaGetLastError();
}

cudaError_t launch_copy_rows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride,
                             int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows * n == 0) return cudaSuccess;
  copy_rows_kernel<<<grid_for(rows * n, kThreads), kThreads, 0, stream>>>(
      static_cast<const bf16*>(src), src_stride, static_cast<bf16*>(dst), dst_stride, rows, n);
  return cudaGetLastError();
}

cudaError_t launch_write_kv_cache(const KvWriteArgs& args, cudaStream_t stream) {
  if (args.tokens == 0) return cudaSuccess;
  write_kv_cache_kernel<<<static_cast<unsigned>(args.tokens), 128, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launch_write_mla_cache(const void* latent, int64_t latent_stride, int64_t rank,
                                   const void* k_pe, int64_t k_pe_stride, int64_t rope_dim,
                                   const int64_t* slot_mapping, int64_t tokens, void* cache,
                                   cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  write_mla_cache_kernel<<<static_cast<unsigned>(tokens), 128, 0, stream>>>(
      static_cast<const bf16*>(latent), latent_stride, rank, static_cast<const bf16*>(k_pe),
      k_pe_stride, rope_dim, slot_mapping, static_cast<bf16*>(cache));
  return cudaGetLastError();
}

}  // namespace locus::cuda

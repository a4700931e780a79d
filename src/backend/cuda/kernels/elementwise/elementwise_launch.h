// Host entry points of the small memory-bound kernels around the GEMMs and attention:
// embedding, norms, rope, activation, KV-cache writes, row copies. Device pointers in, launch
// status out; no host synchronization, so every launch can be captured in a CUDA graph.
// Activations are bf16; norm weights, rope frequencies and biases f32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace locus::cuda {

// A 2-level row view: row (i, j) of n elements starts at data + i * stride0 + j * stride1
// (elements), for i < dim0, j < dim1. A plain matrix is dim1 = 1.
struct RowView {
  const void* data = nullptr;
  int64_t dim0 = 0;
  int64_t dim1 = 1;
  int64_t stride0 = 0;
  int64_t stride1 = 0;
  int64_t n = 0;
};

// out[t] = table[ids[t]] (elem_bytes per element, rows of n elements; ids outside [0, rows)
// give zero rows rather than a fault: the Ops layer checks ids on the host where it can).
cudaError_t launch_embedding(const void* table, int64_t table_rows, int64_t n, size_t elem_bytes,
                             const int32_t* ids, int64_t num_ids, void* out, cudaStream_t stream);
// residual[t] = table[ids[t]] (bf16 rows of n, ids as in launch_embedding); out =
// rms_norm(residual) * weight. One kernel where n is a multiple of 256 up to 8192 and the
// pointers are 16-byte aligned, else launch_embedding then launch_rms_norm.
cudaError_t launch_embedding_rms_norm(const void* table, int64_t table_rows, int64_t n,
                                      const int32_t* ids, int64_t num_ids, const float* weight,
                                      float eps, void* residual, void* out, cudaStream_t stream);
// out[i] = x[indices[i]], rows of n elements of elem_bytes, x rows contiguous; index -1 gives
// a zero row.
cudaError_t launch_gather_rows(const void* x, int64_t n, size_t elem_bytes, const int32_t* indices,
                               int64_t num_indices, void* out, cudaStream_t stream);

// out[t] = sum over j < m of x[index[j * tokens + t]] (bf16 rows of n; index -1 adds nothing).
cudaError_t launch_gather_sum_rows(const void* x, const int32_t* index, int m, int64_t tokens,
                                   int64_t n, void* out, cudaStream_t stream);
// out (contiguous [dim0 * dim1, n] bf16) = x / sqrt(mean(x^2) + eps) * weight.
cudaError_t launch_rms_norm(const RowView& x, const float* weight, float eps, void* out,
                            cudaStream_t stream);
// The halves of an RMSNorm whose rows are split over ranks: out[r] = sum of x[r, :]^2 (f32,
// rows of the matrix view x, dim1 = 1); then out = x * rsqrt(sum_squares[r] / width + eps) *
// weight, where width is the whole row's length (rms_norm's arithmetic).
cudaError_t launch_sum_squares(const RowView& x, float* out, cudaStream_t stream);
cudaError_t launch_split_rms_norm(const RowView& x, const float* weight, const float* sum_squares,
                                  int64_t width, float eps, void* out, cudaStream_t stream);
// residual_out = residual + x (rounded to bf16, as the residual stream is bf16);
// out = rms_norm(residual_out). residual_out may be residual (in place).
cudaError_t launch_add_rms_norm(const void* residual, const void* x, int64_t rows, int64_t n,
                                const float* weight, float eps, void* residual_out, void* out,
                                cudaStream_t stream);

// Rotates x[t, h, :rotary_dim] in place (neox: pairs (i, i + rotary_dim/2); else interleaved
// (2i, 2i+1)). cos/sin of f32(position * inv_freq[i]) times attention_factor, as transformers.
cudaError_t launch_rope(void* x, int64_t tokens, int64_t heads, int64_t stride_token,
                        int64_t stride_head, const int32_t* positions, const float* inv_freq,
                        int rotary_dim, float attention_factor, bool neox, cudaStream_t stream);

// out [rows, n] = silu(gate) * up; gate/up rows at the given strides.
cudaError_t launch_silu_and_mul(const void* gate, int64_t gate_stride, const void* up,
                                int64_t up_stride, int64_t rows, int64_t n, void* out,
                                cudaStream_t stream);
// out = a + b over n contiguous elements, bf16 (f32 when is_f32). out may alias a.
cudaError_t launch_add(const void* a, const void* b, void* out, int64_t n, bool is_f32,
                       cudaStream_t stream);
// out[r * ld + c] += bias[c] for r < rows, c < n (bf16, or f32 when is_f32).
cudaError_t launch_add_bias(void* out, int64_t ld, const float* bias, int64_t rows, int64_t n,
                            bool is_f32, cudaStream_t stream);
// Converts n contiguous f32 values to bf16, or bf16 to f32.
cudaError_t launch_f32_to_bf16(const float* src, void* dst, int64_t n, cudaStream_t stream);
cudaError_t launch_bf16_to_f32(const void* src, float* dst, int64_t n, cudaStream_t stream);
// dst[r * dst_stride + c] = src[r * src_stride + c] for r < rows, c < n (bf16).
cudaError_t launch_copy_rows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride,
                             int64_t rows, int64_t n, cudaStream_t stream);

// Writes token t's K/V (row views [T, H, D] with the given strides) into the NHD caches
// [blocks, block_size, H, D] at slot_mapping[t]; slots < 0 are skipped (graph padding).
struct KvWriteArgs {
  const void* k = nullptr;
  int64_t k_stride_token = 0, k_stride_head = 0;
  const void* v = nullptr;
  int64_t v_stride_token = 0, v_stride_head = 0;
  const int64_t* slot_mapping = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;
};
cudaError_t launch_write_kv_cache(const KvWriteArgs& args, cudaStream_t stream);
// Ops::qkv_norm_rope_write_kv for per-head or no q/k norm, one warp per head: reads the fused
// QKV row of token t, normalizes q and k heads (weights [head_dim] f32; null = no norm), rotates
// them, writes q to q_out [T, H, D] and k, v to the NHD caches at slot_mapping[t] (slots < 0
// skipped). Rounds to bf16 where the unfused rms_norm -> rope -> write_kv_cache path does.
struct QkvRopeArgs {
  const void* qkv = nullptr;
  int64_t qkv_stride = 0;  // elements between tokens
  int64_t tokens = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, v_head_dim = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 0.0f;
  const int32_t* positions = nullptr;
  const float* inv_freq = nullptr;
  int rotary_dim = 0;
  float attention_factor = 1.0f;
  bool neox = true;
  const int64_t* slot_mapping = nullptr;
  void* k_cache = nullptr;  // [blocks, block_size, H_kv, D]
  void* v_cache = nullptr;  // [blocks, block_size, H_kv, D_v]
  void* q_out = nullptr;
};
// head_dim and v_head_dim: multiples of 2 up to 512; rotary_dim even, <= head_dim.
// The kernel reads its constants (norm weights, positions, slots, rope frequencies) before its
// PDL wait; LOCUS_CUDA_ROPE_PRELOAD=0 or set_rope_preload(false) (tests) reads them after it.
void set_rope_preload(bool on);
cudaError_t launch_qkv_norm_rope_write_kv(const QkvRopeArgs& args, cudaStream_t stream);
// MLA: cache[slot] = [latent[t], k_pe[t]] (rank + rope elements per slot).
cudaError_t launch_write_mla_cache(const void* latent, int64_t latent_stride, int64_t rank,
                                   const void* k_pe, int64_t k_pe_stride, int64_t rope_dim,
                                   const int64_t* slot_mapping, int64_t tokens, void* cache,
                                   cudaStream_t stream);

}  // namespace locus::cuda

namespace locus::cuda {

// Busy-waits one thread for about `nanoseconds` (gpu_sleep.cu; used by the op profiler).
cudaError_t launch_gpu_sleep(unsigned nanoseconds, cudaStream_t stream);

// Dummy weights made in place: out[i] = low + (high - low) * counter_uniform(stream, i)
// (core/counter_rng.h, identical to the host), rounded to bf16 when round_bf16 (the checkpoint
// dtype), stored as f32 when store_f32 else bf16.
cudaError_t launch_random_uniform(void* out, int64_t n, uint64_t stream, float low, float high,
                                  bool round_bf16, bool store_f32, cudaStream_t cuda_stream);

}  // namespace locus::cuda

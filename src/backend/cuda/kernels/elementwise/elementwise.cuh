// The small memory-bound kernels (see elementwise_launch.h). Each is one pass over its data;
// reductions (norms) use one CTA per row with a block-wide sum in f32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels/elementwise/elementwise_launch.h"
#include "backend/cuda/kernels/pdl.cuh"

// Internal linkage: each .cu that includes this gets its own copy of the kernels it launches.
namespace locus::cuda::elementwise {
namespace {

using bf16 = __nv_bfloat16;

inline int grid_for(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  return static_cast<int>(blocks < 1 ? 1 : blocks);
}

// Sum over the CTA; every thread gets the result. blockDim.x a multiple of 32, <= 1024.
__device__ inline float block_sum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  float total = 0.0f;
  for (int w = 0; w < warps; ++w)
    total += partial[w];
  __syncthreads();  // partial is reused by the next call
  return total;
}

__global__ void gather_rows_kernel(const char* x, int64_t x_rows, int64_t row_bytes,
                                   const int32_t* idx, int64_t num, char* out) {
  const int64_t r = blockIdx.x;
  if (r >= num) return;
  const int32_t src = idx[r];
  char* dst = out + r * row_bytes;
  const bool valid = src >= 0 && src < x_rows;
  const char* s = x + static_cast<int64_t>(valid ? src : 0) * row_bytes;
  if (row_bytes % 16 == 0) {
    for (int64_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x) {
      const uint4 v = valid ? reinterpret_cast<const uint4*>(s)[i] : make_uint4(0, 0, 0, 0);
      reinterpret_cast<uint4*>(dst)[i] = v;
    }
  } else {
    for (int64_t i = threadIdx.x; i < row_bytes; i += blockDim.x)
      dst[i] = valid ? s[i] : 0;
  }
}

// out[t] = sum_j x[index[j, t]] (index -1 skipped), f32 sums in j order; one CTA per t.
__global__ void gather_sum_rows_kernel(const bf16* x, const int32_t* index, int m, int64_t tokens,
                                       int64_t n, bf16* out) {
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    float sum = 0.0f;
    for (int j = 0; j < m; ++j) {
      const int32_t r = index[j * tokens + t];
      if (r >= 0) sum += __bfloat162float(x[static_cast<int64_t>(r) * n + c]);
    }
    out[t * n + c] = __float2bfloat16_rn(sum);
  }
}

__global__ void rms_norm_kernel(RowView x, const float* weight, float eps, bf16* out) {
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  const int64_t i = row / x.dim1;
  const int64_t j = row % x.dim1;
  const bf16* in = static_cast<const bf16*>(x.data) + i * x.stride0 + j * x.stride1;
  bf16* o = out + row * x.n;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < x.n; c += blockDim.x) {
    const float v = __bfloat162float(in[c]);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(x.n) + eps);
  for (int64_t c = threadIdx.x; c < x.n; c += blockDim.x) {
    o[c] = __float2bfloat16_rn(__bfloat162float(in[c]) * inv * weight[c]);
  }
}

// The two halves of an RMSNorm whose rows are split over ranks (elementwise_launch.h).
__global__ void sum_squares_kernel(RowView x, float* out) {
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  const bf16* in = static_cast<const bf16*>(x.data) + row * x.stride0;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < x.n; c += blockDim.x) {
    const float v = __bfloat162float(in[c]);
    ss += v * v;
  }
  ss = block_sum(ss);
  if (threadIdx.x == 0) out[row] = ss;
}

__global__ void split_rms_norm_kernel(RowView x, const float* weight, const float* sum_squares,
                                      float width, float eps, bf16* out) {
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  const bf16* in = static_cast<const bf16*>(x.data) + row * x.stride0;
  bf16* o = out + row * x.n;
  const float inv = rsqrtf(sum_squares[row] / width + eps);
  for (int64_t c = threadIdx.x; c < x.n; c += blockDim.x) {
    o[c] = __float2bfloat16_rn(__bfloat162float(in[c]) * inv * weight[c]);
  }
}

__global__ void add_rms_norm_kernel(const bf16* residual, const bf16* x, int64_t n,
                                    const float* weight, float eps, bf16* residual_out, bf16* out) {
  pdl_launch_dependents();  // the GEMV after us prefetches its weights meanwhile
  const int64_t row = blockIdx.x;
  const bf16* r_in = residual + row * n;
  bf16* r = residual_out + row * n;
  const bf16* xr = x + row * n;
  bf16* o = out + row * n;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const bf16 sum = __float2bfloat16_rn(__bfloat162float(r_in[c]) + __bfloat162float(xr[c]));
    r[c] = sum;
    const float v = __bfloat162float(sum);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(n) + eps);
  // Each thread re-reads only the residual elements it wrote itself: no barrier needed.
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    o[c] = __float2bfloat16_rn(__bfloat162float(r[c]) * inv * weight[c]);
  }
}

// The end of the vectorized norms (n = 8 * blockDim.x): every thread passes its 8 values (as
// rounded to bf16), their sum of squares and its 8 weights; the CTA sums the squares and each
// thread stores its 8 normalized bf16 values at out, rms_norm_kernel's arithmetic per element.
__device__ inline void store_normalized8(const float (&v)[8], float ss, int64_t n, float eps,
                                         float4 w0, float4 w1, bf16* out) {
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(n) + eps);
  const float w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
  uint4 out_bits;
  auto* o2 = reinterpret_cast<__nv_bfloat162*>(&out_bits);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    o2[i] = __floats2bfloat162_rn(v[2 * i] * inv * w[2 * i], v[2 * i + 1] * inv * w[2 * i + 1]);
  *reinterpret_cast<uint4*>(out) = out_bits;
}

// add_rms_norm for rows of n = 8 * blockDim.x elements (decode: one short row, where the
// strided kernel above is all latency): each thread loads its 8 residual, x and weight values
// with 16-byte loads issued together, then one warp-shuffle + shared-memory reduction.
// Same arithmetic per element as add_rms_norm_kernel; only the order of the sum of squares
// differs.
__global__ void add_rms_norm_vec_kernel(const bf16* residual, const bf16* x, int64_t n,
                                        const float* weight, float eps, bf16* residual_out,
                                        bf16* out) {
  pdl_launch_dependents();
  const int64_t base = blockIdx.x * n + threadIdx.x * 8;
  const uint4 rv = *reinterpret_cast<const uint4*>(residual + base);
  const uint4 xv = *reinterpret_cast<const uint4*>(x + base);
  const float4 w0 = reinterpret_cast<const float4*>(weight)[threadIdx.x * 2];
  const float4 w1 = reinterpret_cast<const float4*>(weight)[threadIdx.x * 2 + 1];
  const auto* r2 = reinterpret_cast<const __nv_bfloat162*>(&rv);
  const auto* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
  uint4 sum_bits;
  auto* s2 = reinterpret_cast<__nv_bfloat162*>(&sum_bits);
  float v[8];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(r2[i]);
    const float2 b = __bfloat1622float2(x2[i]);
    s2[i] = __floats2bfloat162_rn(a.x + b.x, a.y + b.y);
    const float2 rounded = __bfloat1622float2(s2[i]);
    v[2 * i] = rounded.x;
    v[2 * i + 1] = rounded.y;
    ss += rounded.x * rounded.x;
    ss += rounded.y * rounded.y;
  }
  *reinterpret_cast<uint4*>(residual_out + base) = sum_bits;
  store_normalized8(v, ss, n, eps, w0, w1, out + base);
}

// embedding + rms_norm for rows of n = 8 * blockDim.x elements (the first layer's input): each
// thread gathers 8 elements of its token's table row with one 16-byte load, writes them to
// residual and normalizes them. Same per-element arithmetic as rms_norm_kernel; only the order
// of the sum of squares differs. Ids outside the table give zero rows, as in gather_rows_kernel.
__global__ void embedding_rms_norm_vec_kernel(const bf16* table, int64_t table_rows,
                                              const int32_t* ids, int64_t n, const float* weight,
                                              float eps, bf16* residual, bf16* out) {
  pdl_launch_dependents();
  const int32_t id = ids[blockIdx.x];
  const int64_t c = threadIdx.x * 8;
  const float4 w0 = reinterpret_cast<const float4*>(weight)[threadIdx.x * 2];
  const float4 w1 = reinterpret_cast<const float4*>(weight)[threadIdx.x * 2 + 1];
  const uint4 xv = id >= 0 && id < table_rows
                       ? *reinterpret_cast<const uint4*>(table + static_cast<int64_t>(id) * n + c)
                       : make_uint4(0, 0, 0, 0);
  const int64_t base = blockIdx.x * n + c;
  *reinterpret_cast<uint4*>(residual + base) = xv;
  const auto* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
  float v[8];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(x2[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
    ss += f.x * f.x;
    ss += f.y * f.y;
  }
  store_normalized8(v, ss, n, eps, w0, w1, out + base);
}

__global__ void rope_kernel(bf16* x, int64_t tokens, int64_t heads, int64_t stride_token,
                            int64_t stride_head, const int32_t* positions, const float* inv_freq,
                            int half, float attention_factor, bool neox) {
  const int64_t t = blockIdx.x;
  if (t >= tokens) return;
  const float pos = static_cast<float>(positions[t]);
  for (int64_t w = threadIdx.x; w < heads * half; w += blockDim.x) {
    const int64_t h = w / half;
    const int i = static_cast<int>(w % half);
    // f32 product as transformers' f32 matmul; sincosf is the accurate (not fast-math) path.
    const float freq = pos * inv_freq[i];
    float s, c;
    sincosf(freq, &s, &c);
    c *= attention_factor;
    s *= attention_factor;
    bf16* row = x + t * stride_token + h * stride_head;
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + half : 2 * i + 1;
    const float x0 = __bfloat162float(row[a]);
    const float x1 = __bfloat162float(row[b]);
    row[a] = __float2bfloat16_rn(x0 * c - x1 * s);
    row[b] = __float2bfloat16_rn(x1 * c + x0 * s);
  }
}

__global__ void silu_and_mul_kernel(const bf16* gate, int64_t gate_stride, const bf16* up,
                                    int64_t up_stride, int64_t rows, int64_t n, bf16* out) {
  const int64_t total = rows * n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / n;
    const int64_t c = e % n;
    const float g = __bfloat162float(gate[r * gate_stride + c]);
    const float u = __bfloat162float(up[r * up_stride + c]);
    out[e] = __float2bfloat16_rn(g / (1.0f + __expf(-g)) * u);
  }
}

template <typename T>
__device__ inline float load_f(const T* p, int64_t i);
template <>
__device__ inline float load_f<bf16>(const bf16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
template <>
__device__ inline float load_f<float>(const float* p, int64_t i) {
  return p[i];
}
template <typename T>
__device__ inline void store_f(T* p, int64_t i, float v);
template <>
__device__ inline void store_f<bf16>(bf16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}
template <>
__device__ inline void store_f<float>(float* p, int64_t i, float v) {
  p[i] = v;
}

template <typename T>
__global__ void add_kernel(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    store_f(out, e, load_f(a, e) + load_f(b, e));
  }
}

template <typename T>
__global__ void add_bias_kernel(T* out, int64_t ld, const float* bias, int64_t rows, int64_t n) {
  const int64_t total = rows * n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = (e / n) * ld + e % n;
    store_f(out, at, load_f(out, at) + bias[e % n]);
  }
}

__global__ void f32_to_bf16_kernel(const float* src, bf16* dst, int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[e] = __float2bfloat16_rn(src[e]);
  }
}

__global__ void bf16_to_f32_kernel(const bf16* src, float* dst, int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[e] = __bfloat162float(src[e]);
  }
}

__global__ void copy_rows_kernel(const bf16* src, int64_t src_stride, bf16* dst, int64_t dst_stride,
                                 int64_t rows, int64_t n) {
  const int64_t total = rows * n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / n;
    const int64_t c = e % n;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  }
}

__global__ void write_kv_cache_kernel(KvWriteArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t slot = a.slot_mapping[t];
  if (slot < 0) return;
  const bf16* k = static_cast<const bf16*>(a.k) + t * a.k_stride_token;
  const bf16* v = static_cast<const bf16*>(a.v) + t * a.v_stride_token;
  bf16* kc = static_cast<bf16*>(a.k_cache) + slot * a.heads * a.head_dim;
  bf16* vc = static_cast<bf16*>(a.v_cache) + slot * a.heads * a.v_head_dim;
  for (int64_t e = threadIdx.x; e < a.heads * a.head_dim; e += blockDim.x) {
    kc[e] = k[(e / a.head_dim) * a.k_stride_head + e % a.head_dim];
  }
  for (int64_t e = threadIdx.x; e < a.heads * a.v_head_dim; e += blockDim.x) {
    vc[e] = v[(e / a.v_head_dim) * a.v_stride_head + e % a.v_head_dim];
  }
}

__global__ void write_mla_cache_kernel(const bf16* latent, int64_t latent_stride, int64_t rank,
                                       const bf16* k_pe, int64_t k_pe_stride, int64_t rope_dim,
                                       const int64_t* slot_mapping, bf16* cache) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;
  bf16* dst = cache + slot * (rank + rope_dim);
  for (int64_t e = threadIdx.x; e < rank + rope_dim; e += blockDim.x) {
    dst[e] = e < rank ? latent[t * latent_stride + e] : k_pe[t * k_pe_stride + (e - rank)];
  }
}

}  // namespace
}  // namespace locus::cuda::elementwise

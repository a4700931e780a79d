// The fused GQA step after the QKV projection (elementwise_launch.h: QkvRopeArgs). One warp per
// (token, head) task: q heads, then k heads, then v heads. The head is staged in f32 shared
// memory so rope can pair any two of its elements.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/cuda/kernels/elementwise/elementwise_launch.h"
#include "backend/cuda/kernels/elementwise/norm_rope_head.cuh"
#include "backend/cuda/kernels/pdl.cuh"

namespace locus::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kMaxHeadDim = 512;

__global__ void __launch_bounds__(kWarps * 32) qkv_norm_rope_write_kv_kernel(QkvRopeArgs a) {
  __shared__ float heads[kWarps][kMaxHeadDim];
  pdl_launch_dependents();  // attention loads its older KV tiles meanwhile
  pdl_wait();               // every input but the positions comes from the QKV projection
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t t = blockIdx.y;
  const int task = blockIdx.x * kWarps + warp;
  const int hq = a.num_heads, hk = a.num_kv_heads, d = a.head_dim;
  if (task >= hq + 2 * hk) return;
  const bf16* row = static_cast<const bf16*>(a.qkv) + t * a.qkv_stride;
  const int64_t slot = a.slot_mapping[t];

  if (task >= hq + hk) {  // v head: a plain copy into the cache
    if (slot < 0) return;
    const int h = task - hq - hk;
    const bf16* src =
        row + static_cast<int64_t>(hq + hk) * d + static_cast<int64_t>(h) * a.v_head_dim;
    bf16* dst = static_cast<bf16*>(a.v_cache) + (slot * hk + h) * a.v_head_dim;
    for (int c = lane; c < a.v_head_dim; c += 32)
      dst[c] = src[c];
    return;
  }
  const bool is_q = task < hq;
  if (!is_q && slot < 0) return;
  const int h = is_q ? task : task - hq;
  const bf16* src = row + static_cast<int64_t>(is_q ? 0 : hq) * d + static_cast<int64_t>(h) * d;
  bf16* dst = is_q ? static_cast<bf16*>(a.q_out) + (t * hq + h) * d
                   : static_cast<bf16*>(a.k_cache) + (slot * hk + h) * d;
  const float* weight = is_q ? a.q_norm : a.k_norm;

  norm_rope_head(src, weight, a.eps, d, static_cast<float>(a.positions[t]), a.inv_freq,
                 a.rotary_dim, a.attention_factor, a.neox, heads[warp], dst, lane);
}

}  // namespace

cudaError_t launch_qkv_norm_rope_write_kv(const QkvRopeArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  if (a.num_heads < 1 || a.num_kv_heads < 1 || a.head_dim < 2 || a.head_dim > kMaxHeadDim ||
      a.head_dim % 2 != 0 || a.v_head_dim < 1 || a.rotary_dim < 2 || a.rotary_dim % 2 != 0 ||
      a.rotary_dim > a.head_dim || a.tokens > 65535 || !a.qkv || !a.positions || !a.inv_freq ||
      !a.slot_mapping || !a.k_cache || !a.v_cache || !a.q_out)
    return cudaErrorInvalidValue;
  const int tasks = a.num_heads + 2 * a.num_kv_heads;
  const dim3 grid(static_cast<unsigned>((tasks + kWarps - 1) / kWarps),
                  static_cast<unsigned>(a.tokens));
  return launch_pdl(qkv_norm_rope_write_kv_kernel, grid, dim3(kWarps * 32), 0, stream, a);
}

}  // namespace locus::cuda

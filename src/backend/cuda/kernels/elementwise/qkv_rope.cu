// The fused GQA step after the QKV projection (elementwise_launch.h: QkvRopeArgs). One warp per
// (token, head) task: q heads, then k heads, then v heads. The head is staged in f32 shared
// memory so rope can pair any two of its elements.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "backend/cuda/kernels/elementwise/elementwise_launch.h"
#include "backend/cuda/kernels/elementwise/norm_rope_head.cuh"
#include "backend/cuda/kernels/pdl.cuh"

namespace locus::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kMaxHeadDim = 512;

// kPreload: the positions, slots and norm / rope constants are read before pdl_wait (only the
// QKV projection's output is the previous kernel's); heads up to kNormRopePreDim.
template <bool kPreload>
__global__ void __launch_bounds__(kWarps * 32) qkv_norm_rope_write_kv_kernel(QkvRopeArgs a) {
  __shared__ float heads[kWarps][kMaxHeadDim];
  pdl_launch_dependents();  // attention loads its older KV tiles meanwhile
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t t = blockIdx.y;
  const int task = blockIdx.x * kWarps + warp;
  const int hq = a.num_heads, hk = a.num_kv_heads, d = a.head_dim;
  if (task >= hq + 2 * hk) {
    pdl_wait();  // every CTA waits (pdl.cuh); a warp without a task has nothing else to do
    return;
  }
  const bool is_q = task < hq;
  const bool is_v = task >= hq + hk;
  const float* weight = is_q ? a.q_norm : a.k_norm;
  // Written by the host before the step, so readable before the wait (as attention's metadata).
  int64_t slot = 0;
  NormRopeConsts consts{};
  if constexpr (kPreload) {
    slot = a.slot_mapping[t];
    if (!is_v && (is_q || slot >= 0)) {
      consts = norm_rope_consts(weight, d, static_cast<float>(a.positions[t]), a.inv_freq,
                                a.rotary_dim, a.attention_factor, lane);
    }
  }
  pdl_wait();  // every input but the positions comes from the QKV projection
  if constexpr (!kPreload) slot = a.slot_mapping[t];
  const bf16* row = static_cast<const bf16*>(a.qkv) + t * a.qkv_stride;

  if (is_v) {  // v head: a plain copy into the cache
    if (slot < 0) return;
    const int h = task - hq - hk;
    const bf16* src =
        row + static_cast<int64_t>(hq + hk) * d + static_cast<int64_t>(h) * a.v_head_dim;
    bf16* dst = static_cast<bf16*>(a.v_cache) + (slot * hk + h) * a.v_head_dim;
    for (int c = lane; c < a.v_head_dim; c += 32)
      dst[c] = src[c];
    return;
  }
  if (!is_q && slot < 0) return;
  const int h = is_q ? task : task - hq;
  const bf16* src = row + static_cast<int64_t>(is_q ? 0 : hq) * d + static_cast<int64_t>(h) * d;
  bf16* dst = is_q ? static_cast<bf16*>(a.q_out) + (t * hq + h) * d
                   : static_cast<bf16*>(a.k_cache) + (slot * hk + h) * d;
  if constexpr (kPreload) {
    norm_rope_head(src, weight != nullptr, consts, a.eps, d, a.rotary_dim, a.neox, heads[warp], dst,
                   lane);
  } else {
    norm_rope_head(src, weight, a.eps, d, static_cast<float>(a.positions[t]), a.inv_freq,
                   a.rotary_dim, a.attention_factor, a.neox, heads[warp], dst, lane);
  }
}

int g_preload = -1;  // -1: LOCUS_CUDA_ROPE_PRELOAD decides

bool preload_enabled() {
  if (g_preload >= 0) return g_preload == 1;
  static const bool on = [] {
    const char* v = std::getenv("LOCUS_CUDA_ROPE_PRELOAD");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

}  // namespace

void set_rope_preload(bool on) {
  g_preload = on ? 1 : 0;
}

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
  const bool preload = a.head_dim <= kNormRopePreDim && preload_enabled();
  return launch_pdl(
      preload ? qkv_norm_rope_write_kv_kernel<true> : qkv_norm_rope_write_kv_kernel<false>, grid,
      dim3(kWarps * 32), 0, stream, a);
}

}  // namespace locus::cuda

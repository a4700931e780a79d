#include <algorithm>

#include "backend/cuda/kernels/prefetch/prefetch_launch.h"

namespace locus::cuda {
namespace {

// One request per 16 KiB: few enough instructions that issuing them takes a few hundred cycles
// per warp, spread over enough SMs that no one copy engine serializes the whole prefetch.
constexpr uint64_t kChunk = 16 * 1024;
constexpr int kThreads = 32;
constexpr int kMaxCtas = 128;

__device__ __forceinline__ void prefetch_bulk(const char* p, uint64_t bytes) {
  const uint32_t size = static_cast<uint32_t>(bytes & ~uint64_t{15});
  if (size == 0) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(size) : "memory");
#else
  (void)p;
#endif
}

__device__ __forceinline__ void prefetch_range(const char* base, uint64_t bytes, uint64_t first,
                                               uint64_t stride) {
  for (uint64_t off = first * kChunk; off < bytes; off += stride * kChunk)
    prefetch_bulk(base + off, min(kChunk, bytes - off));
}

__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(PrefetchSpans spans) {
  const uint64_t thread = blockIdx.x * kThreads + threadIdx.x;
  const uint64_t threads = static_cast<uint64_t>(gridDim.x) * kThreads;
  // Chunks are numbered across the spans so every thread gets a share of each.
  uint64_t skip = 0;
  for (int s = 0; s < spans.count; ++s) {
    const uint64_t chunks = (spans.bytes[s] + kChunk - 1) / kChunk;
    const uint64_t first = (thread + threads - skip % threads) % threads;
    prefetch_range(static_cast<const char*>(spans.data[s]), spans.bytes[s], first, threads);
    skip += chunks;
  }
}

// grid (ctas_per_id, num_ids).
__global__ void __launch_bounds__(kThreads)
    l2_prefetch_experts_kernel(const int32_t* __restrict__ ids, const void* const* table,
                               int num_experts, uint64_t bytes) {
  const int id = ids[blockIdx.y];
  if (id < 0 || id >= num_experts) return;
  const uint64_t thread = blockIdx.x * kThreads + threadIdx.x;
  const uint64_t threads = static_cast<uint64_t>(gridDim.x) * kThreads;
  prefetch_range(static_cast<const char*>(table[id]), bytes, thread, threads);
}

uint64_t ctas_for(uint64_t bytes) {
  const uint64_t chunks = (bytes + kChunk - 1) / kChunk;
  return std::clamp<uint64_t>((chunks + kThreads - 1) / kThreads, 1, kMaxCtas);
}

}  // namespace

cudaError_t launch_l2_prefetch(const PrefetchSpans& spans, cudaStream_t stream) {
  if (spans.count < 0 || spans.count > kPrefetchMaxSpans) return cudaErrorInvalidValue;
  uint64_t total = 0;
  for (int s = 0; s < spans.count; ++s)
    total += spans.bytes[s];
  if (total == 0) return cudaSuccess;
  l2_prefetch_kernel<<<static_cast<unsigned>(ctas_for(total)), kThreads, 0, stream>>>(spans);
  return cudaGetLastError();
}

cudaError_t launch_l2_prefetch_experts(const int32_t* ids, int num_ids, const void* const* table,
                                       int num_experts, uint64_t bytes, cudaStream_t stream) {
  if (num_ids <= 0 || bytes == 0) return cudaSuccess;
  if (num_ids > 65535) return cudaErrorInvalidValue;
  const uint64_t per_id =
      std::max<uint64_t>(1, std::min<uint64_t>(ctas_for(bytes), kMaxCtas / num_ids));
  const dim3 grid(static_cast<unsigned>(per_id), static_cast<unsigned>(num_ids));
  l2_prefetch_experts_kernel<<<grid, kThreads, 0, stream>>>(ids, table, num_experts, bytes);
  return cudaGetLastError();
}

}  // namespace locus::cuda

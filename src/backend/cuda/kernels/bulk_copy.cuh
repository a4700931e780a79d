// The sm_90 bulk copy engine (TMA, one-dimensional form) and the shared-memory barriers it
// completes on. One thread asks for a contiguous global span to be copied into shared memory;
// the copy engine moves it while every thread of the block does other work, and the bytes
// count down a transaction counter on an mbarrier that consumers wait on. This is how a single
// CTA keeps 100+ KB of loads in flight without tying up registers.
#pragma once

#include <cstdint>

namespace locus::cuda::bulk {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
#endif
}

// Makes initialized barriers visible to the copy engine (the async proxy); follow with a
// block-wide barrier before any thread uses them.
__device__ __forceinline__ void mbar_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// One arrival that also announces `bytes` of copies the phase must wait for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
#endif
}

// Blocks until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}

// An L2 policy for data read once (weights streamed per step): evicted first, so it does not
// push activations and the KV cache out of L2.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared
// memory and counts them against `bar`'s current phase.
__device__ __forceinline__ void copy_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                         uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
#endif
}

// Synchronizes the first `threads` threads of the block (a multiple of 32) without involving
// the others: named barrier 1 (0 is __syncthreads).
__device__ __forceinline__ void named_sync(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

}  // namespace locus::cuda::bulk

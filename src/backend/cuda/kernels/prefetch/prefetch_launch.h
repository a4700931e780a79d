// L2 prefetch of weights a later kernel of the step will read (Ops::prefetch). Decode kernels
// are short, and each leaves HBM idle while it ramps up, waits on its inputs and drains; a
// prefetch launched on a side stream fills that idle time, so the consumer reads from L2.
// Fire-and-forget: the kernel only issues cp.async.bulk.prefetch.L2 requests and exits; it
// reads nothing any other kernel writes except the expert ids, and writes nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace locus::cuda {

inline constexpr int kPrefetchMaxSpans = 8;
struct PrefetchSpans {
  const void* data[kPrefetchMaxSpans] = {};  // 16-byte aligned
  uint64_t bytes[kPrefetchMaxSpans] = {};    // a trailing part under 16 bytes is skipped
  int count = 0;
};

// Prefetches every span into L2.
cudaError_t launch_l2_prefetch(const PrefetchSpans& spans, cudaStream_t stream);

// Prefetches the `bytes` at table[ids[i]] for i < num_ids (the weights of the experts a router
// chose; ids read on the device, so this needs no host synchronization). ids outside
// [0, num_experts) are skipped.
cudaError_t launch_l2_prefetch_experts(const int32_t* ids, int num_ids, const void* const* table,
                                       int num_experts, uint64_t bytes, cudaStream_t stream);

}  // namespace locus::cuda

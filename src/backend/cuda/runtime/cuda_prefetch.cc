// Ops::prefetch on the CUDA backend: L2 prefetches on a side stream (kernels/prefetch/).
#include <cstdlib>

#include "backend/cuda/kernels/prefetch/prefetch_launch.h"
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/cuda/runtime/cuda_status.h"

namespace locus {

Status CudaBackend::create_prefetch_stream() {
  // Off by default until the H200 A/B says which prefetches pay (docs/benchmarks.md).
  if (const char* env = std::getenv("LOCUS_CUDA_PREFETCH"); env != nullptr) {
    prefetch_mask_ = std::atoi(env) & (kPrefetchNamed | kPrefetchExperts);
  }
  if (prefetch_mask_ == 0) return Status::ok();
  LOCUS_CUDA_OK("cudaStreamCreate",
                cudaStreamCreateWithFlags(&prefetch_stream_, cudaStreamNonBlocking));
  LOCUS_CUDA_OK("cudaEventCreate",
                cudaEventCreateWithFlags(&prefetch_fork_, cudaEventDisableTiming));
  LOCUS_CUDA_OK("cudaEventCreate",
                cudaEventCreateWithFlags(&prefetch_join_, cudaEventDisableTiming));
  return Status::ok();
}

Status CudaBackend::fork_prefetch() {
  LOCUS_CUDA_OK("cudaEventRecord", cudaEventRecord(prefetch_fork_, stream_));
  LOCUS_CUDA_OK("cudaStreamWaitEvent", cudaStreamWaitEvent(prefetch_stream_, prefetch_fork_, 0));
  prefetch_pending_ = true;
  return Status::ok();
}

Status CudaBackend::join_prefetch() {
  if (!prefetch_pending_) return Status::ok();
  prefetch_pending_ = false;
  LOCUS_CUDA_OK("cudaEventRecord", cudaEventRecord(prefetch_join_, prefetch_stream_));
  return cuda_status("cudaStreamWaitEvent", cudaStreamWaitEvent(stream_, prefetch_join_, 0));
}

Status CudaBackend::do_prefetch(std::span<const LinearWeight* const> weights) {
  if ((prefetch_mask_ & kPrefetchNamed) == 0) return Status::ok();
  cuda::PrefetchSpans spans;
  for (const LinearWeight* w : weights) {
    if (w == nullptr || !w->weight.defined() || w->weight.device() != device()) continue;
    if (spans.count == cuda::kPrefetchMaxSpans) break;
    spans.data[spans.count] = w->weight.raw_data();
    spans.bytes[spans.count] = w->weight.nbytes();
    ++spans.count;
  }
  if (spans.count == 0) return Status::ok();
  LOCUS_RETURN_IF_ERROR(fork_prefetch());
  return cuda_status("prefetch", cuda::launch_l2_prefetch(spans, prefetch_stream_));
}

Status CudaBackend::prefetch_experts(const int32_t* ids, int num_ids, const void* const* table,
                                     int num_experts, uint64_t bytes) {
  LOCUS_RETURN_IF_ERROR(fork_prefetch());
  return cuda_status(
      "prefetch experts",
      cuda::launch_l2_prefetch_experts(ids, num_ids, table, num_experts, bytes, prefetch_stream_));
}

}  // namespace locus

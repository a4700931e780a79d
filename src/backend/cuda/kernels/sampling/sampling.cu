// Launcher of the sampling kernel: checks sizes and launches one CTA per row.
#include "backend/cuda/kernels/sampling/sampling.cuh"

namespace locus::cuda {

size_t sample_rows_workspace_bytes(int /*num_rows*/, int /*vocab*/) {
  return 0;  // all scratch is shared memory
}

cudaError_t launch_sample_rows(const float* logits, int64_t ld, int num_rows, int vocab,
                               const SampleRowParams* params, void* /*workspace*/, int32_t* out,
                               cudaStream_t stream) {
  if (num_rows < 0 || vocab < 1 || ld < vocab) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  if (logits == nullptr || params == nullptr || out == nullptr) return cudaErrorInvalidValue;
  // A function attribute, not a stream operation: allowed while a graph is being captured.
  const cudaError_t err = cudaFuncSetAttribute(sampling::sample_rows_kernel,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(sampling::kSharedBytes));
  if (err != cudaSuccess) return err;
  sampling::sample_rows_kernel<<<num_rows, sampling::kThreads, sampling::kSharedBytes, stream>>>(
      logits, ld, vocab, params, out);
  return cudaGetLastError();
}

}  // namespace locus::cuda

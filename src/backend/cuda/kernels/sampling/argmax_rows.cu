// Launcher of the split argmax over greedy rows (argmax_rows.cuh).
#include "backend/cuda/kernels/sampling/argmax_rows.cuh"

namespace locus::cuda {
namespace {

int slices_for(int vocab) {
  return (vocab + argmax::kSliceLen - 1) / argmax::kSliceLen;
}

}  // namespace

size_t argmax_rows_partials_bytes(int num_rows, int vocab) {
  if (num_rows <= 0 || vocab <= 0) return 0;
  return static_cast<size_t>(num_rows) * static_cast<size_t>(slices_for(vocab)) *
         sizeof(argmax::Best);
}

cudaError_t launch_argmax_rows(const float* logits, int64_t ld, int num_rows, int vocab,
                               int* counters, void* partials, int32_t* out, cudaStream_t stream) {
  if (num_rows < 0 || vocab < 1 || ld < vocab || num_rows > 65535) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  if (logits == nullptr || counters == nullptr || partials == nullptr || out == nullptr)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(slices_for(vocab)), static_cast<unsigned>(num_rows));
  argmax::argmax_rows_kernel<<<grid, argmax::kThreads, 0, stream>>>(
      logits, ld, vocab, counters, static_cast<argmax::Best*>(partials), out);
  return cudaGetLastError();
}

}  // namespace locus::cuda
